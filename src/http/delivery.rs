//! A response body that hands a grant to its client.
//!
//! The body holds the grant's [`GrantGuard`] and disarms it when the server takes the bytes to
//! write them. If the response is dropped before that — the client hung up between the grant
//! and the answer — the guard releases the lock instead of leaving it held by nobody. The
//! window that remains is a connection that breaks while the bytes are on the wire.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::lock::{GrantGuard, Primitive};

#[derive(Debug)]
pub struct DeliveredOnRead<P: Primitive> {
    data: Option<Bytes>,
    guard: Option<GrantGuard<P>>,
}

impl<P: Primitive> DeliveredOnRead<P> {
    pub fn new(data: Bytes, guard: GrantGuard<P>) -> Self {
        Self {
            data: Some(data),
            guard: Some(guard),
        }
    }
}

impl<P: Primitive> Body for DeliveredOnRead<P> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        let Some(data) = this.data.take() else {
            return Poll::Ready(None);
        };
        if let Some(guard) = this.guard.take() {
            guard.disarm();
        }
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}
