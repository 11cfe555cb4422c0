//! [`JsonBody`]: a JSON body with a size limit, where an empty body means "all defaults". The
//! `Content-Type` is not checked, so that `curl -d '{...}'` (which sends
//! `application/x-www-form-urlencoded`) works as typed. A rejection names the documented field
//! it concerns and never repeats a string of the request (a client may have put a secret
//! there), nor a Rust type's name.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;

use axum::extract::{FromRequest, Request};
use axum::http::header::CONTENT_LENGTH;
use serde::de::DeserializeOwned;

use crate::http::AppState;
use crate::http::problem::ApiError;

/// A JSON body; an empty body deserializes as `T::default()`.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned + Default> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let limit = state.max_body_bytes;
        let declared = req
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|len| len > limit as u64) {
            return Err(ApiError::PayloadTooLarge { limit });
        }
        // A client that stalls while sending its body is answered within the request
        // timeout, even on routes whose overall bound includes a wait for the lock. Nearly
        // always the body came with the head and is read at the first poll: the timer is
        // only made for one that has not.
        let mut read = pin!(axum::body::to_bytes(req.into_body(), limit));
        let read = match poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await {
            Poll::Ready(read) => read,
            Poll::Pending => tokio::time::timeout(state.gate.request_timeout(), read)
                .await
                .map_err(|_| ApiError::Timeout)?,
        };
        let bytes = read.map_err(|err| {
            let too_large = std::error::Error::source(&err)
                .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
            if too_large {
                ApiError::PayloadTooLarge { limit }
            } else {
                ApiError::body(None, "the request body could not be read")
            }
        })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self(T::default()));
        }
        parse(&bytes).map(Self)
    }
}

/// `bytes` as one JSON `T`, or why not (naming the field at fault). Without
/// serde_path_to_error first: following the path costs on every body, and only a rejected one
/// needs it.
fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut json = serde_json::Deserializer::from_slice(bytes);
    T::deserialize(&mut json)
        .and_then(|value| json.end().map(|()| value))
        .map_err(|plain| rejected::<T>(bytes, &plain))
}

/// Why `bytes` is not a `T`: read again, following the path to name the field at fault. A
/// body whose value the second reading accepts was refused by the plain one for what follows
/// the value (trailing data): that reading's error, `plain`, says so.
fn rejected<T: DeserializeOwned>(bytes: &[u8], plain: &serde_json::Error) -> ApiError {
    let mut json = serde_json::Deserializer::from_slice(bytes);
    match serde_path_to_error::deserialize::<_, T>(&mut json) {
        Err(err) => {
            let path = err.path().to_string();
            // serde_path_to_error writes `?` where it could not tell the position (a syntax
            // error); then no field is named rather than a meaningless one.
            let field = (path != "." && !path.contains('?'))
                .then(|| documented_part(&path))
                .flatten();
            ApiError::body(field, describe_json_error(err.inner()))
        }
        Ok(_) => ApiError::body(None, describe_json_error(plain)),
    }
}

/// The start of `path` (`metadata.k`, `names[3]`) that names fields of the API, or `None`: an
/// error names a field by its documented path, never by a name the request made up (an
/// unknown field, a metadata key), which may be anything, a secret included.
fn documented_part(path: &str) -> Option<String> {
    static FIELDS: std::sync::LazyLock<std::collections::HashSet<String>> =
        std::sync::LazyLock::new(|| {
            let doc = crate::http::documented();
            doc.components
                .iter()
                .flat_map(|components| components.schemas.values())
                .filter_map(|schema| match schema {
                    utoipa::openapi::RefOr::T(utoipa::openapi::Schema::Object(object)) => {
                        Some(object.properties.keys().cloned().collect::<Vec<_>>())
                    }
                    _ => None,
                })
                .flatten()
                .collect()
        });
    let mut kept = 0;
    for segment in path.split('.') {
        let name = segment.split('[').next().unwrap_or(segment);
        let index_ok = segment[name.len()..].split_terminator(']').all(|index| {
            index
                .strip_prefix('[')
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        });
        if !FIELDS.contains(name) || !index_ok {
            break;
        }
        kept += segment.len() + usize::from(kept > 0);
    }
    (kept > 0).then(|| path[..kept].to_owned())
}

/// serde's messages that quote what the request sent, first, between backticks (`unknown
/// field `x``, `invalid value: integer `-1``); what they expected, after it, is the API's.
const QUOTING: [&str; 5] = [
    "unknown field ",
    "unknown variant ",
    "invalid value: ",
    "invalid type: ",
    "invalid length ",
];

/// `message` without the first backtick-quoted text if it is one of serde's that quote the
/// request ([`QUOTING`]): `unknown variant `x`, expected …` → `unknown variant, expected …`.
fn without_quoted_input(message: &str) -> String {
    if !QUOTING.iter().any(|start| message.starts_with(start)) {
        return message.to_owned();
    }
    let Some(open) = message.find('`') else {
        return message.to_owned();
    };
    let Some(close) = message[open + 1..].find('`').map(|at| open + 1 + at) else {
        return message.to_owned();
    };
    let before = message[..open].trim_end();
    format!("{before}{}", &message[close + 1..])
}

/// serde_json's message in plain words: without any value, field name or variant it quotes
/// from the request (`invalid type: string "…"`, `unknown field `…``), and without Rust's
/// names for types (`struct AcquireBody`, `u64`).
fn describe_json_error(err: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let message = without_quoted_input(&err.to_string());
    if message.contains("expected struct ") {
        // The body is JSON, but not an object (`[]`, `1`, `"x"`).
        let at = message.rfind(" at line ").map_or("", |at| &message[at..]);
        return format!(
            "the request body must be a JSON object, such as {{\"ttl_ms\": 30000}}{at}"
        );
    }
    let message = plain_type_names(&message);
    let message = match message.find(": string \"") {
        Some(start) => match message.rfind("\", expected") {
            Some(end) if end > start => {
                format!("{}: a string{}", &message[..start], &message[end + 1..])
            }
            _ => format!("{}: a string", &message[..start]),
        },
        None => message,
    };
    match err.classify() {
        Category::Syntax | Category::Eof => {
            format!("the request body is not valid JSON: {message}")
        }
        Category::Data | Category::Io => format!("the request body is not acceptable: {message}"),
    }
}

/// Rust's integer type names, as serde names what it expected, in words.
fn plain_type_names(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for (i, word) in message.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let (core, rest) = word.split_at(word.find([',', ';']).unwrap_or(word.len()));
        out.push_str(match core {
            "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a non-negative whole number",
            "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "a whole number",
            "f32" | "f64" => "a number",
            other => other,
        });
        out.push_str(rest);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body is accepted or rejected as the path-following reading alone did (which the
    /// rejections still come from): the same value, or the same field and message.
    #[test]
    fn bodies_read_as_the_path_following_reading_reads_them() {
        use crate::http::dto::AcquireBody;
        fn path_following(bytes: &[u8]) -> Result<AcquireBody, ApiError> {
            let mut json = serde_json::Deserializer::from_slice(bytes);
            let value = serde_path_to_error::deserialize(&mut json).map_err(|err| {
                let path = err.path().to_string();
                let field = (path != "." && !path.contains('?'))
                    .then(|| documented_part(&path))
                    .flatten();
                ApiError::body(field, describe_json_error(err.inner()))
            })?;
            json.end()
                .map_err(|err| ApiError::body(None, describe_json_error(&err)))?;
            Ok(value)
        }
        let bodies: [&[u8]; 16] = [
            br#"{"ttl_ms": 10000}"#,
            br#"{"ttl_ms": 10000, "wait_ms": 5, "owner": "a", "metadata": {"k": [1, "x"]}}"#,
            br#"{}"#,
            b"{",
            br#"{"ttl": 1}"#,
            br#"{"ttl_ms": -1}"#,
            br#"{"ttl_ms": "10000"}"#,
            br#"{"ttl_ms": 1.5}"#,
            br#"{"ttl_ms": 10000} {"ttl_ms": 1}"#,
            br#"{"ttl_ms": 10000} x"#,
            br#"[]"#,
            br#""secret""#,
            br#"{"metadata": 7}"#,
            br#"{"mode": "sideways"}"#,
            br#"{"ttl_ms": 10000, "ttl_ms": 2}"#,
            b"{\"owner\": \"\xff\"}",
        ];
        for body in bodies {
            let fast = format!("{:?}", parse::<AcquireBody>(body));
            let reference = format!("{:?}", path_following(body));
            assert_eq!(fast, reference, "{}", String::from_utf8_lossy(body));
        }
    }

    fn error_for(body: &str) -> String {
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Body {
            ttl_ms: Option<u64>,
        }
        let err = serde_json::from_str::<Body>(body).expect_err("must fail");
        describe_json_error(&err)
    }

    #[test]
    fn string_values_are_never_repeated() {
        let message = error_for(r#"{"ttl_ms": "s3cr3t-token-value"}"#);
        assert!(!message.contains("s3cr3t"), "{message}");
        assert!(
            message.contains("expected a non-negative whole number"),
            "{message}"
        );
    }

    #[test]
    fn rust_type_names_never_show() {
        for body in [
            "[]",
            "[1, 2]",
            "1",
            r#""x""#,
            r#"{"ttl_ms": 1.5}"#,
            r#"{"ttl_ms": -1}"#,
        ] {
            let message = error_for(body);
            for rust in ["struct", "Body", "u64", "i64", "f64"] {
                assert!(!message.contains(rust), "{body}: {message}");
            }
        }
        assert!(error_for("[]").starts_with("the request body must be a JSON object"));
    }

    /// What the request made up is never repeated: an unknown field's name, a variant, a
    /// metadata key, a number; an error names a field only by its documented path.
    #[test]
    fn errors_repeat_nothing_of_the_request() {
        use crate::http::dto::AcquireBody;
        for (body, field) in [
            (r#"{"mode": "hunter2"}"#, Some("mode")),
            (r#"{"hunter2": 1}"#, None),
            (
                r#"{"metadata": {"hunter2": {"a": 1e400}}}"#,
                Some("metadata"),
            ),
            (
                r#"{"ttl_ms": 1, "metadata": {"k": "v"}, "hunter2": "hunter2"}"#,
                None,
            ),
            (r#"{"ttl_ms": -12345}"#, Some("ttl_ms")),
        ] {
            let Err(ApiError::InvalidRequest {
                field: named,
                message,
                ..
            }) = parse::<AcquireBody>(body.as_bytes())
            else {
                panic!("{body} was accepted");
            };
            assert_eq!(named.as_deref(), field, "{body}");
            for made_up in ["hunter2", "12345"] {
                assert!(!message.contains(made_up), "{body}: {message}");
            }
        }
        assert_eq!(
            documented_part("names[3]").as_deref(),
            Some("names[3]"),
            "a documented field's element"
        );
        assert_eq!(documented_part("names[x]"), None);
        assert_eq!(documented_part("metadata.k.v"), Some("metadata".to_owned()));
    }

    #[test]
    fn syntax_and_data_errors_are_told_apart() {
        assert!(error_for("{").starts_with("the request body is not valid JSON"));
        assert!(
            error_for(r#"{"ttl": 1}"#).starts_with(
                "the request body is not acceptable: unknown field, expected `ttl_ms`"
            )
        );
    }
}
