//! `GET /locks/{name}/events`: what happens to a lock, as Server-Sent Events or NDJSON.

use crate::http::problem::ProblemKind;
use crate::http::routes::Route;
use crate::operation::Operation;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use futures_util::stream::{self, Stream};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::hold::NDJSON;
use super::params::LockNameParam;
use crate::http::AppState;
use crate::http::extract::LockPath;
use crate::http::problem::ApiError;
use crate::lock::events::{Held, LockEvent, Watcher};
use crate::lock::{LockName, millis};

/// Server-Sent Events.
pub const SSE: &str = "text/event-stream";
/// An idle stream gets a keep-alive this often, so that proxies do not cut it.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One event of a lock's event stream: one SSE `data:` line (whose `event:` line is
/// `event`), or one NDJSON line. `event` says which fields are present: `state` (first: the
/// lock as it is; `held` false when free) and `acquired` have what inspect shows (`fence`,
/// `ttl_ms`, `expires_at`, `acquired_at`, `owner`, `metadata`); `released`, `expired` and
/// `revoked` have the `fence` of the grant that ended; `keep-alive` (NDJSON only; SSE sends a
/// comment) has nothing.
#[derive(Debug, Serialize, ToSchema)]
pub struct LockEventBody {
    /// `state`, `acquired`, `released` (its holder released it), `expired` (its lease ran
    /// out), `revoked` (an operator revoked it) or `keep-alive`.
    #[schema(pattern = "^(state|acquired|released|expired|revoked|keep-alive)$")]
    pub event: &'static str,
    pub name: String,
    /// `state`: whether the lock is held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<bool>,
    /// The fence of the grant the event is about; absent for a lock taken by a plain Redis
    /// client.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    /// `state`, `acquired`: milliseconds left on the lease when the gateway looked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// `state`, `acquired`: when the grant was made, RFC 3339, by Redis's clock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acquired_at: Option<String>,
    /// `state`, `acquired`: the holder's `owner`, if it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// `state`, `acquired`: the holder's `metadata`, if it gave any.
    #[schema(value_type = std::collections::HashMap<String, serde_json::Value>, required = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl LockEventBody {
    fn new(name: &LockName, event: &'static str) -> Self {
        Self {
            event,
            name: name.to_string(),
            held: None,
            fence: None,
            ttl_ms: None,
            acquired_at: None,
            owner: None,
            metadata: None,
        }
    }

    fn with_grant(mut self, held: Held) -> Self {
        self.fence = held.fence;
        self.ttl_ms = held.ttl.map(millis);
        self.acquired_at = held
            .granted_at
            .map(|at| humantime::format_rfc3339_micros(at).to_string());
        if let Some(holder) = held.holder {
            self.owner = holder.owner;
            self.metadata = holder.metadata;
        }
        self
    }

    fn of(name: &LockName, event: LockEvent) -> Self {
        match event {
            LockEvent::State(None) => Self {
                held: Some(false),
                ..Self::new(name, "state")
            },
            LockEvent::State(Some(held)) => Self {
                held: Some(true),
                ..Self::new(name, "state")
            }
            .with_grant(held),
            LockEvent::Acquired(held) => Self::new(name, "acquired").with_grant(held),
            LockEvent::Released { fence } => Self {
                fence,
                ..Self::new(name, "released")
            },
            LockEvent::Expired { fence } => Self {
                fence,
                ..Self::new(name, "expired")
            },
            LockEvent::Revoked { fence } => Self {
                fence,
                ..Self::new(name, "revoked")
            },
        }
    }
}

/// The route of [`watch_lock`].
const WATCH_LOCK: Route = Route::new(
    Operation::Watch,
    &[&[
        ProblemKind::InvalidName,
        ProblemKind::TooManyWatchers,
        ProblemKind::BackendUnavailable,
        ProblemKind::ShuttingDown,
    ]],
);

/// Watch a lock.
///
/// A stream of what happens to the lock: first its `state`, then `acquired` (with the owner
/// and fence), `released`, `expired` and `revoked`, as they happen. Server-Sent Events by
/// default (`curl -N`, a browser's `EventSource`); NDJSON with `Accept: application/x-ndjson`.
/// An idle stream gets a keep-alive every 15 s. Changes closer together than one Redis round
/// trip may merge. With API keys, watching needs the `inspect` operation on the name.
#[utoipa::path(
    get,
    path = "/locks/{name}/events",
    tag = "locks",
    operation_id = "watch_lock",
    extensions(("x-lockgate-route" = json!(WATCH_LOCK))),
    params(LockNameParam),
    responses(
        (status = 200, description = "The events, one `LockEvent` each: SSE `event:`/`data:` pairs, or NDJSON lines.",
            content(
                (LockEventBody = "text/event-stream"),
                (LockEventBody = "application/x-ndjson"),
            )),
    )
)]
pub async fn watch_lock(
    State(app): State<AppState>,
    LockPath(name): LockPath,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let ndjson = headers
        .get_all(header::ACCEPT)
        .iter()
        .any(|value| value.to_str().is_ok_and(|v| v.contains(NDJSON)));
    let watcher = app.service.watch(&name).await?;
    let shutdown = app.service.shutdown_token();
    let events = event_stream(watcher, name, ndjson, shutdown);
    let mut response = Response::new(Body::from_stream(events));
    let headers = response.headers_mut();
    let content_type = if ndjson { NDJSON } else { SSE };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // Tell buffering proxies (nginx) to pass each event on as it comes.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

fn event_stream(
    watcher: Watcher,
    name: LockName,
    ndjson: bool,
    shutdown: tokio_util::sync::CancellationToken,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    stream::unfold(
        (watcher, name, shutdown),
        move |(mut watcher, name, shutdown)| async move {
            let bytes = tokio::select! {
                event = watcher.next() => {
                    let event = event?;
                    encode(&LockEventBody::of(&name, event), ndjson)
                }
                () = tokio::time::sleep(KEEP_ALIVE) => {
                    if ndjson {
                        encode(&LockEventBody::new(&name, "keep-alive"), true)
                    } else {
                        Bytes::from_static(b": keep-alive\n\n")
                    }
                }
                () = shutdown.cancelled() => return None,
            };
            Some((Ok(bytes), (watcher, name, shutdown)))
        },
    )
}

/// One SSE event (`event:` and `data:` lines) or one NDJSON line.
fn encode(body: &LockEventBody, ndjson: bool) -> Bytes {
    let json = serde_json::to_string(body).unwrap_or_default();
    if ndjson {
        Bytes::from(format!("{json}\n"))
    } else {
        Bytes::from(format!("event: {}\ndata: {json}\n\n", body.event))
    }
}
