//! What a live stream's input says about each track as it goes, measured
//! on media time (the frames' decode times), for the API's track fields
//! (OME's `bitrateAvg`, `bitrateLatest`, `framerateAvg`,
//! `framerateLatest`, `keyFrameInterval*`, `deltaFramesSinceLastKeyFrame`,
//! `hasBframes`). Plain counters: no clock, no allocation per frame.

use crate::media::{Frame, Ticks};

/// One second of media time (90 kHz), the window of the "latest" figures.
const WINDOW: Ticks = 90_000;

/// Counters of one track.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrackStats {
    pub bytes: u64,
    pub frames: u64,
    pub keyframes: u64,
    first_dts: Option<Ticks>,
    last_dts: Ticks,
    /// The highest presentation time so far: a later frame presented
    /// before it is a B-frame (decoded after a frame it is shown before).
    max_pts: Option<Ticks>,
    /// A frame was presented before one decoded earlier.
    pub has_bframes: bool,
    /// Frames since the last keyframe (the keyframe not counted).
    pub since_keyframe: u64,
    /// Frames from the keyframe before the last one to the last one.
    pub last_gop_frames: u64,
    window_start: Option<Ticks>,
    window_bytes: u64,
    window_frames: u64,
    /// Bits per second and frames per second over the last full window.
    pub latest_bitrate: u64,
    pub latest_framerate: f64,
}

impl TrackStats {
    pub fn on_frame(&mut self, frame: &Frame) {
        let len = frame.data.len() as u64;
        self.bytes += len;
        self.frames += 1;
        self.last_dts = match self.first_dts {
            None => frame.dts,
            Some(_) => self.last_dts.max(frame.dts),
        };
        self.first_dts.get_or_insert(frame.dts);
        match self.max_pts {
            Some(max) if frame.pts < max => self.has_bframes = true,
            _ => self.max_pts = Some(frame.pts),
        }
        if frame.keyframe {
            if self.keyframes > 0 {
                self.last_gop_frames = self.since_keyframe + 1;
            }
            self.keyframes += 1;
            self.since_keyframe = 0;
        } else {
            self.since_keyframe += 1;
        }
        let start = *self.window_start.get_or_insert(frame.dts);
        let span = frame.dts.saturating_sub(start);
        if span >= WINDOW {
            let span = span as u64;
            self.latest_bitrate = self.window_bytes * 8 * WINDOW as u64 / span;
            self.latest_framerate = self.window_frames as f64 * WINDOW as f64 / span as f64;
            self.window_start = Some(frame.dts);
            self.window_bytes = 0;
            self.window_frames = 0;
        }
        self.window_bytes += len;
        self.window_frames += 1;
    }

    /// Media time covered so far, in 90 kHz ticks (0 before two frames).
    fn span(&self) -> u64 {
        self.first_dts
            .map_or(0, |first| self.last_dts.saturating_sub(first).max(0) as u64)
    }

    /// Bits per second since the first frame (0 until there is a span).
    pub fn average_bitrate(&self) -> u64 {
        match self.span() {
            0 => 0,
            span => self.bytes.saturating_mul(8 * WINDOW as u64) / span,
        }
    }

    /// Frames per second since the first frame.
    pub fn average_framerate(&self) -> f64 {
        match self.span() {
            0 => 0.0,
            span => (self.frames - 1) as f64 * WINDOW as f64 / span as f64,
        }
    }

    /// Frames per keyframe on average (OME's `keyFrameIntervalAvg`).
    pub fn average_gop_frames(&self) -> f64 {
        match self.keyframes {
            0 => 0.0,
            k => self.frames as f64 / k as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn frame(dts: Ticks, pts: Ticks, keyframe: bool) -> Frame {
        Frame {
            track: 1,
            pts,
            dts,
            keyframe,
            data: Bytes::from(vec![0u8; 1000]),
        }
    }

    #[test]
    fn a_30_fps_stream_with_b_frames_and_2_s_gops() {
        let mut s = TrackStats::default();
        // Decode order I P B B ... (pts of the Bs below the P's).
        for n in 0..150i64 {
            let dts = n * 3000;
            let pts = match n % 3 {
                0 => dts + 6000,
                1 => dts + 6000 + 3000,
                _ => dts,
            };
            s.on_frame(&frame(dts, pts, n % 60 == 0));
        }
        assert!(s.has_bframes);
        assert_eq!(s.keyframes, 3);
        assert_eq!(s.last_gop_frames, 60);
        assert_eq!(s.since_keyframe, 29);
        assert!((s.average_framerate() - 30.0).abs() < 0.01);
        assert!((s.latest_framerate - 30.0).abs() < 0.01);
        assert_eq!(s.latest_bitrate, 240_000);
        assert!((238_000..=242_000).contains(&s.average_bitrate()));
        assert!((s.average_gop_frames() - 50.0).abs() < 0.01);
    }

    #[test]
    fn frames_in_presentation_order_have_no_b_frames() {
        let mut s = TrackStats::default();
        for n in 0..10i64 {
            s.on_frame(&frame(n * 3000, n * 3000 + 3000, n == 0));
        }
        assert!(!s.has_bframes);
        assert_eq!(s.average_bitrate(), 8000 * 30 * 10 / 9);
    }
}
