//! The data commands: what lockgate sends and its scripts call, with Redis 7.0's replies and
//! error texts. A command or an option lockgate does not use is refused loudly (an error that
//! says "not simulated", and a note in [`Data::gaps`]) rather than half-done; one that Redis
//! 7.0 itself does not know is refused as Redis refuses it.

use std::collections::BTreeMap;

use crate::clock::Clock;
use crate::glob::matches;
use crate::keyspace::{Db, Entry, Value, ZSet};
use crate::pubsub::PubSub;
use crate::resp::Frame;

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const SYNTAX: &str = "ERR syntax error";

/// The version the simulated server claims (`INFO server`), and whose behaviour it copies.
pub const REDIS_VERSION: &str = "7.0.15";

/// Which server's manners the simulation copies where Redis 7.0 and Valkey 9 differ in what
/// lockgate can see: how a double is written (a score in a reply, a Lua number passed to
/// `redis.call`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Flavor {
    /// `%.17g` (Redis 7.0).
    #[default]
    Redis7,
    /// The shortest text that reads back as the same double (Valkey's `fpconv_dtoa`).
    Valkey9,
}

/// The server's state that commands read and write.
#[derive(Debug, Default)]
pub struct Data {
    pub flavor: Flavor,
    pub db: Db,
    pub clock: Clock,
    pub pubsub: PubSub,
    /// Commands refused because the simulation does not have them (each a line saying which):
    /// a run that meets one is not simulating what lockgate does against Redis.
    pub gaps: Vec<String>,
    /// A replica's: writes are answered `READONLY` (from a script too, as Redis 7 does for a
    /// script without flags: it runs, and its first write fails).
    pub read_only: bool,
}

/// The data commands that write, which a replica refuses.
const WRITES: &[&str] = &[
    "SET",
    "DEL",
    "PEXPIRE",
    "HSET",
    "HDEL",
    "HINCRBY",
    "ZADD",
    "ZREM",
    "ZREMRANGEBYSCORE",
    "ZUNIONSTORE",
    "FLUSHALL",
];

type Args<'a> = &'a [Vec<u8>];
type Hash = BTreeMap<Vec<u8>, Vec<u8>>;

impl Data {
    /// Runs a data command (`name` in capitals, `args` after the name); `None` if `name` is not
    /// one (the connection's and the scripts' commands are elsewhere).
    pub fn run(&mut self, name: &str, args: Args) -> Option<Frame> {
        if self.read_only && WRITES.contains(&name) {
            return Some(Frame::error(
                "READONLY You can't write against a read only replica.",
            ));
        }
        let now = self.clock.now_ms();
        let reply = match name {
            "GET" => arity(args, 1, 1).unwrap_or_else(|| self.get(&args[0], now)),
            "SET" => arity(args, 2, usize::MAX).unwrap_or_else(|| self.set(args, now)),
            "DEL" => arity(args, 1, usize::MAX).unwrap_or_else(|| {
                let n = args
                    .iter()
                    .filter(|k| self.db.remove(k, now).is_some())
                    .count();
                Frame::Integer(n as i64)
            }),
            "EXISTS" => arity(args, 1, usize::MAX).unwrap_or_else(|| {
                let n = args
                    .iter()
                    .filter(|k| self.db.get(k, now).is_some())
                    .count();
                Frame::Integer(n as i64)
            }),
            "PTTL" => arity(args, 1, 1).unwrap_or_else(|| match self.db.get(&args[0], now) {
                None => Frame::Integer(-2),
                Some(Entry {
                    expires_at_ms: None,
                    ..
                }) => Frame::Integer(-1),
                Some(Entry {
                    expires_at_ms: Some(when),
                    ..
                }) => Frame::Integer((when - now).max(0)),
            }),
            "PEXPIRE" | "PEXPIREAT" => {
                arity(args, 2, 2).unwrap_or_else(|| match parse_i64(&args[1]) {
                    Some(at) => {
                        let when = if name == "PEXPIRE" { now + at } else { at };
                        self.expire(&args[0], when, now)
                    }
                    None => Frame::error(NOT_INTEGER),
                })
            }
            "HSET" => arity(args, 3, usize::MAX).unwrap_or_else(|| self.hset(args, now)),
            "HGET" => arity(args, 2, 2).unwrap_or_else(|| match self.hash(&args[0], now) {
                Err(e) => e,
                Ok(None) => Frame::Nil,
                Ok(Some(h)) => h.get(&args[1]).map_or(Frame::Nil, Frame::bulk),
            }),
            "HMGET" => {
                arity(args, 2, usize::MAX).unwrap_or_else(|| match self.hash(&args[0], now) {
                    Err(e) => e,
                    Ok(h) => Frame::Array(
                        args[1..]
                            .iter()
                            .map(|f| h.and_then(|h| h.get(f)).map_or(Frame::Nil, Frame::bulk))
                            .collect(),
                    ),
                })
            }
            "HDEL" => arity(args, 2, usize::MAX).unwrap_or_else(|| self.hdel(args, now)),
            "HINCRBY" => arity(args, 3, 3).unwrap_or_else(|| self.hincrby(args, now)),
            "ZADD" => arity(args, 3, usize::MAX).unwrap_or_else(|| self.zadd(args, now)),
            "ZSCORE" => arity(args, 2, 2).unwrap_or_else(|| {
                let flavor = self.flavor;
                match self.zset(&args[0], now) {
                    Err(e) => e,
                    Ok(z) => z
                        .and_then(|z| z.score(&args[1]))
                        .map_or(Frame::Nil, |s| Frame::bulk(format_score(s, flavor))),
                }
            }),
            "ZRANK" => arity(args, 2, 2).unwrap_or_else(|| match self.zset(&args[0], now) {
                Err(e) => e,
                Ok(z) => z
                    .and_then(|z| z.sorted().iter().position(|(m, _)| *m == args[1]))
                    .map_or(Frame::Nil, |i| Frame::Integer(i as i64)),
            }),
            "ZCARD" => arity(args, 1, 1).unwrap_or_else(|| match self.zset(&args[0], now) {
                Err(e) => e,
                Ok(z) => Frame::Integer(z.map_or(0, ZSet::len) as i64),
            }),
            "ZREM" => arity(args, 2, usize::MAX).unwrap_or_else(|| self.zrem(args, now)),
            "ZRANGE" => arity(args, 3, usize::MAX).unwrap_or_else(|| self.zrange(args, now)),
            "ZRANGEBYSCORE" | "ZCOUNT" | "ZREMRANGEBYSCORE" => {
                arity(args, 3, usize::MAX).unwrap_or_else(|| self.by_score(name, args, now))
            }
            "ZUNIONSTORE" => {
                arity(args, 3, usize::MAX).unwrap_or_else(|| self.zunionstore(args, now))
            }
            "PUBLISH" => arity(args, 2, 2)
                .unwrap_or_else(|| Frame::Integer(self.pubsub.publish(&args[0], &args[1]))),
            "TIME" => arity(args, 0, 0).unwrap_or_else(|| {
                let us = self.clock.now_us();
                Frame::Array(vec![
                    Frame::bulk(us.div_euclid(1_000_000).to_string()),
                    Frame::bulk(us.rem_euclid(1_000_000).to_string()),
                ])
            }),
            "SCAN" => arity(args, 1, usize::MAX).unwrap_or_else(|| self.scan(args, now)),
            "INFO" => Frame::bulk(info(self.read_only)),
            "CONFIG" => arity(args, 1, usize::MAX).unwrap_or_else(|| self.config(args)),
            "COMMAND" => self.command_info(args),
            "FLUSHALL" => {
                self.db.clear();
                Frame::ok()
            }
            _ => return None,
        };
        Some(reply)
    }

    /// Refuses a command or option the simulation does not have, and notes it.
    pub fn not_simulated(&mut self, what: String) -> Frame {
        let reply = Frame::error(format!("ERR sim: {what} is not simulated"));
        self.gaps.push(what);
        reply
    }

    fn get(&mut self, key: &[u8], now: i64) -> Frame {
        match self.db.get(key, now) {
            None => Frame::Nil,
            Some(Entry {
                value: Value::Str(s),
                ..
            }) => Frame::bulk(s),
            Some(_) => Frame::error(WRONGTYPE),
        }
    }

    fn set(&mut self, args: Args, now: i64) -> Frame {
        let (key, value) = (&args[0], &args[1]);
        let (mut nx, mut xx, mut get, mut keepttl) = (false, false, false, false);
        let mut expires: Option<i64> = None;
        let mut i = 2;
        while i < args.len() {
            let option = upper(&args[i]);
            let has_next = i + 1 < args.len();
            match option.as_str() {
                "NX" if !xx => nx = true,
                "XX" if !nx => xx = true,
                "GET" => get = true,
                "KEEPTTL" if expires.is_none() => keepttl = true,
                "PX" | "PXAT" | "EX" | "EXAT" if has_next && expires.is_none() && !keepttl => {
                    i += 1;
                    let Some(n) = parse_i64(&args[i]) else {
                        return Frame::error(NOT_INTEGER);
                    };
                    if n <= 0 {
                        return Frame::error("ERR invalid expire time in 'set' command");
                    }
                    expires = Some(match option.as_str() {
                        "PX" => now + n,
                        "PXAT" => n,
                        "EX" => now + n * 1000,
                        _ => n * 1000,
                    });
                }
                _ => return Frame::error(SYNTAX),
            }
            i += 1;
        }
        let old = match self.db.get(key, now) {
            None => None,
            Some(Entry {
                value: Value::Str(s),
                expires_at_ms,
            }) => Some((s.clone(), *expires_at_ms)),
            Some(_) if get => return Frame::error(WRONGTYPE),
            Some(e) => Some((Vec::new(), e.expires_at_ms)),
        };
        let reply_old = || match &old {
            Some((s, _)) => Frame::bulk(s),
            None => Frame::Nil,
        };
        if (nx && old.is_some()) || (xx && old.is_none()) {
            return if get { reply_old() } else { Frame::Nil };
        }
        let expires_at_ms = if keepttl {
            old.as_ref().and_then(|(_, e)| *e)
        } else {
            expires
        };
        let reply = if get { reply_old() } else { Frame::ok() };
        self.db.insert(
            key.clone(),
            Entry {
                value: Value::Str(value.clone()),
                expires_at_ms,
            },
        );
        reply
    }

    /// `PEXPIRE`/`PEXPIREAT` (no options): a time not in the future deletes the key.
    fn expire(&mut self, key: &[u8], when: i64, now: i64) -> Frame {
        if self.db.get(key, now).is_none() {
            return Frame::Integer(0);
        }
        if when <= now {
            self.db.remove(key, now);
        } else if let Some(entry) = self.db.get_mut(key, now) {
            entry.expires_at_ms = Some(when);
        }
        Frame::Integer(1)
    }

    fn hash(&mut self, key: &[u8], now: i64) -> Result<Option<&Hash>, Frame> {
        match self.db.get(key, now) {
            None => Ok(None),
            Some(Entry {
                value: Value::Hash(h),
                ..
            }) => Ok(Some(h)),
            Some(_) => Err(Frame::error(WRONGTYPE)),
        }
    }

    /// The hash at `key`, made empty if there is none (the caller stores or removes it).
    fn hash_mut(&mut self, key: &[u8], now: i64) -> Result<&mut Hash, Frame> {
        if self.db.get(key, now).is_none() {
            self.db.insert(
                key.to_vec(),
                Entry {
                    value: Value::Hash(BTreeMap::new()),
                    expires_at_ms: None,
                },
            );
        }
        match self.db.get_mut(key, now) {
            Some(Entry {
                value: Value::Hash(h),
                ..
            }) => Ok(h),
            _ => Err(Frame::error(WRONGTYPE)),
        }
    }

    fn hset(&mut self, args: Args, now: i64) -> Frame {
        if args.len().is_multiple_of(2) {
            return Frame::error("ERR wrong number of arguments for 'hset' command");
        }
        let hash = match self.hash_mut(&args[0], now) {
            Ok(h) => h,
            Err(e) => return e,
        };
        let mut added = 0;
        for pair in args[1..].chunks(2) {
            if hash.insert(pair[0].clone(), pair[1].clone()).is_none() {
                added += 1;
            }
        }
        Frame::Integer(added)
    }

    fn hdel(&mut self, args: Args, now: i64) -> Frame {
        match self.hash(&args[0], now) {
            Err(e) => return e,
            Ok(None) => return Frame::Integer(0),
            Ok(Some(_)) => {}
        }
        let Ok(hash) = self.hash_mut(&args[0], now) else {
            return Frame::error(WRONGTYPE);
        };
        let removed = args[1..]
            .iter()
            .filter(|f| hash.remove(*f).is_some())
            .count();
        if hash.is_empty() {
            self.db.remove(&args[0], now);
        }
        Frame::Integer(removed as i64)
    }

    fn hincrby(&mut self, args: Args, now: i64) -> Frame {
        let Some(by) = parse_i64(&args[2]) else {
            return Frame::error(NOT_INTEGER);
        };
        if let Err(e) = self.hash(&args[0], now) {
            return e;
        }
        let Ok(hash) = self.hash_mut(&args[0], now) else {
            return Frame::error(WRONGTYPE);
        };
        let current = match hash.get(&args[1]) {
            None => 0,
            Some(v) => match parse_i64(v) {
                Some(n) => n,
                None => return Frame::error("ERR hash value is not an integer"),
            },
        };
        let Some(next) = current.checked_add(by) else {
            return Frame::error("ERR increment or decrement would overflow");
        };
        hash.insert(args[1].clone(), next.to_string().into_bytes());
        Frame::Integer(next)
    }

    fn zset(&mut self, key: &[u8], now: i64) -> Result<Option<&ZSet>, Frame> {
        match self.db.get(key, now) {
            None => Ok(None),
            Some(Entry {
                value: Value::ZSet(z),
                ..
            }) => Ok(Some(z)),
            Some(_) => Err(Frame::error(WRONGTYPE)),
        }
    }

    /// Stores `z` at `key` keeping its expiry, or removes the key when `z` is empty.
    fn store_zset(&mut self, key: &[u8], z: ZSet, now: i64) {
        if z.is_empty() {
            self.db.remove(key, now);
            return;
        }
        match self.db.get_mut(key, now) {
            Some(entry) => entry.value = Value::ZSet(z),
            None => self.db.insert(
                key.to_vec(),
                Entry {
                    value: Value::ZSet(z),
                    expires_at_ms: None,
                },
            ),
        }
    }

    fn zadd(&mut self, args: Args, now: i64) -> Frame {
        let (mut nx, mut xx, mut gt, mut lt, mut ch) = (false, false, false, false, false);
        let mut i = 1;
        while i < args.len() {
            match upper(&args[i]).as_str() {
                "NX" => nx = true,
                "XX" => xx = true,
                "GT" => gt = true,
                "LT" => lt = true,
                "CH" => ch = true,
                "INCR" => return self.not_simulated("ZADD INCR".into()),
                _ => break,
            }
            i += 1;
        }
        let pairs = &args[i..];
        if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
            return Frame::error(SYNTAX);
        }
        if (nx && (xx || gt || lt)) || (gt && lt) {
            return Frame::error("ERR XX and NX options at the same time are not compatible");
        }
        let mut scored = Vec::new();
        for pair in pairs.chunks(2) {
            match parse_score(&pair[0]) {
                Some(s) => scored.push((s, pair[1].clone())),
                None => return Frame::error(NOT_FLOAT),
            }
        }
        let mut z = match self.zset(&args[0], now) {
            Err(e) => return e,
            Ok(z) => z.cloned().unwrap_or_default(),
        };
        let (mut added, mut changed) = (0, 0);
        for (score, member) in scored {
            match z.score(&member) {
                None if !xx => {
                    z.insert(member, score);
                    added += 1;
                }
                None => {}
                Some(old) if !nx => {
                    if (gt && score <= old) || (lt && score >= old) {
                        continue;
                    }
                    if old != score {
                        z.insert(member, score);
                        changed += 1;
                    }
                }
                Some(_) => {}
            }
        }
        self.store_zset(&args[0], z, now);
        Frame::Integer(if ch { added + changed } else { added })
    }

    fn zrem(&mut self, args: Args, now: i64) -> Frame {
        let mut z = match self.zset(&args[0], now) {
            Err(e) => return e,
            Ok(None) => return Frame::Integer(0),
            Ok(Some(z)) => z.clone(),
        };
        let removed = args[1..].iter().filter(|m| z.remove(m)).count();
        self.store_zset(&args[0], z, now);
        Frame::Integer(removed as i64)
    }

    /// `ZRANGE key start stop [WITHSCORES]` (by index; `BYSCORE`, `REV` and `LIMIT` are not
    /// simulated: lockgate uses `ZRANGEBYSCORE`).
    fn zrange(&mut self, args: Args, now: i64) -> Frame {
        let with_scores = match args.get(3).map(|a| upper(a)) {
            None => false,
            Some(w) if w == "WITHSCORES" && args.len() == 4 => true,
            Some(other) => return self.not_simulated(format!("ZRANGE {other}")),
        };
        let (Some(start), Some(stop)) = (parse_i64(&args[1]), parse_i64(&args[2])) else {
            return Frame::error(NOT_INTEGER);
        };
        let flavor = self.flavor;
        let z = match self.zset(&args[0], now) {
            Err(e) => return e,
            Ok(None) => return Frame::Array(vec![]),
            Ok(Some(z)) => z,
        };
        let all = z.sorted();
        let len = all.len() as i64;
        let start = if start < 0 {
            (len + start).max(0)
        } else {
            start
        };
        let stop = if stop < 0 {
            len + stop
        } else {
            stop.min(len - 1)
        };
        if start > stop || start >= len {
            return Frame::Array(vec![]);
        }
        range_reply(&all[start as usize..=stop as usize], with_scores, flavor)
    }

    fn by_score(&mut self, name: &str, args: Args, now: i64) -> Frame {
        let (Some(min), Some(max)) = (parse_bound(&args[1]), parse_bound(&args[2])) else {
            return Frame::error("ERR min or max is not a float");
        };
        let mut with_scores = false;
        let mut limit: Option<(i64, i64)> = None;
        let mut i = 3;
        while i < args.len() {
            match upper(&args[i]).as_str() {
                "WITHSCORES" if name == "ZRANGEBYSCORE" => with_scores = true,
                "LIMIT" if name == "ZRANGEBYSCORE" && i + 2 < args.len() => {
                    let (Some(o), Some(c)) = (parse_i64(&args[i + 1]), parse_i64(&args[i + 2]))
                    else {
                        return Frame::error(NOT_INTEGER);
                    };
                    limit = Some((o, c));
                    i += 2;
                }
                _ => return Frame::error(SYNTAX),
            }
            i += 1;
        }
        let z = match self.zset(&args[0], now) {
            Err(e) => return e,
            Ok(None) if name == "ZRANGEBYSCORE" => return Frame::Array(vec![]),
            Ok(None) => return Frame::Integer(0),
            Ok(Some(z)) => z.clone(),
        };
        let all = z.sorted();
        let inside: Vec<(&[u8], f64)> = all
            .into_iter()
            .filter(|(_, s)| min.below(*s) && max.above(*s))
            .collect();
        match name {
            "ZCOUNT" => Frame::Integer(inside.len() as i64),
            "ZREMRANGEBYSCORE" => {
                let mut left = z.clone();
                for (m, _) in &inside {
                    left.remove(m);
                }
                let n = inside.len() as i64;
                self.store_zset(&args[0], left, now);
                Frame::Integer(n)
            }
            _ => {
                let page: Vec<(&[u8], f64)> = match limit {
                    None => inside,
                    Some((o, _)) if o < 0 => Vec::new(),
                    Some((o, c)) => {
                        let it = inside.into_iter().skip(o as usize);
                        if c < 0 {
                            it.collect()
                        } else {
                            it.take(c as usize).collect()
                        }
                    }
                };
                range_reply(&page, with_scores, self.flavor)
            }
        }
    }

    fn zunionstore(&mut self, args: Args, now: i64) -> Frame {
        let Some(n) = parse_i64(&args[1]) else {
            return Frame::error(NOT_INTEGER);
        };
        if n < 1 {
            return Frame::error("ERR at least 1 input key is needed for 'zunionstore' command");
        }
        let n = n as usize;
        if args.len() < 2 + n {
            return Frame::error(SYNTAX);
        }
        let sources = &args[2..2 + n];
        let mut weights = vec![1.0; n];
        let mut aggregate = "SUM".to_owned();
        let mut i = 2 + n;
        while i < args.len() {
            match upper(&args[i]).as_str() {
                "WEIGHTS" if i + n < args.len() => {
                    for (w, arg) in weights.iter_mut().zip(&args[i + 1..=i + n]) {
                        match parse_score(arg) {
                            Some(v) => *w = v,
                            None => return Frame::error("ERR weight value is not a float"),
                        }
                    }
                    i += n;
                }
                "AGGREGATE" if i + 1 < args.len() => {
                    aggregate = upper(&args[i + 1]);
                    if !["SUM", "MIN", "MAX"].contains(&aggregate.as_str()) {
                        return Frame::error(SYNTAX);
                    }
                    i += 1;
                }
                _ => return Frame::error(SYNTAX),
            }
            i += 1;
        }
        let mut union: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
        for (source, weight) in sources.iter().zip(&weights) {
            let z = match self.zset(source, now) {
                Err(e) => return e,
                Ok(None) => continue,
                Ok(Some(z)) => z.clone(),
            };
            for (member, score) in z.sorted() {
                let score = score * weight;
                let score = if score.is_nan() { 0.0 } else { score };
                union
                    .entry(member.to_vec())
                    .and_modify(|s| {
                        *s = match aggregate.as_str() {
                            "SUM" => *s + score,
                            "MIN" => s.min(score),
                            _ => s.max(score),
                        }
                    })
                    .or_insert(score);
            }
        }
        let count = union.len() as i64;
        // The destination is replaced: a new key, without the old one's expiry.
        self.db.remove(&args[0], now);
        let mut z = ZSet::default();
        for (member, score) in union {
            z.insert(member, score);
        }
        self.store_zset(&args[0], z, now);
        Frame::Integer(count)
    }

    /// `SCAN cursor [MATCH pattern] [COUNT n]`: every matching key in one page (cursor 0),
    /// which keeps SCAN's one promise (a key present throughout is returned) trivially; pages
    /// that split a listing are not simulated.
    fn scan(&mut self, args: Args, now: i64) -> Frame {
        let mut pattern: Option<&[u8]> = None;
        let mut i = 1;
        while i < args.len() {
            match upper(&args[i]).as_str() {
                "MATCH" if i + 1 < args.len() => pattern = Some(&args[i + 1]),
                "COUNT" if i + 1 < args.len() => {
                    if parse_i64(&args[i + 1]).is_none_or(|c| c < 1) {
                        return Frame::error(SYNTAX);
                    }
                }
                "TYPE" => return self.not_simulated("SCAN TYPE".into()),
                _ => return Frame::error(SYNTAX),
            }
            i += 2;
        }
        if parse_i64(&args[0]).is_none() {
            return Frame::error("ERR invalid cursor");
        }
        let keys = self
            .db
            .keys(now)
            .into_iter()
            .filter(|k| pattern.is_none_or(|p| matches(p, k)))
            .map(Frame::Bulk)
            .collect();
        Frame::Array(vec![Frame::bulk("0"), Frame::Array(keys)])
    }

    fn config(&mut self, args: Args) -> Frame {
        match upper(&args[0]).as_str() {
            "GET" if args.len() >= 2 => {
                // Each parameter by its exact name, with Redis's default: a pattern, or a
                // parameter not listed, would be answered wrongly (an empty list), so it is
                // refused.
                let known = [
                    ("maxmemory", "0"),
                    ("maxmemory-policy", "noeviction"),
                    ("notify-keyspace-events", ""),
                ];
                let mut out = Vec::new();
                for asked in &args[1..] {
                    match known
                        .iter()
                        .find(|(name, _)| name.as_bytes() == asked.as_slice())
                    {
                        Some((name, value)) => {
                            out.push(Frame::bulk(name));
                            out.push(Frame::bulk(value));
                        }
                        None => {
                            let asked = String::from_utf8_lossy(asked).into_owned();
                            return self.not_simulated(format!("CONFIG GET {asked}"));
                        }
                    }
                }
                Frame::Array(out)
            }
            other => {
                let other = other.to_owned();
                self.not_simulated(format!("CONFIG {other}"))
            }
        }
    }

    /// `COMMAND INFO name…`: Redis 7.0 knows none of the native compare commands lockgate
    /// asks about, and the simulation answers for no other.
    fn command_info(&mut self, args: Args) -> Frame {
        match args.first().map(|a| upper(a)) {
            Some(sub) if sub == "INFO" => {
                let known = ["DELIFEQ", "DELEX"];
                if args[1..].iter().all(|a| known.contains(&upper(a).as_str())) {
                    Frame::Array(args[1..].iter().map(|_| Frame::Nil).collect())
                } else {
                    self.not_simulated("COMMAND INFO of other commands".into())
                }
            }
            _ => self.not_simulated("COMMAND without INFO".into()),
        }
    }
}

/// `INFO`: the fields lockgate reads, as Redis 7.0 writes them.
fn info(read_only: bool) -> String {
    [
        "# Server",
        &format!("redis_version:{REDIS_VERSION}"),
        "redis_mode:standalone",
        "",
        "# Memory",
        "maxmemory:0",
        "maxmemory_policy:noeviction",
        "",
        "# Replication",
        if read_only {
            "role:slave"
        } else {
            "role:master"
        },
        "",
    ]
    .join("\r\n")
}

fn range_reply(members: &[(&[u8], f64)], with_scores: bool, flavor: Flavor) -> Frame {
    let mut out = Vec::new();
    for (member, score) in members {
        out.push(Frame::bulk(member));
        if with_scores {
            out.push(Frame::bulk(format_score(*score, flavor)));
        }
    }
    Frame::Array(out)
}

/// `None` when the number of arguments is right, else the error Redis answers.
pub fn arity(args: Args, min: usize, max: usize) -> Option<Frame> {
    (args.len() < min || args.len() > max).then(|| {
        Frame::error("ERR wrong number of arguments for this command (sim: see the command)")
    })
}

pub fn upper(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_ascii_uppercase()
}

/// An integer as Redis's `string2ll` reads one: optional `-`, no `+`, no leading zeros, no
/// spaces.
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(bytes).ok()?;
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
        || text == "-0"
    {
        return None;
    }
    text.parse().ok()
}

/// A score as Redis reads one (`strtod`, no NaN).
pub fn parse_score(bytes: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(bytes).ok()?;
    if text.is_empty() || text.starts_with(char::is_whitespace) {
        return None;
    }
    let value: f64 = text.parse().ok()?;
    (!value.is_nan()).then_some(value)
}

/// One end of a score range: `-inf`, `+inf`, a number, or `(` and a number (exclusive).
#[derive(Debug, Clone, Copy)]
struct Bound {
    value: f64,
    exclusive: bool,
}

impl Bound {
    /// Whether `score` is above this lower end.
    fn below(self, score: f64) -> bool {
        if self.exclusive {
            score > self.value
        } else {
            score >= self.value
        }
    }

    /// Whether `score` is below this upper end.
    fn above(self, score: f64) -> bool {
        if self.exclusive {
            score < self.value
        } else {
            score <= self.value
        }
    }
}

fn parse_bound(bytes: &[u8]) -> Option<Bound> {
    let (exclusive, number) = match bytes.strip_prefix(b"(") {
        Some(rest) => (true, rest),
        None => (false, bytes),
    };
    Some(Bound {
        value: parse_score(number)?,
        exclusive,
    })
}

/// A double as the server writes one (a score in a RESP2 reply, a Lua number passed to
/// `redis.call`): `inf`/`-inf`, then Redis 7.0's `%.17g`, or Valkey's `fpconv_dtoa` (the
/// fewest digits that read back as the same double, placed by its rules).
pub fn format_score(score: f64, flavor: Flavor) -> String {
    if score.is_infinite() {
        return if score > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    match flavor {
        Flavor::Redis7 => percent_17g(score),
        Flavor::Valkey9 => fpconv(score),
    }
}

/// C's `%.17g`.
fn percent_17g(score: f64) -> String {
    let scientific = format!("{score:.16e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..17).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", trim_zeros(mantissa), exponent.abs());
    }
    let decimals = (16 - exponent).max(0) as usize;
    trim_zeros(&format!("{score:.decimals$}"))
}

/// `fpconv_dtoa` (Valkey's `fpconv_dtoa.c`, `emit_digits`): the shortest digits `d` and `K`
/// with value `d × 10^K`; a plain integer when `K ≥ 0` and the exponent is below the digits'
/// count + 7, a plain decimal when `-7 < K < 0` or the exponent is below 4, else scientific.
fn fpconv(score: f64) -> String {
    let shortest = format!("{:e}", score.abs());
    let (mantissa, exponent) = shortest.split_once('e').unwrap_or((&shortest, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let ndigits = digits.len() as i32;
    let k = exponent - (ndigits - 1);
    let sign = if score < 0.0 { "-" } else { "" };
    if k >= 0 && exponent < ndigits + 7 {
        return format!("{sign}{digits}{}", "0".repeat(k as usize));
    }
    if k < 0 && (k > -7 || exponent.abs() < 4) {
        let point = ndigits + k;
        return if point > 0 {
            let (int, frac) = digits.split_at(point as usize);
            format!("{sign}{int}.{frac}")
        } else {
            format!("{sign}0.{}{digits}", "0".repeat((-point) as usize))
        };
    }
    let exp_sign = if exponent < 0 { '-' } else { '+' };
    format!(
        "{sign}{}e{exp_sign}{:02}",
        trim_zeros(mantissa),
        exponent.abs()
    )
}

fn trim_zeros(text: &str) -> String {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_read_as_redis_reads_them() {
        assert_eq!(parse_i64(b"42"), Some(42));
        assert_eq!(parse_i64(b"-7"), Some(-7));
        assert_eq!(parse_i64(b"0"), Some(0));
        for bad in ["+1", "007", " 1", "1.5", "1e3", "", "-", "-0"] {
            assert_eq!(parse_i64(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn scores_are_written_as_each_server_writes_them() {
        let redis = |v| format_score(v, Flavor::Redis7);
        let valkey = |v| format_score(v, Flavor::Valkey9);
        assert_eq!(redis(3.0), "3");
        assert_eq!(redis(1_733_412_345_123.0), "1733412345123");
        assert_eq!(redis(1.5), "1.5");
        assert_eq!(redis(-1.5), "-1.5");
        assert_eq!(redis(0.1), "0.10000000000000001");
        assert_eq!(valkey(0.1), "0.1");
        assert_eq!(valkey(-0.00012), "-0.00012");
        assert_eq!(redis(1e20), "1e+20");
        assert_eq!(valkey(1.2345678901234568e17), "123456789012345680");
        assert_eq!(valkey(1e20), "1e+20");
        assert_eq!(redis(1.2345678901234568e17), "1.2345678901234568e+17");
        assert_eq!(redis(f64::NEG_INFINITY), "-inf");
    }
}
