//! The lock operations on Redis, in scripts, or native commands where the server has them
//! (see `features`); and the [`LeaseStore`] contract of the Redis backend, which hands the
//! other kinds of lease to their modules (`shared`, `semaphore`, `multi`).

use std::time::{Duration, Instant};

use redis::Value;

use super::RedisBackend;
use super::features::{Downgradable, ReleaseVia, RenewVia};
use super::keys::LockKeys;
use super::replies::{acquire_outcome, pttl, renew_outcome};
use super::scripts::{ACQUIRE, FINALIZE, INSPECT, RELEASE, RENEW, REVOKE, WITHDRAW};
use super::send::{Request, claim_arg, evalsha};
use crate::backend::fence::{Marks, fence_of};
use crate::backend::listing;
use crate::backend::{
    AcquireOutcome, BackendError, Claim, Holder, Inspection, Lease, LeaseStore, Leased, ListCursor,
    ListPage, PermitView, Permits, ReleaseFeed, ReleaseOutcome, RenewOutcome, millis,
};
use crate::backend::{GrantAttempt, RenewAttempt};
use crate::telemetry::metrics::RedisCall;

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
    async fn watch_lock_releases(&self, name: &str) -> ReleaseFeed {
        self.notifier.watch(self.keys(name).lock_string()).await
    }

    /// The token last revoked on `name`, while its lease would still run.
    async fn revoked_token(&self, name: &str) -> Result<Option<Vec<u8>>, BackendError> {
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

fn unexpected(script: &str, reply: &[i64]) -> BackendError {
    BackendError::Protocol(format!("{script} script replied {reply:?}"))
}

impl RedisBackend {
    /// Takes the lock `name` (see [`LeaseStore::acquire`]).
    pub(crate) async fn acquire_lock(
        &self,
        name: &str,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let (stem, ttl, ack, claim, holder) = attempt.parts();
        let keys = self.keys(name);
        let (lock, counter, legacy) = (keys.lock(), keys.counter(), keys.legacy_counter());
        let holder = holder.filter(|h| !h.is_empty());
        let mut call = if claim.is_none() && holder.is_none() {
            evalsha(&ACQUIRE, &[lock, counter, legacy])
        } else {
            let keys = [lock, counter, legacy, keys.claim(), keys.holder()];
            evalsha(&ACQUIRE, &keys)
        };
        call.arg(stem).arg(millis(ttl));
        if claim.is_some() || holder.is_some() {
            call.arg(claim_arg(claim))
                .arg(holder.map(Holder::fields).unwrap_or_default());
        }
        let (reply, acked) = self
            .run_lease_script::<Value>(name, &ACQUIRE, &call, ack)
            .await?;
        acquire_outcome("acquire", reply, ttl, acked)
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
        match self.script::<i64>(&RELEASE, &call).await? {
            1 => Ok(ReleaseOutcome::Released),
            0 => Ok(ReleaseOutcome::NotHeld),
            -1 => Ok(ReleaseOutcome::NotOwner),
            other => Err(unexpected("release", &[other])),
        }
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
        let mut call = if Marks::of(token).holder {
            evalsha(&RENEW, &[keys.lock(), keys.holder()])
        } else {
            evalsha(&RENEW, &[keys.lock()])
        };
        call.arg(token).arg(millis(ttl));
        let (reply, acked) = self
            .run_lease_script::<i64>(name, &RENEW, &call, ack)
            .await?;
        renew_outcome("renew", reply, token, ttl, acked)
    }
}

impl LeaseStore for RedisBackend {
    async fn acquire(
        &self,
        leased: Leased<'_>,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        match leased {
            Leased::Lock(name) => self.acquire_lock(name.as_str(), attempt).await,
            Leased::Shared(name) => self.acquire_shared(name.as_str(), attempt).await,
            Leased::Permit(name, limit) => self.acquire_permit(name.as_str(), limit, attempt).await,
            Leased::Set(names) => self.acquire_all(names, attempt).await,
        }
    }

    async fn renew(
        &self,
        leased: Leased<'_>,
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        match leased {
            Leased::Lock(name) => self.renew_lock(name.as_str(), renewal).await,
            Leased::Shared(name) => self.renew_shared(name.as_str(), renewal).await,
            Leased::Permit(name, _) => self.renew_permit(name.as_str(), renewal).await,
            Leased::Set(names) => self.renew_all(names, renewal).await,
        }
    }

    async fn release(
        &self,
        leased: Leased<'_>,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        match leased {
            Leased::Lock(name) => self.release_lock(name.as_str(), token).await,
            Leased::Shared(name) => self.release_shared(name.as_str(), token).await,
            Leased::Permit(name, _) => self.release_permit(name.as_str(), token).await,
            Leased::Set(names) => self.release_all(names, token).await,
        }
    }

    async fn withdraw(
        &self,
        leased: Leased<'_>,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        match leased {
            Leased::Lock(name) => self.withdraw_lock(name.as_str(), stem, claim).await,
            Leased::Shared(name) => self.withdraw_shared(name.as_str(), stem, claim).await,
            Leased::Permit(name, _) => self.withdraw_permit(name.as_str(), stem, claim).await,
            Leased::Set(names) => self.withdraw_all(names, stem, claim).await,
        }
    }

    /// A lock's (and its readers') releases; a semaphore's permits given back; any release of
    /// a set's names.
    async fn watch_releases(&self, leased: Leased<'_>) -> ReleaseFeed {
        match leased {
            Leased::Lock(name) | Leased::Shared(name) => {
                self.watch_lock_releases(name.as_str()).await
            }
            Leased::Permit(name, _) => {
                let channel = self.keys(name.as_str()).permits_channel_string();
                self.notifier.watch_channel(&channel).await
            }
            Leased::Set(names) => {
                let mut feeds = Vec::with_capacity(names.len());
                for name in names {
                    feeds.push(self.watch_lock_releases(name.as_str()).await);
                }
                ReleaseFeed::merged(feeds)
            }
        }
    }

    /// Only lockgate writes semaphores, and each of its releases is announced; a lock can be
    /// released by any Redis client, announced only with keyspace notifications on.
    fn sees_every_release(&self, leased: Leased<'_>) -> bool {
        matches!(leased, Leased::Permit(..)) || self.notifier.sees_every_release()
    }

    async fn revoke(&self, name: &str) -> Result<bool, BackendError> {
        let keys = self.keys(name);
        let mut call = evalsha(
            &REVOKE,
            &[
                keys.lock(),
                keys.holder(),
                keys.revoked(),
                keys.readers(),
                keys.readers_info(),
            ],
        );
        call.arg(keys.channel());
        self.script::<i64>(&REVOKE, &call).await.map(|n| n == 1)
    }

    async fn was_revoked(&self, name: &str, token: &str) -> Result<bool, BackendError> {
        Ok(self
            .revoked_token(name)
            .await?
            .is_some_and(|revoked| revoked == token.as_bytes()))
    }

    async fn revoked_fence(&self, name: &str) -> Result<Option<u64>, BackendError> {
        let revoked = self.revoked_token(name).await?;
        Ok(revoked.and_then(|token| fence_of(std::str::from_utf8(&token).ok()?)))
    }

    async fn watch_grants(&self, name: &str) -> ReleaseFeed {
        self.notifier
            .watch_channel(&self.keys(name).acquired_channel())
            .await
    }

    async fn inspect(&self, name: &str) -> Result<Option<Inspection>, BackendError> {
        let keys = self.keys(name);
        let call = evalsha(
            &INSPECT,
            &[keys.lock(), keys.legacy_counter(), keys.holder()],
        );
        let reply: Vec<Value> = self.script(&INSPECT, &call).await?;
        let number = |value: Option<&Value>| match value {
            Some(Value::Int(n)) => Ok(*n),
            other => Err(BackendError::Protocol(format!("inspect script: {other:?}"))),
        };
        let ttl = number(reply.first())?;
        if ttl == -2 {
            return Ok(None);
        }
        let fence = u64::try_from(number(reply.get(1))?).ok();
        let record = match reply.get(2) {
            Some(Value::BulkString(record)) => Some(record.as_slice()),
            _ => None,
        };
        Ok(Some(Inspection {
            ttl: pttl(ttl),
            fence,
            holder: record.and_then(|r| Holder::of_record(r, fence)),
            shared: reply.len() > 3,
        }))
    }

    async fn inspect_shared(&self, name: &str) -> Result<Vec<PermitView>, BackendError> {
        self.readers_of(name).await
    }

    async fn inspect_permits(&self, name: &str) -> Result<Permits, BackendError> {
        self.permits_of(name).await
    }

    async fn hold_off_shared(
        &self,
        name: &str,
        wait: Option<Duration>,
    ) -> Result<(), BackendError> {
        self.hold_off_readers(name, wait).await
    }

    async fn list(
        &self,
        prefix: &str,
        cursor: ListCursor,
        limit: usize,
    ) -> Result<ListPage, BackendError> {
        listing::page(self, prefix, cursor, limit).await
    }

    async fn ping(&self) -> Result<(), BackendError> {
        let started = Instant::now();
        let outcome = self.ping_once().await;
        self.record(RedisCall::Ping, started, &outcome);
        outcome
    }
}
