//! A set of grants kept beside the lock (a read/write lock's readers, see
//! [`GrantSetKind::marker`](crate::backend::GrantSetKind::marker)) in memory, as Redis keeps
//! it: the grants of a name beside its lock entry, which holds the kind's marker meanwhile;
//! and a waiting lock's hold-off of new grants.

use std::time::Duration;

use tokio::time::Instant;

use super::grants::GrantSet;
use super::{Held, MemoryBackend, State, lease};
use crate::backend::marks::is_marker;
use crate::backend::{AcquireOutcome, BackendError, GrantAttempt, GrantsOf};

impl State {
    /// Whether grants of `of`, kept beside the lock, hold `name`: its lock entry is live and
    /// holds the kind's marker.
    pub(super) fn marker_holds(&mut self, of: GrantsOf, name: &str, now: Instant) -> bool {
        self.live_lock(name, now)
            .is_some_and(|held| Some(held.token.as_str()) == of.marker)
    }

    /// The marker lives as long as the longest grant of `of`; with none left it goes.
    pub(super) fn fit_marker(&mut self, of: GrantsOf, name: &str) -> bool {
        match self.sets(of).get(name).and_then(GrantSet::last_end) {
            Some(end) => {
                if let Some(held) = self.locks.get_mut(name) {
                    held.expires = end;
                }
                true
            }
            None => {
                self.sets(of).remove(name);
                self.locks.remove(name);
                false
            }
        }
    }
}

impl MemoryBackend {
    /// Takes a grant of `of`, the kind kept beside the lock, on `name`: none while the lock is
    /// held (by anything but the marker) or while a waiting lock holds new grants off; the
    /// marker stands in the lock entry meanwhile, as long as the longest grant.
    pub(super) fn acquire_beside_lock(
        &self,
        of: GrantsOf,
        name: &str,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let (mut state, now) = self.state_now();
        if let Some(held) = state.live_lock(name, now)
            && !is_marker(&held.token)
        {
            if attempt.key_reused_by(&held.token) {
                return Ok(AcquireOutcome::KeyReused);
            }
            return Ok(AcquireOutcome::Held {
                ttl: Some(held.expires - now),
            });
        }
        if let Some(readers) = state.live_grants(of, name, now) {
            if let Some(lease) = readers.find_again(&attempt, now) {
                return Ok(AcquireOutcome::AlreadyHeld(lease));
            }
            if readers.key_reused(&attempt) {
                return Ok(AcquireOutcome::KeyReused);
            }
        }
        if let Some(until) = state.hold_offs.get(name).copied().filter(|u| *u > now) {
            return Ok(AcquireOutcome::Held {
                ttl: Some(until - now),
            });
        }
        let fence = state.next_fence();
        state
            .sets(of)
            .entry(name.to_owned())
            .or_insert_with(|| GrantSet::new(0))
            .add(&attempt, fence, now);
        let marker = of.marker.unwrap_or_default();
        state.locks.entry(name.to_owned()).or_insert_with(|| Held {
            token: marker.to_owned(),
            expires: now,
            claim: None,
            holder: None,
            holds: 1,
        });
        state.fit_marker(of, name);
        state.note_write(now);
        Ok(AcquireOutcome::Granted(lease(
            fence,
            attempt.ttl(),
            attempt.ack(),
        )))
    }
}

impl MemoryBackend {
    /// No new grant of a set kept beside the lock of `name` for `wait`, or again from now on
    /// (`None`): see [`crate::backend::LeaseStore::hold_off`].
    pub(super) async fn hold_off_beside(
        &self,
        name: &str,
        wait: Option<Duration>,
    ) -> Result<(), BackendError> {
        let (mut state, now) = self.state_now();
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
