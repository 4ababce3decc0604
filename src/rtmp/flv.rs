//! FLV audio and video tag BODIES, the payloads of RTMP message types 8 and
//! 9, to and from kiln's media types.
//!
//! Video: legacy FLV AVC (codec id 7) and the de-facto HEVC id 12; enhanced
//! RTMP (ExHeader) with FourCC `avc1` / `hvc1`: SequenceStart, CodedFrames
//! (with composition time), CodedFramesX, SequenceEnd. Audio: AAC (sequence
//! header = AudioSpecificConfig, raw frames) and MP3. [`TagIngest`] turns a
//! publisher's tags into [`Track`]s and [`Frame`]s (NAL lengths normalised to
//! 4 bytes, times in 90 kHz ticks = RTMP ms x 90); the `write_*` functions
//! go the other way for the push client.
//!
//! Not here: FLV file headers and tag headers (RTMP has none), enhanced
//! RTMP multitrack / ModEx / audio FourCCs (ignored), other legacy codecs
//! (rejected with [`FlvError::UnsupportedCodec`]).

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

/// A parsed video tag body.
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
    /// Command frames, metadata, multitrack: nothing to relay.
    Ignored,
}

/// A parsed audio tag body.
#[derive(Clone, Debug, PartialEq)]
pub enum AudioTag {
    /// AAC AudioSpecificConfig.
    SequenceHeader {
        config: CodecConfig,
    },
    Frame {
        codec: Codec,
        data: Bytes,
        /// From the tag's flags (rate and channels are coarse in FLV).
        params: AudioParams,
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

/// Parses a video tag body (RTMP message type 9).
pub fn parse_video_tag(body: &Bytes) -> Result<VideoTag, FlvError> {
    let b0 = *body.first().ok_or(FlvError::Truncated)?;
    if b0 & 0x80 != 0 {
        // Enhanced RTMP ExHeader.
        let frame_type = (b0 >> 4) & 0x07;
        let packet_type = b0 & 0x0F;
        if frame_type == 5 || packet_type > EX_CODED_FRAMES_X {
            return Ok(VideoTag::Ignored);
        }
        let fourcc = body.get(1..5).ok_or(FlvError::Truncated)?;
        let codec = codec_for_fourcc(fourcc)?;
        return Ok(match packet_type {
            EX_SEQUENCE_START => {
                let (config, length_size) = parse_config(codec, &body[5..])?;
                VideoTag::SequenceHeader {
                    codec,
                    config,
                    length_size,
                }
            }
            EX_SEQUENCE_END => VideoTag::EndOfSequence,
            EX_CODED_FRAMES => {
                let c = body.get(5..8).ok_or(FlvError::Truncated)?;
                VideoTag::Frame {
                    codec,
                    keyframe: frame_type == 1,
                    cts_ms: si24(c),
                    data: body.slice(8..),
                }
            }
            _ => VideoTag::Frame {
                codec,
                keyframe: frame_type == 1,
                cts_ms: 0,
                data: body.slice(5..),
            },
        });
    }
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

/// Parses an audio tag body (RTMP message type 8).
pub fn parse_audio_tag(body: &Bytes) -> Result<AudioTag, FlvError> {
    let b0 = *body.first().ok_or(FlvError::Truncated)?;
    match b0 >> 4 {
        SOUND_AAC => {
            let t = *body.get(1).ok_or(FlvError::Truncated)?;
            match t {
                0 => {
                    let asc = body.slice(2..);
                    aac::parse_asc(&asc)?;
                    Ok(AudioTag::SequenceHeader {
                        config: CodecConfig::Aac { asc },
                    })
                }
                1 => Ok(AudioTag::Frame {
                    codec: Codec::Aac,
                    data: body.slice(2..),
                    params: flv_sound_params(b0),
                }),
                _ => Ok(AudioTag::Ignored),
            }
        }
        SOUND_MP3 => Ok(AudioTag::Frame {
            codec: Codec::Mp3,
            data: body.slice(1..),
            params: flv_sound_params(b0),
        }),
        9 => Ok(AudioTag::Ignored), // enhanced audio: not relayed (yet)
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

/// What one tag did to the ingest state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TagOutcome {
    /// A track was created or its configuration changed.
    pub tracks_changed: bool,
    pub frame: Option<Frame>,
}

/// Turns a publisher's audio and video tags into tracks and frames. Video
/// is track [`VIDEO_TRACK_ID`], audio [`AUDIO_TRACK_ID`]. Video frames
/// before the first sequence header are dropped (nothing could decode
/// them). RTMP's 32-bit millisecond timestamps are unwrapped to 64 bits.
#[derive(Debug, Default)]
pub struct TagIngest {
    video: Option<Track>,
    audio: Option<Track>,
    length_size: u8,
    hints: MetadataHints,
    last_ms: Option<(u32, i64)>,
}

impl TagIngest {
    /// The current tracks, video first.
    pub fn tracks(&self) -> Vec<Track> {
        self.video
            .iter()
            .chain(self.audio.iter())
            .cloned()
            .collect()
    }

    /// Takes onMetaData hints (used for tracks created afterwards and to
    /// fill gaps in existing ones).
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

    fn video_params(&self, codec: Codec, config: &CodecConfig) -> Option<VideoParams> {
        let from_sps = match codec {
            Codec::H265 => h265::video_params(config),
            _ => h264::video_params(config),
        };
        let h = &self.hints;
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
        let mut out = TagOutcome::default();
        match parse_video_tag(body)? {
            VideoTag::SequenceHeader {
                codec,
                config,
                length_size,
            } => {
                self.length_size = length_size;
                let same = self
                    .video
                    .as_ref()
                    .is_some_and(|t| t.codec == codec && t.config == config);
                if !same {
                    let video = self.video_params(codec, &config);
                    self.video = Some(Track {
                        id: VIDEO_TRACK_ID,
                        codec,
                        config,
                        video,
                        audio: None,
                        bitrate: self.hints.video_bitrate,
                    });
                    out.tracks_changed = true;
                }
            }
            VideoTag::Frame {
                codec,
                keyframe,
                cts_ms,
                data,
            } => {
                let Some(track) = &self.video else {
                    return Ok(out);
                };
                if track.codec != codec || data.is_empty() {
                    return Ok(out);
                }
                let data = nal::normalize_length_size_bytes(data, self.length_size)?;
                if data.is_empty() {
                    return Ok(out);
                }
                let dts: Ticks = self.unwrap_ms(timestamp_ms) * TICKS_PER_MS;
                out.frame = Some(Frame {
                    track: VIDEO_TRACK_ID,
                    pts: dts + Ticks::from(cts_ms) * TICKS_PER_MS,
                    dts,
                    keyframe,
                    data,
                });
            }
            VideoTag::EndOfSequence | VideoTag::Ignored => {}
        }
        Ok(out)
    }

    /// Handles one audio tag body received at `timestamp_ms`.
    pub fn audio(&mut self, timestamp_ms: u32, body: &Bytes) -> Result<TagOutcome, FlvError> {
        let mut out = TagOutcome::default();
        match parse_audio_tag(body)? {
            AudioTag::SequenceHeader { config } => {
                let same = self
                    .audio
                    .as_ref()
                    .is_some_and(|t| t.codec == Codec::Aac && t.config == config);
                if !same {
                    let audio = aac::audio_params(&config);
                    self.audio = Some(Track {
                        id: AUDIO_TRACK_ID,
                        codec: Codec::Aac,
                        config,
                        video: None,
                        audio,
                        bitrate: self.hints.audio_bitrate,
                    });
                    out.tracks_changed = true;
                }
            }
            AudioTag::Frame {
                codec,
                data,
                params,
            } => {
                match &self.audio {
                    Some(t) if t.codec == codec => {}
                    Some(_) | None if codec == Codec::Mp3 => {
                        self.audio = Some(Track {
                            id: AUDIO_TRACK_ID,
                            codec,
                            config: CodecConfig::None,
                            video: None,
                            audio: Some(params),
                            bitrate: self.hints.audio_bitrate,
                        });
                        out.tracks_changed = true;
                    }
                    _ => return Ok(out),
                }
                if data.is_empty() {
                    return Ok(out);
                }
                let t = self.unwrap_ms(timestamp_ms) * TICKS_PER_MS;
                out.frame = Some(Frame {
                    track: AUDIO_TRACK_ID,
                    pts: t,
                    dts: t,
                    keyframe: true,
                    data,
                });
            }
            AudioTag::Ignored => {}
        }
        Ok(out)
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
        let f = ingest.video(40, &Bytes::from(b)).unwrap().frame.unwrap();
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
        let o = ingest.video(1000, &frame).unwrap();
        let f = o.frame.unwrap();
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
        let a = ingest.video(0xFFFF_FFF0, &frame).unwrap().frame.unwrap();
        let b = ingest.video(0x10, &frame).unwrap().frame.unwrap();
        assert_eq!(b.dts - a.dts, 0x20 * 90);
        assert_eq!(a.pts - a.dts, -10 * 90);
        assert!(!a.keyframe);
    }

    #[test]
    fn enhanced_hevc_frames_parse() {
        let body = Bytes::from_static(&[0x91, b'h', b'v', b'c', b'1', 0, 0, 40, 0, 0, 0, 1, 0x26]);
        assert_eq!(
            parse_video_tag(&body).unwrap(),
            VideoTag::Frame {
                codec: Codec::H265,
                keyframe: true,
                cts_ms: 40,
                data: Bytes::from_static(&[0, 0, 0, 1, 0x26])
            }
        );
        let body = Bytes::from_static(&[0xA3, b'h', b'v', b'c', b'1', 0, 0, 0, 1, 0x02]);
        assert!(matches!(
            parse_video_tag(&body).unwrap(),
            VideoTag::Frame {
                cts_ms: 0,
                keyframe: false,
                ..
            }
        ));
        let body = Bytes::from_static(&[0x91, b'a', b'v', b'0', b'1']);
        assert!(matches!(
            parse_video_tag(&body),
            Err(FlvError::UnsupportedCodec(_))
        ));
        let (h, n) = video_frame_header(Codec::H265, true, 40).unwrap();
        assert_eq!(&h[..n], &body_prefix()[..]);
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
        let f = ingest.audio(23, &Bytes::from(b)).unwrap().frame.unwrap();
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
        assert_eq!(&o.frame.unwrap().data[..], &[0xFF, 0xFB]);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..256), ts: u32) {
            let b = Bytes::from(data);
            let mut ingest = TagIngest::default();
            let _ = ingest.video(ts, &b);
            let _ = ingest.audio(ts, &b);
        }
    }
}
