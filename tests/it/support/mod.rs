//! Test support: real Redis processes, an in-process gateway on a socket, and small helpers.

pub mod answers;
pub mod backends;
pub mod browser;
pub mod clock;
pub mod gateway;
pub mod history;
pub mod keys;
pub mod monitor;
pub mod postgres;
pub mod process;
pub mod proxy;
pub mod redis;
pub mod rng;
pub mod workload;

use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::Value;

/// An HTTP client for tests (rustls needs its crypto provider chosen first).
pub fn http_client() -> reqwest::Client {
    lockgate::tls::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client")
}

/// Polls `check` until it returns `Some`, or panics with `what` after `deadline`.
pub async fn eventually<T, F, Fut>(deadline: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let until = Instant::now() + deadline;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < until, "not within {deadline:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The `lockgate_waiters` gauge of a metrics exposition: requests waiting in the gateway.
pub fn waiters_in(exposition: &str) -> Option<usize> {
    exposition
        .lines()
        .find_map(|line| line.strip_prefix("lockgate_waiters "))
        .and_then(|value| value.trim().parse().ok())
}

/// The token of a grant's JSON body.
pub fn token(body: &Value) -> String {
    body["token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token in {body}"))
        .to_owned()
}

/// Status and JSON body of a response.
pub async fn status_json(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body = response.json::<Value>().await.unwrap_or(Value::Null);
    (status, body)
}

/// [`status_json`], failing if the body's text holds any of `tokens` (what an inspect or a
/// listing must never show).
pub async fn status_json_without(response: reqwest::Response, tokens: &[&str]) -> (u16, Value) {
    let status = response.status().as_u16();
    let raw = response.text().await.expect("body");
    for token in tokens {
        assert!(!raw.contains(token), "a token leaked: {raw}");
    }
    (status, serde_json::from_str(&raw).unwrap_or(Value::Null))
}

/// A token of the issued shape that no grant has.
pub const UNISSUED_TOKEN: &str = "AAAAAAAAAAAAAAAAAAAAAA.1763712000123456";

/// Asserts a problem document of the given status and kind, and returns it.
pub fn assert_problem(status: u16, body: &Value, expected_status: u16, kind: &str) {
    assert_eq!(status, expected_status, "{body}");
    assert_eq!(
        body["type"],
        format!("https://lockgate.dev/problems/{kind}"),
        "{body}"
    );
    assert_eq!(body["status"], expected_status, "{body}");
    assert!(
        body["title"].is_string() && body["detail"].is_string(),
        "{body}"
    );
}

/// Whether `key` exists, on a clone of `conn` (so polling closures need not borrow it).
pub async fn key_exists(conn: &::redis::aio::MultiplexedConnection, key: &str) -> bool {
    let mut conn = conn.clone();
    ::redis::cmd("EXISTS")
        .arg(key)
        .query_async::<bool>(&mut conn)
        .await
        .expect("EXISTS")
}

/// The value of `key` as a number, on a clone of `conn`.
pub async fn key_number(conn: &::redis::aio::MultiplexedConnection, key: &str) -> Option<u64> {
    let mut conn = conn.clone();
    ::redis::cmd("GET")
        .arg(key)
        .query_async::<Option<u64>>(&mut conn)
        .await
        .expect("GET")
}

/// Runs `cycles` acquire → (renew) → inspect → release cycles from `clients` concurrent clients
/// spread over `names`, records every operation, and checks the history (see [`history`]):
/// no two holders of a name at once, fences increasing, no refusal or vanished lock within a
/// holder's validity, no 5xx but 503. Every cycle must get its lock and release it (a release
/// that answers 503 is repeated, as a client would).
pub async fn check_mutual_exclusion(
    gw: &gateway::Gateway,
    clients: usize,
    cycles: usize,
    names: &[&str],
) {
    let mut workload = workload::Workload::new(clients, names);
    workload.cycles = Some(cycles);
    let history = workload::run(&[gw.url("")], &workload).await;
    let report = history.check();
    report.assert_clean(&test_name());
    let granted = report.grants();
    assert_eq!(granted, cycles, "every cycle got its lock: {report}");
    let unreleased = report.unreleased();
    if unreleased > 0 {
        let path = report.save(&test_name());
        panic!(
            "{unreleased} locks were never released: {report} (history: {})",
            path.display()
        );
    }
}

/// The running test's name (libtest names each test's thread after it), for file names.
pub fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .replace("::", "-")
}
