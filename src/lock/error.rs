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
    #[error("the lock is held with a different token")]
    NotOwner,
    /// Fewer replicas than required acknowledged the write.
    #[error("{acked} of {wanted} required replicas acknowledged the write")]
    InsufficientReplicas { wanted: u32, acked: u32 },
    /// The configured cap on waiting requests is reached.
    #[error("too many requests are waiting for locks")]
    TooManyWaiters,
    /// The gateway is shutting down and no longer waits.
    #[error("the gateway is shutting down")]
    ShuttingDown,
    /// The store answered so late that nothing was left of the lease.
    #[error("the lease expired before the reply could be sent")]
    LeaseExpired,
    #[error(transparent)]
    BackendUnavailable(#[from] BackendError),
}

impl LockError {
    /// Whether trying again shortly may succeed: the backend was unreachable or too slow.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::BackendUnavailable(_) | Self::LeaseExpired)
    }
}

/// A request whose values are out of the accepted range. `field` is the JSON field name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct InvalidRequest {
    pub field: &'static str,
    pub message: String,
}
