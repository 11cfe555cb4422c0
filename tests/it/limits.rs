//! What protects the gateway: the concurrency limit, the request timeout, and requests larger
//! than the HTTP server's first read.

use std::time::Duration;

use lockgate::config::BackendChoice;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::gateway::{Gateway, config};
use crate::support::{assert_problem, eventually, status_json};

/// Beyond the concurrency limit requests answer 503 `overloaded` with Retry-After (probes
/// still answer); a client that sends its head and then stalls holds a slot only until the
/// request timeout.
#[tokio::test]
async fn the_concurrency_limit_and_the_request_timeout_protect_the_gateway() {
    let mut config = config(BackendChoice::Memory);
    config.limits.max_waiters = 2;
    config.max_concurrent_requests = 3;
    config.request_timeout = Duration::from_millis(1500);
    let gw = Gateway::start(config).await;
    let addr = gw.url("").trim_start_matches("http://").to_owned();
    // Three clients announce a body and never send it: each holds a slot.
    let mut stalled = Vec::new();
    for i in 0..3 {
        let mut stream = tokio::net::TcpStream::connect(&addr)
            .await
            .expect("connect");
        let head = format!(
            "POST /locks/stall:{i} HTTP/1.1\r\nhost: localhost\r\ncontent-length: 100\r\n\r\n{{"
        );
        stream.write_all(head.as_bytes()).await.expect("write head");
        stalled.push(stream);
    }
    let (status, body) = eventually(Duration::from_secs(1), "the limit is reached", || async {
        let response = gw.inspect("free").await;
        let retry_after = response.headers().get("retry-after").cloned();
        let (status, body) = status_json(response).await;
        (status == 503).then(|| {
            assert!(retry_after.is_some(), "{body}");
            (status, body)
        })
    })
    .await;
    assert_problem(status, &body, 503, "overloaded");
    let health = gw.client().health(false, Duration::from_secs(5)).await;
    assert_eq!(health.expect("an answer"), 200, "the probes take no slot");
    // The stalled requests time out and give their slots back.
    for stream in &mut stalled {
        let mut answer = vec![0u8; 1024];
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
            .await
            .expect("an answer within the request timeout")
            .expect("read");
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains("/problems/timeout"), "{answer}");
    }
    assert_eq!(gw.inspect("free").await.status(), 404);
}

/// hyper reads a connection into an 8 KiB buffer at first, growing it as reads fill it. Larger
/// heads and bodies, and several requests pipelined in one write, are still read whole.
#[tokio::test]
async fn requests_larger_than_the_first_read_buffer_are_read_whole() {
    let gw = Gateway::start(config(BackendChoice::Memory)).await;
    let addr = gw.url("").trim_start_matches("http://").to_owned();
    let body = format!(r#"{{"ttl_ms": 60000}}{}"#, " ".repeat(3000));
    let acquire = format!(
        "POST /locks/large:head HTTP/1.1\r\nhost: localhost\r\nx-padding: {}\r\ncontent-length: {}\r\n\r\n{body}",
        "p".repeat(6000),
        body.len()
    );
    let inspect = "GET /locks/large:head HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n";
    let mut stream = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    stream
        .write_all(format!("{acquire}{inspect}").as_bytes())
        .await
        .expect("write both requests at once");
    let mut answers = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answers))
        .await
        .expect("both answers, then the connection closes")
        .expect("read");
    let answers = String::from_utf8_lossy(&answers);
    let statuses: Vec<&str> = answers
        .match_indices("HTTP/1.1 ")
        .map(|(at, _)| &answers[at + 9..at + 12])
        .collect();
    assert_eq!(statuses, ["201", "200"], "{answers}");
    assert!(answers.contains(r#""held":true"#), "{answers}");
}

/// Request heads past `--max-header-bytes` (32 KiB by default) get 431 problem+json and the
/// connection is closed; 100 KB of headers is refused, a 20 KB one served.
#[tokio::test]
async fn oversized_headers_get_431_problem_json() {
    let gw = Gateway::start(config(BackendChoice::Memory)).await;
    let addr = gw.url("").trim_start_matches("http://").to_owned();
    for (padding, status) in [(20_000, "200"), (100_000, "431")] {
        let mut stream = tokio::net::TcpStream::connect(&addr)
            .await
            .expect("connect");
        let head = format!(
            "GET /healthz HTTP/1.1\r\nhost: localhost\r\nx-padding: {}\r\nconnection: close\r\n\r\n",
            "p".repeat(padding)
        );
        stream.write_all(head.as_bytes()).await.expect("write");
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
            .await
            .expect("an answer, then the connection closes")
            .expect("read");
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{answer}"
        );
        if status == "431" {
            assert!(
                answer.contains("content-type: application/problem+json"),
                "{answer}"
            );
            let body = answer.split("\r\n\r\n").nth(1).expect("a body");
            let problem: serde_json::Value = serde_json::from_str(body).expect("json");
            assert_problem(431, &problem, 431, "headers-too-large");
            assert_eq!(problem["max_header_bytes"], 32768);
        }
    }
}

/// What hyper refuses before lockgate sees a request (a malformed request line or header, a
/// head past the HTTP layer's own limit) is answered with problem+json too, and the
/// connection closed; an answer written before it on the same connection is left as it was.
#[tokio::test]
async fn unparseable_requests_get_problem_json() {
    let gw = Gateway::start(config(BackendChoice::Memory)).await;
    let addr = gw.url("").trim_start_matches("http://").to_owned();
    let huge = format!(
        "GET /healthz HTTP/1.1\r\nhost: localhost\r\nx-padding: {}\r\n\r\n",
        "p".repeat(200_000)
    );
    for (request, status, kind) in [
        ("GARBAGE\r\n\r\n".to_owned(), "400", "invalid-request"),
        (
            "GET /healthz HTTP/1.1\r\nnot a header\r\n\r\n".to_owned(),
            "400",
            "invalid-request",
        ),
        (
            "GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\nGARBAGE\r\n\r\n".to_owned(),
            "400",
            "invalid-request",
        ),
        (huge, "431", "headers-too-large"),
    ] {
        let mut stream = tokio::net::TcpStream::connect(&addr)
            .await
            .expect("connect");
        // The server may close before it has read all of a huge head: what it answered counts.
        let _ = stream.write_all(request.as_bytes()).await;
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
            .await
            .expect("an answer, then the connection closes");
        let answer = String::from_utf8_lossy(&answer);
        // The last answer: a status line at the start or after a previous answer's body.
        let last = answer.rfind("\nHTTP/1.1 ").map_or(0, |at| at + 1);
        let (head, body) = answer[last..]
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("head and body: {answer:?}"));
        assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{answer}");
        assert!(
            head.contains("content-type: application/problem+json"),
            "{head}"
        );
        let problem: serde_json::Value = serde_json::from_str(body).expect("json");
        let code: u16 = status.parse().unwrap();
        assert_problem(code, &problem, code, kind);
        if last > 0 {
            assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        }
    }
}
