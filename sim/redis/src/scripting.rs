//! `EVAL`, `EVALSHA` and `SCRIPT`: lockgate's own `.lua` files run by an embedded Lua 5.1, the
//! version Redis embeds, with Redis's conversions between RESP and Lua values, its `redis`
//! table (`call`, `pcall`, `sha1hex`, `error_reply`, `status_reply`, `log`) and its read-only
//! globals. A script runs whole while the server is locked, as on Redis (nothing else runs in
//! between). The libraries Redis adds (`cjson`, `bit`, `struct`, `cmsgpack`) are not here: a
//! script that uses one fails loudly in the simulation.

use std::cell::RefCell;
use std::collections::HashMap;

use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};

use crate::commands::{Data, format_score, parse_i64, upper};
use crate::resp::Frame;

/// What `#!lua flags=…` declares (Redis 7): kept for the faults that depend on them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags {
    pub allow_oom: bool,
    pub no_writes: bool,
}

#[derive(Debug)]
struct Cached {
    function: Function,
    #[allow(dead_code)]
    flags: Flags,
}

/// The Lua state and the script cache (emptied by a restart, as Redis's is).
#[derive(Debug)]
pub struct Scripting {
    lua: Lua,
    cache: HashMap<String, Cached>,
}

/// What Redis's globals protection says (Redis 7.0 `script_lua.c`).
const PROTECT_GLOBALS: &str = r#"
local mt = {}
mt.__newindex = function() error("Attempt to modify a readonly table", 2) end
mt.__index = function(_, name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
end
setmetatable(_G, mt)
"#;

impl Default for Scripting {
    fn default() -> Self {
        Self::new()
    }
}

impl Scripting {
    pub fn new() -> Self {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )
        .expect("a Lua state");
        let setup = || -> mlua::Result<()> {
            let globals = lua.globals();
            for unsafe_fn in ["loadfile", "dofile"] {
                globals.raw_set(unsafe_fn, Value::Nil)?;
            }
            let redis = lua.create_table()?;
            redis.set(
                "sha1hex",
                lua.create_function(|_, text: mlua::String| Ok(sha1_hex(&text.as_bytes())))?,
            )?;
            redis.set(
                "error_reply",
                lua.create_function(|lua, text: mlua::String| {
                    let t = lua.create_table()?;
                    t.set("err", text)?;
                    Ok(t)
                })?,
            )?;
            redis.set(
                "status_reply",
                lua.create_function(|lua, text: mlua::String| {
                    let t = lua.create_table()?;
                    t.set("ok", text)?;
                    Ok(t)
                })?,
            )?;
            redis.set("log", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
            for (i, level) in ["LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"]
                .iter()
                .enumerate()
            {
                redis.set(*level, i as i64)?;
            }
            globals.raw_set("redis", redis)?;
            lua.load(PROTECT_GLOBALS).exec()
        };
        setup().expect("the redis table");
        Self {
            lua,
            cache: HashMap::new(),
        }
    }

    /// Forgets every script (`SCRIPT FLUSH`, a restart).
    pub fn flush(&mut self) {
        self.cache.clear();
    }

    pub fn exists(&self, sha: &[u8]) -> bool {
        self.cache
            .contains_key(&String::from_utf8_lossy(sha).to_ascii_lowercase())
    }

    /// `SCRIPT LOAD`: compiles and caches `source`, answering its SHA1.
    pub fn load(&mut self, source: &[u8]) -> Result<String, Frame> {
        let sha = sha1_hex(source);
        if self.cache.contains_key(&sha) {
            return Ok(sha);
        }
        let (flags, body) = shebang(source)?;
        let function = self
            .lua
            .load(body)
            .set_name("@user_script")
            .into_function()
            .map_err(|e| {
                Frame::error(format!(
                    "ERR Error compiling script (new function): {}",
                    first_line(&e.to_string())
                ))
            })?;
        self.cache.insert(sha.clone(), Cached { function, flags });
        Ok(sha)
    }

    /// `EVAL` (`by_sha` false: `first` is the source) or `EVALSHA`; `args` are what follows
    /// the command's first argument (numkeys, keys, arguments).
    pub fn eval(&mut self, data: &mut Data, by_sha: bool, first: &[u8], args: &[Vec<u8>]) -> Frame {
        let Some(numkeys) = args.first().and_then(|n| parse_i64(n)) else {
            return Frame::error("ERR value is not an integer or out of range");
        };
        if numkeys < 0 {
            return Frame::error("ERR Number of keys can't be negative");
        }
        let numkeys = numkeys as usize;
        if numkeys > args.len() - 1 {
            return Frame::error("ERR Number of keys can't be greater than number of args");
        }
        let sha = if by_sha {
            let sha = String::from_utf8_lossy(first).to_ascii_lowercase();
            if !self.cache.contains_key(&sha) {
                return Frame::error("NOSCRIPT No matching script. Please use EVAL.");
            }
            sha
        } else {
            match self.load(first) {
                Ok(sha) => sha,
                Err(e) => return e,
            }
        };
        let keys = &args[1..1 + numkeys];
        let argv = &args[1 + numkeys..];
        let Some(cached) = self.cache.get(&sha) else {
            return Frame::error("NOSCRIPT No matching script. Please use EVAL.");
        };
        match run(&self.lua, data, &cached.function, keys, argv) {
            Ok(frame) => frame,
            Err(error) => Frame::error(error_text(&error, &sha)),
        }
    }
}

/// The flags of a `#!lua` first line, and the script's body after it.
fn shebang(source: &[u8]) -> Result<(Flags, &[u8]), Frame> {
    let Some(rest) = source.strip_prefix(b"#!") else {
        return Ok((Flags::default(), source));
    };
    let end = rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
    let line = String::from_utf8_lossy(&rest[..end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    if parts.next() != Some("lua") {
        return Err(Frame::error("ERR Unexpected engine in script shebang"));
    }
    let mut flags = Flags::default();
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(Frame::error("ERR Unknown lua shebang option"));
        };
        for flag in list.split(',').filter(|f| !f.is_empty()) {
            match flag {
                "allow-oom" => flags.allow_oom = true,
                "no-writes" => flags.no_writes = true,
                "allow-stale" | "no-cluster" | "allow-cross-slot-keys" => {}
                other => {
                    return Err(Frame::error(format!(
                        "ERR Unexpected flag in script shebang: {other}"
                    )));
                }
            }
        }
    }
    // The body keeps its line numbers: the shebang line becomes an empty one.
    Ok((flags, &rest[end..]))
}

/// Runs a compiled script with its KEYS and ARGV, `redis.call` reaching `data`.
fn run(
    lua: &Lua,
    data: &mut Data,
    function: &Function,
    keys: &[Vec<u8>],
    argv: &[Vec<u8>],
) -> mlua::Result<Frame> {
    let globals = lua.globals();
    globals.raw_set("KEYS", strings(lua, keys)?)?;
    globals.raw_set("ARGV", strings(lua, argv)?)?;
    let data = RefCell::new(data);
    let redis: Table = globals.raw_get("redis")?;
    lua.scope(|scope| {
        let call = scope.create_function(|lua, args: MultiValue| {
            call_from_script(lua, &mut data.borrow_mut(), args, false)
        })?;
        let pcall = scope.create_function(|lua, args: MultiValue| {
            call_from_script(lua, &mut data.borrow_mut(), args, true)
        })?;
        redis.raw_set("call", call)?;
        redis.raw_set("pcall", pcall)?;
        let reply: Value = function.call(())?;
        Ok(to_frame(&reply))
    })
}

fn strings(lua: &Lua, items: &[Vec<u8>]) -> mlua::Result<Table> {
    let table = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.iter().enumerate() {
        table.raw_set(i + 1, lua.create_string(item)?)?;
    }
    Ok(table)
}

/// Commands a script may not call (Redis's `noscript` flag, among what the simulation has).
const NOT_FROM_SCRIPTS: &[&str] = &[
    "EVAL",
    "EVALSHA",
    "SCRIPT",
    "SUBSCRIBE",
    "PSUBSCRIBE",
    "UNSUBSCRIBE",
    "PUNSUBSCRIBE",
    "WAIT",
    "CLIENT",
    "CONFIG",
    "SELECT",
];

/// `redis.call` / `redis.pcall`: the arguments as Redis 7.0 converts them (a number written
/// `%.17g`, not through Lua's own `tostring`), the command run on `data`, its reply converted
/// back.
fn call_from_script(
    lua: &Lua,
    data: &mut Data,
    args: MultiValue,
    protected: bool,
) -> mlua::Result<Value> {
    let _ = lua;
    let mut words = Vec::with_capacity(args.len());
    for arg in args {
        match arg {
            Value::String(text) => words.push(text.as_bytes().to_vec()),
            Value::Integer(n) => words.push(format_score(n as f64, data.flavor).into_bytes()),
            Value::Number(n) => words.push(format_score(n, data.flavor).into_bytes()),
            _ => {
                return Err(mlua::Error::RuntimeError(
                    "ERR Lua redis lib command arguments must be strings or integers".into(),
                ));
            }
        }
    }
    let Some(name) = words.first().map(|n| upper(n)) else {
        return Err(mlua::Error::RuntimeError(
            "ERR Please specify at least one argument for this redis lib call".into(),
        ));
    };
    let reply = if NOT_FROM_SCRIPTS.contains(&name.as_str()) {
        Frame::error("ERR This Redis command is not allowed from script")
    } else {
        match data.run(&name, &words[1..]) {
            Some(reply) => reply,
            None => data.not_simulated(format!("{name} (from a script)")),
        }
    };
    match reply {
        Frame::Error(text) if !protected => Err(mlua::Error::RuntimeError(text)),
        frame => to_lua(lua, frame),
    }
}

/// A reply as Redis gives it to a script: integer → number, bulk → string, nil → false,
/// array → table, status → `{ok=…}`, error → `{err=…}` (from `pcall`).
fn to_lua(lua: &Lua, frame: Frame) -> mlua::Result<Value> {
    Ok(match frame {
        Frame::Integer(n) => Value::Number(n as f64),
        Frame::Bulk(bytes) => Value::String(lua.create_string(&bytes)?),
        Frame::Nil | Frame::NilArray => Value::Boolean(false),
        Frame::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.into_iter().enumerate() {
                table.raw_set(i + 1, to_lua(lua, item)?)?;
            }
            Value::Table(table)
        }
        Frame::Simple(text) => {
            let table = lua.create_table()?;
            table.raw_set("ok", text)?;
            Value::Table(table)
        }
        Frame::Error(text) => {
            let table = lua.create_table()?;
            table.raw_set("err", text)?;
            Value::Table(table)
        }
    })
}

/// A script's return value as Redis replies with it: number → integer (truncated), string →
/// bulk, true → 1, false and nil → nil, a table with `err`/`ok` → error/status, any other
/// table → array up to its first nil.
fn to_frame(value: &Value) -> Frame {
    match value {
        Value::Boolean(true) => Frame::Integer(1),
        Value::Integer(n) => Frame::Integer(*n),
        Value::Number(n) => Frame::Integer(*n as i64),
        Value::String(s) => Frame::Bulk(s.as_bytes().to_vec()),
        Value::Table(table) => {
            if let Ok(Value::String(err)) = table.raw_get::<Value>("err") {
                return Frame::Error(String::from_utf8_lossy(&err.as_bytes()).into_owned());
            }
            if let Ok(Value::String(ok)) = table.raw_get::<Value>("ok") {
                return Frame::Simple(String::from_utf8_lossy(&ok.as_bytes()).into_owned());
            }
            let mut items = Vec::new();
            for i in 1.. {
                match table.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => break,
                    Ok(item) => items.push(to_frame(&item)),
                }
            }
            Frame::Array(items)
        }
        _ => Frame::Nil,
    }
}

/// The error reply of a failed script: a command's error as the command gave it, a Lua error
/// as Redis words it (`ERR user_script:…`).
fn error_text(error: &mlua::Error, sha: &str) -> String {
    let mut cause = error;
    while let mlua::Error::CallbackError { cause: inner, .. } = cause {
        cause = inner;
    }
    let text = match cause {
        mlua::Error::RuntimeError(text) => first_line(text),
        other => first_line(&other.to_string()),
    };
    let has_code = text
        .split(' ')
        .next()
        .is_some_and(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_uppercase()));
    if has_code {
        format!("{text} script: {sha}")
    } else {
        format!("ERR {text} script: {sha}")
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}

pub fn sha1_hex(bytes: &[u8]) -> String {
    sha1_smol::Sha1::from(bytes).digest().to_string()
}
