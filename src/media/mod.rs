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
    /// What players show for it: a name, a language, characteristics
    /// (OME's `AudioMap`; a language also from an MPEG-TS PMT or an MP4's
    /// `mdhd`).
    pub label: TrackLabel,
}

/// A track's label, as an HLS `EXT-X-MEDIA` tag carries it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TrackLabel {
    /// What a player's menu shows (HLS `NAME`).
    pub name: Option<String>,
    pub language: Option<Language>,
    /// HLS `CHARACTERISTICS` (Uniform Type Identifiers, comma separated).
    pub characteristics: Option<String>,
}

impl TrackLabel {
    /// The longest name or characteristics kept (text from the config
    /// file, a schedule or the API).
    pub const MAX_TEXT: usize = 64;

    /// A label from an `AudioMap` item's texts: each kept if it is fit
    /// for a playlist's quoted string (no quote, no control character,
    /// at most [`MAX_TEXT`](Self::MAX_TEXT) bytes), else why not.
    pub fn new(
        name: Option<&str>,
        language: Option<&str>,
        characteristics: Option<&str>,
    ) -> Result<TrackLabel, String> {
        let text = |what: &str, v: Option<&str>| -> Result<Option<String>, String> {
            match v.map(str::trim).filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(v) if v.len() > Self::MAX_TEXT => {
                    Err(format!("{what} is longer than {} bytes", Self::MAX_TEXT))
                }
                Some(v) if v.chars().any(|c| c == '"' || c.is_control()) => {
                    Err(format!("{what} holds a quote or a control character"))
                }
                Some(v) => Ok(Some(v.to_string())),
            }
        };
        let language = match language.map(str::trim).filter(|v| !v.is_empty()) {
            None => None,
            Some(l) => Some(Language::parse(l.as_bytes()).ok_or_else(|| {
                format!(
                    "language [{}] is not a language tag (RFC 5646: en, fra, pt-BR)",
                    l.escape_debug()
                )
            })?),
        };
        Ok(TrackLabel {
            name: text("name", name)?,
            language,
            characteristics: text("characteristics", characteristics)?,
        })
    }

    /// `other`'s fields where it has them, this one's elsewhere.
    pub fn overlaid(&self, other: &TrackLabel) -> TrackLabel {
        TrackLabel {
            name: other.name.clone().or_else(|| self.name.clone()),
            language: other.language.or(self.language),
            characteristics: other
                .characteristics
                .clone()
                .or_else(|| self.characteristics.clone()),
        }
    }
}

/// Labels the audio tracks of `tracks` in order with `map` (OME's
/// `AudioMap`: the first item the first audio track, and so on; a track
/// past the map keeps its own label, an item past the tracks is unused).
pub fn label_audio(tracks: &mut [Track], map: &[TrackLabel]) {
    let audio = tracks.iter_mut().filter(|t| t.kind() == MediaKind::Audio);
    for (t, l) in audio.zip(map) {
        t.label = t.label.overlaid(l);
    }
}

/// What a player or task that chose nothing takes of a stream with
/// several renditions: its first video track (the largest layer: a
/// simulcast publisher's are listed largest first, an encoder's in its
/// own order) and every audio and data track (languages; containers that
/// hold several tracks keep them all).
pub fn first_layer(tracks: &[Track]) -> Vec<Track> {
    let video = tracks
        .iter()
        .find(|t| t.kind() == MediaKind::Video)
        .map(|t| t.id);
    tracks
        .iter()
        .filter(|t| t.kind() != MediaKind::Video || Some(t.id) == video)
        .cloned()
        .collect()
}

/// A language tag (RFC 5646 as HLS wants it: `en`, `fra`, `pt-BR`,
/// `zh-Hant`): a primary subtag of 2 or 3 letters, then subtags of 1 to 8
/// letters or digits after `-`, 15 bytes at most. ISO 639-2 codes (an
/// MPEG-TS descriptor's, an MP4's) are such tags.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Language {
    bytes: [u8; Language::MAX],
    len: u8,
}

impl Language {
    const MAX: usize = 15;

    /// The tag, if `code` is one; its primary subtag lowercased.
    pub fn parse(code: &[u8]) -> Option<Language> {
        if code.is_empty() || code.len() > Self::MAX {
            return None;
        }
        let mut parts = code.split(|&b| b == b'-');
        let primary = parts.next()?;
        if !(2..=3).contains(&primary.len()) || !primary.iter().all(u8::is_ascii_alphabetic) {
            return None;
        }
        for p in parts {
            if !(1..=8).contains(&p.len()) || !p.iter().all(u8::is_ascii_alphanumeric) {
                return None;
            }
        }
        let mut bytes = [0u8; Self::MAX];
        bytes[..code.len()].copy_from_slice(code);
        bytes[..primary.len()].make_ascii_lowercase();
        Some(Language {
            bytes,
            len: code.len() as u8,
        })
    }

    pub fn as_str(&self) -> &str {
        // ASCII letters, digits and '-' (see `parse`).
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("und")
    }
}

impl std::fmt::Debug for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Language({})", self.as_str())
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

    #[test]
    fn language_tags() {
        let tag = |s: &str| Language::parse(s.as_bytes()).map(|l| l.as_str().to_string());
        assert_eq!(tag("en").as_deref(), Some("en"));
        assert_eq!(tag("FRA").as_deref(), Some("fra"));
        assert_eq!(tag("pt-BR").as_deref(), Some("pt-BR"));
        assert_eq!(tag("zh-Hant-TW").as_deref(), Some("zh-Hant-TW"));
        for bad in [
            "",
            "e",
            "engl",
            "en-",
            "en--US",
            "e1",
            "en-US\"",
            "en-verylongsub",
            "zh-Hant-TW-x-abc",
        ] {
            assert_eq!(tag(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_audio_map_labels_audio_tracks_in_order() {
        let track = |id, codec| Track {
            id,
            codec,
            config: CodecConfig::None,
            video: None,
            audio: None,
            bitrate: 0,
            label: TrackLabel::default(),
        };
        let mut tracks = vec![
            track(1, Codec::H264),
            track(2, Codec::Aac),
            track(3, Codec::Aac),
        ];
        tracks[2].label.language = Language::parse(b"fra");
        let map = [
            TrackLabel::new(
                Some("English"),
                Some("en"),
                Some("public.accessibility.describes-video"),
            )
            .unwrap(),
            TrackLabel::new(Some("Second"), None, None).unwrap(),
            TrackLabel::new(Some("Unused"), None, None).unwrap(),
        ];
        label_audio(&mut tracks, &map);
        assert_eq!(tracks[0].label, TrackLabel::default());
        assert_eq!(tracks[1].label, map[0]);
        // The source's language stays where the map names none.
        assert_eq!(tracks[2].label.name.as_deref(), Some("Second"));
        assert_eq!(
            tracks[2]
                .label
                .language
                .map(|l| l.as_str().to_string())
                .as_deref(),
            Some("fra")
        );
        assert!(TrackLabel::new(Some("a\"b"), None, None).is_err());
        assert!(TrackLabel::new(None, Some("english"), None).is_err());
        assert!(TrackLabel::new(Some(&"x".repeat(65)), None, None).is_err());
    }
}
