//! The Redis backend: one standalone Redis or Valkey server, the master of a Sentinel-managed
//! group, or a Redis Cluster.
//!
//! Every lock operation is one atomic step on Redis: a Lua script (in `../scripts/`) run by SHA
//! over one shared multiplexed connection, reloaded automatically when the server answers
//! NOSCRIPT (its script cache is empty after a restart or failover), or, for release and renew
//! where the server has them, a native compare-and-delete or compare-and-set command (see
//! [`features`]). All user data travels in KEYS and ARGV; no script text is ever built from
//! input.
//!
//! Key layout, for a name `orders:42` and the default prefix `lockgate:`:
//!
//! | key | holds | lives |
//! |---|---|---|
//! | `lockgate:{orders:42}` | the holder's token `<stem>.<fence>`, exactly | the lease (PTTL) |
//! | `lockgate:fences` | the fence counter (standalone, Sentinel, each Redlock node) | always |
//! | `lockgate:{<tag>}:fences` | the fence counter of one hash slot (Cluster; `<tag>` maps to the slot) | always |
//! | `lockgate:{orders:42}:claim` | the last attempt to claim an idempotent grant | at most the first lease |
//!
//! and the pub/sub channel `lockgate:{orders:42}:released`, on which releases are announced to
//! gateways with waiters for the name (see [`notify`]). So Redis holds O(live grants + hash
//! slots) keys for lockgate, never one per name ever used (see `super::fence`). A lockgate
//! older than this layout kept a counter per name, `lockgate:{orders:42}:fence`; the acquire
//! script reads it on the name's next grant and deletes it.
//!
//! The braces are a hash tag: a lock's keys hash to the name's Redis Cluster slot, so one
//! script can touch all of them. Names cannot contain braces, so a name can never move the tag.
//!
//! With replica acknowledgement requested, the script and `WAIT n timeout` go pipelined in one
//! round trip over a dedicated connection (to the master, or in a cluster to the master of the
//! name's slot), because `WAIT` blocks the connection it is sent on.
//!
//! Deployments differ only in how connections are made ([`source`], [`connection`]): a fixed
//! server; the master the Sentinels name ([`sentinel`]: every configured Sentinel is followed,
//! and a switch, or a connection error or `READONLY` reply, replaces every connection); or
//! redis-rs's cluster connection, with [`cluster`] for the slot owners `WAIT` needs.

mod cluster;
mod connection;
mod connectors;
mod errors;
mod features;
mod notify;
mod pool;
mod scripts;
mod sentinel;
mod source;

pub use features::NativeCommands;

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::ConnectionLike;
use redis::cluster::ClusterClient;
use redis::{
    Client, Cmd, ConnectionInfo, ErrorKind, FromRedisValue, IntoConnectionInfo, RedisResult,
    ServerErrorKind, Value,
};

use self::cluster::{SlotMasters, with_slot_tag};
use self::connection::{Connect, OnConnect, SharedConnection, Timeouts};
use self::connectors::{
    ClusterConnector, NodeConnector, Preparation, connect_timeout, node_configs,
};
use self::errors::{is_moved, worth_a_fresh_connection};
use self::features::{Downgradable, Features, ReleaseVia, RenewVia};
use self::notify::Notifier;
use self::pool::DedicatedPool;
use self::scripts::{ACQUIRE, FINALIZE, INSPECT, RELEASE, RENEW, RENEW_UNFENCED, WITHDRAW};
use self::sentinel::MasterTracker;
use self::source::NodeSource;
use super::fence::fence_of;
use super::{
    AcquireOutcome, BackendError, Claim, Inspection, Lease, LockBackend, ReleaseFeed,
    ReleaseOutcome, RenewOutcome, ReplicaAck,
};
use crate::metrics::{Metrics, RedisCall};

/// Where the data lives.
#[derive(Debug, Clone)]
pub enum RedisTarget {
    /// One server: `redis://` or `rediss://` URL, credentials in it.
    Url(String),
    /// The master of the group `master`, as the Sentinels at `sentinels` (URLs, their own
    /// credentials in them) name it. `username` and `password` are the master's.
    Sentinel {
        sentinels: Vec<String>,
        master: String,
        username: Option<String>,
        password: Option<String>,
    },
    /// A Redis Cluster, discovered from `seeds` (URLs, credentials in them).
    Cluster { seeds: Vec<String> },
}

/// Everything the Redis backend needs to know.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    pub target: RedisTarget,
    pub key_prefix: String,
    /// Bound on every operation, including connecting; exceeded means "unavailable".
    pub timeout: Duration,
    /// Dedicated connections for `WAIT` (per master, in a cluster).
    pub wait_pool_size: usize,
    /// Whether release and renew may use the server's native commands.
    pub native_commands: NativeCommands,
    /// PEM certificates of the CAs to trust for `rediss://` instead of the system's.
    pub ca_certificates: Option<Vec<u8>>,
    /// Where Redis round trips and errors are counted.
    pub metrics: Arc<Metrics>,
}

#[derive(Debug)]
pub struct RedisBackend {
    /// `redis`, `sentinel` or `cluster`.
    kind: &'static str,
    commands: Commands,
    waits: Waits,
    notifier: Notifier,
    key_prefix: String,
    counters: Counters,
    timeout: Duration,
    metrics: Arc<Metrics>,
}

/// How ordinary commands travel.
#[derive(Debug)]
enum Commands {
    Node(SharedConnection<NodeConnector>),
    Cluster(SharedConnection<ClusterConnector>),
}

/// How `WAIT` travels: dedicated connections to the master, or to the master of a slot.
#[derive(Debug)]
enum Waits {
    Node(DedicatedPool),
    // Boxed: the slot map and its pools are twice the size of one pool.
    Cluster(Box<SlotMasters>),
}

/// Where fence counters are: one per server, or one per hash slot (Cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counters {
    One,
    PerSlot,
}

/// The keys of one lock name, written straight into a command's buffer (no `String` per key
/// per request).
#[derive(Clone, Copy)]
struct LockKeys<'a> {
    prefix: &'a str,
    name: &'a str,
    counters: Counters,
}

/// What goes between the prefix and the suffix of a key.
#[derive(Clone, Copy)]
enum Tag<'a> {
    /// Nothing: `<prefix><suffix>`.
    None,
    /// `{<name>}`: the name's own keys.
    Name(&'a str),
    /// `{<tag>}` with a tag of the name's hash slot: the slot's fence counter.
    SlotOf(&'a str),
}

/// One key: `<prefix><tag><suffix>`.
struct Key<'a> {
    prefix: &'a str,
    tag: Tag<'a>,
    suffix: &'static str,
}

impl<'a> LockKeys<'a> {
    fn key(&self, tag: Tag<'a>, suffix: &'static str) -> Key<'a> {
        Key {
            prefix: self.prefix,
            tag,
            suffix,
        }
    }

    fn lock(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), "")
    }

    /// The fence counter shared by this name and the others of its slot.
    fn counter(&self) -> Key<'a> {
        match self.counters {
            Counters::One => self.key(Tag::None, "fences"),
            Counters::PerSlot => self.key(Tag::SlotOf(self.name), ":fences"),
        }
    }

    /// The per-name fence counter a lockgate before the fence-in-token format kept.
    fn legacy_counter(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":fence")
    }

    fn claim(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":claim")
    }

    /// The pub/sub channel on which releases of the name are announced. Not a key, but
    /// tagged like one so that a sharded channel would live in the name's slot.
    fn channel(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":released")
    }

    /// The lock key as a string (for the subscriptions of waiters).
    fn lock_string(&self) -> String {
        format!("{}{{{}}}", self.prefix, self.name)
    }
}

impl redis::ToRedisArgs for Key<'_> {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        let mut arg = out.writer_for_next_arg();
        // Writing to the command's in-memory buffer cannot fail.
        let mut put = |part: &str| {
            let _ = std::io::Write::write_all(&mut arg, part.as_bytes());
        };
        put(self.prefix);
        match self.tag {
            Tag::None => {}
            Tag::Name(name) => {
                put("{");
                put(name);
                put("}");
            }
            Tag::SlotOf(name) => with_slot_tag(name, |tag| {
                put("{");
                put(tag);
                put("}");
            }),
        }
        put(self.suffix);
    }
}

/// What one request sends on the shared connection.
#[derive(Clone, Copy)]
enum Request<'a> {
    /// An EVALSHA of the script (loaded first if the server lacks it).
    Script(&'a scripts::Lua, &'a Cmd),
    /// Plain commands, pipelined.
    Native(&'a redis::Pipeline),
}

impl Request<'_> {
    fn call(&self) -> RedisCall {
        match self {
            Self::Script(..) => RedisCall::Script,
            Self::Native(_) => RedisCall::Command,
        }
    }
}

impl RedisBackend {
    /// Checks the configuration and prepares the connections; connecting happens on first use,
    /// so the gateway can start before Redis does and become ready when Redis is.
    pub fn new(options: RedisOptions) -> Result<Self, BackendError> {
        let (shared_config, dedicated_config) = node_configs(options.timeout);
        let timeouts = Timeouts {
            connect: connect_timeout(options.timeout),
            probe: (options.timeout * 2).max(Duration::from_secs(1)),
        };
        let kind = match &options.target {
            RedisTarget::Url(_) => "redis",
            RedisTarget::Sentinel { .. } => "sentinel",
            RedisTarget::Cluster { .. } => "cluster",
        };
        let preparation = Preparation {
            probe_key: format!("{}probe", options.key_prefix),
            native: options.native_commands,
        };
        let on_connect: OnConnect = {
            let metrics = options.metrics.clone();
            Box::new(move |server, features: Features| {
                metrics.redis_server(
                    &server.name,
                    &server.version,
                    features.release.label(),
                    features.renew.label(),
                );
            })
        };
        let (commands, waits, notifier, counters) = match options.target {
            RedisTarget::Cluster { seeds } => {
                let infos = seeds
                    .iter()
                    .map(|url| url.as_str().into_connection_info())
                    .collect::<RedisResult<Vec<ConnectionInfo>>>()
                    .map_err(|e| unusable("a cluster seed url is not usable", e))?;
                let template = infos
                    .first()
                    .cloned()
                    .ok_or_else(|| BackendError::Config("no cluster seed".into()))?;
                let mut builder = ClusterClient::builder(infos.clone())
                    .connection_timeout(connect_timeout(options.timeout))
                    .response_timeout(options.timeout);
                if let Some(ca) = &options.ca_certificates {
                    builder = builder.certs(tls_certificates(ca));
                }
                let client = builder
                    .build()
                    .map_err(|e| unusable("the cluster settings are not usable", e))?;
                let clients = infos
                    .into_iter()
                    .map(|info| open_client(info, options.ca_certificates.as_deref()))
                    .collect::<RedisResult<Vec<_>>>()
                    .map_err(|e| unusable("a cluster seed url is not usable", e))?;
                // Classic PUBLISH reaches subscribers on every node of a cluster: any node will do.
                let any = Arc::new(NodeSource::AnyOf {
                    clients,
                    next: Default::default(),
                });
                let connector = ClusterConnector {
                    client,
                    preparation,
                };
                (
                    Commands::Cluster(SharedConnection::new(connector, timeouts, Some(on_connect))),
                    Waits::Cluster(Box::new(SlotMasters::new(
                        template,
                        dedicated_config,
                        options.wait_pool_size,
                    ))),
                    Notifier::new(any, options.timeout, false),
                    Counters::PerSlot,
                )
            }
            node => {
                let source = Arc::new(Self::node_source(
                    node,
                    options.ca_certificates.as_deref(),
                    options.timeout,
                )?);
                let connector = NodeConnector {
                    source: source.clone(),
                    config: shared_config,
                    preparation,
                };
                (
                    Commands::Node(SharedConnection::new(connector, timeouts, Some(on_connect))),
                    Waits::Node(DedicatedPool::new(
                        source.clone(),
                        dedicated_config,
                        options.wait_pool_size,
                    )),
                    Notifier::new(source, options.timeout, true),
                    Counters::One,
                )
            }
        };
        Ok(Self {
            kind,
            commands,
            waits,
            notifier,
            key_prefix: options.key_prefix,
            counters,
            timeout: options.timeout,
            metrics: options.metrics,
        })
    }

    /// Where a single-node target's connections go: a fixed server, or the master Sentinel
    /// names (with the follower of its announcements).
    fn node_source(
        target: RedisTarget,
        ca: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<NodeSource, BackendError> {
        match target {
            RedisTarget::Url(url) => open_client(url.as_str(), ca)
                .map(NodeSource::Direct)
                .map_err(|e| unusable("the redis url is not usable", e)),
            RedisTarget::Sentinel {
                sentinels,
                master,
                username,
                password,
            } => {
                let mut settings = redis::RedisConnectionInfo::default();
                if let Some(user) = username {
                    settings = settings.set_username(user);
                }
                if let Some(pass) = password {
                    settings = settings.set_password(pass);
                }
                let clients = sentinel_clients(&sentinels)
                    .map_err(|e| unusable("a sentinel url is not usable", e))?;
                if clients.is_empty() {
                    return Err(BackendError::Config("no sentinel configured".into()));
                }
                Ok(NodeSource::Sentinel(MasterTracker::new(
                    clients, master, settings, timeout,
                )))
            }
            RedisTarget::Cluster { .. } => Err(BackendError::Config(
                "a cluster is not a single node".into(),
            )),
        }
    }

    /// `redis`, `sentinel` or `cluster`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    fn keys<'a>(&'a self, name: &'a str) -> LockKeys<'a> {
        LockKeys {
            prefix: &self.key_prefix,
            name,
            counters: self.counters,
        }
    }

    /// The commands the current connection offers (Lua until connected: a connection made
    /// during the request then serves it with scripts).
    fn features(&self) -> Features {
        match &self.commands {
            Commands::Node(shared) => shared.features(),
            Commands::Cluster(shared) => shared.features(),
        }
    }

    /// Sends one request on the shared connection: waiting for a connection is bounded by the
    /// connect timeout, the command itself by the backend timeout.
    async fn run<T: FromRedisValue>(&self, request: Request<'_>) -> Result<T, BackendError> {
        let started = Instant::now();
        let outcome = match &self.commands {
            Commands::Node(shared) => run_on(shared, request, self.timeout).await,
            Commands::Cluster(shared) => run_on(shared, request, self.timeout).await,
        };
        self.record(request.call(), started, &outcome);
        outcome
    }

    /// Runs one script on the shared connection.
    async fn script<T: FromRedisValue>(
        &self,
        script: &scripts::Lua,
        call: &Cmd,
    ) -> Result<T, BackendError> {
        self.run(Request::Script(script, call)).await
    }

    /// Sends native commands; `None` when the server refused them (the connection then uses
    /// Lua from now on, and so should the caller).
    async fn native<T: FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
        refused: impl Fn(&Downgradable),
    ) -> Result<Option<T>, BackendError> {
        match self.run::<T>(Request::Native(pipe)).await {
            Ok(value) => Ok(Some(value)),
            Err(BackendError::Protocol(message) | BackendError::Refused(message)) => {
                tracing::warn!(error = %message, "the server refused a native command; using Lua on this connection");
                match &self.commands {
                    Commands::Node(shared) => shared.with_current(&refused),
                    Commands::Cluster(shared) => shared.with_current(&refused),
                }
                Ok(None)
            }
            Err(err) => Err(err),
        }
    }

    /// Counts one call in the metrics: its time, and its error if it failed.
    fn record<T>(&self, call: RedisCall, started: Instant, outcome: &Result<T, BackendError>) {
        self.metrics.redis_roundtrip(call, started.elapsed());
        if let Err(err) = outcome {
            self.metrics.backend_error(err.kind());
        }
    }

    /// Runs one script followed by `WAIT`, pipelined on a dedicated connection, and returns
    /// the script's reply with the number of replicas that acknowledged.
    async fn run_acked<T: FromRedisValue>(
        &self,
        name: &str,
        script: &scripts::Lua,
        call: &Cmd,
        ack: ReplicaAck,
    ) -> Result<(T, u32), BackendError> {
        let attempt = async {
            match (&self.commands, &self.waits) {
                (Commands::Node(shared), Waits::Node(pool)) => {
                    acked_on(shared, pool, script, call, ack, self.timeout)
                        .await
                        .map_err(Acked::into_error)
                }
                (Commands::Cluster(shared), Waits::Cluster(masters)) => {
                    let mut conn = shared.get().await?.conn;
                    let pool = masters.pool_for(name, &mut conn).await?;
                    match acked_on(shared, &pool, script, call, ack, self.timeout).await {
                        Err(Acked::Moved) => {
                            // The slot moved: learn where, and try once more there.
                            masters.forget();
                            let pool = masters.pool_for(name, &mut conn).await?;
                            acked_on(shared, &pool, script, call, ack, self.timeout)
                                .await
                                .map_err(Acked::into_error)
                        }
                        other => other.map_err(Acked::into_error),
                    }
                }
                _ => Err(BackendError::Config("inconsistent redis backend".into())),
            }
        };
        let started = Instant::now();
        let outcome = attempt.await;
        self.record(RedisCall::ScriptWait, started, &outcome);
        outcome
    }

    /// Runs a script that changes a lease, with or without replica acknowledgement.
    async fn run_lease_script<T: FromRedisValue>(
        &self,
        name: &str,
        script: &scripts::Lua,
        call: &Cmd,
        ack: Option<ReplicaAck>,
    ) -> Result<(T, Option<u32>), BackendError> {
        match ack {
            None => Ok((self.script(script, call).await?, None)),
            Some(ack) => {
                let (reply, acked) = self.run_acked(name, script, call, ack).await?;
                Ok((reply, Some(acked)))
            }
        }
    }

    /// Gives the grant of `stem` the token `<stem>.<fence>` and lifts the fence counter to
    /// `fence` (Redlock; see `finalize.lua`). False when the node no longer holds it.
    pub async fn finalize(&self, name: &str, stem: &str, fence: u64) -> Result<bool, BackendError> {
        let keys = self.keys(name);
        let mut call = evalsha(&FINALIZE, &[keys.lock(), keys.counter()]);
        call.arg(stem).arg(fence);
        self.script::<i64>(&FINALIZE, &call).await.map(|n| n == 1)
    }

    async fn ping_once(&self) -> Result<(), BackendError> {
        let ping = redis::cmd("PING");
        match &self.commands {
            Commands::Node(shared) => ping_on(shared, &ping, self.timeout).await,
            Commands::Cluster(shared) => ping_on(shared, &ping, self.timeout).await,
        }
    }

    async fn release_natively(
        &self,
        keys: LockKeys<'_>,
        token: &str,
        via: ReleaseVia,
    ) -> Result<Option<ReleaseOutcome>, BackendError> {
        let mut pipe = redis::pipe();
        match via {
            ReleaseVia::DelIfEq => pipe.cmd("DELIFEQ").arg(keys.lock()).arg(token),
            ReleaseVia::DelEx => pipe.cmd("DELEX").arg(keys.lock()).arg("IFEQ").arg(token),
            ReleaseVia::Lua => return Ok(None),
        };
        // Announced also when nothing was deleted: a spurious wake-up costs a waiter one look.
        pipe.cmd("PUBLISH").arg(keys.channel()).arg("").ignore();
        let refused = |state: &Downgradable| state.release_refused();
        let Some((deleted,)) = self.native::<(i64,)>(&pipe, refused).await? else {
            return Ok(None);
        };
        if deleted == 1 {
            return Ok(Some(ReleaseOutcome::Released));
        }
        // Not deleted: nobody holds it, or another token does. (Whatever holds it now answers
        // for the instant of this look, which is within the request.)
        let mut look = redis::pipe();
        look.cmd("EXISTS").arg(keys.lock());
        let refused_look = |_: &Downgradable| {};
        let exists = self.native::<(bool,)>(&look, refused_look).await?;
        Ok(Some(match exists {
            Some((true,)) => ReleaseOutcome::NotOwner,
            _ => ReleaseOutcome::NotHeld,
        }))
    }

    async fn renew_natively(
        &self,
        keys: LockKeys<'_>,
        token: &str,
        fence: u64,
        ttl: Duration,
    ) -> Result<Option<RenewOutcome>, BackendError> {
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(keys.lock())
            .arg(token)
            .arg("IFEQ")
            .arg(token)
            .arg("PX")
            .arg(millis(ttl))
            .arg("GET");
        let refused = |state: &Downgradable| state.renew_refused();
        let Some((previous,)) = self.native::<(Option<Vec<u8>>,)>(&pipe, refused).await? else {
            return Ok(None);
        };
        Ok(Some(match previous {
            None => RenewOutcome::NotHeld,
            Some(held) if held == token.as_bytes() => RenewOutcome::Renewed(Lease {
                fence,
                ttl,
                replicas_acked: None,
            }),
            Some(_) => RenewOutcome::NotOwner,
        }))
    }
}

/// Sends `request` on a shared connection, the command bounded by `timeout`. If the
/// connection turns out to be broken (the server restarted since), once more on a fresh one:
/// every lock operation is idempotent for its token (acquire finds its own grant, release and
/// withdrawal compare and delete, renew sets the same expiry), so a command that did run before
/// the break is harmless to repeat.
async fn run_on<C: Connect, T: FromRedisValue>(
    shared: &SharedConnection<C>,
    request: Request<'_>,
    timeout: Duration,
) -> Result<T, BackendError> {
    let mut link = shared.get().await?;
    match bounded(shared, &mut link, request, timeout).await? {
        Ok(value) => Ok(value),
        Err(err) if worth_a_fresh_connection(&err) => {
            shared.failed(link.epoch, &err);
            let mut link = shared.get().await?;
            bounded(shared, &mut link, request, timeout)
                .await?
                .map_err(|e| shared.failed(link.epoch, &e))
        }
        Err(err) => Err(shared.failed(link.epoch, &err)),
    }
}

/// Sends `request` on `link` within `timeout`; a timeout has the connection probed.
async fn bounded<C: Connect, T: FromRedisValue>(
    shared: &SharedConnection<C>,
    link: &mut connection::Link<C::Conn>,
    request: Request<'_>,
    timeout: Duration,
) -> Result<RedisResult<T>, BackendError> {
    match tokio::time::timeout(timeout, send(&mut link.conn, request)).await {
        Ok(result) => Ok(result),
        Err(_) => {
            shared.timed_out(link.epoch);
            Err(BackendError::Timeout(timeout))
        }
    }
}

async fn send<T: FromRedisValue>(
    conn: &mut impl ConnectionLike,
    request: Request<'_>,
) -> RedisResult<T> {
    match request {
        Request::Script(script, call) => eval(conn, script, call).await,
        Request::Native(pipe) => pipe.query_async(conn).await,
    }
}

async fn ping_on<C: Connect>(
    shared: &SharedConnection<C>,
    ping: &Cmd,
    timeout: Duration,
) -> Result<(), BackendError> {
    let mut link = shared.get().await?;
    match tokio::time::timeout(timeout, ping.query_async::<redis::Value>(&mut link.conn)).await {
        Ok(answer) => answer.map(drop).map_err(|e| shared.failed(link.epoch, &e)),
        Err(_) => {
            shared.timed_out(link.epoch);
            Err(BackendError::Timeout(timeout))
        }
    }
}

/// How a script with `WAIT` failed.
enum Acked {
    /// The slot moved (Cluster): ask where it lives now.
    Moved,
    Failed(BackendError),
}

impl Acked {
    fn into_error(self) -> BackendError {
        match self {
            Self::Moved => BackendError::Unavailable("the slot moved twice".into()),
            Self::Failed(err) => err,
        }
    }
}

impl From<BackendError> for Acked {
    fn from(err: BackendError) -> Self {
        Self::Failed(err)
    }
}

/// Runs `call` then `WAIT`, pipelined on a connection from `pool`: waiting for a free
/// connection is bounded by `timeout`, and the pipeline by `timeout` plus the replica wait.
async fn acked_on<C: Connect, T: FromRedisValue>(
    shared: &SharedConnection<C>,
    pool: &DedicatedPool,
    script: &scripts::Lua,
    call: &Cmd,
    ack: ReplicaAck,
    timeout: Duration,
) -> Result<(T, u32), Acked> {
    let mut checkout = pool.checkout(shared.epoch(), timeout).await?;
    // EVAL, not EVALSHA: after a NOSCRIPT the pipelined WAIT would have run once already.
    let mut pipe = redis::pipe();
    pipe.add_command(script.eval(call))
        .cmd("WAIT")
        .arg(ack.replicas)
        .arg(millis(ack.timeout));
    let exchange = pipe.query_async::<(T, i64)>(&mut checkout.conn);
    let limit = timeout + ack.timeout;
    let Ok(reply) = tokio::time::timeout(limit, exchange).await else {
        return Err(Acked::Failed(BackendError::Timeout(limit)));
    };
    match reply {
        Ok((value, acked)) => {
            checkout.give_back();
            Ok((value, u32::try_from(acked).unwrap_or(0)))
        }
        Err(e) if is_moved(&e) => Err(Acked::Moved),
        Err(e) => Err(Acked::Failed(shared.failed_dedicated(checkout.epoch, &e))),
    }
}

/// A setting redis-rs refused, as a configuration error (the category only: the message could
/// repeat a URL with its password).
fn unusable(what: &str, err: redis::RedisError) -> BackendError {
    BackendError::Config(format!("{what}: {}", err.category()))
}

/// A client for one node, trusting `ca` (PEM) for TLS when given.
fn open_client(info: impl IntoConnectionInfo, ca: Option<&[u8]>) -> RedisResult<Client> {
    let info = info.into_connection_info()?;
    match (ca, info.addr()) {
        (Some(ca), redis::ConnectionAddr::TcpTls { .. }) => {
            Client::build_with_tls(info, tls_certificates(ca))
        }
        _ => Client::open(info),
    }
}

fn tls_certificates(ca: &[u8]) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(ca.to_vec()),
    }
}

/// Clients for each Sentinel, all with the credentials of the first URL (Sentinels of one group
/// share them).
fn sentinel_clients(urls: &[String]) -> RedisResult<Vec<Client>> {
    let infos = urls
        .iter()
        .map(|url| url.as_str().into_connection_info())
        .collect::<RedisResult<Vec<ConnectionInfo>>>()?;
    let settings = infos.first().map(|info| info.redis_settings().clone());
    infos
        .into_iter()
        .map(|info| match &settings {
            Some(settings) => Client::open(info.set_redis_settings(settings.clone())),
            None => Client::open(info),
        })
        .collect()
}

/// `EVALSHA` of `script` with `keys`; the caller adds the arguments.
fn evalsha(script: &scripts::Lua, keys: &[Key<'_>]) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.hash()).arg(keys.len());
    for key in keys {
        cmd.arg(key);
    }
    cmd
}

/// Sends `call` (an EVALSHA of `script`), loading the script once if the server lacks it.
async fn eval<T: FromRedisValue>(
    conn: &mut impl ConnectionLike,
    script: &scripts::Lua,
    call: &Cmd,
) -> RedisResult<T> {
    match call.query_async(conn).await {
        Err(e) if is_noscript(&e) => {
            script.script.load_async(conn).await?;
            call.query_async(conn).await
        }
        other => other,
    }
}

fn is_noscript(err: &redis::RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A PTTL reply: `None` for "no expiry" (-1); negative values other than -1 count as zero.
fn pttl(ms: i64) -> Option<Duration> {
    (ms != -1).then(|| Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

fn fence(value: i64) -> Result<u64, BackendError> {
    u64::try_from(value).map_err(|_| BackendError::Protocol(format!("negative fence {value}")))
}

fn unexpected(script: &str, reply: &[i64]) -> BackendError {
    BackendError::Protocol(format!("{script} script replied {reply:?}"))
}

/// A claim id as the withdraw script takes it: decimal, or empty for none.
fn claim_arg(claim: Option<Claim>) -> String {
    claim.map(|Claim(id)| id.to_string()).unwrap_or_default()
}

impl LockBackend for RedisBackend {
    async fn acquire(
        &self,
        name: &str,
        stem: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
        claim: Option<Claim>,
    ) -> Result<AcquireOutcome, BackendError> {
        let keys = self.keys(name);
        let (lock, counter, legacy) = (keys.lock(), keys.counter(), keys.legacy_counter());
        let mut call = match claim {
            None => evalsha(&ACQUIRE, &[lock, counter, legacy]),
            Some(_) => evalsha(&ACQUIRE, &[lock, counter, legacy, keys.claim()]),
        };
        call.arg(stem).arg(millis(ttl));
        if let Some(Claim(id)) = claim {
            call.arg(id);
        }
        let (reply, acked) = self
            .run_lease_script::<Value>(name, &ACQUIRE, &call, ack)
            .await?;
        let lease = |f: i64, ttl: Duration| -> Result<Lease, BackendError> {
            Ok(Lease {
                fence: fence(f)?,
                ttl,
                replicas_acked: acked,
            })
        };
        match reply {
            Value::Int(f) => Ok(AcquireOutcome::Granted(lease(f, ttl)?)),
            other => {
                let reply: Vec<i64> = FromRedisValue::from_redis_value(other)
                    .map_err(|e| BackendError::Protocol(format!("acquire script: {e}")))?;
                match *reply {
                    [2, f, left] => Ok(AcquireOutcome::AlreadyHeld(lease(
                        f,
                        pttl(left).unwrap_or(Duration::ZERO),
                    )?)),
                    [0, left] => Ok(AcquireOutcome::Held { ttl: pttl(left) }),
                    _ => Err(unexpected("acquire", &reply)),
                }
            }
        }
    }

    async fn release(&self, name: &str, token: &str) -> Result<ReleaseOutcome, BackendError> {
        let keys = self.keys(name);
        let via = self.features().release;
        if via != ReleaseVia::Lua
            && let Some(outcome) = self.release_natively(keys, token, via).await?
        {
            return Ok(outcome);
        }
        let mut call = evalsha(&RELEASE, &[keys.lock()]);
        call.arg(token).arg(keys.channel());
        match self.script::<i64>(&RELEASE, &call).await? {
            1 => Ok(ReleaseOutcome::Released),
            0 => Ok(ReleaseOutcome::NotHeld),
            -1 => Ok(ReleaseOutcome::NotOwner),
            other => Err(unexpected("release", &[other])),
        }
    }

    async fn withdraw(
        &self,
        name: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        let keys = self.keys(name);
        let mut call = evalsha(&WITHDRAW, &[keys.lock(), keys.claim()]);
        call.arg(stem).arg(keys.channel()).arg(claim_arg(claim));
        self.script::<i64>(&WITHDRAW, &call)
            .await
            .map(|withdrawn| withdrawn == 1)
    }

    async fn renew(
        &self,
        name: &str,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<RenewOutcome, BackendError> {
        let keys = self.keys(name);
        let Some(carried) = fence_of(token) else {
            // A token without a fence: the store tells the fence.
            let mut call = evalsha(
                &RENEW_UNFENCED,
                &[keys.lock(), keys.counter(), keys.legacy_counter()],
            );
            call.arg(token).arg(millis(ttl));
            let (reply, acked) = self
                .run_lease_script::<Vec<i64>>(name, &RENEW_UNFENCED, &call, ack)
                .await?;
            return match *reply {
                [1, f] => Ok(RenewOutcome::Renewed(Lease {
                    fence: fence(f)?,
                    ttl,
                    replicas_acked: acked,
                })),
                [0] => Ok(RenewOutcome::NotHeld),
                [-1] => Ok(RenewOutcome::NotOwner),
                _ => Err(unexpected("renew", &reply)),
            };
        };
        if ack.is_none()
            && self.features().renew == RenewVia::SetIfEq
            && let Some(outcome) = self.renew_natively(keys, token, carried, ttl).await?
        {
            return Ok(outcome);
        }
        let mut call = evalsha(&RENEW, &[keys.lock()]);
        call.arg(token).arg(millis(ttl));
        let (reply, acked) = self
            .run_lease_script::<i64>(name, &RENEW, &call, ack)
            .await?;
        match reply {
            1 => Ok(RenewOutcome::Renewed(Lease {
                fence: carried,
                ttl,
                replicas_acked: acked,
            })),
            0 => Ok(RenewOutcome::NotHeld),
            -1 => Ok(RenewOutcome::NotOwner),
            other => Err(unexpected("renew", &[other])),
        }
    }

    async fn inspect(&self, name: &str) -> Result<Option<Inspection>, BackendError> {
        let keys = self.keys(name);
        let call = evalsha(&INSPECT, &[keys.lock(), keys.legacy_counter()]);
        let reply: Vec<i64> = self.script(&INSPECT, &call).await?;
        match *reply {
            [-2, _] => Ok(None),
            [ttl, f] => Ok(Some(Inspection {
                ttl: pttl(ttl),
                fence: u64::try_from(f).ok(),
            })),
            _ => Err(unexpected("inspect", &reply)),
        }
    }

    async fn watch_releases(&self, name: &str) -> ReleaseFeed {
        self.notifier.watch(self.keys(name).lock_string()).await
    }

    fn sees_every_release(&self) -> bool {
        self.notifier.sees_every_release()
    }

    async fn ping(&self) -> Result<(), BackendError> {
        let started = Instant::now();
        let outcome = self.ping_once().await;
        self.record(RedisCall::Ping, started, &outcome);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::ToRedisArgs;

    fn options(url: &str, prefix: &str) -> RedisOptions {
        RedisOptions {
            target: RedisTarget::Url(url.into()),
            key_prefix: prefix.into(),
            timeout: Duration::from_secs(1),
            wait_pool_size: 1,
            native_commands: NativeCommands::Auto,
            ca_certificates: None,
            metrics: Arc::default(),
        }
    }

    fn arg(key: Key<'_>) -> String {
        String::from_utf8(key.to_redis_args().concat()).expect("utf-8")
    }

    #[test]
    fn a_lock_and_its_slot_counter_share_a_hash_slot() {
        let backend = RedisBackend::new(options("redis://127.0.0.1:1", "lockgate:")).expect("url");
        let keys = backend.keys("orders:42");
        assert_eq!(arg(keys.lock()), "lockgate:{orders:42}");
        assert_eq!(arg(keys.counter()), "lockgate:fences");
        assert_eq!(arg(keys.legacy_counter()), "lockgate:{orders:42}:fence");
        assert_eq!(arg(keys.claim()), "lockgate:{orders:42}:claim");
        assert_eq!(arg(keys.channel()), "lockgate:{orders:42}:released");
        assert_eq!(keys.lock_string(), "lockgate:{orders:42}");

        let clustered = LockKeys {
            counters: Counters::PerSlot,
            ..keys
        };
        let counter = arg(clustered.counter());
        let tag = counter
            .strip_prefix("lockgate:{")
            .and_then(|rest| rest.strip_suffix("}:fences"))
            .expect("a tagged counter");
        assert_eq!(cluster::slot(tag), cluster::slot("orders:42"));
    }

    #[test]
    fn pttl_replies_map_to_durations() {
        assert_eq!(pttl(-1), None);
        assert_eq!(pttl(-2), Some(Duration::ZERO));
        assert_eq!(pttl(1500), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn a_url_that_is_not_redis_is_refused() {
        assert!(RedisBackend::new(options("http://example.com", "x:")).is_err());
    }
}
