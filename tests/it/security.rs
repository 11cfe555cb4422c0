//! The security suite: what an attacker with a valid but narrow API key (or with none, at a
//! sidecar without keys) can do, on every route and every way of spelling a request.
//!
//! * Scopes are decided on the decoded name the handler acts on: a matrix of every lock and
//!   semaphore route × callers (no key, another scope's key, a key without the operation, the
//!   right key) × spellings of the name (plain, each character percent-encoded in upper and
//!   lower hex, all of them encoded, an absolute-form request target) gets the decision of the
//!   plain spelling, in-process; the reported reproductions hold over real sockets on `--dev`,
//!   Redis and Redis Cluster.
//! * A `Lock-Token` lockgate did not issue for a grant (random values, markers, another name's
//!   token, tokens of the issued shape, the holder's token with its marks or fence changed)
//!   never renews, releases or hands over anything, for locks, read/write locks, semaphores and
//!   multi-locks; the scripts refuse markers even from a plain Redis client; a history of 32
//!   honest clients beside one sending markers and random tokens has no violation.
//! * Listing cursors say nothing about names and serve only the key and prefix that made them.
//! * Idempotency keys are bound to the API key; two `Authorization`, `Lock-Token` or
//!   `Idempotency-Key` headers are refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request};
use lockgate::access::ApiKeys;
use lockgate::config::{BackendChoice, Config};
use lockgate::http::App;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

use crate::support::answers::{Answered, acquire_at, json_of, renew_or_release};
use crate::support::backends::on_backends;
use crate::support::gateway::{Gateway, config, redis_config};
use crate::support::redis::RedisServer;
use crate::support::rng::Rng;
use crate::support::workload::{self, Workload};
use crate::support::{UNISSUED_TOKEN, status_json, test_name, token};

const TEAM_A: &str = "team-a-key-0123456789";
const TEAM_B: &str = "team-b-key-0123456789";
const ADMIN: &str = "admin-key-0123456789";
const SCRAPER: &str = "scraper-key-0123456789";

/// Team A works under `app:`, team B may only look under `other:`, the admin may do anything
/// (revoke included), the scraper may only read metrics.
const KEYS: &str = r#"[
    {"name": "team-a", "key": "team-a-key-0123456789", "prefixes": ["app:"],
     "operations": ["acquire", "renew", "release", "inspect", "hold"]},
    {"name": "team-b", "key": "team-b-key-0123456789", "prefixes": ["other:"],
     "operations": ["inspect"]},
    {"name": "admin", "key": "admin-key-0123456789", "prefixes": [""],
     "operations": ["acquire", "renew", "release", "inspect", "hold", "revoke"]},
    {"name": "scraper", "key": "scraper-key-0123456789", "prefixes": [], "operations": ["metrics"]}
]"#;

fn with_keys(mut config: Config) -> Config {
    config.api_keys = Some(ApiKeys::from_json(KEYS).expect("valid keys"));
    config
}

// ---------------------------------------------------------------------------------------
// Scopes: the decoded name, however it is spelled.

/// A route of the matrix: method, path with `{}` for the name, query, `Lock-Token`, body.
struct Route {
    method: Method,
    path: &'static str,
    query: &'static str,
    token: bool,
    body: &'static str,
}

fn routes() -> Vec<Route> {
    let route = |method: Method, path, query, token, body| Route {
        method,
        path,
        query,
        token,
        body,
    };
    vec![
        route(Method::POST, "/locks/{}", "", false, r#"{"ttl_ms": 5000}"#),
        route(Method::PATCH, "/locks/{}", "", true, ""),
        route(Method::DELETE, "/locks/{}", "", true, ""),
        route(Method::DELETE, "/locks/{}", "?force=true", false, ""),
        route(Method::GET, "/locks/{}", "", false, ""),
        route(Method::HEAD, "/locks/{}", "", false, ""),
        route(Method::POST, "/locks/{}/hold", "", false, ""),
        route(Method::GET, "/locks/{}/events", "", false, ""),
        route(
            Method::POST,
            "/semaphores/{}",
            "",
            false,
            r#"{"permits": 2}"#,
        ),
        route(Method::PATCH, "/semaphores/{}", "", true, ""),
        route(Method::DELETE, "/semaphores/{}", "", true, ""),
        route(Method::GET, "/semaphores/{}", "", false, ""),
        route(
            Method::POST,
            "/semaphores/{}/hold",
            "",
            false,
            r#"{"permits": 2}"#,
        ),
    ]
}

/// Every spelling of `name` in a request target: plain, each character percent-encoded (upper
/// and lower hex), every character encoded.
fn spellings(name: &str) -> Vec<String> {
    let encode = |c: char, lower: bool| {
        let hex = format!("%{:02X}", c as u32);
        if lower { hex.to_lowercase() } else { hex }
    };
    let mut spelled = vec![name.to_owned()];
    for (i, c) in name.char_indices() {
        for lower in [false, true] {
            spelled.push(format!(
                "{}{}{}",
                &name[..i],
                encode(c, lower),
                &name[i + c.len_utf8()..]
            ));
        }
    }
    spelled.push(name.chars().map(|c| encode(c, false)).collect());
    spelled.sort();
    spelled.dedup();
    spelled
}

/// What the gate decided: refused unauthenticated, refused out of scope, or let through.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Decision {
    Unauthorized,
    Forbidden,
    Passed,
}

/// Sends one request in-process; the answer's status as a decision (a stream's body is not
/// read: dropping it ends the stream and releases what it held).
async fn decide(app: &App, route: &Route, target: &str, key: Option<&str>) -> Decision {
    let mut req = Request::builder().method(route.method.clone()).uri(target);
    if let Some(key) = key {
        req = req.header("authorization", format!("Bearer {key}"));
    }
    if route.token {
        req = req.header("lock-token", UNISSUED_TOKEN);
    }
    let response = app
        .clone()
        .oneshot(req.body(Body::from(route.body)).expect("request"))
        .await
        .expect("infallible");
    match response.status().as_u16() {
        401 => Decision::Unauthorized,
        403 => Decision::Forbidden,
        _ => Decision::Passed,
    }
}

/// Every route, every caller, every spelling of two names (one in team A's scope, one in team
/// B's), as origin-form and absolute-form targets: the same decision as the plain spelling, and
/// the plain spelling's decision is the scope's.
#[tokio::test]
async fn scopes_are_decided_on_the_decoded_name_however_it_is_spelled() {
    let app = lockgate::app::app(&with_keys(config(BackendChoice::Memory))).expect("app");
    let callers = [
        ("no key", None),
        ("team-a", Some(TEAM_A)),
        ("team-b", Some(TEAM_B)),
        ("admin", Some(ADMIN)),
        ("scraper", Some(SCRAPER)),
    ];
    let mut checked = 0;
    for name in ["app:x", "other:y"] {
        for route in routes() {
            for (who, key) in callers {
                let plain = format!("{}{}", route.path.replace("{}", name), route.query);
                let expected = decide(&app, &route, &plain, key).await;
                let in_scope = match who {
                    "no key" => None,
                    "admin" => Some(true),
                    // Team A may do anything under `app:` but revoke.
                    "team-a" => Some(name.starts_with("app:") && !route.query.contains("force")),
                    // Team B may only inspect (and watch) under `other:`.
                    "team-b" => Some(
                        name.starts_with("other:")
                            && matches!(route.method, Method::GET | Method::HEAD),
                    ),
                    _ => Some(false),
                };
                let scope_decision = match in_scope {
                    None => Decision::Unauthorized,
                    Some(true) => Decision::Passed,
                    Some(false) => Decision::Forbidden,
                };
                assert_eq!(expected, scope_decision, "{who}: {} {plain}", route.method);
                for spelled in spellings(name) {
                    let path = format!("{}{}", route.path.replace("{}", &spelled), route.query);
                    for target in [path.clone(), format!("http://evil.example{path}")] {
                        let decision = decide(&app, &route, &target, key).await;
                        assert_eq!(
                            decision, expected,
                            "{who}: {} {target} (plain: {plain})",
                            route.method
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 1500, "{checked} requests checked");
}

/// A request over a socket with an API key; status and JSON body. Raw HTTP: the paths are
/// spelled as an attacker spells them (percent-encoded names, absolute-form targets), which a
/// client of the API would normalise.
async fn send(
    gw: &Gateway,
    method: Method,
    path: &str,
    key: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = gw.http.request(method, gw.url(path)).bearer_auth(key);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    if let Some(body) = body {
        req = req.json(&body);
    }
    status_json(req.send().await.expect("request")).await
}

/// The status line's code of one raw HTTP/1.1 request written as given.
async fn raw_status(gw: &Gateway, head: &str) -> u16 {
    let addr = gw.url("").trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.windows(2).any(|w| w == b"\r\n") {
        let n = stream.read(&mut buf).await.expect("read");
        assert!(n > 0, "the connection closed before a status line");
        answer.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&answer);
    line.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {line}"))
}

/// The reported scope bypasses, over a real socket: a percent-encoded name or an absolute-form
/// target no longer skips the scope check.
async fn encoded_names_are_scoped(gw: &Gateway) {
    let (status, body) = send(gw, Method::POST, "/locks/other:y", ADMIN, &[], None).await;
    assert_eq!(status, 201, "{body}");
    for path in ["/locks/other:y?force=true", "/locks/other%3Ay?force=true"] {
        let (status, body) = send(gw, Method::DELETE, path, TEAM_B, &[], None).await;
        assert_eq!(status, 403, "team B revoking {path}: {body}");
    }
    let (status, _) = send(gw, Method::GET, "/locks/other:y", ADMIN, &[], None).await;
    assert_eq!(status, 200, "the admin's lock is still held");
    for path in ["/locks/other%3Az", "/locks/%6Fther:z", "/locks/other:%7A"] {
        let (status, body) = send(gw, Method::POST, path, TEAM_A, &[], None).await;
        assert_eq!(status, 403, "team A taking {path}: {body}");
    }
    let (status, _) = send(gw, Method::GET, "/locks/other:z", ADMIN, &[], None).await;
    assert_eq!(status, 404, "nobody took other:z");
    for path in ["/locks/%61pp:x", "/locks/a%70p:x", "/locks/app:%78"] {
        let (status, body) = send(gw, Method::POST, path, SCRAPER, &[], None).await;
        assert_eq!(status, 403, "the metrics key taking {path}: {body}");
    }
    // Team A's own name, encoded, is still its own (and the grant is under the decoded name).
    let (status, body) = send(gw, Method::POST, "/locks/%61pp:x", TEAM_A, &[], None).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["name"], "app:x", "{body}");
    let absolute = |key: &str| {
        format!(
            "GET http://evil.example/locks/other%3Ay HTTP/1.1\r\nHost: evil.example\r\n\
             Authorization: Bearer {key}\r\nConnection: close\r\n\r\n"
        )
    };
    assert_eq!(raw_status(gw, &absolute(TEAM_A)).await, 403);
    assert_eq!(raw_status(gw, &absolute(TEAM_B)).await, 200);
}

// The scope bypass of percent-encoded names, reproduced on `--dev`, Redis and a Cluster.
on_backends!(encoded_names_are_scoped with with_keys: dev, redis, cluster);

// ---------------------------------------------------------------------------------------
// Tokens: only what lockgate issued for the grant.

const URL_SAFE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Tokens that are not `holder`'s: random text, markers, tokens of the issued shape, and
/// `holder` itself with its marks, fence or case changed; plus `others` (another name's or
/// another holder's token).
fn forged_tokens(rng: &mut Rng, holder: &str, others: &[String], random: usize) -> Vec<String> {
    let (stem, fence) = holder.rsplit_once('.').expect("stem.fence");
    let fence: u64 = fence.parse().expect("fence");
    let mut forged: Vec<String> = vec![
        "~shared".into(),
        "~shared.1".into(),
        "~".into(),
        format!("~{holder}"),
        format!("{stem}s.{fence}"),
        format!("{stem}m.{fence}"),
        format!("{stem}o.{fence}"),
        format!("{stem}h1.{fence}"),
        format!("{stem}.{}", fence + 1),
        format!("{stem}.{}", fence - 1),
        format!("{stem}.0{fence}"),
        stem.to_owned(),
        format!("{holder}.1"),
        holder.to_uppercase(),
        holder.to_lowercase(),
    ];
    forged.retain(|t| t != holder);
    forged.extend(others.iter().cloned());
    for _ in 0..random {
        let shaped = format!(
            "{}.{}",
            rng.text(URL_SAFE, 22),
            1_700_000_000_000_000 + rng.next(1 << 50)
        );
        let printable: Vec<u8> = (b'!'..=b'~').collect();
        let len = 1 + rng.next(80) as usize;
        let junk = rng.text(&printable, len);
        forged.extend([shaped, junk]);
    }
    forged
}

/// Sends `PATCH` (a ttl that would cut the lease short) and `DELETE` with each forged token at
/// `path`: none is a success.
async fn forged_tokens_move_nothing(gw: &Gateway, path: &str, forged: &[String]) {
    for bad in forged {
        for method in [Method::PATCH, Method::DELETE] {
            let (status, body) = renew_or_release(gw.client(), path, &method, bad, 100).await;
            assert!(
                [400, 404, 409, 410].contains(&status),
                "{method} {path} with a forged token {bad:?}: {status} {body}"
            );
        }
    }
}

/// What the legitimate holder of a lock sees after the attack: its renewal at `path` works,
/// with its own fence, and a contender's acquire at `acquire_path` is refused.
async fn still_held(
    gw: &Gateway,
    path: &str,
    holder: &str,
    fence: &Value,
    (acquire_path, contender): (&str, Value),
) {
    let (status, body) = renew_or_release(gw.client(), path, &Method::PATCH, holder, 30_000).await;
    assert_eq!(status, 200, "the holder's own renewal: {body}");
    assert_eq!(&body["fence"], fence, "{body}");
    let (status, body) = json_of(acquire_at(gw.client(), acquire_path, &contender).await);
    assert_eq!(status, 409, "a contender while it is held: {body}");
}

async fn post(gw: &Gateway, path: &str, body: Value) -> Value {
    let (status, granted) = json_of(acquire_at(gw.client(), path, &body).await);
    assert_eq!(status, 201, "{path}: {granted}");
    granted
}

/// Locks, read/write locks, semaphores and multi-locks: no token lockgate did not issue for a
/// grant moves it.
async fn only_issued_tokens_move_grants(gw: &Gateway) {
    let mut rng = Rng::seeded("token property");
    let decoy = token(&post(gw, "/locks/tok:decoy", json!({"ttl_ms": 30_000})).await);

    // An exclusive lock.
    let grant = post(gw, "/locks/tok:x", json!({"ttl_ms": 30_000})).await;
    let holder = token(&grant);
    let forged = forged_tokens(&mut rng, &holder, std::slice::from_ref(&decoy), 40);
    forged_tokens_move_nothing(gw, "/locks/tok:x", &forged).await;
    let writer = || ("/locks/tok:x", json!({}));
    still_held(gw, "/locks/tok:x", &holder, &grant["fence"], writer()).await;

    // A read-locked name: the readers' marker is the lock key's value.
    let readers = [
        post(
            gw,
            "/locks/tok:rw",
            json!({"mode": "shared", "ttl_ms": 30_000}),
        )
        .await,
        post(
            gw,
            "/locks/tok:rw",
            json!({"mode": "shared", "ttl_ms": 30_000}),
        )
        .await,
    ];
    let reader = token(&readers[0]);
    let forged = forged_tokens(&mut rng, &reader, &[decoy.clone(), holder.clone()], 40);
    forged_tokens_move_nothing(gw, "/locks/tok:rw", &forged).await;
    for grant in &readers {
        let writer = ("/locks/tok:rw", json!({}));
        still_held(gw, "/locks/tok:rw", &token(grant), &grant["fence"], writer).await;
    }

    // A semaphore of two permits, both taken.
    let permits = [
        post(
            gw,
            "/semaphores/tok:sem",
            json!({"permits": 2, "ttl_ms": 30_000}),
        )
        .await,
        post(
            gw,
            "/semaphores/tok:sem",
            json!({"permits": 2, "ttl_ms": 30_000}),
        )
        .await,
    ];
    let permit = token(&permits[0]);
    let forged = forged_tokens(&mut rng, &permit, &[decoy.clone(), reader.clone()], 40);
    forged_tokens_move_nothing(gw, "/semaphores/tok:sem", &forged).await;
    for grant in &permits {
        still_held(
            gw,
            "/semaphores/tok:sem",
            &token(grant),
            &grant["fence"],
            ("/semaphores/tok:sem", json!({"permits": 2})),
        )
        .await;
    }

    // A multi-lock, moved as a set and one name at a time.
    let set = post(
        gw,
        "/locks",
        json!({"names": ["tok:m1", "tok:m2"], "ttl_ms": 30_000}),
    )
    .await;
    let set_token = token(&set);
    let others = [decoy, holder.clone(), reader.clone()];
    let forged = forged_tokens(&mut rng, &set_token, &others, 40);
    forged_tokens_move_nothing(gw, "/locks?name=tok:m1&name=tok:m2", &forged).await;
    forged_tokens_move_nothing(gw, "/locks/tok:m1", &forged).await;
    // The set's own token on one of its names moves nothing either (a set moves whole).
    forged_tokens_move_nothing(gw, "/locks/tok:m1", std::slice::from_ref(&set_token)).await;
    still_held(
        gw,
        "/locks?name=tok:m1&name=tok:m2",
        &set_token,
        &set["fence"],
        ("/locks", json!({"names": ["tok:m1", "tok:m2"]})),
    )
    .await;

    // Issue 49: a set's token moves its set only when the names are exactly the set's.
    let trio = post(
        gw,
        "/locks",
        json!({"names": ["tok:t1", "tok:t2", "tok:t3"], "ttl_ms": 30_000}),
    )
    .await;
    let trio_token = token(&trio);
    for other in [
        "/locks?name=tok:t1&name=tok:t2",
        "/locks?name=tok:t2&name=tok:t3",
        "/locks?name=tok:t1&name=tok:t2&name=tok:t3&name=tok:t4",
        "/locks?name=tok:t1&name=tok:t2&name=tok:x",
        "/locks?name=tok:m1&name=tok:m2",
    ] {
        set_route_refuses(gw, other, &trio_token, (409, "not-owner")).await;
    }
    still_held(
        gw,
        "/locks?name=tok:t3&name=tok:t1&name=tok:t2",
        &trio_token,
        &trio["fence"],
        ("/locks/tok:t3", json!({})),
    )
    .await;

    // Tokens of other kinds on the set routes: a lock's, a reentrant lock's (which the set
    // route once freed whatever its hold count, leaving the count behind), a reader's.
    let reentrant = post(
        gw,
        "/locks/tok:rc",
        json!({"reentrant": true, "ttl_ms": 30_000}),
    )
    .await;
    let reentrant_token = token(&reentrant);
    let holder_again = gw.client().header("lock-token", &reentrant_token);
    let holder_again = holder_again.expect("a token header");
    let body = json!({"reentrant": true, "ttl_ms": 30_000});
    let (status, again) = json_of(holder_again.acquire("tok:rc", &body, None, None).await);
    assert_eq!((status, &again["hold_count"]), (200, &json!(2)), "{again}");
    for (path, other) in [
        ("/locks?name=tok:rc&name=tok:x", &reentrant_token),
        ("/locks?name=tok:x&name=tok:decoy", &holder),
        ("/locks?name=tok:rw&name=tok:x", &reader),
    ] {
        set_route_refuses(gw, path, other, (400, "invalid-request")).await;
    }
    let given_back = gw.client().release("tok:rc", &reentrant_token, None).await;
    let (status, body) = json_of(given_back);
    assert_eq!((status, &body["hold_count"]), (200, &json!(1)), "{body}");
    let writer = ("/locks/tok:x", json!({}));
    still_held(gw, "/locks/tok:x", &holder, &grant["fence"], writer).await;
}

/// A set route with `token` refuses renew and release with `problem`: 409 `not-owner` when the
/// names are not the token's set, 400 `invalid-request` (naming the header) when the token is
/// no set's. (What it left held, the caller checks.)
async fn set_route_refuses(gw: &Gateway, path: &str, token: &str, problem: (u16, &str)) {
    for method in [Method::PATCH, Method::DELETE] {
        let (status, body) = renew_or_release(gw.client(), path, &method, token, 100).await;
        crate::support::assert_problem(status, &body, problem.0, problem.1);
        if problem.0 == 400 {
            assert_eq!(body["header"], "Lock-Token", "{method} {path}: {body}");
        }
    }
}

// No token lockgate did not issue moves a grant, on `--dev` and on Redis (Lua) or Valkey
// (native commands).
on_backends!(only_issued_tokens_move_grants: dev, redis);

/// The reported marker attack, step by step: `~shared` is refused (400) on release, renew and
/// a set release, the readers keep the name, and no writer gets in.
async fn the_readers_marker_is_no_token(gw: &Gateway) {
    let readers = [
        post(gw, "/locks/sh", json!({"mode": "shared", "ttl_ms": 60_000})).await,
        post(gw, "/locks/sh", json!({"mode": "shared", "ttl_ms": 60_000})).await,
    ];
    for (method, path) in [
        (Method::DELETE, "/locks/sh"),
        (Method::PATCH, "/locks/sh"),
        (Method::DELETE, "/locks?name=sh&name=sh2"),
    ] {
        let (status, body) = renew_or_release(gw.client(), path, &method, "~shared", 100).await;
        crate::support::assert_problem(status, &body, 400, "invalid-request");
        assert_eq!(body["header"], "Lock-Token", "{method} {path}: {body}");
    }
    let locks = gw.locks();
    // A writer while both readers hold the name.
    locks
        .acquire("sh", json!({"ttl_ms": 60_000}))
        .await
        .refused(409, "lock-held");
    for grant in &readers {
        locks.renew("sh", &token(grant), json!({})).await.done(200);
    }
}

// The readers' marker is no token, on `--dev`, Redis (Lua) or Valkey (native commands), and
// a Cluster.
on_backends!(the_readers_marker_is_no_token: dev, redis, cluster);

/// The scripts themselves refuse a marker as a token, for a plain Redis client as for the
/// gateway: with the readers' marker as the lock key's value, compare-and-delete and
/// compare-and-expire with `~shared` answer "held by another token" and change nothing.
#[tokio::test]
async fn the_scripts_refuse_markers_from_any_client() {
    let redis = RedisServer::start();
    let mut conn = redis.conn().await;
    let prelude = include_str!("../../src/backend/scripts/presented_token.lua");
    // The plain release writes the prelude's compare out (see release.lua).
    let release = include_str!("../../src/backend/scripts/release.lua");
    let renew = format!(
        "{prelude}{}",
        include_str!("../../src/backend/scripts/renew.lua")
    );
    let key = "lockgate:{plain}";
    let _: () = ::redis::cmd("SET")
        .arg(key)
        .arg("~shared")
        .arg("PX")
        .arg(60_000)
        .query_async(&mut conn)
        .await
        .expect("SET");
    let released: i64 = ::redis::Script::new(release)
        .key(key)
        .arg("~shared")
        .arg("lockgate:{plain}:released")
        .invoke_async(&mut conn)
        .await
        .expect("release script");
    assert_eq!(released, -1);
    let renewed: i64 = ::redis::Script::new(&renew)
        .key(key)
        .arg("~shared")
        .arg(100)
        .invoke_async(&mut conn)
        .await
        .expect("renew script");
    assert_eq!(renewed, -1);
    let ttl: i64 = ::redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut conn)
        .await
        .expect("PTTL");
    assert!(ttl > 50_000, "the marker's lease was not cut: {ttl} ms");
    // A holder's own token still releases through the same script.
    let _: () = ::redis::cmd("SET")
        .arg(key)
        .arg(UNISSUED_TOKEN)
        .query_async(&mut conn)
        .await
        .expect("SET");
    let released: i64 = ::redis::Script::new(release)
        .key(key)
        .arg(UNISSUED_TOKEN)
        .arg("lockgate:{plain}:released")
        .invoke_async(&mut conn)
        .await
        .expect("release script");
    assert_eq!(released, 1);
}

/// 32 honest clients on read/write locks and one more sending markers, random tokens and
/// tokens of the issued shape to the same names all along: the history has no violation, and
/// no forged request succeeded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_tokens_among_honest_clients_break_nothing() {
    let redis = RedisServer::start();
    let gw = Arc::new(Gateway::start(redis_config(&redis.url())).await);
    let names = ["rw:a", "rw:b"];
    let mut load = Workload::new(32, &names);
    load.shared_one_in = 2;
    load.cycles = Some(400);
    let running = workload::start(&[gw.url("")], &load);
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let attacker = {
        let (gw, stop, sent) = (gw.clone(), stop.clone(), sent.clone());
        tokio::spawn(async move {
            let mut rng = Rng::seeded("token property");
            while !stop.load(Ordering::Relaxed) {
                let name = names[rng.next(2) as usize];
                let bad = match rng.next(3) {
                    0 => "~shared".to_owned(),
                    1 => format!(
                        "{}.{}",
                        rng.text(URL_SAFE, 22),
                        1_700_000_000_000_000 + rng.next(1 << 50)
                    ),
                    _ => {
                        let len = 1 + rng.next(40) as usize;
                        rng.text(URL_SAFE, len)
                    }
                };
                for method in [Method::DELETE, Method::PATCH] {
                    let path = format!("/locks/{name}");
                    let (status, _) =
                        renew_or_release(gw.client(), &path, &method, &bad, 100).await;
                    assert!(
                        [400, 404, 409, 410].contains(&status),
                        "{method} {name} with {bad:?} answered {status}"
                    );
                    sent.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let history = running.join().await;
    stop.store(true, Ordering::Relaxed);
    attacker
        .await
        .expect("the forged requests were all refused");
    let report = history.check();
    report.assert_clean(&test_name());
    assert_eq!(report.grants(), 400, "every cycle got its grant: {report}");
    assert!(
        sent.load(Ordering::Relaxed) > 100,
        "{} forged requests",
        sent.load(Ordering::Relaxed)
    );
}

// ---------------------------------------------------------------------------------------
// Listings, idempotency keys, Authorization headers.

/// Every page of a listing as `key` sees it, followed to the end: the raw page texts.
async fn pages(gw: &Gateway, key: &str, prefix: &str, limit: usize) -> Vec<String> {
    let mut texts = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let mut path = format!("/locks?prefix={prefix}&limit={limit}");
        if let Some(cursor) = &cursor {
            path.push_str(&format!("&cursor={cursor}"));
        }
        let (status, page) = send(gw, Method::GET, &path, key, &[], None).await;
        assert_eq!(status, 200, "{path}: {page}");
        texts.push(page.to_string());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return texts,
        }
    }
    panic!("the listing did not end");
}

async fn listings_leak_no_names(gw: &Gateway) {
    for i in 0..6 {
        let (status, _) = send(
            gw,
            Method::POST,
            &format!("/locks/app:{i}"),
            TEAM_A,
            &[],
            None,
        )
        .await;
        assert_eq!(status, 201);
    }
    for i in 0..3 {
        let (status, _) = send(
            gw,
            Method::POST,
            &format!("/locks/other:{i}"),
            ADMIN,
            &[],
            None,
        )
        .await;
        assert_eq!(status, 201);
    }
    // Team B, one lock a page, from the top: its own locks and nothing of team A's, in the
    // locks or in any cursor.
    let texts = pages(gw, TEAM_B, "", 1).await;
    let all = texts.join("\n");
    assert!(!all.contains("app"), "team B saw team A's names: {all}");
    for i in 0..3 {
        assert!(all.contains(&format!("other:{i}")), "{all}");
    }
    // Whether anything is held under a foreign prefix is not told: the same empty page,
    // without a cursor, whatever is there.
    for prefix in ["app:", "app:1", "app:nothing-here"] {
        let path = format!("/locks?prefix={prefix}&limit=1");
        let (status, body) = send(gw, Method::GET, &path, TEAM_B, &[], None).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!(body, json!({"locks": []}), "{path}");
    }
    // A cursor serves only the key and the prefix that made it.
    let (_, first) = send(gw, Method::GET, "/locks?prefix=&limit=1", ADMIN, &[], None).await;
    let cursor = first["next_cursor"].as_str().expect("a cursor").to_owned();
    for (key, prefix) in [(TEAM_B, ""), (ADMIN, "app:"), (TEAM_A, "")] {
        let path = format!("/locks?prefix={prefix}&limit=1&cursor={cursor}");
        let (status, body) = send(gw, Method::GET, &path, key, &[], None).await;
        crate::support::assert_problem(status, &body, 400, "invalid-request");
        assert_eq!(body["field"], "cursor", "{body}");
    }
    let path = format!("/locks?prefix=&limit=1&cursor={cursor}");
    assert_eq!(send(gw, Method::GET, &path, ADMIN, &[], None).await.0, 200);
    // The admin sees everything, each lock once.
    let all = pages(gw, ADMIN, "", 2).await.join("\n");
    for i in 0..6 {
        assert_eq!(all.matches(&format!("\"app:{i}\"")).count(), 1, "{all}");
    }
}

// Listing cursors carry no names and a foreign prefix tells nothing, on `--dev`, Redis and a
// Cluster.
on_backends!(listings_leak_no_names with with_keys: dev, redis, cluster);

/// An idempotency key is bound to the API key that used it: another key sending it contends
/// as anyone would (409) and never gets the first caller's token; the first caller's retry
/// still finds its grant.
#[tokio::test]
async fn idempotency_keys_are_bound_to_the_api_key() {
    let gw = Gateway::start(with_keys(config(BackendChoice::Memory))).await;
    let key = [("idempotency-key", "6f1c1a9e-7d4b-4c1e-9a57-2b0f8a3e5d11")];
    let (status, first) = send(&gw, Method::POST, "/locks/app:i", TEAM_A, &key, None).await;
    assert_eq!(status, 201, "{first}");
    let (status, other) = send(&gw, Method::POST, "/locks/app:i", ADMIN, &key, None).await;
    crate::support::assert_problem(status, &other, 409, "lock-held");
    assert!(!other.to_string().contains(&token(&first)));
    let (status, replay) = send(&gw, Method::POST, "/locks/app:i", TEAM_A, &key, None).await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(token(&replay), token(&first));
}

/// Two `Authorization` headers are refused (400), whichever of them is valid, and without
/// echoing either.
#[tokio::test]
async fn two_authorization_headers_are_refused() {
    let app = lockgate::app::app(&with_keys(config(BackendChoice::Memory))).expect("app");
    for (first, second) in [(TEAM_B, ADMIN), (ADMIN, TEAM_B), (ADMIN, "junk")] {
        let req = Request::builder()
            .method(Method::DELETE)
            .uri("/locks/app:x?force=true")
            .header("authorization", format!("Bearer {first}"))
            .header("authorization", format!("Bearer {second}"))
            .body(Body::empty())
            .expect("request");
        let response = app.clone().oneshot(req).await.expect("infallible");
        assert_eq!(response.status(), 400);
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .expect("body")
            .to_bytes();
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains("/problems/invalid-request"), "{text}");
        assert!(!text.contains("key-0123456789"), "{text}");
    }
}

/// Two `Lock-Token` or two `Idempotency-Key` headers are refused (400 naming the header), as
/// two `Authorization` headers are, whichever of them is valid (the holder's token twice
/// included): nothing is renewed, released or granted. Which one would count is a guess.
#[tokio::test]
async fn two_lock_tokens_or_idempotency_keys_are_refused() {
    let app = lockgate::app::app(&config(BackendChoice::Memory)).expect("app");
    let call = async |method: Method, path: &str, headers: &[(&str, &str)]| {
        let mut req = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(Body::empty()).expect("request");
        let response = app.clone().oneshot(req).await.expect("infallible");
        let status = response.status().as_u16();
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .expect("body")
            .to_bytes();
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    };
    let (status, grant) = call(Method::POST, "/locks/app:two", &[]).await;
    assert_eq!(status, 201, "{grant}");
    let held = token(&grant);
    for (first, second) in [
        (held.as_str(), held.as_str()),
        (&held, UNISSUED_TOKEN),
        (UNISSUED_TOKEN, &held),
    ] {
        let tokens = [("lock-token", first), ("lock-token", second)];
        for method in [Method::PATCH, Method::DELETE] {
            let (status, problem) = call(method.clone(), "/locks/app:two", &tokens).await;
            crate::support::assert_problem(status, &problem, 400, "invalid-request");
            assert_eq!(problem["header"], "Lock-Token", "{method} {problem}");
            assert!(!problem.to_string().contains(&held), "{problem}");
        }
    }
    let (status, seen) = call(Method::GET, "/locks/app:two", &[]).await;
    assert_eq!((status, &seen["fence"]), (200, &grant["fence"]), "{seen}");
    let keys = [
        ("idempotency-key", "6f1c1a9e-7d4b-4c1e-9a57-2b0f8a3e5d11"),
        ("idempotency-key", "0b5e6a2c-1f3d-4e8b-a7c9-5d2e1f0a9b84"),
    ];
    let (status, problem) = call(Method::POST, "/locks/app:keys", &keys).await;
    crate::support::assert_problem(status, &problem, 400, "invalid-request");
    assert_eq!(problem["header"], "Idempotency-Key", "{problem}");
    let (status, seen) = call(Method::GET, "/locks/app:keys", &[]).await;
    assert_eq!(status, 404, "nothing granted: {seen}");
}

// Nothing of the request is repeated in an answer.

/// What no answer may repeat: looks like a password, and is a valid lock name, variant,
/// field name or key in spirit.
const SECRET: &str = "hunter2Sekrit";

/// A secret in every position a request has: the path, every query parameter, the headers,
/// every body field's value (as a string, as a number where a string is expected, nested),
/// a variant (`mode`), an unknown field's name (top level and nested), a metadata key and
/// value. No error repeats it (body or header; a success names the lock it acted on, as the
/// API says), and an error's `field` is a documented path of the API or absent (issue 49: `unknown variant`, unknown field names and metadata keys came back
/// in `detail` and `field`).
async fn no_answer_repeats_the_request(gw: &Gateway) {
    let s = SECRET;
    let lock = format!("/locks/echo:{s}");
    let bodies: Vec<Value> = vec![
        json!({ "mode": s }),
        json!({ s: 1 }),
        json!({ "ttl_ms": s }),
        json!({ "wait_ms": s }),
        json!({ "ttl_ms": 1, s: s }),
        json!({ "owner": 7, "metadata": { s: 1 } }),
        json!({ "metadata": { s: { s: [s] } } }),
        json!({ "metadata": { "k": s }, "ttl_ms": -1 }),
        json!({ "metadata": s }),
        json!({ "replicas": s }),
        json!({ "priority": s }),
        json!({ "fair": s }),
        json!({ "reentrant": s }),
        json!({ "min_hold_ms": s }),
        json!({ "max_hold_ms": s }),
        json!({ "names": [s, format!("{s} x")] }),
        json!({ "names": s }),
        json!({ "permits": s }),
        json!([s]),
        json!(s),
    ];
    /// Method, path, headers, body.
    type Sent<'a> = (
        reqwest::Method,
        String,
        Vec<(&'a str, String)>,
        Option<String>,
    );
    let mut requests: Vec<Sent> = Vec::new();
    for body in &bodies {
        for path in [
            lock.clone(),
            "/locks".to_owned(),
            format!("/semaphores/echo:{s}"),
        ] {
            for method in [reqwest::Method::POST, reqwest::Method::PATCH] {
                requests.push((method, path.clone(), vec![], Some(body.to_string())));
            }
        }
        requests.push((
            reqwest::Method::POST,
            format!("{lock}/hold"),
            vec![],
            Some(body.to_string()),
        ));
    }
    let raw_bodies = [
        format!("{{\"ttl_ms\": 1, \"{s}\""),
        format!("{{\"ttl_ms\": 1}} {s}"),
        s.to_owned(),
        format!("{{\"owner\": \"{s}\", \"ttl_ms\": 1e400}}"),
        format!("{{\"metadata\": {{\"{s}\": {{\"{s}\": 1e400}}}}}}"),
        format!("{{\"names\": [\"a\", \"b\"], \"metadata\": {{\"{s}\": \"\\ud800\"}}}}"),
    ];
    for raw in raw_bodies {
        requests.push((reqwest::Method::POST, lock.clone(), vec![], Some(raw)));
    }
    for path in [
        format!("/locks/{s}%20x"),
        format!("/locks/{s}%7Bx%7D"),
        format!("/locks?prefix={s}%20x"),
        format!("/locks?prefix=echo:&cursor={s}"),
        format!("/locks?prefix=echo:&limit={s}"),
        format!("/locks?{s}=1"),
        format!("/locks?name={s}%20x&name=b"),
        format!("/locks/events?prefix={s}%20x"),
        format!("/semaphores?prefix=echo:&cursor={s}"),
        format!("{lock}?force={s}"),
        format!("{lock}?hold={s}"),
        format!("/{s}"),
        format!("/locks/{s}/{s}"),
    ] {
        for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
            requests.push((method, path.clone(), vec![], None));
        }
    }
    for (header, value) in [
        ("lock-token", s.to_owned()),
        ("lock-token", format!("AAAAAAAAAAAAAAAAAAAAAA{s}.1")),
        ("idempotency-key", format!("{s}\u{7f}")),
        ("idempotency-key", s.to_owned()),
        ("authorization", format!("Bearer {s}")),
        ("authorization", format!("Basic {s}")),
        ("content-type", format!("text/{s}")),
        ("accept", format!("text/{s}")),
        ("traceparent", format!("00-{s}-01")),
        ("x-request-id", format!("{s}\u{1}")),
    ] {
        for method in [
            reqwest::Method::POST,
            reqwest::Method::PATCH,
            reqwest::Method::DELETE,
        ] {
            let header_value = value.clone();
            requests.push((
                method,
                lock.clone(),
                vec![(header, header_value)],
                Some("{}".to_owned()),
            ));
        }
    }
    let documented = documented_fields();
    let mut problems = 0;
    for (method, path, headers, body) in requests {
        let mut request = gw.http.request(method.clone(), gw.url(&path));
        for (name, value) in &headers {
            // Some values are not valid header bytes: reqwest refuses them, as a client would.
            match reqwest::header::HeaderValue::from_bytes(value.as_bytes()) {
                Ok(value) => request = request.header(*name, value),
                Err(_) => continue,
            }
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let what = format!("{method} {path} {headers:?}");
        // Raw HTTP: the headers are what is tested, each spelled as an attacker spells it.
        let response = tokio::time::timeout(Duration::from_secs(5), request.send())
            .await
            .unwrap_or_else(|_| panic!("{what}: no answer"))
            .expect("request");
        let status = response.status().as_u16();
        // A success names the lock it acted on, as the API says; only errors are looked at.
        if status < 400 {
            continue;
        }
        let echoed_header = response
            .headers()
            .iter()
            .filter(|(name, _)| *name != "x-request-id")
            .any(|(_, value)| value.as_bytes().windows(s.len()).any(|w| w == s.as_bytes()));
        assert!(!echoed_header, "{what}: a header repeats it");
        let text = response.text().await.expect("body");
        assert!(!text.contains(s), "{what}: {status} {text}");
        assert!(status < 500, "{what}: {status} {text}");
        if let Ok(problem) = serde_json::from_str::<Value>(&text)
            && let Some(field) = problem.get("field")
        {
            problems += 1;
            let field = field.as_str().expect("a string");
            assert!(
                documented.iter().any(|known| known == field),
                "{what}: field {field:?} is not a documented field: {text}"
            );
        }
    }
    assert!(problems > 20, "only {problems} answers named a field");
}

/// Every property name of the request bodies in the committed OpenAPI document, and their
/// dotted paths into arrays (`names[0]`), as an error's `field` may name them.
fn documented_fields() -> Vec<String> {
    let doc: Value = serde_json::from_str(include_str!("../../openapi/openapi.json")).expect("doc");
    let mut fields = Vec::new();
    for schema in doc["components"]["schemas"]
        .as_object()
        .expect("schemas")
        .values()
    {
        if let Some(properties) = schema["properties"].as_object() {
            for name in properties.keys() {
                fields.push(name.clone());
                for i in 0..64 {
                    fields.push(format!("{name}[{i}]"));
                }
            }
        }
    }
    fields.extend(["force", "hold", "prefix", "cursor", "limit", "name"].map(String::from));
    fields
}

on_backends!(no_answer_repeats_the_request: dev, redis);

// DNS rebinding and cross-site requests on a gateway without keys.

/// A request for `path` with `headers` (a `Host` among them overrides the URL's). Raw HTTP:
/// the `Host` and `Origin` a rebinding page sends are what is tested.
async fn with_headers(
    gw: &Gateway,
    method: reqwest::Method,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let mut request = gw.http.request(method.clone(), gw.url(path));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if method == reqwest::Method::POST {
        request = request.json(&json!({"ttl_ms": 30_000}));
    }
    let response = request.send().await.expect("request");
    (
        response.status().as_u16(),
        response.text().await.expect("body"),
    )
}

/// Issue 49's report: with `Host: rebind.attacker.example` a keyless gateway listed owners
/// and revoked locks for a page that had rebound its name to 127.0.0.1. It now answers only an
/// IP address, `localhost` or `--allowed-hosts`, and refuses a page of another origin that
/// changes a lock; clients that are not browsers, and the console (same origin), go on.
#[tokio::test]
async fn a_keyless_gateway_answers_only_its_own_hosts() {
    let mut configured = config(BackendChoice::Memory);
    configured.allowed_hosts = vec!["lockgate.test".to_owned()];
    let gw = Gateway::start(configured).await;
    let port = gw.url("").rsplit(':').next().expect("port").to_owned();
    let own = format!("127.0.0.1:{port}");
    let (status, _) = with_headers(
        &gw,
        reqwest::Method::POST,
        "/locks/rb:1",
        &[("content-type", "application/json")],
    )
    .await;
    assert_eq!(status, 201);
    let rebound = [("host", "rebind.attacker.example")];
    for (method, path) in [
        (reqwest::Method::GET, "/locks?prefix=rb:"),
        (reqwest::Method::GET, "/locks/rb:1"),
        (reqwest::Method::DELETE, "/locks/rb:1?force=true"),
        (reqwest::Method::GET, "/locks/events?prefix=rb:"),
        (reqwest::Method::POST, "/locks/rb:2"),
    ] {
        let (status, body) = with_headers(&gw, method.clone(), path, &rebound).await;
        assert_eq!(status, 403, "{method} {path}: {body}");
        assert!(body.contains("/problems/untrusted-origin"), "{body}");
    }
    assert_eq!(gw.inspect("rb:1").await.status(), 200, "still held");
    for host in ["localhost", own.as_str(), "lockgate.test", "[::1]"] {
        let (status, body) = with_headers(
            &gw,
            reqwest::Method::GET,
            "/locks?prefix=rb:",
            &[("host", host)],
        )
        .await;
        assert_eq!(status, 200, "Host {host}: {body}");
    }
    // A page of another origin may not change a lock; the console's own origin may.
    let origin_own = format!("http://{own}");
    let cases = [
        (vec![("origin", "https://evil.example")], 403),
        (vec![("origin", "null")], 403),
        (vec![("sec-fetch-site", "cross-site")], 403),
        (vec![("origin", "http://lockgate.test")], 201),
        (vec![("origin", origin_own.as_str())], 201),
        (vec![], 201),
    ];
    for (i, (headers, expected)) in cases.into_iter().enumerate() {
        let name = format!("/locks/rb:o{i}");
        let (status, body) = with_headers(&gw, reqwest::Method::POST, &name, &headers).await;
        assert_eq!(status, expected, "{headers:?}: {body}");
    }
    // Reading from another origin is the browser's to refuse (no CORS): answered.
    let (status, _) = with_headers(
        &gw,
        reqwest::Method::GET,
        "/locks/rb:1",
        &[("origin", "https://evil.example")],
    )
    .await;
    assert_eq!(status, 200);

    // With API keys a page cannot send a key: the Host is not looked at.
    let keyed = Gateway::start(with_keys(config(BackendChoice::Memory))).await;
    let bearer = format!("Bearer {ADMIN}");
    let headers = [
        ("host", "rebind.attacker.example"),
        ("authorization", &bearer),
    ];
    let (status, page) =
        with_headers(&keyed, reqwest::Method::GET, "/locks?prefix=a:", &headers).await;
    assert_eq!(status, 200, "{page}");
}
