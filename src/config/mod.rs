//! All flags and environment variables, in one place.
//!
//! Every flag has a `LOCKGATE_*` environment variable. [`flags::Cli`] is what clap parses;
//! [`Config::from_args`] (in [`validate`]) validates it once into a [`Config`] that the rest of
//! the program receives. Nothing else reads the environment. Durations are human (`30s`,
//! `100ms`, `7d`) on the command line and `Duration` inside. [`Secret`] (in [`secrets`]) holds
//! what must never be printed.
//!
//! The defaults suit a sidecar: listen on loopback only, 30 s leases.

mod client_flags;
mod env_names;
mod flag_values;
pub mod flags;
pub mod secrets;
pub mod validate;

use std::net::SocketAddr;
use std::time::Duration;

pub use self::env_names::name_variables;
pub use self::flags::{Cli, Command, HealthcheckArgs, LogFormat, RunArgs, ServeArgs};
pub use self::secrets::Secret;
pub use self::validate::{ConfigError, default_limits};
use crate::access::{ApiKeys, MetricsAuth};
use crate::backend::redis::NativeCommands;
use crate::lock::Limits;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7380";
pub const DEFAULT_GATEWAY: &str = "http://127.0.0.1:7380";
pub const DEFAULT_KEY_PREFIX: &str = "lockgate:";
pub const DEFAULT_TTL: &str = "30s";
pub const DEFAULT_MIN_TTL: &str = "100ms";
pub const DEFAULT_MAX_TTL: &str = "1h";
pub const DEFAULT_MAX_WAIT: &str = "60s";
pub const DEFAULT_REDIS_TIMEOUT: &str = "1s";
pub const DEFAULT_REDIS_CHECK_INTERVAL: &str = "10s";
pub const DEFAULT_MAX_BODY_BYTES: &str = "16384";
pub const DEFAULT_MAX_HEADER_BYTES: &str = "32768";
pub const DEFAULT_WAIT_POOL_SIZE: &str = "4";
pub const DEFAULT_PUBSUB_LINGER: &str = "30s";
pub const DEFAULT_REDLOCK_NODE_TIMEOUT: &str = "50ms";
pub const DEFAULT_MAX_WAITERS: usize = 10_000;
pub const DEFAULT_MAX_WATCHERS: usize = 10_000;
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 20_000;
pub const DEFAULT_REQUEST_TIMEOUT: &str = "10s";
pub const DEFAULT_HEADER_READ_TIMEOUT: &str = "10s";
pub const DEFAULT_SHUTDOWN_GRACE: &str = "20s";

/// Longest key prefix.
const MAX_KEY_PREFIX_LEN: usize = 64;

/// Where locks are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendChoice {
    Memory,
    Redis {
        url: Secret,
    },
    Sentinel {
        sentinels: Vec<Secret>,
        master: String,
        username: Option<String>,
        password: Option<Secret>,
    },
    Cluster {
        seeds: Vec<Secret>,
    },
    Redlock {
        nodes: Vec<Secret>,
        node_timeout: Duration,
    },
}

/// The validated configuration of the server.

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// A second address serving `GET /metrics` only (`--metrics-listen`).
    pub metrics_listen: Option<SocketAddr>,
    pub backend: BackendChoice,
    pub key_prefix: String,
    pub limits: Limits,
    pub redis_timeout: Duration,
    pub native_commands: NativeCommands,
    /// Settings that are accepted but no longer used, for a warning at startup.
    pub deprecated: Vec<&'static str>,
    pub max_body_bytes: usize,
    /// Largest accepted request head (request line and headers), in bytes.
    pub max_header_bytes: usize,
    pub wait_pool_size: usize,
    /// How long the pub/sub connection outlives the last waiter or watcher.
    pub pubsub_linger: Duration,
    pub token_secret: Option<Secret>,
    pub log_format: LogFormat,
    pub api_keys: Option<ApiKeys>,
    pub metrics_auth: MetricsAuth,
    pub request_timeout: Duration,
    pub max_concurrent_requests: usize,
    pub header_read_timeout: Duration,
    pub shutdown_delay: Duration,
    pub shutdown_grace: Duration,
    /// PEM certificates of the CAs trusted for `rediss://`.
    pub redis_ca: Option<Vec<u8>>,
    /// Serve against a Redis that may evict lock keys (see `backend::guards`).
    pub allow_eviction: bool,
    /// How often the guards look at every Redis node again.
    pub redis_check_interval: Duration,
    /// Hold grants back after a Redis node's clock stepped forward.
    pub clock_step_hold_back: bool,
    /// Hold grants back on a Redis node that forgot its data.
    pub data_loss_hold_back: bool,
    /// Serve the operator's console at `/ui`.
    pub console: bool,
    /// Without API keys: the host names answered besides IP addresses and localhost.
    pub allowed_hosts: Vec<String>,
    /// Threads that serve requests; `None`: one per CPU the process may use.
    pub worker_threads: Option<usize>,
}
