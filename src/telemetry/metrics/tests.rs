//! Tests of the metrics: the rendered exposition text.

use super::*;

#[test]
fn requests_render_as_counters_and_cumulative_histograms() {
    let metrics = Metrics::new(&["lock", "semaphore"]);
    let (none, lock, semaphore) = (0, 1, 2);
    let (micros, millis, secs) = (
        Duration::from_micros,
        Duration::from_millis,
        Duration::from_secs,
    );
    for (kind, operation, outcome, took) in [
        (lock, Operation::Acquire, "acquired", micros(300)),
        (lock, Operation::Acquire, "held", millis(2)),
        (semaphore, Operation::Acquire, "acquired", micros(300)),
        (none, Operation::Healthz, "ok", Duration::ZERO),
        (lock, Operation::Acquire, "something-new", secs(100)),
        // Listing locks and listing semaphores: two series, told apart by `kind`.
        (lock, Operation::List, "listed", Duration::ZERO),
        (semaphore, Operation::List, "listed", Duration::ZERO),
        (semaphore, Operation::List, "listed", Duration::ZERO),
    ] {
        metrics.request(kind, operation, outcome, took);
    }
    let text = metrics.render(Gauges {
        waiters: 3,
        in_flight: 1,
        watchers: 0,
    });
    for line in [
        "lockgate_requests_total{operation=\"acquire\",kind=\"lock\",outcome=\"acquired\"} 1\n",
        "lockgate_requests_total{operation=\"acquire\",kind=\"lock\",outcome=\"held\"} 1\n",
        "lockgate_requests_total{operation=\"acquire\",kind=\"lock\",outcome=\"other\"} 1\n",
        "lockgate_request_duration_seconds_bucket{operation=\"acquire\",kind=\"lock\",le=\"0.0005\"} 1\n",
        "lockgate_request_duration_seconds_bucket{operation=\"acquire\",kind=\"lock\",le=\"0.0025\"} 2\n",
        "lockgate_request_duration_seconds_bucket{operation=\"acquire\",kind=\"lock\",le=\"+Inf\"} 3\n",
        "lockgate_request_duration_seconds_count{operation=\"acquire\",kind=\"lock\"} 3\n",
        "lockgate_requests_total{operation=\"acquire\",kind=\"semaphore\",outcome=\"acquired\"} 1\n",
        "lockgate_requests_total{operation=\"healthz\",outcome=\"ok\"} 1\n",
        "lockgate_requests_total{operation=\"list\",kind=\"lock\",outcome=\"listed\"} 1\n",
        "lockgate_requests_total{operation=\"list\",kind=\"semaphore\",outcome=\"listed\"} 2\n",
        "lockgate_waiters 3\n",
    ] {
        assert!(text.contains(line), "no line {line:?} in:\n{text}");
    }
    assert!(!text.contains("operation=\"renew\""));
}

/// docs/operations.md's metrics table names every metric family the exposition has, and its
/// `operation` paragraph every operation, `call` every Redis call: what an operator reads
/// there is what the gateway exports.
#[test]
fn the_operations_guide_names_every_metric_operation_and_call() {
    const GUIDE: &str = include_str!("../../../docs/operations.md");
    let metrics = Metrics::new(&["lock"]);
    let text = metrics.render(Gauges {
        waiters: 0,
        in_flight: 0,
        watchers: 0,
    });
    let families: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split(' ').next())
        .collect();
    assert!(families.len() > 10, "{text}");
    for family in families {
        assert!(
            GUIDE.contains(&format!("`{family}`")),
            "{family} is not in docs/operations.md"
        );
    }
    for operation in Operation::ALL {
        let label = format!("`{}`", operation.label());
        assert!(
            GUIDE.contains(&label),
            "operation {label} is not in docs/operations.md"
        );
    }
    for call in REDIS_CALLS {
        assert!(
            GUIDE.contains(&format!("`{call}`")),
            "call {call} is not in docs/operations.md"
        );
    }
}
