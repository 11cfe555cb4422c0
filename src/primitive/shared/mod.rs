//! Read/write locks: the lock's shared mode (`"mode": "shared"` on `/locks/{name}`), many
//! readers at once, each with a lease (token, fence, ttl) of its own, excluding the exclusive
//! lock of the same name (the writer) and excluded by it.
//!
//! This folder is the read/write lock's: the [`Shared`] grant the lease engine is asked for,
//! and how the stores keep the readers ([`store`]: a set of grants kept beside the lock, its
//! Redis scripts beside it). The lock's routes take the mode (`http/handlers/{locks,hold}.rs`),
//! and the composition root registers the readers as the set kept beside the lock
//! ([`register`], one line in `app.rs`), so that the lock's inspection shows them
//! (`shared_holders`) and its revoke takes them too. Everything else a lease has comes from
//! the engine unchanged.

pub mod store;

use crate::backend::Leased;
use crate::lock::{LockName, LockService, Primitive};

pub use self::store::READERS;

/// Registers the read/write lock with the lease engine: its readers are the set kept beside
/// the lock (see `LockService::keeping_beside_lock`).
pub fn register(service: LockService) -> LockService {
    service.keeping_beside_lock(&READERS)
}

/// A shared (read) grant of a read/write lock: many at once, each a lease with its own token,
/// fence and ttl; none while the exclusive lock (the writer, `lock::Exclusive`) is held, and
/// the writer only once every reader has gone (see [`store`]). Its tokens are marked, so
/// renewing or releasing one through `/locks/{name}` finds its way here. Waiting readers form
/// their own line per gateway, woken by a writer's release or the last reader's.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shared;

impl Primitive for Shared {
    fn leased<'a>(&'a self, name: &'a LockName) -> Leased<'a> {
        Leased::Grant(&READERS, name, 0)
    }
}
