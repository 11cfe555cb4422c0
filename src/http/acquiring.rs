//! What every kind of lease's handlers share: checking an acquire body against the limits,
//! running the acquire, and answering a grant so that it is withdrawn if the client is gone
//! before the answer is written.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use futures_util::FutureExt;
use futures_util::future::{Either, Ready, ready};

use crate::http::AppState;
use crate::http::delivery::DeliveredOnRead;
use crate::http::dto::{LockFields, LockGrantBody};
use crate::http::problem::ApiError;
use crate::lock::{
    Grant, IdempotencyKey, LeaseRequest, LockName, LockService, Primitive, RawLease,
};

/// `lease` with a lock body's own fields: a shared grant does not queue, nor is it held
/// beyond its release.
pub fn lock_lease(mut lease: RawLease, fields: LockFields) -> Result<RawLease, ApiError> {
    lease.fair = fields.fair == Some(true);
    lease.priority = fields.priority;
    lease.min_hold_ms = fields.min_hold_ms;
    if lease.fair && fields.shared {
        return Err(ApiError::body(
            Some("fair".to_owned()),
            "fair: a shared grant does not wait in a queue",
        ));
    }
    if lease.min_hold_ms.is_some() && fields.shared {
        return Err(ApiError::body(
            Some("min_hold_ms".to_owned()),
            "min_hold_ms: a shared grant is released at once (an exclusive lock's only)",
        ));
    }
    Ok(lease)
}

/// A lease granted by [`acquiring`], with what the handler needs next.
#[derive(Debug)]
pub struct Acquired<P: Primitive> {
    pub grant: Grant<P>,
    pub request: LeaseRequest,
    pub name: LockName,
    pub service: Arc<LockService>,
}

/// Checks `lease` against the limits, then (in the returned future) acquires a lease of
/// `primitive` on `name`.
///
/// Not an `async fn`, and neither are the handlers that call it: a waiting request keeps its
/// handler's future for the whole wait, and an `async fn` keeps its arguments twice (as
/// arguments and again as locals) where an `async move` block keeps what it captures once,
/// and need not capture the body at all.
pub fn acquiring<P: Primitive>(
    app: &AppState,
    primitive: P,
    name: LockName,
    key: Option<IdempotencyKey>,
    lease: RawLease,
) -> impl Future<Output = Result<Acquired<P>, ApiError>> + Send + use<P> {
    let request = app.service.limits().lease(lease).map_err(ApiError::from);
    let service = app.service.clone();
    async move {
        let request = request?;
        let grant = service
            .acquire_lease(&primitive, &name, &request, key.as_ref(), None)
            .await?;
        Ok(Acquired {
            grant,
            request,
            name,
            service,
        })
    }
}

/// Acquires a lease of `primitive` and answers the grant ([`grant_response`]): what every
/// acquire route does.
pub fn granting<P: Primitive>(
    app: &AppState,
    collection: &'static str,
    primitive: P,
    name: LockName,
    key: Option<IdempotencyKey>,
    lease: RawLease,
) -> impl Future<Output = Result<Response, ApiError>> + Send + use<P> {
    let held = primitive
        .leased(&name)
        .held_names()
        .map(<[LockName]>::to_vec);
    // A combinator, not an `async move` block: a block would keep `acquiring` twice, as the
    // value it captured and again as the future it awaits (see `checked`).
    acquiring(app, primitive, name, key, lease).map(move |acquired| {
        let acquired = acquired?;
        grant_response(collection, &acquired.name, acquired.grant, held.as_deref())
    })
}

/// The future a handler made once its input was checked, or at once the error that kept it
/// from making one.
///
/// What `async move { checked?.await }` would do, at half the size: an `async` block keeps
/// what it captured for its whole life, and the future it awaits beside it, so a waiting
/// request would pay for its wait twice.
pub fn checked<T, F>(checked: Result<F, ApiError>) -> Either<Ready<Result<T, ApiError>>, F>
where
    F: Future<Output = Result<T, ApiError>>,
{
    match checked {
        Ok(future) => Either::Right(future),
        Err(error) => Either::Left(ready(Err(error))),
    }
}

/// 201 (or 200 for a replay) with the grant. A new grant's `Location` is
/// `/<collection>/<name>`; a multi-lock's (`held` names) is `/locks?name=a&name=b`, where
/// its renew and release go, and its body lists the names.
pub fn grant_response<P: Primitive>(
    collection: &str,
    name: &LockName,
    grant: Grant<P>,
    held: Option<&[LockName]>,
) -> Result<Response, ApiError> {
    let body = LockGrantBody::new(name, &grant).holding(held);
    let json = body
        .to_body()
        .map_err(|e| ApiError::Internal(format!("serializing a grant: {e}")))?;
    let status = if grant.replayed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    // The body keeps the grant's guard: if the client is gone before the answer is written,
    // the lock is released rather than left held by nobody.
    let mut response = Response::new(Body::new(DeliveredOnRead::new(json.into(), grant.guard)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if !grant.replayed {
        headers.insert(header::LOCATION, location(collection, name, held));
    }
    Ok(response)
}

fn location(collection: &str, name: &LockName, held: Option<&[LockName]>) -> HeaderValue {
    // The name alphabet is a subset of what a header value, a URL path and a query value
    // may hold as is.
    let location = match held {
        Some(names) => {
            let query: Vec<String> = names.iter().map(|name| format!("name={name}")).collect();
            format!("/{collection}?{}", query.join("&"))
        }
        // Sized once (`format!` grows its string piece by piece).
        None => ["/", collection, "/", name.as_str()].concat(),
    };
    HeaderValue::try_from(location).unwrap_or_else(|_| HeaderValue::from_static("/locks"))
}
