//! Wall-clock formatting: the ISO 8601 form the API uses for times
//! (`2026-11-21T04:38:40.123+09:00`, milliseconds, the server's UTC offset)
//! and the log line prefix. Pure functions of (unix milliseconds, offset).

use std::time::{SystemTime, UNIX_EPOCH};

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

/// Formats `unix_ms` in the zone `offset_seconds` east of UTC as
/// `YYYY-MM-DDTHH:MM:SS.mmm+HH:MM`.
pub fn format_iso8601(unix_ms: i64, offset_seconds: i32) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
