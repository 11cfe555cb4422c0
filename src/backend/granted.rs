//! Announcements of grants under a name prefix ([`GrantedNames`]): how a watcher of a whole
//! prefix (`GET /locks/events?prefix=`) learns which names to look at, without walking the
//! store. On Redis it is one pattern subscription (`PSUBSCRIBE <prefix>{<name prefix>*}:acquired`)
//! held only while somebody watches, so it costs nothing while nobody does.

use std::sync::Arc;

use tokio::sync::{broadcast, watch};

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

/// Turns one announcement into the name it was about, or `None` for one outside the prefix.
type Decode = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Grants of every name under a prefix, for as long as it is kept.
pub struct GrantedNames {
    announcements: broadcast::Receiver<Arc<str>>,
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
        announcements: broadcast::Receiver<Arc<str>>,
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
                    Err(broadcast::error::RecvError::Lagged(_)) => return Some(GrantNews::Missed),
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            }
        }
    }

    /// One stream of the news of every one of `sources` (the nodes of Redlock).
    pub fn merged(sources: Vec<GrantedNames>) -> GrantedNames {
        let (announce, announcements) = broadcast::channel(BACKLOG);
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
                                let _ = announce.send(Arc::from(name));
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

/// Announcements kept for a slow reader of a merged stream.
const BACKLOG: usize = 1024;
