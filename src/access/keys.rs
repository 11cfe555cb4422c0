//! API keys: who may do what to which lock names.
//!
//! Keys come from a JSON document (a file, or an environment variable):
//!
//! ```json
//! [
//!   {"name": "deployer", "key": "a long random string", "prefixes": ["deploy:"]},
//!   {"name": "batch", "sha256": "<hex SHA-256 of the key>", "prefixes": ["jobs:", "reports:"],
//!    "operations": ["acquire", "release", "inspect"]},
//!   {"name": "prometheus", "key": "…", "prefixes": [], "operations": ["metrics"]}
//! ]
//! ```
//!
//! * `key` (at least 16 characters) or `sha256` (the key's SHA-256 in hex, so the file need
//!   not hold the secret itself): exactly one.
//! * `prefixes`: the lock names the key covers are those starting with one of them; `""`
//!   covers every name, `[]` none.
//! * `operations`: any of `acquire`, `renew`, `release`, `inspect`, `hold`, `metrics`;
//!   default: the five lock operations.
//!
//! In memory only the SHA-256 of each key is kept. A presented key is hashed and compared
//! with every stored digest in constant time, all of them whatever matches, so neither the
//! time taken nor the order of keys tells anything about a key.

use std::collections::HashSet;
use std::sync::Arc;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::operation::Operation;

/// Shortest key accepted in plain text.
pub const MIN_KEY_LEN: usize = 16;

/// The configured keys.
#[derive(Clone)]
pub struct ApiKeys {
    keys: Vec<Arc<ApiKey>>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.keys.iter().map(|k| &k.name))
            .finish()
    }
}

/// One key: its name (for logs), the digest of its secret, and what it allows.
pub struct ApiKey {
    pub name: String,
    digest: [u8; 32],
    prefixes: Vec<String>,
    operations: Vec<Operation>,
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKey")
            .field("name", &self.name)
            .field("prefixes", &self.prefixes)
            .field("operations", &self.operations)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    name: String,
    key: Option<String>,
    sha256: Option<String>,
    prefixes: Vec<String>,
    operations: Option<Vec<String>>,
}

impl ApiKeys {
    /// Reads the JSON document described in the module docs. The error is one line and never
    /// contains a key.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let entries: Vec<KeyEntry> = serde_json::from_str(text).map_err(|e| {
            // serde's messages quote offending values, which could be a key: say where only.
            format!(
                "API keys: not a JSON list of keys (line {}, column {})",
                e.line(),
                e.column()
            )
        })?;
        if entries.is_empty() {
            return Err("API keys: the list is empty".into());
        }
        let mut names = HashSet::new();
        let mut digests = HashSet::new();
        let mut keys = Vec::with_capacity(entries.len());
        for entry in entries {
            let name = entry.name;
            if name.is_empty() || !names.insert(name.clone()) {
                return Err(format!("API keys: empty or repeated name {name:?}"));
            }
            let digest = match (entry.key, entry.sha256) {
                (Some(key), None) if key.len() >= MIN_KEY_LEN && key.is_ascii() => {
                    Sha256::digest(key.as_bytes()).into()
                }
                (Some(_), None) => {
                    return Err(format!(
                        "API keys: key {name:?} is shorter than {MIN_KEY_LEN} characters or not ASCII"
                    ));
                }
                (None, Some(hex)) => parse_digest(&hex).ok_or_else(|| {
                    format!("API keys: sha256 of {name:?} is not 64 hexadecimal digits")
                })?,
                _ => {
                    return Err(format!(
                        "API keys: {name:?} needs exactly one of \"key\" and \"sha256\""
                    ));
                }
            };
            if !digests.insert(digest) {
                return Err(format!("API keys: {name:?} repeats another entry's key"));
            }
            let operations = match entry.operations {
                None => Operation::ALL
                    .into_iter()
                    .filter(|op| op.allowed_by_default() && op.authorized_as() == *op)
                    .collect(),
                Some(names) => names
                    .iter()
                    .map(|op| {
                        Operation::from_key_operation(op).ok_or_else(|| {
                            format!("API keys: {name:?} has an unknown operation {op:?}")
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            };
            keys.push(Arc::new(ApiKey {
                name,
                digest,
                prefixes: entry.prefixes,
                operations,
            }));
        }
        Ok(Self { keys })
    }

    /// The key whose secret is `presented`, if any.
    pub fn authenticate(&self, presented: &[u8]) -> Option<Arc<ApiKey>> {
        let digest: [u8; 32] = Sha256::digest(presented).into();
        let mut found = None;
        for key in &self.keys {
            if bool::from(key.digest.ct_eq(&digest)) {
                found = Some(key.clone());
            }
        }
        found
    }
}

impl ApiKey {
    /// Whether this key may do `operation`, on the lock `name` for lock operations.
    pub fn allows(&self, operation: Operation, name: Option<&str>) -> bool {
        let operation = operation.authorized_as();
        if operation == Operation::Openapi {
            return true;
        }
        if !self.operations.contains(&operation) {
            return false;
        }
        match name {
            Some(name) => self.prefixes.iter().any(|p| name.starts_with(p.as_str())),
            None => !operation.is_lock_operation(),
        }
    }
}

impl ApiKey {
    /// The name prefixes it covers (`""`: every name).
    pub fn prefixes(&self) -> &[String] {
        &self.prefixes
    }

    /// The operations it allows.
    pub fn operations(&self) -> &[Operation] {
        &self.operations
    }

    /// The prefixes under `prefix` whose names this key may `operation` on, none covering
    /// another, in order: a listing of `prefix` walks these and nothing else, so that what it
    /// answers (its locks, whether a page is full, its cursors) depends only on names the key
    /// may see. Empty when the key may see nothing under `prefix`.
    pub fn prefixes_within(&self, operation: Operation, prefix: &str) -> Vec<String> {
        if !self.operations.contains(&operation.authorized_as()) {
            return Vec::new();
        }
        let mut within: Vec<String> = self
            .prefixes
            .iter()
            .filter_map(|own| {
                if own.starts_with(prefix) {
                    Some(own.clone())
                } else if prefix.starts_with(own.as_str()) {
                    Some(prefix.to_owned())
                } else {
                    None
                }
            })
            .collect();
        within.sort_unstable();
        within.dedup();
        // Sorted, a prefix comes right before the prefixes it covers.
        let mut kept: Vec<String> = Vec::with_capacity(within.len());
        for p in within {
            if !kept
                .last()
                .is_some_and(|shorter| p.starts_with(shorter.as_str()))
            {
                kept.push(p);
            }
        }
        kept
    }
}

fn parse_digest(hex: &str) -> Option<[u8; 32]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (out, pair) in digest.iter_mut().zip(bytes.chunks_exact(2)) {
        let text = std::str::from_utf8(pair).ok()?;
        *out = u8::from_str_radix(text, 16).ok()?;
    }
    Some(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &str = r#"[
        {"name": "deployer", "key": "deployer-key-0123456789", "prefixes": ["deploy:"]},
        {"name": "batch", "sha256": "SHA", "prefixes": ["jobs:", "reports:"],
         "operations": ["acquire", "inspect"]},
        {"name": "scraper", "key": "scraper-key-0123456789", "prefixes": [], "operations": ["metrics"]}
    ]"#;

    fn keys() -> ApiKeys {
        let sha: [u8; 32] = Sha256::digest(b"batch-key-0123456789").into();
        let hex: String = sha.iter().map(|b| format!("{b:02x}")).collect();
        ApiKeys::from_json(&KEYS.replace("SHA", &hex)).expect("valid keys")
    }

    /// The key of `secret`, which must be known.
    fn known(keys: &ApiKeys, secret: &[u8]) -> Arc<ApiKey> {
        keys.authenticate(secret).expect("known")
    }

    #[test]
    fn keys_authenticate_by_secret_or_digest() {
        let keys = keys();
        let deployer = known(&keys, b"deployer-key-0123456789");
        assert_eq!(deployer.name, "deployer");
        let batch = known(&keys, b"batch-key-0123456789");
        assert_eq!(batch.name, "batch");
        assert!(keys.authenticate(b"deployer-key-012345678").is_none());
        assert!(keys.authenticate(b"").is_none());
    }

    #[test]
    fn scopes_limit_names_and_operations() {
        let keys = keys();
        let deployer = known(&keys, b"deployer-key-0123456789");
        assert!(deployer.allows(Operation::Acquire, Some("deploy:web")));
        assert!(deployer.allows(Operation::Hold, Some("deploy:")));
        assert!(!deployer.allows(Operation::Acquire, Some("jobs:1")));
        assert!(!deployer.allows(Operation::Acquire, Some("deplo")));
        assert!(!deployer.allows(Operation::Metrics, None));
        assert!(deployer.allows(Operation::Openapi, None));
        let batch = known(&keys, b"batch-key-0123456789");
        assert!(batch.allows(Operation::Inspect, Some("reports:q3")));
        assert!(!batch.allows(Operation::Release, Some("jobs:1")));
        let scraper = known(&keys, b"scraper-key-0123456789");
        assert!(scraper.allows(Operation::Metrics, None));
        assert!(!scraper.allows(Operation::Inspect, Some("x")));
    }

    #[test]
    fn a_listing_walks_only_what_the_key_may_see() {
        let keys = ApiKeys::from_json(
            r#"[{"name": "t", "key": "team-key-0123456789", "prefixes": ["jobs:", "reports:q", "reports:", "app:x1"],
                 "operations": ["inspect"]},
                {"name": "w", "key": "write-key-0123456789", "prefixes": [""], "operations": ["acquire"]}]"#,
        )
        .expect("valid");
        let team = keys.authenticate(b"team-key-0123456789").expect("known");
        let within = |prefix| team.prefixes_within(Operation::Inspect, prefix);
        assert_eq!(within(""), ["app:x1", "jobs:", "reports:"]);
        assert_eq!(within("jobs:1"), ["jobs:1"]);
        assert_eq!(within("reports:q3"), ["reports:q3"]);
        assert_eq!(within("app:"), ["app:x1"]);
        assert!(within("other:").is_empty());
        assert!(within("app:y").is_empty());
        let writer = keys.authenticate(b"write-key-0123456789").expect("known");
        assert!(writer.prefixes_within(Operation::Inspect, "").is_empty());
    }

    #[test]
    fn bad_documents_are_refused_without_echoing_keys() {
        let cases = [
            "not json",
            "[]",
            r#"[{"name": "a", "key": "short", "prefixes": []}]"#,
            r#"[{"name": "a", "prefixes": []}]"#,
            r#"[{"name": "a", "key": "long-enough-secret-1", "sha256": "00", "prefixes": []}]"#,
            r#"[{"name": "a", "sha256": "zz", "prefixes": []}]"#,
            r#"[{"name": "a", "key": "long-enough-secret-1", "prefixes": [], "operations": ["delete"]}]"#,
            r#"[{"name": "a", "key": "long-enough-secret-1", "prefixes": [], "extra": 1}]"#,
            r#"[{"name": "a", "key": "long-enough-secret-1", "prefixes": []},
                {"name": "a", "key": "long-enough-secret-2", "prefixes": []}]"#,
            r#"[{"name": "a", "key": "long-enough-secret-1", "prefixes": []},
                {"name": "b", "key": "long-enough-secret-1", "prefixes": []}]"#,
        ];
        for case in cases {
            let err = ApiKeys::from_json(case).expect_err(case);
            assert!(!err.contains("long-enough-secret"), "{err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }
}
