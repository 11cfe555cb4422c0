//! [`Primitive`]: what one kind of lease does on the backend.
//!
//! The lease engine ([`super::service::LockService`]) owns everything every kind of lease has
//! in common: token stems and idempotency claims, validity accounting, replica requirements,
//! withdrawal of undelivered grants, waiting in line without polling, renewal, and the hold
//! stream's watchdog ([`super::hold`]). A primitive only says how its grants are taken,
//! renewed, released, withdrawn and inspected on the backend, and how releases are announced
//! to waiters. It is a value: a primitive with parameters (a semaphore's number of permits)
//! carries them, and the engine hands it back to every operation of the same request.
//!
//! The exclusive lock ([`super::exclusive::Exclusive`]) is the first. Adding one is a type
//! implementing this trait (with the backend operations it needs), and its routes in `http`.

use std::future::Future;
use std::time::Duration;

use super::LockName;
use crate::backend::GrantAttempt;
use crate::backend::{
    AcquireOutcome, Backend, BackendError, Claim, Inspection, ReleaseFeed, ReleaseOutcome,
    RenewOutcome, ReplicaAck,
};

/// One kind of lease, as the backend keeps it.
pub trait Primitive: Clone + Send + Sync + Unpin + std::fmt::Debug + 'static {
    /// What the lease is called in logs and waiting lines (`lock`).
    const KIND: &'static str;

    /// Whether a grant excludes every other (a lock), rather than being one of several that
    /// may be held at once (a semaphore's permits). Waiting uses it: after a hand-off, the
    /// next in line of a single-holder primitive need not look before the next release.
    const SINGLE_HOLDER: bool;

    /// Whether its grants are the shared grants of a read/write lock (their tokens are marked
    /// so, and renewals and releases of `/locks/{name}` find their way by it).
    const SHARED: bool = false;

    /// Whether its grants hold several names at once (a multi-lock: its tokens are marked so,
    /// and `/locks/{name}` refuses them, which would leave the set half-held).
    const MULTI: bool = false;

    /// The names a grant holds when there are several (a multi-lock), for the responses
    /// that list them; `None` for a grant of one name.
    fn held_names(&self) -> Option<&[LockName]> {
        None
    }

    /// Takes a grant for `stem` if one is free, naming `holder` (see `LockBackend::acquire`).
    fn acquire(
        &self,
        backend: &Backend,
        name: &LockName,
        attempt: GrantAttempt<'_>,
    ) -> impl Future<Output = Result<AcquireOutcome, BackendError>> + Send;

    /// Extends the grant `token` holds.
    fn renew(
        &self,
        backend: &Backend,
        name: &LockName,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> impl Future<Output = Result<RenewOutcome, BackendError>> + Send;

    /// Ends the grant `token` holds.
    fn release(
        &self,
        backend: &Backend,
        name: &LockName,
        token: &str,
    ) -> impl Future<Output = Result<ReleaseOutcome, BackendError>> + Send;

    /// Ends the grant on `name` whoever holds it, remembering the revoked token (an operator's
    /// force release). True if something was held. By default nothing is revocable through
    /// the primitive (only the lock is; its readers and sets end with it).
    fn revoke(
        &self,
        _backend: &Backend,
        _name: &LockName,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send {
        std::future::ready(Ok(false))
    }

    /// Whether `token`'s grant on `name` was revoked. By default never (see `revoke`).
    fn was_revoked(
        &self,
        _backend: &Backend,
        _name: &LockName,
        _token: &str,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send {
        std::future::ready(Ok(false))
    }

    /// Ends the grant of `stem` (and `claim`) that may have been made but was not delivered.
    fn withdraw(
        &self,
        backend: &Backend,
        name: &LockName,
        stem: &str,
        claim: Option<Claim>,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;

    /// What anyone may see of the grant on `name`.
    fn inspect(
        &self,
        backend: &Backend,
        name: &LockName,
    ) -> impl Future<Output = Result<Option<Inspection>, BackendError>> + Send;

    /// Announcements of releases of `name`, for waiters.
    fn watch_releases(
        &self,
        backend: &Backend,
        name: &LockName,
    ) -> impl Future<Output = ReleaseFeed> + Send;

    /// Whether every release of `name` is announced (else waiters look again now and then).
    fn sees_every_release(&self, backend: &Backend) -> bool;

    /// Called when a waiting request found `name` held by shared holders: asks that no new
    /// shared grant be made for `wait` (a waiting writer holds off new readers). Nothing by
    /// default; see [`super::Exclusive`].
    fn hold_off_shared(
        &self,
        _backend: &Backend,
        _name: &LockName,
        _wait: std::time::Duration,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Called when a request that held off shared grants got its own: they may go on.
    fn stop_holding_off_shared(
        &self,
        _backend: &Backend,
        _name: &LockName,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }
}
