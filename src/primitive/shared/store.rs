//! How the stores keep a read/write lock's readers: [`READERS`], a set of grants kept beside
//! the lock (see `backend::grant_set`), and its scripts (`shared_*.lua`, in this folder).
//!
//! Readers are kept beside the lock, not instead of it: while any reader holds the name, the
//! lock key holds the marker [`SHARED_MARKER`] (with the lease of the longest reader), so an
//! exclusive acquire, lockgate's or any `SET NX` client's, finds the name held, without
//! looking anywhere else. The last reader to go deletes the marker and announces the release
//! as an exclusive holder's release does, which wakes waiting writers.
//!
//! No writer starvation: a waiting writer that finds readers asks that no new reader be let
//! in for as long as it waits (`LeaseStore::hold_off`); the readers already in finish, the
//! writer gets the lock, and lifts the hold-off. New readers wait meanwhile.
//!
//! Fences come from the name's counter, as every grant's: a reader's fence is greater than
//! every fence granted before it, and a writer's greater than every reader's before it. So a
//! resource that remembers the greatest fence it has seen refuses a reader whose lease ended
//! before a writer took over (its fence is smaller than the writer's).
//!
//! On Redis, per name, beside the lock key (which holds `~shared` meanwhile), in the name's
//! hash slot:
//!
//! * `<prefix>{<name>}:readers`, a sorted set of the readers' tokens scored by expiry;
//! * `<prefix>{<name>}:readers:info`, a hash of claims and holder records;
//! * `<prefix>{<name>}:writer-waiting`, present while a writer waits: no new reader (the
//!   store's hold-off, for any set kept beside a lock).
//!
//! All gone when the last reader goes (the hold-off when its writer gets the lock or its wait
//! ends). Redlock does not offer shared grants (`Backend::offers`).

use std::sync::LazyLock;

use crate::backend::GrantSetKind;
use crate::backend::redis::{GrantSetScripts, OwnScripts};

/// The lock key's value while readers hold the name. Never a token (tokens have no `~`):
/// the stores read any value that begins with `~` as a set's marker.
pub const SHARED_MARKER: &str = "~shared";

/// How the stores keep a read/write lock's readers: beside the lock, with no limit.
pub static READERS: GrantSetKind = GrantSetKind {
    label: "shared",
    noun: "shared lock",
    limited: false,
    marker: Some(SHARED_MARKER),
    tokens_key: ":readers",
    info_key: ":readers:info",
    revoked_key: ":readers:revoked",
    // Announced as the lock's release (it is kept beside the lock).
    freed_channel: ":released",
    scripts: &SCRIPTS,
};

static SCRIPTS: LazyLock<GrantSetScripts> = LazyLock::new(|| {
    GrantSetScripts::assembled(OwnScripts {
        acquire: ("SHARED_ACQUIRE", include_str!("shared_acquire.lua")),
        renew: ("SHARED_RENEW", include_str!("shared_renew.lua")),
        release: ("SHARED_RELEASE", include_str!("shared_release.lua")),
        inspect: ("SHARED_INSPECT", include_str!("shared_inspect.lua")),
    })
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::marks::is_marker;

    /// The stores and the lock's scripts read a value beginning with `~` as a marker (and no
    /// token has one): the readers' marker must be one.
    #[test]
    fn the_readers_marker_is_read_as_a_marker() {
        assert!(is_marker(SHARED_MARKER));
        assert_eq!(READERS.marker, Some(SHARED_MARKER));
    }
}
