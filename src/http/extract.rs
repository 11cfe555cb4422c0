//! Request extractors that answer with problem documents instead of axum's plain-text
//! rejections.
//!
//! * [`LockPath`]: the `{name}` path segment as a [`LockName`], decoded and validated once by
//!   the gate ([`ResolvedName`]), which checked the caller's scope on that very value.
//! * [`LockTokenHeader`]: the required `Lock-Token` header. Tokens travel in a header, never in
//!   the URL, where proxies and access logs keep them.
//! * [`IdempotencyKeyHeader`]: the optional `Idempotency-Key` header.
//! * [`JsonBody`]: a JSON body with a size limit, where an empty body means "all defaults"
//!   (its reading and its rejections are `json_body`'s). Messages never repeat a string value
//!   from the body, in case a client put a secret there.

use axum::extract::FromRequestParts;
use axum::http::HeaderName;
use axum::http::request::Parts;

use super::problem::ApiError;
use crate::lock::{IdempotencyKey, InvalidName, LockName, LockToken};

mod json_body;

pub use self::json_body::JsonBody;

// Header names made once (here and `gate::REQUEST_ID`): looking a header up by a `&str`
// parses (and lowercases) the name on every request.
pub const LOCK_TOKEN: HeaderName = HeaderName::from_static("lock-token");
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// A boolean query parameter (`?hold=true`, `?force=true`): absent is false; present, it must
/// be `true` or `false`, once — anything else (`null`, `1`, a second value) is a 400, not a
/// silent false. (The gate decides the operation, and so the scope, from the same parameter:
/// a repeated one could make the two read it differently.)
pub fn query_flag(query: Option<&str>, key: &str) -> Result<bool, ApiError> {
    let mut flag = None;
    for (k, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if k == key {
            let parsed = match &*value {
                "true" => true,
                "false" => false,
                _ => return Err(bad_flag(key, "must be true or false")),
            };
            if flag.replace(parsed).is_some() {
                return Err(bad_flag(key, "must be given at most once"));
            }
        }
    }
    Ok(flag.unwrap_or(false))
}

/// A `prefix` query parameter's value, checked: empty (every name) or the start of a lock
/// name (listings, prefix streams, contention).
pub fn checked_prefix(value: std::borrow::Cow<'_, str>) -> Result<String, ApiError> {
    if !value.is_empty() && LockName::parse(&value).is_err() {
        return Err(ApiError::body(
            Some("prefix".into()),
            "prefix: must be the start of a lock name: letters, digits, '.', '_', ':' and '-', starting with a letter or digit",
        ));
    }
    Ok(value.into_owned())
}

fn bad_flag(key: &str, message: &str) -> ApiError {
    ApiError::body(Some(key.to_owned()), format!("{key}: {message}"))
}

/// The lock name a request's path names, decoded and validated once, by the gate, before
/// anything is authorized: the gate checks the caller's scope on this value and the handler
/// acts on the same value (taken from the request's extensions), so no spelling of a name
/// (percent-encoded characters, either case of hex digits, an absolute-form request line) can
/// be authorized as one name and acted on as another.
#[derive(Debug)]
pub struct LockPath(pub LockName);

/// The API key a request was made with (put there by the gate), for handlers that answer per
/// name (a listing, a multi-lock), bind something to the key (idempotency keys, listing
/// cursors) or log it (a revoke).
#[derive(Debug, Clone)]
pub struct Caller(pub std::sync::Arc<crate::access::ApiKey>);

/// What the gate resolved from a `{name}` route: the name, or why the segment is none.
#[derive(Debug, Clone)]
pub struct ResolvedName(pub Result<LockName, InvalidName>);

impl ResolvedName {
    /// The name a `{name}` segment of a path (still percent-encoded) names.
    pub fn decode(segment: &[u8]) -> Self {
        // Nearly every name arrives as typed, without a `%`: it is then its own decoding, and
        // is checked and copied once (percent-decoding walks it byte by byte first: about
        // 700 instructions of a ~30,000-instruction lock cycle's request).
        if !segment.contains(&b'%') {
            let name = std::str::from_utf8(segment).map_err(|_| InvalidName::BadCharacter);
            return Self(name.and_then(LockName::parse));
        }
        Self::percent_decode(segment)
    }

    /// [`ResolvedName::decode`] of any segment, percent-encoded or not.
    fn percent_decode(segment: &[u8]) -> Self {
        let decoded = percent_encoding::percent_decode(segment)
            .decode_utf8()
            .map_err(|_| InvalidName::BadCharacter);
        Self(decoded.and_then(|name| LockName::from_string(name.into_owned())))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for LockPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        match parts.extensions.remove::<ResolvedName>() {
            Some(ResolvedName(name)) => Ok(Self(name?)),
            // Every router is built with the gate; a handler never decodes the path itself.
            None => Err(ApiError::Internal(
                "the lock name was not resolved by the gate".into(),
            )),
        }
    }
}

/// The `Lock-Token` header of release and renew.
#[derive(Debug)]
pub struct LockTokenHeader(pub LockToken);

impl<S: Send + Sync> FromRequestParts<S> for LockTokenHeader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Self::from_headers(&parts.headers)
    }
}

/// An optional `Lock-Token`, read as [`LockTokenHeader`] reads it: `None` when absent. On an
/// acquire only a reentrant lock's re-entry uses it; a malformed one is 400 on any acquire, and
/// a well-formed one is ignored by any other. A release reads it this way too, because a
/// revoke (`?force=true`) needs none.
#[derive(Debug)]
pub struct OptionalLockToken(pub Option<Result<LockToken, ApiError>>);

impl<S: Send + Sync> FromRequestParts<S> for OptionalLockToken {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(
            match once(&parts.headers, &LOCK_TOKEN, "Lock-Token") {
                Ok(value) => value
                    .map(|value| LockTokenHeader::read(value).map(|LockTokenHeader(token)| token)),
                Err(several) => Some(Err(several)),
            },
        ))
    }
}

/// The value of the header `name` (spelled `label` in problems), which a request sends at most
/// once: several are a 400, as two `Authorization` headers are (see `gate`), because which one
/// counts would be a guess (a proxy that adds its own, a client that sends two tokens).
fn once<'a>(
    headers: &'a axum::http::HeaderMap,
    name: &HeaderName,
    label: &'static str,
) -> Result<Option<&'a axum::http::HeaderValue>, ApiError> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(ApiError::header(
            label,
            format!("send one {label} header, not several"),
        ));
    }
    Ok(first)
}

impl LockTokenHeader {
    pub fn from_headers(headers: &axum::http::HeaderMap) -> Result<Self, ApiError> {
        Self::read(once(headers, &LOCK_TOKEN, "Lock-Token")?.ok_or_else(Self::missing)?)
    }

    /// The token a `Lock-Token` header's value holds.
    fn read(value: &axum::http::HeaderValue) -> Result<Self, ApiError> {
        value
            .to_str()
            .ok()
            .and_then(LockToken::presented)
            .map(Self)
            .ok_or_else(|| {
                ApiError::header(
                    "Lock-Token",
                    "the Lock-Token header is not a token lockgate issued",
                )
            })
    }

    fn missing() -> ApiError {
        ApiError::header("Lock-Token", "the Lock-Token header is required")
    }
}

impl OptionalLockToken {
    /// The token, which this request must have sent.
    pub fn required(self) -> Result<LockToken, ApiError> {
        self.0.unwrap_or_else(|| Err(LockTokenHeader::missing()))
    }
}

/// The optional `Idempotency-Key` header of acquire.
#[derive(Debug)]
pub struct IdempotencyKeyHeader(pub Option<IdempotencyKey>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKeyHeader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let Some(value) = once(&parts.headers, &IDEMPOTENCY_KEY, "Idempotency-Key")? else {
            return Ok(Self(None));
        };
        // Bound to the API key it comes with (see `IdempotencyKey`).
        let caller = parts.extensions.get::<Caller>();
        let bind = |key: IdempotencyKey| match caller {
            Some(Caller(api_key)) => key.bound_to(&api_key.name),
            None => key,
        };
        value.to_str().ok().and_then(IdempotencyKey::parse).map(|key| Self(Some(bind(key)))).ok_or_else(|| {
            ApiError::header(
                "Idempotency-Key",
                "the Idempotency-Key header must be 16 to 255 visible ASCII characters (a UUID works)",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment without a `%` is decoded as percent-decoding would decode it: the same name,
    /// or the same reason it is none.
    #[test]
    fn names_without_a_percent_decode_as_percent_decoding_does() {
        let long = "a".repeat(crate::name::MAX_NAME_LEN + 1);
        let segments: [&[u8]; 12] = [
            b"orders:42",
            b"bench-1764303969-0-123456789-42",
            b"a.b_c:d-e",
            b"",
            b"-leading-dash",
            b"has space",
            b"caf\xc3\xa9",
            b"\xff\xfe",
            b"a+b",
            b"a/b",
            b"events",
            long.as_bytes(),
        ];
        for segment in segments {
            let fast = ResolvedName::decode(segment).0;
            let reference = ResolvedName::percent_decode(segment).0;
            assert_eq!(
                fast.as_ref().map(LockName::as_str),
                reference.as_ref().map(LockName::as_str),
                "{:?}",
                String::from_utf8_lossy(segment)
            );
        }
        // And with a `%`, the name it encodes.
        let encoded = ResolvedName::decode(b"%6Frders%3A42").0;
        assert_eq!(encoded.as_ref().map(LockName::as_str), Ok("orders:42"));
    }
}
