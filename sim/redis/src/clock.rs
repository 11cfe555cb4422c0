//! The server's wall clock: simulated, moved only by its owner (the simulation's world, or a
//! comparison test that sets it to the real server's frozen clock). What Redis reads from
//! `gettimeofday` (`TIME`, expiries) the simulated server reads here.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// Microseconds since the Unix epoch, shared by the server and whoever moves it.
#[derive(Debug, Clone, Default)]
pub struct Clock(Arc<AtomicI64>);

impl Clock {
    pub fn at(micros: i64) -> Self {
        Self(Arc::new(AtomicI64::new(micros)))
    }

    pub fn now_us(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }

    pub fn now_ms(&self) -> i64 {
        self.now_us().div_euclid(1000)
    }

    /// Sets the clock, forwards or back (a step, as an operator's or NTP's).
    pub fn set_us(&self, micros: i64) {
        self.0.store(micros, Ordering::SeqCst);
    }

    pub fn advance_us(&self, micros: i64) {
        self.0.fetch_add(micros, Ordering::SeqCst);
    }
}
