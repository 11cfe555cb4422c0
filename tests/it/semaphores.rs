//! Counting semaphores (`/semaphores/{name}`): permits granted up to the limit, renewed and
//! released by their token only, reclaimed at expiry, handed to waiters on release, found
//! again on an idempotent retry; never more permits valid at once than the limit under 32
//! concurrent clients; listed by prefix. On the memory backend, standalone Redis, Sentinel and Cluster; Redlock
//! answers 501 `not-offered`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lockgate::client::{Answer, Client, ClientError};
use lockgate::http::dto::{LockGrantBody, LockRenewalBody, RenewBody};
use lockgate::primitive::semaphore::dto::{SemaphoreInfoBody, SemaphoreListBody};
use serde_json::{Value, json};

use crate::support::answers::{Answered, json_of};
use crate::support::backends::on_backends;
use crate::support::gateway::{Gateway, cluster_config, redis_config, redlock_trio};
use crate::support::redis::{RedisCluster, RedisServer};
use crate::support::{assert_problem, eventually, key_exists, status_json};

/// The project's client, for the permits of semaphores.
fn semaphores(gw: &Gateway) -> Client {
    gw.client().semaphores()
}

async fn acquire(
    gw: &Gateway,
    name: &str,
    body: Value,
) -> Result<Answer<LockGrantBody>, ClientError> {
    semaphores(gw).acquire(name, &body, None, None).await
}

async fn release(gw: &Gateway, name: &str, token: &str) -> u16 {
    semaphores(gw).release(name, token, None).await.status()
}

async fn renew(
    gw: &Gateway,
    name: &str,
    token: &str,
    ttl_ms: u64,
) -> Result<Answer<LockRenewalBody>, ClientError> {
    let body = RenewBody {
        ttl_ms: Some(ttl_ms),
        ..RenewBody::default()
    };
    semaphores(gw).renew(name, token, &body, None).await
}

/// `GET /semaphores/{name}` as JSON, checking on the way that no token is in its text (for
/// what the typed body cannot tell: a field absent rather than null).
async fn inspect_json(gw: &Gateway, name: &str, tokens: &[&str]) -> Value {
    let seen = semaphores(gw).inspect_as::<Value>(name).await;
    let (status, seen) = json_of(seen);
    assert_eq!(status, 200, "{seen}");
    for token in tokens {
        assert!(!seen.to_string().contains(token), "a token leaked: {seen}");
    }
    seen
}

/// `GET /semaphores/{name}`, checking on the way that no token is in its text.
async fn inspect(gw: &Gateway, name: &str, tokens: &[&str]) -> SemaphoreInfoBody {
    let seen = inspect_json(gw, name, tokens).await;
    serde_json::from_value(seen).expect("a semaphore")
}

/// The walk every backend must pass.
async fn semaphore_round_trip(gw: &Gateway) {
    let name = "payments";
    let first_body = json!({"permits": 2, "ttl_ms": 20_000, "owner": "worker-a"});
    let first = acquire(gw, name, first_body).await.done(201);
    let second = (acquire(gw, name, json!({"permits": 2, "ttl_ms": 10_000})).await).done(201);
    assert!(second.fence > first.fence, "{first:?} then {second:?}");

    // Full: the third caller is told when the first permit ends (the second's, ~10 s).
    let full = (acquire(gw, name, json!({"permits": 2})).await).refused(409, "lock-held");
    let retry = full.retry_after_ms.expect("retry_after_ms");
    assert!((9_000..=10_000).contains(&retry), "{full:?}");
    // Another limit while permits are held.
    let mismatch = acquire(gw, name, json!({"permits": 3})).await;
    let mismatch = mismatch.refused(409, "permits-mismatch");
    assert_eq!(mismatch.permits, Some(2), "{mismatch:?}");

    let raw = inspect_json(gw, name, &[&first.token, &second.token]).await;
    assert!(raw["holders"][0].get("owner").is_none(), "{raw}");
    let seen: SemaphoreInfoBody = serde_json::from_value(raw).expect("a semaphore");
    assert_eq!(seen.permits, Some(2), "{seen:?}");
    assert_eq!(seen.in_use, 2, "{seen:?}");
    let holders = &seen.holders;
    // The first to end first: the second permit (10 s) before the first (20 s).
    assert_eq!(holders[0].fence, Some(second.fence), "{seen:?}");
    assert_eq!(holders[1].fence, Some(first.fence), "{seen:?}");
    assert_eq!(holders[1].owner.as_deref(), Some("worker-a"), "{seen:?}");

    let renewed = renew(gw, name, &second.token, 30_000).await.done(200);
    assert_eq!(renewed.fence, second.fence);
    let seen = inspect(gw, name, &[]).await;
    assert_eq!(
        seen.holders[1].fence,
        Some(second.fence),
        "renewed last: {seen:?}"
    );

    // Tokens that hold nothing.
    let refused = renew(gw, name, "AAAAAAAAAAAAAAAAAAAAAA.1", 1_000).await;
    refused.refused(404, "lock-not-held");
    assert_eq!(release(gw, name, "AAAAAAAAAAAAAAAAAAAAAA.1").await, 404);
    // A lock's token is not a permit of the same name, nor the other way round.
    gw.locks()
        .release(name, &first.token)
        .await
        .refused(404, "lock-not-held");

    assert_eq!(release(gw, name, &first.token).await, 204);
    assert_eq!(release(gw, name, &first.token).await, 404, "released twice");
    let third = acquire(gw, name, json!({"permits": 2})).await.done(201);
    assert!(third.fence > second.fence);

    assert_eq!(release(gw, name, &second.token).await, 204);
    assert_eq!(release(gw, name, &third.token).await, 204);
    let seen = inspect_json(gw, name, &[]).await;
    assert_eq!(seen["in_use"], 0, "{seen}");
    assert!(seen.get("permits").is_none(), "no limit once free: {seen}");
    // A free semaphore takes a new limit.
    let other = acquire(gw, name, json!({"permits": 5})).await.done(201);
    assert_eq!(release(gw, name, &other.token).await, 204);
}

/// With an `Idempotency-Key`, a retry gets the same permit back (200), not a second one.
async fn idempotent_retry(gw: &Gateway) {
    let (client, body) = (semaphores(gw), json!({"permits": 2, "ttl_ms": 20_000}));
    let send = || {
        client.acquire(
            "retried",
            &body,
            Some("3f0e6a1c-semaphore-retry-0001"),
            None,
        )
    };
    let first = send().await.done(201);
    let again = send().await.done(200);
    assert_eq!(again.token, first.token);
    assert_eq!(again.fence, first.fence);
    let seen = inspect(gw, "retried", &[]).await;
    assert_eq!(seen.in_use, 1, "{seen:?}");
    assert_eq!(release(gw, "retried", &first.token).await, 204);
}

/// A waiter gets the permit given back, without waiting for any lease to end.
async fn waiter_gets_the_released_permit(gw: &Gateway) {
    let held = acquire(gw, "handoff", json!({"permits": 1, "ttl_ms": 30_000})).await;
    let held = held.done(201);
    let waiting = {
        let client = semaphores(gw);
        tokio::spawn(async move {
            let body = json!({"permits": 1, "wait_ms": 10_000});
            let answer = client.acquire("handoff", &body, None, None).await;
            (Instant::now(), answer)
        })
    };
    eventually(Duration::from_secs(5), "the waiter is in line", || async {
        let seen = inspect(gw, "handoff", &[]).await;
        (seen.waiting == 1).then_some(())
    })
    .await;
    let released = Instant::now();
    assert_eq!(release(gw, "handoff", &held.token).await, 204);
    let (granted_at, answer) = waiting.await.expect("waiter");
    let grant = answer.done(201);
    assert!(
        granted_at - released < Duration::from_secs(2),
        "handed off in {:?}",
        granted_at - released
    );
    assert_eq!(release(gw, "handoff", &grant.token).await, 204);
}

/// A hold stream holds a permit, renews it, and gives it back as soon as it is closed.
async fn hold_stream_holds_a_permit(gw: &Gateway) {
    let body = json!({"permits": 1, "ttl_ms": 600});
    let mut lines = semaphores(gw).hold("held", &body).await.done(200);
    let acquired = lines.next().await.expect("acquired");
    assert_eq!(acquired["event"], "acquired", "{acquired}");
    let renewed = lines.next().await.expect("renewed");
    assert_eq!(renewed["event"], "renewed", "{renewed}");
    assert_eq!(renewed["fence"], acquired["fence"]);
    (acquire(gw, "held", json!({"permits": 1})).await).refused(409, "lock-held");
    drop(lines);
    eventually(
        Duration::from_secs(2),
        "the permit is given back",
        || async {
            let seen = inspect(gw, "held", &[]).await;
            (seen.in_use == 0).then_some(())
        },
    )
    .await;
}

/// `GET /semaphores?prefix=`: the semaphores with permits held under the prefix, each as
/// inspect shows it, a page at a time; none once the permits are given back.
async fn listed_by_prefix(gw: &Gateway) {
    let mut tokens = Vec::new();
    for (name, permits, owner) in [
        ("listed:a", 3, "a1"),
        ("listed:a", 3, "a2"),
        ("listed:b", 2, "b1"),
        ("unlisted:c", 2, "c1"),
    ] {
        let body = json!({"permits": permits, "owner": owner});
        let grant = acquire(gw, name, body).await.done(201);
        tokens.push((name, grant.token));
    }
    let list = async |query: &[(&str, &str)]| -> SemaphoreListBody {
        semaphores(gw).list(query).await.done(200)
    };
    let page = list(&[("prefix", "listed:")]).await;
    let seen: Vec<(String, u64, u32, Vec<String>)> = page
        .semaphores
        .iter()
        .map(|s| {
            let mut owners: Vec<String> = s
                .holders
                .iter()
                .map(|h| h.owner.clone().expect("owner"))
                .collect();
            owners.sort();
            (
                s.name.clone(),
                s.in_use,
                s.permits.expect("permits"),
                owners,
            )
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(
        seen,
        vec![
            (
                "listed:a".to_owned(),
                2,
                3,
                vec!["a1".to_owned(), "a2".to_owned()]
            ),
            ("listed:b".to_owned(), 1, 2, vec!["b1".to_owned()]),
        ]
    );
    // A page at a time: every one once.
    let mut names = Vec::new();
    let mut cursor = None;
    for _ in 0..100 {
        let mut query = vec![("prefix", "listed:"), ("limit", "1")];
        query.extend(cursor.as_deref().map(|cursor| ("cursor", cursor)));
        let page = list(&query).await;
        names.extend(page.semaphores.into_iter().map(|s| s.name));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    names.sort();
    assert_eq!(names, ["listed:a", "listed:b"]);
    for (name, token) in tokens {
        assert_eq!(release(gw, name, &token).await, 204);
    }
    assert!(list(&[("prefix", "listed:")]).await.semaphores.is_empty());
}

/// An operator revokes every permit of a semaphore (`DELETE /semaphores/{name}?force=true`):
/// each holder is told (410 `lock-revoked` on its renewal and release, `revoked` on its hold
/// stream), a waiter gets a permit at once, and a revoke with nothing held is a 404.
async fn permits_revoked_by_an_operator(gw: &Gateway) {
    let body = json!({"permits": 2, "ttl_ms": 30_000});
    let plain = acquire(gw, "stuck", body).await.done(201);
    let held = json!({"permits": 2, "ttl_ms": 600});
    let mut lines = semaphores(gw).hold("stuck", &held).await.done(200);
    assert_eq!(lines.next().await.expect("acquired")["event"], "acquired");
    let waiting = {
        let client = semaphores(gw);
        tokio::spawn(async move {
            let body = json!({"permits": 2, "wait_ms": 10_000});
            client.acquire("stuck", &body, None, None).await
        })
    };
    eventually(Duration::from_secs(5), "the waiter is in line", || async {
        (inspect(gw, "stuck", &[]).await.waiting == 1).then_some(())
    })
    .await;
    semaphores(gw).force_release("stuck").await.done(204);
    renew(gw, "stuck", &plain.token, 30_000)
        .await
        .refused(410, "lock-revoked");
    assert_eq!(release(gw, "stuck", &plain.token).await, 410);
    loop {
        let event = lines.next().await.expect("an event before the stream ends");
        if event["event"] != "renewed" {
            assert_eq!(event["event"], "revoked", "{event}");
            break;
        }
    }
    let next = waiting.await.expect("waiter").done(201);
    assert_eq!(release(gw, "stuck", &next.token).await, 204);
    semaphores(gw)
        .force_release("stuck")
        .await
        .refused(404, "lock-not-held");
}

async fn every_walk(gw: &Gateway) {
    permits_revoked_by_an_operator(gw).await;
    listed_by_prefix(gw).await;
    semaphore_round_trip(gw).await;
    idempotent_retry(gw).await;
    waiter_gets_the_released_permit(gw).await;
    hold_stream_holds_a_permit(gw).await;
    expired_permits_are_reclaimed_by_the_next_acquire(gw).await;
}

#[tokio::test]
async fn semaphores_on_the_dev_backend() {
    let gw = Gateway::dev().await;
    every_walk(&gw).await;
    // Metrics tell semaphores from locks.
    let text = gw.metrics_text().await;
    for series in [
        "lockgate_requests_total{operation=\"acquire\",kind=\"semaphore\",outcome=\"acquired\"}",
        "lockgate_requests_total{operation=\"acquire\",kind=\"semaphore\",outcome=\"permits-mismatch\"}",
        "lockgate_requests_total{operation=\"release\",kind=\"semaphore\",outcome=\"released\"}",
    ] {
        assert!(text.contains(series), "{series} missing from {text}");
    }
}

#[tokio::test]
async fn semaphores_on_redis_leave_no_keys_behind() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    every_walk(&gw).await;
    let conn = redis.conn().await;
    for name in [
        "payments", "retried", "handoff", "held", "listed:a", "listed:b",
    ] {
        for suffix in [":permits", ":semaphore"] {
            let key = format!("lockgate:{{{name}}}{suffix}");
            assert!(!key_exists(&conn, &key).await, "{key} left behind");
        }
    }
}

on_backends!(every_walk: sentinel);

#[tokio::test]
async fn semaphores_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let gw = Gateway::start(cluster_config(&cluster.seed_urls())).await;
    every_walk(&gw).await;
    // Names in other slots, on other masters.
    for i in 0..12 {
        let name = format!("pool:{i}");
        let answer = acquire(&gw, &name, json!({"permits": 3})).await;
        assert_eq!(answer.status(), 201, "{name}: {answer:?}");
        let grant = answer.done(201);
        assert_eq!(release(&gw, &name, &grant.token).await, 204, "{name}");
    }
}

#[tokio::test]
async fn redlock_does_not_offer_semaphores() {
    let (gw, _nodes) = redlock_trio().await;
    (acquire(&gw, "payments", json!({"permits": 2})).await).refused(501, "not-offered");
    let seen = semaphores(&gw).inspect_as::<Value>("payments").await;
    seen.refused(501, "not-offered");
    // Nothing to list: none can be held.
    let listed = semaphores(&gw).list::<Value>(&[]).await;
    assert_eq!(json_of(listed), (200, json!({"semaphores": []})));
}

/// Expired permits are reclaimed by the next acquire, with nothing else running.
///
/// The two short grants may be made far apart on a loaded machine, so each is
/// waited out on its own: the first reclaim frees the earlier one, the second
/// the later one, and then neither shows.
async fn expired_permits_are_reclaimed_by_the_next_acquire(gw: &Gateway) {
    let short = json!({"permits": 2, "ttl_ms": 300});
    let mut expired = Vec::new();
    for _ in 0..2 {
        let grant = acquire(gw, "short", short.clone()).await.done(201);
        expired.push(grant.fence);
    }
    (acquire(gw, "short", short.clone()).await).refused(409, "lock-held");
    let started = Instant::now();
    let long = json!({"permits": 2, "ttl_ms": 20_000});
    let mut reclaimed = Vec::new();
    for _ in 0..2 {
        let grant = eventually(Duration::from_secs(3), "a permit after expiry", || async {
            let answer = acquire(gw, "short", long.clone()).await;
            (answer.status() == 201).then(|| answer.done(201))
        })
        .await;
        reclaimed.push(grant.fence);
    }
    assert!(started.elapsed() < Duration::from_secs(1), "{reclaimed:?}");
    let seen = inspect(gw, "short", &[]).await;
    assert_eq!(seen.in_use, 2, "{seen:?}");
    let mut shown: Vec<u64> = seen
        .holders
        .iter()
        .map(|permit| permit.fence.expect("a fence"))
        .collect();
    shown.sort_unstable();
    assert_eq!(
        shown, reclaimed,
        "the two expired ones {expired:?} are gone"
    );
}

/// Bad bodies answer 400 with the field at fault (an API field; an unknown one is not named);
/// nothing is granted.
#[tokio::test]
async fn bad_semaphore_requests_name_the_field() {
    let gw = Gateway::dev().await;
    for (body, field) in [
        (json!({}), Some("permits")),
        (json!({"permits": 0}), Some("permits")),
        (json!({"permits": 10_001}), Some("permits")),
        (json!({"permits": "five"}), Some("permits")),
        // An unknown field is not named: it could be anything, a secret included (issue 49).
        (json!({"permits": 2, "bogus": 1}), None),
        (json!({"permits": 2, "ttl_ms": -1}), Some("ttl_ms")),
    ] {
        let problem = acquire(&gw, "bad", body.clone()).await;
        let problem = problem.refused(400, "invalid-request");
        assert_eq!(problem.field.as_deref(), field, "{body}: {problem:?}");
    }
    // Raw HTTP: a request with no body at all, which the client never sends.
    let empty = gw.http.post(gw.url("/semaphores/bad")).send().await;
    let (status, problem) = status_json(empty.expect("acquire")).await;
    assert_problem(status, &problem, 400, "invalid-request");
    let seen = inspect(&gw, "bad", &[]).await;
    assert_eq!(seen.in_use, 0, "{seen:?}");
}

/// One permit cycle as a client saw it.
#[derive(Debug, Clone, Copy)]
struct Held {
    invoked: Instant,
    granted: Instant,
    /// When the client sent its release (or the lease would have ended, if earlier).
    until: Instant,
    fence: u64,
}

/// 32 clients share a semaphore of 3 permits, each taking and giving back permits with
/// `wait_ms`. At no instant are more than 3 permits valid (valid: from the grant's answer
/// until the release was sent, or invoke + ttl if earlier), and a grant answered before
/// another was sent has the smaller fence.
#[tokio::test]
async fn never_more_permits_valid_than_the_limit() {
    let redis = RedisServer::start();
    let gw = Arc::new(Gateway::start(redis_config(&redis.url())).await);
    redis
        .query::<()>(redis::cmd("CONFIG").arg("RESETSTAT"))
        .expect("reset stats");
    const PERMITS: usize = 3;
    const CLIENTS: usize = 32;
    const CYCLES: usize = 6;
    let ttl = Duration::from_secs(10);
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let gw = gw.clone();
            tokio::spawn(async move {
                let mut held = Vec::new();
                for _ in 0..CYCLES {
                    let invoked = Instant::now();
                    let body = json!({"permits": PERMITS, "ttl_ms": 10_000, "wait_ms": 60_000});
                    let answer = acquire(&gw, "pool", body).await;
                    let granted = Instant::now();
                    assert_eq!(answer.status(), 201, "client {client}: {answer:?}");
                    let grant = answer.done(201);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let until = Instant::now().min(invoked + ttl);
                    assert_eq!(release(&gw, "pool", &grant.token).await, 204);
                    held.push(Held {
                        invoked,
                        granted,
                        until,
                        fence: grant.fence,
                    });
                }
                held
            })
        })
        .collect();
    let mut history = Vec::new();
    for task in tasks {
        history.extend(task.await.expect("client"));
    }
    assert_eq!(history.len(), CLIENTS * CYCLES);

    // Sweep: +1 at each grant, -1 at each end; ends first at equal instants.
    let mut events: Vec<(Instant, i32)> = history
        .iter()
        .flat_map(|h| [(h.granted, 1), (h.until, -1)])
        .collect();
    events.sort_by_key(|&(at, delta)| (at, delta));
    let (mut valid, mut most) = (0, 0);
    for (_, delta) in events {
        valid += delta;
        most = most.max(valid);
    }
    assert!(most <= PERMITS as i32, "{most} permits valid at once");
    assert_eq!(most, PERMITS as i32, "the permits were all used at once");

    for a in &history {
        for b in &history {
            if a.granted < b.invoked {
                assert!(a.fence < b.fence, "{a:?} answered before {b:?} was sent");
            }
        }
    }

    // Redis commands the gateway sent per acquisition (releases and subscriptions included),
    // as bench/waiting.sh counts them for the lock.
    let stats: String = redis
        .query(redis::cmd("INFO").arg("commandstats"))
        .expect("commandstats");
    let inside = [
        "get",
        "set",
        "time",
        "publish",
        "zadd",
        "zrange",
        "zrangebyscore",
        "zremrangebyscore",
        "zscore",
        "zrem",
        "hset",
        "hget",
        "hdel",
        "exists",
        "del",
        "pexpireat",
        "config|resetstat",
    ];
    let sent: u64 = stats
        .lines()
        .filter_map(|line| {
            let (command, rest) = line.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            let calls: u64 = rest.split(',').next()?.parse().ok()?;
            (!inside.contains(&command)).then_some(calls)
        })
        .sum();
    let per_acquisition = sent as f64 / history.len() as f64;
    eprintln!("{per_acquisition:.2} Redis commands sent per contended acquisition");
    assert!(
        per_acquisition <= 4.0,
        "{per_acquisition:.2} commands per contended acquisition: {stats}"
    );
}
