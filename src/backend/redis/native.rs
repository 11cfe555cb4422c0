//! The lock's release and renewal by native commands where the connected server has them
//! (`DELIFEQ`, `DELEX … IFEQ`, `SET … IFEQ … GET`; `features.rs` says which server has which,
//! and how the semantics stay the scripts'). A refusal switches the connection back to the
//! scripts of `lock.rs`.

use std::time::Duration;

use super::RedisBackend;
use super::features::{Downgradable, ReleaseVia};
use super::keys::LockKeys;
use crate::backend::marks::Marks;
use crate::backend::{BackendError, Lease, ReleaseOutcome, RenewOutcome, millis};

impl RedisBackend {
    /// Releases the lock with `DELIFEQ` or `DELEX … IFEQ` (see [`ReleaseVia`]); `None` when
    /// `via` is the script, or the server refused the command (the script then).
    pub(super) async fn release_natively(
        &self,
        keys: LockKeys<'_>,
        token: &str,
        via: ReleaseVia,
    ) -> Result<Option<ReleaseOutcome>, BackendError> {
        let mut pipe = redis::pipe();
        match via {
            ReleaseVia::DelIfEq => pipe.cmd("DELIFEQ").arg(keys.lock()).arg(token),
            ReleaseVia::DelEx => pipe.cmd("DELEX").arg(keys.lock()).arg("IFEQ").arg(token),
            ReleaseVia::Lua => return Ok(None),
        };
        // Announced also when nothing was deleted: a spurious wake-up costs a waiter one look.
        pipe.cmd("PUBLISH").arg(keys.channel()).arg("").ignore();
        let refused = |state: &Downgradable| state.release_refused();
        let Some((deleted,)) = self.native::<(i64,)>(&pipe, refused).await? else {
            return Ok(None);
        };
        if deleted == 1 {
            return Ok(Some(ReleaseOutcome::Released));
        }
        // Not deleted: nobody holds it, or another token does. (Whatever holds it now answers
        // for the instant of this look, which is within the request.)
        let mut look = redis::pipe();
        look.cmd("EXISTS").arg(keys.lock());
        let refused_look = |_: &Downgradable| {};
        let exists = self.native::<(bool,)>(&look, refused_look).await?;
        Ok(Some(match exists {
            Some((true,)) => ReleaseOutcome::NotOwner,
            _ => ReleaseOutcome::NotHeld,
        }))
    }

    /// Renews the lock with `SET … IFEQ … GET`; `None` when the server refused it (the
    /// script then).
    pub(super) async fn renew_natively(
        &self,
        keys: LockKeys<'_>,
        token: &str,
        fence: u64,
        ttl: Duration,
    ) -> Result<Option<RenewOutcome>, BackendError> {
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(keys.lock())
            .arg(token)
            .arg("IFEQ")
            .arg(token)
            .arg("PX")
            .arg(millis(ttl))
            .arg("GET");
        // The holder record, if the token says the grant has one, keeps the lock's ttl. Not
        // atomic with the renewal, hence GT: it can only lengthen a record's life (by at most
        // one ttl, if this token no longer holds the lock), never cut short the record of a
        // live grant.
        let marks = Marks::of(token);
        let records = [
            (marks.holder, keys.holder()),
            (marks.reentrant, keys.holds()),
        ];
        for (_, record) in records.iter().filter(|(kept, _)| *kept) {
            pipe.cmd("PEXPIRE")
                .arg(record)
                .arg(millis(ttl))
                .arg("GT")
                .ignore();
        }
        let refused = |state: &Downgradable| state.renew_refused();
        let Some((previous,)) = self.native::<(Option<Vec<u8>>,)>(&pipe, refused).await? else {
            return Ok(None);
        };
        Ok(Some(match previous {
            None => RenewOutcome::NotHeld,
            Some(held) if held == token.as_bytes() => RenewOutcome::Renewed(Lease {
                fence,
                ttl,
                replicas_acked: None,
            }),
            Some(_) => RenewOutcome::NotOwner,
        }))
    }
}
