//! What a lease's answer may promise, checked the same way for every grant, renewal and
//! re-entry: the replica acknowledgements a request required ([`check_replicas`]), the
//! validity left once the store answered ([`validity`], counted from before the request was
//! sent; see [`super::validity`]), and a bounded hold's deadline, which a renewal never
//! passes ([`bounded_renewal`]) and no answer promises past ([`within_hold_bound`]).

use std::time::Duration;

use tokio::time::Instant;

use super::error::LockError;
use super::request::ReplicaPolicy;
use super::token::LockToken;
use super::validity::Validity;
use crate::backend::{Lease, RenewAttempt};

/// Refuses a lease acknowledged by fewer replicas than `policy` requires.
pub(super) fn check_replicas(policy: &ReplicaPolicy, lease: &Lease) -> Result<(), LockError> {
    let acked = lease.replicas_acked.unwrap_or(0);
    if policy.required && acked < policy.replicas {
        return Err(LockError::InsufficientReplicas {
            wanted: policy.replicas,
            acked,
        });
    }
    Ok(())
}

/// What is left of `lease`, counted from `started` (before the request was sent); refused
/// when nothing is.
pub(super) fn validity(started: Instant, lease: &Lease) -> Result<Validity, LockError> {
    Validity::of_lease(started, lease.ttl, Duration::ZERO, Instant::now())
        .ok_or(LockError::LeaseExpired)
}

/// The renewal of `token`'s grant for `ttl`: a bounded hold (`max_hold_ms`, which the token
/// carries) is renewed up to its deadline, never past it; `None` once the deadline is reached.
pub(super) fn bounded_renewal(
    token: &LockToken,
    ttl: Duration,
    replicas: ReplicaPolicy,
) -> Option<RenewAttempt<'_>> {
    let hold_left = token.hold_left();
    if hold_left.is_some_and(|left| left.is_zero()) {
        return None;
    }
    Some(RenewAttempt {
        token: token.expose(),
        ttl: within_hold(ttl, hold_left),
        ack: replicas.ack(),
        one_more_hold: false,
    })
}

/// `validity`, ended at `token`'s hold bound if it has one (rounded up as [`within_hold`]
/// rounds). A re-entry keeps a lease that lasts longer than it asks for, and a lease can last
/// past the bound it was granted within when Redis's clock stepped back since (every lease
/// then lasts longer than granted): its holder is still promised no more than the bound, as a
/// renewal's holder is.
pub(super) fn within_hold_bound(validity: Validity, token: &LockToken) -> Validity {
    match token.hold_left() {
        Some(left) => validity.at_most(Instant::now() + whole_millis_up(left)),
        None => validity,
    }
}

/// `ttl`, cut to what is left of a bounded hold (`hold_left`), rounded up to whole
/// milliseconds as the store takes a ttl: truncated, the lease could end up to a millisecond
/// before the bound, and a renewal in that gap would be told "not held" (404) instead of
/// `max-hold-reached`. Past the bound, the caller's refusal ends it.
fn within_hold(ttl: Duration, hold_left: Option<Duration>) -> Duration {
    hold_left.map_or(ttl, |left| ttl.min(whole_millis_up(left)))
}

/// `d` rounded up to whole milliseconds.
fn whole_millis_up(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_micros().div_ceil(1000)).unwrap_or(u64::MAX))
}
