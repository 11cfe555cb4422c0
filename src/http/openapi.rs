//! The OpenAPI document, generated from the handlers' annotations by utoipa.
//!
//! The committed copy lives in `openapi/openapi.json`; a test fails when it differs from what
//! the code generates. Regenerate it with `cargo run --quiet -- openapi > openapi/openapi.json`.

use utoipa::Number;
use utoipa::OpenApi;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::Schema;

use super::problem::Problem;
use crate::lock::Limits;

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
    servers((url = "http://127.0.0.1:7380", description = "A gateway on its default, sidecar address")),
    tags(
        (name = "locks", description = "Acquire, renew, release and inspect locks."),
        (name = "semaphores", description = "Counting semaphores: up to `permits` holders at once, each with a permit lease of its own."),
        (name = "health", description = "Liveness, readiness and this document.")
    ),
    components(schemas(Problem))
)]
#[derive(Debug)]
pub struct ApiDoc;

/// Every request body of this API but those naming what to acquire (a semaphore's `permits`,
/// a multi-lock's `names`: `POST /semaphores/…` and `POST /locks`) may be omitted (an empty
/// body means defaults). utoipa can only say so by making the schema nullable (`Option<T>`),
/// which client generators turn into a body of `null`; the accurate description is
/// `required: false` with the plain schema.
pub fn make_request_bodies_optional(doc: &mut utoipa::openapi::OpenApi) {
    for (path, item) in doc.paths.paths.iter_mut() {
        let names_what = path.starts_with("/semaphores/") || path == "/locks";
        let post = if names_what { None } else { item.post.as_mut() };
        for operation in [post, item.patch.as_mut(), item.put.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Some(utoipa::openapi::RefOr::T(body)) = operation.request_body.as_mut() {
                body.required = Some(utoipa::openapi::Required::False);
            }
        }
    }
}

/// Writes the server's configured bounds into the body schemas, so that clients generated from
/// a running gateway's `/openapi.json` validate exactly what that gateway accepts.
pub fn apply_limits(doc: &mut utoipa::openapi::OpenApi, limits: &Limits) {
    let ms = |d: std::time::Duration| usize::try_from(d.as_millis()).unwrap_or(usize::MAX);
    let (min_ttl, max_ttl, max_wait) =
        (ms(limits.min_ttl), ms(limits.max_ttl), ms(limits.max_wait));
    let bounds = [
        ("AcquireBody", "ttl_ms", min_ttl, max_ttl),
        ("AcquireBody", "wait_ms", 0, max_wait),
        ("RenewBody", "ttl_ms", min_ttl, max_ttl),
    ];
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    for (schema, field, min, max) in bounds {
        if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(schema)
            && let Some(RefOr::T(Schema::Object(property))) = object.properties.get_mut(field)
        {
            property.minimum = Some(Number::UInt(min));
            property.maximum = Some(Number::UInt(max));
        }
    }
}

/// Describes the optional API keys: a `bearer` security scheme, offered (not required: a
/// gateway may run without keys) on every operation but the probes, and the 401 and 403
/// answers that come with it; also the gate's own 503s (`overloaded`, `timeout`).
pub fn describe_gate(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};

    let problem = |description: &str| {
        ResponseBuilder::new()
            .description(description)
            .content(
                super::problem::PROBLEM_JSON,
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("Problem")))
                    .build(),
            )
            .build()
    };
    let components = doc.components.get_or_insert_with(Default::default);
    let mut scheme = Http::new(HttpAuthScheme::Bearer);
    scheme.description =
        Some("An API key, when the gateway is configured with keys (`--api-keys-file`).".into());
    components
        .security_schemes
        .insert("bearer".into(), RefOr::T(SecurityScheme::Http(scheme)));
    for (path, item) in &mut doc.paths.paths {
        let probe = path == "/healthz" || path == "/readyz";
        let on_lock = path.starts_with("/locks/");
        for operation in [
            &mut item.get,
            &mut item.head,
            &mut item.post,
            &mut item.patch,
            &mut item.delete,
        ]
        .into_iter()
        .flatten()
        {
            let responses = &mut operation.responses.responses;
            responses.entry("431".into()).or_insert_with(|| {
                RefOr::T(problem(
                    "`headers-too-large`: the request line and headers exceed `--max-header-bytes`.",
                ))
            });
            if probe {
                // Probes never need a key: say so, rather than leave generators to assume one.
                operation.security = Some(Vec::new());
                continue;
            }
            operation.security = Some(vec![
                SecurityRequirement::default(),
                SecurityRequirement::new("bearer", Vec::<String>::new()),
            ]);
            responses.entry("401".into()).or_insert_with(|| {
                RefOr::T(problem(
                    "`unauthorized`: the gateway requires an API key and none, or an unknown one, was given.",
                ))
            });
            if on_lock {
                responses.entry("403".into()).or_insert_with(|| {
                    RefOr::T(problem(
                        "`forbidden`: the API key does not cover this operation on this lock name.",
                    ))
                });
                if let Some(RefOr::T(unavailable)) = responses.get_mut("503") {
                    unavailable.description.push_str(
                        " Also `overloaded` (too many requests in flight) or `timeout` (the request took longer than the gateway allows).",
                    );
                }
            }
        }
    }
}
