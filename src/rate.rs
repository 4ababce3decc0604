//! A byte rate meter: bits per second over the last whole second, and the
//! largest such figure. A core piece (no feature): streams count their
//! input with it and push tasks their output; the statistics read it.

use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(1);

/// Bits per second over the last whole second, and the largest such figure.
#[derive(Debug, Clone, Default)]
pub struct RateMeter {
    window_start: Option<Instant>,
    window_bytes: u64,
    last_bps: u64,
    max_bps: u64,
    last_at: Option<Instant>,
}

impl RateMeter {
    pub fn add(&mut self, bytes: u64, now: Instant) {
        if bytes > 0 {
            self.last_at = Some(now);
        }
        let start = *self.window_start.get_or_insert(now);
        let elapsed = now.saturating_duration_since(start);
        if elapsed >= WINDOW {
            self.last_bps =
                (self.window_bytes as u128 * 8 * 1_000_000_000 / elapsed.as_nanos().max(1)) as u64;
            self.max_bps = self.max_bps.max(self.last_bps);
            self.window_start = Some(now);
            self.window_bytes = 0;
        }
        self.window_bytes += bytes;
    }

    /// The last second's rate; 0 when nothing came for two windows.
    pub fn last_bps(&self, now: Instant) -> u64 {
        match self.window_start {
            Some(s) if now.saturating_duration_since(s) < 2 * WINDOW => self.last_bps,
            _ => 0,
        }
    }

    pub fn max_bps(&self) -> u64 {
        self.max_bps
    }

    /// When bytes last came.
    pub fn last_at(&self) -> Option<Instant> {
        self.last_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_meter_reports_whole_seconds_and_goes_quiet() {
        let t0 = Instant::now();
        let mut m = RateMeter::default();
        for i in 0..=20 {
            m.add(12_500, t0 + Duration::from_millis(50 * i)); // 250 kB/s
        }
        let now = t0 + Duration::from_millis(1000);
        assert_eq!(m.last_bps(now), 2_000_000);
        assert_eq!(m.max_bps(), 2_000_000);
        assert_eq!(m.last_bps(now + Duration::from_secs(3)), 0);
        assert_eq!(m.last_at(), Some(now));
    }
}
