//! The server: connections over any byte stream (an in-memory duplex in the simulation, no
//! socket of the OS), each read command run whole under one lock, and the replies and
//! published messages written in the order the commands ran.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

use crate::signal::Signal;

use crate::clock::Clock;
use crate::commands::{Data, Flavor, parse_i64, upper};
use crate::keyspace::Db;
use crate::keyspace::Entry;
use crate::pubsub::ConnId;
use crate::replication::Feed;
use crate::resp::{self, Frame};
use crate::scripting::Scripting;
use crate::sentinel::Sentinel;

/// Commands Redis 7.0 does not have, answered as Redis 7.0 answers them (lockgate asks for
/// them on servers that have them).
const NOT_IN_REDIS_7_0: &[&str] = &["DELIFEQ", "DELEX"];

#[derive(Debug)]
struct Node {
    data: Data,
    scripting: Scripting,
    next_conn: ConnId,
    /// An error the next commands get instead of running (a fault: `BUSY`, `OOM`, …), and
    /// how many more get it.
    refusing: Option<(String, u32)>,
    /// Every command run so far, folded (FNV-1a over the clock's millisecond, the connection
    /// and the arguments): two runs that sent the same commands at the same instants have the
    /// same digest.
    digest: u64,
    /// `SIM_REDIS_TRACE` is set: every command is printed.
    trace: bool,
    /// The clock's millisecond of the last command, and how many ran in it.
    instant: (i64, u32),
    /// What ran in a millisecond of more than [`SPIN_LIMIT`] commands, if any did.
    spun: Option<String>,
    /// Write commands run so far (Redis's replication offset).
    offset: u64,
    /// Each connection's offset after its last command: what its `WAIT` waits for.
    written: HashMap<ConnId, u64>,
    /// The replica this master feeds, if any.
    feed: Option<Feed>,
    /// Set when this server is a Sentinel, not a Redis.
    sentinel: Option<Sentinel>,
}

impl Node {
    /// Replicas holding `offset` (0 or 1), after delivering what has arrived.
    fn replicas_holding(&mut self, offset: u64) -> i64 {
        let now_ms = self.data.clock.now_ms();
        match self.feed.as_mut() {
            Some(feed) => {
                feed.deliver(now_ms);
                i64::from(feed.acked >= offset)
            }
            None => 0,
        }
    }
}

/// Commands in one millisecond of the simulated clock beyond which a client is taken to loop
/// without ever waiting: time, which moves only when every task waits, would never move again,
/// and the world would spin for good. From then on, until the clock moves, every command is
/// refused, [`Server::spun`] says so and [`Server::spinning`] returns (a world fails on it
/// instead of hanging). A busy world runs a few dozen commands in a millisecond.
pub const SPIN_LIMIT: u32 = 20_000;

/// What the simulation does to the server besides commands: pauses (SIGSTOP) and restarts.
#[derive(Debug)]
struct Control {
    paused: Signal<bool>,
    /// Increased by every restart: connections of an older one are closed.
    generation: Signal<u64>,
    /// Set once a millisecond ran more than [`SPIN_LIMIT`] commands.
    spun: Signal<bool>,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// A simulated Redis server. Clones share it.
#[derive(Debug, Clone)]
pub struct Server {
    node: Arc<Mutex<Node>>,
    control: Arc<Control>,
}

/// Commands a refusing server still answers (the connection's own, as Redis answers them
/// while loading or busy); with `SENTINEL`, all a Sentinel answers.
const ALWAYS_ANSWERED: &[&str] = &[
    "PING",
    "QUIT",
    "SUBSCRIBE",
    "PSUBSCRIBE",
    "UNSUBSCRIBE",
    "PUNSUBSCRIBE",
    "CLIENT",
    "SELECT",
];

/// What a command asks of its connection besides its reply.
enum Then {
    Reply(Frame),
    /// `WAIT` for more replicas than hold the connection's last write: the count once
    /// `replicas` hold `offset`, or at `deadline_ms` (never, for none).
    Wait {
        offset: u64,
        replicas: i64,
        deadline_ms: Option<i64>,
    },
    Close(Frame),
    /// A subscription's confirmations, queued as they were made: no reply of its own.
    Nothing,
}

impl Server {
    /// A server whose clock is `clock`, with Redis 7.0's manners.
    pub fn new(clock: Clock) -> Self {
        Self::with_flavor(clock, Flavor::Redis7)
    }

    /// A server whose clock is `clock`, writing doubles as `flavor` says.
    pub fn with_flavor(clock: Clock, flavor: Flavor) -> Self {
        Self {
            node: Arc::new(Mutex::new(Node {
                data: Data {
                    clock,
                    flavor,
                    ..Data::default()
                },
                scripting: Scripting::new(),
                next_conn: 0,
                refusing: None,
                digest: FNV_OFFSET,
                trace: std::env::var_os("SIM_REDIS_TRACE").is_some(),
                instant: (i64::MIN, 0),
                spun: None,
                offset: 0,
                written: HashMap::new(),
                feed: None,
                sentinel: None,
            })),
            control: Arc::new(Control {
                paused: Signal::new(false),
                generation: Signal::new(0),
                spun: Signal::new(false),
            }),
        }
    }

    /// A Sentinel watching the group `group`, whose master is at `master` (`host:port`) as of
    /// configuration epoch 1.
    pub fn sentinel(clock: Clock, group: &str, master: &str) -> Self {
        let server = Self::new(clock);
        server.lock().sentinel = Some(Sentinel {
            group: group.to_owned(),
            master: master.to_owned(),
            epoch: 1,
        });
        server
    }

    /// A Sentinel hears of a failover to `master`: the next configuration epoch names it, and
    /// `+switch-master` says so to its subscribers. Does nothing on a Redis, or when the
    /// Sentinel names `master` already.
    pub fn announce_master(&self, master: &str) {
        let mut node = self.lock();
        let Node { sentinel, data, .. } = &mut *node;
        let Some(sentinel) = sentinel.as_mut().filter(|s| s.master != master) else {
            return;
        };
        let message = sentinel.switch_message(master);
        sentinel.master = master.to_owned();
        sentinel.epoch += 1;
        data.pubsub.publish(b"+switch-master", message.as_bytes());
    }

    /// Makes `replica` this server's replica, `lag` behind: it takes this server's keyspace
    /// now (a full synchronisation), refuses writes, and receives every later write `lag`
    /// after it ran here.
    pub fn replicate_to(&self, replica: &Server, lag: Duration) {
        let mut node = self.lock();
        replica.receive(node.data.db.clone());
        replica.lock().data.read_only = true;
        let offset = node.offset;
        node.feed = Some(Feed::new(replica.clone(), lag.as_millis() as i64, offset));
    }

    /// The link to this server's replica breaks (a failover takes the replica away): what has
    /// arrived by now stays there, what is still on its way is lost.
    pub fn stop_replicating(&self) {
        let mut node = self.lock();
        if node.feed.is_some() {
            node.replicas_holding(0);
            node.feed = None;
        }
    }

    /// A replica becomes a master (`REPLICAOF NO ONE`): it takes writes again, with what it
    /// received.
    pub fn promote(&self) {
        self.lock().data.read_only = false;
    }

    /// The connections subscribed to `channel` now.
    pub fn listeners(&self, channel: &str) -> usize {
        self.lock().data.pubsub.listeners(channel.as_bytes())
    }

    /// A replica receives its master's keyspace.
    pub(crate) fn receive(&self, db: Db) {
        self.lock().data.db = db;
    }

    /// Stops answering (SIGSTOP): commands wait, connections stay open.
    pub fn pause(&self) {
        self.control.paused.modify(|paused| *paused = true);
    }

    /// Answers again (SIGCONT).
    pub fn resume(&self) {
        self.control.paused.modify(|paused| *paused = false);
    }

    /// A restart: every connection closed, the script cache empty, and the data kept (an
    /// append-only file or a snapshot taken just before) or forgotten (no persistence).
    pub fn restart(&self, keep_data: bool) {
        {
            let mut node = self.lock();
            if !keep_data {
                node.data.db.clear();
            }
            node.scripting.flush();
            node.refusing = None;
            // A master that forgot its data passes that on, as Redis's replica resynchronises.
            if !keep_data {
                node.offset += 1;
                let (offset, now_ms) = (node.offset, node.data.clock.now_ms());
                let Node { feed, data, .. } = &mut *node;
                if let Some(feed) = feed.as_mut() {
                    feed.send(offset, now_ms, &data.db);
                }
            }
        }
        self.control.generation.modify(|g| *g += 1);
        self.resume();
    }

    /// The next `count` commands get `error` instead of running (`BUSY …`, `OOM …`,
    /// `TRYAGAIN …`, `LOADING …`): a fault Redis reports without running the command.
    pub fn refuse_next(&self, error: &str, count: u32) {
        self.lock().refusing = Some((error.to_owned(), count));
    }

    fn lock(&self) -> MutexGuard<'_, Node> {
        self.node.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn clock(&self) -> Clock {
        self.lock().data.clock.clone()
    }

    /// A new client connection: the client's end of an in-memory stream whose other end this
    /// server serves (on a task of the current runtime).
    pub fn connect(&self) -> DuplexStream {
        let (client, server) = tokio::io::duplex(64 * 1024);
        tokio::spawn(self.clone().serve(server));
        client
    }

    /// Every live key and its entry, for comparing with another server's.
    pub fn snapshot(&self) -> BTreeMap<Vec<u8>, Entry> {
        let mut node = self.lock();
        node.replicas_holding(0);
        let now = node.data.clock.now_ms();
        node.data.db.snapshot(now)
    }

    /// A digest of every command run so far, with its instant and connection (see `Node`).
    pub fn digest(&self) -> u64 {
        self.lock().digest
    }

    /// The first command past [`SPIN_LIMIT`] in one millisecond, with that millisecond: a
    /// loop that never waits.
    pub fn spun(&self) -> Option<String> {
        self.lock().spun.clone()
    }

    /// Returns once a millisecond ran more than [`SPIN_LIMIT`] commands ([`Server::spun`] says
    /// which): a world waits for it beside its clients, and fails at once instead of spinning.
    pub async fn spinning(&self) {
        self.control.spun.wait_for(|spun| *spun).await;
    }

    /// Commands the simulation was asked for and does not have, in the order asked.
    pub fn gaps(&self) -> Vec<String> {
        self.lock().data.gaps.clone()
    }

    /// Serves one connection until the client closes it or sends `QUIT`.
    pub async fn serve<S>(self, stream: S)
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (mut reader, mut writer) = tokio::io::split(stream);
        let (outbox, mut outgoing) = mpsc::unbounded_channel::<Frame>();
        let conn = {
            let mut node = self.lock();
            let conn = node.next_conn;
            node.next_conn += 1;
            node.data.pubsub.open(conn, outbox);
            conn
        };
        let write = async move {
            let mut bytes = Vec::new();
            while let Some(frame) = outgoing.recv().await {
                bytes.clear();
                frame.encode(&mut bytes);
                if writer.write_all(&bytes).await.is_err() {
                    break;
                }
            }
            let _ = writer.shutdown().await;
        };
        let server = self.clone();
        let control = self.control.clone();
        let born = control.generation.get();
        let read = async move {
            let mut buf = Vec::new();
            let mut chunk = vec![0u8; 16 * 1024];
            'reading: loop {
                loop {
                    let (frame, used) = match resp::parse(&buf) {
                        Ok(Some(parsed)) => parsed,
                        Ok(None) => break,
                        Err(e) => {
                            server
                                .reply(conn, Frame::error(format!("ERR Protocol error: {}", e.0)));
                            break 'reading;
                        }
                    };
                    buf.drain(..used);
                    // A paused server runs nothing; a restart ends the connection.
                    tokio::select! {
                        biased;
                        () = control.generation.changed_from(&born) => break 'reading,
                        () = control.paused.wait_for(|paused| !*paused) => {}
                    }
                    match server.execute(conn, frame) {
                        Then::Reply(reply) => server.reply(conn, reply),
                        Then::Wait {
                            offset,
                            replicas,
                            deadline_ms,
                        } => {
                            let count = server.wait(offset, replicas, deadline_ms).await;
                            server.reply(conn, Frame::Integer(count));
                        }
                        Then::Nothing => {}
                        Then::Close(reply) => {
                            server.reply(conn, reply);
                            break 'reading;
                        }
                    }
                }
                tokio::select! {
                    biased;
                    () = control.generation.changed_from(&born) => break,
                    read = reader.read(&mut chunk) => match read {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    },
                }
            }
            // Closing the outbox lets the writer finish what is queued, then shut down.
            server.lock().data.pubsub.close(conn);
        };
        let writer = tokio::spawn(write);
        read.await;
        let _ = writer.await;
    }

    fn reply(&self, conn: ConnId, frame: Frame) {
        self.lock().data.pubsub.send(conn, frame);
    }

    /// A blocked `WAIT`: sleeps until `replicas` hold `offset` or `deadline_ms`, whichever
    /// comes first (Redis's clock), and returns how many hold it then.
    async fn wait(&self, offset: u64, replicas: i64, deadline_ms: Option<i64>) -> i64 {
        loop {
            let (holding, arrival, now_ms) = {
                let mut node = self.lock();
                let holding = node.replicas_holding(offset);
                let arrival = node.feed.as_ref().and_then(|feed| feed.arrival_of(offset));
                (holding, arrival, node.data.clock.now_ms())
            };
            if holding >= replicas || deadline_ms.is_some_and(|deadline| now_ms >= deadline) {
                return holding;
            }
            let next = match (arrival, deadline_ms) {
                (Some(a), Some(d)) => a.min(d),
                (Some(at), None) | (None, Some(at)) => at,
                (None, None) => std::future::pending().await,
            };
            let ms = (next - now_ms).max(1) as u64;
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
    }

    /// Runs one command and queues its reply, under the lock, so that what it publishes and
    /// what it answers are ordered with every other command; a write moves the replication
    /// offset and goes to the replica.
    fn execute(&self, conn: ConnId, frame: Frame) -> Then {
        let mut node = self.lock();
        let now_ms = node.data.clock.now_ms();
        if let Some(feed) = node.feed.as_mut() {
            feed.deliver(now_ms);
        }
        let dirty = node.data.db.dirty();
        let then = self.run(&mut node, conn, frame);
        if node.data.db.dirty() != dirty {
            node.offset += 1;
            let offset = node.offset;
            let Node { feed, data, .. } = &mut *node;
            if let Some(feed) = feed.as_mut() {
                feed.send(offset, now_ms, &data.db);
            }
        }
        let offset = node.offset;
        node.written.insert(conn, offset);
        then
    }

    fn run(&self, node: &mut Node, conn: ConnId, frame: Frame) -> Then {
        let args: Vec<Vec<u8>> = match frame {
            Frame::Array(items) if !items.is_empty() => {
                let mut args = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Frame::Bulk(bytes) => args.push(bytes),
                        _ => {
                            return Then::Close(Frame::error(
                                "ERR Protocol error: expected a bulk string",
                            ));
                        }
                    }
                }
                args
            }
            _ => return Then::Close(Frame::error("ERR Protocol error: expected an array")),
        };
        let name = upper(&args[0]);
        let now_ms = node.data.clock.now_ms();
        let mut digest = node.digest;
        for part in [&now_ms.to_le_bytes()[..], &conn.to_le_bytes()[..]]
            .into_iter()
            .chain(args.iter().map(Vec::as_slice))
        {
            for byte in part.iter().chain(&[0xff]) {
                digest = (digest ^ u64::from(*byte)).wrapping_mul(FNV_PRIME);
            }
        }
        node.digest = digest;
        if node.trace {
            let shown: Vec<String> = args
                .iter()
                .map(|a| String::from_utf8_lossy(&a[..a.len().min(48)]).into_owned())
                .collect();
            eprintln!(
                "sim-redis {} conn {conn}: {shown:?}",
                node.data.clock.now_ms()
            );
        }
        node.instant = match node.instant {
            (ms, count) if ms == now_ms => (ms, count.saturating_add(1)),
            _ => (now_ms, 1),
        };
        if node.instant.1 > SPIN_LIMIT {
            if node.spun.is_none() {
                node.spun = Some(format!(
                    "{name} on connection {conn} was command {} at {now_ms} ms",
                    node.instant.1
                ));
                self.control.spun.modify(|spun| *spun = true);
            }
            return Then::Reply(Frame::error(
                "ERR sim-redis: too many commands in one simulated millisecond (a loop that never waits)",
            ));
        }
        if !ALWAYS_ANSWERED.contains(&name.as_str())
            && let Some((error, left)) = node.refusing.as_mut()
        {
            let reply = Frame::error(error.clone());
            *left -= 1;
            if *left == 0 {
                node.refusing = None;
            }
            return Then::Reply(reply);
        }
        let rest = &args[1..];
        let written = node.written.get(&conn).copied().unwrap_or(0);
        let holding = if name == "WAIT" {
            node.replicas_holding(written)
        } else {
            0
        };
        let Node {
            data,
            scripting,
            sentinel,
            ..
        } = &mut *node;
        if let Some(sentinel) = sentinel {
            if name == "SENTINEL" {
                return Then::Reply(sentinel.answer(rest).unwrap_or_else(|| {
                    data.not_simulated("SENTINEL subcommands but MASTER".into())
                }));
            }
            if !ALWAYS_ANSWERED.contains(&name.as_str()) {
                return Then::Reply(data.not_simulated(format!("{name} on a Sentinel")));
            }
        }
        let subscribed = data.pubsub.count(conn) > 0;
        if subscribed
            && ![
                "SUBSCRIBE",
                "PSUBSCRIBE",
                "UNSUBSCRIBE",
                "PUNSUBSCRIBE",
                "PING",
                "QUIT",
                "RESET",
            ]
            .contains(&name.as_str())
        {
            return Then::Reply(Frame::error(format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                name.to_ascii_lowercase()
            )));
        }
        let reply = match name.as_str() {
            "PING" if subscribed => Frame::Array(vec![
                Frame::bulk("pong"),
                Frame::bulk(rest.first().map(Vec::as_slice).unwrap_or_default()),
            ]),
            "PING" => match rest.first() {
                None => Frame::Simple("PONG".into()),
                Some(text) => Frame::bulk(text),
            },
            "ECHO" if rest.len() == 1 => Frame::bulk(&rest[0]),
            "QUIT" => return Then::Close(Frame::ok()),
            "SELECT" if rest.len() == 1 => match parse_i64(&rest[0]) {
                Some(0) => Frame::ok(),
                Some(_) => data.not_simulated("SELECT of a database other than 0".into()),
                None => Frame::error("ERR value is not an integer or out of range"),
            },
            "CLIENT" => match rest.first().map(|s| upper(s)).as_deref() {
                Some("SETNAME") => Frame::ok(),
                Some("SETINFO") => {
                    Frame::error("ERR unknown subcommand 'SETINFO'. Try CLIENT HELP.")
                }
                _ => data.not_simulated("CLIENT subcommands other than SETNAME".into()),
            },
            "WAIT" if rest.len() == 2 => {
                let (Some(replicas), Some(timeout)) = (parse_i64(&rest[0]), parse_i64(&rest[1]))
                else {
                    return Then::Reply(Frame::error(
                        "ERR value is not an integer or out of range",
                    ));
                };
                if replicas <= 0 || holding >= replicas {
                    Frame::Integer(holding)
                } else {
                    return Then::Wait {
                        offset: written,
                        replicas,
                        deadline_ms: (timeout > 0).then_some(now_ms + timeout),
                    };
                }
            }
            "SUBSCRIBE" | "PSUBSCRIBE" if !rest.is_empty() => {
                let pattern = name == "PSUBSCRIBE";
                let kind = if pattern { "psubscribe" } else { "subscribe" };
                for channel in rest {
                    data.pubsub.subscribe(conn, channel, pattern);
                    let count = data.pubsub.count(conn) as i64;
                    data.pubsub.send(
                        conn,
                        Frame::Array(vec![
                            Frame::bulk(kind),
                            Frame::bulk(channel),
                            Frame::Integer(count),
                        ]),
                    );
                }
                return Then::Nothing;
            }
            "UNSUBSCRIBE" | "PUNSUBSCRIBE" => {
                let pattern = name == "PUNSUBSCRIBE";
                let kind = if pattern {
                    "punsubscribe"
                } else {
                    "unsubscribe"
                };
                let names = if rest.is_empty() {
                    if pattern {
                        data.pubsub.patterns_of(conn)
                    } else {
                        data.pubsub.channels_of(conn)
                    }
                } else {
                    rest.to_vec()
                };
                if names.is_empty() {
                    data.pubsub.send(
                        conn,
                        Frame::Array(vec![
                            Frame::bulk(kind),
                            Frame::Nil,
                            Frame::Integer(data.pubsub.count(conn) as i64),
                        ]),
                    );
                }
                for channel in names {
                    data.pubsub.unsubscribe(conn, &channel, pattern);
                    let count = data.pubsub.count(conn) as i64;
                    data.pubsub.send(
                        conn,
                        Frame::Array(vec![
                            Frame::bulk(kind),
                            Frame::bulk(&channel),
                            Frame::Integer(count),
                        ]),
                    );
                }
                return Then::Nothing;
            }
            "EVAL" | "EVALSHA" if rest.len() >= 2 => {
                scripting.eval(data, name == "EVALSHA", &rest[0], &rest[1..])
            }
            "SCRIPT" if !rest.is_empty() => match upper(&rest[0]).as_str() {
                "LOAD" if rest.len() == 2 => match scripting.load(&rest[1]) {
                    Ok(sha) => Frame::bulk(sha),
                    Err(e) => e,
                },
                "EXISTS" if rest.len() >= 2 => Frame::Array(
                    rest[1..]
                        .iter()
                        .map(|sha| Frame::Integer(i64::from(scripting.exists(sha))))
                        .collect(),
                ),
                "FLUSH" => {
                    scripting.flush();
                    Frame::ok()
                }
                other => {
                    let other = other.to_owned();
                    data.not_simulated(format!("SCRIPT {other}"))
                }
            },
            _ if NOT_IN_REDIS_7_0.contains(&name.as_str()) => {
                let mut text = format!(
                    "ERR unknown command '{}', with args beginning with: ",
                    String::from_utf8_lossy(&args[0])
                );
                for arg in rest {
                    text.push_str(&format!("'{}' ", String::from_utf8_lossy(arg)));
                }
                Frame::error(text)
            }
            _ => match data.run(&name, rest) {
                Some(reply) => reply,
                None => data.not_simulated(name.clone()),
            },
        };
        Then::Reply(reply)
    }
}
