//! Backends: where locks are kept.
//!
//! [`LeaseStore`] is the one contract every store meets: atomic acquire with a lease and a
//! fence, release and renew that succeed only for the holder's token, withdrawal of a grant
//! the gateway could not deliver, inspect, and a health probe. Each operation is a single
//! atomic step on the store (one Lua script or one native command on Redis, one critical
//! section in memory), so concurrent gateways can never both win a lock.
//!
//! The store keeps a lock's value as its token, exactly, and a token is `<stem>.<fence>` (see
//! [`fence`]): the gateway chooses the stem, the acquire issues the fence. This layer speaks
//! in plain names, token strings and durations; it knows nothing of HTTP, of how stems are
//! made or of validity accounting (the `lock` module does that), and nothing outside it knows
//! about Redis.
//!
//! Implementations: [`redis::RedisBackend`] (one Redis or Valkey server, a Sentinel-managed
//! master, or a Redis Cluster), [`redlock::RedlockBackend`] (a majority of independent
//! masters) and [`memory::MemoryBackend`] (in-process, for `--dev` and fast API tests).
//! [`Backend`] is the closed set the server dispatches over without boxing a future per
//! request.
//!
//! The contract (`LeaseStore`, one method per operation with what each promises) and its
//! dispatch over [`Backend`], one line per method, are kept in one file: a method's promise
//! and its dispatch change together.

mod attempt;
pub mod data_loss;
mod feed;
pub mod fence;
pub mod grant_set;
pub mod granted;
pub mod guards;
pub mod holder;
mod lease;
pub mod listing;
pub mod marks;
pub mod memory;
pub mod multi;
mod outcome;
pub mod queue;
pub mod redis;
pub mod redlock;

use std::future::Future;
use std::time::Duration;

pub use self::attempt::{
    DEFAULT_REPLICA_TIMEOUT, GrantAttempt, LeaseRequest, RenewAttempt, ReplicaPolicy, Withdrawal,
};
pub(crate) use self::feed::AbortOnDrop;
pub use self::feed::{ReleaseFeed, sleep_until_some};
pub use self::grant_set::{GrantSetKind, GrantsOf};
pub use self::granted::{Announcements, Announcer, GrantNews, GrantedNames};
pub use self::holder::Holder;
pub(crate) use self::lease::lease_operations_by_kind;
pub use self::lease::{Kept, Leased, Watched, kinds};
pub use self::listing::{GrantPage, ListCursor, ListPage, PageRequest};
pub use self::outcome::{
    AcquireOutcome, Claim, GrantView, Grants, Inspection, Lease, ReleaseOutcome, RenewOutcome,
    ReplicaAck,
};
pub use self::queue::{QueuePlace, QueuedWaiter};
use crate::telemetry::BackendErrorKind;

/// The store could not answer. Every variant but `Config` is transient from the caller's
/// point of view.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// Nothing was sent, or the store refused it: the operation did not take effect.
    #[error("backend unreachable: {0}")]
    Unavailable(String),
    /// The operation was sent and no answer came in time (or the connection broke while
    /// waiting): it may or may not have taken effect.
    #[error("backend did not answer within {0:?}")]
    Timeout(Duration),
    /// As `Timeout`, for a connection that broke while the answer was awaited.
    #[error("backend connection broke before the answer: {0}")]
    NoReply(String),
    /// Every dedicated connection for `WAIT` was busy for as long as the request could wait.
    #[error("all {0} connections for replica acknowledgement are busy")]
    WaitPoolExhausted(usize),
    /// The store refused the command (an ACL does not allow it).
    #[error("backend refused the command: {0}")]
    Refused(String),
    /// The store is full and refuses writes (Redis `OOM`, `maxmemory` reached with
    /// `noeviction`): nothing was written.
    #[error("backend is out of memory: {0}")]
    Full(String),
    #[error("backend sent an unexpected reply: {0}")]
    Protocol(String),
    /// Only at construction: the backend's settings cannot work.
    #[error("{0}")]
    Config(String),
}

/// A duration in whole milliseconds, as Redis and the API's `_ms` fields take it (saturating).
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl BackendError {
    /// The `kind` label of the backend error counter.
    pub fn kind(&self) -> BackendErrorKind {
        match self {
            Self::Unavailable(_) => BackendErrorKind::Unavailable,
            Self::Timeout(_) | Self::NoReply(_) => BackendErrorKind::Timeout,
            Self::WaitPoolExhausted(_) => BackendErrorKind::WaitPoolExhausted,
            Self::Protocol(_) | Self::Refused(_) => BackendErrorKind::Protocol,
            Self::Full(_) => BackendErrorKind::Full,
            Self::Config(_) => BackendErrorKind::Config,
        }
    }

    /// Whether the operation may have taken effect although no answer says so.
    pub fn outcome_unknown(&self) -> bool {
        matches!(self, Self::Timeout(_) | Self::NoReply(_))
    }
}

/// The contract every store meets. A lease operation takes what it acts on as a [`Leased`]
/// (the kind of lease and its names); `token` is the exact string the store keeps for the
/// grant; `stem` is the part of it the gateway chose (see [`fence`]). Names of the lock
/// operations are validated lock names.
pub trait LeaseStore: Send + Sync {
    /// Takes a grant of `leased` if one is free, with the token `<stem>.<fence>` and a fence
    /// issued now; finds the grant again if a token of `stem` already holds it (an idempotent
    /// retry); else reports when the grant in the way ends. With a `claim`, the grant (new or
    /// found again) is marked as claimed by it (see [`Claim`]). A new grant keeps the
    /// attempt's holder beside it (an idempotent retry keeps the holder of the grant it finds).
    fn acquire(
        &self,
        leased: Leased<'_>,
        attempt: GrantAttempt<'_>,
    ) -> impl Future<Output = Result<AcquireOutcome, BackendError>> + Send;

    /// Sets a new ttl on the grant `token` holds, and only on it. The lease's fence is the one
    /// the token carries (or, for a lock whose token has none, the one the store can tell).
    fn renew(
        &self,
        leased: Leased<'_>,
        renewal: RenewAttempt<'_>,
    ) -> impl Future<Output = Result<RenewOutcome, BackendError>> + Send;

    /// Ends the grant `token` holds, and only it, announcing the release to waiters.
    fn release(
        &self,
        leased: Leased<'_>,
        token: &str,
    ) -> impl Future<Output = Result<ReleaseOutcome, BackendError>> + Send;

    /// Undoes the grant `withdrawal` names (see [`Withdrawal`]). True if something was
    /// removed.
    fn withdraw(
        &self,
        leased: Leased<'_>,
        withdrawal: Withdrawal<'_>,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;

    /// Subscribes to what `what` names (see [`Watched`]). Returns once the subscription is
    /// in place, so that what happens after this returns is seen; if the store cannot confirm
    /// it (unreachable), the feed still works once the store is back, and waiters fall back to
    /// the holder's ttl.
    fn watch(&self, what: Watched<'_>) -> impl Future<Output = ReleaseFeed> + Send;

    /// This gateway's `waiter` of `leased` leaves the line the store keeps for it (see
    /// [`Watched::Turn`]): it gave up, or its client went away; the next waiter's gateway is
    /// told if it was first. Nothing to do for a kind whose waiters wait in the gateway alone.
    fn leave(
        &self,
        leased: Leased<'_>,
        waiter: u64,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Whether every release of `leased` is announced, including those made by other clients
    /// of the store; if not, waiters look again now and then (see `lock::acquire`).
    fn sees_every_release(&self, leased: Leased<'_>) -> bool;

    /// Ends `leased` whoever holds it (an operator's force release) and remembers the revoked
    /// tokens until their leases would have ended (see [`LeaseStore::was_revoked`]): a lock
    /// (with it, the grants of `beside`, the set kept beside the lock, see
    /// [`GrantSetKind::marker`], when its marker held the lock), or every live grant of a set
    /// of grants. A set of locks is revoked name by name, as locks (false here). True if
    /// something was held.
    fn revoke(
        &self,
        leased: Leased<'_>,
        beside: Option<GrantsOf>,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;

    /// The fence of the grant on `name` last revoked, while its lease would still run.
    fn revoked_fence(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<u64>, BackendError>> + Send;

    /// Whether `token`'s grant of `leased` was revoked (and its lease would still run): the
    /// lock's, a grant of a set of grants, or one of a set's locks.
    fn was_revoked(
        &self,
        leased: Leased<'_>,
        token: &str,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;

    /// Reports whether the lock is held, for how long, the current fence, and its holder.
    fn inspect(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<Inspection>, BackendError>> + Send;

    /// The live grants of the set `of` of `name`, the first to end first, and the limit
    /// they were granted under (of a limited kind).
    fn inspect_grants(
        &self,
        of: GrantsOf,
        name: &str,
    ) -> impl Future<Output = Result<Grants, BackendError>> + Send;

    /// A waiter of `leased` keeps out, for `wait`, the grants that would otherwise come in
    /// before it and keep it waiting: new shared grants (readers) of a lock while a writer
    /// waits. `None` lets them in again (the waiter got its grant or gave up). A kind that
    /// nothing overtakes has nothing to keep out.
    fn hold_off(
        &self,
        leased: Leased<'_>,
        wait: Option<Duration>,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// One page of held locks (see [`listing`]).
    fn list(
        &self,
        request: PageRequest<'_>,
    ) -> impl Future<Output = Result<ListPage, BackendError>> + Send;

    /// One page of the names with grants of the set `of` held (see [`listing`]), each with
    /// what [`LeaseStore::inspect_grants`] sees of it.
    fn list_grants(
        &self,
        of: GrantsOf,
        request: PageRequest<'_>,
    ) -> impl Future<Output = Result<GrantPage, BackendError>> + Send;

    /// Answers when the store can serve requests.
    fn ping(&self) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Announcements of the grants of every lock whose name starts with `prefix` (see
    /// [`granted`]), returned once the subscription is in place; `Refused` when the store will
    /// not announce them to this gateway (an ACL).
    fn watch_grants_under(
        &self,
        prefix: &str,
    ) -> impl Future<Output = Result<GrantedNames, BackendError>> + Send;
}

/// The configured backend.
#[derive(Debug)]
pub enum Backend {
    // Boxed, as the others: each is several times larger than a pointer.
    Memory(Box<memory::MemoryBackend>),
    Redis(Box<redis::RedisBackend>),
    Redlock(Box<redlock::RedlockBackend>),
}

impl Backend {
    /// A short label for logs and the readiness answer.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Memory(_) => "memory",
            Self::Redis(backend) => backend.kind(),
            Self::Redlock(_) => "redlock",
        }
    }

    /// Whether the store keeps reentrant locks: not Redlock, whose nodes would each count
    /// holds of their own, with no quorum rule for a count.
    pub fn offers_reentrant(&self) -> bool {
        !matches!(self, Self::Redlock(_))
    }

    /// What inspect sees of the lock `name`, and whether the grant seen certainly has its
    /// final fence: Redlock gives a grant a fence per node, then raises them all to the
    /// highest once every node answered; its fence is certain once every node holds it with
    /// one fence (a node that does not hold it may not have answered yet, or have refused).
    /// Elsewhere a grant's fence is final when it is seen.
    pub async fn inspect_settled(
        &self,
        name: &str,
    ) -> Result<(Option<Inspection>, bool), BackendError> {
        match self {
            Self::Redlock(redlock) => redlock.inspect_settled(name).await,
            other => Ok((other.inspect(name).await?, true)),
        }
    }

    /// How long after it is first seen a new grant may still change its fence: on Redlock,
    /// within two per-node timeouts (every node's acquire, then the raising of the fences);
    /// elsewhere, no time.
    pub fn fence_settles_within(&self) -> Duration {
        match self {
            Self::Redlock(redlock) => redlock.fence_settles_within(),
            _ => Duration::ZERO,
        }
    }

    /// Whether the store keeps fair queues: not Redlock, whose nodes would each keep a queue
    /// of their own, in orders that differ, with no quorum rule for an order (see
    /// docs/modes.md).
    pub fn offers_fair(&self) -> bool {
        !matches!(self, Self::Redlock(_))
    }

    /// Whether this store can keep `leased`: every store keeps locks; Redlock nothing else
    /// (shared grants, permits and sets each need a quorum design of their own on independent
    /// masters: a set of readers, a permit count or a set of names kept per node falls short
    /// after a node restarts empty, and none is built); a Cluster a set only when its names
    /// share a hash slot (one script takes them all).
    pub fn offers(&self, leased: Leased<'_>) -> Result<(), Unoffered> {
        match (self, leased) {
            (_, Leased::Lock(_)) => Ok(()),
            (Self::Redlock(_), _) => Err(Unoffered::Kind),
            (Self::Redis(redis), Leased::Set(names)) if !redis.same_slot(names) => {
                Err(Unoffered::CrossSlot)
            }
            _ => Ok(()),
        }
    }
}

/// Why a store cannot keep a kind of lease (see [`Backend::offers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unoffered {
    /// Not this kind, in this mode.
    Kind,
    /// Not these names at once: a Cluster keeps them in different hash slots.
    CrossSlot,
}

/// Each method of [`LeaseStore`] on [`Backend`]: the same call on the configured store. One
/// line per method, `async fn name(args) -> output;`, matched without boxing a future.
macro_rules! dispatch_lease_store {
    ($(async fn $method:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty;)*) => {
        $(async fn $method(&self $(, $arg: $ty)*) -> $out {
            match self {
                Backend::Memory(b) => b.$method($($arg),*).await,
                Backend::Redis(b) => b.$method($($arg),*).await,
                Backend::Redlock(b) => b.$method($($arg),*).await,
            }
        })*
    };
}

impl LeaseStore for Backend {
    dispatch_lease_store! {
        async fn acquire(&self, leased: Leased<'_>, attempt: GrantAttempt<'_>) -> Result<AcquireOutcome, BackendError>;
        async fn renew(&self, leased: Leased<'_>, renewal: RenewAttempt<'_>) -> Result<RenewOutcome, BackendError>;
        async fn release(&self, leased: Leased<'_>, token: &str) -> Result<ReleaseOutcome, BackendError>;
        async fn withdraw(&self, leased: Leased<'_>, withdrawal: Withdrawal<'_>) -> Result<bool, BackendError>;
        async fn watch(&self, what: Watched<'_>) -> ReleaseFeed;
        async fn leave(&self, leased: Leased<'_>, waiter: u64) -> Result<(), BackendError>;
        async fn revoke(&self, leased: Leased<'_>, beside: Option<GrantsOf>) -> Result<bool, BackendError>;
        async fn revoked_fence(&self, name: &str) -> Result<Option<u64>, BackendError>;
        async fn was_revoked(&self, leased: Leased<'_>, token: &str) -> Result<bool, BackendError>;
        async fn inspect(&self, name: &str) -> Result<Option<Inspection>, BackendError>;
        async fn inspect_grants(&self, of: GrantsOf, name: &str) -> Result<Grants, BackendError>;
        async fn hold_off(&self, leased: Leased<'_>, wait: Option<Duration>) -> Result<(), BackendError>;
        async fn list(&self, request: PageRequest<'_>) -> Result<ListPage, BackendError>;
        async fn list_grants(&self, of: GrantsOf, request: PageRequest<'_>) -> Result<GrantPage, BackendError>;
        async fn ping(&self) -> Result<(), BackendError>;
        async fn watch_grants_under(&self, prefix: &str) -> Result<GrantedNames, BackendError>;
    }

    fn sees_every_release(&self, leased: Leased<'_>) -> bool {
        match self {
            Self::Memory(b) => b.sees_every_release(leased),
            Self::Redis(b) => b.sees_every_release(leased),
            Self::Redlock(b) => b.sees_every_release(leased),
        }
    }
}
