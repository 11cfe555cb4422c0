//! How commands travel: on the command connection (a script by SHA, reloaded on NOSCRIPT, or
//! native commands), bounded by the backend timeout, retried once on a fresh connection when
//! the old one turned out broken; or, with `WAIT`, pipelined on a dedicated connection.

use std::time::{Duration, Instant};

use redis::aio::ConnectionLike;
use redis::{Cmd, ErrorKind, FromRedisValue, RedisResult, ServerErrorKind};

use super::batch::Batcher;
use super::connection::{self, CommandConnection, Connect};
use super::errors::{is_moved, worth_a_fresh_connection};
use super::features::{Downgradable, Features};
use super::keys::Key;
use super::pool::DedicatedPool;
use super::scripts;
use super::{Commands, RedisBackend, Waits};
use crate::backend::{BackendError, Claim, ReplicaAck, millis};
use crate::telemetry::metrics::RedisCall;

/// A claim id as the scripts take it: decimal, or empty for none.
pub(super) fn claim_arg(claim: Option<Claim>) -> String {
    claim.map(|Claim(id)| id.to_string()).unwrap_or_default()
}

/// What one request sends on the command connection.
#[derive(Clone, Copy)]
pub(super) enum Request<'a> {
    /// An EVALSHA of the script (loaded first if the server lacks it).
    Script(&'a scripts::Lua, &'a Cmd),
    /// Plain commands, pipelined.
    Native(&'a redis::Pipeline),
    /// Plain commands of the guards (counted apart: no request sent them).
    Guard(&'a redis::Pipeline),
}

impl Request<'_> {
    fn call(&self) -> RedisCall {
        match self {
            Self::Script(..) => RedisCall::Script,
            Self::Native(_) => RedisCall::Command,
            Self::Guard(_) => RedisCall::Guard,
        }
    }
}

impl RedisBackend {
    /// The commands the current connection offers (Lua until connected: a connection made
    /// during the request then serves it with scripts).
    pub(super) fn features(&self) -> Features {
        match &self.commands {
            Commands::Node(commands) => commands.features(),
            Commands::Cluster(commands) => commands.features(),
        }
    }

    /// Sends one request on the command connection: waiting for a connection is bounded by the
    /// connect timeout, the command itself by the backend timeout.
    pub(super) async fn run<T: FromRedisValue>(
        &self,
        request: Request<'_>,
    ) -> Result<T, BackendError> {
        let started = Instant::now();
        let outcome = match &self.commands {
            Commands::Node(commands) => run_on(commands, request, self.timeout).await,
            Commands::Cluster(commands) => run_on(commands, request, self.timeout).await,
        };
        self.record(request.call(), started, &outcome);
        outcome
    }

    /// Runs one script on the command connection.
    pub(super) async fn script<T: FromRedisValue>(
        &self,
        script: &scripts::Lua,
        call: &Cmd,
    ) -> Result<T, BackendError> {
        self.run(Request::Script(script, call)).await
    }

    /// Sends native commands; `None` when the server refused them (the connection then uses
    /// Lua from now on, and so should the caller).
    pub(super) async fn native<T: FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
        refused: impl Fn(&Downgradable),
    ) -> Result<Option<T>, BackendError> {
        match self.run::<T>(Request::Native(pipe)).await {
            Ok(value) => Ok(Some(value)),
            Err(BackendError::Protocol(message) | BackendError::Refused(message)) => {
                tracing::warn!(error = %message, "the server refused a native command; using Lua on this connection");
                match &self.commands {
                    Commands::Node(commands) => commands.with_current(&refused),
                    Commands::Cluster(commands) => commands.with_current(&refused),
                }
                Ok(None)
            }
            Err(err) => Err(err),
        }
    }

    /// Counts one call in the metrics: its time, and its error if it failed.
    pub(super) fn record<T>(
        &self,
        call: RedisCall,
        started: Instant,
        outcome: &Result<T, BackendError>,
    ) {
        self.metrics.redis_roundtrip(call, started.elapsed());
        if let Err(err) = outcome {
            self.metrics.backend_error(err.kind());
        }
    }

    /// Runs one script followed by `WAIT`, pipelined on a dedicated connection, and returns
    /// the script's reply with the number of replicas that acknowledged.
    async fn run_acked<T: FromRedisValue>(
        &self,
        name: &str,
        script: &scripts::Lua,
        call: &Cmd,
        ack: ReplicaAck,
    ) -> Result<(T, u32), BackendError> {
        let attempt = async {
            match (&self.commands, &self.waits) {
                (Commands::Node(commands), Waits::Node(pool)) => {
                    acked_on(commands, pool, script, call, ack, self.timeout)
                        .await
                        .map_err(Acked::into_error)
                }
                (Commands::Cluster(commands), Waits::Cluster(masters)) => {
                    let mut conn = commands.get().await?.conn;
                    let pool = masters.pool_for(name, &mut conn).await?;
                    match acked_on(commands, &pool, script, call, ack, self.timeout).await {
                        Err(Acked::Moved) => {
                            // The slot moved: learn where, and try once more there.
                            masters.forget();
                            let pool = masters.pool_for(name, &mut conn).await?;
                            acked_on(commands, &pool, script, call, ack, self.timeout)
                                .await
                                .map_err(Acked::into_error)
                        }
                        other => other.map_err(Acked::into_error),
                    }
                }
                _ => Err(BackendError::Config("inconsistent redis backend".into())),
            }
        };
        let started = Instant::now();
        let outcome = attempt.await;
        self.record(RedisCall::ScriptWait, started, &outcome);
        outcome
    }

    /// Runs a script that changes a lease, with or without replica acknowledgement.
    pub(super) async fn run_lease_script<T: FromRedisValue>(
        &self,
        name: &str,
        script: &scripts::Lua,
        call: &Cmd,
        ack: Option<ReplicaAck>,
    ) -> Result<(T, Option<u32>), BackendError> {
        match ack {
            None => Ok((self.script(script, call).await?, None)),
            Some(ack) => {
                // Boxed: the dedicated connection's checkout and the pipeline are 2.5 KiB of
                // future, and inline they would size every lease script's future, the plain
                // ones too; an acquire's is built and copied into its box each attempt.
                let acked = Box::pin(self.run_acked(name, script, call, ack));
                let (reply, acked) = acked.await?;
                Ok((reply, Some(acked)))
            }
        }
    }

    pub(super) async fn ping_once(&self) -> Result<(), BackendError> {
        let ping = redis::cmd("PING");
        match &self.commands {
            Commands::Node(commands) => ping_on(commands, &ping, self.timeout).await,
            Commands::Cluster(commands) => ping_on(commands, &ping, self.timeout).await,
        }
    }
}

/// Sends `request` on a command connection, the command bounded by `timeout`. If the
/// connection turns out to be broken (the server restarted since), once more on a fresh one:
/// every lock operation is idempotent for its token (acquire finds its own grant, release and
/// withdrawal compare and delete, renew sets the same expiry), so a command that did run before
/// the break is harmless to repeat.
async fn run_on<C: Connect, T: FromRedisValue>(
    shared: &CommandConnection<C>,
    request: Request<'_>,
    timeout: Duration,
) -> Result<T, BackendError> {
    let mut link = shared.get().await?;
    match bounded(shared, &mut link, request, timeout).await? {
        Ok(value) => Ok(value),
        Err(err) if worth_a_fresh_connection(&err) => {
            shared.failed(link.epoch, &err);
            let mut link = shared.get().await?;
            bounded(shared, &mut link, request, timeout)
                .await?
                .map_err(|e| shared.failed(link.epoch, &e))
        }
        Err(err) => Err(shared.failed(link.epoch, &err)),
    }
}

/// Sends `request` on `link` within `timeout`; a timeout has the connection probed. A script
/// that goes in a batch is bounded by its batch (one timer per batch, see `super::batch`);
/// anything else by a timer of its own.
async fn bounded<C: Connect, T: FromRedisValue>(
    shared: &CommandConnection<C>,
    link: &mut connection::Link<C::Conn>,
    request: Request<'_>,
    timeout: Duration,
) -> Result<RedisResult<T>, BackendError> {
    let answer = match (request, shared.batcher()) {
        (Request::Script(script, call), Some(batcher)) => {
            match batcher.query(&link.conn, call, timeout).await {
                Err(err) if is_noscript(&err) => {
                    let reloaded = reload_and_eval(&mut link.conn, script, call);
                    tokio::time::timeout(timeout, reloaded).await.ok()
                }
                Err(err) if Batcher::timed_out(&err) => None,
                answer => Some(answer),
            }
        }
        _ => tokio::time::timeout(timeout, send(&mut link.conn, request))
            .await
            .ok(),
    };
    answer.ok_or_else(|| {
        shared.timed_out(link.epoch);
        BackendError::Timeout(timeout)
    })
}

async fn send<T: FromRedisValue>(
    conn: &mut impl ConnectionLike,
    request: Request<'_>,
) -> RedisResult<T> {
    match request {
        Request::Script(script, call) => eval(conn, script, call).await,
        Request::Native(pipe) | Request::Guard(pipe) => pipe.query_async(conn).await,
    }
}

async fn ping_on<C: Connect>(
    shared: &CommandConnection<C>,
    ping: &Cmd,
    timeout: Duration,
) -> Result<(), BackendError> {
    let mut link = shared.get().await?;
    match tokio::time::timeout(timeout, ping.query_async::<redis::Value>(&mut link.conn)).await {
        Ok(answer) => answer.map(drop).map_err(|e| shared.failed(link.epoch, &e)),
        Err(_) => {
            shared.timed_out(link.epoch);
            Err(BackendError::Timeout(timeout))
        }
    }
}

/// How a script with `WAIT` failed.
enum Acked {
    /// The slot moved (Cluster): ask where it lives now.
    Moved,
    Failed(BackendError),
}

impl Acked {
    fn into_error(self) -> BackendError {
        match self {
            Self::Moved => BackendError::Unavailable("the slot moved twice".into()),
            Self::Failed(err) => err,
        }
    }
}

impl From<BackendError> for Acked {
    fn from(err: BackendError) -> Self {
        Self::Failed(err)
    }
}

/// Runs `call` then `WAIT`, pipelined on a connection from `pool`: waiting for a free
/// connection is bounded by `timeout`, and the pipeline by `timeout` plus the replica wait.
///
/// An idle connection taken from the pool that turns out broken is most likely one the server
/// closed for idling (Redis's `timeout`), not a server gone: the pool's other idle connections
/// idled as long and are discarded, and the pipeline is sent once more on a fresh connection,
/// as [`run_on`] does on the command connection (and for the same reason it is safe: every
/// lock operation is idempotent for its token). Only a failure there counts against the node.
async fn acked_on<C: Connect, T: FromRedisValue>(
    shared: &CommandConnection<C>,
    pool: &DedicatedPool,
    script: &scripts::Lua,
    call: &Cmd,
    ack: ReplicaAck,
    timeout: Duration,
) -> Result<(T, u32), Acked> {
    // EVAL, not EVALSHA: after a NOSCRIPT the pipelined WAIT would have run once already.
    let mut pipe = redis::pipe();
    pipe.add_command(script.eval(call))
        .cmd("WAIT")
        .arg(ack.replicas)
        .arg(millis(ack.timeout));
    let limit = timeout + ack.timeout;
    let mut retried = false;
    loop {
        let mut checkout = pool.checkout(shared.epoch(), timeout).await?;
        let exchange = pipe.query_async::<(T, i64)>(&mut checkout.conn);
        let Ok(reply) = tokio::time::timeout(limit, exchange).await else {
            return Err(Acked::Failed(BackendError::Timeout(limit)));
        };
        match reply {
            Ok((value, acked)) => {
                checkout.give_back();
                return Ok((value, u32::try_from(acked).unwrap_or(0)));
            }
            Err(e) if is_moved(&e) => return Err(Acked::Moved),
            Err(e) if checkout.reused && !retried && worth_a_fresh_connection(&e) => {
                pool.discard_idle();
                retried = true;
            }
            Err(e) => return Err(Acked::Failed(shared.failed_dedicated(checkout.epoch, &e))),
        }
    }
}

/// Room a script call is given up front, arguments and bytes: an acquire with a claim and a
/// holder has 18 arguments, and under 512 bytes for names of a few dozen characters without
/// metadata, so a usual call's buffers are allocated once instead of grown argument by
/// argument (a longer one grows past them as before).
const SCRIPT_CALL_ARGS: usize = 20;
const SCRIPT_CALL_BYTES: usize = 512;

/// `EVALSHA` of `script` with `keys`; the caller adds the arguments.
pub(super) fn evalsha(script: &scripts::Lua, keys: &[Key<'_>]) -> Cmd {
    let mut cmd = Cmd::with_capacity(SCRIPT_CALL_ARGS, SCRIPT_CALL_BYTES);
    cmd.arg("EVALSHA");
    cmd.arg(script.hash()).arg(keys.len());
    for key in keys {
        cmd.arg(key);
    }
    cmd
}

/// Sends `call` (an EVALSHA of `script`), loading the script once if the server lacks it.
async fn eval<T: FromRedisValue>(
    conn: &mut impl ConnectionLike,
    script: &scripts::Lua,
    call: &Cmd,
) -> RedisResult<T> {
    match call.query_async(conn).await {
        Err(e) if is_noscript(&e) => reload_and_eval(conn, script, call).await,
        other => other,
    }
}

/// Loads `script` (the server had lost it: a restart, a failover) and sends `call` again.
async fn reload_and_eval<T: FromRedisValue>(
    conn: &mut impl ConnectionLike,
    script: &scripts::Lua,
    call: &Cmd,
) -> RedisResult<T> {
    script.script.load_async(conn).await?;
    call.query_async(conn).await
}

fn is_noscript(err: &redis::RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}
