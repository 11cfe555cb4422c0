//! `GET /locks`: held locks under a name prefix, a page at a time.

use axum::Extension;
use axum::extract::State;
use axum::http::Uri;

use crate::backend::ListCursor;
use crate::http::AppState;
use crate::http::dto::{LockInfoBody, LockListBody};
use crate::http::gate::Caller;
use crate::http::json::Json;
use crate::http::problem::{ApiError, Problem};
use crate::lock::LockName;
use crate::telemetry::Operation;

/// Default `limit`.
pub const DEFAULT_LIMIT: usize = 100;
/// Largest `limit`.
pub const MAX_LIMIT: usize = 1000;

/// The query of `GET /locks`.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Documentation only: the handler reads the query with `ListQuery::parse`.
pub struct ListParams {
    /// Only locks whose names start with this (from the name alphabet). Default: every lock.
    #[param(
        pattern = "^([A-Za-z0-9][A-Za-z0-9._:-]{0,199})?$",
        example = "orders:"
    )]
    prefix: Option<String>,
    /// Most locks in one page, 1 to 1000. Default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u64>,
    /// The `next_cursor` of the previous page; absent for the first page.
    cursor: Option<String>,
}

/// A listing request, checked.
#[derive(Debug, PartialEq)]
struct ListQuery {
    prefix: String,
    limit: usize,
    cursor: ListCursor,
}

impl ListQuery {
    fn parse(query: Option<&str>) -> Result<Self, ApiError> {
        let mut parsed = Self {
            prefix: String::new(),
            limit: DEFAULT_LIMIT,
            cursor: ListCursor::default(),
        };
        let invalid = |field: &str, message: &str| {
            ApiError::body(Some(field.to_owned()), format!("{field}: {message}"))
        };
        for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            match &*key {
                "prefix" if value.is_empty() => parsed.prefix.clear(),
                "prefix" => {
                    LockName::parse(&value).map_err(|_| {
                        invalid("prefix", "must be the start of a lock name: letters, digits, '.', '_', ':' and '-', starting with a letter or digit")
                    })?;
                    parsed.prefix = value.into_owned();
                }
                "limit" => {
                    parsed.limit = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_LIMIT).contains(n))
                        .ok_or_else(|| {
                            invalid(
                                "limit",
                                &format!("must be a whole number from 1 to {MAX_LIMIT}"),
                            )
                        })?;
                }
                "cursor" => {
                    parsed.cursor = ListCursor::decode(&value).ok_or_else(|| {
                        invalid("cursor", "must be a next_cursor from a previous page")
                    })?;
                }
                _ => {
                    return Err(ApiError::body(
                        None,
                        "unknown query parameter (expected prefix, limit or cursor)",
                    ));
                }
            }
        }
        Ok(parsed)
    }
}

/// List held locks.
///
/// Held locks whose names start with `prefix`, with what inspect shows of each (never a
/// token), a page at a time: follow `next_cursor` until a page has none. A page may hold
/// fewer than `limit` locks, even none, before the end. With API keys, only the names the key
/// may inspect are listed. Costs a walk of Redis's keyspace (`SCAN`; every master in a
/// Cluster, every node in Redlock) over the whole listing: see the docs.
#[utoipa::path(
    get,
    path = "/locks",
    tag = "locks",
    operation_id = "list_locks",
    params(ListParams),
    responses(
        (status = 200, description = "A page of held locks.", body = LockListBody),
        (status = 400, description = "`invalid-request`: a bad `prefix`, `limit` or `cursor`, or an unknown parameter.",
            body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`backend-unavailable`.",
            body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    )
)]
pub async fn list_locks(
    State(app): State<AppState>,
    caller: Option<Extension<Caller>>,
    uri: Uri,
) -> Result<Json<LockListBody>, ApiError> {
    let query = ListQuery::parse(uri.query())?;
    let (locks, next) = app
        .service
        .list(&query.prefix, query.cursor, query.limit)
        .await?;
    let visible = |name: &LockName| {
        caller.as_ref().is_none_or(|Extension(Caller(key))| {
            key.allows(Operation::Inspect, Some(name.as_str()))
        })
    };
    Ok(Json(LockListBody {
        locks: locks
            .into_iter()
            .filter(|(name, _)| visible(name))
            .map(|(name, state)| LockInfoBody::new(&name, state))
            .collect(),
        next_cursor: next.map(|cursor| cursor.encode()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_checked() {
        let all = ListQuery::parse(None).expect("defaults");
        assert_eq!((all.prefix.as_str(), all.limit), ("", DEFAULT_LIMIT));
        let page = ListQuery::parse(Some("prefix=orders%3A&limit=5&cursor=1~80")).expect("valid");
        assert_eq!(page.prefix, "orders:");
        assert_eq!(page.limit, 5);
        assert_eq!(
            page.cursor,
            ListCursor {
                node: 1,
                scan: 80,
                after: None
            }
        );
        for bad in [
            "prefix=a*",
            "prefix=%7Bx",
            "limit=0",
            "limit=1001",
            "limit=x",
            "cursor=abc",
            "other=1",
        ] {
            assert!(ListQuery::parse(Some(bad)).is_err(), "{bad}");
        }
    }
}
