//! SRT encryption against libsrt (DECISIONS 13): ffmpeg and
//! srt-live-transmit publish encrypted into kiln with 16, 24 and 32-byte
//! keys (one with a key refresh every 300 packets), kiln pushes encrypted
//! to srt-live-transmit and ffmpeg listeners, and wrong or missing
//! passphrases are refused on both sides with the reason in the log and in
//! `lastError`. The media that comes out is counted with ffprobe.

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const PASS: &str = "kiln-test-passphrase";

fn tools() -> bool {
    have_tool("ffmpeg") && have_tool("ffprobe") && have_tool("srt-live-transmit")
}

fn encrypted_server(tag: &str) -> Server {
    Server::start_with(
        tag,
        ServerOptions {
            media: true,
            srt_options: format!(
                "<Options><Option><Key>SRTO_PASSPHRASE</Key><Value>{PASS}</Value></Option>\
                 <Option><Key>SRTO_PBKEYLEN</Key><Value>16</Value></Option></Options>"
            ),
            ..Default::default()
        },
    )
}

fn wait_task(s: &Server, id: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let t0 = Instant::now();
    loop {
        let t = s.push_task(id).unwrap_or(Value::Null);
        if done(&t) {
            return t;
        }
        assert!(t0.elapsed() < limit, "{id}: {t}\n{}", s.log_text());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Pushes stream `name` to a UDP capture, runs `publish`, and returns the
/// frame counts kiln passed on.
fn relayed_counts(s: &Server, name: &str, publish: impl FnOnce()) -> Vec<(String, u64)> {
    let out = s.dir.join(format!("{name}.ts"));
    // Quiet for 3 s after the publisher is done (a source that stalls on a
    // busy machine does not end it).
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (udp_port, capture) = udp_capture_until(out.clone(), done.clone(), Duration::from_secs(3));
    let r = s.start_push(
        json!({"id": name, "stream": {"name": name}, "protocol": "mpegts",
        "url": format!("udp://127.0.0.1:{udp_port}")}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    publish();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    capture.join().unwrap();
    frame_counts(&out)
}

#[test]
fn ffmpeg_and_srt_live_transmit_publish_encrypted() {
    if !tools() {
        return;
    }
    let s = encrypted_server("srtenc-in");
    let secs = 5;
    let want_video = u64::from(secs * FPS);
    for len in [16, 24, 32] {
        let name = format!("ff{len}");
        let url = format!(
            "srt://127.0.0.1:{}?streamid=default/app/{name}&passphrase={PASS}&pbkeylen={len}&pkt_size=1316",
            s.media.srt
        );
        let counts = relayed_counts(&s, &name, || {
            let out = ffmpeg_source(secs, &[], "mpegts", &url)
                .wait_with_output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        });
        let video = frames_of(&counts, "h264");
        // ffmpeg closes SRT without linger: its last ~latency of data may
        // not leave it.
        assert!(
            video + 10 >= want_video && video <= want_video,
            "AES-{}: {video} of {want_video} video frames ({counts:?})",
            len * 8
        );
        assert!(frames_of(&counts, "aac") > 0);
    }

    // srt-live-transmit with a key refresh every 300 packets (pre-announced
    // 75 before): the stream crosses several refreshes intact.
    let url = format!(
        "srt://127.0.0.1:{}?streamid=default/app/slt&passphrase={PASS}&pbkeylen=24&kmrefreshrate=300&kmpreannounce=75",
        s.media.srt
    );
    let counts = relayed_counts(&s, "slt", || {
        let (mut ff, mut slt) = srt_live_transmit_source(secs, &url);
        assert!(ff.wait().unwrap().success());
        // srt-live-transmit does not exit at the end of its input; give
        // it its latency to drain, then stop it.
        std::thread::sleep(Duration::from_millis(1500));
        let _ = slt.kill();
        let _ = slt.wait();
    });
    let video = frames_of(&counts, "h264");
    assert!(
        within_2pct(video, want_video),
        "srt-live-transmit with key refreshes: {video} of {want_video} ({counts:?})"
    );
    let log = s.log_text();
    let refreshes = log.matches("keys refreshed").count();
    assert!(refreshes >= 2, "{refreshes} key refreshes seen\n{log}");
    eprintln!("srt-live-transmit publish: {refreshes} key refreshes, {video} video frames");
}

#[test]
fn wrong_or_missing_passphrase_is_refused_and_logged() {
    if !tools() {
        return;
    }
    let s = encrypted_server("srtenc-refuse");
    for (query, why) in [
        (
            "&passphrase=not-the-passphrase".to_string(),
            "wrong passphrase",
        ),
        (String::new(), "a passphrase is required"),
    ] {
        let url = format!(
            "srt://127.0.0.1:{}?streamid=default/app/x{query}",
            s.media.srt
        );
        let out = ffmpeg_source(1, &[], "mpegts", &url)
            .wait_with_output()
            .unwrap();
        assert!(!out.status.success());
        let log = s.log_text();
        assert!(log.contains(why), "{why}\n{log}");
    }
    // Encryption at the caller only: kiln without a passphrase refuses it.
    let plain = Server::start_media("srtenc-plain");
    let url = format!(
        "srt://127.0.0.1:{}?streamid=default/app/x&passphrase={PASS}",
        plain.media.srt
    );
    let out = ffmpeg_source(1, &[], "mpegts", &url)
        .wait_with_output()
        .unwrap();
    assert!(!out.status.success());
    assert!(plain.log_text().contains("no passphrase is set here"));
}

#[test]
fn kiln_pushes_encrypted_to_srt_live_transmit_and_ffmpeg() {
    if !tools() {
        return;
    }
    let s = Server::start_media("srtenc-push");
    let slt_port = free_udp_port();
    let ff_port = free_udp_port();
    let bad_port = free_udp_port();
    let slt_out = s.dir.join("slt.ts");
    let ff_out = s.dir.join("ff.ts");
    let mut slt = srt_live_transmit_sink(
        slt_port,
        &format!("&passphrase={PASS}&pbkeylen=24"),
        &slt_out,
    );
    let mut ff = ffmpeg_srt_sink(ff_port, &format!("&passphrase={PASS}&pbkeylen=32"), &ff_out);
    let mut bad = srt_live_transmit_sink(
        bad_port,
        "&passphrase=another-passphrase",
        &s.dir.join("bad.ts"),
    );
    std::thread::sleep(Duration::from_millis(500));
    for (id, port, extra) in [
        // a key refresh every 300 packets to srt-live-transmit
        (
            "to-slt",
            slt_port,
            "&pbkeylen=24&kmrefreshrate=300&kmpreannounce=75",
        ),
        ("to-ffmpeg", ff_port, "&pbkeylen=32"),
        ("to-bad", bad_port, ""),
    ] {
        let r = s.start_push(
            json!({"id": id, "stream": {"name": "cam"}, "protocol": "srt",
            "url": format!("srt://127.0.0.1:{port}?latency=200000&passphrase={PASS}{extra}")}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        // The passphrase never reaches the log.
        assert!(!s.log_text().contains(PASS));
    }
    let secs = 6;
    let mut src = ffmpeg_source(
        secs,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
    );
    // The destination with the other passphrase: error, and lastError says so.
    let t = wait_task(&s, "to-bad", Duration::from_secs(15), |t| {
        t["lastError"].as_str().is_some()
    });
    let why = t["lastError"].as_str().unwrap();
    assert!(why.contains("wrong passphrase"), "{t}");
    assert!(src.wait().unwrap().success());
    for id in ["to-slt", "to-ffmpeg"] {
        let t = wait_task(&s, id, Duration::from_secs(15), |t| {
            t["state"] == "ready" && t["sequence"] == 1
        });
        assert!(t.get("lastError").is_none(), "{t}");
    }
    std::thread::sleep(Duration::from_millis(500));
    for c in [&mut slt, &mut bad] {
        let _ = c.kill();
        let _ = c.wait();
    }
    let _ = ff.wait();
    let want_video = u64::from(secs * FPS);
    for file in [&slt_out, &ff_out] {
        let counts = frame_counts(file);
        let video = frames_of(&counts, "h264");
        assert!(
            within_2pct(video, want_video),
            "{}: {video} of {want_video} video frames ({counts:?})",
            file.display()
        );
        assert!(frames_of(&counts, "aac") > 0);
    }
}
