//! [`LockService`]: the lease engine. Every kind of lease ([`Primitive`]) is acquired,
//! renewed, released and inspected through it; the exclusive lock ([`Exclusive`]) has
//! shorthand methods. This file holds the engine's state and its configuration; acquiring is
//! in [`super::acquire`], renew, release and revoke in [`super::renew_release`], the hold
//! stream's watchdog, also generic, in [`super::hold`].
//!
//! It chooses token stems, turns a backend's lease into a validity the client can rely on,
//! enforces replica requirements, makes waiting requests wait without polling, and undoes a
//! grant it cannot stand behind (no validity left, too few replicas, no answer from the store,
//! nobody left to tell) so that a failed request never leaves a lock held by nobody.
//!
//! Every attempt at the backend has a token stem of its own (see [`super::token`]): a fresh
//! random one, or, with an idempotency key, the key's stem and a fresh
//! [`Claim`](crate::backend::Claim). An attempt that failed after its script may have run withdraws its possible grant before it returns,
//! and a withdrawal can only ever match its own attempt's grant, so a later attempt, or a later
//! request with the same idempotency key, never meets a withdrawal meant for another.
//!
//! Waiting (`wait_ms > 0`): a request first tries once, unless requests already wait for the
//! name in this gateway, in which case it queues behind them ([`super::wait`]). The head of
//! the line marks the name's release feed seen, tries, and if the lock is held sleeps until a
//! release is announced, the holder's ttl runs out (expiries are not always announced), its
//! own deadline passes, or the gateway shuts down. Backend traffic per waiting request is one
//! attempt per release or expiry. Where the backend cannot announce releases made by its
//! other clients (Redis without keyspace notifications), the head of each line also looks
//! again every 50 ms (`FOREIGN_RELEASE_RECHECK`): a bounded cost per name with waiters, not
//! per waiter. The acquire path and the waiting loop are in [`super::acquire`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::LockName;
use super::contention::{Contention, HotName};
use super::cursor::CursorSeal;
use super::error::HoldBackCause;
use super::error::LockError;
use super::events::{Watcher, Watches};
use super::fair_lines::FairLines;
use super::guard::GrantGuard;
use super::prefix_events::PrefixWatcher;
use super::primitive::{Exclusive, Primitive};
use super::request::Limits;
use super::token::{LockToken, TokenSecret};
use super::validity::Validity;
use super::wait::Waiters;
use crate::backend::data_loss::LongestLease;
use crate::backend::guards::HoldBack;
use crate::backend::{Backend, GrantsOf, LeaseStore, Leased, Unoffered, fence};
use crate::telemetry::Metrics;
use crate::telemetry::metrics::{HoldEnd, WaitEnd};

/// A lease granted to the caller. Until its guard is disarmed (the client has the answer),
/// dropping it withdraws the grant.
#[derive(Debug)]
pub struct Grant<P: Primitive = Exclusive> {
    pub token: LockToken,
    pub fence: u64,
    pub validity: Validity,
    pub replicas_acked: Option<u32>,
    /// The grant already existed: this was a retry of an idempotent acquire.
    pub replayed: bool,
    pub guard: GrantGuard<P>,
}

#[derive(Debug)]
pub struct LockService {
    pub(super) backend: Arc<Backend>,
    pub(super) limits: Limits,
    pub(super) secret: TokenSecret,
    pub(super) cursors: CursorSeal,
    /// Set by the guards after a store's clock stepped forward: no grant until it passes.
    hold_back: Arc<HoldBack>,
    /// The longest lease granted or renewed here, for the store's data-loss guard (see
    /// `backend::data_loss`).
    pub(super) longest: Arc<LongestLease>,
    pub(super) waiters: Waiters,
    /// Fair waiters, in lines sorted as the store's queues.
    pub(super) fair: FairLines,
    watches: Watches,
    pub(super) shutdown: CancellationToken,
    /// Set at the start of a shutdown: readiness fails from then on.
    draining: AtomicBool,
    /// The set of grants kept beside the lock, if the gateway keeps one (a read/write lock's
    /// readers): shown by the lock's inspection, deleted by its revoke.
    pub(super) beside_lock: Option<GrantsOf>,
    /// Where waits and holds are counted, by kind of lease (the gateway's, see `app`).
    metrics: Arc<Metrics>,
    /// The names waited for most here (see [`super::contention`]).
    contention: Contention,
}

impl LockService {
    pub fn new(backend: Backend, limits: Limits, secret: TokenSecret) -> Self {
        Self {
            backend: Arc::new(backend),
            waiters: Waiters::new(limits.max_waiters),
            fair: FairLines::default(),
            watches: Watches::new(limits.max_watchers),
            limits,
            cursors: CursorSeal::new(&secret),
            hold_back: Arc::default(),
            longest: Arc::default(),
            secret,
            shutdown: CancellationToken::new(),
            draining: AtomicBool::new(false),
            beside_lock: None,
            metrics: Arc::default(),
            contention: Contention::default(),
        }
    }

    /// Counts waits and holds in `metrics` (the gateway's) rather than in metrics of its own.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The `limit` names waited for most in this gateway of those `shown(kind, name)` lets
    /// through, hottest first, each with the requests waiting for it here now (see
    /// [`super::contention`]).
    pub fn hottest(&self, limit: usize, shown: impl Fn(&str, &str) -> bool) -> Vec<HotName> {
        let mut hot = self.contention.hottest(limit, shown);
        for name in &mut hot {
            name.waiting = self.waiters.waiting_for(name.kind, &name.name);
            if name.kind == crate::backend::kinds::LOCK {
                name.waiting += self.fair.waiting_for(&name.name);
            }
        }
        hot
    }

    /// Records the end of a wait in line for `leased` on `name` that had until `deadline` of
    /// its `wait`: how long it waited is recomputed rather than timed, so that a waiting future
    /// holds no start time of its own. Also told to the request's trace and latency (see
    /// `telemetry::trace::waited`).
    pub(super) fn record_wait(
        &self,
        leased: Leased<'_>,
        name: &LockName,
        (deadline, wait): (Instant, std::time::Duration),
        end: WaitEnd,
    ) {
        let left = deadline.saturating_duration_since(Instant::now());
        let waited = wait.saturating_sub(left);
        crate::telemetry::trace::waited(waited);
        self.metrics.lease_waited(leased.kind(), end, waited);
        let timed_out = end == WaitEnd::TimedOut;
        self.contention
            .waited(leased.kind(), name.as_str(), waited, timed_out);
    }

    /// Records the end of a hold of a lease of `kind` (`Leased::kind`) on `name`, granted with
    /// `fence` (its time: see `backend::fence::granted_at`; measured on this gateway's clock
    /// against the store's, so a skew between the two shows in it).
    pub(super) fn record_hold(
        &self,
        kind: &'static str,
        name: &LockName,
        fence: u64,
        end: HoldEnd,
    ) {
        let Some(held) = fence::granted_at(fence)
            .and_then(|granted| crate::wall_clock::now().duration_since(granted).ok())
        else {
            return;
        };
        self.metrics.lease_held(kind, end, held);
        self.contention.held(kind, name.as_str(), held);
    }

    /// The kind of grants kept beside the lock (see
    /// [`GrantSetKind::marker`](crate::backend::GrantSetKind::marker)): the read/write lock's
    /// readers, which `primitive::shared::register` names. A lock's inspection then shows
    /// them while they hold it, and its revoke deletes them with their marker.
    pub fn keeping_beside_lock(mut self, of: GrantsOf) -> Self {
        self.beside_lock = Some(of);
        self
    }

    /// Where the guards hold grants back (see `backend::guards`).
    pub fn hold_back(&self) -> &Arc<HoldBack> {
        &self.hold_back
    }

    /// The longest lease granted or renewed here: the store's data-loss guard shares it (built
    /// before the service, see `app`).
    pub fn with_longest_lease(mut self, longest: Arc<LongestLease>) -> Self {
        self.longest = longest;
        self
    }

    /// Refuses a new grant while grants are held back, after a clock step or because the store
    /// forgot its data (see `backend::data_loss`).
    pub(super) fn check_hold_back(&self, name: &LockName) -> Result<(), LockError> {
        if let Some(left) = self.hold_back.left() {
            return Err(LockError::HeldBack {
                retry_after: left,
                cause: HoldBackCause::ClockStep,
            });
        }
        if let Some(left) = self.backend.data_loss_hold_back(name.as_str()) {
            return Err(LockError::HeldBack {
                retry_after: left,
                cause: HoldBackCause::DataLost,
            });
        }
        Ok(())
    }

    /// The store, for the guards that watch it (see `backend::guards`).
    pub fn backend(&self) -> &Arc<Backend> {
        &self.backend
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn backend_kind(&self) -> &'static str {
        self.backend.kind()
    }

    /// Requests waiting for a lock right now.
    pub fn waiting(&self) -> usize {
        self.waiters.waiting()
    }

    /// Event streams open right now.
    pub fn watchers(&self) -> usize {
        self.watches.watchers()
    }

    /// Starts watching the lock `name` (see [`super::events`]).
    pub async fn watch(&self, name: &LockName) -> Result<Watcher, LockError> {
        self.watches.watch(&self.backend, name).await
    }

    /// Starts watching every lock under `prefix` (see [`super::prefix_events`]).
    pub async fn watch_prefix(&self, prefix: String) -> Result<PrefixWatcher, LockError> {
        self.watches.watch_prefix(&self.backend, prefix).await
    }

    /// Stops waiting requests (they answer "shutting down") and tells long-lived holders, such
    /// as hold streams, through [`LockService::shutdown_token`].
    pub fn shut_down(&self) {
        self.begin_drain();
        self.shutdown.cancel();
    }

    /// Makes readiness fail (503 `shutting-down`) while requests are still served, so that
    /// load balancers stop sending new ones before the listener closes.
    pub fn begin_drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Whether the configured store keeps leases of this kind (on these names): 501
    /// `not-offered`, or a set across Cluster slots.
    pub(super) fn check_offered(&self, leased: Leased<'_>) -> Result<(), LockError> {
        match self.backend.offers(leased) {
            Ok(()) => Ok(()),
            Err(Unoffered::Kind) => Err(self.not_offered(leased.noun())),
            Err(Unoffered::CrossSlot) => Err(LockError::CrossSlot),
        }
    }

    /// 501 `not-offered` for `kind` (a noun: "fair lock") on the configured store, unless
    /// `offered`.
    pub(super) fn offered(&self, offered: bool, kind: &'static str) -> Result<(), LockError> {
        if offered {
            Ok(())
        } else {
            Err(self.not_offered(kind))
        }
    }

    fn not_offered(&self, kind: &'static str) -> LockError {
        LockError::NotOffered {
            kind,
            mode: self.backend.kind(),
        }
    }

    /// Whether the backend answers.
    pub async fn ready(&self) -> Result<(), LockError> {
        if self.draining.load(Ordering::Relaxed) {
            return Err(LockError::ShuttingDown);
        }
        Ok(self.backend.ping().await?)
    }
}
