//! [`Exclusive`]: the lock. At most one grant per name at a time; its operations are the
//! backend's [`LockBackend`] contract as it is. It is also the writer of a read/write lock:
//! readers ([`super::Shared`]) and it exclude each other.

use std::time::Duration;

use super::LockName;
use super::primitive::Primitive;
use crate::backend::GrantAttempt;
use crate::backend::shared::SharedBackend;
use crate::backend::{
    AcquireOutcome, Backend, BackendError, Claim, Inspection, LockBackend, ReleaseFeed,
    ReleaseOutcome, RenewOutcome, ReplicaAck,
};

/// The exclusive lock.
#[derive(Debug, Clone, Copy, Default)]
pub struct Exclusive;

impl Primitive for Exclusive {
    const KIND: &'static str = "lock";
    const SINGLE_HOLDER: bool = true;

    async fn acquire(
        &self,
        backend: &Backend,
        name: &LockName,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        backend.acquire(name.as_str(), attempt).await
    }

    async fn renew(
        &self,
        backend: &Backend,
        name: &LockName,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<RenewOutcome, BackendError> {
        backend.renew(name.as_str(), token, ttl, ack).await
    }

    async fn release(
        &self,
        backend: &Backend,
        name: &LockName,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        backend.release(name.as_str(), token).await
    }

    async fn revoke(&self, backend: &Backend, name: &LockName) -> Result<bool, BackendError> {
        backend.revoke(name.as_str()).await
    }

    async fn was_revoked(
        &self,
        backend: &Backend,
        name: &LockName,
        token: &str,
    ) -> Result<bool, BackendError> {
        backend.was_revoked(name.as_str(), token).await
    }

    async fn withdraw(
        &self,
        backend: &Backend,
        name: &LockName,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        backend.withdraw(name.as_str(), stem, claim).await
    }

    async fn inspect(
        &self,
        backend: &Backend,
        name: &LockName,
    ) -> Result<Option<Inspection>, BackendError> {
        backend.inspect(name.as_str()).await
    }

    async fn watch_releases(&self, backend: &Backend, name: &LockName) -> ReleaseFeed {
        backend.watch_releases(name.as_str()).await
    }

    fn sees_every_release(&self, backend: &Backend) -> bool {
        backend.sees_every_release()
    }

    /// A writer waiting behind readers: no new reader for as long as it waits (no writer
    /// starvation). Best effort: without it, readers may keep the writer out longer.
    async fn hold_off_shared(&self, backend: &Backend, name: &LockName, wait: Duration) {
        if backend.offers_beyond_locks()
            && let Err(err) = backend.hold_off_readers(name.as_str(), Some(wait)).await
        {
            tracing::debug!(lock = %name, error = %err, "could not hold off new readers");
        }
    }

    async fn stop_holding_off_shared(&self, backend: &Backend, name: &LockName) {
        if backend.offers_beyond_locks()
            && let Err(err) = backend.hold_off_readers(name.as_str(), None).await
        {
            tracing::debug!(lock = %name, error = %err, "could not lift a hold-off of readers; it ends with the writer's wait");
        }
    }
}
