//! What the gate reads of a request: its id, its API key, the size of its head, whether its
//! query asks for more (a revoke, a hold stream), whether it holds what the route does not
//! take (a query parameter, a `Lock-Token`), and whether its key's scope covers it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::Request;
use axum::http::{HeaderValue, header};

use super::super::dispatch::Endpoint;
use super::super::extract::{LOCK_TOKEN, ResolvedName};
use super::super::problem::ApiError;
use super::{Gate, MAX_REQUEST_ID_LEN, REQUEST_ID};
use crate::access::{ApiKey, MetricsAuth};
use crate::operation::Operation;

impl Gate {
    pub(super) fn request_id(&self, req: &Request) -> RequestId {
        if let Some(given) = req.headers().get(&REQUEST_ID)
            && !given.is_empty()
            && given.len() <= MAX_REQUEST_ID_LEN
            && given.as_bytes().iter().all(|b| b.is_ascii_graphic())
            // A copy: a clone would share, and so keep alive, hyper's buffer of the request head.
            && let Ok(copy) = HeaderValue::from_bytes(given.as_bytes())
        {
            return RequestId::Given(copy);
        }
        RequestId::Generated(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Whether requests must present an API key.
    pub fn checks_keys(&self) -> bool {
        self.keys.is_some()
    }

    /// Checks the bearer key for `operation`: the caller, or the refusal.
    pub(super) fn authenticate(
        &self,
        operation: Operation,
        req: &Request,
    ) -> Result<Option<Arc<ApiKey>>, ApiError> {
        let Some(keys) = &self.keys else {
            return Ok(None);
        };
        let open = match operation {
            Operation::Healthz | Operation::Readyz | Operation::Console => true,
            Operation::Metrics => self.metrics_auth == MetricsAuth::Open,
            // Asked without a key, it says that a key is needed; with one, what it may do.
            Operation::Access => !req.headers().contains_key(header::AUTHORIZATION),
            _ => false,
        };
        if open {
            return Ok(None);
        }
        let mut presented = req.headers().get_all(header::AUTHORIZATION).iter();
        if presented.nth(1).is_some() {
            // Which one would count is a guess: a proxy that adds its own would be bypassed.
            return Err(ApiError::header(
                "Authorization",
                "send one Authorization header, not several",
            ));
        }
        let key = bearer(req)
            .and_then(|presented| keys.authenticate(presented))
            .ok_or(ApiError::Unauthorized)?;
        if operation == Operation::Metrics && !key.allows(Operation::Metrics, None) {
            return Err(ApiError::Forbidden);
        }
        Ok(Some(key))
    }
}

/// A request's id: the client's, or a number rendered (after this process's random prefix)
/// only when the answer is written, so that a waiting request holds no string for it.
#[derive(Debug, Clone)]
pub(super) enum RequestId {
    Given(HeaderValue),
    Generated(u64),
}

impl RequestId {
    pub(super) fn header(&self, prefix: u32) -> HeaderValue {
        match self {
            Self::Given(value) => value.clone(),
            Self::Generated(n) => {
                // The prefix in 8 hex digits, the number in 12: always a valid header value.
                let digits = (u128::from(prefix) << 48) | u128::from(n & 0xffff_ffff_ffff);
                let mut text = [0u8; 20];
                for (i, byte) in text.iter_mut().enumerate() {
                    *byte = b"0123456789abcdef"[((digits >> (4 * (19 - i))) & 0xf) as usize];
                }
                HeaderValue::from_bytes(&text).unwrap_or(HeaderValue::from_static("-"))
            }
        }
    }
}

/// Whether `key` may do `operation` on the lock `name` (decoded and validated, as the handler
/// will act on it). A name that is not valid passes here: the handler's extractor answers it
/// 400 `invalid-name`, and nothing reaches the lock service.
pub(super) fn in_scope(key: &ApiKey, operation: Operation, name: Option<&ResolvedName>) -> bool {
    if !operation.is_lock_operation() {
        return true;
    }
    match name {
        Some(ResolvedName(Ok(name))) => key.allows(operation, Some(name.as_str())),
        _ => true,
    }
}

/// Refuses what `endpoint` does not take, on the routes of leases and listings: a query
/// parameter its document does not list, or a `Lock-Token` where it lists none. Ignored, a
/// setting written in the query instead of the body (`POST /locks/job?ttl_ms=600000`) would
/// leave the lease silently shorter than asked, as the body's unknown fields are refused for
/// the same reason; and a holder's token on an acquire that does not read it
/// (`POST /semaphores/{name}`, a hold) would take a second lease beside its own, or tell the
/// holder that "another client" holds its lock. The service's routes (probes, metrics,
/// documents, console) take what monitors and browsers send. The detail names what the route
/// takes, never what was sent.
pub(super) fn not_taken(req: &Request, endpoint: &Endpoint) -> Result<(), ApiError> {
    if !(endpoint.operation.is_lock_operation() || endpoint.operation == Operation::List) {
        return Ok(());
    }
    if !endpoint.takes_lock_token && req.headers().contains_key(LOCK_TOKEN) {
        return Err(ApiError::header(
            "Lock-Token",
            "this route takes no Lock-Token: a lease's token goes with its renew (PATCH) and \
             release (DELETE), or with an acquire that re-enters a reentrant lock",
        ));
    }
    unknown_query(req.uri(), endpoint)
}

fn unknown_query(uri: &axum::http::Uri, endpoint: &Endpoint) -> Result<(), ApiError> {
    let Some(query) = uri.query() else {
        return Ok(());
    };
    let takes = |key: &str| endpoint.query.iter().any(|name| **name == *key);
    if form_urlencoded::parse(query.as_bytes()).all(|(key, _)| takes(&key)) {
        return Ok(());
    }
    let detail = match &*endpoint.query {
        [] if matches!(
            endpoint.operation,
            Operation::Acquire | Operation::Renew | Operation::Hold
        ) =>
        {
            "unknown query parameter: this route takes none (its settings, such as `ttl_ms`, go \
             in the JSON body)"
                .to_owned()
        }
        [] => "unknown query parameter: this route takes none".to_owned(),
        [only] => format!("unknown query parameter: this route takes only {only}"),
        [names @ .., last] => format!(
            "unknown query parameter: this route takes only {} and {last}",
            names.join(", ")
        ),
    };
    Err(ApiError::body(None, detail))
}

/// Whether a request's query says `key=true` anywhere: how the gate reads `force` (a revoke)
/// and `hold` (a multi-lock's hold stream) to pick the operation, and so the scope. Lenient on
/// purpose: a query that also says `key=false` is classified as asking for it (the stricter
/// scope), and the handler then refuses the repetition (`extract::query_flag`, 400).
pub(super) fn query_says(uri: &axum::http::Uri, key: &str) -> bool {
    uri.query().is_some_and(|query| {
        form_urlencoded::parse(query.as_bytes()).any(|(k, value)| k == key && value == "true")
    })
}

/// The size of a request's head as it came on the wire, near enough: request line and headers.
pub(super) fn head_bytes(req: &Request) -> usize {
    let target = req
        .uri()
        .path_and_query()
        .map_or(1, |target| target.as_str().len());
    let line = req.method().as_str().len() + 1 + target + " HTTP/1.1\r\n".len();
    req.headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + ": \r\n".len())
        .sum::<usize>()
        + line
}

/// The key of an `Authorization: Bearer <key>` header.
pub(super) fn bearer(req: &Request) -> Option<&[u8]> {
    let value = req.headers().get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, key) = value.split_at_checked(7)?;
    (scheme.eq_ignore_ascii_case(b"bearer ") && !key.is_empty()).then_some(key)
}
