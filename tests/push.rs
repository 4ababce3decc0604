//! Push publishing against real receivers: an ffmpeg RTMP listener,
//! nginx-rtmp, and a UDP capture, with the received media checked by
//! ffprobe (codecs, frame counts within 2%, monotonic timestamps); reserved
//! pushes, a destination that is down and comes back, stop then start with
//! the same id, track selection, validation, and restart.

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// ffmpeg as an RTMP server recording what it receives.
fn rtmp_listener(port: u16, out: &Path) -> Child {
    Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y", "-listen", "1"])
        .args(["-i", &format!("rtmp://127.0.0.1:{port}/live/key")])
        .args(["-c", "copy"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ffmpeg listens")
}

fn wait_state(s: &Server, id: &str, state: &str, limit: Duration) -> Value {
    let t0 = Instant::now();
    loop {
        if let Some(t) = s.push_task(id) {
            if t["state"] == state {
                return t;
            }
            if t0.elapsed() > limit {
                panic!("push {id} never reached {state}: {t}");
            }
        } else if t0.elapsed() > limit {
            panic!("push {id} is gone");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn rtmp_and_udp_pushes_deliver_every_frame() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let s = Server::start_media("pushmedia");
    let rtmp_port = free_port();
    let flv = s.dir.join("rtmp-out.flv");
    let ts = s.dir.join("udp-out.ts");
    let mut listener = rtmp_listener(rtmp_port, &flv);
    let (udp_port, capture) = udp_capture(ts.clone(), Duration::from_secs(3));
    wait_for_listen(rtmp_port, Duration::from_secs(10));
    // Reserved before the stream exists: both start in `ready`.
    let r = s.start_push(
        json!({"id":"to-rtmp","stream":{"name":"cam"},"protocol":"rtmp",
        "url":format!("rtmp://127.0.0.1:{rtmp_port}/live"),"streamKey":"key"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["response"]["state"], "ready");
    let r = s.start_push(
        json!({"id":"to-udp","stream":{"name":"cam"},"protocol":"mpegts",
        "url":format!("udp://127.0.0.1:{udp_port}")}),
    );
    assert_eq!(r.json()["response"]["state"], "ready");

    let secs = 8;
    let mut ff = ffmpeg_source(
        secs,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
    );
    let pushing = wait_state(&s, "to-rtmp", "pushing", Duration::from_secs(10));
    assert_eq!(pushing["sequence"], 0);
    wait_state(&s, "to-udp", "pushing", Duration::from_secs(5));
    assert!(ff.wait().unwrap().success());
    // The stream ended: both go back to ready, counters add up.
    let t = wait_state(&s, "to-rtmp", "ready", Duration::from_secs(10));
    assert_eq!(t["sequence"], 1);
    assert_eq!(t["sentBytes"], 0);
    assert!(t["totalsentBytes"].as_u64().unwrap() > 100_000, "{t}");
    assert!(t["totalsentTime"].as_u64().unwrap() >= 5_000, "{t}");
    assert!(t.get("lastError").is_none(), "{t}");
    assert_ne!(t["finishTime"], "1970-01-01T00:00:00.000+00:00");
    let u = wait_state(&s, "to-udp", "ready", Duration::from_secs(10));
    assert!(u["totalsentBytes"].as_u64().unwrap() > 100_000);

    let _ = listener.wait();
    let datagrams = capture.join().unwrap();
    assert!(datagrams > 100);
    let want_video = (secs * FPS) as u64;
    let want_audio = (secs as u64 * 48_000).div_ceil(1024);
    for file in [&flv, &ts] {
        let (streams, monotonic) = (frame_counts(file), monotonic_dts(file));
        let video = frames_of(&streams, "h264");
        let audio = frames_of(&streams, "aac");
        assert!(
            within_2pct(video, want_video),
            "{}: video {video} of {want_video}",
            file.display()
        );
        assert!(
            within_2pct(audio, want_audio),
            "{}: audio {audio} of {want_audio}",
            file.display()
        );
        assert!(monotonic, "{}: timestamps go back", file.display());
    }
}

#[test]
fn push_to_nginx_rtmp() {
    if !have_tool("nginx") || !have_tool("ffmpeg") {
        return;
    }
    if !Path::new("/usr/lib/nginx/modules/ngx_rtmp_module.so").exists() {
        if std::env::var("KILN_REQUIRE_INTEROP").as_deref() == Ok("1") {
            panic!("nginx-rtmp (libnginx-mod-rtmp) is required");
        }
        eprintln!("SKIP: libnginx-mod-rtmp is not installed");
        return;
    }
    let s = Server::start_media("nginx");
    let port = free_port();
    let dir = s.dir.join("nginx");
    std::fs::create_dir_all(dir.join("rec")).unwrap();
    let conf = format!(
        "load_module /usr/lib/nginx/modules/ngx_rtmp_module.so;\n\
         daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid;\n\
         error_log {d}/error.log;\n\
         events {{ worker_connections 64; }}\n\
         rtmp {{ server {{ listen 127.0.0.1:{port}; chunk_size 4096;\n\
           application live {{ live on; record all; record_path {d}/rec; record_unique off; }} }} }}\n",
        d = dir.display()
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let mut nginx = Command::new("nginx")
        .args([
            "-p",
            dir.to_str().unwrap(),
            "-c",
            dir.join("nginx.conf").to_str().unwrap(),
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(port, Duration::from_secs(10));
    let r = s.start_push(
        json!({"id":"nginx","stream":{"name":"cam"},"protocol":"rtmp",
        "url":format!("rtmp://127.0.0.1:{port}/live"),"streamKey":"relay"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let secs = 6;
    let mut ff = ffmpeg_source(
        secs,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
    );
    wait_state(&s, "nginx", "pushing", Duration::from_secs(10));
    ff.wait().unwrap();
    wait_state(&s, "nginx", "ready", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(500));
    let _ = nginx.kill();
    let _ = nginx.wait();
    let recording = dir.join("rec/relay.flv");
    let (streams, monotonic) = (frame_counts(&recording), monotonic_dts(&recording));
    let video = frames_of(&streams, "h264");
    assert!(
        within_2pct(video, (secs * FPS) as u64),
        "nginx recorded {video} video frames"
    );
    assert!(frames_of(&streams, "aac") > 0);
    assert!(monotonic);
}

#[test]
fn destination_down_errors_retries_and_recovers() {
    if !have_tool("ffmpeg") {
        return;
    }
    let s = Server::start_media("pushretry");
    // A port bound but not listening: connects are refused, and no other
    // test can take it (free_port alone would leave a race).
    let holder = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    holder
        .bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    let dead = holder.local_addr().unwrap().as_socket().unwrap().port();
    let mut ff = ffmpeg_source(
        30,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
    );
    let r = s.start_push(
        json!({"id":"flaky","stream":{"name":"cam"},"protocol":"rtmp",
        "url":format!("rtmp://127.0.0.1:{dead}/live"),"streamKey":"key"}),
    );
    assert_eq!(r.status, 200);
    let t = wait_state(&s, "flaky", "error", Duration::from_secs(10));
    assert!(t["lastError"].as_str().unwrap().contains("refused"), "{t}");
    // One WARN line per failure, saying when the next attempt is due.
    let log = s.log_text();
    assert!(
        log.lines().any(
            |l| l.contains("WARN  push [default/app/flaky] failed (session 1)")
                && l.contains("next attempt in")
        ),
        "{log}"
    );
    // It retries on its back-off: the session count grows.
    let t0 = Instant::now();
    while s.push_task("flaky").unwrap()["sequence"].as_u64().unwrap() < 2 {
        assert!(t0.elapsed() < Duration::from_secs(10), "no retry");
        // The API answers meanwhile.
        assert_eq!(s.request("GET", "/v1/vhosts", None).status, 200);
        std::thread::sleep(Duration::from_millis(100));
    }
    // The destination comes up: the next attempt pushes.
    let out = s.dir.join("late.flv");
    drop(holder);
    let mut listener = rtmp_listener(dead, &out);
    wait_for_listen(dead, Duration::from_secs(10));
    let t = wait_state(&s, "flaky", "pushing", Duration::from_secs(20));
    // lastError says why the last session failed: gone once pushing again
    assert!(t.get("lastError").is_none(), "{t}");
    let _ = ff.kill();
    let _ = ff.wait();
    let _ = listener.wait();
}

#[test]
fn stop_then_start_with_the_same_id() {
    let s = Server::start_media("pushreuse");
    let body =
        json!({"id":"again","stream":{"name":"cam"},"protocol":"mpegts","url":"udp://127.0.0.1:9"});
    assert_eq!(s.start_push(body.clone()).status, 200);
    let r = s.start_push(body.clone());
    assert_eq!(r.status, 409);
    assert_eq!(r.message(), "[HTTP] Duplicate ID: [again] (409)");
    let r = s.request(
        "POST",
        "/v1/vhosts/default/apps/app:stopPush",
        Some(r#"{"id":"again"}"#),
    );
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, r#"{"statusCode":200,"message":"OK"}"#)
    );
    assert!(s.push_task("again").is_none());
    assert_eq!(s.start_push(body).status, 200);
    let r = s.request(
        "POST",
        "/v1/vhosts/default/apps/app:stopPush",
        Some(r#"{"id":"nope"}"#),
    );
    assert_eq!(r.status, 404);
    assert_eq!(
        r.message(),
        "[HTTP] Could not find id 'nope': [default/app] (404)"
    );
}

#[test]
fn start_push_validation() {
    let s = Server::start("pushvalid");
    let post = |path: &str, body: &str| s.request("POST", path, Some(body));
    let ok = r#"{"id":"x","stream":{"name":"s"},"protocol":"mpegts","url":"udp://127.0.0.1:9"}"#;
    let r = post("/v1/vhosts/nope/apps/app:startPush", ok);
    assert_eq!(
        (r.status, r.message().as_str()),
        (404, "[HTTP] Could not find the virtual host: [nope] (404)")
    );
    let r = post("/v1/vhosts/default/apps/nope:startPush", ok);
    assert_eq!(
        (r.status, r.message().as_str()),
        (
            404,
            "[HTTP] Could not find the application: [default/nope] (404)"
        )
    );
    let r = post("/v1/vhosts/default/apps/app:startPush", "[1]");
    assert_eq!(r.status, 400);
    let r = post(
        "/v1/vhosts/default/apps/app:startPush",
        r#"{"protocol":"rtmp"}"#,
    );
    assert_eq!(
        r.message(),
        "[HTTP] There is no required parameter [ id stream.name url streamKey] (400)"
    );
    let r = post(
        "/v1/vhosts/default/apps/app:startPush",
        r#"{"id":"x","stream":{"name":"s"},"protocol":"hls","url":"udp://a:1"}"#,
    );
    assert!(r.message().contains("Unknown protocol [hls]"), "{}", r.body);
    let r = post(
        "/v1/vhosts/default/apps/app:startPush",
        r#"{"id":"x","stream":{"name":"s"},"protocol":"srt","url":"udp://a:1"}"#,
    );
    assert!(r.message().contains("srt://"), "{}", r.body);
    let r = post(
        "/v1/vhosts/default/apps/app:startPush",
        r#"{"id":"x","stream":{"name":"s"},"protocol":"srt","url":"srt://a:1?passphrase=abcdefghi"}"#,
    );
    assert!(
        r.message().contains("passphrase") && r.message().contains("10-79"),
        "{}",
        r.body
    );
    let r = post(
        "/v1/vhosts/default/apps/app:startPush",
        r#"{"id":"x","stream":{"name":"s","variantNames":["nope"]},"protocol":"mpegts","url":"udp://a:1"}"#,
    );
    assert!(r.message().contains("[nope]"), "{}", r.body);
    let r = post(
        "/v1/vhosts/default/apps/app:startPush",
        r#"{"id":"x","stream":{"name":"s"},"protocol":"mpegts","url":"udp://a:1","colour":1}"#,
    );
    assert!(r.message().contains("colour"), "{}", r.body);
    // a good one, then the list and an unknown id
    assert_eq!(
        post("/v1/vhosts/default/apps/app:startPush", ok).status,
        200
    );
    let r = post("/v1/vhosts/default/apps/app:pushes", "");
    assert_eq!(r.json()["response"].as_array().unwrap().len(), 1);
    let r = post("/v1/vhosts/default/apps/app:pushes", r#"{"id":"unknown"}"#);
    assert_eq!(r.json()["response"], json!([]));
    let t = &post("/v1/vhosts/default/apps/app:pushes", "").json()["response"][0];
    let keys: Vec<&str> = t.as_object().unwrap().keys().map(String::as_str).collect();
    for k in [
        "id",
        "state",
        "vhost",
        "app",
        "stream",
        "protocol",
        "url",
        "streamKey",
        "sentBytes",
        "sentTime",
        "sequence",
        "totalsentBytes",
        "totalsentTime",
        "createdTime",
        "startTime",
        "finishTime",
    ] {
        assert!(keys.contains(&k), "{k} missing in {t}");
    }
    assert_eq!(t["startTime"], "1970-01-01T00:00:00.000+00:00");
}

#[test]
fn variant_names_select_one_track() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let s = Server::start_media("pushvariant");
    let ts = s.dir.join("audio-only.ts");
    let (udp_port, capture) = udp_capture(ts.clone(), Duration::from_secs(2));
    let r = s.start_push(
        json!({"id":"audio","stream":{"name":"cam","variantNames":["bypass_audio"]},
        "protocol":"mpegts","url":format!("udp://127.0.0.1:{udp_port}")}),
    );
    assert_eq!(r.status, 200);
    let mut ff = ffmpeg_source(
        3,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
    );
    ff.wait().unwrap();
    capture.join().unwrap();
    let streams = frame_counts(&ts);
    assert_eq!(streams.len(), 1, "{streams:?}");
    assert_eq!(streams[0].0, "aac");
}

#[test]
fn push_tasks_survive_a_restart_as_ready() {
    let mut s = Server::start_media("pushrestart");
    let r = s.start_push(json!({"id":"kept","stream":{"name":"cam"},"protocol":"srt",
        "url":"srt://127.0.0.1:9000?latency=200000&streamid=x"}));
    assert_eq!(r.status, 200);
    s.terminate();
    s.spawn();
    let t = s.push_task("kept").expect("task restored");
    assert_eq!(t["state"], "ready");
    assert_eq!(t["url"], "srt://127.0.0.1:9000?latency=200000&streamid=x");
    assert_eq!(t["sequence"], 0);
}

/// Issue 10 item 19: an MPEG-TS/UDP publisher's last frame of every track
/// reaches the push (the stream ends by the quiet timeout; the demuxer is
/// flushed first): exactly the source file's frame counts. (Over SRT,
/// ffmpeg closes without linger, as libsrt does in live mode, so what was
/// still in its send buffer never arrives: not comparable frame for frame.)
#[test]
fn mpegts_udp_ingest_delivers_the_last_frame() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let s = Server::start_media("lastframe");
    let src = s.dir.join("src.ts");
    let made = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y"])
        .args(["-f", "lavfi", "-i", "testsrc2=size=320x180:rate=25"])
        .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"])
        .args([
            "-t",
            "4",
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-g",
            "25",
        ])
        .args(["-c:a", "aac", "-ac", "2", "-f", "mpegts"])
        .arg(&src)
        .status()
        .unwrap();
    assert!(made.success());
    let want = frame_counts(&src);
    let name = format!("ts_{}", s.media.mpegts);
    let url = format!("udp://127.0.0.1:{}?pkt_size=1316", s.media.mpegts);
    let out = s.dir.join(format!("{name}.ts"));
    let (udp_port, capture) = udp_capture(out.clone(), Duration::from_secs(8));
    let r = s.start_push(
        json!({"id": name, "stream": {"name": name}, "protocol": "mpegts",
        "url": format!("udp://127.0.0.1:{udp_port}")}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let ok = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-re", "-i"])
        .arg(&src)
        .args(["-c", "copy", "-f", "mpegts", &url])
        .status()
        .unwrap();
    assert!(ok.success());
    capture.join().unwrap();
    let got = frame_counts(&out);
    assert_eq!(got, want, "{name}: frames pushed vs the source");
}

/// DECISIONS section 15: a push whose destination is kiln's own ingest for
/// the very stream it reads is refused (it would keep the stream alive on
/// its own output forever); a push into another stream is fine.
#[test]
fn a_push_that_feeds_its_own_stream_is_refused() {
    let s = Server::start_media("selfloop");
    let m = s.media;
    let ts_name = format!("ts_{}", m.mpegts);
    for (body, loops) in [
        (
            json!({"id":"ts","stream":{"name":ts_name},"protocol":"mpegts",
                "url":format!("udp://127.0.0.1:{}", m.mpegts)}),
            true,
        ),
        (
            json!({"id":"ts0","stream":{"name":ts_name},"protocol":"mpegts",
                "url":format!("udp://0.0.0.0:{}", m.mpegts)}),
            true,
        ),
        (
            json!({"id":"rtmp","stream":{"name":"cam"},"protocol":"rtmp",
                "url":format!("rtmp://localhost:{}/app", m.rtmp),"streamKey":"cam"}),
            true,
        ),
        (
            json!({"id":"srt","stream":{"name":"cam"},"protocol":"srt",
                "url":format!("srt://127.0.0.1:{}?streamid=default/app/cam", m.srt)}),
            true,
        ),
        // into another stream of kiln: a relay, not a loop
        (
            json!({"id":"other","stream":{"name":"cam"},"protocol":"rtmp",
                "url":format!("rtmp://127.0.0.1:{}/app", m.rtmp),"streamKey":"copy"}),
            false,
        ),
        (
            json!({"id":"tsother","stream":{"name":"cam"},"protocol":"mpegts",
                "url":format!("udp://127.0.0.1:{}", m.mpegts)}),
            false,
        ),
    ] {
        let r = s.start_push(body.clone());
        if loops {
            assert_eq!(r.status, 400, "{body}: {}", r.body);
            assert!(
                r.message().contains("would feed the stream it reads"),
                "{}",
                r.body
            );
        } else {
            assert_eq!(r.status, 200, "{body}: {}", r.body);
        }
    }
}
