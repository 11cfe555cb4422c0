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

use redis::Value;

use super::RedisBackend;
use super::replies::{acquire_outcome, permit_views, protocol, renew_outcome};
use super::scripts::{PERMIT_ACQUIRE, PERMIT_INSPECT, PERMIT_RELEASE, PERMIT_RENEW};
use super::send::{claim_arg, evalsha};
use crate::backend::semaphore::Permits;
use crate::backend::{
    AcquireOutcome, BackendError, Claim, Holder, ReleaseOutcome, RenewOutcome, millis,
};
use crate::backend::{GrantAttempt, RenewAttempt};

impl RedisBackend {
    /// `permit_release.lua` for `token`, or for the permit of `stem` and `claim`.
    async fn remove_permit(
        &self,
        name: &str,
        token: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        let keys = self.keys(name);
        let mut call = evalsha(&PERMIT_RELEASE, &[keys.permits(), keys.semaphore()]);
        call.arg(token)
            .arg(keys.permits_channel())
            .arg(stem)
            .arg(claim_arg(claim));
        match self.script::<i64>(&PERMIT_RELEASE, &call).await? {
            released @ (0 | 1) => Ok(released == 1),
            other => Err(protocol("permit_release", other)),
        }
    }
}

impl RedisBackend {
    pub(super) async fn acquire_permit(
        &self,
        name: &str,
        limit: u32,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let (stem, ttl, ack, claim, holder) = attempt.parts();
        let keys = self.keys(name);
        let mut call = evalsha(
            &PERMIT_ACQUIRE,
            &[keys.permits(), keys.counter(), keys.semaphore()],
        );
        let holder = holder.filter(|h| !h.is_empty());
        call.arg(stem)
            .arg(millis(ttl))
            .arg(limit)
            .arg(claim_arg(claim))
            .arg(holder.map(Holder::fields).unwrap_or_default());
        let (reply, acked) = self
            .run_lease_script::<Value>(name, &PERMIT_ACQUIRE, &call, ack)
            .await?;
        acquire_outcome("permit_acquire", reply, ttl, acked)
    }

    pub(super) async fn renew_permit(
        &self,
        name: &str,
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        let RenewAttempt { token, ttl, ack } = renewal;
        let keys = self.keys(name);
        let mut call = evalsha(&PERMIT_RENEW, &[keys.permits(), keys.semaphore()]);
        call.arg(token).arg(millis(ttl));
        let (reply, acked) = self
            .run_lease_script::<i64>(name, &PERMIT_RENEW, &call, ack)
            .await?;
        renew_outcome("permit_renew", reply, token, ttl, acked)
    }

    pub(super) async fn release_permit(
        &self,
        name: &str,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        Ok(if self.remove_permit(name, token, "", None).await? {
            ReleaseOutcome::Released
        } else {
            ReleaseOutcome::NotHeld
        })
    }

    pub(super) async fn withdraw_permit(
        &self,
        name: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        self.remove_permit(name, "", stem, claim).await
    }

    pub(super) async fn permits_of(&self, name: &str) -> Result<Permits, BackendError> {
        let keys = self.keys(name);
        let call = evalsha(&PERMIT_INSPECT, &[keys.permits(), keys.semaphore()]);
        let reply: Vec<String> = self.script(&PERMIT_INSPECT, &call).await?;
        let Some((limit, rest)) = reply.split_first() else {
            return Err(protocol("permit_inspect", "an empty reply"));
        };
        let permits = permit_views("permit_inspect", rest)?;
        Ok(Permits {
            limit: limit.parse().ok().filter(|_| !permits.is_empty()),
            permits,
        })
    }
}
