//! A Redis node that forgot its data (restarted without persistence, `FLUSHALL`, an empty
//! replica promoted by Sentinel): every
//! gateway on it notices (a marker per node) and holds new grants back for the longest lease
//! granted there, so that no lock granted before the loss is granted again before its lease
//! ends; then grants resume by themselves (see `backend::data_loss`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use lockgate::client::Answer;
use serde_json::json;

use crate::support::answers::Answered;
use crate::support::eventually;
use crate::support::gateway::{Gateway, cluster_config, redis_config, sentinel_config};
use crate::support::redis::{MASTER, RedisCluster, RedisServer, SentinelGroup};

/// The holders' lease.
const TTL: Duration = Duration::from_secs(3);
/// The holders' lease across a Sentinel failover, which takes seconds by itself.
const FAILOVER_TTL: Duration = Duration::from_secs(20);

/// A lock held when the node forgot: until when its holder counts on it.
struct Held {
    name: String,
    /// The holder's request was sent then: its lease ends no earlier than this plus `TTL`
    /// (the gateway counts it from before it asked Redis).
    until: Instant,
}

/// Four locks with `ttl` leases, taken through each gateway in turn.
async fn take_locks(gateways: &[&Gateway], prefix: &str, ttl: Duration) -> Vec<Held> {
    let mut held = Vec::new();
    for i in 0..4 {
        let name = format!("{prefix}:{i}");
        let sent = Instant::now();
        let grant = gateways[i % gateways.len()]
            .locks()
            .acquire(&name, json!({"ttl_ms": ttl.as_millis()}))
            .await
            .done(201);
        held.push(Held {
            name,
            until: sent + Duration::from_millis(grant.ttl_ms),
        });
    }
    held
}

/// What the contenders saw: per name, when the request that got it was sent; and how many
/// answers were 503 `grants-held-back` with a `Retry-After`.
struct Contention {
    granted: HashMap<String, Instant>,
    held_back: usize,
}

/// Contenders try every held name through every gateway, without waiting, every 20 ms, until
/// each name was granted or 30 s passed.
async fn contend(gateways: &[&Gateway], held: &[Held]) -> Contention {
    let body = json!({"ttl_ms": 30_000});
    let mut seen = Contention {
        granted: HashMap::new(),
        held_back: 0,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.granted.len() < held.len() && Instant::now() < deadline {
        for lock in held {
            for gw in gateways {
                if seen.granted.contains_key(&lock.name) {
                    break;
                }
                let sent = Instant::now();
                let answer = gw.client().acquire(&lock.name, &body, None, None).await;
                match answer {
                    Ok(Answer::Done { status, .. }) if status == 201 => {
                        seen.granted.insert(lock.name.clone(), sent);
                    }
                    Ok(Answer::Refused {
                        status,
                        problem,
                        retry_after: Some(_),
                    }) if status == 503 && problem.slug() == "grants-held-back" => {
                        seen.held_back += 1;
                    }
                    _ => {}
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    seen
}

/// No name granted again before its holder's lease ended, every name granted again after.
fn assert_no_early_grant(held: &[Held], seen: &Contention) {
    for lock in held {
        let Some(&granted) = seen.granted.get(&lock.name) else {
            panic!("{} was not granted again within 30 s", lock.name);
        };
        assert!(
            granted >= lock.until,
            "{} was granted again {} ms before its holder's lease ended",
            lock.name,
            (lock.until - granted).as_millis()
        );
    }
    assert!(seen.held_back > 0, "no acquire answered grants-held-back");
}

/// The `lockgate_redis_data_losses_total` of a gateway.
async fn losses(gw: &Gateway) -> u64 {
    gw.metrics_text()
        .await
        .lines()
        .find_map(|line| {
            line.strip_prefix("lockgate_redis_data_losses_total ")?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Redis restarted without persistence under two gateways: both notice (at their reconnect),
/// no lock is granted again before its lease ends, and grants resume by themselves.
#[tokio::test(flavor = "multi_thread")]
async fn a_restart_without_persistence_holds_grants_back_for_the_longest_lease() {
    let mut redis = RedisServer::start();
    let one = Gateway::start(redis_config(&redis.url())).await;
    let two = Gateway::start(redis_config(&redis.url())).await;
    let held = take_locks(&[&one, &two], "restart", TTL).await;
    tokio::task::block_in_place(|| redis.restart());
    let seen = contend(&[&one, &two], &held).await;
    assert_no_early_grant(&held, &seen);
    for gw in [&one, &two] {
        assert_eq!(losses(gw).await, 1);
    }
}

/// `FLUSHALL` under two gateways whose connections stay up: each notices at its periodic look
/// (within a second), and from then on no lock is granted again before its lease ends.
#[tokio::test(flavor = "multi_thread")]
async fn a_flushall_is_noticed_by_every_gateway() {
    let redis = RedisServer::start();
    let one = Gateway::start(redis_config(&redis.url())).await;
    let two = Gateway::start(redis_config(&redis.url())).await;
    let held = take_locks(&[&one, &two], "flushed", TTL).await;
    let mut conn = redis.conn().await;
    let () = redis::cmd("FLUSHALL")
        .query_async(&mut conn)
        .await
        .expect("FLUSHALL");
    for gw in [&one, &two] {
        eventually(Duration::from_secs(2), "the gateway noticed", || async {
            (losses(gw).await == 1).then_some(())
        })
        .await;
    }
    let seen = contend(&[&one, &two], &held).await;
    assert_no_early_grant(&held, &seen);
}

/// A restart *with* the data (AOF) is no loss: nothing is held back, the locks are still held.
#[tokio::test(flavor = "multi_thread")]
async fn a_restart_with_its_data_holds_nothing_back() {
    let mut redis = RedisServer::start_durable();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let held = take_locks(&[&gw], "durable", TTL).await;
    tokio::task::block_in_place(|| redis.restart());
    gw.locks()
        .acquire("durable:free", json!({"ttl_ms": 1000}))
        .await
        .done(201);
    for lock in &held {
        assert_eq!(gw.inspect(&lock.name).await.status(), 200, "{}", lock.name);
    }
    assert_eq!(losses(&gw).await, 0);
}

/// Sentinel promotes a replica that has lost its copy (as one restarted without persistence
/// would have, had the master died before it synced again): both gateways find the new master
/// without the marker and hold grants back; no lock is granted again before its lease ends.
#[tokio::test(flavor = "multi_thread")]
async fn a_sentinel_promoting_an_empty_replica_holds_grants_back() {
    let mut group = SentinelGroup::start();
    let one = Gateway::start(sentinel_config(&group.urls(), MASTER)).await;
    let two = Gateway::start(sentinel_config(&group.urls(), MASTER)).await;
    let held = take_locks(&[&one, &two], "promoted", FAILOVER_TTL).await;
    // The master's marker knows the 20 s leases before the replica loses its copy, so that no
    // later write of the marker reaches the replica.
    let lease_ms = FAILOVER_TTL.as_millis().to_string();
    eventually(
        Duration::from_secs(5),
        "the marker has the lease",
        || async {
            let seen: Option<String> = group
                .master
                .query(redis::cmd("HGET").arg("lockgate:marker").arg("lease_ms"))
                .ok()?;
            (seen.as_deref() == Some(lease_ms.as_str())).then_some(())
        },
    )
    .await;
    let replica = &group.replica;
    let () = replica
        .query(
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("replica-read-only")
                .arg("no"),
        )
        .expect("CONFIG SET");
    let () = replica.query(&redis::cmd("FLUSHALL")).expect("FLUSHALL");
    tokio::task::block_in_place(|| group.master.stop());
    let replica_port = group.replica.port();
    let promoted = eventually(
        Duration::from_secs(30),
        "the sentinels promote the replica",
        || async { (group.master_port() == Some(replica_port)).then(Instant::now) },
    )
    .await;
    // Meaningful only if the leases were still running at the promotion.
    assert!(
        held.iter()
            .all(|lock| lock.until > promoted + Duration::from_secs(2)),
        "the failover took longer than the leases"
    );
    let seen = contend(&[&one, &two], &held).await;
    assert_no_early_grant(&held, &seen);
    drop(group.sentinels);
}

/// A Cluster master that forgot its data (`FLUSHALL` on it): the gateway notices at its next
/// look; the names of that master's slots are held back (none granted again before its lease
/// ended), while names on the other masters are granted as usual.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_master_that_forgot_holds_back_its_own_names_only() {
    let cluster = RedisCluster::start(3, 0);
    let gw = Gateway::start(cluster_config(&cluster.seed_urls())).await;
    let held = take_locks(&[&gw], "sharded", TTL).await;
    let on = |node: &RedisServer, name: &str| {
        node.query::<bool>(redis::cmd("EXISTS").arg(format!("lockgate:{{{name}}}")))
            .unwrap_or(false)
    };
    let forgetful = cluster
        .nodes
        .iter()
        .find(|node| held.iter().any(|lock| on(node, &lock.name)))
        .expect("a master holds a lock");
    let lost: Vec<Held> = held
        .into_iter()
        .filter(|lock| on(forgetful, &lock.name))
        .collect();
    let () = forgetful.query(&redis::cmd("FLUSHALL")).expect("FLUSHALL");
    eventually(Duration::from_secs(2), "the gateway noticed", || async {
        (losses(&gw).await == 1).then_some(())
    })
    .await;
    // Fresh names spread over the masters: those on the forgetful one are held back, the
    // others granted.
    let (mut granted, mut held_back) = (0, 0);
    for i in 0..24 {
        let answer = gw
            .locks()
            .acquire(&format!("fresh:{i}"), json!({"ttl_ms": 1000}))
            .await;
        match answer.status() {
            201 => granted += 1,
            _ => {
                answer.refused(503, "grants-held-back");
                held_back += 1;
            }
        }
    }
    assert!(
        granted > 0 && held_back > 0,
        "{granted} granted, {held_back} held back"
    );
    let seen = contend(&[&gw], &lost).await;
    assert_no_early_grant(&lost, &seen);
}
