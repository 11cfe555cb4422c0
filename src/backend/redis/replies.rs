//! Replies of the lease scripts, read the same way for every primitive: the acquire scripts
//! (`acquire.lua`, and those of each kind of set of grants) and the renew scripts share
//! their reply shapes.

use std::time::Duration;

use redis::Value;

use crate::backend::GrantView;
use crate::backend::fence::fence_of;
use crate::backend::queue::QUEUED_RETRY;
use crate::backend::{AcquireOutcome, BackendError, Holder, Lease, RenewOutcome};

/// A PTTL reply: `None` for "no expiry" (-1); negative values other than -1 count as zero.
pub(super) fn pttl(ms: i64) -> Option<Duration> {
    (ms != -1).then(|| Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

pub(super) fn protocol(script: &str, detail: impl std::fmt::Display) -> BackendError {
    BackendError::Protocol(format!("{script} script replied {detail}"))
}

/// An acquire script's reply: `fence` (granted now, with `ttl`), `{2, fence, pttl}` (found
/// again), `{0, pttl}` (held), `{0, pttl, 1}` (held by readers), `{3, limit}` (a limited
/// kind's other limit), `{4, pttl, position, score}` and `{4, -2, position, score, head}`
/// (queued; `head` names the first waiter of a free lock, and is this `gateway`'s stray
/// candidate when it is one of its own: see `fair_acquire.lua`), `{6}` (the idempotency key
/// holds the name for another kind of grant).
pub(super) fn acquire_outcome(
    script: &str,
    reply: Value,
    ttl: Duration,
    replicas_acked: Option<u32>,
    gateway: &str,
) -> Result<AcquireOutcome, BackendError> {
    let lease = |fence: i64, ttl: Duration| -> Result<Lease, BackendError> {
        Ok(Lease {
            fence: u64::try_from(fence).map_err(|_| protocol(script, fence))?,
            ttl,
            replicas_acked,
        })
    };
    let items = match reply {
        Value::Int(fence) => return Ok(AcquireOutcome::Granted(lease(fence, ttl)?)),
        Value::Array(items) => items,
        other => return Err(protocol(script, format!("{other:?}"))),
    };
    // Read in place: a refused acquire, the contention path, allocates nothing more.
    let whole = |n: i64| u32::try_from(n).map_err(|_| protocol(script, n));
    match *items.as_slice() {
        [Value::Int(2), Value::Int(fence), Value::Int(left)] => Ok(AcquireOutcome::AlreadyHeld(
            lease(fence, pttl(left).unwrap_or(Duration::ZERO))?,
        )),
        [Value::Int(0), Value::Int(left)] => Ok(AcquireOutcome::Held { ttl: pttl(left) }),
        [Value::Int(0), Value::Int(left), Value::Int(1)] => {
            Ok(AcquireOutcome::Overtakable { ttl: pttl(left) })
        }
        [
            Value::Int(4),
            Value::Int(left),
            Value::Int(position),
            Value::Int(score),
        ] => Ok(AcquireOutcome::Queued {
            position: whole(position)?,
            score: u64::try_from(score).map_err(|_| protocol(script, score))?,
            ttl: pttl(left).filter(|_| left != -2),
            stray: None,
        }),
        [
            Value::Int(4),
            Value::Int(-2),
            Value::Int(position),
            Value::Int(score),
            ref head,
        ] => {
            Ok(AcquireOutcome::Queued {
                position: whole(position)?,
                score: u64::try_from(score).map_err(|_| protocol(script, score))?,
                // Free, with another waiter first.
                ttl: None,
                stray: own_waiter(head, gateway)
                    .map_err(|()| protocol(script, format!("{head:?}")))?,
            })
        }
        [Value::Int(5)] => Ok(AcquireOutcome::Held {
            ttl: Some(QUEUED_RETRY),
        }),
        [Value::Int(3), Value::Int(limit)] => Ok(AcquireOutcome::LimitDiffers {
            limit: whole(limit)?,
        }),
        [Value::Int(6)] => Ok(AcquireOutcome::KeyReused),
        _ => Err(protocol(script, format!("{items:?}"))),
    }
}

/// The waiter of a queue member, `<gateway>:<waiter>`, if `gateway` is its gateway (its
/// number may not fit an i64, hence text); `Err` for a reply that is no member.
fn own_waiter(member: &Value, gateway: &str) -> Result<Option<u64>, ()> {
    let Value::BulkString(member) = member else {
        return Err(());
    };
    let text = std::str::from_utf8(member).map_err(|_| ())?;
    let (of, waiter) = text.split_once(':').ok_or(())?;
    if of != gateway {
        return Ok(None);
    }
    waiter.parse().map(Some).map_err(|_| ())
}

/// A renew script's reply for `token` (1 renewed, 0 not held, -1 held by another token): the
/// lease's fence is the one the token carries.
pub(super) fn renew_outcome(
    script: &str,
    reply: i64,
    token: &str,
    ttl: Duration,
    replicas_acked: Option<u32>,
) -> Result<RenewOutcome, BackendError> {
    match reply {
        1 => Ok(RenewOutcome::Renewed(Lease {
            // Every token a lease script stored was issued with its fence.
            fence: fence_of(token).unwrap_or(0),
            ttl,
            replicas_acked,
        })),
        0 => Ok(RenewOutcome::NotHeld),
        -1 => Ok(RenewOutcome::NotOwner),
        other => Err(protocol(script, other)),
    }
}

/// Leases listed by an inspect script: token, ms left, holder record, for each. The tokens
/// become fences here and go no further.
pub(super) fn grant_views(script: &str, listed: &[String]) -> Result<Vec<GrantView>, BackendError> {
    let mut views = Vec::with_capacity(listed.len() / 3);
    for lease in listed.chunks(3) {
        let [token, left, record] = lease else {
            return Err(protocol(script, "a short reply"));
        };
        let fence = fence_of(token);
        let left: i64 = left.parse().map_err(|e| protocol(script, e))?;
        views.push(GrantView {
            fence,
            ttl: Duration::from_millis(u64::try_from(left).unwrap_or(0)),
            holder: Holder::of_record(record.as_bytes(), fence),
        });
    }
    Ok(views)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pttl_replies_map_to_durations() {
        assert_eq!(pttl(-1), None);
        assert_eq!(pttl(-2), Some(Duration::ZERO));
        assert_eq!(pttl(1500), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn acquire_replies_of_every_script_are_read_alike() {
        let ttl = Duration::from_secs(1);
        let int = |n| Value::Int(n);
        let array = |ns: &[i64]| Value::Array(ns.iter().map(|n| Value::Int(*n)).collect());
        assert!(matches!(
            acquire_outcome("t", int(7), ttl, None, "g"),
            Ok(AcquireOutcome::Granted(Lease { fence: 7, .. }))
        ));
        assert_eq!(
            acquire_outcome("t", array(&[0, 250, 1]), ttl, None, "g"),
            Ok(AcquireOutcome::Overtakable {
                ttl: Some(Duration::from_millis(250))
            })
        );
        assert_eq!(
            acquire_outcome("t", array(&[3, 5]), ttl, None, "g"),
            Ok(AcquireOutcome::LimitDiffers { limit: 5 })
        );
        assert!(acquire_outcome("t", array(&[9]), ttl, None, "g").is_err());
        // Queued behind another waiter of a free lock: a stray candidate only if it is one of
        // this gateway's.
        let queued = |head: &str| {
            let mut items: Vec<Value> = [4, -2, 2, 77].map(Value::Int).into();
            items.push(Value::BulkString(head.as_bytes().to_vec()));
            acquire_outcome("t", Value::Array(items), ttl, None, "g")
        };
        let stray = |outcome| match outcome {
            Ok(AcquireOutcome::Queued {
                position: 2,
                score: 77,
                ttl: None,
                stray,
            }) => Ok(stray),
            other => Err(other),
        };
        assert_eq!(stray(queued("g:18446744073709551615")), Ok(Some(u64::MAX)));
        assert_eq!(stray(queued("h:3")), Ok(None));
        assert_eq!(stray(queued("gg:3")), Ok(None));
        assert!(queued("g:x").is_err());
        assert!(queued("g").is_err());
    }
}
