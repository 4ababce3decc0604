//! HLS with MPEG-TS segments for players without LL-HLS (DECISIONS section
//! 9): `playlist.m3u8` -> `medialist_0_hls.m3u8` -> `seg_0_{n}_hls.ts`,
//! audio and video muxed together by the TS muxer the pushes use. A
//! segment starts on a video keyframe once the last one is at least
//! `SegmentDuration` long (audio alone: by duration).

use crate::media::{Frame, MediaKind, Track, TrackId, TICKS_PER_SECOND};
use crate::ts::Muxer;
use bytes::Bytes;
use std::collections::VecDeque;
use std::fmt::Write;
use std::time::Duration;

/// One finished segment.
#[derive(Debug, Clone)]
pub struct TsSegment {
    pub msn: u64,
    /// Seconds.
    pub duration: f64,
    pub data: Bytes,
    pub start_ms: i64,
    /// Ad-break edges (`:sendEvent` with `cue`) at the segment's start.
    pub cues: Vec<super::event::Cue>,
}

#[derive(Debug)]
pub struct TsHls {
    muxer: Option<Muxer>,
    pub segments: VecDeque<TsSegment>,
    current: Vec<u8>,
    /// (decode time, unix ms) of the segment being built.
    current_start: Option<(i64, i64)>,
    last_dts: i64,
    last_step: i64,
    next_msn: u64,
    target: i64,
    keep: usize,
    video: Option<TrackId>,
    base: Option<i64>,
    base_ms: i64,
    codecs: String,
    bandwidth: u64,
    resolution: Option<(u32, u32)>,
    pub max_segment: f64,
    pub ended: bool,
    /// Cues for the next segment, and those of the segment being built.
    cues: Vec<super::event::Cue>,
    segment_cues: Vec<super::event::Cue>,
    /// Segments past the live window kept on disk (`<HLS><DVR>`), and
    /// whether the playlist says `EXT-X-PLAYLIST-TYPE:EVENT`
    /// (`<EventPlaylistType>`, OME's).
    pub dvr: Option<super::dvr::Dvr>,
    pub event_type: bool,
}

impl TsHls {
    /// `None` when the TS muxer cannot carry the tracks.
    pub fn new(tracks: &[Track], segment: Duration, keep: usize, now_ms: i64) -> Option<Self> {
        let muxer = Muxer::with_id3(tracks).ok()?;
        let video = tracks.iter().find(|t| t.kind() == MediaKind::Video);
        let codecs: Vec<String> = tracks
            .iter()
            .filter_map(crate::fmp4::codecs_string)
            .collect();
        let bandwidth = tracks.iter().map(super::nominal_bitrate).sum();
        Some(TsHls {
            muxer: Some(muxer),
            segments: VecDeque::new(),
            current: Vec::new(),
            current_start: None,
            last_dts: 0,
            last_step: 0,
            next_msn: 0,
            target: (segment.as_secs_f64() * TICKS_PER_SECOND as f64) as i64,
            keep: keep.max(3),
            video: video.map(|t| t.id),
            base: None,
            base_ms: now_ms,
            codecs: codecs.join(","),
            bandwidth,
            resolution: video
                .and_then(|t| t.video)
                .map(|v| (v.width, v.height))
                .filter(|(w, h)| *w > 0 && *h > 0),
            max_segment: 0.0,
            ended: false,
            cues: Vec::new(),
            segment_cues: Vec::new(),
            dvr: None,
            event_type: false,
        })
    }

    /// A `:sendEvent`: an ID3 tag goes into the segment being built now, at
    /// the newest frame's time (HLS segments carry every track, so
    /// `eventType` does not narrow it); a cue marks the next segment.
    pub fn send_event(&mut self, e: &super::event::Event) {
        match &e.payload {
            super::event::Payload::Id3(tag) => {
                if let (Some(m), Some(base), Some(_)) =
                    (self.muxer.as_mut(), self.base, self.current_start)
                {
                    m.write_id3(base + self.last_dts, tag, &mut self.current);
                }
            }
            super::event::Payload::Cue(c) => {
                if self.cues.len() < 16 {
                    self.cues.push(*c);
                }
            }
        }
    }

    pub fn push(&mut self, frame: &Frame) {
        if self.ended {
            return; // concluded: the playlist stays as it is
        }
        let base = *self.base.get_or_insert(frame.dts);
        let dts = frame.dts - base;
        let due = self
            .current_start
            .is_none_or(|(start, _)| dts - start >= self.target);
        let cut = match self.video {
            Some(v) => frame.track == v && frame.keyframe && due,
            None => due,
        };
        if cut {
            self.close(dts);
            self.current_start = Some((dts, self.base_ms + dts / (TICKS_PER_SECOND / 1000)));
            self.segment_cues = std::mem::take(&mut self.cues);
        }
        if self.current_start.is_none() {
            return; // before the first keyframe
        }
        if let Some(m) = self.muxer.as_mut() {
            if let Err(e) = m.write_frame(frame, &mut self.current) {
                crate::debug!("hls mux: {e}");
            }
        }
        if dts > self.last_dts {
            self.last_step = dts - self.last_dts;
            self.last_dts = dts;
        }
    }

    fn close(&mut self, end_dts: i64) {
        let Some((start, start_ms)) = self.current_start.take() else {
            return;
        };
        if self.current.is_empty() {
            return;
        }
        let duration = (end_dts - start).max(0) as f64 / TICKS_PER_SECOND as f64;
        self.max_segment = self.max_segment.max(duration);
        self.segments.push_back(TsSegment {
            msn: self.next_msn,
            duration,
            data: std::mem::take(&mut self.current).into(),
            start_ms,
            cues: std::mem::take(&mut self.segment_cues),
        });
        self.next_msn += 1;
        if let (Some(d), Some(seg)) = (self.dvr.as_mut(), self.segments.back()) {
            d.add_ts(seg);
        }
        while self.segments.len() > self.keep {
            self.segments.pop_front();
        }
    }

    /// The stream ended: the last segment is complete.
    pub fn end(&mut self) {
        if self.ended {
            return;
        }
        let end = self.last_dts + self.last_step;
        self.close(end);
        self.ended = true;
    }

    pub fn segment(&self, msn: u64) -> Option<&TsSegment> {
        self.segments.iter().find(|s| s.msn == msn)
    }

    pub fn master(&self) -> String {
        let mut o = String::from("#EXTM3U\n#EXT-X-VERSION:3\n");
        let _ = write!(
            o,
            "#EXT-X-STREAM-INF:BANDWIDTH={},CODECS=\"{}\"",
            self.bandwidth, self.codecs
        );
        if let Some((w, h)) = self.resolution {
            let _ = write!(o, ",RESOLUTION={w}x{h}");
        }
        o.push_str("\nmedialist_0_hls.m3u8\n");
        o
    }

    /// The media playlist; `rewind` (OME's `_HLS_rewind`, default YES):
    /// with a DVR, the segments on disk before the live window first.
    pub fn media_playlist(&self, rewind: bool, utc_offset: i32) -> String {
        let configured = Duration::from_secs_f64(self.target as f64 / TICKS_PER_SECOND as f64);
        let target = super::target_duration(self.max_segment, configured);
        let live_first = self.segments.front().map(|s| s.msn);
        // (msn, duration, start_ms, cues) of every segment listed.
        let mut listed: Vec<(u64, f64, i64, &[super::event::Cue])> = Vec::new();
        let disk = self
            .dvr
            .as_ref()
            .filter(|_| rewind)
            .and_then(|d| d.track(super::dvr::TS_TRACK));
        if let (Some(d), Some(first)) = (disk, live_first) {
            listed.extend(
                d.segments
                    .iter()
                    .take_while(|x| x.msn < first)
                    .map(|x| (x.msn, x.duration, x.start_ms, &x.cues[..])),
            );
            if listed.last().is_some_and(|l| l.0 + 1 != first) {
                listed.clear();
            }
        }
        listed.extend(
            self.segments
                .iter()
                .map(|x| (x.msn, x.duration, x.start_ms, &x.cues[..])),
        );
        let first = listed.first().map_or(self.next_msn, |s| s.0);
        let mut o = format!(
            "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:{target}\n#EXT-X-MEDIA-SEQUENCE:{first}\n"
        );
        if self.event_type && self.dvr.is_some() {
            o.push_str("#EXT-X-PLAYLIST-TYPE:EVENT\n");
        }
        for (msn, duration, start_ms, cues) in listed {
            for cue in cues {
                super::playlist::write_cue(&mut o, *cue);
            }
            let _ = write!(
                o,
                "#EXT-X-PROGRAM-DATE-TIME:{}\n#EXTINF:{duration:.3},\nseg_0_{msn}_hls.ts\n",
                crate::clock::format_iso8601(start_ms, utc_offset),
            );
        }
        if self.ended {
            o.push_str("#EXT-X-ENDLIST\n");
        }
        o
    }
}

/// A file of the HLS (TS) URLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsFile {
    Master,
    MediaPlaylist,
    Segment(u64),
}

pub fn parse_file(name: &str) -> Option<TsFile> {
    match name {
        "playlist.m3u8" => Some(TsFile::Master),
        "medialist_0_hls.m3u8" => Some(TsFile::MediaPlaylist),
        _ => {
            let n = name.strip_prefix("seg_0_")?.strip_suffix("_hls.ts")?;
            if n.is_empty() || n.len() > 12 || !n.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            n.parse().ok().map(TsFile::Segment)
        }
    }
}
