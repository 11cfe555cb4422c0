//! Multi-locks (`POST /locks` with `names`): every name under one token and ttl, or none;
//! renewed and released as a set; never half-held. On the memory backend, standalone Redis,
//! Sentinel and Cluster (names in one hash slot, else 400 `cross-slot`); Redlock answers 501.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lockgate::client::{Answer, Client, ClientError};
use lockgate::http::dto::{LockGrantBody, LockRenewalBody, RenewBody};
use serde_json::{Value, json};

use crate::support::answers::{self, Answered, acquire_at, json_of};
use crate::support::backends::on_backends;
use crate::support::gateway::{Gateway, cluster_config, redis_config, redlock_trio};
use crate::support::history::{Call, History, Outcome};
use crate::support::redis::{RedisCluster, RedisServer};
use crate::support::rng::Rng;
use crate::support::workload::{Expect, outcome_of};
use crate::support::{eventually, status_json, test_name};

/// The project's client for the set of `names` (`/locks?name=…&name=…`).
fn set_of(gw: &Gateway, names: &[&str]) -> Client {
    let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
    gw.client().set(&names)
}

/// `POST /locks` with `body`, which names the set (or fails to).
async fn acquire_set(gw: &Gateway, body: Value) -> Result<Answer<LockGrantBody>, ClientError> {
    set_of(gw, &[]).acquire("", &body, None, None).await
}

async fn release_set(
    gw: &Gateway,
    names: &[&str],
    token: &str,
) -> Result<Answer<Option<serde_json::Value>>, ClientError> {
    set_of(gw, names).release("", token, None).await
}

async fn renew_set(
    gw: &Gateway,
    names: &[&str],
    token: &str,
) -> Result<Answer<LockRenewalBody>, ClientError> {
    let body = RenewBody {
        ttl_ms: Some(30_000),
        ..RenewBody::default()
    };
    set_of(gw, names).renew("", token, &body, None).await
}

/// The fence of the lock `name` as inspect shows it; `None` when it is not held.
async fn fence_of(gw: &Gateway, name: &str) -> Option<u64> {
    let seen = gw.client().inspect(name).await;
    if seen.status() == 404 {
        return None;
    }
    seen.done(200).fence
}

/// The walk every backend must pass, on names `a`, `b`, `c` (in one Cluster slot).
async fn sets_of_locks(gw: &Gateway, [a, b, c]: [&str; 3]) {
    let body = json!({"names": [b, a], "ttl_ms": 20_000, "owner": "mover"});
    let set = acquire_set(gw, body).await.done(201);
    let mut sorted = [a, b];
    sorted.sort_unstable();
    assert_eq!(
        set.names.as_deref(),
        Some(&sorted.map(String::from)[..]),
        "{set:?}"
    );
    let fence = set.fence;
    assert_eq!(fence_of(gw, a).await, Some(fence));
    assert_eq!(fence_of(gw, b).await, Some(fence));
    let seen = gw.client().inspect(a).await.done(200);
    assert_eq!(seen.owner.as_deref(), Some("mover"), "{seen:?}");

    // An overlapping set is refused whole: `c` stays free.
    (acquire_set(gw, json!({"names": [c, b]})).await).refused(409, "lock-held");
    assert_eq!(
        fence_of(gw, c).await,
        None,
        "nothing of a refused set is taken"
    );
    // A single name of the set cannot be released alone.
    gw.locks()
        .release(a, &set.token)
        .await
        .refused(400, "invalid-request");
    assert_eq!(fence_of(gw, a).await, Some(fence));

    let renewed = renew_set(gw, &[a, b], &set.token).await.done(200);
    assert_eq!(renewed.fence, set.fence);

    // A waiter on the overlapping set gets it when the first set is released.
    let waiter = {
        let client = set_of(gw, &[]);
        let body = json!({"names": [b, c], "wait_ms": 10_000});
        tokio::spawn(async move {
            let answer = client.acquire("", &body, None, None).await;
            (Instant::now(), answer)
        })
    };
    // A set waits in the line of its first name.
    let first = b.min(c);
    eventually(Duration::from_secs(5), "the set waits", || async {
        let seen = gw.client().inspect(first).await.done(200);
        (seen.waiting == 1).then_some(())
    })
    .await;
    let released = Instant::now();
    release_set(gw, &[a, b], &set.token).await.done(204);
    let (granted, answer) = waiter.await.expect("waiter task");
    let second = answer.done(201);
    assert!(
        granted - released < Duration::from_secs(2),
        "{:?}",
        granted - released
    );
    assert!(second.fence > fence);
    assert_eq!(fence_of(gw, a).await, None, "the released set is free");
    // Released twice: `b` belongs to the second set now, which stays whole.
    (release_set(gw, &[a, b], &set.token).await).refused(409, "not-owner");
    assert_eq!(fence_of(gw, b).await, Some(second.fence));
    assert_eq!(fence_of(gw, c).await, Some(second.fence));

    release_set(gw, &[b, c], &second.token).await.done(204);
}

/// Idempotent retry of a set (names `a`, `b` in one slot).
async fn idempotent_set(gw: &Gateway, [a, b]: [&str; 2]) {
    let (client, body) = (set_of(gw, &[]), json!({"names": [a, b], "ttl_ms": 20_000}));
    let send = || client.acquire("", &body, Some("a4e1c9f0-multi-retry-0000001"), None);
    let first = send().await.done(201);
    let again = send().await.done(200);
    assert_eq!(again.token, first.token);
    release_set(gw, &[a, b], &first.token).await.done(204);
}

/// Three names in one Redis Cluster hash slot (any three names elsewhere).
fn names_in_one_slot() -> [String; 3] {
    let slot = |name: &str| crc16::State::<crc16::XMODEM>::calculate(name.as_bytes()) % 16384;
    let target = slot("set:0");
    let mut found = vec!["set:0".to_owned()];
    let mut i = 1;
    while found.len() < 3 {
        let name = format!("set:{i}");
        if slot(&name) == target {
            found.push(name);
        }
        i += 1;
    }
    [found[0].clone(), found[1].clone(), found[2].clone()]
}

/// A set held by a hold stream (`POST /locks?hold=true`) is renewed, and released as soon as
/// the stream is closed.
async fn hold_stream_holds_a_set(gw: &Gateway, [a, b]: [&str; 2]) {
    let body = json!({"names": [a, b], "ttl_ms": 600});
    let mut lines = set_of(gw, &[a, b]).hold("", &body).await.done(200);
    let acquired = lines.next().await.expect("acquired");
    assert_eq!(acquired["event"], "acquired", "{acquired}");
    let mut names = [a, b];
    names.sort_unstable();
    assert_eq!(acquired["names"], json!(names), "{acquired}");
    let renewed = lines.next().await.expect("renewed");
    assert_eq!(renewed["event"], "renewed", "{renewed}");
    let fence = acquired["fence"].as_u64();
    assert_eq!(fence_of(gw, a).await, fence);
    assert_eq!(fence_of(gw, b).await, fence);
    drop(lines);
    eventually(Duration::from_secs(2), "the set is released", || async {
        (fence_of(gw, a).await.is_none() && fence_of(gw, b).await.is_none()).then_some(())
    })
    .await;
}

/// A new set's `Location` is where its renew and release go, and reading it shows the set:
/// `GET /locks?name=…&name=…` lists those of the names that are held.
async fn a_set_is_found_at_its_location(gw: &Gateway, [a, b, c]: [&str; 3]) {
    // Raw HTTP: the `Location` header is what is tested.
    let response = gw
        .http
        .post(gw.url("/locks"))
        .json(&json!({"names": [b, a], "ttl_ms": 20_000}))
        .send()
        .await
        .expect("acquire request");
    let location = response.headers()["location"]
        .to_str()
        .expect("a text Location")
        .to_owned();
    let (status, set) = status_json(response).await;
    assert_eq!(status, 201, "{set}");
    let mut sorted = [a, b];
    sorted.sort_unstable();
    assert_eq!(
        location,
        format!("/locks?name={}&name={}", sorted[0], sorted[1])
    );

    let fence = &set["fence"];
    let token = set["token"].as_str().expect("a token");
    assert_eq!(listed(gw, &location, fence, token).await, sorted);
    let some = format!("/locks?name={c}&name={a}");
    assert_eq!(listed(gw, &some, fence, token).await, [a]);
    release_set(gw, &[a, b], token).await.done(204);
    assert!(listed(gw, &location, fence, token).await.is_empty());
}

/// The names `GET path` lists, each checked to carry `fence` and no token.
async fn listed(gw: &Gateway, path: &str, fence: &Value, token: &str) -> Vec<String> {
    let query = path.strip_prefix("/locks?").expect("a listing's query");
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let pairs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let (status, body) = json_of(gw.client().list::<Value>(&pairs).await);
    assert_eq!(status, 200, "{path}: {body}");
    assert!(!body.to_string().contains(token), "{body}");
    body["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .map(|lock| {
            assert_eq!(&lock["fence"], fence, "{path}: {body}");
            lock["name"].as_str().expect("name").to_owned()
        })
        .collect()
}

/// A set that is not renewed expires whole: an overlapping set gets in after its ttl.
async fn a_set_expires_whole(gw: &Gateway, [a, b, c]: [&str; 3]) {
    // Timed from before the first request: the set's lease cannot start earlier,
    // however late its response arrives on a loaded machine.
    let started = Instant::now();
    let set = (acquire_set(gw, json!({"names": [a, b], "ttl_ms": 300})).await).done(201);
    let next = acquire_set(gw, json!({"names": [b, c], "wait_ms": 5_000})).await;
    let next = next.done(201);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(299) && waited < Duration::from_secs(2),
        "the overlapping set got in after {waited:?}"
    );
    assert_eq!(fence_of(gw, a).await, None, "{a} expired with its set");
    let refused = renew_set(gw, &[a, b], &set.token).await;
    assert!(
        [404, 409].contains(&refused.status()),
        "an expired set cannot be renewed: {refused:?}"
    );
    release_set(gw, &[b, c], &next.token).await.done(204);
}

async fn every_walk(gw: &Gateway) {
    let [a, b, c] = names_in_one_slot();
    sets_of_locks(gw, [&a, &b, &c]).await;
    idempotent_set(gw, [&a, &c]).await;
    hold_stream_holds_a_set(gw, [&a, &b]).await;
    a_set_is_found_at_its_location(gw, [&a, &b, &c]).await;
    a_set_expires_whole(gw, [&a, &b, &c]).await;
}

#[tokio::test]
async fn multilocks_on_the_dev_backend() {
    let gw = Gateway::dev().await;
    every_walk(&gw).await;
    let text = gw.metrics_text().await;
    let series =
        "lockgate_requests_total{operation=\"acquire\",kind=\"multi\",outcome=\"acquired\"}";
    assert!(text.contains(series), "{series} missing from {text}");
}

#[tokio::test]
async fn multilocks_on_redis() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    every_walk(&gw).await;
    // Standalone Redis takes any names together.
    let set = acquire_set(&gw, json!({"names": ["x:1", "y:2", "z:3"]})).await;
    let set = set.done(201);
    release_set(&gw, &["x:1", "y:2", "z:3"], &set.token)
        .await
        .done(204);
}

on_backends!(every_walk: sentinel);

#[tokio::test]
async fn multilocks_on_a_cluster_need_one_slot() {
    let cluster = RedisCluster::start(3, 0);
    let gw = Gateway::start(cluster_config(&cluster.seed_urls())).await;
    every_walk(&gw).await;
    (acquire_set(&gw, json!({"names": ["x:1", "y:2"]})).await).refused(400, "cross-slot");
    assert_eq!(fence_of(&gw, "x:1").await, None);
}

#[tokio::test]
async fn redlock_does_not_offer_multilocks() {
    let (gw, _nodes) = redlock_trio().await;
    (acquire_set(&gw, json!({"names": ["a", "b"]})).await).refused(501, "not-offered");
}

#[tokio::test]
async fn bad_sets_name_the_field() {
    let gw = Gateway::dev().await;
    for (body, field) in [
        (json!({}), Some("names")),
        (json!({"names": ["a"]}), Some("names")),
        (json!({"names": ["a", "a"]}), Some("names")),
        // An unknown field is not named: it could be anything, a secret included (issue 49).
        (json!({"names": ["a", "b"], "bogus": 1}), None),
    ] {
        let problem = acquire_set(&gw, body.clone()).await;
        let problem = problem.refused(400, "invalid-request");
        assert_eq!(problem.field.as_deref(), field, "{body}: {problem:?}");
    }
    (acquire_set(&gw, json!({"names": ["a", "b/c"]})).await).refused(400, "invalid-name");
}

/// 32 clients take random sets of 2 or 3 of 5 names, waiting for them: every name's history
/// has no overlap and fences in order, and every set is seen whole (each of its names held
/// with the set's fence) while it is held — never half-held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_half_held_and_never_overlapping() {
    let redis = RedisServer::start();
    let gw = Arc::new(Gateway::start(redis_config(&redis.url())).await);
    let history = Arc::new(History::new());
    const NAMES: [&str; 5] = ["m:a", "m:b", "m:c", "m:d", "m:e"];
    let clients: Vec<_> = (0..32usize)
        .map(|client| {
            let (gw, history) = (gw.clone(), history.clone());
            tokio::spawn(async move {
                for cycle in 0..8usize {
                    let pick = (client * 7 + cycle * 3) % NAMES.len();
                    let size = 2 + (client + cycle) % 2;
                    let names: Vec<&str> = (0..size)
                        .map(|i| NAMES[(pick + i * 2) % NAMES.len()])
                        .collect();
                    let invoke = history.now_us();
                    let body = json!({"names": names, "ttl_ms": 10_000, "wait_ms": 30_000});
                    let sent = acquire_set(&gw, body).await;
                    let outcome = outcome_of(sent, Expect::Grant);
                    let call = Call::Acquire {
                        ttl_ms: 10_000,
                        wait_ms: 30_000,
                        shared: false,
                    };
                    for name in &names {
                        history.record(client, name, call.clone(), invoke, outcome.clone());
                    }
                    let Outcome::Granted { token, .. } = outcome else {
                        panic!("client {client}: {outcome:?}");
                    };
                    for name in &names {
                        let invoke = history.now_us();
                        let sent = gw.client().inspect(name).await;
                        let seen = outcome_of(sent, Expect::Inspection);
                        let call = Call::Inspect {
                            token: token.clone(),
                        };
                        history.record(client, name, call, invoke, seen);
                    }
                    let invoke = history.now_us();
                    let sent = release_set(&gw, &names, &token).await;
                    let outcome = outcome_of(sent, Expect::Release);
                    for name in &names {
                        let call = Call::Release {
                            token: token.clone(),
                        };
                        history.record(client, name, call, invoke, outcome.clone());
                    }
                }
            })
        })
        .collect();
    for client in clients {
        client.await.expect("client");
    }
    let report = history.check();
    report.assert_clean(&test_name());
}

/// Contended sets cost at most 4 round trips to Redis per acquisition, releases included: 12
/// clients take overlapping sets of 2 of 3 names, each waiting for its turn, never polling.
/// Keyspace notifications are on: without them the head of a line also looks for other
/// clients' releases every 50 ms (see `lock::acquire`), a cost per second of waiting.
#[tokio::test]
async fn contended_sets_cost_at_most_4_round_trips() {
    let redis = RedisServer::start();
    redis.enable_keyspace_notifications();
    let gw = Arc::new(Gateway::start(redis_config(&redis.url())).await);
    let before = gw.redis_round_trips().await;
    const CYCLES: usize = 6;
    const SETS: [[&str; 2]; 3] = [["h:1", "h:2"], ["h:2", "h:3"], ["h:3", "h:1"]];
    let clients: Vec<_> = (0..12usize)
        .map(|client| {
            let gw = gw.clone();
            tokio::spawn(async move {
                let names = SETS[client % SETS.len()];
                for _ in 0..CYCLES {
                    let body = json!({"names": names, "ttl_ms": 10_000, "wait_ms": 30_000});
                    let set = acquire_set(&gw, body).await.done(201);
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    release_set(&gw, &names, &set.token).await.done(204);
                }
            })
        })
        .collect();
    for client in clients {
        client.await.expect("client");
    }
    let per_acquisition = (gw.redis_round_trips().await - before) / (12 * CYCLES) as f64;
    eprintln!("{per_acquisition:.2} round trips per contended multi-lock acquisition");
    assert!(
        per_acquisition <= 4.0,
        "{per_acquisition:.2} round trips per acquisition"
    );
}

/// A grant the property test below believes held (until released through its own route).
#[derive(Debug, Clone)]
struct Believed {
    names: Vec<String>,
    token: String,
    fence: u64,
    set: bool,
    /// A reentrant lock's hold count; 0 for other kinds.
    holds: u64,
}

/// An acquire at `path` (a set's at `/locks`) of `names`: the grant, or `None` when they are
/// held (409).
async fn believe(
    gw: &Gateway,
    path: &str,
    body: Value,
    names: Vec<String>,
    holds: u64,
    what: &str,
) -> Option<Believed> {
    let (status, grant) = json_of(acquire_at(gw.client(), path, &body).await);
    if status != 201 {
        assert_eq!(status, 409, "{what}: {grant}");
        return None;
    }
    Some(Believed {
        set: path == "/locks",
        names,
        token: grant["token"].as_str().expect("token").to_owned(),
        fence: grant["fence"].as_u64().expect("fence"),
        holds,
    })
}

/// A renewal (for 60 s) or a release at `path` with `token`.
async fn renew_or_release(gw: &Gateway, renew: bool, path: &str, token: &str) -> (u16, Value) {
    let method = if renew {
        reqwest::Method::PATCH
    } else {
        reqwest::Method::DELETE
    };
    answers::renew_or_release(gw.client(), path, &method, token, 60_000).await
}

/// Random sequences of acquire, renew and release over sets, their subsets, supersets and
/// other sets, with the set's own tokens and tokens of other kinds (plain and reentrant
/// locks, released sets): after every step, every grant not released through its own route
/// is still held with its fence, on every name (a set whole); at the end, each is released
/// through its own route and no name is left held.
async fn sets_stay_whole(gw: &Gateway) {
    let mut rng = Rng::seeded("set property");
    let pool: Vec<String> = (0..6).map(|i| format!("prop:{i}")).collect();
    let mut held: Vec<Believed> = Vec::new();
    let mut stale: Vec<String> = Vec::new();
    for step in 0..250 {
        let pick = |rng: &mut Rng, n: usize| {
            let mut names: Vec<String> = Vec::new();
            while names.len() < n {
                let name = pool[rng.index(pool.len())].clone();
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            names
        };
        let any_token = |rng: &mut Rng, held: &[Believed], stale: &[String]| {
            if !stale.is_empty() && rng.next(5) == 0 {
                return stale[rng.index(stale.len())].clone();
            }
            held.get(rng.index(held.len().max(1))).map_or_else(
                || crate::support::UNISSUED_TOKEN.to_owned(),
                |b| b.token.clone(),
            )
        };
        let what;
        match rng.next(6) {
            0 => {
                let size = 2 + rng.index(2);
                let names = pick(&mut rng, size);
                what = format!("acquire set {names:?}");
                let body = json!({"names": names, "ttl_ms": 60_000});
                if let Some(grant) = believe(gw, "/locks", body, names, 0, &what).await {
                    held.push(grant);
                }
            }
            1 if rng.next(3) == 0 && held.iter().any(|b| b.holds > 0) => {
                let at = held
                    .iter()
                    .position(|b| b.holds > 0)
                    .expect("a reentrant lock");
                let believed = &mut held[at];
                what = format!("re-enter {}", believed.names[0]);
                let holder = gw.client().header("lock-token", &believed.token);
                let holder = holder.expect("a token header");
                let body = json!({"reentrant": true, "ttl_ms": 60_000});
                let again = holder.acquire(&believed.names[0], &body, None, None).await;
                let (status, again) = json_of(again);
                assert_eq!(status, 200, "{what}: {again}");
                believed.holds += 1;
                assert_eq!(again["hold_count"], believed.holds, "{what}: {again}");
            }
            1 => {
                let name = pick(&mut rng, 1).remove(0);
                let reentrant = rng.next(2) == 0;
                what = format!("acquire {name} (reentrant: {reentrant})");
                let body = json!({"reentrant": reentrant, "ttl_ms": 60_000});
                let path = format!("/locks/{name}");
                let holds = u64::from(reentrant);
                if let Some(grant) = believe(gw, &path, body, vec![name], holds, &what).await {
                    held.push(grant);
                }
            }
            _ => {
                // A renewal or release with a token of any grant, or a stale one: half the time
                // on a set route naming a believed grant's names as they are, shuffled, cut,
                // grown or replaced; else on one name's route.
                let token = any_token(&mut rng, &held, &stale);
                let (path, own) = if rng.next(2) == 0 {
                    let base = held
                        .get(rng.index(held.len().max(1)))
                        .map_or_else(|| pick(&mut rng, 2), |b| b.names.clone());
                    let mut names = base.clone();
                    match rng.next(4) {
                        0 => names.reverse(),
                        1 if names.len() > 2 => {
                            names.remove(rng.index(names.len()));
                        }
                        1 | 2 => {
                            if let Some(extra) = pool.iter().find(|n| !names.contains(n)) {
                                names.push(extra.clone());
                            }
                        }
                        _ => {
                            let size = 2 + rng.index(2);
                            names = pick(&mut rng, size);
                        }
                    }
                    if names.len() < 2 {
                        names = pick(&mut rng, 2);
                    }
                    let query: Vec<String> = names.iter().map(|n| format!("name={n}")).collect();
                    let mut sorted = names.clone();
                    sorted.sort();
                    let own = held.iter().position(|b| {
                        let mut theirs = b.names.clone();
                        theirs.sort();
                        b.set && b.token == token && theirs == sorted
                    });
                    (format!("/locks?{}", query.join("&")), own)
                } else {
                    let name = pick(&mut rng, 1).remove(0);
                    let own = held
                        .iter()
                        .position(|b| !b.set && b.token == token && b.names[0] == name);
                    (format!("/locks/{name}"), own)
                };
                let renew = rng.next(2) == 0;
                what = format!("{} {path}", if renew { "renew" } else { "release" });
                let (status, answer) = renew_or_release(gw, renew, &path, &token).await;
                match own {
                    Some(_) if renew => assert_eq!(status, 200, "{what}: {answer}"),
                    Some(at) if held[at].holds > 1 => {
                        assert_eq!(status, 200, "{what}: {answer}");
                        held[at].holds -= 1;
                        assert_eq!(answer["hold_count"], held[at].holds, "{what}: {answer}");
                    }
                    Some(at) => {
                        assert_eq!(status, 204, "{what}: {answer}");
                        stale.push(held.remove(at).token);
                    }
                    None => assert!(
                        [400, 404, 409].contains(&status),
                        "{what} with another's token: {status} {answer}"
                    ),
                }
            }
        }
        // Every believed grant is held whole, with its fence.
        for believed in &held {
            for name in &believed.names {
                assert_eq!(
                    fence_of(gw, name).await,
                    Some(believed.fence),
                    "step {step}, after {what}: {name} of {believed:?}"
                );
            }
        }
    }
    for believed in held {
        let path = if believed.set {
            let query: Vec<String> = believed.names.iter().map(|n| format!("name={n}")).collect();
            format!("/locks?{}", query.join("&"))
        } else {
            format!("/locks/{}", believed.names[0])
        };
        for left in (0..believed.holds.max(1)).rev() {
            let (status, answer) = renew_or_release(gw, false, &path, &believed.token).await;
            let expected = if left == 0 { 204 } else { 200 };
            assert_eq!(status, expected, "{believed:?}: {answer}");
        }
    }
    for name in &pool {
        assert_eq!(fence_of(gw, name).await, None, "{name} after every release");
    }
}

#[tokio::test]
async fn sets_stay_whole_on_the_dev_backend() {
    let gw = Gateway::dev().await;
    sets_stay_whole(&gw).await;
}

/// On Redis also: once every grant is released, no key of any name is left (a `:holds`, a
/// holder record, a claim): only the server's fence counters and data-loss marker.
#[tokio::test]
async fn sets_stay_whole_on_redis() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    sets_stay_whole(&gw).await;
    let mut keys: Vec<String> = redis.query(redis::cmd("KEYS").arg("*")).expect("KEYS");
    keys.sort();
    assert_eq!(keys, ["lockgate:fences", "lockgate:marker"], "keys left");
}
