//! The MPEG-TS muxer for push outputs: canonical [`Frame`]s in, whole
//! 188-byte packets out (appended to a caller buffer).
//!
//! One program (number 1), PMT on PID 0x1000, elementary streams from PID
//! 0x100 in track order. PAT and PMT go out before the first frame, before
//! every video keyframe and at least every [`PSI_INTERVAL`] of stream time.
//! The PCR rides in the adaptation field of every PES on the first video PID
//! (the first track when there is no video), plus a payload-less PCR packet
//! when other PIDs advanced stream time by 15 ms without one, so PCRs are at
//! most [`PCR_INTERVAL`] apart whenever frames are at most 25 ms apart.
//! Stream time is the DTS of the frames written: the muxer has no clock.
//!
//! Video is written as Annex B with an AUD first and the track's parameter
//! sets before IDR/IRAP frames that lack them; AAC gets ADTS headers, Opus
//! the TS control header, MP3 is written as is. Each frame is one PES (PTS,
//! plus DTS when different; PES_packet_length 0 only for video over 65535
//! bytes), random_access_indicator set on keyframes (every audio frame).
//! Packets end with adaptation-field stuffing, never null packets.
//!
//! Timestamps: frame time + a constant offset fixed at the first frame so
//! that its DTS becomes [`START_TICKS`], modulo 2^33. The PCR runs
//! [`PCR_LEAD`] behind the DTS of what is being written.
//!
//! Not handled: several programs, SI tables (SDT), null-packet CBR padding,
//! track changes (make a new muxer). Hot path: no allocation per packet or
//! per frame once the reused buffers have grown.

use std::fmt;

use super::opus;
use super::pes::{write_pes_header, STREAM_ID_AUDIO, STREAM_ID_PRIVATE_1, STREAM_ID_VIDEO};
use super::pes::{TIMESTAMP_MASK, TIMESTAMP_MODULUS};
use super::psi::{self, PatProgram, PmtStream};
use super::{PACKET_SIZE, SYNC_BYTE};
use crate::codec::{aac, h264, h265, nal, CodecError};
use crate::media::{Codec, CodecConfig, Frame, MediaKind, Ticks, Track, TrackId};

/// Packets per UDP datagram (7 x 188 = 1316 bytes).
pub const PACKETS_PER_DATAGRAM: usize = 7;
/// The program number.
pub const PROGRAM_NUMBER: u16 = 1;
/// The PMT PID.
pub const PMT_PID: u16 = 0x1000;
/// The PID of the first track; the others follow.
pub const FIRST_TRACK_PID: u16 = 0x100;
/// Most tracks per muxer.
pub const MAX_TRACKS: usize = 16;
/// Longest stream time between two PAT/PMT repetitions.
pub const PSI_INTERVAL: Ticks = 100 * 90;
/// Longest stream time between two PCRs.
pub const PCR_INTERVAL: Ticks = 40 * 90;
/// PAT/PMT are repeated once stream time advanced this much (so that with
/// frames at most 20 ms apart the gap stays within [`PSI_INTERVAL`]).
const PSI_REPEAT: Ticks = 80 * 90;
/// A PCR-only packet is sent once stream time advanced this much without a
/// PES on the PCR PID (so that with frames at most 25 ms apart the gap stays
/// within [`PCR_INTERVAL`]).
const PCR_REPEAT: Ticks = 15 * 90;
/// How far the PCR runs behind the DTS of the data being written.
pub const PCR_LEAD: Ticks = 100 * 90;
/// What the first frame's DTS becomes (1 s).
pub const START_TICKS: Ticks = 90_000;
/// A backward jump of stream time larger than this is a discontinuity.
const DISCONTINUITY: Ticks = 90_000;

const AUD_H264: [u8; 6] = [0, 0, 0, 1, 0x09, 0xF0];
const AUD_H265: [u8; 7] = [0, 0, 0, 1, 0x46, 0x01, 0x50];

/// Why the muxer refused tracks or a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MuxError {
    /// No tracks given.
    NoTracks,
    /// More than [`MAX_TRACKS`] tracks.
    TooManyTracks,
    /// The track's configuration cannot be carried (e.g. AAC without an
    /// ADTS-expressible AudioSpecificConfig).
    UnsupportedTrack(TrackId),
    /// A frame for a track the muxer was not made with.
    UnknownTrack(TrackId),
    /// A video frame that is not well-formed length-prefixed NAL units, or
    /// an audio frame too long for its framing.
    BadFrame(CodecError),
}

impl fmt::Display for MuxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MuxError::NoTracks => write!(f, "no tracks to mux"),
            MuxError::TooManyTracks => write!(f, "more than {MAX_TRACKS} tracks"),
            MuxError::UnsupportedTrack(id) => write!(f, "track {id} cannot be carried in MPEG-TS"),
            MuxError::UnknownTrack(id) => write!(f, "frame for unknown track {id}"),
            MuxError::BadFrame(e) => write!(f, "bad frame: {e}"),
        }
    }
}

impl std::error::Error for MuxError {}

/// One output elementary stream.
#[derive(Debug)]
struct MuxTrack {
    id: TrackId,
    pid: u16,
    codec: Codec,
    stream_id: u8,
    cc: u8,
    /// AAC only: the config for ADTS headers.
    asc: Option<aac::AudioSpecificConfig>,
    /// Video only: the parameter sets in Annex B form.
    parameter_sets: Vec<u8>,
}

/// The MPEG-TS muxer. See the module documentation.
#[derive(Debug)]
pub struct Muxer {
    tracks: Vec<MuxTrack>,
    /// Index into `tracks` of the PCR carrier.
    pcr_track: usize,
    /// Ready-made PAT and PMT packets (continuity counters patched on use).
    pat_packets: Vec<u8>,
    pmt_packets: Vec<u8>,
    pat_cc: u8,
    pmt_cc: u8,
    /// Added to frame timestamps; fixed by the first frame.
    offset: Option<Ticks>,
    last_psi: Option<Ticks>,
    /// Last PCR written (unwrapped ticks, before the modulo).
    last_pcr: Option<Ticks>,
    /// Reused buffer for elementary stream data (video, audio headers).
    es: Vec<u8>,
    /// Reused buffer for the PES header.
    pes_header: Vec<u8>,
    /// The timed-metadata (ID3) stream's PID and continuity counter, when
    /// the muxer was made with one.
    id3: Option<(u16, u8)>,
    /// Tracks MPEG-TS cannot carry (VP8): their frames are passed over.
    left_out: Vec<TrackId>,
}

/// Apple's timed metadata in MPEG-TS: PMT stream_type 0x15 (metadata in
/// PES packets), with a metadata_descriptor naming ID3.
pub const STREAM_TYPE_METADATA: u8 = 0x15;

/// metadata_descriptor (ISO/IEC 13818-1 2.6.60): format 0xFF with
/// identifier 'ID3 ', service 0, no decoder config.
const ID3_METADATA_DESCRIPTOR: [u8; 15] = [
    0x26, 13, 0xFF, 0xFF, b'I', b'D', b'3', b' ', 0xFF, b'I', b'D', b'3', b' ', 0x00, 0x0F,
];

impl Muxer {
    /// Assigns PIDs (program 1, PMT 0x1000, tracks from 0x100 in order) and
    /// prepares PAT/PMT.
    pub fn new(tracks: &[Track]) -> Result<Muxer, MuxError> {
        Self::build(tracks, false)
    }

    /// As [`Muxer::new`], plus a timed-metadata stream (after the tracks'
    /// PIDs) for [`Muxer::write_id3`]: HLS segments carry `:sendEvent`'s
    /// ID3 tags this way.
    pub fn with_id3(tracks: &[Track]) -> Result<Muxer, MuxError> {
        Self::build(tracks, true)
    }

    fn build(all: &[Track], id3: bool) -> Result<Muxer, MuxError> {
        // VP8 (from WebRTC publishers) has no MPEG-TS mapping: left out.
        let left_out: Vec<TrackId> = all
            .iter()
            .filter(|t| t.codec == Codec::Vp8)
            .map(|t| t.id)
            .collect();
        let tracks: Vec<&Track> = all.iter().filter(|t| t.codec != Codec::Vp8).collect();
        if tracks.is_empty() {
            return Err(MuxError::NoTracks);
        }
        if tracks.len() > MAX_TRACKS {
            return Err(MuxError::TooManyTracks);
        }
        let mut out = Vec::with_capacity(tracks.len());
        let mut pmt_streams = Vec::with_capacity(tracks.len());
        let mut audio_ids = 0u8;
        for (i, t) in tracks.iter().enumerate() {
            let pid = FIRST_TRACK_PID + i as u16;
            let (stream_type, mut es_info, stream_id) = match t.codec {
                Codec::H264 => (psi::STREAM_TYPE_H264, Vec::new(), STREAM_ID_VIDEO),
                Codec::H265 => (psi::STREAM_TYPE_H265, Vec::new(), STREAM_ID_VIDEO),
                Codec::Aac => {
                    audio_ids += 1;
                    (
                        psi::STREAM_TYPE_AAC_ADTS,
                        Vec::new(),
                        STREAM_ID_AUDIO + audio_ids - 1,
                    )
                }
                Codec::Mp3 => {
                    audio_ids += 1;
                    let sample_rate = t.audio.map_or(44_100, |a| a.sample_rate);
                    let stream_type = if sample_rate >= 32_000 {
                        psi::STREAM_TYPE_MPEG1_AUDIO
                    } else {
                        psi::STREAM_TYPE_MPEG2_AUDIO
                    };
                    (stream_type, Vec::new(), STREAM_ID_AUDIO + audio_ids - 1)
                }
                Codec::Opus => {
                    let channels = t.audio.map_or(2, |a| a.channels);
                    (
                        psi::STREAM_TYPE_PRIVATE_PES,
                        psi::opus_es_info(channels),
                        STREAM_ID_PRIVATE_1,
                    )
                }
                Codec::Vp8 => return Err(MuxError::UnsupportedTrack(t.id)),
            };
            if t.kind() == MediaKind::Audio {
                es_info.extend(
                    psi::language_descriptor(t.label.language)
                        .into_iter()
                        .flatten(),
                );
            }
            let asc = match (&t.codec, &t.config) {
                (Codec::Aac, CodecConfig::Aac { asc }) => {
                    let asc = aac::parse_asc(asc).map_err(|_| MuxError::UnsupportedTrack(t.id))?;
                    // Refuse now what write_adts would refuse on every frame.
                    aac::write_adts(&asc, 0, &mut Vec::new())
                        .map_err(|_| MuxError::UnsupportedTrack(t.id))?;
                    Some(asc)
                }
                (Codec::Aac, _) => return Err(MuxError::UnsupportedTrack(t.id)),
                _ => None,
            };
            let mut parameter_sets = Vec::new();
            let sets: Vec<&bytes::Bytes> = match &t.config {
                CodecConfig::H264 { sps, pps } if t.codec == Codec::H264 => {
                    sps.iter().chain(pps).collect()
                }
                CodecConfig::H265 { vps, sps, pps } if t.codec == Codec::H265 => {
                    vps.iter().chain(sps).chain(pps).collect()
                }
                _ => Vec::new(),
            };
            for set in sets {
                parameter_sets.extend_from_slice(&[0, 0, 0, 1]);
                parameter_sets.extend_from_slice(set);
            }
            out.push(MuxTrack {
                id: t.id,
                pid,
                codec: t.codec,
                stream_id,
                cc: 0,
                asc,
                parameter_sets,
            });
            pmt_streams.push(PmtStream {
                stream_type,
                pid,
                kind: psi::EsKind::classify(stream_type, &es_info),
                es_info,
            });
        }
        let pcr_track = tracks
            .iter()
            .position(|t| t.kind() == MediaKind::Video)
            .unwrap_or(0);
        let pcr_pid = out[pcr_track].pid;
        let id3 = id3.then(|| {
            let pid = FIRST_TRACK_PID + tracks.len() as u16;
            pmt_streams.push(PmtStream {
                stream_type: STREAM_TYPE_METADATA,
                pid,
                kind: psi::EsKind::Unknown,
                es_info: ID3_METADATA_DESCRIPTOR.to_vec(),
            });
            (pid, 0u8)
        });

        let mut section = Vec::new();
        psi::build_pat(
            1,
            0,
            &[PatProgram {
                program_number: PROGRAM_NUMBER,
                pid: PMT_PID,
            }],
            &mut section,
        );
        let pat_packets = section_packets(0, &section);
        section.clear();
        psi::build_pmt(PROGRAM_NUMBER, 0, pcr_pid, &pmt_streams, &mut section);
        let pmt_packets = section_packets(PMT_PID, &section);

        Ok(Muxer {
            tracks: out,
            pcr_track,
            pat_packets,
            pmt_packets,
            pat_cc: 0,
            pmt_cc: 0,
            offset: None,
            last_psi: None,
            last_pcr: None,
            es: Vec::new(),
            pes_header: Vec::with_capacity(32),
            id3,
            left_out,
        })
    }

    /// Appends one ID3 tag as a metadata PES (stream_id private_stream_1,
    /// PTS only) at frame time `at`, on the timeline of the frames written
    /// so far. Nothing before the first frame (the timeline is not fixed
    /// yet) or on a muxer made without [`Muxer::with_id3`].
    pub fn write_id3(&mut self, at: Ticks, tag: &[u8], out: &mut Vec<u8>) {
        let (Some(offset), Some((pid, cc))) = (self.offset, self.id3.as_mut()) else {
            return;
        };
        let mut header = Vec::with_capacity(16);
        write_pes_header(
            STREAM_ID_PRIVATE_1,
            to_33_bits(at.saturating_add(offset)),
            None,
            tag.len(),
            &mut header,
        );
        write_packets(
            *pid,
            cc,
            &[&header, tag, &[]],
            PacketFlags {
                pcr: None,
                random_access: false,
                discontinuity: false,
            },
            out,
        );
    }

    /// The PID a track is written on.
    /// The next frame starts with PAT and PMT (a recording's next file
    /// begins with the timestamps going on).
    pub fn repeat_tables(&mut self) {
        self.last_psi = None;
    }

    pub fn pid_of(&self, track: TrackId) -> Option<u16> {
        self.tracks.iter().find(|t| t.id == track).map(|t| t.pid)
    }

    /// The PID carrying the PCR.
    pub fn pcr_pid(&self) -> u16 {
        self.tracks[self.pcr_track].pid
    }

    /// Appends the packets of one frame (plus PAT/PMT and PCR packets when
    /// due) to `out`. Only whole 188-byte packets are appended; on error
    /// nothing is.
    pub fn write_frame(&mut self, frame: &Frame, out: &mut Vec<u8>) -> Result<(), MuxError> {
        if self.left_out.contains(&frame.track) {
            return Ok(());
        }
        let index = self
            .tracks
            .iter()
            .position(|t| t.id == frame.track)
            .ok_or(MuxError::UnknownTrack(frame.track))?;

        // Elementary stream data first, so a bad frame writes nothing.
        let mut es = std::mem::take(&mut self.es);
        es.clear();
        let track = &self.tracks[index];
        let prepared = match track.codec {
            Codec::H264 | Codec::H265 => {
                prepare_video(track, frame, &mut es).map(|()| EsPayload::Buffer)
            }
            Codec::Aac => {
                let asc = track.asc.ok_or(MuxError::UnsupportedTrack(track.id));
                asc.and_then(|asc| {
                    aac::write_adts(&asc, frame.data.len(), &mut es).map_err(MuxError::BadFrame)
                })
                .map(|()| EsPayload::BufferThenFrame)
            }
            Codec::Opus => {
                opus::write_control_header(frame.data.len(), &mut es);
                Ok(EsPayload::BufferThenFrame)
            }
            Codec::Mp3 => Ok(EsPayload::Frame),
            Codec::Vp8 => Err(MuxError::UnsupportedTrack(track.id)),
        };
        let payload = match prepared {
            Ok(p) => p,
            Err(e) => {
                self.es = es;
                return Err(e);
            }
        };

        let is_video = track.codec.kind() == MediaKind::Video;
        let offset = *self.offset.get_or_insert(START_TICKS - frame.dts);
        let dts = frame.dts.saturating_add(offset);
        let pts = frame.pts.saturating_add(offset);

        // PAT/PMT.
        let psi_due = match self.last_psi {
            None => true,
            Some(last) => dts - last >= PSI_REPEAT || last - dts > DISCONTINUITY,
        };
        if psi_due || (is_video && frame.keyframe) {
            self.write_psi(out);
            self.last_psi = Some(dts);
        }

        // PCR: in every PES of the PCR PID, and in a packet of its own when
        // other PIDs have advanced stream time far enough.
        let candidate = dts - PCR_LEAD;
        let (pcr, discontinuity) = match self.last_pcr {
            Some(last) if last - candidate > DISCONTINUITY => (Some(candidate), true),
            Some(last) if index == self.pcr_track || candidate - last >= PCR_REPEAT => {
                (Some(candidate.max(last)), false)
            }
            Some(_) => (None, false),
            None => (Some(candidate), false),
        };
        let mut pcr_here = None;
        let mut discontinuity_here = false;
        if let Some(pcr) = pcr {
            self.last_pcr = Some(pcr);
            if index == self.pcr_track {
                pcr_here = Some(to_33_bits(pcr));
                discontinuity_here = discontinuity;
            } else {
                let t = &self.tracks[self.pcr_track];
                write_pcr_only(t.pid, t.cc, to_33_bits(pcr), discontinuity, out);
            }
        }

        // PES header, then the packets.
        let es_len = match payload {
            EsPayload::Buffer => es.len(),
            EsPayload::BufferThenFrame => es.len() + frame.data.len(),
            EsPayload::Frame => frame.data.len(),
        };
        let mut header = std::mem::take(&mut self.pes_header);
        header.clear();
        let track = &mut self.tracks[index];
        write_pes_header(
            track.stream_id,
            to_33_bits(pts),
            Some(to_33_bits(dts)),
            es_len,
            &mut header,
        );
        let pieces: [&[u8]; 3] = match payload {
            EsPayload::Buffer => [&header, &es, &[]],
            EsPayload::BufferThenFrame => [&header, &es, &frame.data],
            EsPayload::Frame => [&header, &frame.data, &[]],
        };
        write_packets(
            track.pid,
            &mut track.cc,
            &pieces,
            PacketFlags {
                pcr: pcr_here,
                random_access: frame.keyframe,
                discontinuity: discontinuity_here,
            },
            out,
        );
        self.es = es;
        self.pes_header = header;
        Ok(())
    }

    /// Appends PAT and PMT packets.
    fn write_psi(&mut self, out: &mut Vec<u8>) {
        append_with_cc(&self.pat_packets, &mut self.pat_cc, out);
        append_with_cc(&self.pmt_packets, &mut self.pmt_cc, out);
    }
}

/// Where the PES payload comes from.
#[derive(Clone, Copy)]
enum EsPayload {
    /// All in the reused buffer (video).
    Buffer,
    /// A header in the buffer, then the frame data (AAC, Opus).
    BufferThenFrame,
    /// The frame data as is (MP3).
    Frame,
}

/// A tick count on the 33-bit wrapping clock.
fn to_33_bits(ticks: Ticks) -> u64 {
    ticks.rem_euclid(TIMESTAMP_MODULUS as i64) as u64
}

/// Video: an AUD (the source's own when its first NAL unit is one, else
/// ours: never two), parameter sets before a keyframe that lacks them, then
/// the rest of the NAL units in Annex B form.
fn prepare_video(track: &MuxTrack, frame: &Frame, es: &mut Vec<u8>) -> Result<(), MuxError> {
    let hevc = track.codec == Codec::H265;
    let nal_type = |unit: &[u8]| {
        if hevc {
            h265::nal_type(unit)
        } else {
            h264::nal_type(unit)
        }
    };
    let (aud, sps) = if hevc {
        (h265::NAL_AUD, h265::NAL_SPS)
    } else {
        (h264::NAL_AUD, h264::NAL_SPS)
    };
    let original = es.len();
    let mut units = nal::length_prefixed_units(&frame.data, 4).peekable();
    let source_aud = match units.peek() {
        Some(Ok(unit)) if nal_type(unit) == Some(aud) => units.next(),
        _ => None,
    };
    match source_aud {
        Some(Ok(unit)) => {
            es.extend_from_slice(&[0, 0, 0, 1]);
            es.extend_from_slice(unit);
        }
        _ if hevc => es.extend_from_slice(&AUD_H265),
        _ => es.extend_from_slice(&AUD_H264),
    }
    if frame.keyframe && !track.parameter_sets.is_empty() {
        let mut has_sps = false;
        for unit in nal::length_prefixed_units(&frame.data, 4) {
            let unit = unit.map_err(MuxError::BadFrame)?;
            if nal_type(unit) == Some(sps) {
                has_sps = true;
                break;
            }
        }
        if !has_sps {
            es.extend_from_slice(&track.parameter_sets);
        }
    }
    for unit in units {
        match unit {
            Ok(unit) => {
                es.extend_from_slice(&[0, 0, 0, 1]);
                es.extend_from_slice(unit);
            }
            Err(e) => {
                es.truncate(original);
                return Err(MuxError::BadFrame(e));
            }
        }
    }
    Ok(())
}

/// Adaptation-field content of the first packet of a PES.
#[derive(Clone, Copy, Default)]
struct PacketFlags {
    pcr: Option<u64>,
    random_access: bool,
    discontinuity: bool,
}

/// Appends the 6 PCR bytes (base, extension 0).
fn put_pcr(base: u64, out: &mut Vec<u8>) {
    let base = base & TIMESTAMP_MASK;
    out.extend_from_slice(&[
        (base >> 25) as u8,
        (base >> 17) as u8,
        (base >> 9) as u8,
        (base >> 1) as u8,
        ((base as u8 & 1) << 7) | 0x7E,
        0,
    ]);
}

/// Splits the concatenation of `pieces` into packets of `pid`, the first
/// with payload_unit_start_indicator and `flags` in its adaptation field,
/// the last padded with adaptation-field stuffing.
fn write_packets(pid: u16, cc: &mut u8, pieces: &[&[u8]], flags: PacketFlags, out: &mut Vec<u8>) {
    let total: usize = pieces.iter().map(|p| p.len()).sum();
    let mut remaining = total;
    let mut piece = 0usize;
    let mut piece_pos = 0usize;
    let mut first = true;
    out.reserve((total / 184 + 2) * PACKET_SIZE);
    while remaining > 0 || first {
        let start = out.len();
        // Adaptation field needs (beyond its length byte).
        let mut af_flags = 0u8;
        let mut af_body = 0usize;
        if first {
            if flags.discontinuity {
                af_flags |= 0x80;
            }
            if flags.random_access {
                af_flags |= 0x40;
            }
            if flags.pcr.is_some() {
                af_flags |= 0x10;
                af_body += 6;
            }
        }
        let mut af_len = if af_flags != 0 { 1 + af_body } else { 0 }; // after the length byte
        let mut af_total = if af_flags != 0 { 1 + af_len } else { 0 };
        let capacity = 184 - af_total;
        let take = remaining.min(capacity);
        if take < capacity {
            // Stuff the rest of the packet through the adaptation field.
            let missing = capacity - take;
            if af_total == 0 {
                af_total = missing;
                af_len = missing.saturating_sub(1);
            } else {
                af_total += missing;
                af_len += missing;
            }
        }
        let afc = if af_total > 0 { 0x30 } else { 0x10 };
        out.extend_from_slice(&[
            SYNC_BYTE,
            (if first { 0x40 } else { 0 }) | ((pid >> 8) as u8 & 0x1F),
            pid as u8,
            afc | (*cc & 0x0F),
        ]);
        *cc = (*cc + 1) & 0x0F;
        if af_total > 0 {
            out.push(af_len as u8);
            if af_len > 0 {
                out.push(af_flags);
                if let (true, Some(pcr)) = (first, flags.pcr) {
                    put_pcr(pcr, out);
                }
                let stuffed = start + 4 + af_total;
                out.resize(stuffed, 0xFF);
            }
        }
        // Payload.
        let mut need = take;
        while need > 0 {
            let Some(p) = pieces.get(piece) else {
                break;
            };
            let avail = &p[piece_pos.min(p.len())..];
            if avail.is_empty() {
                piece += 1;
                piece_pos = 0;
                continue;
            }
            let n = avail.len().min(need);
            out.extend_from_slice(&avail[..n]);
            piece_pos += n;
            need -= n;
        }
        remaining -= take;
        first = false;
        // panic-audit: the packet layout above fills exactly 188 bytes.
        debug_assert_eq!(out.len() - start, PACKET_SIZE);
    }
}

/// Appends a payload-less packet carrying only a PCR (the continuity
/// counter does not advance).
fn write_pcr_only(pid: u16, cc: u8, pcr: u64, discontinuity: bool, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[
        SYNC_BYTE,
        (pid >> 8) as u8 & 0x1F,
        pid as u8,
        0x20 | (cc.wrapping_sub(1) & 0x0F),
        183,
        0x10 | if discontinuity { 0x80 } else { 0 },
    ]);
    put_pcr(pcr, out);
    out.resize(start + PACKET_SIZE, 0xFF);
}

/// Splits a PSI section into packets (pointer_field 0, 0xFF fill).
fn section_packets(pid: u16, section: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut data = Vec::with_capacity(section.len() + 1);
    data.push(0);
    data.extend_from_slice(section);
    for (i, chunk) in data.chunks(184).enumerate() {
        out.extend_from_slice(&[
            SYNC_BYTE,
            (if i == 0 { 0x40 } else { 0 }) | ((pid >> 8) as u8 & 0x1F),
            pid as u8,
            0x10,
        ]);
        out.extend_from_slice(chunk);
        out.resize((i + 1) * PACKET_SIZE, 0xFF);
    }
    out
}

/// Appends ready-made packets, setting their continuity counters.
fn append_with_cc(packets: &[u8], cc: &mut u8, out: &mut Vec<u8>) {
    for packet in packets.chunks_exact(PACKET_SIZE) {
        let at = out.len();
        out.extend_from_slice(packet);
        out[at + 3] = (out[at + 3] & 0xF0) | (*cc & 0x0F);
        *cc = (*cc + 1) & 0x0F;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ts::pes::parse_pes_header;
    use crate::ts::psi::{parse_pat, parse_pmt, EsKind};
    use crate::ts::test_util::*;

    /// What the tests read back from one packet.
    #[derive(Debug)]
    struct Parsed {
        pid: u16,
        unit_start: bool,
        cc: u8,
        has_payload: bool,
        random_access: bool,
        pcr: Option<u64>,
        payload: Vec<u8>,
    }

    fn parse_packets(data: &[u8]) -> Vec<Parsed> {
        assert_eq!(data.len() % PACKET_SIZE, 0);
        data.chunks_exact(PACKET_SIZE)
            .map(|p| {
                assert_eq!(p[0], SYNC_BYTE);
                let afc = (p[3] >> 4) & 3;
                assert_ne!(afc, 0);
                let mut at = 4;
                let mut pcr = None;
                let mut random_access = false;
                if afc & 2 != 0 {
                    let len = p[4] as usize;
                    assert!(len <= 183);
                    if afc == 2 {
                        assert_eq!(len, 183);
                    }
                    if len > 0 {
                        random_access = p[5] & 0x40 != 0;
                        if p[5] & 0x10 != 0 {
                            let b = &p[6..12];
                            pcr = Some(
                                (u64::from(b[0]) << 25)
                                    | (u64::from(b[1]) << 17)
                                    | (u64::from(b[2]) << 9)
                                    | (u64::from(b[3]) << 1)
                                    | (u64::from(b[4]) >> 7),
                            );
                        }
                    }
                    at = 5 + len;
                }
                Parsed {
                    pid: u16::from_be_bytes([p[1] & 0x1F, p[2]]),
                    unit_start: p[1] & 0x40 != 0,
                    cc: p[3] & 0x0F,
                    has_payload: afc & 1 != 0,
                    random_access,
                    pcr,
                    payload: if afc & 1 != 0 {
                        p[at..].to_vec()
                    } else {
                        vec![]
                    },
                }
            })
            .collect()
    }

    fn h264_aac() -> (Vec<Track>, Vec<Frame>) {
        let tracks = vec![video_track(1, Codec::H264), aac_track(2)];
        let frames = interleave(vec![
            video_frames(1, Codec::H264, 60, 0, false, true),
            aac_frames(2, 113, 0),
        ]);
        (tracks, frames)
    }

    #[test]
    fn packets_well_formed_and_continuous() {
        let (tracks, frames) = h264_aac();
        let out = mux_all(&tracks, &frames);
        let packets = parse_packets(&out);
        assert!(packets.iter().all(|p| p.pid != 0x1FFF), "no null packets");
        let mut last_cc: std::collections::HashMap<u16, u8> = Default::default();
        for p in &packets {
            if let Some(&last) = last_cc.get(&p.pid) {
                let expected = if p.has_payload { (last + 1) & 15 } else { last };
                assert_eq!(p.cc, expected, "continuity on PID {:#x}", p.pid);
            }
            last_cc.insert(p.pid, p.cc);
        }
        // PAT and PMT describe the tracks.
        let pat = packets.iter().find(|p| p.pid == 0).unwrap();
        let pat = parse_pat(&pat.payload[1..]).unwrap();
        assert_eq!(pat.first_program().unwrap().pid, PMT_PID);
        let pmt = packets.iter().find(|p| p.pid == PMT_PID).unwrap();
        let pmt = parse_pmt(&pmt.payload[1..]).unwrap();
        assert_eq!(pmt.pcr_pid, 0x100);
        assert_eq!(pmt.streams[0].kind, EsKind::H264);
        assert_eq!(pmt.streams[1].kind, EsKind::Aac);
        assert_eq!(pmt.streams[1].pid, 0x101);
    }

    /// An audio track's ISO 639-2 language goes into the PMT (the
    /// demuxer reads it back); an RFC 5646 tag that is not three letters
    /// does not.
    #[test]
    fn audio_languages_are_written_to_the_pmt() {
        let mut fra = aac_track(2);
        fra.label.language = crate::media::Language::parse(b"fra");
        let mut en = aac_track(3);
        en.label.language = crate::media::Language::parse(b"en");
        let tracks = vec![video_track(1, Codec::H264), fra, en];
        let frames = interleave(vec![
            video_frames(1, Codec::H264, 5, 0, false, true),
            aac_frames(2, 5, 0),
        ]);
        let out = mux_all(&tracks, &frames);
        let packets = parse_packets(&out);
        let pmt = packets.iter().find(|p| p.pid == PMT_PID).unwrap();
        let pmt = parse_pmt(&pmt.payload[1..]).unwrap();
        let lang =
            |i: usize| psi::language(&pmt.streams[i].es_info).map(|l| l.as_str().to_string());
        assert_eq!(lang(1).as_deref(), Some("fra"));
        assert_eq!(pmt.streams[1].kind, EsKind::Aac);
        assert_eq!(lang(2), None);
    }

    /// The elementary stream of each PES on `pid`.
    fn pes_payloads(out: &[u8], pid: u16) -> Vec<Vec<u8>> {
        let mut pes: Vec<Vec<u8>> = Vec::new();
        for p in parse_packets(out).into_iter().filter(|p| p.pid == pid) {
            if p.unit_start {
                pes.push(Vec::new());
            }
            if let Some(last) = pes.last_mut() {
                last.extend_from_slice(&p.payload);
            }
        }
        pes.into_iter()
            .map(|b| b[9 + b[8] as usize..].to_vec())
            .collect()
    }

    /// NAL unit types (H.264) of an Annex B stream with 4-byte start codes.
    fn annexb_types(es: &[u8]) -> Vec<u8> {
        es.windows(5)
            .filter(|w| w[..4] == [0, 0, 0, 1])
            .map(|w| w[4] & 0x1F)
            .collect()
    }

    #[test]
    fn one_aud_per_access_unit_whether_or_not_the_source_has_one() {
        let tracks = vec![video_track(1, Codec::H264)];
        let plain = video_frames(1, Codec::H264, 12, 0, false, false);
        let with_aud: Vec<Frame> = plain
            .iter()
            .map(|f| {
                let mut data = vec![0, 0, 0, 2, 0x09, 0xF0];
                data.extend_from_slice(&f.data);
                Frame {
                    data: data.into(),
                    ..f.clone()
                }
            })
            .collect();
        for frames in [plain, with_aud] {
            let out = mux_all(&tracks, &frames);
            let pes = pes_payloads(&out, 0x100);
            assert_eq!(pes.len(), 12);
            for (i, es) in pes.iter().enumerate() {
                let types = annexb_types(es);
                assert_eq!(types.iter().filter(|t| **t == 9).count(), 1, "{types:?}");
                assert_eq!(types[0], 9, "AUD first: {types:?}");
                if i % 10 == 0 {
                    assert_eq!(&types[1..3], &[7, 8], "parameter sets after the AUD");
                }
            }
        }
    }

    #[test]
    fn psi_and_pcr_intervals() {
        let (tracks, frames) = h264_aac();
        let out = mux_all(&tracks, &frames);
        let packets = parse_packets(&out);
        let mut pcrs = Vec::new();
        let mut psi_times = Vec::new();
        let mut psi_pending = false;
        let mut last_was_psi = false;
        for p in &packets {
            if let Some(pcr) = p.pcr {
                assert_eq!(p.pid, 0x100, "PCR only on the video PID");
                pcrs.push(pcr);
            }
            if p.pid == 0 {
                psi_pending = true;
            }
            if p.unit_start && (p.pid == 0x100 || p.pid == 0x101) {
                let h = parse_pes_header(&p.payload).unwrap();
                let dts = h.dts.or(h.pts).unwrap();
                if psi_pending {
                    psi_times.push(dts as i64);
                    psi_pending = false;
                }
                if p.pid == 0x100 && p.random_access {
                    assert!(last_was_psi, "PAT/PMT right before a keyframe");
                }
            }
            last_was_psi = p.pid == PMT_PID;
        }
        assert!(pcrs.len() > 50);
        for w in pcrs.windows(2) {
            assert!(w[1] >= w[0], "PCR monotonic");
            assert!(
                w[1] - w[0] <= PCR_INTERVAL as u64,
                "PCR gap {}",
                w[1] - w[0]
            );
        }
        // PSI in stream time (DTS of the next PES).
        assert!(psi_times.len() > 20);
        for w in psi_times.windows(2) {
            assert!(w[1] - w[0] <= PSI_INTERVAL, "PSI gap {}", w[1] - w[0]);
        }
        // The first frame's DTS maps to 1 s; the PCR runs behind it.
        assert_eq!(psi_times[0], START_TICKS);
        assert_eq!(pcrs[0], (START_TICKS - PCR_LEAD) as u64);
    }

    #[test]
    fn audio_only_pcr_on_audio_pid() {
        let tracks = vec![opus_track(7)];
        let frames = opus_frames(7, 50, 1_000);
        let out = mux_all(&tracks, &frames);
        let packets = parse_packets(&out);
        let pcrs: Vec<u64> = packets.iter().filter_map(|p| p.pcr).collect();
        assert_eq!(pcrs.len(), 50);
        assert!(packets
            .iter()
            .filter(|p| p.pcr.is_some())
            .all(|p| p.pid == 0x100));
    }

    #[test]
    fn timestamps_wrap_at_33_bits() {
        let tracks = vec![aac_track(2)];
        let mut muxer = Muxer::new(&tracks).unwrap();
        let mut out = Vec::new();
        let first = aac_frames(2, 1, 0);
        muxer.write_frame(&first[0], &mut out).unwrap();
        let late = Frame {
            pts: (1i64 << 33) - START_TICKS + 10,
            dts: (1i64 << 33) - START_TICKS + 10,
            ..first[0].clone()
        };
        out.clear();
        muxer.write_frame(&late, &mut out).unwrap();
        let packets = parse_packets(&out);
        let pes = packets
            .iter()
            .find(|p| p.pid == 0x100 && p.unit_start)
            .unwrap();
        assert_eq!(parse_pes_header(&pes.payload).unwrap().pts, Some(10));
    }

    #[test]
    fn video_annexb_with_aud_and_parameter_sets() {
        let tracks = vec![video_track(1, Codec::H264)];
        let frames = video_frames(1, Codec::H264, 2, 0, false, false);
        let mut muxer = Muxer::new(&tracks).unwrap();
        let mut out = Vec::new();
        muxer.write_frame(&frames[0], &mut out).unwrap();
        let packets = parse_packets(&out);
        let es: Vec<u8> = packets
            .iter()
            .filter(|p| p.pid == 0x100)
            .flat_map(|p| p.payload.clone())
            .collect();
        let h = parse_pes_header(&es).unwrap();
        let body = &es[h.payload_offset..];
        let units: Vec<&[u8]> = crate::codec::nal::annexb_units(body).collect();
        assert_eq!(units[0], &[0x09, 0xF0]);
        assert_eq!(units[1], &h264_sps()[..]);
        assert_eq!(units[2], &h264_pps()[..]);
        assert_eq!(units.len(), 5);
        // A non-keyframe gets the AUD only.
        out.clear();
        muxer.write_frame(&frames[1], &mut out).unwrap();
        let es: Vec<u8> = parse_packets(&out)
            .iter()
            .filter(|p| p.pid == 0x100)
            .flat_map(|p| p.payload.clone())
            .collect();
        let h = parse_pes_header(&es).unwrap();
        let units: Vec<&[u8]> = crate::codec::nal::annexb_units(&es[h.payload_offset..]).collect();
        assert_eq!(units.len(), 3);
    }

    #[test]
    fn errors() {
        assert_eq!(Muxer::new(&[]).unwrap_err(), MuxError::NoTracks);
        let mut bad_aac = aac_track(1);
        bad_aac.config = CodecConfig::None;
        assert_eq!(
            Muxer::new(&[bad_aac]).unwrap_err(),
            MuxError::UnsupportedTrack(1)
        );
        let mut muxer = Muxer::new(&[video_track(1, Codec::H264)]).unwrap();
        let mut out = Vec::new();
        let mut frame = video_frames(1, Codec::H264, 1, 0, false, false).remove(0);
        frame.track = 9;
        assert_eq!(
            muxer.write_frame(&frame, &mut out),
            Err(MuxError::UnknownTrack(9))
        );
        frame.track = 1;
        frame.data = Bytes::from_static(&[0, 0, 0, 9, 1]);
        assert!(matches!(
            muxer.write_frame(&frame, &mut out),
            Err(MuxError::BadFrame(_))
        ));
        assert!(out.is_empty());
    }

    #[test]
    fn vp8_is_left_out() {
        let mut vp8 = video_track(1, Codec::H264);
        vp8.codec = Codec::Vp8;
        vp8.config = CodecConfig::None;
        assert_eq!(Muxer::new(&[vp8.clone()]).unwrap_err(), MuxError::NoTracks);
        // With audio: the audio alone, and VP8 frames write nothing.
        let mut muxer = Muxer::new(&[vp8, aac_track(2)]).unwrap();
        let mut out = Vec::new();
        let frame = Frame {
            track: 1,
            pts: 0,
            dts: 0,
            keyframe: true,
            data: Bytes::from_static(&[0x50, 0x2a, 0x01, 0x9d, 0x01, 0x2a]),
        };
        assert_eq!(muxer.write_frame(&frame, &mut out), Ok(()));
        assert!(out.is_empty());
        assert_eq!(muxer.tracks.len(), 1);
    }

    #[test]
    fn stuffing_for_every_payload_size() {
        // Every size around packet boundaries gives whole packets.
        let tracks = vec![mp3_track(1)];
        let mut muxer = Muxer::new(&tracks).unwrap();
        for len in 0..600usize {
            let mut out = Vec::new();
            let frame = Frame {
                track: 1,
                pts: len as i64 * 10,
                dts: len as i64 * 10,
                keyframe: len % 2 == 0,
                data: Bytes::from(vec![0xAB; len]),
            };
            muxer.write_frame(&frame, &mut out).unwrap();
            let packets = parse_packets(&out);
            let es: Vec<u8> = packets
                .iter()
                .filter(|p| p.pid == 0x100)
                .flat_map(|p| p.payload.clone())
                .collect();
            let h = parse_pes_header(&es).unwrap();
            assert_eq!(es.len() - h.payload_offset, len);
            assert_eq!(h.packet_length as usize, es.len() - 6);
        }
    }

    use bytes::Bytes;
}
