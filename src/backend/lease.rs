//! [`Leased`]: what a lease operation acts on, whatever the kind of lease.
//!
//! Every store keeps several kinds of lease: the lock of a name, the shared grants of a
//! read/write lock, the permits of a semaphore, a set of locks held together. They differ in
//! how a store keeps them and in nothing the lease engine does with them: each is acquired
//! with a [`GrantAttempt`](super::GrantAttempt), renewed, released and withdrawn by its token
//! or stem, and announced to waiters when it is given back. So the contract
//! ([`LeaseStore`](super::LeaseStore)) takes the kind as a value, and each store answers each
//! kind in its own module. A new kind of lease is a variant here and one arm per store.
//!
//! What the engine needs to know of a kind (its label, whether a grant excludes every other,
//! how its tokens are marked) is data of the variant, below, not code of the engine.

use super::fence::Marks;
use crate::name::LockName;

/// What a lease operation acts on: the kind of lease and the name, or names, it holds.
#[derive(Debug, Clone, Copy)]
pub enum Leased<'a> {
    /// The lock of a name: one holder at a time.
    Lock(&'a LockName),
    /// A shared grant of a read/write lock: many at once, none while the lock is held
    /// (see [`shared`](super::shared)).
    Shared(&'a LockName),
    /// A permit of a semaphore of `limit` permits; the limit matters to acquire only (see
    /// [`semaphore`](super::semaphore)).
    Permit(&'a LockName, u32),
    /// A set of locks held together, all or none: sorted, distinct, at least two (see
    /// [`multi`](super::multi)).
    Set(&'a [LockName]),
}

impl<'a> Leased<'a> {
    /// What the lease is called in logs and waiting lines.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Lock(_) => "lock",
            Self::Shared(_) => "shared",
            Self::Permit(..) => "semaphore",
            Self::Set(_) => "multi",
        }
    }

    /// What one such lease is called in messages to clients: a lock, a shared lock, a
    /// semaphore (whose leases are permits), a multi-lock.
    pub fn noun(self) -> &'static str {
        match self {
            Self::Lock(_) => "lock",
            Self::Shared(_) => "shared lock",
            Self::Permit(..) => "semaphore",
            Self::Set(_) => "multi-lock",
        }
    }

    /// The name the lease is known by: its name, or a set's first (where a set waits).
    pub fn name(self) -> &'a LockName {
        match self {
            Self::Lock(name) | Self::Shared(name) | Self::Permit(name, _) => name,
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
            shared: matches!(self, Self::Shared(_)),
            multi: matches!(self, Self::Set(_)),
            ..Marks::default()
        }
    }
}
