//! CRC-32/MPEG-2 (polynomial 0x04C11DB7, initial value 0xFFFFFFFF, no
//! reflection, no final xor), the checksum that ends every PSI section.
//!
//! Table-driven, table built at compile time. This is not a general CRC
//! library: it knows this one variant only.

const fn build_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u32) << 24;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000_0000 != 0 {
                (crc << 1) ^ 0x04C1_1DB7
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

static TABLE: [u32; 256] = build_table();

/// CRC-32/MPEG-2 of `data`.
pub fn crc32_mpeg2(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in data {
        crc = (crc << 8) ^ TABLE[((crc >> 24) as u8 ^ byte) as usize];
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value() {
        // The catalogue check value for CRC-32/MPEG-2.
        assert_eq!(crc32_mpeg2(b"123456789"), 0x0376_E6E7);
    }

    #[test]
    fn section_with_crc_gives_zero() {
        // A section followed by its big-endian CRC has a CRC of 0.
        let mut data = b"some section bytes".to_vec();
        let crc = crc32_mpeg2(&data);
        data.extend_from_slice(&crc.to_be_bytes());
        assert_eq!(crc32_mpeg2(&data), 0);
    }

    #[test]
    fn empty() {
        assert_eq!(crc32_mpeg2(&[]), 0xFFFF_FFFF);
    }
}
