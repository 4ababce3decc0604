//! Media helpers for the black-box tests: an ffmpeg test-pattern source,
//! bounded waiting, and ffprobe readings of what a receiver got.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Test pattern frames per second of every source.
pub const FPS: u32 = 25;

/// ffmpeg publishing a 640x360 test pattern (H.264 + stereo AAC 48 kHz) for
/// `secs` seconds in real time to `url` in `format`; `extra` goes before the
/// format (e.g. TLS options). Stderr is captured for the refusal texts.
pub fn ffmpeg_source(secs: u32, extra: &[&str], format: &str, url: &str) -> Child {
    ffmpeg_source_cmd(secs, "640x360", extra, format, url)
        .stderr(Stdio::piped())
        .spawn()
        .expect("ffmpeg starts")
}

/// The command of [`ffmpeg_source`] at any frame `size`, stdout discarded,
/// stderr left to the caller.
pub fn ffmpeg_source_cmd(
    secs: u32,
    size: &str,
    extra: &[&str],
    format: &str,
    url: &str,
) -> Command {
    source_cmd(true, secs, size, extra, format, url)
}

/// As [`ffmpeg_source_cmd`] but as fast as ffmpeg encodes (no `-re`):
/// `secs` of media in a few seconds.
pub fn ffmpeg_fast_source_cmd(secs: u32, extra: &[&str], format: &str, url: &str) -> Command {
    source_cmd(false, secs, "640x360", extra, format, url)
}

fn source_cmd(
    realtime: bool,
    secs: u32,
    size: &str,
    extra: &[&str],
    format: &str,
    url: &str,
) -> Command {
    let mut cmd = Command::new("ffmpeg");
    cmd.args(["-hide_banner", "-loglevel", "error"]);
    if realtime {
        cmd.arg("-re");
    }
    cmd.args([
        "-f",
        "lavfi",
        "-i",
        &format!("testsrc2=size={size}:rate={FPS}"),
    ])
    .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"])
    .args([
        "-t",
        &secs.to_string(),
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
        "-g",
        "25",
    ])
    .args(["-c:a", "aac", "-ac", "2"])
    .args(extra)
    .args(["-f", format, url])
    .stdout(Stdio::null());
    cmd
}

/// srt-live-transmit publishing ffmpeg's real-time test pattern (a TS on
/// its stdin) to `url` for `secs` seconds: (ffmpeg, srt-live-transmit).
/// srt-live-transmit does not exit at the end of its input: the caller
/// kills both.
pub fn srt_live_transmit_source(secs: u32, url: &str) -> (Child, Child) {
    let mut ff = ffmpeg_source_cmd(secs, "640x360", &[], "mpegts", "-")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("ffmpeg starts");
    let pipe = ff.stdout.take().expect("ffmpeg stdout");
    let slt = Command::new("srt-live-transmit")
        .args(["-q", "file://con", url])
        .stdin(pipe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("srt-live-transmit starts");
    (ff, slt)
}

/// srt-live-transmit as an SRT listener on `port` (with `query`, e.g.
/// `&passphrase=...`) writing what it receives to `out`.
pub fn srt_live_transmit_sink(port: u16, query: &str, out: &Path) -> Child {
    Command::new("srt-live-transmit")
        .args([
            "-q",
            &format!("srt://:{port}?mode=listener{query}"),
            "file://con",
        ])
        .stdout(std::fs::File::create(out).expect("sink file"))
        .stderr(Stdio::null())
        .spawn()
        .expect("srt-live-transmit starts")
}

/// ffmpeg as an SRT listener on `port` (with `query`) copying what it
/// receives into the MPEG-TS file `out`; it exits when the caller leaves.
pub fn ffmpeg_srt_sink(port: u16, query: &str, out: &Path) -> Child {
    Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y"])
        .args([
            "-i",
            &format!("srt://127.0.0.1:{port}?mode=listener{query}"),
        ])
        .args(["-c", "copy", "-f", "mpegts"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ffmpeg starts")
}

/// Polls `f` every 50 ms until it gives a value or `limit` passes.
pub fn wait_until<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if t0.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// (codec, decoded frames) of each stream of a media file, per ffprobe.
pub fn frame_counts(file: &Path) -> Vec<(String, u64)> {
    let out = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-count_frames",
            "-show_entries",
            "stream=codec_name,nb_read_frames",
            "-of",
            "json",
        ])
        .arg(file)
        .output()
        .expect("ffprobe runs");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v["streams"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| {
                    Some((
                        s["codec_name"].as_str()?.to_string(),
                        s["nb_read_frames"].as_str()?.parse().ok()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Frames of the first stream with this codec (0 when none).
pub fn frames_of(counts: &[(String, u64)], codec: &str) -> u64 {
    counts
        .iter()
        .find(|(c, _)| c == codec)
        .map_or(0, |(_, n)| *n)
}

/// Whether every stream's DTS strictly increase, per ffprobe.
pub fn monotonic_dts(file: &Path) -> bool {
    let out = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-show_entries",
            "packet=stream_index,dts",
            "-of",
            "csv=p=0",
        ])
        .arg(file)
        .output()
        .expect("ffprobe runs");
    let mut last: std::collections::HashMap<String, i64> = Default::default();
    String::from_utf8_lossy(&out.stdout).lines().all(|l| {
        let mut it = l.split(',');
        match (it.next(), it.next().and_then(|d| d.parse::<i64>().ok())) {
            (Some(idx), Some(dts)) => last
                .insert(idx.to_string(), dts)
                .is_none_or(|prev| dts > prev),
            _ => true,
        }
    })
}

/// Within 2% (plus one frame) of what was sent.
pub fn within_2pct(got: u64, want: u64) -> bool {
    (got as f64 - want as f64).abs() <= want as f64 * 0.02 + 1.0
}

/// Captures every UDP datagram to a file until `quiet` passes without one,
/// on a port of its own (bound at once, so no other socket can take it
/// between choosing and binding); returns the port and the capture.
pub fn udp_capture(out: PathBuf, quiet: Duration) -> (u16, std::thread::JoinHandle<usize>) {
    let socket = std::net::UdpSocket::bind(("127.0.0.1", 0)).expect("bind capture");
    let port = socket.local_addr().expect("capture address").port();
    let capture = std::thread::spawn(move || {
        socket.set_read_timeout(Some(quiet)).unwrap();
        let mut data = Vec::new();
        let mut buf = [0u8; 65536];
        let mut count = 0;
        let t0 = Instant::now();
        // Wait up to 30 s for the first datagram, then until quiet.
        while let Ok(n) = socket.recv(&mut buf).or_else(|e| {
            if count == 0 && t0.elapsed() < Duration::from_secs(30) {
                Ok(0)
            } else {
                Err(e)
            }
        }) {
            if n > 0 {
                data.extend_from_slice(&buf[..n]);
                count += 1;
            }
        }
        std::fs::write(&out, &data).unwrap();
        count
    });
    (port, capture)
}

/// As [`udp_capture`], but the quiet time that ends it only counts once
/// `done` is set (the publisher has finished): a source that stalls on a
/// busy machine does not end the capture early.
pub fn udp_capture_until(
    out: PathBuf,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    quiet: Duration,
) -> (u16, std::thread::JoinHandle<usize>) {
    let socket = std::net::UdpSocket::bind(("127.0.0.1", 0)).expect("bind capture");
    let port = socket.local_addr().expect("capture address").port();
    let capture = std::thread::spawn(move || {
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let (mut data, mut count) = (Vec::new(), 0);
        let mut buf = [0u8; 65536];
        let t0 = Instant::now();
        let mut last = Instant::now();
        // Bounded: two minutes at most.
        while t0.elapsed() < Duration::from_secs(120) {
            if let Ok(n) = socket.recv(&mut buf) {
                data.extend_from_slice(&buf[..n]);
                count += 1;
                last = Instant::now();
            } else if done.load(std::sync::atomic::Ordering::Relaxed) && last.elapsed() >= quiet {
                break;
            }
        }
        std::fs::write(&out, &data).unwrap();
        count
    });
    (port, capture)
}

/// ffprobe's duration of a file, seconds.
pub fn ffprobe_duration(file: &Path) -> f64 {
    let out = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-show_entries",
            "format=duration",
            "-of",
            "csv=p=0",
        ])
        .arg(file)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0.0)
}

/// FFmpeg 9 (its FLV muxer writes enhanced RTMP v2 multitrack; Debian's
/// 5.1 does not): `KILN_FFMPEG9`, else the static build of PyPI's
/// `imageio-ffmpeg` (pinned in tests/run). `None`, with a printed reason,
/// when neither is here (a failure under `KILN_REQUIRE_INTEROP=1`).
#[allow(dead_code)]
pub fn ffmpeg9() -> Option<String> {
    let path = std::env::var("KILN_FFMPEG9").ok().or_else(|| {
        let out = Command::new("/usr/bin/python3")
            .args([
                "-c",
                "import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())",
            ])
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (out.status.success() && !p.is_empty()).then_some(p)
    });
    let version = path.as_ref().and_then(|p| {
        let out = Command::new(p).arg("-version").output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let v = text.split_whitespace().nth(2)?.to_string();
        v.trim_start_matches('n')
            .split('.')
            .next()?
            .parse::<u32>()
            .ok()
            .filter(|m| *m >= 9)
    });
    if version.is_none() {
        let why = "FFmpeg 9 is not here (pip install imageio-ffmpeg==0.8.1, or set KILN_FFMPEG9)";
        if std::env::var("KILN_REQUIRE_INTEROP").as_deref() == Ok("1") {
            panic!("{why} (KILN_REQUIRE_INTEROP=1)");
        }
        eprintln!("SKIP: {why}");
        return None;
    }
    path
}
