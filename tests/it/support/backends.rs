//! The backends a feature's walk runs on, as a table.
//!
//! A feature's file writes the walk every backend must pass once, as an `async fn(&Gateway)`,
//! and says where it runs in one line:
//!
//! ```ignore
//! on_backends!(every_walk: dev, redis, sentinel, cluster);
//! ```
//!
//! which makes one test per backend, `every_walk::dev`, `every_walk::redis` and so on, each on
//! a fresh gateway over fresh servers (stopped when the test ends). `walk with adjust:` first
//! passes each backend's configuration through `adjust` (`fn(Config) -> Config`; API keys, a
//! limit). A backend's own extra checks (keys left in Redis, a Redlock node's view) stay
//! tests of their own beside the table.

use std::any::Any;
use std::time::Duration;

use lockgate::config::{BackendChoice, Config};

use super::gateway::{
    Gateway, cluster_config, config, redis_config, redlock_config, sentinel_config,
};
use super::redis::{MASTER, RedisCluster, RedisServer, SentinelGroup};

/// A change to a backend's configuration before its gateway starts.
pub type Adjust = fn(Config) -> Config;

/// A gateway with the servers it stands on, which live as long as it.
pub struct Deployed {
    pub gw: Gateway,
    /// Held only to be stopped (dropped) with the deployment.
    _servers: Box<dyn Any>,
}

async fn deploy(config: Config, adjust: Adjust, servers: impl Any) -> Deployed {
    Deployed {
        gw: Gateway::start(adjust(config)).await,
        _servers: Box::new(servers),
    }
}

/// The memory backend (`--dev`).
pub async fn dev(adjust: Adjust) -> Deployed {
    deploy(config(BackendChoice::Memory), adjust, ()).await
}

/// One standalone Redis.
pub async fn redis(adjust: Adjust) -> Deployed {
    let redis = RedisServer::start();
    let config = redis_config(&redis.url());
    deploy(config, adjust, redis).await
}

/// A master and a replica under three Sentinels.
pub async fn sentinel(adjust: Adjust) -> Deployed {
    let group = SentinelGroup::start();
    let config = sentinel_config(&group.urls(), MASTER);
    deploy(config, adjust, group).await
}

/// A Redis Cluster of three masters, no replicas.
pub async fn cluster(adjust: Adjust) -> Deployed {
    let cluster = RedisCluster::start(3, 0);
    let config = cluster_config(&cluster.seed_urls());
    deploy(config, adjust, cluster).await
}

/// Redlock over three independent masters, 200 ms per node.
pub async fn redlock(adjust: Adjust) -> Deployed {
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let config = redlock_config(&urls, Duration::from_millis(200));
    deploy(config, adjust, nodes).await
}

/// One test per backend of the table, each running the walk on a fresh gateway (see the
/// module's documentation).
macro_rules! on_backends {
    ($walk:ident: $($backend:ident),+ $(,)?) => {
        $crate::support::backends::on_backends!(
            $walk with std::convert::identity: $($backend),+
        );
    };
    ($walk:ident with $adjust:path: $($backend:ident),+ $(,)?) => {
        mod $walk {
            use super::*;
            $(
                #[tokio::test]
                async fn $backend() {
                    let deployed = $crate::support::backends::$backend($adjust).await;
                    $walk(&deployed.gw).await;
                }
            )+
        }
    };
}
pub(crate) use on_backends;
