//! Announcements for waiters and watchers ([`ReleaseFeed`]), and the small pieces of task
//! plumbing the stores and the lease engine share.

/// Release notifications for one name, for as long as it is kept.
///
/// The feed is a version counter: every change means "the lock may have been released, look
/// again". A release is announced once; a change can also be spurious (after a reconnect, all
/// feeds change because releases during the outage were not seen). Expiries are not
/// announced: waiters also wake at the holder's ttl. Clone [`ReleaseFeed::receiver`] to wait
/// on it; mark the current version seen *before* trying to acquire, so that a release that
/// lands between the attempt and the wait is not lost.
#[derive(Debug)]
pub struct ReleaseFeed {
    receiver: crate::watch::Receiver<()>,
    /// Ends the subscription when the feed is dropped.
    _subscription: Box<dyn std::fmt::Debug + Send + Sync>,
}

impl ReleaseFeed {
    pub fn new(
        receiver: crate::watch::Receiver<()>,
        subscription: impl std::fmt::Debug + Send + Sync + 'static,
    ) -> Self {
        Self {
            receiver,
            _subscription: Box::new(subscription),
        }
    }

    pub fn receiver(&self) -> crate::watch::Receiver<()> {
        self.receiver.clone()
    }

    /// One feed that changes when any of `feeds` does (the names of a set, the nodes of
    /// Redlock), for as long as it is kept.
    pub fn merged(feeds: Vec<ReleaseFeed>) -> ReleaseFeed {
        let (sender, receiver) = crate::watch::channel(());
        let mut receivers: Vec<_> = feeds.iter().map(ReleaseFeed::receiver).collect();
        let merge = tokio::spawn(async move {
            loop {
                let changes = receivers.iter_mut().map(|r| Box::pin(r.changed()));
                let (changed, _, _) = futures_util::future::select_all(changes).await;
                if changed.is_err() || sender.send(()).is_err() {
                    return;
                }
            }
        });
        ReleaseFeed::new(receiver, (feeds, AbortOnDrop(merge)))
    }

    /// A feed that never changes: for what is never granted.
    pub fn silent() -> ReleaseFeed {
        let (sender, receiver) = crate::watch::channel(());
        ReleaseFeed::new(receiver, sender)
    }
}

/// Resolves at `at`, or never without one: a `select!` branch that is there only sometimes.
pub async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A background task that ends when its owner is dropped.
#[derive(Debug)]
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
