//! Watching locks (`GET /locks/{name}/events`): Server-Sent Events and NDJSON, in order, on the
//! dev backend, Redis and Redis Cluster; on Redlock, the holder's fence; expiry noticed at its time; leader hand-off seen by a
//! watcher; many watchers on one name; the watcher limit.

use std::time::{Duration, Instant};

use lockgate::config::BackendChoice;
use serde_json::{Value, json};

use crate::support::answers::Answered;
use crate::support::backends::on_backends;
use crate::support::gateway::{Gateway, config, redis_config};
use crate::support::proxy::LatencyProxy;
use crate::support::redis::RedisServer;
use lockgate::client::EventLines;

/// Reads Server-Sent Events the way a browser's `EventSource` does: `event:` and `data:` lines
/// up to a blank line; comments (`:`) skipped.
struct Sse {
    response: reqwest::Response,
    buffer: String,
}

impl Sse {
    async fn open(gw: &Gateway, name: &str) -> Self {
        // Raw HTTP: the Server-Sent Events framing a browser reads is what is tested.
        let response = gw
            .http
            .get(gw.url(&format!("/locks/{name}/events")))
            .send()
            .await
            .expect("events");
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next event's data, checked against its `event:` line.
    async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut kind = None;
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("event: ") {
                        kind = Some(value.to_owned());
                    } else if let Some(value) = line.strip_prefix("data: ") {
                        data.push_str(value);
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                let event: Value = serde_json::from_str(&data).expect("JSON data");
                assert_eq!(kind.as_deref(), event["event"].as_str(), "{block}");
                return event;
            }
            let chunk = self.response.chunk().await.expect("stream").expect("open");
            self.buffer
                .push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        }
    }
}

async fn ndjson(gw: &Gateway, name: &str) -> EventLines {
    let lines = gw.client().events(name).await.done(200);
    assert_eq!(lines.content_type(), Some("application/x-ndjson"));
    lines
}

/// (event, fence) of an event, with its owner when it has one.
fn summary(event: &Value) -> (String, Option<u64>, Option<String>) {
    (
        event["event"].as_str().expect("event").to_owned(),
        event["fence"].as_u64(),
        event["owner"].as_str().map(str::to_owned),
    )
}

/// Acquire → release, acquire → expiry, acquire → revoke, seen in order by an SSE and an
/// NDJSON watcher alike; the expiry within 50 ms of the lease's end. Each step waits until
/// both watchers saw the one before: a grant and its release between two looks of the
/// observer would merge into nothing (see `lock::events`).
async fn events_come_in_order(gw: &Gateway) {
    let mut sse = Sse::open(gw, "watched").await;
    let mut lines = ndjson(gw, "watched").await;
    let first = sse.next().await;
    assert_eq!(
        (first["event"].clone(), first["held"].clone()),
        (json!("state"), json!(false))
    );
    assert_eq!(lines.next().await.expect("state"), first);
    let mut both_see = async |kind: &str, fence: Option<u64>, owner: Option<&str>| {
        let expected = (kind.to_owned(), fence, owner.map(str::to_owned));
        let seen = sse.next().await;
        assert_eq!(summary(&seen), expected, "{seen}");
        assert_eq!(summary(&lines.next().await.expect("line")), expected);
    };

    let locks = gw.locks();
    let a = locks
        .acquire("watched", json!({"ttl_ms": 10_000, "owner": "a"}))
        .await
        .done(201);
    both_see("acquired", Some(a.fence), Some("a")).await;
    locks.release("watched", &a.token).await.done(204);
    both_see("released", Some(a.fence), None).await;

    let sent = Instant::now();
    let b = locks.acquire("watched", json!({"ttl_ms": 300})).await;
    let granted = Instant::now();
    let b = b.done(201);
    both_see("acquired", Some(b.fence), None).await;
    both_see("expired", Some(b.fence), None).await;
    let at = Instant::now();
    assert!(at >= sent + Duration::from_millis(300), "expired early");
    // Seen at the lease's end (the watcher wakes then), not at some later look.
    assert!(
        at <= granted + Duration::from_millis(300 + 400),
        "expiry seen {:?} after the lease's end",
        at.saturating_duration_since(granted + Duration::from_millis(300))
    );

    let c = locks.acquire("watched", json!({})).await.done(201);
    both_see("acquired", Some(c.fence), None).await;
    gw.client().force_release("watched").await.done(204);
    both_see("revoked", Some(c.fence), None).await;
}

on_backends!(events_come_in_order: dev, redis, cluster);

/// With keyspace notifications on (releases come from Redis itself, grants still from the
/// acquire script's announcement), and a lock deleted by a plain client seen as released.
#[tokio::test]
async fn events_on_redis_with_keyspace_notifications() {
    let redis = RedisServer::start();
    redis.enable_keyspace_notifications();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    events_come_in_order(&gw).await;
    let mut lines = ndjson(&gw, "plain").await;
    assert_eq!(lines.next().await.expect("state")["held"], false);
    let grant = gw.locks().acquire("plain", json!({})).await.done(201);
    assert_eq!(
        summary(&lines.next().await.expect("acquired")).0,
        "acquired"
    );
    let deleted_at = Instant::now();
    let _: () = redis
        .query(redis::cmd("DEL").arg("lockgate:{plain}"))
        .expect("DEL");
    let seen = lines.next().await.expect("released");
    assert_eq!(
        summary(&seen),
        ("released".to_owned(), Some(grant.fence), None)
    );
    // Announced by Redis: seen long before the lease's 30 s end, when a look would find it.
    assert!(
        deleted_at.elapsed() < Duration::from_secs(2),
        "{:?}",
        deleted_at.elapsed()
    );
}

/// On Redlock each node gives a grant a fence of its own, and the gateway then raises them all
/// to the highest: a watcher is told the fence the holder got, never one in between. One node
/// answers 20 ms late (a proxy), so that every grant is seen on the other two, with their own
/// fences, before it is final. Each grant is held until the watcher told it, so that none
/// merges away.
#[tokio::test]
async fn redlock_watchers_are_told_the_holders_fence() {
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let slow = LatencyProxy::start(nodes[2].port(), Duration::from_millis(10)).await;
    let urls = vec![nodes[0].url(), nodes[1].url(), slow.url()];
    let gw = Gateway::start(crate::support::gateway::redlock_config(
        &urls,
        Duration::from_millis(200),
    ))
    .await;
    let mut lines = ndjson(&gw, "fenced").await;
    assert_eq!(lines.next().await.expect("state")["held"], false);
    let locks = gw.locks();
    for round in 0..50 {
        let grant = locks.acquire("fenced", json!({})).await.done(201);
        let told = lines.next().await.expect("acquired");
        assert_eq!(
            summary(&told),
            ("acquired".to_owned(), Some(grant.fence), None),
            "round {round}"
        );
        locks.release("fenced", &grant.token).await.done(204);
        let told = lines.next().await.expect("released");
        assert_eq!(
            summary(&told),
            ("released".to_owned(), Some(grant.fence), None),
            "round {round}"
        );
    }
}

/// Leader election: two campaigns (hold streams naming their owner), one watcher. When the
/// leader's stream closes, the watcher sees it released and the follower acquire, about when
/// the follower itself learns it leads.
#[tokio::test]
async fn a_watcher_sees_the_leader_hand_off() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let campaign = |owner: &str| {
        let body = json!({"ttl_ms": 5000, "wait_ms": 10_000, "owner": owner, "metadata": {"addr": format!("{owner}:8080")}});
        let client = gw.client();
        async move { client.hold("leader", &body).await }
    };
    let mut a = campaign("a").await.done(200);
    assert_eq!(a.next().await.expect("a leads")["event"], "acquired");
    let mut watcher = Sse::open(&gw, "leader").await;
    let state = watcher.next().await;
    assert_eq!(
        (state["owner"].clone(), state["metadata"]["addr"].clone()),
        (json!("a"), json!("a:8080"))
    );
    let b_campaign = tokio::spawn(campaign("b"));
    // b waits in line; a steps down by closing its stream.
    crate::support::eventually(Duration::from_secs(5), "b waits", || async {
        let seen: Value = gw.inspect("leader").await.json().await.ok()?;
        (seen["waiting"] == 1).then_some(())
    })
    .await;
    drop(a);
    let released = watcher.next().await;
    assert_eq!(summary(&released).0, "released", "{released}");
    let acquired = watcher.next().await;
    let watcher_learned = Instant::now();
    assert_eq!(summary(&acquired).0, "acquired", "{acquired}");
    assert_eq!(acquired["owner"], "b");
    let mut b = b_campaign.await.expect("task").done(200);
    let b_leads = b.next().await.expect("b leads");
    let b_learned = Instant::now();
    assert_eq!(b_leads["fence"], acquired["fence"]);
    let gap = if watcher_learned > b_learned {
        watcher_learned - b_learned
    } else {
        b_learned - watcher_learned
    };
    // Both learn from the same grant, not the watcher at a later look.
    assert!(
        gap < Duration::from_millis(500),
        "the watcher learned {gap:?} apart from the new leader"
    );
}

/// 1,000 watchers of one name each see every transition, in the same order.
#[tokio::test]
async fn a_thousand_watchers_see_every_transition() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let mut watchers = Vec::new();
    for _ in 0..1000 {
        watchers.push(ndjson(&gw, "popular").await);
    }
    for watcher in &mut watchers {
        assert_eq!(watcher.next().await.expect("state")["event"], "state");
    }
    let locks = gw.locks();
    let first = locks.acquire("popular", json!({})).await.done(201);
    // Each transition once all watchers saw the one before: none may merge with the next.
    let mut expected = vec![("acquired".to_owned(), Some(first.fence))];
    for watcher in &mut watchers {
        let seen = watcher.next().await.expect("acquired");
        assert_eq!((summary(&seen).0, summary(&seen).1), expected[0].clone());
    }
    let metrics = gw.metrics_text().await;
    assert!(metrics.contains("lockgate_watchers 1000\n"), "{metrics}");
    locks.release("popular", &first.token).await.done(204);
    let second = locks
        .acquire("popular", json!({"owner": "z"}))
        .await
        .done(201);
    expected = vec![
        ("released".to_owned(), Some(first.fence)),
        ("acquired".to_owned(), Some(second.fence)),
    ];
    let all = watchers.into_iter().map(|mut watcher| {
        let expected = expected.clone();
        tokio::spawn(async move {
            for (kind, fence) in expected {
                let seen = watcher.next().await.expect("event");
                assert_eq!(
                    (summary(&seen).0, summary(&seen).1),
                    (kind, fence),
                    "{seen}"
                );
            }
        })
    });
    for result in futures_util::future::join_all(all).await {
        result.expect("every watcher saw every transition");
    }
}

/// Past `--max-watchers`, a watch is refused with its own problem type.
#[tokio::test]
async fn watchers_are_bounded() {
    let mut cfg = config(BackendChoice::Memory);
    cfg.limits.max_watchers = 2;
    let gw = Gateway::start(cfg).await;
    let _a = ndjson(&gw, "x").await;
    let _b = ndjson(&gw, "y").await;
    let refused = gw.client().events("x").await;
    refused.refused(503, "too-many-watchers");
    drop(_a);
    crate::support::eventually(Duration::from_secs(5), "a slot frees up", || async {
        let answer = gw.client().events("x").await.ok()?;
        (answer.status() == 200).then_some(())
    })
    .await;
}

/// With API keys, watching needs `inspect` on the name.
#[tokio::test]
async fn watching_needs_inspect() {
    const KEYS: &str = r#"[
        {"name": "auditor", "key": "auditor-key-0123456789", "prefixes": ["jobs:"], "operations": ["inspect"]},
        {"name": "worker", "key": "worker-key-0123456789", "prefixes": ["jobs:"], "operations": ["acquire", "release"]}
    ]"#;
    let mut cfg = config(BackendChoice::Memory);
    cfg.api_keys = Some(lockgate::access::ApiKeys::from_json(KEYS).expect("keys"));
    let gw = Gateway::start(cfg).await;
    let auditor = gw.client_as("auditor-key-0123456789");
    auditor.events("jobs:1").await.done(200);
    for (name, key) in [
        ("jobs:1", "worker-key-0123456789"),
        ("other:1", "auditor-key-0123456789"),
    ] {
        gw.client_as(key)
            .events(name)
            .await
            .refused(403, "forbidden");
    }
    let anonymous = gw.client().events("jobs:1").await;
    anonymous.refused(401, "unauthorized");
}

/// A watcher that goes away takes its name's subscriptions with it, while the pub/sub
/// connection stays open for others: the gateway's subscriptions are O(names watched now),
/// never O(names ever watched).
#[tokio::test]
async fn a_watcher_that_leaves_unsubscribes_its_name() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    // Another name keeps the connection busy, so only the unsubscription can empty the list.
    let _other = Sse::open(&gw, "still-watched").await;
    for round in 0..3 {
        let watcher = Sse::open(&gw, "left").await;
        assert!(
            !redis.channels_mentioning("left").is_empty(),
            "round {round}"
        );
        drop(watcher);
        crate::support::eventually(Duration::from_secs(5), "unsubscribed", || async {
            redis.channels_mentioning("left").is_empty().then_some(())
        })
        .await;
    }
    assert!(!redis.channels_mentioning("still-watched").is_empty());
}
