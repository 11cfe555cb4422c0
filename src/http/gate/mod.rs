//! The one middleware every request goes through, which routes it too. In order, it
//!
//! 1. finds the request's route in the route table ([`super::dispatch`]): the handler to
//!    call, and the [`Operation`] the request is (so the scope it needs, its timeout class,
//!    its metrics' label); no route is a 404 (`invalid-name` under `/locks/`), a route
//!    without the method a 405;
//! 2. gives the request an id (the client's `x-request-id` when it is sensible, else a new
//!    one) and echoes it on the response, and refuses a head (request line and headers) over
//!    `--max-header-bytes` (431 `headers-too-large`, closing the connection);
//! 3. enforces the global concurrency limit (503 `overloaded`; probes and metrics exempt);
//! 4. decodes and validates the lock name the path names, once ([`ResolvedName`]: the handler
//!    acts on that same value), authenticates the bearer key when API keys are configured (401
//!    `unauthorized`; two `Authorization` headers are 400) and checks, once, that its scopes
//!    allow the operation on that name (403 `forbidden`); on a lease's or a listing's route,
//!    refuses a query parameter the route's document does not list, or a `Lock-Token` where
//!    it lists none (400 `invalid-request`: `?ttl_ms=` is not a setting, and ignoring it
//!    would grant a lease shorter than asked; a holder's token on a semaphore's acquire would
//!    take a second permit);
//! 5. bounds the time to answer (503 `timeout`): `--request-timeout`, plus `--max-wait` for
//!    an acquire or hold stream, which may wait that long for its lock, plus the longest
//!    replica wait a request may ask for (`replica_timeout_ms`) for the operations that can ask
//!    for one, so that a request is never cut off while waiting for what it asked. A renewal
//!    or release cut off all the same may have taken effect: it answers 503 `outcome-unknown`
//!    (both are safe to repeat). Reading the body has its own bound, the request timeout: see
//!    [`super::extract::JsonBody`];
//! 6. calls the handler found, and turns its panic into a 500 problem document instead of a
//!    dropped connection;
//! 7. records the request in the metrics and writes one log line: info, or warn with the
//!    cause for server errors (the client only got a generic detail), once per outcome per
//!    window (`telemetry::throttle`; the rest at info, with a count on the next warn line).
//!
//! Never logged: tokens, keys, the Authorization header, query strings, bodies.
//!
//! Why one hand-written layer and not tower-http's `TraceLayer`, `CatchPanicLayer`,
//! `TimeoutLayer`, `ConcurrencyLimitLayer` and `RequestIdLayer`: each wraps the request's
//! future in another layer of state, and a tracing span per request keeps its registry
//! storage alive for the whole request. For most requests that is microseconds, but a waiting
//! request can live for minutes, and with 10,000 of them those layers cost more memory than
//! the waiting itself (see bench/README.md).
//!
//! Every step lives in [`GateService::call`] and the one future it returns (`answer`, which
//! records the answer too); what the gate reads of a request (its id, its key, its size, its
//! scope, its query) is in `request`: plain functions, not layers.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

// tokio's clock (the machine's monotonic one, unless a simulation paused it): the request's
// deadline is a tokio timer.
use tokio::time::Instant;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use tower::Service;

mod answer;
mod origin;
mod request;

pub use self::answer::{GateFuture, Succeeded};
pub use self::origin::HostPolicy;

use self::answer::{LogContext, State};
use self::request::{head_bytes, in_scope, not_taken, query_says};

use super::AppState;
use super::dispatch::{Found, RouteTable, not_found};
use super::extract::{Caller, LOCK_TOKEN, ResolvedName};
use super::problem::ApiError;
use crate::access::{ApiKeys, MetricsAuth};
use crate::lock::request::MAX_REPLICA_TIMEOUT;
use crate::operation::Operation;
use crate::telemetry::metrics::Metrics;
use crate::telemetry::throttle::{self, Throttle};
use crate::telemetry::trace::{RequestSpan, Tracing};

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// Longest client-supplied request id that is kept.
const MAX_REQUEST_ID_LEN: usize = 128;

/// What the gate needs, shared by every request.
#[derive(Debug)]
pub struct Gate {
    pub metrics: Arc<Metrics>,
    keys: Option<ApiKeys>,
    /// Without keys: the hosts and origins answered (see `origin`).
    hosts: Option<HostPolicy>,
    metrics_auth: MetricsAuth,
    max_in_flight: usize,
    in_flight: AtomicUsize,
    request_timeout: Duration,
    /// Added to the timeout of requests that may wait for a lock.
    max_wait: Duration,
    max_header_bytes: usize,
    id_prefix: u32,
    next_id: AtomicU64,
    /// Server errors are logged with their cause once per outcome per window.
    failures: Throttle,
    /// OpenTelemetry spans, when asked for (`telemetry::trace`).
    tracing: Option<Arc<Tracing>>,
    /// Every route, with the operation it is (see `routes`).
    routes: RouteTable,
}

/// Settings of the [`Gate`].
#[derive(Debug, Clone)]
pub struct GateOptions {
    pub keys: Option<ApiKeys>,
    /// Whom a gateway without keys answers (`--allowed-hosts`; see `origin`).
    pub hosts: HostPolicy,
    pub metrics_auth: MetricsAuth,
    pub max_concurrent_requests: usize,
    pub request_timeout: Duration,
    pub max_wait: Duration,
    /// Largest request head (request line and headers) served; larger ones get 431.
    pub max_header_bytes: usize,
    /// Where spans go, if anywhere.
    pub tracing: Option<Arc<Tracing>>,
}

impl Gate {
    pub fn new(options: GateOptions, metrics: Arc<Metrics>, routes: RouteTable) -> Self {
        let mut seed = [0u8; 4];
        // Request ids need only be unlikely to repeat across restarts, not secret.
        let _ = crate::entropy::fill(&mut seed);
        Self {
            metrics,
            hosts: options.keys.is_none().then_some(options.hosts),
            keys: options.keys,
            metrics_auth: options.metrics_auth,
            max_in_flight: options.max_concurrent_requests,
            in_flight: AtomicUsize::new(0),
            request_timeout: options.request_timeout,
            max_wait: options.max_wait,
            max_header_bytes: options.max_header_bytes,
            id_prefix: u32::from_ne_bytes(seed),
            next_id: AtomicU64::new(0),
            failures: Throttle::new(throttle::WINDOW),
            tracing: options.tracing,
            routes,
        }
    }

    /// Requests being handled now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// The bound on answering a request that does not wait for a lock.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    fn timeout(&self, operation: Operation) -> Duration {
        match operation {
            Operation::Acquire | Operation::Hold => {
                self.request_timeout + self.max_wait + MAX_REPLICA_TIMEOUT
            }
            Operation::Renew => self.request_timeout + MAX_REPLICA_TIMEOUT,
            _ => self.request_timeout,
        }
    }
}

/// The gateway as one service: it routes every request by the table (see [`dispatch`]),
/// takes it through the gate's steps and calls the handler found.
///
/// [`dispatch`]: super::dispatch
#[derive(Debug, Clone)]
pub struct GateService {
    /// The handlers' state, which holds the [`Gate`].
    app: AppState,
}

impl GateService {
    pub fn new(app: AppState) -> Self {
        Self { app }
    }
}

/// Holds a slot of the concurrency limit; gives it back when the request ends, however.
#[derive(Debug)]
struct Slot(Arc<Gate>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<B> Service<axum::http::Request<B>> for GateService
where
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = GateFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: axum::http::Request<B>) -> GateFuture {
        let req = req.map(Body::new);
        let started = Instant::now();
        let gate = &self.app.gate;
        let found = gate.routes.find(req.method(), req.uri().path());
        let route = found.template().map(|template| &*template.path);
        // A wrong method's answer names the right ones, whoever gives it (as axum's did).
        let (handler, allow, name) = match &found {
            Found::Route { endpoint, name, .. } => (Some(endpoint.handler), None, *name),
            Found::WrongMethod { template, name } => (None, Some(&template.allow), *name),
            Found::Nothing => (None, None, None),
        };
        // The one decoding of the path's lock name: authorized below, acted on by the handler.
        let name = name.map(ResolvedName::decode);
        let operation = match found.operation() {
            Operation::Release if query_says(req.uri(), "force") => Operation::Revoke,
            // `POST /locks?hold=true`: a multi-lock's hold stream.
            Operation::Acquire if req.uri().path() == "/locks" && query_says(req.uri(), "hold") => {
                Operation::Hold
            }
            operation => operation,
        };
        let kind = found.kind();
        let request_id = gate.request_id(&req);
        // Probes and scrapes come every few seconds from machines, not callers: no spans.
        let probe = matches!(
            operation,
            Operation::Healthz | Operation::Readyz | Operation::Metrics | Operation::Console
        );
        let traced = gate.tracing.as_ref().filter(|_| !probe);
        let mut span = traced.map(|tracing| {
            let name = match &name {
                Some(ResolvedName(Ok(name))) => Some(name.as_str()),
                _ => None,
            };
            tracing.start(req.headers(), route, name)
        });
        // What the answer is logged and counted with, whichever it is: a refusal below takes it
        // with the slot and span it holds by then; the handler's answer, with the caller too.
        let mut log = LogContext {
            gate: gate.clone(),
            started,
            operation,
            kind,
            method: req.method().clone(),
            path: req.uri().path().into(),
            request_id,
            caller: None,
            span: None,
            waited_micros: 0,
            _slot: None,
        };
        let refuse = |refusal: ApiError,
                      mut log: LogContext,
                      slot: Option<Slot>,
                      span: Option<Box<RequestSpan>>| {
            log._slot = slot;
            log.span = span;
            GateFuture {
                state: State::Refused {
                    response: Some(with_allow(refusal.into_response(), allow)),
                },
                log,
            }
        };
        if head_bytes(&req) > gate.max_header_bytes {
            let mut refused = refuse(
                ApiError::HeadersTooLarge {
                    limit: gate.max_header_bytes,
                },
                log,
                None,
                span.take(),
            );
            // Closing the connection frees the read buffer the head made hyper grow.
            if let State::Refused {
                response: Some(response),
            } = &mut refused.state
            {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            return refused;
        }
        if let Some(hosts) = &gate.hosts
            && let Some(why) = hosts.refusal(req.method(), req.headers())
        {
            return refuse(ApiError::UntrustedOrigin(why), log, None, span.take());
        }
        let slot = if probe {
            None
        } else {
            if gate.in_flight.fetch_add(1, Ordering::Relaxed) >= gate.max_in_flight {
                gate.in_flight.fetch_sub(1, Ordering::Relaxed);
                return refuse(ApiError::Overloaded, log, None, span.take());
            }
            Some(Slot(gate.clone()))
        };
        let caller = match gate.authenticate(operation, &req) {
            Ok(caller) => caller,
            Err(refusal) => return refuse(refusal, log, slot, span.take()),
        };
        // An acquire that presents a `Lock-Token` is a re-entry of a reentrant lock (the only
        // use of that header there), which sets the lease's ttl anew: it renews, so it needs
        // `renew` too (a key without it could otherwise stretch its lease by re-entering).
        let renews_too = operation == Operation::Acquire && req.headers().contains_key(LOCK_TOKEN);
        if let Some(key) = &caller
            && (!in_scope(key, operation, name.as_ref())
                || renews_too && !in_scope(key, Operation::Renew, name.as_ref()))
        {
            return refuse(ApiError::Forbidden, log, slot, span.take());
        }
        // A name that is not one is the first thing wrong: its handler's extractor answers it.
        if let Found::Route { endpoint, .. } = &found
            && !matches!(name, Some(ResolvedName(Err(_))))
            && let Err(refusal) = not_taken(&req, endpoint)
        {
            return refuse(refusal, log, slot, span.take());
        }
        let mut req = req;
        if let Some(name) = name {
            req.extensions_mut().insert(name);
        }
        if let Some(key) = &caller {
            // A listing shows only the names the key may inspect and binds its cursors to the
            // key, a multi-lock's names are checked by its handlers, an idempotency key is
            // bound to the API key, and a revoke is logged with the key's name.
            req.extensions_mut().insert(Caller(key.clone()));
        }
        log.caller = caller;
        log.span = span.take();
        log._slot = slot;
        // From the clock reading the request already took (`sleep` would read it again).
        let deadline = tokio::time::sleep_until(started + gate.timeout(operation));
        let inner = match handler {
            Some(handler) => handler(req, self.app.clone()),
            None => {
                let answer = match allow {
                    Some(_) => ApiError::MethodNotAllowed,
                    None => not_found(req.uri().path()),
                };
                Box::pin(std::future::ready(with_allow(
                    answer.into_response(),
                    allow,
                )))
            }
        };
        GateFuture {
            state: State::Running { inner, deadline },
            log,
        }
    }
}

/// `response` with `Allow: allow`, unless it has one.
fn with_allow(mut response: Response, allow: Option<&HeaderValue>) -> Response {
    if let Some(allow) = allow {
        response
            .headers_mut()
            .entry(header::ALLOW)
            .or_insert_with(|| allow.clone());
    }
    response
}

#[cfg(test)]
mod tests;
