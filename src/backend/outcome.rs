//! What the backend's operations answer: leases, outcomes, what inspect sees, and the
//! settings an operation carries (replica acknowledgement, an idempotent grant's claim).

use std::time::Duration;

use super::Holder;
use super::queue::QueuedWaiter;

/// Ask the store to confirm that `replicas` replicas have the write before answering
/// (Redis `WAIT`), waiting at most `timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaAck {
    pub replicas: u32,
    pub timeout: Duration,
}

/// Marks the attempt that last claimed an idempotent grant (one whose stem is derived from an
/// idempotency key, so that several attempts share it). Withdrawing with a claim removes the
/// grant only while that attempt is still its last claimant: a later attempt that found the
/// grant (an idempotent replay) takes the claim over, and a withdrawal of the earlier attempt
/// arriving after it changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim(pub u64);

/// A lease as the store saw it when it executed the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The fence of this grant (see [`fence`](super::fence)); the token is `<stem>.<fence>`.
    pub fence: u64,
    /// Time to live the store set or reported, measured at the store. The caller subtracts
    /// the time it spent waiting for the answer.
    pub ttl: Duration,
    /// Replicas that acknowledged the write, when asked.
    pub replicas_acked: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireOutcome {
    /// The lock was free and is now held with the token `<stem>.<fence>`.
    Granted(Lease),
    /// The lock was already held with a token of the given stem: a retry of an idempotent
    /// acquire. The lease is that grant's.
    AlreadyHeld(Lease),
    /// Another token holds the lock. `ttl` is its remaining time to live, `None` when the key
    /// has no expiry (written by something other than lockgate).
    Held { ttl: Option<Duration> },
    /// The grants of a limited kind (a semaphore's permits) are held under another limit than
    /// the one asked for (see [`GrantSetKind::limited`](super::GrantSetKind::limited)).
    LimitDiffers { limit: u32 },
    /// Another lease holds the name, and newcomers may still join it and come in before this
    /// waiter (a read/write lock's readers, a set kept beside the lock: see
    /// [`GrantSetKind::marker`](super::GrantSetKind::marker)), unless the waiter
    /// holds them off (see [`LeaseStore::hold_off`](super::LeaseStore::hold_off)). The
    /// longest of the leases in the way ends in `ttl`.
    Overtakable { ttl: Option<Duration> },
    /// A fair waiter is in the name's queue (see [`queue`](super::queue)), `position` from
    /// its head (1: next), with the place `score` (to take again if it is ever skipped);
    /// `ttl`: what is left of the lease that holds the lock, `None` when it is free (the head
    /// is another waiter) or has no expiry.
    Queued {
        position: u32,
        score: u64,
        ttl: Option<Duration>,
        /// When the lock is free and the place ahead at the head is another of this gateway's
        /// waiters: that waiter, whose place the gateway takes out if it is gone (see
        /// `lock::fair_lines`).
        stray: Option<u64>,
    },
    /// An idempotent attempt's key holds the name with a grant of another kind (another mode,
    /// re-entry, hold bound, or holder record: see [`key_reused`](super::fence::key_reused)).
    /// Nothing was taken, and a queue place the attempt had was left.
    KeyReused,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseOutcome {
    Released,
    /// A reentrant lock held more than once gave back one hold: `holds` are left.
    StillHeld {
        holds: u32,
    },
    /// A grant with a minimum hold (`min_hold_ms`) released before it: left to expire `left`
    /// from now instead (a `PEXPIRE`, not a `DEL`), so it stays held until then.
    HeldFor {
        left: std::time::Duration,
    },
    NotHeld,
    NotOwner,
}

impl ReleaseOutcome {
    /// A release that removed what the token held, or found nothing of it to remove.
    pub fn removed(removed: bool) -> Self {
        if removed {
            Self::Released
        } else {
            Self::NotHeld
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenewOutcome {
    Renewed(Lease),
    /// A reentrant lock's holder took it once more (see
    /// [`RenewAttempt::one_more_hold`](super::RenewAttempt::one_more_hold)): held `holds`
    /// times now, with the lease (at least the ttl asked).
    Reentered {
        lease: Lease,
        holds: u32,
    },
    NotHeld,
    NotOwner,
}

/// What inspect sees of a held lock. Never the token.
#[derive(Debug, Clone, PartialEq)]
pub struct Inspection {
    /// Remaining time to live; `None` when the key has no expiry.
    pub ttl: Option<Duration>,
    /// The fence of the current grant (carried by its token); `None` for a token that
    /// carries none (a lock taken by another Redis client).
    pub fence: Option<u64>,
    /// Who holds it, when the grant named a holder (see [`holder`](super::holder)).
    pub holder: Option<Holder>,
    /// Held by the set of grants kept beside the lock (a read/write lock's readers, see
    /// [`GrantSetKind::marker`](super::GrantSetKind::marker)), not one holder.
    pub shared: bool,
    /// How many times its holder holds it, for a reentrant lock's grant.
    pub holds: Option<u32>,
    /// Fair waiters in the name's queue, every gateway's (see [`queue`](super::queue)).
    pub queued: u32,
    /// The first live places of that queue, in order (at most
    /// [`PLACES_SHOWN`](super::queue::PLACES_SHOWN)).
    pub queue: Vec<QueuedWaiter>,
}

/// One of the grants held at once of a name (a semaphore's permit, a read/write lock's reader)
/// as anyone may see it. Never the token.
#[derive(Debug, Clone, PartialEq)]
pub struct GrantView {
    pub fence: Option<u64>,
    pub ttl: Duration,
    pub holder: Option<Holder>,
}

impl GrantView {
    /// This grant as the engine's one-lease view of its name: `shared` for a read/write lock's
    /// readers.
    pub fn into_inspection(self, shared: bool) -> Inspection {
        Inspection {
            ttl: Some(self.ttl),
            fence: self.fence,
            holder: self.holder,
            shared,
            holds: None,
            queued: 0,
            queue: Vec::new(),
        }
    }
}

/// What inspect sees of a name's grants held at once (see
/// [`GrantsOf`](super::GrantsOf)): the limit they were granted under while any is held (a
/// semaphore's; readers have none), and the live grants in order of expiry.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Grants {
    pub limit: Option<u32>,
    pub grants: Vec<GrantView>,
}
