//! Bodies of `/semaphores/{name}`. A permit's grant and renewal answer the lock's bodies
//! ([`LockGrantBody`](crate::http::dto::LockGrantBody),
//! [`LockRenewalBody`](crate::http::dto::LockRenewalBody)), and each permit held is shown as
//! a read/write lock's readers are ([`PermitBody`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::SemaphoreState;
use crate::http::dto::{PermitBody, acquire_body, object, whole_number};
use crate::lock::{LockName, RawReplicas};

acquire_body! {
    /// Body of `POST /semaphores/{name}`: the limit, and the lock's acquire settings.
    #[derive(Debug, Default, Clone, Deserialize, Serialize, ToSchema)]
    #[serde(deny_unknown_fields)]
    #[schema(example = json!({"permits": 5, "ttl_ms": 10000}))]
    pub struct SemaphoreAcquireBody {
        /// How many permits the semaphore has (1 to 10000). Required. Every holder must
        /// agree: while permits are held, a request with another number answers 409
        /// `permits-mismatch`.
        #[schema(minimum = 1, maximum = 10000, required = true, nullable = false)]
        #[serde(
            default,
            deserialize_with = "whole_number",
            skip_serializing_if = "Option::is_none"
        )]
        pub permits: Option<u64>,
    }
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
