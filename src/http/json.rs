//! `application/json` answers: a successful body written by [`super::body::to_body`] (ending
//! with a newline), or a 500 problem document if it cannot be serialized.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::body::to_body;

/// An `application/json` answer whose body ends with a newline (axum's `Json` has none).
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        match to_body(&self.0) {
            Ok(body) => {
                let mut response = body.into_response();
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                response
            }
            Err(err) => super::problem::ApiError::Internal(format!("serializing a body: {err}"))
                .into_response(),
        }
    }
}
