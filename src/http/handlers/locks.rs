//! Handlers of `/locks/{name}`: acquire, renew, release, inspect.

use crate::http::json::Json;
use axum::Extension;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::params::{
    ForceParam, IdempotencyKeyParam, LockNameParam, LockTokenParam, ReleaseTokenParam,
};
use crate::http::AppState;
use crate::http::dto::LockMode;
use crate::http::dto::{
    AcquireBody, LockGrantBody, LockHeldOnBody, LockHoldsBody, LockInfoBody, LockReleaseBody,
    LockRenewalBody, RenewBody,
};
use crate::http::extract::Caller;
use crate::http::extract::{
    IdempotencyKeyHeader, JsonBody, LockPath, LockTokenHeader, OptionalLockToken, query_flag,
};
use crate::http::gate::Succeeded;
use crate::http::problem::ApiError;
use crate::http::{acquiring, answer};
use crate::lock::{Exclusive, IdempotencyKey, LockName, LockToken, Primitive, Released};
use crate::primitive::shared::Shared;
use axum::response::IntoResponse;

/// Acquire a lock.
///
/// Takes the lock if it is free and returns a token (proof of ownership), a fence (strictly
/// increasing per name) and the validity left. If the lock is held, answers 409 `lock-held`
/// with `retry_after_ms` and `Retry-After`.
///
/// With an `Idempotency-Key` header, retrying after a lost response returns the same grant
/// (200, same token and fence) instead of a 409.
///
/// With `reentrant: true` and the holder's `Lock-Token`, the holder takes its reentrant lock
/// once more; that sets the lease's ttl anew, so with API keys an acquire that presents a
/// `Lock-Token` needs `renew` as well as `acquire` (403 `forbidden` otherwise).
///
/// With `mode: "shared"`, a reader's grant of a read/write lock: readers share the name, each
/// with its own token, fence and ttl; none while a writer (an exclusive grant) holds it, and
/// none new while a writer waits for it. Renew and release it as any grant.
#[utoipa::path(
    post,
    path = "/locks/{name}",
    params(
        LockNameParam,
        IdempotencyKeyParam,
        ("Lock-Token" = Option<String>, Header, nullable = false, pattern = r"^[A-Za-z0-9_-]{22}o?r(h(0|[1-9][0-9]{0,18}))?\.[0-9]{1,19}$",
            description = "Only with `reentrant: true`: the token of the reentrant lock its holder takes once more (400 without it).")
    ),
    request_body(content = AcquireBody, description = "Lease settings; an empty body means all defaults.",
        content_type = "application/json"),
    responses(
        (status = 201, description = "The lock was granted.", body = LockGrantBody,
            headers(("Location" = String, description = "The lock's URL, `/locks/{name}`."))),
        (status = 200, description = "Retry of an idempotent acquire: the grant this `Idempotency-Key` already holds; \
            or, with `reentrant: true` and the holder's `Lock-Token`, the reentrant lock taken once more.",
            body = LockGrantBody),
    )
)]
pub fn acquire_lock(
    State(app): State<AppState>,
    LockPath(name): LockPath,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    OptionalLockToken(token): OptionalLockToken,
    JsonBody(body): JsonBody<AcquireBody>,
) -> impl Future<Output = Result<Response, ApiError>> + Send {
    // Not an `async fn`: see `acquiring::acquiring`.
    let reentrant = body.reentrant == Some(true);
    if reentrant && body.mode == Some(LockMode::Shared) {
        let refused = ApiError::body(
            Some("reentrant".to_owned()),
            "reentrant: a shared grant is not reentrant",
        );
        return answer::refused(refused);
    }
    // A `Lock-Token` that lockgate could not have issued is bad input, whatever the body says:
    // 400, as on every route. A well-formed one is read only by a re-entry: without
    // `reentrant: true` it is refused too, not ignored, or its holder would be told that
    // another client holds its lock (a plain lock is extended by a renewal).
    let token = match token {
        Some(Err(malformed)) => return answer::refused(malformed),
        Some(Ok(_)) if !reentrant => {
            return answer::refused(ApiError::header(
                "Lock-Token",
                "an acquire reads a Lock-Token only with `reentrant: true` (its holder taking a \
                 reentrant lock once more); a lease is extended by a renewal (PATCH)",
            ));
        }
        Some(Ok(token)) => Some(token),
        None => None,
    };
    if reentrant && let Some(token) = token {
        // A re-entry waits for nothing.
        return answer::boxed(reentering(app, name, key, token, body));
    }
    let mode = body.mode;
    let fields = body.lock_fields(mode == Some(LockMode::Shared));
    let mut lease = match acquiring::lock_lease(body.lease(), fields) {
        Ok(lease) => lease,
        Err(refused) => return answer::refused(refused),
    };
    lease.reentrant = reentrant;
    match mode {
        Some(LockMode::Shared) => {
            answer::first(acquiring::granting(&app, "locks", Shared, name, key, lease))
        }
        _ => answer::second(acquiring::granting(
            &app, "locks", Exclusive, name, key, lease,
        )),
    }
}

/// A reentrant lock's holder takes it once more (`reentrant: true` with its `Lock-Token`).
async fn reentering(
    app: AppState,
    name: LockName,
    key: Option<IdempotencyKey>,
    token: LockToken,
    body: AcquireBody,
) -> Result<Response, ApiError> {
    if key.is_some() {
        return Err(ApiError::header(
            "Idempotency-Key",
            "a re-entry of a reentrant lock cannot be made idempotent: each one counts a hold",
        ));
    }
    refuse_multi(&token)?;
    if body.min_hold_ms.is_some() {
        return Err(ApiError::body(
            Some("min_hold_ms".to_owned()),
            "min_hold_ms: a reentrant lock has none (an exclusive lock's only)",
        ));
    }
    let request = app.service.limits().lease(body.lease())?;
    let reentry = app.service.reenter(&name, &token, &request).await?;
    let body = LockGrantBody::reentered(&name, &token, &reentry);
    Ok((Extension(Succeeded("reentered")), Json(body)).into_response())
}

/// Renew a lock.
///
/// Sets a new ttl, counted from now, if the `Lock-Token` header holds the lock.
#[utoipa::path(
    patch,
    path = "/locks/{name}",
    params(
        LockNameParam,
        LockTokenParam
    ),
    request_body(content = RenewBody, description = "Renewal settings; an empty body renews for the default ttl.",
        content_type = "application/json"),
    responses(
        (status = 200, description = "The lease was renewed.", body = LockRenewalBody),
    )
)]
pub async fn renew_lock(
    State(app): State<AppState>,
    LockPath(name): LockPath,
    LockTokenHeader(token): LockTokenHeader,
    JsonBody(body): JsonBody<RenewBody>,
) -> Result<Json<LockRenewalBody>, ApiError> {
    refuse_multi(&token)?;
    let request = app.service.limits().renew(body.ttl_ms, body.replicas())?;
    let renewal = if token.is_shared() {
        app.service
            .renew_lease(&Shared, &name, &token, &request)
            .await?
    } else {
        app.service.renew(&name, &token, &request).await?
    };
    Ok(Json(LockRenewalBody::new(&name, &renewal)))
}

/// Release a lock, or revoke it.
///
/// Deletes the lock if the `Lock-Token` header holds it (compare-and-delete).
///
/// With `?force=true`, an operator revokes the lock instead: it is deleted whoever holds it,
/// with no token. The holder's hold stream ends with a `revoked` event, and its next renewal
/// or release answers 410 `lock-revoked`. With API keys, this needs a key whose `operations`
/// name `revoke`. Every revoke is logged at warn with the name and the key's name.
#[utoipa::path(
    delete,
    path = "/locks/{name}",
    params(LockNameParam, ReleaseTokenParam, ForceParam),
    responses(
        (status = 204, description = "The lock was released (or revoked)."),
        (status = 200, description = "A reentrant lock held more than once gave back one hold and is still held (`LockHoldsBody`), or a lock with `min_hold_ms` released before its minimum stays held until `held_until` (`LockHeldOnBody`).",
            body = LockReleaseBody),
    )
)]
pub async fn release_lock(
    State(app): State<AppState>,
    LockPath(name): LockPath,
    caller: Option<Extension<Caller>>,
    // Neither the whole `Uri` nor the `HeaderMap`: those extractors clone what they take, at
    // an allocation or more per release.
    RawQuery(query): RawQuery,
    token: OptionalLockToken,
) -> Result<Response, ApiError> {
    if query_flag(query.as_deref(), "force")? {
        return revoke(&app, &Exclusive, &name, caller, token).await;
    }
    let token = token.required()?;
    refuse_multi(&token)?;
    if token.is_shared() {
        app.service.release_lease(&Shared, &name, &token).await?;
    } else {
        match app.service.release(&name, &token).await? {
            Released::Gone => {}
            Released::HoldsLeft(holds) => {
                let body = LockHoldsBody {
                    name: name.to_string(),
                    hold_count: holds,
                };
                return Ok((Extension(Succeeded("hold-given-back")), Json(body)).into_response());
            }
            Released::HeldFor(left) => {
                let body = LockHeldOnBody::new(&name, left);
                return Ok((Extension(Succeeded("held-on")), Json(body)).into_response());
            }
        }
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// An operator's revoke (`DELETE …?force=true`, which the gate authorized as `revoke`) of
/// every lease of `primitive` on `name`: 204, logged at warn with the name and the key's name.
pub async fn revoke<P: Primitive>(
    app: &AppState,
    primitive: &P,
    name: &LockName,
    caller: Option<Extension<Caller>>,
    token: OptionalLockToken,
) -> Result<Response, ApiError> {
    // A revoke needs no token; one sent anyway must still be one lockgate could have issued,
    // as everywhere else.
    if let OptionalLockToken(Some(presented)) = token {
        presented?;
    }
    app.service.revoke_lease(primitive, name).await?;
    let key = caller
        .as_ref()
        .map_or("-", |Extension(Caller(key))| key.name.as_str());
    let kind = primitive.leased(name).kind();
    tracing::warn!(lock = %name, kind, key, "revoked");
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A multi-lock's token acts on its whole set only: one name of it alone would leave the set
/// half-held.
fn refuse_multi(token: &LockToken) -> Result<(), ApiError> {
    if token.is_multi() {
        return Err(ApiError::header(
            "Lock-Token",
            "this token holds a multi-lock: renew or release the whole set with PATCH or DELETE /locks?name=…&name=…",
        ));
    }
    Ok(())
}

/// Inspect a lock.
///
/// Whether the lock is held, the time left on its lease and the current fence. Never the
/// token. While readers hold it (`mode: "shared"`), each of them is in `shared_holders`.
/// `HEAD` answers the same status without a body.
// HEAD is served by the GET route (axum answers HEAD with the GET handler, without the body);
// documenting it as a second operation would give two operations one operationId.
#[utoipa::path(
    get,
    path = "/locks/{name}",
    params(LockNameParam),
    responses(
        (status = 200, description = "The lock is held.", body = LockInfoBody),
    )
)]
pub async fn inspect_lock(
    State(app): State<AppState>,
    LockPath(name): LockPath,
) -> Result<Json<LockInfoBody>, ApiError> {
    let state = app.service.inspect(&name).await?;
    Ok(Json(LockInfoBody::new(&name, state)))
}
