//! Lines of waiting requests, one per lock name, served first come, first served.
//!
//! Only the request at the head of a line tries to acquire; the others wait for their turn
//! without touching the backend, so a release wakes one request, not all of them. A line
//! shares one release feed (one backend subscription) among all its requests, taken by its
//! first head and dropped with the line when its last request leaves.
//!
//! When a head gets the lock it leaves a [`Handoff`] for the next head: the feed as the
//! winner last saw it, and until when the lock is held. The next head then waits for a
//! release (or that instant) instead of spending a doomed attempt on a lock it knows is taken.
//!
//! The order is per gateway: requests in different gateways, and requests that do not wait,
//! compete for a released lock as they reach the backend.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{Notify, OnceCell};

use crate::watch;
use tokio::time::Instant;

use crate::backend::{Holder, ReleaseFeed};

/// Everything the next head of a line can take over from the last winner.
#[derive(Debug)]
pub struct Handoff {
    /// The release feed as the winner last marked it seen: any release since shows as a change.
    pub releases: watch::Receiver<()>,
    /// The winner's lease ends no earlier than this.
    pub held_until: Instant,
}

/// A request waiting in this gateway, as inspect shows it: who it is for (the `owner` and
/// `metadata` it sent, if any), since when it waits, and whether in a fair queue.
#[derive(Debug, Clone, PartialEq)]
pub struct WaiterView {
    pub holder: Option<Arc<Holder>>,
    pub since: Instant,
    pub fair: bool,
}

/// The configured cap on waiting requests is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyWaiters;

#[derive(Debug)]
pub struct Waiters {
    max: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Lines by kind of lease, then name.
    lines: HashMap<&'static str, HashMap<String, Line>>,
    waiting: usize,
    next_id: u64,
}

#[derive(Debug)]
struct Line {
    /// Ticket ids in arrival order, each with the bell that tells it its turn has come and
    /// whom it waits for.
    tickets: VecDeque<(u64, Arc<Notify>, WaiterView)>,
    feed: Arc<OnceCell<ReleaseFeed>>,
    handoff: Option<Handoff>,
}

/// One request's place in a line. Dropping it leaves the line (and passes the turn on).
#[derive(Debug)]
pub struct Ticket<'a> {
    waiters: &'a Waiters,
    kind: &'static str,
    name: String,
    id: u64,
    turn: Arc<Notify>,
    feed: Arc<OnceCell<ReleaseFeed>>,
    handoff: Option<Handoff>,
}

/// A waiting request counted against the cap until dropped (a fair waiter, whose line is
/// kept by `fair`).
#[derive(Debug)]
pub struct Admission<'a>(&'a Waiters);

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        self.0.inner().waiting -= 1;
    }
}

impl Waiters {
    /// Counts one more waiting request, if the cap allows.
    pub fn admit(&self) -> Result<Admission<'_>, TooManyWaiters> {
        let mut inner = self.inner();
        if inner.waiting >= self.max {
            return Err(TooManyWaiters);
        }
        inner.waiting += 1;
        Ok(Admission(self))
    }

    pub fn new(max: usize) -> Self {
        Self {
            max,
            inner: Mutex::default(),
        }
    }

    /// How many lines there are: names with requests waiting, all kinds together.
    pub fn lines(&self) -> usize {
        self.inner().lines.values().map(HashMap::len).sum()
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        // Every critical section leaves the state consistent before it can panic.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether requests are waiting for `name` (a lease of `kind`) in this gateway.
    pub fn has_line(&self, kind: &'static str, name: &str) -> bool {
        self.inner()
            .lines
            .get(kind)
            .is_some_and(|lines| lines.contains_key(name))
    }

    /// Requests waiting for `name` (a lease of `kind`) in this gateway.
    pub fn waiting_for(&self, kind: &'static str, name: &str) -> usize {
        self.inner()
            .lines
            .get(kind)
            .and_then(|lines| lines.get(name))
            .map_or(0, |line| line.tickets.len())
    }

    /// The first `most` requests waiting for `name` (a lease of `kind`) in this gateway, in
    /// arrival order (a look at a line of thousands copies no more).
    pub fn waiters_of(&self, kind: &'static str, name: &str, most: usize) -> Vec<WaiterView> {
        self.inner()
            .lines
            .get(kind)
            .and_then(|lines| lines.get(name))
            .map_or_else(Vec::new, |line| {
                (line.tickets.iter().take(most))
                    .map(|(.., who)| who.clone())
                    .collect()
            })
    }

    /// Requests waiting now, all names together.
    pub fn waiting(&self) -> usize {
        self.inner().waiting
    }

    /// Joins the end of the line for `name` (a lease of `kind`), for `holder`.
    pub fn join(
        &self,
        kind: &'static str,
        name: &str,
        holder: Option<&Arc<Holder>>,
    ) -> Result<Ticket<'_>, TooManyWaiters> {
        let mut inner = self.inner();
        if inner.waiting >= self.max {
            return Err(TooManyWaiters);
        }
        inner.waiting += 1;
        let id = inner.next_id;
        inner.next_id += 1;
        let turn = Arc::new(Notify::new());
        let line = inner
            .lines
            .entry(kind)
            .or_default()
            .entry(name.to_owned())
            .or_insert_with(|| Line {
                tickets: VecDeque::new(),
                feed: Arc::new(OnceCell::new()),
                handoff: None,
            });
        if line.tickets.is_empty() {
            turn.notify_one();
        }
        let who = WaiterView {
            holder: holder.cloned(),
            since: Instant::now(),
            fair: false,
        };
        line.tickets.push_back((id, turn.clone(), who));
        let feed = line.feed.clone();
        Ok(Ticket {
            waiters: self,
            kind,
            name: name.to_owned(),
            id,
            turn,
            feed,
            handoff: None,
        })
    }
}

impl Ticket<'_> {
    /// Resolves when this ticket is at the head of its line.
    pub async fn turn(&self) {
        self.turn.notified().await;
    }

    /// The line's release feed, subscribing with `subscribe` if this is its first use.
    pub async fn releases<F, Fut>(&self, subscribe: F) -> watch::Receiver<()>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = ReleaseFeed>,
    {
        self.feed.get_or_init(subscribe).await.receiver()
    }

    /// What the last winner of this line left for its successor, if anything.
    pub fn take_handoff(&self) -> Option<Handoff> {
        let mut inner = self.waiters.inner();
        inner
            .lines
            .get_mut(self.kind)
            .and_then(|lines| lines.get_mut(&self.name))
            .and_then(|line| line.handoff.take())
    }

    /// Leaves the line after winning the lock, telling the next head what it needs to know.
    pub fn hand_off(mut self, handoff: Handoff) {
        self.handoff = Some(handoff);
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let mut inner = self.waiters.inner();
        inner.waiting -= 1;
        let Some(lines) = inner.lines.get_mut(self.kind) else {
            return;
        };
        let Some(line) = lines.get_mut(&self.name) else {
            return;
        };
        let Some(position) = line.tickets.iter().position(|(id, ..)| *id == self.id) else {
            return;
        };
        line.tickets.remove(position);
        if let Some(handoff) = self.handoff.take() {
            line.handoff = Some(handoff);
        }
        match line.tickets.front() {
            Some((_, next, _)) if position == 0 => next.notify_one(),
            Some(_) => {}
            None => {
                lines.remove(&self.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    async fn is_turn(ticket: &Ticket<'_>) -> bool {
        tokio::time::timeout(Duration::from_millis(10), ticket.turn())
            .await
            .is_ok()
    }

    /// `N` requests joining the line of the lock `a`, in order.
    fn in_line<const N: usize>(waiters: &Waiters) -> [Ticket<'_>; N] {
        std::array::from_fn(|_| waiters.join("lock", "a", None).expect("room"))
    }

    /// Turns come in arrival order, and leaving passes the turn to the next in line.
    #[tokio::test(start_paused = true)]
    async fn turns_come_first_come_first_served() {
        let waiters = Waiters::new(10);
        let [first, second, third] = in_line(&waiters);
        let elsewhere = waiters.join("lock", "b", None).expect("room");
        assert!(is_turn(&first).await);
        assert!(
            is_turn(&elsewhere).await,
            "lines of other names are independent"
        );
        assert!(!is_turn(&second).await);
        drop(third);
        drop(first);
        assert!(is_turn(&second).await);
        assert_eq!(waiters.waiting(), 2);
        drop(second);
        assert!(!waiters.has_line("lock", "a"), "an empty line is removed");
    }

    /// A request leaving from the middle of a line does not disturb the head.
    #[tokio::test(start_paused = true)]
    async fn leaving_from_the_middle_keeps_the_order() {
        let waiters = Waiters::new(10);
        let [first, second, third] = in_line(&waiters);
        assert!(is_turn(&first).await);
        drop(second);
        assert!(!is_turn(&third).await);
        drop(first);
        assert!(is_turn(&third).await);
    }

    /// The cap counts every waiting request and frees up as they leave.
    #[tokio::test(start_paused = true)]
    async fn a_look_at_the_waiters_copies_the_first_few_in_order() {
        let waiters = Waiters::new(100);
        let holder = |n: usize| {
            Some(Arc::new(Holder {
                owner: Some(format!("w{n}")),
                metadata: None,
            }))
        };
        let _line: Vec<Ticket<'_>> = (0..20)
            .map(|n| waiters.join("lock", "a", holder(n).as_ref()).expect("room"))
            .collect();
        let seen = waiters.waiters_of("lock", "a", 16);
        let owners: Vec<_> = (seen.iter())
            .map(|w| w.holder.as_ref().and_then(|h| h.owner.clone()))
            .collect();
        let first: Vec<_> = (0..16).map(|n| Some(format!("w{n}"))).collect();
        assert_eq!(owners, first);
        assert!(waiters.waiters_of("lock", "b", 16).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_cap_on_waiters_is_enforced() {
        let waiters = Waiters::new(2);
        let a = waiters.join("lock", "a", None).expect("room");
        let _b = waiters.join("lock", "b", None).expect("room");
        assert_eq!(waiters.join("lock", "c", None).err(), Some(TooManyWaiters));
        drop(a);
        assert!(waiters.join("lock", "c", None).is_ok());
    }

    /// A winner's handoff reaches the next head, and only through the line.
    #[tokio::test(start_paused = true)]
    async fn a_handoff_reaches_the_next_head() {
        let waiters = Waiters::new(10);
        let [first, second] = in_line(&waiters);
        let (_tx, releases) = watch::channel(());
        let held_until = Instant::now() + Duration::from_secs(5);
        first.hand_off(Handoff {
            releases,
            held_until,
        });
        assert!(is_turn(&second).await);
        assert_eq!(
            second.take_handoff().map(|h| h.held_until),
            Some(held_until)
        );
        assert!(second.take_handoff().is_none());
    }
}
