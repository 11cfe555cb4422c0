//! [`GrantGuard`]: a lock held on behalf of a client that has not been told yet.
//!
//! A grant is only worth something once its client knows the token. Until the caller says
//! the grant was delivered, dropping the guard withdraws the grant: a request cancelled while
//! its acquire script was in flight (the client hung up), a response that never left the
//! gateway, a hold stream whose client went away. Withdrawing is always safe: it deletes the
//! lock only if a token of this attempt's stem holds it (and, for a stem several attempts
//! share, only while this attempt's claim is the grant's last), so it can neither touch another
//! client's grant nor a later attempt's, whenever it reaches the store.

use std::sync::Arc;

use super::primitive::Primitive;
use super::{LockName, LockToken, TokenStem};
use crate::backend::{Backend, BackendError, Claim, LeaseStore, Withdrawal};

#[derive(Debug)]
pub struct GrantGuard<P: Primitive> {
    backend: Arc<Backend>,
    primitive: P,
    name: LockName,
    stem: TokenStem,
    claim: Option<Claim>,
    armed: bool,
    /// Not 0: dropped, release the grant of this fence (its token is the stem and the fence;
    /// its holder had it and went away) instead of withdrawing it: a release keeps a grant's
    /// minimum hold, a withdrawal does not. A fence, not the token, to keep every waiting
    /// request's future small.
    release_fence: u64,
}

impl<P: Primitive> GrantGuard<P> {
    /// Armed: dropping it withdraws the grant of `stem` (and `claim`) on `name`, if any.
    pub fn new(
        backend: Arc<Backend>,
        primitive: P,
        name: LockName,
        stem: TokenStem,
        claim: Option<Claim>,
    ) -> Self {
        Self {
            backend,
            primitive,
            name,
            stem,
            claim,
            armed: true,
            release_fence: 0,
        }
    }

    /// The grant was delivered to a holder that keeps it only as long as it stays (a hold
    /// stream): dropped, the guard releases it with `token`, as the holder would have. Only a
    /// grant with a minimum hold needs it (the release then leaves it held until then); any
    /// other is withdrawn just as well.
    pub fn release_on_drop(&mut self, token: &LockToken) {
        if token.min_hold().is_some() {
            self.release_fence = token.fence();
        }
    }

    /// The client has the grant (or there is none to protect): keep the lock.
    pub fn disarm(mut self) {
        self.armed = false;
    }

    /// Withdraws now, waiting for the answer: true if a grant was withdrawn.
    pub async fn withdraw(mut self) -> Result<bool, BackendError> {
        self.armed = false;
        let leased = self.primitive.leased(&self.name);
        let withdrawal = Withdrawal {
            stem: self.stem.expose(),
            claim: self.claim,
        };
        self.backend.withdraw(leased, withdrawal).await
    }
}

impl<P: Primitive> Drop for GrantGuard<P> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // Outside a runtime (process exit) there is nobody to send it: the lease then ends at
        // its ttl.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (backend, primitive, name, stem, claim) = (
            self.backend.clone(),
            self.primitive.clone(),
            self.name.clone(),
            self.stem.clone(),
            self.claim,
        );
        if self.release_fence != 0 {
            let token = crate::backend::fence::token(stem.expose(), self.release_fence);
            runtime.spawn(async move {
                let leased = primitive.leased(&name);
                if let Err(err) = backend.release(leased, &token).await {
                    tracing::warn!(lock = %name, error = %err, "could not release the grant of a holder that went away; it expires at its ttl");
                }
            });
            return;
        }
        runtime.spawn(async move {
            let leased = primitive.leased(&name);
            let withdrawal = Withdrawal {
                stem: stem.expose(),
                claim,
            };
            match backend.withdraw(leased, withdrawal).await {
                Ok(true) => {
                    tracing::info!(lock = %name, kind = leased.kind(), "released the grant of a client that went away");
                }
                Ok(false) => {}
                Err(err) => {
                    tracing::warn!(lock = %name, error = %err, "could not release an undelivered grant; it expires at its ttl");
                }
            }
        });
    }
}
