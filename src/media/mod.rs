//! Media as kiln moves it: tracks (what a stream carries) and frames (one
//! access unit of one track). Every protocol core speaks these types: ingest
//! cores produce them, push muxers consume them.
//!
//! This module is plain data. It knows nothing about sockets, streams,
//! applications or the registry.
//!
//! Canonical payload forms, chosen so fan-out never re-parses a frame:
//! - H.264 / H.265 video: NAL units each prefixed by a 4-byte big-endian
//!   length ("AVCC" form with lengthSizeMinusOne = 3), no access unit
//!   delimiters. Parameter sets live in the track's [`CodecConfig`]; a frame
//!   may also carry them in-band.
//! - AAC: raw access units (no ADTS header); the AudioSpecificConfig is in
//!   the track's [`CodecConfig::Aac`].
//! - MP3: whole MPEG audio frames, header included.
//! - Opus: raw Opus packets (no TS control header).
//!
//! Time is counted in 90 kHz ticks ([`Ticks`]), the MPEG-TS clock; RTMP's
//! milliseconds convert exactly (x 90).

use bytes::Bytes;

/// A timestamp or duration on the 90 kHz clock.
pub type Ticks = i64;

/// Ticks per second.
pub const TICKS_PER_SECOND: Ticks = 90_000;

/// Ticks per millisecond.
pub const TICKS_PER_MS: Ticks = 90;

/// A track identifier, stable for the life of a stream.
pub type TrackId = u32;

/// What kind of media a track carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MediaKind {
    Video,
    Audio,
    Data,
}

/// The codecs kiln relays (it never transcodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Codec {
    H264,
    H265,
    Aac,
    Mp3,
    Opus,
    /// From WebRTC publishers that offer nothing else; only WebRTC viewers
    /// get it (no other output of kiln carries VP8). Frames are VP8 frames
    /// as RFC 6386 writes them.
    Vp8,
}

impl Codec {
    pub fn kind(self) -> MediaKind {
        match self {
            Codec::H264 | Codec::H265 | Codec::Vp8 => MediaKind::Video,
            Codec::Aac | Codec::Mp3 | Codec::Opus => MediaKind::Audio,
        }
    }

    /// The name the management API shows (OME's spelling).
    pub fn api_name(self) -> &'static str {
        match self {
            Codec::H264 => "H264",
            Codec::H265 => "H265",
            Codec::Aac => "AAC",
            Codec::Mp3 => "MP3",
            Codec::Opus => "OPUS",
            Codec::Vp8 => "VP8",
        }
    }
}

/// Codec configuration: what a decoder needs before the first frame.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum CodecConfig {
    /// Not known yet (e.g. MPEG-TS joined before the first keyframe).
    #[default]
    None,
    /// H.264 parameter sets, each a bare NAL unit (no length, no start code).
    H264 { sps: Vec<Bytes>, pps: Vec<Bytes> },
    /// H.265 parameter sets, each a bare NAL unit.
    H265 {
        vps: Vec<Bytes>,
        sps: Vec<Bytes>,
        pps: Vec<Bytes>,
    },
    /// AAC AudioSpecificConfig (ISO/IEC 14496-3), usually 2 bytes.
    Aac { asc: Bytes },
}

/// Video properties, as far as they are known.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct VideoParams {
    pub width: u32,
    pub height: u32,
    /// Frames per second; 0.0 when unknown.
    pub framerate: f64,
}

/// Audio properties, as far as they are known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AudioParams {
    pub sample_rate: u32,
    pub channels: u8,
}

/// One elementary stream of a live stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Track {
    pub id: TrackId,
    pub codec: Codec,
    pub config: CodecConfig,
    /// Set for video tracks.
    pub video: Option<VideoParams>,
    /// Set for audio tracks.
    pub audio: Option<AudioParams>,
    /// Average bit rate in bits per second, 0 when unknown.
    pub bitrate: u32,
    /// Its language as the source named it (ISO 639-2, three lowercase
    /// letters: an MPEG-TS PMT's language descriptor), if it did.
    pub language: Option<Language>,
}

/// An ISO 639-2 language code: three ASCII lowercase letters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Language([u8; 3]);

impl Language {
    /// The code, if `code` is three ASCII letters (lowercased); anything
    /// else is no language (it goes into playlists as it is).
    pub fn parse(code: &[u8]) -> Option<Language> {
        let [a, b, c] = <[u8; 3]>::try_from(code).ok()?;
        let l = [a, b, c].map(|x| x.to_ascii_lowercase());
        l.iter().all(u8::is_ascii_lowercase).then_some(Language(l))
    }

    pub fn as_str(&self) -> &str {
        // Three ASCII letters (see `parse`).
        std::str::from_utf8(&self.0).unwrap_or("und")
    }
}

impl Track {
    pub fn kind(&self) -> MediaKind {
        self.codec.kind()
    }
}

/// One access unit of one track.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub track: TrackId,
    /// Presentation time, 90 kHz.
    pub pts: Ticks,
    /// Decode time, 90 kHz (equal to `pts` for audio).
    pub dts: Ticks,
    /// A random access point (IDR / IRAP for video; every audio frame).
    pub keyframe: bool,
    /// The payload in the canonical form described at the top of this file.
    /// Shared, never copied per subscriber.
    pub data: Bytes,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_kinds() {
        assert_eq!(Codec::H264.kind(), MediaKind::Video);
        assert_eq!(Codec::H265.kind(), MediaKind::Video);
        assert_eq!(Codec::Aac.kind(), MediaKind::Audio);
        assert_eq!(Codec::Opus.api_name(), "OPUS");
    }
}
