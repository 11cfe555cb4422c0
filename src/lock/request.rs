//! Lock requests in domain terms, and the bounds they must respect.
//!
//! The `http` module reads raw JSON numbers; this module decides what they mean (defaults) and
//! whether they are acceptable (bounds), so the rules hold whatever the transport.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::error::InvalidRequest;
use crate::backend::Holder;
use crate::backend::queue::MAX_PRIORITY;
pub use crate::backend::{DEFAULT_REPLICA_TIMEOUT, LeaseRequest, ReplicaPolicy};

/// Largest `replica_timeout_ms`. `WAIT` blocks a pooled connection this long at most.
pub const MAX_REPLICA_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest `replicas`.
pub const MAX_REPLICAS: u32 = 64;
/// Largest `max_hold_ms` when the server sets no `--max-hold`: 30 days.
pub const MAX_HOLD_CEILING: Duration = Duration::from_secs(30 * 24 * 3600);
/// Longest `owner`, in characters.
pub const MAX_OWNER_CHARS: usize = 128;
/// Largest `metadata`, in bytes of compact JSON. A holder record travels with every acquire
/// and inspect and lives in Redis beside the grant: a label and an address, not a document.
pub const MAX_METADATA_BYTES: usize = 1024;

/// Configured bounds on what clients may ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub default_ttl: Duration,
    pub min_ttl: Duration,
    pub max_ttl: Duration,
    pub max_wait: Duration,
    /// Most requests waiting for locks at once, all names together.
    pub max_waiters: usize,
    /// Longest any grant may be held, renewals included (`--max-hold`); `None`: no bound.
    pub max_hold: Option<Duration>,
    /// Most event streams open at once, all names together (`--max-watchers`).
    pub max_watchers: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenewRequest {
    pub ttl: Duration,
    pub replicas: ReplicaPolicy,
}

/// The lease fields of an acquire as a client sent them: what [`Limits::lease`] checks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawLease {
    pub ttl_ms: Option<u64>,
    pub wait_ms: Option<u64>,
    pub replicas: RawReplicas,
    pub max_hold_ms: Option<u64>,
    /// An exclusive lock's minimum hold; only a lock body has it.
    pub min_hold_ms: Option<u64>,
    pub owner: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    pub reentrant: bool,
    /// Wait in the name's fair queue (`fair: true`), at `priority` (0 to 9, only with it).
    pub fair: bool,
    pub priority: Option<u64>,
}

/// Raw replica fields as a client sent them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawReplicas {
    pub replicas: Option<u64>,
    pub replica_timeout_ms: Option<u64>,
    pub require_replicas: Option<bool>,
}

impl Limits {
    /// The lease a client asked for, with the defaults filled in, checked against every bound
    /// once: ttl, wait, replicas, the hold bound (`max_hold_ms` within `--min-ttl` and
    /// `--max-hold`, or the server's `--max-hold`; the ttl is cut to it), owner and metadata.
    pub fn lease(&self, raw: RawLease) -> Result<LeaseRequest, InvalidRequest> {
        let ttl = self.ttl(raw.ttl_ms)?;
        let wait = bounded(
            "wait_ms",
            raw.wait_ms.unwrap_or(0),
            Duration::ZERO,
            self.max_wait,
        )?;
        let replicas = replica_policy(raw.replicas)?;
        let max_hold = match raw.max_hold_ms {
            None => self.max_hold,
            Some(ms) => Some(bounded(
                "max_hold_ms",
                ms,
                self.min_ttl,
                self.max_hold.unwrap_or(MAX_HOLD_CEILING),
            )?),
        };
        let min_hold = raw
            .min_hold_ms
            .map(|ms| bounded("min_hold_ms", ms, Duration::ZERO, self.max_ttl))
            .transpose()?
            .filter(|min_hold| !min_hold.is_zero());
        let min_hold_ms = match min_hold {
            None => 0,
            Some(min_hold) => u32::try_from(min_hold.as_millis()).map_err(|_| InvalidRequest {
                field: "min_hold_ms",
                message: format!("must be at most {}", u32::MAX),
            })?,
        };
        if let Some(min_hold) = min_hold {
            // A release keeps the lock until the minimum: a bound renewals stop at would be
            // outlived.
            if max_hold.is_some_and(|max_hold| min_hold > max_hold) {
                return Err(InvalidRequest {
                    field: "min_hold_ms",
                    message: "must not exceed the hold's bound (max_hold_ms, --max-hold)"
                        .to_owned(),
                });
            }
            let with = if raw.reentrant {
                Some("reentrant: true")
            } else if raw.fair {
                Some("fair: true")
            } else {
                None
            };
            if let Some(with) = with {
                return Err(InvalidRequest {
                    field: "min_hold_ms",
                    message: format!("applies to a plain exclusive lock, not with {with}"),
                });
            }
        }
        let fair = match (raw.fair, raw.priority) {
            (false, None) => None,
            (false, Some(_)) => {
                return Err(InvalidRequest {
                    field: "priority",
                    message: "is a fair waiter's: send it with \"fair\": true".to_owned(),
                });
            }
            (true, priority) => Some(
                u8::try_from(priority.unwrap_or(0))
                    .ok()
                    .filter(|&p| p <= MAX_PRIORITY)
                    .ok_or_else(|| InvalidRequest {
                        field: "priority",
                        message: format!("must be between 0 and {MAX_PRIORITY}"),
                    })?,
            ),
        };
        Ok(LeaseRequest {
            ttl: max_hold.map_or(ttl, |bound| ttl.min(bound)),
            wait,
            replicas,
            holder: holder(raw.owner, raw.metadata)?,
            max_hold,
            min_hold_ms,
            reentrant: raw.reentrant,
            fair,
        })
    }

    pub fn renew(
        &self,
        ttl_ms: Option<u64>,
        replicas: RawReplicas,
    ) -> Result<RenewRequest, InvalidRequest> {
        Ok(RenewRequest {
            ttl: self.ttl(ttl_ms)?,
            replicas: replica_policy(replicas)?,
        })
    }

    fn ttl(&self, ttl_ms: Option<u64>) -> Result<Duration, InvalidRequest> {
        match ttl_ms {
            None => Ok(self.default_ttl),
            Some(ms) => bounded("ttl_ms", ms, self.min_ttl, self.max_ttl),
        }
    }
}

/// The holder of a grant, from the `owner` and `metadata` a client sent: an owner of 1 to
/// [`MAX_OWNER_CHARS`] characters without control characters (a pod name, `host:pid`), and a
/// JSON object of at most [`MAX_METADATA_BYTES`]. `None` when neither was sent.
pub fn holder(
    owner: Option<String>,
    metadata: Option<Map<String, Value>>,
) -> Result<Option<Arc<Holder>>, InvalidRequest> {
    if let Some(owner) = &owner {
        let chars = owner.chars().count();
        if chars == 0 || chars > MAX_OWNER_CHARS || owner.chars().any(char::is_control) {
            return Err(InvalidRequest {
                field: "owner",
                message: format!(
                    "must be 1 to {MAX_OWNER_CHARS} characters with no control characters"
                ),
            });
        }
    }
    if let Some(metadata) = &metadata {
        let bytes = serde_json::to_string(metadata).map_or(usize::MAX, |json| json.len());
        if bytes > MAX_METADATA_BYTES {
            return Err(InvalidRequest {
                field: "metadata",
                message: format!(
                    "must be a JSON object of at most {MAX_METADATA_BYTES} bytes (this one is {bytes})"
                ),
            });
        }
    }
    let holder = Holder { owner, metadata };
    Ok((!holder.is_empty()).then(|| Arc::new(holder)))
}

fn replica_policy(raw: RawReplicas) -> Result<ReplicaPolicy, InvalidRequest> {
    let replicas = raw.replicas.unwrap_or(0);
    if replicas > u64::from(MAX_REPLICAS) {
        return Err(InvalidRequest {
            field: "replicas",
            message: format!("must be between 0 and {MAX_REPLICAS}"),
        });
    }
    let timeout = match raw.replica_timeout_ms {
        None => DEFAULT_REPLICA_TIMEOUT,
        // WAIT with a timeout of 0 blocks forever: the lower bound is 1 ms.
        Some(ms) => bounded(
            "replica_timeout_ms",
            ms,
            Duration::from_millis(1),
            MAX_REPLICA_TIMEOUT,
        )?,
    };
    Ok(ReplicaPolicy {
        replicas: replicas as u32,
        timeout,
        required: raw.require_replicas.unwrap_or(false),
    })
}

fn bounded(
    field: &'static str,
    ms: u64,
    min: Duration,
    max: Duration,
) -> Result<Duration, InvalidRequest> {
    let value = Duration::from_millis(ms);
    if value < min || value > max {
        return Err(InvalidRequest {
            field,
            message: format!(
                "must be between {} and {} milliseconds",
                min.as_millis(),
                max.as_millis()
            ),
        });
    }
    Ok(value)
}

/// Limits for unit tests: the defaults of the flags, and room for 10 waiters and watchers.
#[cfg(test)]
pub(crate) const TEST_LIMITS: Limits = Limits {
    default_ttl: Duration::from_secs(30),
    min_ttl: Duration::from_millis(100),
    max_ttl: Duration::from_secs(3600),
    max_wait: Duration::from_secs(60),
    max_waiters: 10,
    max_hold: None,
    max_watchers: 10,
};

#[cfg(test)]
mod tests;
