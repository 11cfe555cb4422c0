//! How the stores keep a semaphore: [`PERMITS`], a set of grants with a limit (see
//! `backend::grant_set`), and its scripts (`permit_*.lua`, in this folder).
//!
//! At most `limit` grants (permits) of one name at a time, each a lease of its own with a
//! token `<stem>.<fence>`, renewed and released by its holder alone. Acquire takes a permit if
//! fewer than `limit` are held (finding its own again on an idempotent retry), renew and
//! release act on the permit a token holds, withdraw undoes an undelivered grant. Expired
//! permits are reclaimed by the next operation on the name: no sweeper is needed for the
//! count to be right. The limit belongs to the current holders: the first grant of a free
//! semaphore sets it, and a request that names another while permits are held is refused
//! (`AcquireOutcome::LimitDiffers`), so two deployments that disagree cannot both be right at
//! once.
//!
//! Fences come from the same counter as the lock's (per server, or per hash slot in a
//! Cluster): strictly increasing per name in grant order, across every permit.
//!
//! On Redis, per name, two keys in the name's hash slot:
//!
//! * `<prefix>{<name>}:permits`, a sorted set: one member per permit, its token, scored by the
//!   permit's expiry (ms, Redis `TIME`);
//! * `<prefix>{<name>}:semaphore`, a hash: `limit`, `claim:<stem>` for idempotent grants,
//!   `holder:<token>` for permits that name a holder.
//!
//! Both expire with the permit that runs longest; the last release deletes them. Expired
//! members are reclaimed by the next acquire. A permit given back is announced on
//! `<prefix>{<name>}:permits:freed`. `redis-cli ZRANGE <key> 0 -1 WITHSCORES` shows the
//! permits, `HGETALL` the rest. The memory store keeps the same in a map. Redlock does not
//! offer semaphores (`Backend::offers`).

use std::sync::LazyLock;

use crate::backend::GrantSetKind;
use crate::backend::redis::{GrantSetScripts, OwnScripts};

/// A semaphore's permits, as every store keeps them.
pub static PERMITS: GrantSetKind = GrantSetKind {
    label: "semaphore",
    noun: "semaphore",
    limited: true,
    marker: None,
    tokens_key: ":permits",
    info_key: ":semaphore",
    revoked_key: ":permits:revoked",
    freed_channel: ":permits:freed",
    scripts: &SCRIPTS,
};

static SCRIPTS: LazyLock<GrantSetScripts> = LazyLock::new(|| {
    GrantSetScripts::assembled(OwnScripts {
        acquire: ("PERMIT_ACQUIRE", include_str!("permit_acquire.lua")),
        renew: ("PERMIT_RENEW", include_str!("permit_renew.lua")),
        release: ("PERMIT_RELEASE", include_str!("permit_release.lua")),
        inspect: ("PERMIT_INSPECT", include_str!("permit_inspect.lua")),
    })
});
