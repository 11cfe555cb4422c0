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
//! The memory backend has no node to ask.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

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

impl Backend {
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
    /// How often every node is looked at again while serving.
    pub interval: Duration,
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

/// Looks at every node every `options.interval`, and at once when `reconnected` is notified,
/// for as long as the backend lives: logs a node turning unsafe once (and turning safe again),
/// and keeps `lockgate_redis_eviction_possible` up to date.
pub fn watch(
    backend: &Arc<Backend>,
    options: GuardOptions,
    reconnected: Arc<Notify>,
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
        let mut seen: HashMap<String, bool> = HashMap::new();
        loop {
            let Some(backend) = backend.upgrade() else {
                return;
            };
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
                    // An unreachable node is reported by the requests it fails; it is looked
                    // at again once it answers.
                    Err(error) => {
                        tracing::debug!(node = %look.node, %error, "could not read the memory policy");
                    }
                }
            }
            drop(backend);
            tokio::select! {
                () = tokio::time::sleep(options.interval) => {}
                () = reconnected.notified() => {}
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

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
