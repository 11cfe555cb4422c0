//! A resource that refuses a stale lock holder: a small HTTP document store that takes the
//! writer's fence in a `Lock-Fence` header and refuses a write whose fence is lower than the
//! highest it has accepted for that document (docs/fences.md, "An HTTP resource").
//!
//! The whole check is one comparison, made atomically with the write it guards: the highest
//! fence and the document are kept together, under one mutex. A holder that paused (GC, a
//! frozen VM, a slow network) past its lease and then writes gets 409 `stale-fence`, because
//! the next holder's fence, which is larger, has already been seen. The same fence may write
//! again (a holder writes several times under one grant).
//!
//! Usage: cargo run --example fenced_resource -- [ADDRESS=127.0.0.1:8080]
//!   curl -X PUT -H "Lock-Fence: $LOCKGATE_FENCE" --data-binary @report.txt \
//!        http://127.0.0.1:8080/documents/report
//!   curl http://127.0.0.1:8080/documents/report

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// A document and the highest fence that wrote it.
#[derive(Default)]
struct Document {
    fence: u64,
    body: Bytes,
}

type Store = Arc<Mutex<HashMap<String, Document>>>;

/// The resource's routes: `PUT` (fenced) and `GET /documents/{id}`.
pub fn app() -> Router {
    Router::new()
        .route("/documents/{id}", get(read).put(write))
        .with_state(Store::default())
}

fn problem(status: StatusCode, kind: &str, detail: &str) -> Response {
    let body = serde_json::json!({
        "type": format!("https://lockgate.dev/problems/{kind}"),
        "title": kind,
        "status": status.as_u16(),
        "detail": detail,
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}

async fn write(
    State(store): State<Store>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let fence = headers
        .get("lock-fence")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    let Some(fence) = fence else {
        return problem(
            StatusCode::BAD_REQUEST,
            "missing-fence",
            "a write needs the writer's fence in the Lock-Fence header",
        );
    };
    let mut documents = store
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let document = documents.entry(id).or_default();
    if fence < document.fence {
        // Not the fence itself in the detail: nothing of the request is echoed.
        return problem(
            StatusCode::CONFLICT,
            "stale-fence",
            "a later holder of the lock has written this document: this writer's lease ended",
        );
    }
    *document = Document { fence, body };
    (StatusCode::NO_CONTENT, [("lock-fence", fence.to_string())]).into_response()
}

async fn read(State(store): State<Store>, Path(id): Path<String>) -> Response {
    let documents = store
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    match documents.get(&id) {
        Some(document) => (
            [("lock-fence", document.fence.to_string())],
            document.body.clone(),
        )
            .into_response(),
        None => problem(StatusCode::NOT_FOUND, "not-found", "no such document"),
    }
}

#[allow(dead_code)] // The tests include this file for `app` alone.
#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".to_owned());
    let listener = tokio::net::TcpListener::bind(&address).await?;
    eprintln!("fenced_resource: serving on http://{address}");
    axum::serve(listener, app()).await
}
