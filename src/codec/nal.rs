//! NAL unit framing shared by H.264 and H.265: Annex B byte streams (start
//! codes), length-prefixed ("AVCC"/"HVCC") form, conversion between the two,
//! and removal of emulation prevention bytes.
//!
//! This is framing only: it does not look inside NAL units (see `h264` and
//! `h265` for that). Conversions append into caller-provided buffers.

use bytes::{BufMut, Bytes, BytesMut};

use super::CodecError;

/// Finds the next start code (`00 00 01`) at or after `from`. Returns the
/// index of its first zero byte and the index just past the `01`.
fn find_start_code(data: &[u8], from: usize) -> Option<(usize, usize)> {
    let mut i = from.checked_add(2)?;
    while i < data.len() {
        let b = data[i];
        if b > 1 {
            // No start code can end at i, i+1 or i+2 with this byte at i
            // being neither 0 nor 1 (it would have to be the final 01 or a 00).
            i += 3;
        } else if b == 0 {
            i += 1;
        } else if data[i - 1] == 0 && data[i - 2] == 0 {
            return Some((i - 2, i + 1));
        } else {
            i += 3;
        }
    }
    None
}

/// Strips trailing zero bytes (the first byte of a 4-byte start code, or
/// trailing_zero_8bits) from a unit.
fn trim_trailing_zeros(unit: &[u8]) -> &[u8] {
    let end = unit.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
    &unit[..end]
}

/// Iterator over the NAL units of an Annex B byte stream. See
/// [`annexb_units`].
#[derive(Debug, Clone)]
pub struct AnnexBUnits<'a> {
    data: &'a [u8],
    /// Start of the next unit (just past a start code), if any.
    next: Option<usize>,
}

impl<'a> Iterator for AnnexBUnits<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            let start = self.next?;
            let (end, after) = match find_start_code(self.data, start) {
                Some((sc, after)) => (sc, Some(after)),
                None => (self.data.len(), None),
            };
            self.next = after;
            let unit = trim_trailing_zeros(self.data.get(start..end)?);
            if !unit.is_empty() {
                return Some(unit);
            }
        }
    }
}

/// Splits an Annex B byte stream into NAL units. Start codes (`00 00 01` and
/// `00 00 00 01`) and trailing zero bytes are removed, empty units skipped,
/// and bytes before the first start code ignored.
pub fn annexb_units(data: &[u8]) -> AnnexBUnits<'_> {
    AnnexBUnits {
        data,
        next: find_start_code(data, 0).map(|(_, after)| after),
    }
}

/// Iterator over length-prefixed NAL units. See [`length_prefixed_units`].
#[derive(Debug, Clone)]
pub struct LengthPrefixedUnits<'a> {
    rest: &'a [u8],
    length_size: u8,
    failed: bool,
}

impl<'a> Iterator for LengthPrefixedUnits<'a> {
    type Item = Result<&'a [u8], CodecError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed || self.rest.is_empty() {
                return None;
            }
            match split_unit(self.rest, self.length_size) {
                Ok((unit, rest)) => {
                    self.rest = rest;
                    if !unit.is_empty() {
                        return Some(Ok(unit));
                    }
                }
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Splits one unit off the front of length-prefixed data.
fn split_unit(data: &[u8], length_size: u8) -> Result<(&[u8], &[u8]), CodecError> {
    if !(1..=4).contains(&length_size) {
        return Err(CodecError::Invalid("NAL length size must be 1 to 4"));
    }
    let size = usize::from(length_size);
    let header = data.get(..size).ok_or(CodecError::Truncated)?;
    let len = header
        .iter()
        .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
    let body = &data[size..];
    if len > body.len() {
        return Err(CodecError::Truncated);
    }
    Ok(body.split_at(len))
}

/// Iterates over NAL units each prefixed by a big-endian length of
/// `length_size` (1 to 4) bytes. Empty units are skipped. A truncated unit or
/// a bad `length_size` yields one error and ends the iteration.
pub fn length_prefixed_units(data: &[u8], length_size: u8) -> LengthPrefixedUnits<'_> {
    LengthPrefixedUnits {
        rest: data,
        length_size,
        failed: false,
    }
}

/// Appends one unit in 4-byte-length form.
fn push_length_prefixed(unit: &[u8], out: &mut Vec<u8>) {
    // A unit longer than 4 GiB cannot occur in a bounded input buffer; skip
    // it rather than write a wrong length.
    if let Ok(len) = u32::try_from(unit.len()) {
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(unit);
    }
}

/// Converts an Annex B byte stream to 4-byte-length-prefixed form, appending
/// to `out`.
pub fn annexb_to_length_prefixed(data: &[u8], out: &mut Vec<u8>) {
    for unit in annexb_units(data) {
        push_length_prefixed(unit, out);
    }
}

/// Like [`annexb_to_length_prefixed`] but keeps only the units for which
/// `keep` returns true (e.g. to drop access unit delimiters).
pub fn annexb_to_length_prefixed_filtered(
    data: &[u8],
    out: &mut Vec<u8>,
    mut keep: impl FnMut(&[u8]) -> bool,
) {
    for unit in annexb_units(data) {
        if keep(unit) {
            push_length_prefixed(unit, out);
        }
    }
}

/// Converts 4-byte-length-prefixed units to Annex B (`00 00 00 01` before
/// each unit), appending to `out`. On error `out` is left as it was.
pub fn length_prefixed_to_annexb(data: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
    let original = out.len();
    for unit in length_prefixed_units(data, 4) {
        match unit {
            Ok(unit) => {
                out.extend_from_slice(&[0, 0, 0, 1]);
                out.extend_from_slice(unit);
            }
            Err(e) => {
                out.truncate(original);
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Checks that `data` is a well-formed sequence of length-prefixed units.
pub fn validate_length_prefixed(data: &[u8], length_size: u8) -> Result<(), CodecError> {
    let mut rest = data;
    while !rest.is_empty() {
        rest = split_unit(rest, length_size)?.1;
    }
    Ok(())
}

/// Rewrites length-prefixed units with 1-, 2-, 3- or 4-byte lengths into the
/// 4-byte form. Empty units are dropped.
pub fn normalize_length_size(data: &[u8], length_size: u8) -> Result<Bytes, CodecError> {
    validate_length_prefixed(data, length_size)?;
    // Each unit grows by at most 3 bytes and takes at least 2 input bytes
    // (non-empty), so the output is bounded by 2.5x the input.
    let mut out = BytesMut::with_capacity(data.len() + data.len() * 3 / 2);
    for unit in length_prefixed_units(data, length_size) {
        let unit = unit?;
        if let Ok(len) = u32::try_from(unit.len()) {
            out.put_u32(len);
            out.put_slice(unit);
        }
    }
    Ok(out.freeze())
}

/// Like [`normalize_length_size`], but returns `data` itself (no copy) when
/// `length_size` is already 4 and the data is well formed.
pub fn normalize_length_size_bytes(data: Bytes, length_size: u8) -> Result<Bytes, CodecError> {
    if length_size == 4 {
        validate_length_prefixed(&data, 4)?;
        Ok(data)
    } else {
        normalize_length_size(&data, length_size)
    }
}

/// Removes emulation prevention bytes (the `03` in `00 00 03`) from a NAL
/// unit, giving its RBSP.
pub fn rbsp(nal_payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(nal_payload.len());
    rbsp_into(nal_payload, &mut out);
    out
}

/// Like [`rbsp`] but appends to a reusable buffer.
pub fn rbsp_into(nal_payload: &[u8], out: &mut Vec<u8>) {
    let mut zeros = 0usize;
    for &b in nal_payload {
        if zeros >= 2 && b == 3 {
            zeros = 0;
            continue;
        }
        if b == 0 {
            zeros += 1;
        } else {
            zeros = 0;
        }
        out.push(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn splits_annexb() {
        let data = [
            0, 0, 0, 1, 0x67, 0xaa, 0, 0, 1, 0x68, 0xbb, 0, 0, 0, 0, 1, 0x65, 1, 2, 3, 0, 0, 1,
        ];
        let units: Vec<&[u8]> = annexb_units(&data).collect();
        assert_eq!(
            units,
            vec![&[0x67, 0xaa][..], &[0x68, 0xbb][..], &[0x65, 1, 2, 3][..]]
        );
    }

    #[test]
    fn annexb_ignores_leading_garbage_and_empty_units() {
        let data = [9, 9, 0, 0, 1, 0, 0, 1, 0x41, 0, 0, 1];
        let units: Vec<&[u8]> = annexb_units(&data).collect();
        assert_eq!(units, vec![&[0x41][..]]);
        assert_eq!(annexb_units(&[0x41, 1, 2]).count(), 0);
        assert_eq!(annexb_units(&[]).count(), 0);
    }

    #[test]
    fn start_code_scan_handles_runs_of_zeros() {
        // 00 00 00 00 01 and a 01 right after a non-zero.
        let data = [0, 0, 0, 0, 1, 0x09, 0xf0, 1, 0, 0, 0, 1, 0x41];
        let units: Vec<&[u8]> = annexb_units(&data).collect();
        assert_eq!(units, vec![&[0x09, 0xf0, 1][..], &[0x41][..]]);
    }

    #[test]
    fn length_prefixed_iteration() {
        let data = [0, 2, 0x67, 1, 0, 0, 0, 1, 0x68];
        let units: Vec<_> = length_prefixed_units(&data, 2).collect();
        assert_eq!(units, vec![Ok(&[0x67, 1][..]), Ok(&[0x68][..])]);
        let bad: Vec<_> = length_prefixed_units(&[0, 5, 1], 2).collect();
        assert_eq!(bad, vec![Err(CodecError::Truncated)]);
        let bad: Vec<_> = length_prefixed_units(&[1], 5).collect();
        assert!(matches!(bad[..], [Err(CodecError::Invalid(_))]));
    }

    #[test]
    fn conversions() {
        let annexb = [0, 0, 0, 1, 0x67, 0xaa, 0, 0, 1, 0x65, 0xbb, 0xcc];
        let mut lp = Vec::new();
        annexb_to_length_prefixed(&annexb, &mut lp);
        assert_eq!(lp, [0, 0, 0, 2, 0x67, 0xaa, 0, 0, 0, 3, 0x65, 0xbb, 0xcc]);
        let mut back = vec![0xee];
        length_prefixed_to_annexb(&lp, &mut back).unwrap();
        assert_eq!(
            back,
            [0xee, 0, 0, 0, 1, 0x67, 0xaa, 0, 0, 0, 1, 0x65, 0xbb, 0xcc]
        );
        let mut out = vec![7];
        assert_eq!(
            length_prefixed_to_annexb(&[0, 0, 0, 1, 5, 0, 0, 0, 9], &mut out),
            Err(CodecError::Truncated)
        );
        assert_eq!(out, [7]);
        let mut filtered = Vec::new();
        annexb_to_length_prefixed_filtered(&annexb, &mut filtered, |u| u[0] != 0x67);
        assert_eq!(filtered, [0, 0, 0, 3, 0x65, 0xbb, 0xcc]);
    }

    #[test]
    fn normalizes_length_sizes() {
        let two = [0, 2, 0x67, 1, 0, 1, 0x68];
        let four = normalize_length_size(&two, 2).unwrap();
        assert_eq!(&four[..], &[0, 0, 0, 2, 0x67, 1, 0, 0, 0, 1, 0x68]);
        let one = [2, 0x67, 1, 1, 0x68];
        assert_eq!(normalize_length_size(&one, 1).unwrap(), four);
        let three = [0, 0, 2, 0x67, 1, 0, 0, 1, 0x68];
        assert_eq!(normalize_length_size(&three, 3).unwrap(), four);
        let same = normalize_length_size_bytes(four.clone(), 4).unwrap();
        assert_eq!(same.as_ptr(), four.as_ptr());
        assert_eq!(
            normalize_length_size_bytes(Bytes::from_static(&[0, 0, 0, 9, 1]), 4),
            Err(CodecError::Truncated)
        );
        assert!(normalize_length_size(&two, 0).is_err());
    }

    #[test]
    fn removes_emulation_prevention() {
        assert_eq!(
            rbsp(&[0x67, 0, 0, 3, 1, 0, 0, 3, 0, 0, 3]),
            [0x67, 0, 0, 1, 0, 0, 0, 0]
        );
        // 00 00 03 03: only the first 03 is an emulation prevention byte.
        assert_eq!(rbsp(&[0, 0, 3, 3]), [0, 0, 3]);
        assert_eq!(rbsp(&[0, 3, 0, 0]), [0, 3, 0, 0]);
    }

    fn unit_strategy() -> impl Strategy<Value = Vec<u8>> {
        // Units as encoders produce them: first byte non-zero, no start code
        // emulation inside (no 00 00 0x with x <= 3), last byte non-zero.
        proptest::collection::vec(any::<u8>(), 1..40).prop_map(|mut u| {
            u[0] |= 0x01;
            let mut zeros = 0;
            for b in u.iter_mut() {
                if zeros >= 2 && *b <= 3 {
                    *b = 4;
                }
                zeros = if *b == 0 { zeros + 1 } else { 0 };
            }
            if let Some(last) = u.last_mut() {
                if *last == 0 {
                    *last = 0x80;
                }
            }
            u
        })
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
            crate::codec::fuzz::fuzz_nal(&data);
            let _ = normalize_length_size_bytes(Bytes::from(data.clone()), 4);
        }

        #[test]
        fn annexb_length_prefixed_round_trip(
            units in proptest::collection::vec(unit_strategy(), 0..8),
            long_codes in proptest::collection::vec(any::<bool>(), 8),
        ) {
            let mut annexb = Vec::new();
            for (i, u) in units.iter().enumerate() {
                if long_codes[i] {
                    annexb.push(0);
                }
                annexb.extend_from_slice(&[0, 0, 1]);
                annexb.extend_from_slice(u);
            }
            let parsed: Vec<&[u8]> = annexb_units(&annexb).collect();
            let expected: Vec<&[u8]> = units.iter().map(|u| &u[..]).collect();
            prop_assert_eq!(&parsed, &expected);

            let mut lp = Vec::new();
            annexb_to_length_prefixed(&annexb, &mut lp);
            let lp_units: Vec<&[u8]> = length_prefixed_units(&lp, 4).map(|u| u.unwrap()).collect();
            prop_assert_eq!(&lp_units, &expected);

            let mut back = Vec::new();
            length_prefixed_to_annexb(&lp, &mut back).unwrap();
            let mut lp2 = Vec::new();
            annexb_to_length_prefixed(&back, &mut lp2);
            prop_assert_eq!(&lp, &lp2);
            let normalized = normalize_length_size(&lp, 4).unwrap();
            prop_assert_eq!(&normalized[..], &lp[..]);
        }

        #[test]
        fn rbsp_inverts_emulation_prevention(payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            // Insert emulation prevention the way an encoder does, then strip it.
            let mut escaped = Vec::new();
            let mut zeros = 0;
            for &b in &payload {
                if zeros >= 2 && b <= 3 {
                    escaped.push(3);
                    zeros = 0;
                }
                escaped.push(b);
                zeros = if b == 0 { zeros + 1 } else { 0 };
            }
            prop_assert_eq!(rbsp(&escaped), payload);
        }
    }
}
