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
