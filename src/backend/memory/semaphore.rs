//! Semaphores in memory: per name, the limit and the live permits, under the store's one
//! mutex (each operation is one critical section, as a script is on Redis).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{MemoryBackend, acked, announce, feed, wall_clock_micros};
use crate::backend::fence::{fence_of, has_stem, next_fence, token};
use crate::backend::semaphore::{PermitView, SemaphoreBackend};
use crate::backend::{
    AcquireOutcome, BackendError, Claim, Holder, Lease, ReleaseFeed, ReleaseOutcome, RenewOutcome,
    ReplicaAck,
};

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
    /// Drops expired permits; false when none is left (the semaphore is then forgotten).
    pub(super) fn reclaim(&mut self, now: Instant) -> bool {
        self.held.retain(|permit| permit.expires > now);
        !self.held.is_empty()
    }

    fn position(&self, token: &str) -> Option<usize> {
        self.held.iter().position(|permit| permit.token == token)
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

    /// Removes the permit at `index` of `name`, forgetting the semaphore with its last permit.
    fn remove_permit(state: &mut super::State, name: &str, index: usize) {
        if let Some(permits) = state.semaphores.get_mut(name) {
            permits.held.swap_remove(index);
            if permits.held.is_empty() {
                state.semaphores.remove(name);
            }
        }
    }
}

impl SemaphoreBackend for MemoryBackend {
    async fn acquire_permit(
        &self,
        name: &str,
        limit: u32,
        stem: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
        claim: Option<Claim>,
        holder: Option<&Holder>,
    ) -> Result<AcquireOutcome, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        if let Some(permits) = Self::live_permits(&mut state, name, now) {
            if let Some(permit) = permits
                .held
                .iter_mut()
                .find(|permit| has_stem(&permit.token, stem))
            {
                if claim.is_some() {
                    permit.claim = claim;
                }
                return Ok(AcquireOutcome::AlreadyHeld(Lease {
                    fence: fence_of(&permit.token).unwrap_or(0),
                    ttl: permit.expires - now,
                    replicas_acked: acked(ack),
                }));
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
        let permit = Permit {
            token: token(stem, fence),
            expires: now + ttl,
            claim,
            holder: holder
                .filter(|h| !h.is_empty())
                .map(|h| Arc::new(h.clone())),
        };
        state
            .semaphores
            .entry(name.to_owned())
            .or_insert_with(|| Permits {
                limit,
                held: Vec::new(),
            })
            .held
            .push(permit);
        state.note_write(now);
        Ok(AcquireOutcome::Granted(Lease {
            fence,
            ttl,
            replicas_acked: acked(ack),
        }))
    }

    async fn renew_permit(
        &self,
        name: &str,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<RenewOutcome, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        let Some(permits) = Self::live_permits(&mut state, name, now) else {
            return Ok(RenewOutcome::NotHeld);
        };
        let Some(index) = permits.position(token) else {
            return Ok(RenewOutcome::NotHeld);
        };
        permits.held[index].expires = now + ttl;
        Ok(RenewOutcome::Renewed(Lease {
            fence: fence_of(token).unwrap_or(0),
            ttl,
            replicas_acked: acked(ack),
        }))
    }

    async fn release_permit(
        &self,
        name: &str,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        let index = Self::live_permits(&mut state, name, now).and_then(|p| p.position(token));
        let Some(index) = index else {
            return Ok(ReleaseOutcome::NotHeld);
        };
        Self::remove_permit(&mut state, name, index);
        drop(state);
        announce(&self.permits_freed, name);
        Ok(ReleaseOutcome::Released)
    }

    async fn withdraw_permit(
        &self,
        name: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        let index = Self::live_permits(&mut state, name, now).and_then(|permits| {
            permits.held.iter().position(|permit| {
                has_stem(&permit.token, stem) && (claim.is_none() || permit.claim == claim)
            })
        });
        let Some(index) = index else {
            return Ok(false);
        };
        Self::remove_permit(&mut state, name, index);
        drop(state);
        announce(&self.permits_freed, name);
        Ok(true)
    }

    async fn inspect_permits(
        &self,
        name: &str,
    ) -> Result<crate::backend::semaphore::Permits, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        let Some(permits) = Self::live_permits(&mut state, name, now) else {
            return Ok(crate::backend::semaphore::Permits::default());
        };
        let mut views: Vec<(Instant, PermitView)> = permits
            .held
            .iter()
            .map(|permit| {
                let view = PermitView {
                    fence: fence_of(&permit.token),
                    ttl: permit.expires - now,
                    holder: permit.holder.as_deref().cloned(),
                };
                (permit.expires, view)
            })
            .collect();
        views.sort_by_key(|(expires, _)| *expires);
        Ok(crate::backend::semaphore::Permits {
            limit: Some(permits.limit),
            permits: views.into_iter().map(|(_, view)| view).collect(),
        })
    }

    async fn watch_permits(&self, name: &str) -> ReleaseFeed {
        feed(&self.permits_freed, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(10);

    async fn take(backend: &MemoryBackend, limit: u32, stem: &str) -> AcquireOutcome {
        backend
            .acquire_permit("s", limit, stem, TTL, None, None, None)
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
        let seen = backend.inspect_permits("s").await.expect("inspect");
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
            backend.renew_permit("s", "a.1", TTL, None).await,
            Ok(RenewOutcome::NotHeld)
        );
        assert!(matches!(
            backend.renew_permit("s", &mine, TTL, None).await,
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
            backend.inspect_permits("s").await,
            Ok(crate::backend::semaphore::Permits::default())
        );
    }
}
