//! Fair queues (`"fair": true`): grants in queue order across every gateway, higher `priority`
//! first then arrival; waiters of a gateway that dies or is cut off skipped within the stated
//! bound; a waiter whose client hangs up gone at once; no queue key left behind. On the
//! memory backend, standalone Redis, Sentinel and Cluster; Redlock answers 501.

use std::time::Duration;

use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::support::answers::Answered;
use crate::support::gateway::{
    Gateway, cluster_config, redis_config, redlock_trio, sentinel_config,
};
use crate::support::process::ServerProcess;
use crate::support::proxy::{LatencyProxy, Partition};
use crate::support::redis::{MASTER, RedisCluster, RedisServer, SentinelGroup};
use crate::support::{assert_problem, eventually, status_json};

/// How long after a gateway was last heard from its waiters stop holding a queue up:
/// `backend::queue::{LIVENESS, RECHECK}` (2 s + 0.5 s), as docs/api.md states it, plus what a
/// loaded test machine needs for a round trip and a timer.
const DEAD_GATEWAY_BOUND: Duration = Duration::from_millis(2_500 + 500);

/// A fair waiter for `name` sent to `on`: when granted it releases the lock at once, and
/// answers its fence.
fn waiter(on: &Gateway, name: &str, priority: u8, wait_ms: u64) -> JoinHandle<u64> {
    let body = json!({"fair": true, "priority": priority, "wait_ms": wait_ms, "ttl_ms": 10_000});
    waiter_asking(on, name, body)
}

/// A waiter for `name` sent to `on` with the acquire `body`, as [`waiter`].
fn waiter_asking(on: &Gateway, name: &str, body: serde_json::Value) -> JoinHandle<u64> {
    let (locks, name) = (on.locks(), name.to_owned());
    tokio::spawn(async move {
        let grant = locks.acquire(&name, body).await.done(201);
        locks.release(&name, &grant.token).await.done(204);
        grant.fence
    })
}

/// The `queued` count `GET /locks/{name}` shows (0 when absent).
async fn queued(gw: &Gateway, name: &str) -> u64 {
    let (_, seen) = status_json(gw.inspect(name).await).await;
    seen["queued"].as_u64().unwrap_or(0)
}

/// Waits until `name`'s queue holds `n` waiters, as `gw` shows it.
async fn until_queued(gw: &Gateway, name: &str, n: u64) {
    eventually(Duration::from_secs(5), &format!("{n} queued"), || async {
        (queued(gw, name).await == n).then_some(())
    })
    .await;
}

/// Sends `n` fair waiters (priority 0, waiting up to a minute) to `on`, each queued (as
/// `seen_by` shows the queue, which holds `ahead` before them) before the next is sent.
async fn queue_up(
    on: &Gateway,
    seen_by: &Gateway,
    name: &str,
    n: u64,
    ahead: u64,
) -> Vec<JoinHandle<u64>> {
    let mut waiters = Vec::new();
    for i in 0..n {
        waiters.push(waiter(on, name, 0, 60_000));
        until_queued(seen_by, name, ahead + i + 1).await;
    }
    waiters
}

/// Takes `name` on `gw` for a minute: the holder the waiters queue behind. Its token.
async fn hold(gw: &Gateway, name: &str) -> String {
    let holder = gw.locks().acquire(name, json!({"ttl_ms": 60_000})).await;
    holder.done(201).token
}

/// Releases `holder`'s lock `name` on `gw` and checks that `next`, the first live waiter
/// behind a dead or cut-off gateway's, is granted within [`DEAD_GATEWAY_BOUND`].
async fn next_granted_within_the_bound(
    gw: &Gateway,
    name: &str,
    holder: &str,
    next: JoinHandle<u64>,
) {
    let freed = Instant::now();
    gw.locks().release(name, holder).await.done(204);
    tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .expect("the next live waiter is granted")
        .expect("waiter task");
    let took = freed.elapsed();
    eprintln!("the next live waiter was granted {took:?} after the lock freed");
    assert!(
        took <= DEAD_GATEWAY_BOUND,
        "granted {took:?} after the lock freed"
    );
}

/// Waits until no queue key is left in `redis` (a place given up is removed in the
/// background, and a keyed one a second later: allow for both).
async fn no_queue_left(redis: &RedisServer) {
    eventually(Duration::from_secs(3), "no queue key left", || async {
        queue_keys(redis).is_empty().then_some(())
    })
    .await;
}

/// While a holder keeps `name`, sends one fair waiter per `(gateway, priority)` of `arrivals`,
/// in order, each queued before the next is sent; then releases the holder and answers the
/// waiters' indices in the order they were granted (their fences' order).
async fn grant_order(gateways: &[&Gateway], name: &str, arrivals: &[(usize, u8)]) -> Vec<usize> {
    let first = gateways[0];
    let holder = hold(first, name).await;
    let mut waiters = Vec::new();
    for (i, &(gw, priority)) in arrivals.iter().enumerate() {
        waiters.push(waiter(gateways[gw], name, priority, 60_000));
        until_queued(first, name, i as u64 + 1).await;
    }
    first.locks().release(name, &holder).await.done(204);
    let mut fences = Vec::new();
    for (i, waiter) in waiters.into_iter().enumerate() {
        let fence = tokio::time::timeout(Duration::from_secs(30), waiter)
            .await
            .expect("every waiter is granted")
            .expect("waiter task");
        fences.push((fence, i));
    }
    fences.sort_unstable();
    fences.into_iter().map(|(_, i)| i).collect()
}

/// The order a fair queue owes `arrivals`: higher priority first, then arrival.
fn owed(arrivals: &[(usize, u8)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..arrivals.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(arrivals[i].1));
    order
}

/// `n` arrivals spread over `gateways` in turn, all at priority 0, or at mixed priorities.
fn arrivals(n: usize, gateways: usize, mixed: bool) -> Vec<(usize, u8)> {
    (0..n)
        .map(|i| (i % gateways, if mixed { ((i * 7) % 10) as u8 } else { 0 }))
        .collect()
}

/// Pairs granted out of the order owed.
fn inversions(granted: &[usize], owed: &[usize]) -> usize {
    let rank: Vec<usize> = {
        let mut rank = vec![0; owed.len()];
        for (place, &i) in owed.iter().enumerate() {
            rank[i] = place;
        }
        rank
    };
    let mut count = 0;
    for a in 0..granted.len() {
        for b in a + 1..granted.len() {
            if rank[granted[a]] > rank[granted[b]] {
                count += 1;
            }
        }
    }
    count
}

/// Keys of fair queues left in `redis`.
fn queue_keys(redis: &RedisServer) -> Vec<String> {
    redis
        .query(redis::cmd("KEYS").arg("*:queue*"))
        .expect("KEYS")
}

async fn in_order(gateways: &[&Gateway], name: &str, arrivals: &[(usize, u8)]) {
    let granted = grant_order(gateways, name, arrivals).await;
    let owed = owed(arrivals);
    assert_eq!(
        inversions(&granted, &owed),
        0,
        "granted {granted:?}, owed {owed:?}"
    );
}

/// The acceptance's walk: 60 waiters on 3 gateways over one Redis, granted in exactly their
/// arrival order; then 60 at mixed priorities, higher first, then arrival. No queue key is
/// left.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_waiters_on_three_gateways_are_granted_in_queue_order() {
    let redis = RedisServer::start();
    let gateways = [
        Gateway::start(redis_config(&redis.url())).await,
        Gateway::start(redis_config(&redis.url())).await,
        Gateway::start(redis_config(&redis.url())).await,
    ];
    let gateways: Vec<&Gateway> = gateways.iter().collect();
    in_order(&gateways, "fair:arrival", &arrivals(60, 3, false)).await;
    in_order(&gateways, "fair:priority", &arrivals(60, 3, true)).await;
    assert_eq!(queue_keys(&redis), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fair_queues_keep_their_order_on_sentinel_and_cluster() {
    let group = SentinelGroup::start();
    let sentinel = [
        Gateway::start(sentinel_config(&group.urls(), MASTER)).await,
        Gateway::start(sentinel_config(&group.urls(), MASTER)).await,
    ];
    in_order(
        &sentinel.iter().collect::<Vec<_>>(),
        "fair:sentinel",
        &arrivals(12, 2, true),
    )
    .await;

    let cluster = RedisCluster::start(3, 0);
    let gateways = [
        Gateway::start(cluster_config(&cluster.seed_urls())).await,
        Gateway::start(cluster_config(&cluster.seed_urls())).await,
    ];
    let gateways: Vec<&Gateway> = gateways.iter().collect();
    for name in ["fair:cluster:a", "fair:cluster:b", "fair:cluster:c"] {
        in_order(&gateways, name, &arrivals(8, 2, true)).await;
    }
    for master in cluster.masters() {
        assert_eq!(queue_keys(master), Vec::<String>::new());
    }
}

#[tokio::test]
async fn the_memory_store_queues_as_redis_does() {
    let gw = Gateway::dev().await;
    in_order(&[&gw], "fair:memory", &arrivals(20, 1, true)).await;
}

/// Redis's clock, in seconds.
fn redis_seconds(redis: &RedisServer) -> u64 {
    let (secs, _): (u64, u64) = redis.query(&redis::cmd("TIME")).expect("TIME");
    secs
}

/// A place in the queue of `name` written by hand, as `gateway`'s waiter 1 would take it at
/// `score` (with no description: as an older lockgate takes it).
fn place_by_hand(redis: &RedisServer, name: &str, gateway: &str, score: u64) {
    let mut zadd = redis::cmd("ZADD");
    zadd.arg(format!("lockgate:{{{name}}}:queue"))
        .arg(score)
        .arg(format!("{gateway}:1"));
    let _: () = redis.query(&zadd).expect("ZADD");
}

/// Sets `gateway`'s liveness deadline for the queue of `name` to `secs` (Redis's clock).
fn alive_until(redis: &RedisServer, name: &str, gateway: &str, secs: u64) {
    let mut hset = redis::cmd("HSET");
    hset.arg(format!("lockgate:{{{name}}}:queue:live"))
        .arg(gateway)
        .arg(secs * 1000);
    let _: () = redis.query(&hset).expect("HSET");
}

/// An acquire that is not fair does not overtake a queue of live waiters, and a queue of
/// waiters whose gateway is dead holds nothing up (written into Redis by hand: a member of a
/// gateway whose deadline is far ahead, then one whose deadline has passed).
#[tokio::test]
async fn unfair_acquires_do_not_overtake_a_live_queue() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let name = "fair:overtake";
    let secs = redis_seconds(&redis);
    place_by_hand(&redis, name, "feedfacefeedface", 1);
    alive_until(&redis, name, "feedfacefeedface", secs + 60);
    let locks = gw.locks();
    for body in [json!({}), json!({"fair": true}), json!({"wait_ms": 300})] {
        let problem = locks
            .acquire(name, body.clone())
            .await
            .refused(409, "lock-held");
        assert!(
            problem.retry_after_ms.expect("retry_after_ms") <= 100,
            "{body}: {problem:?}"
        );
    }
    alive_until(&redis, name, "feedfacefeedface", secs - 1);
    let grant = locks.acquire(name, json!({})).await;
    assert_eq!(
        grant.status(),
        201,
        "a dead gateway's waiter is skipped: {grant:?}"
    );
    assert_eq!(
        queue_keys(&redis),
        Vec::<String>::new(),
        "the emptied queue is deleted"
    );
}

/// A gateway holding 10 queued waiters is SIGKILLed: the next waiter, on another gateway, is
/// granted within the stated bound after the lock frees; nothing of the queue is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_gateways_waiters_are_skipped_within_the_bound() {
    let redis = RedisServer::start();
    let survivor = Gateway::start(redis_config(&redis.url())).await;
    let mut doomed = ServerProcess::start(&["--redis-url", &redis.url()], &[]).await;
    let name = "fair:killed";
    let holder = hold(&survivor, name).await;
    let mut doomed_waiters = Vec::new();
    for i in 0..10 {
        let client = doomed.client(None);
        doomed_waiters.push(tokio::spawn(async move {
            let body = json!({"fair": true, "wait_ms": 60_000});
            client.acquire(name, &body, None, None).await
        }));
        until_queued(&survivor, name, i + 1).await;
    }
    let next = queue_up(&survivor, &survivor, name, 1, 10).await.remove(0);
    doomed.signal("KILL");
    doomed.exit_within(Duration::from_secs(5)).await;
    next_granted_within_the_bound(&survivor, name, &holder, next).await;
    for waiter in doomed_waiters {
        assert!(
            waiter.await.expect("task").is_err(),
            "the killed gateway answered"
        );
    }
    assert_eq!(queue_keys(&redis), Vec::<String>::new());
}

/// The same with the gateway cut off from Redis by a partition (the test proxy): its waiters
/// are skipped within the bound; when the partition heals they take their places again and
/// are served, and the queue is gone afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_partitioned_gateways_waiters_are_skipped_within_the_bound() {
    let redis = RedisServer::start();
    let proxy = LatencyProxy::start(redis.port(), Duration::ZERO).await;
    let survivor = Gateway::start(redis_config(&redis.url())).await;
    let cut_off = Gateway::start(redis_config(&proxy.url())).await;
    let name = "fair:partitioned";
    let holder = hold(&survivor, name).await;
    let cut_off_waiters = queue_up(&cut_off, &survivor, name, 10, 0).await;
    let next = queue_up(&survivor, &survivor, name, 1, 10).await.remove(0);
    proxy.partition(Partition::Both);
    next_granted_within_the_bound(&survivor, name, &holder, next).await;
    proxy.partition(Partition::Healed);
    for waiter in cut_off_waiters {
        tokio::time::timeout(Duration::from_secs(30), waiter)
            .await
            .expect("the healed gateway's waiters are served")
            .expect("waiter task");
    }
    no_queue_left(&redis).await;
}

/// A client that hangs up while 5th in line is gone from the queue at once: while the lock is
/// still held (nothing else takes a live gateway's waiter out before it reaches the head).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_that_hangs_up_leaves_the_queue_at_once() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let name = "fair:hang-up";
    let holder = hold(&gw, name).await;
    let mut waiters = queue_up(&gw, &gw, name, 5, 0).await;
    let fifth = waiters.pop().expect("five");
    fifth.abort();
    let queue = format!("lockgate:{{{name}}}:queue");
    eventually(Duration::from_secs(5), "four left in the queue", || async {
        let left: u64 = redis.query(redis::cmd("ZCARD").arg(&queue)).expect("ZCARD");
        (left == 4).then_some(())
    })
    .await;
    let holding: Option<String> = redis
        .query(redis::cmd("GET").arg(format!("lockgate:{{{name}}}")))
        .expect("GET");
    assert_eq!(holding.as_deref(), Some(holder.as_str()), "still held");
    gw.locks().release(name, &holder).await.done(204);
    for waiter in waiters {
        waiter.await.expect("waiter task");
    }
    assert_eq!(queue_keys(&redis), Vec::<String>::new());
}

/// A place of the gateway's own whose waiter is gone (an attempt that reached Redis after its
/// waiter's leave, on another connection, or a failover that lost the leave: found by the
/// deterministic simulation) does not hold the queue up for as long as the gateway has other
/// waiters: told that it heads the queue of the free lock, the gateway takes it out.
#[tokio::test]
async fn a_place_whose_waiter_is_gone_is_taken_out() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let name = "fair:stray";
    let holder = hold(&gw, name).await;
    let waiting = waiter(&gw, name, 0, 20_000);
    until_queued(&gw, name, 1).await;
    // The gateway's identity, from its waiter's member (`<gateway>:0`, the first waiter).
    let queue = format!("lockgate:{{{name}}}:queue");
    let members: Vec<String> = redis
        .query(redis::cmd("ZRANGE").arg(&queue).arg(0).arg(-1))
        .expect("ZRANGE");
    let gateway = members[0].split(':').next().expect("a member").to_owned();
    assert_eq!(members, [format!("{gateway}:0")]);
    // Its waiter 1, which never was, ahead of waiter 0.
    place_by_hand(&redis, name, &gateway, 1);
    gw.locks().release(name, &holder).await.done(204);
    // Within a look or two (every 0.5 s), not the 20 s of the wait.
    tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("granted once the stray place is out")
        .expect("waiter task");
    no_queue_left(&redis).await;
}

/// What fair mode refuses: a priority without it, one out of range, a shared grant; and
/// Redlock, which keeps no queue.
#[tokio::test]
async fn fair_refusals() {
    let gw = Gateway::dev().await;
    for body in [
        json!({"priority": 3}),
        json!({"fair": true, "priority": 10}),
        json!({"fair": true, "mode": "shared"}),
    ] {
        gw.locks()
            .acquire("fair:refused", body)
            .await
            .refused(400, "invalid-request");
    }
    let (redlock, _nodes) = redlock_trio().await;
    for body in [
        json!({"fair": true}),
        json!({"fair": true, "wait_ms": 1000}),
    ] {
        redlock
            .locks()
            .acquire("fair:redlock", body)
            .await
            .refused(501, "not-offered");
    }
}

/// A waiter that gives up (its `wait_ms` ran out) answers 409 with the holder's lease left,
/// and leaves no place behind.
#[tokio::test]
async fn a_waiter_whose_wait_runs_out_leaves_no_place() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let locks = gw.locks();
    locks
        .acquire("fair:timeout", json!({"ttl_ms": 60_000}))
        .await
        .done(201);
    let problem = locks
        .acquire("fair:timeout", json!({"fair": true, "wait_ms": 300}))
        .await
        .refused(409, "lock-held");
    assert!(
        problem.retry_after_ms.expect("retry_after_ms") > 50_000,
        "{problem:?}"
    );
    no_queue_left(&redis).await;
}

/// `POST /locks/{name}/hold` of a fair waiter: the stream starts at once and tells the waiter
/// its place (`queued`, 1 = next) as it moves, then `acquired`; a wait that runs out ends the
/// stream with `not-acquired` and the problem a `POST` would have answered. On Redis, with the
/// waiters ahead on another gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fair_hold_stream_is_told_its_place() {
    let redis = RedisServer::start();
    let (gw, other) = (
        Gateway::start(redis_config(&redis.url())).await,
        Gateway::start(redis_config(&redis.url())).await,
    );
    let name = "fair:stream";
    let holder = hold(&gw, name).await;
    let mut ahead = Vec::new();
    for i in 0..2 {
        ahead.push(waiter(&other, name, 0, 60_000));
        until_queued(&gw, name, i + 1).await;
    }
    let body = json!({"fair": true, "wait_ms": 60_000, "ttl_ms": 10_000});
    let stream = gw.client().hold(name, &body).await;
    assert_eq!(stream.status(), 200, "a fair hold stream answers at once");
    let mut lines = stream.done(200);
    let first = lines.next().await.expect("a line");
    assert_eq!(
        first,
        json!({"event": "queued", "name": name, "position": 3})
    );
    let locks = gw.locks();
    locks.release(name, &holder).await.done(204);
    let mut last = 3;
    let acquired = loop {
        let line = lines.next().await.expect("a line");
        match line["event"].as_str() {
            Some("queued") => {
                let position = line["position"].as_u64().expect("position");
                assert!(position < last, "places only move forward: {line}");
                last = position;
            }
            Some("acquired") => break line,
            _ => panic!("unexpected {line}"),
        }
    };
    for waiter in ahead {
        let fence = waiter.await.expect("waiter task");
        assert!(
            fence < acquired["fence"].as_u64().unwrap(),
            "the waiters ahead went first"
        );
    }
    // Closing the stream releases the lock (in the background).
    drop(lines);

    // Held by someone else past the wait: the stream's last line says why.
    let holder = eventually(
        Duration::from_secs(5),
        "the stream's lock released",
        || async {
            let answer = locks.acquire(name, json!({"ttl_ms": 60_000})).await;
            (answer.status() == 201).then(|| answer.done(201))
        },
    )
    .await;
    let stream = gw
        .client()
        .hold(name, &json!({"fair": true, "wait_ms": 300}))
        .await;
    let mut lines = stream.done(200);
    assert_eq!(
        lines.next().await,
        Some(json!({"event": "queued", "name": name, "position": 1}))
    );
    let ended = lines.next().await.expect("a last line");
    assert_eq!(ended["event"], "not-acquired", "{ended}");
    assert_problem(409, &ended["problem"], 409, "lock-held");
    assert_eq!(lines.next().await, None, "the stream ends");
    locks.release(name, &holder.token).await.done(204);
    no_queue_left(&redis).await;
}

/// The places `GET /locks/{name}` shows at the head of the queue, in order: each one's owner
/// (if any), priority, whether it waits in the gateway asked, and how long it has had its
/// place (if said).
async fn places(gw: &Gateway, name: &str) -> Vec<(Option<String>, u64, bool, Option<u64>)> {
    let (status, seen) = status_json(gw.inspect(name).await).await;
    assert_eq!(status, 200, "{seen}");
    let Some(queue) = seen.get("queue") else {
        return Vec::new();
    };
    let place = |place: &serde_json::Value| {
        (
            place["owner"].as_str().map(str::to_owned),
            place["priority"].as_u64().expect("priority"),
            place["here"].as_bool().expect("here"),
            place["waited_ms"].as_u64(),
        )
    };
    queue
        .as_array()
        .expect("an array")
        .iter()
        .map(place)
        .collect()
}

/// The places as [`places`] shows them, without their times.
async fn whose(gw: &Gateway, name: &str) -> Vec<(Option<String>, u64, bool)> {
    let seen = places(gw, name).await;
    seen.into_iter()
        .map(|(owner, priority, here, _)| (owner, priority, here))
        .collect()
}

fn owned(owner: &str) -> Option<String> {
    Some(owner.to_owned())
}

/// Inspect shows the head of a fair queue whichever gateway its waiters wait in: each place's
/// owner, priority and time, and whether it waits in the gateway asked, in queue order. A
/// dead gateway's place is not shown, an older lockgate's is (without owner or time), and a
/// place given up leaves nothing of it in Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inspect_shows_the_fleets_queue() {
    let redis = RedisServer::start();
    let a = Gateway::start(redis_config(&redis.url())).await;
    let b = Gateway::start(redis_config(&redis.url())).await;
    let name = "fair:shown";
    let (queue, live) = (
        format!("lockgate:{{{name}}}:queue"),
        format!("lockgate:{{{name}}}:queue:live"),
    );
    let holder = hold(&a, name).await;
    let asking = |owner: Option<&str>, priority: u8| {
        let mut body = json!({"fair": true, "priority": priority, "wait_ms": 60_000});
        if let Some(owner) = owner {
            body["owner"] = json!(owner);
        }
        body
    };
    let first = waiter_asking(&a, name, asking(Some("pod-a"), 0));
    until_queued(&b, name, 1).await;
    let second = waiter_asking(&b, name, asking(Some("pod-b"), 5));
    until_queued(&b, name, 2).await;
    let third = waiter_asking(&b, name, asking(None, 0));
    until_queued(&b, name, 3).await;
    // Written by hand: a place of a dead gateway at the very head, and one of a live gateway
    // an older lockgate took (no description) at the very end.
    let secs = redis_seconds(&redis);
    let hand_written = [
        ("0000dead0000dead", 0u64, secs - 1),
        ("feedfacefeedface", 9 << 44 | 1 << 40, secs + 60),
    ];
    for (gateway, score, deadline) in hand_written {
        place_by_hand(&redis, name, gateway, score);
        alive_until(&redis, name, gateway, deadline);
    }

    let seen = places(&a, name).await;
    let shown: Vec<_> = seen.iter().map(|p| (p.0.clone(), p.1, p.2)).collect();
    assert_eq!(
        shown,
        [
            (owned("pod-b"), 5, false),
            (owned("pod-a"), 0, true),
            (None, 0, false),
            (None, 0, false),
        ],
        "as the first gateway shows the queue"
    );
    let times: Vec<Option<u64>> = seen.iter().map(|p| p.3).collect();
    let (b_time, a_time, third_time) = (times[0], times[1], times[2]);
    assert!(
        a_time >= b_time && b_time >= third_time && third_time.is_some(),
        "the first to come has waited longest: {times:?}"
    );
    assert!(a_time < Some(60_000), "{times:?}");
    assert_eq!(times[3], None, "an older lockgate's place says no time");
    assert_eq!(
        whose(&b, name).await,
        [
            (owned("pod-b"), 5, true),
            (owned("pod-a"), 0, false),
            (None, 0, true),
            (None, 0, false),
        ],
        "as the second gateway shows it"
    );

    first.abort();
    eventually(Duration::from_secs(5), "pod-a's place given up", || async {
        (whose(&b, name).await.len() == 3).then_some(())
    })
    .await;
    // Every description left in the liveness hash (a field with a `:`) is a queued place's.
    let fields: Vec<String> = redis.query(redis::cmd("HKEYS").arg(&live)).expect("HKEYS");
    let members: Vec<String> = redis
        .query(redis::cmd("ZRANGE").arg(&queue).arg(0).arg(-1))
        .expect("ZRANGE");
    let described: Vec<&String> = fields.iter().filter(|f| f.contains(':')).collect();
    assert_eq!(described.len(), 2, "{fields:?}");
    assert!(
        described.iter().all(|field| members.contains(field)),
        "{fields:?} {members:?}"
    );

    alive_until(&redis, name, "feedfacefeedface", secs - 1);
    a.locks().release(name, &holder).await.done(204);
    let (second, third) = (second.await.expect("task"), third.await.expect("task"));
    assert!(second < third, "granted in queue order");
    no_queue_left(&redis).await;
}

/// The memory store shows its queue as Redis does (every waiter here).
#[tokio::test]
async fn the_memory_store_shows_its_queue() {
    let gw = Gateway::dev().await;
    let name = "fair:shown";
    let holder = hold(&gw, name).await;
    let body = |owner: &str, priority: u8| json!({"fair": true, "owner": owner, "priority": priority, "wait_ms": 60_000});
    let low = waiter_asking(&gw, name, body("low", 1));
    until_queued(&gw, name, 1).await;
    let high = waiter_asking(&gw, name, body("high", 7));
    until_queued(&gw, name, 2).await;
    let seen = places(&gw, name).await;
    assert_eq!(
        seen.iter()
            .map(|p| (p.0.clone(), p.1, p.2))
            .collect::<Vec<_>>(),
        [(owned("high"), 7, true), (owned("low"), 1, true)]
    );
    assert!(seen.iter().all(|p| p.3.is_some()), "{seen:?}");
    gw.locks().release(name, &holder).await.done(204);
    let (high, low) = (high.await.expect("task"), low.await.expect("task"));
    assert!(high < low, "granted in queue order");
}

/// A fair waiter with an `Idempotency-Key` keeps its place for a moment after its request
/// ends: the next request with the same key takes it again, ahead of a waiter that arrived in
/// between (what `lockgate run --fair` does across its 30 s requests).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_keyed_waiter_keeps_its_place_across_requests() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let name = "fair:keyed";
    let locks = gw.locks();
    let holder = hold(&gw, name).await;
    let key = "a-run-of-the-nightly-job";
    locks
        .acquire_once(name, key, json!({"fair": true, "wait_ms": 200}))
        .await
        .refused(409, "lock-held");
    // Arrives while the keyed place is kept: behind it.
    let later = waiter(&gw, name, 0, 60_000);
    until_queued(&gw, name, 2).await;
    let again = {
        let locks = gw.locks();
        tokio::spawn(async move {
            let body = json!({"fair": true, "wait_ms": 60_000});
            locks.acquire_once(name, key, body).await
        })
    };
    // Both wait in the gateway: the retry has arrived. (Its place is proved by the order the
    // two are granted in, below; the count says no third place was made.)
    crate::waiting::until_waiting(&gw, 2).await;
    assert_eq!(
        queued(&gw, name).await,
        2,
        "the same key took its place again"
    );
    locks.release(name, &holder).await.done(204);
    let grant = again.await.expect("task").done(201);
    locks.release(name, &grant.token).await.done(204);
    let later_fence = later.await.expect("waiter task");
    assert!(
        grant.fence < later_fence,
        "the keyed waiter kept its turn: {grant:?}, later {later_fence}"
    );
    no_queue_left(&redis).await;
}
