//! Multi-locks: several locks taken under one token and one ttl, all or none.
//!
//! Each name of the set is an ordinary lock whose key holds the set's token, so every name
//! looks held (by a plain `GET`, by `GET /locks/{name}`, by a `SET NX` client) for exactly as
//! long as the set is. Acquire takes every name in one atomic step or none (no partial grant
//! is ever made, so two clients taking overlapping sets in any order cannot deadlock: neither
//! ever holds part of its set while waiting for the rest). Renew and release act on every name
//! at once. The set's fence is issued once, from the counter every name of the set shares
//! (the one counter of a server; in a Cluster, the names' one hash slot's), so it is greater
//! than every fence any of its names had before.
//!
//! In a Cluster one step can only touch one hash slot: every name of a set must map to the
//! same slot ([`Backend::same_slot`]). Redlock does not offer multi-locks.

use super::dispatch_without_redlock;
use std::future::Future;
use std::time::Duration;

use super::{
    AcquireOutcome, Backend, BackendError, Claim, ReleaseOutcome, RenewOutcome, ReplicaAck,
};
use crate::backend::GrantAttempt;

/// The multi-lock operations of a store. `names` are validated lock names, sorted, distinct.
pub trait MultiBackend: Send + Sync {
    /// Takes every name for `<stem>.<fence>` if none is held; finds the set again if a token
    /// of `stem` holds every name (an idempotent retry); else `Held` with the ttl of a name
    /// held by another token (or by part of this set, running out).
    fn acquire_all(
        &self,
        names: &[&str],
        attempt: GrantAttempt<'_>,
    ) -> impl Future<Output = Result<AcquireOutcome, BackendError>> + Send;

    /// A new ttl on every name, if `token` holds them all; nothing otherwise.
    fn renew_all(
        &self,
        names: &[&str],
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> impl Future<Output = Result<RenewOutcome, BackendError>> + Send;

    /// Deletes every name `token` holds, announcing each release. `Released` if it held them
    /// all, `NotHeld` if it held none (or, running out, only some: those are deleted too),
    /// `NotOwner` if another token holds one.
    fn release_all(
        &self,
        names: &[&str],
        token: &str,
    ) -> impl Future<Output = Result<ReleaseOutcome, BackendError>> + Send;

    /// Deletes every name a token of `stem` holds (and `claim` is still the set's last).
    fn withdraw_all(
        &self,
        names: &[&str],
        stem: &str,
        claim: Option<Claim>,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;
}

impl Backend {
    /// Whether one atomic step can take all of `names`: always, but in a Cluster, where they
    /// must share a hash slot.
    pub fn same_slot(&self, names: &[&str]) -> bool {
        match self {
            Self::Redis(redis) => redis.same_slot(names),
            _ => true,
        }
    }
}

impl MultiBackend for Backend {
    async fn acquire_all(
        &self,
        names: &[&str],
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        dispatch_without_redlock!("multi-locks", self, b => b.acquire_all(names, attempt))
    }

    async fn renew_all(
        &self,
        names: &[&str],
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<RenewOutcome, BackendError> {
        dispatch_without_redlock!("multi-locks", self, b => b.renew_all(names, token, ttl, ack))
    }

    async fn release_all(
        &self,
        names: &[&str],
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        dispatch_without_redlock!("multi-locks", self, b => b.release_all(names, token))
    }

    async fn withdraw_all(
        &self,
        names: &[&str],
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        dispatch_without_redlock!("multi-locks", self, b => b.withdraw_all(names, stem, claim))
    }
}
