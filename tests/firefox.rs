//! A second browser (issue 41, part 5): Debian's Firefox ESR, driven by
//! puppeteer-core over WebDriver BiDi (`tests/web/browser.mjs`), as a WHIP
//! publisher, a WHEP viewer and an hls.js LL-HLS viewer.
//!
//! Firefox runs in a network namespace of its own and kiln in another
//! (Firefox pairs no candidate with a loopback one). Firefox offers H.264
//! over WebRTC only with Cisco's OpenH264 plugin, which it downloads from
//! Cisco on first use (Debian ships no build of it); where the plugin is
//! missing, as on a machine without internet, Firefox publishes VP8 and a
//! WHEP viewer of an H.264 stream gets its audio (kiln refuses the video
//! m-line and moves its ICE candidates to the audio one, which Firefox
//! needs). With the plugin, the same test expects the video decoded.

mod common;
#[path = "common/media.rs"]
mod media;
#[path = "common/webrtc_pages.rs"]
#[allow(dead_code)] // its Chromium lookup and publisher page are not used here
mod webrtc_pages;
use common::*;
use media::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;
use webrtc_pages::{node_page, seen};

const KILN: &str = "10.217.0.1";

/// Firefox, node and puppeteer-core, or `None` after saying why (a
/// failure under `KILN_REQUIRE_INTEROP=1`).
fn firefox() -> Option<(String, PathBuf)> {
    let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web");
    if !have_tool("node") || !have_tool("firefox-esr") || !have_tool("ffmpeg") {
        return None;
    }
    if !web.join("node_modules/puppeteer-core").exists() {
        assert!(
            std::env::var("KILN_REQUIRE_INTEROP").as_deref() != Ok("1"),
            "puppeteer-core is required (KILN_REQUIRE_INTEROP=1): npm ci --prefix tests/web"
        );
        eprintln!("SKIP: puppeteer-core is not installed (npm ci --prefix tests/web)");
        return None;
    }
    let out = Command::new("sh")
        .args(["-c", "command -v firefox-esr"])
        .output()
        .unwrap();
    Some((String::from_utf8_lossy(&out.stdout).trim().to_string(), web))
}

/// kiln's namespace and the browser's, joined by a veth pair.
struct TwoNs {
    kiln: String,
    browser: String,
}

impl TwoNs {
    fn create(subnet: u8) -> Option<TwoNs> {
        if !have_tool("ip") {
            return None;
        }
        let id = std::process::id();
        let net = TwoNs {
            kiln: format!("kiln-fk{subnet}-{id}"),
            browser: format!("kiln-fb{subnet}-{id}"),
        };
        let (k, b) = (&net.kiln, &net.browser);
        let (vk, vb) = (
            format!("kfk{subnet}-{}", id % 100_000),
            format!("kfb{subnet}-{}", id % 100_000),
        );
        let steps = [
            format!("netns add {k}"),
            format!("netns add {b}"),
            format!("link add {vk} netns {k} type veth peer name {vb} netns {b}"),
            format!("-n {k} addr add 10.217.{subnet}.1/24 dev {vk}"),
            format!("-n {b} addr add 10.217.{subnet}.2/24 dev {vb}"),
            format!("-n {k} link set {vk} up"),
            format!("-n {b} link set {vb} up"),
            format!("-n {k} link set lo up"),
            format!("-n {b} link set lo up"),
        ];
        for step in &steps {
            let args: Vec<String> = step.split(' ').map(String::from).collect();
            netns_or_skip(run("ip", &args))?;
        }
        Some(net)
    }
}

impl Drop for TwoNs {
    fn drop(&mut self) {
        for ns in [&self.kiln, &self.browser] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// A page of `tests/web` in Firefox (browser.mjs), in the browser's
/// namespace; its output is read with [`seen`].
fn page(net: &TwoNs, firefox: &str, web: &Path, script: &str, args: &[&str]) -> Child {
    let env = [("BROWSER", "firefox"), ("FIREFOX", firefox)];
    node_page(script, Some(&net.browser), &env, "chromium", web, args)
}

fn kiln_in(net: &TwoNs, tag: &str, host: &'static str) -> Server {
    enter_netns(&net.kiln);
    Server::start_with(
        tag,
        ServerOptions {
            media: true,
            bind_ip: "0.0.0.0",
            llhls: Some(
                "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>2</SegmentDuration>".into(),
            ),
            webrtc: Some(String::new()),
            webrtc_host: host,
            ..Default::default()
        },
    )
}

/// Firefox publishes its fake camera and microphone over WHIP (VP8 and
/// Opus without OpenH264) and a second Firefox page plays the stream over
/// WHEP meanwhile: kiln lists the tracks, the viewer decodes the video.
#[test]
fn firefox_publishes_over_whip_and_another_firefox_page_plays_it_over_whep() {
    let Some((firefox, web)) = firefox() else {
        return;
    };
    let Some(net) = TwoNs::create(0) else {
        return;
    };
    let got = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let s = kiln_in(&net, "firefox-whip", KILN);
                let port = s.media.llhls;
                let publisher = page(
                    &net,
                    &firefox,
                    &web,
                    "webrtc_publish.mjs",
                    &[
                        "whip",
                        &format!("http://{KILN}:{port}/app/fox?direction=whip"),
                        "16",
                        &format!("http://{KILN}:{port}/app/fox?direction=whep"),
                    ],
                );
                let live = s.tracks_within("fox", Duration::from_secs(40));
                (live, seen(publisher))
            })
            .join()
            .unwrap()
    });
    let (live, published) = got;
    println!("Firefox over WHIP: {published}\nkiln: {live:?}");
    let live = live.unwrap_or_else(|| panic!("no stream from Firefox: {published}"));
    assert_eq!(live["input"]["sourceType"], "WebRTC", "{live}");
    let codecs = live["input"]["tracks"].to_string();
    assert!(codecs.contains("OPUS"), "{codecs}");
    assert!(
        codecs.contains("VP8") || codecs.contains("H264"),
        "{codecs}"
    );
    assert_eq!(published["connectionState"], "connected", "{published}");
    let encoded = published["video"]["framesEncoded"].as_u64().unwrap_or(0);
    assert!(encoded > 100, "{published}");
    // The WHEP page played the last half of the publish.
    let viewer = &published["viewer"];
    assert_eq!(viewer["connectionState"], "connected", "{published}");
    assert_eq!(viewer["codec"], published["video"]["codec"], "{published}");
    let decoded = viewer["framesDecoded"].as_u64().unwrap_or(0);
    assert!(
        decoded > 60,
        "Firefox decoded {decoded} frames over WHEP: {published}"
    );
}

/// An RTMP source (H.264 and AAC) watched over WHEP in Firefox, and the
/// same stream's LL-HLS with hls.js in Firefox.
#[test]
fn firefox_watches_an_rtmp_stream_over_whep_and_with_hlsjs() {
    let Some((firefox, web)) = firefox() else {
        return;
    };
    if !web.join("node_modules/hls.js/dist/hls.min.js").exists() {
        return;
    }
    let Some(net) = TwoNs::create(1) else {
        return;
    };
    let kiln = "10.217.1.1";
    let (whep, hls) = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let s = kiln_in(&net, "firefox-whep", "10.217.1.1");
                let mut src = ffmpeg_source(
                    80,
                    &[],
                    "flv",
                    &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
                );
                s.wait_for_tracks("cam");
                let port = s.media.llhls;
                let whep = seen(page(
                    &net,
                    &firefox,
                    &web,
                    "webrtc_check.mjs",
                    &[
                        "whep",
                        &format!("http://{kiln}:{port}/app/cam?direction=whep"),
                        "10",
                    ],
                ));
                let src_url = format!("http://{kiln}:{port}/app/cam/llhls.m3u8");
                let page_url = format!(
                    "file://{}/llhls.html?src={}&seconds=12",
                    web.display(),
                    src_url.replace(':', "%3A").replace('/', "%2F")
                );
                let hls = seen(page(
                    &net,
                    &firefox,
                    &web,
                    "hlsjs_page.mjs",
                    &[&page_url, "12"],
                ));
                let _ = src.kill();
                let _ = src.wait();
                (whep, hls)
            })
            .join()
            .unwrap()
    });
    println!("Firefox over WHEP: {whep}\nhls.js in Firefox: {hls}");
    assert_eq!(whep["status"], 201, "{whep}");
    assert_eq!(whep["connectionState"], "connected", "{whep}");
    let audio = whep["audio"]["packetsReceived"].as_u64().unwrap_or(0);
    assert!(audio > 300, "{whep}");
    let offered = whep["offeredVideo"].to_string();
    if offered.contains("H264") {
        // OpenH264 is there: the video plays.
        assert!(
            whep["video"]["framesDecoded"].as_u64().unwrap_or(0) > u64::from(FPS) * 6,
            "{whep}"
        );
    } else {
        println!("NOTE: this Firefox offers no H.264 ({offered}): it lacks Cisco's OpenH264 plugin; the stream's audio played, its video was refused");
        assert!(whep["video"].is_null(), "{whep}");
    }
    assert_eq!(hls["supported"], true, "{hls}");
    assert!(hlsjs_fatal_errors(&hls).is_empty(), "{hls}");
    let played =
        hls["end"]["media"].as_f64().unwrap_or(0.0) - hls["start"]["media"].as_f64().unwrap_or(0.0);
    assert!(played >= 8.0, "played {played} s: {hls}");
    assert!(
        hls["decodedFrames"].as_u64().unwrap_or(0) > u64::from(FPS) * 6,
        "{hls}"
    );
}
