//! [`Shared`]: the shared (reader) side of read/write locks. Many shared grants of a name at
//! once, each a lease with its own token, fence and ttl; none while the exclusive lock
//! ([`super::Exclusive`], the writer) is held, and the writer only once every reader has gone.
//! The backend side, and what fences mean for readers, is [`crate::backend::shared`].
//!
//! A shared grant's token is marked (`Marks::shared`), so renewing or releasing it through
//! `/locks/{name}` finds its way here. Waiting readers form their own line per gateway; they
//! wake at a writer's release (or the last reader's, which a waiting writer also waits for).

use std::time::Duration;

use super::primitive::Primitive;
use super::{LockError, LockName, LockService};
use crate::backend::GrantAttempt;
use crate::backend::shared::SharedBackend;
use crate::backend::{
    AcquireOutcome, Backend, BackendError, Claim, Inspection, LockBackend, ReleaseFeed,
    ReleaseOutcome, RenewOutcome, ReplicaAck,
};

/// A shared (read) grant of a lock.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shared;

impl Primitive for Shared {
    const KIND: &'static str = "shared";
    const SINGLE_HOLDER: bool = false;
    const SHARED: bool = true;

    async fn acquire(
        &self,
        backend: &Backend,
        name: &LockName,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        backend.acquire_shared(name.as_str(), attempt).await
    }

    async fn renew(
        &self,
        backend: &Backend,
        name: &LockName,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<RenewOutcome, BackendError> {
        backend.renew_shared(name.as_str(), token, ttl, ack).await
    }

    async fn release(
        &self,
        backend: &Backend,
        name: &LockName,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        backend.release_shared(name.as_str(), token).await
    }

    async fn withdraw(
        &self,
        backend: &Backend,
        name: &LockName,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        backend.withdraw_shared(name.as_str(), stem, claim).await
    }

    /// The reader that runs longest, as one lease (the API shows every reader through
    /// [`LockService::inspect`]).
    async fn inspect(
        &self,
        backend: &Backend,
        name: &LockName,
    ) -> Result<Option<Inspection>, BackendError> {
        let readers = backend.inspect_shared(name.as_str()).await?;
        Ok(readers
            .into_iter()
            .last()
            .map(|reader| reader.into_inspection(true)))
    }

    /// The lock's release feed: a writer's release, or the last reader's.
    async fn watch_releases(&self, backend: &Backend, name: &LockName) -> ReleaseFeed {
        backend.watch_releases(name.as_str()).await
    }

    fn sees_every_release(&self, backend: &Backend) -> bool {
        backend.sees_every_release()
    }
}

impl LockService {
    /// Whether the configured backend offers shared grants.
    pub fn check_shared_offered(&self) -> Result<(), LockError> {
        if self.backend.offers_beyond_locks() {
            Ok(())
        } else {
            Err(LockError::NotOffered {
                kind: "shared lock",
                mode: self.backend.kind(),
            })
        }
    }
}
