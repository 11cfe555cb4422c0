//! Read/write locks: `POST /locks/{name}` with `mode: "shared"` takes a reader's grant. Readers
//! share a name, writers exclude readers and each other, a waiting writer holds off new
//! readers, fences grow across both; readers renew and release with their own tokens. On the
//! memory backend, standalone Redis, Sentinel and Cluster; Redlock answers 501 `not-offered`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::gateway::{
    Gateway, cluster_config, redis_config, redlock_config, sentinel_config,
};
use crate::support::redis::{MASTER, RedisCluster, RedisServer, SentinelGroup};
use crate::support::workload::{self, Workload};
use crate::support::{assert_problem, eventually, key_exists, status_json, test_name, token};

fn shared(ttl_ms: u64) -> Value {
    json!({"mode": "shared", "ttl_ms": ttl_ms})
}

fn fence(body: &Value) -> u64 {
    body["fence"]
        .as_u64()
        .unwrap_or_else(|| panic!("no fence in {body}"))
}

async fn inspect(gw: &Gateway, name: &str) -> (u16, Value) {
    status_json(gw.inspect(name).await).await
}

/// The walk every backend must pass.
async fn readers_and_writers(gw: &Gateway) {
    let name = "doc";
    let (status, r1) = status_json(
        gw.acquire(
            name,
            Some(json!({"mode": "shared", "ttl_ms": 20_000, "owner": "reader-1"})),
        )
        .await,
    )
    .await;
    assert_eq!(status, 201, "{r1}");
    let (status, r2) = status_json(gw.acquire(name, Some(shared(10_000))).await).await;
    assert_eq!(status, 201, "{r2}");
    assert!(fence(&r2) > fence(&r1));

    let (status, seen) = inspect(gw, name).await;
    assert_eq!(status, 200, "{seen}");
    assert_eq!(seen["mode"], "shared", "{seen}");
    let holders = seen["shared_holders"].as_array().expect("shared holders");
    assert_eq!(holders.len(), 2, "{seen}");
    assert_eq!(
        holders[0]["fence"], r2["fence"],
        "first to end first: {seen}"
    );
    assert_eq!(holders[1]["owner"], "reader-1", "{seen}");
    let raw = seen.to_string();
    assert!(
        !raw.contains(&token(&r1)) && !raw.contains(&token(&r2)),
        "{raw}"
    );
    // A listing shows the name as inspect does, readers included.
    let listed = gw
        .http
        .get(gw.url(&format!("/locks?prefix={name}")))
        .send()
        .await;
    let (status, page) = status_json(listed.expect("list")).await;
    assert_eq!(status, 200, "{page}");
    let entry = page["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .find(|lock| lock["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not listed: {page}"));
    assert_eq!(entry["mode"], "shared", "{page}");
    let fences_and_owners = |holders: &Value| -> Vec<(Value, Value)> {
        let holders = holders.as_array().expect("shared holders");
        holders
            .iter()
            .map(|h| (h["fence"].clone(), h["owner"].clone()))
            .collect()
    };
    assert_eq!(
        fences_and_owners(&entry["shared_holders"]),
        fences_and_owners(&seen["shared_holders"]),
        "{page}"
    );

    // A writer that does not wait is refused; one that waits holds off new readers.
    let (status, refused) = status_json(gw.acquire(name, None).await).await;
    assert_problem(status, &refused, 409, "lock-held");
    let writer = {
        let http = gw.http.clone();
        let url = gw.url(&format!("/locks/{name}"));
        tokio::spawn(async move {
            let response = http
                .post(url)
                .json(&json!({"wait_ms": 10_000, "ttl_ms": 20_000}))
                .send()
                .await
                .expect("writer");
            (Instant::now(), status_json(response).await)
        })
    };
    eventually(Duration::from_secs(5), "the writer waits", || async {
        let (_, seen) = inspect(gw, name).await;
        (seen["waiting"] == 1).then_some(())
    })
    .await;
    let (status, late) = status_json(gw.acquire(name, Some(shared(10_000))).await).await;
    assert_problem(status, &late, 409, "lock-held");

    // Readers renew and release with their own tokens; the last one lets the writer in.
    let renewed = gw.renew(name, &token(&r1), json!({"ttl_ms": 30_000})).await;
    let (status, renewed) = status_json(renewed).await;
    assert_eq!(status, 200, "{renewed}");
    assert_eq!(renewed["fence"], r1["fence"]);
    assert_eq!(gw.release(name, &token(&r2)).await.status(), 204);
    assert_eq!(gw.release(name, &token(&r2)).await.status(), 404);
    let released = Instant::now();
    assert_eq!(gw.release(name, &token(&r1)).await.status(), 204);
    let (granted, (status, w)) = writer.await.expect("writer task");
    assert_eq!(status, 201, "{w}");
    assert!(
        granted - released < Duration::from_secs(2),
        "{:?}",
        granted - released
    );
    assert!(
        fence(&w) > fence(&r2),
        "a writer's fence exceeds every reader's before it"
    );

    let (_, seen) = inspect(gw, name).await;
    assert_eq!(seen["mode"], "exclusive", "{seen}");
    assert_eq!(seen["fence"], w["fence"], "{seen}");
    // A writer holds it: no reader, and a reader's token means nothing to it.
    let (status, refused) = status_json(gw.acquire(name, Some(shared(10_000))).await).await;
    assert_problem(status, &refused, 409, "lock-held");
    assert_eq!(gw.release(name, &token(&r1)).await.status(), 404);

    // Once the writer is done, readers come in again (the hold-off was lifted).
    assert_eq!(gw.release(name, &token(&w)).await.status(), 204);
    let r3 = eventually(
        Duration::from_secs(2),
        "a reader after the writer",
        || async {
            let (status, grant) = status_json(gw.acquire(name, Some(shared(10_000))).await).await;
            (status == 201).then_some(grant)
        },
    )
    .await;
    assert!(fence(&r3) > fence(&w));
    // Idempotent retry of a reader.
    let send = || {
        gw.http
            .post(gw.url(&format!("/locks/{name}")))
            .header("Idempotency-Key", "7d1c5e0b-reader-retry-000001")
            .json(&shared(10_000))
            .send()
    };
    let (status, first) = status_json(send().await.expect("acquire")).await;
    assert_eq!(status, 201, "{first}");
    let (status, again) = status_json(send().await.expect("acquire")).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["token"], first["token"]);
    assert_eq!(gw.release(name, &token(&first)).await.status(), 204);
    assert_eq!(gw.release(name, &token(&r3)).await.status(), 204);
    let (status, _) = inspect(gw, name).await;
    assert_eq!(status, 404, "nobody holds it now");
}

/// A waiting reader gets in when the writer releases.
async fn reader_waits_for_the_writer(gw: &Gateway) {
    let (status, w) = status_json(gw.acquire("page", Some(json!({"ttl_ms": 20_000}))).await).await;
    assert_eq!(status, 201, "{w}");
    let reader = {
        let http = gw.http.clone();
        let url = gw.url("/locks/page");
        tokio::spawn(async move {
            let body = json!({"mode": "shared", "wait_ms": 10_000});
            let response = http.post(url).json(&body).send().await.expect("reader");
            status_json(response).await
        })
    };
    eventually(Duration::from_secs(5), "the reader waits", || async {
        let (_, seen) = inspect(gw, "page").await;
        (seen["waiting"] == 1).then_some(())
    })
    .await;
    assert_eq!(gw.release("page", &token(&w)).await.status(), 204);
    let (status, r) = reader.await.expect("reader task");
    assert_eq!(status, 201, "{r}");
    assert_eq!(gw.release("page", &token(&r)).await.status(), 204);
}

async fn every_walk(gw: &Gateway) {
    readers_and_writers(gw).await;
    reader_waits_for_the_writer(gw).await;
    an_expired_reader_lets_the_writer_in(gw).await;
}

#[tokio::test]
async fn rwlocks_on_the_dev_backend() {
    every_walk(&Gateway::dev().await).await;
}

#[tokio::test]
async fn rwlocks_on_redis_leave_no_keys_behind() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    every_walk(&gw).await;
    let conn = redis.conn().await;
    for name in ["doc", "page"] {
        for suffix in ["", ":readers", ":readers:info", ":writer-waiting"] {
            let key = format!("lockgate:{{{name}}}{suffix}");
            eventually(
                Duration::from_secs(2),
                &format!("{key} is gone"),
                || async { (!key_exists(&conn, &key).await).then_some(()) },
            )
            .await;
        }
    }
}

/// Readers hold the name against any Redis client: a plain `SET NX` fails meanwhile.
#[tokio::test]
async fn readers_hold_the_lock_key_against_other_clients() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let (status, r) = status_json(gw.acquire("shared-key", Some(shared(10_000))).await).await;
    assert_eq!(status, 201, "{r}");
    let mut conn = redis.conn().await;
    let taken: Option<String> = redis::cmd("SET")
        .arg("lockgate:{shared-key}")
        .arg("someone-else")
        .arg("NX")
        .arg("PX")
        .arg(10_000)
        .query_async(&mut conn)
        .await
        .expect("SET NX");
    assert_eq!(taken, None, "SET NX must fail while readers hold the name");
    assert_eq!(gw.release("shared-key", &token(&r)).await.status(), 204);
}

#[tokio::test]
async fn rwlocks_on_sentinel() {
    let group = SentinelGroup::start();
    let gw = Gateway::start(sentinel_config(&group.urls(), MASTER)).await;
    every_walk(&gw).await;
}

#[tokio::test]
async fn rwlocks_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let gw = Gateway::start(cluster_config(&cluster.seed_urls())).await;
    every_walk(&gw).await;
}

#[tokio::test]
async fn redlock_does_not_offer_shared_locks() {
    let nodes = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let gw = Gateway::start(redlock_config(&urls, Duration::from_millis(200))).await;
    let (status, body) = status_json(gw.acquire("doc", Some(shared(10_000))).await).await;
    assert_problem(status, &body, 501, "not-offered");
    // The exclusive lock is unchanged.
    let (status, grant) = status_json(gw.acquire("doc", None).await).await;
    assert_eq!(status, 201, "{grant}");
}

/// 32 clients on two names, a quarter of acquires shared: never a writer with a reader or
/// another writer, fences in order, no holder refused while valid (the history checker).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_a_writer_with_anyone_else() {
    let redis = RedisServer::start();
    let gw = Arc::new(Gateway::start(redis_config(&redis.url())).await);
    let mut load = Workload::new(32, &["rw:a", "rw:b"]);
    load.shared_one_in = 4;
    load.cycles = Some(400);
    let history = workload::run(&[gw.url("")], &load).await;
    let report = history.check();
    report.assert_clean(&test_name());
    assert_eq!(report.grants(), 400, "every cycle got its grant: {report}");
    let shared_grants = report.count_ops(|op| {
        matches!(
            op.call,
            crate::support::history::Call::Acquire { shared: true, .. }
        ) && matches!(op.outcome, crate::support::history::Outcome::Granted { .. })
    });
    assert!(
        shared_grants > 40,
        "{shared_grants} shared grants: {report}"
    );
}

/// Contended read/write locking costs at most 4 round trips to Redis per acquisition,
/// releases and the writers' hold-offs included: 8 readers and 8 writers on one name, each
/// waiting for its turn, never polling.
#[tokio::test]
async fn contended_acquisitions_cost_at_most_4_round_trips() {
    let redis = RedisServer::start();
    let gw = Arc::new(Gateway::start(redis_config(&redis.url())).await);
    let before = gw.redis_round_trips().await;
    const CYCLES: usize = 6;
    let clients: Vec<_> = (0..16)
        .map(|client| {
            let gw = gw.clone();
            tokio::spawn(async move {
                for _ in 0..CYCLES {
                    let mut body = json!({"ttl_ms": 10_000, "wait_ms": 30_000});
                    if client % 2 == 0 {
                        body["mode"] = "shared".into();
                    }
                    let (status, grant) = status_json(gw.acquire("hot", Some(body)).await).await;
                    assert_eq!(status, 201, "{grant}");
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    assert_eq!(gw.release("hot", &token(&grant)).await.status(), 204);
                }
            })
        })
        .collect();
    for client in clients {
        client.await.expect("client");
    }
    let per_acquisition = (gw.redis_round_trips().await - before) / (16 * CYCLES) as f64;
    eprintln!("{per_acquisition:.2} round trips per contended read/write acquisition");
    assert!(
        per_acquisition <= 4.0,
        "{per_acquisition:.2} round trips per acquisition"
    );
}

/// A reader that stops renewing lets a waiting writer in when its lease ends (the marker
/// expires with the longest reader), and the expired reader's token is refused after.
async fn an_expired_reader_lets_the_writer_in(gw: &Gateway) {
    // Timed from before the reader's request: its lease cannot start earlier, however late
    // its response arrives on a loaded machine.
    let started = Instant::now();
    let (status, r) = status_json(gw.acquire("lapse", Some(shared(400))).await).await;
    assert_eq!(status, 201, "{r}");
    let body = json!({"wait_ms": 5_000});
    let (status, w) = status_json(gw.acquire("lapse", Some(body)).await).await;
    let waited = started.elapsed();
    assert_eq!(status, 201, "{w}");
    assert!(
        waited >= Duration::from_millis(399) && waited < Duration::from_secs(2),
        "the writer got in after {waited:?}"
    );
    let renewed = gw
        .renew("lapse", &token(&r), json!({"ttl_ms": 1_000}))
        .await;
    let (status, refused) = status_json(renewed).await;
    assert_problem(status, &refused, 404, "lock-not-held");
    assert_eq!(gw.release("lapse", &token(&w)).await.status(), 204);
}

/// A waiting writer that goes away (its client hung up) stops holding readers off at once,
/// not when its `wait_ms` would have ended.
#[tokio::test]
async fn a_writer_that_goes_away_lets_readers_in() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let (status, r) = status_json(gw.acquire("gone", Some(shared(20_000))).await).await;
    assert_eq!(status, 201, "{r}");
    let writer = {
        let http = gw.http.clone();
        let url = gw.url("/locks/gone");
        tokio::spawn(async move {
            let body = json!({"wait_ms": 30_000});
            http.post(url).json(&body).send().await
        })
    };
    eventually(Duration::from_secs(5), "the writer waits", || async {
        let (_, seen) = inspect(&gw, "gone").await;
        (seen["waiting"] == 1).then_some(())
    })
    .await;
    let (status, held_off) = status_json(gw.acquire("gone", Some(shared(20_000))).await).await;
    assert_problem(status, &held_off, 409, "lock-held");
    writer.abort();
    let reader = eventually(Duration::from_secs(3), "a reader gets in again", || async {
        let (status, grant) = status_json(gw.acquire("gone", Some(shared(20_000))).await).await;
        (status == 201).then_some(grant)
    })
    .await;
    assert_eq!(gw.release("gone", &token(&reader)).await.status(), 204);
    assert_eq!(gw.release("gone", &token(&r)).await.status(), 204);
}
