//! Fair waiting: a waiter takes a place in the name's queue, which the store keeps for every
//! gateway (see `backend::queue`), and is granted only at its head.
//!
//! Of this gateway's fair waiters of a name only the front of their line (`fair_lines.rs`)
//! looks at the store: when told its waiter heads the queue, at a release while it heads
//! it, at the end of the lease it was told of, and at least every [`RECHECK`] (which also
//! keeps this gateway alive in the queue).

use crate::watch;
use tokio::time::Instant;

use super::LockName;
use super::acquire::{MAX_BACKEND_RETRY, MIN_BACKEND_RETRY, MIN_RECHECK, next_release};
use super::attempt::Attempt;
use super::error::LockError;
use super::primitive::Primitive;
use super::request::LeaseRequest;
use super::service::{Grant, LockService};
use super::token::TokenStem;
use super::wait::TooManyWaiters;
use crate::backend::queue::RECHECK;
use crate::backend::{Leased, QueuePlace};
use crate::telemetry::metrics::WaitEnd;

impl LockService {
    /// Refuses a fair acquire where the store keeps no queue (Redlock), or of a kind of lease
    /// that does not queue (only a lock does; the HTTP layer refuses the others' bodies).
    pub fn check_fair_offered(&self, leased: Leased<'_>) -> Result<(), LockError> {
        self.offered(
            matches!(leased, Leased::Lock(_)),
            "fair queue of this kind of lease",
        )?;
        self.offered(self.backend.offers_fair(), "fair lock")
    }

    /// Waits in the queue of `name` at the request's priority until granted or
    /// `request.wait` has passed. With `positions`, every place the store answers (1: next)
    /// is sent there, and the waiter looks at least every [`RECHECK`] even when it is not
    /// the front (its place moves as others are served or leave).
    pub(super) async fn wait_fair<P: Primitive>(
        &self,
        primitive: &P,
        name: &LockName,
        derived: Option<&TokenStem>,
        request: &LeaseRequest,
        positions: Option<&watch::Sender<u32>>,
    ) -> Result<Grant<P>, LockError> {
        let deadline = Instant::now() + request.wait;
        let admission = self
            .waiters
            .admit()
            .map_err(|TooManyWaiters| LockError::TooManyWaiters)?;
        let waiter = (derived, request.holder.as_ref());
        let mut ticket = self.fair.join(&self.backend, name, waiter, admission);
        // Boxed: subscribing happens once per line, and inline it would be the largest part
        // of the future every waiting request keeps.
        let mut releases = Box::pin(ticket.feeds()).await;
        let mut backend_retry = MIN_BACKEND_RETRY;
        loop {
            // From here on, a word arriving shows up as a change.
            if let Some(heads) = ticket.heads.as_mut() {
                heads.borrow_and_update();
            }
            releases.borrow_and_update();
            let place = QueuePlace {
                waiter: ticket.waiter,
                priority: request.fair.unwrap_or(0),
                score: ticket.score,
            };
            let attempt = self.attempt(primitive, name, derived, request, true, Some(place));
            let now = Instant::now();
            let (mut wake_at, first, retry_after) = match Box::pin(attempt).await {
                Ok(Attempt::Granted(grant)) => {
                    ticket.granted = true;
                    self.record_wait(
                        primitive.leased(name),
                        name,
                        (deadline, request.wait),
                        WaitEnd::Granted,
                    );
                    return Ok(grant);
                }
                Ok(Attempt::Queued {
                    position,
                    score,
                    ttl,
                    stray,
                }) => {
                    ticket.placed(score);
                    if let Some(waiter) = stray {
                        ticket.take_out_if_stray(waiter);
                    }
                    if let Some(positions) = positions {
                        positions.send_if_modified(|seen| {
                            let moved = *seen != position;
                            *seen = position;
                            moved
                        });
                    }
                    backend_retry = MIN_BACKEND_RETRY;
                    let first = position == 1;
                    let mut at = now + RECHECK;
                    if first && let Some(ttl) = ttl {
                        at = at.min(now + ttl.max(MIN_RECHECK));
                    }
                    (at, first, ttl.unwrap_or(RECHECK))
                }
                // Not queued (a store that keeps no queue answers so): look again later.
                Ok(Attempt::Held { retry_after, .. }) => {
                    (now + retry_after.min(RECHECK), false, retry_after)
                }
                Err(err) if err.is_transient() && now < deadline => {
                    tracing::debug!(lock = %name, error = %err, "waiting in a fair queue through a backend error");
                    let at = now + backend_retry;
                    backend_retry = (backend_retry * 2).min(MAX_BACKEND_RETRY);
                    (at, false, RECHECK)
                }
                Err(err) => return Err(err),
            };
            if now >= deadline {
                self.record_wait(
                    primitive.leased(name),
                    name,
                    (deadline, request.wait),
                    WaitEnd::TimedOut,
                );
                return Err(LockError::Held { retry_after });
            }
            // Until it is time to look again. A waiter that becomes the front does not look at
            // once: if its waiter heads the queue, its gateway is told, and the word shows up
            // on the head announcements it takes over from the last front (even if the word
            // came before the turn did).
            while !ticket.is_front() {
                let looks = positions.is_some();
                tokio::select! {
                    biased;
                    () = ticket.turn.notified() => {
                        ticket.take_over();
                        wake_at = Instant::now() + RECHECK;
                    }
                    () = tokio::time::sleep_until(wake_at.min(deadline)), if looks => break,
                    () = tokio::time::sleep_until(deadline) => break,
                    () = self.shutdown.cancelled() => return Err(LockError::ShuttingDown),
                }
            }
            if ticket.is_front() {
                tokio::select! {
                    biased;
                    () = next_head(&mut ticket.heads) => {}
                    () = next_release(&mut releases), if first => {}
                    () = tokio::time::sleep_until(wake_at.min(deadline)) => {}
                    () = self.shutdown.cancelled() => return Err(LockError::ShuttingDown),
                }
            }
        }
    }
}

/// Resolves at the next head announcement, if subscribed (else never: the re-check stands in).
async fn next_head(heads: &mut Option<watch::Receiver<()>>) {
    match heads {
        Some(heads) => next_release(heads).await,
        None => std::future::pending().await,
    }
}
