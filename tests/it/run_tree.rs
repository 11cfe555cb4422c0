//! `lockgate run` owns the command's whole process tree: a worker the command starts (behind
//! `sh -c`, ignoring SIGTERM) never works beside the next holder's command, whether the
//! gateway froze, `lockgate run` was SIGKILLed, or the command exited and left it behind.
//!
//! Each test's worker writes a beat (`date +%s%N`) every 20 ms, and the next holder's command
//! writes the time it started; every beat must come before that start, and the worker must be
//! gone. The worker's loop is bounded (about 10 s), so a failing test leaves nothing behind.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use crate::support::eventually;
use crate::support::gateway::{Gateway, redis_config};
use crate::support::process::{ServerProcess, lockgate};
use crate::support::redis::RedisServer;

/// Where a test's worker and next holder write.
struct Traces {
    _dir: tempfile::TempDir,
    beats: PathBuf,
    worker_pid: PathBuf,
    next_started: PathBuf,
}

impl Traces {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = |name: &str| dir.path().join(name);
        Self {
            beats: path("beats"),
            worker_pid: path("worker.pid"),
            next_started: path("next-started"),
            _dir: dir,
        }
    }

    /// A command that starts a worker (its own `sh`, ignoring SIGTERM, beating every 20 ms)
    /// in the background; with `wait`, the command waits for it, without, it exits once the
    /// worker has beaten twice (so that the worker is seen running however slowly a loaded
    /// machine starts it: `--kill-after` may stop it before its first beat otherwise).
    fn command_with_worker(&self, wait: bool) -> String {
        let worker = self.beats.with_file_name("worker.sh");
        let script = format!(
            "trap '' TERM\necho $$ > {pid}\ni=0\nwhile [ $i -lt 500 ]; do date +%s%N >> {beats}; sleep 0.02; i=$((i+1)); done\n",
            pid = self.worker_pid.display(),
            beats = self.beats.display(),
        );
        std::fs::write(&worker, script).expect("write the worker's script");
        let end = if wait {
            "wait".to_owned()
        } else {
            format!(
                "until [ -f {beats} ] && [ \"$(wc -l < {beats})\" -ge 2 ]; do sleep 0.01; done; exit 0",
                beats = self.beats.display()
            )
        };
        format!("sh {} & {end}", worker.display())
    }

    /// The next holder's command: writes when it started.
    fn next_command(&self) -> String {
        format!("date +%s%N > {}", self.next_started.display())
    }

    async fn worker_beating(&self) {
        eventually(Duration::from_secs(10), "the worker beats", || async {
            std::fs::read_to_string(&self.beats)
                .is_ok_and(|beats| beats.lines().count() >= 2)
                .then_some(())
        })
        .await;
    }

    /// Every beat came before the next holder's command started, and the worker is gone.
    fn assert_worker_stopped_before_next_holder(&self) {
        let next: u128 = read_number(&self.next_started);
        let beats = std::fs::read_to_string(&self.beats).expect("beats");
        let late: Vec<u128> = beats
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .filter(|&beat| beat >= next)
            .collect();
        let pid = read_number(&self.worker_pid);
        let running = running(pid);
        if running {
            // Nothing left behind by a failing test.
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        assert!(
            late.is_empty(),
            "the worker beat {} times after the next holder's command started, the last {} ms after",
            late.len(),
            late.iter()
                .max()
                .map_or(0, |beat| (beat - next) / 1_000_000)
        );
        assert!(!running, "the worker still runs");
    }
}

fn read_number(path: &Path) -> u128 {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{}: {text:?}: {e}", path.display()))
}

/// Whether `pid` is a process that runs (a zombie does not).
fn running(pid: u128) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the command's name in parentheses.
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X'))
    })
}

fn run(gateway: &str, args: &[&str]) -> Command {
    let mut cmd = lockgate();
    cmd.arg("run").arg("--gateway").arg(gateway).args(args);
    cmd
}

/// The first holder, through `gateway`: `lockgate run` with `flags`, its command starting the
/// worker (and waiting for it, with `wait`).
fn first_holder(
    gateway: &str,
    flags: &[&str],
    traces: &Traces,
    wait: bool,
) -> tokio::process::Child {
    let command = traces.command_with_worker(wait);
    let mut args = flags.to_vec();
    args.extend(["tree", "--", "sh", "-c", &command]);
    run(gateway, &args)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn lockgate run")
}

/// The next holder, through `gateway`: waits for the lock, and exits 0 once its command ran.
async fn next_holder(gateway: &str, traces: &Traces) {
    let out = run(
        gateway,
        &[
            "--wait",
            "15s",
            "tree",
            "--",
            "sh",
            "-c",
            &traces.next_command(),
        ],
    )
    .output()
    .await
    .expect("run the next holder");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A frozen gateway: renewals stop, and the command's whole tree (a worker behind `sh -c`
/// that ignores SIGTERM) is stopped before the lease ends, so the next holder's command,
/// through another gateway, never runs beside it.
#[tokio::test]
async fn a_frozen_gateway_stops_the_whole_tree_before_the_next_holder() {
    let redis = RedisServer::start();
    let frozen = ServerProcess::start(&["--redis-url", &redis.url()], &[]).await;
    let other = Gateway::start(redis_config(&redis.url())).await;
    let traces = Traces::new();
    let first = first_holder(&frozen.url(""), &["--ttl", "1s"], &traces, true);
    traces.worker_beating().await;
    frozen.signal("STOP");
    next_holder(&other.url(""), &traces).await;
    let out = tokio::time::timeout(Duration::from_secs(10), first.wait_with_output())
        .await
        .expect("lockgate run exits")
        .expect("its output");
    frozen.signal("CONT");
    traces.assert_worker_stopped_before_next_holder();
    assert_eq!(
        out.status.code(),
        Some(76),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `lockgate run` SIGKILLed (the OOM killer, `kill -9`): nobody renews, and its guard stops the
/// command's whole tree by the time the lease ends, before the next holder's command starts.
#[tokio::test]
async fn a_killed_lockgate_run_takes_the_whole_tree_with_it() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let traces = Traces::new();
    let mut first = first_holder(&gw.url(""), &["--ttl", "1s"], &traces, true);
    traces.worker_beating().await;
    first.start_kill().expect("SIGKILL lockgate run");
    let _ = first.wait().await;
    next_holder(&gw.url(""), &traces).await;
    traces.assert_worker_stopped_before_next_holder();
}

/// A command that exits and leaves a worker running in its group: the worker is terminated
/// (SIGKILL after --kill-after, as it ignores SIGTERM) before the lock is released, and
/// `lockgate run` exits with the command's status.
#[tokio::test]
async fn what_the_command_leaves_behind_is_stopped_before_the_release() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let traces = Traces::new();
    let first = first_holder(&gw.url(""), &["--kill-after", "300ms"], &traces, false);
    traces.worker_beating().await;
    next_holder(&gw.url(""), &traces).await;
    let out = first.wait_with_output().await.expect("lockgate run exits");
    traces.assert_worker_stopped_before_next_holder();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("left processes in its group"), "{stderr}");
}
