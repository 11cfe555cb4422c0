//! The simulation's first world: real gateways (the `app` composition root, `backend::redis`,
//! redis-rs) over a simulated Redis (sim/redis) reached through an in-memory network, clients
//! calling the gateways' routers in-process, everything on one paused tokio runtime per seed,
//! whose clock is the simulated time. The seed picks every client's steps (names, ttls, waits,
//! holds, sometimes past the lease, renewals, releases) and a nemesis's faults, one at a time
//! for 7 of the 10 simulated seconds: delays, partitions, lost replies (the command ran, its
//! answer cut), pauses (SIGSTOP), restarts with and without data, refusals (`BUSY`, `OOM`,
//! `TRYAGAIN`, `LOADING`), steps back of Redis's clock and a gateway that dies (cut off for the
//! rest of the run, as if SIGKILLed). With the faults over, a fair waiter on a live gateway
//! must be granted each name within its wait (liveness: no lease, hold-back or queue place
//! left behind holds a name up for good). The history is judged afterwards by the fault suite's
//! checker (after a data loss: no overlap, fences increasing, no 5xx but 503; holders may find
//! their lock gone) and, with every lease over, nothing may be left in Redis but the per-slot
//! fence counter and the node's marker.
//!
//! `cargo test` runs the fixed set (a thousand seeds and those that found bugs), one world per
//! core at a time. `LOCKGATE_SIM_SEED=n` replays one seed and writes its history to
//! target/histories/; `LOCKGATE_SIM_SEEDS=a..b` runs a range (the long run;
//! `LOCKGATE_SIM_THREADS` worlds side by side); a failing seed prints the line that replays
//! it. A seed replays byte for byte: the gateways' random bytes follow it
//! (`lockgate::entropy::simulate`), every `select!` in lockgate is `biased` (tokio's picks a
//! branch at random), and lockgate's watch channels wake their waiters in a fixed order
//! (`lockgate::watch`; tokio's in a random one). Not simulated yet (docs/development.md, "The
//! deterministic simulation"): replicas and `WAIT`, Sentinel, Redlock, the other kinds of
//! lease.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request};
use http_body_util::BodyExt;
use lockgate::backend::redis::transport::{Opening, Stream, Transport};
use lockgate::http::App;
use lockgate::watch;
use serde_json::{Value, json};
use sim_redis::{Clock, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tower::ServiceExt;

use crate::support::gateway::redis_config;
use crate::support::history::{Call, History, Outcome};
use crate::support::rng::Rng;
use crate::support::workload::{Expect, judge};

/// The address of the simulated Redis.
const REDIS: &str = "sim-redis-1:6379";

/// Where the simulated wall clock starts (an instant in 2027).
const EPOCH_US: i64 = 1_800_000_000_000_000;

/// The network's faults of the moment (the nemesis sets them).
#[derive(Debug, Default)]
struct Weather {
    /// Each chunk's delay, each way.
    delay: Duration,
    /// Replies to lose: the connection that would carry one is cut instead, after the command
    /// ran.
    lose_replies: u32,
    /// No new connection goes through.
    partitioned: bool,
}

/// The simulation's network: a node's address, its simulated server; every connection goes
/// through a pump that delays, cuts and loses replies as the weather says.
#[derive(Debug)]
struct Network {
    nodes: Mutex<HashMap<String, Server>>,
    weather: Mutex<Weather>,
    /// Increased at each partition: connections opened before are cut.
    cuts: watch::Sender<u64>,
    /// Gateways that died (for the rest of the run: no connection of theirs goes through, as
    /// if SIGKILLed; their clients get 503s).
    dead: Mutex<std::collections::BTreeSet<usize>>,
}

impl Network {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            nodes: Mutex::default(),
            weather: Mutex::default(),
            cuts: watch::Sender::new(0),
            dead: Mutex::default(),
        })
    }

    fn weather(&self) -> std::sync::MutexGuard<'_, Weather> {
        self.weather.lock().expect("weather")
    }

    /// A partition: every connection cut, none opened, until [`Network::heal`].
    fn partition(&self) {
        self.weather().partitioned = true;
        self.cuts.send_modify(|cut| *cut += 1);
    }

    fn heal(&self) {
        *self.weather() = Weather::default();
    }

    /// `gateway` dies: its connections are cut (every connection is: the others reconnect)
    /// and it never opens one again.
    fn kill(&self, gateway: usize) {
        self.dead.lock().expect("dead").insert(gateway);
        self.cuts.send_modify(|cut| *cut += 1);
    }

    fn is_dead(&self, gateway: usize) -> bool {
        self.dead.lock().expect("dead").contains(&gateway)
    }
}

/// The transport a gateway is wired with: the network, as that gateway reaches it.
#[derive(Debug)]
struct Links {
    network: Arc<Network>,
    gateway: usize,
}

impl Transport for Links {
    fn open(&self, address: &str) -> Opening {
        let network = self.network.clone();
        let gateway = self.gateway;
        let server = network.nodes.lock().expect("network").get(address).cloned();
        Box::pin(async move {
            let server = match server {
                Some(server) if !network.weather().partitioned && !network.is_dead(gateway) => {
                    server
                }
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionRefused,
                        "the simulated node is not reachable",
                    ));
                }
            };
            let (client, near) = tokio::io::duplex(64 * 1024);
            let far = server.connect();
            tokio::spawn(pump(near, far, network));
            Ok(Box::new(client) as Box<dyn Stream>)
        })
    }
}

/// Carries a connection's bytes both ways, each chunk after the weather's delay, until either
/// end closes, a partition cuts it, or a reply to lose comes.
async fn pump(near: DuplexStream, far: DuplexStream, network: Arc<Network>) {
    let mut cuts = network.cuts.subscribe();
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
        _ = cuts.changed() => {}
        _ = up => {}
        _ = down => {}
    }
}

/// Faults, one at a time, each for a while, as the seed says, until `until`; then all healed
/// but a dead gateway (one of `gateways` at most dies, for good). Returns what it did, in
/// order.
async fn nemesis(
    mut rng: Rng,
    network: Arc<Network>,
    server: Server,
    gateways: usize,
    until: tokio::time::Instant,
) -> Vec<&'static str> {
    let mut done = Vec::new();
    let ms = |rng: &mut Rng, from: u64, to: u64| Duration::from_millis(from + rng.next(to - from));
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(ms(&mut rng, 0, 1500)).await;
        let fault = rng.next(9);
        tracing::warn!(fault, "nemesis");
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
                network.partition();
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
            7 => server.clock().step_us(-(rng.next(500_000) as i64 + 1)),
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
    server.resume();
    done
}

/// What one seed's world did.
#[derive(Debug)]
struct Run {
    seed: u64,
    ops: usize,
    grants: usize,
    simulated: Duration,
    /// The history as `Report::save` writes it: a replay of the seed gives these bytes.
    history: Vec<u8>,
    /// Every command the simulated Redis ran, folded ([`Server::digest`]).
    commands: u64,
}

/// Seeds of the fixed set that `cargo test` runs: `1..=SEEDS`, then [`FOUND`].
const SEEDS: u64 = 1000;

/// Seeds that found a bug in lockgate, kept in the fixed set; each fails without its fix
/// (`scripts/mutants.sh` applies the bug again and finds the first such seed; a change to the
/// workload or the nemesis gives every seed another world, and these numbers are found again
/// that way). 41: a node restarted without its data soon after the other gateway granted a
/// longer lease than any before, which the hold-back did not cover
/// (`backend::data_loss::MERGE_FOR`; mutant `data-loss-hold-back-without-merging`); 146: a
/// stale reader's release moving the expiry of the writer that held the name
/// (`shared_release.lua`; mutant `stale-reader-release-moves-a-writer`).
const FOUND: &[u64] = &[41, 146];

/// The seeds to run: `LOCKGATE_SIM_SEED=n` replays one, `LOCKGATE_SIM_SEEDS=a..b` runs a range
/// (`b` excluded), else the fixed set.
fn seeds() -> Vec<u64> {
    let var = |name| std::env::var(name).ok();
    if let Some(one) = var("LOCKGATE_SIM_SEED").and_then(|s| s.parse::<u64>().ok()) {
        return vec![one];
    }
    if let Some(range) = var("LOCKGATE_SIM_SEEDS")
        && let Some((from, to)) = range.split_once("..")
        && let (Ok(from), Ok(to)) = (from.parse::<u64>(), to.parse::<u64>())
    {
        return (from..to).collect();
    }
    (1..=SEEDS).chain(FOUND.iter().copied()).collect()
}

/// Worlds run side by side, one per thread: `LOCKGATE_SIM_THREADS`, else one per core.
fn threads() -> usize {
    std::env::var("LOCKGATE_SIM_THREADS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .max(1)
}

/// Says, if its seed's world panics, how to run that seed again.
struct Replay(u64);

impl Drop for Replay {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "seed {} failed at commit {}; replay: LOCKGATE_SIM_SEED={} cargo test --test it -- simulation:: --nocapture",
                self.0,
                lockgate::build_info::REVISION,
                self.0
            );
        }
    }
}

/// Runs every seed of `seeds`, [`threads`] worlds at a time (each on a thread of its own: a
/// world's clocks and random bytes are its thread's), and returns their runs in seed order.
/// The first failing seed stops the others and fails the call; a long range prints its
/// progress every ten thousand seeds.
fn run_all(seeds: &[u64]) -> Vec<Run> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let runs = Mutex::new(Vec::with_capacity(seeds.len()));
    std::thread::scope(|scope| {
        for _ in 0..threads().min(seeds.len()) {
            scope.spawn(|| {
                while !failed.load(Ordering::Relaxed) {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&seed) = seeds.get(index) else {
                        return;
                    };
                    if index > 0 && index.is_multiple_of(10_000) {
                        eprintln!("simulation: {index} of {} seeds run", seeds.len());
                    }
                    let replay = Replay(seed);
                    let run = std::panic::catch_unwind(|| run_seed(seed));
                    match run {
                        Ok(run) => {
                            drop(replay);
                            runs.lock().expect("runs").push(run);
                        }
                        Err(panic) => {
                            failed.store(true, Ordering::Relaxed);
                            // Unwinding again, with `replay` alive: it prints the line.
                            std::panic::resume_unwind(panic);
                        }
                    }
                }
            });
        }
    });
    let mut runs = runs.into_inner().expect("runs");
    runs.sort_by_key(|run| seeds.iter().position(|&seed| seed == run.seed));
    runs
}

/// Every seed of the fixed set: no two holders of a name at once, fences increasing, no
/// refusal while a grant was valid, no 5xx but 503, nothing left in Redis at the end.
#[test]
fn gateways_over_a_simulated_redis_keep_the_lock_promise() {
    let started = std::time::Instant::now();
    let seeds = seeds();
    let runs = run_all(&seeds);
    let real = started.elapsed();
    let simulated: Duration = runs.iter().map(|run| run.simulated).sum();
    let ops: usize = runs.iter().map(|run| run.ops).sum();
    let grants: usize = runs.iter().map(|run| run.grants).sum();
    eprintln!(
        "{} seeds on {} threads, {ops} operations, {grants} grants, {:.0} s simulated in {:.1} s ({:.1} seeds/s, {:.0}x real time)",
        seeds.len(),
        threads().min(seeds.len()),
        simulated.as_secs_f64(),
        real.as_secs_f64(),
        seeds.len() as f64 / real.as_secs_f64(),
        simulated.as_secs_f64() / real.as_secs_f64(),
    );
    if let [run] = &runs[..] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
            "target/histories/simulation-seed-{}.json",
            run.seed
        ));
        eprintln!(
            "seed {}: history in {} ({} bytes), commands digest {:016x}",
            run.seed,
            path.display(),
            run.history.len(),
            run.commands
        );
    }
    assert!(grants > 0, "the workload granted nothing");
}

/// A seed run again (here on another thread, after other worlds ran on this one) gives the
/// same history byte for byte, and its Redis ran the same commands at the same instants.
#[test]
fn a_seed_replays_byte_for_byte() {
    let seeds: Vec<u64> = [3, 17].into_iter().chain(FOUND.iter().copied()).collect();
    let first = run_all(&seeds);
    let again: Vec<Run> = std::thread::scope(|scope| {
        scope
            .spawn(|| seeds.iter().rev().map(|&seed| run_seed(seed)).collect())
            .join()
            .expect("the replays")
    });
    for (first, again) in first.iter().zip(again.iter().rev()) {
        assert_eq!(first.seed, again.seed);
        assert!(
            first.history == again.history,
            "seed {}: the replay's history differs ({} and {} bytes; LOCKGATE_SIM_SEED={} twice, then compare the files)",
            first.seed,
            first.history.len(),
            again.history.len(),
            first.seed
        );
        assert_eq!(
            first.commands, again.commands,
            "seed {}: the replay's Redis ran other commands",
            first.seed
        );
    }
}

/// One seed's world, on a runtime of its own whose clock is paused (it moves only when every
/// task waits, to the next timer).
fn run_seed(seed: u64) -> Run {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(Box::pin(world(seed)))
}

async fn world(seed: u64) -> Run {
    crate::support::gateway::trace_if_asked();
    let mut rng = Rng::from_seed(seed);
    let clock = Clock::ticking_from(EPOCH_US);
    // The gateways' time of day: the same start as Redis's, never stepped with it (another
    // machine's clock).
    let gateways_clock = Clock::ticking_from(EPOCH_US);
    let _time_of_day = lockgate::wall_clock::simulate(move || {
        std::time::UNIX_EPOCH + Duration::from_micros(gateways_clock.now_us() as u64)
    });
    // The gateways' random bytes (tokens, queue and marker ids) follow the seed too.
    let _random_bytes = lockgate::entropy::simulate(rng.next(u64::MAX));
    let server = Server::new(clock);
    let network = Network::new();
    network
        .nodes
        .lock()
        .expect("network")
        .insert(REDIS.to_owned(), server.clone());
    let gateways: Vec<App> = (0..2)
        .map(|gateway| {
            let wiring = lockgate::app::Wiring {
                redis_transport: Some(Arc::new(Links {
                    network: network.clone(),
                    gateway,
                })),
            };
            let config = redis_config(&format!("redis://{REDIS}"));
            let assembled = lockgate::app::assemble_with(&config, &wiring).expect("a gateway");
            assembled.guards.watch();
            assembled.router
        })
        .collect();

    let history = Arc::new(History::new());
    let bounded = Arc::new(Mutex::new(Vec::new()));
    let names = ["a", "b"];
    let lasts = Duration::from_secs(10);
    let begun = tokio::time::Instant::now();
    let mut clients = Vec::new();
    for client in 0..4 {
        let app = gateways[rng.index(gateways.len())].clone();
        let steps = Rng::from_seed(rng.next(u64::MAX));
        let history = history.clone();
        clients.push(tokio::spawn(Box::pin(client_steps(
            client,
            app,
            steps,
            history,
            names,
            begun + lasts,
            bounded.clone(),
        ))));
    }
    let faults_end = begun + lasts * 7 / 10;
    let nemesis = tokio::spawn(Box::pin(nemesis(
        Rng::from_seed(rng.next(u64::MAX)),
        network.clone(),
        server.clone(),
        gateways.len(),
        faults_end,
    )));
    let faults = nemesis.await.expect("the nemesis");
    for client in clients {
        client.await.expect("a client");
    }
    // Liveness: with the faults over, each name goes to a fair waiter of a live gateway within
    // its wait, which covers every lease that may still run (the longest ttl, Redis's clock
    // steps back, a data loss's hold-back) and the liveness window after which a dead
    // gateway's waiters stop holding the queue up.
    let live = (0..gateways.len())
        .find(|gateway| !network.is_dead(*gateway))
        .expect("a live gateway");
    let prober = 4;
    for name in names {
        let (ttl_ms, wait_ms) = (1000, 8000);
        let body = json!({"ttl_ms": ttl_ms, "wait_ms": wait_ms, "fair": true});
        let path = format!("/locks/{name}");
        let invoke = history.now_us();
        let sent = send(&gateways[live], Method::POST, &path, Some(&body), &[], None).await;
        let outcome = answered(sent, Expect::Grant);
        let call = Call::Acquire {
            ttl_ms,
            wait_ms,
            shared: false,
        };
        history.record(prober, name, call, invoke, outcome.clone());
        let Outcome::Granted { token, .. } = outcome else {
            panic!(
                "seed {seed}: with the faults over, a fair acquire of {name:?} waiting {wait_ms} ms got {outcome:?} (faults: {faults:?}); Redis at {} ms holds {:?}",
                server.clock().now_ms(),
                server.snapshot()
            );
        };
        let invoke = history.now_us();
        let headers = [("Lock-Token", Some(token.as_str()))];
        let sent = send(&gateways[live], Method::DELETE, &path, None, &headers, None).await;
        let outcome = answered(sent, Expect::Release);
        history.record(prober, name, Call::Release { token }, invoke, outcome);
    }
    // Every lease is over once the longest ttl (and the clock's steps back) have passed, and
    // a fair queue whose gateway could not take a waiter's place out (a fault) expires three
    // liveness windows after its last heartbeat (`backend::queue`).
    let longest_ttl = Duration::from_secs(2);
    let steps_back = Duration::from_millis(500);
    let queues = 3 * lockgate::backend::queue::LIVENESS;
    tokio::time::sleep(queues.max(longest_ttl + steps_back) + Duration::from_secs(1)).await;
    let now_ms = server.clock().now_ms();
    let left: Vec<String> = server
        .snapshot()
        .into_iter()
        .map(|(key, entry)| {
            let ttl = entry.expires_at_ms.map(|at| at - now_ms);
            format!("{} (ttl {ttl:?} ms)", String::from_utf8_lossy(&key))
        })
        .filter(|key| !key.starts_with("lockgate:fences ") && !key.starts_with("lockgate:marker "))
        .collect();
    assert!(left.is_empty(), "seed {seed}: left in Redis: {left:?}");
    let gaps = server.gaps();
    assert!(gaps.is_empty(), "seed {seed}: not simulated: {gaps:?}");

    let report = history.check();
    let name = format!("simulation-seed-{seed}");
    if std::env::var_os("LOCKGATE_SIM_SEED").is_some() {
        eprintln!("seed {seed}: faults {faults:?}");
        report.save(&name);
    }
    if faults.contains(&"restart without data") {
        // Redis forgot the locks it held: their holders find them gone (documented); what
        // must hold is that nobody else was granted one while it may still run.
        report.assert_none(
            &name,
            &[
                "overlap",
                "fence-order",
                "server-error",
                "unknown-token-accepted",
            ],
        );
    } else {
        report.assert_clean(&name);
    }
    // A renewal never extends a grant past its `max_hold_ms`.
    for hold in bounded.lock().expect("bounded holds").iter() {
        for op in &report.ops {
            if let (Call::Renew { token, .. }, Outcome::Renewed { ttl_ms, .. }) =
                (&op.call, &op.outcome)
                && *token == hold.token
            {
                let end = op.invoke_us + ttl_ms * 1000;
                // The API speaks whole milliseconds, and the gateway rounds the last renewal's
                // ttl up to one (src/lock/promise.rs, `within_hold`): a lease may end within a
                // millisecond after the bound, never later.
                let bound = hold.acquired_us + hold.max_hold_ms * 1000 + 1000;
                if end > bound {
                    let path = report.save(&name);
                    panic!(
                        "seed {seed}: renewal #{} of a grant held at most {} ms ends {} µs past it (history: {})",
                        op.id,
                        hold.max_hold_ms,
                        end - bound,
                        path.display()
                    );
                }
            }
        }
    }
    Run {
        seed,
        history: report.to_json(),
        commands: server.digest(),
        ops: report.ops.len(),
        grants: report
            .ops
            .iter()
            .filter(|op| matches!(op.outcome, Outcome::Granted { .. }))
            .count(),
        simulated: begun.elapsed(),
    }
}

/// What a client remembers of a grant with a bounded hold, to check its renewals.
#[derive(Debug)]
struct BoundedHold {
    token: String,
    acquired_us: u64,
    max_hold_ms: u64,
}

/// A client's life: acquire (plain, shared, fair with a priority, or with an `Idempotency-Key`
/// retried after a 503; some waiting, some with a bounded hold, some hung up on), then hold
/// (now and then past the lease), look, renew, release or let the lease run out; and now and
/// then a release or renewal with a token it was never given. Until `until`.
async fn client_steps(
    client: usize,
    app: App,
    mut rng: Rng,
    history: Arc<History>,
    names: [&'static str; 2],
    until: tokio::time::Instant,
    bounded: Arc<Mutex<Vec<BoundedHold>>>,
) {
    let mut keys = 0;
    while tokio::time::Instant::now() < until {
        let name = names[rng.index(names.len())];
        if rng.next(8) == 0 {
            forge(client, &app, &mut rng, &history, name).await;
            continue;
        }
        let ttl_ms = 200 + rng.next(1800);
        let wait_ms = if rng.next(3) == 0 { 0 } else { rng.next(1500) };
        let shared = rng.next(5) == 0;
        let mut body = json!({"ttl_ms": ttl_ms, "wait_ms": wait_ms});
        if shared {
            body["mode"] = json!("shared");
        } else if rng.next(4) == 0 {
            body["fair"] = json!(true);
            body["priority"] = json!(rng.next(3));
        }
        let max_hold_ms = (rng.next(4) == 0).then(|| ttl_ms + rng.next(2000));
        if let Some(max) = max_hold_ms {
            body["max_hold_ms"] = json!(max);
        }
        let key = (rng.next(2) == 0).then(|| {
            keys += 1;
            format!("simulation-client-{client}-{keys:08}")
        });
        // A client that hangs up before its answer (its acquire may still be granted, and
        // must then be withdrawn or left to expire).
        let patience = (rng.next(8) == 0).then(|| Duration::from_millis(rng.next(wait_ms + 200)));
        let call = Call::Acquire {
            ttl_ms,
            wait_ms,
            shared,
        };
        let mut outcome;
        let mut tries = 0;
        loop {
            let invoke = history.now_us();
            let sent = send(
                &app,
                Method::POST,
                &format!("/locks/{name}"),
                Some(&body),
                &[("Idempotency-Key", key.as_deref())],
                patience,
            )
            .await;
            outcome = answered(sent, Expect::Grant);
            history.record(client, name, call.clone(), invoke, outcome.clone());
            tries += 1;
            let unsettled = matches!(
                outcome,
                Outcome::NoAnswer { .. } | Outcome::Refused { status: 503, .. }
            );
            // Only a keyed acquire may be sent again: its retry finds its own grant.
            if !(key.is_some() && unsettled && tries < 3) {
                break;
            }
            // A client that gave up waiting retries at once (its first attempt may still be in
            // flight, and its undo behind it); one told 503 pauses first.
            if !matches!(outcome, Outcome::NoAnswer { .. }) {
                tokio::time::sleep(Duration::from_millis(rng.next(100))).await;
            }
        }
        let Outcome::Granted {
            token,
            fence,
            ttl_ms,
            ..
        } = outcome
        else {
            tokio::time::sleep(Duration::from_millis(rng.next(200))).await;
            continue;
        };
        if let Some(max_hold_ms) = max_hold_ms {
            bounded.lock().expect("bounded holds").push(BoundedHold {
                token: token.clone(),
                acquired_us: history.now_us(),
                max_hold_ms,
            });
        }
        // Now and then past the lease: a paused, stale holder.
        tokio::time::sleep(Duration::from_millis(rng.next(ttl_ms * 3 / 2))).await;
        if rng.next(2) == 0 {
            let invoke = history.now_us();
            let sent = send(
                &app,
                Method::GET,
                &format!("/locks/{name}"),
                None,
                &[],
                None,
            )
            .await;
            let expect = if shared {
                Expect::Permit(fence)
            } else {
                Expect::Inspection
            };
            let outcome = answered(sent, expect);
            history.record(
                client,
                name,
                Call::Inspect {
                    token: token.clone(),
                },
                invoke,
                outcome,
            );
        }
        if rng.next(3) == 0 {
            let ttl_ms = 200 + rng.next(1800);
            let invoke = history.now_us();
            let sent = send(
                &app,
                Method::PATCH,
                &format!("/locks/{name}"),
                Some(&json!({"ttl_ms": ttl_ms})),
                &[("Lock-Token", Some(&token))],
                None,
            )
            .await;
            let outcome = answered(sent, Expect::Renewal);
            let call = Call::Renew {
                token: token.clone(),
                ttl_ms,
            };
            history.record(client, name, call, invoke, outcome);
        }
        if rng.next(4) != 0 {
            let invoke = history.now_us();
            let sent = send(
                &app,
                Method::DELETE,
                &format!("/locks/{name}"),
                None,
                &[("Lock-Token", Some(&token))],
                None,
            )
            .await;
            let outcome = answered(sent, Expect::Release);
            history.record(client, name, Call::Release { token }, invoke, outcome);
        }
    }
}

/// A release or renewal with a token this client was never given: the readers' marker, a
/// made-up token of the right shape, or one with another name's stem. None may be accepted.
async fn forge(client: usize, app: &App, rng: &mut Rng, history: &History, name: &str) {
    let forged = match rng.next(3) {
        0 => "~shared".to_owned(),
        1 => format!(
            "{}.{}",
            rng.text(
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
                22
            ),
            EPOCH_US as u64 + rng.next(10_000_000)
        ),
        _ => format!("{}.1", rng.text(b"abcdef0123456789", 22)),
    };
    let renew = rng.next(2) == 0;
    let invoke = history.now_us();
    let (method, body, expect) = if renew {
        (Method::PATCH, Some(json!({"ttl_ms": 500})), Expect::Renewal)
    } else {
        (Method::DELETE, None, Expect::Release)
    };
    let sent = send(
        app,
        method,
        &format!("/locks/{name}"),
        body.as_ref(),
        &[("Lock-Token", Some(&forged))],
        None,
    )
    .await;
    let outcome = answered(sent, expect);
    let call = if renew {
        Call::Renew {
            token: forged,
            ttl_ms: 500,
        }
    } else {
        Call::Release { token: forged }
    };
    history.record(client, name, call, invoke, outcome);
}

/// An answer as the history records it; none when the client hung up first. A bounded hold's
/// grant is valid for the shorter of its `ttl_ms` and its `max_hold_left_ms` (the lease ends
/// at the bound, docs/api.md), as a careful client counts it; a renewal's `ttl_ms` is kept as
/// the gateway gave it (cut at the bound by the gateway, which the max-hold check judges).
fn answered(sent: Option<(u16, Value)>, expect: Expect) -> Outcome {
    match sent {
        Some((status, mut body)) => {
            if let (Expect::Grant, Some(ttl), Some(left)) = (
                expect,
                body["ttl_ms"].as_u64(),
                body["max_hold_left_ms"].as_u64(),
            ) {
                body["ttl_ms"] = json!(ttl.min(left));
            }
            judge(status, &body, expect)
        }
        None => Outcome::NoAnswer {
            error: "the client hung up".into(),
        },
    }
}

/// One request to a gateway's router, in-process: its status and JSON body, or `None` when
/// `patience` ran out first (the request is dropped: a client that hung up).
async fn send(
    app: &App,
    method: Method,
    path: &str,
    body: Option<&Value>,
    headers: &[(&str, Option<&str>)],
    patience: Option<Duration>,
) -> Option<(u16, Value)> {
    let mut request = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        if let Some(value) = value {
            request = request.header(*name, *value);
        }
    }
    let request = match body {
        Some(body) => request
            .header("content-type", "application/json")
            .body(Body::from(body.to_string())),
        None => request.body(Body::empty()),
    }
    .expect("a request");
    let answer = async {
        let response = app.clone().oneshot(request).await.expect("infallible");
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map(|collected| collected.to_bytes().to_vec())
            .unwrap_or_default();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    };
    match patience {
        Some(patience) => tokio::time::timeout(patience, answer).await.ok(),
        None => Some(answer.await),
    }
}
