//! What the connected server offers beyond Redis 7.0, found out on every new connection.
//!
//! Valkey 9 has `DELIFEQ key value` (compare-and-delete), Valkey 8.1+ and Redis 8.4 have
//! `SET key value IFEQ value … GET` (compare-and-set that also returns the old value), and
//! Redis 8.4 has `DELEX key IFEQ value`. Where the server has them, release and renew use them
//! instead of a Lua script: one plain command, nothing to load into a script cache, nothing to
//! reload after a failover. The semantics stay those of the scripts:
//!
//! * release: `DELIFEQ`/`DELEX` answers 1 (released) or 0; a 0 is told apart (not held, or held
//!   by another token) by one `GET`, a rare path. The release notification is kept: `PUBLISH`
//!   goes in the same pipeline, also when the delete did nothing (a spurious wake-up costs a
//!   waiter one look, a missed one would cost it the holder's ttl).
//! * renew: `SET lock token IFEQ token PX ttl GET` answers the old value: nil (not held), the
//!   token (renewed) or another token (not owner, nothing changed).
//!
//! Detection is per connection, because a failover can put a server of another version behind
//! the same address; a native command that the server refuses all the same (a rolling
//! upgrade of a cluster, an ACL) switches that connection back to Lua.

use std::sync::atomic::{AtomicU8, Ordering};

use redis::Value;

/// How a release is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReleaseVia {
    #[default]
    Lua,
    DelIfEq,
    DelEx,
}

/// How a renewal is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RenewVia {
    #[default]
    Lua,
    SetIfEq,
}

impl ReleaseVia {
    /// The label of the `lockgate_redis_commands` metric and of the startup log.
    pub fn label(self) -> &'static str {
        match self {
            Self::Lua => "lua",
            Self::DelIfEq => "delifeq",
            Self::DelEx => "delex",
        }
    }
}

impl RenewVia {
    pub fn label(self) -> &'static str {
        match self {
            Self::Lua => "lua",
            Self::SetIfEq => "set_ifeq",
        }
    }
}

/// The commands a connection uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Features {
    pub release: ReleaseVia,
    pub renew: RenewVia,
}

/// The server behind a connection, as `INFO server` names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Server {
    /// `redis` or `valkey`.
    pub name: String,
    pub version: String,
}

/// Whether native commands may be used at all (`--redis-native-commands`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NativeCommands {
    /// Use them where the server has them.
    #[default]
    Auto,
    /// Always Lua.
    Off,
}

/// The commands that find out what a server offers: `INFO server`, `COMMAND INFO` of the
/// native deletes, and a `SET … IFEQ … GET` on `probe_key` that can only write if the key
/// already holds the improbable comparison value.
pub fn probe(probe_key: &str) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    pipe.cmd("INFO").arg("server");
    pipe.cmd("COMMAND").arg("INFO").arg("DELIFEQ").arg("DELEX");
    pipe.cmd("SET")
        .arg(probe_key)
        .arg("lockgate-probe")
        .arg("IFEQ")
        .arg("lockgate-probe-never-stored")
        .arg("PX")
        .arg(1000)
        .arg("GET");
    pipe
}

/// Reads the replies to [`probe`], sent as one pipeline.
pub fn read_probe(replies: &[Value], allowed: NativeCommands) -> (Server, Features) {
    let set_ifeq = !matches!(replies.get(2), Some(Value::ServerError(_)) | None);
    read_answers(replies.first(), replies.get(1), set_ifeq, allowed)
}

/// Reads the answers to [`probe`]'s commands: `INFO server`, `COMMAND INFO`, and whether the
/// `SET … IFEQ … GET` was accepted.
pub fn read_answers(
    info: Option<&Value>,
    commands: Option<&Value>,
    set_ifeq: bool,
    allowed: NativeCommands,
) -> (Server, Features) {
    let server = info.map(read_info).unwrap_or_default();
    if allowed == NativeCommands::Off {
        return (server, Features::default());
    }
    let exists = |index: usize| match commands {
        Some(Value::Array(infos)) => infos
            .get(index)
            .is_some_and(|info| !matches!(info, Value::Nil)),
        _ => false,
    };
    let release = if exists(0) {
        ReleaseVia::DelIfEq
    } else if exists(1) {
        ReleaseVia::DelEx
    } else {
        ReleaseVia::Lua
    };
    let renew = if set_ifeq {
        RenewVia::SetIfEq
    } else {
        RenewVia::Lua
    };
    (server, Features { release, renew })
}

fn read_info(reply: &Value) -> Server {
    let text = match reply {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::SimpleString(text) => text.clone(),
        _ => return Server::default(),
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(|value| value.trim().to_owned())
    };
    match field("valkey_version") {
        Some(version) => Server {
            name: "valkey".into(),
            version,
        },
        None => Server {
            name: field("server_name").unwrap_or_else(|| "redis".into()),
            version: field("redis_version").unwrap_or_default(),
        },
    }
}

/// Features that a refusal can turn off for the rest of a connection's life.
#[derive(Debug, Default)]
pub struct Downgradable {
    /// Bit 0: release falls back to Lua; bit 1: renew does.
    off: AtomicU8,
}

impl Downgradable {
    /// `features` less what a refusal has turned off.
    pub fn apply(&self, features: Features) -> Features {
        let off = self.off.load(Ordering::Relaxed);
        Features {
            release: if off & 1 != 0 {
                ReleaseVia::Lua
            } else {
                features.release
            },
            renew: if off & 2 != 0 {
                RenewVia::Lua
            } else {
                features.renew
            },
        }
    }

    pub fn release_refused(&self) {
        self.off.fetch_or(1, Ordering::Relaxed);
    }

    pub fn renew_refused(&self) {
        self.off.fetch_or(2, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn valkey_9_gets_delifeq_and_set_ifeq() {
        let info = bulk(
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n",
        );
        let replies = [
            info,
            Value::Array(vec![Value::Array(vec![bulk("delifeq")]), Value::Nil]),
            Value::Nil,
        ];
        let (server, features) = read_probe(&replies, NativeCommands::Auto);
        assert_eq!(server.name, "valkey");
        assert_eq!(server.version, "9.1.2");
        assert_eq!(features.release, ReleaseVia::DelIfEq);
        assert_eq!(features.renew, RenewVia::SetIfEq);
        let (_, off) = read_probe(&replies, NativeCommands::Off);
        assert_eq!(off, Features::default());
    }

    #[test]
    fn redis_7_gets_lua() {
        let info = bulk("# Server\r\nredis_version:7.0.15\r\n");
        let refused = redis::parse_redis_value(b"-ERR syntax error\r\n").expect("resp");
        assert!(matches!(refused, Value::ServerError(_)));
        let replies = [info, Value::Array(vec![Value::Nil, Value::Nil]), refused];
        let (server, features) = read_probe(&replies, NativeCommands::Auto);
        assert_eq!(
            (server.name.as_str(), server.version.as_str()),
            ("redis", "7.0.15")
        );
        assert_eq!(features, Features::default());
    }

    #[test]
    fn refusals_downgrade_one_command_each() {
        let native = Features {
            release: ReleaseVia::DelEx,
            renew: RenewVia::SetIfEq,
        };
        let state = Downgradable::default();
        assert_eq!(state.apply(native), native);
        state.renew_refused();
        assert_eq!(state.apply(native).renew, RenewVia::Lua);
        assert_eq!(state.apply(native).release, ReleaseVia::DelEx);
    }
}
