//! API keys and scopes on every route, and on /metrics.

use axum::http::Method;
use lockgate::access::MetricsAuth;

use crate::support::keys::{DEPLOYER_KEY, READER_KEY, SCRAPER_KEY, app_with_keys, call};

/// Extra request headers.
type Headers<'a> = [(&'a str, &'a str)];

/// Every lock route answers 401 without a key or with an unknown one, 403 for a key outside
/// its scopes (wrong operation, or a name outside its prefixes), and serves a key within
/// them. Probes stay open; the OpenAPI document needs any valid key.
#[tokio::test]
async fn every_route_needs_a_key_and_a_scope() {
    let app = app_with_keys(MetricsAuth::Open);
    let token_header = [("lock-token", "AAAAAAAAAAAAAAAAAAAAAA.1")];
    let routes: [(Method, &str, &Headers); 11] = [
        (Method::POST, "/locks/deploy:web", &[]),
        (Method::PATCH, "/locks/deploy:web", &token_header),
        (Method::DELETE, "/locks/deploy:web", &token_header),
        (Method::GET, "/locks/deploy:web", &[]),
        (Method::HEAD, "/locks/deploy:web", &[]),
        (Method::POST, "/locks/deploy:web/hold", &[]),
        (Method::POST, "/semaphores/deploy:web", &[]),
        (Method::PATCH, "/semaphores/deploy:web", &token_header),
        (Method::DELETE, "/semaphores/deploy:web", &token_header),
        (Method::GET, "/semaphores/deploy:web", &[]),
        (Method::POST, "/semaphores/deploy:web/hold", &[]),
    ];
    for (method, path, headers) in &routes {
        let what = format!("{method} {path}");
        for key in [None, Some("not-a-known-key-at-all"), Some("")] {
            let (status, response_headers, body) =
                call(&app, method.clone(), path, key, headers).await;
            assert_eq!(status, 401, "{what} with {key:?}: {body}");
            assert_eq!(
                response_headers["www-authenticate"], "Bearer realm=\"lockgate\"",
                "{what}"
            );
            if *method != Method::HEAD {
                assert!(body.contains("/problems/unauthorized"), "{what}: {body}");
                assert!(!body.contains("not-a-known-key"), "{what} echoes the key");
            }
        }
        // Outside the deployer's prefixes.
        let elsewhere = path.replace("deploy:web", "jobs:1");
        let (status, _, body) = call(
            &app,
            method.clone(),
            &elsewhere,
            Some(DEPLOYER_KEY),
            headers,
        )
        .await;
        assert_eq!(status, 403, "{method} {elsewhere}: {body}");
        // Within them: the route works (whatever the lock's state).
        let (status, _, body) = call(&app, method.clone(), path, Some(DEPLOYER_KEY), headers).await;
        assert!(![401, 403].contains(&status), "{what}: {status} {body}");
        // The reader may inspect any name, and nothing else.
        let (status, _, body) = call(&app, method.clone(), path, Some(READER_KEY), headers).await;
        if [Method::GET, Method::HEAD].contains(method) {
            assert!(![401, 403].contains(&status), "{what}: {status} {body}");
        } else {
            assert_eq!(status, 403, "{what} as reader: {body}");
            assert!(body.contains("/problems/forbidden"), "{body}");
        }
    }
    for open in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(
            call(&app, Method::GET, open, None, &[]).await.0,
            200,
            "{open}"
        );
    }
    assert_eq!(
        call(&app, Method::GET, "/openapi.json", None, &[]).await.0,
        401
    );
    assert_eq!(
        call(&app, Method::GET, "/openapi.json", Some(SCRAPER_KEY), &[])
            .await
            .0,
        200
    );
    // Unknown routes give nothing away without a key.
    assert_eq!(call(&app, Method::GET, "/admin", None, &[]).await.0, 401);
}

/// With `--metrics-auth required`, /metrics needs a key allowed to read metrics.
#[tokio::test]
async fn metrics_can_require_a_key() {
    let app = app_with_keys(MetricsAuth::Required);
    assert_eq!(call(&app, Method::GET, "/metrics", None, &[]).await.0, 401);
    assert_eq!(
        call(&app, Method::GET, "/metrics", Some(DEPLOYER_KEY), &[])
            .await
            .0,
        403
    );
    let (status, headers, body) = call(&app, Method::GET, "/metrics", Some(SCRAPER_KEY), &[]).await;
    assert_eq!(status, 200);
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    assert!(body.contains("lockgate_requests_total"), "{body}");
    assert_eq!(call(&app, Method::GET, "/healthz", None, &[]).await.0, 200);
}

/// A multi-lock's names are checked one by one against the key's prefixes: a set with one
/// name outside them is refused (403) whole; the reader may not take or release sets.
#[tokio::test]
async fn every_name_of_a_multi_lock_needs_the_scope() {
    let app = app_with_keys(MetricsAuth::Open);
    let token = [("lock-token", "AAAAAAAAAAAAAAAAAAAAAA.1")];
    let outside = "/locks?name=deploy:web&name=jobs:1";
    let inside = "/locks?name=deploy:web&name=deploy:db";
    for method in [Method::PATCH, Method::DELETE] {
        let (status, _, body) =
            call(&app, method.clone(), outside, Some(DEPLOYER_KEY), &token).await;
        assert_eq!(status, 403, "{method} {outside}: {body}");
        let (status, _, body) =
            call(&app, method.clone(), inside, Some(DEPLOYER_KEY), &token).await;
        assert!(
            ![401, 403].contains(&status),
            "{method} {inside}: {status} {body}"
        );
        let (status, _, body) = call(&app, method.clone(), inside, Some(READER_KEY), &token).await;
        assert_eq!(status, 403, "{method} {inside} as reader: {body}");
        let (status, _, body) = call(&app, method.clone(), inside, None, &token).await;
        assert_eq!(status, 401, "{method} {inside} without a key: {body}");
    }
}

/// `GET /locks?name=…` (a multi-lock's `Location`) reads every name it is given: each needs
/// the key's inspect scope.
#[tokio::test]
async fn every_name_read_by_a_set_listing_needs_the_scope() {
    let app = app_with_keys(MetricsAuth::Open);
    let outside = "/locks?name=deploy:web&name=jobs:1";
    let inside = "/locks?name=deploy:web&name=deploy:db";
    let (status, _, body) = call(&app, Method::GET, outside, Some(DEPLOYER_KEY), &[]).await;
    assert_eq!(status, 403, "{outside}: {body}");
    for key in [DEPLOYER_KEY, READER_KEY] {
        let (status, _, body) = call(&app, Method::GET, inside, Some(key), &[]).await;
        assert_eq!(status, 200, "{inside}: {body}");
    }
    let (status, _, body) = call(&app, Method::GET, outside, Some(READER_KEY), &[]).await;
    assert_eq!(status, 200, "the reader may inspect every name: {body}");
    let (status, _, body) = call(&app, Method::GET, inside, None, &[]).await;
    assert_eq!(status, 401, "without a key: {body}");
}
