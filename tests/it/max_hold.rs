//! Bounded holds: `max_hold_ms` on acquire and the server's `--max-hold`. Renewals stop at the
//! bound, hold streams end with `max-hold-reached`, `lockgate run` stops its command before the
//! bound and exits 78.

use std::time::{Duration, Instant};

use lockgate::config::BackendChoice;
use serde_json::json;

use crate::support::answers::Answered;
use crate::support::backends::on_backends;
use crate::support::eventually;
use crate::support::gateway::{Gateway, config, redis_config};
use crate::support::process::lockgate;
use crate::support::proxy::LatencyProxy;
use crate::support::redis::RedisServer;

/// Renewals extend a bounded lease up to its bound and no further; past it they answer 409
/// `max-hold-reached`, and the lock is gone.
async fn renewals_stop_at_the_bound(gw: &Gateway) {
    // Taken before the request: the bound cannot start earlier, however late the response.
    let locks = gw.locks();
    let granted = Instant::now();
    let grant = locks
        .acquire("bounded", json!({"ttl_ms": 600, "max_hold_ms": 1200}))
        .await
        .done(201);
    let left = grant.max_hold_left_ms.expect("max_hold_left_ms");
    assert!((1000..=1200).contains(&left), "{grant:?}");
    let token = grant.token;
    let renewed = locks
        .renew("bounded", &token, json!({"ttl_ms": 60_000}))
        .await
        .done(200);
    assert!(
        renewed.ttl_ms <= 1200,
        "renewed past the bound: {renewed:?}"
    );
    assert!(
        renewed.max_hold_left_ms.is_some_and(|ms| ms <= 1200),
        "{renewed:?}"
    );
    let refused = eventually(Duration::from_secs(5), "renewals are refused", || async {
        let answer = locks
            .renew("bounded", &token, json!({"ttl_ms": 60_000}))
            .await;
        (answer.status() != 200).then_some(answer)
    })
    .await;
    assert!(
        granted.elapsed() >= Duration::from_millis(1000),
        "refused early: {refused:?}"
    );
    refused.refused(409, "max-hold-reached");
    assert_eq!(
        locks.inspect("bounded").await.status(),
        404,
        "the lock ends at its bound"
    );
}

on_backends!(renewals_stop_at_the_bound: dev, redis);

/// A renewal sent just before the bound, whose lease (clamped to the bound) runs out while
/// the answer travels back from a slow Redis, is told `max-hold-reached`: the bound ended it.
/// (It was a 503 `backend-unavailable`, which invites a retry that can only fail.)
#[tokio::test]
async fn a_renewal_that_runs_out_at_the_bound_on_its_way_back_is_max_hold_reached() {
    let redis = RedisServer::start();
    let proxy = LatencyProxy::start(redis.port(), Duration::ZERO).await;
    let gw = Gateway::start(redis_config(&proxy.url())).await;
    let locks = gw.locks();
    let granted = Instant::now();
    let grant = locks
        .acquire("slow", json!({"ttl_ms": 1000, "max_hold_ms": 1000}))
        .await
        .done(201);
    // Redis now answers 100 ms late each way; the renewal leaves ~30 ms before the bound.
    proxy.set_delay(Duration::from_millis(100));
    tokio::time::sleep_until((granted + Duration::from_millis(970)).into()).await;
    locks
        .renew("slow", &grant.token, json!({"ttl_ms": 60_000}))
        .await
        .refused(409, "max-hold-reached");
}

/// The server's `--max-hold` bounds every grant; a client may only shorten it.
#[tokio::test]
async fn the_server_bound_applies_to_every_grant() {
    let mut cfg = config(BackendChoice::Memory);
    cfg.limits.max_hold = Some(Duration::from_secs(2));
    let gw = Gateway::start(cfg).await;
    let locks = gw.locks();
    let grant = locks
        .acquire("a", json!({"ttl_ms": 10_000}))
        .await
        .done(201);
    assert!(grant.ttl_ms <= 2000, "{grant:?}");
    assert!(
        grant.max_hold_left_ms.is_some_and(|ms| ms <= 2000),
        "{grant:?}"
    );
    let problem = locks
        .acquire("b", json!({"max_hold_ms": 2001}))
        .await
        .refused(400, "invalid-request");
    assert_eq!(problem.field.as_deref(), Some("max_hold_ms"));
    let grant = locks
        .acquire("c", json!({"max_hold_ms": 500}))
        .await
        .done(201);
    assert!(
        grant.max_hold_left_ms.is_some_and(|ms| ms <= 500),
        "{grant:?}"
    );
}

/// A hold stream with `max_hold_ms` ends with `max-hold-reached` at the bound, and the lock
/// is released.
#[tokio::test]
async fn a_hold_stream_ends_at_max_hold() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let body = json!({"ttl_ms": 600, "max_hold_ms": 1000});
    let mut events = gw.client().hold("leader", &body).await.done(200);
    let acquired = events.next().await.expect("acquired");
    let started = Instant::now();
    assert_eq!(acquired["event"], "acquired", "{acquired}");
    let end = loop {
        let event = events.next().await.expect("an event before the end");
        if event["event"] != "renewed" {
            break event;
        }
    };
    let at = started.elapsed();
    assert_eq!(end["event"], "max-hold-reached", "{end}");
    assert_eq!(end["reason"], "max-hold", "{end}");
    assert!(
        (Duration::from_millis(900)..Duration::from_millis(1500)).contains(&at),
        "ended after {at:?}"
    );
    assert!(events.next().await.is_none(), "the stream ends");
    gw.locks()
        .inspect("leader")
        .await
        .refused(404, "lock-not-held");
}

/// `lockgate run --max-hold` stops its command before the bound and exits 78.
#[tokio::test]
async fn lockgate_run_stops_its_command_at_max_hold() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let started = Instant::now();
    let child = lockgate()
        .args([
            "run",
            "--gateway",
            &gw.url(""),
            "--ttl",
            "3s",
            "--max-hold",
            "1500ms",
            "job",
            "--",
            "sleep",
            "60",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("lockgate run");
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("lockgate run ends")
        .expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    // The grant came after `started`: its bound ends after started + 1.5 s.
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "the command ran until {:?}",
        started.elapsed()
    );
}
