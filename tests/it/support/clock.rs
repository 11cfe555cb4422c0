//! A Redis whose wall clock a test can step: `clock_shim.c` compiled with the system's C
//! compiler and preloaded into the server, reading its offset from a file the test rewrites.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tempfile::TempDir;

/// The compiled shim, once per test process; `Err` says why there is none (no C compiler).
fn shim() -> Result<&'static Path, String> {
    static SHIM: OnceLock<Result<(TempDir, PathBuf), String>> = OnceLock::new();
    SHIM.get_or_init(|| {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/clock_shim.c");
        let library = dir.path().join("clock_shim.so");
        let out = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&library)
            .arg(&source)
            .output()
            .map_err(|e| format!("no C compiler (cc): {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cc failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok((dir, library))
    })
    .as_ref()
    .map(|(_, library)| library.as_path())
    .map_err(Clone::clone)
}

/// The offset of one server's clock.
#[derive(Debug)]
pub struct ClockOffset {
    _dir: TempDir,
    file: PathBuf,
}

impl ClockOffset {
    /// A new offset of zero, and the environment that makes a server read it; `Err` with the
    /// reason where no shim can be built.
    pub fn new() -> Result<(Self, Vec<(String, String)>), String> {
        let library = shim()?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let file = dir.path().join("offset");
        std::fs::write(&file, [0u8; 16]).map_err(|e| e.to_string())?;
        let env = vec![
            ("LD_PRELOAD".to_owned(), library.display().to_string()),
            ("CLOCK_SHIM_FILE".to_owned(), file.display().to_string()),
            ("CLOCK_SHIM_POSIX_MONOTONIC".to_owned(), "1".to_owned()),
        ];
        Ok((Self { _dir: dir, file }, env))
    }

    /// Moves the server's wall clock to `micros` ahead of the real one (in place: the server
    /// has the file mapped).
    pub fn set(&self, micros: i64) {
        self.write(0, micros);
    }

    /// Stops the server's wall clock at `micros` since the epoch (until set again).
    pub fn freeze_at(&self, micros: i64) {
        self.write(8, micros);
    }

    /// Writes one of the file's two numbers (the offset at 0, the frozen time at 8).
    fn write(&self, at: u64, micros: i64) {
        use std::io::{Seek, Write};
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.file)
            .expect("open the clock file");
        file.seek(std::io::SeekFrom::Start(at)).expect("seek");
        file.write_all(&micros.to_ne_bytes())
            .expect("write the clock file");
    }
}
