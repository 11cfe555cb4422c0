//! Announcements of grants under a name prefix ([`GrantedNames`]): how a watcher of a whole
//! prefix (`GET /locks/events?prefix=`) learns which names to look at, without walking the
//! store. On Redis it is one pattern subscription per gateway, whatever the prefixes watched
//! (`PSUBSCRIBE <key prefix>{*}:acquired`), held only while somebody watches; the gateway
//! routes each announcement to the watches of the prefixes it falls under
//! (`backend::redis::notify`), each into its own [`Announcements`] queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{broadcast, mpsc};

use crate::watch;

use super::feed::{AbortOnDrop, ReleaseFeed};

/// What a [`GrantedNames`] says next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantNews {
    /// The lock `name` was granted (by any gateway).
    Granted(String),
    /// Some grants may have gone unseen (the store's connection was lost, or the reader fell
    /// behind): look at the store again.
    Missed,
}

/// Announcements not yet read by one watch, at most [`QUEUED`]. The queue grows with what it
/// holds (a channel's blocks of 32), so an idle watch costs well under a kilobyte.
pub const QUEUED: usize = 1024;

/// The sending side of one watch's [`Announcements`].
#[derive(Debug, Clone)]
pub struct Announcer {
    queue: mpsc::Sender<Arc<str>>,
    lagged: Arc<AtomicBool>,
}

impl Announcer {
    /// Queues `announcement`, or marks the watch as having missed some when its queue is full
    /// (it then looks at the store again). Never waits.
    pub fn announce(&self, announcement: Arc<str>) {
        if let Err(TrySendError::Full(_)) = self.queue.try_send(announcement) {
            self.lagged.store(true, Ordering::Relaxed);
        }
    }
}

/// The announcements one watch reads.
#[derive(Debug)]
pub enum Announcements {
    /// Its own queue (see [`announcements`]).
    Queued {
        queue: mpsc::Receiver<Arc<str>>,
        lagged: Arc<AtomicBool>,
    },
    /// A channel shared with other watches, each reading all of it.
    Shared(broadcast::Receiver<Arc<str>>),
}

/// A queue of announcements for one watch, holding up to [`QUEUED`].
pub fn announcements() -> (Announcer, Announcements) {
    let (queue, receiver) = mpsc::channel(QUEUED);
    let lagged = Arc::new(AtomicBool::new(false));
    let announcer = Announcer {
        queue,
        lagged: lagged.clone(),
    };
    (
        announcer,
        Announcements::Queued {
            queue: receiver,
            lagged,
        },
    )
}

/// What reading an [`Announcements`] gave instead of an announcement.
enum Gap {
    /// Some were dropped: the reader fell behind.
    Lagged,
    /// Nobody announces any more.
    Closed,
}

impl Announcements {
    async fn recv(&mut self) -> Result<Arc<str>, Gap> {
        match self {
            Self::Queued { queue, lagged } => {
                // A full queue is never empty, so a reader told late still reads what was
                // queued before it learns of the gap.
                if lagged.swap(false, Ordering::Relaxed) {
                    return Err(Gap::Lagged);
                }
                queue.recv().await.ok_or(Gap::Closed)
            }
            Self::Shared(shared) => shared.recv().await.map_err(|err| match err {
                broadcast::error::RecvError::Lagged(_) => Gap::Lagged,
                broadcast::error::RecvError::Closed => Gap::Closed,
            }),
        }
    }
}

/// Turns one announcement into the name it was about, or `None` for one outside the prefix.
type Decode = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Grants of every name under a prefix, for as long as it is kept.
pub struct GrantedNames {
    announcements: Announcements,
    missed: watch::Receiver<()>,
    decode: Decode,
    /// Ends the subscription when dropped.
    _subscription: Box<dyn std::fmt::Debug + Send + Sync>,
}

impl std::fmt::Debug for GrantedNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrantedNames").finish_non_exhaustive()
    }
}

impl GrantedNames {
    /// Announcements as they come on `announcements` (decoded into names by `decode`), and a
    /// feed that changes when some may have gone unseen.
    pub fn new(
        announcements: Announcements,
        missed: ReleaseFeed,
        decode: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        let mut receiver = missed.receiver();
        receiver.borrow_and_update();
        Self {
            announcements,
            missed: receiver,
            decode: Box::new(decode),
            _subscription: Box::new(missed),
        }
    }

    /// The next news; `None` once the store's side is gone.
    pub async fn next(&mut self) -> Option<GrantNews> {
        loop {
            tokio::select! {
                biased;
                changed = self.missed.changed() => {
                    changed.ok()?;
                    return Some(GrantNews::Missed);
                }
                announced = self.announcements.recv() => match announced {
                    Ok(announcement) => {
                        if let Some(name) = (self.decode)(&announcement) {
                            return Some(GrantNews::Granted(name));
                        }
                    }
                    Err(Gap::Lagged) => return Some(GrantNews::Missed),
                    Err(Gap::Closed) => return None,
                },
            }
        }
    }

    /// One stream of the news of every one of `sources` (the nodes of Redlock).
    pub fn merged(sources: Vec<GrantedNames>) -> GrantedNames {
        let (announce, announcements) = announcements();
        let (missed, missed_feed) = watch::channel(());
        let missed = Arc::new(missed);
        let tasks: Vec<AbortOnDrop> = sources
            .into_iter()
            .map(|mut source| {
                let announce = announce.clone();
                let missed = missed.clone();
                AbortOnDrop(tokio::spawn(async move {
                    while let Some(news) = source.next().await {
                        match news {
                            GrantNews::Granted(name) => {
                                announce.announce(Arc::from(name));
                            }
                            GrantNews::Missed => {
                                missed.send_replace(());
                            }
                        }
                    }
                }))
            })
            .collect();
        let feed = ReleaseFeed::new(missed_feed, (tasks, missed));
        GrantedNames::new(announcements, feed, |name| Some(name.to_owned()))
    }
}
