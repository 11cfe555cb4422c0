//! Multi-locks in memory: every name an ordinary lock entry holding the set's token, taken,
//! renewed and released under the store's one mutex.

use std::sync::Arc;

use super::{Held, MemoryBackend, issued_fence, lease};
use crate::backend::fence::{has_stem, token};
use crate::backend::{AcquireOutcome, BackendError, ReleaseOutcome, RenewOutcome, Withdrawal};
use crate::backend::{GrantAttempt, RenewAttempt};
use crate::name::LockName;

impl MemoryBackend {
    pub(super) async fn acquire_all(
        &self,
        names: &[LockName],
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let names: &[&str] = &super::strs(names);
        let (mut state, now) = self.state_now();
        let mut mine = Vec::new();
        for name in names {
            if let Some(held) = state.live_lock(name, now) {
                if !has_stem(&held.token, attempt.stem) {
                    if attempt.key_reused_by(&held.token) {
                        return Ok(AcquireOutcome::KeyReused);
                    }
                    return Ok(AcquireOutcome::Held {
                        ttl: Some(held.expires - now),
                    });
                }
                mine.push((held.token.clone(), held.expires));
            }
        }
        if let Some((token, expires)) = mine.first().cloned() {
            if mine.len() < names.len() {
                return Ok(AcquireOutcome::Held {
                    ttl: Some(expires - now),
                });
            }
            if attempt.claim.is_some()
                && let Some(held) = state.locks.get_mut(names[0])
            {
                held.claim = attempt.claim;
            }
            return Ok(AcquireOutcome::AlreadyHeld(lease(
                issued_fence(&token),
                expires - now,
                attempt.ack(),
            )));
        }
        let fence = state.next_fence();
        let holder = attempt.holder().map(|h| Arc::new(h.clone()));
        for (i, name) in names.iter().enumerate() {
            state.locks.insert(
                (*name).to_owned(),
                Held {
                    token: token(attempt.stem, fence),
                    expires: now + attempt.ttl(),
                    claim: if i == 0 { attempt.claim } else { None },
                    holder: holder.clone(),
                    holds: 1,
                },
            );
        }
        state.note_write(now);
        drop(state);
        for name in names {
            self.announce_grant(name);
        }
        Ok(AcquireOutcome::Granted(lease(
            fence,
            attempt.ttl(),
            attempt.ack(),
        )))
    }

    pub(super) async fn renew_all(
        &self,
        names: &[LockName],
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        let names: &[&str] = &super::strs(names);
        let RenewAttempt {
            token, ttl, ack, ..
        } = renewal;
        let (mut state, now) = self.state_now();
        for name in names {
            match state.live_lock(name, now) {
                None => return Ok(RenewOutcome::NotHeld),
                Some(held) if held.token != token => return Ok(RenewOutcome::NotOwner),
                Some(_) => {}
            }
        }
        for name in names {
            if let Some(held) = state.locks.get_mut(*name) {
                held.expires = now + ttl;
            }
        }
        Ok(RenewOutcome::Renewed(lease(issued_fence(token), ttl, ack)))
    }

    pub(super) async fn release_all(
        &self,
        names: &[LockName],
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        let names: &[&str] = &super::strs(names);
        let (mut state, now) = self.state_now();
        let mut mine = Vec::new();
        for name in names {
            if let Some(held) = state.live_lock(name, now) {
                if held.token != token {
                    return Ok(ReleaseOutcome::NotOwner);
                }
                mine.push(*name);
            }
        }
        for name in &mine {
            state.locks.remove(*name);
        }
        drop(state);
        for name in &mine {
            self.announce_release(name);
        }
        Ok(ReleaseOutcome::removed(mine.len() == names.len()))
    }

    pub(super) async fn withdraw_all(
        &self,
        names: &[LockName],
        withdrawal: Withdrawal<'_>,
    ) -> Result<bool, BackendError> {
        let names: &[&str] = &super::strs(names);
        let (mut state, now) = self.state_now();
        let first = names.first().copied().unwrap_or_default();
        let claimed = withdrawal.claim.is_none()
            || state
                .live_lock(first, now)
                .is_some_and(|held| held.claim == withdrawal.claim);
        if !claimed {
            return Ok(false);
        }
        let mine: Vec<&str> = names
            .iter()
            .copied()
            .filter(|name| {
                state
                    .live_lock(name, now)
                    .is_some_and(|held| has_stem(&held.token, withdrawal.stem))
            })
            .collect();
        for name in &mine {
            state.locks.remove(*name);
        }
        drop(state);
        for name in &mine {
            self.announce_release(name);
        }
        Ok(!mine.is_empty())
    }
}
