//! The HTTP API: routes, extractors, bodies, problem documents and the OpenAPI document.
//!
//! [`router`] builds the whole `axum::Router`; tests drive it in-process with
//! `tower::ServiceExt::oneshot`, and [`crate::serve`] serves it on a socket. Every answer,
//! including unknown routes, wrong methods and panics, is JSON; errors are problem documents.

pub mod delivery;
pub mod dto;
pub mod extract;
pub mod health;
pub mod hold;
pub mod locks;
pub mod openapi;
pub mod problem;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{MatchedPath, Request};
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use self::problem::{ApiError, ServerErrorCause};
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
        .layer(axum::middleware::map_response(log_server_error))
        // Failures are logged once, with their cause, by `log_server_error`.
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_span)
                .on_failure(()),
        )
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::Internal("handler panicked".into()).into_response()
        }))
        .with_state(state)
}

/// The span of one request: method and route template, never the raw URI or headers.
fn request_span(req: &Request) -> tracing::Span {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("-", MatchedPath::as_str);
    tracing::info_span!("request", method = %req.method(), route)
}

/// Logs the cause of a server error once; the client only got a generic detail.
async fn log_server_error(response: Response) -> Response {
    if let Some(ServerErrorCause(cause)) = response.extensions().get::<ServerErrorCause>() {
        tracing::warn!(status = response.status().as_u16(), cause = %cause, "request failed");
    }
    response
}
