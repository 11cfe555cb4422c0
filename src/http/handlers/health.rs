//! Liveness, readiness, the OpenAPI document and the index at `/`.

use crate::http::json::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::AppState;
use crate::http::problem::ApiError;

/// Health of the gateway.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthBody {
    /// `ok` for liveness, `ready` for readiness.
    pub status: &'static str,
    /// The configured backend: `redis` or `memory`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<&'static str>,
}

/// Liveness: the process serves HTTP.
///
/// Never touches the backend, so a Redis outage does not get the gateway restarted.
#[utoipa::path(
    get,
    path = "/healthz",
    responses((status = 200, description = "The gateway is alive.", body = HealthBody),
    )
)]
pub async fn healthz() -> Json<HealthBody> {
    Json(HealthBody {
        status: "ok",
        backend: None,
    })
}

/// Readiness: the backend answers and the gateway is not shutting down.
///
/// 503 while the backend is unreachable (the gateway keeps trying to reconnect), and from the
/// moment a shutdown begins.
#[utoipa::path(
    get,
    path = "/readyz",
    responses(
        (status = 200, description = "The gateway can serve lock requests.", body = HealthBody),
    )
)]
pub async fn readyz(State(app): State<AppState>) -> Result<Json<HealthBody>, ApiError> {
    app.service.ready().await?;
    Ok(Json(HealthBody {
        status: "ready",
        backend: Some(app.service.backend_kind()),
    }))
}

/// This API's OpenAPI 3.1 document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    responses((status = 200, description = "The OpenAPI document of this API.", content_type = "application/json",
        body = Object),
    )
)]
pub async fn openapi(State(app): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        app.openapi_json.clone(),
    )
}

/// What `GET /` answers: what this server is, and where to go next.
#[derive(Debug, Serialize, ToSchema)]
pub struct IndexBody {
    /// `lockgate`.
    pub name: &'static str,
    /// The server's version.
    pub version: &'static str,
    /// One line on what the server does.
    pub description: &'static str,
    /// The configured backend: `redis` or `memory`.
    pub backend: &'static str,
    /// Where to go next, as paths on this server.
    pub links: IndexLinks,
}

/// The paths `GET /` points to.
#[derive(Debug, Serialize, ToSchema)]
pub struct IndexLinks {
    /// The OpenAPI document: every operation, body and problem type.
    pub openapi: &'static str,
    /// A lock: `POST` acquires, `PATCH` renews, `DELETE` releases, `GET` inspects.
    pub lock: &'static str,
    /// Held locks, listed by name prefix.
    pub locks: &'static str,
    /// A hold stream: the lock is held while the response is open.
    pub hold: &'static str,
    /// A lock's events (`acquired`, `released`, `expired`, `revoked`), SSE or NDJSON.
    pub events: &'static str,
    /// The same events for every lock under a name prefix.
    pub prefix_events: &'static str,
    /// A multi-lock: `POST /locks` with `names` takes them all; renew, release and inspect
    /// the set at `/locks?name=a&name=b`.
    pub lock_set: &'static str,
    /// A counting semaphore: the same operations as a lock, plus `permits`.
    pub semaphore: &'static str,
    /// Semaphores with permits held, listed by name prefix.
    pub semaphores: &'static str,
    /// The operator's console, in a browser (404 with `--console=false`).
    pub console: &'static str,
    /// Liveness.
    pub healthz: &'static str,
    /// Readiness.
    pub readyz: &'static str,
    /// Prometheus metrics.
    pub metrics: &'static str,
}

/// What this server is, with links to the OpenAPI document and the main routes.
///
/// Shares the OpenAPI document's access rule (any valid key, when keys are configured) and its
/// `openapi` metrics label.
#[utoipa::path(
    get,
    path = "/",
    responses((status = 200, description = "Name, version and links.", body = IndexBody),
    )
)]
pub async fn index(State(app): State<AppState>) -> Json<IndexBody> {
    Json(IndexBody {
        name: env!("CARGO_PKG_NAME"),
        version: env!("CARGO_PKG_VERSION"),
        description: env!("CARGO_PKG_DESCRIPTION"),
        backend: app.service.backend_kind(),
        links: IndexLinks {
            openapi: "/openapi.json",
            lock: "/locks/{name}",
            locks: "/locks?prefix=",
            hold: "/locks/{name}/hold",
            events: "/locks/{name}/events",
            prefix_events: "/locks/events?prefix=",
            lock_set: "/locks?name={name}&name={name}",
            semaphore: "/semaphores/{name}",
            semaphores: "/semaphores?prefix=",
            console: "/ui",
            healthz: "/healthz",
            readyz: "/readyz",
            metrics: "/metrics",
        },
    })
}
