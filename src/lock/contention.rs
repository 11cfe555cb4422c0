//! The names this gateway's requests wait for most: a bounded top-N of (kind, name) by time
//! waited in line, with each name's waits and holds as small histograms. What the
//! `GET /contention` endpoint and the console show; Prometheus gets the same waits and holds
//! by kind only (`lockgate_wait_seconds`, `lockgate_hold_seconds`): a lock name is never a
//! label.
//!
//! **Bounded whatever the number of names**: at most [`CAPACITY`] entries, kept by the
//! Space-Saving rule (Metwally et al., 2005) weighted by time waited: a name not in the table
//! takes the place of the entry with the least waiting and starts from that entry's score,
//! which it may overstate by as much (`overstated_ms`). A name with more than 1/[`CAPACITY`]
//! of all waiting is always in the table. Waits only bring a name in; a hold is recorded for a
//! name already there (an uncontended name's holds are not this table's business), so a
//! release costs one look at an empty table's flag, or a scan of at most [`CAPACITY`] names.
//!
//! **Recent, not forever**: every score and count is halved each [`HALF_LIFE`], so a name hot
//! an hour ago gives way to one hot now.
//!
//! Percentiles come from buckets two to an octave (each bound √2 × the last, from 1 ms): a
//! p50 or p99 is the bound of the bucket it falls in, at most 41 % above the true value.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Most names kept.
pub const CAPACITY: usize = 64;
/// Every score and count is halved this often.
pub const HALF_LIFE: Duration = Duration::from_secs(300);
/// Buckets of a name's histograms: bounds 2^(i/2) ms, 1 ms to about 4.6 hours.
const BUCKETS: usize = 48;

/// One hot name as shown.
#[derive(Debug, Clone, PartialEq)]
pub struct HotName {
    pub kind: &'static str,
    pub name: String,
    /// Requests waiting for it in this gateway now (filled in by the lease engine).
    pub waiting: usize,
    /// Time waited for it in line (halved every [`HALF_LIFE`]), milliseconds.
    pub waited_ms: u64,
    /// How much of `waited_ms` may belong to names it took the place of.
    pub overstated_ms: u64,
    /// Waits that ended (granted or timed out), and of them those that timed out.
    pub waits: u64,
    pub timeouts: u64,
    pub wait_p50_ms: Option<u64>,
    pub wait_p99_ms: Option<u64>,
    /// Holds that ended while the name was in the table.
    pub holds: u64,
    pub hold_p50_ms: Option<u64>,
    pub hold_p99_ms: Option<u64>,
}

/// Durations in buckets two to an octave.
#[derive(Debug, Clone)]
struct Buckets([u32; BUCKETS]);

impl Buckets {
    fn add(&mut self, duration: Duration) {
        let millis = duration.as_secs_f64() * 1000.0;
        // The first bound at or above the duration: 2^(i/2) >= ms, i >= 2 log2(ms).
        let index = if millis <= 1.0 {
            0
        } else {
            ((2.0 * millis.log2()).ceil() as usize).min(BUCKETS - 1)
        };
        self.0[index] = self.0[index].saturating_add(1);
    }

    fn count(&self) -> u64 {
        self.0.iter().map(|&n| u64::from(n)).sum()
    }

    /// The bound of the bucket the `q` quantile falls in, in whole milliseconds.
    fn quantile(&self, q: f64) -> Option<u64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (index, &n) in self.0.iter().enumerate() {
            seen += u64::from(n);
            if seen >= rank {
                return Some(2f64.powf(index as f64 / 2.0).round() as u64);
            }
        }
        None
    }

    fn halve(&mut self, times: u32) {
        for n in &mut self.0 {
            *n = n.checked_shr(times).unwrap_or(0);
        }
    }
}

#[derive(Debug)]
struct Entry {
    kind: &'static str,
    name: Box<str>,
    /// The score: microseconds waited, halved with the rest.
    waited_micros: u64,
    overstated_micros: u64,
    timeouts: u64,
    waits: Buckets,
    holds: Buckets,
}

impl Entry {
    fn is(&self, kind: &str, name: &str) -> bool {
        self.name.len() == name.len() && *self.name == *name && self.kind == kind
    }
}

#[derive(Debug)]
struct Table {
    entries: Vec<Entry>,
    /// When scores were last halved.
    halved_at: Instant,
}

impl Table {
    /// Halves everything once per [`HALF_LIFE`] passed since the last time.
    fn age(&mut self, now: Instant) {
        let halvings =
            now.saturating_duration_since(self.halved_at).as_secs() / HALF_LIFE.as_secs();
        if halvings == 0 {
            return;
        }
        let times = u32::try_from(halvings).unwrap_or(u32::MAX);
        for entry in &mut self.entries {
            entry.waited_micros = entry.waited_micros.checked_shr(times).unwrap_or(0);
            entry.overstated_micros = entry.overstated_micros.checked_shr(times).unwrap_or(0);
            entry.timeouts = entry.timeouts.checked_shr(times).unwrap_or(0);
            entry.waits.halve(times);
            entry.holds.halve(times);
        }
        self.halved_at += HALF_LIFE * times;
    }
}

/// The table of hot names (see the module's docs).
#[derive(Debug)]
pub struct Contention {
    table: Mutex<Table>,
    /// Whether the table has an entry: releases look no further while it has none.
    any: AtomicBool,
}

impl Default for Contention {
    fn default() -> Self {
        Self {
            table: Mutex::new(Table {
                entries: Vec::new(),
                halved_at: Instant::now(),
            }),
            any: AtomicBool::new(false),
        }
    }
}

impl Contention {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a wait in line for `name` (a lease of `kind`) that lasted `waited`, and whether
    /// it ran out (`timed_out`) rather than ending in a grant.
    pub fn waited(&self, kind: &'static str, name: &str, waited: Duration, timed_out: bool) {
        let micros = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
        let mut table = self.table();
        table.age(Instant::now());
        let index = match table.entries.iter().position(|e| e.is(kind, name)) {
            Some(index) => index,
            None if table.entries.len() < CAPACITY => {
                table.entries.push(Entry::new(kind, name, 0));
                self.any.store(true, Ordering::Relaxed);
                table.entries.len() - 1
            }
            None => {
                let (index, least) = (table.entries.iter().enumerate())
                    .min_by_key(|(_, e)| e.waited_micros)
                    .map(|(index, e)| (index, e.waited_micros))
                    .unwrap_or_default();
                table.entries[index] = Entry::new(kind, name, least);
                index
            }
        };
        let entry = &mut table.entries[index];
        entry.waited_micros = entry.waited_micros.saturating_add(micros);
        entry.timeouts += u64::from(timed_out);
        entry.waits.add(waited);
    }

    /// Records a lease of `kind` on `name` held for `held`, if the name is in the table.
    pub fn held(&self, kind: &'static str, name: &str, held: Duration) {
        if !self.any.load(Ordering::Relaxed) {
            return;
        }
        let mut table = self.table();
        if let Some(entry) = table.entries.iter_mut().find(|e| e.is(kind, name)) {
            entry.holds.add(held);
        }
    }

    /// The `limit` hottest names for which `shown(kind, name)` holds, hottest first.
    pub fn hottest(&self, limit: usize, shown: impl Fn(&str, &str) -> bool) -> Vec<HotName> {
        let mut table = self.table();
        table.age(Instant::now());
        let mut hot: Vec<&Entry> = (table.entries.iter())
            .filter(|e| e.waits.count() > 0 && shown(e.kind, &e.name))
            .collect();
        hot.sort_by_key(|e| std::cmp::Reverse(e.waited_micros));
        hot.truncate(limit);
        hot.into_iter().map(Entry::shown).collect()
    }
}

impl Entry {
    fn new(kind: &'static str, name: &str, score: u64) -> Self {
        Self {
            kind,
            name: name.into(),
            waited_micros: score,
            overstated_micros: score,
            timeouts: 0,
            waits: Buckets([0; BUCKETS]),
            holds: Buckets([0; BUCKETS]),
        }
    }

    fn shown(&self) -> HotName {
        HotName {
            kind: self.kind,
            name: self.name.to_string(),
            waiting: 0,
            waited_ms: self.waited_micros / 1000,
            overstated_ms: self.overstated_micros / 1000,
            waits: self.waits.count(),
            timeouts: self.timeouts,
            wait_p50_ms: self.waits.quantile(0.5),
            wait_p99_ms: self.waits.quantile(0.99),
            holds: self.holds.count(),
            hold_p50_ms: self.holds.quantile(0.5),
            hold_p99_ms: self.holds.quantile(0.99),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_waited_for_most_come_first_with_their_percentiles() {
        let hot = Contention::default();
        for _ in 0..10 {
            hot.waited("lock", "a", Duration::from_millis(100), false);
        }
        hot.waited("lock", "b", Duration::from_millis(5), true);
        hot.held("lock", "a", Duration::from_millis(20));
        hot.held("lock", "never-waited", Duration::from_millis(20));
        let shown = hot.hottest(10, |_, _| true);
        assert_eq!(shown.len(), 2, "{shown:?}");
        let a = &shown[0];
        assert_eq!((a.name.as_str(), a.waits, a.timeouts), ("a", 10, 0));
        assert_eq!(a.waited_ms, 1000);
        // 100 ms lies in the bucket bounded by 2^(14/2) = 128 ms; 20 ms in 2^(9/2) ≈ 23 ms.
        assert_eq!((a.wait_p50_ms, a.wait_p99_ms), (Some(128), Some(128)));
        assert_eq!((a.holds, a.hold_p50_ms), (1, Some(23)));
        assert_eq!((shown[1].name.as_str(), shown[1].timeouts), ("b", 1));
        assert_eq!(shown[1].holds, 0);
        let only_b = hot.hottest(10, |_, name| name == "b");
        assert_eq!(only_b.len(), 1);
    }

    #[test]
    fn the_table_stays_bounded_and_keeps_a_name_with_a_large_share() {
        let hot = Contention::default();
        hot.waited("lock", "hot", Duration::from_secs(10), false);
        for n in 0..10_000 {
            hot.waited(
                "lock",
                &format!("cold-{n}"),
                Duration::from_millis(1),
                false,
            );
        }
        assert_eq!(hot.table().entries.len(), CAPACITY);
        let shown = hot.hottest(1, |_, _| true);
        assert_eq!(shown[0].name, "hot");
        assert_eq!(shown[0].overstated_ms, 0);
        // A newcomer starts from the score of the entry it replaced, and says by how much.
        let cold = hot.hottest(CAPACITY, |_, name| name != "hot");
        assert!(cold.iter().all(|c| c.waited_ms >= c.overstated_ms));
        assert!(cold.iter().any(|c| c.overstated_ms > 0));
    }

    #[test]
    fn scores_halve_every_half_life() {
        let hot = Contention::default();
        hot.waited("lock", "a", Duration::from_millis(800), false);
        hot.waited("lock", "a", Duration::from_millis(800), false);
        let mut table = hot.table();
        let now = table.halved_at + HALF_LIFE * 2;
        table.age(now);
        assert_eq!(table.entries[0].waited_micros, 400_000);
        assert_eq!(table.entries[0].waits.count(), 0, "2 halved twice");
    }
}
