//! Calling a handler: its extractors read the request, then its future runs, in one box that
//! is no bigger than the handler's own future needs.
//!
//! axum's `Handler::call` does the same in an `async` block, which keeps the request's
//! parts, body and state it captured (224 + 24 bytes, and the padding after them) beside the
//! handler's future for as long as that runs: a waiting acquire's box was 1,552 bytes, the
//! allocator's 1,792-byte size class (17.1 MiB for 10,000 waiters; 12.2 MiB in the 1,280-byte
//! class its handler's future fits). Here the extraction is one future and the handler's
//! another, chained by `then`: once the handler's future starts, the extraction's state is
//! gone and its room is the handler's. The answers are axum's (a rejection is its
//! `IntoResponse`, extractors run in the same order on the same parts, the handler is called
//! when first polled). `http::handlers::tests` holds the boxes of the waiting routes to their
//! budget.

use std::future::Future;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::response::IntoResponse;
use futures_util::FutureExt as _;
use futures_util::future::{Either, ready};

use super::AppState;
use super::dispatch::HandlerFuture;

/// A handler the gate can call: a function of extractors (the last may read the body) that
/// returns a future of something that is a response. `T` names the extractors, as axum's
/// `Handler<T, S>` does.
pub trait LeanHandler<T>: Send + Sized + 'static {
    /// Extracts the handler's arguments from `request` and runs it: one boxed future.
    fn call(self, request: Request, state: AppState) -> HandlerFuture;
}

impl<F, Fut, Res> LeanHandler<((),)> for F
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Res> + Send + 'static,
    Res: IntoResponse + 'static,
{
    fn call(self, _request: Request, _state: AppState) -> HandlerFuture {
        // Called when first polled, as every handler is: under the gate's panic guard.
        Box::pin(async move { self().await.into_response() })
    }
}

macro_rules! lean_handler {
    ([$($part:ident),*], $last:ident) => {
        #[allow(non_snake_case, unused_mut)]
        impl<F, Fut, Res, M, $($part,)* $last> LeanHandler<(M, $($part,)* $last,)> for F
        where
            F: FnOnce($($part,)* $last,) -> Fut + Send + 'static,
            Fut: Future<Output = Res> + Send + 'static,
            Res: IntoResponse + 'static,
            $($part: FromRequestParts<AppState> + Send + 'static,)*
            $last: FromRequest<AppState, M> + Send + 'static,
        {
            fn call(self, request: Request, state: AppState) -> HandlerFuture {
                let (mut parts, body) = request.into_parts();
                let extracting = async move {
                    $(
                        let $part = match $part::from_request_parts(&mut parts, &state).await {
                            Ok(value) => value,
                            Err(rejection) => return Err(rejection.into_response()),
                        };
                    )*
                    let request = Request::from_parts(parts, body);
                    match $last::from_request(request, &state).await {
                        Ok($last) => Ok(($($part,)* $last,)),
                        Err(rejection) => Err(rejection.into_response()),
                    }
                };
                Box::pin(extracting.then(move |extracted| match extracted {
                    Ok(($($part,)* $last,)) => {
                        Either::Left(self($($part,)* $last,).map(IntoResponse::into_response))
                    }
                    Err(rejected) => Either::Right(ready(rejected)),
                }))
            }
        }
    };
}

lean_handler!([], T1);
lean_handler!([T1], T2);
lean_handler!([T1, T2], T3);
lean_handler!([T1, T2, T3], T4);
lean_handler!([T1, T2, T3, T4], T5);
lean_handler!([T1, T2, T3, T4, T5], T6);
lean_handler!([T1, T2, T3, T4, T5, T6], T7);
