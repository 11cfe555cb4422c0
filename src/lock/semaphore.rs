//! [`Semaphore`]: a counting semaphore. Up to `permits` grants of one name at a time, each
//! a lease with its own token, fence and ttl; the backend side is
//! [`crate::backend::semaphore`].
//!
//! Everything else a lease has (idempotent acquire, validity, WAIT, waiting in line without
//! polling, hold streams, `lockgate run`) comes from the engine unchanged. Waiters of a name
//! form one line per gateway, served first come first served: the head tries when a permit
//! is given back (announced by the release) or when the first permit held runs out.
//!
//! Semaphores cannot be revoked (`DELETE …?force=true` is the lock's); [`Primitive::revoke`]
//! here revokes nothing.

use std::num::NonZeroU32;
use std::time::Duration;

use super::primitive::Primitive;
use super::{LockError, LockName, LockService};
use crate::backend::GrantAttempt;
use crate::backend::semaphore::{Permits, SemaphoreBackend};
use crate::backend::{
    AcquireOutcome, Backend, BackendError, Claim, Inspection, ReleaseFeed, ReleaseOutcome,
    RenewOutcome, ReplicaAck,
};

/// Most permits a semaphore may have.
pub const MAX_PERMITS: u32 = 10_000;

/// A semaphore of `permits` permits. Renew, release and withdraw act on one permit, whatever
/// the limit: any value serves for them.
#[derive(Debug, Clone, Copy)]
pub struct Semaphore {
    pub permits: NonZeroU32,
}

impl Semaphore {
    /// For operations on a permit already held (the limit does not matter to them).
    pub const ANY: Self = Self {
        permits: NonZeroU32::MIN,
    };
}

impl Primitive for Semaphore {
    const KIND: &'static str = "semaphore";
    const SINGLE_HOLDER: bool = false;

    async fn acquire(
        &self,
        backend: &Backend,
        name: &LockName,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        backend
            .acquire_permit(name.as_str(), self.permits.get(), attempt)
            .await
    }

    async fn renew(
        &self,
        backend: &Backend,
        name: &LockName,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<RenewOutcome, BackendError> {
        backend.renew_permit(name.as_str(), token, ttl, ack).await
    }

    async fn release(
        &self,
        backend: &Backend,
        name: &LockName,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        backend.release_permit(name.as_str(), token).await
    }

    async fn withdraw(
        &self,
        backend: &Backend,
        name: &LockName,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        backend.withdraw_permit(name.as_str(), stem, claim).await
    }

    /// The permit that runs longest, as one lease (the engine's generic view; the API shows
    /// every permit through [`LockService::inspect_semaphore`]).
    async fn inspect(
        &self,
        backend: &Backend,
        name: &LockName,
    ) -> Result<Option<Inspection>, BackendError> {
        let seen = backend.inspect_permits(name.as_str()).await?;
        let longest = seen.permits.into_iter().last();
        Ok(longest.map(|permit| permit.into_inspection(false)))
    }

    async fn watch_releases(&self, backend: &Backend, name: &LockName) -> ReleaseFeed {
        backend.watch_permits(name.as_str()).await
    }

    /// Only lockgate writes semaphores, and each of its releases is announced; expiries wake
    /// waiters at the first permit's ttl.
    fn sees_every_release(&self, _: &Backend) -> bool {
        true
    }
}

/// What anyone may see of a semaphore. Never a token.
#[derive(Debug, Clone, PartialEq)]
pub struct SemaphoreState {
    /// The limit the current permits were granted under; `None` when none is held.
    pub limit: Option<u32>,
    /// The live permits, in order of expiry.
    pub permits: Vec<crate::backend::semaphore::PermitView>,
    /// Requests waiting for a permit in this gateway.
    pub waiting: usize,
}

impl LockService {
    /// Whether the configured backend offers semaphores.
    pub fn check_semaphores_offered(&self) -> Result<(), LockError> {
        if self.backend.offers_beyond_locks() {
            Ok(())
        } else {
            Err(LockError::NotOffered {
                kind: Semaphore::KIND,
                mode: self.backend.kind(),
            })
        }
    }

    /// The limit, permits and holders of the semaphore `name`.
    pub async fn inspect_semaphore(&self, name: &LockName) -> Result<SemaphoreState, LockError> {
        self.check_semaphores_offered()?;
        let Permits { limit, permits } = self.backend.inspect_permits(name.as_str()).await?;
        Ok(SemaphoreState {
            limit,
            permits,
            waiting: self.waiters.waiting_for(Semaphore::KIND, name.as_str()),
        })
    }
}
