//! The budget of looks a gateway spends on releases Redis does not announce: where releases
//! by other Redis clients come without a message (no keyspace notifications), the heads of
//! waiting lines (`acquire`) and the observers of watched names (`observer`) look at their
//! locks again now and then; each kind shares one budget, so that clients that only wait or
//! watch cannot make a gateway send Redis more than it.

use std::time::Duration;

/// Looks for foreign releases of one kind (the heads of waiting lines; the observers of
/// watched names) that a gateway sends Redis at most, per second, all names together: past
/// that, each name looks less often (10,000 names: every 10 s), so that clients that only
/// wait or watch cannot make a gateway send Redis more (issue 49: 10,000 waiters on 10,000
/// held names made 195,000 scripts a second). Releases through lockgate, grants and expiries
/// at the holder's ttl are still seen at once.
pub const FOREIGN_RELEASE_RECHECKS_PER_SECOND: u32 = 1000;

/// How often each of `sharers` looks for a foreign release: every `every`, or less often when
/// they would together exceed [`FOREIGN_RELEASE_RECHECKS_PER_SECOND`].
pub fn foreign_release_recheck(every: Duration, sharers: usize) -> Duration {
    let sharers = u32::try_from(sharers).unwrap_or(u32::MAX);
    (Duration::from_secs(1) * sharers / FOREIGN_RELEASE_RECHECKS_PER_SECOND).max(every)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_release_looks_share_one_budget() {
        let ms = Duration::from_millis;
        let every = |lines| foreign_release_recheck(Duration::from_millis(50), lines);
        assert_eq!(every(1), ms(50));
        assert_eq!(every(50), ms(50));
        assert_eq!(every(100), ms(100));
        assert_eq!(every(10_000), ms(10_000));
        assert_eq!(foreign_release_recheck(ms(250), 100), ms(250));
        for lines in [1usize, 10, 50, 51, 1000, 10_000, 100_000] {
            // lines / interval <= budget, in whole microseconds.
            let interval_us = every(lines).as_micros();
            let budget = u128::from(FOREIGN_RELEASE_RECHECKS_PER_SECOND);
            assert!(
                lines as u128 * 1_000_000 <= budget * interval_us,
                "{lines} lines, every {interval_us} µs"
            );
        }
    }
}
