//! MPEG-2 Transport Stream (ISO/IEC 13818-1) for kiln: a demuxer that turns
//! TS bytes (UDP datagrams, SRT payloads, any split) into tracks and frames,
//! and a muxer that turns frames into 188-byte packets for push outputs.
//!
//! Sans-IO: bytes in, events / bytes out. Nothing here touches a socket, reads
//! the clock, logs or spawns. Timing comes only from the stream's own
//! PTS/DTS. This is not a general TS toolkit: one program, the codecs of
//! [`crate::media::Codec`], PAT/PMT only (no SI tables, no scrambling).

pub mod crc;
pub mod demux;
pub mod mux;
pub mod opus;
pub mod pes;
pub mod psi;
#[cfg(test)]
mod test_util;

pub use demux::{DemuxEvent, DemuxStats, Demuxer};
pub use mux::{MuxError, Muxer, PACKETS_PER_DATAGRAM};

/// Size of one transport stream packet.
pub const PACKET_SIZE: usize = 188;
/// The first byte of every packet.
pub const SYNC_BYTE: u8 = 0x47;

/// Entry points for cargo-fuzz targets: feed arbitrary bytes, ignore results.
pub mod fuzz {
    /// The demuxer, fed in uneven chunks.
    pub fn fuzz_demux(data: &[u8]) {
        let mut demuxer = super::Demuxer::new();
        let mut rest = data;
        let mut step = 1usize;
        while !rest.is_empty() {
            let n = step.min(rest.len());
            demuxer.push(&rest[..n]);
            rest = &rest[n..];
            step = step * 7 % 401 + 1;
            while demuxer.poll_event().is_some() {}
        }
        demuxer.flush();
        while demuxer.poll_event().is_some() {}
    }

    /// PES header and Opus framing parsers.
    pub fn fuzz_pes(data: &[u8]) {
        let _ = super::pes::parse_pes_header(data);
        for p in super::opus::opus_packets(data) {
            let _ = super::opus::packet_samples(p);
        }
    }

    /// The muxer with arbitrary frame payloads and timestamps on H.264, AAC,
    /// Opus and MP3 tracks, its output fed back to the demuxer.
    pub fn fuzz_mux(data: &[u8]) {
        use crate::media::{AudioParams, Codec, CodecConfig, Frame, Track};
        let track = |id, codec, config| Track {
            id,
            codec,
            config,
            video: None,
            audio: Some(AudioParams {
                sample_rate: 48_000,
                channels: 2,
            }),
            bitrate: 0,
            label: Default::default(),
        };
        let tracks = [
            track(
                1,
                Codec::H264,
                CodecConfig::H264 {
                    sps: vec![bytes::Bytes::from_static(&[0x67, 1, 2])],
                    pps: vec![bytes::Bytes::from_static(&[0x68, 3])],
                },
            ),
            track(
                2,
                Codec::Aac,
                CodecConfig::Aac {
                    asc: bytes::Bytes::from_static(&[0x11, 0x90]),
                },
            ),
            track(3, Codec::Opus, CodecConfig::None),
            track(4, Codec::Mp3, CodecConfig::None),
        ];
        let Ok(mut muxer) = super::Muxer::new(&tracks) else {
            return;
        };
        let mut out = Vec::new();
        let mut rest = data;
        while rest.len() >= 4 {
            let (head, tail) = rest.split_at(4);
            let len = usize::from(u16::from_be_bytes([head[1], head[2]])).min(tail.len());
            let ts = i64::from(head[3]) * 1000 - 5000;
            let frame = Frame {
                track: u32::from(head[0] % 5),
                pts: ts + i64::from(head[0] >> 4) * 100,
                dts: ts,
                keyframe: head[0] & 0x08 != 0,
                data: bytes::Bytes::copy_from_slice(&tail[..len]),
            };
            let _ = muxer.write_frame(&frame, &mut out);
            rest = &tail[len..];
        }
        let mut demuxer = super::Demuxer::new();
        demuxer.push(&out);
        demuxer.flush();
        while demuxer.poll_event().is_some() {}
    }

    /// PAT/PMT section parsers and the section assembler.
    pub fn fuzz_psi(data: &[u8]) {
        let _ = super::psi::parse_pat(data);
        let _ = super::psi::parse_pmt(data);
        let mut asm = super::psi::SectionAssembler::new();
        let mut sections = Vec::new();
        for (i, chunk) in data.chunks(184).enumerate() {
            asm.push(i % 3 == 0, chunk, &mut sections);
        }
    }

    #[cfg(test)]
    mod tests {
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn fuzz_entry_points_never_panic(data in proptest::collection::vec(any::<u8>(), 0..3000)) {
                super::fuzz_demux(&data);
                super::fuzz_pes(&data);
                super::fuzz_psi(&data);
                super::fuzz_mux(&data);
            }
        }
    }
}
