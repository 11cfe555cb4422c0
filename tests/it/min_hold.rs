//! `min_hold_ms`, at most once per schedule: a lock released before its grant time plus the
//! minimum stays held until then (it expires; nobody else gets it meanwhile), and says so.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::answers::{Answered, acquire_at, json_of, lease_route};
use crate::support::backends::on_backends;
use crate::support::gateway::{Gateway, redis_config};
use crate::support::process::lockgate;
use crate::support::redis::RedisServer;
use crate::support::{assert_problem, eventually};

/// The minimum of these tests.
const MIN_HOLD: Duration = Duration::from_millis(1500);

/// Polls an acquire of `name` until it is granted; when the request that got it was sent.
async fn next_grant(gw: &Gateway, name: &str) -> Instant {
    eventually(
        Duration::from_secs(10),
        "the lock is granted again",
        || async {
            let sent = Instant::now();
            let answer = gw.locks().acquire(name, json!({"ttl_ms": 5000})).await;
            (answer.status() == 201).then_some(sent)
        },
    )
    .await
}

/// Released at once, a lock with `min_hold_ms` answers 200 with `held_left_ms` and
/// `held_until`; meanwhile it is held (inspect: 200, the time left; an acquire: 409
/// `lock-held` with `retry_after_ms` within the minimum); it is granted again only once the
/// minimum from its grant has passed. Released after its minimum, it goes at once (204).
async fn a_release_before_the_minimum_keeps_the_lock(gw: &Gateway) {
    let locks = gw.locks();
    let asked = Instant::now();
    let grant = locks
        .acquire(
            "cron:nightly",
            json!({"ttl_ms": 30_000, "min_hold_ms": MIN_HOLD.as_millis()}),
        )
        .await
        .done(201);
    let released = locks.release("cron:nightly", &grant.token).await.done(200);
    let body = released.expect("a body");
    assert_eq!(body["name"], "cron:nightly", "{body}");
    let left = body["held_left_ms"].as_u64().expect("held_left_ms");
    assert!(left > 0 && left <= MIN_HOLD.as_millis() as u64, "{body}");
    assert!(body["held_until"].as_str().is_some(), "{body}");
    let held = locks.inspect("cron:nightly").await.done(200);
    assert!(
        held.ttl_ms
            .is_some_and(|ms| ms <= MIN_HOLD.as_millis() as u64),
        "{held:?}"
    );
    let refused = locks
        .acquire("cron:nightly", json!({}))
        .await
        .refused(409, "lock-held");
    assert!(
        refused
            .retry_after_ms
            .is_some_and(|ms| ms <= MIN_HOLD.as_millis() as u64),
        "{refused:?}"
    );
    let again = next_grant(gw, "cron:nightly").await;
    // Granted (on the store's clock) at or after the grant time plus the minimum: the request
    // that got it was sent no earlier than the first one's sending plus the minimum, less
    // the request's own trip.
    assert!(
        again + Duration::from_millis(50) >= asked + MIN_HOLD,
        "granted again {:?} after the first acquire",
        again - asked
    );

    let late = locks
        .acquire("cron:late", json!({"ttl_ms": 30_000, "min_hold_ms": 200}))
        .await
        .done(201);
    tokio::time::sleep(Duration::from_millis(300)).await;
    locks.release("cron:late", &late.token).await.done(204);
    locks.acquire("cron:late", json!({})).await.done(201);
}

on_backends!(a_release_before_the_minimum_keeps_the_lock: dev, redis, sentinel, cluster, redlock);

/// A hold stream with `min_hold_ms` whose client goes away at once leaves the lock held until
/// the minimum, then free.
#[tokio::test]
async fn a_hold_stream_that_ends_early_keeps_the_lock_for_its_minimum() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let asked = Instant::now();
    let body = json!({"ttl_ms": 10_000, "min_hold_ms": MIN_HOLD.as_millis()});
    let mut lines = gw.client().hold("cron:held", &body).await.done(200);
    let acquired = lines.next().await.expect("acquired");
    assert_eq!(acquired["event"], "acquired", "{acquired}");
    drop(lines);
    eventually(
        Duration::from_secs(2),
        "the stream's lock is given back",
        || async {
            let held = gw.locks().inspect("cron:held").await.done(200);
            held.ttl_ms
                .is_some_and(|ms| ms <= MIN_HOLD.as_millis() as u64)
                .then_some(())
        },
    )
    .await;
    let again = next_grant(&gw, "cron:held").await;
    assert!(
        again + Duration::from_millis(50) >= asked + MIN_HOLD,
        "granted again {:?} after the hold began",
        again - asked
    );
}

/// `min_hold_ms` where it makes no sense is a 400 naming the field: a shared grant, a
/// reentrant or fair lock, a semaphore or a multi-lock (no such field), beyond `--max-ttl` or
/// beyond the hold's bound.
#[tokio::test]
async fn a_minimum_hold_where_it_makes_no_sense_is_refused() {
    let gw = Gateway::dev().await;
    for (path, body) in [
        ("/locks/m", json!({"min_hold_ms": 1000, "mode": "shared"})),
        ("/locks/m", json!({"min_hold_ms": 1000, "reentrant": true})),
        (
            "/locks/m",
            json!({"min_hold_ms": 1000, "fair": true, "wait_ms": 100}),
        ),
        ("/locks/m", json!({"min_hold_ms": 3_600_001})),
        (
            "/locks/m",
            json!({"min_hold_ms": 5000, "max_hold_ms": 1000}),
        ),
        (
            "/locks/m/hold",
            json!({"min_hold_ms": 1000, "mode": "shared"}),
        ),
        ("/semaphores/s", json!({"permits": 2, "min_hold_ms": 1000})),
        ("/locks", json!({"names": ["a", "b"], "min_hold_ms": 1000})),
    ] {
        let (status, problem) = match path.strip_suffix("/hold") {
            Some(held) => {
                let (client, name) = lease_route(gw.client(), held);
                let refused = client.hold(&name, &body).await;
                let problem = refused.refused(400, "invalid-request");
                (400, serde_json::to_value(problem).expect("JSON"))
            }
            None => json_of(acquire_at(gw.client(), path, &body).await),
        };
        assert_eq!(status, 400, "{path} {body}: {problem}");
        assert!(
            problem.to_string().contains("min_hold_ms"),
            "{path} {body}: {problem}"
        );
        assert_problem(status, &problem, 400, "invalid-request");
    }
}

/// A cron line: `lockgate run --wait 0 --min-hold 2s` on two "replicas" fired a little apart
/// runs the job once; the second run exits 75 without running it, and a run after the minimum
/// runs it again.
#[tokio::test]
async fn a_cron_line_runs_once_per_schedule() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let runs = dir.path().join("runs");
    let job = format!("echo run >> {}", runs.display());
    let cron = || {
        let mut cmd = lockgate();
        cmd.args([
            "run",
            "--gateway",
            &gw.url(""),
            "--wait",
            "0",
            "--min-hold",
            "2s",
        ])
        .args(["nightly-report", "--", "sh", "-c", &job]);
        cmd
    };
    let count = || {
        std::fs::read_to_string(&runs)
            .map(|text| text.lines().count())
            .unwrap_or(0)
    };
    let first = cron().output().await.expect("run");
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(
        String::from_utf8_lossy(&first.stderr).contains("stays held until"),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let second = cron().output().await.expect("run");
    assert_eq!(
        second.status.code(),
        Some(75),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert_eq!(count(), 1, "the job ran once");
    let third = eventually(
        Duration::from_secs(5),
        "a run after the minimum",
        || async {
            let out = cron().output().await.expect("run");
            (out.status.code() == Some(0)).then_some(out)
        },
    )
    .await;
    assert_eq!(third.status.code(), Some(0));
    assert_eq!(count(), 2);
    let usage = lockgate()
        .args([
            "run",
            "--gateway",
            &gw.url(""),
            "--min-hold",
            "1s",
            "--shared",
            "x",
            "--",
            "true",
        ])
        .output()
        .await
        .expect("run");
    assert_eq!(usage.status.code(), Some(64));
}
