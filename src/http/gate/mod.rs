//! The one middleware every request goes through. In order, it
//!
//! 1. gives the request an id (the client's `x-request-id` when it is sensible, else a new
//!    one) and echoes it on the response;
//! 2. classifies the request as one [`Operation`] (by the route table, see `routes`), and
//!    refuses a head (request line and
//!    headers) over `--max-header-bytes` (431 `headers-too-large`, closing the connection);
//! 3. enforces the global concurrency limit (503 `overloaded`; probes and metrics exempt);
//! 4. decodes and validates the lock name the path names, once ([`ResolvedName`]: the handler
//!    acts on that same value), authenticates the bearer key when API keys are configured (401
//!    `unauthorized`; two `Authorization` headers are 400) and checks, once, that its scopes
//!    allow the operation on that name (403 `forbidden`);
//! 5. bounds the time to answer (503 `timeout`): `--request-timeout`, plus `--max-wait` for
//!    an acquire or hold stream, which may wait that long for its lock, plus the longest
//!    replica wait a request may ask for (`replica_timeout_ms`) for the operations that can ask
//!    for one, so that a request is never cut off while waiting for what it asked. A renewal
//!    or release cut off all the same may have taken effect: it answers 503 `outcome-unknown`
//!    (both are safe to repeat). Reading the body has its own bound, the request timeout: see
//!    [`super::extract::JsonBody`];
//! 6. turns a handler panic into a 500 problem document instead of a dropped connection;
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
//! Every step lives in the one future below; what the gate reads of a request (its id, its
//! key, its size, its scope) is in [`request`], and how it records the answer in [`answer`]:
//! plain functions, not layers.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use tokio::time::Sleep;

mod answer;
mod request;

pub use self::answer::Succeeded;
use self::answer::finish;
use self::request::{RequestId, head_bytes, in_scope, query_says};
use tower::{Layer, Service};

use super::extract::{Caller, ResolvedName};
use super::problem::ApiError;
use super::routes::RouteTable;
use crate::access::{ApiKey, ApiKeys, MetricsAuth};
use crate::lock::LockError;
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
        let _ = getrandom::fill(&mut seed);
        Self {
            metrics,
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

#[derive(Debug, Clone)]
pub struct GateLayer(pub Arc<Gate>);

impl<S> Layer<S> for GateLayer {
    type Service = GateService<S>;

    fn layer(&self, inner: S) -> GateService<S> {
        GateService {
            inner,
            gate: self.0.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct GateService<S> {
    inner: S,
    gate: Arc<Gate>,
}

/// Holds a slot of the concurrency limit; gives it back when the request ends, however.
#[derive(Debug)]
struct Slot(Arc<Gate>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<S> Service<Request> for GateService<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = GateFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let started = Instant::now();
        let gate = &self.gate;
        let route = req
            .extensions()
            .get::<MatchedPath>()
            .map(MatchedPath::as_str);
        let operation = gate.routes.classify(req.method(), route);
        // The one decoding of the path's lock name: authorized below, acted on by the handler.
        let name = route.and_then(|route| ResolvedName::of(route, req.uri().path()));
        let operation = match operation {
            Operation::Release if query_says(req.uri(), "force") => Operation::Revoke,
            // `POST /locks?hold=true`: a multi-lock's hold stream.
            Operation::Acquire if req.uri().path() == "/locks" && query_says(req.uri(), "hold") => {
                Operation::Hold
            }
            operation => operation,
        };
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
        let refuse = |refusal: ApiError,
                      req: &Request,
                      slot: Option<Slot>,
                      span: Option<Box<RequestSpan>>| GateFuture {
            state: State::Refused {
                response: Some(refusal.into_response()),
            },
            log: LogContext {
                gate: gate.clone(),
                started,
                operation,
                method: req.method().clone(),
                path: req.uri().path().into(),
                request_id: request_id.clone(),
                caller: None,
                span,
                _slot: slot,
            },
        };
        if head_bytes(&req) > gate.max_header_bytes {
            let mut refused = refuse(
                ApiError::HeadersTooLarge {
                    limit: gate.max_header_bytes,
                },
                &req,
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
        let slot = if probe {
            None
        } else {
            if gate.in_flight.fetch_add(1, Ordering::Relaxed) >= gate.max_in_flight {
                gate.in_flight.fetch_sub(1, Ordering::Relaxed);
                return refuse(ApiError::Overloaded, &req, None, span.take());
            }
            Some(Slot(gate.clone()))
        };
        let caller = match gate.authenticate(operation, &req) {
            Ok(caller) => caller,
            Err(refusal) => return refuse(refusal, &req, slot, span.take()),
        };
        if let Some(key) = &caller
            && !in_scope(key, operation, name.as_ref())
        {
            return refuse(ApiError::Forbidden, &req, slot, span.take());
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
        let log = LogContext {
            gate: gate.clone(),
            started,
            operation,
            method: req.method().clone(),
            path: req.uri().path().into(),
            request_id,
            caller,
            span: span.take(),
            _slot: slot,
        };
        // From the clock reading the request already took (`sleep` would read it again).
        let deadline = tokio::time::sleep_until(
            tokio::time::Instant::from_std(started) + gate.timeout(operation),
        );
        GateFuture {
            state: State::Running {
                inner: self.inner.call(req),
                deadline,
            },
            log,
        }
    }
}

/// What the log line and the metrics need once the answer is known.
#[derive(Debug)]
struct LogContext {
    gate: Arc<Gate>,
    started: Instant,
    operation: Operation,
    method: Method,
    /// A copy of the path: the request's `Uri` shares hyper's buffer of the request head,
    /// which a waiting request would otherwise keep alive (hyper then reads the rest of the
    /// connection into a new buffer, so each waiting request would hold two).
    path: Box<str>,
    request_id: RequestId,
    caller: Option<Arc<ApiKey>>,
    /// The request's span, when traces are exported.
    span: Option<Box<RequestSpan>>,
    _slot: Option<Slot>,
}

pin_project_lite::pin_project! {
    /// The handler's future with its deadline, or an answer given by the gate itself.
    #[project = StateProj]
    #[derive(Debug)]
    enum State<F> {
        Running { #[pin] inner: F, #[pin] deadline: Sleep },
        Refused { response: Option<Response> },
    }
}

pin_project_lite::pin_project! {
    #[derive(Debug)]
    pub struct GateFuture<F> {
        #[pin]
        state: State<F>,
        log: LogContext,
    }
}

impl<F> Future for GateFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = match this.state.project() {
            StateProj::Refused { response } => response.take().unwrap_or_else(|| {
                ApiError::Internal("polled after completion".into()).into_response()
            }),
            StateProj::Running { inner, deadline } => {
                // Redis round trips and waits made during this poll count for this request.
                let _entered = this.log.span.as_ref().map(|span| span.enter());
                // A panicking future is never polled again: this poll answers for it.
                match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
                    Ok(Poll::Ready(Ok(response))) => response,
                    Ok(Poll::Ready(Err(never))) => match never {},
                    Ok(Poll::Pending) => match deadline.poll(cx) {
                        // Dropping the handler's future is what a client hanging up does; the
                        // lock layer withdraws any grant it made (no orphan grants). A renewal
                        // or release may have been applied all the same.
                        Poll::Ready(()) => match this.log.operation {
                            Operation::Renew | Operation::Release | Operation::Revoke => {
                                ApiError::Lock(LockError::no_answer_within(
                                    this.log.gate.timeout(this.log.operation),
                                ))
                                .into_response()
                            }
                            _ => ApiError::Timeout.into_response(),
                        },
                        Poll::Pending => return Poll::Pending,
                    },
                    Err(_) => ApiError::Internal("handler panicked".into()).into_response(),
                }
            }
        };
        Poll::Ready(Ok(finish(this.log, response)))
    }
}

#[cfg(test)]
mod tests;
