//! Exact decimal time: parsing and printing timestamps and durations as integer
//! nanoseconds. Owns the text form of time; knows nothing of messages.
//!
//! Times never pass through `f64` here: a trace's timestamps must round-trip to the
//! nanosecond, and an f64 holds only about 16 significant digits (0.1 µs at epoch 1.7e9).

/// A time or a duration in integer nanoseconds. Timestamps count from the Unix epoch.
pub type Nanos = i64;

/// Nanoseconds in one second.
pub const NANOS_PER_SEC: i64 = 1_000_000_000;

/// Why a decimal time could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// Nothing, or nothing but a sign.
    #[error("empty number")]
    Empty,
    /// A character that is neither a digit nor the one decimal point.
    #[error("not a decimal number")]
    NotDecimal,
    /// More precision than a nanosecond.
    #[error("more than 9 fractional digits")]
    TooPrecise,
    /// Beyond what 64-bit nanoseconds hold (about 292 years from the epoch).
    #[error("out of range")]
    OutOfRange,
    /// A duration with a unit this parser does not know.
    #[error("unknown unit (use ns, us, µs, ms, s, min or h)")]
    UnknownUnit,
}

/// Parses `[-]digits[.digits]` seconds into nanoseconds, exactly.
pub fn parse_seconds(text: &[u8]) -> Result<Nanos, TimeError> {
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (whole, frac) = match digits.iter().position(|&b| b == b'.') {
        Some(dot) => (&digits[..dot], &digits[dot + 1..]),
        None => (digits, &digits[digits.len()..]),
    };
    if whole.is_empty() && frac.is_empty() {
        return Err(TimeError::Empty);
    }
    if frac.len() > 9 {
        return Err(TimeError::TooPrecise);
    }
    let mut secs: i64 = 0;
    for &b in whole {
        if !b.is_ascii_digit() {
            return Err(TimeError::NotDecimal);
        }
        secs = secs
            .checked_mul(10)
            .and_then(|s| s.checked_add(i64::from(b - b'0')))
            .ok_or(TimeError::OutOfRange)?;
    }
    let mut nanos: i64 = 0;
    for &b in frac {
        if !b.is_ascii_digit() {
            return Err(TimeError::NotDecimal);
        }
        nanos = nanos * 10 + i64::from(b - b'0');
    }
    nanos *= 10_i64.pow(9 - frac.len() as u32);
    let total = secs
        .checked_mul(NANOS_PER_SEC)
        .and_then(|s| s.checked_add(nanos))
        .ok_or(TimeError::OutOfRange)?;
    Ok(if negative { -total } else { total })
}

/// Parses a duration such as `30ms`, `1.5us`, `250µs`, `2s`, `0.03` (seconds), `10ns`,
/// `5min` or `6h`.
pub fn parse_duration(text: &str) -> Result<Nanos, TimeError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    // (divide, multiply) the number read as seconds.
    let (scale_down, scale_up): (i64, i64) = match unit.trim() {
        "" | "s" => (1, 1),
        "ms" => (1_000, 1),
        "us" | "µs" => (1_000_000, 1),
        "ns" => (1_000_000_000, 1),
        "min" | "m" => (1, 60),
        "h" => (1, 3_600),
        _ => return Err(TimeError::UnknownUnit),
    };
    // Parse as seconds, then scale: "1.5us" is 1.5 s / 1e6, exact when it is a whole
    // number of nanoseconds.
    match parse_seconds(number.as_bytes()) {
        Ok(n) if n % scale_down == 0 => (n / scale_down)
            .checked_mul(scale_up)
            .ok_or(TimeError::OutOfRange),
        Ok(_) => Err(TimeError::TooPrecise),
        Err(e) => Err(e),
    }
}

/// Nanoseconds in one day.
const NANOS_PER_DAY: i64 = 86_400 * NANOS_PER_SEC;

/// A point in time as a user names one (`--from`, `--to`, diff's ranges), before the
/// start of the input it is counted from is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Moment {
    /// A duration after the start: `30s`, `5min`, `0.25`.
    After(Nanos),
    /// A clock time (UTC) on the day the input starts, as nanoseconds after midnight:
    /// `14:05`, `14:05:30.25`.
    OnTheDay(Nanos),
    /// A date and time (UTC), `2026-11-29T14:05:30Z` (or with a space for the `T`), or
    /// seconds since the epoch as `tcpdump -tt` prints them, `@1795336726.5`.
    At(Nanos),
}

impl Moment {
    /// The time it names in an input that starts at `start`.
    pub fn resolve(self, start: Nanos) -> Nanos {
        match self {
            Moment::After(after) => start.saturating_add(after),
            Moment::OnTheDay(time) => start - start.rem_euclid(NANOS_PER_DAY) + time,
            Moment::At(time) => time,
        }
    }
}

/// Reads a [`Moment`]: a duration, a clock time `HH:MM[:SS[.frac]]`, a date and time
/// `YYYY-MM-DDTHH:MM[:SS[.frac]][Z]`, or `@SECONDS` since the epoch.
pub fn parse_moment(text: &str) -> Result<Moment, String> {
    let text = text.trim();
    let expected = || {
        format!(
            "`{text}` is no time: expected a duration (30s, 5min), a clock time (14:05:30), \
             a date and time (2026-11-29T14:05:30Z) or seconds since the epoch (@1795336726.5)"
        )
    };
    if let Some(seconds) = text.strip_prefix('@') {
        return parse_seconds(seconds.as_bytes())
            .map(Moment::At)
            .map_err(|_| expected());
    }
    let clock = |text: &str| -> Option<Nanos> {
        let mut parts = text.split(':');
        let (hours, minutes) = (parts.next()?, parts.next()?);
        let seconds = parts.next().unwrap_or("00");
        let two_digits = |part: &str| part.len() == 2 && part.bytes().all(|b| b.is_ascii_digit());
        let whole_seconds = seconds.split('.').next().unwrap_or_default();
        if parts.next().is_some()
            || !(1..=2).contains(&hours.len())
            || !two_digits(minutes)
            || !two_digits(whole_seconds)
        {
            return None;
        }
        let (hours, minutes) = (hours.parse::<i64>().ok()?, minutes.parse::<i64>().ok()?);
        let seconds = parse_seconds(seconds.as_bytes()).ok()?;
        ((0..24).contains(&hours) && (0..60).contains(&minutes))
            .then_some(seconds)
            .filter(|s| (0..60 * NANOS_PER_SEC).contains(s))
            .map(|s| (hours * 60 + minutes) * 60 * NANOS_PER_SEC + s)
    };
    if let Some((date, time)) = text.split_once(['T', ' ']) {
        let date_of = |date: &str| -> Option<i64> {
            let mut parts = date.split('-').map(|p| p.parse::<i64>().ok());
            let (year, month, day) = (parts.next()??, parts.next()??, parts.next()??);
            ((1..=12).contains(&month) && (1..=31).contains(&day) && parts.next().is_none())
                .then(|| days_from_civil(year, month, day))
        };
        let time = time.strip_suffix('Z').unwrap_or(time);
        return match (date_of(date), clock(time)) {
            (Some(days), Some(time)) => Ok(Moment::At(days * NANOS_PER_DAY + time)),
            _ => Err(expected()),
        };
    }
    if text.contains(':') {
        return clock(text).map(Moment::OnTheDay).ok_or_else(expected);
    }
    parse_duration(text)
        .ok()
        .filter(|d| *d >= 0)
        .map(Moment::After)
        .ok_or_else(expected)
}

/// Days from 1970-01-01 to the proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The times of an input that are read (`--from`, `--to`): from `from` (inclusive) to
/// `to` (exclusive), each counted from `start` where it is relative, or else from the
/// first time the input holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TimeWindow {
    /// Where it opens; `None`: at the start.
    pub from: Option<Moment>,
    /// Where it closes; `None`: never.
    pub to: Option<Moment>,
    /// What relative moments count from, where known before reading: the earliest
    /// first packet of all the captures read together.
    pub start: Option<Nanos>,
}

impl TimeWindow {
    /// Whether it leaves anything out.
    pub fn is_set(&self) -> bool {
        self.from.is_some() || self.to.is_some()
    }

    /// Its bounds `[from, to)` in an input whose first time is `first` (used where
    /// [`TimeWindow::start`] is not known).
    pub fn bounds(&self, first: Nanos) -> (Nanos, Nanos) {
        let start = self.start.unwrap_or(first);
        let from = self.from.map_or(Nanos::MIN, |m| m.resolve(start));
        let mut to = self.to.map_or(Nanos::MAX, |m| m.resolve(start));
        // `--from 23:50 --to 00:10` goes past midnight.
        if matches!(self.to, Some(Moment::OnTheDay(_))) && to <= from {
            to += NANOS_PER_DAY;
        }
        (from, to)
    }
}

/// Writes a timestamp as decimal seconds: 6 fractional digits when the time is a whole
/// microsecond (the common capture resolution), 9 otherwise. Reading it back gives the
/// same nanoseconds.
pub fn format_seconds(t: Nanos) -> String {
    let mut out = String::with_capacity(24);
    push_seconds(&mut out, t);
    out
}

/// Appends [`format_seconds`] of `t` to `out` without allocating.
pub fn push_seconds(out: &mut String, t: Nanos) {
    use std::fmt::Write;
    let sign = if t < 0 { "-" } else { "" };
    let abs = t.unsigned_abs();
    let secs = abs / NANOS_PER_SEC as u64;
    let frac = abs % NANOS_PER_SEC as u64;
    // Writing to a String cannot fail.
    let _ = if frac.is_multiple_of(1_000) {
        write!(out, "{sign}{secs}.{:06}", frac / 1_000)
    } else {
        write!(out, "{sign}{secs}.{frac:09}")
    };
}

/// A duration for people: `812 ns`, `48.8 µs`, `3.21 ms`, `1.234 s`, with about
/// three significant digits.
pub fn human_duration(ns: f64) -> String {
    let abs = ns.abs();
    let (value, unit) = if abs < 1e3 {
        (ns, "ns")
    } else if abs < 1e6 {
        (ns / 1e3, "µs")
    } else if abs < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let decimals = if unit == "ns" {
        0
    } else if value.abs() >= 100.0 {
        1
    } else if value.abs() >= 10.0 {
        2
    } else {
        3
    };
    // A value that rounds to zero has no sign: "0 ns", never "-0 ns".
    let scale = 10f64.powi(decimals as i32);
    let value = match (value * scale).round() == 0.0 {
        true => 0.0,
        false => value,
    };
    format!("{value:.decimals$} {unit}")
}

/// A duration with its sign to the nanosecond, in the unit its size reads best in:
/// `-16 ns`, `+3.499986 ms`, `-7.000088462 s` (an offset between clocks, where every
/// digit counts); one under half a nanosecond is `+0 ns`.
pub fn signed_exact_duration(ns: f64) -> String {
    let abs = ns.abs();
    let magnitude = if abs < 1e3 {
        format!("{abs:.0} ns")
    } else if abs < 1e6 {
        format!("{:.3} µs", abs / 1e3)
    } else if abs < 1e9 {
        format!("{:.6} ms", abs / 1e6)
    } else {
        format!("{:.9} s", abs / 1e9)
    };
    match ns < 0.0 && magnitude != "0 ns" {
        true => format!("-{magnitude}"),
        false => format!("+{magnitude}"),
    }
}

/// A duration with its sign, `+16 ns` or `-1.432 µs`, as [`human_duration`] rounds it;
/// one that rounds to zero is `+0 ns`.
pub fn signed_human_duration(ns: f64) -> String {
    let magnitude = human_duration(ns.abs());
    match ns < 0.0 && human_duration(ns) != magnitude {
        true => format!("-{magnitude}"),
        false => format!("+{magnitude}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_moment_is_a_duration_a_clock_time_a_date_and_time_or_epoch_seconds() {
        use super::{parse_moment, Moment, TimeWindow, NANOS_PER_SEC as S};
        assert_eq!(parse_moment("90s"), Ok(Moment::After(90 * S)));
        assert_eq!(parse_moment("5min"), Ok(Moment::After(300 * S)));
        assert_eq!(
            parse_moment("14:05"),
            Ok(Moment::OnTheDay((14 * 60 + 5) * 60 * S))
        );
        assert_eq!(
            parse_moment("9:05:30.25"),
            Ok(Moment::OnTheDay(((9 * 60 + 5) * 60 + 30) * S + S / 4))
        );
        // `date -u -d 2026-11-29T14:05:30Z +%s` is 1795961130.
        assert_eq!(
            parse_moment("2026-11-29T14:05:30Z"),
            Ok(Moment::At(1_795_961_130 * S))
        );
        assert_eq!(
            parse_moment("2026-11-29 14:05:30"),
            Ok(Moment::At(1_795_961_130 * S))
        );
        assert_eq!(
            parse_moment("@1795961130.5"),
            Ok(Moment::At(1_795_961_130 * S + S / 2))
        );
        for wrong in [
            "25:00",
            "14:5",
            "14:05:61",
            "2026-13-01T00:00",
            "soon",
            "-5s",
            "1:2:3:4",
        ] {
            let error = parse_moment(wrong).unwrap_err();
            assert!(error.contains(&format!("`{wrong}` is no time")), "{error}");
        }
        // Relative moments count from the start; clock times fall on its day, and a
        // window that ends at a clock time before it opens ends the next day.
        let start = 1_795_961_130 * S; // 14:05:30
        let window = TimeWindow {
            from: Some(parse_moment("23:50").unwrap()),
            to: Some(parse_moment("00:10").unwrap()),
            start: None,
        };
        let midnight = start - (14 * 3600 + 5 * 60 + 30) * S;
        assert_eq!(
            window.bounds(start),
            (
                midnight + (23 * 60 + 50) * 60 * S,
                midnight + (24 * 60 + 10) * 60 * S
            )
        );
        let window = TimeWindow {
            from: Some(Moment::After(10 * S)),
            to: None,
            start: Some(start - S),
        };
        assert_eq!(window.bounds(start), (start + 9 * S, i64::MAX));
    }

    use super::*;

    #[test]
    fn a_duration_that_rounds_to_zero_has_no_sign() {
        assert_eq!(human_duration(-0.3), "0 ns");
        assert_eq!(human_duration(-0.0), "0 ns");
        assert_eq!(human_duration(-16.0), "-16 ns");
        assert_eq!(signed_human_duration(-16.0), "-16 ns");
        assert_eq!(signed_human_duration(-0.2), "+0 ns");
        assert_eq!(signed_human_duration(1_432.0), "+1.432 µs");
        assert_eq!(signed_exact_duration(-16.0), "-16 ns");
        assert_eq!(signed_exact_duration(-0.2), "+0 ns");
        assert_eq!(signed_exact_duration(3_499_986.0), "+3.499986 ms");
        assert_eq!(signed_exact_duration(-7_000_088_462.0), "-7.000088462 s");
    }

    #[test]
    fn seconds_parse_exactly_to_the_nanosecond() {
        assert_eq!(
            parse_seconds(b"1047680084.482205"),
            Ok(1_047_680_084_482_205_000)
        );
        assert_eq!(parse_seconds(b"1.000000001"), Ok(1_000_000_001));
        assert_eq!(parse_seconds(b"7"), Ok(7 * NANOS_PER_SEC));
        assert_eq!(parse_seconds(b".5"), Ok(500_000_000));
        assert_eq!(parse_seconds(b"-1.5"), Ok(-1_500_000_000));
    }

    #[test]
    fn bad_seconds_say_why() {
        assert_eq!(parse_seconds(b""), Err(TimeError::Empty));
        assert_eq!(parse_seconds(b"-"), Err(TimeError::Empty));
        assert_eq!(parse_seconds(b"12a"), Err(TimeError::NotDecimal));
        assert_eq!(parse_seconds(b"1.2.3"), Err(TimeError::NotDecimal));
        assert_eq!(parse_seconds(b"1.0000000001"), Err(TimeError::TooPrecise));
        assert_eq!(
            parse_seconds(b"99999999999999999999"),
            Err(TimeError::OutOfRange)
        );
    }

    #[test]
    fn seconds_round_trip_through_text() {
        for t in [
            0,
            1,
            999,
            1_000,
            1_655_760_362_581_506_000,
            1_655_760_362_581_506_123,
            -1_500_000_000,
            -7,
        ] {
            assert_eq!(parse_seconds(format_seconds(t).as_bytes()), Ok(t), "{t}");
        }
        assert_eq!(
            format_seconds(1_655_760_362_581_506_000),
            "1655760362.581506"
        );
        assert_eq!(format_seconds(-7), "-0.000000007");
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("30ms"), Ok(30_000_000));
        assert_eq!(parse_duration("0.03"), Ok(30_000_000));
        assert_eq!(parse_duration("1.5us"), Ok(1_500));
        assert_eq!(parse_duration("250µs"), Ok(250_000));
        assert_eq!(parse_duration("2 s"), Ok(2 * NANOS_PER_SEC));
        assert_eq!(parse_duration("10ns"), Ok(10));
        assert_eq!(parse_duration("1.5ns"), Err(TimeError::TooPrecise));
        assert_eq!(parse_duration("6h"), Ok(6 * 3_600 * NANOS_PER_SEC));
        assert_eq!(parse_duration("1.5min"), Ok(90 * NANOS_PER_SEC));
        assert_eq!(parse_duration("3d"), Err(TimeError::UnknownUnit));
    }

    #[test]
    fn human_durations_pick_a_unit() {
        assert_eq!(human_duration(812.0), "812 ns");
        assert_eq!(human_duration(48_800.0), "48.80 µs");
        assert_eq!(human_duration(3_210_000.0), "3.210 ms");
        assert_eq!(human_duration(123_400_000_000.0), "123.4 s");
    }
}
