//! The `lockgate` binary as an operator meets it: exit codes, configuration errors (one line
//! for bad settings, clap's whole message for the command line, environment variables
//! named), the startup lines, and `--dev` serving without Redis.

use std::process::Stdio;
use std::time::Duration;

use lockgate::client::Client;

use crate::support::answers::Answered;
use crate::support::eventually;
use crate::support::process::lockgate;
use crate::support::redis::free_port;

async fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = lockgate().args(args).output().await.expect("run lockgate");
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("utf-8");
    (out.status.code(), text(out.stdout), text(out.stderr))
}

/// Without a Redis URL and without --dev the server refuses to start: exit 64, one line that
/// says how to fix it.
#[tokio::test]
async fn no_store_means_exit_64_with_one_line() {
    let (code, stdout, stderr) = run(&[]).await;
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--redis-url") && stderr.contains("--dev"),
        "{stderr}"
    );
}

/// What the command line parser refuses (an unknown flag, a value that does not parse, two
/// stores, a subcommand without its command) is a configuration error too: exit 64, and clap's
/// whole message, not cut: the error first, then its hints and where to read more.
#[tokio::test]
async fn command_line_errors_mean_exit_64_with_the_whole_message() {
    for (args, says) in [
        (&["--no-such-flag"][..], "'--no-such-flag'"),
        (
            &["--dev", "--default-ttl", "soon"],
            "a duration such as 30s",
        ),
        (
            &["--dev", "--redis-url", "redis://localhost"],
            "--redis-url",
        ),
        (&["run", "lk"], "<COMMAND>"),
    ] {
        let (code, _, stderr) = run(args).await;
        assert_eq!(code, Some(64), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(
            stderr.contains("For more information, try '--help'."),
            "{args:?}: {stderr}"
        );
    }
    let (_, _, stderr) = run(&["run", "lk"]).await;
    assert!(stderr.contains("Usage: lockgate run"), "{stderr}");
}

/// A bad value set through the environment names the variable as well as the flag, whether
/// the parser or the validation refuses it.
#[tokio::test]
async fn errors_name_the_environment_variable() {
    for (var, value, says) in [
        ("LOCKGATE_MAX_BODY_BYTES", "abc", "invalid value 'abc'"),
        ("LOCKGATE_MAX_BODY_BYTES", "10", "must be between"),
        ("LOCKGATE_DEFAULT_TTL", "soon", "a duration such as 30s"),
    ] {
        let out = lockgate()
            .arg("--dev")
            .env(var, value)
            .output()
            .await
            .expect("run lockgate");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{var}={value}: {stderr}");
        assert!(
            stderr.contains(says) && stderr.contains(var),
            "{var}={value}: {stderr}"
        );
    }
}

/// Bad settings are configuration errors: exit 64, one line that says what to fix.
#[tokio::test]
async fn bad_configuration_means_exit_64_with_one_line() {
    for args in [
        &["--redis-url", "http://localhost"][..],
        &["--dev", "--min-ttl", "10s", "--default-ttl", "1s"],
        &["--dev", "--token-secret", "too-short"],
        // Not loopback and no API keys.
        &["--dev", "--listen", "0.0.0.0:7380"],
        &["--dev", "--api-keys-file", "/nonexistent/keys.json"],
        &[
            "--dev",
            "--api-keys",
            "[{\"name\": \"a\", \"key\": \"short\", \"prefixes\": []}]",
        ],
        &["--dev", "--metrics-auth", "required"],
        &[
            "--dev",
            "--max-waiters",
            "100",
            "--max-concurrent-requests",
            "50",
        ],
        &["--dev", "--worker-threads", "0"],
        &["--dev", "--worker-threads", "1025"],
    ] {
        let (code, _, stderr) = run(args).await;
        assert_eq!(code, Some(64), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
}

/// --help and --version succeed.
#[tokio::test]
async fn help_and_version_exit_0() {
    let (code, stdout, _) = run(&["--help"]).await;
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("--redis-url") && stdout.contains("LOCKGATE_REDIS_URL"),
        "{stdout}"
    );
    assert_eq!(run(&["--version"]).await.0, Some(0));
}

/// `--version` names the commit, the build date and the compiler, from the build.
#[tokio::test]
async fn the_version_names_its_commit_build_date_and_compiler() {
    let (code, stdout, _) = run(&["--version"]).await;
    assert_eq!(code, Some(0));
    let line = stdout.trim_end();
    let rest = line
        .strip_prefix(&format!(
            "lockgate {} (revision ",
            env!("CARGO_PKG_VERSION")
        ))
        .unwrap_or_else(|| panic!("{line}"));
    let (revision, rest) = rest.split_once(", built ").expect(line);
    // This checkout is a git one: the commit is its HEAD's.
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .expect("git");
    assert_eq!(
        revision,
        String::from_utf8_lossy(&head.stdout).trim(),
        "{line}"
    );
    let (date, rest) = rest.split_once(", rustc ").expect(line);
    let digits = |part: &str| part.chars().all(|c| c.is_ascii_digit());
    let parts: Vec<&str> = date.split('-').collect();
    assert!(
        parts.len() == 3 && parts.iter().all(|p| digits(p)) && parts[0].len() == 4,
        "{line}"
    );
    let rustc = rest.strip_suffix(')').expect(line);
    assert!(
        rustc.split('.').count() == 3 && rustc.split('.').all(digits),
        "{line}"
    );
}

/// `lockgate completions SHELL` prints a completion script that knows the subcommands and
/// their flags; bash's parses.
#[tokio::test]
async fn completions_are_printed_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (code, stdout, stderr) = run(&["completions", shell]).await;
        assert_eq!(code, Some(0), "{shell}: {stderr}");
        assert!(
            stdout.contains("healthcheck") && stdout.contains("verbose"),
            "{shell}: {stdout}"
        );
    }
    let (_, bash, _) = run(&["completions", "bash"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("lockgate.bash");
    std::fs::write(&script, bash).expect("write");
    let parsed = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
        .expect("bash");
    assert!(parsed.success());
    let (code, _, stderr) = run(&["completions", "tcsh"]).await;
    assert_eq!(code, Some(64), "{stderr}");
}

/// The binary's allocator is built with one arena (`.cargo/config.toml`; why there): jemalloc
/// reports the setting it was built with when asked for its statistics at exit.
#[tokio::test]
async fn the_allocator_is_built_with_one_arena() {
    let out = lockgate()
        .arg("--version")
        .env("_RJEM_MALLOC_CONF", "stats_print:true")
        .output()
        .await
        .expect("run lockgate");
    assert_eq!(out.status.code(), Some(0));
    let stats = String::from_utf8_lossy(&out.stderr);
    assert!(
        stats.contains("config.malloc_conf: \"narenas:1\""),
        "jemalloc's statistics do not show the build setting:\n{stats}"
    );
    assert!(stats.contains("opt.narenas: 1\n"), "{stats}");
}

/// `lockgate openapi` prints the document the server serves.
#[tokio::test]
async fn the_openapi_subcommand_prints_the_document() {
    let (code, stdout, _) = run(&["openapi"]).await;
    assert_eq!(code, Some(0));
    assert_eq!(
        stdout.trim_end(),
        lockgate::http::openapi_document(&lockgate::config::default_limits()).trim_end()
    );
}

/// `lockgate --dev` serves the API with no Redis at all, and stops cleanly on SIGTERM.
#[tokio::test]
async fn dev_mode_serves_without_redis_and_stops_on_sigterm() {
    let port = free_port();
    let mut child = lockgate()
        .args(["--dev", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn lockgate");
    let client = Client::new(&format!("http://127.0.0.1:{port}"), None).expect("a client");
    eventually(
        Duration::from_secs(10),
        "lockgate --dev answers /healthz",
        || async {
            let status = client.health(false, Duration::from_secs(1)).await.ok()?;
            status.is_success().then_some(())
        },
    )
    .await;
    let grant = client
        .acquire("dev:1", &serde_json::json!({}), None, None)
        .await;
    grant.done(201);

    let pid = child.id().expect("running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits")
        .expect("wait");
    assert_eq!(status.code(), Some(0));
}

/// `--worker-threads N` serves with N runtime workers (tokio names them `tokio-rt-worker`):
/// a sidecar can run on one however many CPUs its node has.
#[tokio::test]
async fn worker_threads_sets_the_runtime_workers() {
    let port = free_port();
    let mut child = lockgate()
        .args(["--dev", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--worker-threads", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn lockgate");
    let client = Client::new(&format!("http://127.0.0.1:{port}"), None).expect("a client");
    eventually(
        Duration::from_secs(10),
        "lockgate answers /healthz",
        || async {
            let status = client.health(false, Duration::from_secs(1)).await.ok()?;
            status.is_success().then_some(())
        },
    )
    .await;
    let pid = child.id().expect("running");
    let workers = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the process's threads")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "tokio-rt-worker")
        .count();
    assert_eq!(workers, 3);
    child.kill().await.expect("kill");
}

/// `lockgate healthcheck` exits 0 against a serving gateway, 1 when nothing answers.
#[tokio::test]
async fn the_healthcheck_subcommand_reports_liveness_and_readiness() {
    let server = crate::support::process::ServerProcess::start(&["--dev"], &[]).await;
    let gateway = server.url("");
    for extra in [&[][..], &["--ready"]] {
        let mut args = vec!["healthcheck", "--gateway", gateway.as_str()];
        args.extend_from_slice(extra);
        let (code, _, stderr) = run(&args).await;
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
    }
    let nobody = format!("http://127.0.0.1:{}", free_port());
    let (code, _, stderr) = run(&["healthcheck", "--gateway", &nobody]).await;
    assert_eq!(code, Some(1));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// The probe the chart renders for a sidecar (`lockgate healthcheck`) passes while Redis is
/// down, so a Redis outage does not take every application Pod out of its Services; the
/// backend-following one (`--ready`, `sidecarReadinessFollowsBackend: true`) fails, and passes
/// again once Redis is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sidecar_probe_passes_while_redis_is_down() {
    let mut redis = crate::support::redis::RedisServer::start();
    let url = redis.url();
    let server =
        crate::support::process::ServerProcess::start(&["--redis-url", url.as_str()], &[]).await;
    let gateway = server.url("");
    tokio::task::block_in_place(|| redis.stop());
    let probe = |ready: bool| {
        let gateway = gateway.clone();
        async move {
            let mut args = vec!["healthcheck", "--gateway", gateway.as_str()];
            if ready {
                args.push("--ready");
            }
            run(&args).await.0
        }
    };
    eventually(
        Duration::from_secs(5),
        "--ready fails with Redis down",
        || async { (probe(true).await != Some(0)).then_some(()) },
    )
    .await;
    assert_eq!(
        probe(false).await,
        Some(0),
        "the sidecar probe failed with Redis down"
    );
    tokio::task::block_in_place(|| redis.restart());
    eventually(
        Duration::from_secs(5),
        "--ready passes with Redis back",
        || async { (probe(true).await == Some(0)).then_some(()) },
    )
    .await;
}

/// At startup the server says its version, listen address and store, and at once whether the
/// store answers: a wrong Redis URL shows as a warning, not as the first failed request.
#[tokio::test]
async fn startup_says_whether_the_store_answers() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    // A port bound and never listened on: connects to it are refused, and no server started
    // meanwhile (this test's, or a concurrent test's) can be given it, as it could be a port
    // only found free (seen once: the "unreachable" store answered).
    let unlistened = tokio::net::TcpSocket::new_v4().expect("socket");
    unlistened
        .bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    let nobody = format!(
        "redis://127.0.0.1:{}",
        unlistened.local_addr().expect("address").port()
    );
    let redis = crate::support::redis::RedisServer::start();
    let somebody = redis.url();
    for (args, expected) in [
        (
            vec!["--redis-url", nobody.as_str()],
            "cannot reach the backend yet",
        ),
        (vec!["--dev"], "backend reachable"),
        (vec!["--redis-url", somebody.as_str()], "backend reachable"),
    ] {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut child = lockgate()
            .args(&args)
            .args(["--listen", &listen])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn lockgate");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let mut seen = String::new();
        let found = tokio::time::timeout(Duration::from_secs(10), async {
            while let Ok(Some(line)) = lines.next_line().await {
                seen.push_str(&line);
                seen.push('\n');
                if line.contains(expected) {
                    return true;
                }
            }
            false
        })
        .await;
        let _ = child.kill().await;
        assert_eq!(found, Ok(true), "{args:?}: {seen}");
        // The startup guards connect before logging starts: the connection is logged all
        // the same.
        if args.contains(&somebody.as_str()) {
            assert!(seen.contains("connected to redis"), "{seen}");
        }
        let serving = seen
            .lines()
            .find(|line| line.contains("lockgate serving"))
            .unwrap_or_else(|| panic!("no startup line: {seen}"));
        assert!(
            serving.contains(env!("CARGO_PKG_VERSION")) && serving.contains(&listen),
            "{serving}"
        );
    }
}

/// The edges a user meets first, each as it should be: a closed pipe is no panic, help about
/// help is help, usage lines are clap's own (no variable inside a syntax), the usual
/// near-miss `--listen` values get a hint, and a forgotten `--` before `lockgate run`'s command
/// is pointed out.
#[tokio::test]
async fn command_line_edges() {
    // `lockgate openapi | head -c 100`: the reader stops early, the writer exits quietly.
    let mut child = lockgate()
        .arg("openapi")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 100];
    tokio::io::AsyncReadExt::read_exact(&mut stdout, &mut first)
        .await
        .expect("the document starts");
    drop(stdout);
    let out = child.wait_with_output().await.expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");

    for args in [&["help", "--help"][..], &["help", "-h"], &["help"]] {
        let (code, stdout, stderr) = run(args).await;
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(stdout.contains("Usage: lockgate"), "{args:?}: {stdout}");
    }

    // A variable is named for the flag in the error, after its quoted syntax, never inside a
    // usage line; an unknown flag names none.
    let (code, _, stderr) = run(&["--dev", "--listen", "nonsense"]).await;
    assert_eq!(code, Some(64), "{stderr}");
    assert!(
        stderr.contains("'--listen <LISTEN>' (LOCKGATE_LISTEN)"),
        "{stderr}"
    );
    let (_, _, stderr) = run(&["--dev", "--gateway", "x"]).await;
    assert!(stderr.contains("'--gateway'"), "{stderr}");
    assert!(!stderr.contains("(LOCKGATE_GATEWAY)"), "{stderr}");
    let (_, _, stderr) = run(&["--dev", "--default-ttl", "soon"]).await;
    for line in stderr.lines().filter(|l| l.contains("Usage:")) {
        assert!(!line.contains("(LOCKGATE_"), "{line}");
    }

    for (listen, hint) in [
        ("7381", "127.0.0.1:7381"),
        ("localhost:7381", "not a host name"),
    ] {
        let (code, _, stderr) = run(&["--dev", "--listen", listen]).await;
        assert_eq!(code, Some(64), "{listen}: {stderr}");
        assert!(stderr.contains(hint), "{listen}: {stderr}");
    }

    let (code, _, stderr) = run(&["run", "f1", "true"]).await;
    assert_eq!(code, Some(64), "{stderr}");
    assert!(
        stderr.contains("put `--` between the lock names and the command"),
        "{stderr}"
    );
}

/// `lockgate run`'s messages name what to fix: a `--gateway` without a scheme (not the API
/// key), the cause of an unreachable gateway (its URL once), and the variable of the API key
/// on a 401.
#[tokio::test]
async fn lockgate_run_names_what_to_fix() {
    let (code, _, stderr) = run(&["run", "--gateway", "localhost:7380", "f1", "--", "true"]).await;
    assert_eq!(code, Some(64), "{stderr}");
    assert!(
        stderr.contains("--gateway (LOCKGATE_GATEWAY): the gateway must be an http:// or https:// URL, such as http://localhost:7380"),
        "{stderr}"
    );
    assert!(!stderr.contains("api-key"), "{stderr}");

    let port = free_port();
    let gateway = format!("http://127.0.0.1:{port}");
    let (code, _, stderr) = run(&["run", "--gateway", &gateway, "f1", "--", "true"]).await;
    assert_eq!(code, Some(69), "{stderr}");
    assert!(
        stderr.to_lowercase().contains("connection refused"),
        "{stderr}"
    );
    // The URL once, and none of reqwest's and hyper's wrappers around the cause.
    assert_eq!(stderr.matches(&gateway).count(), 1, "{stderr}");
    assert!(
        !stderr.contains("error sending request") && !stderr.contains("client error"),
        "{stderr}"
    );

    let server = crate::support::process::ServerProcess::start(
        &["--dev"],
        &[(
            "LOCKGATE_API_KEYS",
            r#"[{"name": "a", "key": "a-key-0123456789abcdef", "prefixes": [""]}]"#,
        )],
    )
    .await;
    let (code, _, stderr) = run(&["run", "--gateway", &server.url(""), "f1", "--", "true"]).await;
    assert_eq!(code, Some(69), "{stderr}");
    assert!(
        stderr.contains("401") && stderr.contains("LOCKGATE_API_KEY"),
        "{stderr}"
    );
}

/// Issue 49: the CLI never shows a gateway URL's password (a proxy's, in `LOCKGATE_GATEWAY`):
/// not in `healthcheck`'s or `run`'s errors, nor in `--help` (which showed the variable's
/// value); and the command under `lockgate run` does not inherit `LOCKGATE_API_KEY` unless
/// `--pass-api-key` says so (it has `LOCKGATE_TOKEN`, which moves its one grant).
#[tokio::test]
async fn the_cli_shows_no_password_and_passes_no_key() {
    const PASSWORD: &str = "s3cretpw";
    let nobody = format!("http://user:{PASSWORD}@127.0.0.1:{}", free_port());
    for args in [
        vec!["healthcheck", "--gateway", nobody.as_str()],
        vec![
            "run",
            "--gateway",
            nobody.as_str(),
            "--wait",
            "0s",
            "job",
            "--",
            "true",
        ],
        vec![
            "run",
            "--gateway",
            "ftp://user:s3cretpw@host",
            "job",
            "--",
            "true",
        ],
    ] {
        let (code, stdout, stderr) = run(&args).await;
        assert_ne!(code, Some(0), "{args:?}");
        assert!(!stderr.contains(PASSWORD), "{args:?}: {stderr}");
        assert!(!stdout.contains(PASSWORD), "{args:?}: {stdout}");
        assert!(
            stderr.contains("127.0.0.1") || stderr.contains("host"),
            "{stderr}"
        );
    }
    for sub in ["run", "healthcheck"] {
        let out = crate::support::process::lockgate()
            .args([sub, "--help"])
            .env("LOCKGATE_GATEWAY", &nobody)
            .env("LOCKGATE_API_KEY", "key-s3cretpw-0123456789")
            .output()
            .await
            .expect("help");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("LOCKGATE_GATEWAY"), "{help}");
        assert!(!help.contains(PASSWORD), "{sub} --help: {help}");
    }

    let server = crate::support::process::ServerProcess::start(&["--dev"], &[]).await;
    let gateway = server.url("");
    let dir = tempfile::tempdir().expect("temp dir");
    let seen = dir.path().join("env");
    let script = format!(
        "echo \"key=${{LOCKGATE_API_KEY:-none}} token=${{LOCKGATE_TOKEN:+set}}\" > {}",
        seen.display()
    );
    for (extra, expected) in [
        (&[][..], "key=none token=set"),
        (&["--pass-api-key"][..], "key=any-key-0123456789 token=set"),
    ] {
        let mut args = vec!["run", "--gateway", gateway.as_str()];
        args.extend_from_slice(extra);
        args.extend(["env:1", "--", "sh", "-c", script.as_str()]);
        let out = crate::support::process::lockgate()
            .args(&args)
            .env("LOCKGATE_API_KEY", "any-key-0123456789")
            .output()
            .await
            .expect("run");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = std::fs::read_to_string(&seen).expect("the command ran");
        assert_eq!(line.trim(), expected, "{extra:?}");
    }
}
