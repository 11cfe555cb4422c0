//! [`Multi`]: several locks taken under one token and ttl, all or none; renewed and released
//! together. The backend side, and why it cannot deadlock, is [`crate::backend::multi`].
//!
//! The engine knows a lease by one name: a set is known by its first name (in sorted order),
//! which is also where its waiting line is kept; a waiter wakes at the release of any name of
//! its set.

use std::sync::Arc;
use std::time::Duration;

use super::primitive::Primitive;
use super::{InvalidRequest, LockError, LockName, LockService};
use crate::backend::GrantAttempt;
use crate::backend::multi::MultiBackend;
use crate::backend::{
    AbortOnDrop, AcquireOutcome, Backend, BackendError, Claim, Inspection, LockBackend,
    ReleaseFeed, ReleaseOutcome, RenewOutcome, ReplicaAck,
};

/// Fewest and most names in a set.
pub const MIN_NAMES: usize = 2;
pub const MAX_NAMES: usize = 64;

/// A set of lock names, sorted and distinct.
#[derive(Debug, Clone)]
pub struct Multi {
    names: Arc<[LockName]>,
}

impl Multi {
    /// The set of `names` (2 to 64, distinct). The order given does not matter.
    pub fn new(mut names: Vec<LockName>) -> Result<Self, InvalidRequest> {
        names.sort_unstable_by(|a, b| a.as_str().cmp(b.as_str()));
        names.dedup_by(|a, b| a.as_str() == b.as_str());
        if !(MIN_NAMES..=MAX_NAMES).contains(&names.len()) {
            return Err(InvalidRequest {
                field: "names",
                message: format!("must be {MIN_NAMES} to {MAX_NAMES} distinct lock names"),
            });
        }
        Ok(Self {
            names: names.into(),
        })
    }

    /// The name the engine knows the set by: its first.
    pub fn first(&self) -> &LockName {
        &self.names[0]
    }

    pub fn names(&self) -> &[LockName] {
        &self.names
    }

    fn strs(&self) -> Vec<&str> {
        self.names.iter().map(LockName::as_str).collect()
    }
}

impl Primitive for Multi {
    const KIND: &'static str = "multi";
    const SINGLE_HOLDER: bool = true;
    const MULTI: bool = true;

    fn held_names(&self) -> Option<&[LockName]> {
        Some(&self.names)
    }

    async fn acquire(
        &self,
        backend: &Backend,
        _: &LockName,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        backend.acquire_all(&self.strs(), attempt).await
    }

    async fn renew(
        &self,
        backend: &Backend,
        _: &LockName,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<RenewOutcome, BackendError> {
        backend.renew_all(&self.strs(), token, ttl, ack).await
    }

    async fn release(
        &self,
        backend: &Backend,
        _: &LockName,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        backend.release_all(&self.strs(), token).await
    }

    async fn was_revoked(
        &self,
        backend: &Backend,
        _: &LockName,
        token: &str,
    ) -> Result<bool, BackendError> {
        for name in self.names.iter() {
            if backend.was_revoked(name.as_str(), token).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn withdraw(
        &self,
        backend: &Backend,
        _: &LockName,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        backend.withdraw_all(&self.strs(), stem, claim).await
    }

    /// The set's first name, as a lock.
    async fn inspect(
        &self,
        backend: &Backend,
        _: &LockName,
    ) -> Result<Option<Inspection>, BackendError> {
        backend.inspect(self.first().as_str()).await
    }

    /// A feed that changes at the release of any name of the set.
    async fn watch_releases(&self, backend: &Backend, _: &LockName) -> ReleaseFeed {
        let mut feeds = Vec::with_capacity(self.names.len());
        for name in self.names.iter() {
            feeds.push(backend.watch_releases(name.as_str()).await);
        }
        let (sender, receiver) = tokio::sync::watch::channel(());
        let forward = tokio::spawn(async move {
            let mut receivers: Vec<_> = feeds.iter().map(ReleaseFeed::receiver).collect();
            loop {
                let changes = receivers.iter_mut().map(|r| Box::pin(r.changed()));
                let (changed, _, _) = futures_util::future::select_all(changes).await;
                if changed.is_err() || sender.send(()).is_err() {
                    return;
                }
            }
        });
        ReleaseFeed::new(receiver, AbortOnDrop(forward))
    }

    fn sees_every_release(&self, backend: &Backend) -> bool {
        backend.sees_every_release()
    }
}

impl LockService {
    /// Whether the configured backend can take the set `multi` in one step.
    pub fn check_multi(&self, multi: &Multi) -> Result<(), LockError> {
        if !self.backend.offers_beyond_locks() {
            return Err(LockError::NotOffered {
                kind: "multi-lock",
                mode: self.backend.kind(),
            });
        }
        if !self.backend.same_slot(&multi.strs()) {
            return Err(LockError::CrossSlot);
        }
        Ok(())
    }
}
