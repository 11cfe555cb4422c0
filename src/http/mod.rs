//! The HTTP API: routes, extractors, bodies, problem documents and the OpenAPI document.
//!
//! [`router`] builds the whole application, an [`App`]; tests drive it in-process with
//! `tower::ServiceExt::oneshot`, and [`server`] serves it on a socket. Every answer,
//! including unknown routes, wrong methods and panics, is JSON; errors are problem documents.
//! [`gate`] is the one middleware: routing (by [`dispatch`]), request ids, concurrency
//! limit, authentication, timeout, panic safety, metrics and the access log.

pub mod acquiring;
pub mod answer;
pub mod body;
pub mod delivery;
pub mod dispatch;
pub mod dto;
pub mod extract;
pub mod gate;
pub mod handlers;
pub mod invoke;
pub mod json;
pub mod openapi;
pub mod parse_errors;
pub mod problem;
pub mod routes;
pub mod server;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::http::header::AUTHORIZATION;
use tower_http::sensitive_headers::SetSensitiveRequestHeaders;
use utoipa_axum::router::OpenApiRouter;

use self::dispatch::RouteTable;
use self::gate::{Gate, GateOptions, GateService};
use self::handlers::{console, contention, events, health, hold, listing, locks, metrics, multi};
use self::problem::ApiError;
use self::routes::{RouteGroup, route_group};
use crate::lock::{Limits, LockService};
use crate::operation::Operation;
use crate::telemetry::metrics::Metrics;

/// What handlers share: one pointer, since axum clones the state for every request (one
/// atomic count, where a struct of several `Arc`s cost one per field on every request).
#[derive(Debug, Clone)]
pub struct AppState(Arc<AppParts>);

impl AppState {
    pub fn new(parts: AppParts) -> Self {
        Self(Arc::new(parts))
    }
}

impl std::ops::Deref for AppState {
    type Target = AppParts;

    fn deref(&self) -> &AppParts {
        &self.0
    }
}

/// What [`AppState`] holds.
#[derive(Debug)]
pub struct AppParts {
    pub service: Arc<LockService>,
    pub gate: Arc<Gate>,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// The OpenAPI document, serialized once.
    pub openapi_json: Bytes,
    /// Whether `/ui` serves the console (else 404).
    pub console: bool,
}

/// HTTP settings the router needs.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub max_body_bytes: usize,
    /// Serve the operator's console at `/ui`.
    pub console: bool,
    pub gate: GateOptions,
}

/// The lock's routes (see `routes`): one row per route, in the order the document lists paths.
const LOCK_ROUTES: RouteGroup = route_group! {
    // /locks/{name}
    locks::acquire_lock => "locks", Acquire(lock), &[ACQUIRE, REENTER];
    locks::renew_lock => "locks", Renew(lock), &[RENEW, HELD_BY_ONE];
    locks::release_lock => "locks", Release(lock), &[RELEASE, HELD_BY_ONE];
    locks::inspect_lock => "locks", Inspect(lock),
        &[&[InvalidName, LockNotHeld, BackendUnavailable]];
    // /locks: a listing, or a set of locks
    listing::list_locks => "locks", List(lock),
        &[&[InvalidRequest, InvalidName, Forbidden, BackendUnavailable]];
    multi::acquire_locks => "locks", Acquire(multi), &[ACQUIRE, OF_A_SET];
    multi::renew_locks => "locks", Renew(multi), &[RENEW, HELD_BY_ONE, OF_A_SET];
    multi::release_locks => "locks", Release(multi), &[RELEASE, HELD_BY_ONE, OF_A_SET];
    // /locks/{name}/hold, /locks/{name}/events, /locks/events
    hold::hold_lock => "locks", Hold(lock), &[ACQUIRE];
    events::watch_lock => "locks", Watch(lock), &[&[InvalidName], WATCHING];
    events::watch_prefix => "locks", Watch(lock), &[&[InvalidRequest, Forbidden], WATCHING];
    // /contention: every kind's, so of none
    contention::contention => "locks", List, &[&[InvalidRequest]];
};

/// The service's own routes: the probes, the documents, the console.
const SERVICE_ROUTES: RouteGroup = route_group! {
    health::healthz => "health", Healthz, &[];
    health::readyz => "health", Readyz, &[&[BackendUnavailable, ShuttingDown]];
    health::openapi => "health", Openapi, &[];
    health::index => "health", Openapi, &[];
    metrics::metrics => "health", Metrics, &[];
    console::console_page => "console", Console, &[&[NotFound]];
    console::console_file => "console", Console, &[&[NotFound]];
    console::access => "health", Access, &[];
};

/// The route table: every group of routes, in the order the document lists their paths. A
/// primitive with routes of its own registers its group here, one line (see
/// [`crate::primitive`]).
pub const ROUTE_GROUPS: &[RouteGroup] = &[
    LOCK_ROUTES,
    crate::primitive::semaphore::ROUTES,
    SERVICE_ROUTES,
];

/// The document of every handler of the route table, in its order, over the document's head
/// (`openapi::ApiDoc`). (utoipa-axum builds an axum router of them on the way, which is
/// dropped: the gate routes by the table.)
pub(crate) fn documented() -> utoipa::openapi::OpenApi {
    use utoipa::OpenApi as _;
    let head = OpenApiRouter::<AppState>::with_openapi(openapi::ApiDoc::openapi());
    ROUTE_GROUPS
        .iter()
        .fold(head, |router, group| (group.document)(router))
        .into_openapi()
}

/// The OpenAPI description of the routes and the route table read from it (see [`routes`]).
pub(crate) fn api() -> (utoipa::openapi::OpenApi, RouteTable) {
    let mut doc = documented();
    let rows = routes::rows(ROUTE_GROUPS);
    let table = routes::table_from(&mut doc, &rows);
    let inspects: Vec<&str> = (rows.iter())
        .filter(|route| route.operation == Operation::Inspect)
        .map(|route| route.operation_id)
        .collect();
    openapi::document_head(&mut doc, &inspects);
    openapi::make_request_bodies_optional(&mut doc);
    openapi::describe_keys(&mut doc);
    openapi::describe_exactly(&mut doc);
    (doc, table)
}

/// The kinds of lease the route table's rows act on: the values of the request metrics'
/// `kind` label (see [`Metrics::new`](crate::telemetry::metrics::Metrics::new)).
pub fn lease_kinds() -> Vec<&'static str> {
    routes::lease_kinds(&routes::rows(ROUTE_GROUPS))
}

/// The OpenAPI document of this API for a server with these limits, as served at
/// `/openapi.json`. The committed copy is the one for the default limits.
pub fn openapi_document(limits: &Limits) -> String {
    render_openapi(api().0, limits)
}

fn render_openapi(mut doc: utoipa::openapi::OpenApi, limits: &Limits) -> String {
    openapi::apply_limits(&mut doc, limits);
    doc.to_pretty_json().unwrap_or_default()
}

/// The whole application: every request goes through the gate, which routes it (see
/// [`gate::GateService`]). Outside the gate, a header holding a secret is marked sensitive, so
/// that it prints as `Sensitive` wherever a request's headers are ever formatted; that adds no
/// state to a request's future (its future is the gate's), so a waiting request pays nothing
/// for it.
pub type App = SetSensitiveRequestHeaders<GateService>;

/// The whole application. `metrics` are the server's, shared with the backend.
pub fn router(service: Arc<LockService>, options: HttpOptions, metrics: Arc<Metrics>) -> App {
    routers(service, options, metrics).0
}

/// The whole application, and beside it the metrics alone (`GET /metrics` and nothing else,
/// outside the gate: no API key, not counted as a request) for `--metrics-listen`.
pub fn routers(
    service: Arc<LockService>,
    options: HttpOptions,
    metrics: Arc<Metrics>,
) -> (App, Router) {
    let (doc, table) = api();
    // With a final newline, as every other answer and `lockgate openapi` have.
    let openapi_json = Bytes::from(render_openapi(doc, service.limits()) + "\n");
    let state = AppState::new(AppParts {
        service,
        gate: Arc::new(Gate::new(options.gate, metrics, table)),
        max_body_bytes: options.max_body_bytes,
        openapi_json,
        console: options.console,
    });
    let metrics_only = Router::new()
        .route("/metrics", axum::routing::get(handlers::metrics::metrics))
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .with_state(state.clone());
    let app = SetSensitiveRequestHeaders::new(
        GateService::new(state),
        [AUTHORIZATION, extract::LOCK_TOKEN, extract::IDEMPOTENCY_KEY],
    );
    (app, metrics_only)
}

/// The state of an application served by `routes`, over the memory backend, with a request
/// timeout of `request_timeout`: for tests of the gate and the handlers.
#[cfg(test)]
pub(crate) fn test_state(routes: RouteTable, request_timeout: std::time::Duration) -> AppState {
    use crate::access::MetricsAuth;
    use crate::backend::Backend;
    use crate::backend::memory::MemoryBackend;
    use crate::lock::request::TEST_LIMITS;
    use crate::lock::token::TokenSecret;

    let backend = Backend::Memory(Box::new(MemoryBackend::new()));
    let gate = GateOptions {
        keys: None,
        hosts: gate::HostPolicy::default(),
        metrics_auth: MetricsAuth::Open,
        max_concurrent_requests: 10,
        request_timeout,
        max_wait: TEST_LIMITS.max_wait,
        max_header_bytes: 8192,
        tracing: None,
    };
    let secret = TokenSecret::random().expect("random");
    AppState::new(AppParts {
        service: Arc::new(crate::primitive::shared::register(LockService::new(
            backend,
            TEST_LIMITS,
            secret,
        ))),
        gate: Arc::new(Gate::new(
            gate,
            Arc::new(Metrics::new(&lease_kinds())),
            routes,
        )),
        max_body_bytes: 4096,
        openapi_json: Bytes::new(),
        console: true,
    })
}
