//! The server's wall clock: simulated, never the machine's. Either set by hand (a comparison
//! test sets it to the instant a real server's frozen clock shows) or ticking with tokio's
//! clock (in a simulation's paused runtime, the simulated time), and steppable either way (an
//! operator's or NTP's step). What Redis reads from `gettimeofday` (`TIME`, expiries) the
//! simulated server reads here.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use tokio::time::Instant;

#[derive(Debug)]
struct Inner {
    /// Microseconds since the epoch at `origin` (or now, without one), steps included.
    base_us: AtomicI64,
    /// When the clock started ticking with tokio's.
    origin: Option<Instant>,
}

/// Microseconds since the Unix epoch, shared by the server and whoever moves it.
#[derive(Debug, Clone)]
pub struct Clock(Arc<Inner>);

impl Default for Clock {
    fn default() -> Self {
        Self::at(0)
    }
}

impl Clock {
    /// A clock that stands at `micros` until set or stepped.
    pub fn at(micros: i64) -> Self {
        Self(Arc::new(Inner {
            base_us: AtomicI64::new(micros),
            origin: None,
        }))
    }

    /// A clock at `micros` now that moves as tokio's clock moves (call inside a runtime).
    pub fn ticking_from(micros: i64) -> Self {
        Self(Arc::new(Inner {
            base_us: AtomicI64::new(micros),
            origin: Some(Instant::now()),
        }))
    }

    fn elapsed_us(&self) -> i64 {
        self.0
            .origin
            .map_or(0, |origin| origin.elapsed().as_micros() as i64)
    }

    pub fn now_us(&self) -> i64 {
        self.0.base_us.load(Ordering::SeqCst) + self.elapsed_us()
    }

    pub fn now_ms(&self) -> i64 {
        self.now_us().div_euclid(1000)
    }

    /// Sets the clock to `micros`, forwards or back.
    pub fn set_us(&self, micros: i64) {
        self.0
            .base_us
            .store(micros - self.elapsed_us(), Ordering::SeqCst);
    }

    /// Steps the clock by `micros` (negative: back).
    pub fn step_us(&self, micros: i64) {
        self.0.base_us.fetch_add(micros, Ordering::SeqCst);
    }
}
