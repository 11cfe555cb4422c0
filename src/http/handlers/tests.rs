//! The handlers' tests: how big the futures of the acquire routes are. A waiting request keeps its handler's
//! future for the whole wait, so with 10,000 waiters every kilobyte here is 10 MB of
//! memory (bench/README.md, "Memory"). Two regressions of this kind went unnoticed until a
//! benchmark: a backend round trip inlined into the wait (the writers' hold-off), and
//! `async move { checked?.await }` wrappers that kept the wait's future twice. The budget is
//! the allocator's 1,280-byte size class, which today's sizes fit (1,184–1,240 bytes), with
//! no room for another such slip. A third slip was axum's: its `Handler::call` boxed the
//! handler's future with the request's parts beside it, 1,552 bytes for a waiting acquire;
//! the route table now calls handlers through `http::invoke`, whose box is the handler's
//! future alone once it runs. Both are measured: the handlers' futures, and the boxes the
//! rows make.

use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::Request;
use axum::extract::State;
use axum::http::Uri;

use super::{hold, locks, multi};
use crate::http::AppState;
use crate::http::dispatch::RouteTable;
use crate::http::extract::Caller;
use crate::http::extract::OptionalLockToken;
use crate::http::extract::{IdempotencyKeyHeader, JsonBody, LockPath};
use crate::lock::LockName;
use crate::operation::Operation;

/// The most a waiting acquire's handler future may take, in bytes.
const BUDGET: usize = 1280;

pub(crate) fn state() -> AppState {
    crate::http::test_state(RouteTable::default(), Duration::from_secs(1))
}

pub(crate) fn name() -> LockPath {
    LockPath(LockName::parse("orders:42").expect("valid"))
}

pub(crate) fn body<T: serde::de::DeserializeOwned>(json: &str) -> JsonBody<T> {
    JsonBody(serde_json::from_str(json).expect("a valid body"))
}

pub(crate) fn within_budget(route: &str, size: usize) {
    assert!(
        size <= BUDGET,
        "{route}: a waiting request's future takes {size} bytes (budget {BUDGET})"
    );
}

#[tokio::test]
async fn waiting_acquires_keep_small_futures() {
    let app = state();
    let no_key = || IdempotencyKeyHeader(None);
    for mode in ["exclusive", "shared"] {
        let acquire = locks::acquire_lock(
            State(app.clone()),
            name(),
            no_key(),
            OptionalLockToken(None),
            body(&format!(r#"{{"mode": "{mode}", "wait_ms": 1000}}"#)),
        );
        within_budget(
            &format!("POST /locks/{{name}} ({mode})"),
            size_of_val(&acquire),
        );
        let hold = hold::hold_lock(
            State(app.clone()),
            name(),
            no_key(),
            body(&format!(r#"{{"mode": "{mode}", "wait_ms": 1000}}"#)),
        );
        within_budget(
            &format!("POST /locks/{{name}}/hold ({mode})"),
            size_of_val(&hold),
        );
    }
    for uri in ["/locks", "/locks?hold=true"] {
        let acquire = multi::acquire_locks(
            State(app.clone()),
            None::<Extension<Caller>>,
            Uri::from_static(uri),
            no_key(),
            body(r#"{"names": ["a", "b"], "wait_ms": 1000}"#),
        );
        within_budget(&format!("POST {uri}"), size_of_val(&acquire));
    }
}

/// What the gate keeps for a waiting request is the box its row's handler call makes: the
/// extraction and the handler's future in one. Once the handler runs, the extraction's state
/// (the request's parts, the body) must be gone from it (see `http::invoke`). Every route
/// that may wait (an acquire, a hold stream), whatever its primitive.
#[tokio::test]
async fn waiting_routes_box_only_their_handlers_futures() {
    let app = state();
    let rows = crate::http::routes::rows(crate::http::ROUTE_GROUPS);
    let waiting: Vec<_> = rows
        .iter()
        .filter(|route| matches!(route.operation, Operation::Acquire | Operation::Hold))
        .collect();
    // The lock's, the multi-lock's and the semaphore's acquires and hold streams.
    assert!(waiting.len() >= 5, "{} waiting routes", waiting.len());
    for route in waiting {
        let boxed = (route.handler)(Request::new(Body::empty()), app.clone());
        let id = route.operation_id;
        within_budget(&format!("{id}, boxed by its row"), size_of_val(&*boxed));
    }
}
