//! What a redis-rs error means for the gateway: whether the command may have run, whether
//! the connection it came from is still good, and what to tell the caller.

use redis::{ErrorKind, RedisError, ServerErrorKind};

use crate::backend::BackendError;

/// Whether a command failed because its connection was found broken or refused, or reached a
/// master demoted to replica (`READONLY`: nothing was written), so that the same command on a
/// fresh connection may well succeed (a restarted server, a failover). Not timeouts: the
/// command may be running still.
pub fn worth_a_fresh_connection(err: &RedisError) -> bool {
    !err.is_timeout()
        && (err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly))
}

/// Whether the connection an error came from must be replaced: it broke, or it reached a
/// master demoted to replica. Not a timeout: a slow answer is not a broken connection (a
/// connection that stays silent is found out by a probe, see `connection`).
pub fn breaks_connection(err: &RedisError) -> bool {
    !err.is_timeout()
        && (err.is_io_error()
            || err.is_connection_dropped()
            || err.is_unrecoverable_error()
            // A master demoted to replica (failover) answers READONLY to writes.
            || err.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly))
}

/// A failed command, as the rest of the gateway needs to know it. A timeout or a connection
/// that broke while the answer was awaited leaves the outcome unknown (`NoReply`).
pub fn classify(err: &RedisError) -> BackendError {
    if err.is_timeout() || err.is_connection_dropped() {
        return BackendError::NoReply(err.to_string());
    }
    // `maxmemory` reached under `noeviction`: the write was refused, so nothing ran.
    if err.code() == Some("OOM") || err.to_string().contains("OOM command not allowed") {
        return BackendError::Full(err.to_string());
    }
    // A script already running: this one did not start.
    if err.code() == Some("BUSY") {
        return BackendError::Unavailable(err.to_string());
    }
    if err.kind() == ErrorKind::Server(ServerErrorKind::NoPerm) {
        return BackendError::Refused(err.to_string());
    }
    match err.kind() {
        ErrorKind::Io
        | ErrorKind::AuthenticationFailed
        | ErrorKind::MasterNameNotFoundBySentinel
        | ErrorKind::EmptySentinelList
        | ErrorKind::ClusterConnectionNotFound
        | ErrorKind::Server(
            ServerErrorKind::BusyLoading
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::Moved
            | ServerErrorKind::Ask,
        ) => BackendError::Unavailable(err.to_string()),
        _ => BackendError::Protocol(err.to_string()),
    }
}

/// A failed connect: nothing was sent.
pub fn classify_connect(err: &RedisError) -> BackendError {
    BackendError::Unavailable(err.to_string())
}

/// Whether a slot moved (`MOVED`/`ASK`): ask the cluster again where it lives.
pub fn is_moved(err: &RedisError) -> bool {
    matches!(
        err.kind(),
        ErrorKind::Server(ServerErrorKind::Moved | ServerErrorKind::Ask)
    )
}
