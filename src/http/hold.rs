//! `POST /locks/{name}/hold`: a lock that lives as long as the HTTP response stays open.
//!
//! The gateway acquires the lock (waiting if asked), answers 200 with an NDJSON stream, and
//! renews the lease from the server side every third of its ttl, as Redisson's watchdog does.
//! Each renewal is a `renewed` line. If a renewal is refused (the lock expired or was taken),
//! or cannot get through before the lease runs out, a `lost` line ends the stream. When the
//! client goes away the stream is dropped, and with it the grant's guard, which releases the
//! lock at once; at shutdown the gateway releases it and ends the stream with `released`.
//!
//! Failures before the lock is held (held past `wait_ms`, bad input, backend down) answer the
//! same problem documents as `POST /locks/{name}`, not a stream.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures_util::StreamExt;
use futures_util::stream::{self, Stream};
use serde::Serialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use super::AppState;
use super::dto::{AcquireBody, LockGrantBody, LockRenewalBody};
use super::extract::{IdempotencyKeyHeader, JsonBody, LockPath};
use super::locks::{LockNameParam, checked_request};
use super::problem::{ApiError, Problem};
use crate::lock::request::ReplicaPolicy;
use crate::lock::{
    Grant, GrantGuard, LockError, LockName, LockService, LockToken, RenewRequest, Validity,
};
use crate::metrics::Metrics;

pub const NDJSON: &str = "application/x-ndjson";
/// After a renewal that could not get through, try again this often (or sooner, if the ttl is
/// short), for as long as the lease lasts.
const RETRY_RENEWAL_EVERY: Duration = Duration::from_secs(1);

/// One line of a hold stream.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum HoldEvent {
    /// First line: the lock is held. Same fields as the acquire response.
    Acquired(LockGrantBody),
    /// The watchdog renewed the lease.
    Renewed(LockRenewalBody),
    /// The lock is no longer held; the stream ends. Stop relying on it.
    Lost(EndOfHold),
    /// The gateway released the lock because it is shutting down; the stream ends.
    Released(EndOfHold),
}

/// Why a hold stream ended.
#[derive(Debug, Serialize, ToSchema)]
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
/// and a final `lost` or `released`. Closing the connection releases the lock at once.
#[utoipa::path(
    post,
    path = "/locks/{name}/hold",
    tag = "locks",
    operation_id = "hold_lock",
    params(
        LockNameParam,
        ("Idempotency-Key" = Option<String>, Header, nullable = false, pattern = "^[!-~]{16,255}$",
            description = "As for acquire.")
    ),
    request_body(content = AcquireBody, description = "Lease settings; an empty body means all defaults. \
        `require_replicas` applies to the acquire; renewals report `replicas_acked` without failing.",
        content_type = "application/json"),
    responses(
        (status = 200, description = "The lock is held for as long as this stream is open: one `HoldEvent` per line.",
            body = HoldEvent, content_type = "application/x-ndjson"),
        (status = 400, description = "`invalid-name` or `invalid-request`.",
            body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`lock-held`: another client holds the lock (after `wait_ms`, if given).",
            body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds until the current lease ends, rounded up."))),
        (status = 413, description = "`payload-too-large`.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`backend-unavailable`, `insufficient-replicas`, `too-many-waiters` or `shutting-down`.",
            body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    )
)]
pub fn hold_lock(
    State(app): State<AppState>,
    LockPath(name): LockPath,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    JsonBody(body): JsonBody<AcquireBody>,
) -> impl Future<Output = Result<Response, ApiError>> + Send {
    // Not an `async fn`: see `locks::checked_request`.
    let request = checked_request(&app, &body);
    let AppState { service, gate, .. } = app;
    async move {
        let request = request?;
        let grant = service.acquire(&name, &request, key.as_ref()).await?;
        let renewals = RenewRequest {
            ttl: request.ttl,
            replicas: ReplicaPolicy {
                required: false,
                ..request.replicas
            },
        };
        let open = OpenStream::counted(gate.metrics.clone());
        let events = hold_events(service, name, renewals, grant).map(move |event| {
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
        Ok(response)
    }
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

/// Where a hold stream is in its life.
enum Phase {
    Start(Grant),
    Holding(Holding),
    Done,
}

struct Holding {
    service: Arc<LockService>,
    shutdown: CancellationToken,
    name: LockName,
    token: LockToken,
    renewals: RenewRequest,
    /// Releases the lock when the stream is dropped (the client went away).
    guard: GrantGuard,
    validity: Validity,
    next_renewal: Instant,
}

fn hold_events(
    service: Arc<LockService>,
    name: LockName,
    renewals: RenewRequest,
    grant: Grant,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    let shutdown = service.shutdown_token();
    let context = (service, shutdown, name, renewals);
    stream::unfold(
        (Phase::Start(grant), context),
        |(phase, context)| async move {
            let (service, shutdown, name, renewals) = context;
            let (line, next) = match phase {
                Phase::Done => return None,
                Phase::Start(grant) => {
                    let line = HoldEvent::Acquired(LockGrantBody::new(&name, &grant));
                    let interval = renewal_interval(renewals.ttl);
                    let holding = Holding {
                        service: service.clone(),
                        shutdown: shutdown.clone(),
                        name: name.clone(),
                        token: grant.token,
                        renewals,
                        guard: grant.guard,
                        validity: grant.validity,
                        next_renewal: Instant::now() + interval,
                    };
                    (line, Phase::Holding(holding))
                }
                Phase::Holding(holding) => holding.next_event().await,
            };
            Some((
                Ok(ndjson(&line)),
                (next, (service, shutdown, name, renewals)),
            ))
        },
    )
}

impl Holding {
    /// Waits for the next renewal (or shutdown) and returns what to tell the client.
    async fn next_event(mut self) -> (HoldEvent, Phase) {
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(self.next_renewal) => {}
                () = self.shutdown.cancelled() => {
                    let name = self.name.to_string();
                    if let Err(err) = Box::pin(self.guard.withdraw()).await {
                        tracing::warn!(lock = %name, error = %err, "could not release a held lock at shutdown; it expires at its ttl");
                    }
                    return (HoldEvent::Released(EndOfHold { name, reason: "shutdown" }), Phase::Done);
                }
            }
            // Boxed, as the release above: a renewal's future is several KiB, and inline it
            // would size the state every open stream keeps between renewals.
            match Box::pin(self.service.renew(&self.name, &self.token, &self.renewals)).await {
                Ok(renewal) => {
                    self.validity = renewal.validity;
                    self.next_renewal = Instant::now() + renewal_interval(self.renewals.ttl);
                    let line = HoldEvent::Renewed(LockRenewalBody::new(&self.name, &renewal));
                    return (line, Phase::Holding(self));
                }
                Err(LockError::NotHeld) => return self.lost("not-held"),
                Err(LockError::NotOwner) => return self.lost("not-owner"),
                Err(err) => {
                    let now = Instant::now();
                    if self.validity.remaining(now).is_zero() {
                        return self.lost("expired");
                    }
                    tracing::warn!(lock = %self.name, error = %err, "hold stream renewal failed; retrying");
                    let retry = RETRY_RENEWAL_EVERY.min(renewal_interval(self.renewals.ttl));
                    self.next_renewal = (now + retry).min(self.validity.until());
                }
            }
        }
    }

    fn lost(self, reason: &'static str) -> (HoldEvent, Phase) {
        tracing::info!(lock = %self.name, reason, "hold stream lost its lock");
        // The guard still releases on drop: harmless compare-and-delete if the lock is gone.
        (
            HoldEvent::Lost(EndOfHold {
                name: self.name.to_string(),
                reason,
            }),
            Phase::Done,
        )
    }
}

/// Renew at a third of the ttl: two renewals can fail before the lease runs out.
fn renewal_interval(ttl: Duration) -> Duration {
    (ttl / 3).max(Duration::from_millis(1))
}

fn ndjson(event: &HoldEvent) -> Bytes {
    let mut line = serde_json::to_vec(event).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}
