//! [`GrantGuard`]: a lock held on behalf of a client that has not been told yet.
//!
//! A grant is only worth something once its client knows the token. Until the caller says
//! the grant was delivered, dropping the guard releases the lock: a request cancelled while
//! its acquire script was in flight (the client hung up), a response that never left the
//! gateway, a hold stream whose client went away. Releasing is always safe because it is
//! compare-and-delete with this request's own token: if the acquire never landed, or the lock
//! changed hands since, the release changes nothing.

use std::sync::Arc;

use super::{LockName, LockToken};
use crate::backend::{Backend, BackendError, LockBackend, ReleaseOutcome};

#[derive(Debug)]
pub struct GrantGuard {
    backend: Arc<Backend>,
    name: LockName,
    token: LockToken,
    armed: bool,
}

impl GrantGuard {
    /// Armed: dropping it releases `name` if `token` holds it.
    pub fn new(backend: Arc<Backend>, name: LockName, token: LockToken) -> Self {
        Self {
            backend,
            name,
            token,
            armed: true,
        }
    }

    /// The client has the grant (or there is none to protect): keep the lock.
    pub fn disarm(mut self) {
        self.armed = false;
    }

    /// Releases now, waiting for the answer.
    pub async fn release(mut self) -> Result<ReleaseOutcome, BackendError> {
        self.armed = false;
        self.backend
            .release(self.name.as_str(), self.token.expose())
            .await
    }
}

impl Drop for GrantGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // Outside a runtime (process exit) there is nobody to send it: the lease then ends at
        // its ttl.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (backend, name, token) = (self.backend.clone(), self.name.clone(), self.token.clone());
        runtime.spawn(async move {
            match backend.release(name.as_str(), token.expose()).await {
                Ok(ReleaseOutcome::Released) => {
                                        tracing::info!(lock = %name, "released the lock of a client that went away");
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!(lock = %name, error = %err, "could not release an undelivered grant; it expires at its ttl");
                }
            }
        });
    }
}
