//! The route table. [`ROUTES`] says what every operation the API serves is, by its
//! operationId (the handler's name): the operation (so the scope an API key needs, the
//! metrics' label and the timeout class), the problems it answers beyond the gate's own, and
//! the tag the document groups it under.
//! The handlers registered in `http::api` give each route its method, path, parameters and
//! successful answers (their `#[utoipa::path]` attributes); utoipa-axum builds the router and
//! the OpenAPI document from them, and [`RouteTable::take_from`] joins the document to this
//! table when the router is built: a handler without a row, or a row without a handler, stops
//! the router from being built (every test builds it). So a route cannot be served without
//! being classified, or documented without being served.
//!
//! The problem responses of the document are written from the problem table
//! ([`ProblemKind::meaning`]), grouped by status: a client reads ordinary responses.

use axum::http::{Method, StatusCode};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{HttpMethod, Operation as DocOperation};
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, Response, ResponseBuilder};

use super::problem::{PROBLEM_JSON, ProblemKind};
use crate::operation::Operation;

/// What a route is, beyond its path and method: its row of [`ROUTES`].
#[derive(Debug, Clone, Copy)]
pub struct Route {
    /// The handler's name, which is the operation's `operationId` in the document.
    pub operation_id: &'static str,
    /// The group the document shows it in (one of `openapi::ApiDoc`'s tags).
    pub tag: &'static str,
    /// The operation: the scope a key needs, the metrics' label, the timeout class.
    pub operation: Operation,
    /// The problems the handler (and the lease engine under it) can answer, in groups (see
    /// [`ACQUIRE`] and the others); the gate's own (401, 403, 431, `overloaded`, `timeout`)
    /// are added by the document for every route they apply to.
    pub problems: &'static [&'static [ProblemKind]],
}

const fn route(
    operation_id: &'static str,
    tag: &'static str,
    operation: Operation,
    problems: &'static [&'static [ProblemKind]],
) -> Route {
    Route {
        operation_id,
        tag,
        operation,
        problems,
    }
}

use ProblemKind::{
    BackendFull, BackendUnavailable, CrossSlot, Forbidden, GrantsHeldBack, InsufficientReplicas,
    InvalidName, InvalidRequest, LockHeld, LockNotHeld, LockRevoked, MaxHoldReached, NotFound,
    NotOffered, NotOwner, OutcomeUnknown, PayloadTooLarge, PermitsMismatch, ShuttingDown,
    TooManyWaiters, TooManyWatchers, WaitPoolExhausted,
};

/// What every acquire can answer (a lock, a shared grant, a permit, a set; and their hold
/// streams, which answer these before their stream starts).
pub const ACQUIRE: &[ProblemKind] = &[
    InvalidName,
    InvalidRequest,
    LockHeld,
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
/// What a semaphore's acquire adds: another limit than the current holders'.
pub const OF_A_SEMAPHORE: &[ProblemKind] = &[PermitsMismatch];

/// What every event stream can answer.
const WATCHING: &[ProblemKind] = &[TooManyWatchers, BackendUnavailable, ShuttingDown];

/// Every operation the API serves, by the path it is served at: its operationId, the tag the
/// document groups it under, the operation it is, the problems it answers.
#[rustfmt::skip] // A table: one row per line reads best.
pub const ROUTES: &[Route] = {
    use Operation::{
        Access, Acquire, Console, Healthz, Hold, Inspect, List, Metrics, Openapi, Readyz, Release,
        Renew, Watch,
    };
    &[
        // /locks/{name}, /locks/{name}/hold, /locks/{name}/events
        route("acquire_lock", "locks", Acquire, &[ACQUIRE, REENTER]),
        route("renew_lock", "locks", Renew, &[RENEW, HELD_BY_ONE]),
        route("release_lock", "locks", Release, &[RELEASE, HELD_BY_ONE]),
        route("inspect_lock", "locks", Inspect, &[&[InvalidName, LockNotHeld, BackendUnavailable]]),
        route("hold_lock", "locks", Hold, &[ACQUIRE]),
        route("watch_lock", "locks", Watch, &[&[InvalidName], WATCHING]),
        // /locks (a listing, or a set of locks), /locks/events
        route("list_locks", "locks", List,
            &[&[InvalidRequest, InvalidName, Forbidden, BackendUnavailable]]),
        route("acquire_locks", "locks", Acquire, &[ACQUIRE, OF_A_SET]),
        route("renew_locks", "locks", Renew, &[RENEW, HELD_BY_ONE, OF_A_SET]),
        route("release_locks", "locks", Release, &[RELEASE, HELD_BY_ONE, OF_A_SET]),
        route("watch_prefix", "locks", Watch, &[&[InvalidRequest, Forbidden], WATCHING]),
        // /semaphores/{name}, /semaphores/{name}/hold, /semaphores
        route("acquire_permit", "semaphores", Acquire, &[ACQUIRE, OF_A_SEMAPHORE]),
        route("renew_permit", "semaphores", Renew, &[RENEW]),
        route("release_permit", "semaphores", Release, &[RELEASE]),
        route("inspect_semaphore", "semaphores", Inspect,
            &[&[InvalidName, NotOffered, BackendUnavailable]]),
        route("hold_permit", "semaphores", Hold, &[ACQUIRE, OF_A_SEMAPHORE]),
        route("list_semaphores", "semaphores", List, &[&[InvalidRequest, BackendUnavailable]]),
        // The probes, the documents, the console
        route("healthz", "health", Healthz, &[]),
        route("readyz", "health", Readyz, &[&[BackendUnavailable, ShuttingDown]]),
        route("openapi", "health", Openapi, &[]),
        route("index", "health", Openapi, &[]),
        route("metrics", "health", Metrics, &[]),
        route("console_page", "console", Console, &[&[NotFound]]),
        route("console_file", "console", Console, &[&[NotFound]]),
        route("access", "health", Access, &[]),
    ]
};

/// Every route served, by its template and method, with the operation it is. A `GET` row
/// covers `HEAD`, which axum serves with the `GET` handler.
#[derive(Debug, Default)]
pub struct RouteTable {
    rows: Vec<(String, Method, Operation)>,
}

impl RouteTable {
    /// Finds every operation of `doc` (generated from the handlers) in [`ROUTES`] and writes
    /// its problem responses.
    ///
    /// # Panics
    /// When an operation of the document has no row (a route that would be served
    /// unclassified, and so without its scope checked), or a row no operation of the document
    /// (a route declared but not served). Every test that builds the router meets it.
    pub fn take_from(doc: &mut OpenApi) -> Self {
        let mut rows = Vec::new();
        let mut unserved: Vec<&str> = ROUTES.iter().map(|route| route.operation_id).collect();
        for (path, item) in &mut doc.paths.paths {
            for (method, operation) in operations(item) {
                let id = operation.operation_id.as_deref().unwrap_or_default();
                let route = ROUTES
                    .iter()
                    .find(|route| route.operation_id == id)
                    .unwrap_or_else(|| panic!("{method} {path} ({id}) has no row in ROUTES"));
                unserved.retain(|served| *served != id);
                operation.tags = Some(vec![route.tag.to_owned()]);
                let mut problems: Vec<ProblemKind> =
                    route.problems.iter().copied().flatten().copied().collect();
                for kind in gate_problems(route.operation) {
                    if !problems.contains(kind) {
                        problems.push(*kind);
                    }
                }
                for (status, response) in problem_responses(&problems) {
                    operation
                        .responses
                        .responses
                        .insert(status, RefOr::T(response));
                }
                rows.push((path.clone(), method, route.operation));
            }
        }
        assert!(
            unserved.is_empty(),
            "rows of ROUTES no handler serves: {unserved:?}"
        );
        Self { rows }
    }

    /// The operation a request asks for, from its method and matched route.
    pub fn classify(&self, method: &Method, route: Option<&str>) -> Operation {
        let Some(route) = route else {
            return Operation::Other;
        };
        let method = if method == Method::HEAD {
            &Method::GET
        } else {
            method
        };
        self.rows
            .iter()
            .find(|(path, allowed, _)| path == route && allowed == method)
            .map_or(Operation::Other, |(_, _, operation)| *operation)
    }

    /// The routes, for tests and the docs.
    pub fn rows(&self) -> impl Iterator<Item = (&str, &Method, Operation)> {
        self.rows
            .iter()
            .map(|(path, method, operation)| (path.as_str(), method, *operation))
    }
}

/// The problems the gate itself answers on a route of `operation` (see `gate`): a request
/// head over `--max-header-bytes` anywhere; without or with a wrong API key, or with two
/// `Authorization` headers, anywhere but the probes; a key outside its scope on a lock (and
/// on `/metrics`, with `--metrics-auth`); the concurrency limit and the deadline wherever a
/// request takes a slot (not the probes, not `/metrics`).
fn gate_problems(operation: Operation) -> &'static [ProblemKind] {
    use ProblemKind::{
        Forbidden, HeadersTooLarge, InvalidRequest, Overloaded, Timeout, Unauthorized,
    };
    match operation {
        Operation::Healthz | Operation::Readyz | Operation::Console => &[HeadersTooLarge],
        Operation::Metrics => &[InvalidRequest, Unauthorized, Forbidden, HeadersTooLarge],
        operation if operation.is_lock_operation() => &[
            InvalidRequest,
            Unauthorized,
            Forbidden,
            HeadersTooLarge,
            Overloaded,
            Timeout,
        ],
        _ => &[
            InvalidRequest,
            Unauthorized,
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

/// The operations of a path item, with their methods.
fn operations(
    item: &mut utoipa::openapi::PathItem,
) -> impl Iterator<Item = (Method, &mut DocOperation)> {
    [
        (HttpMethod::Get, &mut item.get),
        (HttpMethod::Post, &mut item.post),
        (HttpMethod::Put, &mut item.put),
        (HttpMethod::Patch, &mut item.patch),
        (HttpMethod::Delete, &mut item.delete),
        (HttpMethod::Head, &mut item.head),
        (HttpMethod::Options, &mut item.options),
        (HttpMethod::Trace, &mut item.trace),
    ]
    .into_iter()
    .filter_map(|(method, operation)| {
        let method = match method {
            HttpMethod::Get => Method::GET,
            HttpMethod::Post => Method::POST,
            HttpMethod::Put => Method::PUT,
            HttpMethod::Patch => Method::PATCH,
            HttpMethod::Delete => Method::DELETE,
            HttpMethod::Head => Method::HEAD,
            HttpMethod::Options => Method::OPTIONS,
            HttpMethod::Trace => Method::TRACE,
        };
        operation.as_mut().map(|operation| (method, operation))
    })
}
