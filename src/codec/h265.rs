//! H.265 / HEVC knowledge a relay needs: NAL unit types, the sequence
//! parameter set (profile, level, dimensions, VUI frame rate), the
//! HEVCDecoderConfigurationRecord (ISO/IEC 14496-15 8.3.3.1, "hvcC") that
//! enhanced FLV and MP4 carry, and keyframe (IRAP) detection.
//!
//! It does not parse VPS/PPS contents or slices, and never decodes.
//! Framing (Annex B, length prefixes, emulation prevention) lives in `nal`.

use bytes::Bytes;

use super::bits::BitReader;
use super::nal;
use super::CodecError;
use crate::media::{CodecConfig, VideoParams};

pub const NAL_IDR_W_RADL: u8 = 19;
pub const NAL_IDR_N_LP: u8 = 20;
pub const NAL_CRA: u8 = 21;
pub const NAL_VPS: u8 = 32;
pub const NAL_SPS: u8 = 33;
pub const NAL_PPS: u8 = 34;
pub const NAL_AUD: u8 = 35;
pub const NAL_SEI_PREFIX: u8 = 39;
pub const NAL_SEI_SUFFIX: u8 = 40;

/// Largest picture side accepted, in pixels.
const MAX_DIMENSION: u32 = 16888;

/// The nal_unit_type of a NAL unit (bits 1..7 of its first byte).
pub fn nal_type(nal: &[u8]) -> Option<u8> {
    nal.first().map(|b| (b >> 1) & 0x3f)
}

/// Intra random access point types (BLA, IDR, CRA and reserved IRAP):
/// decoding can start here.
pub fn is_irap(nal_type: u8) -> bool {
    (16..=23).contains(&nal_type)
}

/// What kiln reads from a sequence parameter set.
#[derive(Debug, Clone, PartialEq)]
pub struct SpsInfo {
    pub general_profile_idc: u8,
    pub general_level_idc: u8,
    /// Width after the conformance window.
    pub width: u32,
    /// Height after the conformance window.
    pub height: u32,
    /// time_scale / num_units_in_tick from the VUI, when present.
    pub framerate: Option<f64>,
}

/// SPS fields beyond [`SpsInfo`] that hvcC needs.
#[derive(Debug, Clone, PartialEq)]
struct SpsDetails {
    info: SpsInfo,
    /// general_profile_space .. general_level_idc, 12 bytes as in the SPS.
    general_ptl: [u8; 12],
    max_sub_layers_minus1: u8,
    temporal_id_nesting: bool,
    chroma_format_idc: u32,
    bit_depth_luma_minus8: u32,
    bit_depth_chroma_minus8: u32,
}

/// Parses a sequence parameter set NAL unit (2-byte header included,
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
    let rbsp = nal::rbsp(nal.get(2..).ok_or(CodecError::Truncated)?);
    let mut r = BitReader::new(&rbsp);
    r.skip_bits(4)?; // sps_video_parameter_set_id
    let max_sub_layers_minus1 = r.read_bits(3)? as u8;
    if max_sub_layers_minus1 > 6 {
        return Err(CodecError::Invalid("SPS max_sub_layers above 7"));
    }
    let temporal_id_nesting = r.read_bit()?;
    // profile_tier_level(1, max_sub_layers_minus1)
    let mut general_ptl = [0u8; 12];
    for b in general_ptl.iter_mut() {
        *b = r.read_u8()?;
    }
    let mut sub_profile_present = [false; 7];
    let mut sub_level_present = [false; 7];
    for i in 0..usize::from(max_sub_layers_minus1) {
        sub_profile_present[i] = r.read_bit()?;
        sub_level_present[i] = r.read_bit()?;
    }
    if max_sub_layers_minus1 > 0 {
        r.skip_bits(2 * (8 - usize::from(max_sub_layers_minus1)))?;
    }
    for i in 0..usize::from(max_sub_layers_minus1) {
        if sub_profile_present[i] {
            r.skip_bits(88)?;
        }
        if sub_level_present[i] {
            r.skip_bits(8)?;
        }
    }
    if r.read_ue()? > 15 {
        return Err(CodecError::Invalid("SPS id above 15"));
    }
    let chroma_format_idc = r.read_ue()?;
    if chroma_format_idc > 3 {
        return Err(CodecError::Invalid("SPS chroma_format_idc above 3"));
    }
    let separate_colour_plane = chroma_format_idc == 3 && r.read_bit()?;
    let pic_width = r.read_ue()?;
    let pic_height = r.read_ue()?;
    if pic_width == 0 || pic_height == 0 {
        return Err(CodecError::Invalid("SPS picture size 0"));
    }
    if pic_width > MAX_DIMENSION || pic_height > MAX_DIMENSION {
        return Err(CodecError::Unsupported("picture larger than 16888 pixels"));
    }
    let (sub_width, sub_height) = match (separate_colour_plane, chroma_format_idc) {
        (false, 1) => (2u64, 2u64),
        (false, 2) => (2, 1),
        _ => (1, 1),
    };
    let (mut crop_x, mut crop_y) = (0u64, 0u64);
    if r.read_bit()? {
        let left = u64::from(r.read_ue()?);
        let right = u64::from(r.read_ue()?);
        let top = u64::from(r.read_ue()?);
        let bottom = u64::from(r.read_ue()?);
        crop_x = (left + right) * sub_width;
        crop_y = (top + bottom) * sub_height;
    }
    let width = u64::from(pic_width)
        .checked_sub(crop_x)
        .filter(|&w| w > 0)
        .ok_or(CodecError::Invalid(
            "SPS conformance window exceeds the width",
        ))?;
    let height = u64::from(pic_height)
        .checked_sub(crop_y)
        .filter(|&h| h > 0)
        .ok_or(CodecError::Invalid(
            "SPS conformance window exceeds the height",
        ))?;
    let bit_depth_luma_minus8 = r.read_ue()?;
    let bit_depth_chroma_minus8 = r.read_ue()?;
    if bit_depth_luma_minus8 > 8 || bit_depth_chroma_minus8 > 8 {
        return Err(CodecError::Invalid("SPS bit depth above 16"));
    }
    let mut info = SpsInfo {
        general_profile_idc: general_ptl[0] & 0x1f,
        general_level_idc: general_ptl[11],
        width: width as u32,
        height: height as u32,
        framerate: None,
    };
    let details = |info: SpsInfo| SpsDetails {
        info,
        general_ptl,
        max_sub_layers_minus1,
        temporal_id_nesting,
        chroma_format_idc,
        bit_depth_luma_minus8,
        bit_depth_chroma_minus8,
    };
    // The rest only leads to the VUI frame rate: a stream whose SPS we
    // cannot follow that far still gets its dimensions.
    info.framerate = parse_to_vui_framerate(&mut r, max_sub_layers_minus1).unwrap_or(None);
    Ok(details(info))
}

/// Continues after bit_depth_chroma_minus8 up to vui timing_info.
fn parse_to_vui_framerate(
    r: &mut BitReader<'_>,
    max_sub_layers_minus1: u8,
) -> Result<Option<f64>, CodecError> {
    // Checked: an Exp-Golomb value near u32::MAX would overflow (and, wrapped,
    // pass the bound below).
    let log2_max_poc_lsb = r.read_ue()?.checked_add(4).ok_or(CodecError::Invalid(
        "SPS log2_max_pic_order_cnt_lsb above 16",
    ))?;
    if log2_max_poc_lsb > 16 {
        return Err(CodecError::Invalid(
            "SPS log2_max_pic_order_cnt_lsb above 16",
        ));
    }
    let ordering_info_present = r.read_bit()?;
    let first = if ordering_info_present {
        0
    } else {
        max_sub_layers_minus1
    };
    for _ in first..=max_sub_layers_minus1 {
        r.read_ue()?; // sps_max_dec_pic_buffering_minus1
        r.read_ue()?; // sps_max_num_reorder_pics
        r.read_ue()?; // sps_max_latency_increase_plus1
    }
    for _ in 0..6 {
        // log2_min_luma_coding_block_size_minus3 .. max_transform_hierarchy_depth_intra
        r.read_ue()?;
    }
    if r.read_bit()? && r.read_bit()? {
        // scaling_list_enabled_flag && sps_scaling_list_data_present_flag
        skip_scaling_list_data(r)?;
    }
    r.skip_bits(2)?; // amp_enabled_flag, sample_adaptive_offset_enabled_flag
    if r.read_bit()? {
        // pcm_enabled_flag
        r.skip_bits(8)?; // pcm sample bit depths
        r.read_ue()?;
        r.read_ue()?;
        r.skip_bits(1)?; // pcm_loop_filter_disabled_flag
    }
    let num_short_term_ref_pic_sets = r.read_ue()?;
    if num_short_term_ref_pic_sets > 64 {
        return Err(CodecError::Invalid(
            "SPS num_short_term_ref_pic_sets above 64",
        ));
    }
    let mut num_delta_pocs = [0u32; 64];
    for idx in 0..num_short_term_ref_pic_sets as usize {
        num_delta_pocs[idx] = skip_st_ref_pic_set(r, idx, &num_delta_pocs)?;
    }
    if r.read_bit()? {
        // long_term_ref_pics_present_flag
        let count = r.read_ue()?;
        if count > 32 {
            return Err(CodecError::Invalid(
                "SPS num_long_term_ref_pics_sps above 32",
            ));
        }
        for _ in 0..count {
            r.skip_bits(log2_max_poc_lsb as usize + 1)?;
        }
    }
    r.skip_bits(2)?; // sps_temporal_mvp_enabled_flag, strong_intra_smoothing_enabled_flag
    if !r.read_bit()? {
        return Ok(None);
    }
    // vui_parameters()
    if r.read_bit()? && r.read_u8()? == 255 {
        r.skip_bits(32)?; // sar_width, sar_height
    }
    if r.read_bit()? {
        r.skip_bits(1)?; // overscan_appropriate_flag
    }
    if r.read_bit()? {
        r.skip_bits(4)?; // video_format, video_full_range_flag
        if r.read_bit()? {
            r.skip_bits(24)?;
        }
    }
    if r.read_bit()? {
        r.read_ue()?;
        r.read_ue()?;
    }
    r.skip_bits(3)?; // neutral_chroma_indication, field_seq, frame_field_info_present
    if r.read_bit()? {
        // default_display_window_flag
        for _ in 0..4 {
            r.read_ue()?;
        }
    }
    if !r.read_bit()? {
        return Ok(None);
    }
    let num_units_in_tick = r.read_bits(32)?;
    let time_scale = r.read_bits(32)?;
    if num_units_in_tick == 0 || time_scale == 0 {
        return Ok(None);
    }
    Ok(Some(f64::from(time_scale) / f64::from(num_units_in_tick)))
}

fn skip_scaling_list_data(r: &mut BitReader<'_>) -> Result<(), CodecError> {
    for size_id in 0..4u32 {
        let step = if size_id == 3 { 3 } else { 1 };
        for _matrix_id in (0..6).step_by(step) {
            if !r.read_bit()? {
                r.read_ue()?; // scaling_list_pred_matrix_id_delta
            } else {
                let coef_num = 64.min(1u32 << (4 + (size_id << 1)));
                if size_id > 1 {
                    r.read_se()?; // scaling_list_dc_coef_minus8
                }
                for _ in 0..coef_num {
                    r.read_se()?; // scaling_list_delta_coef
                }
            }
        }
    }
    Ok(())
}

/// Skips st_ref_pic_set(idx) and returns its NumDeltaPocs.
fn skip_st_ref_pic_set(
    r: &mut BitReader<'_>,
    idx: usize,
    num_delta_pocs: &[u32; 64],
) -> Result<u32, CodecError> {
    if idx != 0 && r.read_bit()? {
        // inter_ref_pic_set_prediction_flag (delta_idx_minus1 is only
        // present in slice headers, so the reference is idx - 1)
        r.skip_bits(1)?; // delta_rps_sign
        r.read_ue()?; // abs_delta_rps_minus1
        let reference = num_delta_pocs[idx - 1];
        let mut count = 0;
        for _ in 0..=reference {
            let used_by_curr_pic = r.read_bit()?;
            let use_delta = used_by_curr_pic || r.read_bit()?;
            if use_delta {
                count += 1;
            }
        }
        Ok(count)
    } else {
        let negative = r.read_ue()?;
        let positive = r.read_ue()?;
        if negative > 16 || positive > 16 {
            return Err(CodecError::Invalid("SPS short-term ref pic set too large"));
        }
        for _ in 0..negative + positive {
            r.read_ue()?; // delta_poc_sX_minus1
            r.skip_bits(1)?; // used_by_curr_pic_sX_flag
        }
        Ok(negative + positive)
    }
}

/// Parses an HEVCDecoderConfigurationRecord into the track config and the
/// NAL length size. Units other than VPS/SPS/PPS (e.g. SEI) are dropped.
pub fn parse_decoder_config(record: &[u8]) -> Result<(CodecConfig, u8), CodecError> {
    let header = record.get(..23).ok_or(CodecError::Truncated)?;
    if header[0] != 1 {
        return Err(CodecError::Unsupported("hvcC configurationVersion not 1"));
    }
    let length_size = (header[21] & 0x03) + 1;
    let num_arrays = header[22];
    let mut rest = &record[23..];
    let (mut vps, mut sps, mut pps) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..num_arrays {
        let array_header = rest.get(..3).ok_or(CodecError::Truncated)?;
        let num_nalus = u16::from_be_bytes([array_header[1], array_header[2]]);
        rest = &rest[3..];
        for _ in 0..num_nalus {
            let len_bytes = rest.get(..2).ok_or(CodecError::Truncated)?;
            let len = usize::from(u16::from_be_bytes([len_bytes[0], len_bytes[1]]));
            let unit = rest.get(2..2 + len).ok_or(CodecError::Truncated)?;
            rest = &rest[2 + len..];
            // Trust the unit's own header over the array's type.
            let list = match nal_type(unit) {
                Some(NAL_VPS) => &mut vps,
                Some(NAL_SPS) => &mut sps,
                Some(NAL_PPS) => &mut pps,
                _ => continue,
            };
            list.push(Bytes::copy_from_slice(unit));
        }
    }
    Ok((CodecConfig::H265 { vps, sps, pps }, length_size))
}

/// Builds an HEVCDecoderConfigurationRecord with lengthSizeMinusOne = 3 and
/// one array each for VPS, SPS and PPS (array_completeness 0, since frames
/// may repeat them in-band). The general_* fields, chroma format, bit depths
/// and temporal layers come from the first SPS, which must parse.
pub fn build_decoder_config(
    vps: &[Bytes],
    sps: &[Bytes],
    pps: &[Bytes],
) -> Result<Vec<u8>, CodecError> {
    let first = sps
        .first()
        .ok_or(CodecError::Invalid("hvcC needs an SPS"))?;
    let d = parse_sps_details(first)?;
    let total: usize = vps.iter().chain(sps).chain(pps).map(|u| u.len() + 2).sum();
    let mut out = Vec::with_capacity(23 + 9 + total);
    out.push(1);
    out.extend_from_slice(&d.general_ptl);
    out.extend_from_slice(&[
        0xf0, // reserved, min_spatial_segmentation_idc = 0
        0x00,
        0xfc,                                            // parallelismType unknown
        0xfc | d.chroma_format_idc as u8,                // chromaFormat
        0xf8 | (d.bit_depth_luma_minus8 as u8 & 0x07),   // bitDepthLumaMinus8
        0xf8 | (d.bit_depth_chroma_minus8 as u8 & 0x07), // bitDepthChromaMinus8
        0,
        0, // avgFrameRate unknown
        // constantFrameRate 0, numTemporalLayers, temporalIdNested, lengthSizeMinusOne 3
        ((d.max_sub_layers_minus1 + 1) << 3) | (u8::from(d.temporal_id_nesting) << 2) | 0x03,
    ]);
    let arrays = [(NAL_VPS, vps), (NAL_SPS, sps), (NAL_PPS, pps)];
    out.push(arrays.iter().filter(|(_, units)| !units.is_empty()).count() as u8);
    for (nal_type, units) in arrays {
        if units.is_empty() {
            continue;
        }
        let count = u16::try_from(units.len())
            .map_err(|_| CodecError::Invalid("too many parameter sets"))?;
        out.push(nal_type);
        out.extend_from_slice(&count.to_be_bytes());
        for unit in units {
            let len = u16::try_from(unit.len())
                .map_err(|_| CodecError::Invalid("parameter set too long"))?;
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(unit);
        }
    }
    Ok(out)
}

/// Width, height and frame rate (0.0 when unknown) from the first SPS of an
/// H.265 config.
pub fn video_params(config: &CodecConfig) -> Option<VideoParams> {
    let CodecConfig::H265 { sps, .. } = config else {
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
/// keyframe) into a config; `None` unless it has a VPS, an SPS and a PPS.
/// Repeated identical units are kept once.
pub fn config_from_annexb(data: &[u8]) -> Option<CodecConfig> {
    let (mut vps, mut sps, mut pps) = (Vec::new(), Vec::new(), Vec::new());
    for unit in nal::annexb_units(data) {
        let list: &mut Vec<Bytes> = match nal_type(unit) {
            Some(NAL_VPS) => &mut vps,
            Some(NAL_SPS) => &mut sps,
            Some(NAL_PPS) => &mut pps,
            _ => continue,
        };
        if !list.iter().any(|u| u.as_ref() == unit) {
            list.push(Bytes::copy_from_slice(unit));
        }
    }
    if vps.is_empty() || sps.is_empty() || pps.is_empty() {
        return None;
    }
    Some(CodecConfig::H265 { vps, sps, pps })
}

/// True when 4-byte-length-prefixed access unit data contains an IRAP unit.
pub fn is_keyframe_length_prefixed(data: &[u8]) -> bool {
    nal::length_prefixed_units(data, 4)
        .map_while(Result::ok)
        .any(|u| nal_type(u).is_some_and(is_irap))
}

/// True when Annex B access unit data contains an IRAP unit.
pub fn is_keyframe_annexb(data: &[u8]) -> bool {
    nal::annexb_units(data).any(|u| nal_type(u).is_some_and(is_irap))
}

#[cfg(test)]
mod tests {

    /// Found by the codec_h265 fuzz target: log2_max_pic_order_cnt_lsb_minus4
    /// near u32::MAX overflowed the `+ 4`.
    #[test]
    fn huge_log2_max_poc_lsb_is_an_error_not_a_panic() {
        let nal = [
            0x42, 0x01, 0x50, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x69, 0x46, 0x01,
            0x50, 0x50, 0x80, 0xe5, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
        ];
        // Every entry point the fuzz target drives: no panic.
        crate::codec::fuzz::fuzz_h265(&nal);
    }

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
        level: u8,
        width: u32,
        height: u32,
        fps: f64,
    }

    // SPS units from `ffmpeg -f lavfi -i testsrc2=size=WxH:rate=R -c:v libx265
    // -f hevc`, expected values from ffprobe.
    const SAMPLES: &[Sample] = &[
        Sample {
            name: "1280x720 main",
            sps: "42010101600000030090000003000003005da00280802d165959a4932bc05a020000030002000003003c10",
            profile: 1,
            level: 93,
            width: 1280,
            fps: 30.0,
            height: 720,
        },
        Sample {
            name: "1920x1080 main (cropped)",
            sps: "420101016000000300900000030000030078a003c08010e596566924caf0168080000003008000000c84",
            profile: 1,
            level: 120,
            width: 1920,
            fps: 25.0,
            height: 1080,
        },
        Sample {
            name: "854x480 main (cropped)",
            sps: "42010101600000030090000003000003005aa006b201e1d796566924caf01680800001f480003a9804",
            profile: 1,
            level: 90,
            width: 854,
            fps: 30000.0 / 1001.0,
            height: 480,
        },
        Sample {
            name: "176x144 main",
            sps: "42010101600000030090000003000003001ea0162024596566924caf0168080000030008000003007840",
            profile: 1,
            level: 30,
            width: 176,
            fps: 15.0,
            height: 144,
        },
        Sample {
            name: "642x362 rext 4:4:4 10-bit (cropped)",
            sps: "4201010408000003009c0800000300003f9000a2402e39e76cb2b349265780b4040000030004000003006020",
            profile: 4,
            level: 63,
            width: 642,
            fps: 24.0,
            height: 362,
        },
    ];

    const VPS_176X144: &str = "40010c01ffff01600000030090000003000003001e959809";
    const PPS: &str = "4401c172b46240";
    // `ffmpeg -i 176x144.265 -c copy b.mp4`, hvcC from ffprobe -show_data.
    const HVCC_176X144: &str = "0101600000009000000000001ef000fcfdf8f800000f03200001001840010c01ffff01600000030090000003000003001e959809210001002a42010101600000030090000003000003001ea0162024596566924caf016808000003000800000300784022000100074401c172b46240";

    #[test]
    fn parses_ffmpeg_sps() {
        for s in SAMPLES {
            let info = parse_sps(&hex(s.sps)).unwrap_or_else(|e| panic!("{}: {e}", s.name));
            assert_eq!(
                (info.general_profile_idc, info.general_level_idc),
                (s.profile, s.level),
                "{}",
                s.name
            );
            assert_eq!((info.width, info.height), (s.width, s.height), "{}", s.name);
            let fps = info.framerate.unwrap();
            assert!((fps - s.fps).abs() < 1e-9, "{}: {fps}", s.name);
        }
    }

    /// MSB-first bit writer for hand-made SPS units.
    #[derive(Default)]
    struct BitWriter {
        bytes: Vec<u8>,
        bits: usize,
    }

    impl BitWriter {
        fn put(&mut self, value: u64, n: usize) {
            for i in (0..n).rev() {
                if self.bits & 7 == 0 {
                    self.bytes.push(0);
                }
                if i < 64 && (value >> i) & 1 == 1 {
                    let last = self.bytes.len() - 1;
                    self.bytes[last] |= 0x80 >> (self.bits % 8);
                }
                self.bits += 1;
            }
        }

        fn ue(&mut self, value: u32) {
            let v = u64::from(value) + 1;
            let len = 64 - v.leading_zeros() as usize;
            self.put(0, len - 1);
            self.put(v, len);
        }

        fn se(&mut self, value: i32) {
            let k = if value > 0 { 2 * value - 1 } else { -2 * value };
            self.ue(k as u32);
        }

        /// rbsp_trailing_bits, emulation prevention, NAL header.
        fn into_sps_nal(mut self) -> Vec<u8> {
            self.put(1, 1);
            while self.bits & 7 != 0 {
                self.put(0, 1);
            }
            let mut nal = vec![0x42, 0x01];
            let mut zeros = 0;
            for &b in &self.bytes {
                if zeros >= 2 && b <= 3 {
                    nal.push(3);
                    zeros = 0;
                }
                nal.push(b);
                zeros = if b == 0 { zeros + 1 } else { 0 };
            }
            nal
        }
    }

    #[test]
    fn parses_sub_layers_scaling_lists_and_inter_rps() {
        let mut w = BitWriter::default();
        w.put(0, 4); // vps id
        w.put(2, 3); // max_sub_layers_minus1
        w.put(1, 1); // temporal_id_nesting
        w.put(0x01, 8); // profile space 0, tier 0, profile 1 (Main)
        w.put(0x6000_0000, 32); // compatibility
        w.put(0x9000_0000_0000, 48); // constraint flags
        w.put(123, 8); // general_level_idc
        w.put(0b11, 2); // sub-layer 0: profile and level present
        w.put(0b01, 2); // sub-layer 1: level present
        w.put(0, 12); // reserved_zero_2bits for 2..8
        w.put(0x01, 8); // sub-layer 0 profile (88 bits)
        w.put(0, 80);
        w.put(90, 8); // sub-layer 0 level
        w.put(93, 8); // sub-layer 1 level
        w.ue(0); // sps id
        w.ue(1); // 4:2:0
        w.ue(1920);
        w.ue(1088);
        w.put(1, 1); // conformance window
        for offset in [0, 0, 0, 4] {
            w.ue(offset);
        }
        w.ue(0); // bit depth luma
        w.ue(0); // bit depth chroma
        w.ue(4); // log2_max_pic_order_cnt_lsb_minus4
        w.put(1, 1); // sub-layer ordering info for all 3 layers
        for _ in 0..3 {
            w.ue(4);
            w.ue(2);
            w.ue(0);
        }
        for v in [0, 3, 0, 3, 4, 4] {
            w.ue(v);
        }
        w.put(1, 1); // scaling_list_enabled
        w.put(1, 1); // scaling list data present
        for size_id in 0..4u32 {
            let matrices = if size_id == 3 { 2 } else { 6 };
            for m in 0..matrices {
                if m % 2 == 0 {
                    w.put(0, 1); // predicted
                    w.ue(0);
                } else {
                    w.put(1, 1);
                    if size_id > 1 {
                        w.se(8);
                    }
                    for _ in 0..64.min(1 << (4 + 2 * size_id)) {
                        w.se(-1);
                    }
                }
            }
        }
        w.put(0b01, 2); // amp, sao
        w.put(1, 1); // pcm
        w.put(0x77, 8);
        w.ue(0);
        w.ue(1);
        w.put(0, 1);
        w.ue(3); // num_short_term_ref_pic_sets
        w.ue(2); // set 0: 2 negative, 0 positive
        w.ue(0);
        for _ in 0..2 {
            w.ue(0);
            w.put(1, 1);
        }
        w.put(1, 1); // set 1: inter prediction from set 0
        w.put(0, 1);
        w.ue(0);
        w.put(0b1, 1); // j=0 used
        w.put(0b01, 2); // j=1 not used, use_delta
        w.put(0b00, 2); // j=2 not used, not use_delta -> NumDeltaPocs = 2
        w.put(1, 1); // set 2: inter prediction from set 1 (3 flags)
        w.put(1, 1);
        w.ue(1);
        w.put(0b1, 1);
        w.put(0b1, 1);
        w.put(0b00, 2);
        w.put(1, 1); // long-term ref pics present
        w.ue(2);
        w.put(0, 8 + 1); // lt_ref_pic_poc_lsb_sps (8 bits) + used flag
        w.put(0, 8 + 1);
        w.put(0b11, 2); // temporal mvp, strong intra smoothing
        w.put(1, 1); // vui
        w.put(1, 1); // aspect ratio: extended SAR
        w.put(255, 8);
        w.put(0x0001_0001, 32);
        w.put(0, 1); // overscan
        w.put(1, 1); // video signal type with colour description
        w.put(0b1010, 4);
        w.put(1, 1);
        w.put(0x01_01_01, 24);
        w.put(1, 1); // chroma loc
        w.ue(0);
        w.ue(0);
        w.put(0, 3);
        w.put(1, 1); // default display window
        for _ in 0..4 {
            w.ue(0);
        }
        w.put(1, 1); // timing info
        w.put(1001, 32);
        w.put(60000, 32);
        let nal = w.into_sps_nal();
        let info = parse_sps(&nal).unwrap();
        assert_eq!((info.general_profile_idc, info.general_level_idc), (1, 123));
        assert_eq!((info.width, info.height), (1920, 1080));
        assert!((info.framerate.unwrap() - 60000.0 / 1001.0).abs() < 1e-9);
        let record = build_decoder_config(&[], &[Bytes::from(nal)], &[]).unwrap();
        assert_eq!(record[21], (3 << 3) | (1 << 2) | 3); // 3 temporal layers, nested
    }

    #[test]
    fn sps_errors() {
        assert_eq!(parse_sps(&[]), Err(CodecError::Truncated));
        assert!(parse_sps(&hex(VPS_176X144)).is_err());
        let sps = hex(SAMPLES[0].sps);
        for len in 0..20 {
            assert!(parse_sps(&sps[..len]).is_err(), "len {len}");
        }
    }

    #[test]
    fn parses_ffmpeg_hvcc() {
        let (config, length_size) = parse_decoder_config(&hex(HVCC_176X144)).unwrap();
        assert_eq!(length_size, 4);
        let CodecConfig::H265 { vps, sps, pps } = &config else {
            panic!("not H265");
        };
        assert_eq!(vps[0].as_ref(), &hex(VPS_176X144)[..]);
        assert_eq!(sps[0].as_ref(), &hex(SAMPLES[3].sps)[..]);
        assert_eq!(pps[0].as_ref(), &hex(PPS)[..]);
        let params = video_params(&config).unwrap();
        assert_eq!((params.width, params.height), (176, 144));
        // Rebuilding gives ffmpeg's bytes back.
        assert_eq!(
            build_decoder_config(vps, sps, pps).unwrap(),
            hex(HVCC_176X144)
        );
        assert_eq!(video_params(&CodecConfig::None), None);
    }

    #[test]
    fn builds_rext_hvcc() {
        let sps = Bytes::from(hex(SAMPLES[4].sps));
        let record = build_decoder_config(&[], std::slice::from_ref(&sps), &[]).unwrap();
        assert_eq!(record[1], 0x04); // general_profile_idc 4
        assert_eq!(record[12], 63); // level
        assert_eq!(&record[16..19], &[0xff, 0xfa, 0xfa]); // 4:4:4, 10-bit
        let (config, _) = parse_decoder_config(&record).unwrap();
        assert_eq!(
            config,
            CodecConfig::H265 {
                vps: vec![],
                sps: vec![sps],
                pps: vec![]
            }
        );
        assert!(build_decoder_config(&[], &[], &[]).is_err());
    }

    #[test]
    fn hvcc_errors() {
        let record = hex(HVCC_176X144);
        for len in 0..record.len() {
            assert!(parse_decoder_config(&record[..len]).is_err(), "len {len}");
        }
    }

    #[test]
    fn keyframes() {
        // IDR_W_RADL = 19 -> first byte 0x26; TRAIL_R = 1 -> 0x02.
        assert!(is_keyframe_length_prefixed(&[
            0, 0, 0, 2, 0x46, 0x01, 0, 0, 0, 2, 0x26, 0x01
        ]));
        assert!(!is_keyframe_length_prefixed(&[0, 0, 0, 2, 0x02, 0x01]));
        assert!(is_keyframe_annexb(&[0, 0, 0, 1, 0x2a, 0x01, 0xaf])); // CRA
        assert!(is_irap(NAL_CRA) && !is_irap(NAL_VPS));
        assert_eq!(nal_type(&hex(PPS)), Some(NAL_PPS));
    }

    #[test]
    fn collects_config_from_annexb() {
        let mut au = Vec::new();
        for unit in [VPS_176X144, SAMPLES[3].sps, PPS, PPS, "2601af"] {
            au.extend_from_slice(&[0, 0, 0, 1]);
            au.extend_from_slice(&hex(unit));
        }
        let config = config_from_annexb(&au).unwrap();
        assert_eq!(config, parse_decoder_config(&hex(HVCC_176X144)).unwrap().0);
        assert_eq!(config_from_annexb(&au[..30]), None);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..160)) {
            crate::codec::fuzz::fuzz_h265(&data);
            let mut sps = data.clone();
            if sps.len() >= 2 { sps[0] = 0x42; sps[1] = 0x01; }
            let _ = parse_sps(&sps);
            let _ = is_keyframe_annexb(&data);
            let _ = build_decoder_config(&[], &[Bytes::from(sps)], &[Bytes::from(data)]);
        }

        #[test]
        fn corrupted_real_sps_never_panics(index in 0usize..5, pos in 0usize..44, byte in any::<u8>()) {
            let mut sps = hex(SAMPLES[index].sps);
            let pos = pos % sps.len();
            sps[pos] = byte;
            let _ = parse_sps(&sps);
        }
    }
}
