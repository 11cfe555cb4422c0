//! `lockgate run` as a user runs it: the real binary, against a gateway backed by real Redis.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use tokio::process::Command;

use crate::support::answers::Answered;
use crate::support::eventually;
use crate::support::gateway::{Gateway, redis_config};
use crate::support::process::lockgate;
use crate::support::redis::RedisServer;

fn run(gw: &Gateway, args: &[&str]) -> Command {
    let mut cmd = lockgate();
    cmd.arg("run").arg("--gateway").arg(gw.url("")).args(args);
    cmd
}

async fn status(mut cmd: Command) -> (Option<i32>, String) {
    let out = cmd.output().await.expect("run lockgate");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The command's exit status is `lockgate run`'s, and the lock is released afterwards.
#[tokio::test]
async fn the_exit_status_passes_through_and_the_lock_is_released() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    for code in [0, 3, 42] {
        let (exit, stderr) = status(run(
            &gw,
            &["job", "--", "sh", "-c", &format!("exit {code}")],
        ))
        .await;
        assert_eq!(exit, Some(code), "{stderr}");
        assert_eq!(
            gw.inspect("job").await.status(),
            404,
            "released after the command"
        );
    }
    let (exit, _) = status(run(&gw, &["job", "--", "sh", "-c", "kill -TERM $$"])).await;
    assert_eq!(exit, Some(128 + 15), "death by signal is 128 + the signal");
    let (exit, _) = status(run(&gw, &["job", "--", "/no/such/program"])).await;
    assert_eq!(exit, Some(127));
}

/// The command sees the lock's name, fence and token, the fence is the one issued, and the
/// token is the one the lock held.
#[tokio::test]
async fn the_command_sees_its_fence() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("env");
    let script = format!(
        "echo \"$LOCKGATE_LOCK $LOCKGATE_FENCE $LOCKGATE_TOKEN\" > {}",
        out.display()
    );
    let (exit, stderr) = status(run(&gw, &["report:1", "--", "sh", "-c", &script])).await;
    assert_eq!(exit, Some(0), "{stderr}");
    let seen = std::fs::read_to_string(&out).expect("the command wrote its environment");
    let fields: Vec<&str> = seen.split_whitespace().collect();
    let mut conn = redis.conn().await;
    let issued: u64 = conn.get("lockgate:fences").await.expect("GET");
    assert_eq!(fields[..2], ["report:1", &issued.to_string()], "{seen}");
    let (stem, carried) = fields[2].split_once('.').expect("a token <stem>.<fence>");
    // 22 characters of entropy, then the mark of a grant with a holder (lockgate run names its
    // owner).
    assert_eq!(
        (stem.len(), &stem[22..], carried),
        (23, "o", issued.to_string().as_str()),
        "{seen}"
    );
}

/// Concurrent `lockgate run`s on one name never overlap: each command's start and end
/// timestamps form disjoint intervals.
#[tokio::test]
async fn concurrent_runs_never_overlap() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("log");
    let script = format!(
        "echo \"start $(date +%s%N)\" >> {log}; sleep 0.2; echo \"end $(date +%s%N)\" >> {log}",
        log = log.display()
    );
    let mut runs = Vec::new();
    for _ in 0..4 {
        for _ in 0..3 {
            let cmd = run(
                &gw,
                &[
                    "--wait", "30s", "--ttl", "2s", "critical", "--", "sh", "-c", &script,
                ],
            );
            runs.push(tokio::spawn(status(cmd)));
        }
    }
    for handle in runs {
        let (exit, stderr) = handle.await.expect("task");
        assert_eq!(exit, Some(0), "{stderr}");
    }
    let intervals = read_intervals(&log);
    assert_eq!(intervals.len(), 12);
    for pair in intervals.windows(2) {
        assert!(
            pair[0].1 <= pair[1].0,
            "critical sections overlap: {:?} and {:?}",
            pair[0],
            pair[1]
        );
    }
}

/// `lockgate run --permits 2`: eight runs of one semaphore, at most two commands at once
/// (and two at once at some point), each seeing its permit's fence; nothing held after.
#[tokio::test]
async fn runs_under_a_semaphore_never_exceed_its_permits() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("log");
    let script = format!(
        "echo \"start $(date +%s%N) $LOCKGATE_FENCE\" >> {log}; sleep 0.3; echo \"end $(date +%s%N) $LOCKGATE_FENCE\" >> {log}",
        log = log.display()
    );
    let runs: Vec<_> = (0..8)
        .map(|_| {
            let cmd = run(
                &gw,
                &[
                    "--permits",
                    "2",
                    "--wait",
                    "30s",
                    "--ttl",
                    "2s",
                    "pool",
                    "--",
                    "sh",
                    "-c",
                    &script,
                ],
            );
            tokio::spawn(status(cmd))
        })
        .collect();
    for handle in runs {
        let (exit, stderr) = handle.await.expect("task");
        assert_eq!(exit, Some(0), "{stderr}");
    }
    let text = std::fs::read_to_string(&log).expect("log");
    let mut events: Vec<(u128, i32, u64)> = text
        .lines()
        .map(|line| {
            let mut parts = line.split(' ');
            let kind = parts.next().expect("kind");
            let at = parts.next().expect("time").parse().expect("nanoseconds");
            let fence = parts.next().expect("fence").parse().expect("a fence");
            (at, if kind == "start" { 1 } else { -1 }, fence)
        })
        .collect();
    assert_eq!(events.len(), 16, "{text}");
    events.sort_unstable_by_key(|&(at, delta, _)| (at, delta));
    let (mut running, mut most) = (0, 0);
    for (_, delta, _) in &events {
        running += delta;
        most = most.max(running);
    }
    assert_eq!(
        most, 2,
        "at most (and at some point) two commands at once: {text}"
    );
    let mut fences: Vec<u64> = events.iter().map(|&(_, _, fence)| fence).collect();
    fences.sort_unstable();
    fences.dedup();
    assert_eq!(fences.len(), 8, "a fence per permit: {text}");
    let permits = gw.client().semaphores();
    let seen = permits
        .inspect_as::<serde_json::Value>("pool")
        .await
        .done(200);
    assert_eq!(seen["in_use"], 0, "every permit given back: {seen}");
}

/// `lockgate run --shared`: readers run together, a writer (a run without `--shared`) alone.
#[tokio::test]
async fn shared_runs_run_together_and_writers_alone() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("log");
    let script = |kind: &str| {
        format!(
            "echo \"start $(date +%s%N) {kind}\" >> {log}; sleep 0.3; echo \"end $(date +%s%N) {kind}\" >> {log}",
            log = log.display()
        )
    };
    let (reader, writer) = (script("r"), script("w"));
    let mut runs = Vec::new();
    for i in 0..6 {
        let mut args = vec!["--wait", "30s", "--ttl", "2s"];
        if i % 3 != 2 {
            args.push("--shared");
        }
        let body = if i % 3 != 2 { &reader } else { &writer };
        args.extend(["doc", "--", "sh", "-c", body]);
        runs.push(tokio::spawn(status(run(&gw, &args))));
    }
    for handle in runs {
        let (exit, stderr) = handle.await.expect("task");
        assert_eq!(exit, Some(0), "{stderr}");
    }
    let text = std::fs::read_to_string(&log).expect("log");
    let mut events: Vec<(u128, i32, bool)> = text
        .lines()
        .map(|line| {
            let mut parts = line.split(' ');
            let kind = parts.next().expect("kind");
            let at = parts.next().expect("time").parse().expect("nanoseconds");
            let writer = parts.next() == Some("w");
            (at, if kind == "start" { 1 } else { -1 }, writer)
        })
        .collect();
    assert_eq!(events.len(), 12, "{text}");
    events.sort_unstable_by_key(|&(at, delta, _)| (at, delta));
    let (mut readers, mut writers, mut most_readers) = (0, 0, 0);
    for (_, delta, writer) in events {
        if writer {
            writers += delta;
        } else {
            readers += delta;
        }
        most_readers = most_readers.max(readers);
        assert!(
            writers == 0 || (writers == 1 && readers == 0),
            "a writer ran with others: {text}"
        );
    }
    assert!(most_readers >= 2, "readers ran together: {text}");
}

/// `lockgate run a b -- …` holds both locks while the command runs: runs of overlapping sets
/// never overlap, and the command sees the set's names in `LOCKGATE_LOCK`.
#[tokio::test]
async fn runs_of_overlapping_sets_never_overlap() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("log");
    let script = format!(
        "echo \"start $(date +%s%N) $LOCKGATE_LOCK\" >> {log}; sleep 0.2; echo \"end $(date +%s%N) $LOCKGATE_LOCK\" >> {log}",
        log = log.display()
    );
    let sets: [&[&str]; 3] = [
        &["acct:1", "acct:2"],
        &["acct:2", "acct:3"],
        &["acct:3", "acct:1"],
    ];
    let mut runs = Vec::new();
    for _ in 0..2 {
        for set in sets {
            let mut args = vec!["--wait", "30s", "--ttl", "2s"];
            args.extend(set);
            args.extend(["--", "sh", "-c", &script]);
            runs.push(tokio::spawn(status(run(&gw, &args))));
        }
    }
    for handle in runs {
        let (exit, stderr) = handle.await.expect("task");
        assert_eq!(exit, Some(0), "{stderr}");
    }
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(
        text.contains("acct:1,acct:2"),
        "LOCKGATE_LOCK names the set: {text}"
    );
    // Every two sets overlap, so no two commands ran at once.
    let intervals = read_intervals_of_first_two_fields(&text);
    assert_eq!(intervals.len(), 6, "{text}");
    for pair in intervals.windows(2) {
        assert!(
            pair[0].1 <= pair[1].0,
            "overlapping sets ran together: {text}"
        );
    }
    for name in ["acct:1", "acct:2", "acct:3"] {
        assert_eq!(gw.inspect(name).await.status(), 404, "{name} released");
    }
}

/// (start, end) pairs from lines `start|end <ns> …`, in order of start.
fn read_intervals_of_first_two_fields(text: &str) -> Vec<(u128, u128)> {
    let mut events: Vec<(u128, bool)> = text
        .lines()
        .map(|line| {
            let mut parts = line.split(' ');
            let kind = parts.next().expect("kind");
            let at = parts.next().expect("time").parse().expect("nanoseconds");
            (at, kind == "start")
        })
        .collect();
    events.sort_unstable();
    events
        .chunks(2)
        .map(|pair| {
            assert!(
                pair.len() == 2 && pair[0].1 && !pair[1].1,
                "events do not alternate: {events:?}"
            );
            (pair[0].0, pair[1].0)
        })
        .collect()
}

/// (start, end) pairs from the log, in order of start.
fn read_intervals(log: &Path) -> Vec<(u128, u128)> {
    read_intervals_of_first_two_fields(&std::fs::read_to_string(log).expect("log"))
}

/// A lock lost while the command runs terminates the command (SIGTERM) and exits 76.
#[tokio::test]
async fn a_lost_lock_terminates_the_command_with_76() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let (started, terminated) = (dir.path().join("started"), dir.path().join("terminated"));
    let script = format!(
        "trap 'touch {term}; exit 0' TERM; touch {start}; while :; do sleep 0.05; done",
        term = terminated.display(),
        start = started.display()
    );
    let child = run(
        &gw,
        &["--ttl", "600ms", "doomed", "--", "sh", "-c", &script],
    )
    .stderr(Stdio::piped())
    .spawn();
    let child = child.expect("spawn lockgate run");
    eventually(Duration::from_secs(5), "the command started", || async {
        started.exists().then_some(())
    })
    .await;
    let mut conn = redis.conn().await;
    let _: () = conn.del("lockgate:{doomed}").await.expect("DEL");
    let lost = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("exits")
        .expect("output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(76), "{stderr}");
    assert!(terminated.exists(), "the command was sent SIGTERM");
    assert!(
        lost.elapsed() < Duration::from_secs(2),
        "noticed after {:?}",
        lost.elapsed()
    );
    assert!(stderr.contains("lost the lock on doomed"), "{stderr}");
}

/// A lock not acquired within --wait exits 75 without running the command.
#[tokio::test]
async fn a_lock_not_acquired_within_wait_exits_75() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    gw.locks()
        .acquire("taken", serde_json::json!({}))
        .await
        .done(201);
    let dir = tempfile::tempdir().expect("temp dir");
    let ran = dir.path().join("ran");
    let started = Instant::now();
    let script = format!("touch {}", ran.display());
    let (exit, stderr) = status(run(
        &gw,
        &["--wait", "300ms", "taken", "--", "sh", "-c", &script],
    ))
    .await;
    assert_eq!(exit, Some(75), "{stderr}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(!ran.exists(), "the command must not run without the lock");
    let (exit, _) = status(run(&gw, &["--wait", "0s", "taken", "--", "true"])).await;
    assert_eq!(exit, Some(75));
}

/// An unreachable gateway and bad arguments have their own exit codes.
#[tokio::test]
async fn gateway_and_usage_errors_have_their_own_codes() {
    let port = crate::support::redis::free_port();
    let mut cmd = lockgate();
    cmd.args([
        "run",
        "--gateway",
        &format!("http://127.0.0.1:{port}"),
        "x",
        "--",
        "true",
    ]);
    let (exit, stderr) = status(cmd).await;
    assert_eq!(exit, Some(69), "{stderr}");
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let (exit, stderr) = status(run(&gw, &["bad name", "--", "true"])).await;
    assert_eq!(exit, Some(64), "{stderr}");
    let (exit, _) = status(run(&gw, &["x"])).await;
    assert_eq!(exit, Some(64), "a command is required");
}

/// Against a gateway with API keys, `lockgate run` authenticates with `LOCKGATE_API_KEY`;
/// without a key it is refused (69) and the command does not run.
#[tokio::test]
async fn runs_authenticate_with_an_api_key() {
    let redis = RedisServer::start();
    let mut config = redis_config(&redis.url());
    config.api_keys = Some(
        lockgate::access::ApiKeys::from_json(
            r#"[{"name": "jobs", "key": "jobs-key-0123456789", "prefixes": ["jobs:"]}]"#,
        )
        .expect("valid keys"),
    );
    let gw = Gateway::start(config).await;
    let mut with_key = run(&gw, &["jobs:1", "--", "sh", "-c", "exit 7"]);
    with_key.env("LOCKGATE_API_KEY", "jobs-key-0123456789");
    let (exit, stderr) = status(with_key).await;
    assert_eq!(exit, Some(7), "{stderr}");
    let without = run(&gw, &["jobs:1", "--", "sh", "-c", "exit 7"]);
    let (exit, stderr) = status(without).await;
    assert_eq!(exit, Some(69), "{stderr}");
    assert!(!stderr.contains("jobs-key"), "{stderr}");
}

/// The lock `lockgate run` takes names its holder: `<hostname>:<pid>` by default, or what
/// `--owner` and `--metadata` say.
#[tokio::test]
async fn the_lock_names_who_runs_the_command() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    let cases = [
        (vec![], None),
        (
            vec![
                "--owner",
                "api-1",
                "--metadata",
                r#"{"addr":"10.0.0.7:8080"}"#,
            ],
            Some("api-1"),
        ),
    ];
    for (flags, owner) in cases {
        let mut args = flags.clone();
        args.extend(["owned", "--", "sleep", "30"]);
        let mut cmd = run(&gw, &args);
        cmd.kill_on_drop(true);
        let child = cmd.spawn().expect("spawn lockgate run");
        let expected = owner.map_or_else(
            || format!("{}:{}", hostname.trim(), child.id().expect("pid")),
            str::to_owned,
        );
        let seen = eventually(Duration::from_secs(10), "the lock is held", || async {
            let response = gw.inspect("owned").await;
            if response.status() != 200 {
                return None;
            }
            response.json::<serde_json::Value>().await.ok()
        })
        .await;
        assert_eq!(seen["owner"], expected.as_str(), "{seen}");
        if owner.is_some() {
            assert_eq!(seen["metadata"]["addr"], "10.0.0.7:8080", "{seen}");
        }
        let pid = nix::unistd::Pid::from_raw(child.id().expect("pid") as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        let out = child.wait_with_output().await.expect("wait");
        assert_eq!(out.status.code(), Some(128 + 15));
    }
}

/// `lockgate run --permits 3` on a semaphore held with a limit of 5 stops at once, naming
/// `permits-mismatch` (exit 69), after one request: a refusal retrying cannot change ends the
/// wait, with or without `--wait`.
#[tokio::test]
async fn a_permits_mismatch_ends_the_run_at_once() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let body = serde_json::json!({"permits": 5, "ttl_ms": 60_000});
    let taken = gw
        .client()
        .semaphores()
        .acquire("pm", &body, None, None)
        .await;
    taken.done(201);
    for wait in [None, Some("1s")] {
        let mut args = vec!["--permits", "3"];
        if let Some(wait) = wait {
            args.extend(["--wait", wait]);
        }
        args.extend(["pm", "--", "true"]);
        let started = Instant::now();
        let (exit, stderr) = status(run(&gw, &args)).await;
        assert_eq!(exit, Some(69), "{wait:?}: {stderr}");
        assert!(stderr.contains("permits-mismatch"), "{wait:?}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{wait:?}: {:?}",
            started.elapsed()
        );
    }
    let metrics = gw.metrics_text().await;
    let refused = metrics
        .lines()
        .find(|line| {
            line.starts_with("lockgate_requests_total{operation=\"acquire\",kind=\"semaphore\",outcome=\"permits-mismatch\"}")
        })
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|n| n.parse::<u64>().ok());
    assert_eq!(refused, Some(2), "one request per run:\n{metrics}");
}

/// `lockgate run --fair`: runs wait in the lock's queue, a `--priority 9` run ahead of an
/// earlier one at the default priority; `--priority` without `--fair` is a usage error.
#[tokio::test]
async fn fair_runs_go_in_queue_order() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("log");
    let locks = gw.locks();
    let holder = locks
        .acquire("queue", serde_json::json!({"ttl_ms": 60_000}))
        .await
        .done(201);
    let queued = || async {
        let (_, seen) = crate::support::status_json(gw.inspect("queue").await).await;
        seen["queued"].as_u64().unwrap_or(0)
    };
    let mut runs = Vec::new();
    for (i, priority) in [(1, "0"), (2, "9")] {
        let script = format!("echo {priority} >> {}", log.display());
        let cmd = run(
            &gw,
            &[
                "--fair",
                "--priority",
                priority,
                "--wait",
                "30s",
                "queue",
                "--",
                "sh",
                "-c",
                &script,
            ],
        );
        runs.push(tokio::spawn(status(cmd)));
        eventually(Duration::from_secs(10), "the run queued", || async {
            (queued().await == i).then_some(())
        })
        .await;
    }
    locks.release("queue", &holder.token).await.done(204);
    for handle in runs {
        let (exit, stderr) = handle.await.expect("task");
        assert_eq!(exit, Some(0), "{stderr}");
    }
    let order = std::fs::read_to_string(&log).expect("log");
    assert_eq!(order, "9\n0\n", "the higher priority ran first");

    let (exit, stderr) = status(run(&gw, &["--priority", "3", "queue", "--", "true"])).await;
    assert_eq!(exit, Some(64), "{stderr}");
}

/// `lockgate run --verbose` says, while it waits, who holds the lock and for how long, and
/// then what it got.
#[tokio::test]
async fn verbose_says_who_holds_the_lock_and_what_the_run_got() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let locks = gw.locks();
    let holder = locks
        .acquire(
            "busy",
            serde_json::json!({"ttl_ms": 60_000, "owner": "pod-a"}),
        )
        .await
        .done(201);
    let held_by = format!("held by \"pod-a\" (fence {}) for another", holder.fence);
    // Giving up at once says who holds it too.
    let (exit, stderr) = status(run(&gw, &["-v", "--wait", "0", "busy", "--", "true"])).await;
    assert_eq!(exit, Some(75), "{stderr}");
    assert!(stderr.contains(&held_by), "{stderr}");
    let mut cmd = run(&gw, &["--verbose", "--wait", "30s", "busy", "--", "true"]);
    cmd.stderr(Stdio::piped()).kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn lockgate run");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut said = Vec::new();
    // The run says who holds the lock before anyone releases it: the release waits for it.
    let waiting = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.expect("stderr") {
            said.push(line.clone());
            if line.contains("waiting for busy") {
                return line;
            }
        }
        panic!("lockgate run ended without saying it waits: {said:?}");
    })
    .await
    .expect("lockgate run says it waits");
    assert!(waiting.contains(&held_by), "{waiting}");
    locks.release("busy", &holder.token).await.done(204);
    let status = child.wait().await.expect("wait");
    while let Some(line) = lines.next_line().await.expect("stderr") {
        said.push(line);
    }
    assert_eq!(status.code(), Some(0), "{said:?}");
    assert!(
        said.iter()
            .any(|line| line.starts_with("lockgate run: acquired busy (fence ")),
        "{said:?}"
    );
}
