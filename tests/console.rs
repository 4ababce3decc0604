//! The operator console at /console/, in headless Chromium: it shows the
//! vhosts, applications, live streams with their tracks, and push tasks
//! with their states and last errors, read through the API with the
//! access token. A screenshot is written and its path printed.

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use serde_json::json;
use std::process::Command;
use std::time::Duration;

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| have_tool_quiet(c))
        .or_else(|| {
            have_tool("chromium");
            None
        })
}

fn have_tool_quiet(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool} >/dev/null 2>&1")])
        .status()
        .is_ok_and(|s| s.success())
}

/// Chromium headless with the flags this machine needs (no background
/// networking, a fresh profile).
fn headless(browser: &str, profile: &std::path::Path) -> Command {
    let mut c = Command::new(browser);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--virtual-time-budget=6000",
        "--window-size=1280,900",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

#[test]
fn console_shows_streams_and_pushes_in_a_real_browser() {
    let Some(browser) = chromium() else {
        return;
    };
    if !have_tool("ffmpeg") {
        return;
    }
    let s = Server::start_media("console");
    // The page itself: static, no token needed; the API behind it needs one.
    let r = s.request_with("GET", "/console/", &[], None);
    assert_eq!(r.status, 200);
    assert!(r.header("Content-Type").unwrap().starts_with("text/html"));
    assert!(r.header("Content-Security-Policy").is_some());
    assert_eq!(s.request_with("GET", "/console", &[], None).status, 301);
    let mut src = ffmpeg_source(
        20,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
    );
    s.wait_for_tracks("cam");
    let r = s.start_push(
        json!({"id":"to-udp","stream":{"name":"cam"},"protocol":"mpegts",
        "url":format!("udp://127.0.0.1:{}", free_udp_port())}),
    );
    assert_eq!(r.status, 200);
    let dead = free_port();
    let r = s.start_push(
        json!({"id":"to-nowhere","stream":{"name":"cam"},"protocol":"rtmp",
        "url":format!("rtmp://127.0.0.1:{dead}/live"),"streamKey":"k"}),
    );
    assert_eq!(r.status, 200);
    wait_until(Duration::from_secs(10), || {
        let t = s.push_task("to-nowhere")?;
        t.get("lastError").map(|_| ())
    })
    .expect("the dead destination fails");
    wait_until(Duration::from_secs(10), || {
        (s.push_task("to-udp")?["state"] == "pushing").then_some(())
    })
    .expect("pushing");

    let url = format!("http://127.0.0.1:{}/console/#token={TOKEN}", s.port);
    let out = headless(browser, &s.dir.join("profile"))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    for want in [
        "data-vhost=\"default\"",
        "data-app=\"app\"",
        "data-stream=\"cam\"",
        "H264 640x360",
        "AAC 48000 Hz",
        "data-push=\"to-udp\"",
        "state-pushing",
        "data-push=\"to-nowhere\"",
        "refused",
        "connected",
    ] {
        assert!(dom.contains(want), "the page lacks [{want}]:\n{dom}");
    }
    let shot = s.dir.join("console.png");
    let out = headless(browser, &s.dir.join("profile2"))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .unwrap();
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 10_000,
        "screenshot of {size} bytes: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let keep = std::env::temp_dir().join("kiln-console.png");
    std::fs::copy(&shot, &keep).unwrap();
    eprintln!("console screenshot: {}", keep.display());
    let _ = src.kill();
    let _ = src.wait();
}
