//! MPEG audio frame headers (MPEG-1/2/2.5, layers I to III; ISO/IEC 11172-3
//! and 13818-3), enough to find frame boundaries and report sample rate,
//! channels and bit rate for "MP3" tracks.
//!
//! It does not decode audio or read Xing/Info/ID3 tags (an Info frame is a
//! valid frame and parses as one). Free-format streams (bitrate index 0)
//! are unsupported: their frame length is not in the header.

use super::CodecError;

/// A parsed 4-byte MPEG audio frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mp3Header {
    /// 1 (MPEG-1), 2 (MPEG-2) or 25 (MPEG-2.5).
    pub version: u8,
    /// 1, 2 or 3.
    pub layer: u8,
    /// In bits per second.
    pub bitrate: u32,
    /// In Hz.
    pub sample_rate: u32,
    /// 1 or 2.
    pub channels: u8,
    /// Whole frame, header included.
    pub frame_len: usize,
    pub samples_per_frame: u32,
}

/// Bit rates in kbit/s by bitrate index 1..=14.
const BITRATES_V1_L1: [u16; 14] = [
    32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448,
];
const BITRATES_V1_L2: [u16; 14] = [
    32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384,
];
const BITRATES_V1_L3: [u16; 14] = [
    32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320,
];
const BITRATES_V2_L1: [u16; 14] = [
    32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256,
];
const BITRATES_V2_L23: [u16; 14] = [8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];

/// Parses the MPEG audio frame header at the start of `data` (needs 4
/// bytes). Checks the sync word and rejects reserved values.
pub fn parse_header(data: &[u8]) -> Result<Mp3Header, CodecError> {
    let h = data.get(..4).ok_or(CodecError::Truncated)?;
    if h[0] != 0xff || h[1] & 0xe0 != 0xe0 {
        return Err(CodecError::Invalid("MPEG audio sync word"));
    }
    let version = match (h[1] >> 3) & 0x03 {
        0 => 25,
        2 => 2,
        3 => 1,
        _ => return Err(CodecError::Invalid("reserved MPEG audio version")),
    };
    let layer = match (h[1] >> 1) & 0x03 {
        1 => 3,
        2 => 2,
        3 => 1,
        _ => return Err(CodecError::Invalid("reserved MPEG audio layer")),
    };
    let bitrate_index = usize::from(h[2] >> 4);
    let table = match (version, layer) {
        (1, 1) => &BITRATES_V1_L1,
        (1, 2) => &BITRATES_V1_L2,
        (1, _) => &BITRATES_V1_L3,
        (_, 1) => &BITRATES_V2_L1,
        _ => &BITRATES_V2_L23,
    };
    let kbps = match bitrate_index {
        0 => return Err(CodecError::Unsupported("free-format MPEG audio")),
        15 => return Err(CodecError::Invalid("bad MPEG audio bitrate index")),
        i => table[i - 1],
    };
    let bitrate = u32::from(kbps) * 1000;
    let base_rate = match (h[2] >> 2) & 0x03 {
        0 => 44100,
        1 => 48000,
        2 => 32000,
        _ => return Err(CodecError::Invalid("reserved MPEG audio sample rate")),
    };
    let sample_rate = match version {
        1 => base_rate,
        2 => base_rate / 2,
        _ => base_rate / 4,
    };
    let padding = u32::from((h[2] >> 1) & 0x01);
    let channels = if h[3] >> 6 == 3 { 1 } else { 2 };
    let samples_per_frame: u32 = match (version, layer) {
        (_, 1) => 384,
        (1, _) | (_, 2) => 1152,
        _ => 576,
    };
    // Layer I counts in 4-byte slots.
    let frame_len = if layer == 1 {
        (12 * bitrate / sample_rate + padding) * 4
    } else {
        samples_per_frame / 8 * bitrate / sample_rate + padding
    };
    Ok(Mp3Header {
        version,
        layer,
        bitrate,
        sample_rate,
        channels,
        frame_len: frame_len as usize,
        samples_per_frame,
    })
}

/// Iterator over back-to-back MPEG audio frames. See [`frames`].
#[derive(Debug, Clone)]
pub struct Mp3Frames<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Iterator for Mp3Frames<'a> {
    type Item = Result<(Mp3Header, &'a [u8]), CodecError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let result = parse_header(self.rest).and_then(|h| {
            let frame = self.rest.get(..h.frame_len).ok_or(CodecError::Truncated)?;
            self.rest = &self.rest[h.frame_len..];
            Ok((h, frame))
        });
        if result.is_err() {
            self.failed = true;
        }
        Some(result)
    }
}

/// Iterates over whole frames (header included) laid end to end, e.g. one
/// MPEG-TS PES payload. The first bad or truncated frame yields an error and
/// ends the iteration.
pub fn frames(data: &[u8]) -> Mp3Frames<'_> {
    Mp3Frames {
        rest: data,
        failed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header(version: u8, layer: u8, bitrate: u32, rate: u32, ch: u8, len: usize) -> Mp3Header {
        let samples_per_frame = match (version, layer) {
            (_, 1) => 384,
            (1, _) | (_, 2) => 1152,
            _ => 576,
        };
        Mp3Header {
            version,
            layer,
            bitrate,
            sample_rate: rate,
            channels: ch,
            frame_len: len,
            samples_per_frame,
        }
    }

    // Headers from ffmpeg (libmp3lame, mp2) output; ffprobe agrees on rate,
    // channels and bit rate, and the next header sits frame_len bytes later.
    #[test]
    fn parses_ffmpeg_headers() {
        // 44.1 kHz stereo 128k: Info frame, then joint stereo frames.
        assert_eq!(
            parse_header(&[0xff, 0xfb, 0x90, 0x00]).unwrap(),
            header(1, 3, 128_000, 44100, 2, 417)
        );
        assert_eq!(
            parse_header(&[0xff, 0xfb, 0x92, 0x64]).unwrap().frame_len,
            418
        );
        // MPEG-2 22.05 kHz mono 32k (Info frame says 56k).
        assert_eq!(
            parse_header(&[0xff, 0xf3, 0x70, 0xc0]).unwrap(),
            header(2, 3, 56_000, 22050, 1, 182)
        );
        assert_eq!(
            parse_header(&[0xff, 0xf3, 0x40, 0xc4]).unwrap(),
            header(2, 3, 32_000, 22050, 1, 104)
        );
        // MPEG-2.5 8 kHz mono 16k.
        assert_eq!(
            parse_header(&[0xff, 0xe3, 0x28, 0xc4]).unwrap(),
            header(25, 3, 16_000, 8000, 1, 144)
        );
        assert_eq!(
            parse_header(&[0xff, 0xe3, 0x38, 0xc0]).unwrap().frame_len,
            216
        );
        // MP2 32 kHz stereo 128k.
        assert_eq!(
            parse_header(&[0xff, 0xfd, 0x88, 0x04]).unwrap(),
            header(1, 2, 128_000, 32000, 2, 576)
        );
        // Layer I, 48 kHz 384k with padding: (12*384000/48000 + 1) * 4.
        assert_eq!(
            parse_header(&[0xff, 0xff, 0xc6, 0x00]).unwrap(),
            header(1, 1, 384_000, 48000, 2, 388)
        );
    }

    #[test]
    fn rejects_bad_headers() {
        assert_eq!(
            parse_header(&[0xff, 0xfb, 0x90]),
            Err(CodecError::Truncated)
        );
        assert!(matches!(
            parse_header(&[0xff, 0x1b, 0x90, 0]),
            Err(CodecError::Invalid(_))
        ));
        assert!(parse_header(&[0xff, 0xeb, 0x90, 0]).is_err()); // version 01
        assert!(parse_header(&[0xff, 0xf9, 0x90, 0]).is_err()); // layer 00
        assert!(parse_header(&[0xff, 0xfb, 0xf0, 0]).is_err()); // bitrate 15
        assert!(parse_header(&[0xff, 0xfb, 0x9c, 0]).is_err()); // rate 11
        assert!(matches!(
            parse_header(&[0xff, 0xfb, 0x00, 0]),
            Err(CodecError::Unsupported(_))
        ));
    }

    #[test]
    fn iterates_frames() {
        let mut data = vec![0u8; 576 * 2];
        data[..4].copy_from_slice(&[0xff, 0xfd, 0x88, 0x04]);
        data[576..580].copy_from_slice(&[0xff, 0xfd, 0x88, 0x04]);
        let lens: Vec<usize> = frames(&data).map(|f| f.unwrap().1.len()).collect();
        assert_eq!(lens, vec![576, 576]);
        assert_eq!(
            frames(&data[..1000]).last().unwrap(),
            Err(CodecError::Truncated)
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..16)) {
            crate::codec::fuzz::fuzz_mp3(&data);
            for _ in frames(&data) {}
        }

        #[test]
        fn valid_headers_have_sane_lengths(b1 in 0u8..=0x1f, b2 in any::<u8>(), b3 in any::<u8>()) {
            if let Ok(h) = parse_header(&[0xff, 0xe0 | b1, b2, b3]) {
                prop_assert!(h.frame_len >= 4 && h.frame_len <= 2881);
            }
        }
    }
}
