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

use std::cell::RefCell;
use std::io::Write as _;
use std::time::SystemTime;

use super::logging::LogFormat;
use super::rfc3339::Fraction;

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
        super::rfc3339::write(now, Fraction::Micros, out);
        out.extend_from_slice(b"  INFO lockgate::access: request method=");
        out.extend_from_slice(self.method.as_bytes());
        self.write_fields(out, (b" ", b"="), debug_str);
        out.push(b'\n');
    }

    /// The same line as tracing-subscriber's JSON format writes it.
    fn json(&self, now: SystemTime, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"timestamp\":\"");
        super::rfc3339::write(now, Fraction::Micros, out);
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
    // Every byte, without stopping at the first that is not: a loop the compiler vectorizes.
    let escaped = |b: u8| !(b' '..=b'~').contains(&b) | (b == b'"') | (b == b'\\');
    !text.bytes().fold(false, |any, b| any | escaped(b))
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
}
