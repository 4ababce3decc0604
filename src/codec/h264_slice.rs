//! The start of an H.264 slice header (ITU-T H.264 7.3.3): enough to know a
//! picture's type, whether it is a reference, its `frame_num`, and which
//! picture a P slice predicts from when it names a single one. A relay
//! reads this to leave B-frames out of a WebRTC viewer's stream without
//! decoding (see `webrtc::bframes`). Bounded: a few dozen bytes of the
//! first slice are read, never the macroblocks.

use super::bits::BitReader;
use super::h264::SliceSps;
use super::CodecError;

/// What a PPS says that a slice header needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlicePps {
    pub pps_id: u32,
    pub sps_id: u32,
    pub bottom_field_pic_order_in_frame_present: bool,
    pub num_ref_idx_l0_default_active: u32,
    pub redundant_pic_cnt_present: bool,
}

/// Parses the fields of a PPS NAL unit (header byte included) a slice
/// header needs. PPSs with slice groups (FMO, baseline's extended
/// feature, never sent by the encoders kiln meets) are refused.
pub fn parse_pps(nal: &[u8]) -> Result<SlicePps, CodecError> {
    if nal.first().map(|b| b & 0x1f) != Some(8) {
        return Err(CodecError::Invalid("not a PPS NAL unit"));
    }
    let rbsp = super::nal::rbsp(&nal[1..nal.len().min(64)]);
    let mut r = BitReader::new(&rbsp);
    let pps_id = r.read_ue()?;
    let sps_id = r.read_ue()?;
    if pps_id > 255 || sps_id > 31 {
        return Err(CodecError::Invalid("PPS id out of range"));
    }
    let _entropy_coding_mode = r.read_bit()?;
    let bottom_field_pic_order_in_frame_present = r.read_bit()?;
    if r.read_ue()? != 0 {
        return Err(CodecError::Unsupported("PPS with slice groups"));
    }
    let l0 = r.read_ue()?;
    let _l1 = r.read_ue()?;
    if l0 > 31 {
        return Err(CodecError::Invalid("PPS num_ref_idx_l0 above 32"));
    }
    let _weighted_pred = r.read_bit()?;
    r.skip_bits(2)?; // weighted_bipred_idc
    r.read_se()?; // pic_init_qp_minus26
    r.read_se()?; // pic_init_qs_minus26
    r.read_se()?; // chroma_qp_index_offset
    let _deblocking_filter_control_present = r.read_bit()?;
    let _constrained_intra_pred = r.read_bit()?;
    let redundant_pic_cnt_present = r.read_bit()?;
    Ok(SlicePps {
        pps_id,
        sps_id,
        bottom_field_pic_order_in_frame_present,
        num_ref_idx_l0_default_active: l0 + 1,
        redundant_pic_cnt_present,
    })
}

/// A picture's kind as its slices say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceKind {
    I,
    P,
    B,
}

/// The first slice header of a picture, as far as it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceHeader {
    pub kind: SliceKind,
    pub idr: bool,
    /// `nal_ref_idc` is not 0: later pictures may predict from it.
    pub reference: bool,
    pub frame_num: u32,
    pub pps_id: u32,
    /// P slices: how many pictures list 0 holds.
    pub active_refs: u32,
    /// P slices: the first reordering of list 0, as (the picture number
    /// it names); `None` when list 0 keeps its initial order.
    pub first_ref_pic_num: Option<i64>,
}

/// Reads a slice header from a VCL NAL unit (type 1 or 5, header byte
/// included) with the parameter sets it names.
pub fn parse_slice_header(
    nal: &[u8],
    sps_of: impl Fn(u32) -> Option<SliceSps>,
    pps_of: impl Fn(u32) -> Option<SlicePps>,
) -> Result<SliceHeader, CodecError> {
    let first = *nal.first().ok_or(CodecError::Truncated)?;
    let nal_type = first & 0x1f;
    if nal_type != 1 && nal_type != 5 {
        return Err(CodecError::Invalid("not a slice NAL unit"));
    }
    let idr = nal_type == 5;
    let reference = (first >> 5) & 3 != 0;
    // The fields read here fit in the first bytes; long ue(v) codes and
    // reordering commands are bounded by the slice itself.
    let rbsp = super::nal::rbsp(&nal[1..nal.len().min(96)]);
    let mut r = BitReader::new(&rbsp);
    let _first_mb = r.read_ue()?;
    let kind = match r.read_ue()? % 5 {
        0 | 3 => SliceKind::P, // P, SP
        1 => SliceKind::B,
        _ => SliceKind::I, // I, SI
    };
    let pps_id = r.read_ue()?;
    let pps = pps_of(pps_id).ok_or(CodecError::Invalid("slice names an unknown PPS"))?;
    let sps = sps_of(pps.sps_id).ok_or(CodecError::Invalid("slice names an unknown SPS"))?;
    if sps.separate_colour_plane {
        r.skip_bits(2)?;
    }
    let frame_num = r.read_bits(sps.log2_max_frame_num)?;
    let mut field_pic = false;
    if !sps.frame_mbs_only {
        field_pic = r.read_bit()?;
        if field_pic {
            r.skip_bits(1)?; // bottom_field_flag
        }
    }
    if idr {
        r.read_ue()?; // idr_pic_id
    }
    if sps.poc_type == 0 {
        r.skip_bits(sps.log2_max_poc_lsb as usize)?;
        if pps.bottom_field_pic_order_in_frame_present && !field_pic {
            r.read_se()?;
        }
    }
    if sps.poc_type == 1 && !sps.delta_pic_order_always_zero {
        r.read_se()?;
        if pps.bottom_field_pic_order_in_frame_present && !field_pic {
            r.read_se()?;
        }
    }
    if pps.redundant_pic_cnt_present {
        r.read_ue()?;
    }
    let mut header = SliceHeader {
        kind,
        idr,
        reference,
        frame_num,
        pps_id,
        active_refs: 0,
        first_ref_pic_num: None,
    };
    if kind != SliceKind::P {
        return Ok(header);
    }
    header.active_refs = if r.read_bit()? {
        r.read_ue()? + 1
    } else {
        pps.num_ref_idx_l0_default_active
    };
    // ref_pic_list_modification (7.3.3.1), list 0: the first command says
    // which picture goes first.
    if r.read_bit()? {
        let max = 1i64 << sps.log2_max_frame_num;
        let idc = r.read_ue()?;
        let current = i64::from(frame_num);
        header.first_ref_pic_num = match idc {
            0 => Some((current - (i64::from(r.read_ue()?) + 1)).rem_euclid(max)),
            1 => Some((current + i64::from(r.read_ue()?) + 1).rem_euclid(max)),
            // The end of the commands: the initial order.
            3 => None,
            // A long-term picture (or a view): not one this reader follows.
            _ => Some(-1),
        };
    }
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        for nal in [&[][..], &[0x41], &[0x41, 0xff, 0xff], &[0x09, 0x10]] {
            assert!(parse_slice_header(nal, |_| None, |_| None).is_err());
        }
        assert!(parse_pps(&[0x68]).is_err());
        assert!(parse_pps(&[0x67, 1, 2]).is_err());
    }
}
