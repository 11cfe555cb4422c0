//! Sets of grants held on one name at once, as Redis keeps them in a sorted set: a
//! semaphore's permits and a read/write lock's readers. Renewing, releasing, withdrawing and
//! listing them is the same for both and is here; what differs is how a grant is given (a
//! limit; the writer's marker and hold-off) and what a change leaves behind, in
//! `semaphore.rs` and `shared.rs`.

use std::sync::Arc;

use tokio::time::Instant;

use super::{MemoryBackend, State, announce, issued_fence, lease};
use crate::backend::fence::{fence_of, has_stem};
use crate::backend::{
    BackendError, Claim, GrantsOf, Holder, Lease, ReleaseOutcome, RenewAttempt, RenewOutcome,
    Withdrawal,
};
use crate::backend::{GrantView, Grants};

/// The grants of one name: a semaphore's permits (with its limit), or a lock's readers.
#[derive(Debug)]
pub(super) struct GrantSet {
    pub(super) limit: u32,
    held: Vec<Grant>,
}

#[derive(Debug)]
struct Grant {
    /// `<stem>.<fence>`.
    token: String,
    expires: Instant,
    claim: Option<Claim>,
    holder: Option<Arc<Holder>>,
}

impl GrantSet {
    pub(super) fn new(limit: u32) -> Self {
        Self {
            limit,
            held: Vec::new(),
        }
    }

    /// Drops expired grants; false when none is left (the set is then forgotten).
    pub(super) fn reclaim(&mut self, now: Instant) -> bool {
        self.held.retain(|grant| grant.expires > now);
        !self.held.is_empty()
    }

    pub(super) fn add(
        &mut self,
        token: String,
        expires: Instant,
        claim: Option<Claim>,
        holder: Option<&Holder>,
    ) {
        self.held.push(Grant {
            token,
            expires,
            claim,
            holder: holder.map(|h| Arc::new(h.clone())),
        });
    }

    /// The lease of the grant to a token of `stem` (an idempotent retry), taking `claim` over.
    pub(super) fn find_again(
        &mut self,
        stem: &str,
        claim: Option<Claim>,
        now: Instant,
        replicas_acked: Option<u32>,
    ) -> Option<Lease> {
        let grant = self
            .held
            .iter_mut()
            .find(|grant| has_stem(&grant.token, stem))?;
        if claim.is_some() {
            grant.claim = claim;
        }
        Some(Lease {
            fence: issued_fence(&grant.token),
            ttl: grant.expires - now,
            replicas_acked,
        })
    }

    /// Removes the first grant `matches` picks; true if it picked one.
    fn remove(&mut self, matches: impl Fn(&Grant) -> bool) -> bool {
        match self.held.iter().position(matches) {
            Some(index) => {
                self.held.swap_remove(index);
                true
            }
            None => false,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.held.len()
    }

    /// When the grant that ends first ends.
    pub(super) fn first_end(&self) -> Option<Instant> {
        self.held.iter().map(|grant| grant.expires).min()
    }

    /// When the grant that runs longest ends.
    pub(super) fn last_end(&self) -> Option<Instant> {
        self.held.iter().map(|grant| grant.expires).max()
    }

    /// What anyone may see of the grants, the first to end first.
    pub(super) fn views(&self, now: Instant) -> Vec<GrantView> {
        let mut held: Vec<&Grant> = self.held.iter().collect();
        held.sort_by_key(|grant| grant.expires);
        held.into_iter()
            .map(|grant| GrantView {
                fence: fence_of(&grant.token),
                ttl: grant.expires - now,
                holder: grant.holder.as_deref().cloned(),
            })
            .collect()
    }
}

impl State {
    /// The live grants of `name`, expired ones dropped first; `None` when none is left.
    pub(super) fn live_grants(
        &mut self,
        of: GrantsOf,
        name: &str,
        now: Instant,
    ) -> Option<&mut GrantSet> {
        if of == GrantsOf::Shared && !self.readers_hold(name, now) {
            self.readers.remove(name);
            return None;
        }
        let sets = self.sets(of);
        if sets
            .get_mut(name)
            .is_some_and(|grants| !grants.reclaim(now))
        {
            sets.remove(name);
        }
        sets.get_mut(name)
    }

    /// The sets of grants of kind `of`, by name.
    pub(super) fn sets(
        &mut self,
        of: GrantsOf,
    ) -> &mut std::collections::HashMap<String, GrantSet> {
        match of {
            GrantsOf::Shared => &mut self.readers,
            GrantsOf::Permits => &mut self.semaphores,
        }
    }

    /// Tidies up after a change to the grants of `name`: an empty set is forgotten, and a
    /// lock's marker lasts as long as its longest reader. False when no grant is left.
    pub(super) fn settle(&mut self, of: GrantsOf, name: &str) -> bool {
        match of {
            GrantsOf::Shared => self.fit_marker(name),
            GrantsOf::Permits => {
                let left = self.semaphores.get(name).is_some_and(|g| g.len() > 0);
                if !left {
                    self.semaphores.remove(name);
                }
                left
            }
        }
    }
}

impl MemoryBackend {
    pub(super) async fn renew_grant(
        &self,
        of: GrantsOf,
        name: &str,
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        let RenewAttempt {
            token, ttl, ack, ..
        } = renewal;
        let (mut state, now) = self.state_now();
        let Some(grant) = state
            .live_grants(of, name, now)
            .and_then(|grants| grants.held.iter_mut().find(|grant| grant.token == token))
        else {
            return Ok(RenewOutcome::NotHeld);
        };
        grant.expires = now + ttl;
        state.settle(of, name);
        Ok(RenewOutcome::Renewed(lease(issued_fence(token), ttl, ack)))
    }

    pub(super) async fn release_grant(
        &self,
        of: GrantsOf,
        name: &str,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        Ok(
            if self.remove_grant(of, name, |grant| grant.token == token) {
                ReleaseOutcome::Released
            } else {
                ReleaseOutcome::NotHeld
            },
        )
    }

    /// Withdraws the grant `withdrawal` names.
    pub(super) async fn withdraw_grant(
        &self,
        of: GrantsOf,
        name: &str,
        withdrawal: Withdrawal<'_>,
    ) -> Result<bool, BackendError> {
        Ok(self.remove_grant(of, name, |grant| {
            withdrawal.takes(&grant.token, grant.claim)
        }))
    }

    /// Removes the grant `matches` picks, and announces it: a permit given back, or the
    /// lock's release when its last reader went.
    fn remove_grant(&self, of: GrantsOf, name: &str, matches: impl Fn(&Grant) -> bool) -> bool {
        let (mut state, now) = self.state_now();
        let removed = state
            .live_grants(of, name, now)
            .is_some_and(|grants| grants.remove(matches));
        if !removed {
            return false;
        }
        let any_left = state.settle(of, name);
        drop(state);
        match of {
            GrantsOf::Permits => announce(&self.permits_freed, name),
            GrantsOf::Shared if !any_left => self.announce_release(name),
            GrantsOf::Shared => {}
        }
        true
    }

    /// The live grants of `name`: what anyone may see of each, and a semaphore's limit.
    pub(super) fn grant_views(&self, of: GrantsOf, name: &str) -> Grants {
        let (mut state, now) = self.state_now();
        let Some(grants) = state.live_grants(of, name, now) else {
            return Grants::default();
        };
        Grants {
            limit: (of == GrantsOf::Permits).then_some(grants.limit),
            grants: grants.views(now),
        }
    }
}
