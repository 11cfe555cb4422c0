//! [`LockService`]: the lock operations as the API offers them, on top of a backend.
//!
//! It issues tokens, turns a backend's lease into a validity the client can rely on, enforces
//! replica requirements, and undoes a grant it cannot stand behind (no validity left, too few
//! replicas) so that a failed request never leaves a lock held by nobody.

use std::time::Duration;

use tokio::time::Instant;

use super::LockName;
use super::error::LockError;
use super::request::{AcquireRequest, Limits, RenewRequest, ReplicaPolicy};
use super::token::{IdempotencyKey, LockToken, TokenSecret};
use super::validity::Validity;
use crate::backend::{
    AcquireOutcome, Backend, BackendError, Lease, LockBackend, ReleaseOutcome, RenewOutcome,
};

/// When the holder's lease has no expiry (a key written by another client), tell waiters to come
/// back after this long.
const RETRY_AFTER_UNKNOWN_EXPIRY: Duration = Duration::from_secs(1);

/// A lock granted to the caller.
#[derive(Debug, Clone)]
pub struct Grant {
    pub token: LockToken,
    pub fence: u64,
    pub validity: Validity,
    pub replicas_acked: Option<u32>,
    /// The grant already existed: this was a retry of an idempotent acquire.
    pub replayed: bool,
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
    /// The last fence issued for the name.
    pub fence: Option<u64>,
}

#[derive(Debug)]
pub struct LockService {
    backend: Backend,
    limits: Limits,
    secret: TokenSecret,
}

impl LockService {
    pub fn new(backend: Backend, limits: Limits, secret: TokenSecret) -> Self {
        Self {
            backend,
            limits,
            secret,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn backend_kind(&self) -> &'static str {
        self.backend.kind()
    }

    /// Takes the lock. With an idempotency key the token is derived from (name, key), so a
    /// retry of a request whose response was lost finds its own grant.
    pub async fn acquire(
        &self,
        name: &LockName,
        request: &AcquireRequest,
        idempotency_key: Option<&IdempotencyKey>,
    ) -> Result<Grant, LockError> {
        let token = match idempotency_key {
            Some(key) => LockToken::derive(&self.secret, name.as_str(), key),
            None => LockToken::random().map_err(|e| {
                LockError::BackendUnavailable(BackendError::Unavailable(format!(
                    "os random generator: {e}"
                )))
            })?,
        };
        let started = Instant::now();
        let outcome = self
            .backend
            .acquire(
                name.as_str(),
                token.expose(),
                request.ttl,
                request.replicas.ack(),
            )
            .await?;
        let (lease, replayed) = match outcome {
            AcquireOutcome::Granted(lease) => (lease, false),
            AcquireOutcome::AlreadyHeld(lease) => (lease, true),
            AcquireOutcome::Held { ttl } => {
                return Err(LockError::Held {
                    retry_after: ttl.unwrap_or(RETRY_AFTER_UNKNOWN_EXPIRY),
                });
            }
        };
        let check =
            check_replicas(&request.replicas, &lease).and_then(|()| validity(started, &lease));
        match check {
            Ok(validity) => Ok(Grant {
                token,
                fence: lease.fence,
                validity,
                replicas_acked: lease.replicas_acked,
                replayed,
            }),
            Err(err) => {
                self.undo(name, &token).await;
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
            .await?;
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
                self.undo(name, token).await;
                Err(err)
            }
        }
    }

    /// Releases the lock held with `token`.
    pub async fn release(&self, name: &LockName, token: &LockToken) -> Result<(), LockError> {
        match self.backend.release(name.as_str(), token.expose()).await? {
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
        Ok(self.backend.ping().await?)
    }

    /// Releases a grant the caller will not get. Best effort: if this fails too, the lease
    /// still ends at its ttl.
    async fn undo(&self, name: &LockName, token: &LockToken) {
        if let Err(err) = self.backend.release(name.as_str(), token.expose()).await {
            tracing::warn!(lock = %name, error = %err, "could not release a refused grant; it expires at its ttl");
        }
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
