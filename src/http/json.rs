//! JSON response bodies, each ending with a newline, so that `curl` output does not run into
//! the shell prompt and line-oriented tools read one document per line. Every JSON answer
//! (lock bodies, problem documents, health, the index) is written through [`to_body`].

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// `value` as JSON followed by `\n`.
pub fn to_body<T: Serialize>(value: &T) -> serde_json::Result<Vec<u8>> {
    // One allocation for the usual lock body, newline included (to_vec then push could grow it).
    let mut body = Vec::with_capacity(256);
    serde_json::to_writer(&mut body, value)?;
    body.push(b'\n');
    Ok(body)
}

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
