//! Tests of the gate.

use axum::extract::Request;
use axum::http::Method;
use tower::{ServiceExt, service_fn};

use super::answer::outcome;
use super::request::{RequestId, bearer};
use super::*;
use crate::http::dispatch::{Endpoint, Handler};

/// Every route served is classified, from its own declaration: the table read from the
/// document has a row for every operation the document lists (a documented `HEAD` is served
/// by its `GET`'s), none of them `other`, each found by a path of its template, and `HEAD` is
/// classified as the `GET` it is served by.
#[test]
fn every_route_served_is_classified() {
    let (document, table) = crate::http::api();
    let mut documented = 0;
    for (template, item) in &document.paths.paths {
        documented += [&item.get, &item.post, &item.patch, &item.delete, &item.put]
            .into_iter()
            .flatten()
            .count();
        if item.head.is_some() {
            let path = template.replace("{name}", "orders:42");
            let get = table.find(&Method::GET, &path).operation();
            assert_eq!(table.find(&Method::HEAD, &path).operation(), get);
            assert_eq!(get, Operation::Inspect, "HEAD {template}");
        }
    }
    let rows: Vec<_> = table.rows().collect();
    assert_eq!(rows.len(), documented);
    let operation = |method: &Method, path: &str| table.find(method, path).operation();
    for (template, method, expected) in &rows {
        assert_ne!(*expected, Operation::Other, "{method} {template}");
        let path = template
            .replace("{name}", "orders:42")
            .replace("{file}", "console.js");
        assert_eq!(operation(method, &path), *expected, "{method} {path}");
    }
    assert_eq!(operation(&Method::HEAD, "/locks/a"), Operation::Inspect);
    assert_eq!(operation(&Method::POST, "/locks/a"), Operation::Acquire);
    assert_eq!(operation(&Method::PUT, "/locks/a"), Operation::Other);
    assert_eq!(operation(&Method::GET, "/nowhere"), Operation::Other);
}

/// Every tag of the route table is one the document declares (with its description): a
/// misspelt tag would start a group of its own in generated clients and documentation.
#[test]
fn every_route_is_tagged_with_a_declared_tag() {
    let (document, _) = crate::http::api();
    let declared: Vec<&str> = document
        .tags
        .iter()
        .flatten()
        .map(|tag| tag.name.as_str())
        .collect();
    for route in crate::http::routes::rows(crate::http::ROUTE_GROUPS) {
        assert!(
            declared.contains(&route.tag),
            "{}: tag {:?} is not among {declared:?}",
            route.operation_id,
            route.tag
        );
    }
}

#[test]
fn every_outcome_has_its_own_label_value() {
    use crate::telemetry::metrics::OUTCOMES;
    let problems = crate::http::problem::ProblemKind::ALL
        .map(|kind| outcome(Operation::Acquire, 400, Some(kind)));
    let successes = [
        (Operation::Acquire, 201),
        (Operation::Acquire, 200),
        (Operation::Renew, 200),
        (Operation::Release, 204),
        (Operation::Revoke, 204),
        (Operation::Inspect, 200),
        (Operation::List, 200),
        (Operation::Watch, 200),
        (Operation::Healthz, 200),
    ]
    .map(|(operation, status)| outcome(operation, status, None));
    for label in problems.iter().chain(&successes) {
        assert!(OUTCOMES.contains(label), "{label} is counted as `other`");
    }
}

/// The gateway with one route, `GET /` (an inspection), served by `handler`, and a request
/// timeout of 50 ms.
fn serving(handler: Handler) -> GateService {
    let endpoint = Endpoint {
        method: Method::GET,
        operation: Operation::Inspect,
        kind: 1,
        query: Box::new([]),
        takes_lock_token: false,
        handler,
    };
    let routes = RouteTable::new([("/".to_owned(), endpoint)]);
    GateService::new(crate::http::test_state(routes, Duration::from_millis(50)))
}

/// A handler that panics answers a 500 problem document; the server goes on.
#[tokio::test]
async fn a_panicking_handler_answers_500() {
    let service = serving(|_, _| Box::pin(async { panic!("bug") }));
    let response = service
        .oneshot(Request::new(Body::empty()))
        .await
        .expect("infallible");
    assert_eq!(response.status(), 500);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    assert!(response.headers().contains_key(REQUEST_ID));
}

/// A handler slower than the request timeout answers 503 `timeout`.
#[tokio::test]
async fn a_slow_handler_times_out() {
    let service = serving(|_, _| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Response::new(Body::empty())
        })
    });
    let response = service
        .oneshot(Request::new(Body::empty()))
        .await
        .expect("infallible");
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
}

/// A generated request id is the process's prefix in 8 hex digits and the count in 12.
#[test]
fn generated_request_ids_are_twenty_hex_digits() {
    for (prefix, n) in [(0, 0), (0xd09a_4fda, 1), (u32::MAX, 0xffff_ffff_ffff)] {
        assert_eq!(
            RequestId::Generated(n).header(prefix),
            format!("{prefix:08x}{n:012x}").as_str()
        );
    }
}

#[test]
fn bearer_keys_are_read_case_insensitively() {
    let with = |value: &'static str| {
        let mut req = Request::new(Body::empty());
        req.headers_mut()
            .insert(header::AUTHORIZATION, HeaderValue::from_static(value));
        bearer(&req).map(<[u8]>::to_vec)
    };
    assert_eq!(with("Bearer abc"), Some(b"abc".to_vec()));
    assert_eq!(with("bearer abc"), Some(b"abc".to_vec()));
    assert_eq!(with("Bearer "), None);
    assert_eq!(with("Basic abc"), None);
    assert_eq!(with("Bear"), None);
}

/// What each of tower-http's layers adds to a request's future, which a waiting request keeps
/// for its whole wait (bench/README.md, "What the speed work buys"): the sensitive-headers layer adds
/// nothing (it wraps the gate); a propagated request id, a timeout, catch-panic and a trace
/// span each add state of their own around the future, where the gate's one future already
/// holds the same things (its id, its deadline, its panic answer, its span).
#[test]
fn what_tower_http_layers_add_to_a_request() {
    use tower::ServiceBuilder;
    use tower_http::catch_panic::CatchPanicLayer;
    use tower_http::request_id::PropagateRequestIdLayer;
    use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
    use tower_http::timeout::TimeoutLayer;
    use tower_http::trace::TraceLayer;

    fn future_size<S: Service<Request>>(_: &S) -> usize {
        std::mem::size_of::<S::Future>()
    }
    let inner =
        service_fn(|_: Request| async { Ok::<Response, Infallible>(Response::new(Body::empty())) });
    let bare = future_size(&inner);
    let added = |size: usize| size - bare;
    let sensitive = ServiceBuilder::new()
        .layer(SetSensitiveRequestHeadersLayer::new([
            header::AUTHORIZATION,
        ]))
        .service(inner);
    assert_eq!(added(future_size(&sensitive)), 0);
    let layered = [
        (
            "request id",
            future_size(
                &ServiceBuilder::new()
                    .layer(PropagateRequestIdLayer::x_request_id())
                    .service(inner),
            ),
        ),
        (
            "timeout",
            future_size(
                &ServiceBuilder::new()
                    .layer(TimeoutLayer::with_status_code(
                        axum::http::StatusCode::SERVICE_UNAVAILABLE,
                        Duration::from_secs(1),
                    ))
                    .service(inner),
            ),
        ),
        (
            "catch panic",
            future_size(
                &ServiceBuilder::new()
                    .layer(CatchPanicLayer::new())
                    .service(inner),
            ),
        ),
        (
            "trace",
            future_size(
                &ServiceBuilder::new()
                    .layer(TraceLayer::new_for_http())
                    .service(inner),
            ),
        ),
    ];
    for (layer, size) in layered {
        eprintln!("{layer}: +{} bytes per request future", added(size));
        assert!(added(size) > 0, "{layer} adds state to every request");
    }
}

/// A scrape after a request on every route repeats no series: routes that are different
/// things (listing locks, listing semaphores) are told apart by their `kind`, where one label
/// set twice would make Prometheus keep one of them and drop the other without an error.
#[test]
fn a_scrape_after_every_route_repeats_no_series() {
    use crate::telemetry::metrics::{Gauges, HoldEnd, Metrics, WaitEnd};
    let kinds = crate::http::lease_kinds();
    let metrics = Metrics::new(&kinds);
    for route in crate::http::routes::rows(crate::http::ROUTE_GROUPS) {
        let kind = crate::http::routes::kind_index(&kinds, &route);
        metrics.request(kind, route.operation, "ok", Duration::ZERO);
    }
    for kind in crate::telemetry::metrics::LEASE_KINDS {
        for end in [WaitEnd::Granted, WaitEnd::TimedOut] {
            metrics.lease_waited(kind, end, Duration::ZERO);
        }
        for end in [
            HoldEnd::Released,
            HoldEnd::Revoked,
            HoldEnd::MaxHold,
            HoldEnd::Lost,
        ] {
            metrics.lease_held(kind, end, Duration::ZERO);
        }
    }
    let text = metrics.render(Gauges {
        waiters: 0,
        in_flight: 0,
        watchers: 0,
    });
    let mut seen = std::collections::HashSet::new();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let series = line.rsplit_once(' ').map_or(line, |(series, _)| series);
        assert!(seen.insert(series), "{series} twice in:\n{text}");
    }
    for kind in ["lock", "semaphore"] {
        let listed = format!("lockgate_requests_total{{operation=\"list\",kind=\"{kind}\",");
        assert!(text.contains(&listed), "no {listed} in:\n{text}");
    }
}
