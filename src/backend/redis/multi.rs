//! Multi-locks on Redis: sets of locks in scripts (`multi_*.lua`) over the
//! ordinary keys of each name (lock key, holder key) and the claim key of the set's first
//! name. One script per operation, so in a Cluster every name must be in one slot.

use super::RedisBackend;
use super::cluster::slot;
use super::keys::{Counters, Key};
use super::lease_calls::release_outcome;
use super::scripts::{MULTI_ACQUIRE, MULTI_RELEASE, MULTI_RENEW};
use crate::backend::{
    AcquireOutcome, BackendError, Claim, GrantAttempt, ReleaseOutcome, RenewAttempt, RenewOutcome,
    Withdrawal,
};
use crate::name::LockName;

/// The name whose slot the set's scripts run in (all are in one, see [`RedisBackend::same_slot`]).
fn first(names: &[LockName]) -> &str {
    names.first().map_or("", LockName::as_str)
}

impl RedisBackend {
    /// Whether one script can reach all of `names` (a Cluster needs them in one slot).
    pub fn same_slot(&self, names: &[LockName]) -> bool {
        self.counters == Counters::One
            || names
                .windows(2)
                .all(|pair| slot(pair[0].as_str()) == slot(pair[1].as_str()))
    }

    /// `leading` keys, then each name's lock key and holder key, in order.
    fn with_lock_and_holder_keys<'a>(
        &'a self,
        leading: impl IntoIterator<Item = Key<'a>>,
        names: &'a [LockName],
    ) -> Vec<Key<'a>> {
        let mut keys: Vec<Key<'a>> = leading.into_iter().collect();
        keys.extend(names.iter().flat_map(|name| {
            let keys = self.keys(name.as_str());
            [keys.lock(), keys.holder()]
        }));
        keys
    }

    /// `multi_release.lua`: release for `token`, or withdraw for `stem` and `claim`.
    async fn remove_all(
        &self,
        names: &[LockName],
        token: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<i64, BackendError> {
        let keys = self.with_lock_and_holder_keys([self.keys(first(names)).claim()], names);
        (self.remove_by(&MULTI_RELEASE, &keys, None, token, stem, claim)).await
    }

    pub(super) async fn acquire_all(
        &self,
        names: &[LockName],
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let first_keys = self.keys(first(names));
        let keys =
            self.with_lock_and_holder_keys([first_keys.counter(), first_keys.claim()], names);
        (self.grant(first(names), &MULTI_ACQUIRE, &keys, None, attempt)).await
    }

    pub(super) async fn renew_all(
        &self,
        names: &[LockName],
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        let keys = self.with_lock_and_holder_keys([], names);
        (self.renew_by(first(names), &MULTI_RENEW, &keys, renewal)).await
    }

    pub(super) async fn release_all(
        &self,
        names: &[LockName],
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        let removed = self.remove_all(names, token, "", None).await?;
        release_outcome(&MULTI_RELEASE, removed)
    }

    pub(super) async fn withdraw_all(
        &self,
        names: &[LockName],
        withdrawal: Withdrawal<'_>,
    ) -> Result<bool, BackendError> {
        Ok(self
            .remove_all(names, "", withdrawal.stem, withdrawal.claim)
            .await?
            == 1)
    }
}
