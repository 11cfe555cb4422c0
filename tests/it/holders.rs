//! Who holds what: `owner` and `metadata` on acquire, shown by inspect with `acquired_at` and
//! the gateway's waiting count, kept atomically with the grant, expiring and deleted with it;
//! and `GET /locks` listing held locks page by page. On every backend: the memory backend,
//! standalone Redis, Redis Cluster, Redlock.

use std::time::{Duration, SystemTime};

use lockgate::config::BackendChoice;
use redis::AsyncCommands;
use serde_json::{Value, json};

use crate::support::answers::{Answered, json_of};
use crate::support::backends::on_backends;
use crate::support::gateway::{Gateway, cluster_config, config, redis_config, redlock_trio};
use crate::support::redis::{RedisCluster, RedisServer};
use crate::support::{assert_problem, eventually, status_json_without, token};

fn holder_body(ttl_ms: u64) -> Value {
    json!({
        "ttl_ms": ttl_ms,
        "owner": "worker-7f9c:4242",
        "metadata": {"addr": "10.0.0.7:8080", "zone": "b"},
    })
}

/// Inspect as JSON, checking on the way that the token is not in it.
async fn inspect(gw: &Gateway, name: &str, token: &str) -> (u16, Value) {
    let tokens: &[&str] = if token.is_empty() { &[] } else { &[token] };
    status_json_without(gw.inspect(name).await, tokens).await
}

/// The walk every backend must pass: a grant naming its holder shows it (with when it was
/// made and nothing of the token), a renewal keeps it, a release removes it, and the next
/// grant without a holder shows none.
async fn holders_round_trip(gw: &Gateway) {
    let locks = gw.locks();
    let before = SystemTime::now();
    let grant = locks
        .acquire("election", holder_body(20_000))
        .await
        .done(201);
    let token = grant.token.clone();

    let (status, seen) = inspect(gw, "election", &token).await;
    assert_eq!(status, 200, "{seen}");
    assert_eq!(seen["owner"], "worker-7f9c:4242", "{seen}");
    assert_eq!(
        seen["metadata"],
        json!({"addr": "10.0.0.7:8080", "zone": "b"})
    );
    assert_eq!(seen["fence"], grant.fence);
    assert_eq!(seen["waiting"], 0);
    let acquired_at = seen["acquired_at"].as_str().expect("acquired_at");
    let acquired_at = humantime::parse_rfc3339(acquired_at).expect("RFC 3339");
    let slack = Duration::from_secs(2);
    assert!(
        acquired_at + slack >= before && acquired_at <= SystemTime::now() + slack,
        "acquired_at {seen} is not the grant's time"
    );

    locks
        .renew("election", &token, json!({"ttl_ms": 60_000}))
        .await
        .done(200);
    let (_, seen) = inspect(gw, "election", &token).await;
    assert_eq!(seen["owner"], "worker-7f9c:4242", "{seen}");

    locks.release("election", &token).await.done(204);
    let (status, _) = inspect(gw, "election", &token).await;
    assert_eq!(status, 404);

    let token = locks.acquire("election", json!({})).await.done(201).token;
    let (_, seen) = inspect(gw, "election", &token).await;
    assert_eq!(seen["held"], true, "{seen}");
    assert!(
        seen.get("owner").is_none(),
        "an earlier holder shows: {seen}"
    );
    assert!(seen.get("metadata").is_none(), "{seen}");
    locks.release("election", &token).await.done(204);
}

on_backends!(holders_round_trip: dev, redis, cluster);

/// A retry with the same `Idempotency-Key` gets the first grant back as it was granted
/// (docs/api.md, "Idempotent acquire"), whatever else its body asks (a longer `ttl_ms`, a
/// `wait_ms`, another `owner`); one that asks for another kind of grant (no holder record, a
/// bounded hold) is refused at once, waiting or fair alike: 422 `idempotency-key-reused`, and
/// the first grant stays as it was.
async fn a_retry_repeats_its_request(gw: &Gateway) {
    let locks = gw.locks();
    let key = "2c9d7e1a-4b3f-4a8e-9c61-7d0e5f2a8b34";
    let first = locks
        .acquire_once("retried", key, holder_body(20_000))
        .await
        .done(201);
    let mut asks_more = holder_body(600_000);
    asks_more["wait_ms"] = json!(100);
    asks_more["owner"] = json!("worker-other");
    let replayed = locks
        .acquire_once("retried", key, asks_more)
        .await
        .done(200);
    assert_eq!(
        (&replayed.token, replayed.fence),
        (&first.token, first.fence)
    );
    assert!(replayed.ttl_ms <= 20_000, "{}", replayed.ttl_ms);
    for other_kind in [
        json!({}),
        json!({"max_hold_ms": 60_000, "owner": "w"}),
        json!({"wait_ms": 60_000}),
        json!({"wait_ms": 60_000, "fair": true}),
    ] {
        locks
            .acquire_once("retried", key, other_kind)
            .await
            .refused(422, "idempotency-key-reused");
    }
    let (_, seen) = inspect(gw, "retried", &first.token).await;
    assert_eq!(
        (&seen["owner"], &seen["fence"]),
        (&json!("worker-7f9c:4242"), &json!(first.fence)),
        "{seen}"
    );
    locks.release("retried", &first.token).await.done(204);
}

on_backends!(a_retry_repeats_its_request: dev, redis);

/// A key reused for another kind of grant takes nothing on any kind of lease: no second permit
/// of a semaphore, no second reader, no reader beside the key's writer, no second grant of a
/// set.
async fn a_key_reused_for_another_kind_takes_nothing(gw: &Gateway) {
    let key = "9f1c2b7e-0d4a-4e6b-8a35-61c7d2e9f084";
    let reused = "idempotency-key-reused";
    let permits = || gw.client().semaphores();
    let permit = permits()
        .acquire("pool", &json!({"permits": 3}), Some(key), None)
        .await
        .done(201);
    permits()
        .acquire(
            "pool",
            &json!({"permits": 3, "owner": "w"}),
            Some(key),
            None,
        )
        .await
        .refused(422, reused);
    let seen = permits().inspect_as::<Value>("pool").await.done(200);
    assert_eq!(seen["in_use"], 1, "{seen}");

    let locks = gw.locks();
    let reader = locks
        .acquire_once("doc", key, json!({"mode": "shared"}))
        .await
        .done(201);
    locks
        .acquire_once("doc", key, json!({"mode": "shared", "max_hold_ms": 60_000}))
        .await
        .refused(422, reused);
    let (_, seen) = inspect(gw, "doc", &reader.token).await;
    assert_eq!(
        seen["shared_holders"].as_array().map(Vec::len),
        Some(1),
        "{seen}"
    );

    let writer = locks.acquire_once("report", key, json!({})).await.done(201);
    locks
        .acquire_once("report", key, json!({"mode": "shared"}))
        .await
        .refused(422, reused);
    let (_, seen) = inspect(gw, "report", &writer.token).await;
    assert_eq!(
        (&seen["mode"], &seen["fence"]),
        (&json!("exclusive"), &json!(writer.fence)),
        "{seen}"
    );

    let names = ["batch:1".to_owned(), "batch:2".to_owned()];
    let set = || gw.client().set(&names);
    let grant = set()
        .acquire("", &json!({"names": names}), Some(key), None)
        .await
        .done(201);
    set()
        .acquire(
            "",
            &json!({"names": names, "max_hold_ms": 60_000}),
            Some(key),
            None,
        )
        .await
        .refused(422, reused);
    for name in &names {
        let (_, seen) = inspect(gw, name, &grant.token).await;
        assert_eq!(seen["fence"], json!(grant.fence), "{seen}");
    }

    permits()
        .release("pool", &permit.token, None)
        .await
        .done(204);
    locks.release("doc", &reader.token).await.done(204);
    locks.release("report", &writer.token).await.done(204);
    set().release("", &grant.token, None).await.done(204);
}

on_backends!(a_key_reused_for_another_kind_takes_nothing: dev, redis);

/// On Redlock too: a node that holds the name with the key's other kind of grant refuses the
/// attempt, and whatever it took on the others is given back.
#[tokio::test]
async fn a_key_reused_on_redlock_is_refused() {
    let (gw, _nodes) = redlock_trio().await;
    let locks = gw.locks();
    let key = "3b8e6f21-7c4d-4f0a-b2e9-0a5d8c1f6e73";
    let first = locks
        .acquire_once("job", key, holder_body(20_000))
        .await
        .done(201);
    locks
        .acquire_once("job", key, json!({}))
        .await
        .refused(422, "idempotency-key-reused");
    let replayed = locks
        .acquire_once("job", key, holder_body(20_000))
        .await
        .done(200);
    assert_eq!(
        (&replayed.token, replayed.fence),
        (&first.token, first.fence)
    );
    locks.release("job", &first.token).await.done(204);
}

#[tokio::test]
async fn holders_round_trip_on_redlock() {
    let (gw, nodes) = redlock_trio().await;
    holders_round_trip(&gw).await;
    // Every node keeps the record under the fence the gateway chose, not its own.
    let grant = gw
        .locks()
        .acquire("leader", holder_body(20_000))
        .await
        .done(201);
    for node in &nodes {
        let record: String = node
            .conn()
            .await
            .get("lockgate:{leader}:holder")
            .await
            .expect("GET");
        let record: Value = serde_json::from_str(&record).expect("JSON");
        assert_eq!(record["fence"], grant.fence, "{record}");
    }
}

/// In Redis the holder is a key of its own beside the lock, whose value stays exactly the
/// token: written with the grant's ttl, given the renewal's, deleted by release, gone at the
/// grant's expiry.
#[tokio::test]
async fn the_holder_record_lives_and_dies_with_its_grant() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let locks = gw.locks();
    let mut conn = redis.conn().await;
    let grant = locks.acquire("job", holder_body(5_000)).await.done(201);
    let token = grant.token.clone();
    let stored: String = conn.get("lockgate:{job}").await.expect("GET");
    assert_eq!(stored, token, "the lock key holds exactly the token");
    let record: String = conn.get("lockgate:{job}:holder").await.expect("GET");
    let record: Value = serde_json::from_str(&record).expect("a JSON record");
    assert_eq!(record["fence"], grant.fence);
    assert_eq!(record["owner"], "worker-7f9c:4242");
    let pttl: i64 = conn.pttl("lockgate:{job}:holder").await.expect("PTTL");
    assert!((1..=5_000).contains(&pttl), "{pttl}");

    locks
        .renew("job", &token, json!({"ttl_ms": 60_000}))
        .await
        .done(200);
    let pttl: i64 = conn.pttl("lockgate:{job}:holder").await.expect("PTTL");
    assert!(
        pttl > 55_000,
        "the renewal did not reach the record: {pttl}"
    );

    locks.release("job", &token).await.done(204);
    if crate::support::redis::server_kind() == "redis" {
        // Released by the Lua script, which deletes both keys. (Valkey's native DELIFEQ cannot:
        // its record expires at its ttl and never shows for another grant, as the round trip
        // above checks.)
        let left: bool = conn.exists("lockgate:{job}:holder").await.expect("EXISTS");
        assert!(!left, "release left the holder record");
    }

    locks.acquire("short", holder_body(200)).await.done(201);
    eventually(
        Duration::from_secs(3),
        "the grant and its record expire",
        || {
            let mut conn = conn.clone();
            async move {
                let left: u32 = conn
                    .exists(&["lockgate:{short}", "lockgate:{short}:holder"])
                    .await
                    .expect("EXISTS");
                (left == 0).then_some(())
            }
        },
    )
    .await;
    locks.inspect("short").await.refused(404, "lock-not-held");
}

/// A lock taken by a plain Redis client (the classic `SET NX PX` with a random value, as
/// redis-py's `Lock` takes it) is held with no owner, fence or grant time.
#[tokio::test]
async fn a_plain_redis_lock_shows_as_held_without_owner() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let mut conn = redis.conn().await;
    let set: Option<String> = redis::cmd("SET")
        .arg("lockgate:{plain}")
        .arg("4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a99")
        .arg("NX")
        .arg("PX")
        .arg(10_000)
        .query_async(&mut conn)
        .await
        .expect("SET");
    assert_eq!(set.as_deref(), Some("OK"));
    let (status, seen) = inspect(&gw, "plain", "4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a99").await;
    assert_eq!(status, 200, "{seen}");
    assert_eq!(seen["held"], true);
    assert!(
        seen["ttl_ms"].as_u64().is_some_and(|ms| ms <= 10_000),
        "{seen}"
    );
    for absent in ["owner", "metadata", "fence", "acquired_at"] {
        assert!(seen.get(absent).is_none(), "{absent} in {seen}");
    }
}

/// Inspect counts the requests waiting for the lock in this gateway, and shows for whom each
/// waits (the owner and metadata it sent), how long so far and whether in the fair queue,
/// the longest waiting first.
#[tokio::test]
async fn inspect_shows_the_requests_waiting_here_and_for_whom() {
    let gw = Gateway::dev().await;
    let locks = gw.locks();
    let grant = locks.acquire("busy", holder_body(10_000)).await.done(201);
    let mut waiters = Vec::new();
    for body in [
        json!({"wait_ms": 10_000, "owner": "plain-waiter", "metadata": {"job": 7}}),
        json!({"wait_ms": 10_000, "owner": "fair-waiter", "fair": true}),
        json!({"wait_ms": 10_000}),
    ] {
        let locks = gw.locks();
        waiters.push(tokio::spawn(
            async move { locks.acquire("busy", body).await },
        ));
        let count = waiters.len();
        // One at a time, so that their order is known.
        eventually(Duration::from_secs(5), "the waiter is counted", || async {
            let (_, seen) = inspect(&gw, "busy", "").await;
            (seen["waiting"] == count).then_some(())
        })
        .await;
    }
    let (_, seen) = inspect(&gw, "busy", "").await;
    let shown: Vec<(Value, Value, Value)> = (seen["waiters"].as_array().expect("waiters"))
        .iter()
        .map(|w| (w["owner"].clone(), w["metadata"].clone(), w["fair"].clone()))
        .collect();
    assert_eq!(
        shown,
        [
            (json!("plain-waiter"), json!({"job": 7}), json!(false)),
            (json!("fair-waiter"), Value::Null, json!(true)),
            (Value::Null, Value::Null, json!(false)),
        ],
        "{seen}"
    );
    let waited: Vec<u64> = (seen["waiters"].as_array().expect("waiters"))
        .iter()
        .map(|w| w["waited_ms"].as_u64().expect("waited_ms"))
        .collect();
    assert!(waited.windows(2).all(|w| w[0] >= w[1]), "{waited:?}");
    locks.release("busy", &grant.token).await.done(204);
    for waiter in waiters {
        waiter.abort();
    }
}

/// Owners and metadata are bounded, and a bad one is refused before anything is taken.
#[tokio::test]
async fn bad_owners_and_metadata_are_refused() {
    let gw = Gateway::dev().await;
    let long = "x".repeat(129);
    let big = "y".repeat(1100);
    let cases = [
        (json!({"owner": ""}), "owner"),
        (json!({"owner": long}), "owner"),
        (json!({"owner": "a\nb"}), "owner"),
        (json!({"owner": 7}), "owner"),
        (json!({"metadata": "leader"}), "metadata"),
        (json!({"metadata": [1, 2]}), "metadata"),
        (json!({"metadata": {"blob": big}}), "metadata"),
    ];
    let locks = gw.locks();
    for (body, field) in cases {
        let problem = locks
            .acquire("bounded", body.clone())
            .await
            .refused(400, "invalid-request");
        assert_eq!(
            problem.field.as_deref(),
            Some(field),
            "{body} → {problem:?}"
        );
    }
    locks.inspect("bounded").await.refused(404, "lock-not-held");
}

/// A hold stream names its holder as an acquire does.
#[tokio::test]
async fn a_hold_stream_names_its_holder() {
    let gw = Gateway::dev().await;
    let held = gw.client().hold("leader", &holder_body(3_000)).await;
    let mut events = held.done(200);
    let acquired = events.next().await.expect("an acquired event");
    assert_eq!(acquired["event"], "acquired", "{acquired}");
    let (_, seen) = inspect(&gw, "leader", &token(&acquired)).await;
    assert_eq!(seen["owner"], "worker-7f9c:4242", "{seen}");
    assert_eq!(seen["metadata"]["addr"], "10.0.0.7:8080", "{seen}");
}

/// Every page of `GET /locks?prefix=…&limit=…`, followed to the end: the names listed, in
/// order of listing, each page checked against the limit.
async fn list_all(gw: &Gateway, prefix: &str, limit: usize) -> Vec<Value> {
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let limit_text = limit.to_string();
        let mut query = vec![("prefix", prefix), ("limit", &limit_text)];
        query.extend(cursor.as_deref().map(|cursor| ("cursor", cursor)));
        let (status, page) = json_of(gw.client().list::<Value>(&query).await);
        assert_eq!(status, 200, "{page}");
        let locks = page["locks"].as_array().expect("locks").clone();
        assert!(locks.len() <= limit, "a page over its limit: {page}");
        listed.extend(locks);
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return listed,
        }
    }
    panic!("the listing did not end");
}

/// Takes `list:0` … `list:n-1` (the even ones naming an owner) and one lock outside the prefix,
/// then lists `list:` seven at a time: each lock exactly once, with what inspect shows, and
/// nothing else.
async fn listing_pages_through_held_locks(gw: &Gateway, n: usize) {
    let locks = gw.locks();
    for i in 0..n {
        let body = if i.is_multiple_of(2) {
            json!({"ttl_ms": 30_000, "owner": format!("owner-{i}")})
        } else {
            json!({"ttl_ms": 30_000})
        };
        locks.acquire(&format!("list:{i}"), body).await.done(201);
    }
    locks.acquire("other:1", json!({})).await.done(201);
    let listed = list_all(gw, "list:", 7).await;
    let mut names: Vec<String> = listed
        .iter()
        .map(|lock| lock["name"].as_str().expect("name").to_owned())
        .collect();
    let count = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), count, "a lock was listed twice: {listed:?}");
    let mut expected: Vec<String> = (0..n).map(|i| format!("list:{i}")).collect();
    expected.sort();
    assert_eq!(names, expected);
    for lock in &listed {
        let i: usize = lock["name"].as_str().unwrap()["list:".len()..]
            .parse()
            .unwrap();
        assert_eq!(lock["held"], true);
        assert!(lock["fence"].is_u64() && lock["ttl_ms"].is_u64(), "{lock}");
        assert!(lock.get("token").is_none(), "{lock}");
        if i.is_multiple_of(2) {
            assert_eq!(lock["owner"], format!("owner-{i}"), "{lock}");
        } else {
            assert!(lock.get("owner").is_none(), "{lock}");
        }
    }
    assert_eq!(list_all(gw, "nothing-here:", 5).await, Vec::<Value>::new());
}

#[tokio::test]
async fn listing_on_the_dev_backend() {
    let gw = Gateway::dev().await;
    listing_pages_through_held_locks(&gw, 25).await;
}

/// On one Redis, among thousands of other keys: the walk takes several SCAN steps.
#[tokio::test]
async fn listing_on_redis_among_other_keys() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let mut conn = redis.conn().await;
    let mut filler = redis::pipe();
    for i in 0..5000 {
        filler.set(format!("app:key:{i}"), i).ignore();
    }
    let () = filler.query_async(&mut conn).await.expect("filler keys");
    listing_pages_through_held_locks(&gw, 40).await;
}

/// In a Cluster the walk goes through every master.
#[tokio::test]
async fn listing_across_cluster_masters() {
    let cluster = RedisCluster::start(3, 0);
    let gw = Gateway::start(cluster_config(&cluster.seed_urls())).await;
    listing_pages_through_held_locks(&gw, 30).await;
    let mut masters_with_locks = 0;
    for master in cluster.masters() {
        let keys: Vec<String> = master
            .query(redis::cmd("KEYS").arg("lockgate:{list:*}"))
            .expect("KEYS");
        masters_with_locks += usize::from(!keys.is_empty());
    }
    assert_eq!(
        masters_with_locks, 3,
        "the locks should spread over every master"
    );
}

/// In Redlock a lock is listed once, by the majority view.
#[tokio::test]
async fn listing_on_redlock() {
    let (gw, nodes) = redlock_trio().await;
    listing_pages_through_held_locks(&gw, 20).await;
    // A key on one node only is no lock.
    let mut conn = nodes[2].conn().await;
    let () = conn
        .set("lockgate:{list:minority}", "x")
        .await
        .expect("SET");
    let names: Vec<Value> = list_all(&gw, "list:m", 10).await;
    assert!(names.is_empty(), "{names:?}");
}

/// A lock taken by a plain Redis client is listed as held, with no owner.
#[tokio::test]
async fn listing_shows_plain_redis_locks_without_owner() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let mut conn = redis.conn().await;
    let () = redis::cmd("SET")
        .arg("lockgate:{plain:1}")
        .arg("4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a99")
        .arg("PX")
        .arg(10_000)
        .query_async(&mut conn)
        .await
        .expect("SET");
    let listed = list_all(&gw, "plain:", 10).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["name"], "plain:1");
    assert_eq!(listed[0]["held"], true);
    assert!(listed[0].get("owner").is_none(), "{listed:?}");
}

/// With API keys, a listing shows only the names the key may inspect.
#[tokio::test]
async fn a_listing_shows_only_what_the_key_may_inspect() {
    const TEAMS: &str = r#"[
        {"name": "team-a", "key": "team-a-key-0123456789", "prefixes": ["a:"]},
        {"name": "team-b", "key": "team-b-key-0123456789", "prefixes": ["b:"]},
        {"name": "auditor", "key": "auditor-key-0123456789", "prefixes": [""], "operations": ["inspect"]},
        {"name": "scraper", "key": "scraper-key-0123456789", "prefixes": [], "operations": ["metrics"]}
    ]"#;
    let mut cfg = config(BackendChoice::Memory);
    cfg.api_keys = Some(lockgate::access::ApiKeys::from_json(TEAMS).expect("keys"));
    let gw = Gateway::start(cfg).await;
    for (key, name) in [
        ("team-a-key-0123456789", "a:1"),
        ("team-a-key-0123456789", "a:2"),
        ("team-b-key-0123456789", "b:1"),
    ] {
        let client = gw.client_as(key);
        client.acquire(name, &json!({}), None, None).await.done(201);
    }
    let listed = |key: &'static str| {
        let client = gw.client_as(key);
        async move {
            let (status, page) = json_of(client.list::<Value>(&[]).await);
            assert_eq!(status, 200, "{page}");
            let mut names: Vec<String> = page["locks"]
                .as_array()
                .expect("locks")
                .iter()
                .map(|lock| lock["name"].as_str().expect("name").to_owned())
                .collect();
            names.sort();
            names
        }
    };
    assert_eq!(listed("team-a-key-0123456789").await, ["a:1", "a:2"]);
    assert_eq!(listed("team-b-key-0123456789").await, ["b:1"]);
    assert_eq!(
        listed("auditor-key-0123456789").await,
        ["a:1", "a:2", "b:1"]
    );
    assert!(
        listed("scraper-key-0123456789").await.is_empty(),
        "a metrics-only key sees no lock"
    );
    let anonymous = gw.client().list::<Value>(&[]).await;
    anonymous.refused(401, "unauthorized");
}

/// Bad listing queries are refused with the parameter named.
#[tokio::test]
async fn bad_listing_queries_are_refused() {
    let gw = Gateway::dev().await;
    for (query, field) in [
        (("prefix", "a*"), Some("prefix")),
        (("limit", "0"), Some("limit")),
        (("limit", "1001"), Some("limit")),
        (("cursor", "nope"), Some("cursor")),
        (("colour", "red"), None),
    ] {
        let (status, problem) = json_of(gw.client().list::<Value>(&[query]).await);
        assert_problem(status, &problem, 400, "invalid-request");
        assert_eq!(problem["field"].as_str(), field, "{query:?}: {problem}");
    }
}
