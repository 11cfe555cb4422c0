//! Redlock: one lock over N independent Redis masters (N odd, 3 or more), held while a majority
//! holds it.
//!
//! Each operation runs the single-node script on every node in parallel, each bounded by the
//! per-node timeout, so a node that is down or frozen costs at most that timeout, never the
//! request's. Then:
//!
//! * **acquire** succeeds when a majority granted. The validity the gateway promises is the
//!   smallest ttl a granting node reported, less the clock drift allowance
//!   (0.01 × ttl + 2 ms), less the time the whole round took (subtracted by the `lock` layer,
//!   which counts from before the first request left). Without a majority every partial grant
//!   is released at once.
//! * **fence**: each granting node issues its own; the grant carries the largest, and before
//!   answering the gateway raises every granting node's counter to it. Any later majority
//!   shares a node with this one, so its fence is larger. If a counter cannot be raised the
//!   grant is undone and reported as unavailable, since the next fence could otherwise go
//!   backwards.
//! * **release** and **renew** act on every node and succeed when a majority did. A renewal
//!   that reaches only a minority is no lock at all: those renewals are released.
//! * **inspect** reports the lock held when a majority holds it.
//!
//! Clocks: Redlock assumes the nodes' clocks run at about the same rate (the drift allowance
//! covers 1%), not that they agree; fences additionally assume no node's wall clock steps back
//! across a lost counter (see `fence`).

use std::time::Duration;

use futures_util::future::join_all;
use tokio::sync::watch;

use super::AbortOnDrop;
use super::redis::RedisBackend;
use super::{
    AcquireOutcome, BackendError, Inspection, Lease, LockBackend, ReleaseFeed, ReleaseOutcome,
    RenewOutcome, ReplicaAck,
};

#[derive(Debug)]
pub struct RedlockBackend {
    nodes: Vec<RedisBackend>,
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

impl RedlockBackend {
    /// `nodes` are the single-node backends, each bounded by the per-node timeout.
    pub fn new(nodes: Vec<RedisBackend>) -> Self {
        Self { nodes }
    }

    fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    /// Releases `token`'s keys on the nodes at `indices`, best effort.
    async fn release_on(&self, indices: impl IntoIterator<Item = usize>, name: &str, token: &str) {
        let releases = indices
            .into_iter()
            .filter_map(|i| self.nodes.get(i))
            .map(|n| n.release(name, token));
        for outcome in join_all(releases).await {
            if let Err(err) = outcome {
                tracing::warn!(lock = name, error = %err, "redlock: could not release a partial grant; it expires at its ttl");
            }
        }
    }
}

impl LockBackend for RedlockBackend {
    async fn acquire(
        &self,
        name: &str,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<AcquireOutcome, BackendError> {
        let outcomes = join_all(self.nodes.iter().map(|n| n.acquire(name, token, ttl, ack))).await;
        let mut granted = Vec::new();
        let mut all_replays = true;
        let mut held = Vec::new();
        for (index, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Ok(AcquireOutcome::Granted(lease)) => {
                    all_replays = false;
                    granted.push((index, lease));
                }
                Ok(AcquireOutcome::AlreadyHeld(lease)) => granted.push((index, lease)),
                Ok(AcquireOutcome::Held { ttl }) => held.push(ttl),
                Err(_) => {}
            }
        }
        if granted.len() < self.quorum() {
            let free = granted.len();
            self.release_on(granted.iter().map(|(i, _)| *i), name, token)
                .await;
            if held.is_empty() {
                return Err(BackendError::Unavailable(format!(
                    "redlock: {free} of {} nodes granted, {} needed",
                    self.nodes.len(),
                    self.quorum()
                )));
            }
            return Ok(AcquireOutcome::Held {
                ttl: retry_after(held, free, self.quorum()),
            });
        }
        let fence = granted
            .iter()
            .map(|(_, lease)| lease.fence)
            .max()
            .unwrap_or(0);
        let raised = join_all(
            granted
                .iter()
                .map(|(i, _)| self.nodes[*i].raise_fence(name, fence)),
        )
        .await;
        if let Some(Err(err)) = raised.into_iter().find(Result::is_err) {
            self.release_on(granted.iter().map(|(i, _)| *i), name, token)
                .await;
            return Err(BackendError::Unavailable(format!(
                "redlock: could not raise the fence on a granting node: {err}"
            )));
        }
        let shortest = granted
            .iter()
            .map(|(_, lease)| lease.ttl)
            .min()
            .unwrap_or(Duration::ZERO);
        let lease = Lease {
            fence,
            ttl: shortest.saturating_sub(drift(ttl)),
            replicas_acked: granted
                .iter()
                .filter_map(|(_, lease)| lease.replicas_acked)
                .min(),
        };
        Ok(if all_replays {
            AcquireOutcome::AlreadyHeld(lease)
        } else {
            AcquireOutcome::Granted(lease)
        })
    }

    async fn release(&self, name: &str, token: &str) -> Result<ReleaseOutcome, BackendError> {
        let outcomes = join_all(self.nodes.iter().map(|n| n.release(name, token))).await;
        let count = |wanted: ReleaseOutcome| {
            outcomes
                .iter()
                .filter(|o| matches!(o, Ok(x) if *x == wanted))
                .count()
        };
        let answered = outcomes.iter().filter(|o| o.is_ok()).count();
        if count(ReleaseOutcome::Released) >= self.quorum() {
            Ok(ReleaseOutcome::Released)
        } else if count(ReleaseOutcome::NotOwner) >= self.quorum() {
            Ok(ReleaseOutcome::NotOwner)
        } else if answered >= self.quorum() {
            Ok(ReleaseOutcome::NotHeld)
        } else {
            Err(BackendError::Unavailable(format!(
                "redlock: {answered} of {} nodes answered",
                self.nodes.len()
            )))
        }
    }

    async fn renew(
        &self,
        name: &str,
        token: &str,
        ttl: Duration,
        ack: Option<ReplicaAck>,
    ) -> Result<RenewOutcome, BackendError> {
        let outcomes = join_all(self.nodes.iter().map(|n| n.renew(name, token, ttl, ack))).await;
        let mut renewed = Vec::new();
        let (mut not_owner, mut answered) = (0, 0);
        for (index, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Ok(RenewOutcome::Renewed(lease)) => renewed.push((index, lease)),
                Ok(RenewOutcome::NotOwner) => not_owner += 1,
                Ok(RenewOutcome::NotHeld) => {}
                Err(_) => continue,
            }
            answered += 1;
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
        // A minority still renewed: no lock, only keys in the way of the next holder.
        self.release_on(renewed.iter().map(|(i, _)| *i), name, token)
            .await;
        if not_owner >= self.quorum() {
            Ok(RenewOutcome::NotOwner)
        } else if answered >= self.quorum() {
            Ok(RenewOutcome::NotHeld)
        } else {
            Err(BackendError::Unavailable(format!(
                "redlock: {answered} of {} nodes answered",
                self.nodes.len()
            )))
        }
    }

    async fn inspect(&self, name: &str) -> Result<Option<Inspection>, BackendError> {
        let outcomes = join_all(self.nodes.iter().map(|n| n.inspect(name))).await;
        let answered = outcomes.iter().filter(|o| o.is_ok()).count();
        if answered < self.quorum() {
            return Err(BackendError::Unavailable(format!(
                "redlock: {answered} of {} nodes answered",
                self.nodes.len()
            )));
        }
        let held: Vec<Inspection> = outcomes
            .into_iter()
            .filter_map(|o| o.ok().flatten())
            .collect();
        if held.len() < self.quorum() {
            return Ok(None);
        }
        Ok(Some(Inspection {
            ttl: held.iter().map(|seen| seen.ttl).min().flatten(),
            fence: held.iter().filter_map(|seen| seen.fence).max(),
        }))
    }

    async fn ping(&self) -> Result<(), BackendError> {
        let answered = join_all(self.nodes.iter().map(RedisBackend::ping))
            .await
            .into_iter()
            .filter(Result::is_ok)
            .count();
        if answered >= self.quorum() {
            Ok(())
        } else {
            Err(BackendError::Unavailable(format!(
                "redlock: {answered} of {} nodes answer",
                self.nodes.len()
            )))
        }
    }

    async fn watch_releases(&self, name: &str) -> ReleaseFeed {
        let feeds = join_all(self.nodes.iter().map(|n| n.watch_releases(name))).await;
        let (tx, rx) = watch::channel(());
        let mut receivers: Vec<_> = feeds.iter().map(ReleaseFeed::receiver).collect();
        // A release on any node may have freed a majority: wake the waiter.
        let merge = tokio::spawn(async move {
            loop {
                let changes = receivers.iter_mut().map(|r| Box::pin(r.changed()));
                let (changed, _, _) = futures_util::future::select_all(changes).await;
                if changed.is_err() || tx.send(()).is_err() {
                    return;
                }
            }
        });
        ReleaseFeed::new(
            rx,
            Merged {
                _feeds: feeds,
                merge: AbortOnDrop(merge),
            },
        )
    }
}

/// The node feeds behind a merged feed, and the task merging them.
#[derive(Debug)]
struct Merged {
    _feeds: Vec<ReleaseFeed>,
    #[allow(dead_code)] // Held for its Drop.
    merge: AbortOnDrop,
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
