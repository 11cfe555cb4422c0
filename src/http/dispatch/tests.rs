//! The gateway's router against axum's: the route table's answers are the ones axum's router
//! gave for the same routes (which clients and schemathesis saw before the gateway routed by
//! itself), over every method and paths made to find the edges: parameters empty, encoded,
//! equal to a literal; a segment more, a segment less, a trailing or a doubled slash.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{MethodFilter, MethodRouter, on};
use tower::ServiceExt;

use super::*;

const METHODS: [Method; 9] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::OPTIONS,
    Method::TRACE,
    Method::CONNECT,
];

/// What stands in a template's parameters.
const PARAMETERS: &[&str] = &[
    "x", "", "events", "hold", "%65vents", "a%2Fb", "%ff", "ui", "locks", "a.b", "..",
];

/// Paths near every template of `table`, and some near none.
fn paths(table: &RouteTable) -> Vec<String> {
    let mut paths: Vec<String> = ["", "/", "*", "//", "/x", "/locks/", "/semaphores/", "/ui/"]
        .map(str::to_owned)
        .to_vec();
    for template in &table.templates {
        for parameter in PARAMETERS {
            let path = template
                .path
                .split('/')
                .map(|segment| {
                    if segment.starts_with('{') {
                        parameter
                    } else {
                        segment
                    }
                })
                .collect::<Vec<_>>()
                .join("/");
            let parent = path.rsplit_once('/').map_or("", |(parent, _)| parent);
            paths.extend([
                format!("{parent}/"),
                format!("{path}/"),
                format!("{path}/x"),
                format!("{path}/hold"),
                format!("{path}/events"),
                format!("/{path}"),
                path.to_uppercase(),
                parent.to_owned(),
                path,
            ]);
        }
    }
    paths.sort();
    paths.dedup();
    paths
}

const SERVED: &str = "x-served";

/// A handler answering `status`, saying what it is.
fn served(
    what: String,
    status: StatusCode,
) -> impl Fn() -> std::future::Ready<axum::response::Response> + Clone {
    move || std::future::ready(([(SERVED, what.clone())], status).into_response())
}

/// axum's router of the same templates and methods, in the same order, each answering which
/// row (or which template's wrong method) it is.
fn axum_router(table: &RouteTable) -> Router {
    let mut router = Router::new();
    for template in &table.templates {
        let mut methods: MethodRouter = MethodRouter::new();
        for endpoint in &template.endpoints {
            let filter = MethodFilter::try_from(endpoint.method.clone()).expect("a method");
            methods = methods.merge(on(
                filter,
                served(
                    format!("{} {}", endpoint.method, template.path),
                    StatusCode::OK,
                ),
            ));
        }
        let wrong = format!("wrong method {}", template.path);
        let wrong = served(wrong, StatusCode::METHOD_NOT_ALLOWED);
        router = router.route(&template.path, methods.fallback(wrong));
    }
    router.fallback(served("nothing".to_owned(), StatusCode::NOT_FOUND))
}

/// What the table finds, as the axum router above answers it: the row or template, and the
/// `Allow` of a wrong method.
fn as_axum_answers(found: &Found<'_, '_>) -> (String, Option<String>) {
    match found {
        Found::Route {
            template, endpoint, ..
        } => (format!("{} {}", endpoint.method, template.path), None),
        Found::WrongMethod { template, .. } => (
            format!("wrong method {}", template.path),
            Some(template.allow.to_str().expect("ascii").to_owned()),
        ),
        Found::Nothing => ("nothing".to_owned(), None),
    }
}

#[tokio::test]
async fn it_answers_as_axum_did() {
    let (_, table) = crate::http::api();
    let axum = axum_router(&table);
    let mut compared = 0;
    for path in paths(&table) {
        // A path the `Uri` type refuses reaches neither router.
        let Ok(uri) = path.parse::<axum::http::Uri>() else {
            continue;
        };
        for method in &METHODS {
            let request = Request::builder()
                .method(method.clone())
                .uri(uri.clone())
                .body(Body::empty())
                .expect("a request");
            let answer = axum.clone().oneshot(request).await.expect("infallible");
            let header = |name| {
                answer
                    .headers()
                    .get(name)
                    .map(|value: &HeaderValue| value.to_str().expect("ascii").to_owned())
            };
            let axums = (header(SERVED).expect("every answer says"), header("allow"));
            let ours = as_axum_answers(&table.find(method, uri.path()));
            assert_eq!(ours, axums, "{method} {path}");
            compared += 1;
        }
    }
    assert!(compared > 2000, "only {compared} requests compared");
}

/// The `{name}` segment found is the path's own, still encoded; the route with a literal
/// where another has a parameter wins, and the one with a parameter is found past it.
#[test]
fn names_are_found_raw_and_literals_win() {
    let (_, table) = crate::http::api();
    let found = |method: Method, path: &'static str| match table.find(&method, path) {
        Found::Route { template, name, .. } => (
            template.path.to_string(),
            name.map(|name| String::from_utf8_lossy(name).into_owned()),
        ),
        other => panic!("{method} {path}: {other:?}"),
    };
    let route = |template: &str, name: Option<&str>| (template.to_owned(), name.map(str::to_owned));
    assert_eq!(
        found(Method::GET, "/locks/events"),
        route("/locks/events", None)
    );
    assert_eq!(
        found(Method::GET, "/locks/%65vents"),
        route("/locks/{name}", Some("%65vents"))
    );
    assert_eq!(
        found(Method::GET, "/locks/events/events"),
        route("/locks/{name}/events", Some("events"))
    );
    assert_eq!(
        found(Method::POST, "/locks//hold"),
        route("/locks/{name}/hold", Some(""))
    );
    assert!(matches!(
        table.find(&Method::POST, "/locks/"),
        Found::Nothing
    ));
    assert!(matches!(
        table.find(&Method::POST, "/locks/events"),
        Found::WrongMethod { .. }
    ));
}
