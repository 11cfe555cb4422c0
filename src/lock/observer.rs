//! The observer of one watched name (see [`super::events`]): a task that looks at the lock
//! whenever its grant or release feed changes, when its lease should have ended, and (where
//! releases by other Redis clients are not announced) every [`FOREIGN_RELEASE_RECHECK`] while
//! it is held, and turns what it sees into events for every watcher of the name.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::broadcast;
use tokio::time::Instant;

use super::LockName;
use super::budget::foreign_release_recheck;
use super::error::LockError;
use crate::backend::fence::granted_at;
use crate::backend::{AbortOnDrop, Backend, Holder, Inspection, LeaseStore, Leased, Watched};

/// Where releases by other clients are not announced, how often a held, watched lock is
/// looked at.
pub const FOREIGN_RELEASE_RECHECK: Duration = Duration::from_millis(250);
/// (Those looks of all observers of a gateway share one budget, as the waiters' do: see
/// [`super::budget::foreign_release_recheck`].)
/// After a failed look, wait this long before the next.
const RETRY_AFTER_ERROR: Duration = Duration::from_millis(500);
/// A lease is looked at this long after it should have ended (Redis expires a key when it is
/// read past its time, so one look then sees it gone).
const EXPIRY_MARGIN: Duration = Duration::from_millis(2);
/// While a new grant's fence may still change (Redlock), how often it is looked at again.
const SETTLE_RECHECK: Duration = Duration::from_millis(5);

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

/// What the observer of a name shares with its watchers.
#[derive(Debug)]
pub(super) struct Shared {
    /// Sequence number of the last event, and the lock as last seen.
    pub(super) last: Mutex<(u64, Option<Held>)>,
    pub(super) events: broadcast::Sender<(u64, LockEvent)>,
}

impl Shared {
    /// The sequence number of the last event and the lock as last seen, locked. (No code
    /// panics while holding it, so a poisoned lock is taken as it is.)
    pub(super) fn last(&self) -> std::sync::MutexGuard<'_, (u64, Option<Held>)> {
        self.last.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Looks at `name` once, and starts observing it: the state its watchers share, and the task.
pub(super) async fn observe(
    backend: &Arc<Backend>,
    name: &LockName,
    observers: &Arc<AtomicUsize>,
) -> Result<(Arc<Shared>, AbortOnDrop), LockError> {
    let grants = backend.watch(Watched::Grants(name)).await;
    let releases = backend.watch(Watched::Releases(Leased::Lock(name))).await;
    let mut feeds = (grants.receiver(), releases.receiver());
    feeds.0.borrow_and_update();
    feeds.1.borrow_and_update();
    let (looked, first) = look(backend, name, |seen| seen.is_some()).await?;
    let shared = Arc::new(Shared {
        last: Mutex::new((0, first.clone())),
        events: broadcast::channel(BACKLOG).0,
    });
    observers.fetch_add(1, Ordering::Relaxed);
    let observer = Observer {
        backend: backend.clone(),
        name: name.clone(),
        shared: shared.clone(),
        expires: expiry(looked, first.as_ref()),
        running: Running(observers.clone()),
    };
    let task = tokio::spawn(observer.run(feeds, (grants, releases)));
    Ok((shared, AbortOnDrop(task)))
}

fn held(seen: Inspection) -> Held {
    Held {
        fence: seen.fence,
        ttl: seen.ttl,
        granted_at: seen.fence.and_then(granted_at),
        holder: seen.holder,
    }
}

/// Looks at the lock `name`, and when. A grant `is_new` says is new is looked at again every
/// [`SETTLE_RECHECK`] until its fence is certainly final, for at most the time a fence takes
/// to settle (Redlock: see [`Backend::inspect_settled`]); elsewhere one look.
async fn look(
    backend: &Backend,
    name: &LockName,
    is_new: impl Fn(Option<&Held>) -> bool,
) -> Result<(Instant, Option<Held>), LockError> {
    let until = Instant::now() + backend.fence_settles_within();
    loop {
        // Taken before the look: the lease is then thought to end a little early, never late.
        let looked = Instant::now();
        let (seen, settled) = backend.inspect_settled(name.as_str()).await?;
        let seen = seen.map(held);
        if settled || looked >= until || !is_new(seen.as_ref()) {
            return Ok((looked, seen));
        }
        tokio::time::sleep(SETTLE_RECHECK).await;
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
    /// Counts this observer among the gateway's while it runs.
    running: Running,
}

/// One observer counted among those running, until dropped (with its task, however it ends).
struct Running(Arc<AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

type Feeds = (crate::watch::Receiver<()>, crate::watch::Receiver<()>);

impl Observer {
    async fn run(
        mut self,
        mut feeds: Feeds,
        // Kept for as long as the observer runs: they hold the subscriptions.
        _subscriptions: (crate::backend::ReleaseFeed, crate::backend::ReleaseFeed),
    ) {
        let sees_every_release = self.backend.sees_every_release(Leased::Lock(&self.name));
        loop {
            let is_held = self.shared.last().1.is_some();
            let recheck = (is_held && !sees_every_release).then(|| {
                let observers = self.running.0.load(Ordering::Relaxed);
                Instant::now() + foreign_release_recheck(FOREIGN_RELEASE_RECHECK, observers)
            });
            let wake = match (self.expires.map(|at| at + EXPIRY_MARGIN), recheck) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            tokio::select! {
                biased;
                changed = feeds.0.changed() => if changed.is_err() { return },
                changed = feeds.1.changed() => if changed.is_err() { return },
                () = crate::backend::sleep_until_some(wake) => {}
            }
            feeds.0.borrow_and_update();
            feeds.1.borrow_and_update();
            let (looked, seen) = match look(&self.backend, &self.name, |seen| {
                self.is_new_grant(seen)
            })
            .await
            {
                Ok(looked) => looked,
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
            let mut last = self.shared.last();
            for event in events {
                last.0 += 1;
                // No watcher right now is not an error: they come and go.
                let _ = self.shared.events.send((last.0, event));
            }
            last.1 = seen;
        }
    }

    /// Whether `seen` is a grant other than the one seen last.
    fn is_new_grant(&self, seen: Option<&Held>) -> bool {
        let last = self.shared.last();
        seen.is_some_and(|now| {
            last.1
                .as_ref()
                .is_none_or(|before| before.fence != now.fence)
        })
    }

    /// The events between what was seen last and `seen` (looked at `looked`).
    async fn transitions(
        &self,
        seen: Option<Held>,
        previous_expiry: Option<Instant>,
        looked: Instant,
    ) -> Vec<LockEvent> {
        let last = self.shared.last().1.clone();
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
