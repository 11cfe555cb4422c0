//! A lock's fair queue in memory (see `backend::queue`): the same order as on Redis, priority
//! first, then arrival. One process is one gateway, alive while it runs, so no liveness is
//! kept; a waiter leaves when its wait ends.

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use super::{MemoryBackend, State, announce, feed};
use crate::backend::queue::{MAX_PRIORITY, PLACES_SHOWN, PRIORITY_STEP, priority_of};
use crate::backend::{BackendError, QueuePlace, QueuedWaiter, ReleaseFeed};

#[derive(Debug, Default)]
pub(super) struct Queue {
    /// Waiters by score.
    places: BTreeMap<u64, u64>,
    /// Scores by waiter, and whom each place is for (as on Redis, since when and its owner).
    scores: HashMap<u64, (u64, Described)>,
    arrivals: u64,
}

/// What a place says of its waiter (on Redis, its field in the queue's liveness hash).
#[derive(Debug)]
struct Described {
    since: SystemTime,
    owner: Option<String>,
}

impl State {
    /// Puts `place` in the queue of `name` for `owner`, unless it is there (at its old score,
    /// if it has one). Its position (1: first) and score.
    pub(super) fn enqueue(
        &mut self,
        name: &str,
        place: QueuePlace,
        owner: Option<&str>,
    ) -> (u32, u64) {
        let queue = self.queues.entry(name.to_owned()).or_default();
        let score = match queue.scores.get(&place.waiter) {
            Some(&(score, _)) => score,
            None => {
                queue.arrivals += 1;
                let score = place.score.unwrap_or(
                    u64::from(MAX_PRIORITY - place.priority.min(MAX_PRIORITY)) * PRIORITY_STEP
                        + queue.arrivals,
                );
                queue.places.insert(score, place.waiter);
                let described = Described {
                    since: crate::wall_clock::now(),
                    owner: owner.map(str::to_owned),
                };
                queue.scores.insert(place.waiter, (score, described));
                score
            }
        };
        let ahead = queue.places.range(..score).count();
        (u32::try_from(ahead + 1).unwrap_or(u32::MAX), score)
    }

    /// The first waiter of the queue of `name`, if any.
    pub(super) fn queue_head(&self, name: &str) -> Option<u64> {
        let queue = self.queues.get(name)?;
        queue.places.first_key_value().map(|(_, &waiter)| waiter)
    }

    /// Takes `waiter` out of the queue of `name` (deleted when empty). The new head, if the
    /// waiter was first and another follows.
    pub(super) fn leave_queue(&mut self, name: &str, waiter: u64) -> Option<u64> {
        let queue = self.queues.get_mut(name)?;
        let (score, _) = queue.scores.remove(&waiter)?;
        let was_head = queue.places.first_key_value().map(|(&s, _)| s) == Some(score);
        queue.places.remove(&score);
        if queue.places.is_empty() {
            self.queues.remove(name);
            return None;
        }
        was_head.then(|| self.queue_head(name)).flatten()
    }

    /// The first places of the queue of `name`, in order (one process is one gateway: every
    /// waiter is here).
    pub(super) fn queue_view(&self, name: &str) -> Vec<QueuedWaiter> {
        let Some(queue) = self.queues.get(name) else {
            return Vec::new();
        };
        let view = queue
            .places
            .iter()
            .take(PLACES_SHOWN)
            .filter_map(|(&score, waiter)| {
                let (_, described) = queue.scores.get(waiter)?;
                Some(QueuedWaiter {
                    priority: priority_of(score),
                    owner: described.owner.clone(),
                    since: Some(described.since),
                    here: true,
                })
            });
        view.collect()
    }

    /// Fair waiters queued for `name`.
    pub(super) fn queued(&self, name: &str) -> u32 {
        self.queues
            .get(name)
            .map_or(0, |q| u32::try_from(q.places.len()).unwrap_or(u32::MAX))
    }
}

impl MemoryBackend {
    /// Tells the waiters of `name` that the head of its queue changed (one gateway: the head
    /// is one of ours).
    pub(super) fn announce_head(&self, name: &str) {
        announce(&self.heads, name);
    }

    pub(super) async fn watch_head(&self, name: &str) -> ReleaseFeed {
        feed(&self.heads, name)
    }

    pub(super) async fn leave_queue(&self, name: &str, waiter: u64) -> Result<(), BackendError> {
        let next = self.state().leave_queue(name, waiter);
        if next.is_some() {
            self.announce_head(name);
        }
        Ok(())
    }
}
