//! [`Leased`]: what a lease operation acts on, whatever the kind of lease.
//!
//! Every store keeps several kinds of lease: the lock of a name, a grant of a set of grants
//! (a read/write lock's reader, kept beside the lock; a semaphore's permit, under a limit), a
//! set of locks held together. They differ in how a store keeps them and in nothing the lease engine does with
//! them: each is acquired with a [`GrantAttempt`](super::GrantAttempt), renewed, released and
//! withdrawn by its token or stem, and announced to waiters when it is given back. So the
//! contract ([`LeaseStore`](super::LeaseStore)) takes the kind as a value, and each store
//! answers each kind in its own module. A kind kept as a set of grants is described by data
//! ([`GrantSetKind`](super::GrantSetKind)) and needs no variant and no arm.
//!
//! What the engine needs to know of a kind (its label, whether a grant excludes every other,
//! how its tokens are marked) is data of the variant, below, not code of the engine.

use super::grant_set::GrantsOf;
use super::marks::Marks;
use crate::name::LockName;

/// What a lease operation acts on: the kind of lease and the name, or names, it holds.
#[derive(Debug, Clone, Copy)]
pub enum Leased<'a> {
    /// The lock of a name: one holder at a time.
    Lock(&'a LockName),
    /// One grant of a kind kept as a set of grants (see [`GrantSetKind`](super::GrantSetKind)):
    /// a read/write lock's reader (kept beside the lock), a semaphore's permit.
    /// `limit` grants at once for a limited kind; the limit matters to acquire only.
    Grant(GrantsOf, &'a LockName, u32),
    /// A set of locks held together, all or none: sorted, distinct, at least two (see
    /// [`multi`](super::multi)).
    Set(&'a [LockName]),
}

/// What each kind of lease is called in logs and waiting lines ([`Leased::kind`]).
pub mod kinds {
    pub const LOCK: &str = "lock";
    pub const SET: &str = "multi";
}

impl<'a> Leased<'a> {
    /// What the lease is called in logs and waiting lines.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Lock(_) => kinds::LOCK,
            Self::Grant(of, ..) => of.label,
            Self::Set(_) => kinds::SET,
        }
    }

    /// What one such lease is called in messages to clients: a lock, a multi-lock, or its
    /// kind's noun (a shared lock, a semaphore).
    pub fn noun(self) -> &'static str {
        match self {
            Self::Lock(_) => "lock",
            Self::Grant(of, ..) => of.noun,
            Self::Set(_) => "multi-lock",
        }
    }

    /// The name the lease is known by: its name, or a set's first (where a set waits).
    pub fn name(self) -> &'a LockName {
        match self {
            Self::Lock(name) | Self::Grant(_, name, _) => name,
            Self::Set(names) => &names[0],
        }
    }

    /// Whether a grant excludes every other grant of its name (a lock, a set), rather than
    /// being one of several held at once (shared grants, permits). After a hand-off the next
    /// waiter of an excluding kind waits for a release; of another kind it may try at once.
    pub fn excludes_others(self) -> bool {
        matches!(self, Self::Lock(_) | Self::Set(_))
    }

    /// The names a grant holds when there are several (a set), for the answers that list
    /// them.
    pub fn held_names(self) -> Option<&'a [LockName]> {
        match self {
            Self::Set(names) => Some(names),
            _ => None,
        }
    }

    /// How the kind marks its tokens, so that a renewal or release through another route
    /// finds its way (a shared grant through `/locks/{name}`), or is refused (one name of a
    /// set). The engine adds the marks of the request (holder, hold bound).
    pub fn marks(self) -> Marks {
        Marks {
            shared: matches!(self, Self::Grant(of, ..) if of.beside_lock()),
            multi: matches!(self, Self::Set(_)),
            set: match self {
                Self::Set(names) => {
                    Some(super::marks::set_digest(names.iter().map(LockName::as_str)))
                }
                _ => None,
            },
            ..Marks::default()
        }
    }
}

/// What a feed of [`LeaseStore::watch`](super::LeaseStore::watch) announces.
#[derive(Debug, Clone, Copy)]
pub enum Watched<'a> {
    /// The releases that may let a waiter of the lease in: a lock's release (and its
    /// readers'), a permit given back; for a set, the release of any of its names.
    Releases(Leased<'a>),
    /// This gateway's waiters of the lease coming to the head of the line the store keeps for
    /// them, for a kind whose waiters of every gateway wait in one line (a fair lock, see
    /// [`queue`](super::queue)); never, for any other.
    Turn(Leased<'a>),
    /// The grants of the lock of a name, by any gateway.
    Grants(&'a LockName),
}

/// How a store keeps a lease once granted, which is all its renewal, release and
/// withdrawal depend on: the lock of a name, one of a name's set of grants (shared grants
/// are kept as a set beside the lock), or a set of locks.
#[derive(Debug, Clone, Copy)]
pub enum Kept<'a> {
    Lock(&'a str),
    Grant(GrantsOf, &'a str),
    Set(&'a [LockName]),
}

impl<'a> Leased<'a> {
    /// How a store keeps this lease (see [`Kept`]).
    pub fn kept(self) -> Kept<'a> {
        match self {
            Self::Lock(name) => Kept::Lock(name.as_str()),
            Self::Grant(of, name, _) => Kept::Grant(of, name.as_str()),
            Self::Set(names) => Kept::Set(names),
        }
    }
}

/// The lease operations of [`LeaseStore`](super::LeaseStore) (acquire, renew, release,
/// withdraw; a writer's hold-off of readers and leaving a fair queue, which only a lock has)
/// for a store that keeps each kind of lease in a module of its own, with functions named by
/// kind: `acquire_lock`, `acquire_grant` (with its [`GrantsOf`]) and
/// `acquire_all`; then, by how the lease is kept ([`Kept`]), `…_lock`, `…_grant` (with its
/// [`GrantsOf`]) and `…_all` for `renew`, `release` and `withdraw` (a reentrant lock's
/// re-entry is a renewal of the lock, `renew_lock`); `hold_off_beside` and `leave_queue`.
/// Names are taken as `&str`, a set's names as `&[LockName]`. The dispatch from a [`Leased`]
/// to its kind's function, written once for the memory and the Redis stores.
macro_rules! lease_operations_by_kind {
    () => {
        async fn acquire(
            &self,
            leased: Leased<'_>,
            attempt: GrantAttempt<'_>,
        ) -> Result<AcquireOutcome, BackendError> {
            match leased {
                Leased::Lock(name) => self.acquire_lock(name.as_str(), attempt).await,
                Leased::Grant(of, name, limit) => {
                    self.acquire_grant(of, name.as_str(), limit, attempt).await
                }
                Leased::Set(names) => self.acquire_all(names, attempt).await,
            }
        }

        /// A waiting lock keeps new grants of the set beside it out (`hold_off_beside`);
        /// nothing overtakes any other kind.
        async fn hold_off(
            &self,
            leased: Leased<'_>,
            wait: Option<std::time::Duration>,
        ) -> Result<(), BackendError> {
            match leased {
                Leased::Lock(name) => self.hold_off_beside(name.as_str(), wait).await,
                _ => Ok(()),
            }
        }

        /// Only a fair lock's waiters wait in a line the store keeps (`leave_queue`).
        async fn leave(&self, leased: Leased<'_>, waiter: u64) -> Result<(), BackendError> {
            match leased {
                Leased::Lock(name) => self.leave_queue(name.as_str(), waiter).await,
                _ => Ok(()),
            }
        }

        $crate::backend::lease::by_kept! {
            renew(renewal: RenewAttempt<'_>) -> RenewOutcome
                => renew_lock, renew_grant, renew_all;
            release(token: &str) -> ReleaseOutcome
                => release_lock, release_grant, release_all;
            withdraw(withdrawal: $crate::backend::Withdrawal<'_>) -> bool
                => withdraw_lock, withdraw_grant, withdraw_all;
        }
    };
}
pub(crate) use lease_operations_by_kind;

/// The operations on a lease already granted, each sent by how the lease is kept (see
/// [`Kept`]) to the store's function for a lock, a grant or a set.
macro_rules! by_kept {
    ($($op:ident($arg:ident: $ty:ty) -> $out:ty => $lock:ident, $grant:ident, $all:ident;)*) => {
        $(async fn $op(&self, leased: Leased<'_>, $arg: $ty) -> Result<$out, BackendError> {
            match leased.kept() {
                $crate::backend::lease::Kept::Lock(name) => self.$lock(name, $arg).await,
                $crate::backend::lease::Kept::Grant(of, name) => self.$grant(of, name, $arg).await,
                $crate::backend::lease::Kept::Set(names) => self.$all(names, $arg).await,
            }
        })*
    };
}
pub(crate) use by_kept;
