//! Each lock-layer error as the problem document a client gets: its kind, its detail, its
//! `Retry-After`, and for server errors the cause that is logged (never sent).

use super::{BACKEND_RETRY_AFTER, Problem, ProblemKind, Rendered};
use crate::lock::{HoldBackCause, LockError};

pub(super) fn render_lock_error(err: LockError) -> Rendered {
    let cause = Some(err.to_string());
    match err {
        LockError::Held { retry_after } => {
            let mut problem =
                Problem::new(ProblemKind::LockHeld, "the lock is held by another client");
            problem.retry_after_ms =
                Some(u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX));
            Rendered {
                problem,
                retry_after: Some(retry_after),
                cause: None,
            }
        }
        LockError::NotHeld => Rendered {
            problem: Problem::new(ProblemKind::LockNotHeld, "the lock is not held"),
            retry_after: None,
            cause: None,
        },
        LockError::LimitDiffers { held } => {
            let mut problem = Problem::new(
                ProblemKind::PermitsMismatch,
                format!(
                    "the semaphore's permits are held under a limit of {held}; ask with the same \
                     permits, or wait until they are all given back"
                ),
            );
            problem.permits = Some(held);
            Rendered {
                problem,
                retry_after: None,
                cause: None,
            }
        }
        LockError::IdempotencyKeyReused => Rendered {
            problem: Problem::new(
                ProblemKind::IdempotencyKeyReused,
                "this Idempotency-Key already holds the name with another kind of grant: a \
                 retry must send the same body as its first request, and a new request a new \
                 key",
            ),
            retry_after: None,
            cause: None,
        },
        LockError::CrossSlot => Rendered {
            problem: Problem::new(
                ProblemKind::CrossSlot,
                "in a Redis Cluster the names of a multi-lock must map to one hash slot (one \
                 atomic step reaches one slot): choose names whose CRC16 slot is the same, or \
                 take the locks one by one",
            ),
            retry_after: None,
            cause: None,
        },
        LockError::NotOffered { kind, mode } => Rendered {
            problem: Problem::new(
                ProblemKind::NotOffered,
                format!("{kind}s are not offered with the {mode} backend (see docs/api.md)"),
            ),
            retry_after: None,
            cause: None,
        },
        LockError::NotOwner => Rendered {
            problem: Problem::new(
                ProblemKind::NotOwner,
                "the lock is held with a different token",
            ),
            retry_after: None,
            cause: None,
        },
        LockError::NotReentrant => Rendered {
            problem: Problem::new(
                ProblemKind::NotReentrant,
                "the lock was not taken with reentrant: true, so its holder cannot take it again",
            ),
            retry_after: None,
            cause: None,
        },
        LockError::Revoked => Rendered {
            problem: Problem::new(
                ProblemKind::LockRevoked,
                "an operator revoked this lock; stop relying on it",
            ),
            retry_after: None,
            cause: None,
        },
        LockError::MaxHoldReached => Rendered {
            problem: Problem::new(
                ProblemKind::MaxHoldReached,
                "the lock has been held for as long as its max_hold_ms allows; it ends with its lease",
            ),
            retry_after: None,
            cause: None,
        },
        LockError::InsufficientReplicas { wanted, acked } => {
            let detail = format!("{acked} of {wanted} required replicas acknowledged the write");
            let mut problem = Problem::new(ProblemKind::InsufficientReplicas, detail);
            problem.replicas_required = Some(wanted);
            problem.replicas_acked = Some(acked);
            Rendered {
                problem,
                retry_after: Some(BACKEND_RETRY_AFTER),
                cause,
            }
        }
        LockError::TooManyWaiters => Rendered {
            problem: Problem::new(
                ProblemKind::TooManyWaiters,
                "too many requests are waiting for locks; retry later",
            ),
            retry_after: Some(BACKEND_RETRY_AFTER),
            cause,
        },
        LockError::TooManyWatchers => Rendered {
            problem: Problem::new(
                ProblemKind::TooManyWatchers,
                "too many clients are watching locks (--max-watchers); retry later",
            ),
            retry_after: Some(BACKEND_RETRY_AFTER),
            cause,
        },
        LockError::ShuttingDown => Rendered {
            problem: Problem::new(
                ProblemKind::ShuttingDown,
                "the gateway is shutting down; retry on another one",
            ),
            retry_after: Some(BACKEND_RETRY_AFTER),
            cause: None,
        },
        LockError::OutcomeUnknown(_) => Rendered {
            problem: Problem::new(
                ProblemKind::OutcomeUnknown,
                "the lock backend did not answer in time: the operation may or may not have taken \
                 effect; repeating it is safe",
            ),
            retry_after: Some(BACKEND_RETRY_AFTER),
            cause,
        },
        LockError::WaitPoolExhausted(_) => Rendered {
            problem: Problem::new(
                ProblemKind::WaitPoolExhausted,
                "every connection for replica acknowledgement is busy waiting for slow replicas; \
                 retry later, or raise --wait-pool-size",
            ),
            retry_after: Some(BACKEND_RETRY_AFTER),
            cause,
        },
        LockError::HeldBack {
            retry_after,
            cause: held_back_by,
        } => Rendered {
            problem: Problem::new(
                ProblemKind::GrantsHeldBack,
                match held_back_by {
                    HoldBackCause::ClockStep => {
                        "Redis's clock stepped forward, which may have ended leases before their \
                         holders stopped relying on them; no lock is granted until those leases \
                         have run out"
                    }
                    HoldBackCause::DataLost => {
                        "Redis forgot its data (restarted without persistence, flushed, or an \
                         empty replica promoted) while leases granted on it may still be in use; \
                         no lock is granted until those leases have run out"
                    }
                },
            ),
            retry_after: Some(retry_after),
            cause,
        },
        LockError::BackendFull(_) => Rendered {
            problem: Problem::new(
                ProblemKind::BackendFull,
                "the lock store is out of memory (Redis maxmemory reached) and refuses writes; \
                 nothing was written; retry later (an operator must free memory or raise maxmemory)",
            ),
            retry_after: Some(BACKEND_RETRY_AFTER),
            cause,
        },
        LockError::LeaseExpired | LockError::BackendUnavailable(_) => Rendered {
            problem: Problem::new(
                ProblemKind::BackendUnavailable,
                "the lock backend is not available; retry later",
            ),
            retry_after: Some(BACKEND_RETRY_AFTER),
            cause,
        },
    }
}
