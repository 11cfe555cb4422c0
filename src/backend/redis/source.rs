//! Where the Redis node to talk to is: a fixed server, the master a set of Sentinels points
//! at now, or any of several Cluster nodes.
//!
//! Every reconnect asks again, so following a failover is a reconnect: after a connection
//! error, a `READONLY` reply or a `+switch-master` announcement (see [`super::switch`]) the
//! connection is dropped, and the next connect resolves the master anew through Sentinel.

use std::sync::atomic::{AtomicUsize, Ordering};

use redis::Client;
use redis::sentinel::SentinelClient;

use super::connection::classify;
use super::switch::SwitchFollower;
use crate::backend::BackendError;

pub enum NodeSource {
    /// One server, always the same.
    Direct(Client),
    /// The master Sentinel names for a service, verified to be a master (ROLE) when resolved,
    /// and the follower of Sentinel's announcements that it moved.
    Sentinel {
        client: tokio::sync::Mutex<SentinelClient>,
        switches: SwitchFollower,
    },
    /// Any of several nodes, tried in turn: each call moves to the next, so a reconnect after a
    /// failure tries another node.
    AnyOf {
        clients: Vec<Client>,
        next: AtomicUsize,
    },
}

impl std::fmt::Debug for NodeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Direct(client) => f.debug_tuple("Direct").field(client).finish(),
            Self::Sentinel { switches, .. } => f
                .debug_struct("Sentinel")
                .field("generation", &switches.generation())
                .finish(),
            Self::AnyOf { clients, .. } => f
                .debug_struct("AnyOf")
                .field("nodes", &clients.len())
                .finish(),
        }
    }
}

impl NodeSource {
    /// A client for the node to use now.
    pub async fn client(&self) -> Result<Client, BackendError> {
        match self {
            Self::Direct(client) => Ok(client.clone()),
            Self::Sentinel { client, switches } => {
                let master = client.lock().await.async_get_client().await.map_err(|e| {
                    let err = classify(&e);
                    tracing::warn!(error = %err, "sentinel did not name a reachable master");
                    err
                })?;
                switches.resolved(&master);
                Ok(master)
            }
            Self::AnyOf { clients, next } => {
                let index = next.fetch_add(1, Ordering::Relaxed) % clients.len().max(1);
                clients
                    .get(index)
                    .cloned()
                    .ok_or_else(|| BackendError::Config("no redis node configured".into()))
            }
        }
    }
}

impl NodeSource {
    /// How many times the node moved (a Sentinel failover) so far; connections opened in an
    /// older generation are replaced. Always 0 for a fixed node.
    pub fn generation(&self) -> u64 {
        match self {
            Self::Sentinel { switches, .. } => switches.generation(),
            _ => 0,
        }
    }

    /// Changes of [`Self::generation`], where it can change.
    pub fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        match self {
            Self::Sentinel { switches, .. } => Some(switches.changes()),
            _ => None,
        }
    }
}
