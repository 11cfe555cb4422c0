//! The kinds of problem the API answers with: each one's `type`, title, status and meaning.
//! The stable part of the contract: clients match on the `type`.

use axum::http::StatusCode;

/// The table of problem kinds: per kind, its status, the last segment of its `type` URI, its
/// title, and what it means (for the responses of the OpenAPI document: each route lists
/// the kinds it answers, see `routes`; it says what a client should know, not how the
/// gateway found out). A new kind is one row.
macro_rules! problem_kinds {
    ($($(#[$attr:meta])* $kind:ident: $status:ident, $slug:literal, $title:literal,
        $meaning:literal;)*) => {
        /// Each kind of problem the API answers with.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub enum ProblemKind {
            $($(#[$attr])* $kind,)*
        }

        impl ProblemKind {
            /// Every kind, for tests that check a table covers them all.
            pub const ALL: [Self; [$(stringify!($kind)),*].len()] = [$(Self::$kind),*];

            /// The last segment of the `type` URI.
            pub fn slug(self) -> &'static str {
                match self {
                    $(Self::$kind => $slug,)*
                }
            }

            pub fn title(self) -> &'static str {
                match self {
                    $(Self::$kind => $title,)*
                }
            }

            /// What the problem means (see the table).
            pub fn meaning(self) -> &'static str {
                match self {
                    $(Self::$kind => $meaning,)*
                }
            }

            pub fn status(self) -> StatusCode {
                match self {
                    $(Self::$kind => StatusCode::$status,)*
                }
            }
        }
    };
}

problem_kinds! {
    InvalidName: BAD_REQUEST, "invalid-name", "Invalid lock name",
        "the name is not 1 to 200 characters of `A-Z a-z 0-9 . _ : -` starting with a \
        letter or digit";
    InvalidRequest: BAD_REQUEST, "invalid-request", "Invalid request",
        "bad JSON, an unknown field, a value out of range, or a missing or malformed \
        header or query parameter (`field` or `header` names it)";
    LockHeld: CONFLICT, "lock-held", "Lock is held",
        "another client holds it (after `wait_ms`, if given); `retry_after_ms` says \
        when the lease in the way ends";
    LockNotHeld: NOT_FOUND, "lock-not-held", "Lock is not held",
        "nobody holds it: it expired or was released";
    PermitsMismatch: CONFLICT, "permits-mismatch", "Permit limit differs",
        "the permits held were granted under another limit (the problem's `permits`)";
    IdempotencyKeyReused: UNPROCESSABLE_ENTITY, "idempotency-key-reused",
        "Idempotency key reused",
        "the `Idempotency-Key` already holds the name with a grant of another kind (another \
        `mode`, `reentrant`, `max_hold_ms` or `min_hold_ms`, or `owner`/`metadata` where the \
        first request had none, or the reverse): a retry repeats its request's body; nothing \
        was taken";
    NotOffered: NOT_IMPLEMENTED, "not-offered", "Not offered in this mode",
        "the configured backend does not keep this kind of lock (Redlock keeps plain \
        locks only)";
    CrossSlot: BAD_REQUEST, "cross-slot", "Names in different hash slots",
        "Redis Cluster: the names map to different hash slots";
    NotOwner: CONFLICT, "not-owner", "Not the lock owner",
        "it is held with a different token, and stays held";
    NotReentrant: CONFLICT, "not-reentrant", "Not a reentrant lock",
        "the `Lock-Token` holds a lock that was not taken with `reentrant: true`: it \
        cannot be taken again";
    LockRevoked: GONE, "lock-revoked", "Lock was revoked",
        "an operator revoked this token's lock";
    MaxHoldReached: CONFLICT, "max-hold-reached", "Maximum hold reached",
        "it has been held for as long as `max_hold_ms` (or `--max-hold`) allows, and \
        was released";
    InsufficientReplicas: SERVICE_UNAVAILABLE, "insufficient-replicas", "Insufficient replicas",
        "with `require_replicas`, fewer replicas than `replicas` acknowledged: an \
        acquire releases its grant, a renewal leaves the lease renewed";
    BackendUnavailable: SERVICE_UNAVAILABLE, "backend-unavailable", "Backend unavailable",
        "Redis did not answer or refused: nothing was done";
    BackendFull: SERVICE_UNAVAILABLE, "backend-full", "Backend out of memory",
        "Redis is out of memory and refuses writes";
    GrantsHeldBack: SERVICE_UNAVAILABLE, "grants-held-back", "Grants held back after the store lost leases",
        "new grants are held back after a step of the Redis clock";
    OutcomeUnknown: SERVICE_UNAVAILABLE, "outcome-unknown", "Outcome unknown",
        "sent, but no answer came: it may or may not have taken effect, and is safe to \
        repeat (except a reentrant lock's re-entry or release, which counts holds)";
    WaitPoolExhausted: SERVICE_UNAVAILABLE, "wait-pool-exhausted",
        "Replica acknowledgement pool exhausted",
        "every connection for replica acknowledgement is busy";
    TooManyWaiters: SERVICE_UNAVAILABLE, "too-many-waiters", "Too many waiters",
        "`--max-waiters` requests already wait for locks";
    TooManyWatchers: SERVICE_UNAVAILABLE, "too-many-watchers", "Too many watchers",
        "`--max-watchers` event streams are already open";
    ShuttingDown: SERVICE_UNAVAILABLE, "shutting-down", "Shutting down",
        "the gateway is shutting down";
    PayloadTooLarge: PAYLOAD_TOO_LARGE, "payload-too-large", "Payload too large",
        "the body exceeds `--max-body-bytes`";
    HeadersTooLarge: REQUEST_HEADER_FIELDS_TOO_LARGE, "headers-too-large",
        "Request headers too large",
        "the request line and headers exceed `--max-header-bytes`";
    NotFound: NOT_FOUND, "not-found", "Not found",
        "no such route";
    MethodNotAllowed: METHOD_NOT_ALLOWED, "method-not-allowed", "Method not allowed",
        "the route does not take this method";
    Unauthorized: UNAUTHORIZED, "unauthorized", "Unauthorized",
        "the gateway requires an API key and none, or an unknown one, was given";
    Forbidden: FORBIDDEN, "forbidden", "Forbidden",
        "the API key does not cover this operation on this name";
    UntrustedOrigin: FORBIDDEN, "untrusted-origin", "Untrusted origin",
        "a gateway without API keys answers only its own host names (an IP address, \
        `localhost`, or `--allowed-hosts`), and refuses a web page's request from another \
        origin that would change a lock (DNS rebinding, cross-site requests)";
    Overloaded: SERVICE_UNAVAILABLE, "overloaded", "Overloaded",
        "too many requests are in flight (`--max-concurrent-requests`)";
    Timeout: SERVICE_UNAVAILABLE, "timeout", "Request timed out",
        "the request took longer than the gateway allows";
    #[default]
    Internal: INTERNAL_SERVER_ERROR, "internal", "Internal error",
        "a bug in the gateway";
}
