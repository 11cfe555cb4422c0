//! The Prometheus metrics change as operations happen.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;

use crate::support::answers::Answered;
use crate::support::eventually;
use crate::support::gateway::{Gateway, redis_config};
use crate::support::redis::RedisServer;

/// The metrics as a map from series (name and labels) to value.
async fn scrape(gw: &Gateway) -> HashMap<String, f64> {
    gw.metrics_text()
        .await
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

fn requests(metrics: &HashMap<String, f64>, operation: &str, outcome: &str) -> f64 {
    let series = format!(
        "lockgate_requests_total{{operation=\"{operation}\",kind=\"lock\",outcome=\"{outcome}\"}}"
    );
    metrics.get(&series).copied().unwrap_or(0.0)
}

/// Metrics follow the operations: requests by operation and outcome, latency histograms,
/// Redis round trips, waiters, hold streams and backend errors; no lock name or token in them.
#[tokio::test]
async fn metrics_change_as_operations_happen() {
    let mut redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let before = scrape(&gw).await;
    assert_eq!(requests(&before, "acquire", "acquired"), 0.0);

    let locks = gw.locks();
    let holder = locks.acquire("metered:1", json!({})).await.done(201).token;
    locks
        .acquire("metered:1", json!({}))
        .await
        .refused(409, "lock-held");
    let other = locks.acquire("metered:2", json!({})).await.done(201);
    locks
        .release("metered:1", &other.token)
        .await
        .refused(409, "not-owner");
    locks
        .renew("metered:1", &holder, json!({"ttl_ms": 10000}))
        .await
        .done(200);
    locks.inspect("metered:1").await.done(200);
    locks.release("metered:1", &holder).await.done(204);
    locks
        .release("metered:1", &holder)
        .await
        .refused(404, "lock-not-held");

    let after = scrape(&gw).await;
    for (operation, outcome, count) in [
        ("acquire", "acquired", 2.0),
        ("acquire", "held", 1.0),
        ("release", "not-owner", 1.0),
        ("renew", "renewed", 1.0),
        ("inspect", "inspected", 1.0),
        ("release", "released", 1.0),
        ("release", "not-held", 1.0),
    ] {
        assert_eq!(
            requests(&after, operation, outcome),
            count,
            "{operation} {outcome}"
        );
    }
    assert_eq!(
        after["lockgate_request_duration_seconds_count{operation=\"acquire\",kind=\"lock\"}"],
        3.0
    );
    // Scripts, or native commands where the server has them (Valkey: release and renew).
    let round_trips = |call: &str| {
        after
            .get(&format!(
                "lockgate_redis_roundtrip_seconds_count{{call=\"{call}\"}}"
            ))
            .copied()
            .unwrap_or(0.0)
    };
    assert!(round_trips("script") + round_trips("command") >= 8.0);
    assert_eq!(after["lockgate_waiters"], 0.0);
    assert_eq!(after["lockgate_hold_streams"], 0.0);

    // A waiter and a hold stream show in the gauges while they last.
    let blocker = locks.acquire("metered:2b", json!({})).await.done(201);
    let waiter = {
        let locks = gw.locks();
        tokio::spawn(async move { locks.acquire("metered:2b", json!({"wait_ms": 10000})).await })
    };
    let stream = gw.client().hold("metered:3", &json!({})).await;
    let mut lines = stream.done(200);
    assert_eq!(lines.next().await.expect("acquired")["event"], "acquired");
    eventually(
        Duration::from_secs(5),
        "the gauges count the waiter and the stream",
        || async {
            let now = scrape(&gw).await;
            (now["lockgate_waiters"] == 1.0 && now["lockgate_hold_streams"] == 1.0).then_some(())
        },
    )
    .await;
    drop(lines);
    locks.release("metered:2b", &blocker.token).await.done(204);
    waiter.await.expect("join").done(201);
    eventually(Duration::from_secs(5), "the gauges fall back", || async {
        let now = scrape(&gw).await;
        (now["lockgate_waiters"] == 0.0 && now["lockgate_hold_streams"] == 0.0).then_some(())
    })
    .await;

    // Backend errors are counted.
    redis.stop();
    locks
        .acquire("metered:4", json!({}))
        .await
        .refused(503, "backend-unavailable");
    let down = scrape(&gw).await;
    let errors: f64 = down
        .iter()
        .filter(|(series, _)| series.starts_with("lockgate_backend_errors_total"))
        .map(|(_, value)| value)
        .sum();
    assert!(errors >= 1.0, "{down:?}");
    assert!(requests(&down, "acquire", "backend-unavailable") >= 1.0);
    for series in down.keys() {
        assert!(!series.contains("metered"), "a lock name in {series}");
        assert!(!series.contains(&holder), "a token in {series}");
    }
}

/// Like every exporter, the gateway reports its build and its process: version, commit, build
/// day and compiler, CPU time, memory, file descriptors and start time.
#[tokio::test]
async fn build_and_process_metrics_are_exported() {
    let gw = Gateway::start(crate::support::gateway::config(
        lockgate::config::BackendChoice::Memory,
    ))
    .await;
    let metrics = scrape(&gw).await;
    use lockgate::build_info::{BUILT, REVISION, RUSTC, VERSION};
    let build = format!(
        "lockgate_build_info{{version=\"{VERSION}\",revision=\"{REVISION}\",built=\"{BUILT}\",rustc=\"{RUSTC}\"}}"
    );
    assert_eq!(metrics.get(&build), Some(&1.0), "{metrics:?}");
    for (name, at_least) in [
        ("process_resident_memory_bytes", 1_000_000.0),
        ("process_virtual_memory_bytes", 1_000_000.0),
        ("process_open_fds", 1.0),
        ("process_max_fds", 1.0),
        ("process_start_time_seconds", 1_600_000_000.0),
        ("process_cpu_seconds_total", 0.0),
    ] {
        let value = metrics.get(name).copied();
        assert!(value.is_some_and(|v| v >= at_least), "{name}: {value:?}");
    }
}

/// The guards' background calls (memory policy, clock, data-loss marker) are counted as
/// `call="guard"`, apart from the calls requests make: an idle gateway's request calls stay
/// still while its guard calls grow, so a cost per request read from the metrics is not
/// inflated by the time a test or a benchmark took.
#[tokio::test]
async fn guard_calls_are_counted_apart_from_request_calls() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let calls = |metrics: &HashMap<String, f64>, call: &str| {
        metrics
            .get(&format!(
                "lockgate_redis_roundtrip_seconds_count{{call=\"{call}\"}}"
            ))
            .copied()
            .unwrap_or(0.0)
    };
    let before = scrape(&gw).await;
    let guard_before = calls(&before, "guard");
    // Guards read each node's clock every 500 ms: a few of their rounds, with no request.
    let after = eventually(Duration::from_secs(10), "guard calls counted", || async {
        let now = scrape(&gw).await;
        (calls(&now, "guard") >= guard_before + 6.0).then_some(now)
    })
    .await;
    for call in ["script", "script_wait", "command"] {
        assert_eq!(calls(&after, call), calls(&before, call), "{call} calls");
    }
}

/// The value of `series` in a scrape, 0 when absent.
fn value(metrics: &HashMap<String, f64>, series: &str) -> f64 {
    metrics.get(series).copied().unwrap_or(0.0)
}

/// Waiting in line has a histogram of its own, by kind of lease and outcome, and is left out
/// of the acquire's latency (a `wait_ms` asked for is not slowness); holds have one too, by
/// how they ended: a release, and a hold stream's end as its watchdog learnt it (revoked).
#[tokio::test]
async fn waits_and_holds_have_histograms_and_waiting_is_not_latency() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let locks = gw.locks();
    let holder = locks
        .acquire("timed:1", json!({"ttl_ms": 30_000}))
        .await
        .done(201);
    // A wait that runs out: 400 ms in line, by the request's own deadline.
    locks
        .acquire("timed:1", json!({"wait_ms": 400}))
        .await
        .refused(409, "lock-held");
    let after_timeout = scrape(&gw).await;
    let waited = "lockgate_wait_seconds_sum{kind=\"lock\",outcome=\"timed_out\"}";
    assert!(value(&after_timeout, waited) >= 0.4, "{after_timeout:?}");
    assert_eq!(
        value(
            &after_timeout,
            "lockgate_wait_seconds_count{kind=\"lock\",outcome=\"timed_out\"}"
        ),
        1.0
    );
    let latency = "lockgate_request_duration_seconds_sum{operation=\"acquire\",kind=\"lock\"}";
    assert!(
        value(&after_timeout, latency) < 0.4,
        "the acquires' latency counts the 400 ms waited in line: {}",
        value(&after_timeout, latency)
    );

    // A wait that ends in a grant, and two holds that end in releases.
    let waiter = {
        let locks = gw.locks();
        tokio::spawn(async move { locks.acquire("timed:1", json!({"wait_ms": 10_000})).await })
    };
    eventually(Duration::from_secs(5), "the waiter waits", || async {
        (scrape(&gw).await["lockgate_waiters"] == 1.0).then_some(())
    })
    .await;
    locks.release("timed:1", &holder.token).await.done(204);
    let next = waiter.await.expect("join").done(201);
    locks.release("timed:1", &next.token).await.done(204);
    let released = scrape(&gw).await;
    assert_eq!(
        value(
            &released,
            "lockgate_wait_seconds_count{kind=\"lock\",outcome=\"granted\"}"
        ),
        1.0
    );
    assert_eq!(
        value(
            &released,
            "lockgate_hold_seconds_count{kind=\"lock\",ended=\"released\"}"
        ),
        2.0
    );

    // A hold stream's lease revoked by an operator ends as `revoked`.
    let stream = gw.client().hold("timed:2", &json!({"ttl_ms": 600})).await;
    let mut lines = stream.done(200);
    assert_eq!(lines.next().await.expect("acquired")["event"], "acquired");
    gw.client().force_release("timed:2").await.done(204);
    let revoked = "lockgate_hold_seconds_count{kind=\"lock\",ended=\"revoked\"}";
    eventually(
        Duration::from_secs(5),
        "the revoked hold is counted",
        || async { (value(&scrape(&gw).await, revoked) == 1.0).then_some(()) },
    )
    .await;
}
