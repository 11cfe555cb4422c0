//! Errors as RFC 9457 problem documents (`application/problem+json`).
//!
//! This is the one place where an error becomes an HTTP status. Every kind of problem has a
//! stable `type` URI (`https://lockgate.dev/problems/<kind>`; the host is only a namespace)
//! that clients can match on. Server errors (5xx) carry a generic `detail`; their cause travels
//! to the logging middleware in a response extension and is logged once, never sent.
//!
//! No problem document ever repeats a lock token, an idempotency key or an Authorization
//! header.
//!
//! One piece, over 400 lines: the table from every error to its status and type is the
//! contract clients code against, and it is reviewed as one table (the last ~80 lines are its
//! tests).

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::lock::{InvalidName, InvalidRequest, LockError};

/// The namespace of problem `type` URIs.
pub const PROBLEM_BASE: &str = "https://lockgate.dev/problems/";
/// The media type of problem documents.
pub const PROBLEM_JSON: &str = "application/problem+json";
/// `Retry-After` for transient server-side trouble.
const BACKEND_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Each kind of problem the API answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProblemKind {
    InvalidName,
    InvalidRequest,
    LockHeld,
    LockNotHeld,
    PermitsMismatch,
    NotOffered,
    CrossSlot,
    NotOwner,
    LockRevoked,
    MaxHoldReached,
    InsufficientReplicas,
    BackendUnavailable,
    BackendFull,
    GrantsHeldBack,
    OutcomeUnknown,
    WaitPoolExhausted,
    TooManyWaiters,
    TooManyWatchers,
    ShuttingDown,
    PayloadTooLarge,
    HeadersTooLarge,
    NotFound,
    MethodNotAllowed,
    Unauthorized,
    Forbidden,
    Overloaded,
    Timeout,
    #[default]
    Internal,
}

impl ProblemKind {
    /// Every kind, for tests that check a table covers them all.
    pub const ALL: [Self; 28] = [
        Self::InvalidName,
        Self::InvalidRequest,
        Self::LockHeld,
        Self::LockNotHeld,
        Self::PermitsMismatch,
        Self::NotOffered,
        Self::CrossSlot,
        Self::NotOwner,
        Self::LockRevoked,
        Self::MaxHoldReached,
        Self::InsufficientReplicas,
        Self::BackendUnavailable,
        Self::BackendFull,
        Self::GrantsHeldBack,
        Self::OutcomeUnknown,
        Self::WaitPoolExhausted,
        Self::TooManyWaiters,
        Self::TooManyWatchers,
        Self::ShuttingDown,
        Self::PayloadTooLarge,
        Self::HeadersTooLarge,
        Self::NotFound,
        Self::MethodNotAllowed,
        Self::Unauthorized,
        Self::Forbidden,
        Self::Overloaded,
        Self::Timeout,
        Self::Internal,
    ];

    /// The last segment of the `type` URI.
    pub fn slug(self) -> &'static str {
        match self {
            Self::InvalidName => "invalid-name",
            Self::InvalidRequest => "invalid-request",
            Self::LockHeld => "lock-held",
            Self::LockNotHeld => "lock-not-held",
            Self::PermitsMismatch => "permits-mismatch",
            Self::NotOffered => "not-offered",
            Self::CrossSlot => "cross-slot",
            Self::NotOwner => "not-owner",
            Self::LockRevoked => "lock-revoked",
            Self::MaxHoldReached => "max-hold-reached",
            Self::InsufficientReplicas => "insufficient-replicas",
            Self::BackendUnavailable => "backend-unavailable",
            Self::BackendFull => "backend-full",
            Self::GrantsHeldBack => "grants-held-back",
            Self::OutcomeUnknown => "outcome-unknown",
            Self::WaitPoolExhausted => "wait-pool-exhausted",
            Self::TooManyWaiters => "too-many-waiters",
            Self::TooManyWatchers => "too-many-watchers",
            Self::ShuttingDown => "shutting-down",
            Self::PayloadTooLarge => "payload-too-large",
            Self::HeadersTooLarge => "headers-too-large",
            Self::NotFound => "not-found",
            Self::MethodNotAllowed => "method-not-allowed",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::Overloaded => "overloaded",
            Self::Timeout => "timeout",
            Self::Internal => "internal",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Self::InvalidName => "Invalid lock name",
            Self::InvalidRequest => "Invalid request",
            Self::LockHeld => "Lock is held",
            Self::LockNotHeld => "Lock is not held",
            Self::PermitsMismatch => "Permit limit differs",
            Self::NotOffered => "Not offered in this mode",
            Self::CrossSlot => "Names in different hash slots",
            Self::NotOwner => "Not the lock owner",
            Self::LockRevoked => "Lock was revoked",
            Self::MaxHoldReached => "Maximum hold reached",
            Self::InsufficientReplicas => "Insufficient replicas",
            Self::BackendUnavailable => "Backend unavailable",
            Self::BackendFull => "Backend out of memory",
            Self::GrantsHeldBack => "Grants held back after a clock step",
            Self::OutcomeUnknown => "Outcome unknown",
            Self::WaitPoolExhausted => "Replica acknowledgement pool exhausted",
            Self::TooManyWaiters => "Too many waiters",
            Self::TooManyWatchers => "Too many watchers",
            Self::ShuttingDown => "Shutting down",
            Self::PayloadTooLarge => "Payload too large",
            Self::HeadersTooLarge => "Request headers too large",
            Self::NotFound => "Not found",
            Self::MethodNotAllowed => "Method not allowed",
            Self::Unauthorized => "Unauthorized",
            Self::Forbidden => "Forbidden",
            Self::Overloaded => "Overloaded",
            Self::Timeout => "Request timed out",
            Self::Internal => "Internal error",
        }
    }

    /// What the problem means, for the responses of the OpenAPI document (each route lists
    /// the kinds it answers; see `routes`). Says what a client should know, not how the
    /// gateway found out.
    pub fn meaning(self) -> &'static str {
        match self {
            Self::InvalidName => {
                "the name is not 1 to 200 characters of `A-Z a-z 0-9 . _ : -` starting with a \
                 letter or digit"
            }
            Self::InvalidRequest => {
                "bad JSON, an unknown field, a value out of range, or a missing or malformed \
                 header or query parameter (`field` or `header` names it)"
            }
            Self::LockHeld => {
                "another client holds it (after `wait_ms`, if given); `retry_after_ms` says \
                 when the lease in the way ends"
            }
            Self::LockNotHeld => "nobody holds it: it expired or was released",
            Self::PermitsMismatch => {
                "the permits held were granted under another limit (the problem's `permits`)"
            }
            Self::NotOffered => {
                "the configured backend does not keep this kind of lock (Redlock keeps plain \
                 locks only)"
            }
            Self::CrossSlot => "Redis Cluster: the names map to different hash slots",
            Self::NotOwner => "it is held with a different token, and stays held",
            Self::LockRevoked => "an operator revoked this token's lock",
            Self::MaxHoldReached => {
                "it has been held for as long as `max_hold_ms` (or `--max-hold`) allows, and \
                 was released"
            }
            Self::InsufficientReplicas => {
                "with `require_replicas`, fewer replicas than `replicas` acknowledged: an \
                 acquire releases its grant, a renewal leaves the lease renewed"
            }
            Self::BackendUnavailable => "Redis did not answer or refused: nothing was done",
            Self::BackendFull => "Redis is out of memory and refuses writes",
            Self::GrantsHeldBack => "new grants are held back after a step of the Redis clock",
            Self::OutcomeUnknown => {
                "sent, but no answer came: it may or may not have taken effect, and is safe to \
                 repeat"
            }
            Self::WaitPoolExhausted => "every connection for replica acknowledgement is busy",
            Self::TooManyWaiters => "`--max-waiters` requests already wait for locks",
            Self::TooManyWatchers => "`--max-watchers` event streams are already open",
            Self::ShuttingDown => "the gateway is shutting down",
            Self::PayloadTooLarge => "the body exceeds `--max-body-bytes`",
            Self::HeadersTooLarge => "the request line and headers exceed `--max-header-bytes`",
            Self::NotFound => "no such route",
            Self::MethodNotAllowed => "the route does not take this method",
            Self::Unauthorized => {
                "the gateway requires an API key and none, or an unknown one, was given"
            }
            Self::Forbidden => "the API key does not cover this operation on this name",
            Self::Overloaded => "too many requests are in flight (`--max-concurrent-requests`)",
            Self::Timeout => "the request took longer than the gateway allows",
            Self::Internal => "a bug in the gateway",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            Self::InvalidName | Self::InvalidRequest | Self::CrossSlot => StatusCode::BAD_REQUEST,
            Self::LockHeld | Self::NotOwner | Self::MaxHoldReached | Self::PermitsMismatch => {
                StatusCode::CONFLICT
            }
            Self::NotOffered => StatusCode::NOT_IMPLEMENTED,
            Self::LockNotHeld | Self::NotFound => StatusCode::NOT_FOUND,
            Self::LockRevoked => StatusCode::GONE,
            Self::InsufficientReplicas
            | Self::BackendUnavailable
            | Self::BackendFull
            | Self::GrantsHeldBack
            | Self::OutcomeUnknown
            | Self::WaitPoolExhausted
            | Self::TooManyWaiters
            | Self::TooManyWatchers
            | Self::ShuttingDown
            | Self::Overloaded
            | Self::Timeout => StatusCode::SERVICE_UNAVAILABLE,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// An RFC 9457 problem document.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "type": "https://lockgate.dev/problems/lock-held",
    "title": "Lock is held",
    "status": 409,
    "detail": "the lock is held by another client",
    "retry_after_ms": 2750
}))]
pub struct Problem {
    /// Stable URI naming the kind of problem: `https://lockgate.dev/problems/<kind>`.
    #[serde(rename = "type")]
    pub type_uri: String,
    /// Short summary of the kind of problem.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong with this request.
    pub detail: String,
    /// `lock-held`: milliseconds until the current lease ends, unless its holder renews it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// `permits-mismatch`: the limit the semaphore's current permits were granted under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permits: Option<u32>,
    /// `invalid-request`: the JSON field at fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// `invalid-request`: the request header at fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// `insufficient-replicas`: replicas the client required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas_required: Option<u32>,
    /// `insufficient-replicas`: replicas that acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas_acked: Option<u32>,
    /// `payload-too-large`: the largest accepted body, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
    /// `headers-too-large`: the largest accepted request head, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_header_bytes: Option<u64>,
    /// The kind, as the gateway knows it (the document says it with `type`; a client reads
    /// it with [`Problem::slug`]).
    #[serde(skip)]
    #[schema(ignore)]
    pub kind: ProblemKind,
}

impl Problem {
    /// The last segment of the `type` URI (`lock-held`, …): what a client matches on.
    pub fn slug(&self) -> &str {
        self.type_uri.rsplit('/').next().unwrap_or_default()
    }

    pub fn new(kind: ProblemKind, detail: impl Into<String>) -> Self {
        Self {
            type_uri: format!("{PROBLEM_BASE}{}", kind.slug()),
            title: kind.title().to_owned(),
            status: kind.status().as_u16(),
            detail: detail.into(),
            retry_after_ms: None,
            field: None,
            header: None,
            replicas_required: None,
            replicas_acked: None,
            max_body_bytes: None,
            max_header_bytes: None,
            permits: None,
            kind,
        }
    }
}

/// The cause of a server error, for the logging middleware. Never sent to the client.
#[derive(Debug, Clone)]
pub struct ServerErrorCause(pub String);

/// Everything a handler can fail with.
#[derive(Debug)]
pub enum ApiError {
    Lock(LockError),
    InvalidName(InvalidName),
    /// A body field or header is missing, malformed or out of range.
    InvalidRequest {
        field: Option<String>,
        header: Option<&'static str>,
        message: String,
    },
    PayloadTooLarge {
        limit: usize,
    },
    /// The request line and headers take more than `limit` bytes.
    HeadersTooLarge {
        limit: usize,
    },
    NotFound,
    MethodNotAllowed,
    /// No API key, or one that is not known.
    Unauthorized,
    /// A known key outside its scopes.
    Forbidden,
    /// The concurrency limit is reached.
    Overloaded,
    /// The request took longer than the request timeout.
    Timeout,
    Internal(String),
}

impl ApiError {
    pub fn header(header: &'static str, message: impl Into<String>) -> Self {
        Self::InvalidRequest {
            field: None,
            header: Some(header),
            message: message.into(),
        }
    }

    pub fn body(field: Option<String>, message: impl Into<String>) -> Self {
        Self::InvalidRequest {
            field,
            header: None,
            message: message.into(),
        }
    }
}

impl From<LockError> for ApiError {
    fn from(err: LockError) -> Self {
        Self::Lock(err)
    }
}

impl From<InvalidName> for ApiError {
    fn from(err: InvalidName) -> Self {
        Self::InvalidName(err)
    }
}

impl From<InvalidRequest> for ApiError {
    fn from(err: InvalidRequest) -> Self {
        Self::body(
            Some(err.field.to_owned()),
            format!("{}: {}", err.field, err.message),
        )
    }
}

/// What a response needs besides the document.
struct Rendered {
    problem: Problem,
    retry_after: Option<Duration>,
    cause: Option<String>,
}

impl ApiError {
    fn render(self) -> Rendered {
        let plain = |problem| Rendered {
            problem,
            retry_after: None,
            cause: None,
        };
        match self {
            Self::InvalidName(err) => {
                plain(Problem::new(ProblemKind::InvalidName, err.to_string()))
            }
            Self::InvalidRequest {
                field,
                header,
                message,
            } => {
                let mut problem = Problem::new(ProblemKind::InvalidRequest, message);
                problem.field = field;
                problem.header = header.map(str::to_owned);
                plain(problem)
            }
            Self::PayloadTooLarge { limit } => {
                let detail = format!("the request body is larger than {limit} bytes");
                let mut problem = Problem::new(ProblemKind::PayloadTooLarge, detail);
                problem.max_body_bytes = Some(limit as u64);
                plain(problem)
            }
            Self::HeadersTooLarge { limit } => {
                let detail = format!("the request line and headers are larger than {limit} bytes");
                let mut problem = Problem::new(ProblemKind::HeadersTooLarge, detail);
                problem.max_header_bytes = Some(limit as u64);
                plain(problem)
            }
            Self::NotFound => plain(Problem::new(ProblemKind::NotFound, "no such resource")),
            Self::MethodNotAllowed => plain(Problem::new(
                ProblemKind::MethodNotAllowed,
                "this resource does not support the request method",
            )),
            Self::Unauthorized => plain(Problem::new(
                ProblemKind::Unauthorized,
                "a valid API key is required: Authorization: Bearer <key>",
            )),
            Self::Forbidden => plain(Problem::new(
                ProblemKind::Forbidden,
                "this API key may not do this operation on this lock name",
            )),
            Self::Overloaded => Rendered {
                problem: Problem::new(
                    ProblemKind::Overloaded,
                    "the gateway is handling too many requests; retry later",
                ),
                retry_after: Some(BACKEND_RETRY_AFTER),
                cause: None,
            },
            Self::Timeout => Rendered {
                problem: Problem::new(
                    ProblemKind::Timeout,
                    "the request took longer than the gateway allows; retry later",
                ),
                retry_after: Some(BACKEND_RETRY_AFTER),
                cause: Some("request timeout".into()),
            },
            Self::Internal(cause) => Rendered {
                problem: Problem::new(
                    ProblemKind::Internal,
                    "the gateway failed to handle the request",
                ),
                retry_after: None,
                cause: Some(cause),
            },
            Self::Lock(err) => render_lock_error(err),
        }
    }
}

fn render_lock_error(err: LockError) -> Rendered {
    let cause = Some(err.to_string());
    match err {
        LockError::Held { retry_after } => {
            let mut problem =
                Problem::new(ProblemKind::LockHeld, "the lock is held by another client");
            problem.retry_after_ms =
                Some(u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX));
            Rendered {
                problem,
                retry_after: Some(retry_after),
                cause: None,
            }
        }
        LockError::NotHeld => Rendered {
            problem: Problem::new(ProblemKind::LockNotHeld, "the lock is not held"),
            retry_after: None,
            cause: None,
        },
        LockError::LimitDiffers { held } => {
            let mut problem = Problem::new(
                ProblemKind::PermitsMismatch,
                format!(
                    "the semaphore's permits are held under a limit of {held}; ask with the same \
                     permits, or wait until they are all given back"
                ),
            );
            problem.permits = Some(held);
            Rendered {
                problem,
                retry_after: None,
                cause: None,
            }
        }
        LockError::CrossSlot => Rendered {
            problem: Problem::new(
                ProblemKind::CrossSlot,
                "in a Redis Cluster the names of a multi-lock must map to one hash slot (one \
                 atomic step reaches one slot): choose names whose CRC16 slot is the same, or \
                 take the locks one by one",
            ),
            retry_after: None,
            cause: None,
        },
        LockError::NotOffered { kind, mode } => Rendered {
            problem: Problem::new(
                ProblemKind::NotOffered,
                format!("{kind}s are not offered with the {mode} backend (see docs/api.md)"),
            ),
            retry_after: None,
            cause: None,
        },
        LockError::NotOwner => Rendered {
            problem: Problem::new(
                ProblemKind::NotOwner,
                "the lock is held with a different token",
            ),
            retry_after: None,
            cause: None,
        },
        LockError::Revoked => Rendered {
            problem: Problem::new(
                ProblemKind::LockRevoked,
                "an operator revoked this lock; stop relying on it",
            ),
            retry_after: None,
            cause: None,
        },
        LockError::MaxHoldReached => Rendered {
            problem: Problem::new(
                ProblemKind::MaxHoldReached,
                "the lock has been held for as long as its max_hold_ms allows; it ends with its lease",
            ),
            retry_after: None,
            cause: None,
        },
        LockError::InsufficientReplicas { wanted, acked } => {
            let detail = format!("{acked} of {wanted} required replicas acknowledged the write");
            let mut problem = Problem::new(ProblemKind::InsufficientReplicas, detail);
            problem.replicas_required = Some(wanted);
            problem.replicas_acked = Some(acked);
            Rendered {
                problem,
                retry_after: Some(BACKEND_RETRY_AFTER),
                cause,
            }
        }
        LockError::TooManyWaiters => Rendered {
            problem: Problem::new(
                ProblemKind::TooManyWaiters,
                "too many requests are waiting for locks; retry later",
            ),
            retry_after: Some(BACKEND_RETRY_AFTER),
            cause,
        },
        LockError::TooManyWatchers => Rendered {
            problem: Problem::new(
                ProblemKind::TooManyWatchers,
                "too many clients are watching locks (--max-watchers); retry later",
            ),
            retry_after: Some(BACKEND_RETRY_AFTER),
            cause,
        },
        LockError::ShuttingDown => Rendered {
            problem: Problem::new(
                ProblemKind::ShuttingDown,
                "the gateway is shutting down; retry on another one",
            ),
            retry_after: Some(BACKEND_RETRY_AFTER),
            cause: None,
        },
        LockError::OutcomeUnknown(_) => Rendered {
            problem: Problem::new(
                ProblemKind::OutcomeUnknown,
                "the lock backend did not answer in time: the operation may or may not have taken \
                 effect; repeating it is safe",
            ),
            retry_after: Some(BACKEND_RETRY_AFTER),
            cause,
        },
        LockError::WaitPoolExhausted(_) => Rendered {
            problem: Problem::new(
                ProblemKind::WaitPoolExhausted,
                "every connection for replica acknowledgement is busy waiting for slow replicas; \
                 retry later, or raise --wait-pool-size",
            ),
            retry_after: Some(BACKEND_RETRY_AFTER),
            cause,
        },
        LockError::HeldBack { retry_after } => Rendered {
            problem: Problem::new(
                ProblemKind::GrantsHeldBack,
                "Redis's clock stepped forward, which may have ended leases before their holders \
                 stopped relying on them; no lock is granted until those leases have run out",
            ),
            retry_after: Some(retry_after),
            cause,
        },
        LockError::BackendFull(_) => Rendered {
            problem: Problem::new(
                ProblemKind::BackendFull,
                "the lock store is out of memory (Redis maxmemory reached) and refuses writes; \
                 nothing was written; retry later (an operator must free memory or raise maxmemory)",
            ),
            retry_after: Some(BACKEND_RETRY_AFTER),
            cause,
        },
        LockError::LeaseExpired | LockError::BackendUnavailable(_) => Rendered {
            problem: Problem::new(
                ProblemKind::BackendUnavailable,
                "the lock backend is not available; retry later",
            ),
            retry_after: Some(BACKEND_RETRY_AFTER),
            cause,
        },
    }
}

/// `Retry-After` in whole seconds, rounded up, at least 1 (0 would invite a busy loop).
pub fn retry_after_seconds(wait: Duration) -> u64 {
    wait.as_millis()
        .div_ceil(1000)
        .max(1)
        .try_into()
        .unwrap_or(u64::MAX)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let Rendered {
            problem,
            retry_after,
            cause,
        } = self.render();
        let status =
            StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = super::body::to_body(&problem).unwrap_or_default();
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(wait) = retry_after {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(retry_after_seconds(wait)),
            );
        }
        if status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"lockgate\""),
            );
        }
        // For the metrics' outcome label.
        response.extensions_mut().insert(problem.kind);
        if let Some(cause) = cause.filter(|_| status.is_server_error()) {
            response.extensions_mut().insert(ServerErrorCause(cause));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::BackendError;

    fn status_and_type(err: ApiError) -> (u16, String) {
        let Rendered { problem, .. } = err.render();
        (problem.status, problem.type_uri)
    }

    #[test]
    fn lock_errors_map_to_the_documented_statuses_and_types() {
        let cases = [
            (
                ApiError::from(LockError::Held {
                    retry_after: Duration::from_secs(1),
                }),
                409,
                "lock-held",
            ),
            (LockError::NotHeld.into(), 404, "lock-not-held"),
            (LockError::NotOwner.into(), 409, "not-owner"),
            (
                LockError::LimitDiffers { held: 3 }.into(),
                409,
                "permits-mismatch",
            ),
            (
                LockError::NotOffered {
                    kind: "semaphore",
                    mode: "redlock",
                }
                .into(),
                501,
                "not-offered",
            ),
            (LockError::Revoked.into(), 410, "lock-revoked"),
            (LockError::MaxHoldReached.into(), 409, "max-hold-reached"),
            (LockError::TooManyWaiters.into(), 503, "too-many-waiters"),
            (LockError::TooManyWatchers.into(), 503, "too-many-watchers"),
            (LockError::ShuttingDown.into(), 503, "shutting-down"),
            (
                LockError::InsufficientReplicas {
                    wanted: 2,
                    acked: 1,
                }
                .into(),
                503,
                "insufficient-replicas",
            ),
            (LockError::LeaseExpired.into(), 503, "backend-unavailable"),
            (
                LockError::BackendUnavailable(BackendError::Timeout(Duration::from_secs(1))).into(),
                503,
                "backend-unavailable",
            ),
            (InvalidName::Empty.into(), 400, "invalid-name"),
            (
                ApiError::body(Some("ttl_ms".into()), "bad"),
                400,
                "invalid-request",
            ),
            (
                ApiError::PayloadTooLarge { limit: 10 },
                413,
                "payload-too-large",
            ),
            (
                ApiError::HeadersTooLarge { limit: 10 },
                431,
                "headers-too-large",
            ),
            (ApiError::NotFound, 404, "not-found"),
            (ApiError::MethodNotAllowed, 405, "method-not-allowed"),
            (ApiError::Internal("boom".into()), 500, "internal"),
        ];
        for (err, status, slug) in cases {
            assert_eq!(
                status_and_type(err),
                (status, format!("{PROBLEM_BASE}{slug}"))
            );
        }
    }

    #[test]
    fn server_errors_hide_their_cause_from_the_client() {
        let err = LockError::BackendUnavailable(BackendError::Unavailable(
            "connection refused 10.0.0.7".into(),
        ));
        let Rendered { problem, cause, .. } = ApiError::from(err).render();
        assert!(!problem.detail.contains("10.0.0.7"));
        assert!(cause.is_some_and(|c| c.contains("10.0.0.7")));
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_seconds(Duration::from_millis(0)), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(300)), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1000)), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1001)), 2);
    }
}
