//! The Lua scripts, compiled into the binary. `fence.lua` is a prelude of local functions
//! concatenated in front of the scripts that issue fences.

use std::sync::LazyLock;

use redis::Script;

macro_rules! source {
    ($($file:literal),+) => {
        concat!($(include_str!(concat!("../scripts/", $file))),+)
    };
}

const ACQUIRE_SOURCE: &str = source!("fence.lua", "acquire.lua");
const RENEW_SOURCE: &str = source!("fence.lua", "renew.lua");
const RELEASE_SOURCE: &str = source!("release.lua");
const INSPECT_SOURCE: &str = source!("inspect.lua");
const RAISE_FENCE_SOURCE: &str = source!("raise_fence.lua");

pub static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(ACQUIRE_SOURCE));
pub static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(RENEW_SOURCE));
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_SOURCE));
pub static INSPECT: LazyLock<Script> = LazyLock::new(|| Script::new(INSPECT_SOURCE));
pub static RAISE_FENCE: LazyLock<Script> = LazyLock::new(|| Script::new(RAISE_FENCE_SOURCE));

/// SCRIPT LOAD of every script, in one pipeline.
pub fn load_all() -> redis::Pipeline {
    let mut pipe = redis::pipe();
    for source in [
        ACQUIRE_SOURCE,
        RENEW_SOURCE,
        RELEASE_SOURCE,
        INSPECT_SOURCE,
        RAISE_FENCE_SOURCE,
    ] {
        pipe.cmd("SCRIPT").arg("LOAD").arg(source).ignore();
    }
    pipe
}
