//! The guard: a small process that outlives `lockgate run` to stop the command's process group
//! when `lockgate run` cannot.
//!
//! `lockgate run` stops the command itself on every path it sees (a loss, a revoke, a max hold,
//! its own SIGTERM). What it cannot see is its own death: SIGKILL, the OOM killer, a crash.
//! Then nobody renews the lock, the lease ends, another holder's command starts, and the
//! command would run on beside it (hashicorp/consul#2022). `PR_SET_PDEATHSIG` would only reach
//! the direct child, and only on Linux.
//!
//! So `lockgate run` starts its own binary again as `lockgate run-guard`, in a process group of
//! its own (no terminal signal reaches it), with a pipe as its standard input, and tells it the
//! command's group and, after every renewal, until when the lease is sure to last (on
//! `CLOCK_MONOTONIC`, which both processes share). The guard acts:
//! * when the pipe closes without `done` (`lockgate run` died): SIGTERM (and SIGCONT) to the
//!   group at once, SIGKILL `--kill-after` later or when the lease ends, whichever is first;
//! * when the lease ends and `lockgate run` said nothing since (it is frozen, stopped with the
//!   job by Ctrl-Z, or stuck): SIGKILL to the group.
//!
//! This needs only a pipe, process groups and `kill`, so it holds on Linux and macOS alike.
//! Both processes killed at once (`kill -9` of each, a container's end) leave nothing to act;
//! a container's end takes the command with it.
//!
//! The protocol is lines of text: `group <pgid>`, `until <monotonic ns>`, `done`.

use std::io::{BufRead, Write};
use std::process::{Child, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, killpg, pthread_sigmask};
use nix::time::{ClockId, clock_gettime};
use nix::unistd::Pid;
use tokio::time::Instant;

/// The name of the hidden subcommand the guard runs as (`config::Command::RunGuard`).
const GUARD_SUBCOMMAND: &str = "run-guard";

/// How often the guard looks whether a group it told to go went.
const GROUP_POLL: Duration = Duration::from_millis(10);

/// `CLOCK_MONOTONIC` now, the clock `lockgate run` and its guard share.
fn monotonic() -> Duration {
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(Duration::ZERO, Duration::from)
}

/// `lockgate run`'s end of the guard.
pub(super) struct Guard {
    pipe: Option<std::io::PipeWriter>,
    process: Child,
}

impl Guard {
    /// Starts the guard, with `kill_after` as the command's grace after SIGTERM.
    pub(super) fn start(kill_after: Duration) -> std::io::Result<Self> {
        use std::os::unix::process::CommandExt;
        let (reader, writer) = std::io::pipe()?;
        let process = std::process::Command::new(std::env::current_exe()?)
            .arg(GUARD_SUBCOMMAND)
            .arg(format!("{}ms", kill_after.as_millis()))
            .stdin(reader)
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()?;
        Ok(Self {
            pipe: Some(writer),
            process,
        })
    }

    fn say(&mut self, line: &str) {
        // A guard that is gone (someone killed it) leaves `lockgate run` to act alone.
        if let Some(pipe) = &mut self.pipe
            && pipe.write_all(line.as_bytes()).is_err()
        {
            self.pipe = None;
        }
    }

    /// The command runs in `group`.
    pub(super) fn watch(&mut self, group: i32) {
        self.say(&format!("group {group}\n"));
    }

    /// The lease lasts until `valid_until` at least.
    pub(super) fn lease_until(&mut self, valid_until: Instant) {
        let left = valid_until.saturating_duration_since(Instant::now());
        self.say(&format!("until {}\n", (monotonic() + left).as_nanos()));
    }

    /// The command's group is gone (or is `lockgate run`'s to stop): the guard exits.
    pub(super) fn done(mut self) {
        self.say("done\n");
        self.pipe = None;
        let _ = self.process.wait();
    }
}

/// What `lockgate run` said.
enum Said {
    Group(Pid),
    Until(Duration),
    Done,
}

fn parse(line: &str) -> Option<Said> {
    let (word, value) = line
        .trim_end()
        .split_once(' ')
        .unwrap_or((line.trim_end(), ""));
    match word {
        "group" => value.parse().ok().map(|id| Said::Group(Pid::from_raw(id))),
        "until" => value
            .parse::<u64>()
            .ok()
            .map(|ns| Said::Until(Duration::from_nanos(ns))),
        "done" => Some(Said::Done),
        _ => None,
    }
}

/// The guard process: `lockgate run-guard KILL_AFTER`, reading what `lockgate run` says on its
/// standard input. Returns its exit status (0).
pub fn run_guard(kill_after: &str) -> u8 {
    // Terminal signals are not for the guard (it runs in a group of its own; this is for a
    // guard started by hand).
    let mut terminal = SigSet::empty();
    for signal in [
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGTSTP,
    ] {
        terminal.add(signal);
    }
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&terminal), None);
    let kill_after = humantime::parse_duration(kill_after).unwrap_or(Duration::from_secs(10));

    let (said, heard) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if let Some(what) = parse(&line)
                && said.send(what).is_err()
            {
                break;
            }
        }
    });

    let mut group = None;
    let mut until: Option<Duration> = None;
    loop {
        let wait = until.map_or(Duration::from_secs(3600), |until| {
            until.saturating_sub(monotonic())
        });
        match heard.recv_timeout(wait) {
            Ok(Said::Group(id)) => group = Some(id),
            Ok(Said::Until(at)) => until = Some(at),
            Ok(Said::Done) => return 0,
            Err(RecvTimeoutError::Timeout) => {
                if until.is_some_and(|until| monotonic() >= until) {
                    until = None;
                    if let Some(group) = group {
                        eprintln!(
                            "lockgate run (guard): the lease ended with the command still running; killing its process group {group}"
                        );
                        let _ = killpg(group, Signal::SIGKILL);
                    }
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                if let Some(group) = group {
                    stop_orphaned(group, kill_after, until);
                }
                return 0;
            }
        }
    }
}

/// `lockgate run` died with the command running: SIGTERM now, SIGKILL after `kill_after` or
/// when the lease ends, whichever is first.
fn stop_orphaned(group: Pid, kill_after: Duration, until: Option<Duration>) {
    if killpg(group, None).is_err() {
        return;
    }
    eprintln!(
        "lockgate run (guard): lockgate run died; stopping the command's process group {group}"
    );
    let _ = killpg(group, Signal::SIGTERM);
    let _ = killpg(group, Signal::SIGCONT);
    let mut kill_at = monotonic() + kill_after;
    if let Some(until) = until {
        kill_at = kill_at.min(until);
    }
    while monotonic() < kill_at {
        if killpg(group, None).is_err() {
            return;
        }
        std::thread::sleep(GROUP_POLL.min(kill_at.saturating_sub(monotonic())));
    }
    let _ = killpg(group, Signal::SIGKILL);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guard's protocol reads what `Guard` writes, and nothing else.
    #[test]
    fn the_protocol_parses_what_is_said() {
        assert!(matches!(parse("group 42\n"), Some(Said::Group(pid)) if pid.as_raw() == 42));
        assert!(matches!(
            parse("until 1500000000"),
            Some(Said::Until(at)) if at == Duration::from_nanos(1_500_000_000)
        ));
        assert!(matches!(parse("done"), Some(Said::Done)));
        assert!(parse("until soon").is_none());
        assert!(parse("kill 1").is_none());
    }
}
