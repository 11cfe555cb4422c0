//! [`Primitive`]: one kind of lease, as the lease engine sees it.
//!
//! The lease engine ([`super::service::LockService`]) owns everything every kind of lease has
//! in common: token stems and idempotency claims, validity accounting, replica requirements,
//! withdrawal of undelivered grants, waiting in line without polling, renewal, and the hold
//! stream's watchdog ([`super::hold`]). A primitive only says what the store keeps for a lease
//! on a name: a [`Leased`] value, which carries what the engine needs to know of the kind
//! (its label, whether a grant excludes every other, how its tokens are marked) as data. The
//! store does the rest, one module per kind (see `backend::lease`).
//!
//! A primitive is a value: one with parameters (a semaphore's number of permits, a set's
//! names) carries them, and the engine hands it back for every operation of the same request.
//! Adding one is a type implementing this trait, its [`Leased`] variant and its arm in each
//! store, and its routes in `http` (see docs/architecture.md).

use super::LockName;
use crate::backend::Leased;

/// One kind of lease.
pub trait Primitive: Clone + Send + Sync + Unpin + std::fmt::Debug + 'static {
    /// What the store keeps for a lease of this primitive on `name` (a set ignores `name`,
    /// which is its first).
    fn leased<'a>(&'a self, name: &'a LockName) -> Leased<'a>;
}

/// The lock of a name: at most one grant at a time. It is also the writer of a read/write
/// lock: the readers (`primitive::shared::Shared`) and it exclude each other.
#[derive(Debug, Clone, Copy, Default)]
pub struct Exclusive;

impl Primitive for Exclusive {
    fn leased<'a>(&'a self, name: &'a LockName) -> Leased<'a> {
        Leased::Lock(name)
    }
}
