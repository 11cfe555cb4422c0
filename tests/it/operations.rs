//! Operating lockgate: request ids, what the logs never contain, and TLS with an ACL user to
//! Redis.

use std::time::Duration;

use axum::http::Method;
use lockgate::config::BackendChoice;
use serde_json::{Value, json};

use lockgate::client::Client;
use lockgate::http::dto::RenewBody;

use crate::support::answers::{Answered, json_of};
use crate::support::gateway::{Gateway, config, redis_config};
use crate::support::keys::{DEPLOYER_KEY, KEYS, READER_KEY, SCRAPER_KEY, call};
use crate::support::process::ServerProcess;
use crate::support::redis::RedisServer;
use crate::support::{eventually, key_exists, token, waiters_in};

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
    let deployer = server.client(Some(DEPLOYER_KEY));
    let mut secrets = vec![
        DEPLOYER_KEY.to_owned(),
        READER_KEY.to_owned(),
        SCRAPER_KEY.to_owned(),
    ];
    let mut requests = 0;

    let idempotency_key = "idem-0123456789abcdef-key";
    secrets.push(idempotency_key.to_owned());
    let ttl = |ms: u64| json!({ "ttl_ms": ms });
    let mut held = String::new();
    for _ in 0..2 {
        let grant = deployer
            .acquire("deploy:a", &ttl(10000), Some(idempotency_key), None)
            .await;
        requests += 1;
        let status = grant.status();
        assert!([200, 201].contains(&status));
        held = grant.done(status).token;
    }
    secrets.push(held.clone());
    let renewal = RenewBody {
        ttl_ms: Some(20000),
        ..RenewBody::default()
    };
    let renewed = deployer.renew("deploy:a", &held, &renewal, None).await;
    requests += 1;
    renewed.done(200);
    // A wrong token (a real one, of another lock) and a bad key.
    let other = deployer.acquire("deploy:b", &json!({}), None, None).await;
    requests += 1;
    secrets.push(other.done(201).token);
    let refused = deployer
        .release("deploy:a", secrets.last().unwrap(), None)
        .await;
    requests += 1;
    refused.refused(409, "not-owner");
    let bad_key = "bad-key-that-must-not-be-logged";
    secrets.push(bad_key.to_owned());
    let unauthorized = server.client(Some(bad_key)).inspect("deploy:a").await;
    requests += 1;
    unauthorized.refused(401, "unauthorized");
    let forbidden = deployer.inspect("jobs:1").await;
    requests += 1;
    forbidden.refused(403, "forbidden");
    // A hold stream, and a waiter that gets a lock on release.
    let mut lines = deployer.hold("deploy:c", &ttl(1000)).await.done(200);
    requests += 1;
    let acquired = lines.next().await.expect("acquired");
    secrets.push(token(&acquired));
    assert_eq!(lines.next().await.expect("renewed")["event"], "renewed");
    drop(lines);
    let waiter = tokio::spawn({
        let deployer = deployer.clone();
        async move {
            deployer
                .acquire("deploy:a", &json!({"wait_ms": 5000}), None, None)
                .await
        }
    });
    requests += 1;
    eventually(Duration::from_secs(5), "the waiter is in line", || async {
        let metrics = deployer.metrics().await.done(200);
        (waiters_in(&metrics) == Some(1)).then_some(())
    })
    .await;
    let released = deployer.release("deploy:a", &held, None).await;
    requests += 1;
    released.done(204);
    let (status, next) = json_of(waiter.await.unwrap());
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
    let deployer = server.client(Some(DEPLOYER_KEY));
    let idempotency_key = "idem-metrics-0123456789";
    let grant = deployer
        .acquire("deploy:m", &json!({}), Some(idempotency_key), None)
        .await;
    let held = grant.done(201).token;
    // The main listener's /metrics wants a key.
    server
        .client(None)
        .metrics()
        .await
        .refused(401, "unauthorized");
    let metrics_base = format!("http://{metrics_addr}");
    let scrape = Client::new(&metrics_base, None).expect("a client");
    let exposition = scrape.metrics().await.done(200);
    assert!(
        exposition.contains("lockgate_requests_total"),
        "{exposition}"
    );
    let auth = format!("Bearer {DEPLOYER_KEY}");
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
    let http = crate::support::http_client();
    for (method, path) in [
        (reqwest::Method::POST, "/locks/deploy:m"),
        (reqwest::Method::GET, "/locks/deploy:m"),
        (reqwest::Method::GET, "/locks"),
        (reqwest::Method::GET, "/healthz"),
    ] {
        // Raw HTTP: the metrics listener's 404s are axum's own, not the API's problem documents.
        let answer = http
            .request(method.clone(), format!("{metrics_base}{path}"))
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
