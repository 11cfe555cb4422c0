//! Semaphores in memory: per name, the limit and the live permits, under the store's one
//! mutex (each operation is one critical section, as a script is on Redis).

use std::sync::Arc;

use tokio::time::Instant;

use super::{MemoryBackend, acked, announce, wall_clock_micros};
use crate::backend::fence::{fence_of, has_stem, next_fence, token};
use crate::backend::semaphore::PermitView;
use crate::backend::{
    AcquireOutcome, BackendError, Claim, Holder, Lease, ReleaseOutcome, RenewOutcome,
};
use crate::backend::{GrantAttempt, RenewAttempt};

/// One semaphore's permits.
#[derive(Debug)]
pub(super) struct Permits {
    limit: u32,
    held: Vec<Permit>,
}

#[derive(Debug)]
struct Permit {
    /// `<stem>.<fence>`.
    token: String,
    expires: Instant,
    claim: Option<Claim>,
    holder: Option<Arc<Holder>>,
}

impl Permits {
    pub(super) fn new(limit: u32) -> Self {
        Self {
            limit,
            held: Vec::new(),
        }
    }

    /// Drops expired permits; false when none is left (the semaphore is then forgotten).
    pub(super) fn reclaim(&mut self, now: Instant) -> bool {
        self.held.retain(|permit| permit.expires > now);
        !self.held.is_empty()
    }

    fn position(&self, token: &str) -> Option<usize> {
        self.held.iter().position(|permit| permit.token == token)
    }

    pub(super) fn add(
        &mut self,
        token: String,
        expires: Instant,
        claim: Option<Claim>,
        holder: Option<&Holder>,
    ) {
        self.held.push(Permit {
            token,
            expires,
            claim,
            holder: holder
                .filter(|h| !h.is_empty())
                .map(|h| Arc::new(h.clone())),
        });
    }

    /// The lease of the permit of a token of `stem` (an idempotent retry), taking `claim` over.
    pub(super) fn find_again(
        &mut self,
        stem: &str,
        claim: Option<Claim>,
        now: Instant,
        replicas_acked: Option<u32>,
    ) -> Option<Lease> {
        let permit = self
            .held
            .iter_mut()
            .find(|permit| has_stem(&permit.token, stem))?;
        if claim.is_some() {
            permit.claim = claim;
        }
        Some(Lease {
            fence: fence_of(&permit.token).unwrap_or(0),
            ttl: permit.expires - now,
            replicas_acked,
        })
    }

    /// A new end for the permit `token` holds; `None` if it holds none.
    pub(super) fn renew(&mut self, token: &str, expires: Instant) -> Option<()> {
        let index = self.position(token)?;
        self.held[index].expires = expires;
        Some(())
    }

    /// Removes the first permit whose token matches; true if one did.
    pub(super) fn remove(&mut self, matches: impl Fn(&str) -> bool) -> bool {
        match self.held.iter().position(|permit| matches(&permit.token)) {
            Some(index) => {
                self.held.swap_remove(index);
                true
            }
            None => false,
        }
    }

    /// Removes the permit of `stem` if `claim` (when given) is still its last claim.
    pub(super) fn remove_claimed(&mut self, stem: &str, claim: Option<Claim>) -> bool {
        match self.held.iter().position(|permit| {
            has_stem(&permit.token, stem) && (claim.is_none() || permit.claim == claim)
        }) {
            Some(index) => {
                self.held.swap_remove(index);
                true
            }
            None => false,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// When the permit that runs longest ends.
    pub(super) fn last_end(&self) -> Option<Instant> {
        self.held.iter().map(|permit| permit.expires).max()
    }

    /// What anyone may see of the permits, the first to end first.
    pub(super) fn views(&self, now: Instant) -> Vec<PermitView> {
        let mut held: Vec<&Permit> = self.held.iter().collect();
        held.sort_by_key(|permit| permit.expires);
        held.into_iter()
            .map(|permit| PermitView {
                fence: fence_of(&permit.token),
                ttl: permit.expires - now,
                holder: permit.holder.as_deref().cloned(),
            })
            .collect()
    }
}

impl MemoryBackend {
    /// The live permits of `name`, reclaiming expired ones first.
    fn live_permits<'a>(
        state: &'a mut super::State,
        name: &str,
        now: Instant,
    ) -> Option<&'a mut Permits> {
        if state
            .semaphores
            .get_mut(name)
            .is_some_and(|permits| !permits.reclaim(now))
        {
            state.semaphores.remove(name);
        }
        state.semaphores.get_mut(name)
    }

    /// Forgets the semaphore `name` once its last permit is gone.
    fn forget_if_empty(state: &mut super::State, name: &str) {
        if state.semaphores.get(name).is_some_and(Permits::is_empty) {
            state.semaphores.remove(name);
        }
    }
}

impl MemoryBackend {
    pub(super) async fn acquire_permit(
        &self,
        name: &str,
        limit: u32,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let (stem, ttl, ack, claim, holder) = attempt.parts();
        let now = Instant::now();
        let mut state = self.state();
        if let Some(permits) = Self::live_permits(&mut state, name, now) {
            if let Some(lease) = permits.find_again(stem, claim, now, acked(ack)) {
                return Ok(AcquireOutcome::AlreadyHeld(lease));
            }
            if permits.limit != limit {
                return Ok(AcquireOutcome::LimitDiffers {
                    limit: permits.limit,
                });
            }
            if permits.held.len() >= usize::try_from(limit).unwrap_or(usize::MAX) {
                let first_end = permits.held.iter().map(|permit| permit.expires).min();
                return Ok(AcquireOutcome::Held {
                    ttl: first_end.map(|end| end - now),
                });
            }
        }
        let fence = next_fence(state.last_fence, wall_clock_micros());
        state.last_fence = fence;
        state
            .semaphores
            .entry(name.to_owned())
            .or_insert_with(|| Permits::new(limit))
            .add(token(stem, fence), now + ttl, claim, holder);
        state.note_write(now);
        Ok(AcquireOutcome::Granted(Lease {
            fence,
            ttl,
            replicas_acked: acked(ack),
        }))
    }

    pub(super) async fn renew_permit(
        &self,
        name: &str,
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        let RenewAttempt { token, ttl, ack } = renewal;
        let now = Instant::now();
        let mut state = self.state();
        let renewed = Self::live_permits(&mut state, name, now)
            .and_then(|permits| permits.renew(token, now + ttl));
        if renewed.is_none() {
            return Ok(RenewOutcome::NotHeld);
        }
        Ok(RenewOutcome::Renewed(Lease {
            fence: fence_of(token).unwrap_or(0),
            ttl,
            replicas_acked: acked(ack),
        }))
    }

    pub(super) async fn release_permit(
        &self,
        name: &str,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        let removed = Self::live_permits(&mut state, name, now)
            .is_some_and(|permits| permits.remove(|t| t == token));
        if !removed {
            return Ok(ReleaseOutcome::NotHeld);
        }
        Self::forget_if_empty(&mut state, name);
        drop(state);
        announce(&self.permits_freed, name);
        Ok(ReleaseOutcome::Released)
    }

    pub(super) async fn withdraw_permit(
        &self,
        name: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        let removed = Self::live_permits(&mut state, name, now)
            .is_some_and(|permits| permits.remove_claimed(stem, claim));
        if !removed {
            return Ok(false);
        }
        Self::forget_if_empty(&mut state, name);
        drop(state);
        announce(&self.permits_freed, name);
        Ok(true)
    }

    pub(super) async fn permits_of(
        &self,
        name: &str,
    ) -> Result<crate::backend::semaphore::Permits, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        Ok(Self::live_permits(&mut state, name, now).map_or_else(
            crate::backend::semaphore::Permits::default,
            |permits| crate::backend::semaphore::Permits {
                limit: Some(permits.limit),
                permits: permits.views(now),
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::backend::LeaseRequest;

    const TTL: Duration = Duration::from_secs(10);

    async fn take(backend: &MemoryBackend, limit: u32, stem: &str) -> AcquireOutcome {
        backend
            .acquire_permit(
                "s",
                limit,
                GrantAttempt::new(stem, &LeaseRequest::for_ttl(TTL)),
            )
            .await
            .expect("memory answers")
    }

    #[tokio::test(start_paused = true)]
    async fn permits_are_granted_up_to_the_limit_and_reclaimed_at_expiry() {
        let backend = MemoryBackend::new();
        assert!(matches!(
            take(&backend, 2, "a").await,
            AcquireOutcome::Granted(_)
        ));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(matches!(
            take(&backend, 2, "b").await,
            AcquireOutcome::Granted(_)
        ));
        // The first permit held runs out in 9 s: that is what a third caller is told.
        assert_eq!(
            take(&backend, 2, "c").await,
            AcquireOutcome::Held {
                ttl: Some(Duration::from_secs(9))
            }
        );
        assert_eq!(
            take(&backend, 3, "c").await,
            AcquireOutcome::LimitDiffers { limit: 2 }
        );
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(matches!(
            take(&backend, 2, "c").await,
            AcquireOutcome::Granted(_)
        ));
        let seen = backend.permits_of("s").await.expect("inspect");
        assert_eq!(seen.limit, Some(2));
        assert_eq!(seen.permits.len(), 2);
        // Once every permit is gone, the next grant sets a new limit.
        tokio::time::advance(TTL).await;
        assert!(matches!(
            take(&backend, 5, "d").await,
            AcquireOutcome::Granted(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_permit_is_renewed_and_released_by_its_token_only() {
        let backend = MemoryBackend::new();
        let AcquireOutcome::Granted(lease) = take(&backend, 1, "a").await else {
            panic!("granted");
        };
        let mine = token("a", lease.fence);
        assert_eq!(
            backend
                .renew_permit(
                    "s",
                    RenewAttempt {
                        token: "a.1",
                        ttl: TTL,
                        ack: None
                    }
                )
                .await,
            Ok(RenewOutcome::NotHeld)
        );
        assert!(matches!(
            backend
                .renew_permit(
                    "s",
                    RenewAttempt {
                        token: &mine,
                        ttl: TTL,
                        ack: None
                    }
                )
                .await,
            Ok(RenewOutcome::Renewed(_))
        ));
        assert_eq!(
            backend.release_permit("s", "a.1").await,
            Ok(ReleaseOutcome::NotHeld)
        );
        assert_eq!(
            backend.release_permit("s", &mine).await,
            Ok(ReleaseOutcome::Released)
        );
        assert_eq!(
            backend.permits_of("s").await,
            Ok(crate::backend::semaphore::Permits::default())
        );
    }
}
