//! A history of lock operations, recorded by a concurrent workload and judged afterwards.
//!
//! Record first, judge after (as etcd's robustness tests and porcupine do): the workload only
//! writes down what each client sent (invoke time), what came back (completion time, status,
//! token, fence, ttl), and never decides anything while it runs. [`History::check`] then looks
//! at each name's operations as a whole:
//!
//! * **mutual exclusion**: no two grants whose validity windows overlap (for a semaphore,
//!   [`History::with_limit`]: never more than `limit` grants valid at once; for a read/write
//!   lock, shared grants may overlap each other, never an exclusive one). A grant is valid from
//!   when its answer was read until invoke time + the `ttl_ms` it returned (a renewal adds
//!   renew invoke + its `ttl_ms`, as does a reentrant lock's re-entry), and no longer once its
//!   holder sent the release (a reentrant lock's release answered with holds left does not end
//!   it). Counting from the invoke time is what a careful client does: the gateway's `ttl_ms`
//!   is what was left when the answer was built, which is later.
//! * **fences**: a grant that completed before another was sent has a smaller fence.
//! * **honest refusals**: a release, renew or re-entry by the holder answered 404/409 before the
//!   holder's validity ended means the lock vanished while it was promised.
//! * **vanished grants**: holders inspect their lock before releasing; a 404, or another
//!   fence, seen entirely within the holder's validity means the same.
//! * **status codes**: every 5xx is a 503 (backend trouble is 503 with Retry-After; a 500 or
//!   a hang is a bug).
//!
//! Each violation names both operations. A history that fails its check is written to
//! `target/histories/<name>.json` so it can be read afterwards.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
// tokio's clock: the simulation's (a paused runtime) where there is one, the machine's
// otherwise.
use tokio::time::Instant;

use serde::Serialize;

/// One client call, as sent.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "call", rename_all = "snake_case")]
pub enum Call {
    /// `shared`: a reader's grant of a read/write lock (readers may hold a name together;
    /// never with a writer).
    Acquire {
        ttl_ms: u64,
        wait_ms: u64,
        shared: bool,
    },
    Renew {
        token: String,
        ttl_ms: u64,
    },
    Release {
        token: String,
    },
    Inspect {
        token: String,
    },
    /// A reentrant lock taken again by its holder (`reentrant: true` with its `Lock-Token`):
    /// a renewal that never shortens the lease and counts one hold more.
    Reenter {
        token: String,
        ttl_ms: u64,
    },
}

/// What came back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// 201 (or 200 for an idempotent replay).
    Granted {
        token: String,
        fence: u64,
        ttl_ms: u64,
        replayed: bool,
    },
    Renewed {
        fence: u64,
        ttl_ms: u64,
    },
    Released,
    /// 200 to a reentrant lock's release: one hold given back, `hold_count` left, the lock
    /// still held (the grant goes on).
    HoldsLeft {
        hold_count: u64,
    },
    /// Inspect: held, with this fence (if shown) and ttl.
    Held {
        fence: Option<u64>,
        ttl_ms: Option<u64>,
    },
    /// 404 `lock-not-held`.
    NotHeld,
    /// 409 `not-owner`.
    NotOwner,
    /// 409 `lock-held` on acquire.
    Busy,
    /// Any other answer: its status and problem type.
    Refused {
        status: u16,
        kind: String,
    },
    /// No answer (connection reset, client timeout): the outcome is unknown.
    NoAnswer {
        error: String,
    },
}

/// One operation: who, on what, when, and how it ended. Times are microseconds since the
/// history began.
#[derive(Debug, Clone, Serialize)]
pub struct Op {
    pub id: usize,
    pub client: usize,
    pub name: String,
    #[serde(flatten)]
    pub call: Call,
    pub invoke_us: u64,
    pub complete_us: u64,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// Something the history shows that the promise rules out.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "violation", rename_all = "snake_case")]
pub enum Violation {
    /// Two grants of one name valid at the same time.
    Overlap { first: usize, second: usize },
    /// A grant that completed before another was sent has a fence not below it.
    FenceOrder { earlier: usize, later: usize },
    /// The holder's release or renew was refused before its validity ended.
    RefusedWhileValid { grant: usize, op: usize },
    /// The holder's inspect saw the lock gone or held by another within its validity.
    VanishedWhileValid { grant: usize, op: usize },
    /// A 5xx other than 503.
    ServerError { op: usize },
    /// A release or renew accepted for a token no acquire of the name returned (a forged token,
    /// a marker, another name's).
    UnknownTokenAccepted { op: usize },
}

impl Violation {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Overlap { .. } => "overlap",
            Self::FenceOrder { .. } => "fence-order",
            Self::RefusedWhileValid { .. } => "refused-while-valid",
            Self::VanishedWhileValid { .. } => "vanished-while-valid",
            Self::ServerError { .. } => "server-error",
            Self::UnknownTokenAccepted { .. } => "unknown-token-accepted",
        }
    }

    fn ops(&self) -> Vec<usize> {
        match *self {
            Self::Overlap { first, second } => vec![first, second],
            Self::FenceOrder { earlier, later } => vec![earlier, later],
            Self::RefusedWhileValid { grant, op } | Self::VanishedWhileValid { grant, op } => {
                vec![grant, op]
            }
            Self::ServerError { op } | Self::UnknownTokenAccepted { op } => vec![op],
        }
    }
}

/// The operations of a run, in the order they completed.
#[derive(Debug)]
pub struct History {
    started: Instant,
    ops: Mutex<Vec<Op>>,
    /// Grants of one name that may be valid at once: 1 for locks, the permits of a semaphore.
    limit: usize,
    /// Steps forward of Redis's clock: when (µs since the history began) and by how much.
    steps_forward: Mutex<Vec<(u64, u64)>>,
}

impl Default for History {
    fn default() -> Self {
        Self::new()
    }
}

/// The verdict on a history.
#[derive(Debug)]
pub struct Report {
    pub ops: Vec<Op>,
    pub violations: Vec<Violation>,
}

impl History {
    pub fn new() -> Self {
        Self::with_limit(1)
    }

    /// A history of semaphores of `limit` permits each.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            started: Instant::now(),
            ops: Mutex::default(),
            limit,
            steps_forward: Mutex::default(),
        }
    }

    /// Microseconds since the history began.
    pub fn now_us(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Records one finished operation.
    pub fn record(
        &self,
        client: usize,
        name: &str,
        call: Call,
        invoke_us: u64,
        outcome: Outcome,
    ) -> Op {
        let complete_us = self.now_us();
        let mut ops = self.ops.lock().expect("history");
        let op = Op {
            id: ops.len(),
            client,
            name: name.to_owned(),
            call,
            invoke_us,
            complete_us,
            outcome,
        };
        ops.push(op.clone());
        op
    }

    /// Redis's clock stepped forward by `by`, now: every lease valid then ends that much
    /// earlier (at once if it had less left), before lockgate can notice (docs/modes.md). The
    /// checker shortens the validity of the grants valid now accordingly; nothing else.
    pub fn clock_stepped_forward(&self, by: std::time::Duration) {
        let by_us = u64::try_from(by.as_micros()).unwrap_or(u64::MAX);
        let at = self.now_us();
        self.steps_forward.lock().expect("steps").push((at, by_us));
    }

    /// How far Redis's clock stepped forward up to `at_us` (that instant included), in all (µs).
    pub fn stepped_forward_by(&self, at_us: u64) -> u64 {
        let steps = self.steps_forward.lock().expect("steps");
        steps
            .iter()
            .filter(|(at, _)| *at <= at_us)
            .map(|(_, by)| by)
            .sum()
    }

    /// Judges the whole history.
    pub fn check(&self) -> Report {
        let ops = self.ops.lock().expect("history").clone();
        let steps = self.steps_forward.lock().expect("steps").clone();
        let mut violations = check(&ops, self.limit, &steps);
        // In one order whatever the checker's maps iterated in: a seed of the simulation
        // replays its saved history byte for byte.
        violations.sort_by_key(|violation| (violation.kind(), violation.ops()));
        Report { ops, violations }
    }
}

/// One grant and what its holder did with it.
#[derive(Debug)]
struct Grant {
    op: usize,
    token: String,
    fence: u64,
    invoke_us: u64,
    complete_us: u64,
    /// (valid from, valid until) intervals: the grant, then each renewal.
    windows: Vec<(u64, u64)>,
    /// When the holder sent its release, if it did.
    released_us: Option<u64>,
    /// A reader's grant.
    shared: bool,
}

impl Grant {
    /// Validity known to the holder when it sent an operation at `at_us`: the end of the
    /// latest window opened by an answer it had read by then.
    fn valid_until_known_at(&self, at_us: u64) -> u64 {
        self.windows
            .iter()
            .filter(|(from, _)| *from <= at_us)
            .map(|(_, until)| *until)
            .max()
            .unwrap_or(0)
    }

    /// Its validity windows, cut at the release.
    fn cut_windows(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let cut = self.released_us.unwrap_or(u64::MAX);
        self.windows
            .iter()
            .map(move |(from, until)| (*from, (*until).min(cut)))
            .filter(|(from, until)| from < until)
    }
}

fn check(ops: &[Op], limit: usize, steps_forward: &[(u64, u64)]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for op in ops {
        if let Outcome::Refused { status, .. } = op.outcome
            && status >= 500
            && status != 503
        {
            violations.push(Violation::ServerError { op: op.id });
        }
    }
    let mut by_name: HashMap<&str, Vec<&Op>> = HashMap::new();
    for op in ops {
        by_name.entry(op.name.as_str()).or_default().push(op);
    }
    for ops in by_name.values() {
        check_name(ops, limit, steps_forward, &mut violations);
    }
    violations
}

fn check_name(
    ops: &[&Op],
    limit: usize,
    steps_forward: &[(u64, u64)],
    violations: &mut Vec<Violation>,
) {
    // Grants, keyed by token. A replay is the same grant answered again.
    let mut grants: Vec<Grant> = Vec::new();
    let mut by_token: HashMap<&str, usize> = HashMap::new();
    for (at, op) in ops.iter().enumerate() {
        if let (
            Call::Acquire { shared, .. },
            Outcome::Granted {
                token,
                fence,
                ttl_ms,
                replayed,
            },
        ) = (&op.call, &op.outcome)
        {
            let window = (op.complete_us, op.invoke_us + ttl_ms * 1000);
            match by_token.get(token.as_str()) {
                Some(&index) => grants[index].windows.push(window),
                None => {
                    by_token.insert(token.as_str(), grants.len());
                    grants.push(Grant {
                        op: op.id,
                        token: token.clone(),
                        fence: *fence,
                        invoke_us: if *replayed {
                            first_attempt_us(&ops[..at], op)
                        } else {
                            op.invoke_us
                        },
                        complete_us: op.complete_us,
                        windows: vec![window],
                        released_us: None,
                        shared: *shared,
                    });
                }
            }
        }
    }
    for op in ops {
        if let (
            Call::Release { token } | Call::Renew { token, .. } | Call::Reenter { token, .. },
            Outcome::Released | Outcome::HoldsLeft { .. } | Outcome::Renewed { .. },
        ) = (&op.call, &op.outcome)
            && !by_token.contains_key(token.as_str())
        {
            violations.push(Violation::UnknownTokenAccepted { op: op.id });
        }
    }
    // In the order they were sent: a renewal sets the lease's end, and one to a shorter ttl
    // moves it closer.
    let mut in_order: Vec<&&Op> = ops.iter().collect();
    in_order.sort_by_key(|op| (op.invoke_us, op.id));
    for op in in_order {
        match (&op.call, &op.outcome) {
            (Call::Renew { token, ttl_ms }, outcome) => {
                // A renewal refused as a bad request never ran; any other may have (a 503
                // after a timeout, no answer), even one whose answer says it failed.
                let never_ran = matches!(
                    outcome,
                    Outcome::Refused { status, .. } if (400..500).contains(status)
                );
                if let Some(&index) = by_token.get(token.as_str())
                    && !never_ran
                {
                    // The holder gave up whatever was promised beyond the end it asked for,
                    // when it asked (the server may apply the renewal at once); an answer
                    // opens a window up to the end the gateway says is left.
                    let asked_end = op.invoke_us + ttl_ms * 1000;
                    for window in grants[index].windows.iter_mut() {
                        if window.0 <= op.invoke_us {
                            window.1 = window.1.min(asked_end);
                        }
                    }
                    if let Outcome::Renewed { ttl_ms, .. } = outcome {
                        grants[index]
                            .windows
                            .push((op.complete_us, op.invoke_us + ttl_ms * 1000));
                    }
                }
            }
            // A re-entry never shortens the lease: its answer only opens a window.
            (Call::Reenter { token, .. }, Outcome::Renewed { ttl_ms, .. }) => {
                if let Some(&index) = by_token.get(token.as_str()) {
                    grants[index]
                        .windows
                        .push((op.complete_us, op.invoke_us + ttl_ms * 1000));
                }
            }
            // One hold given back of several: the lock is still the holder's.
            (Call::Release { .. }, Outcome::HoldsLeft { .. }) => {}
            (Call::Release { token }, _) => {
                if let Some(&index) = by_token.get(token.as_str()) {
                    let released = &mut grants[index].released_us;
                    *released = Some(released.map_or(op.invoke_us, |r| r.min(op.invoke_us)));
                }
            }
            _ => {}
        }
    }

    // A step forward of Redis's clock ends the leases it finds that much earlier.
    for &(at, by) in steps_forward {
        for grant in grants.iter_mut() {
            for window in grant.windows.iter_mut() {
                if window.0 <= at && at < window.1 {
                    window.1 = window.1.saturating_sub(by).max(at);
                }
            }
        }
    }

    // Holders told "not held" / "not owner", or seeing another state, while still valid.
    for op in ops {
        let (token, refused) = match (&op.call, &op.outcome) {
            (
                Call::Release { token } | Call::Renew { token, .. } | Call::Reenter { token, .. },
                outcome,
            ) => (
                token,
                matches!(outcome, Outcome::NotHeld | Outcome::NotOwner),
            ),
            _ => continue,
        };
        let Some(&index) = by_token.get(token.as_str()) else {
            continue;
        };
        let grant = &grants[index];
        // A retried release finds the lock gone: the holder's own first attempt released it.
        let released_before = grant.released_us.is_some_and(|r| r < op.invoke_us);
        if refused && !released_before && op.complete_us < grant.valid_until_known_at(op.invoke_us)
        {
            violations.push(Violation::RefusedWhileValid {
                grant: grant.op,
                op: op.id,
            });
        }
    }
    for op in ops {
        let Call::Inspect { token } = &op.call else {
            continue;
        };
        let Some(&index) = by_token.get(token.as_str()) else {
            continue;
        };
        let grant = &grants[index];
        let vanished = match &op.outcome {
            Outcome::NotHeld => true,
            Outcome::Held {
                fence: Some(fence), ..
            } => *fence != grant.fence,
            _ => false,
        };
        if vanished && op.complete_us < grant.valid_until_known_at(op.invoke_us) {
            violations.push(Violation::VanishedWhileValid {
                grant: grant.op,
                op: op.id,
            });
        }
    }

    // Overlapping validity (more than `limit` grants valid at once): sweep the windows of all
    // grants by start.
    let mut windows: Vec<(u64, u64, usize)> = grants
        .iter()
        .enumerate()
        .flat_map(|(index, grant)| grant.cut_windows().map(move |(f, u)| (f, u, index)))
        .collect();
    windows.sort_unstable();
    let mut reported = std::collections::HashSet::new();
    // The windows still open at the current start, by grant.
    let mut open: Vec<(u64, usize)> = Vec::new();
    for (from, until, index) in windows {
        open.retain(|(end, _)| *end > from);
        // Readers do not exclude each other; a writer excludes everyone.
        let mut others: Vec<usize> = open
            .iter()
            .map(|(_, other)| *other)
            .filter(|other| *other != index && !(grants[*other].shared && grants[index].shared))
            .collect();
        others.sort_unstable();
        others.dedup();
        if others.len() >= limit {
            for other in others {
                if reported.insert((other.min(index), other.max(index))) {
                    violations.push(Violation::Overlap {
                        first: grants[other].op,
                        second: grants[index].op,
                    });
                }
            }
        }
        open.push((until, index));
    }

    // Fences in real-time order: a grant answered before another was sent has a smaller fence.
    let mut by_completion: Vec<&Grant> = grants.iter().collect();
    by_completion.sort_unstable_by_key(|g| g.complete_us);
    let mut by_invoke: Vec<&Grant> = grants.iter().collect();
    by_invoke.sort_unstable_by_key(|g| g.invoke_us);
    // Walk later grants by invoke time; keep the largest fence among grants completed before.
    let mut best: Option<&Grant> = None;
    let mut done = 0;
    for later in by_invoke {
        while done < by_completion.len() && by_completion[done].complete_us < later.invoke_us {
            let candidate = by_completion[done];
            if best.is_none_or(|b| candidate.fence > b.fence) {
                best = Some(candidate);
            }
            done += 1;
        }
        if let Some(earlier) = best
            && earlier.fence >= later.fence
            && earlier.token != later.token
        {
            violations.push(Violation::FenceOrder {
                earlier: earlier.op,
                later: later.op,
            });
        }
    }
}

/// When the grant `replay` replays was asked for: the invoke of the first of the attempts
/// with the same idempotency key its client sent just before it (those whose answer did not
/// settle anything: no answer, a 503), one of which made the grant; `earlier` are the
/// operations completed before it.
fn first_attempt_us(earlier: &[&Op], replay: &Op) -> u64 {
    earlier
        .iter()
        .rev()
        .filter(|op| op.client == replay.client && op.name == replay.name)
        .take_while(|op| {
            matches!(op.call, Call::Acquire { .. })
                && matches!(
                    op.outcome,
                    Outcome::NoAnswer { .. } | Outcome::Refused { status: 503, .. }
                )
        })
        .map(|op| op.invoke_us)
        .last()
        .unwrap_or(replay.invoke_us)
}

impl Report {
    /// Violations of one kind.
    pub fn count(&self, kind: &str) -> usize {
        self.violations.iter().filter(|v| v.kind() == kind).count()
    }

    /// Operations that ended with a grant (new, not replays).
    pub fn grants(&self) -> usize {
        self.ops
            .iter()
            .filter(|op| {
                matches!(
                    op.outcome,
                    Outcome::Granted {
                        replayed: false,
                        ..
                    }
                )
            })
            .count()
    }

    /// Grants whose holder never learned that its lock was released: no release, or a last
    /// release attempt that ended neither 204 nor, after an earlier attempt without a verdict,
    /// 404 or 409 (that attempt released it, and the lock has gone, or gone to another).
    pub fn unreleased(&self) -> usize {
        let mut releases: std::collections::HashMap<&str, Vec<&Op>> = Default::default();
        for op in &self.ops {
            if let Call::Release { token } = &op.call {
                releases.entry(token.as_str()).or_default().push(op);
            }
        }
        self.ops
            .iter()
            .filter_map(|op| match &op.outcome {
                Outcome::Granted {
                    token,
                    replayed: false,
                    ..
                } => Some(token.as_str()),
                _ => None,
            })
            .filter(|token| {
                let Some(attempts) = releases.get(token) else {
                    return true;
                };
                let last = attempts.iter().max_by_key(|op| op.invoke_us);
                !match last.map(|op| &op.outcome) {
                    Some(Outcome::Released) => true,
                    Some(Outcome::NotHeld | Outcome::NotOwner) => attempts.len() > 1,
                    _ => false,
                }
            })
            .count()
    }

    /// Operations whose outcome matches `f`.
    pub fn count_ops(&self, f: impl Fn(&Op) -> bool) -> usize {
        self.ops.iter().filter(|op| f(op)).count()
    }

    /// Writes the history and its violations to `target/histories/<name>.json`.
    pub fn save(&self, name: &str) -> std::path::PathBuf {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/histories");
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("{name}.json"));
        let _ = std::fs::write(&path, self.to_json());
        path
    }

    /// The history and its violations as [`Report::save`] writes them (indented JSON).
    pub fn to_json(&self) -> Vec<u8> {
        let doc = serde_json::json!({"violations": self.violations, "ops": self.ops});
        serde_json::to_vec_pretty(&doc).unwrap_or_default()
    }

    /// Panics, saving the history, unless there is no violation of any kind in `kinds`.
    pub fn assert_none(&self, name: &str, kinds: &[&str]) {
        let bad: Vec<&Violation> = self
            .violations
            .iter()
            .filter(|v| kinds.contains(&v.kind()))
            .collect();
        if bad.is_empty() {
            return;
        }
        let path = self.save(name);
        let mut text = format!(
            "{} violation(s) in {} operations (history: {}):\n",
            bad.len(),
            self.ops.len(),
            path.display()
        );
        for violation in bad.iter().take(5) {
            text.push_str(&format!("- {}\n", violation.kind()));
            for id in violation.ops() {
                text.push_str(&format!("    {}\n", self.describe(id)));
            }
        }
        panic!("{text}");
    }

    /// Panics, saving the history, on any violation.
    pub fn assert_clean(&self, name: &str) {
        self.assert_none(
            name,
            &[
                "overlap",
                "fence-order",
                "refused-while-valid",
                "vanished-while-valid",
                "server-error",
                "unknown-token-accepted",
            ],
        );
    }

    fn describe(&self, id: usize) -> String {
        match self.ops.get(id) {
            Some(op) => format!(
                "#{} client {} {}: {:?} [{} .. {} µs] -> {:?}",
                op.id,
                op.client,
                op.name,
                redact(&op.call),
                op.invoke_us,
                op.complete_us,
                op.outcome
            ),
            None => format!("#{id}?"),
        }
    }
}

/// A call without its token, which only clutters the report.
fn redact(call: &Call) -> &'static str {
    match call {
        Call::Acquire { .. } => "acquire",
        Call::Renew { .. } => "renew",
        Call::Release { .. } => "release",
        Call::Inspect { .. } => "inspect",
        Call::Reenter { .. } => "re-enter",
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kinds: Vec<&str> = self.violations.iter().map(Violation::kind).collect();
        kinds.sort_unstable();
        kinds.dedup();
        write!(f, "{} ops, {} grants", self.ops.len(), self.grants())?;
        for kind in kinds {
            write!(f, ", {kind}: {}", self.count(kind))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(id: usize, name: &str, call: Call, invoke: u64, complete: u64, outcome: Outcome) -> Op {
        Op {
            id,
            client: 0,
            name: name.into(),
            call,
            invoke_us: invoke,
            complete_us: complete,
            outcome,
        }
    }

    fn grant(token: &str, fence: u64, ttl_ms: u64) -> Outcome {
        Outcome::Granted {
            token: token.into(),
            fence,
            ttl_ms,
            replayed: false,
        }
    }

    const ACQ: Call = Call::Acquire {
        ttl_ms: 10,
        wait_ms: 0,
        shared: false,
    };
    const SHARED: Call = Call::Acquire {
        ttl_ms: 10,
        wait_ms: 0,
        shared: true,
    };

    /// Readers may hold a name together; a writer with a reader is a violation.
    #[test]
    fn readers_share_and_writers_exclude() {
        let ops = [
            op(0, "a", SHARED, 0, 100, grant("r1", 1, 10)),
            op(1, "a", SHARED, 50, 200, grant("r2", 2, 10)),
        ];
        assert!(check(&ops, 1, &[]).is_empty(), "{:?}", check(&ops, 1, &[]));
        let ops = [
            op(0, "a", SHARED, 0, 100, grant("r1", 1, 10)),
            op(1, "a", ACQ, 50, 200, grant("w", 2, 10)),
        ];
        assert_eq!(check(&ops, 1, &[])[0].kind(), "overlap");
    }

    /// A replayed grant was made by its first attempt (answered 503, or not at all): its
    /// fence is judged from when that attempt was sent, not the replay. A reader granted in
    /// between, with a higher fence, is no violation; one granted before the first attempt
    /// was sent still is.
    #[test]
    fn a_replay_is_judged_from_its_first_attempt() {
        let unsettled = Outcome::Refused {
            status: 503,
            kind: "backend-unavailable".into(),
        };
        let replay = |fence| Outcome::Granted {
            token: "k".into(),
            fence,
            ttl_ms: 10,
            replayed: true,
        };
        let client = |mut op: Op, client| {
            op.client = client;
            op
        };
        let ops = [
            client(op(0, "a", SHARED, 100, 2600, unsettled.clone()), 1),
            op(1, "a", SHARED, 150, 2650, grant("r", 2, 10)),
            client(op(2, "a", SHARED, 2700, 2750, replay(1)), 1),
        ];
        assert!(check(&ops, 1, &[]).is_empty(), "{:?}", check(&ops, 1, &[]));
        let ops = [
            op(0, "a", SHARED, 0, 50, grant("r", 2, 10)),
            client(op(1, "a", SHARED, 100, 2600, unsettled), 1),
            client(op(2, "a", SHARED, 2700, 2750, replay(1)), 1),
        ];
        assert_eq!(check(&ops, 1, &[])[0].kind(), "fence-order");
    }

    fn release(token: &str) -> Call {
        Call::Release {
            token: token.into(),
        }
    }

    /// Two overlapping grants are caught; a grant after a release is not.
    #[test]
    fn overlapping_grants_are_violations() {
        let ok = [
            op(0, "a", ACQ, 0, 100, grant("t1", 1, 10)),
            op(1, "a", release("t1"), 200, 300, Outcome::Released),
            op(2, "a", ACQ, 250, 400, grant("t2", 2, 10)),
        ];
        assert!(check(&ok, 1, &[]).is_empty(), "{:?}", check(&ok, 1, &[]));
        let bad = [
            op(0, "a", ACQ, 0, 100, grant("t1", 1, 10)),
            op(1, "a", ACQ, 50, 200, grant("t2", 2, 10)),
        ];
        let found = check(&bad, 1, &[]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].kind(), "overlap");
    }

    /// With a limit of 2 (a semaphore), two grants at once are fine and a third is not.
    #[test]
    fn a_limit_allows_that_many_grants_at_once() {
        let ops = [
            op(0, "a", ACQ, 0, 100, grant("t1", 1, 10)),
            op(1, "a", ACQ, 50, 200, grant("t2", 2, 10)),
        ];
        assert!(check(&ops, 2, &[]).is_empty(), "{:?}", check(&ops, 2, &[]));
        let ops = [
            op(0, "a", ACQ, 0, 100, grant("t1", 1, 10)),
            op(1, "a", ACQ, 50, 200, grant("t2", 2, 10)),
            op(2, "a", ACQ, 60, 300, grant("t3", 3, 10)),
        ];
        let found = check(&ops, 2, &[]);
        assert!(
            !found.is_empty() && found.iter().all(|v| v.kind() == "overlap"),
            "{found:?}"
        );
    }

    /// A grant whose ttl ran out (counted from its invoke) frees the name for the next.
    #[test]
    fn expiry_ends_validity_from_the_invoke_time() {
        let ops = [
            op(0, "a", ACQ, 0, 100, grant("t1", 1, 5)),
            op(1, "a", ACQ, 4000, 5200, grant("t2", 2, 10)),
        ];
        assert!(check(&ops, 1, &[]).is_empty());
        let ops = [
            op(0, "a", ACQ, 0, 100, grant("t1", 1, 5)),
            op(1, "a", ACQ, 4000, 4900, grant("t2", 2, 10)),
        ];
        assert_eq!(check(&ops, 1, &[])[0].kind(), "overlap");
    }

    /// Fences must grow in real-time order only.
    #[test]
    fn fences_follow_real_time_order() {
        let ops = [
            op(0, "a", ACQ, 0, 100, grant("t1", 5, 1)),
            op(1, "a", ACQ, 2000, 2100, grant("t2", 5, 1)),
        ];
        assert_eq!(check(&ops, 1, &[])[0].kind(), "fence-order");
        // Concurrent acquires may be ordered either way (one of them expired at once).
        let ops = [
            op(0, "a", ACQ, 0, 3000, grant("t1", 5, 1)),
            op(1, "a", ACQ, 10, 4000, grant("t2", 4, 1)),
        ];
        assert!(
            check(&ops, 1, &[])
                .iter()
                .all(|v| v.kind() != "fence-order")
        );
    }

    /// A holder refused while still valid, or seeing its lock gone, is a violation.
    #[test]
    fn refusals_and_vanishing_within_validity_are_violations() {
        let ops = [
            op(0, "a", ACQ, 0, 100, grant("t1", 1, 10)),
            op(
                1,
                "a",
                Call::Inspect { token: "t1".into() },
                200,
                300,
                Outcome::NotHeld,
            ),
            op(2, "a", release("t1"), 400, 500, Outcome::NotHeld),
            op(3, "a", release("t1"), 9000, 11000, Outcome::NotHeld),
        ];
        let kinds: Vec<&str> = check(&ops, 1, &[]).iter().map(Violation::kind).collect();
        assert_eq!(kinds, ["refused-while-valid", "vanished-while-valid"]);
    }

    /// Renewals extend validity; 5xx other than 503 are violations.
    #[test]
    fn renewals_extend_and_server_errors_count() {
        let ops = [
            op(0, "a", ACQ, 0, 100, grant("t1", 1, 10)),
            op(
                1,
                "a",
                Call::Renew {
                    token: "t1".into(),
                    ttl_ms: 10,
                },
                5000,
                5100,
                Outcome::Renewed {
                    fence: 1,
                    ttl_ms: 10,
                },
            ),
            op(2, "a", ACQ, 12000, 13000, grant("t2", 2, 10)),
            op(
                3,
                "b",
                ACQ,
                0,
                1,
                Outcome::Refused {
                    status: 500,
                    kind: "internal".into(),
                },
            ),
        ];
        let kinds: Vec<&str> = check(&ops, 1, &[]).iter().map(Violation::kind).collect();
        assert_eq!(kinds, ["server-error", "overlap"]);
    }

    /// A renewal to a shorter ttl ends the grant sooner: a grant after that end is no overlap
    /// (the simulation's first seed met one), one before it is.
    #[test]
    fn a_renewal_to_a_shorter_ttl_ends_the_grant_sooner() {
        let shorten = |at| {
            op(
                1,
                "a",
                Call::Renew {
                    token: "t1".into(),
                    ttl_ms: 2,
                },
                at,
                at,
                Outcome::Renewed {
                    fence: 1,
                    ttl_ms: 2,
                },
            )
        };
        let ops = [
            op(0, "a", ACQ, 0, 0, grant("t1", 1, 10)),
            shorten(1000),
            op(2, "a", ACQ, 0, 3001, grant("t2", 2, 10)),
        ];
        assert!(check(&ops, 1, &[]).is_empty(), "{:?}", check(&ops, 1, &[]));
        let ops = [
            op(0, "a", ACQ, 0, 0, grant("t1", 1, 10)),
            shorten(1000),
            op(2, "a", ACQ, 0, 2500, grant("t2", 2, 10)),
        ];
        let kinds: Vec<&str> = check(&ops, 1, &[]).iter().map(Violation::kind).collect();
        assert_eq!(kinds, ["overlap"]);
    }

    /// A re-entry opens a window without shortening the lease; a release answered with holds
    /// left does not end the grant (a grant of another then is an overlap), the last one does;
    /// a re-entry refused while valid, or accepted with a token never given, is a violation.
    #[test]
    fn reentries_extend_and_only_the_last_release_ends_the_grant() {
        let reenter = |token: &str, ttl_ms| Call::Reenter {
            token: token.into(),
            ttl_ms,
        };
        let renewed = |ttl_ms| Outcome::Renewed { fence: 1, ttl_ms };
        let held = [
            op(0, "a", ACQ, 0, 100, grant("t1", 1, 10)),
            // Asks for 2 ms: the lease still runs to 10 ms, and now to 11 ms.
            op(1, "a", reenter("t1", 2), 1000, 1100, renewed(10)),
            op(
                2,
                "a",
                release("t1"),
                2000,
                2100,
                Outcome::HoldsLeft { hold_count: 1 },
            ),
            op(3, "a", ACQ, 3000, 9000, grant("t2", 2, 10)),
        ];
        let kinds: Vec<&str> = check(&held, 1, &[]).iter().map(Violation::kind).collect();
        assert_eq!(kinds, ["overlap"]);
        let freed = [
            op(0, "a", ACQ, 0, 100, grant("t1", 1, 10)),
            op(1, "a", reenter("t1", 2), 1000, 1100, renewed(10)),
            op(
                2,
                "a",
                release("t1"),
                2000,
                2100,
                Outcome::HoldsLeft { hold_count: 1 },
            ),
            op(3, "a", release("t1"), 2200, 2300, Outcome::Released),
            op(4, "a", ACQ, 3000, 9000, grant("t2", 2, 10)),
        ];
        assert!(
            check(&freed, 1, &[]).is_empty(),
            "{:?}",
            check(&freed, 1, &[])
        );
        let refused = [
            op(0, "a", ACQ, 0, 100, grant("t1", 1, 10)),
            op(1, "a", reenter("t1", 10), 1000, 1100, Outcome::NotOwner),
            op(2, "a", reenter("forged", 10), 1000, 1100, renewed(10)),
        ];
        let mut kinds: Vec<&str> = check(&refused, 1, &[])
            .iter()
            .map(Violation::kind)
            .collect();
        kinds.sort_unstable();
        assert_eq!(kinds, ["refused-while-valid", "unknown-token-accepted"]);
    }

    /// A step forward of Redis's clock ends the grants valid then that much earlier: a grant
    /// after that end is no overlap, one before it is; a grant made after the step is not cut.
    #[test]
    fn a_step_forward_ends_the_leases_it_finds_earlier() {
        // t1 valid until 10,000 µs; a 4 ms step at 2,000 µs ends it at 6,000.
        let steps = [(2000, 4000)];
        let ops = [
            op(0, "a", ACQ, 0, 100, grant("t1", 1, 10)),
            op(1, "a", ACQ, 5000, 6500, grant("t2", 2, 10)),
        ];
        assert!(
            check(&ops, 1, &steps).is_empty(),
            "{:?}",
            check(&ops, 1, &steps)
        );
        let ops = [
            op(0, "a", ACQ, 0, 100, grant("t1", 1, 10)),
            op(1, "a", ACQ, 5000, 5500, grant("t2", 2, 10)),
        ];
        let kinds: Vec<&str> = check(&ops, 1, &steps).iter().map(Violation::kind).collect();
        assert_eq!(kinds, ["overlap"]);
        // Granted after the step: its whole validity stands.
        let ops = [
            op(0, "a", ACQ, 3000, 3100, grant("t1", 1, 10)),
            op(1, "a", ACQ, 9000, 9500, grant("t2", 2, 10)),
        ];
        let kinds: Vec<&str> = check(&ops, 1, &steps).iter().map(Violation::kind).collect();
        assert_eq!(kinds, ["overlap"]);
    }
}
