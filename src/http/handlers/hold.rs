//! `POST /locks/{name}/hold`: a lock that lives as long as the HTTP response stays open.
//!
//! The gateway acquires the lock (waiting if asked), answers 200 with an NDJSON stream, and
//! keeps the lease alive with the watchdog of [`crate::lock::hold`]: one line per event,
//! `acquired`, then `renewed` every third of the ttl, and a final `lost` or `released`. When
//! the client goes away the stream is dropped, and with it the hold, which withdraws the lock
//! at once. This module only turns the watchdog's events into NDJSON lines.
//!
//! Failures before the lock is held (held past `wait_ms`, bad input, backend down) answer the
//! same problem documents as `POST /locks/{name}`, not a stream; except for a fair waiter
//! (`fair: true` with `wait_ms`), whose stream starts at once so that it can tell the waiter
//! its place (`queued` lines, 1 = next): its wait's failure is the stream's last line,
//! `not-acquired`, with the problem document a `POST` would have answered.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures_util::stream::{self, Stream};
use futures_util::{FutureExt, StreamExt};
use serde::Serialize;
use utoipa::ToSchema;

use super::params::{IdempotencyKeyParam, LockNameParam};
use crate::http::AppState;
use crate::http::acquiring::{self, Acquired};
use crate::http::answer;
use crate::http::dto::LockMode;
use crate::http::dto::{HoldBody, LockGrantBody, LockRenewalBody};
use crate::http::extract::{IdempotencyKeyHeader, JsonBody, LockPath};
use crate::http::problem::{ApiError, Problem};
use crate::lock::error::LockError;
use crate::lock::hold::{Hold, with_hold_floor};
use crate::lock::request::ReplicaPolicy;
use crate::lock::{
    self, Exclusive, Grant, IdempotencyKey, LockName, LockService, Primitive, RenewRequest,
};
use crate::lock::{LeaseRequest, RawLease};
use crate::primitive::shared::Shared;
use crate::telemetry::metrics::Metrics;
use crate::watch;

pub const NDJSON: &str = "application/x-ndjson";

/// One line of a hold stream. Its OpenAPI schema is [`HoldEventSchema`]: one flat object,
/// which client generators turn into one usable type (a `oneOf` of `allOf`s they do not).
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum HoldEvent {
    /// First line: the lock is held. Same fields as the acquire response.
    Acquired(LockGrantBody),
    /// The watchdog renewed the lease.
    Renewed(LockRenewalBody),
    /// The lock is no longer held; the stream ends. Stop relying on it.
    Lost(EndOfHold),
    /// An operator revoked the lock (`DELETE …?force=true`); the stream ends. Stop relying
    /// on it.
    Revoked(EndOfHold),
    /// The lock was held for as long as `max_hold_ms` (or `--max-hold`) allows; the gateway
    /// released it and the stream ends.
    #[serde(rename = "max-hold-reached")]
    MaxHoldReached(EndOfHold),
    /// The gateway released the lock because it is shutting down; the stream ends.
    Released(EndOfHold),
    /// A fair waiter's place in the queue (1: next), when it changes.
    Queued(QueuedBody),
    /// A fair waiter's wait ended without the lock; the stream ends.
    #[serde(rename = "not-acquired")]
    NotAcquired(NotAcquiredBody),
}

/// A fair waiter's place (the `queued` line of a hold stream).
#[derive(Debug, Serialize)]
pub struct QueuedBody {
    pub name: String,
    pub position: u32,
}

/// Why a fair waiter's hold stream ended without the lock (its `not-acquired` line).
#[derive(Debug, Serialize)]
pub struct NotAcquiredBody {
    pub name: String,
    /// What `POST /locks/{name}` would have answered.
    pub problem: Problem,
}

/// One line of a hold stream (`application/x-ndjson`: read the response line by line, each
/// line one of these). `event` says which fields are present: `acquired` has the grant's
/// (`token`, `fence`, `ttl_ms`, `expires_at`, `replicas_acked`), `renewed` the renewal's
/// (`fence`, `ttl_ms`, `expires_at`, `replicas_acked`), `lost`, `revoked`, `max-hold-reached`
/// and `released` end the stream with a `reason`.
#[derive(Debug, ToSchema)]
#[schema(as = HoldEvent)]
#[allow(dead_code)] // Documentation only: the stream writes `HoldEvent`.
pub struct HoldEventSchema {
    /// `acquired` (the lock is held), `renewed` (the watchdog renewed the lease),
    /// `lost` (the lock is no longer held; stop relying on it), `revoked` (an operator
    /// revoked it; stop relying on it), `max-hold-reached` (held for as long as `max_hold_ms`
    /// allows, and released) or `released` (the gateway released it because it is shutting
    /// down). A fair waiter's stream (`fair: true` with `wait_ms`) starts before the lock is
    /// held: `queued` (its place changed) lines come first, and `not-acquired` ends it if
    /// the wait fails.
    #[schema(
        pattern = "^(acquired|renewed|lost|revoked|max-hold-reached|released|queued|not-acquired)$"
    )]
    event: String,
    name: String,
    /// `acquired`: the lock token, as in the acquire response.
    token: Option<String>,
    /// `acquired` of a multi-lock (`POST /locks?hold=true`): every name of the set, sorted.
    names: Option<Vec<String>>,
    /// `acquired`, `renewed`: the fence of the grant.
    fence: Option<u64>,
    /// `acquired`, `renewed`: milliseconds of validity left.
    ttl_ms: Option<u64>,
    /// `acquired`, `renewed`: when the lease ends, RFC 3339 (informative).
    #[schema(format = DateTime)]
    expires_at: Option<String>,
    /// `acquired`, `renewed`: replicas that acknowledged, when `replicas` was asked for.
    replicas_acked: Option<u32>,
    /// `lost`: `not-held`, `not-owner` or `expired`; `revoked`: `revoked`;
    /// `max-hold-reached`: `max-hold`; `released`: `shutdown`.
    reason: Option<String>,
    /// `queued`: the fair waiter's place in the queue, 1 = next.
    position: Option<u32>,
    /// `not-acquired`: the problem document `POST /locks/{name}` would have answered
    /// (`lock-held` when `wait_ms` ran out).
    problem: Option<Problem>,
}

/// Why a hold stream ended.
#[derive(Debug, Serialize)]
pub struct EndOfHold {
    pub name: String,
    /// `lost`: `not-held` (the lease ran out before a renewal), `not-owner` (someone else
    /// holds it now) or `expired` (renewals could not reach the backend before the lease
    /// ended). `released`: `shutdown`.
    pub reason: &'static str,
}

/// Hold a lock while the response is open.
///
/// Acquires like `POST /locks/{name}` (same body, `wait_ms` allowed) and answers a stream of
/// NDJSON events, one JSON object per line: `acquired`, then `renewed` every third of the ttl,
/// and a final `lost`, `revoked`, `max-hold-reached` or `released`. Closing the connection
/// releases the lock at once. A fair waiter's stream starts at once with `queued` lines (its
/// place, 1 = next) and ends with `not-acquired` if its wait fails.
#[utoipa::path(
    post,
    path = "/locks/{name}/hold",
    params(
        LockNameParam,
        IdempotencyKeyParam
    ),
    request_body(content = HoldBody, description = "Lease settings; an empty body means all defaults. \
        `require_replicas` applies to the acquire; renewals report `replicas_acked` without failing.",
        content_type = "application/json"),
    responses(
        (status = 200, description = "The lock is held for as long as this stream is open: one `HoldEvent` per line.",
            body = HoldEventSchema, content_type = "application/x-ndjson"),
    )
)]
pub fn hold_lock(
    State(app): State<AppState>,
    LockPath(name): LockPath,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    JsonBody(body): JsonBody<HoldBody>,
) -> impl Future<Output = Result<Response, ApiError>> + Send {
    let mode = body.mode;
    let fields = body.lock_fields(mode == Some(LockMode::Shared));
    let lease = match acquiring::lock_lease(body.lease(), fields) {
        Ok(lease) => lease,
        Err(refused) => return answer::refused(refused),
    };
    if lease.fair && lease.wait_ms.is_some_and(|ms| ms > 0) {
        return answer::at_once(queueing(&app, name, key, lease));
    }
    match mode {
        Some(LockMode::Shared) => answer::first(holding(&app, Shared, name, key, lease)),
        _ => answer::second(holding(&app, Exclusive, name, key, lease)),
    }
}

/// Acquires a lease of `primitive` and answers its hold stream: what every hold route does.
pub fn holding<P: Primitive>(
    app: &AppState,
    primitive: P,
    name: LockName,
    key: Option<IdempotencyKey>,
    lease: RawLease,
) -> impl Future<Output = Result<Response, ApiError>> + Send + use<P> {
    // Not an `async fn`: see `acquiring::acquiring`.
    let lease = with_hold_floor(lease, app.service.limits());
    let acquiring = acquiring::acquiring(app, primitive.clone(), name, key, lease);
    let metrics = app.gate.metrics.clone();
    // A combinator, not an `async move` block: see `acquiring::checked`.
    FutureExt::map(acquiring, move |acquired| {
        let Acquired {
            grant,
            request,
            name,
            service,
        } = acquired?;
        let renewals = renewals_of(&request);
        let start = Phase::Start(grant, primitive);
        Ok(stream_response(service, name, renewals, start, metrics))
    })
}

/// A fair waiter's hold stream: answered at once, with its place in the queue as it changes,
/// then as any hold stream once the lock is held.
fn queueing(
    app: &AppState,
    name: LockName,
    key: Option<IdempotencyKey>,
    lease: RawLease,
) -> Result<Response, ApiError> {
    let lease = with_hold_floor(lease, app.service.limits());
    let request = app.service.limits().lease(lease)?;
    app.service.check_fair_offered(Exclusive.leased(&name))?;
    let (positions, seen) = watch::channel(0);
    let waiting = {
        let (service, name, request) = (app.service.clone(), name.clone(), request.clone());
        async move {
            let positions = Some(&positions);
            let key = key.as_ref();
            service
                .acquire_lease(&Exclusive, &name, &request, key, positions)
                .await
        }
    };
    let start = Phase::Queued(Box::pin(waiting), seen, Exclusive);
    let (service, metrics) = (app.service.clone(), app.gate.metrics.clone());
    Ok(stream_response(
        service,
        name,
        renewals_of(&request),
        start,
        metrics,
    ))
}

/// The watchdog's renewals of a lease asked with `request`: its ttl, its replicas reported
/// but not required.
fn renewals_of(request: &LeaseRequest) -> RenewRequest {
    RenewRequest {
        ttl: request.ttl,
        replicas: ReplicaPolicy {
            required: false,
            ..request.replicas
        },
    }
}

/// 200 with the hold stream from `start` on.
fn stream_response<P: Primitive>(
    service: Arc<LockService>,
    name: LockName,
    renewals: RenewRequest,
    start: Phase<P>,
    metrics: Arc<Metrics>,
) -> Response {
    let open = OpenStream::counted(metrics);
    let lost = open.0.clone();
    let events = hold_events(service, name, renewals, start, lost).map(move |event| {
        // Owned by the stream: counts it open until the stream is dropped.
        let _ = &open;
        event
    });
    let mut response = Response::new(Body::from_stream(events));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // Tell buffering proxies (nginx) to pass each line on as it comes.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Counts a hold stream in the `lockgate_hold_streams` gauge while it lives.
struct OpenStream(Arc<Metrics>);

impl OpenStream {
    fn counted(metrics: Arc<Metrics>) -> Self {
        metrics.hold_streams_add(1);
        Self(metrics)
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.hold_streams_add(-1);
    }
}

/// A fair waiter's wait for its grant.
type Waiting<P> = Pin<Box<dyn Future<Output = Result<Grant<P>, LockError>> + Send>>;

/// Where a hold stream is in its life.
enum Phase<P: Primitive> {
    /// A fair waiter, before its grant, with its place as the engine last saw it.
    Queued(Waiting<P>, watch::Receiver<u32>, P),
    Start(Grant<P>, P),
    Holding(Hold<P>),
    Done,
}

fn hold_events<P: Primitive>(
    service: Arc<LockService>,
    name: LockName,
    renewals: RenewRequest,
    start: Phase<P>,
    metrics: Arc<Metrics>,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    let context = (service, name, renewals, metrics);
    stream::unfold((start, context), |(phase, context)| async move {
        let (service, name, renewals, metrics) = context;
        let (line, next) = match phase {
            Phase::Done => return None,
            Phase::Queued(mut waiting, mut seen, primitive) => {
                tokio::select! {
                    biased;
                    granted = &mut waiting => match granted {
                        Ok(grant) => {
                            let held = primitive.leased(&name).held_names();
                            let body = LockGrantBody::new(&name, &grant).holding(held);
                            let hold = Hold::new(service.clone(), primitive, name.clone(), grant, renewals);
                            (HoldEvent::Acquired(body), Phase::Holding(hold))
                        }
                        Err(err) => {
                            let problem = ApiError::from(err).into_problem();
                            let name = name.to_string();
                            (HoldEvent::NotAcquired(NotAcquiredBody { name, problem }), Phase::Done)
                        }
                    },
                    Ok(()) = seen.changed() => {
                        let position = *seen.borrow_and_update();
                        let queued = QueuedBody { name: name.to_string(), position };
                        (HoldEvent::Queued(queued), Phase::Queued(waiting, seen, primitive))
                    }
                }
            }
            Phase::Start(grant, primitive) => {
                let held = primitive.leased(&name).held_names();
                let body = LockGrantBody::new(&name, &grant).holding(held);
                let line = HoldEvent::Acquired(body);
                let hold = Hold::new(service.clone(), primitive, name.clone(), grant, renewals);
                (line, Phase::Holding(hold))
            }
            Phase::Holding(hold) => {
                let (event, hold) = hold.next().await;
                let line = match event {
                    lock::hold::HoldEvent::Renewed(renewal) => {
                        HoldEvent::Renewed(LockRenewalBody::new(&name, &renewal))
                    }
                    lock::hold::HoldEvent::Lost(reason) => {
                        metrics.hold_stream_lost(reason.as_str());
                        HoldEvent::Lost(EndOfHold {
                            name: name.to_string(),
                            reason: reason.as_str(),
                        })
                    }
                    lock::hold::HoldEvent::Revoked => HoldEvent::Revoked(EndOfHold {
                        name: name.to_string(),
                        reason: "revoked",
                    }),
                    lock::hold::HoldEvent::MaxHoldReached => HoldEvent::MaxHoldReached(EndOfHold {
                        name: name.to_string(),
                        reason: "max-hold",
                    }),
                    lock::hold::HoldEvent::Released => HoldEvent::Released(EndOfHold {
                        name: name.to_string(),
                        reason: "shutdown",
                    }),
                };
                (line, hold.map_or(Phase::Done, Phase::Holding))
            }
        };
        Some((
            Ok(ndjson(&line)),
            (next, (service, name, renewals, metrics)),
        ))
    })
}

fn ndjson(event: &HoldEvent) -> Bytes {
    let mut line = serde_json::to_vec(event).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}
