//! The fence rule every backend applies on a grant.
//!
//! A fence is a per-name number that strictly increases with every grant, so that a resource
//! protected by the lock can refuse a write carrying a smaller fence than one it has already
//! seen (a holder that was paused past its lease). The rule is
//!
//! ```text
//! fence = max(previous + 1, now in microseconds since the Unix epoch)
//! ```
//!
//! where `previous` is the per-name counter (0 when it is missing) and `now` is the store's
//! clock (Redis `TIME` inside the acquire script). The counter is kept with a retention ttl
//! (default 7 days) so counters of millions of short-lived names do not pile up.
//!
//! Why the clock term: the counter alone stops being monotonic when it is lost — evicted,
//! expired after its retention, deleted by hand, or lost with the last writes of a master that
//! failed over. With the clock term a lost counter restarts at "now", which is above every
//! fence issued before, under one assumption: **the store's wall clock does not go backwards
//! across the loss** (the new master's clock is not behind the time the last fence was issued
//! by more than the time that has passed since). NTP-disciplined clocks that slew, and
//! failovers that take longer than any step, satisfy it; a clock stepped back by hours does
//! not. While the counter exists the rule needs no clock at all: `previous + 1` suffices.
//!
//! The Lua twin of [`next_fence`] is `scripts/fence.lua`; the two must stay identical.

/// The fence of the next grant, given the previous one (0 when unknown) and the clock.
pub fn next_fence(previous: u64, now_micros: u64) -> u64 {
    previous.saturating_add(1).max(now_micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_follows_the_clock_when_the_counter_is_behind() {
        assert_eq!(next_fence(10, 1_700_000_000_000_000), 1_700_000_000_000_000);
    }

    #[test]
    fn a_grant_in_the_same_microsecond_still_increases() {
        assert_eq!(
            next_fence(1_700_000_000_000_000, 1_700_000_000_000_000),
            1_700_000_000_000_001
        );
    }

    #[test]
    fn a_clock_behind_the_counter_cannot_lower_the_fence() {
        assert_eq!(
            next_fence(1_700_000_000_000_005, 1_600_000_000_000_000),
            1_700_000_000_000_006
        );
    }

    #[test]
    fn a_lost_counter_restarts_at_the_clock_above_earlier_fences() {
        let before = next_fence(0, 1_700_000_000_000_000);
        let after_loss = next_fence(0, 1_700_000_000_000_100);
        assert!(after_loss > before);
    }
}
