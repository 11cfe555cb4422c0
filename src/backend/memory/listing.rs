//! Listing the memory store: held locks and semaphores by name prefix, in name order (see
//! `backend::listing` for what a listing promises).

use tokio::time::Instant;

use super::MemoryBackend;
use crate::backend::{GrantsOf, Inspection, ListCursor, ListPage, SemaphorePage};

impl MemoryBackend {
    /// A page of held locks in name order; the cursor is the last name listed.
    pub(super) fn list_locks(&self, prefix: &str, cursor: ListCursor, limit: usize) -> ListPage {
        let now = Instant::now();
        let state = self.state();
        let after = cursor.after.as_deref().unwrap_or("");
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
        let locks: Vec<(String, Inspection)> = names
            .into_iter()
            .take(limit)
            .map(|name| {
                let held = &state.locks[name];
                (name.clone(), held.inspection(now))
            })
            .collect();
        let next = more.then(|| ListCursor {
            after: locks.last().map(|(name, _)| name.clone()),
            ..ListCursor::default()
        });
        ListPage { locks, next }
    }

    /// A page of semaphores with permits held, in name order; the cursor is the last name
    /// listed.
    pub(super) fn list_permits(
        &self,
        prefix: &str,
        cursor: ListCursor,
        limit: usize,
    ) -> SemaphorePage {
        let after = cursor.after.as_deref().unwrap_or("");
        let mut names: Vec<String> = self
            .state()
            .semaphores
            .keys()
            .filter(|name| name.starts_with(prefix) && name.as_str() > after)
            .cloned()
            .collect();
        names.sort_unstable();
        let mut semaphores = Vec::new();
        let mut more = false;
        for name in names {
            let permits = self.grant_views(GrantsOf::Permits, &name);
            if permits.permits.is_empty() {
                continue;
            }
            if semaphores.len() == limit {
                more = true;
                break;
            }
            semaphores.push((name, permits));
        }
        let next = more.then(|| ListCursor {
            after: semaphores.last().map(|(name, _)| name.clone()),
            ..ListCursor::default()
        });
        SemaphorePage { semaphores, next }
    }
}
