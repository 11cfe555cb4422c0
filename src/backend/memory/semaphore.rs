//! Semaphores in memory: per name, the limit and the live permits, under the store's one
//! mutex (each operation is one critical section, as a script is on Redis).

use super::grants::GrantSet;
use super::{MemoryBackend, acked, lease};
use crate::backend::GrantsOf;
use crate::backend::fence::token;
use crate::backend::{AcquireOutcome, BackendError, GrantAttempt};

impl MemoryBackend {
    pub(super) async fn acquire_permit(
        &self,
        name: &str,
        limit: u32,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let GrantAttempt { stem, claim, .. } = attempt;
        let (ttl, ack, holder) = (attempt.ttl(), attempt.ack(), attempt.holder());
        let (mut state, now) = self.state_now();
        if let Some(permits) = state.live_grants(GrantsOf::Permits, name, now) {
            if let Some(lease) = permits.find_again(stem, claim, now, acked(ack)) {
                return Ok(AcquireOutcome::AlreadyHeld(lease));
            }
            if permits.limit != limit {
                return Ok(AcquireOutcome::LimitDiffers {
                    limit: permits.limit,
                });
            }
            if permits.len() >= usize::try_from(limit).unwrap_or(usize::MAX) {
                return Ok(AcquireOutcome::Held {
                    ttl: permits.first_end().map(|end| end - now),
                });
            }
        }
        let fence = state.next_fence();
        state
            .semaphores
            .entry(name.to_owned())
            .or_insert_with(|| GrantSet::new(limit))
            .add(token(stem, fence), now + ttl, claim, holder);
        state.note_write(now);
        Ok(AcquireOutcome::Granted(lease(fence, ttl, ack)))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::backend::{Grants, LeaseRequest, ReleaseOutcome, RenewAttempt, RenewOutcome};

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
        let seen = backend.grant_views(GrantsOf::Permits, "s");
        assert_eq!(seen.limit, Some(2));
        assert_eq!(seen.grants.len(), 2);
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
                .renew_grant(
                    GrantsOf::Permits,
                    "s",
                    RenewAttempt {
                        token: "a.1",
                        ttl: TTL,
                        ack: None,
                        one_more_hold: false,
                    }
                )
                .await,
            Ok(RenewOutcome::NotHeld)
        );
        assert!(matches!(
            backend
                .renew_grant(
                    GrantsOf::Permits,
                    "s",
                    RenewAttempt {
                        token: &mine,
                        ttl: TTL,
                        ack: None,
                        one_more_hold: false,
                    }
                )
                .await,
            Ok(RenewOutcome::Renewed(_))
        ));
        assert_eq!(
            backend.release_grant(GrantsOf::Permits, "s", "a.1").await,
            Ok(ReleaseOutcome::NotHeld)
        );
        assert_eq!(
            backend.release_grant(GrantsOf::Permits, "s", &mine).await,
            Ok(ReleaseOutcome::Released)
        );
        assert_eq!(
            backend.grant_views(GrantsOf::Permits, "s"),
            Grants::default()
        );
    }
}
