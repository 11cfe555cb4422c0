//! Test support: real Redis processes, an in-process gateway on a socket, and small helpers.

pub mod gateway;
pub mod process;
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

/// Runs `cycles` acquire→release cycles from `clients` concurrent clients spread over `names`,
/// with a checker that sees every critical section: it fails on two holders of one name at
/// once, or on a fence that does not exceed the name's previous one.
pub async fn check_mutual_exclusion(
    gw: &gateway::Gateway,
    clients: usize,
    cycles: usize,
    names: &[&str],
) {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    #[derive(Default)]
    struct Section {
        inside: bool,
        last_fence: u64,
        entered: usize,
    }
    let sections: Arc<Mutex<HashMap<String, Section>>> = Arc::default();
    let next = Arc::new(AtomicUsize::new(0));
    let names: Arc<Vec<String>> = Arc::new(names.iter().map(|n| (*n).to_owned()).collect());
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (http, sections, next, names) = (
            gw.http.clone(),
            sections.clone(),
            next.clone(),
            names.clone(),
        );
        let base = gw.url("/locks/");
        tasks.push(tokio::spawn(async move {
            loop {
                let cycle = next.fetch_add(1, Ordering::Relaxed);
                if cycle >= cycles {
                    return;
                }
                let name = &names[cycle % names.len()];
                let url = format!("{base}{name}");
                let body = serde_json::json!({"wait_ms": 20000, "ttl_ms": 10000});
                let (status, grant) =
                    status_json(http.post(&url).json(&body).send().await.expect("acquire")).await;
                assert_eq!(status, 201, "cycle {cycle} on {name}: {grant}");
                let fence = grant["fence"].as_u64().expect("fence");
                {
                    let mut sections = sections.lock().expect("checker");
                    let section = sections.entry(name.clone()).or_default();
                    assert!(
                        !section.inside,
                        "two holders of {name} at once (fence {fence})"
                    );
                    assert!(
                        fence > section.last_fence,
                        "fence {fence} on {name} after {}",
                        section.last_fence
                    );
                    *section = Section {
                        inside: true,
                        last_fence: fence,
                        entered: section.entered + 1,
                    };
                }
                tokio::task::yield_now().await;
                sections
                    .lock()
                    .expect("checker")
                    .get_mut(name.as_str())
                    .expect("entered")
                    .inside = false;
                let token = grant["token"].as_str().expect("token");
                let released = http
                    .delete(&url)
                    .header("Lock-Token", token)
                    .send()
                    .await
                    .expect("release");
                assert_eq!(released.status(), 204, "release of {name}");
            }
        }));
    }
    for task in tasks {
        task.await.expect("client");
    }
    let sections = sections.lock().expect("checker");
    let entered: usize = sections.values().map(|s| s.entered).sum();
    assert_eq!(
        entered, cycles,
        "every cycle entered its critical section once"
    );
}

/// Reads NDJSON lines from a streaming response (a hold stream) as they come.
pub struct Lines {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl Lines {
    pub fn new(response: reqwest::Response) -> Self {
        Self {
            response,
            buffer: Vec::new(),
        }
    }

    /// The next line as JSON; `None` at the end of the stream.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                return Some(serde_json::from_slice(&line).expect("an NDJSON line"));
            }
            let chunk = self.response.chunk().await.expect("stream")?;
            self.buffer.extend_from_slice(&chunk);
        }
    }
}
