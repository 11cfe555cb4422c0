//! The committed OpenAPI document is the one the code generates.

use crate::support::answers::Answered;

const COMMITTED: &str = include_str!("../../openapi/openapi.json");

/// Fails when `openapi/openapi.json` is stale. Regenerate it with
/// `cargo run --quiet -- openapi > openapi/openapi.json`.
#[test]
fn the_committed_openapi_document_matches_the_code() {
    let generated = lockgate::http::openapi_document(&lockgate::config::default_limits());
    let first_difference = COMMITTED
        .trim_end()
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b);
    assert!(
        COMMITTED.trim_end() == generated.trim_end(),
        "openapi/openapi.json is stale (first difference at line {}); regenerate it with \
         `cargo run --quiet -- openapi > openapi/openapi.json`",
        first_difference.map_or_else(|| "end of file".to_owned(), |i| (i + 1).to_string()),
    );
}

/// Every response has a description, as OpenAPI client generators require.
#[test]
fn every_response_is_described() {
    let doc: serde_json::Value = serde_json::from_str(COMMITTED).expect("valid JSON");
    let paths = doc["paths"].as_object().expect("paths");
    let mut count = 0;
    for (path, item) in paths {
        for (method, operation) in item.as_object().expect("path item") {
            for (status, response) in operation["responses"].as_object().expect("responses") {
                let described = response["description"]
                    .as_str()
                    .is_some_and(|d| !d.is_empty());
                assert!(described, "{method} {path} {status} has no description");
                count += 1;
            }
        }
    }
    assert!(count > 20, "only {count} responses documented");
}

/// Operation ids are unique, as the OpenAPI specification requires and generators rely on.
#[test]
fn operation_ids_are_unique() {
    let doc: serde_json::Value = serde_json::from_str(COMMITTED).expect("valid JSON");
    let mut ids: Vec<&str> = doc["paths"]
        .as_object()
        .expect("paths")
        .values()
        .flat_map(|item| item.as_object().expect("path item").values())
        .map(|operation| {
            operation["operationId"]
                .as_str()
                .expect("every operation has an id")
        })
        .collect();
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count, "duplicate operation ids among {ids:?}");
}

/// `HEAD` on an inspect route is documented as what the gateway serves: the `GET`'s statuses
/// and headers with no content, under an operationId of its own; and a `HEAD` answers so.
#[tokio::test]
async fn head_is_documented_where_it_is_served() {
    let doc: serde_json::Value = serde_json::from_str(COMMITTED).expect("valid JSON");
    for (path, id) in [
        ("/locks/{name}", "inspect_lock_head"),
        ("/semaphores/{name}", "inspect_semaphore_head"),
    ] {
        let (get, head) = (&doc["paths"][path]["get"], &doc["paths"][path]["head"]);
        assert_eq!(head["operationId"], id, "{path}");
        let statuses = |operation: &serde_json::Value| {
            let responses = operation["responses"].as_object().expect("responses");
            responses.keys().cloned().collect::<Vec<_>>()
        };
        assert_eq!(statuses(head), statuses(get), "{path}");
        for (status, response) in head["responses"].as_object().expect("responses") {
            assert!(response.get("content").is_none(), "HEAD {path} {status}");
        }
    }
    let gw = crate::support::gateway::Gateway::dev().await;
    for held in [false, true] {
        if held {
            gw.locks()
                .acquire("headless", serde_json::json!({}))
                .await
                .done(201);
        }
        // Raw HTTP: what a HEAD answers on the wire is what is tested.
        let answer = gw
            .http
            .head(gw.url("/locks/headless"))
            .send()
            .await
            .expect("HEAD");
        assert_eq!(answer.status(), if held { 200 } else { 404 });
        assert_eq!(answer.bytes().await.expect("body").len(), 0);
    }
}
