//! What this build is, as build.rs read it from the checkout and the toolchain (never a
//! network): `lockgate --version` prints it, `lockgate_build_info` exports it, the start-up
//! log line names it.

/// The crate's version (`Cargo.toml`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The commit built, 12 hex digits (`git rev-parse --short=12 HEAD`); `LOCKGATE_BUILD_REVISION`
/// at build time where the source has no `.git`; else `unknown`.
pub const REVISION: &str = env!("LOCKGATE_REVISION");

/// The day of the build, `YYYY-MM-DD` UTC (`SOURCE_DATE_EPOCH`'s, when set).
pub const BUILT: &str = env!("LOCKGATE_BUILT");

/// The compiler's version, e.g. `1.95.0`.
pub const RUSTC: &str = env!("LOCKGATE_RUSTC");

/// `lockgate --version`: `0.1.0 (revision 0b271f2a1c3d, built 2026-12-05, rustc 1.95.0)`.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision ",
    env!("LOCKGATE_REVISION"),
    ", built ",
    env!("LOCKGATE_BUILT"),
    ", rustc ",
    env!("LOCKGATE_RUSTC"),
    ")"
);
