//! Control for the benchmarks: lockgate's HTTP stack with nothing behind it. The same serving
//! loop (`lockgate::http::server::serve`, hyper HTTP/1), the same allocator (jemalloc), a request
//! body read as JSON, a JSON answer, and no Redis.
//!
//! * bench/waiting.sh runs it under the same 10,000 waiting clients as the gateway, so the
//!   gateway's memory can be read against what the HTTP stack alone needs: a request with
//!   `wait_ms` over 1000 stays open, and the probe (`wait_ms` = 1) answers 503 once COUNT
//!   requests stay open, 409 before.
//! * bench/run.sh runs the lock-cycle load against it (the "hello ceiling"): a request without
//!   `wait_ms` (or without a body) is "granted" (201, with its name and a token), and a DELETE
//!   answers 204.
//!
//! Usage: cargo run --release --example floor -- HOST:PORT COUNT

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Json;
use axum::extract::Path;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(serde::Deserialize)]
struct Body {
    wait_ms: Option<u64>,
}

struct Open {
    count: AtomicUsize,
    full: usize,
}

async fn lock(
    State(open): State<Arc<Open>>,
    Path(name): Path<String>,
    body: Option<Json<Body>>,
) -> Response {
    match body.and_then(|Json(body)| body.wait_ms) {
        None => (
            StatusCode::CREATED,
            [("content-type", "application/json")],
            format!(r#"{{"name":"{name}","token":"floor.1"}}"#),
        )
            .into_response(),
        Some(1) if open.count.load(Ordering::Relaxed) >= open.full => {
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
        Some(1) => StatusCode::CONFLICT.into_response(),
        Some(_) => {
            open.count.fetch_add(1, Ordering::Relaxed);
            std::future::pending::<Response>().await
        }
    }
}

async fn release() -> StatusCode {
    StatusCode::NO_CONTENT
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().ok_or("usage: floor HOST:PORT COUNT")?;
    let full: usize = args.next().ok_or("usage: floor HOST:PORT COUNT")?.parse()?;
    let open = Arc::new(Open {
        count: AtomicUsize::new(0),
        full,
    });
    let app = axum::Router::new()
        .route("/locks/{name}", post(lock).delete(release))
        .with_state(open);
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    lockgate::http::server::serve(
        listener,
        app,
        std::future::pending(),
        lockgate::http::server::ServeOptions::default(),
    )
    .await;
    Ok(())
}
