//! Guards against the ways a store loses locks without an error.
//!
//! **Eviction.** A Redis with `maxmemory` set evicts keys when it is full, by its
//! `maxmemory-policy`. Every lock key has a TTL, so every policy but `noeviction` may pick lock
//! keys (the `volatile-*` policies choose among keys with a TTL: exactly the locks), and the
//! next client is then granted a lock whose holder is still working. `noeviction` instead
//! refuses writes when full (`OOM`), which lockgate answers as an error: loud, not silent.
//!
//! So every node that holds locks (the server, the master the Sentinels name, every master of a
//! Cluster, every Redlock node) is asked for its policy (`INFO memory`, which managed services
//! allow where they disable `CONFIG`): once before the server starts serving, where a node that
//! may evict refuses the start unless `--allow-eviction` is given ([`refuse_evicting_nodes`]),
//! then while serving, every `--redis-check-interval` and right after every (re)connect
//! ([`watch`]): a node that turns unsafe is logged once (error level; warn with
//! `--allow-eviction`), and `lockgate_redis_eviction_possible{node}` says 1 while it stays so.
//!
//! **Clock steps.** Redis expires keys by its own wall clock. A step of that clock forward by
//! S (a VM resumed, a manual `date`, NTP stepping instead of slewing) ends every lease with less
//! than S left at once, while its holder, counting on the gateway's answer, still works: two
//! holders. So every node's `TIME` is read every [`CLOCK_CHECK_EVERY`] and compared with the
//! gateway's monotonic clock; a difference beyond [`CLOCK_STEP_THRESHOLD`] between two reads is
//! a step, logged (error forward, warn backward) and counted
//! (`lockgate_redis_clock_steps_total{direction}`). After a forward step, new grants are held
//! back ([`HoldBack`], on by default, `--clock-step-hold-back false` to turn off) for
//! `min(S, --max-ttl)` from the detection: every lease the step may have cut short (it had
//! less than S left) has then ended by its holder's count too, so no grant made after the
//! detection overlaps one made before. Grants between the step and its detection (at most
//! [`CLOCK_CHECK_EVERY`] plus a round trip) are not protected; fences stay increasing either
//! way (a forward step only raises the clock term). A backward step makes leases last longer
//! than granted — safe for exclusion — and fences keep increasing through the counter term.
//!
//! The memory backend has no node to ask.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

// tokio's clock, the machine's monotonic one outside a simulation (a paused runtime).
use tokio::time::Instant;

use tokio::sync::Notify;

use super::{Backend, BackendError};
use crate::telemetry::Metrics;

/// A node's memory settings, as `INFO memory` reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPolicy {
    /// `maxmemory` in bytes; 0 means no limit (the node never evicts).
    pub maxmemory: u64,
    /// `maxmemory_policy`, e.g. `noeviction`, `allkeys-lru`, `volatile-ttl`.
    pub policy: String,
}

impl MemoryPolicy {
    /// Reads the `maxmemory` and `maxmemory_policy` lines of an `INFO memory` reply.
    pub fn read(info: &str) -> Option<Self> {
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.trim_end().strip_prefix(name)?.strip_prefix(':'))
        };
        Some(Self {
            maxmemory: field("maxmemory")?.parse().ok()?,
            policy: field("maxmemory_policy")?.to_owned(),
        })
    }

    /// Whether the node may evict lock keys when it is full.
    pub fn may_evict(&self) -> bool {
        self.maxmemory > 0 && self.policy != "noeviction"
    }
}

/// What one node answered (or why it did not), with its address.
#[derive(Debug)]
pub struct NodeLook<T> {
    pub node: String,
    pub answer: Result<T, BackendError>,
}

/// How often every node's clock is read.
pub const CLOCK_CHECK_EVERY: Duration = Duration::from_millis(500);
/// A difference between a node's clock and the gateway's monotonic clock, between two reads,
/// beyond which the node's clock stepped. Well above what a slow answer can fake (a reply
/// delayed by the network or a paused Redis is timed when it arrives, on both clocks).
pub const CLOCK_STEP_THRESHOLD: Duration = Duration::from_secs(1);

/// New grants held back until a time: after a store's clock stepped forward, or on a node
/// that forgot its data (see `data_loss`).
#[derive(Debug)]
pub struct HoldBack {
    base: Instant,
    /// Nanoseconds after `base` until which grants are held back (0: none).
    until: AtomicU64,
}

impl Default for HoldBack {
    fn default() -> Self {
        Self {
            base: Instant::now(),
            until: AtomicU64::new(0),
        }
    }
}

impl HoldBack {
    /// How long grants are still held back, if they are.
    pub fn left(&self) -> Option<Duration> {
        let until = self.until.load(Ordering::Relaxed);
        if until == 0 {
            return None;
        }
        let now = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        (now < until).then(|| Duration::from_nanos(until - now))
    }

    /// Holds grants back for `span` from now (or longer, if they already are).
    pub fn hold_for(&self, span: Duration) {
        let until = self.base.elapsed() + span;
        let until = u64::try_from(until.as_nanos()).unwrap_or(u64::MAX);
        self.until.fetch_max(until, Ordering::Relaxed);
    }
}

impl Backend {
    /// Logs the connections already made (by the startup guards, before logging started).
    pub fn log_connections(&self) {
        match self {
            Self::Memory(_) => {}
            Self::Redis(redis) => redis.log_connection(),
            Self::Redlock(redlock) => redlock.log_connections(),
        }
    }

    /// The clock of every node that holds locks, in µs since the epoch, with the monotonic
    /// instant its answer came back at (none for the memory backend).
    pub async fn clocks(&self) -> Vec<NodeLook<(u64, Instant)>> {
        match self {
            Self::Memory(_) => Vec::new(),
            Self::Redis(redis) => redis.clocks().await,
            Self::Redlock(redlock) => redlock.clocks().await,
        }
    }

    /// Looks at every node's marker (see `data_loss`): a node that forgot its data holds grants
    /// on it back from then on. None for the memory backend.
    pub async fn check_markers(&self) {
        match self {
            Self::Memory(_) => {}
            Self::Redis(redis) => redis.check_marker().await,
            Self::Redlock(redlock) => redlock.check_markers().await,
        }
    }

    /// How long grants of `name` are still held back because the node that keeps it forgot
    /// its data. A Redlock keeps each forgetful node out of its grants itself: never the whole
    /// store.
    pub fn data_loss_hold_back(&self, name: &str) -> Option<Duration> {
        match self {
            Self::Redis(redis) => redis.data_loss_hold_back(name),
            Self::Memory(_) | Self::Redlock(_) => None,
        }
    }

    /// The memory policy of every node that holds locks (none for the memory backend).
    pub async fn memory_policies(&self) -> Vec<NodeLook<MemoryPolicy>> {
        match self {
            Self::Memory(_) => Vec::new(),
            Self::Redis(redis) => redis.memory_policies().await,
            Self::Redlock(redlock) => redlock.memory_policies().await,
        }
    }
}

/// How the guards behave.
#[derive(Debug, Clone, Copy)]
pub struct GuardOptions {
    /// Serve against nodes that may evict keys (warn instead of refusing).
    pub allow_eviction: bool,
    /// How often every node's memory policy is looked at again while serving.
    pub interval: Duration,
    /// Hold new grants back after a forward clock step.
    pub hold_back: bool,
    /// The longest lease a client may ask for: the longest hold-back needed.
    pub max_ttl: Duration,
}

/// The one line that refuses a node that may evict lock keys.
fn refusal(node: &str, policy: &MemoryPolicy) -> String {
    format!(
        "the Redis at {node} has maxmemory {} with maxmemory-policy {}: when it fills up it \
         evicts lock keys and hands their locks to others while their holders still work; set \
         maxmemory-policy noeviction on it (or maxmemory 0), or pass --allow-eviction to accept \
         the risk",
        policy.maxmemory, policy.policy
    )
}

/// Before serving: `Err` with one line naming the first node that may evict lock keys, unless
/// eviction is allowed. A node that does not answer passes (the gateway serves before Redis is
/// up, and [`watch`] looks at it once it answers).
pub async fn refuse_evicting_nodes(backend: &Backend, options: GuardOptions) -> Result<(), String> {
    for look in backend.memory_policies().await {
        if let Ok(policy) = &look.answer
            && policy.may_evict()
        {
            if !options.allow_eviction {
                return Err(refusal(&look.node, policy));
            }
            tracing::warn!(node = %look.node, maxmemory = policy.maxmemory, policy = %policy.policy,
                "this Redis may evict lock keys when full (serving anyway: --allow-eviction)");
        }
    }
    Ok(())
}

/// A node's clock as last read: its time (µs) and the gateway's monotonic instant then.
type ClockRead = (u64, Instant);

/// The step of a node's clock between two reads, in µs (positive: forward), if beyond the
/// threshold.
fn clock_step(before: ClockRead, now: ClockRead) -> Option<i128> {
    let node = i128::from(now.0) - i128::from(before.0);
    let gateway = i128::try_from(now.1.duration_since(before.1).as_micros()).unwrap_or(i128::MAX);
    let step = node - gateway;
    let threshold = i128::try_from(CLOCK_STEP_THRESHOLD.as_micros()).unwrap_or(i128::MAX);
    (step.abs() > threshold).then_some(step)
}

/// Reads every node's clock, reports steps, and holds grants back after a forward one; a node
/// that answers is up (`lockgate_backend_up`), one that does not is down.
async fn check_clocks(
    backend: &Backend,
    seen: &mut HashMap<String, ClockRead>,
    options: GuardOptions,
    hold_back: &HoldBack,
    metrics: &Metrics,
) {
    for look in backend.clocks().await {
        metrics.backend_up(&look.node, look.answer.is_ok());
        let Ok(read) = look.answer else {
            continue;
        };
        if let Some(before) = seen.insert(look.node.clone(), read)
            && let Some(step) = clock_step(before, read)
        {
            let step_ms = step / 1000;
            metrics.redis_clock_step(step > 0);
            if step > 0 {
                let span = Duration::from_micros(u64::try_from(step).unwrap_or(u64::MAX))
                    .min(options.max_ttl);
                if options.hold_back {
                    hold_back.hold_for(span);
                }
                tracing::error!(node = %look.node, step_ms, held_back_ms = if options.hold_back { span.as_millis() } else { 0 },
                    "the Redis clock stepped forward: leases on it with less than the step left ended early, while their holders may still work; new grants are held back for the step (up to --max-ttl) unless --clock-step-hold-back false");
            } else {
                tracing::warn!(node = %look.node, step_ms,
                    "the Redis clock stepped back: leases on it last longer than granted (safe); fences keep increasing");
            }
        }
    }
}

/// Looks at every node's memory policy every `options.interval`, and at once when
/// `reconnected` is notified, and at every node's clock every [`CLOCK_CHECK_EVERY`], for as
/// long as the backend lives: logs a node turning unsafe once (and turning safe again), keeps
/// `lockgate_redis_eviction_possible` up to date, and reports clock steps (holding grants
/// back in `hold_back` after a forward one).
pub fn watch(
    backend: &Arc<Backend>,
    options: GuardOptions,
    reconnected: Arc<Notify>,
    hold_back: Arc<HoldBack>,
    metrics: Arc<Metrics>,
) {
    if matches!(**backend, Backend::Memory(_)) {
        return;
    }
    // Outside a runtime (a router built for a synchronous test) there is nothing to watch with.
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let backend: Weak<Backend> = Arc::downgrade(backend);
    runtime.spawn(async move {
        let mut policies: HashMap<String, bool> = HashMap::new();
        let mut clocks: HashMap<String, ClockRead> = HashMap::new();
        let mut memory_due = Instant::now();
        loop {
            let Some(backend) = backend.upgrade() else {
                return;
            };
            check_clocks(&backend, &mut clocks, options, &hold_back, &metrics).await;
            backend.check_markers().await;
            if Instant::now() >= memory_due {
                memory_due = Instant::now() + options.interval;
                check_memory(&backend, &mut policies, options, &metrics).await;
            }
            drop(backend);
            tokio::select! {
                biased;
                () = tokio::time::sleep(CLOCK_CHECK_EVERY) => {}
                () = reconnected.notified() => memory_due = Instant::now(),
            }
        }
    });
}

/// Reads every node's memory policy, logs a node turning unsafe (or safe again) once, and
/// keeps the gauge up to date.
async fn check_memory(
    backend: &Backend,
    seen: &mut HashMap<String, bool>,
    options: GuardOptions,
    metrics: &Metrics,
) {
    for look in backend.memory_policies().await {
        match look.answer {
            Ok(policy) => {
                let evicts = policy.may_evict();
                metrics.redis_eviction_possible(&look.node, evicts);
                let before = seen.insert(look.node.clone(), evicts);
                if before == Some(evicts) {
                    continue;
                }
                if evicts && options.allow_eviction {
                    tracing::warn!(node = %look.node, maxmemory = policy.maxmemory, policy = %policy.policy,
                        "this Redis may evict lock keys when full (--allow-eviction)");
                } else if evicts {
                    tracing::error!(node = %look.node, maxmemory = policy.maxmemory, policy = %policy.policy,
                        "{}", refusal(&look.node, &policy));
                } else if before == Some(true) {
                    tracing::info!(node = %look.node, policy = %policy.policy,
                        "this Redis no longer evicts lock keys");
                }
            }
            // An unreachable node is reported by the requests it fails; it is looked at again
            // once it answers.
            Err(error) => {
                tracing::debug!(node = %look.node, %error, "could not read the memory policy");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_a_difference_between_the_clocks_beyond_the_threshold() {
        let start = Instant::now();
        let later = start + Duration::from_secs(5);
        let before = (1_000_000_000_000_000, start);
        // Both clocks advanced 5 s: no step.
        assert_eq!(clock_step(before, (before.0 + 5_000_000, later)), None);
        // Redis advanced 15 s in 5: a 10 s step forward.
        assert_eq!(
            clock_step(before, (before.0 + 15_000_000, later)),
            Some(10_000_000)
        );
        assert_eq!(
            clock_step(before, (before.0 - 5_000_000, later)),
            Some(-10_000_000)
        );
        // Half a second of difference is noise.
        assert_eq!(clock_step(before, (before.0 + 5_500_000, later)), None);
    }

    #[test]
    fn grants_are_held_back_for_the_span_given_and_no_less() {
        let hold_back = HoldBack::default();
        assert_eq!(hold_back.left(), None);
        hold_back.hold_for(Duration::from_secs(10));
        hold_back.hold_for(Duration::from_secs(1));
        let left = hold_back.left().expect("held back");
        assert!(left > Duration::from_secs(9), "{left:?}");
    }

    #[test]
    fn the_policy_is_read_from_info_memory() {
        let info = "# Memory\r\nused_memory:1048576\r\nmaxmemory:8388608\r\nmaxmemory_human:8.00M\r\nmaxmemory_policy:allkeys-lru\r\n";
        let policy = MemoryPolicy::read(info).expect("read");
        assert_eq!(policy.maxmemory, 8_388_608);
        assert_eq!(policy.policy, "allkeys-lru");
        assert!(policy.may_evict());
        for safe in [
            "maxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\n",
            "maxmemory:8388608\r\nmaxmemory_policy:noeviction\r\n",
        ] {
            assert!(
                !MemoryPolicy::read(safe).expect("read").may_evict(),
                "{safe}"
            );
        }
        assert_eq!(MemoryPolicy::read("maxmemory_human:8.00M\r\n"), None);
    }
}
