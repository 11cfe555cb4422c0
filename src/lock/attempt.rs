//! One attempt at a grant: the stem and claim it carries, the store's answer read into what
//! the engine does next (granted, held, or a fair waiter's place), and the guard that
//! withdraws a grant whose answer is lost. Split from `acquire.rs`, which decides when to
//! attempt (once, or waiting in line), as `fair.rs` does for fair waiters.

use std::time::Duration;

use tokio::time::Instant;

use super::LockName;
use super::error::LockError;
use super::guard::GrantGuard;
use super::primitive::Primitive;
use super::promise::{check_replicas, validity};
use super::request::LeaseRequest;
use super::service::{Grant, LockService};
use super::token::{LockToken, TokenStem};
use crate::backend::marks::Marks;
use crate::backend::{
    AcquireOutcome, BackendError, Claim, GrantAttempt, LeaseStore, QueuePlace, millis,
};

/// When the holder's lease has no expiry (a key written by another client), tell waiters to come
/// back after this long.
pub(super) const RETRY_AFTER_UNKNOWN_EXPIRY: Duration = Duration::from_secs(1);

/// One try at the backend.
pub(super) enum Attempt<P: Primitive> {
    Granted(Grant<P>),
    /// Held; `overtakable`: newcomers may still come in before this waiter unless it holds
    /// them off (see `backend::AcquireOutcome::Overtakable`).
    Held {
        retry_after: Duration,
        overtakable: bool,
    },
    /// A fair waiter's place in the queue (see `backend::queue`): `position` 1 is next;
    /// `ttl`, the holder's lease left, if the lock is held and will expire.
    Queued {
        position: u32,
        score: u64,
        ttl: Option<Duration>,
        /// Another waiter of this gateway's heads the queue of a free lock (see
        /// `AcquireOutcome::Queued`).
        stray: Option<u64>,
    },
}

impl LockService {
    /// The stem and claim of one attempt: a fresh random stem, or the idempotency key's stem
    /// with a fresh claim.
    fn attempt_stem(derived: Option<&TokenStem>) -> Result<(TokenStem, Option<Claim>), LockError> {
        let random_failed = |e: getrandom::Error| {
            LockError::BackendUnavailable(BackendError::Unavailable(format!(
                "os random generator: {e}"
            )))
        };
        match derived {
            Some(stem) => Ok((
                stem.clone(),
                Some(Claim(crate::entropy::u64().map_err(random_failed)?)),
            )),
            None => Ok((TokenStem::random().map_err(random_failed)?, None)),
        }
    }

    /// One try: the grant, or how long until the holder's lease ends. When another attempt
    /// may follow (`retry_may_follow`), a failed attempt withdraws its possible grant before it
    /// returns; otherwise the withdrawal goes on in the background while the client gets its
    /// answer (it can only ever match this attempt's grant).
    pub(super) async fn attempt<P: Primitive>(
        &self,
        primitive: &P,
        name: &LockName,
        derived: Option<&TokenStem>,
        request: &LeaseRequest,
        retry_may_follow: bool,
        queue: Option<QueuePlace>,
    ) -> Result<Attempt<P>, LockError> {
        self.check_hold_back(name)?;
        let (stem, claim) = Self::attempt_stem(derived)?;
        let leased = primitive.leased(name);
        let marks = Marks {
            holder: request.holder.is_some(),
            max_hold_ms: request.max_hold.map(millis),
            min_hold_ms: (request.min_hold_ms > 0).then_some(u64::from(request.min_hold_ms)),
            reentrant: request.reentrant,
            ..leased.marks()
        };
        let stem = if marks == Marks::default() {
            stem
        } else {
            stem.marked(marks)
        };
        // Armed before the script is sent: if this future is dropped mid-flight (the client
        // hung up) the guard withdraws whatever may have been granted.
        let guard = GrantGuard::new(
            self.backend.clone(),
            primitive.clone(),
            name.clone(),
            stem.clone(),
            claim,
        );
        let started = Instant::now();
        let sent = self
            .backend
            .acquire(
                leased,
                GrantAttempt {
                    stem: stem.expose(),
                    claim,
                    request,
                    queue,
                },
            )
            .await;
        let outcome = match sent {
            Ok(outcome) => outcome,
            Err(err) if !err.outcome_unknown() => {
                // Nothing ran: never sent (no connection, no free WAIT connection), or the
                // store answered that it did not run it. Nothing to withdraw.
                guard.disarm();
                return Err(err.into());
            }
            Err(err) => {
                // The script may have run and granted the lock: withdraw it (dropping the armed
                // guard does so in the background).
                if retry_may_follow && let Err(withdraw_error) = guard.withdraw().await {
                    tracing::warn!(lock = %name, error = %withdraw_error, "could not withdraw an attempt that got no answer; it expires at its ttl");
                }
                return Err(err.into());
            }
        };
        let (lease, replayed) = match outcome {
            AcquireOutcome::Granted(lease) => (lease, false),
            AcquireOutcome::AlreadyHeld(lease) => (lease, true),
            AcquireOutcome::Held { ttl } => {
                guard.disarm();
                return Ok(Attempt::Held {
                    retry_after: ttl.unwrap_or(RETRY_AFTER_UNKNOWN_EXPIRY),
                    overtakable: false,
                });
            }
            AcquireOutcome::Overtakable { ttl } => {
                guard.disarm();
                return Ok(Attempt::Held {
                    retry_after: ttl.unwrap_or(RETRY_AFTER_UNKNOWN_EXPIRY),
                    overtakable: true,
                });
            }
            AcquireOutcome::Queued {
                position,
                score,
                ttl,
                stray,
            } => {
                guard.disarm();
                return Ok(Attempt::Queued {
                    position,
                    score,
                    ttl,
                    stray,
                });
            }
            AcquireOutcome::LimitDiffers { limit } => {
                guard.disarm();
                return Err(LockError::LimitDiffers { held: limit });
            }
        };
        // The longest lease granted here, for the store's data-loss guard.
        self.longest.saw(request.ttl);
        let check =
            check_replicas(&request.replicas, &lease).and_then(|()| validity(started, &lease));
        match check {
            Ok(validity) => Ok(Attempt::Granted(Grant {
                token: LockToken::issued(&stem, lease.fence),
                fence: lease.fence,
                validity,
                replicas_acked: lease.replicas_acked,
                replayed,
                guard,
            })),
            Err(err) => {
                if let Err(withdraw_error) = guard.withdraw().await {
                    tracing::warn!(lock = %name, error = %withdraw_error, "could not release a refused grant; it expires at its ttl");
                }
                Err(err)
            }
        }
    }
}
