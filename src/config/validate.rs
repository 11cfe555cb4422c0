//! Validation: from what clap parsed to a [`Config`] the program can rely on, or one line
//! saying what to fix.

use std::net::SocketAddr;
use std::time::Duration;

use super::flags::{NativeCommandsArg, ServeArgs};
use super::*;
use crate::access::ApiKeys;
use crate::lock::request::MAX_HOLD_CEILING;
use crate::lock::token::MIN_SECRET_LEN;

/// Most `--worker-threads`: more serve nothing better on any machine, and each costs a stack.
const MAX_WORKER_THREADS: usize = 1024;

/// A configuration that cannot work. Each message is one line that says how to fix it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error(
        "no lock store configured: pass --redis-url redis://HOST:PORT (or set LOCKGATE_REDIS_URL), \
         --sentinel, --cluster or --redlock, or --dev for an in-process store"
    )]
    NoBackend,
    #[error(
        "the Redis URLs of --redis-url, --sentinel, --cluster and --redlock must start with \
         redis:// or rediss://"
    )]
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
            max_hold: args.max_hold,
            max_watchers: args.max_watchers,
        };
        check_limits(&limits)?;
        if !(Duration::from_millis(10)..=Duration::from_secs(60)).contains(&args.redis_timeout) {
            return Err(range("--redis-timeout must be between 10ms and 60s".into()));
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(600))
            .contains(&args.redis_check_interval)
        {
            return Err(range(
                "--redis-check-interval must be between 100ms and 10m".into(),
            ));
        }
        if args.pubsub_linger > Duration::from_secs(3600) {
            return Err(range("--pubsub-linger must be at most 1h".into()));
        }
        if !(64..=1 << 20).contains(&args.max_body_bytes) {
            return Err(range(
                "--max-body-bytes must be between 64 and 1048576".into(),
            ));
        }
        if !(1024..=1 << 20).contains(&args.max_header_bytes) {
            return Err(range(
                "--max-header-bytes must be between 1024 and 1048576".into(),
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
        if api_keys.is_none() && !is_loopback(args.listen.ip()) && !args.allow_unauthenticated {
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
        if args
            .worker_threads
            .is_some_and(|threads| !(1..=MAX_WORKER_THREADS).contains(&threads))
        {
            return Err(range(format!(
                "--worker-threads must be between 1 and {MAX_WORKER_THREADS}"
            )));
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
            metrics_listen: args.metrics_listen,
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
            max_header_bytes: args.max_header_bytes,
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
            allow_eviction: args.allow_eviction,
            redis_check_interval: args.redis_check_interval,
            pubsub_linger: args.pubsub_linger,
            clock_step_hold_back: args.clock_step_hold_back,
            data_loss_hold_back: args.data_loss_hold_back,
            console: args.console,
            allowed_hosts: args.allowed_hosts.clone(),
            worker_threads: args.worker_threads,
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
        max_hold: None,
        max_watchers: DEFAULT_MAX_WATCHERS,
    }
}

fn check_limits(limits: &Limits) -> Result<(), ConfigError> {
    let Limits {
        default_ttl,
        min_ttl,
        max_ttl,
        max_wait,
        max_waiters,
        max_hold,
        max_watchers,
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
    if max_watchers > 1_000_000 {
        return Err(range("--max-watchers must be at most 1000000".into()));
    }
    if max_hold.is_some_and(|hold| hold < min_ttl || hold > MAX_HOLD_CEILING) {
        return Err(range(
            "--max-hold must be between --min-ttl and 30 days".into(),
        ));
    }
    Ok(())
}

/// Whether `ip` reaches this host only: `127.0.0.0/8`, `::1`, and IPv4 loopback written as
/// an IPv4-mapped IPv6 address (`::ffff:127.0.0.1`), which the kernel serves as loopback too.
fn is_loopback(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

#[cfg(test)]
mod tests;
