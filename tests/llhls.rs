//! Viewers over LL-HLS (issue 12): an ffmpeg publisher in over RTMP, and
//! ffprobe, curl and hls.js in headless Chromium as viewers on the LL-HLS
//! port, with the received media checked.

mod common;
#[path = "common/hls_check.rs"]
mod hls_check;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// The tests that run Chromium run one at a time: two browsers decoding
/// beside the encoders on two cores measure the machine, not kiln.
static BROWSER: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_browser() -> std::sync::MutexGuard<'static, ()> {
    BROWSER.lock().unwrap_or_else(|e| e.into_inner())
}

fn llhls_server(tag: &str, settings: &str) -> Server {
    Server::start_with(
        tag,
        ServerOptions {
            media: true,
            llhls: Some(settings.to_string()),
            ..Default::default()
        },
    )
}

/// ffmpeg publishing the test pattern over RTMP as `app/{stream}` for
/// `secs` seconds.
fn publish(s: &Server, stream: &str, secs: u32) -> std::process::Child {
    ffmpeg_source(
        secs,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/{stream}", s.media.rtmp),
    )
}

/// hls.js's live latency (s) at the end of a `play_hlsjs` run.
fn last_latency(r: &serde_json::Value) -> f64 {
    r["latency"]
        .as_array()
        .expect("latency samples")
        .iter()
        .rev()
        .find_map(|v| v.as_f64())
        .expect("hls.js reports a latency")
}

fn base(s: &Server, stream: &str) -> String {
    format!("http://127.0.0.1:{}/app/{stream}", s.media.llhls)
}

/// Waits until the stream's first segment is complete; returns the master
/// playlist and the video chunklist's name.
fn wait_for_first_segment(s: &Server, stream: &str) -> (String, String) {
    wait_for_segments(s, stream, 1)
}

/// Waits until `n` segments of the stream are complete.
fn wait_for_segments(s: &Server, stream: &str, n: usize) -> (String, String) {
    wait_for_segments_within(s, stream, n, Duration::from_secs(30))
}

fn wait_for_segments_within(
    s: &Server,
    stream: &str,
    n: usize,
    limit: Duration,
) -> (String, String) {
    let deadline = Instant::now() + limit;
    loop {
        assert!(
            Instant::now() < deadline,
            "not {n} LL-HLS segments within {limit:?}\n{}",
            s.log_text()
        );
        let (code, master, _) = curl(&[], &format!("{}/llhls.m3u8", base(s, stream)));
        if code == 200 {
            let video = master
                .lines()
                .find(|l| l.starts_with("chunklist_") && l.contains("_video_"))
                .map(|l| l.split('?').next().unwrap_or(l))
                .expect("a video chunklist")
                .to_string();
            let (_, list, _) = curl(&[], &format!("{}/{video}", base(s, stream)));
            if list.matches("#EXTINF:").count() >= n {
                return (master, video);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn ffprobe_counts(url: &str) -> Vec<(String, u64)> {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-count_packets", "-show_entries"])
        .args(["stream=codec_name,nb_read_packets", "-of", "csv=p=0"])
        .arg(url)
        .output()
        .expect("ffprobe runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (c, n) = l.split_once(',')?;
            Some((c.to_string(), n.trim().parse().ok()?))
        })
        .collect()
}

/// ffprobe counts the frames of every track of `url`: within 2% of what
/// the `secs`-second source sent (H.264 at FPS, AAC at 48 kHz).
fn assert_every_frame(url: &str, secs: u32, what: &str) {
    let counts = ffprobe_counts(url);
    let get = |c: &str| counts.iter().find(|(n, _)| n == c).map_or(0, |(_, n)| *n);
    let (video_frames, audio_frames) = (u64::from(secs * FPS), u64::from(secs) * 48_000 / 1024);
    let within = |got: u64, want: u64| got.abs_diff(want) * 50 <= want;
    println!(
        "{what} read back: {counts:?}; source {video_frames} video, ~{audio_frames} audio frames"
    );
    assert!(within(get("h264"), video_frames), "{counts:?}");
    assert!(within(get("aac"), audio_frames), "{counts:?}");
}

#[test]
fn ffprobe_reads_every_frame_of_an_ended_stream() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let s = llhls_server(
        "llhls-ffprobe",
        "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>2</SegmentDuration>",
    );
    let secs = 8;
    // B-frames: composition offsets must survive.
    let mut src = ffmpeg_source_cmd(
        secs,
        "640x360",
        &["-bf", "2"],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/vod", s.media.rtmp),
    )
    .spawn()
    .unwrap();
    let (master, video) = wait_for_first_segment(&s, "vod");
    assert!(master.contains("#EXT-X-MEDIA:TYPE=AUDIO"), "{master}");
    assert!(master.contains("CODECS=\"avc1."), "{master}");
    assert!(src.wait().unwrap().success());
    // Ended: the chunklists close with ENDLIST and stay.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, list, _) = curl(&[], &format!("{}/{video}", base(&s, "vod")));
        if list.contains("#EXT-X-ENDLIST") {
            break;
        }
        assert!(Instant::now() < deadline, "no ENDLIST:\n{list}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_every_frame(&format!("{}/llhls.m3u8", base(&s, "vod")), secs, "LL-HLS");
    // Decode times only grow, presentation times follow (B-frames).
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v", "-show_entries"])
        .args(["packet=pts_time,dts_time", "-of", "csv=p=0"])
        .arg(format!("{}/llhls.m3u8", base(&s, "vod")))
        .output()
        .unwrap();
    let times: Vec<(f64, f64)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (p, d) = l.split_once(',')?;
            Some((p.parse().ok()?, d.parse().ok()?))
        })
        .collect();
    assert!(
        times.windows(2).all(|w| w[0].1 < w[1].1),
        "dts not monotonic"
    );
    assert!(times.iter().all(|(p, d)| p >= d), "pts before dts");
    assert!(
        times.iter().any(|(p, d)| p > d),
        "no composition offsets (B-frames)"
    );
}

/// HLS with MPEG-TS segments (players without LL-HLS): ffprobe reads
/// every frame of an ended stream, from `playlist.m3u8`.
#[test]
fn hls_with_ts_segments_for_players_without_ll_hls() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") || !have_tool("curl") {
        return;
    }
    let s = Server::start_with(
        "hls-ts",
        ServerOptions {
            media: true,
            hls: Some("<SegmentDuration>2</SegmentDuration>".into()),
            ..Default::default()
        },
    );
    let secs = 8;
    let mut src = ffmpeg_source_cmd(
        secs,
        "640x360",
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/ts", s.media.rtmp),
    )
    .spawn()
    .unwrap();
    assert!(src.wait().unwrap().success());
    let url = format!("{}/playlist.m3u8", base(&s, "ts"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let media = format!("{}/medialist_0_hls.m3u8", base(&s, "ts"));
    loop {
        let (code, list, _) = curl(&[], &media);
        if code == 200 && list.contains("#EXT-X-ENDLIST") {
            assert!(list.contains("seg_0_0_hls.ts"), "{list}");
            break;
        }
        assert!(Instant::now() < deadline, "no ENDLIST ({code}):\n{list}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, master, _) = curl(&[], &url);
    assert_eq!(code, 200);
    assert!(master.contains("medialist_0_hls.m3u8"), "{master}");
    let (_, head, _) = curl(&["-I"], &format!("{}/seg_0_0_hls.ts", base(&s, "ts")));
    assert!(head.contains("video/mp2t"), "{head}");
    // LL-HLS is not enabled for this application.
    assert_eq!(curl(&[], &format!("{}/llhls.m3u8", base(&s, "ts"))).0, 404);
    assert_every_frame(&url, secs, "HLS (TS)");
}

#[test]
fn blocking_reloads_preload_hints_and_refusals() {
    if !have_tool("ffmpeg") || !have_tool("curl") {
        return;
    }
    let s = llhls_server(
        "llhls-blocking",
        "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>2</SegmentDuration>",
    );
    let mut src = publish(&s, "live", 20);
    let (_, video) = wait_for_first_segment(&s, "live");
    let url = format!("{}/{video}", base(&s, "live"));
    let (_, list, _) = curl(&[], &url);
    for tag in [
        "#EXT-X-VERSION:10",
        "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES",
        "#EXT-X-PART-INF:PART-TARGET=0.500",
        "#EXT-X-MAP:URI=\"init_",
        "#EXT-X-PROGRAM-DATE-TIME:",
        "#EXT-X-RENDITION-REPORT:",
    ] {
        assert!(list.contains(tag), "{tag} missing:\n{list}");
    }
    // The preload hint names the next part: asking for a playlist that
    // holds it blocks until it exists, then lists it.
    let hint = list
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\""))
        .map(|u| u.trim_end_matches('"').to_string())
        .expect("a preload hint");
    let fields: Vec<&str> = hint.split('_').collect();
    let (msn, part): (u64, u64) = (fields[2].parse().unwrap(), fields[3].parse().unwrap());
    let (code, blocked, _) = curl(&[], &format!("{url}?_HLS_msn={msn}&_HLS_part={part}"));
    assert_eq!(code, 200);
    assert!(
        blocked.contains(&format!("URI=\"{hint}\"")),
        "{hint} not in\n{blocked}"
    );
    // The hinted part itself, asked for before it exists, comes when it does.
    let (_, list, _) = curl(&[], &url);
    let hint = list
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\""))
        .map(|u| u.trim_end_matches('"').to_string())
        .unwrap();
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "-D", "-", "-o", "/dev/null"])
        .arg(format!("{}/{hint}", base(&s, "live")))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&out.stdout);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("Content-Type: video/mp4"), "{head}");
    // More than two segments ahead: 400; wrong key, stream, file: 404.
    assert_eq!(
        curl(&[], &format!("{url}?_HLS_msn={}&_HLS_part=0", msn + 3)).0,
        400
    );
    assert_eq!(
        curl(
            &[],
            &format!("{}/chunklist_1_video_00000000_llhls.m3u8", base(&s, "live"))
        )
        .0,
        404
    );
    assert_eq!(
        curl(&[], &format!("{}/llhls.m3u8", base(&s, "nosuch"))).0,
        404
    );
    assert_eq!(
        curl(&[], &format!("{}/../../etc/passwd", base(&s, "live"))).0,
        404
    );
    // CORS preflight, HEAD.
    let (code, _, out) = curl(
        &["-X", "OPTIONS", "-D", "/dev/stderr"],
        &format!("{}/llhls.m3u8", base(&s, "live")),
    );
    assert_eq!(code, 204);
    assert!(String::from_utf8_lossy(&out.stderr).contains("Access-Control-Allow-Origin: *"));
    let (code, body, _) = curl(&["-I"], &format!("{}/llhls.m3u8", base(&s, "live")));
    assert_eq!(code, 200);
    assert!(body.contains("application/vnd.apple.mpegurl"), "{body}");
    follow_parts_with_the_checker(&s, &video);
    let _ = src.kill();
    let _ = src.wait();
}

/// (msn, part) of a part URI (`part_{track}_{msn}_{part}_...`).
fn part_numbers(uri: &str) -> (u64, u64) {
    let f: Vec<&str> = uri.split('_').collect();
    (f[2].parse().unwrap(), f[3].parse().unwrap())
}

/// Ten parts in a row as a low-latency player takes them: every chunklist
/// held to RFC 8216bis by `hls_check`, every INDEPENDENT part starting
/// with a sync sample, and each blocking reload answered within 50 ms of
/// the part becoming visible to a client polling without blocking (one
/// late answer of ten is tolerated: the test shares the machine).
fn follow_parts_with_the_checker(s: &Server, video: &str) {
    let port = s.media.llhls;
    let path = format!("/app/live/{video}");
    let master = hls_check::get(port, "/app/live/llhls.m3u8", &[]).text();
    let audio = master
        .lines()
        .find_map(|l| l.split("URI=\"").nth(1))
        .map(|u| u.trim_end_matches('"').to_string())
        .expect("an audio rendition");
    let audio_list = hls_check::check_chunklist(
        &hls_check::get(port, &format!("/app/live/{audio}"), &[]).text(),
    );
    assert!(
        audio_list.parts.iter().all(|p| p.independent),
        "every audio part is independent"
    );
    let mut checked = std::collections::HashSet::new();
    let mut lags = Vec::new();
    for _ in 0..10 {
        let list = hls_check::check_chunklist(&hls_check::get(port, &path, &[]).text());
        let hint = list.preload_hint.clone().expect("a hint");
        let (msn, part) = part_numbers(&hint);
        let poller = {
            let (path, hint) = (path.clone(), hint.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(20);
                loop {
                    let l = hls_check::check_chunklist(&hls_check::get(port, &path, &[]).text());
                    if l.lists_part(&hint) {
                        return Instant::now();
                    }
                    assert!(Instant::now() < deadline, "{hint} never listed");
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        };
        let blocked = hls_check::get(
            port,
            &format!("{path}?_HLS_msn={msn}&_HLS_part={part}"),
            &[],
        );
        let answered = Instant::now();
        let seen = poller.join().expect("the poller");
        assert_eq!(blocked.status, 200);
        let l = hls_check::check_chunklist(&blocked.text());
        assert!(l.lists_part(&hint), "{hint} not in the blocking answer");
        lags.push(answered.saturating_duration_since(seen));
        for p in l.parts.iter().filter(|p| checked.insert(p.uri.clone())) {
            let data = hls_check::get(port, &format!("/app/live/{}", p.uri), &[]);
            assert_eq!(data.status, 200, "{}", p.uri);
            assert_eq!(
                hls_check::starts_with_sync_sample(&data.body),
                p.independent || p.index == 0,
                "{}: INDEPENDENT={} but its first sample's sync flag says otherwise",
                p.uri,
                p.independent
            );
        }
    }
    let late = lags
        .iter()
        .filter(|l| **l > Duration::from_millis(50))
        .count();
    eprintln!("blocking answer after the part was visible to polling: {lags:?}");
    assert!(late <= 1, "blocking reloads answered late: {lags:?}");
}

/// `<CrossDomains>` and `<CacheControl>` of `<LLHLS>`: only the listed
/// origins get CORS headers (the request's origin echoed, `Vary: Origin`),
/// and each kind of file carries its max-age (OME's defaults elsewhere).
#[test]
fn cross_domains_and_cache_control_follow_the_application() {
    if !have_tool("ffmpeg") {
        return;
    }
    let s = llhls_server(
        "llhls-cors",
        "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>1</SegmentDuration>\
         <CrossDomains><Url>*.allowed.test</Url><Url>http://exact.test:8080</Url></CrossDomains>\
         <CacheControl><MasterPlaylistMaxAge>5</MasterPlaylistMaxAge>\
         <PartialSegmentMaxAge>30</PartialSegmentMaxAge><SegmentMaxAge>0</SegmentMaxAge></CacheControl>",
    );
    let mut src = publish(&s, "live", 15);
    let (_, video) = wait_for_first_segment(&s, "live");
    let port = s.media.llhls;
    let master = "/app/live/llhls.m3u8";
    let allowed = hls_check::get(port, master, &[("Origin", "https://a.allowed.test")]);
    assert_eq!(allowed.status, 200);
    assert_eq!(
        allowed.header("Access-Control-Allow-Origin"),
        Some("https://a.allowed.test")
    );
    assert_eq!(allowed.header("Vary"), Some("Origin"));
    assert_eq!(allowed.header("Access-Control-Allow-Credentials"), None);
    assert_eq!(allowed.header("Cache-Control"), Some("max-age=5"));
    let exact = hls_check::get(port, master, &[("Origin", "http://exact.test:8080")]);
    assert_eq!(
        exact.header("Access-Control-Allow-Origin"),
        Some("http://exact.test:8080")
    );
    for origin in [
        "https://evil.test",
        "https://allowed.test.evil.test",
        "http://exact.test",
    ] {
        let other = hls_check::get(port, master, &[("Origin", origin)]);
        assert_eq!(other.status, 200);
        assert_eq!(
            other.header("Access-Control-Allow-Origin"),
            None,
            "{origin}"
        );
    }
    let list = hls_check::get(port, &format!("/app/live/{video}"), &[]);
    assert_eq!(list.header("Cache-Control"), Some("no-cache, no-store"));
    let parsed = hls_check::check_chunklist(&list.text());
    let hint = parsed.preload_hint.unwrap();
    let (msn, part) = part_numbers(&hint);
    let blocked = hls_check::get(
        port,
        &format!("/app/live/{video}?_HLS_msn={msn}&_HLS_part={part}"),
        &[],
    );
    assert_eq!(blocked.header("Cache-Control"), Some("max-age=60"));
    let part = hls_check::get(port, &format!("/app/live/{}", parsed.parts[0].uri), &[]);
    assert_eq!(part.header("Cache-Control"), Some("max-age=30"));
    let (seg_msn, _, seg) = &parsed.segments[0];
    let seg = hls_check::get(port, &format!("/app/live/{seg}"), &[]);
    assert_eq!(seg.status, 200, "segment {seg_msn}");
    assert_eq!(seg.header("Cache-Control"), Some("no-cache, no-store"));
    let _ = src.kill();
    let _ = src.wait();
}

/// The TLS port serves the same playlists with the vhost's certificate
/// (chosen by SNI), verified by curl against that certificate.
#[test]
fn the_tls_port_serves_with_the_vhost_certificate() {
    if !have_tool("ffmpeg") || !have_tool("curl") {
        return;
    }
    let certs = temp_dir("llhls-certs");
    let (cert, key) = make_cert(&certs, "vhost");
    let s = Server::start_with(
        "llhls-tls",
        ServerOptions {
            media: true,
            llhls: Some("<SegmentDuration>1</SegmentDuration>".into()),
            vhost_tls: Some((cert.clone(), key)),
            ..Default::default()
        },
    );
    let mut src = publish(&s, "tls", 15);
    let (_, video) = wait_for_first_segment(&s, "tls");
    let https = format!("https://localhost:{}/app/tls", s.media.llhls_tls);
    let ca = cert.display().to_string();
    let (code, master, out) = curl(&["--cacert", &ca], &format!("{https}/llhls.m3u8"));
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(master.contains(&video), "{master}");
    let (code, list, _) = curl(&["--cacert", &ca], &format!("{https}/{video}"));
    assert_eq!(code, 200);
    assert!(list.contains("#EXTINF:"), "{list}");
    // A client that does not trust the certificate is refused by TLS.
    assert_eq!(curl(&[], &format!("{https}/llhls.m3u8")).0, 0);
    let _ = src.kill();
    let _ = src.wait();
}

/// hls.js (npm, pinned in tests/web) plays the stream in headless Chromium
/// in low-latency mode for 20 s.
#[test]
fn hls_js_plays_the_stream_in_headless_chromium() {
    let _one = one_browser();
    let Some((browser, web)) = browser_with_hlsjs() else {
        return;
    };
    if !have_tool("ffmpeg") {
        return;
    }
    let chunk = std::env::var("KILN_TEST_CHUNK").unwrap_or_else(|_| "0.2".into());
    let s = llhls_server(
        "llhls-browser",
        &format!("<ChunkDuration>{chunk}</ChunkDuration><SegmentDuration>2</SegmentDuration>"),
    );
    let mut src = publish(&s, "cam", 60);
    // A viewer who comes while the stream runs (not in its first second).
    wait_for_segments(&s, "cam", 3);
    let seconds = 20;
    let page = format!(
        "file://{}/llhls.html?src={}/llhls.m3u8&seconds={seconds}",
        web.display(),
        base(&s, "cam")
    );
    // hls.js 1.5 can lose a segment's last part while it catches up right
    // after starting (a blocking reload answered while the part before is
    // still loading): it then stalls once at start and raises its own
    // target latency for good. That client race gets one more attempt; in
    // steady state a stall fails.
    let mut r = serde_json::Value::Null;
    // While it plays, an ID3 event every 2 s (:sendEvent); hls.js must hand
    // them to the page (FRAG_PARSING_METADATA).
    let stop = std::sync::atomic::AtomicBool::new(false);
    let sent = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for n in 1..=40 {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let text = format!("browser-event-{n}");
                let body = format!(
                    r#"{{"eventFormat":"id3v2","events":[{{"frameType":"TXXX","info":"kiln","data":"{text}"}}]}}"#
                );
                let r = s.request("POST", "/v1/vhosts/default/apps/app/streams/cam:sendEvent", Some(&body));
                assert_eq!(r.status, 200, "{}", r.body);
                sent.lock().unwrap().push((Instant::now(), text));
                std::thread::sleep(Duration::from_secs(2));
            }
        });
        for attempt in 1..=2 {
            let started = Instant::now();
            r = play_hlsjs(
                browser,
                &page,
                &s.dir.join(format!("chromium-{attempt}")),
                seconds,
            );
            println!("hls.js (attempt {attempt}): {r}");
            // Events sent from 3 s after the page opened to 4 s before it
            // closed are in parts it played: every one must have come.
            let texts: Vec<String> = r["id3"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|e| e["text"].as_str().map(str::to_string))
                .collect();
            let window = started + Duration::from_secs(3)
                ..started + Duration::from_secs(u64::from(seconds) - 4);
            let expected: Vec<String> = sent
                .lock()
                .unwrap()
                .iter()
                .filter(|(at, _)| window.contains(at))
                .map(|(_, t)| t.clone())
                .collect();
            assert!(expected.len() >= 5, "{expected:?}");
            for t in &expected {
                assert!(
                    texts.iter().any(|got| got.contains(t.as_str())),
                    "hls.js did not report the ID3 event {t}: {texts:?}"
                );
            }
            if r["stalls"] == 0 {
                break;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    if std::env::var("KILN_TEST_DUMP").is_ok() {
        println!("{}", s.log_text());
    }
    assert_eq!(r["supported"], true);
    assert!(hlsjs_fatal_errors(&r).is_empty(), "{r}");
    assert_eq!(r["stalls"], 0, "{r}");
    let played = r["end"]["media"].as_f64().unwrap() - r["start"]["media"].as_f64().unwrap_or(0.0);
    assert!(
        played >= f64::from(seconds) - 5.0,
        "played {played} s of {seconds}: {r}"
    );
    assert!(
        r["decodedFrames"].as_u64().unwrap() > 0 && r["videoWidth"].as_u64() == Some(640),
        "{r}"
    );
    let last = last_latency(&r);
    println!("hls.js live latency at the end (ChunkDuration {chunk}): {last:.3} s");
    assert!(last < 2.0, "latency {last} s: {r}");
    let _ = src.kill();
    let _ = src.wait();
}

/// hls.js in headless Chromium plays a stream whose vhost wants signed
/// URLs (OME's SignedPolicy on `llhls`): the signed master, then every
/// chunklist, init section and part with the session kiln put in them.
#[test]
fn hls_js_plays_a_signed_url() {
    let _one = one_browser();
    let Some((browser, web)) = browser_with_hlsjs() else {
        return;
    };
    if !have_tool("ffmpeg") || !have_tool("python3") {
        return;
    }
    let secret = "browser-secret";
    let s = Server::start_with(
        "llhls-signed-browser",
        ServerOptions {
            media: true,
            llhls: Some("<ChunkDuration>0.5</ChunkDuration><SegmentDuration>2</SegmentDuration>".into()),
            vhost_access: format!(
                "<SignedPolicy><PolicyQueryKeyName>policy</PolicyQueryKeyName>\
                 <SignatureQueryKeyName>signature</SignatureQueryKeyName>\
                 <SecretKey>{secret}</SecretKey><Enables><Publishers>llhls</Publishers></Enables></SignedPolicy>"
            ),
            ..Default::default()
        },
    );
    let mut src = publish(&s, "cam", 45);
    let expire = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 600_000;
    let signed = sign_url_python(
        secret,
        &format!("{}/llhls.m3u8", base(&s, "cam")),
        &serde_json::json!({ "url_expire": expire }),
    );
    // Wait for segments (the unsigned master is refused: 401).
    assert_eq!(curl(&[], &format!("{}/llhls.m3u8", base(&s, "cam"))).0, 401);
    let ready = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < ready, "no segments: {}", s.log_text());
        let (code, master, _) = curl(&[], &signed);
        // (under the signed policy, with its admission session)
        let video = master
            .lines()
            .find(|l| l.starts_with("chunklist_") && l.contains("_video_"));
        if let (200, Some(video)) = (code, video) {
            let list = curl(&[], &format!("{}/{video}", base(&s, "cam"))).1;
            if list.matches("#EXTINF").count() >= 2 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let encoded: String = signed
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    let seconds = 10;
    let page = format!(
        "file://{}/llhls.html?src={encoded}&seconds={seconds}",
        web.display()
    );
    let r = play_hlsjs(browser, &page, &s.dir.join("chromium"), seconds);
    println!("hls.js with a signed URL: {r}");
    assert_eq!(r["supported"], true);
    assert!(hlsjs_fatal_errors(&r).is_empty(), "{r}");
    let played = r["end"]["media"].as_f64().unwrap() - r["start"]["media"].as_f64().unwrap_or(0.0);
    assert!(played >= f64::from(seconds) - 4.0, "played {played} s: {r}");
    assert!(r["decodedFrames"].as_u64().unwrap() > 0, "{r}");
    // Every file it fetched carried its session: no 401 in the log.
    let log = s.log_text();
    assert!(log.contains("?session="), "{log}");
    let refused = log
        .lines()
        .filter(|l| l.contains("-> 401") && l.contains("session="))
        .count();
    assert_eq!(refused, 0, "{log}");
    let _ = src.kill();
    let _ = src.wait();
}

/// The `emsg` boxes at the front of a part: (scheme, ID3 tag bytes).
fn emsgs(part: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= part.len() && &part[at + 4..at + 8] == b"emsg" {
        let size = u32::from_be_bytes(part[at..at + 4].try_into().unwrap()) as usize;
        let body = &part[at + 8..at + size];
        assert_eq!(body[0], 1, "emsg version 1");
        // version+flags 4, timescale 4, presentation_time 8, duration 4, id 4
        let rest = &body[24..];
        let scheme_end = rest.iter().position(|b| *b == 0).unwrap();
        let scheme = String::from_utf8_lossy(&rest[..scheme_end]).into_owned();
        let value_end =
            scheme_end + 1 + rest[scheme_end + 1..].iter().position(|b| *b == 0).unwrap();
        out.push((scheme, rest[value_end + 1..].to_vec()));
        at += size;
    }
    out
}

/// `:sendEvent` as OME documents it: an ID3v2.4 tag in an `emsg` in the
/// first part cut after the call (the hinted one, or the one after it if
/// a part was cut in between), `urgent` cutting one at once, cues in the
/// chunklists, and the refusals.
#[test]
fn send_event_puts_id3_into_the_next_part() {
    if !have_tool("ffmpeg") {
        return;
    }
    let s = Server::start_with(
        "llhls-events",
        ServerOptions {
            media: true,
            llhls: Some(
                "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>2</SegmentDuration>".into(),
            ),
            hls: Some("<SegmentDuration>2</SegmentDuration>".into()),
            ..Default::default()
        },
    );
    let mut src = publish(&s, "live", 30);
    let (_, video) = wait_for_first_segment(&s, "live");
    let port = s.media.llhls;
    let list_path = format!("/app/live/{video}");
    let send = |body: &str| {
        s.request(
            "POST",
            "/v1/vhosts/default/apps/app/streams/live:sendEvent",
            Some(body),
        )
    };
    let list = hls_check::check_chunklist(&hls_check::get(port, &list_path, &[]).text());
    let hint = list.preload_hint.unwrap();
    let r = send(
        r#"{"eventFormat":"id3v2","eventType":"video","events":[{"frameType":"TXXX","info":"kiln","data":"hello-1"},{"frameType":"TIT2","data":"title-1"}]}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        serde_json::json!({"statusCode": 200, "message": "OK"})
    );
    let (msn, part) = part_numbers(&hint);
    let after = hls_check::check_chunklist(
        &hls_check::get(
            port,
            &format!("{list_path}?_HLS_msn={msn}&_HLS_part={}", part + 1),
            &[],
        )
        .text(),
    );
    let new_parts: Vec<_> = after
        .parts
        .iter()
        .skip_while(|p| p.uri != hint)
        .take(2)
        .collect();
    assert_eq!(new_parts.len(), 2, "{hint} and the part after it");
    let mut found = Vec::new();
    for p in &new_parts {
        let data = hls_check::get(port, &format!("/app/live/{}", p.uri), &[]).body;
        for (scheme, tag) in emsgs(&data) {
            assert_eq!(scheme, "https://aomedia.org/emsg/ID3");
            assert_eq!(&tag[..4], b"ID3\x04");
            found.push((p.uri.clone(), String::from_utf8_lossy(&tag).into_owned()));
        }
    }
    assert_eq!(found.len(), 1, "one tag in one of the two parts: {found:?}");
    assert!(
        found[0].1.contains("\u{3}kiln\u{0}hello-1") && found[0].1.contains("title-1"),
        "{found:?}"
    );
    // Urgent: the newest part right after the answer carries it.
    let r = send(
        r#"{"eventFormat":"id3v2","urgent":true,"events":[{"frameType":"TXXX","info":"kiln","data":"urgent-2"}]}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let now = hls_check::check_chunklist(&hls_check::get(port, &list_path, &[]).text());
    let newest = now.parts.last().unwrap();
    let data = hls_check::get(port, &format!("/app/live/{}", newest.uri), &[]).body;
    let tags = emsgs(&data);
    assert!(
        tags.iter()
            .any(|(_, t)| String::from_utf8_lossy(t).contains("urgent-2")),
        "urgent event not in the newest part {}",
        newest.uri
    );
    // A cue out and in: the tags in the chunklist, before a part.
    let r = send(r#"{"eventFormat":"cue","events":[{"cueType":"out","duration":30000}]}"#);
    assert_eq!(r.status, 200, "{}", r.body);
    let hint = now.preload_hint.clone().unwrap();
    let (msn, part) = part_numbers(&hint);
    let text = hls_check::get(
        port,
        &format!("{list_path}?_HLS_msn={msn}&_HLS_part={}", part + 1),
        &[],
    )
    .text();
    hls_check::check_chunklist(&text);
    let at = text
        .find("#EXT-X-CUE-OUT:DURATION=30.000\n")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        text[at..]
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("#EXT-X-PART:"),
        "{text}"
    );
    // Urgent: the part being built is cut, the break ends with the next.
    let before = hls_check::check_chunklist(&hls_check::get(port, &list_path, &[]).text());
    assert_eq!(
        send(r#"{"eventFormat":"cue","urgent":true,"events":[{"cueType":"in"}]}"#).status,
        200
    );
    let hint = before.preload_hint.unwrap();
    // Follow the parts (blocking reloads on each hint) until the cue shows.
    let mut text = hls_check::get(port, &list_path, &[]).text();
    for _ in 0..6 {
        if text.contains("#EXT-X-CUE-IN\n") {
            break;
        }
        let next = hls_check::check_chunklist(&text).preload_hint.unwrap();
        let (msn, part) = part_numbers(&next);
        text = hls_check::get(
            port,
            &format!("{list_path}?_HLS_msn={msn}&_HLS_part={part}"),
            &[],
        )
        .text();
    }
    let at = text
        .find("#EXT-X-CUE-IN\n")
        .unwrap_or_else(|| panic!("{text}"));
    let next = text[at..].lines().nth(1).unwrap();
    assert!(
        next.starts_with("#EXT-X-PART:") && !next.contains(&hint),
        "{text}"
    );
    // Refusals.
    let r = s.request(
        "POST",
        "/v1/vhosts/default/apps/app/streams/nosuch:sendEvent",
        Some(r#"{"eventFormat":"id3v2","events":[{"frameType":"TIT2","data":"x"}]}"#),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    for (body, says) in [
        (
            r#"{"eventFormat":"scte35","events":[{"data":"x"}]}"#,
            "scte35",
        ),
        (r#"{"eventFormat":"id3v2","events":[]}"#, "non-empty"),
        (
            r#"{"eventFormat":"id3v2","events":[{"frameType":"APIC","data":"x"}]}"#,
            "APIC",
        ),
        ("not json", "JSON"),
    ] {
        let r = send(body);
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(r.message().contains(says), "{body}: {}", r.message());
    }
    // :sendEvents: one envelope per item, 207 when they differ.
    let r = s.request(
        "POST",
        "/v1/vhosts/default/apps/app/streams/live:sendEvents",
        Some(r#"[{"eventFormat":"id3v2","events":[{"frameType":"TIT2","data":"a"}]},{"eventFormat":"scte35","events":[{}]}]"#),
    );
    assert_eq!(r.status, 207, "{}", r.body);
    let items = r.json();
    assert_eq!(items[0]["statusCode"], 200);
    assert_eq!(items[1]["statusCode"], 400);
    // HLS (TS): the tags as ID3 PES on a timed-metadata stream, the cues
    // before their segments.
    let deadline = Instant::now() + Duration::from_secs(15);
    let media = "/app/live/medialist_0_hls.m3u8";
    let list = loop {
        let list = hls_check::get(port, media, &[]).text();
        if list.contains("#EXT-X-CUE-IN\n") {
            break list;
        }
        assert!(
            Instant::now() < deadline,
            "no cues in the HLS playlist:\n{list}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let out = list.find("#EXT-X-CUE-OUT:DURATION=30.000\n").expect(&list);
    assert!(out < list.find("#EXT-X-CUE-IN\n").unwrap(), "{list}");
    let with_tag: Vec<String> = list
        .lines()
        .filter(|l| l.starts_with("seg_0_"))
        .filter(|seg| {
            let data = hls_check::get(port, &format!("/app/live/{seg}"), &[]).body;
            data.windows(7).any(|w| w == b"hello-1")
        })
        .map(str::to_string)
        .collect();
    assert_eq!(with_tag.len(), 1, "hello-1 in one TS segment:\n{list}");
    if have_tool("ffprobe") {
        let out = Command::new("ffprobe")
            .args([
                "-v",
                "error",
                "-show_entries",
                "stream=codec_name",
                "-of",
                "csv=p=0",
            ])
            .arg(format!("http://127.0.0.1:{port}/app/live/{}", with_tag[0]))
            .output()
            .unwrap();
        let codecs = String::from_utf8_lossy(&out.stdout);
        assert!(codecs.contains("timed_id3"), "{codecs}");
    }
    let _ = src.kill();
    let _ = src.wait();
}

/// `:concludeHlsLive`: the LL-HLS and HLS playlists end at once and stop
/// changing (a VOD that ffprobe reads whole), parked viewers are answered,
/// and the stream itself goes on.
#[test]
fn conclude_hls_live_turns_the_playlists_into_vod() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let s = Server::start_with(
        "llhls-conclude",
        ServerOptions {
            media: true,
            llhls: Some(
                "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>2</SegmentDuration>".into(),
            ),
            hls: Some("<SegmentDuration>2</SegmentDuration>".into()),
            ..Default::default()
        },
    );
    let mut src = publish(&s, "live", 30);
    let (_, video) = wait_for_segments(&s, "live", 2);
    let port = s.media.llhls;
    let list_path = format!("/app/live/{video}");
    let action = "/v1/vhosts/default/apps/app/streams/live:concludeHlsLive";
    // A viewer parked on the next part is answered by the conclusion.
    let hint = hls_check::check_chunklist(&hls_check::get(port, &list_path, &[]).text())
        .preload_hint
        .unwrap();
    let (msn, part) = part_numbers(&hint);
    let parked = std::thread::spawn(move || {
        hls_check::get(
            port,
            &format!("{list_path}?_HLS_msn={msn}&_HLS_part={}", part + 3),
            &[],
        )
    });
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(s.request("POST", action, Some("[]")).status, 400);
    let r = s.request("POST", action, Some("{}"));
    assert_eq!(r.status, 200, "{}", r.body);
    let answered = parked.join().unwrap();
    assert_eq!(answered.status, 200);
    assert!(
        answered.text().contains("#EXT-X-ENDLIST"),
        "{}",
        answered.text()
    );
    let list_path = format!("/app/live/{video}");
    let ended = hls_check::get(port, &list_path, &[]).text();
    let checked = hls_check::check_chunklist(&ended);
    assert!(checked.ended && checked.preload_hint.is_none(), "{ended}");
    let ts_list = hls_check::get(port, "/app/live/medialist_0_hls.m3u8", &[]).text();
    assert!(ts_list.contains("#EXT-X-ENDLIST"), "{ts_list}");
    // The stream goes on; its playlists do not change any more.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(hls_check::get(port, &list_path, &[]).text(), ended);
    assert_eq!(
        hls_check::get(port, "/app/live/medialist_0_hls.m3u8", &[]).text(),
        ts_list
    );
    assert_eq!(
        s.request("GET", "/v1/vhosts/default/apps/app/streams/live", None)
            .status,
        200
    );
    // ffprobe reads the concluded LL-HLS as a whole VOD: as many video
    // frames as the segments' durations hold.
    let seconds: f64 = checked.segments.iter().map(|(_, d, _)| d).sum();
    let counts = ffprobe_counts(&format!("{}/llhls.m3u8", base(&s, "live")));
    let frames = counts
        .iter()
        .find(|(c, _)| c == "h264")
        .map_or(0, |(_, n)| *n);
    let want = (seconds * f64::from(FPS)).round() as u64;
    assert!(
        frames.abs_diff(want) * 50 <= want,
        "{frames} frames for {seconds} s: {counts:?}"
    );
    assert_eq!(
        s.request(
            "POST",
            "/v1/vhosts/default/apps/app/streams/nosuch:concludeHlsLive",
            Some("{}")
        )
        .status,
        404
    );
    let _ = src.kill();
    let _ = src.wait();
}

/// HLS dumps: one started through the API on a live stream and
/// one from `<LLHLS><Dumps><Dump>`; once the stream ends, each directory
/// plays back as VOD with every frame, and the info file is OME's.
#[test]
fn hls_dumps_play_back_as_vod() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let root = temp_dir("llhls-dump-root");
    let s = llhls_server(
        "llhls-dump",
        &format!(
            "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>2</SegmentDuration>\
             <Dumps><RootPath>{}</RootPath><Dump><Enable>true</Enable>\
             <TargetStreamName>auto*</TargetStreamName>\
             <Playlists><Playlist>llhls.m3u8</Playlist></Playlists>\
             <OutputPath>auto/${{StreamName}}</OutputPath></Dump></Dumps>",
            root.display()
        ),
    );
    let secs = 8;
    let mut api_src = publish(&s, "dumped", secs);
    let mut auto_src = publish(&s, "auto1", secs);
    wait_for_first_segment(&s, "dumped");
    let path = "/v1/vhosts/default/apps/app/streams/dumped";
    let start = |body: serde_json::Value| {
        s.request(
            "POST",
            &format!("{path}:startHlsDump"),
            Some(&body.to_string()),
        )
    };
    let r = start(serde_json::json!({
        "outputStreamName": "dumped", "id": "d1", "outputPath": "api",
        "playlist": ["llhls.m3u8", "abr.m3u8"], "infoFile": "api.xml", "userData": "job=42"
    }));
    assert_eq!(r.status, 200, "{}", r.body);
    // OME's answer: no `response`; the list shows it running.
    assert!(r.json().get("response").is_none(), "{}", r.body);
    let listed = s.request(
        "POST",
        &format!("{path}:hlsDumps"),
        Some(r#"{"outputStreamName":"dumped","id":"d1"}"#),
    );
    assert_eq!(
        listed.json()["response"][0]["status"],
        "Running",
        "{}",
        listed.body
    );
    assert_eq!(listed.json()["response"][0]["enabled"], true);
    // OME's refusals.
    let dup = start(serde_json::json!({"id": "d1", "outputPath": "api2"}));
    assert_eq!(dup.status, 400);
    assert!(
        dup.message().contains("Duplicate ID already exists [d1]"),
        "{}",
        dup.body
    );
    // An absolute outputPath is written exactly there, inside the root
    // only; one elsewhere is refused naming the root.
    let elsewhere = temp_dir("llhls-dump-elsewhere").join("cam");
    for outside_path in [elsewhere.display().to_string(), "/../etc/x".into()] {
        let outside = start(serde_json::json!({"id": "d2", "outputPath": outside_path}));
        assert_eq!(outside.status, 400);
        assert_eq!(
            outside.message(),
            format!(
                "[HTTP] outputPath [{outside_path}] is outside <LLHLS><Dumps><RootPath> [{}] (400)",
                root.display()
            ),
            "{}",
            outside.body
        );
    }
    assert!(!elsewhere.exists());
    let exact = root.join("exact/cam");
    let r = start(serde_json::json!({"id": "d4", "outputPath": exact.display().to_string()}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(start(serde_json::json!({"id": "d3"})).status, 400);
    let gone = s.request(
        "POST",
        "/v1/vhosts/default/apps/app/streams/nope:startHlsDump",
        Some(r#"{"id":"x","outputPath":"x"}"#),
    );
    assert_eq!(gone.status, 404);
    assert!(api_src.wait().unwrap().success());
    assert!(auto_src.wait().unwrap().success());
    // The stream ended: the dump completes.
    let info = root.join("api.xml");
    let xml = media::wait_until(Duration::from_secs(15), || {
        std::fs::read_to_string(&info)
            .ok()
            .filter(|x| x.contains("<Status>Completed</Status>"))
    })
    .unwrap_or_else(|| panic!("dump not completed\n{}", s.log_text()));
    assert!(xml.contains("<UserData>job=42</UserData>"), "{xml}");
    assert!(
        xml.contains("<Stream>/default/app/dumped</Stream>"),
        "{xml}"
    );
    assert!(
        xml.contains(&format!("<File>{}/api/llhls.m3u8</File>", root.display())),
        "{xml}"
    );
    let listed = s
        .request("POST", &format!("{path}:hlsDumps"), Some("{}"))
        .json();
    assert_eq!(listed["response"][0]["status"], "Completed");
    for dir in [root.join("api"), root.join("auto/auto1")] {
        let master = dir.join("llhls.m3u8");
        let video = std::fs::read_to_string(&master)
            .unwrap_or_else(|e| panic!("{}: {e}", master.display()))
            .lines()
            .find(|l| l.starts_with("chunklist_") && l.contains("_video_"))
            .map(|l| l.split('?').next().unwrap_or(l))
            .unwrap()
            .to_string();
        let list = std::fs::read_to_string(dir.join(&video)).unwrap();
        assert!(list.ends_with("#EXT-X-ENDLIST\n"), "{list}");
        assert!(list.contains("#EXT-X-PLAYLIST-TYPE:EVENT"), "{list}");
        assert_every_frame(&master.display().to_string(), secs, "dump");
    }
    assert!(root.join("api/abr.m3u8").exists());
    assert!(
        exact.join("llhls.m3u8").exists(),
        "written where the script said"
    );
    // Stopped: the id is free again (into another directory: files are
    // never overwritten).
    let stop = s.request(
        "POST",
        &format!("{path}:stopHlsDump"),
        Some(r#"{"id":"d1"}"#),
    );
    assert_eq!(stop.status, 200, "{}", stop.body);
    let again = s.request(
        "POST",
        &format!("{path}:stopHlsDump"),
        Some(r#"{"id":"d1"}"#),
    );
    assert_eq!(again.status, 404);
}

/// Issue 41: viewers who open the stream in its first second (a page
/// opened at the start, a player retrying while it waits for a show): the
/// playlists are held until the first segment is complete, and hls.js and
/// ffprobe both play. Before, kiln answered playlists with parts and no
/// segment: hls.js gave up with a fatal `levelEmptyError` and FFmpeg 5.1's
/// ffprobe crashed.
#[test]
fn viewers_who_open_the_stream_in_its_first_second_play() {
    let _one = one_browser();
    let Some((browser, web)) = browser_with_hlsjs() else {
        return;
    };
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let s = llhls_server(
        "llhls-first-second",
        "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>4</SegmentDuration>",
    );
    let mut src = publish(&s, "cam", 40);
    // Live (its tracks known), then half a second: no segment yet.
    s.wait_for_tracks("cam");
    std::thread::sleep(Duration::from_millis(500));
    let url = format!("{}/llhls.m3u8", base(&s, "cam"));
    let opened = Instant::now();
    let probe = Command::new("timeout")
        .args(["30", "ffprobe", "-v", "error", "-show_entries"])
        .args(["stream=codec_name", "-of", "csv=p=0", &url])
        .output()
        .expect("ffprobe runs");
    let waited = opened.elapsed();
    let page = format!("file://{}/llhls.html?src={url}&seconds=12", web.display());
    let r = play_hlsjs(browser, &page, &s.dir.join("chromium"), 12);
    let _ = src.kill();
    let _ = src.wait();
    let codecs = String::from_utf8_lossy(&probe.stdout).to_string();
    println!("ffprobe after {waited:?}: {codecs:?}; hls.js: {r}");
    assert!(
        probe.status.success() && codecs.contains("h264") && codecs.contains("aac"),
        "ffprobe: {:?} {codecs} {}",
        probe.status,
        String::from_utf8_lossy(&probe.stderr)
    );
    assert!(hlsjs_fatal_errors(&r).is_empty(), "{r}");
    let played =
        r["end"]["media"].as_f64().unwrap_or(0.0) - r["start"]["media"].as_f64().unwrap_or(0.0);
    assert!(played > 4.0, "played {played} s: {r}");
    assert!(r["decodedFrames"].as_u64().unwrap_or(0) > 0, "{r}");
}

/// Issue 45: OME's config has 6 s segments. A player opening a stream at
/// its start is let in when the first segment is complete and starts at
/// the newest INDEPENDENT part before the hold-back: behind a 6 s first
/// segment that was its start, and hls.js stayed 6.2 s behind live (a
/// browser over WHIP; OME 1.7 s). The first segment now ends at the first
/// keyframe a part in, and a keyframe late in a part (here every 1.44 s,
/// off the 0.5 s grid) begins a part of its own.
#[test]
fn hlsjs_opening_a_stream_with_long_segments_plays_near_live() {
    let _one = one_browser();
    let Some((browser, web)) = browser_with_hlsjs() else {
        return;
    };
    if !have_tool("ffmpeg") {
        return;
    }
    let s = llhls_server(
        "llhls-long-segments",
        "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>6</SegmentDuration>",
    );
    // A keyframe every 36 frames at 25 fps: 1.44 s.
    let mut src = ffmpeg_source(
        40,
        &["-g", "36", "-keyint_min", "36"],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
    );
    s.wait_for_tracks("cam");
    let url = format!("{}/llhls.m3u8", base(&s, "cam"));
    let opened = Instant::now();
    let page = format!("file://{}/llhls.html?src={url}&seconds=14", web.display());
    let r = play_hlsjs(browser, &page, &s.dir.join("chromium"), 14);
    let (_, video) = wait_for_first_segment(&s, "cam");
    let (_, chunklist, _) = curl(&[], &format!("{}/{video}", base(&s, "cam")));
    let _ = src.kill();
    let _ = src.wait();
    println!("hls.js opened {:?} after the tracks: {r}", opened.elapsed());
    assert!(hlsjs_fatal_errors(&r).is_empty(), "{r}");
    assert!(r["decodedFrames"].as_u64().unwrap_or(0) > 0, "{r}");
    // Keyframes mid-segment began parts of their own: INDEPENDENT parts
    // that are not their segment's first (part_{track}_{msn}_{n}_...).
    let mid = chunklist
        .lines()
        .filter(|l| l.starts_with("#EXT-X-PART:") && l.contains("INDEPENDENT=YES"))
        .filter_map(|l| l.split("URI=\"part_").nth(1))
        .filter(|u| u.split('_').nth(2).is_some_and(|n| n != "0"))
        .count();
    assert!(mid >= 2, "{chunklist}");
    let last = last_latency(&r);
    println!("hls.js live latency at the end: {last:.3} s");
    assert!(last < 3.5, "latency {last} s behind 6 s segments: {r}");
}

/// Issue 42: a server stopped by SIGTERM (or Ctrl-C) while a dump and a
/// recording run finishes both: the dump's chunklists end with
/// `EXT-X-ENDLIST` (ffprobe reads it as VOD with a duration; before, N/A),
/// its info file says Completed, and the recording's info file lists the
/// file the stop cut, which plays. After a restart the recording goes on
/// in its next file: `${Sequence}` 1, and the info file lists both (before,
/// the sequence began at 0 again, and the list lost the earlier file).
#[test]
fn a_stopped_server_finishes_its_dumps_and_recordings() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let root = temp_dir("llhls-stop-root");
    let mut s = Server::start_with(
        "llhls-stop",
        ServerOptions {
            media: true,
            llhls: Some(format!(
                "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>1</SegmentDuration>\
                 <Dumps><RootPath>{}</RootPath></Dumps>",
                root.display()
            )),
            file: Some(format!("<RootPath>{}</RootPath>", root.display())),
            ..Default::default()
        },
    );
    let mut src = publish(&s, "cam", 60);
    wait_for_first_segment(&s, "cam");
    let r = s.request(
        "POST",
        "/v1/vhosts/default/apps/app/streams/cam:startHlsDump",
        Some(r#"{"id":"d1","outputPath":"dump","infoFile":"dump.xml"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = s.request(
        "POST",
        "/v1/vhosts/default/apps/app:startRecord",
        Some(r#"{"id":"r1","stream":{"name":"cam"},"filePath":"rec_${Sequence}.mp4","infoPath":"rec.xml"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // A few segments into both, then the stop.
    std::thread::sleep(Duration::from_secs(5));
    let (took, status) = s.terminate();
    let _ = src.kill();
    let _ = src.wait();
    println!("kiln stopped in {took:?}: {status}");
    let dump = root.join("dump");
    let chunklists: Vec<String> = std::fs::read_dir(&dump)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("chunklist_"))
        .collect();
    assert!(!chunklists.is_empty(), "no chunklist in {}", dump.display());
    for c in &chunklists {
        let text = std::fs::read_to_string(dump.join(c)).unwrap();
        assert!(text.ends_with("#EXT-X-ENDLIST\n"), "{c}: {text}");
    }
    let d = ffprobe_duration(&dump.join("llhls.m3u8"));
    assert!(d >= 2.0, "the dump's duration: {d}");
    let info = std::fs::read_to_string(root.join("dump.xml")).unwrap();
    assert!(info.contains("<Status>Completed</Status>"), "{info}");
    let rec = std::fs::read_to_string(root.join("rec.xml")).unwrap();
    assert!(rec.contains("rec_0.mp4"), "{rec}");
    let probe = |file: &str| ffprobe_duration(&root.join(file));
    assert!(probe("rec_0.mp4") >= 2.0, "the recording's first file");
    assert!(s.log_text().contains("stopped"));
    // Again: the record resumes with the stream, in its next file.
    s.spawn();
    // The dump made through the API is still listed, finished, and its id
    // stays taken until :stopHlsDump frees it (then gone after a restart).
    let listed = |s: &Server| {
        s.request(
            "POST",
            "/v1/vhosts/default/apps/app/streams/cam:hlsDumps",
            Some(r#"{"outputStreamName":"cam"}"#),
        )
        .json()
    };
    let dumps = listed(&s);
    assert_eq!(dumps["response"][0]["id"], "d1", "{dumps}");
    assert_eq!(dumps["response"][0]["status"], "Completed", "{dumps}");
    assert_eq!(dumps["response"][0]["enabled"], false, "{dumps}");
    let mut src = publish(&s, "cam", 60);
    let second = media::wait_until(Duration::from_secs(20), || {
        root.join("rec_1.mp4").exists().then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    s.terminate();
    let _ = src.kill();
    let _ = src.wait();
    assert!(second.is_some(), "no rec_1.mp4\n{}", s.log_text());
    let rec = std::fs::read_to_string(root.join("rec.xml")).unwrap();
    assert!(
        rec.contains("rec_0.mp4") && rec.contains("rec_1.mp4"),
        "{rec}"
    );
    assert!(rec.contains("<sequence>1</sequence>"), "{rec}");
    assert!(probe("rec_1.mp4") >= 1.0, "the recording's second file");
    s.spawn();
    let stop = s.request(
        "POST",
        "/v1/vhosts/default/apps/app/streams/cam:stopHlsDump",
        Some(r#"{"outputStreamName":"cam","id":"d1"}"#),
    );
    assert_eq!(stop.status, 200, "{}", stop.body);
    s.terminate();
    s.spawn();
    let dumps = listed(&s);
    assert_eq!(dumps["response"], serde_json::json!([]), "{dumps}");
}

/// ffmpeg's test pattern published as `app/{stream}` as fast as it
/// encodes (`secs` of media in a few seconds); it must succeed.
fn publish_fast(s: &Server, stream: &str, secs: u32) {
    let status = ffmpeg_fast_source_cmd(
        secs,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/{stream}", s.media.rtmp),
    )
    .stderr(std::process::Stdio::null())
    .status()
    .unwrap();
    assert!(status.success());
}

/// Seconds a media playlist lists (its EXTINFs together).
fn listed_seconds(list: &str) -> f64 {
    list.lines()
        .filter_map(|l| {
            l.strip_prefix("#EXTINF:")?
                .trim_end_matches(',')
                .parse::<f64>()
                .ok()
        })
        .sum()
}

/// The DVR folder of a stream under `root` (`kiln_{pid}_{key}`), if any.
fn dvr_folders(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(root)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("kiln_"))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn dvr_settings(root: &std::path::Path, max_duration: u32) -> String {
    format!(
        "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>1</SegmentDuration><SegmentCount>3</SegmentCount>\
         <DVR><Enable>true</Enable><TempStoragePath>{}</TempStoragePath><MaxDuration>{max_duration}</MaxDuration></DVR>",
        root.display()
    )
}

/// DVR: OME's `<LLHLS><DVR>` keeps `MaxDuration` of segments
/// on disk while memory holds the live window; the chunklist lists the
/// whole window (OME's `_HLS_rewind`, default YES), old segments are read
/// back from disk, ffprobe reads the window; the folder goes with the
/// stream's playlists or with a clean stop, and what a killed kiln left is
/// deleted when kiln starts again.
#[test]
fn a_dvr_keeps_the_window_on_disk_and_nothing_is_left_behind() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let dir = temp_dir("llhls-dvr");
    let root = dir.join("dvr");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("keep.txt"), b"not kiln's").unwrap();
    let mut s = llhls_server("llhls-dvr", &dvr_settings(&root, 20));
    // 40 s of media, sent as fast as ffmpeg encodes.
    publish_fast(&s, "a", 40);
    let (_, video) = wait_for_segments(&s, "a", 15);
    let deadline = Instant::now() + Duration::from_secs(30);
    let list = loop {
        let (_, list, _) = curl(&[], &format!("{}/{video}", base(&s, "a")));
        if list.contains("#EXT-X-ENDLIST") || Instant::now() > deadline {
            break list;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(list.contains("#EXT-X-ENDLIST"), "{list}");
    let listed = listed_seconds(&list);
    println!(
        "DVR chunklist: {} segments, {listed:.1} s",
        list.matches("#EXTINF:").count()
    );
    // MaxDuration 20: 20 s of 1 s segments (the newest always stays).
    assert!((18.0..=21.5).contains(&listed), "{listed}\n{list}");
    let first: u64 = list
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-MEDIA-SEQUENCE:"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(first >= 15, "the oldest left the window: {list}");
    // _HLS_rewind=NO: the live window (SegmentCount 3) only.
    let (_, live, _) = curl(&[], &format!("{}/{video}?_HLS_rewind=NO", base(&s, "a")));
    let live_count = live.matches("#EXTINF:").count();
    assert!((3..=4).contains(&live_count), "{live}");
    // On the master, it goes on to the chunklists (OME's form).
    let (_, master, _) = curl(&[], &format!("{}/llhls.m3u8?_HLS_rewind=NO", base(&s, "a")));
    assert!(
        master.contains(&format!("{video}?_HLS_rewind=NO&session=")),
        "{master}"
    );
    // The oldest listed segment is read back from disk, byte for byte.
    let folders = dvr_folders(&root);
    assert_eq!(folders.len(), 1, "{folders:?}");
    let seg = list.lines().find(|l| l.starts_with("seg_")).unwrap();
    let track = seg.split('_').nth(1).unwrap();
    let on_disk = std::fs::read(folders[0].join(track).join(format!("{first}.m4s"))).unwrap();
    let got = std::process::Command::new("curl")
        .args(["-s", "-f", &format!("{}/{seg}", base(&s, "a"))])
        .output()
        .unwrap();
    assert!(got.status.success(), "{seg}: {}", s.log_text());
    assert_eq!(got.stdout.len(), on_disk.len());
    assert!(got.stdout == on_disk, "{seg} is the file on disk");
    // /metrics: the bytes on disk, and the segment just read held once.
    let metrics = s.request("GET", "/metrics", None).body;
    let gauge = |name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in /metrics:\n{metrics}"))
    };
    assert!(gauge("kiln_llhls_dvr_disk_bytes ") > on_disk.len() as u64 * 10);
    assert!(gauge("kiln_llhls_dvr_read_cache_bytes ") >= on_disk.len() as u64);
    // ffprobe reads the whole window: video and audio of ~20 s.
    let counts = ffprobe_counts(&format!("{}/llhls.m3u8", base(&s, "a")));
    let get = |c: &str| counts.iter().find(|(n, _)| n == c).map_or(0, |(_, n)| *n);
    let want = listed * f64::from(FPS);
    println!("ffprobe read the DVR window: {counts:?} (listed {listed:.1} s)");
    assert!(
        (get("h264") as f64 - want).abs() <= f64::from(FPS),
        "{counts:?}"
    );
    assert!(
        get("aac") as f64 >= (listed - 1.5) * 48_000.0 / 1024.0,
        "{counts:?}"
    );
    // Killed with its DVR on disk: the next start deletes it, and only it.
    s.kill9();
    assert_eq!(dvr_folders(&root).len(), 1);
    s.spawn();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dvr_folders(&root).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(dvr_folders(&root).is_empty(), "{:?}", dvr_folders(&root));
    assert!(root.join("keep.txt").exists());
    // A stream's folder goes with its playlists (30 s after it ends).
    publish_fast(&s, "b", 5);
    wait_for_segments(&s, "b", 3);
    assert_eq!(dvr_folders(&root).len(), 1);
    let deadline = Instant::now() + Duration::from_secs(90);
    while !dvr_folders(&root).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(dvr_folders(&root).is_empty(), "{}", s.log_text());
    assert!(root.join("keep.txt").exists());
    // A clean stop (SIGTERM) takes a live stream's folder with it.
    publish_fast(&s, "c", 5);
    wait_for_segments(&s, "c", 3);
    assert_eq!(dvr_folders(&root).len(), 1);
    let (_, status) = s.terminate();
    assert!(status.success(), "{status:?}");
    assert!(dvr_folders(&root).is_empty(), "{:?}", dvr_folders(&root));
    assert!(root.join("keep.txt").exists());
}

/// hls.js in Chromium plays a DVR stream live, seeks 30 s back into the
/// window (segments read from disk), plays on from there, and returns to
/// the live edge.
#[test]
fn hls_js_seeks_back_in_a_dvr_window_and_returns_to_live() {
    let _one = one_browser();
    let Some((browser, web)) = browser_with_hlsjs() else {
        return;
    };
    if !have_tool("ffmpeg") {
        return;
    }
    let dir = temp_dir("llhls-dvr-seek");
    let s = llhls_server("llhls-dvr-seek", &dvr_settings(&dir.join("dvr"), 120));
    let mut src = publish(&s, "cam", 110);
    // 40 s of window before the viewer comes.
    wait_for_segments_within(&s, "cam", 40, Duration::from_secs(90));
    let seconds = 30;
    let page = format!(
        "file://{}/llhls.html?src={}/llhls.m3u8&seconds={seconds}&seekAt=6&seekBack=30&liveAt=20",
        web.display(),
        base(&s, "cam")
    );
    let r = play_hlsjs(browser, &page, &s.dir.join("chromium"), seconds);
    println!("hls.js with a DVR: {r}");
    let _ = src.kill();
    let _ = src.wait();
    assert_eq!(r["supported"], true);
    assert!(hlsjs_fatal_errors(&r).is_empty(), "{r}");
    let seek = &r["seek"];
    let range = seek["seekable"].as_array().expect("a seekable range");
    let window = range[1].as_f64().unwrap() - range[0].as_f64().unwrap();
    assert!(window >= 35.0, "the whole window is seekable: {r}");
    // After the seek: playing from 30 s back, and moving on.
    let to = seek["to"].as_f64().unwrap();
    let after: Vec<(f64, f64)> = seek["after"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap()))
        .collect();
    let (t_last, pos_last) = *after.last().unwrap();
    let landed = after
        .iter()
        .find(|(_, p)| (p - to).abs() < 3.0)
        .expect("currentTime went to the seek target");
    assert!(
        pos_last - landed.1 >= (t_last - landed.0) * 0.6 && pos_last - landed.1 > 4.0,
        "it played on from the old position: {after:?}"
    );
    assert!(
        pos_last < seek["edge"].as_f64().unwrap() - 15.0,
        "{after:?}"
    );
    // Back to live: the latency is the live one again.
    let back = r["back"]["after"].as_array().unwrap();
    let last_latency = back.last().and_then(|p| p[2].as_f64()).expect("a latency");
    assert!(last_latency < 5.0, "back at the live edge: {r}");
    assert!(r["decodedFrames"].as_u64().unwrap() > 0, "{r}");
}

/// A DVR answers to its application's disk budget: past `MaxTotalMB` it
/// gives up its oldest segments (logged), and its window shrinks to what
/// fits; the live window plays on.
#[test]
fn a_dvr_keeps_within_the_applications_disk_budget() {
    if !have_tool("ffmpeg") {
        return;
    }
    let dir = temp_dir("llhls-dvr-budget");
    let root = dir.join("dvr");
    let s = Server::start_with(
        "llhls-dvr-budget",
        ServerOptions {
            media: true,
            llhls: Some(dvr_settings(&root, 600)),
            app_extra: "<DiskBudget><MaxTotalMB>2</MaxTotalMB></DiskBudget>".into(),
            ..Default::default()
        },
    );
    // About 10 MB of media (40 s at ~2 Mb/s), as fast as ffmpeg encodes.
    publish_fast(&s, "a", 40);
    let (_, video) = wait_for_segments(&s, "a", 3);
    let folder_bytes = || -> u64 {
        let mut n = 0;
        for f in dvr_folders(&root) {
            for t in std::fs::read_dir(&f).into_iter().flatten().flatten() {
                for seg in std::fs::read_dir(t.path()).into_iter().flatten().flatten() {
                    n += seg.metadata().map_or(0, |m| m.len());
                }
            }
        }
        n
    };
    // The deletions are the worker's: give it a moment to settle.
    let deadline = Instant::now() + Duration::from_secs(20);
    while folder_bytes() > 2 << 20 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let bytes = folder_bytes();
    let (_, list, _) = curl(&[], &format!("{}/{video}", base(&s, "a")));
    let listed = listed_seconds(&list);
    println!("DVR under MaxTotalMB 2: {bytes} bytes on disk, {listed:.1} s listed");
    assert!(bytes <= 2 << 20, "{bytes} bytes\n{}", s.log_text());
    assert!(listed > 3.0 && listed < 30.0, "{listed} s\n{list}");
    // One WARN for the stream, in bytes; each deletion after it at DEBUG.
    let log = s.log_text();
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("shrinks its window"))
        .collect();
    assert_eq!(warned.len(), 1, "{log}");
    assert!(
        warned[0].contains("/a: the disk budget shrinks its window")
            && warned[0].contains("the application's recordings and DVR take ")
            && warned[0].contains(" bytes, over the 2097152 MaxTotalMB 2 allows"),
        "{}",
        warned[0]
    );
}

/// HLS dumps count in the application's disk budget: past `MaxTotalMB`
/// a running dump ends in `Error` (said in its info file and the list),
/// and what it wrote stays, playable, with `EXT-X-ENDLIST`.
#[test]
fn an_hls_dump_ends_in_error_at_the_disk_budget_and_stays_playable() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let root = temp_dir("llhls-dump-budget-root");
    let s = Server::start_with(
        "llhls-dump-budget",
        ServerOptions {
            media: true,
            llhls: Some(format!(
                "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>1</SegmentDuration>\
                 <Dumps><RootPath>{}</RootPath><Dump><Enable>true</Enable>\
                 <TargetStreamName>*</TargetStreamName>\
                 <OutputPath>${{StreamName}}</OutputPath></Dump></Dumps>",
                root.display()
            )),
            app_extra: "<DiskBudget><MaxTotalMB>2</MaxTotalMB></DiskBudget>".into(),
            ..Default::default()
        },
    );
    // About 10 MB of media (40 s at ~2 Mb/s), as fast as ffmpeg encodes.
    publish_fast(&s, "a", 40);
    let path = "/v1/vhosts/default/apps/app/streams/a:hlsDumps";
    let dump = media::wait_until(Duration::from_secs(30), || {
        let r = s.request("POST", path, Some("{}")).json();
        let d = r["response"][0].clone();
        (d["status"] != "Running" && !d.is_null()).then_some(d)
    });
    let dump = dump.unwrap_or_else(|| panic!("{}", s.log_text()));
    println!("dump at the budget: {dump}");
    assert_eq!(dump["status"], "Error", "{dump}");
    let bytes = dump["bytes"].as_u64().unwrap();
    assert!(bytes <= 3 << 20, "{bytes} bytes under MaxTotalMB 2");
    assert!(
        s.log_text()
            .contains("ended: disk budget: the application's recordings, DVR and dumps take "),
        "{}",
        s.log_text()
    );
    // What it wrote plays back, to its end.
    let master = root.join("a/llhls.m3u8");
    let video = std::fs::read_to_string(&master)
        .unwrap()
        .lines()
        .find(|l| l.starts_with("chunklist_") && l.contains("_video_"))
        .map(|l| l.split('?').next().unwrap_or(l))
        .unwrap()
        .to_string();
    let list = std::fs::read_to_string(root.join("a").join(&video)).unwrap();
    assert!(list.ends_with("#EXT-X-ENDLIST\n"), "{list}");
    let counts = ffprobe_counts(&master.display().to_string());
    assert!(
        counts.iter().any(|(c, n)| c == "h264" && *n > 10),
        "{counts:?}"
    );
}

/// An application made through the API may keep a DVR only in a folder
/// the config file names for one (kiln writes and deletes there); OME's
/// JSON (`dVR`, string values) is read, and shown back as OME shows it.
#[test]
fn api_apps_keep_a_dvr_only_under_a_config_folder() {
    let dir = temp_dir("llhls-dvr-api");
    let root = dir.join("dvr");
    let s = llhls_server("llhls-dvr-api", &dvr_settings(&root, 60));
    let r = s.request(
        "POST",
        "/v1/vhosts",
        Some(
            &serde_json::json!([{"name": "studio", "host": {"names": ["studio.example.com"]}}])
                .to_string(),
        ),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let app = |name: &str, path: &str| {
        serde_json::json!([{"name": name, "publishers": {"llhls": {"dVR": {
            "enable": "true", "tempStoragePath": path, "maxDuration": "600"}}}}])
        .to_string()
    };
    for outside in [
        "/etc",
        "/tmp/ll_hls_dvr",
        &format!("{}/../x", root.display()),
    ] {
        let r = s.request("POST", "/v1/vhosts/studio/apps", Some(&app("x", outside)));
        assert!(
            r.body.contains("400") && r.body.contains("tempStoragePath"),
            "{outside}: {}",
            r.body
        );
    }
    let inside = root.join("studio").display().to_string();
    let r = s.request(
        "POST",
        "/v1/vhosts/studio/apps",
        Some(&app("shows", &inside)),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let got = s
        .request("GET", "/v1/vhosts/studio/apps/shows", None)
        .json();
    let dvr = &got["response"]["publishers"]["llhls"]["dVR"];
    assert_eq!(dvr["enable"], "true", "{got}");
    assert_eq!(dvr["maxDuration"], "600", "{got}");
    assert_eq!(dvr["tempStoragePath"], inside.as_str(), "{got}");
}

/// HLS (MPEG-TS) has OME's `<DVR>` too: the media playlist lists the
/// window (`EXT-X-PLAYLIST-TYPE:EVENT` with `EventPlaylistType`), old
/// segments come back from disk, and ffprobe reads the window.
#[test]
fn hls_ts_keeps_a_dvr_window_as_ome_configures_it() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let dir = temp_dir("hls-ts-dvr");
    let root = dir.join("dvr");
    let s = Server::start_with(
        "hls-ts-dvr",
        ServerOptions {
            media: true,
            hls: Some(format!(
                "<SegmentDuration>1</SegmentDuration><SegmentCount>3</SegmentCount>\
                 <DVR><Enable>true</Enable><EventPlaylistType>true</EventPlaylistType>\
                 <TempStoragePath>{}</TempStoragePath><MaxDuration>20</MaxDuration></DVR>",
                root.display()
            )),
            ..Default::default()
        },
    );
    publish_fast(&s, "ts", 40);
    let media = format!("{}/medialist_0_hls.m3u8", base(&s, "ts"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let list = loop {
        let (code, list, _) = curl(&[], &media);
        if code == 200 && list.contains("#EXT-X-ENDLIST") {
            break list;
        }
        assert!(Instant::now() < deadline, "no ENDLIST ({code}):\n{list}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(list.contains("#EXT-X-PLAYLIST-TYPE:EVENT\n"), "{list}");
    let listed = listed_seconds(&list);
    assert!((18.0..=21.5).contains(&listed), "{listed}\n{list}");
    let (_, live, _) = curl(&[], &format!("{media}?_HLS_rewind=NO"));
    assert!(live.matches("#EXTINF:").count() <= 3, "{live}");
    // The oldest listed segment, from disk.
    let seg = list.lines().find(|l| l.starts_with("seg_0_")).unwrap();
    let msn: u64 = seg["seg_0_".len()..seg.len() - "_hls.ts".len()]
        .parse()
        .unwrap();
    let folder = dvr_folders(&root).pop().expect("a DVR folder");
    let on_disk = std::fs::read(folder.join("0").join(format!("{msn}.m4s"))).unwrap();
    let got = Command::new("curl")
        .args(["-s", "-f", &format!("{}/{seg}", base(&s, "ts"))])
        .output()
        .unwrap();
    assert!(got.stdout == on_disk, "{seg} is the file on disk");
    let counts = ffprobe_counts(&format!("{}/playlist.m3u8", base(&s, "ts")));
    let h264 = counts
        .iter()
        .find(|(n, _)| n == "h264")
        .map_or(0, |(_, n)| *n);
    println!("ffprobe read the HLS DVR window: {counts:?} (listed {listed:.1} s)");
    assert!(
        (h264 as f64 - listed * f64::from(FPS)).abs() <= f64::from(FPS),
        "{counts:?}"
    );
}

/// A file has one URL, the one the playlists give: `+1`, `0001` or the
/// other kind for a track's segment are 404 (a CDN caches each URL apart,
/// so every alias would be one more copy of the stream).
#[test]
fn segment_urls_have_one_spelling() {
    if !have_tool("ffmpeg") {
        return;
    }
    let s = llhls_server(
        "llhls-canonical",
        "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>1</SegmentDuration>",
    );
    let mut src = publish(&s, "a", 30);
    let (_, video) = wait_for_segments(&s, "a", 2);
    let (_, list, _) = curl(&[], &format!("{}/{video}", base(&s, "a")));
    let seg = list
        .lines()
        .find(|l| l.starts_with("seg_"))
        .expect("a segment")
        .to_string();
    let (code, _, _) = curl(&[], &format!("{}/{seg}", base(&s, "a")));
    assert_eq!(code, 200, "{seg}");
    // seg_{track}_{msn}_{kind}_{key}_llhls.m4s
    let f: Vec<&str> = seg.split('_').collect();
    let aliases = [
        format!("seg_+{}_{}", f[1], f[2..].join("_")),
        format!("seg_{}_000{}_{}", f[1], f[2], f[3..].join("_")),
        format!("seg_{}_+{}_{}", f[1], f[2], f[3..].join("_")),
        format!("seg_{}_{}_audio_{}", f[1], f[2], f[4..].join("_")),
        video.replacen("chunklist_", "chunklist_0", 1),
    ];
    for alias in &aliases {
        let (code, _, _) = curl(&[], &format!("{}/{alias}", base(&s, "a")));
        assert_eq!(code, 404, "{alias} (of {seg})");
    }
    let _ = src.kill();
    let _ = src.wait();
}
