//! The flags of the client subcommands, `lockgate run` and `lockgate healthcheck` (the
//! server's are in `flags`, which parses both): each with an environment variable.

use std::time::Duration;

use clap::Args;

use super::flag_values::{duration, json_object};
use super::*;

/// Flags of `lockgate healthcheck`.
#[derive(Debug, Args)]
pub struct HealthcheckArgs {
    /// Base URL of the gateway.
    #[arg(long, env = "LOCKGATE_GATEWAY", default_value = DEFAULT_GATEWAY, hide_env_values = true)]
    pub gateway: String,

    /// Check readiness (/readyz: the backend answers) instead of liveness (/healthz).
    #[arg(long)]
    pub ready: bool,

    /// How long to wait for the answer.
    #[arg(long, default_value = "2s", value_parser = duration)]
    pub timeout: Duration,
}

/// Flags of `lockgate run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Base URL of the gateway.
    #[arg(long, env = "LOCKGATE_GATEWAY", default_value = DEFAULT_GATEWAY, hide_env_values = true)]
    pub gateway: String,

    /// Lease length, renewed every third of it while the command runs.
    #[arg(long, default_value = "30s", value_parser = duration)]
    pub ttl: Duration,

    /// How long to wait for the lock; 0 tries once. Without it, waits as long as it takes.
    #[arg(long, value_parser = duration)]
    pub wait: Option<Duration>,

    /// API key for a gateway that requires one (sent as `Authorization: Bearer`). Prefer the
    /// environment variable: flags show in `ps`.
    #[arg(long, env = "LOCKGATE_API_KEY", hide_env_values = true)]
    pub api_key: Option<Secret>,

    /// Give the command the API key as LOCKGATE_API_KEY. Without it the command does not
    /// get the key (it gets LOCKGATE_TOKEN, which moves this one grant only), even when
    /// `lockgate run` read it from that variable.
    #[arg(long)]
    pub pass_api_key: bool,

    /// After losing the lock, how long the command has to exit after SIGTERM before SIGKILL.
    #[arg(long, visible_alias = "kill-grace", default_value = "10s", value_parser = duration)]
    pub kill_after: Duration,

    /// Longest the lock may be held: the command is stopped (SIGTERM, SIGKILL when it ends)
    /// and `lockgate run` exits 78. The gateway's --max-hold applies as well.
    #[arg(long, env = "LOCKGATE_MAX_HOLD", value_parser = duration)]
    pub max_hold: Option<Duration>,

    /// Keep the lock at least this long from its grant, even when the command ends sooner
    /// ("at most once per schedule": replicas whose cron fires a little apart run the job once,
    /// ShedLock's lockAtLeastFor). The release then leaves the lock to expire at that time.
    /// Not with --permits, --shared, --fair or several names.
    #[arg(long, env = "LOCKGATE_MIN_HOLD", value_parser = duration)]
    pub min_hold: Option<Duration>,

    /// Who holds the lock, as `GET /locks/{name}` shows it. Default: `<hostname>:<pid>`.
    #[arg(long, env = "LOCKGATE_OWNER")]
    pub owner: Option<String>,

    /// A JSON object shown beside the owner by `GET /locks/{name}` (at most 1024 bytes), e.g.
    /// '{"addr":"10.0.0.7:8080"}' for a leader's address.
    #[arg(long, env = "LOCKGATE_METADATA", value_parser = json_object)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,

    /// Run under a shared (read) grant of the lock NAME: other `--shared` runs may run at the
    /// same time, none while a writer (a run without it) holds NAME.
    #[arg(long, conflicts_with = "permits")]
    pub shared: bool,

    /// Run under one permit of the semaphore NAME, which has this many (1 to 10000), instead
    /// of under the lock NAME: up to this many commands run at once.
    #[arg(long, env = "LOCKGATE_PERMITS", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub permits: Option<u32>,

    /// Wait in the lock's fair queue: one order across every gateway, higher --priority
    /// first, then arrival (see docs/api.md, "Fair queues"). A wait longer than one request
    /// keeps its place from one request to the next.
    #[arg(long, conflicts_with_all = ["permits", "shared"])]
    pub fair: bool,

    /// A fair waiter's priority, 0 to 9 (higher first). Needs --fair. Default 0.
    #[arg(long, requires = "fair", value_parser = clap::value_parser!(u8).range(0..=9))]
    pub priority: Option<u8>,

    /// Say on standard error what the run waits for and gets: who holds the lock (owner, fence,
    /// time left, waiters), how long this run has waited, after one try and then every 30 s
    /// of waiting; and the grant. Seeing the holder takes the `inspect` operation on the name
    /// when the gateway has API keys.
    #[arg(long, short = 'v')]
    pub verbose: bool,

    /// The lock's name (with --permits, the semaphore's). Several names: a multi-lock, all of
    /// them held together while the command runs.
    #[arg(value_name = "NAME", required = true, num_args = 1..)]
    pub names: Vec<String>,

    /// The command to run and its arguments, after `--`.
    #[arg(last = true, required = true, num_args = 1.., value_name = "COMMAND")]
    pub command: Vec<std::ffi::OsString>,
}
