//! Shared grants of read/write locks: many readers at once, each with a lease (token, fence,
//! ttl) of its own, excluding the exclusive lock of the same name and excluded by it.
//!
//! Readers are kept beside the lock, not instead of it: while any reader holds the name, the
//! lock key holds the marker [`SHARED_MARKER`] (with the lease of the longest reader), so an
//! exclusive acquire, lockgate's or any `SET NX` client's, finds the name held, without
//! looking anywhere else. The last reader to go deletes the marker and announces the release
//! as an exclusive holder's release does, which wakes waiting writers.
//!
//! No writer starvation: a waiting writer that finds readers asks that no new reader be let
//! in for as long as it waits ([`SharedBackend::hold_off_readers`]); the readers already in
//! finish, the writer gets the lock, and lifts the hold-off. New readers wait meanwhile.
//!
//! Fences come from the name's counter, as every grant's: a reader's fence is greater than
//! every fence granted before it, and a writer's greater than every reader's before it. So a
//! resource that remembers the greatest fence it has seen refuses a reader whose lease ended
//! before a writer took over (its fence is smaller than the writer's).
//!
//! Redlock does not offer shared grants ([`Backend::offers_beyond_locks`]).

use super::dispatch_without_redlock;
use std::future::Future;
use std::time::Duration;

use super::semaphore::PermitView;
use super::{
    AcquireOutcome, Backend, BackendError, Claim, ReleaseOutcome, RenewOutcome, ReplicaAck,
};
use crate::backend::GrantAttempt;

/// The lock key's value while readers hold the name. Never a token (tokens have no `~`).
pub const SHARED_MARKER: &str = "~shared";

/// The shared side of read/write locks. Names are validated lock names.
pub trait SharedBackend: Send + Sync {
    /// Takes a shared grant of `name` unless a writer holds it or waits for it (then `Held`,
    /// with the writer's, or the hold-off's, time left). Finds the grant of a token of `stem`
    /// again (an idempotent retry).
    fn acquire_shared(
        &self,
        name: &str,
        attempt: GrantAttempt<'_>,
    ) -> impl Future<Output = Result<AcquireOutcome, BackendError>> + Send;

    /// Sets a new ttl on the shared grant `token` holds; `NotHeld` if it is gone.
    fn renew_shared(
        &self,
        name: &str,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> impl Future<Output = Result<RenewOutcome, BackendError>> + Send;

    /// Ends the shared grant `token` holds; the last reader's release is announced.
    fn release_shared(
        &self,
        name: &str,
        token: &str,
    ) -> impl Future<Output = Result<ReleaseOutcome, BackendError>> + Send;

    /// Ends the shared grant of `stem` (and `claim`) that may have been made but was not
    /// delivered. True if something was removed.
    fn withdraw_shared(
        &self,
        name: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;

    /// The live shared grants of `name`, the first to end first.
    fn inspect_shared(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Vec<PermitView>, BackendError>> + Send;

    /// No new shared grant of `name` for `wait` (a writer waits), or again from now on
    /// (`None`: the writer got the lock or gave up).
    fn hold_off_readers(
        &self,
        name: &str,
        wait: Option<Duration>,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;
}

impl SharedBackend for Backend {
    async fn acquire_shared(
        &self,
        name: &str,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        dispatch_without_redlock!("shared locks", self, b => b.acquire_shared(name, attempt))
    }

    async fn renew_shared(
        &self,
        name: &str,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<RenewOutcome, BackendError> {
        dispatch_without_redlock!("shared locks", self, b => b.renew_shared(name, token, ttl, ack))
    }

    async fn release_shared(
        &self,
        name: &str,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        dispatch_without_redlock!("shared locks", self, b => b.release_shared(name, token))
    }

    async fn withdraw_shared(
        &self,
        name: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        dispatch_without_redlock!("shared locks", self, b => b.withdraw_shared(name, stem, claim))
    }

    async fn inspect_shared(&self, name: &str) -> Result<Vec<PermitView>, BackendError> {
        dispatch_without_redlock!("shared locks", self, b => b.inspect_shared(name))
    }

    async fn hold_off_readers(
        &self,
        name: &str,
        wait: Option<Duration>,
    ) -> Result<(), BackendError> {
        dispatch_without_redlock!("shared locks", self, b => b.hold_off_readers(name, wait))
    }
}
