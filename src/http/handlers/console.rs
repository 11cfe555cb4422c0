//! The operator's console (`/ui`): one page, its script and its style sheet, built into the
//! binary (no CDN, no build step, nothing fetched from anywhere but this gateway), and
//! `GET /access`, which tells the page what the API key entered in it may do.
//!
//! The page holds no data: it shows what the API answers to the key its user enters
//! (`GET /locks/events?prefix=` for the transitions, `GET /locks?prefix=` and
//! `GET /semaphores?prefix=` for waiters and permits), so it is served without a key, as the
//! probes are. Safe by construction: every value from a lock is put in the page as text
//! (`textContent`, never markup), and the Content-Security-Policy ([`CSP`]) allows this
//! origin's script and style sheet only (no inline script, no `eval`), requests to this origin
//! only, and no framing. `--console=false` answers 404 on all three.

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::AppState;
use crate::http::extract::Caller;
use crate::http::json::Json;
use crate::http::problem::ApiError;
use crate::operation::Operation;

const PAGE: &str = include_str!("../console/index.html");
const SCRIPT: &str = include_str!("../console/console.js");
const STYLE: &str = include_str!("../console/console.css");

/// What the console's page may load and do: its own script and style sheet, requests to
/// this gateway, the empty `data:` icon; nothing inline, no frames around it, no forms.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// The operator's console.
///
/// A page that shows the locks under a prefix live (holder, fence, time held, lease left,
/// waiters, semaphore permits, recent transitions), with a revoke button where the API key
/// entered allows it. Served without a key (it holds no data: it asks the API for everything,
/// with the key entered in it); 404 with `--console=false`.
#[utoipa::path(
    get,
    path = "/ui",
    responses(
        (status = 200, description = "The console's page.", content_type = "text/html", body = String),
    )
)]
pub async fn console_page(State(app): State<AppState>) -> Result<Response, ApiError> {
    asset(&app, PAGE, "text/html; charset=utf-8")
}

/// The console's script and style sheet.
#[utoipa::path(
    get,
    path = "/ui/{file}",
    params(("file" = String, Path, description = "`console.js` or `console.css`; anything else is 404.")),
    responses(
        (status = 200, description = "The console's script (`text/javascript`) or style sheet (`text/css`).", content_type = "text/plain", body = String),
    )
)]
pub async fn console_file(State(app): State<AppState>, uri: Uri) -> Result<Response, ApiError> {
    match uri.path().strip_prefix("/ui/") {
        Some("console.js") => asset(&app, SCRIPT, "text/javascript; charset=utf-8"),
        Some("console.css") => asset(&app, STYLE, "text/css; charset=utf-8"),
        _ => Err(ApiError::NotFound),
    }
}

fn asset(
    app: &AppState,
    body: &'static str,
    content_type: &'static str,
) -> Result<Response, ApiError> {
    if !app.console {
        return Err(ApiError::NotFound);
    }
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // Small, and a new gateway version must be picked up at once.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(response)
}

/// What the caller may do (`GET /access`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "api_keys": true,
    "key": "auditor",
    "operations": ["inspect", "revoke"],
    "prefixes": ["orders:"]
}))]
pub struct AccessBody {
    /// Whether this gateway checks API keys. Without them, every caller may do everything;
    /// with them, a request without a key may do nothing.
    pub api_keys: bool,
    /// The name of the caller's key (never its secret); absent without API keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The operations on locks it may do, of `acquire`, `renew`, `release`, `revoke`,
    /// `inspect` (watching and listing included) and `hold`.
    pub operations: Vec<&'static str>,
    /// Where: name prefixes (`""` covers every name).
    pub prefixes: Vec<String>,
}

/// What the caller's API key may do.
///
/// Its name, the operations on locks it allows and the name prefixes it covers; never the key.
/// Without API keys configured: everything, everywhere. Asked without a key where keys are
/// configured: `api_keys` true and nothing allowed (a wrong key is 401). Used by the console
/// to ask for a key only where one is needed, and to show a revoke button only where the key
/// may revoke; the gateway checks every request all the same.
#[utoipa::path(
    get,
    path = "/access",
    responses(
        (status = 200, description = "What the caller may do.", body = AccessBody),
    )
)]
pub async fn access(
    State(app): State<AppState>,
    caller: Option<Extension<Caller>>,
) -> Json<AccessBody> {
    let lock_operations = |allowed: &dyn Fn(Operation) -> bool| {
        Operation::ALL
            .into_iter()
            .filter(|op| op.is_lock_operation() && op.authorized_as() == *op && allowed(*op))
            .map(Operation::label)
            .collect()
    };
    Json(match caller {
        None if app.gate.checks_keys() => AccessBody {
            api_keys: true,
            key: None,
            operations: Vec::new(),
            prefixes: Vec::new(),
        },
        None => AccessBody {
            api_keys: false,
            key: None,
            operations: lock_operations(&|_| true),
            prefixes: vec![String::new()],
        },
        Some(Extension(Caller(key))) => AccessBody {
            api_keys: true,
            key: Some(key.name.clone()),
            operations: lock_operations(&|op| key.operations().contains(&op)),
            prefixes: key.prefixes().to_vec(),
        },
    })
}
