//! What the WebRTC benches share: a blocking HTTP client (enough for WHEP
//! and Janus's HTTP API), a small WebSocket client (OME's signalling), and
//! a str0m peer set up as a viewer of kiln (WHEP: we offer), of Janus's
//! streaming plugin (it offers) or of OME's signalling, spoken by kiln and
//! OvenMediaEngine alike (the server offers).
#![allow(dead_code)]

use mio::net::UdpSocket;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use str0m::change::{SdpAnswer, SdpOffer};
use str0m::media::{Direction, MediaKind};
use str0m::{Candidate, Rtc, RtcConfig};

/// A TCP connection to `authority` (`ip:port`) from address `from` (the
/// viewer's own: a server counts its sessions per client address), or
/// from where the system chooses when `from` is unspecified.
fn connect_from(authority: &str, from: IpAddr) -> Result<TcpStream, String> {
    if from.is_unspecified() {
        return TcpStream::connect(authority).map_err(|e| e.to_string());
    }
    let to: SocketAddr = authority.parse().map_err(|e| format!("{authority}: {e}"))?;
    let s = socket2::Socket::new(
        socket2::Domain::for_address(to),
        socket2::Type::STREAM,
        None,
    )
    .map_err(|e| e.to_string())?;
    s.bind(&SocketAddr::new(from, 0).into())
        .map_err(|e| format!("bind {from}: {e}"))?;
    s.connect(&to.into()).map_err(|e| format!("{to}: {e}"))?;
    Ok(s.into())
}

/// A blocking HTTP/1.1 request (Connection: close): (status, headers, body).
pub fn http(
    method: &str,
    url: &str,
    content_type: &str,
    body: &str,
) -> Result<(u16, String, String), String> {
    http_from(IpAddr::from([0, 0, 0, 0]), method, url, content_type, body)
}

/// [`http`] from address `from`.
pub fn http_from(
    from: IpAddr,
    method: &str,
    url: &str,
    content_type: &str,
    body: &str,
) -> Result<(u16, String, String), String> {
    let rest = url.strip_prefix("http://").ok_or("http only")?;
    let (authority, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
    let mut t = connect_from(authority, from)?;
    t.set_read_timeout(Some(Duration::from_secs(40))).ok();
    write!(
        t,
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    t.read_to_end(&mut buf).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no head")?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or("no status")?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok((status, head.to_string(), body))
}

/// A chunked body, joined (Janus's HTTP transport sends them).
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

pub fn new_rtc(socket: &UdpSocket, now: Instant) -> Rtc {
    let mut rtc = RtcConfig::new()
        .set_dtls_cert(kiln::webrtc::dtls_certificate().expect("a DTLS certificate"))
        .clear_codecs()
        .enable_h264(true)
        .enable_opus(true, false)
        .set_stats_interval(None)
        .build(now);
    let local = socket.local_addr().unwrap();
    rtc.add_local_candidate(Candidate::host(local, "udp").unwrap())
        .unwrap();
    rtc
}

/// Drives `rtc` on `socket` until `until`: what it transmits is sent,
/// what arrives is handed to it, its timers run; every event goes to
/// `on_event`. False when the stack failed (the run stops there).
pub fn run(
    rtc: &mut Rtc,
    socket: &mut UdpSocket,
    until: Instant,
    mut on_event: impl FnMut(str0m::Event),
) -> bool {
    use str0m::net::{Protocol, Receive};
    use str0m::{Input, Output};
    let local = socket.local_addr().unwrap();
    let mut poll = mio::Poll::new().unwrap();
    poll.registry()
        .register(socket, mio::Token(0), mio::Interest::READABLE)
        .unwrap();
    let mut events = mio::Events::with_capacity(8);
    let mut buf = vec![0u8; 2048];
    while Instant::now() < until {
        let timeout = loop {
            match rtc.poll_output() {
                Ok(Output::Timeout(t)) => break t,
                Ok(Output::Transmit(t)) => {
                    let _ = socket.send_to(&t.contents, t.destination);
                }
                Ok(Output::Event(e)) => on_event(e),
                Err(_) => return false,
            }
        };
        let wait = timeout
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(10));
        let _ = poll.poll(&mut events, Some(wait));
        let now = Instant::now();
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let Ok(contents) = buf[..n].try_into() else {
                continue;
            };
            let input = Input::Receive(
                now,
                Receive {
                    proto: Protocol::Udp,
                    source: from,
                    destination: local,
                    contents,
                },
            );
            if rtc.handle_input(input).is_err() {
                return false;
            }
        }
        if rtc.handle_input(Input::Timeout(now)).is_err() {
            return false;
        }
    }
    true
}

/// WHEP: kiln answers our offer.
pub fn whep_setup(url: &str, socket: &UdpSocket, now: Instant) -> Result<Rtc, String> {
    let mut rtc = new_rtc(socket, now);
    let mut api = rtc.sdp_api();
    api.add_media(MediaKind::Video, Direction::RecvOnly, None, None, None);
    api.add_media(MediaKind::Audio, Direction::RecvOnly, None, None, None);
    let (offer, pending) = api.apply().ok_or("no offer")?;
    let from = socket.local_addr().map_err(|e| e.to_string())?.ip();
    let (status, _, body) =
        http_from(from, "POST", url, "application/sdp", &offer.to_sdp_string())?;
    if status != 201 {
        return Err(format!("WHEP {status}: {body}"));
    }
    let answer = SdpAnswer::from_sdp_string(&body).map_err(|e| e.to_string())?;
    rtc.sdp_api()
        .accept_answer(pending, answer)
        .map_err(|e| e.to_string())?;
    Ok(rtc)
}

pub fn janus_json(url: &str, body: serde_json::Value) -> Result<serde_json::Value, String> {
    let (status, _, text) = http("POST", url, "application/json", &body.to_string())?;
    if status != 200 {
        return Err(format!("janus {status}: {text}"));
    }
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

fn txn() -> String {
    format!(
        "{:x}",
        Instant::now().elapsed().as_nanos() ^ u128::from(std::process::id())
    )
}

/// Janus's streaming plugin: it offers, we answer.
pub fn janus_setup(
    base: &str,
    mountpoint: u64,
    socket: &UdpSocket,
    now: Instant,
) -> Result<Rtc, String> {
    let s = janus_json(
        base,
        serde_json::json!({"janus":"create","transaction":txn()}),
    )?;
    let sid = s["data"]["id"].as_u64().ok_or("no session")?;
    let surl = format!("{base}/{sid}");
    let h = janus_json(
        &surl,
        serde_json::json!({"janus":"attach","plugin":"janus.plugin.streaming","transaction":txn()}),
    )?;
    let hid = h["data"]["id"].as_u64().ok_or("no handle")?;
    let hurl = format!("{surl}/{hid}");
    janus_json(
        &hurl,
        serde_json::json!({"janus":"message","transaction":txn(),"body":{"request":"watch","id":mountpoint}}),
    )?;
    // The offer comes on the long poll.
    let deadline = Instant::now() + Duration::from_secs(20);
    let offer = loop {
        if Instant::now() > deadline {
            return Err("no offer from janus".into());
        }
        let (_, _, text) = http("GET", &format!("{surl}?maxev=1"), "application/json", "")?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        if let Some(sdp) = v["jsep"]["sdp"].as_str() {
            break sdp.to_string();
        }
    };
    let mut rtc = new_rtc(socket, now);
    let offer = SdpOffer::from_sdp_string(&offer).map_err(|e| e.to_string())?;
    let answer = rtc
        .sdp_api()
        .accept_offer(offer)
        .map_err(|e| e.to_string())?;
    janus_json(
        &hurl,
        serde_json::json!({"janus":"message","transaction":txn(),"body":{"request":"start"},
            "jsep":{"type":"answer","sdp":answer.to_sdp_string()}}),
    )?;
    Ok(rtc)
}

/// One OME signalling WebSocket, held open for the session's life (OME
/// and kiln end the session when it closes).
pub struct OmeSocket {
    stream: TcpStream,
    last_sent: Instant,
}

/// A WebSocket frame from the client (masked; the mask need not be
/// secret here).
fn ws_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    kiln::http::ws::masked(opcode, payload, *b"kiln")
}

/// Reads one whole server frame (unmasked): (opcode, payload).
fn ws_read(t: &mut TcpStream) -> Result<(u8, Vec<u8>), String> {
    let mut head = [0u8; 2];
    t.read_exact(&mut head).map_err(|e| e.to_string())?;
    let len = match head[1] & 0x7f {
        126 => {
            let mut b = [0u8; 2];
            t.read_exact(&mut b).map_err(|e| e.to_string())?;
            u64::from(u16::from_be_bytes(b))
        }
        127 => {
            let mut b = [0u8; 8];
            t.read_exact(&mut b).map_err(|e| e.to_string())?;
            u64::from_be_bytes(b)
        }
        n => u64::from(n),
    };
    if len > 1 << 20 {
        return Err(format!("a {len}-byte WebSocket frame"));
    }
    let mut payload = vec![0u8; len as usize];
    t.read_exact(&mut payload).map_err(|e| e.to_string())?;
    Ok((head[0] & 0x0f, payload))
}

impl OmeSocket {
    /// `ws://host:port/app/stream` from address `from`: the upgrade,
    /// answered 101.
    pub fn open(url: &str, from: IpAddr) -> Result<OmeSocket, String> {
        let rest = url.strip_prefix("ws://").ok_or("ws only")?;
        let (authority, path) = rest
            .split_once('/')
            .map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
        let mut t = connect_from(authority, from)?;
        t.set_read_timeout(Some(Duration::from_secs(20))).ok();
        t.set_nodelay(true).ok();
        write!(
            t,
            "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: a2lsbi1iZW5jaC1rZXkhIQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .map_err(|e| e.to_string())?;
        // The head, byte by byte: no frame after it is swallowed.
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            t.read_exact(&mut b).map_err(|e| format!("upgrade: {e}"))?;
            head.push(b[0]);
            if head.len() > 8192 {
                return Err("upgrade: head too long".into());
            }
        }
        let head = String::from_utf8_lossy(&head);
        if !head.starts_with("HTTP/1.1 101") {
            return Err(format!("upgrade: {}", head.lines().next().unwrap_or("")));
        }
        Ok(OmeSocket {
            stream: t,
            last_sent: Instant::now(),
        })
    }

    pub fn send_json(&mut self, v: &serde_json::Value) -> Result<(), String> {
        self.last_sent = Instant::now();
        self.stream
            .write_all(&ws_frame(0x1, v.to_string().as_bytes()))
            .map_err(|e| e.to_string())
    }

    /// The next text message (Pings answered, other frames skipped).
    pub fn recv_json(&mut self) -> Result<serde_json::Value, String> {
        loop {
            let (op, payload) = ws_read(&mut self.stream)?;
            match op {
                0x1 => return serde_json::from_slice(&payload).map_err(|e| e.to_string()),
                0x8 => return Err("the server closed the WebSocket".into()),
                0x9 => {
                    let pong = ws_frame(0xA, &payload);
                    self.stream.write_all(&pong).map_err(|e| e.to_string())?;
                }
                _ => {}
            }
        }
    }

    /// Once set up: a non-blocking socket the caller keeps alive with
    /// [`OmeSocket::keep_alive`].
    pub fn detach(&mut self) {
        self.stream.set_nonblocking(true).ok();
    }

    /// What the server sent since (notifications, Pings) is read and
    /// dropped; every 10 s an unsolicited Pong (RFC 6455 5.5.3: a
    /// heartbeat) tells the server the client is there, as a browser's
    /// answers to its Pings do.
    pub fn keep_alive(&mut self, now: Instant) {
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.stream.read(&mut buf) {
            if n == 0 {
                break;
            }
        }
        if now.duration_since(self.last_sent) >= Duration::from_secs(10) {
            self.last_sent = now;
            let _ = self.stream.write_all(&ws_frame(0xA, b"bench"));
        }
    }
}

/// OME's signalling (kiln and OvenMediaEngine): `request_offer`, the
/// server's offer with its candidates in the JSON, our answer. OME is
/// always the DTLS server and offers `actpass`: read as `passive`, so this
/// peer answers `active` (as OvenPlayer's browser does).
pub fn ome_setup(url: &str, socket: &UdpSocket, now: Instant) -> Result<(Rtc, OmeSocket), String> {
    let mut ws = OmeSocket::open(url, socket.local_addr().map_err(|e| e.to_string())?.ip())?;
    ws.send_json(&serde_json::json!({"command": "request_offer"}))?;
    let offer = ws.recv_json()?;
    if offer["command"] != "offer" {
        return Err(format!("no offer: {offer}"));
    }
    let id = offer["id"].as_i64().ok_or("an offer without an id")?;
    let mut sdp = offer["sdp"]["sdp"]
        .as_str()
        .ok_or("an offer without SDP")?
        .replace("a=setup:actpass", "a=setup:passive");
    if !sdp.ends_with("\r\n") {
        sdp.push_str("\r\n");
    }
    // The candidates travel in the JSON only: into the last media section.
    for c in offer["candidates"].as_array().into_iter().flatten() {
        if let Some(c) = c["candidate"].as_str() {
            sdp.push_str(&format!("a={c}\r\n"));
        }
    }
    let mut rtc = new_rtc(socket, now);
    let offer_sdp = SdpOffer::from_sdp_string(&sdp).map_err(|e| e.to_string())?;
    let answer = rtc
        .sdp_api()
        .accept_offer(offer_sdp)
        .map_err(|e| e.to_string())?;
    ws.send_json(&serde_json::json!({
        "command": "answer", "id": id, "peer_id": 0,
        "sdp": {"type": "answer", "sdp": answer.to_sdp_string()},
    }))?;
    ws.detach();
    Ok((rtc, ws))
}
