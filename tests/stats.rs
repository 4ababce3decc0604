//! OME's statistics API and the Prometheus `/metrics` endpoint, against a
//! running push: the counters grow, the levels add up, and a real
//! Prometheus text parser (Python's `prometheus_client`) reads `/metrics`
//! with figures that match the stats API.

mod common;
#[path = "common/hls_check.rs"]
mod hls_check;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

fn stats(s: &Server, path: &str) -> Value {
    let r = s.request("GET", &format!("/v1/stats/current{path}"), None);
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    r.json()["response"].clone()
}

/// `prometheus_client` parses `text` and prints `name{labels} value` lines.
fn parse_with_prometheus_client(text: &str) -> Option<Vec<(String, String, f64)>> {
    let ok = Command::new("python3")
        .args(["-c", "import prometheus_client"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var("KILN_REQUIRE_INTEROP").as_deref() == Ok("1") {
            panic!("python3 with prometheus_client is required (KILN_REQUIRE_INTEROP=1)");
        }
        eprintln!("SKIP: python3 prometheus_client is not installed");
        return None;
    }
    let script = r#"
import sys, json
from prometheus_client.parser import text_string_to_metric_families
out = []
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        out.append([s.name, json.dumps(s.labels, sort_keys=True), s.value])
print(json.dumps(out))
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the parser refused the text:\n{text}");
    let rows: Vec<(String, String, f64)> = serde_json::from_slice(&out.stdout).unwrap();
    Some(rows)
}

#[test]
fn stats_and_metrics_follow_a_running_push() {
    if !have_tool("ffmpeg") {
        return;
    }
    let s = Server::start_media("stats");
    // Unknown levels are 404 like the rest of the API.
    assert_eq!(
        s.request("GET", "/v1/stats/current/vhosts/nope", None)
            .status,
        404
    );
    assert_eq!(
        s.request(
            "GET",
            "/v1/stats/current/vhosts/default/apps/app/streams/nope",
            None
        )
        .status,
        404
    );
    let (udp_port, capture) = udp_capture(s.dir.join("out.ts"), Duration::from_secs(3));
    let r = s.start_push(
        json!({"id":"out","stream":{"name":"cam"},"protocol":"mpegts",
        "url":format!("udp://127.0.0.1:{udp_port}")}),
    );
    assert_eq!(r.status, 200);
    let mut src = ffmpeg_source(
        10,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
    );
    wait_until(Duration::from_secs(10), || {
        (s.push_task("out")?["state"] == "pushing").then_some(())
    })
    .expect("pushing");
    std::thread::sleep(Duration::from_millis(2500));
    let stream = "/vhosts/default/apps/app/streams/cam";
    let a = stats(&s, stream);
    std::thread::sleep(Duration::from_millis(1500));
    let b = stats(&s, stream);
    for k in ["totalBytesIn", "totalBytesOut"] {
        assert!(
            b[k].as_u64().unwrap() > a[k].as_u64().unwrap(),
            "{k}: {a} -> {b}"
        );
    }
    // ffmpeg's test pattern at 640x360 is some hundreds of kb/s
    let last_in = b["lastThroughputIn"].as_u64().unwrap();
    assert!(last_in > 50_000, "{b}");
    assert!(b["lastThroughputOut"].as_u64().unwrap() > 50_000, "{b}");
    assert!(b["maxThroughputIn"].as_u64().unwrap() >= last_in);
    assert!(b["avgThroughputIn"].as_u64().unwrap() > 0);
    assert_eq!(b["connections"]["push"], 1);
    assert_eq!(b["totalConnections"], 1);
    assert!(b["maxTotalConnections"].as_u64().unwrap() >= 1);
    for k in [
        "createdTime",
        "lastUpdatedTime",
        "lastRecvTime",
        "lastSentTime",
        "maxTotalConnectionTime",
    ] {
        let t = b[k].as_str().unwrap();
        assert!(t.len() == 29 && t.as_bytes()[10] == b'T', "{k}: {t}");
    }
    // The levels add up.
    let app = stats(&s, "/vhosts/default/apps/app");
    let vhost = stats(&s, "/vhosts/default");
    let server = stats(&s, "");
    for level in [&app, &vhost, &server] {
        assert!(level["totalBytesIn"].as_u64().unwrap() >= b["totalBytesIn"].as_u64().unwrap());
        assert_eq!(level["connections"]["push"], 1, "{level}");
    }
    // /metrics, read by a real Prometheus parser, matches the stats API.
    let m1 = s.request("GET", "/metrics", None);
    assert_eq!(m1.status, 200);
    assert_eq!(
        m1.header("Content-Type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert_eq!(s.request("GET", "/metrics", None).status, 200);
    let r = s.request_with("GET", "/metrics", &[], None);
    assert_eq!(r.status, 401, "same auth as the API");
    if let Some(rows) = parse_with_prometheus_client(&m1.body) {
        let value = |name: &str, label: &str| {
            rows.iter()
                .find(|(n, l, _)| n == name && l.contains(label))
                .map(|(_, _, v)| *v)
        };
        let received = value("kiln_stream_received_bytes_total", "\"stream\": \"cam\"").unwrap();
        let now = stats(&s, stream)["totalBytesIn"].as_u64().unwrap() as f64;
        assert!(received > 0.0 && received <= now, "{received} vs {now}");
        assert_eq!(value("kiln_push_up", "\"id\": \"out\""), Some(1.0));
        assert!(value("kiln_push_sent_bytes_total", "\"id\": \"out\"").unwrap() > 0.0);
        assert_eq!(
            value("kiln_stream_pushes", "\"stream\": \"cam\""),
            Some(1.0)
        );
        // and the counters grow between scrapes
        std::thread::sleep(Duration::from_millis(500));
        let later = parse_with_prometheus_client(&s.request("GET", "/metrics", None).body).unwrap();
        let again = later
            .iter()
            .find(|(n, l, _)| n == "kiln_stream_received_bytes_total" && l.contains("cam"))
            .unwrap()
            .2;
        assert!(again > received);
    }
    let _ = src.kill();
    let _ = src.wait();
    let _ = capture.join();
}

/// Issue 28, 6.5 (DECISIONS 14 amended): viewers count. An LL-HLS viewer,
/// an RTMP player and an SRT player of a stream show in its connections,
/// in totalConnections, and in totalBytesOut; they leave when they go.
#[test]
fn stats_count_viewers_of_every_protocol() {
    if !have_tool("ffmpeg") {
        return;
    }
    let s = Server::start_with(
        "stats-viewers",
        ServerOptions {
            media: true,
            llhls: Some(
                "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>1</SegmentDuration>".into(),
            ),
            ..Default::default()
        },
    );
    let mut src = ffmpeg_source(
        40,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
    );
    s.wait_for_tracks("cam");
    let path = "/vhosts/default/apps/app/streams/cam";
    let before = stats(&s, path);
    assert_eq!(before["totalConnections"], 0, "{before}");
    // An RTMP player and an SRT player (ffmpeg), and an LL-HLS viewer.
    let rtmp_player = Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-i",
            &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
            "-f",
            "null",
            "-",
        ])
        .stdin(std::process::Stdio::null())
        .spawn();
    let srt_player = Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-i",
            &format!(
                "srt://127.0.0.1:{}?streamid=%23!::r=app/cam,m=request",
                s.media.srt
            ),
            "-f",
            "null",
            "-",
        ])
        .stdin(std::process::Stdio::null())
        .spawn();
    let (mut rtmp_player, mut srt_player) = (rtmp_player.unwrap(), srt_player.unwrap());
    let got = wait_until(Duration::from_secs(20), || {
        let r = hls_check::get(s.media.llhls, "/app/cam/llhls.m3u8", &[]);
        if r.status != 200 {
            return None;
        }
        let c = stats(&s, path)["connections"].clone();
        (c["rtmp"] == 1 && c["srt"] == 1 && c["llhls"] == 1).then_some(c)
    });
    let now = stats(&s, path);
    assert!(
        got.is_some(),
        "viewers not counted: {now}\n{}",
        s.log_text()
    );
    assert_eq!(now["totalConnections"], 3, "{now}");
    assert!(now["totalBytesOut"].as_u64().unwrap() > 10_000, "{now}");
    // The app and the server add them up.
    let app = stats(&s, "/vhosts/default/apps/app");
    assert_eq!(app["connections"]["rtmp"], 1, "{app}");
    let _ = rtmp_player.kill();
    let _ = srt_player.kill();
    let _ = rtmp_player.wait();
    let _ = srt_player.wait();
    let gone = wait_until(Duration::from_secs(15), || {
        let c = stats(&s, path)["connections"].clone();
        (c["rtmp"] == 0 && c["srt"] == 0).then_some(())
    });
    assert!(
        gone.is_some(),
        "players that left still count: {}",
        stats(&s, path)
    );
    let _ = src.kill();
    let _ = src.wait();
}
