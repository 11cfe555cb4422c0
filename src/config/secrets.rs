//! Values that must never be printed: URLs with passwords, secrets, keys.

use std::fmt;
use std::str::FromStr;

/// A string that must never be printed: a URL with a password, a secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// `text` with the credentials of any URL in it (`scheme://user:password@host`) cut out: what
/// lockgate prints of a URL it was given (a gateway's, a collector's, an error naming one).
pub fn without_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let authority_end = after
            .find(|c: char| matches!(c, '/' | '?' | '#' | ')') || c.is_whitespace())
            .unwrap_or(after.len());
        match after[..authority_end].rfind('@') {
            Some(userinfo_end) => rest = &after[userinfo_end + 1..],
            None => rest = after,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_urls_are_cut_from_errors() {
        assert_eq!(
            without_userinfo(
                "error sending request for url (https://u:secret@collector:4318/v1/traces)"
            ),
            "error sending request for url (https://collector:4318/v1/traces)"
        );
        assert_eq!(
            without_userinfo("http://collector:4318/x"),
            "http://collector:4318/x"
        );
        assert_eq!(without_userinfo("no url"), "no url");
        assert_eq!(
            without_userinfo("http://user:pw@127.0.0.1:1/locks/job"),
            "http://127.0.0.1:1/locks/job"
        );
        assert_eq!(
            without_userinfo("http://host:1?to=a@b"),
            "http://host:1?to=a@b"
        );
    }
}
