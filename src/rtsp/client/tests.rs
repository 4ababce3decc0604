//! The client against a scripted server: requests checked byte by byte
//! where it matters, answers fed back, media out as tracks and frames.

use super::*;

const SDP: &str = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=cam\r\nt=0 0\r\na=control:*\r\n\
m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\n\
a=fmtp:96 packetization-mode=1;sprop-parameter-sets=Z2QAH6zZQFAFuhAAAAMAEAAAAwPI8YMZYA==,aOvjyyLA\r\n\
a=control:stream=0\r\n\
m=audio 0 RTP/AVP 97\r\na=rtpmap:97 MPEG4-GENERIC/48000/2\r\n\
a=fmtp:97 streamtype=5;mode=AAC-hbr;config=1190;sizelength=13;indexlength=3;indexdeltalength=3\r\n\
a=control:stream=1\r\n";

fn sent(c: &mut RtspClient) -> String {
    let mut b = Vec::new();
    c.poll_transmit(&mut b);
    String::from_utf8_lossy(&b).into_owned()
}

fn answer(c: &mut RtspClient, cseq: u32, status: &str, headers: &str, body: &str, now: Instant) {
    let msg = format!(
        "RTSP/1.0 {status}\r\nCSeq: {cseq}\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    c.handle_input(msg.as_bytes(), now);
}

fn rtp(channel: u8, seq: u16, ts: u32, marker: bool, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![
        0x80,
        if marker { 0x80 } else { 0 } | if channel == 0 { 96 } else { 97 },
    ];
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&ts.to_be_bytes());
    p.extend_from_slice(&[1, 2, 3, 4]);
    p.extend_from_slice(payload);
    let mut f = vec![b'$', channel];
    f.extend_from_slice(&(p.len() as u16).to_be_bytes());
    f.extend_from_slice(&p);
    f
}

fn events(c: &mut RtspClient) -> Vec<ClientEvent> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

/// Runs DESCRIBE (with a Digest challenge), SETUP x2 and PLAY.
fn playing(now: Instant) -> RtspClient {
    let url = RtspUrl::parse("rtsp://admin:secret@127.0.0.1:8554/cam").unwrap();
    let mut c = RtspClient::new(url, now);
    let d = sent(&mut c);
    assert!(
        d.starts_with("DESCRIBE rtsp://127.0.0.1:8554/cam RTSP/1.0\r\nCSeq: 1\r\n"),
        "{d}"
    );
    assert!(!d.contains("secret"));
    answer(
        &mut c,
        1,
        "401 Unauthorized",
        "WWW-Authenticate: Digest realm=\"cam\", nonce=\"abc\"\r\n",
        "",
        now,
    );
    let d = sent(&mut c);
    assert!(d.contains("CSeq: 2\r\n"));
    assert!(d.contains("Authorization: Digest username=\"admin\", realm=\"cam\", nonce=\"abc\", uri=\"rtsp://127.0.0.1:8554/cam\", response=\""), "{d}");
    answer(
        &mut c,
        2,
        "200 OK",
        "Content-Base: rtsp://127.0.0.1:8554/cam/\r\nContent-Type: application/sdp\r\n",
        SDP,
        now,
    );
    let s = sent(&mut c);
    assert!(
        s.starts_with("SETUP rtsp://127.0.0.1:8554/cam/stream=0 RTSP/1.0"),
        "{s}"
    );
    assert!(s.contains("Transport: RTP/AVP/TCP;unicast;interleaved=0-1\r\n"));
    answer(
        &mut c,
        3,
        "200 OK",
        "Session: 12345678;timeout=20\r\nTransport: RTP/AVP/TCP;unicast;interleaved=0-1\r\n",
        "",
        now,
    );
    let s = sent(&mut c);
    assert!(
        s.starts_with("SETUP rtsp://127.0.0.1:8554/cam/stream=1 RTSP/1.0"),
        "{s}"
    );
    assert!(s.contains("Session: 12345678\r\n"));
    answer(
        &mut c,
        4,
        "200 OK",
        "Session: 12345678;timeout=20\r\nTransport: RTP/AVP/TCP;unicast;interleaved=2-3\r\n",
        "",
        now,
    );
    let p = sent(&mut c);
    assert!(
        p.starts_with("PLAY rtsp://127.0.0.1:8554/cam/ RTSP/1.0"),
        "{p}"
    );
    answer(
        &mut c,
        5,
        "200 OK",
        "RTP-Info: url=rtsp://127.0.0.1:8554/cam/stream=0;seq=1;rtptime=1000000,url=rtsp://127.0.0.1:8554/cam/stream=1;seq=1;rtptime=50000\r\n",
        "",
        now,
    );
    assert!(c.is_playing());
    c
}

#[test]
fn describe_setup_play_then_tracks_and_frames() {
    let t0 = Instant::now();
    let mut c = playing(t0);
    let ev = events(&mut c);
    let ClientEvent::Tracks(tracks) = &ev[0] else {
        panic!("{ev:?}")
    };
    assert_eq!(tracks.len(), 2);
    assert_eq!(tracks[0].codec, Codec::H264);
    assert_eq!(tracks[0].video.unwrap().width, 1280);
    assert_eq!(tracks[1].codec, Codec::Aac);
    assert_eq!(tracks[1].audio.unwrap().sample_rate, 48_000);
    // A keyframe 3000 ticks after rtptime, then AAC 960 samples (20 ms) in.
    let mut input = rtp(0, 1, 1_003_000, true, &[0x65, 1, 2]);
    let mut aac = vec![0, 16];
    aac.extend_from_slice(&((2u16 << 3).to_be_bytes()));
    aac.extend_from_slice(&[0x21, 0x10]);
    input.extend(rtp(2, 1, 50_960, true, &aac));
    input.extend(rtp(1, 1, 0, false, &[0x80, 200, 0, 1, 0, 0, 0, 9])); // RTCP SR: ignored
    c.handle_input(&input, t0);
    let ev = events(&mut c);
    assert_eq!(ev.len(), 2, "{ev:?}");
    let ClientEvent::Frame(v) = &ev[0] else {
        panic!()
    };
    assert_eq!((v.track, v.pts, v.dts, v.keyframe), (0, 3000, 3000, true));
    assert_eq!(&v.data[..], &[0, 0, 0, 3, 0x65, 1, 2]);
    let ClientEvent::Frame(a) = &ev[1] else {
        panic!()
    };
    assert_eq!((a.track, a.pts), (1, 1800));
    assert_eq!(&a.data[..], &[0x21, 0x10]);
}

#[test]
fn keepalive_receiver_reports_and_media_timeout() {
    let t0 = Instant::now();
    let mut c = playing(t0);
    events(&mut c);
    c.handle_input(&rtp(0, 1, 1_000_000, true, &[0x65, 1]), t0);
    // Session timeout 20 s: OPTIONS every 10 s; RR every 5 s.
    let t5 = t0 + Duration::from_secs(5);
    c.handle_timeout(t5);
    let mut out = Vec::new();
    c.poll_transmit(&mut out);
    assert_eq!(&out[..2], &[b'$', 1]);
    assert_eq!(out[5], 201);
    c.handle_input(
        &rtp(0, 2, 1_000_000 + 900_000, true, &[0x41, 1]),
        t0 + Duration::from_secs(9),
    );
    let t10 = t0 + Duration::from_secs(10);
    c.handle_timeout(t10);
    let s = sent(&mut c);
    assert!(
        s.contains("OPTIONS rtsp://127.0.0.1:8554/cam/ RTSP/1.0"),
        "{s}"
    );
    answer(&mut c, 6, "200 OK", "", "", t10);
    let deadline = c.poll_timeout().unwrap();
    assert!(deadline <= t0 + Duration::from_secs(19));
    c.handle_timeout(t0 + Duration::from_secs(19));
    let ev = events(&mut c);
    assert!(
        matches!(&ev[..], [.., ClientEvent::Failed(why)] if why == "no media for 10000 ms"),
        "{ev:?}"
    );
    assert!(c.is_closed());
}

#[test]
fn refusals_say_why() {
    let t0 = Instant::now();
    let mut c = RtspClient::new(RtspUrl::parse("rtsp://127.0.0.1/cam").unwrap(), t0);
    sent(&mut c);
    answer(
        &mut c,
        1,
        "401 Unauthorized",
        "WWW-Authenticate: Basic realm=\"x\"\r\n",
        "",
        t0,
    );
    assert_eq!(
        events(&mut c),
        [ClientEvent::Failed(
            "DESCRIBE: 401 Unauthorized: the server wants a user and password (rtsp://user:password@host/...)".into()
        )]
    );
    let mut c = RtspClient::new(RtspUrl::parse("rtsp://127.0.0.1/none").unwrap(), t0);
    answer(&mut c, 1, "404 Not Found", "", "", t0);
    assert_eq!(
        events(&mut c),
        [ClientEvent::Failed("DESCRIBE: 404 Not Found".into())]
    );
    let mut c = RtspClient::new(RtspUrl::parse("rtsp://127.0.0.1/pcm").unwrap(), t0);
    answer(
        &mut c,
        1,
        "200 OK",
        "",
        "m=audio 0 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n",
        t0,
    );
    assert_eq!(
        events(&mut c),
        [ClientEvent::Failed(
            "DESCRIBE: no H.264, H.265 or AAC track in the SDP (it has: PCMU)".into()
        )]
    );
    let mut c = RtspClient::new(RtspUrl::parse("rtsp://127.0.0.1/slow").unwrap(), t0);
    c.handle_timeout(t0 + Duration::from_secs(10));
    assert_eq!(
        events(&mut c),
        [ClientEvent::Failed(
            "DESCRIBE: no answer within 10 s".into()
        )]
    );
    let mut c = RtspClient::new(RtspUrl::parse("rtsp://127.0.0.1/x").unwrap(), t0);
    c.handle_input(b"HTTP/1.1 400 Bad Request\r\n\r\n", t0);
    assert!(
        matches!(&events(&mut c)[..], [ClientEvent::Failed(w)] if w.starts_with("RTSP: malformed"))
    );
}

#[test]
fn in_band_parameter_sets_when_the_sdp_has_none() {
    let t0 = Instant::now();
    let mut c = RtspClient::new(RtspUrl::parse("rtsp://127.0.0.1/cam").unwrap(), t0);
    answer(
        &mut c,
        1,
        "200 OK",
        "",
        "m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\n",
        t0,
    );
    answer(&mut c, 2, "200 OK", "Session: 1\r\n", "", t0);
    answer(&mut c, 3, "200 OK", "", "", t0);
    assert!(c.is_playing());
    assert!(events(&mut c).is_empty());
    // A P frame first (dropped: no configuration), then SPS+PPS+IDR.
    c.handle_input(&rtp(0, 1, 100, true, &[0x41, 1]), t0);
    assert!(events(&mut c).is_empty());
    use base64::Engine;
    let sps = base64::engine::general_purpose::STANDARD
        .decode("Z2QAH6zZQFAFuhAAAAMAEAAAAwPI8YMZYA==")
        .unwrap();
    let mut stap = vec![24];
    for n in [
        &sps[..],
        &[0x68, 0xEB, 0xE3, 0xCB, 0x22, 0xC0][..],
        &[0x65, 7][..],
    ] {
        stap.extend_from_slice(&(n.len() as u16).to_be_bytes());
        stap.extend_from_slice(n);
    }
    c.handle_input(&rtp(0, 2, 3100, true, &stap), t0);
    let ev = events(&mut c);
    assert!(
        matches!(&ev[0], ClientEvent::Tracks(t) if t[0].video.unwrap().height == 720),
        "{ev:?}"
    );
    assert!(matches!(&ev[1], ClientEvent::Frame(f) if f.keyframe && f.pts == 3000));
}

#[test]
fn teardown_on_close() {
    let t0 = Instant::now();
    let mut c = playing(t0);
    sent(&mut c);
    c.close();
    let s = sent(&mut c);
    assert!(
        s.starts_with("TEARDOWN rtsp://127.0.0.1:8554/cam/ RTSP/1.0"),
        "{s}"
    );
    assert!(s.contains("Session: 12345678"));
    assert!(c.poll_timeout().is_none());
}

#[test]
fn rtp_over_udp_when_asked() {
    let t0 = Instant::now();
    let url = RtspUrl::parse("rtsp://127.0.0.1:8554/cam?transport=udp").unwrap();
    assert!(url.udp);
    let mut c = RtspClient::new(url, t0);
    c.set_udp_ports(vec![(50000, 50001), (50002, 50003)]);
    let d = sent(&mut c);
    assert!(
        d.starts_with("DESCRIBE rtsp://127.0.0.1:8554/cam RTSP/1.0"),
        "{d}"
    );
    answer(
        &mut c,
        1,
        "200 OK",
        "Content-Base: rtsp://127.0.0.1:8554/cam/\r\n",
        SDP,
        t0,
    );
    let s = sent(&mut c);
    assert!(
        s.contains("Transport: RTP/AVP;unicast;client_port=50000-50001\r\n"),
        "{s}"
    );
    answer(
        &mut c,
        2,
        "200 OK",
        "Session: 9\r\nTransport: RTP/AVP;unicast;client_port=50000-50001;server_port=6000-6001\r\n",
        "",
        t0,
    );
    let s = sent(&mut c);
    assert!(s.contains("client_port=50002-50003"), "{s}");
    answer(&mut c, 3, "200 OK", "Session: 9\r\n", "", t0);
    answer(&mut c, 4, "200 OK", "", "", t0);
    assert!(c.is_playing());
    assert_eq!(c.track_count(), 2);
    events(&mut c);
    // An RTP datagram of track 0 (no interleaved header).
    let frame = rtp(0, 1, 9000, true, &[0x65, 1]);
    c.handle_rtp(0, &frame[4..], t0);
    let ev = events(&mut c);
    assert!(
        matches!(&ev[..], [ClientEvent::Frame(f)] if f.keyframe),
        "{ev:?}"
    );

    // A server that answers with interleaved channels instead: refused.
    let mut c = RtspClient::new(
        RtspUrl::parse("rtsp://127.0.0.1/cam?transport=udp").unwrap(),
        t0,
    );
    c.set_udp_ports(vec![(50000, 50001)]);
    answer(
        &mut c,
        1,
        "200 OK",
        "",
        "m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\n",
        t0,
    );
    answer(
        &mut c,
        2,
        "200 OK",
        "Transport: RTP/AVP/TCP;unicast;interleaved=0-1\r\n",
        "",
        t0,
    );
    assert!(
        matches!(&events(&mut c)[..], [ClientEvent::Failed(w)] if w.contains("refuses RTP over UDP"))
    );
}

/// Issue 28, 6.3: the RTSP -> FLV path never sends a timestamp that goes
/// back or repeats, whatever the arrival: tracks interleaved in any order
/// (an encoder that delays its audio behind the video keyframe a push
/// starts on, bursts after a stall) and packets of a track late by a few
/// places (UDP reordering). Before, audio older than the first keyframe was
/// re-stamped at 0 ms, several frames at once.
mod monotonic_flv {
    use super::*;
    use crate::rtmp::chunk::{ChunkDecoder, RtmpConnection};
    use crate::rtmp::media_out::MediaOut;
    use proptest::prelude::*;

    /// (arrival key, packet): sorted by key, this is the order of arrival.
    fn packets(audio_lead_ms: i64, jitter: &[u8], swaps: &[u8]) -> Vec<Vec<u8>> {
        let mut timed: Vec<(i64, Vec<u8>)> = Vec::new();
        // 60 video frames at 25 fps (a keyframe every 25), 40 ms apart.
        for i in 0..60u32 {
            let nal: &[u8] = if i % 25 == 0 {
                &[0x65, 1, 2]
            } else {
                &[0x41, 1, 2]
            };
            let at = i64::from(i) * 40;
            let ts = 1_000_000u32.wrapping_add(i * 3600);
            timed.push((at * 10, rtp(0, 1 + i as u16, ts, true, nal)));
        }
        // 110 AAC frames of 1024 samples at 48 kHz (21.3 ms each), the
        // encoder's output early or late against the video by audio_lead_ms.
        for i in 0..110u32 {
            let mut aac = vec![0, 16];
            aac.extend_from_slice(&((2u16 << 3).to_be_bytes()));
            aac.extend_from_slice(&[0x21, 0x10]);
            let at = i64::from(i) * 1024 * 1000 / 48_000 - audio_lead_ms;
            let ts = 50_000u32.wrapping_add(i * 1024);
            timed.push((at * 10 + 5, rtp(2, 1 + i as u16, ts, true, &aac)));
        }
        // Delays (bursts): each packet late by up to 255 ms.
        for (k, (at, _)) in timed.iter_mut().enumerate() {
            *at += i64::from(jitter[k % jitter.len()]) * 10;
        }
        timed.sort_by_key(|(at, _)| *at);
        let mut order: Vec<Vec<u8>> = timed.into_iter().map(|(_, p)| p).collect();
        // Reordering: swap neighbours here and there.
        for &s in swaps {
            let k = usize::from(s) % (order.len() - 1);
            order.swap(k, k + 1);
        }
        order
    }

    proptest! {
        #[test]
        fn flv_times_only_go_forward(
            audio_lead_ms in -400i64..400,
            jitter in proptest::collection::vec(0u8..=255, 1..40),
            swaps in proptest::collection::vec(any::<u8>(), 0..20),
        ) {
            let t0 = Instant::now();
            let mut c = playing(t0);
            let mut frames = Vec::new();
            let mut tracks = Vec::new();
            for p in packets(audio_lead_ms, &jitter, &swaps) {
                c.handle_input(&p, t0);
                for e in events(&mut c) {
                    match e {
                        ClientEvent::Tracks(t) => tracks = t,
                        ClientEvent::Frame(f) => frames.push(f),
                        _ => {}
                    }
                }
            }
            prop_assert!(!tracks.is_empty());
            // A push or a player starts on a keyframe, as the GOP does.
            let start = frames.iter().position(|f| f.keyframe && f.track == 0);
            prop_assume!(start.is_some());
            let mut out = MediaOut::default();
            let mut conn = RtmpConnection::new(ChunkDecoder::new(1 << 20, 16));
            let mut scratch = Vec::new();
            out.announce(&mut conn, &mut scratch, 1, &tracks).unwrap();
            let mut last: std::collections::HashMap<u8, u32> = Default::default();
            for f in &frames[start.unwrap()..] {
                if let Some(m) = out.time_frame(f, 1) {
                    if let Some(&prev) = last.get(&m.type_id) {
                        prop_assert!(m.timestamp > prev, "track {} went from {prev} to {} ms", m.type_id, m.timestamp);
                    }
                    last.insert(m.type_id, m.timestamp);
                }
            }
            // Heavy reordering around a keyframe can cost frames (they are
            // dropped, never sent back in time), but the video goes out.
            prop_assert!(last.contains_key(&9), "the video went out: {last:?}");
        }
    }
}
