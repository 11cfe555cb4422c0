//! The clients of the worlds of the other kinds of lease: semaphores, multi-locks and Redlock's
//! exclusive locks. The same
//! life as a lock's client (`clients.rs`): acquire (some waiting, some with a bounded hold, half
//! with an `Idempotency-Key` sent again after a 503 or a hang-up, some hung up on), hold (now
//! and then past the lease), look, renew, release or let the lease run out, and now and then a
//! release or renewal with a token never given. A multi-lock's every operation is recorded once
//! per name of its set, as the fault suite records it (`support::workload`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::Method;
use lockgate::http::App;
use serde_json::json;

use super::clients::{Acquire, BoundedHold, acquire, answered, send};
use crate::support::history::{Call, History, Outcome};
use crate::support::rng::Rng;
use crate::support::workload::Expect;

/// The permits of every semaphore of a semaphores' world.
pub const PERMITS: u64 = 2;

/// The kind of lease a world's clients take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Exclusive, shared (read/write) and fair locks of `a` and `b` (`clients.rs`).
    Locks,
    /// Semaphores `s1` and `s2`, of [`PERMITS`] permits each.
    Semaphores,
    /// Multi-locks: two of `a`, `b` and `c` at once.
    MultiLocks,
    /// Exclusive locks of `a` and `b` kept by Redlock over three simulated nodes (the one kind
    /// Redlock offers).
    Redlock,
    /// Locks of `a` and `b` held by hold streams and reentrant locks (`holds.rs`).
    Holds,
    /// The locks' world, whose Redis clock the nemesis also steps forward.
    ForwardSteps,
    /// The locks' world over a Sentinel group (a master, its replica, two Sentinels) that
    /// the nemesis fails over (`failover.rs`), a third of the clients requiring `WAIT`.
    Failover,
}

impl Kind {
    /// Its name in messages and history files.
    pub fn label(self) -> &'static str {
        match self {
            Self::Locks => "locks",
            Self::Semaphores => "semaphores",
            Self::MultiLocks => "multi-locks",
            Self::Redlock => "redlock",
            Self::Holds => "holds",
            Self::ForwardSteps => "forward-steps",
            Self::Failover => "failover",
        }
    }

    /// Its fixed set's test (a failing seed's replay line names it).
    pub fn test(self) -> &'static str {
        match self {
            Self::Locks => "gateways_over_a_simulated_redis_keep_the_lock_promise",
            Self::Semaphores => "semaphores_over_a_simulated_redis_keep_their_promise",
            Self::MultiLocks => "multi_locks_over_a_simulated_redis_keep_their_promise",
            Self::Redlock => "redlock_over_three_simulated_nodes_keeps_the_lock_promise",
            Self::Holds => {
                "hold_streams_and_reentrant_locks_over_a_simulated_redis_keep_their_promise"
            }
            Self::ForwardSteps => {
                "locks_over_a_redis_whose_clock_steps_forward_keep_the_documented_promise"
            }
            Self::Failover => "locks_over_a_sentinel_group_keep_the_promise_across_failovers",
        }
    }

    /// The names its clients take (each name's grants are judged together).
    pub fn names(self) -> &'static [&'static str] {
        match self {
            Self::Locks | Self::Redlock | Self::Holds | Self::ForwardSteps | Self::Failover => {
                &["a", "b"]
            }
            Self::Semaphores => &["s1", "s2"],
            Self::MultiLocks => &["a", "b", "c"],
        }
    }

    /// How many grants of one name may be valid at once.
    pub fn limit(self) -> usize {
        match self {
            Self::Semaphores => PERMITS as usize,
            Self::Locks
            | Self::MultiLocks
            | Self::Redlock
            | Self::Holds
            | Self::ForwardSteps
            | Self::Failover => 1,
        }
    }

    /// Where a grant of `names` is asked for, and the body that asks (with `fields`).
    pub fn acquire(
        self,
        names: &[&str],
        mut fields: serde_json::Value,
    ) -> (String, serde_json::Value) {
        match self {
            Self::Locks | Self::Redlock | Self::Holds | Self::ForwardSteps | Self::Failover => {
                (format!("/locks/{}", names[0]), fields)
            }
            Self::Semaphores => {
                fields["permits"] = json!(PERMITS);
                (format!("/semaphores/{}", names[0]), fields)
            }
            Self::MultiLocks => {
                fields["names"] = json!(names);
                ("/locks".to_owned(), fields)
            }
        }
    }

    /// Where the grant of `names` is renewed and released.
    pub fn lease(self, names: &[&str]) -> String {
        match self {
            Self::Locks | Self::Redlock | Self::Holds | Self::ForwardSteps | Self::Failover => {
                format!("/locks/{}", names[0])
            }
            Self::Semaphores => format!("/semaphores/{}", names[0]),
            Self::MultiLocks => {
                let query: Vec<String> = names.iter().map(|name| format!("name={name}")).collect();
                format!("/locks?{}", query.join("&"))
            }
        }
    }

    /// Where one name of a grant is looked at, and how its answer is read by the holder of
    /// the grant with `fence`.
    fn inspect(self, name: &str, fence: u64) -> (String, Expect) {
        match self {
            Self::Semaphores => (format!("/semaphores/{name}"), Expect::Permit(fence)),
            Self::Locks
            | Self::MultiLocks
            | Self::Redlock
            | Self::Holds
            | Self::ForwardSteps
            | Self::Failover => (format!("/locks/{name}"), Expect::Inspection),
        }
    }

    /// The names of one acquire, picked by `rng`.
    fn pick(self, rng: &mut Rng) -> Vec<&'static str> {
        let names = self.names();
        match self {
            Self::Locks
            | Self::Semaphores
            | Self::Redlock
            | Self::Holds
            | Self::ForwardSteps
            | Self::Failover => {
                vec![names[rng.index(names.len())]]
            }
            Self::MultiLocks => {
                let first = rng.index(names.len());
                let second = (first + 1 + rng.index(names.len() - 1)) % names.len();
                let mut set = vec![names[first], names[second]];
                set.sort_unstable();
                set
            }
        }
    }
}

/// Records `outcome` of `call` once for each of `names`.
fn record(
    history: &History,
    client: usize,
    names: &[&str],
    call: &Call,
    invoke: u64,
    outcome: &Outcome,
) {
    for name in names {
        history.record(client, name, call.clone(), invoke, outcome.clone());
    }
}

/// A client of a semaphores', a multi-locks' or a Redlock world, until `until`.
pub async fn lease_steps(
    kind: Kind,
    client: usize,
    app: App,
    mut rng: Rng,
    history: Arc<History>,
    until: tokio::time::Instant,
    bounded: Arc<Mutex<Vec<BoundedHold>>>,
) {
    let mut keys = 0;
    while tokio::time::Instant::now() < until {
        let names = kind.pick(&mut rng);
        if rng.next(8) == 0 {
            forge(kind, client, &app, &mut rng, &history, &names).await;
            continue;
        }
        let ttl_ms = 200 + rng.next(1800);
        let wait_ms = if rng.next(3) == 0 { 0 } else { rng.next(1500) };
        let mut fields = json!({"ttl_ms": ttl_ms, "wait_ms": wait_ms});
        let max_hold_ms = (rng.next(4) == 0).then(|| ttl_ms + rng.next(2000));
        if let Some(max) = max_hold_ms {
            fields["max_hold_ms"] = json!(max);
        }
        let (path, body) = kind.acquire(&names, fields);
        let key = (rng.next(2) == 0).then(|| {
            keys += 1;
            format!("simulation-client-{client}-{keys:08}")
        });
        let patience = (rng.next(8) == 0).then(|| Duration::from_millis(rng.next(wait_ms + 200)));
        let sent = Acquire {
            path: &path,
            body: &body,
            key: key.as_deref(),
            patience,
            call: Call::Acquire {
                ttl_ms,
                wait_ms,
                shared: false,
            },
        };
        let outcome = acquire(&app, &mut rng, &history, client, &names, sent).await;
        let Outcome::Granted {
            token,
            fence,
            ttl_ms,
            ..
        } = outcome
        else {
            tokio::time::sleep(Duration::from_millis(rng.next(200))).await;
            continue;
        };
        BoundedHold::note(&bounded, &history, &token, max_hold_ms);
        tokio::time::sleep(Duration::from_millis(rng.next(ttl_ms * 3 / 2))).await;
        if rng.next(2) == 0 {
            for name in &names {
                let (path, expect) = kind.inspect(name, fence);
                let invoke = history.now_us();
                let sent = send(&app, Method::GET, &path, None, &[], None).await;
                let call = Call::Inspect {
                    token: token.clone(),
                };
                history.record(client, name, call, invoke, answered(sent, expect));
            }
        }
        let lease = kind.lease(&names);
        let headers = [("Lock-Token", Some(token.as_str()))];
        if rng.next(3) == 0 {
            let ttl_ms = 200 + rng.next(1800);
            let invoke = history.now_us();
            let body = json!({"ttl_ms": ttl_ms});
            let sent = send(&app, Method::PATCH, &lease, Some(&body), &headers, None).await;
            let call = Call::Renew {
                token: token.clone(),
                ttl_ms,
            };
            record(
                &history,
                client,
                &names,
                &call,
                invoke,
                &answered(sent, Expect::Renewal),
            );
        }
        if rng.next(4) != 0 {
            let invoke = history.now_us();
            let sent = send(&app, Method::DELETE, &lease, None, &headers, None).await;
            let call = Call::Release {
                token: token.clone(),
            };
            record(
                &history,
                client,
                &names,
                &call,
                invoke,
                &answered(sent, Expect::Release),
            );
        }
    }
}

/// A release or renewal of `names` with a token this client was never given: made up, of the
/// right shape, or with another stem. None may be accepted.
async fn forge(
    kind: Kind,
    client: usize,
    app: &App,
    rng: &mut Rng,
    history: &History,
    names: &[&str],
) {
    let forged = format!(
        "{}.{}",
        rng.text(
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
            22
        ),
        super::EPOCH_US as u64 + rng.next(10_000_000)
    );
    let renew = rng.next(2) == 0;
    let lease = kind.lease(names);
    let headers = [("Lock-Token", Some(forged.as_str()))];
    let invoke = history.now_us();
    let (call, outcome) = if renew {
        let body = json!({"ttl_ms": 500});
        let sent = send(app, Method::PATCH, &lease, Some(&body), &headers, None).await;
        let call = Call::Renew {
            token: forged.clone(),
            ttl_ms: 500,
        };
        (call, answered(sent, Expect::Renewal))
    } else {
        let sent = send(app, Method::DELETE, &lease, None, &headers, None).await;
        let call = Call::Release {
            token: forged.clone(),
        };
        (call, answered(sent, Expect::Release))
    };
    record(history, client, names, &call, invoke, &outcome);
}
