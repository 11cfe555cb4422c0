//! The guard against a Redis node that forgot its data: restarted without persistence (the
//! usual Redis pod), `FLUSHALL`/`FLUSHDB`, an empty replica promoted. Such a node has lost
//! every lock, and would grant them all again at once while their holders still work.
//!
//! **Detection.** Each node keeps a marker (`<prefix>marker`, a hash without a ttl, see
//! `marker.lua`): a random `id` made by the first gateway that finds it missing, and
//! `lease_ms`, the longest lease any gateway on the node has granted or renewed. Every gateway
//! reads it on every (re)connect, before the new connection serves a command, and every
//! `CLOCK_CHECK_EVERY` (500 ms) with the clock check. A gateway that saw one `id` and then
//! finds another, or none (and makes one), knows that the node lost everything written before:
//! every gateway notices, also one whose connection never broke (`FLUSHALL`). A restart *with*
//! its data (RDB, AOF) keeps the marker: nothing is held back. A node that was already empty
//! the first time this gateway looked at it is taken as a new store (nothing to protect that
//! this gateway knows of).
//!
//! **Lock-delay.** Then new grants on that node are held back for the longest lease that may
//! still run, at most `--max-ttl`: the marker's `lease_ms` as last read, this gateway's own
//! longest, and what the other gateways knew. That last part matters: a gateway raises the
//! marker at its next look after granting a longer lease, so a lease longer than any before,
//! granted less than a look before the loss, is known only to its own gateway (the
//! deterministic simulation found this: another gateway granted the name at once). So the
//! hold-back lasts at least [`MERGE_FOR`] (three looks), and the first three looks at the new
//! marker (over at least that time: looks, not time alone, for a node that could not be
//! reached for a while) take in its `lease_ms`, which every gateway raises to its own longest
//! at its first look after the loss (`marker.lua`): a longer one holds grants back until the
//! detection plus that lease. Every lease granted before the loss has ended by its holder's
//! count when the hold-back ends (it was granted before the detection, with at most that
//! ttl). What it cannot cover: a lease known only to a gateway that did not reach the node
//! while this one looked — a double fault (the loss, and that gateway dead or cut off right
//! after it). This is Consul's lock-delay, and the advice of the Redlock description for
//! restarted nodes.
//! Acquires answer 503 `grants-held-back` with `Retry-After`; waiting acquires wait through
//! it; renewals and releases go on (they find nothing, the node forgot). With
//! `--data-loss-hold-back false` the loss is only logged and counted.
//!
//! Where: the one server (standalone), the master the Sentinels name (a promoted replica
//! without the marker is a loss; one that had replicated it is not), each Redlock node (kept
//! out of quorums alone, see `redlock`), and each range of slots of a Cluster: its marker is
//! `<prefix>{<tag of its first slot>}:marker`, on the master that serves the range (and moved
//! with the slot by a resharding), and only the names of a range whose master forgot are held
//! back. A Cluster's markers are read every 500 ms only, not at each reconnect of redis-rs's
//! own connections.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::guards::{CLOCK_CHECK_EVERY, HoldBack};
use crate::telemetry::Metrics;

/// What a node's marker said (see `marker.lua`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// The marker's id: another one means the node forgot everything written before.
    pub id: String,
    /// The longest lease any gateway on the node granted or renewed.
    pub lease: Duration,
    /// This look made the marker (it was missing).
    pub made: bool,
}

impl Marker {
    /// From the marker script's reply: `{id, lease_ms, 1 if made}`.
    pub fn from_reply((id, lease_ms, made): (String, u64, u8)) -> Self {
        Self {
            id,
            lease: Duration::from_millis(lease_ms),
            made: made == 1,
        }
    }
}

/// The longest lease this gateway granted or renewed: what it adds to every node's marker.
#[derive(Debug, Default)]
pub struct LongestLease(AtomicU64);

impl LongestLease {
    /// One more lease of `ttl`: a relaxed `fetch_max`, all this guard costs a request.
    pub fn saw(&self, ttl: Duration) {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.0.fetch_max(ms, Ordering::Relaxed);
    }

    pub fn millis(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// How the guard behaves, the same for every node.
#[derive(Debug, Clone)]
pub struct DataLossOptions {
    /// Hold grants back after a loss (`--data-loss-hold-back`), or only report it.
    pub hold_back: bool,
    /// The longest hold-back: no lease is longer.
    pub max_ttl: Duration,
    pub longest: Arc<LongestLease>,
    pub metrics: Arc<Metrics>,
}

/// After a loss, how long grants stay held back at least, while every gateway's longest lease
/// is gathered in the new marker: each gateway looks at least every [`CLOCK_CHECK_EVERY`] and
/// raises the new marker's `lease_ms` to its own longest at its first look after the loss; three
/// looks leave room for the round trips.
pub const MERGE_FOR: Duration = Duration::from_millis(3 * CLOCK_CHECK_EVERY.as_millis() as u64);

/// How many looks at the new marker after a loss take in the other gateways' longest leases
/// (with at least [`MERGE_FOR`] gone by): each gateway raises the marker at its first look.
const MERGE_LOOKS: u32 = 3;

/// The new marker after a loss, while the other gateways' longest leases are taken in: until
/// this gateway has looked at it [`MERGE_LOOKS`] times and [`MERGE_FOR`] has gone by (looks,
/// not time alone: a gateway that could not reach the node for a while still takes in what
/// the others raised meanwhile), and never past `--max-ttl` after the loss was noticed. Not
/// for longer: the marker also grows with leases granted after the loss, which the node keeps
/// and which must hold nothing back.
#[derive(Debug)]
struct Merging {
    id: String,
    /// When this gateway noticed the loss: every lease the node forgot was granted before, so
    /// it ends by then plus its ttl.
    noticed: tokio::time::Instant,
    /// Looks at the new marker since.
    looks: u32,
    /// The longest lease the hold-back already covers.
    covered: Duration,
}

/// One node's guard: the marker last seen, and the grants held back.
#[derive(Debug)]
pub struct DataLossGuard {
    options: DataLossOptions,
    seen: Mutex<Option<Marker>>,
    merging: Mutex<Option<Merging>>,
    held_back: HoldBack,
    /// Also extended by a hold-back here: a Cluster's, which lets every range's check end on
    /// one atomic load while no master forgot (see [`RangeGuards::held_back`]).
    any: Option<Arc<HoldBack>>,
}

impl DataLossGuard {
    pub fn new(options: DataLossOptions) -> Self {
        Self {
            options,
            seen: Mutex::default(),
            merging: Mutex::default(),
            held_back: HoldBack::default(),
            any: None,
        }
    }

    /// An id for the marker, should this look find it missing.
    pub fn candidate() -> String {
        let mut bytes = [0u8; 16];
        // A failed OS generator leaves zeros: the id then only tells less (two losses in a
        // row could look alike), never wrongly that nothing was lost.
        let _ = crate::entropy::fill(&mut bytes);
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The longest lease this gateway saw, for the marker.
    pub fn lease_ms(&self) -> u64 {
        self.options.longest.millis()
    }

    /// How long grants on the node are still held back.
    pub fn held_back(&self) -> Option<Duration> {
        self.held_back.left()
    }

    /// Takes in what `node`'s marker says now; whether it shows that the node forgot its data
    /// (grants are then held back, unless configured not to be).
    pub fn observe(&self, node: &str, marker: Marker) -> bool {
        let before = {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.replace(marker.clone())
        };
        let Some(before) = before else {
            if marker.made {
                tracing::info!(%node, "marked a Redis node that had no lockgate marker: a new store (or one that forgot its data while no gateway watched it)");
            }
            return false;
        };
        if before.id == marker.id {
            self.merge(&marker);
            return false;
        }
        let own = Duration::from_millis(self.lease_ms());
        let known = before.lease.max(own).max(marker.lease);
        let span = known.max(MERGE_FOR).min(self.options.max_ttl);
        self.options.metrics.redis_data_loss();
        self.hold_for(span);
        *self.merging.lock().unwrap_or_else(|p| p.into_inner()) = Some(Merging {
            id: marker.id.clone(),
            noticed: tokio::time::Instant::now(),
            looks: 0,
            covered: known,
        });
        tracing::error!(
            %node,
            held_back_ms = if self.options.hold_back { span.as_millis() } else { 0 },
            "the Redis node forgot its data (restarted without persistence, flushed, or an empty replica promoted): every lock granted on it before is gone while its holder may still work; new grants on it are held back for the longest lease granted (at least 1.5 s, at most --max-ttl) unless --data-loss-hold-back false"
        );
        true
    }
}

impl DataLossGuard {
    fn hold_for(&self, span: Duration) {
        if self.options.hold_back {
            self.held_back.hold_for(span);
            if let Some(any) = &self.any {
                any.hold_for(span);
            }
        }
    }

    /// After a loss, a longer lease in the new marker (another gateway's longest) holds grants
    /// back until the loss was noticed here plus that lease: a lease the node forgot was
    /// granted before the loss, so it ends by then, however late it is learnt here. Learnt
    /// late when the node could not be reached for a while after the loss (a pause, a
    /// partition): with the first [`MERGE_FOR`] of time alone taken in, the simulation saw the
    /// name granted again while that lease ran (the holds' world, seed 14165; first a 1.9 s
    /// hold stream granted just before a restart without data, read in the marker after the
    /// other gateway's 1.7 s hold-back had ended).
    fn merge(&self, marker: &Marker) {
        let mut merging = self.merging.lock().unwrap_or_else(|p| p.into_inner());
        let Some(merge) = merging.as_mut() else {
            return;
        };
        let now = tokio::time::Instant::now();
        let max_ttl = self.options.max_ttl;
        if merge.id != marker.id || now >= merge.noticed + max_ttl {
            *merging = None;
            return;
        }
        if marker.lease > merge.covered {
            merge.covered = marker.lease;
            let ends = merge.noticed + marker.lease.min(max_ttl);
            if let Some(left) = ends.checked_duration_since(now) {
                self.hold_for(left);
            }
        }
        merge.looks += 1;
        if merge.looks >= MERGE_LOOKS && now >= merge.noticed + MERGE_FOR {
            *merging = None;
        }
    }
}

/// The guards of a Cluster: one per range of slots, by the range's first slot.
#[derive(Debug)]
pub struct RangeGuards {
    options: DataLossOptions,
    guards: Mutex<std::collections::HashMap<u16, Arc<DataLossGuard>>>,
    /// The furthest any range is held back: while it is over, no range is.
    any: Arc<HoldBack>,
}

impl RangeGuards {
    pub fn new(options: DataLossOptions) -> Self {
        Self {
            options,
            guards: Mutex::default(),
            any: Arc::default(),
        }
    }

    /// The guard of the range starting at `first` (made at its first look).
    pub fn of(&self, first: u16) -> Arc<DataLossGuard> {
        let mut guards = self.guards.lock().unwrap_or_else(|p| p.into_inner());
        guards
            .entry(first)
            .or_insert_with(|| {
                let mut guard = DataLossGuard::new(self.options.clone());
                guard.any = Some(self.any.clone());
                Arc::new(guard)
            })
            .clone()
    }

    /// Whether any range may be held back: one atomic load, all an acquire pays while no
    /// master forgot.
    pub fn any_held_back(&self) -> bool {
        self.any.left().is_some()
    }

    /// How long grants in the range starting at `first` are still held back.
    pub fn held_back(&self, first: u16) -> Option<Duration> {
        let guards = self.guards.lock().unwrap_or_else(|p| p.into_inner());
        guards.get(&first).and_then(|guard| guard.held_back())
    }
}

#[cfg(test)]
mod tests;
