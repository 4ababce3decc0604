//! A bounded MSB-first bit reader over RBSP data (emulation prevention bytes
//! already removed, see [`crate::codec::nal::rbsp`]), with the Exp-Golomb
//! codes H.264/H.265 use.
//!
//! It is not a writer and does not strip emulation prevention itself. Every
//! read is bounds-checked and returns [`CodecError::Truncated`] past the end.

use super::CodecError;

/// Reads bits most-significant first from a byte slice.
#[derive(Debug, Clone)]
pub struct BitReader<'a> {
    data: &'a [u8],
    /// Position in bits from the start of `data`.
    pos: usize,
}

impl<'a> BitReader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        BitReader { data, pos: 0 }
    }

    /// Bits not read yet.
    pub fn bits_left(&self) -> usize {
        (self.data.len() * 8).saturating_sub(self.pos)
    }

    /// Position in bits from the start.
    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn is_byte_aligned(&self) -> bool {
        self.pos & 7 == 0
    }

    pub fn read_bit(&mut self) -> Result<bool, CodecError> {
        let byte = *self.data.get(self.pos / 8).ok_or(CodecError::Truncated)?;
        let bit = (byte >> (7 - (self.pos % 8))) & 1;
        self.pos += 1;
        Ok(bit == 1)
    }

    /// Reads `n` bits (0..=32) as an unsigned big-endian number.
    pub fn read_bits(&mut self, n: u32) -> Result<u32, CodecError> {
        if n > 32 {
            return Err(CodecError::Invalid("bit count above 32"));
        }
        if (n as usize) > self.bits_left() {
            return Err(CodecError::Truncated);
        }
        let mut value: u64 = 0;
        let mut remaining = n;
        while remaining > 0 {
            let byte_index = self.pos / 8;
            let bit_offset = (self.pos % 8) as u32;
            let byte = u64::from(*self.data.get(byte_index).ok_or(CodecError::Truncated)?);
            let available = 8 - bit_offset;
            let take = available.min(remaining);
            let shifted = (byte >> (available - take)) & ((1u64 << take) - 1);
            value = (value << take) | shifted;
            remaining -= take;
            self.pos += take as usize;
        }
        Ok(value as u32)
    }

    /// Reads 8 bits.
    pub fn read_u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.read_bits(8)? as u8)
    }

    /// Skips `n` bits.
    pub fn skip_bits(&mut self, n: usize) -> Result<(), CodecError> {
        if n > self.bits_left() {
            return Err(CodecError::Truncated);
        }
        self.pos += n;
        Ok(())
    }

    /// Unsigned Exp-Golomb code, ue(v). Values above `u32::MAX - 1` (more
    /// than 31 leading zeros) are rejected as invalid.
    pub fn read_ue(&mut self) -> Result<u32, CodecError> {
        let mut leading_zeros = 0u32;
        while !self.read_bit()? {
            leading_zeros += 1;
            if leading_zeros > 31 {
                return Err(CodecError::Invalid("exp-golomb code too long"));
            }
        }
        if leading_zeros == 0 {
            return Ok(0);
        }
        let suffix = u64::from(self.read_bits(leading_zeros)?);
        let value = (1u64 << leading_zeros) - 1 + suffix;
        u32::try_from(value).map_err(|_| CodecError::Invalid("exp-golomb value too large"))
    }

    /// Signed Exp-Golomb code, se(v).
    pub fn read_se(&mut self) -> Result<i32, CodecError> {
        let k = i64::from(self.read_ue()?);
        let value = if k % 2 == 1 { (k + 1) / 2 } else { -(k / 2) };
        i32::try_from(value).map_err(|_| CodecError::Invalid("exp-golomb value too large"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_bits_across_bytes() {
        let mut r = BitReader::new(&[0b1010_1100, 0b0101_0011]);
        assert!(r.read_bit().unwrap());
        assert_eq!(r.read_bits(3).unwrap(), 0b010);
        assert_eq!(r.read_bits(8).unwrap(), 0b1100_0101);
        assert_eq!(r.bits_left(), 4);
        assert_eq!(r.read_bits(4).unwrap(), 0b0011);
        assert_eq!(r.read_bit(), Err(CodecError::Truncated));
    }

    #[test]
    fn reads_32_bits() {
        let mut r = BitReader::new(&[0xff, 0x00, 0xab, 0xcd, 0x80]);
        assert!(r.read_bit().unwrap());
        assert_eq!(r.read_bits(32).unwrap(), 0xfe01_579b);
        assert_eq!(
            r.read_bits(33),
            Err(CodecError::Invalid("bit count above 32"))
        );
    }

    #[test]
    fn exp_golomb() {
        // 1 | 010 | 011 | 00100 | 00101 -> 0, 1, 2, 3, 4
        let mut r = BitReader::new(&[0b1010_0110, 0b0100_0010, 0b1000_0000]);
        assert_eq!(r.read_ue().unwrap(), 0);
        assert_eq!(r.read_ue().unwrap(), 1);
        assert_eq!(r.read_ue().unwrap(), 2);
        assert_eq!(r.read_ue().unwrap(), 3);
        assert_eq!(r.read_ue().unwrap(), 4);
        // se: 010 -> 1, 011 -> -1, 00100 -> 2, 00101 -> -2
        let mut r = BitReader::new(&[0b0100_1100, 0b1000_0101]);
        assert_eq!(r.read_se().unwrap(), 1);
        assert_eq!(r.read_se().unwrap(), -1);
        assert_eq!(r.read_se().unwrap(), 2);
        assert_eq!(r.read_se().unwrap(), -2);
    }

    #[test]
    fn exp_golomb_limits() {
        // 31 zeros, 1, 31 ones -> 2^32 - 2
        let mut r = BitReader::new(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(r.read_ue().unwrap(), u32::MAX - 1);
        let mut r = BitReader::new(&[0; 8]);
        assert!(r.read_ue().is_err());
        let mut r = BitReader::new(&[0, 0xff]);
        assert_eq!(r.read_ue(), Err(CodecError::Truncated));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..32), ops in proptest::collection::vec(0u8..5, 0..64)) {
            let mut r = BitReader::new(&data);
            for op in ops {
                let _ = match op {
                    0 => r.read_bit().map(u32::from),
                    1 => r.read_bits(u32::from(op) * 7),
                    2 => r.read_ue(),
                    3 => r.read_se().map(|v| v as u32),
                    _ => r.skip_bits(5).map(|_| 0),
                };
            }
        }
    }
}
