//! Listing held locks (and semaphores with permits held) by name prefix, a page at a time.
//!
//! Redis keeps no index of lock names (that would be per-name state outliving grants), so a
//! listing walks the keyspace with `SCAN`: on the one server, on every master of a Cluster one
//! after the other, or on every Redlock node. A page is built from SCAN steps of
//! [`SCAN_COUNT`] keys each, matching `<prefix>{<name prefix>*}`, until it holds `limit`
//! locks or [`MAX_SCANS_PER_PAGE`] steps were made; every name found is then inspected (the
//! same atomic look as `GET /locks/{name}`) and kept if held.
//!
//! The cursor says where to go on: which node, its SCAN cursor, and, when a SCAN step found
//! more locks than the page had room for, the last name taken from that step (the step is
//! made again and only names after it are kept; names of one step are taken in name order).
//! So, like SCAN itself: a lock held for the whole listing is listed at least once; one taken
//! or released meanwhile may or may not be; a lock can be listed twice when a node's table was
//! resized between pages, or a Cluster's slots moved. A page can hold fewer locks than
//! `limit`, even none, while the listing goes on: the listing ends when a page has no cursor.
//!
//! Cost: the whole keyspace of every node is walked once per full listing, SCAN_COUNT keys per
//! step, plus one inspect per lock listed. At most MAX_SCANS_PER_PAGE steps per page bound
//! the time of one request whatever the keyspace holds.
//!
//! Names with grants held at once (a semaphore's permits, a read/write lock's readers) are
//! listed the same way, by the keys of their grants (`<prefix>{<name>}:permits`, `…:readers`),
//! each looked at as inspect looks at them (`GET /semaphores/{name}`).

use std::future::Future;

use super::{BackendError, Grants, GrantsOf, Inspection};

/// Keys SCAN looks at per step (its `COUNT`).
pub const SCAN_COUNT: usize = 1000;
/// SCAN steps one page may make, so that a page over a large keyspace with few locks still
/// answers promptly (with a cursor to go on).
pub const MAX_SCANS_PER_PAGE: usize = 32;

/// Where a listing goes on. `Default` starts at the beginning.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListCursor {
    /// Which node (master of a Cluster, Redlock node) is being walked.
    pub node: usize,
    /// That node's SCAN cursor.
    pub scan: u64,
    /// The last name taken from the SCAN step at `scan`, when it did not fit in its page.
    pub after: Option<String>,
}

/// What a listing asks for: at most `limit` (≥ 1) held names under `prefix`, from `cursor`
/// on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRequest<'a> {
    pub prefix: &'a str,
    pub cursor: ListCursor,
    pub limit: usize,
}

/// One page of what a listing found held (each name with what a look at it saw), in the
/// order found.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub found: Vec<(String, T)>,
    /// Where the next page starts; `None` when the listing is complete.
    pub next: Option<ListCursor>,
}

impl<T> Default for Page<T> {
    fn default() -> Self {
        Self {
            found: Vec::new(),
            next: None,
        }
    }
}

/// One page of held locks.
pub type ListPage = Page<Inspection>;
/// One page of names with grants held at once (semaphores with permits, read/write locks
/// with readers).
pub type GrantPage = Page<Grants>;

/// Separates the parts of a cursor's text. Not in the name alphabet.
const CURSOR_SEPARATOR: char = '~';

impl ListCursor {
    /// The cursor as an opaque, URL-safe text for clients: `<node>~<scan>[~<after>]`.
    pub fn encode(&self) -> String {
        match &self.after {
            None => format!("{}{CURSOR_SEPARATOR}{}", self.node, self.scan),
            Some(after) => format!(
                "{}{CURSOR_SEPARATOR}{}{CURSOR_SEPARATOR}{after}",
                self.node, self.scan
            ),
        }
    }

    /// A cursor from [`ListCursor::encode`]'s text; `None` for anything else. A tampered but
    /// well-formed cursor can only make a listing skip or repeat locks the caller may see.
    pub fn decode(text: &str) -> Option<Self> {
        let mut parts = text.splitn(3, CURSOR_SEPARATOR);
        let node = parts.next()?.parse().ok()?;
        let scan = parts.next()?.parse().ok()?;
        let after = match parts.next() {
            None => None,
            Some(name) if name_shaped(name) => Some(name.to_owned()),
            Some(_) => return None,
        };
        Some(Self { node, scan, after })
    }
}

/// One SCAN step's answer: the next cursor (0 when the node is done) and the names found;
/// `None` when there is no such node.
pub(crate) type Scanned = Result<Option<(u64, Vec<String>)>, BackendError>;

/// A look's answer: the held ones among the names, with what was found of each.
pub(crate) type Looked<T> = Result<Vec<(String, T)>, BackendError>;

/// What a store needs to offer for [`page`] to list it.
pub(crate) trait Walk {
    /// What a look finds of a name: a lock's [`Inspection`], a semaphore's [`Grants`].
    type Found: Send;

    /// One SCAN step on `node`: the next cursor (0 when the node is done) and the lock names
    /// found whose keys match `prefix`. `None` when there is no such node (the listing is done).
    fn scan(&self, node: usize, cursor: u64, prefix: &str) -> impl Future<Output = Scanned> + Send;

    /// The held ones among `names` (found on `node`), in the order given.
    fn look(
        &self,
        node: usize,
        names: Vec<String>,
    ) -> impl Future<Output = Looked<Self::Found>> + Send;
}

/// One page of a walk of `store` (locks or semaphores, as its [`Walk::Found`] says).
pub(crate) async fn page<W: Walk>(
    store: &W,
    request: PageRequest<'_>,
) -> Result<Page<W::Found>, BackendError> {
    let PageRequest {
        prefix,
        cursor,
        limit,
    } = request;
    let mut found = Vec::new();
    let mut at = cursor;
    for _ in 0..MAX_SCANS_PER_PAGE {
        let Some((next, mut names)) = store.scan(at.node, at.scan, prefix).await? else {
            return Ok(Page { found, next: None });
        };
        names.sort_unstable();
        names.dedup();
        if let Some(after) = &at.after {
            names.retain(|name| name > after);
        }
        let held = store.look(at.node, names).await?;
        let room = limit - found.len();
        if held.len() > room {
            // Taken in name order; the rest of this step on the next page.
            found.extend(held.into_iter().take(room));
            let after = found.last().map(|(name, _)| name.clone());
            let next = Some(ListCursor { after, ..at });
            return Ok(Page { found, next });
        }
        found.extend(held);
        at = if next == 0 {
            ListCursor {
                node: at.node + 1,
                ..ListCursor::default()
            }
        } else {
            ListCursor {
                node: at.node,
                scan: next,
                after: None,
            }
        };
        if found.len() == limit {
            break;
        }
    }
    Ok(Page {
        found,
        next: Some(at),
    })
}

/// What to list among `names`, from what a look at each found (in the same order): those
/// `keep` turns into something found. The first error fails the page.
pub(crate) fn kept<T, F>(
    names: Vec<String>,
    looks: Vec<Result<T, BackendError>>,
    keep: impl Fn(T) -> Option<F>,
) -> Result<Vec<(String, F)>, BackendError> {
    let mut held = Vec::with_capacity(names.len());
    for (name, look) in names.into_iter().zip(looks) {
        if let Some(seen) = keep(look?) {
            held.push((name, seen));
        }
    }
    Ok(held)
}

/// The `SCAN … MATCH` pattern of the lock keys of names starting with `prefix`:
/// `<key prefix>{<prefix>*}`, with glob characters of the key prefix escaped (names and name
/// prefixes have none).
pub fn match_pattern(key_prefix: &str, prefix: &str) -> String {
    let mut pattern = String::with_capacity(key_prefix.len() + prefix.len() + 4);
    for c in key_prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('{');
    pattern.push_str(prefix);
    pattern.push_str("*}");
    pattern
}

/// The name in the key `<key prefix>{<name>}<suffix>` of a set of grants (the suffix is its
/// kind's [`tokens_key`](super::GrantSetKind::tokens_key)); `None` for any other key.
pub fn name_of_grants_key<'a>(key_prefix: &str, key: &'a [u8], of: GrantsOf) -> Option<&'a str> {
    let key = key.strip_suffix(of.tokens_key.as_bytes())?;
    name_of_key(key_prefix, key)
}

/// The lock name in a lock key `<key prefix>{<name>}`; `None` for any other key (a `SCAN`
/// pattern can also match keys that are no lock of lockgate's).
pub fn name_of_key<'a>(key_prefix: &str, key: &'a [u8]) -> Option<&'a str> {
    let key = std::str::from_utf8(key).ok()?;
    let name = key
        .strip_prefix(key_prefix)?
        .strip_prefix('{')?
        .strip_suffix('}')?;
    name_shaped(name).then_some(name)
}

/// Whether `text` is made of the lock name alphabet (`A-Z a-z 0-9 . _ : -`) and not empty.
/// Keys of other programs can match a SCAN pattern; the `lock` module validates names fully.
fn name_shaped(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;
    use crate::backend::grant_set::{BESIDE_FOR_TESTS, LIMITED_FOR_TESTS};

    #[test]
    fn cursors_round_trip_and_refuse_anything_else() {
        for cursor in [
            ListCursor::default(),
            ListCursor {
                node: 2,
                scan: 81_920,
                after: Some("orders:42".into()),
            },
        ] {
            assert_eq!(ListCursor::decode(&cursor.encode()), Some(cursor));
        }
        for bad in ["", "1", "x~1", "1~-1", "1~2~{a}", "1~2~"] {
            assert_eq!(ListCursor::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn patterns_escape_the_key_prefix_and_keys_give_names_back() {
        assert_eq!(match_pattern("lockgate:", "orders:"), "lockgate:{orders:*}");
        assert_eq!(match_pattern("a*b[", ""), "a\\*b\\[{*}");
        assert_eq!(
            name_of_key("lockgate:", b"lockgate:{orders:42}"),
            Some("orders:42")
        );
        assert_eq!(
            name_of_grants_key(
                "lockgate:",
                b"lockgate:{pool:1}:limited",
                &LIMITED_FOR_TESTS
            ),
            Some("pool:1")
        );
        assert_eq!(
            name_of_grants_key("lockgate:", b"lockgate:{doc:1}:beside", &BESIDE_FOR_TESTS),
            Some("doc:1")
        );
        assert_eq!(
            name_of_grants_key("lockgate:", b"lockgate:{pool:1}", &LIMITED_FOR_TESTS),
            None
        );
        for other in [
            &b"lockgate:{orders:42}:holder"[..],
            b"lockgate:fences",
            b"lockgate:{a}:x}",
            b"other:{a}",
        ] {
            assert_eq!(name_of_key("lockgate:", other), None);
        }
    }

    /// Nodes of names, each SCAN step returning `step` of them, every name held.
    struct Nodes {
        nodes: Vec<Vec<String>>,
        step: usize,
        scans: Mutex<usize>,
    }

    impl Walk for Nodes {
        type Found = Inspection;

        async fn scan(&self, node: usize, cursor: u64, prefix: &str) -> Scanned {
            *self.scans.lock().unwrap() += 1;
            let Some(names) = self.nodes.get(node) else {
                return Ok(None);
            };
            let start = cursor as usize;
            let end = (start + self.step).min(names.len());
            let next = if end == names.len() { 0 } else { end as u64 };
            let found = names[start..end]
                .iter()
                .filter(|n| n.starts_with(prefix))
                .cloned()
                .collect();
            Ok(Some((next, found)))
        }

        async fn look(&self, _node: usize, names: Vec<String>) -> Looked<Inspection> {
            Ok(names
                .into_iter()
                .map(|name| {
                    let seen = Inspection {
                        ttl: None,
                        fence: None,
                        holder: None,
                        shared: false,
                        holds: None,
                        queued: 0,
                        queue: Vec::new(),
                    };
                    (name, seen)
                })
                .collect())
        }
    }

    #[tokio::test]
    async fn pages_cover_every_node_once_even_when_a_step_overflows_a_page() {
        let nodes = Nodes {
            nodes: vec![
                (0..7).map(|i| format!("a:{i}")).collect(),
                vec![],
                (0..5).map(|i| format!("b:{i}")).collect(),
            ],
            step: 4,
            scans: Mutex::new(0),
        };
        let mut seen = BTreeMap::new();
        let mut cursor = Some(ListCursor::default());
        let mut pages = 0;
        while let Some(at) = cursor {
            let request = PageRequest {
                prefix: "",
                cursor: at,
                limit: 3,
            };
            let page = page(&nodes, request).await.expect("page");
            assert!(page.found.len() <= 3);
            for (name, _) in page.found {
                *seen.entry(name).or_insert(0) += 1;
            }
            cursor = page
                .next
                .map(|c| ListCursor::decode(&c.encode()).expect("decodes"));
            pages += 1;
            assert!(pages < 20, "the listing does not end");
        }
        assert_eq!(seen.len(), 12, "{seen:?}");
        assert!(seen.values().all(|&n| n == 1), "{seen:?}");

        let request = PageRequest {
            prefix: "b:",
            limit: 100,
            ..PageRequest::default()
        };
        let only_b = page(&nodes, request).await.expect("page");
        assert_eq!(only_b.found.len(), 5);
        assert_eq!(only_b.next, None);
    }
}
