//! What the calls of every lease script have in common, whatever the kind (a lock, a set of
//! locks, a shared grant, a permit): a grant's arguments after the kind's own keys, a
//! renewal's, a release's, and how their replies read (`replies`). And the operations that
//! are the same for a semaphore's permits and a read/write lock's readers (renew, release,
//! withdraw: one sorted set of tokens each, see `semaphore.rs` and `shared.rs`), which differ
//! only in keys.

use redis::{Cmd, Value};

use super::RedisBackend;
use super::keys::Key;
use super::replies::{acquire_outcome, permit_views, protocol, renew_outcome};
use super::scripts::{
    Lua, PERMIT_INSPECT, PERMIT_RELEASE, PERMIT_RENEW, SHARED_INSPECT, SHARED_RELEASE, SHARED_RENEW,
};
use super::send::{claim_arg, evalsha};
use crate::backend::Grants;
use crate::backend::{
    AcquireOutcome, BackendError, Claim, GrantAttempt, GrantsOf, Holder, ReleaseOutcome,
    RenewAttempt, RenewOutcome, Withdrawal, millis,
};

/// The arguments of a granting script after `ARGV[1]` (stem) and `ARGV[2]` (ttl), and any
/// of the kind's own (a semaphore's limit): claim, holder fields.
pub(super) fn claim_and_holder(call: &mut Cmd, claim: Option<Claim>, holder: Option<&Holder>) {
    call.arg(claim_arg(claim))
        .arg(holder.map(Holder::fields).unwrap_or_default());
}

/// A release script's reply: 1 released, 0 not held, -1 held by another token.
pub(super) fn release_outcome(script: &Lua, reply: i64) -> Result<ReleaseOutcome, BackendError> {
    match reply {
        1 => Ok(ReleaseOutcome::Released),
        0 => Ok(ReleaseOutcome::NotHeld),
        -1 => Ok(ReleaseOutcome::NotOwner),
        other => Err(protocol(script.name, other)),
    }
}

/// The release script of a set of grants.
fn release_script(of: GrantsOf) -> &'static Lua {
    match of {
        GrantsOf::Shared => &SHARED_RELEASE,
        GrantsOf::Permits => &PERMIT_RELEASE,
    }
}

impl RedisBackend {
    /// Runs `script`, a granting script, over `keys` with `ARGV` stem, ttl, `limit` (for a
    /// semaphore), claim, holder. `slot_of` is the name whose master a `WAIT` goes to.
    pub(super) async fn grant(
        &self,
        slot_of: &str,
        script: &Lua,
        keys: &[Key<'_>],
        limit: Option<u32>,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let GrantAttempt { stem, claim, .. } = attempt;
        let (ttl, holder) = (attempt.ttl(), attempt.holder());
        let mut call = evalsha(script, keys);
        call.arg(stem).arg(millis(ttl));
        if let Some(limit) = limit {
            call.arg(limit);
        }
        claim_and_holder(&mut call, claim, holder);
        self.run_grant(slot_of, script, &call, attempt).await
    }

    /// Sends `call`, a granting script's, with the `WAIT` `attempt` asks for.
    pub(super) async fn run_grant(
        &self,
        slot_of: &str,
        script: &Lua,
        call: &Cmd,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let (ttl, ack) = (attempt.ttl(), attempt.ack());
        let (reply, acked) = self
            .run_lease_script::<Value>(slot_of, script, call, ack)
            .await?;
        acquire_outcome(script.name, reply, ttl, acked)
    }

    /// Runs `script`, a renewing script, over `keys` with `ARGV` token, ttl.
    pub(super) async fn renew_by(
        &self,
        slot_of: &str,
        script: &Lua,
        keys: &[Key<'_>],
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        let RenewAttempt {
            token, ttl, ack, ..
        } = renewal;
        let mut call = evalsha(script, keys);
        call.arg(token).arg(millis(ttl));
        let (reply, acked) = self
            .run_lease_script::<i64>(slot_of, script, &call, ack)
            .await?;
        renew_outcome(script.name, reply, token, ttl, acked)
    }

    /// Runs `script`, a releasing script, over `keys` with `ARGV` token, `channel` (where a
    /// release is announced), stem and claim: it releases the grant of `token`, or withdraws
    /// the one of `stem` and `claim` (then `token` is empty).
    pub(super) async fn remove_by(
        &self,
        script: &Lua,
        keys: &[Key<'_>],
        channel: Option<Key<'_>>,
        token: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<i64, BackendError> {
        let mut call = evalsha(script, keys);
        call.arg(token);
        if let Some(channel) = channel {
            call.arg(channel);
        }
        call.arg(stem).arg(claim_arg(claim));
        self.script::<i64>(script, &call).await
    }

    /// Renews the grant of `renewal.token` among the grants of `name`.
    pub(super) async fn renew_grant(
        &self,
        of: GrantsOf,
        name: &str,
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        let keys = self.keys(name);
        match of {
            GrantsOf::Shared => {
                let set = [keys.lock(), keys.readers(), keys.readers_info()];
                self.renew_by(name, &SHARED_RENEW, &set, renewal).await
            }
            GrantsOf::Permits => {
                let set = [keys.permits(), keys.semaphore()];
                self.renew_by(name, &PERMIT_RENEW, &set, renewal).await
            }
        }
    }

    /// The release script of the grants of `name` for `token`, or for the grant of `stem`
    /// and `claim`: 1 if it removed one.
    async fn remove_grant(
        &self,
        of: GrantsOf,
        name: &str,
        token: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<i64, BackendError> {
        let keys = self.keys(name);
        let script = release_script(of);
        match of {
            GrantsOf::Shared => {
                let set = [keys.lock(), keys.readers(), keys.readers_info()];
                let channel = Some(keys.channel());
                (self.remove_by(script, &set, channel, token, stem, claim)).await
            }
            GrantsOf::Permits => {
                let set = [keys.permits(), keys.semaphore()];
                let channel = Some(keys.permits_channel());
                (self.remove_by(script, &set, channel, token, stem, claim)).await
            }
        }
    }

    pub(super) async fn release_grant(
        &self,
        of: GrantsOf,
        name: &str,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        let removed = self.remove_grant(of, name, token, "", None).await?;
        release_outcome(release_script(of), removed)
    }

    pub(super) async fn withdraw_grant(
        &self,
        of: GrantsOf,
        name: &str,
        withdrawal: Withdrawal<'_>,
    ) -> Result<bool, BackendError> {
        let Withdrawal { stem, claim } = withdrawal;
        Ok(self.remove_grant(of, name, "", stem, claim).await? == 1)
    }

    /// The live grants of `name`, the first to end first, and a semaphore's limit.
    pub(super) async fn grants_of(&self, of: GrantsOf, name: &str) -> Result<Grants, BackendError> {
        let keys = self.keys(name);
        let (script, call) = match of {
            GrantsOf::Shared => {
                let set = [keys.readers(), keys.readers_info()];
                (&*SHARED_INSPECT, evalsha(&SHARED_INSPECT, &set))
            }
            GrantsOf::Permits => {
                let set = [keys.permits(), keys.semaphore()];
                (&*PERMIT_INSPECT, evalsha(&PERMIT_INSPECT, &set))
            }
        };
        let reply: Vec<String> = self.script(script, &call).await?;
        // A semaphore's inspect script answers its limit first.
        let (limit, listed) = match of {
            GrantsOf::Shared => (None, &reply[..]),
            GrantsOf::Permits => match reply.split_first() {
                Some((limit, listed)) => (limit.parse().ok(), listed),
                None => return Err(protocol(script.name, "an empty reply")),
            },
        };
        let permits = permit_views(script.name, listed)?;
        Ok(Grants {
            limit: limit.filter(|_| !permits.is_empty()),
            grants: permits,
        })
    }
}
