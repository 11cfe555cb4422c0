//! Operating lockgate: request ids, what the logs never contain, and TLS with an ACL user to
//! Redis.

use std::time::Duration;

use axum::http::Method;
use lockgate::config::BackendChoice;
use serde_json::{Value, json};

use crate::support::answers::Answered;
use crate::support::gateway::{Gateway, config, redis_config};
use crate::support::keys::{DEPLOYER_KEY, KEYS, READER_KEY, SCRAPER_KEY, call};
use crate::support::process::ServerProcess;
use crate::support::redis::RedisServer;
use crate::support::{Lines, eventually, key_exists, status_json, token, waiters_in};

/// Every answer carries a request id: the client's when it sent a sensible one, else a new one.
#[tokio::test]
async fn request_ids_are_echoed_or_generated() {
    let app = lockgate::app::app(&config(BackendChoice::Memory)).expect("valid config");
    let (_, headers, _) = call(
        &app,
        Method::GET,
        "/healthz",
        None,
        &[("x-request-id", "trace-42")],
    )
    .await;
    assert_eq!(headers["x-request-id"], "trace-42");
    let (_, first, _) = call(&app, Method::POST, "/locks/a", None, &[]).await;
    let (_, second, _) = call(&app, Method::GET, "/nowhere", None, &[("x-request-id", "")]).await;
    let (first, second) = (&first["x-request-id"], &second["x-request-id"]);
    assert!(!first.is_empty() && !second.is_empty());
    assert_ne!(first, second);
}

/// A full run with API keys and debug logging: no token, API key, idempotency key or
/// Authorization header ever reaches the logs, and every request has its access line.
#[tokio::test]
async fn logs_never_contain_tokens_or_keys() {
    let redis = RedisServer::start();
    let mut server = ServerProcess::start(
        &["--redis-url", &redis.url(), "--log-format", "json"],
        &[("RUST_LOG", "debug"), ("LOCKGATE_API_KEYS", KEYS)],
    )
    .await;
    let http = crate::support::http_client();
    let auth = format!("Bearer {DEPLOYER_KEY}");
    let mut secrets = vec![
        DEPLOYER_KEY.to_owned(),
        READER_KEY.to_owned(),
        SCRAPER_KEY.to_owned(),
    ];
    let mut requests = 0;
    let url = |path: &str| server.url(path);

    let idempotency_key = "idem-0123456789abcdef-key";
    secrets.push(idempotency_key.to_owned());
    let mut grant = Value::Null;
    for _ in 0..2 {
        let response = http
            .post(url("/locks/deploy:a"))
            .header("authorization", &auth)
            .header("idempotency-key", idempotency_key)
            .json(&json!({"ttl_ms": 10000}))
            .send()
            .await
            .unwrap();
        requests += 1;
        assert!([200, 201].contains(&response.status().as_u16()));
        grant = response.json().await.unwrap();
    }
    let held = token(&grant);
    secrets.push(held.clone());
    let renewed = http
        .patch(url("/locks/deploy:a"))
        .header("authorization", &auth)
        .header("lock-token", &held)
        .json(&json!({"ttl_ms": 20000}))
        .send()
        .await
        .unwrap();
    requests += 1;
    assert_eq!(renewed.status(), 200);
    // A wrong token (a real one, of another lock) and a bad key.
    let (_, other) = status_json(
        http.post(url("/locks/deploy:b"))
            .header("authorization", &auth)
            .send()
            .await
            .unwrap(),
    )
    .await;
    requests += 1;
    secrets.push(token(&other));
    let refused = http
        .delete(url("/locks/deploy:a"))
        .header("authorization", &auth)
        .header("lock-token", token(&other))
        .send()
        .await
        .unwrap();
    requests += 1;
    assert_eq!(refused.status(), 409);
    let bad_key = "bad-key-that-must-not-be-logged";
    secrets.push(bad_key.to_owned());
    let unauthorized = http
        .get(url("/locks/deploy:a"))
        .header("authorization", format!("Bearer {bad_key}"))
        .send()
        .await
        .unwrap();
    requests += 1;
    assert_eq!(unauthorized.status(), 401);
    let forbidden = http
        .get(url("/locks/jobs:1"))
        .header("authorization", &auth)
        .send()
        .await
        .unwrap();
    requests += 1;
    assert_eq!(forbidden.status(), 403);
    // A hold stream, and a waiter that gets a lock on release.
    let stream = http
        .post(url("/locks/deploy:c/hold"))
        .header("authorization", &auth)
        .json(&json!({"ttl_ms": 1000}))
        .send()
        .await
        .unwrap();
    requests += 1;
    let mut lines = Lines::new(stream);
    let acquired = lines.next().await.expect("acquired");
    secrets.push(token(&acquired));
    assert_eq!(lines.next().await.expect("renewed")["event"], "renewed");
    drop(lines);
    let waiter = tokio::spawn({
        let (http, url, auth) = (http.clone(), url("/locks/deploy:a"), auth.clone());
        async move {
            http.post(url)
                .header("authorization", auth)
                .json(&json!({"wait_ms": 5000}))
                .send()
                .await
        }
    });
    requests += 1;
    eventually(Duration::from_secs(5), "the waiter is in line", || async {
        let metrics = http
            .get(url("/metrics"))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        (waiters_in(&metrics) == Some(1)).then_some(())
    })
    .await;
    let released = http
        .delete(url("/locks/deploy:a"))
        .header("authorization", &auth)
        .header("lock-token", &held)
        .send()
        .await
        .unwrap();
    requests += 1;
    assert_eq!(released.status(), 204);
    let (status, next) = status_json(waiter.await.unwrap().unwrap()).await;
    assert_eq!(status, 201, "{next}");
    secrets.push(token(&next));

    server.signal("TERM");
    assert_eq!(
        server.exit_within(Duration::from_secs(10)).await.code(),
        Some(0)
    );
    let logs = server.logs();
    for secret in &secrets {
        assert!(
            !logs.contains(secret.as_str()),
            "the logs contain {secret:?}:\n{logs}"
        );
    }
    assert!(!logs.to_ascii_lowercase().contains("bearer"), "{logs}");
    assert!(
        !logs.to_ascii_lowercase().contains("authorization"),
        "{logs}"
    );
    let access: Vec<Value> = logs
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["target"] == "lockgate::access")
        .collect();
    assert!(
        access.len() >= requests,
        "{} access lines for {requests} requests:\n{logs}",
        access.len()
    );
    assert!(
        access
            .iter()
            .all(|line| line["fields"]["request_id"].is_string())
    );
}

/// TLS to Redis with a CA given by file contents (`--redis-ca-file`), as an ACL user: works
/// with the right CA and password, and fails (503, no hang) without the CA or with a wrong
/// password.
#[tokio::test]
async fn tls_and_acl_to_redis() {
    let ca_key = rcgen::KeyPair::generate().expect("ca key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "lockgate test CA");
    let ca = ca_params.self_signed(&ca_key).expect("ca cert");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let server_key = rcgen::KeyPair::generate().expect("server key");
    let server_params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("server params");
    let server_cert = server_params
        .signed_by(&server_key, &issuer)
        .expect("server cert");

    let redis = RedisServer::start_tls(&server_cert.pem(), &server_key.serialize_pem(), &ca.pem());
    let rules = ["~lockgate:*", "&lockgate:*", "+@all"];
    redis.acl_user("lockgate", "acl-password-0123", &rules);
    let url = |password: &str| {
        format!(
            "rediss://lockgate:{password}@127.0.0.1:{}",
            redis.tls_port()
        )
    };

    let mut good = redis_config(&url("acl-password-0123"));
    good.redis_ca = Some(ca.pem().into_bytes());
    let gw = Gateway::start(good).await;
    let locks = gw.locks();
    let grant = locks.acquire("tls:1", json!({})).await.done(201);
    let conn = redis.conn().await;
    assert!(key_exists(&conn, "lockgate:{tls:1}").await);
    locks.release("tls:1", &grant.token).await.done(204);

    let mut wrong_password = redis_config(&url("wrong-password"));
    wrong_password.redis_ca = Some(ca.pem().into_bytes());
    let untrusted = redis_config(&url("acl-password-0123"));
    for config in [wrong_password, untrusted] {
        let gw = Gateway::start(config).await;
        let started = std::time::Instant::now();
        gw.locks()
            .acquire("tls:2", json!({}))
            .await
            .refused(503, "backend-unavailable");
        assert!(started.elapsed() < Duration::from_secs(3));
    }
}

/// `--metrics-listen` serves `/metrics` alone on its own address, with no key although the
/// main listener wants one (`--metrics-auth required`); no lock route answers there; and no
/// token, API key, idempotency key or Authorization value is in the exposition.
#[tokio::test]
async fn a_metrics_listener_serves_metrics_alone() {
    let port = crate::support::redis::free_port();
    let metrics_addr = format!("127.0.0.1:{port}");
    let server = ServerProcess::start(
        &[
            "--dev",
            "--metrics-auth",
            "required",
            "--metrics-listen",
            &metrics_addr,
        ],
        &[("LOCKGATE_API_KEYS", KEYS)],
    )
    .await;
    let http = crate::support::http_client();
    let auth = format!("Bearer {DEPLOYER_KEY}");
    let idempotency_key = "idem-metrics-0123456789";
    let grant: Value = http
        .post(server.url("/locks/deploy:m"))
        .header("authorization", &auth)
        .header("idempotency-key", idempotency_key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let held = token(&grant);
    let main = http.get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(
        main.status(),
        401,
        "the main listener's /metrics wants a key"
    );
    let scrape = http
        .get(format!("http://{metrics_addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(scrape.status(), 200);
    let exposition = scrape.text().await.unwrap();
    assert!(
        exposition.contains("lockgate_requests_total"),
        "{exposition}"
    );
    for secret in [
        held.as_str(),
        DEPLOYER_KEY,
        READER_KEY,
        SCRAPER_KEY,
        idempotency_key,
        auth.as_str(),
    ] {
        assert!(
            !exposition.contains(secret),
            "the exposition holds {secret}"
        );
    }
    for (method, path) in [
        (reqwest::Method::POST, "/locks/deploy:m"),
        (reqwest::Method::GET, "/locks/deploy:m"),
        (reqwest::Method::GET, "/locks"),
        (reqwest::Method::GET, "/healthz"),
    ] {
        let answer = http
            .request(method.clone(), format!("http://{metrics_addr}{path}"))
            .header("authorization", &auth)
            .send()
            .await
            .unwrap();
        assert_eq!(
            answer.status(),
            404,
            "{method} {path} on the metrics listener"
        );
    }
}

/// GitHub's anchor for a Markdown heading: lower case, punctuation but `-` and `_` dropped,
/// spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every alert has a `runbook_url` into docs/runbook.md, and each names a heading that exists
/// there; so do the runbook's own links to its sections.
#[test]
fn every_alert_points_at_a_runbook_section_that_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let runbook = std::fs::read_to_string(root.join("docs/runbook.md")).expect("runbook");
    let anchors: Vec<String> = runbook
        .lines()
        .filter_map(|line| line.strip_prefix('#'))
        .map(|heading| anchor(heading.trim_start_matches('#')))
        .collect();
    let rules = std::fs::read_to_string(root.join("deploy/prometheus/alerts.yaml")).expect("rules");
    let alerts = rules.matches("- alert:").count();
    let urls: Vec<&str> = rules
        .lines()
        .filter_map(|line| line.trim().strip_prefix("runbook_url:"))
        .map(|url| url.trim().trim_matches('"'))
        .collect();
    assert_eq!(urls.len(), alerts, "every alert needs a runbook_url");
    let links = runbook
        .match_indices("](#")
        .map(|(at, _)| &runbook[at + 2..])
        .map(|rest| &rest[..rest.find(')').expect("link end")]);
    for url in urls.iter().copied().chain(links) {
        let (_, section) = url.split_once('#').expect("an anchor");
        assert!(
            anchors.iter().any(|a| a == section),
            "{url} names no heading of docs/runbook.md"
        );
    }
}
