//! The keys and their values: strings, hashes and sorted sets, with expiries read against the
//! simulated clock. A key is expired when the clock is past its expiry (Redis: `now > when`),
//! and an expired key is gone for every command (Redis deletes it lazily or actively; neither
//! can be told apart through the commands lockgate uses).

use std::collections::BTreeMap;

/// A value Redis keeps under a key (the types lockgate uses).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(Vec<u8>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    ZSet(ZSet),
}

impl Value {
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Str(_) => "string",
            Self::Hash(_) => "hash",
            Self::ZSet(_) => "zset",
        }
    }
}

/// A sorted set: members with scores, ordered by score then by member's bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ZSet {
    scores: BTreeMap<Vec<u8>, f64>,
}

impl ZSet {
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// Sets a member's score; whether it is new.
    pub fn insert(&mut self, member: Vec<u8>, score: f64) -> bool {
        self.scores.insert(member, score).is_none()
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        self.scores.remove(member).is_some()
    }

    /// Every member in Redis's order.
    pub fn sorted(&self) -> Vec<(&[u8], f64)> {
        let mut all: Vec<(&[u8], f64)> = self
            .scores
            .iter()
            .map(|(m, s)| (m.as_slice(), *s))
            .collect();
        all.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(b.0)));
        all
    }
}

/// A key's value and its expiry (milliseconds since the epoch).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub value: Value,
    pub expires_at_ms: Option<i64>,
}

/// One database (lockgate uses database 0 only).
#[derive(Debug, Default, Clone)]
pub struct Db {
    entries: BTreeMap<Vec<u8>, Entry>,
    /// Changes so far (Redis's `server.dirty`): a command that moved it is a write, which
    /// replication sends on (`crate::replication`). A key found expired counts (Redis sends
    /// its `DEL` on), as does a key taken to change (`get_mut`).
    dirty: u64,
}

impl Db {
    /// Drops `key` if it expired by `now_ms`; then whether it exists.
    fn expire_if_needed(&mut self, key: &[u8], now_ms: i64) -> bool {
        match self.entries.get(key) {
            Some(Entry {
                expires_at_ms: Some(when),
                ..
            }) if now_ms > *when => {
                self.entries.remove(key);
                self.dirty += 1;
                false
            }
            Some(_) => true,
            None => false,
        }
    }

    pub fn get(&mut self, key: &[u8], now_ms: i64) -> Option<&Entry> {
        if self.expire_if_needed(key, now_ms) {
            self.entries.get(key)
        } else {
            None
        }
    }

    pub fn get_mut(&mut self, key: &[u8], now_ms: i64) -> Option<&mut Entry> {
        if self.expire_if_needed(key, now_ms) {
            self.dirty += 1;
            self.entries.get_mut(key)
        } else {
            None
        }
    }

    pub fn insert(&mut self, key: Vec<u8>, entry: Entry) {
        self.dirty += 1;
        self.entries.insert(key, entry);
    }

    pub fn remove(&mut self, key: &[u8], now_ms: i64) -> Option<Entry> {
        if self.expire_if_needed(key, now_ms) {
            self.dirty += 1;
            self.entries.remove(key)
        } else {
            None
        }
    }

    /// Every live key, in byte order.
    pub fn keys(&mut self, now_ms: i64) -> Vec<Vec<u8>> {
        self.entries
            .retain(|_, e| !matches!(e.expires_at_ms, Some(when) if now_ms > when));
        self.entries.keys().cloned().collect()
    }

    /// Every live key with its entry, in byte order: what a test compares with a real
    /// server's keyspace.
    pub fn snapshot(&mut self, now_ms: i64) -> BTreeMap<Vec<u8>, Entry> {
        self.keys(now_ms);
        self.entries.clone()
    }

    /// Forgets everything (a restart without persistence, `FLUSHALL`).
    pub fn clear(&mut self) {
        self.dirty += 1;
        self.entries.clear();
    }

    /// How many changes so far (see `dirty`).
    pub fn dirty(&self) -> u64 {
        self.dirty
    }
}
