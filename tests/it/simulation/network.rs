//! The simulation's network and its nemesis: an in-memory stream per connection from a
//! gateway to a simulated node, through a pump that delays, cuts and loses replies as the
//! weather says, and the faults a seed picks one at a time (docs/development.md, "The
//! deterministic simulation").

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockgate::backend::redis::transport::{Opening, Stream, Transport};
use lockgate::watch;
use sim_redis::Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::failover::Group;
use crate::support::history::History;
use crate::support::rng::Rng;

/// The network's faults of the moment (the nemesis sets them).
#[derive(Debug, Default)]
pub struct Weather {
    /// Each chunk's delay, each way.
    pub delay: Duration,
    /// Replies to lose: the connection that would carry one is cut instead, after the command
    /// ran.
    pub lose_replies: u32,
    /// No new connection goes through.
    pub partitioned: bool,
    /// No new connection to this node goes through (a partition of one Redlock node).
    pub isolated: Option<String>,
}

/// The simulation's network: a node's address, its simulated server; every connection goes
/// through a pump that delays, cuts and loses replies as the weather says.
#[derive(Debug)]
pub struct Network {
    pub nodes: Mutex<HashMap<String, Server>>,
    weather: Mutex<Weather>,
    /// Increased at each partition: connections opened before are cut.
    cuts: watch::Sender<u64>,
    /// Increased when a node is isolated: that node's connections are cut.
    node_cuts: watch::Sender<u64>,
    /// Gateways that died (for the rest of the run: no connection of theirs goes through, as
    /// if SIGKILLed; their clients get 503s).
    dead: Mutex<BTreeSet<usize>>,
}

impl Network {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            nodes: Mutex::default(),
            weather: Mutex::default(),
            cuts: watch::Sender::new(0),
            node_cuts: watch::Sender::new(0),
            dead: Mutex::default(),
        })
    }

    pub fn weather(&self) -> std::sync::MutexGuard<'_, Weather> {
        self.weather.lock().expect("weather")
    }

    /// A partition: every connection cut, none opened, until [`Network::heal`].
    pub fn partition(&self) {
        self.weather().partitioned = true;
        self.cuts.send_modify(|cut| *cut += 1);
    }

    /// A partition of one node: its connections cut, none opened, until [`Network::heal`];
    /// the other nodes' connections carry on.
    pub fn isolate(&self, address: &str) {
        self.weather().isolated = Some(address.to_owned());
        self.node_cuts.send_modify(|cut| *cut += 1);
    }

    fn reaches(&self, address: &str) -> bool {
        let weather = self.weather();
        !weather.partitioned && weather.isolated.as_deref() != Some(address)
    }

    pub fn heal(&self) {
        *self.weather() = Weather::default();
    }

    /// `gateway` dies: its connections are cut (every connection is: the others reconnect)
    /// and it never opens one again.
    pub fn kill(&self, gateway: usize) {
        self.dead.lock().expect("dead").insert(gateway);
        self.cuts.send_modify(|cut| *cut += 1);
    }

    pub fn is_dead(&self, gateway: usize) -> bool {
        self.dead.lock().expect("dead").contains(&gateway)
    }
}

/// The transport a gateway is wired with: the network, as that gateway reaches it.
#[derive(Debug)]
pub struct Links {
    pub network: Arc<Network>,
    pub gateway: usize,
}

impl Transport for Links {
    fn open(&self, address: &str) -> Opening {
        let network = self.network.clone();
        let gateway = self.gateway;
        let server = network.nodes.lock().expect("network").get(address).cloned();
        let address = address.to_owned();
        Box::pin(async move {
            let server = match server {
                Some(server) if network.reaches(&address) && !network.is_dead(gateway) => server,
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionRefused,
                        "the simulated node is not reachable",
                    ));
                }
            };
            let (client, near) = tokio::io::duplex(64 * 1024);
            let far = server.connect();
            tokio::spawn(pump(near, far, network, address));
            Ok(Box::new(client) as Box<dyn Stream>)
        })
    }
}

/// Carries a connection's bytes to and from the node at `address` both ways, each chunk after
/// the weather's delay, until either end closes, a partition cuts it (or one isolating that
/// node), or a reply to lose comes.
async fn pump(near: DuplexStream, far: DuplexStream, network: Arc<Network>, address: String) {
    let mut cuts = network.cuts.subscribe();
    let mut node_cuts = network.node_cuts.subscribe();
    let cut = async {
        loop {
            tokio::select! {
                biased;
                _ = cuts.changed() => return,
                changed = node_cuts.changed() => {
                    if changed.is_err() || !network.reaches(&address) {
                        return;
                    }
                }
            }
        }
    };
    let (mut near_read, mut near_write) = tokio::io::split(near);
    let (mut far_read, mut far_write) = tokio::io::split(far);
    let delay = |network: &Network| network.weather().delay;
    let up = async {
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            let n = match near_read.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            tokio::time::sleep(delay(&network)).await;
            if far_write.write_all(&chunk[..n]).await.is_err() {
                return;
            }
        }
    };
    let down = async {
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            let n = match far_read.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            {
                let mut weather = network.weather();
                if weather.lose_replies > 0 {
                    weather.lose_replies -= 1;
                    return;
                }
            }
            tokio::time::sleep(delay(&network)).await;
            if near_write.write_all(&chunk[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        biased;
        _ = cut => {}
        _ = up => {}
        _ = down => {}
    }
}

/// Faults, one at a time, each for a while, as the seed says, until `until`; then all healed
/// but a dead gateway (one of `gateways` at most dies, for good). A fault of a node (a pause,
/// a restart, refusals, a clock step, a partition) strikes one of `nodes` (address, server),
/// picked by the seed when there are several. With `steps_forward`, half the clock steps are
/// forward (0.1 to 3 s), each recorded in that history for its checker. With a Sentinel
/// `group`, a node's fault strikes its master, a partition cuts every node off, and the
/// restarts and clock steps are failovers instead (`failover.rs`). Returns what it did, in
/// order.
pub async fn nemesis(
    mut rng: Rng,
    network: Arc<Network>,
    nodes: Vec<(String, Server)>,
    gateways: usize,
    until: tokio::time::Instant,
    steps_forward: Option<Arc<History>>,
    group: Option<Arc<Group>>,
) -> Vec<&'static str> {
    let mut done = Vec::new();
    let ms = |rng: &mut Rng, from: u64, to: u64| Duration::from_millis(from + rng.next(to - from));
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(ms(&mut rng, 0, 1500)).await;
        let fault = rng.next(9);
        if let Some(group) = &group
            && matches!(fault, 4 | 5 | 7)
        {
            done.push("failover");
            group.fail_over(&mut rng, &network, gateways).await;
            network.heal();
            continue;
        }
        // One node's world draws nothing more (its seeds' worlds stay what they were).
        let master;
        let (address, server) = match (&group, &nodes[..]) {
            (Some(group), _) => {
                master = group.master();
                &master
            }
            (None, [one]) => one,
            (None, several) => &several[rng.index(several.len())],
        };
        tracing::warn!(fault, address, "nemesis");
        done.push(
            [
                "delay",
                "partition",
                "lost replies",
                "pause",
                "restart",
                "restart without data",
                "refusals",
                "clock step back",
                "a gateway dies",
            ][fault as usize],
        );
        match fault {
            0 => {
                network.weather().delay = ms(&mut rng, 1, 60);
                tokio::time::sleep(ms(&mut rng, 200, 2000)).await;
            }
            1 => {
                if nodes.len() == 1 || group.is_some() {
                    network.partition();
                } else {
                    network.isolate(address);
                }
                tokio::time::sleep(ms(&mut rng, 100, 1500)).await;
            }
            2 => network.weather().lose_replies = 1 + rng.next(6) as u32,
            3 => {
                server.pause();
                tokio::time::sleep(ms(&mut rng, 100, 1500)).await;
                server.resume();
            }
            4 => server.restart(true),
            5 => server.restart(false),
            7 => match &steps_forward {
                Some(history) if rng.next(2) == 0 => {
                    let by = ms(&mut rng, 100, 3000);
                    server.clock().step_us(by.as_micros() as i64);
                    history.clock_stepped_forward(by);
                    *done.last_mut().expect("this fault") = "clock step forward";
                }
                _ => server.clock().step_us(-(rng.next(500_000) as i64 + 1)),
            },
            // One gateway at most, for the rest of the run.
            8 => {
                if network.dead.lock().expect("dead").is_empty() {
                    network.kill(rng.index(gateways));
                }
            }
            _ => {
                let errors = [
                    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
                    "OOM command not allowed when used memory > 'maxmemory'.",
                    "TRYAGAIN Multiple keys request during rehashing of slot",
                    "LOADING Redis is loading the dataset in memory",
                ];
                server.refuse_next(errors[rng.index(errors.len())], 1 + rng.next(4) as u32);
            }
        }
        network.heal();
    }
    network.heal();
    for (_, server) in &nodes {
        server.resume();
    }
    done
}
