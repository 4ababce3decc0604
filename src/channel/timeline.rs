//! A scheduled channel's one timeline: each item (a file from its start
//! position, a live stream joined mid-way) is placed right after what the
//! channel gave out last, so timestamps never go backwards across a
//! switch and players see one continuous stream. Video starts at a
//! keyframe; audio of an item with video waits for it.
//!
//! The channel's tracks are fixed ids: [`VIDEO`] and [`AUDIO`], and with
//! an `AudioMap` the further audio tracks after it (`AUDIO + 1`, ...).

use crate::media::{Frame, MediaKind, Ticks, TrackId};

pub const VIDEO: TrackId = 1;
pub const AUDIO: TrackId = 2;

/// Assumed length of the last frame of a kind before its next is seen.
const DEFAULT_VIDEO_TICKS: Ticks = 3000; // 30 fps
const DEFAULT_AUDIO_TICKS: Ticks = 1920; // 1024 samples at 48 kHz

#[derive(Debug, Default, Clone, Copy)]
struct Last {
    dts: Ticks,
    /// The last interval between two frames.
    step: Ticks,
}

#[derive(Debug, Default)]
pub struct Splicer {
    /// Added to the item's times; set at its first frame placed.
    offset: Option<Ticks>,
    /// The item has video: nothing is placed before its first keyframe.
    item_has_video: bool,
    /// Each of the channel's tracks: the last frame placed.
    last: Vec<(TrackId, MediaKind, Last)>,
}

impl Splicer {
    /// A new item starts: its first frame goes right after the channel's
    /// last.
    pub fn begin(&mut self, has_video: bool) {
        self.offset = None;
        self.item_has_video = has_video;
    }

    /// Where the next item starts: after the last frame of every kind.
    pub fn next_start(&self) -> Ticks {
        self.last
            .iter()
            .map(|&(_, kind, l)| {
                let default = match kind {
                    MediaKind::Video => DEFAULT_VIDEO_TICKS,
                    _ => DEFAULT_AUDIO_TICKS,
                };
                l.dts
                    + if l.step > 0 {
                        l.step.min(90_000)
                    } else {
                        default
                    }
            })
            .max()
            .unwrap_or(0)
    }

    /// A frame of the current item (its `track` is the channel's), placed
    /// on the channel's timeline; `None`: dropped (before the item's first
    /// keyframe, or not after the last of its kind).
    pub fn place(&mut self, kind: MediaKind, f: &Frame) -> Option<Frame> {
        let offset = match self.offset {
            Some(o) => o,
            None => {
                if self.item_has_video && !(kind == MediaKind::Video && f.keyframe) {
                    return None;
                }
                let o = self.next_start() - f.dts;
                self.offset = Some(o);
                o
            }
        };
        let dts = f.dts + offset;
        match self.last.iter_mut().find(|(t, _, _)| *t == f.track) {
            Some((_, _, l)) => {
                if dts <= l.dts {
                    return None;
                }
                l.step = dts - l.dts;
                l.dts = dts;
            }
            None => self.last.push((f.track, kind, Last { dts, step: 0 })),
        }
        Some(Frame {
            pts: f.pts + offset,
            dts,
            ..f.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn f(track: TrackId, dts: Ticks, key: bool) -> Frame {
        Frame {
            track,
            pts: dts,
            dts,
            keyframe: key,
            data: Bytes::from_static(b"x"),
        }
    }

    #[test]
    fn items_follow_each_other() {
        let mut s = Splicer::default();
        s.begin(true);
        assert!(
            s.place(MediaKind::Audio, &f(AUDIO, 0, true)).is_none(),
            "audio waits for video"
        );
        let v = s.place(MediaKind::Video, &f(VIDEO, 9000, true)).unwrap();
        assert_eq!(v.dts, 0);
        let v = s.place(MediaKind::Video, &f(VIDEO, 12000, false)).unwrap();
        assert_eq!(v.dts, 3000);
        let a = s.place(MediaKind::Audio, &f(AUDIO, 9000, true)).unwrap();
        assert_eq!(a.dts, 0);
        // The next item starts from 1000 s: placed right after.
        s.begin(true);
        assert!(s
            .place(MediaKind::Video, &f(VIDEO, 90_000_000, false))
            .is_none());
        let v = s
            .place(MediaKind::Video, &f(VIDEO, 90_003_000, true))
            .unwrap();
        assert_eq!(v.dts, 6000);
        // An item that starts earlier in its own time still goes forward.
        s.begin(false);
        let a = s.place(MediaKind::Audio, &f(AUDIO, 0, true)).unwrap();
        assert!(a.dts > 6000);
    }

    /// An AudioMap's several audio tracks: each keeps its own clock (a
    /// second track's frame at the first's time is not a step back).
    #[test]
    fn audio_tracks_have_a_clock_each() {
        let mut s = Splicer::default();
        s.begin(false);
        let a = s.place(MediaKind::Audio, &f(AUDIO, 0, true)).unwrap();
        let b = s.place(MediaKind::Audio, &f(AUDIO + 1, 0, true)).unwrap();
        assert_eq!((a.dts, b.dts), (0, 0));
        assert!(s
            .place(MediaKind::Audio, &f(AUDIO + 1, 1920, true))
            .is_some());
        assert!(s.place(MediaKind::Audio, &f(AUDIO, 1920, true)).is_some());
        assert!(s.place(MediaKind::Audio, &f(AUDIO, 1920, true)).is_none());
    }
}
