//! The lock domain: names, tokens, validity, request bounds, errors, and the service that ties
//! them to a backend. No HTTP here (status codes belong to `http`), and no Redis (that belongs
//! to `backend`).

pub mod acquire;
mod attempt;
mod budget;
pub mod contention;
pub mod cursor;
pub mod error;
pub mod events;
mod fair;
mod fair_lines;
pub mod guard;
pub mod hold;
pub mod inspect;
pub mod multi;
mod observer;
pub mod prefix_events;
pub mod primitive;
mod promise;
pub mod reentrant;
pub mod renew_release;
pub mod request;
pub mod service;
pub mod token;
pub mod validity;
pub mod wait;

pub use crate::name::{InvalidName, LockName};
pub use cursor::{CursorScope, CursorSeal, ListPosition};
pub use error::{HoldBackCause, InvalidRequest, LockError};
pub use guard::GrantGuard;
pub use inspect::LockState;
pub use multi::Multi;
pub use primitive::{Exclusive, Primitive};
pub use reentrant::Reentry;
pub use renew_release::{Released, Renewal};
pub use request::{LeaseRequest, Limits, RawLease, RawReplicas, RenewRequest};
pub use service::{Grant, LockService};
pub use token::{IdempotencyKey, LockToken, TokenSecret, TokenStem};
pub use validity::Validity;

pub use crate::backend::millis;
