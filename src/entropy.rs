//! Every random byte the gateway uses (token stems and claims, the token secret when none is
//! set, queue and marker ids, cursor nonces, request ids), from the OS CSPRNG, in one place so
//! that the deterministic simulation can make a world's bytes follow its seed ([`simulate`]).
//!
//! Every attempt at a grant needs a fresh stem (16 bytes) and, with an idempotency key, a
//! claim (8 bytes). One `getrandom` system call for each was half a system call per request
//! of the lock-cycle benchmark. So the bytes are fetched from the OS in blocks of
//! `BLOCK` bytes per thread, and each byte is handed out once and then zeroed: still the
//! output of the OS CSPRNG, with no generator of ours in between, only fetched ahead. (A
//! forked process would share a thread's block; lockgate forks only to exec the command of
//! `lockgate run`, which never reads it.)

use std::cell::{Cell, RefCell};

/// Bytes fetched from the OS at once, per thread: 64 stems.
const BLOCK: usize = 1024;

struct Pool {
    bytes: [u8; BLOCK],
    /// Bytes already handed out (zeroed): the next ones start here.
    used: usize,
}

thread_local! {
    static POOL: RefCell<Pool> = const {
        RefCell::new(Pool {
            bytes: [0; BLOCK],
            used: BLOCK,
        })
    };
}

thread_local! {
    /// The state of this thread's seeded generator while a simulated world runs on it.
    static SIMULATED: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Fills `out` with bytes of the OS CSPRNG that nothing else was given (or, on a thread that
/// runs a simulated world, the next bytes of its seed).
pub fn fill(out: &mut [u8]) -> Result<(), getrandom::Error> {
    if SIMULATED.get().is_some() {
        fill_simulated(out);
        return Ok(());
    }
    if out.len() > BLOCK {
        return getrandom::fill(out);
    }
    POOL.with_borrow_mut(|pool| {
        if BLOCK - pool.used < out.len() {
            getrandom::fill(&mut pool.bytes)?;
            pool.used = 0;
        }
        let taken = &mut pool.bytes[pool.used..pool.used + out.len()];
        out.copy_from_slice(taken);
        taken.fill(0);
        pool.used += out.len();
        Ok(())
    })
}

/// A random `u64` (see [`fill`]).
pub fn u64() -> Result<u64, getrandom::Error> {
    let mut bytes = [0u8; 8];
    fill(&mut bytes)?;
    Ok(u64::from_ne_bytes(bytes))
}

/// Makes this thread's random bytes a function of `seed` until the returned guard is dropped:
/// a simulated world (tests/it/simulation.rs) runs on one thread, and a seed must replay its
/// tokens, ids and nonces exactly. Nothing in the server calls it; the bytes are then
/// predictable by design, never a token of a real gateway.
pub fn simulate(seed: u64) -> Simulated {
    SIMULATED.set(Some(seed));
    Simulated(())
}

/// While it lives, this thread's random bytes follow a seed.
#[derive(Debug)]
#[must_use = "the seeded bytes end when this is dropped"]
pub struct Simulated(());

impl Drop for Simulated {
    fn drop(&mut self) {
        SIMULATED.set(None);
    }
}

/// The next bytes of this thread's seeded generator (splitmix64: a simulation needs bytes
/// that differ and replay, not secrecy).
fn fill_simulated(out: &mut [u8]) {
    for chunk in out.chunks_mut(8) {
        let state = SIMULATED
            .get()
            .unwrap_or_default()
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        SIMULATED.set(Some(state));
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes are never handed out twice, across block boundaries too.
    #[test]
    fn no_bytes_are_handed_out_twice() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..(3 * BLOCK / 16 + 5) {
            let mut stem = [0u8; 16];
            fill(&mut stem).expect("the OS has random bytes");
            assert!(seen.insert(stem), "a stem repeated");
        }
        let mut big = [0u8; 2 * BLOCK];
        fill(&mut big).expect("the OS has random bytes");
        assert!(big.iter().any(|&b| b != 0));
    }

    /// A seed gives the same bytes again, on this thread only, until its guard is dropped.
    #[test]
    fn a_seed_replays_its_bytes_on_its_thread_only() {
        let draw = || {
            let mut bytes = [0u8; 20];
            fill(&mut bytes).expect("bytes");
            bytes
        };
        let first = {
            let _seeded = simulate(7);
            (draw(), draw())
        };
        let again = {
            let _seeded = simulate(7);
            let elsewhere = std::thread::spawn(draw).join().expect("a thread");
            assert_ne!(elsewhere, first.0);
            (draw(), draw())
        };
        assert_eq!(first, again);
        assert_ne!(first.0, first.1);
        assert_ne!(
            draw(),
            first.0,
            "the OS's bytes again once the guard is gone"
        );
    }
}
