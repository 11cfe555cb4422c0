//! Where the master of a Sentinel-managed group is, as every configured Sentinel tells it.
//!
//! One [`MasterTracker`] per backend is the single source of truth for every connection the
//! gateway makes to the master (the command connection, the `WAIT` pool, the pub/sub
//! connection): they all ask it, so none can learn of a switch before the others, and none can
//! talk another out of following it.
//!
//! The tracker keeps the master's address with the Sentinel *configuration epoch* it came
//! with. Sentinels bump the epoch at every failover, so of two answers the one with the larger
//! epoch is the newer; an answer with a smaller epoch (a Sentinel that has not heard of the
//! failover yet, or one cut off with the old master) is ignored. When the address changes, the
//! tracker bumps its *generation*; connections opened in an older generation are replaced
//! before their next use, so once the gateway has heard of a switch no request is sent to the
//! old master, even one that still accepts writes because it was cut off from the Sentinels.
//!
//! It hears of switches from **all** configured Sentinels at once: a task per Sentinel stays
//! subscribed to `+switch-master` and, on every announcement, on every (re)subscription and
//! every two seconds, asks that Sentinel `SENTINEL MASTER <name>` (address and epoch). A
//! Sentinel that is down, frozen or does not know the group only costs its own task.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::watch;
use futures_util::StreamExt;
use futures_util::future::join_all;
use redis::{
    AsyncConnectionConfig, Client, ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo,
};

use super::transport::{self, Transport};
use crate::backend::{AbortOnDrop, BackendError};

const CHANNEL: &str = "+switch-master";
/// How often each Sentinel is asked where the master is, and its subscription checked.
const ASK_EVERY: Duration = Duration::from_secs(2);
/// Reconnect backoff to a Sentinel.
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The master's address as of a configuration epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Known {
    epoch: u64,
    host: String,
    port: u16,
}

#[derive(Debug)]
pub struct MasterTracker {
    shared: Arc<Shared>,
    sentinels: Vec<Client>,
    /// Credentials (and database) for the master itself.
    master_settings: RedisConnectionInfo,
    timeout: Duration,
    /// How connections reach the Sentinels and the master, when not over redis-rs's own TCP
    /// (the simulation's network, see [`super::transport`]).
    transport: Option<Arc<dyn Transport>>,
    tasks: OnceLock<Vec<AbortOnDrop>>,
}

#[derive(Debug)]
struct Shared {
    master: String,
    known: Mutex<Option<Known>>,
    generation: watch::Sender<u64>,
}

impl Shared {
    fn known(&self) -> MutexGuard<'_, Option<Known>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes in what a Sentinel said, if it is newer than what is known.
    fn observe(&self, seen: Known) {
        let mut known = self.known();
        let moved = match &*known {
            None => false,
            Some(current) if seen.epoch < current.epoch => return,
            Some(current) if seen.epoch == current.epoch => {
                // One epoch names one master; a different address at the same epoch is a
                // Sentinel caught mid-failover. Keep what is known.
                return;
            }
            Some(current) => (&current.host, current.port) != (&seen.host, seen.port),
        };
        if moved {
            tracing::warn!(master = %self.master, epoch = seen.epoch, host = %seen.host, port = seen.port, "sentinel moved the master; reconnecting");
        }
        *known = Some(seen);
        drop(known);
        if moved {
            self.generation.send_modify(|g| *g += 1);
        }
    }
}

impl MasterTracker {
    /// Follows the group `master` through `sentinels`, connecting to the master with
    /// `master_settings`; `timeout` bounds each question to a Sentinel; connections go over
    /// `transport` when there is one.
    pub fn new(
        sentinels: Vec<Client>,
        master: String,
        master_settings: RedisConnectionInfo,
        timeout: Duration,
        transport: Option<Arc<dyn Transport>>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                master,
                known: Mutex::new(None),
                generation: watch::channel(0).0,
            }),
            sentinels,
            master_settings,
            timeout,
            transport,
            tasks: OnceLock::new(),
        }
    }

    /// The transport connections go over, when not redis-rs's own TCP.
    pub fn transport(&self) -> Option<&dyn Transport> {
        self.transport.as_deref()
    }

    /// How many times the master moved so far.
    pub fn generation(&self) -> u64 {
        *self.shared.generation.borrow()
    }

    /// Changes of the generation.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.shared.generation.subscribe()
    }

    /// A client for the master as now known; the first call asks every Sentinel and starts
    /// following them (inside the runtime).
    pub async fn master(&self) -> Result<Client, BackendError> {
        self.start();
        let known = self.shared.known().clone();
        let known = match known {
            Some(known) => known,
            None => {
                self.ask_all().await;
                self.shared.known().clone().ok_or_else(|| {
                    tracing::warn!(master = %self.shared.master, "no sentinel named the master");
                    BackendError::Unavailable(format!(
                        "no sentinel named a master for {}",
                        self.shared.master
                    ))
                })?
            }
        };
        let info = ConnectionAddr::Tcp(known.host, known.port)
            .into_connection_info()
            .map_err(|e| BackendError::Config(e.category().to_owned()))?
            .set_redis_settings(self.master_settings.clone());
        Client::open(info).map_err(|e| BackendError::Config(e.category().to_owned()))
    }

    /// Asks every Sentinel at once; what the newest answers say becomes known.
    async fn ask_all(&self) {
        let answers = join_all(
            self.sentinels
                .iter()
                .map(|s| ask_once(s, &self.shared.master, self.timeout, self.transport())),
        )
        .await;
        let newest = answers
            .into_iter()
            .flatten()
            .max_by_key(|known| known.epoch);
        if let Some(known) = newest {
            self.shared.observe(known);
        }
    }

    fn start(&self) {
        self.tasks.get_or_init(|| {
            self.sentinels
                .iter()
                .map(|sentinel| {
                    let (shared, sentinel, timeout, transport) = (
                        self.shared.clone(),
                        sentinel.clone(),
                        self.timeout,
                        self.transport.clone(),
                    );
                    AbortOnDrop(tokio::spawn(follow(shared, sentinel, timeout, transport)))
                })
                .collect()
        });
    }
}

/// Asks one Sentinel once, on a connection of its own.
async fn ask_once(
    sentinel: &Client,
    master: &str,
    timeout: Duration,
    transport: Option<&dyn Transport>,
) -> Option<Known> {
    let mut conn = tokio::time::timeout(timeout, connect(sentinel, transport))
        .await
        .ok()?
        .ok()?;
    ask(&mut conn, master, timeout).await
}

/// A connection to a Sentinel for questions.
async fn connect(
    sentinel: &Client,
    transport: Option<&dyn Transport>,
) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    transport::multiplexed(sentinel, &AsyncConnectionConfig::new(), transport).await
}

/// `SENTINEL MASTER <name>`: the master's address and the configuration epoch.
async fn ask(
    conn: &mut redis::aio::MultiplexedConnection,
    master: &str,
    timeout: Duration,
) -> Option<Known> {
    let mut cmd = redis::cmd("SENTINEL");
    cmd.arg("MASTER").arg(master);
    let query = cmd.query_async::<HashMap<String, String>>(conn);
    let fields = tokio::time::timeout(timeout, query).await.ok()?.ok()?;
    read_master(&fields)
}

fn read_master(fields: &HashMap<String, String>) -> Option<Known> {
    Some(Known {
        epoch: fields.get("config-epoch")?.parse().ok()?,
        host: fields.get("ip")?.clone(),
        port: fields.get("port")?.parse().ok()?,
    })
}

/// Follows one Sentinel for ever: subscribed to `+switch-master`, asking where the master is.
async fn follow(
    shared: Arc<Shared>,
    sentinel: Client,
    timeout: Duration,
    transport: Option<Arc<dyn Transport>>,
) {
    let mut last_pause = None;
    loop {
        let mut subscribed = false;
        let listened = listen(
            &shared,
            &sentinel,
            timeout,
            transport.as_deref(),
            &mut subscribed,
        );
        if let Err(err) = listened.await {
            tracing::debug!(error = %err, "sentinel subscription ended; reconnecting");
        }
        let pause = pause_before_reconnect(last_pause, subscribed);
        tokio::time::sleep(pause).await;
        last_pause = Some(pause);
    }
}

/// The pause before reconnecting to a Sentinel, `last` the one before the previous attempt:
/// the shortest first and after a subscription that held (`subscribed`); else twice the last,
/// up to [`MAX_BACKOFF`]. (A subscription only ends in an error: taken for failures in a row, a
/// few hiccups over days would leave every later reconnect, and a switch announced meanwhile,
/// 2 s late.)
fn pause_before_reconnect(last: Option<Duration>, subscribed: bool) -> Duration {
    match last {
        Some(last) if !subscribed => (last * 2).min(MAX_BACKOFF),
        _ => MIN_BACKOFF,
    }
}

/// Listens to one Sentinel until it fails; `subscribed` is set once it listens and was
/// answered.
async fn listen(
    shared: &Shared,
    sentinel: &Client,
    timeout: Duration,
    transport: Option<&dyn Transport>,
    subscribed: &mut bool,
) -> redis::RedisResult<()> {
    let timed_out = || redis::RedisError::from((redis::ErrorKind::Io, "sentinel timed out"));
    let pubsub = tokio::time::timeout(timeout, transport::pubsub(sentinel, transport))
        .await
        .map_err(|_| timed_out())??;
    let (mut sink, mut stream) = pubsub.split();
    tokio::time::timeout(timeout, sink.subscribe(CHANNEL))
        .await
        .map_err(|_| timed_out())??;
    let mut conn = tokio::time::timeout(timeout, connect(sentinel, transport))
        .await
        .map_err(|_| timed_out())??;
    // Anything announced while nobody listened shows in the answer.
    if let Some(known) = ask(&mut conn, &shared.master, timeout).await {
        shared.observe(known);
        *subscribed = true;
    }
    let mut every = tokio::time::interval(ASK_EVERY);
    every.reset();
    loop {
        tokio::select! {
            message = stream.next() => {
                let Some(message) = message else {
                    return Err(redis::RedisError::from((redis::ErrorKind::Io, "sentinel closed the connection")));
                };
                let payload: String = message.get_payload().unwrap_or_default();
                if payload.split_whitespace().next() == Some(shared.master.as_str())
                    && let Some(known) = ask(&mut conn, &shared.master, timeout).await
                {
                    shared.observe(known);
                }
            }
            _ = every.tick() => {
                tokio::time::timeout(timeout, sink.ping::<redis::Value>())
                    .await
                    .map_err(|_| timed_out())??;
                match ask(&mut conn, &shared.master, timeout).await {
                    Some(known) => shared.observe(known),
                    None => return Err(timed_out()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
