//! Revoking a lock (`DELETE /locks/{name}?force=true`): the lock is deleted whoever holds it,
//! its holder is told (`lock-revoked`, a `revoked` hold event, `lockgate run` exit 77), and
//! only keys allowed `revoke` may do it. Also: `lockgate run` stops its command before the
//! lease ends when renewals cannot get through.

use std::time::{Duration, Instant};

use lockgate::config::BackendChoice;
use serde_json::{Value, json};

use crate::support::answers::{Answered, Reply};
use crate::support::backends::on_backends;
use crate::support::eventually;
use crate::support::gateway::{Gateway, config, redis_config};
use crate::support::process::lockgate;
use crate::support::redis::RedisServer;

/// `DELETE /locks/{name}?force=true`, with `key` if given.
async fn revoke(gw: &Gateway, name: &str, key: Option<&str>) -> Reply<Option<Value>> {
    let client = match key {
        Some(key) => gw.client_as(key),
        None => gw.client(),
    };
    client.force_release(name).await
}

/// What every backend must do: revoke deletes the lock whoever holds it, with no token; the
/// holder's renewal and release then answer 410 `lock-revoked`; the lock is free for the next
/// client, whose token is unaffected; revoking a free lock is 404.
async fn revoke_takes_the_lock_from_its_holder(gw: &Gateway) {
    let locks = gw.locks();
    let stale = locks
        .acquire("stuck", json!({"ttl_ms": 30_000}))
        .await
        .done(201)
        .token;
    assert_eq!(revoke(gw, "stuck", None).await.status(), 204);
    locks.inspect("stuck").await.refused(404, "lock-not-held");
    locks
        .renew("stuck", &stale, json!({}))
        .await
        .refused(410, "lock-revoked");
    locks
        .release("stuck", &stale)
        .await
        .refused(410, "lock-revoked");

    let next = locks.acquire("stuck", json!({})).await.done(201);
    locks
        .renew("stuck", &stale, json!({}))
        .await
        .refused(410, "lock-revoked");
    locks.renew("stuck", &next.token, json!({})).await.done(200);
    locks.release("stuck", &next.token).await.done(204);

    revoke(gw, "stuck", None)
        .await
        .refused(404, "lock-not-held");
}

on_backends!(revoke_takes_the_lock_from_its_holder: dev);

#[tokio::test]
async fn revoke_on_redis() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    revoke_takes_the_lock_from_its_holder(&gw).await;
    // The revocation is remembered for what was left of the lease, no longer.
    let locks = gw.locks();
    let grant = locks
        .acquire("brief", json!({"ttl_ms": 300}))
        .await
        .done(201);
    assert_eq!(revoke(&gw, "brief", None).await.status(), 204);
    let mut conn = redis.conn().await;
    let pttl: i64 = redis::cmd("PTTL")
        .arg("lockgate:{brief}:revoked")
        .query_async(&mut conn)
        .await
        .expect("PTTL");
    assert!((1..=300).contains(&pttl), "{pttl}");
    eventually(
        Duration::from_secs(3),
        "the revocation is forgotten",
        || {
            let mut conn = conn.clone();
            async move {
                let left: bool = redis::cmd("EXISTS")
                    .arg("lockgate:{brief}:revoked")
                    .query_async(&mut conn)
                    .await
                    .expect("EXISTS");
                (!left).then_some(())
            }
        },
    )
    .await;
    locks
        .release("brief", &grant.token)
        .await
        .refused(404, "lock-not-held");
}

/// Only a key whose operations name `revoke` may revoke; the default operations do not.
#[tokio::test]
async fn revoking_needs_the_revoke_operation() {
    const KEYS: &str = r#"[
        {"name": "app", "key": "app-key-0123456789ab", "prefixes": ["jobs:"]},
        {"name": "operator", "key": "operator-key-0123456789", "prefixes": [""], "operations": ["inspect", "revoke"]}
    ]"#;
    let mut cfg = config(BackendChoice::Memory);
    cfg.api_keys = Some(lockgate::access::ApiKeys::from_json(KEYS).expect("keys"));
    let gw = Gateway::start(cfg).await;
    let app = gw.client_as("app-key-0123456789ab");
    app.acquire("jobs:1", &json!({}), None, None)
        .await
        .done(201);
    let refused = revoke(&gw, "jobs:1", Some("app-key-0123456789ab")).await;
    refused.refused(403, "forbidden");
    let refused = revoke(&gw, "jobs:1", None).await;
    refused.refused(401, "unauthorized");
    assert_eq!(
        revoke(&gw, "jobs:1", Some("operator-key-0123456789"))
            .await
            .status(),
        204
    );
}

/// A hold stream whose lock is revoked ends with a `revoked` event.
#[tokio::test]
async fn a_revoked_hold_stream_ends_with_a_revoked_event() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let held = gw.client().hold("held", &json!({"ttl_ms": 900})).await;
    let mut events = held.done(200);
    let acquired = events.next().await.expect("acquired");
    assert_eq!(acquired["event"], "acquired");
    assert_eq!(revoke(&gw, "held", None).await.status(), 204);
    let revoked_at = Instant::now();
    let end = loop {
        let event = events.next().await.expect("an event before the end");
        if event["event"] != "renewed" {
            break event;
        }
    };
    assert_eq!(end["event"], "revoked", "{end}");
    assert_eq!(end["reason"], "revoked", "{end}");
    assert!(
        revoked_at.elapsed() < Duration::from_millis(900),
        "told only after {:?}",
        revoked_at.elapsed()
    );
    assert!(events.next().await.is_none(), "the stream ends");
}

/// `lockgate run --ttl TTL job -- sleep 60`, once its lock is held.
async fn run_holding_job(gw: &Gateway, ttl: &str) -> tokio::process::Child {
    let child = lockgate()
        .args([
            "run",
            "--gateway",
            &gw.url(""),
            "--ttl",
            ttl,
            "job",
            "--",
            "sleep",
            "60",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("lockgate run");
    eventually(Duration::from_secs(10), "the lock is held", || async {
        (gw.inspect("job").await.status() == 200).then_some(())
    })
    .await;
    child
}

/// `lockgate run` whose lock is revoked stops its command (SIGTERM) at once — told by the
/// lock's events, not at its next renewal 10 s later — and exits 77.
#[tokio::test]
async fn a_revoked_lockgate_run_stops_its_command() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let child = run_holding_job(&gw, "30s").await;
    assert_eq!(revoke(&gw, "job", None).await.status(), 204);
    let revoked_at = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("lockgate run ends")
        .expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(77), "{stderr}");
    assert!(stderr.contains("revoked"), "{stderr}");
    assert!(
        revoked_at.elapsed() < Duration::from_secs(2),
        "the command ran on for {:?} after the revoke",
        revoked_at.elapsed()
    );
}

/// When renewals cannot get through (Redis is gone), `lockgate run` stops its command before
/// the lease ends — with `min(--kill-after, ttl/3)` to spare, here 1 s — so nobody else can
/// have been granted the lock while it still ran.
#[tokio::test]
async fn lockgate_run_stops_its_command_before_an_unrenewable_lease_ends() {
    let mut redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let child = run_holding_job(&gw, "3s").await;
    // When the lease ends, by Redis; stopped right after, so that no renewal moves it.
    let mut conn = redis.conn().await;
    let asked = Instant::now();
    let pttl: u64 = redis::cmd("PTTL")
        .arg("lockgate:{job}")
        .query_async(&mut conn)
        .await
        .expect("PTTL");
    let lease_end = asked + Duration::from_millis(pttl);
    redis.stop();
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("lockgate run ends")
        .expect("wait");
    let ended = Instant::now();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(76), "{stderr}");
    assert!(
        ended + Duration::from_millis(500) <= lease_end,
        "the command was stopped {:?} before its lease ended (or after it)",
        lease_end.saturating_duration_since(ended)
    );
}
