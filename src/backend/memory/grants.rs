//! Sets of grants held on one name at once, as Redis keeps them in a sorted set (see
//! [`GrantSetKind`](crate::backend::GrantSetKind)): a semaphore's permits, a read/write lock's
//! readers. Acquiring under a limit, renewing, releasing, withdrawing and listing them is the
//! same for every kind and is here; a set kept beside the lock (the readers) differs in how a
//! grant is given (its marker in the lock entry, a waiting lock's hold-off: `beside.rs`) and
//! in what a change leaves behind (the marker fitted to the longest grant).

use std::sync::Arc;

use tokio::time::Instant;

use super::{MemoryBackend, State, acked, announce, freed, issued_fence, lease};
use crate::backend::fence::{fence_of, has_stem, token};
use crate::backend::{
    AcquireOutcome, BackendError, Claim, GrantAttempt, GrantsOf, Holder, Lease, ReleaseOutcome,
    RenewAttempt, RenewOutcome, Withdrawal,
};
use crate::backend::{GrantView, Grants};

/// The grants of one name, and the limit they were granted under (of a limited kind).
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

    /// The live grants' tokens, each with when its lease ends: what a revoke remembers.
    pub(super) fn live_tokens(&self, now: Instant) -> Vec<(String, Instant)> {
        (self.held.iter())
            .filter(|grant| grant.expires > now)
            .map(|grant| (grant.token.clone(), grant.expires))
            .collect()
    }

    /// Adds the grant `attempt` gets with `fence`, at `now`.
    pub(super) fn add(&mut self, attempt: &GrantAttempt<'_>, fence: u64, now: Instant) {
        self.held.push(Grant {
            token: token(attempt.stem, fence),
            expires: now + attempt.ttl(),
            claim: attempt.claim,
            holder: attempt.holder().map(|h| Arc::new(h.clone())),
        });
    }

    /// The lease of the grant to a token of the attempt's stem (an idempotent retry), taking
    /// its claim over.
    pub(super) fn find_again(&mut self, attempt: &GrantAttempt<'_>, now: Instant) -> Option<Lease> {
        let grant = self
            .held
            .iter_mut()
            .find(|grant| has_stem(&grant.token, attempt.stem))?;
        if attempt.claim.is_some() {
            grant.claim = attempt.claim;
        }
        Some(Lease {
            fence: issued_fence(&grant.token),
            ttl: grant.expires - now,
            replicas_acked: acked(attempt.ack()),
        })
    }

    /// Whether an idempotent attempt's key holds a grant here of another kind of grant.
    pub(super) fn key_reused(&self, attempt: &GrantAttempt<'_>) -> bool {
        self.held
            .iter()
            .any(|grant| attempt.key_reused_by(&grant.token))
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
        if of.beside_lock() && !self.marker_holds(of, name, now) {
            self.sets(of).remove(name);
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

    /// Remembers `revoked` grants of `of` on `name` (tokens, and when their leases end).
    pub(super) fn remember_revoked(
        &mut self,
        of: GrantsOf,
        name: &str,
        revoked: Vec<(String, Instant)>,
    ) {
        (self.revoked_grants.entry((of.label, name.to_owned())))
            .or_default()
            .extend(revoked);
    }

    /// The sets of grants of kind `of`, by name.
    pub(super) fn sets(
        &mut self,
        of: GrantsOf,
    ) -> &mut std::collections::HashMap<String, GrantSet> {
        self.grant_sets.entry(of.label).or_default()
    }

    /// Tidies up after a change to the grants of `name`: an empty set is forgotten, and the
    /// marker of a lock a set is kept beside lasts as long as its longest grant. False when no
    /// grant is left.
    pub(super) fn settle(&mut self, of: GrantsOf, name: &str) -> bool {
        if of.beside_lock() {
            return self.fit_marker(of, name);
        }
        let sets = self.sets(of);
        let left = sets.get(name).is_some_and(|g| g.len() > 0);
        if !left {
            sets.remove(name);
        }
        left
    }
}

impl MemoryBackend {
    /// Takes a grant of `of` on `name`, for a limited kind only if fewer than `limit` are held
    /// and they were granted under `limit`; finds a token of the attempt's stem again. A kind
    /// kept beside the lock looks at the lock first (`beside.rs`).
    pub(super) async fn acquire_grant(
        &self,
        of: GrantsOf,
        name: &str,
        limit: u32,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        if of.beside_lock() {
            return self.acquire_beside_lock(of, name, attempt);
        }
        let (mut state, now) = self.state_now();
        if let Some(grants) = state.live_grants(of, name, now) {
            if let Some(lease) = grants.find_again(&attempt, now) {
                return Ok(AcquireOutcome::AlreadyHeld(lease));
            }
            if grants.key_reused(&attempt) {
                return Ok(AcquireOutcome::KeyReused);
            }
            if of.limited && grants.limit != limit {
                return Ok(AcquireOutcome::LimitDiffers {
                    limit: grants.limit,
                });
            }
            if of.limited && grants.len() >= usize::try_from(limit).unwrap_or(usize::MAX) {
                return Ok(AcquireOutcome::Held {
                    ttl: grants.first_end().map(|end| end - now),
                });
            }
        }
        let fence = state.next_fence();
        state
            .sets(of)
            .entry(name.to_owned())
            .or_insert_with(|| GrantSet::new(limit))
            .add(&attempt, fence, now);
        state.note_write(now);
        Ok(AcquireOutcome::Granted(lease(
            fence,
            attempt.ttl(),
            attempt.ack(),
        )))
    }

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
        let removed = self.remove_grant(of, name, |grant| grant.token == token);
        Ok(ReleaseOutcome::removed(removed))
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

    /// Removes the grant `matches` picks, and announces it: a grant given back, or the
    /// lock's release when the last grant of a set kept beside it went.
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
        self.announce_given_back(of, name, any_left);
        true
    }

    /// Announces grants of `of` on `name` given back: to the set's own waiters, or, for a set
    /// kept beside the lock, as the lock's release once no grant is left (`any_left`).
    fn announce_given_back(&self, of: GrantsOf, name: &str, any_left: bool) {
        if !of.beside_lock() {
            announce(&self.freed, &freed(of, name));
        } else if !any_left {
            self.announce_release(name);
        }
    }

    /// Revokes every live grant of `of` on `name`, remembering each token until its lease
    /// would have ended, and announces it: true if any was held.
    pub(super) fn revoke_grants(&self, of: GrantsOf, name: &str) -> bool {
        let (mut state, now) = self.state_now();
        let Some(revoked) = state
            .live_grants(of, name, now)
            .map(|grants| grants.live_tokens(now))
        else {
            return false;
        };
        state.sets(of).remove(name);
        state.remember_revoked(of, name, revoked);
        let any_left = state.settle(of, name);
        state.note_write(now);
        drop(state);
        self.announce_given_back(of, name, any_left);
        true
    }

    /// The live grants of `name`: what anyone may see of each, and a limited kind's limit.
    pub(super) fn grant_views(&self, of: GrantsOf, name: &str) -> Grants {
        let (mut state, now) = self.state_now();
        let Some(grants) = state.live_grants(of, name, now) else {
            return Grants::default();
        };
        Grants {
            limit: of.limited.then_some(grants.limit),
            grants: grants.views(now),
        }
    }
}
