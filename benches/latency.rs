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
//! Prints one line: `latency_us <p50> <p90> <p99> <max> <frames matched>
//! <video frames sent after warm-up>`.
use bytes::Bytes;
use kiln::media::{Frame, MediaKind, Track};
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

struct Args {
    file: String,
    publish: String,
    sink_port: u16,
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
    let usage = "usage: latency --file F.flv --publish rtmp://host:port/app/key --sink-port P [--seconds S] [--warm W]";
    Args {
        file: get("--file").expect(usage),
        publish: get("--publish").expect(usage),
        sink_port: get("--sink-port")
            .and_then(|p| p.parse().ok())
            .expect(usage),
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
        if let Some(frame) = outcome.ok().and_then(|o| o.frame) {
            frames.push(frame);
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

/// Publishes the file in a loop for `seconds`, recording when each video
/// frame's bytes were handed to the socket. Returns the start time.
fn publish(a: &Args, tracks: &[Track], frames: &[Frame], sends: &Sends) -> Instant {
    let config = ClientConfig::from_url(&a.publish).expect("--publish: rtmp://host:port/app/key");
    let host = a
        .publish
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
            // Answer the relay (acks, pings) between frames.
            loop {
                match sock.read(&mut buf) {
                    Ok(0) => panic!("the relay closed the publishing connection"),
                    Ok(n) => c.handle_input(&buf[..n]).expect("relay's RTMP"),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => panic!("reading the relay: {e}"),
                }
            }
            let frame = Frame {
                pts: f.pts - first + lap * span,
                dts,
                ..f.clone()
            };
            c.send_frame(&frame).unwrap();
            let t = Instant::now();
            if Some(f.track) == video {
                sends
                    .lock()
                    .unwrap()
                    .entry(key(&f.data))
                    .or_default()
                    .push(t);
            }
            let n = flush(&mut sock, c.pending_output());
            c.consume_output(n);
        }
    }
    c.close();
    let n = flush(&mut sock, c.pending_output());
    c.consume_output(n);
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

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let a = args();
    let (tracks, frames) = read_flv(&a.file);
    let listener = TcpListener::bind(("127.0.0.1", a.sink_port))
        .unwrap_or_else(|e| panic!("sink port {}: {e}", a.sink_port));
    let stop = Arc::new(Mutex::new(false));
    let sink_thread = {
        let stop = stop.clone();
        std::thread::spawn(move || sink(listener, stop))
    };
    let sends: Sends = Arc::default();
    let start = publish(&a, &tracks, &frames, &sends);
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
