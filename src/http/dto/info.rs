//! What inspect and listing answer about a held lock (`GET /locks/{name}`, `GET /locks`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::{LockMode, expires_at, whole_number};
use crate::backend::fence::granted_at;
use crate::backend::{GrantView, QueuedWaiter};
use crate::lock::wait::WaiterView;
use crate::lock::{LockName, LockState, millis};

/// What anyone may see of a held lock. Never the token.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "name": "orders:42",
    "held": true,
    "ttl_ms": 21034,
    "expires_at": "2026-11-21T08:00:30.123Z",
    "fence": 1763712000123456u64,
    "acquired_at": "2026-11-21T08:00:00.123456Z",
    "owner": "worker-7f9c:4242",
    "metadata": {"addr": "10.0.0.7:8080"},
    "waiting": 0
}))]
pub struct LockInfoBody {
    pub name: String,
    /// Always true: a lock that is not held answers 404 `lock-not-held`.
    pub held: bool,
    /// Milliseconds left on the current lease; absent when the key has no expiry (written by
    /// a client other than lockgate).
    #[serde(
        default,
        deserialize_with = "whole_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub ttl_ms: Option<u64>,
    /// When the current lease ends, RFC 3339 (informative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
    /// The fence of the current grant; absent for a lock taken by another Redis client
    /// (its token carries none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    /// When the current grant was made, RFC 3339 to the microsecond, by Redis's clock (read
    /// from the fence, which is that time unless grants came faster than one per
    /// microsecond). Absent when the fence is not a timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub acquired_at: Option<String>,
    /// The `owner` the holder gave on acquire; absent when it gave none (or took the lock
    /// with another Redis client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The `metadata` the holder gave on acquire; absent when it gave none.
    #[schema(value_type = std::collections::HashMap<String, serde_json::Value>, required = false)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// A reentrant lock's (`reentrant: true`): how many times its holder holds it, that is
    /// how many releases free it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_count: Option<u32>,
    /// Requests waiting for this lock in this gateway (others may wait in other gateways).
    #[serde(default)]
    pub waiting: u64,
    /// The first 16 of them, the longest waiting first: the `owner` and `metadata` each sent
    /// (where it sent any), how long it has waited, and whether in the fair queue. Absent when
    /// none wait here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiters: Vec<WaiterBody>,
    /// Fair waiters (`fair: true`) in the lock's queue, every gateway's together; absent
    /// when none wait. Waiters of a gateway that died are counted until they reach the
    /// head of the queue, where they are skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<u32>,
    /// The first 16 places of that queue whose gateway is alive, in order (the first is
    /// next): each waiter's `owner` (where it sent one), priority, how long it has had its
    /// place, and whether it waits in this gateway. Absent when none wait.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queue: Vec<QueuedBody>,
    /// `exclusive` (one holder: the fields above are its) or `shared` (readers hold it: each
    /// is in `shared_holders`, and `ttl_ms` is the longest's).
    #[serde(default = "exclusive")]
    pub mode: LockMode,
    /// While readers hold the lock: each of them, the first to end first. Never a token.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_holders: Vec<PermitBody>,
}

fn exclusive() -> LockMode {
    LockMode::Exclusive
}

/// A page of held locks (`GET /locks`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "locks": [{
        "name": "orders:42",
        "held": true,
        "ttl_ms": 21034,
        "expires_at": "2026-11-21T08:00:30.123Z",
        "fence": 1763712000123456u64,
        "acquired_at": "2026-11-21T08:00:00.123456Z",
        "owner": "worker-7f9c:4242",
        "waiting": 0
    }],
    "next_cursor": "q8Zk3J0uV1fT7cYw2nB5xR9mA4LhE6sPdGiKoWjUyXeN0bQvC-tF_aM1zH3lD8rS"
}))]
pub struct LockListBody {
    /// Held locks, as `GET /locks/{name}` shows each.
    pub locks: Vec<LockInfoBody>,
    /// Pass as `cursor` for the next page of the same listing (same `prefix`, same API key);
    /// absent when the listing is complete. Opaque: it says nothing about names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

impl LockInfoBody {
    pub fn new(name: &LockName, state: LockState) -> Self {
        let mode = if state.is_shared() {
            LockMode::Shared
        } else {
            LockMode::Exclusive
        };
        let (owner, metadata) = state
            .holder
            .map_or((None, None), |holder| (holder.owner, holder.metadata));
        Self {
            name: name.to_string(),
            held: true,
            ttl_ms: state.ttl.map(millis),
            expires_at: state.ttl.map(expires_at),
            fence: state.fence,
            acquired_at: state
                .granted_at
                .map(|at| humantime::format_rfc3339_micros(at).to_string()),
            owner,
            metadata,
            hold_count: state.holds,
            waiting: u64::try_from(state.waiting).unwrap_or(u64::MAX),
            waiters: state.waiters.into_iter().map(WaiterBody::new).collect(),
            queued: (state.queued > 0).then_some(state.queued),
            queue: state.queue.into_iter().map(QueuedBody::new).collect(),
            mode,
            shared_holders: state.shared.into_iter().map(PermitBody::new).collect(),
        }
    }
}

/// A request waiting for a lock in this gateway, as anyone may see it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WaiterBody {
    /// The `owner` it sent with its acquire, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The `metadata` it sent, if any.
    #[schema(value_type = std::collections::HashMap<String, serde_json::Value>, required = false)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Milliseconds it has waited so far.
    pub waited_ms: u64,
    /// It waits in the lock's fair queue (`fair: true`).
    #[serde(default)]
    pub fair: bool,
}

impl WaiterBody {
    fn new(waiter: WaiterView) -> Self {
        let (owner, metadata) = waiter.holder.map_or((None, None), |holder| {
            (holder.owner.clone(), holder.metadata.clone())
        });
        Self {
            owner,
            metadata,
            waited_ms: millis(waiter.since.elapsed()),
            fair: waiter.fair,
        }
    }
}

/// A place in a lock's fair queue, as anyone may see it (any gateway's waiter).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct QueuedBody {
    /// The `owner` its waiter sent with its acquire, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The `priority` it asked, 0 to 9 (9 first).
    #[schema(maximum = 9)]
    pub priority: u8,
    /// Milliseconds since it took its place, by Redis's clock against this gateway's
    /// (informative); absent for a place an older lockgate took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
    /// Its waiter waits in this gateway (it is then also among `waiters`).
    #[serde(default)]
    pub here: bool,
}

impl QueuedBody {
    fn new(place: QueuedWaiter) -> Self {
        Self {
            owner: place.owner,
            priority: place.priority,
            waited_ms: place.since.map(|since| {
                millis(
                    crate::wall_clock::now()
                        .duration_since(since)
                        .unwrap_or_default(),
                )
            }),
            here: place.here,
        }
    }
}

// Shown for a semaphore's permits and a read/write lock's readers alike (the schema's name and
// words are the first's, kept so as not to change the document).
/// One permit held, as anyone may see it. Never its token.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PermitBody {
    /// The permit's fence (strictly increasing per name, across all permits).
    pub fence: Option<u64>,
    /// Milliseconds left on the permit's lease.
    pub ttl_ms: u64,
    /// When the permit's lease ends, RFC 3339 (informative).
    #[schema(format = DateTime)]
    pub expires_at: String,
    /// When the permit was granted, RFC 3339, by Redis's clock (read from the fence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub acquired_at: Option<String>,
    /// The `owner` its holder gave on acquire, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The `metadata` its holder gave on acquire, if any.
    #[schema(value_type = std::collections::HashMap<String, serde_json::Value>, required = false)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl PermitBody {
    pub fn new(permit: GrantView) -> Self {
        let (owner, metadata) = permit
            .holder
            .map_or((None, None), |holder| (holder.owner, holder.metadata));
        Self {
            fence: permit.fence,
            ttl_ms: millis(permit.ttl),
            expires_at: expires_at(permit.ttl),
            acquired_at: permit
                .fence
                .and_then(granted_at)
                .map(|at| humantime::format_rfc3339_micros(at).to_string()),
            owner,
            metadata,
        }
    }
}
