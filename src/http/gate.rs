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
//! One piece, over 400 lines, for the reason above: every step lives in one future, and
//! splitting the steps into modules would bring back the layers (the last ~75 lines are
//! tests).

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use tokio::time::Sleep;
use tower::{Layer, Service};

use super::extract::{Caller, ResolvedName};
use super::problem::{ApiError, ProblemKind, ServerErrorCause};
use super::routes::RouteTable;
use crate::access::MetricsAuth;
use crate::access::{ApiKey, ApiKeys};
use crate::lock::LockError;
use crate::lock::request::MAX_REPLICA_TIMEOUT;
use crate::operation::Operation;
use crate::telemetry::LeaseKind;
use crate::telemetry::access::AccessLine;
use crate::telemetry::metrics::Metrics;
use crate::telemetry::throttle::{self, Throttle};
use crate::telemetry::trace::{Finished, RequestSpan, Tracing};

pub const REQUEST_ID: &str = "x-request-id";
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

    fn request_id(&self, req: &Request) -> RequestId {
        if let Some(given) = req.headers().get(REQUEST_ID)
            && !given.is_empty()
            && given.len() <= MAX_REQUEST_ID_LEN
            && given.as_bytes().iter().all(|b| b.is_ascii_graphic())
            // A copy: a clone would share, and so keep alive, hyper's buffer of the request head.
            && let Ok(copy) = HeaderValue::from_bytes(given.as_bytes())
        {
            return RequestId::Given(copy);
        }
        RequestId::Generated(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Checks the bearer key for `operation`: the caller, or the refusal.
    fn authenticate(
        &self,
        operation: Operation,
        req: &Request,
    ) -> Result<Option<Arc<ApiKey>>, ApiError> {
        let Some(keys) = &self.keys else {
            return Ok(None);
        };
        let open = match operation {
            Operation::Healthz | Operation::Readyz => true,
            Operation::Metrics => self.metrics_auth == MetricsAuth::Open,
            _ => false,
        };
        if open {
            return Ok(None);
        }
        let mut presented = req.headers().get_all(header::AUTHORIZATION).iter();
        if presented.nth(1).is_some() {
            // Which one would count is a guess: a proxy that adds its own would be bypassed.
            return Err(ApiError::header(
                "Authorization",
                "send one Authorization header, not several",
            ));
        }
        let key = bearer(req)
            .and_then(|presented| keys.authenticate(presented))
            .ok_or(ApiError::Unauthorized)?;
        if operation == Operation::Metrics && !key.allows(Operation::Metrics, None) {
            return Err(ApiError::Forbidden);
        }
        Ok(Some(key))
    }
}

/// A request's id: the client's, or a number rendered (after this process's random prefix)
/// only when the answer is written, so that a waiting request holds no string for it.
#[derive(Debug, Clone)]
enum RequestId {
    Given(HeaderValue),
    Generated(u64),
}

impl RequestId {
    fn header(&self, prefix: u32) -> HeaderValue {
        match self {
            Self::Given(value) => value.clone(),
            Self::Generated(n) => {
                // The prefix in 8 hex digits, the number in 12: always a valid header value.
                let digits = (u128::from(prefix) << 48) | u128::from(n & 0xffff_ffff_ffff);
                let mut text = [0u8; 20];
                for (i, byte) in text.iter_mut().enumerate() {
                    *byte = b"0123456789abcdef"[((digits >> (4 * (19 - i))) & 0xf) as usize];
                }
                HeaderValue::from_bytes(&text).unwrap_or(HeaderValue::from_static("-"))
            }
        }
    }
}

/// Whether `key` may do `operation` on the lock `name` (decoded and validated, as the handler
/// will act on it). A name that is not valid passes here: the handler's extractor answers it
/// 400 `invalid-name`, and nothing reaches the lock service.
fn in_scope(key: &ApiKey, operation: Operation, name: Option<&ResolvedName>) -> bool {
    if !operation.is_lock_operation() {
        return true;
    }
    match name {
        Some(ResolvedName(Ok(name))) => key.allows(operation, Some(name.as_str())),
        _ => true,
    }
}

/// Whether a request's query says `key=true` anywhere: how the gate reads `force` (a revoke)
/// and `hold` (a multi-lock's hold stream) to pick the operation, and so the scope. Lenient on
/// purpose: a query that also says `key=false` is classified as asking for it (the stricter
/// scope), and the handler then refuses the repetition (`extract::query_flag`, 400).
fn query_says(uri: &axum::http::Uri, key: &str) -> bool {
    uri.query().is_some_and(|query| {
        form_urlencoded::parse(query.as_bytes()).any(|(k, value)| k == key && value == "true")
    })
}

/// The size of a request's head as it came on the wire, near enough: request line and headers.
fn head_bytes(req: &Request) -> usize {
    let target = req
        .uri()
        .path_and_query()
        .map_or(1, |target| target.as_str().len());
    let line = req.method().as_str().len() + 1 + target + " HTTP/1.1\r\n".len();
    req.headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + ": \r\n".len())
        .sum::<usize>()
        + line
}

/// The key of an `Authorization: Bearer <key>` header.
fn bearer(req: &Request) -> Option<&[u8]> {
    let value = req.headers().get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, key) = value.split_at_checked(7)?;
    (scheme.eq_ignore_ascii_case(b"bearer ") && !key.is_empty()).then_some(key)
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
            Operation::Healthz | Operation::Readyz | Operation::Metrics
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
        let deadline = tokio::time::sleep(gate.timeout(operation));
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

/// Records the answer in the metrics and the log, and stamps the request id on it.
fn finish(log: &LogContext, mut response: Response) -> Response {
    let elapsed = log.started.elapsed();
    let status = response.status().as_u16();
    let problem = response.extensions().get::<ProblemKind>().copied();
    let outcome = outcome(log.operation, status, problem);
    let kind = LeaseKind::of_path(&log.path);
    log.gate
        .metrics
        .request(kind, log.operation, outcome, elapsed);
    let key = log.caller.as_ref().map_or("-", |k| k.name.as_str());
    let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    let request_id = log.request_id.header(log.gate.id_prefix);
    let request_id_text = request_id.to_str().unwrap_or("-");
    let cause = response.extensions().get::<ServerErrorCause>();
    // A server error's cause once per outcome per window, with how many were left out: while
    // Redis is down every request fails the same way. The others are plain access lines.
    let left_out = cause.and_then(|_| log.gate.failures.admit(outcome));
    if let (Some(ServerErrorCause(cause)), Some(left_out)) = (cause, left_out) {
        tracing::warn!(target: "lockgate::access", method = %log.method, path = &*log.path, status, outcome, micros, request_id = request_id_text, key, cause = %cause, left_out, "request failed");
    } else {
        AccessLine {
            method: log.method.as_str(),
            path: &log.path,
            status,
            outcome,
            micros,
            request_id: request_id_text,
            key,
        }
        .write();
    }
    if let (Some(tracing), Some(span)) = (&log.gate.tracing, &log.span) {
        span.finish(
            tracing,
            &Finished {
                method: log.method.as_str(),
                status,
                operation: log.operation.label(),
                outcome,
                request_id: request_id_text,
            },
        );
    }
    response.headers_mut().insert(REQUEST_ID, request_id);
    response
}

/// The `outcome` label: what happened on success, the problem's kind on failure.
fn outcome(operation: Operation, status: u16, problem: Option<ProblemKind>) -> &'static str {
    match problem {
        Some(ProblemKind::LockHeld) => "held",
        Some(ProblemKind::LockNotHeld) => "not-held",
        Some(ProblemKind::Internal) => "error",
        Some(kind) => kind.slug(),
        None => match (operation, status) {
            (Operation::Acquire, 201) | (Operation::Hold, 200) => "acquired",
            (Operation::Acquire, 200) => "replayed",
            (Operation::Renew, 200) => "renewed",
            (Operation::Release, 204) => "released",
            (Operation::Revoke, 204) => "revoked",
            (Operation::Inspect, 200) => "inspected",
            (Operation::List, 200) => "listed",
            (Operation::Watch, 200) => "watched",
            (_, 200..=299) => "ok",
            (_, 500..) => "error",
            _ => "other",
        },
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use tower::{ServiceBuilder, ServiceExt, service_fn};

    use super::*;

    /// Every route served is classified, from its own declaration: the table read from the
    /// document has a row for every operation the document lists, none of them `other`, and
    /// `HEAD` is classified as the `GET` it is served by.
    #[test]
    fn every_route_served_is_classified() {
        let (_, document, table) = crate::http::api();
        let mut documented = 0;
        for item in document.paths.paths.values() {
            documented += [
                &item.get,
                &item.post,
                &item.patch,
                &item.delete,
                &item.put,
                &item.head,
            ]
            .into_iter()
            .flatten()
            .count();
        }
        let rows: Vec<_> = table.rows().collect();
        assert_eq!(rows.len(), documented);
        for (path, method, operation) in &rows {
            assert_ne!(*operation, Operation::Other, "{method} {path}");
            assert_eq!(table.classify(method, Some(path)), *operation);
        }
        assert_eq!(
            table.classify(&Method::HEAD, Some("/locks/{name}")),
            Operation::Inspect
        );
        assert_eq!(
            table.classify(&Method::POST, Some("/locks/{name}")),
            Operation::Acquire
        );
        assert_eq!(
            table.classify(&Method::PUT, Some("/locks/{name}")),
            Operation::Other
        );
        assert_eq!(table.classify(&Method::GET, None), Operation::Other);
    }

    #[test]
    fn every_outcome_has_its_own_label_value() {
        use crate::telemetry::metrics::OUTCOMES;
        let problems =
            super::ProblemKind::ALL.map(|kind| outcome(Operation::Acquire, 400, Some(kind)));
        let successes = [
            (Operation::Acquire, 201),
            (Operation::Acquire, 200),
            (Operation::Renew, 200),
            (Operation::Release, 204),
            (Operation::Revoke, 204),
            (Operation::Inspect, 200),
            (Operation::List, 200),
            (Operation::Watch, 200),
            (Operation::Healthz, 200),
        ]
        .map(|(operation, status)| outcome(operation, status, None));
        for label in problems.iter().chain(&successes) {
            assert!(OUTCOMES.contains(label), "{label} is counted as `other`");
        }
    }

    fn gate() -> Arc<Gate> {
        Arc::new(Gate::new(
            GateOptions {
                keys: None,
                metrics_auth: MetricsAuth::Open,
                max_concurrent_requests: 10,
                request_timeout: Duration::from_millis(50),
                max_wait: Duration::ZERO,
                max_header_bytes: 32768,
                tracing: None,
            },
            Arc::new(Metrics::new()),
            RouteTable::default(),
        ))
    }

    /// A handler that panics answers a 500 problem document; the server goes on.
    #[tokio::test]
    async fn a_panicking_handler_answers_500() {
        let panicking = service_fn(|_: Request| async {
            if true {
                panic!("bug");
            }
            Ok::<Response, Infallible>(Response::new(Body::empty()))
        });
        let service = ServiceBuilder::new()
            .layer(GateLayer(gate()))
            .service(panicking);
        let response = service
            .oneshot(Request::new(Body::empty()))
            .await
            .expect("infallible");
        assert_eq!(response.status(), 500);
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json"
        );
        assert!(response.headers().contains_key(REQUEST_ID));
    }

    /// A handler slower than the request timeout answers 503 `timeout`.
    #[tokio::test]
    async fn a_slow_handler_times_out() {
        let slow = service_fn(|_: Request| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<Response, Infallible>(Response::new(Body::empty()))
        });
        let service = ServiceBuilder::new().layer(GateLayer(gate())).service(slow);
        let response = service
            .oneshot(Request::new(Body::empty()))
            .await
            .expect("infallible");
        assert_eq!(response.status(), 503);
        assert!(response.headers().contains_key("retry-after"));
    }

    /// A generated request id is the process's prefix in 8 hex digits and the count in 12.
    #[test]
    fn generated_request_ids_are_twenty_hex_digits() {
        for (prefix, n) in [(0, 0), (0xd09a_4fda, 1), (u32::MAX, 0xffff_ffff_ffff)] {
            assert_eq!(
                RequestId::Generated(n).header(prefix),
                format!("{prefix:08x}{n:012x}").as_str()
            );
        }
    }

    #[test]
    fn bearer_keys_are_read_case_insensitively() {
        let with = |value: &'static str| {
            let mut req = Request::new(Body::empty());
            req.headers_mut()
                .insert(header::AUTHORIZATION, HeaderValue::from_static(value));
            bearer(&req).map(<[u8]>::to_vec)
        };
        assert_eq!(with("Bearer abc"), Some(b"abc".to_vec()));
        assert_eq!(with("bearer abc"), Some(b"abc".to_vec()));
        assert_eq!(with("Bearer "), None);
        assert_eq!(with("Basic abc"), None);
        assert_eq!(with("Bear"), None);
    }
}
