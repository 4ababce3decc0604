//! Automatic rendition choice for one WebRTC viewer (OME's
//! `WebRtcAutoAbr`), from the packet loss its receiver reports (RTCP
//! receiver reports, once a second) against the renditions' rates.
//! Sans-IO: the caller passes `now`, the rates and each report, and
//! switches at the chosen rendition's next keyframe.
//!
//! Loss, not the receiver's estimate (REMB): a browser's REMB was seen to
//! sit at 540-620 kb/s for a minute while it received 780 kb/s over a
//! free path, and to stay flat, not fall, behind a 600 kb/s one; loss
//! told both apart at once (0 against a quarter of the packets).
//!
//! - **Down**: reports of [`DOWN_LOSS`] or more for [`DOWN_AFTER`], or one
//!   of [`SEVERE_LOSS`] (the picture is already frozen: waiting would
//!   only make the freeze longer): to the largest rendition that fits,
//!   with [`HEADROOM`], in what got through (the current rate less the
//!   loss), else the smallest.
//! - **Up**: a lower rendition cannot show that a higher one would fit.
//!   After [`PROBE_AFTER`] without loss, one step up is tried; within its
//!   [`TRIAL`] the first lossy report takes it back down and doubles the
//!   wait before the next try (up to [`MAX_PROBE_WAIT`]); a step that
//!   holds resets the wait.

use std::time::{Duration, Instant};

/// A report with this share of packets lost, or more, is a full path...
pub const DOWN_LOSS: f32 = 0.05;
/// ...when they go on for this long.
pub const DOWN_AFTER: Duration = Duration::from_millis(1500);
/// One report with this share lost, or more, is a full path at once: a
/// viewer opening the largest rendition behind a narrow path froze for
/// 4 s while [`DOWN_AFTER`] ran.
pub const SEVERE_LOSS: f32 = 0.25;
/// After a change, a report this soon may still count the packets of the
/// rendition left (the switch waits for a keyframe, the path drains its
/// queue): severe loss then is not read as the new one's.
pub const SETTLE: Duration = Duration::from_secs(2);
/// A rendition fits when its rate times this is under what got through.
pub const HEADROOM: f64 = 1.15;
/// How long a step up is on trial.
pub const TRIAL: Duration = Duration::from_secs(6);
/// Time on a lower rendition, without loss, before trying one up.
pub const PROBE_AFTER: Duration = Duration::from_secs(8);
/// The longest wait between tries up after failed ones.
pub const MAX_PROBE_WAIT: Duration = Duration::from_secs(32);

/// One viewer's automatic choice.
#[derive(Debug, Clone)]
pub struct AutoAbr {
    /// Since when the reports have been lossy.
    lossy_since: Option<Instant>,
    /// When the viewer last changed rendition.
    changed: Instant,
    /// When the current step up began, while it is on trial.
    trial: Option<Instant>,
    probe_wait: Duration,
    /// Until when severe loss may be the rendition left's.
    settle_until: Instant,
}

impl AutoAbr {
    pub fn new(now: Instant) -> Self {
        AutoAbr {
            lossy_since: None,
            changed: now,
            trial: None,
            probe_wait: PROBE_AFTER,
            settle_until: now,
        }
    }

    /// A receiver report (`loss`: the share of packets lost since the
    /// last) for a viewer on rendition `current` of `rates` (largest
    /// first, bits per second): the rendition to switch to, if any.
    pub fn on_report(
        &mut self,
        rates: &[u64],
        current: usize,
        loss: f32,
        now: Instant,
    ) -> Option<usize> {
        let rate = *rates.get(current)?;
        let lossy = loss >= DOWN_LOSS;
        let on_trial = self.trial.is_some_and(|t| now.duration_since(t) < TRIAL);
        if !on_trial && self.trial.take().is_some() {
            // The step up held.
            self.probe_wait = PROBE_AFTER;
        }
        if lossy && current + 1 < rates.len() {
            let since = *self.lossy_since.get_or_insert(now);
            let severe = loss >= SEVERE_LOSS && now >= self.settle_until;
            if !on_trial && !severe && now.duration_since(since) < DOWN_AFTER {
                return None;
            }
            let through = rate as f64 * f64::from(1.0 - loss.clamp(0.0, 1.0));
            let to = (current + 1..rates.len())
                .find(|&i| rates[i] as f64 * HEADROOM <= through)
                .unwrap_or(rates.len() - 1);
            if on_trial {
                self.probe_wait = (self.probe_wait * 2).min(MAX_PROBE_WAIT);
            }
            self.trial = None;
            self.lossy_since = None;
            self.changed = now;
            self.settle_until = now + SETTLE;
            return Some(to);
        }
        if !lossy {
            self.lossy_since = None;
        }
        if current > 0 && !lossy && !on_trial && now.duration_since(self.changed) >= self.probe_wait
        {
            self.changed = now;
            self.settle_until = now + SETTLE;
            self.trial = Some(now);
            return Some(current - 1);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATES: [u64; 3] = [2_000_000, 600_000, 200_000];

    #[test]
    fn a_lossy_path_goes_down_to_what_fits_and_a_clean_one_back_up() {
        let t0 = Instant::now();
        let mut abr = AutoAbr::new(t0);
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        assert_eq!(abr.on_report(&RATES, 0, 0.0, at(1.0)), None);
        // A 600 kb/s path under 2 Mb/s: 70% lost, severe: down at once
        // to what fits in the 600 kb/s that got through (600 needs 690).
        assert_eq!(abr.on_report(&RATES, 0, 0.7, at(2.0)), Some(2));
        // 10% lost, for 1.5 s: down; severe loss just after a change
        // counts as that.
        assert_eq!(abr.on_report(&RATES, 0, 0.5, at(2.5)), None);
        assert_eq!(abr.on_report(&RATES, 0, 0.1, at(3.0)), None);
        assert_eq!(abr.on_report(&RATES, 0, 0.1, at(4.0)), Some(1));
        abr = AutoAbr::new(at(3.5));
        // No loss on the smallest: a step up after PROBE_AFTER.
        assert_eq!(abr.on_report(&RATES, 2, 0.0, at(8.0)), None);
        assert_eq!(abr.on_report(&RATES, 2, 0.0, at(11.5)), Some(1));
        // Loss within its trial: down at once, and the next try waits
        // twice as long.
        assert_eq!(abr.on_report(&RATES, 1, 0.0, at(12.5)), None);
        assert_eq!(abr.on_report(&RATES, 1, 0.1, at(13.5)), Some(2));
        assert_eq!(abr.on_report(&RATES, 2, 0.0, at(25.0)), None);
        assert_eq!(abr.on_report(&RATES, 2, 0.0, at(29.5)), Some(1));
        // A clean path: the trial passes, the wait is back to
        // PROBE_AFTER, and the next step goes to the top, where it stays.
        assert_eq!(abr.on_report(&RATES, 1, 0.0, at(33.0)), None);
        assert_eq!(abr.on_report(&RATES, 1, 0.0, at(36.0)), None);
        assert_eq!(abr.on_report(&RATES, 1, 0.01, at(37.5)), Some(0));
        assert_eq!(abr.on_report(&RATES, 0, 0.0, at(50.0)), None);
        assert_eq!(abr.on_report(&RATES, 0, 0.0, at(90.0)), None);
    }

    #[test]
    fn a_short_burst_of_loss_is_not_a_full_path() {
        let t0 = Instant::now();
        let mut abr = AutoAbr::new(t0);
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        assert_eq!(abr.on_report(&RATES, 0, 0.2, at(1.0)), None);
        assert_eq!(abr.on_report(&RATES, 0, 0.0, at(2.0)), None);
        assert_eq!(abr.on_report(&RATES, 0, 0.2, at(3.0)), None);
        assert_eq!(abr.on_report(&RATES, 0, 0.2, at(4.0)), None);
        // 1.5 s of loss: down, to what fits in 80% of 2 Mb/s.
        assert_eq!(abr.on_report(&RATES, 0, 0.2, at(4.5)), Some(1));
    }

    #[test]
    fn the_top_and_the_bottom_stay_put() {
        let t0 = Instant::now();
        let mut abr = AutoAbr::new(t0);
        let later = t0 + Duration::from_secs(100);
        assert_eq!(abr.on_report(&RATES, 0, 0.0, later), None);
        // The smallest, losing: no try up.
        assert_eq!(abr.on_report(&RATES, 2, 0.5, later), None);
        assert_eq!(abr.on_report(&[], 0, 0.0, later), None);
        assert_eq!(abr.on_report(&[100], 0, 0.9, later), None);
    }
}
