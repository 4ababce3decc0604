//! Giving memory back: glibc keeps what a burst of connections freed (their
//! message buffers) in its arenas for good unless asked to return it, so
//! 1,500 hostile RTMP connections closed at their set-up timeout left
//! ~115 MB resident for the life of the process. When enough ingest buffer
//! bytes were released (or pre-roll media let go), the loop asks the allocator to return free pages
//! (`malloc_trim`), at most once a second (a trim walks the heap).

use std::time::{Duration, Instant};

/// Released bytes that make a trim worth its walk of the heap.
const TRIM_AFTER: usize = 4 * 1024 * 1024;
/// The least time between two trims.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
pub(crate) struct HeapTrim {
    released: usize,
    last: Option<Instant>,
    /// A timer for the owed trim was asked for.
    armed: bool,
    /// What the streams' pre-roll histories held at the last look.
    media_held: usize,
}

impl HeapTrim {
    /// Notes what kept media (the pre-roll histories) holds now; what it
    /// let go since the last look counts as released (a stream that ended
    /// or a history that dropped a GOP frees tens of MiB at once).
    pub(crate) fn media_released(&mut self, held: usize) -> usize {
        let freed = self.media_held.saturating_sub(held);
        self.media_held = held;
        freed
    }

    /// Notes freed bytes; trims now if due. Returns when to call again,
    /// once per owed trim (it is owed but the last one was too recent).
    pub(crate) fn on_released(&mut self, bytes: usize, now: Instant) -> Option<Instant> {
        self.released = self.released.saturating_add(bytes);
        if self.released < TRIM_AFTER {
            return None;
        }
        if let Some(next) = self.last.map(|l| l + MIN_INTERVAL).filter(|&n| n > now) {
            let first = !self.armed;
            self.armed = true;
            return first.then_some(next);
        }
        self.armed = false;
        crate::debug!(
            "returning {} KiB of freed buffers to the system",
            self.released >> 10
        );
        crate::sys::trim_heap();
        self.released = 0;
        self.last = Some(now);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_let_go_counts_as_released() {
        let mut h = HeapTrim::default();
        assert_eq!(h.media_released(64 << 20), 0);
        assert_eq!(h.media_released(80 << 20), 0);
        assert_eq!(h.media_released(0), 80 << 20);
        assert_eq!(h.media_released(0), 0);
    }

    #[test]
    fn trims_after_enough_bytes_at_most_once_a_second() {
        let mut h = HeapTrim::default();
        let t0 = Instant::now();
        assert_eq!(h.on_released(1024, t0), None);
        assert_eq!(h.released, 1024);
        assert_eq!(h.on_released(TRIM_AFTER, t0), None);
        assert_eq!(h.released, 0, "trimmed");
        assert_eq!(
            h.on_released(TRIM_AFTER, t0 + Duration::from_millis(10)),
            Some(t0 + MIN_INTERVAL)
        );
        // Asked once per owed trim.
        assert_eq!(h.on_released(0, t0 + Duration::from_millis(20)), None);
        assert_eq!(h.released, TRIM_AFTER);
        assert_eq!(h.on_released(0, t0 + MIN_INTERVAL), None);
        assert_eq!(h.released, 0);
    }
}
