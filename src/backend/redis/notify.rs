//! Release notifications over Redis pub/sub.
//!
//! The release script publishes on `<prefix>{<name>}:released`. A gateway subscribes to that
//! channel while it has waiters for the name, on one dedicated pub/sub connection shared by all
//! names. One task owns that connection:
//!
//! * it reads messages and bumps the feed of the message's channel;
//! * it carries out SUBSCRIBE and UNSUBSCRIBE requests **in the order they were made** (batched
//!   when several are queued), so that an unsubscribe of a name whose last waiter left can
//!   never overtake the subscribe of a waiter that arrived just after;
//! * when the connection breaks (Redis restarted, PING unanswered) or Sentinel moved the
//!   master, it reconnects with backoff,
//!   subscribes to every channel still wanted, and bumps every feed, because releases during
//!   the outage went unseen.
//!
//! The task starts with the first watcher, so a gateway whose clients never wait never opens
//! the connection.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::PubSubSink;
use tokio::sync::{mpsc, oneshot, watch};

use super::source::NodeSource;
use crate::backend::AbortOnDrop;
use crate::backend::ReleaseFeed;

/// How often the subscription connection is checked with PING.
const PING_EVERY: Duration = Duration::from_secs(5);
/// Reconnect backoff bounds.
const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Most channels per SUBSCRIBE command.
const BATCH: usize = 1000;

#[derive(Debug)]
pub struct Notifier {
    shared: Arc<Shared>,
    source: Arc<NodeSource>,
    timeout: Duration,
    /// The commands' receiving end, until the task takes it.
    inbox: Mutex<Option<mpsc::UnboundedReceiver<Command>>>,
    task: OnceLock<AbortOnDrop>,
}

#[derive(Debug)]
struct Shared {
    /// Channels somebody watches, with their feeds. The connection is subscribed to exactly
    /// these, give or take the commands still queued.
    feeds: Mutex<HashMap<String, watch::Sender<()>>>,
    commands: mpsc::UnboundedSender<Command>,
}

#[derive(Debug)]
enum Command {
    Subscribe(String, oneshot::Sender<()>),
    Unsubscribe(String),
}

/// Unsubscribes when the last feed of a channel goes.
#[derive(Debug)]
struct Unwatch {
    shared: Arc<Shared>,
    channel: String,
}

impl Drop for Unwatch {
    fn drop(&mut self) {
        let mut feeds = self.shared.feeds();
        // The feed's receiver is dropped before this guard.
        if feeds
            .get(&self.channel)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            feeds.remove(&self.channel);
            let _ = self
                .shared
                .commands
                .send(Command::Unsubscribe(self.channel.clone()));
        }
    }
}

impl Shared {
    fn feeds(&self) -> MutexGuard<'_, HashMap<String, watch::Sender<()>>> {
        self.feeds.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bump(&self, channel: &str) {
        if let Some(tx) = self.feeds().get(channel) {
            tx.send_replace(());
        }
    }

    fn bump_all(&self) {
        for tx in self.feeds().values() {
            tx.send_replace(());
        }
    }
}

impl Notifier {
    /// Subscribes on the node `source` names (resolved again on every reconnect); `timeout`
    /// bounds connecting and each confirmation.
    pub fn new(source: Arc<NodeSource>, timeout: Duration) -> Self {
        let (commands, inbox) = mpsc::unbounded_channel();
        Self {
            shared: Arc::new(Shared {
                feeds: Mutex::default(),
                commands,
            }),
            source,
            timeout,
            inbox: Mutex::new(Some(inbox)),
            task: OnceLock::new(),
        }
    }

    /// A feed of releases on `channel`, returned once Redis confirmed the subscription (or the
    /// timeout passed: the subscription then happens when the connection is back).
    pub async fn watch(&self, channel: String) -> ReleaseFeed {
        self.start();
        let receiver = self
            .shared
            .feeds()
            .entry(channel.clone())
            .or_insert_with(|| watch::channel(()).0)
            .subscribe();
        let (confirmed, confirmation) = oneshot::channel();
        let _ = self
            .shared
            .commands
            .send(Command::Subscribe(channel.clone(), confirmed));
        if !matches!(
            tokio::time::timeout(self.timeout, confirmation).await,
            Ok(Ok(()))
        ) {
            tracing::warn!(
                "release subscription not confirmed; waiters fall back to the holder's ttl"
            );
        }
        ReleaseFeed::new(
            receiver,
            Unwatch {
                shared: self.shared.clone(),
                channel,
            },
        )
    }

    fn start(&self) {
        self.task.get_or_init(|| {
            let inbox = self.inbox.lock().unwrap_or_else(|p| p.into_inner()).take();
            let (shared, source, timeout) =
                (self.shared.clone(), self.source.clone(), self.timeout);
            AbortOnDrop(tokio::spawn(async move {
                if let Some(inbox) = inbox {
                    run(shared, source, timeout, inbox).await;
                }
            }))
        });
    }
}

/// The connection's life: connect, resubscribe, serve until it breaks, again.
async fn run(
    shared: Arc<Shared>,
    source: Arc<NodeSource>,
    timeout: Duration,
    mut inbox: mpsc::UnboundedReceiver<Command>,
) {
    let mut backoff = MIN_BACKOFF;
    let mut first = true;
    // A Sentinel failover: the master moved, follow it.
    let mut moves = source.changes();
    loop {
        let connect = async {
            let client = source.client().await?;
            client
                .get_async_pubsub()
                .await
                .map_err(|e| super::connection::classify(&e))
        };
        let pubsub = match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(pubsub)) => pubsub,
            failure => {
                if let Ok(Err(err)) = failure {
                    tracing::warn!(error = %err, "cannot open the redis pub/sub connection");
                }
                // Nobody can be confirmed meanwhile; their channels stay wanted and are
                // subscribed once connected.
                let pause = tokio::time::sleep(backoff);
                tokio::pin!(pause);
                loop {
                    tokio::select! {
                        () = &mut pause => break,
                        command = inbox.recv() => if command.is_none() { return },
                    }
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = MIN_BACKOFF;
        let (mut sink, mut stream) = pubsub.split();
        let wanted: Vec<String> = shared.feeds().keys().cloned().collect();
        if subscribe_all(&mut sink, &wanted).await.is_err() {
            continue;
        }
        if !first {
            tracing::info!(channels = wanted.len(), "redis pub/sub reconnected");
            shared.bump_all();
        }
        first = false;
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.reset();
        loop {
            tokio::select! {
                message = stream.next() => match message {
                    Some(message) => shared.bump(message.get_channel_name()),
                    None => break,
                },
                command = inbox.recv() => {
                    let Some(command) = command else { return };
                    if execute(&mut sink, command, &mut inbox).await.is_err() {
                        break;
                    }
                }
                Some(()) = master_moved(&mut moves) => break,
                _ = ping.tick() => {
                    let answered = tokio::time::timeout(timeout, sink.ping::<redis::Value>()).await;
                    if !matches!(answered, Ok(Ok(_))) {
                        break;
                    }
                }
            }
        }
        tracing::warn!("redis pub/sub connection lost; reconnecting");
    }
}

/// Resolves when the node moves; never where it cannot.
async fn master_moved(moves: &mut Option<watch::Receiver<u64>>) -> Option<()> {
    match moves {
        Some(moves) => moves.changed().await.ok(),
        None => std::future::pending().await,
    }
}

async fn subscribe_all(sink: &mut PubSubSink, channels: &[String]) -> redis::RedisResult<()> {
    for chunk in channels.chunks(BATCH) {
        sink.subscribe(chunk).await?;
    }
    Ok(())
}

/// Carries out `first` and every command already queued behind it, in order, grouping
/// consecutive subscribes into one SUBSCRIBE.
async fn execute(
    sink: &mut PubSubSink,
    first: Command,
    inbox: &mut mpsc::UnboundedReceiver<Command>,
) -> redis::RedisResult<()> {
    let mut channels = Vec::new();
    let mut confirmations = Vec::new();
    let mut next = Some(first);
    while let Some(command) = next.take() {
        match command {
            Command::Subscribe(channel, confirmed) => {
                channels.push(channel);
                confirmations.push(confirmed);
            }
            Command::Unsubscribe(channel) => {
                flush(sink, &mut channels, &mut confirmations).await?;
                sink.unsubscribe(&channel).await?;
            }
        }
        if channels.len() >= BATCH {
            flush(sink, &mut channels, &mut confirmations).await?;
        }
        next = inbox.try_recv().ok();
    }
    flush(sink, &mut channels, &mut confirmations).await
}

async fn flush(
    sink: &mut PubSubSink,
    channels: &mut Vec<String>,
    confirmations: &mut Vec<oneshot::Sender<()>>,
) -> redis::RedisResult<()> {
    if channels.is_empty() {
        return Ok(());
    }
    sink.subscribe(channels.as_slice()).await?;
    channels.clear();
    for confirmed in confirmations.drain(..) {
        let _ = confirmed.send(());
    }
    Ok(())
}
