//! The Lua scripts, compiled into the binary and run by SHA (reloaded on NOSCRIPT). Each
//! script's opening comment lists its KEYS, ARGV and replies.

use std::sync::{LazyLock, Mutex};

use redis::{Cmd, Script};

/// A script and its source.
#[derive(Debug)]
pub struct Lua {
    /// The script's name, for errors (`PERMIT_ACQUIRE`).
    pub name: &'static str,
    pub script: Script,
    pub source: &'static str,
}

impl Lua {
    /// A script made of `parts` run as one (preludes, then the script's own file), for a kind
    /// of lease that keeps its scripts in its own module. Built on the kind's first use, and
    /// from then on loaded on every new connection with the built-in scripts (see
    /// `load_all`).
    pub fn assembled(name: &'static str, parts: &[&str]) -> Self {
        // Built once, into a static that lives as long as the process.
        let source: &'static str = parts.concat().leak();
        ASSEMBLED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(source);
        Self {
            name,
            script: Script::new(source),
            source,
        }
    }

    pub fn hash(&self) -> &str {
        self.script.get_hash()
    }

    /// `call` (an `EVALSHA` of this script) as an `EVAL` that carries the source: for a
    /// connection that may not have the script cached, where a NOSCRIPT round trip is not
    /// affordable (a pipelined `WAIT` would run twice).
    pub fn eval(&self, call: &Cmd) -> Cmd {
        let mut eval = redis::cmd("EVAL");
        eval.arg(self.source);
        for arg in call.args_iter().skip(2) {
            if let redis::Arg::Simple(bytes) = arg {
                eval.arg(bytes);
            }
        }
        eval
    }
}

/// A script is one file, or several run as one (a prelude of shared functions, then the
/// script's own file: Lua has no `require` in Redis). The renewals that update a sorted set
/// start with `allow_oom.lua`, a flags line, so that a full server still runs them (they add
/// nothing; the others' `PEXPIRE` runs there unflagged).
macro_rules! scripts {
    ($($name:ident = [$($file:literal),+],)+) => {
        $(pub static $name: LazyLock<Lua> = LazyLock::new(|| {
            let source = concat!($(include_str!(concat!("../scripts/", $file))),+);
            Lua { name: stringify!($name), script: Script::new(source), source }
        });)+

        /// Every script's source, for loading them all at once.
        const SOURCES: &[&str] = &[$(concat!($(include_str!(concat!("../scripts/", $file))),+)),+];
    };
}

scripts! {
    ACQUIRE = ["acquire.lua"],
    FAIR_ACQUIRE = ["grant.lua", "fair_head.lua", "fair.lua", "fair_acquire.lua"],
    QUEUE_LEAVE = ["fair_head.lua", "fair.lua", "queue_leave.lua"],
    QUEUE_CLEAR = ["fair_head.lua", "queue_clear.lua"],
    RELEASE = ["release.lua"],
    WITHDRAW = ["grant.lua", "withdraw.lua"],
    RENEW = ["presented_token.lua", "renew.lua"],
    INSPECT = ["inspect.lua"],
    FINALIZE = ["grant.lua", "raise_fence.lua", "finalize.lua"],
    REVOKE = ["revoke.lua"],
    GRANTS_REVOKE = ["grants_revoke.lua"],
    REENTER = ["presented_token.lua", "reenter.lua"],
    REENTRANT_RELEASE = ["presented_token.lua", "reentrant_release.lua"],
    MULTI_ACQUIRE = ["grant.lua", "multi_acquire.lua"],
    MULTI_RENEW = ["presented_token.lua", "multi_renew.lua"],
    MULTI_RELEASE = ["grant.lua", "presented_token.lua", "multi_release.lua"],
    MARKER = ["marker.lua"],
}

/// The shared functions a kind's own scripts start with (see
/// [`GrantSetScripts::assembled`](super::GrantSetScripts::assembled)): Lua has no `require` in
/// Redis.
pub(super) mod prelude {
    /// A flags line: the script runs on a full server (a renewal that adds nothing).
    pub const ALLOW_OOM: &str = include_str!("../scripts/allow_oom.lua");
    /// The server's clock, fences and holder records of every grant.
    pub const GRANT: &str = include_str!("../scripts/grant.lua");
    /// A set of grants kept as a sorted set of tokens and a hash of claims and holders.
    pub const LEASE_SET: &str = include_str!("../scripts/lease_set.lua");
}

/// The sources of the scripts kinds keep in their own modules ([`Lua::assembled`]), as each
/// is built: every connection made after that (to a restarted or failed-over server, whose
/// cache is empty) is given them too. The composition root builds them all before the first
/// connection (`primitive::build_redis_scripts`); one not built yet would be loaded by its
/// first NOSCRIPT.
static ASSEMBLED: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// SCRIPT LOAD of every script, in one pipeline: the built-in ones and those kinds have built.
pub fn load_all() -> redis::Pipeline {
    let mut pipe = redis::pipe();
    let assembled = ASSEMBLED.lock().unwrap_or_else(|p| p.into_inner());
    for source in SOURCES.iter().chain(assembled.iter()) {
        pipe.cmd("SCRIPT").arg("LOAD").arg(*source).ignore();
    }
    pipe
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_a_kind_built_is_loaded_on_every_new_connection() {
        let loaded = |source: &str| {
            load_all().cmd_iter().any(|cmd| {
                cmd.args_iter()
                    .any(|arg| arg == redis::Arg::Simple(source.as_bytes()))
            })
        };
        let source = "return 'a_script_a_kind_built'";
        assert!(!loaded(source));
        let script = Lua::assembled("T", &["return ", "'a_script_a_kind_built'"]);
        assert_eq!(script.source, source);
        assert!(loaded(source));
    }

    #[test]
    fn an_evalsha_becomes_an_eval_with_the_same_keys_and_arguments() {
        let mut call = redis::cmd("EVALSHA");
        call.arg(RENEW.hash())
            .arg(1)
            .arg("lockgate:{a}")
            .arg("tok")
            .arg(500);
        let eval = RENEW.eval(&call);
        let args: Vec<Vec<u8>> = eval
            .args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => bytes.to_vec(),
                _ => Vec::new(),
            })
            .collect();
        assert_eq!(args[0], b"EVAL");
        assert_eq!(args[1], RENEW.source.as_bytes());
        assert_eq!(
            args[2..],
            [
                b"1".to_vec(),
                b"lockgate:{a}".to_vec(),
                b"tok".to_vec(),
                b"500".to_vec()
            ]
        );
    }
}
