//! A real PostgreSQL server for the fence recipes (docs/fences.md): `initdb` in a temp dir, a
//! free port, `fsync` off, trust authentication for the user `lockgate`, killed and reaped on
//! drop. PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user
//! that Debian's package creates (through `runuser`), in a directory given to it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::redis::free_port;

/// Debian keeps the server's programs out of PATH, under /usr/lib/postgresql/<version>/bin.
fn server_program(name: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name));
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin").join(name))
        .collect();
    // The newest version first.
    versions.sort_by_key(|path| {
        std::cmp::Reverse(
            path.components()
                .nth(4)
                .and_then(|v| v.as_os_str().to_str()?.parse::<u32>().ok()),
        )
    });
    on_path
        .chain(versions)
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!("{name} (PostgreSQL) is not installed: run scripts/test.sh, which installs Debian's postgresql where it can")
        })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.trim_ascii() == b"0")
}

/// `program` as the user that may run PostgreSQL.
fn as_server_user(program: &Path) -> Command {
    if is_root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

#[derive(Debug)]
pub struct PostgresServer {
    port: u16,
    dir: TempDir,
    child: Child,
}

impl PostgresServer {
    /// A fresh cluster with the database `lockgate`, returned once it answers.
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        if is_root() {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("run chown");
            assert!(status.success(), "chown the data directory to postgres");
        }
        let data = dir.path().join("data");
        let init = as_server_user(&server_program("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "lockgate", "--auth=trust", "--no-sync", "-E", "UTF8"])
            .stdout(Stdio::null())
            .output()
            .expect("run initdb");
        assert!(
            init.status.success(),
            "initdb failed:\n{}",
            String::from_utf8_lossy(&init.stderr)
        );
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("postgres.log")).expect("log file");
        let child = as_server_user(&server_program("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-k"])
            .arg(dir.path())
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "full_page_writes=off",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn postgres");
        let server = Self { port, dir, child };
        server.wait_until_ready();
        let created = server
            .psql()
            .args(["-d", "postgres", "-c", "CREATE DATABASE lockgate"])
            .output()
            .expect("run psql");
        assert!(
            created.status.success(),
            "{}",
            String::from_utf8_lossy(&created.stderr)
        );
        server
    }

    fn wait_until_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = self
                .psql()
                .args(["-d", "postgres", "-c", "SELECT 1"])
                .output();
            if ready.is_ok_and(|out| out.status.success()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "postgres did not answer within 30 s:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the server logged.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    /// The `PG*` variables that point psql (and libpq) at this server's database.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("PGHOST", "127.0.0.1".to_owned()),
            ("PGPORT", self.port.to_string()),
            ("PGUSER", "lockgate".to_owned()),
            ("PGDATABASE", "lockgate".to_owned()),
        ]
    }

    /// psql against this server (`-X`: no ~/.psqlrc), stopping at the first error.
    pub fn psql(&self) -> Command {
        let mut cmd = Command::new("psql");
        cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1"])
            .envs(self.env())
            .stdin(Stdio::null());
        cmd
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        // SIGQUIT to the server itself (found by its pid file; `runuser` stands between): an
        // immediate shutdown that ends its backends too. SIGKILL if it is still there.
        let pid_file = self.dir.path().join("data").join("postmaster.pid");
        if let Some(pid) = std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|text| text.lines().next()?.trim().parse::<i32>().ok())
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGQUIT,
            );
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
