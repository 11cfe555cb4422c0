//! The lock operations on Redis, in scripts, or native commands where the server has them
//! (`native.rs`; `features.rs` says which).

use std::time::Duration;

use redis::Value;

use super::RedisBackend;
use super::features::{ReleaseVia, RenewVia};
use super::keys::{Key, LockKeys};
use super::lease_calls::{claim_and_holder, release_outcome};
use super::replies::{acquire_outcome, protocol, pttl};
use super::scripts::{
    ACQUIRE, FAIR_ACQUIRE, FINALIZE, REENTER, REENTRANT_RELEASE, RELEASE, RENEW, REVOKE, WITHDRAW,
};
use super::send::{Request, claim_arg, evalsha};
use crate::backend::fence::{fence_of, held_until_ms};
use crate::backend::marks::Marks;
use crate::backend::{
    AcquireOutcome, BackendError, Lease, ReleaseFeed, ReleaseOutcome, RenewOutcome, Withdrawal,
    millis,
};
use crate::backend::{GrantAttempt, GrantsOf, RenewAttempt};

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
        self.notifier
            .watch(self.keys(name).lock().to_string())
            .await
    }

    /// Deletes the lock on `name` whoever holds it, and with its marker the set `beside` it
    /// (see `revoke.lua`): true if it was held.
    pub(super) async fn revoke_lock(
        &self,
        name: &str,
        beside: Option<GrantsOf>,
    ) -> Result<bool, BackendError> {
        let keys = self.keys(name);
        // The set kept beside the lock goes with its marker (revoke.lua); without one, the
        // script is given four keys.
        let set = beside.map(|of| {
            (
                keys.named(of.tokens_key),
                keys.named(of.info_key),
                keys.named(of.revoked_key),
            )
        });
        let (tokens, info, revoked) = set.unwrap_or((keys.lock(), keys.lock(), keys.lock()));
        let all = [
            keys.lock(),
            keys.holder(),
            keys.revoked(),
            keys.holds(),
            tokens,
            info,
            revoked,
        ];
        let mut call = evalsha(&REVOKE, &all[..if set.is_some() { 7 } else { 4 }]);
        call.arg(keys.channel());
        self.script::<i64>(&REVOKE, &call).await.map(|n| n == 1)
    }

    /// Whether `token` is the one last revoked on the lock `name` (while its lease would
    /// still run).
    pub(super) async fn was_lock_revoked(
        &self,
        name: &str,
        token: &str,
    ) -> Result<bool, BackendError> {
        Ok(self
            .revoked_token(name)
            .await?
            .is_some_and(|revoked| revoked == token.as_bytes()))
    }

    /// The token last revoked on `name`, while its lease would still run.
    pub(super) async fn revoked_token(&self, name: &str) -> Result<Option<Vec<u8>>, BackendError> {
        let mut pipe = redis::pipe();
        pipe.cmd("GET").arg(self.keys(name).revoked());
        let (revoked,): (Option<Vec<u8>>,) = self.run(Request::Native(&pipe)).await?;
        Ok(revoked)
    }
}

/// The lock key and the keys that live as long as the grant of `token`, as its marks say it
/// has them: `[lock, holder]` for a grant with a holder record, `[lock, holds, holder]` for a
/// reentrant one (see `reenter.lua`); the first `n`.
fn grant_keys<'a>(keys: &LockKeys<'a>, marks: Marks) -> ([Key<'a>; 3], usize) {
    let n = 1 + usize::from(marks.holder) + usize::from(marks.reentrant);
    if marks.reentrant {
        ([keys.lock(), keys.holds(), keys.holder()], n)
    } else {
        ([keys.lock(), keys.holder(), keys.holds()], n)
    }
}

/// A reentrant release's reply (`reentrant_release.lua`).
fn reentrant_release_outcome(reply: Value) -> Result<ReleaseOutcome, BackendError> {
    match reply {
        Value::Array(left) => match left.as_slice() {
            [Value::Int(holds)] => Ok(ReleaseOutcome::StillHeld {
                holds: u32::try_from(*holds)
                    .map_err(|_| protocol(REENTRANT_RELEASE.name, holds))?,
            }),
            _ => Err(protocol(REENTRANT_RELEASE.name, format!("{left:?}"))),
        },
        Value::Int(reply) => release_outcome(&REENTRANT_RELEASE, reply),
        other => Err(protocol(REENTRANT_RELEASE.name, format!("{other:?}"))),
    }
}

/// The reply of a release with a minimum hold: as any release's, or `{2, ms}`: left to expire
/// in `ms` (see `release.lua`).
fn min_hold_release_outcome(reply: Value) -> Result<ReleaseOutcome, BackendError> {
    match reply {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(2), Value::Int(ms)] => Ok(ReleaseOutcome::HeldFor {
                left: Duration::from_millis(
                    u64::try_from(*ms).map_err(|_| protocol(RELEASE.name, ms))?,
                ),
            }),
            _ => Err(protocol(RELEASE.name, format!("{items:?}"))),
        },
        Value::Int(reply) => release_outcome(&RELEASE, reply),
        other => Err(protocol(RELEASE.name, format!("{other:?}"))),
    }
}

impl RedisBackend {
    /// Takes the lock `name` (see [`crate::backend::LeaseStore::acquire`]).
    pub(crate) async fn acquire_lock(
        &self,
        name: &str,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let keys = self.keys(name);
        let (lock, counter, queue) = (keys.lock(), keys.counter(), keys.queue());
        // Without a claim or a holder the script needs neither their keys nor their arguments.
        let bare = attempt.claim.is_none() && attempt.holder().is_none();
        let (claim_key, holder_key) = (keys.claim(), keys.holder());
        let Some(place) = attempt.queue else {
            // A plain acquire runs a script without the fair queue's machinery, which every
            // lock cycle of the fleet would otherwise pay Redis for (see `acquire.lua`).
            let all = [lock, counter, queue, claim_key, holder_key];
            let mut call = evalsha(&ACQUIRE, &all[..if bare { 3 } else { 5 }]);
            call.arg(attempt.stem).arg(millis(attempt.ttl()));
            if !bare {
                claim_and_holder(&mut call, attempt.claim, attempt.holder());
            }
            let mut first = true;
            loop {
                let (reply, acked) = self
                    .run_lease_script::<Value>(name, &ACQUIRE, &call, attempt.ack())
                    .await?;
                // A queue in the way: if it held only waiters of dead gateways, it is gone
                // now, and the lock is looked at once more.
                let behind_a_queue =
                    matches!(&reply, Value::Array(items) if matches!(items[..], [Value::Int(5)]));
                if first && behind_a_queue && self.clear_queue(name).await? {
                    first = false;
                    continue;
                }
                return acquire_outcome(ACQUIRE.name, reply, attempt.ttl(), acked, &self.gateway);
            }
        };
        let live = keys.queue_live();
        let all = [lock, counter, queue, live, claim_key, holder_key];
        let mut call = evalsha(&FAIR_ACQUIRE, &all[..if bare { 4 } else { 6 }]);
        call.arg(attempt.stem).arg(millis(attempt.ttl()));
        self.queue_args(&mut call, place, attempt.owner());
        if !bare {
            claim_and_holder(&mut call, attempt.claim, attempt.holder());
        }
        self.run_grant(name, &FAIR_ACQUIRE, &call, attempt).await
    }

    /// Releases the lock `name` held by `token`.
    pub(crate) async fn release_lock(
        &self,
        name: &str,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        let keys = self.keys(name);
        let marks = Marks::of(token);
        if marks.reentrant {
            let (grant_keys, n) = grant_keys(&keys, marks);
            let mut call = evalsha(&REENTRANT_RELEASE, &grant_keys[..n]);
            call.arg(token).arg(keys.channel());
            let reply = self.script::<Value>(&REENTRANT_RELEASE, &call).await?;
            return reentrant_release_outcome(reply);
        }
        if let Some((until, min_hold_ms)) = held_until_ms(marks, token) {
            // A minimum hold: the script decides on Redis's clock whether the grant is old
            // enough to go, and leaves it to expire otherwise (no native command does that).
            let (grant_keys, n) = grant_keys(&keys, marks);
            let mut call = evalsha(&RELEASE, &grant_keys[..n]);
            call.arg(token)
                .arg(keys.channel())
                .arg(until)
                .arg(min_hold_ms);
            return min_hold_release_outcome(self.script::<Value>(&RELEASE, &call).await?);
        }
        let via = self.features().release;
        if via != ReleaseVia::Lua
            && let Some(outcome) = self.release_natively(keys, token, via).await?
        {
            return Ok(outcome);
        }
        let (grant_keys, n) = grant_keys(&keys, marks);
        let mut call = evalsha(&RELEASE, &grant_keys[..n]);
        call.arg(token).arg(keys.channel());
        release_outcome(&RELEASE, self.script::<i64>(&RELEASE, &call).await?)
    }

    /// Withdraws the grant of the lock `name` that `withdrawal` names, and tells the name's
    /// waiters.
    pub(crate) async fn withdraw_lock(
        &self,
        name: &str,
        withdrawal: Withdrawal<'_>,
    ) -> Result<bool, BackendError> {
        self.withdraw_lock_telling(name, withdrawal, true).await
    }

    /// Withdraws the grant of the lock `name` that `withdrawal` names (a Redlock grant's copy
    /// on this node), with a message on the name's channel when `tell_waiters`. A partial
    /// grant, one that never held a majority, goes without: nobody waits for it to go, and the
    /// message would wake every waiter of the name on this node, each of which, the lock held
    /// on a majority, takes this node and withdraws it again: a loop of round trips for as
    /// long as the holder holds (found by the simulation, docs/development.md).
    pub(crate) async fn withdraw_lock_telling(
        &self,
        name: &str,
        withdrawal: Withdrawal<'_>,
        tell_waiters: bool,
    ) -> Result<bool, BackendError> {
        let keys = self.keys(name);
        let mut call = if Marks::of(withdrawal.stem).holder {
            evalsha(&WITHDRAW, &[keys.lock(), keys.claim(), keys.holder()])
        } else {
            evalsha(&WITHDRAW, &[keys.lock(), keys.claim()])
        };
        call.arg(withdrawal.stem);
        if tell_waiters {
            call.arg(keys.channel());
        } else {
            call.arg("");
        }
        call.arg(claim_arg(withdrawal.claim));
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
        if renewal.one_more_hold {
            return self.reenter_lock(name, renewal).await;
        }
        let RenewAttempt {
            token, ttl, ack, ..
        } = renewal;
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
        let (grant_keys, n) = grant_keys(&keys, Marks::of(token));
        self.renew_by(name, &RENEW, &grant_keys[..n], renewal).await
    }

    /// Takes the reentrant lock `name` once more for the holder of `renewal.token`.
    async fn reenter_lock(
        &self,
        name: &str,
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        let (token, ttl) = (renewal.token, renewal.ttl);
        let keys = self.keys(name);
        let (grant_keys, n) = grant_keys(&keys, Marks::of(token));
        let mut call = evalsha(&REENTER, &grant_keys[..n]);
        call.arg(token).arg(millis(ttl));
        let (reply, acked) = self
            .run_lease_script::<Vec<i64>>(name, &REENTER, &call, renewal.ack)
            .await?;
        match *reply {
            [1, holds, left] => Ok(RenewOutcome::Reentered {
                lease: Lease {
                    fence: fence_of(token).unwrap_or(0),
                    ttl: pttl(left).unwrap_or(ttl),
                    replicas_acked: acked,
                },
                holds: u32::try_from(holds).map_err(|_| protocol(REENTER.name, holds))?,
            }),
            [0] => Ok(RenewOutcome::NotHeld),
            [-1] => Ok(RenewOutcome::NotOwner),
            _ => Err(protocol(REENTER.name, format!("{reply:?}"))),
        }
    }
}
