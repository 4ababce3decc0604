//! Clients other than ffmpeg, as publishers and as (refused) players:
//! GStreamer (rtmp2sink, srtsink, udpsink), rtmpdump, and ffmpeg asking to
//! play over SRT. Each skips with the reason when its tool is missing
//! (fails under KILN_REQUIRE_INTEROP=1).

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::Duration;

fn gstreamer() -> bool {
    have_tool("gst-launch-1.0") && have_tool("ffprobe") && have_tool("ffmpeg")
}

fn gst(pipeline: &str) -> Command {
    let mut cmd = Command::new("gst-launch-1.0");
    cmd.arg("-e")
        .args(pipeline.split_whitespace())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Access unit delimiters (H.264 NAL type 9) in an Annex B stream.
fn aud_count(annexb: &[u8]) -> usize {
    annexb
        .windows(4)
        .filter(|w| w[..3] == [0, 0, 1] && w[3] == 0x09)
        .count()
}

/// Issue 10 items 17 and 20, with the issue's own pipeline: GStreamer's
/// rtmp2sink publishes for 15 s and exits cleanly (kiln no longer closes a
/// connection older than 10 s right after it unpublishes), and the stream
/// pushed out as MPEG-TS has exactly one AUD per access unit although
/// x264enc already puts one in each.
#[test]
fn gstreamer_rtmp2sink_publishes_and_unpublishes_cleanly() {
    if !gstreamer() {
        return;
    }
    let s = Server::start_media("gst-rtmp");
    let ts = s.dir.join("gst-out.ts");
    let (udp_port, capture) = udp_capture(ts.clone(), Duration::from_secs(4));
    let r = s.start_push(
        json!({"id":"out","stream":{"name":"gst"},"protocol":"mpegts",
        "url":format!("udp://127.0.0.1:{udp_port}")}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let out = gst(&format!(
        "videotestsrc is-live=true num-buffers=450 ! video/x-raw,format=I420 ! x264enc tune=zerolatency ! h264parse ! flvmux streamable=true ! rtmp2sink location=rtmp://127.0.0.1:{}/app/gst",
        s.media.rtmp
    ))
    .output()
    .unwrap();
    let log = s.log_text();
    assert!(
        out.status.success(),
        "rtmp2sink failed: {}{}\n{log}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!log.contains("no publish within"), "{log}");
    assert!(log.contains("stream [default/app/gst] ended"), "{log}");
    capture.join().unwrap();
    // One AUD per access unit in what kiln pushed.
    let h264 = s.dir.join("gst-out.h264");
    let ok = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y", "-i"])
        .arg(&ts)
        .args(["-c", "copy", "-an", "-f", "h264"])
        .arg(&h264)
        .status()
        .unwrap();
    assert!(ok.success());
    let frames = frames_of(&frame_counts(&ts), "h264");
    let auds = aud_count(&std::fs::read(&h264).unwrap());
    assert!(frames > 400, "{frames} frames pushed");
    assert_eq!(auds as u64, frames, "AUDs per access unit");
}

/// GStreamer as an SRT and an MPEG-TS/UDP publisher: the streams show with
/// their H.264 track.
#[test]
fn gstreamer_srtsink_and_udpsink_publish() {
    if !gstreamer() {
        return;
    }
    let s = Server::start_media("gst-srt");
    let ts_name = format!("ts_{}", s.media.mpegts);
    for (name, sink) in [
        (
            "gstsrt".to_string(),
            format!(
                "srtsink uri=srt://127.0.0.1:{} streamid=default/app/gstsrt",
                s.media.srt
            ),
        ),
        (
            ts_name.clone(),
            format!("udpsink host=127.0.0.1 port={}", s.media.mpegts),
        ),
    ] {
        let mut child = gst(&format!(
            "videotestsrc is-live=true num-buffers=150 ! video/x-raw,format=I420 ! x264enc tune=zerolatency key-int-max=30 ! h264parse ! mpegtsmux alignment=7 ! {sink}"
        ))
        .spawn()
        .unwrap();
        let v = wait_until(Duration::from_secs(10), || {
            s.live_stream(&name).filter(|v| {
                v["input"]["tracks"]
                    .as_array()
                    .is_some_and(|t| media_count(t) > 0)
            })
        });
        let _ = child.kill();
        let _ = child.wait();
        let v = v.unwrap_or_else(|| panic!("{name} never showed: {}", s.log_text()));
        assert_eq!(v["input"]["tracks"][0]["video"]["codec"], "H264", "{v}");
    }
}

/// Issue 10 item 18: players are refused with a reason the log names.
/// rtmpdump asks to play a stream that does not exist over RTMP; ffmpeg
/// asks to play a stream that does not exist over SRT (m=request) and
/// libsrt gets reject code 1404.
#[test]
fn players_are_refused_and_the_log_says_why() {
    let s = Server::start_media("players");
    if have_tool("rtmpdump") {
        let out = Command::new("rtmpdump")
            .args(["-q", "-m", "5", "-r"])
            .arg(format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp))
            .args(["-o", "/dev/null"])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let log = s.log_text();
        assert!(
            log.contains("play refused: No such stream: [default/app/cam]"),
            "{log}"
        );
    }
    if have_tool("ffmpeg") {
        let out = Command::new("ffmpeg")
            .args(["-hide_banner", "-loglevel", "error", "-i"])
            .arg(format!(
                "srt://127.0.0.1:{}?streamid=%23!::r=app/cam,m=request&timeout=3000000",
                s.media.srt
            ))
            .args(["-f", "null", "-"])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let log = s.log_text();
        assert!(
            log.contains("No such stream: [default/app/cam]") && log.contains("reject code 1404"),
            "{log}"
        );
    }
}
