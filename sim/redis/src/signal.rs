//! A value the server's connections watch (paused or not, the restarts so far), whose waiters
//! wake in the order they began to wait: tokio's `watch` picks one of eight notifiers at random
//! for each waiter, and a simulated world must replay its seed byte for byte.

use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

#[derive(Debug)]
pub struct Signal<T> {
    value: Mutex<T>,
    changed: Notify,
}

impl<T: Clone + PartialEq> Signal<T> {
    pub fn new(value: T) -> Self {
        Self {
            value: Mutex::new(value),
            changed: Notify::new(),
        }
    }

    fn value(&self) -> MutexGuard<'_, T> {
        self.value.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self) -> T {
        self.value().clone()
    }

    /// Changes the value and wakes every waiter.
    pub fn modify(&self, modify: impl FnOnce(&mut T)) {
        modify(&mut self.value());
        self.changed.notify_waiters();
    }

    /// Returns once the value satisfies `ready` (at once if it does).
    pub async fn wait_for(&self, ready: impl Fn(&T) -> bool) {
        loop {
            let notified = self.changed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if ready(&self.value()) {
                return;
            }
            notified.await;
        }
    }

    /// Returns once the value is no longer `seen`.
    pub async fn changed_from(&self, seen: &T) {
        self.wait_for(|now| now != seen).await;
    }
}
