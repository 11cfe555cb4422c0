//! The HTTP API: routes, extractors, bodies, problem documents and the OpenAPI document.
//!
//! [`router`] builds the whole `axum::Router`; tests drive it in-process with
//! `tower::ServiceExt::oneshot`, and [`crate::serve`] serves it on a socket. Every answer,
//! including unknown routes, wrong methods and panics, is JSON; errors are problem documents.
//! [`observe`] is the one middleware: server-error logging and panic safety.

pub mod delivery;
pub mod dto;
pub mod extract;
pub mod health;
pub mod hold;
pub mod locks;
pub mod observe;
pub mod openapi;
pub mod problem;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use self::problem::ApiError;
use crate::lock::{Limits, LockService};

/// What handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    pub service: Arc<LockService>,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// The OpenAPI document, serialized once.
    pub openapi_json: Bytes,
}

/// HTTP settings the router needs.
#[derive(Debug, Clone, Copy)]
pub struct HttpOptions {
    pub max_body_bytes: usize,
}

/// The routes and their OpenAPI description, before state is attached.
fn api() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let (router, mut doc) = OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(
            locks::acquire_lock,
            locks::renew_lock,
            locks::release_lock,
            locks::inspect_lock
        ))
        .routes(routes!(hold::hold_lock))
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(health::openapi_json))
        .split_for_parts();
    openapi::make_request_bodies_optional(&mut doc);
    (router, doc)
}

/// The OpenAPI document of this API for a server with these limits, as served at
/// `/openapi.json`. The committed copy is the one for the default limits.
pub fn openapi_document(limits: &Limits) -> String {
    render_openapi(api().1, limits)
}

fn render_openapi(mut doc: utoipa::openapi::OpenApi, limits: &Limits) -> String {
    openapi::apply_limits(&mut doc, limits);
    doc.to_pretty_json().unwrap_or_default()
}

/// The whole application.
pub fn router(service: Arc<LockService>, options: HttpOptions) -> Router {
    let (routes, doc) = api();
    let openapi_json = Bytes::from(render_openapi(doc, service.limits()));
    let state = AppState {
        service,
        max_body_bytes: options.max_body_bytes,
        openapi_json,
    };
    routes
        .fallback(locks::unmatched)
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(observe::ObserveLayer)
        .with_state(state)
}
