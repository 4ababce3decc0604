//! Hostile peers on the surfaces WebRTC brought (issue 40): the ICE UDP
//! ports, the signalling WebSocket, the TCP relay and the viewer port's
//! connection slots. Each test is the attack as it was reproduced, against
//! the real binary, and then a real client on the same surface. Figures
//! are printed for RELIABILITY.md.

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

const OFFER: &str = include_str!("fixtures/chromium-whep-offer.sdp");

/// The tests here run one at a time: each floods the machine, and two
/// floods at once measure the machine, not kiln.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn server(tag: &str, bind_extra: &str, relay: bool) -> Server {
    Server::start_with(
        tag,
        ServerOptions {
            media: true,
            llhls: Some(String::new()),
            webrtc: Some(String::new()),
            webrtc_bind_extra: bind_extra.to_string(),
            webrtc_relay: relay,
            ..Default::default()
        },
    )
}

/// ffmpeg publishing `app/cam` (H.264 + AAC) for `secs`, once it is live.
fn publish(s: &Server, secs: u32) -> Option<std::process::Child> {
    if !have_tool("ffmpeg") {
        return None;
    }
    let url = format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp);
    let src = ffmpeg_source(secs, &[], "flv", &url);
    s.wait_for_tracks("cam");
    Some(src)
}

/// A TCP connection to kiln's `port` from the loopback address `from`.
fn connect_from(from: IpAddr, port: u16) -> std::io::Result<TcpStream> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    sock.bind(&SocketAddr::new(from, 0).into())?;
    sock.connect(&SocketAddr::from(([127, 0, 0, 1], port)).into())?;
    Ok(sock.into())
}

/// A WHEP offer for `app/cam` from `from`: (status, body).
fn whep_from(s: &Server, from: IpAddr) -> (u16, String) {
    let mut t = connect_from(from, s.media.llhls).expect("viewer port");
    t.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        t,
        "POST /app/cam?direction=whep HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{OFFER}",
        OFFER.len()
    )
    .unwrap();
    let mut text = String::new();
    let _ = t.read_to_string(&mut text);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

fn sdp_attr(sdp: &str, name: &str) -> String {
    sdp.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("a={name}:")))
        .unwrap_or_else(|| panic!("no a={name} in {sdp}"))
        .trim()
        .to_string()
}

/// CRC-32 (IEEE), for STUN's FINGERPRINT.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A STUN Binding request as a browser's ICE agent (controlling) sends it
/// to kiln (ICE-lite): USERNAME `kiln:browser`, PRIORITY, ICE-CONTROLLING,
/// USE-CANDIDATE, MESSAGE-INTEGRITY with `pass`, FINGERPRINT.
fn binding(username: &str, pass: &str, txid: [u8; 12]) -> Vec<u8> {
    fn attr(m: &mut Vec<u8>, kind: u16, value: &[u8]) {
        m.extend_from_slice(&kind.to_be_bytes());
        m.extend_from_slice(&(value.len() as u16).to_be_bytes());
        m.extend_from_slice(value);
        while m.len() % 4 != 0 {
            m.push(0);
        }
    }
    let set_len = |m: &mut Vec<u8>, extra: usize| {
        let len = (m.len() - 20 + extra) as u16;
        m[2..4].copy_from_slice(&len.to_be_bytes());
    };
    let mut m = vec![0x00, 0x01, 0, 0, 0x21, 0x12, 0xA4, 0x42];
    m.extend_from_slice(&txid);
    attr(&mut m, 0x0006, username.as_bytes());
    attr(&mut m, 0x0024, &0x6e7f_1eff_u32.to_be_bytes());
    attr(&mut m, 0x802A, &[1, 2, 3, 4, 5, 6, 7, 8]);
    attr(&mut m, 0x0025, &[]);
    set_len(&mut m, 24);
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, pass.as_bytes());
    let tag = ring::hmac::sign(&key, &m);
    attr(&mut m, 0x0008, tag.as_ref());
    set_len(&mut m, 8);
    let fp = crc32(&m) ^ 0x5354_554e;
    attr(&mut m, 0x8028, &fp.to_be_bytes());
    m
}

/// A WHEP session's ICE credentials: (USERNAME for requests, kiln's pwd).
fn session_creds(answer: &str) -> (String, String) {
    let kiln_ufrag = sdp_attr(answer, "ice-ufrag");
    let browser_ufrag = sdp_attr(OFFER, "ice-ufrag");
    (
        format!("{kiln_ufrag}:{browser_ufrag}"),
        sdp_attr(answer, "ice-pwd"),
    )
}

/// Sends a signed Binding request from `sock` to kiln's ICE port until a
/// Binding success answers it (true) or `limit` passes (false).
fn answered(sock: &UdpSocket, ice: u16, username: &str, pass: &str, limit: Duration) -> bool {
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let start = Instant::now();
    let mut n = 0u8;
    let mut buf = [0u8; 1500];
    while start.elapsed() < limit {
        n = n.wrapping_add(1);
        let txid = [n, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7];
        let _ = sock.send_to(&binding(username, pass, txid), ("127.0.0.1", ice));
        while let Ok((len, _)) = sock.recv_from(&mut buf) {
            if len >= 20 && buf[0..2] == [0x01, 0x01] && buf[8..20] == txid[..] {
                return true;
            }
        }
    }
    false
}

fn udp() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0").unwrap()
}

/// 4,096 STUN Binding requests as a relay client sends them on its TCP
/// connection.
fn relay_bindings() -> Vec<u8> {
    let mut one = vec![0x00, 0x01, 0, 0, 0x21, 0x12, 0xA4, 0x42];
    one.extend_from_slice(&[3; 12]);
    (0..4096).flat_map(|_| one.clone()).collect()
}

/// Finding 1: two seconds of random datagrams on the ICE port (which
/// before left its receive queue full and no STUN request answered again),
/// then a new WHEP session's ICE check is answered at once.
#[test]
fn a_flood_of_junk_on_the_ice_port_does_not_wedge_webrtc() {
    let _one = serial();
    let s = server("hostile-ice-flood", "", false);
    let Some(mut src) = publish(&s, 40) else {
        eprintln!("SKIP: ffmpeg is missing");
        return;
    };
    // Three senders for 2 s, each as fast as it goes: more than kiln
    // reads, so the socket's receive queue is full when they stop (a full
    // queue drops what comes next without a wake-up: the old wedge).
    let ice = s.media.ice;
    let senders: Vec<_> = (0..3u64)
        .map(|k| {
            std::thread::spawn(move || {
                let sock = udp();
                let mut x = 0x9e37_79b9_u64 + k;
                let mut sent = 0u64;
                let start = Instant::now();
                let mut dgram = [0u8; 64];
                while start.elapsed() < Duration::from_secs(2) && sent < 5_000_000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    dgram[..8].copy_from_slice(&x.to_le_bytes());
                    if sock.send_to(&dgram, ("127.0.0.1", ice)).is_ok() {
                        sent += 1;
                    }
                }
                sent
            })
        })
        .collect();
    let sent: u64 = senders.into_iter().map(|h| h.join().unwrap()).sum();
    let (status, answer) = whep_from(&s, IpAddr::from([127, 0, 0, 1]));
    assert_eq!(status, 201, "{answer}");
    let (user, pass) = session_creds(&answer);
    let t = Instant::now();
    let ok = answered(&udp(), s.media.ice, &user, &pass, Duration::from_secs(10));
    eprintln!(
        "RELIABILITY: ICE port flooded with {sent} random 64-byte datagrams from 3 senders in 2 s: a new session's check answered: {ok} after {:?}; kiln RSS {} KiB",
        t.elapsed(),
        rss_kib(&s)
    );
    let _ = src.kill();
    let _ = src.wait();
    assert!(ok, "the ICE port no longer answers after the flood");
}

/// Finding 11: requests with the session's ufrag but a wrong signature
/// from eight addresses take none of its address slots; a signed one from
/// a ninth is answered.
#[test]
fn forged_stun_requests_take_no_address_slot() {
    let _one = serial();
    let s = server("hostile-ice-forged", "", false);
    let Some(mut src) = publish(&s, 30) else {
        eprintln!("SKIP: ffmpeg is missing");
        return;
    };
    let (status, answer) = whep_from(&s, IpAddr::from([127, 0, 0, 1]));
    assert_eq!(status, 201, "{answer}");
    let (user, pass) = session_creds(&answer);
    let forgers: Vec<UdpSocket> = (0..8).map(|_| udp()).collect();
    for f in &forgers {
        for _ in 0..3 {
            f.send_to(
                &binding(&user, "not-the-password", [1; 12]),
                ("127.0.0.1", s.media.ice),
            )
            .unwrap();
        }
        assert!(!answered(
            f,
            s.media.ice,
            &user,
            "wrong",
            Duration::from_millis(400)
        ));
    }
    let ok = answered(&udp(), s.media.ice, &user, &pass, Duration::from_secs(10));
    let _ = src.kill();
    let _ = src.wait();
    assert!(ok, "a signed request from a ninth address was not answered");
}

/// Findings 5 and 12: one address holds at most its share of the WebRTC
/// sessions (here 3) while another still gets one, and offers that never
/// connect are gone within `CONNECT_WITHIN` (10 s), making room again.
#[test]
fn one_address_holds_a_share_of_sessions_and_unconnected_ones_go() {
    let _one = serial();
    let s = server(
        "hostile-webrtc-share",
        "<MaxSessionsPerAddress>3</MaxSessionsPerAddress>",
        false,
    );
    let Some(mut src) = publish(&s, 60) else {
        eprintln!("SKIP: ffmpeg is missing");
        return;
    };
    let one = IpAddr::from([127, 0, 0, 1]);
    for _ in 0..3 {
        let (st, body) = whep_from(&s, one);
        assert_eq!(st, 201, "{body}");
    }
    let (st, body) = whep_from(&s, one);
    assert_eq!(st, 503, "{body}");
    assert!(body.contains("from this address"), "{body}");
    let (st, body) = whep_from(&s, IpAddr::from([127, 0, 0, 2]));
    assert_eq!(st, 201, "another address: {body}");
    // A WHIP offer that never does ICE takes its stream's name, for 10 s
    // (the application's Timeout is OME's 30 s).
    let whip = OFFER.replace("a=recvonly", "a=sendonly");
    let mut t = connect_from(IpAddr::from([127, 0, 0, 6]), s.media.llhls).unwrap();
    write!(
        t,
        "POST /app/held?direction=whip HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{whip}",
        whip.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = t.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    let whip_at = Instant::now();
    assert!(
        rtmp_publish(s.media.rtmp, "held").is_err(),
        "the name is held"
    );
    // None of them does ICE: within 10 s (and the loop's slack) they end.
    let start = Instant::now();
    let room = wait_until(Duration::from_secs(30), || {
        (whep_from(&s, one).0 == 201).then_some(())
    });
    eprintln!(
        "RELIABILITY: 3 WHEP offers that never do ICE held their address's share for {:?}",
        start.elapsed()
    );
    assert!(room.is_some(), "unconnected sessions still hold the share");
    let freed = wait_until(Duration::from_secs(20), || {
        rtmp_publish(s.media.rtmp, "held").ok()
    });
    eprintln!(
        "RELIABILITY: a WHIP offer that never does ICE held its stream name for {:?}",
        whip_at.elapsed()
    );
    assert!(freed.is_some(), "the WHIP offer still holds its name");
    let _ = src.kill();
    let _ = src.wait();
    assert!(s.log_text().contains("MaxSessionsPerAddress"));
}

/// A WebSocket upgrade on the viewer port: the stream after the 101.
fn ws_open(port: u16, path: &str) -> TcpStream {
    let mut t = TcpStream::connect(("127.0.0.1", port)).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        t,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        t.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 101"));
    t
}

/// A masked client frame.
fn ws_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    kiln::http::ws::masked(opcode, payload, [1, 2, 3, 4])
}

/// The next server frame: (opcode, payload).
fn ws_read(t: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut h = [0u8; 2];
    t.read_exact(&mut h)?;
    let len = match h[1] & 0x7f {
        126 => {
            let mut n = [0u8; 2];
            t.read_exact(&mut n)?;
            u64::from(u16::from_be_bytes(n))
        }
        127 => {
            let mut n = [0u8; 8];
            t.read_exact(&mut n)?;
            u64::from_be_bytes(n)
        }
        n => u64::from(n),
    };
    let mut payload = vec![0u8; len as usize];
    t.read_exact(&mut payload)?;
    Ok((h[0] & 0x0f, payload))
}

/// Findings 2 and 14: a WebSocket that sends Pings as fast as it can and
/// never reads makes kiln hold little (before: 800 MB in 30 s); and one
/// that sends more than 64 KiB at once is still read and answered.
#[test]
fn a_websocket_that_pings_and_never_reads_holds_little_and_a_burst_is_read() {
    let _one = serial();
    let s = server("hostile-ws", "", false);
    let Some(mut src) = publish(&s, 40) else {
        eprintln!("SKIP: ffmpeg is missing");
        return;
    };
    let before = rss_kib(&s);
    let mut w = ws_open(s.media.llhls, "/app/cam");
    let pings: Vec<u8> = (0..4096).flat_map(|_| ws_frame(0x9, b"")).collect();
    let start = Instant::now();
    let mut peak = before;
    let sent = flood(&mut w, &pings, || {
        peak = peak.max(rss_kib(&s));
        start.elapsed() < Duration::from_secs(8)
    });
    eprintln!(
        "RELIABILITY: a WebSocket sending Pings for 8 s and never reading ({} MB sent): kiln RSS {before} -> peak {peak} KiB",
        sent >> 20
    );
    assert!(
        peak < before + 32 * 1024,
        "kiln grew from {before} to {peak} KiB"
    );
    drop(w);
    // 100 KiB of Pings then a request_offer, in one write: still read.
    let mut w = ws_open(s.media.llhls, "/app/cam");
    let mut burst: Vec<u8> = Vec::new();
    while burst.len() < 100 * 1024 {
        burst.extend(ws_frame(0x9, b"ping"));
    }
    burst.extend(ws_frame(0x1, br#"{"command":"request_offer"}"#));
    w.write_all(&burst).unwrap();
    let mut offer = None;
    let mut pongs = 0;
    while let Ok((op, payload)) = ws_read(&mut w) {
        match op {
            0xA => pongs += 1,
            0x1 => {
                offer = Some(String::from_utf8_lossy(&payload).into_owned());
                break;
            }
            _ => {}
        }
    }
    let _ = src.kill();
    let _ = src.wait();
    let offer = offer.expect("no answer to a request_offer sent after 100 KiB");
    assert!(offer.contains("\"offer\""), "{offer}");
    // One Pong per batch of Pings read, not one per Ping (25,600 sent).
    assert!(pongs < 1000, "{pongs} pongs");
}

/// Finding 3: a relay client that sends STUN Bindings and never reads the
/// answers makes kiln hold little (before: +20 MB in 9 s).
#[test]
fn a_relay_client_that_never_reads_holds_little() {
    let _one = serial();
    let s = server("hostile-relay", "", true);
    let before = rss_kib(&s);
    let mut t = TcpStream::connect(("127.0.0.1", s.media.relay)).unwrap();
    let start = Instant::now();
    let mut peak = before;
    // Unallocated connections close after 10 s: flood 8.
    // 16 kB at a time, a millisecond apart: each read takes it all (a
    // burst larger than a read would be paused by the read size alone).
    let batch = relay_bindings();
    let sent = flood(&mut t, &batch[..16_000], || {
        std::thread::sleep(Duration::from_millis(1));
        peak = peak.max(rss_kib(&s));
        start.elapsed() < Duration::from_secs(8)
    });
    eprintln!(
        "RELIABILITY: a relay client sending Binding requests for 8 s and never reading ({} MB sent): kiln RSS {before} -> peak {peak} KiB",
        sent >> 20
    );
    assert!(
        peak < before + 8 * 1024,
        "kiln grew from {before} to {peak} KiB"
    );
}

/// Finding 4: one address takes at most its share (512) of the viewer
/// port's 8192 connections; another address is served.
#[test]
fn one_address_takes_a_share_of_the_viewer_port() {
    let _one = serial();
    let s = server("hostile-viewer-share", "", false);
    let one = IpAddr::from([127, 0, 0, 1]);
    let mut held = Vec::new();
    for _ in 0..540 {
        match connect_from(one, s.media.llhls) {
            Ok(c) => held.push(c),
            Err(e) => panic!("connect: {e}"),
        }
    }
    // kiln accepts and closes those past the share: their reads end.
    // Counted until 28 have ended, or for 10 s (a busy machine may take
    // seconds to accept them all): what is asserted is how many, not when.
    let mut ended = vec![false; held.len()];
    for c in &held {
        c.set_nonblocking(true).unwrap();
    }
    // Marks each connection whose read has ended (closed by kiln).
    let look = |held: &mut Vec<std::net::TcpStream>, ended: &mut Vec<bool>| {
        for (c, e) in held.iter_mut().zip(ended.iter_mut()) {
            let mut b = [0u8; 1];
            match c.read(&mut b) {
                Ok(0) => *e = true,
                Err(err) if err.kind() != std::io::ErrorKind::WouldBlock => *e = true,
                _ => {}
            }
        }
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ended.iter().filter(|e| **e).count() < 28 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        look(&mut held, &mut ended);
    }
    // A moment more: none past the share beyond those is closed.
    std::thread::sleep(Duration::from_millis(300));
    look(&mut held, &mut ended);
    let closed = ended.iter().filter(|e| **e).count();
    let mut other = connect_from(IpAddr::from([127, 0, 0, 2]), s.media.llhls).unwrap();
    other
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        other,
        "GET /app/cam/llhls.m3u8 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = other.read_to_string(&mut answer);
    eprintln!("RELIABILITY: 540 idle viewer-port connections from one address: {closed} closed (share 512); another address answered: {}", answer.lines().next().unwrap_or(""));
    assert!(answer.starts_with("HTTP/1.1 "), "{answer}");
    assert!(
        (28..=40).contains(&closed),
        "{closed} of 540 closed (the share is 512)"
    );
    assert!(s.log_text().contains("MaxConnectionsPerAddress"));
}

#[path = "../benches/support/webrtc_client.rs"]
mod webrtc_client;

/// A WHEP viewer (str0m) of `app/cam` for `secs`: video frames received
/// in each second.
fn whep_viewer(port: u16, secs: u64) -> std::thread::JoinHandle<Vec<u32>> {
    std::thread::spawn(move || {
        let url = format!("http://127.0.0.1:{port}/app/cam?direction=whep");
        let mut socket = mio::net::UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let start = Instant::now();
        let mut rtc = webrtc_client::whep_setup(&url, &socket, start).expect("WHEP");
        let mut per_second = vec![0u32; secs as usize];
        webrtc_client::run(
            &mut rtc,
            &mut socket,
            start + Duration::from_secs(secs),
            |e| {
                if let str0m::Event::MediaData(m) = e {
                    let i = start.elapsed().as_secs() as usize;
                    if let (true, Some(c)) =
                        (m.params.spec().codec.is_video(), per_second.get_mut(i))
                    {
                        *c += 1;
                    }
                }
            },
        );
        per_second
    })
}

/// A GET on kiln's viewer port: the body, if answered 200.
fn get_200(port: u16, path: &str) -> Option<String> {
    let mut t = TcpStream::connect(("127.0.0.1", port)).ok()?;
    t.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        t,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    let _ = t.read_to_string(&mut text);
    text.starts_with("HTTP/1.1 200")
        .then(|| text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()))
        .flatten()
}

/// An LL-HLS viewer of `app/cam` for `secs`, reloading its chunklist
/// every 300 ms: in each second, how many times its newest part changed.
fn llhls_viewer(port: u16, secs: u64) -> std::thread::JoinHandle<Vec<u32>> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut moved = vec![0u32; secs as usize];
        let mut chunklist = None;
        let mut last_part = String::new();
        while start.elapsed() < Duration::from_secs(secs) {
            if chunklist.is_none() {
                chunklist = get_200(port, "/app/cam/llhls.m3u8").and_then(|m| {
                    m.lines()
                        .find(|l| !l.starts_with('#') && l.contains(".m3u8"))
                        .map(|l| format!("/app/cam/{}", l.trim()))
                });
            }
            if let Some(c) = &chunklist {
                if let Some(list) = get_200(port, c) {
                    let newest = list
                        .lines()
                        .rfind(|l| l.starts_with("#EXT-X-PART:"))
                        .unwrap_or("")
                        .to_string();
                    if !newest.is_empty() && newest != last_part {
                        last_part = newest;
                        if let Some(n) = moved.get_mut(start.elapsed().as_secs() as usize) {
                            *n += 1;
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        moved
    })
}

/// Issue 40's chaos test: every flood above at once for 20 s (junk on the
/// ICE port, a WebSocket pinging and never reading, a relay client never
/// reading, 600 idle connections and 50 WHEP offers a second from other
/// addresses, an RTMP client never reading its replies) while a WHEP
/// viewer, an LL-HLS viewer and an RTMP publisher run: the viewers keep
/// getting media, the API answers, kiln's RSS stays under idle + 128 MiB,
/// and within 30 s of the floods' end it is back near idle (± 16 MiB).
#[test]
fn chaos_every_flood_at_once_while_real_clients_play() {
    let _one = serial();
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let s = server("hostile-chaos", "", true);
    let Some(mut src) = publish(&s, 90) else {
        eprintln!("SKIP: ffmpeg is missing");
        return;
    };
    // The viewers settle, then idle is read.
    let (llhls, media_port) = (s.media.llhls, s.media.rtmp);
    let secs = 50;
    let webrtc = whep_viewer(llhls, secs);
    let hls = llhls_viewer(llhls, secs);
    std::thread::sleep(Duration::from_secs(5));
    let idle = rss_kib(&s);
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let mut floods = Vec::new();
    let (ice, relay) = (s.media.ice, s.media.relay);
    // Junk on the ICE port: 100,000 datagrams a second (a 100 Mb/s link's
    // worth of small ones). Unpaced, this thread alone took one of the
    // machine's two cores from kiln and the viewers, which no sender on
    // the network can; the 2 s unpaced flood is its own test above.
    {
        let (stop, sent) = (stop.clone(), sent.clone());
        floods.push(std::thread::spawn(move || {
            let sock = UdpSocket::bind("127.0.0.5:0").unwrap();
            let junk = [0x5au8; 64];
            while !stop.load(Ordering::Relaxed) {
                let tick = Instant::now();
                for _ in 0..1000 {
                    if sock.send_to(&junk, ("127.0.0.1", ice)).is_ok() {
                        sent.fetch_add(64, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_millis(10).saturating_sub(tick.elapsed()));
            }
        }));
    }
    // A WebSocket sending Pings and never reading.
    {
        let (stop, sent) = (stop.clone(), sent.clone());
        floods.push(std::thread::spawn(move || {
            let pings: Vec<u8> = (0..4096).flat_map(|_| ws_frame(0x9, b"")).collect();
            while !stop.load(Ordering::Relaxed) {
                let mut w = ws_open(llhls, "/app/cam");
                let n = flood(&mut w, &pings, || !stop.load(Ordering::Relaxed));
                sent.fetch_add(n as u64, Ordering::Relaxed);
            }
        }));
    }
    // A relay client sending Binding requests and never reading (again
    // when closed: unallocated connections close after 10 s).
    {
        let (stop, sent) = (stop.clone(), sent.clone());
        floods.push(std::thread::spawn(move || {
            let many = relay_bindings();
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut t) = TcpStream::connect(("127.0.0.1", relay)) else {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                };
                let n = flood(&mut t, &many, || !stop.load(Ordering::Relaxed));
                sent.fetch_add(n as u64, Ordering::Relaxed);
            }
        }));
    }
    // 600 idle connections to the viewer port, and WHEP offers that never
    // do ICE, from other addresses.
    {
        let stop = stop.clone();
        floods.push(std::thread::spawn(move || {
            let mut held = Vec::new();
            for _ in 0..600 {
                if let Ok(c) = connect_from(IpAddr::from([127, 0, 0, 3]), llhls) {
                    held.push(c);
                }
            }
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
            }
        }));
    }
    {
        let stop = stop.clone();
        let port = llhls;
        floods.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut t) = connect_from(IpAddr::from([127, 0, 0, 4]), port) else {
                    continue;
                };
                let _ = t.set_read_timeout(Some(Duration::from_secs(2)));
                let _ = write!(
                    t,
                    "POST /app/cam?direction=whep HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{OFFER}",
                    OFFER.len()
                );
                let mut sink = Vec::new();
                let _ = t.read_to_end(&mut sink);
                std::thread::sleep(Duration::from_millis(20));
            }
        }));
    }
    // An RTMP client sending commands and never reading the answers.
    {
        let (stop, sent) = (stop.clone(), sent.clone());
        floods.push(std::thread::spawn(move || {
            use kiln::rtmp::amf0::Amf0Value;
            let many: Vec<u8> = (0..2000)
                .flat_map(|i| rtmp_command("createStream", 2.0 + f64::from(i), &[Amf0Value::Null]))
                .collect();
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut t) = rtmp_connected(media_port, "app") else {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                };
                let n = flood(&mut t, &many, || !stop.load(Ordering::Relaxed));
                sent.fetch_add(n as u64, Ordering::Relaxed);
            }
        }));
    }
    // 20 s of all of it: the API answers each second, RSS is sampled.
    let start = Instant::now();
    let (mut peak, mut api_ok, mut api_asked) = (idle, 0, 0);
    while start.elapsed() < Duration::from_secs(20) {
        api_asked += 1;
        if s.request("GET", "/v1/stats/current", None).status == 200 {
            api_ok += 1;
        }
        peak = peak.max(rss_kib(&s));
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::Relaxed);
    for f in floods {
        let _ = f.join();
    }
    let ended = Instant::now();
    let back = wait_until(Duration::from_secs(30), || {
        (rss_kib(&s) <= idle + 16 * 1024).then_some(())
    });
    let recovered = ended.elapsed();
    let now_rss = rss_kib(&s);
    let frames = webrtc.join().unwrap();
    let segments = hls.join().unwrap();
    let _ = src.kill();
    let _ = src.wait();
    // The floods ran from second 5 to 25 of the viewers' time.
    let during = 6..25;
    let dark_webrtc: Vec<usize> = during.clone().filter(|&i| frames[i] == 0).collect();
    let hls_seen: Vec<u32> = segments[during.clone()].to_vec();
    eprintln!(
        "RELIABILITY: chaos, every flood at once for 20 s ({} MB sent): RSS idle {idle} KiB, peak {peak} KiB, {now_rss} KiB {:?} after (back within 16 MiB: {}); API {api_ok}/{api_asked}; WebRTC frames per second {:?}; LL-HLS new parts per second {:?}",
        sent.load(Ordering::Relaxed) >> 20,
        recovered,
        back.is_some(),
        &frames[during.clone()],
        hls_seen
    );
    assert_eq!(api_ok, api_asked, "the API did not answer every request");
    assert!(peak < idle + 128 * 1024, "RSS {idle} -> {peak} KiB");
    assert!(back.is_some(), "RSS {now_rss} KiB 30 s after (idle {idle})");
    // At most one second in a row without a frame (a keyframe interval is
    // 1 s at 25 fps; loopback under load has hiccups, not outages).
    assert!(
        dark_webrtc.windows(2).all(|w| w[1] != w[0] + 1),
        "WebRTC viewer without frames in seconds {dark_webrtc:?}: {frames:?}"
    );
    let total: u32 = frames[during.clone()].iter().sum();
    assert!(total >= 19 * 15, "{total} frames in 19 s");
    // LL-HLS moved on through the floods: a new part in every 3 s.
    assert!(
        hls_seen.windows(3).all(|w| w.iter().any(|&n| n > 0)),
        "LL-HLS stalled: new parts per second {hls_seen:?}"
    );
}
