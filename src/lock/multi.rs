//! [`Multi`]: several locks taken under one token and ttl, all or none; renewed and released
//! together. The backend side, and why it cannot deadlock, is [`crate::backend::multi`].
//!
//! The engine knows a lease by one name: a set is known by its first name (in sorted order),
//! which is also where its waiting line is kept; a waiter wakes at the release of any name of
//! its set.

use std::sync::Arc;

use super::primitive::Primitive;
use super::{InvalidRequest, LockName};
use crate::backend::Leased;

/// Fewest and most names in a set.
pub const MIN_NAMES: usize = 2;
pub const MAX_NAMES: usize = 64;

/// A set of lock names, sorted and distinct.
#[derive(Debug, Clone)]
pub struct Multi {
    names: Arc<[LockName]>,
}

impl Multi {
    /// The set of `names` (2 to 64, distinct). The order given does not matter.
    pub fn new(mut names: Vec<LockName>) -> Result<Self, InvalidRequest> {
        names.sort_unstable_by(|a, b| a.as_str().cmp(b.as_str()));
        names.dedup_by(|a, b| a.as_str() == b.as_str());
        if !(MIN_NAMES..=MAX_NAMES).contains(&names.len()) {
            return Err(InvalidRequest {
                field: "names",
                message: format!("must be {MIN_NAMES} to {MAX_NAMES} distinct lock names"),
            });
        }
        Ok(Self {
            names: names.into(),
        })
    }

    /// The name the engine knows the set by: its first.
    pub fn first(&self) -> &LockName {
        &self.names[0]
    }

    pub fn names(&self) -> &[LockName] {
        &self.names
    }
}

impl Primitive for Multi {
    fn leased<'a>(&'a self, _: &'a LockName) -> Leased<'a> {
        Leased::Set(&self.names)
    }
}
