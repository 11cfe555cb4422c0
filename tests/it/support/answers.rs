//! The gateway's answers through the project's own client ([`lockgate::client`]), checked
//! in one place: a test says which answer it expects and gets the typed body, or the
//! problem, back; anything else fails with what came instead. The bodies are the server's
//! own types, so a test reads fields by name, and a field the server renames breaks the
//! build, not an assertion at run time.

use std::fmt::Debug;
use std::time::Duration;

use lockgate::client::{Answer, Client, ClientError};
use lockgate::http::dto::{LockGrantBody, LockInfoBody, LockRenewalBody, RenewBody};
use lockgate::http::problem::Problem;
use serde_json::Value;

/// An answer of the gateway as the client reads it.
pub type Reply<T> = Result<Answer<T>, ClientError>;

/// The lock calls (`/locks/{name}`) through the project's client, with JSON bodies as a curl
/// user writes them (see [`super::gateway::Gateway::locks`]).
pub struct Locks(pub Client);

impl Locks {
    /// `POST /locks/{name}` with `body` (`json!({})` for the defaults).
    pub async fn acquire(&self, name: &str, body: Value) -> Reply<LockGrantBody> {
        self.0.acquire(name, &body, None, None).await
    }

    /// `POST /locks/{name}` with an `Idempotency-Key`.
    pub async fn acquire_once(&self, name: &str, key: &str, body: Value) -> Reply<LockGrantBody> {
        self.0.acquire(name, &body, Some(key), None).await
    }

    /// `PATCH /locks/{name}` with a token and `body` (a [`RenewBody`] as JSON).
    pub async fn renew(&self, name: &str, token: &str, body: Value) -> Reply<LockRenewalBody> {
        let body: RenewBody = serde_json::from_value(body).expect("a renew body");
        self.0.renew(name, token, &body, None).await
    }

    /// `DELETE /locks/{name}` with a token: the body of a 200 (a hold given back, a lock held
    /// on until its minimum), none for a 204.
    pub async fn release(&self, name: &str, token: &str) -> Reply<Option<serde_json::Value>> {
        self.0.release(name, token, None).await
    }

    /// `GET /locks/{name}`.
    pub async fn inspect(&self, name: &str) -> Reply<LockInfoBody> {
        self.0.inspect(name).await
    }
}

/// An answer as its status and JSON (the body, or the problem document), for a test that
/// reads fields of either by name.
pub fn json_of<T: serde::Serialize>(reply: Reply<T>) -> (u16, Value) {
    match reply {
        Ok(Answer::Done { status, body }) => (
            status.as_u16(),
            serde_json::to_value(body).expect("a body as JSON"),
        ),
        Ok(Answer::Refused {
            status, problem, ..
        }) => (
            status.as_u16(),
            serde_json::to_value(*problem).expect("a problem as JSON"),
        ),
        Err(err) => panic!("no answer: {err}"),
    }
}

/// The client of a lease route as a test writes it, and the lease's name: `/locks/{name}`,
/// `/semaphores/{name}`, or a set's `/locks?name=…&name=…` (whose name is only a label).
pub fn lease_route(client: Client, path: &str) -> (Client, String) {
    if let Some(query) = path.strip_prefix("/locks?") {
        let names: Vec<String> = form_urlencoded::parse(query.as_bytes())
            .filter(|(key, _)| key == "name")
            .map(|(_, name)| name.into_owned())
            .collect();
        return (client.set(&names), String::new());
    }
    if let Some(name) = path.strip_prefix("/semaphores/") {
        return (client.semaphores(), name.to_owned());
    }
    let name = path
        .strip_prefix("/locks/")
        .unwrap_or_else(|| panic!("not a lease route: {path}"));
    (client, name.to_owned())
}

/// `POST` at a lease route (see [`lease_route`]); `/locks` acquires the set its body names.
pub async fn acquire_at(client: Client, path: &str, body: &Value) -> Reply<LockGrantBody> {
    let (client, name) = if path == "/locks" {
        let names: Vec<String> = serde_json::from_value(body["names"].clone()).expect("names");
        (client.set(&names), String::new())
    } else {
        lease_route(client, path)
    };
    client.acquire(&name, body, None, None).await
}

/// `PATCH` (a renewal for `ttl_ms`) or `DELETE` at a lease route (see [`lease_route`]) with
/// `token`: the status and the JSON answered.
pub async fn renew_or_release(
    client: Client,
    path: &str,
    method: &reqwest::Method,
    token: &str,
    ttl_ms: u64,
) -> (u16, Value) {
    let (client, name) = lease_route(client, path);
    if *method == reqwest::Method::PATCH {
        let body = RenewBody {
            ttl_ms: Some(ttl_ms),
            ..RenewBody::default()
        };
        json_of(client.renew(&name, token, &body, None).await)
    } else {
        assert_eq!(*method, reqwest::Method::DELETE, "renew or release");
        json_of(client.release(&name, token, None).await)
    }
}

/// What a test expects of an answer.
pub trait Answered<T> {
    /// The body of a success with `status`.
    fn done(self, status: u16) -> T;
    /// The problem document of a refusal with `status` and kind `slug` (its `type`, `status`,
    /// `title` and `detail` checked as [`super::assert_problem`] checks them).
    fn refused(self, status: u16, slug: &str) -> Problem;
    /// The status answered.
    fn status(&self) -> u16;
    /// The `Retry-After` of a refusal, in whole seconds as sent.
    fn retry_after(&self) -> Option<Duration>;
}

impl<T: Debug> Answered<T> for Reply<T> {
    fn done(self, expected: u16) -> T {
        match self {
            Ok(Answer::Done { status, body }) if status.as_u16() == expected => body,
            other => panic!("expected {expected}, got {other:?}"),
        }
    }

    fn refused(self, expected: u16, slug: &str) -> Problem {
        match self {
            Ok(Answer::Refused {
                status, problem, ..
            }) if status.as_u16() == expected => {
                assert_eq!(
                    problem.type_uri,
                    format!("https://lockgate.dev/problems/{slug}"),
                    "{problem:?}"
                );
                assert_eq!(problem.status, expected, "{problem:?}");
                assert!(
                    !problem.title.is_empty() && !problem.detail.is_empty(),
                    "{problem:?}"
                );
                *problem
            }
            other => panic!("expected a {expected} {slug}, got {other:?}"),
        }
    }

    fn status(&self) -> u16 {
        match self {
            Ok(answer) => answer.status().as_u16(),
            Err(err) => panic!("no answer: {err}"),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Ok(Answer::Refused { retry_after, .. }) => *retry_after,
            Ok(Answer::Done { .. }) => None,
            Err(err) => panic!("no answer: {err}"),
        }
    }
}
