//! Ending one session from the API (issue 42, part 6; OME #401): a
//! stream's publisher and its viewers of every protocol are listed by
//! `GET .../streams/{s}/sessions` with their address, start and bytes, and
//! `DELETE .../sessions/{id}` ends a player (ffmpeg over RTMP, ffmpeg over
//! SRT), a WebRTC session, an LL-HLS viewer (its address refused a while)
//! or the publisher.

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const OFFER: &str = include_str!("fixtures/chromium-whep-offer.sdp");
const BASE: &str = "/v1/vhosts/default/apps/app/streams/cam/sessions";

fn player(url: &str) -> Child {
    Command::new("timeout")
        .args([
            "60",
            "ffmpeg",
            "-hide_banner",
            "-loglevel",
            "error",
            "-i",
            url,
        ])
        .args(["-c", "copy", "-f", "null", "-"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ffmpeg starts")
}

fn sessions(s: &Server) -> Vec<Value> {
    let r = s.request("GET", BASE, None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["response"].as_array().cloned().unwrap_or_default()
}

/// The first viewer of a protocol.
fn find<'a>(list: &'a [Value], protocol: &str) -> Option<&'a Value> {
    list.iter()
        .find(|x| x["protocol"] == protocol && x["role"] == "viewer")
}

/// A server with LL-HLS (and WebRTC, with `webrtc` as its app's
/// publisher) and ffmpeg publishing `app/cam` over RTMP for 60 s, once its
/// tracks are known.
fn server_with_cam(tag: &str, webrtc: Option<String>) -> (Server, Child) {
    let s = Server::start_with(
        tag,
        ServerOptions {
            media: true,
            llhls: Some(String::new()),
            webrtc,
            ..Default::default()
        },
    );
    let src = ffmpeg_source(
        60,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
    );
    s.wait_for_tracks("cam");
    (s, src)
}

/// Waits (30 s at most) for a child to exit; whether it did.
fn exits(child: &mut Child) -> bool {
    wait_until(Duration::from_secs(30), || child.try_wait().ok().flatten()).is_some()
}

#[test]
fn every_session_of_a_stream_is_listed_and_one_can_be_ended() {
    if !have_tool("ffmpeg") || !have_tool("curl") {
        return;
    }
    let (s, mut src) = server_with_cam("sessions", Some(String::new()));
    let mut rtmp = player(&format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp));
    let mut srt = player(&format!(
        "srt://127.0.0.1:{}?streamid=%23!::r=app/cam,m=request",
        s.media.srt
    ));
    // An LL-HLS viewer (its playlist) and a WebRTC session (signalled, not
    // connected: no browser).
    let llhls = format!("http://127.0.0.1:{}/app/cam/llhls.m3u8", s.media.llhls);
    let (status, _, _) = curl(&["-o", "/dev/null"], &llhls);
    assert_eq!(status, 200);
    let (status, _, _) = curl(
        &[
            "-X",
            "POST",
            "-H",
            "Content-Type: application/sdp",
            "--data-binary",
            OFFER,
            "-o",
            "/dev/null",
        ],
        &format!("http://127.0.0.1:{}/app/cam?direction=whep", s.media.llhls),
    );
    assert_eq!(status, 201);
    let list = wait_until(Duration::from_secs(20), || {
        let list = sessions(&s);
        let playing = ["rtmp", "srt"]
            .iter()
            .all(|p| find(&list, p).is_some_and(|x| x["bytes"].as_u64().unwrap_or(0) > 10_000));
        playing.then_some(list)
    })
    .unwrap_or_else(|| panic!("players not listed: {:#?}", sessions(&s)));
    println!("{}", serde_json::to_string_pretty(&list).unwrap());
    let publisher = &list[0];
    assert_eq!(publisher["id"], "publisher");
    assert_eq!(publisher["role"], "publisher");
    // One dialect: lower-case protocols, ip:port addresses.
    assert_eq!(publisher["protocol"], "rtmp");
    let addr: std::net::SocketAddr = publisher["remoteAddress"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {publisher}"));
    assert_eq!(addr.ip().to_string(), "127.0.0.1", "{publisher}");
    assert!(publisher["bytes"].as_u64().unwrap() > 10_000);
    for p in ["rtmp", "srt", "webrtc", "llhls"] {
        let x = find(&list, p).unwrap_or_else(|| panic!("no {p} session: {list:#?}"));
        assert_eq!(x["role"], "viewer", "{x}");
        assert!(
            x["id"].as_str().unwrap().starts_with(&format!("{p}-")),
            "{x}"
        );
        assert!(x["since"].as_str().unwrap().contains('T'), "{x}");
        if p != "webrtc" {
            assert!(
                x["remoteAddress"]
                    .as_str()
                    .unwrap()
                    .starts_with("127.0.0.1"),
                "{x}"
            );
        }
    }
    assert_eq!(find(&list, "webrtc").unwrap()["connected"], false);
    assert!(find(&list, "llhls").unwrap()["bytes"].as_u64().unwrap() > 0);
    let id = |p: &str| find(&list, p).unwrap()["id"].as_str().unwrap().to_string();

    // The RTMP player is ended: ffmpeg sees its connection close.
    let r = s.request("DELETE", &format!("{BASE}/{}", id("rtmp")), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(exits(&mut rtmp), "the RTMP player still plays");
    assert!(find(&sessions(&s), "rtmp").is_none());
    // The SRT player, the WebRTC session.
    let r = s.request("DELETE", &format!("{BASE}/{}", id("srt")), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(exits(&mut srt), "the SRT player still plays");
    let r = s.request("DELETE", &format!("{BASE}/{}", id("webrtc")), None);
    assert_eq!(r.status, 200, "{}", r.body);
    let left = sessions(&s);
    assert!(
        find(&left, "srt").is_none() && find(&left, "webrtc").is_none(),
        "{left:#?}"
    );
    let r = s.request("GET", "/v1/webrtc", None);
    assert_eq!(r.json()["response"]["sessions"], 0, "{}", r.body);
    // An LL-HLS viewer has no connection of its own: its address is
    // refused for a while (403 to its player's next requests), another
    // address still plays.
    let r = s.request("DELETE", &format!("{BASE}/{}", id("llhls")), None);
    assert_eq!(r.status, 200, "{}", r.body);
    let (status, body, _) = curl(&[], &llhls);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("ended by the operator"), "{body}");
    let (status, _, _) = curl(&["--interface", "127.0.0.2", "-o", "/dev/null"], &llhls);
    assert_eq!(status, 200);
    let left = sessions(&s);
    assert!(
        left.iter().all(|x| x["id"] != "llhls-127.0.0.1") && find(&left, "llhls").is_some(),
        "{left:#?}"
    );
    // Unknown ids, a stream that is not live; GET only on the list.
    for bad in [
        "rtmp-999999",
        "srt-x",
        "nothing",
        "webrtc-nosuchkey",
        "llhls-10.9.9.9",
    ] {
        let r = s.request("DELETE", &format!("{BASE}/{bad}"), None);
        assert_eq!(r.status, 404, "{bad}: {}", r.body);
    }
    let r = s.request(
        "GET",
        "/v1/vhosts/default/apps/app/streams/nope/sessions",
        None,
    );
    assert_eq!(r.status, 404);
    let r = s.request("POST", BASE, Some("{}"));
    assert_eq!(r.status, 405);
    // The publisher: its stream ends, ffmpeg's connection closes.
    let r = s.request("DELETE", &format!("{BASE}/publisher"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(exits(&mut src), "the publisher still publishes");
    let gone = wait_until(Duration::from_secs(10), || {
        (s.request("GET", BASE, None).status == 404).then_some(())
    });
    assert!(gone.is_some(), "the stream outlived its publisher");
    let log = s.log_text();
    assert!(
        log.contains("session [default/app/cam/publisher] ended through the API"),
        "{log}"
    );
    assert!(
        log.contains("rtmp 127.0.0.1:") && log.contains("ended from the API"),
        "{log}"
    );
}

/// Two LL-HLS players behind one address (a NAT): each multivariant
/// playlist kiln serves gives its chunklist URIs a session token of its
/// own, so each player is its own session (`llhls-TOKEN`, with its
/// address) and ending one stops that player alone; hls.js carries the
/// token as written. A player given a chunklist URL directly (no token)
/// still plays, counted by address.
#[test]
fn two_players_behind_one_address_are_two_sessions() {
    if !have_tool("ffmpeg") || !have_tool("curl") {
        return;
    }
    let (s, mut src) = server_with_cam("sessions-nat", None);
    let base = format!("http://127.0.0.1:{}/app/cam", s.media.llhls);
    // Each player: its master, then its video chunklist (token and all).
    let open = || -> String {
        let master = wait_until(Duration::from_secs(30), || {
            let (status, text, _) = curl(&[], &format!("{base}/llhls.m3u8"));
            (status == 200 && text.contains("chunklist_")).then_some(text)
        })
        .expect("no master playlist");
        let video = master
            .lines()
            .find(|l| l.starts_with("chunklist_") && l.contains("_video_"))
            .unwrap()
            .to_string();
        assert!(video.contains("?session="), "{master}");
        let audio = master.split("URI=\"").nth(1).unwrap_or("");
        assert!(
            audio.split('"').next().unwrap_or("").contains("?session="),
            "{master}"
        );
        let (status, _, _) = curl(&["-o", "/dev/null"], &format!("{base}/{video}"));
        assert_eq!(status, 200);
        video
    };
    let (a, b) = (open(), open());
    let token = |v: &str| v.split("session=").nth(1).unwrap().to_string();
    assert_ne!(token(&a), token(&b));
    let list = sessions(&s);
    let llhls: Vec<&Value> = list.iter().filter(|x| x["protocol"] == "llhls").collect();
    let ids: Vec<&str> = llhls.iter().filter_map(|x| x["id"].as_str()).collect();
    assert!(
        ids.contains(&format!("llhls-{}", token(&a)).as_str())
            && ids.contains(&format!("llhls-{}", token(&b)).as_str()),
        "{list:#?}"
    );
    for x in &llhls {
        if x["id"] != "llhls-127.0.0.1" {
            let addr: std::net::SocketAddr = x["remoteAddress"].as_str().unwrap().parse().unwrap();
            assert_eq!(addr.ip().to_string(), "127.0.0.1", "{x}");
        }
    }
    // Ending A: its next request is refused, B plays on.
    let r = s.request("DELETE", &format!("{BASE}/llhls-{}", token(&a)), None);
    assert_eq!(r.status, 200, "{}", r.body);
    let (status, body, _) = curl(&[], &format!("{base}/{a}"));
    assert_eq!(status, 403, "{body}");
    let (status, _, _) = curl(&["-o", "/dev/null"], &format!("{base}/{b}"));
    assert_eq!(status, 200);
    // A made-up token is no session: counted by address.
    let plain = a.split('?').next().unwrap().to_string();
    let (status, _, _) = curl(
        &["-o", "/dev/null"],
        &format!("{base}/{plain}?session=0123456789abcdef"),
    );
    assert_eq!(status, 200);
    let left = sessions(&s);
    assert!(
        left.iter()
            .all(|x| x["id"] != format!("llhls-{}", token(&a)))
            && left
                .iter()
                .any(|x| x["id"] == format!("llhls-{}", token(&b)))
            && left.iter().any(|x| x["id"] == "llhls-127.0.0.1")
            && left.iter().all(|x| x["id"] != "llhls-0123456789abcdef"),
        "{left:#?}"
    );
    // hls.js: its chunklist requests carry the token its master wrote.
    if let Some((browser, web)) = browser_with_hlsjs() {
        let before: Vec<String> = sessions(&s)
            .iter()
            .filter_map(|x| x["id"].as_str().map(str::to_string))
            .collect();
        let page = format!(
            "file://{}/llhls.html?src={base}/llhls.m3u8&seconds=6",
            web.display()
        );
        let dir = s.dir.clone();
        let player =
            std::thread::spawn(move || play_hlsjs(browser, &page, &dir.join("chromium"), 6));
        let joined = wait_until(Duration::from_secs(30), || {
            sessions(&s)
                .iter()
                .filter_map(|x| x["id"].as_str().map(str::to_string))
                .find(|id| id.starts_with("llhls-") && id.len() == 22 && !before.contains(id))
        });
        let r = player.join().unwrap();
        assert!(joined.is_some(), "hls.js was no session of its own: {r}");
        assert!(hlsjs_fatal_errors(&r).is_empty(), "{r}");
    }
    let _ = src.kill();
    let _ = src.wait();
}
