//! `GET /metrics`: Prometheus text format.

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::http::AppState;
use crate::telemetry::metrics::Gauges;

/// The Prometheus content type of the text format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Metrics in the Prometheus text format.
///
/// Requests by operation and outcome, latency histograms, Redis round trips, backend errors,
/// waiters and hold streams. Open unless the server runs with `--metrics-auth required`.
#[utoipa::path(
    get,
    path = "/metrics",
    responses(
        (status = 200, description = "The metrics, in the Prometheus text format 0.0.4.",
            body = String, content_type = "text/plain"),
    )
)]
pub async fn metrics(State(app): State<AppState>) -> Response {
    let text = app.gate.metrics.render(Gauges {
        waiters: app.service.waiting(),
        in_flight: app.gate.in_flight(),
        watchers: app.service.watchers(),
    });
    let mut response = text.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT));
    response
}
