//! A lock's fair queue in memory (see `backend::queue`): the same order as on Redis, priority
//! first, then arrival. One process is one gateway, alive while it runs, so no liveness is
//! kept; a waiter leaves when its wait ends.

use std::collections::{BTreeMap, HashMap};

use super::{MemoryBackend, State, announce, feed};
use crate::backend::queue::MAX_PRIORITY;
use crate::backend::{BackendError, QueuePlace, ReleaseFeed};

/// Scores of places, as on Redis: `(9 - priority) · 2^44 + arrival`.
const PRIORITY_STEP: u64 = 1 << 44;

#[derive(Debug, Default)]
pub(super) struct Queue {
    /// Waiters by score.
    places: BTreeMap<u64, u64>,
    /// Scores by waiter.
    scores: HashMap<u64, u64>,
    arrivals: u64,
}

impl State {
    /// Puts `place` in the queue of `name` unless it is there (at its old score, if it has
    /// one). Its position (1: first) and score.
    pub(super) fn enqueue(&mut self, name: &str, place: QueuePlace) -> (u32, u64) {
        let queue = self.queues.entry(name.to_owned()).or_default();
        let score = match queue.scores.get(&place.waiter) {
            Some(&score) => score,
            None => {
                queue.arrivals += 1;
                let score = place.score.unwrap_or(
                    u64::from(MAX_PRIORITY - place.priority.min(MAX_PRIORITY)) * PRIORITY_STEP
                        + queue.arrivals,
                );
                queue.places.insert(score, place.waiter);
                queue.scores.insert(place.waiter, score);
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
        let score = queue.scores.remove(&waiter)?;
        let was_head = queue.places.first_key_value().map(|(&s, _)| s) == Some(score);
        queue.places.remove(&score);
        if queue.places.is_empty() {
            self.queues.remove(name);
            return None;
        }
        was_head.then(|| self.queue_head(name)).flatten()
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
