//! Fences, and the token format that carries them (the marks a stem carries after its entropy
//! are `super::marks`).
//!
//! A fence is a per-name number that strictly increases with every grant, so that a resource
//! protected by the lock can refuse a write carrying a smaller fence than one it has already
//! seen (a holder that was paused past its lease). The rule is
//!
//! ```text
//! fence = max(previous + 1, now in microseconds since the Unix epoch)
//! ```
//!
//! where `now` is the store's clock (Redis `TIME` inside the acquire script) and `previous` is
//! the **fence counter of the name's hash slot**: one counter per store in standalone and
//! Sentinel mode, one per hash slot in a Redis Cluster (a key whose hash tag maps to the slot,
//! see `redis::cluster::slot_tag`). A counter shared by many names only grows faster than a
//! per-name one, so fences still strictly increase per name; and the store keeps no state per
//! name beyond the live grant: lockgate's Redis memory is O(live grants + hash slots), never
//! O(names ever used).
//!
//! **The grant's fence travels in its token.** The store keeps the lock's value as the token
//! exactly (so classic compare-and-delete clients interoperate), and the token is
//! `<stem>.<fence>`: a stem of 128 bits or more chosen by the gateway (random, or derived from
//! an idempotency key) and the fence the acquire script issued. The fence of the current grant
//! therefore lives with the grant and expires with it, and renew, inspect and an idempotent
//! replay read it from the value instead of from a second key.
//!
//! Why the fence stays monotonic:
//!
//! * while the counter exists, `previous + 1` alone orders the grants of its slot, whatever
//!   the clock does;
//! * when the counter is lost (deleted by hand, evicted, or lost with the last writes of a
//!   master that failed over), the clock term restarts it above every fence issued before,
//!   under one assumption: **the store's wall clock does not go backwards across the loss**
//!   (the new master's clock is not behind the time the last fence was issued by more than
//!   the time that has passed since). NTP-disciplined clocks that slew, and failovers slower
//!   than any step, satisfy it; a clock stepped back by hours does not. Because the counter
//!   of a busy slot advances at most once per grant and grants come far slower than one per
//!   microsecond, the counter tracks the clock closely, so the clock term covers a lost
//!   counter within microseconds;
//! * a deployment upgraded from a lockgate that kept one counter per name
//!   (`<prefix>{<name>}:fence`) reads that counter on the name's next grant and deletes it: the
//!   new fence exceeds it, and from then on the slot counter does.
//!
//! The Lua twins of [`next_fence`] and [`has_stem`] are `next_fence` and `fence_text_of` in
//! `scripts/grant.lua`, the prelude of every script that issues or matches a fence;
//! `tests/it/grant_rules.rs` runs both sides over the same inputs on a real server.

use super::marks::{Marks, SEPARATOR, STEM_ENTROPY_CHARS, split};

/// The smallest fence read as a time: 10^15 µs after the epoch is September 2001. Fences below
/// it come from a per-name counter of an older lockgate and say nothing of time.
const FIRST_TIMED_FENCE: u64 = 1_000_000_000_000_000;

/// When the grant with `fence` was made, to the microsecond, by the store's clock: the clock
/// term of [`next_fence`] is the grant time, and the counter term exceeds it only while grants
/// of a slot come faster than one per microsecond or the clock went back (then the fence runs
/// ahead of the clock by that much). `None` for a fence that is no timestamp.
pub fn granted_at(fence: u64) -> Option<std::time::SystemTime> {
    (fence >= FIRST_TIMED_FENCE)
        .then(|| std::time::UNIX_EPOCH + std::time::Duration::from_micros(fence))
}

/// Until when (ms since the epoch) a grant must stay held, and its minimum, if its token
/// (with `marks`, read once by the caller) carries a minimum hold (`min_hold_ms`): its grant
/// time (the fence) plus the minimum. `None` without one, or for a fence that is no time.
pub fn held_until_ms(marks: Marks, token: &str) -> Option<(u64, u64)> {
    let min_hold_ms = marks.min_hold_ms?;
    let granted_ms = granted_at(fence_of(token)?)?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_millis();
    let granted_ms = u64::try_from(granted_ms).ok()?;
    Some((granted_ms.saturating_add(min_hold_ms), min_hold_ms))
}

/// How long a grant released now (`now_ms` reads the clock, only for a grant with a minimum)
/// must still be held: until [`held_until_ms`], but never longer than the minimum itself (a
/// fence above the clock overstates the grant time).
pub fn min_hold_left(token: &str, now_ms: impl FnOnce() -> u64) -> Option<std::time::Duration> {
    let (until, min_hold_ms) = held_until_ms(Marks::of(token), token)?;
    let left = until.saturating_sub(now_ms()).min(min_hold_ms);
    (left > 0).then(|| std::time::Duration::from_millis(left))
}

/// The fence of the next grant, given the previous one (0 when unknown) and the clock.
pub fn next_fence(previous: u64, now_micros: u64) -> u64 {
    previous.saturating_add(1).max(now_micros)
}

/// The token of a grant: `<stem>.<fence>`.
pub fn token(stem: &str, fence: u64) -> String {
    use std::fmt::Write as _;
    // Sized once (a u64 has at most 20 digits): `format!` grows its string piece by piece.
    let mut token = String::with_capacity(stem.len() + SEPARATOR.len_utf8() + 20);
    token.push_str(stem);
    token.push(SEPARATOR);
    let _ = write!(token, "{fence}");
    token
}

/// The fence a token issued by lockgate carries; `None` for a token of another format (one
/// written by another Redis client, or by a lockgate older than the fence-in-token format).
pub fn fence_of(token: &str) -> Option<u64> {
    split(token).map(|(_, fence)| fence)
}

/// The marks and the fence of `token` if it has the shape of a token lockgate issues:
/// [`STEM_ENTROPY_CHARS`] URL-safe base64 characters, marks exactly as [`Marks::stem`] writes
/// them, the separator, and a fence. Internal markers (the readers' marker `~shared`), tokens
/// of other clients and any other text are not: they never move a lock through the gateway.
pub fn issued(token: &str) -> Option<(Marks, u64)> {
    // `split` has checked every character of the stem (URL-safe base64, as marks are).
    let (stem, fence) = split(token)?;
    match Marks::read(stem.get(STEM_ENTROPY_CHARS..)?) {
        (marks, "") => Some((marks, fence)),
        _ => None,
    }
}

/// Whether `token` was issued for `stem` (by any grant: the fence is not compared).
pub fn has_stem(token: &str, stem: &str) -> bool {
    token
        .strip_prefix(stem)
        .and_then(|rest| rest.strip_prefix(SEPARATOR))
        .is_some_and(|fence| fence_of(token).is_some() && !fence.is_empty())
}

/// Whether `token` is a grant of the same idempotency key as `stem` for another kind of grant:
/// their entropy (the first [`STEM_ENTROPY_CHARS`], the HMAC of the name and the key) is the
/// same and the marks after it are not. Asked only by idempotent attempts: random stems never
/// share their entropy. The Lua twin is `key_reused` in grant.lua.
pub fn key_reused(token: &str, stem: &str) -> bool {
    stem.get(..STEM_ENTROPY_CHARS)
        .is_some_and(|entropy| token.get(..STEM_ENTROPY_CHARS) == Some(entropy))
        && !has_stem(token, stem)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::marks::set_digest;

    #[test]
    fn only_the_issued_shape_is_a_token() {
        let entropy = "AAAAAAAAAAAAAAAAAAAAA-";
        let fence = 1_763_712_000_123_456;
        let widest = 10u64.pow(19) - 1; // MAX_DIGITS digits: read without overflow.
        for marks in [
            Marks::default(),
            Marks {
                holder: true,
                shared: true,
                multi: true,
                set: Some(set_digest(["a", "b"])),
                reentrant: true,
                min_hold_ms: Some(3_000_000),
                max_hold_ms: Some(90_000),
            },
            Marks {
                shared: true,
                ..Marks::default()
            },
            Marks {
                multi: true,
                max_hold_ms: Some(1_000_000_000),
                ..Marks::default()
            },
            Marks {
                multi: true,
                set: Some(set_digest(["b", "a", "c"])),
                max_hold_ms: Some(1_000_000_000),
                ..Marks::default()
            },
            Marks {
                min_hold_ms: Some(0),
                ..Marks::default()
            },
        ] {
            for fence in [fence, widest] {
                assert_eq!(
                    issued(&token(&marks.stem(entropy), fence)),
                    Some((marks, fence))
                );
            }
        }
        for not in [
            "~shared",
            "~shared.1",
            "",
            ".1",
            entropy,
            &format!("{entropy}.")[..],
            &format!("{entropy}.x1")[..],
            &format!("{entropy}x.1")[..],
            &format!("{entropy}so.1")[..],
            &format!("{entropy}h.1")[..],
            &format!("{entropy}h01.1")[..],
            &format!("{entropy}a.1")[..],
            &format!("{entropy}a07.1")[..],
            &format!("{entropy}h5a7.1")[..],
            &format!("{}.1", &entropy[1..])[..],
            "AAAAAAAAAAAAAAAAAAAAA~.1",
            "6f1c1a9e7d4b4c1e9a572b0f8a3e5d11",
            &format!("{entropy}.123456789012345678901")[..],
        ] {
            assert_eq!(issued(not), None, "{not:?}");
        }
    }

    #[test]
    fn a_grant_follows_the_clock_when_the_counter_is_behind() {
        assert_eq!(next_fence(10, 1_700_000_000_000_000), 1_700_000_000_000_000);
    }

    #[test]
    fn a_grant_in_the_same_microsecond_still_increases() {
        assert_eq!(
            next_fence(1_700_000_000_000_000, 1_700_000_000_000_000),
            1_700_000_000_000_001
        );
    }

    #[test]
    fn a_clock_behind_the_counter_cannot_lower_the_fence() {
        assert_eq!(
            next_fence(1_700_000_000_000_005, 1_600_000_000_000_000),
            1_700_000_000_000_006
        );
    }

    #[test]
    fn a_lost_counter_restarts_at_the_clock_above_earlier_fences() {
        let before = next_fence(0, 1_700_000_000_000_000);
        let after_loss = next_fence(0, 1_700_000_000_000_100);
        assert!(after_loss > before);
    }

    #[test]
    fn a_fence_tells_when_its_grant_was_made() {
        let at = granted_at(1_763_712_000_123_456).expect("a timestamp");
        assert_eq!(
            humantime::format_rfc3339_micros(at).to_string(),
            "2025-11-21T08:00:00.123456Z"
        );
        assert_eq!(granted_at(42), None);
    }

    #[test]
    fn tokens_carry_their_fence() {
        let t = token("Yq3v7M1b0nqzT0m6k9xW2A", 1_795_449_363_840_090);
        assert_eq!(t, "Yq3v7M1b0nqzT0m6k9xW2A.1795449363840090");
        assert_eq!(fence_of(&t), Some(1_795_449_363_840_090));
        assert!(has_stem(&t, "Yq3v7M1b0nqzT0m6k9xW2A"));
        assert!(!has_stem(&t, "Yq3v7M1b0nqzT0m6k9xW2"));
        assert!(!has_stem(
            "Yq3v7M1b0nqzT0m6k9xW2A",
            "Yq3v7M1b0nqzT0m6k9xW2A"
        ));
    }

    #[test]
    fn a_key_is_reused_by_another_kind_of_grant_only() {
        let entropy = "Yq3v7M1b0nqzT0m6k9xW2A";
        let plain = token(entropy, 17);
        let shared = token(&format!("{entropy}s"), 17);
        // The same grant again is a replay, not a reuse.
        assert!(!key_reused(&plain, entropy));
        // Another kind of grant of the same key, either way round.
        assert!(key_reused(&shared, entropy));
        assert!(key_reused(&plain, &format!("{entropy}oh60000")));
        // Another key's grant, a marker, a short stem: no.
        assert!(!key_reused(&token("Zq3v7M1b0nqzT0m6k9xW2A", 17), entropy));
        assert!(!key_reused("~shared", entropy));
        assert!(!key_reused(&plain, "Yq3v7M"));
    }

    #[test]
    fn foreign_tokens_carry_no_fence() {
        assert_eq!(fence_of("Yq3v7M1b0nqzT0m6k9xW2A"), None);
        assert_eq!(fence_of("uuid-like 1.2"), None);
        assert_eq!(fence_of(".123"), None);
        assert_eq!(fence_of("abc."), None);
        assert_eq!(fence_of("abc.12a"), None);
        assert_eq!(fence_of("abc.123456789012345678901"), None);
    }
}
