//! Pulling streams through the API (issue 15, DECISIONS 12) from an
//! IP-camera-like RTSP server no one here wrote: GStreamer's
//! gst-rtsp-server (`tests/tools/rtsp_camera.py`, live H.264 or H.265 and
//! AAC, optionally behind Digest authorization). The pulled stream is read
//! back over LL-HLS by ffprobe and pushed to an ffmpeg RTMP listener, with
//! codecs, frame counts and timestamps checked.

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's Python, where `python3-gi` and `gir1.2-gst-rtsp-server-1.0`
/// install (a Python of one's own may lack them).
const PYTHON: &str = "/usr/bin/python3";
/// The camera's frame rate (`rtsp_camera.py`).
const FPS: u64 = 25;

/// Is gst-rtsp-server usable from Python? Skip (with the reason) when not,
/// unless KILN_REQUIRE_INTEROP=1.
fn have_rtsp_server() -> bool {
    let ok = Command::new(PYTHON)
        .args([
            "-c",
            "import gi; gi.require_version('GstRtspServer', '1.0'); from gi.repository import GstRtspServer",
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var("KILN_REQUIRE_INTEROP").as_deref() == Ok("1") {
            panic!("gst-rtsp-server for Python (python3-gi, gir1.2-gst-rtsp-server-1.0) is required (KILN_REQUIRE_INTEROP=1)");
        }
        eprintln!("SKIP: gst-rtsp-server for Python (python3-gi, gir1.2-gst-rtsp-server-1.0) is not installed");
    }
    ok && have_tool("ffmpeg") && have_tool("ffprobe")
}

struct Camera {
    child: Child,
    port: u16,
}

impl Drop for Camera {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the camera on `port` and waits until it says it listens.
fn camera_on(port: u16, codec: &str, auth: Option<(&str, &str)>) -> Camera {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tools/rtsp_camera.py");
    let mut cmd = Command::new(PYTHON);
    cmd.arg(script).arg(port.to_string()).arg(codec);
    if let Some((u, p)) = auth {
        cmd.args([u, p]);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the camera starts");
    let mut line = String::new();
    let stdout = child.stdout.take().unwrap();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the camera did not start");
    Camera { child, port }
}

fn camera(codec: &str, auth: Option<(&str, &str)>) -> Camera {
    camera_on(free_port(), codec, auth)
}

fn llhls_server(tag: &str) -> Server {
    Server::start_with(
        tag,
        ServerOptions {
            media: true,
            llhls: Some(
                "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>2</SegmentDuration>".into(),
            ),
            ..Default::default()
        },
    )
}

const STREAMS: &str = "/v1/vhosts/default/apps/app/streams";

fn pull(s: &Server, body: Value) -> HttpResponse {
    s.request("POST", STREAMS, Some(&body.to_string()))
}

/// Waits until `name` is live (or, with `false`, gone).
fn wait_live(s: &Server, name: &str, live: bool, limit: Duration) {
    let got = wait_until(limit, || {
        (s.live_stream(name).is_some() == live).then_some(())
    });
    assert!(
        got.is_some(),
        "stream {name} {} within {limit:?}\n{}",
        if live { "not live" } else { "still live" },
        s.log_text()
    );
}

/// Records 4 s of a live LL-HLS `url` with ffmpeg (stream copy) into
/// `out`; (codec, frames) of what it got, per ffprobe. Matroska, not TS:
/// ffmpeg's TS muxer adds a packet at each keyframe that carries its
/// parameter sets in band (as the camera's do).
fn llhls_frames(url: &str, out: &Path) -> Vec<(String, u64)> {
    let mut ff = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y", "-i", url])
        .args(["-t", "4", "-c", "copy"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ffmpeg runs");
    let done = wait_until(Duration::from_secs(30), || ff.try_wait().ok().flatten());
    if done.is_none() {
        let _ = ff.kill();
        let _ = ff.wait();
        panic!("ffmpeg did not read 4 s of {url} within 30 s");
    }
    frame_counts(out)
}

/// The duration of a media file's first video stream, in seconds.
fn video_duration(file: &Path) -> f64 {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries"])
        .args(["packet=pts_time", "-of", "csv=p=0"])
        .arg(file)
        .output()
        .expect("ffprobe runs");
    let times: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().trim_end_matches(',').parse().ok())
        .collect();
    let min = times.iter().cloned().fold(f64::MAX, f64::min);
    let max = times.iter().cloned().fold(f64::MIN, f64::max);
    max - min + 1.0 / FPS as f64
}

/// The camera's 25 fps over `secs` of video: within 2% (nothing lost,
/// nothing doubled).
fn every_frame(counts: &[(String, u64)], codec: &str, secs: f64) -> bool {
    within_2pct(frames_of(counts, codec), (secs * FPS as f64).round() as u64)
}

/// Waits until the stream's LL-HLS video chunklist holds `n` segments.
fn wait_for_segments(s: &Server, stream: &str, n: usize) {
    let base = format!("http://127.0.0.1:{}/app/{stream}", s.media.llhls);
    let got = wait_until(Duration::from_secs(30), || {
        let (code, master, _) = curl(&[], &format!("{base}/llhls.m3u8"));
        if code != 200 {
            return None;
        }
        let video = master
            .lines()
            .find(|l| l.starts_with("chunklist_") && l.contains("_video_"))
            .map(|l| l.split('?').next().unwrap_or(l))?
            .to_string();
        let (_, list, _) = curl(&[], &format!("{base}/{video}"));
        (list.matches("#EXTINF:").count() >= n).then_some(())
    });
    assert!(got.is_some(), "no {n} LL-HLS segments\n{}", s.log_text());
}

#[test]
fn an_rtsp_camera_pulled_through_the_api_plays_on_llhls_and_pushes_to_rtmp() {
    if !have_rtsp_server() {
        return;
    }
    let cam = camera("h264", Some(("admin", "s3cret")));
    let s = llhls_server("pull-rtsp");
    let dead = free_port();
    // The first URL is down: the pull fails over to the camera, which
    // wants Digest authorization.
    let t0 = Instant::now();
    let r = pull(
        &s,
        json!({"name": "cam", "urls": [
            format!("rtsp://127.0.0.1:{dead}/cam"),
            format!("rtsp://admin:s3cret@127.0.0.1:{}/cam", cam.port),
        ]}),
    );
    println!(
        "POST .../streams answered {} in {:?}",
        r.status,
        t0.elapsed()
    );
    assert_eq!(r.status, 200, "{}\n{}", r.body, s.log_text());
    let stream = &r.json()["response"];
    assert_eq!(stream["name"], "cam");
    assert_eq!(stream["input"]["sourceType"], "RtspPull");
    let tracks = &stream["input"]["tracks"];
    assert_eq!(tracks[0]["video"]["codec"], "H264", "{stream}");
    assert_eq!(tracks[0]["video"]["width"], 640);
    assert_eq!(tracks[0]["video"]["height"], 360);
    assert_eq!(tracks[1]["audio"]["codec"], "AAC");
    assert_eq!(tracks[1]["audio"]["samplerate"], 48000);
    assert_eq!(tracks[1]["audio"]["channel"], 2);
    assert!(
        !s.log_text().contains("s3cret"),
        "the password is in the log"
    );
    let list = s.request("GET", STREAMS, None).json();
    assert_eq!(list["response"], json!(["cam"]));

    // Pushed out over RTMP to ffmpeg, which records it.
    let rtmp_port = free_port();
    let flv = s.dir.join("pushed.flv");
    let mut listener = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y", "-listen", "1"])
        .args(["-i", &format!("rtmp://127.0.0.1:{rtmp_port}/live/key")])
        .args(["-c", "copy"])
        .arg(&flv)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_listen(rtmp_port, Duration::from_secs(10));
    let r = s.start_push(
        json!({"id": "out", "stream": {"name": "cam"}, "protocol": "rtmp",
        "url": format!("rtmp://127.0.0.1:{rtmp_port}/live"), "streamKey": "key"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);

    // Viewers over LL-HLS meanwhile.
    wait_for_segments(&s, "cam", 3);
    let url = format!("http://127.0.0.1:{}/app/cam/llhls.m3u8", s.media.llhls);
    let ts = s.dir.join("llhls.mkv");
    let counts = llhls_frames(&url, &ts);
    let secs = video_duration(&ts);
    println!("{secs:.2} s of LL-HLS read by ffmpeg, decoded by ffprobe: {counts:?}");
    assert!(secs >= 3.9, "{secs}");
    assert!(
        every_frame(&counts, "h264", secs),
        "{counts:?} in {secs:.2} s"
    );
    assert!(monotonic_dts(&ts), "LL-HLS timestamps go back");

    std::thread::sleep(Duration::from_secs(4));
    let r = s.request(
        "POST",
        "/v1/vhosts/default/apps/app:stopPush",
        Some(r#"{"id":"out"}"#),
    );
    assert_eq!(r.status, 200);
    let done = wait_until(Duration::from_secs(10), || {
        listener.try_wait().ok().flatten()
    });
    assert!(done.is_some(), "ffmpeg did not finish");
    let counts = frame_counts(&flv);
    let secs = video_duration(&flv);
    let video = frames_of(&counts, "h264");
    let audio = frames_of(&counts, "aac");
    println!("RTMP push recorded {secs:.2} s: {counts:?}");
    assert!(secs > 4.0, "{secs}");
    assert!(
        every_frame(&counts, "h264", secs),
        "{video} video frames in {secs:.2} s"
    );
    assert!(
        within_2pct(audio, (secs * 48_000.0 / 1024.0).round() as u64),
        "{audio} audio frames in {secs:.2} s"
    );
    assert!(monotonic_dts(&flv), "timestamps go back");

    // DELETE ends the pull; the camera sees the TEARDOWN.
    let r = s.request("DELETE", &format!("{STREAMS}/cam"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    wait_live(&s, "cam", false, Duration::from_secs(5));
    assert_eq!(
        s.request("GET", &format!("{STREAMS}/cam"), None).status,
        404
    );
}

#[test]
fn an_h265_camera_is_pulled_over_udp_and_read_back_as_hevc() {
    if !have_rtsp_server() {
        return;
    }
    let cam = camera("h265", None);
    let s = llhls_server("pull-h265");
    // RTP over UDP this time (`?transport=udp`, kiln's option).
    let r = pull(
        &s,
        json!({"name": "hevc", "urls": [format!("rtsp://127.0.0.1:{}/cam?transport=udp", cam.port)]}),
    );
    assert_eq!(r.status, 200, "{}\n{}", r.body, s.log_text());
    assert_eq!(
        r.json()["response"]["input"]["tracks"][0]["video"]["codec"],
        "H265"
    );
    wait_for_segments(&s, "hevc", 2);
    let url = format!("http://127.0.0.1:{}/app/hevc/llhls.m3u8", s.media.llhls);
    let ts = s.dir.join("hevc.mkv");
    let counts = llhls_frames(&url, &ts);
    let secs = video_duration(&ts);
    println!("{secs:.2} s of H.265 over LL-HLS, decoded by ffprobe: {counts:?}");
    assert!(
        every_frame(&counts, "hevc", secs),
        "{counts:?} in {secs:.2} s"
    );
    assert!(frames_of(&counts, "aac") > 0, "{counts:?}");
    assert!(monotonic_dts(&ts), "timestamps go back");
}

#[test]
fn failed_pulls_answer_502_with_every_reason_and_bad_requests_are_refused() {
    if !have_rtsp_server() {
        return;
    }
    let cam = camera("h264", Some(("admin", "s3cret")));
    let s = Server::start_media("pull-errors");
    let dead = free_port();
    let r = pull(
        &s,
        json!({"name": "cam", "urls": [
            format!("rtsp://127.0.0.1:{dead}/cam"),
            format!("rtsp://admin:wrong@127.0.0.1:{}/cam", cam.port),
            format!("rtsp://127.0.0.1:{}/cam", cam.port),
        ]}),
    );
    assert_eq!(r.status, 502, "{}", r.body);
    let m = r.message();
    println!("{m}");
    assert!(m.contains("Could not pull [default/app/cam]"), "{m}");
    assert!(
        m.contains(&format!("rtsp://127.0.0.1:{dead}/cam: cannot connect")),
        "{m}"
    );
    assert!(m.contains("rtsp://***@127.0.0.1"), "{m}");
    assert!(
        m.contains("DESCRIBE: 401 Unauthorized (wrong user or password)"),
        "{m}"
    );
    assert!(m.contains("the server wants a user and password"), "{m}");
    assert!(!m.contains("wrong@"), "{m}");
    // Gone: not a stream, not a pull.
    assert_eq!(
        s.request("GET", &format!("{STREAMS}/cam"), None).status,
        404
    );
    assert_eq!(
        s.request("DELETE", &format!("{STREAMS}/cam"), None).status,
        404
    );
    let r = pull(
        &s,
        json!({"name": "nothing", "urls": [format!("rtsp://admin:s3cret@127.0.0.1:{}/nothing", cam.port)]}),
    );
    assert_eq!(r.status, 502);
    assert!(
        r.message().contains("DESCRIBE: 404 Not Found"),
        "{}",
        r.message()
    );

    for (body, want) in [
        (
            json!({"name": "x", "urls": ["http://h/x"]}),
            "the [http] scheme cannot be pulled",
        ),
        (
            json!({"name": "x", "urls": []}),
            "urls must hold 1 to 8 URLs",
        ),
        (
            json!({"name": "a/b", "urls": ["rtsp://h/x"]}),
            "Invalid stream name",
        ),
        (json!({"urls": ["rtsp://h/x"]}), "missing field `name`"),
    ] {
        let r = pull(&s, body);
        assert_eq!(r.status, 400, "{}", r.body);
        assert!(r.message().contains(want), "{}", r.message());
    }
    let r = s.request(
        "POST",
        "/v1/vhosts/default/apps/nope/streams",
        Some(r#"{"name":"x","urls":["rtsp://h/x"]}"#),
    );
    assert_eq!(r.status, 404);

    // A name a publisher holds is taken (409); DELETE disconnects the
    // publisher, on this config-file host too.
    let mut src = ffmpeg_source(
        30,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/taken", s.media.rtmp),
    );
    wait_live(&s, "taken", true, Duration::from_secs(10));
    let r = pull(
        &s,
        json!({"name": "taken", "urls": ["rtsp://127.0.0.1:1/x"]}),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    let r = s.request("DELETE", &format!("{STREAMS}/taken"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    let ended = wait_until(Duration::from_secs(10), || src.try_wait().ok().flatten());
    assert!(ended.is_some(), "the publisher was not disconnected");
}

#[test]
fn a_persistent_pull_reconnects_and_survives_a_restart() {
    if !have_rtsp_server() {
        return;
    }
    let port = free_port();
    let cam = camera_on(port, "h264", None);
    let mut s = Server::start_media("pull-persistent");
    let r = pull(
        &s,
        json!({"name": "door", "urls": [format!("rtsp://127.0.0.1:{port}/cam")],
               "properties": {"persistent": true, "noInputFailoverTimeoutMs": 2000}}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // The camera goes away: the stream ends; it comes back: so does the
    // stream (back-off 1-2 s).
    drop(cam);
    wait_live(&s, "door", false, Duration::from_secs(10));
    let cam = camera_on(port, "h264", None);
    let t0 = Instant::now();
    wait_live(&s, "door", true, Duration::from_secs(15));
    println!("stream back {:?} after the camera returned", t0.elapsed());
    // kiln restarts: the persistent pull comes back from the state file.
    s.terminate();
    s.spawn();
    wait_live(&s, "door", true, Duration::from_secs(15));
    assert_eq!(
        s.live_stream("door").unwrap()["input"]["sourceType"],
        "RtspPull"
    );
    // Deleted: gone, and not back after another restart.
    assert_eq!(
        s.request("DELETE", &format!("{STREAMS}/door"), None).status,
        200
    );
    wait_live(&s, "door", false, Duration::from_secs(5));
    s.terminate();
    s.spawn();
    std::thread::sleep(Duration::from_secs(2));
    assert!(s.live_stream("door").is_none());
    drop(cam);
}

/// A kiln with `app/{name}` published on it by ffmpeg over RTMP (40 s),
/// once it is live.
fn publishing_kiln(tag: &str, name: &str) -> (Server, Child) {
    let s = Server::start_media(tag);
    let src = publish_to(&s, name);
    (s, src)
}

/// ffmpeg publishing `app/{name}` to `s` over RTMP (40 s), once live.
fn publish_to(s: &Server, name: &str) -> Child {
    let src = ffmpeg_source(
        40,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/{name}", s.media.rtmp),
    );
    wait_live(s, name, true, Duration::from_secs(10));
    src
}

/// Plays `app/{name}` from `s` over RTMP for `secs` (ffmpeg, into
/// `{name}.flv`): every frame of `secs` of video came through, with
/// timestamps that never go back. (codec, frames) of what was played.
fn assert_plays_over_rtmp(s: &Server, name: &str, secs: u32, what: &str) -> Vec<(String, u64)> {
    let flv = s.dir.join(format!("{name}.flv"));
    let counts = record(
        &format!("rtmp://127.0.0.1:{}/app/{name}", s.media.rtmp),
        secs,
        &flv,
    );
    let got = video_duration(&flv);
    println!("{got:.2} s {what}: {counts:?}");
    assert!(
        got >= f64::from(secs) - 0.1 && every_frame(&counts, "h264", got),
        "{counts:?} in {got:.2} s"
    );
    assert!(monotonic_dts(&flv), "timestamps go back");
    counts
}

/// Records `secs` of `url` (any input ffmpeg reads) into `out`.
fn record(url: &str, secs: u32, out: &Path) -> Vec<(String, u64)> {
    let mut ff = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y", "-i", url])
        .args(["-t", &secs.to_string(), "-c", "copy"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ffmpeg runs");
    let done = wait_until(Duration::from_secs(30), || ff.try_wait().ok().flatten());
    if done.is_none() {
        let _ = ff.kill();
        let _ = ff.wait();
        panic!("ffmpeg did not read {secs} s of {url} within 30 s");
    }
    frame_counts(out)
}

#[test]
fn srt_pulls_from_another_kiln_and_from_libsrt_in_request_mode() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") || !have_tool("srt-live-transmit") {
        return;
    }
    // kiln A holds a stream published over RTMP; kiln B pulls it from A's
    // SRT listener in request mode and serves it over RTMP play.
    let (a, mut src) = publishing_kiln("pull-srt-origin", "cam");
    let b = Server::start_media("pull-srt-edge");
    let r = pull(
        &b,
        json!({"name": "edge", "urls": [format!("srt://127.0.0.1:{}/app/cam", a.media.srt)]}),
    );
    assert_eq!(r.status, 200, "{}\n{}", r.body, b.log_text());
    let input = &r.json()["response"]["input"];
    assert_eq!(input["sourceType"], "SrtPull");
    assert_eq!(
        media_count(input["tracks"].as_array().unwrap()),
        2,
        "{input}"
    );
    let counts =
        assert_plays_over_rtmp(&b, "edge", 4, "pulled over SRT from kiln, played over RTMP");
    assert!(frames_of(&counts, "aac") > 0, "{counts:?}");
    // The origin's stream ends: so does the pull's (then it retries).
    let _ = src.kill();
    let _ = src.wait();
    wait_live(&b, "edge", false, Duration::from_secs(15));

    // libsrt's srt-live-transmit as a listener that sends.
    let port = free_udp_port();
    let (mut ff, mut slt) =
        srt_live_transmit_source(40, &format!("srt://127.0.0.1:{port}?mode=listener"));
    std::thread::sleep(Duration::from_millis(500));
    let r = pull(
        &b,
        json!({"name": "slt", "urls": [format!("srt://127.0.0.1:{port}?streamid=anything")]}),
    );
    assert_eq!(r.status, 200, "{}\n{}", r.body, b.log_text());
    assert_plays_over_rtmp(&b, "slt", 4, "pulled from srt-live-transmit");
    for c in [&mut ff, &mut slt] {
        let _ = c.kill();
        let _ = c.wait();
    }

    // Encrypted: srt-live-transmit with a passphrase; kiln's caller sends
    // its key and decrypts what comes back. A wrong passphrase is refused
    // with the reason, and the passphrase is never in the log.
    let port = free_udp_port();
    let (mut ff, mut slt) = srt_live_transmit_source(
        40,
        &format!("srt://127.0.0.1:{port}?mode=listener&passphrase=pull-passphrase-1&pbkeylen=32"),
    );
    std::thread::sleep(Duration::from_millis(500));
    let r = pull(
        &b,
        json!({"name": "wrongkey", "urls": [format!("srt://127.0.0.1:{port}?streamid=x&passphrase=not-the-passphrase")]}),
    );
    assert_eq!(r.status, 502, "{}", r.body);
    println!("{}", r.message());
    let r = pull(
        &b,
        json!({"name": "secret", "urls": [format!("srt://127.0.0.1:{port}?streamid=x&passphrase=pull-passphrase-1&pbkeylen=32")]}),
    );
    assert_eq!(r.status, 200, "{}\n{}", r.body, b.log_text());
    assert_plays_over_rtmp(
        &b,
        "secret",
        4,
        "pulled from an encrypted srt-live-transmit",
    );
    assert!(
        !b.log_text().contains("pull-passphrase-1"),
        "the passphrase is in the log"
    );
    for c in [&mut ff, &mut slt] {
        let _ = c.kill();
        let _ = c.wait();
    }
}

#[test]
fn an_edge_pulls_from_its_origin_on_demand_for_a_viewer() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let (origin, mut src) = publishing_kiln("origins-origin", "cam");
    let edge = Server::start_with(
        "origins-edge",
        ServerOptions {
            media: true,
            llhls: Some(
                "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>2</SegmentDuration>".into(),
            ),
            vhost_access: format!(
                "<Origins><Properties><UnusedStreamDeletionTimeout>3000</UnusedStreamDeletionTimeout></Properties>\
                 <Origin><Location>/app</Location><Pass><Scheme>srt</Scheme>\
                 <Urls><Url>127.0.0.1:{}/app</Url></Urls></Pass></Origin></Origins>",
                origin.media.srt
            ),
            ..Default::default()
        },
    );
    assert!(edge.live_stream("cam").is_none());
    // A viewer asks the edge: it pulls from the origin and answers once
    // the stream is there.
    let url = format!("http://127.0.0.1:{}/app/cam/llhls.m3u8", edge.media.llhls);
    let t0 = Instant::now();
    let (code, master, _) = curl(&[], &url);
    println!("first viewer request answered {code} in {:?}", t0.elapsed());
    assert_eq!(code, 200, "{master}\n{}", edge.log_text());
    assert!(master.contains("#EXT-X-STREAM-INF"), "{master}");
    assert_eq!(
        edge.live_stream("cam").unwrap()["input"]["sourceType"],
        "SrtPull"
    );
    wait_for_segments(&edge, "cam", 2);
    let mkv = edge.dir.join("viewer.mkv");
    let counts = llhls_frames(&url, &mkv);
    let secs = video_duration(&mkv);
    println!("{secs:.2} s through the edge: {counts:?}");
    assert!(
        secs >= 3.9 && every_frame(&counts, "h264", secs),
        "{counts:?} in {secs:.2} s"
    );
    // An RTMP player asking the edge for another stream of the origin:
    // pulled on demand too, the play waits for it. It plays 8 s: past the
    // 3 s unused timeout, which a player holds off; the LL-HLS pull that
    // nobody asks for any more ends meanwhile.
    let mut src2 = publish_to(&origin, "cam2");
    let flv = edge.dir.join("player.flv");
    let player_url = format!("rtmp://127.0.0.1:{}/app/cam2", edge.media.rtmp);
    let player = std::thread::spawn(move || {
        let counts = record(&player_url, 8, &flv);
        (counts, video_duration(&flv))
    });
    let t0 = Instant::now();
    wait_live(&edge, "cam", false, Duration::from_secs(10));
    println!(
        "the unwatched pull ended {:?} after the player started",
        t0.elapsed()
    );
    assert!(edge
        .log_text()
        .contains("pull [default/app/cam] (on demand) unused; ended"));
    let (counts, secs) = player.join().unwrap();
    println!("{secs:.2} s played over RTMP from the edge, pulled on demand: {counts:?}");
    assert!(
        secs >= 7.9 && every_frame(&counts, "h264", secs),
        "{counts:?} in {secs:.2} s\n{}",
        edge.log_text()
    );
    // An SRT player in request mode asking the edge for a third stream:
    // its handshake waits for the pull.
    let mut src3 = publish_to(&origin, "cam3");
    let ts = edge.dir.join("srt-player.ts");
    let counts = record(
        &format!(
            "srt://127.0.0.1:{}?streamid=%23!::r=app/cam3,m=request",
            edge.media.srt
        ),
        3,
        &ts,
    );
    println!("3 s played over SRT from the edge, pulled on demand: {counts:?}");
    assert!(
        frames_of(&counts, "h264") >= 70,
        "{counts:?}\n{}",
        edge.log_text()
    );
    assert!(monotonic_dts(&ts));
    let _ = src3.kill();
    let _ = src3.wait();
    // A stream no origin has is still 404, at once.
    let (code, _, _) = curl(
        &[],
        &format!("http://127.0.0.1:{}/other/cam/llhls.m3u8", edge.media.llhls),
    );
    assert_eq!(code, 404);
    // The origin's stream ends: so does the edge's copy.
    let _ = src2.kill();
    let _ = src2.wait();
    let _ = src.kill();
    let _ = src.wait();
    wait_live(&edge, "cam2", false, Duration::from_secs(15));
    // With the origin's stream gone, a viewer request finds nothing.
    let (code, body, _) = curl(&[], &url);
    assert!(code == 404 || code == 200, "{code} {body}");
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

#[test]
fn rtmp_pulls_from_nginx_rtmp_and_from_another_kiln() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") || !have_tool("nginx") {
        return;
    }
    let module = "/usr/lib/nginx/modules/ngx_rtmp_module.so";
    if !Path::new(module).exists() {
        assert!(
            std::env::var("KILN_REQUIRE_INTEROP").as_deref() != Ok("1"),
            "nginx-rtmp is required"
        );
        eprintln!("SKIP: nginx-rtmp is not installed");
        return;
    }
    // nginx-rtmp holds a stream ffmpeg publishes; kiln plays it from there.
    let s = Server::start_media("pull-rtmp");
    let port = free_port();
    let dir = s.dir.join("nginx");
    std::fs::create_dir_all(&dir).unwrap();
    let conf = format!(
        "load_module {module};\n{}worker_processes 1;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log info;\nevents {{ worker_connections 64; }}\n\
         rtmp {{ server {{ listen 127.0.0.1:{port}; application live {{ live on; }} }} }}\n",
        if is_root() { "user root;\n" } else { "" },
        d = dir.display(),
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let mut nginx = Command::new("nginx")
        .arg("-p")
        .arg(&dir)
        .arg("-e")
        .arg(dir.join("error.log"))
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .spawn()
        .unwrap();
    wait_for_listen(port, Duration::from_secs(10));
    let mut src = ffmpeg_source(40, &[], "flv", &format!("rtmp://127.0.0.1:{port}/live/cam"));
    std::thread::sleep(Duration::from_secs(1));
    let r = pull(
        &s,
        json!({"name": "fromnginx", "urls": [format!("rtmp://127.0.0.1:{port}/live/cam")]}),
    );
    let pulled = (r.status == 200).then(|| {
        let flv = s.dir.join("fromnginx.flv");
        let counts = record(
            &format!("rtmp://127.0.0.1:{}/app/fromnginx", s.media.rtmp),
            4,
            &flv,
        );
        (counts, video_duration(&flv))
    });
    // SIGTERM: the master stops its worker too (SIGKILL would orphan it).
    let _ = Command::new("kill")
        .args(["-TERM", &nginx.id().to_string()])
        .status();
    let _ = nginx.wait();
    let Some((counts, secs)) = pulled else {
        panic!("{}\n{}", r.body, s.log_text());
    };
    assert_eq!(r.json()["response"]["input"]["sourceType"], "RtmpPull");
    println!("{secs:.2} s pulled over RTMP from nginx-rtmp: {counts:?}");
    // nginx-rtmp starts a player at the next keyframe: up to 1 s less video.
    assert!(
        secs >= 2.9 && every_frame(&counts, "h264", secs),
        "{counts:?} in {secs:.2} s"
    );
    // nginx went away: the pull's stream ends (and retries with back-off).
    wait_live(&s, "fromnginx", false, Duration::from_secs(15));
    let _ = src.kill();
    let _ = src.wait();

    // Another kiln as the origin: every frame through RTMP play both ways.
    let (origin, mut src) = publishing_kiln("pull-rtmp-origin", "cam");
    let r = pull(
        &s,
        json!({"name": "fromkiln", "urls": [format!("rtmp://127.0.0.1:{}/app/cam", origin.media.rtmp)]}),
    );
    assert_eq!(r.status, 200, "{}\n{}", r.body, s.log_text());
    assert_plays_over_rtmp(&s, "fromkiln", 4, "pulled over RTMP from kiln");
    let _ = src.kill();
    let _ = src.wait();
}

#[test]
fn a_push_on_an_edge_pulls_its_stream_from_the_origin() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let (origin, mut src) = publishing_kiln("origins-push-origin", "cam");
    let edge = Server::start_with(
        "origins-push-edge",
        ServerOptions {
            media: true,
            vhost_access: format!(
                "<Origins><Origin><Location>/app</Location><Pass><Scheme>rtmp</Scheme>\
                 <Urls><Url>127.0.0.1:{}/app</Url></Urls></Pass></Origin></Origins>",
                origin.media.rtmp
            ),
            ..Default::default()
        },
    );
    // A push reserved on the edge for a stream only the origin has: the
    // edge pulls it (over RTMP this time) and the push starts with it.
    let port = free_port();
    let flv = edge.dir.join("pushed.flv");
    let mut listener = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y", "-listen", "1"])
        .args(["-i", &format!("rtmp://127.0.0.1:{port}/live/key")])
        .args(["-t", "4", "-c", "copy"])
        .arg(&flv)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_listen(port, Duration::from_secs(10));
    let r = edge.start_push(
        json!({"id": "out", "stream": {"name": "cam"}, "protocol": "rtmp",
        "url": format!("rtmp://127.0.0.1:{port}/live"), "streamKey": "key"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    wait_live(&edge, "cam", true, Duration::from_secs(10));
    assert_eq!(
        edge.live_stream("cam").unwrap()["input"]["sourceType"],
        "RtmpPull"
    );
    let done = wait_until(Duration::from_secs(20), || {
        listener.try_wait().ok().flatten()
    });
    assert!(
        done.is_some(),
        "the push did not deliver 4 s\n{}",
        edge.log_text()
    );
    let counts = frame_counts(&flv);
    let secs = video_duration(&flv);
    println!("{secs:.2} s pushed from the edge, pulled for the push: {counts:?}");
    assert!(
        secs >= 3.9 && every_frame(&counts, "h264", secs),
        "{counts:?} in {secs:.2} s"
    );
    let _ = src.kill();
    let _ = src.wait();
}

/// `:pulls` (kiln extension) lists every pull of an application, live or
/// not: a persistent pull whose camera is down is there with its state, its
/// URL (secrets masked) and its last error, until it is deleted.
#[test]
fn pulls_that_are_not_live_are_listed_with_their_last_error() {
    let s = Server::start("pull-list");
    let dead = free_port();
    let r = pull(
        &s,
        json!({"name": "door", "urls": [format!("rtsp://cam:s3cret@127.0.0.1:{dead}/cam")],
               "properties": {"persistent": true}}),
    );
    assert_eq!(r.status, 502, "{}", r.body);
    let list = |s: &Server| {
        s.request("POST", "/v1/vhosts/default/apps/app:pulls", Some("{}"))
            .json()["response"]
            .clone()
    };
    let pulls = list(&s);
    assert_eq!(pulls.as_array().unwrap().len(), 1, "{pulls}");
    let p = &pulls[0];
    assert_eq!(p["name"], "door");
    assert!(p["state"] == "connecting" || p["state"] == "waiting", "{p}");
    assert_eq!(p["persistent"], true);
    assert_eq!(p["onDemand"], false);
    assert!(!p.to_string().contains("s3cret"), "{p}");
    assert!(p["lastError"].as_str().unwrap().contains("refused"), "{p}");
    assert_eq!(
        s.request("DELETE", &format!("{STREAMS}/door"), None).status,
        200
    );
    assert_eq!(list(&s), json!([]));
    let r = s.request("POST", "/v1/vhosts/default/apps/nope:pulls", Some("{}"));
    assert_eq!(r.status, 404);
}
