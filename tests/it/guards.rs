//! Guards against the ways Redis loses locks without an error: a node that may evict keys is
//! refused at startup (exit 64) unless `--allow-eviction`, and one that turns so while the
//! gateway serves is logged once and shown by `lockgate_redis_eviction_possible`; on one Redis,
//! a Cluster master and a Redlock node.

use std::time::Duration;

use lockgate::http::dto::RenewBody;
use serde_json::json;

use crate::support::answers::Answered;
use crate::support::eventually;
use crate::support::gateway::{Gateway, cluster_config, redis_config, redlock_trio};
use crate::support::process::{ServerProcess, lockgate};
use crate::support::redis::{RedisCluster, RedisServer};
use crate::support::workload::{self, Workload};

/// Makes `redis` a server that evicts keys when full (as managed services often default to).
fn evicting(redis: &RedisServer) {
    set_policy(redis, "allkeys-lru");
    let _: () = redis
        .query(redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg("8mb"))
        .expect("CONFIG SET maxmemory");
}

fn set_policy(redis: &RedisServer, policy: &str) {
    let _: () = redis
        .query(
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("maxmemory-policy")
                .arg(policy),
        )
        .expect("CONFIG SET maxmemory-policy");
}

/// The gauge's value for the node on `port`, if the exposition has it.
fn eviction_gauge(exposition: &str, port: u16) -> Option<u8> {
    let series = format!("lockgate_redis_eviction_possible{{node=\"127.0.0.1:{port}\"}} ");
    exposition
        .lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .and_then(|value| value.trim().parse().ok())
}

async fn run_to_exit(args: &[&str]) -> (Option<i32>, String) {
    let out = tokio::time::timeout(Duration::from_secs(20), lockgate().args(args).output())
        .await
        .expect("lockgate exits")
        .expect("run lockgate");
    (
        out.status.code(),
        String::from_utf8(out.stderr).expect("utf-8"),
    )
}

/// The refusal: exit 64, one line naming the node, its policy and the fix.
fn assert_refused(code: Option<i32>, stderr: &str, port: u16) {
    assert_eq!(code, Some(64), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    for needed in [
        &format!("127.0.0.1:{port}")[..],
        "maxmemory-policy allkeys-lru",
        "noeviction",
        "--allow-eviction",
    ] {
        assert!(stderr.contains(needed), "{needed}: {stderr}");
    }
}

/// A Redis with `maxmemory` and `allkeys-lru` is refused at startup; with `--allow-eviction`
/// the gateway starts, warns, and its gauge says 1.
#[tokio::test]
async fn an_evicting_redis_is_refused_at_startup() {
    let redis = RedisServer::start();
    evicting(&redis);
    let url = redis.url();
    let (code, stderr) = run_to_exit(&["--redis-url", &url, "--listen", "127.0.0.1:0"]).await;
    assert_refused(code, &stderr, redis.port());

    let server = ServerProcess::start(&["--redis-url", &url, "--allow-eviction"], &[]).await;
    eventually(Duration::from_secs(5), "the gauge says 1", || async {
        let text = server.metrics().await?;
        (eviction_gauge(&text, redis.port()) == Some(1)).then_some(())
    })
    .await;
    let logs = server.logs();
    assert!(
        logs.contains("WARN") && logs.contains("may evict lock keys"),
        "{logs}"
    );
}

/// The startup refusal covers every Cluster master and every Redlock node.
#[tokio::test]
async fn an_evicting_cluster_master_or_redlock_node_is_refused_at_startup() {
    let cluster = RedisCluster::start(3, 0);
    let master = cluster.masters()[1];
    evicting(master);
    let seeds = cluster.seed_urls().join(",");
    let (code, stderr) = run_to_exit(&["--cluster", &seeds, "--listen", "127.0.0.1:0"]).await;
    assert_refused(code, &stderr, master.port());

    let nodes = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    evicting(&nodes[2]);
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let (code, stderr) =
        run_to_exit(&["--redlock", &urls.join(","), "--listen", "127.0.0.1:0"]).await;
    assert_refused(code, &stderr, nodes[2].port());
}

/// A policy set to `allkeys-lru` while the gateway serves is logged once at error level and
/// shown by the gauge within the check interval (200 ms here, `--redis-check-interval`); set
/// back to `noeviction`, the gauge goes back to 0.
#[tokio::test]
async fn an_eviction_policy_set_at_runtime_is_reported() {
    let redis = RedisServer::start();
    let url = redis.url();
    let server = ServerProcess::start(
        &["--redis-url", &url, "--redis-check-interval", "200ms"],
        &[],
    )
    .await;
    let gauge = || async { eviction_gauge(&server.metrics().await?, redis.port()) };
    eventually(Duration::from_secs(5), "the gauge says 0", || async {
        (gauge().await == Some(0)).then_some(())
    })
    .await;
    evicting(&redis);
    let turned = std::time::Instant::now();
    eventually(Duration::from_secs(2), "the gauge says 1", || async {
        (gauge().await == Some(1)).then_some(())
    })
    .await;
    let errors = || {
        server
            .logs()
            .lines()
            .filter(|line| line.contains("ERROR") && line.contains("maxmemory-policy allkeys-lru"))
            .count()
    };
    eventually(Duration::from_secs(2), "an error line", || async {
        (errors() == 1).then_some(())
    })
    .await;
    assert!(
        turned.elapsed() < Duration::from_secs(2),
        "seen within the interval: {:?}",
        turned.elapsed()
    );
    // Looked at again and again (three more `INFO memory` looks, as Redis counts them; the
    // test's own `INFO commandstats` taken out), it is logged once.
    let mut polls = 0;
    let mut looks = || {
        let calls = redis.command_calls("info");
        polls += 1;
        calls - (polls - 1)
    };
    let first = looks();
    eventually(Duration::from_secs(5), "three more looks", || {
        let seen = looks();
        async move { (seen >= first + 3).then_some(()) }
    })
    .await;
    assert_eq!(errors(), 1, "{}", server.logs());
    set_policy(&redis, "noeviction");
    eventually(Duration::from_secs(2), "the gauge back at 0", || async {
        (gauge().await == Some(0)).then_some(())
    })
    .await;
}

/// The gauge of each node on `ports`, if the exposition has them all.
async fn gauges(gw: &Gateway, ports: Vec<u16>) -> Option<Vec<u8>> {
    let text = gw.metrics_text().await;
    ports
        .iter()
        .map(|port| eviction_gauge(&text, *port))
        .collect()
}

/// At runtime the gauge covers each Cluster master and each Redlock node on its own.
#[tokio::test]
async fn each_cluster_master_and_redlock_node_is_watched() {
    let cluster = RedisCluster::start(3, 0);
    let gw = Gateway::start(cluster_config(&cluster.seed_urls())).await;
    let masters = cluster.masters();
    let ports: Vec<u16> = masters.iter().map(|m| m.port()).collect();
    eventually(Duration::from_secs(5), "every master at 0", || async {
        (gauges(&gw, ports.clone()).await == Some(vec![0, 0, 0])).then_some(())
    })
    .await;
    evicting(masters[1]);
    eventually(Duration::from_secs(2), "the second master at 1", || async {
        (gauges(&gw, ports.clone()).await == Some(vec![0, 1, 0])).then_some(())
    })
    .await;

    let (gw, nodes) = redlock_trio().await;
    let ports: Vec<u16> = nodes.iter().map(RedisServer::port).collect();
    eventually(Duration::from_secs(5), "every node at 0", || async {
        (gauges(&gw, ports.clone()).await == Some(vec![0, 0, 0])).then_some(())
    })
    .await;
    evicting(&nodes[0]);
    eventually(Duration::from_secs(2), "the first node at 1", || async {
        (gauges(&gw, ports.clone()).await == Some(vec![1, 0, 0])).then_some(())
    })
    .await;

    // One Redis, in-process: the same gauge.
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    evicting(&redis);
    eventually(Duration::from_secs(2), "the server at 1", || async {
        (gauges(&gw, vec![redis.port()]).await == Some(vec![1])).then_some(())
    })
    .await;
}

/// A full Redis (`maxmemory` reached under `noeviction`) refuses writes: acquires answer 503
/// `backend-full` at once (no waiting out a timeout, nothing to withdraw), the cause is logged
/// once however many fail on it, and the first acquire after memory frees succeeds.
#[tokio::test]
async fn a_full_redis_is_answered_as_such_and_recovered_from_at_once() {
    let redis = RedisServer::start();
    let server = ServerProcess::start(&["--redis-url", &redis.url()], &[]).await;
    let client = server.client(None);
    let acquire = async |name: &str| client.acquire(name, &json!({}), None, None).await;
    acquire("warm").await.done(201);
    let _: () = redis
        .query(redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(1))
        .expect("CONFIG SET maxmemory");
    let mut slowest = Duration::ZERO;
    for i in 0..50 {
        let started = std::time::Instant::now();
        let answer = acquire(&format!("full:{i}")).await;
        slowest = slowest.max(started.elapsed());
        assert!(answer.retry_after().is_some(), "{answer:?}");
        answer.refused(503, "backend-full");
    }
    eprintln!("slowest backend-full answer: {slowest:?}");
    // Answered as refused, not after waiting out the 1 s Redis timeout.
    assert!(slowest < Duration::from_millis(500), "{slowest:?}");
    let logs = server.logs();
    let warned = logs
        .lines()
        .filter(|line| line.contains(" WARN ") && line.contains("backend-full"))
        .count();
    assert_eq!(warned, 1, "{logs}");
    assert!(!logs.contains("could not withdraw"), "{logs}");
    let metrics = server.metrics().await.expect("scrape");
    assert!(
        metrics.contains("lockgate_backend_errors_total{kind=\"full\"} 50"),
        "{metrics}"
    );
    let _: () = redis
        .query(redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(0))
        .expect("CONFIG SET maxmemory");
    acquire("full:after").await.done(201);
}

/// A full Redis refuses new grants, but what it granted goes on: renewing adds nothing, so a
/// lock, a read lock, a reentrant lock, a semaphore's permit and a multi-lock renew, a hold
/// stream keeps its permit, and each is released. (A re-entry is a new hold: refused.)
#[tokio::test]
async fn a_full_redis_still_renews_and_releases_what_it_granted() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let (locks, permits) = (gw.client(), gw.client().semaphores());
    let set = gw.client().set(&["full:m1".into(), "full:m2".into()]);
    let mut leases = Vec::new();
    for (client, name, body) in [
        (&locks, "full:lock", json!({})),
        (&locks, "full:read", json!({"mode": "shared"})),
        (&locks, "full:again", json!({"reentrant": true})),
        (&permits, "full:permit", json!({"permits": 2})),
        (&set, "full:m1", json!({"names": ["full:m1", "full:m2"]})),
    ] {
        let grant = client.acquire(name, &body, None, None).await.done(201);
        leases.push((client, name, grant.token));
    }
    let body = json!({"permits": 1, "ttl_ms": 600});
    let hold = gw.client().semaphores().hold("full:held", &body).await;
    let mut held = hold.done(200);
    let acquired = held.next().await.expect("acquired");
    assert_eq!(acquired["event"], "acquired", "{acquired}");

    let _: () = redis
        .query(redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(1))
        .expect("CONFIG SET maxmemory");
    (locks.acquire("full:new", &json!({}), None, None).await).refused(503, "backend-full");
    let holder = gw.client().header("Lock-Token", &leases[2].2);
    let holder = holder.expect("a token header");
    let body = json!({"reentrant": true});
    let reentry = holder.acquire("full:again", &body, None, None).await;
    assert_eq!(reentry.status(), 503, "a re-entry is a new hold");
    let renewal: RenewBody = serde_json::from_value(json!({"ttl_ms": 60_000})).expect("a body");
    for (client, name, token) in &leases {
        let renewed = client.renew(name, token, &renewal, None).await;
        assert_eq!(renewed.status(), 200, "renewing {name}: {renewed:?}");
    }
    // A 600 ms permit is renewed every 200 ms: four renewals on the full server outlast its ttl.
    for _ in 0..4 {
        let event = tokio::time::timeout(Duration::from_secs(5), held.next())
            .await
            .expect("an event within 5 s")
            .expect("the stream goes on");
        assert_eq!(event["event"], "renewed", "{event}");
    }
    for (client, name, token) in &leases {
        let released = client.release(name, token, None).await;
        assert_eq!(released.status(), 204, "releasing {name}: {released:?}");
    }
}

/// The count of forward clock steps in an exposition.
fn forward_steps(exposition: &str) -> Option<u64> {
    exposition
        .lines()
        .find_map(|line| {
            line.strip_prefix("lockgate_redis_clock_steps_total{direction=\"forward\"} ")
        })
        .and_then(|n| n.trim().parse().ok())
}

/// Redis's wall clock stepped 10 s forward under a locking workload (a clock shim preloaded
/// into redis-server): the step is logged and counted within 2 s; grants are held back for
/// the step, so no grant made after the detection overlaps another (grants before it can:
/// the step ended their leases early, which is what the guard reports); fences never regress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_step_is_reported_and_grants_are_held_back() {
    let (offset, env) = match crate::support::clock::ClockOffset::new() {
        Ok(made) => made,
        Err(why) => {
            eprintln!("skipped: no clock shim can be built here: {why}");
            return;
        }
    };
    let redis = RedisServer::start_with_env(env);
    let server = ServerProcess::start(
        &[
            "--redis-url",
            &redis.url(),
            "--redis-check-interval",
            "200ms",
        ],
        &[],
    )
    .await;
    let steps = || async { forward_steps(&server.metrics().await?) };
    let names: Vec<String> = (0..16).map(|i| format!("clk:{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut load = Workload::new(48, &names);
    load.ttl_ms = 3_000;
    load.wait_ms = 15_000;
    // Holders keep their locks long enough to still be working when the step ends their leases.
    load.max_hold_ms = 2_500;
    let running = workload::start(&[server.url("")], &load);
    let history = running.history.clone();
    // Locks held by the workload when the clock steps: every name granted at least once.
    let every_name = names.len();
    eventually(
        Duration::from_secs(10),
        "the workload holding locks",
        || {
            let grants = history.check().grants();
            async move { (grants >= every_name).then_some(()) }
        },
    )
    .await;
    assert_eq!(steps().await, Some(0), "{}", server.logs());
    let stepped = history.now_us();
    offset.set(10_000_000);
    let detected = eventually(Duration::from_secs(2), "the step counted", || async {
        (steps().await == Some(1)).then(|| history.now_us())
    })
    .await;
    eprintln!("step detected after {} ms", (detected - stepped) / 1000);
    assert!(
        server
            .logs()
            .lines()
            .any(|l| l.contains(" ERROR ") && l.contains("clock stepped forward")),
        "{}",
        server.logs()
    );
    // The hold-back (10 s), and the grants after it.
    eventually(
        Duration::from_secs(20),
        "a grant after the hold-back",
        || {
            let granted = history.check().count_ops(|op| {
                op.invoke_us > detected
                    && op.complete_us > detected + 10_000_000
                    && matches!(op.outcome, crate::support::history::Outcome::Granted { .. })
            });
            async move { (granted > 0).then_some(()) }
        },
    )
    .await;
    let history = running.finish().await;
    let report = history.check();
    let after: Vec<_> = report
        .violations
        .iter()
        .filter_map(|v| match *v {
            crate::support::history::Violation::Overlap { first, second } => Some((first, second)),
            _ => None,
        })
        .collect();
    // A grant made after the detection: answered after it (with a margin for an answer
    // already on its way when the test saw the counter).
    let made_after = |op: usize| report.ops[op].complete_us > detected + 100_000;
    let (after, before): (Vec<_>, Vec<_>) = after
        .into_iter()
        .partition(|(a, b)| made_after(*a) || made_after(*b));
    eprintln!(
        "overlaps the step caused before its detection: {}; after: {}",
        before.len(),
        after.len()
    );
    assert!(
        after.is_empty(),
        "overlaps with a grant after the detection: {after:?}\n{report}"
    );
    report.assert_none(
        &crate::support::test_name(),
        &["fence-order", "server-error"],
    );
    let granted_after = report.count_ops(|op| {
        op.invoke_us > detected
            && matches!(op.outcome, crate::support::history::Outcome::Granted { .. })
    });
    assert!(
        granted_after > 0,
        "grants resumed after the hold-back: {report}"
    );
}

/// The node's `lockgate_backend_up` value, if the exposition has it.
fn up_gauge(exposition: &str, port: u16) -> Option<u8> {
    let series = format!("lockgate_backend_up{{node=\"127.0.0.1:{port}\"}} ");
    exposition
        .lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .and_then(|value| value.trim().parse().ok())
}

/// `lockgate_backend_up` follows Redis with no traffic at all: 1 while it answers, 0 within 2 s
/// of it stopping (lock calls then answer 503 with Retry-After), 1 again within 2 s of its
/// return, and locks work again without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_up_follows_redis_without_traffic() {
    let mut redis = RedisServer::start();
    let port = redis.port();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let reads = |want: u8| {
        let gw = &gw;
        move || async move { (up_gauge(&gw.metrics_text().await, port) == Some(want)).then_some(()) }
    };
    eventually(Duration::from_secs(2), "backend_up 1 at start", reads(1)).await;
    tokio::task::block_in_place(|| redis.stop());
    eventually(
        Duration::from_secs(2),
        "backend_up 0 with Redis stopped",
        reads(0),
    )
    .await;
    let refused = gw.locks().acquire("up:a", json!({})).await;
    assert!(refused.retry_after().is_some(), "{refused:?}");
    refused.refused(503, "backend-unavailable");
    tokio::task::block_in_place(|| redis.restart());
    eventually(
        Duration::from_secs(2),
        "backend_up 1 with Redis back",
        reads(1),
    )
    .await;
    eventually(Duration::from_secs(5), "a lock granted again", || async {
        (gw.locks().acquire("up:a", json!({})).await.status() == 201).then_some(())
    })
    .await;
}
