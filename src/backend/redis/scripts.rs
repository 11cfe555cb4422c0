//! The Lua scripts, compiled into the binary and run by SHA (reloaded on NOSCRIPT). Each
//! script's opening comment lists its KEYS, ARGV and replies.

use std::sync::LazyLock;

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
    ACQUIRE = ["grant.lua", "acquire.lua"],
    FAIR_ACQUIRE = ["grant.lua", "fair_head.lua", "fair.lua", "fair_acquire.lua"],
    QUEUE_LEAVE = ["fair_head.lua", "fair.lua", "queue_leave.lua"],
    QUEUE_CLEAR = ["fair_head.lua", "queue_clear.lua"],
    RELEASE = ["presented_token.lua", "release.lua"],
    WITHDRAW = ["grant.lua", "withdraw.lua"],
    RENEW = ["presented_token.lua", "renew.lua"],
    INSPECT = ["inspect.lua"],
    FINALIZE = ["grant.lua", "finalize.lua"],
    REVOKE = ["revoke.lua"],
    REENTER = ["presented_token.lua", "reenter.lua"],
    REENTRANT_RELEASE = ["presented_token.lua", "reentrant_release.lua"],
    PERMIT_ACQUIRE = ["grant.lua", "lease_set.lua", "permit_acquire.lua"],
    PERMIT_RENEW = ["allow_oom.lua", "grant.lua", "lease_set.lua", "permit_renew.lua"],
    PERMIT_RELEASE = ["grant.lua", "lease_set.lua", "permit_release.lua"],
    PERMIT_INSPECT = ["grant.lua", "lease_set.lua", "permit_inspect.lua"],
    SHARED_ACQUIRE = ["grant.lua", "lease_set.lua", "shared_acquire.lua"],
    SHARED_RENEW = ["allow_oom.lua", "grant.lua", "lease_set.lua", "shared_renew.lua"],
    SHARED_RELEASE = ["grant.lua", "lease_set.lua", "shared_release.lua"],
    SHARED_INSPECT = ["grant.lua", "lease_set.lua", "shared_inspect.lua"],
    MULTI_ACQUIRE = ["grant.lua", "multi_acquire.lua"],
    MULTI_RENEW = ["presented_token.lua", "multi_renew.lua"],
    MULTI_RELEASE = ["grant.lua", "presented_token.lua", "multi_release.lua"],
    MARKER = ["marker.lua"],
}

/// SCRIPT LOAD of every script, in one pipeline.
pub fn load_all() -> redis::Pipeline {
    let mut pipe = redis::pipe();
    for source in SOURCES {
        pipe.cmd("SCRIPT").arg("LOAD").arg(*source).ignore();
    }
    pipe
}

#[cfg(test)]
mod tests {
    use super::*;

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
