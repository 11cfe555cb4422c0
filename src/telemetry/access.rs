//! The access line: one per request, written without tracing's formatter.
//!
//! Every request writes one `info` line (target `lockgate::access`). Formatted by
//! tracing-subscriber it cost about 1.8 µs of CPU per request on the lock-cycle benchmark (12 %
//! of the gateway's CPU per request): a timestamp through `Display`, each field through `Debug`
//! into a fresh `String`, ANSI styling decisions. Here the same bytes, text or JSON, are
//! written by hand into a reused buffer and appended to the log buffer of [`super::logging`].
//! The line is what tracing-subscriber writes, byte for byte but for the clock (a test
//! compares the two); `RUST_LOG` still decides whether it is written.
//!
//! The fast path serves the plain `info` line of a process that installed the log buffer
//! ([`super::logging::init`]) without colours. Anything else (a terminal's colours, the `warn`
//! line with a server error's cause, a test's own subscriber) goes through `tracing` as
//! before.

use std::cell::{Cell, RefCell};
use std::io::Write as _;
use std::time::SystemTime;

use super::logging::LogFormat;

/// One request, as its access line tells it.
#[derive(Debug, Clone, Copy)]
pub struct AccessLine<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub status: u16,
    pub outcome: &'a str,
    pub micros: u64,
    pub request_id: &'a str,
    pub key: &'a str,
}

thread_local! {
    /// A line being formatted: reused, so a request allocates nothing for its line.
    static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl AccessLine<'_> {
    /// Writes the line at `info`, if `RUST_LOG` lets `lockgate::access` through.
    pub fn write(&self) {
        if !tracing::enabled!(target: "lockgate::access", tracing::Level::INFO) {
            return;
        }
        let Some((buffer, format)) = super::logging::access_sink() else {
            tracing::info!(target: "lockgate::access", method = %self.method, path = self.path, status = self.status, outcome = self.outcome, micros = self.micros, request_id = self.request_id, key = self.key, "request");
            return;
        };
        LINE.with_borrow_mut(|line| {
            line.clear();
            let now = SystemTime::now();
            match format {
                LogFormat::Text => self.text(now, line),
                LogFormat::Json => self.json(now, line),
            }
            buffer.append(line, false);
        });
    }

    /// The line's fields after `method`, in order.
    fn fields(&self) -> [(&'static [u8], Field<'_>); 6] {
        [
            (b"path", Field::Text(self.path)),
            (b"status", Field::Number(u64::from(self.status))),
            (b"outcome", Field::Text(self.outcome)),
            (b"micros", Field::Number(self.micros)),
            (b"request_id", Field::Text(self.request_id)),
            (b"key", Field::Text(self.key)),
        ]
    }

    /// The fields after `method`, each as `<before><name><after><value>`, text values as
    /// `text` writes them (quoted and escaped for the format).
    fn write_fields(
        &self,
        out: &mut Vec<u8>,
        (before, after): (&[u8], &[u8]),
        text: impl Fn(&str, &mut Vec<u8>),
    ) {
        for (name, value) in self.fields() {
            out.extend_from_slice(before);
            out.extend_from_slice(name);
            out.extend_from_slice(after);
            match value {
                Field::Text(value) => text(value, out),
                Field::Number(n) => number(n, out),
            }
        }
    }

    /// `<time>  INFO lockgate::access: request method=POST path="/locks/a" …`, as
    /// tracing-subscriber's default format writes it.
    fn text(&self, now: SystemTime, out: &mut Vec<u8>) {
        timestamp(now, out);
        out.extend_from_slice(b"  INFO lockgate::access: request method=");
        out.extend_from_slice(self.method.as_bytes());
        self.write_fields(out, (b" ", b"="), debug_str);
        out.push(b'\n');
    }

    /// The same line as tracing-subscriber's JSON format writes it.
    fn json(&self, now: SystemTime, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"timestamp\":\"");
        timestamp(now, out);
        out.extend_from_slice(
            b"\",\"level\":\"INFO\",\"fields\":{\"message\":\"request\",\"method\":",
        );
        json_str(self.method, out);
        self.write_fields(out, (b",\"", b"\":"), json_str);
        out.extend_from_slice(b"},\"target\":\"lockgate::access\"}\n");
    }
}

/// A field's value: text (quoted and escaped as each format does) or a number.
#[derive(Clone, Copy)]
enum Field<'a> {
    Text(&'a str),
    Number(u64),
}

/// Printable ASCII that no escaping changes: what a path, an id or a key name almost always is.
fn plain(text: &str) -> bool {
    text.bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
}

/// `text` as `{:?}` writes it.
fn debug_str(text: &str, out: &mut Vec<u8>) {
    quoted(text, out, |text, out| {
        let _ = write!(out, "{text:?}");
    });
}

/// `text` as a JSON string, as serde_json writes it.
fn json_str(text: &str, out: &mut Vec<u8>) {
    quoted(text, out, |text, out| {
        let _ = serde_json::to_writer(&mut *out, text);
    });
}

/// `text` in double quotes: as it is when it is [`plain`] (both formats agree on it), else
/// as `escaped` writes it.
fn quoted(text: &str, out: &mut Vec<u8>, escaped: impl FnOnce(&str, &mut Vec<u8>)) {
    if plain(text) {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        escaped(text, out);
    }
}

fn number(n: u64, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// `now` in UTC as tracing-subscriber writes it: `2026-11-26T15:15:21.634872Z`.
fn timestamp(now: SystemTime, out: &mut Vec<u8>) {
    thread_local! {
        /// The second the last line of this thread was written in, and its text up to the
        /// fraction: lines come many to a second, and the calendar is the costly part.
        static SECOND: Cell<(u64, [u8; SECOND_TEXT])> =
            const { Cell::new((u64::MAX, [0; SECOND_TEXT])) };
    }
    let since = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let second = SECOND.with(|last| match last.get() {
        (at, text) if at == secs => text,
        _ => {
            let text = second_text(secs);
            last.set((secs, text));
            text
        }
    });
    out.extend_from_slice(&second);
    let start = out.len();
    out.resize(start + 7, b'Z');
    padded(u64::from(since.subsec_micros()), &mut out[start..start + 6]);
}

/// Length of `YYYY-MM-DDTHH:MM:SS.`
const SECOND_TEXT: usize = 20;

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SS.`
fn second_text(secs: u64) -> [u8; SECOND_TEXT] {
    let (year, month, day) = civil_from_days(i64::try_from(secs / 86_400).unwrap_or(0));
    let of_day = secs % 86_400;
    let year = u64::try_from(year).unwrap_or(0);
    let mut text = [0; SECOND_TEXT];
    let mut at = 0;
    for (value, width, after) in [
        (year, 4, b'-'),
        (u64::from(month), 2, b'-'),
        (u64::from(day), 2, b'T'),
        (of_day / 3600, 2, b':'),
        (of_day / 60 % 60, 2, b':'),
        (of_day % 60, 2, b'.'),
    ] {
        padded(value, &mut text[at..at + width]);
        text[at + width] = after;
        at += width + 1;
    }
    text
}

/// `n` in decimal, zero-padded to fill `digits`.
fn padded(mut n: u64, digits: &mut [u8]) {
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// What tracing-subscriber itself writes for the same event, in `format`.
    fn from_tracing(line: &AccessLine<'_>, format: LogFormat) -> String {
        #[derive(Clone, Default)]
        struct Captured(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Captured {
            fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
                self.0.lock().expect("lock").extend_from_slice(data);
                Ok(data.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let captured = Captured::default();
        let writer = captured.clone();
        let builder = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false);
        let emit = || {
            tracing::info!(target: "lockgate::access", method = %line.method, path = line.path, status = line.status, outcome = line.outcome, micros = line.micros, request_id = line.request_id, key = line.key, "request");
        };
        match format {
            LogFormat::Text => tracing::subscriber::with_default(builder.finish(), emit),
            LogFormat::Json => tracing::subscriber::with_default(builder.json().finish(), emit),
        }
        let bytes = captured.0.lock().expect("lock").clone();
        String::from_utf8(bytes).expect("utf-8")
    }

    /// The line without its timestamp (the two are written at different instants).
    fn untimed(line: &str) -> String {
        line.replacen(
            line.split(['"', ' '])
                .find(|part| part.ends_with('Z') && part.contains('T'))
                .unwrap_or(""),
            "<time>",
            1,
        )
    }

    /// The hand-written line is tracing-subscriber's, byte for byte, in both formats and
    /// with values that need escaping.
    #[test]
    fn the_line_is_what_tracing_writes() {
        let lines = [
            AccessLine {
                method: "POST",
                path: "/locks/orders:42",
                status: 201,
                outcome: "acquired",
                micros: 523,
                request_id: "d09a4fda000000000000",
                key: "-",
            },
            AccessLine {
                method: "GET",
                path: "/locks/a%22b\\c",
                status: 400,
                outcome: "invalid-name",
                micros: 0,
                request_id: "id \"with\" quotes\u{7f}é",
                key: "team-a",
            },
        ];
        let now = SystemTime::now();
        for line in &lines {
            for format in [LogFormat::Text, LogFormat::Json] {
                let mut ours = Vec::new();
                match format {
                    LogFormat::Text => line.text(now, &mut ours),
                    LogFormat::Json => line.json(now, &mut ours),
                }
                let ours = String::from_utf8(ours).expect("utf-8");
                assert_eq!(untimed(&ours), untimed(&from_tracing(line, format)));
            }
        }
    }

    /// Timestamps are RFC 3339 in UTC with microseconds, the proleptic calendar included.
    #[test]
    fn timestamps_are_utc_with_microseconds() {
        let at = |secs: u64, micros: u64| {
            let mut out = Vec::new();
            timestamp(
                SystemTime::UNIX_EPOCH
                    + std::time::Duration::from_secs(secs)
                    + std::time::Duration::from_micros(micros),
                &mut out,
            );
            String::from_utf8(out).expect("utf-8")
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(at(951_782_400, 7), "2000-02-29T00:00:00.000007Z");
        assert_eq!(at(1_795_705_721, 634_872), "2026-11-26T15:08:41.634872Z");
        // Again within that second: the second's text is reused, the fraction is not.
        assert_eq!(at(1_795_705_721, 1), "2026-11-26T15:08:41.000001Z");
        assert_eq!(at(4_102_444_799, 999_999), "2099-12-31T23:59:59.999999Z");
    }
}
