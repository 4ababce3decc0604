//! PES (packetized elementary stream) headers: parsing the fixed and optional
//! header with its 33-bit PTS/DTS, and writing the header kiln's muxer uses.
//!
//! This is the header only: it does not split PES packets into TS packets
//! (see `mux`) nor reassemble them (see `demux`).

use std::fmt;

/// Timestamps in PES headers and the PCR base count modulo 2^33.
pub const TIMESTAMP_MODULUS: u64 = 1 << 33;
/// Mask of a 33-bit timestamp.
pub const TIMESTAMP_MASK: u64 = TIMESTAMP_MODULUS - 1;

/// stream_id for video streams (first of the range).
pub const STREAM_ID_VIDEO: u8 = 0xE0;
/// stream_id for MPEG audio streams (first of the range).
pub const STREAM_ID_AUDIO: u8 = 0xC0;
/// stream_id private_stream_1 (used for Opus).
pub const STREAM_ID_PRIVATE_1: u8 = 0xBD;

/// Why a PES header could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PesError {
    /// No 00 00 01 start code prefix.
    NoStartCode,
    /// The header is longer than the data.
    Truncated,
    /// The optional header does not start with the '10' marker bits.
    BadMarker,
}

impl fmt::Display for PesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PesError::NoStartCode => write!(f, "PES without start code prefix"),
            PesError::Truncated => write!(f, "PES header truncated"),
            PesError::BadMarker => write!(f, "PES optional header without marker bits"),
        }
    }
}

impl std::error::Error for PesError {}

/// The parts of a PES header the demuxer uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PesHeader {
    pub stream_id: u8,
    /// PES_packet_length (0: unbounded, video only).
    pub packet_length: u16,
    /// 33-bit PTS as transmitted.
    pub pts: Option<u64>,
    /// 33-bit DTS as transmitted.
    pub dts: Option<u64>,
    /// Offset of the elementary stream data from the start of the PES.
    pub payload_offset: usize,
}

/// True for stream_ids whose PES has no optional header (ISO/IEC 13818-1
/// table 2-21: program_stream_map, padding, private_stream_2, ECM, EMM,
/// program_stream_directory, DSMCC, H.222.1 type E).
fn has_optional_header(stream_id: u8) -> bool {
    !matches!(
        stream_id,
        0xBC | 0xBE | 0xBF | 0xF0 | 0xF1 | 0xF2 | 0xF8 | 0xFF
    )
}

/// Reads a 5-byte PTS/DTS field (marker bits ignored).
pub fn read_timestamp(b: &[u8; 5]) -> u64 {
    (u64::from(b[0] >> 1) & 0x07) << 30
        | u64::from(b[1]) << 22
        | u64::from(b[2] >> 1) << 15
        | u64::from(b[3]) << 7
        | u64::from(b[4] >> 1)
}

/// Appends a 5-byte PTS/DTS field with the 4-bit `prefix` (0b0010 PTS only,
/// 0b0011 PTS of a PTS+DTS pair, 0b0001 DTS).
pub fn write_timestamp(prefix: u8, ts: u64, out: &mut Vec<u8>) {
    let ts = ts & TIMESTAMP_MASK;
    out.extend_from_slice(&[
        (prefix << 4) | (((ts >> 30) as u8 & 0x07) << 1) | 1,
        (ts >> 22) as u8,
        (((ts >> 15) as u8) << 1) | 1,
        (ts >> 7) as u8,
        ((ts as u8) << 1) | 1,
    ]);
}

/// Parses the PES header at the start of `pes`.
pub fn parse_pes_header(pes: &[u8]) -> Result<PesHeader, PesError> {
    let fixed = pes.get(..6).ok_or(PesError::Truncated)?;
    if fixed[..3] != [0, 0, 1] {
        return Err(PesError::NoStartCode);
    }
    let stream_id = fixed[3];
    let packet_length = u16::from_be_bytes([fixed[4], fixed[5]]);
    if !has_optional_header(stream_id) {
        return Ok(PesHeader {
            stream_id,
            packet_length,
            pts: None,
            dts: None,
            payload_offset: 6,
        });
    }
    let opt = pes.get(6..9).ok_or(PesError::Truncated)?;
    if opt[0] & 0xC0 != 0x80 {
        return Err(PesError::BadMarker);
    }
    let header_data_length = usize::from(opt[2]);
    let payload_offset = 9 + header_data_length;
    let fields = pes.get(9..payload_offset).ok_or(PesError::Truncated)?;
    let field = |at: usize| -> Result<u64, PesError> {
        let b: &[u8; 5] = fields
            .get(at..at + 5)
            .and_then(|s| s.try_into().ok())
            .ok_or(PesError::Truncated)?;
        Ok(read_timestamp(b))
    };
    let (pts, dts) = match opt[1] >> 6 {
        0b10 => (Some(field(0)?), None),
        0b11 => (Some(field(0)?), Some(field(5)?)),
        _ => (None, None),
    };
    Ok(PesHeader {
        stream_id,
        packet_length,
        pts,
        dts,
        payload_offset,
    })
}

/// Appends a PES header for `payload_len` bytes of data with a PTS and, when
/// different, a DTS (both taken modulo 2^33). PES_packet_length is 0 when the
/// packet would exceed 65535 bytes (allowed for video only).
pub fn write_pes_header(
    stream_id: u8,
    pts: u64,
    dts: Option<u64>,
    payload_len: usize,
    out: &mut Vec<u8>,
) {
    let dts = dts.filter(|&d| d & TIMESTAMP_MASK != pts & TIMESTAMP_MASK);
    let header_data_length: usize = if dts.is_some() { 10 } else { 5 };
    let length = 3 + header_data_length + payload_len;
    let length = if length > usize::from(u16::MAX) {
        0
    } else {
        length as u16
    };
    out.extend_from_slice(&[0, 0, 1, stream_id]);
    out.extend_from_slice(&length.to_be_bytes());
    // '10', not scrambled, no priority, data_alignment_indicator=1.
    out.push(0x84);
    out.push(if dts.is_some() { 0xC0 } else { 0x80 });
    out.push(header_data_length as u8);
    match dts {
        Some(d) => {
            write_timestamp(0b0011, pts, out);
            write_timestamp(0b0001, d, out);
        }
        None => write_timestamp(0b0010, pts, out),
    }
}

/// Unwraps 33-bit timestamps into a continuous `i64` timeline: each value
/// is placed within +-2^32 of the previous one. One instance per program, so
/// all its streams stay on the same timeline across a wrap.
#[derive(Clone, Copy, Debug, Default)]
pub struct TimestampUnwrapper {
    last: Option<(u64, i64)>,
}

impl TimestampUnwrapper {
    pub fn new() -> TimestampUnwrapper {
        TimestampUnwrapper::default()
    }

    /// Maps a 33-bit timestamp to the continuous timeline.
    pub fn unwrap(&mut self, raw: u64) -> i64 {
        let raw = raw & TIMESTAMP_MASK;
        let value = match self.last {
            None => raw as i64,
            Some((last_raw, last_value)) => {
                let diff = raw.wrapping_sub(last_raw) & TIMESTAMP_MASK;
                let diff = if diff >= TIMESTAMP_MODULUS / 2 {
                    diff as i64 - TIMESTAMP_MODULUS as i64
                } else {
                    diff as i64
                };
                last_value.saturating_add(diff)
            }
        };
        self.last = Some((raw, value));
        value
    }

    /// Forgets the reference (a new timeline starts at the next value).
    pub fn reset(&mut self) {
        self.last = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn timestamp_round_trip() {
        for ts in [0u64, 1, 90_000, TIMESTAMP_MASK, 0x1_2345_6789] {
            let mut out = Vec::new();
            write_timestamp(0b0010, ts, &mut out);
            assert_eq!(out[0] >> 4, 0b0010);
            assert_eq!(read_timestamp(out[..5].try_into().unwrap()), ts);
        }
    }

    #[test]
    fn header_round_trip() {
        let mut out = Vec::new();
        write_pes_header(0xE0, 1000, Some(900), 70_000, &mut out);
        let h = parse_pes_header(&out).unwrap();
        assert_eq!(h.stream_id, 0xE0);
        assert_eq!(h.packet_length, 0);
        assert_eq!(h.pts, Some(1000));
        assert_eq!(h.dts, Some(900));
        assert_eq!(h.payload_offset, out.len());

        out.clear();
        write_pes_header(0xC0, 5, Some(5), 100, &mut out);
        let h = parse_pes_header(&out).unwrap();
        assert_eq!(h.packet_length, 108);
        assert_eq!(h.pts, Some(5));
        assert_eq!(h.dts, None);
        assert_eq!(h.payload_offset, 14);
    }

    #[test]
    fn padding_stream_has_no_optional_header() {
        let h = parse_pes_header(&[0, 0, 1, 0xBE, 0, 2, 0xFF, 0xFF]).unwrap();
        assert_eq!(h.payload_offset, 6);
        assert_eq!(h.pts, None);
    }

    #[test]
    fn unwrap_across_wrap() {
        let mut u = TimestampUnwrapper::new();
        assert_eq!(u.unwrap(TIMESTAMP_MASK - 10), (TIMESTAMP_MASK - 10) as i64);
        assert_eq!(u.unwrap(5), TIMESTAMP_MODULUS as i64 + 5);
        // A slightly older timestamp (B-frame PTS, other stream) goes back.
        assert_eq!(u.unwrap(TIMESTAMP_MASK), TIMESTAMP_MASK as i64);
        assert_eq!(u.unwrap(100), TIMESTAMP_MODULUS as i64 + 100);
    }

    proptest! {
        #[test]
        fn parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_pes_header(&data);
        }

        #[test]
        fn unwrap_is_continuous(start in 0u64..TIMESTAMP_MODULUS,
                                steps in proptest::collection::vec(0i64..1_000_000, 1..50)) {
            let mut u = TimestampUnwrapper::new();
            let mut expected = start as i64;
            prop_assert_eq!(u.unwrap(start), expected);
            for s in steps {
                expected += s;
                prop_assert_eq!(u.unwrap(expected as u64 & TIMESTAMP_MASK), expected);
            }
        }
    }
}
