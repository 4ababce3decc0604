//! Entry points of the WebRTC fuzz targets (`fuzz/fuzz_targets/webrtc_*`):
//! the WebSocket framing, OME's signalling JSON, the STUN ufrag lookup,
//! WHEP's offer handling (str0m's SDP parser and kiln's payload choice),
//! datagrams to a session, the AAC to Opus transcoder, and a publisher's
//! frames becoming the stream's. Each must return (no panic) on any input.

use super::{SessionOptions, WebRtc};
use crate::media::{AudioParams, Codec, CodecConfig, Frame, Track, VideoParams};
use crate::state::streams::{SourceType, StreamId, Streams};
use bytes::Bytes;
use std::cell::RefCell;
use std::time::Instant;

/// WebSocket frames fed in pieces (sizes from the first byte).
pub fn fuzz_ws(data: &[u8]) {
    let Some((&step, rest)) = data.split_first() else {
        return;
    };
    let mut r = crate::http::ws::Reader::new(super::signal::MAX_MESSAGE);
    for piece in rest.chunks(usize::from(step).max(1)) {
        if !r.feed(piece) {
            return;
        }
        loop {
            match r.next_message() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
}

/// A WebRTC publisher's frames as str0m would hand them over: each a
/// header (codec, contiguous, RTP time, arrival step, length) and its
/// bytes, into the ingest core; the frames that come out must be
/// well-formed (length-prefixed video, non-decreasing per track while the
/// RTP time is).
pub fn fuzz_ingest(data: &[u8]) {
    use super::ingest::{IngestEvent, IngestTracks, Media, MediaCodec};
    let Some((&flags, mut rest)) = data.split_first() else {
        return;
    };
    let mut ing = IngestTracks::new(flags & 1 == 1, flags & 2 == 2);
    let t0 = Instant::now();
    let mut at = t0;
    let mut out = Vec::new();
    while rest.len() >= 9 {
        let (head, tail) = rest.split_at(9);
        let codec = match head[0] % 3 {
            0 => MediaCodec::H264,
            1 => MediaCodec::Vp8,
            _ => MediaCodec::Opus,
        };
        let rtp = u64::from(u32::from_be_bytes([head[1], head[2], head[3], head[4]]));
        at += std::time::Duration::from_millis(u64::from(head[5]));
        let len = usize::from(u16::from_be_bytes([head[6], head[7]])).min(tail.len());
        let (frame, next) = tail.split_at(len);
        rest = next;
        ing.on_media(
            Media {
                codec,
                rtp_time: rtp,
                rate: if codec == MediaCodec::Opus {
                    48_000
                } else {
                    90_000
                },
                arrival: at,
                contiguous: head[8] & 1 == 1,
                layer: usize::from(head[8] >> 1) % (super::ingest::MAX_LAYERS + 2),
                data: frame,
            },
            &mut out,
        );
        let _ = ing.keyframes_wanted(at);
        if head[8] & 2 == 2 {
            ing.keyframe_asked();
        }
    }
    let mut video = None;
    for e in out {
        if let IngestEvent::Tracks(t) = &e {
            video = t
                .iter()
                .find(|t| t.id == super::ingest::VIDEO_TRACK)
                .map(|t| t.codec);
        }
        if let IngestEvent::Frame(f) = e {
            // A frame is of the codec its track was last announced with.
            if f.track == super::ingest::VIDEO_TRACK && video == Some(crate::media::Codec::H264) {
                // panic-audit: the fuzz target's own check (fuzzing code).
                assert!(crate::codec::nal::validate_length_prefixed(&f.data, 4).is_ok());
            }
            // panic-audit: the fuzz target's own check (fuzzing code).
            assert!(f.pts >= 0 && f.dts == f.pts);
        }
    }
}

pub fn fuzz_signal(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = super::signal::parse(text);
    }
}

/// TURN over TCP (the relay) fed in pieces: requests, indications,
/// ChannelData, garbage; what it makes is wrapped back.
pub fn fuzz_turn(data: &[u8]) {
    let Some((&step, rest)) = data.split_first() else {
        return;
    };
    // panic-audit: a literal address parses; a fresh table has no such stream (fuzzing code).
    let peer: std::net::SocketAddr = "127.0.0.1:10000".parse().expect("an address");
    let mut t = super::turn::TurnConn::new(
        // panic-audit: a literal address parses; a fresh table has no such stream (fuzzing code).
        "127.0.0.1:40000".parse().expect("an address"),
        // panic-audit: a literal address parses; a fresh table has no such stream (fuzzing code).
        "127.0.0.1:50000".parse().expect("an address"),
        vec![peer],
        "nonce".into(),
    );
    for piece in rest.chunks(usize::from(step).max(1)) {
        match t.feed(piece) {
            Ok(out) => {
                for o in out {
                    if let super::turn::TurnOutput::Datagram { data, .. } = o {
                        let _ = t.wrap(peer, &data);
                    }
                }
            }
            Err(_) => return,
        }
    }
}

pub fn fuzz_stun(data: &[u8]) {
    let _ = super::stun::local_ufrag(data);
    // What a STUN server answers kiln's public-address query with.
    let txid = data
        .get(8..20)
        .and_then(|t| t.try_into().ok())
        .unwrap_or([0; 12]);
    let _ = super::turn::mapped_address(data, txid);
}

struct Fixture {
    webrtc: WebRtc,
    streams: Streams,
    stream: StreamId,
}

thread_local! {
    static FIXTURE: RefCell<Option<Fixture>> = const { RefCell::new(None) };
}

fn with_fixture(f: impl FnOnce(&mut Fixture)) {
    FIXTURE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let fx = slot.get_or_insert_with(|| {
            let mut streams = Streams::default();
            let stream = streams
                .start("default", "app", "cam", SourceType::Rtmp, 1, 0)
                // panic-audit: a literal address parses; a fresh table has no such stream (fuzzing code).
                .expect("a fresh name");
            streams.set_tracks(
                stream,
                vec![
                    Track {
                        id: 1,
                        codec: Codec::H264,
                        config: CodecConfig::None,
                        video: Some(VideoParams::default()),
                        audio: None,
                        bitrate: 0,
                        label: Default::default(),
                    },
                    Track {
                        id: 2,
                        codec: Codec::Aac,
                        config: CodecConfig::Aac {
                            asc: Bytes::from_static(&[0x11, 0x90]),
                        },
                        video: None,
                        audio: Some(AudioParams {
                            sample_rate: 48_000,
                            channels: 2,
                        }),
                        bitrate: 0,
                        label: Default::default(),
                    },
                ],
            );
            let mut webrtc = WebRtc::new();
            // panic-audit: a literal address parses; a fresh table has no such stream (fuzzing code).
            webrtc.set_ports(vec![("127.0.0.1:10000".parse().expect("an address"), 0)]);
            Fixture {
                webrtc,
                streams,
                stream,
            }
        });
        f(fx);
    });
}

/// An SDP offer as WHEP receives it; a session made is stopped again.
pub fn fuzz_offer(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    with_fixture(|fx| {
        let Some(stream) = fx.streams.get(fx.stream) else {
            return;
        };
        let now = Instant::now();
        if let Ok((key, _)) = fx
            .webrtc
            .accept_offer(stream, &text, SessionOptions::default(), now)
        {
            let _ = fx.webrtc.stop(&key);
        }
        fx.webrtc.take_ended();
    });
}

/// Datagrams to the ICE socket from one peer: the first is made a STUN
/// request naming a live session's ufrag (so the rest reach its ICE,
/// DTLS and SRTP), then each piece (sizes from the first byte) as is.
pub fn fuzz_datagrams(data: &[u8], offer: &str) {
    let Some((&step, rest)) = data.split_first() else {
        return;
    };
    with_fixture(|fx| {
        let now = Instant::now();
        let Some(stream) = fx.streams.get(fx.stream) else {
            return;
        };
        let Ok((key, _)) = fx
            .webrtc
            .accept_offer(stream, offer, SessionOptions::default(), now)
        else {
            return;
        };
        let (ufrag, pass) = fx
            .webrtc
            .by_key
            .get(&key)
            .map(|&i| {
                let s = &fx.webrtc.sessions[i];
                (s.ufrag.clone(), s.pass.clone())
            })
            .unwrap_or_default();
        let local = fx.webrtc.ports[0];
        // panic-audit: a literal address parses; a fresh table has no such stream (fuzzing code).
        let peer = "127.0.0.1:5000".parse().expect("an address");
        // Signed with the session's password: only then does the session
        // take the peer's address (and the rest reach it).
        let mut first = signed(stun_with_username(&format!("{ufrag}:peer")), &pass);
        first.extend_from_slice(rest.get(..8).unwrap_or(&[]));
        fx.webrtc
            .handle_datagram(local, peer, &first, &mut fx.streams, now);
        for piece in rest.chunks(usize::from(step).max(1)) {
            fx.webrtc
                .handle_datagram(local, peer, piece, &mut fx.streams, now);
        }
        fx.webrtc
            .handle_timeout(&mut fx.streams, now + std::time::Duration::from_secs(1));
        let _ = fx.webrtc.stop(&key);
        fx.webrtc.take_ended();
        for i in 0..fx.webrtc.ports.len() {
            fx.webrtc.take_outbox(i);
        }
    });
}

/// `m` with a MESSAGE-INTEGRITY made with `pass` (its length counted).
fn signed(mut m: Vec<u8>, pass: &str) -> Vec<u8> {
    let len = (m.len() - 20 + 24) as u16;
    m[2..4].copy_from_slice(&len.to_be_bytes());
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, pass.as_bytes());
    let tag = ring::hmac::sign(&key, &m);
    m.extend_from_slice(&[0x00, 0x08, 0x00, 0x14]);
    m.extend_from_slice(tag.as_ref());
    m
}

fn stun_with_username(name: &str) -> Vec<u8> {
    let mut attrs = vec![0x00, 0x06];
    attrs.extend_from_slice(&(name.len() as u16).to_be_bytes());
    attrs.extend_from_slice(name.as_bytes());
    while attrs.len() % 4 != 0 {
        attrs.push(0);
    }
    let mut m = vec![0x00, 0x01];
    m.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
    m.extend_from_slice(&[0x21, 0x12, 0xA4, 0x42]);
    m.extend_from_slice(&[1; 12]);
    m.extend_from_slice(&attrs);
    m
}

/// AAC frames (lengths from a byte each) through the transcoder.
///
/// symphonia's AAC decoder panics on some malformed frames; kiln contains
/// that (`AudioError::Decoder`). The fuzzer's panic hook aborts on any
/// panic, caught or not, so panics raised inside symphonia are let through
/// to the catch here, and every other panic still aborts.
pub fn fuzz_aac_to_opus(data: &[u8]) {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_symphonia = info
                .location()
                .is_some_and(|l| l.file().contains("symphonia"));
            if !in_symphonia {
                previous(info);
            }
        }));
    });
    let Some((&conf, mut rest)) = data.split_first() else {
        return;
    };
    // A few real configurations: LC 48 kHz stereo, 44.1 kHz stereo, mono.
    let asc: &[u8] = match conf % 3 {
        0 => &[0x11, 0x90],
        1 => &[0x12, 0x10],
        _ => &[0x11, 0x88],
    };
    let Ok(mut t) = super::audio::AacToOpus::new(asc) else {
        return;
    };
    let mut pts = 0;
    while let Some((&len, tail)) = rest.split_first() {
        let n = usize::from(len).min(tail.len());
        let f = Frame {
            track: 2,
            pts,
            dts: pts,
            keyframe: true,
            data: Bytes::copy_from_slice(&tail[..n]),
        };
        let _ = t.push(&f);
        pts += 1920;
        rest = &tail[n..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFER: &str = include_str!("../../tests/fixtures/chromium-whep-offer.sdp");

    /// Issue 40: a WHEP offer that never connects starts no AAC -> Opus
    /// work for its stream (one POST per stream every 30 s took the
    /// transcoder from real viewers); a connected viewer does.
    #[test]
    fn only_connected_viewers_get_audio_transcoded() {
        use crate::state::streams::IngestOutput;
        with_fixture(|fx| {
            let now = Instant::now();
            let stream = fx.streams.get(fx.stream).expect("the fixture's stream");
            let (key, _) = fx
                .webrtc
                .accept_offer(stream, OFFER, SessionOptions::default(), now)
                .expect("the offer is taken");
            let aac = IngestOutput {
                stream: Some(fx.stream),
                frames: vec![Frame {
                    track: 2,
                    pts: 0,
                    dts: 0,
                    keyframe: true,
                    data: Bytes::from_static(&[0x21, 0x10, 0x04, 0x60, 0x8c, 0x1c]),
                }],
                ..IngestOutput::default()
            };
            let transcoded = |w: &[super::super::AudioWork]| {
                w.iter()
                    .any(|w| matches!(w, super::super::AudioWork::Frame { .. }))
            };
            fx.webrtc.take_audio_work();
            fx.webrtc.on_ingest(&aac, &mut fx.streams, now);
            assert!(!transcoded(&fx.webrtc.take_audio_work()));
            // The same session once it has completed ICE and DTLS.
            let idx = fx.webrtc.by_key[&key];
            fx.webrtc.sessions[idx].connected = true;
            if let Some(f) = fx.webrtc.feeds.get_mut(&fx.stream) {
                f.connected += 1;
            }
            fx.webrtc.on_ingest(&aac, &mut fx.streams, now);
            assert!(transcoded(&fx.webrtc.take_audio_work()));
            let _ = fx.webrtc.stop(&key);
            fx.webrtc.take_ended();
            assert!(!fx.webrtc.feeds.contains_key(&fx.stream));
        });
    }

    /// Each entry point on a spread of inputs: the real offer cut and
    /// garbled, and pseudo-random bytes.
    #[test]
    fn the_fuzz_entry_points_take_hostile_input() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut noise = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect()
        };
        fuzz_offer(OFFER.as_bytes());
        for cut in (0..OFFER.len()).step_by(97) {
            fuzz_offer(&OFFER.as_bytes()[..cut]);
        }
        let mut garbled = OFFER.as_bytes().to_vec();
        for i in (0..garbled.len()).step_by(53) {
            garbled[i] = b'9';
        }
        fuzz_offer(&garbled);
        for n in [0, 1, 20, 100, 1500] {
            let d = noise(n);
            fuzz_ws(&d);
            fuzz_signal(&d);
            fuzz_stun(&d);
            fuzz_turn(&d);
            fuzz_aac_to_opus(&d);
            fuzz_datagrams(&d, OFFER);
            fuzz_ingest(&d);
        }
        // DTLS- and RTCP-looking datagrams.
        let mut dtls = vec![7, 22, 254, 253];
        dtls.extend(noise(200));
        fuzz_datagrams(&dtls, OFFER);
        let mut rtcp = vec![9, 0x80, 200];
        rtcp.extend(noise(100));
        fuzz_datagrams(&rtcp, OFFER);
    }
}
