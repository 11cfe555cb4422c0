//! The one shape of a waiting route's answer, for the handlers that are not `async fn` (see
//! `acquiring::acquiring` for why they are not): an error known at once, a boxed future for a
//! path that waits for nothing, or one of the two waiting futures a handler may start, kept
//! inline so that a waiting request allocates nothing more for its wait.
//!
//! Handlers say which case they answer (`at_once`, `refused`, `boxed`, `first`, `second`); how the cases
//! nest in one type is this file's business, and it changes nothing of the futures' sizes (a
//! handler's future is as large as its largest case; see the budget in `http/tests.rs`).

use std::pin::Pin;

use axum::response::Response;
use futures_util::future::{Either, Ready, ready};

use super::problem::ApiError;

/// What a handler's future gives: the response, or the error that becomes one.
pub type Answered = Result<Response, ApiError>;

/// A future that waits for nothing long, boxed so that it adds nothing to the waiting ones.
pub type Boxed = Pin<Box<dyn Future<Output = Answered> + Send>>;

/// A handler's answer: at once, boxed, or one of two waiting futures `A` and `B`.
pub type Answer<A, B> = Either<Either<Ready<Answered>, Boxed>, Either<A, B>>;

/// An answer known at once.
pub fn at_once<A, B>(answered: Answered) -> Answer<A, B> {
    Either::Left(Either::Left(ready(answered)))
}

/// The error found before anything was sent to the store.
pub fn refused<A, B>(error: ApiError) -> Answer<A, B> {
    at_once(Err(error))
}

/// A path that waits for nothing (a re-entry, a refusal that needs the store), boxed.
pub fn boxed<A, B>(future: impl Future<Output = Answered> + Send + 'static) -> Answer<A, B> {
    Either::Left(Either::Right(Box::pin(future)))
}

/// The first of the handler's waiting futures.
pub fn first<A, B>(future: A) -> Answer<A, B> {
    Either::Right(Either::Left(future))
}

/// The second of the handler's waiting futures.
pub fn second<A, B>(future: B) -> Answer<A, B> {
    Either::Right(Either::Right(future))
}
