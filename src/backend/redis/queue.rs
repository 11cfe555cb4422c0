//! A lock's fair queue on Redis (see `backend::queue` and `scripts/fair.lua`): the head
//! channel of this gateway, and leaving the queue. Taking a place is the acquire script's.

use std::time::{Duration, SystemTime};

use redis::{Cmd, Value};

use super::RedisBackend;
use super::scripts::{QUEUE_CLEAR, QUEUE_LEAVE};
use super::send::evalsha;
use crate::backend::queue::{LIVENESS, priority_of};
use crate::backend::{BackendError, QueuePlace, QueuedWaiter, ReleaseFeed, millis};

impl RedisBackend {
    /// The member of this gateway's `waiter` in a queue: `<gateway>:<waiter>`.
    fn member(&self, waiter: u64) -> String {
        format!("{}:{waiter}", self.gateway)
    }

    /// A fair waiter's place, and whom it is for, as the fair acquire's arguments (ARGV[3]
    /// to ARGV[7] of `fair_acquire.lua`).
    pub(super) fn queue_args(&self, call: &mut Cmd, place: QueuePlace, owner: Option<&str>) {
        call.arg(self.member(place.waiter))
            .arg(place.priority)
            .arg(place.score.map(|s| s.to_string()).unwrap_or_default())
            .arg(millis(LIVENESS))
            .arg(owner.unwrap_or_default());
    }

    /// The places inspect read at the head of a queue (the last reply of `inspect.lua`: its
    /// gateway, score and description, three values each), as anyone may see them. A value
    /// that does not parse is left out: what an inspect shows of waiters is informative.
    pub(super) fn queue_view(&self, first: Option<&Value>) -> Vec<QueuedWaiter> {
        let Some(Value::Array(values)) = first else {
            return Vec::new();
        };
        let place = |three: &[Value]| {
            let score: u64 = text(&three[1])?.parse().ok()?;
            // `<seconds>:<microseconds>:<owner>` (Redis TIME when the place was taken);
            // nothing at all for a place taken by an older lockgate.
            let described = text(&three[2]).and_then(|d| {
                let (seconds, rest) = d.split_once(':')?;
                let (micros, owner) = rest.split_once(':')?;
                let since = Duration::from_secs(seconds.parse().ok()?)
                    + Duration::from_micros(micros.parse().ok()?);
                Some((SystemTime::UNIX_EPOCH + since, owner))
            });
            let since = described.map(|(since, _)| since);
            let owner = described
                .map(|(_, owner)| owner)
                .filter(|owner| !owner.is_empty());
            Some(QueuedWaiter {
                priority: priority_of(score),
                owner: owner.map(str::to_owned),
                since,
                here: text(&three[0])? == self.gateway,
            })
        };
        values.chunks_exact(3).filter_map(place).collect()
    }

    /// Announcements that this gateway's waiter heads the queue of the lock `name`.
    pub(super) async fn watch_head(&self, name: &str) -> ReleaseFeed {
        let channel = self.keys(name).head_channel_string(&self.gateway);
        self.notifier.watch_channel(&channel).await
    }

    /// Takes the waiters of dead gateways out of the queue of the lock `name` (see
    /// `queue_clear.lua`): true when no live waiter is left, and the queue is gone.
    pub(super) async fn clear_queue(&self, name: &str) -> Result<bool, BackendError> {
        let keys = self.keys(name);
        let call = evalsha(&QUEUE_CLEAR, &[keys.queue(), keys.queue_live()]);
        self.script::<i64>(&QUEUE_CLEAR, &call)
            .await
            .map(|cleared| cleared == 1)
    }

    /// Takes this gateway's `waiter` out of the queue of the lock `name`.
    pub(super) async fn leave_queue(&self, name: &str, waiter: u64) -> Result<(), BackendError> {
        let keys = self.keys(name);
        let mut call = evalsha(
            &QUEUE_LEAVE,
            &[keys.lock(), keys.queue(), keys.queue_live()],
        );
        call.arg(self.member(waiter));
        self.script::<i64>(&QUEUE_LEAVE, &call).await.map(|_| ())
    }
}

/// A bulk string reply as text.
fn text(value: &Value) -> Option<&str> {
    match value {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
        _ => None,
    }
}
