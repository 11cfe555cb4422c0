//! The shape of a token, `<stem>.<fence>` (`split`), and the marks of its stem: what a stem
//! says after its entropy about what else its grant has (a holder record, a reader's grant, a
//! set and the set's digest, re-entry, a minimum and a maximum hold), so that release, renew
//! and withdrawal know which keys and rules apply without a look at the store. A stem of
//! another client, or a token of another format, has no marks. The fence itself, and the
//! tokens built and read with it, are `super::fence`'s.

/// Whether a lock key's value is a marker rather than a token: it begins with `~`, which no
/// token has. A set of grants kept beside the lock stands in the lock key as its marker
/// ([`GrantSetKind::marker`](super::GrantSetKind::marker)).
pub fn is_marker(value: &str) -> bool {
    value.starts_with('~')
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
/// Mark: a grant of the set kept beside the lock (a read/write lock's reader, see
/// [`GrantSetKind::marker`](super::GrantSetKind::marker)), kept in the set rather than as the
/// lock key's value.
pub const BESIDE_MARK: char = 's';
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
/// release gives back one hold (see `RenewAttempt::one_more_hold`); its hold count is kept beside it.
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
    pub(super) fn read(mut text: &str) -> (Self, &str) {
        fn mark(text: &mut &str, c: char) -> bool {
            let found = text.starts_with(c);
            if found {
                *text = &text[c.len_utf8()..];
            }
            found
        }
        let holder = mark(&mut text, HOLDER_MARK);
        let shared = mark(&mut text, BESIDE_MARK);
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
            stem.push(BESIDE_MARK);
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

/// A token lockgate issued as its stem and its fence; `None` for any other text. (Read on
/// every request: by bytes, each stem byte checked by a table lookup, the fence's digits
/// summed as they are checked.)
pub(super) fn split(token: &str) -> Option<(&str, u64)> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::fence::{issued, token};

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
}
