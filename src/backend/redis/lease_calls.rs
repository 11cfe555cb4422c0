//! What the calls of every lease script have in common, whatever the kind (a lock, a set of
//! locks, a grant of a set): a grant's arguments after the kind's own keys, a renewal's, a
//! release's, how each is sent (with a `WAIT` where asked) and how their replies read
//! (`replies`).

use redis::{Cmd, Value};

use super::RedisBackend;
use super::keys::Key;
use super::replies::{acquire_outcome, protocol, renew_outcome};
use super::scripts::Lua;
use super::send::{claim_arg, evalsha};
use crate::backend::{
    AcquireOutcome, BackendError, Claim, GrantAttempt, Holder, ReleaseOutcome, RenewAttempt,
    RenewOutcome, millis,
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

impl RedisBackend {
    /// Runs `script`, a granting script, over `keys` with `ARGV` stem, ttl, `limit` (of a
    /// limited kind), claim, holder. `slot_of` is the name whose master a `WAIT` goes to.
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
        acquire_outcome(script.name, reply, ttl, acked, &self.gateway)
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
}
