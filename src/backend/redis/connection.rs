//! The command connection: one multiplexed, self-repairing connection to Redis that every
//! ordinary command shares (named apart from read/write locks' shared grants).
//!
//! Why not redis-rs's `ConnectionManager`: while Redis is down its reconnect future retries with
//! exponential backoff, and every request awaits that future, so requests hang for seconds
//! instead of failing fast; and it cannot follow a Sentinel failover. Here:
//!
//! * A connection that breaks (reset, closed, a `READONLY` master) is dropped at once; the next
//!   request starts a reconnect through the [`Connect`]or (which asks Sentinel anew) and others
//!   wait for the same attempt, up to the connect timeout, not their command budget: a server
//!   just restarted is worth the wait, however short the command budget (a Redlock node's).
//! * A command that gets no answer in time is not a broken connection (the server may be busy;
//!   the answer may come): the connection is kept, and a probe (PING, with a longer timeout)
//!   decides. If the probe gets no answer either, the connection is dropped and the node counts
//!   as *unreachable*.
//! * While the node is unreachable (a probe went unanswered, or a connect timed out: a frozen
//!   server, a host gone, a partition) requests fail at once instead of each paying the timeout,
//!   and reconnects go on in the background, spaced by a growing pause, until one succeeds. A
//!   connect that is *refused* (the server is down, or not up yet) marks nothing: the next
//!   request tries again, so a restarted server is used as soon as it listens.
//!
//! A connect runs in a task of its own: a request that gives up (its client hung up, its
//! timeout passed) does not abandon it, so even when each connect takes longer than clients
//! are willing to wait, the gateway does end up connected.
//!
//! Each successful connect starts a new *epoch*. Dedicated `WAIT` connections (see [`super::pool`])
//! remember the epoch they were opened in and are discarded once it is over.
//!
//! One piece, over 400 lines: epochs, the connect attempt that waiting requests share, and
//! which errors end an epoch are one state machine, checked by reading it whole.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisError, ServerErrorKind};
use tokio::time::Instant;

use crate::telemetry::throttle::{self, Throttle};

use super::batch::Batcher;
use super::errors::{breaks_connection, classify, classify_connect};
use super::features::{Downgradable, Features, Server};
use crate::backend::BackendError;

/// A connect that fails after longer than this without being refused counts as "unreachable".
const SLOW_FAILURE: Duration = Duration::from_millis(20);
/// Pauses between background reconnects to an unreachable node, doubling from the first.
const FIRST_RETRY: Duration = Duration::from_millis(100);
const LAST_RETRY: Duration = Duration::from_secs(2);

/// A new connection, and what its server offers.
#[derive(Debug)]
pub struct Opened<T> {
    pub conn: T,
    pub server: Server,
    pub features: Features,
}

/// Why a connect failed.
#[derive(Debug)]
pub struct ConnectFailure {
    pub error: BackendError,
    /// The server refused the connection: it is down, and will be quick to answer once up.
    pub refused: bool,
    /// The server refused a setting (credentials, permissions, database): what to fix.
    /// Retrying will not help.
    pub permanent: Option<&'static str>,
}

/// Throttle causes of failed connects.
const CONNECT_FAILED: &str = "connect";
const REFUSED: &str = "refused-settings";

impl ConnectFailure {
    pub fn of(err: &RedisError) -> Self {
        let permanent = permanent_mistake(err);
        Self {
            // A refused setting is no outage: requests say so, and so does readiness.
            error: match permanent {
                Some(setting) => BackendError::Refused(format!("{err}: {setting}")),
                None => classify_connect(err),
            },
            refused: err.is_connection_refusal(),
            permanent,
        }
    }
}

/// What to fix when the server refused a connection's settings rather than being unreachable.
fn permanent_mistake(err: &RedisError) -> Option<&'static str> {
    let text = err.to_string();
    if err.kind() == ErrorKind::AuthenticationFailed
        || text.contains("WRONGPASS")
        || text.contains("NOAUTH")
    {
        Some(
            "the user or password is wrong: fix the credentials in the Redis URL (--redis-url, --sentinel, --cluster, --redlock) or --sentinel-username/--sentinel-password",
        )
    } else if err.kind() == ErrorKind::Server(ServerErrorKind::NoPerm) || text.contains("NOPERM") {
        Some(
            "the ACL user may not run a command lockgate needs: see the ACL rule in docs/operations.md (TLS to Redis)",
        )
    } else if text.contains("DB index") {
        Some("the database in the Redis URL does not exist: fix the /DB number in the URL")
    } else {
        None
    }
}

/// How to open the command connection.
pub trait Connect: Send + Sync + 'static {
    type Conn: ConnectionLike + Clone + Send + Sync + 'static;

    fn connect(&self) -> impl Future<Output = Result<Opened<Self::Conn>, ConnectFailure>> + Send;

    /// How many times the node moved (see `NodeSource::generation`): a connection opened in
    /// an older generation is replaced before its next use.
    fn generation(&self) -> u64 {
        0
    }

    /// Whether scripts go in batches (see `super::batch`): on one node's connection, yes; a
    /// Cluster's pipelines would have to keep to one slot.
    const BATCHES: bool = false;
}

/// A connection ready for a command, and its epoch.
#[derive(Debug, Clone)]
pub struct Link<T> {
    pub epoch: u64,
    pub conn: T,
}

type Connected<T> = Result<Link<T>, BackendError>;

/// Told about every server connected to (for the metrics).
pub type OnConnect = Box<dyn Fn(&Server, Features) + Send + Sync>;

/// Timeouts of a command connection.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// Bound on a connect, preparation included.
    pub connect: Duration,
    /// Bound on the probe that decides whether a connection that let a command time out is
    /// still alive.
    pub probe: Duration,
}

pub struct CommandConnection<C: Connect> {
    inner: Arc<Inner<C>>,
    /// Where scripts gather into one write (see `super::batch`), when the connector batches.
    batcher: Option<Arc<Batcher>>,
}

impl<C: Connect> std::fmt::Debug for CommandConnection<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandConnection")
            .field("epoch", &self.epoch())
            .finish()
    }
}

struct Inner<C: Connect> {
    connector: C,
    timeouts: Timeouts,
    current: RwLock<Option<Epoch<C::Conn>>>,
    attempts: Mutex<Attempts<C::Conn>>,
    on_connect: Option<OnConnect>,
    /// Failed connects are logged once per window (see `telemetry::throttle`).
    failures: Throttle,
}

#[derive(Debug, Clone)]
struct Epoch<T> {
    number: u64,
    /// The node's generation when the connect began.
    generation: u64,
    conn: T,
    features: Features,
    /// Which server it reached, for [`CommandConnection::log_current`].
    server: Arc<super::features::Server>,
    downgrade: Arc<Downgradable>,
    /// A probe of this connection is under way.
    probing: Arc<AtomicBool>,
}

impl<T: Clone> Epoch<T> {
    fn link(&self) -> Link<T> {
        Link {
            epoch: self.number,
            conn: self.conn.clone(),
        }
    }
}

struct Attempts<T> {
    epochs: u64,
    /// Set while the node does not answer: requests fail with this at once.
    unreachable: Option<BackendError>,
    /// When the next background reconnect to an unreachable node may start.
    retry_at: Instant,
    /// The pause before the one after.
    backoff: Duration,
    /// The connect in progress, which every request needing a connection waits for.
    connecting: Option<Shared<BoxFuture<'static, Connected<T>>>>,
}

impl<T> std::fmt::Debug for Attempts<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attempts")
            .field("epochs", &self.epochs)
            .field("unreachable", &self.unreachable)
            .field("connecting", &self.connecting.is_some())
            .finish()
    }
}

impl<C: Connect> CommandConnection<C> {
    pub fn new(connector: C, timeouts: Timeouts, on_connect: Option<OnConnect>) -> Self {
        let inner = Inner {
            connector,
            timeouts,
            current: RwLock::new(None),
            attempts: Mutex::new(Attempts {
                epochs: 0,
                unreachable: None,
                retry_at: Instant::now(),
                backoff: FIRST_RETRY,
                connecting: None,
            }),
            on_connect,
            failures: Throttle::new(throttle::WINDOW),
        };
        Self {
            inner: Arc::new(inner),
            batcher: C::BATCHES.then(Arc::default),
        }
    }

    /// Where scripts gather into one write, if this connection batches them.
    pub fn batcher(&self) -> Option<&Arc<Batcher>> {
        self.batcher.as_ref()
    }

    /// The current connection and its epoch, connecting first if there is none (waiting up to
    /// the connect timeout), or at once the error that made the node unreachable.
    pub async fn get(&self) -> Connected<C::Conn> {
        if let Some(epoch) = self.inner.current() {
            if epoch.generation == self.inner.connector.generation() {
                return Ok(epoch.link());
            }
            self.inner.drop_epoch(epoch.number, &"the master moved");
        }
        let connecting = {
            let mut attempts = self.inner.attempts();
            // Someone may have connected since the look above.
            if let Some(epoch) = self.inner.current()
                && epoch.generation == self.inner.connector.generation()
            {
                return Ok(epoch.link());
            }
            if let Some(err) = attempts.unreachable.clone() {
                // Requests do not wait on a node that does not answer; reconnects go on in the
                // background.
                if attempts.connecting.is_none() && Instant::now() >= attempts.retry_at {
                    attempts.connecting = Some(Inner::start_connect(&self.inner));
                }
                return Err(err);
            }
            attempts
                .connecting
                .get_or_insert_with(|| Inner::start_connect(&self.inner))
                .clone()
        };
        match tokio::time::timeout(self.inner.timeouts.connect, connecting).await {
            Ok(connected) => connected,
            Err(_) => Err(BackendError::Unavailable(format!(
                "not connected within {:?}",
                self.inner.timeouts.connect
            ))),
        }
    }

    /// The epoch of the current connection (0 before the first connect).
    pub fn epoch(&self) -> u64 {
        self.inner.current().map_or(0, |e| e.number)
    }

    /// What the current connection's server offers (nothing native before the first connect).
    pub fn features(&self) -> Features {
        self.inner
            .current()
            .map_or_else(Features::default, |e| e.downgrade.apply(e.features))
    }

    /// Logs the connection in use, as its connect did: for a connect made before logging
    /// started (the startup guards connect first).
    pub fn log_current(&self) {
        if let Some(epoch) = self.inner.current() {
            let features = epoch.downgrade.apply(epoch.features);
            tracing::info!(
                epoch = epoch.number,
                server = %epoch.server.name,
                version = %epoch.server.version,
                release = features.release.label(),
                renew = features.renew.label(),
                "connected to redis"
            );
        }
    }

    /// Lets `f` record a refusal on the current connection.
    pub fn with_current(&self, f: impl Fn(&Downgradable)) {
        if let Some(epoch) = self.inner.current() {
            f(&epoch.downgrade);
        }
    }

    /// Records that a command sent on epoch `epoch` failed with `err`, dropping that
    /// connection if the error says it is broken (and probing it if it timed out), and returns
    /// the error as a backend error.
    pub fn failed(&self, epoch: u64, err: &RedisError) -> BackendError {
        if breaks_connection(err) {
            self.inner.drop_epoch(epoch, err);
        } else if err.is_timeout() {
            self.timed_out(epoch);
        }
        classify(err)
    }

    /// Records that a command on a dedicated connection opened in `epoch` failed. The
    /// dedicated connection is dropped by its owner; the command connection is dropped too only if the
    /// error says the server went away (a restart) or changed role (a failover), not for
    /// slowness.
    pub fn failed_dedicated(&self, epoch: u64, err: &RedisError) -> BackendError {
        let gone = err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly);
        if gone {
            self.inner.drop_epoch(epoch, err);
        }
        classify(err)
    }

    /// A command on epoch `epoch` got no answer in time: probe the connection (once at a time)
    /// and drop it if the probe is not answered either.
    pub fn timed_out(&self, epoch: u64) {
        let Some(current) = self.inner.current().filter(|e| e.number == epoch) else {
            return;
        };
        if current.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let inner = self.inner.clone();
        let mut conn = current.conn.clone();
        tokio::spawn(async move {
            let ping = redis::cmd("PING");
            let answered = tokio::time::timeout(
                inner.timeouts.probe,
                ping.query_async::<redis::Value>(&mut conn),
            )
            .await;
            current.probing.store(false, Ordering::Release);
            if !matches!(answered, Ok(Ok(_))) {
                inner.drop_epoch(epoch, &"no answer to a probe");
                inner.mark_unreachable(BackendError::Timeout(inner.timeouts.probe));
            }
        });
    }
}

impl<C: Connect> Inner<C> {
    /// Drops the connection of `epoch` if it is still the current one.
    fn drop_epoch(&self, epoch: u64, why: &dyn std::fmt::Display) {
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        if current.as_ref().is_some_and(|c| c.number == epoch) {
            *current = None;
            tracing::warn!(epoch, reason = %why, "redis connection dropped");
        }
    }

    /// From now until a connect succeeds, requests fail with `err` at once.
    fn mark_unreachable(&self, err: BackendError) {
        let mut attempts = self.attempts();
        if attempts.unreachable.is_none() {
            attempts.retry_at = Instant::now();
            attempts.backoff = FIRST_RETRY;
        }
        attempts.unreachable = Some(err);
    }

    fn current(&self) -> Option<Epoch<C::Conn>> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn attempts(&self) -> MutexGuard<'_, Attempts<C::Conn>> {
        self.attempts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Spawns a connect; its outcome is recorded by the task, whoever still waits for it.
    fn start_connect(inner: &Arc<Self>) -> Shared<BoxFuture<'static, Connected<C::Conn>>> {
        let task = tokio::spawn(Self::connect(inner.clone()));
        async move {
            task.await.unwrap_or_else(|e| {
                Err(BackendError::Unavailable(format!(
                    "connect task failed: {e}"
                )))
            })
        }
        .boxed()
        .shared()
    }

    async fn connect(self: Arc<Self>) -> Connected<C::Conn> {
        let started = Instant::now();
        let generation = self.connector.generation();
        let connected =
            match tokio::time::timeout(self.timeouts.connect, self.connector.connect()).await {
                Ok(connected) => connected,
                Err(_) => Err(ConnectFailure {
                    permanent: None,
                    error: BackendError::Unavailable(format!(
                        "connecting took longer than {:?}",
                        self.timeouts.connect
                    )),
                    refused: false,
                }),
            };
        let mut attempts = self.attempts();
        attempts.connecting = None;
        match connected {
            Ok(opened) => {
                attempts.epochs += 1;
                attempts.unreachable = None;
                attempts.backoff = FIRST_RETRY;
                let epoch = Epoch {
                    number: attempts.epochs,
                    generation,
                    conn: opened.conn,
                    features: opened.features,
                    server: Arc::new(opened.server.clone()),
                    downgrade: Arc::default(),
                    probing: Arc::default(),
                };
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(epoch.clone());
                let failed = self.failures.clear(CONNECT_FAILED) + self.failures.clear(REFUSED);
                tracing::info!(
                    epoch = epoch.number,
                    unlogged_failures = failed,
                    server = %opened.server.name,
                    version = %opened.server.version,
                    release = opened.features.release.label(),
                    renew = opened.features.renew.label(),
                    "connected to redis"
                );
                if let Some(seen) = &self.on_connect {
                    seen(&opened.server, opened.features);
                }
                Ok(epoch.link())
            }
            Err(failure) => {
                match failure.permanent {
                    // A setting is wrong: waiting will not fix it; say which, loudly.
                    Some(setting) => {
                        if let Some(left_out) = self.failures.admit(REFUSED) {
                            tracing::error!(error = %failure.error, left_out, "redis refused the connection's settings: {setting}");
                        }
                    }
                    None => {
                        if let Some(left_out) = self.failures.admit(CONNECT_FAILED) {
                            tracing::warn!(error = %failure.error, left_out, "cannot connect to redis (one line per {}s while it lasts)", throttle::WINDOW.as_secs());
                        }
                    }
                }
                if !failure.refused && started.elapsed() > SLOW_FAILURE {
                    let pause = attempts.backoff;
                    attempts.retry_at = Instant::now() + pause;
                    attempts.backoff = (pause * 2).min(LAST_RETRY);
                    attempts.unreachable = Some(failure.error.clone());
                }
                Err(failure.error)
            }
        }
    }
}
