//! The JSON bodies of the API. Durations are integer milliseconds in fields ending in `_ms`.
//! Request bodies refuse unknown fields, so a typo (`ttl` for `ttl_ms`) is an error rather
//! than a silently ignored setting. That is also why the replica fields are repeated in both
//! request bodies instead of shared through `#[serde(flatten)]`: serde cannot refuse unknown
//! fields of a flattened struct.

mod info;
mod lease;
mod multi;

pub use info::{LockInfoBody, LockListBody, PermitBody};
pub use lease::{LockGrantBody, LockHeldOnBody, LockHoldsBody, LockReleaseBody, LockRenewalBody};
pub use multi::MultiAcquireBody;

use std::time::Duration;

use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::lock::RawReplicas;
use crate::telemetry::rfc3339::{self, Fraction};

/// Declares a body of an acquire: its own fields, then the lease settings every acquire
/// takes (`ttl_ms`, `wait_ms`, replicas, `max_hold_ms`, `owner`, `metadata`), with
/// `replicas()` and `lease()` (the settings, as the lease engine checks them). One declaration per
/// primitive keeps each body a flat object that rejects unknown fields and names the field at
/// fault, which `#[serde(flatten)]` would not. A `lock` body (an acquire of a lock, or its
/// hold stream) adds a place in the lock's fair queue (`fair`, `priority`) after its own fields.
macro_rules! acquire_body {
    (
        lock
        $(#[$attr:meta])*
        pub struct $name:ident {
            $($(#[$field_attr:meta])* pub $field:ident: $type:ty,)*
        }
    ) => {
        $crate::http::dto::acquire_body! {
            $(#[$attr])*
            pub struct $name {
                $($(#[$field_attr])* pub $field: $type,)*
    /// `true`: wait in the lock's fair queue, kept in Redis for every gateway: grants go
    /// in queue order (higher `priority` first, then arrival), and an acquire that is not
    /// fair never overtakes a waiting queue. Only with `wait_ms` > 0 does a request take a
    /// place; not with `mode: "shared"`. Default false.
    // No `default` here: with it, serde would also accept `[]` as a body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair: Option<bool>,
    /// A fair waiter's priority, 0 to 9 (higher first; FIFO within a priority). Only with
    /// `fair: true`. Default 0.
    #[schema(minimum = 0, maximum = 9)]
    #[serde(
        default,
        deserialize_with = "whole_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub priority: Option<u64>,
    /// Shortest the lock is held, in milliseconds from the grant ("at most once per
    /// schedule", ShedLock's `lockAtLeastFor`): a release before then answers 200 with
    /// `held_until` and leaves the lock held until then (it expires; nobody else gets it
    /// meanwhile). At most `--max-ttl`, and at most `max_hold_ms`. An exclusive lock's only:
    /// not with `mode: "shared"`, `reentrant` or `fair`. Default none.
    #[serde(
        default,
        deserialize_with = "whole_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub min_hold_ms: Option<u64>,
            }
        }

        impl $name {
            /// The lock body's own fields (`shared`: it asked for `mode: "shared"`).
            pub fn lock_fields(&self, shared: bool) -> $crate::http::dto::LockFields {
                $crate::http::dto::LockFields {
                    shared,
                    fair: self.fair,
                    priority: self.priority,
                    min_hold_ms: self.min_hold_ms,
                }
            }
        }
    };
    (
        $(#[$attr:meta])*
        pub struct $name:ident {
            $($(#[$field_attr:meta])* pub $field:ident: $type:ty,)*
        }
    ) => {
        $(#[$attr])*
        pub struct $name {
            $($(#[$field_attr])* pub $field: $type,)*
    /// Lease length in milliseconds. Default 30000 (`--default-ttl`); bounded by the server's
    /// `--min-ttl` and `--max-ttl`, which the bounds here show.
    #[serde(
        default,
        deserialize_with = "whole_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub ttl_ms: Option<u64>,
    /// How long to wait for a held lock, in milliseconds. Default 0: try once. Bounded by the
    /// server's `--max-wait`.
    #[serde(
        default,
        deserialize_with = "whole_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub wait_ms: Option<u64>,
    /// Replicas that must acknowledge the write (Redis `WAIT`). Default 0: do not wait.
    #[schema(maximum = 64)]
    #[serde(
        default,
        deserialize_with = "whole_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub replicas: Option<u64>,
    /// How long to wait for replica acknowledgements, in milliseconds (1 to 10000).
    /// Default 100.
    #[schema(minimum = 1, maximum = 10000)]
    #[serde(
        default,
        deserialize_with = "whole_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub replica_timeout_ms: Option<u64>,
    /// When fewer than `replicas` acknowledge: release the lock and answer 503
    /// `insufficient-replicas`. Default false: report `replicas_acked` and keep the lock.
    // No `default` here: with it, serde would also accept `[]` as a body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_replicas: Option<bool>,
    /// Longest the lock may be held, renewals included, in milliseconds: renewals past it
    /// answer 409 `max-hold-reached` and a hold stream ends with a `max-hold-reached` event.
    /// Bounded by the server's `--max-hold` (at most 30 days without it); at least `--min-ttl`.
    /// The first lease is cut to it. Default: the server's `--max-hold`, if any.
    #[serde(
        default,
        deserialize_with = "whole_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_hold_ms: Option<u64>,
    /// Who takes the lock: a short label (1 to 128 characters, no control characters), e.g.
    /// a pod name or `host:pid`. Kept beside the grant and shown by `GET /locks/{name}`.
    #[schema(min_length = 1, max_length = 128, pattern = r"^[^\x00-\x1F\x7F-\x9F]*$", example = "worker-7f9c:4242")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Anything else worth telling whoever inspects the lock (a leader's address), as a JSON
    /// object of at most 1024 bytes. Kept beside the grant and shown by `GET /locks/{name}`.
    /// Omit it for none (`null` is refused, as the schema says: an object).
    #[schema(value_type = std::collections::HashMap<String, serde_json::Value>, required = false, example = json!({"addr": "10.0.0.7:8080"}))]
    #[serde(
        default,
        deserialize_with = "object",
        skip_serializing_if = "Option::is_none"
    )]
    pub metadata: Option<Map<String, Value>>,
        }

        impl $name {
            pub fn replicas(&self) -> RawReplicas {
                RawReplicas {
                    replicas: self.replicas,
                    replica_timeout_ms: self.replica_timeout_ms,
                    require_replicas: self.require_replicas,
                }
            }

            /// The lease settings, for [`crate::lock::Limits::lease`] to check.
            pub fn lease(self) -> $crate::lock::RawLease {
                $crate::lock::RawLease {
                    replicas: self.replicas(),
                    ttl_ms: self.ttl_ms,
                    wait_ms: self.wait_ms,
                    max_hold_ms: self.max_hold_ms,
                    min_hold_ms: None,
                    owner: self.owner,
                    metadata: self.metadata,
                    reentrant: false,
                    fair: false,
                    priority: None,
                }
            }
        }
    };
}
pub(crate) use acquire_body;

acquire_body! {
    lock
    /// Body of `POST /locks/{name}`. Every field is optional; an empty body means all defaults.
    #[derive(Debug, Default, Clone, Deserialize, Serialize, ToSchema)]
    #[serde(deny_unknown_fields)]
    #[schema(example = json!({"ttl_ms": 10000}))]
    pub struct AcquireBody {
        /// `exclusive` (the default: one holder, a writer) or `shared` (many holders at once,
        /// readers; none while a writer holds it, and none new while a writer waits). Each
        /// shared holder has its own token, fence and ttl, renewed and released as a lock's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub mode: Option<LockMode>,
        /// `true`: a reentrant lock. Its holder may take it again by sending this body with
        /// its token in the `Lock-Token` header (200, the same token and fence, `hold_count`
        /// one more, the lease made to last at least `ttl_ms`); each `DELETE` gives back one
        /// hold, and the lock is free when the last is given back. Not with `mode: "shared"`,
        /// a hold stream, or (a re-entry) an `Idempotency-Key`. Default false.
        // No `default` here: with it, serde would also accept `[]` as a body.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub reentrant: Option<bool>,
    }
}

acquire_body! {
    lock
    /// Body of `POST /locks/{name}/hold`: as an acquire's, but a hold stream's lock is never
    /// reentrant (nothing but the stream holds its token to take it again).
    #[derive(Debug, Default, Clone, Deserialize, Serialize, ToSchema)]
    #[serde(deny_unknown_fields)]
    #[schema(example = json!({"ttl_ms": 10000}))]
    pub struct HoldBody {
        /// `exclusive` (the default) or `shared`, as for `POST /locks/{name}`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub mode: Option<LockMode>,
    }
}

/// A lock body's own fields: the fair queue's (`fair`, `priority`) and the minimum hold
/// (`min_hold_ms`), which only an exclusive lock takes (see `acquiring::lock_lease`).
#[derive(Debug, Clone, Copy)]
pub struct LockFields {
    /// The body asked for `mode: "shared"`.
    pub shared: bool,
    pub fair: Option<bool>,
    pub priority: Option<u64>,
    pub min_hold_ms: Option<u64>,
}

/// How a lock is held: by one writer, or by readers sharing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LockMode {
    Exclusive,
    Shared,
}

/// Body of `PATCH /locks/{name}`. Every field is optional; an empty body renews for the
/// default ttl.
#[derive(Debug, Default, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"ttl_ms": 30000}))]
pub struct RenewBody {
    /// New lease length in milliseconds, counted from now. Default 30000 (`--default-ttl`);
    /// bounded by `--min-ttl` and `--max-ttl`.
    #[serde(
        default,
        deserialize_with = "whole_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub ttl_ms: Option<u64>,
    /// Replicas that must acknowledge the renewal (Redis `WAIT`). Default 0.
    #[schema(maximum = 64)]
    #[serde(
        default,
        deserialize_with = "whole_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub replicas: Option<u64>,
    /// How long to wait for replica acknowledgements, in milliseconds (1 to 10000).
    /// Default 100.
    #[schema(minimum = 1, maximum = 10000)]
    #[serde(
        default,
        deserialize_with = "whole_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub replica_timeout_ms: Option<u64>,
    /// When fewer than `replicas` acknowledge, answer 503 `insufficient-replicas`. The lock
    /// stays held (its primary did renew it). Default false.
    // No `default` here: with it, serde would also accept `[]` as a body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_replicas: Option<bool>,
}

impl RenewBody {
    pub fn replicas(&self) -> RawReplicas {
        RawReplicas {
            replicas: self.replicas,
            replica_timeout_ms: self.replica_timeout_ms,
            require_replicas: self.require_replicas,
        }
    }
}

/// A JSON object, present (absent is `None` through `#[serde(default)]`): `null` is refused,
/// so that the schema can say "an object" and generated clients get one plain model.
pub(crate) fn object<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Map<String, Value>>, D::Error> {
    Map::deserialize(deserializer).map(Some)
}

/// A non-negative whole number, or null. Like JSON Schema's `integer`, accepts a number with
/// a zero fraction (`2.0`, which Python's json module writes for a float), refuses `1.5`.
pub(crate) fn whole_number<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    struct WholeNumber;

    impl<'de> Visitor<'de> for WholeNumber {
        type Value = Option<u64>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a non-negative whole number")
        }

        fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
            Ok(Some(value))
        }

        fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
            u64::try_from(value)
                .map(Some)
                .map_err(|_| E::invalid_value(Unexpected::Signed(value), &self))
        }

        fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
            // 2^64 as f64; every whole f64 below it converts exactly.
            if value.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&value) {
                return Ok(Some(value as u64));
            }
            Err(E::invalid_value(Unexpected::Float(value), &self))
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }

    deserializer.deserialize_any(WholeNumber)
}

pub(crate) fn expires_at(remaining: Duration) -> String {
    rfc3339::text(crate::wall_clock::now() + remaining, Fraction::Millis)
}
