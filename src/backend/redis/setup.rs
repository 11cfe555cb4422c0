//! Building a Redis backend from its options: which deployment, which connections.

use std::sync::Arc;
use std::time::Duration;

use redis::cluster::ClusterClient;
use redis::{Client, ConnectionInfo, IntoConnectionInfo, RedisResult};

use super::cluster::{self, SlotMasters};
use super::connection::{CommandConnection, OnConnect, Timeouts};
use super::connectors::{
    ClusterConnector, NodeConnector, Preparation, connect_timeout, node_configs,
};
use super::features::{Features, NativeCommands};
use super::keys::Counters;
use super::notify::Notifier;
use super::pool::DedicatedPool;
use super::sentinel::MasterTracker;
use super::source::NodeSource;
use super::transport::Transport;
use super::{Commands, DataLossWatch, RedisBackend, Waits};
use crate::backend::BackendError;
use crate::backend::data_loss::{DataLossGuard, DataLossOptions, RangeGuards};
use crate::telemetry::Metrics;

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
    /// How long the pub/sub connection stays open once nothing waits or watches.
    pub pubsub_linger: Duration,
    /// Whether release and renew may use the server's native commands.
    pub native_commands: NativeCommands,
    /// PEM certificates of the CAs to trust for `rediss://` instead of the system's.
    pub ca_certificates: Option<Vec<u8>>,
    /// Where Redis round trips and errors are counted.
    pub metrics: Arc<Metrics>,
    /// Told whenever a connection is (re)made, so that the guards look at the node again
    /// (a restarted or failed-over server may have other settings).
    pub reconnected: Arc<tokio::sync::Notify>,
    /// The guard against a node that forgot its data (see `backend::data_loss`): `None` for
    /// none.
    pub data_loss: Option<DataLossOptions>,
    /// How connections reach the node of a `redis://` target or the Sentinels and their master,
    /// when not over redis-rs's own TCP (see [`super::transport`]; Cluster has none).
    pub transport: Option<Arc<dyn Transport>>,
}

impl RedisBackend {
    /// Checks the configuration and prepares the connections; connecting happens on first use,
    /// so the gateway can start before Redis does and become ready when Redis is.
    pub fn new(options: RedisOptions) -> Result<Self, BackendError> {
        let (command_config, dedicated_config) = node_configs(options.timeout);
        let timeouts = Timeouts {
            connect: connect_timeout(options.timeout),
            probe: (options.timeout * 2).max(Duration::from_secs(1)),
        };
        let kind = match &options.target {
            RedisTarget::Url(_) => "redis",
            RedisTarget::Sentinel { .. } => "sentinel",
            RedisTarget::Cluster { .. } => "cluster",
        };
        let data_loss = match (&options.target, &options.data_loss) {
            (_, None) => None,
            (RedisTarget::Cluster { .. }, Some(guard)) => {
                Some(DataLossWatch::Cluster(RangeGuards::new(guard.clone())))
            }
            (_, Some(guard)) => Some(DataLossWatch::Node(Arc::new(DataLossGuard::new(
                guard.clone(),
            )))),
        };
        let preparation = Preparation {
            probe_key: format!("{}probe", options.key_prefix),
            native: options.native_commands,
            marker: match &data_loss {
                Some(DataLossWatch::Node(guard)) => {
                    Some((format!("{}marker", options.key_prefix), guard.clone()))
                }
                _ => None,
            },
        };
        let on_connect: OnConnect = {
            let metrics = options.metrics.clone();
            let reconnected = options.reconnected.clone();
            Box::new(move |server, features: Features| {
                reconnected.notify_one();
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
                let mut builder = cluster::with_retry_policy(
                    ClusterClient::builder(infos.clone())
                        .connection_timeout(connect_timeout(options.timeout))
                        .response_timeout(options.timeout),
                    options.timeout,
                );
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
                    Commands::Cluster(CommandConnection::new(
                        connector,
                        timeouts,
                        Some(on_connect),
                    )),
                    Waits::Cluster(Box::new(SlotMasters::new(
                        template,
                        dedicated_config,
                        options.wait_pool_size,
                    ))),
                    Notifier::new(any, options.timeout, options.pubsub_linger, false),
                    Counters::PerSlot,
                )
            }
            node => {
                let source = Arc::new(Self::node_source(
                    node,
                    options.ca_certificates.as_deref(),
                    options.timeout,
                    options.transport.clone(),
                )?);
                let connector = NodeConnector {
                    source: source.clone(),
                    config: command_config,
                    preparation,
                };
                (
                    Commands::Node(CommandConnection::new(
                        connector,
                        timeouts,
                        Some(on_connect),
                    )),
                    Waits::Node(DedicatedPool::new(
                        source.clone(),
                        dedicated_config,
                        options.wait_pool_size,
                    )),
                    Notifier::new(source, options.timeout, options.pubsub_linger, true),
                    Counters::One,
                )
            }
        };
        // Names this gateway's fair waiters in queues (see `backend::queue`): random, so that a
        // restarted gateway never answers for the waiters of the one before.
        let gateway = crate::entropy::u64()
            .map(|id| format!("{id:016x}"))
            .map_err(|e| BackendError::Config(format!("os random generator: {e}")))?;
        Ok(Self {
            kind,
            gateway,
            commands,
            waits,
            notifier,
            key_prefix: options.key_prefix,
            counters,
            timeout: options.timeout,
            metrics: options.metrics,
            data_loss,
        })
    }

    /// Where a single-node target's connections go: a fixed server, or the master Sentinel
    /// names (with the follower of its announcements).
    fn node_source(
        target: RedisTarget,
        ca: Option<&[u8]>,
        timeout: Duration,
        transport: Option<Arc<dyn Transport>>,
    ) -> Result<NodeSource, BackendError> {
        if transport.is_some() && matches!(target, RedisTarget::Cluster { .. }) {
            return Err(BackendError::Config(
                "a transport of its own is for a single node or Sentinel target only".into(),
            ));
        }
        match target {
            RedisTarget::Url(url) => open_client(url.as_str(), ca)
                .map(|client| match transport {
                    Some(transport) => NodeSource::Carried { client, transport },
                    None => NodeSource::Direct(client),
                })
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
                    clients, master, settings, timeout, transport,
                )))
            }
            RedisTarget::Cluster { .. } => Err(BackendError::Config(
                "a cluster is not a single node".into(),
            )),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_that_is_not_redis_is_refused() {
        let options = RedisOptions {
            target: RedisTarget::Url("http://example.com".into()),
            key_prefix: "x:".into(),
            timeout: Duration::from_secs(1),
            wait_pool_size: 1,
            pubsub_linger: Duration::ZERO,
            native_commands: NativeCommands::Auto,
            ca_certificates: None,
            metrics: Arc::default(),
            reconnected: Arc::default(),
            transport: None,
            data_loss: None,
        };
        assert!(RedisBackend::new(options).is_err());
    }
}
