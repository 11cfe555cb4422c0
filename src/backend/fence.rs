//! Fences, and the token format that carries them.
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
//! `scripts/grant.lua`, the prelude of every script that issues, raises or matches a fence;
//! `tests/it/grant_rules.rs` runs both sides over the same inputs on a real server.

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

/// Separates the stem from the fence in a token.
pub const SEPARATOR: char = '.';

/// Characters of entropy that begin a stem the gateway made (128 bits in URL-safe base64).
/// What follows them are marks saying what else the grant has; a stem of another client, or
/// a token of another format, has none.
pub const STEM_ENTROPY_CHARS: usize = 22;
/// Most digits of a token's fence and of its `h` bound: every 19-digit number fits a u64, and
/// a microsecond clock needs 17 digits until the year 5138. The OpenAPI document's
/// `Lock-Token` pattern says the same.
const MAX_DIGITS: usize = 19;
/// Mark: the grant has a holder record (see `super::holder`), so release, renew and
/// withdrawal must touch it; grants without one do not pay for it.
pub const HOLDER_MARK: char = 'o';
/// Mark: a shared grant of a read/write lock (see `super::shared`), kept among the name's
/// readers rather than as the lock key's value.
pub const SHARED_MARK: char = 's';
/// Mark: a multi-lock's grant (see `super::multi`): its token holds several names at once.
/// It is followed by [`SET_DIGEST_MARK`] and the set's digest ([`set_digest`]), so that the
/// token says which names it was granted for: renew and release must name exactly those.
pub const MULTI_MARK: char = 'm';
/// Starts a set's digest after [`MULTI_MARK`] (a character no earlier token had there).
pub const SET_DIGEST_MARK: char = '_';
/// Characters of a set's digest: its 30 bits, six to a character of URL-safe base64, so that
/// every 5 such characters are a digest (the OpenAPI pattern says just that).
pub const SET_DIGEST_CHARS: usize = 5;
/// URL-safe base64's alphabet, a digit's value its position.
const DIGITS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// Set above a digest's 30 bits, so that it is never zero (it fits a `NonZeroU32`).
const DIGEST_TAG: u32 = 1 << 31;

/// Which set of names a multi-lock's token was granted for: 30 bits of SHA-256 over the names
/// (with a tag bit, so never zero). It guards the set's meaning (renew and release name exactly the
/// set), not a secret: only a holder of the token could try other sets against it, and it may
/// release its whole set anyway. 32 bits keep [`Marks`] (carried in every request's future)
/// at its size.
pub type SetDigest = std::num::NonZeroU32;

/// The digest of the set `names` (in any order; a name given twice counts once).
pub fn set_digest<'a>(names: impl IntoIterator<Item = &'a str>) -> SetDigest {
    use sha2::{Digest as _, Sha256};
    let mut names: Vec<&str> = names.into_iter().collect();
    names.sort_unstable();
    names.dedup();
    let mut hash = Sha256::new();
    hash.update(b"lockgate/set/v1");
    for name in names {
        // Length-prefixed: names cannot be moved from one to the next.
        hash.update((name.len() as u32).to_be_bytes());
        hash.update(name.as_bytes());
    }
    let hash = hash.finalize();
    let bits = u32::from_be_bytes([hash[0], hash[1], hash[2], hash[3]]) >> 2;
    SetDigest::new(bits | DIGEST_TAG).unwrap_or(SetDigest::MIN)
}
/// Mark: a reentrant lock's grant: its holder may take it again with its token, and each
/// release gives back one hold (see `LeaseStore::reenter`); its hold count is kept beside it.
pub const REENTRANT_MARK: char = 'r';
/// Mark: a release before the grant's time plus this many milliseconds leaves the lock held
/// until then, `a<ms>` ("at least"; `min_hold_ms`, see `LeaseStore::release`).
pub const MIN_HOLD_MARK: char = 'a';
/// Mark, last: the grant may be held for at most this many milliseconds, `h<ms>`.
pub const MAX_HOLD_MARK: char = 'h';

/// What a stem's marks say (of a stem, or of a token `<stem>.<fence>`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marks {
    pub holder: bool,
    pub shared: bool,
    pub multi: bool,
    /// A multi-lock's set (tokens issued before sets carried it have none).
    pub set: Option<SetDigest>,
    pub reentrant: bool,
    pub min_hold_ms: Option<u64>,
    pub max_hold_ms: Option<u64>,
}

impl Marks {
    /// The marks of `stem_or_token`: none for anything that is not a gateway's.
    pub fn of(stem_or_token: &str) -> Self {
        let stem = split(stem_or_token).map_or(stem_or_token, |(stem, _)| stem);
        stem.get(STEM_ENTROPY_CHARS..)
            .map_or_else(Self::default, |marks| Self::read(marks).0)
    }

    /// The marks at the start of `text` (what follows a stem's entropy), and what is left
    /// after them: nothing, in a stem the gateway made.
    fn read(mut text: &str) -> (Self, &str) {
        fn mark(text: &mut &str, c: char) -> bool {
            let found = text.starts_with(c);
            if found {
                *text = &text[c.len_utf8()..];
            }
            found
        }
        let holder = mark(&mut text, HOLDER_MARK);
        let shared = mark(&mut text, SHARED_MARK);
        let multi = mark(&mut text, MULTI_MARK);
        let set = if multi { digest(&mut text) } else { None };
        let reentrant = mark(&mut text, REENTRANT_MARK);
        let min_hold_ms = bound(&mut text, MIN_HOLD_MARK);
        let max_hold_ms = bound(&mut text, MAX_HOLD_MARK);
        let marks = Self {
            holder,
            shared,
            multi,
            set,
            reentrant,
            min_hold_ms,
            max_hold_ms,
        };
        (marks, text)
    }

    /// These marks after `entropy` (the stem's first [`STEM_ENTROPY_CHARS`] characters).
    pub fn stem(&self, entropy: &str) -> String {
        let mut stem = entropy.to_owned();
        if self.holder {
            stem.push(HOLDER_MARK);
        }
        if self.shared {
            stem.push(SHARED_MARK);
        }
        if self.multi {
            stem.push(MULTI_MARK);
            if let Some(set) = self.set {
                stem.push(SET_DIGEST_MARK);
                for digit in (0..SET_DIGEST_CHARS).rev() {
                    let value = (set.get() >> (6 * digit)) & 63;
                    stem.push(char::from(DIGITS[value as usize]));
                }
            }
        }
        if self.reentrant {
            stem.push(REENTRANT_MARK);
        }
        if let Some(ms) = self.min_hold_ms {
            stem.push(MIN_HOLD_MARK);
            stem.push_str(&ms.to_string());
        }
        if let Some(ms) = self.max_hold_ms {
            stem.push(MAX_HOLD_MARK);
            stem.push_str(&ms.to_string());
        }
        stem
    }
}

/// A set's digest (`_` and [`SET_DIGEST_CHARS`] URL-safe base64 digits, any of them) at the
/// start of `text`; `text` is left after it.
fn digest(text: &mut &str) -> Option<SetDigest> {
    let rest = text.strip_prefix(SET_DIGEST_MARK)?;
    let mut bits: u32 = 0;
    for &c in rest.as_bytes().get(..SET_DIGEST_CHARS)? {
        let value = DIGITS.iter().position(|&d| d == c)?;
        bits = bits << 6 | u32::try_from(value).ok()?;
    }
    *text = &rest[SET_DIGEST_CHARS..];
    SetDigest::new(bits | DIGEST_TAG)
}

/// A bound mark (`<mark><ms>`) at the start of `text`, as `Marks::stem` writes it: digits, no
/// leading zero; `text` is left after it.
fn bound(text: &mut &str, mark: char) -> Option<u64> {
    let rest = text.strip_prefix(mark)?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let ms = &rest[..digits];
    if ms.is_empty() || ms.len() > MAX_DIGITS || (ms.len() > 1 && ms.starts_with('0')) {
        return None;
    }
    let value = ms.parse().ok()?;
    *text = &rest[digits..];
    Some(value)
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

/// A token lockgate issued as its stem and its fence; `None` for any other text. (Read on
/// every request: by bytes, each stem byte checked by a table lookup, the fence's digits
/// summed as they are checked.)
fn split(token: &str) -> Option<(&str, u64)> {
    let bytes = token.as_bytes();
    let at = bytes.iter().rposition(|&b| b == SEPARATOR as u8)?;
    let (stem, digits) = (&bytes[..at], &bytes[at + 1..]);
    if stem.is_empty() || digits.is_empty() || digits.len() > MAX_DIGITS {
        return None;
    }
    if !stem.iter().all(|&b| STEM_BYTE[usize::from(b)]) {
        return None;
    }
    let mut fence: u64 = 0;
    for &b in digits {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        // At most MAX_DIGITS (19) digits: 10^19 - 1 fits a u64, so this cannot overflow.
        fence = fence * 10 + u64::from(digit);
    }
    Some((&token[..at], fence))
}

/// The bytes a stem is made of: URL-safe base64 (its entropy and its marks).
const STEM_BYTE: [bool; 256] = crate::name::alphanumeric_and(b"-_");

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every five URL-safe characters after `m_` are a set's digest (the OpenAPI pattern of a
    /// set's token says no more), and a digest reads back as written.
    #[test]
    fn every_digest_of_the_documented_shape_reads() {
        for digits in ["AAAAA", "_____", "-Qg9w", "zzzzz"] {
            let token = format!("AAAAAAAAAAAAAAAAAAAAAAm_{digits}.1");
            let (marks, _) = issued(&token).unwrap_or_else(|| panic!("{token}"));
            let set = marks.set.expect("a digest");
            assert_eq!(
                Marks {
                    multi: true,
                    set: Some(set),
                    ..Marks::default()
                }
                .stem("AAAAAAAAAAAAAAAAAAAAAA"),
                token.trim_end_matches(".1")
            );
        }
        let set = set_digest(["b", "a", "a"]);
        assert_eq!(set, set_digest(["a", "b"]));
        assert_ne!(set, set_digest(["a", "b", "c"]));
        assert!(
            issued("AAAAAAAAAAAAAAAAAAAAAAm_AAAA.1").is_none(),
            "four digits"
        );
        assert!(issued("AAAAAAAAAAAAAAAAAAAAAAm_AAAA=.1").is_none());
    }

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
    fn marks_after_the_entropy_say_what_the_grant_has() {
        let entropy = "Yq3v7M1b0nqzT0m6k9xW2A";
        for marks in [
            Marks::default(),
            Marks {
                holder: true,
                ..Marks::default()
            },
            Marks {
                max_hold_ms: Some(90_000),
                ..Marks::default()
            },
            Marks {
                holder: true,
                shared: true,
                max_hold_ms: Some(1),
                ..Marks::default()
            },
            Marks {
                holder: true,
                multi: true,
                ..Marks::default()
            },
            Marks {
                shared: true,
                ..Marks::default()
            },
        ] {
            let stem = marks.stem(entropy);
            assert_eq!(Marks::of(&stem), marks, "{stem}");
            assert_eq!(
                Marks::of(&token(&stem, 1_795_449_363_840_090)),
                marks,
                "{stem}"
            );
        }
        // Tokens of other clients carry none.
        for other in [
            "",
            "uuid-4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a99",
            "Yq3v7M1b0nqzT0m6k9xW2Aoh",
        ] {
            assert_eq!(Marks::of(other).max_hold_ms, None, "{other}");
        }
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
    fn foreign_tokens_carry_no_fence() {
        assert_eq!(fence_of("Yq3v7M1b0nqzT0m6k9xW2A"), None);
        assert_eq!(fence_of("uuid-like 1.2"), None);
        assert_eq!(fence_of(".123"), None);
        assert_eq!(fence_of("abc."), None);
        assert_eq!(fence_of("abc.12a"), None);
        assert_eq!(fence_of("abc.123456789012345678901"), None);
    }
}
