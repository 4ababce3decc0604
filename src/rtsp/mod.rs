//! RTSP pull *core*: the client that takes a stream from an IP camera or
//! another server (`rtsp://`), sans-IO. `message` is RTSP/1.0 on the TCP
//! connection (responses, interleaved frames, authorization), `sdp` the
//! session description, `rtp` the packets and depacketizers, `client` the
//! DESCRIBE/SETUP/PLAY state machine that turns them into kiln tracks and
//! frames.

pub mod client;
pub mod message;
pub mod rtp;
pub mod sdp;

pub use client::{ClientEvent, RtspClient};
pub use message::RtspUrl;

/// Fuzz entry: any server bytes; never panics, holds bounded memory. The
/// first byte picks what is driven: the client from its DESCRIBE, the
/// client already playing (canned answers first, so RTP reaches the
/// depacketizers), or the SDP parser and each depacketizer directly.
pub fn fuzz(data: &[u8]) {
    use std::time::{Duration, Instant};
    let Some((&mode, data)) = data.split_first() else {
        return;
    };
    let now = Instant::now();
    // panic-audit: fuzzing only; a constant URL that the unit tests parse.
    let url = || RtspUrl::parse("rtsp://u:p@127.0.0.1:554/cam").expect("a valid URL");
    match mode % 3 {
        0 => {
            let mut c = RtspClient::new(url(), now);
            for (i, piece) in data.chunks(97).enumerate() {
                c.handle_input(piece, now + Duration::from_millis(i as u64));
                while c.poll_event().is_some() {}
            }
            c.handle_timeout(now + Duration::from_secs(60));
            let mut out = Vec::new();
            c.poll_transmit(&mut out);
        }
        1 => {
            let mut c = RtspClient::new(url(), now);
            let sdp = "m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\na=control:v\r\n\
                m=audio 0 RTP/AVP 97\r\na=rtpmap:97 MPEG4-GENERIC/48000/2\r\n\
                a=fmtp:97 config=1190;sizelength=13;indexlength=3;indexdeltalength=3\r\na=control:a\r\n";
            let answers = format!(
                "RTSP/1.0 200 OK\r\nCSeq: 1\r\nContent-Length: {}\r\n\r\n{sdp}\
                 RTSP/1.0 200 OK\r\nCSeq: 2\r\nSession: s\r\n\r\n\
                 RTSP/1.0 200 OK\r\nCSeq: 3\r\nSession: s\r\n\r\n\
                 RTSP/1.0 200 OK\r\nCSeq: 4\r\n\r\n",
                sdp.len()
            );
            c.handle_input(answers.as_bytes(), now);
            c.handle_input(data, now);
            while c.poll_event().is_some() {}
        }
        _ => {
            let _ = sdp::Sdp::parse(&String::from_utf8_lossy(data));
            let mut h264 = rtp::NalDepacketizer::new(false);
            let mut h265 = rtp::NalDepacketizer::new(true);
            let mut aac = rtp::AacDepacketizer::new(13, 3, 3);
            let mut out = Vec::new();
            for packet in data.split(|b| *b == 0xFF) {
                if let Some(p) = rtp::RtpPacket::parse(packet) {
                    h264.push(&p, &mut out);
                    h265.push(&p, &mut out);
                    aac.push(&p, &mut out);
                    out.clear();
                }
            }
        }
    }
}

#[cfg(test)]
mod fuzz_seeds {
    #[test]
    fn the_fuzz_entry_takes_its_seeds_and_garbage() {
        for seed in [
            &include_bytes!("../../fuzz/corpus-seed/rtsp_client/describe_401")[..],
            &include_bytes!("../../fuzz/corpus-seed/rtsp_client/playing_rtp")[..],
            b"\x02m=video 0 RTP/AVP 96\r\n\xff\x80\x60\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x7c\x85",
            &[1, b'$', 0, 0xFF, 0xFF],
            &[],
        ] {
            super::fuzz(seed);
        }
    }
}
