//! Log output: tracing to stderr, text or JSON, through a buffer.
//!
//! Every request writes an access line. Writing each line with its own write(2), or handing
//! it to a writer thread that wakes up for each one, cost 10 to 15% of the lock-cycle
//! throughput (measured with `bench/run.sh` on two cores). So lines are appended to an
//! in-memory buffer that goes to stderr when it holds 32 KiB, every 100 ms from a background
//! thread, at once for warnings and errors, and when the [`LogGuard`] is dropped at exit.
//! The price: an info or debug line can reach stderr up to 100 ms late, and a crash (not a
//! clean exit) can lose the last 100 ms of them.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::{Level, Metadata};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Where the access line's fast path writes, and how (see `super::access`): set by [`init`]
/// when lines have no colours.
static ACCESS_SINK: std::sync::OnceLock<(Arc<Buffer>, LogFormat)> = std::sync::OnceLock::new();

/// The buffer and format of the access line's fast path, once [`init`] set them.
pub(super) fn access_sink() -> Option<(&'static Buffer, LogFormat)> {
    ACCESS_SINK
        .get()
        .map(|(buffer, format)| (buffer.as_ref(), *format))
}

/// Log line format (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Buffered bytes that trigger a write.
const FLUSH_AT: usize = 32 * 1024;
/// Longest a line waits in the buffer.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Installs the global subscriber: `RUST_LOG` (default `info`), `format`, stderr.
pub fn init(format: LogFormat, ansi: bool) -> LogGuard {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let buffer = Arc::new(Buffer::default());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Shared(buffer.clone()))
        .with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    if !ansi {
        // The access line's fast path writes here too (see `super::access`); with colours it
        // goes through the formatter.
        let _ = ACCESS_SINK.set((buffer.clone(), format));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flusher = {
        let (buffer, stop) = (buffer.clone(), stop.clone());
        std::thread::Builder::new()
            .name("lockgate-log".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::park_timeout(FLUSH_EVERY);
                    buffer.flush_to_stderr();
                }
            })
            .ok()
    };
    LogGuard {
        buffer,
        stop,
        flusher,
    }
}

/// Flushes the buffer when dropped; keep it alive for as long as the program logs.
#[derive(Debug)]
pub struct LogGuard {
    buffer: Arc<Buffer>,
    stop: Arc<AtomicBool>,
    flusher: Option<JoinHandle<()>>,
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(flusher) = self.flusher.take() {
            flusher.thread().unpark();
            let _ = flusher.join();
        }
        self.buffer.flush_to_stderr();
    }
}

#[derive(Debug, Default)]
pub(super) struct Buffer {
    bytes: Mutex<Vec<u8>>,
    /// The bytes being written out; one flush at a time, so lines leave in order. Swapped
    /// with `bytes` and cleared after, so both keep their capacity: a buffer taken away would
    /// grow again from nothing, reallocating and copying itself on the request path.
    out: Mutex<Vec<u8>>,
}

impl Buffer {
    /// Appends one line; writes the buffer out when it is full, or at once when `urgent`.
    pub(super) fn append(&self, line: &[u8], urgent: bool) {
        let full = {
            let mut bytes = self.bytes();
            bytes.extend_from_slice(line);
            bytes.len() >= FLUSH_AT
        };
        if full || urgent {
            self.flush_to_stderr();
        }
    }

    fn bytes(&self) -> MutexGuard<'_, Vec<u8>> {
        self.bytes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn flush_to_stderr(&self) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::swap(&mut *self.bytes(), &mut *out);
        if !out.is_empty() {
            // Nowhere to report a failure to write the log.
            let _ = io::stderr().lock().write_all(&out);
            out.clear();
        }
    }
}

/// Writes one event's bytes into the buffer; flushes on drop when the event is urgent.
#[derive(Debug)]
pub struct LineWriter<'a> {
    buffer: &'a Buffer,
    urgent: bool,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        // Urgent lines are flushed when the writer is dropped, after the whole line.
        self.buffer.append(data, false);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter<'_> {
    fn drop(&mut self) {
        if self.urgent {
            self.buffer.flush_to_stderr();
        }
    }
}

/// The buffer as the subscriber's writer factory.
#[derive(Debug)]
struct Shared(Arc<Buffer>);

impl<'a> MakeWriter<'a> for Shared {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter {
            buffer: &self.0,
            urgent: true,
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        LineWriter {
            buffer: &self.0,
            urgent: *meta.level() <= Level::WARN,
        }
    }
}
