//! Listing the memory store: held locks and semaphores by name prefix, in name order (see
//! `backend::listing` for what a listing promises).

use super::MemoryBackend;
use crate::backend::{GrantPage, GrantsOf, Inspection, ListCursor, ListPage, PageRequest};

impl MemoryBackend {
    /// A page of held locks in name order; the cursor is the last name listed.
    pub(super) fn list_locks(&self, request: PageRequest<'_>) -> ListPage {
        let (prefix, limit) = (request.prefix, request.limit);
        let (state, now) = self.state_now();
        let after = request.cursor.after.as_deref().unwrap_or("");
        let mut names: Vec<&String> = state
            .locks
            .iter()
            .filter(|(name, held)| {
                held.expires > now && name.starts_with(prefix) && name.as_str() > after
            })
            .map(|(name, _)| name)
            .collect();
        names.sort_unstable();
        let more = names.len() > limit;
        let found: Vec<(String, Inspection)> = names
            .into_iter()
            .take(limit)
            .map(|name| {
                let held = &state.locks[name];
                (name.clone(), held.inspection(now))
            })
            .collect();
        ListPage {
            next: after_the_last(more, &found),
            found,
        }
    }

    /// A page of the names with grants of the set `of` held, in name order; the cursor is the
    /// last name listed.
    pub(super) fn list_grant_sets(&self, of: GrantsOf, request: PageRequest<'_>) -> GrantPage {
        let (prefix, limit) = (request.prefix, request.limit);
        let after = request.cursor.after.as_deref().unwrap_or("");
        let mut names: Vec<String> = self
            .state()
            .sets(of)
            .keys()
            .filter(|name| name.starts_with(prefix) && name.as_str() > after)
            .cloned()
            .collect();
        names.sort_unstable();
        let mut found = Vec::new();
        let mut more = false;
        for name in names {
            let seen = self.grant_views(of, &name);
            if seen.grants.is_empty() {
                continue;
            }
            if found.len() == limit {
                more = true;
                break;
            }
            found.push((name, seen));
        }
        GrantPage {
            next: after_the_last(more, &found),
            found,
        }
    }
}

/// Where a page of the memory store's listing goes on, when there is `more`: after its last
/// name.
fn after_the_last<T>(more: bool, found: &[(String, T)]) -> Option<ListCursor> {
    more.then(|| ListCursor {
        after: found.last().map(|(name, _)| name.clone()),
        ..ListCursor::default()
    })
}
