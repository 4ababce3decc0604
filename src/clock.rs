//! Wall-clock formatting: the ISO 8601 form the API uses for times
//! (`2026-11-21T04:38:40.123+09:00`, milliseconds, the server's UTC offset)
//! and the log line prefix. Pure functions of (unix milliseconds, offset).

use std::time::{SystemTime, UNIX_EPOCH};

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
