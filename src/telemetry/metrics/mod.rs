//! Prometheus metrics, kept in fixed arrays of atomics and rendered in the text format at
//! scrape time.
//!
//! Every label takes its values from a short fixed list (operations, outcomes, error kinds),
//! never from a lock name or token, so the number of series is bounded. Recording is a couple
//! of relaxed atomic additions: nothing on the request path allocates, hashes a label set or
//! takes a lock (the reason for not using the `metrics` crate's registry here).
//!
//! The label values are in `labels`, the histogram and the per-node gauges in `parts`;
//! this file holds the metrics and renders them.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

mod labels;
mod parts;

pub use self::labels::{
    BackendErrorKind, HOLD_LOST_REASONS, HoldEnd, LEASE_KINDS, OUTCOMES, RedisCall, WaitEnd,
};
use self::labels::{REDIS_CALLS, labels, lease_kind_index, outcome_index};
use self::parts::{Histogram, LATENCY, LEASE_TIME, NodeFlags};
pub use crate::operation::Operation;

/// Most distinct servers the `lockgate_redis_server_info` metric lists.
const MAX_SERVERS: usize = 16;

/// All of the gateway's metrics. One per server (tests run several in one process).
#[derive(Debug)]
pub struct Metrics {
    /// The `kind` label's values: the kinds of lease the routes act on (`lock`, `multi`,
    /// `semaphore`, named by the route table's rows). A request's kind is an index into it
    /// plus one; 0 is a request on no lease (probes, documents), which has no `kind` label.
    kinds: Vec<&'static str>,
    /// By kind (as above), operation and outcome.
    requests: Vec<[[AtomicU64; OUTCOMES.len()]; Operation::ALL.len()]>,
    durations: Vec<[Histogram; Operation::ALL.len()]>,
    redis: [Histogram; REDIS_CALLS.len()],
    /// How long requests waited in line for a lease, by kind of lease ([`LEASE_KINDS`]) and
    /// how the wait ended.
    waits: [[Histogram; WaitEnd::ALL.len()]; LEASE_KINDS.len()],
    /// How long leases were held, by kind of lease and how the hold ended.
    holds: [[Histogram; HoldEnd::ALL.len()]; LEASE_KINDS.len()],
    backend_errors: [AtomicU64; BackendErrorKind::ALL.len()],
    hold_streams: AtomicI64,
    /// Hold streams ended by `lost`, by reason ([`HOLD_LOST_REASONS`]).
    hold_lost: [AtomicU64; HOLD_LOST_REASONS.len()],
    /// Label sets of `lockgate_redis_server_info`: the servers connected to, with the
    /// commands chosen for them. Written at connect, read at scrape.
    servers: Mutex<Vec<String>>,
    /// `lockgate_redis_eviction_possible`: per node address, whether it may evict lock keys.
    eviction: NodeFlags,
    /// `lockgate_backend_up`: per node address, whether it answered the last periodic check.
    backend_up: NodeFlags,
    /// `lockgate_redis_clock_steps_total`: forward, backward.
    clock_steps: [AtomicU64; 2],
    /// `lockgate_redis_data_losses_total`.
    data_losses: AtomicU64,
}

impl Default for Metrics {
    /// Metrics with no kind of lease: every request is counted without a `kind` label.
    fn default() -> Self {
        Self::new(&[])
    }
}

/// Values read from elsewhere at scrape time.
#[derive(Debug, Clone, Copy)]
pub struct Gauges {
    /// Requests waiting for a lock.
    pub waiters: usize,
    /// Requests being handled.
    pub in_flight: usize,
    /// Event streams open.
    pub watchers: usize,
}

impl Metrics {
    /// The metrics of a gateway whose routes act on the kinds of lease `kinds` (see
    /// `http::routes::lease_kinds`).
    pub fn new(kinds: &[&'static str]) -> Self {
        let by_kind = kinds.len() + 1;
        Self {
            kinds: kinds.to_vec(),
            requests: (0..by_kind)
                .map(|_| {
                    [const { [const { AtomicU64::new(0) }; OUTCOMES.len()] }; Operation::ALL.len()]
                })
                .collect(),
            durations: (0..by_kind)
                .map(|_| [const { Histogram::new(&LATENCY) }; Operation::ALL.len()])
                .collect(),
            redis: [const { Histogram::new(&LATENCY) }; REDIS_CALLS.len()],
            waits: [const { [const { Histogram::new(&LEASE_TIME) }; WaitEnd::ALL.len()] };
                LEASE_KINDS.len()],
            holds: [const { [const { Histogram::new(&LEASE_TIME) }; HoldEnd::ALL.len()] };
                LEASE_KINDS.len()],
            backend_errors: [const { AtomicU64::new(0) }; BackendErrorKind::ALL.len()],
            hold_streams: AtomicI64::new(0),
            hold_lost: [const { AtomicU64::new(0) }; HOLD_LOST_REASONS.len()],
            servers: Mutex::new(Vec::new()),
            eviction: NodeFlags::new(),
            backend_up: NodeFlags::new(),
            clock_steps: [const { AtomicU64::new(0) }; 2],
            data_losses: AtomicU64::new(0),
        }
    }

    /// Records a server connected to and the commands chosen for it (`release`, `renew`:
    /// `lua` or the native command).
    pub fn redis_server(&self, server: &str, version: &str, release: &str, renew: &str) {
        let clean = |text: &str| -> String {
            text.chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
                .take(32)
                .collect()
        };
        let labels = format!(
            "server=\"{}\",version=\"{}\",release=\"{release}\",renew=\"{renew}\"",
            clean(server),
            clean(version)
        );
        let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        if !servers.contains(&labels) {
            if servers.len() >= MAX_SERVERS {
                servers.remove(0);
            }
            servers.push(labels);
        }
    }

    /// Records whether the node at `node` (`host:port`) may evict lock keys (see
    /// `backend::guards`).
    pub fn redis_eviction_possible(&self, node: &str, possible: bool) {
        self.eviction.set(node, possible);
    }

    /// Records whether the node at `node` answered the periodic check (see `backend::guards`):
    /// an outage shows with no traffic at all.
    pub fn backend_up(&self, node: &str, up: bool) {
        self.backend_up.set(node, up);
    }

    /// Records a step of a Redis node's clock (see `backend::guards`).
    pub fn redis_clock_step(&self, forward: bool) {
        self.clock_steps[usize::from(!forward)].fetch_add(1, Ordering::Relaxed);
    }

    /// Records a Redis node found to have forgotten its data (see `backend::data_loss`).
    pub fn redis_data_loss(&self) {
        self.data_losses.fetch_add(1, Ordering::Relaxed);
    }

    /// Records one answered request on the kind of lease `kind` (an index into the kinds the
    /// metrics were made with, plus one; 0 for none, and for a kind they do not know).
    pub fn request(&self, kind: usize, operation: Operation, outcome: &str, elapsed: Duration) {
        let kind = if kind < self.requests.len() { kind } else { 0 };
        let op = operation as usize;
        self.requests[kind][op][outcome_index(outcome)].fetch_add(1, Ordering::Relaxed);
        self.durations[kind][op].observe(elapsed);
    }

    /// The `kind` label of the requests counted under `kind` (see [`Metrics::request`]).
    fn kind_label(&self, kind: usize) -> Option<&'static str> {
        kind.checked_sub(1).map(|index| self.kinds[index])
    }

    /// Records one Redis round trip.
    pub fn redis_roundtrip(&self, call: RedisCall, elapsed: Duration) {
        super::trace::round_trip();
        self.redis[call as usize].observe(elapsed);
    }

    /// Records a wait in line for a lease of `kind` (`backend::Leased::kind`) that lasted
    /// `waited` and ended as `end`.
    pub fn lease_waited(&self, kind: &str, end: WaitEnd, waited: Duration) {
        self.waits[lease_kind_index(kind)][end as usize].observe(waited);
    }

    /// Records a lease of `kind` held for `held`, whose hold ended as `end`.
    pub fn lease_held(&self, kind: &str, end: HoldEnd, held: Duration) {
        self.holds[lease_kind_index(kind)][end as usize].observe(held);
    }

    /// Records a backend error of `kind`.
    pub fn backend_error(&self, kind: BackendErrorKind) {
        self.backend_errors[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A hold stream opened (`+1`) or ended (`-1`).
    /// A hold stream ended with `lost` for `reason` (`not-held`, `not-owner`, `expired`).
    pub fn hold_stream_lost(&self, reason: &str) {
        if let Some(i) = HOLD_LOST_REASONS.iter().position(|r| *r == reason) {
            self.hold_lost[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn hold_streams_add(&self, delta: i64) {
        self.hold_streams.fetch_add(delta, Ordering::Relaxed);
    }

    /// The text exposition format (version 0.0.4).
    pub fn render(&self, gauges: Gauges) -> String {
        let mut out = String::with_capacity(16 * 1024);
        out.push_str(
            "# HELP lockgate_requests_total HTTP requests answered, by operation and outcome.\n\
             # TYPE lockgate_requests_total counter\n",
        );
        for (kind, table) in self.requests.iter().enumerate() {
            for (operation, row) in Operation::ALL.iter().zip(table) {
                let labels = labels(self.kind_label(kind), *operation);
                for (outcome, count) in OUTCOMES.iter().zip(row) {
                    let count = count.load(Ordering::Relaxed);
                    if count > 0 {
                        let _ = writeln!(
                            out,
                            "lockgate_requests_total{{{labels},outcome=\"{outcome}\"}} {count}"
                        );
                    }
                }
            }
        }
        out.push_str(
            "# HELP lockgate_request_duration_seconds Time to answer a request (to the first byte of a hold stream), by operation, less the time it waited in line for a lease (lockgate_wait_seconds): the gateway's and Redis's part.\n\
             # TYPE lockgate_request_duration_seconds histogram\n",
        );
        for (kind, histograms) in self.durations.iter().enumerate() {
            for (operation, histogram) in Operation::ALL.iter().zip(histograms) {
                if histogram.count.load(Ordering::Relaxed) > 0 {
                    let labels = labels(self.kind_label(kind), *operation);
                    histogram.render(&mut out, "lockgate_request_duration_seconds", &labels);
                }
            }
        }
        out.push_str(
            "# HELP lockgate_wait_seconds Time a request waited in line for a lease (wait_ms > 0 and held when asked), from its first refusal to its grant or the end of its wait, by kind of lease and outcome.\n\
             # TYPE lockgate_wait_seconds histogram\n",
        );
        render_by_lease_kind(&mut out, "lockgate_wait_seconds", &self.waits, |end| {
            format!("outcome=\"{}\"", WaitEnd::ALL[end].label())
        });
        out.push_str(
            "# HELP lockgate_hold_seconds Time a lease was held, from its grant (its fence's time) to its end, by kind of lease and how it ended: releases, and what hold streams see.\n\
             # TYPE lockgate_hold_seconds histogram\n",
        );
        render_by_lease_kind(&mut out, "lockgate_hold_seconds", &self.holds, |end| {
            format!("ended=\"{}\"", HoldEnd::ALL[end].label())
        });
        out.push_str(
            "# HELP lockgate_redis_roundtrip_seconds Time of one call to Redis, by kind of call.\n\
             # TYPE lockgate_redis_roundtrip_seconds histogram\n",
        );
        for (call, histogram) in REDIS_CALLS.iter().zip(&self.redis) {
            histogram.render(
                &mut out,
                "lockgate_redis_roundtrip_seconds",
                &format!("call=\"{call}\""),
            );
        }
        out.push_str(
            "# HELP lockgate_backend_errors_total Failed calls to the lock backend, by kind.\n\
             # TYPE lockgate_backend_errors_total counter\n",
        );
        for (kind, count) in BackendErrorKind::ALL.iter().zip(&self.backend_errors) {
            let _ = writeln!(
                out,
                "lockgate_backend_errors_total{{kind=\"{}\"}} {}",
                kind.label(),
                count.load(Ordering::Relaxed)
            );
        }
        let exhausted = self.backend_errors[BackendErrorKind::WaitPoolExhausted as usize]
            .load(Ordering::Relaxed);
        let _ = write!(
            out,
            "# HELP lockgate_wait_pool_exhausted_total Requests refused because every dedicated WAIT connection was busy (see --wait-pool-size).\n\
             # TYPE lockgate_wait_pool_exhausted_total counter\n\
             lockgate_wait_pool_exhausted_total {exhausted}\n"
        );
        out.push_str(
            "# HELP lockgate_redis_server_info Redis or Valkey servers connected to, and the commands chosen for release and renew.\n\
             # TYPE lockgate_redis_server_info gauge\n",
        );
        for labels in self
            .servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = writeln!(out, "lockgate_redis_server_info{{{labels}}} 1");
        }
        let _ = write!(
            out,
            "# HELP lockgate_redis_clock_steps_total Steps of a Redis node's clock against the gateway's monotonic clock (over 1 s between two reads), by direction: forward steps end leases early.\n\
             # TYPE lockgate_redis_clock_steps_total counter\n\
             lockgate_redis_clock_steps_total{{direction=\"forward\"}} {}\n\
             lockgate_redis_clock_steps_total{{direction=\"backward\"}} {}\n",
            self.clock_steps[0].load(Ordering::Relaxed),
            self.clock_steps[1].load(Ordering::Relaxed),
        );
        let _ = write!(
            out,
            "# HELP lockgate_redis_data_losses_total Redis nodes found to have forgotten their data (restarted without persistence, flushed, an empty replica promoted): every lock on them was lost at once.\n\
             # TYPE lockgate_redis_data_losses_total counter\n\
             lockgate_redis_data_losses_total {}\n",
            self.data_losses.load(Ordering::Relaxed),
        );
        self.eviction.render(
            &mut out,
            "lockgate_redis_eviction_possible",
            "1 while a Redis node holding locks may evict keys when full (maxmemory set, maxmemory-policy not noeviction): lock keys can vanish under their holders.",
        );
        self.backend_up.render(
            &mut out,
            "lockgate_backend_up",
            "1 while a Redis node holding locks answered the last periodic check (every 500 ms), 0 while it does not: kept with or without traffic. Not exported for --dev.",
        );
        let _ = write!(
            out,
            "# HELP lockgate_waiters Requests waiting for a lock now.\n\
             # TYPE lockgate_waiters gauge\n\
             lockgate_waiters {}\n\
             # HELP lockgate_hold_streams Hold streams open now.\n\
             # TYPE lockgate_hold_streams gauge\n\
             lockgate_hold_streams {}\n\
             # HELP lockgate_in_flight_requests Requests being handled now.\n\
             # TYPE lockgate_in_flight_requests gauge\n\
             lockgate_in_flight_requests {}\n\
             # HELP lockgate_watchers Event streams (GET /locks/{{name}}/events) open now.\n\
             # TYPE lockgate_watchers gauge\n\
             lockgate_watchers {}\n",
            gauges.waiters,
            self.hold_streams.load(Ordering::Relaxed).max(0),
            gauges.in_flight,
            gauges.watchers,
        );
        out.push_str(
            "# HELP lockgate_hold_streams_lost_total Hold streams that ended because the lock was lost, by reason.\n\
             # TYPE lockgate_hold_streams_lost_total counter\n",
        );
        for (reason, count) in HOLD_LOST_REASONS.iter().zip(&self.hold_lost) {
            let _ = writeln!(
                out,
                "lockgate_hold_streams_lost_total{{reason=\"{reason}\"}} {}",
                count.load(Ordering::Relaxed)
            );
        }
        super::process::render(&mut out);
        out
    }
}

/// Renders the histograms of `by_kind` that have observations, labelled with their kind of
/// lease and `end(index)`.
fn render_by_lease_kind<const N: usize>(
    out: &mut String,
    name: &str,
    by_kind: &[[Histogram; N]; LEASE_KINDS.len()],
    end: impl Fn(usize) -> String,
) {
    for (kind, histograms) in LEASE_KINDS.iter().zip(by_kind) {
        for (index, histogram) in histograms.iter().enumerate() {
            if histogram.count.load(Ordering::Relaxed) > 0 {
                let labels = format!("kind=\"{kind}\",{}", end(index));
                histogram.render(out, name, &labels);
            }
        }
    }
}

#[cfg(test)]
mod tests;
