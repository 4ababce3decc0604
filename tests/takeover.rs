//! A publisher that reconnects takes its name back (issue 41): OBS on a
//! flaky uplink reconnects before kiln has noticed the old connection is
//! dead (no FIN). The old publisher is ffmpeg stopped with SIGSTOP (its
//! socket stays open, silent); the new one is a second ffmpeg. Viewers
//! stay connected and go on with the new source.

mod common;
#[path = "common/media.rs"]
mod media;
#[path = "common/webrtc_pages.rs"]
#[allow(dead_code)] // its publisher page is not used here
mod webrtc_pages;
use common::*;
use media::*;
use std::process::{Child, Command, Stdio};
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
    // The same URLs (each master gives its player a session token of its
    // own).
    let urls = |m: &str| -> Vec<String> {
        m.lines()
            .map(|l| l.split_once("session=").map_or(l, |(a, _)| a).to_string())
            .collect()
    };
    assert_eq!(
        urls(&master),
        urls(&master_after),
        "the playlists' URLs changed"
    );
    assert!(hlsjs_fatal_errors(&r).is_empty(), "{r}");
    // It played on: from before the stop to after the takeover (the
    // 3 s of silence are a stall at most).
    let played =
        r["end"]["media"].as_f64().unwrap_or(0.0) - r["start"]["media"].as_f64().unwrap_or(0.0);
    assert!(played > 12.0, "played {played} s: {r}");
}

/// An RTMP player and an SRT player (ffmpeg, copying to files) and a WHEP
/// viewer (Chromium) watch through the same takeover: none is dropped,
/// the players' files hold frames from before the stop and after the
/// takeover with timestamps going forward, and the browser decodes on.
#[test]
fn rtmp_srt_and_webrtc_viewers_play_on_across_a_takeover() {
    let Some((chromium, web)) = webrtc_pages::chromium_and_node() else {
        return;
    };
    let s = Server::start_with(
        "takeover-players",
        ServerOptions {
            media: true,
            llhls: Some(String::new()),
            webrtc: Some(String::new()),
            ..Default::default()
        },
    );
    let url = format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp);
    let mut first = ffmpeg_source(120, &[], "flv", &url);
    s.wait_for_tracks("cam");
    let seconds = 24;
    let player = |input: String, format: &str, file: &std::path::Path| {
        Command::new("timeout")
            .args([
                &seconds.to_string(),
                "ffmpeg",
                "-hide_banner",
                "-loglevel",
                "error",
                "-y",
            ])
            .args(["-i", &input, "-c", "copy", "-f", format])
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ffmpeg starts")
    };
    let (flv, ts) = (s.dir.join("rtmp-player.flv"), s.dir.join("srt-player.ts"));
    let mut rtmp = player(url.clone(), "flv", &flv);
    let srt_url = format!(
        "srt://127.0.0.1:{}?streamid=%23!::r=app/cam,m=request",
        s.media.srt
    );
    let mut srt = player(srt_url, "mpegts", &ts);
    let whep = webrtc_pages::node_page(
        "webrtc_check.mjs",
        None,
        &[],
        &chromium,
        &web,
        &[
            "whep",
            &format!("http://127.0.0.1:{}/app/cam?direction=whep", s.media.llhls),
            &seconds.to_string(),
        ],
    );
    std::thread::sleep(Duration::from_secs(6));
    signal(&first, "STOP");
    std::thread::sleep(Duration::from_secs(3));
    let mut second = ffmpeg_source(120, &[], "flv", &url);
    let taken = wait_until(Duration::from_secs(15), || {
        s.log_text()
            .contains("stream [default/app/cam] taken over by Rtmp")
            .then_some(())
    });
    let seen = webrtc_pages::seen(whep);
    // `timeout` ends each player at the end of its time (124): it was
    // still playing, not dropped at the takeover.
    let (rtmp_rc, srt_rc) = (rtmp.wait().unwrap().code(), srt.wait().unwrap().code());
    stop(&mut second);
    signal(&first, "CONT");
    stop(&mut first);
    assert!(taken.is_some(), "{}", s.log_text());
    println!("WHEP across the takeover: {seen}");
    for (file, rc, what) in [(&flv, rtmp_rc, "RTMP"), (&ts, srt_rc, "SRT")] {
        let counts = frame_counts(file);
        let video = frames_of(&counts, "h264");
        println!("{what} player: exit {rc:?}, frames {counts:?}");
        assert_eq!(
            rc,
            Some(124),
            "the {what} player stopped early: {}",
            s.log_text()
        );
        // 24 s less the silence and the takeover (a few seconds): frames
        // from both publishers.
        assert!(video >= 12 * u64::from(FPS), "{what}: {video} video frames");
        assert!(monotonic_dts(file), "{what}: timestamps go back");
    }
    assert_eq!(seen["connectionState"], "connected", "{seen}");
    let decoded = seen["video"]["framesDecoded"].as_u64().unwrap_or(0);
    assert!(decoded >= 12 * u64::from(FPS) * 3 / 4, "{seen}");
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

/// A publish with kiln's own RTMP client from the loopback address `from`:
/// the connection, open and publishing (silent: it sends no media), or
/// how the publish ended.
fn publish_from(from: &str, port: u16, name: &str) -> Result<std::net::TcpStream, String> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .map_err(|e| e.to_string())?;
    let local: std::net::SocketAddr = format!("{from}:0").parse().unwrap();
    sock.bind(&local.into()).map_err(|e| e.to_string())?;
    let to: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    sock.connect(&to.into()).map_err(|e| e.to_string())?;
    let (mut c, mut sock) = rtmp_publishing(sock.into(), port, name)?;
    // Its tracks and one keyframe, then nothing.
    c.send_tracks(&[kiln::hls::fuzz::h264()])
        .map_err(|e| e.to_string())?;
    c.send_frame(&kiln::media::Frame {
        track: 1,
        pts: 0,
        dts: 0,
        keyframe: true,
        data: bytes::Bytes::from_static(&[0, 0, 0, 2, 0x65, 0x88]),
    })
    .map_err(|e| e.to_string())?;
    rtmp_flush(&mut c, &mut sock)?;
    Ok(sock)
}

/// A silent publisher's name is taken back by a newcomer from its own
/// address, not by one from another address (which waits for the stream
/// to time out: another box on the network must not hijack a live name
/// during a Wi-Fi hiccup). After the takeover the stream's `sourceUrl`
/// and the sessions list name the new connection.
#[test]
fn only_the_publishers_own_address_takes_a_silent_name_back() {
    let s = server("takeover-address", None);
    let port = s.media.rtmp;
    let first = publish_from("127.0.0.1", port, "cam").expect("the first publish");
    wait_until(Duration::from_secs(10), || s.live_stream("cam")).expect("live");
    let first_port = first.local_addr().unwrap().port();
    let source = |s: &Server| {
        s.live_stream("cam").map(|v| {
            v["input"]["sourceUrl"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
    };
    assert_eq!(
        source(&s).as_deref(),
        Some(format!("TCP://127.0.0.1:{first_port}").as_str())
    );
    // Silent past the takeover time (2 s).
    std::thread::sleep(Duration::from_secs(3));
    let stranger = publish_from("127.0.0.2", port, "cam");
    assert!(stranger.is_err(), "another address took the name");
    let second = publish_from("127.0.0.1", port, "cam").expect("the owner's address takes it back");
    let second_port = second.local_addr().unwrap().port();
    let want = format!("TCP://127.0.0.1:{second_port}");
    assert_eq!(
        source(&s).as_deref(),
        Some(want.as_str()),
        "{}",
        s.log_text()
    );
    let list = s.request(
        "GET",
        "/v1/vhosts/default/apps/app/streams/cam/sessions",
        None,
    );
    let publisher = list.json()["response"]
        .as_array()
        .and_then(|l| l.iter().find(|x| x["role"] == "publisher").cloned())
        .unwrap_or_default();
    assert!(
        publisher
            .to_string()
            .contains(&format!("127.0.0.1:{second_port}")),
        "{publisher}"
    );
    drop(first);
    drop(second);
}
