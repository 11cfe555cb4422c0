//! Read/write locks: `POST /locks/{name}` with `mode: "shared"` takes a reader's grant. Readers
//! share a name, writers exclude readers and each other, a waiting writer holds off new
//! readers, fences grow across both; readers renew and release with their own tokens. On the
//! memory backend, standalone Redis, Sentinel and Cluster; Redlock answers 501 `not-offered`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lockgate::http::dto::{LockInfoBody, LockListBody, LockMode, PermitBody};
use serde_json::{Value, json};

use crate::support::answers::Answered;
use crate::support::backends::on_backends;
use crate::support::gateway::{Gateway, redis_config, redlock_trio};
use crate::support::redis::RedisServer;
use crate::support::workload::{self, Workload};
use crate::support::{eventually, key_exists, status_json_without, test_name};

fn shared(ttl_ms: u64) -> Value {
    json!({"mode": "shared", "ttl_ms": ttl_ms})
}

/// `GET /locks/{name}` of a held lock, checking on the way what the typed body cannot tell:
/// that no token is in its text, and that it names its mode (the type reads an absent one
/// as exclusive).
async fn inspect(gw: &Gateway, name: &str, tokens: &[&str]) -> LockInfoBody {
    let (status, seen) = status_json_without(gw.inspect(name).await, tokens).await;
    assert_eq!(status, 200, "{name}: {seen}");
    assert!(seen["mode"].is_string(), "no mode in {seen}");
    serde_json::from_value(seen).expect("an inspect body")
}

/// The walk every backend must pass.
async fn readers_and_writers(gw: &Gateway) {
    let name = "doc";
    let locks = gw.locks();
    let r1 = locks
        .acquire(
            name,
            json!({"mode": "shared", "ttl_ms": 20_000, "owner": "reader-1"}),
        )
        .await
        .done(201);
    let r2 = locks.acquire(name, shared(10_000)).await.done(201);
    assert!(r2.fence > r1.fence);

    let seen = inspect(gw, name, &[&r1.token, &r2.token]).await;
    assert_eq!(seen.mode, LockMode::Shared, "{seen:?}");
    let holders = &seen.shared_holders;
    assert_eq!(holders.len(), 2, "{seen:?}");
    assert_eq!(
        holders[0].fence,
        Some(r2.fence),
        "first to end first: {seen:?}"
    );
    assert_eq!(holders[1].owner.as_deref(), Some("reader-1"), "{seen:?}");
    // A listing shows the name as inspect does, readers included.
    let listed = gw.client().list::<LockListBody>(&[("prefix", name)]).await;
    let page = listed.done(200);
    let entry = page
        .locks
        .iter()
        .find(|lock| lock.name == name)
        .unwrap_or_else(|| panic!("{name} is not listed: {page:?}"));
    assert_eq!(entry.mode, LockMode::Shared, "{page:?}");
    let fences_and_owners = |holders: &[PermitBody]| -> Vec<(Option<u64>, Option<String>)> {
        holders.iter().map(|h| (h.fence, h.owner.clone())).collect()
    };
    assert_eq!(
        fences_and_owners(&entry.shared_holders),
        fences_and_owners(&seen.shared_holders),
        "{page:?}"
    );

    // A writer that does not wait is refused; one that waits holds off new readers.
    locks
        .acquire(name, json!({}))
        .await
        .refused(409, "lock-held");
    let writer = {
        let locks = gw.locks();
        tokio::spawn(async move {
            let body = json!({"wait_ms": 10_000, "ttl_ms": 20_000});
            let answer = locks.acquire(name, body).await;
            (Instant::now(), answer)
        })
    };
    eventually(Duration::from_secs(5), "the writer waits", || async {
        (inspect(gw, name, &[]).await.waiting == 1).then_some(())
    })
    .await;
    locks
        .acquire(name, shared(10_000))
        .await
        .refused(409, "lock-held");

    // Readers renew and release with their own tokens; the last one lets the writer in.
    let renewed = locks
        .renew(name, &r1.token, json!({"ttl_ms": 30_000}))
        .await
        .done(200);
    assert_eq!(renewed.fence, r1.fence);
    locks.release(name, &r2.token).await.done(204);
    locks
        .release(name, &r2.token)
        .await
        .refused(404, "lock-not-held");
    let released = Instant::now();
    locks.release(name, &r1.token).await.done(204);
    let (granted, w) = writer.await.expect("writer task");
    let w = w.done(201);
    assert!(
        granted - released < Duration::from_secs(2),
        "{:?}",
        granted - released
    );
    assert!(
        w.fence > r2.fence,
        "a writer's fence exceeds every reader's before it"
    );

    let seen = inspect(gw, name, &[&w.token]).await;
    assert_eq!(seen.mode, LockMode::Exclusive, "{seen:?}");
    assert_eq!(seen.fence, Some(w.fence), "{seen:?}");
    // A writer holds it: no reader, and a reader's token means nothing to it.
    locks
        .acquire(name, shared(10_000))
        .await
        .refused(409, "lock-held");
    locks
        .release(name, &r1.token)
        .await
        .refused(404, "lock-not-held");

    // Once the writer is done, readers come in again (the hold-off was lifted).
    locks.release(name, &w.token).await.done(204);
    let r3 = eventually(
        Duration::from_secs(2),
        "a reader after the writer",
        || async {
            let answer = locks.acquire(name, shared(10_000)).await;
            (answer.status() == 201).then(|| answer.done(201))
        },
    )
    .await;
    assert!(r3.fence > w.fence);
    // Idempotent retry of a reader.
    let key = "7d1c5e0b-reader-retry-000001";
    let first = locks
        .acquire_once(name, key, shared(10_000))
        .await
        .done(201);
    let again = locks
        .acquire_once(name, key, shared(10_000))
        .await
        .done(200);
    assert_eq!(again.token, first.token);
    locks.release(name, &first.token).await.done(204);
    locks.release(name, &r3.token).await.done(204);
    locks.inspect(name).await.refused(404, "lock-not-held");
}

/// A waiting reader gets in when the writer releases.
async fn reader_waits_for_the_writer(gw: &Gateway) {
    let locks = gw.locks();
    let w = locks
        .acquire("page", json!({"ttl_ms": 20_000}))
        .await
        .done(201);
    let reader = {
        let locks = gw.locks();
        tokio::spawn(async move {
            let body = json!({"mode": "shared", "wait_ms": 10_000});
            locks.acquire("page", body).await
        })
    };
    eventually(Duration::from_secs(5), "the reader waits", || async {
        (inspect(gw, "page", &[]).await.waiting == 1).then_some(())
    })
    .await;
    locks.release("page", &w.token).await.done(204);
    let r = reader.await.expect("reader task").done(201);
    locks.release("page", &r.token).await.done(204);
}

async fn every_walk(gw: &Gateway) {
    readers_and_writers(gw).await;
    reader_waits_for_the_writer(gw).await;
    an_expired_reader_lets_the_writer_in(gw).await;
}

on_backends!(every_walk: dev, sentinel, cluster);

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
    let locks = gw.locks();
    let r = locks.acquire("shared-key", shared(10_000)).await.done(201);
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
    locks.release("shared-key", &r.token).await.done(204);
}

#[tokio::test]
async fn redlock_does_not_offer_shared_locks() {
    let (gw, _nodes) = redlock_trio().await;
    let locks = gw.locks();
    locks
        .acquire("doc", shared(10_000))
        .await
        .refused(501, "not-offered");
    // The exclusive lock is unchanged.
    locks.acquire("doc", json!({})).await.done(201);
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
/// waiting for its turn, never polling. Keyspace notifications are on: without them the head
/// of a line also looks for other clients' releases every 50 ms (see `lock::acquire`), a cost
/// per second of waiting that a loaded machine turns into any figure per acquisition.
#[tokio::test]
async fn contended_acquisitions_cost_at_most_4_round_trips() {
    let redis = RedisServer::start();
    redis.enable_keyspace_notifications();
    let gw = Arc::new(Gateway::start(redis_config(&redis.url())).await);
    let before = gw.redis_round_trips().await;
    const CYCLES: usize = 6;
    let clients: Vec<_> = (0..16)
        .map(|client| {
            let locks = gw.locks();
            tokio::spawn(async move {
                for _ in 0..CYCLES {
                    let mut body = json!({"ttl_ms": 10_000, "wait_ms": 30_000});
                    if client % 2 == 0 {
                        body["mode"] = "shared".into();
                    }
                    let grant = locks.acquire("hot", body).await.done(201);
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    locks.release("hot", &grant.token).await.done(204);
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
    let locks = gw.locks();
    let started = Instant::now();
    let r = locks.acquire("lapse", shared(400)).await.done(201);
    let w = locks.acquire("lapse", json!({"wait_ms": 5_000})).await;
    let waited = started.elapsed();
    let w = w.done(201);
    assert!(
        waited >= Duration::from_millis(399) && waited < Duration::from_secs(2),
        "the writer got in after {waited:?}"
    );
    locks
        .renew("lapse", &r.token, json!({"ttl_ms": 1_000}))
        .await
        .refused(404, "lock-not-held");
    locks.release("lapse", &w.token).await.done(204);
}

/// A waiting writer that goes away (its client hung up) stops holding readers off at once,
/// not when its `wait_ms` would have ended.
#[tokio::test]
async fn a_writer_that_goes_away_lets_readers_in() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let locks = gw.locks();
    let r = locks.acquire("gone", shared(20_000)).await.done(201);
    let writer = {
        let locks = gw.locks();
        tokio::spawn(async move { locks.acquire("gone", json!({"wait_ms": 30_000})).await })
    };
    eventually(Duration::from_secs(5), "the writer waits", || async {
        (inspect(&gw, "gone", &[]).await.waiting == 1).then_some(())
    })
    .await;
    locks
        .acquire("gone", shared(20_000))
        .await
        .refused(409, "lock-held");
    writer.abort();
    let reader = eventually(Duration::from_secs(3), "a reader gets in again", || async {
        let answer = locks.acquire("gone", shared(20_000)).await;
        (answer.status() == 201).then(|| answer.done(201))
    })
    .await;
    locks.release("gone", &reader.token).await.done(204);
    locks.release("gone", &r.token).await.done(204);
}

/// An operator's revoke of a name readers hold takes it from all of them at once: their
/// marker and their set go together (on Redis no reader's key is left), each reader is told
/// (410 `lock-revoked` on its renewal and release, as a lock's holder is), a writer gets the
/// name at once, and a new reader waits for that writer as for any other.
async fn revoking_a_read_locked_name_takes_it_from_every_reader(gw: &Gateway) {
    let locks = gw.locks();
    let name = "revoked-doc";
    let first = locks.acquire(name, shared(30_000)).await.done(201);
    let second = locks.acquire(name, shared(30_000)).await.done(201);
    assert_eq!(gw.client().force_release(name).await.status(), 204);
    locks.inspect(name).await.refused(404, "lock-not-held");
    locks
        .renew(name, &first.token, json!({"ttl_ms": 30_000}))
        .await
        .refused(410, "lock-revoked");
    locks
        .release(name, &second.token)
        .await
        .refused(410, "lock-revoked");
    let writer = locks
        .acquire(name, json!({"ttl_ms": 30_000}))
        .await
        .done(201);
    locks
        .acquire(name, shared(30_000))
        .await
        .refused(409, "lock-held");
    locks.release(name, &writer.token).await.done(204);
}

on_backends!(revoking_a_read_locked_name_takes_it_from_every_reader: dev, cluster);

#[tokio::test]
async fn a_revoke_on_redis_leaves_no_reader_behind() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let locks = gw.locks();
    let name = "revoked-doc";
    locks.acquire(name, shared(30_000)).await.done(201);
    assert_eq!(gw.client().force_release(name).await.status(), 204);
    let conn = redis.conn().await;
    // (`:readers:revoked` keeps the revoked readers' tokens until their leases would have
    // ended, as a revoked lock's token is kept.)
    for suffix in ["", ":readers", ":readers:info"] {
        let key = format!("lockgate:{{{name}}}{suffix}");
        assert!(
            !key_exists(&conn, &key).await,
            "{key} is left after the revoke"
        );
    }
    revoking_a_read_locked_name_takes_it_from_every_reader(&gw).await;
}

/// A reader's release that finds the name held by a writer, its readers' set left behind (a
/// Redis clock stepped back revives keys that had expired uncollected), is refused, and the
/// writer's lock keeps its expiry. The simulation found such a release moving the writer's
/// expiry to the readers' (a stale reader ending a writer's lock early).
#[tokio::test]
async fn a_stale_readers_release_leaves_a_writers_lock_alone() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let locks = gw.locks();
    let name = "stale-readers";
    let first = locks.acquire(name, shared(5_000)).await.done(201);
    locks.acquire(name, shared(5_000)).await.done(201);
    let key = format!("lockgate:{{{name}}}");
    let mut writer = redis::cmd("SET");
    writer
        .arg(&key)
        .arg("AAAAAAAAAAAAAAAAAAAAAA.1800000000000000")
        .arg("PX")
        .arg(60_000);
    let _: () = redis.query(&writer).expect("SET");

    locks
        .release(name, &first.token)
        .await
        .refused(404, "lock-not-held");
    let ttl: i64 = redis.query(redis::cmd("PTTL").arg(&key)).expect("PTTL");
    assert!(ttl > 50_000, "the writer's lock now ends in {ttl} ms");
    let value: String = redis.query(redis::cmd("GET").arg(&key)).expect("GET");
    assert_eq!(value, "AAAAAAAAAAAAAAAAAAAAAA.1800000000000000");
}
