//! Wall-clock formatting: the ISO 8601 form the API uses for times
//! (`2026-11-21T04:38:40.123+09:00`, milliseconds, the server's UTC offset)
//! and the log line prefix. Pure functions of (unix milliseconds, offset).

use std::time::{SystemTime, UNIX_EPOCH};

/// The earlier of two optional times (either may be unset).
pub fn earliest<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The loop's time for one turn, passed to handlers that need it (they
/// never read a clock): the monotonic instant and the wall clock.
#[derive(Clone, Copy, Debug)]
pub struct Now {
    pub instant: std::time::Instant,
    /// Milliseconds since the Unix epoch.
    pub unix_ms: i64,
}

impl Now {
    /// The wall clock at `instant`, the loop's time for this turn. The
    /// wall clock is read once per instant: every handler of one turn gets
    /// the same pair, and a turn that answers a thousand viewers reads the
    /// clock once, not a thousand times.
    pub fn read(instant: std::time::Instant) -> Now {
        thread_local! {
            static LAST: std::cell::Cell<Option<Now>> = const { std::cell::Cell::new(None) };
        }
        LAST.with(|last| match last.get() {
            Some(now) if now.instant == instant => now,
            _ => {
                let now = Now {
                    instant,
                    unix_ms: unix_millis_now(),
                };
                last.set(Some(now));
                now
            }
        })
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn unix_millis_now() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(_) => 0,
    }
}

/// Civil date from days since 1970-01-01 (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The civil time of `unix_ms` in the zone `offset_seconds` east of UTC:
/// (year, month, day, hour, minute, second).
pub fn civil(unix_ms: i64, offset_seconds: i32) -> (i64, u32, u32, u32, u32, u32) {
    let local_s = unix_ms
        .div_euclid(1000)
        .saturating_add(offset_seconds as i64);
    let (y, mo, d) = civil_from_days(local_s.div_euclid(86_400));
    let s = local_s.rem_euclid(86_400) as u32;
    (y, mo, d, s / 3600, (s / 60) % 60, s % 60)
}

/// Formats `unix_ms` in the zone `offset_seconds` east of UTC as
/// `YYYY-MM-DDTHH:MM:SS.mmm+HH:MM`.
pub fn format_iso8601(unix_ms: i64, offset_seconds: i32) -> String {
    IsoTime::new(unix_ms, offset_seconds).as_str().to_owned()
}

/// An ISO 8601 time rendered on the stack (no allocation, no formatting
/// machinery): API listings render three per push task.
#[derive(Clone, Copy)]
pub struct IsoTime {
    text: [u8; 40],
    len: usize,
}

impl IsoTime {
    pub fn new(unix_ms: i64, offset_seconds: i32) -> Self {
        let local_ms = unix_ms.saturating_add(offset_seconds as i64 * 1000);
        let days = local_ms.div_euclid(86_400_000);
        let ms_of_day = local_ms.rem_euclid(86_400_000);
        let (y, mo, d) = civil_from_days(days);
        let off = offset_seconds.unsigned_abs();
        let mut t = IsoTime {
            text: [0; 40],
            len: 0,
        };
        if !(0..=9999).contains(&y) {
            // Outside four digits: the general path (never for real times).
            let s = format!("{y:04}");
            t.push_str(s.as_bytes());
        } else {
            t.digits(y as u64, 4);
        }
        t.push(b'-');
        t.digits(mo as u64, 2);
        t.push(b'-');
        t.digits(d as u64, 2);
        t.push(b'T');
        t.digits((ms_of_day / 3_600_000) as u64, 2);
        t.push(b':');
        t.digits(((ms_of_day / 60_000) % 60) as u64, 2);
        t.push(b':');
        t.digits(((ms_of_day / 1000) % 60) as u64, 2);
        t.push(b'.');
        t.digits((ms_of_day % 1000) as u64, 3);
        t.push(if offset_seconds < 0 { b'-' } else { b'+' });
        t.digits(u64::from(off / 3600), 2);
        t.push(b':');
        t.digits(u64::from((off / 60) % 60), 2);
        t
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII digits and separators are ever written.
        std::str::from_utf8(&self.text[..self.len]).unwrap_or("")
    }

    fn push(&mut self, b: u8) {
        if let Some(slot) = self.text.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    fn push_str(&mut self, s: &[u8]) {
        for &b in s {
            self.push(b);
        }
    }

    /// `v` in exactly `width` digits (the low ones if it has more).
    fn digits(&mut self, mut v: u64, width: usize) {
        let mut buf = [b'0'; 4];
        for slot in buf[..width].iter_mut().rev() {
            *slot = b'0' + (v % 10) as u8;
            v /= 10;
        }
        self.push_str(&buf[..width]);
    }
}

impl serde::Serialize for IsoTime {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_wall_time_per_instant() {
        let t = std::time::Instant::now();
        let a = Now::read(t);
        std::thread::sleep(std::time::Duration::from_millis(3));
        // The same turn: the same wall time, however late the call.
        assert_eq!(Now::read(t).unix_ms, a.unix_ms);
        // A later turn reads the clock again.
        let b = Now::read(std::time::Instant::now());
        assert!(
            b.unix_ms >= a.unix_ms + 3,
            "{} then {}",
            a.unix_ms,
            b.unix_ms
        );
    }

    #[test]
    fn epoch_in_offsets() {
        assert_eq!(format_iso8601(0, 0), "1970-01-01T00:00:00.000+00:00");
        assert_eq!(format_iso8601(0, 9 * 3600), "1970-01-01T09:00:00.000+09:00");
        assert_eq!(
            format_iso8601(0, -(5 * 3600 + 1800)),
            "1969-12-31T18:30:00.000-05:30"
        );
    }

    #[test]
    fn known_instant() {
        // 2026-11-21T04:38:40.123Z
        assert_eq!(
            format_iso8601(1_795_235_920_123, 0),
            "2026-11-21T04:38:40.123+00:00"
        );
        assert_eq!(
            format_iso8601(1_795_235_920_123, 9 * 3600),
            "2026-11-21T13:38:40.123+09:00"
        );
        // leap day
        assert_eq!(
            format_iso8601(951_782_400_000, 0),
            "2000-02-29T00:00:00.000+00:00"
        );
    }

    /// The formatting-machinery version this replaced, as the reference.
    fn reference(unix_ms: i64, offset_seconds: i32) -> String {
        let local_ms = unix_ms + offset_seconds as i64 * 1000;
        let days = local_ms.div_euclid(86_400_000);
        let ms_of_day = local_ms.rem_euclid(86_400_000);
        let (y, mo, d) = civil_from_days(days);
        let (h, mi, s, ms) = (
            ms_of_day / 3_600_000,
            (ms_of_day / 60_000) % 60,
            (ms_of_day / 1000) % 60,
            ms_of_day % 1000,
        );
        let sign = if offset_seconds < 0 { '-' } else { '+' };
        let off = offset_seconds.unsigned_abs();
        format!(
            "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}{sign}{:02}:{:02}",
            off / 3600,
            (off / 60) % 60
        )
    }

    #[test]
    fn matches_the_formatting_version() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // years 0..=9999 and beyond, offsets within +-14 h
            let ms = (x % 400_000_000_000_000) as i64 - 62_000_000_000_000;
            let off = ((x >> 40) % (28 * 3600)) as i32 - 14 * 3600;
            assert_eq!(format_iso8601(ms, off), reference(ms, off), "{ms} {off}");
        }
        for (ms, off) in [
            (0, 0),
            (-1, 0),
            (253_402_300_799_999, 0),
            (i64::MAX / 2, 3600),
        ] {
            assert_eq!(format_iso8601(ms, off), reference(ms, off), "{ms} {off}");
        }
    }
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Reads an ISO 8601 date and time as OME's schedule files write them:
/// `2023-09-27T13:21:15.123+09:00`, and the looser forms they show
/// (`15:10:0.0`, a zone of hours only `+09`, `Z`, no zone: UTC, a space
/// for the `T`). Unix ms; `None` for anything else.
pub fn parse_iso8601(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, rest) = s.split_once(['T', 't', ' '])?;
    let mut d = date.splitn(3, '-');
    let y: i64 = d.next()?.parse().ok()?;
    let mo: u32 = d.next()?.parse().ok()?;
    let day: u32 = d.next()?.parse().ok()?;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&day) || !(0..=9999).contains(&y) {
        return None;
    }
    // The zone: Z, or the last + or - of the time part.
    let (time, offset_s) = if let Some(t) = rest.strip_suffix(['Z', 'z']) {
        (t, 0i64)
    } else if let Some(i) = rest.rfind(['+', '-']) {
        let (t, z) = rest.split_at(i);
        let sign = if z.starts_with('-') { -1 } else { 1 };
        let z = &z[1..];
        let (h, m) = match z.split_once(':') {
            Some((h, m)) => (h, m),
            None if z.len() == 4 => z.split_at(2),
            None => (z, "0"),
        };
        let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
        if h > 23 || m > 59 {
            return None;
        }
        (t, sign * (h * 3600 + m * 60))
    } else {
        (rest, 0)
    };
    let mut t = time.splitn(3, ':');
    let h: i64 = t.next()?.parse().ok()?;
    let mi: i64 = t.next()?.parse().ok()?;
    let sec: f64 = match t.next() {
        Some(x) if !x.is_empty() => x.parse().ok()?,
        _ => 0.0,
    };
    if h > 23 || mi > 59 || !(0.0..61.0).contains(&sec) {
        return None;
    }
    let days = days_from_civil(y, mo, day);
    let ms = ((days * 86_400 + h * 3600 + mi * 60 - offset_s) * 1000) as f64 + sec * 1000.0;
    Some(ms.round() as i64)
}

#[cfg(test)]
mod iso_tests {
    use super::*;

    #[test]
    fn ome_schedule_times() {
        let t = parse_iso8601("2023-09-27T13:21:15.123+09:00").unwrap();
        assert_eq!(format_iso8601(t, 9 * 3600), "2023-09-27T13:21:15.123+09:00");
        let t = parse_iso8601("2022-03-14T15:10:0.0+09:00").unwrap();
        assert_eq!(format_iso8601(t, 0), "2022-03-14T06:10:00.000+00:00");
        let t = parse_iso8601("2000-01-01T20:57:00.000+09").unwrap();
        assert_eq!(format_iso8601(t, 0), "2000-01-01T11:57:00.000+00:00");
        assert_eq!(parse_iso8601("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_iso8601("1970-01-01T00:00:01-00:30"), Some(1_801_000));
        for bad in [
            "",
            "2023",
            "2023-13-01T00:00:00Z",
            "2023-01-01",
            "x-1-1T1:1:1Z",
            "2023-01-01T25:00:00Z",
        ] {
            assert_eq!(parse_iso8601(bad), None, "{bad}");
        }
    }
}
