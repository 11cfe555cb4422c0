//! What the routes answer besides success, in the document: the groups of problems the rows
//! of the route table name ([`groups`]), the problems the gate itself answers on each kind of
//! route ([`gate_problems`]), and the problem responses written from them, one per status
//! ([`problem_responses`]). Split from `routes.rs`, which joins rows and document.

use axum::http::StatusCode;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{ContentBuilder, Ref, Response, ResponseBuilder};

use crate::http::problem::{PROBLEM_JSON, ProblemKind};
use crate::operation::Operation;

/// The groups of problems the rows of the route table name: what every route of a kind can
/// answer, and what some of them add.
pub mod groups {
    use crate::http::problem::ProblemKind;
    use crate::http::problem::ProblemKind::{
        BackendFull, BackendUnavailable, CrossSlot, Forbidden, GrantsHeldBack,
        IdempotencyKeyReused, InsufficientReplicas, InvalidName, InvalidRequest, LockHeld,
        LockNotHeld, LockRevoked, MaxHoldReached, NotOffered, NotOwner, OutcomeUnknown,
        PayloadTooLarge, ShuttingDown, TooManyWaiters, TooManyWatchers, WaitPoolExhausted,
    };

    /// What every acquire can answer (a lock, a shared grant, a permit, a set; and their hold
    /// streams, which answer these before their stream starts).
    pub const ACQUIRE: &[ProblemKind] = &[
        InvalidName,
        InvalidRequest,
        LockHeld,
        IdempotencyKeyReused,
        PayloadTooLarge,
        NotOffered,
        BackendUnavailable,
        BackendFull,
        GrantsHeldBack,
        InsufficientReplicas,
        WaitPoolExhausted,
        TooManyWaiters,
        ShuttingDown,
    ];
    /// What every renewal can answer.
    pub const RENEW: &[ProblemKind] = &[
        InvalidName,
        InvalidRequest,
        LockNotHeld,
        MaxHoldReached,
        PayloadTooLarge,
        NotOffered,
        BackendUnavailable,
        BackendFull,
        OutcomeUnknown,
        InsufficientReplicas,
        WaitPoolExhausted,
    ];
    /// What every release can answer.
    pub const RELEASE: &[ProblemKind] = &[
        InvalidName,
        InvalidRequest,
        LockNotHeld,
        NotOffered,
        BackendUnavailable,
        OutcomeUnknown,
    ];
    /// What a lock's (or a set's) renewal and release add: another token holds it, or an
    /// operator revoked it. (A permit has neither.)
    pub const HELD_BY_ONE: &[ProblemKind] = &[NotOwner, LockRevoked];
    /// What a reentrant lock's re-entry adds (`POST /locks/{name}` with `reentrant: true` and
    /// the holder's `Lock-Token`): it is a renewal of the lock that also counts a hold, or a
    /// token that holds a lock not taken reentrant.
    pub const REENTER: &[ProblemKind] = &[
        LockNotHeld,
        MaxHoldReached,
        OutcomeUnknown,
        NotOwner,
        LockRevoked,
        ProblemKind::NotReentrant,
    ];
    /// What a set adds: its names across Cluster slots, and names a key may not use (the gate
    /// cannot see them: they are in the body or the query).
    pub const OF_A_SET: &[ProblemKind] = &[CrossSlot, Forbidden];

    /// What every event stream can answer.
    pub const WATCHING: &[ProblemKind] = &[TooManyWatchers, BackendUnavailable, ShuttingDown];
}

/// The problems the gate itself answers on a route of `operation` (see `gate`): a request
/// head over `--max-header-bytes` anywhere; without or with a wrong API key, or with two
/// `Authorization` headers, anywhere but the probes; a key outside its scope on a lock (and
/// on `/metrics`, with `--metrics-auth`); without API keys, a `Host` or a browser's origin
/// not the gateway's, anywhere; the concurrency limit and the deadline wherever a request
/// takes a slot (not the probes, not `/metrics`).
pub(super) fn gate_problems(operation: Operation) -> &'static [ProblemKind] {
    use ProblemKind::{
        Forbidden, HeadersTooLarge, InvalidRequest, Overloaded, Timeout, Unauthorized,
        UntrustedOrigin,
    };
    match operation {
        Operation::Healthz | Operation::Readyz | Operation::Console => {
            &[HeadersTooLarge, UntrustedOrigin]
        }
        Operation::Metrics => &[
            InvalidRequest,
            Unauthorized,
            Forbidden,
            UntrustedOrigin,
            HeadersTooLarge,
        ],
        operation if operation.is_lock_operation() => &[
            InvalidRequest,
            Unauthorized,
            Forbidden,
            UntrustedOrigin,
            HeadersTooLarge,
            Overloaded,
            Timeout,
        ],
        _ => &[
            InvalidRequest,
            Unauthorized,
            UntrustedOrigin,
            HeadersTooLarge,
            Overloaded,
            Timeout,
        ],
    }
}

/// The problem responses of a route that answers `problems`: one response per status, whose
/// description says each kind's meaning (from the problem table), with `Retry-After` where
/// the answer carries it.
pub fn problem_responses(problems: &[ProblemKind]) -> Vec<(String, Response)> {
    let mut statuses: Vec<StatusCode> = problems.iter().map(|kind| kind.status()).collect();
    statuses.sort_unstable();
    statuses.dedup();
    statuses
        .into_iter()
        .map(|status| {
            let kinds: Vec<ProblemKind> = problems
                .iter()
                .copied()
                .filter(|kind| kind.status() == status)
                .collect();
            let meanings: Vec<String> = kinds
                .iter()
                .map(|kind| format!("`{}`: {}", kind.slug(), kind.meaning()))
                .collect();
            let mut response = ResponseBuilder::new()
                .description(format!("{}.", meanings.join("; ")))
                .content(
                    PROBLEM_JSON,
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("Problem")))
                        .build(),
                );
            let retry_after = if status == StatusCode::SERVICE_UNAVAILABLE {
                Some("Seconds to wait before retrying.")
            } else if kinds.contains(&ProblemKind::LockHeld) {
                Some("`lock-held`: seconds until the lease in the way ends, rounded up.")
            } else {
                None
            };
            if let Some(description) = retry_after {
                response = response.header(
                    "Retry-After",
                    HeaderBuilder::new()
                        .schema(Some(
                            ObjectBuilder::new()
                                .schema_type(Type::Integer)
                                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
                                .minimum(Some(0)),
                        ))
                        .description(Some(description))
                        .build(),
                );
            }
            (status.as_u16().to_string(), response.build())
        })
        .collect()
}
