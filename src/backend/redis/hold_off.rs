//! A waiting lock's hold-off of new grants of the set kept beside it (a read/write lock's
//! readers, see [`GrantSetKind::marker`](crate::backend::GrantSetKind::marker)):
//! `<prefix>{<name>}:writer-waiting`, present while a lock waits, in the name's hash slot;
//! the acquire script of a set kept beside the lock grants nothing while it is there (it is
//! given the key, see `grants.rs`). Gone when the waiter gets the lock or its wait ends.

use std::time::Duration;

use super::RedisBackend;
use super::send::Request;
use crate::backend::{BackendError, millis};

impl RedisBackend {
    /// No new grant of a set kept beside the lock of `name` for `wait`, or again from now on
    /// (`None`): see [`crate::backend::LeaseStore::hold_off`].
    pub(super) async fn hold_off_beside(
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
