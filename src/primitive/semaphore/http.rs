//! The semaphore's routes: `/semaphores/{name}` (acquire a permit, renew it, release it,
//! inspect the semaphore), `/semaphores/{name}/hold` (hold a permit as a stream) and
//! `/semaphores` (list them), in one group of the route table ([`ROUTES`]). The lease engine
//! does the work; these only add the limit (`permits`), and the engine answers 501
//! `not-offered` where the backend has no semaphores.

use std::num::NonZeroU32;

use axum::Extension;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use super::dto::{SemaphoreAcquireBody, SemaphoreInfoBody, SemaphoreListBody};
use super::{HeldPermit, MAX_PERMITS, Semaphore};
use crate::backend::PageRequest;
use crate::http::AppState;
use crate::http::acquiring;
use crate::http::dto::{LockGrantBody, LockRenewalBody, RenewBody};
use crate::http::extract::{
    Caller, IdempotencyKeyHeader, JsonBody, LockPath, LockTokenHeader, OptionalLockToken,
    query_flag,
};
use crate::http::handlers::hold;
use crate::http::handlers::listing::{ListQuery, prefix_page};
use crate::http::handlers::locks::revoke;
use crate::http::handlers::params::{
    ForceParam, IdempotencyKeyParam, LeaseTokenParam, ReleaseTokenParam,
};
use crate::http::json::Json;
use crate::http::problem::ApiError;
use crate::http::routes::{RouteGroup, route_group};
use crate::lock::InvalidRequest;

/// The semaphore's rows of the route table, in the order the document lists their paths.
pub const ROUTES: RouteGroup = route_group! {
    // /semaphores/{name}, /semaphores/{name}/hold, /semaphores
    self::acquire_permit => "semaphores", Acquire(semaphore), &[ACQUIRE, &[PermitsMismatch]];
    self::renew_permit => "semaphores", Renew(semaphore), &[RENEW, &[LockRevoked]];
    self::release_permit => "semaphores", Release(semaphore), &[RELEASE, &[LockRevoked]];
    self::inspect_semaphore => "semaphores", Inspect(semaphore),
        &[&[InvalidName, NotOffered, BackendUnavailable]];
    self::hold_permit => "semaphores", Hold(semaphore), &[ACQUIRE, &[PermitsMismatch]];
    self::list_semaphores => "semaphores", List(semaphore),
        &[&[InvalidRequest, BackendUnavailable]];
};

/// The `{name}` path parameter of a semaphore.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // Documentation only: the gate resolves the name (`LockPath`).
pub struct SemaphoreNameParam {
    /// Semaphore name, with the lock names' alphabet: 1 to 200 characters from
    /// `A-Z a-z 0-9 . _ : -`, starting with a letter or digit. Semaphores and locks of the
    /// same name are distinct.
    #[param(pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$", example = "payments")]
    name: String,
}

/// The query of `GET /semaphores`.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Documentation only: the handler reads the query with `ListQuery::parse`.
pub struct SemaphoreListParams {
    /// Only semaphores whose names start with this (from the name alphabet). Default: all.
    #[param(pattern = "^([A-Za-z0-9][A-Za-z0-9._:-]{0,199})?$", example = "pools:")]
    prefix: Option<String>,
    /// Most semaphores in one page, 1 to 1000. Default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u64>,
    /// The `next_cursor` of the previous page; absent for the first page.
    cursor: Option<String>,
}

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
        .renew_lease(&HeldPermit, &name, &token, &request)
        .await?;
    Ok(Json(LockRenewalBody::new(&name, &renewal)))
}

/// Release a permit, or revoke every permit.
///
/// Gives back the permit the `Lock-Token` header holds; the first waiter gets it.
///
/// With `?force=true`, an operator revokes every permit held instead, with no token: each
/// holder's hold stream ends with a `revoked` event, and its next renewal or release answers
/// 410 `lock-revoked`; waiters get the permits. With API keys, this needs a key whose
/// `operations` name `revoke`. 404 `lock-not-held` when no permit was held. Logged at warn.
#[utoipa::path(
    delete,
    path = "/semaphores/{name}",
    params(SemaphoreNameParam, ReleaseTokenParam, ForceParam),
    responses(
        (status = 204, description = "The permit was released (or every permit revoked)."),
    )
)]
pub async fn release_permit(
    State(app): State<AppState>,
    LockPath(name): LockPath,
    caller: Option<Extension<Caller>>,
    RawQuery(query): RawQuery,
    token: OptionalLockToken,
) -> Result<Response, ApiError> {
    if query_flag(query.as_deref(), "force")? {
        return revoke(&app, &HeldPermit, &name, caller, token).await;
    }
    let token = token.required()?;
    app.service
        .release_lease(&HeldPermit, &name, &token)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
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
    let state = super::inspect(&app.service, &name).await?;
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

/// List semaphores with permits held.
///
/// Semaphores whose names start with `prefix` and that have at least one permit held, with
/// what `GET /semaphores/{name}` shows of each (never a token), a page at a time, as
/// `GET /locks` lists locks: follow `next_cursor` until a page has none; with API keys, only
/// the names the key may inspect. Costs a walk of Redis's keyspace (`SCAN`). Always empty
/// on Redlock, which keeps no semaphores.
#[utoipa::path(
    get,
    path = "/semaphores",
    params(SemaphoreListParams),
    responses(
        (status = 200, description = "A page of semaphores with permits held.", body = SemaphoreListBody),
    )
)]
pub async fn list_semaphores(
    State(app): State<AppState>,
    caller: Option<Extension<Caller>>,
    uri: Uri,
) -> Result<Json<SemaphoreListBody>, ApiError> {
    // No `name` here: this listing does not document one, so the gate refuses it.
    let query = ListQuery::parse(uri.query())?;
    let list = async |request: PageRequest<'_>| super::list(&app.service, request).await;
    let (semaphores, next_cursor) =
        prefix_page(&app, caller.as_ref(), &query, list, SemaphoreInfoBody::new).await?;
    Ok(Json(SemaphoreListBody {
        semaphores,
        next_cursor,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::handlers::tests::{body, name, state, within_budget};

    /// A waiting request keeps its handler's future for the whole wait: the semaphore's
    /// acquire and hold stream stay within the waiting routes' budget (see
    /// `http::handlers::tests`, which also measures the boxes every waiting row makes).
    #[tokio::test]
    async fn waiting_acquires_keep_small_futures() {
        let app = state();
        let no_key = || IdempotencyKeyHeader(None);
        let permits = r#"{"permits": 2, "wait_ms": 1000}"#;
        let acquire = acquire_permit(State(app.clone()), name(), no_key(), body(permits));
        within_budget("POST /semaphores/{name}", size_of_val(&acquire));
        let hold = hold_permit(State(app.clone()), name(), no_key(), body(permits));
        within_budget("POST /semaphores/{name}/hold", size_of_val(&hold));
    }
}
