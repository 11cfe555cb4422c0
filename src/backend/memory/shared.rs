//! Shared grants of read/write locks in memory, as Redis keeps them (see `backend::shared`):
//! the readers of a name beside its lock entry, which holds the marker meanwhile.

use std::time::Duration;

use tokio::time::Instant;

use super::semaphore::Permits;
use super::{Held, MemoryBackend, State, acked, wall_clock_micros};
use crate::backend::fence::{next_fence, token};
use crate::backend::semaphore::PermitView;
use crate::backend::shared::SHARED_MARKER;
use crate::backend::{AcquireOutcome, BackendError, Claim, ReleaseOutcome, RenewOutcome};
use crate::backend::{GrantAttempt, RenewAttempt};

impl State {
    /// The live readers of `name` and the marker's entry, or `None` if a writer (or nobody)
    /// holds it. Expired readers are dropped first.
    fn live_readers(&mut self, name: &str, now: Instant) -> Option<&mut Permits> {
        let marked = self
            .live_lock(name, now)
            .is_some_and(|held| held.token == SHARED_MARKER);
        if !marked {
            self.readers.remove(name);
            return None;
        }
        if self
            .readers
            .get_mut(name)
            .is_some_and(|readers| !readers.reclaim(now))
        {
            self.readers.remove(name);
        }
        self.readers.get_mut(name)
    }

    /// The marker lives as long as the longest reader; with no reader left it goes.
    fn fit_marker(&mut self, name: &str) -> bool {
        match self.readers.get(name).and_then(Permits::last_end) {
            Some(end) => {
                if let Some(held) = self.locks.get_mut(name) {
                    held.expires = end;
                }
                true
            }
            None => {
                self.readers.remove(name);
                self.locks.remove(name);
                false
            }
        }
    }
}

impl MemoryBackend {
    pub(super) async fn acquire_shared(
        &self,
        name: &str,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let (stem, ttl, ack, claim, holder) = attempt.parts();
        let now = Instant::now();
        let mut state = self.state();
        if let Some(held) = state.live_lock(name, now)
            && held.token != SHARED_MARKER
        {
            return Ok(AcquireOutcome::Held {
                ttl: Some(held.expires - now),
            });
        }
        if let Some(readers) = state.live_readers(name, now)
            && let Some(lease) = readers.find_again(stem, claim, now, acked(ack))
        {
            return Ok(AcquireOutcome::AlreadyHeld(lease));
        }
        if let Some(until) = state.hold_offs.get(name).copied().filter(|u| *u > now) {
            return Ok(AcquireOutcome::Held {
                ttl: Some(until - now),
            });
        }
        let fence = next_fence(state.last_fence, wall_clock_micros());
        state.last_fence = fence;
        state
            .readers
            .entry(name.to_owned())
            .or_insert_with(|| Permits::new(0))
            .add(token(stem, fence), now + ttl, claim, holder);
        state.locks.entry(name.to_owned()).or_insert_with(|| Held {
            token: SHARED_MARKER.to_owned(),
            expires: now,
            claim: None,
            holder: None,
        });
        state.fit_marker(name);
        state.note_write(now);
        Ok(AcquireOutcome::Granted(crate::backend::Lease {
            fence,
            ttl,
            replicas_acked: acked(ack),
        }))
    }

    pub(super) async fn renew_shared(
        &self,
        name: &str,
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        let RenewAttempt { token, ttl, ack } = renewal;
        let now = Instant::now();
        let mut state = self.state();
        let renewed = state
            .live_readers(name, now)
            .and_then(|readers| readers.renew(token, now + ttl));
        if renewed.is_none() {
            return Ok(RenewOutcome::NotHeld);
        }
        state.fit_marker(name);
        Ok(RenewOutcome::Renewed(crate::backend::Lease {
            fence: crate::backend::fence::fence_of(token).unwrap_or(0),
            ttl,
            replicas_acked: acked(ack),
        }))
    }

    pub(super) async fn release_shared(
        &self,
        name: &str,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        let removed = state
            .live_readers(name, now)
            .is_some_and(|readers| readers.remove(|t| t == token));
        if !removed {
            return Ok(ReleaseOutcome::NotHeld);
        }
        let readers_left = state.fit_marker(name);
        drop(state);
        if !readers_left {
            self.announce_release(name);
        }
        Ok(ReleaseOutcome::Released)
    }

    pub(super) async fn withdraw_shared(
        &self,
        name: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        let removed = state
            .live_readers(name, now)
            .is_some_and(|readers| readers.remove_claimed(stem, claim));
        if !removed {
            return Ok(false);
        }
        let readers_left = state.fit_marker(name);
        drop(state);
        if !readers_left {
            self.announce_release(name);
        }
        Ok(true)
    }

    pub(super) async fn inspect_readers(
        &self,
        name: &str,
    ) -> Result<Vec<PermitView>, BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        Ok(state
            .live_readers(name, now)
            .map(|readers| readers.views(now))
            .unwrap_or_default())
    }

    pub(super) async fn hold_off_readers(
        &self,
        name: &str,
        wait: Option<Duration>,
    ) -> Result<(), BackendError> {
        let now = Instant::now();
        let mut state = self.state();
        match wait {
            Some(wait) => {
                state.hold_offs.insert(name.to_owned(), now + wait);
            }
            None => {
                state.hold_offs.remove(name);
            }
        }
        Ok(())
    }
}
