//! An in-process lock store with the same semantics as the Redis backend.
//!
//! It exists for `--dev` (run the gateway with nothing else installed) and for fast in-process
//! API tests. It is never a stand-in for Redis: locks live in one process, vanish with it, and
//! are invisible to every other gateway. The server only builds it when `--dev` is given.
//!
//! Each operation runs in one short critical section under a mutex, which gives the same
//! atomicity a Lua script gives on Redis. Time comes from `tokio::time`, so tests can pause and
//! advance it. There are no replicas: a request for replica acknowledgement gets 0.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::time::Instant;

use super::fence::next_fence;
use super::{
    AcquireOutcome, BackendError, Inspection, Lease, LockBackend, ReleaseFeed, ReleaseOutcome,
    RenewOutcome, ReplicaAck,
};

/// Expired entries are swept after this many writes, or after a quarter as many writes as
/// there are entries if that is more. A write adds at most two entries, so the writes always
/// catch up with the threshold (after at most half the entries' count), and a sweep costs O(1)
/// amortized per write.
const MIN_WRITES_BETWEEN_SWEEPS: usize = 1024;

#[derive(Debug)]
pub struct MemoryBackend {
    state: Mutex<State>,
    fence_retention: Duration,
    /// Release announcements, for names somebody watches.
    watched: Arc<Mutex<HashMap<String, watch::Sender<()>>>>,
}

/// Keeps a name in `watched` while its feed lives.
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
    counters: HashMap<String, Counter>,
    writes_since_sweep: usize,
}

#[derive(Debug)]
struct Held {
    token: String,
    expires: Instant,
}

#[derive(Debug)]
struct Counter {
    value: u64,
    expires: Instant,
}

impl MemoryBackend {
    pub fn new(fence_retention: Duration) -> Self {
        Self {
            state: Mutex::new(State::default()),
            fence_retention,
            watched: Arc::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-applied operation behind (each
        // operation mutates at most two map entries after all checks), so poisoning is ignored.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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

    fn live_counter(&mut self, name: &str, now: Instant) -> Option<u64> {
        if self.counters.get(name).is_some_and(|c| c.expires <= now) {
            self.counters.remove(name);
        }
        self.counters.get(name).map(|c| c.value)
    }

    /// Issues the next fence for `name` and keeps the counter for `retention`.
    fn issue_fence(&mut self, name: &str, now: Instant, retention: Duration) -> u64 {
        let previous = self.live_counter(name, now).unwrap_or(0);
        let fence = next_fence(previous, wall_clock_micros());
        self.counters.insert(
            name.to_owned(),
            Counter {
                value: fence,
                expires: now + retention,
            },
        );
        fence
    }

    /// The current fence, issuing a new one if the counter is gone (it then covers the
    /// current holder too: a larger fence is always safe to hand to the holder).
    fn current_fence(&mut self, name: &str, now: Instant, retention: Duration) -> u64 {
        match self.counters.get_mut(name).filter(|c| c.expires > now) {
            Some(counter) => {
                counter.expires = now + retention;
                counter.value
            }
            None => self.issue_fence(name, now, retention),
        }
    }

    fn note_write(&mut self, now: Instant) {
        self.writes_since_sweep += 1;
        let threshold = MIN_WRITES_BETWEEN_SWEEPS.max((self.locks.len() + self.counters.len()) / 4);
        if self.writes_since_sweep >= threshold {
            self.writes_since_sweep = 0;
            self.locks.retain(|_, held| held.expires > now);
            self.counters.retain(|_, counter| counter.expires > now);
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
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<AcquireOutcome, BackendError> {
        let now = Instant::now();
        let retention = self.fence_retention;
        let mut state = self.state();
        if let Some(held) = state.live_lock(name, now) {
            if held.token != token {
                return Ok(AcquireOutcome::Held {
                    ttl: Some(held.expires - now),
                });
            }
            let remaining = held.expires - now;
            let fence = state.current_fence(name, now, retention);
            let lease = Lease {
                fence,
                ttl: remaining,
                replicas_acked: acked(ack),
            };
            return Ok(AcquireOutcome::AlreadyHeld(lease));
        }
        let fence = state.issue_fence(name, now, retention);
        state.locks.insert(
            name.to_owned(),
            Held {
                token: token.to_owned(),
                expires: now + ttl,
            },
        );
        state.note_write(now);
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
            let watched = self.watched.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(tx) = watched.get(name) {
                tx.send_replace(());
            }
        }
        Ok(outcome)
    }

    async fn renew(
        &self,
        name: &str,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<RenewOutcome, BackendError> {
        let now = Instant::now();
        let retention = self.fence_retention;
        let mut state = self.state();
        match state.live_lock(name, now) {
            None => Ok(RenewOutcome::NotHeld),
            Some(held) if held.token != token => Ok(RenewOutcome::NotOwner),
            Some(held) => {
                held.expires = now + ttl;
                let fence = state.current_fence(name, now, retention);
                Ok(RenewOutcome::Renewed(Lease {
                    fence,
                    ttl,
                    replicas_acked: acked(ack),
                }))
            }
        }
    }

    async fn inspect(&self, name: &str) -> Result<Option<Inspection>, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        let Some(held) = state.live_lock(name, now) else {
            return Ok(None);
        };
        let ttl = Some(held.expires - now);
        let fence = state.live_counter(name, now);
        Ok(Some(Inspection { ttl, fence }))
    }

    async fn ping(&self) -> Result<(), BackendError> {
        Ok(())
    }

    async fn watch_releases(&self, name: &str) -> ReleaseFeed {
        let mut watched = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        let receiver = watched
            .entry(name.to_owned())
            .or_insert_with(|| watch::channel(()).0)
            .subscribe();
        let guard = Watching {
            watched: self.watched.clone(),
            name: name.to_owned(),
        };
        ReleaseFeed::new(receiver, guard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(10);

    fn backend() -> MemoryBackend {
        MemoryBackend::new(Duration::from_secs(3600))
    }

    fn fence_of(outcome: AcquireOutcome) -> u64 {
        match outcome {
            AcquireOutcome::Granted(lease) | AcquireOutcome::AlreadyHeld(lease) => lease.fence,
            AcquireOutcome::Held { .. } => panic!("expected a grant, got {outcome:?}"),
        }
    }

    /// Only the holder's token releases or renews; others are told who is wrong.
    #[tokio::test(start_paused = true)]
    async fn release_and_renew_are_for_the_holder_only() {
        let b = backend();
        assert!(matches!(
            b.acquire("a", "t1", TTL, None).await,
            Ok(AcquireOutcome::Granted(_))
        ));
        assert_eq!(
            b.acquire("a", "t2", TTL, None).await,
            Ok(AcquireOutcome::Held { ttl: Some(TTL) })
        );
        assert_eq!(b.release("a", "t2").await, Ok(ReleaseOutcome::NotOwner));
        assert_eq!(
            b.renew("a", "t2", TTL, None).await,
            Ok(RenewOutcome::NotOwner)
        );
        assert!(matches!(
            b.renew("a", "t1", TTL, None).await,
            Ok(RenewOutcome::Renewed(_))
        ));
        assert_eq!(b.release("a", "t1").await, Ok(ReleaseOutcome::Released));
        assert_eq!(b.release("a", "t1").await, Ok(ReleaseOutcome::NotHeld));
        assert_eq!(
            b.renew("a", "t1", TTL, None).await,
            Ok(RenewOutcome::NotHeld)
        );
    }

    /// A lease ends at its ttl, and a renewal moves the end.
    #[tokio::test(start_paused = true)]
    async fn leases_expire_and_renewals_extend_them() {
        let b = backend();
        fence_of(b.acquire("a", "t1", TTL, None).await.expect("acquire"));
        tokio::time::advance(Duration::from_secs(6)).await;
        b.renew("a", "t1", TTL, None).await.expect("renew");
        tokio::time::advance(Duration::from_secs(6)).await;
        let seen = b.inspect("a").await.expect("inspect").expect("still held");
        assert_eq!(seen.ttl, Some(Duration::from_secs(4)));
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(b.inspect("a").await, Ok(None));
        assert!(matches!(
            b.acquire("a", "t2", TTL, None).await,
            Ok(AcquireOutcome::Granted(_))
        ));
    }

    /// Fences increase with every grant, also once the counter has expired.
    #[tokio::test(start_paused = true)]
    async fn fences_increase_across_grants_and_counter_loss() {
        let b = MemoryBackend::new(Duration::from_secs(60));
        let first = fence_of(b.acquire("a", "t1", TTL, None).await.expect("acquire"));
        b.release("a", "t1").await.expect("release");
        let second = fence_of(b.acquire("a", "t2", TTL, None).await.expect("acquire"));
        assert!(second > first);
        b.release("a", "t2").await.expect("release");
        tokio::time::advance(Duration::from_secs(120)).await;
        let inspect_gap = b.inspect("a").await.expect("inspect");
        assert_eq!(inspect_gap, None);
        let third = fence_of(b.acquire("a", "t3", TTL, None).await.expect("acquire"));
        assert!(
            third > second,
            "{third} must exceed {second} after the counter expired"
        );
    }

    /// The same token acquiring again gets its own grant back, same fence, remaining ttl.
    #[tokio::test(start_paused = true)]
    async fn a_repeated_acquire_with_the_same_token_is_a_replay() {
        let b = backend();
        let fence = fence_of(b.acquire("a", "t1", TTL, None).await.expect("acquire"));
        tokio::time::advance(Duration::from_secs(3)).await;
        let replay = b.acquire("a", "t1", TTL, None).await.expect("replay");
        let expected = Lease {
            fence,
            ttl: Duration::from_secs(7),
            replicas_acked: None,
        };
        assert_eq!(replay, AcquireOutcome::AlreadyHeld(expected));
    }

    /// A release is announced to watchers of the name, and only to them.
    #[tokio::test(start_paused = true)]
    async fn releases_are_announced_to_watchers() {
        let b = backend();
        let feed = b.watch_releases("a").await;
        let mut rx = feed.receiver();
        rx.borrow_and_update();
        b.acquire("a", "t1", TTL, None).await.expect("acquire");
        b.acquire("b", "t1", TTL, None).await.expect("acquire");
        b.release("b", "t1").await.expect("release");
        assert!(
            !rx.has_changed().expect("open"),
            "another name's release is not ours"
        );
        b.release("a", "t2").await.expect("release");
        assert!(
            !rx.has_changed().expect("open"),
            "a refused release announces nothing"
        );
        b.release("a", "t1").await.expect("release");
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
        let b = MemoryBackend::new(Duration::from_secs(1));
        for i in 0..2000 {
            b.acquire(&format!("n{i}"), "t", Duration::from_millis(10), None)
                .await
                .expect("acquire");
        }
        tokio::time::advance(Duration::from_secs(2)).await;
        for i in 0..2100 {
            b.acquire(&format!("m{i}"), "t", Duration::from_millis(10), None)
                .await
                .expect("acquire");
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        let state = b.state();
        assert!(state.locks.len() < 2100, "{} locks left", state.locks.len());
        assert!(state.locks.keys().all(|k| k.starts_with('m')));
    }
}
