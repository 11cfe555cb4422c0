//! Handlers of `/semaphores/{name}`: acquire a permit, renew it, release it, inspect the
//! semaphore, hold a permit as a stream. The lease engine does the work; these only add the
//! limit (`permits`) and answer 501 `not-offered` where the backend has no semaphores.

use std::num::NonZeroU32;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::hold;
use super::params::{IdempotencyKeyParam, LeaseTokenParam, SemaphoreNameParam};
use crate::http::AppState;
use crate::http::acquiring;
use crate::http::dto::{
    LockGrantBody, LockRenewalBody, RenewBody, SemaphoreAcquireBody, SemaphoreInfoBody,
};
use crate::http::extract::{
    IdempotencyKeyHeader, JsonBody, LockPath, LockTokenHeader, refuse_force,
};
use crate::http::json::Json;
use crate::http::problem::ApiError;
use crate::lock::semaphore::MAX_PERMITS;
use crate::lock::{InvalidRequest, Semaphore};

/// The semaphore a request asks for, checked.
fn semaphore(body: &SemaphoreAcquireBody) -> Result<Semaphore, ApiError> {
    body.permits
        .and_then(|permits| u32::try_from(permits).ok())
        .filter(|permits| *permits <= MAX_PERMITS)
        .and_then(NonZeroU32::new)
        .map(|permits| Semaphore { permits })
        .ok_or_else(|| {
            InvalidRequest {
                field: "permits",
                message: format!("must be a whole number from 1 to {MAX_PERMITS}"),
            }
            .into()
        })
}

/// Acquire a permit.
///
/// Takes one of the semaphore's `permits` permits if one is free and returns a permit lease:
/// token, fence (strictly increasing per name, across permits) and validity, as a lock's
/// acquire does. If all are held, answers 409 `lock-held` with the time until the first one
/// ends (or waits, with `wait_ms`: waiters are served first come, first served). All holders
/// must agree on `permits`: while permits are held, another number answers 409
/// `permits-mismatch`. Expired permits are reclaimed by the next request.
#[utoipa::path(
    post,
    path = "/semaphores/{name}",
    params(
        SemaphoreNameParam,
        IdempotencyKeyParam
    ),
    request_body(content = SemaphoreAcquireBody, description = "`permits`, and the lock's lease settings.",
        content_type = "application/json"),
    responses(
        (status = 201, description = "A permit was granted.", body = LockGrantBody,
            headers(("Location" = String, description = "The semaphore's URL, `/semaphores/{name}`."))),
        (status = 200, description = "Retry of an idempotent acquire: the permit this `Idempotency-Key` already holds.",
            body = LockGrantBody),
    )
)]
pub fn acquire_permit(
    State(app): State<AppState>,
    LockPath(name): LockPath,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    JsonBody(body): JsonBody<SemaphoreAcquireBody>,
) -> impl Future<Output = Result<Response, ApiError>> + Send {
    // Not an `async fn`: see `acquiring::acquiring`.
    acquiring::checked(semaphore(&body).map(|semaphore| {
        acquiring::granting(&app, "semaphores", semaphore, name, key, body.lease())
    }))
}

/// Renew a permit.
///
/// Sets a new ttl, counted from now, on the permit the `Lock-Token` header holds.
#[utoipa::path(
    patch,
    path = "/semaphores/{name}",
    params(
        SemaphoreNameParam,
        LeaseTokenParam
    ),
    request_body(content = RenewBody, description = "Renewal settings; an empty body renews for the default ttl.",
        content_type = "application/json"),
    responses(
        (status = 200, description = "The permit's lease was renewed.", body = LockRenewalBody),
    )
)]
pub async fn renew_permit(
    State(app): State<AppState>,
    LockPath(name): LockPath,
    LockTokenHeader(token): LockTokenHeader,
    JsonBody(body): JsonBody<RenewBody>,
) -> Result<Json<LockRenewalBody>, ApiError> {
    let request = app.service.limits().renew(body.ttl_ms, body.replicas())?;
    let renewal = app
        .service
        .renew_lease(&Semaphore::ANY, &name, &token, &request)
        .await?;
    Ok(Json(LockRenewalBody::new(&name, &renewal)))
}

/// Release a permit.
///
/// Gives back the permit the `Lock-Token` header holds; the first waiter gets it.
#[utoipa::path(
    delete,
    path = "/semaphores/{name}",
    params(
        SemaphoreNameParam,
        LeaseTokenParam
    ),
    responses(
        (status = 204, description = "The permit was released."),
    )
)]
pub async fn release_permit(
    State(app): State<AppState>,
    LockPath(name): LockPath,
    RawQuery(query): RawQuery,
    LockTokenHeader(token): LockTokenHeader,
) -> Result<StatusCode, ApiError> {
    refuse_force(
        query.as_deref(),
        "a permit is not revoked: release it with its token",
    )?;
    app.service
        .release_lease(&Semaphore::ANY, &name, &token)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Inspect a semaphore.
///
/// Its limit, the permits held (fence, time left, owner and metadata of each; never a token)
/// and how many requests wait in this gateway. A semaphore nobody holds answers 200 with
/// `in_use` 0.
#[utoipa::path(
    get,
    path = "/semaphores/{name}",
    params(SemaphoreNameParam),
    responses(
        (status = 200, description = "The semaphore's permits.", body = SemaphoreInfoBody),
    )
)]
pub async fn inspect_semaphore(
    State(app): State<AppState>,
    LockPath(name): LockPath,
) -> Result<Json<SemaphoreInfoBody>, ApiError> {
    let state = app.service.inspect_semaphore(&name).await?;
    Ok(Json(SemaphoreInfoBody::new(&name, state)))
}

/// Hold a permit while the response is open.
///
/// Acquires like `POST /semaphores/{name}` and answers the same NDJSON stream as a lock's
/// hold: `acquired`, `renewed` every third of the ttl, and a final `lost`,
/// `max-hold-reached` or `released`. Closing the connection gives the permit back at once.
#[utoipa::path(
    post,
    path = "/semaphores/{name}/hold",
    params(
        SemaphoreNameParam,
        IdempotencyKeyParam
    ),
    request_body(content = SemaphoreAcquireBody, description = "As for acquire.",
        content_type = "application/json"),
    responses(
        (status = 200, description = "A permit is held for as long as this stream is open: one `HoldEvent` per line.",
            body = hold::HoldEventSchema, content_type = "application/x-ndjson"),
    )
)]
pub fn hold_permit(
    State(app): State<AppState>,
    LockPath(name): LockPath,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    JsonBody(body): JsonBody<SemaphoreAcquireBody>,
) -> impl Future<Output = Result<Response, ApiError>> + Send {
    acquiring::checked(
        semaphore(&body).map(|semaphore| hold::holding(&app, semaphore, name, key, body.lease())),
    )
}
