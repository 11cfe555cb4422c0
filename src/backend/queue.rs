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
//! away leaves at once. Both keys expire by themselves `3 · LIVENESS` after the last
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

use std::time::Duration;

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
