//! Who holds what: `owner` and `metadata` on acquire, shown by inspect with `acquired_at` and
//! the gateway's waiting count, on every backend (the memory backend, standalone Redis, Redis
//! Cluster, Redlock), kept atomically with the grant, expiring and deleted with it.

use std::time::{Duration, SystemTime};

use redis::AsyncCommands;
use serde_json::{Value, json};

use crate::support::gateway::{Gateway, cluster_config, config, redis_config, redlock_config};
use crate::support::redis::{RedisCluster, RedisServer};
use crate::support::{assert_problem, eventually, status_json, token};

fn holder_body(ttl_ms: u64) -> Value {
    json!({
        "ttl_ms": ttl_ms,
        "owner": "worker-7f9c:4242",
        "metadata": {"addr": "10.0.0.7:8080", "zone": "b"},
    })
}

/// Inspect as JSON, checking on the way that the token is not in it.
async fn inspect(gw: &Gateway, name: &str, token: &str) -> (u16, Value) {
    let response = gw.inspect(name).await;
    let status = response.status().as_u16();
    let raw = response.text().await.expect("body");
    assert!(
        token.is_empty() || !raw.contains(token),
        "inspect leaked the token: {raw}"
    );
    (status, serde_json::from_str(&raw).unwrap_or(Value::Null))
}

/// The walk every backend must pass: a grant naming its holder shows it (with when it was
/// made and nothing of the token), a renewal keeps it, a release removes it, and the next
/// grant without a holder shows none.
async fn holders_round_trip(gw: &Gateway) {
    let before = SystemTime::now();
    let (status, grant) =
        status_json(gw.acquire("election", Some(holder_body(20_000))).await).await;
    assert_eq!(status, 201, "{grant}");
    let token = token(&grant);

    let (status, seen) = inspect(gw, "election", &token).await;
    assert_eq!(status, 200, "{seen}");
    assert_eq!(seen["owner"], "worker-7f9c:4242", "{seen}");
    assert_eq!(
        seen["metadata"],
        json!({"addr": "10.0.0.7:8080", "zone": "b"})
    );
    assert_eq!(seen["fence"], grant["fence"]);
    assert_eq!(seen["waiting"], 0);
    let acquired_at = seen["acquired_at"].as_str().expect("acquired_at");
    let acquired_at = humantime::parse_rfc3339(acquired_at).expect("RFC 3339");
    let slack = Duration::from_secs(2);
    assert!(
        acquired_at + slack >= before && acquired_at <= SystemTime::now() + slack,
        "acquired_at {seen} is not the grant's time"
    );

    let (status, renewed) = status_json(
        gw.renew("election", &token, json!({"ttl_ms": 60_000}))
            .await,
    )
    .await;
    assert_eq!(status, 200, "{renewed}");
    let (_, seen) = inspect(gw, "election", &token).await;
    assert_eq!(seen["owner"], "worker-7f9c:4242", "{seen}");

    assert_eq!(gw.release("election", &token).await.status(), 204);
    let (status, _) = inspect(gw, "election", &token).await;
    assert_eq!(status, 404);

    let (status, grant) = status_json(gw.acquire("election", None).await).await;
    assert_eq!(status, 201, "{grant}");
    let token = crate::support::token(&grant);
    let (_, seen) = inspect(gw, "election", &token).await;
    assert_eq!(seen["held"], true, "{seen}");
    assert!(
        seen.get("owner").is_none(),
        "an earlier holder shows: {seen}"
    );
    assert!(seen.get("metadata").is_none(), "{seen}");
    gw.release("election", &token).await;
}

#[tokio::test]
async fn holders_round_trip_on_the_dev_backend() {
    let gw = Gateway::start(config(lockgate::config::BackendChoice::Memory)).await;
    holders_round_trip(&gw).await;
}

#[tokio::test]
async fn holders_round_trip_on_redis() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    holders_round_trip(&gw).await;
}

#[tokio::test]
async fn holders_round_trip_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let gw = Gateway::start(cluster_config(&cluster.seed_urls())).await;
    holders_round_trip(&gw).await;
}

#[tokio::test]
async fn holders_round_trip_on_redlock() {
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let gw = Gateway::start(redlock_config(&urls, Duration::from_millis(200))).await;
    holders_round_trip(&gw).await;
    // Every node keeps the record under the fence the gateway chose, not its own.
    let (_, grant) = status_json(gw.acquire("leader", Some(holder_body(20_000))).await).await;
    for node in &nodes {
        let record: String = node
            .conn()
            .await
            .get("lockgate:{leader}:holder")
            .await
            .expect("GET");
        let record: Value = serde_json::from_str(&record).expect("JSON");
        assert_eq!(record["fence"], grant["fence"], "{record}");
    }
}

/// In Redis the holder is a key of its own beside the lock, whose value stays exactly the
/// token: written with the grant's ttl, given the renewal's, deleted by release, gone at the
/// grant's expiry.
#[tokio::test]
async fn the_holder_record_lives_and_dies_with_its_grant() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let mut conn = redis.conn().await;
    let (_, grant) = status_json(gw.acquire("job", Some(holder_body(5_000))).await).await;
    let token = token(&grant);
    let stored: String = conn.get("lockgate:{job}").await.expect("GET");
    assert_eq!(stored, token, "the lock key holds exactly the token");
    let record: String = conn.get("lockgate:{job}:holder").await.expect("GET");
    let record: Value = serde_json::from_str(&record).expect("a JSON record");
    assert_eq!(record["fence"], grant["fence"]);
    assert_eq!(record["owner"], "worker-7f9c:4242");
    let pttl: i64 = conn.pttl("lockgate:{job}:holder").await.expect("PTTL");
    assert!((1..=5_000).contains(&pttl), "{pttl}");

    gw.renew("job", &token, json!({"ttl_ms": 60_000})).await;
    let pttl: i64 = conn.pttl("lockgate:{job}:holder").await.expect("PTTL");
    assert!(
        pttl > 55_000,
        "the renewal did not reach the record: {pttl}"
    );

    assert_eq!(gw.release("job", &token).await.status(), 204);
    if crate::support::redis::server_kind() == "redis" {
        // Released by the Lua script, which deletes both keys. (Valkey's native DELIFEQ cannot:
        // its record expires at its ttl and never shows for another grant, as the round trip
        // above checks.)
        let left: bool = conn.exists("lockgate:{job}:holder").await.expect("EXISTS");
        assert!(!left, "release left the holder record");
    }

    let (_, grant) = status_json(gw.acquire("short", Some(holder_body(200))).await).await;
    assert!(grant["fence"].is_u64(), "{grant}");
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
    assert_eq!(gw.inspect("short").await.status(), 404);
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

/// Inspect counts the requests waiting for the lock in this gateway.
#[tokio::test]
async fn inspect_counts_the_requests_waiting_here() {
    let gw = Gateway::start(config(lockgate::config::BackendChoice::Memory)).await;
    let (_, grant) = status_json(gw.acquire("busy", Some(holder_body(10_000))).await).await;
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let http = gw.http.clone();
            let url = gw.url("/locks/busy");
            tokio::spawn(async move {
                http.post(url)
                    .json(&json!({"wait_ms": 10_000}))
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
            })
        })
        .collect();
    eventually(
        Duration::from_secs(5),
        "inspect shows two waiting",
        || async {
            let (_, seen) = inspect(&gw, "busy", "").await;
            (seen["waiting"] == 2).then_some(())
        },
    )
    .await;
    gw.release("busy", &token(&grant)).await;
    for waiter in waiters {
        waiter.abort();
    }
}

/// Owners and metadata are bounded, and a bad one is refused before anything is taken.
#[tokio::test]
async fn bad_owners_and_metadata_are_refused() {
    let gw = Gateway::start(config(lockgate::config::BackendChoice::Memory)).await;
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
    for (body, field) in cases {
        let (status, problem) = status_json(gw.acquire("bounded", Some(body.clone())).await).await;
        assert_problem(status, &problem, 400, "invalid-request");
        assert_eq!(problem["field"], field, "{body} → {problem}");
    }
    assert_eq!(
        gw.inspect("bounded").await.status(),
        404,
        "nothing was taken"
    );
}

/// A hold stream names its holder as an acquire does.
#[tokio::test]
async fn a_hold_stream_names_its_holder() {
    let gw = Gateway::start(config(lockgate::config::BackendChoice::Memory)).await;
    let response = gw
        .http
        .post(gw.url("/locks/leader/hold"))
        .json(&holder_body(3_000))
        .send()
        .await
        .expect("hold");
    assert_eq!(response.status(), 200);
    let mut events = crate::support::Lines::new(response);
    let acquired = events.next().await.expect("an acquired event");
    assert_eq!(acquired["event"], "acquired", "{acquired}");
    let (_, seen) = inspect(&gw, "leader", &token(&acquired)).await;
    assert_eq!(seen["owner"], "worker-7f9c:4242", "{seen}");
    assert_eq!(seen["metadata"]["addr"], "10.0.0.7:8080", "{seen}");
}
