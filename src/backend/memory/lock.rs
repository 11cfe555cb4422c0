//! The lock of a name in memory: one entry per held name, as Redis keeps one key.

use std::sync::Arc;

use super::{Held, MemoryBackend, issued_fence, lease, wall_clock_millis};
use crate::backend::fence::{has_stem, min_hold_left, token};
use crate::backend::marks::is_marker;
use crate::backend::queue::QUEUED_RETRY;
use crate::backend::{
    AcquireOutcome, BackendError, GrantAttempt, ReleaseOutcome, RenewAttempt, RenewOutcome,
    Withdrawal,
};

impl MemoryBackend {
    pub(super) async fn acquire_lock(
        &self,
        name: &str,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let place = attempt.queue;
        let (mut state, now) = self.state_now();
        if let Some(held) = state.live_lock(name, now) {
            let remaining = held.expires - now;
            if has_stem(&held.token, attempt.stem) {
                if attempt.claim.is_some() {
                    held.claim = attempt.claim;
                }
                let fence = issued_fence(&held.token);
                if let Some(place) = place {
                    state.leave_queue(name, place.waiter);
                }
                return Ok(AcquireOutcome::AlreadyHeld(lease(
                    fence,
                    remaining,
                    attempt.ack(),
                )));
            }
            if attempt.key_reused_by(&held.token) {
                if let Some(place) = place {
                    state.leave_queue(name, place.waiter);
                }
                return Ok(AcquireOutcome::KeyReused);
            }
            let shared = is_marker(&held.token);
            if let Some(place) = place {
                let (position, score) = state.enqueue(name, place, attempt.owner());
                return Ok(AcquireOutcome::Queued {
                    position,
                    score,
                    ttl: Some(remaining),
                    stray: None,
                });
            }
            return Ok(if shared {
                AcquireOutcome::Overtakable {
                    ttl: Some(remaining),
                }
            } else {
                AcquireOutcome::Held {
                    ttl: Some(remaining),
                }
            });
        }
        // Free: only for the queue's head, if anyone is queued.
        let mut new_head = false;
        if let Some(place) = place {
            let (position, score) = state.enqueue(name, place, attempt.owner());
            if position > 1 {
                drop(state);
                self.announce_head(name);
                // A place of this store's queue goes with its waiter, at once: none is stray.
                return Ok(AcquireOutcome::Queued {
                    position,
                    score,
                    ttl: None,
                    stray: None,
                });
            }
            new_head = state.leave_queue(name, place.waiter).is_some();
        } else if state.queue_head(name).is_some() {
            return Ok(AcquireOutcome::Held {
                ttl: Some(QUEUED_RETRY),
            });
        }
        let fence = state.next_fence();
        state.locks.insert(
            name.to_owned(),
            Held {
                token: token(attempt.stem, fence),
                expires: now + attempt.ttl(),
                claim: attempt.claim,
                holder: attempt.holder().map(|h| Arc::new(h.clone())),
                holds: 1,
            },
        );
        state.note_write(now);
        drop(state);
        self.announce_grant(name);
        if new_head {
            self.announce_head(name);
        }
        Ok(AcquireOutcome::Granted(lease(
            fence,
            attempt.ttl(),
            attempt.ack(),
        )))
    }

    pub(super) async fn release_lock(
        &self,
        name: &str,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        let (mut state, now) = self.state_now();
        let outcome = match state.live_lock(name, now) {
            None => ReleaseOutcome::NotHeld,
            Some(held) if held.token != token => ReleaseOutcome::NotOwner,
            // Only a reentrant grant is ever held more than once.
            Some(held) if held.holds > 1 => {
                held.holds -= 1;
                ReleaseOutcome::StillHeld { holds: held.holds }
            }
            Some(held) => match min_hold_left(token, wall_clock_millis) {
                // Released before its minimum hold: it stays held until then.
                Some(left) => {
                    held.expires = now + left;
                    ReleaseOutcome::HeldFor { left }
                }
                None => {
                    state.locks.remove(name);
                    ReleaseOutcome::Released
                }
            },
        };
        drop(state);
        if outcome == ReleaseOutcome::Released {
            self.announce_release(name);
        }
        Ok(outcome)
    }

    pub(super) async fn withdraw_lock(
        &self,
        name: &str,
        withdrawal: Withdrawal<'_>,
    ) -> Result<bool, BackendError> {
        let (mut state, now) = self.state_now();
        let ours = state
            .live_lock(name, now)
            .is_some_and(|held| withdrawal.takes(&held.token, held.claim));
        if ours {
            state.locks.remove(name);
        }
        drop(state);
        if ours {
            self.announce_release(name);
        }
        Ok(ours)
    }

    /// Renews the lock `name` held by `renewal.token`, or (`one_more_hold`) takes the
    /// reentrant lock once more: its lease is then never shortened.
    pub(super) async fn renew_lock(
        &self,
        name: &str,
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        let RenewAttempt {
            token,
            ttl,
            ack,
            one_more_hold,
        } = renewal;
        let (mut state, now) = self.state_now();
        match state.live_lock(name, now) {
            None => Ok(RenewOutcome::NotHeld),
            Some(held) if held.token != token => Ok(RenewOutcome::NotOwner),
            Some(held) if one_more_hold => {
                held.holds += 1;
                held.expires = held.expires.max(now + ttl);
                Ok(RenewOutcome::Reentered {
                    lease: lease(issued_fence(token), held.expires - now, ack),
                    holds: held.holds,
                })
            }
            Some(held) => {
                held.expires = now + ttl;
                Ok(RenewOutcome::Renewed(lease(issued_fence(token), ttl, ack)))
            }
        }
    }
}
