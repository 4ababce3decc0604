//! Added latency of an RTMP relay (kiln or nginx-rtmp), the "added
//! latency" row of BENCHMARKS.md.
//!
//! This program is both ends of the relay's path: it publishes a real FLV
//! file over RTMP to the relay at the file's own pace (like `ffmpeg -re`),
//! and it is the RTMP server the relay pushes to. For every video frame it
//! takes the time from just before the frame's bytes are written to the
//! publishing socket to just after the sink has parsed the whole frame, so
//! the figure is the relay's ingest-read-to-push-write time plus two
//! loopback hops and this program's own parsing, the same for every relay.
//! Frames are matched by a hash of their payload (the relay may rewrite
//! timestamps and headers, never the payload); frames sent in the first
//! `--warm` seconds are not counted (kiln starts a push with the last GOP,
//! which is old by design).
//!
//! ```text
//! cargo bench --bench latency -- --file src.flv \
//!     --publish rtmp://127.0.0.1:1935/app/src --sink-port 19350 \
//!     --seconds 20 --warm 3
//! ```
//!
//! With `--llhls http://host:port/app/stream` instead of `--sink-port`, the
//! other end is an LL-HLS viewer of the relay (kiln): it asks for each
//! preload-hinted part before it exists (the request waits in kiln until
//! the part is cut), and the time is taken when the whole part has been
//! read; the video samples in the part's `mdat` are matched to the frames
//! sent the same way. That is the issue-12 figure "a frame entering the
//! RTMP ingest to the part holding it being served": every frame waits for
//! its part to close, so expect about one part duration for the first frame
//! of each part and one frame interval for the last.
//!
//! Prints one line: `latency_us <p50> <p90> <p99> <max> <frames matched>
//! <video frames sent after warm-up>`.
use bytes::Bytes;
use kiln::codec::nal::{annexb_units, length_prefixed_units};
use kiln::media::{CodecConfig, Frame, MediaKind, Track};
use kiln::rtmp::flv::TagIngest;
use kiln::rtmp::{
    ClientConfig, ClientSession, ClientState, ServerConfig, ServerEvent, ServerSession,
};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[cfg(feature = "webrtc")]
#[path = "support/webrtc_client.rs"]
mod webrtc_client;

#[derive(Clone)]
struct Args {
    file: String,
    publish: String,
    sink_port: u16,
    llhls: Option<String>,
    /// A WebRTC viewer of kiln (WHEP URL) or of Janus (its HTTP API URL,
    /// with the mountpoint and where its RTP goes).
    whep: Option<String>,
    janus: Option<String>,
    /// OME's signalling (`ws://host:port/app/key`), kiln's or OME's own.
    ome: Option<String>,
    mountpoint: u64,
    rtp: Option<String>,
    local_ip: String,
    seconds: f64,
    warm: f64,
}

fn args() -> Args {
    let all: Vec<String> = std::env::args().collect();
    let get = |name: &str| {
        all.iter()
            .position(|a| a == name)
            .and_then(|i| all.get(i + 1))
            .cloned()
    };
    let usage = "usage: latency --file F.flv (--publish rtmp://host:port/app/key (--sink-port P | --llhls http://host:port/app/key | --whep http://host:port/app/key?direction=whep | --ome ws://host:port/app/key) | --rtp host:port --janus http://host:port/janus [--mountpoint ID] [--local-ip IP]) [--seconds S] [--warm W]";
    let llhls = get("--llhls");
    let whep = get("--whep");
    let janus = get("--janus");
    let ome = get("--ome");
    let other_sink = llhls.is_some() || whep.is_some() || janus.is_some() || ome.is_some();
    let rtp = get("--rtp");
    Args {
        file: get("--file").expect(usage),
        publish: get("--publish")
            .or(rtp.as_ref().map(|_| String::new()))
            .expect(usage),
        sink_port: get("--sink-port")
            .and_then(|p| p.parse().ok())
            .or(other_sink.then_some(0))
            .expect(usage),
        llhls,
        whep,
        janus,
        ome,
        mountpoint: get("--mountpoint")
            .and_then(|m| m.parse().ok())
            .unwrap_or(1),
        rtp,
        local_ip: get("--local-ip").unwrap_or_else(|| "127.0.0.1".into()),
        seconds: get("--seconds")
            .and_then(|s| s.parse().ok())
            .unwrap_or(20.0),
        warm: get("--warm").and_then(|s| s.parse().ok()).unwrap_or(3.0),
    }
}

/// The file's tracks and frames (FLV tags through kiln's tag parser).
fn read_flv(path: &str) -> (Vec<Track>, Vec<Frame>) {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(data.starts_with(b"FLV"), "{path}: not an FLV file");
    let header_len = u32::from_be_bytes(data[5..9].try_into().unwrap()) as usize;
    let mut pos = header_len + 4;
    let mut ingest = TagIngest::default();
    let mut frames = Vec::new();
    while pos + 11 <= data.len() {
        let kind = data[pos];
        let size = u32::from_be_bytes([0, data[pos + 1], data[pos + 2], data[pos + 3]]) as usize;
        let ts = u32::from_be_bytes([data[pos + 7], data[pos + 4], data[pos + 5], data[pos + 6]]);
        let body_at = pos + 11;
        if body_at + size > data.len() {
            break;
        }
        let body = Bytes::copy_from_slice(&data[body_at..body_at + size]);
        let outcome = match kind {
            8 => ingest.audio(ts, &body),
            9 => ingest.video(ts, &body),
            _ => Ok(Default::default()),
        };
        if outcome.is_ok() {
            frames.extend(ingest.frames());
        }
        pos = body_at + size + 4;
    }
    let tracks = ingest.tracks();
    assert!(!frames.is_empty() && !tracks.is_empty(), "{path}: no media");
    (tracks, frames)
}

fn key(data: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    data.hash(&mut h);
    h.finish()
}

/// A WebRTC frame's key: the hash of its last slice NAL unit (types 1-5).
/// An RTP path rewrites the rest (start codes for lengths, parameter sets
/// added, access unit delimiters dropped), never a slice. `data` is the
/// probe's length-prefixed frame or a viewer's Annex B one.
fn slice_key(data: &[u8]) -> u64 {
    let is_slice = |n: &[u8]| n.first().is_some_and(|b| (1..=5).contains(&(b & 0x1f)));
    let last = if data.starts_with(&[0, 0, 1]) || data.starts_with(&[0, 0, 0, 1]) {
        annexb_units(data).filter(|n| is_slice(n)).last()
    } else {
        length_prefixed_units(data, 4)
            .filter_map(Result::ok)
            .filter(|n| is_slice(n))
            .last()
    };
    key(last.unwrap_or(data))
}

/// Writes all of `session`'s pending output (the socket may be
/// non-blocking).
fn flush(sock: &mut TcpStream, out: &[u8]) -> usize {
    let mut done = 0;
    while done < out.len() {
        match sock.write(&out[done..]) {
            Ok(0) => panic!("relay closed the connection"),
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_micros(50))
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!("writing to the relay: {e}"),
        }
    }
    done
}

type Sends = Arc<Mutex<HashMap<u64, Vec<Instant>>>>;

/// Where the probe's frames go: an RTMP publish (kiln, nginx-rtmp) or RTP
/// (Janus's streaming plugin).
trait Publisher {
    /// Reads what the other end sent since the last frame (acks, pings).
    fn service(&mut self) {}
    fn send(&mut self, frame: &Frame);
    fn close(&mut self) {}
}

struct RtmpPublisher {
    sock: TcpStream,
    c: ClientSession,
    buf: Vec<u8>,
}

impl RtmpPublisher {
    fn connect(url: &str, tracks: &[Track]) -> Self {
        let config = ClientConfig::from_url(url).expect("--publish: rtmp://host:port/app/key");
        let host = url
            .split("://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap();
        let mut sock = TcpStream::connect(host).unwrap_or_else(|e| panic!("{host}: {e}"));
        sock.set_nodelay(true).unwrap();
        let mut c = ClientSession::new(config);
        let mut buf = vec![0u8; 64 * 1024];
        while c.state() != ClientState::Publishing {
            let n = flush(&mut sock, c.pending_output());
            c.consume_output(n);
            assert!(
                c.state() != ClientState::Failed,
                "publish refused: {:?}",
                c.poll_event()
            );
            let n = sock.read(&mut buf).expect("reading the relay");
            assert!(n > 0, "the relay closed the connection during set-up");
            c.handle_input(&buf[..n]).expect("relay's RTMP");
        }
        while c.poll_event().is_some() {}
        c.send_tracks(tracks).unwrap();
        let n = flush(&mut sock, c.pending_output());
        c.consume_output(n);
        sock.set_nonblocking(true).unwrap();
        RtmpPublisher { sock, c, buf }
    }
}

impl Publisher for RtmpPublisher {
    fn service(&mut self) {
        loop {
            match self.sock.read(&mut self.buf) {
                Ok(0) => panic!("the relay closed the publishing connection"),
                Ok(n) => self.c.handle_input(&self.buf[..n]).expect("relay's RTMP"),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => panic!("reading the relay: {e}"),
            }
        }
    }

    fn send(&mut self, frame: &Frame) {
        self.c.send_frame(frame).unwrap();
        let n = flush(&mut self.sock, self.c.pending_output());
        self.c.consume_output(n);
    }

    fn close(&mut self) {
        self.c.close();
        let n = flush(&mut self.sock, self.c.pending_output());
        self.c.consume_output(n);
    }
}

/// The video track as RTP (payload type 100, RFC 6184 packetization mode
/// 1: single NAL units and FU-A, the SPS/PPS before each keyframe), what
/// `ffmpeg -f rtp` gives Janus in the fan-out bench.
struct RtpPublisher {
    sock: std::net::UdpSocket,
    video: kiln::media::TrackId,
    params: Vec<Bytes>,
    seq: u16,
    packet: Vec<u8>,
}

const RTP_PAYLOAD: usize = 1188;

impl RtpPublisher {
    fn connect(dest: &str, tracks: &[Track]) -> Self {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.connect(dest)
            .unwrap_or_else(|e| panic!("--rtp {dest}: {e}"));
        let video = tracks
            .iter()
            .find(|t| t.codec == kiln::media::Codec::H264)
            .expect("an H.264 track");
        let params = match &video.config {
            CodecConfig::H264 { sps, pps } => sps.iter().chain(pps).cloned().collect(),
            _ => Vec::new(),
        };
        RtpPublisher {
            sock,
            video: video.id,
            params,
            seq: 0,
            packet: Vec::with_capacity(1500),
        }
    }

    fn packet(&mut self, ts: u32, marker: bool, head: &[u8], body: &[u8]) {
        self.packet.clear();
        self.packet
            .extend_from_slice(&[0x80, 100 | if marker { 0x80 } else { 0 }]);
        self.packet.extend_from_slice(&self.seq.to_be_bytes());
        self.packet.extend_from_slice(&ts.to_be_bytes());
        self.packet.extend_from_slice(&0x6b69_6c6eu32.to_be_bytes());
        self.packet.extend_from_slice(head);
        self.packet.extend_from_slice(body);
        self.seq = self.seq.wrapping_add(1);
        let _ = self.sock.send(&self.packet);
    }
}

impl Publisher for RtpPublisher {
    fn send(&mut self, frame: &Frame) {
        if frame.track != self.video {
            return;
        }
        let ts = frame.pts as u32;
        let mut nals: Vec<&[u8]> = Vec::new();
        let params = std::mem::take(&mut self.params);
        if frame.keyframe {
            nals.extend(params.iter().map(|p| &p[..]));
        }
        nals.extend(length_prefixed_units(&frame.data, 4).filter_map(Result::ok));
        let count = nals.len();
        for (i, nal) in nals.into_iter().enumerate() {
            let last_nal = i + 1 == count;
            if nal.len() <= RTP_PAYLOAD {
                self.packet(ts, last_nal, &[], nal);
                continue;
            }
            let (header, mut rest) = (nal[0], &nal[1..]);
            let indicator = (header & 0xe0) | 28;
            let mut start = true;
            while !rest.is_empty() {
                let take = rest.len().min(RTP_PAYLOAD - 2);
                let end = take == rest.len();
                let fu =
                    (header & 0x1f) | if start { 0x80 } else { 0 } | if end { 0x40 } else { 0 };
                self.packet(ts, last_nal && end, &[indicator, fu], &rest[..take]);
                rest = &rest[take..];
                start = false;
            }
        }
        self.params = params;
    }
}

/// Publishes the file in a loop for `seconds`, recording when each video
/// frame was handed to the publisher (keyed by `frame_key`). Returns the
/// start time.
fn publish(
    a: &Args,
    out: &mut dyn Publisher,
    tracks: &[Track],
    frames: &[Frame],
    sends: &Sends,
    frame_key: fn(&[u8]) -> u64,
) -> Instant {
    let video = tracks
        .iter()
        .find(|t| t.codec.kind() == MediaKind::Video)
        .map(|t| t.id);
    let first = frames[0].dts;
    let last = frames.iter().map(|f| f.dts).max().unwrap();
    let span = last - first + 3000; // one 30 fps frame after the last (90 kHz)
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(a.seconds);
    'outer: for lap in 0.. {
        for f in frames {
            let dts = f.dts - first + lap * span;
            let due = start + Duration::from_micros((dts as u64) * 100 / 9);
            if due >= end {
                break 'outer;
            }
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            out.service();
            let frame = Frame {
                pts: f.pts - first + lap * span,
                dts,
                ..f.clone()
            };
            let t = Instant::now();
            out.send(&frame);
            if Some(f.track) == video {
                sends
                    .lock()
                    .unwrap()
                    .entry(frame_key(&f.data))
                    .or_default()
                    .push(t);
            }
        }
    }
    out.close();
    start
}

/// Takes the relay's push; returns (payload hash, arrival) per video frame.
fn sink(listener: TcpListener, stop: Arc<Mutex<bool>>) -> Vec<(u64, Instant)> {
    let (mut sock, _) = listener.accept().expect("the relay connects to the sink");
    sock.set_nodelay(true).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut s = ServerSession::new(ServerConfig::default());
    let mut buf = vec![0u8; 256 * 1024];
    let mut video = None;
    let mut got = Vec::new();
    loop {
        let n = match sock.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if *stop.lock().unwrap() {
                    break;
                }
                continue;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if s.handle_input(&buf[..n]).is_err() {
            break;
        }
        let now = Instant::now();
        while let Some(ev) = s.poll_event() {
            match ev {
                ServerEvent::Connect { .. } => s.accept_connect(),
                ServerEvent::Publish { .. } => s.accept_publish(),
                ServerEvent::TracksChanged(tracks) => {
                    video = tracks
                        .iter()
                        .find(|t| t.codec.kind() == MediaKind::Video)
                        .map(|t| t.id)
                }
                ServerEvent::Frame(f) if Some(f.track) == video => got.push((key(&f.data), now)),
                _ => {}
            }
        }
        let out = s.pending_output().to_vec();
        let n = flush(&mut sock, &out);
        s.consume_output(n);
    }
    got
}

/// A keep-alive HTTP/1.1 client for one host (kiln answers with
/// Content-Length).
struct Http {
    host: String,
    conn: Option<std::io::BufReader<TcpStream>>,
}

impl Http {
    /// (status, body) of `GET path`; reconnects once if the connection
    /// was closed.
    fn get(&mut self, path: &str) -> std::io::Result<(u16, Vec<u8>)> {
        use std::io::BufRead;
        for attempt in 0..2 {
            if self.conn.is_none() {
                let s = TcpStream::connect(&self.host)?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(Duration::from_secs(30)))?;
                self.conn = Some(std::io::BufReader::new(s));
            }
            let r = self.conn.as_mut().unwrap();
            let req = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", self.host);
            let sent = r.get_mut().write_all(req.as_bytes());
            let mut line = String::new();
            if sent.is_err() || r.read_line(&mut line).unwrap_or(0) == 0 {
                self.conn = None;
                if attempt == 0 {
                    continue;
                }
                return Err(ErrorKind::ConnectionAborted.into());
            }
            let status = line
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let mut len = 0;
            loop {
                let mut h = String::new();
                r.read_line(&mut h)?;
                let h = h.trim_end();
                if h.is_empty() {
                    break;
                }
                if let Some((n, v)) = h.split_once(':') {
                    if n.eq_ignore_ascii_case("content-length") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0; len];
            r.read_exact(&mut body)?;
            return Ok((status, body));
        }
        unreachable!()
    }
}

/// The samples of a `moof`+`mdat` part (ISO/IEC 14496-12 8.8.7-8.8.8:
/// tfhd defaults, trun sizes and data offset from the moof).
fn part_samples(part: &[u8]) -> Vec<&[u8]> {
    fn boxes(mut d: &[u8]) -> Vec<([u8; 4], &[u8])> {
        let mut v = Vec::new();
        while d.len() >= 8 {
            let size = u32::from_be_bytes(d[..4].try_into().unwrap()) as usize;
            if size < 8 || size > d.len() {
                break;
            }
            v.push((d[4..8].try_into().unwrap(), &d[8..size]));
            d = &d[size..];
        }
        v
    }
    let find = |d, k: &[u8; 4]| boxes(d).into_iter().find(|(n, _)| n == k).map(|(_, b)| b);
    let Some(traf) = find(part, b"moof").and_then(|m| find(m, b"traf")) else {
        return Vec::new();
    };
    let (Some(tfhd), Some(trun)) = (find(traf, b"tfhd"), find(traf, b"trun")) else {
        return Vec::new();
    };
    let be = |d: &[u8], at: usize| u32::from_be_bytes(d[at..at + 4].try_into().unwrap());
    let tf = be(tfhd, 0) & 0xFF_FFFF;
    let mut at = 8;
    if tf & 1 != 0 {
        at += 8;
    }
    if tf & 2 != 0 {
        at += 4;
    }
    if tf & 8 != 0 {
        at += 4;
    }
    let default_size = if tf & 0x10 != 0 { be(tfhd, at) } else { 0 };
    let tr = be(trun, 0) & 0xFF_FFFF;
    let count = be(trun, 4) as usize;
    let mut at = 8;
    let mut offset = 0;
    if tr & 1 != 0 {
        offset = be(trun, at) as usize;
        at += 4;
    }
    if tr & 4 != 0 {
        at += 4;
    }
    let mut out = Vec::new();
    for _ in 0..count {
        if tr & 0x100 != 0 {
            at += 4;
        }
        let size = if tr & 0x200 != 0 {
            at += 4;
            be(trun, at - 4)
        } else {
            default_size
        } as usize;
        if tr & 0x400 != 0 {
            at += 4;
        }
        if tr & 0x800 != 0 {
            at += 4;
        }
        // the offset counts from the moof box's first byte
        let Some(sample) = part.get(offset..offset + size) else {
            break;
        };
        out.push(sample);
        offset += size;
    }
    out
}

/// An LL-HLS viewer of the relay's video chunklist: asks for each
/// preload-hinted part (kiln answers when it exists) and returns (payload
/// hash, arrival) per video sample.
fn llhls_viewer(url: &str, stop: Arc<Mutex<bool>>) -> Vec<(u64, Instant)> {
    let rest = url
        .strip_prefix("http://")
        .expect("--llhls http://host:port/app/stream");
    let (host, dir) = rest.split_at(rest.find('/').expect("--llhls needs /app/stream"));
    let mut http = Http {
        host: host.to_string(),
        conn: None,
    };
    let hint_of = |list: &str| {
        list.lines()
            .find_map(|l| l.strip_prefix("#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\""))
            .map(|u| u.trim_end_matches('"').to_string())
    };
    let mut chunklist = None;
    let mut got = Vec::new();
    while !*stop.lock().unwrap() {
        let Some(list_path) = chunklist.clone() else {
            // Wait for the stream and its first segment.
            std::thread::sleep(Duration::from_millis(20));
            if let Ok((200, master)) = http.get(&format!("{dir}/llhls.m3u8")) {
                let master = String::from_utf8_lossy(&master).into_owned();
                chunklist = master
                    .lines()
                    .find(|l| l.starts_with("chunklist_") && l.contains("_video_"))
                    .map(|l| format!("{dir}/{l}"));
            }
            continue;
        };
        let Ok((200, list)) = http.get(&list_path) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let list = String::from_utf8_lossy(&list);
        let Some(hint) = hint_of(&list) else {
            if list.contains("#EXT-X-ENDLIST") {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        match http.get(&format!("{dir}/{hint}")) {
            Ok((200, part)) => {
                let now = Instant::now();
                got.extend(part_samples(&part).into_iter().map(|s| (key(s), now)));
            }
            Ok(_) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break,
        }
    }
    got
}

/// A WebRTC viewer (a str0m peer, as the fan-out bench's) of kiln over
/// WHEP or of Janus's mountpoint; returns (slice key, arrival) per video
/// frame str0m assembled. The arrival is when the datagram that completed
/// the frame was read.
#[cfg(feature = "webrtc")]
fn webrtc_viewer(a: &Args, stop: Arc<Mutex<bool>>) -> Vec<(u64, Instant)> {
    use mio::net::UdpSocket;
    use mio::{Events, Interest, Poll, Token};
    use str0m::net::{Protocol, Receive};
    use str0m::{Event, Input, Output};
    let mut poll = Poll::new().unwrap();
    let mut socket = UdpSocket::bind(format!("{}:0", a.local_ip).parse().unwrap()).unwrap();
    poll.registry()
        .register(&mut socket, Token(0), Interest::READABLE)
        .unwrap();
    let local = socket.local_addr().unwrap();
    let setup = Instant::now() + Duration::from_secs(20);
    let (mut rtc, mut ws) = loop {
        let now = Instant::now();
        let rtc = match (&a.whep, &a.janus, &a.ome) {
            (Some(url), _, _) => webrtc_client::whep_setup(url, &socket, now).map(|r| (r, None)),
            (_, Some(url), _) => {
                webrtc_client::janus_setup(url, a.mountpoint, &socket, now).map(|r| (r, None))
            }
            (_, _, Some(url)) => {
                webrtc_client::ome_setup(url, &socket, now).map(|(r, w)| (r, Some(w)))
            }
            _ => unreachable!(),
        };
        match rtc {
            Ok(r) => break r,
            // The stream may not exist yet: the publisher starts with us.
            Err(e) if now < setup => {
                eprintln!("viewer set-up: {e}; again");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("viewer set-up: {e}"),
        }
    };
    /// Sends what str0m has to send, keeps the video frames; returns its
    /// next timeout.
    fn drain(
        rtc: &mut str0m::Rtc,
        socket: &UdpSocket,
        arrival: Instant,
        got: &mut Vec<(u64, Instant)>,
    ) -> Instant {
        loop {
            match rtc.poll_output() {
                Ok(Output::Timeout(t)) => return t,
                Ok(Output::Transmit(t)) => {
                    let _ = socket.send_to(&t.contents, t.destination);
                }
                Ok(Output::Event(Event::MediaData(m))) => {
                    if m.params.spec().codec.is_video() {
                        got.push((slice_key(&m.data), arrival));
                    }
                }
                Ok(Output::Event(_)) => {}
                Err(e) => panic!("viewer: {e}"),
            }
        }
    }
    let mut events = Events::with_capacity(64);
    let mut buf = vec![0u8; 2048];
    let mut got = Vec::new();
    let mut timeout;
    let mut arrival = Instant::now();
    while !*stop.lock().unwrap() {
        if let Some(ws) = ws.as_mut() {
            ws.keep_alive(Instant::now());
        }
        timeout = drain(&mut rtc, &socket, arrival, &mut got);
        let wait = timeout
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(50));
        poll.poll(&mut events, Some(wait)).unwrap();
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            arrival = Instant::now();
            let Ok(contents) = buf[..n].try_into() else {
                continue;
            };
            let input = Input::Receive(
                arrival,
                Receive {
                    proto: Protocol::Udp,
                    source: from,
                    destination: local,
                    contents,
                },
            );
            if rtc.handle_input(input).is_err() {
                break;
            }
            // Drained after each datagram, so a frame's arrival is its own.
            timeout = drain(&mut rtc, &socket, arrival, &mut got);
        }
        if Instant::now() >= timeout {
            let _ = rtc.handle_input(Input::Timeout(Instant::now()));
        }
    }
    got
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let a = args();
    let (tracks, frames) = read_flv(&a.file);
    let stop = Arc::new(Mutex::new(false));
    let webrtc = a.whep.is_some() || a.janus.is_some() || a.ome.is_some();
    let frame_key: fn(&[u8]) -> u64 = if webrtc { slice_key } else { key };
    let sink_thread = if webrtc {
        #[cfg(not(feature = "webrtc"))]
        panic!("--whep, --janus and --ome need the webrtc feature");
        #[cfg(feature = "webrtc")]
        {
            let stop = stop.clone();
            let a = a.clone();
            std::thread::spawn(move || webrtc_viewer(&a, stop))
        }
    } else if let Some(url) = a.llhls.clone() {
        let stop = stop.clone();
        std::thread::spawn(move || llhls_viewer(&url, stop))
    } else {
        let listener = TcpListener::bind(("127.0.0.1", a.sink_port))
            .unwrap_or_else(|e| panic!("sink port {}: {e}", a.sink_port));
        let stop = stop.clone();
        std::thread::spawn(move || sink(listener, stop))
    };
    let sends: Sends = Arc::default();
    let mut out: Box<dyn Publisher> = match &a.rtp {
        Some(dest) => Box::new(RtpPublisher::connect(dest, &tracks)),
        None => Box::new(RtmpPublisher::connect(&a.publish, &tracks)),
    };
    let start = publish(&a, out.as_mut(), &tracks, &frames, &sends, frame_key);
    std::thread::sleep(Duration::from_secs(1));
    *stop.lock().unwrap() = true;
    let arrivals = sink_thread.join().expect("sink thread");

    let counted_from = start + Duration::from_secs_f64(a.warm);
    let sends = sends.lock().unwrap();
    let sent_after_warm = sends
        .values()
        .flatten()
        .filter(|t| **t >= counted_from)
        .count();
    let mut lat: Vec<Duration> = arrivals
        .iter()
        .filter_map(|(k, at)| {
            // the latest send of this payload before it arrived
            let sent = sends.get(k)?.iter().filter(|t| *t <= at).max()?;
            (*sent >= counted_from).then(|| *at - *sent)
        })
        .collect();
    assert!(
        !lat.is_empty(),
        "no video frame arrived at the sink after the warm-up"
    );
    lat.sort();
    let us = |d: Duration| d.as_micros();
    println!(
        "latency_us {} {} {} {} {} {}",
        us(percentile(&lat, 0.5)),
        us(percentile(&lat, 0.9)),
        us(percentile(&lat, 0.99)),
        us(*lat.last().unwrap()),
        lat.len(),
        sent_after_warm
    );
}
