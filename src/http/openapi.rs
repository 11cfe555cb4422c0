//! The OpenAPI document, generated from the handlers' annotations by utoipa.
//!
//! The committed copy lives in `openapi/openapi.json`; a test fails when it differs from what
//! the code generates. Regenerate it with `cargo run --quiet -- openapi > openapi/openapi.json`.

use utoipa::OpenApi;

use super::problem::Problem;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "lockgate",
        description = "A small HTTP gateway to distributed locks kept in Redis: acquire, renew, \
            release and inspect locks with tokens, fences and validity. Every error is an RFC 9457 \
            problem document (`application/problem+json`) whose `type` is \
            `https://lockgate.dev/problems/<kind>`.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    tags(
        (name = "locks", description = "Acquire, renew, release and inspect locks."),
        (name = "health", description = "Liveness, readiness and this document.")
    ),
    components(schemas(Problem))
)]
#[derive(Debug)]
pub struct ApiDoc;
