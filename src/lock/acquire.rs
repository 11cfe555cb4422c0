//! Acquiring a lease: one attempt, or a wait in line for the name (see [`super::service`]
//! for what a waiting request does and costs), or in the name's fair queue (`fair.rs`). Apart
//! from the engine's struct (`service.rs`) and from what is done to a grant once made
//! (`renew_release.rs`); the attempt itself is `attempt.rs`.

use std::sync::Arc;
use std::time::Duration;

use crate::watch;
use tokio::time::Instant;

use super::LockName;
use super::attempt::{Attempt, RETRY_AFTER_UNKNOWN_EXPIRY};
use super::budget::foreign_release_recheck;
use super::error::LockError;
use super::primitive::{Exclusive, Primitive};
use super::request::LeaseRequest;
use super::service::{Grant, LockService};
use super::token::{IdempotencyKey, TokenStem};
use super::wait::{Handoff, TooManyWaiters};
use crate::backend::queue::QUEUED_RETRY;
use crate::backend::{Backend, LeaseStore, Watched};
use crate::telemetry::metrics::WaitEnd;

/// A waiter never sleeps less than this before looking again: a lock with under a millisecond
/// left reports a ttl of 0.
pub(super) const MIN_RECHECK: Duration = Duration::from_millis(1);
/// A waiter whose attempt met a transient backend error tries again after this, doubling up to
/// [`MAX_BACKEND_RETRY`], until its deadline: a failover or restart should not end a wait the
/// client was willing to make.
pub(super) const MIN_BACKEND_RETRY: Duration = Duration::from_millis(50);
pub(super) const MAX_BACKEND_RETRY: Duration = Duration::from_secs(1);
/// Where the backend does not announce releases made by its other clients (a Redis without
/// keyspace notifications), the head of a line looks again this often while it waits: a lock
/// released by, say, redis-py is noticed within this plus a round trip, at the cost of one
/// short script (GET, PTTL) per name with waiters, 20 per second.
const FOREIGN_RELEASE_RECHECK: Duration = Duration::from_millis(50);

impl LockService {
    /// Takes the lock, waiting up to `request.wait` for it.
    pub async fn acquire(
        &self,
        name: &LockName,
        request: &LeaseRequest,
        idempotency_key: Option<&IdempotencyKey>,
    ) -> Result<Grant, LockError> {
        self.acquire_lease(&Exclusive, name, request, idempotency_key, None)
            .await
    }

    /// Takes a lease of `primitive`, waiting up to `request.wait` for it. With an idempotency
    /// key the stem is derived from (name, key), so a retry of a request whose response was
    /// lost finds its own grant. A fair waiter's places in the queue go to `positions`, if
    /// given (see `LockService::wait_fair`).
    pub async fn acquire_lease<P: Primitive>(
        &self,
        primitive: &P,
        name: &LockName,
        request: &LeaseRequest,
        idempotency_key: Option<&IdempotencyKey>,
        positions: Option<&watch::Sender<u32>>,
    ) -> Result<Grant<P>, LockError> {
        let leased = primitive.leased(name);
        self.check_offered(leased)?;
        if request.reentrant {
            self.check_reentrant_offered()?;
        }
        let derived =
            idempotency_key.map(|key| TokenStem::derive(&self.secret, name.as_str(), key));
        if request.fair.is_some() {
            self.check_fair_offered(leased)?;
            if !request.wait.is_zero() {
                // Boxed: the fair wait's future is kept apart from the plain one's.
                let waiting = self.wait_fair(primitive, name, derived.as_ref(), request, positions);
                return Box::pin(waiting).await;
            }
            // A fair try that does not wait takes no place: it is an acquire that does not
            // overtake the queue, as every acquire.
        }
        // Requests already waiting here go first: a newcomer does not overtake them.
        let mut held_off = false;
        if request.wait.is_zero() || !self.waiters.has_line(leased.kind(), name.as_str()) {
            // Boxed here and below: a waiting request keeps its future alive for the whole wait,
            // and the attempt (a backend round trip) is most of its size.
            let then_wait = !request.wait.is_zero();
            let attempt = self.attempt(primitive, name, derived.as_ref(), request, then_wait, None);
            // The outcome is settled before anything else is awaited: a match kept open
            // across the wait would keep the outcome in the future for the whole wait too.
            held_off = match Box::pin(attempt).await {
                Ok(Attempt::Granted(grant)) => return Ok(grant),
                Ok(Attempt::Held { retry_after, .. }) if request.wait.is_zero() => {
                    return Err(LockError::Held { retry_after });
                }
                // Only a fair attempt is queued (this one is not): as held.
                Ok(Attempt::Queued { .. }) if request.wait.is_zero() => {
                    return Err(LockError::Held {
                        retry_after: QUEUED_RETRY,
                    });
                }
                Err(err) if request.wait.is_zero() || !err.is_transient() => return Err(err),
                // Held, or the backend stumbled: wait in line.
                Ok(Attempt::Held { overtakable, .. }) => overtakable,
                Ok(Attempt::Queued { .. }) => false,
                Err(_) => false,
            };
            if held_off {
                self.hold_off(primitive, name, request).await;
            }
        }
        self.wait_for(primitive, name, derived.as_ref(), request, held_off)
            .await
    }

    /// A waiter that newcomers would overtake (a writer finding readers) keeps them out until
    /// it has had its turn, for at most its wait (no writer starvation). Once per waiting
    /// request (the caller lifts it when the waiter is granted). Best effort: without it,
    /// newcomers may keep the waiter out longer.
    async fn hold_off<P: Primitive>(&self, primitive: &P, name: &LockName, request: &LeaseRequest) {
        // Boxed: a round trip, and inline it would be the largest part of the future every
        // waiting request keeps (the attempts are boxed for the same reason).
        let held_off = self
            .backend
            .hold_off(primitive.leased(name), Some(request.wait));
        if let Err(err) = Box::pin(held_off).await {
            tracing::debug!(lock = %name, error = %err, "could not hold off newcomers");
        }
    }

    /// What lifts the hold-off of `name` when dropped: when the waiter that asked for it is
    /// granted, gives up, or goes away.
    fn lift_on_drop<P: Primitive>(&self, primitive: &P, name: &LockName) -> LiftHoldOff<P> {
        let armed = (primitive.clone(), name.clone(), self.backend.clone());
        LiftHoldOff(Some(Box::new(armed)))
    }

    /// Waits in line for `name` until the lock is granted or `request.wait` has passed.
    /// `held_off`: an attempt of this request already held off newcomers.
    async fn wait_for<P: Primitive>(
        &self,
        primitive: &P,
        name: &LockName,
        derived: Option<&TokenStem>,
        request: &LeaseRequest,
        held_off: bool,
    ) -> Result<Grant<P>, LockError> {
        // Built only for a waiter that held newcomers off (no allocation for other waiters).
        let mut lift = LiftHoldOff(None);
        if held_off {
            lift = self.lift_on_drop(primitive, name);
        }
        let leased = primitive.leased(name);
        let deadline = Instant::now() + request.wait;
        let ticket = self
            .waiters
            .join(leased.kind(), name.as_str(), request.holder.as_ref())
            .map_err(|TooManyWaiters| LockError::TooManyWaiters)?;
        tokio::select! {
            biased;
            () = ticket.turn() => {}
            () = tokio::time::sleep_until(deadline) => {
                self.record_wait(leased, name, (deadline, request.wait), WaitEnd::TimedOut);
                return Err(LockError::Held { retry_after: RETRY_AFTER_UNKNOWN_EXPIRY });
            }
            () = self.shutdown.cancelled() => return Err(LockError::ShuttingDown),
        }
        // Boxed: subscribing happens once per wait, and inline it would be the largest part
        // of the future every waiting request keeps.
        let mut releases =
            Box::pin(ticket.releases(|| self.backend.watch(Watched::Releases(leased)))).await;
        let mut wake_at = None;
        let mut backend_retry = MIN_BACKEND_RETRY;
        if let Some(handoff) = ticket.take_handoff() {
            releases = handoff.releases;
            // After a lock's hand-off the next in line waits for the new holder's release; a
            // semaphore may have another permit free at once.
            if leased.excludes_others() {
                wake_at = Some(handoff.held_until);
            }
        }
        loop {
            if let Some(mut at) = wake_at {
                if !self.backend.sees_every_release(leased) {
                    let lines = self.waiters.lines();
                    let every = foreign_release_recheck(FOREIGN_RELEASE_RECHECK, lines);
                    at = at.min(Instant::now() + every);
                }
                tokio::select! {
                    biased;
                    () = next_release(&mut releases) => {}
                    () = tokio::time::sleep_until(at.min(deadline)) => {}
                    () = self.shutdown.cancelled() => return Err(LockError::ShuttingDown),
                }
            }
            // From here on, a release shows up as a change: none can slip between this attempt
            // and the next wait.
            releases.borrow_and_update();
            match Box::pin(self.attempt(primitive, name, derived, request, true, None)).await {
                Ok(Attempt::Granted(grant)) => {
                    drop(lift);
                    self.record_wait(leased, name, (deadline, request.wait), WaitEnd::Granted);
                    ticket.hand_off(Handoff {
                        releases,
                        held_until: grant.validity.until(),
                    });
                    return Ok(grant);
                }
                Ok(Attempt::Held {
                    retry_after,
                    overtakable,
                }) => {
                    if overtakable && lift.0.is_none() {
                        self.hold_off(primitive, name, request).await;
                        lift = self.lift_on_drop(primitive, name);
                    }
                    if Instant::now() >= deadline {
                        self.record_wait(leased, name, (deadline, request.wait), WaitEnd::TimedOut);
                        return Err(LockError::Held { retry_after });
                    }
                    backend_retry = MIN_BACKEND_RETRY;
                    wake_at = Some(Instant::now() + retry_after.max(MIN_RECHECK));
                }
                // Only a fair attempt is queued (this one is not): as held, briefly.
                Ok(Attempt::Queued { .. }) => {
                    if Instant::now() >= deadline {
                        self.record_wait(leased, name, (deadline, request.wait), WaitEnd::TimedOut);
                        return Err(LockError::Held {
                            retry_after: QUEUED_RETRY,
                        });
                    }
                    wake_at = Some(Instant::now() + QUEUED_RETRY);
                }
                Err(err) if err.is_transient() && Instant::now() < deadline => {
                    tracing::debug!(lock = %name, error = %err, "waiting through a backend error");
                    wake_at = Some(Instant::now() + backend_retry);
                    backend_retry = (backend_retry * 2).min(MAX_BACKEND_RETRY);
                }
                Err(err) => return Err(err),
            }
        }
    }
}

/// A waiter's hold-off of newcomers, lifted when dropped if armed (in the background: the
/// client need not wait for it, and it also ends by itself when the waiter's wait would have).
struct LiftHoldOff<P: Primitive>(Option<Box<(P, LockName, Arc<Backend>)>>);

impl<P: Primitive> Drop for LiftHoldOff<P> {
    fn drop(&mut self) {
        if let Some(armed) = self.0.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let (primitive, name, backend) = *armed;
                if let Err(err) = backend.hold_off(primitive.leased(&name), None).await {
                    tracing::debug!(lock = %name, error = %err, "could not lift a hold-off of newcomers; it ends with the waiter's wait");
                }
            });
        }
    }
}

/// Resolves at the next change of a release feed; never, if the feed has ended (waiters then
/// rely on the holder's ttl).
pub(super) async fn next_release(releases: &mut watch::Receiver<()>) {
    if releases.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}
