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
//! Over 400 lines only because of its tests (the code is ~260 lines): they pin the semantics
//! the Redis backend's end-to-end tests check, in-process.

mod multi;
mod semaphore;
mod shared;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::time::Instant;

use super::fence::{fence_of, has_stem, next_fence, token};
use super::shared::SHARED_MARKER;
use super::{
    AcquireOutcome, BackendError, Claim, Holder, Inspection, Lease, ListCursor, ListPage,
    LockBackend, ReleaseFeed, ReleaseOutcome, RenewOutcome, ReplicaAck,
};
use crate::backend::GrantAttempt;

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
    /// Permits given back, for semaphores somebody waits for.
    permits_freed: Feeds,
}

/// Announcement feeds by name.
type Feeds = Arc<Mutex<HashMap<String, watch::Sender<()>>>>;

/// Keeps a name in its feeds while its feed lives.
#[derive(Debug)]
struct Watching {
    watched: Arc<Mutex<HashMap<String, watch::Sender<()>>>>,
    name: String,
}

impl Drop for Watching {
    fn drop(&mut self) {
        let mut watched = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        // The feed's receiver is dropped before this guard; nobody else listens then.
        if watched
            .get(&self.name)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            watched.remove(&self.name);
        }
    }
}

#[derive(Debug, Default)]
struct State {
    locks: HashMap<String, Held>,
    semaphores: HashMap<String, semaphore::Permits>,
    /// Readers of read/write locks, by name; the lock entry holds [`SHARED_MARKER`] meanwhile.
    readers: HashMap<String, semaphore::Permits>,
    /// Until when new readers of a name are held off (a writer waits).
    hold_offs: HashMap<String, Instant>,
    /// Revoked tokens by name, until their leases would have ended.
    revoked: HashMap<String, (String, Instant)>,
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

    fn announce_release(&self, name: &str) {
        announce(&self.watched, name);
    }
}

fn announce(feeds: &Feeds, name: &str) {
    let feeds = feeds.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(tx) = feeds.get(name) {
        tx.send_replace(());
    }
}

/// A feed of `feeds` for `name`, forgotten when its last receiver goes.
fn feed(feeds: &Feeds, name: &str) -> ReleaseFeed {
    let mut map = feeds.lock().unwrap_or_else(|p| p.into_inner());
    let receiver = map
        .entry(name.to_owned())
        .or_insert_with(|| watch::channel(()).0)
        .subscribe();
    let guard = Watching {
        watched: feeds.clone(),
        name: name.to_owned(),
    };
    ReleaseFeed::new(receiver, guard)
}

impl State {
    /// The live lock on `name`, dropping it if it has expired.
    fn live_lock(&mut self, name: &str, now: Instant) -> Option<&mut Held> {
        if self.locks.get(name).is_some_and(|held| held.expires <= now) {
            self.locks.remove(name);
        }
        self.locks.get_mut(name)
    }

    fn note_write(&mut self, now: Instant) {
        self.writes_since_sweep += 1;
        let threshold =
            MIN_WRITES_BETWEEN_SWEEPS.max((self.locks.len() + self.semaphores.len()) / 4);
        if self.writes_since_sweep >= threshold {
            self.writes_since_sweep = 0;
            self.locks.retain(|_, held| held.expires > now);
            self.semaphores.retain(|_, permits| permits.reclaim(now));
            self.readers.retain(|_, readers| readers.reclaim(now));
            self.hold_offs.retain(|_, until| *until > now);
            self.revoked.retain(|_, (_, until)| *until > now);
        }
    }
}

impl Held {
    fn inspection(&self, now: Instant) -> Inspection {
        Inspection {
            ttl: Some(self.expires - now),
            fence: fence_of(&self.token),
            holder: self.holder.as_deref().cloned(),
            shared: self.token == SHARED_MARKER,
        }
    }
}

fn wall_clock_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

fn acked(ack: Option<ReplicaAck>) -> Option<u32> {
    ack.map(|_| 0)
}

impl LockBackend for MemoryBackend {
    async fn acquire(
        &self,
        name: &str,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let (stem, ttl, ack, claim, holder) = attempt.parts();
        let now = Instant::now();
        let mut state = self.state();
        if let Some(held) = state.live_lock(name, now) {
            let remaining = held.expires - now;
            if held.token == SHARED_MARKER {
                return Ok(AcquireOutcome::HeldShared {
                    ttl: Some(remaining),
                });
            }
            if !has_stem(&held.token, stem) {
                return Ok(AcquireOutcome::Held {
                    ttl: Some(remaining),
                });
            }
            if claim.is_some() {
                held.claim = claim;
            }
            return Ok(AcquireOutcome::AlreadyHeld(Lease {
                fence: fence_of(&held.token).unwrap_or(0),
                ttl: remaining,
                replicas_acked: acked(ack),
            }));
        }
        let fence = next_fence(state.last_fence, wall_clock_micros());
        state.last_fence = fence;
        state.locks.insert(
            name.to_owned(),
            Held {
                token: token(stem, fence),
                expires: now + ttl,
                claim,
                holder: holder
                    .filter(|h| !h.is_empty())
                    .map(|h| Arc::new(h.clone())),
            },
        );
        state.note_write(now);
        drop(state);
        announce(&self.granted, name);
        Ok(AcquireOutcome::Granted(Lease {
            fence,
            ttl,
            replicas_acked: acked(ack),
        }))
    }

    async fn release(&self, name: &str, token: &str) -> Result<ReleaseOutcome, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        let outcome = match state.live_lock(name, now) {
            None => ReleaseOutcome::NotHeld,
            Some(held) if held.token != token => ReleaseOutcome::NotOwner,
            Some(_) => {
                state.locks.remove(name);
                ReleaseOutcome::Released
            }
        };
        drop(state);
        if outcome == ReleaseOutcome::Released {
            self.announce_release(name);
        }
        Ok(outcome)
    }

    async fn withdraw(
        &self,
        name: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        let ours = state.live_lock(name, now).is_some_and(|held| {
            has_stem(&held.token, stem) && (claim.is_none() || held.claim == claim)
        });
        if ours {
            state.locks.remove(name);
        }
        drop(state);
        if ours {
            self.announce_release(name);
        }
        Ok(ours)
    }

    async fn revoke(&self, name: &str) -> Result<bool, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        if state.live_lock(name, now).is_none() {
            return Ok(false);
        }
        let Some(held) = state.locks.remove(name) else {
            return Ok(false);
        };
        if held.token == SHARED_MARKER {
            state.readers.remove(name);
        }
        state
            .revoked
            .insert(name.to_owned(), (held.token, held.expires));
        state.note_write(now);
        drop(state);
        self.announce_release(name);
        Ok(true)
    }

    async fn revoked_fence(&self, name: &str) -> Result<Option<u64>, BackendError> {
        let now = Instant::now();
        let state = self.state();
        Ok(state
            .revoked
            .get(name)
            .filter(|(_, until)| *until > now)
            .and_then(|(token, _)| fence_of(token)))
    }

    async fn was_revoked(&self, name: &str, token: &str) -> Result<bool, BackendError> {
        let now = Instant::now();
        let state = self.state();
        Ok(state
            .revoked
            .get(name)
            .is_some_and(|(revoked, until)| revoked == token && *until > now))
    }

    async fn renew(
        &self,
        name: &str,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<RenewOutcome, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        match state.live_lock(name, now) {
            None => Ok(RenewOutcome::NotHeld),
            Some(held) if held.token != token => Ok(RenewOutcome::NotOwner),
            Some(held) => {
                held.expires = now + ttl;
                Ok(RenewOutcome::Renewed(Lease {
                    // Every token stored here was issued here, with its fence.
                    fence: fence_of(token).unwrap_or(0),
                    ttl,
                    replicas_acked: acked(ack),
                }))
            }
        }
    }

    async fn inspect(&self, name: &str) -> Result<Option<Inspection>, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        Ok(state.live_lock(name, now).map(|held| held.inspection(now)))
    }

    /// Pages in name order; the cursor is the last name listed.
    async fn list(
        &self,
        prefix: &str,
        cursor: ListCursor,
        limit: usize,
    ) -> Result<ListPage, BackendError> {
        let now = Instant::now();
        let state = self.state();
        let after = cursor.after.as_deref().unwrap_or("");
        let mut names: Vec<&String> = state
            .locks
            .iter()
            .filter(|(name, held)| {
                held.expires > now && name.starts_with(prefix) && name.as_str() > after
            })
            .map(|(name, _)| name)
            .collect();
        names.sort_unstable();
        let more = names.len() > limit;
        let locks: Vec<(String, Inspection)> = names
            .into_iter()
            .take(limit)
            .map(|name| {
                let held = &state.locks[name];
                (name.clone(), held.inspection(now))
            })
            .collect();
        let next = more.then(|| ListCursor {
            after: locks.last().map(|(name, _)| name.clone()),
            ..ListCursor::default()
        });
        Ok(ListPage { locks, next })
    }

    async fn ping(&self) -> Result<(), BackendError> {
        Ok(())
    }

    fn sees_every_release(&self) -> bool {
        // Nothing but this process changes the store.
        true
    }

    async fn watch_releases(&self, name: &str) -> ReleaseFeed {
        feed(&self.watched, name)
    }

    async fn watch_grants(&self, name: &str) -> ReleaseFeed {
        feed(&self.granted, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(10);

    fn lease(outcome: AcquireOutcome) -> Lease {
        match outcome {
            AcquireOutcome::Granted(lease) | AcquireOutcome::AlreadyHeld(lease) => lease,
            AcquireOutcome::Held { .. }
            | AcquireOutcome::HeldShared { .. }
            | AcquireOutcome::LimitDiffers { .. } => panic!("expected a grant, got {outcome:?}"),
        }
    }

    async fn grant(b: &MemoryBackend, name: &str, stem: &str) -> String {
        let fence = lease(
            b.acquire(name, GrantAttempt::new(stem, TTL))
                .await
                .expect("acquire"),
        )
        .fence;
        token(stem, fence)
    }

    /// Only the holder's token releases or renews; others are told who is wrong.
    #[tokio::test(start_paused = true)]
    async fn release_and_renew_are_for_the_holder_only() {
        let b = MemoryBackend::new();
        let t1 = grant(&b, "a", "s1").await;
        assert_eq!(
            b.acquire("a", GrantAttempt::new("s2", TTL)).await,
            Ok(AcquireOutcome::Held { ttl: Some(TTL) })
        );
        assert_eq!(b.release("a", "s1").await, Ok(ReleaseOutcome::NotOwner));
        assert_eq!(
            b.renew("a", "s2.1", TTL, None).await,
            Ok(RenewOutcome::NotOwner)
        );
        assert!(matches!(
            b.renew("a", &t1, TTL, None).await,
            Ok(RenewOutcome::Renewed(_))
        ));
        assert_eq!(b.release("a", &t1).await, Ok(ReleaseOutcome::Released));
        assert_eq!(b.release("a", &t1).await, Ok(ReleaseOutcome::NotHeld));
        assert_eq!(
            b.renew("a", &t1, TTL, None).await,
            Ok(RenewOutcome::NotHeld)
        );
    }

    /// A lease ends at its ttl, and a renewal moves the end.
    #[tokio::test(start_paused = true)]
    async fn leases_expire_and_renewals_extend_them() {
        let b = MemoryBackend::new();
        let t1 = grant(&b, "a", "s1").await;
        tokio::time::advance(Duration::from_secs(6)).await;
        b.renew("a", &t1, TTL, None).await.expect("renew");
        tokio::time::advance(Duration::from_secs(6)).await;
        let seen = b.inspect("a").await.expect("inspect").expect("still held");
        assert_eq!(seen.ttl, Some(Duration::from_secs(4)));
        assert_eq!(seen.fence, fence_of(&t1));
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(b.inspect("a").await, Ok(None));
        assert!(matches!(
            b.acquire("a", GrantAttempt::new("s2", TTL)).await,
            Ok(AcquireOutcome::Granted(_))
        ));
    }

    /// Fences increase with every grant, across names sharing the counter.
    #[tokio::test(start_paused = true)]
    async fn fences_increase_across_grants() {
        let b = MemoryBackend::new();
        let mut last = 0;
        for (i, name) in ["a", "b", "a", "a", "c"].iter().enumerate() {
            let token = grant(&b, name, &format!("s{i}")).await;
            let fence = fence_of(&token).expect("fence");
            assert!(fence > last, "{fence} after {last}");
            last = fence;
            b.release(name, &token).await.expect("release");
        }
    }

    /// The same stem acquiring again gets its own grant back: same fence, remaining ttl.
    #[tokio::test(start_paused = true)]
    async fn a_repeated_acquire_with_the_same_stem_is_a_replay() {
        let b = MemoryBackend::new();
        let fence = lease(
            b.acquire("a", GrantAttempt::new("s1", TTL))
                .await
                .expect("acquire"),
        )
        .fence;
        tokio::time::advance(Duration::from_secs(3)).await;
        let replay = b
            .acquire("a", GrantAttempt::new("s1", TTL))
            .await
            .expect("replay");
        let expected = Lease {
            fence,
            ttl: Duration::from_secs(7),
            replicas_acked: None,
        };
        assert_eq!(replay, AcquireOutcome::AlreadyHeld(expected));
    }

    /// A withdrawal removes a grant of its stem only, and with a claim only while that claim is
    /// the grant's last: a replay by a later attempt protects the grant from an earlier
    /// attempt's withdrawal.
    #[tokio::test(start_paused = true)]
    async fn withdrawals_respect_stems_and_claims() {
        let b = MemoryBackend::new();
        grant(&b, "a", "s1").await;
        assert_eq!(b.withdraw("a", "s2", None).await, Ok(false));
        assert_eq!(b.withdraw("a", "s1", None).await, Ok(true));
        assert_eq!(b.inspect("a").await, Ok(None));

        b.acquire(
            "a",
            GrantAttempt {
                claim: Some(Claim(1)),
                ..GrantAttempt::new("k", TTL)
            },
        )
        .await
        .expect("first");
        b.acquire(
            "a",
            GrantAttempt {
                claim: Some(Claim(2)),
                ..GrantAttempt::new("k", TTL)
            },
        )
        .await
        .expect("replay");
        assert_eq!(b.withdraw("a", "k", Some(Claim(1))).await, Ok(false));
        assert!(b.inspect("a").await.expect("inspect").is_some());
        assert_eq!(b.withdraw("a", "k", Some(Claim(2))).await, Ok(true));
    }

    /// A release is announced to watchers of the name, and only to them.
    #[tokio::test(start_paused = true)]
    async fn releases_are_announced_to_watchers() {
        let b = MemoryBackend::new();
        let feed = b.watch_releases("a").await;
        let mut rx = feed.receiver();
        rx.borrow_and_update();
        let ta = grant(&b, "a", "s1").await;
        let tb = grant(&b, "b", "s1").await;
        b.release("b", &tb).await.expect("release");
        assert!(
            !rx.has_changed().expect("open"),
            "another name's release is not ours"
        );
        b.release("a", "s2.1").await.expect("release");
        assert!(
            !rx.has_changed().expect("open"),
            "a refused release announces nothing"
        );
        b.release("a", &ta).await.expect("release");
        assert!(rx.has_changed().expect("open"));
        drop((rx, feed));
        assert!(
            b.watched.lock().expect("lock").is_empty(),
            "unwatched names are forgotten"
        );
    }

    /// Expired entries do not accumulate.
    #[tokio::test(start_paused = true)]
    async fn expired_entries_are_swept() {
        let b = MemoryBackend::new();
        for i in 0..2000 {
            b.acquire(
                &format!("n{i}"),
                GrantAttempt::new("s", Duration::from_millis(10)),
            )
            .await
            .expect("acquire");
        }
        tokio::time::advance(Duration::from_secs(2)).await;
        for i in 0..2100 {
            b.acquire(
                &format!("m{i}"),
                GrantAttempt::new("s", Duration::from_millis(10)),
            )
            .await
            .expect("acquire");
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        let state = b.state();
        assert!(state.locks.len() < 2100, "{} locks left", state.locks.len());
        assert!(state.locks.keys().all(|k| k.starts_with('m')));
    }
}
