//! Listing cursors as clients see them: sealed.
//!
//! A listing's position ([`ListPosition`]: which of the caller's visible prefixes, which node,
//! its SCAN cursor, and the last name taken from an overflowing SCAN step) names a lock, so
//! handing it out in the clear would tell a caller names outside its scope, and accepting it
//! back unchecked would let a caller steer another's listing. A cursor is therefore the
//! position encrypted and authenticated (XChaCha20-Poly1305, a random 192-bit nonce per
//! cursor) with the listing's [`CursorScope`] — the API key that asked and the prefix it
//! asked for — as associated data: it says nothing about names, and a cursor made for another
//! key or another prefix, or altered in any way, does not open (400 `invalid-request`).
//!
//! The key is derived from the gateway's token secret, so gateways sharing
//! `LOCKGATE_TOKEN_SECRET` accept each other's cursors; with a random per-process secret a
//! cursor is good for the gateway process that made it only.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use super::token::TokenSecret;
use crate::backend::{ListCursor, PageRequest};

/// Separates the derivation of the cursor key from any other use of the secret.
const KEY_CONTEXT: &[u8] = b"lockgate/cursor/v1";
/// Bytes of the random nonce that opens a sealed cursor.
const NONCE_BYTES: usize = 24;

/// Where a listing goes on: the index of the prefix being walked among the caller's visible
/// prefixes, and the position in that prefix's walk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListPosition {
    pub part: usize,
    pub at: ListCursor,
}

/// One page of a listing, and where the next starts.
pub type Paged<T> = (Vec<T>, Option<ListPosition>);

impl ListPosition {
    /// One page of at most `limit` from a listing over `prefixes`, walked one after the
    /// other (the prefixes a caller may see under the one it asked for), from this position
    /// on: `list` answers the request for one page of one prefix, and where that prefix's
    /// walk goes on.
    pub async fn page<'p, T, E, Page>(
        &self,
        prefixes: &'p [String],
        limit: usize,
        list: impl FnOnce(PageRequest<'p>) -> Page,
    ) -> Result<Paged<T>, E>
    where
        Page: Future<Output = Result<(Vec<T>, Option<ListCursor>), E>>,
    {
        let Some(prefix) = prefixes.get(self.part) else {
            return Ok((Vec::new(), None));
        };
        let request = PageRequest {
            prefix,
            cursor: self.at.clone(),
            limit,
        };
        let (found, next) = list(request).await?;
        Ok((found, Self::after(self.part, next, prefixes.len())))
    }

    /// Where a listing of `parts` prefixes goes on after a page of the `part`th that ended at
    /// `next`: further in it, at the start of the next prefix, or nowhere (it is complete).
    fn after(part: usize, next: Option<ListCursor>, parts: usize) -> Option<Self> {
        match next {
            Some(at) => Some(Self { part, at }),
            None if part + 1 < parts => Some(Self {
                part: part + 1,
                at: ListCursor::default(),
            }),
            None => None,
        }
    }
}

/// Who a cursor is for: the API key that listed (its name; empty without API keys) and the
/// `prefix` it asked for. A cursor opens only for the same scope.
#[derive(Debug, Clone, Copy)]
pub struct CursorScope<'a> {
    pub key: &'a str,
    pub prefix: &'a str,
}

impl CursorScope<'_> {
    /// The associated data: both parts length-prefixed, so that no two scopes share it.
    fn associated_data(&self) -> Vec<u8> {
        let mut aad =
            Vec::with_capacity(KEY_CONTEXT.len() + 8 + self.key.len() + self.prefix.len());
        aad.extend_from_slice(KEY_CONTEXT);
        for part in [self.key, self.prefix] {
            aad.extend_from_slice(&(part.len() as u32).to_be_bytes());
            aad.extend_from_slice(part.as_bytes());
        }
        aad
    }
}

/// Seals and opens listing cursors.
pub struct CursorSeal {
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for CursorSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorSeal(<redacted>)")
    }
}

impl CursorSeal {
    pub fn new(secret: &TokenSecret) -> Self {
        let key = secret.derive_key(KEY_CONTEXT);
        Self {
            cipher: XChaCha20Poly1305::new(&key.into()),
        }
    }

    /// The opaque, URL-safe text of `position` for `scope`.
    pub fn seal(&self, position: &ListPosition, scope: CursorScope<'_>) -> String {
        let mut nonce = [0u8; NONCE_BYTES];
        // A nonce only needs to be unique; should the OS refuse randomness (it does not on any
        // supported system), the time keeps it so for this process.
        if crate::entropy::fill(&mut nonce).is_err() {
            let now = crate::wall_clock::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos();
            nonce[..16].copy_from_slice(&now.to_be_bytes());
        }
        let plain = format!("{}~{}", position.part, position.at.encode());
        let aad = scope.associated_data();
        let sealed = self
            .cipher
            .encrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: plain.as_bytes(),
                    aad: &aad,
                },
            )
            .unwrap_or_default();
        let mut out = Vec::with_capacity(NONCE_BYTES + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        URL_SAFE_NO_PAD.encode(out)
    }

    /// The position in a cursor [`CursorSeal::seal`] made for this very `scope`; `None` for
    /// anything else (another key's or prefix's cursor, another gateway secret's, a tampered
    /// one, junk).
    pub fn open(&self, text: &str, scope: CursorScope<'_>) -> Option<ListPosition> {
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        if bytes.len() <= NONCE_BYTES {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(NONCE_BYTES);
        let nonce: [u8; NONCE_BYTES] = nonce.try_into().ok()?;
        let aad = scope.associated_data();
        let plain = self
            .cipher
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: sealed,
                    aad: &aad,
                },
            )
            .ok()?;
        let plain = std::str::from_utf8(&plain).ok()?;
        let (part, at) = plain.split_once('~')?;
        Some(ListPosition {
            part: part.parse().ok()?,
            at: ListCursor::decode(at)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn position() -> ListPosition {
        ListPosition {
            part: 1,
            at: ListCursor {
                node: 2,
                scan: 4711,
                after: Some("app:secret-name".into()),
            },
        }
    }

    const SCOPE: CursorScope<'static> = CursorScope {
        key: "team-b",
        prefix: "",
    };

    #[test]
    fn a_cursor_opens_for_its_scope_and_says_nothing_of_names() {
        let seal = CursorSeal::new(&TokenSecret::random().expect("rng"));
        let text = seal.seal(&position(), SCOPE);
        assert!(!text.contains("app"), "{text}");
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{text}"
        );
        assert_eq!(seal.open(&text, SCOPE), Some(position()));
        // Two seals of one position differ (fresh nonce): cursors cannot be compared.
        assert_ne!(seal.seal(&position(), SCOPE), text);
    }

    #[test]
    fn a_cursor_of_another_scope_secret_or_shape_does_not_open() {
        let secret = TokenSecret::random().expect("rng");
        let seal = CursorSeal::new(&secret);
        let text = seal.seal(&position(), SCOPE);
        for other in [
            CursorScope {
                key: "team-a",
                prefix: "",
            },
            CursorScope {
                key: "team-b",
                prefix: "app:",
            },
            // Bytes cannot move from one part of the scope to the other.
            CursorScope {
                key: "team-",
                prefix: "b",
            },
        ] {
            assert_eq!(seal.open(&text, other), None, "{other:?}");
        }
        let stranger = CursorSeal::new(&TokenSecret::random().expect("rng"));
        assert_eq!(stranger.open(&text, SCOPE), None);
        let mut tampered = URL_SAFE_NO_PAD.decode(&text).expect("base64");
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert_eq!(seal.open(&URL_SAFE_NO_PAD.encode(tampered), SCOPE), None);
        for junk in ["", "0~0", "0~0~app:x", "AAAA", &text[..text.len() - 2]] {
            assert_eq!(seal.open(junk, SCOPE), None, "{junk}");
        }
    }
}
