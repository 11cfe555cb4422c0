//! Semaphores on Redis: the [`SemaphoreBackend`] contract in scripts (`permit_*.lua`). Per
//! name, two keys in the name's hash slot:
//!
//! * `<prefix>{<name>}:permits`, a sorted set: one member per permit, its token, scored by
//!   the permit's expiry (ms, Redis `TIME`);
//! * `<prefix>{<name>}:semaphore`, a hash: `limit`, `claim:<stem>` for idempotent grants,
//!   `holder:<token>` for permits that name a holder.
//!
//! Both expire with the permit that runs longest; the last release deletes them. Expired
//! members are reclaimed by the next acquire. `redis-cli ZRANGE <key> 0 -1 WITHSCORES` shows
//! the permits, `HGETALL` the rest.

use std::time::Duration;

use redis::{FromRedisValue, Value};

use super::RedisBackend;
use super::scripts::{
    PERMIT_ACQUIRE, PERMIT_INSPECT, PERMIT_RELEASE, PERMIT_RENEW, PERMIT_WITHDRAW,
};
use super::send::evalsha;
use crate::backend::fence::fence_of;
use crate::backend::semaphore::{PermitView, Permits, SemaphoreBackend};
use crate::backend::{
    AcquireOutcome, BackendError, Claim, Holder, Lease, ReleaseFeed, ReleaseOutcome, RenewOutcome,
    ReplicaAck, millis,
};

/// Leases listed by an inspect script: token, ms left, holder record, for each. The tokens
/// become fences here and go no further.
pub(super) fn permit_views(
    script: &str,
    listed: &[String],
) -> Result<Vec<PermitView>, BackendError> {
    let mut views = Vec::with_capacity(listed.len() / 3);
    for lease in listed.chunks(3) {
        let [token, left, record] = lease else {
            return Err(protocol(script, "a short reply"));
        };
        let fence = fence_of(token);
        let left: i64 = left.parse().map_err(|e| protocol(script, e))?;
        views.push(PermitView {
            fence,
            ttl: ms(left),
            holder: Holder::of_record(record.as_bytes(), fence),
        });
    }
    Ok(views)
}

pub(super) fn protocol(script: &str, detail: impl std::fmt::Display) -> BackendError {
    BackendError::Protocol(format!("{script} script: {detail}"))
}

pub(super) fn ms(value: i64) -> Duration {
    Duration::from_millis(u64::try_from(value).unwrap_or(0))
}

fn fence(value: i64) -> Result<u64, BackendError> {
    u64::try_from(value).map_err(|_| protocol("permit_acquire", format!("fence {value}")))
}

impl SemaphoreBackend for RedisBackend {
    async fn acquire_permit(
        &self,
        name: &str,
        limit: u32,
        stem: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
        claim: Option<Claim>,
        holder: Option<&Holder>,
    ) -> Result<AcquireOutcome, BackendError> {
        let keys = self.keys(name);
        let mut call = evalsha(
            &PERMIT_ACQUIRE,
            &[keys.permits(), keys.counter(), keys.semaphore()],
        );
        let holder = holder.filter(|h| !h.is_empty());
        call.arg(stem)
            .arg(millis(ttl))
            .arg(limit)
            .arg(claim.map(|Claim(id)| id.to_string()).unwrap_or_default())
            .arg(holder.map(Holder::fields).unwrap_or_default());
        let (reply, acked) = self
            .run_lease_script::<Value>(name, &PERMIT_ACQUIRE, &call, ack)
            .await?;
        let lease = |f: i64, ttl: Duration| -> Result<Lease, BackendError> {
            Ok(Lease {
                fence: fence(f)?,
                ttl,
                replicas_acked: acked,
            })
        };
        if let Value::Int(f) = reply {
            return Ok(AcquireOutcome::Granted(lease(f, ttl)?));
        }
        let reply: Vec<i64> =
            FromRedisValue::from_redis_value(reply).map_err(|e| protocol("permit_acquire", e))?;
        match *reply {
            [2, f, left] => Ok(AcquireOutcome::AlreadyHeld(lease(f, ms(left))?)),
            [0, left] => Ok(AcquireOutcome::Held {
                ttl: Some(ms(left)),
            }),
            [3, held] => Ok(AcquireOutcome::LimitDiffers {
                limit: u32::try_from(held).map_err(|_| protocol("permit_acquire", held))?,
            }),
            _ => Err(protocol("permit_acquire", format!("{reply:?}"))),
        }
    }

    async fn renew_permit(
        &self,
        name: &str,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<RenewOutcome, BackendError> {
        let keys = self.keys(name);
        let mut call = evalsha(&PERMIT_RENEW, &[keys.permits(), keys.semaphore()]);
        call.arg(token).arg(millis(ttl));
        let (reply, acked) = self
            .run_lease_script::<i64>(name, &PERMIT_RENEW, &call, ack)
            .await?;
        match reply {
            1 => Ok(RenewOutcome::Renewed(Lease {
                // Every permit's token was issued by the acquire script, with its fence.
                fence: fence_of(token).unwrap_or(0),
                ttl,
                replicas_acked: acked,
            })),
            0 => Ok(RenewOutcome::NotHeld),
            other => Err(protocol("permit_renew", other)),
        }
    }

    async fn release_permit(
        &self,
        name: &str,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        let keys = self.keys(name);
        let mut call = evalsha(&PERMIT_RELEASE, &[keys.permits(), keys.semaphore()]);
        call.arg(token).arg(keys.permits_channel());
        match self.script::<i64>(&PERMIT_RELEASE, &call).await? {
            1 => Ok(ReleaseOutcome::Released),
            0 => Ok(ReleaseOutcome::NotHeld),
            other => Err(protocol("permit_release", other)),
        }
    }

    async fn withdraw_permit(
        &self,
        name: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        let keys = self.keys(name);
        let mut call = evalsha(&PERMIT_WITHDRAW, &[keys.permits(), keys.semaphore()]);
        call.arg(stem)
            .arg(keys.permits_channel())
            .arg(claim.map(|Claim(id)| id.to_string()).unwrap_or_default());
        self.script::<i64>(&PERMIT_WITHDRAW, &call)
            .await
            .map(|withdrawn| withdrawn == 1)
    }

    async fn inspect_permits(&self, name: &str) -> Result<Permits, BackendError> {
        let keys = self.keys(name);
        let call = evalsha(&PERMIT_INSPECT, &[keys.permits(), keys.semaphore()]);
        let reply: Vec<String> = self.script(&PERMIT_INSPECT, &call).await?;
        let Some((limit, rest)) = reply.split_first() else {
            return Err(protocol("permit_inspect", "an empty reply"));
        };
        let permits = permit_views("permit_inspect", rest)?;
        Ok(Permits {
            limit: limit.parse().ok().filter(|_| !permits.is_empty()),
            permits,
        })
    }

    async fn watch_permits(&self, name: &str) -> ReleaseFeed {
        self.notifier
            .watch_channel(&self.keys(name).permits_channel_string())
            .await
    }
}
