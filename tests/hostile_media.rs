//! Hostile peers on what keeps media for later: viewers that ask for old
//! DVR segments and never read, a publisher whose GOP never ends on an
//! application with a pre-roll, pre-roll records on a fast stream, and a
//! chaos run of the DVR and pre-roll floods at once. Each against the real
//! binary, with kiln's own RTMP client as the publisher (frames of any
//! size, at any rate); figures are printed for RELIABILITY.md.

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use serde_json::json;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One flood at a time: two at once measure the machine, not kiln.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a synthetic publisher sends.
#[derive(Clone, Copy)]
struct Pace {
    /// Bytes of each video frame.
    frame: usize,
    fps: u32,
    /// A keyframe every this many frames; None: the first frame only.
    gop: Option<u32>,
    secs: u32,
}

/// Publishes `app/{name}` over RTMP with kiln's own client: H.264 frames
/// of `pace.frame` bytes in real time. The frames it sent, or why it
/// stopped.
fn publisher(port: u16, name: &str, pace: Pace) -> std::thread::JoinHandle<Result<u32, String>> {
    let name = name.to_string();
    std::thread::spawn(move || {
        let sock = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        let (mut c, mut sock) = rtmp_publishing(sock, port, &name)?;
        c.send_tracks(&[kiln::hls::fuzz::h264()])
            .map_err(|e| e.to_string())?;
        let start = Instant::now();
        let frames = pace.secs * pace.fps;
        for i in 0..frames {
            let due = start + Duration::from_secs_f64(f64::from(i) / f64::from(pace.fps));
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            let key = match pace.gop {
                Some(g) => i % g == 0,
                None => i == 0,
            };
            let mut data = Vec::with_capacity(pace.frame);
            data.extend_from_slice(&(pace.frame as u32 - 4).to_be_bytes());
            data.push(if key { 0x65 } else { 0x41 });
            data.resize(pace.frame, (i % 251) as u8);
            let t = i64::from(i) * 90_000 / i64::from(pace.fps);
            c.send_frame(&kiln::media::Frame {
                track: 1,
                pts: t,
                dts: t,
                keyframe: key,
                data: bytes::Bytes::from(data),
            })
            .map_err(|e| e.to_string())?;
            rtmp_flush(&mut c, &mut sock)?;
        }
        Ok(frames)
    })
}

/// A TCP connection to kiln's `port` from the loopback address `from`.
fn connect_from(from: IpAddr, port: u16) -> std::io::Result<TcpStream> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    // A small window: what kiln cannot send waits in kiln, not in the
    // kernel's buffers.
    let _ = sock.set_recv_buffer_size(4096);
    sock.bind(&SocketAddr::new(from, 0).into())?;
    sock.connect(&SocketAddr::from(([127, 0, 0, 1], port)).into())?;
    Ok(sock.into())
}

fn dvr_server(tag: &str, root: &std::path::Path) -> Server {
    Server::start_with(
        tag,
        ServerOptions {
            media: true,
            llhls: Some(format!(
                "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>1</SegmentDuration><SegmentCount>3</SegmentCount>\
                 <DVR><Enable>true</Enable><TempStoragePath>{}</TempStoragePath><MaxDuration>120</MaxDuration></DVR>",
                root.display()
            )),
            ..Default::default()
        },
    )
}

/// The DVR chunklist's segments of `app/{name}` (oldest first), once at
/// least `n` are listed.
fn dvr_segments(s: &Server, name: &str, n: usize) -> Vec<String> {
    let base = format!("http://127.0.0.1:{}/app/{name}", s.media.llhls);
    wait_until(Duration::from_secs(60), || {
        let (code, master, _) = curl(&[], &format!("{base}/llhls.m3u8"));
        if code != 200 {
            return None;
        }
        let video = master
            .lines()
            .find(|l| l.starts_with("chunklist_") && l.contains("_video_"))
            .map(|l| l.split('?').next().unwrap_or(l))?
            .to_string();
        let (_, list, _) = curl(&[], &format!("{base}/{video}"));
        let segs: Vec<String> = list
            .lines()
            .filter(|l| l.starts_with("seg_"))
            .map(str::to_string)
            .collect();
        (segs.len() >= n).then_some(segs)
    })
    .unwrap_or_else(|| panic!("not {n} DVR segments\n{}", s.log_text()))
}

/// Viewers that each ask for an old DVR segment and never read: every
/// viewer's answer is the segment's file, sent from it, so kiln holds no
/// copy per viewer.
fn dvr_holders(s: &Server, segs: &[String], n: usize) -> Vec<TcpStream> {
    (0..n)
        .filter_map(|i| {
            let from = IpAddr::from([127, 0, 1, 10 + i as u8]);
            let mut t = connect_from(from, s.media.llhls).ok()?;
            let seg = &segs[i % segs.len()];
            write!(t, "GET /app/dvr/{seg} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
            Some(t)
        })
        .collect()
}

/// Twenty viewers asking for old DVR segments (about 3.8 MB each) and
/// never reading: kiln's memory grows by less than two segments' worth
/// (each viewer held its own copy: 20 segments' worth), a reader meanwhile
/// gets the segment byte for byte, and the memory is back when they go.
#[test]
fn dvr_viewers_that_never_read_hold_no_copy_of_their_segment() {
    let _one = serial();
    let root = temp_dir("hostile-dvr-root");
    let s = dvr_server("hostile-dvr", &root);
    let pace = Pace {
        frame: 128 << 10,
        fps: 30,
        gop: Some(30),
        secs: 40,
    };
    let src = publisher(s.media.rtmp, "dvr", pace);
    let all = dvr_segments(&s, "dvr", 16);
    // The live window is the last three: the rest are read from disk.
    let old: Vec<String> = all[..all.len() - 5].to_vec();
    std::thread::sleep(Duration::from_secs(1));
    let idle = rss_kib(&s);
    let holders = dvr_holders(&s, &old, 20);
    assert_eq!(holders.len(), 20);
    let mut peak = idle;
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(500));
        peak = peak.max(rss_kib(&s));
    }
    // A real viewer of the first one meanwhile: the file, whole.
    let url = format!("http://127.0.0.1:{}/app/dvr/{}", s.media.llhls, old[0]);
    let got = std::process::Command::new("curl")
        .args(["-s", "-f", "--max-time", "20", &url])
        .output()
        .unwrap();
    assert!(got.status.success(), "{url}: {}", s.log_text());
    assert!(got.stdout.len() > 3 << 20, "{}", got.stdout.len());
    assert_eq!(&got.stdout[4..8], b"moof", "an fMP4 segment");
    drop(holders);
    let _ = src.join();
    println!(
        "RELIABILITY: DVR, 20 viewers holding old segments of {} KiB each unread: RSS {idle} -> {peak} KiB",
        got.stdout.len() >> 10
    );
    assert!(
        peak < idle + 16 * 1024,
        "RSS {idle} -> {peak} KiB for 20 unread DVR answers"
    );
}

fn preroll_server(tag: &str, root: &std::path::Path) -> Server {
    Server::start_with(
        tag,
        ServerOptions {
            media: true,
            file: Some(format!(
                "<RootPath>{}</RootPath><FilePath>${{Id}}.ts</FilePath><InfoPath>${{Id}}.xml</InfoPath><MaxPreRoll>120000</MaxPreRoll>",
                root.display()
            )),
            ..Default::default()
        },
    )
}

/// Waits until `app/{name}` is live (the synthetic publisher sends video
/// only).
fn live(s: &Server, name: &str) {
    wait_until(Duration::from_secs(20), || s.live_stream(name))
        .unwrap_or_else(|| panic!("{name} never went live\n{}", s.log_text()));
}

fn metric(s: &Server, name: &str) -> u64 {
    let m = s.request("GET", "/metrics", None).body;
    m.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} in /metrics"))
}

/// A publisher that sends one keyframe and then P-frames only, at about
/// 60 Mb/s, on an application with `<MaxPreRoll>`: the history stays
/// under its 64 MiB cap, and so does kiln's memory.
#[test]
fn a_gop_without_end_does_not_grow_the_pre_roll() {
    let _one = serial();
    let root = temp_dir("hostile-preroll-root");
    let s = preroll_server("hostile-preroll", &root);
    std::thread::sleep(Duration::from_secs(1));
    let idle = rss_kib(&s);
    let pace = Pace {
        frame: 256 << 10,
        fps: 30,
        gop: None,
        secs: 20,
    };
    let src = publisher(s.media.rtmp, "one", pace);
    live(&s, "one");
    let (mut peak, mut held) = (idle, 0);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(18) {
        std::thread::sleep(Duration::from_millis(500));
        peak = peak.max(rss_kib(&s));
        held = held.max(metric(&s, "kiln_record_preroll_bytes"));
    }
    let sent = src.join().unwrap();
    let after = wait_until(Duration::from_secs(30), || {
        let now = rss_kib(&s);
        (now <= idle + 16 * 1024).then_some(now)
    });
    println!(
        "RELIABILITY: pre-roll, one keyframe then P-frames at 60 Mb/s for 20 s: held at most {} MiB, RSS idle {idle}, peak {peak}, after {after:?} KiB ({sent:?} frames)",
        held >> 20
    );
    assert!(held <= 64 << 20, "{held}");
    assert!(peak < idle + 128 * 1024, "RSS {idle} -> {peak} KiB");
    assert!(after.is_some(), "RSS not back near idle {idle} KiB");
}

fn call(s: &Server, action: &str, body: serde_json::Value) -> HttpResponse {
    s.request(
        "POST",
        &format!("/v1/vhosts/default/apps/app:{action}"),
        Some(&body.to_string()),
    )
}

fn record_state(s: &Server, id: &str) -> String {
    let r = call(s, "records", json!({ "id": id })).json();
    r["response"][0]["state"]
        .as_str()
        .unwrap_or("gone")
        .to_string()
}

/// Two records with two minutes of pre-roll on a 60 Mb/s stream, one
/// after the other: each history (64 MiB) goes to the writer as it
/// drains, and neither record fails ("the disk is not keeping up").
#[test]
fn two_pre_roll_records_on_a_fast_stream_both_record() {
    let _one = serial();
    let root = temp_dir("hostile-preroll2-root");
    let s = preroll_server("hostile-preroll2", &root);
    let pace = Pace {
        frame: 256 << 10,
        fps: 30,
        gop: Some(30),
        secs: 30,
    };
    let src = publisher(s.media.rtmp, "fast", pace);
    live(&s, "fast");
    std::thread::sleep(Duration::from_secs(12));
    for id in ["a", "b"] {
        let r = call(
            &s,
            "startRecord",
            json!({"id": id, "stream": {"name": "fast"}, "preRoll": 120000}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let mut states = Vec::new();
    for _ in 0..8 {
        std::thread::sleep(Duration::from_secs(1));
        states.push((record_state(&s, "a"), record_state(&s, "b")));
    }
    for id in ["a", "b"] {
        assert_eq!(call(&s, "stopRecord", json!({ "id": id })).status, 200);
    }
    let _ = src.join();
    println!("RELIABILITY: two 120 s pre-roll records at 60 Mb/s: states {states:?}");
    assert!(
        states
            .iter()
            .all(|(a, b)| a == "recording" && b == "recording"),
        "{states:?}\n{}",
        s.log_text()
    );
    for id in ["a", "b"] {
        let file = root.join(format!("{id}.ts"));
        let len = wait_until(Duration::from_secs(20), || {
            root.join(format!("{id}.xml"))
                .exists()
                .then(|| std::fs::metadata(&file).map(|m| m.len()).ok())
                .flatten()
        })
        .unwrap_or_else(|| panic!("{id}: no file\n{}", s.log_text()));
        // The pre-roll (the capped history, over 32 MiB) and 8 s after.
        assert!(len > 96 << 20, "{id}: {len} bytes");
    }
}

/// A publisher that alternates two AAC configurations, a thousand tags,
/// on an application with an HLS DVR: every change is a new track set
/// (a new packager), and none of it floods the log (a DVR folder never
/// made is nothing to delete; what one peer causes again and again is
/// logged once a minute).
#[test]
fn alternating_track_configurations_do_not_flood_the_log() {
    let _one = serial();
    let root = temp_dir("hostile-logflood-root");
    let s = Server::start_with(
        "hostile-logflood",
        ServerOptions {
            media: true,
            hls: Some(format!(
                "<SegmentDuration>1</SegmentDuration><DVR><Enable>true</Enable><TempStoragePath>{}</TempStoragePath><MaxDuration>60</MaxDuration></DVR>",
                root.display()
            )),
            ..Default::default()
        },
    );
    let port = s.media.rtmp;
    let sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (mut c, mut sock) = rtmp_publishing(sock, port, "flip").unwrap();
    let before = s.log_text().lines().count();
    let mut sent = 0;
    assert!(s.log_text().contains("started by"), "{}", s.log_text());
    for i in 0..1000u32 {
        let mut aac = kiln::hls::fuzz::aac();
        // 48 kHz stereo, then 44.1 kHz stereo.
        let asc: &'static [u8] = if i % 2 == 0 {
            &[0x11, 0x90]
        } else {
            &[0x12, 0x10]
        };
        aac.config = kiln::media::CodecConfig::Aac {
            asc: bytes::Bytes::from_static(asc),
        };
        if c.send_tracks(&[aac]).is_err() {
            break;
        }
        let t = i64::from(i) * 1920;
        let frame = kiln::media::Frame {
            track: 2,
            pts: t,
            dts: t,
            keyframe: true,
            data: bytes::Bytes::from_static(&[0x21, 0x10, 0x04, 0x60, 0x8c, 0x1c]),
        };
        if c.send_frame(&frame).is_err() {
            break;
        }
        rtmp_flush(&mut c, &mut sock).unwrap();
        sent += 1;
    }
    // Every change reached the stream: it ends on the last one.
    let last = wait_until(Duration::from_secs(10), || {
        s.live_stream("flip")
            .filter(|v| v.to_string().contains("\"samplerate\":44100"))
    });
    assert!(last.is_some(), "{:?}", s.live_stream("flip"));
    std::thread::sleep(Duration::from_secs(2));
    let log = s.log_text();
    let lines: Vec<&str> = log.lines().skip(before).collect();
    let warns = lines.iter().filter(|l| l.contains(" WARN ")).count();
    println!(
        "RELIABILITY: log flood, {sent} alternating AAC configurations: {} lines, {warns} WARN",
        lines.len()
    );
    assert!(warns <= 5, "{warns} warnings:\n{}", lines.join("\n"));
    assert!(
        lines.len() <= 50,
        "{} lines:\n{}",
        lines.len(),
        lines[..50.min(lines.len())].join("\n")
    );
    let recent = s.request("GET", "/v1/logs", None).body;
    assert!(!recent.contains("cannot delete"), "{recent}");
}

/// The chaos run of these floods at once, for 20 s: an endless GOP at
/// 60 Mb/s on a pre-roll application and twenty viewers holding old DVR
/// segments unread, while a real viewer follows the DVR stream: the viewer
/// gets every new segment, kiln's RSS stays under idle + 128 MiB, and
/// within 60 s of the floods' end (the ended stream's playlists stay 30 s)
/// it is back near idle (± 16 MiB).
#[test]
fn chaos_dvr_and_pre_roll_floods_at_once() {
    let _one = serial();
    let root = temp_dir("hostile-media-chaos-root");
    let dvr = root.join("dvr");
    std::fs::create_dir_all(&dvr).unwrap();
    let s = Server::start_with(
        "hostile-media-chaos",
        ServerOptions {
            media: true,
            llhls: Some(format!(
                "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>1</SegmentDuration><SegmentCount>3</SegmentCount>\
                 <DVR><Enable>true</Enable><TempStoragePath>{}</TempStoragePath><MaxDuration>120</MaxDuration></DVR>",
                dvr.display()
            )),
            file: Some(format!(
                "<RootPath>{}</RootPath><FilePath>${{Id}}.ts</FilePath><InfoPath>${{Id}}.xml</InfoPath><MaxPreRoll>120000</MaxPreRoll>",
                root.display()
            )),
            ..Default::default()
        },
    );
    let camera = publisher(
        s.media.rtmp,
        "dvr",
        Pace {
            frame: 64 << 10,
            fps: 30,
            gop: Some(30),
            secs: 60,
        },
    );
    let old = dvr_segments(&s, "dvr", 12);
    let old: Vec<String> = old[..old.len() - 5].to_vec();
    std::thread::sleep(Duration::from_secs(1));
    let idle = rss_kib(&s);
    let flood = publisher(
        s.media.rtmp,
        "endless",
        Pace {
            frame: 256 << 10,
            fps: 30,
            gop: None,
            secs: 20,
        },
    );
    let holders = dvr_holders(&s, &old, 20);
    let start = Instant::now();
    let mut peak = idle;
    let mut seen = std::collections::HashSet::new();
    while start.elapsed() < Duration::from_secs(20) {
        peak = peak.max(rss_kib(&s));
        for seg in dvr_segments(&s, "dvr", 1) {
            seen.insert(seg);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(holders);
    let _ = flood.join();
    // The ended stream's playlists stay 30 s (as every ended stream's do),
    // then what they held goes.
    let ended = Instant::now();
    let mut trail = Vec::new();
    let after = wait_until(Duration::from_secs(60), || {
        let now = rss_kib(&s);
        trail.push((ended.elapsed().as_secs(), now));
        (now <= idle + 16 * 1024).then_some(now)
    });
    let last = trail.last().map_or(0, |t| t.1);
    let _ = camera.join();
    // New segments went on being listed during the floods (one a second).
    let new = seen.len() as i64 - old.len() as i64 - 5;
    println!(
        "RELIABILITY: chaos, DVR holders and an endless GOP for 20 s: RSS idle {idle} KiB, peak {peak} KiB, 60 s after {last} KiB (within 16 MiB: {}); {new} new segments listed",
        after.is_some()
    );
    assert!(peak < idle + 128 * 1024, "RSS {idle} -> {peak} KiB");
    assert!(after.is_some(), "RSS {last} KiB 60 s after (idle {idle})");
    assert!(new >= 15, "{new} new segments in 20 s");
}
