//! FLV audio and video tag BODIES, the payloads of RTMP message types 8 and
//! 9, to and from kiln's media types.
//!
//! Video: legacy FLV AVC (codec id 7) and the de-facto HEVC id 12; enhanced
//! RTMP (ExHeader) with FourCC `avc1` / `hvc1`: SequenceStart, CodedFrames
//! (with composition time), CodedFramesX, SequenceEnd. Audio: AAC (sequence
//! header = AudioSpecificConfig, raw frames) and MP3, legacy or enhanced
//! (`mp4a`, `.mp3`), and enhanced Opus (`Opus`: SequenceStart = its
//! `OpusHead`, raw packets; mono or stereo). Enhanced RTMP v2 multitrack tags (FFmpeg's FLV muxer with
//! several video or audio streams, OBS's multitrack video) carry several
//! tracks, each its own track of the stream; ModEx prefixes are skipped.
//! [`TagIngest`] turns a publisher's tags into [`Track`]s and [`Frame`]s
//! (NAL lengths normalised to 4 bytes, times in 90 kHz ticks = RTMP ms x
//! 90); the `write_*` functions go the other way for the push client.
//!
//! Not here: FLV file headers and tag headers (RTMP has none), audio
//! FourCCs `fLaC`, `ac-3`, `ec-3` (ignored), other legacy codecs (rejected with
//! [`FlvError::UnsupportedCodec`]).

use std::fmt;

use bytes::Bytes;

use crate::codec::{aac, h264, h265, nal, CodecError};
use crate::media::{
    AudioParams, Codec, CodecConfig, Frame, Ticks, Track, TrackId, VideoParams, TICKS_PER_MS,
};

use super::amf0::Amf0Value;

/// The track id [`TagIngest`] gives the video track.
pub const VIDEO_TRACK_ID: TrackId = 1;
/// The track id [`TagIngest`] gives the audio track.
pub const AUDIO_TRACK_ID: TrackId = 2;

const LEGACY_AVC: u8 = 7;
const LEGACY_HEVC: u8 = 12;
const SOUND_MP3: u8 = 2;
const SOUND_AAC: u8 = 10;

const EX_SEQUENCE_START: u8 = 0;
const EX_CODED_FRAMES: u8 = 1;
const EX_SEQUENCE_END: u8 = 2;
const EX_CODED_FRAMES_X: u8 = 3;
const EX_MULTITRACK: u8 = 6;
const EX_MOD_EX: u8 = 7;
/// Sound format 9: an enhanced audio tag (E-RTMP v2); its packet types.
const SOUND_EX_HEADER: u8 = 9;
const AUDIO_EX_MULTITRACK: u8 = 5;
const AUDIO_EX_MOD_EX: u8 = 7;

/// Why a tag body could not be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlvError {
    /// The body ended inside its header.
    Truncated,
    /// A codec kiln does not relay: the legacy id or the FourCC.
    UnsupportedCodec(String),
    /// The codec configuration or frame data is malformed.
    Codec(CodecError),
}

impl fmt::Display for FlvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlvError::Truncated => write!(f, "FLV tag body truncated"),
            FlvError::UnsupportedCodec(c) => write!(f, "unsupported FLV codec {c}"),
            FlvError::Codec(e) => write!(f, "FLV payload: {e}"),
        }
    }
}

impl std::error::Error for FlvError {}

impl From<CodecError> for FlvError {
    fn from(e: CodecError) -> Self {
        FlvError::Codec(e)
    }
}

/// A parsed video tag body (one track's part of it).
#[derive(Clone, Debug, PartialEq)]
pub enum VideoTag {
    SequenceHeader {
        codec: Codec,
        config: CodecConfig,
        length_size: u8,
    },
    /// Length-prefixed NAL units with the sequence header's length size.
    Frame {
        codec: Codec,
        keyframe: bool,
        cts_ms: i32,
        data: Bytes,
    },
    EndOfSequence,
    /// Command frames, metadata: nothing to relay.
    Ignored,
}

/// A parsed audio tag body (one track's part of it).
#[derive(Clone, Debug, PartialEq)]
pub enum AudioTag {
    /// A codec's configuration: AAC's AudioSpecificConfig, or Opus's ID
    /// header (its parameters; Opus has no configuration kiln keeps).
    SequenceHeader {
        codec: Codec,
        config: CodecConfig,
        params: Option<AudioParams>,
    },
    Frame {
        codec: Codec,
        data: Bytes,
        /// From the tag's flags (rate and channels are coarse in FLV);
        /// `None` in an enhanced tag, where the configuration says.
        params: Option<AudioParams>,
    },
    Ignored,
}

fn si24(b: &[u8]) -> i32 {
    let v = (i32::from(b[0]) << 16) | (i32::from(b[1]) << 8) | i32::from(b[2]);
    (v << 8) >> 8
}

fn codec_for_fourcc(fourcc: &[u8]) -> Result<Codec, FlvError> {
    match fourcc {
        b"avc1" => Ok(Codec::H264),
        b"hvc1" => Ok(Codec::H265),
        other => Err(FlvError::UnsupportedCodec(
            String::from_utf8_lossy(other).into_owned(),
        )),
    }
}

fn parse_config(codec: Codec, record: &[u8]) -> Result<(CodecConfig, u8), FlvError> {
    Ok(match codec {
        Codec::H265 => h265::parse_decoder_config(record)?,
        _ => h264::parse_decoder_config(record)?,
    })
}

/// Enhanced RTMP v2's multitrack types (the high nibble after a
/// Multitrack packet type).
const ONE_TRACK: u8 = 0;
const MANY_TRACKS_MANY_CODECS: u8 = 2;

/// An enhanced RTMP tag's header after its first byte: the packet type
/// once ModEx prefixes are skipped and a Multitrack wrapper is opened.
struct ExHeader {
    packet_type: u8,
    /// The multitrack type; `None` for one track (id 0).
    multitrack: Option<u8>,
    /// Where the FourCC (or the first track of a multitrack tag) starts.
    pos: usize,
}

/// Reads the enhanced header of `body` whose first byte's low nibble is
/// the packet type; `mod_ex` and `multitrack` are that kind's codes for
/// ModEx and Multitrack (video and audio number them alike today).
fn ex_header(body: &[u8], mod_ex: u8, multitrack: u8) -> Result<ExHeader, FlvError> {
    let byte = |at: usize| body.get(at).copied().ok_or(FlvError::Truncated);
    let mut packet_type = byte(0)? & 0x0F;
    let mut pos = 1;
    // ModEx: [size-1 (UI8, or 255 then UI16)] [data] [type | packet type],
    // repeated while the packet type is ModEx again. Its one defined use,
    // a timestamp offset in nanoseconds, is below RTMP's millisecond.
    while packet_type == mod_ex {
        let mut size = usize::from(byte(pos)?) + 1;
        pos += 1;
        if size == 256 {
            size = usize::from(u16::from_be_bytes([byte(pos)?, byte(pos + 1)?])) + 1;
            pos += 2;
        }
        pos += size;
        packet_type = byte(pos)? & 0x0F;
        pos += 1;
    }
    let mut kind = None;
    if packet_type == multitrack {
        let b = byte(pos)?;
        pos += 1;
        packet_type = b & 0x0F;
        // Multitrack or ModEx again inside Multitrack is not in the spec:
        // an unknown multitrack type, read as nothing.
        let nested = packet_type == multitrack || packet_type == mod_ex;
        kind = Some(if nested { 0x0F } else { b >> 4 });
    }
    Ok(ExHeader {
        packet_type,
        multitrack: kind,
        pos,
    })
}

/// What [`for_each_ex_track`] calls with each track's part: its FLV track
/// id, FourCC and body.
type TrackPart<'a> = dyn FnMut(u8, &[u8], Bytes) -> Result<(), FlvError> + 'a;

/// Calls `each(track, fourcc, body)` for every track part of an enhanced
/// tag, in order: one (track 0) without Multitrack; with it, one
/// (OneTrack) or several, each with its size, sharing a FourCC or each
/// naming its own.
fn for_each_ex_track(body: &Bytes, h: &ExHeader, each: &mut TrackPart<'_>) -> Result<(), FlvError> {
    let mut pos = h.pos;
    let take = |pos: &mut usize, n: usize| -> Result<&[u8], FlvError> {
        let b = body.get(*pos..*pos + n).ok_or(FlvError::Truncated)?;
        *pos += n;
        Ok(b)
    };
    let Some(kind) = h.multitrack else {
        let fourcc = take(&mut pos, 4)?;
        return each(0, fourcc, body.slice(pos..));
    };
    if kind > MANY_TRACKS_MANY_CODECS {
        // An unknown multitrack type, or a wrapper nested in one (see
        // `ex_header`): nothing to read.
        return Ok(());
    }
    let shared = if kind == MANY_TRACKS_MANY_CODECS {
        None
    } else {
        Some(take(&mut pos, 4)?)
    };
    while pos < body.len() {
        let fourcc = match shared {
            Some(f) => f,
            None => take(&mut pos, 4)?,
        };
        let track = take(&mut pos, 1)?[0];
        let end = if kind == ONE_TRACK {
            body.len()
        } else {
            let n = take(&mut pos, 3)?;
            let n = (usize::from(n[0]) << 16) | (usize::from(n[1]) << 8) | usize::from(n[2]);
            pos.checked_add(n)
                .filter(|&e| e <= body.len())
                .ok_or(FlvError::Truncated)?
        };
        each(track, fourcc, body.slice(pos..end))?;
        if kind == ONE_TRACK {
            break;
        }
        pos = end;
    }
    Ok(())
}

/// Parses a video tag body (RTMP message type 9): `each(track, tag)` for
/// each track it carries (enhanced RTMP v2 multitrack), or once for track
/// 0. A track's own error (a codec kiln does not relay, a bad
/// configuration) is handed to `each`; an error of the tag as a whole
/// (truncated framing) is returned.
pub fn parse_video_tag(
    body: &Bytes,
    each: &mut dyn FnMut(u8, Result<VideoTag, FlvError>) -> Result<(), FlvError>,
) -> Result<(), FlvError> {
    let b0 = *body.first().ok_or(FlvError::Truncated)?;
    if b0 & 0x80 != 0 {
        // Enhanced RTMP ExHeader.
        let frame_type = (b0 >> 4) & 0x07;
        if frame_type == 5 {
            return each(0, Ok(VideoTag::Ignored));
        }
        let h = ex_header(body, EX_MOD_EX, EX_MULTITRACK)?;
        let keyframe = frame_type == 1;
        return for_each_ex_track(body, &h, &mut |track, fourcc, part| {
            let tag = match h.packet_type {
                EX_SEQUENCE_START | EX_CODED_FRAMES | EX_CODED_FRAMES_X | EX_SEQUENCE_END => {
                    ex_video(h.packet_type, keyframe, fourcc, part)
                }
                _ => Ok(VideoTag::Ignored),
            };
            each(track, tag)
        });
    }
    each(0, legacy_video(b0, body))
}

/// One track's part of an enhanced video tag.
fn ex_video(
    packet_type: u8,
    keyframe: bool,
    fourcc: &[u8],
    part: Bytes,
) -> Result<VideoTag, FlvError> {
    let codec = codec_for_fourcc(fourcc)?;
    Ok(match packet_type {
        EX_SEQUENCE_START => {
            let (config, length_size) = parse_config(codec, &part)?;
            VideoTag::SequenceHeader {
                codec,
                config,
                length_size,
            }
        }
        EX_SEQUENCE_END => VideoTag::EndOfSequence,
        EX_CODED_FRAMES => {
            let c = part.get(0..3).ok_or(FlvError::Truncated)?;
            VideoTag::Frame {
                codec,
                keyframe,
                cts_ms: si24(c),
                data: part.slice(3..),
            }
        }
        _ => VideoTag::Frame {
            codec,
            keyframe,
            cts_ms: 0,
            data: part,
        },
    })
}

/// A legacy FLV video tag (AVC, and HEVC as id 12).
fn legacy_video(b0: u8, body: &Bytes) -> Result<VideoTag, FlvError> {
    let frame_type = b0 >> 4;
    let codec = match b0 & 0x0F {
        LEGACY_AVC => Codec::H264,
        LEGACY_HEVC => Codec::H265,
        other => {
            return Err(FlvError::UnsupportedCodec(format!(
                "video codec id {other}"
            )))
        }
    };
    if frame_type == 5 {
        return Ok(VideoTag::Ignored);
    }
    let h = body.get(1..5).ok_or(FlvError::Truncated)?;
    Ok(match h[0] {
        0 => {
            let (config, length_size) = parse_config(codec, &body[5..])?;
            VideoTag::SequenceHeader {
                codec,
                config,
                length_size,
            }
        }
        1 => VideoTag::Frame {
            codec,
            keyframe: frame_type == 1,
            cts_ms: si24(&h[1..4]),
            data: body.slice(5..),
        },
        2 => VideoTag::EndOfSequence,
        _ => VideoTag::Ignored,
    })
}

fn flv_sound_params(b0: u8) -> AudioParams {
    let sample_rate = [5512, 11025, 22050, 44100][usize::from((b0 >> 2) & 3)];
    AudioParams {
        sample_rate,
        channels: if b0 & 1 != 0 { 2 } else { 1 },
    }
}

/// Parses an audio tag body (RTMP message type 8), as
/// [`parse_video_tag`] does video: enhanced audio (sound format 9) with
/// the `mp4a` FourCC, one track or several; legacy AAC and MP3 as track 0.
pub fn parse_audio_tag(
    body: &Bytes,
    each: &mut dyn FnMut(u8, Result<AudioTag, FlvError>) -> Result<(), FlvError>,
) -> Result<(), FlvError> {
    let b0 = *body.first().ok_or(FlvError::Truncated)?;
    if b0 >> 4 == SOUND_EX_HEADER {
        let h = ex_header(body, AUDIO_EX_MOD_EX, AUDIO_EX_MULTITRACK)?;
        return for_each_ex_track(body, &h, &mut |track, fourcc, part| {
            let tag = match (fourcc, h.packet_type) {
                (b"mp4a", EX_SEQUENCE_START) => aac_config(part),
                (b"mp4a", EX_CODED_FRAMES) => Ok(AudioTag::Frame {
                    codec: Codec::Aac,
                    data: part,
                    params: None,
                }),
                (b"Opus", EX_SEQUENCE_START) => opus_head(&part),
                (b"Opus", EX_CODED_FRAMES) => Ok(AudioTag::Frame {
                    codec: Codec::Opus,
                    data: part,
                    params: None,
                }),
                // MP3 says its rate and channels in every frame.
                (b".mp3", EX_CODED_FRAMES) => Ok(AudioTag::Frame {
                    codec: Codec::Mp3,
                    params: crate::codec::mp3::parse_header(&part)
                        .ok()
                        .map(|m| AudioParams {
                            sample_rate: m.sample_rate,
                            channels: m.channels,
                        }),
                    data: part,
                }),
                // Other FourCCs (FLAC, AC-3, E-AC-3) and the multichannel
                // configuration: not relayed.
                _ => Ok(AudioTag::Ignored),
            };
            each(track, tag)
        });
    }
    each(0, legacy_audio(b0, body))
}

fn aac_config(asc: Bytes) -> Result<AudioTag, FlvError> {
    aac::parse_asc(&asc)?;
    let config = CodecConfig::Aac { asc };
    Ok(AudioTag::SequenceHeader {
        codec: Codec::Aac,
        params: aac::audio_params(&config),
        config,
    })
}

/// Opus's SequenceStart: its ID header (RFC 7845 section 5.1: `OpusHead`,
/// version, channel count, ...). Opus runs at 48 kHz whatever the input
/// rate it names; kiln relays 1 or 2 channels.
fn opus_head(head: &[u8]) -> Result<AudioTag, FlvError> {
    let ([magic @ .., version, channels], _) =
        head.split_first_chunk::<10>().ok_or(FlvError::Truncated)?;
    if magic != b"OpusHead" || version >> 4 != 0 || !(1..=2).contains(channels) {
        return Err(FlvError::UnsupportedCodec(
            "Opus other than a mono or stereo OpusHead".into(),
        ));
    }
    Ok(AudioTag::SequenceHeader {
        codec: Codec::Opus,
        config: CodecConfig::None,
        params: Some(AudioParams {
            sample_rate: 48_000,
            channels: *channels,
        }),
    })
}

fn legacy_audio(b0: u8, body: &Bytes) -> Result<AudioTag, FlvError> {
    match b0 >> 4 {
        SOUND_AAC => match *body.get(1).ok_or(FlvError::Truncated)? {
            0 => aac_config(body.slice(2..)),
            1 => Ok(AudioTag::Frame {
                codec: Codec::Aac,
                data: body.slice(2..),
                params: Some(flv_sound_params(b0)),
            }),
            _ => Ok(AudioTag::Ignored),
        },
        SOUND_MP3 => Ok(AudioTag::Frame {
            codec: Codec::Mp3,
            data: body.slice(1..),
            params: Some(flv_sound_params(b0)),
        }),
        other => Err(FlvError::UnsupportedCodec(format!("sound format {other}"))),
    }
}

/// Stream properties announced in onMetaData, the fallback when the codec
/// configuration does not say.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MetadataHints {
    pub width: u32,
    pub height: u32,
    pub framerate: f64,
    /// Bits per second.
    pub video_bitrate: u32,
    /// Bits per second.
    pub audio_bitrate: u32,
}

impl MetadataHints {
    /// Reads width, height, framerate, videodatarate and audiodatarate
    /// (kbit/s) from an onMetaData object or ECMA array.
    pub fn from_amf(meta: &Amf0Value) -> Self {
        let num = |k: &str| meta.get_f64(k).filter(|v| v.is_finite() && *v > 0.0);
        let int = |k: &str| num(k).map(|v| v.min(f64::from(u32::MAX)) as u32);
        let kbps = |k: &str| num(k).map(|v| (v * 1000.0).min(f64::from(u32::MAX)) as u32);
        MetadataHints {
            width: int("width").unwrap_or(0),
            height: int("height").unwrap_or(0),
            framerate: num("framerate").or_else(|| num("fps")).unwrap_or(0.0),
            video_bitrate: kbps("videodatarate").unwrap_or(0),
            audio_bitrate: kbps("audiodatarate").unwrap_or(0),
        }
    }
}

/// What one tag did to the ingest state; its frames are taken with
/// [`TagIngest::frames`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TagOutcome {
    /// A track was created or its configuration changed.
    pub tracks_changed: bool,
}

/// The most tracks of one kind a publisher's multitrack tags make; parts
/// for further track ids are dropped.
pub const MAX_TRACKS_PER_KIND: usize = 8;

/// A video track of the publisher: its FLV track id, kiln's track, and
/// the NAL length size of its sequence header.
#[derive(Debug)]
struct VideoIn {
    flv: u8,
    track: Track,
    length_size: u8,
}

/// An audio track of the publisher.
#[derive(Debug)]
struct AudioIn {
    flv: u8,
    track: Track,
}

/// Turns a publisher's audio and video tags into tracks and frames.
///
/// FLV track 0 (every legacy tag, and enhanced tags without Multitrack)
/// is video track [`VIDEO_TRACK_ID`] and audio track [`AUDIO_TRACK_ID`];
/// the other tracks of enhanced RTMP v2 multitrack tags (OBS's and
/// FFmpeg's renditions, audio languages) get the next ids, 3 upward, in
/// the order they first appear, for the life of the session. Frames of a
/// track before its first sequence header are dropped (nothing could
/// decode them). RTMP's 32-bit millisecond timestamps are unwrapped to 64
/// bits.
#[derive(Debug)]
pub struct TagIngest {
    video: Vec<VideoIn>,
    audio: Vec<AudioIn>,
    next_id: TrackId,
    hints: MetadataHints,
    last_ms: Option<(u32, i64)>,
    /// The frames of the last tag (several for a multitrack tag).
    ready: std::collections::VecDeque<Frame>,
}

impl Default for TagIngest {
    fn default() -> Self {
        TagIngest {
            video: Vec::new(),
            audio: Vec::new(),
            next_id: AUDIO_TRACK_ID + 1,
            hints: MetadataHints::default(),
            last_ms: None,
            ready: std::collections::VecDeque::new(),
        }
    }
}

impl TagIngest {
    /// The current tracks: video, then audio, each in FLV track order.
    pub fn tracks(&self) -> Vec<Track> {
        self.video
            .iter()
            .map(|v| &v.track)
            .chain(self.audio.iter().map(|a| &a.track))
            .cloned()
            .collect()
    }

    /// The frames the last [`TagIngest::video`] or [`TagIngest::audio`]
    /// call made, in the tag's order.
    pub fn frames(&mut self) -> std::collections::vec_deque::Drain<'_, Frame> {
        self.ready.drain(..)
    }

    /// Takes onMetaData hints (used for tracks created afterwards and to
    /// fill gaps in existing ones). They describe track 0.
    pub fn set_metadata(&mut self, meta: &Amf0Value) {
        self.hints = MetadataHints::from_amf(meta);
    }

    fn unwrap_ms(&mut self, ts: u32) -> i64 {
        let v = match self.last_ms {
            None => i64::from(ts),
            Some((last, last64)) => last64 + i64::from(ts.wrapping_sub(last) as i32),
        };
        self.last_ms = Some((ts, v));
        v
    }

    /// kiln's id for a new FLV track of a kind: track 0 keeps the fixed
    /// ids, the others take the next free one.
    fn new_id(&mut self, flv: u8, zero: TrackId) -> TrackId {
        if flv == 0 {
            return zero;
        }
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn video_params(&self, flv: u8, codec: Codec, config: &CodecConfig) -> Option<VideoParams> {
        let from_sps = match codec {
            Codec::H265 => h265::video_params(config),
            _ => h264::video_params(config),
        };
        let h = if flv == 0 {
            self.hints
        } else {
            MetadataHints::default()
        };
        match from_sps {
            Some(mut p) => {
                if p.framerate <= 0.0 {
                    p.framerate = h.framerate;
                }
                Some(p)
            }
            None if h.width > 0 && h.height > 0 => Some(VideoParams {
                width: h.width,
                height: h.height,
                framerate: h.framerate,
            }),
            None => Some(VideoParams::default()),
        }
    }

    /// Handles one video tag body received at `timestamp_ms`.
    pub fn video(&mut self, timestamp_ms: u32, body: &Bytes) -> Result<TagOutcome, FlvError> {
        self.ready.clear();
        let mut out = TagOutcome::default();
        let dts: Ticks = self.unwrap_ms(timestamp_ms) * TICKS_PER_MS;
        parse_video_tag(body, &mut |flv, tag| {
            match tag {
                Ok(tag) => self.video_part(flv, dts, tag, &mut out),
                // A further track in a codec kiln does not relay is left
                // out; track 0's error is the publisher's.
                Err(_) if flv != 0 => Ok(()),
                Err(e) => Err(e),
            }
        })?;
        Ok(out)
    }

    fn video_part(
        &mut self,
        flv: u8,
        dts: Ticks,
        tag: VideoTag,
        out: &mut TagOutcome,
    ) -> Result<(), FlvError> {
        let at = self.video.iter().position(|v| v.flv == flv);
        match tag {
            VideoTag::SequenceHeader {
                codec,
                config,
                length_size,
            } => {
                if let Some(v) = at.map(|i| &mut self.video[i]) {
                    v.length_size = length_size;
                    if v.track.codec == codec && v.track.config == config {
                        return Ok(());
                    }
                } else if self.video.len() >= MAX_TRACKS_PER_KIND {
                    return Ok(());
                }
                let video = self.video_params(flv, codec, &config);
                let bitrate = if flv == 0 {
                    self.hints.video_bitrate
                } else {
                    0
                };
                let id = match at {
                    Some(i) => self.video[i].track.id,
                    None => self.new_id(flv, VIDEO_TRACK_ID),
                };
                let track = Track {
                    id,
                    codec,
                    config,
                    video,
                    audio: None,
                    bitrate,
                    label: Default::default(),
                };
                match at {
                    Some(i) => self.video[i].track = track,
                    None => {
                        self.video.push(VideoIn {
                            flv,
                            track,
                            length_size,
                        });
                        self.video.sort_by_key(|v| v.flv);
                    }
                }
                out.tracks_changed = true;
            }
            VideoTag::Frame {
                codec,
                keyframe,
                cts_ms,
                data,
            } => {
                let Some(v) = at.map(|i| &self.video[i]) else {
                    return Ok(());
                };
                if v.track.codec != codec || data.is_empty() {
                    return Ok(());
                }
                let data = nal::normalize_length_size_bytes(data, v.length_size)?;
                if data.is_empty() {
                    return Ok(());
                }
                self.ready.push_back(Frame {
                    track: v.track.id,
                    pts: dts + Ticks::from(cts_ms) * TICKS_PER_MS,
                    dts,
                    keyframe,
                    data,
                });
            }
            VideoTag::EndOfSequence | VideoTag::Ignored => {}
        }
        Ok(())
    }

    /// Handles one audio tag body received at `timestamp_ms`.
    pub fn audio(&mut self, timestamp_ms: u32, body: &Bytes) -> Result<TagOutcome, FlvError> {
        self.ready.clear();
        let mut out = TagOutcome::default();
        let t: Ticks = self.unwrap_ms(timestamp_ms) * TICKS_PER_MS;
        parse_audio_tag(body, &mut |flv, tag| match tag {
            Ok(tag) => {
                self.audio_part(flv, t, tag, &mut out);
                Ok(())
            }
            Err(_) if flv != 0 => Ok(()),
            Err(e) => Err(e),
        })?;
        Ok(out)
    }

    fn audio_part(&mut self, flv: u8, t: Ticks, tag: AudioTag, out: &mut TagOutcome) {
        let at = self.audio.iter().position(|a| a.flv == flv);
        let (codec, config, params, data) = match tag {
            AudioTag::SequenceHeader {
                codec,
                config,
                params,
            } => {
                if at.is_some_and(|i| {
                    let t = &self.audio[i].track;
                    t.codec == codec && t.config == config && t.audio == params
                }) {
                    return;
                }
                (codec, config, params, None)
            }
            AudioTag::Frame {
                codec,
                data,
                params,
            } => match at.map(|i| &self.audio[i].track) {
                Some(t) if t.codec == codec => (codec, CodecConfig::None, None, Some(data)),
                // MP3 has no sequence header: its first frame makes the
                // track (or replaces another codec's).
                Some(_) | None if codec == Codec::Mp3 => {
                    (codec, CodecConfig::None, params, Some(data))
                }
                _ => return,
            },
            AudioTag::Ignored => return,
        };
        let known = at.is_some_and(|i| self.audio[i].track.codec == codec) && data.is_some();
        if !known {
            if at.is_none() && self.audio.len() >= MAX_TRACKS_PER_KIND {
                return;
            }
            let id = match at {
                Some(i) => self.audio[i].track.id,
                None => self.new_id(flv, AUDIO_TRACK_ID),
            };
            let track = Track {
                id,
                codec,
                config,
                video: None,
                audio: params,
                bitrate: if flv == 0 {
                    self.hints.audio_bitrate
                } else {
                    0
                },
                label: Default::default(),
            };
            match at {
                Some(i) => self.audio[i].track = track,
                None => {
                    self.audio.push(AudioIn { flv, track });
                    self.audio.sort_by_key(|a| a.flv);
                }
            }
            out.tracks_changed = true;
        }
        let Some(data) = data.filter(|d| !d.is_empty()) else {
            return;
        };
        let Some(id) = self.audio.iter().find(|a| a.flv == flv).map(|a| a.track.id) else {
            return;
        };
        self.ready.push_back(Frame {
            track: id,
            pts: t,
            dts: t,
            keyframe: true,
            data,
        });
    }
}

/// Writes the sequence header tag body for a video track (legacy AVC for
/// H.264, enhanced RTMP `hvc1` SequenceStart for H.265).
pub fn write_video_sequence_header(track: &Track, out: &mut Vec<u8>) -> Result<(), FlvError> {
    match (&track.codec, &track.config) {
        (Codec::H264, CodecConfig::H264 { sps, pps }) => {
            let record = h264::build_decoder_config(sps, pps)?;
            out.extend_from_slice(&[0x17, 0, 0, 0, 0]);
            out.extend_from_slice(&record);
            Ok(())
        }
        (Codec::H265, CodecConfig::H265 { vps, sps, pps }) => {
            let record = h265::build_decoder_config(vps, sps, pps)?;
            out.push(0x80 | 0x10 | EX_SEQUENCE_START);
            out.extend_from_slice(b"hvc1");
            out.extend_from_slice(&record);
            Ok(())
        }
        (Codec::H264 | Codec::H265, _) => Err(FlvError::Codec(CodecError::Invalid(
            "video track without parameter sets",
        ))),
        (c, _) => Err(FlvError::UnsupportedCodec(c.api_name().to_owned())),
    }
}

/// The tag header for a video frame; the frame's data (4-byte
/// length-prefixed NAL units) follows it unchanged. Returns the header
/// bytes and their length.
pub fn video_frame_header(
    codec: Codec,
    keyframe: bool,
    cts_ms: i32,
) -> Result<([u8; 8], usize), FlvError> {
    let cts = cts_ms.clamp(-0x80_0000, 0x7F_FFFF).to_be_bytes();
    let ft: u8 = if keyframe { 1 } else { 2 };
    match codec {
        Codec::H264 => Ok((
            [ft << 4 | LEGACY_AVC, 1, cts[1], cts[2], cts[3], 0, 0, 0],
            5,
        )),
        Codec::H265 if cts_ms == 0 => Ok((
            [
                0x80 | ft << 4 | EX_CODED_FRAMES_X,
                b'h',
                b'v',
                b'c',
                b'1',
                0,
                0,
                0,
            ],
            5,
        )),
        Codec::H265 => Ok((
            [
                0x80 | ft << 4 | EX_CODED_FRAMES,
                b'h',
                b'v',
                b'c',
                b'1',
                cts[1],
                cts[2],
                cts[3],
            ],
            8,
        )),
        c => Err(FlvError::UnsupportedCodec(c.api_name().to_owned())),
    }
}

fn sound_flags(codec: Codec, params: Option<AudioParams>) -> Result<u8, FlvError> {
    match codec {
        // AAC: always "44 kHz, 16 bit, stereo"; the ASC says the truth.
        Codec::Aac => Ok(0xAF),
        Codec::Mp3 => {
            let p = params.unwrap_or(AudioParams {
                sample_rate: 44100,
                channels: 2,
            });
            let rate = match p.sample_rate {
                0..=8000 => 0,
                8001..=11025 => 1,
                11026..=22050 => 2,
                _ => 3,
            };
            Ok(SOUND_MP3 << 4 | rate << 2 | 0x02 | u8::from(p.channels > 1))
        }
        c => Err(FlvError::UnsupportedCodec(c.api_name().to_owned())),
    }
}

/// Writes the AAC sequence header tag body for an audio track. Tracks
/// without one (MP3) write nothing and return `Ok(false)`.
pub fn write_audio_sequence_header(track: &Track, out: &mut Vec<u8>) -> Result<bool, FlvError> {
    match (&track.codec, &track.config) {
        (Codec::Aac, CodecConfig::Aac { asc }) => {
            out.extend_from_slice(&[0xAF, 0]);
            out.extend_from_slice(asc);
            Ok(true)
        }
        (Codec::Aac, _) => Err(FlvError::Codec(CodecError::Invalid(
            "AAC track without AudioSpecificConfig",
        ))),
        (Codec::Mp3, _) => Ok(false),
        (c, _) => Err(FlvError::UnsupportedCodec(c.api_name().to_owned())),
    }
}

/// The tag header for an audio frame of `track`; the frame data follows.
pub fn audio_frame_header(track: &Track) -> Result<([u8; 2], usize), FlvError> {
    let flags = sound_flags(track.codec, track.audio)?;
    Ok(match track.codec {
        Codec::Aac => ([flags, 1], 2),
        _ => ([flags, 0], 1),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A real x264 SPS (640x360, high profile) and PPS.
    pub(crate) fn sample_sps() -> Bytes {
        Bytes::from_static(&[
            0x67, 0x64, 0x00, 0x1e, 0xac, 0xd9, 0x40, 0xa0, 0x2f, 0xf9, 0x70, 0x11, 0x00, 0x00,
            0x03, 0x00, 0x01, 0x00, 0x00, 0x03, 0x00, 0x3c, 0x0f, 0x16, 0x2d, 0x96,
        ])
    }

    pub(crate) fn sample_pps() -> Bytes {
        Bytes::from_static(&[0x68, 0xeb, 0xe3, 0xcb, 0x22, 0xc0])
    }

    pub(crate) fn h264_track() -> Track {
        let config = CodecConfig::H264 {
            sps: vec![sample_sps()],
            pps: vec![sample_pps()],
        };
        Track {
            id: VIDEO_TRACK_ID,
            codec: Codec::H264,
            video: h264::video_params(&config),
            config,
            audio: None,
            bitrate: 0,
            label: Default::default(),
        }
    }

    pub(crate) fn aac_track() -> Track {
        let config = CodecConfig::Aac {
            asc: Bytes::from_static(&[0x12, 0x10]),
        };
        Track {
            id: AUDIO_TRACK_ID,
            codec: Codec::Aac,
            audio: aac::audio_params(&config),
            config,
            video: None,
            bitrate: 0,
            label: Default::default(),
        }
    }

    /// x265's VPS, SPS and PPS for 320x240 (Annex B).
    const HEVC_PARAMETER_SETS: [u8; 85] = [
        0x00, 0x00, 0x00, 0x01, 0x40, 0x01, 0x0c, 0x01, 0xff, 0xff, 0x01, 0x60, 0x00, 0x00, 0x03,
        0x00, 0x90, 0x00, 0x00, 0x03, 0x00, 0x00, 0x03, 0x00, 0x3c, 0x95, 0x98, 0x09, 0x00, 0x00,
        0x00, 0x01, 0x42, 0x01, 0x01, 0x01, 0x60, 0x00, 0x00, 0x03, 0x00, 0x90, 0x00, 0x00, 0x03,
        0x00, 0x00, 0x03, 0x00, 0x3c, 0xa0, 0x0a, 0x08, 0x0f, 0x16, 0x59, 0x59, 0xa4, 0x93, 0x2b,
        0xc0, 0x5a, 0x02, 0x00, 0x00, 0x03, 0x00, 0x02, 0x00, 0x00, 0x03, 0x00, 0x32, 0x10, 0x00,
        0x00, 0x00, 0x01, 0x44, 0x01, 0xc1, 0x72, 0xb4, 0x62, 0x40,
    ];

    pub(crate) fn h265_track() -> Track {
        let config = h265::config_from_annexb(&HEVC_PARAMETER_SETS).expect("x265 parameter sets");
        Track {
            id: VIDEO_TRACK_ID,
            codec: Codec::H265,
            video: h265::video_params(&config),
            config,
            audio: None,
            bitrate: 0,
            label: Default::default(),
        }
    }

    #[test]
    fn h265_enhanced_sequence_start_roundtrip() {
        let track = h265_track();
        let mut body = Vec::new();
        write_video_sequence_header(&track, &mut body).unwrap();
        assert_eq!(&body[..5], &[0x90, b'h', b'v', b'c', b'1']);
        let mut ingest = TagIngest::default();
        assert!(ingest.video(0, &Bytes::from(body)).unwrap().tracks_changed);
        let t = &ingest.tracks()[0];
        assert_eq!(t.codec, Codec::H265);
        assert_eq!(t.config, track.config);
        let v = t.video.unwrap();
        assert_eq!((v.width, v.height), (320, 240));
        let (h, n) = video_frame_header(Codec::H265, false, 80).unwrap();
        let mut b = h[..n].to_vec();
        b.extend_from_slice(&[0, 0, 0, 2, 0x02, 0x01]);
        let f = video_frame(&mut ingest, 40, &Bytes::from(b));
        assert_eq!((f.dts, f.pts, f.keyframe), (3600, 3600 + 7200, false));
        assert_eq!(&f.data[..], &[0, 0, 0, 2, 0x02, 0x01]);
    }

    #[test]
    fn h264_sequence_header_roundtrip() {
        let track = h264_track();
        let mut body = Vec::new();
        write_video_sequence_header(&track, &mut body).unwrap();
        let mut ingest = TagIngest::default();
        let o = ingest.video(0, &Bytes::from(body.clone())).unwrap();
        assert!(o.tracks_changed);
        let tracks = ingest.tracks();
        assert_eq!(tracks[0].config, track.config);
        let v = tracks[0].video.unwrap();
        assert_eq!((v.width, v.height), (640, 360));
        // The same header again changes nothing.
        assert!(!ingest.video(0, &Bytes::from(body)).unwrap().tracks_changed);
    }

    #[test]
    fn h264_frame_with_cts_and_short_lengths() {
        // Sequence header with lengthSizeMinusOne = 1 (2-byte lengths).
        let mut rec = h264::build_decoder_config(&[sample_sps()], &[sample_pps()]).unwrap();
        rec[4] = 0xFD;
        let mut body = vec![0x17, 0, 0, 0, 0];
        body.extend_from_slice(&rec);
        let mut ingest = TagIngest::default();
        ingest.video(0, &Bytes::from(body)).unwrap();
        let frame = Bytes::from_static(&[0x17, 1, 0, 0, 80, 0, 3, 0x65, 0xAA, 0xBB]);
        let f = video_frame(&mut ingest, 1000, &frame);
        assert_eq!(f.dts, 90_000);
        assert_eq!(f.pts, 90_000 + 80 * 90);
        assert!(f.keyframe);
        assert_eq!(&f.data[..], &[0, 0, 0, 3, 0x65, 0xAA, 0xBB]);
    }

    #[test]
    fn negative_cts_and_timestamp_wrap() {
        let mut ingest = TagIngest::default();
        let mut body = Vec::new();
        write_video_sequence_header(&h264_track(), &mut body).unwrap();
        ingest.video(0xFFFF_FF00, &Bytes::from(body)).unwrap();
        let frame = Bytes::from_static(&[0x27, 1, 0xFF, 0xFF, 0xF6, 0, 0, 0, 1, 0x41]);
        let a = video_frame(&mut ingest, 0xFFFF_FFF0, &frame);
        let b = video_frame(&mut ingest, 0x10, &frame);
        assert_eq!(b.dts - a.dts, 0x20 * 90);
        assert_eq!(a.pts - a.dts, -10 * 90);
        assert!(!a.keyframe);
    }

    #[test]
    fn enhanced_hevc_frames_parse() {
        let body = Bytes::from_static(&[0x91, b'h', b'v', b'c', b'1', 0, 0, 40, 0, 0, 0, 1, 0x26]);
        assert_eq!(
            one_video_tag(&body).unwrap(),
            VideoTag::Frame {
                codec: Codec::H265,
                keyframe: true,
                cts_ms: 40,
                data: Bytes::from_static(&[0, 0, 0, 1, 0x26])
            }
        );
        let body = Bytes::from_static(&[0xA3, b'h', b'v', b'c', b'1', 0, 0, 0, 1, 0x02]);
        assert!(matches!(
            one_video_tag(&body).unwrap(),
            VideoTag::Frame {
                cts_ms: 0,
                keyframe: false,
                ..
            }
        ));
        let body = Bytes::from_static(&[0x91, b'a', b'v', b'0', b'1']);
        assert!(matches!(
            one_video_tag(&body),
            Err(FlvError::UnsupportedCodec(_))
        ));
        let (h, n) = video_frame_header(Codec::H265, true, 40).unwrap();
        assert_eq!(&h[..n], &body_prefix()[..]);
    }

    /// The one track's tag of a body without multitrack.
    fn one_video_tag(body: &Bytes) -> Result<VideoTag, FlvError> {
        let mut got = None;
        parse_video_tag(body, &mut |track, tag| {
            assert_eq!(track, 0);
            got = Some(tag);
            Ok(())
        })?;
        got.expect("a tag")
    }

    fn video_frame(ingest: &mut TagIngest, ts: u32, body: &Bytes) -> Frame {
        ingest.video(ts, body).unwrap();
        let mut frames = ingest.frames();
        let f = frames.next().expect("a frame");
        assert!(frames.next().is_none());
        f
    }

    fn body_prefix() -> [u8; 8] {
        [0x91, b'h', b'v', b'c', b'1', 0, 0, 40]
    }

    #[test]
    fn aac_roundtrip() {
        let track = aac_track();
        let mut body = Vec::new();
        write_audio_sequence_header(&track, &mut body).unwrap();
        let mut ingest = TagIngest::default();
        assert!(ingest.audio(0, &Bytes::from(body)).unwrap().tracks_changed);
        let t = &ingest.tracks()[0];
        assert_eq!(t.audio.unwrap().sample_rate, 44100);
        assert_eq!(t.audio.unwrap().channels, 2);
        let (h, n) = audio_frame_header(&track).unwrap();
        let mut b = h[..n].to_vec();
        b.extend_from_slice(&[1, 2, 3]);
        ingest.audio(23, &Bytes::from(b)).unwrap();
        let f = ingest.frames().next().unwrap();
        assert_eq!(
            (f.pts, f.dts, &f.data[..]),
            (23 * 90, 23 * 90, &[1u8, 2, 3][..])
        );
    }

    #[test]
    fn video_before_sequence_header_dropped() {
        let mut ingest = TagIngest::default();
        let frame = Bytes::from_static(&[0x17, 1, 0, 0, 0, 0, 0, 0, 1, 0x65]);
        assert_eq!(ingest.video(0, &frame).unwrap(), TagOutcome::default());
    }

    #[test]
    fn mp3_creates_track() {
        let mut ingest = TagIngest::default();
        let o = ingest
            .audio(5, &Bytes::from_static(&[0x2F, 0xFF, 0xFB]))
            .unwrap();
        assert!(o.tracks_changed);
        assert_eq!(ingest.tracks()[0].codec, Codec::Mp3);
        assert_eq!(&ingest.frames().next().unwrap().data[..], &[0xFF, 0xFB]);
    }

    /// An AVC decoder configuration record for the sample SPS and PPS.
    fn avc_record() -> Vec<u8> {
        h264::build_decoder_config(&[sample_sps()], &[sample_pps()]).unwrap()
    }

    /// Enhanced RTMP v2 multitrack as FFmpeg 9's FLV muxer writes a second
    /// video and audio stream (OneTrack, track id 1; bytes read from its
    /// output), beside legacy tags for track 0.
    #[test]
    fn multitrack_tracks_become_tracks_of_their_own() {
        let mut ingest = TagIngest::default();
        let mut legacy = Vec::new();
        write_video_sequence_header(&h264_track(), &mut legacy).unwrap();
        assert!(
            ingest
                .video(0, &Bytes::from(legacy))
                .unwrap()
                .tracks_changed
        );
        let mut one = vec![0x96, 0x00, b'a', b'v', b'c', b'1', 1];
        one.extend_from_slice(&avc_record());
        assert!(ingest.video(0, &Bytes::from(one)).unwrap().tracks_changed);
        let mut asc = Vec::new();
        write_audio_sequence_header(&aac_track(), &mut asc).unwrap();
        ingest.audio(0, &Bytes::from(asc)).unwrap();
        let audio1 = [0x95, 0x00, b'm', b'p', b'4', b'a', 1, 0x11, 0x88];
        assert!(
            ingest
                .audio(0, &Bytes::copy_from_slice(&audio1))
                .unwrap()
                .tracks_changed
        );
        let ids: Vec<(TrackId, Codec)> = ingest.tracks().iter().map(|t| (t.id, t.codec)).collect();
        assert_eq!(
            ids,
            [
                (VIDEO_TRACK_ID, Codec::H264),
                (3, Codec::H264),
                (AUDIO_TRACK_ID, Codec::Aac),
                (4, Codec::Aac)
            ]
        );
        let rate = ingest.tracks()[3].audio.unwrap().sample_rate;
        assert_eq!(rate, 48000);
        // The multichannel configuration is nothing to relay.
        let mc = [0x95, 0x04, b'm', b'p', b'4', b'a', 1, 1, 1, 0, 0, 0, 4];
        assert_eq!(
            ingest.audio(5, &Bytes::copy_from_slice(&mc)).unwrap(),
            TagOutcome::default()
        );
        assert_eq!(ingest.frames().count(), 0);
        // CodedFrames (with composition time) and CodedFramesX.
        let f = video_frame(
            &mut ingest,
            34,
            &Bytes::from_static(&[
                0xA6, 0x01, b'a', b'v', b'c', b'1', 1, 0, 0, 33, 0, 0, 0, 1, 0x41,
            ]),
        );
        assert_eq!(
            (f.track, f.dts, f.pts, f.keyframe),
            (3, 34 * 90, 67 * 90, false)
        );
        let f = video_frame(
            &mut ingest,
            35,
            &Bytes::from_static(&[0x96, 0x03, b'a', b'v', b'c', b'1', 1, 0, 0, 0, 1, 0x65]),
        );
        assert_eq!((f.track, f.pts, f.keyframe), (3, 35 * 90, true));
        ingest
            .audio(
                46,
                &Bytes::from_static(&[0x95, 0x01, b'm', b'p', b'4', b'a', 1, 0xDC, 0x00]),
            )
            .unwrap();
        let f = ingest.frames().next().unwrap();
        assert_eq!(
            (f.track, f.dts, &f.data[..]),
            (4, 46 * 90, &[0xDC, 0x00][..])
        );
    }

    /// Enhanced Opus as FFmpeg 9's FLV muxer writes it (bytes from its
    /// output): track 0 plain, track 1 as OneTrack multitrack; each an
    /// Opus track at 48 kHz with its packets; a MultichannelConfig is
    /// nothing to relay; an OpusHead of 6 channels is refused (track 0:
    /// the publisher's error). And `.mp3` frames make an MP3 track.
    #[test]
    fn enhanced_opus_and_mp3_are_tracks() {
        let head = b"OpusHead\x01\x02\x38\x01\x80\xbb\x00\x00\x00\x00\x00";
        let mut ingest = TagIngest::default();
        let mut b = vec![0x90, b'O', b'p', b'u', b's'];
        b.extend_from_slice(head);
        assert!(ingest.audio(0, &Bytes::from(b)).unwrap().tracks_changed);
        let mut b = vec![0x95, 0x00, b'O', b'p', b'u', b's', 1];
        b.extend_from_slice(head);
        assert!(ingest.audio(0, &Bytes::from(b)).unwrap().tracks_changed);
        // The same header again changes nothing.
        let mut b = vec![0x90, b'O', b'p', b'u', b's'];
        b.extend_from_slice(head);
        assert!(!ingest.audio(0, &Bytes::from(b)).unwrap().tracks_changed);
        let mc = [0x94, b'O', b'p', b'u', b's', 1, 1, 0, 0, 0, 4];
        assert_eq!(
            ingest.audio(0, &Bytes::copy_from_slice(&mc)).unwrap(),
            TagOutcome::default()
        );
        let tracks = ingest.tracks();
        let got: Vec<(TrackId, Codec, Option<AudioParams>)> =
            tracks.iter().map(|t| (t.id, t.codec, t.audio)).collect();
        let stereo = Some(AudioParams {
            sample_rate: 48_000,
            channels: 2,
        });
        assert_eq!(
            got,
            [
                (AUDIO_TRACK_ID, Codec::Opus, stereo),
                (3, Codec::Opus, stereo)
            ]
        );
        ingest
            .audio(
                20,
                &Bytes::from_static(&[0x95, 0x01, b'O', b'p', b'u', b's', 1, 0xFC, 0xFF]),
            )
            .unwrap();
        let f = ingest.frames().next().unwrap();
        assert_eq!(
            (f.track, f.dts, &f.data[..]),
            (3, 20 * 90, &[0xFC, 0xFF][..])
        );
        let mut six = vec![0x90, b'O', b'p', b'u', b's'];
        six.extend_from_slice(b"OpusHead\x01\x06\x38\x01\x80\xbb\x00\x00\x00\x00\x01");
        assert!(matches!(
            ingest.audio(40, &Bytes::from(six)),
            Err(FlvError::UnsupportedCodec(_))
        ));
        // `.mp3` CodedFrames (an MPEG-1 layer III header: 44.1 kHz stereo).
        let mut ingest = TagIngest::default();
        let mut b = vec![0x91, b'.', b'm', b'p', b'3', 0xFF, 0xFB, 0x90, 0x00];
        b.extend_from_slice(&[0; 413]);
        assert!(ingest.audio(0, &Bytes::from(b)).unwrap().tracks_changed);
        let t = &ingest.tracks()[0];
        assert_eq!(
            (t.codec, t.audio.map(|a| (a.sample_rate, a.channels))),
            (Codec::Mp3, Some((44_100, 2)))
        );
        assert_eq!(ingest.frames().count(), 1);
    }

    #[test]
    fn many_tracks_in_one_tag_and_mod_ex_are_read() {
        let mut ingest = TagIngest::default();
        for track in [0u8, 1] {
            let mut b = vec![0x96, 0x00, b'a', b'v', b'c', b'1', track];
            b.extend_from_slice(&avc_record());
            ingest.video(0, &Bytes::from(b)).unwrap();
        }
        // ManyTracks (one FourCC), each part with its size.
        let part = [0u8, 0, 10, 0, 0, 0, 1, 0x65];
        let mut b = vec![0x96, 0x11, b'a', b'v', b'c', b'1'];
        for track in [1u8, 0] {
            b.push(track);
            b.extend_from_slice(&[0, 0, part.len() as u8]);
            b.extend_from_slice(&part);
        }
        ingest.video(100, &Bytes::from(b)).unwrap();
        let got: Vec<(TrackId, Ticks)> = ingest.frames().map(|f| (f.track, f.pts)).collect();
        assert_eq!(got, [(3, 110 * 90), (VIDEO_TRACK_ID, 110 * 90)]);
        // ManyTracksManyCodecs: a part in a codec kiln does not relay is
        // left out, the others go on.
        let mut b = vec![0x96, 0x21];
        for (fourcc, track) in [(b"av01", 1u8), (b"avc1", 0)] {
            b.extend_from_slice(fourcc);
            b.push(track);
            b.extend_from_slice(&[0, 0, part.len() as u8]);
            b.extend_from_slice(&part);
        }
        ingest.video(200, &Bytes::from(b)).unwrap();
        let got: Vec<TrackId> = ingest.frames().map(|f| f.track).collect();
        assert_eq!(got, [VIDEO_TRACK_ID]);
        // ModEx (a timestamp offset in nanoseconds, 3 bytes) before
        // CodedFrames of track 0.
        let b = [
            0x97, 2, 0, 0, 0, 0x01, b'a', b'v', b'c', b'1', 0, 0, 0, 0, 0, 0, 1, 0x65,
        ];
        let f = video_frame(&mut ingest, 300, &Bytes::copy_from_slice(&b));
        assert_eq!((f.track, f.keyframe), (VIDEO_TRACK_ID, true));
        // A part whose size overruns the tag is an error of the tag.
        let b = [0x96, 0x11, b'a', b'v', b'c', b'1', 0, 0, 1, 0, 0];
        assert_eq!(
            ingest.video(400, &Bytes::copy_from_slice(&b)),
            Err(FlvError::Truncated)
        );
        // An unsupported codec on track 0 is the publisher's error.
        let b = [0x91, b'a', b'v', b'0', b'1', 0, 0, 0];
        assert!(matches!(
            ingest.video(500, &Bytes::copy_from_slice(&b)),
            Err(FlvError::UnsupportedCodec(_))
        ));
    }

    #[test]
    fn a_publisher_gets_at_most_eight_tracks_of_a_kind() {
        let mut ingest = TagIngest::default();
        for track in 0..=20u8 {
            let mut b = vec![0x96, 0x00, b'a', b'v', b'c', b'1', track];
            b.extend_from_slice(&avc_record());
            ingest.video(0, &Bytes::from(b)).unwrap();
        }
        assert_eq!(ingest.tracks().len(), MAX_TRACKS_PER_KIND);
        let b = [
            0xA6, 0x01, b'a', b'v', b'c', b'1', 20, 0, 0, 0, 0, 0, 0, 1, 0x41,
        ];
        ingest.video(40, &Bytes::copy_from_slice(&b)).unwrap();
        assert_eq!(ingest.frames().count(), 0);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..256), ts: u32) {
            let b = Bytes::from(data);
            let mut ingest = TagIngest::default();
            let _ = ingest.video(ts, &b);
            let _ = ingest.audio(ts, &b);
            crate::rtmp::fuzz::fuzz_flv(&b);
        }
    }
}
