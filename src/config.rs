//! All flags and environment variables, in one place.
//!
//! Every flag has a `LOCKGATE_*` environment variable. [`Cli`] is what clap parses;
//! [`Config::from_args`] validates it once into a [`Config`] that the rest of the program
//! receives. Nothing else reads the environment. Durations are human (`30s`, `100ms`, `7d`)
//! on the command line and `Duration` inside.
//!
//! The defaults suit a sidecar: listen on loopback only, 30 s leases.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use clap::builder::BoolishValueParser;
use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use crate::auth::ApiKeys;
use crate::backend::redis::NativeCommands;
use crate::lock::Limits;
use crate::lock::token::MIN_SECRET_LEN;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7380";
pub const DEFAULT_GATEWAY: &str = "http://127.0.0.1:7380";
pub const DEFAULT_KEY_PREFIX: &str = "lockgate:";
pub const DEFAULT_TTL: &str = "30s";
pub const DEFAULT_MIN_TTL: &str = "100ms";
pub const DEFAULT_MAX_TTL: &str = "1h";
pub const DEFAULT_MAX_WAIT: &str = "60s";
pub const DEFAULT_REDIS_TIMEOUT: &str = "1s";
pub const DEFAULT_MAX_BODY_BYTES: &str = "16384";
pub const DEFAULT_WAIT_POOL_SIZE: &str = "4";
pub const DEFAULT_REDLOCK_NODE_TIMEOUT: &str = "50ms";
pub const DEFAULT_MAX_WAITERS: usize = 10_000;
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 20_000;
pub const DEFAULT_REQUEST_TIMEOUT: &str = "10s";
pub const DEFAULT_HEADER_READ_TIMEOUT: &str = "10s";
pub const DEFAULT_SHUTDOWN_GRACE: &str = "20s";

/// Longest key prefix.
const MAX_KEY_PREFIX_LEN: usize = 64;

#[derive(Debug, Parser)]
#[command(
    name = "lockgate",
    version,
    about = "An HTTP gateway to distributed locks kept in Redis.",
    long_about = "An HTTP gateway to distributed locks kept in Redis.\n\n\
        Without a subcommand, serves the API. Give --redis-url (or LOCKGATE_REDIS_URL), \
        or --dev for an in-process store that needs no Redis.",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the OpenAPI document of the API and exit.
    Openapi,
    /// Run a command while holding a lock, like flock(1) across machines.
    ///
    /// Acquires NAME through a gateway, renews it every third of --ttl while COMMAND runs,
    /// releases it when COMMAND exits and exits with COMMAND's status. COMMAND sees
    /// LOCKGATE_LOCK, LOCKGATE_FENCE and LOCKGATE_TOKEN in its environment.
    ///
    /// Exit status: COMMAND's own (128+N if it died of signal N); 75 if the lock was not
    /// acquired within --wait; 76 if the lock was lost while COMMAND ran (COMMAND was sent
    /// SIGTERM, then SIGKILL after --kill-after); 69 if the gateway could not be reached or
    /// refused the request; 64 for bad arguments; 126/127 if COMMAND could not be started.
    Run(RunArgs),
    /// Check a gateway's /healthz (or /readyz with --ready): exit 0 when it answers 200, 1
    /// otherwise. For container health checks and exec probes where there is no curl.
    Healthcheck(HealthcheckArgs),
}

/// Flags of `lockgate healthcheck`.
#[derive(Debug, Args)]
pub struct HealthcheckArgs {
    /// Base URL of the gateway.
    #[arg(long, env = "LOCKGATE_GATEWAY", default_value = DEFAULT_GATEWAY)]
    pub gateway: String,

    /// Check readiness (/readyz: the backend answers) instead of liveness (/healthz).
    #[arg(long)]
    pub ready: bool,

    /// How long to wait for the answer.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

/// Flags of `lockgate run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Base URL of the gateway.
    #[arg(long, env = "LOCKGATE_GATEWAY", default_value = DEFAULT_GATEWAY)]
    pub gateway: String,

    /// Lease length, renewed every third of it while the command runs.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub ttl: Duration,

    /// How long to wait for the lock; 0 tries once. Without it, waits as long as it takes.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub wait: Option<Duration>,

    /// API key for a gateway that requires one (sent as `Authorization: Bearer`). Prefer the
    /// environment variable: flags show in `ps`.
    #[arg(long, env = "LOCKGATE_API_KEY", hide_env_values = true)]
    pub api_key: Option<Secret>,

    /// After losing the lock, how long the command has to exit after SIGTERM before SIGKILL.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub kill_after: Duration,

    /// The lock's name.
    pub name: String,

    /// The command to run and its arguments, after `--`.
    #[arg(last = true, required = true, num_args = 1.., value_name = "COMMAND")]
    pub command: Vec<std::ffi::OsString>,
}

/// Flags of the server.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address and port to listen on. The default, loopback only, suits a sidecar.
    #[arg(long, env = "LOCKGATE_LISTEN", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,

    /// One Redis server: redis://[[user]:password@]host[:port][/db], or rediss://… for TLS.
    #[arg(
        long,
        env = "LOCKGATE_REDIS_URL",
        hide_env_values = true,
        group = "store"
    )]
    pub redis_url: Option<Secret>,

    /// Redis Sentinel: the sentinels' URLs, comma-separated (their own credentials in the first
    /// URL). Needs --sentinel-master; the master's credentials go in --redis-username and
    /// --redis-password.
    #[arg(
        long,
        env = "LOCKGATE_SENTINELS",
        hide_env_values = true,
        value_delimiter = ',',
        group = "store"
    )]
    pub sentinel: Vec<Secret>,

    /// The name of the master group the sentinels monitor.
    #[arg(long, env = "LOCKGATE_SENTINEL_MASTER")]
    pub sentinel_master: Option<String>,

    /// ACL user for the master found through Sentinel.
    #[arg(long, env = "LOCKGATE_REDIS_USERNAME")]
    pub redis_username: Option<String>,

    /// Password for the master found through Sentinel.
    #[arg(long, env = "LOCKGATE_REDIS_PASSWORD", hide_env_values = true)]
    pub redis_password: Option<Secret>,

    /// Redis Cluster: URLs of some of its nodes, comma-separated (credentials in them).
    #[arg(
        long,
        env = "LOCKGATE_CLUSTER",
        hide_env_values = true,
        value_delimiter = ',',
        group = "store"
    )]
    pub cluster: Vec<Secret>,

    /// Redlock: URLs of an odd number (3 or more) of independent Redis masters, comma-separated.
    #[arg(
        long,
        env = "LOCKGATE_REDLOCK",
        hide_env_values = true,
        value_delimiter = ',',
        group = "store"
    )]
    pub redlock: Vec<Secret>,

    /// Redlock: how long each node may take to answer. A node that is down or slow costs at
    /// most this, not the whole request.
    #[arg(long, env = "LOCKGATE_REDLOCK_NODE_TIMEOUT", default_value = DEFAULT_REDLOCK_NODE_TIMEOUT, value_parser = humantime::parse_duration)]
    pub redlock_node_timeout: Duration,

    /// Keep locks in this process instead of Redis. For development only: locks are not shared
    /// with other gateways and vanish when the process exits.
    #[arg(long, env = "LOCKGATE_DEV", action = ArgAction::SetTrue, value_parser = BoolishValueParser::new(), group = "store")]
    pub dev: bool,

    /// Prefix of every Redis key lockgate writes (letters, digits, '.', '_', ':', '/', '-').
    #[arg(long, env = "LOCKGATE_KEY_PREFIX", default_value = DEFAULT_KEY_PREFIX)]
    pub key_prefix: String,

    /// Lease length when a request gives no ttl_ms.
    #[arg(long, env = "LOCKGATE_DEFAULT_TTL", default_value = DEFAULT_TTL, value_parser = humantime::parse_duration)]
    pub default_ttl: Duration,

    /// Shortest lease a client may ask for.
    #[arg(long, env = "LOCKGATE_MIN_TTL", default_value = DEFAULT_MIN_TTL, value_parser = humantime::parse_duration)]
    pub min_ttl: Duration,

    /// Longest lease a client may ask for (renewals can extend a lock beyond it).
    #[arg(long, env = "LOCKGATE_MAX_TTL", default_value = DEFAULT_MAX_TTL, value_parser = humantime::parse_duration)]
    pub max_ttl: Duration,

    /// Longest wait_ms a client may ask for.
    #[arg(long, env = "LOCKGATE_MAX_WAIT", default_value = DEFAULT_MAX_WAIT, value_parser = humantime::parse_duration)]
    pub max_wait: Duration,

    /// Most requests waiting for locks at once (wait_ms and hold streams still waiting). Beyond
    /// it, requests that would wait answer 503 too-many-waiters.
    #[arg(long, env = "LOCKGATE_MAX_WAITERS", default_value_t = DEFAULT_MAX_WAITERS)]
    pub max_waiters: usize,

    /// No longer used (fences no longer keep a counter per name); accepted so that existing
    /// configurations still start, with a warning.
    #[arg(long, env = "LOCKGATE_FENCE_RETENTION", hide = true, value_parser = humantime::parse_duration)]
    pub fence_retention: Option<Duration>,

    /// Whether release and renew use the server's native compare-and-delete and
    /// compare-and-set commands where it has them (Valkey 9 DELIFEQ, Valkey 8.1+ and Redis 8.4
    /// SET … IFEQ, Redis 8.4 DELEX), or always Lua scripts.
    #[arg(long, env = "LOCKGATE_REDIS_NATIVE_COMMANDS", value_enum, default_value_t = NativeCommandsArg::Auto)]
    pub redis_native_commands: NativeCommandsArg,

    /// Bound on each Redis operation, connecting included. Past it the request answers 503.
    #[arg(long, env = "LOCKGATE_REDIS_TIMEOUT", default_value = DEFAULT_REDIS_TIMEOUT, value_parser = humantime::parse_duration)]
    pub redis_timeout: Duration,

    /// Largest accepted request body, in bytes.
    #[arg(long, env = "LOCKGATE_MAX_BODY_BYTES", default_value = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,

    /// Dedicated Redis connections for requests that ask for replica acknowledgement (WAIT).
    #[arg(long, env = "LOCKGATE_WAIT_POOL_SIZE", default_value = DEFAULT_WAIT_POOL_SIZE)]
    pub wait_pool_size: usize,

    /// Secret (at least 32 bytes) from which tokens of idempotent acquires are derived. Set the
    /// same value on every gateway of a shared service; random per process when unset.
    #[arg(long, env = "LOCKGATE_TOKEN_SECRET", hide_env_values = true)]
    pub token_secret: Option<Secret>,

    /// Log line format.
    #[arg(long, env = "LOCKGATE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// File with the API keys (a JSON list; see the README). With keys, every request except
    /// /healthz and /readyz (and /metrics unless --metrics-auth required) needs
    /// `Authorization: Bearer <key>`.
    #[arg(long, env = "LOCKGATE_API_KEYS_FILE", conflicts_with = "api_keys")]
    pub api_keys_file: Option<std::path::PathBuf>,

    /// The API keys themselves, as the same JSON list (for an environment variable fed from a
    /// secret).
    #[arg(long, env = "LOCKGATE_API_KEYS", hide_env_values = true)]
    pub api_keys: Option<Secret>,

    /// Whether /metrics needs a key allowed the `metrics` operation.
    #[arg(long, env = "LOCKGATE_METRICS_AUTH", value_enum, default_value_t = MetricsAuth::Open)]
    pub metrics_auth: MetricsAuth,

    /// Serve without API keys on an address other than loopback. Without it, such a
    /// configuration refuses to start.
    #[arg(long, env = "LOCKGATE_ALLOW_UNAUTHENTICATED", action = ArgAction::SetTrue, value_parser = BoolishValueParser::new())]
    pub allow_unauthenticated: bool,

    /// Bound on answering a request (for acquires that wait: on top of their wait_ms). Past
    /// it the request answers 503.
    #[arg(long, env = "LOCKGATE_REQUEST_TIMEOUT", default_value = DEFAULT_REQUEST_TIMEOUT, value_parser = humantime::parse_duration)]
    pub request_timeout: Duration,

    /// Most requests handled at once (waiting ones included). Beyond it, 503 overloaded.
    #[arg(long, env = "LOCKGATE_MAX_CONCURRENT_REQUESTS", default_value_t = DEFAULT_MAX_CONCURRENT_REQUESTS)]
    pub max_concurrent_requests: usize,

    /// How long a client may take to send a complete request head.
    #[arg(long, env = "LOCKGATE_HEADER_READ_TIMEOUT", default_value = DEFAULT_HEADER_READ_TIMEOUT, value_parser = humantime::parse_duration)]
    pub header_read_timeout: Duration,

    /// After SIGTERM/SIGINT, how long to keep accepting requests (readiness already 503) so
    /// that load balancers stop sending new ones.
    #[arg(long, env = "LOCKGATE_SHUTDOWN_DELAY", default_value = "0s", value_parser = humantime::parse_duration)]
    pub shutdown_delay: Duration,

    /// After that, how long in-flight requests have to finish before the process exits.
    #[arg(long, env = "LOCKGATE_SHUTDOWN_GRACE", default_value = DEFAULT_SHUTDOWN_GRACE, value_parser = humantime::parse_duration)]
    pub shutdown_grace: Duration,

    /// PEM file of the certificate authorities to trust for rediss:// connections, instead of
    /// the system's.
    #[arg(long, env = "LOCKGATE_REDIS_CA_FILE")]
    pub redis_ca_file: Option<std::path::PathBuf>,
}

/// Whether /metrics needs an API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MetricsAuth {
    /// Open to anyone who can reach the port (metrics carry no names or tokens).
    Open,
    /// A key allowed the `metrics` operation.
    Required,
}

/// `--redis-native-commands`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NativeCommandsArg {
    /// Use them where the server has them.
    Auto,
    /// Always Lua scripts.
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// A string that must never be printed: a URL with a password, a secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

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
    pub backend: BackendChoice,
    pub key_prefix: String,
    pub limits: Limits,
    pub redis_timeout: Duration,
    pub native_commands: NativeCommands,
    /// Settings that are accepted but no longer used, for a warning at startup.
    pub deprecated: Vec<&'static str>,
    pub max_body_bytes: usize,
    pub wait_pool_size: usize,
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
}

/// A configuration that cannot work. Each message is one line that says how to fix it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error(
        "no lock store configured: pass --redis-url redis://HOST:PORT (or set LOCKGATE_REDIS_URL), \
         --sentinel, --cluster or --redlock, or --dev for an in-process store"
    )]
    NoBackend,
    #[error("Redis URLs must start with redis:// or rediss://")]
    RedisScheme,
    #[error("--sentinel needs --sentinel-master (and --sentinel-master needs --sentinel)")]
    SentinelMaster,
    #[error("--sentinel does not support TLS yet: use redis:// sentinel URLs")]
    SentinelTls,
    #[error("--redlock needs an odd number of nodes, at least 3")]
    RedlockNodes,
    #[error("{0}")]
    Range(String),
    #[error(
        "--key-prefix may hold at most {MAX_KEY_PREFIX_LEN} of: letters, digits, '.', '_', ':', '/', '-'"
    )]
    KeyPrefix,
    #[error("--token-secret must be at least {MIN_SECRET_LEN} bytes long")]
    ShortSecret,
    #[error("{0}")]
    ApiKeys(String),
    #[error(
        "refusing to serve {0} without API keys: set --api-keys-file (or LOCKGATE_API_KEYS), \
         listen on 127.0.0.1, or pass --allow-unauthenticated"
    )]
    Unauthenticated(SocketAddr),
    #[error("--metrics-auth required needs API keys")]
    MetricsAuthWithoutKeys,
    #[error("cannot read {0}")]
    File(String),
}

fn range(message: String) -> ConfigError {
    ConfigError::Range(message)
}

impl Config {
    pub fn from_args(args: ServeArgs) -> Result<Self, ConfigError> {
        let urls_ok = |urls: &[Secret]| {
            urls.iter().all(|url| {
                ["redis://", "rediss://"]
                    .iter()
                    .any(|s| url.expose().starts_with(s))
            })
        };
        if args.sentinel.is_empty() != args.sentinel_master.is_none() {
            return Err(ConfigError::SentinelMaster);
        }
        // clap allows at most one store; none is the common first-run mistake.
        let backend = if args.dev {
            BackendChoice::Memory
        } else if let Some(url) = args.redis_url {
            BackendChoice::Redis { url }
        } else if let Some(master) = args.sentinel_master {
            BackendChoice::Sentinel {
                sentinels: args.sentinel,
                master,
                username: args.redis_username,
                password: args.redis_password,
            }
        } else if !args.cluster.is_empty() {
            BackendChoice::Cluster {
                seeds: args.cluster,
            }
        } else if !args.redlock.is_empty() {
            if args.redlock.len() < 3 || args.redlock.len().is_multiple_of(2) {
                return Err(ConfigError::RedlockNodes);
            }
            BackendChoice::Redlock {
                nodes: args.redlock,
                node_timeout: args.redlock_node_timeout,
            }
        } else {
            return Err(ConfigError::NoBackend);
        };
        let all_urls_ok = match &backend {
            BackendChoice::Memory => true,
            BackendChoice::Redis { url } => urls_ok(std::slice::from_ref(url)),
            BackendChoice::Sentinel { sentinels, .. } => urls_ok(sentinels),
            BackendChoice::Cluster { seeds } => urls_ok(seeds),
            BackendChoice::Redlock { nodes, .. } => urls_ok(nodes),
        };
        if !all_urls_ok {
            return Err(ConfigError::RedisScheme);
        }
        // The master found through Sentinel would be reached without TLS: refuse rather than
        // send credentials in clear to a deployment that expects TLS.
        if let BackendChoice::Sentinel { sentinels, .. } = &backend
            && sentinels
                .iter()
                .any(|url| url.expose().starts_with("rediss://"))
        {
            return Err(ConfigError::SentinelTls);
        }
        if !(Duration::from_millis(1)..=Duration::from_secs(10))
            .contains(&args.redlock_node_timeout)
        {
            return Err(range(
                "--redlock-node-timeout must be between 1ms and 10s".into(),
            ));
        }
        let limits = Limits {
            default_ttl: args.default_ttl,
            min_ttl: args.min_ttl,
            max_ttl: args.max_ttl,
            max_wait: args.max_wait,
            max_waiters: args.max_waiters,
        };
        check_limits(&limits)?;
        if !(Duration::from_millis(10)..=Duration::from_secs(60)).contains(&args.redis_timeout) {
            return Err(range("--redis-timeout must be between 10ms and 60s".into()));
        }
        if !(64..=1 << 20).contains(&args.max_body_bytes) {
            return Err(range(
                "--max-body-bytes must be between 64 and 1048576".into(),
            ));
        }
        if !(1..=256).contains(&args.wait_pool_size) {
            return Err(range("--wait-pool-size must be between 1 and 256".into()));
        }
        let prefix_ok = args.key_prefix.len() <= MAX_KEY_PREFIX_LEN
            && args
                .key_prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._:/-".contains(&b));
        if !prefix_ok {
            return Err(ConfigError::KeyPrefix);
        }
        if args
            .token_secret
            .as_ref()
            .is_some_and(|s| s.expose().len() < MIN_SECRET_LEN)
        {
            return Err(ConfigError::ShortSecret);
        }
        let api_keys = match (&args.api_keys_file, &args.api_keys) {
            (Some(path), _) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    ConfigError::File(format!("--api-keys-file {}: {e}", path.display()))
                })?;
                Some(ApiKeys::from_json(&text).map_err(ConfigError::ApiKeys)?)
            }
            (None, Some(json)) => {
                Some(ApiKeys::from_json(json.expose()).map_err(ConfigError::ApiKeys)?)
            }
            (None, None) => None,
        };
        if api_keys.is_none() && !args.listen.ip().is_loopback() && !args.allow_unauthenticated {
            return Err(ConfigError::Unauthenticated(args.listen));
        }
        if api_keys.is_none() && args.metrics_auth == MetricsAuth::Required {
            return Err(ConfigError::MetricsAuthWithoutKeys);
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&args.request_timeout)
        {
            return Err(range(
                "--request-timeout must be between 100ms and 1h".into(),
            ));
        }
        if args.request_timeout <= args.redis_timeout {
            return Err(range(
                "--request-timeout must be longer than --redis-timeout".into(),
            ));
        }
        if args.max_concurrent_requests <= limits.max_waiters {
            return Err(range(
                "--max-concurrent-requests must be larger than --max-waiters, or waiting \
                 requests could take every slot"
                    .into(),
            ));
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(300))
            .contains(&args.header_read_timeout)
        {
            return Err(range(
                "--header-read-timeout must be between 100ms and 5m".into(),
            ));
        }
        if args.shutdown_delay > Duration::from_secs(600)
            || args.shutdown_grace > Duration::from_secs(3600)
        {
            return Err(range(
                "--shutdown-delay must be at most 10m and --shutdown-grace at most 1h".into(),
            ));
        }
        let redis_ca = match &args.redis_ca_file {
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                ConfigError::File(format!("--redis-ca-file {}: {e}", path.display()))
            })?),
            None => None,
        };
        Ok(Self {
            listen: args.listen,
            backend,
            key_prefix: args.key_prefix,
            limits,
            redis_timeout: args.redis_timeout,
            native_commands: match args.redis_native_commands {
                NativeCommandsArg::Auto => NativeCommands::Auto,
                NativeCommandsArg::Off => NativeCommands::Off,
            },
            deprecated: args
                .fence_retention
                .map(|_| "--fence-retention (LOCKGATE_FENCE_RETENTION)")
                .into_iter()
                .collect(),
            max_body_bytes: args.max_body_bytes,
            wait_pool_size: args.wait_pool_size,
            token_secret: args.token_secret,
            log_format: args.log_format,
            api_keys,
            metrics_auth: args.metrics_auth,
            request_timeout: args.request_timeout,
            max_concurrent_requests: args.max_concurrent_requests,
            header_read_timeout: args.header_read_timeout,
            shutdown_delay: args.shutdown_delay,
            shutdown_grace: args.shutdown_grace,
            redis_ca,
        })
    }
}

/// The limits a server has without flags: what the committed OpenAPI document describes.
pub fn default_limits() -> Limits {
    let parse = |text| humantime::parse_duration(text).unwrap_or_default();
    Limits {
        default_ttl: parse(DEFAULT_TTL),
        min_ttl: parse(DEFAULT_MIN_TTL),
        max_ttl: parse(DEFAULT_MAX_TTL),
        max_wait: parse(DEFAULT_MAX_WAIT),
        max_waiters: DEFAULT_MAX_WAITERS,
    }
}

fn check_limits(limits: &Limits) -> Result<(), ConfigError> {
    let Limits {
        default_ttl,
        min_ttl,
        max_ttl,
        max_wait,
        max_waiters,
    } = *limits;
    if min_ttl < Duration::from_millis(1) {
        return Err(range("--min-ttl must be at least 1ms".into()));
    }
    if !(min_ttl <= default_ttl && default_ttl <= max_ttl) {
        return Err(range(
            "--min-ttl <= --default-ttl <= --max-ttl must hold".into(),
        ));
    }
    if max_wait > Duration::from_secs(3600) {
        return Err(range("--max-wait must be at most 1h".into()));
    }
    if max_waiters > 1_000_000 {
        return Err(range("--max-waiters must be at most 1000000".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn parse(args: &[&str]) -> Result<Config, ConfigError> {
        let cli = Cli::try_parse_from(std::iter::once("lockgate").chain(args.iter().copied()))
            .expect("parses");
        Config::from_args(cli.serve)
    }

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults_suit_a_sidecar() {
        let config = parse(&["--dev"]).expect("valid");
        assert_eq!(config.limits, default_limits());
        assert_eq!(config.listen.to_string(), "127.0.0.1:7380");
        assert_eq!(config.backend, BackendChoice::Memory);
        assert_eq!(config.limits.default_ttl, Duration::from_secs(30));
        assert_eq!(config.native_commands, NativeCommands::Auto);
        assert!(config.deprecated.is_empty());
        assert_eq!(config.key_prefix, "lockgate:");
    }

    #[test]
    fn a_store_must_be_chosen() {
        assert_eq!(parse(&[]).unwrap_err(), ConfigError::NoBackend);
        let both = Cli::try_parse_from(["lockgate", "--dev", "--redis-url", "redis://x"]);
        assert!(both.is_err());
        assert_eq!(
            parse(&["--redis-url", "http://x"]).unwrap_err(),
            ConfigError::RedisScheme
        );
        assert!(parse(&["--redis-url", "rediss://u:p@host:6380/0"]).is_ok());
    }

    #[test]
    fn serving_beyond_loopback_needs_keys_or_an_explicit_opt_out() {
        assert_eq!(
            parse(&["--dev", "--listen", "0.0.0.0:7380"]).unwrap_err(),
            ConfigError::Unauthenticated("0.0.0.0:7380".parse().unwrap())
        );
        assert!(
            parse(&[
                "--dev",
                "--listen",
                "0.0.0.0:7380",
                "--allow-unauthenticated"
            ])
            .is_ok()
        );
        let keys = r#"[{"name": "a", "key": "0123456789abcdef", "prefixes": [""]}]"#;
        let config = parse(&["--dev", "--listen", "[::]:7380", "--api-keys", keys]).expect("valid");
        assert!(config.api_keys.is_some());
        assert!(parse(&["--dev", "--listen", "[::1]:7380"]).is_ok());
        assert_eq!(
            parse(&["--dev", "--metrics-auth", "required"]).unwrap_err(),
            ConfigError::MetricsAuthWithoutKeys
        );
    }

    #[test]
    fn each_redis_mode_is_configured_on_its_own() {
        let sentinel = parse(&[
            "--sentinel",
            "redis://a:26379,redis://b:26379",
            "--sentinel-master",
            "m",
        ])
        .expect("valid");
        assert!(
            matches!(sentinel.backend, BackendChoice::Sentinel { ref sentinels, ref master, .. } if sentinels.len() == 2 && master == "m")
        );
        assert_eq!(
            parse(&["--sentinel", "redis://a:26379"]).unwrap_err(),
            ConfigError::SentinelMaster
        );
        assert_eq!(
            parse(&["--dev", "--sentinel-master", "m"]).unwrap_err(),
            ConfigError::SentinelMaster
        );
        assert_eq!(
            parse(&["--sentinel", "rediss://a:26379", "--sentinel-master", "m"]).unwrap_err(),
            ConfigError::SentinelTls
        );
        let cluster = parse(&["--cluster", "redis://a:7000,redis://b:7001"]).expect("valid");
        assert!(
            matches!(cluster.backend, BackendChoice::Cluster { ref seeds } if seeds.len() == 2)
        );
        let redlock = parse(&["--redlock", "redis://a,redis://b,redis://c"]).expect("valid");
        assert!(
            matches!(redlock.backend, BackendChoice::Redlock { ref nodes, node_timeout } if nodes.len() == 3 && node_timeout == Duration::from_millis(50))
        );
        assert_eq!(
            parse(&["--redlock", "redis://a,redis://b"]).unwrap_err(),
            ConfigError::RedlockNodes
        );
        assert_eq!(
            parse(&["--redlock", "redis://a,redis://b,redis://c,redis://d"]).unwrap_err(),
            ConfigError::RedlockNodes
        );
        assert_eq!(
            parse(&["--cluster", "http://a:7000"]).unwrap_err(),
            ConfigError::RedisScheme
        );
        let both: [&[&str]; 2] = [
            &["--dev", "--cluster", "redis://a"],
            &[
                "--redis-url",
                "redis://a",
                "--redlock",
                "redis://a,redis://b,redis://c",
            ],
        ];
        for args in both {
            let parsed =
                Cli::try_parse_from(std::iter::once("lockgate").chain(args.iter().copied()));
            assert!(parsed.is_err(), "{args:?}");
        }
    }

    /// `--fence-retention` configured the per-name fence counters that no longer exist: it is
    /// still accepted, so that old configurations start, and reported as ignored.
    #[test]
    fn the_retired_fence_retention_is_accepted_and_reported() {
        let config = parse(&["--dev", "--fence-retention", "30m"]).expect("accepted");
        assert_eq!(
            config.deprecated,
            ["--fence-retention (LOCKGATE_FENCE_RETENTION)"]
        );
    }

    #[test]
    fn inconsistent_limits_are_refused() {
        assert!(parse(&["--dev", "--min-ttl", "0ms"]).is_err());
        assert!(parse(&["--dev", "--default-ttl", "2h"]).is_err());
        assert!(parse(&["--dev", "--wait-pool-size", "0"]).is_err());
        assert!(parse(&["--dev", "--redis-timeout", "0s"]).is_err());
        assert!(
            parse(&[
                "--dev",
                "--default-ttl",
                "5s",
                "--min-ttl",
                "1s",
                "--max-ttl",
                "10s"
            ])
            .is_ok()
        );
    }

    #[test]
    fn key_prefixes_cannot_break_hash_tags() {
        assert_eq!(
            parse(&["--dev", "--key-prefix", "a{b}"]).unwrap_err(),
            ConfigError::KeyPrefix
        );
        assert_eq!(
            parse(&["--dev", "--key-prefix", "a b"]).unwrap_err(),
            ConfigError::KeyPrefix
        );
        assert!(parse(&["--dev", "--key-prefix", ""]).is_ok());
        assert!(parse(&["--dev", "--key-prefix", "team/a:locks:"]).is_ok());
    }

    #[test]
    fn short_secrets_are_refused_and_secrets_never_print() {
        assert_eq!(
            parse(&["--dev", "--token-secret", "short"]).unwrap_err(),
            ConfigError::ShortSecret
        );
        let secret = "x".repeat(40);
        let config = parse(&[
            "--redis-url",
            "redis://:hunter2@h:1",
            "--token-secret",
            &secret,
        ])
        .expect("valid");
        let printed = format!("{config:?}");
        assert!(
            !printed.contains("hunter2") && !printed.contains(&secret),
            "{printed}"
        );
    }
}
