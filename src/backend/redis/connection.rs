//! One shared, multiplexed, self-repairing connection to Redis, plus a small pool of dedicated
//! connections for `WAIT`.
//!
//! Why not redis-rs's `ConnectionManager`: while Redis is down its reconnect future retries with
//! exponential backoff, and every request awaits that future, so requests hang for seconds
//! instead of failing fast. Here a broken connection is dropped at the first connection-level
//! error; the next request starts a reconnect and others wait for the same attempt; while Redis
//! stays unreachable requests fail at once for [`RETRY_INTERVAL`] instead of each trying to
//! connect. Every call is also bounded by the backend's timeout, so a stopped Redis turns into
//! a prompt `BackendError` rather than a hang.
//!
//! A connect runs in a task of its own: a request that gives up (its client hung up, its
//! timeout passed) does not abandon it, so even when each connect takes longer than clients
//! are willing to wait, the gateway does end up connected.
//!
//! Each successful connect starts a new *epoch*. Dedicated `WAIT` connections remember the epoch
//! they were opened in; when the shared connection has been replaced since (Redis restarted),
//! idle ones are discarded instead of failing the next request that would pick them.

use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, ErrorKind, RedisError, ServerErrorKind};
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

use crate::backend::BackendError;

/// After a failed connect, requests fail without a new attempt for this long.
pub const RETRY_INTERVAL: Duration = Duration::from_millis(200);

type Connected = Result<(u64, MultiplexedConnection), BackendError>;

#[derive(Debug)]
pub struct SharedConnection {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    client: Client,
    config: AsyncConnectionConfig,
    /// Sent on every new shared connection (SCRIPT LOAD of the scripts), best effort.
    on_connect: redis::Pipeline,
    /// For dedicated connections: no reply timeout of their own, since a `WAIT` legitimately
    /// blocks for its replica timeout; the caller bounds each use instead.
    dedicated_config: AsyncConnectionConfig,
    current: RwLock<Option<Epoch>>,
    attempts: Mutex<Attempts>,
}

#[derive(Debug, Clone)]
struct Epoch {
    number: u64,
    conn: MultiplexedConnection,
}

#[derive(Default)]
struct Attempts {
    epochs: u64,
    last_failure: Option<(Instant, BackendError)>,
    /// The connect in progress, which every request needing a connection waits for.
    connecting: Option<Shared<BoxFuture<'static, Connected>>>,
}

impl std::fmt::Debug for Attempts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attempts")
            .field("epochs", &self.epochs)
            .field("last_failure", &self.last_failure)
            .field("connecting", &self.connecting.is_some())
            .finish()
    }
}

impl SharedConnection {
    /// The shared connection times out after `timeout`, both to connect and for each reply;
    /// dedicated ones only to connect. `on_connect` runs on each new shared connection.
    pub fn new(client: Client, timeout: Duration, on_connect: redis::Pipeline) -> Self {
        // Explicitly None: redis-rs otherwise applies a default 500 ms reply timeout.
        let dedicated_config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(None);
        let config = dedicated_config.clone().set_response_timeout(Some(timeout));
        let inner = Inner {
            client,
            config,
            on_connect,
            dedicated_config,
            current: RwLock::new(None),
            attempts: Mutex::default(),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The current connection and its epoch, connecting first if there is none.
    pub async fn get(&self) -> Connected {
        if let Some(epoch) = self.inner.current() {
            return Ok((epoch.number, epoch.conn));
        }
        let connecting = {
            let mut attempts = self.inner.attempts();
            // Someone may have connected since the look above.
            if let Some(epoch) = self.inner.current() {
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
}

impl Inner {
    fn current(&self) -> Option<Epoch> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn attempts(&self) -> MutexGuard<'_, Attempts> {
        self.attempts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Spawns a connect; its outcome is recorded by the task, whoever still waits for it.
    fn start_connect(inner: &Arc<Self>) -> Shared<BoxFuture<'static, Connected>> {
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

    async fn connect(self: Arc<Self>) -> Connected {
        let connected = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await;
        if let Ok(conn) = &connected {
            // A new connection often means a restarted or failed-over server with an empty
            // script cache: fill it now rather than on each script's first NOSCRIPT.
            let mut conn = conn.clone();
            if let Err(err) = self.on_connect.exec_async(&mut conn).await {
                tracing::debug!(error = %err, "preparing the new connection failed; scripts load on first use");
            }
        }
        let mut attempts = self.attempts();
        attempts.connecting = None;
        match connected {
            Ok(conn) => {
                attempts.epochs += 1;
                attempts.last_failure = None;
                let epoch = Epoch {
                    number: attempts.epochs,
                    conn,
                };
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(epoch.clone());
                tracing::info!(epoch = epoch.number, "connected to redis");
                Ok((epoch.number, epoch.conn))
            }
            Err(err) => {
                let err = classify(&err);
                tracing::warn!(error = %err, "cannot connect to redis");
                attempts.last_failure = Some((Instant::now(), err.clone()));
                Err(err)
            }
        }
    }
}

impl SharedConnection {
    /// Opens a connection outside the shared one (for commands that block it, like `WAIT`).
    /// It has no reply timeout: bound each use of it.
    pub async fn open_dedicated(&self) -> Result<(u64, MultiplexedConnection), BackendError> {
        let epoch = self.epoch();
        let conn = self
            .inner
            .client
            .get_multiplexed_async_connection_with_config(&self.inner.dedicated_config)
            .await
            .map_err(|e| classify(&e))?;
        Ok((epoch, conn))
    }

    /// Records that a command sent on epoch `epoch` failed with `err`, dropping that
    /// connection if the error says it is broken, and returns the error as a backend error.
    pub fn failed(&self, epoch: u64, err: &RedisError) -> BackendError {
        if breaks_connection(err) {
            let mut current = self
                .inner
                .current
                .write()
                .unwrap_or_else(|p| p.into_inner());
            if current.as_ref().is_some_and(|c| c.number == epoch) {
                *current = None;
                tracing::warn!(epoch, error = %err, "redis connection lost");
            }
        }
        classify(err)
    }

    /// Records that a command on a dedicated connection opened in `epoch` failed. The
    /// dedicated connection is dropped by its owner; the shared one is dropped too only if the
    /// error says the server went away (a restart), not for slowness.
    pub fn failed_dedicated(&self, epoch: u64, err: &RedisError) -> BackendError {
        if err.is_connection_dropped() || err.is_connection_refusal() {
            return self.failed(epoch, err);
        }
        classify(err)
    }
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
        | ErrorKind::Server(
            ServerErrorKind::BusyLoading
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::NoPerm,
        ) => BackendError::Unavailable(err.to_string()),
        _ => BackendError::Protocol(err.to_string()),
    }
}

/// A small pool of dedicated connections for commands that block the connection they are sent
/// on. `WAIT` must never go to the shared multiplexed connection: it would stall every other
/// request queued behind it.
#[derive(Debug)]
pub struct DedicatedPool {
    idle: Mutex<Vec<(u64, MultiplexedConnection)>>,
    slots: Semaphore,
}

/// A connection taken from a [`DedicatedPool`]. Dropping it closes the connection; only
/// [`Checkout::give_back`] returns it, so a connection whose command failed or was cancelled
/// midway (possibly still blocked server-side) is never reused.
#[derive(Debug)]
pub struct Checkout<'a> {
    pool: &'a DedicatedPool,
    pub epoch: u64,
    pub conn: MultiplexedConnection,
    _slot: SemaphorePermit<'a>,
}

impl DedicatedPool {
    pub fn new(size: usize) -> Self {
        Self {
            idle: Mutex::new(Vec::with_capacity(size)),
            slots: Semaphore::new(size),
        }
    }

    fn idle(&self) -> MutexGuard<'_, Vec<(u64, MultiplexedConnection)>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a free slot, then reuses an idle connection of the current epoch or opens one.
    pub async fn checkout<'a>(
        &'a self,
        shared: &SharedConnection,
    ) -> Result<Checkout<'a>, BackendError> {
        let slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| BackendError::Unavailable("connection pool closed".into()))?;
        let current = shared.epoch();
        let reusable = {
            let mut idle = self.idle();
            idle.retain(|(epoch, _)| *epoch >= current);
            idle.pop()
        };
        let (epoch, conn) = match reusable {
            Some(found) => found,
            None => shared.open_dedicated().await?,
        };
        Ok(Checkout {
            pool: self,
            epoch,
            conn,
            _slot: slot,
        })
    }
}

impl Checkout<'_> {
    pub fn give_back(self) {
        self.pool.idle().push((self.epoch, self.conn));
    }
}
