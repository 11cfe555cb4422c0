//! [`Semaphore`]: a counting semaphore. Up to `permits` grants of one name at a time, each
//! a lease with its own token, fence and ttl; the backend side is
//! [`crate::backend::semaphore`].
//!
//! Everything else a lease has (idempotent acquire, validity, WAIT, waiting in line without
//! polling, hold streams, `lockgate run`) comes from the engine unchanged. Waiters of a name
//! form one line per gateway, served first come first served: the head tries when a permit
//! is given back (announced by the release) or when the first permit held runs out.
//!
//! Semaphores cannot be revoked (`DELETE …?force=true` is the lock's).

use std::num::NonZeroU32;

use super::primitive::Primitive;
use super::{LockError, LockName, LockService};
use crate::backend::{GrantView, Grants, GrantsOf, LeaseStore, Leased, ListCursor, PageRequest};

/// Most permits a semaphore may have.
pub const MAX_PERMITS: u32 = 10_000;

/// A semaphore of `permits` permits. Renew, release and withdraw act on one permit, whatever
/// the limit: any value serves for them.
#[derive(Debug, Clone, Copy)]
pub struct Semaphore {
    pub permits: NonZeroU32,
}

impl Semaphore {
    /// For operations on a permit already held (the limit does not matter to them).
    pub const ANY: Self = Self {
        permits: NonZeroU32::MIN,
    };
}

impl Primitive for Semaphore {
    fn leased<'a>(&'a self, name: &'a LockName) -> Leased<'a> {
        Leased::Permit(name, self.permits.get())
    }
}

/// What anyone may see of a semaphore. Never a token.
#[derive(Debug, Clone, PartialEq)]
pub struct SemaphoreState {
    /// The limit the current permits were granted under; `None` when none is held.
    pub limit: Option<u32>,
    /// The live permits, in order of expiry.
    pub permits: Vec<GrantView>,
    /// Requests waiting for a permit in this gateway.
    pub waiting: usize,
}

impl LockService {
    /// The limit, permits and holders of the semaphore `name`.
    pub async fn inspect_semaphore(&self, name: &LockName) -> Result<SemaphoreState, LockError> {
        let leased = Semaphore::ANY.leased(name);
        self.check_offered(leased)?;
        let Grants {
            limit,
            grants: permits,
        } = self
            .backend
            .inspect_grants(GrantsOf::Permits, name.as_str())
            .await?;
        Ok(SemaphoreState {
            limit,
            permits,
            waiting: self.waiters.waiting_for(leased.kind(), name.as_str()),
        })
    }

    /// One page of the semaphores with permits held under the request's prefix (see
    /// `backend::listing`), as [`LockService::list`] lists locks. Always empty on a store that
    /// keeps no semaphores (Redlock).
    pub async fn list_semaphores(
        &self,
        request: PageRequest<'_>,
    ) -> Result<(Vec<(LockName, SemaphoreState)>, Option<ListCursor>), LockError> {
        let page = self.backend.list_grants(GrantsOf::Permits, request).await?;
        let semaphores = page
            .found
            .into_iter()
            // A key of another program can look like a permits key; its name may not be one.
            .filter_map(
                |(
                    name,
                    Grants {
                        limit,
                        grants: permits,
                    },
                )| {
                    let name = LockName::from_string(name).ok()?;
                    let waiting = self
                        .waiters
                        .waiting_for(Semaphore::ANY.leased(&name).kind(), name.as_str());
                    Some((
                        name,
                        SemaphoreState {
                            limit,
                            permits,
                            waiting,
                        },
                    ))
                },
            )
            .collect();
        Ok((semaphores, page.next))
    }
}
