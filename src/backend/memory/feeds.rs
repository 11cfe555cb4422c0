//! The memory store's announcements: feeds by name that waiters and watchers subscribe to
//! (releases, grants, grants of a set given back, a fair queue's head), each forgotten when
//! its last receiver goes, and every grant's name for those who watch a prefix. What Redis's
//! pub/sub channels are to the Redis store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::backend::{GrantsOf, ReleaseFeed};
use crate::watch;

/// Every grant's name as it is made (see [`MemoryBackend::announce_grant`]).
#[derive(Debug)]
pub(super) struct GrantedNamesSender(pub(super) broadcast::Sender<Arc<str>>);

impl Default for GrantedNamesSender {
    fn default() -> Self {
        Self(broadcast::channel(GRANTED_NAMES_BACKLOG).0)
    }
}

/// Grants kept for a slow watcher of a prefix, which then looks at the store again.
const GRANTED_NAMES_BACKLOG: usize = 1024;

/// Announcement feeds by name.
pub(super) type Feeds = Arc<Mutex<HashMap<String, watch::Sender<()>>>>;

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

pub(super) fn announce(feeds: &Feeds, name: &str) {
    let feeds = feeds.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(tx) = feeds.get(name) {
        tx.send_replace(());
    }
}

/// What the feeds of grants given back ([`MemoryBackend::freed`]) key a set by: its name and
/// its kind's channel, as Redis names the channel.
pub(super) fn freed(of: GrantsOf, name: &str) -> String {
    format!("{name}{}", of.freed_channel)
}

/// A feed of `feeds` for `name`, forgotten when its last receiver goes.
pub(super) fn feed(feeds: &Feeds, name: &str) -> ReleaseFeed {
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
