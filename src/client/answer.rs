//! What the gateway answered, read off the wire: a success's body, a refusal's problem
//! document with its `Retry-After`, an event stream read a line at a time; or why no answer
//! could be read. [`super::Client`] sends; this file reads.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::RETRY_AFTER;
use serde::de::DeserializeOwned;

use crate::http::problem::Problem;

/// No answer could be read.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The gateway could not be reached.
    #[error("cannot reach the gateway: {0}")]
    Connect(String),
    /// The request was sent and no (complete) answer came back.
    #[error("no answer from the gateway: {0}")]
    NoAnswer(String),
    /// The answer, of `status`, was not what the API describes (`what` says how, starting
    /// with its own separator).
    #[error("unexpected answer from the gateway: {status}{what}")]
    Unexpected { status: StatusCode, what: String },
    /// The gateway's address is not an `http://` or `https://` URL.
    #[error("the gateway must be an http:// or https:// URL, such as http://{0}")]
    GatewayUrl(String),
    /// The client could not be set up (a bad API key).
    #[error("{0}")]
    Setup(String),
}

/// What the gateway answered.
#[derive(Debug)]
pub enum Answer<T> {
    /// 2xx, with its status and body.
    Done { status: StatusCode, body: T },
    /// A problem document.
    Refused {
        status: StatusCode,
        problem: Box<Problem>,
        retry_after: Option<Duration>,
    },
}

impl<T> Answer<T> {
    /// The status the gateway answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Done { status, .. } | Self::Refused { status, .. } => *status,
        }
    }
}

/// The events of one lock, as NDJSON lines.
#[derive(Debug)]
pub struct EventLines {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl EventLines {
    /// The stream's media type, as the gateway said it.
    pub fn content_type(&self) -> Option<&str> {
        let value = self.response.headers().get(reqwest::header::CONTENT_TYPE)?;
        value.to_str().ok()
    }

    /// The next event; `None` when the stream ends or breaks.
    pub async fn next(&mut self) -> Option<serde_json::Value> {
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                return serde_json::from_slice(&line).ok();
            }
            let chunk = self.response.chunk().await.ok()??;
            self.buffer.extend_from_slice(&chunk);
        }
    }
}

pub(super) fn transport(err: reqwest::Error) -> ClientError {
    if err.is_connect() {
        ClientError::Connect(with_causes(&err))
    } else {
        ClientError::NoAnswer(with_causes(&err))
    }
}

/// What went wrong, from the causes beneath reqwest's error (`tcp connect error: Connection
/// refused`, a DNS failure, `operation timed out`), which reqwest's own message leaves out.
/// Its own message (`error sending request for url (…)`) and hyper's wrapper (`client error
/// (Connect)`) are left out: they say nothing more, and the callers name the URL themselves.
fn with_causes(err: &reqwest::Error) -> String {
    let mut causes: Vec<String> = Vec::new();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let text = cause.to_string();
        let wrapper = text.starts_with("client error (");
        if !wrapper && !causes.iter().any(|said| said.contains(&text)) {
            causes.push(text);
        }
        source = cause.source();
    }
    if causes.is_empty() {
        // reqwest's message alone, without the URL.
        let text = err.to_string();
        match err.url() {
            Some(url) => text.replace(&format!(" for url ({url})"), ""),
            None => text,
        }
    } else {
        causes.join(": ")
    }
}

/// The media type of event streams.
pub(super) const NDJSON: &str = "application/x-ndjson";

/// A stream of events on success, or the problem document.
pub(super) async fn stream(
    sent: reqwest::Result<reqwest::Response>,
) -> Result<Answer<EventLines>, ClientError> {
    read(sent, async |response| {
        let buffer = Vec::new();
        Ok(EventLines { response, buffer })
    })
    .await
}

/// Reads a success body of type `T` (an empty body for `()`), or the problem document.
pub(super) async fn answer<T: DeserializeOwned>(
    sent: reqwest::Result<reqwest::Response>,
) -> Result<Answer<T>, ClientError> {
    read(sent, async |response| {
        let status = response.status();
        let bytes = response.bytes().await.map_err(transport)?;
        let text: &[u8] = if bytes.is_empty() { b"null" } else { &bytes };
        serde_json::from_slice(text).map_err(|e| ClientError::Unexpected {
            status,
            what: format!(": {e}"),
        })
    })
    .await
}

/// A success's body as `body` reads it, or the refusal's problem document.
pub(super) async fn read<T>(
    sent: reqwest::Result<reqwest::Response>,
    body: impl AsyncFnOnce(reqwest::Response) -> Result<T, ClientError>,
) -> Result<Answer<T>, ClientError> {
    let response = sent.map_err(transport)?;
    let status = response.status();
    if !status.is_success() {
        return refusal(response).await;
    }
    let body = body(response).await?;
    Ok(Answer::Done { status, body })
}

/// Reads the problem document of a refusal, with its `Retry-After`.
async fn refusal<T>(response: reqwest::Response) -> Result<Answer<T>, ClientError> {
    let status = response.status();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_secs);
    let bytes = response.bytes().await.map_err(transport)?;
    let problem =
        serde_json::from_slice::<Problem>(&bytes).map_err(|e| ClientError::Unexpected {
            status,
            what: format!(" without a problem document: {e}"),
        })?;
    Ok(Answer::Refused {
        status,
        problem: Box::new(problem),
        retry_after,
    })
}
