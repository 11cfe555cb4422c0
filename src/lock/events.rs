//! Watching a lock: what happens to a name, as events (`GET /locks/{name}/events`).
//!
//! All watchers of a name in one gateway share one observer, so the cost is per watched name,
//! not per watcher. The observer subscribes to the name's grant announcements (every acquire
//! script publishes one) and release announcements (the same feed waiters use), then looks at
//! the lock (one inspect) whenever either changes, and when the current lease should have
//! ended, so that an expiry is noticed at its time without polling. Where releases by other
//! Redis clients are not announced (no keyspace notifications), it also looks every 250 ms
//! while the lock is held. Comparing what it sees with what it saw last gives the events:
//! `acquired` (a new fence), then `released`, `expired` (the lease ran out) or `revoked` (an
//! operator revoked that fence). The observer is `super::observer`; this module shares it.
//!
//! On Redlock a new grant is told once its fence is final: each node gives it a fence of its
//! own, then the gateway raises them all to the highest ([`Backend::inspect_settled`]). That
//! is about one round trip after the grant when every node holds it, and up to two per-node
//! timeouts when one does not (a node down, or held by another client's leftover grant).
//!
//! A watcher first gets the lock as it is (`state`), then every event after it, in order.
//! Changes closer together than one look can merge: a grant and release between two looks are
//! not seen, a release followed at once by another grant is seen as both. Every watcher of a
//! gateway sees the same sequence.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::broadcast;

use super::LockName;
use super::error::LockError;
pub use super::observer::{Held, LockEvent};
use super::observer::{Shared, observe};
use crate::backend::{AbortOnDrop, Backend};

/// The watches of one gateway, at most `max` watchers in all. Clones share them.
#[derive(Debug, Clone)]
pub struct Watches {
    max: usize,
    watchers: Arc<AtomicUsize>,
    by_name: Arc<Mutex<HashMap<String, Weak<Watch>>>>,
    /// Observers running: they share one budget of looks (see `observer`).
    observers: Arc<AtomicUsize>,
}

/// The shared observer of one name.
#[derive(Debug)]
struct Watch {
    name: String,
    shared: Arc<Shared>,
    by_name: Arc<Mutex<HashMap<String, Weak<Watch>>>>,
    _observer: AbortOnDrop,
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
            observers: Arc::default(),
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
            let last = watch.shared.last();
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
        let (shared, observer) = observe(backend, name, &self.observers).await?;
        let watch = Arc::new(Watch {
            name: name.as_str().to_owned(),
            shared,
            by_name: self.by_name.clone(),
            _observer: observer,
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
