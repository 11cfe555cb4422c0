//! The body of `POST /locks` (a multi-lock). Its grant and renewal answer the lock's bodies.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::{RawReplicas, object, whole_number};

super::acquire_body! {
    /// Body of `POST /locks`: the names, and the lock's acquire settings.
    #[derive(Debug, Default, Clone, Deserialize, Serialize, ToSchema)]
    #[serde(deny_unknown_fields)]
    #[schema(example = json!({"names": ["account:17", "account:42"], "ttl_ms": 10000}))]
    pub struct MultiAcquireBody {
        /// The locks to take together, 2 to 64 distinct names, in any order. Required. In a
        /// Redis Cluster they must map to one hash slot (else 400 `cross-slot`).
        #[schema(min_items = 2, max_items = 64, required = true)]
        #[serde(default)]
        pub names: Vec<String>,
    }
}
