//! RTP payloads of a stream's video frames, made once per stream and
//! shared (`Arc`) by every viewer's session: each session only writes its
//! own RTP header and encrypts. The send history a session answers NACKs
//! from holds these same payloads, so it costs a viewer a few pointers
//! per packet, not a copy of the stream.
//!
//! H.264 as RFC 6184 packetization-mode 1: small NAL units aggregated in
//! STAP-A, large ones in FU-A, the stream's SPS/PPS before a keyframe that
//! does not carry them. VP8 as RFC 7741 with the one-byte descriptor (no
//! picture ID: a receiver orders frames by sequence number).

use crate::codec::nal::length_prefixed_units;
use bytes::Bytes;
use std::sync::Arc;

/// Largest RTP payload made: with the RTP header, str0m's header
/// extensions and the SRTP tag a datagram stays under 1200 bytes (str0m's
/// own packetizer aims at 1150, WebRTC's usual path MTU floor is 1200).
pub const MAX_PAYLOAD: usize = 1100;

/// Bytes of a STAP-A header, and of each unit's length in it.
const STAP_A_HEADER: usize = 1;
const STAP_A_LENGTH: usize = 2;
/// Bytes of an FU-A indicator and header.
const FU_A_HEADER: usize = 2;
/// Bytes of the VP8 payload descriptor used.
const VP8_DESCRIPTOR: usize = 1;

const NAL_STAP_A: u8 = 24;
const NAL_FU_A: u8 = 28;
const NAL_AUD: u8 = 9;
const NAL_FILLER: u8 = 12;

/// Why a frame has no payloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketizeError {
    /// The frame's length prefixes do not add up.
    Malformed,
    /// Nothing to send (no NAL unit, an empty frame).
    Empty,
}

impl std::fmt::Display for PacketizeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PacketizeError::Malformed => "malformed frame (length prefixes)",
            PacketizeError::Empty => "empty frame",
        })
    }
}

/// One H.264 frame (4-byte length-prefixed NAL units, as kiln keeps
/// them) as RTP payloads of at most `max` bytes (at least 3); `params`
/// (SPS, PPS) go first when given and the frame has no SPS of its own.
/// The last payload is the one the RTP marker goes on.
pub fn h264(
    frame: &[u8],
    params: Option<(&[Bytes], &[Bytes])>,
    max: usize,
) -> Result<Vec<Arc<[u8]>>, PacketizeError> {
    let max = max.max(FU_A_HEADER + 1);
    let mut units: Vec<&[u8]> = Vec::new();
    for unit in length_prefixed_units(frame, 4) {
        let unit = unit.map_err(|_| PacketizeError::Malformed)?;
        if unit.first().is_some_and(|b| sent(b & 0x1F)) {
            units.push(unit);
        }
    }
    if let Some((sps, pps)) = params {
        if !units.iter().any(|u| u[0] & 0x1F == 7) {
            let sets = sps
                .iter()
                .chain(pps)
                .map(|p| &p[..])
                .filter(|p| !p.is_empty());
            units.splice(0..0, sets);
        }
    }
    if units.is_empty() {
        return Err(PacketizeError::Empty);
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < units.len() {
        let unit = units[i];
        if unit.len() > max {
            fu_a(unit, max, &mut out);
            i += 1;
            continue;
        }
        // As many of the next units as fit with it in one STAP-A.
        let mut size = STAP_A_HEADER + STAP_A_LENGTH + unit.len();
        let mut end = i + 1;
        while let Some(next) = units.get(end) {
            let grown = size + STAP_A_LENGTH + next.len();
            if grown > max {
                break;
            }
            size = grown;
            end += 1;
        }
        if end == i + 1 {
            out.push(Arc::from(unit));
        } else {
            out.push(stap_a(&units[i..end], size));
        }
        i = end;
    }
    Ok(out)
}

/// Is a NAL unit of this type sent? Not access unit delimiters and
/// filler (RTP marks frame boundaries itself), nor the unspecified types
/// 0 and 24-31 (RTP's aggregation and fragmentation use them: a receiver
/// would read one as such).
fn sent(kind: u8) -> bool {
    !matches!(kind, 0 | NAL_AUD | NAL_FILLER | 24..=31)
}

/// Units aggregated: F is any unit's, NRI the highest.
fn stap_a(units: &[&[u8]], size: usize) -> Arc<[u8]> {
    let f = units.iter().fold(0, |f, u| f | (u[0] & 0x80));
    let nri = units.iter().map(|u| u[0] & 0x60).max().unwrap_or(0);
    let mut p = Vec::with_capacity(size);
    p.push(f | nri | NAL_STAP_A);
    for u in units {
        // Each unit is at most `max` (< 64 KiB) bytes here.
        p.extend_from_slice(&(u.len() as u16).to_be_bytes());
        p.extend_from_slice(u);
    }
    Arc::from(p)
}

/// One unit over several payloads, cut into near-equal pieces (no runt
/// last packet).
fn fu_a(unit: &[u8], max: usize, out: &mut Vec<Arc<[u8]>>) {
    let indicator = (unit[0] & 0xE0) | NAL_FU_A;
    let kind = unit[0] & 0x1F;
    let body = &unit[1..];
    let room = max - FU_A_HEADER;
    let pieces = body.len().div_ceil(room);
    let piece = body.len().div_ceil(pieces);
    let count = body.chunks(piece).count();
    for (n, chunk) in body.chunks(piece).enumerate() {
        let mut header = kind;
        if n == 0 {
            header |= 0x80;
        }
        if n + 1 == count {
            header |= 0x40;
        }
        let mut p = Vec::with_capacity(FU_A_HEADER + chunk.len());
        p.push(indicator);
        p.push(header);
        p.extend_from_slice(chunk);
        out.push(Arc::from(p));
    }
}

/// One VP8 frame as RTP payloads of at most `max` bytes (at least 2):
/// the descriptor's S bit on the first (one partition, index 0).
pub fn vp8(frame: &[u8], max: usize) -> Result<Vec<Arc<[u8]>>, PacketizeError> {
    if frame.is_empty() {
        return Err(PacketizeError::Empty);
    }
    let room = max.max(VP8_DESCRIPTOR + 1) - VP8_DESCRIPTOR;
    let pieces = frame.len().div_ceil(room);
    let piece = frame.len().div_ceil(pieces);
    Ok(frame
        .chunks(piece)
        .enumerate()
        .map(|(n, chunk)| {
            let mut p = Vec::with_capacity(VP8_DESCRIPTOR + chunk.len());
            p.push(if n == 0 { 0x10 } else { 0x00 });
            p.extend_from_slice(chunk);
            Arc::from(p)
        })
        .collect())
}

/// Fuzz entry: any bytes as a frame, with and without parameter sets and
/// at several sizes; what comes out is bounded and goes back to the same
/// NAL units.
pub fn fuzz_h264(data: &[u8]) {
    let Some((&step, frame)) = data.split_first() else {
        return;
    };
    let max = 3 + usize::from(step) * 5;
    let sps = [Bytes::from_static(&[0x67, 0x42, 0xC0, 0x1F])];
    let pps = [Bytes::from_static(&[0x68, 0xCE, 0x3C, 0x80])];
    for params in [None, Some((&sps[..], &pps[..]))] {
        let Ok(payloads) = h264(frame, params, max) else {
            continue;
        };
        // panic-audit: fuzzing only; a payload over the limit is the bug it finds.
        assert!(payloads.iter().all(|p| p.len() <= max && !p.is_empty()));
        // panic-audit: fuzzing only; a payload RFC 6184 would refuse is the bug it finds.
        let units = depacketize(&payloads).expect("payloads as RFC 6184 has them");
        let mut want: Vec<&[u8]> = length_prefixed_units(frame, 4)
            .filter_map(Result::ok)
            .filter(|u| u.first().is_some_and(|b| sent(b & 0x1F)))
            .collect();
        if params.is_some() && !want.iter().any(|u| u[0] & 0x1F == 7) {
            want.splice(0..0, [&sps[0][..], &pps[0][..]]);
        }
        // panic-audit: fuzzing only; units lost or changed are the bug it finds.
        assert_eq!(units, want.iter().map(|u| u.to_vec()).collect::<Vec<_>>());
    }
    if let Ok(payloads) = vp8(frame, max) {
        // panic-audit: fuzzing only; a payload over the limit is the bug it finds.
        assert!(payloads.iter().all(|p| p.len() <= max));
        let joined: Vec<u8> = payloads.iter().flat_map(|p| p[1..].to_vec()).collect();
        // panic-audit: fuzzing only; bytes lost or changed are the bug it finds.
        assert_eq!(joined, frame);
    }
}

/// The NAL units back out of one frame's payloads (a strict inverse,
/// for the fuzz target and the tests): `None` if a payload is not what
/// [`h264`] makes.
fn depacketize(payloads: &[Arc<[u8]>]) -> Option<Vec<Vec<u8>>> {
    let mut units = Vec::new();
    let mut fragment: Option<Vec<u8>> = None;
    for p in payloads {
        let (&first, rest) = p.split_first()?;
        match first & 0x1F {
            NAL_STAP_A => {
                let mut rest = rest;
                while !rest.is_empty() {
                    let len = usize::from(u16::from_be_bytes([*rest.first()?, *rest.get(1)?]));
                    units.push(rest.get(2..2 + len)?.to_vec());
                    rest = &rest[2 + len..];
                }
            }
            NAL_FU_A => {
                let (&header, body) = rest.split_first()?;
                if header & 0x80 != 0 {
                    if fragment.is_some() {
                        return None;
                    }
                    fragment = Some(vec![(first & 0xE0) | (header & 0x1F)]);
                }
                fragment.as_mut()?.extend_from_slice(body);
                if header & 0x40 != 0 {
                    units.push(fragment.take()?);
                }
            }
            _ => units.push(p.to_vec()),
        }
    }
    fragment.is_none().then_some(units)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(units: &[&[u8]]) -> Vec<u8> {
        let mut f = Vec::new();
        for u in units {
            f.extend_from_slice(&(u.len() as u32).to_be_bytes());
            f.extend_from_slice(u);
        }
        f
    }

    #[test]
    fn small_units_go_in_one_stap_a_with_the_parameter_sets() {
        let idr = [0x65, 1, 2, 3];
        let sps = [Bytes::from_static(&[0x67, 0x42, 0xC0, 0x1F])];
        let pps = [Bytes::from_static(&[0x68, 0xCE])];
        let p = h264(&frame(&[&[0x09, 0x10], &idr]), Some((&sps, &pps)), 1100).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0][0], 0x60 | 24, "NRI of the highest unit, STAP-A");
        assert_eq!(
            &p[0][1..],
            &[0, 4, 0x67, 0x42, 0xC0, 0x1F, 0, 2, 0x68, 0xCE, 0, 4, 0x65, 1, 2, 3][..]
        );
    }

    #[test]
    fn a_frame_with_its_own_sps_gets_no_second() {
        let sps = [Bytes::from_static(&[0x67, 9])];
        let pps = [Bytes::from_static(&[0x68, 9])];
        let f = frame(&[&[0x67, 1], &[0x68, 1], &[0x65, 1]]);
        let p = h264(&f, Some((&sps, &pps)), 1100).unwrap();
        assert_eq!(
            depacketize(&p),
            Some(vec![vec![0x67, 1], vec![0x68, 1], vec![0x65, 1]])
        );
    }

    #[test]
    fn a_large_unit_is_cut_in_even_fu_a_pieces() {
        let mut idr = vec![0x65];
        idr.extend((0..3000u32).map(|i| i as u8));
        let p = h264(&frame(&[&idr]), None, 1100).unwrap();
        assert_eq!(p.len(), 3);
        assert!(p.iter().all(|p| p.len() <= 1100 && p[0] == (0x60 | 28)));
        assert_eq!(p[0][1], 0x80 | 5);
        assert_eq!(p[1][1], 5);
        assert_eq!(p[2][1], 0x40 | 5);
        let sizes: Vec<usize> = p.iter().map(|p| p.len()).collect();
        assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
        assert_eq!(depacketize(&p), Some(vec![idr]));
    }

    #[test]
    fn units_that_do_not_fit_together_go_alone() {
        let a = vec![0x41; 700];
        let b = vec![0x41; 700];
        let p = h264(&frame(&[&a, &b]), None, 1100).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(&p[0][..], &a[..]);
        assert_eq!(depacketize(&p), Some(vec![a, b]));
    }

    #[test]
    fn bad_frames_are_refused() {
        assert_eq!(
            h264(&[0, 0, 0, 9, 1], None, 1100),
            Err(PacketizeError::Malformed)
        );
        assert_eq!(
            h264(&frame(&[&[0x09, 0x10]]), None, 1100),
            Err(PacketizeError::Empty)
        );
        // A unit typed as RTP's own aggregation is not passed on.
        assert_eq!(
            h264(&frame(&[&[0x18, 0, 1]]), None, 1100),
            Err(PacketizeError::Empty)
        );
        assert_eq!(vp8(&[], 1100), Err(PacketizeError::Empty));
    }

    #[test]
    fn vp8_marks_the_first_piece() {
        let f: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
        let p = vp8(&f, 1100).unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[0][0], 0x10);
        assert!(p[1..].iter().all(|p| p[0] == 0));
        let joined: Vec<u8> = p.iter().flat_map(|p| p[1..].to_vec()).collect();
        assert_eq!(joined, f);
    }

    #[test]
    fn fuzz_entry_takes_odd_input() {
        fuzz_h264(&[]);
        fuzz_h264(&[0]);
        fuzz_h264(&[1, 0, 0, 0, 1, 0x65]);
        fuzz_h264(&[0, 0, 0, 0, 3, 0x65, 1, 2, 0, 0, 0, 1, 0x09]);
        fuzz_h264(&[255, 0, 0, 0, 0, 0, 0, 0, 1, 0x41]);
    }
}
