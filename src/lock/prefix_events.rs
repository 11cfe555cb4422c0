//! Watching a prefix: what happens to every lock whose name starts with it
//! (`GET /locks/events?prefix=`).
//!
//! A prefix watch follows names: each held name under the prefix is followed by the name's
//! shared observer ([`super::events`]), exactly as a watcher of that one name would follow it,
//! and names newly granted are learnt from one subscription to the grants under the prefix
//! ([`crate::backend::LeaseStore::watch_grants_under`]), so that a name nobody holds costs
//! nothing and the store is never walked while nothing changes. The watch starts with a walk
//! of the held names (each gives a `state` event), and walks again whenever announcements may
//! have been missed (the store's connection was lost, or this watch fell behind): a held name it
//! did not follow then gives a `state` too. A name newly granted gives `acquired`. A name that
//! has been free for [`LINGER`], with no grant announced since it became free, is let go.
//!
//! Events of one name come in the order its observer saw them (the same order every watcher of
//! that name gets); events of different names in the order they came. Each followed name takes
//! a watcher slot (`--max-watchers`), as the prefix watch itself does: when no slot is left for
//! a name, the watch ends with [`PrefixEvent::Overflow`].

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use futures_util::stream::{self, SelectAll, Stream, StreamExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::LockName;
use super::error::LockError;
use super::events::{LockEvent, Watcher, WatcherSlot, Watches};
use crate::backend::{
    AbortOnDrop, Backend, GrantNews, GrantedNames, LeaseStore, ListCursor, PageRequest,
};

/// How long a followed name stays followed once free (a name taken again soon is not looked
/// up again).
pub const LINGER: Duration = Duration::from_secs(5);
/// After a failed walk of the held names, wait this long before the next.
const RETRY_AFTER_ERROR: Duration = Duration::from_millis(500);
/// Names per step of a walk.
const WALK_PAGE: usize = 500;
/// Names whose observers start at once.
const FOLLOW_AT_ONCE: usize = 64;
/// Events kept for a slow client; the watch waits for it beyond that (and its names' observers
/// then hand it a fresh `state`, as to any watcher that fell behind).
const BACKLOG: usize = 64;

/// What a prefix watch tells.
#[derive(Debug, Clone, PartialEq)]
pub enum PrefixEvent {
    /// Something happened to a lock under the prefix.
    Lock(LockName, LockEvent),
    /// No watcher slot was left to follow this name: the watch ends here.
    Overflow(LockName),
}

/// One watch of a prefix: its events, until the store's side or a slot runs out.
#[derive(Debug)]
pub struct PrefixWatcher {
    events: mpsc::Receiver<PrefixEvent>,
    _task: AbortOnDrop,
    _slot: WatcherSlot,
}

impl PrefixWatcher {
    /// The next event; `None` when the watch ended.
    pub async fn next(&mut self) -> Option<PrefixEvent> {
        self.events.recv().await
    }
}

impl Watches {
    /// Starts watching every lock whose name starts with `prefix`: the first events are the
    /// held ones as they are now (`state`), once the walk of them succeeded.
    pub async fn watch_prefix(
        &self,
        backend: &Arc<Backend>,
        prefix: String,
    ) -> Result<PrefixWatcher, LockError> {
        let slot = self.reserve()?;
        // Subscribed before the walk: a grant during it is announced, not lost.
        let granted = backend.watch_grants_under(&prefix).await?;
        let (events, receiver) = mpsc::channel(BACKLOG);
        let mut follower = Follower {
            backend: backend.clone(),
            watches: self.clone(),
            prefix,
            followed: HashMap::new(),
            streams: SelectAll::new(),
            events,
        };
        let held = follower.walk().await?;
        let task = tokio::spawn(async move {
            if follower.follow_all(held, Why::Listed).await.is_ok() {
                follower.run(granted).await;
            }
        });
        Ok(PrefixWatcher {
            events: receiver,
            _task: AbortOnDrop(task),
            _slot: slot,
        })
    }
}

/// Why a name came to be followed: what its first event (the name as it is) means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    /// Found held by a walk: its `state` is told as it is.
    Listed,
    /// Announced granted: a held `state` is told as `acquired`; a free one (granted and freed
    /// between the announcement and the look) is not told.
    Granted,
}

/// A followed name.
#[derive(Debug)]
struct Followed {
    why: Why,
    /// Its first event is still to come.
    first: bool,
    /// Since when it is free, as last told.
    free_since: Option<Instant>,
    /// When a grant of it was last announced.
    announced: Option<Instant>,
    stop: CancellationToken,
}

type NameEvents = Pin<Box<dyn Stream<Item = (LockName, LockEvent)> + Send>>;

/// The client went away, or no slot was left: the watch ends.
struct Ended;

struct Follower {
    backend: Arc<Backend>,
    watches: Watches,
    prefix: String,
    followed: HashMap<LockName, Followed>,
    streams: SelectAll<NameEvents>,
    events: mpsc::Sender<PrefixEvent>,
}

impl Follower {
    async fn run(mut self, mut granted: GrantedNames) {
        let mut sweep = tokio::time::interval(LINGER / 5);
        let mut walk_at: Option<Instant> = None;
        loop {
            // In a fixed order (the simulation replays a seed byte for byte): the rare branches
            // first; a name's events before the news of new grants, whose flood ends in a
            // `Missed` and a walk, never in a lost event of a followed name.
            tokio::select! {
                biased;
                () = self.events.closed() => return,
                _ = sweep.tick() => self.let_go(),
                () = crate::backend::sleep_until_some(walk_at) => {
                    walk_at = None;
                    match self.walk().await {
                        Ok(held) => {
                            let new: Vec<LockName> = held
                                .into_iter()
                                .filter(|name| !self.followed.contains_key(name))
                                .collect();
                            if self.follow_all(new, Why::Listed).await.is_err() {
                                return;
                            }
                        }
                        Err(err) => {
                            tracing::debug!(error = %err, "a watched prefix could not be walked; trying again");
                            walk_at = Some(Instant::now() + RETRY_AFTER_ERROR);
                        }
                    }
                }
                Some((name, event)) = self.streams.next() => {
                    if self.tell(name, event).await.is_err() {
                        return;
                    }
                }
                news = granted.next() => match news {
                    None => return,
                    Some(GrantNews::Granted(name)) => {
                        let Ok(name) = LockName::from_string(name) else { continue };
                        if let Some(followed) = self.followed.get_mut(&name) {
                            followed.announced = Some(Instant::now());
                        } else if self.follow_all(vec![name], Why::Granted).await.is_err() {
                            return;
                        }
                    }
                    Some(GrantNews::Missed) => walk_at = Some(Instant::now()),
                },
            }
        }
    }

    /// The names held under the prefix now.
    fn walk(&self) -> impl Future<Output = Result<Vec<LockName>, LockError>> + Send + 'static {
        walk(self.backend.clone(), self.prefix.clone())
    }

    /// Follows each of `names` with its observer (started [`FOLLOW_AT_ONCE`] at a time: each
    /// subscribes and looks once).
    async fn follow_all(&mut self, names: Vec<LockName>, why: Why) -> Result<(), Ended> {
        let mut names = names.into_iter().peekable();
        while names.peek().is_some() {
            let batch: Vec<LockName> = names.by_ref().take(FOLLOW_AT_ONCE).collect();
            let watchers = join_all(
                batch
                    .iter()
                    .map(|name| self.watches.watch(&self.backend, name)),
            )
            .await;
            for (name, watcher) in batch.into_iter().zip(watchers) {
                self.follow(name, watcher, why).await?;
            }
        }
        Ok(())
    }

    /// Follows `name` with `watcher`, if it could be had.
    async fn follow(
        &mut self,
        name: LockName,
        watcher: Result<Watcher, LockError>,
        why: Why,
    ) -> Result<(), Ended> {
        let watcher = match watcher {
            Ok(watcher) => watcher,
            Err(LockError::TooManyWatchers) => {
                let _ = self.events.send(PrefixEvent::Overflow(name)).await;
                return Err(Ended);
            }
            Err(err) => {
                // The store did not answer the first look: its next grant's announcement, or
                // the next walk, tries again.
                tracing::debug!(lock = %name, error = %err, "a lock under a watched prefix could not be looked at");
                return Ok(());
            }
        };
        let stop = CancellationToken::new();
        let events = stream::unfold(
            (name.clone(), watcher, stop.clone()),
            |(name, mut watcher, stop)| async move {
                let event = tokio::select! {
                    biased;
                    event = watcher.next() => event?,
                    () = stop.cancelled() => return None,
                };
                Some(((name.clone(), event), (name, watcher, stop)))
            },
        );
        self.streams.push(Box::pin(events));
        self.followed.insert(
            name,
            Followed {
                why,
                first: true,
                free_since: None,
                announced: None,
                stop,
            },
        );
        Ok(())
    }

    /// Passes an event of a followed name on.
    async fn tell(&mut self, name: LockName, event: LockEvent) -> Result<(), Ended> {
        let Some(followed) = self.followed.get_mut(&name) else {
            return Ok(());
        };
        let first = std::mem::replace(&mut followed.first, false);
        followed.free_since = match &event {
            LockEvent::State(Some(_)) | LockEvent::Acquired(_) => None,
            _ => Some(followed.free_since.unwrap_or_else(Instant::now)),
        };
        let event = match (first, followed.why, event) {
            (true, Why::Granted, LockEvent::State(Some(held))) => LockEvent::Acquired(held),
            (true, Why::Granted, LockEvent::State(None)) => return Ok(()),
            (_, _, event) => event,
        };
        self.events
            .send(PrefixEvent::Lock(name, event))
            .await
            .map_err(|_| Ended)
    }

    /// Stops following the names free for [`LINGER`] with no grant announced since.
    fn let_go(&mut self) {
        let now = Instant::now();
        self.followed.retain(|_, followed| {
            // A grant announced since it became free and not seen yet (or granted and freed
            // between two looks) keeps it followed for another LINGER from the announcement.
            let keep = followed.free_since.is_none_or(|since| {
                now < followed.announced.map_or(since, |at| at.max(since)) + LINGER
            });
            if !keep {
                followed.stop.cancel();
            }
            keep
        });
    }
}

/// The names held under `prefix` now.
async fn walk(backend: Arc<Backend>, prefix: String) -> Result<Vec<LockName>, LockError> {
    let mut held = Vec::new();
    let mut cursor = ListCursor::default();
    loop {
        let request = PageRequest {
            prefix: &prefix,
            cursor,
            limit: WALK_PAGE,
        };
        let page = backend.list(request).await?;
        held.extend(
            page.found
                .into_iter()
                .filter_map(|(name, _)| LockName::from_string(name).ok()),
        );
        match page.next {
            Some(next) => cursor = next,
            None => return Ok(held),
        }
    }
}
