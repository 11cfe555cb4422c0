//! What anyone may see of locks: one lock ([`LockService::inspect`]), or a page of held locks
//! under a prefix ([`LockService::list`]), with opaque cursors bound to the caller; and the
//! same of a kind whose grants are many at once on a name ([`LockService::inspect_grants`],
//! [`LockService::list_grants`]). Never a token.

use std::time::{Duration, SystemTime};

use super::LockName;
use super::cursor::{CursorScope, ListPosition};
use super::error::LockError;
use super::service::LockService;
use super::wait::WaiterView;
use crate::backend::fence::granted_at;
use crate::backend::{
    GrantView, Grants, GrantsOf, Holder, Inspection, LeaseStore, Leased, ListCursor, PageRequest,
    QueuedWaiter, kinds,
};

/// Most of a lock's waiters in this gateway that inspect shows (it counts them all).
pub const WAITERS_SHOWN: usize = 16;

/// What anyone may learn about a held lock. Never the token.
#[derive(Debug, Clone, PartialEq)]
pub struct LockState {
    /// Remaining ttl; `None` when the key has no expiry.
    pub ttl: Option<Duration>,
    /// The fence of the current grant; `None` when its holder's token carries none (a lock
    /// taken by another Redis client).
    pub fence: Option<u64>,
    /// When the current grant was made, by the store's clock (read from its fence; see
    /// `backend::fence::granted_at`).
    pub granted_at: Option<SystemTime>,
    /// Who holds it, when the grant named a holder.
    pub holder: Option<Holder>,
    /// How many times its holder holds it, for a reentrant lock.
    pub holds: Option<u32>,
    /// Requests waiting for it in this gateway (fair waiters included).
    pub waiting: usize,
    /// The first [`WAITERS_SHOWN`] of them, the longest waiting first: whom each waits for.
    pub waiters: Vec<WaiterView>,
    /// Fair waiters in its queue, every gateway's (see `backend::queue`).
    pub queued: u32,
    /// The first live places of that queue, in order: whom each is for.
    pub queue: Vec<QueuedWaiter>,
    /// Held by readers (a read/write lock's shared grants): each of them, the first to end
    /// first. Empty while a writer (or nobody) holds it.
    pub shared: Vec<GrantView>,
    /// The store says readers hold it (even if they all ended a moment later).
    pub(super) shared_marker: bool,
}

impl LockState {
    /// Whether readers hold the lock (rather than a writer).
    pub fn is_shared(&self) -> bool {
        self.shared_marker
    }
}

impl LockService {
    /// Whether the lock is held, for how long, and the current fence; or, while readers hold
    /// it, each of them.
    pub async fn inspect(&self, name: &LockName) -> Result<LockState, LockError> {
        let Some(seen) = self.backend.inspect(name.as_str()).await? else {
            return Err(LockError::NotHeld);
        };
        let mut state = self.state_of(name, seen);
        self.complete_lock_state(name, &mut state).await?;
        Ok(state)
    }

    /// What a lock's state needs beyond its key, for inspect and listings alike: while
    /// readers hold it, each of them (one more script); and the readers and sets waiting on
    /// it here besides the writers (a set waits on its first name).
    async fn complete_lock_state(
        &self,
        name: &LockName,
        state: &mut LockState,
    ) -> Result<(), LockError> {
        if let Some(beside) = self.beside_lock {
            if state.is_shared() {
                let readers = self.backend.inspect_grants(beside, name.as_str());
                state.shared = readers.await?.grants;
            }
            state.waiting += self.waiters.waiting_for(beside.label, name.as_str());
        }
        state.waiting += self.waiters.waiting_for(kinds::SET, name.as_str());
        Ok(())
    }

    /// One page of held locks under the request's prefix, at most its limit (see
    /// `backend::listing` for what a listing guarantees and costs).
    pub async fn list(
        &self,
        request: PageRequest<'_>,
    ) -> Result<(Vec<(LockName, LockState)>, Option<ListCursor>), LockError> {
        let page = self.backend.list(request).await?;
        let mut locks: Vec<(LockName, LockState)> = page
            .found
            .into_iter()
            // A key of another program can look like a lock key; its name may not be one.
            .filter_map(|(name, seen)| {
                let name = LockName::from_string(name).ok()?;
                let state = self.state_of(&name, seen);
                Some((name, state))
            })
            .collect();
        // As inspect shows each (read-locked names' readers fetched side by side).
        let completed = futures_util::future::join_all(
            locks
                .iter_mut()
                .map(|(name, state)| self.complete_lock_state(name, state)),
        )
        .await;
        completed.into_iter().collect::<Result<(), _>>()?;
        Ok((locks, page.next))
    }

    /// The live grants of `name` of a kind kept as a set of grants (see [`GrantsOf`]), and
    /// how many requests wait for one in this gateway. `NotOffered` where the store does not
    /// keep the kind.
    pub async fn inspect_grants(
        &self,
        of: GrantsOf,
        name: &LockName,
    ) -> Result<(Grants, usize), LockError> {
        self.check_offered(Leased::Grant(of, name, 0))?;
        let grants = self.backend.inspect_grants(of, name.as_str()).await?;
        Ok((grants, self.waiters.waiting_for(of.label, name.as_str())))
    }

    /// One page of the names with grants of `of` held under the request's prefix (see
    /// `backend::listing`), each as [`LockService::inspect_grants`] sees it, as
    /// [`LockService::list`] lists locks. Always empty on a store that does not keep the kind.
    pub async fn list_grants(
        &self,
        of: GrantsOf,
        request: PageRequest<'_>,
    ) -> Result<(Vec<(LockName, Grants, usize)>, Option<ListCursor>), LockError> {
        let page = self.backend.list_grants(of, request).await?;
        let found = page
            .found
            .into_iter()
            // A key of another program can look like a key of grants; its name may not be one.
            .filter_map(|(name, grants)| {
                let name = LockName::from_string(name).ok()?;
                let waiting = self.waiters.waiting_for(of.label, name.as_str());
                Some((name, grants, waiting))
            })
            .collect();
        Ok((found, page.next))
    }

    /// `position` as an opaque cursor for `scope` (see [`super::cursor`]).
    pub fn seal_cursor(&self, position: &ListPosition, scope: CursorScope<'_>) -> String {
        self.cursors.seal(position, scope)
    }

    /// The position in a cursor sealed for this very `scope`; `None` for any other text.
    pub fn open_cursor(&self, text: &str, scope: CursorScope<'_>) -> Option<ListPosition> {
        self.cursors.open(text, scope)
    }

    /// The state of the lock `name` as the store saw it, with the writers waiting here.
    fn state_of(&self, name: &LockName, seen: Inspection) -> LockState {
        LockState {
            shared: Vec::new(),
            shared_marker: seen.shared,
            ttl: seen.ttl,
            fence: seen.fence,
            granted_at: seen.fence.and_then(granted_at),
            holder: seen.holder,
            holds: seen.holds,
            waiting: self.waiters.waiting_for(kinds::LOCK, name.as_str())
                + self.fair.waiting_for(name.as_str()),
            waiters: self.lock_waiters(name),
            queued: seen.queued,
            queue: seen.queue,
        }
    }

    /// The first [`WAITERS_SHOWN`] requests waiting for the lock `name` here, fair or not,
    /// the longest waiting first.
    fn lock_waiters(&self, name: &LockName) -> Vec<WaiterView> {
        let mut waiters = (self.waiters).waiters_of(kinds::LOCK, name.as_str(), WAITERS_SHOWN);
        waiters.extend(self.fair.waiters_of(name.as_str(), WAITERS_SHOWN));
        waiters.sort_by_key(|waiter| waiter.since);
        waiters.truncate(WAITERS_SHOWN);
        waiters
    }
}
