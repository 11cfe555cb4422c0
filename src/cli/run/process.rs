//! The command's side of `lockgate run`: the signals it passes on, and the exit status it
//! ends with.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::Child;
use tokio::signal::unix::{SignalKind, signal};

use super::{EXIT_GATEWAY, Failure, fail};

/// The signals `lockgate run` handles: SIGTERM and SIGHUP (passed on to the command while it
/// runs), SIGINT (which a terminal sends the command itself).
pub(super) struct Signals {
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
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
        })
    }

    pub(super) async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.terminate.recv() => Signal::SIGTERM,
            _ = self.hangup.recv() => Signal::SIGHUP,
            _ = self.interrupt.recv() => Signal::SIGINT,
        }
    }
}

pub(super) fn forward(child: &Child, signal: Signal) {
    if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

/// The shell's convention: the exit code, or 128 + the signal that ended the process.
pub(super) fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(255),
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(exit_code(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 128 + 15);
    }
}
