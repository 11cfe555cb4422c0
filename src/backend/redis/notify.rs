//! Release notifications over Redis pub/sub.
//!
//! A gateway subscribes, while it has waiters for a name, on one dedicated pub/sub connection
//! shared by all names, to one of two channels per name:
//!
//! * **keyspace notifications** of the lock key (`__keyspace@<db>__:<prefix>{<name>}`) when the
//!   server has them enabled for generic commands (`notify-keyspace-events` containing `K` and
//!   `g` or `A`; `x` adds expiries). Then every release is seen, whoever makes it: a `DEL` by
//!   another Redis client (redis-py's `Lock.release()`, `redis-cli DEL`) wakes waiters as a
//!   gateway's own release does. Only `del`, `expired` and `evicted` events wake anyone.
//! * otherwise the gateways' own **release channel**, `<prefix>{<name>}:released`, on which
//!   every gateway's release script publishes. Releases by other clients are not announced
//!   there; the lock layer then re-checks held names while it has waiters
//!   ([`Notifier::sees_every_release`] says which mode is in force).
//!
//! The mode is found on every (re)connect with `CONFIG GET notify-keyspace-events` (a server
//! that refuses `CONFIG` counts as "not enabled"), so enabling notifications on the server, or
//! a failover to a server configured otherwise, takes effect at the next reconnect. Keyspace
//! notifications are published by the node that holds the key only, so in a Redis Cluster
//! (where this connection goes to any node) the release channel is always used.
//!
//! One task owns the connection:
//!
//! * it reads messages and bumps the feed of the message's name;
//! * it carries out SUBSCRIBE and UNSUBSCRIBE requests **in the order they were made** (batched
//!   when several are queued), so that an unsubscribe of a name whose last waiter left can
//!   never overtake the subscribe of a waiter that arrived just after;
//! * when the connection breaks (Redis restarted, PING unanswered) or Sentinel moved the
//!   master, it reconnects with backoff, subscribes to every name still wanted, and bumps every
//!   feed, because releases during the outage went unseen.
//!
//! Besides channels, it subscribes to **one pattern** (`PSUBSCRIBE`) for those who watch a
//! whole name prefix ([`Notifier::watch_prefix`]), however many prefixes they watch: Redis
//! matches every pattern of every client on every `PUBLISH`, so a pattern per prefix would make
//! each watched prefix a tax on every grant of every gateway sharing the server (issue 49:
//! 10,000 of them took an acquire script from 8 to 417 µs of Redis CPU). The task routes each
//! message of the pattern to the watches whose channel prefix it starts with, each into its
//! own bounded queue (`backend::granted`), looking the channel up once per distinct length of
//! the prefixes watched.
//!
//! The task starts with the first watcher, so a gateway whose clients never wait never opens
//! the connection; and it closes the connection once nothing has been watched for
//! `--pubsub-linger` (30 s by default), opening it again for the next waiter. A fleet of
//! sidecars then holds one Redis connection per gateway, two only where something waits or
//! watches (docs/runbook.md, "The fleet's arithmetic"). The linger keeps a burst of waits on
//! one connection: reopening costs the next waiter a connect, a `CONFIG GET` and a
//! `SUBSCRIBE` before its subscription is confirmed.
//!
//! One piece, over 400 lines: one task owns the pub/sub connection, its subscriptions, the
//! resubscription after a reconnect and the wake-up of every feed after an outage; they share
//! its state (the last ~40 lines are tests).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::PubSubSink;
use redis::{ErrorKind, ServerErrorKind};
use tokio::sync::{mpsc, oneshot};

use crate::watch;

use super::errors::classify_connect;
use super::source::NodeSource;
use crate::backend::AbortOnDrop;
use crate::backend::{Announcements, Announcer, BackendError, ReleaseFeed};
use crate::telemetry::throttle::{self, Throttle};

/// How often the subscription connection is checked with PING.
const PING_EVERY: Duration = Duration::from_secs(5);
/// Reconnect backoff bounds.
const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Most channels per SUBSCRIBE command.
const BATCH: usize = 1000;
/// Suffix of the gateways' own release channel of a lock key.
const RELEASED: &str = ":released";
/// Starts the feed key of a channel subscribed as it is (see [`Notifier::watch_channel`]),
/// whatever the mode. Lock keys cannot contain it.
const RAW: char = '\0';
/// Starts the feed key of a pattern, subscribed with PSUBSCRIBE (see
/// [`Notifier::watch_prefix`]). Lock keys cannot contain it.
const PATTERN: char = '\u{1}';

#[derive(Debug)]
pub struct Notifier {
    shared: Arc<Shared>,
    source: Arc<NodeSource>,
    timeout: Duration,
    /// How long the connection stays open with nothing watched.
    linger: Duration,
    /// Whether keyspace notifications may be used (not in a cluster).
    keyspace_allowed: bool,
    /// The commands' receiving end, until the task takes it.
    inbox: Mutex<Option<mpsc::UnboundedReceiver<Command>>>,
    task: OnceLock<AbortOnDrop>,
}

#[derive(Debug)]
struct Shared {
    /// Lock keys somebody watches, with their feeds. The connection is subscribed to exactly
    /// these, give or take the commands still queued. Ordered, so that a resubscription and a
    /// wake-up of every watcher go in one order, the same in every run (the simulation replays
    /// a seed byte for byte).
    feeds: Mutex<BTreeMap<String, Feed>>,
    /// Where the messages of patterns go, by the start of their channel.
    routes: Mutex<Routes>,
    commands: mpsc::UnboundedSender<Command>,
    /// The connection listens to keyspace notifications (else to the release channels).
    keyspace: AtomicBool,
    /// Repeated failures are logged once per window (see `telemetry::throttle`).
    failures: Throttle,
}

/// The feed of one key, and how many [`ReleaseFeed`]s of it are alive. Counted here rather
/// than read off the channel's receivers: a holder may keep clones of the receiver that it
/// drops after its `ReleaseFeed` (in whatever order its future's state is dropped), and the
/// key must be unsubscribed all the same.
#[derive(Debug)]
struct Feed {
    tx: watch::Sender<()>,
    watchers: usize,
}

/// The watches of channel prefixes, fed by the messages of a pattern.
#[derive(Debug, Default)]
struct Routes {
    by_prefix: HashMap<String, Vec<(u64, Announcer)>>,
    /// How many prefixes of each length are watched: a channel is looked up once per length.
    lengths: BTreeMap<usize, usize>,
    next_id: u64,
}

impl Routes {
    fn add(&mut self, prefix: String, announcer: Announcer) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        *self.lengths.entry(prefix.len()).or_default() += 1;
        self.by_prefix
            .entry(prefix)
            .or_default()
            .push((id, announcer));
        id
    }

    fn remove(&mut self, prefix: &str, id: u64) {
        let Some(routes) = self.by_prefix.get_mut(prefix) else {
            return;
        };
        routes.retain(|(route, _)| *route != id);
        if routes.is_empty() {
            self.by_prefix.remove(prefix);
        }
        if let Some(count) = self.lengths.get_mut(&prefix.len()) {
            *count -= 1;
            if *count == 0 {
                self.lengths.remove(&prefix.len());
            }
        }
    }

    /// Passes `channel` to every watch of a prefix of it.
    fn route(&self, channel: &str) {
        let mut shared: Option<Arc<str>> = None;
        for &length in self.lengths.keys() {
            if length > channel.len() {
                break;
            }
            let Some(routes) = channel.get(..length).and_then(|p| self.by_prefix.get(p)) else {
                continue;
            };
            let announcement = shared.get_or_insert_with(|| Arc::from(channel));
            for (_, announcer) in routes {
                announcer.announce(announcement.clone());
            }
        }
    }
}

/// Stops routing to a watch of a channel prefix when dropped.
#[derive(Debug)]
struct Unroute {
    shared: Arc<Shared>,
    prefix: String,
    id: u64,
}

impl Drop for Unroute {
    fn drop(&mut self) {
        self.shared.routes().remove(&self.prefix, self.id);
    }
}

#[derive(Debug)]
enum Command {
    Subscribe(String, Confirmation),
    Unsubscribe(String),
}

/// Where a subscription's outcome goes: in place, or refused by the server (an ACL that does
/// not allow the channel). Dropped unanswered when the connection failed first.
type Confirmation = oneshot::Sender<redis::RedisResult<()>>;

/// Which channel a lock key's releases come on.
#[derive(Debug, Clone)]
enum Mode {
    /// `__keyspace@<db>__:<key>`: the prefix.
    Keyspace(String),
    Released,
}

impl Mode {
    fn channel(&self, key: &str) -> String {
        if let Some(channel) = key.strip_prefix(RAW).or_else(|| key.strip_prefix(PATTERN)) {
            return channel.to_owned();
        }
        match self {
            Self::Keyspace(prefix) => format!("{prefix}{key}"),
            Self::Released => format!("{key}{RELEASED}"),
        }
    }

    /// The lock key a message is about, if it announces a release.
    fn released_key<'a>(&self, channel: &'a str, payload: &[u8]) -> Option<&'a str> {
        match self {
            Self::Keyspace(prefix) => {
                let released = matches!(payload, b"del" | b"expired" | b"evicted");
                channel.strip_prefix(prefix.as_str()).filter(|_| released)
            }
            Self::Released => channel.strip_suffix(RELEASED),
        }
    }
}

/// Unsubscribes when the last feed of a key goes.
#[derive(Debug)]
struct Unwatch {
    shared: Arc<Shared>,
    key: String,
}

impl Drop for Unwatch {
    fn drop(&mut self) {
        let mut feeds = self.shared.feeds();
        let Some(feed) = feeds.get_mut(&self.key) else {
            return;
        };
        feed.watchers = feed.watchers.saturating_sub(1);
        if feed.watchers == 0 {
            feeds.remove(&self.key);
            let _ = self
                .shared
                .commands
                .send(Command::Unsubscribe(self.key.clone()));
        }
    }
}

impl Shared {
    fn feeds(&self) -> MutexGuard<'_, BTreeMap<String, Feed>> {
        self.feeds.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bump(&self, key: &str) {
        if let Some(feed) = self.feeds().get(key) {
            feed.tx.send_replace(());
        }
    }

    fn routes(&self) -> MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bump_all(&self) {
        for feed in self.feeds().values() {
            feed.tx.send_replace(());
        }
    }
}

impl Notifier {
    /// Subscribes on the node `source` names (resolved again on every reconnect); `timeout`
    /// bounds connecting and each confirmation. `keyspace_allowed` is false where keyspace
    /// notifications cannot be relied on (a cluster). The connection is closed after `linger`
    /// with nothing watched.
    pub fn new(
        source: Arc<NodeSource>,
        timeout: Duration,
        linger: Duration,
        keyspace_allowed: bool,
    ) -> Self {
        let (commands, inbox) = mpsc::unbounded_channel();
        Self {
            shared: Arc::new(Shared {
                feeds: Mutex::default(),
                routes: Mutex::default(),
                commands,
                keyspace: AtomicBool::new(false),
                failures: Throttle::new(throttle::WINDOW),
            }),
            source,
            timeout,
            linger,
            keyspace_allowed,
            inbox: Mutex::new(Some(inbox)),
            task: OnceLock::new(),
        }
    }

    /// Whether releases by any Redis client are announced (keyspace notifications), not only
    /// those of gateways.
    pub fn sees_every_release(&self) -> bool {
        self.shared.keyspace.load(Ordering::Relaxed)
    }

    /// A feed of the messages on `channel` itself, whatever the mode (the announcements of
    /// grants, which no keyspace notification covers for every configuration), returned as
    /// [`Notifier::watch`] returns.
    pub async fn watch_channel(&self, channel: &str) -> ReleaseFeed {
        self.watch(format!("{RAW}{channel}")).await
    }

    /// The channels of the messages on every channel matching the glob `pattern` that start
    /// with `channel_prefix`, as they come, and a feed that changes when some may have gone
    /// unseen (the connection was lost); returned as [`Notifier::watch`] returns. The pattern
    /// is subscribed once, however many watch it (with whatever prefixes).
    ///
    /// A pattern the server refuses (an ACL: Redis allows a pattern subscription only for a
    /// pattern the user is granted as written, or `allchannels`) is an error.
    pub async fn watch_prefix(
        &self,
        pattern: &str,
        channel_prefix: String,
    ) -> Result<(ReleaseFeed, Announcements), BackendError> {
        // Routed before the subscription is confirmed: a message in between is not lost.
        let (announcer, announcements) = crate::backend::granted::announcements();
        let id = self.shared.routes().add(channel_prefix.clone(), announcer);
        let unroute = Unroute {
            shared: self.shared.clone(),
            prefix: channel_prefix,
            id,
        };
        let (feed, refusal) = self.subscribe(format!("{PATTERN}{pattern}")).await;
        if let Some(refused) = refusal {
            return Err(BackendError::Refused(format!(
                "PSUBSCRIBE {pattern}: {refused} (grant the Redis user this pattern as written, or allchannels)"
            )));
        }
        Ok((
            ReleaseFeed::new(feed.receiver(), (feed, unroute)),
            announcements,
        ))
    }

    /// A feed of releases of the lock `key`, returned once Redis confirmed the subscription (or
    /// the timeout passed: the subscription then happens when the connection is back; or the
    /// server refused it, which the connection's task logs: waiters then fall back to the
    /// holder's ttl).
    pub async fn watch(&self, key: String) -> ReleaseFeed {
        self.subscribe(key).await.0
    }

    /// The feed of `key` (a lock key, a raw channel or a pattern), and the server's refusal of
    /// the subscription, if it refused.
    async fn subscribe(&self, key: String) -> (ReleaseFeed, Option<redis::RedisError>) {
        self.start();
        let receiver = {
            let mut feeds = self.shared.feeds();
            let feed = feeds.entry(key.clone()).or_insert_with(|| Feed {
                tx: watch::channel(()).0,
                watchers: 0,
            });
            feed.watchers += 1;
            feed.tx.subscribe()
        };
        // Armed before the confirmation is awaited: a caller that goes away meanwhile still
        // gives its place back.
        let unwatch = Unwatch {
            shared: self.shared.clone(),
            key,
        };
        let (confirmed, confirmation) = oneshot::channel();
        let _ = self
            .shared
            .commands
            .send(Command::Subscribe(unwatch.key.clone(), confirmed));
        let refusal = match tokio::time::timeout(self.timeout, confirmation).await {
            Ok(Ok(Ok(()))) => None,
            Ok(Ok(Err(refused))) => Some(refused),
            _ => {
                if let Some(left_out) = self.shared.failures.admit("unconfirmed") {
                    tracing::warn!(
                        left_out,
                        "release subscription not confirmed; waiters fall back to the holder's ttl"
                    );
                }
                None
            }
        };
        (ReleaseFeed::new(receiver, unwatch), refusal)
    }

    fn start(&self) {
        self.task.get_or_init(|| {
            let inbox = self.inbox.lock().unwrap_or_else(|p| p.into_inner()).take();
            let connection = Connection {
                shared: self.shared.clone(),
                source: self.source.clone(),
                timeout: self.timeout,
                linger: self.linger,
                keyspace_allowed: self.keyspace_allowed,
            };
            AbortOnDrop(tokio::spawn(async move {
                if let Some(inbox) = inbox {
                    connection.run(inbox).await;
                }
            }))
        });
    }
}

/// What the task needs to (re)connect.
struct Connection {
    shared: Arc<Shared>,
    source: Arc<NodeSource>,
    timeout: Duration,
    linger: Duration,
    keyspace_allowed: bool,
}

impl Connection {
    /// Opens the pub/sub connection and finds out which channels to use.
    async fn open(&self) -> Result<(redis::aio::PubSub, Mode), crate::backend::BackendError> {
        let client = self.source.client().await?;
        let transport = self.source.transport();
        let mode = if self.keyspace_allowed && keyspace_enabled(&client, transport).await {
            let db = client.get_connection_info().redis_settings().db();
            Mode::Keyspace(format!("__keyspace@{db}__:"))
        } else {
            Mode::Released
        };
        let pubsub = super::transport::pubsub(&client, transport)
            .await
            .map_err(|e| classify_connect(&e))?;
        Ok((pubsub, mode))
    }

    /// The connection's life: connect, resubscribe, serve until it breaks, again; closed
    /// while nothing is watched, reopened by the next subscription.
    async fn run(self, mut inbox: mpsc::UnboundedReceiver<Command>) {
        let mut backoff = MIN_BACKOFF;
        let mut first = true;
        // A Sentinel failover: the master moved, follow it.
        let mut moves = self.source.changes();
        // A command that arrived while the connection was closed, carried out once it is open.
        let mut woken_by: Option<Command> = None;
        loop {
            let (pubsub, mode) = match tokio::time::timeout(self.timeout, self.open()).await {
                Ok(Ok(opened)) => opened,
                failure => {
                    if let Ok(Err(err)) = failure
                        && let Some(left_out) = self.shared.failures.admit("open")
                    {
                        tracing::warn!(error = %err, left_out, "cannot open the redis pub/sub connection");
                    }
                    // Nobody can be confirmed meanwhile; their names stay wanted and are
                    // subscribed once connected.
                    if !pause(&mut backoff, &mut inbox).await {
                        return;
                    }
                    continue;
                }
            };
            self.shared
                .keyspace
                .store(matches!(mode, Mode::Keyspace(_)), Ordering::Relaxed);
            let (mut sink, mut stream) = pubsub.split();
            let wanted: Vec<String> = self.shared.feeds().keys().cloned().collect();
            if subscribe_all(&mut sink, &self.shared, &mode, &wanted)
                .await
                .is_err()
            {
                // The new connection failed at once: paused as a failed open is, not
                // reconnected in a loop.
                if !pause(&mut backoff, &mut inbox).await {
                    return;
                }
                continue;
            }
            backoff = MIN_BACKOFF;
            if !first {
                tracing::info!(names = wanted.len(), "redis pub/sub reconnected");
                self.shared.bump_all();
            }
            first = false;
            if let Some(command) = woken_by.take()
                && execute(&mut sink, &mode, &self.shared, command, &mut inbox)
                    .await
                    .is_err()
            {
                continue;
            }
            let mut ping = tokio::time::interval(PING_EVERY);
            ping.reset();
            let mut idle_until = None;
            let mut idle = false;
            loop {
                // Nothing watched: the connection closes at `idle_until` unless a subscription
                // comes first.
                if self.shared.feeds().is_empty() {
                    idle_until.get_or_insert_with(|| tokio::time::Instant::now() + self.linger);
                } else {
                    idle_until = None;
                }
                // In a fixed order (the simulation replays a seed byte for byte): the rare
                // branches first, then the local commands (bounded by the waiters), the
                // messages last, so that a flood of messages never keeps a waiter unsubscribed
                // (they wait in the socket meanwhile).
                tokio::select! {
                    biased;
                    () = crate::backend::sleep_until_some(idle_until) => {
                        idle = self.shared.feeds().is_empty();
                        if idle {
                            break;
                        }
                        continue;
                    }
                    command = inbox.recv() => {
                        let Some(command) = command else { return };
                        if execute(&mut sink, &mode, &self.shared, command, &mut inbox).await.is_err() {
                            break;
                        }
                    }
                    Some(()) = master_moved(&mut moves) => break,
                    _ = ping.tick() => {
                        let answered = tokio::time::timeout(self.timeout, sink.ping::<redis::Value>()).await;
                        if !matches!(answered, Ok(Ok(_))) {
                            break;
                        }
                    }
                    message = stream.next() => match message {
                        Some(message) => {
                            let payload = message.get_payload_bytes();
                            let channel = message.get_channel_name();
                            if message.from_pattern() {
                                self.shared.routes().route(channel);
                                continue;
                            }
                            match mode.released_key(channel, payload) {
                                Some(key) => self.shared.bump(key),
                                None => self.shared.bump(&format!("{RAW}{channel}")),
                            }
                        }
                        None => break,
                    },
                }
            }
            if idle {
                drop((sink, stream));
                tracing::debug!("nothing waits or watches: redis pub/sub connection closed");
                // Closed until somebody subscribes; an unsubscription needs no connection.
                loop {
                    match inbox.recv().await {
                        None => return,
                        Some(Command::Unsubscribe(_)) => {}
                        Some(subscribe) => {
                            woken_by = Some(subscribe);
                            break;
                        }
                    }
                }
                first = true;
                continue;
            }
            tracing::warn!("redis pub/sub connection lost; reconnecting");
        }
    }
}

/// Whether the server publishes keyspace notifications of generic commands (`DEL`).
async fn keyspace_enabled(
    client: &redis::Client,
    transport: Option<&dyn super::transport::Transport>,
) -> bool {
    let config = redis::AsyncConnectionConfig::new();
    let Ok(mut conn) = super::transport::multiplexed(client, &config, transport).await else {
        return false;
    };
    let flags: redis::RedisResult<(String, String)> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query_async(&mut conn)
        .await;
    flags.is_ok_and(|(_, flags)| keyspace_flags_cover_releases(&flags))
}

/// `notify-keyspace-events` flags that announce a `DEL` on the key's own channel.
fn keyspace_flags_cover_releases(flags: &str) -> bool {
    flags.contains('K') && (flags.contains('g') || flags.contains('A'))
}

/// Resolves when the node moves; never where it cannot.
async fn master_moved(moves: &mut Option<watch::Receiver<u64>>) -> Option<()> {
    match moves {
        Some(moves) => moves.changed().await.ok(),
        None => std::future::pending().await,
    }
}

/// Waits out `backoff` (doubled for the next time), carrying out no command meanwhile: those
/// who subscribe stay wanted and are subscribed once connected. False when the notifier is gone.
async fn pause(backoff: &mut Duration, inbox: &mut mpsc::UnboundedReceiver<Command>) -> bool {
    let pause = tokio::time::sleep(*backoff);
    tokio::pin!(pause);
    loop {
        tokio::select! {
            biased;
            () = &mut pause => break,
            command = inbox.recv() => if command.is_none() { return false },
        }
    }
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
    true
}

/// Subscribes to the channel or pattern of every key of `keys` (those the server refuses are
/// logged and left out).
async fn subscribe_all(
    sink: &mut PubSubSink,
    shared: &Shared,
    mode: &Mode,
    keys: &[String],
) -> redis::RedisResult<()> {
    let (patterns, channels): (Vec<&String>, Vec<&String>) =
        keys.iter().partition(|key| key.starts_with(PATTERN));
    let channels: Vec<String> = channels.into_iter().map(|key| mode.channel(key)).collect();
    for chunk in channels.chunks(BATCH) {
        subscribe_allowed(sink, shared, chunk, Kind::Channels).await?;
    }
    let patterns: Vec<String> = patterns.into_iter().map(|key| mode.channel(key)).collect();
    if !patterns.is_empty() {
        subscribe_allowed(sink, shared, &patterns, Kind::Patterns).await?;
    }
    Ok(())
}

/// What a subscription names.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Channels,
    Patterns,
}

/// Subscribes to `channels` in one command, and answers, for each, the server's refusal if it
/// refused it (an ACL: logged here); `Err` only when the connection failed. The server
/// refuses a whole command for one channel it does not allow, so after a refusal each is
/// tried alone. A refusal keeps the connection: what else is subscribed on it goes on.
async fn subscribe_allowed(
    sink: &mut PubSubSink,
    shared: &Shared,
    channels: &[String],
    kind: Kind,
) -> redis::RedisResult<Vec<Option<redis::RedisError>>> {
    let refused =
        |err: &redis::RedisError| err.kind() == ErrorKind::Server(ServerErrorKind::NoPerm);
    let all = match kind {
        Kind::Channels => sink.subscribe(channels).await,
        Kind::Patterns => sink.psubscribe(channels).await,
    };
    match (all, channels) {
        (Ok(()), _) => return Ok(vec![None; channels.len()]),
        (Err(err), _) if !refused(&err) => return Err(err),
        (Err(err), [channel]) => return Ok(vec![Some(log_refusal(shared, channel, err))]),
        (Err(_), _) => {}
    }
    let mut answers = Vec::with_capacity(channels.len());
    for channel in channels {
        let one = match kind {
            Kind::Channels => sink.subscribe(channel).await,
            Kind::Patterns => sink.psubscribe(channel).await,
        };
        match one {
            Ok(()) => answers.push(None),
            Err(err) if refused(&err) => answers.push(Some(log_refusal(shared, channel, err))),
            Err(err) => return Err(err),
        }
    }
    Ok(answers)
}

/// Logs the server's refusal of `channel` (throttled), and gives it back.
fn log_refusal(shared: &Shared, channel: &str, err: redis::RedisError) -> redis::RedisError {
    if let Some(left_out) = shared.failures.admit("refused") {
        tracing::error!(
            channel,
            error = %err,
            left_out,
            "the redis user may not subscribe to this channel: grant it (ACL `&lockgate:*` covers the release and grant channels; a prefix's event stream subscribes to a pattern, which Redis allows only as written in the ACL, or with allchannels)"
        );
    }
    err
}

/// Carries out `first` and every command already queued behind it, in order, grouping
/// consecutive subscribes into one SUBSCRIBE.
async fn execute(
    sink: &mut PubSubSink,
    mode: &Mode,
    shared: &Shared,
    first: Command,
    inbox: &mut mpsc::UnboundedReceiver<Command>,
) -> redis::RedisResult<()> {
    let mut channels = Vec::new();
    let mut confirmations = Vec::new();
    let mut next = Some(first);
    while let Some(command) = next.take() {
        match command {
            Command::Subscribe(key, confirmed) if key.starts_with(PATTERN) => {
                flush(sink, shared, &mut channels, &mut confirmations).await?;
                let pattern = [mode.channel(&key)];
                let refusal = subscribe_allowed(sink, shared, &pattern, Kind::Patterns).await?;
                answer(shared, key, confirmed, refusal.into_iter().flatten().next());
            }
            Command::Subscribe(key, confirmed) => {
                channels.push(mode.channel(&key));
                confirmations.push((key, confirmed));
            }
            Command::Unsubscribe(key) => {
                flush(sink, shared, &mut channels, &mut confirmations).await?;
                if key.starts_with(PATTERN) {
                    sink.punsubscribe(mode.channel(&key)).await?;
                } else {
                    sink.unsubscribe(mode.channel(&key)).await?;
                }
            }
        }
        if channels.len() >= BATCH {
            flush(sink, shared, &mut channels, &mut confirmations).await?;
        }
        next = inbox.try_recv().ok();
    }
    flush(sink, shared, &mut channels, &mut confirmations).await
}

/// Subscribes to the gathered `channels`, one per entry of `confirmations`, and answers each.
async fn flush(
    sink: &mut PubSubSink,
    shared: &Shared,
    channels: &mut Vec<String>,
    confirmations: &mut Vec<(String, Confirmation)>,
) -> redis::RedisResult<()> {
    if channels.is_empty() {
        return Ok(());
    }
    let refusals = subscribe_allowed(sink, shared, channels, Kind::Channels).await?;
    channels.clear();
    for ((key, confirmed), refusal) in confirmations.drain(..).zip(refusals) {
        answer(shared, key, confirmed, refusal);
    }
    Ok(())
}

/// Tells whoever subscribed to `key` that the subscription is in place, or was refused.
fn answer(
    shared: &Shared,
    key: String,
    confirmed: Confirmation,
    refusal: Option<redis::RedisError>,
) {
    let in_place = refusal.is_none();
    // Whoever asked stopped waiting for the confirmation (the connection was slow) and went
    // on without it: what was announced before now went unseen, so look again.
    if confirmed.send(refusal.map_or(Ok(()), Err)).is_err() && in_place {
        shared.bump(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_channels_are_subscribed_as_they_are() {
        let raw = format!("{RAW}lockgate:{{a}}:acquired");
        for mode in [Mode::Keyspace("__keyspace@0__:".into()), Mode::Released] {
            assert_eq!(mode.channel(&raw), "lockgate:{a}:acquired");
            assert_eq!(mode.released_key("lockgate:{a}:acquired", b""), None);
        }
    }

    #[test]
    fn messages_map_back_to_lock_keys() {
        let keyspace = Mode::Keyspace("__keyspace@0__:".into());
        let key = "lockgate:{a}";
        assert_eq!(keyspace.channel(key), "__keyspace@0__:lockgate:{a}");
        assert_eq!(
            keyspace.released_key("__keyspace@0__:lockgate:{a}", b"del"),
            Some(key)
        );
        assert_eq!(
            keyspace.released_key("__keyspace@0__:lockgate:{a}", b"expired"),
            Some(key)
        );
        assert_eq!(
            keyspace.released_key("__keyspace@0__:lockgate:{a}", b"set"),
            None,
            "an acquire is not a release"
        );
        let released = Mode::Released;
        assert_eq!(released.channel(key), "lockgate:{a}:released");
        assert_eq!(
            released.released_key("lockgate:{a}:released", b""),
            Some(key)
        );
    }

    #[test]
    fn pattern_messages_go_to_the_watches_of_their_prefixes_only() {
        let mut routes = Routes::default();
        let (nested, mut nested_rx) = crate::backend::granted::announcements();
        let (inner, mut inner_rx) = crate::backend::granted::announcements();
        let (beside, mut beside_rx) = crate::backend::granted::announcements();
        routes.add("lockgate:{jobs:".into(), nested);
        let inner_id = routes.add("lockgate:{jobs:eu".into(), inner);
        routes.add("lockgate:{web".into(), beside);
        routes.route("lockgate:{jobs:eu:1}:acquired");
        routes.route("lockgate:{jobs:us}:acquired");
        routes.route("lockgate:{j}:acquired");
        let next = |rx: &mut Announcements| {
            let Announcements::Queued { queue, .. } = rx else {
                unreachable!()
            };
            queue.try_recv().ok().map(|c| c.to_string())
        };
        assert_eq!(
            next(&mut nested_rx).as_deref(),
            Some("lockgate:{jobs:eu:1}:acquired")
        );
        assert_eq!(
            next(&mut nested_rx).as_deref(),
            Some("lockgate:{jobs:us}:acquired")
        );
        assert_eq!(next(&mut nested_rx), None);
        assert_eq!(
            next(&mut inner_rx).as_deref(),
            Some("lockgate:{jobs:eu:1}:acquired")
        );
        assert_eq!(next(&mut inner_rx), None);
        assert_eq!(next(&mut beside_rx), None);
        routes.remove("lockgate:{jobs:eu", inner_id);
        assert_eq!(routes.lengths.len(), 2, "{:?}", routes.lengths);
        routes.route("lockgate:{jobs:eu:2}:acquired");
        assert_eq!(next(&mut inner_rx), None, "a removed watch is told nothing");
    }

    #[test]
    fn keyspace_flags_must_cover_generic_commands() {
        assert!(keyspace_flags_cover_releases("Kgx"));
        assert!(keyspace_flags_cover_releases("AK"));
        assert!(!keyspace_flags_cover_releases("Egx"));
        assert!(!keyspace_flags_cover_releases("Kx"));
        assert!(!keyspace_flags_cover_releases(""));
    }
}
