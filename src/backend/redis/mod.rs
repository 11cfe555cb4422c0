//! The Redis backend: one standalone Redis or Valkey server, the master of a Sentinel-managed
//! group, or a Redis Cluster.
//!
//! Every lock operation is one atomic step on Redis: a Lua script (in `../scripts/`) run by SHA
//! over one multiplexed command connection, reloaded automatically when the server answers
//! NOSCRIPT (its script cache is empty after a restart or failover), or, for release and renew
//! where the server has them, a native compare-and-delete or compare-and-set command (see
//! `features`). All user data travels in KEYS and ARGV; no script text is ever built from
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
//! | `lockgate:{orders:42}:revoked` | the token of the grant an operator revoked (`DELETE …?force=true`), so that its holder is told | what was left of that lease |
//! | `lockgate:{orders:42}:holder` | who holds the grant (`owner`, `metadata`; see `backend::holder`), only when the acquire named one | the lease |
//! | `lockgate:{orders:42}:holds` | a reentrant grant's hold count, a hash: its token → count, only while it is held more than once (`reenter.lua`) | the lease |
//! | `lockgate:{orders:42}:queue` | fair waiters in line, a sorted set (see `backend::queue`, `fair_head.lua`) | while any waits; 6 s after the last gateway's word |
//! | `lockgate:{orders:42}:queue:live` | each gateway's liveness deadline for the queue, its arrival counter, and each place's owner and time (shown by inspect) | as the queue |
//!
//! and the pub/sub channels `lockgate:{orders:42}:released`, on which releases are announced to
//! gateways with waiters for the name (see `notify`), and `lockgate:{orders:42}:head:<gateway>`,
//! on which one gateway is told that its fair waiter heads the queue. So Redis holds O(live grants + hash
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
//! Deployments differ only in how connections are made (`source`, `connection`): a fixed
//! server; the master the Sentinels name (`sentinel`: every configured Sentinel is followed,
//! and a switch, or a connection error or `READONLY` reply, replaces every connection); or
//! redis-rs's cluster connection, with `cluster` for the slot owners `WAIT` needs.

mod batch;
mod cluster;
mod connection;
mod connectors;
mod errors;
mod features;
mod grants;
mod guards;
mod hold_off;
mod keys;
mod lease_calls;
mod listing;
mod lock;
mod multi;
mod native;
mod notify;
mod pool;
mod queue;
mod replies;
mod scripts;
mod send;
mod sentinel;
mod setup;
mod source;
mod store;
pub mod transport;

pub use features::NativeCommands;
pub use grants::{GrantSetScripts, OwnScripts};
pub use scripts::Lua;
pub use setup::{RedisOptions, RedisTarget};
use std::sync::Arc;
use std::time::Duration;

use self::cluster::SlotMasters;
use self::connection::CommandConnection;
use self::connectors::{ClusterConnector, NodeConnector};
use self::keys::{Counters, LockKeys};
use self::notify::Notifier;
use self::pool::DedicatedPool;
use crate::backend::data_loss::{DataLossGuard, RangeGuards};
use crate::telemetry::Metrics;

#[derive(Debug)]
pub struct RedisBackend {
    /// `redis`, `sentinel` or `cluster`.
    kind: &'static str,
    /// This gateway's identity in fair queues (16 hex digits).
    gateway: String,
    commands: Commands,
    waits: Waits,
    notifier: Notifier,
    key_prefix: String,
    counters: Counters,
    timeout: Duration,
    metrics: Arc<Metrics>,
    /// The guard against the node (or a Cluster's masters) forgetting its data.
    data_loss: Option<DataLossWatch>,
}

/// What watches for a node that forgot its data (see `backend::data_loss`).
#[derive(Debug)]
enum DataLossWatch {
    /// The one node (standalone, Sentinel's master): also looked at on every reconnect.
    Node(Arc<DataLossGuard>),
    /// A Cluster: a guard per range of slots.
    Cluster(RangeGuards),
}

/// How ordinary commands travel.
#[derive(Debug)]
enum Commands {
    Node(CommandConnection<NodeConnector>),
    Cluster(CommandConnection<ClusterConnector>),
}

/// How `WAIT` travels: dedicated connections to the master, or to the master of a slot.
#[derive(Debug)]
enum Waits {
    Node(DedicatedPool),
    // Boxed: the slot map and its pools are twice the size of one pool.
    Cluster(Box<SlotMasters>),
}

impl RedisBackend {
    /// `redis`, `sentinel` or `cluster`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The bound on each of its operations.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    fn keys<'a>(&'a self, name: &'a str) -> LockKeys<'a> {
        LockKeys {
            prefix: &self.key_prefix,
            name,
            counters: self.counters,
        }
    }
}
