//! Log lines about a failure that repeats (Redis down, every request refused) written at most
//! once per cause per window, with how many were left out since: while a store is down, the
//! log says so a few times, not once per request or per retry.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The window of the throttles the gateway uses.
pub const WINDOW: Duration = Duration::from_secs(10);

/// Admits one line per cause per window.
#[derive(Debug)]
pub struct Throttle {
    every: Duration,
    /// Per cause: when its last line was written, and how many were left out since.
    causes: Mutex<Vec<(&'static str, Instant, u64)>>,
}

impl Throttle {
    pub const fn new(every: Duration) -> Self {
        Self {
            every,
            causes: Mutex::new(Vec::new()),
        }
    }

    /// Whether a line about `cause` may be written now: `Some(lines left out since the last
    /// one)`, or `None` (and this one is counted as left out).
    pub fn admit(&self, cause: &'static str) -> Option<u64> {
        let now = Instant::now();
        let mut causes = self.causes.lock().unwrap_or_else(|p| p.into_inner());
        match causes.iter_mut().find(|(known, ..)| *known == cause) {
            Some((_, last, left_out)) if now.duration_since(*last) < self.every => {
                *left_out += 1;
                None
            }
            Some((_, last, left_out)) => {
                *last = now;
                Some(std::mem::take(left_out))
            }
            None => {
                causes.push((cause, now, 0));
                Some(0)
            }
        }
    }

    /// Forgets `cause` (it is over: the next line about it is written at once), returning how
    /// many lines about it were left out since the last one.
    pub fn clear(&self, cause: &'static str) -> u64 {
        let mut causes = self.causes.lock().unwrap_or_else(|p| p.into_inner());
        match causes.iter().position(|(known, ..)| *known == cause) {
            Some(i) => causes.swap_remove(i).2,
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_cause_per_window_with_a_count() {
        let throttle = Throttle::new(Duration::from_millis(50));
        assert_eq!(throttle.admit("a"), Some(0));
        assert_eq!(throttle.admit("a"), None);
        assert_eq!(throttle.admit("a"), None);
        assert_eq!(throttle.admit("b"), Some(0), "causes are apart");
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(throttle.admit("a"), Some(2));
        assert_eq!(throttle.admit("a"), None);
        assert_eq!(throttle.clear("a"), 1);
        assert_eq!(throttle.admit("a"), Some(0), "cleared: at once");
    }
}
