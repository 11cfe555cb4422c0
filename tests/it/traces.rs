//! OpenTelemetry traces over OTLP/HTTP: the real binary, a real Redis, and a collector that is
//! a few lines of hyper decoding what the gateway sends (protobuf, as a collector does).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;
use serde_json::json;
use tokio::net::TcpListener;

use crate::support::answers::Answered;
use crate::support::keys::{DEPLOYER_KEY, KEYS};
use crate::support::process::{ServerProcess, lockgate};
use crate::support::redis::RedisServer;
use crate::support::{eventually, waiters_in};

/// An OTLP/HTTP receiver: keeps every body posted to `/v1/traces`, answers 200.
struct Collector {
    port: u16,
    bodies: Arc<Mutex<Vec<Bytes>>>,
}

impl Collector {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = bodies.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let kept = kept.clone();
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let kept = kept.clone();
                    async move {
                        let path = req.uri().path().to_owned();
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        if path == "/v1/traces" {
                            kept.lock().unwrap().push(body);
                        }
                        Ok::<_, Infallible>(
                            Response::builder()
                                .header("content-type", "application/x-protobuf")
                                .body(Full::new(Bytes::new()))
                                .unwrap(),
                        )
                    }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                );
            }
        });
        Self { port, bodies }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spans(&self) -> Vec<Span> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .flat_map(|body| {
                ExportTraceServiceRequest::decode(body.as_ref())
                    .unwrap()
                    .resource_spans
            })
            .flat_map(|resource| resource.scope_spans)
            .flat_map(|scope| scope.spans)
            .collect()
    }

    fn raw(&self) -> Vec<u8> {
        self.bodies.lock().unwrap().concat()
    }
}

fn attribute<'a>(span: &'a Span, key: &str) -> Option<&'a AnyValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|value| value.value.as_ref())
}

fn int(span: &Span, key: &str) -> i64 {
    match attribute(span, key) {
        Some(AnyValue::IntValue(value)) => *value,
        other => panic!("{key} is not an integer in {span:?}: {other:?}"),
    }
}

fn text<'a>(span: &'a Span, key: &str) -> &'a str {
    match attribute(span, key) {
        Some(AnyValue::StringValue(value)) => value,
        other => panic!("{key} is not a string in {span:?}: {other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An acquire that waits, sent with a `traceparent`, is one server span in the caller's trace:
/// its parent is the caller's span, it names the lock and how long the request waited, counts
/// its Redis round trips, and nothing exported carries a token or an API key.
#[tokio::test]
async fn a_waiting_acquire_continues_the_callers_trace() {
    const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const PARENT: &str = "00f067aa0ba902b7";
    let collector = Collector::start().await;
    let redis = RedisServer::start();
    let endpoint = collector.endpoint();
    let server = ServerProcess::start(
        &["--redis-url", &redis.url()],
        &[
            ("LOCKGATE_API_KEYS", KEYS),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    )
    .await;
    let deployer = server.client(Some(DEPLOYER_KEY));
    let name = "deploy:traced";
    let held = deployer
        .acquire(name, &json!({"ttl_ms": 30000}), None, None)
        .await;
    let first = held.done(201).token;
    let waiter = tokio::spawn({
        let traceparent = format!("00-{TRACE_ID}-{PARENT}-01");
        let traced = deployer.clone().header("traceparent", &traceparent);
        let traced = traced.expect("a traceparent header");
        async move {
            let body = json!({"wait_ms": 10000});
            traced.acquire(name, &body, None, None).await
        }
    });
    eventually(Duration::from_secs(5), "the waiter is in line", || async {
        (waiters_in(&server.metrics().await?)? == 1).then_some(())
    })
    .await;
    // The wait the span must report: the lock stays held this long after the waiter queued.
    let held_for = Duration::from_millis(300);
    tokio::time::sleep(held_for).await;
    deployer.release(name, &first, None).await.done(204);
    let second = waiter.await.unwrap().done(201).token;
    deployer.release(name, &second, None).await.done(204);

    // Four requests, four spans: two acquires and two releases (the probes and scrapes of
    // the harness and of this test make none).
    let spans = eventually(Duration::from_secs(10), "four spans exported", || async {
        let spans = collector.spans();
        (spans.len() >= 4).then_some(spans)
    })
    .await;
    assert!(
        spans.iter().all(|span| span.name.contains("/locks/{name}")),
        "{spans:?}"
    );
    let waited = spans
        .iter()
        .find(|span| hex(&span.trace_id) == TRACE_ID)
        .unwrap_or_else(|| panic!("no span in the caller's trace: {spans:?}"));
    assert_eq!(hex(&waited.parent_span_id), PARENT, "{waited:?}");
    assert_eq!(waited.kind, SpanKind::Server as i32);
    assert_eq!(waited.name, "POST /locks/{name}");
    assert_eq!(text(waited, "lockgate.lock.name"), "deploy:traced");
    assert_eq!(text(waited, "http.route"), "/locks/{name}");
    assert_eq!(text(waited, "lockgate.operation"), "acquire");
    assert_eq!(text(waited, "lockgate.outcome"), "acquired");
    assert_eq!(int(waited, "http.response.status_code"), 201);
    let wait_ms = int(waited, "lockgate.wait_ms");
    assert!(
        (300..10_000).contains(&wait_ms),
        "waited {wait_ms} ms, held for {held_for:?} after it queued"
    );
    // At least the refused attempt and the granting one.
    assert!(int(waited, "lockgate.redis.round_trips") >= 2, "{waited:?}");
    let span_ms = (waited.end_time_unix_nano - waited.start_time_unix_nano) / 1_000_000;
    assert!(span_ms >= 300, "the span lasted {span_ms} ms");
    // The other requests start traces of their own, and an acquire that did not wait says so
    // by leaving the wait out.
    let others: Vec<_> = spans
        .iter()
        .filter(|span| hex(&span.trace_id) != TRACE_ID)
        .collect();
    assert_eq!(others.len(), 3, "{spans:?}");
    assert!(others.iter().all(|span| span.parent_span_id.is_empty()));
    assert!(
        others
            .iter()
            .all(|span| attribute(span, "lockgate.wait_ms").is_none())
    );

    let raw = collector.raw();
    for secret in [first.as_str(), second.as_str(), DEPLOYER_KEY, "deployer"] {
        assert!(
            !raw.windows(secret.len())
                .any(|window| window == secret.as_bytes()),
            "{secret} was exported"
        );
    }
}

/// Only OTLP/HTTP with protobuf is spoken: asking for gRPC is a configuration error (exit 64
/// with one line), not a gateway that silently exports nothing.
#[tokio::test]
async fn another_protocol_is_a_configuration_error() {
    let output = lockgate()
        .args(["--dev"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
        "{stderr}"
    );
    assert!(stderr.contains("http/protobuf"), "{stderr}");
}

/// A collector that is not there costs the requests nothing and the logs one line per 10 s:
/// spans are dropped, lock calls answer as usual.
#[tokio::test]
async fn an_absent_collector_is_logged_once_and_slows_nothing() {
    let closed = format!("http://127.0.0.1:{}", crate::support::redis::free_port());
    let server = ServerProcess::start(
        &["--dev"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &closed),
            ("OTEL_BSP_SCHEDULE_DELAY", "20"),
        ],
    )
    .await;
    let client = server.client(None);
    for i in 0..50 {
        let name = format!("absent-{i}");
        let started = std::time::Instant::now();
        let grant = client
            .acquire(&name, &json!({}), None, None)
            .await
            .done(201);
        client.release(&name, &grant.token, None).await.done(204);
        assert!(started.elapsed() < Duration::from_millis(500));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let logged = eventually(
        Duration::from_secs(5),
        "the export failure logged",
        || async {
            let logs = server.logs();
            logs.contains("cannot export spans").then_some(logs)
        },
    )
    .await;
    assert_eq!(logged.matches("cannot export spans").count(), 1, "{logged}");
}

/// A wrong endpoint is a configuration error whose line never quotes the credentials in it.
#[tokio::test]
async fn a_wrong_endpoint_is_refused_without_its_credentials() {
    let output = lockgate()
        .args(["--dev"])
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "https://collector:s3cret-pass@bad host:4318",
        )
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{stderr}");
    assert!(!stderr.contains("s3cret-pass"), "{stderr}");
}
