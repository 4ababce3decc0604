//! AAC configuration and framing: the AudioSpecificConfig (ISO/IEC 14496-3
//! 1.6.2.1) and ADTS headers (ISO/IEC 13818-7 6.2), so the cores can move
//! between raw access units (kiln's canonical form, FLV) and ADTS (MPEG-TS).
//!
//! This does not decode audio, and parses only what a relay needs: object
//! type, sample rate and channels (plus the SBR/PS extension where it changes
//! the output sample rate). Program config elements are not parsed.

use bytes::Bytes;

use super::bits::BitReader;
use super::CodecError;
use crate::media::{AudioParams, CodecConfig};

/// Sample rates by samplingFrequencyIndex (0..=12).
pub const SAMPLE_RATES: [u32; 13] = [
    96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350,
];

/// Audio object types kiln cares about.
pub const OBJECT_TYPE_AAC_LC: u8 = 2;
pub const OBJECT_TYPE_SBR: u8 = 5;
pub const OBJECT_TYPE_PS: u8 = 29;

/// Largest ADTS frame (13-bit frame_length), header included.
pub const MAX_ADTS_FRAME_LEN: usize = 8191;

/// The sample rate for a samplingFrequencyIndex, if it names one.
pub fn sample_rate_from_index(index: u8) -> Option<u32> {
    SAMPLE_RATES.get(usize::from(index)).copied()
}

/// The samplingFrequencyIndex for an exact sample rate, if there is one.
pub fn index_from_sample_rate(rate: u32) -> Option<u8> {
    SAMPLE_RATES
        .iter()
        .position(|&r| r == rate)
        .and_then(|i| u8::try_from(i).ok())
}

/// Channel count for a channelConfiguration (0 = defined in-band by a
/// program config element).
fn channels_from_config(config: u8) -> Result<u8, CodecError> {
    match config {
        0..=6 => Ok(config),
        7 => Ok(8),
        11 => Ok(7),
        12 | 14 => Ok(8),
        13 => Ok(24),
        _ => Err(CodecError::Invalid("reserved AAC channel configuration")),
    }
}

/// channelConfiguration for a channel count, if one exists.
fn config_from_channels(channels: u8) -> Option<u8> {
    match channels {
        0..=6 => Some(channels),
        7 => Some(11),
        8 => Some(7),
        24 => Some(13),
        _ => None,
    }
}

/// The parts of an AudioSpecificConfig a relay needs.
///
/// For explicitly signalled HE-AAC (object type 5 or 29 first in the
/// config), `object_type`, `sample_rate` and `sample_rate_index` describe the
/// underlying core (e.g. AAC-LC at half rate), which is what ADTS headers
/// carry. [`audio_params`] reports the output rate instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AudioSpecificConfig {
    pub object_type: u8,
    /// In Hz.
    pub sample_rate: u32,
    /// 0..=12, or 15 when the config gave an explicit rate with no index.
    pub sample_rate_index: u8,
    /// Channel count; 0 when a program config element defines the layout.
    pub channels: u8,
}

/// What [`parse_asc_full`] finds besides the core config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AscExtension {
    /// SBR output sample rate, when SBR is signalled present.
    pub sbr_sample_rate: Option<u32>,
    /// Parametric stereo signalled (mono core decodes to stereo).
    pub ps: bool,
}

fn read_object_type(r: &mut BitReader<'_>) -> Result<u8, CodecError> {
    let t = r.read_bits(5)? as u8;
    if t == 31 {
        Ok(32 + r.read_bits(6)? as u8)
    } else {
        Ok(t)
    }
}

/// Reads samplingFrequencyIndex (and the explicit 24-bit rate after 0xF).
/// An explicit rate that matches a table entry is given that entry's index.
fn read_sample_rate(r: &mut BitReader<'_>) -> Result<(u8, u32), CodecError> {
    let index = r.read_bits(4)? as u8;
    if index == 0x0f {
        let rate = r.read_bits(24)?;
        if rate == 0 {
            return Err(CodecError::Invalid("AAC sample rate 0"));
        }
        Ok((index_from_sample_rate(rate).unwrap_or(0x0f), rate))
    } else {
        let rate = sample_rate_from_index(index)
            .ok_or(CodecError::Invalid("reserved AAC sampling frequency index"))?;
        Ok((index, rate))
    }
}

/// Parses an AudioSpecificConfig. Channel configuration 0 gives `channels`
/// 0. Escape object types (31) and explicit frequencies (index 0xF) are
/// handled.
pub fn parse_asc(data: &[u8]) -> Result<AudioSpecificConfig, CodecError> {
    parse_asc_full(data).map(|(asc, _)| asc)
}

/// Like [`parse_asc`], also reporting SBR/PS signalling (explicit, or the
/// backward-compatible 0x2B7 sync extension).
pub fn parse_asc_full(data: &[u8]) -> Result<(AudioSpecificConfig, AscExtension), CodecError> {
    let mut r = BitReader::new(data);
    let mut object_type = read_object_type(&mut r)?;
    if object_type == 0 {
        return Err(CodecError::Invalid("AAC object type 0"));
    }
    let (mut sample_rate_index, sample_rate) = read_sample_rate(&mut r)?;
    let channel_config = r.read_bits(4)? as u8;
    let mut channels = channels_from_config(channel_config)?;
    let mut ext = AscExtension {
        sbr_sample_rate: None,
        ps: false,
    };
    if object_type == OBJECT_TYPE_SBR || object_type == OBJECT_TYPE_PS {
        ext.ps = object_type == OBJECT_TYPE_PS;
        let (_, sbr_rate) = read_sample_rate(&mut r)?;
        ext.sbr_sample_rate = Some(sbr_rate);
        object_type = read_object_type(&mut r)?;
        if object_type == 22 {
            // ER BSAC: extensionChannelConfiguration.
            channels = channels_from_config(r.read_bits(4)? as u8)?;
        }
        if object_type == 0 {
            return Err(CodecError::Invalid("AAC core object type 0"));
        }
    } else {
        // Backward-compatible extension signalling after GASpecificConfig;
        // only for the common GA object types whose config we can skip.
        if matches!(object_type, 1..=4 | 6 | 7) && channel_config != 0 {
            let _ = parse_sync_extension(&mut r, &mut ext);
        }
    }
    if sample_rate_index == 0x0f {
        if let Some(i) = index_from_sample_rate(sample_rate) {
            sample_rate_index = i;
        }
    }
    Ok((
        AudioSpecificConfig {
            object_type,
            sample_rate,
            sample_rate_index,
            channels,
        },
        ext,
    ))
}

/// Skips GASpecificConfig (no PCE) and reads a 0x2B7 sync extension.
fn parse_sync_extension(r: &mut BitReader<'_>, ext: &mut AscExtension) -> Result<(), CodecError> {
    let _frame_length_flag = r.read_bit()?;
    if r.read_bit()? {
        r.skip_bits(14)?; // coreCoderDelay
    }
    let _extension_flag = r.read_bit()?;
    if r.bits_left() < 16 || r.read_bits(11)? != 0x2b7 {
        return Ok(());
    }
    if read_object_type(r)? == OBJECT_TYPE_SBR && r.read_bit()? {
        let (_, rate) = read_sample_rate(r)?;
        ext.sbr_sample_rate = Some(rate);
        if r.bits_left() >= 12 && r.read_bits(11)? == 0x548 {
            ext.ps = r.read_bit()?;
        }
    }
    Ok(())
}

/// Builds a 2-byte (or 3 with an escaped object type) AudioSpecificConfig
/// with a plain GASpecificConfig. `channels` is a channel count as in
/// [`AudioSpecificConfig::channels`] (8 is written as configuration 7);
/// counts without a configuration are written as 0 (program config element).
pub fn build_asc(object_type: u8, sample_rate_index: u8, channels: u8) -> Bytes {
    let channel_config = u32::from(config_from_channels(channels).unwrap_or(0));
    let index = u32::from(sample_rate_index & 0x0f);
    let (value, bits): (u32, u32) = if object_type >= 31 {
        let escaped = u32::from(object_type.saturating_sub(32).min(63));
        ((31 << 6) | escaped, 11)
    } else {
        (u32::from(object_type), 5)
    };
    // object type, index, channel config, then frameLengthFlag,
    // dependsOnCoreCoder and extensionFlag all 0.
    let total = bits + 4 + 4 + 3;
    let word = ((((value << 4) | index) << 4) | channel_config) << 3;
    let padded = word << (32 - total);
    let len = total.div_ceil(8) as usize;
    Bytes::copy_from_slice(&padded.to_be_bytes()[..len])
}

/// A parsed ADTS header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdtsHeader {
    pub object_type: u8,
    pub sample_rate_index: u8,
    pub sample_rate: u32,
    pub channels: u8,
    /// 7, or 9 with a CRC.
    pub header_len: usize,
    /// Header plus payload.
    pub frame_len: usize,
}

impl AdtsHeader {
    /// The AudioSpecificConfig this header implies.
    pub fn asc(&self) -> AudioSpecificConfig {
        AudioSpecificConfig {
            object_type: self.object_type,
            sample_rate: self.sample_rate,
            sample_rate_index: self.sample_rate_index,
            channels: self.channels,
        }
    }

    /// Length of the raw access unit that follows the header.
    pub fn payload_len(&self) -> usize {
        self.frame_len - self.header_len
    }
}

/// Parses the ADTS header at the start of `data` (needs 7 bytes). Checks
/// the syncword and layer; the CRC, when present, is not verified.
/// Frames with more than one raw data block are unsupported.
pub fn parse_adts(data: &[u8]) -> Result<AdtsHeader, CodecError> {
    let h = data.get(..7).ok_or(CodecError::Truncated)?;
    if h[0] != 0xff || h[1] & 0xf0 != 0xf0 {
        return Err(CodecError::Invalid("ADTS syncword"));
    }
    if h[1] & 0x06 != 0 {
        return Err(CodecError::Invalid("ADTS layer not 0"));
    }
    let protection_absent = h[1] & 0x01 == 1;
    let object_type = (h[2] >> 6) + 1;
    let sample_rate_index = (h[2] >> 2) & 0x0f;
    let sample_rate = sample_rate_from_index(sample_rate_index).ok_or(CodecError::Invalid(
        "reserved ADTS sampling frequency index",
    ))?;
    let channel_config = ((h[2] & 0x01) << 2) | (h[3] >> 6);
    let channels = channels_from_config(channel_config)?;
    let frame_len =
        (usize::from(h[3] & 0x03) << 11) | (usize::from(h[4]) << 3) | usize::from(h[5] >> 5);
    let raw_blocks = h[6] & 0x03;
    let header_len = if protection_absent { 7 } else { 9 };
    if frame_len < header_len {
        return Err(CodecError::Invalid("ADTS frame length shorter than header"));
    }
    if raw_blocks != 0 {
        return Err(CodecError::Unsupported(
            "ADTS frame with several raw data blocks",
        ));
    }
    Ok(AdtsHeader {
        object_type,
        sample_rate_index,
        sample_rate,
        channels,
        header_len,
        frame_len,
    })
}

/// Iterator over the ADTS frames of a buffer. See [`adts_frames`].
#[derive(Debug, Clone)]
pub struct AdtsFrames<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Iterator for AdtsFrames<'a> {
    type Item = Result<(AdtsHeader, &'a [u8]), CodecError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let result = parse_adts(self.rest).and_then(|h| {
            let frame = self.rest.get(..h.frame_len).ok_or(CodecError::Truncated)?;
            let payload = frame.get(h.header_len..).ok_or(CodecError::Truncated)?;
            self.rest = &self.rest[h.frame_len..];
            Ok((h, payload))
        });
        if result.is_err() {
            self.failed = true;
        }
        Some(result)
    }
}

/// Iterates over back-to-back ADTS frames (e.g. one MPEG-TS PES payload),
/// yielding each header and its raw access unit. The first malformed or
/// truncated frame yields an error and ends the iteration.
pub fn adts_frames(data: &[u8]) -> AdtsFrames<'_> {
    AdtsFrames {
        rest: data,
        failed: false,
    }
}

/// Appends a 7-byte ADTS header (no CRC) for a raw access unit of
/// `payload_len` bytes. Fails if the frame would exceed 8191 bytes or the
/// config cannot be expressed in ADTS (object type above 4, explicit sample
/// rate without an index, channel count without a configuration).
pub fn write_adts(
    asc: &AudioSpecificConfig,
    payload_len: usize,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let frame_len = payload_len
        .checked_add(7)
        .filter(|&l| l <= MAX_ADTS_FRAME_LEN)
        .ok_or(CodecError::Invalid("ADTS frame too long"))?;
    if !(1..=4).contains(&asc.object_type) {
        return Err(CodecError::Unsupported(
            "AAC object type not expressible in ADTS",
        ));
    }
    let index = if asc.sample_rate_index <= 12 {
        asc.sample_rate_index
    } else {
        index_from_sample_rate(asc.sample_rate).ok_or(CodecError::Unsupported(
            "AAC sample rate not expressible in ADTS",
        ))?
    };
    let channel_config = config_from_channels(asc.channels)
        .filter(|&c| c <= 7)
        .ok_or(CodecError::Unsupported(
            "AAC channel layout not expressible in ADTS",
        ))?;
    let profile = asc.object_type - 1;
    let frame_len = frame_len as u32;
    out.extend_from_slice(&[
        0xff,
        0xf1, // MPEG-4, layer 0, protection absent
        (profile << 6) | (index << 2) | (channel_config >> 2),
        ((channel_config & 0x03) << 6) | ((frame_len >> 11) & 0x03) as u8,
        ((frame_len >> 3) & 0xff) as u8,
        (((frame_len & 0x07) << 5) as u8) | 0x1f, // buffer fullness 0x7FF (VBR)
        0xfc,                                     // fullness low bits, 1 raw block
    ]);
    Ok(())
}

/// Sample rate and channels of an AAC track, from its AudioSpecificConfig.
/// With SBR signalled in the config this is the output (doubled) rate; with
/// parametric stereo, 2 channels. Implicit (unsignalled) SBR, as from ADTS,
/// reports the core rate.
pub fn audio_params(config: &CodecConfig) -> Option<AudioParams> {
    let CodecConfig::Aac { asc } = config else {
        return None;
    };
    let (asc, ext) = parse_asc_full(asc).ok()?;
    let channels = if ext.ps && asc.channels == 1 {
        2
    } else {
        asc.channels
    };
    Some(AudioParams {
        sample_rate: ext.sbr_sample_rate.unwrap_or(asc.sample_rate),
        channels,
    })
}

/// PCM samples per channel in one access unit, at the core sample rate.
pub fn samples_per_frame(_asc: &AudioSpecificConfig) -> u32 {
    1024
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // ffmpeg -f lavfi -i sine=sample_rate=48000 -ac 2 -c:a aac -f adts: first
    // header. ffprobe: aac LC, 48000 Hz, stereo.
    const ADTS_STEREO_48K: [u8; 7] = [0xff, 0xf1, 0x4c, 0x80, 0x24, 0xff, 0xfc];
    // Same at 44100 Hz mono.
    const ADTS_MONO_44K: [u8; 7] = [0xff, 0xf1, 0x50, 0x40, 0x21, 0x3f, 0xfc];
    // ffmpeg ... -c:a aac -f mp4, extradata (48000 Hz stereo, with the
    // 0x2B7 sync extension saying "SBR absent").
    const ASC_FFMPEG_MP4: [u8; 5] = [0x11, 0x90, 0x56, 0xe5, 0x00];

    #[test]
    fn parses_ffmpeg_adts() {
        let h = parse_adts(&ADTS_STEREO_48K).unwrap();
        assert_eq!(
            h,
            AdtsHeader {
                object_type: 2,
                sample_rate_index: 3,
                sample_rate: 48000,
                channels: 2,
                header_len: 7,
                frame_len: 0x127,
            }
        );
        let h = parse_adts(&ADTS_MONO_44K).unwrap();
        assert_eq!((h.sample_rate, h.channels, h.frame_len), (44100, 1, 0x109));
        assert_eq!(h.payload_len(), 0x109 - 7);
    }

    #[test]
    fn adts_write_round_trips_ffmpeg_header() {
        let h = parse_adts(&ADTS_STEREO_48K).unwrap();
        let mut out = vec![];
        write_adts(&h.asc(), h.payload_len(), &mut out).unwrap();
        assert_eq!(out, ADTS_STEREO_48K);
        let h = parse_adts(&ADTS_MONO_44K).unwrap();
        out.clear();
        write_adts(&h.asc(), h.payload_len(), &mut out).unwrap();
        assert_eq!(out, ADTS_MONO_44K);
    }

    #[test]
    fn adts_errors() {
        assert_eq!(
            parse_adts(&ADTS_STEREO_48K[..6]),
            Err(CodecError::Truncated)
        );
        let mut bad = ADTS_STEREO_48K;
        bad[1] = 0xe1;
        assert!(matches!(parse_adts(&bad), Err(CodecError::Invalid(_))));
        let mut crc = ADTS_STEREO_48K;
        crc[1] = 0xf0;
        assert_eq!(parse_adts(&crc).unwrap().header_len, 9);
        let mut short = ADTS_STEREO_48K;
        short[3] = 0x80;
        short[4] = 0;
        short[5] = 0xdf; // frame_len 6
        assert!(parse_adts(&short).is_err());
        let asc = parse_asc(&[0x12, 0x10]).unwrap();
        let mut out = vec![];
        assert!(write_adts(&asc, 8184, &mut out).is_ok());
        assert_eq!(parse_adts(&out).unwrap().frame_len, 8191);
        out.clear();
        assert_eq!(
            write_adts(&asc, 8185, &mut out),
            Err(CodecError::Invalid("ADTS frame too long"))
        );
        assert!(out.is_empty());
    }

    #[test]
    fn iterates_adts_frames() {
        let asc = parse_asc(&[0x11, 0x90]).unwrap();
        let mut data = vec![];
        write_adts(&asc, 3, &mut data).unwrap();
        data.extend_from_slice(&[1, 2, 3]);
        write_adts(&asc, 1, &mut data).unwrap();
        data.push(9);
        let frames: Vec<_> = adts_frames(&data).map(|f| f.unwrap().1).collect();
        assert_eq!(frames, vec![&[1, 2, 3][..], &[9][..]]);
        data.pop();
        let last = adts_frames(&data).last().unwrap();
        assert_eq!(last, Err(CodecError::Truncated));
    }

    #[test]
    fn parses_ffmpeg_asc_with_sync_extension() {
        let (asc, ext) = parse_asc_full(&ASC_FFMPEG_MP4).unwrap();
        assert_eq!(
            asc,
            AudioSpecificConfig {
                object_type: 2,
                sample_rate: 48000,
                sample_rate_index: 3,
                channels: 2
            }
        );
        assert_eq!(ext.sbr_sample_rate, None);
        let params = audio_params(&CodecConfig::Aac {
            asc: Bytes::from_static(&ASC_FFMPEG_MP4),
        });
        assert_eq!(
            params,
            Some(AudioParams {
                sample_rate: 48000,
                channels: 2
            })
        );
        assert_eq!(audio_params(&CodecConfig::None), None);
    }

    #[test]
    fn parses_he_aac_and_escapes() {
        // Explicit HE-AACv2: object 29, 24 kHz core, mono, SBR 48 kHz, core LC.
        // 11101 0110 0001 0011 00010 000 -> eb 09 88 00 (padded)
        let (asc, ext) = parse_asc_full(&[0xeb, 0x09, 0x88, 0x00]).unwrap();
        assert_eq!(asc.object_type, 2);
        assert_eq!(asc.sample_rate, 24000);
        assert_eq!(asc.channels, 1);
        assert_eq!(ext.sbr_sample_rate, Some(48000));
        assert!(ext.ps);
        // Escaped object type 31+6 bits (42 = USAC: 31, 10), index 0xF with
        // explicit 44100, channel config 2.
        let mut bits: u64 = 31;
        bits = (bits << 6) | 10;
        bits = (bits << 4) | 0xf;
        bits = (bits << 24) | 44100;
        bits = (bits << 4) | 2;
        let total = 5 + 6 + 4 + 24 + 4;
        let bytes = (bits << (64 - total)).to_be_bytes();
        let asc = parse_asc(&bytes[..6]).unwrap();
        assert_eq!(asc.object_type, 42);
        assert_eq!(asc.sample_rate, 44100);
        assert_eq!(asc.sample_rate_index, 4);
        assert_eq!(asc.channels, 2);
        // Explicit rate with no index.
        bits = 2;
        bits = (bits << 4) | 0xf;
        bits = (bits << 24) | 37800;
        bits = (bits << 4) | 1;
        let total = 5 + 4 + 24 + 4;
        let bytes = (bits << (64 - total)).to_be_bytes();
        let asc = parse_asc(&bytes[..5]).unwrap();
        assert_eq!((asc.sample_rate, asc.sample_rate_index), (37800, 15));
        assert!(write_adts(&asc, 10, &mut vec![]).is_err());
    }

    #[test]
    fn channel_config_zero_and_errors() {
        let asc = parse_asc(&[0x11, 0x80]).unwrap();
        assert_eq!(asc.channels, 0);
        assert_eq!(parse_asc(&[0x11]), Err(CodecError::Truncated));
        assert!(parse_asc(&[0x07, 0x00]).is_err()); // object type 0
        assert!(parse_asc(&[0x16, 0x90]).is_err()); // index 13
    }

    #[test]
    fn builds_asc() {
        assert_eq!(&build_asc(2, 3, 2)[..], &[0x11, 0x90]);
        assert_eq!(&build_asc(2, 4, 1)[..], &[0x12, 0x08]);
        let eight = build_asc(2, 3, 8);
        assert_eq!(parse_asc(&eight).unwrap().channels, 8);
        let esc = build_asc(42, 3, 2);
        assert_eq!(esc.len(), 3);
        assert_eq!(parse_asc(&esc).unwrap().object_type, 42);
        for ch in [0, 1, 2, 6, 7, 8] {
            let asc = parse_asc(&build_asc(2, 11, ch)).unwrap();
            assert_eq!((asc.channels, asc.sample_rate), (ch, 8000));
        }
        assert_eq!(samples_per_frame(&parse_asc(&[0x11, 0x90]).unwrap()), 1024);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..32)) {
            crate::codec::fuzz::fuzz_aac(&data);
            for _ in adts_frames(&data) {}
            let _ = audio_params(&CodecConfig::Aac { asc: Bytes::from(data) });
        }

        #[test]
        fn asc_round_trip(object_type in 1u8..=4, index in 0u8..=12, ch in 0u8..=8) {
            let asc = parse_asc(&build_asc(object_type, index, ch)).unwrap();
            prop_assert_eq!(asc.object_type, object_type);
            prop_assert_eq!(asc.sample_rate_index, index);
            prop_assert_eq!(asc.channels, ch);
        }

        #[test]
        fn adts_round_trip(object_type in 1u8..=4, index in 0u8..=12, ch in prop::sample::select(vec![0u8, 1, 2, 3, 4, 5, 6, 8]), len in 0usize..=8184) {
            let asc = parse_asc(&build_asc(object_type, index, ch)).unwrap();
            let mut out = Vec::new();
            write_adts(&asc, len, &mut out).unwrap();
            let h = parse_adts(&out).unwrap();
            prop_assert_eq!(h.asc(), asc);
            prop_assert_eq!(h.frame_len, len + 7);
        }
    }
}
