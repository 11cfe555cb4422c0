//! Operating lockgate: API keys and scopes on every route, metrics, request ids, the
//! concurrency limit and request timeout, graceful shutdown of the real binary, what its logs
//! never contain, TLS with an ACL user to Redis, and requests larger than the HTTP server's
//! first read.

use std::collections::HashMap;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request};
use http_body_util::BodyExt;
use lockgate::auth::ApiKeys;
use lockgate::config::{BackendChoice, MetricsAuth};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

use crate::support::gateway::{Gateway, config, redis_config};
use crate::support::process::ServerProcess;
use crate::support::proxy::LatencyProxy;
use crate::support::redis::RedisServer;
use crate::support::{Lines, assert_problem, eventually, key_exists, status_json};

const DEPLOYER_KEY: &str = "deployer-key-0123456789";
const READER_KEY: &str = "reader-key-0123456789";
const SCRAPER_KEY: &str = "scraper-key-0123456789";
const KEYS: &str = r#"[
    {"name": "deployer", "key": "deployer-key-0123456789", "prefixes": ["deploy:"]},
    {"name": "reader", "key": "reader-key-0123456789", "prefixes": [""], "operations": ["inspect"]},
    {"name": "scraper", "key": "scraper-key-0123456789", "prefixes": [], "operations": ["metrics"]}
]"#;

fn token(body: &Value) -> String {
    body["token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token in {body}"))
        .to_owned()
}

/// Extra request headers.
type Headers<'a> = [(&'a str, &'a str)];

fn app_with_keys(metrics_auth: MetricsAuth) -> Router {
    let mut config = config(BackendChoice::Memory);
    config.api_keys = Some(ApiKeys::from_json(KEYS).expect("valid keys"));
    config.metrics_auth = metrics_auth;
    lockgate::app(&config).expect("valid config")
}

/// Status, headers and body text of one in-process request.
async fn call(
    app: &Router,
    method: Method,
    path: &str,
    key: Option<&str>,
    headers: &[(&str, &str)],
) -> (u16, axum::http::HeaderMap, String) {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(key) = key {
        req = req.header("authorization", format!("Bearer {key}"));
    }
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let response = app
        .clone()
        .oneshot(req.body(Body::empty()).expect("request"))
        .await
        .expect("infallible");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

/// Every lock route answers 401 without a key or with an unknown one, 403 for a key outside
/// its scopes (wrong operation, or a name outside its prefixes), and serves a key within
/// them. Probes stay open; the OpenAPI document needs any valid key.
#[tokio::test]
async fn every_route_needs_a_key_and_a_scope() {
    let app = app_with_keys(MetricsAuth::Open);
    let token_header = [("lock-token", "AAAAAAAAAAAAAAAAAAAAAA")];
    let routes: [(Method, &str, &Headers); 6] = [
        (Method::POST, "/locks/deploy:web", &[]),
        (Method::PATCH, "/locks/deploy:web", &token_header),
        (Method::DELETE, "/locks/deploy:web", &token_header),
        (Method::GET, "/locks/deploy:web", &[]),
        (Method::HEAD, "/locks/deploy:web", &[]),
        (Method::POST, "/locks/deploy:web/hold", &[]),
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

/// Every answer carries a request id: the client's when it sent a sensible one, else a new one.
#[tokio::test]
async fn request_ids_are_echoed_or_generated() {
    let app = lockgate::app(&config(BackendChoice::Memory)).expect("valid config");
    let (_, headers, _) = call(
        &app,
        Method::GET,
        "/healthz",
        None,
        &[("x-request-id", "trace-42")],
    )
    .await;
    assert_eq!(headers["x-request-id"], "trace-42");
    let (_, first, _) = call(&app, Method::POST, "/locks/a", None, &[]).await;
    let (_, second, _) = call(&app, Method::GET, "/nowhere", None, &[("x-request-id", "")]).await;
    let (first, second) = (&first["x-request-id"], &second["x-request-id"]);
    assert!(!first.is_empty() && !second.is_empty());
    assert_ne!(first, second);
}

/// The metrics as a map from series (name and labels) to value.
async fn scrape(gw: &Gateway) -> HashMap<String, f64> {
    let text = gw
        .http
        .get(gw.url("/metrics"))
        .send()
        .await
        .expect("scrape")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

fn requests(metrics: &HashMap<String, f64>, operation: &str, outcome: &str) -> f64 {
    let series =
        format!("lockgate_requests_total{{operation=\"{operation}\",outcome=\"{outcome}\"}}");
    metrics.get(&series).copied().unwrap_or(0.0)
}

/// Metrics follow the operations: requests by operation and outcome, latency histograms,
/// Redis round trips, waiters, hold streams and backend errors; no lock name or token in them.
#[tokio::test]
async fn metrics_change_as_operations_happen() {
    let mut redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let before = scrape(&gw).await;
    assert_eq!(requests(&before, "acquire", "acquired"), 0.0);

    let (status, grant) = status_json(gw.acquire("metered:1", None).await).await;
    assert_eq!(status, 201);
    let holder = token(&grant);
    assert_eq!(gw.acquire("metered:1", None).await.status(), 409);
    let (_, other) = status_json(gw.acquire("metered:2", None).await).await;
    assert_eq!(gw.release("metered:1", &token(&other)).await.status(), 409);
    assert_eq!(
        gw.renew("metered:1", &holder, json!({"ttl_ms": 10000}))
            .await
            .status(),
        200
    );
    assert_eq!(gw.inspect("metered:1").await.status(), 200);
    assert_eq!(gw.release("metered:1", &holder).await.status(), 204);
    assert_eq!(gw.release("metered:1", &holder).await.status(), 404);

    let after = scrape(&gw).await;
    for (operation, outcome, count) in [
        ("acquire", "acquired", 2.0),
        ("acquire", "held", 1.0),
        ("release", "not-owner", 1.0),
        ("renew", "renewed", 1.0),
        ("inspect", "inspected", 1.0),
        ("release", "released", 1.0),
        ("release", "not-held", 1.0),
    ] {
        assert_eq!(
            requests(&after, operation, outcome),
            count,
            "{operation} {outcome}"
        );
    }
    assert_eq!(
        after["lockgate_request_duration_seconds_count{operation=\"acquire\"}"],
        3.0
    );
    // Scripts, or native commands where the server has them (Valkey: release and renew).
    let round_trips = |call: &str| {
        after
            .get(&format!(
                "lockgate_redis_roundtrip_seconds_count{{call=\"{call}\"}}"
            ))
            .copied()
            .unwrap_or(0.0)
    };
    assert!(round_trips("script") + round_trips("command") >= 8.0);
    assert_eq!(after["lockgate_waiters"], 0.0);
    assert_eq!(after["lockgate_hold_streams"], 0.0);

    // A waiter and a hold stream show in the gauges while they last.
    let (_, blocker) = status_json(gw.acquire("metered:2b", None).await).await;
    let waiter = {
        let http = gw.http.clone();
        let url = gw.url("/locks/metered:2b");
        tokio::spawn(async move { http.post(url).json(&json!({"wait_ms": 10000})).send().await })
    };
    let stream = gw
        .http
        .post(gw.url("/locks/metered:3/hold"))
        .send()
        .await
        .expect("hold");
    let mut lines = Lines::new(stream);
    assert_eq!(lines.next().await.expect("acquired")["event"], "acquired");
    eventually(
        Duration::from_secs(5),
        "the gauges count the waiter and the stream",
        || async {
            let now = scrape(&gw).await;
            (now["lockgate_waiters"] == 1.0 && now["lockgate_hold_streams"] == 1.0).then_some(())
        },
    )
    .await;
    drop(lines);
    assert_eq!(
        gw.release("metered:2b", &token(&blocker)).await.status(),
        204
    );
    assert_eq!(waiter.await.expect("join").expect("waiter").status(), 201);
    eventually(Duration::from_secs(5), "the gauges fall back", || async {
        let now = scrape(&gw).await;
        (now["lockgate_waiters"] == 0.0 && now["lockgate_hold_streams"] == 0.0).then_some(())
    })
    .await;

    // Backend errors are counted.
    redis.stop();
    assert_eq!(gw.acquire("metered:4", None).await.status(), 503);
    let down = scrape(&gw).await;
    let errors: f64 = down
        .iter()
        .filter(|(series, _)| series.starts_with("lockgate_backend_errors_total"))
        .map(|(_, value)| value)
        .sum();
    assert!(errors >= 1.0, "{down:?}");
    assert!(requests(&down, "acquire", "backend-unavailable") >= 1.0);
    for series in down.keys() {
        assert!(!series.contains("metered"), "a lock name in {series}");
        assert!(!series.contains(&holder), "a token in {series}");
    }
}

/// Beyond the concurrency limit requests answer 503 `overloaded` with Retry-After (probes
/// still answer); a client that sends its head and then stalls holds a slot only until the
/// request timeout.
#[tokio::test]
async fn the_concurrency_limit_and_the_request_timeout_protect_the_gateway() {
    let mut config = config(BackendChoice::Memory);
    config.limits.max_waiters = 2;
    config.max_concurrent_requests = 3;
    config.request_timeout = Duration::from_millis(1500);
    let gw = Gateway::start(config).await;
    let addr = gw.url("").trim_start_matches("http://").to_owned();
    // Three clients announce a body and never send it: each holds a slot.
    let mut stalled = Vec::new();
    for i in 0..3 {
        let mut stream = tokio::net::TcpStream::connect(&addr)
            .await
            .expect("connect");
        let head =
            format!("POST /locks/stall:{i} HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{{");
        stream.write_all(head.as_bytes()).await.expect("write head");
        stalled.push(stream);
    }
    let (status, body) = eventually(Duration::from_secs(1), "the limit is reached", || async {
        let response = gw.inspect("free").await;
        let retry_after = response.headers().get("retry-after").cloned();
        let (status, body) = status_json(response).await;
        (status == 503).then(|| {
            assert!(retry_after.is_some(), "{body}");
            (status, body)
        })
    })
    .await;
    assert_problem(status, &body, 503, "overloaded");
    assert_eq!(
        gw.http
            .get(gw.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // The stalled requests time out and give their slots back.
    for stream in &mut stalled {
        let mut answer = vec![0u8; 1024];
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
            .await
            .expect("an answer within the request timeout")
            .expect("read");
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains("/problems/timeout"), "{answer}");
    }
    assert_eq!(gw.inspect("free").await.status(), 404);
}

/// hyper reads a connection into a 1 KiB buffer at first (vendor/hyper/LOCKGATE.md). Larger
/// heads and bodies, and several requests pipelined in one write, are still read whole.
#[tokio::test]
async fn requests_larger_than_the_first_read_buffer_are_read_whole() {
    let gw = Gateway::start(config(BackendChoice::Memory)).await;
    let addr = gw.url("").trim_start_matches("http://").to_owned();
    let body = format!(r#"{{"ttl_ms": 60000}}{}"#, " ".repeat(3000));
    let acquire = format!(
        "POST /locks/large:head HTTP/1.1\r\nhost: x\r\nx-padding: {}\r\ncontent-length: {}\r\n\r\n{body}",
        "p".repeat(6000),
        body.len()
    );
    let inspect = "GET /locks/large:head HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    let mut stream = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    stream
        .write_all(format!("{acquire}{inspect}").as_bytes())
        .await
        .expect("write both requests at once");
    let mut answers = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answers))
        .await
        .expect("both answers, then the connection closes")
        .expect("read");
    let answers = String::from_utf8_lossy(&answers);
    let statuses: Vec<&str> = answers
        .match_indices("HTTP/1.1 ")
        .map(|(at, _)| &answers[at + 9..at + 12])
        .collect();
    assert_eq!(statuses, ["201", "200"], "{answers}");
    assert!(answers.contains(r#""held":true"#), "{answers}");
}

/// SIGTERM while a request is in flight (Redis answers slowly): the request completes, then
/// the process exits 0.
#[tokio::test]
async fn sigterm_lets_an_in_flight_request_finish() {
    let redis = RedisServer::start();
    let proxy = LatencyProxy::start(redis.port(), Duration::ZERO).await;
    let mut server =
        ServerProcess::start(&["--redis-url", &proxy.url(), "--redis-timeout", "5s"], &[]).await;
    let http = crate::support::http_client();
    // Connected and scripts loaded before Redis slows down.
    let warm = http.post(server.url("/locks/warm")).send().await.unwrap();
    assert_eq!(warm.status(), 201);
    proxy.set_delay(Duration::from_millis(1500));
    let slow = tokio::spawn({
        let (http, url) = (http.clone(), server.url("/locks/slow"));
        async move { http.post(url).send().await }
    });
    eventually(
        Duration::from_secs(2),
        "the slow request is in flight",
        || async {
            let metrics = http
                .get(server.url("/metrics"))
                .send()
                .await
                .ok()?
                .text()
                .await
                .ok()?;
            metrics
                .contains("lockgate_in_flight_requests 1\n")
                .then_some(())
        },
    )
    .await;
    server.signal("TERM");
    let response = slow
        .await
        .expect("join")
        .expect("the slow request is answered");
    assert_eq!(response.status(), 201);
    let status = server.exit_within(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0), "{}", server.logs());
}

/// After SIGTERM readiness answers 503 at once while requests are still served for the
/// shutdown delay; then the process exits 0.
#[tokio::test]
async fn readiness_fails_first_on_sigterm() {
    let mut server = ServerProcess::start(&["--dev", "--shutdown-delay", "1500ms"], &[]).await;
    let http = crate::support::http_client();
    assert_eq!(
        http.get(server.url("/readyz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    server.signal("TERM");
    let (status, body) = eventually(Duration::from_secs(1), "readiness fails", || async {
        let (status, body) = status_json(http.get(server.url("/readyz")).send().await.ok()?).await;
        (status == 503).then_some((status, body))
    })
    .await;
    assert_problem(status, &body, 503, "shutting-down");
    let acquired = http.post(server.url("/locks/late")).send().await.unwrap();
    assert_eq!(acquired.status(), 201, "still serving during the delay");
    let status = server.exit_within(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0), "{}", server.logs());
}

/// SIGTERM with an open hold stream: the stream ends with `released` and the lock is gone
/// from Redis; the process exits 0.
#[tokio::test]
async fn sigterm_releases_hold_streams() {
    let redis = RedisServer::start();
    let conn = redis.conn().await;
    let mut server = ServerProcess::start(&["--redis-url", &redis.url()], &[]).await;
    let http = crate::support::http_client();
    let response = http
        .post(server.url("/locks/held:1/hold"))
        .json(&json!({"ttl_ms": 60000}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut lines = Lines::new(response);
    assert_eq!(lines.next().await.expect("acquired")["event"], "acquired");
    assert!(key_exists(&conn, "lockgate:{held:1}").await);
    server.signal("TERM");
    let last = lines.next().await.expect("a last event");
    assert_eq!(last["event"], "released", "{last}");
    assert_eq!(last["reason"], "shutdown", "{last}");
    assert!(lines.next().await.is_none(), "the stream ends");
    assert!(!key_exists(&conn, "lockgate:{held:1}").await);
    let status = server.exit_within(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0), "{}", server.logs());
}

/// A full run with API keys and debug logging: no token, API key, idempotency key or
/// Authorization header ever reaches the logs, and every request has its access line.
#[tokio::test]
async fn logs_never_contain_tokens_or_keys() {
    let redis = RedisServer::start();
    let mut server = ServerProcess::start(
        &["--redis-url", &redis.url(), "--log-format", "json"],
        &[("RUST_LOG", "debug"), ("LOCKGATE_API_KEYS", KEYS)],
    )
    .await;
    let http = crate::support::http_client();
    let auth = format!("Bearer {DEPLOYER_KEY}");
    let mut secrets = vec![
        DEPLOYER_KEY.to_owned(),
        READER_KEY.to_owned(),
        SCRAPER_KEY.to_owned(),
    ];
    let mut requests = 0;
    let url = |path: &str| server.url(path);

    let idempotency_key = "idem-0123456789abcdef-key";
    secrets.push(idempotency_key.to_owned());
    let mut grant = Value::Null;
    for _ in 0..2 {
        let response = http
            .post(url("/locks/deploy:a"))
            .header("authorization", &auth)
            .header("idempotency-key", idempotency_key)
            .json(&json!({"ttl_ms": 10000}))
            .send()
            .await
            .unwrap();
        requests += 1;
        assert!([200, 201].contains(&response.status().as_u16()));
        grant = response.json().await.unwrap();
    }
    let held = token(&grant);
    secrets.push(held.clone());
    let renewed = http
        .patch(url("/locks/deploy:a"))
        .header("authorization", &auth)
        .header("lock-token", &held)
        .json(&json!({"ttl_ms": 20000}))
        .send()
        .await
        .unwrap();
    requests += 1;
    assert_eq!(renewed.status(), 200);
    // A wrong token (a real one, of another lock) and a bad key.
    let (_, other) = status_json(
        http.post(url("/locks/deploy:b"))
            .header("authorization", &auth)
            .send()
            .await
            .unwrap(),
    )
    .await;
    requests += 1;
    secrets.push(token(&other));
    let refused = http
        .delete(url("/locks/deploy:a"))
        .header("authorization", &auth)
        .header("lock-token", token(&other))
        .send()
        .await
        .unwrap();
    requests += 1;
    assert_eq!(refused.status(), 409);
    let bad_key = "bad-key-that-must-not-be-logged";
    secrets.push(bad_key.to_owned());
    let unauthorized = http
        .get(url("/locks/deploy:a"))
        .header("authorization", format!("Bearer {bad_key}"))
        .send()
        .await
        .unwrap();
    requests += 1;
    assert_eq!(unauthorized.status(), 401);
    let forbidden = http
        .get(url("/locks/jobs:1"))
        .header("authorization", &auth)
        .send()
        .await
        .unwrap();
    requests += 1;
    assert_eq!(forbidden.status(), 403);
    // A hold stream, and a waiter that gets a lock on release.
    let stream = http
        .post(url("/locks/deploy:c/hold"))
        .header("authorization", &auth)
        .json(&json!({"ttl_ms": 1000}))
        .send()
        .await
        .unwrap();
    requests += 1;
    let mut lines = Lines::new(stream);
    let acquired = lines.next().await.expect("acquired");
    secrets.push(token(&acquired));
    assert_eq!(lines.next().await.expect("renewed")["event"], "renewed");
    drop(lines);
    let waiter = tokio::spawn({
        let (http, url, auth) = (http.clone(), url("/locks/deploy:a"), auth.clone());
        async move {
            http.post(url)
                .header("authorization", auth)
                .json(&json!({"wait_ms": 5000}))
                .send()
                .await
        }
    });
    requests += 1;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released = http
        .delete(url("/locks/deploy:a"))
        .header("authorization", &auth)
        .header("lock-token", &held)
        .send()
        .await
        .unwrap();
    requests += 1;
    assert_eq!(released.status(), 204);
    let (status, next) = status_json(waiter.await.unwrap().unwrap()).await;
    assert_eq!(status, 201, "{next}");
    secrets.push(token(&next));

    server.signal("TERM");
    assert_eq!(
        server.exit_within(Duration::from_secs(10)).await.code(),
        Some(0)
    );
    let logs = server.logs();
    for secret in &secrets {
        assert!(
            !logs.contains(secret.as_str()),
            "the logs contain {secret:?}:\n{logs}"
        );
    }
    assert!(!logs.to_ascii_lowercase().contains("bearer"), "{logs}");
    assert!(
        !logs.to_ascii_lowercase().contains("authorization"),
        "{logs}"
    );
    let access: Vec<Value> = logs
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["target"] == "lockgate::access")
        .collect();
    assert!(
        access.len() >= requests,
        "{} access lines for {requests} requests:\n{logs}",
        access.len()
    );
    assert!(
        access
            .iter()
            .all(|line| line["fields"]["request_id"].is_string())
    );
}

/// TLS to Redis with a CA given by file contents (`--redis-ca-file`), as an ACL user: works
/// with the right CA and password, and fails (503, no hang) without the CA or with a wrong
/// password.
#[tokio::test]
async fn tls_and_acl_to_redis() {
    let ca_key = rcgen::KeyPair::generate().expect("ca key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "lockgate test CA");
    let ca = ca_params.self_signed(&ca_key).expect("ca cert");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let server_key = rcgen::KeyPair::generate().expect("server key");
    let server_params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("server params");
    let server_cert = server_params
        .signed_by(&server_key, &issuer)
        .expect("server cert");

    let redis = RedisServer::start_tls(&server_cert.pem(), &server_key.serialize_pem(), &ca.pem());
    let _: () = redis
        .query(
            redis::cmd("ACL")
                .arg("SETUSER")
                .arg("lockgate")
                .arg("on")
                .arg(">acl-password-0123")
                .arg("~lockgate:*")
                .arg("&lockgate:*")
                .arg("+@all"),
        )
        .expect("ACL SETUSER");
    let url = |password: &str| {
        format!(
            "rediss://lockgate:{password}@127.0.0.1:{}",
            redis.tls_port()
        )
    };

    let mut good = redis_config(&url("acl-password-0123"));
    good.redis_ca = Some(ca.pem().into_bytes());
    let gw = Gateway::start(good).await;
    let (status, grant) = status_json(gw.acquire("tls:1", None).await).await;
    assert_eq!(status, 201, "{grant}");
    let conn = redis.conn().await;
    assert!(key_exists(&conn, "lockgate:{tls:1}").await);
    assert_eq!(gw.release("tls:1", &token(&grant)).await.status(), 204);

    let mut wrong_password = redis_config(&url("wrong-password"));
    wrong_password.redis_ca = Some(ca.pem().into_bytes());
    let untrusted = redis_config(&url("acl-password-0123"));
    for config in [wrong_password, untrusted] {
        let gw = Gateway::start(config).await;
        let started = std::time::Instant::now();
        let (status, body) = status_json(gw.acquire("tls:2", None).await).await;
        assert_problem(status, &body, 503, "backend-unavailable");
        assert!(started.elapsed() < Duration::from_secs(3));
    }
}
