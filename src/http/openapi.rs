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
use crate::lock::request::MAX_HOLD_CEILING;

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
        (name = "health", description = "Liveness, readiness and this document."),
        (name = "console", description = "The operator's console: a page served from the gateway that shows the locks under a prefix live.")
    ),
    components(schemas(Problem))
)]
#[derive(Debug)]
pub struct ApiDoc;

/// Every request body of this API whose schema has no required field may be omitted (an
/// empty body means defaults); those with one (a semaphore's `permits`, a multi-lock's
/// `names`) are required. utoipa can only say "optional" by making the schema nullable
/// (`Option<T>`), which client generators turn into a body of `null`; the accurate
/// description is `required: false` with the plain schema.
pub fn make_request_bodies_optional(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::Required;

    let schemas = doc.components.as_ref().map(|c| &c.schemas);
    let has_required_field = |schema: Option<&RefOr<Schema>>| {
        let name = match schema {
            Some(RefOr::Ref(reference)) => reference.ref_location.rsplit('/').next(),
            _ => None,
        };
        match name.and_then(|name| schemas?.get(name)) {
            Some(RefOr::T(Schema::Object(object))) => !object.required.is_empty(),
            _ => false,
        }
    };
    for item in doc.paths.paths.values_mut() {
        for operation in [item.post.as_mut(), item.patch.as_mut(), item.put.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Some(RefOr::T(body)) = operation.request_body.as_mut() {
                let schema = match body.content.values().next() {
                    Some(RefOr::T(content)) => content.schema.as_ref(),
                    _ => None,
                };
                body.required = Some(if has_required_field(schema) {
                    Required::True
                } else {
                    Required::False
                });
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
    let max_hold = ms(limits.max_hold.unwrap_or(MAX_HOLD_CEILING));
    let acquire_bounds = [
        ("ttl_ms", min_ttl, max_ttl),
        ("wait_ms", 0, max_wait),
        ("max_hold_ms", min_ttl, max_hold),
    ];
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    for (name, schema) in &mut components.schemas {
        let RefOr::T(Schema::Object(object)) = schema else {
            continue;
        };
        // The bodies of acquires, whatever the primitive (`dto::acquire_body!`), are the ones
        // with a `wait_ms`; a renewal's body has a ttl alone.
        let bounds: &[(&str, usize, usize)] = if object.properties.contains_key("wait_ms") {
            &acquire_bounds
        } else if name == "RenewBody" {
            &acquire_bounds[..1]
        } else {
            continue;
        };
        for (field, min, max) in bounds {
            if let Some(RefOr::T(Schema::Object(property))) = object.properties.get_mut(*field) {
                property.minimum = Some(Number::UInt(*min));
                property.maximum = Some(Number::UInt(*max));
            }
        }
    }
}

/// Describes the optional API keys: a `bearer` security scheme, offered (not required: a
/// gateway may run without keys) on every operation but the probes. (The 401 and 403 answers
/// that come with keys are among the gate's problems, see `routes`.)
pub fn describe_keys(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};

    let components = doc.components.get_or_insert_with(Default::default);
    let mut scheme = Http::new(HttpAuthScheme::Bearer);
    scheme.description =
        Some("An API key, when the gateway is configured with keys (`--api-keys-file`).".into());
    components
        .security_schemes
        .insert("bearer".into(), RefOr::T(SecurityScheme::Http(scheme)));
    for (path, item) in &mut doc.paths.paths {
        let probe = path == "/healthz" || path == "/readyz";
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
            operation.security = Some(if probe {
                // Probes never need a key: say so, rather than leave generators to assume one.
                Vec::new()
            } else {
                vec![
                    SecurityRequirement::default(),
                    SecurityRequirement::new("bearer", Vec::<String>::new()),
                ]
            });
        }
    }
}

/// Documents `HEAD` beside the `GET` of each operation named in `inspects` (a lease's inspect):
/// the gate serves a `HEAD` by its route's `GET` handler and sends no body, so the `HEAD`
/// operation has the same parameters, statuses and headers, no content, and an operationId of
/// its own (`<get's>_head`), for generators that make one function per operation.
pub fn document_head(doc: &mut utoipa::openapi::OpenApi, inspects: &[&str]) {
    for item in doc.paths.paths.values_mut() {
        let Some(get) = &item.get else {
            continue;
        };
        let id = get.operation_id.clone().unwrap_or_default();
        if !inspects.contains(&id.as_str()) {
            continue;
        }
        let mut head = get.clone();
        head.operation_id = Some(format!("{id}_head"));
        head.summary = get
            .summary
            .as_ref()
            .map(|summary| format!("{}, headers only", summary.trim_end_matches('.')));
        head.description = Some(format!(
            "`GET` without the body: the same status and headers (`{id}` serves it), for a \
             check that needs no more than the status."
        ));
        for response in head.responses.responses.values_mut() {
            if let RefOr::T(response) = response {
                response.content.clear();
            }
        }
        item.head = Some(head);
    }
}

/// What a lock name looks like (`crate::name`), for the places utoipa cannot be told at the
/// field: the items of `names` and of the repeated `name` query parameter.
const NAME_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$";
/// What a listing cursor looks like: URL-safe base64 of a nonce, the sealed position and its
/// tag. Its content is opaque; a cursor of this shape that was not issued for this API key and
/// prefix is still a 400.
const CURSOR_PATTERN: &str = "^[A-Za-z0-9_-]{54,1024}$";

/// Says what the server enforces where the derived schemas say less: the alphabet and
/// distinctness of the names of a set and of `?name=`, the shape of a cursor, and the SSE
/// framing of event streams.
pub fn describe_exactly(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::schema::ArrayItems;

    let components = doc.components.get_or_insert_with(Default::default);
    if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut("MultiAcquireBody")
        && let Some(RefOr::T(Schema::Array(names))) = object.properties.get_mut("names")
        && let ArrayItems::RefOrSchema(item) = &mut names.items
        && let RefOr::T(Schema::Object(item)) = item.as_mut()
    {
        item.pattern = Some(NAME_PATTERN.into());
        names.unique_items = true;
    }
    for item in doc.paths.paths.values_mut() {
        // A set's names (renew, release) must be distinct; a listing's may repeat.
        let operations = [
            (item.get.as_mut(), false),
            (item.post.as_mut(), true),
            (item.patch.as_mut(), true),
            (item.delete.as_mut(), true),
        ];
        for (operation, a_set) in operations {
            let Some(operation) = operation else {
                continue;
            };
            for parameter in operation.parameters.iter_mut().flatten() {
                let RefOr::T(parameter) = parameter else {
                    continue;
                };
                match (parameter.name.as_str(), parameter.schema.as_mut()) {
                    ("name", Some(RefOr::T(Schema::Array(names)))) => {
                        names.unique_items = a_set;
                        if let ArrayItems::RefOrSchema(item) = &mut names.items
                            && let RefOr::T(Schema::Object(item)) = item.as_mut()
                        {
                            item.pattern = Some(NAME_PATTERN.into());
                        }
                    }
                    ("cursor", Some(RefOr::T(Schema::Object(cursor)))) => {
                        cursor.pattern = Some(CURSOR_PATTERN.into());
                    }
                    _ => {}
                }
            }
            for response in operation.responses.responses.values_mut() {
                let RefOr::T(response) = response else {
                    continue;
                };
                if let Some(RefOr::T(sse)) = response.content.get_mut(super::handlers::events::SSE)
                    && let Some(payload) = sse.schema.take()
                {
                    sse.schema = Some(sse_event(payload));
                }
            }
        }
    }
}

/// One Server-Sent Event whose `data` is a JSON document of `payload`'s schema (Open API 3.1:
/// the schema of a `text/event-stream` describes each event).
fn sse_event(payload: RefOr<Schema>) -> RefOr<Schema> {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .description(Some(
            "One Server-Sent Event: `event:` names the kind (as `event` in `data`), `data:` is \
             one JSON document; comment lines (`: keep-alive`) carry nothing.",
        ))
        .property("event", ObjectBuilder::new().schema_type(Type::String))
        .property(
            "data",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .content_media_type("application/json")
                .content_schema(Some(payload)),
        )
        .required("data")
        .into()
}
