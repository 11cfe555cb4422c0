//! Where the Redis node to talk to is: a fixed server, the master a set of Sentinels points
//! at now, or any of several Cluster nodes.
//!
//! Every reconnect asks again, so following a failover is a reconnect: after a connection
//! error, a `READONLY` reply, or a switch the Sentinels announced (see [`super::sentinel`]),
//! the connection is dropped, and the next connect goes where the Sentinels now point.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use redis::Client;

use super::sentinel::MasterTracker;
use super::transport::Transport;
use crate::backend::BackendError;

pub enum NodeSource {
    /// One server, always the same.
    Direct(Client),
    /// One server, always the same, reached over a transport of the embedder's (see
    /// [`super::transport`]): the simulation's in-memory network.
    Carried {
        client: Client,
        transport: Arc<dyn Transport>,
    },
    /// The master the Sentinels name for a group.
    Sentinel(MasterTracker),
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
            Self::Carried { client, transport } => f
                .debug_struct("Carried")
                .field("client", client)
                .field("transport", transport)
                .finish(),
            Self::Sentinel(tracker) => f
                .debug_struct("Sentinel")
                .field("generation", &tracker.generation())
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
            Self::Direct(client) | Self::Carried { client, .. } => Ok(client.clone()),
            Self::Sentinel(tracker) => tracker.master().await,
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
    /// The transport connections to the node go over, when not redis-rs's own TCP.
    pub fn transport(&self) -> Option<&dyn Transport> {
        match self {
            Self::Carried { transport, .. } => Some(transport.as_ref()),
            Self::Sentinel(tracker) => tracker.transport(),
            _ => None,
        }
    }

    /// How many times the node moved (a Sentinel failover) so far; connections opened in an
    /// older generation are replaced. Always 0 for a fixed node.
    pub fn generation(&self) -> u64 {
        match self {
            Self::Sentinel(tracker) => tracker.generation(),
            _ => 0,
        }
    }

    /// Changes of [`Self::generation`], where it can change.
    pub fn changes(&self) -> Option<crate::watch::Receiver<u64>> {
        match self {
            Self::Sentinel(tracker) => Some(tracker.changes()),
            _ => None,
        }
    }
}
