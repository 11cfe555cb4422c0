//! High availability and scale-out on Redis itself, against real processes: Sentinel
//! failover, Redis Cluster, and Redlock over independent masters.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::answers::Answered;
use crate::support::gateway::{
    Gateway, cluster_config, redis_config, redlock_config, sentinel_config,
};
use crate::support::redis::{MASTER, RedisCluster, RedisServer, SentinelGroup, signal};
use crate::support::{check_mutual_exclusion, eventually, key_exists};

/// Sentinel: the master is killed; the gateway serves again within 10 s of the failover with
/// no restart, fences issued afterwards exceed every fence issued before, and a lock taken
/// before (and replicated) can still be released.
#[tokio::test]
async fn sentinel_failover_is_followed_without_a_restart() {
    let mut group = SentinelGroup::start();
    let gw = Gateway::start(sentinel_config(&group.urls(), MASTER)).await;
    let locks = gw.locks();
    let replicated = json!({"ttl_ms": 60000, "replicas": 1, "replica_timeout_ms": 2000});
    let survivor = locks.acquire("survivor", replicated).await.done(201);
    assert_eq!(survivor.replicas_acked, Some(1));
    let mut before = vec![survivor.fence];
    for i in 0..20 {
        let name = format!("before:{i}");
        before.push(locks.acquire(&name, json!({})).await.done(201).fence);
    }
    let old_master = group.master.port();
    assert_eq!(group.master_port(), Some(old_master));

    group.master.stop();
    let failover = eventually(
        Duration::from_secs(30),
        "the sentinels promote the replica",
        || async { (group.master_port() == Some(group.replica.port())).then(Instant::now) },
    )
    .await;
    let (served, grant) = eventually(
        Duration::from_secs(10),
        "the gateway serves after the failover",
        || async {
            let answer = locks.acquire("after", json!({})).await;
            (answer.status() == 201).then(|| (Instant::now(), answer.done(201)))
        },
    )
    .await;
    assert!(
        served - failover <= Duration::from_secs(10),
        "served {:?} after the failover",
        served - failover
    );

    let highest_before = before.iter().copied().max().expect("fences");
    assert!(
        grant.fence > highest_before,
        "fence {} after the failover, {highest_before} before",
        grant.fence
    );
    for i in 0..5 {
        let grant = locks.acquire(&format!("after:{i}"), json!({})).await;
        assert!(grant.done(201).fence > highest_before);
    }
    assert_eq!(
        locks.release("survivor", &survivor.token).await.status(),
        204,
        "the replicated lock survived"
    );
    drop(group.sentinels);
}

/// Sentinel: when the Sentinels promote the replica while the old master stays up and keeps
/// accepting writes (here it refuses to be demoted, as a master cut off from the Sentinels
/// would), the gateway still moves to the new master, on the `+switch-master` announcement.
/// Without it, its writes would go on landing on the old master and be lost.
#[tokio::test]
async fn sentinel_switch_is_followed_while_the_old_master_still_answers() {
    let group = SentinelGroup::start();
    let gw = Gateway::start(sentinel_config(&group.urls(), MASTER)).await;
    let locks = gw.locks();
    locks.acquire("before", json!({})).await.done(201);

    // The old master cannot be told to become a replica: it goes on serving as a master.
    let _: () = group
        .master
        .query(
            redis::cmd("ACL")
                .arg("SETUSER")
                .arg("default")
                .arg("-replicaof")
                .arg("-slaveof"),
        )
        .expect("ACL SETUSER");
    let _: () = group.sentinels[0]
        .query(redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER))
        .expect("SENTINEL FAILOVER");
    eventually(
        Duration::from_secs(30),
        "the sentinels promote the replica",
        || async { (group.master_port() == Some(group.replica.port())).then_some(()) },
    )
    .await;

    let new_master = group.replica.conn().await;
    eventually(
        Duration::from_secs(10),
        "an acquire lands on the new master",
        || async {
            let name = format!("after:{}", rand_u64());
            let answer = locks.acquire(&name, json!({})).await;
            let status = answer.status();
            assert!(status == 201 || status == 503, "{answer:?}");
            (status == 201 && key_exists(&new_master, &format!("lockgate:{{{name}}}")).await)
                .then_some(())
        },
    )
    .await;
    let role: Vec<redis::Value> = group.master.query(&redis::cmd("ROLE")).expect("ROLE");
    assert_eq!(
        role.first(),
        Some(&redis::Value::BulkString(b"master".to_vec())),
        "the old master was meant to stay a master"
    );
}

/// Sentinel: mutual exclusion under load.
#[tokio::test]
async fn sentinel_mutual_exclusion_under_load() {
    let group = SentinelGroup::start();
    let gw = Gateway::start(sentinel_config(&group.urls(), MASTER)).await;
    check_mutual_exclusion(&gw, 32, 2000, &["a", "b", "c", "d"]).await;
}

/// Cluster: 1,000 locks with random names spread over every master; acquire, renew, inspect and
/// release all work; and WAIT, with a replica per master, counts one acknowledgement. (The
/// leases are long: on a loaded machine the test itself takes minutes to go through them.)
#[tokio::test]
async fn cluster_serves_locks_in_every_slot() {
    let cluster = RedisCluster::start(3, 1);
    let gw = Gateway::start(cluster_config(&cluster.seed_urls())).await;
    let locks = gw.locks();
    let names: Vec<String> = (0..1000)
        .map(|i| format!("c{i}:{:x}", rand_u64()))
        .collect();
    let mut tokens = Vec::new();
    for chunk in names.chunks(100) {
        let grants = futures_util::future::join_all(
            chunk
                .iter()
                .map(|name| locks.acquire(name, json!({"ttl_ms": 600_000}))),
        );
        for (name, grant) in chunk.iter().zip(grants.await) {
            let grant = grant.done(201);
            tokens.push((name.clone(), grant.token, grant.fence));
        }
    }
    for master in cluster.masters() {
        let keys: i64 = master.query(&redis::cmd("DBSIZE")).expect("DBSIZE");
        assert!(
            keys > 100,
            "master {} holds only {keys} keys",
            master.port()
        );
    }
    for (name, token, granted_fence) in &tokens {
        let renewed = locks
            .renew(name, token, json!({"ttl_ms": 600_000}))
            .await
            .done(200);
        assert_eq!(renewed.fence, *granted_fence, "{name}");
        let seen = locks.inspect(name).await.done(200);
        assert_eq!(seen.fence, Some(*granted_fence), "{name}");
        assert_eq!(locks.release(name, token).await.status(), 204, "{name}");
    }
    for name in ["wait:a", "wait:b", "wait:c", "wait:d", "wait:e", "wait:f"] {
        let body = json!({"replicas": 1, "replica_timeout_ms": 2000});
        let grant = locks.acquire(name, body).await.done(201);
        assert_eq!(grant.replicas_acked, Some(1), "{name}: {grant:?}");
    }
}

/// Cluster: mutual exclusion under load.
#[tokio::test]
async fn cluster_mutual_exclusion_under_load() {
    let cluster = RedisCluster::start(3, 0);
    let gw = Gateway::start(cluster_config(&cluster.seed_urls())).await;
    check_mutual_exclusion(&gw, 32, 2000, &["a", "b", "c", "d"]).await;
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(Instant::now())
}

const NODE_TIMEOUT: Duration = Duration::from_millis(50);

/// Redlock over three nodes.
struct Redlock {
    nodes: Vec<RedisServer>,
    gw: Gateway,
}

impl Redlock {
    /// Three nodes with their data kept across a restart (AOF), as Redlock's nodes should run:
    /// a node that comes back empty is kept out of grants for a while (tests/it/data_loss.rs),
    /// and these tests are about majorities.
    async fn start() -> Self {
        let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start_durable()).collect();
        let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
        let gw = Gateway::start(redlock_config(&urls, NODE_TIMEOUT)).await;
        Self { nodes, gw }
    }

    /// Makes exactly the nodes in `up` (a bit mask) run.
    fn set_up(&mut self, up: u8) {
        for (i, node) in self.nodes.iter_mut().enumerate() {
            let wanted = up & (1 << i) != 0;
            if wanted && !node.is_running() {
                node.restart();
            } else if !wanted && node.is_running() {
                node.stop();
            }
        }
    }

    /// Keys left on the running nodes.
    fn keys(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|node| node.is_running())
            .flat_map(|node| {
                node.query::<Vec<String>>(redis::cmd("KEYS").arg("lockgate:{*}"))
                    .expect("KEYS")
            })
            .filter(|key| !key.ends_with(":fence"))
            .collect()
    }
}

/// Redlock: of all 8 patterns of three nodes up or down, acquire succeeds exactly when two or
/// more are up; a failed acquire leaves no key behind; fences keep increasing throughout.
#[tokio::test]
async fn redlock_needs_a_majority_and_undoes_partial_grants() {
    let mut redlock = Redlock::start().await;
    let locks = redlock.gw.locks();
    let mut last_fence = 0;
    // Go round twice, so that every node also comes back after being down.
    for up in (0u8..8).chain(0u8..8) {
        redlock.set_up(up);
        let majority = up.count_ones() >= 2;
        let name = format!("pattern:{up}");
        let answer = locks.acquire(&name, json!({"ttl_ms": 10000})).await;
        if majority {
            assert_eq!(answer.status(), 201, "nodes up {up:03b}: {answer:?}");
            let grant = answer.done(201);
            assert!(
                grant.fence > last_fence,
                "nodes up {up:03b}: fence {} after {last_fence}",
                grant.fence
            );
            last_fence = grant.fence;
            assert_eq!(
                locks.release(&name, &grant.token).await.status(),
                204,
                "nodes up {up:03b}"
            );
        } else {
            answer.refused(503, "backend-unavailable");
            assert!(
                redlock.keys().is_empty(),
                "nodes up {up:03b}: partial grant left {:?}",
                redlock.keys()
            );
        }
    }
}

/// Redlock: a lock held by someone else on a majority is refused and leaves no partial grant,
/// even when the requester got a node to itself.
#[tokio::test]
async fn redlock_refusal_undoes_the_minority_grant() {
    let redlock = Redlock::start().await;
    // Someone else holds the lock on two of the three nodes.
    for node in &redlock.nodes[..2] {
        let set: Option<String> = node
            .query(
                redis::cmd("SET")
                    .arg("lockgate:{split}")
                    .arg("other")
                    .arg("PX")
                    .arg(5000),
            )
            .expect("SET");
        assert_eq!(set.as_deref(), Some("OK"));
    }
    redlock
        .gw
        .locks()
        .acquire("split", json!({}))
        .await
        .refused(409, "lock-held");
    let third: Option<String> = redlock.nodes[2]
        .query(redis::cmd("GET").arg("lockgate:{split}"))
        .expect("GET");
    assert_eq!(third, None, "the grant on the third node was undone");
}

/// Redlock: with one node frozen (SIGSTOP), acquires still succeed, paying the per-node
/// timeout and not more.
#[tokio::test]
async fn redlock_survives_a_frozen_node_within_the_node_timeout() {
    let redlock = Redlock::start().await;
    let locks = redlock.gw.locks();
    locks.acquire("warm", json!({})).await.done(201);
    signal(&redlock.nodes[1], "-STOP");
    let mut slowest = Duration::ZERO;
    for i in 0..5 {
        let started = Instant::now();
        let answer = locks.acquire(&format!("frozen:{i}"), json!({})).await;
        slowest = slowest.max(started.elapsed());
        answer.done(201);
    }
    signal(&redlock.nodes[1], "-CONT");
    // The frozen node costs its 50 ms node timeout, not the 1 s Redis timeout of a request;
    // the rest is two local round trips (acquire, then raising the fence), with room for a
    // loaded CI machine.
    assert!(
        slowest < NODE_TIMEOUT + Duration::from_millis(450),
        "slowest acquire took {slowest:?}"
    );
}

/// Redlock: mutual exclusion under load.
#[tokio::test]
async fn redlock_mutual_exclusion_under_load() {
    let redlock = Redlock::start().await;
    check_mutual_exclusion(&redlock.gw, 32, 2000, &["a", "b", "c", "d"]).await;
}

/// Standalone: mutual exclusion under load, the baseline the other modes are held to.
#[tokio::test]
async fn standalone_mutual_exclusion_under_load() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    check_mutual_exclusion(&gw, 32, 2000, &["a", "b", "c", "d"]).await;
}

/// Redlock: a release is 204 only when a majority released, and 404/409 only when a majority
/// said so. With one node releasing, one holding another token (a stale partial grant) and one
/// frozen, nothing is known for sure: the answer is 503 (a release is safe to retry), never a
/// 404 that tells the rightful holder it held nothing.
#[tokio::test]
async fn redlock_release_without_a_majority_answer_is_503() {
    let redlock = Redlock::start().await;
    let locks = redlock.gw.locks();
    let grant = locks.acquire("split", json!({})).await.done(201);
    let _: () = redlock.nodes[1]
        .query(
            redis::cmd("SET")
                .arg("lockgate:{split}")
                .arg("someone-else")
                .arg("PX")
                .arg(30_000),
        )
        .expect("SET");
    signal(&redlock.nodes[2], "-STOP");
    let released = locks.release("split", &grant.token).await;
    signal(&redlock.nodes[2], "-CONT");
    released.refused(503, "backend-unavailable");
}

/// Sentinel: the gateway hears of a switch from any Sentinel, not only the one it listened to
/// first, and once it has, every connection (shared, WAIT pool) moves to the new master, even
/// when the WAIT pool resolved it first. Here the first configured Sentinel stops monitoring
/// the group (so it never announces the switch) and the old master, which cannot be demoted,
/// still answers and accepts writes: no request may be served by it once the switch is known.
#[tokio::test]
async fn sentinel_a_switch_announced_by_any_sentinel_moves_every_connection() {
    let group = SentinelGroup::start();
    let mut config = sentinel_config(&group.urls(), MASTER);
    config.wait_pool_size = 1;
    let gw = Gateway::start(config).await;
    let locks = gw.locks();
    let waited = json!({"replicas": 1, "replica_timeout_ms": 200});
    locks.acquire("before:wait", waited.clone()).await.done(201);
    locks.acquire("before", json!({})).await.done(201);

    let _: () = group
        .master
        .query(
            redis::cmd("ACL")
                .arg("SETUSER")
                .arg("default")
                .arg("-replicaof")
                .arg("-slaveof"),
        )
        .expect("ACL SETUSER");
    let _: () = group.sentinels[0]
        .query(redis::cmd("SENTINEL").arg("REMOVE").arg(MASTER))
        .expect("SENTINEL REMOVE");
    let _: () = group.sentinels[1]
        .query(redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER))
        .expect("SENTINEL FAILOVER");
    let new_port = group.replica.port();
    eventually(
        Duration::from_secs(30),
        "the sentinels promote the replica",
        || async {
            let addr: Vec<String> = group.sentinels[1]
                .query(
                    redis::cmd("SENTINEL")
                        .arg("GET-MASTER-ADDR-BY-NAME")
                        .arg(MASTER),
                )
                .unwrap_or_default();
            (addr.get(1).and_then(|p| p.parse::<u16>().ok()) == Some(new_port)).then_some(())
        },
    )
    .await;
    // WAIT requests that need new dedicated connections, resolved through the Sentinels.
    let a = locks.acquire("during:wait:a", waited.clone());
    let b = locks.acquire("during:wait:b", waited.clone());
    let _ = futures_util::future::join(a, b).await;

    let new_master = group.replica.conn().await;
    eventually(
        Duration::from_secs(10),
        "acquires land on the new master",
        || async {
            let name = format!("after:{}", rand_u64());
            let status = locks.acquire(&name, json!({})).await.status();
            (status == 201 && key_exists(&new_master, &format!("lockgate:{{{name}}}")).await)
                .then_some(())
        },
    )
    .await;
    // From then on, none lands on the old master.
    let old_master = group.master.conn().await;
    for i in 0..20 {
        let name = format!("settled:{i}:{}", rand_u64());
        let body = if i % 2 == 0 {
            json!({})
        } else {
            waited.clone()
        };
        let answer = locks.acquire(&name, body).await;
        let status = answer.status();
        assert!(status == 201 || status == 503, "{answer:?}");
        assert!(
            !key_exists(&old_master, &format!("lockgate:{{{name}}}")).await,
            "{name} landed on the old master"
        );
    }
}
