//! Real `redis-server` processes owned by a test.
//!
//! Each server gets a free port on 127.0.0.1 and its own temporary directory, runs without
//! persistence, and is killed and reaped when the handle drops. Start-up polls PING with a
//! deadline and panics with the server's log if it never answers. `stop()` and `restart()`
//! (same port, same directory) are there for fault tests.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use tempfile::TempDir;

/// How long a server may take to answer PING after start.
const START_DEADLINE: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: TempDir,
    child: Option<Child>,
    replica_of: Option<u16>,
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

fn redis_server_binary() -> PathBuf {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("redis-server"))
        .find(|path| path.is_file());
    found.unwrap_or_else(|| {
        panic!("redis-server is not installed: run scripts/test.sh, which installs it where it can")
    })
}

impl RedisServer {
    /// A standalone master.
    pub fn start() -> Self {
        Self::launch(None)
    }

    /// A replica of `master`, returned once its replication link is up.
    pub fn start_replica_of(master: &RedisServer) -> Self {
        let replica = Self::launch(Some(master.port));
        replica.wait_for_link();
        replica
    }

    fn launch(replica_of: Option<u16>) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut server = Self {
            port: 0,
            dir,
            child: None,
            replica_of,
        };
        // A port can be taken between free_port() and the bind; try a few.
        for _ in 0..5 {
            server.port = free_port();
            if server.spawn_and_wait() {
                return server;
            }
            server.stop();
        }
        panic!("redis-server did not find a free port in 5 attempts");
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// Starts the process; false if it exited at once (port taken) so the caller can retry.
    fn spawn_and_wait(&mut self) -> bool {
        let mut cmd = Command::new(redis_server_binary());
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args([
                "--repl-diskless-sync",
                "yes",
                "--repl-diskless-sync-delay",
                "0",
            ])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.log_path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(master) = self.replica_of {
            cmd.args(["--replicaof", "127.0.0.1", &master.to_string()]);
        }
        let child = cmd.spawn().expect("spawn redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(_)) = child.try_wait()
            {
                let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
                if log.contains("Address already in use") {
                    return false;
                }
                panic!(
                    "redis-server on port {} exited at start; its log:\n{log}",
                    self.port
                );
            }
            if self.ping() {
                return true;
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
                panic!(
                    "redis-server on port {} did not answer PING within {START_DEADLINE:?}; its log:\n{log}",
                    self.port
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn ping(&self) -> bool {
        let Ok(client) = redis::Client::open(self.url()) else {
            return false;
        };
        let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
            return false;
        };
        redis::cmd("PING").query::<String>(&mut conn).is_ok()
    }

    fn wait_for_link(&self) {
        let client = redis::Client::open(self.url()).expect("url");
        let mut conn = client.get_connection().expect("connect to replica");
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut conn)
                .expect("INFO");
            if info.contains("master_link_status:up") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "replica on {} never linked to its master:\n{info}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A fresh async connection for assertions on the server's state.
    pub async fn conn(&self) -> MultiplexedConnection {
        redis::Client::open(self.url())
            .expect("url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect to the test redis")
    }

    /// Kills the server (SIGKILL) and reaps it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port.
    pub fn restart(&mut self) {
        self.stop();
        assert!(
            self.spawn_and_wait(),
            "port {} was taken while redis was down",
            self.port
        );
    }

    /// The process id, for SIGSTOP/SIGCONT.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
