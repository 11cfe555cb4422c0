//! The command line: what clap parses, with an environment variable for every flag. The
//! client subcommands' flags are in `client_flags`.

use std::time::Duration;

use clap::builder::BoolishValueParser;
use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use super::flag_values::{duration, listen_address};
use super::secrets::Secret;
use super::*;
use crate::access::MetricsAuth;
pub use crate::telemetry::logging::LogFormat;

pub use super::client_flags::{HealthcheckArgs, RunArgs};

#[derive(Debug, Parser)]
#[command(
    name = "lockgate",
    version = crate::build_info::LONG_VERSION,
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
    /// COMMAND runs in a process group of its own: signals go to everything it started, what
    /// it leaves running is stopped before the release, and a guard process stops the group if
    /// `lockgate run` itself dies (docs/api.md, "The command's process tree").
    ///
    /// Exit status: COMMAND's own (128+N if it died of signal N); 75 if the lock was not
    /// acquired within --wait; 76 if the lock was lost while COMMAND ran, 77 if an operator
    /// revoked it, 78 when --max-hold ran out (COMMAND was sent SIGTERM, then SIGKILL after --kill-after, or when the
    /// lease ended if that came first); 69 if the gateway could not be reached or
    /// refused the request; 64 for bad arguments; 126/127 if COMMAND could not be started.
    Run(RunArgs),
    /// Check a gateway's /healthz (or /readyz with --ready): exit 0 when it answers 200, 1
    /// otherwise. For container health checks and exec probes where there is no curl.
    Healthcheck(HealthcheckArgs),
    /// Print the shell completion script for SHELL and exit.
    ///
    /// bash: `lockgate completions bash > ~/.local/share/bash-completion/completions/lockgate`;
    /// zsh: `lockgate completions zsh > "${fpath[1]}/_lockgate"`; fish: `lockgate completions
    /// fish > ~/.config/fish/completions/lockgate.fish`. Completes subcommands and flags.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The guard process `lockgate run` starts beside its command (internal: see
    /// `cli::run::guard`). Reads what `lockgate run` says on its standard input.
    #[command(name = "run-guard", hide = true)]
    RunGuard {
        /// The command's grace after SIGTERM, as `lockgate run --kill-after` has it.
        kill_after: String,
    },
}

/// Flags of the server.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address and port to listen on. The default, loopback only, suits a sidecar.
    #[arg(long, env = "LOCKGATE_LISTEN", default_value = DEFAULT_LISTEN, value_parser = listen_address)]
    pub listen: SocketAddr,

    /// Also serve GET /metrics alone on this address (e.g. 0.0.0.0:9380), with no lock route
    /// and no API key needed, for scraping every sidecar of a fleet while lock calls stay on
    /// loopback. Allowed on any address: metrics carry no token, key or lock name.
    #[arg(long, env = "LOCKGATE_METRICS_LISTEN", value_parser = listen_address)]
    pub metrics_listen: Option<SocketAddr>,

    /// One Redis server: `redis://[[user]:password@]host[:port][/db]`, or `rediss://…` for TLS.
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
    #[arg(long, env = "LOCKGATE_REDLOCK_NODE_TIMEOUT", default_value = DEFAULT_REDLOCK_NODE_TIMEOUT, value_parser = duration)]
    pub redlock_node_timeout: Duration,

    /// Keep locks in this process instead of Redis. For development only: locks are not shared
    /// with other gateways and vanish when the process exits.
    #[arg(long, env = "LOCKGATE_DEV", action = ArgAction::SetTrue, value_parser = BoolishValueParser::new(), group = "store")]
    pub dev: bool,

    /// Prefix of every Redis key lockgate writes (letters, digits, '.', '_', ':', '/', '-').
    #[arg(long, env = "LOCKGATE_KEY_PREFIX", default_value = DEFAULT_KEY_PREFIX)]
    pub key_prefix: String,

    /// Lease length when a request gives no ttl_ms.
    #[arg(long, env = "LOCKGATE_DEFAULT_TTL", default_value = DEFAULT_TTL, value_parser = duration)]
    pub default_ttl: Duration,

    /// Shortest lease a client may ask for.
    #[arg(long, env = "LOCKGATE_MIN_TTL", default_value = DEFAULT_MIN_TTL, value_parser = duration)]
    pub min_ttl: Duration,

    /// Longest lease a client may ask for (renewals can extend a lock beyond it).
    #[arg(long, env = "LOCKGATE_MAX_TTL", default_value = DEFAULT_MAX_TTL, value_parser = duration)]
    pub max_ttl: Duration,

    /// Most event streams (GET /locks/{name}/events) open at once, all names together; beyond
    /// it, 503 too-many-watchers.
    #[arg(long, env = "LOCKGATE_MAX_WATCHERS", default_value_t = DEFAULT_MAX_WATCHERS)]
    pub max_watchers: usize,

    /// Longest a grant may be held, renewals included: renewals past it are refused
    /// (max-hold-reached) and hold streams end. A client's max_hold_ms may only shorten it.
    /// Default: no bound.
    #[arg(long, env = "LOCKGATE_MAX_HOLD", value_parser = duration)]
    pub max_hold: Option<Duration>,

    /// Longest wait_ms a client may ask for.
    #[arg(long, env = "LOCKGATE_MAX_WAIT", default_value = DEFAULT_MAX_WAIT, value_parser = duration)]
    pub max_wait: Duration,

    /// Most requests waiting for locks at once (wait_ms and hold streams still waiting). Beyond
    /// it, requests that would wait answer 503 too-many-waiters.
    #[arg(long, env = "LOCKGATE_MAX_WAITERS", default_value_t = DEFAULT_MAX_WAITERS)]
    pub max_waiters: usize,

    /// No longer used (fences no longer keep a counter per name); accepted so that existing
    /// configurations still start, with a warning.
    #[arg(long, env = "LOCKGATE_FENCE_RETENTION", hide = true, value_parser = duration)]
    pub fence_retention: Option<Duration>,

    /// Whether release and renew use the server's native compare-and-delete and
    /// compare-and-set commands where it has them (Valkey 9 DELIFEQ, Valkey 8.1+ and Redis 8.4
    /// SET … IFEQ, Redis 8.4 DELEX), or always Lua scripts.
    #[arg(long, env = "LOCKGATE_REDIS_NATIVE_COMMANDS", value_enum, default_value_t = NativeCommandsArg::Auto)]
    pub redis_native_commands: NativeCommandsArg,

    /// Bound on each Redis operation, connecting included. Past it the request answers 503.
    #[arg(long, env = "LOCKGATE_REDIS_TIMEOUT", default_value = DEFAULT_REDIS_TIMEOUT, value_parser = duration)]
    pub redis_timeout: Duration,

    /// Start (and keep serving) against a Redis that may evict keys (`maxmemory` set with a
    /// `maxmemory-policy` other than `noeviction`): lock keys can then vanish under their
    /// holders. Without it, such a Redis found at startup is refused (exit 64).
    #[arg(long, env = "LOCKGATE_ALLOW_EVICTION", action = ArgAction::SetTrue, value_parser = BoolishValueParser::new())]
    pub allow_eviction: bool,

    /// Serve the operator's console at /ui (a static page: it shows what the API shows to the
    /// API key entered in it, and nothing else). `--console=false` answers 404 there.
    #[arg(long, env = "LOCKGATE_CONSOLE", default_value_t = true, action = ArgAction::Set, value_parser = BoolishValueParser::new())]
    pub console: bool,

    /// After a Redis node's clock steps forward (which ends leases early), hold new grants back
    /// for the step (at most --max-ttl), so that none overlaps a lease the step cut short.
    #[arg(long, env = "LOCKGATE_CLOCK_STEP_HOLD_BACK", default_value_t = true, action = ArgAction::Set, value_parser = BoolishValueParser::new())]
    pub clock_step_hold_back: bool,

    /// After a Redis node forgot its data (restarted without persistence, flushed, an empty
    /// replica promoted), hold new grants on it back for the longest lease granted there (at
    /// least 1.5 s, at most --max-ttl), so that none overlaps a lease it forgot. Seen by every gateway through
    /// a marker key on each node.
    #[arg(long, env = "LOCKGATE_DATA_LOSS_HOLD_BACK", default_value_t = true, action = ArgAction::Set, value_parser = BoolishValueParser::new())]
    pub data_loss_hold_back: bool,

    /// How often each Redis node's settings that can lose locks silently (its eviction policy)
    /// are checked again while serving, besides at every (re)connect.
    #[arg(long, env = "LOCKGATE_REDIS_CHECK_INTERVAL", default_value = DEFAULT_REDIS_CHECK_INTERVAL, value_parser = duration)]
    pub redis_check_interval: Duration,

    /// Largest accepted request body, in bytes.
    #[arg(long, env = "LOCKGATE_MAX_BODY_BYTES", default_value = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,

    /// Largest accepted request head (request line and headers), in bytes. Past it: 431
    /// problem+json; past four times it, the HTTP layer's own bare 431.
    #[arg(long, env = "LOCKGATE_MAX_HEADER_BYTES", default_value = DEFAULT_MAX_HEADER_BYTES)]
    pub max_header_bytes: usize,

    /// How long the Redis pub/sub connection (release announcements for waiting requests and
    /// watchers) stays open once nothing waits or watches; it is opened again by the next
    /// waiter. 0s closes it at once.
    #[arg(long, env = "LOCKGATE_PUBSUB_LINGER", default_value = DEFAULT_PUBSUB_LINGER, value_parser = duration)]
    pub pubsub_linger: Duration,

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

    /// File with the API keys (a JSON list; see docs/operations.md). With keys, every request except
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

    /// Without API keys: host names this gateway answers to besides IP addresses and
    /// localhost (comma-separated; `.example.com` covers the names under it; `*` any host and
    /// origin). Other Host headers, and web pages of other origins changing locks, get 403
    /// untrusted-origin (DNS rebinding, cross-site requests). No effect with API keys.
    #[arg(long, env = "LOCKGATE_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,

    /// Serve without API keys on an address other than loopback. Without it, such a
    /// configuration refuses to start.
    #[arg(long, env = "LOCKGATE_ALLOW_UNAUTHENTICATED", action = ArgAction::SetTrue, value_parser = BoolishValueParser::new())]
    pub allow_unauthenticated: bool,

    /// Bound on answering a request (for acquires that wait: on top of their wait_ms). Past
    /// it the request answers 503.
    #[arg(long, env = "LOCKGATE_REQUEST_TIMEOUT", default_value = DEFAULT_REQUEST_TIMEOUT, value_parser = duration)]
    pub request_timeout: Duration,

    /// Most requests handled at once (waiting ones included). Beyond it, 503 overloaded.
    #[arg(long, env = "LOCKGATE_MAX_CONCURRENT_REQUESTS", default_value_t = DEFAULT_MAX_CONCURRENT_REQUESTS)]
    pub max_concurrent_requests: usize,

    /// Threads that serve requests (1 to 1024). Default: one per CPU the process may use
    /// (its cgroup's CPU limit counts). A sidecar serving one application needs one.
    #[arg(long, env = "LOCKGATE_WORKER_THREADS")]
    pub worker_threads: Option<usize>,

    /// How long a client may take to send a complete request head.
    #[arg(long, env = "LOCKGATE_HEADER_READ_TIMEOUT", default_value = DEFAULT_HEADER_READ_TIMEOUT, value_parser = duration)]
    pub header_read_timeout: Duration,

    /// After SIGTERM/SIGINT, how long to keep accepting requests (readiness already 503) so
    /// that load balancers stop sending new ones.
    #[arg(long, env = "LOCKGATE_SHUTDOWN_DELAY", default_value = "0s", value_parser = duration)]
    pub shutdown_delay: Duration,

    /// After that, how long in-flight requests have to finish before the process exits.
    #[arg(long, env = "LOCKGATE_SHUTDOWN_GRACE", default_value = DEFAULT_SHUTDOWN_GRACE, value_parser = duration)]
    pub shutdown_grace: Duration,

    /// PEM file of the certificate authorities to trust for rediss:// connections, instead of
    /// the system's.
    #[arg(long, env = "LOCKGATE_REDIS_CA_FILE")]
    pub redis_ca_file: Option<std::path::PathBuf>,
}

/// `--redis-native-commands`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NativeCommandsArg {
    /// Use them where the server has them.
    Auto,
    /// Always Lua scripts.
    Off,
}
