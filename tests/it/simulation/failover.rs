//! The failover world's Redis: a Sentinel group of two nodes (a master and its replica, fed
//! asynchronously a few milliseconds behind) watched by two Sentinels, and the failover the
//! nemesis makes of it: the master dies now and then first (paused), the replica is promoted
//! with what it received, the Sentinels hear of it one after the other (each announcing
//! `+switch-master` with a new configuration epoch), the old master comes back still taking
//! writes for a while (cut off from the Sentinels) and is then made the new master's replica,
//! its keyspace replaced.
//!
//! What the checker is told: a grant answered without a replica's acknowledgement
//! (`require_replicas` not asked) may be lost in a failover (documented, docs/modes.md), if it
//! was written around it: its acquire or a renewal ran between the promotion, less the
//! replication lag, and a moment after the first Sentinel's announcement — every gateway
//! subscribed to every Sentinel then (the failover waits for it), and once a gateway has heard
//! of a switch no request of its goes to the old master (docs/modes.md, "Sentinel"). Such a
//! grant's overlaps, fence order and refusals are excused; nothing else is, and a grant
//! acknowledged by the replica (`require_replicas: true`) is never excused.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sim_redis::Server;

use super::network::Network;
use crate::support::history::{History, Outcome, Report, Violation};
use crate::support::rng::Rng;

/// The group's name, as the gateways ask the Sentinels for it.
pub const GROUP: &str = "locks";

/// The data nodes: the first master, the first replica.
pub const NODES: [&str; 2] = ["sim-redis-1:6379", "sim-redis-2:6379"];

/// The Sentinels.
pub const SENTINELS: [&str; 2] = ["sim-sentinel-1:26379", "sim-sentinel-2:26379"];

/// The longest replication lag a world draws.
const MAX_LAG_MS: u64 = 40;

/// How soon after a Sentinel's announcement every subscribed gateway has heard of the switch:
/// the announcement and the gateway's question to that Sentinel cross a healthy network (a
/// failover is a fault of its own: no delay then) in a few simulated milliseconds.
const HEARD_WITHIN: Duration = Duration::from_millis(100);

/// How long a failover waits for every live gateway to be subscribed to every Sentinel (a
/// gateway whose subscription broke reconnects within two seconds).
const SUBSCRIBED_WITHIN: Duration = Duration::from_secs(5);

/// A failover, in the history's microseconds.
#[derive(Debug, Clone, Copy)]
struct Failover {
    /// The replica promoted.
    promoted_us: u64,
    /// The first Sentinel announced it.
    announced_us: u64,
}

/// The group, and what its failovers did.
#[derive(Debug)]
pub struct Group {
    pub nodes: Vec<(String, Server)>,
    pub sentinels: Vec<(String, Server)>,
    lag: Duration,
    /// The index in `nodes` of the master now.
    master: Mutex<usize>,
    failovers: Mutex<Vec<Failover>>,
    /// Failovers made without every live gateway subscribed in time: the checker cannot bound
    /// when they heard, and excuses every unacknowledged grant up to the end of that failover.
    unsure: Mutex<Vec<(u64, u64)>>,
    /// Tokens of grants answered without a replica's acknowledgement asked for.
    pub unacknowledged: Arc<Mutex<BTreeSet<String>>>,
    history: Arc<History>,
}

impl Group {
    /// A master feeding its replica `lag` behind (drawn from `rng`), both with clocks from
    /// `clock`, and the Sentinels naming the master.
    pub fn new(rng: &mut Rng, clock: impl Fn() -> sim_redis::Clock, history: Arc<History>) -> Self {
        let nodes: Vec<(String, Server)> = NODES
            .iter()
            .map(|address| ((*address).to_owned(), Server::new(clock())))
            .collect();
        let lag = Duration::from_millis(1 + rng.next(MAX_LAG_MS));
        nodes[0].1.replicate_to(&nodes[1].1, lag);
        let sentinels = SENTINELS
            .iter()
            .map(|address| {
                let sentinel = Server::sentinel(clock(), GROUP, NODES[0]);
                ((*address).to_owned(), sentinel)
            })
            .collect();
        Self {
            nodes,
            sentinels,
            lag,
            master: Mutex::new(0),
            failovers: Mutex::default(),
            unsure: Mutex::default(),
            unacknowledged: Arc::default(),
            history,
        }
    }

    /// The master now (the node a node's fault strikes).
    pub fn master(&self) -> (String, Server) {
        self.nodes[*self.master.lock().expect("master")].clone()
    }

    /// One failover, start to end (the old master made the new one's replica).
    pub async fn fail_over(&self, rng: &mut Rng, network: &Network, gateways: usize) {
        let ms =
            |rng: &mut Rng, from: u64, to: u64| Duration::from_millis(from + rng.next(to - from));
        let old = *self.master.lock().expect("master");
        let new = 1 - old;
        let (old_address, old_server) = self.nodes[old].clone();
        let (new_address, new_server) = self.nodes[new].clone();
        let begun = self.history.now_us();
        let subscribed = self.every_gateway_subscribed(network, gateways).await;
        // The master dies (as the Sentinels see it) now and then; else a failover is asked for.
        let died = rng.next(2) == 0;
        if died {
            old_server.pause();
            tokio::time::sleep(ms(rng, 100, 1000)).await;
        }
        old_server.stop_replicating();
        new_server.promote();
        let promoted_us = self.history.now_us();
        *self.master.lock().expect("master") = new;
        let mut announced_us = None;
        for (_, sentinel) in &self.sentinels {
            sentinel.announce_master(&new_address);
            announced_us.get_or_insert(self.history.now_us());
            tokio::time::sleep(ms(rng, 0, 500)).await;
        }
        if died {
            // Back, and still a master (the Sentinels cannot reach it yet).
            old_server.resume();
        }
        tokio::time::sleep(ms(rng, 0, 2000)).await;
        new_server.replicate_to(&old_server, self.lag);
        tracing::warn!(from = %old_address, to = %new_address, "simulated failover");
        if subscribed {
            self.failovers.lock().expect("failovers").push(Failover {
                promoted_us,
                announced_us: announced_us.expect("two sentinels"),
            });
        } else {
            let ended = self.history.now_us();
            self.unsure.lock().expect("unsure").push((begun, ended));
        }
    }

    /// Waits (a poll with a deadline) until every live gateway listens to every Sentinel;
    /// whether they all do.
    async fn every_gateway_subscribed(&self, network: &Network, gateways: usize) -> bool {
        let live = (0..gateways).filter(|g| !network.is_dead(*g)).count();
        let deadline = tokio::time::Instant::now() + SUBSCRIBED_WITHIN;
        loop {
            let all = self
                .sentinels
                .iter()
                .all(|(_, sentinel)| sentinel.listeners("+switch-master") >= live);
            if all {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Whether the operations `[invoke_us, complete_us]` may have written on a master a
    /// failover then lost.
    fn at_risk(&self, invoke_us: u64, complete_us: u64) -> bool {
        let lag = u64::try_from(self.lag.as_micros()).unwrap_or(u64::MAX) + 1000;
        let heard = u64::try_from(HEARD_WITHIN.as_micros()).unwrap_or(u64::MAX);
        let windows = self
            .failovers
            .lock()
            .expect("failovers")
            .iter()
            .map(|f| (f.promoted_us.saturating_sub(lag), f.announced_us + heard))
            .chain(self.unsure.lock().expect("unsure").iter().copied())
            .collect::<Vec<_>>();
        windows
            .iter()
            .any(|(from, to)| invoke_us <= *to && complete_us >= *from)
    }

    /// The violations of `report` a failover does not excuse: those not about a grant that
    /// was answered without a replica's acknowledgement and written around a failover.
    pub fn unexcused<'r>(&self, report: &'r Report) -> Vec<&'r Violation> {
        let unacknowledged = self.unacknowledged.lock().expect("unacknowledged");
        let token_of = |id: usize| {
            report
                .ops
                .iter()
                .find(|op| op.id == id)
                .and_then(|op| match &op.outcome {
                    Outcome::Granted { token, .. } => Some(token.clone()),
                    _ => None,
                })
        };
        // Tokens of unacknowledged grants with an acquire or a renewal around a failover.
        let lost: BTreeSet<String> = report
            .ops
            .iter()
            .filter(|op| self.at_risk(op.invoke_us, op.complete_us))
            .filter_map(|op| match (&op.call, &op.outcome) {
                (_, Outcome::Granted { token, .. }) => Some(token.clone()),
                (crate::support::history::Call::Renew { token, .. }, _) => Some(token.clone()),
                _ => None,
            })
            .filter(|token| unacknowledged.contains(token))
            .collect();
        let excused = |id: usize| token_of(id).is_some_and(|token| lost.contains(&token));
        report
            .violations
            .iter()
            .filter(|violation| match **violation {
                Violation::Overlap { first, second } => !(excused(first) || excused(second)),
                Violation::FenceOrder { earlier, later } => !(excused(earlier) || excused(later)),
                Violation::RefusedWhileValid { grant, .. }
                | Violation::VanishedWhileValid { grant, .. } => !excused(grant),
                Violation::ServerError { .. } | Violation::UnknownTokenAccepted { .. } => true,
            })
            .collect()
    }

    /// How many failovers the run made.
    pub fn failovers(&self) -> usize {
        self.failovers.lock().expect("failovers").len() + self.unsure.lock().expect("unsure").len()
    }
}
