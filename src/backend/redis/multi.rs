//! Multi-locks on Redis: the [`MultiBackend`] contract in scripts (`multi_*.lua`) over the
//! ordinary keys of each name (lock key, holder key) and the claim key of the set's first
//! name. One script per operation, so in a Cluster every name must be in one slot.

use std::time::Duration;

use redis::Value;

use super::RedisBackend;
use super::cluster::slot;
use super::keys::{Counters, Key};
use super::replies::{acquire_outcome, protocol, renew_outcome};
use super::scripts::{MULTI_ACQUIRE, MULTI_RELEASE, MULTI_RENEW};
use super::send::evalsha;
use crate::backend::GrantAttempt;
use crate::backend::multi::MultiBackend;
use crate::backend::{
    AcquireOutcome, BackendError, Claim, Holder, ReleaseOutcome, RenewOutcome, ReplicaAck, millis,
};

fn claim_arg(claim: Option<Claim>) -> String {
    claim.map(|Claim(id)| id.to_string()).unwrap_or_default()
}

impl RedisBackend {
    /// Whether one script can reach all of `names` (a Cluster needs them in one slot).
    pub fn same_slot(&self, names: &[&str]) -> bool {
        self.counters == Counters::One
            || names.windows(2).all(|pair| slot(pair[0]) == slot(pair[1]))
    }

    /// Each name's lock key and holder key, in order.
    fn lock_and_holder_keys<'a>(&'a self, names: &[&'a str]) -> Vec<Key<'a>> {
        names
            .iter()
            .flat_map(|name| {
                let keys = self.keys(name);
                [keys.lock(), keys.holder()]
            })
            .collect()
    }

    /// `multi_release.lua`: release for `token`, or withdraw for `stem` and `claim`.
    async fn remove_all(
        &self,
        names: &[&str],
        token: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<i64, BackendError> {
        let first = names.first().copied().unwrap_or_default();
        let mut keys = vec![self.keys(first).claim()];
        keys.extend(self.lock_and_holder_keys(names));
        let mut call = evalsha(&MULTI_RELEASE, &keys);
        call.arg(token).arg(stem).arg(claim_arg(claim));
        self.script::<i64>(&MULTI_RELEASE, &call).await
    }
}

impl MultiBackend for RedisBackend {
    async fn acquire_all(
        &self,
        names: &[&str],
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let (stem, ttl, ack, claim, holder) = attempt.parts();
        let first = names.first().copied().unwrap_or_default();
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

    async fn renew_all(
        &self,
        names: &[&str],
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<RenewOutcome, BackendError> {
        let first = names.first().copied().unwrap_or_default();
        let mut call = evalsha(&MULTI_RENEW, &self.lock_and_holder_keys(names));
        call.arg(token).arg(millis(ttl));
        let (reply, acked) = self
            .run_lease_script::<i64>(first, &MULTI_RENEW, &call, ack)
            .await?;
        renew_outcome("multi_renew", reply, token, ttl, acked)
    }

    async fn release_all(
        &self,
        names: &[&str],
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        match self.remove_all(names, token, "", None).await? {
            1 => Ok(ReleaseOutcome::Released),
            0 => Ok(ReleaseOutcome::NotHeld),
            -1 => Ok(ReleaseOutcome::NotOwner),
            other => Err(protocol("multi_release", other)),
        }
    }

    async fn withdraw_all(
        &self,
        names: &[&str],
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        Ok(self.remove_all(names, "", stem, claim).await? == 1)
    }
}
