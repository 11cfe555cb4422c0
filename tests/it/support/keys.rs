//! API keys for tests of authorization, and in-process calls that carry them.

use axum::body::Body;
use axum::http::{Method, Request};
use http_body_util::BodyExt;
use lockgate::access::ApiKeys;
use lockgate::access::MetricsAuth;
use lockgate::config::BackendChoice;
use lockgate::http::App;
use tower::ServiceExt;

use crate::support::gateway::config;

pub const DEPLOYER_KEY: &str = "deployer-key-0123456789";

pub const READER_KEY: &str = "reader-key-0123456789";

pub const SCRAPER_KEY: &str = "scraper-key-0123456789";

pub const KEYS: &str = r#"[
    {"name": "deployer", "key": "deployer-key-0123456789", "prefixes": ["deploy:"]},
    {"name": "reader", "key": "reader-key-0123456789", "prefixes": [""], "operations": ["inspect"]},
    {"name": "scraper", "key": "scraper-key-0123456789", "prefixes": [], "operations": ["metrics"]}
]"#;

pub fn app_with_keys(metrics_auth: MetricsAuth) -> App {
    let mut config = config(BackendChoice::Memory);
    config.api_keys = Some(ApiKeys::from_json(KEYS).expect("valid keys"));
    config.metrics_auth = metrics_auth;
    lockgate::app::app(&config).expect("valid config")
}

/// Status, headers and body text of one in-process request.
pub async fn call(
    app: &App,
    method: Method,
    path: &str,
    key: Option<&str>,
    headers: &[(&str, &str)],
) -> (u16, axum::http::HeaderMap, String) {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(key) = key {
        req = req.header("authorization", format!("Bearer {key}"));
    }
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let response = app
        .clone()
        .oneshot(req.body(Body::empty()).expect("request"))
        .await
        .expect("infallible");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}
