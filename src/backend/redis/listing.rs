//! Listing on Redis: `SCAN` on the server, or on each master of a Cluster in turn (see
//! `backend::listing` for the walk, its guarantees and its cost).

use std::time::Instant;

use futures_util::future::join_all;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};

use super::errors::classify;
use super::send::Request;
use super::{Commands, RedisBackend, Waits};
use crate::backend::listing::{
    Looked, SCAN_COUNT, Scanned, Walk, kept, match_pattern, name_of_grants_key, name_of_key,
};
use crate::backend::{BackendError, Grants, GrantsOf, Inspection, LeaseStore};
use crate::telemetry::metrics::RedisCall;

/// A `SCAN` reply: the next cursor and the keys of this step.
type ScanReply = (u64, Vec<Vec<u8>>);

impl RedisBackend {
    /// One SCAN step on the server (node 0), or on the `node`th master of a Cluster; `None`
    /// past the last.
    async fn scan_step(
        &self,
        node: usize,
        cursor: u64,
        pattern: &str,
    ) -> Result<Option<ScanReply>, BackendError> {
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(SCAN_COUNT);
        match (&self.commands, &self.waits) {
            (Commands::Node(_), _) => {
                if node > 0 {
                    return Ok(None);
                }
                let mut pipe = redis::pipe();
                pipe.add_command(scan);
                let (scanned,): (ScanReply,) = self.run(Request::Native(&pipe)).await?;
                Ok(Some(scanned))
            }
            (Commands::Cluster(commands), Waits::Cluster(masters)) => {
                let started = Instant::now();
                let outcome = async {
                    let mut conn = commands.get().await?.conn;
                    let addresses = masters.addresses(&mut conn).await?;
                    let Some((host, port)) = addresses.get(node).cloned() else {
                        return Ok(None);
                    };
                    let routing =
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
                    let reply =
                        tokio::time::timeout(self.timeout, conn.route_command(scan, routing))
                            .await
                            .map_err(|_| BackendError::Timeout(self.timeout))?
                            .map_err(|e| classify(&e))?;
                    redis::from_redis_value(reply)
                        .map(Some)
                        .map_err(|e| BackendError::Protocol(format!("SCAN: {e}")))
                }
                .await;
                self.record(RedisCall::Command, started, &outcome);
                outcome
            }
            (Commands::Cluster(_), Waits::Node(_)) => {
                Err(BackendError::Config("inconsistent redis backend".into()))
            }
        }
    }
}

impl RedisBackend {
    /// One SCAN step over the keys matching `pattern`, and the names `name_of` reads in them.
    async fn scan_names(
        &self,
        node: usize,
        cursor: u64,
        pattern: &str,
        name_of: impl for<'k> Fn(&str, &'k [u8]) -> Option<&'k str>,
    ) -> Scanned {
        let Some((next, keys)) = self.scan_step(node, cursor, pattern).await? else {
            return Ok(None);
        };
        let names = keys
            .iter()
            .filter_map(|key| name_of(&self.key_prefix, key))
            .map(str::to_owned)
            .collect();
        Ok(Some((next, names)))
    }
}

impl Walk for RedisBackend {
    type Found = Inspection;

    async fn scan(&self, node: usize, cursor: u64, prefix: &str) -> Scanned {
        let pattern = match_pattern(&self.key_prefix, prefix);
        self.scan_names(node, cursor, &pattern, name_of_key).await
    }

    async fn look(&self, _node: usize, names: Vec<String>) -> Looked<Inspection> {
        // Concurrently: the inspections travel pipelined on the command connection.
        let looks = join_all(names.iter().map(|name| self.inspect(name))).await;
        kept(names, looks, |seen| seen)
    }
}

/// The names with grants of one set held (a semaphore's permits, a read/write lock's readers)
/// on a Redis backend, walked by the keys of their grants.
pub(super) struct GrantWalk<'a>(pub(super) &'a RedisBackend, pub(super) GrantsOf);

impl Walk for GrantWalk<'_> {
    type Found = Grants;

    async fn scan(&self, node: usize, cursor: u64, prefix: &str) -> Scanned {
        let (backend, of) = (self.0, self.1);
        let pattern = format!(
            "{}{}",
            match_pattern(&backend.key_prefix, prefix),
            of.tokens_key
        );
        backend
            .scan_names(node, cursor, &pattern, |key_prefix, key| {
                name_of_grants_key(key_prefix, key, of)
            })
            .await
    }

    async fn look(&self, _node: usize, names: Vec<String>) -> Looked<Grants> {
        let looks = join_all(names.iter().map(|name| self.0.inspect_grants(self.1, name))).await;
        kept(names, looks, |seen| {
            (!seen.grants.is_empty()).then_some(seen)
        })
    }
}
