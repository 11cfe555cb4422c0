//! Watching a lock: what happens to a name, as events (`GET /locks/{name}/events`).
//!
//! All watchers of a name in one gateway share one observer, so the cost is per watched name,
//! not per watcher. The observer subscribes to the name's grant announcements (every acquire
//! script publishes one) and release announcements (the same feed waiters use), then looks at
//! the lock (one inspect) whenever either changes, and when the current lease should have
//! ended, so that an expiry is noticed at its time without polling. Where releases by other
//! Redis clients are not announced (no keyspace notifications), it also looks every
//! [`FOREIGN_RELEASE_RECHECK`] while the lock is held. Comparing what it sees with what it
//! saw last gives the events: `acquired` (a new fence), then `released`, `expired` (the lease
//! ran out) or `revoked` (an operator revoked that fence).
//!
//! A watcher first gets the lock as it is (`state`), then every event after it, in order.
//! Changes closer together than one look can merge: a grant and release between two looks are
//! not seen, a release followed at once by another grant is seen as both. Every watcher of a
//! gateway sees the same sequence.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use tokio::sync::broadcast;
use tokio::time::Instant;

use super::LockName;
use super::error::LockError;
use crate::backend::fence::granted_at;
use crate::backend::{AbortOnDrop, Backend, Holder, Inspection, LeaseStore, Leased};

/// Where releases by other clients are not announced, how often a held, watched lock is
/// looked at.
pub const FOREIGN_RELEASE_RECHECK: Duration = Duration::from_millis(250);
/// After a failed look, wait this long before the next.
const RETRY_AFTER_ERROR: Duration = Duration::from_millis(500);
/// A lease is looked at this long after it should have ended (Redis expires a key when it is
/// read past its time, so one look then sees it gone).
const EXPIRY_MARGIN: Duration = Duration::from_millis(2);
/// Events kept for a slow watcher; one that falls further behind gets a fresh `state`.
const BACKLOG: usize = 16;

/// A held lock as a watcher sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    pub fence: Option<u64>,
    /// Lease left when it was looked at; `None` for a key without expiry.
    pub ttl: Option<Duration>,
    pub granted_at: Option<SystemTime>,
    pub holder: Option<Holder>,
}

/// What happened to a name.
#[derive(Debug, Clone, PartialEq)]
pub enum LockEvent {
    /// The lock as it is: first event of every watch, and again after a watcher fell behind.
    State(Option<Held>),
    Acquired(Held),
    Released {
        fence: Option<u64>,
    },
    Expired {
        fence: Option<u64>,
    },
    Revoked {
        fence: Option<u64>,
    },
}

/// The watches of one gateway, at most `max` watchers in all. Clones share them.
#[derive(Debug, Clone)]
pub struct Watches {
    max: usize,
    watchers: Arc<AtomicUsize>,
    by_name: Arc<Mutex<HashMap<String, Weak<Watch>>>>,
}

/// The shared observer of one name.
#[derive(Debug)]
struct Watch {
    name: String,
    shared: Arc<Shared>,
    by_name: Arc<Mutex<HashMap<String, Weak<Watch>>>>,
    _observer: AbortOnDrop,
}

#[derive(Debug)]
struct Shared {
    /// Sequence number of the last event, and the lock as last seen.
    last: Mutex<(u64, Option<Held>)>,
    events: broadcast::Sender<(u64, LockEvent)>,
}

/// One watcher: its first event is the state, then the events after it.
#[derive(Debug)]
pub struct Watcher {
    watch: Arc<Watch>,
    events: broadcast::Receiver<(u64, LockEvent)>,
    first: Option<LockEvent>,
    /// Events up to this sequence number are in the first event already.
    seen: u64,
    watchers: Arc<AtomicUsize>,
}

/// Too many watchers already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyWatchers;

impl Drop for Watch {
    fn drop(&mut self) {
        let mut by_name = self.by_name.lock().unwrap_or_else(|p| p.into_inner());
        if by_name
            .get(&self.name)
            .is_some_and(|weak| weak.strong_count() == 0)
        {
            by_name.remove(&self.name);
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.watchers.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Watches {
    pub fn new(max: usize) -> Self {
        Self {
            max,
            watchers: Arc::new(AtomicUsize::new(0)),
            by_name: Arc::default(),
        }
    }

    /// Watchers now, all names together.
    pub fn watchers(&self) -> usize {
        self.watchers.load(Ordering::Relaxed)
    }

    /// Takes one watcher slot, if one is left.
    pub fn reserve(&self) -> Result<WatcherSlot, LockError> {
        if self.watchers.fetch_add(1, Ordering::Relaxed) >= self.max {
            self.watchers.fetch_sub(1, Ordering::Relaxed);
            return Err(LockError::TooManyWatchers);
        }
        Ok(WatcherSlot {
            _slot: Counted(self.watchers.clone()),
        })
    }

    /// Starts watching `name`: the first event is the lock as it is now.
    pub async fn watch(
        &self,
        backend: &Arc<Backend>,
        name: &LockName,
    ) -> Result<Watcher, LockError> {
        if self.watchers.fetch_add(1, Ordering::Relaxed) >= self.max {
            self.watchers.fetch_sub(1, Ordering::Relaxed);
            return Err(LockError::TooManyWatchers);
        }
        let counted = Counted(self.watchers.clone());
        let existing = {
            let by_name = self.by_name.lock().unwrap_or_else(|p| p.into_inner());
            by_name.get(name.as_str()).and_then(Weak::upgrade)
        };
        let watch = match existing {
            Some(watch) => watch,
            None => self.start(backend, name).await?,
        };
        let (seen, state, events) = {
            let last = watch.shared.last.lock().unwrap_or_else(|p| p.into_inner());
            (last.0, last.1.clone(), watch.shared.events.subscribe())
        };
        Ok(Watcher {
            watch,
            events,
            first: Some(LockEvent::State(state)),
            seen,
            watchers: counted.keep(),
        })
    }

    /// A new observer of `name`: subscribed, then the lock looked at once, before it is shared.
    async fn start(
        &self,
        backend: &Arc<Backend>,
        name: &LockName,
    ) -> Result<Arc<Watch>, LockError> {
        let grants = backend.watch_grants(name.as_str()).await;
        let releases = backend.watch_releases(Leased::Lock(name)).await;
        let mut feeds = (grants.receiver(), releases.receiver());
        feeds.0.borrow_and_update();
        feeds.1.borrow_and_update();
        let looked = Instant::now();
        let first = backend.inspect(name.as_str()).await?.map(held);
        let expires = expiry(looked, first.as_ref());
        let shared = Arc::new(Shared {
            last: Mutex::new((0, first)),
            events: broadcast::channel(BACKLOG).0,
        });
        let observer = Observer {
            backend: backend.clone(),
            name: name.clone(),
            shared: shared.clone(),
            expires,
        };
        let task = tokio::spawn(observer.run(feeds, (grants, releases)));
        let watch = Arc::new(Watch {
            name: name.as_str().to_owned(),
            shared,
            by_name: self.by_name.clone(),
            _observer: AbortOnDrop(task),
        });
        let mut by_name = self.by_name.lock().unwrap_or_else(|p| p.into_inner());
        // Another watcher may have started one meanwhile: share it, drop this one.
        if let Some(other) = by_name.get(name.as_str()).and_then(Weak::upgrade) {
            return Ok(other);
        }
        by_name.insert(name.as_str().to_owned(), Arc::downgrade(&watch));
        Ok(watch)
    }
}

/// One watcher slot held by a watch of something other than a name (a prefix: see
/// `super::prefix_events`), given back when dropped.
#[derive(Debug)]
pub struct WatcherSlot {
    _slot: Counted,
}

/// A watcher slot, given back if the watch does not start.
#[derive(Debug)]
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn keep(self) -> Arc<AtomicUsize> {
        let counter = self.0.clone();
        std::mem::forget(self);
        counter
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Watcher {
    /// The next event; `None` if the observer is gone.
    pub async fn next(&mut self) -> Option<LockEvent> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        loop {
            match self.events.recv().await {
                Ok((seq, _)) if seq <= self.seen => {}
                Ok((seq, event)) => {
                    self.seen = seq;
                    return Some(event);
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let last = self
                        .watch
                        .shared
                        .last
                        .lock()
                        .unwrap_or_else(|p| p.into_inner());
                    self.seen = last.0;
                    return Some(LockEvent::State(last.1.clone()));
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

fn held(seen: Inspection) -> Held {
    Held {
        fence: seen.fence,
        ttl: seen.ttl,
        granted_at: seen.fence.and_then(granted_at),
        holder: seen.holder,
    }
}

/// When the lease seen at `looked` ends.
fn expiry(looked: Instant, held: Option<&Held>) -> Option<Instant> {
    held.and_then(|h| h.ttl).map(|ttl| looked + ttl)
}

struct Observer {
    backend: Arc<Backend>,
    name: LockName,
    shared: Arc<Shared>,
    /// When the lease last seen ends.
    expires: Option<Instant>,
}

type Feeds = (
    tokio::sync::watch::Receiver<()>,
    tokio::sync::watch::Receiver<()>,
);

impl Observer {
    async fn run(
        mut self,
        mut feeds: Feeds,
        // Kept for as long as the observer runs: they hold the subscriptions.
        _subscriptions: (crate::backend::ReleaseFeed, crate::backend::ReleaseFeed),
    ) {
        let sees_every_release = self.backend.sees_every_release(Leased::Lock(&self.name));
        loop {
            let is_held = self
                .shared
                .last
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .1
                .is_some();
            let recheck =
                (is_held && !sees_every_release).then(|| Instant::now() + FOREIGN_RELEASE_RECHECK);
            let wake = match (self.expires.map(|at| at + EXPIRY_MARGIN), recheck) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            tokio::select! {
                changed = feeds.0.changed() => if changed.is_err() { return },
                changed = feeds.1.changed() => if changed.is_err() { return },
                () = crate::backend::sleep_until_some(wake) => {}
            }
            feeds.0.borrow_and_update();
            feeds.1.borrow_and_update();
            let looked = Instant::now();
            let seen = match self.backend.inspect(self.name.as_str()).await {
                Ok(seen) => seen.map(held),
                Err(err) => {
                    tracing::debug!(lock = %self.name, error = %err, "a watched lock could not be looked at; trying again");
                    tokio::time::sleep(RETRY_AFTER_ERROR).await;
                    continue;
                }
            };
            let previous_expiry = self.expires;
            self.expires = expiry(looked, seen.as_ref());
            let events = self
                .transitions(seen.clone(), previous_expiry, looked)
                .await;
            let mut last = self.shared.last.lock().unwrap_or_else(|p| p.into_inner());
            for event in events {
                last.0 += 1;
                // No watcher right now is not an error: they come and go.
                let _ = self.shared.events.send((last.0, event));
            }
            last.1 = seen;
        }
    }

    /// The events between what was seen last and `seen` (looked at `looked`).
    async fn transitions(
        &self,
        seen: Option<Held>,
        previous_expiry: Option<Instant>,
        looked: Instant,
    ) -> Vec<LockEvent> {
        let last = self
            .shared
            .last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .clone();
        let mut events = Vec::new();
        match (&last, &seen) {
            (Some(before), Some(now)) if before.fence == now.fence => {}
            (Some(before), _) => {
                events.push(self.end_of(before.fence, previous_expiry, looked).await);
            }
            (None, _) => {}
        }
        if let Some(now) = seen
            && last.as_ref().is_none_or(|before| before.fence != now.fence)
        {
            events.push(LockEvent::Acquired(now));
        }
        events
    }

    /// How the grant with `fence` ended: revoked, expired, or released.
    async fn end_of(
        &self,
        fence: Option<u64>,
        expiry: Option<Instant>,
        looked: Instant,
    ) -> LockEvent {
        if fence.is_some()
            && matches!(self.backend.revoked_fence(self.name.as_str()).await, Ok(revoked) if revoked == fence)
        {
            return LockEvent::Revoked { fence };
        }
        if expiry.is_some_and(|at| looked + EXPIRY_MARGIN >= at) {
            return LockEvent::Expired { fence };
        }
        LockEvent::Released { fence }
    }
}
