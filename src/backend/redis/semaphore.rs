//! Semaphores on Redis, in scripts (`permit_*.lua`). Per
//! name, two keys in the name's hash slot:
//!
//! * `<prefix>{<name>}:permits`, a sorted set: one member per permit, its token, scored by
//!   the permit's expiry (ms, Redis `TIME`);
//! * `<prefix>{<name>}:semaphore`, a hash: `limit`, `claim:<stem>` for idempotent grants,
//!   `holder:<token>` for permits that name a holder.
//!
//! Both expire with the permit that runs longest; the last release deletes them. Expired
//! members are reclaimed by the next acquire. `redis-cli ZRANGE <key> 0 -1 WITHSCORES` shows
//! the permits, `HGETALL` the rest.

use super::RedisBackend;
use super::scripts::PERMIT_ACQUIRE;
use crate::backend::{AcquireOutcome, BackendError, GrantAttempt};

impl RedisBackend {
    pub(super) async fn acquire_permit(
        &self,
        name: &str,
        limit: u32,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let keys = self.keys(name);
        let keys = [keys.permits(), keys.counter(), keys.semaphore()];
        self.grant(name, &PERMIT_ACQUIRE, &keys, Some(limit), attempt)
            .await
    }
}
