//! A small seeded generator (xorshift64*) for property tests: its seed is printed, and
//! `LOCKGATE_TEST_SEED` replays one.

/// Seeded randomness, plenty for picking names, tokens and steps.
#[derive(Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeded from `LOCKGATE_TEST_SEED` when set, else from the OS; prints the seed under
    /// `what`, so that a failure can be replayed.
    pub fn seeded(what: &str) -> Self {
        let seed = std::env::var("LOCKGATE_TEST_SEED")
            .ok()
            .and_then(|seed| seed.parse().ok())
            .unwrap_or_else(|| {
                let mut bytes = [0u8; 8];
                getrandom::fill(&mut bytes).expect("rng");
                u64::from_ne_bytes(bytes)
            })
            | 1;
        eprintln!("{what} seed: {seed} (LOCKGATE_TEST_SEED={seed} replays it)");
        Self(seed)
    }

    /// Seeded with `seed` (a simulation's, which prints it itself), mixed (splitmix64) so
    /// that neighbouring seeds start far apart.
    pub fn from_seed(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Self((z ^ (z >> 31)) | 1)
    }

    /// A number below `below` (0 when `below` is 0).
    pub fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % below.max(1)
    }

    /// An index into a slice of `len`.
    pub fn index(&mut self, len: usize) -> usize {
        self.next(len as u64) as usize
    }

    /// `len` characters of `alphabet`.
    pub fn text(&mut self, alphabet: &[u8], len: usize) -> String {
        (0..len)
            .map(|_| alphabet[self.index(alphabet.len())] as char)
            .collect()
    }
}
