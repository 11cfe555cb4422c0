//! The command's side of `lockgate run`: its process group, the signals `lockgate run` passes
//! on to it, the terminal it may need, and the exit status it ends with.
//!
//! The command runs in a process group of its own (the `setpgid` of coreutils' `timeout`), so
//! that every signal `lockgate run` sends reaches the whole tree the command starts — a worker
//! behind `sh -c` without `exec`, a Makefile's recipes, a script's background jobs — and not
//! only the direct child. What leaves the group on purpose (`setsid`, a daemon's double fork,
//! a shell with job control of its own) leaves it; docs/api.md says so.
//!
//! A group of its own is not the terminal's foreground group, so `lockgate run` does a small
//! part of a shell's job control: SIGINT from the terminal (which reaches `lockgate run`) is
//! passed on to the group; a command that reads from (or sets up) the terminal is handed it
//! (`tcsetpgrp`) when it tries; Ctrl-Z stops `lockgate run` together with the command, so the
//! shell sees the job stopped, and `fg` or `bg` resumes both.

use std::io::{self, IsTerminal};
use std::os::unix::process::CommandExt;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, killpg, pthread_sigmask, raise};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpgrp, tcgetpgrp, tcsetpgrp};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::Instant;

use super::{EXIT_CANNOT_EXECUTE, EXIT_GATEWAY, Failure, fail};

/// The signals `lockgate run` handles: SIGTERM, SIGHUP and SIGINT (passed on to the command's
/// group while it runs), and SIGTSTP (the terminal's Ctrl-Z: the group stops, then
/// `lockgate run` itself).
pub(super) struct Signals {
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
    stop: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    pub(super) fn new() -> Result<Self, Failure> {
        let handle = |kind| {
            signal(kind).map_err(|e| fail(EXIT_GATEWAY, format!("cannot handle signals: {e}")))
        };
        Ok(Self {
            terminate: handle(SignalKind::terminate())?,
            hangup: handle(SignalKind::hangup())?,
            interrupt: handle(SignalKind::interrupt())?,
            // Taken over only once the command runs: while waiting for the lock, Ctrl-Z stops
            // `lockgate run` as any program.
            stop: None,
        })
    }

    /// From now on SIGTSTP is ours to pass on (see [`Signals::next`]).
    pub(super) fn handle_stop(&mut self) -> Result<(), Failure> {
        let stop = signal(SignalKind::from_raw(Signal::SIGTSTP as i32))
            .map_err(|e| fail(EXIT_GATEWAY, format!("cannot handle signals: {e}")))?;
        self.stop = Some(stop);
        Ok(())
    }

    pub(super) async fn next(&mut self) -> Signal {
        let stop = async {
            match &mut self.stop {
                Some(stop) => stop.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.terminate.recv() => Signal::SIGTERM,
            _ = self.hangup.recv() => Signal::SIGHUP,
            _ = self.interrupt.recv() => Signal::SIGINT,
            _ = stop => Signal::SIGTSTP,
        }
    }
}

/// The command's process group (its id is the command's pid).
#[derive(Debug, Clone, Copy)]
pub(super) struct Group(Pid);

/// How often a group that was told to go is looked at to see whether it went.
const GROUP_POLL: Duration = Duration::from_millis(10);

impl Group {
    pub(super) fn id(self) -> i32 {
        self.0.as_raw()
    }

    pub(super) fn signal(self, signal: Signal) {
        let _ = killpg(self.0, signal);
    }

    /// SIGTERM to every process of the group, then SIGCONT: a stopped process acts on SIGTERM
    /// only once it runs again (as `timeout` does).
    pub(super) fn terminate(self) {
        self.signal(Signal::SIGTERM);
        self.signal(Signal::SIGCONT);
    }

    /// Whether no process is left in the group.
    pub(super) fn is_empty(self) -> bool {
        // Members that are our children (we are PID 1 in a container, or they were orphaned
        // to us) must be reaped, or their zombies count as members for ever.
        while let Ok(status) = waitpid(Pid::from_raw(-self.id()), Some(WaitPidFlag::WNOHANG)) {
            if status == WaitStatus::StillAlive {
                break;
            }
        }
        killpg(self.0, None) == Err(Errno::ESRCH)
    }

    /// Waits until the group is empty or `deadline` passes; whether it emptied.
    pub(super) async fn emptied_by(self, deadline: Instant) -> bool {
        loop {
            if self.is_empty() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(GROUP_POLL.min(deadline - Instant::now())).await;
        }
    }
}

/// What became of the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ChildEvent {
    /// It ended, with this exit status (the shell's convention).
    Exited(u8),
    /// It was stopped by this signal.
    Stopped(Signal),
}

/// The command, started as the leader of its own process group.
pub(super) struct CommandProcess {
    pid: Pid,
    exited: Option<u8>,
    /// Wakes [`CommandProcess::next`]; registered before the command starts, so that no
    /// change of state is missed.
    children: tokio::signal::unix::Signal,
}

impl CommandProcess {
    pub(super) fn spawn(mut command: std::process::Command) -> io::Result<Self> {
        let children = signal(SignalKind::child())?;
        // What the command leaves behind when it exits is re-parented to `lockgate run`
        // instead of init, so `Group::is_empty` reaps it at once (as tini does) rather than
        // counting its zombie until init gets to it.
        #[cfg(target_os = "linux")]
        let _ = nix::sys::prctl::set_child_subreaper(true);
        let child = command.process_group(0).spawn()?;
        let pid = Pid::from_raw(i32::try_from(child.id()).map_err(io::Error::other)?);
        // The child is waited for with waitpid below (which also reports stops), not by std.
        drop(child);
        Ok(Self {
            pid,
            exited: None,
            children,
        })
    }

    pub(super) fn group(&self) -> Group {
        Group(self.pid)
    }

    /// The command's next change of state: stopped, or ended (and then always ended).
    pub(super) async fn next(&mut self) -> ChildEvent {
        loop {
            if let Some(code) = self.exited {
                return ChildEvent::Exited(code);
            }
            let flags = WaitPidFlag::WNOHANG | WaitPidFlag::WUNTRACED;
            match waitpid(self.pid, Some(flags)) {
                Ok(WaitStatus::Exited(_, code)) => {
                    self.exited = Some(u8::try_from(code & 0xff).unwrap_or(1));
                }
                Ok(WaitStatus::Signaled(_, signal, _)) => {
                    self.exited = Some(u8::try_from(128 + signal as i32).unwrap_or(255));
                }
                Ok(WaitStatus::Stopped(_, signal)) => return ChildEvent::Stopped(signal),
                Err(Errno::EINTR) => {}
                // Not ours to wait for any more: nothing else can be known of it.
                Err(_) => self.exited = Some(EXIT_CANNOT_EXECUTE),
                Ok(_) => {
                    self.children.recv().await;
                }
            }
        }
    }
}

/// The terminal `lockgate run` was started in the foreground of (its standard input), if any:
/// what job control needs.
pub(super) struct Terminal {
    /// `lockgate run`'s own process group, the shell's job.
    own: Pid,
    /// The command's group was made the terminal's foreground.
    handed: bool,
}

impl Terminal {
    /// The terminal on standard input, when `lockgate run` is in its foreground.
    pub(super) fn of_foreground_job() -> Option<Self> {
        let stdin = io::stdin();
        if !stdin.is_terminal() {
            return None;
        }
        let own = getpgrp();
        (tcgetpgrp(&stdin).ok() == Some(own)).then_some(Self { own, handed: false })
    }

    /// Whether `lockgate run`'s job is the terminal's foreground (after `fg`, not after `bg`).
    fn ours(&self) -> bool {
        self.handed || tcgetpgrp(io::stdin()).ok() == Some(self.own)
    }

    /// Makes the command's group the terminal's foreground, if the terminal is ours to give.
    fn hand_to(&mut self, group: Group) -> bool {
        if self.ours() && without_sigttou(|| tcsetpgrp(io::stdin(), group.0)).is_ok() {
            self.handed = true;
        }
        self.handed
    }

    /// Takes the terminal back for `lockgate run`'s job, if it was handed to the command.
    pub(super) fn take_back(&mut self) {
        if self.handed {
            let _ = without_sigttou(|| tcsetpgrp(io::stdin(), self.own));
            self.handed = false;
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.take_back();
    }
}

/// Runs `f` with SIGTTOU blocked: a background process that sets the terminal's foreground
/// group is sent SIGTTOU (and stopped) unless it blocks or ignores it. `lockgate run` runs on
/// one thread, so blocking it on this thread blocks it for the process.
fn without_sigttou<T>(f: impl FnOnce() -> T) -> T {
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let mut before = SigSet::empty();
    let blocked = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut before)).is_ok();
    let result = f();
    if blocked {
        let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&before), None);
    }
    result
}

/// Job control for the command's group: what to do when the command stopped (`stopped`) or
/// when Ctrl-Z reached `lockgate run` (`None`).
///
/// A command stopped for wanting the terminal (SIGTTIN, SIGTTOU) is handed it and continued,
/// when the terminal is ours to give. Any other stop, with a terminal, stops `lockgate run`
/// too, after taking the terminal back, so the shell sees its job stopped; when the shell
/// continues it, the command's group is continued as well (and handed the terminal again if it
/// had it and the job is in the foreground). Without a terminal, a command stopped by
/// someone's SIGSTOP is left as it is. While stopped, `lockgate run` renews nothing: the guard
/// process (see `guard.rs`) kills the group if the lease ends meanwhile.
pub(super) fn job_control(terminal: &mut Option<Terminal>, group: Group, stopped: Option<Signal>) {
    let wants_terminal = matches!(stopped, Some(Signal::SIGTTIN | Signal::SIGTTOU));
    if let Some(term) = terminal.as_mut()
        && wants_terminal
        && term.hand_to(group)
    {
        group.signal(Signal::SIGCONT);
        return;
    }
    if terminal.is_none() && stopped.is_some() {
        return;
    }
    if stopped.is_none() {
        group.signal(Signal::SIGTSTP);
    }
    let had_terminal = terminal.as_ref().is_some_and(|term| term.handed);
    if let Some(term) = terminal.as_mut() {
        term.take_back();
    }
    // Stops here until the shell's SIGCONT.
    let _ = raise(Signal::SIGSTOP);
    if let Some(term) = terminal.as_mut()
        && (had_terminal || wants_terminal)
    {
        term.hand_to(group);
    }
    group.signal(Signal::SIGCONT);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command's death by a signal is 128 + the signal, as a shell says.
    #[tokio::test]
    async fn exit_codes_follow_the_shell() {
        for (script, expected) in [("exit 7", 7), ("exit 0", 0), ("kill -TERM $$", 128 + 15)] {
            let mut command = std::process::Command::new("sh");
            command.args(["-c", script]);
            let mut process = CommandProcess::spawn(command).expect("spawn sh");
            assert_eq!(
                process.next().await,
                ChildEvent::Exited(expected),
                "{script}"
            );
            assert!(process.group().is_empty(), "{script}");
        }
    }
}
