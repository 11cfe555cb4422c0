//! What can go wrong with a lock operation, named by outcome. The `http` module turns these
//! into problem documents; nothing here knows about status codes.

use std::time::Duration;

use crate::backend::BackendError;

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Someone else holds the lock; it frees up in `retry_after` at the latest (unless renewed).
    #[error("the lock is held by another client")]
    Held { retry_after: Duration },
    #[error("the lock is not held")]
    NotHeld,
    /// The grants of a limited kind (a semaphore's permits) are held under another limit
    /// (`held`) than the one asked for.
    #[error("the grants are held under a limit of {held}")]
    LimitDiffers { held: u32 },
    /// The `Idempotency-Key` holds the name with a grant of another kind than the one asked
    /// for (another mode, re-entry, hold bound, or owner): a retry must repeat its request.
    #[error("the idempotency key holds a grant of another kind")]
    IdempotencyKeyReused,
    /// A multi-lock's names are in different Redis Cluster hash slots.
    #[error("the names of a multi-lock must share a Redis Cluster hash slot")]
    CrossSlot,
    /// The configured backend does not offer this kind of lease.
    #[error("{kind}s are not offered with the {mode} backend")]
    NotOffered {
        kind: &'static str,
        mode: &'static str,
    },
    #[error("the lock is held with a different token")]
    NotOwner,
    /// A holder asked to take again a lock that was not taken reentrant.
    #[error("the lock was not taken with reentrant: true")]
    NotReentrant,
    /// An operator revoked this token's grant (`DELETE …?force=true`).
    #[error("the lock was revoked by an operator")]
    Revoked,
    /// The grant has been held for as long as its bound allows (`max_hold_ms`, `--max-hold`).
    #[error("the lock has been held for as long as max_hold_ms allows")]
    MaxHoldReached,
    /// Fewer replicas than required acknowledged the write.
    #[error("{acked} of {wanted} required replicas acknowledged the write")]
    InsufficientReplicas { wanted: u32, acked: u32 },
    /// The configured cap on waiting requests is reached.
    #[error("too many requests are waiting for locks")]
    TooManyWaiters,
    /// The configured cap on event watchers is reached.
    #[error("too many clients are watching locks")]
    TooManyWatchers,
    /// The gateway is shutting down and no longer waits.
    #[error("the gateway is shutting down")]
    ShuttingDown,
    /// The store answered so late that nothing was left of the lease.
    #[error("the lease expired before the reply could be sent")]
    LeaseExpired,
    /// Every dedicated connection for replica acknowledgement was busy.
    #[error(transparent)]
    WaitPoolExhausted(BackendError),
    /// A renewal or release was sent and no answer came: it may or may not have taken effect.
    /// Both are safe to repeat.
    #[error("no answer from the backend: {0}")]
    OutcomeUnknown(BackendError),
    #[error(transparent)]
    BackendUnavailable(BackendError),
    /// New grants are held back for `retry_after`: the store's clock stepped forward, or it
    /// forgot its data, and leases it lost have not ended for their holders yet.
    #[error("grants are held back after the store lost leases ({cause:?})")]
    HeldBack {
        retry_after: Duration,
        cause: HoldBackCause,
    },
    /// The store is out of memory and refuses writes; nothing was written.
    #[error(transparent)]
    BackendFull(BackendError),
}

impl From<BackendError> for LockError {
    fn from(err: BackendError) -> Self {
        match err {
            BackendError::WaitPoolExhausted(_) => Self::WaitPoolExhausted(err),
            BackendError::Full(_) => Self::BackendFull(err),
            err => Self::BackendUnavailable(err),
        }
    }
}

/// Why grants are held back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldBackCause {
    /// A store's clock stepped forward, which ended leases early.
    ClockStep,
    /// A store forgot its data (restart without persistence, a flush, an empty replica
    /// promoted): every lease granted on it before is gone.
    DataLost,
}

impl LockError {
    /// Whether the store refused this gateway's settings (credentials, permissions): waiting
    /// does not help, an operator must fix them.
    pub fn is_misconfigured(&self) -> bool {
        matches!(self, Self::BackendUnavailable(BackendError::Refused(_)))
    }

    /// Whether trying again shortly may succeed: the backend was unreachable or too slow.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::BackendUnavailable(_)
                | Self::BackendFull(_)
                | Self::HeldBack { .. }
                | Self::LeaseExpired
                | Self::OutcomeUnknown(_)
                | Self::WaitPoolExhausted(_)
        )
    }

    /// A write that was given up after `waited` without an answer (the request's deadline
    /// passed): it may have taken effect.
    pub fn no_answer_within(waited: std::time::Duration) -> Self {
        Self::OutcomeUnknown(BackendError::Timeout(waited))
    }

    /// A failed write whose outcome may be unknown: for operations the client can repeat
    /// safely (renew, release), say so.
    pub fn of_write(err: BackendError) -> Self {
        if err.outcome_unknown() {
            Self::OutcomeUnknown(err)
        } else {
            err.into()
        }
    }
}

/// A request whose values are out of the accepted range. `field` is the JSON field name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct InvalidRequest {
    pub field: &'static str,
    pub message: String,
}
