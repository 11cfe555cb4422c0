//! `GET /contention`: the names this gateway's requests wait for most (see
//! [`crate::lock::contention`]), scoped as listings are: a key sees only the names it may
//! inspect.

use axum::Extension;
use axum::extract::State;
use axum::http::Uri;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::AppState;
use crate::http::extract::{Caller, checked_prefix};
use crate::http::handlers::params::PrefixParam;
use crate::http::json::Json;
use crate::http::problem::ApiError;
use crate::lock::contention::{CAPACITY, HALF_LIFE, HotName};
use crate::operation::Operation;

/// Default `limit`.
const DEFAULT_LIMIT: usize = 20;

/// The `limit` of `GET /contention` (its `prefix` is [`PrefixParam`]).
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Documentation only: the handler reads the query with `parse`.
pub struct ContentionParams {
    /// Most names in the answer, 1 to 64. Default 20.
    #[param(minimum = 1, maximum = 64)]
    limit: Option<u64>,
}

/// One of the names waited for most in this gateway. Milliseconds waited and counts decay:
/// they are halved every `half_life_ms`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HotNameBody {
    /// The kind of lease waited for: `lock`, `shared` (a read/write lock's readers),
    /// `semaphore`, `multi` (a multi-lock's first name).
    pub kind: String,
    pub name: String,
    /// Requests waiting for it in this gateway now.
    pub waiting: usize,
    /// Time requests of this gateway waited for it in line, all together.
    pub waited_ms: u64,
    /// How much of `waited_ms` may belong to names it took the place of in the bounded table
    /// (0 for a name that has been in it all along).
    pub overstated_ms: u64,
    /// Waits that ended (granted or ran out), and of them those that ran out.
    pub waits: u64,
    pub timeouts: u64,
    /// Median and 99th percentile of a wait (the bound of its bucket: at most 41 % above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_p50_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_p99_ms: Option<u64>,
    /// Holds of it that ended here (released, or a hold stream's end) since it was in the
    /// table, and their median and 99th percentile length.
    pub holds: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_p50_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_p99_ms: Option<u64>,
}

/// The names waited for most in this gateway (`GET /contention`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "names": [{
        "kind": "lock",
        "name": "orders:42",
        "waiting": 3,
        "waited_ms": 48210,
        "overstated_ms": 0,
        "waits": 211,
        "timeouts": 4,
        "wait_p50_ms": 181,
        "wait_p99_ms": 1448,
        "holds": 205,
        "hold_p50_ms": 181,
        "hold_p99_ms": 362
    }],
    "capacity": 64,
    "half_life_ms": 300000
}))]
pub struct ContentionBody {
    /// The hottest first.
    pub names: Vec<HotNameBody>,
    /// Most names this gateway keeps count of, whatever the number of names used.
    pub capacity: usize,
    /// Every count and time is halved this often: the table says what is hot now.
    pub half_life_ms: u64,
}

impl From<HotName> for HotNameBody {
    fn from(hot: HotName) -> Self {
        Self {
            kind: hot.kind.to_owned(),
            name: hot.name,
            waiting: hot.waiting,
            waited_ms: hot.waited_ms,
            overstated_ms: hot.overstated_ms,
            waits: hot.waits,
            timeouts: hot.timeouts,
            wait_p50_ms: hot.wait_p50_ms,
            wait_p99_ms: hot.wait_p99_ms,
            holds: hot.holds,
            hold_p50_ms: hot.hold_p50_ms,
            hold_p99_ms: hot.hold_p99_ms,
        }
    }
}

/// The query string, checked: the prefix and the limit.
fn parse(query: Option<&str>) -> Result<(String, usize), ApiError> {
    let (mut prefix, mut limit) = (String::new(), DEFAULT_LIMIT);
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match &*key {
            "prefix" => prefix = checked_prefix(value)?,
            "limit" => {
                limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=CAPACITY).contains(n))
                    .ok_or_else(|| {
                        ApiError::body(
                            Some("limit".into()),
                            format!("limit: must be a whole number from 1 to {CAPACITY}"),
                        )
                    })?;
            }
            _ => {
                return Err(ApiError::body(
                    None,
                    "unknown query parameter (expected prefix and limit)",
                ));
            }
        }
    }
    Ok((prefix, limit))
}

/// The names waited for most here.
///
/// The names this gateway's requests waited for most in line (all kinds of lease), hottest
/// first, with the requests waiting for each now, how many waits ended and how many ran out,
/// and the median and 99th percentile of a wait and of a hold. Kept in a table of at most 64
/// names whatever the number of names used (a name with more than 1/64 of all waiting is
/// always in it), every figure halved every 5 minutes. **This gateway's** requests only: ask
/// each gateway (or read `lockgate_wait_seconds` across the fleet) for the whole picture. With
/// API keys, only the names the key may inspect are shown.
#[utoipa::path(
    get,
    path = "/contention",
    params(PrefixParam, ContentionParams),
    responses(
        (status = 200, description = "The names waited for most here.", body = ContentionBody),
    )
)]
pub async fn contention(
    State(app): State<AppState>,
    caller: Option<Extension<Caller>>,
    uri: Uri,
) -> Result<Json<ContentionBody>, ApiError> {
    let (prefix, limit) = parse(uri.query())?;
    let key = caller.as_ref().map(|Extension(Caller(key))| key);
    let shown = |_kind: &str, name: &str| {
        name.starts_with(prefix.as_str())
            && key.is_none_or(|key| key.allows(Operation::Inspect, Some(name)))
    };
    let names = (app.service.hottest(limit, shown).into_iter())
        .map(HotNameBody::from)
        .collect();
    Ok(Json(ContentionBody {
        names,
        capacity: CAPACITY,
        half_life_ms: u64::try_from(HALF_LIFE.as_millis()).unwrap_or(u64::MAX),
    }))
}
