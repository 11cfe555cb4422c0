//! lockgate: an HTTP/REST gateway to distributed locks kept in Redis.
//!
//! Programs that cannot or should not embed a Redis client take, renew, release and inspect
//! locks over HTTP; lockgate turns each call into one atomic Lua script on Redis and answers
//! with a token, a fence and the validity left.
//!
//! Modules, from the outside in (dependencies point one way: `http → lock → backend`):
//!
//! * [`config`]: every flag and environment variable, validated once.
//! * [`http`]: the axum router, extractors, JSON bodies, problem documents, OpenAPI.
//! * [`lock`]: the domain: names, tokens, validity, request bounds, errors, [`lock::LockService`].
//! * [`backend`]: where locks are kept: Redis, or in memory for `--dev`.
//! * [`runner`]: `lockgate run`, a client of the API that holds a lock while a command runs.
//! * [`server`]: the HTTP/1.1 serving loop with graceful shutdown.
//!
//! [`build_service`] and [`http::router`] assemble the application; [`serve`] runs it on an
//! already bound listener until a shutdown future resolves, so tests can run it on port 0.

pub mod backend;
pub mod config;
pub mod http;
pub mod lock;
pub mod runner;
pub mod server;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::backend::memory::MemoryBackend;
use crate::backend::redis::{RedisBackend, RedisOptions, RedisTarget};
use crate::backend::redlock::RedlockBackend;
use crate::backend::{Backend, BackendError};
use crate::config::{BackendChoice, Config, Secret};
use crate::http::HttpOptions;
use crate::lock::{LockService, TokenSecret};

/// Why the server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// The configuration cannot work (exit code 64).
    #[error("{0}")]
    Config(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("the OS random generator failed: {0}")]
    Random(getrandom::Error),
}

/// Builds the lock service the configuration describes. Connecting to Redis happens on first
/// use, so this succeeds while Redis is still starting; readiness tells when it is reachable.
pub fn build_service(config: &Config) -> Result<LockService, StartupError> {
    let redis = |target: RedisTarget, timeout: Duration| {
        install_crypto_provider();
        let options = RedisOptions {
            target,
            key_prefix: config.key_prefix.clone(),
            timeout,
            wait_pool_size: config.wait_pool_size,
            fence_retention: config.fence_retention,
        };
        RedisBackend::new(options).map_err(|e| match e {
            BackendError::Config(message) => StartupError::Config(message),
            other => StartupError::Config(other.to_string()),
        })
    };
    let exposed = |urls: &[Secret]| {
        urls.iter()
            .map(|u| u.expose().to_owned())
            .collect::<Vec<_>>()
    };
    let backend = match &config.backend {
        BackendChoice::Memory => Backend::Memory(MemoryBackend::new(config.fence_retention)),
        BackendChoice::Redis { url } => Backend::Redis(Box::new(redis(
            RedisTarget::Url(url.expose().to_owned()),
            config.redis_timeout,
        )?)),
        BackendChoice::Sentinel {
            sentinels,
            master,
            username,
            password,
        } => {
            let target = RedisTarget::Sentinel {
                sentinels: exposed(sentinels),
                master: master.clone(),
                username: username.clone(),
                password: password.as_ref().map(|p| p.expose().to_owned()),
            };
            Backend::Redis(Box::new(redis(target, config.redis_timeout)?))
        }
        BackendChoice::Cluster { seeds } => Backend::Redis(Box::new(redis(
            RedisTarget::Cluster {
                seeds: exposed(seeds),
            },
            config.redis_timeout,
        )?)),
        BackendChoice::Redlock {
            nodes,
            node_timeout,
        } => {
            // Each node is bounded by the per-node timeout: a node that is down or frozen costs
            // at most that, never the whole request.
            let nodes = exposed(nodes)
                .into_iter()
                .map(|url| redis(RedisTarget::Url(url), *node_timeout))
                .collect::<Result<Vec<_>, _>>()?;
            Backend::Redlock(Box::new(RedlockBackend::new(nodes)))
        }
    };
    let secret = match &config.token_secret {
        Some(secret) => TokenSecret::from_configured(secret.expose())
            .ok_or_else(|| StartupError::Config("--token-secret is too short".into()))?,
        None => TokenSecret::random().map_err(StartupError::Random)?,
    };
    Ok(LockService::new(backend, config.limits, secret))
}

/// rustls needs a process-wide crypto provider (for `rediss://`, and for `lockgate run`
/// against an `https://` gateway); ring is compiled in.
pub fn install_crypto_provider() {
    // Fails only when one is installed already, which is just as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Builds the router for a configuration.
pub fn app(config: &Config) -> Result<axum::Router, StartupError> {
    let service = Arc::new(build_service(config)?);
    Ok(http::router(
        service,
        HttpOptions {
            max_body_bytes: config.max_body_bytes,
        },
    ))
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets in-flight requests finish.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    server::serve(listener, app, shutdown).await;
}

/// Runs the server described by `config` until SIGTERM or SIGINT.
pub async fn run(config: Config) -> Result<(), StartupError> {
    let service = Arc::new(build_service(&config)?);
    let app = http::router(
        service.clone(),
        HttpOptions {
            max_body_bytes: config.max_body_bytes,
        },
    );
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| StartupError::Bind {
            addr: config.listen,
            source,
        })?;
    let backend = match config.backend {
        BackendChoice::Memory => "memory (--dev: locks live in this process only)",
        BackendChoice::Redis { .. } => "redis",
        BackendChoice::Sentinel { .. } => "redis sentinel",
        BackendChoice::Cluster { .. } => "redis cluster",
        BackendChoice::Redlock { .. } => "redlock",
    };
    tracing::info!(listen = %config.listen, backend, "lockgate serving");
    // Waiting requests and hold streams end (releasing their locks) before the server waits
    // for in-flight requests to finish.
    let shutdown = async move {
        shutdown_signal().await;
        service.shut_down();
    };
    serve(listener, app, shutdown).await;
    tracing::info!("lockgate stopped");
    Ok(())
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutdown signal received");
}
