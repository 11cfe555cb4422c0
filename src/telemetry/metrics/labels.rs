//! The label values of the metrics: short fixed lists, never a lock name or a token, so the
//! number of series is bounded.

use super::Operation;

/// How a request ended: the `outcome` label. Successes name what happened; failures are the
/// problem type (`lock-held` and `lock-not-held` shortened to `held` and `not-held`).
pub const OUTCOMES: [&str; 43] = [
    "acquired",
    "replayed",
    "reentered",
    "hold-given-back",
    "renewed",
    "released",
    "revoked",
    "inspected",
    "listed",
    "watched",
    "ok",
    "held",
    "not-held",
    "not-owner",
    "not-reentrant",
    "permits-mismatch",
    "idempotency-key-reused",
    "not-offered",
    "cross-slot",
    "lock-revoked",
    "max-hold-reached",
    "too-many-watchers",
    "invalid-name",
    "invalid-request",
    "payload-too-large",
    "headers-too-large",
    "unauthorized",
    "forbidden",
    "untrusted-origin",
    "not-found",
    "method-not-allowed",
    "insufficient-replicas",
    "backend-unavailable",
    "backend-full",
    "grants-held-back",
    "outcome-unknown",
    "wait-pool-exhausted",
    "too-many-waiters",
    "overloaded",
    "shutting-down",
    "timeout",
    "error",
    "other",
];

/// Why hold streams end with `lost`: the `reason` label of `lockgate_hold_streams_lost_total`.
pub const HOLD_LOST_REASONS: [&str; 3] = ["not-held", "not-owner", "expired"];

/// The index of `outcome` in [`OUTCOMES`] (`other` for anything unlisted).
pub(super) fn outcome_index(outcome: &str) -> usize {
    OUTCOMES
        .iter()
        .position(|o| *o == outcome)
        .unwrap_or(OUTCOMES.len() - 1)
}

/// The labels of a request series: `operation`, and `kind` for a request on a route of a
/// kind of lease (listing and watching included: without it, listing locks and listing
/// semaphores would be one series twice, of which Prometheus keeps one).
pub(super) fn labels(kind: Option<&str>, operation: Operation) -> String {
    match kind {
        Some(kind) => format!("operation=\"{}\",kind=\"{kind}\"", operation.label()),
        None => format!("operation=\"{}\"", operation.label()),
    }
}

/// Redis calls timed by the backend: the `call` label of the round-trip histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisCall {
    /// One lock script on the command connection.
    Script,
    /// A lock script followed by `WAIT`, on a dedicated connection.
    ScriptWait,
    /// PING (readiness).
    Ping,
    /// Plain commands a request sends: native compare-and-delete (`DELIFEQ`, `SET … IFEQ`)
    /// instead of a script, a listing's `SCAN`, a revoke.
    Command,
    /// The guards' look at a node, in the background and not for any request: its memory
    /// policy, its clock, its data-loss marker (see `backend::guards`).
    Guard,
}

pub(super) const REDIS_CALLS: [&str; 5] = ["script", "script_wait", "ping", "command", "guard"];

/// Kinds of backend errors: the `kind` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendErrorKind {
    /// Unreachable, or refused: nothing took effect.
    Unavailable,
    /// No answer in time, or the connection broke while waiting for it.
    Timeout,
    /// Every dedicated WAIT connection was busy.
    WaitPoolExhausted,
    /// An answer that made no sense, or a refused command.
    Protocol,
    /// Settings that cannot work.
    Config,
    /// The store is out of memory and refuses writes (`OOM`).
    Full,
}

impl BackendErrorKind {
    pub(super) const ALL: [Self; 6] = [
        Self::Unavailable,
        Self::Timeout,
        Self::WaitPoolExhausted,
        Self::Protocol,
        Self::Config,
        Self::Full,
    ];

    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Unavailable => "unavailable",
            Self::Timeout => "timeout",
            Self::WaitPoolExhausted => "wait_pool_exhausted",
            Self::Protocol => "protocol",
            Self::Config => "config",
            Self::Full => "full",
        }
    }
}

/// The kinds of lease the wait and hold histograms are kept for (`backend::Leased::kind`):
/// the `kind` label of `lockgate_wait_seconds` and `lockgate_hold_seconds`. A kind not listed
/// here is counted as `other`.
pub const LEASE_KINDS: [&str; 5] = ["lock", "shared", "semaphore", "multi", "other"];

/// The index of `kind` in [`LEASE_KINDS`] (`other` for anything unlisted).
pub(super) fn lease_kind_index(kind: &str) -> usize {
    LEASE_KINDS
        .iter()
        .position(|k| *k == kind)
        .unwrap_or(LEASE_KINDS.len() - 1)
}

/// How a wait in line for a lease ended: the `outcome` label of `lockgate_wait_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitEnd {
    /// The lease was granted.
    Granted,
    /// The request's `wait_ms` ran out first (answered `lock-held`).
    TimedOut,
}

impl WaitEnd {
    pub(super) const ALL: [Self; 2] = [Self::Granted, Self::TimedOut];

    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Granted => "granted",
            Self::TimedOut => "timed_out",
        }
    }
}

/// How a lease's hold ended: the `ended` label of `lockgate_hold_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldEnd {
    /// Its holder released it (a `DELETE`, or a hold stream's client going away).
    Released,
    /// A hold stream learnt that an operator revoked it.
    Revoked,
    /// A hold stream reached its `max_hold_ms` and released it.
    MaxHold,
    /// A hold stream lost it (it ran out, or another holder has it).
    Lost,
}

impl HoldEnd {
    pub(super) const ALL: [Self; 4] = [Self::Released, Self::Revoked, Self::MaxHold, Self::Lost];

    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Released => "released",
            Self::Revoked => "revoked",
            Self::MaxHold => "max_hold",
            Self::Lost => "lost",
        }
    }
}
