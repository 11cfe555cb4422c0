//! End to end: HTTP to a gateway on a socket, backed by real `redis-server` processes that
//! each test starts and owns.

use std::process::Command;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use serde_json::{Value, json};

use crate::support::gateway::{Gateway, redis_config};
use crate::support::proxy::LatencyProxy;
use crate::support::redis::RedisServer;
use crate::support::{assert_problem, eventually, status_json};

async fn gateway_for(redis: &RedisServer) -> Gateway {
    Gateway::start(redis_config(&redis.url())).await
}

fn token_of(body: &Value) -> String {
    body["token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token in {body}"))
        .to_owned()
}

fn fence_of(body: &Value) -> u64 {
    body["fence"]
        .as_u64()
        .unwrap_or_else(|| panic!("no fence in {body}"))
}

/// The walk-through a new user does with curl: acquire, conflict, wrong-token release,
/// release, release again; the lock key holds exactly the token.
#[tokio::test]
async fn acquire_conflict_and_release_against_redis() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let mut conn = redis.conn().await;

    let (status, grant) = status_json(
        gw.acquire("orders:42", Some(json!({"ttl_ms": 10000})))
            .await,
    )
    .await;
    assert_eq!(status, 201, "{grant}");
    let token = token_of(&grant);
    assert!(fence_of(&grant) > 0);
    let ttl = grant["ttl_ms"].as_u64().expect("ttl_ms");
    assert!((9000..=10000).contains(&ttl), "{ttl}");
    let stored: String = conn.get("lockgate:{orders:42}").await.expect("GET");
    assert_eq!(stored, token, "the key holds exactly the token");

    let held = gw.acquire("orders:42", None).await;
    let retry_after: u64 = held.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    let (status, problem) = status_json(held).await;
    assert_problem(status, &problem, 409, "lock-held");
    assert!(
        problem["retry_after_ms"]
            .as_u64()
            .is_some_and(|ms| ms > 9000 && ms <= 10000),
        "{problem}"
    );
    assert_eq!(retry_after, 10);

    let (status, problem) = status_json(
        gw.release("orders:42", "AAAAAAAAAAAAAAAAAAAAAA.1763712000123456")
            .await,
    )
    .await;
    assert_problem(status, &problem, 409, "not-owner");
    let still: Option<String> = conn.get("lockgate:{orders:42}").await.expect("GET");
    assert_eq!(
        still.as_deref(),
        Some(token.as_str()),
        "a wrong token must not release"
    );

    assert_eq!(gw.release("orders:42", &token).await.status(), 204);
    let gone: Option<String> = conn.get("lockgate:{orders:42}").await.expect("GET");
    assert_eq!(gone, None);
    let (status, problem) = status_json(gw.release("orders:42", &token).await).await;
    assert_problem(status, &problem, 404, "lock-not-held");
}

/// Renew sets a new PTTL on the key, and inspect reports it without the token.
#[tokio::test]
async fn renew_extends_the_pttl_and_inspect_hides_the_token() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let mut conn = redis.conn().await;
    let (_, grant) = status_json(gw.acquire("r", Some(json!({"ttl_ms": 2000}))).await).await;
    let token = token_of(&grant);
    let before: i64 = conn.pttl("lockgate:{r}").await.expect("PTTL");
    assert!(before <= 2000);

    let (status, renewed) =
        status_json(gw.renew("r", &token, json!({"ttl_ms": 60000})).await).await;
    assert_eq!(status, 200, "{renewed}");
    assert_eq!(renewed["fence"], grant["fence"]);
    let after: i64 = conn.pttl("lockgate:{r}").await.expect("PTTL");
    assert!(after > 55_000, "PTTL after renew: {after}");

    let response = gw.inspect("r").await;
    let raw = response.text().await.expect("body");
    assert!(!raw.contains(&token), "inspect leaked the token: {raw}");
    let seen: Value = serde_json::from_str(&raw).expect("json");
    assert_eq!(seen["held"], true);
    assert_eq!(seen["fence"], grant["fence"]);
    assert!(
        seen["ttl_ms"].as_u64().is_some_and(|ms| ms > 55_000),
        "{seen}"
    );

    let (status, problem) = status_json(
        gw.renew("r", "AAAAAAAAAAAAAAAAAAAAAA.1763712000123456", json!({}))
            .await,
    )
    .await;
    assert_problem(status, &problem, 409, "not-owner");
    gw.release("r", &token).await;
    let (status, problem) = status_json(gw.renew("r", &token, json!({})).await).await;
    assert_problem(status, &problem, 404, "lock-not-held");
}

/// Fences strictly increase across grants of a name, also after the fence counter is deleted;
/// no key is left per name once its locks are released (only the one fence counter); and the
/// value of a held lock is its token, which carries its fence.
#[tokio::test]
async fn fences_strictly_increase_even_after_the_counter_is_deleted() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let mut conn = redis.conn().await;
    let mut last = 0;
    for round in 0..20 {
        if round % 5 == 4 {
            let _: () = conn.del("lockgate:fences").await.expect("DEL");
        }
        let name = if round % 2 == 0 { "f" } else { "g" };
        let (status, grant) = status_json(gw.acquire(name, None).await).await;
        assert_eq!(status, 201, "{grant}");
        let fence = fence_of(&grant);
        assert!(fence > last, "round {round}: fence {fence} after {last}");
        last = fence;
        let stored: String = conn.get(format!("lockgate:{{{name}}}")).await.expect("GET");
        assert_eq!(stored, token_of(&grant));
        assert!(stored.ends_with(&format!(".{fence}")), "{stored}");
        assert_eq!(gw.release(name, &token_of(&grant)).await.status(), 204);
    }
    let counter: u64 = conn.get("lockgate:fences").await.expect("GET");
    assert_eq!(counter, last);
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .expect("KEYS");
    assert_eq!(
        keys,
        ["lockgate:fences"],
        "released locks leave no key of their own"
    );
}

/// Upgrading from a lockgate that kept one fence counter per name does not lower a fence: the
/// name's next grant reads that counter (even one far ahead of the clock), issues a larger
/// fence, and deletes it. A lock taken by the old version is still inspected (with the fence
/// its counter says), but its token, not of the shape lockgate issues now, moves nothing
/// through the gateway (400): it runs out at its ttl.
#[tokio::test]
async fn fences_continue_above_a_counter_left_by_an_older_lockgate() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let mut conn = redis.conn().await;
    let ahead: u64 = 4_000_000_000_000_000;
    let _: () = conn
        .set("lockgate:{upgraded}:fence", ahead)
        .await
        .expect("SET");
    let (status, grant) = status_json(gw.acquire("upgraded", None).await).await;
    assert_eq!(status, 201, "{grant}");
    assert!(fence_of(&grant) > ahead, "{grant}");
    let left: bool = conn
        .exists("lockgate:{upgraded}:fence")
        .await
        .expect("EXISTS");
    assert!(!left, "the old counter is superseded and deleted");
    assert_eq!(
        gw.release("upgraded", &token_of(&grant)).await.status(),
        204
    );
    let (status, again) = status_json(gw.acquire("upgraded", None).await).await;
    assert_eq!(status, 201);
    assert!(fence_of(&again) > fence_of(&grant));

    // A lock the old version granted: its token has no fence; its counter has it.
    let _: () = conn
        .set_ex("lockgate:{old}", "Yq3v7M1b0nqzT0m6k9xW2A", 60)
        .await
        .expect("SET");
    let _: () = conn.set("lockgate:{old}:fence", 1234).await.expect("SET");
    let (status, seen) = status_json(gw.inspect("old").await).await;
    assert_eq!(status, 200, "{seen}");
    assert_eq!(seen["fence"], 1234);
    let (status, refused) = status_json(
        gw.renew("old", "Yq3v7M1b0nqzT0m6k9xW2A", json!({"ttl_ms": 5000}))
            .await,
    )
    .await;
    assert_problem(status, &refused, 400, "invalid-request");
    let (status, refused) = status_json(gw.release("old", "Yq3v7M1b0nqzT0m6k9xW2A").await).await;
    assert_problem(status, &refused, 400, "invalid-request");
    assert_eq!(gw.inspect("old").await.status(), 200, "still held");
}

/// 2,000 acquire/release cycles on 2,000 distinct names leave one key behind (the fence
/// counter), and Redis memory does not grow with the names used (a key per name would be
/// about 300 KB here): a small version of the million-name benchmark in bench/README.md.
#[tokio::test]
async fn unique_names_leave_no_keys_behind() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let mut conn = redis.conn().await;
    // Connections made and scripts loaded before the baseline.
    for i in 0..100 {
        let (name, grant) = gw.acquire_named(format!("warm-up:{i}")).await;
        assert_eq!(gw.release(&name, &token_of(&grant)).await.status(), 204);
    }
    let before = used_memory(&mut conn).await;
    for chunk in 0..20 {
        let grants = futures_util::future::join_all(
            (0..100).map(|i| gw.acquire_named(format!("order:{chunk}:{i}"))),
        )
        .await;
        for (name, grant) in grants {
            assert_eq!(gw.release(&name, &token_of(&grant)).await.status(), 204);
        }
    }
    let keys: u64 = redis::cmd("DBSIZE")
        .query_async(&mut conn)
        .await
        .expect("DBSIZE");
    assert_eq!(keys, 1, "only the fence counter is left");
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

/// With a replica attached, `replicas: 1` reports one acknowledgement; requiring two with
/// only one replica answers 503 insufficient-replicas and leaves no lock behind.
#[tokio::test]
async fn wait_counts_replica_acknowledgements() {
    let master = RedisServer::start();
    let _replica = RedisServer::start_replica_of(&master);
    let gw = gateway_for(&master).await;
    let mut conn = master.conn().await;

    let (status, grant) = status_json(
        gw.acquire(
            "w",
            Some(json!({"replicas": 1, "replica_timeout_ms": 1000})),
        )
        .await,
    )
    .await;
    assert_eq!(status, 201, "{grant}");
    assert_eq!(grant["replicas_acked"], 1);

    let (status, renewed) = status_json(
        gw.renew(
            "w",
            &token_of(&grant),
            json!({"replicas": 1, "replica_timeout_ms": 1000}),
        )
        .await,
    )
    .await;
    assert_eq!(status, 200, "{renewed}");
    assert_eq!(renewed["replicas_acked"], 1);

    // A replica timeout longer than the backend timeout (1 s) is honoured, not cut short.
    let started = Instant::now();
    let (status, slow) = status_json(
        gw.acquire(
            "w3",
            Some(json!({"replicas": 2, "replica_timeout_ms": 1500})),
        )
        .await,
    )
    .await;
    assert_eq!(status, 201, "{slow}");
    assert_eq!(slow["replicas_acked"], 1);
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "WAIT returned after {:?}",
        started.elapsed()
    );
    assert_eq!(
        gw.acquire("w4", None).await.status(),
        201,
        "the shared connection survives a long WAIT"
    );

    let body = json!({"replicas": 2, "replica_timeout_ms": 200, "require_replicas": true});
    let (status, problem) = status_json(gw.acquire("w2", Some(body)).await).await;
    assert_problem(status, &problem, 503, "insufficient-replicas");
    assert_eq!(problem["replicas_acked"], 1);
    assert_eq!(problem["replicas_required"], 2);
    let exists: bool = conn.exists("lockgate:{w2}").await.expect("EXISTS");
    assert!(
        !exists,
        "the lock must be released after insufficient replicas"
    );
    let (status, problem) = status_json(gw.inspect("w2").await).await;
    assert_problem(status, &problem, 404, "lock-not-held");
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
    let mut conn = redis.conn().await;
    let (status, grant) = status_json(gw.acquire("r", Some(json!({"ttl_ms": 5000}))).await).await;
    assert_eq!(status, 201, "{grant}");
    let body = json!({"ttl_ms": 60000, "replicas": 1, "replica_timeout_ms": 2500});
    let (status, renewed) = status_json(gw.renew("r", &token_of(&grant), body).await).await;
    assert_eq!(status, 200, "{renewed}");
    assert_eq!(renewed["replicas_acked"], 0, "{renewed}");
    let pttl: i64 = conn.pttl("lockgate:{r}").await.expect("PTTL");
    assert!(pttl > 50_000, "the renewal was applied: PTTL {pttl}");
    let body = json!({"replicas": 1, "replica_timeout_ms": 2500});
    let (status, acquired) = status_json(gw.acquire("r2", Some(body)).await).await;
    assert_eq!(status, 201, "{acquired}");
    assert_eq!(acquired["replicas_acked"], 0, "{acquired}");
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
    let slow = gw.acquire(
        "slow",
        Some(json!({"replicas": 1, "replica_timeout_ms": 3000})),
    );
    let blocked = async {
        // Let the slow request take the only connection first.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = Instant::now();
        let response = gw
            .acquire(
                "blocked",
                Some(json!({"replicas": 1, "replica_timeout_ms": 100})),
            )
            .await;
        let retry_after = response.headers().get("retry-after").cloned();
        (started.elapsed(), retry_after, status_json(response).await)
    };
    let (slow, (took, retry_after, (status, problem))) = tokio::join!(slow, blocked);
    assert_problem(status, &problem, 503, "wait-pool-exhausted");
    assert!(retry_after.is_some(), "Retry-After on {problem}");
    assert!(
        took < Duration::from_millis(1800),
        "answered after {took:?}"
    );
    let (slow_status, slow_body) = status_json(slow).await;
    assert_eq!(slow_status, 201, "{slow_body}");
    let metrics = gw
        .http
        .get(gw.url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
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
    let mut redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    assert_eq!(gw.acquire("before", None).await.status(), 201);

    redis.stop();
    for name in ["down1", "down2"] {
        let started = Instant::now();
        let response = gw.acquire(name, None).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(response.headers()["retry-after"], "1");
        let (status, problem) = status_json(response).await;
        assert_problem(status, &problem, 503, "backend-unavailable");
        assert!(
            !problem["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("127.0.0.1"),
            "{problem}"
        );
    }
    let ready = gw.http.get(gw.url("/readyz")).send().await.expect("readyz");
    assert_eq!(ready.status(), 503);

    redis.restart();
    eventually(
        Duration::from_secs(5),
        "acquire succeeds after Redis restarts",
        || async { (gw.acquire("after", None).await.status() == 201).then_some(()) },
    )
    .await;
    let ready = gw.http.get(gw.url("/readyz")).send().await.expect("readyz");
    assert_eq!(ready.status(), 200);
}

/// A frozen Redis (SIGSTOP) costs at most the backend timeout, never a hang; it serves
/// again after SIGCONT.
#[tokio::test]
async fn a_frozen_redis_is_a_503_within_the_timeout() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    assert_eq!(gw.acquire("a", None).await.status(), 201);
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
    let (status, problem) = status_json(gw.acquire("b", None).await).await;
    let elapsed = started.elapsed();
    signal("-CONT");
    assert_problem(status, &problem, 503, "backend-unavailable");
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
    eventually(
        Duration::from_secs(5),
        "acquire succeeds after SIGCONT",
        || async { (gw.acquire("c", None).await.status() == 201).then_some(()) },
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
    let mut conn = master.conn().await;
    assert_eq!(
        gw.acquire("s1", Some(json!({"replicas": 1})))
            .await
            .status(),
        201
    );
    assert_eq!(gw.acquire("s2", None).await.status(), 201);
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .expect("SCRIPT FLUSH");
    assert_eq!(gw.acquire("s3", None).await.status(), 201);
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .expect("SCRIPT FLUSH");
    let (status, grant) = status_json(
        gw.acquire(
            "s4",
            Some(json!({"replicas": 1, "replica_timeout_ms": 1000})),
        )
        .await,
    )
    .await;
    assert_eq!(status, 201, "{grant}");
    assert_eq!(grant["replicas_acked"], 1);
}

/// Locks taken through the gateway obey the classic Redis lock protocol and vice versa: a
/// plain client releases with compare-and-delete, and a plain SET NX PX lock is seen as held.
/// Only the plain client moves its own lock: its value is no token lockgate issued (400).
#[tokio::test]
async fn locks_interoperate_with_plain_redis_clients() {
    let redis = RedisServer::start();
    let gw = gateway_for(&redis).await;
    let mut conn = redis.conn().await;
    let compare_and_delete = redis::Script::new(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
    );

    let (_, grant) = status_json(gw.acquire("shared", None).await).await;
    let released: i64 = compare_and_delete
        .key("lockgate:{shared}")
        .arg(token_of(&grant))
        .invoke_async(&mut conn)
        .await
        .expect("CAD");
    assert_eq!(released, 1);
    assert_eq!(gw.inspect("shared").await.status(), 404);

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
    let (status, problem) = status_json(gw.acquire("ext", None).await).await;
    assert_problem(status, &problem, 409, "lock-held");
    let (status, refused) = status_json(gw.release("ext", "external-token").await).await;
    assert_problem(status, &refused, 400, "invalid-request");
    assert_eq!(gw.inspect("ext").await.status(), 200, "still held");
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
    let attempts = (0..32).map(|_| gw.acquire("race", None));
    let statuses: Vec<u16> = futures_util::future::join_all(attempts)
        .await
        .iter()
        .map(|r| r.status().as_u16())
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
    let mut conn = redis.conn().await;
    let post = || {
        gw.http
            .post(gw.url("/locks/job:1"))
            .header("Idempotency-Key", "2c5ea4c0-4067-11e9-8bad-9b1deb4d3b7d")
            .json(&json!({"ttl_ms": 5000}))
            .send()
    };
    let (status, first) = status_json(post().await.expect("first")).await;
    assert_eq!(status, 201, "{first}");
    // The key's life as Redis sees it, before the retry: it ends no later than t1 + p1 + 1 ms
    // (PTTL counts whole milliseconds and a key lives through its last one).
    let p1: i64 = conn.pttl("lockgate:{job:1}").await.expect("PTTL");
    let t1 = Instant::now();
    let sent = Instant::now();
    let (status, retry) = status_json(post().await.expect("retry")).await;
    assert_eq!(status, 200, "{retry}");
    assert_eq!(retry["token"], first["token"]);
    assert_eq!(retry["fence"], first["fence"]);
    // The promise starts no earlier than `sent` and must end no later than the key, so it is
    // at most p1 + 1 - (sent - t1). (Measuring from when the answer arrived instead would be
    // stricter than the property: the gateway builds its answer before it arrives.)
    let promised = retry["ttl_ms"].as_u64().expect("ttl_ms") as i64;
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
    assert_eq!(gw.acquire("warm-up", None).await.status(), 201);

    proxy.set_delay(Duration::from_millis(300));
    let (status, grant) =
        status_json(gw.acquire("slow", Some(json!({"ttl_ms": 2000}))).await).await;
    assert_eq!(status, 201, "{grant}");
    let ttl = grant["ttl_ms"].as_u64().expect("ttl_ms");
    assert!(
        ttl <= 1700,
        "300 ms of latency must come off a 2000 ms lease, got {ttl}"
    );

    let (status, problem) =
        status_json(gw.acquire("too-slow", Some(json!({"ttl_ms": 200}))).await).await;
    assert_problem(status, &problem, 503, "backend-unavailable");
}

/// The commands the gateway chose, as its metrics and connect log name them.
async fn chosen_commands(gw: &Gateway) -> (String, String, String) {
    let text = gw
        .http
        .get(gw.url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
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
        let (status, grant) = status_json(gw.acquire("native", None).await).await;
        assert_eq!(status, 201, "{grant}");
        let (server, release, renew) = chosen_commands(&gw).await;
        let expected = match (crate::support::redis::server_kind(), native) {
            ("valkey", NativeCommands::Auto) => ("delifeq", "set_ifeq"),
            _ => ("lua", "lua"),
        };
        assert_eq!(server, crate::support::redis::server_kind());
        assert_eq!((release.as_str(), renew.as_str()), expected, "{native:?}");

        let token = token_of(&grant);
        let (status, renewed) =
            status_json(gw.renew("native", &token, json!({"ttl_ms": 20000})).await).await;
        assert_eq!(status, 200, "{renewed}");
        assert_eq!(renewed["fence"], grant["fence"]);
        let (status, problem) = status_json(
            gw.renew(
                "native",
                "AAAAAAAAAAAAAAAAAAAAAA.1763712000123456",
                json!({"ttl_ms": 20000}),
            )
            .await,
        )
        .await;
        assert_problem(status, &problem, 409, "not-owner");
        let (status, problem) = status_json(
            gw.release("native", "AAAAAAAAAAAAAAAAAAAAAA.1763712000123456")
                .await,
        )
        .await;
        assert_problem(status, &problem, 409, "not-owner");
        assert_eq!(gw.release("native", &token).await.status(), 204);
        let (status, problem) = status_json(gw.release("native", &token).await).await;
        assert_problem(status, &problem, 404, "lock-not-held");
        let (status, problem) =
            status_json(gw.renew("native", &token, json!({"ttl_ms": 20000})).await).await;
        assert_problem(status, &problem, 404, "lock-not-held");
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
    let _: () = redis
        .query(
            redis::cmd("ACL")
                .arg("SETUSER")
                .arg("locker")
                .arg("on")
                .arg(">locker-secret")
                .arg("~*")
                .arg("&*")
                .arg("+@all")
                .arg("-delifeq"),
        )
        .expect("ACL SETUSER");
    let url = format!("redis://locker:locker-secret@127.0.0.1:{}", redis.port());
    let gw = Gateway::start(redis_config(&url)).await;
    for round in 0..3 {
        let (status, grant) = status_json(gw.acquire("acl", None).await).await;
        assert_eq!(status, 201, "round {round}: {grant}");
        assert_eq!(
            gw.release("acl", &token_of(&grant)).await.status(),
            204,
            "round {round}"
        );
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
    let post = |gw: &Gateway| {
        gw.http
            .post(gw.url("/locks/replicated:job"))
            .header("Idempotency-Key", key)
            .send()
    };
    let granted = post(&first).await.expect("send");
    assert_eq!(granted.status(), 201);
    let granted: serde_json::Value = granted.json().await.expect("json");
    let retried = post(&second).await.expect("send");
    assert_eq!(retried.status(), 200);
    let retried: serde_json::Value = retried.json().await.expect("json");
    assert_eq!(retried["token"], granted["token"]);
    assert_eq!(retried["fence"], granted["fence"]);
    assert_eq!(post(&other).await.expect("send").status(), 409);
}
