//! What is done to a grant once it is made: its holder renews it ([`LockService::renew_lease`])
//! or gives it back ([`LockService::release_lease`]), and an operator revokes it
//! ([`LockService::revoke_lease`]), for every kind of lease ([`Primitive`]); the exclusive
//! lock has shorthand methods. A holder refused because its grant is gone is told whether an
//! operator revoked it ([`LockError::Revoked`]). Acquiring is in [`super::acquire`].

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::LockName;
use super::error::LockError;
use super::primitive::{Exclusive, Primitive};
use super::promise::{bounded_renewal, check_replicas, validity};
use super::request::RenewRequest;
use super::service::LockService;
use super::token::LockToken;
use super::validity::Validity;
use crate::backend::{LeaseStore, Leased, ReleaseOutcome, RenewOutcome};
use crate::telemetry::metrics::HoldEnd;

/// A lease renewed by its holder.
#[derive(Debug, Clone, Copy)]
pub struct Renewal {
    pub fence: u64,
    pub validity: Validity,
    pub replicas_acked: Option<u32>,
    /// Until when it may still be renewed, for a bounded hold.
    pub hold_deadline: Option<SystemTime>,
}

/// What a release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// The grant is gone: the lock is free.
    Gone,
    /// A reentrant lock held more than once gave back one hold: this many are left.
    HoldsLeft(u32),
    /// A grant with a minimum hold (`min_hold_ms`) released before it: the lock stays held for
    /// this long, then expires (no other client gets it meanwhile).
    HeldFor(Duration),
}

impl LockService {
    /// Extends the lease of the holder of `token`.
    ///
    /// Too few replica acknowledgements with `require_replicas` answer an error but leave the
    /// lock held (the primary did extend it): releasing a lock its holder is still working under
    /// would turn a durability warning into a lost lock. A renewal that arrives with no validity
    /// left is undone like a failed acquire: nobody could rely on it.
    pub async fn renew(
        &self,
        name: &LockName,
        token: &LockToken,
        request: &RenewRequest,
    ) -> Result<Renewal, LockError> {
        self.renew_lease(&Exclusive, name, token, request).await
    }

    /// Extends a lease of `primitive` held by `token`.
    pub async fn renew_lease<P: Primitive>(
        &self,
        primitive: &P,
        name: &LockName,
        token: &LockToken,
        request: &RenewRequest,
    ) -> Result<Renewal, LockError> {
        let leased = primitive.leased(name);
        self.check_offered(leased)?;
        let started = Instant::now();
        let Some(renewal) = bounded_renewal(token, request.ttl, request.replicas) else {
            // The lease was last set to end at the bound as "bound - now" when that renewal was
            // sent, so in Redis it can outlive the bound by that renewal's trip: end it now,
            // as the refusal says (compare-and-delete: only this token's grant; a failure
            // leaves it to expire moments later).
            let _ = self.release_lease(primitive, name, token).await;
            return Err(LockError::MaxHoldReached);
        };
        // The bound, not the client's ttl, decides when this lease ends.
        let ends_at_bound = renewal.ttl < request.ttl;
        let outcome = self
            .backend
            .renew(leased, renewal)
            .await
            .map_err(LockError::of_write)?;
        let lease = match outcome {
            // A renewal never asks for one more hold, so never gets `Reentered`.
            RenewOutcome::Renewed(lease) | RenewOutcome::Reentered { lease, .. } => {
                self.longest.saw(renewal.ttl);
                lease
            }
            RenewOutcome::NotHeld => {
                return Err(self
                    .refusal(primitive, name, token, LockError::NotHeld)
                    .await);
            }
            RenewOutcome::NotOwner => {
                return Err(self
                    .refusal(primitive, name, token, LockError::NotOwner)
                    .await);
            }
        };
        check_replicas(&request.replicas, &lease)?;
        match validity(started, &lease) {
            Ok(validity) => Ok(Renewal {
                fence: lease.fence,
                validity,
                replicas_acked: lease.replicas_acked,
                hold_deadline: token.hold_deadline(),
            }),
            Err(err) => {
                if let Err(release_error) = self.backend.release(leased, token.expose()).await {
                    tracing::warn!(lock = %name, error = %release_error, "could not release a late renewal; it expires at its ttl");
                }
                // A lease renewed up to the bound that ran out on its way back ended at the
                // bound: that is the answer (409, final), not a 503 that invites a retry.
                Err(if ends_at_bound {
                    LockError::MaxHoldReached
                } else {
                    err
                })
            }
        }
    }

    /// Releases the lock held with `token`: `Some(holds)` when a reentrant lock held more
    /// than once gave back one hold and is still held `holds` times.
    pub async fn release(&self, name: &LockName, token: &LockToken) -> Result<Released, LockError> {
        self.release_lease(&Exclusive, name, token).await
    }

    /// Releases a lease of `primitive` held with `token` (see [`LockService::release`]).
    pub async fn release_lease<P: Primitive>(
        &self,
        primitive: &P,
        name: &LockName,
        token: &LockToken,
    ) -> Result<Released, LockError> {
        let leased = primitive.leased(name);
        self.check_offered(leased)?;
        let released = self.backend.release(leased, token.expose()).await;
        match released.map_err(LockError::of_write)? {
            ReleaseOutcome::Released => {
                self.record_hold(leased.kind(), name, token.fence(), HoldEnd::Released);
                Ok(Released::Gone)
            }
            ReleaseOutcome::StillHeld { holds } => Ok(Released::HoldsLeft(holds)),
            ReleaseOutcome::HeldFor { left } => {
                self.record_hold(leased.kind(), name, token.fence(), HoldEnd::Released);
                Ok(Released::HeldFor(left))
            }
            ReleaseOutcome::NotHeld => Err(self
                .refusal(primitive, name, token, LockError::NotHeld)
                .await),
            ReleaseOutcome::NotOwner => Err(self
                .refusal(primitive, name, token, LockError::NotOwner)
                .await),
        }
    }

    /// Why the holder of `token` was refused: `refused`, or [`LockError::Revoked`] if an
    /// operator revoked its grant. One more round trip, on the refusal path only.
    pub(super) async fn refusal<P: Primitive>(
        &self,
        primitive: &P,
        name: &LockName,
        token: &LockToken,
        refused: LockError,
    ) -> LockError {
        match self.was_revoked(primitive.leased(name), token).await {
            Ok(true) => LockError::Revoked,
            Ok(false) => refused,
            Err(err) => {
                tracing::debug!(lock = %name, error = %err, "could not tell whether a refused token was revoked");
                refused
            }
        }
    }

    /// Whether `token`'s grant of `leased` was revoked by an operator: a lock's, a set's (any
    /// of its names), or a grant of a set of grants (a permit, a reader).
    async fn was_revoked(&self, leased: Leased<'_>, token: &LockToken) -> Result<bool, LockError> {
        Ok(self.backend.was_revoked(leased, token.expose()).await?)
    }

    /// Deletes the lock on `name` whoever holds it (an operator's force release); its holder's
    /// next renewal or release answers [`LockError::Revoked`]. `NotHeld` if nothing was held.
    /// A read/write lock held by readers loses them all, and each is told so.
    pub async fn revoke(&self, name: &LockName) -> Result<(), LockError> {
        self.revoke_lease(&Exclusive, name).await
    }

    /// Ends every lease of `primitive` on `name` whoever holds it (see [`LockService::revoke`]):
    /// for a set of grants, every live grant (a semaphore's permits), each holder told
    /// [`LockError::Revoked`] at its next renewal or release.
    pub async fn revoke_lease<P: Primitive>(
        &self,
        primitive: &P,
        name: &LockName,
    ) -> Result<(), LockError> {
        let leased = primitive.leased(name);
        self.check_offered(leased)?;
        if self
            .backend
            .revoke(leased, self.beside_lock)
            .await
            .map_err(LockError::of_write)?
        {
            Ok(())
        } else {
            Err(LockError::NotHeld)
        }
    }
}
