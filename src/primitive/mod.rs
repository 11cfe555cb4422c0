//! The kinds of lease beyond the lock, one folder each: what the lease engine is asked to
//! grant, what anyone may see of one, its bodies, its routes and handlers. The engine
//! ([`crate::lock`]) and the stores ([`crate::backend`]) speak of leases in general; a kind's
//! folder says what is its own. A kind with routes of its own registers their group in the
//! route table's list (`http/mod.rs`, `ROUTE_GROUPS`): one line.
//!
//! * [`semaphore`]: counting semaphores, `/semaphores/{name}`.
//!
//! The lock itself, its read/write mode, multi-locks, fair and reentrant locks still live in
//! `lock` and `http` (see docs/architecture.md, "Adding a primitive", for what is where).

pub mod semaphore;
