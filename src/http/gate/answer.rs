//! The gate's future: the handler's answer (within its deadline, a panic made a 500) or the
//! gate's own, and how it is recorded: the metrics, the access line (or the warning with a
//! server error's cause), the span, and the request id stamped on the response.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use axum::body::Body;
use axum::http::header::CONTENT_LENGTH;
use axum::http::{HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use http_body::Body as _;
use tokio::time::Sleep;

use super::super::dispatch::HandlerFuture;
use super::super::problem::{ApiError, ProblemKind, ServerErrorCause};
use super::request::RequestId;
use super::{Gate, REQUEST_ID, Slot};
use crate::access::ApiKey;
use crate::lock::LockError;
use crate::operation::Operation;
use crate::telemetry::access::AccessLine;
use crate::telemetry::trace::{self, Finished, RequestSpan};

/// A success a handler names itself, where the route and status do not tell it (a reentrant
/// lock taken again answers 200 as a replay does): the `outcome` label, from [`OUTCOMES`].
///
/// [`OUTCOMES`]: crate::telemetry::metrics::OUTCOMES
#[derive(Debug, Clone, Copy)]
pub struct Succeeded(pub &'static str);

/// What the log line and the metrics need once the answer is known.
#[derive(Debug)]
pub(super) struct LogContext {
    pub(super) gate: Arc<Gate>,
    pub(super) started: Instant,
    pub(super) operation: Operation,
    /// The kind of lease the route acts on (`dispatch::Endpoint::kind`).
    pub(super) kind: usize,
    pub(super) method: Method,
    /// A copy of the path: the request's `Uri` shares hyper's buffer of the request head,
    /// which a waiting request would otherwise keep alive (hyper then reads the rest of the
    /// connection into a new buffer, so each waiting request would hold two).
    pub(super) path: Box<str>,
    pub(super) request_id: RequestId,
    pub(super) caller: Option<Arc<ApiKey>>,
    /// The request's span, when traces are exported.
    pub(super) span: Option<Box<RequestSpan>>,
    /// How long the request waited in line for a lease, summed over its polls: left out of
    /// its latency (it was asked for, with `wait_ms`) and counted as waiting instead.
    pub(super) waited_micros: u64,
    pub(super) _slot: Option<Slot>,
}

pin_project_lite::pin_project! {
    /// The handler's future with its deadline, or an answer given by the gate itself.
    #[project = StateProj]
    pub(super) enum State {
        Running { #[pin] inner: HandlerFuture, #[pin] deadline: Sleep },
        Refused { response: Option<Response> },
    }
}

pin_project_lite::pin_project! {
    /// A request's answer to come, and what the gate records of it.
    pub struct GateFuture {
        #[pin]
        pub(super) state: State,
        pub(super) log: LogContext,
    }
}

impl Future for GateFuture {
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
                let polled = std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx)));
                this.log.waited_micros += trace::take_poll_waited();
                match polled {
                    Ok(Poll::Ready(response)) => response,
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
        let mut response = finish(this.log, response);
        if this.log.method == Method::HEAD {
            without_body(&mut response);
        }
        Poll::Ready(Ok(response))
    }
}

/// The answer to a `HEAD`: its headers, with the `Content-Length` its body had, and no body
/// (as axum's router answered it: a `HEAD` is served by the `GET` handler).
fn without_body(response: &mut Response) {
    if !response.headers().contains_key(CONTENT_LENGTH)
        && let Some(length) = response.body().size_hint().exact()
    {
        response
            .headers_mut()
            .insert(CONTENT_LENGTH, HeaderValue::from(length));
    }
    *response.body_mut() = Body::empty();
}

/// Records the answer in the metrics and the log, and stamps the request id on it.
pub(super) fn finish(log: &LogContext, mut response: Response) -> Response {
    let elapsed = log.started.elapsed();
    let status = response.status().as_u16();
    let problem = response.extensions().get::<ProblemKind>().copied();
    let outcome = match response.extensions().get::<Succeeded>() {
        Some(Succeeded(outcome)) if problem.is_none() => outcome,
        _ => outcome(log.operation, status, problem),
    };
    let waited = Duration::from_micros(log.waited_micros);
    log.gate.metrics.request(
        log.kind,
        log.operation,
        outcome,
        elapsed.saturating_sub(waited),
    );
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
pub(super) fn outcome(
    operation: Operation,
    status: u16,
    problem: Option<ProblemKind>,
) -> &'static str {
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
