//! A lock's fair queue on Redis (see `backend::queue` and `scripts/fair.lua`): the head
//! channel of this gateway, and leaving the queue. Taking a place is the acquire script's.

use redis::Cmd;

use super::RedisBackend;
use super::scripts::{QUEUE_CLEAR, QUEUE_LEAVE};
use super::send::evalsha;
use crate::backend::queue::LIVENESS;
use crate::backend::{BackendError, QueuePlace, ReleaseFeed, millis};

impl RedisBackend {
    /// The member of this gateway's `waiter` in a queue: `<gateway>:<waiter>`.
    fn member(&self, waiter: u64) -> String {
        format!("{}:{waiter}", self.gateway)
    }

    /// A fair waiter's place as the fair acquire's arguments (ARGV[3] to ARGV[6] of
    /// `fair_acquire.lua`).
    pub(super) fn queue_args(&self, call: &mut Cmd, place: QueuePlace) {
        call.arg(self.member(place.waiter))
            .arg(place.priority)
            .arg(place.score.map(|s| s.to_string()).unwrap_or_default())
            .arg(millis(LIVENESS));
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
