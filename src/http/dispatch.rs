//! Finding a request's route: the gateway's router. The gate ([`super::gate`]) matches each
//! request's method and path against the [`RouteTable`] once, and the row it finds is both
//! what it authorizes (the operation, so the scope; the `{name}` segment) and the handler it
//! calls. There is no second matcher whose answer could differ from the first.
//!
//! Why not axum's `Router`: it did work the gateway never read (a percent-decoded copy of
//! every path parameter and the matched path, each in the request's extensions; a boxed
//! service per route, cloned per request, whose future it boxed), and the gate then looked the
//! matched path up again to classify the request. Routing by the table instead took a lock
//! cycle's requests from 44,688 to 40,256 instructions each (bench/README.md, "What the speed
//! work buys"). The answers are axum's, which is what clients and the committed tests saw
//! before (`tests::it_answers_as_axum_did` holds the two together):
//!
//! * a path matches a template when it has as many `/`-separated segments, every literal
//!   segment is equal byte for byte (so `/locks/%65vents` is the lock `events`, not the prefix
//!   stream at `/locks/events`), and a `{param}` segment is not empty when it is the last
//!   (matchit's rule: `/locks/` is no lock, `/locks//hold` the hold of an empty name, which
//!   the gate then refuses as `invalid-name`);
//! * of the templates a path matches, the one with a literal where the others have a
//!   parameter, earliest, wins (matchit's priority, with its backtracking);
//! * then the method: its own row, `HEAD` by the `GET` row when it has none (the body then
//!   left out, its `Content-Length` kept), else 405 with `Allow` naming the template's methods
//!   in the table's order; no template: 404 (see [`not_found`]).

use std::future::Future;
use std::pin::Pin;

use axum::extract::Request;
use axum::http::{HeaderValue, Method};
use axum::response::Response;

use super::AppState;
use super::problem::ApiError;
use crate::lock::InvalidName;
use crate::operation::Operation;

/// A handler's answer to come, boxed by the call (see [`super::invoke`]).
pub type HandlerFuture = Pin<Box<dyn Future<Output = Response> + Send>>;

/// Calls one handler: its extractors read the request, its state is the application's.
pub type Handler = fn(Request, AppState) -> HandlerFuture;

/// Every route served: the templates, each with its methods.
#[derive(Debug, Default)]
pub struct RouteTable {
    templates: Vec<Template>,
}

/// One path template (`/locks/{name}`) and what each of its methods is.
#[derive(Debug)]
pub struct Template {
    /// As the document writes it.
    pub path: Box<str>,
    segments: Box<[Segment]>,
    /// Where the `{name}` segment is, if the template has one.
    name_at: Option<usize>,
    endpoints: Vec<Endpoint>,
    /// The answer's `Allow` when the method is none of these.
    pub allow: HeaderValue,
}

#[derive(Debug, PartialEq, Eq)]
enum Segment {
    Literal(Box<[u8]>),
    Parameter,
}

/// A method of a template: the operation it is and the handler that serves it.
#[derive(Debug)]
pub struct Endpoint {
    pub method: Method,
    pub operation: Operation,
    /// The kind of lease it acts on: an index into the route table's kinds plus one, 0 for
    /// none (see `routes::lease_kinds`), for the request metrics.
    pub kind: usize,
    /// The query parameters it takes, as its document lists them: the gate refuses any other
    /// (see `gate::request::not_taken`).
    pub query: Box<[Box<str>]>,
    /// Whether it takes a `Lock-Token` header, as its document says: the gate refuses one on
    /// a route that does not (see `gate::request::not_taken`).
    pub takes_lock_token: bool,
    pub handler: Handler,
}

/// What a request's method and path found.
#[derive(Debug)]
pub enum Found<'t, 'p> {
    /// A route: its template, its endpoint, and the raw (still percent-encoded) `{name}`
    /// segment if it has one.
    Route {
        template: &'t Template,
        endpoint: &'t Endpoint,
        name: Option<&'p [u8]>,
    },
    /// A template, but not the method (405).
    WrongMethod {
        template: &'t Template,
        name: Option<&'p [u8]>,
    },
    /// No template (404).
    Nothing,
}

impl Found<'_, '_> {
    /// The operation found: [`Operation::Other`] without a route.
    pub fn operation(&self) -> Operation {
        match self {
            Found::Route { endpoint, .. } => endpoint.operation,
            _ => Operation::Other,
        }
    }

    /// The kind of lease the route acts on ([`Endpoint::kind`]; 0 without a route).
    pub fn kind(&self) -> usize {
        match self {
            Found::Route { endpoint, .. } => endpoint.kind,
            _ => 0,
        }
    }

    /// The template matched, with or without the method.
    pub fn template(&self) -> Option<&Template> {
        match self {
            Found::Route { template, .. } | Found::WrongMethod { template, .. } => Some(template),
            Found::Nothing => None,
        }
    }
}

/// A path has at most this many segments for the table to look at it (every template has
/// far fewer); longer ones match none and are read no further.
const SEGMENTS: usize = 8;

impl RouteTable {
    /// The table of `rows` (a template and one of its methods): a template's methods in the
    /// order of its rows.
    ///
    /// # Panics
    /// When a template has more than `SEGMENTS` segments or a method twice: a table no
    /// request could be routed by as declared.
    pub fn new(rows: impl IntoIterator<Item = (String, Endpoint)>) -> Self {
        let mut templates: Vec<Template> = Vec::new();
        for (path, endpoint) in rows {
            if let Some(template) = templates.iter_mut().find(|t| *t.path == path) {
                assert!(
                    template.method(&endpoint.method).is_none(),
                    "{} {path} is declared twice",
                    endpoint.method
                );
                template.endpoints.push(endpoint);
            } else {
                let segments: Box<[Segment]> = segments_of(&path)
                    .map(|segment| match segment {
                        [b'{', .., b'}'] => Segment::Parameter,
                        literal => Segment::Literal(literal.into()),
                    })
                    .collect();
                assert!(segments.len() <= SEGMENTS, "{path} has too many segments");
                let name_at = segments_of(&path).position(|segment| segment == b"{name}");
                templates.push(Template {
                    path: path.into(),
                    segments,
                    name_at,
                    endpoints: vec![endpoint],
                    allow: HeaderValue::from_static(""),
                });
            }
        }
        for template in &mut templates {
            let mut allow = String::new();
            for endpoint in &template.endpoints {
                if !allow.is_empty() {
                    allow.push(',');
                }
                allow.push_str(endpoint.method.as_str());
                if endpoint.method == Method::GET {
                    allow.push_str(",HEAD");
                }
            }
            template.allow = HeaderValue::from_str(&allow).expect("method names");
        }
        Self { templates }
    }

    /// The route a request's method and path (`Uri::path`, still percent-encoded) find.
    pub fn find<'t, 'p>(&'t self, method: &Method, path: &'p str) -> Found<'t, 'p> {
        if !path.starts_with('/') {
            return Found::Nothing;
        }
        let mut segments: [&[u8]; SEGMENTS] = [&[]; SEGMENTS];
        let mut count = 0;
        for segment in segments_of(path) {
            if count == SEGMENTS {
                return Found::Nothing;
            }
            segments[count] = segment;
            count += 1;
        }
        let segments = &segments[..count];
        // Where a template has parameters, as bits from the first segment down: of two
        // templates a path matches, the one with a literal where the other has a parameter,
        // earliest, has the smaller number.
        let mut best: Option<(u32, &Template)> = None;
        for template in &self.templates {
            if let Some(rank) = template.rank(segments)
                && best.is_none_or(|(best, _)| rank < best)
            {
                best = Some((rank, template));
            }
        }
        let Some((_, template)) = best else {
            return Found::Nothing;
        };
        let name = template.name_at.map(|at| segments[at]);
        let endpoint = template.method(method).or_else(|| {
            (method == Method::HEAD)
                .then(|| template.method(&Method::GET))
                .flatten()
        });
        match endpoint {
            Some(endpoint) => Found::Route {
                template,
                endpoint,
                name,
            },
            None => Found::WrongMethod { template, name },
        }
    }

    /// Every route: its template, method and operation, for tests and the docs.
    pub fn rows(&self) -> impl Iterator<Item = (&str, &Method, Operation)> {
        self.templates.iter().flat_map(|template| {
            template
                .endpoints
                .iter()
                .map(|endpoint| (&*template.path, &endpoint.method, endpoint.operation))
        })
    }
}

impl Template {
    fn method(&self, method: &Method) -> Option<&Endpoint> {
        self.endpoints
            .iter()
            .find(|endpoint| endpoint.method == method)
    }

    /// Whether `segments` match this template, and if so where it has parameters (see
    /// [`RouteTable::find`]).
    fn rank(&self, segments: &[&[u8]]) -> Option<u32> {
        if segments.len() != self.segments.len() {
            return None;
        }
        let mut rank = 0;
        let last = segments.len() - 1;
        for (at, (segment, expected)) in segments.iter().zip(&*self.segments).enumerate() {
            match expected {
                Segment::Literal(literal) if **literal == **segment => {}
                Segment::Parameter if at < last || !segment.is_empty() => {
                    rank |= 1 << (SEGMENTS - 1 - at);
                }
                _ => return None,
            }
        }
        Some(rank)
    }
}

/// The answer to a path no template matched. Under `/locks/` and `/semaphores/` that is a bad
/// name (empty, or with a slash, which never matches `{name}`), so it gets `invalid-name`
/// rather than a bare 404.
pub fn not_found(path: &str) -> ApiError {
    match path
        .strip_prefix("/locks/")
        .or_else(|| path.strip_prefix("/semaphores/"))
    {
        Some("") => ApiError::InvalidName(InvalidName::Empty),
        Some(_) => ApiError::InvalidName(InvalidName::BadCharacter),
        None => ApiError::NotFound,
    }
}

/// The segments of a path or template after its leading `/` (`/` itself: one empty segment).
fn segments_of(path: &str) -> impl Iterator<Item = &[u8]> {
    path.strip_prefix('/')
        .unwrap_or(path)
        .as_bytes()
        .split(|&b| b == b'/')
}

#[cfg(test)]
mod tests;
