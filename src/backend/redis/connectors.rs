//! How the command connection is opened: to one node (a fixed server, or the master Sentinel
//! names) or to a Redis Cluster, and what every new connection is asked before it is used.

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;

use super::connection::{Connect, ConnectFailure, Opened};
use super::features::{self, NativeCommands};
use super::scripts;
use super::source::NodeSource;
use super::transport;
use crate::backend::BackendError;
use crate::backend::data_loss::{DataLossGuard, Marker};
use redis::aio::ConnectionLike;

/// The least time a connect may take (TCP, handshake, and the preparation below) before it
/// counts as failed, whatever the backend timeout: a Redlock node's 50 ms timeout bounds its
/// commands, but a node just restarted, on a loaded machine, may need longer to be connected.
pub const MIN_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a connect may take, for a backend whose commands are bounded by `timeout`.
pub fn connect_timeout(timeout: Duration) -> Duration {
    timeout.max(MIN_CONNECT_TIMEOUT)
}

/// Connection settings for one node: the command connection's and the dedicated connections'.
/// Neither has a reply timeout of redis-rs's own (redis-rs otherwise applies 500 ms): each
/// command is bounded by its caller, with the backend timeout (plus the replica wait for
/// `WAIT`), and a silence is handled by the command connection's probe.
pub fn node_configs(timeout: Duration) -> (AsyncConnectionConfig, AsyncConnectionConfig) {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(connect_timeout(timeout)))
        .set_response_timeout(None);
    (config.clone(), config)
}

/// What every new connection is asked before use: which server it is and what it offers
/// (see [`features`]), with the scripts loaded in the same round trip.
#[derive(Debug, Clone)]
pub struct Preparation {
    /// A key under the gateway's prefix that no lock can have, for the `SET … IFEQ` probe.
    pub probe_key: String,
    pub native: NativeCommands,
    /// The node's marker key and its guard: looked at before a new connection serves anything
    /// (see `backend::data_loss`).
    pub marker: Option<(String, Arc<DataLossGuard>)>,
}

impl Preparation {
    fn pipeline(&self) -> redis::Pipeline {
        let mut pipe = features::probe(&self.probe_key);
        // A new connection often means a restarted or failed-over server with an empty script
        // cache: fill it now rather than on each script's first NOSCRIPT.
        for load in scripts::load_all().cmd_iter() {
            pipe.add_command(load.clone()).ignore();
        }
        pipe
    }
}

/// The command connection to a single node: a fixed server, or the master Sentinel names.
#[derive(Debug)]
pub struct NodeConnector {
    pub source: Arc<NodeSource>,
    pub config: AsyncConnectionConfig,
    pub preparation: Preparation,
}

impl Connect for NodeConnector {
    type Conn = MultiplexedConnection;
    const BATCHES: bool = true;

    fn generation(&self) -> u64 {
        self.source.generation()
    }

    async fn connect(&self) -> Result<Opened<MultiplexedConnection>, ConnectFailure> {
        let client = self.source.client().await.map_err(|error| ConnectFailure {
            permanent: None,
            error,
            refused: false,
        })?;
        let mut conn = transport::multiplexed(&client, &self.config, self.source.transport())
            .await
            .map_err(|e| ConnectFailure::of(&e))?;
        let replies: Vec<redis::Value> = self
            .preparation
            .pipeline()
            .query_async(&mut conn)
            .await
            .map_err(|e| ConnectFailure::of(&e))?;
        let (server, features) = features::read_probe(&replies, self.preparation.native);
        if let Some((key, guard)) = &self.preparation.marker {
            let node = client.get_connection_info().addr().to_string();
            // The commands waiting for this connection include acquires that passed the
            // hold-back check before the loss was known: they must not run on a node that
            // forgot. This connect fails (they answer 503 and are retried), the next one finds
            // the marker as this look left it, and the hold-back refuses new grants meanwhile.
            if let Ok(marker) = read_marker(&mut conn, key, guard).await
                && guard.observe(&node, marker)
            {
                return Err(ConnectFailure {
                    permanent: None,
                    error: BackendError::Unavailable(
                        "the Redis node forgot its data; grants on it are held back".into(),
                    ),
                    refused: false,
                });
            }
        }
        Ok(Opened {
            conn,
            server,
            features,
        })
    }
}

/// The marker script (see `marker.lua`) as an `EVAL` carrying its source: off the request
/// path, counted with the guards' other commands (not as a lock script), and never NOSCRIPT.
pub(super) fn marker_eval(key: &str, guard: &DataLossGuard) -> redis::Cmd {
    let mut eval = redis::cmd("EVAL");
    eval.arg(scripts::MARKER.source)
        .arg(1)
        .arg(key)
        .arg(DataLossGuard::candidate())
        .arg(guard.lease_ms());
    eval
}

/// Reads (and keeps up) the node's marker on `conn`. A failure (a replica that refuses the
/// write, a full server) is no news: the periodic check tries again.
async fn read_marker(
    conn: &mut MultiplexedConnection,
    key: &str,
    guard: &DataLossGuard,
) -> Result<Marker, redis::RedisError> {
    let reply = marker_eval(key, guard).query_async(conn).await?;
    Ok(Marker::from_reply(reply))
}

/// The command connection to a Redis Cluster: redis-rs's cluster connection, which keeps one
/// connection per node, follows MOVED and ASK, and refreshes its slot map by itself.
#[derive(Debug)]
pub struct ClusterConnector {
    pub client: ClusterClient,
    pub preparation: Preparation,
}

impl Connect for ClusterConnector {
    type Conn = ClusterConnection;

    async fn connect(&self) -> Result<Opened<ClusterConnection>, ConnectFailure> {
        use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
        let mut conn = self
            .client
            .get_async_connection()
            .await
            .map_err(|e| ConnectFailure::of(&e))?;
        // The probe's commands route differently (any primary, the probe key's slot), so they
        // go one by one; a cluster is assumed to run one version (a node that refuses a native
        // command later switches the connection back to Lua).
        let mut probe = self
            .preparation
            .pipeline()
            .cmd_iter()
            .cloned()
            .collect::<Vec<_>>();
        let any_primary = || RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary);
        let set_ifeq = match probe.get(2) {
            // An error reply may come back as a value here.
            Some(cmd) => matches!(
                conn.req_packed_command(cmd).await,
                Ok(reply) if !matches!(reply, redis::Value::ServerError(_))
            ),
            None => false,
        };
        probe.truncate(2);
        let mut answers = Vec::new();
        for cmd in probe {
            answers.push(conn.route_command(cmd, any_primary()).await.ok());
        }
        let (server, features) = features::read_answers(
            answers.first().and_then(Option::as_ref),
            answers.get(1).and_then(Option::as_ref),
            set_ifeq,
            self.preparation.native,
        );
        // Scripts load on first use (NOSCRIPT), on whichever node serves the name.
        Ok(Opened {
            conn,
            server,
            features,
        })
    }
}
