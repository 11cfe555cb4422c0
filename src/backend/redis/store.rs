//! The [`LeaseStore`] contract of the Redis backend: each kind of lease to its module (`lock`,
//! `shared`, `grants`, `multi`), and the operations on a lock by name (revoke, inspect,
//! listing, the grants' feed) and on the server (ping).

use std::time::Instant;

use redis::Value;

use super::RedisBackend;
use super::keys::ACQUIRED;
use super::listing::GrantWalk;
use super::replies::pttl;
use super::scripts::INSPECT;
use super::send::evalsha;
use crate::backend::fence::fence_of;
use crate::backend::listing::{self, match_pattern, name_of_key};
use crate::backend::{
    AcquireOutcome, BackendError, GrantAttempt, Grants, Holder, Inspection, LeaseStore, Leased,
    ListPage, PageRequest, ReleaseFeed, ReleaseOutcome, RenewAttempt, RenewOutcome,
};
use crate::backend::{GrantPage, GrantedNames, GrantsOf, Watched, lease_operations_by_kind};
use crate::telemetry::metrics::RedisCall;

impl LeaseStore for RedisBackend {
    lease_operations_by_kind!();

    /// A lock's (and its readers') releases; a grant of a set given back, on its kind's
    /// channel; any release of a set's names. A fair lock's head, on this gateway's channel
    /// of the name.
    async fn watch(&self, what: Watched<'_>) -> ReleaseFeed {
        match what {
            Watched::Releases(Leased::Lock(name)) => self.watch_lock_releases(name.as_str()).await,
            Watched::Releases(Leased::Grant(of, name, _)) if of.beside_lock() => {
                self.watch_lock_releases(name.as_str()).await
            }
            Watched::Releases(Leased::Grant(of, name, _)) => {
                let channel = self.keys(name.as_str()).named(of.freed_channel).to_string();
                self.notifier.watch_channel(&channel).await
            }
            Watched::Releases(Leased::Set(names)) => {
                let mut feeds = Vec::with_capacity(names.len());
                for name in names {
                    feeds.push(self.watch_lock_releases(name.as_str()).await);
                }
                ReleaseFeed::merged(feeds)
            }
            Watched::Turn(Leased::Lock(name)) => self.watch_head(name.as_str()).await,
            Watched::Turn(_) => ReleaseFeed::silent(),
            Watched::Grants(name) => {
                let channel = self.keys(name.as_str()).acquired_channel().to_string();
                self.notifier.watch_channel(&channel).await
            }
        }
    }

    /// Only lockgate writes a set of grants kept apart from the lock, and each of its releases
    /// is announced; a lock can be released by any Redis client, announced only with keyspace
    /// notifications on.
    fn sees_every_release(&self, leased: Leased<'_>) -> bool {
        matches!(leased, Leased::Grant(of, ..) if !of.beside_lock())
            || self.notifier.sees_every_release()
    }

    async fn revoke(
        &self,
        leased: Leased<'_>,
        beside: Option<GrantsOf>,
    ) -> Result<bool, BackendError> {
        match leased {
            Leased::Lock(name) => self.revoke_lock(name.as_str(), beside).await,
            Leased::Grant(of, name, _) => self.revoke_grants(of, name.as_str()).await,
            // The engine revokes a set's locks name by name, as the locks they are.
            Leased::Set(_) => Ok(false),
        }
    }

    async fn was_revoked(&self, leased: Leased<'_>, token: &str) -> Result<bool, BackendError> {
        match leased {
            Leased::Lock(name) => self.was_lock_revoked(name.as_str(), token).await,
            Leased::Grant(of, name, _) => self.was_grant_revoked(of, name.as_str(), token).await,
            Leased::Set(names) => {
                for name in names {
                    if self.was_lock_revoked(name.as_str(), token).await? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
        }
    }

    async fn revoked_fence(&self, name: &str) -> Result<Option<u64>, BackendError> {
        let revoked = self.revoked_token(name).await?;
        Ok(revoked.and_then(|token| fence_of(std::str::from_utf8(&token).ok()?)))
    }

    /// The grants of the prefix's names, routed from the one pattern subscription over every
    /// name's grant channel that all prefix watches of this gateway share.
    async fn watch_grants_under(&self, prefix: &str) -> Result<GrantedNames, BackendError> {
        let pattern = format!("{}{ACQUIRED}", match_pattern(&self.key_prefix, ""));
        let channel_prefix = format!("{}{{{prefix}", self.key_prefix);
        let (missed, announcements) = self.notifier.watch_prefix(&pattern, channel_prefix).await?;
        let key_prefix = self.key_prefix.clone();
        let prefix = prefix.to_owned();
        Ok(GrantedNames::new(announcements, missed, move |channel| {
            let key = channel.strip_suffix(ACQUIRED)?;
            let name = name_of_key(&key_prefix, key.as_bytes())?;
            name.starts_with(&prefix).then(|| name.to_owned())
        }))
    }

    async fn inspect(&self, name: &str) -> Result<Option<Inspection>, BackendError> {
        Ok(self.look(name, false).await?.map(|(seen, _)| seen))
    }

    async fn inspect_grants(&self, of: GrantsOf, name: &str) -> Result<Grants, BackendError> {
        self.grants_of(of, name).await
    }

    async fn list(&self, request: PageRequest<'_>) -> Result<ListPage, BackendError> {
        listing::page(self, request).await
    }

    async fn list_grants(
        &self,
        of: GrantsOf,
        request: PageRequest<'_>,
    ) -> Result<GrantPage, BackendError> {
        listing::page(&GrantWalk(self, of), request).await
    }

    async fn ping(&self) -> Result<(), BackendError> {
        let started = Instant::now();
        let outcome = self.ping_once().await;
        self.record(RedisCall::Ping, started, &outcome);
        outcome
    }
}

impl RedisBackend {
    /// What inspect sees, with an identity of the grant held (a digest of its token's stem, the
    /// same on every node of a Redlock grant; see inspect.lua): how Redlock tells one grant's
    /// copies apart while their fences still differ.
    pub(crate) async fn inspect_grant(
        &self,
        name: &str,
    ) -> Result<Option<(Inspection, Option<u64>)>, BackendError> {
        self.look(name, true).await
    }

    /// One inspect; the grant's digest only `with_grant` (no SHA-1 where nothing reads it).
    async fn look(
        &self,
        name: &str,
        with_grant: bool,
    ) -> Result<Option<(Inspection, Option<u64>)>, BackendError> {
        let keys = self.keys(name);
        let mut call = evalsha(
            &INSPECT,
            &[
                keys.lock(),
                keys.legacy_counter(),
                keys.holder(),
                keys.holds(),
                keys.queue(),
                keys.queue_live(),
            ],
        );
        if with_grant {
            call.arg("1");
        }
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
        let count = |at: usize| match reply.get(at) {
            Some(Value::Int(n)) => u32::try_from(*n).ok().filter(|&n| n > 0),
            _ => None,
        };
        let grant = match reply.get(6) {
            Some(Value::Int(n)) => u64::try_from(*n).ok(),
            _ => None,
        };
        let seen = Inspection {
            ttl: pttl(ttl),
            fence,
            holder: record.and_then(|r| Holder::of_record(r, fence)),
            shared: matches!(reply.get(3), Some(Value::Int(1))),
            holds: count(4),
            queued: count(5).unwrap_or(0),
            queue: self.queue_view(reply.get(7)),
        };
        Ok(Some((seen, grant)))
    }
}
