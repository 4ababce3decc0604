//! Pre-roll: the recent media of a live stream, kept in memory
//! for the records that ask to start before their `:startRecord`. Only the
//! streams of applications with `<FILE><MaxPreRoll>` keep one; frames are
//! shared buffers (`Bytes`), so a history costs the frames it holds and a
//! queue slot each.
//!
//! It holds at least `keep` of stream time back from the newest frame,
//! from a sync point: a video keyframe, or any frame of a stream without
//! video. A byte cap bounds a stream whose bit rate is out of the ordinary:
//! past it the oldest GOPs go, and a GOP that alone is over the cap (one
//! keyframe, then P-frames without end) is let go whole, the history
//! holding nothing until the next keyframe.

use crate::media::{Frame, TrackId, TICKS_PER_SECOND};
use std::collections::VecDeque;

/// Bytes one stream's history may hold (a 16 Mb/s stream for two minutes
/// is 240 MB: past this, the oldest GOPs go even inside the window).
pub const MAX_BYTES: usize = 64 << 20;

#[derive(Debug)]
pub struct History {
    /// Stream ticks to hold back from the newest frame.
    keep: i64,
    /// The stream's video track (its keyframes are the sync points), if
    /// it has one.
    video: Option<TrackId>,
    frames: VecDeque<Frame>,
    /// Sync points in `frames`: (sequence number, decode time); the
    /// front frame's sequence number is `popped`.
    syncs: VecDeque<(u64, i64)>,
    popped: u64,
    bytes: usize,
}

impl History {
    pub fn new(keep_ms: u64, video: Option<TrackId>) -> History {
        History {
            keep: (keep_ms as i64).saturating_mul(TICKS_PER_SECOND / 1000),
            video,
            frames: VecDeque::new(),
            syncs: VecDeque::new(),
            popped: 0,
            bytes: 0,
        }
    }

    fn is_sync(&self, f: &Frame) -> bool {
        match self.video {
            Some(v) => f.track == v && f.keyframe,
            None => true,
        }
    }

    pub fn push(&mut self, frame: &Frame) {
        // A history starts at a sync point.
        if self.frames.is_empty() && !self.is_sync(frame) {
            return;
        }
        if self.is_sync(frame) {
            self.syncs
                .push_back((self.popped + self.frames.len() as u64, frame.dts));
        }
        self.bytes += frame.data.len();
        self.frames.push_back(frame.clone());
        let newest = frame.dts;
        // The oldest sync point goes once the next one is old enough to
        // start every pre-roll from (or the bytes are over the cap).
        while let Some(&(seq, dts)) = self.syncs.get(1) {
            let old_enough = dts <= newest.saturating_sub(self.keep);
            if !old_enough && self.bytes <= MAX_BYTES {
                break;
            }
            self.syncs.pop_front();
            while self.popped < seq {
                if let Some(f) = self.frames.pop_front() {
                    self.bytes -= f.data.len();
                }
                self.popped += 1;
            }
        }
        // One GOP over the cap: nothing of it can be kept whole.
        if self.bytes > MAX_BYTES {
            self.clear();
        }
    }

    /// Lets every frame go; the next sync point starts the history again.
    fn clear(&mut self) {
        self.popped += self.frames.len() as u64;
        self.frames.clear();
        self.syncs.clear();
        self.bytes = 0;
    }

    /// The frames from the sync point at or before `ms` before the newest
    /// frame (the oldest held when the history is shorter).
    pub fn since(&self, ms: u64) -> Vec<Frame> {
        let Some(newest) = self.frames.back().map(|f| f.dts) else {
            return Vec::new();
        };
        let from = newest.saturating_sub((ms as i64).saturating_mul(TICKS_PER_SECOND / 1000));
        let start = self
            .syncs
            .iter()
            .rev()
            .find(|&&(_, dts)| dts <= from)
            .or(self.syncs.front())
            .map_or(0, |&(seq, _)| (seq - self.popped) as usize);
        self.frames.range(start..).cloned().collect()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    /// 30 fps video (track 1, a keyframe every `gop` frames) and audio
    /// (track 2) every 20 ms, for `secs` seconds.
    fn media(h: &mut History, secs: i64, gop: i64) {
        for i in 0..secs * 30 {
            let t = i * 3000;
            h.push(&Frame {
                track: 1,
                pts: t,
                dts: t,
                keyframe: i % gop == 0,
                data: Bytes::from(vec![0u8; 1000]),
            });
            h.push(&Frame {
                track: 2,
                pts: t,
                dts: t,
                keyframe: true,
                data: Bytes::from(vec![0u8; 100]),
            });
        }
    }

    #[test]
    fn it_holds_the_window_from_a_keyframe_and_gives_pre_rolls_from_one() {
        let mut h = History::new(10_000, Some(1));
        media(&mut h, 60, 60); // a keyframe every 2 s
                               // Newest at 59.967 s: 10 s back is 49.967 s; the keyframe at or
                               // before it is at 48 s.
        let first = h.frames.front().unwrap();
        assert_eq!(
            (first.track, first.keyframe, first.dts),
            (1, true, 48 * 90_000)
        );
        assert_eq!(h.len(), 2 * (60 - 48) * 30);
        assert_eq!(h.bytes(), (60 - 48) * 30 * 1100);
        let p = h.since(5_000);
        assert!(p[0].keyframe && p[0].track == 1);
        assert_eq!(p[0].dts, 54 * 90_000); // at or before 54.967 s
        assert_eq!(h.since(0)[0].dts, 58 * 90_000);
        // More than held: from the oldest.
        assert_eq!(h.since(60_000)[0].dts, 48 * 90_000);
    }

    #[test]
    fn it_starts_at_a_keyframe_and_is_bounded_by_bytes() {
        let mut h = History::new(120_000, Some(1));
        h.push(&Frame {
            track: 1,
            pts: 0,
            dts: 0,
            keyframe: false,
            data: Bytes::from_static(b"x"),
        });
        assert!(h.is_empty(), "no sync point yet");
        // 64 MiB of 1 MB frames, a keyframe each: the oldest go.
        for i in 0..100 {
            h.push(&Frame {
                track: 1,
                pts: i * 3000,
                dts: i * 3000,
                keyframe: true,
                data: Bytes::from(vec![0u8; 1 << 20]),
            });
        }
        assert!(h.bytes() <= MAX_BYTES, "{}", h.bytes());
        assert_eq!(h.len(), 64);
    }

    #[test]
    fn one_keyframe_then_p_frames_without_end_stays_under_the_cap() {
        let mut h = History::new(120_000, Some(1));
        let frame = |i: i64, keyframe| Frame {
            track: 1,
            pts: i * 3000,
            dts: i * 3000,
            keyframe,
            data: Bytes::from(vec![0u8; 256 << 10]),
        };
        h.push(&frame(0, true));
        for i in 1..1000 {
            h.push(&frame(i, false));
            assert!(h.bytes() <= MAX_BYTES, "{} at frame {i}", h.bytes());
        }
        // The GOP went whole; P-frames without their keyframe are not held.
        assert!(h.is_empty());
        assert!(h.since(120_000).is_empty());
        // The next keyframe starts it again.
        h.push(&frame(1000, true));
        h.push(&frame(1001, false));
        assert_eq!(h.len(), 2);
        assert!(h.since(0)[0].keyframe);
    }

    #[test]
    fn an_audio_only_stream_syncs_on_every_frame() {
        let mut h = History::new(1_000, None);
        for i in 0..500 {
            h.push(&Frame {
                track: 2,
                pts: i * 1800,
                dts: i * 1800,
                keyframe: true,
                data: Bytes::from_static(b"aac"),
            });
        }
        // 20 ms frames: a second back and the frame at its edge.
        assert_eq!(h.len(), 51);
        assert_eq!(h.since(100).len(), 6);
    }
}
