//! Graceful shutdown of the real binary: in-flight requests finish, readiness fails first,
//! hold streams are released.

use std::time::Duration;

use serde_json::json;

use crate::support::answers::{Answered, json_of};
use crate::support::process::ServerProcess;
use crate::support::proxy::LatencyProxy;
use crate::support::redis::RedisServer;
use crate::support::{assert_problem, eventually, key_exists};

/// SIGTERM while a request is in flight (Redis answers slowly): the request completes, then
/// the process exits 0.
#[tokio::test]
async fn sigterm_lets_an_in_flight_request_finish() {
    let redis = RedisServer::start();
    let proxy = LatencyProxy::start(redis.port(), Duration::ZERO).await;
    let mut server =
        ServerProcess::start(&["--redis-url", &proxy.url(), "--redis-timeout", "5s"], &[]).await;
    let client = server.client(None);
    // Connected and scripts loaded before Redis slows down.
    let warm = client.acquire("warm", &json!({}), None, None).await;
    warm.done(201);
    proxy.set_delay(Duration::from_millis(1500));
    let slow = tokio::spawn({
        let client = client.clone();
        async move { client.acquire("slow", &json!({}), None, None).await }
    });
    eventually(
        Duration::from_secs(2),
        "the slow request is in flight",
        || async {
            let metrics = client.metrics().await.done(200);
            metrics
                .contains("lockgate_in_flight_requests 1\n")
                .then_some(())
        },
    )
    .await;
    server.signal("TERM");
    slow.await.expect("join").done(201);
    let status = server.exit_within(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0), "{}", server.logs());
}

/// After SIGTERM readiness answers 503 at once while requests are still served for the
/// shutdown delay; then the process exits 0.
#[tokio::test]
async fn readiness_fails_first_on_sigterm() {
    let mut server = ServerProcess::start(&["--dev", "--shutdown-delay", "1500ms"], &[]).await;
    let client = server.client(None);
    client.readiness().await.done(200);
    server.signal("TERM");
    let (status, body) = eventually(Duration::from_secs(1), "readiness fails", || async {
        let (status, body) = json_of(client.readiness().await);
        (status == 503).then_some((status, body))
    })
    .await;
    assert_problem(status, &body, 503, "shutting-down");
    let acquired = client.acquire("late", &json!({}), None, None).await;
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
    let client = server.client(None);
    let mut lines = client
        .hold("held:1", &json!({"ttl_ms": 60000}))
        .await
        .done(200);
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
