//! Who holds a grant: the optional `owner` label and `metadata` object a client gave on
//! acquire, kept beside the grant and shown by inspect — never the token.
//!
//! The lock key's value stays exactly the token (so classic compare-and-delete clients keep
//! working); the holder goes in a key of its own, `<prefix>{<name>}:holder`, written by the
//! acquire script in the same atomic step as the grant, with the same ttl, extended by every
//! renewal and deleted by release and withdrawal. Only grants that name a holder write it, and
//! their tokens say so (the `o` mark, see `marks::Marks`): release, renew, withdrawal and
//! inspect touch the second key only for those, so grants without a holder cost what they
//! did before holders existed.
//!
//! The stored record is compact JSON carrying the fence of its grant first:
//! `{"fence":1763712000123456,"owner":"pod-a","metadata":{"addr":"10.0.0.7:8080"}}`. The
//! gateway builds the part after the fence; the script prepends the fence it issued
//! (`holder_record` in `scripts/grant.lua`, the twin of [`Holder::record`]: checked against it
//! by `tests/it/grant_rules.rs`). A record
//! counts only while its fence is the current grant's, so one that outlives its grant (a
//! native `DELIFEQ` release cannot delete a second key; the record then expires at its ttl)
//! is never shown for the next holder.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The owner and metadata of a grant, as the client gave them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Holder {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A record as the store keeps it.
#[derive(Deserialize)]
struct Stored {
    fence: u64,
    #[serde(flatten)]
    holder: Holder,
}

/// What goes before the gateway's part of a record.
const FENCE_FIELD: &str = "{\"fence\":";

impl Holder {
    /// Whether there is anything to store.
    pub fn is_empty(&self) -> bool {
        self.owner.is_none() && self.metadata.is_none()
    }

    /// The record without its fence, as the acquire script takes it: the fields of a JSON
    /// object after its opening brace (`"owner":"pod-a"}`), so that the script only has to
    /// put `{"fence":<fence>,` in front.
    pub fn fields(&self) -> String {
        let object = serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned());
        object[1..].to_owned()
    }

    /// The whole record of a grant with `fence` (what the script writes).
    pub fn record(&self, fence: u64) -> String {
        format!("{FENCE_FIELD}{fence},{}", self.fields())
    }

    /// The holder a stored record names, if it belongs to the grant with `fence`.
    pub fn of_record(record: &[u8], fence: Option<u64>) -> Option<Self> {
        let stored: Stored = serde_json::from_slice(record).ok()?;
        (Some(stored.fence) == fence).then_some(stored.holder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_a() -> Holder {
        Holder {
            owner: Some("pod-a".into()),
            metadata: serde_json::from_str(r#"{"addr":"10.0.0.7:8080"}"#).ok(),
        }
    }

    #[test]
    fn a_record_carries_its_grant_fence_first() {
        assert_eq!(
            pod_a().record(17),
            r#"{"fence":17,"owner":"pod-a","metadata":{"addr":"10.0.0.7:8080"}}"#
        );
        let owner_only = Holder {
            owner: Some("a\"b".into()),
            metadata: None,
        };
        assert_eq!(owner_only.fields(), r#""owner":"a\"b"}"#);
    }

    #[test]
    fn a_record_counts_only_for_its_own_grant() {
        let record = pod_a().record(17);
        assert_eq!(
            Holder::of_record(record.as_bytes(), Some(17)),
            Some(pod_a())
        );
        assert_eq!(Holder::of_record(record.as_bytes(), Some(18)), None);
        assert_eq!(Holder::of_record(record.as_bytes(), None), None);
        assert_eq!(Holder::of_record(b"not json", Some(17)), None);
    }
}
