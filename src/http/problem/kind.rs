//! The kinds of problem the API answers with: each one's `type`, title, status and meaning.
//! The stable part of the contract: clients match on the `type`.

use axum::http::StatusCode;

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
    NotReentrant,
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
    pub const ALL: [Self; 29] = [
        Self::InvalidName,
        Self::InvalidRequest,
        Self::LockHeld,
        Self::LockNotHeld,
        Self::PermitsMismatch,
        Self::NotOffered,
        Self::CrossSlot,
        Self::NotOwner,
        Self::NotReentrant,
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
            Self::NotReentrant => "not-reentrant",
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
            Self::NotReentrant => "Not a reentrant lock",
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
            Self::NotReentrant => {
                "the `Lock-Token` holds a lock that was not taken with `reentrant: true`: it \
                 cannot be taken again"
            }
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
                 repeat (except a reentrant lock's re-entry or release, which counts holds)"
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
            Self::LockHeld
            | Self::NotOwner
            | Self::NotReentrant
            | Self::MaxHoldReached
            | Self::PermitsMismatch => StatusCode::CONFLICT,
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
