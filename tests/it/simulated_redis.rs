//! The simulated Redis (sim/redis) against the real one, so that the simulation cannot drift
//! from Redis silently.
//!
//! The corpus is what lockgate really sends: gateways (standalone and Redlock) serve a
//! workload that uses every kind of lease and every script, against real servers that
//! `MONITOR` records. The recording is then replayed, command by command and from as many
//! connections as it was sent from, on a fresh real server (Redis, or Valkey with
//! `LOCKGATE_TEST_SERVER=valkey`) whose wall clock is frozen at each command's recorded
//! instant (support/clock_shim.c) and on a simulated server whose clock is set to the same
//! instant. Every reply, every message a listener receives, and after each command the whole
//! keyspace (types, values, scores, exact remaining ttls) must be the same on both, and the
//! simulation must not have been asked for anything it does not have.
//!
//! Left out of the comparison, each for its reason: `INFO` and `CLIENT` (they name the
//! server); `SCAN` (the pages split differently; the keyspace is compared instead); the
//! feature probe and `COMMAND INFO` on Valkey, whose native commands the simulation, a Redis
//! 7.0, does not have (the gateways here send Lua only: `--redis-native-commands off`);
//! `WAIT`, not sent (with no replica and a frozen clock a real server would block forever).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use lockgate::backend::redis::NativeCommands;
use lockgate::client::Answer;
use serde_json::{Value, json};
use sim_redis::commands::{Flavor, format_score};
use sim_redis::resp;
use sim_redis::{Clock, Entry, Frame, Server};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::answers::json_of;
use crate::support::clock::ClockOffset;
use crate::support::eventually;
use crate::support::gateway::{Gateway, redis_config, redlock_config};
use crate::support::monitor::{Monitor, Ran};
use crate::support::redis::{RedisServer, server_kind};

/// Every reply, message and keyspace of the recorded traffic is the same on the simulated
/// server as on a real one, and the traffic ran every script lockgate has.
#[tokio::test]
async fn the_simulated_redis_answers_as_the_real_one() {
    let mut recordings = Vec::new();
    // A standalone server: every kind of lease.
    let redis = RedisServer::start();
    let monitor = Monitor::start(redis.port()).await;
    let gw = Gateway::start(lua_only(redis_config(&redis.url()))).await;
    Box::pin(every_kind_of_lease(&gw, &redis)).await;
    recordings.push(("standalone", monitor.stop().await));
    drop(gw);

    // Three Redlock nodes: what only Redlock sends (finalize, raised fences).
    let nodes = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let mut monitors = Vec::new();
    for node in &nodes {
        monitors.push(Monitor::start(node.port()).await);
    }
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let gw = Gateway::start(lua_only(redlock_config(&urls, Duration::from_millis(500)))).await;
    Box::pin(redlock_traffic(&gw, &nodes)).await;
    for (i, monitor) in monitors.into_iter().enumerate() {
        recordings.push((
            ["redlock 1", "redlock 2", "redlock 3"][i],
            monitor.stop().await,
        ));
    }
    drop(gw);

    recordings.push(("edge cases", edge_cases()));

    let unrun = scripts_not_run(recordings.iter().flat_map(|(_, ran)| ran));
    assert!(
        unrun.is_empty(),
        "the corpus ran no script containing these files: {unrun:?}"
    );

    for (what, ran) in &recordings {
        let report = Box::pin(replay(ran)).await;
        assert!(
            report.differences.is_empty(),
            "{what}: the simulated Redis differs from the real {} in {} of {} commands; the first:\n{}",
            server_kind(),
            report.differences.len(),
            report.compared,
            report.differences[..report.differences.len().min(8)].join("\n")
        );
        assert!(
            report.gaps.is_empty(),
            "{what}: the simulation was asked for what it does not have: {:?}",
            report.gaps
        );
        assert!(
            report.compared > 20,
            "{what}: only {} commands",
            report.compared
        );
        eprintln!(
            "{what}: {} commands and their keyspaces the same on the simulated and the real {}",
            report.compared,
            server_kind()
        );
    }
}

fn lua_only(mut config: lockgate::config::Config) -> lockgate::config::Config {
    config.native_commands = NativeCommands::Off;
    config
}

// ---------------------------------------------------------------------------------------
// The traffic.

fn token(reply: (u16, Value)) -> String {
    reply.1["token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token in {reply:?}"))
        .to_owned()
}

/// Plain, idempotent, listed, revoked, minimum-hold, reentrant, fair (with a waiter that gives
/// up and a dead gateway's place), multi, shared, semaphore, replicas required, hold stream
/// and a blocking waiter: every script of a standalone server.
async fn every_kind_of_lease(gw: &Gateway, redis: &RedisServer) {
    let locks = gw.locks();
    let client = gw.client();

    let held = token(json_of(
        locks
            .acquire(
                "sim:plain",
                json!({"ttl_ms": 5000, "owner": "a", "metadata": {"k": "v"}}),
            )
            .await,
    ));
    assert_eq!(json_of(locks.acquire("sim:plain", json!({})).await).0, 409);
    json_of(locks.inspect("sim:plain").await);
    json_of(
        locks
            .renew("sim:plain", &held, json!({"ttl_ms": 8000}))
            .await,
    );
    json_of(
        locks
            .renew("sim:plain", "not-a-token", json!({"ttl_ms": 8000}))
            .await,
    );
    json_of(locks.release("sim:plain", &held).await);
    json_of(locks.release("sim:plain", &held).await);
    json_of(locks.inspect("sim:plain").await);

    let once = token(json_of(
        locks
            .acquire_once("sim:once", "simulation-key-0001", json!({}))
            .await,
    ));
    json_of(
        locks
            .acquire_once("sim:once", "simulation-key-0001", json!({}))
            .await,
    );
    let _: Value = listed(client.list(&[("prefix", "sim:")]).await);
    json_of(locks.release("sim:once", &once).await);

    token(json_of(locks.acquire("sim:revoked", json!({})).await));
    json_of(client.force_release("sim:revoked").await);

    let min = token(json_of(
        locks
            .acquire("sim:min", json!({"ttl_ms": 1000, "min_hold_ms": 60_000}))
            .await,
    ));
    json_of(locks.release("sim:min", &min).await);

    let reentrant = token(json_of(
        locks
            .acquire("sim:reentrant", json!({"reentrant": true}))
            .await,
    ));
    let holder = client
        .clone()
        .header("Lock-Token", &reentrant)
        .expect("a token header");
    json_of(
        holder
            .acquire("sim:reentrant", &json!({"reentrant": true}), None, None)
            .await,
    );
    json_of(locks.release("sim:reentrant", &reentrant).await);
    json_of(locks.release("sim:reentrant", &reentrant).await);

    Box::pin(fair_traffic(gw, redis)).await;

    let names = ["sim:set:a".to_owned(), "sim:set:b".to_owned()];
    let set = client.clone().set(&names);
    let set_token = token(json_of(
        set.acquire("", &json!({"names": names}), None, None).await,
    ));
    json_of(
        set.renew(
            "",
            &set_token,
            &serde_json::from_value(json!({"ttl_ms": 9000})).expect("a renew body"),
            None,
        )
        .await,
    );
    json_of(set.release("", &set_token, None).await);

    let reader_1 = token(json_of(
        locks.acquire("sim:rw", json!({"mode": "shared"})).await,
    ));
    let reader_2 = token(json_of(
        locks.acquire("sim:rw", json!({"mode": "shared"})).await,
    ));
    assert_eq!(json_of(locks.acquire("sim:rw", json!({})).await).0, 409);
    json_of(locks.inspect("sim:rw").await);
    json_of(
        locks
            .renew("sim:rw", &reader_1, json!({"ttl_ms": 9000}))
            .await,
    );
    json_of(locks.release("sim:rw", &reader_1).await);
    json_of(locks.release("sim:rw", &reader_2).await);
    token(json_of(
        locks.acquire("sim:rw", json!({"mode": "shared"})).await,
    ));
    json_of(client.force_release("sim:rw").await);

    let permits = client.clone().semaphores();
    let permit = token(json_of(
        permits
            .acquire("sim:sem", &json!({"permits": 2}), None, None)
            .await,
    ));
    token(json_of(
        permits
            .acquire("sim:sem", &json!({"permits": 2}), None, None)
            .await,
    ));
    assert_eq!(
        json_of(
            permits
                .acquire("sim:sem", &json!({"permits": 2}), None, None)
                .await
        )
        .0,
        409
    );
    let _: Value = listed(permits.inspect_as("sim:sem").await);
    json_of(
        permits
            .renew(
                "sim:sem",
                &permit,
                &serde_json::from_value(json!({"ttl_ms": 9000})).expect("a renew body"),
                None,
            )
            .await,
    );
    json_of(permits.release("sim:sem", &permit, None).await);
    json_of(permits.force_release("sim:sem").await);

    // Too few replicas acknowledged: the grant is withdrawn.
    let status = json_of(
        locks
            .acquire(
                "sim:replicas",
                json!({"replicas": 1, "require_replicas": true, "replica_timeout_ms": 10}),
            )
            .await,
    )
    .0;
    assert_eq!(status, 503);

    // A hold stream, given up once acquired.
    match client.hold("sim:hold", &json!({"ttl_ms": 3000})).await {
        Ok(Answer::Done { mut body, .. }) => {
            let first = body.next().await.expect("an acquired event");
            assert_eq!(first["event"], "acquired", "{first}");
        }
        other => panic!("no hold: {other:?}"),
    }
    eventually(Duration::from_secs(10), "the hold released", || async {
        (json_of(locks.inspect("sim:hold").await).0 == 404).then_some(())
    })
    .await;

    // A waiter woken by a release.
    let first = token(json_of(locks.acquire("sim:wait", json!({})).await));
    let waiter = {
        let locks = gw.locks();
        tokio::spawn(
            async move { json_of(locks.acquire("sim:wait", json!({"wait_ms": 10_000})).await) },
        )
    };
    eventually(Duration::from_secs(10), "a waiter", || async {
        (crate::support::waiters_in(&gw.metrics_text().await) == Some(1)).then_some(())
    })
    .await;
    json_of(locks.release("sim:wait", &first).await);
    let second = token(waiter.await.expect("the waiter"));
    json_of(locks.release("sim:wait", &second).await);
}

fn listed(reply: crate::support::answers::Reply<Value>) -> Value {
    match reply {
        Ok(Answer::Done { body, .. }) => body,
        other => panic!("not listed: {other:?}"),
    }
}

/// A fair lock: a holder, a waiter that is granted in its turn and one that gives up; then a
/// plain acquire that finds only a dead gateway's place in the queue.
async fn fair_traffic(gw: &Gateway, redis: &RedisServer) {
    let locks = gw.locks();
    let holder = token(json_of(
        locks.acquire("sim:fair", json!({"fair": true})).await,
    ));
    let patient = {
        let locks = gw.locks();
        tokio::spawn(async move {
            json_of(
                locks
                    .acquire(
                        "sim:fair",
                        json!({"fair": true, "wait_ms": 20_000, "owner": "patient", "priority": 2}),
                    )
                    .await,
            )
        })
    };
    eventually(Duration::from_secs(10), "a queued waiter", || async {
        let (_, body) = json_of(locks.inspect("sim:fair").await);
        (body["queued"] == 1).then_some(())
    })
    .await;
    let impatient = json_of(
        locks
            .acquire("sim:fair", json!({"fair": true, "wait_ms": 150}))
            .await,
    );
    assert_eq!(impatient.0, 409, "{impatient:?}");
    json_of(locks.inspect("sim:fair").await);
    json_of(locks.release("sim:fair", &holder).await);
    let granted = token(patient.await.expect("the patient waiter"));
    json_of(locks.release("sim:fair", &granted).await);

    // A dead gateway's place, written by hand: a plain acquire clears it and is granted.
    let mut zadd = redis::cmd("ZADD");
    zadd.arg("lockgate:{sim:dead}:queue").arg(1).arg("gone:1");
    let _: () = redis.query(&zadd).expect("ZADD");
    let mut hset = redis::cmd("HSET");
    hset.arg("lockgate:{sim:dead}:queue:live")
        .arg("gone")
        .arg(1000);
    let _: () = redis.query(&hset).expect("HSET");
    let cleared = token(json_of(locks.acquire("sim:dead", json!({})).await));
    json_of(locks.release("sim:dead", &cleared).await);
}

/// Acquire, renew, inspect, release over Redlock.
async fn redlock_traffic(gw: &Gateway, nodes: &[RedisServer; 3]) {
    let locks = gw.locks();
    for i in 0..3 {
        let name = format!("sim:redlock:{i}");
        let held = token(json_of(locks.acquire(&name, json!({"owner": "r"})).await));
        json_of(locks.inspect(&name).await);
        json_of(locks.renew(&name, &held, json!({"ttl_ms": 9000})).await);
        json_of(locks.release(&name, &held).await);
    }
    // Held on two nodes by a client of its own: the gateway's grant on the third is partial,
    // and withdrawn without a word to the name's waiters.
    let key = "lockgate:{sim:redlock:partial}";
    for node in &nodes[..2] {
        let set = redis::cmd("SET")
            .arg(key)
            .arg("theirs")
            .arg("PX")
            .arg(60_000)
            .clone();
        node.query::<()>(&set).expect("SET");
    }
    let (status, body) = json_of(locks.acquire("sim:redlock:partial", json!({})).await);
    assert_eq!(status, 409, "{body}");
    for node in &nodes[..2] {
        node.query::<()>(redis::cmd("DEL").arg(key)).expect("DEL");
    }
}

/// Commands at the edges lockgate's traffic seldom reaches, each at a chosen instant: expiry
/// to the millisecond, expiries in the past, options and errors of every command the
/// simulation has, and the conversions between Lua and Redis (numbers, booleans, nested
/// tables, status and error tables, an error raised by `redis.call`, one caught by
/// `redis.pcall`, a global variable).
fn edge_cases() -> Vec<Ran> {
    let start_us = 1_800_000_000_123_456;
    let steps: &[(i64, &[&str])] = &[
        (0, &["SET", "s", "v", "PX", "100"]),
        (0, &["PTTL", "s"]),
        (100_000, &["PTTL", "s"]),
        (100_000, &["GET", "s"]),
        (100_999, &["GET", "s"]),
        (101_000, &["GET", "s"]),
        (101_000, &["EXISTS", "s", "s", "none"]),
        (200_000, &["SET", "s", "v", "PX", "0"]),
        (200_000, &["SET", "s", "v", "PX", "-5"]),
        (200_000, &["SET", "s", "v", "PX", "1.5"]),
        (200_000, &["SET", "s", "v", "NX", "XX"]),
        (200_000, &["SET", "s", "v", "PX", "500", "KEEPTTL"]),
        (200_000, &["SET", "s", "v", "PXAT", "1800000000200"]),
        (200_000, &["SET", "s", "w", "KEEPTTL", "GET"]),
        (200_000, &["PTTL", "s"]),
        (200_000, &["SET", "s", "x", "NX", "GET"]),
        (200_000, &["SET", "t", "x", "XX"]),
        (200_000, &["SET", "s", "y"]),
        (200_000, &["PTTL", "s"]),
        (200_000, &["PEXPIRE", "s", "250"]),
        (200_000, &["PEXPIRE", "none", "250"]),
        (200_000, &["PEXPIRE", "s", "007"]),
        (200_000, &["PEXPIREAT", "s", "1800000000000"]),
        (200_000, &["EXISTS", "s"]),
        (200_000, &["SET", "s", "z"]),
        (200_000, &["PEXPIRE", "s", "0"]),
        (200_000, &["GET", "s"]),
        (200_000, &["HSET", "h", "a", "1", "b", "2"]),
        (200_000, &["HSET", "h", "a", "3"]),
        (200_000, &["HSET", "h", "a"]),
        (200_000, &["HGET", "h", "a"]),
        (200_000, &["HMGET", "h", "a", "none", "b"]),
        (200_000, &["HINCRBY", "h", "b", "40"]),
        (200_000, &["HINCRBY", "h", "c", "-1"]),
        (200_000, &["HINCRBY", "h", "b", "x"]),
        (200_000, &["HSET", "h", "t", "text"]),
        (200_000, &["HINCRBY", "h", "t", "1"]),
        (200_000, &["GET", "h"]),
        (200_000, &["HDEL", "h", "a", "a", "none"]),
        (200_000, &["HDEL", "h", "b", "c", "t"]),
        (200_000, &["EXISTS", "h"]),
        (
            200_000,
            &["ZADD", "z", "1", "a", "2", "b", "2", "c", "-1.5", "d"],
        ),
        (200_000, &["ZADD", "z", "NX", "5", "a", "6", "e"]),
        (200_000, &["ZADD", "z", "XX", "CH", "7", "a", "8", "f"]),
        (200_000, &["ZADD", "z", "GT", "CH", "3", "a", "9", "b"]),
        (200_000, &["ZADD", "z", "LT", "CH", "1", "c"]),
        (200_000, &["ZADD", "z", "nan", "x"]),
        (
            200_000,
            &["ZADD", "z", "0.1", "g", "1e20", "h", "-inf", "i"],
        ),
        (200_000, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        (200_000, &["ZRANGE", "z", "-2", "-1"]),
        (200_000, &["ZRANGE", "z", "5", "2"]),
        (200_000, &["ZRANGE", "z", "-100", "100"]),
        (200_000, &["ZRANGE", "none", "0", "-1"]),
        (200_000, &["ZSCORE", "z", "g"]),
        (200_000, &["ZSCORE", "z", "none"]),
        (200_000, &["ZRANK", "z", "c"]),
        (200_000, &["ZRANK", "z", "none"]),
        (200_000, &["ZCARD", "z"]),
        (200_000, &["ZCOUNT", "z", "(1", "+inf"]),
        (200_000, &["ZCOUNT", "z", "-inf", "(2"]),
        (200_000, &["ZCOUNT", "z", "x", "2"]),
        (200_000, &["ZRANGEBYSCORE", "z", "(0.1", "9", "WITHSCORES"]),
        (
            200_000,
            &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "2"],
        ),
        (
            200_000,
            &["ZUNIONSTORE", "u", "2", "z", "none", "AGGREGATE", "MAX"],
        ),
        (
            200_000,
            &["ZUNIONSTORE", "z", "2", "z", "u", "WEIGHTS", "1", "2"],
        ),
        (200_000, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        (200_000, &["ZREMRANGEBYSCORE", "z", "-inf", "2"]),
        (200_000, &["ZREM", "z", "a", "b", "none"]),
        (200_000, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        (200_000, &["ZUNIONSTORE", "z", "1", "none"]),
        (200_000, &["EXISTS", "z"]),
        (200_000, &["ZADD", "s2", "1", "a"]),
        (200_000, &["GET", "s2"]),
        (200_000, &["HGET", "s2", "a"]),
        (200_000, &["DEL", "u", "s2", "none"]),
        (200_000, &["TIME"]),
        (200_000, &["PUBLISH", "channel", "message"]),
        (200_000, &["CONFIG", "GET", "maxmemory"]),
        (200_000, &["CONFIG", "GET", "maxmemory-policy"]),
        (200_000, &["CONFIG", "GET", "notify-keyspace-events"]),
        (
            200_000,
            &[
                "EVAL",
                "return {1, 2.9, -2.9, 'x', true, false, nil, 'after nil'}",
                "0",
            ],
        ),
        (
            200_000,
            &[
                "EVAL",
                "return {{1, {2}}, {ok = 'fine'}, {err = 'ERR inner'}}",
                "0",
            ],
        ),
        (200_000, &["EVAL", "return redis.status_reply('DONE')", "0"]),
        (
            200_000,
            &["EVAL", "return redis.error_reply('CUSTOM failed')", "0"],
        ),
        (200_000, &["EVAL", "return 3.99", "0"]),
        (
            200_000,
            &[
                "EVAL",
                "return {KEYS[1], ARGV[1], #KEYS, #ARGV}",
                "1",
                "k",
                "a",
                "b",
            ],
        ),
        (
            200_000,
            &[
                "EVAL",
                "redis.call('SET', KEYS[1], 0.1) redis.call('SET', 'f2', 1e20)                redis.call('SET', 'f3', 123456789012345678) return redis.call('GET', KEYS[1])",
                "1",
                "f1",
            ],
        ),
        (
            200_000,
            &[
                "EVAL",
                "return redis.call('GET', 'f2') .. ' ' .. redis.call('GET', 'f3')",
                "0",
            ],
        ),
        (
            200_000,
            &["EVAL", "return redis.call('ZADD', 'zz', 1.5, 'm')", "0"],
        ),
        (
            200_000,
            &["EVAL", "return redis.call('HGET', 'nohash', 'f')", "0"],
        ),
        (200_000, &["EVAL", "return redis.call('TIME')", "0"]),
        (
            200_000,
            &["EVAL", "return redis.call('SET', 'k', 'v')", "0"],
        ),
        (
            200_000,
            &["EVAL", "return redis.call('SET', 'k', 'v', 'NX')", "0"],
        ),
        (
            200_000,
            &["EVAL", "return redis.pcall('HGET', 'k', 'f')", "0"],
        ),
        (
            200_000,
            &[
                "EVAL",
                "local r = redis.pcall('HGET', 'k', 'f') return r.err",
                "0",
            ],
        ),
        (
            200_000,
            &["EVAL", "return redis.call('HGET', 'k', 'f')", "0"],
        ),
        (200_000, &["EVAL", "undefined_global = 1", "0"]),
        (200_000, &["EVAL", "return undefined_global", "0"]),
        (200_000, &["EVAL", "error('raised')", "0"]),
        (200_000, &["EVAL", "return redis.sha1hex('abc')", "0"]),
        (200_000, &["EVAL", "return tonumber('12') + 1", "2", "a"]),
        (200_000, &["EVAL", "return 1", "-1"]),
        (
            200_000,
            &["EVALSHA", "0000000000000000000000000000000000000000", "0"],
        ),
        (
            200_000,
            &["SCRIPT", "LOAD", "#!lua flags=allow-oom\nreturn 7"],
        ),
        (
            200_000,
            &["EVALSHA", "8d3e5a0a2b3b8e1c42b3c40e3d7ba3b8f0ef2c3c", "0"],
        ),
        (
            200_000,
            &[
                "EVAL",
                "#!lua flags=allow-oom\nreturn redis.call('PTTL', KEYS[1])",
                "1",
                "k",
            ],
        ),
        (
            200_000,
            &[
                "SCRIPT",
                "EXISTS",
                "0000000000000000000000000000000000000000",
            ],
        ),
        (200_000, &["DEL", "f1", "f2", "f3", "zz", "k"]),
    ];
    steps
        .iter()
        .map(|(after_us, args)| Ran {
            at_us: start_us + after_us,
            client: "edge".to_owned(),
            args: args
                .iter()
                .map(|a| a.replace("\\n", "\n").into_bytes())
                .collect(),
        })
        .collect()
}

/// The `.lua` files under src/ that no script the recordings ran contains.
fn scripts_not_run<'a>(ran: impl Iterator<Item = &'a Ran>) -> Vec<String> {
    let mut loaded: HashMap<String, Vec<u8>> = HashMap::new();
    let mut run: Vec<Vec<u8>> = Vec::new();
    let mut by_sha: Vec<String> = Vec::new();
    for command in ran {
        let name = command.args[0].to_ascii_uppercase();
        match name.as_slice() {
            b"SCRIPT" if command.args.len() == 3 => {
                let source = command.args[2].clone();
                loaded.insert(sim_redis::scripting::sha1_hex(&source), source);
            }
            b"EVAL" => run.push(command.args[1].clone()),
            b"EVALSHA" => by_sha.push(String::from_utf8_lossy(&command.args[1]).to_lowercase()),
            _ => {}
        }
    }
    run.extend(by_sha.iter().filter_map(|sha| loaded.get(sha).cloned()));
    let mut unrun = Vec::new();
    for file in lua_files(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src")) {
        let text = std::fs::read(&file).expect("a script file");
        if !run.iter().any(|source| contains(source, &text)) {
            unrun.push(file.display().to_string());
        }
    }
    unrun
}

fn lua_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a directory").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(lua_files(&path));
        } else if path.extension().is_some_and(|e| e == "lua") {
            files.push(path);
        }
    }
    files.sort();
    files
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

// ---------------------------------------------------------------------------------------
// The replay.

/// What a replay found.
struct Report {
    compared: usize,
    differences: Vec<String>,
    gaps: Vec<String>,
}

/// One connection's RESP stream, read a frame at a time.
struct Wire<S> {
    stream: S,
    buf: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Wire<S> {
    fn new(stream: S) -> Self {
        Self {
            stream,
            buf: Vec::new(),
        }
    }

    async fn send(&mut self, args: &[Vec<u8>]) {
        let bytes = Frame::command(args).to_bytes();
        self.stream.write_all(&bytes).await.expect("send");
    }

    async fn read(&mut self) -> Frame {
        let mut chunk = vec![0u8; 64 * 1024];
        let read = async {
            loop {
                if let Some((frame, used)) = resp::parse(&self.buf).expect("RESP") {
                    self.buf.drain(..used);
                    return frame;
                }
                let n = self.stream.read(&mut chunk).await.expect("read");
                assert!(n > 0, "the server closed the connection");
                self.buf.extend_from_slice(&chunk[..n]);
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("a reply within 10 s")
    }

    /// What arrived before the reply to a `PING` sent now (a listener's messages, or the
    /// confirmations of a subscription), in order.
    async fn until_pong(&mut self) -> Vec<Frame> {
        self.send(&[b"PING".to_vec()]).await;
        let mut before = Vec::new();
        loop {
            let frame = self.read().await;
            let pong = match &frame {
                Frame::Simple(s) => s == "PONG",
                Frame::Array(items) => items.first() == Some(&Frame::bulk("pong")),
                _ => false,
            };
            if pong {
                return before;
            }
            before.push(frame);
        }
    }
}

/// A recorded client's connections to the two servers.
struct Pair {
    real: Wire<TcpStream>,
    sim: Wire<tokio::io::DuplexStream>,
    listening: bool,
}

/// How a recorded command is replayed.
#[derive(PartialEq)]
enum Replay {
    /// Sent to both, replies compared.
    Compare,
    /// Sent to both, replies not compared (they name the server, or page differently).
    SendOnly,
    /// Not sent.
    Skip,
}

fn replay_of(args: &[Vec<u8>]) -> Replay {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
    let valkey = server_kind() == "valkey";
    let has = |word: &str| args.iter().any(|a| a.eq_ignore_ascii_case(word.as_bytes()));
    match name.as_str() {
        "WAIT" | "MONITOR" => Replay::Skip,
        "INFO" | "CLIENT" | "SCAN" => Replay::SendOnly,
        "COMMAND" if valkey => Replay::SendOnly,
        "SET" if valkey && has("IFEQ") => Replay::SendOnly,
        _ => Replay::Compare,
    }
}

/// The manners of the real server compared with.
fn flavor() -> Flavor {
    if server_kind() == "valkey" {
        Flavor::Valkey9
    } else {
        Flavor::Redis7
    }
}

async fn replay(ran: &[Ran]) -> Report {
    let (offset, env) = ClockOffset::new().expect("the clock shim");
    let real = RedisServer::start_with_env(env);
    let start = ran.first().map_or(0, |r| r.at_us);
    offset.freeze_at(start);
    let clock = Clock::at(start);
    let sim = Server::with_flavor(clock.clone(), flavor());
    let mut admin = Wire::new(
        TcpStream::connect(("127.0.0.1", real.port()))
            .await
            .expect("connect"),
    );
    let mut pairs: BTreeMap<String, Pair> = BTreeMap::new();
    let mut report = Report {
        compared: 0,
        differences: Vec::new(),
        gaps: Vec::new(),
    };
    for command in ran {
        let how = replay_of(&command.args);
        if how == Replay::Skip {
            continue;
        }
        offset.freeze_at(command.at_us);
        clock.set_us(command.at_us);
        if !pairs.contains_key(&command.client) {
            let real_conn = TcpStream::connect(("127.0.0.1", real.port()))
                .await
                .expect("connect");
            pairs.insert(
                command.client.clone(),
                Pair {
                    real: Wire::new(real_conn),
                    sim: Wire::new(sim.connect()),
                    listening: false,
                },
            );
        }
        let name = String::from_utf8_lossy(&command.args[0]).to_ascii_uppercase();
        let pair = pairs.get_mut(&command.client).expect("a pair");
        pair.real.send(&command.args).await;
        pair.sim.send(&command.args).await;
        let (real_reply, sim_reply) = if name.ends_with("SUBSCRIBE") {
            pair.listening = true;
            (
                Frame::Array(pair.real.until_pong().await),
                Frame::Array(pair.sim.until_pong().await),
            )
        } else {
            (pair.real.read().await, pair.sim.read().await)
        };
        if how == Replay::Compare {
            report.compared += 1;
            if !same(&real_reply, &sim_reply) {
                report.differences.push(format!(
                    "  {}\n    real: {}\n    sim:  {}",
                    shown(&command.args),
                    shown_frame(&real_reply),
                    shown_frame(&sim_reply)
                ));
            }
        }
        if ["EVAL", "EVALSHA", "PUBLISH"].contains(&name.as_str()) {
            for (client, pair) in pairs.iter_mut().filter(|(_, p)| p.listening) {
                let real_heard = pair.real.until_pong().await;
                let sim_heard = pair.sim.until_pong().await;
                if real_heard != sim_heard {
                    report.differences.push(format!(
                        "  after {}: listener {client} heard\n    real: {}\n    sim:  {}",
                        shown(&command.args),
                        shown_frame(&Frame::Array(real_heard)),
                        shown_frame(&Frame::Array(sim_heard))
                    ));
                }
            }
        }
        let real_keys = real_keyspace(&mut admin).await;
        let sim_keys = sim_keyspace(sim.snapshot(), command.at_us.div_euclid(1000));
        if real_keys != sim_keys {
            report.differences.push(format!(
                "  after {}: keyspaces differ\n{}",
                shown(&command.args),
                keyspace_difference(&real_keys, &sim_keys)
            ));
        }
    }
    report.gaps = sim.gaps();
    report
}

/// Replies are the same, errors by their code (the first word): the texts of script errors
/// name the script's line differently.
fn same(real: &Frame, sim: &Frame) -> bool {
    match (real, sim) {
        (Frame::Error(a), Frame::Error(b)) => a.split(' ').next() == b.split(' ').next(),
        (Frame::Array(a), Frame::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
        }
        _ => real == sim,
    }
}

/// A key: its type, its remaining ttl (ms, -1 for none) and its contents (a string's value;
/// a hash's fields and values by field; a sorted set's members and scores in order).
type Keyspace = BTreeMap<Vec<u8>, (String, i64, Vec<Vec<u8>>)>;

async fn ask(admin: &mut Wire<TcpStream>, args: &[&[u8]]) -> Frame {
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    admin.send(&args).await;
    admin.read().await
}

fn bulks(frame: Frame) -> Vec<Vec<u8>> {
    match frame {
        Frame::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Frame::Bulk(b) => b,
                other => panic!("not a bulk string: {other:?}"),
            })
            .collect(),
        Frame::Bulk(b) => vec![b],
        other => panic!("not bulk strings: {other:?}"),
    }
}

async fn real_keyspace(admin: &mut Wire<TcpStream>) -> Keyspace {
    let mut keys = bulks(ask(admin, &[b"KEYS", b"*"]).await);
    keys.sort();
    let mut space = Keyspace::new();
    for key in keys {
        let kind = match ask(admin, &[b"TYPE", &key]).await {
            Frame::Simple(kind) => kind,
            other => panic!("TYPE: {other:?}"),
        };
        let ttl = match ask(admin, &[b"PTTL", &key]).await {
            Frame::Integer(ttl) => ttl,
            other => panic!("PTTL: {other:?}"),
        };
        let contents = match kind.as_str() {
            "string" => bulks(ask(admin, &[b"GET", &key]).await),
            "hash" => {
                let flat = bulks(ask(admin, &[b"HGETALL", &key]).await);
                let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = flat
                    .chunks(2)
                    .map(|p| (p[0].clone(), p[1].clone()))
                    .collect();
                pairs.sort();
                pairs.into_iter().flat_map(|(f, v)| [f, v]).collect()
            }
            "zset" => bulks(ask(admin, &[b"ZRANGE", &key, b"0", b"-1", b"WITHSCORES"]).await),
            other => vec![other.as_bytes().to_vec()],
        };
        space.insert(key, (kind, ttl, contents));
    }
    space
}

fn sim_keyspace(snapshot: BTreeMap<Vec<u8>, Entry>, now_ms: i64) -> Keyspace {
    snapshot
        .into_iter()
        .map(|(key, entry)| {
            let ttl = entry
                .expires_at_ms
                .map_or(-1, |when| (when - now_ms).max(0));
            let kind = entry.value.type_name().to_owned();
            let contents = match entry.value {
                sim_redis::Value::Str(s) => vec![s],
                sim_redis::Value::Hash(h) => h.into_iter().flat_map(|(f, v)| [f, v]).collect(),
                sim_redis::Value::ZSet(z) => z
                    .sorted()
                    .into_iter()
                    .flat_map(|(m, s)| [m.to_vec(), format_score(s, flavor()).into_bytes()])
                    .collect(),
            };
            (key, (kind, ttl, contents))
        })
        .collect()
}

/// The keys whose type, ttl or contents differ, as text.
fn keyspace_difference(real: &Keyspace, sim: &Keyspace) -> String {
    let text = |entry: Option<&(String, i64, Vec<Vec<u8>>)>| match entry {
        None => "absent".to_owned(),
        Some((kind, ttl, contents)) => format!("{kind} ttl {ttl} {}", shown(contents)),
    };
    let mut lines = Vec::new();
    for key in real
        .keys()
        .chain(sim.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let (a, b) = (real.get(key), sim.get(key));
        if a != b {
            lines.push(format!(
                "    {}\n      real: {}\n      sim:  {}",
                String::from_utf8_lossy(key),
                text(a),
                text(b)
            ));
        }
    }
    lines.join("\n")
}

fn shown(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| {
            let text = String::from_utf8_lossy(a);
            if text.chars().count() > 60 {
                format!("{:?}…", text.chars().take(60).collect::<String>())
            } else {
                format!("{text:?}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn shown_frame(frame: &Frame) -> String {
    let text = frame_text(frame);
    if text.chars().count() > 400 {
        format!("{}…", text.chars().take(400).collect::<String>())
    } else {
        text
    }
}

/// A frame with its strings as text.
fn frame_text(frame: &Frame) -> String {
    match frame {
        Frame::Bulk(bytes) => format!("{:?}", String::from_utf8_lossy(bytes)),
        Frame::Array(items) => format!(
            "[{}]",
            items.iter().map(frame_text).collect::<Vec<_>>().join(", ")
        ),
        other => format!("{other:?}"),
    }
}

/// The simulated replica, `WAIT` and a Sentinel behave as Redis's do for what the failover
/// world relies on: a write reaches the replica a lag later, and `WAIT` answers once it has;
/// a replica refuses writes (a script's too) and serves reads; a failover keeps what the
/// replica received and loses what was on its way; a Sentinel names the master with its
/// epoch and announces a switch; the old master made a replica takes the new one's keyspace.
#[tokio::test(start_paused = true)]
async fn the_simulated_replica_and_sentinel_behave_as_redis_does() {
    let args =
        |words: &[&str]| -> Vec<Vec<u8>> { words.iter().map(|w| w.as_bytes().to_vec()).collect() };
    let epoch_us = 1_800_000_000_000_000;
    let (master, replica) = (
        Server::new(Clock::ticking_from(epoch_us)),
        Server::new(Clock::ticking_from(epoch_us)),
    );
    master.replicate_to(&replica, Duration::from_millis(20));
    let (mut to_master, mut to_replica) =
        (Wire::new(master.connect()), Wire::new(replica.connect()));
    let ask = async |wire: &mut Wire<tokio::io::DuplexStream>, words: &[&str]| {
        wire.send(&args(words)).await;
        wire.read().await
    };

    let sent = tokio::time::Instant::now();
    assert_eq!(ask(&mut to_master, &["SET", "a", "1"]).await, Frame::ok());
    assert_eq!(
        ask(&mut to_master, &["WAIT", "1", "100"]).await,
        Frame::Integer(1)
    );
    assert_eq!(
        sent.elapsed(),
        Duration::from_millis(20),
        "acknowledged a lag later"
    );
    assert_eq!(
        ask(&mut to_master, &["WAIT", "1", "100"]).await,
        Frame::Integer(1)
    );
    assert_eq!(
        sent.elapsed(),
        Duration::from_millis(20),
        "nothing new to wait for"
    );
    assert_eq!(ask(&mut to_replica, &["GET", "a"]).await, Frame::bulk("1"));
    let refused =
        |frame: Frame| matches!(frame, Frame::Error(text) if text.starts_with("READONLY"));
    assert!(refused(ask(&mut to_replica, &["SET", "b", "2"]).await));
    let write = "return redis.call('SET', KEYS[1], '1')";
    assert!(refused(
        ask(&mut to_replica, &["EVAL", write, "1", "b"]).await
    ));
    let read = "return redis.call('GET', KEYS[1])";
    assert_eq!(
        ask(&mut to_replica, &["EVAL", read, "1", "a"]).await,
        Frame::bulk("1")
    );

    // A failover while a write is on its way: the promoted replica never gets it.
    assert_eq!(ask(&mut to_master, &["SET", "c", "3"]).await, Frame::ok());
    master.stop_replicating();
    replica.promote();
    let waited = tokio::time::Instant::now();
    assert_eq!(
        ask(&mut to_master, &["WAIT", "1", "50"]).await,
        Frame::Integer(0)
    );
    assert_eq!(
        waited.elapsed(),
        Duration::from_millis(50),
        "no replica: the timeout"
    );
    assert_eq!(ask(&mut to_replica, &["GET", "c"]).await, Frame::Nil);
    assert_eq!(ask(&mut to_replica, &["SET", "d", "4"]).await, Frame::ok());

    // The Sentinel.
    let sentinel = Server::sentinel(Clock::ticking_from(epoch_us), "locks", "sim-redis-1:6379");
    let (mut asker, mut listener) = (Wire::new(sentinel.connect()), Wire::new(sentinel.connect()));
    let fields = |frame: Frame| -> HashMap<String, String> {
        bulks(frame)
            .chunks(2)
            .map(|kv| {
                (
                    String::from_utf8_lossy(&kv[0]).into_owned(),
                    String::from_utf8_lossy(&kv[1]).into_owned(),
                )
            })
            .collect()
    };
    let answer = fields(ask(&mut asker, &["SENTINEL", "MASTER", "locks"]).await);
    assert_eq!(
        (
            answer["ip"].as_str(),
            answer["port"].as_str(),
            answer["config-epoch"].as_str()
        ),
        ("sim-redis-1", "6379", "1")
    );
    listener.send(&args(&["SUBSCRIBE", "+switch-master"])).await;
    listener.read().await;
    assert_eq!(sentinel.listeners("+switch-master"), 1);
    sentinel.announce_master("sim-redis-2:6379");
    assert_eq!(
        listener.read().await,
        Frame::Array(vec![
            Frame::bulk("message"),
            Frame::bulk("+switch-master"),
            Frame::bulk("locks sim-redis-1 6379 sim-redis-2 6379"),
        ])
    );
    let answer = fields(ask(&mut asker, &["SENTINEL", "MASTER", "locks"]).await);
    assert_eq!(
        (answer["ip"].as_str(), answer["config-epoch"].as_str()),
        ("sim-redis-2", "2")
    );

    // The old master rejoins as the new one's replica: its own last write is gone.
    replica.replicate_to(&master, Duration::from_millis(20));
    assert_eq!(ask(&mut to_master, &["GET", "c"]).await, Frame::Nil);
    assert_eq!(ask(&mut to_master, &["GET", "d"]).await, Frame::bulk("4"));
    assert!(refused(ask(&mut to_master, &["SET", "e", "5"]).await));
    assert!(master.gaps().is_empty() && replica.gaps().is_empty() && sentinel.gaps().is_empty());
}
