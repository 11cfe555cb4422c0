//! The Redis backend: one standalone Redis or Valkey server, the master of a Sentinel-managed
//! group, or a Redis Cluster.
//!
//! Every lock operation is one Lua script (in `../scripts/`) run by SHA over one shared
//! multiplexed connection, reloaded automatically when the server answers NOSCRIPT (its script
//! cache is empty after a restart or failover). All user data travels in KEYS and ARGV; no
//! script text is ever built from input.
//!
//! Key layout, for a name `orders:42` and the default prefix `lockgate:`:
//!
//! | key | holds |
//! |---|---|
//! | `lockgate:{orders:42}` | the holder's token, exactly, with the lease as its PTTL |
//! | `lockgate:{orders:42}:fence` | the last fence issued, kept for the fence retention |
//!
//! and the pub/sub channel `lockgate:{orders:42}:released`, on which the release script
//! announces every release to gateways with waiters for the name (see [`notify`]).
//!
//! The braces are a hash tag: both keys hash to one Redis Cluster slot, so one script can
//! touch both. Names cannot contain braces, so a name can never move the tag.
//!
//! With replica acknowledgement requested, the script and `WAIT n timeout` go pipelined in one
//! round trip over a dedicated connection (to the master, or in a cluster to the master of the
//! name's slot), because `WAIT` blocks the connection it is sent on.
//!
//! Deployments differ only in how connections are made ([`source`], [`connection`]): a fixed
//! server; the master Sentinel names, resolved again on every reconnect (a failover shows up
//! as a connection error, a `READONLY` reply or a `+switch-master` announcement followed by
//! [`switch`], each of which drops the connection); or redis-rs's cluster connection, with
//! [`cluster`] for the slot owners `WAIT` needs.

mod cluster;
mod connection;
mod notify;
mod scripts;
mod source;
mod switch;

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::ConnectionLike;
use redis::cluster::ClusterClient;
use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
use redis::{
    Client, Cmd, ConnectionInfo, ErrorKind, FromRedisValue, IntoConnectionInfo, RedisResult,
    ServerErrorKind,
};

use self::cluster::SlotMasters;
use self::connection::{
    ClusterConnector, Connect, DedicatedPool, NodeConnector, SharedConnection, node_configs,
    worth_a_fresh_connection,
};
use self::notify::Notifier;
use self::scripts::{ACQUIRE, INSPECT, RAISE_FENCE, RELEASE, RENEW};
use self::source::NodeSource;
use self::switch::SwitchFollower;
use super::{
    AcquireOutcome, BackendError, Inspection, Lease, LockBackend, ReleaseFeed, ReleaseOutcome,
    RenewOutcome, ReplicaAck,
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
    pub fence_retention: Duration,
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
    timeout: Duration,
    fence_retention_ms: u64,
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

/// The two keys of one lock name, written straight into a command's buffer (no `String`
/// per key per request).
#[derive(Clone, Copy)]
struct LockKeys<'a> {
    prefix: &'a str,
    name: &'a str,
}

/// One key: `<prefix>{<name>}<suffix>`.
struct Key<'a> {
    keys: LockKeys<'a>,
    suffix: &'static str,
}

impl LockKeys<'_> {
    fn lock(&self) -> Key<'_> {
        Key {
            keys: *self,
            suffix: "",
        }
    }

    fn fence(&self) -> Key<'_> {
        Key {
            keys: *self,
            suffix: ":fence",
        }
    }

    /// The pub/sub channel on which releases of the name are announced. Not a key, but
    /// tagged like one so that a sharded channel would live in the name's slot.
    fn channel(&self) -> Key<'_> {
        Key {
            keys: *self,
            suffix: ":released",
        }
    }

    fn release_channel(&self) -> String {
        format!("{}{{{}}}:released", self.prefix, self.name)
    }
}

impl redis::ToRedisArgs for Key<'_> {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        let mut arg = out.writer_for_next_arg();
        for part in [self.keys.prefix, "{", self.keys.name, "}", self.suffix] {
            // Writing to the command's in-memory buffer cannot fail.
            let _ = std::io::Write::write_all(&mut arg, part.as_bytes());
        }
    }
}

impl RedisBackend {
    /// Checks the configuration and prepares the connections; connecting happens on first use,
    /// so the gateway can start before Redis does and become ready when Redis is.
    pub fn new(options: RedisOptions) -> Result<Self, BackendError> {
        let (shared_config, dedicated_config) = node_configs(options.timeout);
        let kind = match &options.target {
            RedisTarget::Url(_) => "redis",
            RedisTarget::Sentinel { .. } => "sentinel",
            RedisTarget::Cluster { .. } => "cluster",
        };
        let (commands, waits, notifier) = match options.target {
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
                    .connection_timeout(options.timeout)
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
                (
                    Commands::Cluster(SharedConnection::new(ClusterConnector { client })),
                    Waits::Cluster(Box::new(SlotMasters::new(
                        template,
                        dedicated_config,
                        options.wait_pool_size,
                    ))),
                    Notifier::new(any, options.timeout),
                )
            }
            node => Self::node(
                Arc::new(Self::node_source(
                    node,
                    options.ca_certificates.as_deref(),
                    options.timeout,
                )?),
                shared_config,
                dedicated_config,
                options.wait_pool_size,
                options.timeout,
            ),
        };
        Ok(Self {
            kind,
            commands,
            waits,
            notifier,
            key_prefix: options.key_prefix,
            timeout: options.timeout,
            fence_retention_ms: millis(options.fence_retention),
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
                let addrs = sentinels
                    .iter()
                    .map(|url| {
                        url.as_str()
                            .into_connection_info()
                            .map(|info| info.addr().clone())
                    })
                    .collect::<RedisResult<Vec<_>>>()
                    .map_err(|e| unusable("a sentinel url is not usable", e))?;
                // Sentinel's own credentials come from the first sentinel url.
                let first = sentinels.first().map(|u| u.as_str().into_connection_info());
                let mut builder =
                    SentinelClientBuilder::new(addrs, master.as_str(), SentinelServerType::Master)
                        .map_err(|e| unusable("the sentinel settings are not usable", e))?;
                if let Some(Ok(info)) = first {
                    if let Some(user) = info.redis_settings().username() {
                        builder = builder.set_client_to_sentinel_username(user);
                    }
                    if let Some(pass) = info.redis_settings().password() {
                        builder = builder.set_client_to_sentinel_password(pass);
                    }
                }
                if let Some(user) = username {
                    builder = builder.set_client_to_redis_username(user);
                }
                if let Some(pass) = password {
                    builder = builder.set_client_to_redis_password(pass);
                }
                let sentinel = builder
                    .build()
                    .map_err(|e| unusable("the sentinel settings are not usable", e))?;
                let switches = SwitchFollower::new(
                    sentinel_clients(&sentinels)
                        .map_err(|e| unusable("a sentinel url is not usable", e))?,
                    master,
                    timeout,
                );
                Ok(NodeSource::Sentinel {
                    client: tokio::sync::Mutex::new(sentinel),
                    switches,
                })
            }
            RedisTarget::Cluster { .. } => Err(BackendError::Config(
                "a cluster is not a single node".into(),
            )),
        }
    }

    /// Connections to one node (a fixed server, or the master Sentinel names).
    fn node(
        source: Arc<NodeSource>,
        shared_config: redis::AsyncConnectionConfig,
        dedicated_config: redis::AsyncConnectionConfig,
        wait_pool_size: usize,
        timeout: Duration,
    ) -> (Commands, Waits, Notifier) {
        let connector = NodeConnector {
            source: source.clone(),
            config: shared_config,
            on_connect: scripts::load_all(),
        };
        (
            Commands::Node(SharedConnection::new(connector)),
            Waits::Node(DedicatedPool::new(
                source.clone(),
                dedicated_config,
                wait_pool_size,
            )),
            Notifier::new(source, timeout),
        )
    }

    /// `redis`, `sentinel` or `cluster`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    fn keys<'a>(&'a self, name: &'a str) -> LockKeys<'a> {
        LockKeys {
            prefix: &self.key_prefix,
            name,
        }
    }

    /// Runs one script on the shared connection, within the backend timeout.
    async fn run<T: FromRedisValue>(
        &self,
        script: &redis::Script,
        call: &Cmd,
    ) -> Result<T, BackendError> {
        let attempt = async {
            match &self.commands {
                Commands::Node(shared) => run_on(shared, script, call).await,
                Commands::Cluster(shared) => run_on(shared, script, call).await,
            }
        };
        let started = Instant::now();
        let outcome = tokio::time::timeout(self.timeout, attempt)
            .await
            .map_err(|_| BackendError::Timeout(self.timeout))
            .and_then(|result| result);
        self.record(RedisCall::Script, started, &outcome);
        outcome
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
        script: &redis::Script,
        call: &Cmd,
        ack: ReplicaAck,
    ) -> Result<(T, u32), BackendError> {
        let limit = self.timeout + ack.timeout;
        let attempt = async {
            match (&self.commands, &self.waits) {
                (Commands::Node(shared), Waits::Node(pool)) => {
                    acked_on(shared, pool, script, call, ack).await
                }
                (Commands::Cluster(shared), Waits::Cluster(masters)) => {
                    let (_, mut conn) = shared.get().await?;
                    let pool = masters.pool_for(name, &mut conn).await?;
                    let outcome = acked_on(shared, &pool, script, call, ack).await;
                    if matches!(&outcome, Err(BackendError::Unavailable(m)) if m.contains("MOVED") || m.contains("ASK"))
                    {
                        // The slot moved: learn where, and try once more there.
                        masters.forget();
                        let pool = masters.pool_for(name, &mut conn).await?;
                        return acked_on(shared, &pool, script, call, ack).await;
                    }
                    outcome
                }
                _ => Err(BackendError::Config("inconsistent redis backend".into())),
            }
        };
        let started = Instant::now();
        let outcome = tokio::time::timeout(limit, attempt)
            .await
            .map_err(|_| BackendError::Timeout(limit))
            .and_then(|result| result);
        self.record(RedisCall::ScriptWait, started, &outcome);
        outcome
    }

    /// Runs a script that changes a lease, with or without replica acknowledgement.
    async fn run_lease_script(
        &self,
        name: &str,
        script: &redis::Script,
        call: &Cmd,
        ack: Option<ReplicaAck>,
    ) -> Result<(Vec<i64>, Option<u32>), BackendError> {
        match ack {
            None => Ok((self.run(script, call).await?, None)),
            Some(ack) => {
                let (reply, acked) = self.run_acked(name, script, call, ack).await?;
                Ok((reply, Some(acked)))
            }
        }
    }

    /// Lifts the fence counter of `name` to at least `fence` (Redlock; see `raise_fence.lua`).
    pub async fn raise_fence(&self, name: &str, fence: u64) -> Result<(), BackendError> {
        let keys = self.keys(name);
        let mut call = redis::cmd("EVALSHA");
        call.arg(RAISE_FENCE.get_hash())
            .arg(1)
            .arg(keys.fence())
            .arg(fence)
            .arg(self.fence_retention_ms);
        self.run::<i64>(&RAISE_FENCE, &call).await.map(drop)
    }

    async fn ping_once(&self) -> Result<(), BackendError> {
        let ping = redis::cmd("PING");
        match &self.commands {
            Commands::Node(shared) => ping_on(shared, &ping).await,
            Commands::Cluster(shared) => ping_on(shared, &ping).await,
        }
    }
}

/// Runs `call` (an EVALSHA of `script`) on a shared connection. If the connection turns out to
/// be broken (the server restarted since), once more on a fresh one: every lock script is
/// idempotent for its token (acquire finds its own grant, release compares and deletes, renew
/// sets the same expiry), so a command that did run before the break is harmless to repeat.
async fn run_on<C: Connect, T: FromRedisValue>(
    shared: &SharedConnection<C>,
    script: &redis::Script,
    call: &Cmd,
) -> Result<T, BackendError> {
    let (epoch, mut conn) = shared.get().await?;
    match eval(&mut conn, script, call).await {
        Ok(value) => Ok(value),
        Err(err) if worth_a_fresh_connection(&err) => {
            shared.failed(epoch, &err);
            let (epoch, mut conn) = shared.get().await?;
            eval(&mut conn, script, call)
                .await
                .map_err(|e| shared.failed(epoch, &e))
        }
        Err(err) => Err(shared.failed(epoch, &err)),
    }
}

async fn ping_on<C: Connect>(shared: &SharedConnection<C>, ping: &Cmd) -> Result<(), BackendError> {
    let (epoch, mut conn) = shared.get().await?;
    ping.query_async::<redis::Value>(&mut conn)
        .await
        .map(drop)
        .map_err(|e| shared.failed(epoch, &e))
}

/// Runs `call` then `WAIT`, pipelined on a connection from `pool`.
async fn acked_on<C: Connect, T: FromRedisValue>(
    shared: &SharedConnection<C>,
    pool: &DedicatedPool,
    script: &redis::Script,
    call: &Cmd,
    ack: ReplicaAck,
) -> Result<(T, u32), BackendError> {
    let mut checkout = pool.checkout(shared.epoch()).await?;
    let mut pipe = redis::pipe();
    pipe.add_command(call.clone())
        .cmd("WAIT")
        .arg(ack.replicas)
        .arg(millis(ack.timeout));
    let reply = match pipe.query_async::<(T, i64)>(&mut checkout.conn).await {
        Err(e) if is_noscript(&e) => match script.load_async(&mut checkout.conn).await {
            Ok(_) => pipe.query_async::<(T, i64)>(&mut checkout.conn).await,
            Err(e) => Err(e),
        },
        other => other,
    };
    match reply {
        Ok((value, acked)) => {
            checkout.give_back();
            Ok((value, u32::try_from(acked).unwrap_or(0)))
        }
        Err(e) => Err(shared.failed_dedicated(checkout.epoch, &e)),
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

/// `EVALSHA` with the script's keys and arguments.
fn evalsha(script: &redis::Script, keys: LockKeys<'_>, with_fence: bool) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash());
    if with_fence {
        cmd.arg(2).arg(keys.lock()).arg(keys.fence());
    } else {
        cmd.arg(1).arg(keys.lock());
    }
    cmd
}

/// Sends `call` (an EVALSHA of `script`), loading the script once if the server lacks it.
async fn eval<T: FromRedisValue>(
    conn: &mut impl ConnectionLike,
    script: &redis::Script,
    call: &Cmd,
) -> RedisResult<T> {
    match call.query_async(conn).await {
        Err(e) if is_noscript(&e) => {
            script.load_async(conn).await?;
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

fn lease(script: &str, reply: &[i64], acked: Option<u32>) -> Result<Lease, BackendError> {
    match *reply {
        [_, f, ttl] => Ok(Lease {
            fence: fence(f)?,
            ttl: pttl(ttl).unwrap_or(Duration::ZERO),
            replicas_acked: acked,
        }),
        _ => Err(unexpected(script, reply)),
    }
}

impl LockBackend for RedisBackend {
    async fn acquire(
        &self,
        name: &str,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<AcquireOutcome, BackendError> {
        let keys = self.keys(name);
        let mut call = evalsha(&ACQUIRE, keys, true);
        call.arg(token)
            .arg(millis(ttl))
            .arg(self.fence_retention_ms);
        let (reply, acked) = self.run_lease_script(name, &ACQUIRE, &call, ack).await?;
        match reply.first() {
            Some(1) => Ok(AcquireOutcome::Granted(lease("acquire", &reply, acked)?)),
            Some(2) => Ok(AcquireOutcome::AlreadyHeld(lease(
                "acquire", &reply, acked,
            )?)),
            Some(0) if reply.len() == 2 => Ok(AcquireOutcome::Held {
                ttl: pttl(reply[1]),
            }),
            _ => Err(unexpected("acquire", &reply)),
        }
    }

    async fn release(&self, name: &str, token: &str) -> Result<ReleaseOutcome, BackendError> {
        let keys = self.keys(name);
        let mut call = evalsha(&RELEASE, keys, false);
        call.arg(token).arg(keys.channel());
        match self.run::<i64>(&RELEASE, &call).await? {
            1 => Ok(ReleaseOutcome::Released),
            0 => Ok(ReleaseOutcome::NotHeld),
            -1 => Ok(ReleaseOutcome::NotOwner),
            other => Err(unexpected("release", &[other])),
        }
    }

    async fn renew(
        &self,
        name: &str,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<RenewOutcome, BackendError> {
        let keys = self.keys(name);
        let mut call = evalsha(&RENEW, keys, true);
        call.arg(token)
            .arg(millis(ttl))
            .arg(self.fence_retention_ms);
        let (reply, acked) = self.run_lease_script(name, &RENEW, &call, ack).await?;
        match reply.first() {
            Some(1) => Ok(RenewOutcome::Renewed(lease("renew", &reply, acked)?)),
            Some(0) => Ok(RenewOutcome::NotHeld),
            Some(-1) => Ok(RenewOutcome::NotOwner),
            _ => Err(unexpected("renew", &reply)),
        }
    }

    async fn inspect(&self, name: &str) -> Result<Option<Inspection>, BackendError> {
        let keys = self.keys(name);
        let call = evalsha(&INSPECT, keys, true);
        let reply: Vec<i64> = self.run(&INSPECT, &call).await?;
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
        self.notifier.watch(self.keys(name).release_channel()).await
    }

    async fn ping(&self) -> Result<(), BackendError> {
        let started = Instant::now();
        let outcome = tokio::time::timeout(self.timeout, self.ping_once())
            .await
            .map_err(|_| BackendError::Timeout(self.timeout))
            .and_then(|result| result);
        self.record(RedisCall::Ping, started, &outcome);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend(prefix: &str) -> RedisBackend {
        RedisBackend::new(RedisOptions {
            target: RedisTarget::Url("redis://127.0.0.1:1".into()),
            key_prefix: prefix.into(),
            timeout: Duration::from_secs(1),
            wait_pool_size: 1,
            fence_retention: Duration::from_secs(60),
            ca_certificates: None,
            metrics: Arc::default(),
        })
        .expect("valid url")
    }

    #[test]
    fn lock_key_and_fence_counter_share_a_hash_tag() {
        use redis::ToRedisArgs;
        let backend = backend("lockgate:");
        let keys = backend.keys("orders:42");
        assert_eq!(
            keys.lock().to_redis_args(),
            [b"lockgate:{orders:42}".to_vec()]
        );
        assert_eq!(
            keys.fence().to_redis_args(),
            [b"lockgate:{orders:42}:fence".to_vec()]
        );
        assert_eq!(
            keys.channel().to_redis_args(),
            [keys.release_channel().into_bytes()]
        );
        assert_eq!(keys.release_channel(), "lockgate:{orders:42}:released");
    }

    #[test]
    fn pttl_replies_map_to_durations() {
        assert_eq!(pttl(-1), None);
        assert_eq!(pttl(-2), Some(Duration::ZERO));
        assert_eq!(pttl(1500), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn a_url_that_is_not_redis_is_refused() {
        let options = RedisOptions {
            target: RedisTarget::Url("http://example.com".into()),
            key_prefix: "x:".into(),
            timeout: Duration::from_secs(1),
            wait_pool_size: 1,
            fence_retention: Duration::from_secs(60),
            ca_certificates: None,
            metrics: Arc::default(),
        };
        assert!(RedisBackend::new(options).is_err());
    }
}
