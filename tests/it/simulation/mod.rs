//! The simulation's worlds: real gateways (the `app` composition root, `backend::redis`,
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
//! (`lockgate::watch`; tokio's in a random one).
//!
//! A world's clients take one kind of lease ([`Kind`]): locks (plain, shared and fair,
//! `clients.rs`), semaphores or multi-locks (`leases.rs`), hold streams and reentrant locks
//! (`holds.rs`) on one node, or plain locks kept by Redlock over three nodes, a node's faults
//! striking one of them; and the locks' clients again over a node whose clock the nemesis
//! also steps forward (judged with the leases a step cuts short, as documented), and over a
//! Sentinel group (a master, its replica, two Sentinels) that the nemesis fails over, a third
//! of the acquires requiring a replica's acknowledgement (`failover.rs`: judged with the
//! unacknowledged grants a failover may lose, as documented); each kind has its fixed set.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::Method;
use lockgate::http::App;
use serde_json::json;
use sim_redis::{Clock, Server};

use crate::support::gateway::{redis_config, redlock_config, sentinel_config};
use crate::support::history::{Call, History, Outcome, Violation};
use crate::support::rng::Rng;
use crate::support::workload::Expect;

mod clients;
mod failover;
mod hang_ups;
mod holds;
mod leases;
mod network;

use clients::{answered, client_steps, send};
use failover::Group;
use holds::hold_steps;
use leases::{Kind, lease_steps};
use network::{Links, Network, nemesis};

/// The address of the simulated Redis.
const REDIS: &str = "sim-redis-1:6379";

/// The addresses of a Redlock world's three nodes.
const REDLOCK_NODES: [&str; 3] = ["sim-redis-1:6379", "sim-redis-2:6379", "sim-redis-3:6379"];

/// How long a Redlock gateway waits for one node (as the fault suite's trio).
const REDLOCK_NODE_TIMEOUT: Duration = Duration::from_millis(200);

/// Where the simulated wall clock starts (an instant in 2027).
const EPOCH_US: i64 = 1_800_000_000_000_000;

/// What one seed's world did.
#[derive(Debug)]
struct Run {
    kind: Kind,
    seed: u64,
    ops: usize,
    grants: usize,
    simulated: Duration,
    /// The history as `Report::save` writes it: a replay of the seed gives these bytes.
    history: Vec<u8>,
    /// Every command the simulated Redis ran, folded ([`Server::digest`]).
    commands: u64,
}

/// Seeds of the locks' fixed set that `cargo test` runs: `1..=SEEDS`, then [`FOUND`].
const SEEDS: u64 = 1000;

/// Seeds of the semaphores' and the multi-locks' fixed sets: `1..=OTHER_SEEDS` each.
const OTHER_SEEDS: u64 = 250;

/// Seeds of the forward steps' fixed set: `1..=FORWARD_SEEDS`.
const FORWARD_SEEDS: u64 = 150;

/// Seeds of the failover world's fixed set: `1..=FAILOVER_SEEDS`, then [`FAILOVER_FOUND`].
const FAILOVER_SEEDS: u64 = 150;

/// Seeds of the failover world beyond its `1..=FAILOVER_SEEDS` that found a bug, kept in its
/// fixed set (as [`FOUND`]). 384: a failover lost a fair waiter's leave (a keyed place given
/// up), and its place, back on the new master, headed the queue for as long as its gateway had
/// other waiters of the name (seed 228 before the Sentinel backoff change moved this world's
/// timings); 1150: a waiter's attempt, sent on a connection for `WAIT` before its client hung up,
/// reached Redis after the leave sent on the command connection and put the place back, with
/// the same effect (`FairTicket::take_out_if_stray`, `fair_acquire.lua`; mutant
/// `stray-place-kept`). 2239: the checker's own, a replayed grant judged from its replay
/// instead of the attempt that made it (`history::first_attempt_us`). 637: an attempt asking
/// for replicas, carried to its answer after its client hung up (so that its withdrawal follows
/// it), found the grant a retry of its idempotency key had made and delivered, and withdrew it,
/// its claim now the last (caught before it landed; mutant `late-finder-withdraws-a-retry`).
const FAILOVER_FOUND: &[u64] = &[384, 637, 1150, 2239];

/// Seeds of the holds' fixed set: `1..=HOLD_SEEDS`, then [`HOLD_FOUND`].
const HOLD_SEEDS: u64 = 200;

/// Seeds of the holds' world beyond its `1..=HOLD_SEEDS` that found a bug in lockgate, kept in
/// its fixed set (as [`FOUND`]). 14165: after a restart without data, a gateway that could
/// not reach the node for a while read the other gateway's longer lease in the new marker
/// after its own hold-back had ended, ignored it, and granted the name while that lease ran
/// (`DataLossGuard::merge`; mutant `data-loss-merge-by-time-alone`, which took 14,165
/// seeds). The holds' world's seeds 36 and 145 found the other two (docs/development.md).
const HOLD_FOUND: &[u64] = &[14165];

/// Seeds that found a bug in lockgate, kept in the locks' fixed set; each fails without its
/// fix (`scripts/mutants.sh` applies the bug again and finds the first such seed; a change to
/// the workload or the nemesis gives every seed another world, and these numbers are found
/// again that way). 16: a fair waiter's place left behind by a leave Redis did not answer,
/// heading the queue for good (`lock::fair_lines::LEAVE_RETRY_FIRST`; mutant
/// `failed-leave-not-retried`); 169: a node restarted without its data soon after the other
/// gateway granted a longer lease than any before, which the hold-back did not cover
/// (`backend::data_loss::MERGE_FOR`; mutant `data-loss-hold-back-without-merging`); 1092: a
/// stale reader's release moving the expiry of the writer that held the name
/// (`shared_release.lua`; mutant `stale-reader-release-moves-a-writer`).
const FOUND: &[u64] = &[16, 169, 1092];

/// Seeds of the Redlock world beyond its `1..=OTHER_SEEDS` that found a bug in lockgate, kept
/// in its fixed set (as [`FOUND`]). 497: a node restarted without its data right after a grant
/// that it had taken part in; the holder's renewal counted the node's "not held" towards a
/// majority and released the copy left on the third node, and the name was granted again
/// while the first grant ran (`RedlockBackend::renew_lock`; mutant
/// `redlock-renewal-believes-a-node-that-forgot`). 1733: a node ran an acquire after its
/// deadline, with a fence of its own, and a finalized copy did not answer an inspect, which
/// showed the late copy's fence (`GrantFence::Open`, `RedlockBackend::finalize_late_nodes`;
/// mutant `redlock-late-copy-shows-its-fence`). The Redlock world's seeds 2 and 8 found the
/// other two (docs/development.md).
const REDLOCK_FOUND: &[u64] = &[497, 1733];

/// The seeds to run: `LOCKGATE_SIM_SEED=n` replays one, `LOCKGATE_SIM_SEEDS=a..b` runs a range
/// (`b` excluded), else `fixed`.
fn seeds(fixed: impl Iterator<Item = u64>) -> Vec<u64> {
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
    fixed.collect()
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
struct Replay(Kind, u64);

impl Drop for Replay {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let Self(kind, seed) = *self;
            eprintln!(
                "seed {seed} of the {} failed at commit {}; replay: LOCKGATE_SIM_SEED={seed} cargo test --test it -- simulation::{} --exact --nocapture",
                kind.label(),
                lockgate::build_info::REVISION,
                kind.test()
            );
        }
    }
}

/// Runs every seed of `seeds`, [`threads`] worlds at a time (each on a thread of its own: a
/// world's clocks and random bytes are its thread's), and returns their runs in seed order.
/// The first failing seed stops the others and fails the call; a long range prints its
/// progress every ten thousand seeds.
fn run_all(kind: Kind, seeds: &[u64]) -> Vec<Run> {
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
                    let replay = Replay(kind, seed);
                    let run = std::panic::catch_unwind(|| run_seed(kind, seed));
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

/// Every seed of the locks' fixed set (plain, shared and fair): no two holders of a name at
/// once (readers apart), fences increasing, no refusal while a grant was valid, no 5xx but
/// 503, every name granted with the faults over, nothing left in Redis at the end.
#[test]
fn gateways_over_a_simulated_redis_keep_the_lock_promise() {
    let beyond = FOUND.iter().copied().filter(|seed| *seed > SEEDS);
    run_fixed_set(Kind::Locks, (1..=SEEDS).chain(beyond));
}

/// The same promise for semaphores: never more than their permits granted at once.
#[test]
fn semaphores_over_a_simulated_redis_keep_their_promise() {
    run_fixed_set(Kind::Semaphores, 1..=OTHER_SEEDS);
}

/// The same promise for multi-locks: each name of a set as if locked alone, all or none.
#[test]
fn multi_locks_over_a_simulated_redis_keep_their_promise() {
    run_fixed_set(Kind::MultiLocks, 1..=OTHER_SEEDS);
}

/// The same promise for Redlock over three simulated nodes, the faults striking one node at
/// a time (a partition isolates one): a majority decides.
#[test]
fn redlock_over_three_simulated_nodes_keeps_the_lock_promise() {
    let beyond = REDLOCK_FOUND.iter().copied();
    run_fixed_set(Kind::Redlock, (1..=OTHER_SEEDS).chain(beyond));
}

/// The same promise for hold streams and reentrant locks: a stream's lock held while its
/// watchdog renews it and released when the client hangs up, a reentrant lock held until its
/// last hold is given back.
#[test]
fn hold_streams_and_reentrant_locks_over_a_simulated_redis_keep_their_promise() {
    run_fixed_set(
        Kind::Holds,
        (1..=HOLD_SEEDS).chain(HOLD_FOUND.iter().copied()),
    );
}

/// The locks' promise over a Redis whose clock also steps forward (by 0.1 to 3 s): a step
/// ends every lease it finds that much early, before the clock guard can notice (documented,
/// docs/modes.md), which the checker takes as a shorter validity for the grants valid at the
/// step (`History::clock_stepped_forward`); nothing else may overlap, fences keep increasing,
/// and the hold-back after a detected step ends (liveness).
#[test]
fn locks_over_a_redis_whose_clock_steps_forward_keep_the_documented_promise() {
    run_fixed_set(Kind::ForwardSteps, 1..=FORWARD_SEEDS);
}

/// The locks' promise over a Sentinel group the nemesis fails over (a master and its replica
/// fed a few milliseconds behind, two Sentinels): a grant acknowledged by the replica
/// (`require_replicas`) survives every failover; one that was not may be lost in one, if
/// written around it (documented), and nothing else; fences keep increasing; every gateway
/// follows the new master (liveness) and no gateway that heard of a switch writes to the old
/// master (an unacknowledged grant made after it was heard of is judged as any other).
#[test]
fn locks_over_a_sentinel_group_keep_the_promise_across_failovers() {
    run_fixed_set(
        Kind::Failover,
        (1..=FAILOVER_SEEDS).chain(FAILOVER_FOUND.iter().copied()),
    );
}

/// Runs the seeds asked for (`fixed` unless the environment says others) and prints the rate.
fn run_fixed_set(kind: Kind, fixed: impl Iterator<Item = u64>) {
    let started = std::time::Instant::now();
    let seeds = seeds(fixed);
    let runs = run_all(kind, &seeds);
    let real = started.elapsed();
    let simulated: Duration = runs.iter().map(|run| run.simulated).sum();
    let ops: usize = runs.iter().map(|run| run.ops).sum();
    let grants: usize = runs.iter().map(|run| run.grants).sum();
    eprintln!(
        "{}: {} seeds on {} threads, {ops} operations, {grants} grants, {:.0} s simulated in {:.1} s ({:.1} seeds/s, {:.0}x real time)",
        kind.label(),
        seeds.len(),
        threads().min(seeds.len()),
        simulated.as_secs_f64(),
        real.as_secs_f64(),
        seeds.len() as f64 / real.as_secs_f64(),
        simulated.as_secs_f64() / real.as_secs_f64(),
    );
    if let [run] = &runs[..] {
        eprintln!(
            "seed {}: history in {} ({} bytes), commands digest {:016x}",
            run.seed,
            history_path(kind, run.seed).display(),
            run.history.len(),
            run.commands
        );
    }
    assert!(grants > 0, "the workload granted nothing");
}

/// The name of a seed's history (`Report::save` writes it under target/histories/).
fn history_name(kind: Kind, seed: u64) -> String {
    format!("simulation-{}-seed-{seed}", kind.label())
}

fn history_path(kind: Kind, seed: u64) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "target/histories/{}.json",
        history_name(kind, seed)
    ))
}

/// A seed run again (here on another thread, after other worlds ran on this one) gives the
/// same history byte for byte, and its Redis ran the same commands at the same instants.
#[test]
fn a_seed_replays_byte_for_byte() {
    let worlds: Vec<(Kind, Vec<u64>)> = vec![
        (
            Kind::Locks,
            [3, 17].into_iter().chain(FOUND.iter().copied()).collect(),
        ),
        (Kind::Semaphores, vec![5]),
        (Kind::MultiLocks, vec![7]),
        (Kind::Redlock, vec![11]),
        (Kind::Holds, vec![13]),
        (Kind::ForwardSteps, vec![19]),
        (Kind::Failover, vec![23]),
    ];
    for (kind, seeds) in worlds {
        let first = run_all(kind, &seeds);
        let again: Vec<Run> = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    seeds
                        .iter()
                        .rev()
                        .map(|&seed| run_seed(kind, seed))
                        .collect()
                })
                .join()
                .expect("the replays")
        });
        for (first, again) in first.iter().zip(again.iter().rev()) {
            assert_eq!((first.kind, first.seed), (again.kind, again.seed));
            assert!(
                first.history == again.history,
                "seed {} of the {}: the replay's history differs ({} and {} bytes; LOCKGATE_SIM_SEED={} twice, then compare the files)",
                first.seed,
                kind.label(),
                first.history.len(),
                again.history.len(),
                first.seed
            );
            assert_eq!(
                first.commands,
                again.commands,
                "seed {} of the {}: the replay's Redis ran other commands",
                first.seed,
                kind.label()
            );
        }
    }
}

/// A keyspace as a person reads it: each key and its value as text, with its expiry.
fn keyspace(snapshot: &std::collections::BTreeMap<Vec<u8>, sim_redis::Entry>) -> Vec<String> {
    snapshot
        .iter()
        .map(|(key, entry)| {
            let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
            let value = match &entry.value {
                sim_redis::Value::Str(value) => text(value),
                sim_redis::Value::Hash(fields) => format!(
                    "{:?}",
                    fields
                        .iter()
                        .map(|(k, v)| (text(k), text(v)))
                        .collect::<Vec<_>>()
                ),
                sim_redis::Value::ZSet(members) => format!(
                    "{:?}",
                    members
                        .sorted()
                        .iter()
                        .map(|(m, s)| (text(m), *s))
                        .collect::<Vec<_>>()
                ),
            };
            format!(
                "{} = {value} (expires at {:?} ms)",
                text(key),
                entry.expires_at_ms
            )
        })
        .collect()
}

/// One seed's world, on a runtime of its own whose clock is paused (it moves only when every
/// task waits, to the next timer).
fn run_seed(kind: Kind, seed: u64) -> Run {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(Box::pin(world(kind, seed)))
}

async fn world(kind: Kind, seed: u64) -> Run {
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
    let network = Network::new();
    let history = Arc::new(History::with_limit(kind.limit()));
    // A Sentinel group's master and replica, and its Sentinels, each with a clock of its own.
    let group = (kind == Kind::Failover).then(|| {
        Arc::new(Group::new(
            &mut rng,
            || Clock::ticking_from(EPOCH_US),
            history.clone(),
        ))
    });
    // One node, or three Redlock nodes, each with a clock of its own (other machines), or a
    // Sentinel group's two.
    let nodes: Vec<(String, Server)> = match (kind, &group) {
        (_, Some(group)) => group.nodes.clone(),
        (Kind::Redlock, _) => REDLOCK_NODES
            .iter()
            .map(|address| {
                let clock = Clock::ticking_from(EPOCH_US);
                ((*address).to_owned(), Server::new(clock))
            })
            .collect(),
        _ => vec![(REDIS.to_owned(), Server::new(clock))],
    };
    // Every server of the world: the nodes and the Sentinels.
    let servers: Vec<(String, Server)> = nodes
        .iter()
        .chain(group.iter().flat_map(|group| group.sentinels.iter()))
        .cloned()
        .collect();
    network
        .nodes
        .lock()
        .expect("network")
        .extend(servers.iter().cloned());
    let urls: Vec<String> = nodes
        .iter()
        .map(|(address, _)| format!("redis://{address}"))
        .collect();
    let gateways: Vec<App> = (0..2)
        .map(|gateway| {
            let wiring = lockgate::app::Wiring {
                redis_transport: Some(Arc::new(Links {
                    network: network.clone(),
                    gateway,
                })),
            };
            let config = match kind {
                Kind::Redlock => redlock_config(&urls, REDLOCK_NODE_TIMEOUT),
                Kind::Failover => {
                    let sentinels: Vec<String> = failover::SENTINELS
                        .iter()
                        .map(|address| format!("redis://{address}"))
                        .collect();
                    sentinel_config(&sentinels, failover::GROUP)
                }
                _ => redis_config(&urls[0]),
            };
            let assembled = lockgate::app::assemble_with(&config, &wiring).expect("a gateway");
            assembled.guards.watch();
            assembled.router
        })
        .collect();

    // The world's life, beside a watch for a loop that never waits (simulated time would stop
    // and the world spin for good): that fails the seed at once, saying where.
    let life = async {
        let bounded = Arc::new(Mutex::new(Vec::new()));
        let lasts = Duration::from_secs(10);
        let begun = tokio::time::Instant::now();
        let mut clients = Vec::new();
        // Each client's gateway, by index.
        let mut gateway_of = Vec::new();
        for client in 0..4 {
            let gateway = rng.index(gateways.len());
            gateway_of.push(gateway);
            let app = gateways[gateway].clone();
            let steps = Rng::from_seed(rng.next(u64::MAX));
            let (history, bounded, until) = (history.clone(), bounded.clone(), begun + lasts);
            clients.push(match kind {
                Kind::Locks | Kind::ForwardSteps | Kind::Failover => {
                    let unacknowledged = group.as_ref().map(|g| g.unacknowledged.clone());
                    tokio::spawn(Box::pin(client_steps(
                        client,
                        app,
                        steps,
                        history,
                        unacknowledged,
                        until,
                        bounded,
                    )))
                }
                Kind::Holds => tokio::spawn(Box::pin(hold_steps(
                    client, app, steps, history, until, bounded,
                ))),
                _ => tokio::spawn(Box::pin(lease_steps(
                    kind, client, app, steps, history, until, bounded,
                ))),
            });
        }
        let faults_end = begun + lasts * 7 / 10;
        // Forward steps are drawn in their own world only: the others' seeds stay the worlds
        // they were.
        let steps_forward = (kind == Kind::ForwardSteps).then(|| history.clone());
        let nemesis = tokio::spawn(Box::pin(nemesis(
            Rng::from_seed(rng.next(u64::MAX)),
            network.clone(),
            nodes.clone(),
            gateways.len(),
            faults_end,
            steps_forward,
            group.clone(),
        )));
        let faults = nemesis.await.expect("the nemesis");
        for client in clients {
            client.await.expect("a client");
        }
        // Liveness: with the faults over, each name goes to a client of a live gateway within its
        // wait (a fair waiter's, for locks), which covers every lease that may still run (the
        // longest ttl, Redis's clock steps back, a data loss's hold-back) and the liveness window
        // after which a dead gateway's waiters stop holding a queue up.
        let live = (0..gateways.len())
            .find(|gateway| !network.is_dead(*gateway))
            .expect("a live gateway");
        let probes: Vec<Vec<&str>> = match kind {
            Kind::MultiLocks => vec![kind.names().to_vec()],
            _ => kind.names().iter().map(|name| vec![*name]).collect(),
        };
        let prober = 4;
        for names in probes {
            let (ttl_ms, wait_ms) = (1000, 8000);
            let mut fields = json!({"ttl_ms": ttl_ms, "wait_ms": wait_ms});
            if matches!(
                kind,
                Kind::Locks | Kind::Holds | Kind::ForwardSteps | Kind::Failover
            ) {
                fields["fair"] = json!(true);
            }
            let (path, body) = kind.acquire(&names, fields);
            let invoke = history.now_us();
            let sent = send(&gateways[live], Method::POST, &path, Some(&body), &[], None).await;
            let outcome = answered(sent, Expect::Grant);
            let call = Call::Acquire {
                ttl_ms,
                wait_ms,
                shared: false,
            };
            for name in &names {
                history.record(prober, name, call.clone(), invoke, outcome.clone());
            }
            let Outcome::Granted { token, .. } = outcome else {
                let path = history.check().save(&history_name(kind, seed));
                panic!(
                    "seed {seed}: with the faults over, an acquire of {names:?} waiting {wait_ms} ms got {outcome:?} (faults: {faults:?}; history: {}); Redis holds {:?}",
                    path.display(),
                    nodes
                        .iter()
                        .map(|(address, server)| (
                            address,
                            server.clock().now_ms(),
                            keyspace(&server.snapshot())
                        ))
                        .collect::<Vec<_>>()
                );
            };
            let invoke = history.now_us();
            let headers = [("Lock-Token", Some(token.as_str()))];
            let lease = kind.lease(&names);
            let sent = send(
                &gateways[live],
                Method::DELETE,
                &lease,
                None,
                &headers,
                None,
            )
            .await;
            let outcome = answered(sent, Expect::Release);
            for name in &names {
                let call = Call::Release {
                    token: token.clone(),
                };
                history.record(prober, name, call, invoke, outcome.clone());
            }
        }
        // Every lease is over once the longest ttl (and the clock's steps back) have passed, and
        // a fair queue whose gateway could not take a waiter's place out (a fault) expires three
        // liveness windows after its last heartbeat (`backend::queue`).
        let longest_ttl = Duration::from_secs(2);
        let steps_back = Duration::from_millis(500);
        let queues = 3 * lockgate::backend::queue::LIVENESS;
        tokio::time::sleep(queues.max(longest_ttl + steps_back) + Duration::from_secs(1)).await;
        // A master's look gives its replica what is on its way (a replica is looked at too).
        for (_, server) in &nodes {
            server.snapshot();
        }
        for (address, server) in &nodes {
            let now_ms = server.clock().now_ms();
            let left: Vec<String> = server
                .snapshot()
                .into_iter()
                .map(|(key, entry)| {
                    let ttl = entry.expires_at_ms.map(|at| at - now_ms);
                    format!("{} (ttl {ttl:?} ms)", String::from_utf8_lossy(&key))
                })
                .filter(|key| {
                    !key.starts_with("lockgate:fences ") && !key.starts_with("lockgate:marker ")
                })
                .collect();
            assert!(left.is_empty(), "seed {seed}: left in {address}: {left:?}");
        }
        for (address, server) in &servers {
            let gaps = server.gaps();
            assert!(
                gaps.is_empty(),
                "seed {seed}: not simulated at {address}: {gaps:?}"
            );
        }

        let report = history.check();
        let name = history_name(kind, seed);
        if std::env::var_os("LOCKGATE_SIM_SEED").is_some() {
            eprintln!("seed {seed}: faults {faults:?}");
            report.save(&name);
        }
        if let Some(group) = &group {
            // A failover may lose a grant no replica acknowledged, written around it
            // (documented); nothing else (`Group::unexcused`).
            let unexcused = group.unexcused(&report);
            if !unexcused.is_empty() {
                let path = report.save(&name);
                panic!(
                    "seed {seed}: {} violation(s) no failover excuses, after {} failover(s): {unexcused:?} (history: {})",
                    unexcused.len(),
                    group.failovers(),
                    path.display()
                );
            }
        } else if faults.contains(&"restart without data") && faults.contains(&"a gateway dies") {
            // The double fault docs/modes.md names ("A node that forgets"): a gateway that dies
            // may take the knowledge of its longest lease with it, so a grant of its client may
            // be overlapped after the loss (documented). Any other overlap is not.
            report.assert_none(
                &name,
                &["fence-order", "server-error", "unknown-token-accepted"],
            );
            for violation in &report.violations {
                if let Violation::Overlap { first, .. } = *violation {
                    let granted_by = report
                        .ops
                        .iter()
                        .find(|op| op.id == first)
                        .map(|op| op.client);
                    let documented = granted_by
                        .and_then(|client| gateway_of.get(client))
                        .is_some_and(|gateway| network.is_dead(*gateway));
                    if !documented {
                        let path = report.save(&name);
                        panic!(
                            "seed {seed}: {violation:?} after a data loss, the earlier grant by a live gateway's client (history: {})",
                            path.display()
                        );
                    }
                }
            }
        } else if faults.contains(&"restart without data") {
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
                if let (
                    Call::Renew { token, .. } | Call::Reenter { token, .. },
                    Outcome::Renewed { ttl_ms, .. },
                ) = (&op.call, &op.outcome)
                    && *token == hold.token
                {
                    let end = op.invoke_us + ttl_ms * 1000;
                    // The API speaks whole milliseconds, and the gateway rounds the last renewal's
                    // ttl up to one (src/lock/promise.rs, `within_hold`): a lease may end within a
                    // millisecond after the bound, never later. The bound is counted from Redis's
                    // clock at the grant (the fence), so a step forward of that clock before the
                    // renewal moves it later by the step (docs/api.md, "Bounded holds").
                    let skew = history.stepped_forward_by(hold.acquired_us);
                    let bound = hold.acquired_us + hold.max_hold_ms * 1000 + 1000 + skew;
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
            kind,
            seed,
            history: report.to_json(),
            // One node's digest as it is; several folded in their order.
            commands: nodes.iter().fold(0, |folded, (_, server)| {
                folded.rotate_left(1) ^ server.digest()
            }),
            ops: report.ops.len(),
            grants: report
                .ops
                .iter()
                .filter(|op| matches!(op.outcome, Outcome::Granted { .. }))
                .count(),
            simulated: begun.elapsed(),
        }
    };
    let spinning = futures_util::future::select_all(
        servers
            .iter()
            .map(|(_, server)| Box::pin(server.spinning())),
    );
    tokio::select! {
        biased;
        (_, index, _) = spinning => {
            let (address, server) = &servers[index];
            panic!(
                "seed {seed}: a loop that never waits: at {address}, {}",
                server.spun().unwrap_or_default()
            );
        }
        run = Box::pin(life) => run,
    }
}
