//! The lock operations on Redis, in scripts, or native commands where the server has them
//! (see `features`).

use std::time::Duration;

use super::RedisBackend;
use super::features::{Downgradable, ReleaseVia, RenewVia};
use super::grants::{claim_and_holder, release_outcome};
use super::keys::LockKeys;
use super::scripts::{ACQUIRE, FINALIZE, RELEASE, RENEW, WITHDRAW};
use super::send::{Request, claim_arg, evalsha};
use crate::backend::fence::{Marks, fence_of};
use crate::backend::{
    AcquireOutcome, BackendError, Claim, Lease, ReleaseFeed, ReleaseOutcome, RenewOutcome, millis,
};
use crate::backend::{GrantAttempt, RenewAttempt};

impl RedisBackend {
    /// Gives the grant of `stem` the token `<stem>.<fence>` and lifts the fence counter to
    /// `fence` (Redlock; see `finalize.lua`). False when the node no longer holds it.
    pub async fn finalize(&self, name: &str, stem: &str, fence: u64) -> Result<bool, BackendError> {
        let keys = self.keys(name);
        let mut call = evalsha(&FINALIZE, &[keys.lock(), keys.counter(), keys.holder()]);
        call.arg(stem).arg(fence);
        self.script::<i64>(&FINALIZE, &call).await.map(|n| n == 1)
    }

    /// Releases of the lock `name` (by its holder, its last reader, or an expiry announced by
    /// keyspace notifications).
    pub(super) async fn watch_lock_releases(&self, name: &str) -> ReleaseFeed {
        self.notifier.watch(self.keys(name).lock_string()).await
    }

    /// The token last revoked on `name`, while its lease would still run.
    pub(super) async fn revoked_token(&self, name: &str) -> Result<Option<Vec<u8>>, BackendError> {
        let mut pipe = redis::pipe();
        pipe.cmd("GET").arg(self.keys(name).revoked());
        let (revoked,): (Option<Vec<u8>>,) = self.run(Request::Native(&pipe)).await?;
        Ok(revoked)
    }

    async fn release_natively(
        &self,
        keys: LockKeys<'_>,
        token: &str,
        via: ReleaseVia,
    ) -> Result<Option<ReleaseOutcome>, BackendError> {
        let mut pipe = redis::pipe();
        match via {
            ReleaseVia::DelIfEq => pipe.cmd("DELIFEQ").arg(keys.lock()).arg(token),
            ReleaseVia::DelEx => pipe.cmd("DELEX").arg(keys.lock()).arg("IFEQ").arg(token),
            ReleaseVia::Lua => return Ok(None),
        };
        // Announced also when nothing was deleted: a spurious wake-up costs a waiter one look.
        pipe.cmd("PUBLISH").arg(keys.channel()).arg("").ignore();
        let refused = |state: &Downgradable| state.release_refused();
        let Some((deleted,)) = self.native::<(i64,)>(&pipe, refused).await? else {
            return Ok(None);
        };
        if deleted == 1 {
            return Ok(Some(ReleaseOutcome::Released));
        }
        // Not deleted: nobody holds it, or another token does. (Whatever holds it now answers
        // for the instant of this look, which is within the request.)
        let mut look = redis::pipe();
        look.cmd("EXISTS").arg(keys.lock());
        let refused_look = |_: &Downgradable| {};
        let exists = self.native::<(bool,)>(&look, refused_look).await?;
        Ok(Some(match exists {
            Some((true,)) => ReleaseOutcome::NotOwner,
            _ => ReleaseOutcome::NotHeld,
        }))
    }

    async fn renew_natively(
        &self,
        keys: LockKeys<'_>,
        token: &str,
        fence: u64,
        ttl: Duration,
    ) -> Result<Option<RenewOutcome>, BackendError> {
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(keys.lock())
            .arg(token)
            .arg("IFEQ")
            .arg(token)
            .arg("PX")
            .arg(millis(ttl))
            .arg("GET");
        // The holder record, if the token says the grant has one, keeps the lock's ttl. Not
        // atomic with the renewal, hence GT: it can only lengthen a record's life (by at most
        // one ttl, if this token no longer holds the lock), never cut short the record of a
        // live grant.
        if Marks::of(token).holder {
            pipe.cmd("PEXPIRE")
                .arg(keys.holder())
                .arg(millis(ttl))
                .arg("GT")
                .ignore();
        }
        let refused = |state: &Downgradable| state.renew_refused();
        let Some((previous,)) = self.native::<(Option<Vec<u8>>,)>(&pipe, refused).await? else {
            return Ok(None);
        };
        Ok(Some(match previous {
            None => RenewOutcome::NotHeld,
            Some(held) if held == token.as_bytes() => RenewOutcome::Renewed(Lease {
                fence,
                ttl,
                replicas_acked: None,
            }),
            Some(_) => RenewOutcome::NotOwner,
        }))
    }
}

impl RedisBackend {
    /// Takes the lock `name` (see [`crate::backend::LeaseStore::acquire`]).
    pub(crate) async fn acquire_lock(
        &self,
        name: &str,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let (stem, ttl, _, claim, holder) = attempt.parts();
        let keys = self.keys(name);
        let (lock, counter, legacy) = (keys.lock(), keys.counter(), keys.legacy_counter());
        // Without a claim or a holder the script needs neither their keys nor their arguments.
        let bare = claim.is_none() && holder.is_none();
        let mut call = if bare {
            evalsha(&ACQUIRE, &[lock, counter, legacy])
        } else {
            evalsha(
                &ACQUIRE,
                &[lock, counter, legacy, keys.claim(), keys.holder()],
            )
        };
        call.arg(stem).arg(millis(ttl));
        if !bare {
            claim_and_holder(&mut call, claim, holder);
        }
        self.run_grant(name, &ACQUIRE, &call, attempt).await
    }

    /// Releases the lock `name` held by `token`.
    pub(crate) async fn release_lock(
        &self,
        name: &str,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        let keys = self.keys(name);
        let via = self.features().release;
        if via != ReleaseVia::Lua
            && let Some(outcome) = self.release_natively(keys, token, via).await?
        {
            return Ok(outcome);
        }
        let mut call = if Marks::of(token).holder {
            evalsha(&RELEASE, &[keys.lock(), keys.holder()])
        } else {
            evalsha(&RELEASE, &[keys.lock()])
        };
        call.arg(token).arg(keys.channel());
        release_outcome(&RELEASE, self.script::<i64>(&RELEASE, &call).await?)
    }

    /// Withdraws the grant of the lock `name` to a token of `stem`.
    pub(crate) async fn withdraw_lock(
        &self,
        name: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        let keys = self.keys(name);
        let mut call = if Marks::of(stem).holder {
            evalsha(&WITHDRAW, &[keys.lock(), keys.claim(), keys.holder()])
        } else {
            evalsha(&WITHDRAW, &[keys.lock(), keys.claim()])
        };
        call.arg(stem).arg(keys.channel()).arg(claim_arg(claim));
        self.script::<i64>(&WITHDRAW, &call)
            .await
            .map(|withdrawn| withdrawn == 1)
    }

    /// Renews the lock `name` held by `token`.
    pub(crate) async fn renew_lock(
        &self,
        name: &str,
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        let RenewAttempt { token, ttl, ack } = renewal;
        let keys = self.keys(name);
        let Some(carried) = fence_of(token) else {
            // Tokens are checked to be of the issued shape where they enter (`LockToken`): one
            // without a fence holds nothing here.
            return Ok(RenewOutcome::NotOwner);
        };
        if ack.is_none()
            && self.features().renew == RenewVia::SetIfEq
            && let Some(outcome) = self.renew_natively(keys, token, carried, ttl).await?
        {
            return Ok(outcome);
        }
        if Marks::of(token).holder {
            (self.renew_by(name, &RENEW, &[keys.lock(), keys.holder()], renewal)).await
        } else {
            self.renew_by(name, &RENEW, &[keys.lock()], renewal).await
        }
    }
}
