//! End to end: HTTP to a gateway on a socket, backed by real `redis-server` processes that
//! each test starts and owns.

use std::process::Command;
use std::time::{Duration, Instant};

use lockgate::http::dto::LockInfoBody;
use redis::AsyncCommands;
use serde_json::json;

use crate::support::answers::Answered;
use crate::support::gateway::{Gateway, redis_config};
use crate::support::process::ServerProcess;
use crate::support::proxy::LatencyProxy;
use crate::support::redis::RedisServer;
use crate::support::{UNISSUED_TOKEN, eventually, status_json_without};

async fn gateway_for(redis: &RedisServer) -> Gateway {
    Gateway::start(redis_config(&redis.url())).await
}

/// The walk-through a new user does with curl: acquire, conflict, wrong-token release,
/// release, release again; the lock key holds exactly the token.
#[tokio::test]
async fn acquire_conflict_and_release_against_redis() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let locks = gw.locks();
    let mut conn = redis.conn().await;

    let grant = locks
        .acquire("orders:42", json!({"ttl_ms": 10000}))
        .await
        .done(201);
    let token = grant.token.clone();
    assert!(grant.fence > 0);
    assert!((9000..=10000).contains(&grant.ttl_ms), "{grant:?}");
    let stored: String = conn.get("lockgate:{orders:42}").await.expect("GET");
    assert_eq!(stored, token, "the key holds exactly the token");

    let held = locks.acquire("orders:42", json!({})).await;
    assert_eq!(held.retry_after(), Some(Duration::from_secs(10)));
    let problem = held.refused(409, "lock-held");
    assert!(
        problem
            .retry_after_ms
            .is_some_and(|ms| ms > 9000 && ms <= 10000),
        "{problem:?}"
    );

    locks
        .release("orders:42", UNISSUED_TOKEN)
        .await
        .refused(409, "not-owner");
    let still: Option<String> = conn.get("lockgate:{orders:42}").await.expect("GET");
    assert_eq!(
        still.as_deref(),
        Some(token.as_str()),
        "a wrong token must not release"
    );

    locks.release("orders:42", &token).await.done(204);
    let gone: Option<String> = conn.get("lockgate:{orders:42}").await.expect("GET");
    assert_eq!(gone, None);
    locks
        .release("orders:42", &token)
        .await
        .refused(404, "lock-not-held");
}

/// Renew sets a new PTTL on the key, and inspect reports it without the token.
#[tokio::test]
async fn renew_extends_the_pttl_and_inspect_hides_the_token() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let locks = gw.locks();
    let mut conn = redis.conn().await;
    let grant = locks.acquire("r", json!({"ttl_ms": 2000})).await.done(201);
    let token = grant.token.clone();
    let before: i64 = conn.pttl("lockgate:{r}").await.expect("PTTL");
    assert!(before <= 2000);

    let renewed = locks
        .renew("r", &token, json!({"ttl_ms": 60000}))
        .await
        .done(200);
    assert_eq!(renewed.fence, grant.fence);
    let after: i64 = conn.pttl("lockgate:{r}").await.expect("PTTL");
    assert!(after > 55_000, "PTTL after renew: {after}");

    let (status, seen) = status_json_without(gw.inspect("r").await, &[&token]).await;
    assert_eq!(status, 200, "{seen}");
    let seen: LockInfoBody = serde_json::from_value(seen).expect("an inspect body");
    assert!(seen.held);
    assert_eq!(seen.fence, Some(grant.fence));
    assert!(seen.ttl_ms.is_some_and(|ms| ms > 55_000), "{seen:?}");

    locks
        .renew("r", UNISSUED_TOKEN, json!({}))
        .await
        .refused(409, "not-owner");
    locks.release("r", &token).await.done(204);
    locks
        .renew("r", &token, json!({}))
        .await
        .refused(404, "lock-not-held");
}

/// Fences strictly increase across grants of a name, also after the fence counter is deleted;
/// no key is left per name once its locks are released (only the one fence counter); and the
/// value of a held lock is its token, which carries its fence.
#[tokio::test]
async fn fences_strictly_increase_even_after_the_counter_is_deleted() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let locks = gw.locks();
    let mut conn = redis.conn().await;
    let mut last = 0;
    for round in 0..20 {
        if round % 5 == 4 {
            let _: () = conn.del("lockgate:fences").await.expect("DEL");
        }
        let name = if round % 2 == 0 { "f" } else { "g" };
        let grant = locks.acquire(name, json!({})).await.done(201);
        let fence = grant.fence;
        assert!(fence > last, "round {round}: fence {fence} after {last}");
        last = fence;
        let stored: String = conn.get(format!("lockgate:{{{name}}}")).await.expect("GET");
        assert_eq!(stored, grant.token);
        assert!(stored.ends_with(&format!(".{fence}")), "{stored}");
        locks.release(name, &grant.token).await.done(204);
    }
    let counter: u64 = conn.get("lockgate:fences").await.expect("GET");
    assert_eq!(counter, last);
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .expect("KEYS");
    keys.sort();
    // The counter and the node's marker (see `backend::data_loss`): one key each per node.
    assert_eq!(
        keys,
        ["lockgate:fences", "lockgate:marker"],
        "released locks leave no key of their own"
    );
}

/// Upgrading from a lockgate that kept one fence counter per name does not lower a fence. That
/// lockgate wrote the counter as `max(previous + 1, Redis TIME in µs)` with an expiry
/// (`--fence-retention`, 7 days by default): the slot counter's rule, whose clock term has
/// moved on since, exceeds it without reading it (under the clock proviso of a lost counter,
/// docs/api.md), and it runs out by itself. A lock taken by the old version is still inspected
/// (with the fence its counter says), but its token, not of the shape lockgate issues now,
/// moves nothing through the gateway (400): it runs out at its ttl.
#[tokio::test]
async fn fences_continue_above_a_counter_left_by_an_older_lockgate() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let locks = gw.locks();
    let mut conn = redis.conn().await;
    // The old version's last grant of the name, a moment ago, by Redis's clock.
    let (secs, micros): (u64, u64) = redis::cmd("TIME")
        .query_async(&mut conn)
        .await
        .expect("TIME");
    let left = secs * 1_000_000 + micros;
    let week_ms = 7 * 24 * 3_600_000_u64;
    let _: () = conn
        .pset_ex("lockgate:{upgraded}:fence", left, week_ms)
        .await
        .expect("SET");
    let grant = locks.acquire("upgraded", json!({})).await.done(201);
    assert!(grant.fence > left, "{grant:?} after {left}");
    let kept: i64 = conn.pttl("lockgate:{upgraded}:fence").await.expect("PTTL");
    assert!(kept > 0, "the old counter is left to run out by itself");
    locks.release("upgraded", &grant.token).await.done(204);
    let again = locks.acquire("upgraded", json!({})).await.done(201);
    assert!(again.fence > grant.fence);

    // A lock the old version granted: its token has no fence; its counter has it.
    let _: () = conn
        .set_ex("lockgate:{old}", "Yq3v7M1b0nqzT0m6k9xW2A", 60)
        .await
        .expect("SET");
    let _: () = conn.set("lockgate:{old}:fence", 1234).await.expect("SET");
    let seen = locks.inspect("old").await.done(200);
    assert_eq!(seen.fence, Some(1234));
    locks
        .renew("old", "Yq3v7M1b0nqzT0m6k9xW2A", json!({"ttl_ms": 5000}))
        .await
        .refused(400, "invalid-request");
    locks
        .release("old", "Yq3v7M1b0nqzT0m6k9xW2A")
        .await
        .refused(400, "invalid-request");
    assert_eq!(locks.inspect("old").await.status(), 200, "still held");
}

/// 2,000 acquire/release cycles on 2,000 distinct names leave one key behind (the fence
/// counter), and Redis memory does not grow with the names used (a key per name would be
/// about 300 KB here): a small version of the million-name benchmark in bench/README.md.
#[tokio::test]
async fn unique_names_leave_no_keys_behind() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let locks = gw.locks();
    let mut conn = redis.conn().await;
    // Connections made and scripts loaded before the baseline.
    for i in 0..100 {
        let name = format!("warm-up:{i}");
        let grant = locks.acquire(&name, json!({})).await.done(201);
        locks.release(&name, &grant.token).await.done(204);
    }
    let before = used_memory(&mut conn).await;
    for chunk in 0..20 {
        let names: Vec<String> = (0..100).map(|i| format!("order:{chunk}:{i}")).collect();
        let grants =
            futures_util::future::join_all(names.iter().map(|name| locks.acquire(name, json!({}))))
                .await;
        for (name, grant) in names.iter().zip(grants) {
            locks.release(name, &grant.done(201).token).await.done(204);
        }
    }
    let keys: u64 = redis::cmd("DBSIZE")
        .query_async(&mut conn)
        .await
        .expect("DBSIZE");
    assert_eq!(
        keys, 2,
        "only the fence counter and the node's marker are left"
    );
    let grown = used_memory(&mut conn).await.saturating_sub(before);
    assert!(grown < 100 * 1024, "used_memory grew by {grown} bytes");
}

async fn used_memory(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(conn)
        .await
        .expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory")
}

/// Redis's `timeout` closes a client idle that long. A `WAIT` connection idle in the pool is
/// closed so between two `replicas` requests: the second is sent again on a fresh connection
/// (201, where it answered 503 `backend-unavailable`), and the command connection, which the
/// guards keep busy, is not dropped for it.
#[tokio::test]
async fn wait_connections_the_server_closed_for_idling_are_replaced_unseen() {
    let redis = RedisServer::start();
    let _: () = redis
        .query(redis::cmd("CONFIG").arg("SET").arg("timeout").arg(1))
        .expect("CONFIG SET timeout");
    let server = ServerProcess::start(&["--redis-url", &redis.url()], &[]).await;
    let client = server.client(None);
    let acquire = async |name: &str| {
        let body = json!({"replicas": 1, "replica_timeout_ms": 10});
        client.acquire(name, &body, None, None).await
    };
    // Each count is made on a connection of its own, counted too: the same in every count.
    let clients = || {
        let info: String = redis
            .query(redis::cmd("INFO").arg("clients"))
            .expect("INFO clients");
        info.lines()
            .find_map(|line| line.strip_prefix("connected_clients:"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .expect("connected_clients")
    };
    acquire("idle:1").await.done(201);
    let with_it = clients();
    eventually(
        Duration::from_secs(5),
        "the server closes the idle WAIT connection",
        || async { (clients() < with_it).then_some(()) },
    )
    .await;
    acquire("idle:2").await.done(201);
    let logs = server.logs();
    assert!(!logs.contains("redis connection dropped"), "{logs}");
}

/// With a replica attached, `replicas: 1` reports one acknowledgement; requiring two with
/// only one replica answers 503 insufficient-replicas and leaves no lock behind.
#[tokio::test]
async fn wait_counts_replica_acknowledgements() {
    let master = RedisServer::start();
    let _replica = RedisServer::start_replica_of(&master);
    let gw = gateway_for(&master).await;
    let locks = gw.locks();
    let mut conn = master.conn().await;

    let one_replica = json!({"replicas": 1, "replica_timeout_ms": 1000});
    let grant = locks.acquire("w", one_replica.clone()).await.done(201);
    assert_eq!(grant.replicas_acked, Some(1));

    let renewed = locks.renew("w", &grant.token, one_replica).await.done(200);
    assert_eq!(renewed.replicas_acked, Some(1));

    // A replica timeout longer than the backend timeout (1 s) is honoured, not cut short.
    let started = Instant::now();
    let slow = locks
        .acquire("w3", json!({"replicas": 2, "replica_timeout_ms": 1500}))
        .await
        .done(201);
    assert_eq!(slow.replicas_acked, Some(1));
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "WAIT returned after {:?}",
        started.elapsed()
    );
    assert_eq!(
        locks.acquire("w4", json!({})).await.status(),
        201,
        "the shared connection survives a long WAIT"
    );

    let body = json!({"replicas": 2, "replica_timeout_ms": 200, "require_replicas": true});
    let problem = locks
        .acquire("w2", body)
        .await
        .refused(503, "insufficient-replicas");
    assert_eq!(problem.replicas_acked, Some(1));
    assert_eq!(problem.replicas_required, Some(2));
    let exists: bool = conn.exists("lockgate:{w2}").await.expect("EXISTS");
    assert!(
        !exists,
        "the lock must be released after insufficient replicas"
    );
    locks.inspect("w2").await.refused(404, "lock-not-held");
}

/// A request's deadline covers the replica wait it asked for: a renewal whose
/// `replica_timeout_ms` is longer than `--request-timeout` is answered with what WAIT counted,
/// not cut off by the request timeout after the renewal was already applied.
#[tokio::test]
async fn a_replica_wait_longer_than_the_request_timeout_is_answered() {
    let redis = RedisServer::start();
    let mut config = redis_config(&redis.url());
    config.request_timeout = Duration::from_secs(2);
    let gw = Gateway::start(config).await;
    let locks = gw.locks();
    let mut conn = redis.conn().await;
    let grant = locks.acquire("r", json!({"ttl_ms": 5000})).await.done(201);
    let body = json!({"ttl_ms": 60000, "replicas": 1, "replica_timeout_ms": 2500});
    let renewed = locks.renew("r", &grant.token, body).await.done(200);
    assert_eq!(renewed.replicas_acked, Some(0), "{renewed:?}");
    let pttl: i64 = conn.pttl("lockgate:{r}").await.expect("PTTL");
    assert!(pttl > 50_000, "the renewal was applied: PTTL {pttl}");
    let body = json!({"replicas": 1, "replica_timeout_ms": 2500});
    let acquired = locks.acquire("r2", body).await.done(201);
    assert_eq!(acquired.replicas_acked, Some(0), "{acquired:?}");
}

/// When every dedicated WAIT connection is busy (slow replicas), a request that needs one
/// answers its own problem type, `wait-pool-exhausted` with Retry-After, within the backend
/// timeout, and the metrics count it: not `backend-unavailable`, which would send the
/// operator to look at a healthy Redis.
#[tokio::test]
async fn an_exhausted_wait_pool_has_its_own_problem_type() {
    let redis = RedisServer::start();
    let mut config = redis_config(&redis.url());
    config.wait_pool_size = 1;
    let gw = Gateway::start(config).await;
    let locks = gw.locks();
    let slow = locks.acquire("slow", json!({"replicas": 1, "replica_timeout_ms": 3000}));
    let blocked = async {
        // The slow request holds the only connection first: its WAIT is blocked in Redis.
        eventually(
            Duration::from_secs(5),
            "the slow request's WAIT",
            || async {
                let clients: String = redis
                    .query(redis::cmd("CLIENT").arg("LIST"))
                    .expect("CLIENT LIST");
                clients.contains("cmd=wait").then_some(())
            },
        )
        .await;
        let started = Instant::now();
        let answer = locks
            .acquire("blocked", json!({"replicas": 1, "replica_timeout_ms": 100}))
            .await;
        (started.elapsed(), answer)
    };
    let (slow, (took, blocked)) = tokio::join!(slow, blocked);
    assert!(
        blocked.retry_after().is_some(),
        "Retry-After on {blocked:?}"
    );
    blocked.refused(503, "wait-pool-exhausted");
    assert!(
        took < Duration::from_millis(1800),
        "answered after {took:?}"
    );
    slow.done(201);
    let metrics = gw.metrics_text().await;
    assert!(
        metrics.lines().any(
            |line| line.starts_with("lockgate_wait_pool_exhausted_total ") && !line.ends_with(" 0")
        ),
        "{metrics}"
    );
}

/// A stopped Redis answers 503 backend-unavailable within 2 s, readiness goes 503, and the
/// gateway serves again on its own once Redis is back.
#[tokio::test]
async fn redis_down_is_a_prompt_503_and_the_gateway_recovers() {
    // With its data (AOF): a Redis that comes back empty also holds grants back for the
    // longest lease (see tests/it/data_loss.rs); this test is about the outage alone.
    let mut redis = RedisServer::start_durable();
    let gw = gateway_for(&redis).await;
    let locks = gw.locks();
    locks.acquire("before", json!({})).await.done(201);

    redis.stop();
    for name in ["down1", "down2"] {
        let started = Instant::now();
        let answer = locks.acquire(name, json!({})).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(answer.retry_after(), Some(Duration::from_secs(1)));
        let problem = answer.refused(503, "backend-unavailable");
        assert!(!problem.detail.contains("127.0.0.1"), "{problem:?}");
    }
    gw.client()
        .readiness()
        .await
        .refused(503, "backend-unavailable");

    redis.restart();
    eventually(
        Duration::from_secs(5),
        "acquire succeeds after Redis restarts",
        || async { (locks.acquire("after", json!({})).await.status() == 201).then_some(()) },
    )
    .await;
    gw.client().readiness().await.done(200);
}

/// A frozen Redis (SIGSTOP) costs at most the backend timeout, never a hang; it serves
/// again after SIGCONT.
#[tokio::test]
async fn a_frozen_redis_is_a_503_within_the_timeout() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let locks = gw.locks();
    locks.acquire("a", json!({})).await.done(201);
    let signal = |sig: &str| {
        let status = Command::new("kill")
            .arg(sig)
            .arg(redis.pid().to_string())
            .status()
            .expect("kill");
        assert!(status.success());
    };
    signal("-STOP");
    let started = Instant::now();
    let answer = locks.acquire("b", json!({})).await;
    let elapsed = started.elapsed();
    signal("-CONT");
    answer.refused(503, "backend-unavailable");
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
    eventually(
        Duration::from_secs(5),
        "acquire succeeds after SIGCONT",
        || async { (locks.acquire("c", json!({})).await.status() == 201).then_some(()) },
    )
    .await;
}

/// An empty script cache (restart, failover, SCRIPT FLUSH) is refilled transparently, on the
/// shared connection and on the pipelined WAIT path.
#[tokio::test]
async fn scripts_are_reloaded_after_the_cache_is_flushed() {
    let master = RedisServer::start();
    let _replica = RedisServer::start_replica_of(&master);
    let gw = gateway_for(&master).await;
    let locks = gw.locks();
    let mut conn = master.conn().await;
    locks.acquire("s1", json!({"replicas": 1})).await.done(201);
    locks.acquire("s2", json!({})).await.done(201);
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .expect("SCRIPT FLUSH");
    locks.acquire("s3", json!({})).await.done(201);
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .expect("SCRIPT FLUSH");
    let grant = locks
        .acquire("s4", json!({"replicas": 1, "replica_timeout_ms": 1000}))
        .await
        .done(201);
    assert_eq!(grant.replicas_acked, Some(1));
}

/// A kind's own scripts (a semaphore's, built in its folder) are in a restarted server's cache
/// before their first call there: every new connection loads them with the built-in ones once
/// the kind was used, as it loads the lock's.
#[tokio::test(flavor = "multi_thread")]
async fn a_kinds_scripts_are_loaded_on_a_restarted_server_before_their_first_call() {
    let mut redis = RedisServer::start();
    // Nothing held back after the restart: this test is about the scripts, not the grants.
    let gw = Gateway::start(lockgate::config::Config {
        data_loss_hold_back: false,
        ..redis_config(&redis.url())
    })
    .await;
    let permits = gw.client().semaphores();
    let answer = permits
        .acquire("s1", &json!({"permits": 2}), None, None)
        .await;
    assert_eq!(answer.expect("the gateway answers").status(), 201);
    tokio::task::block_in_place(|| redis.restart());
    let locks = gw.locks();
    eventually(
        Duration::from_secs(5),
        "the gateway serves again after the restart",
        || async { (locks.acquire("after", json!({})).await.status() == 201).then_some(()) },
    )
    .await;
    let answer = permits
        .acquire("s2", &json!({"permits": 2}), None, None)
        .await;
    assert_eq!(answer.expect("the gateway answers").status(), 201);
    let errors: String = redis::cmd("INFO")
        .arg("errorstats")
        .query_async(&mut redis.conn().await)
        .await
        .expect("INFO errorstats");
    assert!(!errors.contains("NOSCRIPT"), "{errors}");
}

/// Locks taken through the gateway obey the classic Redis lock protocol and vice versa: a
/// plain client releases with compare-and-delete, and a plain SET NX PX lock is seen as held.
/// Only the plain client moves its own lock: its value is no token lockgate issued (400).
#[tokio::test]
async fn locks_interoperate_with_plain_redis_clients() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let locks = gw.locks();
    let mut conn = redis.conn().await;
    let compare_and_delete = redis::Script::new(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
    );

    let grant = locks.acquire("shared", json!({})).await.done(201);
    let released: i64 = compare_and_delete
        .key("lockgate:{shared}")
        .arg(&grant.token)
        .invoke_async(&mut conn)
        .await
        .expect("CAD");
    assert_eq!(released, 1);
    locks.inspect("shared").await.refused(404, "lock-not-held");

    let set: Option<String> = redis::cmd("SET")
        .arg("lockgate:{ext}")
        .arg("external-token")
        .arg("NX")
        .arg("PX")
        .arg(5000)
        .query_async(&mut conn)
        .await
        .expect("SET");
    assert_eq!(set.as_deref(), Some("OK"));
    locks
        .acquire("ext", json!({}))
        .await
        .refused(409, "lock-held");
    locks
        .release("ext", "external-token")
        .await
        .refused(400, "invalid-request");
    assert_eq!(locks.inspect("ext").await.status(), 200, "still held");
    let released: i64 = compare_and_delete
        .key("lockgate:{ext}")
        .arg("external-token")
        .invoke_async(&mut conn)
        .await
        .expect("CAD");
    assert_eq!(released, 1);
}

/// Many clients racing for one free lock: exactly one wins.
#[tokio::test]
async fn concurrent_acquires_grant_exactly_one() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let locks = gw.locks();
    let attempts = (0..32).map(|_| locks.acquire("race", json!({})));
    let statuses: Vec<u16> = futures_util::future::join_all(attempts)
        .await
        .iter()
        .map(|answer| answer.status())
        .collect();
    assert_eq!(
        statuses.iter().filter(|&&s| s == 201).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|&&s| s == 409).count(),
        31,
        "{statuses:?}"
    );
}

/// A retried idempotent acquire finds its own grant in Redis: 200, same token and fence, and
/// a validity that does not outlive the key.
#[tokio::test]
async fn idempotent_acquire_survives_a_lost_response() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let locks = gw.locks();
    let mut conn = redis.conn().await;
    let post = || {
        locks.acquire_once(
            "job:1",
            "2c5ea4c0-4067-11e9-8bad-9b1deb4d3b7d",
            json!({"ttl_ms": 5000}),
        )
    };
    let first = post().await.done(201);
    // The key's life as Redis sees it, before the retry: it ends no later than t1 + p1 + 1 ms
    // (PTTL counts whole milliseconds and a key lives through its last one).
    let p1: i64 = conn.pttl("lockgate:{job:1}").await.expect("PTTL");
    let t1 = Instant::now();
    let sent = Instant::now();
    let retry = post().await.done(200);
    assert_eq!(retry.token, first.token);
    assert_eq!(retry.fence, first.fence);
    // The promise starts no earlier than `sent` and must end no later than the key, so it is
    // at most p1 + 1 - (sent - t1). (Measuring from when the answer arrived instead would be
    // stricter than the property: the gateway builds its answer before it arrives.)
    let promised = retry.ttl_ms as i64;
    let bound = p1 + 1 - sent.duration_since(t1).as_millis() as i64;
    assert!(
        promised <= bound,
        "promised {promised} ms, the key had at most {bound} ms left"
    );
}

/// The ttl_ms returned is what is left after the round trip: a slow link shortens it, and a
/// link slower than the lease gets no lock at all.
#[tokio::test]
async fn validity_subtracts_the_time_spent_reaching_redis() {
    let redis = RedisServer::start();
    let proxy = LatencyProxy::start(redis.port(), Duration::ZERO).await;
    let mut config = redis_config(&proxy.url());
    config.redis_timeout = Duration::from_secs(3);
    let gw = Gateway::start(config).await;
    let locks = gw.locks();
    locks.acquire("warm-up", json!({})).await.done(201);

    proxy.set_delay(Duration::from_millis(300));
    let ttl = locks
        .acquire("slow", json!({"ttl_ms": 2000}))
        .await
        .done(201)
        .ttl_ms;
    assert!(
        ttl <= 1700,
        "300 ms of latency must come off a 2000 ms lease, got {ttl}"
    );

    locks
        .acquire("too-slow", json!({"ttl_ms": 200}))
        .await
        .refused(503, "backend-unavailable");
}

/// The commands the gateway chose, as its metrics and connect log name them.
async fn chosen_commands(gw: &Gateway) -> (String, String, String) {
    let text = gw.metrics_text().await;
    let line = text
        .lines()
        .find(|l| l.starts_with("lockgate_redis_server_info{"))
        .unwrap_or_else(|| panic!("no server info in\n{text}"));
    let label = |name: &str| {
        line.split(&format!("{name}=\""))
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_default()
            .to_owned()
    };
    (label("server"), label("release"), label("renew"))
}

/// Release and renew use the server's native commands where it has them (Valkey 9:
/// `DELIFEQ`, `SET … IFEQ`), Lua where it does not (Redis 7), and always Lua with
/// `--redis-native-commands off`; either way a cycle of acquire, renew, release by another
/// token (409), release (204) and release again (404) behaves the same.
#[tokio::test]
async fn release_and_renew_use_native_commands_where_the_server_has_them() {
    use lockgate::backend::redis::NativeCommands;
    let redis = RedisServer::start();
    for native in [NativeCommands::Auto, NativeCommands::Off] {
        let mut config = redis_config(&redis.url());
        config.native_commands = native;
        let gw = Gateway::start(config).await;
        let locks = gw.locks();
        let grant = locks.acquire("native", json!({})).await.done(201);
        let (server, release, renew) = chosen_commands(&gw).await;
        let expected = match (crate::support::redis::server_kind(), native) {
            ("valkey", NativeCommands::Auto) => ("delifeq", "set_ifeq"),
            _ => ("lua", "lua"),
        };
        assert_eq!(server, crate::support::redis::server_kind());
        assert_eq!((release.as_str(), renew.as_str()), expected, "{native:?}");

        let token = grant.token.clone();
        let renew = json!({"ttl_ms": 20000});
        let renewed = locks.renew("native", &token, renew.clone()).await.done(200);
        assert_eq!(renewed.fence, grant.fence);
        locks
            .renew("native", UNISSUED_TOKEN, renew.clone())
            .await
            .refused(409, "not-owner");
        locks
            .release("native", UNISSUED_TOKEN)
            .await
            .refused(409, "not-owner");
        locks.release("native", &token).await.done(204);
        locks
            .release("native", &token)
            .await
            .refused(404, "lock-not-held");
        locks
            .renew("native", &token, renew)
            .await
            .refused(404, "lock-not-held");
    }
}

/// Where an ACL forbids the native commands, the first refusal switches the connection back
/// to Lua and the request still succeeds.
#[tokio::test]
async fn a_refused_native_command_falls_back_to_lua() {
    if crate::support::redis::server_kind() != "valkey" {
        // Only a server with native commands can refuse them.
        return;
    }
    let redis = RedisServer::start();
    redis.acl_user(
        "locker",
        "locker-secret",
        &["~*", "&*", "+@all", "-delifeq"],
    );
    let url = format!("redis://locker:locker-secret@127.0.0.1:{}", redis.port());
    let gw = Gateway::start(redis_config(&url)).await;
    let locks = gw.locks();
    for _round in 0..3 {
        let grant = locks.acquire("acl", json!({})).await.done(201);
        locks.release("acl", &grant.token).await.done(204);
    }
}

/// Two replicas configured the way the chart configures the shared service (one Redis, one
/// token secret from one Secret): a retry with the same Idempotency-Key that lands on the other
/// replica gets 200 with the first one's token and fence, not 409. With a secret per process it
/// would be 409: shown by a third gateway with a secret of its own.
#[tokio::test]
async fn replicas_sharing_the_token_secret_replay_each_others_grants() {
    let redis = RedisServer::start();
    let shared = "a-token-secret-of-at-least-32-bytes-0123456789";
    let replica = |secret: &str| {
        let mut config = redis_config(&redis.url());
        config.token_secret = Some(secret.parse().expect("infallible"));
        Gateway::start(config)
    };
    let (first, second) = (replica(shared).await, replica(shared).await);
    let other = replica("another-secret-of-at-least-32-bytes-9876543210").await;
    let key = "retry-0123456789-abcdef";
    let (first, second, other) = (first.locks(), second.locks(), other.locks());
    let granted = first
        .acquire_once("replicated:job", key, json!({}))
        .await
        .done(201);
    let retried = second
        .acquire_once("replicated:job", key, json!({}))
        .await
        .done(200);
    assert_eq!(retried.token, granted.token);
    assert_eq!(retried.fence, granted.fence);
    other
        .acquire_once("replicated:job", key, json!({}))
        .await
        .refused(409, "lock-held");
}
