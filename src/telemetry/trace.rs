//! OpenTelemetry traces, when asked for: one span per request, exported over OTLP/HTTP
//! (protobuf), continuing the caller's W3C `traceparent`.
//!
//! **Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is
//! set**, and `OTEL_SDK_DISABLED` / `OTEL_TRACES_EXPORTER=none` turn it off again, as the
//! OpenTelemetry specification has it. Everything else is read by the SDK from the standard
//! variables: `OTEL_EXPORTER_OTLP_HEADERS` (e.g. a collector's token; never logged),
//! `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_SERVICE_NAME` (default `lockgate`),
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` (default: follow the caller's sampling
//! decision, sample requests without one), `OTEL_BSP_*` for batching. Only `http/protobuf` is
//! spoken: another `OTEL_EXPORTER_OTLP_PROTOCOL` is a configuration error (exit 64), not a
//! silent fallback.
//!
//! Every request is a span but probes and scrapes (`/healthz`, `/readyz`, `/metrics`), which
//! would fill a trace store with a span every few seconds per pod.
//!
//! What a span holds (names from the OpenTelemetry HTTP conventions where they exist): the
//! method and route template (`POST /locks/{name}`), the status, `lockgate.operation`,
//! `lockgate.outcome` (the metrics' label), `lockgate.lock.name` (the decoded name of a
//! single-name route), `lockgate.wait_ms` (time spent waiting in line for the lock, when the
//! request waited), `lockgate.redis.round_trips` and the request id. Never a token, an API key
//! or its name, a header value or a query string (cursors are in queries). A hold stream's
//! span ends when its response starts (the lock is held from then on; its renewals are not
//! spans). 5xx answers mark the span as an error with the problem type as `error.type`.
//!
//! Why not `tracing-opentelemetry`: the request path has no tracing span on purpose (see
//! `http::gate`), so the span is built once, when the answer is known, from what the gate
//! already has. With tracing off, the request path pays one branch per request and a
//! thread-local read per Redis round trip and per wait: nothing measurable
//! (bench/README.md). The spans are handed to the SDK's batch processor, which exports from its
//! own thread and drops spans when its queue is full (a slow or absent collector never slows
//! requests or grows memory).
//!
//! The counters a span reports (round trips, wait) are kept in a thread-local set while the
//! request's future is polled ([`RequestSpan::enter`]): the backend and the lock engine record
//! into whatever request is being polled, without a parameter threaded through every layer.
//! Work a request hands to another task (a hold stream's renewals) is not counted.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanData, SpanExporter};

use super::throttle::{self, Throttle};
use crate::config::secrets::without_userinfo;

/// The exporter and what it needs, shared by every request.
#[derive(Debug)]
pub struct Tracing {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    propagator: TraceContextPropagator,
}

/// Whether an environment variable is set to something.
fn set(variable: &str) -> bool {
    std::env::var_os(variable).is_some_and(|value| !value.is_empty())
}

fn env_is(variable: &str, value: &str) -> bool {
    std::env::var(variable).is_ok_and(|set| set.trim().eq_ignore_ascii_case(value))
}

impl Tracing {
    /// The exporter the standard `OTEL_*` variables ask for, `None` when they ask for none, or
    /// the one line that says what is wrong with them.
    pub fn from_env() -> Result<Option<Arc<Self>>, String> {
        let asked = set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        if !asked || env_is("OTEL_SDK_DISABLED", "true") || env_is("OTEL_TRACES_EXPORTER", "none") {
            return Ok(None);
        }
        for variable in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Ok(protocol) = std::env::var(variable)
                && !protocol.is_empty()
                && protocol != "http/protobuf"
            {
                return Err(format!(
                    "{variable}={protocol}: lockgate exports traces over OTLP/HTTP with protobuf only; set it to http/protobuf (a collector's HTTP port, usually 4318)"
                ));
            }
        }
        if let Ok(exporter) = std::env::var("OTEL_TRACES_EXPORTER")
            && !exporter.is_empty()
            && exporter != "otlp"
        {
            return Err(format!(
                "OTEL_TRACES_EXPORTER={exporter}: lockgate exports traces over OTLP only (otlp, or none to turn them off)"
            ));
        }
        // The exporter's HTTP client speaks TLS to `https://` collectors with the process's
        // provider, installed here for the stores that need none (`--dev`).
        crate::tls::install_crypto_provider();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
            .map_err(|err| {
                // The message may quote the endpoint: never its credentials.
                let err = without_userinfo(&err.to_string());
                format!("cannot export traces as the OTEL_* variables say: {err}")
            })?;
        let mut resource = Resource::builder();
        let named = set("OTEL_SERVICE_NAME")
            || std::env::var("OTEL_RESOURCE_ATTRIBUTES")
                .is_ok_and(|attributes| attributes.contains("service.name="));
        if !named {
            resource = resource.with_service_name("lockgate");
        }
        let resource = resource
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(LoggedExporter {
                inner: exporter,
                failures: Throttle::new(throttle::WINDOW),
            })
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("lockgate");
        Ok(Some(Arc::new(Self {
            provider,
            tracer,
            propagator: TraceContextPropagator::new(),
        })))
    }

    /// Starts timing a request whose headers are `headers` (its `traceparent` and
    /// `tracestate`, if any, are the span's parent), on `route` (the template: `None` for a
    /// path no route matched) for the lock `name` (decoded; `None` for routes without one).
    pub fn start(
        &self,
        headers: &http::HeaderMap,
        route: Option<&str>,
        name: Option<&str>,
    ) -> Box<RequestSpan> {
        Box::new(RequestSpan {
            parent: self.propagator.extract(&Headers(headers)),
            started: SystemTime::now(),
            route: route.map(Box::from),
            name: name.map(Box::from),
            counters: Arc::new(Counters::default()),
        })
    }

    /// Exports what is left; blocks for up to the exporter's timeout.
    pub fn shutdown(&self) {
        if let Err(err) = self.provider.shutdown() {
            tracing::warn!(error = %err, "traces: the last spans were not exported");
        }
    }
}

/// The OTLP exporter, with its failures logged once per window (an unreachable collector
/// fails every batch).
#[derive(Debug)]
struct LoggedExporter {
    inner: opentelemetry_otlp::SpanExporter,
    failures: Throttle,
}

impl SpanExporter for LoggedExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let exported = self.inner.export(batch).await;
        if let Err(err) = &exported
            && let Some(left_out) = self.failures.admit("export")
        {
            tracing::warn!(error = %without_userinfo(&err.to_string()), spans, left_out, "traces: cannot export spans; they are dropped");
        }
        exported
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// What a request's span counts while the request runs.
#[derive(Debug, Default)]
struct Counters {
    round_trips: AtomicU32,
    waited_micros: AtomicU64,
}

thread_local! {
    /// The counters of the request being polled on this thread, if it is traced.
    static CURRENT: RefCell<Option<Arc<Counters>>> = const { RefCell::new(None) };
}

fn with_current(record: impl FnOnce(&Counters)) {
    // `try_with`: a thread being torn down has no request to count for.
    let _ = CURRENT.try_with(|current| {
        if let Ok(current) = current.try_borrow()
            && let Some(counters) = current.as_ref()
        {
            record(counters);
        }
    });
}

/// Counts one round trip to Redis for the request being polled, if it is traced.
pub fn round_trip() {
    with_current(|counters| {
        counters.round_trips.fetch_add(1, Ordering::Relaxed);
    });
}

thread_local! {
    /// Microseconds waited in line during the poll running on this thread, traced or not: the
    /// gate takes them after each poll of a request ([`take_poll_waited`]), to keep a request's
    /// intended waiting out of its latency.
    static POLL_WAITED: Cell<u64> = const { Cell::new(0) };
}

/// Adds `waited` (time spent waiting in line for a lock) to the request being polled: to its
/// span if it is traced, and to what [`take_poll_waited`] returns after this poll.
pub fn waited(waited: Duration) {
    let micros = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
    let _ = POLL_WAITED.try_with(|cell| cell.set(cell.get().saturating_add(micros)));
    with_current(|counters| {
        counters.waited_micros.fetch_add(micros, Ordering::Relaxed);
    });
}

/// The microseconds [`waited`] was told of since the last call on this thread (0 if none),
/// reset to 0: the waiting of the request just polled.
pub fn take_poll_waited() -> u64 {
    POLL_WAITED.try_with(|cell| cell.replace(0)).unwrap_or(0)
}

/// One request's span in the making.
#[derive(Debug)]
pub struct RequestSpan {
    parent: Context,
    started: SystemTime,
    route: Option<Box<str>>,
    name: Option<Box<str>>,
    counters: Arc<Counters>,
}

/// Restores the thread's previous request when dropped (also when the poll panics).
#[derive(Debug)]
pub struct Entered(Option<Arc<Counters>>);

impl Drop for Entered {
    fn drop(&mut self) {
        let previous = self.0.take();
        let _ = CURRENT.try_with(|current| {
            if let Ok(mut current) = current.try_borrow_mut() {
                *current = previous;
            }
        });
    }
}

/// What the finished request says about itself.
#[derive(Debug)]
pub struct Finished<'a> {
    pub method: &'a str,
    pub status: u16,
    pub operation: &'static str,
    pub outcome: &'static str,
    pub request_id: &'a str,
}

impl RequestSpan {
    /// Makes this request the one that Redis round trips and waits count for on this thread,
    /// until the guard is dropped (the end of one poll).
    pub fn enter(&self) -> Entered {
        let previous = CURRENT
            .try_with(|current| {
                current
                    .try_borrow_mut()
                    .ok()
                    .and_then(|mut current| current.replace(self.counters.clone()))
            })
            .ok()
            .flatten();
        Entered(previous)
    }

    /// Ends the span now and hands it to the exporter.
    pub fn finish(&self, tracing: &Tracing, finished: &Finished<'_>) {
        let route = self.route.as_deref().unwrap_or("unmatched");
        let mut attributes = Vec::with_capacity(10);
        attributes.extend([
            KeyValue::new("http.request.method", finished.method.to_owned()),
            KeyValue::new("http.response.status_code", i64::from(finished.status)),
            KeyValue::new("lockgate.operation", finished.operation),
            KeyValue::new("lockgate.outcome", finished.outcome),
            KeyValue::new("lockgate.request_id", finished.request_id.to_owned()),
            KeyValue::new(
                "lockgate.redis.round_trips",
                i64::from(self.counters.round_trips.load(Ordering::Relaxed)),
            ),
        ]);
        if let Some(route) = &self.route {
            attributes.push(KeyValue::new("http.route", route.to_string()));
        }
        if let Some(name) = &self.name {
            attributes.push(KeyValue::new("lockgate.lock.name", name.to_string()));
        }
        let waited = self.counters.waited_micros.load(Ordering::Relaxed);
        if waited > 0 {
            let millis = i64::try_from(waited / 1000).unwrap_or(i64::MAX);
            attributes.push(KeyValue::new("lockgate.wait_ms", millis));
        }
        let mut status = Status::Unset;
        if finished.status >= 500 {
            attributes.push(KeyValue::new("error.type", finished.outcome));
            status = Status::error(finished.outcome);
        }
        let mut span = tracing
            .tracer
            .span_builder(format!("{} {route}", finished.method))
            .with_kind(SpanKind::Server)
            .with_start_time(self.started)
            .with_attributes(attributes)
            .start_with_context(&tracing.tracer, &self.parent);
        span.set_status(status);
        span.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_go_to_the_entered_request_only() {
        let span = RequestSpan {
            parent: Context::new(),
            started: SystemTime::now(),
            route: None,
            name: None,
            counters: Arc::new(Counters::default()),
        };
        round_trip();
        {
            let _entered = span.enter();
            round_trip();
            round_trip();
            waited(Duration::from_millis(7));
        }
        round_trip();
        assert_eq!(span.counters.round_trips.load(Ordering::Relaxed), 2);
        assert_eq!(span.counters.waited_micros.load(Ordering::Relaxed), 7000);
    }
}
