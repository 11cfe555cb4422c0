//! The HTTP contract, driven in-process with `oneshot` against the memory backend: status
//! codes, headers, bodies and every documented problem `type`. The Redis end-to-end tests
//! check the same operations against a real server.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, header};
use http_body_util::BodyExt;
use lockgate::config::BackendChoice;
use lockgate::http::App;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::support::answers::Answered;
use crate::support::gateway::{Gateway, config};
use crate::support::{assert_problem, eventually, waiters_in};

fn app() -> App {
    lockgate::app::app(&config(BackendChoice::Memory)).expect("valid config")
}

struct Reply {
    status: u16,
    headers: HeaderMap,
    body: Value,
    raw: Vec<u8>,
}

async fn send(app: &App, request: Request<Body>) -> Reply {
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let raw = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .to_vec();
    let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        body,
        raw,
    }
}

/// `method` on `path`, with no body.
async fn without_body(app: &App, method: Method, path: &str) -> Reply {
    send(
        app,
        request(method, path).body(Body::empty()).expect("request"),
    )
    .await
}

fn request(method: Method, path: &str) -> axum::http::request::Builder {
    Request::builder().method(method).uri(path)
}

async fn acquire(app: &App, name: &str, body: &str) -> Reply {
    send(
        app,
        request(Method::POST, &format!("/locks/{name}"))
            .body(Body::from(body.to_owned()))
            .expect("request"),
    )
    .await
}

async fn release(app: &App, name: &str, token: &str) -> Reply {
    let req = request(Method::DELETE, &format!("/locks/{name}")).header("Lock-Token", token);
    send(app, req.body(Body::empty()).expect("request")).await
}

async fn renew(app: &App, name: &str, token: &str, body: &str) -> Reply {
    let req = request(Method::PATCH, &format!("/locks/{name}")).header("Lock-Token", token);
    send(app, req.body(Body::from(body.to_owned())).expect("request")).await
}

async fn inspect(app: &App, name: &str) -> Reply {
    send(
        app,
        request(Method::GET, &format!("/locks/{name}"))
            .body(Body::empty())
            .expect("request"),
    )
    .await
}

fn problem(reply: &Reply, status: u16, kind: &str) {
    assert_eq!(
        reply
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
        Some("application/problem+json"),
        "{}",
        reply.body
    );
    assert_problem(reply.status, &reply.body, status, kind);
}

/// A free lock is granted: 201, Location, a token `<22-character stem>.<fence>`, the fence and
/// the full ttl.
#[tokio::test(start_paused = true)]
async fn acquire_grants_a_free_lock() {
    let app = app();
    let reply = acquire(&app, "orders:42", r#"{"ttl_ms": 5000}"#).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.headers[header::LOCATION], "/locks/orders:42");
    assert_eq!(reply.headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(reply.body["name"], "orders:42");
    let fence = reply.body["fence"].as_u64().expect("fence");
    assert!(fence > 0);
    let (stem, carried) = reply.body["token"]
        .as_str()
        .and_then(|t| t.split_once('.'))
        .expect("a token <stem>.<fence>");
    assert_eq!(stem.len(), 22);
    assert_eq!(carried, fence.to_string());
    assert_eq!(reply.body["ttl_ms"], 5000);
    assert!(
        reply.body["expires_at"]
            .as_str()
            .is_some_and(|s| s.ends_with('Z'))
    );
    assert!(reply.body.get("replicas_acked").is_none());
}

/// An empty body, and a body of only whitespace, mean all defaults (30 s).
#[tokio::test(start_paused = true)]
async fn an_empty_body_means_defaults() {
    let app = app();
    assert_eq!(acquire(&app, "a", "").await.body["ttl_ms"], 30000);
    assert_eq!(acquire(&app, "b", " \n").await.body["ttl_ms"], 30000);
    assert_eq!(acquire(&app, "c", "{}").await.body["ttl_ms"], 30000);
}

/// A held lock answers 409 lock-held with retry_after_ms and a Retry-After header.
#[tokio::test(start_paused = true)]
async fn a_held_lock_answers_409_with_retry_after() {
    let app = app();
    acquire(&app, "x", r#"{"ttl_ms": 2500}"#).await;
    tokio::time::advance(Duration::from_millis(500)).await;
    let reply = acquire(&app, "x", "").await;
    problem(&reply, 409, "lock-held");
    assert_eq!(reply.body["retry_after_ms"], 2000);
    assert_eq!(reply.headers[header::RETRY_AFTER], "2");
}

/// Only the holder releases: another holder's token is 409 not-owner, a value lockgate never
/// issues is 400, and the lock stays; the right one is 204; a second release is 404.
#[tokio::test(start_paused = true)]
async fn release_is_for_the_holder_only() {
    let app = app();
    let token = acquire(&app, "x", "").await.body["token"]
        .as_str()
        .expect("token")
        .to_owned();
    let other = acquire(&app, "y", "").await.body["token"].clone();
    let other = other.as_str().expect("token");
    problem(&release(&app, "x", other).await, 409, "not-owner");
    problem(
        &release(&app, "x", "not-the-token").await,
        400,
        "invalid-request",
    );
    assert_eq!(inspect(&app, "x").await.status, 200);
    let released = release(&app, "x", &token).await;
    assert_eq!(released.status, 204);
    assert!(released.raw.is_empty());
    problem(&release(&app, "x", &token).await, 404, "lock-not-held");
    problem(&inspect(&app, "x").await, 404, "lock-not-held");
}

/// Renew moves the end of the lease for the holder and refuses everyone else.
#[tokio::test(start_paused = true)]
async fn renew_extends_the_lease_for_the_holder_only() {
    let app = app();
    let grant = acquire(&app, "x", r#"{"ttl_ms": 1000}"#).await.body;
    let token = grant["token"].as_str().expect("token");
    tokio::time::advance(Duration::from_millis(800)).await;
    let renewed = renew(&app, "x", token, r#"{"ttl_ms": 5000}"#).await;
    assert_eq!(renewed.status, 200, "{}", renewed.body);
    assert_eq!(renewed.body["ttl_ms"], 5000);
    assert_eq!(renewed.body["fence"], grant["fence"]);
    assert!(renewed.body.get("token").is_none());
    tokio::time::advance(Duration::from_millis(4000)).await;
    assert_eq!(inspect(&app, "x").await.body["ttl_ms"], 1000);
    let other = acquire(&app, "y", "").await.body["token"].clone();
    problem(
        &renew(&app, "x", other.as_str().expect("token"), "").await,
        409,
        "not-owner",
    );
    problem(
        &renew(&app, "x", "someone-else", "").await,
        400,
        "invalid-request",
    );
    problem(
        &renew(&app, "nobody", token, "").await,
        404,
        "lock-not-held",
    );
}

/// Release and renew need the Lock-Token header; a malformed one is refused without echo.
#[tokio::test(start_paused = true)]
async fn the_lock_token_header_is_required_and_checked() {
    let app = app();
    acquire(&app, "x", "").await;
    let missing = without_body(&app, Method::DELETE, "/locks/x").await;
    problem(&missing, 400, "invalid-request");
    assert_eq!(missing.body["header"], "Lock-Token");
    let spaced = release(&app, "x", "has space").await;
    problem(&spaced, 400, "invalid-request");
    assert!(!String::from_utf8_lossy(&spaced.raw).contains("has space"));
    let long = release(&app, "x", &"t".repeat(300)).await;
    problem(&long, 400, "invalid-request");
}

/// Inspect shows ttl and fence, never the token; HEAD answers the same status, no body.
#[tokio::test(start_paused = true)]
async fn inspect_never_shows_the_token() {
    let app = app();
    let grant = acquire(&app, "x", r#"{"ttl_ms": 9000}"#).await.body;
    let token = grant["token"].as_str().expect("token");
    let seen = inspect(&app, "x").await;
    assert_eq!(seen.status, 200);
    assert_eq!(
        seen.body,
        json!({
            "name": "x", "held": true, "ttl_ms": 9000, "expires_at": seen.body["expires_at"], "fence": grant["fence"],
            "acquired_at": seen.body["acquired_at"], "waiting": 0, "mode": "exclusive"
        })
    );
    assert!(seen.body["acquired_at"].is_string(), "{}", seen.body);
    assert!(!String::from_utf8_lossy(&seen.raw).contains(token));
    let head = without_body(&app, Method::HEAD, "/locks/x").await;
    assert_eq!(head.status, 200);
    assert!(head.raw.is_empty());
    let head_missing = without_body(&app, Method::HEAD, "/locks/y").await;
    assert_eq!(head_missing.status, 404);
}

/// Names outside the documented alphabet are 400 invalid-name, whatever the method.
#[tokio::test(start_paused = true)]
async fn invalid_names_are_refused() {
    let app = app();
    let long = "a".repeat(201);
    let paths = [
        "/locks/a%20b".to_owned(),
        "/locks/%7Bx%7D".to_owned(),
        "/locks/..".to_owned(),
        "/locks/.hidden".to_owned(),
        format!("/locks/{long}"),
        "/locks/".to_owned(),
        "/locks/a/b/c".to_owned(),
        "/locks/a%2Fb".to_owned(),
        "/locks/a*".to_owned(),
        "/locks/%00".to_owned(),
        "/locks/%FF".to_owned(),
    ];
    for path in &paths {
        for method in [Method::POST, Method::GET, Method::DELETE] {
            let req = request(method.clone(), path)
                .header("Lock-Token", "t")
                .body(Body::empty())
                .expect("request");
            let reply = send(&app, req).await;
            assert_eq!(reply.status, 400, "{method} {path}: {}", reply.body);
            assert_eq!(
                reply.body["type"], "https://lockgate.dev/problems/invalid-name",
                "{method} {path}"
            );
        }
    }
    assert_eq!(acquire(&app, &"a".repeat(200), "").await.status, 201);
}

/// Malformed JSON, unknown fields, wrong types and out-of-range numbers are 400
/// invalid-request naming the field, never a plain-text rejection.
#[tokio::test(start_paused = true)]
async fn bad_bodies_are_problem_documents() {
    let app = app();
    let cases: &[(&str, Option<&str>)] = &[
        (r#"{"ttl_ms": "#, Some("ttl_ms")),
        (r#"{"ttl_ms" 5}"#, None),
        (r#"{"ttl_ms": 1000}{}"#, None),
        ("[]", None),
        ("null", None),
        // An unknown field is not named: it could be anything, a secret included (issue 49).
        (r#"{"ttl": 1000}"#, None),
        (r#"{"ttl_ms": "1s"}"#, Some("ttl_ms")),
        (r#"{"ttl_ms": -1}"#, Some("ttl_ms")),
        (r#"{"ttl_ms": 1.5}"#, Some("ttl_ms")),
        (r#"{"ttl_ms": 99}"#, Some("ttl_ms")),
        (r#"{"ttl_ms": 3600001}"#, Some("ttl_ms")),
        (r#"{"ttl_ms": 18446744073709551616}"#, Some("ttl_ms")),
        (r#"{"wait_ms": 60001}"#, Some("wait_ms")),
        (r#"{"replicas": 65}"#, Some("replicas")),
        (r#"{"replica_timeout_ms": 0}"#, Some("replica_timeout_ms")),
        (r#"{"require_replicas": "yes"}"#, Some("require_replicas")),
    ];
    for (body, field) in cases {
        let reply = acquire(&app, "x", body).await;
        problem(&reply, 400, "invalid-request");
        assert_eq!(
            reply.body["field"].as_str(),
            *field,
            "{body}: {}",
            reply.body
        );
    }
    for (body, ttl) in [
        (r#"{"ttl_ms": 2000.0}"#, 2000),
        (r#"{"ttl_ms": 2e3}"#, 2000),
        (r#"{"ttl_ms": null}"#, 30000),
    ] {
        let reply = acquire(&app, "whole", body).await;
        assert_eq!(
            (reply.status, reply.body["ttl_ms"].as_u64()),
            (201, Some(ttl)),
            "{body}: {}",
            reply.body
        );
        release(&app, "whole", reply.body["token"].as_str().expect("token")).await;
    }
    let reply = renew(&app, "x", "t", r#"{"wait_ms": 5}"#).await;
    problem(&reply, 400, "invalid-request");
    assert_eq!(
        inspect(&app, "x").await.status,
        404,
        "no bad request may take the lock"
    );
}

/// Bodies over the limit are 413, whether announced by Content-Length or streamed.
#[tokio::test(start_paused = true)]
async fn oversized_bodies_are_413() {
    let app = app();
    let big = format!(r#"{{"ttl_ms": 1000{}}}"#, " ".repeat(20_000));
    let reply = acquire(&app, "x", &big).await;
    problem(&reply, 413, "payload-too-large");
    assert_eq!(reply.body["max_body_bytes"], 16384);
    let chunks = futures_util::stream::iter(
        (0..40).map(|_| Ok::<_, std::io::Error>(axum::body::Bytes::from(" ".repeat(1000)))),
    );
    let streamed = request(Method::POST, "/locks/x")
        .body(Body::from_stream(chunks))
        .expect("request");
    problem(&send(&app, streamed).await, 413, "payload-too-large");
    assert_eq!(inspect(&app, "x").await.status, 404);
}

/// A retry with the same Idempotency-Key gets the same grant (200, same token and fence);
/// another key gets 409; a malformed key is refused.
#[tokio::test(start_paused = true)]
async fn idempotent_acquire_replays_the_grant() {
    let app = app();
    let key = "6f1c1a9e-7d4b-4c1e-9a57-2b0f8a3e5d11";
    let post = |key: &str| {
        request(Method::POST, "/locks/job:7")
            .header("Idempotency-Key", key)
            .body(Body::empty())
            .expect("request")
    };
    let first = send(&app, post(key)).await;
    assert_eq!(first.status, 201);
    tokio::time::advance(Duration::from_secs(1)).await;
    let retry = send(&app, post(key)).await;
    assert_eq!(retry.status, 200, "{}", retry.body);
    assert_eq!(retry.body["token"], first.body["token"]);
    assert_eq!(retry.body["fence"], first.body["fence"]);
    assert_eq!(retry.body["ttl_ms"], 29000);
    problem(
        &send(&app, post("another-key-0123456789")).await,
        409,
        "lock-held",
    );
    let short = send(&app, post("short")).await;
    problem(&short, 400, "invalid-request");
    assert_eq!(short.body["header"], "Idempotency-Key");
}

/// The memory backend has no replicas: 0 acknowledge, and requiring them releases the lock.
#[tokio::test(start_paused = true)]
async fn replica_requirements_without_replicas() {
    let app = app();
    let reply = acquire(&app, "x", r#"{"replicas": 1}"#).await;
    assert_eq!(reply.status, 201);
    assert_eq!(reply.body["replicas_acked"], 0);
    let required = acquire(&app, "y", r#"{"replicas": 2, "require_replicas": true}"#).await;
    problem(&required, 503, "insufficient-replicas");
    assert_eq!(required.body["replicas_required"], 2);
    assert_eq!(required.body["replicas_acked"], 0);
    assert_eq!(required.headers[header::RETRY_AFTER], "1");
    problem(&inspect(&app, "y").await, 404, "lock-not-held");
}

/// An expired lease frees the lock, and the next grant carries a larger fence.
#[tokio::test(start_paused = true)]
async fn expiry_frees_the_lock_with_a_larger_fence_next() {
    let app = app();
    let first = acquire(&app, "x", r#"{"ttl_ms": 1000}"#).await.body;
    tokio::time::advance(Duration::from_millis(1000)).await;
    problem(&inspect(&app, "x").await, 404, "lock-not-held");
    let second = acquire(&app, "x", "").await.body;
    assert!(
        second["fence"].as_u64() > first["fence"].as_u64(),
        "{first} then {second}"
    );
}

/// Unknown routes and methods are problem documents too; 405 names the allowed methods.
#[tokio::test(start_paused = true)]
async fn unknown_routes_and_methods_are_problem_documents() {
    let app = app();
    problem(
        &without_body(&app, Method::GET, "/nope").await,
        404,
        "not-found",
    );
    let put = without_body(&app, Method::PUT, "/locks/x").await;
    problem(&put, 405, "method-not-allowed");
    let allow = put.headers[header::ALLOW].to_str().expect("ascii");
    for method in ["POST", "PATCH", "DELETE", "GET", "HEAD"] {
        assert!(allow.contains(method), "{allow}");
    }
}

/// Liveness, readiness and the OpenAPI document answer.
#[tokio::test(start_paused = true)]
async fn health_and_openapi_answer() {
    let app = app();
    let get = |path: &str| {
        request(Method::GET, path)
            .body(Body::empty())
            .expect("request")
    };
    assert_eq!(
        send(&app, get("/healthz")).await.body,
        json!({"status": "ok"})
    );
    assert_eq!(
        send(&app, get("/readyz")).await.body,
        json!({"status": "ready", "backend": "memory"})
    );
    let doc = send(&app, get("/openapi.json")).await;
    assert_eq!(doc.status, 200);
    assert!(
        doc.body["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1")),
        "{}",
        doc.body["openapi"]
    );
    assert!(doc.body["paths"]["/locks/{name}"]["post"].is_object());
    assert!(
        doc.raw.ends_with(b"}\n"),
        "ends with a newline, as every answer"
    );
}

/// The served OpenAPI document shows the bounds this server enforces, not the defaults.
#[tokio::test]
async fn the_served_openapi_document_shows_the_configured_bounds() {
    let mut config = config(BackendChoice::Memory);
    config.limits.min_ttl = Duration::from_secs(1);
    config.limits.max_ttl = Duration::from_secs(120);
    config.limits.max_wait = Duration::from_secs(5);
    let app = lockgate::app::app(&config).expect("valid config");
    let doc = without_body(&app, Method::GET, "/openapi.json").await.body;
    let acquire = &doc["components"]["schemas"]["AcquireBody"]["properties"];
    assert_eq!(
        (
            acquire["ttl_ms"]["minimum"].as_u64(),
            acquire["ttl_ms"]["maximum"].as_u64()
        ),
        (Some(1000), Some(120_000))
    );
    assert_eq!(acquire["wait_ms"]["maximum"], 5000);
    assert_eq!(
        doc["components"]["schemas"]["RenewBody"]["properties"]["ttl_ms"]["maximum"],
        120_000
    );
}

/// An acquire response dropped before its body was read (the client is gone) releases the
/// lock it granted; a response that was read keeps it.
#[tokio::test]
async fn an_undelivered_grant_is_released() {
    let app = app();
    let post = || {
        request(Method::POST, "/locks/x")
            .body(Body::empty())
            .expect("request")
    };
    let unread = app.clone().oneshot(post()).await.expect("infallible");
    assert_eq!(unread.status(), 201);
    drop(unread);
    crate::support::eventually(
        Duration::from_secs(2),
        "the undelivered grant is released",
        || async { (inspect(&app, "x").await.status == 404).then_some(()) },
    )
    .await;
    assert_eq!(send(&app, post()).await.status, 201);
    tokio::task::yield_now().await;
    assert_eq!(
        inspect(&app, "x").await.status,
        200,
        "a delivered grant stays held"
    );
}

/// Waiting works in --dev too: a waiter wakes on a release, and at the holder's expiry.
#[tokio::test(start_paused = true)]
async fn waiting_on_the_memory_backend() {
    let app = app();
    let holder = acquire(&app, "w", r#"{"ttl_ms": 5000}"#).await.body;
    let waiter = tokio::spawn({
        let app = app.clone();
        async move { acquire(&app, "w", r#"{"wait_ms": 60000, "ttl_ms": 2000}"#).await }
    });
    eventually(Duration::from_secs(5), "the waiter is in line", || async {
        let metrics = send(
            &app,
            request(Method::GET, "/metrics")
                .body(Body::empty())
                .unwrap(),
        );
        let raw = metrics.await.raw;
        (waiters_in(&String::from_utf8_lossy(&raw)) == Some(1)).then_some(())
    })
    .await;
    release(&app, "w", holder["token"].as_str().expect("token")).await;
    let granted = waiter.await.expect("waiter");
    assert_eq!(granted.status, 201, "{}", granted.body);
    let started = tokio::time::Instant::now();
    let next = acquire(&app, "w", r#"{"wait_ms": 60000}"#).await;
    assert_eq!(next.status, 201);
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(2000),
        "granted exactly at the expiry"
    );
    let timed_out = acquire(&app, "w", r#"{"wait_ms": 700}"#).await;
    problem(&timed_out, 409, "lock-held");
}

/// `GET /` says what the server is and links to the OpenAPI document and the main routes.
#[tokio::test]
async fn the_index_links_to_the_api() {
    let app = app();
    let reply = send(&app, request(Method::GET, "/").body(Body::empty()).unwrap()).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["name"], "lockgate");
    assert_eq!(reply.body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(reply.body["links"]["openapi"], "/openapi.json");
    assert_eq!(reply.body["links"]["lock"], "/locks/{name}");
    assert_eq!(reply.body["links"]["events"], "/locks/{name}/events");
    assert_eq!(reply.body["links"]["semaphore"], "/semaphores/{name}");
    assert_eq!(
        reply.body["links"]["lock_set"],
        "/locks?name={name}&name={name}"
    );
    // Every link is a route: read with a name filled in, none is the catch-all 404.
    for (link, path) in reply.body["links"].as_object().expect("links") {
        let path = path.as_str().expect("a path").replace("{name}", "doc");
        if link == "events" || link == "prefix_events" {
            // Streams that stay open; their routes are tested in events.rs and
            // prefix_events.rs.
            continue;
        }
        let read = send(
            &app,
            request(Method::GET, &path).body(Body::empty()).unwrap(),
        )
        .await;
        assert!(
            !read.raw.is_empty() && read.body["type"] != "https://lockgate.dev/problems/not-found",
            "{link} = {path}: {} {}",
            read.status,
            read.body
        );
    }
}

/// Every JSON answer ends with a newline, so `curl` output does not run into the prompt: lock
/// bodies, problem documents, probes and the index.
#[tokio::test]
async fn json_bodies_end_with_a_newline() {
    let app = app();
    let granted = acquire(&app, "nl", "").await;
    let token = granted.body["token"].as_str().expect("token").to_owned();
    let renewed = renew(&app, "nl", &token, "").await;
    let inspected = inspect(&app, "nl").await;
    let held = acquire(&app, "nl", "").await;
    let health = send(
        &app,
        request(Method::GET, "/healthz")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    let index = send(&app, request(Method::GET, "/").body(Body::empty()).unwrap()).await;
    for (what, reply) in [
        ("grant", &granted),
        ("renewal", &renewed),
        ("inspect", &inspected),
        ("problem", &held),
        ("healthz", &health),
        ("index", &index),
    ] {
        assert!(
            reply.raw.ends_with(b"}\n"),
            "{what}: {:?}",
            String::from_utf8_lossy(&reply.raw)
        );
    }
}

/// Bodies that are not what the API takes get problem+json whose `detail` says what was
/// wrong in plain words: never a Rust type name, and `field` only when there is one.
#[tokio::test]
async fn bad_bodies_are_explained_in_plain_words() {
    let app = app();
    for (body, says, field) in [
        ("[]", "must be a JSON object", None),
        (
            r#"{"ttl_ms": 1000,}"#,
            "not valid JSON: trailing comma",
            None,
        ),
        (
            r#"{"ttl_ms": "soon"}"#,
            "expected a non-negative whole number",
            Some("ttl_ms"),
        ),
        (
            r#"{"require_replicas": 1}"#,
            "expected a boolean",
            Some("require_replicas"),
        ),
        (
            r#"{"ttl": 1000}"#,
            "unknown field, expected one of `mode`",
            None,
        ),
    ] {
        let reply = acquire(&app, "bodies", body).await;
        problem(&reply, 400, "invalid-request");
        let detail = reply.body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(says), "{body}: {detail}");
        for rust in ["struct", "AcquireBody", "u64", "bool`"] {
            assert!(!detail.contains(rust), "{body}: {detail}");
        }
        assert_eq!(
            reply.body["field"].as_str(),
            field,
            "{body}: {}",
            reply.body
        );
    }
}

/// A boolean query parameter is `true` or `false`: `?hold=null` or `?force=1` is a 400 naming
/// the parameter, not a silent "false" (a plain acquire or a release without a token); and a
/// revoke that sends a `Lock-Token` anyway must send one of the issued shape.
#[tokio::test]
async fn flags_and_tokens_sent_with_a_revoke_are_checked() {
    let gw = Gateway::dev().await;
    let body = serde_json::json!({"names": ["flag:a", "flag:b"]});
    // Raw HTTP: the flag's spellings are what is tested, which the client never sends.
    let held = gw
        .http
        .post(gw.url("/locks?hold=null"))
        .json(&body)
        .send()
        .await
        .expect("send");
    assert_eq!(held.status(), 400);
    let problem: serde_json::Value = held.json().await.expect("json");
    assert_eq!(problem["field"], "hold", "{problem}");
    gw.locks()
        .acquire("flag:c", serde_json::json!({}))
        .await
        .done(201);
    for (query, header) in [
        ("force=1", None),
        ("force=true&force=false", None),
        ("force=true", Some("not-a-token")),
    ] {
        // Raw HTTP: as above.
        let mut request = gw.http.delete(gw.url(&format!("/locks/flag:c?{query}")));
        if let Some(value) = header {
            request = request.header("Lock-Token", value);
        }
        let answer = request.send().await.expect("send");
        assert_eq!(answer.status(), 400, "{query} {header:?}");
    }
    let still: serde_json::Value = gw.inspect("flag:c").await.json().await.expect("json");
    assert_eq!(
        still["held"], true,
        "a refused revoke moved the lock: {still}"
    );
}

/// A holder's `Lock-Token` where a route reads none is refused (400 naming the header, the
/// token never echoed), not ignored: on a plain acquire its holder would be told another
/// client holds its lock, on a semaphore's acquire it would take a second permit beside its
/// own. Where a route reads one (renew, release, a re-entry), it still works.
#[tokio::test]
async fn a_lock_token_where_the_route_reads_none_is_refused() {
    let app = app();
    let with_token = |method: Method, path: &str, token: &str, body: &str| {
        request(method, path)
            .header("Lock-Token", token)
            .body(Body::from(body.to_owned()))
            .expect("request")
    };
    let held = acquire(&app, "t:lock", "{}").await;
    assert_eq!(held.status, 201, "{}", held.body);
    let lock_token = held.body["token"].as_str().expect("token").to_owned();
    let permit = send(
        &app,
        request(Method::POST, "/semaphores/t:sem")
            .body(Body::from(r#"{"permits": 2}"#))
            .expect("request"),
    )
    .await;
    assert_eq!(permit.status, 201, "{}", permit.body);
    let permit_token = permit.body["token"].as_str().expect("token").to_owned();

    for (method, path, token, body) in [
        (Method::POST, "/locks/t:lock", &lock_token, "{}"),
        (
            Method::POST,
            "/semaphores/t:sem",
            &permit_token,
            r#"{"permits": 2}"#,
        ),
        (Method::POST, "/locks/t:lock/hold", &lock_token, "{}"),
        (
            Method::POST,
            "/semaphores/t:sem/hold",
            &permit_token,
            r#"{"permits": 2}"#,
        ),
        (
            Method::POST,
            "/locks",
            &lock_token,
            r#"{"names": ["t:a", "t:b"]}"#,
        ),
        (Method::GET, "/locks/t:lock", &lock_token, ""),
        (Method::GET, "/locks?prefix=t:", &lock_token, ""),
        (Method::GET, "/semaphores/t:sem", &permit_token, ""),
    ] {
        let answer = send(&app, with_token(method.clone(), path, token, body)).await;
        assert_problem(answer.status, &answer.body, 400, "invalid-request");
        assert_eq!(
            answer.body["header"], "Lock-Token",
            "{method} {path}: {}",
            answer.body
        );
        assert!(
            !answer
                .raw
                .windows(token.len())
                .any(|w| w == token.as_bytes())
        );
    }
    // Nothing was taken: the lock keeps its grant, the semaphore one permit, the set is free.
    let lock = without_body(&app, Method::GET, "/locks/t:lock").await;
    assert_eq!(lock.body["fence"], held.body["fence"], "{}", lock.body);
    let semaphore = without_body(&app, Method::GET, "/semaphores/t:sem").await;
    assert_eq!(semaphore.body["in_use"], 1, "{}", semaphore.body);
    let set = without_body(&app, Method::GET, "/locks/t:a").await;
    assert_eq!(set.status, 404, "a refused set took a lock: {}", set.body);

    // Where a route reads the token, it still does.
    let renewed = send(
        &app,
        with_token(Method::PATCH, "/locks/t:lock", &lock_token, "{}"),
    )
    .await;
    assert_eq!(renewed.status, 200, "{}", renewed.body);
    let reentrant = acquire(&app, "t:re", r#"{"reentrant": true}"#).await;
    let reentrant_token = reentrant.body["token"].as_str().expect("token");
    let again = with_token(
        Method::POST,
        "/locks/t:re",
        reentrant_token,
        r#"{"reentrant": true}"#,
    );
    let again = send(&app, again).await;
    assert_eq!(
        (again.status, &again.body["hold_count"]),
        (200, &json!(2)),
        "{}",
        again.body
    );
    let health = send(&app, with_token(Method::GET, "/healthz", &lock_token, "")).await;
    assert_eq!(health.status, 200);
    for (path, token) in [
        ("/locks/t:lock", &lock_token),
        ("/semaphores/t:sem", &permit_token),
    ] {
        let released = send(&app, with_token(Method::DELETE, path, token, "")).await;
        assert_eq!(released.status, 204, "{path}: {}", released.body);
    }
}

/// A query parameter a route does not take is a 400 `invalid-request`, not ignored: a ttl
/// written in the query takes no lock (it would have been a lease shorter than asked); the
/// detail names what the route takes and echoes nothing sent. What the routes do take (a
/// listing's, a set's names, percent-encoded or not, a revoke's `force`) still works (a set's
/// acquire posted to the set's URL must name the same set), and the probes and the scrape take
/// anything.
#[tokio::test]
async fn a_query_parameter_the_route_does_not_take_is_refused() {
    let app = app();
    let refused = without_body(&app, Method::POST, "/locks/q:job?ttl_ms=600000").await;
    assert_problem(refused.status, &refused.body, 400, "invalid-request");
    let detail = refused.body["detail"].as_str().expect("detail");
    assert!(
        detail.contains("takes none") && !detail.contains("600000"),
        "{detail}"
    );
    let none = without_body(&app, Method::GET, "/locks/q:job").await;
    assert_eq!(
        none.status, 404,
        "a refused acquire took the lock: {}",
        none.body
    );

    for (method, path) in [
        (Method::GET, "/locks/q:a?x=1"),
        (Method::HEAD, "/locks/q:a?x=1"),
        (Method::PATCH, "/locks/q:a?ttl_ms=1"),
        (Method::DELETE, "/locks/q:a?forse=true"),
        (Method::GET, "/locks/q:a/events?x=1"),
        (Method::POST, "/locks/q:a/hold?wait_ms=5"),
        (Method::GET, "/locks/events?prefix=q:&x=1"),
        (Method::GET, "/locks?prefix=q:&x=1"),
        (Method::DELETE, "/locks?name=q:a&name=q:b&x=1"),
        (Method::GET, "/semaphores/q:s?permits=2"),
        (Method::GET, "/semaphores?name=q:s"),
        (Method::GET, "/contention?x=1"),
    ] {
        let answer = without_body(&app, method.clone(), path).await;
        assert_eq!(answer.status, 400, "{method} {path}: {}", answer.body);
        if method != Method::HEAD {
            assert_problem(answer.status, &answer.body, 400, "invalid-request");
        }
    }

    // A set's acquire posted to the set's URL (its `Location`, `?name=…`): the same names,
    // in any order, are taken; other names are refused, and nothing is taken.
    let set = |query: &str| {
        request(Method::POST, &format!("/locks?{query}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"names": ["q:s1", "q:s2"]}"#))
            .expect("request")
    };
    let other = send(&app, set("name=q:s1&name=q:s3")).await;
    assert_problem(other.status, &other.body, 400, "invalid-request");
    assert_eq!(other.body["field"], "name", "{}", other.body);
    let free = without_body(&app, Method::GET, "/locks/q:s1").await;
    assert_eq!(free.status, 404, "a refused set took a lock: {}", free.body);
    let posted = send(&app, set("name=q:s2&name=q:s1")).await;
    assert_eq!(posted.status, 201, "{}", posted.body);

    let taken = acquire(&app, "q:held", "{}").await;
    assert_eq!(taken.status, 201, "{}", taken.body);
    for (method, path, status) in [
        (Method::GET, "/locks/q:held?", 200),
        (Method::GET, "/locks?prefix=q:&limit=5", 200),
        (Method::GET, "/locks?na%6De=q:held&name=q:b", 200),
        (Method::GET, "/semaphores?prefix=q:", 200),
        (Method::GET, "/contention?prefix=q:&limit=3", 200),
        (Method::GET, "/healthz?x=1", 200),
        (Method::GET, "/readyz?x=1", 200),
        (Method::GET, "/metrics?x=1", 200),
        (Method::DELETE, "/locks/q:held?force=true", 204),
    ] {
        let answer = without_body(&app, method.clone(), path).await;
        assert_eq!(answer.status, status, "{method} {path}: {}", answer.body);
    }
}
