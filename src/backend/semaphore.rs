//! Counting semaphores: at most `limit` grants (permits) of one name at a time, each a lease
//! of its own with a token `<stem>.<fence>`, renewed and released by its holder alone.
//!
//! The contract is [`super::LeaseStore`]'s, one permit at a time: acquire takes a permit
//! if fewer than `limit` are held (finding its own again on an idempotent retry), renew and
//! release act on the permit a token holds, withdraw undoes an undelivered grant. Expired
//! permits are reclaimed by the next operation on the name: no sweeper is needed for the count
//! to be right. The limit belongs to the current holders: the first grant of a free semaphore
//! sets it, and a request that names another while permits are held is refused
//! ([`AcquireOutcome::LimitDiffers`](super::AcquireOutcome::LimitDiffers)), so two deployments
//! that disagree cannot both be right at once.
//!
//! Fences come from the same counter as the lock's (per server, or per hash slot in a
//! Cluster): strictly increasing per name in grant order, across every permit.
//!
//! How each store keeps a semaphore: [`super::redis`] in a sorted set of tokens scored by
//! expiry and a hash beside it (see `docs/api.md`, "Semaphores"); [`super::memory`] in a map.
//! Redlock does not offer semaphores (see [`Backend::offers`](super::Backend::offers)).
