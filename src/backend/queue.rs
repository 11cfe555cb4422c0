//! Fair queues: the waiters of a lock in one line across every gateway, kept by the store.
//!
//! A fair waiter (`"fair": true`) takes a place in the name's queue with its first attempt
//! and is granted only when it is the queue's live head and the lock is free. Places are
//! ordered by priority (9 first), then by arrival at the store. On Redis the queue lives in
//! the name's hash slot, beside the lock (`scripts/fair_head.lua`, `scripts/fair.lua`):
//!
//! * a sorted set `<prefix>{name}:queue` of members `<gateway>:<waiter>`, scored
//!   `(9 - priority) · 2^44 + arrival` (the arrival counter is a field of the next key);
//! * a hash `<prefix>{name}:queue:live`: each gateway's deadline, in Redis `TIME`, until which
//!   its waiters count as alive. Every attempt of a gateway's waiter moves its gateway's
//!   deadline to [`LIVENESS`] from now, and the first waiter of a name in each gateway makes
//!   one at least every [`RECHECK`]: that is the gateway's heartbeat for the name, one per
//!   gateway and name, never one per waiter.
//!
//! A member whose gateway's deadline has passed is skipped (removed) when it reaches the
//! head, so the waiters of a gateway that died (SIGKILL, a partition) stop holding the queue
//! up at most `LIVENESS + RECHECK` after their gateway was last heard from. A waiter that was
//! skipped while alive (its gateway partitioned away, then back) takes its old place again
//! with its next attempt: it keeps its score. A waiter that gives up or whose client goes
//! away leaves at once, and its gateway tries again until the place is out should the store
//! not answer (`lock::fair_lines::LEAVE_RETRY_FIRST`): a place left behind by a live gateway
//! is never skipped, and would hold the queue up for as long as that gateway has other
//! waiters of the name. Both keys expire by themselves `3 · LIVENESS` after the last
//! gateway's word, and are deleted when the last waiter leaves: nothing outlives the queue.
//!
//! Hand-off goes to the head only: the script that grants the head, or removes it, publishes
//! on `<prefix>{name}:head:<gateway>`, the channel of the next head's gateway, which is the
//! only gateway to try; a release wakes the head through the lock's release feed, and an
//! expiry (which announces nothing) at the lease's end, which the head's last attempt told it.
//! The [`RECHECK`] bounds what a lost message can cost.
//!
//! An acquire that is not fair never overtakes a queue: while live waiters are queued it is
//! refused as if the lock were held, told to come back in [`QUEUED_RETRY`].
//!
//! Inspect shows the queue's first [`PLACES_SHOWN`] live places ([`QueuedWaiter`]): the
//! liveness hash also keeps, per member, the `owner` its waiter sent and when (Redis `TIME`)
//! it took its place, `<seconds>:<microseconds>:<owner>`, written with the place and deleted
//! with it. Never a member itself: a waiter with an idempotency key is numbered from its
//! token's stem.

use std::time::{Duration, SystemTime};

/// How often the first fair waiter of a name in a gateway looks again, whatever it was told:
/// the bound on what a lost message or an unannounced expiry can stall, and its gateway's
/// heartbeat for the name.
pub const RECHECK: Duration = Duration::from_millis(500);
/// A gateway whose waiters of a name have not been heard from for this long is taken for
/// dead: its waiters are skipped when they reach the head of the queue.
pub const LIVENESS: Duration = Duration::from_secs(2);
/// What an acquire that is not fair is told when the lock is free but fair waiters are
/// queued for it: come back after this.
pub const QUEUED_RETRY: Duration = Duration::from_millis(100);
/// Highest priority.
pub const MAX_PRIORITY: u8 = 9;
/// Scores of places: `(9 - priority) · PRIORITY_STEP + arrival`.
pub(crate) const PRIORITY_STEP: u64 = 1 << 44;
/// How many places at the head of a queue inspect shows.
pub const PLACES_SHOWN: usize = 16;

/// The priority of a place scored `score`.
pub(crate) fn priority_of(score: u64) -> u8 {
    let rank = u8::try_from(score / PRIORITY_STEP).unwrap_or(MAX_PRIORITY);
    MAX_PRIORITY.saturating_sub(rank)
}

/// A place in a fair queue as anyone may see it (inspect): whom it is for, never which waiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedWaiter {
    /// 0 to [`MAX_PRIORITY`].
    pub priority: u8,
    /// The `owner` its waiter sent, if any.
    pub owner: Option<String>,
    /// When it took its place, by the store's clock (again, after it was skipped); `None`
    /// for a place taken by an older lockgate, which did not say.
    pub since: Option<SystemTime>,
    /// Its waiter waits in this gateway.
    pub here: bool,
}

/// A fair waiter's place in a name's queue, as an attempt carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuePlace {
    /// The waiter, unique in this gateway (the store adds the gateway's identity).
    pub waiter: u64,
    /// 0 to [`MAX_PRIORITY`], higher first.
    pub priority: u8,
    /// The place the waiter had (its score, from an earlier attempt's answer): taken again
    /// if the waiter was skipped, so that a waiter of a gateway cut off for a while does not
    /// lose its turn to later arrivals.
    pub score: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A place's score says its priority, whatever its arrival (as fair.lua scores it).
    #[test]
    fn a_score_says_its_priority() {
        for priority in 0..=MAX_PRIORITY {
            let base = u64::from(MAX_PRIORITY - priority) * PRIORITY_STEP;
            for arrival in [1, 42, PRIORITY_STEP - 1] {
                assert_eq!(
                    priority_of(base + arrival),
                    priority,
                    "{priority} {arrival}"
                );
            }
        }
        assert_eq!(priority_of(u64::MAX), 0, "out of range: the lowest");
    }
}
