//! Shared grants of read/write locks on Redis, in scripts (`shared_*.lua`, run as every set
//! of grants' are, see `grants.rs`), and the writer's hold-off of new readers, here. Per name,
//! beside the lock key (which holds `~shared` meanwhile):
//!
//! * `<prefix>{<name>}:readers`, a sorted set of the readers' tokens scored by expiry;
//! * `<prefix>{<name>}:readers:info`, a hash of claims and holder records;
//! * `<prefix>{<name>}:writer-waiting`, present while a writer waits: no new reader.
//!
//! All in the name's hash slot; all gone when the last reader goes (the hold-off when its
//! writer gets the lock or its wait ends).

use std::time::Duration;

use super::RedisBackend;
use super::send::Request;
use crate::backend::{BackendError, millis};

impl RedisBackend {
    /// No new shared grant of `name` for `wait`, or again from now on (`None`): see
    /// [`crate::backend::LeaseStore::hold_off`].
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
