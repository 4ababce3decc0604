//! One destination's queue of frames waiting to be sent. Bounded in bytes:
//! when it would overflow, the destination is too slow, and video is dropped
//! up to the next keyframe (audio too, until then, so nothing plays out of
//! sync); the drops are counted. A slow destination never holds memory
//! beyond its bound, and nobody else notices it.

use crate::media::{Frame, TrackId};
use std::collections::VecDeque;

pub struct FrameQueue {
    frames: VecDeque<Frame>,
    bytes: usize,
    max_bytes: usize,
    /// Set after an overflow: drop until a video keyframe arrives.
    waiting_for_keyframe: bool,
    /// The video track keyframes are awaited on (None: audio only).
    video: Option<TrackId>,
    pub dropped_frames: u64,
}

impl FrameQueue {
    pub fn new(max_bytes: usize, video: Option<TrackId>) -> Self {
        FrameQueue {
            frames: VecDeque::new(),
            bytes: 0,
            max_bytes,
            waiting_for_keyframe: false,
            video,
            dropped_frames: 0,
        }
    }

    /// Changes the bound (the number of destinations changed); what is
    /// queued stays until the next push sees the new bound.
    pub fn set_max_bytes(&mut self, max_bytes: usize) {
        self.max_bytes = max_bytes;
    }

    /// Sets which track is the video track (tracks changed).
    pub fn set_video(&mut self, video: Option<TrackId>) {
        self.video = video;
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Adds a frame, applying the drop policy.
    pub fn push(&mut self, frame: Frame) {
        let is_key = Some(frame.track) == self.video && frame.keyframe;
        if self.waiting_for_keyframe {
            if !is_key && self.video.is_some() {
                self.dropped_frames += 1;
                return;
            }
            self.waiting_for_keyframe = false;
        }
        if self.bytes + frame.data.len() > self.max_bytes {
            // Too slow: throw away what is queued and wait for a keyframe.
            self.dropped_frames += self.frames.len() as u64;
            self.frames.clear();
            self.bytes = 0;
            if self.video.is_some() && !is_key {
                self.waiting_for_keyframe = true;
                self.dropped_frames += 1;
                return;
            }
        }
        self.bytes += frame.data.len();
        self.frames.push_back(frame);
    }

    pub fn pop(&mut self) -> Option<Frame> {
        let f = self.frames.pop_front()?;
        self.bytes -= f.data.len();
        Some(f)
    }

    pub fn clear(&mut self) {
        self.frames.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn f(track: TrackId, key: bool, len: usize) -> Frame {
        Frame {
            track,
            pts: 0,
            dts: 0,
            keyframe: key,
            data: Bytes::from(vec![0u8; len]),
        }
    }

    #[test]
    fn overflow_drops_to_next_keyframe() {
        let mut q = FrameQueue::new(1000, Some(1));
        q.push(f(1, true, 400));
        q.push(f(2, true, 100));
        q.push(f(1, false, 400));
        assert_eq!(q.len(), 3);
        q.push(f(1, false, 400)); // overflow
        assert_eq!(q.len(), 0);
        assert_eq!(q.dropped_frames, 4);
        q.push(f(2, true, 100)); // audio while waiting: dropped
        q.push(f(1, false, 10));
        assert_eq!(q.len(), 0);
        q.push(f(1, true, 400));
        assert_eq!(q.len(), 1);
        assert_eq!(q.bytes(), 400);
        assert_eq!(q.dropped_frames, 6);
    }

    #[test]
    fn bounded_whatever_comes() {
        let mut q = FrameQueue::new(10_000, Some(1));
        for i in 0..10_000 {
            q.push(f(1 + (i % 2), i % 50 == 0, 100 + (i % 300) as usize));
            assert!(q.bytes() <= 10_000);
        }
    }
}
