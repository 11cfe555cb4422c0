//! An in-process lock store with the same semantics as the Redis backend.
//!
//! It exists for `--dev` (run the gateway with nothing else installed) and for fast in-process
//! API tests. It is never a stand-in for Redis: locks live in one process, vanish with it, and
//! are invisible to every other gateway. The server only builds it when `--dev` is given.
//!
//! Each operation runs in one short critical section under a mutex, which gives the same
//! atomicity a Lua script gives on Redis. Time comes from `tokio::time`, so tests can pause and
//! advance it. There are no replicas: a request for replica acknowledgement gets 0.
//!

mod beside;
mod feeds;
mod grants;
mod listing;
mod lock;
mod multi;
mod queue;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, UNIX_EPOCH};

use tokio::time::Instant;

use super::fence::{fence_of, next_fence};
use super::marks::{Marks, is_marker};
use super::{
    AcquireOutcome, BackendError, Claim, Grants, Holder, Inspection, LeaseStore, Leased, ListPage,
    PageRequest, ReleaseFeed, ReleaseOutcome, RenewOutcome, ReplicaAck,
};
use super::{GrantsOf, Watched, lease_operations_by_kind};
use crate::backend::{Announcements, GrantAttempt, GrantPage, GrantedNames, Lease, RenewAttempt};
use crate::name::LockName;
use feeds::{Feeds, GrantedNamesSender, announce, feed, freed};

/// Expired locks are swept after this many writes, or after a quarter as many writes as there
/// are locks if that is more. A write adds at most one entry, so the writes always catch up
/// with the threshold, and a sweep costs O(1) amortized per write.
const MIN_WRITES_BETWEEN_SWEEPS: usize = 1024;

#[derive(Debug, Default)]
pub struct MemoryBackend {
    state: Mutex<State>,
    /// Release announcements, for names somebody watches.
    watched: Feeds,
    /// Grant announcements, for names somebody watches.
    granted: Feeds,
    /// Every grant's name, for those who watch a prefix.
    granted_names: GrantedNamesSender,
    /// Grants of a set given back, for sets somebody waits for, by name and the kind's
    /// channel (see [`freed`]).
    freed: Feeds,
    /// A fair queue's head changed, for names somebody waits for fairly.
    heads: Feeds,
}

#[derive(Debug, Default)]
struct State {
    locks: HashMap<String, Held>,
    /// Sets of grants by kind ([`GrantSetKind::label`](super::GrantSetKind::label)), then by
    /// name. A set kept beside the lock (a read/write lock's readers) is among them; the lock
    /// entry holds its kind's marker meanwhile.
    grant_sets: HashMap<&'static str, HashMap<String, grants::GrantSet>>,
    /// Until when new grants of the set beside a name's lock are held off (a lock waits).
    hold_offs: HashMap<String, Instant>,
    /// Revoked tokens by name, until their leases would have ended.
    revoked: HashMap<String, (String, Instant)>,
    /// Revoked grants of sets of grants, by kind (its label) and name: each token until its
    /// lease would have ended.
    revoked_grants: HashMap<(&'static str, String), Vec<(String, Instant)>>,
    /// Fair queues, by name, while anyone waits in them.
    queues: HashMap<String, queue::Queue>,
    /// The fence counter (one for the whole store, as in standalone Redis).
    last_fence: u64,
    writes_since_sweep: usize,
}

#[derive(Debug)]
struct Held {
    /// `<stem>.<fence>`.
    token: String,
    expires: Instant,
    /// The attempt that last claimed this grant, for idempotent ones.
    claim: Option<Claim>,
    /// Who holds it, when the acquire named a holder.
    holder: Option<Arc<Holder>>,
    /// How many times it is held: more than once only for a reentrant grant taken again.
    holds: u32,
}

impl MemoryBackend {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-applied operation behind (each
        // operation mutates at most one map entry after all checks), so poisoning is ignored.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The store, locked, and the time of the operation, read once the lock is held: the
    /// operations see time in the order they run, as a Redis script sees its server's clock.
    fn state_now(&self) -> (MutexGuard<'_, State>, Instant) {
        let state = self.state();
        (state, Instant::now())
    }

    fn announce_release(&self, name: &str) {
        announce(&self.watched, name);
    }

    /// Tells the watchers of `name`, and of every prefix of it, that it was granted.
    fn announce_grant(&self, name: &str) {
        announce(&self.granted, name);
        // Nobody watching a prefix right now is not an error.
        let _ = self.granted_names.0.send(Arc::from(name));
    }
}

impl State {
    /// The live lock on `name`, dropping it if it has expired.
    fn live_lock(&mut self, name: &str, now: Instant) -> Option<&mut Held> {
        if self.locks.get(name).is_some_and(|held| held.expires <= now) {
            self.locks.remove(name);
        }
        self.locks.get_mut(name)
    }

    /// The next fence, above every fence given before.
    fn next_fence(&mut self) -> u64 {
        self.last_fence = next_fence(self.last_fence, wall_clock_micros());
        self.last_fence
    }

    fn note_write(&mut self, now: Instant) {
        self.writes_since_sweep += 1;
        let sets: usize = self.grant_sets.values().map(HashMap::len).sum();
        let threshold = MIN_WRITES_BETWEEN_SWEEPS.max((self.locks.len() + sets) / 4);
        if self.writes_since_sweep >= threshold {
            self.writes_since_sweep = 0;
            self.locks.retain(|_, held| held.expires > now);
            for sets in self.grant_sets.values_mut() {
                sets.retain(|_, grants| grants.reclaim(now));
            }
            self.hold_offs.retain(|_, until| *until > now);
            self.revoked.retain(|_, (_, until)| *until > now);
            self.revoked_grants.retain(|_, grants| {
                grants.retain(|(_, until)| *until > now);
                !grants.is_empty()
            });
        }
    }
}

impl Held {
    fn inspection(&self, now: Instant) -> Inspection {
        Inspection {
            ttl: Some(self.expires - now),
            fence: fence_of(&self.token),
            holder: self.holder.as_deref().cloned(),
            shared: is_marker(&self.token),
            holds: Marks::of(&self.token).reentrant.then_some(self.holds),
            queued: 0,
            queue: Vec::new(),
        }
    }
}

fn wall_clock_micros() -> u64 {
    crate::wall_clock::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// The wall clock in ms, as Redis's `TIME` would say it (a minimum hold is counted on it).
fn wall_clock_millis() -> u64 {
    wall_clock_micros() / 1000
}

/// Replicas that acknowledged a write, when asked: none here, there are no replicas.
fn acked(ack: Option<ReplicaAck>) -> Option<u32> {
    ack.map(|_| 0)
}

/// A lease as the memory store answers it.
fn lease(fence: u64, ttl: Duration, ack: Option<ReplicaAck>) -> Lease {
    Lease {
        fence,
        ttl,
        replicas_acked: acked(ack),
    }
}

/// The fence of a token this store holds: every one of them was issued here, with its fence.
fn issued_fence(token: &str) -> u64 {
    fence_of(token).unwrap_or(0)
}

impl MemoryBackend {
    /// Deletes the lock on `name` whoever holds it (with its marker, the set `beside` it, whose
    /// grants are remembered as revoked): true if it was held.
    fn revoke_lock(&self, name: &str, beside: Option<GrantsOf>) -> bool {
        let (mut state, now) = self.state_now();
        if state.live_lock(name, now).is_none() {
            return false;
        }
        let Some(held) = state.locks.remove(name) else {
            return false;
        };
        if let Some(of) = beside.filter(|of| of.marker == Some(held.token.as_str()))
            && let Some(grants) = state.sets(of).remove(name)
        {
            state.remember_revoked(of, name, grants.live_tokens(now));
        }
        state
            .revoked
            .insert(name.to_owned(), (held.token, held.expires));
        state.note_write(now);
        drop(state);
        self.announce_release(name);
        true
    }
}

/// A set's names as the store's maps key them.
fn strs(names: &[LockName]) -> Vec<&str> {
    names.iter().map(LockName::as_str).collect()
}

impl LeaseStore for MemoryBackend {
    lease_operations_by_kind!();

    /// A lock's (and its readers') releases; a grant of a set given back; any release of a
    /// set's names; a fair lock's head.
    async fn watch(&self, what: Watched<'_>) -> ReleaseFeed {
        match what {
            Watched::Releases(Leased::Lock(name)) => feed(&self.watched, name.as_str()),
            Watched::Releases(Leased::Grant(of, name, _)) if of.beside_lock() => {
                feed(&self.watched, name.as_str())
            }
            Watched::Releases(Leased::Grant(of, name, _)) => {
                feed(&self.freed, &freed(of, name.as_str()))
            }
            Watched::Releases(Leased::Set(names)) => ReleaseFeed::merged(
                names
                    .iter()
                    .map(|name| feed(&self.watched, name.as_str()))
                    .collect(),
            ),
            Watched::Turn(Leased::Lock(name)) => self.watch_head(name.as_str()).await,
            Watched::Turn(_) => ReleaseFeed::silent(),
            Watched::Grants(name) => feed(&self.granted, name.as_str()),
        }
    }

    fn sees_every_release(&self, _: Leased<'_>) -> bool {
        // Nothing but this process changes the store.
        true
    }

    async fn revoke(
        &self,
        leased: Leased<'_>,
        beside: Option<GrantsOf>,
    ) -> Result<bool, BackendError> {
        match leased {
            Leased::Lock(name) => Ok(self.revoke_lock(name.as_str(), beside)),
            Leased::Grant(of, name, _) => Ok(self.revoke_grants(of, name.as_str())),
            // The engine revokes a set's locks name by name, as the locks they are.
            Leased::Set(_) => Ok(false),
        }
    }

    async fn revoked_fence(&self, name: &str) -> Result<Option<u64>, BackendError> {
        let (state, now) = self.state_now();
        Ok(state
            .revoked
            .get(name)
            .filter(|(_, until)| *until > now)
            .and_then(|(token, _)| fence_of(token)))
    }

    async fn was_revoked(&self, leased: Leased<'_>, token: &str) -> Result<bool, BackendError> {
        let (state, now) = self.state_now();
        let lock_revoked = |name: &LockName| {
            state
                .revoked
                .get(name.as_str())
                .is_some_and(|(revoked, until)| revoked == token && *until > now)
        };
        Ok(match leased {
            Leased::Lock(name) => lock_revoked(name),
            Leased::Set(names) => names.iter().any(lock_revoked),
            Leased::Grant(of, name, _) => state
                .revoked_grants
                .get(&(of.label, name.to_string()))
                .is_some_and(|grants| {
                    grants
                        .iter()
                        .any(|(revoked, until)| revoked == token && *until > now)
                }),
        })
    }

    async fn inspect(&self, name: &str) -> Result<Option<Inspection>, BackendError> {
        let (mut state, now) = self.state_now();
        let (queued, queue) = (state.queued(name), state.queue_view(name));
        Ok(state.live_lock(name, now).map(|held| Inspection {
            queued,
            queue,
            ..held.inspection(now)
        }))
    }

    async fn list(&self, request: PageRequest<'_>) -> Result<ListPage, BackendError> {
        Ok(self.list_locks(request))
    }

    async fn list_grants(
        &self,
        of: GrantsOf,
        request: PageRequest<'_>,
    ) -> Result<GrantPage, BackendError> {
        Ok(self.list_grant_sets(of, request))
    }

    async fn ping(&self) -> Result<(), BackendError> {
        Ok(())
    }

    async fn watch_grants_under(&self, prefix: &str) -> Result<GrantedNames, BackendError> {
        let prefix = prefix.to_owned();
        // Nothing is ever missed in one process but by a reader that fell behind.
        Ok(GrantedNames::new(
            Announcements::Shared(self.granted_names.0.subscribe()),
            ReleaseFeed::silent(),
            move |name| name.starts_with(&prefix).then(|| name.to_owned()),
        ))
    }

    async fn inspect_grants(&self, of: GrantsOf, name: &str) -> Result<Grants, BackendError> {
        Ok(self.grant_views(of, name))
    }
}

#[cfg(test)]
mod tests;
