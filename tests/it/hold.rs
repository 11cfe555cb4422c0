//! Hold streams (`POST /locks/{name}/hold`), end to end against real Redis: the watchdog renews,
//! a client that goes away releases, a lost lock ends the stream, shutdown releases.

use std::process::Stdio;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::support::answers::Answered;
use crate::support::gateway::Gateway;
use crate::support::redis::RedisServer;
use lockgate::client::EventLines;

use crate::support::{eventually, key_exists, status_json};
use crate::waiting::{MS, gateway_for};

async fn hold(gw: &Gateway, name: &str, body: Value) -> EventLines {
    let lines = gw.client().hold(name, &body).await.done(200);
    assert_eq!(lines.content_type(), Some("application/x-ndjson"));
    lines
}

/// A hold stream says `acquired`, then `renewed` every third of the ttl; the watchdog keeps a
/// 1 s lock alive for 5 s with the same fence.
#[tokio::test]
async fn the_watchdog_keeps_a_held_lock_alive() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let started = Instant::now();
    let mut lines = hold(&gw, "dog", json!({"ttl_ms": 1000})).await;
    let acquired = lines.next().await.expect("first line");
    assert_eq!(acquired["event"], "acquired", "{acquired}");
    assert!(
        acquired["token"].is_string() && acquired["fence"].is_u64(),
        "{acquired}"
    );
    let mut renewals = 0;
    while started.elapsed() < Duration::from_secs(5) {
        let event = lines.next().await.expect("stream goes on");
        assert_eq!(event["event"], "renewed", "{event}");
        assert_eq!(event["fence"], acquired["fence"]);
        renewals += 1;
        let (status, seen) = status_json(gw.inspect("dog").await).await;
        assert_eq!(
            status,
            200,
            "the lock lapsed after {:?}: {seen}",
            started.elapsed()
        );
    }
    assert!(
        (13..=16).contains(&renewals),
        "{renewals} renewals in 5 s at ttl/3"
    );
}

/// Killing the client (curl) releases a held lock within 500 ms.
#[tokio::test]
async fn killing_curl_releases_the_held_lock_within_500ms() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let mut curl = Command::new("curl")
        .args([
            "-sN",
            "-X",
            "POST",
            &gw.url("/locks/c/hold"),
            "-d",
            r#"{"ttl_ms": 30000}"#,
        ])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("curl is installed");
    let mut stdout = BufReader::new(curl.stdout.take().expect("stdout")).lines();
    let first = stdout.next_line().await.expect("read").expect("a line");
    assert!(first.contains(r#""event":"acquired""#), "{first}");
    assert_eq!(gw.inspect("c").await.status(), 200);
    curl.kill().await.expect("kill curl");
    let killed = Instant::now();
    let conn = redis.conn().await;
    eventually(
        Duration::from_millis(500),
        "the lock is released after curl is killed",
        || async { (!key_exists(&conn, "lockgate:{c}").await).then_some(()) },
    )
    .await;
    assert!(killed.elapsed() <= 500 * MS);
}

/// A lock lost under a hold stream (deleted behind its back) ends the stream with `lost`, and
/// `lockgate_hold_streams_lost_total` counts it.
#[tokio::test]
async fn a_lost_lock_ends_the_hold_stream_with_lost() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let mut lines = hold(&gw, "l", json!({"ttl_ms": 600})).await;
    assert_eq!(lines.next().await.expect("line")["event"], "acquired");
    let mut conn = redis.conn().await;
    let _: () = conn.del("lockgate:{l}").await.expect("DEL");
    let event = loop {
        let event = lines.next().await.expect("a final line");
        if event["event"] != "renewed" {
            break event;
        }
    };
    assert_eq!(
        event,
        json!({"event": "lost", "name": "l", "reason": "not-held"})
    );
    assert!(lines.next().await.is_none(), "the stream ends after lost");
    let metrics = gw.metrics_text().await;
    assert!(
        metrics.contains("lockgate_hold_streams_lost_total{reason=\"not-held\"} 1\n"),
        "{metrics}"
    );
}

/// At shutdown a hold stream releases its lock and says `released`.
#[tokio::test]
async fn shutdown_releases_held_locks() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let mut lines = hold(&gw, "s", json!({"ttl_ms": 30000})).await;
    assert_eq!(lines.next().await.expect("line")["event"], "acquired");
    gw.service.shut_down();
    assert_eq!(
        lines.next().await,
        Some(json!({"event": "released", "name": "s", "reason": "shutdown"}))
    );
    assert!(lines.next().await.is_none());
    let mut conn = redis.conn().await;
    let held: bool = conn.exists("lockgate:{s}").await.expect("EXISTS");
    assert!(!held);
}

/// A hold request for a held lock fails like an acquire, after waiting if asked.
#[tokio::test]
async fn holding_a_held_lock_is_a_409_after_the_wait() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    gw.locks().acquire("busy", json!({})).await.done(201);
    let started = Instant::now();
    let refused = gw.client().hold("busy", &json!({"wait_ms": 300})).await;
    refused.refused(409, "lock-held");
    assert!(started.elapsed() >= 300 * MS);
}

/// Issue 49: a hold stream asking for `ttl_ms: 100` made the gateway renew 30 times a second
/// for an idle client. Its lease is kept at least `MIN_HOLD_TTL` (600 ms), renewed at most 5
/// times a second, and its events say the ttl kept.
#[tokio::test]
async fn a_hold_stream_keeps_at_least_its_floor() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let floor = lockgate::lock::hold::MIN_HOLD_TTL;
    let mut lines = hold(&gw, "floor", json!({"ttl_ms": 100})).await;
    let acquired = lines.next().await.expect("first line");
    assert_eq!(acquired["event"], "acquired", "{acquired}");
    let ttl = acquired["ttl_ms"].as_u64().expect("ttl_ms");
    assert!(ttl > 100 && ttl <= floor.as_millis() as u64, "{acquired}");
    let started = Instant::now();
    let mut renewals = 0;
    while started.elapsed() < Duration::from_secs(2) {
        let event = lines.next().await.expect("stream goes on");
        assert_eq!(event["event"], "renewed", "{event}");
        renewals += 1;
    }
    // 2 s at one renewal per third of 600 ms: 10 (and one at the edge).
    assert!((8..=11).contains(&renewals), "{renewals} renewals in 2 s");
}
