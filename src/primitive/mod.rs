//! The kinds of lease beyond the lock, one folder each: what the lease engine is asked to
//! grant, what anyone may see of one, its bodies, its routes and handlers. The engine
//! ([`crate::lock`]) and the stores ([`crate::backend`]) speak of leases in general; a kind's
//! folder says what is its own. A kind with routes of its own registers their group in the
//! route table's list (`http/mod.rs`, `ROUTE_GROUPS`): one line.
//!
//! * [`semaphore`]: counting semaphores, `/semaphores/{name}`;
//! * [`shared`]: read/write locks, the lock's shared mode (`"mode": "shared"`), whose readers
//!   the stores keep beside the lock.
//!
//! The lock itself, multi-locks, fair and reentrant locks still live in `lock` and `http`, and
//! the lock's routes take the read/write mode (see docs/architecture.md, "Adding a
//! primitive", for what is where).

pub mod semaphore;
pub mod shared;

/// Builds every kind's Redis scripts now (each is built on its first use otherwise): a
/// connection is given every script built so far (`backend::redis::scripts::load_all`), so a
/// gateway's first connections then load the same scripts whatever this process did before.
/// The deterministic simulation runs many gateways in one process, and a seed must replay
/// alike after other seeds and alone (it did not: a seed's world loaded fewer scripts at first
/// when it ran first, and failed only after others). Cheap: a few KiB of text, once.
pub fn build_redis_scripts() {
    std::sync::LazyLock::force(shared::store::READERS.scripts);
    std::sync::LazyLock::force(semaphore::store::PERMITS.scripts);
}
