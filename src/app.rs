//! The composition root: configuration → backend → lock service → router → server.
//!
//! [`build_service`] and [`crate::http::router`] assemble the application; [`serve`] runs it
//! on an already bound listener until a shutdown future resolves, so tests can run it on port
//! 0; [`run`] is what the binary does.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::backend::data_loss::{DataLossOptions, LongestLease};
use crate::backend::guards::{self, GuardOptions, HoldBack};
use crate::backend::memory::MemoryBackend;
use crate::backend::redis::{RedisBackend, RedisOptions, RedisTarget};
use crate::backend::redlock::RedlockBackend;
use crate::backend::{Backend, BackendError};
use crate::config::{BackendChoice, Config, Secret};
use crate::http::gate::GateOptions;
use crate::http::server::{self, ServeOptions};
use crate::http::{App, HttpOptions};
use crate::lock::{LockService, TokenSecret};
use crate::telemetry::Metrics;
use crate::telemetry::trace::Tracing;

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

/// What an embedder puts in place of a default, beside the configuration (flags cannot say
/// it): how Redis connections travel. The deterministic simulation is the one embedder that
/// sets anything here.
#[derive(Debug, Clone, Default)]
pub struct Wiring {
    /// The transport of the connections to every `redis://` node (a standalone server, each
    /// Redlock node, the Sentinels and the master they name): redis-rs's own TCP when `None`.
    pub redis_transport: Option<Arc<dyn crate::backend::redis::transport::Transport>>,
}

/// Builds the lock service the configuration describes. Connecting to Redis happens on first
/// use, so this succeeds while Redis is still starting; readiness tells when it is reachable.
pub fn build_service(
    config: &Config,
    metrics: &Arc<Metrics>,
    reconnected: &Arc<Notify>,
    wiring: &Wiring,
) -> Result<LockService, StartupError> {
    // Shared by the service, which counts every lease, and each node's data-loss guard, which
    // writes the longest into the node's marker.
    let longest = Arc::new(LongestLease::default());
    let redis = |target: RedisTarget, timeout: Duration| {
        crate::tls::install_crypto_provider();
        let transport = match &target {
            RedisTarget::Url(_) | RedisTarget::Sentinel { .. } => wiring.redis_transport.clone(),
            RedisTarget::Cluster { .. } => None,
        };
        let options = RedisOptions {
            target,
            key_prefix: config.key_prefix.clone(),
            timeout,
            wait_pool_size: config.wait_pool_size,
            pubsub_linger: config.pubsub_linger,
            native_commands: config.native_commands,
            ca_certificates: config.redis_ca.clone(),
            metrics: metrics.clone(),
            reconnected: reconnected.clone(),
            data_loss: Some(DataLossOptions {
                hold_back: config.data_loss_hold_back,
                max_ttl: config.limits.max_ttl,
                longest: longest.clone(),
                metrics: metrics.clone(),
            }),
            transport,
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
        BackendChoice::Memory => Backend::Memory(Box::new(MemoryBackend::new())),
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
    let service = LockService::new(backend, config.limits, secret)
        .with_longest_lease(longest)
        .with_metrics(metrics.clone());
    Ok(crate::primitive::shared::register(service))
}

/// A server assembled from its configuration, not serving yet.
#[derive(Debug)]
pub struct Assembled {
    /// The lock service, for shutting down waiting requests and hold streams.
    pub service: Arc<LockService>,
    /// The guards of the store, to be started once the server may serve (see [`Guards::watch`]).
    pub guards: Guards,
    pub router: App,
    /// `GET /metrics` alone, for `--metrics-listen`.
    pub metrics_router: axum::Router,
    /// The span exporter, when traces are asked for: flushed at exit.
    pub traces: Option<Arc<Tracing>>,
    pub serve_options: ServeOptions,
}

/// Assembles the service, the router and the serving options a configuration describes.
pub fn assemble(config: &Config) -> Result<Assembled, StartupError> {
    assemble_with(config, &Wiring::default())
}

/// [`assemble`], with an embedder's [`Wiring`].
pub fn assemble_with(config: &Config, wiring: &Wiring) -> Result<Assembled, StartupError> {
    crate::primitive::build_redis_scripts();
    let metrics = Arc::new(Metrics::new(&crate::http::lease_kinds()));
    let reconnected = Arc::new(Notify::new());
    let service = Arc::new(build_service(config, &metrics, &reconnected, wiring)?);
    let traces = Tracing::from_env().map_err(StartupError::Config)?;
    let guards = Guards {
        backend: service.backend().clone(),
        options: guard_options(config),
        reconnected,
        hold_back: service.hold_back().clone(),
        metrics: metrics.clone(),
    };
    let options = HttpOptions {
        max_body_bytes: config.max_body_bytes,
        console: config.console,
        gate: GateOptions {
            keys: config.api_keys.clone(),
            hosts: crate::http::gate::HostPolicy::new(&config.allowed_hosts),
            metrics_auth: config.metrics_auth,
            max_concurrent_requests: config.max_concurrent_requests,
            request_timeout: config.request_timeout,
            max_wait: config.limits.max_wait,
            max_header_bytes: config.max_header_bytes,
            tracing: traces.clone(),
        },
    };
    let (router, metrics_router) = crate::http::routers(service.clone(), options, metrics);
    Ok(Assembled {
        service,
        guards,
        router,
        metrics_router,
        traces,
        serve_options: ServeOptions {
            header_read_timeout: config.header_read_timeout,
            grace: config.shutdown_grace,
            max_header_bytes: config.max_header_bytes,
        },
    })
}

/// The guards against a store losing locks silently (see `backend::guards`).
#[derive(Debug)]
pub struct Guards {
    backend: Arc<Backend>,
    options: GuardOptions,
    reconnected: Arc<Notify>,
    hold_back: Arc<HoldBack>,
    metrics: Arc<Metrics>,
}

impl Guards {
    /// Refuses a store that can lose locks without an error: `Err` with the one line to print
    /// (exit 64). A store that does not answer within a few timeouts passes: it is watched
    /// once it answers.
    pub async fn refuse_unsafe_store(&self, timeout: Duration) -> Result<(), StartupError> {
        let look = guards::refuse_evicting_nodes(&self.backend, self.options);
        match tokio::time::timeout(timeout * 3 + Duration::from_secs(1), look).await {
            Ok(Err(refusal)) => Err(StartupError::Config(refusal)),
            _ => Ok(()),
        }
    }

    /// Starts watching the store while it serves.
    pub fn watch(self) {
        guards::watch(
            &self.backend,
            self.options,
            self.reconnected,
            self.hold_back,
            self.metrics,
        );
    }
}

fn guard_options(config: &Config) -> GuardOptions {
    GuardOptions {
        allow_eviction: config.allow_eviction,
        interval: config.redis_check_interval,
        hold_back: config.clock_step_hold_back,
        max_ttl: config.limits.max_ttl,
    }
}

/// Builds the application for a configuration.
pub fn app(config: &Config) -> Result<App, StartupError> {
    Ok(assemble(config)?.router)
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets in-flight requests finish
/// (within `options.grace`).
pub async fn serve(
    listener: TcpListener,
    app: App,
    shutdown: impl Future<Output = ()> + Send + 'static,
    options: ServeOptions,
) {
    server::serve(listener, app, shutdown, options).await;
}

/// Runs the server described by `config` until SIGTERM or SIGINT, then shuts down gracefully:
/// readiness answers 503 at once; requests are still served for `--shutdown-delay` (so load
/// balancers notice); then the listener closes, waiting requests answer 503 `shutting-down`,
/// hold streams release their locks, and in-flight requests have `--shutdown-grace` to finish.
///
/// `start_logging` is called once the store has passed the startup guards, so that a refused
/// start prints its one line and nothing else; what it returns is kept while serving.
pub async fn run<L>(config: Config, start_logging: impl FnOnce() -> L) -> Result<(), StartupError> {
    let Assembled {
        service,
        guards,
        router,
        metrics_router,
        traces,
        serve_options,
    } = assemble(&config)?;
    // A store that can lose locks without an error is refused before anything is served.
    guards.refuse_unsafe_store(config.redis_timeout).await?;
    let _logging = start_logging();
    guards.watch();
    // What the startup guards connected to, now that it can be logged.
    service.backend().log_connections();
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| StartupError::Bind {
            addr: config.listen,
            source,
        })?;
    if let Some(addr) = config.metrics_listen {
        let metrics_listener = TcpListener::bind(addr)
            .await
            .map_err(|source| StartupError::Bind { addr, source })?;
        tracing::info!(listen = %addr, "serving /metrics alone");
        // For as long as the process runs: scrapes may go on while the gateway drains.
        tokio::spawn(async move {
            if let Err(err) = axum::serve(metrics_listener, metrics_router).await {
                tracing::error!(error = %err, "the metrics listener stopped");
            }
        });
    }
    let backend = match config.backend {
        BackendChoice::Memory => "memory (--dev: locks live in this process only)",
        BackendChoice::Redis { .. } => "redis",
        BackendChoice::Sentinel { .. } => "redis sentinel",
        BackendChoice::Cluster { .. } => "redis cluster",
        BackendChoice::Redlock { .. } => "redlock",
    };
    let auth = if config.api_keys.is_some() {
        "api keys"
    } else {
        "none"
    };
    tracing::info!(
        version = crate::build_info::VERSION,
        revision = crate::build_info::REVISION,
        listen = %config.listen,
        backend,
        auth,
        "lockgate serving"
    );
    for setting in &config.deprecated {
        tracing::warn!(setting, "this setting is no longer used and is ignored");
    }
    // One line on whether the store answers, so that a wrong URL shows at startup rather than
    // as the first failed request. The gateway serves either way (it keeps reconnecting).
    let probe = service.clone();
    tokio::spawn(async move {
        match probe.ready().await {
            Ok(()) => tracing::info!(backend, "backend reachable"),
            Err(err) if err.is_misconfigured() => tracing::error!(
                backend,
                error = %err,
                "the backend refuses this gateway's settings; serving anyway: lock requests answer 503 until the settings are fixed"
            ),
            Err(err) => tracing::warn!(
                backend,
                error = %err,
                "cannot reach the backend yet; serving anyway: lock requests answer 503 backend-unavailable until it answers"
            ),
        }
    });
    let delay = config.shutdown_delay;
    let shutdown = async move {
        shutdown_signal().await;
        service.begin_drain();
        if !delay.is_zero() {
            tracing::info!(delay = ?delay, "not ready; still serving before closing the listener");
            tokio::time::sleep(delay).await;
        }
        service.shut_down();
    };
    serve(listener, router, shutdown, serve_options).await;
    if let Some(traces) = traces {
        // The batch processor's thread sends what is left; blocking, so off the runtime.
        let _ = tokio::task::spawn_blocking(move || traces.shutdown()).await;
    }
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
