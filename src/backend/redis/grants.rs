//! The operations on the kinds kept as a set of grants (see
//! [`GrantSetKind`](crate::backend::GrantSetKind)): each runs its kind's script over its
//! kind's keys, with the calls every lease script shares (`lease_calls.rs`).

use super::RedisBackend;
use super::keys::{Key, LockKeys};
use super::lease_calls::release_outcome;
use super::replies::{grant_views, protocol};
use super::scripts::{GRANTS_REVOKE, Lua, prelude};
use super::send::Request;
use super::send::evalsha;
use crate::backend::Grants;
use crate::backend::{
    AcquireOutcome, BackendError, Claim, GrantAttempt, GrantsOf, ReleaseOutcome, RenewAttempt,
    RenewOutcome, Withdrawal,
};

/// The scripts of a kind of set of grants ([`GrantSetKind::scripts`](crate::backend::GrantSetKind::scripts)), which the kind keeps
/// in its own module and builds with [`GrantSetScripts::assembled`]. Each runs over the keys
/// [`RedisBackend`] lays out for its kind below, in that order:
///
/// * `acquire`: (the lock key, if kept beside it), the tokens, the slot's fence counter, the
///   info hash, (the hold-off key, if kept beside the lock); `ARGV` stem, ttl, (the limit, if
///   limited), claim, holder; replies as every acquire script (see `replies`);
/// * `renew`: (the lock key), the tokens, the info hash; `ARGV` token, ttl;
/// * `release`: (the lock key), the tokens, the info hash; `ARGV` token, the channel a release
///   is announced on, stem, claim (a withdrawal names stem and claim, with an empty token);
///   replies 1 removed, 0 not held, -1 held by another token;
/// * `inspect`: the tokens, the info hash; replies (the limit, if limited, then) token, ms
///   left and holder record of each grant, the first to end first.
///
/// A kind's scripts are loaded into a server's cache with the built-in ones on every new
/// connection once the kind was first used (see `scripts::load_all`), by a NOSCRIPT before.
#[derive(Debug)]
pub struct GrantSetScripts {
    pub acquire: Lua,
    pub renew: Lua,
    pub release: Lua,
    pub inspect: Lua,
}

/// The sources of a kind's own scripts (see [`GrantSetScripts::assembled`]), each with the
/// name its errors give it.
#[derive(Debug)]
pub struct OwnScripts {
    pub acquire: (&'static str, &'static str),
    pub renew: (&'static str, &'static str),
    pub release: (&'static str, &'static str),
    pub inspect: (&'static str, &'static str),
}

impl GrantSetScripts {
    /// A kind's scripts from its own files: each after the preludes of a set of grants
    /// (`grant.lua`, `lease_set.lua`), and the renewal flagged to run on a full server (it
    /// adds nothing; see `allow_oom.lua`).
    pub fn assembled(own: OwnScripts) -> Self {
        let script = |(name, source): (&'static str, &'static str), flags: &[&str]| {
            Lua::assembled(
                name,
                &[flags, &[prelude::GRANT, prelude::LEASE_SET, source]].concat(),
            )
        };
        Self {
            acquire: script(own.acquire, &[]),
            renew: script(own.renew, &[prelude::ALLOW_OOM]),
            release: script(own.release, &[]),
            inspect: script(own.inspect, &[]),
        }
    }
}

/// The keys of `of`'s grants of one name, in the order its scripts take them (see
/// [`GrantSetScripts`]): the lock key (if kept beside it), the tokens, `middle`, the info
/// hash, `after` (if kept beside the lock). Kept on the stack: a script call of a set builds
/// no `Vec` of keys.
struct SetKeys<'a> {
    keys: [Key<'a>; 5],
    len: usize,
}

impl<'a> SetKeys<'a> {
    fn of(
        of: GrantsOf,
        keys: &LockKeys<'a>,
        middle: Option<Key<'a>>,
        after: Option<Key<'a>>,
    ) -> Self {
        let tokens = keys.named(of.tokens_key);
        let beside = |key: Option<Key<'a>>| key.filter(|_| of.beside_lock());
        let mut set = Self {
            keys: [tokens; 5],
            len: 0,
        };
        let laid_out = [
            beside(Some(keys.lock())),
            Some(tokens),
            middle,
            Some(keys.named(of.info_key)),
            beside(after),
        ];
        for key in laid_out.into_iter().flatten() {
            set.keys[set.len] = key;
            set.len += 1;
        }
        set
    }

    fn as_slice(&self) -> &[Key<'a>] {
        &self.keys[..self.len]
    }
}

impl RedisBackend {
    /// Takes a grant of `of` on `name`, under `limit` for a limited kind.
    pub(super) async fn acquire_grant(
        &self,
        of: GrantsOf,
        name: &str,
        limit: u32,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let keys = self.keys(name);
        let set = SetKeys::of(of, &keys, Some(keys.counter()), Some(keys.hold_off()));
        let limit = of.limited.then_some(limit);
        (self.grant(name, &of.scripts.acquire, set.as_slice(), limit, attempt)).await
    }

    /// Renews the grant of `renewal.token` among the grants of `name`.
    pub(super) async fn renew_grant(
        &self,
        of: GrantsOf,
        name: &str,
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        let keys = self.keys(name);
        let set = SetKeys::of(of, &keys, None, None);
        (self.renew_by(name, &of.scripts.renew, set.as_slice(), renewal)).await
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
        let set = SetKeys::of(of, &keys, None, None);
        let channel = if of.beside_lock() {
            keys.channel()
        } else {
            keys.named(of.freed_channel)
        };
        let script = &of.scripts.release;
        (self.remove_by(script, set.as_slice(), Some(channel), token, stem, claim)).await
    }

    pub(super) async fn release_grant(
        &self,
        of: GrantsOf,
        name: &str,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        let removed = self.remove_grant(of, name, token, "", None).await?;
        release_outcome(&of.scripts.release, removed)
    }

    pub(super) async fn withdraw_grant(
        &self,
        of: GrantsOf,
        name: &str,
        withdrawal: Withdrawal<'_>,
    ) -> Result<bool, BackendError> {
        Ok(self
            .remove_grant(of, name, "", withdrawal.stem, withdrawal.claim)
            .await?
            == 1)
    }

    /// Revokes every live grant of `of` on `name` (see `grants_revoke.lua`): true if any was
    /// held.
    pub(super) async fn revoke_grants(
        &self,
        of: GrantsOf,
        name: &str,
    ) -> Result<bool, BackendError> {
        let keys = self.keys(name);
        let channel = if of.beside_lock() {
            keys.channel()
        } else {
            keys.named(of.freed_channel)
        };
        let set = [
            keys.named(of.tokens_key),
            keys.named(of.info_key),
            keys.named(of.revoked_key),
        ];
        let mut call = evalsha(&GRANTS_REVOKE, &set);
        call.arg(channel);
        let revoked: i64 = self.script(&GRANTS_REVOKE, &call).await?;
        Ok(revoked > 0)
    }

    /// Whether `token`'s grant of `of` on `name` was among those an operator revoked (while
    /// the last of them would still run).
    pub(super) async fn was_grant_revoked(
        &self,
        of: GrantsOf,
        name: &str,
        token: &str,
    ) -> Result<bool, BackendError> {
        let mut pipe = redis::pipe();
        pipe.cmd("ZSCORE")
            .arg(self.keys(name).named(of.revoked_key))
            .arg(token);
        let (score,): (Option<f64>,) = self.run(Request::Native(&pipe)).await?;
        Ok(score.is_some())
    }

    /// The live grants of `name`, the first to end first, and a limited kind's limit.
    pub(super) async fn grants_of(&self, of: GrantsOf, name: &str) -> Result<Grants, BackendError> {
        let keys = self.keys(name);
        let script = &of.scripts.inspect;
        let call = evalsha(
            script,
            &[keys.named(of.tokens_key), keys.named(of.info_key)],
        );
        let reply: Vec<String> = self.script(script, &call).await?;
        // A limited kind's inspect script answers its limit first.
        let (limit, listed) = match (of.limited, reply.split_first()) {
            (false, _) => (None, &reply[..]),
            (true, Some((limit, listed))) => (limit.parse().ok(), listed),
            (true, None) => return Err(protocol(script.name, "an empty reply")),
        };
        let grants = grant_views(script.name, listed)?;
        Ok(Grants {
            limit: limit.filter(|_| !grants.is_empty()),
            grants,
        })
    }
}
