//! Bodies of `/semaphores/{name}`. A permit's grant and renewal answer the lock's bodies
//! ([`super::LockGrantBody`], [`super::LockRenewalBody`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::{RawReplicas, expires_at, object, whole_number};
use crate::backend::GrantView;
use crate::backend::fence::granted_at;
use crate::lock::{LockName, SemaphoreState, millis};

super::acquire_body! {
    /// Body of `POST /semaphores/{name}`: the limit, and the lock's acquire settings.
    #[derive(Debug, Default, Clone, Deserialize, Serialize, ToSchema)]
    #[serde(deny_unknown_fields)]
    #[schema(example = json!({"permits": 5, "ttl_ms": 10000}))]
    pub struct SemaphoreAcquireBody {
        /// How many permits the semaphore has (1 to 10000). Required. Every holder must
        /// agree: while permits are held, a request with another number answers 409
        /// `permits-mismatch`.
        #[schema(minimum = 1, maximum = 10000, required = true)]
        #[serde(
            default,
            deserialize_with = "whole_number",
            skip_serializing_if = "Option::is_none"
        )]
        pub permits: Option<u64>,
    }
}

/// One permit held, as anyone may see it. Never its token.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PermitBody {
    /// The permit's fence (strictly increasing per name, across all permits).
    pub fence: Option<u64>,
    /// Milliseconds left on the permit's lease.
    pub ttl_ms: u64,
    /// When the permit's lease ends, RFC 3339 (informative).
    pub expires_at: String,
    /// When the permit was granted, RFC 3339, by Redis's clock (read from the fence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquired_at: Option<String>,
    /// The `owner` its holder gave on acquire, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The `metadata` its holder gave on acquire, if any.
    #[schema(value_type = std::collections::HashMap<String, serde_json::Value>, required = false)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// What `GET /semaphores/{name}` shows.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "name": "payments",
    "permits": 5,
    "in_use": 1,
    "holders": [{
        "fence": 1763712000123456u64,
        "ttl_ms": 21034,
        "expires_at": "2026-11-21T08:00:30.123Z",
        "acquired_at": "2026-11-21T08:00:00.123456Z",
        "owner": "worker-7f9c:4242"
    }],
    "waiting": 0
}))]
pub struct SemaphoreInfoBody {
    pub name: String,
    /// The limit the permits held were granted under; absent when none is held (the next
    /// grant sets it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permits: Option<u32>,
    /// Permits held now.
    pub in_use: u64,
    /// The permits held, the first to end first.
    pub holders: Vec<PermitBody>,
    /// Requests waiting for a permit in this gateway (others may wait in other gateways).
    pub waiting: u64,
}

impl PermitBody {
    pub(super) fn new(permit: GrantView) -> Self {
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

impl SemaphoreInfoBody {
    pub fn new(name: &LockName, state: SemaphoreState) -> Self {
        Self {
            name: name.to_string(),
            permits: state.limit,
            in_use: u64::try_from(state.permits.len()).unwrap_or(u64::MAX),
            holders: state.permits.into_iter().map(PermitBody::new).collect(),
            waiting: u64::try_from(state.waiting).unwrap_or(u64::MAX),
        }
    }
}

/// A page of semaphores with permits held (`GET /semaphores`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SemaphoreListBody {
    /// Semaphores with at least one permit held, as `GET /semaphores/{name}` shows each.
    pub semaphores: Vec<SemaphoreInfoBody>,
    /// Pass as `cursor` for the next page of the same listing (same `prefix`, same API key);
    /// absent when the listing is complete. Opaque: it says nothing about names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}
