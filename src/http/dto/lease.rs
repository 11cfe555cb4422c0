//! The answers about a lease: a grant, a renewal, a reentrant lock's hold given back. Every
//! kind of lease answers with these (a permit, a shared grant and a set as a lock does).

use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use utoipa::ToSchema;

use super::expires_at;
use crate::lock::{Grant, LockName, LockToken, Primitive, Reentry, Renewal, Validity, millis};

/// A granted lock.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "name": "orders:42",
    "token": "Yq3v7M1b0nqzT0m6k9xW2A.1763712000123456",
    "fence": 1763712000123456u64,
    "ttl_ms": 29998,
    "expires_at": "2026-11-21T08:00:30.123Z"
}))]
pub struct LockGrantBody {
    pub name: String,
    /// Proof of ownership: send it in the `Lock-Token` header to renew or release. Keep it
    /// secret. Opaque to clients; it is exactly the value Redis keeps for the lock (128 random
    /// bits, a dot and the fence), so a plain Redis client can release the lock with the
    /// classic compare-and-delete.
    pub token: String,
    /// Strictly increases with every grant of this name. Pass it to the resource the lock
    /// protects, which should refuse writes with a smaller fence than one it has seen.
    /// Below 2^53, so it is exact in JavaScript.
    pub fence: u64,
    /// Milliseconds of validity left when the response was built; the time spent in the
    /// gateway and in Redis is already subtracted.
    pub ttl_ms: u64,
    /// When the lease ends, RFC 3339 (informative: compare clocks with care; rely on `ttl_ms`).
    #[schema(format = DateTime)]
    pub expires_at: String,
    /// Replicas that acknowledged the write; present when `replicas` was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas_acked: Option<u32>,
    /// For a bounded hold (`max_hold_ms`, `--max-hold`): milliseconds until renewals stop and
    /// the lock ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_hold_left_ms: Option<u64>,
    /// A multi-lock's names (`POST /locks`), sorted; `name` is the first. Renew and release
    /// the set with them: `PATCH /locks?name=…&name=…`, `DELETE /locks?name=…&name=…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
    /// A reentrant lock's (`reentrant: true`): how many times its holder holds it, that is
    /// how many releases free it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_count: Option<u32>,
}

/// A reentrant lock that gave back one hold and is still held (`DELETE /locks/{name}`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"name": "orders:42", "hold_count": 1}))]
pub struct LockHoldsBody {
    pub name: String,
    /// How many times its holder still holds it: how many more releases free it.
    pub hold_count: u32,
}

/// A lock with a minimum hold (`min_hold_ms`) released before it: still held until
/// `held_until`, then it expires (`DELETE /locks/{name}`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "name": "nightly-report",
    "held_left_ms": 2995000,
    "held_until": "2026-11-21T08:50:00.000Z"
}))]
pub struct LockHeldOnBody {
    pub name: String,
    /// Milliseconds the lock stays held: until its grant time plus `min_hold_ms`.
    pub held_left_ms: u64,
    /// When it ends, RFC 3339 (informative: rely on `held_left_ms`).
    #[schema(format = DateTime)]
    pub held_until: String,
}

impl LockHeldOnBody {
    pub fn new(name: &LockName, left: std::time::Duration) -> Self {
        Self {
            name: name.to_string(),
            held_left_ms: u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
            held_until: expires_at(left),
        }
    }
}

/// What a `DELETE /locks/{name}` that leaves the lock held answers with: one hold given back
/// of a reentrant lock, or a release before a minimum hold.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum LockReleaseBody {
    Holds(LockHoldsBody),
    HeldOn(LockHeldOnBody),
}

/// A renewed lease.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "name": "orders:42",
    "fence": 1763712000123456u64,
    "ttl_ms": 29999,
    "expires_at": "2026-11-21T08:01:00.456Z"
}))]
pub struct LockRenewalBody {
    pub name: String,
    /// The fence of the current grant.
    pub fence: u64,
    /// Milliseconds of validity left when the response was built.
    pub ttl_ms: u64,
    /// When the lease ends, RFC 3339 (informative).
    #[schema(format = DateTime)]
    pub expires_at: String,
    /// Replicas that acknowledged the renewal; present when `replicas` was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas_acked: Option<u32>,
    /// For a bounded hold: milliseconds until renewals stop and the lock ends (the lease is
    /// never renewed past that).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_hold_left_ms: Option<u64>,
}

/// `ttl_ms` and `expires_at` of a validity, read once so the two agree.
fn lease_times(validity: &Validity) -> (u64, String) {
    let remaining = validity.remaining(Instant::now());
    (millis(remaining), expires_at(remaining))
}

impl LockGrantBody {
    pub fn new<P: Primitive>(name: &LockName, grant: &Grant<P>) -> Self {
        let validity = (&grant.validity, grant.replicas_acked);
        Self::held(name, &grant.token, grant.fence, validity)
    }

    /// A reentrant lock's grant, taken once more with `token`.
    pub fn reentered(name: &LockName, token: &LockToken, reentry: &Reentry) -> Self {
        let validity = (&reentry.validity, reentry.replicas_acked);
        Self {
            hold_count: Some(reentry.holds),
            ..Self::held(name, token, reentry.fence, validity)
        }
    }

    /// The grant `token` holds with `fence`, its validity and the replicas that acknowledged
    /// it; a reentrant grant held once.
    fn held(
        name: &LockName,
        token: &LockToken,
        fence: u64,
        (validity, replicas_acked): (&Validity, Option<u32>),
    ) -> Self {
        let (ttl_ms, expires_at) = lease_times(validity);
        Self {
            name: name.to_string(),
            token: token.expose().to_owned(),
            fence,
            ttl_ms,
            expires_at,
            replicas_acked,
            max_hold_left_ms: token.hold_deadline().map(left_ms),
            names: None,
            hold_count: token.is_reentrant().then_some(1),
        }
    }

    /// This body as `body::to_body` writes it: JSON and a newline (a test holds the two
    /// together). By hand when no text needs escaping, which is always so for the names,
    /// tokens and times the gateway makes: serde_json checks every byte of every text and
    /// key against its escape table, about 1,900 instructions per grant. (A field added to
    /// the body must be written here too: the destructuring fails to compile until it is.)
    pub fn to_body(&self) -> serde_json::Result<Vec<u8>> {
        let Self {
            name,
            token,
            fence,
            ttl_ms,
            expires_at,
            replicas_acked,
            max_hold_left_ms,
            names,
            hold_count,
        } = self;
        // Every byte, without stopping at the first that is not: a loop the compiler vectorizes.
        let escaped = |b: u8| (b < 0x20) | (b == b'"') | (b == b'\\');
        let plain = |text: &str| !text.bytes().fold(false, |any, b| any | escaped(b));
        let listed = names.as_deref().unwrap_or_default();
        if !([name, token, expires_at]
            .into_iter()
            .chain(listed)
            .all(|text| plain(text)))
        {
            return super::super::body::to_body(self);
        }
        let mut out = Vec::with_capacity(256);
        let number = |out: &mut Vec<u8>, key: &[u8], n: u64| {
            out.extend_from_slice(key);
            serde_json::to_writer(out, &n)
        };
        out.extend_from_slice(b"{\"name\":\"");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\",\"token\":\"");
        out.extend_from_slice(token.as_bytes());
        number(&mut out, b"\",\"fence\":", *fence)?;
        number(&mut out, b",\"ttl_ms\":", *ttl_ms)?;
        out.extend_from_slice(b",\"expires_at\":\"");
        out.extend_from_slice(expires_at.as_bytes());
        out.push(b'"');
        if let Some(acked) = replicas_acked {
            number(&mut out, b",\"replicas_acked\":", u64::from(*acked))?;
        }
        if let Some(left) = max_hold_left_ms {
            number(&mut out, b",\"max_hold_left_ms\":", *left)?;
        }
        if names.is_some() {
            out.extend_from_slice(b",\"names\":[");
            for (i, name) in listed.iter().enumerate() {
                out.extend_from_slice(if i == 0 { b"\"" } else { b",\"" });
                out.extend_from_slice(name.as_bytes());
                out.push(b'"');
            }
            out.push(b']');
        }
        if let Some(count) = hold_count {
            number(&mut out, b",\"hold_count\":", u64::from(*count))?;
        }
        out.extend_from_slice(b"}\n");
        Ok(out)
    }

    /// Lists a multi-lock's names (`held`, from [`Leased::held_names`](crate::backend::Leased::held_names)).
    pub fn holding(mut self, held: Option<&[LockName]>) -> Self {
        self.names = held.map(|names| names.iter().map(LockName::to_string).collect());
        self
    }
}

impl LockRenewalBody {
    pub fn new(name: &LockName, renewal: &Renewal) -> Self {
        let (ttl_ms, expires_at) = lease_times(&renewal.validity);
        Self {
            name: name.to_string(),
            fence: renewal.fence,
            ttl_ms,
            expires_at,
            replicas_acked: renewal.replicas_acked,
            max_hold_left_ms: renewal.hold_deadline.map(left_ms),
        }
    }
}

/// Whole milliseconds from now until `deadline` (0 once passed).
fn left_ms(deadline: SystemTime) -> u64 {
    millis(
        deadline
            .duration_since(crate::wall_clock::now())
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body written by hand is serde_json's, byte for byte, with and without each
    /// optional field; a text that needs escaping goes through serde_json.
    #[test]
    fn a_grant_body_is_what_serde_json_writes() {
        let body = LockGrantBody {
            name: "orders:42".into(),
            token: "Yq3v7M1b0nqzT0m6k9xW2Aoh90000.1763712000123456".into(),
            fence: 1_763_712_000_123_456,
            ttl_ms: 29_998,
            expires_at: "2026-11-21T08:00:30.123Z".into(),
            replicas_acked: None,
            max_hold_left_ms: None,
            names: None,
            hold_count: None,
        };
        let every = LockGrantBody {
            replicas_acked: Some(2),
            max_hold_left_ms: Some(0),
            names: Some(vec!["a".into(), "b.c".into()]),
            hold_count: Some(u32::MAX),
            ..body.clone()
        };
        let none_named = LockGrantBody {
            names: Some(Vec::new()),
            ..body.clone()
        };
        let escaped = LockGrantBody {
            name: "a\"b\\c\u{1}é".into(),
            names: Some(vec!["x\ny".into()]),
            ..body.clone()
        };
        for body in [body, every, none_named, escaped] {
            let by_hand = body.to_body().expect("a body");
            assert_eq!(
                String::from_utf8(by_hand).expect("utf-8"),
                String::from_utf8(crate::http::body::to_body(&body).expect("a body"))
                    .expect("utf-8")
            );
        }
    }
}
