//! [`LockService`]: the lock operations as the API offers them, on top of a backend.
//!
//! It chooses token stems, turns a backend's lease into a validity the client can rely on,
//! enforces replica requirements, makes waiting requests wait without polling, and undoes a
//! grant it cannot stand behind (no validity left, too few replicas, no answer from the store,
//! nobody left to tell) so that a failed request never leaves a lock held by nobody.
//!
//! Every attempt at the backend has a token stem of its own (see [`super::token`]): a fresh
//! random one, or, with an idempotency key, the key's stem and a fresh [`Claim`]. An attempt
//! that failed after its script may have run withdraws its possible grant before it returns,
//! and a withdrawal can only ever match its own attempt's grant, so a later attempt, or a later
//! request with the same idempotency key, never meets a withdrawal meant for another.
//!
//! Waiting (`wait_ms > 0`): a request first tries once, unless requests already wait for the
//! name in this gateway, in which case it queues behind them ([`super::wait`]). The head of
//! the line marks the name's release feed seen, tries, and if the lock is held sleeps until a
//! release is announced, the holder's ttl runs out (expiries are not always announced), its
//! own deadline passes, or the gateway shuts down. Backend traffic per waiting request is one
//! attempt per release or expiry. Where the backend cannot announce releases made by its
//! other clients (Redis without keyspace notifications), the head of each line also looks
//! again every [`FOREIGN_RELEASE_RECHECK`]: a bounded cost per name with waiters, not per
//! waiter.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::LockName;
use super::error::LockError;
use super::guard::GrantGuard;
use super::request::{AcquireRequest, Limits, RenewRequest, ReplicaPolicy};
use super::token::{IdempotencyKey, LockToken, TokenSecret, TokenStem};
use super::validity::Validity;
use super::wait::{Handoff, TooManyWaiters, Waiters};
use crate::backend::{
    AcquireOutcome, Backend, BackendError, Claim, Lease, LockBackend, ReleaseOutcome, RenewOutcome,
};

/// When the holder's lease has no expiry (a key written by another client), tell waiters to come
/// back after this long.
const RETRY_AFTER_UNKNOWN_EXPIRY: Duration = Duration::from_secs(1);
/// A waiter never sleeps less than this before looking again: a lock with under a millisecond
/// left reports a ttl of 0.
const MIN_RECHECK: Duration = Duration::from_millis(1);
/// A waiter whose attempt met a transient backend error tries again after this, doubling up to
/// [`MAX_BACKEND_RETRY`], until its deadline: a failover or restart should not end a wait the
/// client was willing to make.
const MIN_BACKEND_RETRY: Duration = Duration::from_millis(50);
const MAX_BACKEND_RETRY: Duration = Duration::from_secs(1);
/// Where the backend does not announce releases made by its other clients (a Redis without
/// keyspace notifications), the head of a line looks again this often while it waits: a lock
/// released by, say, redis-py is noticed within this plus a round trip, at the cost of one
/// short script (GET, PTTL) per name with waiters, 20 per second.
const FOREIGN_RELEASE_RECHECK: Duration = Duration::from_millis(50);

/// A lock granted to the caller. Dropping it before [`Grant::delivered`] releases the lock.
#[derive(Debug)]
pub struct Grant {
    pub token: LockToken,
    pub fence: u64,
    pub validity: Validity,
    pub replicas_acked: Option<u32>,
    /// The grant already existed: this was a retry of an idempotent acquire.
    pub replayed: bool,
    pub guard: GrantGuard,
}

/// A lease renewed by its holder.
#[derive(Debug, Clone, Copy)]
pub struct Renewal {
    pub fence: u64,
    pub validity: Validity,
    pub replicas_acked: Option<u32>,
}

/// What anyone may learn about a held lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockState {
    /// Remaining ttl; `None` when the key has no expiry.
    pub ttl: Option<Duration>,
    /// The fence of the current grant; `None` when its holder's token carries none (a lock
    /// taken by another Redis client).
    pub fence: Option<u64>,
}

/// One try at the backend.
enum Attempt {
    Granted(Grant),
    Held { retry_after: Duration },
}

#[derive(Debug)]
pub struct LockService {
    backend: Arc<Backend>,
    limits: Limits,
    secret: TokenSecret,
    waiters: Waiters,
    shutdown: CancellationToken,
    /// Set at the start of a shutdown: readiness fails from then on.
    draining: AtomicBool,
}

impl LockService {
    pub fn new(backend: Backend, limits: Limits, secret: TokenSecret) -> Self {
        Self {
            backend: Arc::new(backend),
            waiters: Waiters::new(limits.max_waiters),
            limits,
            secret,
            shutdown: CancellationToken::new(),
            draining: AtomicBool::new(false),
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn backend_kind(&self) -> &'static str {
        self.backend.kind()
    }

    /// Requests waiting for a lock right now.
    pub fn waiting(&self) -> usize {
        self.waiters.waiting()
    }

    /// Stops waiting requests (they answer "shutting down") and tells long-lived holders, such
    /// as hold streams, through [`LockService::shutdown_token`].
    pub fn shut_down(&self) {
        self.begin_drain();
        self.shutdown.cancel();
    }

    /// Makes readiness fail (503 `shutting-down`) while requests are still served, so that
    /// load balancers stop sending new ones before the listener closes.
    pub fn begin_drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Takes the lock, waiting up to `request.wait` for it. With an idempotency key the stem
    /// is derived from (name, key), so a retry of a request whose response was lost finds its
    /// own grant.
    pub async fn acquire(
        &self,
        name: &LockName,
        request: &AcquireRequest,
        idempotency_key: Option<&IdempotencyKey>,
    ) -> Result<Grant, LockError> {
        let derived =
            idempotency_key.map(|key| TokenStem::derive(&self.secret, name.as_str(), key));
        // Requests already waiting here go first: a newcomer does not overtake them.
        if request.wait.is_zero() || !self.waiters.has_line(name.as_str()) {
            // Boxed here and below: a waiting request keeps its future alive for the whole wait,
            // and the attempt (a backend round trip) is most of its size.
            let then_wait = !request.wait.is_zero();
            match Box::pin(self.attempt(name, derived.as_ref(), request, then_wait)).await {
                Ok(Attempt::Granted(grant)) => return Ok(grant),
                Ok(Attempt::Held { retry_after }) if request.wait.is_zero() => {
                    return Err(LockError::Held { retry_after });
                }
                Err(err) if request.wait.is_zero() || !err.is_transient() => return Err(err),
                // Held, or the backend stumbled: wait in line.
                Ok(Attempt::Held { .. }) | Err(_) => {}
            }
        }
        self.wait_for(name, derived.as_ref(), request).await
    }

    /// Waits in line for `name` until the lock is granted or `request.wait` has passed.
    async fn wait_for(
        &self,
        name: &LockName,
        derived: Option<&TokenStem>,
        request: &AcquireRequest,
    ) -> Result<Grant, LockError> {
        let deadline = Instant::now() + request.wait;
        let ticket = self
            .waiters
            .join(name.as_str())
            .map_err(|TooManyWaiters| LockError::TooManyWaiters)?;
        tokio::select! {
            () = ticket.turn() => {}
            () = tokio::time::sleep_until(deadline) => {
                return Err(LockError::Held { retry_after: RETRY_AFTER_UNKNOWN_EXPIRY });
            }
            () = self.shutdown.cancelled() => return Err(LockError::ShuttingDown),
        }
        // Boxed: subscribing happens once per wait, and inline it would be the largest part
        // of the future every waiting request keeps.
        let mut releases =
            Box::pin(ticket.releases(|| self.backend.watch_releases(name.as_str()))).await;
        let mut wake_at = None;
        let mut backend_retry = MIN_BACKEND_RETRY;
        if let Some(handoff) = ticket.take_handoff() {
            releases = handoff.releases;
            wake_at = Some(handoff.held_until);
        }
        loop {
            if let Some(mut at) = wake_at {
                if !self.backend.sees_every_release() {
                    at = at.min(Instant::now() + FOREIGN_RELEASE_RECHECK);
                }
                tokio::select! {
                    () = next_release(&mut releases) => {}
                    () = tokio::time::sleep_until(at.min(deadline)) => {}
                    () = self.shutdown.cancelled() => return Err(LockError::ShuttingDown),
                }
            }
            // From here on, a release shows up as a change: none can slip between this attempt
            // and the next wait.
            releases.borrow_and_update();
            match Box::pin(self.attempt(name, derived, request, true)).await {
                Ok(Attempt::Granted(grant)) => {
                    ticket.hand_off(Handoff {
                        releases,
                        held_until: grant.validity.until(),
                    });
                    return Ok(grant);
                }
                Ok(Attempt::Held { retry_after }) => {
                    if Instant::now() >= deadline {
                        return Err(LockError::Held { retry_after });
                    }
                    backend_retry = MIN_BACKEND_RETRY;
                    wake_at = Some(Instant::now() + retry_after.max(MIN_RECHECK));
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
                Some(Claim(getrandom::u64().map_err(random_failed)?)),
            )),
            None => Ok((TokenStem::random().map_err(random_failed)?, None)),
        }
    }

    /// One try: the grant, or how long until the holder's lease ends. When another attempt
    /// may follow (`retry_may_follow`), a failed attempt withdraws its possible grant before it
    /// returns; otherwise the withdrawal goes on in the background while the client gets its
    /// answer (it can only ever match this attempt's grant).
    async fn attempt(
        &self,
        name: &LockName,
        derived: Option<&TokenStem>,
        request: &AcquireRequest,
        retry_may_follow: bool,
    ) -> Result<Attempt, LockError> {
        let (stem, claim) = Self::attempt_stem(derived)?;
        // Armed before the script is sent: if this future is dropped mid-flight (the client
        // hung up) the guard withdraws whatever may have been granted.
        let guard = GrantGuard::new(self.backend.clone(), name.clone(), stem.clone(), claim);
        let started = Instant::now();
        let sent = self
            .backend
            .acquire(
                name.as_str(),
                stem.expose(),
                request.ttl,
                request.replicas.ack(),
                claim,
            )
            .await;
        let outcome = match sent {
            Ok(outcome) => outcome,
            Err(err @ (BackendError::WaitPoolExhausted(_) | BackendError::Config(_))) => {
                // Nothing was sent.
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
                });
            }
        };
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
        let started = Instant::now();
        let outcome = self
            .backend
            .renew(
                name.as_str(),
                token.expose(),
                request.ttl,
                request.replicas.ack(),
            )
            .await
            .map_err(LockError::of_write)?;
        let lease = match outcome {
            RenewOutcome::Renewed(lease) => lease,
            RenewOutcome::NotHeld => return Err(LockError::NotHeld),
            RenewOutcome::NotOwner => return Err(LockError::NotOwner),
        };
        check_replicas(&request.replicas, &lease)?;
        match validity(started, &lease) {
            Ok(validity) => Ok(Renewal {
                fence: lease.fence,
                validity,
                replicas_acked: lease.replicas_acked,
            }),
            Err(err) => {
                if let Err(release_error) =
                    self.backend.release(name.as_str(), token.expose()).await
                {
                    tracing::warn!(lock = %name, error = %release_error, "could not release a late renewal; it expires at its ttl");
                }
                Err(err)
            }
        }
    }

    /// Releases the lock held with `token`.
    pub async fn release(&self, name: &LockName, token: &LockToken) -> Result<(), LockError> {
        let released = self.backend.release(name.as_str(), token.expose()).await;
        match released.map_err(LockError::of_write)? {
            ReleaseOutcome::Released => Ok(()),
            ReleaseOutcome::NotHeld => Err(LockError::NotHeld),
            ReleaseOutcome::NotOwner => Err(LockError::NotOwner),
        }
    }

    /// Whether the lock is held, for how long, and the current fence.
    pub async fn inspect(&self, name: &LockName) -> Result<LockState, LockError> {
        match self.backend.inspect(name.as_str()).await? {
            Some(seen) => Ok(LockState {
                ttl: seen.ttl,
                fence: seen.fence,
            }),
            None => Err(LockError::NotHeld),
        }
    }

    /// Whether the backend answers.
    pub async fn ready(&self) -> Result<(), LockError> {
        if self.draining.load(Ordering::Relaxed) {
            return Err(LockError::ShuttingDown);
        }
        Ok(self.backend.ping().await?)
    }
}

/// Resolves at the next change of a release feed; never, if the feed has ended (waiters then
/// rely on the holder's ttl).
async fn next_release(releases: &mut watch::Receiver<()>) {
    if releases.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

fn check_replicas(policy: &ReplicaPolicy, lease: &Lease) -> Result<(), LockError> {
    let acked = lease.replicas_acked.unwrap_or(0);
    if policy.required && acked < policy.replicas {
        return Err(LockError::InsufficientReplicas {
            wanted: policy.replicas,
            acked,
        });
    }
    Ok(())
}

fn validity(started: Instant, lease: &Lease) -> Result<Validity, LockError> {
    Validity::of_lease(started, lease.ttl, Duration::ZERO, Instant::now())
        .ok_or(LockError::LeaseExpired)
}
