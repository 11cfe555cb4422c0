//! The rules of a grant exist twice: in Lua (`src/backend/scripts/grant.lua`, the prelude of
//! every script that issues or raises a fence, recognises a token by its stem, or writes a
//! holder record) and in Rust (`backend::fence::next_fence`, `has_stem`, `fence_of`;
//! `backend::holder::Holder::record`), which the memory backend and the gateway use. These
//! tests run the Lua functions on a real server and the Rust twins over the same inputs: a
//! change to either side alone fails them.

use lockgate::backend::fence::{fence_of, has_stem, next_fence};
use lockgate::backend::holder::Holder;

use crate::support::redis::RedisServer;

const GRANT_LUA: &str = include_str!("../../src/backend/scripts/grant.lua");
/// Redlock's finalize's prelude, after `GRANT_LUA`.
const RAISE_FENCE_LUA: &str = include_str!("../../src/backend/scripts/raise_fence.lua");

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

fn server_micros(redis: &RedisServer) -> u64 {
    let (secs, micros): (u64, u64) = redis.query(&redis::cmd("TIME")).expect("TIME");
    secs * 1_000_000 + micros
}

/// `next_fence` in Lua against its twin, with the slot counter and an old per-name counter
/// behind the clock, ahead of it (a clock stepped back, grants in one microsecond) and lost.
#[test]
fn the_fence_rule_is_the_same_in_lua_and_rust() {
    let redis = RedisServer::start();
    let base = server_micros(&redis);
    let behind = base - 1_000_000;
    let ahead = base + 1_000_000_000;
    let far_ahead = base + 2_000_000_000;
    let cases: &[(&str, Option<u64>, Option<u64>)] = &[
        ("counter lost, no legacy counter", None, None),
        ("counter behind the clock", Some(behind), None),
        (
            "counter ahead of the clock (clock behind)",
            Some(ahead),
            None,
        ),
        ("counter lost, a small legacy counter", None, Some(42)),
        (
            "counter behind, legacy counter ahead",
            Some(behind),
            Some(far_ahead),
        ),
        (
            "counter ahead, legacy counter further ahead",
            Some(ahead),
            Some(far_ahead),
        ),
        (
            "counter further ahead than the legacy counter",
            Some(far_ahead),
            Some(ahead),
        ),
    ];
    for (i, (case, previous, legacy)) in cases.iter().enumerate() {
        let (counter, old) = (format!("counter:{i}"), format!("legacy:{i}"));
        if let Some(previous) = previous {
            let _: () = redis
                .query(redis::cmd("SET").arg(&counter).arg(previous))
                .unwrap();
        }
        if let Some(legacy) = legacy {
            let _: () = redis
                .query(redis::cmd("SET").arg(&old).arg(legacy))
                .unwrap();
        }
        let (text, secs, micros, counter_after, legacy_left): (String, u64, String, String, u8) =
            eval(
                &redis,
                "local now = redis.call('TIME') \
                 local _, text = next_fence(KEYS[1], now, KEYS[2]) \
                 return {text, now[1], now[2], redis.call('GET', KEYS[1]), redis.call('EXISTS', KEYS[2])}",
                &[&counter, &old],
                &[],
            );
        let now = secs * 1_000_000 + micros.parse::<u64>().unwrap();
        let known = previous.unwrap_or(0).max(legacy.unwrap_or(0));
        let expected = next_fence(known, now);
        assert_eq!(text, expected.to_string(), "{case}");
        assert_eq!(
            counter_after,
            expected.to_string(),
            "{case}: the counter advances"
        );
        assert_eq!(legacy_left, 0, "{case}: the legacy counter is gone");
    }
    // Without a legacy key, as the lease-set and multi-lock scripts call it.
    let _: () = redis
        .query(redis::cmd("SET").arg("counter:plain").arg(ahead))
        .unwrap();
    let (text, secs, micros): (String, u64, String) = eval(
        &redis,
        "local now = redis.call('TIME') \
         local _, text = next_fence(KEYS[1], now) \
         return {text, now[1], now[2]}",
        &["counter:plain"],
        &[],
    );
    let now = secs * 1_000_000 + micros.parse::<u64>().unwrap();
    assert_eq!(text, next_fence(ahead, now).to_string());
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
    ];
    for token in &cases {
        let lua: Option<String> = eval(
            &redis,
            "return fence_text_of(ARGV[1], ARGV[2])",
            &[],
            &[token, stem],
        );
        assert_eq!(lua.is_some(), has_stem(token, stem), "{token}");
        let rust_fence = has_stem(token, stem).then(|| fence_of(token)).flatten();
        assert_eq!(
            lua.map(|text| text.parse::<u64>().unwrap()),
            rust_fence,
            "{token}"
        );
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
        assert_eq!(
            Holder::of_record(lua.as_bytes(), Some(fence)).as_ref(),
            Some(holder)
        );
    }
}
