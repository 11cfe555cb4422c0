//! Logs an operator can read while Redis is down: a few lines per cause, not one per request
//! or per retry; nothing about withdrawing what was never sent.

use std::time::{Duration, Instant};

use crate::support::answers::Answered;
use crate::support::process::ServerProcess;
use crate::support::redis::RedisServer;

/// The WARN and ERROR lines among `lines`.
fn loud(lines: &[&str]) -> Vec<String> {
    lines
        .iter()
        .filter(|line| line.contains(" WARN ") || line.contains(" ERROR "))
        .map(|line| (*line).to_owned())
        .collect()
}

/// Redis down for 10 s under 20 requests waiting for a lock (and retrying as clients do):
/// at most 10 WARN or ERROR lines in those 10 s, and none about withdrawing an attempt that was
/// never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_for_10s_is_a_few_lines() {
    let mut redis = RedisServer::start();
    let server = ServerProcess::start(&["--redis-url", &redis.url()], &[]).await;
    let client = server.client(None);
    let body = serde_json::json!({"ttl_ms": 60_000});
    client.acquire("quiet", &body, None, None).await.done(201);
    let before = server.logs().lines().count();
    redis.stop();
    let until = Instant::now() + Duration::from_secs(10);
    let clients: Vec<_> = (0..20)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut answers = 0;
                while Instant::now() < until {
                    let left = until.saturating_duration_since(Instant::now());
                    let wait_ms = left.as_millis().min(2_000) as u64;
                    let body = serde_json::json!({"ttl_ms": 5_000, "wait_ms": wait_ms});
                    let sent = client.acquire("quiet", &body, None, None).await;
                    if let Ok(response) = sent {
                        answers += 1;
                        // A client that was told 503 retries after a short pause.
                        if response.status() == 503 {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
                answers
            })
        })
        .collect();
    let mut answers = 0;
    for client in clients {
        answers += client.await.expect("client");
    }
    let logs = server.logs();
    let lines: Vec<&str> = logs.lines().skip(before).collect();
    let loud = loud(&lines);
    redis.restart();
    eprintln!("{} loud lines in 10 s:\n{}", loud.len(), loud.join("\n"));
    assert!(answers >= 20, "{answers} answers");
    assert!(
        loud.len() <= 10,
        "{} loud lines in 10 s:\n{}",
        loud.len(),
        loud.join("\n")
    );
    assert!(
        !logs.contains("could not withdraw"),
        "a withdrawal of what was never sent:\n{logs}"
    );
}

/// A wrong password is a mistake to fix, not an outage to wait out: logged at error level,
/// naming the setting, once per window however many requests fail on it.
#[tokio::test]
async fn a_wrong_password_names_the_setting_to_fix() {
    let redis = RedisServer::start();
    let _: () = redis
        .query(
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("requirepass")
                .arg("right-password"),
        )
        .expect("CONFIG SET requirepass");
    let url = format!("redis://:wrong-password@127.0.0.1:{}", redis.port());
    let server = ServerProcess::start(&[], &[("LOCKGATE_REDIS_URL", &url)]).await;
    let client = server.client(None);
    for _ in 0..20 {
        let answer = client
            .acquire("auth", &serde_json::json!({}), None, None)
            .await;
        assert_eq!(answer.status(), 503);
    }
    let logs = server.logs();
    let named: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains(" ERROR ") && line.contains("the user or password is wrong"))
        .collect();
    assert_eq!(named.len(), 1, "{logs}");
    assert!(
        !logs.contains("cannot reach the backend yet"),
        "a refused password is not an unreachable backend:\n{logs}"
    );
    assert!(
        !logs.contains("wrong-password"),
        "the password is never logged:\n{logs}"
    );
}
