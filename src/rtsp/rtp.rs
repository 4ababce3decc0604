//! RTP (RFC 3550) packets and the depacketizers of the codecs a pull
//! takes: H.264 (RFC 6184: single NAL, STAP-A, FU-A), H.265 (RFC 7798:
//! single NAL, AP, FU; no DONL) and AAC (RFC 3640 `mpeg4-generic`,
//! AAC-hbr/lbr, fragmented AUs). Out come whole access units with their
//! RTP timestamps; video in kiln's canonical length-prefixed form.
//!
//! Bounded: an access unit over [`MAX_ACCESS_UNIT`] bytes is dropped; a
//! sequence gap drops the access unit it damaged. Never panics on input.

/// Largest access unit kept (a 4K keyframe fits many times over).
pub const MAX_ACCESS_UNIT: usize = 8 * 1024 * 1024;

/// One RTP packet, borrowed from the datagram or interleaved frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtpPacket<'a> {
    pub payload_type: u8,
    pub marker: bool,
    pub seq: u16,
    pub timestamp: u32,
    pub ssrc: u32,
    pub payload: &'a [u8],
}

impl<'a> RtpPacket<'a> {
    /// Parses an RTP packet (version 2; CSRCs, header extension and
    /// padding skipped). `None` for anything else.
    pub fn parse(data: &'a [u8]) -> Option<RtpPacket<'a>> {
        if data.len() < 12 || data[0] >> 6 != 2 {
            return None;
        }
        let csrc = usize::from(data[0] & 0x0F);
        let mut start = 12 + csrc * 4;
        if data[0] & 0x10 != 0 {
            let ext = data.get(start..start + 4)?;
            start += 4 + usize::from(u16::from_be_bytes([ext[2], ext[3]])) * 4;
        }
        let mut end = data.len();
        if data[0] & 0x20 != 0 {
            let pad = usize::from(*data.last()?);
            end = end.checked_sub(pad)?;
        }
        let payload = data.get(start..end)?;
        Some(RtpPacket {
            payload_type: data[1] & 0x7F,
            marker: data[1] & 0x80 != 0,
            seq: u16::from_be_bytes([data[2], data[3]]),
            timestamp: u32::from_be_bytes([data[4], data[5], data[6], data[7]]),
            ssrc: u32::from_be_bytes([data[8], data[9], data[10], data[11]]),
            payload,
        })
    }
}

/// One access unit out of a depacketizer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessUnit {
    /// RTP timestamp (the track's clock).
    pub timestamp: u32,
    /// Video: length-prefixed NAL units (no AUD). AAC: one raw AU.
    pub data: Vec<u8>,
    pub keyframe: bool,
}

/// Parameter sets seen in band (the latest of each kind).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParamSets {
    pub vps: Option<Vec<u8>>,
    pub sps: Option<Vec<u8>>,
    pub pps: Option<Vec<u8>>,
}

/// H.264 or H.265 access units out of RTP.
#[derive(Debug)]
pub struct NalDepacketizer {
    hevc: bool,
    current: Option<u32>,
    au: Vec<u8>,
    keyframe: bool,
    picture: bool,
    /// A fragmented NAL unit being put back together.
    fragment: Option<Vec<u8>>,
    /// The access unit lost a packet: it is dropped.
    damaged: bool,
    last_seq: Option<u16>,
    pub params: ParamSets,
    /// Access units dropped (damaged or too large).
    pub dropped: u64,
}

impl NalDepacketizer {
    pub fn new(hevc: bool) -> Self {
        NalDepacketizer {
            hevc,
            current: None,
            au: Vec::new(),
            keyframe: false,
            picture: false,
            fragment: None,
            damaged: false,
            last_seq: None,
            params: ParamSets::default(),
            dropped: 0,
        }
    }

    /// Takes one packet; a finished access unit goes to `out`.
    pub fn push(&mut self, p: &RtpPacket<'_>, out: &mut Vec<AccessUnit>) {
        if let Some(last) = self.last_seq {
            if p.seq != last.wrapping_add(1) {
                self.damaged = true;
                self.fragment = None;
            }
        }
        self.last_seq = Some(p.seq);
        if self.current.is_some_and(|ts| ts != p.timestamp) {
            self.finish(out);
        }
        self.current = Some(p.timestamp);
        if self.hevc {
            self.h265_payload(p.payload);
        } else {
            self.h264_payload(p.payload);
        }
        if p.marker {
            self.finish(out);
        }
    }

    fn h264_payload(&mut self, p: &[u8]) {
        let Some(&first) = p.first() else { return };
        match first & 0x1F {
            1..=23 => self.add_nal(p),
            24 => self.aggregate(&p[1..]),
            28 => {
                let Some(&header) = p.get(1) else { return };
                let data = &p[2..];
                self.fragment_part(header & 0x80 != 0, header & 0x40 != 0, data, || {
                    vec![(first & 0xE0) | (header & 0x1F)]
                });
            }
            _ => {} // STAP-B, MTAP, FU-B: not in packetization-mode 1
        }
    }

    fn h265_payload(&mut self, p: &[u8]) {
        if p.len() < 2 {
            return;
        }
        match (p[0] >> 1) & 0x3F {
            48 => self.aggregate(&p[2..]),
            49 => {
                let Some(&header) = p.get(2) else { return };
                let (b0, b1) = (p[0], p[1]);
                self.fragment_part(header & 0x80 != 0, header & 0x40 != 0, &p[3..], || {
                    vec![(b0 & 0x81) | ((header & 0x3F) << 1), b1]
                });
            }
            50 => {} // PACI
            _ => self.add_nal(p),
        }
    }

    /// STAP-A / AP: 16-bit sizes, each followed by a NAL unit.
    fn aggregate(&mut self, mut data: &[u8]) {
        while data.len() >= 2 {
            let size = usize::from(u16::from_be_bytes([data[0], data[1]]));
            let Some(nal) = data.get(2..2 + size) else {
                self.damaged = true;
                return;
            };
            self.add_nal(nal);
            data = &data[2 + size..];
        }
    }

    fn fragment_part(
        &mut self,
        start: bool,
        end: bool,
        data: &[u8],
        header: impl FnOnce() -> Vec<u8>,
    ) {
        if start {
            let mut nal = header();
            nal.extend_from_slice(data);
            self.fragment = Some(nal);
        } else if let Some(nal) = self.fragment.as_mut() {
            if nal.len() + data.len() > MAX_ACCESS_UNIT {
                self.fragment = None;
                self.damaged = true;
                return;
            }
            nal.extend_from_slice(data);
        } else {
            // A middle or end without its start (lost).
            self.damaged = true;
            return;
        }
        if end {
            if let Some(nal) = self.fragment.take() {
                self.add_nal(&nal);
            }
        }
    }

    fn add_nal(&mut self, nal: &[u8]) {
        if nal.is_empty() {
            return;
        }
        if self.au.len() + nal.len() + 4 > MAX_ACCESS_UNIT {
            self.damaged = true;
            return;
        }
        if self.hevc {
            let t = (nal[0] >> 1) & 0x3F;
            match t {
                35 => return, // AUD
                32 => self.params.vps = Some(nal.to_vec()),
                33 => self.params.sps = Some(nal.to_vec()),
                34 => self.params.pps = Some(nal.to_vec()),
                _ => {}
            }
            if t <= 31 {
                self.picture = true;
            }
            if (16..=23).contains(&t) {
                self.keyframe = true;
            }
        } else {
            let t = nal[0] & 0x1F;
            match t {
                9 => return, // AUD
                7 => self.params.sps = Some(nal.to_vec()),
                8 => self.params.pps = Some(nal.to_vec()),
                _ => {}
            }
            if (1..=5).contains(&t) {
                self.picture = true;
            }
            if t == 5 {
                self.keyframe = true;
            }
        }
        self.au.extend_from_slice(&(nal.len() as u32).to_be_bytes());
        self.au.extend_from_slice(nal);
    }

    fn finish(&mut self, out: &mut Vec<AccessUnit>) {
        let data = std::mem::take(&mut self.au);
        if let Some(ts) = self.current.take() {
            if self.damaged {
                self.dropped += 1;
            } else if self.picture {
                out.push(AccessUnit {
                    timestamp: ts,
                    data,
                    keyframe: self.keyframe,
                });
            }
        }
        self.keyframe = false;
        self.picture = false;
        self.damaged = false;
        self.fragment = None;
    }
}

/// AAC access units out of RFC 3640 packets.
#[derive(Debug)]
pub struct AacDepacketizer {
    size_length: u32,
    index_length: u32,
    index_delta_length: u32,
    /// A fragmented AU: its timestamp, expected size and data so far.
    fragment: Option<(u32, usize, Vec<u8>)>,
    last_seq: Option<u16>,
    /// Samples per AU (1024 for AAC-LC).
    frame_samples: u32,
    pub dropped: u64,
}

impl AacDepacketizer {
    /// From the `fmtp` lengths (AAC-hbr: 13, 3, 3).
    pub fn new(size_length: u32, index_length: u32, index_delta_length: u32) -> Self {
        AacDepacketizer {
            size_length: size_length.min(32),
            index_length: index_length.min(32),
            index_delta_length: index_delta_length.min(32),
            fragment: None,
            last_seq: None,
            frame_samples: 1024,
            dropped: 0,
        }
    }

    pub fn push(&mut self, p: &RtpPacket<'_>, out: &mut Vec<AccessUnit>) {
        if let Some(last) = self.last_seq {
            if p.seq != last.wrapping_add(1) && self.fragment.take().is_some() {
                self.dropped += 1;
            }
        }
        self.last_seq = Some(p.seq);
        if self.size_length == 0 || p.payload.len() < 2 {
            return;
        }
        let header_bits = usize::from(u16::from_be_bytes([p.payload[0], p.payload[1]]));
        let header_bytes = header_bits.div_ceil(8);
        let Some(headers) = p.payload.get(2..2 + header_bytes) else {
            return;
        };
        let mut data = &p.payload[2 + header_bytes..];
        let mut bits = BitReader::new(headers, header_bits);
        let mut sizes: Vec<usize> = Vec::new();
        while sizes.len() < 64 {
            let index_bits = if sizes.is_empty() {
                self.index_length
            } else {
                self.index_delta_length
            };
            let Some(size) = bits.read(self.size_length) else {
                break;
            };
            if bits.read(index_bits).is_none() {
                break;
            }
            sizes.push(size as usize);
        }
        if let Some((ts, size, mut buf)) = self.fragment.take() {
            // The rest of a fragmented AU (same timestamp, one header).
            if ts == p.timestamp && sizes.len() == 1 && buf.len() + data.len() <= size {
                buf.extend_from_slice(data);
                if buf.len() == size {
                    out.push(AccessUnit {
                        timestamp: ts,
                        data: buf,
                        keyframe: true,
                    });
                } else {
                    self.fragment = Some((ts, size, buf));
                }
                return;
            }
            self.dropped += 1;
        }
        for (i, &size) in sizes.iter().enumerate() {
            let ts = p
                .timestamp
                .wrapping_add(self.frame_samples.wrapping_mul(i as u32));
            if size <= data.len() {
                out.push(AccessUnit {
                    timestamp: ts,
                    data: data[..size].to_vec(),
                    keyframe: true,
                });
                data = &data[size..];
            } else if sizes.len() == 1 && size <= MAX_ACCESS_UNIT {
                self.fragment = Some((ts, size, data.to_vec()));
                return;
            } else {
                self.dropped += 1;
                return;
            }
        }
    }
}

/// MSB-first bits of the AU header section.
struct BitReader<'a> {
    data: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> BitReader<'a> {
    fn new(data: &'a [u8], bits: usize) -> Self {
        BitReader {
            data,
            pos: 0,
            end: bits.min(data.len() * 8),
        }
    }

    fn read(&mut self, n: u32) -> Option<u32> {
        let n = n as usize;
        if self.pos + n > self.end {
            return None;
        }
        let mut v: u64 = 0;
        for _ in 0..n {
            let byte = self.data[self.pos / 8];
            v = (v << 1) | u64::from((byte >> (7 - self.pos % 8)) & 1);
            self.pos += 1;
        }
        Some(v as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtp(seq: u16, ts: u32, marker: bool, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0x80, if marker { 0xE0 } else { 0x60 }];
        v.extend_from_slice(&seq.to_be_bytes());
        v.extend_from_slice(&ts.to_be_bytes());
        v.extend_from_slice(&[0, 0, 0, 1]);
        v.extend_from_slice(payload);
        v
    }

    fn feed(d: &mut NalDepacketizer, packets: &[Vec<u8>]) -> Vec<AccessUnit> {
        let mut out = Vec::new();
        for p in packets {
            d.push(&RtpPacket::parse(p).unwrap(), &mut out);
        }
        out
    }

    #[test]
    fn header_fields_extension_and_padding() {
        let mut p = rtp(7, 9000, true, &[]);
        p[0] |= 0x10 | 0x20 | 0x01; // extension, padding, one CSRC
        p.extend_from_slice(&[0, 0, 0, 2]); // CSRC
        p.extend_from_slice(&[0xBE, 0xDE, 0, 1, 1, 2, 3, 4]); // extension, 1 word
        p.extend_from_slice(&[0x65, 0xAA, 0, 0, 3]); // payload + 3 bytes padding
        let r = RtpPacket::parse(&p).unwrap();
        assert_eq!(
            (r.seq, r.timestamp, r.marker, r.payload_type),
            (7, 9000, true, 96)
        );
        assert_eq!(r.payload, &[0x65, 0xAA]);
        assert!(RtpPacket::parse(&[0x80; 11]).is_none());
        assert!(RtpPacket::parse(&[0x40; 12]).is_none());
        let mut bad_pad = rtp(1, 1, false, &[9]);
        bad_pad[0] |= 0x20;
        assert!(RtpPacket::parse(&bad_pad).is_none());
    }

    #[test]
    fn h264_single_stap_and_fu() {
        let mut d = NalDepacketizer::new(false);
        let sps = [0x67, 1, 2];
        let pps = [0x68, 3];
        let mut stap = vec![24];
        for n in [&sps[..], &pps[..]] {
            stap.extend_from_slice(&(n.len() as u16).to_be_bytes());
            stap.extend_from_slice(n);
        }
        let out = feed(
            &mut d,
            &[
                rtp(1, 100, false, &stap),
                rtp(2, 100, false, &[0x7C, 0x85, 0xA0]), // FU-A start, IDR
                rtp(3, 100, false, &[0x7C, 0x05, 0xA1]),
                rtp(4, 100, true, &[0x7C, 0x45, 0xA2]), // end
                rtp(5, 200, true, &[0x41, 0xB0]),       // P slice
            ],
        );
        assert_eq!(out.len(), 2);
        assert!(out[0].keyframe);
        assert_eq!(
            out[0].data,
            [
                &[0, 0, 0, 3, 0x67, 1, 2, 0, 0, 0, 2, 0x68, 3][..],
                &[0, 0, 0, 4, 0x65, 0xA0, 0xA1, 0xA2]
            ]
            .concat()
        );
        assert_eq!(out[1].data, [0, 0, 0, 2, 0x41, 0xB0]);
        assert!(!out[1].keyframe);
        assert_eq!(d.params.sps.as_deref(), Some(&sps[..]));
        assert_eq!(d.params.pps.as_deref(), Some(&pps[..]));
    }

    #[test]
    fn h264_loss_drops_only_the_damaged_access_unit() {
        let mut d = NalDepacketizer::new(false);
        let out = feed(
            &mut d,
            &[
                rtp(1, 100, false, &[0x7C, 0x85, 1]),
                // seq 2 lost
                rtp(3, 100, true, &[0x7C, 0x45, 3]),
                rtp(4, 200, true, &[0x41, 9]),
            ],
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].timestamp, 200);
        assert_eq!(d.dropped, 1);
        // Timestamp change without a marker also ends an AU.
        let out = feed(
            &mut d,
            &[
                rtp(5, 300, false, &[0x41, 1]),
                rtp(6, 400, true, &[0x41, 2]),
            ],
        );
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn h265_ap_and_fu() {
        let mut d = NalDepacketizer::new(true);
        let vps = [0x40, 0x01, 7];
        let sps = [0x42, 0x01, 8];
        let mut ap = vec![48 << 1, 1];
        for n in [&vps[..], &sps[..]] {
            ap.extend_from_slice(&(n.len() as u16).to_be_bytes());
            ap.extend_from_slice(n);
        }
        // IDR_W_RADL (19) in an FU: header type 49.
        let fu_start = [49 << 1, 1, 0x80 | 19, 0xAA];
        let fu_end = [49 << 1, 1, 0x40 | 19, 0xBB];
        let out = feed(
            &mut d,
            &[
                rtp(1, 10, false, &ap),
                rtp(2, 10, false, &[0x44, 0x01, 9]), // PPS
                rtp(3, 10, false, &fu_start),
                rtp(4, 10, true, &fu_end),
            ],
        );
        assert_eq!(out.len(), 1);
        assert!(out[0].keyframe);
        let idr = [19 << 1, 1, 0xAA, 0xBB];
        assert!(out[0].data.ends_with(&idr));
        assert_eq!(d.params.vps.as_deref(), Some(&vps[..]));
        assert_eq!(d.params.pps.as_deref(), Some(&[0x44, 0x01, 9][..]));
    }

    #[test]
    fn aac_hbr_several_aus_and_fragments() {
        let mut d = AacDepacketizer::new(13, 3, 3);
        // Two AUs of 3 and 2 bytes: headers 16 bits each.
        let mut p = vec![0, 32];
        p.extend_from_slice(&((3u16 << 3).to_be_bytes()));
        p.extend_from_slice(&((2u16 << 3).to_be_bytes()));
        p.extend_from_slice(&[1, 2, 3, 4, 5]);
        let mut out = Vec::new();
        d.push(
            &RtpPacket::parse(&rtp(1, 1000, true, &p)).unwrap(),
            &mut out,
        );
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].data, [1, 2, 3]);
        assert_eq!(out[1].data, [4, 5]);
        assert_eq!(out[1].timestamp, 2024);
        // One AU of 6 bytes in two packets.
        let mut a = vec![0, 16];
        a.extend_from_slice(&((6u16 << 3).to_be_bytes()));
        let mut first = a.clone();
        first.extend_from_slice(&[1, 2, 3, 4]);
        let mut second = a;
        second.extend_from_slice(&[5, 6]);
        out.clear();
        d.push(
            &RtpPacket::parse(&rtp(2, 3048, false, &first)).unwrap(),
            &mut out,
        );
        assert!(out.is_empty());
        d.push(
            &RtpPacket::parse(&rtp(3, 3048, true, &second)).unwrap(),
            &mut out,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].data, [1, 2, 3, 4, 5, 6]);
        // Garbage never panics.
        for junk in [&[0xFF, 0xFF][..], &[0, 200, 1], &[0, 0], &[]] {
            d.push(&RtpPacket::parse(&rtp(9, 1, true, junk)).unwrap(), &mut out);
        }
    }
}
