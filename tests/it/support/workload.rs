//! A concurrent lock workload over HTTP whose every operation goes into a [`History`].
//!
//! Each client loops: acquire a random name (waiting if asked), and when granted keep it a
//! random few milliseconds, sometimes renew it, inspect it, then release it. The workload
//! judges nothing; [`History::check`] does, afterwards.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use lockgate::client::ClientError;

use super::answers::{Reply, json_of};
use super::history::{Call, History, Outcome};

/// How many times a release without a verdict is sent.
const RELEASE_ATTEMPTS: usize = 10;

/// What the clients do.
#[derive(Debug, Clone)]
pub struct Workload {
    pub clients: usize,
    pub names: Vec<String>,
    pub ttl_ms: u64,
    pub wait_ms: u64,
    /// A holder keeps the lock between 0 and this many milliseconds before releasing.
    pub max_hold_ms: u64,
    /// One grant in this many is renewed before it is released (0: never).
    pub renew_one_in: u64,
    /// Extra fields of the acquire and renew bodies (replica fields), client `i` using
    /// `extras[i % len]` (none when empty).
    pub extras: Vec<Value>,
    /// Stop after this many acquire attempts in all (`None`: when told to stop).
    pub cycles: Option<usize>,
    /// Take permits of semaphores of this many permits instead of locks.
    pub permits: Option<u32>,
    /// Read/write locks: one acquire in this many is shared (a reader), the rest exclusive
    /// (0: all exclusive).
    pub shared_one_in: u64,
    /// Multi-locks: each acquire takes this many names at once (`POST /locks`), recorded as a
    /// grant of each (0 or 1: one lock at a time).
    pub set_size: usize,
    /// Fair waiters (`"fair": true`), client `i` at priority `i % 3`.
    pub fair: bool,
}

impl Workload {
    pub fn new(clients: usize, names: &[&str]) -> Self {
        Self {
            clients,
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            ttl_ms: 10_000,
            wait_ms: 20_000,
            max_hold_ms: 3,
            renew_one_in: 4,
            extras: Vec::new(),
            cycles: None,
            permits: None,
            shared_one_in: 0,
            set_size: 0,
            fair: false,
        }
    }

    /// The history to record this workload into: its limit is the semaphores' permits.
    pub fn history(&self) -> History {
        History::with_limit(self.permits.map_or(1, |p| p as usize))
    }
}

/// A running workload.
#[derive(Debug)]
pub struct Running {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    pub history: Arc<History>,
}

impl Running {
    /// Tells the clients to stop after their current cycle, and waits for them.
    pub async fn finish(self) -> Arc<History> {
        self.stop.store(true, Ordering::Relaxed);
        self.join().await
    }

    /// Waits for the clients to end by themselves (a workload with `cycles`).
    pub async fn join(self) -> Arc<History> {
        for task in self.tasks {
            task.await.expect("workload client");
        }
        self.history
    }
}

/// Starts `workload` against the gateways at `bases` (client `i` uses `bases[i % len]`).
pub fn start(bases: &[String], workload: &Workload) -> Running {
    let history = Arc::new(workload.history());
    start_recording(bases, workload, history)
}

/// Starts `workload`, recording into an existing history.
pub fn start_recording(bases: &[String], workload: &Workload, history: Arc<History>) -> Running {
    let stop = Arc::new(AtomicBool::new(false));
    let attempts = Arc::new(AtomicUsize::new(0));
    let http = super::http_client();
    let tasks = (0..workload.clients)
        .map(|client| {
            let base = bases[client % bases.len()].clone();
            let client_state = Client {
                id: client,
                base,
                http: http.clone(),
                history: history.clone(),
                workload: workload.clone(),
                rng: seed(client),
            };
            let (stop, attempts) = (stop.clone(), attempts.clone());
            tokio::spawn(client_state.run(stop, attempts))
        })
        .collect();
    Running {
        stop,
        tasks,
        history,
    }
}

/// Runs `workload` to the end of its cycles and returns the history.
pub async fn run(bases: &[String], workload: &Workload) -> Arc<History> {
    assert!(workload.cycles.is_some(), "a finite workload needs cycles");
    start(bases, workload).join().await
}

fn seed(client: usize) -> u64 {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    u64::from_ne_bytes(bytes) ^ (client as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
}

struct Client {
    id: usize,
    base: String,
    http: reqwest::Client,
    history: Arc<History>,
    workload: Workload,
    rng: u64,
}

impl Client {
    fn next(&mut self, below: u64) -> u64 {
        // xorshift64*: plenty for picking names and pauses.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) % below.max(1)
    }

    async fn run(mut self, stop: Arc<AtomicBool>, attempts: Arc<AtomicUsize>) {
        while !stop.load(Ordering::Relaxed) {
            let attempt = attempts.fetch_add(1, Ordering::Relaxed);
            if self.workload.cycles.is_some_and(|cycles| attempt >= cycles) {
                return;
            }
            let index = self.next(self.workload.names.len() as u64) as usize;
            if self.workload.set_size > 1 {
                let names = &self.workload.names;
                let set: Vec<String> = (0..self.workload.set_size)
                    .map(|i| names[(index + i) % names.len()].clone())
                    .collect();
                self.set_cycle(&set).await;
                continue;
            }
            let name = self.workload.names[index].clone();
            self.cycle(&name).await;
        }
    }

    fn url(&self, name: &str) -> String {
        match self.workload.permits {
            None => format!("{}/locks/{name}", self.base),
            Some(_) => format!("{}/semaphores/{name}", self.base),
        }
    }

    /// `body` with this client's extra fields.
    fn with_extras(&self, mut body: Value) -> Value {
        let extras = &self.workload.extras;
        if !extras.is_empty()
            && let (Some(body), Some(extra)) = (
                body.as_object_mut(),
                extras[self.id % extras.len()].as_object(),
            )
        {
            body.extend(extra.clone());
        }
        body
    }

    async fn cycle(&mut self, name: &str) {
        let w = &self.workload;
        let mut body = self.with_extras(json!({"ttl_ms": w.ttl_ms, "wait_ms": w.wait_ms}));
        if let Some(permits) = w.permits {
            body["permits"] = permits.into();
        }
        if w.fair {
            body["fair"] = true.into();
            body["priority"] = (self.id % 3).into();
        }
        let (ttl_ms, wait_ms, shared_one_in) = (w.ttl_ms, w.wait_ms, w.shared_one_in);
        let shared = shared_one_in > 0 && self.next(shared_one_in) == 0;
        if shared {
            body["mode"] = "shared".into();
        }
        let call = Call::Acquire {
            ttl_ms,
            wait_ms,
            shared,
        };
        let invoke = self.history.now_us();
        let sent = self.http.post(self.url(name)).json(&body).send().await;
        let outcome = read_outcome(sent, Expect::Grant).await;
        self.history
            .record(self.id, name, call, invoke, outcome.clone());
        let Outcome::Granted { token, fence, .. } = outcome else {
            return;
        };
        let hold = self.next(self.workload.max_hold_ms + 1);
        if hold > 0 {
            tokio::time::sleep(Duration::from_millis(hold)).await;
        }
        if self.workload.renew_one_in > 0 && self.next(self.workload.renew_one_in) == 0 {
            let ttl_ms = self.workload.ttl_ms;
            let body = self.with_extras(json!({"ttl_ms": ttl_ms}));
            let invoke = self.history.now_us();
            let sent = self
                .http
                .patch(self.url(name))
                .header("Lock-Token", &token)
                .json(&body)
                .send()
                .await;
            let outcome = read_outcome(sent, Expect::Renewal).await;
            let call = Call::Renew {
                token: token.clone(),
                ttl_ms,
            };
            self.history.record(self.id, name, call, invoke, outcome);
        }
        let invoke = self.history.now_us();
        let sent = self.http.get(self.url(name)).send().await;
        let outcome = match self.workload.permits {
            None if !shared => read_outcome(sent, Expect::Inspection).await,
            _ => read_outcome(sent, Expect::Permit(fence)).await,
        };
        let call = Call::Inspect {
            token: token.clone(),
        };
        self.history.record(self.id, name, call, invoke, outcome);

        // A release that got no verdict (503, no answer) is safe to repeat, and is repeated.
        for attempt in 0..RELEASE_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let invoke = self.history.now_us();
            let sent = self
                .http
                .delete(self.url(name))
                .header("Lock-Token", &token)
                .send()
                .await;
            let outcome = read_outcome(sent, Expect::Release).await;
            let call = Call::Release {
                token: token.clone(),
            };
            let settled = !matches!(
                outcome,
                Outcome::Refused { status: 503, .. } | Outcome::NoAnswer { .. }
            );
            self.history.record(self.id, name, call, invoke, outcome);
            if settled {
                return;
            }
        }
    }
}

impl Client {
    /// One multi-lock cycle: take `names` at once, look at each, release the set (repeated
    /// while the answer says nothing). Every operation is recorded once per name.
    async fn set_cycle(&mut self, names: &[String]) {
        let w = &self.workload;
        let (ttl_ms, wait_ms) = (w.ttl_ms, w.wait_ms);
        let body = json!({"names": names, "ttl_ms": ttl_ms, "wait_ms": wait_ms});
        let invoke = self.history.now_us();
        let sent = self
            .http
            .post(format!("{}/locks", self.base))
            .json(&body)
            .send()
            .await;
        let outcome = read_outcome(sent, Expect::Grant).await;
        let call = Call::Acquire {
            ttl_ms,
            wait_ms,
            shared: false,
        };
        for name in names {
            self.history
                .record(self.id, name, call.clone(), invoke, outcome.clone());
        }
        let Outcome::Granted { token, .. } = outcome else {
            return;
        };
        let hold = self.next(self.workload.max_hold_ms + 1);
        if hold > 0 {
            tokio::time::sleep(Duration::from_millis(hold)).await;
        }
        for name in names {
            let invoke = self.history.now_us();
            let sent = self.http.get(self.url(name)).send().await;
            let outcome = read_outcome(sent, Expect::Inspection).await;
            let call = Call::Inspect {
                token: token.clone(),
            };
            self.history.record(self.id, name, call, invoke, outcome);
        }
        let query: Vec<String> = names.iter().map(|n| format!("name={n}")).collect();
        let url = format!("{}/locks?{}", self.base, query.join("&"));
        for attempt in 0..RELEASE_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let invoke = self.history.now_us();
            let sent = self
                .http
                .delete(&url)
                .header("Lock-Token", &token)
                .send()
                .await;
            let outcome = read_outcome(sent, Expect::Release).await;
            let settled = !matches!(
                outcome,
                Outcome::Refused { status: 503, .. } | Outcome::NoAnswer { .. }
            );
            for name in names {
                let call = Call::Release {
                    token: token.clone(),
                };
                self.history
                    .record(self.id, name, call, invoke, outcome.clone());
            }
            if settled {
                return;
            }
        }
    }
}

/// What an answer is expected to carry.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    Grant,
    Renewal,
    Inspection,
    /// A semaphore's inspection, or a read/write lock's by a reader, by the holder of the
    /// grant with this fence: `Held` with it if the grant is among those shown (`holders`,
    /// `shared_holders`), else `NotHeld`.
    Permit(u64),
    Release,
}

/// Reads an HTTP answer as an outcome.
pub async fn read_outcome(sent: reqwest::Result<reqwest::Response>, expect: Expect) -> Outcome {
    let response = match sent {
        Ok(response) => response,
        Err(err) => {
            return Outcome::NoAnswer {
                error: err.to_string(),
            };
        }
    };
    let status = response.status().as_u16();
    let body: Value = match response.bytes().await {
        Ok(bytes) if bytes.is_empty() => Value::Null,
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        Err(err) => {
            return Outcome::NoAnswer {
                error: err.to_string(),
            };
        }
    };
    judge(status, &body, expect)
}

/// [`read_outcome`] of an answer read by the project's client. An answer the client could
/// not read (no problem document, say) is still an answer: refused with its status, as
/// [`read_outcome`] records it, so that a 500 of any shape counts as a server error.
pub fn outcome_of<T: serde::Serialize>(reply: Reply<T>, expect: Expect) -> Outcome {
    match reply {
        Err(ClientError::Unexpected { status, .. }) => Outcome::Refused {
            status: status.as_u16(),
            kind: String::new(),
        },
        Err(err) => Outcome::NoAnswer {
            error: err.to_string(),
        },
        answered => {
            let (status, body) = json_of(answered);
            judge(status, &body, expect)
        }
    }
}

/// What `status` and `body` say happened, for an answer of the kind `expect`.
pub fn judge(status: u16, body: &Value, expect: Expect) -> Outcome {
    let kind = body["type"]
        .as_str()
        .and_then(|t| t.rsplit('/').next())
        .unwrap_or("")
        .to_owned();
    match (status, expect) {
        (200 | 201, Expect::Grant) => Outcome::Granted {
            token: body["token"].as_str().unwrap_or_default().to_owned(),
            fence: body["fence"].as_u64().unwrap_or(0),
            ttl_ms: body["ttl_ms"].as_u64().unwrap_or(0),
            replayed: status == 200,
        },
        (200, Expect::Renewal) => Outcome::Renewed {
            fence: body["fence"].as_u64().unwrap_or(0),
            ttl_ms: body["ttl_ms"].as_u64().unwrap_or(0),
        },
        (200, Expect::Inspection) => Outcome::Held {
            fence: body["fence"].as_u64(),
            ttl_ms: body["ttl_ms"].as_u64(),
        },
        (200, Expect::Permit(fence)) => {
            let listed = |field: &str| body[field].as_array().cloned().unwrap_or_default();
            let holders = [listed("holders"), listed("shared_holders")].concat();
            match holders.iter().find(|h| h["fence"].as_u64() == Some(fence)) {
                Some(permit) => Outcome::Held {
                    fence: Some(fence),
                    ttl_ms: permit["ttl_ms"].as_u64(),
                },
                None => Outcome::NotHeld,
            }
        }
        (204, Expect::Release) => Outcome::Released,
        (200, Expect::Release) if body["hold_count"].is_u64() => Outcome::HoldsLeft {
            hold_count: body["hold_count"].as_u64().unwrap_or(0),
        },
        (404, _) if kind == "lock-not-held" => Outcome::NotHeld,
        (409, _) if kind == "not-owner" => Outcome::NotOwner,
        (409, _) if kind == "lock-held" => Outcome::Busy,
        _ => Outcome::Refused { status, kind },
    }
}

/// An answer the client could not read is recorded with its status, so the history's
/// server-error rule sees a 500 however it is written (it was once recorded as no answer).
#[test]
fn an_unreadable_answer_is_refused_with_its_status() {
    let unreadable: Reply<Option<Value>> = Err(ClientError::Unexpected {
        status: reqwest::StatusCode::INTERNAL_SERVER_ERROR,
        what: " without a problem document: EOF".into(),
    });
    let outcome = outcome_of(unreadable, Expect::Release);
    assert!(
        matches!(outcome, Outcome::Refused { status: 500, .. }),
        "{outcome:?}"
    );
}
