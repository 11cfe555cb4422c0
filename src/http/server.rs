//! Serving the application over HTTP/1.1 on a bound TCP listener, with graceful shutdown.
//!
//! This is `axum::serve` made leaner for a service whose clients hold connections open for a
//! long time (waiting requests, hold streams, idle keep-alive sidecar clients): each
//! connection is served by hyper's HTTP/1 connection directly rather than through hyper-util's
//! protocol-sniffing `auto` builder. Measured with 10,000 pending requests, this halves the
//! memory each open connection costs (see bench/README.md). HTTP/2 is not offered; lock
//! clients gain nothing from it.
//!
//! Other choices: TCP_NODELAY on every connection (lock requests are small and latency
//! bound); a header read timeout, so a client that trickles a request head cannot hold a
//! connection forever; and accept errors handled as axum does (a full file table pauses
//! accepting for a second instead of spinning).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::time::Duration;

use axum::http::Request;
use axum::response::Response;
use futures_util::FutureExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::Service;

use super::parse_errors::ProblemIo;

/// How a server serves.
#[derive(Debug, Clone, Copy)]
pub struct ServeOptions {
    /// How long a client may take to send a complete request head.
    pub header_read_timeout: Duration,
    /// After shutdown begins, how long open connections have to finish their requests.
    pub grace: Duration,
    /// The gate answers 431 problem+json past this; the HTTP layer itself refuses (a bare
    /// 431, no body) past [`HEAD_HARD_LIMIT_FACTOR`] times it, which bounds the memory one
    /// connection's head can take.
    pub max_header_bytes: usize,
}

/// How far past `--max-header-bytes` a head may go before the HTTP layer, rather than the
/// gate, refuses it.
pub const HEAD_HARD_LIMIT_FACTOR: usize = 4;

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            grace: Duration::from_secs(20),
            max_header_bytes: 32768,
        }
    }
}

/// Serves `app` (the gateway, or the metrics alone) on `listener` until `shutdown` resolves,
/// then stops accepting and waits up to the grace period for open connections to finish their
/// in-flight requests.
pub async fn serve<S>(
    listener: TcpListener,
    app: S,
    shutdown: impl Future<Output = ()>,
    options: ServeOptions,
) where
    S: Service<Request<Incoming>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        .max_header_size(options.max_header_bytes * HEAD_HARD_LIMIT_FACTOR)
        // hyper's minimum; the read buffer only grows this far for a head, as bodies stream.
        .max_buf_size((options.max_header_bytes * HEAD_HARD_LIMIT_FACTOR).max(8192));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    pause_after_accept_error(err).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Best effort: a socket that refuses it still works, just with Nagle's delays.
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let io = TokioIo::new(ProblemIo::new(stream));
        let connection = graceful.watch(builder.serve_connection(io, service));
        // `map`, not an `async move` block awaiting the connection: such a block keeps a second
        // copy of the connection future (800 bytes) in every task for its whole life.
        tokio::spawn(connection.map(log_connection_end));
    }
    drop(listener);
    if tokio::time::timeout(options.grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(grace = ?options.grace, "requests still in flight after the grace period; closing them");
    }
}

fn log_connection_end(result: Result<(), hyper::Error>) {
    if let Err(err) = result {
        tracing::debug!(error = %err, "connection ended with an error");
    }
}

/// A connection that failed while being accepted concerns only its client. Anything else
/// (typically EMFILE, out of file descriptors) would fail again at once: wait before retrying.
async fn pause_after_accept_error(err: io::Error) {
    if matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %err, "cannot accept connections; retrying in 1 s");
    tokio::time::sleep(Duration::from_secs(1)).await;
}
