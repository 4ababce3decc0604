//! H.264 / AVC knowledge a relay needs: NAL unit types, the sequence
//! parameter set (dimensions, profile, level, frame rate), the
//! AVCDecoderConfigurationRecord (ISO/IEC 14496-15 5.3.3.1, "avcC") that
//! FLV and MP4 carry, and keyframe detection.
//!
//! It does not parse slices, PPS contents or SEI, and never decodes.
//! Framing (Annex B, length prefixes, emulation prevention) lives in `nal`.

use bytes::Bytes;

use super::bits::BitReader;
use super::nal;
use super::CodecError;
use crate::media::{CodecConfig, VideoParams};

pub const NAL_SLICE: u8 = 1;
pub const NAL_IDR: u8 = 5;
pub const NAL_SEI: u8 = 6;
pub const NAL_SPS: u8 = 7;
pub const NAL_PPS: u8 = 8;
pub const NAL_AUD: u8 = 9;

/// Largest picture side accepted, in pixels (H.264 level 6.2 allows 8192x4320;
/// this leaves room without letting garbage through).
const MAX_DIMENSION: u64 = 16384;

/// The nal_unit_type of a NAL unit (low 5 bits of its first byte).
pub fn nal_type(nal: &[u8]) -> Option<u8> {
    nal.first().map(|b| b & 0x1f)
}

/// What kiln reads from a sequence parameter set.
#[derive(Debug, Clone, PartialEq)]
pub struct SpsInfo {
    pub profile_idc: u8,
    /// constraint_set0..5 flags and the two reserved bits, as in the SPS byte.
    pub constraint_flags: u8,
    pub level_idc: u8,
    /// Display width after frame cropping.
    pub width: u32,
    /// Display height after frame cropping (whole frames, also interlaced).
    pub height: u32,
    /// time_scale / (2 * num_units_in_tick) from the VUI, when present.
    pub framerate: Option<f64>,
}

/// SPS fields beyond [`SpsInfo`] that the avcC high-profile extension needs.
#[derive(Debug, Clone, PartialEq)]
struct SpsDetails {
    info: SpsInfo,
    chroma_format_idc: u32,
    bit_depth_luma_minus8: u32,
    bit_depth_chroma_minus8: u32,
    slices: SliceSps,
}

/// What reading a slice header needs from its SPS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SliceSps {
    pub sps_id: u32,
    pub separate_colour_plane: bool,
    pub log2_max_frame_num: u32,
    pub poc_type: u32,
    pub log2_max_poc_lsb: u32,
    pub delta_pic_order_always_zero: bool,
    pub frame_mbs_only: bool,
    pub max_num_ref_frames: u32,
}

/// What a slice header's SPS fields are, from an SPS NAL unit (header byte
/// included, emulation prevention bytes in place).
pub fn parse_sps_for_slices(nal: &[u8]) -> Result<SliceSps, CodecError> {
    parse_sps_details(nal).map(|d| d.slices)
}

/// Profiles whose SPS carries chroma_format_idc, bit depths and scaling lists.
fn has_chroma_info(profile_idc: u8) -> bool {
    matches!(
        profile_idc,
        100 | 110 | 122 | 244 | 44 | 83 | 86 | 118 | 128 | 138 | 139 | 134 | 135
    )
}

fn skip_scaling_list(r: &mut BitReader<'_>, size: usize) -> Result<(), CodecError> {
    let mut last_scale: i32 = 8;
    let mut next_scale: i32 = 8;
    for _ in 0..size {
        if next_scale != 0 {
            let delta = r.read_se()?;
            if !(-128..=127).contains(&delta) {
                return Err(CodecError::Invalid("SPS scaling list delta out of range"));
            }
            next_scale = (last_scale + delta + 256) % 256;
        }
        if next_scale != 0 {
            last_scale = next_scale;
        }
    }
    Ok(())
}

/// Parses a sequence parameter set NAL unit (header byte included,
/// emulation prevention bytes still in place).
pub fn parse_sps(nal: &[u8]) -> Result<SpsInfo, CodecError> {
    parse_sps_details(nal).map(|d| d.info)
}

fn parse_sps_details(nal: &[u8]) -> Result<SpsDetails, CodecError> {
    match nal_type(nal) {
        None => return Err(CodecError::Truncated),
        Some(NAL_SPS) => {}
        Some(_) => return Err(CodecError::Invalid("not an SPS NAL unit")),
    }
    let rbsp = nal::rbsp(&nal[1..]);
    let mut r = BitReader::new(&rbsp);
    let profile_idc = r.read_u8()?;
    let constraint_flags = r.read_u8()?;
    let level_idc = r.read_u8()?;
    let sps_id = r.read_ue()?;
    if sps_id > 31 {
        return Err(CodecError::Invalid("SPS id above 31"));
    }
    let mut chroma_format_idc = 1;
    let mut separate_colour_plane = false;
    let mut bit_depth_luma_minus8 = 0;
    let mut bit_depth_chroma_minus8 = 0;
    if has_chroma_info(profile_idc) {
        chroma_format_idc = r.read_ue()?;
        if chroma_format_idc > 3 {
            return Err(CodecError::Invalid("SPS chroma_format_idc above 3"));
        }
        if chroma_format_idc == 3 {
            separate_colour_plane = r.read_bit()?;
        }
        bit_depth_luma_minus8 = r.read_ue()?;
        bit_depth_chroma_minus8 = r.read_ue()?;
        if bit_depth_luma_minus8 > 6 || bit_depth_chroma_minus8 > 6 {
            return Err(CodecError::Invalid("SPS bit depth above 14"));
        }
        let _qpprime_y_zero_transform_bypass = r.read_bit()?;
        if r.read_bit()? {
            let lists = if chroma_format_idc == 3 { 12 } else { 8 };
            for i in 0..lists {
                if r.read_bit()? {
                    skip_scaling_list(&mut r, if i < 6 { 16 } else { 64 })?;
                }
            }
        }
    }
    let log2_max_frame_num_minus4 = r.read_ue()?;
    if log2_max_frame_num_minus4 > 12 {
        return Err(CodecError::Invalid("SPS log2_max_frame_num out of range"));
    }
    let poc_type = r.read_ue()?;
    let mut log2_max_poc_lsb = 0;
    let mut delta_pic_order_always_zero = false;
    match poc_type {
        0 => {
            let minus4 = r.read_ue()?;
            if minus4 > 12 {
                return Err(CodecError::Invalid(
                    "SPS log2_max_pic_order_cnt out of range",
                ));
            }
            log2_max_poc_lsb = minus4 + 4;
        }
        1 => {
            delta_pic_order_always_zero = r.read_bit()?;
            let _offset_for_non_ref_pic = r.read_se()?;
            let _offset_for_top_to_bottom_field = r.read_se()?;
            let cycle = r.read_ue()?;
            if cycle > 255 {
                return Err(CodecError::Invalid("SPS POC cycle above 255"));
            }
            for _ in 0..cycle {
                r.read_se()?;
            }
        }
        2 => {}
        _ => return Err(CodecError::Invalid("SPS pic_order_cnt_type above 2")),
    }
    let max_num_ref_frames = r.read_ue()?;
    let _gaps_in_frame_num_allowed = r.read_bit()?;
    let width_mbs = u64::from(r.read_ue()?) + 1;
    let height_map_units = u64::from(r.read_ue()?) + 1;
    let frame_mbs_only = r.read_bit()?;
    if !frame_mbs_only {
        let _mb_adaptive_frame_field = r.read_bit()?;
    }
    let _direct_8x8_inference = r.read_bit()?;
    let (mut crop_left, mut crop_right, mut crop_top, mut crop_bottom) = (0u64, 0u64, 0u64, 0u64);
    if r.read_bit()? {
        crop_left = r.read_ue()?.into();
        crop_right = r.read_ue()?.into();
        crop_top = r.read_ue()?.into();
        crop_bottom = r.read_ue()?.into();
    }
    let framerate = if r.read_bit()? {
        parse_vui_framerate(&mut r)?
    } else {
        None
    };

    let field_factor: u64 = if frame_mbs_only { 1 } else { 2 };
    let chroma_array_type = if separate_colour_plane {
        0
    } else {
        chroma_format_idc
    };
    let (crop_unit_x, crop_unit_y) = match chroma_array_type {
        0 => (1, field_factor),
        1 => (2, 2 * field_factor),
        2 => (2, field_factor),
        _ => (1, field_factor),
    };
    let full_width = width_mbs * 16;
    let full_height = height_map_units * 16 * field_factor;
    if full_width > MAX_DIMENSION || full_height > MAX_DIMENSION {
        return Err(CodecError::Unsupported("picture larger than 16384 pixels"));
    }
    let width = (crop_left + crop_right)
        .checked_mul(crop_unit_x)
        .and_then(|c| full_width.checked_sub(c))
        .filter(|&w| w > 0)
        .ok_or(CodecError::Invalid(
            "SPS cropping exceeds the picture width",
        ))?;
    let height = (crop_top + crop_bottom)
        .checked_mul(crop_unit_y)
        .and_then(|c| full_height.checked_sub(c))
        .filter(|&h| h > 0)
        .ok_or(CodecError::Invalid(
            "SPS cropping exceeds the picture height",
        ))?;

    Ok(SpsDetails {
        info: SpsInfo {
            profile_idc,
            constraint_flags,
            level_idc,
            // Both are at most MAX_DIMENSION, so they fit.
            width: width as u32,
            height: height as u32,
            framerate,
        },
        chroma_format_idc,
        bit_depth_luma_minus8,
        bit_depth_chroma_minus8,
        slices: SliceSps {
            sps_id,
            separate_colour_plane,
            log2_max_frame_num: log2_max_frame_num_minus4 + 4,
            poc_type,
            log2_max_poc_lsb,
            delta_pic_order_always_zero,
            frame_mbs_only,
            max_num_ref_frames,
        },
    })
}

/// Reads the VUI up to timing_info and returns the frame rate it gives.
fn parse_vui_framerate(r: &mut BitReader<'_>) -> Result<Option<f64>, CodecError> {
    if r.read_bit()? {
        // aspect_ratio_info_present_flag
        if r.read_u8()? == 255 {
            r.skip_bits(32)?; // Extended_SAR: sar_width, sar_height
        }
    }
    if r.read_bit()? {
        r.skip_bits(1)?; // overscan_appropriate_flag
    }
    if r.read_bit()? {
        // video_signal_type_present_flag
        r.skip_bits(4)?; // video_format, video_full_range_flag
        if r.read_bit()? {
            r.skip_bits(24)?; // colour primaries, transfer, matrix
        }
    }
    if r.read_bit()? {
        r.read_ue()?; // chroma_sample_loc_type_top_field
        r.read_ue()?; // chroma_sample_loc_type_bottom_field
    }
    if !r.read_bit()? {
        return Ok(None);
    }
    let num_units_in_tick = r.read_bits(32)?;
    let time_scale = r.read_bits(32)?;
    if num_units_in_tick == 0 || time_scale == 0 {
        return Ok(None);
    }
    Ok(Some(
        f64::from(time_scale) / (2.0 * f64::from(num_units_in_tick)),
    ))
}

/// Reads a big-endian u16 length and that many bytes.
fn read_parameter_set<'a>(data: &mut &'a [u8]) -> Result<&'a [u8], CodecError> {
    let len_bytes = data.get(..2).ok_or(CodecError::Truncated)?;
    let len = usize::from(u16::from_be_bytes([len_bytes[0], len_bytes[1]]));
    let unit = data.get(2..2 + len).ok_or(CodecError::Truncated)?;
    *data = &data[2 + len..];
    Ok(unit)
}

/// Parses an AVCDecoderConfigurationRecord into the track config and the
/// NAL length size (1, 2 or 4; 3 is also accepted). The record may list no
/// SPS/PPS at all; the high-profile extension after the PPS is ignored.
pub fn parse_decoder_config(record: &[u8]) -> Result<(CodecConfig, u8), CodecError> {
    let header = record.get(..6).ok_or(CodecError::Truncated)?;
    if header[0] != 1 {
        return Err(CodecError::Unsupported("avcC configurationVersion not 1"));
    }
    let length_size = (header[4] & 0x03) + 1;
    let num_sps = usize::from(header[5] & 0x1f);
    let mut rest = &record[6..];
    let mut sps = Vec::with_capacity(num_sps);
    for _ in 0..num_sps {
        let unit = read_parameter_set(&mut rest)?;
        if !unit.is_empty() {
            sps.push(Bytes::copy_from_slice(unit));
        }
    }
    let num_pps = usize::from(*rest.first().ok_or(CodecError::Truncated)?);
    rest = &rest[1..];
    let mut pps = Vec::with_capacity(num_pps);
    for _ in 0..num_pps {
        let unit = read_parameter_set(&mut rest)?;
        if !unit.is_empty() {
            pps.push(Bytes::copy_from_slice(unit));
        }
    }
    Ok((CodecConfig::H264 { sps, pps }, length_size))
}

/// Builds an AVCDecoderConfigurationRecord with lengthSizeMinusOne = 3.
/// Profile, compatibility and level come from the first SPS; for high
/// profiles the chroma/bit-depth extension is appended (as ffmpeg does) when
/// the SPS parses.
pub fn build_decoder_config(sps: &[Bytes], pps: &[Bytes]) -> Result<Vec<u8>, CodecError> {
    let first = sps
        .first()
        .ok_or(CodecError::Invalid("avcC needs an SPS"))?;
    if first.len() < 4 {
        return Err(CodecError::Truncated);
    }
    if sps.len() > 31 || pps.len() > 255 {
        return Err(CodecError::Invalid("too many parameter sets for avcC"));
    }
    let total: usize = sps.iter().chain(pps).map(|u| u.len() + 2).sum();
    let mut out = Vec::with_capacity(11 + total);
    out.extend_from_slice(&[
        1,
        first[1],
        first[2],
        first[3],
        0xff,
        0xe0 | sps.len() as u8,
    ]);
    for unit in sps {
        push_parameter_set(unit, &mut out)?;
    }
    out.push(pps.len() as u8);
    for unit in pps {
        push_parameter_set(unit, &mut out)?;
    }
    if !matches!(first[1], 66 | 77 | 88) {
        if let Ok(d) = parse_sps_details(first) {
            out.extend_from_slice(&[
                0xfc | d.chroma_format_idc as u8,
                0xf8 | d.bit_depth_luma_minus8 as u8,
                0xf8 | d.bit_depth_chroma_minus8 as u8,
                0, // numOfSequenceParameterSetExt
            ]);
        }
    }
    Ok(out)
}

fn push_parameter_set(unit: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
    let len =
        u16::try_from(unit.len()).map_err(|_| CodecError::Invalid("parameter set too long"))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(unit);
    Ok(())
}

/// Width, height and frame rate (0.0 when unknown) from the first SPS of an
/// H.264 config.
pub fn video_params(config: &CodecConfig) -> Option<VideoParams> {
    let CodecConfig::H264 { sps, .. } = config else {
        return None;
    };
    let info = parse_sps(sps.first()?).ok()?;
    Some(VideoParams {
        width: info.width,
        height: info.height,
        framerate: info.framerate.unwrap_or(0.0),
    })
}

/// Collects the parameter sets of an Annex B access unit (e.g. an MPEG-TS
/// keyframe) into a config; `None` unless it has both an SPS and a PPS.
/// Repeated identical units are kept once.
pub fn config_from_annexb(data: &[u8]) -> Option<CodecConfig> {
    let (mut sps, mut pps) = (Vec::new(), Vec::new());
    for unit in nal::annexb_units(data) {
        let list: &mut Vec<Bytes> = match nal_type(unit) {
            Some(NAL_SPS) => &mut sps,
            Some(NAL_PPS) => &mut pps,
            _ => continue,
        };
        if !list.iter().any(|u| u.as_ref() == unit) {
            list.push(Bytes::copy_from_slice(unit));
        }
    }
    if sps.is_empty() || pps.is_empty() {
        return None;
    }
    Some(CodecConfig::H264 { sps, pps })
}

/// True when 4-byte-length-prefixed access unit data contains an IDR unit.
pub fn is_keyframe_length_prefixed(data: &[u8]) -> bool {
    nal::length_prefixed_units(data, 4)
        .map_while(Result::ok)
        .any(|u| nal_type(u) == Some(NAL_IDR))
}

/// True when Annex B access unit data contains an IDR unit.
pub fn is_keyframe_annexb(data: &[u8]) -> bool {
    nal::annexb_units(data).any(|u| nal_type(u) == Some(NAL_IDR))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    struct Sample {
        name: &'static str,
        sps: &'static str,
        profile: u8,
        width: u32,
        height: u32,
        fps: f64,
    }

    // SPS units from `ffmpeg -f lavfi -i testsrc2=size=WxH:rate=R -c:v libx264
    // [options] -f h264`, expected values from ffprobe.
    const SAMPLES: &[Sample] = &[
        Sample {
            name: "1280x720 high 30",
            sps: "6764001facd9405005bb0110000003001000000303c0f1831960",
            profile: 100,
            width: 1280,
            height: 720,
            fps: 30.0,
        },
        Sample {
            name: "1920x1080 main 25 (cropped)",
            sps: "674d4028eca03c0113f2e022000003000200000300641e30632c",
            profile: 77,
            width: 1920,
            height: 1080,
            fps: 25.0,
        },
        Sample {
            name: "854x480 high 29.97 (cropped)",
            sps: "6764001facd940d83de6f01100000303e90000ea600f183196",
            profile: 100,
            width: 854,
            height: 480,
            fps: 30000.0 / 1001.0,
        },
        Sample {
            name: "176x144 constrained baseline 15",
            sps: "6742c00ad902c4ec0440000003004000000783c48992",
            profile: 66,
            width: 176,
            height: 144,
            fps: 15.0,
        },
        Sample {
            name: "640x360 high 4:4:4 with jvt scaling lists, 60",
            sps: "67f4001f919b281405ff138088000003000800000303c078c18cb0",
            profile: 244,
            width: 640,
            height: 360,
            fps: 60.0,
        },
        Sample {
            name: "1920x1080 interlaced 29.97",
            sps: "67640028acd94078044fde022000007d20001d4c03e2c5b2c0",
            profile: 100,
            width: 1920,
            height: 1080,
            fps: 30000.0 / 1001.0,
        },
        Sample {
            name: "1918x1078 high 4:2:2 10-bit 50 (cropped)",
            sps: "677a002ab6cd940780227a8bc044000003000400000301903c60c658",
            profile: 122,
            width: 1918,
            height: 1078,
            fps: 50.0,
        },
    ];

    #[test]
    fn parses_ffmpeg_sps() {
        for s in SAMPLES {
            let info = parse_sps(&hex(s.sps)).unwrap_or_else(|e| panic!("{}: {e}", s.name));
            assert_eq!(info.profile_idc, s.profile, "{}", s.name);
            assert_eq!((info.width, info.height), (s.width, s.height), "{}", s.name);
            let fps = info.framerate.unwrap();
            assert!((fps - s.fps).abs() < 1e-9, "{}: {fps}", s.name);
        }
        let info = parse_sps(&hex(SAMPLES[0].sps)).unwrap();
        assert_eq!((info.constraint_flags, info.level_idc), (0, 31));
    }

    #[test]
    fn sps_errors() {
        let sps = hex(SAMPLES[0].sps);
        assert_eq!(parse_sps(&[]), Err(CodecError::Truncated));
        assert!(matches!(
            parse_sps(&[0x68, 1, 2]),
            Err(CodecError::Invalid(_))
        ));
        for len in 1..12 {
            assert!(parse_sps(&sps[..len]).is_err(), "len {len}");
        }
    }

    // `ffmpeg -i 176x144.264 -c copy a.mp4`, avcC from ffprobe -show_data.
    const AVCC_176X144: &str =
        "0142c00affe100166742c00ad902c4ec0440000003004000000783c4899201000568cb83cb20";

    #[test]
    fn parses_ffmpeg_avcc() {
        let (config, length_size) = parse_decoder_config(&hex(AVCC_176X144)).unwrap();
        assert_eq!(length_size, 4);
        let CodecConfig::H264 { sps, pps } = &config else {
            panic!("not H264");
        };
        assert_eq!(sps[0].as_ref(), &hex(SAMPLES[3].sps)[..]);
        assert_eq!(pps[0].as_ref(), &hex("68cb83cb20")[..]);
        let params = video_params(&config).unwrap();
        assert_eq!(
            (params.width, params.height, params.framerate),
            (176, 144, 15.0)
        );
        // Rebuilding gives ffmpeg's bytes back.
        assert_eq!(build_decoder_config(sps, pps).unwrap(), hex(AVCC_176X144));
        assert_eq!(video_params(&CodecConfig::None), None);
    }

    #[test]
    fn builds_high_profile_avcc() {
        let sps = Bytes::from(hex(SAMPLES[6].sps));
        let pps = Bytes::from(hex("68ebe3cb22c0"));
        let record =
            build_decoder_config(std::slice::from_ref(&sps), std::slice::from_ref(&pps)).unwrap();
        assert_eq!(&record[..6], &[1, 122, 0, 42, 0xff, 0xe1]);
        // 4:2:2, 10-bit luma and chroma.
        assert_eq!(&record[record.len() - 4..], &[0xfe, 0xfa, 0xfa, 0]);
        let (config, size) = parse_decoder_config(&record).unwrap();
        assert_eq!(size, 4);
        assert_eq!(
            config,
            CodecConfig::H264 {
                sps: vec![sps],
                pps: vec![pps]
            }
        );
        assert!(build_decoder_config(&[], &[]).is_err());
    }

    #[test]
    fn avcc_errors() {
        let record = hex(AVCC_176X144);
        for len in 0..record.len() {
            assert!(parse_decoder_config(&record[..len]).is_err(), "len {len}");
        }
        let mut bad = record.clone();
        bad[0] = 0;
        assert!(parse_decoder_config(&bad).is_err());
    }

    #[test]
    fn keyframes() {
        let mut data = Vec::new();
        nal::annexb_to_length_prefixed(&[0, 0, 0, 1, 0x09, 0xf0, 0, 0, 1, 0x65, 0x88], &mut data);
        assert!(is_keyframe_length_prefixed(&data));
        assert!(is_keyframe_annexb(&[0, 0, 1, 0x67, 1, 0, 0, 1, 0x65, 0x88]));
        assert!(!is_keyframe_length_prefixed(&[0, 0, 0, 2, 0x41, 0x9a]));
        assert!(!is_keyframe_length_prefixed(&[0, 0, 0, 9, 0x65]));
        assert_eq!(nal_type(&[0x67]), Some(NAL_SPS));
    }

    #[test]
    fn collects_config_from_annexb() {
        let mut au = Vec::new();
        for unit in ["09f0", SAMPLES[3].sps, "68cb83cb20", SAMPLES[3].sps, "6588"] {
            au.extend_from_slice(&[0, 0, 1]);
            au.extend_from_slice(&hex(unit));
        }
        let config = config_from_annexb(&au).unwrap();
        assert_eq!(config, parse_decoder_config(&hex(AVCC_176X144)).unwrap().0);
        assert_eq!(config_from_annexb(&au[..20]), None);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..128)) {
            crate::codec::fuzz::fuzz_h264(&data);
            let mut sps = data.clone();
            if let Some(b) = sps.first_mut() { *b = 0x67; }
            let _ = parse_sps(&sps);
            let _ = is_keyframe_annexb(&data);
            let _ = build_decoder_config(&[Bytes::from(sps)], &[Bytes::from(data)]);
        }

        #[test]
        fn corrupted_real_sps_never_panics(index in 0usize..7, pos in 0usize..28, byte in any::<u8>()) {
            let mut sps = hex(SAMPLES[index].sps);
            let pos = pos % sps.len();
            sps[pos] = byte;
            let _ = parse_sps(&sps);
        }
    }
}
