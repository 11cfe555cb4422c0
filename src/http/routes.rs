//! The route table. Its rows (the `route_group!` invocations, listed by `ROUTE_GROUPS` in
//! `http/mod.rs`) say what every operation the API serves is: its handler, whose name is the
//! operationId; the operation (so the scope an API key needs, the metrics' label and the
//! timeout class); the problems it answers beyond the gate's own; and the tag the document
//! groups it under. From the rows come both the document (utoipa-axum reads each row's
//! handler, whose `#[utoipa::path]` attribute gives the route its method, path, parameters
//! and successful answers) and the rows' handlers, which the gate calls. [`table_from`]
//! joins the two by operationId into the [`RouteTable`] the gate routes by (`dispatch`), and
//! stops the gateway from being built if an attribute's `operation_id` names no row (every
//! test builds it). So a route cannot be served without being classified, or classified
//! without being served, or either without being documented.
//!
//! The problem responses of the document are written from the problem table
//! ([`ProblemKind::meaning`]), grouped by status: a client reads ordinary responses. The
//! problem groups the rows name, and those responses, are in `routes/problems.rs`.

use axum::http::Method;
use utoipa::openapi::path::{HttpMethod, Operation as DocOperation, Parameter, ParameterIn};
use utoipa::openapi::{OpenApi, RefOr};
use utoipa_axum::router::OpenApiRouter;

use super::AppState;
use super::dispatch::{Endpoint, Handler, RouteTable};
use super::extract::LOCK_TOKEN;
use super::problem::ProblemKind;
use crate::operation::Operation;

mod problems;

pub use problems::groups;
use problems::{gate_problems, problem_responses};

/// What a route is, beyond its path and method: its row of the route table.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    /// The handler's name, which is the operation's `operationId` in the document.
    pub operation_id: &'static str,
    /// The group the document shows it in (one of `openapi::ApiDoc`'s tags).
    pub tag: &'static str,
    /// The operation: the scope a key needs, the metrics' label, the timeout class.
    pub operation: Operation,
    /// The kind of lease the route acts on (`lock`, `multi`, `semaphore`): the `kind` label of
    /// its request metrics. None on the service's routes (probes, documents, console).
    pub kind: Option<&'static str>,
    /// The problems the handler (and the lease engine under it) can answer, in groups (see
    /// [`groups`]); the gate's own (401, 403, 431, `overloaded`, `timeout`) are added by the
    /// document for every route they apply to.
    pub problems: &'static [&'static [ProblemKind]],
    /// Calls the handler.
    pub handler: Handler,
}

/// A group of rows of the route table, written together: the lock's routes, the service's
/// (probes, documents, console), or a primitive's own (see [`crate::primitive`]).
/// [`ROUTE_GROUPS`](crate::http::ROUTE_GROUPS) lists every group.
#[derive(Clone, Copy)]
pub struct RouteGroup {
    /// The rows, in the order the document lists their paths.
    pub rows: &'static [Route],
    /// Adds the group's handlers to the document (their `#[utoipa::path]` attributes).
    pub document: fn(OpenApiRouter<AppState>) -> OpenApiRouter<AppState>,
}

impl std::fmt::Debug for RouteGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.rows).finish()
    }
}

/// Every row of `groups`, in order.
pub fn rows(groups: &[RouteGroup]) -> Vec<Route> {
    groups
        .iter()
        .flat_map(|group| group.rows)
        .copied()
        .collect()
}

/// A group of the route table ([`RouteGroup`]): one row per route,
/// `module::handler => tag, operation(kind), problems;` (`(kind)`, the kind of lease acted on,
/// only on a lease's routes), from which both the rows the gate calls and the document come.
/// The handler's `#[utoipa::path]` attribute gives the route its method, path, parameters and
/// successful answers; its name is the operationId. The rows are in the order the document
/// lists the paths, which is also the order a 405's `Allow` names a path's methods in.
/// `problems` are groups of [`groups`] or of the primitive's own.
macro_rules! route_group {
    ($($module:ident::$handler:ident => $tag:literal, $operation:ident $(($kind:ident))?,
        $problems:expr;)*) => {
        $crate::http::routes::RouteGroup {
            rows: {
                #[allow(unused_imports)]
                use $crate::http::problem::ProblemKind::*;
                #[allow(unused_imports)]
                use $crate::http::routes::groups::*;
                &[$($crate::http::routes::Route {
                    operation_id: stringify!($handler),
                    tag: $tag,
                    operation: $crate::operation::Operation::$operation,
                    kind: $crate::http::routes::kind_of(&[$(stringify!($kind))?]),
                    problems: $problems,
                    handler: |request, state| {
                        $crate::http::invoke::LeanHandler::call($module::$handler, request, state)
                    },
                }),*]
            },
            document: |router| router $(.routes(utoipa_axum::routes!($module::$handler)))*,
        }
    };
}
pub(crate) use route_group;

/// The index of `route`'s kind of lease in `kinds` ([`lease_kinds`]) plus one, 0 for none:
/// what the request metrics count it under.
pub fn kind_index(kinds: &[&'static str], route: &Route) -> usize {
    route
        .kind
        .and_then(|kind| kinds.iter().position(|k| *k == kind))
        .map_or(0, |index| index + 1)
}

/// A row's kind of lease, from the `(kind)` it may name (see `route_group!`).
pub const fn kind_of(named: &[&'static str]) -> Option<&'static str> {
    match named {
        [kind] => Some(*kind),
        _ => None,
    }
}

/// The kinds of lease the rows act on, each once, in the rows' order: the `kind` label's
/// values of the request metrics (a route's index in it is its endpoint's `kind`, plus one).
pub fn lease_kinds(routes: &[Route]) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    for kind in routes.iter().filter_map(|route| route.kind) {
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds
}

/// The table the gate routes by: every operation of `doc` (generated from the handlers) with
/// its row of `routes`, in the rows' order (so a template's `Allow` names its methods in
/// that order, as axum's router did). Writes each operation's tag and problem responses.
///
/// # Panics
/// When an operation of the document has no row (a route that would be served unclassified,
/// and so without its scope checked), or a row no operation of the document (a route declared
/// but not served). Every test that builds the gateway meets it.
pub fn table_from(doc: &mut OpenApi, routes: &[Route]) -> RouteTable {
    let kinds = lease_kinds(routes);
    let mut served = Vec::new();
    for (path, item) in &mut doc.paths.paths {
        let of_the_path = item.parameters.clone().unwrap_or_default();
        for (method, operation) in operations(item) {
            let id = operation.operation_id.as_deref().unwrap_or_default();
            let row = routes
                .iter()
                .position(|route| route.operation_id == id)
                .unwrap_or_else(|| panic!("{method} {path} ({id}) has no row in the route table"));
            let route = &routes[row];
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
            let parameters = Parameters(
                of_the_path
                    .iter()
                    .chain(operation.parameters.iter().flatten())
                    .filter_map(|parameter| match parameter {
                        RefOr::T(parameter) => Some(parameter),
                        RefOr::Ref(_) => None,
                    })
                    .collect(),
            );
            let endpoint = Endpoint {
                method,
                operation: route.operation,
                kind: kind_index(&kinds, route),
                query: parameters
                    .named_in(ParameterIn::Query)
                    .map(Into::into)
                    .collect(),
                takes_lock_token: parameters
                    .named_in(ParameterIn::Header)
                    .any(|header| header.eq_ignore_ascii_case(LOCK_TOKEN.as_str())),
                handler: route.handler,
            };
            served.push((row, path.clone(), endpoint));
        }
    }
    let unserved: Vec<&str> = (0..routes.len())
        .filter(|row| !served.iter().any(|(served, ..)| served == row))
        .map(|row| routes[row].operation_id)
        .collect();
    assert!(
        unserved.is_empty(),
        "rows of the route table no handler serves: {unserved:?}"
    );
    served.sort_by_key(|(row, ..)| *row);
    RouteTable::new(
        served
            .into_iter()
            .map(|(_, path, endpoint)| (path, endpoint)),
    )
}

/// The parameters an operation takes: its path's and its own.
struct Parameters<'d>(Vec<&'d Parameter>);

impl Parameters<'_> {
    /// The names of those `in` the query, or the headers.
    fn named_in(&self, r#in: ParameterIn) -> impl Iterator<Item = &str> {
        self.0
            .iter()
            .filter(move |parameter| parameter.parameter_in == r#in)
            .map(|parameter| parameter.name.as_str())
    }
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
