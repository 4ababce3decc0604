//! SRT against libsrt: ffmpeg and srt-live-transmit publish into kiln's
//! listener; kiln's caller pushes to srt-live-transmit and ffmpeg as
//! listeners. The received media is checked with ffprobe.

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn tools() -> bool {
    have_tool("ffmpeg") && have_tool("ffprobe") && have_tool("srt-live-transmit")
}

fn codecs(v: &Value) -> Vec<String> {
    v["input"]["tracks"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| {
                    t["video"]["codec"]
                        .as_str()
                        .or(t["audio"]["codec"].as_str())
                        .unwrap_or("")
                        .to_string()
                })
                .filter(|c| !c.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn ffmpeg_publishes_over_srt() {
    if !tools() {
        return;
    }
    let s = Server::start_media("srtffmpeg");
    let url = format!(
        "srt://127.0.0.1:{}?streamid=default/app/cam&pkt_size=1316",
        s.media.srt
    );
    let mut ff = ffmpeg_source(4, &[], "mpegts", &url);
    let v = s.wait_for_tracks("cam");
    assert_eq!(v["input"]["sourceType"], "Srt");
    assert_eq!(codecs(&v), ["H264", "AAC"]);
    let video = v["input"]["tracks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["type"] == "Video")
        .unwrap();
    assert_eq!(
        (
            video["video"]["width"].as_u64(),
            video["video"]["height"].as_u64()
        ),
        (Some(640), Some(360))
    );
    assert!(ff.wait().unwrap().success());
    wait_until(Duration::from_secs(10), || {
        s.live_stream("cam").is_none().then_some(())
    })
    .expect("stream ends");
}

#[test]
fn srt_live_transmit_publishes_and_bad_streamids_are_rejected() {
    if !tools() {
        return;
    }
    let s = Server::start_media("srtslt");
    // ffmpeg makes a real-time TS on stdout; srt-live-transmit sends it.
    let url = format!("srt://127.0.0.1:{}?streamid=app/slt", s.media.srt);
    let (mut ff, mut slt) = srt_live_transmit_source(20, &url);
    let v = wait_until(Duration::from_secs(10), || s.live_stream("slt")).expect("the stream shows");
    assert_eq!(v["input"]["sourceType"], "Srt");
    let _ = ff.kill();
    let _ = ff.wait();
    let _ = slt.kill();
    let _ = slt.wait();
    // The caller vanished without a SHUTDOWN: the stream ends on the peer
    // idle timeout.
    wait_until(Duration::from_secs(15), || {
        s.live_stream("slt").is_none().then_some(())
    })
    .expect("stream ends");

    // Unknown application: the handshake is rejected and libsrt says so.
    let out = ffmpeg_source(
        1,
        &[],
        "mpegts",
        &format!("srt://127.0.0.1:{}?streamid=default/nope/x", s.media.srt),
    )
    .wait_with_output()
    .unwrap();
    assert!(!out.status.success());
    // A second publisher of a live name is rejected too.
    let url = format!(
        "srt://127.0.0.1:{}?streamid=default/app/dup&pkt_size=1316",
        s.media.srt
    );
    let mut first = ffmpeg_source(8, &[], "mpegts", &url);
    wait_until(Duration::from_secs(10), || s.live_stream("dup")).expect("first publisher");
    let second = ffmpeg_source(1, &[], "mpegts", &url)
        .wait_with_output()
        .unwrap();
    assert!(!second.status.success());
    assert!(s.live_stream("dup").is_some());
    let _ = first.kill();
    let _ = first.wait();
    assert_eq!(s.request("GET", "/v1/vhosts", None).status, 200);
}

fn push_srt_to(s: &Server, id: &str, port: u16) {
    let r = s.request(
        "POST",
        "/v1/vhosts/default/apps/app:startPush",
        Some(
            &json!({"id": id, "stream": {"name": "cam"}, "protocol": "srt",
            "url": format!("srt://127.0.0.1:{port}?mode=caller&latency=200000")})
            .to_string(),
        ),
    );
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn srt_push_to_srt_live_transmit_and_ffmpeg() {
    if !tools() {
        return;
    }
    let s = Server::start_media("srtpush");
    let slt_port = free_udp_port();
    let ff_port = free_udp_port();
    let slt_out = s.dir.join("slt.ts");
    let ff_out = s.dir.join("ff.ts");
    let mut slt = srt_live_transmit_sink(slt_port, "", &slt_out);
    let mut ff = ffmpeg_srt_sink(ff_port, "", &ff_out);
    std::thread::sleep(Duration::from_millis(500));
    push_srt_to(&s, "to-slt", slt_port);
    push_srt_to(&s, "to-ffmpeg", ff_port);
    let secs = 6;
    let mut src = ffmpeg_source(
        secs,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
    );
    assert!(src.wait().unwrap().success());
    // Both tasks end cleanly back in ready.
    for id in ["to-slt", "to-ffmpeg"] {
        let t0 = Instant::now();
        loop {
            let r = s.request(
                "POST",
                "/v1/vhosts/default/apps/app:pushes",
                Some(&json!({"id": id}).to_string()),
            );
            let t = r.json()["response"][0].clone();
            if t["state"] == "ready" && t["sequence"] == 1 {
                assert!(t["totalsentBytes"].as_u64().unwrap() > 100_000, "{t}");
                assert!(t.get("lastError").is_none(), "{t}");
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(15), "{id}: {t}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let _ = slt.kill();
    let _ = slt.wait();
    let _ = ff.wait();
    let want_video = (secs * 25) as u64;
    for file in [&slt_out, &ff_out] {
        let counts = frame_counts(file);
        let video = counts
            .iter()
            .find(|(c, _)| c == "h264")
            .map_or(0, |(_, n)| *n);
        assert!(
            (video as f64 - want_video as f64).abs() <= want_video as f64 * 0.02 + 1.0,
            "{}: {video} video frames of {want_video} ({counts:?})",
            file.display()
        );
        assert!(counts.iter().any(|(c, n)| c == "aac" && *n > 0));
    }
}
