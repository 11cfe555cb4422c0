//! The Lua scripts, compiled into the binary. `fence.lua` is a prelude of local functions
//! concatenated in front of the scripts that issue fences.

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($($file:literal),+) => {
        LazyLock::new(|| Script::new(concat!($(include_str!(concat!("../scripts/", $file))),+)))
    };
}

pub static ACQUIRE: LazyLock<Script> = script!("fence.lua", "acquire.lua");
pub static RENEW: LazyLock<Script> = script!("fence.lua", "renew.lua");
pub static RELEASE: LazyLock<Script> = script!("release.lua");
pub static INSPECT: LazyLock<Script> = script!("inspect.lua");
