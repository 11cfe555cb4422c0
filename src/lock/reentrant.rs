//! Reentrant locks: a lock taken with `reentrant: true` (its token carries the reentrant mark,
//! see `backend::fence`) may be taken again by its holder, with its token, as Java's
//! `ReentrantLock` and Redisson's `RLock` are: each re-entry counts one more hold, each release
//! gives one back, and the lock is free when the last is given back. A renewal extends the
//! lease, never the count. The store keeps the count beside the lock, for as long as the lease
//! (`backend::RenewAttempt::one_more_hold`); Redlock does not keep reentrant locks.
//!
//! A re-entry extends the lease as a renewal does: it counts towards the longest lease the
//! data-loss guard holds grants back for, and its answer promises nothing past a bounded
//! hold's bound (`promise::within_hold_bound`). The deterministic simulation found both
//! missing (holds' world, seeds 145 and 36; mutants `reentry-not-in-the-data-loss-hold-back`
//! and `reentry-promises-past-its-bound`).
//!
//! A re-entry is not idempotent: one whose answer was lost (503 `outcome-unknown`) may have
//! counted, and a release that is repeated gives back two holds. Inspect shows the count
//! (`Inspection::holds`), so a holder that cannot tell looks before it repeats.

use tokio::time::Instant;

use super::LockName;
use super::error::LockError;
use super::primitive::Exclusive;
use super::promise::{bounded_renewal, check_replicas, validity, within_hold_bound};
use super::request::LeaseRequest;
use super::service::LockService;
use super::token::LockToken;
use super::validity::Validity;
use crate::backend::{BackendError, LeaseStore, Leased, RenewAttempt, RenewOutcome};

/// A reentrant lock taken once more.
#[derive(Debug)]
pub struct Reentry {
    pub fence: u64,
    pub validity: Validity,
    pub replicas_acked: Option<u32>,
    /// How many times the holder holds it now.
    pub holds: u32,
}

impl LockService {
    /// Whether the configured store keeps reentrant locks (Redlock does not): 501
    /// `not-offered`.
    pub(super) fn check_reentrant_offered(&self) -> Result<(), LockError> {
        self.offered(self.backend.offers_reentrant(), "reentrant lock")
    }

    /// Takes the lock `name` once more for the holder of `token`, a reentrant grant: the lease
    /// is made to last at least `request.ttl` (within the grant's hold bound, if it has one).
    pub async fn reenter(
        &self,
        name: &LockName,
        token: &LockToken,
        request: &LeaseRequest,
    ) -> Result<Reentry, LockError> {
        self.check_reentrant_offered()?;
        if !token.is_reentrant() {
            return Err(LockError::NotReentrant);
        }
        let Some(renewal) = bounded_renewal(token, request.ttl, request.replicas) else {
            return Err(LockError::MaxHoldReached);
        };
        let renewal = RenewAttempt {
            one_more_hold: true,
            ..renewal
        };
        let (started, asked) = (Instant::now(), renewal.ttl);
        let reentered = self
            .backend
            .renew(Leased::Lock(name), renewal)
            .await
            .map_err(LockError::of_write)?;
        let (lease, holds) = match reentered {
            RenewOutcome::Reentered { lease, holds } => {
                // A re-entry extends the lease as a renewal does: the store's data-loss guard
                // holds grants back for it too.
                self.longest.saw(asked);
                (lease, holds)
            }
            RenewOutcome::Renewed(_) => {
                let answer = BackendError::Protocol("a re-entry answered as a renewal".into());
                return Err(LockError::of_write(answer));
            }
            RenewOutcome::NotHeld => {
                let refused = LockError::NotHeld;
                return Err(self.refusal(&Exclusive, name, token, refused).await);
            }
            RenewOutcome::NotOwner => {
                let refused = LockError::NotOwner;
                return Err(self.refusal(&Exclusive, name, token, refused).await);
            }
        };
        // The hold is counted: whatever goes wrong from here, the holder keeps it and gives
        // it back with a release, as with a renewal that lacked replicas.
        check_replicas(&request.replicas, &lease)?;
        Ok(Reentry {
            fence: lease.fence,
            validity: within_hold_bound(validity(started, &lease)?, token),
            replicas_acked: lease.replicas_acked,
            holds,
        })
    }
}
