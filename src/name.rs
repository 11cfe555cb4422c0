//! Lock names: the only user-chosen string that reaches a backend key.
//!
//! A name matches `^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$`. The alphabet has no slash, brace,
//! glob character, space or control byte, so a name can never escape its key prefix, break the
//! `{name}` hash tag a clustered backend relies on, or be mistaken for a pattern.

use std::fmt;

/// Longest accepted name, in bytes (the alphabet is ASCII, so bytes = characters).
pub const MAX_NAME_LEN: usize = 200;

/// The bytes that may follow a name's first: letters, digits, `.`, `_`, `:` and `-`.
const FOLLOWING_BYTE: [bool; 256] = alphanumeric_and(b"._:-");

/// A table of the bytes of an ASCII alphabet, indexed by byte: the letters, the digits and
/// `extra`. (Text checked on every request is checked by table, a byte at a time.)
pub const fn alphanumeric_and(extra: &[u8]) -> [bool; 256] {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let mut i = 0;
    while i < extra.len() {
        table[extra[i] as usize] = true;
        i += 1;
    }
    table
}

/// A validated lock name.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct LockName(String);

/// Why a string is not a lock name. The message is safe to show to the caller: it never
/// repeats the rejected input, which may contain control bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InvalidName {
    #[error("the lock name is empty")]
    Empty,
    #[error("the lock name is longer than {MAX_NAME_LEN} characters")]
    TooLong,
    #[error("the lock name must start with a letter or a digit")]
    BadFirstCharacter,
    #[error("the lock name may only contain letters, digits, '.', '_', ':' and '-'")]
    BadCharacter,
}

impl LockName {
    /// Validates `name` and wraps it.
    pub fn parse(name: &str) -> Result<Self, InvalidName> {
        Self::check(name)?;
        Ok(Self(name.to_owned()))
    }

    /// Validates an owned string without copying it.
    pub fn from_string(name: String) -> Result<Self, InvalidName> {
        Self::check(&name)?;
        Ok(Self(name))
    }

    fn check(name: &str) -> Result<(), InvalidName> {
        let bytes = name.as_bytes();
        let Some(&first) = bytes.first() else {
            return Err(InvalidName::Empty);
        };
        if bytes.len() > MAX_NAME_LEN {
            return Err(InvalidName::TooLong);
        }
        if !first.is_ascii_alphanumeric() {
            return Err(InvalidName::BadFirstCharacter);
        }
        // Every byte, by a table and without stopping at a bad one: the gate checks the name
        // of every request.
        let bad = |any: bool, b: &u8| any | !FOLLOWING_BYTE[usize::from(*b)];
        if bytes[1..].iter().fold(false, bad) {
            return Err(InvalidName::BadCharacter);
        }
        Ok(())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_alphabet() {
        for name in [
            "a",
            "Z",
            "7",
            "orders:42",
            "a.b_c-d:e",
            "0-.",
            &"x".repeat(200),
        ] {
            assert_eq!(
                LockName::parse(name).map(|n| n.to_string()),
                Ok(name.to_owned())
            );
        }
    }

    #[test]
    fn rejects_empty_and_overlong_names() {
        assert_eq!(LockName::parse(""), Err(InvalidName::Empty));
        assert_eq!(LockName::parse(&"x".repeat(201)), Err(InvalidName::TooLong));
    }

    #[test]
    fn rejects_a_bad_first_character() {
        for name in ["..", ".a", "-a", ":a", "_a"] {
            assert_eq!(
                LockName::parse(name),
                Err(InvalidName::BadFirstCharacter),
                "{name}"
            );
        }
    }

    #[test]
    fn rejects_characters_that_could_escape_a_key_or_a_hash_tag() {
        for name in [
            "a b", "{x}", "a{x}", "a}", "a/b", "a*", "a?", "a[b]", "a\\b", "a\nb", "a\0",
            "a\u{7f}", "é", "aé", "a%20b", "a\"b", "a'b",
        ] {
            assert!(LockName::parse(name).is_err(), "{name:?} must be rejected");
        }
        assert_eq!(LockName::parse("a b"), Err(InvalidName::BadCharacter));
    }

    /// The table of bytes that may follow the first says what the alphabet above says, for
    /// every byte (and every character that is not ASCII is refused).
    #[test]
    fn every_following_character_is_judged_by_the_alphabet() {
        for c in (0..=255u8).map(char::from) {
            let documented = c.is_ascii_alphanumeric() || ".:_-".contains(c);
            let name = format!("a{c}");
            let judged = LockName::parse(&name);
            assert_eq!(judged.is_ok(), documented, "{name:?}");
            if !documented {
                assert_eq!(judged, Err(InvalidName::BadCharacter), "{name:?}");
            }
        }
    }
}
