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

    /// Sends an attempt that asks for replicas and carries it to its answer, in a task of its
    /// own, with its `guard`: if this request is dropped meanwhile (its client hung up), the
    /// guard's withdrawal goes out only once the attempt has been answered. Such an attempt
    /// travels on a dedicated connection for `WAIT` and the withdrawal on the command
    /// connection: dropped at once, the withdrawal could reach Redis first, find nothing, and
    /// the attempt then grant a lock nobody holds until its ttl (the simulation's failover
    /// world). A task per acquire that asks for replicas, which waits a `WAIT` anyway; the
    /// others run inline.
    ///
    /// An attempt answered after its request was dropped that *found* its stem's grant
    /// (an idempotency key's: another attempt made it) is not withdrawn: a retry of the same key
    /// may have made that grant and delivered it, and this attempt, arriving after it, made its
    /// own claim the last, which a withdrawal would then delete (failover world, seed 637).
    #[allow(clippy::too_many_arguments)]
    async fn acquire_to_its_answer<P: Primitive>(
        &self,
        primitive: &P,
        name: &LockName,
        stem: &TokenStem,
        claim: Option<Claim>,
        request: &LeaseRequest,
        queue: Option<QueuePlace>,
        guard: GrantGuard<P>,
    ) -> Result<(GrantGuard<P>, Result<AcquireOutcome, BackendError>), LockError> {
        let backend = self.backend.clone();
        let (primitive, name) = (primitive.clone(), name.clone());
        let (stem, request) = (stem.clone(), request.clone());
        let (answer, answered) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let attempt = GrantAttempt {
                stem: stem.expose(),
                claim,
                request: &request,
                queue,
            };
            let sent = backend.acquire(primitive.leased(&name), attempt).await;
            if let Err((guard, sent)) = answer.send((guard, sent))
                && matches!(sent, Ok(AcquireOutcome::AlreadyHeld(_)))
            {
                guard.disarm();
            }
            // Otherwise, with the request gone, the guard dropped here withdraws.
        });
        answered.await.map_err(|_| {
            // The task ended without answering: the runtime is shutting down, or the attempt
            // panicked (a bug; the task reports it). The guard went with the task, withdrawing.
            LockError::BackendUnavailable(BackendError::Unavailable(
                "the gateway is shutting down".into(),
            ))
        })
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
        let (guard, sent) = if request.replicas.ack().is_some() {
            self.acquire_to_its_answer(primitive, name, &stem, claim, request, queue, guard)
                .await?
        } else {
            let attempt = GrantAttempt {
                stem: stem.expose(),
                claim,
                request,
                queue,
            };
            (guard, self.backend.acquire(leased, attempt).await)
        };
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
            AcquireOutcome::KeyReused => {
                guard.disarm();
                return Err(LockError::IdempotencyKeyReused);
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
