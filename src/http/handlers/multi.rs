//! Handlers of multi-locks on `/locks`: take several locks at once (`POST`), renew
//! (`PATCH ?name=…&name=…`) and release (`DELETE ?name=…&name=…`) the whole set.
//!
//! The gate cannot see a set's names (they are in the body or the query), so with API keys
//! it hands the key to these handlers, which check every name against the key's scopes.

use crate::operation::Operation;
use axum::Extension;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::Response;

use futures_util::future::Either;

use super::hold;
use super::params::{IdempotencyKeyParam, SetTokenParam};
use crate::http::AppState;
use crate::http::acquiring;
use crate::http::dto::{LockGrantBody, LockRenewalBody, MultiAcquireBody, RenewBody};
use crate::http::extract::Caller;
use crate::http::extract::{IdempotencyKeyHeader, JsonBody, LockTokenHeader, query_flag};
use crate::http::json::Json;
use crate::http::problem::ApiError;
use crate::lock::error::LockError;
use crate::lock::{LockName, LockToken, Multi};

/// The set `names`, checked: valid names, 2 to 64 of them, allowed to the caller for
/// `operation`. (Whether the store can take them in one step, the lease engine checks.)
fn multi(
    names: impl IntoIterator<Item = String>,
    caller: Option<&Extension<Caller>>,
    operation: Operation,
) -> Result<Multi, ApiError> {
    let names = names
        .into_iter()
        .map(LockName::from_string)
        .collect::<Result<Vec<_>, _>>()?;
    let multi = Multi::new(names)?;
    if let Some(Extension(Caller(key))) = caller
        && !multi
            .names()
            .iter()
            .all(|name| key.allows(operation, Some(name.as_str())))
    {
        return Err(ApiError::Forbidden);
    }
    Ok(multi)
}

/// A set is renewed and released whole: the token must be a multi-lock's (else 400, as a
/// set's token is on `/locks/{name}`), granted for exactly the names given, in any order (else
/// 409 `not-owner`: this token does not hold that set). Either way nothing changes: a subset
/// would leave the rest held, or expiring while its holder believes it holds the set; another
/// kind's token would act on its own lock through a route that does not know its kind (a
/// reentrant lock freed whatever its hold count, its hold count left behind).
fn refuse_other_sets(token: &LockToken, multi: &Multi) -> Result<(), ApiError> {
    if !token.is_multi() {
        return Err(ApiError::header(
            "Lock-Token",
            "this token holds no multi-lock: renew or release one lock at /locks/{name}",
        ));
    }
    if !token.holds_set(multi.names().iter().map(LockName::as_str)) {
        return Err(ApiError::Lock(LockError::NotOwner));
    }
    Ok(())
}

/// Refuses an acquire posted to a set's URL (`?name=…`) whose body names another set.
fn same_set_as_the_url(uri: &Uri, multi: &Multi) -> Result<(), ApiError> {
    let mut named = query_names(uri);
    if named.is_empty() {
        return Ok(());
    }
    named.sort_unstable();
    named.dedup();
    if named
        .iter()
        .map(String::as_str)
        .eq(multi.names().iter().map(LockName::as_str))
    {
        Ok(())
    } else {
        Err(ApiError::body(
            Some("name".to_owned()),
            "name: the query names another set than the body's `names`",
        ))
    }
}

/// The `name` parameters of a query.
fn query_names(uri: &Uri) -> Vec<String> {
    form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .filter(|(key, _)| key == "name")
        .map(|(_, value)| value.into_owned())
        .collect()
}

/// The `name` query parameters of renew and release.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Documentation only: the handlers read the query with `query_names`.
pub struct SetParams {
    /// Every name of the set, as granted (repeat the parameter: `?name=a&name=b`).
    #[param(min_items = 2, max_items = 64)]
    name: Vec<String>,
}

/// The `name` query parameters an acquire may repeat: a client posting to the set's URL.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Documentation only: the handler reads the query with `query_names`.
pub struct SetUrlParams {
    /// The set's names as its URL gives them (`?name=a&name=b`, the `Location` of its
    /// grant), for a client that posts to that URL. Optional: the body's `names` decide;
    /// given, they must be the same names, in any order, or the acquire is a 400.
    #[param(min_items = 2, max_items = 64)]
    name: Option<Vec<String>>,
}

/// Acquire several locks at once.
///
/// Takes every lock of `names` under one token, fence and ttl, or none: no partial grant is
/// ever left behind, and two clients taking overlapping sets in any order cannot deadlock
/// (neither holds part of its set while waiting for the rest). Each name then reads as an
/// ordinary held lock. With `wait_ms`, waits until every name is free at once.
///
/// With `?hold=true`, holds the set for as long as the response is open: 200 and the NDJSON
/// events of a lock's hold stream (`acquired`, `renewed` every third of the ttl, a final
/// `lost`, `max-hold-reached` or `released`); closing it releases the set.
#[utoipa::path(
    post,
    path = "/locks",
    params(
        IdempotencyKeyParam,
        SetUrlParams,
        ("hold" = Option<bool>, Query, nullable = false,
            description = "`true`: hold the set while the response is open (a hold stream, as `POST /locks/{name}/hold`).")
    ),
    request_body(content = MultiAcquireBody, description = "`names`, and the lock's lease settings.",
        content_type = "application/json"),
    responses(
        (status = 201, description = "Every lock was granted; `names` lists them.", body = LockGrantBody),
        (status = 200, description = "With `hold=true`: the set is held for as long as this stream is open, one `HoldEvent` per line (`application/x-ndjson`). \
            Without it: a retry of an idempotent acquire, the grant this `Idempotency-Key` already holds (`LockGrantBody`).",
            content(
                (LockGrantBody = "application/json"),
                (super::hold::HoldEventSchema = "application/x-ndjson")
            )),
    )
)]
pub fn acquire_locks(
    State(app): State<AppState>,
    caller: Option<Extension<Caller>>,
    uri: Uri,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    JsonBody(body): JsonBody<MultiAcquireBody>,
) -> impl Future<Output = Result<Response, ApiError>> + Send {
    // Not an `async fn`: see `acquiring::acquiring`.
    let checked = query_flag(uri.query(), "hold").and_then(|hold| {
        let operation = if hold {
            Operation::Hold
        } else {
            Operation::Acquire
        };
        let multi = multi(body.names.clone(), caller.as_ref(), operation)?;
        same_set_as_the_url(&uri, &multi)?;
        Ok((hold, multi))
    });
    acquiring::checked(checked.map(|(hold, multi)| {
        let first = multi.first().clone();
        if hold {
            Either::Left(hold::holding(&app, multi, first, key, body.lease()))
        } else {
            Either::Right(acquiring::granting(
                &app,
                "locks",
                multi,
                first,
                key,
                body.lease(),
            ))
        }
    }))
}

/// Renew a multi-lock.
///
/// Sets a new ttl on every lock of the set, if the `Lock-Token` header holds them all, and on
/// none of them otherwise. The names must be exactly the set's, as granted (in any order): a
/// subset, a superset or another set is a 409 `not-owner`, another kind's token a 400
/// `invalid-request`, and nothing changes.
#[utoipa::path(
    patch,
    path = "/locks",
    params(
        SetParams,
        SetTokenParam
    ),
    request_body(content = RenewBody, description = "Renewal settings; an empty body renews for the default ttl.",
        content_type = "application/json"),
    responses(
        (status = 200, description = "Every lock of the set was renewed.", body = LockRenewalBody),
    )
)]
pub async fn renew_locks(
    State(app): State<AppState>,
    caller: Option<Extension<Caller>>,
    uri: Uri,
    LockTokenHeader(token): LockTokenHeader,
    JsonBody(body): JsonBody<RenewBody>,
) -> Result<Json<LockRenewalBody>, ApiError> {
    let multi = multi(query_names(&uri), caller.as_ref(), Operation::Renew)?;
    refuse_other_sets(&token, &multi)?;
    let request = app.service.limits().renew(body.ttl_ms, body.replicas())?;
    let first = multi.first().clone();
    let renewal = app
        .service
        .renew_lease(&multi, &first, &token, &request)
        .await?;
    Ok(Json(LockRenewalBody::new(&first, &renewal)))
}

/// Release a multi-lock.
///
/// Deletes every lock of the set the `Lock-Token` header holds. The names must be exactly the
/// set's, as granted (in any order): a subset, a superset or another set is a 409
/// `not-owner`, another kind's token a 400 `invalid-request`, and nothing is released. A set no longer held answers 404 `lock-not-held`
/// (whatever was left of it is released); one with a name held by another token answers 409
/// `not-owner`, and nothing is released.
#[utoipa::path(
    delete,
    path = "/locks",
    params(
        SetParams,
        SetTokenParam
    ),
    responses(
        (status = 204, description = "Every lock of the set was released."),
    )
)]
pub async fn release_locks(
    State(app): State<AppState>,
    caller: Option<Extension<Caller>>,
    uri: Uri,
    LockTokenHeader(token): LockTokenHeader,
) -> Result<StatusCode, ApiError> {
    let multi = multi(query_names(&uri), caller.as_ref(), Operation::Release)?;
    refuse_other_sets(&token, &multi)?;
    let first = multi.first().clone();
    app.service.release_lease(&multi, &first, &token).await?;
    Ok(StatusCode::NO_CONTENT)
}
