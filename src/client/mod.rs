//! A typed client of lockgate's own HTTP API.
//!
//! The bodies it sends and reads are the server's own ([`crate::http::dto`],
//! [`crate::http::problem::Problem`]), so there is one definition of the wire format, which
//! the OpenAPI document describes. Used by `lockgate run` and `lockgate healthcheck`
//! ([`crate::cli`]), and by the end-to-end tests (`tests/it/support/answers.rs`), which speak
//! raw HTTP only where the wire itself is what they test. The benchmark clients speak HTTP
//! with reqwest and wrk directly.
//!
//! Every call answers either the success body or the problem document the gateway sent (with
//! its `Retry-After`), or a [`ClientError`] when no answer could be read.

mod answer;

use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;

pub use answer::{Answer, ClientError, EventLines};
use answer::{NDJSON, answer, read, stream, transport};

use crate::config::secrets::without_userinfo;
use crate::http::dto::{LockGrantBody, LockInfoBody, LockRenewalBody, RenewBody};
use crate::http::handlers::contention::ContentionBody;

/// A client of one gateway.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    /// Where leases are: `locks`, or `semaphores` (see [`Client::semaphores`]).
    collection: &'static str,
    /// A multi-lock's names, in the query of every lease request (see [`Client::set`]).
    set: Option<String>,
    /// Headers sent with every request (see [`Client::header`]).
    headers: HeaderMap,
}

impl Client {
    /// A client of the gateway at `base` (`http://…` or `https://…`), sending `api_key` as a
    /// bearer key when given.
    pub fn new(base: &str, api_key: Option<&str>) -> Result<Self, ClientError> {
        let base = base.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            let shown = without_userinfo(base.trim_start_matches('/'));
            return Err(ClientError::GatewayUrl(shown));
        }
        crate::tls::install_crypto_provider();
        let mut headers = HeaderMap::new();
        if let Some(key) = api_key {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                ClientError::Setup("the API key is not a valid header value".into())
            })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let mut http = reqwest::Client::builder().default_headers(headers);
        if base.starts_with("http://") {
            // No TLS to verify: trust no certificate rather than load the system's, so that a
            // plain-HTTP client starts where there is no CA bundle (an image built `FROM
            // scratch`); the platform verifier refuses to start without one.
            http = http.tls_certs_only(std::iter::empty());
        }
        let http = http
            .build()
            .map_err(|e| ClientError::Setup(format!("cannot set up an HTTP client: {e}")))?;
        Ok(Self::with_http(http, base))
    }

    /// A client over an existing `reqwest::Client` (its timeouts and headers apply).
    pub fn with_http(http: reqwest::Client, base: &str) -> Self {
        Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            collection: "locks",
            set: None,
            headers: HeaderMap::new(),
        }
    }

    /// This client sending the header `name: value` with every request (a `traceparent`, an
    /// `X-Request-Id`). A value that is no header value is refused.
    pub fn header(mut self, name: &'static str, value: &str) -> Result<Self, ClientError> {
        let value = HeaderValue::from_str(value)
            .map_err(|_| ClientError::Setup(format!("not a valid value of {name}")))?;
        self.headers.insert(name, value);
        Ok(self)
    }

    /// A request with this client's headers.
    fn request(&self, method: Method, url: impl reqwest::IntoUrl) -> reqwest::RequestBuilder {
        self.http.request(method, url).headers(self.headers.clone())
    }

    /// `GET url`: its answer, the body read as `T`.
    async fn get<T: DeserializeOwned>(&self, url: String) -> Result<Answer<T>, ClientError> {
        answer(self.request(Method::GET, url).send().await).await
    }

    /// `GET url` as NDJSON: the event stream, read a line at a time, or the refusal.
    async fn get_events(&self, url: String) -> Result<Answer<EventLines>, ClientError> {
        let request = self.request(Method::GET, url).header(ACCEPT, NDJSON);
        stream(request.send().await).await
    }

    /// This client for permits of semaphores (`/semaphores/{name}`) instead of locks: acquire,
    /// renew, release and inspect act on them. Their acquire body names `permits`.
    #[must_use]
    pub fn semaphores(mut self) -> Self {
        self.collection = "semaphores";
        self
    }

    /// This client for the multi-lock of `names`: acquire (whose body must also list them in
    /// `names`), renew and release act on the set, `name` arguments are only labels.
    #[must_use]
    pub fn set(mut self, names: &[String]) -> Self {
        let query = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(names.iter().map(|name| ("name", name)))
            .finish();
        self.set = Some(query);
        self
    }

    /// The URL of the lease `name` (`/locks/{name}`, or `/semaphores/{name}`), or of the set
    /// (`/locks?name=…&name=…`).
    pub fn lease_url(&self, name: &str) -> String {
        match &self.set {
            Some(query) => format!("{}/locks?{query}", self.base),
            None => format!("{}/{}/{name}", self.base, self.collection),
        }
    }

    /// `POST /locks/{name}`: 201 (or 200 for an idempotent replay) with the grant. `body` is
    /// an [`AcquireBody`](crate::http::dto::AcquireBody) (or, for semaphores, a `SemaphoreAcquireBody`).
    pub async fn acquire(
        &self,
        name: &str,
        body: &impl serde::Serialize,
        idempotency_key: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<Answer<LockGrantBody>, ClientError> {
        let mut request = self.request(Method::POST, self.lease_url(name)).json(body);
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        answer(with_timeout(request, timeout).send().await).await
    }

    /// `PATCH /locks/{name}` with the token: 200 with the renewal.
    pub async fn renew(
        &self,
        name: &str,
        token: &str,
        body: &RenewBody,
        timeout: Option<Duration>,
    ) -> Result<Answer<LockRenewalBody>, ClientError> {
        let request = self
            .request(Method::PATCH, self.lease_url(name))
            .header("Lock-Token", token)
            .json(body);
        answer(with_timeout(request, timeout).send().await).await
    }

    /// `DELETE /locks/{name}` with the token: 204, or 200 with a body when the lock stays held
    /// (a reentrant hold given back, a release before `min_hold_ms`).
    pub async fn release(
        &self,
        name: &str,
        token: &str,
        timeout: Option<Duration>,
    ) -> Result<Answer<Option<serde_json::Value>>, ClientError> {
        let request = self
            .request(Method::DELETE, self.lease_url(name))
            .header("Lock-Token", token);
        answer(with_timeout(request, timeout).send().await).await
    }

    /// `GET /locks/{name}/events` as NDJSON, read a line at a time; `None` if the gateway
    /// would not stream (no `inspect` scope, an older gateway).
    pub async fn watch(&self, name: &str) -> Option<EventLines> {
        if self.collection != "locks" || self.set.is_some() {
            return None;
        }
        match self.events(name).await.ok()? {
            Answer::Done { body, .. } => Some(body),
            Answer::Refused { .. } => None,
        }
    }

    /// `GET /locks/{name}/events`: the stream of the lock's events, or the refusal.
    pub async fn events(&self, name: &str) -> Result<Answer<EventLines>, ClientError> {
        let url = format!("{}/{}/{name}/events", self.base, self.collection);
        self.get_events(url).await
    }

    /// `GET /locks/events?…` (`[("prefix", "jobs:")]`): the stream of the events of every
    /// lock whose name starts with the prefix, or the refusal.
    pub async fn prefix_events(
        &self,
        query: &[(&str, &str)],
    ) -> Result<Answer<EventLines>, ClientError> {
        let url = format!("{}/{}/events", self.base, self.collection);
        self.get_events(with_query(url, query)).await
    }

    /// `POST /locks/{name}/hold` (a semaphore's, or with [`Client::set`] the set's
    /// `/locks?hold=true`): the hold's event stream (its first event says whether it was
    /// acquired), or the refusal. The hold lasts while the stream is read or kept.
    pub async fn hold(
        &self,
        name: &str,
        body: &impl serde::Serialize,
    ) -> Result<Answer<EventLines>, ClientError> {
        let url = match &self.set {
            Some(query) => format!("{}/locks?hold=true&{query}", self.base),
            None => format!("{}/{}/{name}/hold", self.base, self.collection),
        };
        stream(self.request(Method::POST, url).json(body).send().await).await
    }

    /// `DELETE /locks/{name}?force=true`: an operator's release without the token (204).
    pub async fn force_release(
        &self,
        name: &str,
    ) -> Result<Answer<Option<serde_json::Value>>, ClientError> {
        let url = format!("{}/{}/{name}", self.base, self.collection);
        let url = with_query(url, &[("force", "true")]);
        answer(self.request(Method::DELETE, url).send().await).await
    }

    /// `GET /locks/{name}`: 200 with what anyone may see of a held lock.
    pub async fn inspect(&self, name: &str) -> Result<Answer<LockInfoBody>, ClientError> {
        self.inspect_as(name).await
    }

    /// [`Client::inspect`], read as `T` (a semaphore's `SemaphoreInfoBody`, or JSON).
    pub async fn inspect_as<T: DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Answer<T>, ClientError> {
        self.get(self.lease_url(name)).await
    }

    /// `GET /locks?…` (or `/semaphores?…`): a page of the held leases, read as `T`.
    pub async fn list<T: DeserializeOwned>(
        &self,
        query: &[(&str, &str)],
    ) -> Result<Answer<T>, ClientError> {
        let url = format!("{}/{}", self.base, self.collection);
        self.get(with_query(url, query)).await
    }

    /// `GET /contention`: the names this gateway's requests waited for most (`prefix`,
    /// `limit` in `query`).
    pub async fn contention(
        &self,
        query: &[(&str, &str)],
    ) -> Result<Answer<ContentionBody>, ClientError> {
        self.get(with_query(format!("{}/contention", self.base), query))
            .await
    }

    /// `GET /metrics`: the exposition text.
    pub async fn metrics(&self) -> Result<Answer<String>, ClientError> {
        let sent = self
            .request(Method::GET, format!("{}/metrics", self.base))
            .send()
            .await;
        read(sent, async |response| {
            response.text().await.map_err(transport)
        })
        .await
    }

    /// `GET /readyz`: 200 with the readiness report, or 503 with what is not ready.
    pub async fn readiness(&self) -> Result<Answer<serde_json::Value>, ClientError> {
        self.get(format!("{}/readyz", self.base)).await
    }

    /// `GET /healthz` (or `/readyz` when `ready`): the status.
    pub async fn health(&self, ready: bool, timeout: Duration) -> Result<StatusCode, ClientError> {
        let path = if ready { "/readyz" } else { "/healthz" };
        let sent = self
            .request(Method::GET, format!("{}{path}", self.base))
            .timeout(timeout)
            .send()
            .await;
        sent.map(|response| response.status()).map_err(transport)
    }
}

fn with_timeout(
    request: reqwest::RequestBuilder,
    timeout: Option<Duration>,
) -> reqwest::RequestBuilder {
    match timeout {
        Some(timeout) => request.timeout(timeout),
        None => request,
    }
}

/// `url` with `pairs` as its query, encoded.
fn with_query(url: String, pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return url;
    }
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    format!("{url}?{query}")
}
