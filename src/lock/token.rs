//! Lock tokens: the secret that proves who holds a lock.
//!
//! A token is `<stem>.<fence>` (see `backend::fence`). The **stem** is the gateway's part: 128
//! bits, URL-safe base64 without padding (22 characters), straight from the OS CSPRNG, and
//! fresh for every attempt a request makes, so that nothing a failed attempt left behind (a
//! withdrawal still in flight, a grant whose answer was lost) can ever match a later attempt's
//! token. For an acquire that carries an `Idempotency-Key` the stem is derived instead, as
//! HMAC-SHA256 of (name, key) under the gateway's secret, so that a client retrying after a
//! lost response computes the same stem and finds its own grant; attempts that share such a
//! stem tell themselves apart with a [`Claim`](crate::backend::Claim). The **fence** is the one
//! the store issued for the grant, so the token alone says which grant it proves.
//!
//! After its 22 characters of entropy a stem carries marks (`backend::marks::Marks`): `o`
//! when the grant has a holder record, and `h<milliseconds>` for a bounded hold (`max_hold_ms`,
//! or the server's `--max-hold`). The token alone then says until when it may be renewed (its
//! fence is the grant's time, see `backend::fence::granted_at`) and whether a second key must
//! be touched, on every backend and every gateway, with no state in the store. A client cannot
//! change them: the token must match the store's value exactly.
//!
//! The backend stores exactly the token string, so any Redis client can release a lock taken
//! through the gateway with the classic compare-and-delete script.
//!
//! Nothing here implements `Display`, and `Debug` is redacted: a token, a secret or an
//! idempotency key cannot end up in a log line by accident.

use std::fmt;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::backend::{fence, marks};

/// Bytes of entropy in a token (128 bits).
const TOKEN_BYTES: usize = 16;
/// Longest token accepted from a client. Ours are under 70 characters.
pub const MAX_PRESENTED_TOKEN_LEN: usize = 256;
/// Shortest accepted `LOCKGATE_TOKEN_SECRET`, in bytes.
pub const MIN_SECRET_LEN: usize = 32;
/// Accepted lengths of an `Idempotency-Key`. The key is as good as a password for the grant it
/// names (whoever presents it gets the token), so very short keys are refused.
pub const IDEMPOTENCY_KEY_LEN: std::ops::RangeInclusive<usize> = 16..=255;
/// Separates derived tokens from any other use of the same secret.
const DERIVATION_CONTEXT: &[u8] = b"lockgate/token/v1";

/// The gateway's part of a token, chosen before the store answers.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenStem(String);

impl TokenStem {
    /// A new stem from the OS CSPRNG (see `entropy`).
    pub fn random() -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; TOKEN_BYTES];
        crate::entropy::fill(&mut bytes)?;
        Ok(Self(URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// The stem a given (name, idempotency key) pair always maps to under `secret`.
    pub fn derive(secret: &TokenSecret, name: &str, key: &IdempotencyKey) -> Self {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&secret.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
        mac.update(DERIVATION_CONTEXT);
        // Length-prefix the name so that (name, key) pairs cannot collide by moving bytes
        // from one to the other.
        mac.update(&(name.len() as u32).to_be_bytes());
        mac.update(name.as_bytes());
        mac.update(key.key.as_bytes());
        if let Some(principal) = &key.principal {
            // A key is visible ASCII: the NUL ends it unambiguously.
            mac.update(&[0]);
            mac.update(&(principal.len() as u32).to_be_bytes());
            mac.update(principal.as_bytes());
        }
        let digest = mac.finalize().into_bytes();
        Self(URL_SAFE_NO_PAD.encode(&digest[..TOKEN_BYTES]))
    }

    /// This stem with `marks` (a holder record, a bounded hold) after its entropy.
    pub fn marked(&self, marks: marks::Marks) -> Self {
        Self(marks.stem(&self.0))
    }

    /// The stem text, for the backend. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for TokenStem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenStem(<redacted>)")
    }
}

/// A lock token, either issued here or presented by a client: its text, and what the text
/// says, read once (a request asks several times).
#[derive(Clone, PartialEq, Eq)]
pub struct LockToken {
    text: String,
    marks: marks::Marks,
    fence: u64,
}

impl LockToken {
    /// The token of a grant of `stem` with `fence`.
    pub fn issued(stem: &TokenStem, fence: u64) -> Self {
        Self {
            text: fence::token(stem.expose(), fence),
            marks: marks::Marks::of(stem.expose()),
            fence,
        }
    }

    /// The fence the token carries.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// Whether this is the token of a multi-lock (several names at once).
    pub fn is_multi(&self) -> bool {
        self.marks.multi
    }

    /// Whether this is the token of the multi-lock of exactly the set `names` (in any order).
    pub fn holds_set<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> bool {
        self.marks
            .set
            .is_some_and(|set| set == marks::set_digest(names))
    }

    /// Whether this is the token of a reentrant lock's grant (see `super::reentrant`).
    pub fn is_reentrant(&self) -> bool {
        self.marks.reentrant
    }

    /// Whether this is the token of a shared grant of a read/write lock.
    pub fn is_shared(&self) -> bool {
        self.marks.shared
    }

    /// How long this grant may still be held, if it has a bounded hold (zero once the bound
    /// has passed).
    pub fn hold_left(&self) -> Option<Duration> {
        let deadline = self.hold_deadline()?;
        Some(
            deadline
                .duration_since(crate::wall_clock::now())
                .unwrap_or_default(),
        )
    }

    /// The grant's minimum hold (`min_hold_ms`), if its stem carries one.
    pub fn min_hold(&self) -> Option<Duration> {
        self.marks.min_hold_ms.map(Duration::from_millis)
    }

    /// Until when this grant may be renewed, if it has a bounded hold: its grant time (read
    /// from the fence) plus the bound its stem carries.
    pub fn hold_deadline(&self) -> Option<SystemTime> {
        let bound = self.marks.max_hold_ms?;
        fence::granted_at(self.fence)?.checked_add(Duration::from_millis(bound))
    }

    /// Accepts a token presented in a `Lock-Token` header if it has the shape of a token
    /// lockgate issues (see `fence::issued`): a lock is moved only by a token lockgate
    /// issued for it, never by an internal marker (`~shared`) or another client's value.
    /// Whether the token is the holder's is the backend's atomic compare.
    pub fn presented(text: &str) -> Option<Self> {
        if text.len() > MAX_PRESENTED_TOKEN_LEN {
            return None;
        }
        let (marks, fence) = fence::issued(text)?;
        Some(Self {
            text: text.to_owned(),
            marks,
            fence,
        })
    }

    /// The token text, for the response body and the backend. Never log it.
    pub fn expose(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for LockToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LockToken(<redacted>)")
    }
}

/// The key under which idempotent tokens are derived.
#[derive(Clone)]
pub struct TokenSecret(Vec<u8>);

impl TokenSecret {
    /// A secret for this process only: idempotent retries then work only against the same
    /// gateway process, which is right for a sidecar and wrong for a shared, replicated
    /// service (set `LOCKGATE_TOKEN_SECRET` there).
    pub fn random() -> Result<Self, getrandom::Error> {
        let mut bytes = vec![0u8; 32];
        crate::entropy::fill(&mut bytes)?;
        Ok(Self(bytes))
    }

    /// A 256-bit key for `context`, derived from this secret (HMAC-SHA256): other uses of the
    /// secret (sealing listing cursors) never share the key that derives tokens.
    pub fn derive_key(&self, context: &[u8]) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
        mac.update(context);
        mac.finalize().into_bytes().into()
    }

    /// A configured secret; `None` when it is shorter than [`MIN_SECRET_LEN`].
    pub fn from_configured(secret: &str) -> Option<Self> {
        (secret.len() >= MIN_SECRET_LEN).then(|| Self(secret.as_bytes().to_vec()))
    }
}

impl fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenSecret(<redacted>)")
    }
}

/// A validated `Idempotency-Key` header value, and the API key it was presented with.
///
/// The derived stem depends on both, so an idempotency key is bound to the API key that first
/// used it: another API key presenting the same idempotency key derives another stem, finds
/// the lock held by a token that is not its own, and is answered as any other contender
/// (409 `lock-held`), never with the first caller's token.
#[derive(Clone)]
pub struct IdempotencyKey {
    key: String,
    /// The name of the API key it came with; `None` without API keys.
    principal: Option<String>,
}

impl IdempotencyKey {
    /// Accepts visible ASCII within [`IDEMPOTENCY_KEY_LEN`].
    pub fn parse(text: &str) -> Option<Self> {
        let ok =
            IDEMPOTENCY_KEY_LEN.contains(&text.len()) && text.bytes().all(|b| b.is_ascii_graphic());
        ok.then(|| Self {
            key: text.to_owned(),
            principal: None,
        })
    }

    /// This key, as presented with the API key named `principal`.
    pub fn bound_to(self, principal: &str) -> Self {
        Self {
            principal: Some(principal.to_owned()),
            ..self
        }
    }
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IdempotencyKey(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_stem_tells_until_when_its_grant_may_be_held() {
        let stem = TokenStem::random().expect("random");
        let fence = 1_763_712_000_123_456;
        let marks = marks::Marks {
            max_hold_ms: Some(90_000),
            ..marks::Marks::default()
        };
        let bounded = LockToken::issued(&stem.marked(marks), fence);
        let granted = fence::granted_at(fence).expect("a time");
        assert_eq!(
            bounded.hold_deadline(),
            Some(granted + Duration::from_secs(90))
        );
        assert_eq!(bounded.fence(), fence);
        assert_eq!(LockToken::issued(&stem, fence).hold_deadline(), None);
        // A stem with an 'h' inside its entropy is no bound.
        let plain = LockToken::presented("AAAAAAAAAAhAAAAAAAAAAA.1763712000123456").expect("token");
        assert_eq!(plain.hold_deadline(), None);
    }

    fn key(text: &str) -> IdempotencyKey {
        IdempotencyKey::parse(text).expect("valid key")
    }

    #[test]
    fn random_stems_are_128_bit_url_safe_and_distinct() {
        let a = TokenStem::random().expect("rng");
        let b = TokenStem::random().expect("rng");
        assert_eq!(a.expose().len(), 22);
        assert!(
            a.expose()
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
        assert_ne!(a, b);
    }

    #[test]
    fn issued_tokens_are_stem_dot_fence() {
        let stem = TokenStem::random().expect("rng");
        let token = LockToken::issued(&stem, 1_795_449_363_840_090);
        assert_eq!(
            token.expose(),
            format!("{}.1795449363840090", stem.expose())
        );
        assert_eq!(token.fence(), 1_795_449_363_840_090);
        // A presented token says the same as the issued one it copies.
        assert_eq!(LockToken::presented(token.expose()), Some(token));
        assert!(LockToken::presented("foreign-token").is_none());
    }

    #[test]
    fn derived_stems_depend_on_secret_name_and_key_only() {
        let secret = TokenSecret::from_configured(&"s".repeat(32)).expect("long enough");
        let other = TokenSecret::from_configured(&"t".repeat(32)).expect("long enough");
        let k = key("0123456789abcdef");
        let t = TokenStem::derive(&secret, "orders:1", &k);
        assert_eq!(t, TokenStem::derive(&secret, "orders:1", &k));
        assert_eq!(t.expose().len(), 22);
        assert_ne!(t, TokenStem::derive(&other, "orders:1", &k));
        assert_ne!(t, TokenStem::derive(&secret, "orders:2", &k));
        assert_ne!(
            t,
            TokenStem::derive(&secret, "orders:1", &key("0123456789abcdeg"))
        );
    }

    #[test]
    fn derived_stems_are_bound_to_the_api_key() {
        let secret = TokenSecret::random().expect("rng");
        let derive = |k: IdempotencyKey| TokenStem::derive(&secret, "orders:1", &k);
        let plain = derive(key("0123456789abcdef"));
        let team_a = derive(key("0123456789abcdef").bound_to("team-a"));
        assert_ne!(plain, team_a);
        assert_ne!(team_a, derive(key("0123456789abcdef").bound_to("team-b")));
        assert_eq!(team_a, derive(key("0123456789abcdef").bound_to("team-a")));
    }

    #[test]
    fn name_and_key_cannot_trade_bytes() {
        let secret = TokenSecret::random().expect("rng");
        let a = TokenStem::derive(&secret, "ab", &key("cdefghijklmnopqrs"));
        let b = TokenStem::derive(&secret, "abc", &key("defghijklmnopqrs"));
        assert_ne!(a, b);
    }

    #[test]
    fn presented_tokens_are_issued_shaped_bounded_visible_ascii() {
        assert!(LockToken::presented("abc-_DEF123abc-_DEF123.1").is_some());
        assert!(LockToken::presented("abc-_DEF123").is_none());
        assert!(LockToken::presented("~shared").is_none());
        assert!(LockToken::presented("").is_none());
        assert!(LockToken::presented("a b").is_none());
        assert!(LockToken::presented("a\r\nb").is_none());
        assert!(LockToken::presented(&"a".repeat(257)).is_none());
    }

    #[test]
    fn idempotency_keys_must_be_long_enough_to_be_unguessable() {
        assert!(IdempotencyKey::parse("short").is_none());
        assert!(IdempotencyKey::parse("6f1c1a9e-7d4b-4c1e-9a57-2b0f8a3e5d11").is_some());
        assert!(IdempotencyKey::parse(&"k".repeat(256)).is_none());
        assert!(IdempotencyKey::parse("0123456789 abcdef").is_none());
    }

    #[test]
    fn debug_output_never_shows_secrets() {
        let s = TokenStem::random().expect("rng");
        assert!(!format!("{s:?}").contains(s.expose()));
        let t = LockToken::issued(&s, 7);
        assert!(!format!("{t:?}").contains(s.expose()));
        assert_eq!(
            format!("{:?}", key("0123456789abcdef")),
            "IdempotencyKey(<redacted>)"
        );
        assert_eq!(
            format!("{:?}", TokenSecret::random().expect("rng")),
            "TokenSecret(<redacted>)"
        );
    }

    #[test]
    fn short_configured_secrets_are_refused() {
        assert!(TokenSecret::from_configured(&"s".repeat(31)).is_none());
    }
}
