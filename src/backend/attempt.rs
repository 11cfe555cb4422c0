//! One attempt at a grant: what the lease engine asks of a store, for every primitive.

use std::time::Duration;

use super::{Claim, Holder, ReplicaAck};

/// One attempt at a grant, as every store's acquire takes it (a lock, a shared grant, a
/// permit, a set of locks): the lease engine's request, reduced to what the store needs.
#[derive(Debug, Clone, Copy)]
pub struct GrantAttempt<'a> {
    /// The gateway's part of the token: a new grant's token is `<stem>.<fence>`, and a grant
    /// already held by a token of this stem is found again (an idempotent retry).
    pub stem: &'a str,
    /// How long the grant lasts.
    pub ttl: Duration,
    /// Replicas to wait for after the write (`WAIT`), if asked.
    pub ack: Option<ReplicaAck>,
    /// The attempt that claims the grant (see [`Claim`]), for idempotent acquires.
    pub claim: Option<Claim>,
    /// Who holds it, kept beside a new grant.
    pub holder: Option<&'a Holder>,
}

/// What a [`GrantAttempt`] holds, in its fields' order.
pub type GrantParts<'a> = (
    &'a str,
    Duration,
    Option<ReplicaAck>,
    Option<Claim>,
    Option<&'a Holder>,
);

impl<'a> GrantAttempt<'a> {
    /// Its parts, for a store that hands them on one by one: `let (stem, ttl, ack, claim,
    /// holder) = attempt.parts();` (the five types differ: a wrong order does not compile).
    pub fn parts(self) -> GrantParts<'a> {
        (self.stem, self.ttl, self.ack, self.claim, self.holder)
    }

    /// A plain attempt: no replicas, no claim, no holder.
    pub fn new(stem: &'a str, ttl: Duration) -> Self {
        Self {
            stem,
            ttl,
            ack: None,
            claim: None,
            holder: None,
        }
    }
}
