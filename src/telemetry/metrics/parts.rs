//! Pieces the metrics are made of: a latency histogram of atomics, and a 0/1 gauge per node.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::MAX_SERVERS;

/// Upper bounds of the latency buckets, in seconds.
pub(super) const LATENCY: Bounds = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0,
];
/// Upper bounds of the buckets of how long a lease was waited for or held, in seconds: from
/// a millisecond to an hour.
pub(super) const LEASE_TIME: Bounds = [
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
    1800.0, 3600.0,
];

/// A histogram's bucket bounds (every histogram has as many).
pub(super) type Bounds = [f64; 18];

/// A histogram of durations: a count per bucket of `bounds` (not cumulative; summed when
/// rendered), the total in nanoseconds, and the number of observations.
#[derive(Debug)]
pub(super) struct Histogram {
    bounds: &'static Bounds,
    buckets: [AtomicU64; LATENCY.len() + 1],
    sum_nanos: AtomicU64,
    pub(super) count: AtomicU64,
}

impl Histogram {
    pub(super) const fn new(bounds: &'static Bounds) -> Self {
        Self {
            bounds,
            buckets: [const { AtomicU64::new(0) }; LATENCY.len() + 1],
            sum_nanos: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    pub(super) fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let bucket = self
            .bounds
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(self.bounds.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (bound, count) in self.bounds.iter().zip(&self.buckets) {
            cumulative += count.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
        }
        cumulative += self.buckets[self.bounds.len()].load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {cumulative}");
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(
            out,
            "{name}_count{{{labels}}} {}",
            self.count.load(Ordering::Relaxed)
        );
    }
}

/// A 0/1 gauge per Redis node (`host:port`), for at most [`MAX_SERVERS`] nodes (the oldest
/// dropped first). Node addresses are reduced to address characters before they become labels.
#[derive(Debug)]
pub(super) struct NodeFlags(Mutex<Vec<(String, bool)>>);

impl NodeFlags {
    pub(super) const fn new() -> Self {
        Self(Mutex::new(Vec::new()))
    }

    pub(super) fn set(&self, node: &str, flag: bool) {
        let node: String = node
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']'))
            .take(64)
            .collect();
        let mut nodes = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match nodes.iter_mut().find(|(known, _)| *known == node) {
            Some((_, known)) => *known = flag,
            None => {
                if nodes.len() >= MAX_SERVERS {
                    nodes.remove(0);
                }
                nodes.push((node, flag));
            }
        }
    }

    pub(super) fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n");
        for (node, flag) in self.0.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = writeln!(out, "{name}{{node=\"{node}\"}} {}", u8::from(*flag));
        }
    }
}
