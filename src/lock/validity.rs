//! Validity: how long the gateway may promise a lease still lasts.
//!
//! The store starts a lease at some instant between sending the request and reading the reply,
//! and the gateway cannot know which. Counting the lease from *before the request was sent* is
//! the only safe choice: the promise then ends no later than the real expiry, whatever the
//! network and the store did in between. The `ttl_ms` a client receives is what is left of that
//! promise when the response is built, never what it asked for.
//!
//! A `drift` allowance covers clocks that run at different rates (Redlock's 0.01 × ttl + 2 ms);
//! a single store needs none, because the store's own timer is the only clock involved.

use std::time::Duration;

use tokio::time::Instant;

/// The instant until which a lease is known to be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    until: Instant,
}

impl Validity {
    /// The validity of a lease of `ttl` (as the store reported it) requested at `started`,
    /// less `drift`; `None` if nothing is left at `now`.
    pub fn of_lease(
        started: Instant,
        ttl: Duration,
        drift: Duration,
        now: Instant,
    ) -> Option<Self> {
        let until = started + ttl.saturating_sub(drift);
        (until > now).then_some(Self { until })
    }

    /// The instant the promise ends.
    pub fn until(&self) -> Instant {
        self.until
    }

    /// This promise, ended at `until` if that comes first.
    pub fn at_most(self, until: Instant) -> Self {
        Self {
            until: self.until.min(until),
        }
    }

    /// Time left at `now` (zero once past).
    pub fn remaining(&self, now: Instant) -> Duration {
        self.until.saturating_duration_since(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn validity_counts_from_the_request_not_from_the_reply() {
        let started = Instant::now();
        let now = started + 120 * MS;
        let v = Validity::of_lease(started, 1000 * MS, Duration::ZERO, now).expect("valid");
        assert_eq!(v.remaining(now), 880 * MS);
    }

    #[test]
    fn drift_is_subtracted() {
        let started = Instant::now();
        let v = Validity::of_lease(started, 1000 * MS, 12 * MS, started).expect("valid");
        assert_eq!(v.remaining(started), 988 * MS);
    }

    #[test]
    fn a_lease_used_up_by_the_round_trip_has_no_validity() {
        let started = Instant::now();
        assert_eq!(
            Validity::of_lease(started, 100 * MS, Duration::ZERO, started + 100 * MS),
            None
        );
        assert_eq!(
            Validity::of_lease(started, 100 * MS, Duration::ZERO, started + 250 * MS),
            None
        );
        assert_eq!(Validity::of_lease(started, 10 * MS, 20 * MS, started), None);
    }

    #[test]
    fn remaining_never_goes_negative() {
        let started = Instant::now();
        let v = Validity::of_lease(started, 50 * MS, Duration::ZERO, started).expect("valid");
        assert_eq!(v.remaining(started + 80 * MS), Duration::ZERO);
    }
}
