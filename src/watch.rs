//! A watch channel (the latest value, and a wake-up for whoever waits for the next one) like
//! `tokio::sync::watch`, whose waiters wake in the order they began to wait.
//!
//! Why not tokio's: it spreads a channel's waiters over eight notifiers, picking one at random
//! for each wait (less contention between threads), so the waiters of one change wake in a
//! random order, one the process's random seed picks. lockgate wakes many waiters at once
//! (every local waiter of a name at its release, every watcher after a resubscription), and the
//! deterministic simulation (tests/it/simulation.rs) must replay a seed byte for byte: the
//! order of their attempts must follow from the seed alone. One notifier per channel costs
//! nothing a gateway notices (waiters of one name are woken by one release at a time).
//!
//! The subset of tokio's interface lockgate uses, with its meanings: a receiver has seen the
//! version it was made with; [`Receiver::changed`] returns at once if a newer one was sent
//! since the receiver last looked (and marks it seen), and fails once the sender is gone with
//! nothing new; [`Sender::send`] fails without storing when no receiver is left.

use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

#[derive(Debug)]
struct State<T> {
    value: T,
    version: u64,
    closed: bool,
}

#[derive(Debug)]
struct Shared<T> {
    state: Mutex<State<T>>,
    changed: Notify,
    receivers: AtomicUsize,
}

impl<T> Shared<T> {
    fn state(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Sends values to every [`Receiver`]; the channel closes when it is dropped.
#[derive(Debug)]
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// Sees the latest value sent and waits for the next.
#[derive(Debug)]
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    seen: u64,
}

/// The sender is gone and no value is newer than the one seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvError(());

impl std::fmt::Display for RecvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the channel is closed")
    }
}

impl std::error::Error for RecvError {}

/// No receiver is left: the value was not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendError<T>(pub T);

/// A borrowed value (the channel is locked while it lives: keep it short, never across an
/// `.await`).
#[derive(Debug)]
pub struct Ref<'a, T>(MutexGuard<'a, State<T>>);

impl<T> Deref for Ref<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0.value
    }
}

/// A channel holding `init`, and a receiver that has seen it.
pub fn channel<T>(init: T) -> (Sender<T>, Receiver<T>) {
    let sender = Sender::new(init);
    let receiver = sender.subscribe();
    (sender, receiver)
}

impl<T> Sender<T> {
    /// A channel holding `init`, with no receiver yet.
    pub fn new(init: T) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    value: init,
                    version: 0,
                    closed: false,
                }),
                changed: Notify::new(),
                receivers: AtomicUsize::new(0),
            }),
        }
    }

    /// Stores `value` and wakes every waiting receiver, unless none is left.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        if self.receiver_count() == 0 {
            return Err(SendError(value));
        }
        self.send_replace(value);
        Ok(())
    }

    /// Stores `value`, receivers or not, wakes every waiting one, and returns the value before.
    pub fn send_replace(&self, value: T) -> T {
        let mut old = value;
        self.send_modify(|value| std::mem::swap(value, &mut old));
        old
    }

    /// Changes the value in place, receivers or not, and wakes every waiting one.
    pub fn send_modify(&self, modify: impl FnOnce(&mut T)) {
        {
            let mut state = self.shared.state();
            modify(&mut state.value);
            state.version += 1;
        }
        self.shared.changed.notify_waiters();
    }

    /// Changes the value in place if `modify` says it changed it (true), and then wakes every
    /// waiting receiver; returns what `modify` said.
    pub fn send_if_modified(&self, modify: impl FnOnce(&mut T) -> bool) -> bool {
        let modified = {
            let mut state = self.shared.state();
            let modified = modify(&mut state.value);
            if modified {
                state.version += 1;
            }
            modified
        };
        if modified {
            self.shared.changed.notify_waiters();
        }
        modified
    }

    /// The value now.
    pub fn borrow(&self) -> Ref<'_, T> {
        Ref(self.shared.state())
    }

    /// A new receiver, which has seen the value now.
    pub fn subscribe(&self) -> Receiver<T> {
        self.shared.receivers.fetch_add(1, Ordering::Relaxed);
        let seen = self.shared.state().version;
        Receiver {
            shared: self.shared.clone(),
            seen,
        }
    }

    /// How many receivers are alive.
    pub fn receiver_count(&self) -> usize {
        self.shared.receivers.load(Ordering::Relaxed)
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.shared.state().closed = true;
        self.shared.changed.notify_waiters();
    }
}

impl<T> Receiver<T> {
    /// Waits for a value newer than the one seen (at once if one came meanwhile) and marks it
    /// seen; an error once the sender is gone with nothing newer. Cancel-safe.
    pub async fn changed(&mut self) -> Result<(), RecvError> {
        loop {
            // Registered before looking, so that a value sent between the look and the wait
            // still wakes it.
            let notified = self.shared.changed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            {
                let state = self.shared.state();
                if state.version != self.seen {
                    self.seen = state.version;
                    return Ok(());
                }
                if state.closed {
                    return Err(RecvError(()));
                }
            }
            notified.await;
        }
    }

    /// Whether a value newer than the one seen was sent; an error once the sender is gone.
    pub fn has_changed(&self) -> Result<bool, RecvError> {
        let state = self.shared.state();
        if state.closed {
            return Err(RecvError(()));
        }
        Ok(state.version != self.seen)
    }

    /// The value now, marked seen.
    pub fn borrow_and_update(&mut self) -> Ref<'_, T> {
        let state = self.shared.state();
        self.seen = state.version;
        Ref(state)
    }

    /// The value now (not marked seen).
    pub fn borrow(&self) -> Ref<'_, T> {
        Ref(self.shared.state())
    }
}

impl<T> Clone for Receiver<T> {
    /// Another receiver that has seen what this one has.
    fn clone(&self) -> Self {
        self.shared.receivers.fetch_add(1, Ordering::Relaxed);
        Self {
            shared: self.shared.clone(),
            seen: self.seen,
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.shared.receivers.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    #[tokio::test]
    async fn a_receiver_sees_each_change_once_and_the_close() {
        let (tx, mut rx) = channel(0u32);
        tx.send_replace(1);
        tx.send_modify(|v| *v += 1);
        rx.changed().await.expect("a change");
        assert_eq!(*rx.borrow(), 2);
        let mut late = tx.subscribe();
        let waiting = tokio::spawn(async move { late.changed().await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a new receiver has seen the value");
        tx.send_replace(3);
        waiting.await.expect("joined").expect("a change");
        drop(tx);
        rx.changed()
            .await
            .expect("the last change before the close");
        assert!(rx.changed().await.is_err(), "closed");
    }

    #[tokio::test]
    async fn send_fails_without_receivers_and_counts_them() {
        let (tx, rx) = channel(());
        let other = rx.clone();
        assert_eq!(tx.receiver_count(), 2);
        drop((rx, other));
        assert_eq!(tx.receiver_count(), 0);
        assert!(tx.send(()).is_err());
        let mut rx = tx.subscribe();
        tx.send(()).expect("a receiver");
        rx.changed().await.expect("a change");
    }

    /// Waiters of one change wake in the order they began to wait (tokio's pick one of eight
    /// notifiers at random).
    #[tokio::test(flavor = "current_thread")]
    async fn waiters_wake_in_the_order_they_began_to_wait() {
        let (tx, rx) = channel(());
        let woken = Arc::new(StdMutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..32 {
            let mut rx = rx.clone();
            let woken = woken.clone();
            tasks.push(tokio::spawn(async move {
                rx.changed().await.expect("a change");
                woken.lock().expect("woken").push(i);
            }));
            tokio::task::yield_now().await;
        }
        tx.send_replace(());
        for task in tasks {
            task.await.expect("joined");
        }
        let woken = woken.lock().expect("woken").clone();
        assert_eq!(woken, (0..32).collect::<Vec<_>>());
    }
}
