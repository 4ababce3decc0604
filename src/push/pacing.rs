//! Pacing for UDP outputs: a token bucket in bytes, so a keyframe's burst of
//! datagrams is spread out instead of overflowing the receiver's socket
//! buffer. The rate follows the stream: a multiple of the measured input
//! rate, within bounds. Pure: time is passed in.

use std::time::{Duration, Instant};

pub(crate) struct Pacer {
    /// Bytes per second allowed.
    rate: f64,
    /// Bytes that may go at once.
    burst: f64,
    tokens: f64,
    last: Instant,
    /// Measured input, bytes per second (exponential average).
    input_rate: f64,
    input_bytes: u64,
    input_since: Instant,
}

/// Lowest and highest pacing rates (bytes per second).
const MIN_RATE: f64 = 1_000_000.0 / 8.0 * 4.0; // 4 Mb/s
const MAX_RATE: f64 = 1_000_000_000.0 / 8.0; // 1 Gb/s
/// Send this many times faster than the stream comes in.
const HEADROOM: f64 = 3.0;

impl Pacer {
    pub(crate) fn new(burst_bytes: usize, now: Instant) -> Self {
        Pacer {
            rate: MIN_RATE,
            burst: burst_bytes as f64,
            tokens: burst_bytes as f64,
            last: now,
            input_rate: 0.0,
            input_bytes: 0,
            input_since: now,
        }
    }

    /// Counts bytes coming in (a frame's payload) to follow the stream's rate.
    pub(crate) fn on_input(&mut self, bytes: usize, now: Instant) {
        self.input_bytes += bytes as u64;
        let span = now.saturating_duration_since(self.input_since);
        if span >= Duration::from_millis(500) {
            let rate = self.input_bytes as f64 / span.as_secs_f64();
            self.input_rate = if self.input_rate == 0.0 {
                rate
            } else {
                self.input_rate * 0.7 + rate * 0.3
            };
            self.rate = (self.input_rate * HEADROOM).clamp(MIN_RATE, MAX_RATE);
            self.input_bytes = 0;
            self.input_since = now;
        }
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        self.last = now;
    }

    /// May `bytes` go now? Takes the tokens if so.
    pub(crate) fn try_send(&mut self, bytes: usize, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= bytes as f64 {
            self.tokens -= bytes as f64;
            true
        } else {
            false
        }
    }

    /// When `bytes` may go.
    pub(crate) fn ready_at(&self, bytes: usize) -> Instant {
        let missing = (bytes as f64 - self.tokens).max(0.0);
        self.last + Duration::from_secs_f64(missing / self.rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_paced() {
        let t0 = Instant::now();
        let mut p = Pacer::new(1316 * 4, t0);
        for _ in 0..4 {
            assert!(p.try_send(1316, t0));
        }
        assert!(!p.try_send(1316, t0));
        let at = p.ready_at(1316);
        assert!(at > t0);
        assert!(p.try_send(1316, at + Duration::from_micros(10)));
    }

    #[test]
    fn rate_follows_input() {
        let t0 = Instant::now();
        let mut p = Pacer::new(13160, t0);
        // 10 MB/s in for a second
        for i in 1..=10 {
            p.on_input(1_000_000, t0 + Duration::from_millis(100 * i));
        }
        assert!(p.rate > 20_000_000.0, "{}", p.rate);
    }
}
