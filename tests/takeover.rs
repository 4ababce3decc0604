//! A publisher that reconnects takes its name back (issue 41): OBS on a
//! flaky uplink reconnects before kiln has noticed the old connection is
//! dead (no FIN). The old publisher is ffmpeg stopped with SIGSTOP (its
//! socket stays open, silent); the new one is a second ffmpeg. Viewers
//! stay connected and go on with the new source.

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -{sig} {}", child.id());
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn server(tag: &str, rtmp: Option<&str>) -> Server {
    Server::start_with(
        tag,
        ServerOptions {
            media: true,
            llhls: Some(
                "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>1</SegmentDuration>".into(),
            ),
            rtmp_provider: rtmp.map(str::to_string),
            ..Default::default()
        },
    )
}

/// An hls.js viewer plays the stream through the takeover: the publisher
/// goes silent (SIGSTOP), a new one takes the name 3 s later, and hls.js
/// goes on playing with no fatal error; the LL-HLS playlist keeps its URLs
/// (same stream, same key) and its media sequence goes on.
#[test]
fn a_reconnecting_publisher_takes_its_name_back_and_hlsjs_plays_on() {
    let Some((browser, web)) = browser_with_hlsjs() else {
        return;
    };
    if !have_tool("ffmpeg") {
        return;
    }
    let s = server("takeover-hlsjs", None);
    let url = format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp);
    let mut first = ffmpeg_source(120, &[], "flv", &url);
    s.wait_for_tracks("cam");
    let base = format!("http://127.0.0.1:{}/app/cam", s.media.llhls);
    let (_, master, _) = curl(&[], &format!("{base}/llhls.m3u8"));
    let seconds = 24;
    let page = format!(
        "file://{}/llhls.html?src={base}/llhls.m3u8&seconds={seconds}",
        web.display()
    );
    let profile = s.dir.join("chromium");
    let player = std::thread::spawn(move || play_hlsjs(browser, &page, &profile, seconds));
    std::thread::sleep(Duration::from_secs(6));
    signal(&first, "STOP");
    let stopped = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let mut second = ffmpeg_source(120, &[], "flv", &url);
    let taken = wait_until(Duration::from_secs(15), || {
        s.log_text()
            .contains("stream [default/app/cam] taken over by Rtmp")
            .then(|| stopped.elapsed())
    });
    let r = player.join().unwrap();
    let (_, master_after, _) = curl(&[], &format!("{base}/llhls.m3u8"));
    let alive = second.try_wait().unwrap().is_none();
    stop(&mut second);
    signal(&first, "CONT");
    stop(&mut first);
    println!("taken over {taken:?} after the stop; hls.js: {r}");
    assert!(taken.is_some(), "{}", s.log_text());
    assert!(alive, "the new publisher was refused: {}", s.log_text());
    assert_eq!(master, master_after, "the playlists' URLs changed");
    assert!(hlsjs_fatal_errors(&r).is_empty(), "{r}");
    // It played on: from before the stop to after the takeover (the
    // 3 s of silence are a stall at most).
    let played =
        r["end"]["media"].as_f64().unwrap_or(0.0) - r["start"]["media"].as_f64().unwrap_or(0.0);
    assert!(played > 12.0, "played {played} s: {r}");
}

/// OME's `<BlockDuplicateStreamName>false</BlockDuplicateStreamName>`: any
/// new publisher takes the name over at once, from a publisher still
/// sending, which kiln closes; with the default (true) a live, sending
/// publisher keeps its name.
#[test]
fn block_duplicate_stream_name_false_lets_any_newcomer_in() {
    if !have_tool("ffmpeg") {
        return;
    }
    let s = server(
        "takeover-any",
        Some("<RTMP><BlockDuplicateStreamName>false</BlockDuplicateStreamName></RTMP>"),
    );
    let url = format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp);
    let mut first = ffmpeg_source(120, &[], "flv", &url);
    s.wait_for_tracks("cam");
    let mut second = ffmpeg_source(120, &[], "flv", &url);
    let taken = wait_until(Duration::from_secs(15), || {
        s.log_text()
            .contains("stream [default/app/cam] taken over by Rtmp")
            .then_some(())
    });
    assert!(taken.is_some(), "{}", s.log_text());
    // kiln closed the first publisher's connection: its ffmpeg ends.
    let first_ended = wait_until(Duration::from_secs(15), || first.try_wait().unwrap());
    assert!(
        first_ended.is_some(),
        "the old publisher is still connected"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(second.try_wait().unwrap().is_none(), "{}", s.log_text());
    assert!(s.live_stream("cam").is_some());
    stop(&mut second);
    stop(&mut first);

    // The default keeps a sending publisher's name.
    let s = server("takeover-blocked", None);
    let url = format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp);
    let mut first = ffmpeg_source(60, &[], "flv", &url);
    s.wait_for_tracks("cam");
    let mut second = ffmpeg_source(5, &[], "flv", &url);
    let refused = second.wait().unwrap();
    assert!(!refused.success(), "a sending publisher lost its name");
    assert!(first.try_wait().unwrap().is_none());
    stop(&mut first);
}
