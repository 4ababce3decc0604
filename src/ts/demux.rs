//! The MPEG-TS demuxer: TS bytes in any split (UDP datagrams, SRT payloads,
//! single bytes) in, [`DemuxEvent`]s out.
//!
//! What it does: finds and keeps packet sync (0x47 every 188 bytes, three in
//! a row to lock, resync after garbage), follows the first program of the
//! PAT and its PMT (version / content changes), checks continuity counters
//! (a gap drops the PES in progress on that PID), reassembles PES packets
//! (bounded and unbounded length), unwraps 33-bit PTS/DTS onto one continuous
//! `i64` timeline per program (values are the stream's own, not rebased), and
//! turns PES payloads into canonical [`Frame`]s:
//! H.264/H.265 as 4-byte length-prefixed NAL units without AUDs, AAC split
//! out of ADTS into raw access units, MP3 frames, Opus packets without the
//! TS control header.
//!
//! Tracks: the TrackId is the PID. A track is announced once its codec
//! configuration is known (video: in-band SPS/PPS(/VPS) at a keyframe; AAC:
//! first ADTS header; MP3: first frame header; Opus: the PMT descriptor).
//! The first `TracksChanged` waits until every supported PMT stream is ready,
//! or until frames worth [`INITIAL_HOLD_TICKS`] of stream time (or
//! [`INITIAL_HOLD_FRAMES`] frames) of the ready ones are held; the held frames
//! follow it. Afterwards every change of the ready set or of a track's
//! configuration emits a new `TracksChanged` with the full list, before the
//! first frame that uses it; a PMT change that adds streams holds frames
//! again the same way, so one complete list follows a reconfiguration. Video frames before the first keyframe with
//! parameter sets are dropped.
//!
//! Not handled: PCR (timing is left to the caller), multiple programs (the
//! first one in the PAT wins), scrambled packets (dropped), 192/204-byte
//! packets, SI tables.
//!
//! There is no clock: call [`Demuxer::flush`] at end of input to get the last
//! PES of unbounded-length streams.

use std::collections::VecDeque;

use bytes::Bytes;

use super::opus;
use super::pes::{parse_pes_header, TimestampUnwrapper};
use super::psi::{parse_pat, parse_pmt, EsKind, PmtStream, SectionAssembler};
use super::{PACKET_SIZE, SYNC_BYTE};
use crate::codec::{aac, h264, h265, mp3, CodecError};
use crate::media::{
    AudioParams, Codec, CodecConfig, Frame, Language, Ticks, Track, TICKS_PER_SECOND,
};

/// Largest video PES kept (bytes).
pub const MAX_VIDEO_PES: usize = 4 * 1024 * 1024;
/// Largest audio PES kept (bytes).
pub const MAX_AUDIO_PES: usize = 64 * 1024;
/// Most elementary streams followed per program.
pub const MAX_STREAMS: usize = 16;
/// Stream time the first announcement may wait for missing tracks.
pub const INITIAL_HOLD_TICKS: Ticks = 2 * TICKS_PER_SECOND;
/// Frames the first announcement may hold while waiting for missing tracks.
pub const INITIAL_HOLD_FRAMES: usize = 512;
/// Payload bytes the first announcement may hold.
pub const INITIAL_HOLD_BYTES: usize = 16 * 1024 * 1024;
/// Most parameter sets of one kind kept per video track.
const MAX_PARAMETER_SETS: usize = 16;
/// Most audio bytes carried from one PES into the next (a frame split across
/// PES packets).
const MAX_AUDIO_CARRY: usize = 8 * 1024;

const PID_PAT: u16 = 0x0000;
const PID_NULL: u16 = 0x1FFF;

/// What the demuxer reports.
#[derive(Clone, Debug, PartialEq)]
pub enum DemuxEvent {
    /// The full list of ready tracks (sent again whenever it changes).
    TracksChanged(Vec<Track>),
    /// One access unit of an announced track.
    Frame(Frame),
}

/// Counters of what went wrong (for stats and logs of the caller).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DemuxStats {
    /// 188-byte packets processed.
    pub packets: u64,
    /// Times packet sync was lost.
    pub sync_losses: u64,
    /// Continuity counter gaps.
    pub cc_errors: u64,
    /// PES packets dropped (gap, oversize, bad header).
    pub pes_dropped: u64,
    /// Frames emitted or held.
    pub frames: u64,
}

/// Expected-continuity tracking for one PID.
#[derive(Clone, Copy, Debug, Default)]
struct Continuity {
    last: Option<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CcCheck {
    Ok,
    Duplicate,
    Gap,
}

impl Continuity {
    fn check(&mut self, cc: u8, has_payload: bool, discontinuity: bool) -> CcCheck {
        let last = self.last;
        if discontinuity {
            self.last = Some(cc);
            return CcCheck::Ok;
        }
        let Some(last) = last else {
            self.last = Some(cc);
            return CcCheck::Ok;
        };
        if !has_payload {
            // The counter does not advance on packets without payload.
            return if cc == last {
                CcCheck::Ok
            } else {
                CcCheck::Gap
            };
        }
        if cc == last {
            return CcCheck::Duplicate;
        }
        self.last = Some(cc);
        if cc == (last + 1) & 0x0F {
            CcCheck::Ok
        } else {
            CcCheck::Gap
        }
    }
}

/// Parameter sets seen in-band on a video PID.
#[derive(Clone, Debug, Default)]
struct ParameterSets {
    vps: Vec<Bytes>,
    sps: Vec<Bytes>,
    pps: Vec<Bytes>,
}

/// One followed elementary stream.
struct EsStream {
    pid: u16,
    stream_type: u8,
    kind: EsKind,
    continuity: Continuity,
    /// The PES being reassembled (reused buffer).
    pes: Vec<u8>,
    /// True while `pes` holds a PES whose start was seen.
    pes_active: bool,
    limit: usize,
    /// The announced-ready track, when ready.
    track: Option<Track>,
    params: ParameterSets,
    /// Audio bytes of a frame that started in the previous PES.
    audio_carry: Vec<u8>,
    /// Extrapolated timestamp of the next audio frame.
    next_audio_pts: Option<Ticks>,
    /// Last video timestamps, reused when a PES comes without PTS.
    last_video_ts: Option<(Ticks, Ticks)>,
    /// The PMT's ISO 639 language descriptor for it, if any.
    language: Option<Language>,
}

impl EsStream {
    fn new(s: &PmtStream) -> EsStream {
        let limit = match s.kind {
            EsKind::H264 | EsKind::H265 => MAX_VIDEO_PES,
            _ => MAX_AUDIO_PES,
        };
        let track = match s.kind {
            EsKind::Opus { channels } => Some(Track {
                id: u32::from(s.pid),
                codec: Codec::Opus,
                config: CodecConfig::None,
                video: None,
                audio: Some(AudioParams {
                    sample_rate: opus::OPUS_SAMPLE_RATE,
                    channels,
                }),
                bitrate: 0,
                label: crate::media::TrackLabel {
                    language: super::psi::language(&s.es_info),
                    ..Default::default()
                },
            }),
            _ => None,
        };
        EsStream {
            pid: s.pid,
            stream_type: s.stream_type,
            kind: s.kind,
            continuity: Continuity::default(),
            pes: Vec::new(),
            pes_active: false,
            limit,
            track,
            params: ParameterSets::default(),
            audio_carry: Vec::new(),
            next_audio_pts: None,
            last_video_ts: None,
            language: super::psi::language(&s.es_info),
        }
    }

    fn drop_pes(&mut self) {
        self.pes.clear();
        self.pes_active = false;
        self.audio_carry.clear();
    }
}

/// The program being followed.
struct Program {
    number: u16,
    pmt_pid: u16,
    pmt: SectionAssembler,
    continuity: Continuity,
    /// CRC of the PMT section last applied (skip identical repeats).
    pmt_crc: Option<u32>,
}

/// The MPEG-TS demuxer. See the module documentation.
pub struct Demuxer {
    /// Bytes of an incomplete packet (or of an unconfirmed sync candidate).
    carry: Vec<u8>,
    synced: bool,
    pat: SectionAssembler,
    pat_continuity: Continuity,
    program: Option<Program>,
    streams: Vec<EsStream>,
    clock: TimestampUnwrapper,
    events: VecDeque<DemuxEvent>,
    /// False until the first TracksChanged, and again after a PMT change
    /// that added streams (until they are ready or the hold ends).
    announced_once: bool,
    announced: Vec<Track>,
    held: VecDeque<Frame>,
    held_bytes: usize,
    sections: Vec<Vec<u8>>,
    /// Reused scratch buffer for audio reassembly.
    scratch: Vec<u8>,
    stats: DemuxStats,
}

impl Default for Demuxer {
    fn default() -> Self {
        Demuxer::new()
    }
}

impl Demuxer {
    pub fn new() -> Demuxer {
        Demuxer {
            carry: Vec::with_capacity(4 * PACKET_SIZE),
            synced: false,
            pat: SectionAssembler::new(),
            pat_continuity: Continuity::default(),
            program: None,
            streams: Vec::new(),
            clock: TimestampUnwrapper::new(),
            events: VecDeque::new(),
            announced_once: false,
            announced: Vec::new(),
            held: VecDeque::new(),
            held_bytes: 0,
            sections: Vec::new(),
            scratch: Vec::new(),
            stats: DemuxStats::default(),
        }
    }

    /// Feeds bytes, in any split.
    pub fn push(&mut self, data: &[u8]) {
        if self.carry.is_empty() {
            let used = self.scan(data);
            self.carry.extend_from_slice(&data[used..]);
        } else {
            let mut carry = std::mem::take(&mut self.carry);
            carry.extend_from_slice(data);
            let used = self.scan(&carry);
            carry.drain(..used);
            self.carry = carry;
        }
    }

    /// Next event, if any. Drain after every [`Demuxer::push`].
    pub fn poll_event(&mut self) -> Option<DemuxEvent> {
        self.events.pop_front()
    }

    /// End of input: completes every PES in progress (unbounded video PES
    /// end only at the next packet start otherwise) and releases held frames.
    pub fn flush(&mut self) {
        for i in 0..self.streams.len() {
            if self.streams[i].pes_active && !pes_incomplete(&self.streams[i].pes) {
                self.finish_pes(i);
            }
            self.streams[i].drop_pes();
        }
        if !self.announced_once && !self.held.is_empty() {
            self.refresh_tracks(true);
        }
    }

    /// The tracks announced last.
    pub fn tracks(&self) -> &[Track] {
        &self.announced
    }

    pub fn stats(&self) -> DemuxStats {
        self.stats
    }

    /// Processes whole packets from `buf`; returns how many bytes were used
    /// (the rest must be kept for the next call).
    fn scan(&mut self, buf: &[u8]) -> usize {
        let mut pos = 0usize;
        loop {
            if self.synced {
                let Some(packet) = buf.get(pos..pos + PACKET_SIZE) else {
                    return pos;
                };
                // The next packet's sync byte, when already here, vouches
                // for this packet's length (a cut inside it shows there).
                let next_ok = buf.get(pos + PACKET_SIZE).is_none_or(|&b| b == SYNC_BYTE);
                if packet[0] == SYNC_BYTE && next_ok {
                    self.handle_packet(packet);
                    pos += PACKET_SIZE;
                    continue;
                }
                self.lose_sync();
                pos += 1;
            }
            // Hunt for three sync bytes 188 apart.
            let Some(offset) = buf
                .get(pos..)
                .and_then(|rest| rest.iter().position(|&b| b == SYNC_BYTE))
            else {
                return buf.len();
            };
            let candidate = pos + offset;
            match (
                buf.get(candidate + PACKET_SIZE),
                buf.get(candidate + 2 * PACKET_SIZE),
            ) {
                (Some(&SYNC_BYTE), Some(&SYNC_BYTE)) => {
                    self.synced = true;
                    pos = candidate;
                }
                (None, _) | (Some(&SYNC_BYTE), None) => return candidate,
                _ => pos = candidate + 1,
            }
        }
    }

    fn lose_sync(&mut self) {
        self.synced = false;
        self.stats.sync_losses += 1;
        self.pat.reset();
        self.pat_continuity = Continuity::default();
        if let Some(p) = &mut self.program {
            p.pmt.reset();
            p.continuity = Continuity::default();
        }
        for s in &mut self.streams {
            if s.pes_active {
                self.stats.pes_dropped += 1;
            }
            s.drop_pes();
            s.continuity = Continuity::default();
        }
    }

    fn handle_packet(&mut self, packet: &[u8]) {
        self.stats.packets += 1;
        let (Some(&b1), Some(&b2), Some(&b3)) = (packet.get(1), packet.get(2), packet.get(3))
        else {
            return;
        };
        if b1 & 0x80 != 0 {
            // transport_error_indicator: the packet is known to be damaged.
            return;
        }
        let unit_start = b1 & 0x40 != 0;
        let pid = u16::from_be_bytes([b1 & 0x1F, b2]);
        let scrambled = b3 >> 6 != 0;
        let afc = (b3 >> 4) & 0x03;
        let cc = b3 & 0x0F;
        if pid == PID_NULL || afc == 0 {
            return;
        }
        let mut payload_at = 4usize;
        let mut discontinuity = false;
        if afc & 0x02 != 0 {
            let Some(&af_len) = packet.get(4) else {
                return;
            };
            let af_len = usize::from(af_len);
            if af_len > PACKET_SIZE - 5 {
                return;
            }
            if af_len > 0 {
                discontinuity = packet.get(5).is_some_and(|f| f & 0x80 != 0);
            }
            payload_at = 5 + af_len;
        }
        let has_payload = afc & 0x01 != 0;
        let payload = if has_payload {
            packet.get(payload_at..).unwrap_or(&[])
        } else {
            &[]
        };

        if pid == PID_PAT {
            match self.pat_continuity.check(cc, has_payload, discontinuity) {
                CcCheck::Duplicate => return,
                CcCheck::Gap => {
                    self.stats.cc_errors += 1;
                    self.pat.reset();
                }
                CcCheck::Ok => {}
            }
            if has_payload {
                let mut sections = std::mem::take(&mut self.sections);
                self.pat.push(unit_start, payload, &mut sections);
                for s in sections.drain(..) {
                    self.handle_pat(&s);
                }
                self.sections = sections;
            }
            return;
        }
        if let Some(program) = &mut self.program {
            if pid == program.pmt_pid {
                match program.continuity.check(cc, has_payload, discontinuity) {
                    CcCheck::Duplicate => return,
                    CcCheck::Gap => {
                        self.stats.cc_errors += 1;
                        program.pmt.reset();
                    }
                    CcCheck::Ok => {}
                }
                if has_payload {
                    let mut sections = std::mem::take(&mut self.sections);
                    program.pmt.push(unit_start, payload, &mut sections);
                    for s in sections.drain(..) {
                        self.handle_pmt(&s);
                    }
                    self.sections = sections;
                }
                return;
            }
        }
        let Some(index) = self.streams.iter().position(|s| s.pid == pid) else {
            return;
        };
        let stream = &mut self.streams[index];
        match stream.continuity.check(cc, has_payload, discontinuity) {
            CcCheck::Duplicate => return,
            CcCheck::Gap => {
                self.stats.cc_errors += 1;
                if stream.pes_active {
                    self.stats.pes_dropped += 1;
                }
                stream.drop_pes();
            }
            CcCheck::Ok => {}
        }
        if scrambled {
            // Cannot descramble: whatever PES this belongs to is lost.
            stream.drop_pes();
            return;
        }
        if !has_payload {
            return;
        }
        if unit_start {
            if stream.pes_active {
                if pes_incomplete(&stream.pes) {
                    // Shorter than its PES_packet_length says: data is
                    // missing, so the frames in it would be damaged.
                    self.stats.pes_dropped += 1;
                    stream.drop_pes();
                } else {
                    self.finish_pes(index);
                }
            }
            let stream = &mut self.streams[index];
            stream.pes.clear();
            stream.pes_active = true;
        }
        let stream = &mut self.streams[index];
        if !stream.pes_active {
            return;
        }
        if stream.pes.len() + payload.len() > stream.limit {
            self.stats.pes_dropped += 1;
            stream.drop_pes();
            return;
        }
        stream.pes.extend_from_slice(payload);
        if let Some(len) = stream.pes.get(4..6) {
            let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
            if len != 0 && stream.pes.len() >= 6 + len {
                stream.pes.truncate(6 + len);
                self.finish_pes(index);
            }
        }
    }

    fn handle_pat(&mut self, section: &[u8]) {
        let Ok(pat) = parse_pat(section) else {
            return;
        };
        if !pat.header.current_next {
            return;
        }
        let chosen = match &self.program {
            Some(p) => pat
                .programs
                .iter()
                .copied()
                .find(|e| e.program_number == p.number)
                .or_else(|| {
                    // Our program is gone from a complete single-section PAT.
                    (pat.header.last_section_number == 0)
                        .then(|| pat.first_program())
                        .flatten()
                }),
            None => pat.first_program(),
        };
        let Some(entry) = chosen else {
            return;
        };
        if entry.pid == PID_PAT || entry.pid == PID_NULL {
            return;
        }
        let unchanged = self
            .program
            .as_ref()
            .is_some_and(|p| p.number == entry.program_number && p.pmt_pid == entry.pid);
        if !unchanged {
            self.program = Some(Program {
                number: entry.program_number,
                pmt_pid: entry.pid,
                pmt: SectionAssembler::new(),
                continuity: Continuity::default(),
                pmt_crc: None,
            });
        }
    }

    fn handle_pmt(&mut self, section: &[u8]) {
        let Some(program) = &mut self.program else {
            return;
        };
        let Ok(pmt) = parse_pmt(section) else {
            return;
        };
        if !pmt.header.current_next || pmt.program_number() != program.number {
            return;
        }
        let crc = section
            .len()
            .checked_sub(4)
            .and_then(|at| section.get(at..))
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        if crc.is_some() && program.pmt_crc == crc {
            return;
        }
        program.pmt_crc = crc;

        let mut old = std::mem::take(&mut self.streams);
        for s in &pmt.streams {
            if s.kind == EsKind::Unknown
                || s.pid == PID_PAT
                || s.pid == PID_NULL
                || s.pid == program.pmt_pid
                || self.streams.iter().any(|e| e.pid == s.pid)
            {
                continue;
            }
            if self.streams.len() >= MAX_STREAMS {
                break;
            }
            let kept = old
                .iter()
                .position(|e| e.pid == s.pid && e.kind == s.kind && e.stream_type == s.stream_type)
                .map(|i| old.swap_remove(i));
            self.streams.push(kept.unwrap_or_else(|| EsStream::new(s)));
        }
        let pids: Vec<u16> = self.streams.iter().map(|s| s.pid).collect();
        self.held
            .retain(|f| pids.iter().any(|&p| u32::from(p) == f.track));
        self.held_bytes = self.held.iter().map(|f| f.data.len()).sum();
        // New (or replaced) streams: announce again once they are ready too
        // (holding frames as at the start), so the consumer sees one
        // complete set.
        if self.streams.iter().any(|s| s.track.is_none()) {
            self.announced_once = false;
        }
        self.refresh_tracks(false);
    }

    /// Announces the ready tracks when they changed (or, before the first
    /// announcement, when all are ready or `force`).
    fn refresh_tracks(&mut self, force: bool) {
        let ready: Vec<Track> = self
            .streams
            .iter()
            .filter_map(|s| s.track.clone())
            .collect();
        if !self.announced_once {
            let all_ready =
                !self.streams.is_empty() && self.streams.iter().all(|s| s.track.is_some());
            if ready.is_empty() || !(all_ready || force) {
                return;
            }
            self.announced_once = true;
            self.announced = ready.clone();
            self.events.push_back(DemuxEvent::TracksChanged(ready));
            let ids: Vec<u32> = self.announced.iter().map(|t| t.id).collect();
            self.held_bytes = 0;
            for f in self.held.drain(..) {
                if ids.contains(&f.track) {
                    self.events.push_back(DemuxEvent::Frame(f));
                }
            }
        } else if ready != self.announced {
            self.announced = ready.clone();
            self.events.push_back(DemuxEvent::TracksChanged(ready));
        }
    }

    fn emit_frame(&mut self, frame: Frame) {
        self.stats.frames += 1;
        if self.announced_once {
            self.events.push_back(DemuxEvent::Frame(frame));
            return;
        }
        self.held_bytes += frame.data.len();
        self.held.push_back(frame);
        let span = match (self.held.front(), self.held.back()) {
            (Some(a), Some(b)) => b.dts.saturating_sub(a.dts),
            _ => 0,
        };
        if self.held.len() >= INITIAL_HOLD_FRAMES
            || self.held_bytes >= INITIAL_HOLD_BYTES
            || span >= INITIAL_HOLD_TICKS
        {
            self.refresh_tracks(true);
        }
    }

    /// Sets a stream's track (when new or changed) and re-announces.
    fn set_track(&mut self, index: usize, mut track: Track) {
        let Some(stream) = self.streams.get_mut(index) else {
            return;
        };
        track.label.language = stream.language;
        if stream.track.as_ref() != Some(&track) {
            stream.track = Some(track);
            self.refresh_tracks(false);
        }
    }

    /// Turns the complete PES of stream `index` into frames.
    fn finish_pes(&mut self, index: usize) {
        let Some(stream) = self.streams.get_mut(index) else {
            return;
        };
        stream.pes_active = false;
        let pes = std::mem::take(&mut stream.pes);
        let kind = stream.kind;
        match parse_pes_header(&pes) {
            Ok(header) if header.payload_offset <= pes.len() => {
                let pts = header.pts.map(|p| self.clock.unwrap(p));
                let dts = header.dts.map(|d| self.clock.unwrap(d));
                let payload = &pes[header.payload_offset..];
                match kind {
                    EsKind::H264 | EsKind::H265 => self.video_pes(index, pts, dts, payload),
                    EsKind::Aac | EsKind::MpegAudio => self.framed_audio_pes(index, pts, payload),
                    EsKind::Opus { .. } => self.opus_pes(index, pts, payload),
                    EsKind::Unknown => {}
                }
            }
            _ => {
                self.stats.pes_dropped += 1;
            }
        }
        if let Some(stream) = self.streams.get_mut(index) {
            let mut pes = pes;
            pes.clear();
            stream.pes = pes;
        }
    }

    fn video_pes(&mut self, index: usize, pts: Option<Ticks>, dts: Option<Ticks>, payload: &[u8]) {
        let Some(stream) = self.streams.get_mut(index) else {
            return;
        };
        let hevc = stream.kind == EsKind::H265;
        let (pts, dts) = match (pts, dts, stream.last_video_ts) {
            (Some(p), d, _) => (p, d.unwrap_or(p)),
            (None, _, Some(last)) => last,
            (None, _, None) => return,
        };
        stream.last_video_ts = Some((pts, dts));

        let mut out = Vec::with_capacity(payload.len() + 64);
        let mut keyframe = false;
        let mut has_picture = false;
        let mut fresh = ParameterSets::default();
        for nal in crate::codec::nal::annexb_units(payload) {
            // VCL NAL units: H.264 types 1..=5, H.265 types 0..=31.
            has_picture |= if hevc {
                h265::nal_type(nal).is_some_and(|t| t < 32)
            } else {
                h264::nal_type(nal).is_some_and(|t| (1..=5).contains(&t))
            };
            let (is_aud, ps) = if hevc {
                match h265::nal_type(nal) {
                    Some(h265::NAL_AUD) => (true, None),
                    Some(h265::NAL_VPS) => (false, Some(&mut fresh.vps)),
                    Some(h265::NAL_SPS) => (false, Some(&mut fresh.sps)),
                    Some(h265::NAL_PPS) => (false, Some(&mut fresh.pps)),
                    Some(t) => {
                        keyframe |= h265::is_irap(t);
                        (false, None)
                    }
                    None => (false, None),
                }
            } else {
                match h264::nal_type(nal) {
                    Some(h264::NAL_AUD) => (true, None),
                    Some(h264::NAL_SPS) => (false, Some(&mut fresh.sps)),
                    Some(h264::NAL_PPS) => (false, Some(&mut fresh.pps)),
                    Some(h264::NAL_IDR) => {
                        keyframe = true;
                        (false, None)
                    }
                    _ => (false, None),
                }
            };
            if is_aud {
                continue;
            }
            if let Some(list) = ps {
                if list.len() < MAX_PARAMETER_SETS && !list.iter().any(|p| p[..] == nal[..]) {
                    list.push(Bytes::copy_from_slice(nal));
                }
            }
            let Ok(len) = u32::try_from(nal.len()) else {
                continue;
            };
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(nal);
        }
        let params = &mut stream.params;
        if !fresh.vps.is_empty() {
            params.vps = fresh.vps;
        }
        if !fresh.sps.is_empty() {
            params.sps = fresh.sps;
        }
        if !fresh.pps.is_empty() {
            params.pps = fresh.pps;
        }
        if keyframe {
            let complete = !params.sps.is_empty()
                && !params.pps.is_empty()
                && (!hevc || !params.vps.is_empty());
            if complete {
                let config = if hevc {
                    CodecConfig::H265 {
                        vps: params.vps.clone(),
                        sps: params.sps.clone(),
                        pps: params.pps.clone(),
                    }
                } else {
                    CodecConfig::H264 {
                        sps: params.sps.clone(),
                        pps: params.pps.clone(),
                    }
                };
                if stream.track.as_ref().map(|t| &t.config) != Some(&config) {
                    let video = if hevc {
                        h265::video_params(&config)
                    } else {
                        h264::video_params(&config)
                    };
                    let track = Track {
                        id: u32::from(stream.pid),
                        codec: if hevc { Codec::H265 } else { Codec::H264 },
                        config,
                        video: Some(video.unwrap_or_default()),
                        audio: None,
                        bitrate: 0,
                        label: Default::default(),
                    };
                    self.set_track(index, track);
                }
            }
        }
        let Some(stream) = self.streams.get(index) else {
            return;
        };
        // An access unit without a picture (parameter sets or SEI sent on
        // their own) is not a frame; its parameter sets were kept above.
        if stream.track.is_none() || !has_picture {
            return;
        }
        let frame = Frame {
            track: u32::from(stream.pid),
            pts,
            dts,
            keyframe,
            data: Bytes::from(out),
        };
        self.emit_frame(frame);
    }

    /// AAC (ADTS) and MPEG audio: self-delimiting frames, possibly several
    /// per PES, possibly split across PES packets.
    fn framed_audio_pes(&mut self, index: usize, pts: Option<Ticks>, payload: &[u8]) {
        let Some(stream) = self.streams.get_mut(index) else {
            return;
        };
        let pid = u32::from(stream.pid);
        let aac = stream.kind == EsKind::Aac;
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        let carried = stream.audio_carry.len();
        buf.extend_from_slice(&stream.audio_carry);
        stream.audio_carry.clear();
        buf.extend_from_slice(payload);

        let mut out: Vec<(Track, Frame)> = Vec::new();
        let mut pos = 0usize;
        // Samples of the frames starting in this PES, for timestamps
        // relative to its PTS.
        let mut samples_in_pes: u64 = 0;
        while pos < buf.len() {
            let rest = &buf[pos..];
            let parsed = if aac {
                aac::parse_adts(rest).map(|h| AudioFrameInfo {
                    frame_len: h.frame_len,
                    header_len: h.header_len,
                    samples: 1024,
                    sample_rate: h.sample_rate,
                    format: AudioFormat::Aac {
                        object_type: h.object_type,
                        sample_rate_index: h.sample_rate_index,
                        channels: h.channels,
                    },
                })
            } else {
                mp3::parse_header(rest).and_then(|h| {
                    if h.layer != 3 {
                        return Err(CodecError::Unsupported("MPEG audio layer other than III"));
                    }
                    Ok(AudioFrameInfo {
                        frame_len: h.frame_len,
                        header_len: 0,
                        samples: h.samples_per_frame,
                        sample_rate: h.sample_rate,
                        format: AudioFormat::Mp3 {
                            channels: h.channels,
                        },
                    })
                })
            };
            let info = match parsed {
                Ok(info)
                    if info.frame_len > info.header_len
                        && info.sample_rate > 0
                        && info.samples > 0 =>
                {
                    info
                }
                Err(CodecError::Truncated) => {
                    if rest.len() <= MAX_AUDIO_CARRY {
                        stream.audio_carry.extend_from_slice(rest);
                    }
                    break;
                }
                _ => {
                    // Not a frame start: skip to the next possible sync.
                    pos += 1;
                    match buf[pos..].iter().position(|&b| b == 0xFF) {
                        Some(skip) => pos += skip,
                        None => pos = buf.len(),
                    }
                    continue;
                }
            };
            let Some(frame) = rest.get(..info.frame_len) else {
                if rest.len() <= MAX_AUDIO_CARRY {
                    stream.audio_carry.extend_from_slice(rest);
                }
                break;
            };
            let starts_here = pos >= carried;
            let rate = u64::from(info.sample_rate);
            let frame_pts = match (starts_here, pts, stream.next_audio_pts) {
                (true, Some(p), _) => {
                    let offset = samples_in_pes
                        .saturating_mul(TICKS_PER_SECOND as u64)
                        .saturating_add(rate / 2)
                        / rate;
                    Some(p.saturating_add(offset as i64))
                }
                (_, _, Some(next)) => Some(next),
                (_, p, None) => p,
            };
            if starts_here {
                samples_in_pes = samples_in_pes.saturating_add(u64::from(info.samples));
            }
            pos += info.frame_len;
            let Some(frame_pts) = frame_pts else {
                continue;
            };
            let duration = u64::from(info.samples) * TICKS_PER_SECOND as u64 / rate;
            stream.next_audio_pts = Some(frame_pts.saturating_add(duration as i64));
            let track = match info.format {
                AudioFormat::Aac {
                    object_type,
                    sample_rate_index,
                    channels,
                } => {
                    let asc = aac::build_asc(object_type, sample_rate_index, channels);
                    let config = CodecConfig::Aac { asc };
                    let audio = aac::audio_params(&config).unwrap_or(AudioParams {
                        sample_rate: info.sample_rate,
                        channels,
                    });
                    Track {
                        id: pid,
                        codec: Codec::Aac,
                        config,
                        video: None,
                        audio: Some(audio),
                        bitrate: 0,
                        label: Default::default(),
                    }
                }
                AudioFormat::Mp3 { channels } => Track {
                    id: pid,
                    codec: Codec::Mp3,
                    config: CodecConfig::None,
                    video: None,
                    audio: Some(AudioParams {
                        sample_rate: info.sample_rate,
                        channels,
                    }),
                    bitrate: 0,
                    label: Default::default(),
                },
            };
            let frame = Frame {
                track: pid,
                pts: frame_pts,
                dts: frame_pts,
                keyframe: true,
                data: Bytes::copy_from_slice(&frame[info.header_len..]),
            };
            out.push((track, frame));
        }
        self.scratch = buf;
        for (track, frame) in out {
            self.set_track(index, track);
            self.emit_frame(frame);
        }
    }

    /// Opus: control header + packet, possibly several per PES.
    fn opus_pes(&mut self, index: usize, pts: Option<Ticks>, payload: &[u8]) {
        let Some(stream) = self.streams.get_mut(index) else {
            return;
        };
        let pid = u32::from(stream.pid);
        let mut next = match (pts, stream.next_audio_pts) {
            (Some(p), _) => p,
            (None, Some(n)) => n,
            (None, None) => return,
        };
        let mut frames = Vec::new();
        for packet in opus::opus_packets(payload) {
            if packet.is_empty() {
                continue;
            }
            frames.push(Frame {
                track: pid,
                pts: next,
                dts: next,
                keyframe: true,
                data: Bytes::copy_from_slice(packet),
            });
            let samples = opus::packet_samples(packet).unwrap_or(960);
            next = next.saturating_add(
                i64::from(samples) * TICKS_PER_SECOND / i64::from(opus::OPUS_SAMPLE_RATE),
            );
        }
        stream.next_audio_pts = Some(next);
        for frame in frames {
            self.emit_frame(frame);
        }
    }
}

/// True when a PES being reassembled has a PES_packet_length it has not
/// reached yet (or is too short to tell).
fn pes_incomplete(pes: &[u8]) -> bool {
    match pes.get(4..6) {
        Some(len) => {
            let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
            len != 0 && pes.len() < 6 + len
        }
        None => true,
    }
}

/// What one audio frame header said.
struct AudioFrameInfo {
    frame_len: usize,
    header_len: usize,
    samples: u32,
    sample_rate: u32,
    format: AudioFormat,
}

#[derive(Clone, Copy)]
enum AudioFormat {
    Aac {
        object_type: u8,
        sample_rate_index: u8,
        channels: u8,
    },
    Mp3 {
        channels: u8,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::TrackId;
    use crate::ts::test_util::*;
    use proptest::prelude::*;

    fn expect_track(t: &Track, id: TrackId) -> Track {
        Track { id, ..t.clone() }
    }

    /// demux(mux(frames)) == frames, per track, with the muxer's constant
    /// shift (first DTS -> 1 s) undone.
    fn round_trip(tracks: Vec<Track>, lists: Vec<Vec<Frame>>) {
        let frames = interleave(lists);
        let shift = START - frames[0].dts;
        let data = mux_all(&tracks, &frames);
        let (announcements, out) = demux_all(&data, &[1316]);
        assert_eq!(announcements.len(), 1, "{announcements:?}");
        let expected: Vec<Track> = tracks
            .iter()
            .enumerate()
            .map(|(i, t)| expect_track(t, 0x100 + i as u32))
            .collect();
        assert_eq!(announcements[0], expected);
        for (i, t) in tracks.iter().enumerate() {
            let pid = 0x100 + i as u32;
            let want = renamed(&of_track(&frames, t.id), pid, shift);
            let got = of_track(&out, pid);
            assert_eq!(got.len(), want.len(), "frame count of track {}", t.id);
            assert_eq!(got, want, "frames of track {}", t.id);
        }
    }

    const START: Ticks = crate::ts::mux::START_TICKS;

    #[test]
    fn round_trip_h264_aac() {
        round_trip(
            vec![video_track(1, Codec::H264), aac_track(2)],
            vec![
                video_frames(1, Codec::H264, 40, 0, true, true),
                aac_frames(2, 75, 0),
            ],
        );
    }

    #[test]
    fn round_trip_h265_aac() {
        round_trip(
            vec![video_track(1, Codec::H265), aac_track(2)],
            vec![
                video_frames(1, Codec::H265, 40, 5_000, true, true),
                aac_frames(2, 75, 4_000),
            ],
        );
    }

    #[test]
    fn round_trip_opus() {
        round_trip(vec![opus_track(3)], vec![opus_frames(3, 100, 123)]);
    }

    #[test]
    fn round_trip_mp3_with_video() {
        round_trip(
            vec![video_track(1, Codec::H264), mp3_track(2)],
            vec![
                video_frames(1, Codec::H264, 30, 0, true, false),
                mp3_frames(2, 50, 0),
            ],
        );
    }

    #[test]
    fn parameter_sets_from_config_become_in_band() {
        // Keyframes without in-band SPS/PPS: the muxer inserts them, the
        // demuxer keeps them in the frame.
        let tracks = vec![video_track(1, Codec::H264)];
        let frames = video_frames(1, Codec::H264, 20, 0, false, false);
        let data = mux_all(&tracks, &frames);
        let (announcements, out) = demux_all(&data, &[188]);
        assert_eq!(announcements[0][0].config, tracks[0].config);
        assert_eq!(out.len(), 20);
        let inband = video_frames(1, Codec::H264, 20, 0, true, false);
        assert_eq!(out, renamed(&inband, 0x100, START));
    }

    #[test]
    fn parameter_sets_in_their_own_access_unit() {
        // Some encoders send SPS/PPS as an access unit of their own: they
        // configure the track but are not a frame.
        let mut track = video_track(1, Codec::H264);
        track.config = CodecConfig::None;
        let mut params = Vec::new();
        for nal in [h264_sps(), h264_pps()] {
            params.extend_from_slice(&(nal.len() as u32).to_be_bytes());
            params.extend_from_slice(&nal);
        }
        let mut frames = video_frames(1, Codec::H264, 3, 3600, false, false);
        frames.insert(
            0,
            Frame {
                track: 1,
                pts: 0,
                dts: 0,
                keyframe: false,
                data: Bytes::from(params),
            },
        );
        let data = mux_all(&[track], &frames);
        let (announcements, out) = demux_all(&data, &[1316]);
        assert_eq!(
            announcements[0][0].config,
            video_track(1, Codec::H264).config
        );
        assert_eq!(out, renamed(&frames[1..], 0x100, START));
    }

    #[test]
    fn wire_wrap() {
        // Timestamps on the wire wrap from 2^33-1 to 0: unwrapped values keep
        // increasing.
        let tracks = vec![aac_track(2)];
        let frames = aac_frames(2, 200, 0);
        let data = mux_all(&tracks, &frames);
        // Patch every PTS: add (2^33 - 2 s) modulo 2^33.
        let mut patched = data.clone();
        for p in patched.chunks_exact_mut(PACKET_SIZE) {
            if p[1] & 0x40 != 0 && u16::from_be_bytes([p[1] & 0x1F, p[2]]) == 0x100 {
                let at = if p[3] & 0x20 != 0 {
                    5 + p[4] as usize
                } else {
                    4
                };
                let pes = &mut p[at..];
                let mut b = [0u8; 5];
                b.copy_from_slice(&pes[9..14]);
                let ts = crate::ts::pes::read_timestamp(&b);
                let ts = (ts + (1 << 33) - 180_000) & ((1 << 33) - 1);
                let mut v = Vec::new();
                crate::ts::pes::write_timestamp(0b0010, ts, &mut v);
                pes[9..14].copy_from_slice(&v);
            }
        }
        let (_, out) = demux_all(&patched, &[1316]);
        assert_eq!(out.len(), 200);
        assert_eq!(out[0].pts, (1 << 33) - 90_000);
        for w in out.windows(2) {
            assert_eq!(w[1].pts - w[0].pts, 1920);
        }
        assert!(out[199].pts > 1 << 33);
    }

    #[test]
    fn join_mid_stream_waits_for_keyframe() {
        let tracks = vec![video_track(1, Codec::H264), aac_track(2)];
        let frames = interleave(vec![
            video_frames(1, Codec::H264, 40, 0, true, false),
            aac_frames(2, 75, 0),
        ]);
        let data = mux_all(&tracks, &frames);
        // Start in the middle of a packet somewhere after the first GOP
        // began.
        let start = data.len() / 8 + 99;
        let (announcements, out) = demux_all(&data[start..], &[1000]);
        assert_eq!(announcements.len(), 1);
        let video = of_track(&out, 0x100);
        assert!(video[0].keyframe);
        assert_eq!(video[0].dts, START + 10 * 3600);
        assert_eq!(video.len(), 30);
        // Audio frames held back until video was ready are released in
        // order after the announcement.
        let audio = of_track(&out, 0x101);
        assert!(!audio.is_empty());
        for w in audio.windows(2) {
            assert_eq!(w[1].dts - w[0].dts, 1920);
        }
    }

    #[test]
    fn never_ready_video_releases_audio_after_hold() {
        // Video without parameter sets anywhere: audio is announced alone
        // after the hold time.
        let mut v = video_track(1, Codec::H264);
        v.config = CodecConfig::None;
        let tracks = vec![video_track(1, Codec::H264), aac_track(2)];
        let frames = interleave(vec![
            video_frames(1, Codec::H264, 100, 0, false, false)
                .into_iter()
                .map(|mut f| {
                    f.keyframe = false;
                    f
                })
                .collect(),
            aac_frames(2, 180, 0),
        ]);
        let _ = v;
        let data = mux_all(&tracks, &frames);
        let (announcements, out) = demux_all(&data, &[1316]);
        assert_eq!(announcements.len(), 1);
        assert_eq!(announcements[0].len(), 1);
        assert_eq!(announcements[0][0].codec, Codec::Aac);
        assert_eq!(of_track(&out, 0x101).len(), 180);
        assert!(of_track(&out, 0x100).is_empty());
    }

    #[test]
    fn continuity_gap_drops_only_that_pes() {
        let tracks = vec![aac_track(2)];
        let frames = aac_frames(2, 20, 0);
        let data = mux_all(&tracks, &frames);
        // Drop the second packet of the 10th frame's PES: find PES starts.
        let starts: Vec<usize> = data
            .chunks_exact(PACKET_SIZE)
            .enumerate()
            .filter(|(_, p)| p[1] & 0x40 != 0 && p[2] == 0x00 && p[1] & 0x1F == 0x01)
            .map(|(i, _)| i)
            .collect();
        let victim = starts[10] + 1;
        let mut lossy = Vec::new();
        for (i, p) in data.chunks_exact(PACKET_SIZE).enumerate() {
            if i != victim {
                lossy.extend_from_slice(p);
            }
        }
        let (_, out) = demux_all(&lossy, &[1316]);
        let mut want = renamed(&frames, 0x100, START);
        want.remove(10);
        assert_eq!(out, want);
    }

    #[test]
    fn garbage_between_packets_resyncs() {
        let tracks = vec![opus_track(3)];
        let frames = opus_frames(3, 50, 0);
        let data = mux_all(&tracks, &frames);
        let mut dirty = Vec::new();
        let packets: Vec<&[u8]> = data.chunks_exact(PACKET_SIZE).collect();
        let half = packets.len() / 2;
        for p in &packets[..half] {
            dirty.extend_from_slice(p);
        }
        dirty.extend_from_slice(&[0x47, 1, 2, 3, 0x47, 0x47, 9, 9, 9]);
        for p in &packets[half..] {
            dirty.extend_from_slice(p);
        }
        let (_, out) = demux_all(&dirty, &[1316]);
        let want = renamed(&frames, 0x100, START);
        // At most the frames around the garbage are lost.
        assert!(
            out.len() >= want.len() - 3,
            "{} of {}",
            out.len(),
            want.len()
        );
        for f in &out {
            assert!(want.contains(f));
        }
        assert_eq!(out.last(), want.last());
    }

    #[test]
    fn pmt_change_reannounces() {
        let a = mux_all(&[opus_track(3)], &opus_frames(3, 20, 0));
        // Second part: a new muxer (same PIDs, different track set and
        // codec on PID 0x100), as after an encoder restart.
        let b = mux_all(&[aac_track(2)], &aac_frames(2, 20, 0));
        let mut data = a.clone();
        data.extend_from_slice(&b);
        let (announcements, out) = demux_all(&data, &[1316]);
        assert_eq!(announcements.len(), 2, "{announcements:?}");
        assert_eq!(announcements[0][0].codec, Codec::Opus);
        assert_eq!(announcements[1][0].codec, Codec::Aac);
        assert_eq!(out.len(), 40);
    }

    fn reference_stream() -> (Vec<u8>, Vec<Frame>) {
        let tracks = vec![video_track(1, Codec::H264), aac_track(2)];
        let frames = interleave(vec![
            video_frames(1, Codec::H264, 25, 0, true, true),
            aac_frames(2, 47, 0),
        ]);
        let data = mux_all(&tracks, &frames);
        let (_, out) = demux_all(&data, &[data.len()]);
        (data, out)
    }

    /// `byte_loss_resyncs` for one input (also called with the inputs that
    /// once failed it).
    fn byte_loss_case(cuts: Vec<(usize, usize)>) -> Result<(), TestCaseError> {
        // Remove byte ranges from the first part only; the tail must come
        // through intact.
        let (data, reference) = reference_stream();
        let limit = data.len() / 2;
        let mut keep = vec![true; data.len()];
        for (at, len) in cuts {
            let at = at % limit;
            for k in keep.iter_mut().skip(at).take(len.min(limit - at)) {
                *k = false;
            }
        }
        let damaged: Vec<u8> = data
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(b, _)| *b)
            .collect();
        // One chunk: a cut packet is recognised by the next sync byte
        // (at a chunk end it could not be).
        let (_, out) = demux_all(&damaged, &[damaged.len()]);
        // A cut of whole packets at an offset inside a packet splices
        // one packet's header onto another's payload with sync,
        // continuity and lengths intact; TS has no checksum to catch
        // that, so only other cuts must never yield a damaged frame.
        // (Cuts that overlap or touch remove one run together: the runs
        // are what counts.)
        let mut runs = Vec::new();
        let mut run = 0usize;
        for k in &keep {
            if *k {
                if run > 0 {
                    runs.push(run);
                }
                run = 0;
            } else {
                run += 1;
            }
        }
        let splice = runs.iter().any(|len| len % PACKET_SIZE == 0);
        if !splice {
            for f in &out {
                prop_assert!(reference.contains(f), "damaged frame emitted");
            }
        }
        // The last second of the reference is all there.
        let end = reference.iter().map(|f| f.dts).max().unwrap();
        for f in reference.iter().filter(|f| f.dts > end - 45_000) {
            prop_assert!(
                out.contains(f),
                "missing frame after resync: {} {}",
                f.track,
                f.dts
            );
        }
        Ok(())
    }

    /// Two overlapping cuts that remove three whole packets' worth of
    /// bytes together splice packets as one such cut does (proptest found it).
    #[test]
    fn overlapping_cuts_of_whole_packets_are_a_splice() {
        byte_loss_case(vec![(3881, 211), (3528, 353)]).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn any_split_gives_the_same_frames(
            chunks in proptest::collection::vec(1usize..3000, 1..20)
        ) {
            let (data, reference) = reference_stream();
            let (_, out) = demux_all(&data, &chunks);
            prop_assert_eq!(out, reference);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..4000)) {
            let _ = demux_all(&data, &[data.len().max(1)]);
            let _ = demux_all(&data, &[1, 187, 1316]);
        }

        #[test]
        fn synced_garbage_never_panics(
            bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 187), 1..40),
            pids in proptest::collection::vec(0u16..4, 1..40),
        ) {
            // Packets with valid sync and PIDs the demuxer follows (PAT,
            // PMT, ES PIDs) but random content, after a valid PAT/PMT.
            let (data, _) = reference_stream();
            let mut stream = data[..4 * PACKET_SIZE].to_vec();
            for (i, body) in bodies.iter().enumerate() {
                let pid = [0u16, 0x1000, 0x100, 0x101][pids[i % pids.len()] as usize];
                let mut p = vec![SYNC_BYTE];
                p.extend_from_slice(body);
                p[1] = (p[1] & 0xE0) | (pid >> 8) as u8;
                p[2] = pid as u8;
                stream.extend_from_slice(&p);
            }
            let _ = demux_all(&stream, &[1316]);
        }

        #[test]
        fn packet_loss_never_panics_and_frames_stay_intact(
            drops in proptest::collection::btree_set(0usize..200, 0..12)
        ) {
            let (data, reference) = reference_stream();
            let mut lossy = Vec::new();
            for (i, p) in data.chunks_exact(PACKET_SIZE).enumerate() {
                if !drops.contains(&i) {
                    lossy.extend_from_slice(p);
                }
            }
            let (_, out) = demux_all(&lossy, &[1316]);
            for f in &out {
                prop_assert!(reference.contains(f), "damaged frame emitted");
            }
        }

        #[test]
        fn byte_loss_resyncs(cuts in proptest::collection::vec((0usize..20_000, 1usize..400), 1..5)) {
            byte_loss_case(cuts)?;
        }
    }
}
