//! One shared, multiplexed, self-repairing connection to Redis, plus small pools of dedicated
//! connections for `WAIT`.
//!
//! Why not redis-rs's `ConnectionManager`: while Redis is down its reconnect future retries with
//! exponential backoff, and every request awaits that future, so requests hang for seconds
//! instead of failing fast; and it cannot follow a Sentinel failover. Here a broken connection
//! is dropped at the first connection-level error; the next request starts a reconnect through
//! the [`Connect`]or (which resolves the master anew under Sentinel) and others wait for the
//! same attempt. A connect that failed slowly (a timeout: a host that does not answer) makes
//! requests fail at once for [`RETRY_INTERVAL`] instead of each paying the same timeout; one
//! that failed fast (refused: the server is down) does not, so a restarted server is used as
//! soon as it is back. Every call is also bounded by the backend's timeout, so a stopped Redis
//! turns into a prompt `BackendError` rather than a hang.
//!
//! A connect runs in a task of its own: a request that gives up (its client hung up, its
//! timeout passed) does not abandon it, so even when each connect takes longer than clients
//! are willing to wait, the gateway does end up connected.
//!
//! Each successful connect starts a new *epoch*. Dedicated `WAIT` connections remember the epoch
//! they were opened in; when the shared connection has been replaced since (Redis restarted,
//! failed over), idle ones are discarded instead of failing the next request that would pick
//! them.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, ErrorKind, RedisError, ServerErrorKind};
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

use super::source::NodeSource;
use crate::backend::BackendError;

/// After a connect that failed slowly, requests fail without a new attempt for this long.
pub const RETRY_INTERVAL: Duration = Duration::from_millis(200);
/// A connect failing after longer than this counts as slow.
const SLOW_FAILURE: Duration = Duration::from_millis(20);

/// How to open the shared connection.
pub trait Connect: Send + Sync + 'static {
    type Conn: ConnectionLike + Clone + Send + Sync + 'static;

    fn connect(&self) -> impl Future<Output = Result<Self::Conn, BackendError>> + Send;

    /// How many times the node moved (see [`NodeSource::generation`]): a connection opened in
    /// an older generation is replaced before its next use.
    fn generation(&self) -> u64 {
        0
    }
}

/// Connection settings for one node: the shared connection's, with a reply timeout, and the
/// dedicated connections', without one (a `WAIT` legitimately blocks for its replica timeout;
/// each use is bounded by its caller).
pub fn node_configs(timeout: Duration) -> (AsyncConnectionConfig, AsyncConnectionConfig) {
    // Explicitly None: redis-rs otherwise applies a default 500 ms reply timeout.
    let dedicated = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(None);
    let shared = dedicated.clone().set_response_timeout(Some(timeout));
    (shared, dedicated)
}

/// The shared connection to a single node: a fixed server, or the master Sentinel names.
#[derive(Debug)]
pub struct NodeConnector {
    pub source: Arc<NodeSource>,
    pub config: AsyncConnectionConfig,
    /// Sent on every new connection (SCRIPT LOAD of the scripts), best effort.
    pub on_connect: redis::Pipeline,
}

impl Connect for NodeConnector {
    type Conn = MultiplexedConnection;

    fn generation(&self) -> u64 {
        self.source.generation()
    }

    async fn connect(&self) -> Result<MultiplexedConnection, BackendError> {
        let client = self.source.client().await?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
            .map_err(|e| classify(&e))?;
        // A new connection often means a restarted or failed-over server with an empty script
        // cache: fill it now rather than on each script's first NOSCRIPT.
        if let Err(err) = self.on_connect.exec_async(&mut conn).await {
            tracing::debug!(error = %err, "preparing the new connection failed; scripts load on first use");
        }
        Ok(conn)
    }
}

/// The shared connection to a Redis Cluster: redis-rs's cluster connection, which keeps one
/// connection per node, follows MOVED and ASK, and refreshes its slot map by itself.
#[derive(Debug)]
pub struct ClusterConnector {
    pub client: ClusterClient,
}

impl Connect for ClusterConnector {
    type Conn = ClusterConnection;

    async fn connect(&self) -> Result<ClusterConnection, BackendError> {
        self.client
            .get_async_connection()
            .await
            .map_err(|e| classify(&e))
    }
}

type Connected<T> = Result<(u64, T), BackendError>;

pub struct SharedConnection<C: Connect> {
    inner: Arc<Inner<C>>,
}

impl<C: Connect> std::fmt::Debug for SharedConnection<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedConnection")
            .field("epoch", &self.epoch())
            .finish()
    }
}

struct Inner<C: Connect> {
    connector: C,
    current: RwLock<Option<Epoch<C::Conn>>>,
    attempts: Mutex<Attempts<C::Conn>>,
}

#[derive(Debug, Clone)]
struct Epoch<T> {
    number: u64,
    /// The node's generation when the connect began.
    generation: u64,
    conn: T,
}

struct Attempts<T> {
    epochs: u64,
    /// The last connect that failed slowly, and how.
    last_failure: Option<(Instant, BackendError)>,
    /// The connect in progress, which every request needing a connection waits for.
    connecting: Option<Shared<BoxFuture<'static, Connected<T>>>>,
}

impl<T> Default for Attempts<T> {
    fn default() -> Self {
        Self {
            epochs: 0,
            last_failure: None,
            connecting: None,
        }
    }
}

impl<T> std::fmt::Debug for Attempts<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attempts")
            .field("epochs", &self.epochs)
            .field("last_failure", &self.last_failure)
            .field("connecting", &self.connecting.is_some())
            .finish()
    }
}

impl<C: Connect> SharedConnection<C> {
    pub fn new(connector: C) -> Self {
        let inner = Inner {
            connector,
            current: RwLock::new(None),
            attempts: Mutex::default(),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The current connection and its epoch, connecting first if there is none.
    pub async fn get(&self) -> Connected<C::Conn> {
        if let Some(epoch) = self.inner.current() {
            if epoch.generation == self.inner.connector.generation() {
                return Ok((epoch.number, epoch.conn));
            }
            self.inner.drop_epoch(epoch.number, &"the master moved");
        }
        let connecting = {
            let mut attempts = self.inner.attempts();
            // Someone may have connected since the look above.
            if let Some(epoch) = self.inner.current()
                && epoch.generation == self.inner.connector.generation()
            {
                return Ok((epoch.number, epoch.conn));
            }
            if let Some((at, err)) = &attempts.last_failure
                && at.elapsed() < RETRY_INTERVAL
            {
                return Err(err.clone());
            }
            attempts
                .connecting
                .get_or_insert_with(|| Inner::start_connect(&self.inner))
                .clone()
        };
        connecting.await
    }

    /// The epoch of the current connection (0 before the first connect).
    pub fn epoch(&self) -> u64 {
        self.inner.current().map_or(0, |e| e.number)
    }

    /// Records that a command sent on epoch `epoch` failed with `err`, dropping that
    /// connection if the error says it is broken, and returns the error as a backend error.
    pub fn failed(&self, epoch: u64, err: &RedisError) -> BackendError {
        if breaks_connection(err) {
            self.invalidate(epoch, err);
        }
        classify(err)
    }

    /// Records that a command on a dedicated connection opened in `epoch` failed. The
    /// dedicated connection is dropped by its owner; the shared one is dropped too only if the
    /// error says the server went away (a restart) or changed role (a failover), not for
    /// slowness.
    pub fn failed_dedicated(&self, epoch: u64, err: &RedisError) -> BackendError {
        let gone = err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly);
        if gone {
            self.invalidate(epoch, err);
        }
        classify(err)
    }

    fn invalidate(&self, epoch: u64, err: &RedisError) {
        self.inner.drop_epoch(epoch, err);
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
        let connected = self.connector.connect().await;
        let mut attempts = self.attempts();
        attempts.connecting = None;
        match connected {
            Ok(conn) => {
                attempts.epochs += 1;
                attempts.last_failure = None;
                let epoch = Epoch {
                    number: attempts.epochs,
                    generation,
                    conn,
                };
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(epoch.clone());
                tracing::info!(epoch = epoch.number, "connected to redis");
                Ok((epoch.number, epoch.conn))
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot connect to redis");
                if started.elapsed() > SLOW_FAILURE {
                    attempts.last_failure = Some((Instant::now(), err.clone()));
                }
                Err(err)
            }
        }
    }
}

/// Whether a command failed because its connection was found broken or refused, or reached a
/// master demoted to replica (`READONLY`: nothing was written), so that the same command on a
/// fresh connection may well succeed (a restarted server, a failover). Not timeouts: the
/// command may be running still.
pub fn worth_a_fresh_connection(err: &RedisError) -> bool {
    !err.is_timeout()
        && (err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly))
}

/// Whether the connection an error came from must be replaced. Timeouts count: a socket whose
/// peer vanished without a reset never errors otherwise.
fn breaks_connection(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_connection_dropped()
        || err.is_unrecoverable_error()
        // A master demoted to replica (failover) answers READONLY to writes.
        || err.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
}

/// Maps a redis-rs error to what the rest of the gateway needs to know.
pub fn classify(err: &RedisError) -> BackendError {
    match err.kind() {
        _ if err.is_timeout() => BackendError::Unavailable(err.to_string()),
        ErrorKind::Io
        | ErrorKind::AuthenticationFailed
        | ErrorKind::MasterNameNotFoundBySentinel
        | ErrorKind::EmptySentinelList
        | ErrorKind::ClusterConnectionNotFound
        | ErrorKind::Server(
            ServerErrorKind::BusyLoading
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::Moved
            | ServerErrorKind::Ask
            | ServerErrorKind::NoPerm,
        ) => BackendError::Unavailable(err.to_string()),
        _ => BackendError::Protocol(err.to_string()),
    }
}

/// A small pool of dedicated connections to one node, for commands that block the connection
/// they are sent on. `WAIT` must never go to the shared multiplexed connection: it would stall
/// every other request queued behind it.
#[derive(Debug)]
pub struct DedicatedPool {
    source: Arc<NodeSource>,
    config: AsyncConnectionConfig,
    /// Idle connections with the epoch and node generation they were opened in.
    idle: Mutex<Vec<(u64, u64, MultiplexedConnection)>>,
    slots: Semaphore,
}

/// A connection taken from a [`DedicatedPool`]. Dropping it closes the connection; only
/// [`Checkout::give_back`] returns it, so a connection whose command failed or was cancelled
/// midway (possibly still blocked server-side) is never reused.
#[derive(Debug)]
pub struct Checkout<'a> {
    pool: &'a DedicatedPool,
    pub epoch: u64,
    generation: u64,
    pub conn: MultiplexedConnection,
    _slot: SemaphorePermit<'a>,
}

impl DedicatedPool {
    /// At most `size` connections to the node `source` names, made with `config` (see
    /// [`node_configs`]).
    pub fn new(source: Arc<NodeSource>, config: AsyncConnectionConfig, size: usize) -> Self {
        Self {
            source,
            config,
            idle: Mutex::new(Vec::with_capacity(size)),
            slots: Semaphore::new(size),
        }
    }

    fn idle(&self) -> MutexGuard<'_, Vec<(u64, u64, MultiplexedConnection)>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a free slot, then reuses an idle connection opened in epoch `current` or later
    /// and in the node's current generation, or opens one (tagged `current`).
    pub async fn checkout(&self, current: u64) -> Result<Checkout<'_>, BackendError> {
        let slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| BackendError::Unavailable("connection pool closed".into()))?;
        let generation = self.source.generation();
        let reusable = {
            let mut idle = self.idle();
            idle.retain(|(epoch, opened_in, _)| *epoch >= current && *opened_in == generation);
            idle.pop()
        };
        let (epoch, generation, conn) = match reusable {
            Some(found) => found,
            None => {
                let client = self.source.client().await?;
                let conn = client
                    .get_multiplexed_async_connection_with_config(&self.config)
                    .await
                    .map_err(|e| classify(&e))?;
                (current, generation, conn)
            }
        };
        Ok(Checkout {
            pool: self,
            epoch,
            generation,
            conn,
            _slot: slot,
        })
    }
}

impl Checkout<'_> {
    pub fn give_back(self) {
        self.pool
            .idle()
            .push((self.epoch, self.generation, self.conn));
    }
}
