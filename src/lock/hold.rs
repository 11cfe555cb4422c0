//! The hold watchdog: a lease that lives as long as its holder (a hold stream, whose client
//! keeps the HTTP response open) and is renewed from the gateway meanwhile.
//!
//! [`Hold`] renews every third of the ttl, as Redisson's watchdog does: two renewals can fail
//! before the lease runs out. A renewal that is refused (the lease expired or is someone
//! else's) ends the hold as [`HoldEvent::Lost`] ([`HoldEvent::Revoked`] if an operator revoked
//! it); one that cannot get through is retried until the validity it was given runs out, and
//! then the hold is lost too. A bounded hold (`max_hold_ms`) releases its grant when the bound
//! is reached and ends as [`HoldEvent::MaxHoldReached`]. At shutdown the hold withdraws its
//! grant and ends as [`HoldEvent::Released`]. Dropping a hold (its holder went away) drops its
//! grant's guard, which withdraws the grant at once (releases it, for a grant with a minimum
//! hold, which then stays held until its minimum).
//!
//! Generic over the [`Primitive`]: whatever kind of lease is held, the watchdog is this one.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::error::LockError;
use super::guard::GrantGuard;
use super::primitive::Primitive;
use super::renew_release::Renewal;
use super::request::RenewRequest;
use super::service::{Grant, LockService};
use super::{LockName, LockToken, Validity};
use crate::backend::sleep_until_some;
use crate::telemetry::metrics::HoldEnd;

/// After a renewal that could not get through, try again this often (or sooner, if the ttl is
/// short), for as long as the lease lasts.
const RETRY_RENEWAL_EVERY: Duration = Duration::from_secs(1);

/// Shortest lease a hold stream keeps: the gateway renews it at a third of its ttl for as
/// long as the stream is open, at no cost to the client, so an idle stream costs Redis at most
/// 5 renewals a second (a `ttl_ms` of 100 made it 30; issue 49). A shorter `ttl_ms` is raised
/// to it (within `--max-ttl`), and the stream's events say the ttl kept.
pub const MIN_HOLD_TTL: Duration = Duration::from_millis(600);

/// `lease` as a hold stream keeps it: a valid ttl raised to at least [`MIN_HOLD_TTL`] (or
/// `--max-ttl`). One under `--min-ttl` is left as it is, for the limits to refuse as anywhere.
pub fn with_hold_floor(mut lease: super::RawLease, limits: &super::Limits) -> super::RawLease {
    use super::millis;
    if let Some(ms) = lease.ttl_ms
        && ms >= millis(limits.min_ttl)
    {
        lease.ttl_ms = Some(ms.max(millis(MIN_HOLD_TTL.min(limits.max_ttl))));
    }
    lease
}

/// Renew at a third of the ttl: two renewals can fail before the lease runs out.
pub fn renewal_interval(ttl: Duration) -> Duration {
    (ttl / 3).max(Duration::from_millis(1))
}

/// What happened to a held lease.
#[derive(Debug)]
pub enum HoldEvent {
    /// The watchdog renewed the lease.
    Renewed(Renewal),
    /// The lease is no longer held; the hold is over.
    Lost(LostReason),
    /// An operator revoked the lease; the hold is over.
    Revoked,
    /// The lease was held for as long as its bound allows, and released; the hold is over.
    MaxHoldReached,
    /// The gateway is shutting down and withdrew the lease; the hold is over.
    Released,
}

/// Why a hold was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostReason {
    /// The lease ran out before a renewal.
    NotHeld,
    /// Someone else holds it now.
    NotOwner,
    /// Renewals could not reach the backend before the lease ended.
    Expired,
}

impl LostReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotHeld => "not-held",
            Self::NotOwner => "not-owner",
            Self::Expired => "expired",
        }
    }
}

/// A held lease and its watchdog.
#[derive(Debug)]
pub struct Hold<P: Primitive> {
    ending: Ending,
    primitive: P,
    shutdown: CancellationToken,
    token: LockToken,
    renewals: RenewRequest,
    /// Withdraws the grant when the hold is dropped (its holder went away).
    guard: GrantGuard<P>,
    validity: Validity,
    next_renewal: Instant,
    /// When a bounded hold must end (see `token`).
    hold_ends: Option<Instant>,
}

impl<P: Primitive> Hold<P> {
    /// Starts watching `grant` (of `primitive` on `name`), renewing it with `renewals`.
    pub fn new(
        service: Arc<LockService>,
        primitive: P,
        name: LockName,
        grant: Grant<P>,
        renewals: RenewRequest,
    ) -> Self {
        let hold_ends = grant.token.hold_deadline().map(|deadline| {
            let left = deadline
                .duration_since(crate::wall_clock::now())
                .unwrap_or_default();
            Instant::now() + left
        });
        let mut guard = grant.guard;
        // The holder going away is its release: a minimum hold outlives it.
        guard.release_on_drop(&grant.token);
        Self {
            hold_ends,
            shutdown: service.shutdown_token(),
            ending: Ending {
                kind: primitive.leased(&name).kind(),
                fence: grant.token.fence(),
                end: HoldEnd::Released,
                service,
                name,
            },
            primitive,
            token: grant.token,
            renewals,
            guard,
            validity: grant.validity,
            next_renewal: Instant::now() + renewal_interval(renewals.ttl),
        }
    }

    pub fn name(&self) -> &LockName {
        &self.ending.name
    }

    /// Waits for the next renewal (or shutdown) and says what happened; the hold goes on
    /// (`Some`) after a renewal only.
    pub async fn next(mut self) -> (HoldEvent, Option<Self>) {
        let kind = self.kind();
        loop {
            let hold_ends = self.hold_ends;
            tokio::select! {
                biased;
                () = tokio::time::sleep_until(self.next_renewal) => {}
                () = sleep_until_some(hold_ends) => {
                    let name = self.ending.name.clone();
                    tracing::info!(lock = %name, kind, "a hold reached its max_hold and released its lease");
                    if let Err(err) = Box::pin(self.guard.withdraw()).await {
                        tracing::warn!(lock = %name, kind, error = %err, "could not release a lease at its max_hold; it expires with its lease");
                    }
                    self.ending.end = HoldEnd::MaxHold;
                    return (HoldEvent::MaxHoldReached, None);
                }
                () = self.shutdown.cancelled() => {
                    let name = self.ending.name.clone();
                    if let Err(err) = Box::pin(self.guard.withdraw()).await {
                        tracing::warn!(lock = %name, kind, error = %err, "could not release a held lease at shutdown; it expires at its ttl");
                    }
                    return (HoldEvent::Released, None);
                }
            }
            // Boxed, as the withdrawal above: a renewal's future is several KiB, and inline it
            // would size the state every open hold keeps between renewals.
            let renewal = self.ending.service.renew_lease(
                &self.primitive,
                &self.ending.name,
                &self.token,
                &self.renewals,
            );
            match Box::pin(renewal).await {
                Ok(renewal) => {
                    self.validity = renewal.validity;
                    self.next_renewal = Instant::now() + renewal_interval(self.renewals.ttl);
                    return (HoldEvent::Renewed(renewal), Some(self));
                }
                Err(LockError::NotHeld) => return self.lost(LostReason::NotHeld),
                Err(LockError::NotOwner) => return self.lost(LostReason::NotOwner),
                Err(LockError::MaxHoldReached) => {
                    self.ending.end = HoldEnd::MaxHold;
                    return (HoldEvent::MaxHoldReached, None);
                }
                Err(LockError::Revoked) => {
                    tracing::info!(lock = %self.ending.name, kind, "a hold's lease was revoked");
                    self.ending.end = HoldEnd::Revoked;
                    return (HoldEvent::Revoked, None);
                }
                Err(err) => {
                    let now = Instant::now();
                    if self.validity.remaining(now).is_zero() {
                        return self.lost(LostReason::Expired);
                    }
                    tracing::warn!(lock = %self.ending.name, kind, error = %err, "hold renewal failed; retrying");
                    let retry = RETRY_RENEWAL_EVERY.min(renewal_interval(self.renewals.ttl));
                    self.next_renewal = (now + retry).min(self.validity.until());
                }
            }
        }
    }

    /// What the lease is called in logs.
    fn kind(&self) -> &'static str {
        self.ending.kind
    }

    fn lost(mut self, reason: LostReason) -> (HoldEvent, Option<Self>) {
        if reason == LostReason::NotHeld
            && self.hold_ends.is_some_and(|ends| Instant::now() >= ends)
        {
            // Its last renewal ended it at the bound; the timer above was a moment late.
            self.ending.end = HoldEnd::MaxHold;
            return (HoldEvent::MaxHoldReached, None);
        }
        self.ending.end = HoldEnd::Lost;
        tracing::info!(lock = %self.ending.name, kind = self.kind(), reason = reason.as_str(), "a hold lost its lease");
        // The guard still withdraws on drop: harmless if the lease is gone.
        (HoldEvent::Lost(reason), None)
    }
}

/// What a hold records of itself when it ends, however it ends (dropped with its stream, the
/// holder gone, included): how long its lease was held, and how that ended.
#[derive(Debug)]
struct Ending {
    service: Arc<LockService>,
    name: LockName,
    kind: &'static str,
    fence: u64,
    /// Released, unless the watchdog learnt otherwise.
    end: HoldEnd,
}

impl Drop for Ending {
    fn drop(&mut self) {
        self.service
            .record_hold(self.kind, &self.name, self.fence, self.end);
    }
}
