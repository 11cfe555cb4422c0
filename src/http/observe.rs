//! The one middleware every request goes through: it logs a server error once with its cause
//! (the client only got a generic detail) and turns a handler panic into a 500 problem
//! document instead of a dropped connection.
//!
//! Why not tower-http's `TraceLayer` and `CatchPanicLayer` plus axum's `map_response`: each
//! wraps the request's future in another layer of state, and a tracing span per request keeps
//! its registry storage alive for the whole request. For most requests that is microseconds,
//! but a waiting request can live for minutes, and with 10,000 of them those layers cost more
//! memory than the waiting itself (about 3 KB per request, measured; see bench/README.md).
//! This layer adds a few words to the future and allocates nothing.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use tower::{Layer, Service};

use super::problem::{ApiError, ServerErrorCause};

#[derive(Debug, Clone, Copy, Default)]
pub struct ObserveLayer;

impl<S> Layer<S> for ObserveLayer {
    type Service = Observe<S>;

    fn layer(&self, inner: S) -> Observe<S> {
        Observe { inner }
    }
}

#[derive(Debug, Clone)]
pub struct Observe<S> {
    inner: S,
}

impl<S> Service<Request> for Observe<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = ObserveFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let route = req.extensions().get::<MatchedPath>().cloned();
        let method = req.method().clone();
        ObserveFuture {
            inner: self.inner.call(req),
            method,
            route,
        }
    }
}

pin_project_lite::pin_project! {
    /// The inner future with what the log lines need.
    #[derive(Debug)]
    pub struct ObserveFuture<F> {
        #[pin]
        inner: F,
        method: Method,
        route: Option<MatchedPath>,
    }
}

impl<F> Future for ObserveFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let route = this.route.as_ref().map_or("-", MatchedPath::as_str);
        let mut inner = this.inner;
        // A panicking future is never polled again: this poll answers for it.
        let response = match std::panic::catch_unwind(AssertUnwindSafe(|| inner.as_mut().poll(cx)))
        {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(Ok(response))) => response,
            Ok(Poll::Ready(Err(never))) => match never {},
            Err(_) => {
                tracing::error!(method = %this.method, route, "handler panicked");
                ApiError::Internal("handler panicked".into()).into_response()
            }
        };
        if let Some(ServerErrorCause(cause)) = response.extensions().get::<ServerErrorCause>() {
            tracing::warn!(method = %this.method, route, status = response.status().as_u16(), cause = %cause, "request failed");
        }
        Poll::Ready(Ok(response))
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use tower::{ServiceBuilder, ServiceExt, service_fn};

    use super::*;

    /// A handler that panics answers a 500 problem document; the server goes on.
    #[tokio::test]
    async fn a_panicking_handler_answers_500() {
        let panicking = service_fn(|_: Request| async {
            if true {
                panic!("bug");
            }
            Ok::<Response, Infallible>(Response::new(Body::empty()))
        });
        let service = ServiceBuilder::new().layer(ObserveLayer).service(panicking);
        let response = service
            .oneshot(Request::new(Body::empty()))
            .await
            .expect("infallible");
        assert_eq!(response.status(), 500);
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json"
        );
    }
}
