//! How the gate records an answer: the metrics, the access line (or the warning with a server
//! error's cause), the span, and the request id stamped on the response.

use axum::response::Response;

use super::super::problem::{ProblemKind, ServerErrorCause};
use super::{LogContext, REQUEST_ID};
use crate::operation::Operation;
use crate::telemetry::LeaseKind;
use crate::telemetry::access::AccessLine;
use crate::telemetry::trace::Finished;

/// A success a handler names itself, where the route and status do not tell it (a reentrant
/// lock taken again answers 200 as a replay does): the `outcome` label, from [`OUTCOMES`].
///
/// [`OUTCOMES`]: crate::telemetry::metrics::OUTCOMES
#[derive(Debug, Clone, Copy)]
pub struct Succeeded(pub &'static str);

/// Records the answer in the metrics and the log, and stamps the request id on it.
pub(super) fn finish(log: &LogContext, mut response: Response) -> Response {
    let elapsed = log.started.elapsed();
    let status = response.status().as_u16();
    let problem = response.extensions().get::<ProblemKind>().copied();
    let outcome = match response.extensions().get::<Succeeded>() {
        Some(Succeeded(outcome)) if problem.is_none() => outcome,
        _ => outcome(log.operation, status, problem),
    };
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
