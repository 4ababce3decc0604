//! HLS with MPEG-TS segments for players without LL-HLS (DECISIONS section
//! 9): `playlist.m3u8` -> `medialist_0_hls.m3u8` -> `seg_0_{n}_hls.ts`,
//! audio and video muxed together by the TS muxer the pushes use. A
//! segment starts on a video keyframe once the last one is at least
//! `SegmentDuration` long (audio alone: by duration).
//!
//! A stream of several video renditions (issue 43) is a [`TsLadder`]: one
//! variant per video track, `medialist_{i}_hls.m3u8` and
//! `seg_{i}_{n}_hls.ts`, each muxing its video with every audio track
//! (MPEG-TS has no separate audio renditions in HLS version 3; the
//! languages ride in each variant, players take the first). Segments
//! are cut at each variant's own keyframes: an encoder that keeps its
//! renditions' keyframes together keeps the numbers aligned.

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
    /// Its place in the ladder (`medialist_{index}_hls.m3u8`).
    index: usize,
    /// The tracks it muxes (others' frames are not its).
    tracks: Vec<TrackId>,
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
        Self::variant(0, tracks, segment, keep, now_ms)
    }

    fn variant(
        index: usize,
        tracks: &[Track],
        segment: Duration,
        keep: usize,
        now_ms: i64,
    ) -> Option<Self> {
        let muxer = Muxer::with_id3(tracks).ok()?;
        let video = tracks.iter().find(|t| t.kind() == MediaKind::Video);
        let mut codecs: Vec<String> = Vec::new();
        for c in tracks.iter().filter_map(crate::fmp4::codecs_string) {
            if !codecs.contains(&c) {
                codecs.push(c); // two languages of one codec: once
            }
        }
        let bandwidth = tracks.iter().map(super::nominal_bitrate).sum();
        Some(TsHls {
            index,
            tracks: tracks.iter().map(|t| t.id).collect(),
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
        if self.ended || !self.tracks.contains(&frame.track) {
            return; // concluded (the playlist stays as it is), or not its
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
        // A segment is kept for the whole window exactly as long as it is:
        // grown by doubling, its buffer had up to half again as much room
        // (glibc shrinks in place, or with `mremap` for a large one). The
        // next one starts with room for about as much, so it rarely grows.
        let mut data = std::mem::take(&mut self.current);
        data.shrink_to_fit();
        if !self.ended {
            self.current = Vec::with_capacity(data.len() + data.len() / 8);
        }
        self.segments.push_back(TsSegment {
            msn: self.next_msn,
            duration,
            data: data.into(),
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
        self.ended = true;
        self.close(end);
    }

    pub fn segment(&self, msn: u64) -> Option<&TsSegment> {
        self.segments.iter().find(|s| s.msn == msn)
    }

    /// Its `EXT-X-STREAM-INF` line and URI, at `bandwidth`.
    fn stream_inf(&self, o: &mut String, bandwidth: u64) {
        let _ = write!(
            o,
            "#EXT-X-STREAM-INF:BANDWIDTH={bandwidth},CODECS=\"{}\"",
            self.codecs
        );
        if let Some((w, h)) = self.resolution {
            let _ = write!(o, ",RESOLUTION={w}x{h}");
        }
        let _ = writeln!(o, "\nmedialist_{}_hls.m3u8", self.index);
    }

    /// The peak rate of its segments in the window (bits per second, 10%
    /// over for the container's own), else the nominal one.
    fn measured_bandwidth(&self) -> u64 {
        let peak = self
            .segments
            .iter()
            .filter(|s| s.duration > 0.1)
            .map(|s| (s.data.len() as f64 * 8.0 / s.duration) as u64)
            .max();
        peak.map_or(self.bandwidth, |p| p + p / 10)
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
                "#EXT-X-PROGRAM-DATE-TIME:{}\n#EXTINF:{duration:.3},\nseg_{}_{msn}_hls.ts\n",
                crate::clock::format_iso8601(start_ms, utc_offset),
                self.index,
            );
        }
        if self.ended {
            o.push_str("#EXT-X-ENDLIST\n");
        }
        o
    }
}

/// A stream's HLS (TS) variants: one, or one per video rendition.
#[derive(Debug)]
pub struct TsLadder {
    pub variants: Vec<TsHls>,
}

/// The most variants a ladder lists (as the renditions a publisher may
/// send: [`crate::rtmp::flv::MAX_TRACKS_PER_KIND`]).
pub const MAX_VARIANTS: usize = 8;

impl TsLadder {
    /// `ladder`: a variant per video track when there are several; else
    /// one, of the first video track with every other track (a DVR keeps
    /// one). `None` when the TS muxer cannot carry the tracks.
    pub fn new(
        tracks: &[Track],
        segment: Duration,
        keep: usize,
        now_ms: i64,
        ladder: bool,
    ) -> Option<Self> {
        let videos: Vec<&Track> = tracks
            .iter()
            .filter(|t| t.kind() == MediaKind::Video)
            .take(MAX_VARIANTS)
            .collect();
        let others = tracks.iter().filter(|t| t.kind() != MediaKind::Video);
        let sets: Vec<Vec<Track>> = if ladder && videos.len() > 1 {
            videos
                .iter()
                .map(|v| std::iter::once(*v).chain(others.clone()).cloned().collect())
                .collect()
        } else {
            vec![crate::media::first_layer(tracks)]
        };
        let variants = sets
            .iter()
            .enumerate()
            .map(|(i, set)| TsHls::variant(i, set, segment, keep, now_ms))
            .collect::<Option<Vec<_>>>()?;
        Some(TsLadder { variants })
    }

    pub fn push(&mut self, frame: &Frame) {
        for v in &mut self.variants {
            v.push(frame);
        }
    }

    pub fn end(&mut self) {
        for v in &mut self.variants {
            v.end();
        }
    }

    pub fn send_event(&mut self, e: &super::event::Event) {
        for v in &mut self.variants {
            v.send_event(e);
        }
    }

    /// The first variant: the one a DVR keeps, and a one-variant stream's.
    pub fn first(&self) -> Option<&TsHls> {
        self.variants.first()
    }

    pub fn first_mut(&mut self) -> Option<&mut TsHls> {
        self.variants.first_mut()
    }

    /// `playlist.m3u8`: one variant as ever (its nominal rate); a
    /// ladder's each with its segments' measured peak, so players rank
    /// them.
    pub fn master(&self) -> String {
        let mut o = String::from("#EXTM3U\n#EXT-X-VERSION:3\n");
        let several = self.variants.len() > 1;
        for v in &self.variants {
            let rate = if several {
                v.measured_bandwidth()
            } else {
                v.bandwidth
            };
            v.stream_inf(&mut o, rate);
        }
        o
    }
}

/// A file of the HLS (TS) URLs (variant numbers are the ladder's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsFile {
    Master,
    MediaPlaylist(usize),
    Segment(usize, u64),
}

pub fn parse_file(name: &str) -> Option<TsFile> {
    let number = |n: &str, most: usize| -> Option<u64> {
        if n.is_empty() || n.len() > most || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        n.parse().ok()
    };
    if name == "playlist.m3u8" {
        return Some(TsFile::Master);
    }
    if let Some(i) = name
        .strip_prefix("medialist_")
        .and_then(|n| n.strip_suffix("_hls.m3u8"))
    {
        return Some(TsFile::MediaPlaylist(number(i, 1)? as usize));
    }
    let (i, n) = name
        .strip_prefix("seg_")?
        .strip_suffix("_hls.ts")?
        .split_once('_')?;
    Some(TsFile::Segment(number(i, 1)? as usize, number(n, 12)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::VideoParams;
    use crate::rtmp::flv::tests::{aac_track, h264_track};

    fn sized(id: TrackId, width: u32, height: u32) -> Track {
        Track {
            id,
            video: Some(VideoParams {
                width,
                height,
                framerate: 30.0,
            }),
            ..h264_track()
        }
    }

    /// Each of `videos` at 30 fps, a keyframe a second, `bytes` a frame;
    /// one AAC track (id 2); for `seconds`.
    fn feed(ladder: &mut TsLadder, videos: &[(TrackId, usize)], seconds: i64) {
        for i in 0..seconds * 30 {
            for &(id, bytes) in videos {
                let key = i % 30 == 0;
                let mut data = (bytes as u32 + 1).to_be_bytes().to_vec();
                data.push(if key { 0x65 } else { 0x41 });
                data.resize(bytes + 5, 7);
                ladder.push(&Frame {
                    track: id,
                    pts: i * 3000,
                    dts: i * 3000,
                    keyframe: key,
                    data: data.into(),
                });
            }
            ladder.push(&Frame {
                track: 2,
                pts: i * 3000,
                dts: i * 3000,
                keyframe: true,
                data: vec![0x21; 20].into(),
            });
        }
    }

    /// Three renditions: three variants, each its video with the audio,
    /// ranked by their measured rates, their segments numbered alike.
    /// With a DVR (`ladder` false), one: the first rendition's.
    #[test]
    fn renditions_are_variants() {
        let tracks = [
            sized(1, 1280, 720),
            sized(3, 640, 360),
            sized(4, 320, 180),
            aac_track(),
        ];
        let mut ladder = TsLadder::new(&tracks, Duration::from_secs(1), 5, 0, true).unwrap();
        assert_eq!(ladder.variants.len(), 3);
        feed(&mut ladder, &[(1, 4000), (3, 1500), (4, 500)], 4);
        let master = ladder.master();
        let infs: Vec<&str> = master
            .lines()
            .filter(|l| l.starts_with("#EXT-X-STREAM-INF"))
            .collect();
        assert_eq!(infs.len(), 3, "{master}");
        let rate = |l: &str| -> u64 {
            l.split("BANDWIDTH=")
                .nth(1)
                .unwrap()
                .split(',')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        assert!(
            rate(infs[0]) > rate(infs[1]) && rate(infs[1]) > rate(infs[2]),
            "{master}"
        );
        assert!(infs[1].contains("RESOLUTION=640x360"), "{master}");
        for i in 0..3 {
            assert!(
                master.contains(&format!("\nmedialist_{i}_hls.m3u8\n")),
                "{master}"
            );
        }
        let lists: Vec<String> = ladder
            .variants
            .iter()
            .map(|v| v.media_playlist(true, 0))
            .collect();
        assert!(lists[2].contains("\nseg_2_1_hls.ts\n"), "{}", lists[2]);
        let numbers = |l: &str| -> Vec<String> {
            l.lines()
                .filter(|x| x.starts_with("seg_"))
                .map(|x| x.split('_').nth(2).unwrap().to_string())
                .collect()
        };
        assert_eq!(numbers(&lists[0]), numbers(&lists[2]));
        // Variant 1 holds its video and the audio, not the others'.
        let seg = &ladder.variants[1].segments[0].data;
        let pids: std::collections::BTreeSet<u16> = seg
            .chunks(188)
            .map(|p| u16::from_be_bytes([p[1] & 0x1F, p[2]]))
            .collect();
        assert_eq!(pids.len(), 4, "PAT, PMT, video, audio: {pids:?}");
        let one = TsLadder::new(&tracks, Duration::from_secs(1), 5, 0, false).unwrap();
        assert_eq!(one.variants.len(), 1);
        assert_eq!(one.variants[0].tracks, [1, 2]);
    }

    #[test]
    fn file_names() {
        assert_eq!(parse_file("playlist.m3u8"), Some(TsFile::Master));
        assert_eq!(
            parse_file("medialist_2_hls.m3u8"),
            Some(TsFile::MediaPlaylist(2))
        );
        assert_eq!(parse_file("seg_1_42_hls.ts"), Some(TsFile::Segment(1, 42)));
        for bad in [
            "medialist__hls.m3u8",
            "medialist_10_hls.m3u8",
            "seg_0__hls.ts",
            "seg_x_1_hls.ts",
            "seg_0_1_2_hls.ts",
            "seg_0_1234567890123_hls.ts",
        ] {
            assert_eq!(parse_file(bad), None, "{bad}");
        }
    }
}
