//! Shared codec knowledge: bitstream framing and parameter parsing for H.264,
//! H.265, AAC and MP3, used by the FLV/RTMP and MPEG-TS cores.
//!
//! This module parses and rewrites headers and configuration records only. It
//! never decodes media, never touches sockets or clocks, and never panics on
//! input: every parser returns a [`CodecError`] on malformed data.

pub mod aac;
pub mod bits;
pub mod h264;
pub mod h264_slice;
pub mod h265;
pub mod mp3;
pub mod nal;

use std::fmt;

/// Why a bitstream or configuration record could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodecError {
    /// The data ended before the structure did.
    Truncated,
    /// The data violates the format (the text names the field).
    Invalid(&'static str),
    /// Valid but not something kiln handles (the text names the feature).
    Unsupported(&'static str),
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::Truncated => f.write_str("codec data truncated"),
            CodecError::Invalid(what) => write!(f, "invalid codec data: {what}"),
            CodecError::Unsupported(what) => write!(f, "unsupported codec feature: {what}"),
        }
    }
}

impl std::error::Error for CodecError {}

/// Entry points for fuzz targets: each feeds arbitrary bytes through one
/// parser and ignores the result.
pub mod fuzz {
    use super::{aac, h264, h265, mp3, nal};

    pub fn fuzz_nal(data: &[u8]) {
        for _ in nal::annexb_units(data) {}
        for size in 1..=4u8 {
            for _ in nal::length_prefixed_units(data, size) {}
            let _ = nal::normalize_length_size(data, size);
        }
        let mut out = Vec::new();
        nal::annexb_to_length_prefixed(data, &mut out);
        out.clear();
        let _ = nal::length_prefixed_to_annexb(data, &mut out);
        let _ = nal::rbsp(data);
    }

    pub fn fuzz_h264(data: &[u8]) {
        let _ = h264::nal_type(data);
        let _ = h264::parse_sps(data);
        let _ = h264::parse_sps_for_slices(data);
        let _ = super::h264_slice::parse_pps(data);
        // A slice header against parameter sets of every shape the first
        // bytes pick (field coding, POC types, redundant pictures).
        let pick = |i: usize| data.get(i).copied().unwrap_or(0);
        let sps = h264::SliceSps {
            sps_id: 0,
            separate_colour_plane: pick(0) & 1 != 0,
            log2_max_frame_num: 4 + u32::from(pick(1) % 13),
            poc_type: u32::from(pick(2) % 3),
            log2_max_poc_lsb: 4 + u32::from(pick(3) % 13),
            delta_pic_order_always_zero: pick(4) & 1 != 0,
            frame_mbs_only: pick(5) & 1 != 0,
            max_num_ref_frames: u32::from(pick(6) % 17),
        };
        let pps = super::h264_slice::SlicePps {
            pps_id: 0,
            sps_id: 0,
            bottom_field_pic_order_in_frame_present: pick(7) & 1 != 0,
            num_ref_idx_l0_default_active: 1 + u32::from(pick(8) % 32),
            redundant_pic_cnt_present: pick(9) & 1 != 0,
        };
        let _ = super::h264_slice::parse_slice_header(
            data.get(10..).unwrap_or(&[]),
            |_| Some(sps),
            |_| Some(pps),
        );
        if let Ok((config, _)) = h264::parse_decoder_config(data) {
            let _ = h264::video_params(&config);
        }
        let _ = h264::is_keyframe_length_prefixed(data);
    }

    pub fn fuzz_h265(data: &[u8]) {
        let _ = h265::nal_type(data);
        let _ = h265::parse_sps(data);
        if let Ok((config, _)) = h265::parse_decoder_config(data) {
            let _ = h265::video_params(&config);
        }
        let _ = h265::is_keyframe_length_prefixed(data);
    }

    pub fn fuzz_aac(data: &[u8]) {
        if let Ok(asc) = aac::parse_asc(data) {
            let mut out = Vec::new();
            let _ = aac::write_adts(&asc, data.len(), &mut out);
        }
        let _ = aac::parse_adts(data);
    }

    pub fn fuzz_mp3(data: &[u8]) {
        let _ = mp3::parse_header(data);
    }
}
