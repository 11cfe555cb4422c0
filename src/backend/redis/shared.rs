//! Shared grants of read/write locks on Redis, in scripts
//! (`shared_*.lua`). Per name, beside the lock key (which holds `~shared` meanwhile):
//!
//! * `<prefix>{<name>}:readers`, a sorted set of the readers' tokens scored by expiry;
//! * `<prefix>{<name>}:readers:info`, a hash of claims and holder records;
//! * `<prefix>{<name>}:writer-waiting`, present while a writer waits: no new reader.
//!
//! All in the name's hash slot; all gone when the last reader goes (the hold-off when its
//! writer gets the lock or its wait ends).

use std::time::Duration;

use redis::Value;

use super::RedisBackend;
use super::replies::{acquire_outcome, permit_views, renew_outcome};
use super::scripts::{SHARED_ACQUIRE, SHARED_INSPECT, SHARED_RELEASE, SHARED_RENEW};
use super::send::{Request, claim_arg, evalsha};
use crate::backend::semaphore::PermitView;
use crate::backend::{
    AcquireOutcome, BackendError, Claim, Holder, ReleaseOutcome, RenewOutcome, millis,
};
use crate::backend::{GrantAttempt, RenewAttempt};

impl RedisBackend {
    /// `shared_release.lua` for `token`, or for the grant of `stem` and `claim`.
    async fn remove_reader(
        &self,
        name: &str,
        token: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        let keys = self.keys(name);
        let mut call = evalsha(
            &SHARED_RELEASE,
            &[keys.lock(), keys.readers(), keys.readers_info()],
        );
        call.arg(token)
            .arg(keys.channel())
            .arg(stem)
            .arg(claim_arg(claim));
        Ok(self.script::<i64>(&SHARED_RELEASE, &call).await? == 1)
    }
}

impl RedisBackend {
    pub(super) async fn acquire_shared(
        &self,
        name: &str,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let (stem, ttl, ack, claim, holder) = attempt.parts();
        let keys = self.keys(name);
        let mut call = evalsha(
            &SHARED_ACQUIRE,
            &[
                keys.lock(),
                keys.readers(),
                keys.counter(),
                keys.readers_info(),
                keys.hold_off(),
            ],
        );
        let holder = holder.filter(|h| !h.is_empty());
        call.arg(stem)
            .arg(millis(ttl))
            .arg(claim_arg(claim))
            .arg(holder.map(Holder::fields).unwrap_or_default());
        let (reply, acked) = self
            .run_lease_script::<Value>(name, &SHARED_ACQUIRE, &call, ack)
            .await?;
        acquire_outcome("shared_acquire", reply, ttl, acked)
    }

    pub(super) async fn renew_shared(
        &self,
        name: &str,
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        let RenewAttempt { token, ttl, ack } = renewal;
        let keys = self.keys(name);
        let mut call = evalsha(
            &SHARED_RENEW,
            &[keys.lock(), keys.readers(), keys.readers_info()],
        );
        call.arg(token).arg(millis(ttl));
        let (reply, acked) = self
            .run_lease_script::<i64>(name, &SHARED_RENEW, &call, ack)
            .await?;
        renew_outcome("shared_renew", reply, token, ttl, acked)
    }

    pub(super) async fn release_shared(
        &self,
        name: &str,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        Ok(if self.remove_reader(name, token, "", None).await? {
            ReleaseOutcome::Released
        } else {
            ReleaseOutcome::NotHeld
        })
    }

    pub(super) async fn withdraw_shared(
        &self,
        name: &str,
        stem: &str,
        claim: Option<Claim>,
    ) -> Result<bool, BackendError> {
        self.remove_reader(name, "", stem, claim).await
    }

    pub(super) async fn readers_of(&self, name: &str) -> Result<Vec<PermitView>, BackendError> {
        let keys = self.keys(name);
        let call = evalsha(&SHARED_INSPECT, &[keys.readers(), keys.readers_info()]);
        let reply: Vec<String> = self.script(&SHARED_INSPECT, &call).await?;
        permit_views("shared_inspect", &reply)
    }

    pub(super) async fn hold_off_readers(
        &self,
        name: &str,
        wait: Option<Duration>,
    ) -> Result<(), BackendError> {
        let keys = self.keys(name);
        let mut pipe = redis::pipe();
        match wait {
            Some(wait) => pipe
                .cmd("SET")
                .arg(keys.hold_off())
                .arg(1)
                .arg("PX")
                .arg(millis(wait).max(1))
                .ignore(),
            None => pipe.cmd("DEL").arg(keys.hold_off()).ignore(),
        };
        self.run::<()>(Request::Native(&pipe)).await
    }
}
