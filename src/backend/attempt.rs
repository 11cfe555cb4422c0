//! What a client asks of a grant, and one attempt at it: the request the lease engine builds
//! once from a request body and carries, by reference, to the store.

use std::sync::Arc;
use std::time::Duration;

use super::{Claim, Holder, QueuePlace, ReplicaAck};

/// Default `replica_timeout_ms`.
pub const DEFAULT_REPLICA_TIMEOUT: Duration = Duration::from_millis(100);

/// What a client asked of a grant, within the server's bounds (`lock::request` checks them and
/// fills in the defaults): the same for every kind of lease, from the HTTP body to the store.
/// A new lease option is a field here, read where it matters, not a parameter added to every
/// signature on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseRequest {
    pub ttl: Duration,
    /// How long to wait for a held lease; zero tries once.
    pub wait: Duration,
    pub replicas: ReplicaPolicy,
    /// Who the grant is for, kept beside it and shown by inspect (see [`Holder`]).
    pub holder: Option<Arc<Holder>>,
    /// Longest the grant may be held, renewals included (see `lock::token` for how it is kept).
    pub max_hold: Option<Duration>,
    /// Shortest the grant is held, in ms (0: none): a release before it leaves the lock held
    /// until then (`min_hold_ms`, kept in the token as `max_hold` is). A `u32` that fits in
    /// this struct's padding: a waiting request keeps the request in its future.
    pub min_hold_ms: u32,
    /// A reentrant lock: its holder may take it again with its token (`reenter`), each time
    /// one more release to give it back.
    pub reentrant: bool,
    /// A fair waiter's priority (0 to 9, higher first): it waits in the name's queue, kept by
    /// the store for every gateway (see [`super::queue`]). `None`: not fair.
    pub fair: Option<u8>,
}

impl LeaseRequest {
    /// A request for `ttl` and nothing else: no wait, no replicas, no holder, no bound.
    pub fn for_ttl(ttl: Duration) -> Self {
        Self {
            ttl,
            wait: Duration::ZERO,
            replicas: ReplicaPolicy::NONE,
            holder: None,
            max_hold: None,
            min_hold_ms: 0,
            reentrant: false,
            fair: None,
        }
    }
}

/// Replica acknowledgement a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaPolicy {
    pub replicas: u32,
    pub timeout: Duration,
    /// Fail (and, on acquire, release the lock) when fewer than `replicas` acknowledge.
    pub required: bool,
}

impl ReplicaPolicy {
    pub const NONE: Self = Self {
        replicas: 0,
        timeout: DEFAULT_REPLICA_TIMEOUT,
        required: false,
    };

    /// The `WAIT` to send, if any.
    pub fn ack(&self) -> Option<ReplicaAck> {
        (self.replicas > 0).then_some(ReplicaAck {
            replicas: self.replicas,
            timeout: self.timeout,
        })
    }
}

/// One attempt at a grant, as every store's acquire takes it (a lock, a shared grant, a
/// permit, a set of locks): the request, and what this attempt adds to it.
#[derive(Debug, Clone, Copy)]
pub struct GrantAttempt<'a> {
    /// The gateway's part of the token: a new grant's token is `<stem>.<fence>`, and a grant
    /// already held by a token of this stem is found again (an idempotent retry).
    pub stem: &'a str,
    /// The attempt that claims the grant (see [`Claim`]), for idempotent acquires.
    pub claim: Option<Claim>,
    pub request: &'a LeaseRequest,
    /// A fair waiter's place in the name's queue (a lock's only): the attempt takes it, or
    /// keeps it, and is granted only at the head (see [`super::queue`]).
    pub queue: Option<QueuePlace>,
}

impl<'a> GrantAttempt<'a> {
    /// An attempt with a stem of its own and no claim.
    pub fn new(stem: &'a str, request: &'a LeaseRequest) -> Self {
        Self {
            stem,
            claim: None,
            request,
            queue: None,
        }
    }

    /// What undoes this attempt's grant, if it made one that is never delivered.
    pub fn withdrawal(&self) -> Withdrawal<'a> {
        Withdrawal {
            stem: self.stem,
            claim: self.claim,
        }
    }

    /// Whether `token`, held now, is a grant of this attempt's idempotency key for another kind
    /// of grant ([`key_reused`](super::fence::key_reused)): asked by idempotent attempts only
    /// (a claim), as the scripts ask.
    pub fn key_reused_by(&self, token: &str) -> bool {
        self.claim.is_some() && super::fence::key_reused(token, self.stem)
    }

    /// The lease asked for.
    pub fn ttl(&self) -> Duration {
        self.request.ttl
    }

    /// The `WAIT` to send after the grant, if any.
    pub fn ack(&self) -> Option<ReplicaAck> {
        self.request.replicas.ack()
    }

    /// The holder to keep beside a new grant, if it names anything (an empty record is not
    /// kept).
    pub fn holder(&self) -> Option<&'a Holder> {
        self.request.holder.as_deref().filter(|h| !h.is_empty())
    }

    /// The `owner` the holder sent, if any: what a fair queue shows of its waiter.
    pub fn owner(&self) -> Option<&'a str> {
        self.holder().and_then(|h| h.owner.as_deref())
    }
}

/// A grant to undo, as every store's withdraw takes it: one an attempt may have made but never
/// delivered (its answer was lost, or its client went away), whose fence the gateway may not
/// know.
#[derive(Debug, Clone, Copy)]
pub struct Withdrawal<'a> {
    /// The stem of the attempt's token: the grant of a token of this stem is withdrawn.
    pub stem: &'a str,
    /// The attempt's claim, for an idempotent one: the grant is withdrawn only while this is
    /// still its last claim (see [`Claim`]), so that a retry that found it keeps it.
    pub claim: Option<Claim>,
}

impl Withdrawal<'_> {
    /// Whether it withdraws a grant held by `token` and last claimed by `claim`.
    pub fn takes(&self, token: &str, claim: Option<Claim>) -> bool {
        super::fence::has_stem(token, self.stem) && (self.claim.is_none() || claim == self.claim)
    }
}

/// One renewal of a grant, as every store's renew takes it.
#[derive(Debug, Clone, Copy)]
pub struct RenewAttempt<'a> {
    /// The token that holds the grant: only it is renewed.
    pub token: &'a str,
    /// The new ttl, counted from now.
    pub ttl: Duration,
    /// Replicas to wait for after the write (`WAIT`), if asked.
    pub ack: Option<ReplicaAck>,
    /// The holder takes the grant once more (a reentrant lock's, whose token carries the
    /// reentrant mark): one more hold, to be given back by one more release, and the lease
    /// made to last at least `ttl`, never shortened ([`RenewOutcome::Reentered`](super::RenewOutcome::Reentered)).
    /// Only a lock's grant can be reentrant; the other kinds' renewals never ask.
    pub one_more_hold: bool,
}
