//! Times as RFC 3339 text in UTC, the way tracing-subscriber (microseconds) and humantime
//! (milliseconds) write them, for what is written on every request: the access line's time
//! and a grant's `expires_at`. Through `Display` they cost about 700 instructions each; here
//! the text up to the second is kept per thread (a request's times fall within a second or
//! two of the last request's; the calendar is the costly part), and only the fraction is
//! written each time.

use std::cell::Cell;
use std::time::SystemTime;

/// The digits after the seconds.
#[derive(Debug, Clone, Copy)]
pub enum Fraction {
    /// `.123Z`, as `humantime::format_rfc3339_millis`.
    Millis,
    /// `.123456Z`, as tracing-subscriber and `humantime::format_rfc3339_micros`.
    Micros,
}

/// Length of `YYYY-MM-DDTHH:MM:SS.`
const SECOND_TEXT: usize = 20;

/// A second since the epoch and its text.
type Second = (u64, [u8; SECOND_TEXT]);

thread_local! {
    /// The two seconds this thread wrote last: an access line's (now) and a grant's expiry
    /// (now plus its ttl) alternate.
    static SECONDS: Cell<[Second; 2]> = const { Cell::new([(u64::MAX, [0; SECOND_TEXT]); 2]) };
}

/// `at` in UTC, `2026-11-26T15:15:21.634872Z` (or `.634Z`), after what `out` holds.
pub fn write(at: SystemTime, fraction: Fraction, out: &mut Vec<u8>) {
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let second = SECONDS.with(|cache| {
        let seconds = cache.get();
        match seconds.iter().find(|(second, _)| *second == secs) {
            Some((_, text)) => *text,
            None => {
                let text = second_text(secs);
                cache.set([(secs, text), seconds[0]]);
                text
            }
        }
    });
    out.extend_from_slice(&second);
    let (value, digits) = match fraction {
        Fraction::Millis => (since.subsec_millis(), 3),
        Fraction::Micros => (since.subsec_micros(), 6),
    };
    let start = out.len();
    out.resize(start + digits + 1, b'Z');
    padded(u64::from(value), &mut out[start..start + digits]);
}

/// `at` as [`write()`] writes it, in a `String` of its own.
pub fn text(at: SystemTime, fraction: Fraction) -> String {
    let mut out = Vec::with_capacity(SECOND_TEXT + 7);
    write(at, fraction, &mut out);
    // Digits and ASCII punctuation only.
    String::from_utf8(out).unwrap_or_default()
}

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
    use std::time::Duration;

    use super::*;

    fn at(secs: u64, micros: u64, fraction: Fraction) -> String {
        text(
            SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros),
            fraction,
        )
    }

    /// Timestamps are RFC 3339 in UTC, the proleptic calendar included.
    #[test]
    fn timestamps_are_utc_with_microseconds_or_milliseconds() {
        let micros = |secs, micros| at(secs, micros, Fraction::Micros);
        assert_eq!(micros(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(micros(951_782_400, 7), "2000-02-29T00:00:00.000007Z");
        assert_eq!(
            micros(1_795_705_721, 634_872),
            "2026-11-26T15:08:41.634872Z"
        );
        // Again within that second: the second's text is reused, the fraction is not.
        assert_eq!(micros(1_795_705_721, 1), "2026-11-26T15:08:41.000001Z");
        assert_eq!(
            micros(4_102_444_799, 999_999),
            "2099-12-31T23:59:59.999999Z"
        );
        assert_eq!(
            at(1_795_705_721, 634_872, Fraction::Millis),
            "2026-11-26T15:08:41.634Z"
        );
    }

    /// The same text as humantime's, over seconds that alternate as a request's times do
    /// (now, then now plus a ttl) and over days, months and leap years.
    #[test]
    fn the_text_is_humantimes() {
        for day in (0..40_000u64).step_by(97) {
            for (secs, micros) in [(day * 86_400 + 3_599, 999_999), (day * 86_400 + 3_629, 1)] {
                let time = SystemTime::UNIX_EPOCH
                    + Duration::from_secs(secs)
                    + Duration::from_micros(micros);
                assert_eq!(
                    text(time, Fraction::Micros),
                    humantime::format_rfc3339_micros(time).to_string()
                );
                assert_eq!(
                    text(time, Fraction::Millis),
                    humantime::format_rfc3339_millis(time).to_string()
                );
            }
        }
    }
}
