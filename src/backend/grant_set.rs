//! [`GrantSetKind`]: a kind of lease whose grants are many at once, told to the stores as
//! data rather than written into them.
//!
//! A semaphore's permits and a read/write lock's readers are kept alike: per name, a set of
//! tokens scored by expiry and a record of claims and holders beside it (on Redis a sorted set
//! and a hash, in memory a map). Acquiring, renewing, releasing, withdrawing, inspecting and
//! listing them are the same operations over other keys and other scripts; so the store
//! contract takes the kind's description, a [`GrantSetKind`] the kind defines in its own
//! module (the semaphore's is `primitive::semaphore::store::PERMITS`, the read/write lock's
//! readers `primitive::shared::store::READERS`), and the stores run what it names. A new kind
//! of this shape is a new value, with its scripts beside it, and no change in a store.
//!
//! What differs between the kinds and is not data is two questions, each a field below:
//! whether a grant counts against a limit, and whether the set lives beside the name's lock.

use std::sync::LazyLock;

use super::redis::GrantSetScripts;

/// The kind of a set of grants, as [`LeaseStore`](super::LeaseStore) operations take it.
pub type GrantsOf = &'static GrantSetKind;

/// What a store needs to know of a kind of lease whose grants are many at once.
#[derive(Debug)]
pub struct GrantSetKind {
    /// What the kind is called in logs and waiting lines (`semaphore`).
    pub label: &'static str,
    /// What one lease of it is called in messages to clients (`semaphore`, `shared lock`).
    pub noun: &'static str,
    /// Whether its grants count against a limit that the first grant of a free name sets:
    /// an acquire names one, a request naming another while grants are held is refused
    /// ([`AcquireOutcome::LimitDiffers`](super::AcquireOutcome::LimitDiffers)), and inspect
    /// answers it.
    pub limited: bool,
    /// For a set kept beside the name's lock (a read/write lock's readers), the lock key's
    /// value while any grant lives: a marker, which begins with `~` (no token does, see
    /// [`is_marker`](super::marks::is_marker)). Then the lock's releases are the set's too,
    /// and the set's last release is the lock's, a waiting lock holds new grants off
    /// ([`LeaseStore::hold_off`](super::LeaseStore::hold_off)), the lock's revoke deletes the
    /// set, and the kind's tokens are marked so that the lock's routes find their way to the
    /// set. At most one kind is kept so, the one the engine is told of
    /// (`lock::LockService::keeping_beside_lock`). Without a marker the set announces what
    /// it gives back on a channel of its own, and only lockgate's scripts write it.
    pub marker: Option<&'static str>,
    /// What its keys add to the name's, `<prefix>{<name>}`: the set of tokens scored by
    /// expiry (also how a listing finds the names that hold grants).
    pub tokens_key: &'static str,
    /// The record of claims and holders (and of a limited kind, its limit).
    pub info_key: &'static str,
    /// The tokens of grants an operator revoked, scored as the live ones, until the last of
    /// them would have ended: so that each holder is told "revoked" rather than "not held".
    pub revoked_key: &'static str,
    /// The channel on which a grant given back is announced, unless it is kept beside the
    /// lock.
    pub freed_channel: &'static str,
    /// Its scripts on Redis: acquire, renew, release (and withdraw), inspect.
    pub scripts: &'static LazyLock<GrantSetScripts>,
}

impl GrantSetKind {
    /// Whether the set is kept beside the name's lock (it has a [`marker`](Self::marker)).
    pub fn beside_lock(&self) -> bool {
        self.marker.is_some()
    }
}

/// A limited kind kept apart from the lock, for the stores' own tests (which cannot name a
/// primitive's). Its scripts are never run.
#[cfg(test)]
pub(crate) static LIMITED_FOR_TESTS: GrantSetKind = GrantSetKind {
    label: "limited",
    noun: "limited grant",
    limited: true,
    marker: None,
    tokens_key: ":limited",
    info_key: ":limited:info",
    revoked_key: ":limited:revoked",
    freed_channel: ":limited:freed",
    scripts: &NO_SCRIPTS,
};

/// A kind kept beside the lock, for the stores' own tests (a read/write lock's readers are a
/// primitive's). Its scripts are never run.
#[cfg(test)]
pub(crate) static BESIDE_FOR_TESTS: GrantSetKind = GrantSetKind {
    label: "beside",
    noun: "grant beside the lock",
    limited: false,
    marker: Some("~beside"),
    tokens_key: ":beside",
    info_key: ":beside:info",
    revoked_key: ":beside:revoked",
    freed_channel: ":released",
    scripts: &NO_SCRIPTS,
};

#[cfg(test)]
static NO_SCRIPTS: LazyLock<GrantSetScripts> = LazyLock::new(|| {
    let none = || super::redis::Lua::assembled("NONE", &["return 0"]);
    GrantSetScripts {
        acquire: none(),
        renew: none(),
        release: none(),
        inspect: none(),
    }
});
