//! The time of day as the gateway reads it (a grant's age, a bounded hold's deadline, an
//! answer's `expires_at`), in one place so that the deterministic simulation can set it.
//! Durations and deadlines are tokio's `Instant`, which a paused runtime already simulates;
//! the time of day is the machine's, unless the current thread runs a simulated world
//! ([`simulate`]: a world runs on one thread, so each keeps its own clock).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::SystemTime;

thread_local! {
    static SIMULATED: RefCell<Option<Rc<dyn Fn() -> SystemTime>>> = const { RefCell::new(None) };
}

/// Now: the machine's clock, or the simulated one of this thread's world.
pub fn now() -> SystemTime {
    SIMULATED
        .with(|simulated| simulated.borrow().clone())
        .map_or_else(SystemTime::now, |clock| clock())
}

/// Makes `clock` this thread's time of day until the returned guard is dropped (the
/// simulation's worlds; nothing else calls it).
pub fn simulate(clock: impl Fn() -> SystemTime + 'static) -> Simulated {
    SIMULATED.with(|simulated| *simulated.borrow_mut() = Some(Rc::new(clock)));
    Simulated(())
}

/// While it lives, this thread reads a simulated time of day.
#[derive(Debug)]
#[must_use = "the simulated clock ends when this is dropped"]
pub struct Simulated(());

impl Drop for Simulated {
    fn drop(&mut self) {
        SIMULATED.with(|simulated| *simulated.borrow_mut() = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn a_simulated_clock_is_this_threads_until_dropped() {
        let at = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let guard = simulate(move || at);
        assert_eq!(now(), at);
        let elsewhere = std::thread::spawn(now).join().expect("a thread");
        assert_ne!(elsewhere, at);
        drop(guard);
        assert_ne!(now(), at);
    }
}
