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
//! The kinds, with their `type`, title, status and meaning, are `kind`; how each lock-layer
//! error renders, `render`; this file, the document, the handlers' errors and the answer.

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

mod kind;
mod render;

pub use self::kind::ProblemKind;
use self::render::render_lock_error;

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
    /// Without API keys: a `Host` not the gateway's, or a browser's cross-site change; why.
    UntrustedOrigin(&'static str),
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
pub(super) struct Rendered {
    problem: Problem,
    retry_after: Option<Duration>,
    cause: Option<String>,
}

impl ApiError {
    /// The problem document this error answers (for a stream's last line, where no status
    /// can be sent any more).
    pub fn into_problem(self) -> Problem {
        self.render().problem
    }

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
            Self::UntrustedOrigin(why) => plain(Problem::new(ProblemKind::UntrustedOrigin, why)),
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
mod tests;
