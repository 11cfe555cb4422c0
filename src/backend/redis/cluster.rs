//! Redis Cluster specifics: which master owns a lock's slot, and dedicated connections to it.
//!
//! Ordinary commands go through redis-rs's cluster connection, which routes each script by
//! its first key and follows MOVED and ASK. `WAIT` cannot: it counts the replication of the
//! writes made *on the connection it is sent on*, so it must follow the script on one
//! connection to the slot's master, and it blocks that connection while it waits. redis-rs
//! would send it to every primary over their command connections. So a request that asks for
//! replica acknowledgement looks up the master of its slot here (from `CLUSTER SLOTS`,
//! refreshed when unknown or after a MOVED) and pipelines script and `WAIT` on a dedicated
//! connection to it.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, RwLock, RwLockReadGuard};
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Client, ConnectionAddr, ConnectionInfo, Value};

use super::errors::classify;
use super::pool::DedicatedPool;
use super::source::NodeSource;
use crate::backend::BackendError;

/// How redis-rs's cluster connection retries the answers that mean "not run, try again"
/// (`TRYAGAIN` while a slot's keys migrate, `CLUSTERDOWN` and `MASTERDOWN` around a failover,
/// `LOADING`) and reconnects: promptly, and always giving up before the request's deadline.
///
/// redis-rs's defaults wait at least 1.28 s before the first retry, longer than the whole
/// `--redis-timeout`: a request that met `TRYAGAIN` then timed out and was taken for an unknown
/// outcome although Redis had said it did nothing. Here the n-th retry waits a random time
/// between 1 ms and `min(4 ms × 2ⁿ, 40 ms)`, and there are only as many retries as fit in half
/// the timeout at their longest wait, so the last "not run" answer comes back as such (503
/// `backend-unavailable`, nothing to withdraw) rather than as a timeout.
pub fn with_retry_policy(builder: ClusterClientBuilder, timeout: Duration) -> ClusterClientBuilder {
    const MIN_WAIT_MS: u64 = 1;
    const FACTOR_MS: u64 = 4;
    const MAX_WAIT_MS: u64 = 40;
    let budget_ms = u64::try_from(timeout.as_millis() / 2).unwrap_or(u64::MAX);
    let retries = u32::try_from(budget_ms / MAX_WAIT_MS)
        .unwrap_or(u32::MAX)
        .clamp(2, 64);
    builder
        .retries(retries)
        .min_retry_wait(MIN_WAIT_MS)
        .max_retry_wait(MAX_WAIT_MS)
        .retry_wait_formula(FACTOR_MS, 2)
}

/// Slots in a Redis Cluster.
const SLOTS: u16 = 16384;

/// The slot of every key of a lock name: keys are `<prefix>{<name>}…`, so the hash tag, and
/// with it the slot, is the name's.
pub fn slot(name: &str) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(name.as_bytes()) % SLOTS
}

/// For every slot, the smallest number whose base-36 text hashes to it. The fence counter of a
/// slot is `<prefix>{<tag>}:fences` with that text as its tag, so one script can touch a lock
/// key and the counter of its slot. The table must never change: the counters live in Redis
/// across gateway versions (a changed tag would only restart a counter at the clock, which the
/// fence rule tolerates, but nothing is gained by it).
static SLOT_TAGS: LazyLock<Vec<u32>> = LazyLock::new(|| {
    let mut tags = vec![u32::MAX; usize::from(SLOTS)];
    let mut missing = tags.len();
    let mut buffer = [0u8; 8];
    let mut n: u32 = 0;
    while missing > 0 {
        let slot = usize::from(slot(base36(n, &mut buffer)));
        if tags[slot] == u32::MAX {
            tags[slot] = n;
            missing -= 1;
        }
        n += 1;
    }
    tags
});

/// `n` in base 36 (digits, then lowercase letters), written into `buffer`.
fn base36(mut n: u32, buffer: &mut [u8; 8]) -> &str {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut start = buffer.len();
    loop {
        start -= 1;
        buffer[start] = DIGITS[(n % 36) as usize];
        n /= 36;
        if n == 0 {
            break;
        }
    }
    // Only ASCII digits and letters were written.
    std::str::from_utf8(&buffer[start..]).unwrap_or("0")
}

/// Calls `write` with the hash tag of the slot of `name` (see [`SLOT_TAGS`]).
pub fn with_slot_tag<R>(name: &str, write: impl FnOnce(&str) -> R) -> R {
    with_tag_of_slot(slot(name), write)
}

/// Calls `write` with the hash tag of `slot` (see [`SLOT_TAGS`]).
pub fn with_tag_of_slot<R>(slot: u16, write: impl FnOnce(&str) -> R) -> R {
    let mut buffer = [0u8; 8];
    let n = SLOT_TAGS[usize::from(slot % SLOTS)];
    write(base36(n, &mut buffer))
}

/// The masters of a cluster by slot, with a dedicated connection pool for each.
#[derive(Debug)]
pub struct SlotMasters {
    /// Template for node connections: the first seed's credentials and TLS settings.
    template: ConnectionInfo,
    config: AsyncConnectionConfig,
    pool_size: usize,
    /// (first slot, last slot, "host:port" of the master), as `CLUSTER SLOTS` last said.
    ranges: RwLock<Vec<(u16, u16, String, u16)>>,
    pools: Mutex<HashMap<(String, u16), Arc<DedicatedPool>>>,
}

impl SlotMasters {
    pub fn new(template: ConnectionInfo, config: AsyncConnectionConfig, pool_size: usize) -> Self {
        Self {
            template,
            config,
            pool_size,
            ranges: RwLock::default(),
            pools: Mutex::default(),
        }
    }

    /// The pool of dedicated connections to the master of `name`'s slot.
    pub async fn pool_for(
        &self,
        name: &str,
        conn: &mut ClusterConnection,
    ) -> Result<Arc<DedicatedPool>, BackendError> {
        let slot = slot(name);
        if let Some(pool) = self.lookup(slot) {
            return Ok(pool);
        }
        self.refresh(conn).await?;
        self.lookup(slot)
            .ok_or_else(|| BackendError::Unavailable(format!("no master serves slot {slot}")))
    }

    /// Every master's address as `CLUSTER SLOTS` says now, in a stable order (for a listing,
    /// which walks the masters one after the other).
    pub async fn addresses(
        &self,
        conn: &mut ClusterConnection,
    ) -> Result<Vec<(String, u16)>, BackendError> {
        self.refresh(conn).await?;
        let mut masters: Vec<(String, u16)> = (self.read_ranges().iter())
            .map(|(_, _, host, port)| (host.clone(), *port))
            .collect();
        masters.sort_unstable();
        masters.dedup();
        Ok(masters)
    }

    /// Every range of slots with its master, as `CLUSTER SLOTS` says now: (first slot,
    /// "host:port").
    pub async fn ranges(
        &self,
        conn: &mut ClusterConnection,
    ) -> Result<Vec<(u16, String)>, BackendError> {
        self.refresh(conn).await?;
        Ok((self.read_ranges().iter())
            .map(|(first, _, host, port)| (*first, format!("{host}:{port}")))
            .collect())
    }

    /// The first slot of the range `slot` is in, as last read (no round trip).
    pub fn range_of(&self, slot: u16) -> Option<u16> {
        (self.read_ranges().iter())
            .find(|(first, last, _, _)| (*first..=*last).contains(&slot))
            .map(|(first, _, _, _)| *first)
    }

    /// The slot map as last read. A panic elsewhere while it was being replaced leaves the
    /// old or the new map, both whole, so a poisoned lock is read through.
    fn read_ranges(&self) -> RwLockReadGuard<'_, Vec<(u16, u16, String, u16)>> {
        self.ranges.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets the slot map, after a dedicated connection was told MOVED.
    pub fn forget(&self) {
        self.ranges
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    fn lookup(&self, slot: u16) -> Option<Arc<DedicatedPool>> {
        let (host, port) = {
            let ranges = self.read_ranges();
            let (_, _, host, port) = ranges
                .iter()
                .find(|(first, last, _, _)| (*first..=*last).contains(&slot))?;
            (host.clone(), *port)
        };
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        let pool = pools.entry((host.clone(), port)).or_insert_with(|| {
            let addr = match self.template.addr() {
                ConnectionAddr::TcpTls {
                    insecure,
                    tls_params,
                    ..
                } => ConnectionAddr::TcpTls {
                    host,
                    port,
                    insecure: *insecure,
                    tls_params: tls_params.clone(),
                },
                _ => ConnectionAddr::Tcp(host, port),
            };
            let info = self.template.clone().set_addr(addr);
            let source = match Client::open(info) {
                Ok(client) => NodeSource::Direct(client),
                Err(_) => NodeSource::AnyOf {
                    clients: Vec::new(),
                    next: Default::default(),
                },
            };
            Arc::new(DedicatedPool::new(
                Arc::new(source),
                self.config.clone(),
                self.pool_size,
            ))
        });
        Some(pool.clone())
    }

    async fn refresh(&self, conn: &mut ClusterConnection) -> Result<(), BackendError> {
        let reply = conn
            .req_packed_command(&redis::cmd("CLUSTER").arg("SLOTS").to_owned())
            .await
            .map_err(|e| classify(&e))?;
        let ranges = parse_slots(&reply)
            .ok_or_else(|| BackendError::Protocol("unexpected CLUSTER SLOTS reply".into()))?;
        *self.ranges.write().unwrap_or_else(|p| p.into_inner()) = ranges;
        Ok(())
    }
}

/// `CLUSTER SLOTS`: `[[first, last, [host, port, id, …], replicas…], …]`.
fn parse_slots(reply: &Value) -> Option<Vec<(u16, u16, String, u16)>> {
    let Value::Array(ranges) = reply else {
        return None;
    };
    ranges
        .iter()
        .map(|range| {
            let Value::Array(parts) = range else {
                return None;
            };
            let number = |v: &Value| match v {
                Value::Int(n) => u16::try_from(*n).ok(),
                _ => None,
            };
            let first = number(parts.first()?)?;
            let last = number(parts.get(1)?)?;
            let Value::Array(master) = parts.get(2)? else {
                return None;
            };
            let host = match master.first()? {
                Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok()?,
                Value::SimpleString(text) => text.clone(),
                _ => return None,
            };
            let port = number(master.get(1)?)?;
            Some((first, last, host, port))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("orders:42"), slot("orders:42"));
        assert_eq!(slot("123456789"), 12739);
    }

    #[test]
    fn every_slot_has_a_short_tag_that_maps_to_it() {
        for slot_number in 0..SLOTS {
            let n = SLOT_TAGS[usize::from(slot_number)];
            let mut buffer = [0u8; 8];
            let tag = base36(n, &mut buffer);
            assert!(tag.len() <= 4, "slot {slot_number}: {tag}");
            assert_eq!(slot(tag), slot_number);
        }
        // The table is part of the on-Redis format: these must never change.
        assert_eq!(slot("orders:42"), 11414);
        assert_eq!(with_slot_tag("orders:42", str::to_owned), "89x");
        assert_eq!(SLOT_TAGS[0], 1727, "slot 0's tag is 1bz");
        let mut buffer = [0u8; 8];
        assert_eq!(base36(1727, &mut buffer), "1bz");
        assert_eq!(base36(36 * 36 + 35, &mut buffer), "10z");
        assert_eq!(with_slot_tag("foo", slot), slot("foo"));
    }

    #[test]
    fn cluster_slots_replies_are_parsed() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let reply = Value::Array(vec![Value::Array(vec![
            Value::Int(0),
            Value::Int(5460),
            Value::Array(vec![bulk("127.0.0.1"), Value::Int(7000), bulk("id")]),
            Value::Array(vec![bulk("127.0.0.1"), Value::Int(7003), bulk("id2")]),
        ])]);
        assert_eq!(
            parse_slots(&reply),
            Some(vec![(0, 5460, "127.0.0.1".to_owned(), 7000)])
        );
    }
}
