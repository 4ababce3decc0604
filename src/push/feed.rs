//! A stream's frames as its push sessions read them: one [`Feed`] per
//! stream with pushes, one [`Cursor`] per session. Frames are held once and
//! read by every session in place (no per-destination copy, no
//! per-destination clone); for RTMP each frame is also cut into chunks
//! once per stream ([`RtmpBody`]), and every RTMP destination writes that
//! body behind its own 12-byte message header.
//!
//! A feed keeps what its slowest session has not sent, and always the last
//! GOP (a session that starts mid-stream begins with a keyframe). A session
//! more than its bound behind skips to the next video keyframe (audio too,
//! so nothing plays out of sync) and counts what it skipped: a slow
//! destination never holds memory beyond its bound, and nobody else
//! notices it.

use crate::media::{Frame, MediaKind, Track, TrackId};
use crate::rtmp::chunk::{csid, write_shared_body};
use crate::rtmp::client::{tag_header, SHARED_CHUNK_SIZE};
use bytes::Bytes;
use std::collections::VecDeque;

/// A frame's RTMP message payload (FLV tag header + data) cut into chunks
/// of [`SHARED_CHUNK_SIZE`] on its chunk stream.
#[derive(Debug, Clone)]
pub(crate) struct RtmpBody {
    pub bytes: Bytes,
    /// The message length (payload bytes, without chunk headers).
    pub length: u32,
    pub chunks: usize,
}

#[derive(Debug)]
pub(crate) struct FeedFrame {
    pub frame: Frame,
    /// Set while the feed has RTMP sessions and the codec goes in FLV.
    pub rtmp: Option<RtmpBody>,
    /// Payload bytes of every frame before this one.
    offset: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Feed {
    frames: VecDeque<FeedFrame>,
    /// The sequence number of `frames[0]`.
    first: u64,
    /// Payload bytes of every frame ever added.
    total: u64,
    tracks: Vec<Track>,
    /// The stream's video track (the first listed), whose keyframes start
    /// GOPs.
    video: Option<TrackId>,
    /// The latest keyframe of `video` (None: no video, or none seen yet).
    last_key: Option<u64>,
    rtmp: bool,
}

fn video_track(tracks: &[Track]) -> Option<TrackId> {
    tracks
        .iter()
        .find(|t| t.kind() == MediaKind::Video)
        .map(|t| t.id)
}

impl Feed {
    /// A feed starting with the stream's last GOP.
    pub(crate) fn new(tracks: &[Track], gop: &[Frame]) -> Self {
        let mut feed = Feed {
            tracks: tracks.to_vec(),
            video: video_track(tracks),
            ..Feed::default()
        };
        for f in gop {
            feed.push(f.clone());
        }
        feed
    }

    /// The stream's tracks changed.
    pub(crate) fn set_tracks(&mut self, tracks: &[Track]) {
        self.tracks = tracks.to_vec();
        self.video = video_track(tracks);
    }

    /// From now on every frame is also cut for RTMP (an RTMP session
    /// subscribed); frames already held are cut now.
    pub(crate) fn enable_rtmp(&mut self) {
        if self.rtmp {
            return;
        }
        self.rtmp = true;
        for i in 0..self.frames.len() {
            let body = self.frames.get(i).and_then(|f| self.rtmp_body(&f.frame));
            if let Some(f) = self.frames.get_mut(i) {
                f.rtmp = body;
            }
        }
    }

    fn rtmp_body(&self, frame: &Frame) -> Option<RtmpBody> {
        let track = self.tracks.iter().find(|t| t.id == frame.track)?;
        let chunk_stream = match track.kind() {
            MediaKind::Video => csid::VIDEO,
            MediaKind::Audio => csid::AUDIO,
            MediaKind::Data => return None,
        };
        let (h, n) = tag_header(track, frame).ok()?;
        let length = u32::try_from(n + frame.data.len())
            .ok()
            .filter(|l| *l <= 0xFF_FFFF)?;
        let mut out = Vec::new();
        let chunks = write_shared_body(
            &mut out,
            chunk_stream,
            SHARED_CHUNK_SIZE,
            &[&h[..n], &frame.data],
        );
        Some(RtmpBody {
            bytes: out.into(),
            length,
            chunks,
        })
    }

    /// Adds a frame of the stream.
    pub(crate) fn push(&mut self, frame: Frame) {
        let seq = self.end();
        if Some(frame.track) == self.video && frame.keyframe {
            self.last_key = Some(seq);
        }
        let rtmp = if self.rtmp {
            self.rtmp_body(&frame)
        } else {
            None
        };
        let offset = self.total;
        self.total += frame.data.len() as u64;
        self.frames.push_back(FeedFrame {
            frame,
            rtmp,
            offset,
        });
    }

    /// The sequence number the next frame will get.
    pub(crate) fn end(&self) -> u64 {
        self.first + self.frames.len() as u64
    }

    pub(crate) fn get(&self, seq: u64) -> Option<&FeedFrame> {
        let i = seq.checked_sub(self.first)?;
        self.frames.get(usize::try_from(i).ok()?)
    }

    /// Where a new session starts: the last GOP (all of the feed without
    /// video).
    pub(crate) fn gop_start(&self) -> u64 {
        self.last_key.unwrap_or(self.first).max(self.first)
    }

    /// Payload bytes from `seq` to the end.
    pub(crate) fn bytes_from(&self, seq: u64) -> u64 {
        match self.get(seq) {
            Some(f) => self.total - f.offset,
            None => 0,
        }
    }

    /// Drops frames before `seq` (what every session has sent), keeping
    /// the last GOP.
    pub(crate) fn trim(&mut self, seq: u64) {
        let keep = seq.min(self.gop_start());
        while self.first < keep && self.frames.pop_front().is_some() {
            self.first += 1;
        }
    }

    #[cfg(test)]
    /// Frames held (for tests and stats).
    pub(crate) fn len(&self) -> usize {
        self.frames.len()
    }
}

/// A cursor's position, kept to return to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Mark {
    next: u64,
    waiting_for_key: bool,
    dropped_frames: u64,
}

impl Mark {
    pub(crate) const ZERO: Mark = Mark {
        next: 0,
        waiting_for_key: false,
        dropped_frames: 0,
    };
}

/// The tracks a cursor selects: ids below 64 as bits, held in the cursor
/// itself (this is asked for every frame of every session, and a heap
/// lookup per call is a cache miss per destination), others in a list.
#[derive(Debug, Clone, Default)]
struct TrackSet {
    low: u64,
    high: Vec<TrackId>,
}

impl TrackSet {
    fn of(ids: &[TrackId]) -> Self {
        let mut set = TrackSet::default();
        for &id in ids {
            match 1u64.checked_shl(id) {
                Some(bit) => set.low |= bit,
                None => set.high.push(id),
            }
        }
        set
    }

    #[inline]
    fn contains(&self, id: TrackId) -> bool {
        match 1u64.checked_shl(id) {
            Some(bit) => self.low & bit != 0,
            None => self.high.contains(&id),
        }
    }
}

/// One session's place in a feed, with the drop policy.
#[derive(Debug, Clone)]
pub(crate) struct Cursor {
    /// The next frame to look at.
    pub next: u64,
    selected: TrackSet,
    /// The selected video track (keyframes are awaited on it).
    video: Option<TrackId>,
    waiting_for_key: bool,
    max_bytes: usize,
    pub dropped_frames: u64,
}

impl Cursor {
    pub(crate) fn new(next: u64, max_bytes: usize) -> Self {
        Cursor {
            next,
            selected: TrackSet::default(),
            video: None,
            waiting_for_key: false,
            max_bytes,
            dropped_frames: 0,
        }
    }

    /// The tracks this session sends (the video track among them is the
    /// one whose keyframes end a drop).
    pub(crate) fn select(&mut self, tracks: &[Track], selected: &[TrackId]) {
        self.selected = TrackSet::of(selected);
        self.video = tracks
            .iter()
            .find(|t| t.kind() == MediaKind::Video && selected.contains(&t.id))
            .map(|t| t.id);
    }

    pub(crate) fn selects(&self, track: TrackId) -> bool {
        self.selected.contains(track)
    }

    /// A new bound (the number of sessions changed); applied at the next
    /// [`check_lag`](Self::check_lag).
    pub(crate) fn set_max_bytes(&mut self, max_bytes: usize) {
        self.max_bytes = max_bytes;
    }

    /// Applies the drop policy after frames arrived: more than the bound
    /// behind, the session skips what it has not sent and waits for the
    /// next video keyframe (the newest frame, if it is one, is kept).
    pub(crate) fn check_lag(&mut self, feed: &Feed) {
        if feed.bytes_from(self.next) as usize <= self.max_bytes {
            return;
        }
        let end = feed.end();
        let last_is_key = feed
            .get(end.wrapping_sub(1))
            .is_some_and(|f| Some(f.frame.track) == self.video && f.frame.keyframe);
        let resume = if last_is_key || self.video.is_none() {
            end.saturating_sub(1).max(self.next)
        } else {
            end
        };
        let skipped = (self.next..resume)
            .filter_map(|s| feed.get(s))
            .filter(|f| self.selects(f.frame.track))
            .count();
        self.dropped_frames += skipped as u64;
        self.next = resume;
        self.waiting_for_key = self.video.is_some() && !last_is_key;
    }

    /// The next frame to send, stepping over frames of other tracks (and,
    /// after a drop, everything up to a video keyframe). The cursor stays
    /// on it until [`advance`](Self::advance).
    pub(crate) fn peek<'f>(&mut self, feed: &'f Feed) -> Option<&'f FeedFrame> {
        self.next = self.next.max(feed.first);
        loop {
            let f = feed.get(self.next)?;
            if self.selects(f.frame.track) {
                if !self.waiting_for_key {
                    return Some(f);
                }
                if Some(f.frame.track) == self.video && f.frame.keyframe {
                    self.waiting_for_key = false;
                    return Some(f);
                }
                self.dropped_frames += 1;
            }
            self.next += 1;
        }
    }

    pub(crate) fn advance(&mut self) {
        self.next += 1;
    }

    /// Where the cursor is (to go back to it: a write that came back short).
    pub(crate) fn mark(&self) -> Mark {
        Mark {
            next: self.next,
            waiting_for_key: self.waiting_for_key,
            dropped_frames: self.dropped_frames,
        }
    }

    pub(crate) fn reset(&mut self, mark: Mark) {
        self.next = mark.next;
        self.waiting_for_key = mark.waiting_for_key;
        self.dropped_frames = mark.dropped_frames;
    }

    /// The next frame to send, consumed.
    pub(crate) fn pop<'f>(&mut self, feed: &'f Feed) -> Option<&'f FeedFrame> {
        let f = self.peek(feed)?;
        self.advance();
        Some(f)
    }

    /// Payload bytes of selected frames from `from` to the end (the pacing
    /// input of a UDP destination).
    pub(crate) fn selected_bytes(&self, feed: &Feed, from: u64) -> usize {
        (from.max(feed.first)..feed.end())
            .filter_map(|s| feed.get(s))
            .filter(|f| self.selects(f.frame.track))
            .map(|f| f.frame.data.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::{Codec, CodecConfig};

    fn track(id: TrackId, codec: Codec) -> Track {
        Track {
            id,
            codec,
            config: CodecConfig::None,
            video: None,
            audio: None,
            bitrate: 0,
            label: Default::default(),
        }
    }

    fn tracks() -> Vec<Track> {
        vec![track(1, Codec::H264), track(2, Codec::Aac)]
    }

    fn f(track: TrackId, key: bool, len: usize) -> Frame {
        Frame {
            track,
            pts: 0,
            dts: 0,
            keyframe: key,
            data: Bytes::from(vec![0u8; len]),
        }
    }

    fn cursor(feed: &Feed, max: usize) -> Cursor {
        let mut c = Cursor::new(feed.gop_start(), max);
        c.select(&tracks(), &[1, 2]);
        c
    }

    #[test]
    fn overflow_skips_to_the_next_keyframe() {
        let mut feed = Feed::new(&tracks(), &[]);
        let mut c = cursor(&feed, 1000);
        for fr in [f(1, true, 400), f(2, true, 100), f(1, false, 400)] {
            feed.push(fr);
            c.check_lag(&feed);
        }
        assert_eq!(c.dropped_frames, 0);
        feed.push(f(1, false, 400)); // 1300 behind: overflow
        c.check_lag(&feed);
        assert_eq!(c.dropped_frames, 4);
        feed.push(f(2, true, 100)); // audio while waiting: dropped
        feed.push(f(1, false, 10));
        assert!(c.peek(&feed).is_none());
        assert_eq!(c.dropped_frames, 6);
        feed.push(f(1, true, 400));
        let key = c.pop(&feed).map(|f| (f.frame.track, f.frame.keyframe));
        assert_eq!(key, Some((1, true)));
        assert!(c.pop(&feed).is_none());
    }

    #[test]
    fn an_overflow_on_a_keyframe_keeps_it() {
        let mut feed = Feed::new(&tracks(), &[]);
        let mut c = cursor(&feed, 500);
        feed.push(f(1, false, 400));
        feed.push(f(1, true, 400));
        c.check_lag(&feed);
        assert_eq!(c.dropped_frames, 1);
        assert!(c.pop(&feed).is_some_and(|f| f.frame.keyframe));
    }

    #[test]
    fn sessions_start_on_the_last_gop_and_trimming_keeps_it() {
        let gop = [f(1, true, 10), f(2, true, 10), f(1, false, 10)];
        let mut feed = Feed::new(&tracks(), &gop);
        feed.push(f(1, true, 10));
        feed.push(f(1, false, 10));
        assert_eq!(feed.gop_start(), 3);
        feed.trim(5);
        assert_eq!(feed.len(), 2);
        assert_eq!(feed.gop_start(), 3);
        let mut c = cursor(&feed, 1 << 20);
        assert_eq!(c.pop(&feed).map(|f| f.frame.keyframe), Some(true));
    }

    #[test]
    fn the_feed_is_bounded_by_its_slowest_cursor_and_the_bound() {
        let mut feed = Feed::new(&tracks(), &[]);
        let mut slow = cursor(&feed, 10_000);
        for i in 0..10_000u32 {
            feed.push(f(1 + (i % 2), i % 50 == 0, 100 + (i % 300) as usize));
            slow.check_lag(&feed);
            feed.trim(slow.next);
            assert!(feed.bytes_from(slow.next) <= 10_000);
            // The last GOP (50 frames of at most 400 bytes) and the lag.
            assert!(feed.len() <= 50 + 10_000 / 100 + 1, "{}", feed.len());
        }
    }

    #[test]
    fn unselected_tracks_are_stepped_over() {
        let mut feed = Feed::new(&tracks(), &[]);
        let mut c = Cursor::new(0, 1 << 20);
        c.select(&tracks(), &[2]);
        feed.push(f(1, true, 10));
        feed.push(f(2, true, 20));
        assert_eq!(c.selected_bytes(&feed, 0), 20);
        assert_eq!(c.pop(&feed).map(|f| f.frame.track), Some(2));
        assert!(c.pop(&feed).is_none());
    }

    #[test]
    fn track_sets_hold_ids_past_the_bits() {
        let set = TrackSet::of(&[0, 63, 64, 70, u32::MAX]);
        for id in [0, 63, 64, 70, u32::MAX] {
            assert!(set.contains(id), "{id}");
        }
        for id in [1, 62, 65, 71, u32::MAX - 1] {
            assert!(!set.contains(id), "{id}");
        }
    }
}
