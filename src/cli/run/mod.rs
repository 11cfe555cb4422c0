//! `lockgate run`: run a command while holding a lock, through a gateway's HTTP API.
//!
//! The same family as `flock(1)`, `consul lock` and `etcdctl lock`: acquire (waiting up to
//! `--wait`), start the command with `LOCKGATE_LOCK`, `LOCKGATE_FENCE` and `LOCKGATE_TOKEN` in
//! its environment, renew every third of `--ttl` while it runs, release when it exits, and exit
//! with its status.
//!
//! While the command runs, `lockgate run` also watches the lock's events
//! (`GET /locks/{name}/events`), so a revoke, or a release by another client, stops the command
//! at once instead of at the next renewal.
//!
//! If the lock is lost, the command is stopped and `lockgate run` exits 76 (77 if an operator
//! revoked it, 78 when a bounded hold, `--max-hold` or the gateway's, runs out): the command
//! must not go on believing it holds the lock. A refused renewal (the lock is gone) sends
//! SIGTERM at once and SIGKILL after `--kill-after`. Renewals that do not get through are
//! retried until `min(--kill-after, ttl/3)` before the lease ends; then SIGTERM, and SIGKILL
//! when the lease ends, so that the command is stopped before anyone else can be granted the
//! lock. A bounded hold is ended the same way, before its end.
//!
//! The command runs in a process group of its own, and every signal goes to the whole group
//! (`process.rs`); what the command leaves behind when it exits is stopped before the release;
//! a guard process stops the group if `lockgate run` itself dies (`guard.rs`).
//!
//! SIGTERM, SIGHUP and SIGINT sent to `lockgate run` are passed on to the command's group.
//! Before the command starts (while
//! waiting for the lock), any of the three ends `lockgate run` with 128 + the signal's number:
//! the gateway withdraws a grant it could not deliver, and one already delivered is found
//! again with the idempotency key and released.
//!
//! The grant names its holder: `--owner` (default `<hostname>:<pid>`) and `--metadata`, shown by
//! `GET /locks/{name}`.
//!
//! With `--fair` (and `--priority`) the acquire waits in the lock's fair queue; its requests
//! share the run's idempotency key, so the gateway keeps its place from one to the next.
//!
//! The acquire carries an `Idempotency-Key`, so retrying after a lost response finds the same
//! grant; and if `lockgate run` dies while its acquire is in flight, the gateway releases the
//! grant it could not deliver.
//!
//! The runner is one state machine (acquire, start the command, renew, watch the events, stop
//! the command, release) over one child process and one lease: this file runs the command;
//! `gateway.rs` holds the runner's calls to the gateway (acquire, renew, release).
//!
//! One piece, over 400 lines: every way the run can end (the command's exit, a lost lease, a
//! revoke, the maximum hold, a signal to `lockgate run`) meets every state of the lease and of
//! the child here, and the exit status each one gives is only checked by reading them together.

use std::ffi::OsString;
use std::time::Duration;

use nix::sys::signal::Signal;
use reqwest::StatusCode;
use tokio::time::Instant;

mod gateway;
mod guard;
mod process;

use self::guard::Guard;
pub use self::guard::run_guard;
use self::process::{ChildEvent, CommandProcess, Group, Signals, Terminal, job_control};

use crate::backend::sleep_until_some;
use crate::client::{Answer, Client, ClientError, EventLines};
use crate::config::{RunArgs, Secret};
use crate::http::dto::{AcquireBody, LockGrantBody, LockMode, RenewBody};
use crate::lock::hold::renewal_interval;
use crate::lock::{LockName, TokenStem, millis};

/// Bad arguments.
pub const EXIT_USAGE: u8 = 64;
/// The gateway could not be reached, or refused the request.
pub const EXIT_GATEWAY: u8 = 69;
/// The lock was not acquired within `--wait`.
pub const EXIT_NOT_ACQUIRED: u8 = 75;
/// The lock was lost while the command ran; the command was terminated.
pub const EXIT_LOST: u8 = 76;
/// An operator revoked the lock while the command ran; the command was terminated.
pub const EXIT_REVOKED: u8 = 77;
/// The lock was held for as long as `--max-hold` (or the gateway's) allows; the command was
/// terminated.
pub const EXIT_MAX_HOLD: u8 = 78;
/// The command could not be executed / was not found (shell conventions).
const EXIT_CANNOT_EXECUTE: u8 = 126;
const EXIT_NOT_FOUND: u8 = 127;

/// The longest wait one acquire request asks the gateway for (well under the gateway's
/// default `--max-wait`); longer waits are several requests with the same idempotency key.
const WAIT_CHUNK: Duration = Duration::from_secs(30);
/// Time allowed for a request on top of the wait it asks for.
const REQUEST_SLACK: Duration = Duration::from_secs(10);
/// The least time between two acquires, whatever the answer (plus up to as much again of
/// jitter): a gateway that answers at once, again and again, is never hammered.
const RETRY_FLOOR: Duration = Duration::from_millis(100);

/// Up to `RETRY_FLOOR` of jitter, so that runs refused together do not retry together.
fn jitter() -> Duration {
    let mut byte = [0u8; 1];
    let _ = crate::entropy::fill(&mut byte);
    RETRY_FLOOR * u32::from(byte[0]) / 255
}
/// After a renewal that did not get through, try again this often (sooner for short ttls).
const RETRY_RENEWAL_EVERY: Duration = Duration::from_secs(1);
/// How long a group sent SIGKILL is given to be gone (and reaped) before `lockgate run` goes on.
const KILLED_GROUP_WAIT: Duration = Duration::from_secs(1);

/// Why `lockgate run` stops before or instead of the command's own status.
#[derive(Debug)]
struct Failure {
    code: u8,
    message: String,
}

fn fail(code: u8, message: impl Into<String>) -> Failure {
    Failure {
        code,
        message: message.into(),
    }
}

/// Runs `lockgate run` to completion and returns its exit status.
pub async fn run(args: RunArgs) -> u8 {
    let result = async {
        let runner = Runner::new(&args)?;
        // Handled from the start: a SIGTERM between the grant and the command's start must
        // not kill `lockgate run` with the lock held and nobody to release it.
        let mut signals = Signals::new()?;
        let (grant, sent) = tokio::select! {
            acquired = runner.acquire() => acquired?,
            // Dropping the acquire hangs up on the gateway, which withdraws a grant it could
            // not deliver; one it did deliver is found again and released.
            signal = signals.next() => {
                runner.give_back().await;
                return Err(fail(
                    128 + signal as u8,
                    format!("{signal} while waiting for {}; not acquired", runner.name),
                ));
            }
        };
        runner
            .run_command(&args.command, grant, sent, &mut signals)
            .await
    }
    .await;
    match result {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("lockgate run: {}", failure.message);
            failure.code
        }
    }
}

/// What the lock's events said of this run's grant.
enum Told {
    /// It ended: the exit status, and why.
    Ended(u8, &'static str),
    /// The lock is not (or no longer) ours as the stream began: the next renewal says why.
    LookNow,
    /// The stream ended; the renewals decide from then on.
    Gone,
}

/// Resolves when the lock's events say something of the grant with `fence`; never without a
/// stream.
async fn told(events: &mut Option<EventLines>, fence: u64) -> Told {
    let Some(lines) = events else {
        return std::future::pending().await;
    };
    while let Some(event) = lines.next().await {
        let ours = event["fence"].as_u64() == Some(fence);
        match event["event"].as_str() {
            // The stream opened after the grant: if the lock is not ours any more, something
            // happened in between (a revoke before the watch began).
            Some("state") if !ours => return Told::LookNow,
            Some("revoked") if ours => {
                return Told::Ended(EXIT_REVOKED, "an operator revoked the lock");
            }
            Some("released") if ours => {
                return Told::Ended(EXIT_LOST, "the lock was released by another client");
            }
            Some("expired") if ours => return Told::Ended(EXIT_LOST, "the lock's lease ran out"),
            _ => {}
        }
    }
    Told::Gone
}

/// `<hostname>:<pid>`: which process on which machine holds the lock.
fn default_owner() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    // An owner is at most 128 characters; a hostname is at most 64 on Linux, 253 as a name.
    let host: String = host.chars().take(100).collect();
    format!("{host}:{}", std::process::id())
}

struct Runner {
    client: Client,
    name: LockName,
    ttl: Duration,
    wait: Option<Duration>,
    kill_after: Duration,
    owner: String,
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
    max_hold: Option<Duration>,
    min_hold: Option<Duration>,
    /// The idempotency key of this run's acquire: a retry, or a replay, finds the same grant.
    key: TokenStem,
    /// Under a permit of the semaphore `name` with this many permits, not the lock `name`.
    permits: Option<u32>,
    /// Under a shared (read) grant of the lock `name`.
    shared: bool,
    /// Waiting in the lock's fair queue, at this priority.
    fair: Option<u8>,
    /// Under a multi-lock of these names (`name` is the first).
    set: Option<Vec<String>>,
    /// The API key the command gets as `LOCKGATE_API_KEY` (`--pass-api-key`); else none.
    passed_key: Option<Secret>,
    /// `--verbose`: say what the run waits for, and what it got.
    verbose: bool,
}

enum RenewOutcome {
    Renewed {
        valid_until: Instant,
        hold_ends: Option<Instant>,
    },
    /// Refused: the lock is gone. The exit status to end with, and why.
    Lost(u8, String),
    Failed(String),
}

impl Runner {
    /// What `LOCKGATE_LOCK` says: the name, or a set's names joined by commas.
    fn label(&self) -> String {
        self.set
            .as_ref()
            .map_or_else(|| self.name.to_string(), |set| set.join(","))
    }

    fn new(args: &RunArgs) -> Result<Self, Failure> {
        let names = args
            .names
            .iter()
            .map(|name| LockName::parse(name).map_err(|e| fail(EXIT_USAGE, format!("{e}"))))
            .collect::<Result<Vec<_>, _>>()?;
        let set = (names.len() > 1).then(|| args.names.clone());
        if set.is_some() && (args.permits.is_some() || args.shared || args.fair) {
            return Err(fail(
                EXIT_USAGE,
                "several names (a multi-lock) cannot go with --permits, --shared or --fair",
            ));
        }
        if args.min_hold.is_some()
            && (set.is_some() || args.permits.is_some() || args.shared || args.fair)
        {
            return Err(fail(
                EXIT_USAGE,
                "--min-hold keeps an exclusive lock: not with several names, --permits, --shared or --fair",
            ));
        }
        let name = names[0].clone();
        if args.ttl < Duration::from_millis(1) {
            return Err(fail(EXIT_USAGE, "--ttl must be at least 1ms"));
        }
        let client = Client::new(&args.gateway, args.api_key.as_ref().map(|k| k.expose()))
            .map_err(|e| {
                let flag = match e {
                    ClientError::GatewayUrl(_) => "--gateway (LOCKGATE_GATEWAY)",
                    _ => "--api-key (LOCKGATE_API_KEY)",
                };
                fail(EXIT_USAGE, format!("{flag}: {e}"))
            })?;
        let client = match (&set, args.permits) {
            (Some(set), _) => client.set(set),
            (None, Some(_)) => client.semaphores(),
            (None, None) => client,
        };
        Ok(Self {
            client,
            name,
            ttl: args.ttl,
            wait: args.wait,
            kill_after: args.kill_after,
            owner: args.owner.clone().unwrap_or_else(default_owner),
            metadata: args.metadata.clone(),
            max_hold: args.max_hold,
            min_hold: args.min_hold,
            key: TokenStem::random()
                .map_err(|e| fail(EXIT_GATEWAY, format!("OS random generator: {e}")))?,
            permits: args.permits,
            shared: args.shared,
            fair: args.fair.then(|| args.priority.unwrap_or(0)),
            set,
            passed_key: args.api_key.clone().filter(|_| args.pass_api_key),
            verbose: args.verbose,
        })
    }

    /// Starts the command, keeps the lock alive while it runs, and returns the exit status.
    async fn run_command(
        &self,
        command: &[OsString],
        grant: LockGrantBody,
        sent: Instant,
        signals: &mut Signals,
    ) -> Result<u8, Failure> {
        let Some((program, args)) = command.split_first() else {
            return Err(fail(EXIT_USAGE, "no command given"));
        };
        let mut valid_until = sent + Duration::from_millis(grant.ttl_ms);
        // A bounded hold ends then, whatever the renewals: the command is stopped before.
        let mut hold_ends = grant
            .max_hold_left_ms
            .map(|left| sent + Duration::from_millis(left));
        // The validity is counted from when the request was sent, the earliest the answer can
        // have been built: exact for an answer that came at once, far too short for one that
        // waited for the lock (the guard would stop the command at once). Such a grant is
        // renewed before the command starts, so the lease enforced is the real one.
        if sent.elapsed() > self.ttl / 10 {
            match self.renew(&grant.token).await {
                RenewOutcome::Renewed {
                    valid_until: until,
                    hold_ends: ends,
                } => {
                    valid_until = until;
                    hold_ends = ends.or(hold_ends);
                }
                RenewOutcome::Lost(code, why) => {
                    return Err(fail(
                        code,
                        format!(
                            "lost the lock on {} before the command started: {why}",
                            self.name
                        ),
                    ));
                }
                RenewOutcome::Failed(why) => {
                    self.release(&grant.token).await;
                    return Err(fail(
                        EXIT_GATEWAY,
                        format!(
                            "the lease of {} could not be confirmed after the wait ({why}); the command was not run",
                            self.name
                        ),
                    ));
                }
            }
        }
        let mut guard = match Guard::start(self.kill_after) {
            Ok(guard) => guard,
            Err(err) => {
                self.release(&grant.token).await;
                return Err(fail(
                    EXIT_CANNOT_EXECUTE,
                    format!("cannot start the guard process ({err}); the command was not run"),
                ));
            }
        };
        let mut spawn = std::process::Command::new(program);
        spawn
            .args(args)
            .env("LOCKGATE_LOCK", self.label())
            .env("LOCKGATE_FENCE", grant.fence.to_string())
            .env("LOCKGATE_TOKEN", &grant.token)
            // The key can do whatever its scopes allow, on every name: the command gets it only
            // when asked (`--pass-api-key`), even if it was in our environment.
            .env_remove("LOCKGATE_API_KEY");
        if let Some(key) = &self.passed_key {
            spawn.env("LOCKGATE_API_KEY", key.expose());
        }
        let mut child = match CommandProcess::spawn(spawn) {
            Ok(child) => child,
            Err(err) => {
                guard.done();
                self.release(&grant.token).await;
                let code = if err.kind() == std::io::ErrorKind::NotFound {
                    EXIT_NOT_FOUND
                } else {
                    EXIT_CANNOT_EXECUTE
                };
                return Err(fail(
                    code,
                    format!("cannot run {}: {err}", program.to_string_lossy()),
                ));
            }
        };
        let group = child.group();
        guard.watch(group.id());
        guard.lease_until(valid_until);
        let mut terminal = Terminal::of_foreground_job();
        signals.handle_stop()?;
        let interval = renewal_interval(self.ttl);
        // When no renewal gets through, the command is sent SIGTERM this long before the
        // lease ends, and SIGKILL when it ends: it is stopped before anyone else can get the
        // lock.
        let grace = self.kill_after.min(interval);
        let mut next_renewal = Instant::now() + interval;
        // The lock's events, so that a revoke (or a release by someone else) stops the command
        // at once rather than at the next renewal; renewals alone still decide without them.
        // A shared grant has no events of its own (the stream follows the writer's lock), nor
        // has a set.
        let mut events = if self.shared || self.set.is_some() {
            None
        } else {
            self.client.watch(self.name.as_str()).await
        };
        let (code, still_ours) = loop {
            tokio::select! {
                event = child.next() => match event {
                    ChildEvent::Exited(code) => {
                        if let Some(terminal) = &mut terminal {
                            terminal.take_back();
                        }
                        self.stop_leftovers(group, valid_until).await;
                        break (code, true);
                    }
                    ChildEvent::Stopped(signal) => {
                        job_control(&mut terminal, group, Some(signal));
                    }
                },
                () = tokio::time::sleep_until(next_renewal) => {
                    // A renewal that hangs (a frozen gateway) must not hold the command past
                    // the moment it is to be sent SIGTERM.
                    let give_up_at = valid_until.checked_sub(grace).unwrap_or(valid_until);
                    let renewal = tokio::time::timeout_at(give_up_at, self.renew(&grant.token));
                    let outcome = renewal.await.unwrap_or_else(|_| {
                        RenewOutcome::Failed("no answer before the lease was about to end".into())
                    });
                    match outcome {
                        RenewOutcome::Renewed { valid_until: until, hold_ends: ends } => {
                            valid_until = until;
                            guard.lease_until(valid_until);
                            hold_ends = ends.or(hold_ends);
                            next_renewal = Instant::now() + interval;
                        }
                        RenewOutcome::Lost(code, why) => {
                            let kill_at = Instant::now() + self.kill_after;
                            break (self.lost(&mut child, &mut terminal, &why, code, kill_at).await, false);
                        }
                        RenewOutcome::Failed(_) if Instant::now() + grace >= valid_until => {
                            let why = "no renewal got through before the lease was about to end";
                            break (self.lost(&mut child, &mut terminal, why, EXIT_LOST, valid_until).await, false);
                        }
                        RenewOutcome::Failed(why) => {
                            eprintln!("lockgate run: renewing {} failed ({why}); retrying", self.name);
                            next_renewal = (Instant::now() + RETRY_RENEWAL_EVERY.min(interval)).min(give_up_at);
                        }
                    }
                }
                told = told(&mut events, grant.fence) => match told {
                    Told::Ended(code, why) => {
                        let kill_at = Instant::now() + self.kill_after;
                        break (self.lost(&mut child, &mut terminal, why, code, kill_at).await, false);
                    }
                    Told::LookNow => next_renewal = Instant::now(),
                    Told::Gone => events = None,
                },
                () = sleep_until_some(hold_ends.map(|end| end.checked_sub(grace).unwrap_or(end))) => {
                    let end = hold_ends.unwrap_or_else(Instant::now);
                    let why = "it was held for as long as its max hold allows";
                    break (self.lost(&mut child, &mut terminal, why, EXIT_MAX_HOLD, end).await, true);
                }
                signal = signals.next() => match signal {
                    // Ctrl-Z: the command's group stops, then `lockgate run` (renewals and all).
                    Signal::SIGTSTP => {
                        job_control(&mut terminal, group, None);
                        // Stopped for a while: renew now rather than trust the old schedule.
                        next_renewal = Instant::now();
                    }
                    // SIGINT too: the command is not in the terminal's foreground group, so the
                    // terminal's Ctrl-C reaches `lockgate run` alone.
                    signal => {
                        group.signal(signal);
                        if signal != Signal::SIGINT {
                            group.signal(Signal::SIGCONT);
                        }
                    }
                },
            }
        };
        guard.done();
        // Still ours (the command ended, or a bounded hold is ended before its bound): hand it
        // on now.
        if still_ours {
            self.release(&grant.token).await;
        }
        Ok(code)
    }

    /// The command exited: what it left running in its group (a worker started in the
    /// background, a `sh -c` child) is stopped before the lock is released, so no work under
    /// the lock outlives it: SIGTERM, then SIGKILL after `--kill-after` or when the lease ends.
    async fn stop_leftovers(&self, group: Group, valid_until: Instant) {
        if group.is_empty() {
            return;
        }
        eprintln!(
            "lockgate run: the command exited and left processes in its group; terminating them before releasing {}",
            self.name
        );
        group.terminate();
        let kill_at = (Instant::now() + self.kill_after).min(valid_until);
        if !group.emptied_by(kill_at).await {
            group.signal(Signal::SIGKILL);
            group.emptied_by(Instant::now() + KILLED_GROUP_WAIT).await;
        }
    }

    /// Terminates the command's whole group after the lock was lost: SIGTERM now, SIGKILL at
    /// `kill_at` if anything of it still runs. Returns `code`.
    async fn lost(
        &self,
        child: &mut CommandProcess,
        terminal: &mut Option<Terminal>,
        why: &str,
        code: u8,
        kill_at: Instant,
    ) -> u8 {
        eprintln!(
            "lockgate run: lost the lock on {}: {why}; terminating the command",
            self.name
        );
        let group = child.group();
        group.terminate();
        // Stops are of no interest any more: the group was continued and is going.
        let exited = async { while !matches!(child.next().await, ChildEvent::Exited(_)) {} };
        let ended = tokio::time::timeout_at(kill_at, exited).await.is_ok()
            && group.emptied_by(kill_at).await;
        if !ended {
            eprintln!("lockgate run: the command did not exit after SIGTERM; killing it");
            group.signal(Signal::SIGKILL);
            let _ = tokio::time::timeout(KILLED_GROUP_WAIT, child.next()).await;
            group.emptied_by(Instant::now() + KILLED_GROUP_WAIT).await;
        }
        if let Some(terminal) = terminal {
            terminal.take_back();
        }
        code
    }
}
