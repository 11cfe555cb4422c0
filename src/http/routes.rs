//! The route table. Every route is declared once, by its handler: the `#[utoipa::path]`
//! attribute gives its method, path, parameters and successful answers, and its
//! `x-lockgate-route` extension (a [`Route`]) the operation it is (so the scope an API key
//! needs and its timeout class) and the problems it answers beyond the gate's own. The
//! handlers registered in `http::api` are the table: the router, the OpenAPI document and the
//! gate's classification ([`RouteTable`], read from the document when the router is built)
//! all come from those declarations, so a route cannot be served without being classified,
//! or documented without being served.
//!
//! The problem responses of the document are written from the problem table
//! ([`ProblemKind::meaning`]), grouped by status, and the extension is taken out: a client
//! reads ordinary responses.

use axum::http::{Method, StatusCode};
use serde::ser::{Serialize, SerializeStruct, Serializer};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{HttpMethod, Operation as DocOperation};
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, Response, ResponseBuilder};

use super::problem::{PROBLEM_JSON, ProblemKind};
use crate::operation::Operation;

/// The name of the extension that carries a [`Route`] in a handler's attribute.
pub const ROUTE_EXTENSION: &str = "x-lockgate-route";

/// What a route is, beyond its path and method: `extensions(("x-lockgate-route" =
/// json!(ROUTE)))` in its handler's attribute, with `ROUTE` a constant beside the handler.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    /// The operation: the scope a key needs, the metrics' label, the timeout class.
    pub operation: Operation,
    /// The problems the handler (and the lease engine under it) can answer, in groups (see
    /// [`ACQUIRE`] and the others); the gate's own (401, 403, 431, `overloaded`, `timeout`)
    /// are added by the document for every route they apply to.
    pub problems: &'static [&'static [ProblemKind]],
}

impl Route {
    pub const fn new(operation: Operation, problems: &'static [&'static [ProblemKind]]) -> Self {
        Self {
            operation,
            problems,
        }
    }
}

/// As the document carries it until [`RouteTable::take_from`] reads it: labels and slugs.
impl Serialize for Route {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let problems: Vec<&str> = self
            .problems
            .iter()
            .flat_map(|group| group.iter().map(|kind| kind.slug()))
            .collect();
        let mut route = serializer.serialize_struct("Route", 2)?;
        route.serialize_field("operation", self.operation.label())?;
        route.serialize_field("problems", &problems)?;
        route.end()
    }
}

use ProblemKind::{
    BackendFull, BackendUnavailable, CrossSlot, Forbidden, GrantsHeldBack, InsufficientReplicas,
    InvalidName, InvalidRequest, LockHeld, LockNotHeld, LockRevoked, MaxHoldReached, NotOffered,
    NotOwner, OutcomeUnknown, PayloadTooLarge, PermitsMismatch, ShuttingDown, TooManyWaiters,
    WaitPoolExhausted,
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

/// Every route served, by its template and method, with the operation it is. A `GET` row
/// covers `HEAD`, which axum serves with the `GET` handler.
#[derive(Debug, Default)]
pub struct RouteTable {
    rows: Vec<(String, Method, Operation)>,
}

impl RouteTable {
    /// Reads every operation's [`Route`] out of `doc` (generated from the handlers), writes
    /// its problem responses, and removes the extension.
    ///
    /// # Panics
    /// When an operation has no declaration, or one this build cannot read: a route that
    /// would be served unclassified, and so without its scope checked. Every test that builds
    /// the router meets it.
    pub fn take_from(doc: &mut OpenApi) -> Self {
        let mut rows = Vec::new();
        for (path, item) in &mut doc.paths.paths {
            for (method, operation) in operations(item) {
                let route = declared(operation).unwrap_or_else(|| {
                    panic!("{method} {path} has no readable {ROUTE_EXTENSION} declaration")
                });
                let mut problems = route.problems;
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

/// A route as the document carried it, read back: its operation and its problems.
struct Declared {
    operation: Operation,
    problems: Vec<ProblemKind>,
}

/// Takes the declaration out of `operation`'s extensions.
fn declared(operation: &mut DocOperation) -> Option<Declared> {
    let value = operation.extensions.as_mut()?.remove(ROUTE_EXTENSION)?;
    if operation
        .extensions
        .as_ref()
        .is_some_and(|extensions| extensions.is_empty())
    {
        operation.extensions = None;
    }
    let label = value.get("operation")?.as_str()?;
    let operation = Operation::ALL
        .into_iter()
        .find(|operation| operation.label() == label)?;
    let problems = value
        .get("problems")?
        .as_array()?
        .iter()
        .map(|slug| {
            let slug = slug.as_str()?;
            ProblemKind::ALL
                .into_iter()
                .find(|kind| kind.slug() == slug)
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Declared {
        operation,
        problems,
    })
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
