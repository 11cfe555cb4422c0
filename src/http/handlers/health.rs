//! Liveness, readiness and the OpenAPI document.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::AppState;
use crate::http::problem::{ApiError, Problem};

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
    tag = "health",
    operation_id = "healthz",
    responses((status = 200, description = "The gateway is alive.", body = HealthBody))
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
    tag = "health",
    operation_id = "readyz",
    responses(
        (status = 200, description = "The gateway can serve lock requests.", body = HealthBody),
        (status = 503, description = "`backend-unavailable`: the backend does not answer; `shutting-down`: the gateway is draining.",
            body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
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
    tag = "health",
    operation_id = "openapi",
    responses((status = 200, description = "The OpenAPI document of this API.", content_type = "application/json",
        body = Object))
)]
pub async fn openapi_json(State(app): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        app.openapi_json.clone(),
    )
}
