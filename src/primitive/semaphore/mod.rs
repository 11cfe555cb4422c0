//! Counting semaphores: up to `permits` grants of one name at a time, each a lease with its
//! own token, fence and ttl, at `/semaphores/{name}`.
//!
//! This folder is the semaphore's: the [`Semaphore`] the lease engine is asked to grant, what
//! anyone may see of one ([`SemaphoreState`]), how the stores keep it ([`store`]: a set of
//! grants with a limit, its Redis scripts beside it), its bodies ([`dto`]), its routes and
//! their handlers ([`http`], registered by one line in `http/mod.rs`). Everything else a
//! lease has (idempotent acquire, validity, WAIT, waiting in line without polling, hold
//! streams, `lockgate run`) comes from the engine unchanged. Waiters of a name form one line
//! per gateway, served first come first served: the head tries when a permit is given back
//! (announced by the release) or when the first permit held runs out.
//!
//! Semaphores cannot be revoked (`DELETE …?force=true` is the lock's).

pub mod dto;
pub mod http;
pub mod store;

use std::num::NonZeroU32;

use crate::backend::{GrantView, Grants, Leased, ListCursor, PageRequest};
use crate::lock::{LockError, LockName, LockService, Primitive};

pub use self::http::ROUTES;
use self::store::PERMITS;

/// Most permits a semaphore may have.
pub const MAX_PERMITS: u32 = 10_000;

/// A semaphore of `permits` permits, as an acquire asks for it (its withdrawal of an
/// undelivered grant acts on that one permit); a held permit's renewal and release are
/// [`HeldPermit`]'s.
#[derive(Debug, Clone, Copy)]
pub struct Semaphore {
    pub permits: NonZeroU32,
}

impl Primitive for Semaphore {
    fn leased<'a>(&'a self, name: &'a LockName) -> Leased<'a> {
        Leased::Grant(&PERMITS, name, self.permits.get())
    }
}

/// A permit already held, as its renewal and release name it: by its token, under whatever
/// limit it was granted (a limit matters to an acquire only).
#[derive(Debug, Clone, Copy, Default)]
pub struct HeldPermit;

impl Primitive for HeldPermit {
    fn leased<'a>(&'a self, name: &'a LockName) -> Leased<'a> {
        Leased::Grant(&PERMITS, name, 0)
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

impl SemaphoreState {
    fn new(Grants { limit, grants }: Grants, waiting: usize) -> Self {
        Self {
            limit,
            permits: grants,
            waiting,
        }
    }
}

/// The limit, permits and holders of the semaphore `name`.
pub async fn inspect(service: &LockService, name: &LockName) -> Result<SemaphoreState, LockError> {
    let (grants, waiting) = service.inspect_grants(&PERMITS, name).await?;
    Ok(SemaphoreState::new(grants, waiting))
}

/// One page of the semaphores with permits held under the request's prefix (see
/// `backend::listing`), as [`LockService::list`] lists locks. Always empty on a store that
/// keeps no semaphores (Redlock).
pub async fn list(
    service: &LockService,
    request: PageRequest<'_>,
) -> Result<(Vec<(LockName, SemaphoreState)>, Option<ListCursor>), LockError> {
    let (found, next) = service.list_grants(&PERMITS, request).await?;
    let semaphores = found
        .into_iter()
        .map(|(name, grants, waiting)| (name, SemaphoreState::new(grants, waiting)))
        .collect();
    Ok((semaphores, next))
}
