//! Opus in MPEG-TS (ETSI TS 102 366 style mapping, as ffmpeg writes it): the
//! `opus_control_header` that precedes every Opus packet in a PES (prefix
//! 0x3FF, trim flags, au_size as 0xFF-continued bytes), and the packet
//! duration read from the Opus TOC byte (RFC 6716, 3.1) so several packets
//! in one PES get their own timestamps.
//!
//! This is framing only; it never decodes audio. Trim values are skipped.

/// Opus always runs at 48 kHz in the container's view.
pub const OPUS_SAMPLE_RATE: u32 = 48_000;

/// Largest packet the demuxer accepts (RFC 6716 allows at most 1275 bytes per
/// frame and 120 ms per packet; this leaves room for multistream packets).
pub const MAX_OPUS_PACKET: usize = 16 * 1024;

/// Appends the control header for a packet of `len` bytes (no trims, no
/// extension).
pub fn write_control_header(len: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(&[0x7F, 0xE0]);
    let mut rest = len;
    while rest >= 255 {
        out.push(0xFF);
        rest -= 255;
    }
    out.push(rest as u8);
}

/// Iterator over the Opus packets of one PES payload (control headers
/// stripped). Stops at the first malformed or truncated header.
pub struct OpusPackets<'a> {
    rest: &'a [u8],
}

/// Splits a PES payload into Opus packets.
pub fn opus_packets(pes_payload: &[u8]) -> OpusPackets<'_> {
    OpusPackets { rest: pes_payload }
}

impl<'a> Iterator for OpusPackets<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let data = self.rest;
        let (&b0, &b1) = (data.first()?, data.get(1)?);
        if b0 != 0x7F || b1 & 0xE0 != 0xE0 {
            self.rest = &[];
            return None;
        }
        let start_trim = b1 & 0x10 != 0;
        let end_trim = b1 & 0x08 != 0;
        let extension = b1 & 0x04 != 0;
        let mut pos = 2usize;
        let mut size = 0usize;
        loop {
            let Some(&b) = data.get(pos) else {
                self.rest = &[];
                return None;
            };
            pos += 1;
            size += usize::from(b);
            if b != 0xFF {
                break;
            }
            if size > MAX_OPUS_PACKET {
                self.rest = &[];
                return None;
            }
        }
        if start_trim {
            pos += 2;
        }
        if end_trim {
            pos += 2;
        }
        if extension {
            let Some(&len) = data.get(pos) else {
                self.rest = &[];
                return None;
            };
            pos += 1 + usize::from(len);
        }
        let Some(packet) = data.get(pos..pos + size) else {
            self.rest = &[];
            return None;
        };
        self.rest = &data[pos + size..];
        Some(packet)
    }
}

/// Duration of an Opus packet in 48 kHz samples, from its TOC byte and frame
/// count. None for an empty or malformed packet.
pub fn packet_samples(packet: &[u8]) -> Option<u32> {
    let toc = *packet.first()?;
    let config = toc >> 3;
    // Frame size in 1/400 s units of 48 kHz samples: 2.5 ms = 120 samples.
    let frame = match config {
        0..=11 => [480, 960, 1920, 2880][usize::from(config & 3)],
        12..=15 => [480, 960][usize::from(config & 1)],
        _ => [120, 240, 480, 960][usize::from(config & 3)],
    };
    let count = match toc & 3 {
        0 => 1,
        1 | 2 => 2,
        _ => u32::from(*packet.get(1)? & 0x3F),
    };
    if count == 0 {
        return None;
    }
    Some(frame * count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn control_header_round_trip() {
        for len in [0usize, 1, 254, 255, 256, 600, 1275] {
            let packet: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut pes = Vec::new();
            write_control_header(len, &mut pes);
            pes.extend_from_slice(&packet);
            write_control_header(3, &mut pes);
            pes.extend_from_slice(&[0xF8, 1, 2]);
            let got: Vec<&[u8]> = opus_packets(&pes).collect();
            assert_eq!(got, vec![&packet[..], &[0xF8, 1, 2][..]]);
        }
    }

    #[test]
    fn control_header_with_trims_and_extension() {
        let pes = [0x7F, 0xFC, 2, 0, 10, 0, 20, 1, 0xAA, 0xF8, 0x01];
        let got: Vec<&[u8]> = opus_packets(&pes).collect();
        assert_eq!(got, vec![&[0xF8, 0x01][..]]);
    }

    #[test]
    fn durations() {
        // CELT 20 ms, one frame: config 31 (0xF8).
        assert_eq!(packet_samples(&[0xF8]), Some(960));
        // SILK 60 ms, two frames.
        assert_eq!(packet_samples(&[(3 << 3) | 1]), Some(5760));
        // CELT 2.5 ms, code 3 with 4 frames.
        assert_eq!(packet_samples(&[(16 << 3) | 3, 4]), Some(480));
        assert_eq!(packet_samples(&[(16 << 3) | 3, 0]), None);
        assert_eq!(packet_samples(&[]), None);
    }

    proptest! {
        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            for p in opus_packets(&data) {
                let _ = packet_samples(p);
            }
        }
    }
}
