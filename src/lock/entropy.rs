//! Random bytes for token stems and claims, from the OS CSPRNG.
//!
//! Every attempt at a grant needs a fresh stem (16 bytes) and, with an idempotency key, a
//! claim (8 bytes). One `getrandom` system call for each was half a system call per request
//! of the lock-cycle benchmark. So the bytes are fetched from the OS in blocks of
//! [`BLOCK`] bytes per thread, and each byte is handed out once and then zeroed: still the
//! output of the OS CSPRNG, with no generator of ours in between, only fetched ahead. (A
//! forked process would share a thread's block; lockgate forks only to exec the command of
//! `lockgate run`, which never reads it.)

use std::cell::RefCell;

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

/// Fills `out` with bytes of the OS CSPRNG that nothing else was given.
pub fn fill(out: &mut [u8]) -> Result<(), getrandom::Error> {
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
}
