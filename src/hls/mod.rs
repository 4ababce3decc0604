//! LL-HLS packaging of one live stream (DECISIONS section 9): each track is
//! cut into CMAF parts (every `ChunkDuration`) and segments (from a video
//! keyframe, at least `SegmentDuration`), held in memory once for every
//! viewer, and described by OME-shaped playlists: a master with
//! `EXT-X-MEDIA` for audio and one chunklist per track with parts, preload
//! hints, rendition reports, program date-time and delta updates.
//!
//! Sans-IO: frames and `now` in; playlists, init sections, parts and
//! segments out as shared [`Bytes`].

pub mod dump;
pub mod dvr;
pub mod event;
pub mod manager;
pub mod memory;
pub mod playlist;
pub mod serve;
pub mod session;
pub mod ts;

use crate::fmp4::{self, Sample, NON_SYNC_SAMPLE, SYNC_SAMPLE};
use crate::media::{Frame, MediaKind, Track, TrackId, TICKS_PER_SECOND};
use bytes::Bytes;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// Per-application LL-HLS settings (`<Publishers><LLHLS>`).
#[derive(Debug, Clone, PartialEq)]
pub struct LlhlsConfig {
    /// Part target (ChunkDuration).
    pub part_target: Duration,
    /// Segment target (SegmentDuration).
    pub segment_target: Duration,
    /// Segments kept (SegmentCount, at least 3).
    pub segment_count: usize,
    /// PartHoldBack; zero means 3 x the part target.
    pub part_hold_back: Duration,
    /// How long a playlist asked for before the first complete segment
    /// waits for it (`<FirstSegmentTimeout>`); zero: three segment targets.
    pub first_segment_timeout: Duration,
}

impl Default for LlhlsConfig {
    fn default() -> Self {
        LlhlsConfig {
            part_target: Duration::from_millis(500),
            segment_target: Duration::from_secs(6),
            segment_count: 10,
            part_hold_back: Duration::ZERO,
            first_segment_timeout: Duration::ZERO,
        }
    }
}

impl LlhlsConfig {
    /// How long a playlist waits for the stream's first segment.
    pub fn first_segment_wait(&self) -> Duration {
        if self.first_segment_timeout.is_zero() {
            3 * self.segment_target.max(Duration::from_secs(1))
        } else {
            self.first_segment_timeout
        }
    }

    pub fn hold_back(&self) -> Duration {
        if self.part_hold_back.is_zero() {
            self.part_target * 3
        } else {
            self.part_hold_back
        }
    }
}

/// A track's bit rate for `BANDWIDTH`: measured, else a nominal 2.5 Mb/s
/// for video and 128 kb/s for audio.
pub fn nominal_bitrate(track: &Track) -> u64 {
    match (track.bitrate, track.kind()) {
        (0, MediaKind::Video) => 2_500_000,
        (0, _) => 128_000,
        (b, _) => u64::from(b),
    }
}

/// EXT-X-TARGETDURATION: every EXTINF rounded to the nearest integer is at
/// most this (RFC 8216bis 4.4.3.1); never below the configured target.
pub fn target_duration(longest_segment: f64, configured: Duration) -> u64 {
    longest_segment
        .round()
        .max(configured.as_secs_f64().ceil())
        .max(1.0) as u64
}

/// One part: a `moof` + `mdat`.
#[derive(Debug, Clone)]
pub struct Part {
    pub data: Bytes,
    /// Where `data` is in the track's memory file, when it is there.
    pub file: Option<memory::FileRange>,
    /// Seconds.
    pub duration: f64,
    /// Starts with a keyframe (every audio part does).
    pub independent: bool,
    /// An ad-break edge at this part (`:sendEvent` with `cue`).
    pub cue: Option<event::Cue>,
}

impl Part {
    /// The part's bytes as every viewer gets them.
    pub fn shared(&self) -> memory::Shared {
        memory::Shared {
            bytes: self.data.clone(),
            file: self.file.clone(),
        }
    }
}

/// One segment: its parts (a segment is served as its parts back to back:
/// the bytes are held once).
#[derive(Debug, Clone)]
pub struct Segment {
    /// Media sequence number.
    pub msn: u64,
    pub parts: Vec<Part>,
    /// The segment is complete (it has its EXTINF).
    pub complete: bool,
    /// Unix ms of the segment's first sample (EXT-X-PROGRAM-DATE-TIME).
    pub start_ms: i64,
    /// The track's codec configuration changed before it: an
    /// `EXT-X-DISCONTINUITY` and its own `EXT-X-MAP` come first.
    pub discontinuity: bool,
    /// The init section it is decoded with (see [`TrackOutput::init_version`]).
    pub init_version: u32,
}

impl Segment {
    pub fn duration(&self) -> f64 {
        self.parts.iter().map(|p| p.duration).sum()
    }
}

impl TrackOutput {
    /// Bits per second of the parts held (0 before a second of them).
    pub fn measured_bitrate(&self) -> u64 {
        let (mut bytes, mut secs) = (0usize, 0.0f64);
        for p in self.segments.iter().flat_map(|s| &s.parts) {
            bytes += p.data.len();
            secs += p.duration;
        }
        if secs < 1.0 {
            return 0;
        }
        (bytes as f64 * 8.0 / secs) as u64
    }
}

/// One track's parts and segments.
#[derive(Debug)]
pub struct TrackOutput {
    pub track: Track,
    /// The fMP4 track id (1 for every track: one track per init section).
    pub init: Bytes,
    timescale: u32,
    /// Complete segments and the one being built (last).
    pub segments: VecDeque<Segment>,
    /// Samples of the part being built, and their data.
    pending: Vec<(Frame, u64)>,
    /// The decode time (track timescale) of the first pending sample.
    fragment_seq: u32,
    /// Longest segment so far, seconds (TARGETDURATION).
    pub max_segment: f64,
    /// Last sample duration (estimates the next one).
    last_duration: u32,
    ended: bool,
    /// The memory file parts are kept in (none: the heap).
    memory: Option<memory::PartFile>,
    /// ID3 tags for the next part (`emsg` boxes before its `moof`), and
    /// the ids they get.
    events: Vec<Bytes>,
    event_id: u32,
    /// A cue for the next part.
    cue: Option<event::Cue>,
    /// Bumped at each change of codec configuration (0: the first init).
    pub init_version: u32,
    /// Earlier init sections, for the segments still held that use them.
    old_inits: Vec<(u32, Bytes)>,
    /// The next segment starts after a change (a discontinuity).
    discontinuity_pending: bool,
    /// Discontinuities that left the window (EXT-X-DISCONTINUITY-SEQUENCE).
    pub discontinuity_sequence: u64,
    /// The oldest init section a DVR segment still uses (kept with the
    /// ones the live window uses).
    dvr_oldest_init: Option<u32>,
}

impl TrackOutput {
    fn new(track: Track) -> Result<Self, fmp4::Fmp4Error> {
        let mut init = Vec::new();
        fmp4::write_init(&track, 1, &mut init)?;
        Ok(TrackOutput {
            timescale: fmp4::timescale(&track),
            track,
            init: init.into(),
            segments: VecDeque::new(),
            pending: Vec::new(),
            fragment_seq: 0,
            max_segment: 0.0,
            last_duration: 0,
            ended: false,
            memory: None,
            events: Vec::new(),
            event_id: 0,
            cue: None,
            init_version: 0,
            old_inits: Vec::new(),
            discontinuity_pending: false,
            discontinuity_sequence: 0,
            dvr_oldest_init: None,
        })
    }

    /// The init section of version `v` (the current one or one a held
    /// segment still uses).
    pub fn init_of(&self, v: u32) -> Option<&Bytes> {
        if v == self.init_version {
            return Some(&self.init);
        }
        self.old_inits.iter().find(|(x, _)| *x == v).map(|(_, b)| b)
    }

    /// The codec configuration changed: what is pending goes out as the
    /// last part of the current segment, and the next segment starts with
    /// a discontinuity and the new init section.
    fn retrack(&mut self, track: Track) -> Result<bool, fmp4::Fmp4Error> {
        let mut init = Vec::new();
        fmp4::write_init(&track, 1, &mut init)?;
        if init == self.init[..] {
            // Only what the init section does not say (a stated bit rate).
            self.track = track;
            return Ok(false);
        }
        self.close_part(None);
        self.close_segment();
        let old = std::mem::replace(&mut self.init, init.into());
        self.old_inits.push((self.init_version, old));
        self.init_version += 1;
        self.timescale = fmp4::timescale(&track);
        self.track = track;
        self.discontinuity_pending = true;
        Ok(true)
    }

    pub fn kind(&self) -> MediaKind {
        self.track.kind()
    }

    /// A decode time in this track's timescale.
    fn to_scale(&self, ticks: i64) -> u64 {
        (ticks.max(0) as u128 * u128::from(self.timescale) / TICKS_PER_SECOND as u128) as u64
    }

    /// The newest segment's sequence number and its number of parts.
    pub fn last_part(&self) -> Option<(u64, usize)> {
        let s = self.segments.back()?;
        match s.parts.len() {
            0 => self
                .segments
                .iter()
                .rev()
                .nth(1)
                .map(|p| (p.msn, p.parts.len() - 1)),
            n => Some((s.msn, n - 1)),
        }
    }

    /// Whether part `part` of segment `msn` exists (or the segment is
    /// complete, for `part` None).
    pub fn has(&self, msn: u64, part: Option<usize>) -> bool {
        let Some(s) = self.segments.iter().find(|s| s.msn == msn) else {
            return self.segments.back().is_some_and(|b| b.msn > msn);
        };
        match part {
            None => s.complete,
            Some(p) => p < s.parts.len() || s.complete,
        }
    }

    pub fn segment(&self, msn: u64) -> Option<&Segment> {
        self.segments.iter().find(|s| s.msn == msn)
    }

    /// A complete segment's bytes: its parts, in order.
    pub fn segment_data(&self, msn: u64) -> Option<Vec<memory::Shared>> {
        let s = self.segment(msn).filter(|s| s.complete)?;
        Some(s.parts.iter().map(Part::shared).collect())
    }

    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Closes the part being built (when it has samples): `next_dts` is the
    /// decode time of the sample after it (its last sample's end).
    fn close_part(&mut self, next_dts: Option<i64>) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        let mut samples = Vec::with_capacity(self.pending.len());
        let mut data: Vec<&[u8]> = Vec::with_capacity(self.pending.len());
        for (i, (f, dt)) in self.pending.iter().enumerate() {
            let next = match self.pending.get(i + 1) {
                Some((_, n)) => *n,
                None => match next_dts {
                    Some(t) => self.to_scale(t),
                    None => dt + u64::from(self.last_duration.max(1)),
                },
            };
            let duration = next.saturating_sub(*dt).min(u64::from(u32::MAX)) as u32;
            let cts = f.pts.saturating_sub(f.dts) * i64::from(self.timescale) / TICKS_PER_SECOND;
            samples.push(Sample {
                duration,
                size: f.data.len() as u32,
                flags: if f.keyframe {
                    SYNC_SAMPLE
                } else {
                    NON_SYNC_SAMPLE
                },
                cts_offset: cts.clamp(0, i64::from(i32::MAX)) as i32,
            });
            data.push(&f.data);
        }
        self.fragment_seq += 1;
        let base = self.pending[0].1;
        let mut out = Vec::new();
        for tag in self.events.drain(..) {
            self.event_id = self.event_id.wrapping_add(1);
            fmp4::write_emsg(
                &mut out,
                self.timescale,
                base,
                self.event_id,
                event::ID3_SCHEME,
                &tag,
            );
        }
        fmp4::write_fragment(&mut out, self.fragment_seq, 1, base, &samples, &data);
        let ticks: u64 = samples.iter().map(|s| u64::from(s.duration)).sum();
        let independent = self.pending[0].0.keyframe;
        if let Some(last) = samples.last() {
            self.last_duration = last.duration;
        }
        self.pending.clear();
        let kept = match self.memory.as_mut() {
            Some(m) => m.keep(out),
            None => Bytes::from(out).into(),
        };
        if let Some(seg) = self.segments.back_mut() {
            seg.parts.push(Part {
                data: kept.bytes,
                file: kept.file,
                duration: ticks as f64 / f64::from(self.timescale),
                independent,
                cue: self.cue.take(),
            });
        }
        true
    }

    /// Completes the segment being built.
    fn close_segment(&mut self) {
        if let Some(seg) = self.segments.back_mut() {
            if !seg.complete && !seg.parts.is_empty() {
                seg.complete = true;
                self.max_segment = self.max_segment.max(seg.duration());
            }
        }
    }

    fn open_segment(&mut self, msn: u64, start_ms: i64, keep: usize) {
        self.segments.push_back(Segment {
            msn,
            parts: Vec::new(),
            complete: false,
            start_ms,
            discontinuity: std::mem::take(&mut self.discontinuity_pending),
            init_version: self.init_version,
        });
        while self.segments.len() > keep + 1 {
            if let Some(gone) = self.segments.pop_front() {
                if gone.discontinuity {
                    self.discontinuity_sequence += 1;
                }
            }
        }
        let oldest = self
            .segments
            .front()
            .map_or(self.init_version, |s| s.init_version)
            .min(self.dvr_oldest_init.unwrap_or(u32::MAX));
        self.old_inits.retain(|(v, _)| *v >= oldest);
    }

    fn pending_ticks(&self, upto: i64) -> u64 {
        match self.pending.first() {
            Some((_, first)) => self.to_scale(upto).saturating_sub(*first),
            None => 0,
        }
    }
}

/// What changed after a frame: the parts and segments now complete (the
/// blocked playlist requests waiting for them can be answered).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub new_part: bool,
}

/// Events waiting for a track's next part, at most (a stream that makes
/// no parts does not hold every event sent to it).
const MAX_PENDING_EVENTS: usize = 64;

/// (track, `_HLS_skip` delta update, `_HLS_rewind`).
type RenderedKey = (u32, bool, bool);

/// A rendered chunklist: the stream's version and the UTC offset it was
/// rendered for, and its text.
#[derive(Debug)]
struct Rendered {
    version: u64,
    utc_offset: i32,
    text: Bytes,
}

/// A stream's LL-HLS outputs.
#[derive(Debug)]
pub struct StreamHls {
    pub config: LlhlsConfig,
    /// Fixed for the life of the stream (the URLs' `{key}`).
    pub key: String,
    pub tracks: Vec<TrackOutput>,
    /// The decode time everything is counted from.
    base_dts: Option<i64>,
    /// Unix ms at `base_dts`.
    base_ms: i64,
    /// The decode time the current segment of each video track started at
    /// (audio segments follow the first video track's).
    segment_start: Vec<(TrackId, i64)>,
    /// Bumped whenever a playlist would read differently (a part, a
    /// segment, the end).
    version: u64,
    /// Chunklists as last rendered, shared by every viewer until the
    /// version moves.
    rendered: RefCell<HashMap<RenderedKey, Rendered>>,
    /// Segments past the live window kept on disk (`<DVR>`).
    pub dvr: Option<dvr::Dvr>,
}

impl StreamHls {
    /// `tracks`: the stream's tracks; those fMP4 cannot carry are left out.
    pub fn new(tracks: &[Track], config: LlhlsConfig, key: String, now_ms: i64) -> Self {
        let tracks = tracks
            .iter()
            .filter_map(|t| TrackOutput::new(t.clone()).ok())
            .collect();
        StreamHls {
            config,
            key,
            tracks,
            base_dts: None,
            base_ms: now_ms,
            segment_start: Vec::new(),
            version: 0,
            rendered: RefCell::default(),
            dvr: None,
        }
    }

    /// Keeps the stream's complete segments on disk from now on, the
    /// chunklists listing `window` of them (see [`dvr`]).
    pub fn keep_dvr(&mut self, dvr: dvr::Dvr) {
        self.dvr = Some(dvr);
        for i in 0..self.tracks.len() {
            self.sync_dvr(i);
        }
    }

    /// Hands track `i`'s newly complete segments to the DVR.
    fn sync_dvr(&mut self, i: usize) {
        let Some(d) = self.dvr.as_mut() else {
            return;
        };
        let t = &mut self.tracks[i];
        let id = t.track.id;
        let after = d.last_msn(id);
        for seg in t
            .segments
            .iter()
            .filter(|s| s.complete && after.is_none_or(|a| s.msn > a))
        {
            d.add(id, seg);
        }
        t.dvr_oldest_init = d.track(id).and_then(|x| x.oldest_init());
    }

    /// Takes a `:sendEvent` into the next part of each track it names (a
    /// tag as an `emsg`, a cue as a playlist tag); `urgent` cuts the parts
    /// being built now. True when that made a new part.
    pub fn send_event(&mut self, e: &event::Event) -> bool {
        let mut new_part = false;
        for t in &mut self.tracks {
            let wanted = match e.tracks {
                event::Tracks::All => true,
                event::Tracks::Video => t.kind() == MediaKind::Video,
                event::Tracks::Audio => t.kind() == MediaKind::Audio,
            };
            if !wanted || t.ended {
                continue;
            }
            let cut = e.urgent && !t.segments.is_empty();
            match &e.payload {
                // The tag rides in the part cut now (urgent) or the next.
                event::Payload::Id3(tag) => {
                    if t.events.len() >= MAX_PENDING_EVENTS {
                        crate::warn!("LL-HLS: more than {MAX_PENDING_EVENTS} events wait for a part; the oldest is dropped");
                        t.events.remove(0);
                    }
                    t.events.push(tag.clone());
                    if cut {
                        new_part |= t.close_part(None);
                    }
                }
                // A break starts (or ends) with the part after the call:
                // urgent cuts the current one so that part starts now.
                event::Payload::Cue(c) => {
                    if cut {
                        new_part |= t.close_part(None);
                    }
                    t.cue = Some(*c);
                }
            }
        }
        if new_part {
            self.version += 1;
        }
        new_part
    }

    /// The stream's tracks changed configuration (a scheduled channel's
    /// next item encoded otherwise): the same URLs go on, each changed
    /// track with a discontinuity and a new init section from its next
    /// segment. False when the tracks are not the same set (then the
    /// caller starts a new packager).
    pub fn retrack(&mut self, tracks: &[Track]) -> bool {
        let same_set = tracks.len() == self.tracks.len()
            && self.tracks.iter().all(|t| {
                tracks
                    .iter()
                    .any(|n| n.id == t.track.id && n.codec.kind() == t.kind())
            });
        if !same_set || self.is_ended() {
            return false;
        }
        let mut changed = false;
        for t in &mut self.tracks {
            let Some(n) = tracks.iter().find(|n| n.id == t.track.id) else {
                return false;
            };
            if *n != t.track {
                match t.retrack(n.clone()) {
                    Ok(c) => changed |= c,
                    Err(_) => return false,
                }
            }
        }
        if changed {
            // Every video track opens its next segment at its next keyframe.
            self.segment_start.clear();
            self.version += 1;
            for i in 0..self.tracks.len() {
                self.sync_dvr(i);
            }
        }
        true
    }

    /// Keeps parts in memory files from now on (see [`memory`]); where the
    /// system has none they stay on the heap.
    pub fn keep_parts_in_memory_files(&mut self) {
        for t in &mut self.tracks {
            match memory::PartFile::new() {
                Ok(f) => t.memory = Some(f),
                Err(e) => {
                    crate::debug!("LL-HLS parts on the heap (no memory file: {e})");
                    return;
                }
            }
        }
    }

    /// A track's chunklist (`skip`: the `_HLS_skip` delta update), rendered
    /// once per change of the stream and shared by every viewer.
    pub fn chunklist(&self, t: &TrackOutput, skip: bool, rewind: bool, utc_offset: i32) -> Bytes {
        let rewind = rewind && self.dvr.is_some();
        let key = (t.track.id, skip, rewind);
        if let Some(r) = self.rendered.borrow().get(&key) {
            if r.version == self.version && r.utc_offset == utc_offset {
                return r.text.clone();
            }
        }
        let text = Bytes::from(playlist::chunklist(self, t, skip, rewind, utc_offset));
        let r = Rendered {
            version: self.version,
            utc_offset,
            text: text.clone(),
        };
        self.rendered.borrow_mut().insert(key, r);
        text
    }

    fn has_video(&self) -> bool {
        self.tracks.iter().any(|t| t.kind() == MediaKind::Video)
    }

    pub fn track(&self, id: TrackId) -> Option<&TrackOutput> {
        self.tracks.iter().find(|t| t.track.id == id)
    }

    /// Adds a frame; returns whether a part was completed.
    pub fn push(&mut self, frame: &Frame) -> Progress {
        if self.is_ended() {
            return Progress::default(); // concluded: the playlists stay as they are
        }
        let has_video = self.has_video();
        let base = *self.base_dts.get_or_insert(frame.dts);
        let dts = frame.dts - base;
        let at_ms = self.base_ms + dts / (TICKS_PER_SECOND / 1000);
        let part_target = self.config.part_target.as_secs_f64();
        let seg_target =
            (self.config.segment_target.as_secs_f64() * TICKS_PER_SECOND as f64) as i64;
        let keep = self.config.segment_count.max(3);
        let Some(i) = self.tracks.iter().position(|t| t.track.id == frame.track) else {
            return Progress::default();
        };
        let is_video = self.tracks[i].kind() == MediaKind::Video;
        // A new segment: video at a keyframe once the segment is long
        // enough; audio when video has started one (same sequence number),
        // or by its own length in a stream without video.
        let first_video = self.tracks.iter().find(|t| t.kind() == MediaKind::Video);
        let video_msn = first_video.and_then(|t| t.segments.back().map(|s| s.msn));
        let start_of = |id: TrackId| {
            self.segment_start
                .iter()
                .find(|(t, _)| *t == id)
                .map(|(_, s)| *s)
        };
        let video_start = first_video.and_then(|t| start_of(t.track.id));
        let is_first_video = first_video.is_some_and(|v| v.track.id == frame.track);
        let t = &self.tracks[i];
        let open: Option<u64> = if is_video {
            // The first segment ends at the first keyframe a part target
            // in, not a segment target: the playlists are held until a
            // segment is complete, and a player let in then starts at the
            // newest independent part before the hold-back, so behind a
            // 6 s first segment it starts 6 s behind live (hls.js over a
            // WHIP source with OME's config: 6.2 s, where OME gave 1.7 s).
            let target = match t.segments.len() {
                1 if !t.segments[0].complete => {
                    ((part_target * TICKS_PER_SECOND as f64) as i64).min(seg_target)
                }
                _ => seg_target,
            };
            let due =
                t.segments.is_empty() || start_of(frame.track).is_none_or(|s| dts - s >= target);
            (frame.keyframe && due).then(|| {
                let own = t.segments.back().map_or(0, |s| s.msn + 1);
                // Other video tracks (renditions) start their numbering
                // where the first's is at the same time: a player
                // switching between them by sequence number finds the same
                // moment (with keyframes aligned, they then stay in step;
                // numbers within a track never skip).
                match (is_first_video, video_msn, video_start) {
                    (false, Some(vm), Some(vs)) if t.segments.is_empty() => {
                        let near = (dts - vs).abs() * 2 < seg_target;
                        let aligned = if near || dts < vs { vm } else { vm + 1 };
                        aligned.max(own)
                    }
                    _ => own,
                }
            })
        } else if has_video {
            match (video_msn, t.segments.back(), video_start) {
                (Some(vm), last, Some(start))
                    if dts >= start && last.is_none_or(|l| l.msn < vm) =>
                {
                    Some(vm)
                }
                _ => None,
            }
        } else {
            let due = t
                .segments
                .back()
                .is_none_or(|seg| (at_ms - seg.start_ms) as f64 * 90.0 >= seg_target as f64);
            due.then(|| t.segments.back().map_or(0, |s| s.msn + 1))
        };
        if is_video && open.is_some() {
            match self
                .segment_start
                .iter_mut()
                .find(|(t, _)| *t == frame.track)
            {
                Some(s) => s.1 = dts,
                None => self.segment_start.push((frame.track, dts)),
            }
        }
        let t = &mut self.tracks[i];
        if open.is_none() && t.segments.back().is_none_or(|s| s.complete) {
            // Before the first segment (video waits for a keyframe, audio
            // for video), or after a change of configuration closed the
            // last: nothing to attach to.
            return Progress::default();
        }
        let mut progress = Progress::default();
        if let Some(msn) = open {
            progress.new_part |= t.close_part(Some(dts));
            t.close_segment();
            t.open_segment(msn, at_ms, keep);
        } else {
            // Close the part when this frame would take it past the target.
            // This frame's duration is not known yet: estimate it by the
            // mean interval of the part's frames (the last interval alone
            // is 33 or 34 ms at 30 fps with millisecond timestamps, which
            // cut 0.5 s parts one frame short and left a one-frame part at
            // the end of every segment).
            let pending = t.pending_ticks(dts) as f64 / f64::from(t.timescale);
            let est = match t.pending.len() {
                0 => 0.0,
                n => pending / n as f64,
            };
            // A keyframe also closes a part that has 85% of its target
            // (the least a part that is not a segment's last may hold,
            // RFC 8216bis 4.4.4.9), so the next part begins with it:
            // INDEPENDENT, where a player may start. A publisher whose
            // keyframes are asked for (WebRTC) sends them off the parts'
            // grid.
            let keyframe_cut = is_video && frame.keyframe && pending >= part_target * 0.85;
            if !t.pending.is_empty() && (keyframe_cut || pending + est > part_target * 1.001) {
                progress.new_part |= t.close_part(Some(dts));
            }
        }
        let scaled = t.to_scale(dts);
        let mut f = frame.clone();
        f.dts = dts;
        f.pts = frame.pts - base;
        t.pending.push((f, scaled));
        if progress.new_part || open.is_some() {
            self.version += 1;
        }
        if open.is_some() {
            self.sync_dvr(i);
        }
        progress
    }

    /// Ended (the stream, or `:concludeHlsLive`): nothing more is added.
    pub fn is_ended(&self) -> bool {
        !self.tracks.is_empty() && self.tracks.iter().all(|t| t.ended)
    }

    /// The stream ended: the last parts and segments are completed.
    pub fn end(&mut self) {
        if self.is_ended() {
            return;
        }
        self.version += 1;
        for t in &mut self.tracks {
            t.close_part(None);
            t.close_segment();
            t.ended = true;
        }
        for i in 0..self.tracks.len() {
            self.sync_dvr(i);
        }
    }
}

/// Drives the packager and the URL parser with arbitrary input (the fuzz
/// target and a property test): frames of any timing and size, then every
/// playlist and a file name made of the rest.
pub mod fuzz {
    use super::*;
    use crate::media::{AudioParams, Codec, CodecConfig};

    /// An HLS dump request (first line: JSON) and output path macros with
    /// a stream name (the rest): a path never leaves its root.
    pub fn fuzz_dump_request(data: &[u8]) {
        let text = String::from_utf8_lossy(data);
        let (json, name) = text.split_at(text.find('\n').unwrap_or(text.len()));
        if let Ok(req) = serde_json::from_str::<dump::StartDumpRequest>(json) {
            if let Ok(spec) = dump::validate_start(req, "v", "a", Some("/srv/d"), 0) {
                // panic-audit: fuzzing only; a path outside the root is the bug it finds.
                assert!(spec.output_path.starts_with("/srv/d"));
            }
        }
        let _ = dump::expand_output_path(json, "v", "a", name, 0, 0);
    }

    pub fn fuzz_packager(data: &[u8]) {
        let (video, audio) = (h264(), aac());
        let config = LlhlsConfig {
            part_target: Duration::from_millis(200),
            segment_target: Duration::from_secs(1),
            segment_count: 3,
            part_hold_back: Duration::ZERO,
            first_segment_timeout: Duration::ZERO,
        };
        let mut s = StreamHls::new(&[video, audio], config, "k".into(), 0);
        // With a DVR of a few seconds: segments leave memory, and the
        // window, as the frames come.
        s.keep_dvr(dvr::Dvr::new(
            std::path::Path::new("/fuzz"),
            "k",
            Duration::from_secs(4),
            1,
        ));
        let mut rest = data;
        while rest.len() >= 6 {
            let (head, tail) = rest.split_at(6);
            let dts = i64::from(i16::from_be_bytes([head[0], head[1]])) * 1000;
            let pts = dts + i64::from(head[2]) * 100;
            let len = usize::from(head[4]).min(tail.len());
            s.push(&Frame {
                track: 1 + u32::from(head[3] & 1),
                pts,
                dts,
                keyframe: head[3] & 2 != 0,
                data: Bytes::copy_from_slice(&tail[..len]),
            });
            rest = &tail[len..];
            if head[5] == 0xFF {
                s.end();
            }
            // Some writes fail (a full disk ends the window there).
            if let Some(d) = s.dvr.as_mut() {
                let ops: Vec<_> = d.take_ops().collect();
                for op in ops {
                    if let crate::files::FileOp::PutShared { file, .. } = op {
                        let failed = head[5] == 0xFE;
                        d.on_written(file, failed.then_some("full"));
                    }
                }
            }
        }
        let _ = playlist::master(&s);
        for t in &s.tracks {
            let _ = playlist::chunklist(&s, t, false, false, 0);
            let _ = playlist::chunklist(&s, t, true, true, 3600);
            let _ = t.last_part();
        }
        let _ = playlist::parse_file(&String::from_utf8_lossy(rest), "k");
    }

    /// A `:sendEvent` body of any bytes: checked, and when taken, sent
    /// into a stream between frames (urgent or not) and its chunklists
    /// rendered.
    pub fn fuzz_event(data: &[u8]) {
        let Ok(body) = serde_json::from_slice::<serde_json::Value>(data) else {
            return;
        };
        let Ok(e) = event::parse(&body) else {
            return;
        };
        let mut s = StreamHls::new(&[h264(), aac()], LlhlsConfig::default(), "k".into(), 0);
        let mut ts = ts::TsHls::new(&[h264(), aac()], Duration::from_secs(1), 3, 0);
        for i in 0..90i64 {
            let f = Frame {
                track: 1 + (i % 2) as u32,
                pts: i * 1500,
                dts: i * 1500,
                keyframe: i % 30 == 0,
                data: Bytes::from_static(&[0, 0, 0, 1, 0x65]),
            };
            s.push(&f);
            if let Some(t) = ts.as_mut() {
                t.push(&f);
            }
            if i % 20 == 10 {
                s.send_event(&e);
                if let Some(t) = ts.as_mut() {
                    t.send_event(&e);
                }
            }
        }
        for t in &s.tracks {
            let _ = playlist::chunklist(&s, t, false, true, 0);
        }
        if let Some(t) = ts {
            let _ = t.media_playlist(true, 0);
        }
    }

    /// An H.264 test track (id 1).
    pub fn h264() -> Track {
        Track {
            id: 1,
            codec: Codec::H264,
            config: CodecConfig::H264 {
                sps: vec![Bytes::from_static(&[0x67, 0x64, 0, 0x1f, 0xac])],
                pps: vec![Bytes::from_static(&[0x68, 0xeb])],
            },
            video: None,
            audio: None,
            bitrate: 0,
            label: Default::default(),
        }
    }

    /// An AAC 48 kHz stereo test track (id 2).
    pub fn aac() -> Track {
        Track {
            id: 2,
            codec: Codec::Aac,
            config: CodecConfig::Aac {
                asc: Bytes::from_static(&[0x12, 0x10]),
            },
            video: None,
            audio: Some(AudioParams {
                sample_rate: 48_000,
                channels: 2,
            }),
            bitrate: 0,
            label: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests;

// The model holds the settings; the packager's reading of them is here.
impl crate::state::app::LlhlsSpec {
    /// The packager's settings (out-of-range values clamped).
    pub fn config(&self) -> LlhlsConfig {
        let d = LlhlsConfig::default();
        let secs = |v: Option<f64>, lo: f64, hi: f64, default: std::time::Duration| {
            v.filter(|v| v.is_finite()).map_or(default, |v| {
                std::time::Duration::from_secs_f64(v.clamp(lo, hi))
            })
        };
        LlhlsConfig {
            part_target: secs(self.chunk_duration, 0.1, 10.0, d.part_target),
            segment_target: secs(self.segment_duration, 1.0, 60.0, d.segment_target),
            segment_count: self
                .segment_count
                .map_or(d.segment_count, |n| n.clamp(3, 100) as usize),
            part_hold_back: secs(self.part_hold_back, 0.0, 60.0, d.part_hold_back),
            first_segment_timeout: secs(
                self.first_segment_timeout,
                1.0,
                600.0,
                d.first_segment_timeout,
            ),
        }
    }
}
