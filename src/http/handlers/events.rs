//! `GET /locks/{name}/events` and `GET /locks/events?prefix=`: what happens to a lock, or to
//! every lock under a prefix, as Server-Sent Events or NDJSON.

use crate::operation::Operation;
use std::convert::Infallible;
use std::time::Duration;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::response::Response;
use futures_util::stream::{self, Stream, StreamExt};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::hold::NDJSON;
use super::params::{LockNameParam, PrefixParam};
use crate::http::AppState;
use crate::http::extract::{Caller, LockPath, checked_prefix};
use crate::http::problem::ApiError;
use crate::lock::events::{Held, LockEvent};
use crate::lock::millis;
use crate::lock::prefix_events::{PrefixEvent, PrefixWatcher};

/// Server-Sent Events.
pub const SSE: &str = "text/event-stream";
/// An idle stream gets a keep-alive this often, so that proxies do not cut it.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One event of a lock's event stream: one SSE `data:` line (whose `event:` line is
/// `event`), or one NDJSON line. `event` says which fields are present: `state` (first: the
/// lock as it is; `held` false when free) and `acquired` have what inspect shows (`fence`,
/// `ttl_ms`, `expires_at`, `acquired_at`, `owner`, `metadata`); `released`, `expired` and
/// `revoked` have the `fence` of the grant that ended; `keep-alive` (NDJSON only; SSE sends a
/// comment) has nothing but `name` (the watched name or prefix). A prefix stream's last event
/// may be `overflow`: no watcher slot was left to follow `name` (see `--max-watchers`).
#[derive(Debug, Serialize, ToSchema)]
pub struct LockEventBody {
    /// `state`, `acquired`, `released` (its holder released it), `expired` (its lease ran
    /// out), `revoked` (an operator revoked it), `keep-alive`, or (last of a prefix stream)
    /// `overflow`.
    #[schema(pattern = "^(state|acquired|released|expired|revoked|keep-alive|overflow)$")]
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
    #[schema(format = DateTime)]
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
    fn new(name: &str, event: &'static str) -> Self {
        Self {
            event,
            name: name.to_owned(),
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

    fn of(name: &str, event: LockEvent) -> Self {
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
    let watcher = app.service.watch(&name).await?;
    let events = stream::unfold((watcher, name.clone()), |(mut watcher, name)| async move {
        let event = watcher.next().await?;
        Some((LockEventBody::of(name.as_str(), event), (watcher, name)))
    });
    Ok(event_response(
        events,
        name.to_string(),
        wants_ndjson(&headers),
        &app,
    ))
}

/// Watch every lock under a prefix.
///
/// What happens to every lock whose name starts with `prefix`, as `GET /locks/{name}/events`
/// tells it for one: first a `state` event for each lock held now, then `acquired`,
/// `released`, `expired` and `revoked` as they happen, in order for each name. Server-Sent
/// Events by default, NDJSON with `Accept: application/x-ndjson`; a keep-alive every 15 s.
/// With API keys, the key must be allowed to inspect every name under the prefix (its scope
/// must cover the prefix), else 403. Each lock followed takes a watcher slot
/// (`--max-watchers`); when none is left the stream ends with an `overflow` event. Costs the
/// store one pattern subscription while it is open, and one look per change. The lock named
/// `events` cannot be reached at `/locks/events`, which is this stream.
#[utoipa::path(
    get,
    path = "/locks/events",
    params(PrefixParam),
    responses(
        (status = 200, description = "The events, one `LockEvent` each: SSE `event:`/`data:` pairs, or NDJSON lines.",
            content(
                (LockEventBody = "text/event-stream"),
                (LockEventBody = "application/x-ndjson"),
            )),
    )
)]
pub async fn watch_prefix(
    State(app): State<AppState>,
    caller: Option<Extension<Caller>>,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let prefix = prefix_of(uri.query())?;
    if let Some(Extension(Caller(key))) = &caller
        && !key.allows(Operation::Inspect, Some(&prefix))
    {
        return Err(ApiError::Forbidden);
    }
    let watcher = app.service.watch_prefix(prefix.clone()).await?;
    let events = stream::unfold(Some(watcher), |watcher: Option<PrefixWatcher>| async move {
        let mut watcher = watcher?;
        match watcher.next().await? {
            PrefixEvent::Lock(name, event) => {
                Some((LockEventBody::of(name.as_str(), event), Some(watcher)))
            }
            // The last event: the stream ends after it.
            PrefixEvent::Overflow(name) => {
                Some((LockEventBody::new(name.as_str(), "overflow"), None))
            }
        }
    });
    Ok(event_response(events, prefix, wants_ndjson(&headers), &app))
}

/// The `prefix` of a prefix stream's query: empty (every lock) or the start of a lock name.
fn prefix_of(query: Option<&str>) -> Result<String, ApiError> {
    let mut prefix = String::new();
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match &*key {
            "prefix" => prefix = checked_prefix(value)?,
            _ => {
                return Err(ApiError::body(
                    None,
                    "unknown query parameter (expected prefix)",
                ));
            }
        }
    }
    Ok(prefix)
}

/// Whether the client asked for NDJSON rather than SSE.
fn wants_ndjson(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .any(|value| value.to_str().is_ok_and(|v| v.contains(NDJSON)))
}

/// The streamed answer of a watch: `events` encoded, a keep-alive (naming `watched`) when idle,
/// ended by a shutdown.
fn event_response(
    events: impl Stream<Item = LockEventBody> + Send + 'static,
    watched: String,
    ndjson: bool,
    app: &AppState,
) -> Response {
    let shutdown = app.service.shutdown_token();
    let bytes = stream::unfold(
        (Box::pin(events), watched, shutdown),
        move |(mut events, watched, shutdown)| async move {
            // Shutdown first, then events, a keep-alive only when none came (in a fixed order:
            // the simulation replays a seed byte for byte).
            let bytes = tokio::select! {
                biased;
                () = shutdown.cancelled() => return None,
                event = events.next() => encode(&event?, ndjson),
                () = tokio::time::sleep(KEEP_ALIVE) => {
                    if ndjson {
                        encode(&LockEventBody::new(&watched, "keep-alive"), true)
                    } else {
                        Bytes::from_static(b": keep-alive\n\n")
                    }
                }
            };
            Some((Ok::<_, Infallible>(bytes), (events, watched, shutdown)))
        },
    );
    let mut response = Response::new(Body::from_stream(bytes));
    let headers = response.headers_mut();
    let content_type = if ndjson { NDJSON } else { SSE };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // Tell buffering proxies (nginx) to pass each event on as it comes.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
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
