//! Replies of the lease scripts, read the same way for every primitive: the acquire scripts
//! (`acquire.lua`, and those of each kind of set of grants) and the renew scripts share
//! their reply shapes.

use std::time::Duration;

use redis::{FromRedisValue, Value};

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
/// kind's other limit).
pub(super) fn acquire_outcome(
    script: &str,
    reply: Value,
    ttl: Duration,
    replicas_acked: Option<u32>,
) -> Result<AcquireOutcome, BackendError> {
    let lease = |fence: i64, ttl: Duration| -> Result<Lease, BackendError> {
        Ok(Lease {
            fence: u64::try_from(fence).map_err(|_| protocol(script, fence))?,
            ttl,
            replicas_acked,
        })
    };
    if let Value::Int(fence) = reply {
        return Ok(AcquireOutcome::Granted(lease(fence, ttl)?));
    }
    let mut items: Vec<Value> =
        FromRedisValue::from_redis_value(reply).map_err(|e| protocol(script, e))?;
    // A queued reply's fifth item: the first waiter, another of this gateway's (its number
    // may not fit an i64).
    let stray = match &items[..] {
        [Value::Int(4), _, _, _, waiter] => Some(
            String::from_redis_value(waiter.clone())
                .ok()
                .and_then(|text| text.parse::<u64>().ok())
                .ok_or_else(|| protocol(script, format!("{waiter:?}")))?,
        ),
        _ => None,
    };
    if stray.is_some() {
        items.pop();
    }
    let reply: Vec<i64> = items
        .into_iter()
        .map(i64::from_redis_value)
        .collect::<Result<_, _>>()
        .map_err(|e| protocol(script, e))?;
    match *reply {
        [2, fence, left] => Ok(AcquireOutcome::AlreadyHeld(lease(
            fence,
            pttl(left).unwrap_or(Duration::ZERO),
        )?)),
        [0, left] => Ok(AcquireOutcome::Held { ttl: pttl(left) }),
        [0, left, 1] => Ok(AcquireOutcome::Overtakable { ttl: pttl(left) }),
        [4, left, position, score] => Ok(AcquireOutcome::Queued {
            position: u32::try_from(position).map_err(|_| protocol(script, position))?,
            score: u64::try_from(score).map_err(|_| protocol(script, score))?,
            // -2: free, with another waiter first.
            ttl: pttl(left).filter(|_| left != -2),
            stray,
        }),
        [5] => Ok(AcquireOutcome::Held {
            ttl: Some(QUEUED_RETRY),
        }),
        [3, limit] => Ok(AcquireOutcome::LimitDiffers {
            limit: u32::try_from(limit).map_err(|_| protocol(script, limit))?,
        }),
        _ => Err(protocol(script, format!("{reply:?}"))),
    }
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
            acquire_outcome("t", int(7), ttl, None),
            Ok(AcquireOutcome::Granted(Lease { fence: 7, .. }))
        ));
        assert_eq!(
            acquire_outcome("t", array(&[0, 250, 1]), ttl, None),
            Ok(AcquireOutcome::Overtakable {
                ttl: Some(Duration::from_millis(250))
            })
        );
        assert_eq!(
            acquire_outcome("t", array(&[3, 5]), ttl, None),
            Ok(AcquireOutcome::LimitDiffers { limit: 5 })
        );
        assert!(acquire_outcome("t", array(&[9]), ttl, None).is_err());
    }
}
