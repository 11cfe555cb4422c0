//! `GET /locks`: held locks under a name prefix, a page at a time; or, with `name`
//! parameters, those of the named locks that are held (a multi-lock's `Location`). And the
//! same walk for a primitive's listing ([`prefix_page`], `GET /semaphores`).

use crate::operation::Operation;
use axum::Extension;
use axum::extract::State;
use axum::http::Uri;
use std::sync::Arc;

use crate::access::ApiKey;
use crate::backend::{ListCursor, PageRequest};
use crate::http::AppState;
use crate::http::dto::{LockInfoBody, LockListBody};
use crate::http::extract::{Caller, checked_prefix};
use crate::http::json::Json;
use crate::http::problem::ApiError;
use crate::lock::multi::MAX_NAMES;
use crate::lock::{CursorScope, ListPosition, LockError, LockName};

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
    /// Instead of a prefix: these locks (repeat the parameter, up to 64: `?name=a&name=b`,
    /// a multi-lock's `Location`), those of them that are held, in one page. Not with
    /// `prefix`, `limit` or `cursor`.
    #[param(max_items = 64)]
    name: Option<Vec<String>>,
}

/// A listing request, checked.
#[derive(Debug, PartialEq)]
pub struct ListQuery {
    prefix: String,
    limit: usize,
    /// The sealed `cursor` as given; opened against the caller's scope by the handler.
    cursor: Option<String>,
    /// `name` parameters: the named locks rather than a prefix's.
    names: Vec<String>,
}

impl ListQuery {
    /// The query string of a listing (`None`: there is none), checked.
    pub fn parse(query: Option<&str>) -> Result<Self, ApiError> {
        let mut parsed = Self {
            prefix: String::new(),
            limit: DEFAULT_LIMIT,
            cursor: None,
            names: Vec::new(),
        };
        let mut paged = false;
        let invalid = |field: &str, message: &str| {
            ApiError::body(Some(field.to_owned()), format!("{field}: {message}"))
        };
        for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            paged |= key != "name";
            match &*key {
                "name" if parsed.names.len() == MAX_NAMES => {
                    return Err(invalid("name", &format!("at most {MAX_NAMES} names")));
                }
                "name" => parsed.names.push(value.into_owned()),
                "prefix" => parsed.prefix = checked_prefix(value)?,
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
                "cursor" => parsed.cursor = Some(value.into_owned()),
                _ => {
                    return Err(ApiError::body(
                        None,
                        "unknown query parameter (expected prefix, limit and cursor, or name)",
                    ));
                }
            }
        }
        if paged && !parsed.names.is_empty() {
            return Err(invalid(
                "name",
                "cannot be combined with prefix, limit or cursor",
            ));
        }
        Ok(parsed)
    }
}

/// List held locks.
///
/// Held locks whose names start with `prefix`, with what inspect shows of each (never a
/// token), a page at a time: follow `next_cursor` until a page has none. A page may hold
/// fewer than `limit` locks, even none, before the end. With API keys, only the names the key
/// may inspect are listed (under a prefix where it may inspect nothing, an empty page).
/// A cursor is opaque: it says nothing of names, and serves only the same prefix and API key.
/// Costs a walk of Redis's keyspace (`SCAN`; every master in a Cluster, every node in
/// Redlock) over the whole listing: see the docs.
///
/// With `name` parameters instead (`?name=a&name=b`, the `Location` of a multi-lock): those
/// of the named locks that are held, in one page, each read as `GET /locks/{name}` reads it;
/// a name the API key may not inspect answers 403.
#[utoipa::path(
    get,
    path = "/locks",
    params(ListParams),
    responses(
        (status = 200, description = "A page of held locks.", body = LockListBody),
    )
)]
pub async fn list_locks(
    State(app): State<AppState>,
    caller: Option<Extension<Caller>>,
    uri: Uri,
) -> Result<Json<LockListBody>, ApiError> {
    let query = ListQuery::parse(uri.query())?;
    if !query.names.is_empty() {
        return named_locks(&app, caller.as_ref(), query.names).await;
    }
    let list = async |request: PageRequest<'_>| app.service.list(request).await;
    let (locks, next_cursor) =
        prefix_page(&app, caller.as_ref(), &query, list, LockInfoBody::new).await?;
    Ok(Json(LockListBody { locks, next_cursor }))
}

/// One page of the prefix listing `query` asks for, for `GET /locks` and a primitive's
/// listing (`GET /semaphores`) alike: the prefixes the caller's key may see walked through
/// `list` (the lease engine's listing of the kind), and each entry found that the key may see
/// shown as `body` shows it; with the next page's cursor. What a listing guarantees and costs
/// is said at [`list_locks`].
pub async fn prefix_page<S, B>(
    app: &AppState,
    caller: Option<&Extension<Caller>>,
    query: &ListQuery,
    list: impl AsyncFnOnce(
        PageRequest<'_>,
    ) -> Result<(Vec<(LockName, S)>, Option<ListCursor>), LockError>,
    body: impl Fn(&LockName, S) -> B,
) -> Result<(Vec<B>, Option<String>), ApiError> {
    let Some(walk) = PrefixWalk::of(app, caller, query)? else {
        // Nothing the key may see is under the prefix: an empty page, whatever the store
        // holds there, without looking.
        return Ok((Vec::new(), None));
    };
    let page = walk
        .position
        .page(&walk.prefixes, query.limit, |request| list(request))
        .await?;
    Ok(walk.shown(app, page, body))
}

/// What a listing of a prefix walks for its caller: the prefixes its key may see under the
/// one asked for, and where to start.
struct PrefixWalk<'a> {
    key: Option<&'a Arc<ApiKey>>,
    prefix: &'a str,
    prefixes: Vec<String>,
    position: ListPosition,
}

impl<'a> PrefixWalk<'a> {
    /// `None` when the key may see nothing under the prefix.
    fn of(
        app: &AppState,
        caller: Option<&'a Extension<Caller>>,
        query: &'a ListQuery,
    ) -> Result<Option<Self>, ApiError> {
        let key = caller.map(|Extension(Caller(key))| key);
        // What the caller may see under the prefix, and nothing else, is walked: a page's locks,
        // whether it is full and its cursor then tell nothing of names outside the key's scope.
        let prefixes: Vec<String> = match key {
            None => vec![query.prefix.clone()],
            Some(key) => key
                .prefixes_within(Operation::Inspect, &query.prefix)
                .into_iter()
                // A key prefix outside the name alphabet covers no name; it never reaches SCAN.
                .filter(|p| p.is_empty() || LockName::parse(p).is_ok())
                .collect(),
        };
        let scope = CursorScope {
            key: key.map_or("", |key| key.name.as_str()),
            prefix: &query.prefix,
        };
        let position = match &query.cursor {
        None => ListPosition::default(),
        Some(text) => app
            .service
            .open_cursor(text, scope)
            .filter(|position| position.part < prefixes.len().max(1))
            .ok_or_else(|| {
                ApiError::body(
                    Some("cursor".into()),
                    "cursor: must be the next_cursor of a previous page of this listing (same prefix, same API key)",
                )
            })?,
    };
        if prefixes.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self {
            key,
            prefix: &query.prefix,
            prefixes,
            position,
        }))
    }

    /// Whether the key may see `name` (the walk can find names under a key prefix that a
    /// narrower rule of the key leaves out).
    fn visible(&self, name: &LockName) -> bool {
        self.key
            .is_none_or(|key| key.allows(Operation::Inspect, Some(name.as_str())))
    }

    /// A page of what the walk found: the entries the key may see, each as `body` shows it,
    /// and the cursor of the next page, if any.
    fn shown<S, B>(
        &self,
        app: &AppState,
        (found, next): (Vec<(LockName, S)>, Option<ListPosition>),
        body: impl Fn(&LockName, S) -> B,
    ) -> (Vec<B>, Option<String>) {
        let shown = found
            .into_iter()
            .filter(|(name, _)| self.visible(name))
            .map(|(name, state)| body(&name, state))
            .collect();
        (shown, next.map(|position| self.seal(app, &position)))
    }

    /// `position` as the opaque cursor of this walk, for this key and prefix only.
    fn seal(&self, app: &AppState, position: &ListPosition) -> String {
        let scope = CursorScope {
            key: self.key.map_or("", |key| key.name.as_str()),
            prefix: self.prefix,
        };
        app.service.seal_cursor(position, scope)
    }
}

/// Those of `names` that are held, in the order given (each once).
async fn named_locks(
    app: &AppState,
    caller: Option<&Extension<Caller>>,
    names: Vec<String>,
) -> Result<Json<LockListBody>, ApiError> {
    let mut checked: Vec<LockName> = Vec::with_capacity(names.len());
    for name in names {
        let name = LockName::from_string(name)?;
        if let Some(Extension(Caller(key))) = caller
            && !key.allows(Operation::Inspect, Some(name.as_str()))
        {
            return Err(ApiError::Forbidden);
        }
        if !checked.contains(&name) {
            checked.push(name);
        }
    }
    let states =
        futures_util::future::join_all(checked.iter().map(|name| app.service.inspect(name))).await;
    let mut locks = Vec::with_capacity(checked.len());
    for (name, state) in checked.iter().zip(states) {
        match state {
            Ok(state) => locks.push(LockInfoBody::new(name, state)),
            Err(LockError::NotHeld) => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(Json(LockListBody {
        locks,
        next_cursor: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_in_order() {
        let named = ListQuery::parse(Some("name=b&name=a")).expect("valid");
        assert_eq!(named.names, ["b", "a"]);
        let many = vec!["name=x"; MAX_NAMES + 1].join("&");
        assert!(ListQuery::parse(Some(&many)).is_err());
    }

    #[test]
    fn queries_are_checked() {
        let all = ListQuery::parse(None).expect("defaults");
        assert_eq!((all.prefix.as_str(), all.limit), ("", DEFAULT_LIMIT));
        let page = ListQuery::parse(Some("prefix=orders%3A&limit=5&cursor=c-_1")).expect("valid");
        assert_eq!(page.prefix, "orders:");
        assert_eq!(page.limit, 5);
        assert_eq!(page.cursor.as_deref(), Some("c-_1"));
        for bad in [
            "prefix=a*",
            "prefix=%7Bx",
            "limit=0",
            "limit=1001",
            "limit=x",
            "other=1",
            "name=a&prefix=a",
            "limit=5&name=a",
            "name=a&cursor=1~80",
        ] {
            assert!(ListQuery::parse(Some(bad)).is_err(), "{bad}");
        }
    }
}
