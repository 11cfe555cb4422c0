//! The fence recipes of docs/fences.md, each run as the doc writes it against a real server: a
//! holder pauses past its lease, the lock passes on, the next holder writes, and the first
//! holder's late write is refused. The SQL, the shell and the Lua are read from the doc itself,
//! so the doc cannot drift from what is tested.

use std::process::{Command, Stdio};

use axum::body::{Body, to_bytes};
use axum::http::{Method, Request};
use serde_json::json;
use tower::ServiceExt;

use crate::support::answers::Answered;
use crate::support::gateway::{Gateway, redis_config};
use crate::support::postgres::PostgresServer;
use crate::support::redis::RedisServer;

#[path = "../../examples/fenced_resource.rs"]
#[allow(dead_code)]
mod fenced_resource;

/// The code block that follows `<!-- fences-test: MARKER -->` in docs/fences.md.
fn doc_block(marker: &str) -> String {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/fences.md"))
        .expect("docs/fences.md");
    let tag = format!("<!-- fences-test: {marker} -->");
    let after = doc
        .split_once(&tag)
        .unwrap_or_else(|| panic!("docs/fences.md has no {tag}"))
        .1;
    let opening = after.find("```").expect("a code block after the marker");
    let body = after[opening..].split_once('\n').expect("a fence line").1;
    body.split_once("\n```")
        .expect("the code block is closed")
        .0
        .to_owned()
}

/// Two holders of `name` one after the other: the first pauses (does nothing) past its short
/// lease, the second is granted the lock after it. Their fences: (stale, current).
async fn stale_and_current(gw: &Gateway, name: &str) -> (u64, u64) {
    let stale = gw
        .locks()
        .acquire(name, json!({"ttl_ms": 200}))
        .await
        .done(201);
    let current = gw
        .locks()
        .acquire(name, json!({"ttl_ms": 30000, "wait_ms": 10000}))
        .await
        .done(201);
    assert!(current.fence > stale.fence, "{current:?} after {stale:?}");
    (stale.fence, current.fence)
}

/// PostgreSQL: the doc's `lockgate_fence` function and its psql script under `lockgate run`'s
/// `LOCKGATE_FENCE`: the current holder commits (twice), the stale holder's transaction is
/// refused and leaves nothing.
#[tokio::test]
async fn postgres_refuses_the_stale_holders_transaction() {
    let postgres = PostgresServer::start();
    let schema = postgres
        .psql()
        .args(["-c", &doc_block("postgres-schema")])
        .output()
        .expect("run psql");
    assert!(
        schema.status.success(),
        "the doc's schema: {}",
        String::from_utf8_lossy(&schema.stderr)
    );
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let (stale, current) = stale_and_current(&gw, "nightly-report").await;

    let write = |fence: u64| {
        Command::new("sh")
            .arg("-c")
            .arg(doc_block("postgres-write"))
            .envs(postgres.env())
            .env("LOCKGATE_FENCE", fence.to_string())
            .stdin(Stdio::null())
            .output()
            .expect("run the doc's script")
    };
    for _ in 0..2 {
        let out = write(current);
        assert!(
            out.status.success(),
            "the current holder: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let late = write(stale);
    let stderr = String::from_utf8_lossy(&late.stderr);
    assert!(
        !late.status.success(),
        "the stale holder's write went through"
    );
    assert!(
        stderr.contains(&format!("stale fence {stale} for lock nightly-report")),
        "{stderr}"
    );
    let row = postgres
        .psql()
        .args([
            "-At",
            "-c",
            "SELECT body || '|' || fence FROM reports WHERE id = 1",
        ])
        .output()
        .expect("run psql");
    assert_eq!(
        String::from_utf8_lossy(&row.stdout).trim(),
        format!("written under fence {current}|{current}")
    );
}

/// An HTTP resource (examples/fenced_resource.rs): the current holder's `PUT` with its fence
/// is 204 (and again), the stale holder's late one is 409 `stale-fence`, and the document is
/// the current holder's.
#[tokio::test]
async fn an_http_resource_refuses_the_stale_holders_write() {
    // The example's router, called in process: the resource is what is tested, not a socket.
    let resource = fenced_resource::app();
    let call = async |method: Method, fence: Option<u64>, body: String| {
        let mut request = Request::builder().method(method).uri("/documents/report");
        if let Some(fence) = fence {
            request = request.header("Lock-Fence", fence.to_string());
        }
        let request = request.body(Body::from(body)).expect("a request");
        let response = resource.clone().oneshot(request).await.expect("infallible");
        let status = response.status().as_u16();
        let bytes = to_bytes(response.into_body(), usize::MAX).await;
        (
            status,
            String::from_utf8(bytes.expect("a body").to_vec()).expect("UTF-8"),
        )
    };
    let put = |fence: u64| {
        call(
            Method::PUT,
            Some(fence),
            format!("written under fence {fence}"),
        )
    };
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let (stale, current) = stale_and_current(&gw, "report").await;

    for _ in 0..2 {
        assert_eq!(put(current).await.0, 204);
    }
    let (status, late) = put(stale).await;
    assert_eq!(status, 409);
    let problem: serde_json::Value = serde_json::from_str(&late).expect("a problem document");
    assert_eq!(problem["type"], "https://lockgate.dev/problems/stale-fence");
    let (status, _) = call(Method::PUT, None, "no fence".to_owned()).await;
    assert_eq!(status, 400);
    let (_, document) = call(Method::GET, None, String::new()).await;
    assert_eq!(document, format!("written under fence {current}"));
}

/// Redis itself: the doc's fenced-set script, run with EVAL: the current holder's write is OK,
/// the stale holder's late one is the error `STALE`, and the value is the current holder's.
#[tokio::test]
async fn a_fenced_redis_script_refuses_the_stale_holders_write() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let (stale, current) = stale_and_current(&gw, "report").await;
    let script = doc_block("redis-script");
    let mut conn = redis.conn().await;
    let mut write = async |fence: u64| -> redis::RedisResult<String> {
        redis::cmd("EVAL")
            .arg(&script)
            .arg(1)
            .arg("resource:report")
            .arg(fence)
            .arg(format!("written under fence {fence}"))
            .query_async(&mut conn)
            .await
    };
    for _ in 0..2 {
        assert_eq!(write(current).await.expect("the current holder"), "OK");
    }
    let late = write(stale)
        .await
        .expect_err("the stale holder's write went through");
    assert!(late.to_string().contains("STALE"), "{late}");
    let value: String = redis::cmd("HGET")
        .arg("resource:report")
        .arg("value")
        .query_async(&mut conn)
        .await
        .expect("HGET");
    assert_eq!(value, format!("written under fence {current}"));
}
