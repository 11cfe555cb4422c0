//! Tests of the problem table: every error to its status and type.

use super::*;
use crate::backend::BackendError;

fn status_and_type(err: ApiError) -> (u16, String) {
    let Rendered { problem, .. } = err.render();
    (problem.status, problem.type_uri)
}

#[test]
fn lock_errors_map_to_the_documented_statuses_and_types() {
    let cases = [
        (
            ApiError::from(LockError::Held {
                retry_after: Duration::from_secs(1),
            }),
            409,
            "lock-held",
        ),
        (LockError::NotHeld.into(), 404, "lock-not-held"),
        (LockError::NotOwner.into(), 409, "not-owner"),
        (
            LockError::LimitDiffers { held: 3 }.into(),
            409,
            "permits-mismatch",
        ),
        (
            LockError::NotOffered {
                kind: "semaphore",
                mode: "redlock",
            }
            .into(),
            501,
            "not-offered",
        ),
        (
            LockError::IdempotencyKeyReused.into(),
            422,
            "idempotency-key-reused",
        ),
        (LockError::Revoked.into(), 410, "lock-revoked"),
        (LockError::MaxHoldReached.into(), 409, "max-hold-reached"),
        (LockError::TooManyWaiters.into(), 503, "too-many-waiters"),
        (LockError::TooManyWatchers.into(), 503, "too-many-watchers"),
        (LockError::ShuttingDown.into(), 503, "shutting-down"),
        (
            LockError::InsufficientReplicas {
                wanted: 2,
                acked: 1,
            }
            .into(),
            503,
            "insufficient-replicas",
        ),
        (LockError::LeaseExpired.into(), 503, "backend-unavailable"),
        (
            LockError::BackendUnavailable(BackendError::Timeout(Duration::from_secs(1))).into(),
            503,
            "backend-unavailable",
        ),
        (InvalidName::Empty.into(), 400, "invalid-name"),
        (
            ApiError::body(Some("ttl_ms".into()), "bad"),
            400,
            "invalid-request",
        ),
        (
            ApiError::PayloadTooLarge { limit: 10 },
            413,
            "payload-too-large",
        ),
        (
            ApiError::HeadersTooLarge { limit: 10 },
            431,
            "headers-too-large",
        ),
        (ApiError::NotFound, 404, "not-found"),
        (ApiError::MethodNotAllowed, 405, "method-not-allowed"),
        (ApiError::Internal("boom".into()), 500, "internal"),
    ];
    for (err, status, slug) in cases {
        assert_eq!(
            status_and_type(err),
            (status, format!("{PROBLEM_BASE}{slug}"))
        );
    }
}

#[test]
fn server_errors_hide_their_cause_from_the_client() {
    let err = LockError::BackendUnavailable(BackendError::Unavailable(
        "connection refused 10.0.0.7".into(),
    ));
    let Rendered { problem, cause, .. } = ApiError::from(err).render();
    assert!(!problem.detail.contains("10.0.0.7"));
    assert!(cause.is_some_and(|c| c.contains("10.0.0.7")));
}

#[test]
fn retry_after_rounds_up_to_whole_seconds() {
    assert_eq!(retry_after_seconds(Duration::from_millis(0)), 1);
    assert_eq!(retry_after_seconds(Duration::from_millis(300)), 1);
    assert_eq!(retry_after_seconds(Duration::from_millis(1000)), 1);
    assert_eq!(retry_after_seconds(Duration::from_millis(1001)), 2);
}
