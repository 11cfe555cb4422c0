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

/// docs/security.md's table, route → what it does → operations (listings aside: they filter,
/// see `every_name_read_by_a_set_listing_needs_the_scope`): for each row, a key with
/// exactly the operations named gets through the authorization (whatever the lock's state
/// answers), and a key with every operation but one of them is refused with 403. A re-entry
/// (an acquire presenting a `Lock-Token`) sets the lease anew, so it needs `renew` as well
/// (issue 49: a key without `renew` stretched its lease to an hour by re-entering).
#[tokio::test]
async fn each_route_needs_the_operations_of_what_it_does() {
    use axum::body::Body;
    use axum::http::Request;
    use lockgate::access::ApiKeys;
    use lockgate::config::BackendChoice;
    use tower::ServiceExt;

    const LOCK: &str = "AAAAAAAAAAAAAAAAAAAAAA.1";
    const REENTRANT: &str = "AAAAAAAAAAAAAAAAAAAAAAr.1";
    const SET: &str = "AAAAAAAAAAAAAAAAAAAAAAm_AAAAA.1";
    const OPERATIONS: [&str; 6] = ["acquire", "renew", "release", "revoke", "inspect", "hold"];
    let set_body = r#"{"names": ["t:a", "t:b"]}"#;
    /// Method, path, `Lock-Token`, body, operations needed.
    type Row<'a> = (Method, &'a str, Option<&'a str>, &'a str, &'a [&'a str]);
    let rows: [Row; 21] = [
        (Method::POST, "/locks/t:a", None, "{}", &["acquire"]),
        (
            Method::POST,
            "/locks/t:a",
            Some(REENTRANT),
            r#"{"reentrant": true}"#,
            &["acquire", "renew"],
        ),
        (Method::PATCH, "/locks/t:a", Some(LOCK), "{}", &["renew"]),
        (Method::DELETE, "/locks/t:a", Some(LOCK), "", &["release"]),
        (
            Method::DELETE,
            "/locks/t:a?force=true",
            None,
            "",
            &["revoke"],
        ),
        (Method::GET, "/locks/t:a", None, "", &["inspect"]),
        (Method::HEAD, "/locks/t:a", None, "", &["inspect"]),
        (Method::POST, "/locks/t:h/hold", None, "{}", &["hold"]),
        (Method::GET, "/locks/t:a/events", None, "", &["inspect"]),
        (
            Method::GET,
            "/locks/events?prefix=t:",
            None,
            "",
            &["inspect"],
        ),
        (Method::POST, "/locks", None, set_body, &["acquire"]),
        (
            Method::POST,
            "/locks?hold=true",
            None,
            r#"{"names": ["t:c", "t:d"]}"#,
            &["hold"],
        ),
        (
            Method::PATCH,
            "/locks?name=t:a&name=t:b",
            Some(SET),
            "{}",
            &["renew"],
        ),
        (
            Method::DELETE,
            "/locks?name=t:a&name=t:b",
            Some(SET),
            "",
            &["release"],
        ),
        (
            Method::DELETE,
            "/locks?name=t:a&name=t:b&force=true",
            Some(SET),
            "",
            &[],
        ),
        (
            Method::POST,
            "/semaphores/t:s",
            None,
            r#"{"permits": 2}"#,
            &["acquire"],
        ),
        (
            Method::PATCH,
            "/semaphores/t:s",
            Some(LOCK),
            "{}",
            &["renew"],
        ),
        (
            Method::DELETE,
            "/semaphores/t:s",
            Some(LOCK),
            "",
            &["release"],
        ),
        (
            Method::DELETE,
            "/semaphores/t:s?force=true",
            Some(LOCK),
            "",
            &["revoke"],
        ),
        (Method::GET, "/semaphores/t:s", None, "", &["inspect"]),
        (
            Method::POST,
            "/semaphores/t:s2/hold",
            None,
            r#"{"permits": 2}"#,
            &["hold"],
        ),
    ];
    // One key per set of operations a row needs, and one per operation left out.
    let mut keys = Vec::new();
    let mut key_of = |operations: Vec<&str>| {
        let key = format!("key-{:02}-0123456789abcdef", keys.len());
        keys.push(serde_json::json!({
            "name": format!("k{}", keys.len()),
            "key": key,
            "prefixes": ["t:"],
            "operations": operations,
        }));
        key
    };
    let plan: Vec<_> = rows
        .iter()
        .map(|(method, path, token, body, needs)| {
            // A row that needs nothing is refused whatever the key: given every operation.
            let exact = key_of(if needs.is_empty() {
                OPERATIONS.to_vec()
            } else {
                needs.to_vec()
            });
            let without: Vec<(&str, String)> = needs
                .iter()
                .map(|left_out| {
                    let others = OPERATIONS.into_iter().filter(|op| op != left_out).collect();
                    (*left_out, key_of(others))
                })
                .collect();
            (
                method.clone(),
                *path,
                *token,
                *body,
                needs.is_empty(),
                exact,
                without,
            )
        })
        .collect();
    let mut config = crate::support::gateway::config(BackendChoice::Memory);
    config.api_keys =
        Some(ApiKeys::from_json(&serde_json::Value::from(keys).to_string()).expect("keys"));
    let app = lockgate::app::app(&config).expect("app");
    let status = |method: Method, path: &str, token: Option<&str>, body: &str, key: &str| {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {key}"));
        if let Some(token) = token {
            request = request.header("lock-token", token);
        }
        if !body.is_empty() {
            request = request.header("content-type", "application/json");
        }
        let request = request.body(Body::from(body.to_owned())).expect("request");
        let app = app.clone();
        // The status only: a stream's body is never read to its end.
        async move {
            app.oneshot(request)
                .await
                .expect("infallible")
                .status()
                .as_u16()
        }
    };
    for (method, path, token, body, refused, exact, without) in plan {
        let what = format!("{method} {path} (token: {})", token.is_some());
        let through = status(method.clone(), path, token, body, &exact).await;
        if refused {
            assert_eq!(through, 400, "{what}: does nothing, whatever the key");
            continue;
        }
        assert!(
            ![401, 403].contains(&through),
            "{what} with exactly its operations: {through}"
        );
        for (left_out, key) in without {
            let refused = status(method.clone(), path, token, body, &key).await;
            assert_eq!(refused, 403, "{what} without {left_out}");
        }
    }
}
