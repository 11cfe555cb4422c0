//! Shared grants of read/write locks: many readers at once, each with a lease (token, fence,
//! ttl) of its own, excluding the exclusive lock of the same name and excluded by it.
//!
//! Readers are kept beside the lock, not instead of it: while any reader holds the name, the
//! lock key holds the marker [`SHARED_MARKER`] (with the lease of the longest reader), so an
//! exclusive acquire, lockgate's or any `SET NX` client's, finds the name held, without
//! looking anywhere else. The last reader to go deletes the marker and announces the release
//! as an exclusive holder's release does, which wakes waiting writers.
//!
//! No writer starvation: a waiting writer that finds readers asks that no new reader be let
//! in for as long as it waits ([`LeaseStore::hold_off`](super::LeaseStore::hold_off)); the readers already in
//! finish, the writer gets the lock, and lifts the hold-off. New readers wait meanwhile.
//!
//! Fences come from the name's counter, as every grant's: a reader's fence is greater than
//! every fence granted before it, and a writer's greater than every reader's before it. So a
//! resource that remembers the greatest fence it has seen refuses a reader whose lease ended
//! before a writer took over (its fence is smaller than the writer's).
//!
//! Redlock does not offer shared grants ([`Backend::offers`](super::Backend::offers)).
//!
//! The readers are the set of grants kept beside the lock ([`READERS`], see
//! [`grant_set`](super::grant_set)): acquired, renewed, released, withdrawn, inspected and
//! listed as every such set is, their acquire looking at the lock first.

use std::sync::LazyLock;

use super::grant_set::GrantSetKind;
use super::redis::{GrantSetScripts, OwnScripts};

/// The lock key's value while readers hold the name. Never a token (tokens have no `~`).
pub const SHARED_MARKER: &str = "~shared";

/// How the stores keep a read/write lock's readers: beside the lock, with no limit.
pub static READERS: GrantSetKind = GrantSetKind {
    label: super::kinds::SHARED,
    noun: "shared lock",
    limited: false,
    beside_lock: true,
    tokens_key: ":readers",
    info_key: ":readers:info",
    // Announced as the lock's release (`beside_lock`).
    freed_channel: ":released",
    scripts: &READER_SCRIPTS,
};

static READER_SCRIPTS: LazyLock<GrantSetScripts> = LazyLock::new(|| {
    GrantSetScripts::assembled(OwnScripts {
        acquire: ("SHARED_ACQUIRE", include_str!("scripts/shared_acquire.lua")),
        renew: ("SHARED_RENEW", include_str!("scripts/shared_renew.lua")),
        release: ("SHARED_RELEASE", include_str!("scripts/shared_release.lua")),
        inspect: ("SHARED_INSPECT", include_str!("scripts/shared_inspect.lua")),
    })
});
