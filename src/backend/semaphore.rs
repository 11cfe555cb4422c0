//! Counting semaphores: at most `limit` grants (permits) of one name at a time, each a lease
//! of its own with a token `<stem>.<fence>`, renewed and released by its holder alone.
//!
//! The contract mirrors [`super::LockBackend`]'s, one permit at a time: acquire takes a permit
//! if fewer than `limit` are held (finding its own again on an idempotent retry), renew and
//! release act on the permit a token holds, withdraw undoes an undelivered grant. Expired
//! permits are reclaimed by the next operation on the name: no sweeper is needed for the count
//! to be right. The limit belongs to the current holders: the first grant of a free semaphore
//! sets it, and a request that names another while permits are held is refused
//! ([`AcquireOutcome::LimitDiffers`]), so two deployments that disagree cannot both be right
//! at once.
//!
//! Fences come from the same counter as the lock's (per server, or per hash slot in a
//! Cluster): strictly increasing per name in grant order, across every permit.
//!
//! How each store keeps a semaphore: [`super::redis`] in a sorted set of tokens scored by
//! expiry and a hash beside it (see `docs/api.md`, "Semaphores"); [`super::memory`] in a map.
//! Redlock does not offer semaphores (see [`Backend::offers_beyond_locks`]).

use super::dispatch_without_redlock;
use std::future::Future;
use std::time::Duration;

use super::{
    AcquireOutcome, Backend, BackendError, Claim, Holder, Inspection, ReleaseFeed, ReleaseOutcome,
    RenewOutcome, ReplicaAck,
};
use crate::backend::GrantAttempt;

/// One permit as anyone may see it. Never the token.
#[derive(Debug, Clone, PartialEq)]
pub struct PermitView {
    pub fence: Option<u64>,
    pub ttl: Duration,
    pub holder: Option<Holder>,
}

impl PermitView {
    /// This permit (or reader) as the engine's one-lease view of its name: `shared` for a
    /// read/write lock's readers.
    pub fn into_inspection(self, shared: bool) -> Inspection {
        Inspection {
            ttl: Some(self.ttl),
            fence: self.fence,
            holder: self.holder,
            shared,
        }
    }
}

/// What inspect sees of a semaphore: its limit while permits are held, and the live permits
/// in order of expiry.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Permits {
    pub limit: Option<u32>,
    pub permits: Vec<PermitView>,
}

/// The semaphore operations of a store. Names are validated lock names; `limit` ≥ 1.
pub trait SemaphoreBackend: Send + Sync {
    /// Takes a permit of `name` if fewer than `limit` are held: the token `<stem>.<fence>`.
    /// Finds the permit of a token of `stem` again (an idempotent retry). `Held { ttl }` gives
    /// the time until the first permit held expires. With a `claim`, the permit is marked as
    /// claimed by it; a new permit keeps `holder` beside it.
    fn acquire_permit(
        &self,
        name: &str,
        limit: u32,
        attempt: GrantAttempt<'_>,
    ) -> impl Future<Output = Result<AcquireOutcome, BackendError>> + Send;

    /// Sets a new ttl on the permit `token` holds. A permit that is gone (expired, released)
    /// is `NotHeld`: semaphores have no "held by another token".
    fn renew_permit(
        &self,
        name: &str,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> impl Future<Output = Result<RenewOutcome, BackendError>> + Send;

    /// Ends the permit `token` holds, and announces it to waiters.
    fn release_permit(
        &self,
        name: &str,
        token: &str,
    ) -> impl Future<Output = Result<ReleaseOutcome, BackendError>> + Send;

    /// Ends the permit of `stem` (and `claim`, see [`Claim`]) that may have been granted but
    /// was not delivered. True if something was removed.
    fn withdraw_permit(
        &self,
        name: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;

    /// The limit and the live permits of `name`.
    fn inspect_permits(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Permits, BackendError>> + Send;

    /// Announcements of permits of `name` given back (released or withdrawn), for waiters.
    fn watch_permits(&self, name: &str) -> impl Future<Output = ReleaseFeed> + Send;
}

impl SemaphoreBackend for Backend {
    async fn acquire_permit(
        &self,
        name: &str,
        limit: u32,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        dispatch_without_redlock!("semaphores", self, b => b.acquire_permit(name, limit, attempt))
    }

    async fn renew_permit(
        &self,
        name: &str,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<RenewOutcome, BackendError> {
        dispatch_without_redlock!("semaphores", self, b => b.renew_permit(name, token, ttl, ack))
    }

    async fn release_permit(
        &self,
        name: &str,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        dispatch_without_redlock!("semaphores", self, b => b.release_permit(name, token))
    }

    async fn withdraw_permit(
        &self,
        name: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        dispatch_without_redlock!("semaphores", self, b => b.withdraw_permit(name, stem, claim))
    }

    async fn inspect_permits(&self, name: &str) -> Result<Permits, BackendError> {
        dispatch_without_redlock!("semaphores", self, b => b.inspect_permits(name))
    }

    async fn watch_permits(&self, name: &str) -> ReleaseFeed {
        match self {
            Self::Memory(b) => b.watch_permits(name).await,
            Self::Redis(b) => b.watch_permits(name).await,
            // A feed that never changes: nobody waits for what is never granted.
            Self::Redlock(_) => {
                let (sender, receiver) = tokio::sync::watch::channel(());
                ReleaseFeed::new(receiver, sender)
            }
        }
    }
}
