//! Watching a prefix (`GET /locks/events?prefix=`): every transition of the names under it, in
//! order per name, and nothing outside it, on the dev backend, Redis, a Cluster and Redlock; scoped by
//! `inspect` over the whole prefix; bounded by `--max-watchers`; one pattern subscription while
//! open and none after; names let go once free; grants during a lost pub/sub connection found
//! again.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lockgate::config::BackendChoice;
use serde_json::{Value, json};

use crate::support::answers::Answered;
use crate::support::backends::on_backends;
use crate::support::gateway::{Gateway, config, redis_config};
use crate::support::process::ServerProcess;
use crate::support::redis::RedisServer;
use lockgate::client::EventLines;

use crate::support::eventually;

/// Human pace: one transition every this long.
const PACE: Duration = Duration::from_millis(50);

async fn watch_prefix(gw: &Gateway, prefix: &str) -> EventLines {
    let lines = gw.client().prefix_events(&[("prefix", prefix)]).await;
    let lines = lines.done(200);
    assert_eq!(lines.content_type(), Some("application/x-ndjson"));
    lines
}

/// The next event that is not a keep-alive, within 5 s.
async fn next_event(lines: &mut EventLines) -> Value {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let event = lines.next().await.expect("the stream goes on");
            if event["event"] != "keep-alive" {
                return event;
            }
        }
    })
    .await
    .expect("an event within 5 s")
}

/// (event, fence) of an event.
fn summary(event: &Value) -> (String, Option<u64>) {
    (
        event["event"].as_str().expect("event").to_owned(),
        event["fence"].as_u64(),
    )
}

/// Three names under `jobs:` go through grants, releases, an expiry and a revoke, one
/// transition every 50 ms, interleaved, while names outside the prefix (`other:1`, and
/// `jobsx`, which starts with `jobs` but not `jobs:`) change too. The stream first tells the
/// lock held before it opened (`state`), then every transition of the three names, in order
/// for each, with owners and fences, and nothing else.
async fn a_prefix_sees_every_transition_in_order(gw: &Gateway) {
    let locks = gw.locks();
    let before = locks
        .acquire("jobs:0", json!({"ttl_ms": 60_000, "owner": "early"}))
        .await
        .done(201);
    let mut lines = watch_prefix(gw, "jobs:").await;
    let first = next_event(&mut lines).await;
    assert_eq!(
        (
            summary(&first),
            first["name"].clone(),
            first["owner"].clone()
        ),
        (
            ("state".to_owned(), Some(before.fence)),
            json!("jobs:0"),
            json!("early")
        )
    );

    let mut expected: BTreeMap<String, Vec<(String, Option<u64>)>> = BTreeMap::new();
    let mut owners: BTreeMap<u64, String> = BTreeMap::new();
    let names = ["jobs:a", "jobs:b", "jobs:c"];
    let mut step = tokio::time::interval(PACE);
    for round in 0..3 {
        let mut grants = Vec::new();
        for name in names {
            step.tick().await;
            let owner = format!("{name}/{round}");
            let ttl = if name == "jobs:b" && round == 1 {
                120
            } else {
                10_000
            };
            let grant = locks
                .acquire(name, json!({"ttl_ms": ttl, "owner": owner}))
                .await
                .done(201);
            let fence = grant.fence;
            owners.insert(fence, owner);
            expected
                .entry(name.to_owned())
                .or_default()
                .push(("acquired".into(), Some(fence)));
            grants.push((name, ttl, grant));
            // Outside the prefix: never told.
            for outside in ["other:1", "jobsx"] {
                let grant = locks.acquire(outside, json!({})).await.done(201);
                locks.release(outside, &grant.token).await.done(204);
            }
        }
        for (name, ttl, grant) in grants {
            let fence = Some(grant.fence);
            let end = if ttl < 1000 {
                // Left to expire: its end is told when the lease runs out.
                tokio::time::sleep(Duration::from_millis(ttl + 20)).await;
                "expired"
            } else if name == "jobs:c" && round == 2 {
                step.tick().await;
                gw.client().force_release(name).await.done(204);
                "revoked"
            } else {
                step.tick().await;
                locks.release(name, &grant.token).await.done(204);
                "released"
            };
            expected
                .entry(name.to_owned())
                .or_default()
                .push((end.into(), fence));
        }
    }

    let total: usize = expected.values().map(Vec::len).sum();
    let mut seen: BTreeMap<String, Vec<(String, Option<u64>)>> = BTreeMap::new();
    for _ in 0..total {
        let event = next_event(&mut lines).await;
        let name = event["name"].as_str().expect("name").to_owned();
        assert!(
            names.contains(&name.as_str()),
            "outside the prefix: {event}"
        );
        if event["event"] == "acquired" {
            let fence = event["fence"].as_u64().expect("fence");
            assert_eq!(
                event["owner"].as_str(),
                owners.get(&fence).map(String::as_str)
            );
        }
        seen.entry(name).or_default().push(summary(&event));
    }
    assert_eq!(seen, expected);
    // And nothing more: the last transition was told, the outside names never are.
    let quiet = tokio::time::timeout(Duration::from_millis(300), next_event(&mut lines)).await;
    assert!(quiet.is_err(), "unexpected: {quiet:?}");
}

on_backends!(a_prefix_sees_every_transition_in_order: dev, redis, redlock, cluster);

/// With API keys, a prefix stream needs `inspect` on every name under the prefix: a key scoped
/// to `jobs:` may watch `jobs:` and anything under it, not `job`, not everything.
#[tokio::test]
async fn a_prefix_needs_inspect_over_all_of_it() {
    const KEYS: &str = r#"[
        {"name": "auditor", "key": "auditor-key-0123456789", "prefixes": ["jobs:"], "operations": ["inspect"]},
        {"name": "worker", "key": "worker-key-0123456789", "prefixes": ["jobs:"], "operations": ["acquire", "release"]}
    ]"#;
    let mut cfg = config(BackendChoice::Memory);
    cfg.api_keys = Some(lockgate::access::ApiKeys::from_json(KEYS).expect("keys"));
    let gw = Gateway::start(cfg).await;
    let watch = |query: &'static [(&'static str, &'static str)], key: &'static str| {
        let client = gw.client_as(key);
        async move { client.prefix_events(query).await }
    };
    for query in [&[("prefix", "jobs:")], &[("prefix", "jobs:eu:")]] {
        let allowed = watch(query, "auditor-key-0123456789").await;
        assert_eq!(allowed.status(), 200, "{query:?}");
    }
    for (query, key) in [
        (&[("prefix", "jobs:")][..], "worker-key-0123456789"),
        (&[("prefix", "job")], "auditor-key-0123456789"),
        (&[("prefix", "")], "auditor-key-0123456789"),
        (&[], "auditor-key-0123456789"),
        (&[("prefix", "other:")], "auditor-key-0123456789"),
    ] {
        watch(query, key).await.refused(403, "forbidden");
    }
    let anonymous = gw.client().prefix_events(&[("prefix", "jobs:")]).await;
    anonymous.refused(401, "unauthorized");
    for query in [
        &[("prefix", "jobs*")],
        &[("prefix", "{jobs")],
        &[("name", "jobs:1")],
    ] {
        let refused = watch(query, "auditor-key-0123456789").await;
        refused.refused(400, "invalid-request");
    }
}

/// A prefix stream takes a watcher slot, and one more per name it follows: past
/// `--max-watchers` a new one is refused (503), and one that cannot follow a newly granted
/// name ends with `overflow`.
#[tokio::test]
async fn prefix_streams_are_bounded() {
    let mut cfg = config(BackendChoice::Memory);
    cfg.limits.max_watchers = 3;
    let gw = Gateway::start(cfg).await;
    let mut lines = watch_prefix(&gw, "p:").await;
    let locks = gw.locks();
    let one = locks.acquire("p:1", json!({})).await.done(201);
    assert_eq!(
        summary(&next_event(&mut lines).await),
        ("acquired".to_owned(), Some(one.fence))
    );
    let _other = watch_prefix(&gw, "q:").await;
    let refused = gw.client().prefix_events(&[("prefix", "r:")]).await;
    refused.refused(503, "too-many-watchers");
    locks.acquire("p:2", json!({})).await.done(201);
    let last = next_event(&mut lines).await;
    assert_eq!(
        (&last["event"], &last["name"]),
        (&json!("overflow"), &json!("p:2"))
    );
    assert!(
        lines.next().await.is_none(),
        "the stream ends after overflow"
    );
}

/// What a prefix stream costs Redis: nothing before it opens, one pattern subscription while
/// it is open (plus the channels of the names it follows, let go once free for the linger),
/// nothing after it closes.
#[tokio::test]
async fn a_prefix_costs_one_pattern_while_watched() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    assert_eq!(redis.patterns_subscribed(), 0);
    let mut lines = watch_prefix(&gw, "jobs:").await;
    assert_eq!(redis.patterns_subscribed(), 1);
    let locks = gw.locks();
    let grant = locks.acquire("jobs:1", json!({})).await.done(201);
    assert_eq!(next_event(&mut lines).await["event"], "acquired");
    assert!(!redis.channels_mentioning("jobs:1").is_empty());
    locks.release("jobs:1", &grant.token).await.done(204);
    assert_eq!(next_event(&mut lines).await["event"], "released");
    let freed = Instant::now();
    eventually(Duration::from_secs(10), "a free name is let go", || async {
        redis.channels_mentioning("jobs:1").is_empty().then_some(())
    })
    .await;
    assert!(
        freed.elapsed() >= lockgate::lock::prefix_events::LINGER,
        "let go after {:?}",
        freed.elapsed()
    );
    // Taken again after it was let go: followed again.
    let again = locks.acquire("jobs:1", json!({})).await.done(201);
    let event = next_event(&mut lines).await;
    assert_eq!(summary(&event), ("acquired".to_owned(), Some(again.fence)));
    drop(lines);
    eventually(Duration::from_secs(5), "the pattern is dropped", || async {
        (redis.patterns_subscribed() == 0).then_some(())
    })
    .await;
}

/// Many streams on distinct prefixes cost Redis one pattern, not one each (issue 49: a pattern
/// per prefix made every grant on the server pay for every prefix watched), and each stream is
/// told the grants under its own prefix: two prefixes nested, one beside them.
#[tokio::test]
async fn distinct_prefixes_share_one_pattern() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let mut streams = Vec::new();
    for i in 0..40 {
        streams.push(watch_prefix(&gw, &format!("deploy:{i}")).await);
    }
    assert_eq!(redis.patterns_subscribed(), 1, "patterns for 40 prefixes");
    let locks = gw.locks();
    let grant = locks.acquire("deploy:12", json!({})).await.done(201);
    for i in [1, 12] {
        let event = next_event(&mut streams[i]).await;
        assert_eq!(event["name"], "deploy:12", "deploy:{i}");
        assert_eq!(summary(&event), ("acquired".to_owned(), Some(grant.fence)));
    }
    let other = locks.acquire("deploy:2", json!({})).await.done(201);
    let event = next_event(&mut streams[2]).await;
    assert_eq!(summary(&event), ("acquired".to_owned(), Some(other.fence)));
    // deploy:12's stream was not told deploy:2: its next event is its own name's release.
    locks.release("deploy:12", &grant.token).await.done(204);
    let event = next_event(&mut streams[12]).await;
    assert_eq!(event["name"], "deploy:12");
    assert_eq!(event["event"], "released");
    drop(streams);
    eventually(Duration::from_secs(5), "the pattern is dropped", || async {
        (redis.patterns_subscribed() == 0).then_some(())
    })
    .await;
}

/// Grants made while the pub/sub connection was cut are not lost: the stream walks the prefix
/// again once reconnected and tells each lock it did not know as `state`.
#[tokio::test]
async fn grants_during_a_lost_connection_are_found_again() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let mut lines = watch_prefix(&gw, "jobs:").await;
    let _: i64 = redis
        .query(redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub"))
        .expect("CLIENT KILL");
    let grant = gw
        .locks()
        .acquire("jobs:late", json!({"owner": "late"}))
        .await
        .done(201);
    let event = next_event(&mut lines).await;
    assert_eq!(event["name"], "jobs:late");
    assert_eq!(event["fence"].as_u64(), Some(grant.fence));
    assert_eq!(event["owner"], "late");
    assert!(
        ["state", "acquired"].contains(&event["event"].as_str().expect("event")),
        "{event}"
    );
}

/// A Redis user granted the channels `&lockgate:*` (docs/operations.md's ACL line) may not
/// subscribe to a prefix's pattern: Redis allows a pattern only as the ACL writes it. The
/// prefix stream answers 503 at once and the log says what to grant; the pub/sub connection
/// goes on for what else is subscribed on it (a lock's own stream is told its grant), and is
/// not reconnected in a loop (it was: thousands of connections a second, nothing logged, and
/// every stream and waiter on it deaf).
#[tokio::test]
async fn a_prefix_the_redis_user_may_not_watch_is_refused_and_breaks_nothing_else() {
    let redis = RedisServer::start();
    let rules = ["~lockgate:*", "resetchannels", "&lockgate:*", "+@all"];
    redis.acl_user("lockgate", "secret", &rules);
    let url = format!("redis://lockgate:secret@127.0.0.1:{}", redis.port());
    let server = ServerProcess::start(&["--redis-url", &url], &[]).await;
    let client = server.client(None);
    let mut watched = client.events("acl:1").await.done(200);
    assert_eq!(next_event(&mut watched).await["event"], "state");
    // Counted on one connection of the test's own, opened before the first count.
    let mut counter = redis::Client::open(redis.url())
        .and_then(|client| client.get_connection())
        .expect("a connection");
    let mut connections = || {
        let info: String = redis::cmd("INFO")
            .arg("stats")
            .query(&mut counter)
            .expect("INFO stats");
        info.lines()
            .find_map(|line| line.strip_prefix("total_connections_received:"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .expect("total_connections_received")
    };
    let before = connections();

    let started = Instant::now();
    let refused = client.prefix_events(&[("prefix", "acl:")]).await;
    refused.refused(503, "backend-unavailable");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let logs = server.logs();
    assert!(
        logs.lines().any(|line| line.contains("ERROR")
            && line.contains("may not subscribe")
            && line.contains("lockgate:{*}:acquired")),
        "{logs}"
    );

    let client = lockgate::client::Client::new(&server.url(""), None).expect("client");
    let grant = client
        .acquire("acl:1", &json!({}), None, None)
        .await
        .done(201);
    let event = next_event(&mut watched).await;
    assert_eq!(event["event"], "acquired", "{event}");
    assert_eq!(event["fence"].as_u64(), Some(grant.fence));
    // A second of the connection's life: no reconnect (a loop made hundreds in this time).
    let watched_since = Instant::now();
    while watched_since.elapsed() < Duration::from_secs(1) {
        let made = connections() - before;
        assert_eq!(made, 0, "connections made to Redis");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The one pattern docs/operations.md says to grant is enough for every prefix.
    redis.acl_user("lockgate", "secret", &["&lockgate:{*}:acquired"]);
    let mut streams = Vec::new();
    for prefix in ["acl:", "acl:2"] {
        let mut lines = client.prefix_events(&[("prefix", prefix)]).await.done(200);
        if prefix == "acl:" {
            assert_eq!(next_event(&mut lines).await["name"], "acl:1", "held before");
        }
        streams.push(lines);
    }
    let grant = client
        .acquire("acl:20", &json!({}), None, None)
        .await
        .done(201);
    for lines in &mut streams {
        let event = next_event(lines).await;
        assert_eq!(event["event"], "acquired", "{event}");
        assert_eq!(event["fence"].as_u64(), Some(grant.fence));
    }
}
