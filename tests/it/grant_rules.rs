//! The rules of a grant exist twice: in Lua (`src/backend/scripts/grant.lua`, the prelude of
//! every script that issues or raises a fence, recognises a token by its stem, or writes a
//! holder record) and in Rust (`backend::fence::next_fence`, `has_stem`, `key_reused`, `fence_of`;
//! `backend::holder::Holder::record`), which the memory backend and the gateway use. These
//! tests run the Lua functions on a real server and the Rust twins over the same inputs: a
//! change to either side alone fails them. The plain acquire (`acquire.lua`) writes the three
//! rules out instead of taking the prelude (its closures cost every acquire of the fleet):
//! each test runs it over the same inputs too.

use lockgate::backend::fence::{fence_of, has_stem, key_reused, next_fence};
use lockgate::backend::holder::Holder;

use crate::support::redis::RedisServer;

const GRANT_LUA: &str = include_str!("../../src/backend/scripts/grant.lua");
/// Redlock's finalize's prelude, after `GRANT_LUA`.
const RAISE_FENCE_LUA: &str = include_str!("../../src/backend/scripts/raise_fence.lua");
/// The plain acquire, which writes the rules out.
const ACQUIRE_LUA: &str = include_str!("../../src/backend/scripts/acquire.lua");
/// A token stem, as the gateway makes them (22 characters).
const STEM: &str = "AAAAAAAAAAAAAAAAAAAAAA";

/// Runs `body` after the prelude, as the gateway's scripts run.
fn eval<T: redis::FromRedisValue>(
    redis: &RedisServer,
    body: &str,
    keys: &[&str],
    args: &[&str],
) -> T {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(format!("{GRANT_LUA}\n{body}")).arg(keys.len());
    for key in keys {
        cmd.arg(*key);
    }
    for arg in args {
        cmd.arg(*arg);
    }
    redis.query(&cmd).expect("script")
}

/// Runs the plain acquire as the gateway does (`acquire.lua` alone, no prelude).
fn acquire_lua(redis: &RedisServer, keys: &[&str], args: &[&str]) -> redis::Value {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(ACQUIRE_LUA).arg(keys.len()).arg(keys).arg(args);
    redis.query(&cmd).expect("acquire.lua")
}

fn server_micros(redis: &RedisServer) -> u64 {
    let (secs, micros): (u64, u64) = redis.query(&redis::cmd("TIME")).expect("TIME");
    secs * 1_000_000 + micros
}

/// `next_fence` in Lua against its twin, with the slot counter behind the clock, ahead of it
/// (a clock stepped back, grants in one microsecond) and lost; then the plain acquire's
/// written-out copy over the same cases.
#[test]
fn the_fence_rule_is_the_same_in_lua_and_rust() {
    let redis = RedisServer::start();
    let base = server_micros(&redis);
    let behind = base - 1_000_000;
    let ahead = base + 1_000_000_000;
    let far_ahead = base + 2_000_000_000;
    let cases: &[(&str, Option<u64>)] = &[
        ("counter lost", None),
        ("counter behind the clock", Some(behind)),
        ("counter ahead of the clock (clock behind)", Some(ahead)),
    ];
    let set_counter = |key: &str, previous: &Option<u64>| {
        let _: () = redis.query(redis::cmd("DEL").arg(key)).unwrap();
        if let Some(previous) = previous {
            let _: () = redis
                .query(redis::cmd("SET").arg(key).arg(previous))
                .unwrap();
        }
    };
    for (i, (case, previous)) in cases.iter().enumerate() {
        let counter = format!("counter:{i}");
        set_counter(&counter, previous);
        let (text, secs, micros, counter_after): (String, u64, String, String) = eval(
            &redis,
            "local now = redis.call('TIME') \
             local _, text = next_fence(KEYS[1], now) \
             return {text, now[1], now[2], redis.call('GET', KEYS[1])}",
            &[&counter],
            &[],
        );
        let now = secs * 1_000_000 + micros.parse::<u64>().unwrap();
        let expected = next_fence(previous.unwrap_or(0), now);
        assert_eq!(text, expected.to_string(), "{case}");
        assert_eq!(
            counter_after,
            expected.to_string(),
            "{case}: the counter advances"
        );

        // The plain acquire's copy: it reads the clock itself, so its fence is the rule's
        // between the clock before and after it (the rule grows with the clock).
        set_counter(&counter, previous);
        let before = server_micros(&redis);
        let lock = format!("lock:{i}");
        let queue = format!("queue:{i}");
        let reply = acquire_lua(&redis, &[&lock, &counter, &queue], &[STEM, "10000"]);
        let redis::Value::Int(fence) = reply else {
            panic!("{case}: acquire.lua answered {reply:?}");
        };
        let fence = u64::try_from(fence).unwrap();
        let after = server_micros(&redis);
        let (low, high) = (
            next_fence(previous.unwrap_or(0), before),
            next_fence(previous.unwrap_or(0), after),
        );
        assert!(
            (low..=high).contains(&fence),
            "{case}: acquire.lua's fence {fence} is not the rule's ({low}..={high})"
        );
        let counter_after: u64 = redis.query(redis::cmd("GET").arg(&counter)).unwrap();
        assert_eq!(
            counter_after, fence,
            "{case}: acquire.lua advances the counter"
        );
    }
    // Raising a counter (Redlock's finalize) never lowers it.
    for (start, raised_to, after) in [(ahead, far_ahead, far_ahead), (far_ahead, ahead, far_ahead)]
    {
        let _: () = redis
            .query(redis::cmd("SET").arg("counter:raised").arg(start))
            .unwrap();
        let value: String = eval(
            &redis,
            &format!(
                "{RAISE_FENCE_LUA}\nraise_fence(KEYS[1], ARGV[1]) return redis.call('GET', KEYS[1])"
            ),
            &["counter:raised"],
            &[&raised_to.to_string()],
        );
        assert_eq!(value, after.to_string());
    }
}

/// "This token is a grant of this stem", and its fence, the same on both sides: the Lua
/// scripts' idempotent retries, withdrawals and finalizations, and the gateway's reading.
/// And "this token is a grant of the same idempotency key for another kind of grant"
/// (`key_reused`), which refuses an idempotent retry that asks for another kind.
#[test]
fn the_stem_match_is_the_same_in_lua_and_rust() {
    let redis = RedisServer::start();
    let stem = "AAAAAAAAAAAAAAAAAAAAAAo";
    let cases = [
        format!("{stem}.1763712000123456"),
        format!("{stem}.0"),
        format!("{stem}.9999999999999999999"),
        format!("{stem}.99999999999999999999"),
        format!("{stem}."),
        format!("{stem}.12x"),
        format!("{stem}x.1763712000123456"),
        format!("{stem}s.1763712000123456"),
        format!("{}.1763712000123456", &stem[..stem.len() - 1]),
        stem.to_owned(),
        "~shared".to_owned(),
        "a-token-of-another-client".to_owned(),
        "BAAAAAAAAAAAAAAAAAAAAAo.1763712000123456".to_owned(),
        "AAAAAAAAAAAAAAAAAAAAAB.1763712000123456".to_owned(),
    ];
    for token in &cases {
        let lua: Option<String> = eval(
            &redis,
            "return fence_text_of(ARGV[1], ARGV[2])",
            &[],
            &[token, stem],
        );
        assert_eq!(lua.is_some(), has_stem(token, stem), "{token}");
        let lua_reused: bool = eval(
            &redis,
            "return key_reused(ARGV[1], ARGV[2]) and 1 or 0",
            &[],
            &[token, stem],
        );
        assert_eq!(lua_reused, key_reused(token, stem), "key_reused, {token}");
        let rust_fence = has_stem(token, stem).then(|| fence_of(token)).flatten();
        assert_eq!(
            lua.map(|text| text.parse::<u64>().unwrap()),
            rust_fence,
            "{token}"
        );
        // The plain acquire's copy: it finds its own grant again ({2, fence, pttl}) exactly
        // when the rule says the token is the stem's, with its fence (as a Lua number: exact
        // to 2^53, which no fence lockgate issues exceeds).
        let _: () = redis
            .query(redis::cmd("SET").arg("held").arg(token))
            .unwrap();
        let reply = acquire_lua(&redis, &["held", "counter", "queue"], &[stem, "10000"]);
        let found_again = match reply {
            redis::Value::Array(items) => match items[..] {
                [redis::Value::Int(2), redis::Value::Int(fence), _] => Some(fence),
                _ => None,
            },
            other => panic!("{token}: acquire.lua answered {other:?} on a held lock"),
        };
        // As an idempotent attempt (a claim key and id), it also refuses another kind of
        // grant of its key ({6}) exactly when the rule says so.
        let reply = acquire_lua(
            &redis,
            &["held", "counter", "queue", "claim", "holder"],
            &[stem, "10000", "claim-id", ""],
        );
        let (found_by_claim, refused) = match reply {
            redis::Value::Array(items) => match items[..] {
                [redis::Value::Int(2), redis::Value::Int(fence), _] => (Some(fence), false),
                [redis::Value::Int(6)] => (None, true),
                _ => (None, false),
            },
            other => panic!("{token}: acquire.lua answered {other:?} on a held lock"),
        };
        assert_eq!(
            found_by_claim, found_again,
            "idempotent acquire.lua, {token}"
        );
        assert_eq!(
            refused,
            key_reused(token, stem),
            "idempotent acquire.lua, {token}"
        );
        assert_eq!(
            found_again.is_some(),
            has_stem(token, stem),
            "acquire.lua, {token}"
        );
        if let Some(fence) = rust_fence.filter(|fence| *fence < 1 << 53) {
            assert_eq!(
                found_again,
                i64::try_from(fence).ok(),
                "acquire.lua, {token}"
            );
        }
    }
}

/// The holder record a script writes is the one the gateway reads back.
#[test]
fn the_holder_record_is_the_same_in_lua_and_rust() {
    let redis = RedisServer::start();
    let holders = [
        Holder {
            owner: Some("pod-a".into()),
            metadata: None,
        },
        Holder {
            owner: None,
            metadata: serde_json::from_str(r#"{"addr":"10.0.0.7:8080","n":[1,2]}"#).ok(),
        },
        Holder {
            owner: Some("écluse \"north\" 🔒".into()),
            metadata: serde_json::from_str(r#"{"k":"</script>"}"#).ok(),
        },
    ];
    for holder in &holders {
        let fence = 1_763_712_000_123_456_u64;
        let lua: String = eval(
            &redis,
            "return holder_record(ARGV[1], ARGV[2])",
            &[],
            &[&fence.to_string(), &holder.fields()],
        );
        assert_eq!(lua, holder.record(fence));
        // The plain acquire's copy, on a free lock.
        let _: () = redis.query(redis::cmd("DEL").arg("free")).unwrap();
        let keys = ["free", "counter", "queue", "claim", "holder"];
        let reply = acquire_lua(&redis, &keys, &[STEM, "10000", "", &holder.fields()]);
        let redis::Value::Int(granted) = reply else {
            panic!("acquire.lua answered {reply:?}");
        };
        let record: String = redis.query(redis::cmd("GET").arg("holder")).unwrap();
        assert_eq!(record, holder.record(u64::try_from(granted).unwrap()));
        assert_eq!(
            Holder::of_record(lua.as_bytes(), Some(fence)).as_ref(),
            Some(holder)
        );
    }
}
