//! This gateway's fair waiters of each name, in lines sorted as the store's queues are (by
//! the score of each one's place; see `backend::queue`): only the first of a line, its front,
//! looks at the store; the others wait to become the front (`fair.rs` says what the front
//! does). A waiter that leaves without the lock (its wait ran out, its client went away)
//! leaves the store's queue at once, in the background (again and again until the store takes
//! the place out, [`LEAVE_RETRY_FIRST`]), and passes the front on; one with an
//! idempotency key keeps its place for [`KEYED_PLACE_KEPT`] first, for a retry with the same
//! key (a long wait made of several requests, as `lockgate run` makes them) to take it again.
//!
//! A place of this gateway's may outlive its waiter all the same: an attempt sent before the
//! waiter left can reach Redis after the leave, on another connection (with `replicas`, the
//! attempt travels on a dedicated connection for `WAIT`, the leave on the command
//! connection), and put the place back; a failover can lose the leave, replication being
//! asynchronous. Such a place would head its queue for as long as this gateway has other
//! waiters of the name, whose attempts keep it alive. So the store tells a waiter which place
//! heads the queue when the lock is free and another is first; if that is another of this
//! gateway's places and no waiter here claims it ([`FairTicket::take_out_if_stray`]), it is
//! taken out (both found by the deterministic simulation's failover world).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use std::time::Duration;

use tokio::sync::{Notify, OnceCell};

use crate::watch;

use super::LockName;
use super::token::TokenStem;
use super::wait::{Admission, WaiterView};
use crate::backend::{Backend, Holder, LeaseStore, Leased, ReleaseFeed, Watched};

/// How long the place of a fair waiter with an idempotency key outlives its request: a
/// request with the same key (to this gateway) within it takes the place again. Meanwhile the
/// place may hold the queue up, if it comes first, for as long.
pub const KEYED_PLACE_KEPT: Duration = Duration::from_secs(1);

/// A place whose waiter left but could not take it out of the store's queue (a fault) is taken
/// out again after this, then after twice as long each time, up to [`LEAVE_RETRY_MOST`], until
/// it is out. Left there, it would head the queue for as long as this gateway has other
/// waiters of the name: their attempts keep this gateway alive in the queue's liveness, so the
/// place is never skipped as a dead gateway's is (found by the deterministic simulation).
pub const LEAVE_RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest pause between two tries to take a left place out (see [`LEAVE_RETRY_FIRST`]):
/// what a place left behind can hold its queue up after the store answers again.
pub const LEAVE_RETRY_MOST: Duration = Duration::from_secs(2);

/// Waiters with an idempotency key are numbered from the key (the same key, the same place);
/// with this bit set, apart from the others, which are counted from 0.
const KEYED: u64 = 1 << 63;

/// The fair waiters of this gateway, by lock name.
#[derive(Debug, Default)]
pub struct FairLines {
    // Shared with the tasks that give up a keyed place once it has been kept long enough.
    lines: Arc<Mutex<HashMap<String, FairLine>>>,
    /// The places this gateway means to keep, by name and waiter: how many waiters' tickets
    /// and keyed places kept for a retry ([`KEYED_PLACE_KEPT`]) claim each. Kept apart from
    /// the lines, which go when their last waiter does, while a kept place stays.
    claimed: Arc<Mutex<HashMap<(String, u64), usize>>>,
    next_waiter: AtomicU64,
    /// Numbers the members of lines, in arrival order (see [`FairLine::who`]).
    next_member: AtomicU64,
}

#[derive(Debug, Default)]
struct FairLine {
    /// Waiters with a place, by (score, waiter): the first is the front.
    placed: BTreeMap<(u64, u64), Arc<Notify>>,
    /// Waiters in the line, placed or not yet.
    members: usize,
    /// Whom each member waits for, by its number (so in arrival order).
    who: BTreeMap<u64, WaiterView>,
    /// Waiters with an idempotency key: how many requests of each are in the line.
    keyed: HashMap<u64, usize>,
    /// Head announcements and releases, subscribed by the line's first waiter.
    feeds: Arc<OnceCell<Feeds>>,
    /// The head announcements as the last front left them: what it had seen is seen, and an
    /// announcement that came after its last look (the next head may be the new front) is
    /// still to be seen by the next front.
    heads_seen: Option<watch::Receiver<()>>,
}

#[derive(Debug)]
struct Feeds {
    heads: ReleaseFeed,
    releases: ReleaseFeed,
}

/// One fair waiter's membership of its line. Dropped without the lock, it leaves the store's
/// queue (in the background) and passes the front on.
#[derive(Debug)]
pub(super) struct FairTicket<'a> {
    lines: &'a FairLines,
    backend: &'a Arc<Backend>,
    name: &'a LockName,
    pub(super) waiter: u64,
    pub(super) turn: Arc<Notify>,
    feeds: Arc<OnceCell<Feeds>>,
    /// The head announcements, once subscribed; handed from front to front.
    pub(super) heads: Option<watch::Receiver<()>>,
    pub(super) score: Option<u64>,
    /// Granted: the store took it out of the queue.
    pub(super) granted: bool,
    /// Numbered from an idempotency key (see [`KEYED_PLACE_KEPT`]).
    keyed: bool,
    /// Its number among the members of lines.
    member: u64,
    _admission: Admission<'a>,
}

impl FairLines {
    fn lines(&self) -> MutexGuard<'_, HashMap<String, FairLine>> {
        lock_lines(&self.lines)
    }

    /// Fair waiters of `name` in this gateway.
    pub fn waiting_for(&self, name: &str) -> usize {
        self.lines().get(name).map_or(0, |line| line.members)
    }

    /// The first `most` fair waiters of `name` in this gateway, in arrival order.
    pub fn waiters_of(&self, name: &str, most: usize) -> Vec<WaiterView> {
        self.lines().get(name).map_or_else(Vec::new, |line| {
            line.who.values().take(most).cloned().collect()
        })
    }

    /// Joins the line of `name` for `holder`; `key`, the waiter's idempotency key's stem, if
    /// it has one.
    pub(super) fn join<'a>(
        &'a self,
        backend: &'a Arc<Backend>,
        name: &'a LockName,
        (key, holder): (Option<&TokenStem>, Option<&Arc<Holder>>),
        admission: Admission<'a>,
    ) -> FairTicket<'a> {
        let member = self.next_member.fetch_add(1, Ordering::Relaxed);
        let mut lines = self.lines();
        let line = lines.entry(name.as_str().to_owned()).or_default();
        line.members += 1;
        let who = WaiterView {
            holder: holder.cloned(),
            since: tokio::time::Instant::now(),
            fair: true,
        };
        line.who.insert(member, who);
        let waiter = match key {
            Some(stem) => {
                let mut bytes = [0; 8];
                let text = stem.expose().as_bytes();
                let n = text.len().min(8);
                bytes[..n].copy_from_slice(&text[..n]);
                let waiter = u64::from_le_bytes(bytes) | KEYED;
                *line.keyed.entry(waiter).or_default() += 1;
                waiter
            }
            None => self.next_waiter.fetch_add(1, Ordering::Relaxed),
        };
        claim(&self.claimed, name.as_str(), waiter, true);
        FairTicket {
            lines: self,
            backend,
            name,
            waiter,
            keyed: key.is_some(),
            member,
            turn: Arc::new(Notify::new()),
            feeds: line.feeds.clone(),
            heads: None,
            score: None,
            granted: false,
            _admission: admission,
        }
    }
}

impl FairTicket<'_> {
    /// The line's feeds, subscribed by its first waiter: the head announcements go to
    /// `self.heads`; the releases are returned.
    pub(super) async fn feeds(&mut self) -> watch::Receiver<()> {
        let feeds = self
            .feeds
            .get_or_init(|| async {
                let name = self.name;
                Feeds {
                    heads: self.backend.watch(Watched::Turn(Leased::Lock(name))).await,
                    releases: self
                        .backend
                        .watch(Watched::Releases(Leased::Lock(name)))
                        .await,
                }
            })
            .await;
        self.heads = Some(feeds.heads.receiver());
        feeds.releases.receiver()
    }

    /// The store says this gateway's `waiter` heads the queue while the lock is free: if no
    /// waiter here claims that place (its waiter left, or was granted), it is taken out, in
    /// the background (see the module's docs); if that fails, the next look says it again.
    pub(super) fn take_out_if_stray(&self, waiter: u64) {
        let claimed = lock_claimed(&self.lines.claimed)
            .contains_key(&(self.name.as_str().to_owned(), waiter));
        if claimed {
            return;
        }
        tracing::info!(lock = %self.name, "taking out a place at the head of the fair queue whose waiter is gone");
        let (backend, name) = (self.backend.clone(), self.name.clone());
        tokio::spawn(async move {
            if let Err(err) = backend.leave(Leased::Lock(&name), waiter).await {
                tracing::debug!(lock = %name, error = %err, "could not take a stray place out of a fair queue");
            }
        });
    }

    /// This waiter became the front: it takes the head announcements over as the last front
    /// left them.
    pub(super) fn take_over(&mut self) {
        let mut lines = self.lines.lines();
        if let Some(seen) = lines
            .get_mut(self.name.as_str())
            .and_then(|line| line.heads_seen.take())
        {
            self.heads = Some(seen);
        }
    }

    /// The store gave this waiter the place `score`.
    pub(super) fn placed(&mut self, score: u64) {
        if self.score == Some(score) {
            return;
        }
        let mut lines = self.lines.lines();
        let Some(line) = lines.get_mut(self.name.as_str()) else {
            return;
        };
        if let Some(old) = self.score.replace(score) {
            line.placed.remove(&(old, self.waiter));
        }
        line.placed.insert((score, self.waiter), self.turn.clone());
    }

    /// Whether this waiter is the front of its line: placed, and first (or not yet placed:
    /// its first attempt has not answered).
    pub(super) fn is_front(&self) -> bool {
        let Some(score) = self.score else {
            return true;
        };
        self.lines
            .lines()
            .get(self.name.as_str())
            .and_then(|line| line.placed.keys().next().copied())
            .is_none_or(|first| first == (score, self.waiter))
    }
}

impl Drop for FairTicket<'_> {
    fn drop(&mut self) {
        let mut lines = self.lines.lines();
        if let Some(line) = lines.get_mut(self.name.as_str()) {
            let was_front = self
                .score
                .is_some_and(|score| line.placed.keys().next() == Some(&(score, self.waiter)));
            if let Some(score) = self.score {
                line.placed.remove(&(score, self.waiter));
            }
            line.members -= 1;
            line.who.remove(&self.member);
            if self.keyed
                && let Some(count) = line.keyed.get_mut(&self.waiter)
            {
                *count -= 1;
                if *count == 0 {
                    line.keyed.remove(&self.waiter);
                }
            }
            if line.members == 0 {
                lines.remove(self.name.as_str());
            } else if was_front && let Some(next) = line.placed.values().next() {
                line.heads_seen = self.heads.take();
                next.notify_one();
            }
        }
        drop(lines);
        let runtime = tokio::runtime::Handle::try_current().ok();
        let kept_for_a_retry = self.keyed && !self.granted && runtime.is_some();
        if !kept_for_a_retry {
            claim(&self.lines.claimed, self.name.as_str(), self.waiter, false);
        }
        if !self.granted
            && let Some(runtime) = runtime
        {
            let (backend, name, waiter) = (self.backend.clone(), self.name.clone(), self.waiter);
            let kept = self.keyed.then(|| self.lines.lines.clone());
            let claimed = self.lines.claimed.clone();
            runtime.spawn(async move {
                if kept.is_some() {
                    tokio::time::sleep(KEYED_PLACE_KEPT).await;
                    claim(&claimed, name.as_str(), waiter, false);
                }
                let mut pause = LEAVE_RETRY_FIRST;
                loop {
                    if let Some(lines) = &kept {
                        let back = lock_lines(lines)
                            .get(name.as_str())
                            .is_some_and(|line| line.keyed.contains_key(&waiter));
                        if back {
                            // A request with the same key took the place again.
                            return;
                        }
                    }
                    match backend.leave(Leased::Lock(&name), waiter).await {
                        Ok(_) => return,
                        Err(err) => {
                            tracing::debug!(lock = %name, error = %err, retry_ms = pause.as_millis() as u64, "could not leave a fair queue; trying again");
                        }
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(LEAVE_RETRY_MOST);
                }
            });
        }
    }
}

/// One more claim on the place of `waiter` of `name` (`more`), or one less.
fn claim(claimed: &Mutex<HashMap<(String, u64), usize>>, name: &str, waiter: u64, more: bool) {
    let mut claimed = lock_claimed(claimed);
    let key = (name.to_owned(), waiter);
    if more {
        *claimed.entry(key).or_default() += 1;
    } else if let Some(count) = claimed.get_mut(&key) {
        *count -= 1;
        if *count == 0 {
            claimed.remove(&key);
        }
    }
}

fn lock_claimed(
    claimed: &Mutex<HashMap<(String, u64), usize>>,
) -> MutexGuard<'_, HashMap<(String, u64), usize>> {
    // Every critical section leaves the state consistent before it can panic.
    claimed.lock().unwrap_or_else(|p| p.into_inner())
}

fn lock_lines(
    lines: &Mutex<HashMap<String, FairLine>>,
) -> MutexGuard<'_, HashMap<String, FairLine>> {
    // Every critical section leaves the state consistent before it can panic.
    lines.lock().unwrap_or_else(|p| p.into_inner())
}
