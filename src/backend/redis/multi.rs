//! Multi-locks on Redis: sets of locks in scripts (`multi_*.lua`) over the
//! ordinary keys of each name (lock key, holder key) and the claim key of the set's first
//! name. One script per operation, so in a Cluster every name must be in one slot.

use redis::Value;

use super::RedisBackend;
use super::cluster::slot;
use super::keys::{Counters, Key};
use super::replies::{acquire_outcome, protocol, renew_outcome};
use super::scripts::{MULTI_ACQUIRE, MULTI_RELEASE, MULTI_RENEW};
use super::send::{claim_arg, evalsha};
use crate::backend::{
    AcquireOutcome, BackendError, Claim, Holder, ReleaseOutcome, RenewOutcome, millis,
};
use crate::backend::{GrantAttempt, RenewAttempt};
use crate::name::LockName;

impl RedisBackend {
    /// Whether one script can reach all of `names` (a Cluster needs them in one slot).
    pub fn same_slot(&self, names: &[LockName]) -> bool {
        self.counters == Counters::One
            || names
                .windows(2)
                .all(|pair| slot(pair[0].as_str()) == slot(pair[1].as_str()))
    }

    /// Each name's lock key and holder key, in order.
    fn lock_and_holder_keys<'a>(&'a self, names: &'a [LockName]) -> Vec<Key<'a>> {
        names
            .iter()
            .flat_map(|name| {
                let keys = self.keys(name.as_str());
                [keys.lock(), keys.holder()]
            })
            .collect()
    }

    /// `multi_release.lua`: release for `token`, or withdraw for `stem` and `claim`.
    async fn remove_all(
        &self,
        names: &[LockName],
        token: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<i64, BackendError> {
        let first = names.first().map_or("", LockName::as_str);
        let mut keys = vec![self.keys(first).claim()];
        keys.extend(self.lock_and_holder_keys(names));
        let mut call = evalsha(&MULTI_RELEASE, &keys);
        call.arg(token).arg(stem).arg(claim_arg(claim));
        self.script::<i64>(&MULTI_RELEASE, &call).await
    }

    pub(super) async fn acquire_all(
        &self,
        names: &[LockName],
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let (stem, ttl, ack, claim, holder) = attempt.parts();
        let first = names.first().map_or("", LockName::as_str);
        let first_keys = self.keys(first);
        let mut keys = vec![first_keys.counter(), first_keys.claim()];
        keys.extend(self.lock_and_holder_keys(names));
        let mut call = evalsha(&MULTI_ACQUIRE, &keys);
        let holder = holder.filter(|h| !h.is_empty());
        call.arg(stem)
            .arg(millis(ttl))
            .arg(claim_arg(claim))
            .arg(holder.map(Holder::fields).unwrap_or_default());
        let (reply, acked) = self
            .run_lease_script::<Value>(first, &MULTI_ACQUIRE, &call, ack)
            .await?;
        acquire_outcome("multi_acquire", reply, ttl, acked)
    }

    pub(super) async fn renew_all(
        &self,
        names: &[LockName],
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        let RenewAttempt { token, ttl, ack } = renewal;
        let first = names.first().map_or("", LockName::as_str);
        let mut call = evalsha(&MULTI_RENEW, &self.lock_and_holder_keys(names));
        call.arg(token).arg(millis(ttl));
        let (reply, acked) = self
            .run_lease_script::<i64>(first, &MULTI_RENEW, &call, ack)
            .await?;
        renew_outcome("multi_renew", reply, token, ttl, acked)
    }

    pub(super) async fn release_all(
        &self,
        names: &[LockName],
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        match self.remove_all(names, token, "", None).await? {
            1 => Ok(ReleaseOutcome::Released),
            0 => Ok(ReleaseOutcome::NotHeld),
            -1 => Ok(ReleaseOutcome::NotOwner),
            other => Err(protocol("multi_release", other)),
        }
    }

    pub(super) async fn withdraw_all(
        &self,
        names: &[LockName],
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        Ok(self.remove_all(names, "", stem, claim).await? == 1)
    }
}
