//! Test support: real Redis processes, an in-process gateway on a socket, and small helpers.

pub mod gateway;
pub mod proxy;
pub mod redis;

use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::Value;

/// An HTTP client for tests (rustls needs its crypto provider chosen first).
pub fn http_client() -> reqwest::Client {
    lockgate::install_crypto_provider();
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

/// Status and JSON body of a response.
pub async fn status_json(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body = response.json::<Value>().await.unwrap_or(Value::Null);
    (status, body)
}

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
