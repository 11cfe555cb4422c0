//! What the guards ask each Redis node: its memory policy (`INFO memory`) and its clock
//! (`TIME`), on the one server (the master the Sentinels name) or on every master of a Cluster.
//! `INFO` is allowed where managed services disable `CONFIG`. See `backend::guards` for what
//! is made of the answers.

use std::time::{Duration, Instant};

use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};

use super::cluster::{slot, with_tag_of_slot};
use super::connectors::marker_eval;
use super::errors::classify;
use super::send::Request;
use super::{Commands, DataLossWatch, RedisBackend, Waits};
use crate::backend::BackendError;
use crate::backend::data_loss::Marker;
use crate::backend::guards::{MemoryPolicy, NodeLook};
use crate::telemetry::metrics::RedisCall;

impl RedisBackend {
    /// Logs the connection in use (see `CommandConnection::log_current`).
    pub(crate) fn log_connection(&self) {
        match &self.commands {
            Commands::Node(commands) => commands.log_current(),
            Commands::Cluster(commands) => commands.log_current(),
        }
    }

    /// The memory policy of every node that holds locks, each with its address.
    pub(crate) async fn memory_policies(&self) -> Vec<NodeLook<MemoryPolicy>> {
        let mut info = redis::cmd("INFO");
        info.arg("memory");
        self.ask_each_node(info, |reply| {
            let text: String = redis::from_redis_value(reply)
                .map_err(|e| BackendError::Protocol(format!("INFO memory: {e}")))?;
            MemoryPolicy::read(&text)
                .ok_or_else(|| BackendError::Protocol("INFO memory lacks maxmemory".into()))
        })
        .await
    }

    /// The clock of every node that holds locks (`TIME`, in microseconds since the epoch),
    /// with the gateway's monotonic instant its answer came back at.
    pub(crate) async fn clocks(&self) -> Vec<NodeLook<(u64, tokio::time::Instant)>> {
        self.ask_each_node(redis::cmd("TIME"), |reply| {
            let (seconds, micros): (u64, u64) = redis::from_redis_value(reply)
                .map_err(|e| BackendError::Protocol(format!("TIME: {e}")))?;
            // The monotonic reading the clock guard compares with: tokio's (a simulation's
            // paused clock, the machine's otherwise).
            Ok((seconds * 1_000_000 + micros, tokio::time::Instant::now()))
        })
        .await
    }

    /// Looks at the node's marker (see `backend::data_loss`), on the command connection, or
    /// at the marker of every range of a Cluster's slots: a node that forgot its data holds
    /// grants back from now on.
    pub(crate) async fn check_marker(&self) {
        match (&self.data_loss, &self.commands, &self.waits) {
            (Some(DataLossWatch::Node(guard)), _, Waits::Node(pool)) => {
                let mut pipe = redis::pipe();
                pipe.add_command(marker_eval(&format!("{}marker", self.key_prefix), guard));
                // An unreachable node is looked at again when it answers (at its reconnect
                // first).
                if let Ok((reply,)) = self.run(Request::Guard(&pipe)).await {
                    guard.observe(&pool.address().await, Marker::from_reply(reply));
                }
            }
            (
                Some(DataLossWatch::Cluster(guards)),
                Commands::Cluster(commands),
                Waits::Cluster(masters),
            ) => {
                let Ok(link) = commands.get().await else {
                    return;
                };
                let mut conn = link.conn;
                let Ok(ranges) = masters.ranges(&mut conn).await else {
                    return;
                };
                for (first, node) in ranges {
                    let guard = guards.of(first);
                    // In the range's first slot: the master serving the range keeps it, and a
                    // resharding moves it with the slot.
                    let key = with_tag_of_slot(first, |tag| {
                        format!("{}{{{tag}}}:marker", self.key_prefix)
                    });
                    let eval = marker_eval(&key, &guard);
                    let started = Instant::now();
                    let read = eval.query_async(&mut conn);
                    let answer: Result<(String, u64, u8), BackendError> =
                        tokio::time::timeout(self.timeout, read)
                            .await
                            .map_err(|_| BackendError::Timeout(self.timeout))
                            .and_then(|reply| reply.map_err(|e| classify(&e)));
                    self.record(RedisCall::Guard, started, &answer);
                    if let Ok(reply) = answer {
                        guard.observe(&node, Marker::from_reply(reply));
                    }
                }
            }
            _ => {}
        }
    }

    /// How long grants of `name` are still held back because the node that keeps it forgot
    /// its data.
    pub(crate) fn data_loss_hold_back(&self, name: &str) -> Option<Duration> {
        match (&self.data_loss, &self.waits) {
            (Some(DataLossWatch::Node(guard)), _) => guard.held_back(),
            // The slot and the range are looked up only after a master forgot.
            (Some(DataLossWatch::Cluster(guards)), Waits::Cluster(masters))
                if guards.any_held_back() =>
            {
                masters
                    .range_of(slot(name))
                    .and_then(|first| guards.held_back(first))
            }
            _ => None,
        }
    }

    /// `cmd` on every node that holds locks, each answer read by `read`.
    async fn ask_each_node<T>(
        &self,
        cmd: redis::Cmd,
        read: impl Fn(redis::Value) -> Result<T, BackendError>,
    ) -> Vec<NodeLook<T>> {
        match (&self.commands, &self.waits) {
            (Commands::Node(_), Waits::Node(pool)) => {
                let node = pool.address().await;
                let mut pipe = redis::pipe();
                pipe.add_command(cmd);
                let answer = self
                    .run::<(redis::Value,)>(Request::Guard(&pipe))
                    .await
                    .and_then(|(reply,)| read(reply));
                vec![NodeLook { node, answer }]
            }
            (Commands::Cluster(commands), Waits::Cluster(masters)) => {
                let started = Instant::now();
                let addresses = async {
                    let mut conn = commands.get().await?.conn;
                    let addresses = masters.addresses(&mut conn).await?;
                    Ok::<_, BackendError>((conn, addresses))
                }
                .await;
                self.record(RedisCall::Guard, started, &addresses);
                let (mut conn, addresses) = match addresses {
                    Ok(found) => found,
                    Err(error) => {
                        return vec![NodeLook {
                            node: "cluster".into(),
                            answer: Err(error),
                        }];
                    }
                };
                let mut looks = Vec::with_capacity(addresses.len());
                for (host, port) in addresses {
                    let started = Instant::now();
                    let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                        host: host.clone(),
                        port,
                    });
                    let answer = tokio::time::timeout(
                        self.timeout,
                        conn.route_command(cmd.clone(), routing),
                    )
                    .await
                    .map_err(|_| BackendError::Timeout(self.timeout))
                    .and_then(|reply| reply.map_err(|e| classify(&e)));
                    self.record(RedisCall::Guard, started, &answer);
                    looks.push(NodeLook {
                        node: format!("{host}:{port}"),
                        answer: answer.and_then(&read),
                    });
                }
                looks
            }
            (Commands::Cluster(_), Waits::Node(_)) | (Commands::Node(_), Waits::Cluster(_)) => {
                vec![NodeLook {
                    node: "-".into(),
                    answer: Err(BackendError::Config("inconsistent redis backend".into())),
                }]
            }
        }
    }
}
