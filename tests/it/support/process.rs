//! The `lockgate` binary run as a server process, as an operator runs it: for signals, exit
//! codes and the logs it writes.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tempfile::TempDir;
use tokio::process::{Child, Command};

use super::redis::free_port;

pub const LOCKGATE: &str = env!("CARGO_BIN_EXE_lockgate");

/// The binary with no LOCKGATE_* or OTEL_* variable (nor RUST_LOG) inherited from the
/// environment.
pub fn lockgate() -> Command {
    let mut cmd = Command::new(LOCKGATE);
    for (key, _) in std::env::vars_os() {
        let key_text = key.to_string_lossy();
        if key_text.starts_with("LOCKGATE_")
            || key_text.starts_with("OTEL_")
            || key_text == "RUST_LOG"
        {
            cmd.env_remove(key);
        }
    }
    cmd.stdin(Stdio::null()).kill_on_drop(true);
    cmd
}

/// A `lockgate` server process on a free port, its stderr (the logs) kept in a file.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    port: u16,
    dir: TempDir,
}

impl ServerProcess {
    /// Starts `lockgate` with `args` (plus `--listen` on a free port) and `env`, and returns
    /// once /healthz answers.
    pub async fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("stderr.log")).expect("log file");
        let child = lockgate()
            .args(args)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn lockgate");
        let mut server = Self { child, port, dir };
        let http = super::http_client();
        let url = server.url("/healthz");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(response) = http.get(&url).send().await
                && response.status() == 200
            {
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("lockgate exited at start ({status}):\n{}", server.logs());
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "lockgate did not serve /healthz within 10 s:\n{}",
                server.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The project's client of this server (over the tests' HTTP client, with its
    /// timeout), sending `api_key` when given.
    pub fn client(&self, api_key: Option<&str>) -> lockgate::client::Client {
        let client = lockgate::client::Client::with_http(super::http_client(), &self.url(""));
        match api_key {
            Some(key) => client
                .header("authorization", &format!("Bearer {key}"))
                .expect("a key that is a header value"),
            None => client,
        }
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("stderr.log")
    }

    /// The `/metrics` exposition, if the server answers.
    pub async fn metrics(&self) -> Option<String> {
        super::http_client()
            .get(self.url("/metrics"))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()
    }

    /// Everything the server logged so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Sends `signal` (e.g. "TERM") to the server.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().expect("running").to_string();
        let status = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {pid}");
    }

    /// Waits for the server to exit, at most `deadline`.
    pub async fn exit_within(&mut self, deadline: Duration) -> ExitStatus {
        match tokio::time::timeout(deadline, self.child.wait()).await {
            Ok(status) => status.expect("wait for lockgate"),
            Err(_) => panic!(
                "lockgate did not exit within {deadline:?}:\n{}",
                self.logs()
            ),
        }
    }
}
