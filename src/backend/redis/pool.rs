//! Small pools of dedicated connections for `WAIT`, which blocks the connection it is sent on
//! and so must never go to the multiplexed command connection: it would stall every other
//! request queued behind it.
//!
//! A pool holds at most `size` connections. A request that finds them all busy (replicas slow
//! to acknowledge) waits for one no longer than the backend timeout, then gets
//! [`BackendError::WaitPoolExhausted`]: its own problem type and metric, so that an operator
//! raises `--wait-pool-size` or looks at the replicas, not at a healthy Redis.
//!
//! Connections remember the command connection's epoch and the node's generation they were
//! opened in; when the command connection has been replaced since (Redis restarted, failed
//! over), idle ones are discarded instead of failing the next request that would pick them.
//! One the server closed for idling (Redis's `timeout`, which the command connection never
//! reaches: the guards read Redis's clock on it every 500 ms) is found when used, and the
//! request is sent again on a fresh one (see `send::acked_on`).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use tokio::sync::{Semaphore, SemaphorePermit};

use super::errors::classify_connect;
use super::source::NodeSource;
use crate::backend::BackendError;

#[derive(Debug)]
pub struct DedicatedPool {
    source: Arc<NodeSource>,
    config: AsyncConnectionConfig,
    size: usize,
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
    /// Whether the connection was idle in the pool (else just opened).
    pub reused: bool,
    _slot: SemaphorePermit<'a>,
}

impl DedicatedPool {
    /// The address (`host:port`) of the node the pool's connections go to now.
    pub async fn address(&self) -> String {
        match self.source.client().await {
            Ok(client) => client.get_connection_info().addr().to_string(),
            Err(_) => "unknown".into(),
        }
    }

    /// At most `size` connections to the node `source` names, made with `config`.
    pub fn new(source: Arc<NodeSource>, config: AsyncConnectionConfig, size: usize) -> Self {
        Self {
            source,
            config,
            size,
            idle: Mutex::new(Vec::with_capacity(size)),
            slots: Semaphore::new(size),
        }
    }

    fn idle(&self) -> MutexGuard<'_, Vec<(u64, u64, MultiplexedConnection)>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits up to `patience` for a free slot, then reuses an idle connection opened in epoch
    /// `current` or later and in the node's current generation, or opens one (tagged
    /// `current`).
    pub async fn checkout(
        &self,
        current: u64,
        patience: Duration,
    ) -> Result<Checkout<'_>, BackendError> {
        let slot = match tokio::time::timeout(patience, self.slots.acquire()).await {
            Ok(Ok(slot)) => slot,
            Ok(Err(_)) => return Err(BackendError::Unavailable("connection pool closed".into())),
            Err(_) => return Err(BackendError::WaitPoolExhausted(self.size)),
        };
        let generation = self.source.generation();
        let reusable = {
            let mut idle = self.idle();
            idle.retain(|(epoch, opened_in, _)| *epoch >= current && *opened_in == generation);
            idle.pop()
        };
        let reused = reusable.is_some();
        let (epoch, generation, conn) = match reusable {
            Some(found) => found,
            None => {
                let client = self.source.client().await?;
                let conn =
                    super::transport::multiplexed(&client, &self.config, self.source.transport())
                        .await
                        .map_err(|e| classify_connect(&e))?;
                (current, generation, conn)
            }
        };
        Ok(Checkout {
            pool: self,
            epoch,
            generation,
            conn,
            reused,
            _slot: slot,
        })
    }

    /// Closes every idle connection: one of them was found closed by the server, and the
    /// others idled as long.
    pub fn discard_idle(&self) {
        self.idle().clear();
    }
}

impl Checkout<'_> {
    pub fn give_back(self) {
        self.pool
            .idle()
            .push((self.epoch, self.generation, self.conn));
    }
}
