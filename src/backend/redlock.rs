//! Redlock: one lock over N independent Redis masters (N odd, 3 or more), held while a majority
//! holds it.
//!
//! Each operation runs the single-node operation on every node in parallel, each bounded by
//! the per-node timeout, so a node that is down or frozen costs at most that timeout, never the
//! request's. Then:
//!
//! * **acquire** succeeds when a majority granted (or, for an idempotent retry, still holds a
//!   grant of the request's stem). Each granting node issued its own fence; the gateway picks
//!   one (the largest, or the fence an idempotent retry found on a majority) and, before
//!   answering, *finalizes* the grant: every granting node whose token carries another fence
//!   gets the token `<stem>.<fence>` and lifts its fence counter to it (`finalize.lua`). Any
//!   later majority shares a node with this one, so its fence is larger. If fewer than a
//!   majority end up holding the final token, the grant is withdrawn everywhere and reported
//!   unavailable, since the next fence could otherwise go backwards. The nodes that did not
//!   answer in time are finalized too, in the background: one may run the acquire late, and
//!   its copy then takes the holder's token. Without a majority every partial grant is
//!   withdrawn at once, on the nodes that timed out too (their grant may have landed), without
//!   a message to the name's waiters: it never held the lock, and the message would wake them
//!   to take the free node and withdraw it in turn, in a loop for as long as the holder holds.
//!   The validity is the smallest ttl a granting node reported, less the clock drift allowance
//!   (0.01 × ttl + 2 ms), less the time the whole round took (subtracted by the `lock` layer,
//!   which counts from before the first request left).
//! * **release** answers what a majority answered: released, not held or not owner (a node
//!   holding another token and a node not holding it both say "not yours", so together they
//!   make a majority for "not held"). When the nodes that answered cannot make a majority for
//!   anything, the answer is "unavailable": the release may have happened on some nodes, and
//!   is safe to retry.
//! * **renew** succeeds when a majority renewed. When a majority says the token does not hold
//!   the lock, the minority renewals are released (no lock, only keys in the next holder's
//!   way); when nodes did not answer, nothing is undone and the answer is "unavailable". A node
//!   kept out of new grants after a data loss (below) counts as one that did not answer: its
//!   "not held" may be a grant it forgot, and believing it released a lock its holder still
//!   held (found by the simulation, seed 497).
//! * **inspect** reports the lock held when a majority holds the same grant, with the fence a
//!   majority of its copies holds. A node that ran the acquire after its deadline holds a fence
//!   of its own, nobody's, until its background finalization; so copies that differ tell the
//!   fence only when the grant is on every node (it is being finalized: the highest, which
//!   every copy is raised to). When they differ and a node did not show its copy, a silent
//!   finalized copy and a late one look like a grant being finalized: the answer is
//!   "unavailable" (a listing shows the lock without a fence), never a fence nobody holds.
//!
//! Clocks: Redlock assumes the nodes' clocks run at about the same rate (the drift allowance
//! covers 1%), not that they agree; fences additionally assume no node's wall clock steps back
//! across a lost counter (see `fence`). A node restarted without persistence forgets its
//! grants: it is kept out of new grants for the longest lease granted on it, as the Redlock
//! description says (see `backend::data_loss`); run nodes with AOF (`appendfsync always`) to
//! lose nothing at all.
//!
//! One piece, over 400 lines: the quorum rules for acquire, renew, release and the undo of a
//! partial grant must be read together to check them against each other.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;

use super::listing::{self, Looked, Scanned, Walk};
use super::redis::RedisBackend;
use super::{
    AcquireOutcome, BackendError, Grants, Inspection, Lease, LeaseStore, Leased, ListPage,
    PageRequest, ReleaseFeed, ReleaseOutcome, RenewOutcome,
};
use crate::backend::{
    GrantAttempt, GrantPage, GrantedNames, GrantsOf, RenewAttempt, Watched, Withdrawal,
};

#[derive(Debug)]
pub struct RedlockBackend {
    /// Shared with the background finalizations of late nodes (see `acquire_lock`).
    nodes: Vec<Arc<RedisBackend>>,
}

/// The clock drift allowance of a lease: 0.01 × ttl + 2 ms.
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// How long until enough held nodes free up for a majority, given the ttls of the nodes held
/// by another token and how many nodes are free (or ours) already.
fn retry_after(mut held: Vec<Option<Duration>>, free: usize, quorum: usize) -> Option<Duration> {
    let needed = quorum.saturating_sub(free).max(1);
    // Keys without an expiry never free up by themselves: sort them last.
    held.sort_by_key(|ttl| ttl.unwrap_or(Duration::MAX));
    held.get(needed - 1).copied().flatten()
}

/// What the copies of one grant on the nodes tell of its fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GrantFence {
    /// A majority of the copies holds this fence: the holder's, once finalized.
    Final(Option<u64>),
    /// The grant is on every node and the copies differ: it is being finalized, and every
    /// copy is raised to the highest, this one.
    Finalizing(Option<u64>),
    /// The copies that answered hold no fence in common and a node did not show its copy:
    /// either the grant is being finalized (the highest is the holder's), or a node ran its
    /// acquire after the deadline with a fence of its own, nobody's, while a finalized copy
    /// is silent (the highest is not the holder's). Fences alone cannot tell which.
    Open,
}

impl GrantFence {
    /// The fence of a grant whose copies, on `nodes` nodes, hold `fences`.
    fn of(fences: &[Option<u64>], quorum: usize, nodes: usize) -> Self {
        let held_by_quorum = fences
            .iter()
            .find(|fence| fences.iter().filter(|other| other == fence).count() >= quorum);
        match held_by_quorum {
            Some(&fence) => Self::Final(fence),
            None if fences.len() == nodes => {
                Self::Finalizing(fences.iter().copied().flatten().max())
            }
            None => Self::Open,
        }
    }
}

/// The verdict of a majority on a release: `None` when the answers make no majority.
fn release_verdict(outcomes: &[Option<ReleaseOutcome>], quorum: usize) -> Option<ReleaseOutcome> {
    let count = |wanted: ReleaseOutcome| outcomes.iter().filter(|o| **o == Some(wanted)).count();
    let (released, not_held, not_owner) = (
        count(ReleaseOutcome::Released),
        count(ReleaseOutcome::NotHeld),
        count(ReleaseOutcome::NotOwner),
    );
    // A grant with a minimum hold released early is left to expire on each node (by each
    // node's clock): held for the longest of what they said, if any did.
    let held_for = outcomes
        .iter()
        .filter_map(|o| match o {
            Some(ReleaseOutcome::HeldFor { left }) => Some(*left),
            _ => None,
        })
        .collect::<Vec<_>>();
    if released + held_for.len() >= quorum {
        Some(match held_for.iter().max() {
            Some(&left) => ReleaseOutcome::HeldFor { left },
            None => ReleaseOutcome::Released,
        })
    } else if not_owner >= quorum {
        Some(ReleaseOutcome::NotOwner)
    } else if not_held + not_owner >= quorum {
        Some(ReleaseOutcome::NotHeld)
    } else {
        None
    }
}

/// What one node said to an acquire.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Granted(Lease),
    Replayed(Lease),
    Held(Option<Duration>),
    /// The attempt's idempotency key holds the name there with another kind of grant.
    KeyReused,
    Failed,
    /// Not asked: the node forgot its data and is kept out of new grants for a while.
    KeptOut,
}

/// A failed acquire: its outcome is unknown (the gateway withdraws it once more) when a node
/// failed to answer, since its script may have run there and the withdrawal just made may
/// not have reached it.
fn may_have_run(answers: &[Answer], message: String) -> BackendError {
    if answers.iter().any(|a| matches!(a, Answer::Failed)) {
        BackendError::NoReply(message)
    } else {
        BackendError::Unavailable(message)
    }
}

impl RedlockBackend {
    /// The memory policy of every node (see `backend::guards`).
    pub(crate) async fn memory_policies(
        &self,
    ) -> Vec<super::guards::NodeLook<super::guards::MemoryPolicy>> {
        join_all(self.nodes.iter().map(|node| node.memory_policies()))
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Logs each node's connection (see `backend::guards`).
    pub(crate) fn log_connections(&self) {
        for node in &self.nodes {
            node.log_connection();
        }
    }

    /// The clock of every node (see `backend::guards`).
    pub(crate) async fn clocks(&self) -> Vec<super::guards::NodeLook<(u64, tokio::time::Instant)>> {
        join_all(self.nodes.iter().map(|node| node.clocks()))
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Looks at every node's marker (see `backend::data_loss`): a node that forgot its data
    /// is kept out of new grants for a while (see `acquire_lock`).
    pub(crate) async fn check_markers(&self) {
        join_all(self.nodes.iter().map(|node| node.check_marker())).await;
    }

    /// `nodes` are the single-node backends, each bounded by the per-node timeout.
    pub fn new(nodes: Vec<RedisBackend>) -> Self {
        Self {
            nodes: nodes.into_iter().map(Arc::new).collect(),
        }
    }

    fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    /// What inspect sees, and whether the grant seen has its final fence (see
    /// [`Backend::inspect_settled`]).
    pub(crate) async fn inspect_settled(
        &self,
        name: &str,
    ) -> Result<(Option<Inspection>, bool), BackendError> {
        Ok(match self.majority_view(name).await? {
            Some(view) => {
                let settled = view.settled;
                (Some(view.known_fence()?), settled)
            }
            None => (None, true),
        })
    }

    /// Every node's acquire answers within its timeout, and the raising of the fences that
    /// follows within another (see `Backend::fence_settles_within`).
    pub(crate) fn fence_settles_within(&self) -> Duration {
        self.nodes
            .iter()
            .map(|node| node.timeout() * 2)
            .max()
            .unwrap_or_default()
    }

    fn unavailable(&self, what: &str, answered: usize) -> BackendError {
        BackendError::Unavailable(format!(
            "redlock: {what}: {answered} of {} nodes answered, {} needed",
            self.nodes.len(),
            self.quorum()
        ))
    }

    /// Withdraws the grant `withdrawal` names on the nodes at `indices`, best effort. A grant
    /// that `never_held` a majority goes without a message to the name's waiters (see
    /// [`RedisBackend::withdraw_lock_telling`]).
    async fn withdraw_on(
        &self,
        indices: impl IntoIterator<Item = usize>,
        name: &str,
        withdrawal: Withdrawal<'_>,
        never_held: bool,
    ) {
        let withdrawals = indices
            .into_iter()
            .filter_map(|i| self.nodes.get(i))
            .map(|n| n.withdraw_lock_telling(name, withdrawal, !never_held));
        for outcome in join_all(withdrawals).await {
            if let Err(err) = outcome {
                tracing::warn!(lock = name, error = %err, "redlock: could not withdraw a partial grant; it expires at its ttl");
            }
        }
    }

    /// Gives the chosen fence to every granting node that issued another one. Returns how many
    /// nodes hold `<stem>.<fence>` afterwards.
    async fn finalize(
        &self,
        name: &str,
        stem: &str,
        fence: u64,
        holders: &[(usize, Lease)],
    ) -> usize {
        let already = holders.iter().filter(|(_, l)| l.fence == fence).count();
        let pending: Vec<usize> = holders
            .iter()
            .filter(|(_, l)| l.fence != fence)
            .map(|(i, _)| *i)
            .collect();
        let finalized = join_all(
            pending
                .iter()
                .map(|i| self.nodes[*i].finalize(name, stem, fence)),
        )
        .await;
        already
            + finalized
                .into_iter()
                .filter(|r| matches!(r, Ok(true)))
                .count()
    }
}

impl RedlockBackend {
    /// Finalizes the grant, in the background, on the nodes that did not answer its acquire in
    /// time: one may run the acquire late, giving the grant a copy with a fence of its own,
    /// nobody's. The finalization goes on the node's command connection, the one the acquire
    /// went on (unless it asked for replicas: a `WAIT` connection, where the order is not
    /// promised), so it runs after it there and the late copy takes the holder's token and
    /// fence, and the node's counter is lifted to it. Without it, that copy
    /// would show its fence whenever a finalized copy does not answer (see [`GrantFence`]),
    /// and refuse the holder's release and renewals until it expires.
    fn finalize_late_nodes(&self, answers: &[Answer], name: &str, stem: &str, fence: u64) {
        let late: Vec<Arc<RedisBackend>> = answers
            .iter()
            .zip(&self.nodes)
            .filter(|(answer, _)| matches!(answer, Answer::Failed))
            .map(|(_, node)| node.clone())
            .collect();
        if late.is_empty() {
            return;
        }
        let (name, stem) = (name.to_owned(), stem.to_owned());
        tokio::spawn(async move {
            // Best effort: a node that does not hold a copy has nothing to finalize, and a
            // copy left unfinalized expires at its ttl.
            join_all(late.iter().map(|node| node.finalize(&name, &stem, fence))).await;
        });
    }
}

/// What tells one grant's copies on the nodes apart from other grants: the digest of its
/// token's stem, or, for a token no lockgate wrote (no stem to read), its fence.
#[derive(Debug, Hash, PartialEq, Eq)]
enum GrantKey {
    Stem(u64),
    Fence(Option<u64>),
}

/// What a majority of the nodes holds for a name.
#[derive(Debug)]
struct MajorityView {
    /// The grant, with its fence when the copies tell it (see [`GrantFence`]).
    seen: Inspection,
    /// The lowest index of the nodes that hold it.
    lowest: usize,
    fence: GrantFence,
    /// Whether every node holds it, with one fence: its fence is final and seen everywhere.
    settled: bool,
}

impl MajorityView {
    /// The grant seen, once its fence is told; unavailable while it is open (see
    /// [`GrantFence::Open`]): showing the highest copy's could show a fence nobody holds.
    fn known_fence(self) -> Result<Inspection, BackendError> {
        if self.fence == GrantFence::Open {
            return Err(BackendError::Unavailable(
                "redlock: the copies of the grant differ in their fences, and not every node \
                 holds one"
                    .into(),
            ));
        }
        Ok(self.seen)
    }
}

impl RedlockBackend {
    /// What a majority of nodes holds for `name`; `None` when no grant can have a majority.
    /// An error when the nodes that answered leave it open.
    async fn majority_view(&self, name: &str) -> Result<Option<MajorityView>, BackendError> {
        let outcomes = join_all(self.nodes.iter().map(|n| n.inspect_grant(name))).await;
        let unanswered = outcomes.iter().filter(|o| o.is_err()).count();
        // Each grant with what the nodes that hold it saw. A grant is told apart by the digest
        // of its token's stem, the same on every node, not by its fence: each node gives it a
        // fence of its own, and the gateway raises them all to the highest just after (see
        // `acquire_lock`), so a look in between sees a majority whose fences differ. Which
        // fence is the grant's is `GrantFence`'s question: a node that missed the grant's
        // deadline may run its script later, with a fence of its own that nobody was given
        // (found by the simulation, seeds 8 and 1733).
        let mut grants: HashMap<GrantKey, Vec<(usize, Inspection)>> = HashMap::new();
        for (index, outcome) in outcomes.into_iter().enumerate() {
            if let Ok(Some((seen, grant))) = outcome {
                let key = match grant {
                    Some(stem) => GrantKey::Stem(stem),
                    None => GrantKey::Fence(seen.fence),
                };
                grants.entry(key).or_default().push((index, seen));
            }
        }
        let quorum = self.quorum();
        if let Some(copies) = grants.values().find(|seen| seen.len() >= quorum) {
            let fences: Vec<Option<u64>> = copies.iter().map(|(_, s)| s.fence).collect();
            let fence = GrantFence::of(&fences, quorum, self.nodes.len());
            let seen = Inspection {
                ttl: copies.iter().map(|(_, s)| s.ttl).min().flatten(),
                fence: match fence {
                    GrantFence::Final(fence) | GrantFence::Finalizing(fence) => fence,
                    GrantFence::Open => None,
                },
                // Every node of the grant was given the same holder; one that lost its record
                // (it expired a moment earlier) does not hide it.
                holder: copies.iter().find_map(|(_, s)| s.holder.clone()),
                shared: false,
                // Redlock keeps no reentrant lock, and no fair queue.
                holds: None,
                queued: 0,
                queue: Vec::new(),
            };
            let settled =
                copies.len() == self.nodes.len() && fences.iter().all(|f| *f == seen.fence);
            return Ok(Some(MajorityView {
                seen,
                lowest: copies[0].0,
                fence,
                settled,
            }));
        }
        // "Not held" only when no grant could have a majority, whatever the silent nodes hold.
        let could_be_held = grants
            .values()
            .any(|seen| seen.len() + unanswered >= quorum);
        if could_be_held || unanswered >= quorum {
            return Err(self.unavailable(
                "inspect has no majority answer",
                self.nodes.len() - unanswered,
            ));
        }
        Ok(None)
    }
}

/// A listing walks every node; a lock held by a majority is found on each node of it, and
/// listed only where it is found on the lowest of them, so once.
impl Walk for RedlockBackend {
    type Found = Inspection;

    async fn scan(&self, node: usize, cursor: u64, prefix: &str) -> Scanned {
        match self.nodes.get(node) {
            Some(backend) => backend.scan(0, cursor, prefix).await,
            None => Ok(None),
        }
    }

    async fn look(&self, node: usize, names: Vec<String>) -> Looked<Inspection> {
        let views = join_all(names.iter().map(|name| self.majority_view(name))).await;
        listing::kept(names, views, |view| {
            // A grant whose fence is open is listed without one: one name's passing doubt
            // does not fail the page.
            view.and_then(|view| (view.lowest == node).then_some(view.seen))
        })
    }
}

impl RedlockBackend {
    async fn acquire_lock(
        &self,
        name: &str,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        let (stem, ttl) = (attempt.stem, attempt.ttl());
        // A node that forgot its data is kept out of new grants for the longest lease it may
        // have forgotten (see `backend::data_loss`): it would grant again the locks it forgot,
        // and with another node failing that could make a second majority. Without it, every
        // majority that grants shares a node with every majority granted before the loss.
        let acquires = self.nodes.iter().map(|n| async move {
            match n.data_loss_hold_back(name) {
                Some(_) => None,
                None => Some(n.acquire_lock(name, attempt).await),
            }
        });
        let answers: Vec<Answer> = join_all(acquires)
            .await
            .into_iter()
            .map(|outcome| match outcome {
                None => Answer::KeptOut,
                Some(Ok(AcquireOutcome::Granted(lease))) => Answer::Granted(lease),
                Some(Ok(AcquireOutcome::AlreadyHeld(lease))) => Answer::Replayed(lease),
                Some(Ok(AcquireOutcome::Held { ttl })) => Answer::Held(ttl),
                Some(Ok(AcquireOutcome::KeyReused)) => Answer::KeyReused,
                // A lock's acquire never answers this.
                Some(Ok(AcquireOutcome::Overtakable { ttl })) => Answer::Held(ttl),
                // Nor this: no attempt of a Redlock takes a place in a queue.
                Some(Ok(AcquireOutcome::LimitDiffers { .. } | AcquireOutcome::Queued { .. }))
                | Some(Err(_)) => Answer::Failed,
            })
            .collect();
        let holders: Vec<(usize, Lease)> = answers
            .iter()
            .enumerate()
            .filter_map(|(i, answer)| match *answer {
                Answer::Granted(lease) | Answer::Replayed(lease) => Some((i, lease)),
                _ => None,
            })
            .collect();
        // Nodes that may hold a grant of this stem: those that said so, and those that did not
        // answer (the script may have run).
        let maybe_ours = || {
            answers
                .iter()
                .enumerate()
                .filter(|(_, a)| {
                    !matches!(a, Answer::Held(_) | Answer::KeyReused | Answer::KeptOut)
                })
                .map(|(i, _)| i)
        };
        // One node holding the name with the key's other kind of grant refuses the attempt:
        // what it took elsewhere is given back (a majority of the other kind may have expired
        // on some nodes only; the key never holds the name both ways).
        if answers.iter().any(|a| matches!(a, Answer::KeyReused)) {
            self.withdraw_on(maybe_ours(), name, attempt.withdrawal(), true)
                .await;
            return Ok(AcquireOutcome::KeyReused);
        }
        if holders.len() < self.quorum() {
            self.withdraw_on(maybe_ours(), name, attempt.withdrawal(), true)
                .await;
            let held: Vec<Option<Duration>> = answers
                .iter()
                .filter_map(|a| match *a {
                    Answer::Held(ttl) => Some(ttl),
                    _ => None,
                })
                .collect();
            if held.is_empty() {
                return Err(may_have_run(
                    &answers,
                    format!(
                        "redlock: {} of {} nodes granted, {} needed",
                        holders.len(),
                        self.nodes.len(),
                        self.quorum()
                    ),
                ));
            }
            return Ok(AcquireOutcome::Held {
                ttl: retry_after(held, holders.len(), self.quorum()),
            });
        }
        let replays: Vec<u64> = answers
            .iter()
            .filter_map(|a| match a {
                Answer::Replayed(lease) => Some(lease.fence),
                _ => None,
            })
            .collect();
        // An idempotent retry keeps the fence (and so the token) it found on a majority.
        let replayed = replays.len() >= self.quorum();
        let fence = if replayed {
            replays.iter().copied().max()
        } else {
            holders.iter().map(|(_, lease)| lease.fence).max()
        }
        .unwrap_or(0);
        if self.finalize(name, stem, fence, &holders).await < self.quorum() {
            // A majority held it: its waiters are told it went.
            self.withdraw_on(maybe_ours(), name, attempt.withdrawal(), false)
                .await;
            return Err(BackendError::NoReply(
                "redlock: could not give a majority of nodes the grant's fence".into(),
            ));
        }
        self.finalize_late_nodes(&answers, name, stem, fence);
        let shortest = holders
            .iter()
            .map(|(_, lease)| lease.ttl)
            .min()
            .unwrap_or(Duration::ZERO);
        let lease = Lease {
            fence,
            ttl: shortest.saturating_sub(drift(ttl)),
            replicas_acked: holders
                .iter()
                .filter_map(|(_, lease)| lease.replicas_acked)
                .min(),
        };
        Ok(if replayed {
            AcquireOutcome::AlreadyHeld(lease)
        } else {
            AcquireOutcome::Granted(lease)
        })
    }

    async fn release_lock(&self, name: &str, token: &str) -> Result<ReleaseOutcome, BackendError> {
        let outcomes: Vec<Option<ReleaseOutcome>> =
            join_all(self.nodes.iter().map(|n| n.release_lock(name, token)))
                .await
                .into_iter()
                .map(Result::ok)
                .collect();
        release_verdict(&outcomes, self.quorum()).ok_or_else(|| {
            self.unavailable(
                "release has no majority answer",
                outcomes.iter().flatten().count(),
            )
        })
    }

    async fn withdraw_lock(
        &self,
        name: &str,
        withdrawal: Withdrawal<'_>,
    ) -> Result<bool, BackendError> {
        let withdrawals = self.nodes.iter().map(|n| n.withdraw_lock(name, withdrawal));
        let outcomes = join_all(withdrawals).await;
        if outcomes.iter().all(Result::is_err) {
            return Err(self.unavailable("withdrawal", 0));
        }
        Ok(outcomes.into_iter().any(|o| o == Ok(true)))
    }

    async fn renew_lock(
        &self,
        name: &str,
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        if renewal.one_more_hold {
            // No quorum rule for a hold count kept per node (see `Backend::offers_reentrant`).
            return Err(not_offered_here("reentrant lock"));
        }
        let RenewAttempt { token, ttl, .. } = renewal;
        let renewals = self.nodes.iter().map(|n| n.renew_lock(name, renewal));
        let outcomes = join_all(renewals).await;
        let mut renewed = Vec::new();
        let (mut not_held, mut not_owner) = (0, 0);
        for (index, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Ok(RenewOutcome::Renewed(lease)) => renewed.push((index, lease)),
                Ok(RenewOutcome::NotOwner) => not_owner += 1,
                // A node that forgot its data (held back from new grants for as long as a
                // lease it forgot may run) says nothing of this one: with its "not held"
                // counted, a lock left on a minority after the loss would be released here
                // while its holder's validity runs, and granted again (found by the
                // simulation). It counts as a node that did not answer.
                Ok(RenewOutcome::NotHeld)
                    if self.nodes[index].data_loss_hold_back(name).is_some() => {}
                Ok(RenewOutcome::NotHeld) => not_held += 1,
                // Never asked of a node (above).
                Ok(RenewOutcome::Reentered { .. }) | Err(_) => {}
            }
        }
        if renewed.len() >= self.quorum() {
            let lease = Lease {
                fence: renewed
                    .iter()
                    .map(|(_, lease)| lease.fence)
                    .max()
                    .unwrap_or(0),
                ttl: renewed
                    .iter()
                    .map(|(_, lease)| lease.ttl)
                    .min()
                    .unwrap_or(Duration::ZERO)
                    .saturating_sub(drift(ttl)),
                replicas_acked: renewed
                    .iter()
                    .filter_map(|(_, lease)| lease.replicas_acked)
                    .min(),
            };
            return Ok(RenewOutcome::Renewed(lease));
        }
        if not_held + not_owner < self.quorum() {
            // Nodes did not answer: the lock may still be held on a majority. Undo nothing.
            return Err(self.unavailable(
                "renewal has no majority answer",
                renewed.len() + not_held + not_owner,
            ));
        }
        // A majority says the token does not hold the lock: the minority renewals are no lock,
        // only keys in the way of the next holder.
        let releases = renewed
            .iter()
            .map(|(i, _)| self.nodes[*i].release_lock(name, token));
        for outcome in join_all(releases).await {
            if let Err(err) = outcome {
                tracing::warn!(lock = name, error = %err, "redlock: could not release a minority renewal; it expires at its ttl");
            }
        }
        Ok(if not_owner >= self.quorum() {
            RenewOutcome::NotOwner
        } else {
            RenewOutcome::NotHeld
        })
    }
}

/// The name of a lock; for any other kind, the error that Redlock keeps locks only (see
/// [`super::Backend::offers`]: the other kinds never reach it, as the lease engine checks
/// first).
fn lock_name(leased: Leased<'_>) -> Result<&str, BackendError> {
    match leased {
        Leased::Lock(name) => Ok(name.as_str()),
        _ => Err(not_offered_here(leased.kind())),
    }
}

fn not_offered_here(kind: &str) -> BackendError {
    BackendError::Config(format!("{kind} leases are not offered in Redlock mode"))
}

impl LeaseStore for RedlockBackend {
    async fn acquire(
        &self,
        leased: Leased<'_>,
        attempt: GrantAttempt<'_>,
    ) -> Result<AcquireOutcome, BackendError> {
        self.acquire_lock(lock_name(leased)?, attempt).await
    }

    async fn renew(
        &self,
        leased: Leased<'_>,
        renewal: RenewAttempt<'_>,
    ) -> Result<RenewOutcome, BackendError> {
        self.renew_lock(lock_name(leased)?, renewal).await
    }

    async fn release(
        &self,
        leased: Leased<'_>,
        token: &str,
    ) -> Result<ReleaseOutcome, BackendError> {
        self.release_lock(lock_name(leased)?, token).await
    }

    async fn withdraw(
        &self,
        leased: Leased<'_>,
        withdrawal: Withdrawal<'_>,
    ) -> Result<bool, BackendError> {
        self.withdraw_lock(lock_name(leased)?, withdrawal).await
    }

    async fn watch(&self, what: Watched<'_>) -> ReleaseFeed {
        match what {
            // A release on any node may have freed a majority, a grant on any node may
            // complete one: wake the waiter, look again.
            Watched::Releases(Leased::Lock(_)) | Watched::Grants(_) => {
                ReleaseFeed::merged(join_all(self.nodes.iter().map(|n| n.watch(what))).await)
            }
            // Nobody waits for what is never granted, nor in a line never kept (see
            // `Backend::offers_fair`).
            _ => ReleaseFeed::silent(),
        }
    }

    fn sees_every_release(&self, leased: Leased<'_>) -> bool {
        self.nodes.iter().all(|n| n.sees_every_release(leased))
    }

    /// No fair queue (see `Backend::offers_fair`): no line to leave.
    async fn leave(&self, _: Leased<'_>, _: u64) -> Result<(), BackendError> {
        Ok(())
    }

    async fn inspect_grants(&self, of: GrantsOf, _: &str) -> Result<Grants, BackendError> {
        Err(not_offered_here(of.label))
    }

    /// No shared grants on Redlock (see `Backend::offers`): nothing to keep out.
    async fn hold_off(&self, _: Leased<'_>, _: Option<Duration>) -> Result<(), BackendError> {
        Ok(())
    }

    async fn revoke(
        &self,
        leased: Leased<'_>,
        beside: Option<GrantsOf>,
    ) -> Result<bool, BackendError> {
        if let Leased::Grant(of, ..) = leased {
            return Err(not_offered_here(of.label));
        }
        let outcomes = join_all(self.nodes.iter().map(|n| n.revoke(leased, beside))).await;
        let answered = outcomes.iter().filter(|o| o.is_ok()).count();
        if answered < self.quorum() {
            return Err(self.unavailable("revoke has no majority answer", answered));
        }
        Ok(outcomes.into_iter().any(|o| o == Ok(true)))
    }

    async fn revoked_fence(&self, name: &str) -> Result<Option<u64>, BackendError> {
        let outcomes = join_all(self.nodes.iter().map(|n| n.revoked_fence(name))).await;
        if outcomes.iter().all(Result::is_err) {
            return Err(self.unavailable("revocation check", 0));
        }
        Ok(outcomes.into_iter().filter_map(|o| o.ok().flatten()).max())
    }

    async fn was_revoked(&self, leased: Leased<'_>, token: &str) -> Result<bool, BackendError> {
        let outcomes = join_all(self.nodes.iter().map(|n| n.was_revoked(leased, token))).await;
        if outcomes.iter().all(Result::is_err) {
            return Err(self.unavailable("revocation check", 0));
        }
        Ok(outcomes.into_iter().any(|o| o == Ok(true)))
    }

    async fn inspect(&self, name: &str) -> Result<Option<Inspection>, BackendError> {
        self.majority_view(name)
            .await?
            .map(MajorityView::known_fence)
            .transpose()
    }

    async fn list(&self, request: PageRequest<'_>) -> Result<ListPage, BackendError> {
        listing::page(self, request).await
    }

    /// Grants held at once are not offered on Redlock (see `Backend::offers`): nothing to
    /// list.
    async fn list_grants(
        &self,
        _: GrantsOf,
        _: PageRequest<'_>,
    ) -> Result<GrantPage, BackendError> {
        Ok(GrantPage::default())
    }

    async fn ping(&self) -> Result<(), BackendError> {
        let answered = join_all(self.nodes.iter().map(|node| node.ping()))
            .await
            .into_iter()
            .filter(Result::is_ok)
            .count();
        if answered >= self.quorum() {
            Ok(())
        } else {
            Err(self.unavailable("ping", answered))
        }
    }

    async fn watch_grants_under(&self, prefix: &str) -> Result<GrantedNames, BackendError> {
        let watched = join_all(self.nodes.iter().map(|n| n.watch_grants_under(prefix))).await;
        Ok(GrantedNames::merged(
            watched.into_iter().collect::<Result<_, _>>()?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn drift_is_one_percent_plus_two_milliseconds() {
        assert_eq!(drift(Duration::from_secs(10)), 102 * MS);
        assert_eq!(drift(Duration::from_millis(100)), 3 * MS);
    }

    #[test]
    fn a_grants_fence_is_its_majoritys_then_while_on_every_node_its_highest() {
        let of = |fences: &[Option<u64>]| GrantFence::of(fences, 2, 3);
        // Finalized, with a late copy that issued its own fence after the holder was answered.
        assert_eq!(of(&[Some(7), Some(7), Some(9)]), GrantFence::Final(Some(7)));
        assert_eq!(of(&[Some(7), Some(7)]), GrantFence::Final(Some(7)));
        // Finalizing on every node: the copies are raised to the highest.
        assert_eq!(
            of(&[Some(5), Some(8), Some(6)]),
            GrantFence::Finalizing(Some(8))
        );
        // Two copies that differ, the third node silent: finalizing (8 is the holder's), or a
        // finalized copy (5) beside a late one (8) with the other finalized copy silent.
        assert_eq!(of(&[Some(5), Some(8)]), GrantFence::Open);
        // Tokens no lockgate wrote carry no fence.
        assert_eq!(of(&[None, None]), GrantFence::Final(None));
    }

    #[test]
    fn a_release_needs_a_majority_verdict() {
        use ReleaseOutcome::{NotHeld, NotOwner, Released};
        let verdict = |outcomes: &[Option<ReleaseOutcome>]| release_verdict(outcomes, 2);
        assert_eq!(
            verdict(&[Some(Released), Some(Released), None]),
            Some(Released)
        );
        assert_eq!(
            verdict(&[Some(NotOwner), Some(NotOwner), Some(Released)]),
            Some(NotOwner)
        );
        assert_eq!(
            verdict(&[Some(NotHeld), Some(NotOwner), Some(Released)]),
            Some(NotHeld)
        );
        assert_eq!(
            verdict(&[Some(NotHeld), Some(NotHeld), None]),
            Some(NotHeld)
        );
        // The case that used to answer 404: nothing is known for sure.
        assert_eq!(verdict(&[Some(Released), Some(NotOwner), None]), None);
        assert_eq!(verdict(&[Some(Released), None, None]), None);
    }

    #[test]
    fn retry_after_waits_for_enough_nodes_to_free_up() {
        let held = vec![Some(300 * MS), Some(100 * MS), Some(200 * MS)];
        // Nothing free, quorum 2 of 3: the second-earliest expiry.
        assert_eq!(retry_after(held.clone(), 0, 2), Some(200 * MS));
        // One free already: the earliest.
        assert_eq!(retry_after(held, 1, 2), Some(100 * MS));
        // A key without expiry counts last.
        assert_eq!(retry_after(vec![None, Some(5 * MS)], 0, 2), None);
    }
}
