//! A lockgate server running in the test process on a real socket (127.0.0.1, port 0), so
//! end-to-end tests speak HTTP to it exactly as curl would.

use std::sync::Arc;
use std::time::Duration;

use lockgate::access::MetricsAuth;
use lockgate::config::{BackendChoice, Config, LogFormat, Secret};
use lockgate::lock::{Limits, LockService};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// With `LOCKGATE_TEST_LOG` set (an `EnvFilter`, e.g. `lockgate=debug`), in-process gateways
/// log to stderr: run the test with `--nocapture` to read why something failed.
pub fn trace_if_asked() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    if let Ok(filter) = std::env::var("LOCKGATE_TEST_LOG") {
        ONCE.call_once(|| {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        });
    }
}

/// The server's defaults, with the given store.
pub fn config(backend: BackendChoice) -> Config {
    Config {
        listen: "127.0.0.1:0".parse().expect("addr"),
        metrics_listen: None,
        backend,
        key_prefix: "lockgate:".into(),
        limits: Limits {
            default_ttl: Duration::from_secs(30),
            min_ttl: Duration::from_millis(100),
            max_ttl: Duration::from_secs(3600),
            max_wait: Duration::from_secs(60),
            max_waiters: 10_000,
            max_hold: None,
            max_watchers: 10_000,
        },
        redis_timeout: Duration::from_secs(1),
        native_commands: lockgate::backend::redis::NativeCommands::Auto,
        deprecated: Vec::new(),
        max_body_bytes: 16384,
        max_header_bytes: 32768,
        wait_pool_size: 4,
        pubsub_linger: Duration::from_secs(30),
        token_secret: None,
        log_format: LogFormat::Text,
        api_keys: None,
        metrics_auth: MetricsAuth::Open,
        request_timeout: Duration::from_secs(10),
        max_concurrent_requests: 20_000,
        header_read_timeout: Duration::from_secs(10),
        shutdown_delay: Duration::ZERO,
        shutdown_grace: Duration::from_secs(20),
        redis_ca: None,
        allow_eviction: false,
        redis_check_interval: Duration::from_millis(200),
        clock_step_hold_back: true,
        data_loss_hold_back: true,
        console: true,
        allowed_hosts: Vec::new(),
        worker_threads: None,
    }
}

/// Defaults with a Redis store at `url`.
pub fn redis_config(url: &str) -> Config {
    config(BackendChoice::Redis {
        url: url.parse::<Secret>().expect("infallible"),
    })
}

#[derive(Debug)]
pub struct Gateway {
    base: String,
    pub http: reqwest::Client,
    /// The service behind the HTTP API, for observing it (waiting requests) and shutting down.
    pub service: Arc<LockService>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Gateway {
    /// A gateway on the memory backend (`--dev`) with the test defaults.
    pub async fn dev() -> Self {
        Self::start(config(BackendChoice::Memory)).await
    }

    pub async fn start(config: Config) -> Self {
        trace_if_asked();
        let lockgate::app::Assembled {
            service,
            guards,
            router: app,
            serve_options,
            ..
        } = lockgate::app::assemble(&config).expect("valid test config");
        guards.watch();
        let listener = TcpListener::bind(config.listen).await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let shutdown = async {
                let _ = rx.await;
            };
            lockgate::app::serve(listener, app, shutdown, serve_options).await;
        });
        let http = super::http_client();
        Self {
            base,
            http,
            service,
            shutdown: Some(tx),
            task,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The project's own client of this gateway, over the tests' HTTP client (see
    /// [`super::answers`]).
    pub fn client(&self) -> lockgate::client::Client {
        lockgate::client::Client::with_http(self.http.clone(), &self.base)
    }

    /// [`Gateway::client`] sending `api_key` as a bearer key.
    pub fn client_as(&self, api_key: &str) -> lockgate::client::Client {
        let bearer = format!("Bearer {api_key}");
        self.client()
            .header("authorization", &bearer)
            .expect("a key that is a header value")
    }

    /// The lock calls through the project's own client, answers checked with
    /// [`super::answers::Answered`].
    pub fn locks(&self) -> super::answers::Locks {
        super::answers::Locks(self.client())
    }

    /// Round trips to Redis this gateway's requests have made so far, scripts and native
    /// commands (from its metrics); the guards' background calls (`call="guard"`) are not
    /// counted: they grow with time, not with requests.
    pub async fn redis_round_trips(&self) -> f64 {
        let text = self.metrics_text().await;
        ["script", "command"]
            .iter()
            .filter_map(|call| {
                let series = format!("lockgate_redis_roundtrip_seconds_count{{call=\"{call}\"}} ");
                text.lines()
                    .find_map(|line| line.strip_prefix(series.as_str()))
                    .and_then(|n| n.parse::<f64>().ok())
            })
            .sum()
    }

    /// The `/metrics` exposition as text.
    pub async fn metrics_text(&self) -> String {
        self.http
            .get(self.url("/metrics"))
            .send()
            .await
            .expect("scrape")
            .text()
            .await
            .expect("metrics text")
    }

    /// `GET /locks/{name}`.
    pub async fn inspect(&self, name: &str) -> reqwest::Response {
        self.http
            .get(self.url(&format!("/locks/{name}")))
            .send()
            .await
            .expect("inspect request")
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.abort();
    }
}

fn secrets(urls: &[String]) -> Vec<Secret> {
    urls.iter()
        .map(|u| u.parse::<Secret>().expect("infallible"))
        .collect()
}

/// Defaults with Redis Sentinel.
pub fn sentinel_config(sentinels: &[String], master: &str) -> Config {
    config(BackendChoice::Sentinel {
        sentinels: secrets(sentinels),
        master: master.into(),
        username: None,
        password: None,
    })
}

/// Defaults with a Redis Cluster.
pub fn cluster_config(seeds: &[String]) -> Config {
    config(BackendChoice::Cluster {
        seeds: secrets(seeds),
    })
}

/// Three Redis nodes and a gateway keeping Redlock over them (200 ms per node). The nodes
/// are returned with it: they live as long as the test keeps them.
pub async fn redlock_trio() -> (Gateway, [super::redis::RedisServer; 3]) {
    use super::redis::RedisServer;
    let nodes = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let gw = Gateway::start(redlock_config(&urls, Duration::from_millis(200))).await;
    (gw, nodes)
}

/// Defaults with Redlock over `nodes`.
pub fn redlock_config(nodes: &[String], node_timeout: Duration) -> Config {
    config(BackendChoice::Redlock {
        nodes: secrets(nodes),
        node_timeout,
    })
}
