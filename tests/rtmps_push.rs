//! RTMPS push, end to end: one kiln pushes over RTMPS into a second kiln's
//! RTMPS ingest (certificate trusted through SSL_CERT_FILE), and a push to a
//! destination whose certificate is not trusted fails with the reason.

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use serde_json::json;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn kiln_pushes_rtmps_into_kiln() {
    if !have_tool("ffmpeg") {
        return;
    }
    let certs = temp_dir("rtmps-push-certs");
    let (cert, key) = make_cert(&certs, "edge");
    // The destination: RTMPS ingest with the vhost certificate.
    let edge = Server::start_with(
        "rtmps-edge",
        ServerOptions {
            media: true,
            vhost_tls: Some((cert.clone(), key)),
            ..Default::default()
        },
    );
    // The origin trusts the edge's certificate (this test file runs one
    // test, so the variable reaches only this child).
    std::env::set_var("SSL_CERT_FILE", &cert);
    let origin = Server::start_media("rtmps-origin");
    std::env::remove_var("SSL_CERT_FILE");
    let push = |id: &str, url: String| {
        origin.request(
            "POST",
            "/v1/vhosts/default/apps/app:startPush",
            Some(&json!({"id": id, "stream": {"name": "cam"}, "protocol": "rtmp", "url": url, "streamKey": "relayed"}).to_string()),
        )
    };
    assert_eq!(
        push(
            "secure",
            format!("rtmps://localhost:{}/app", edge.media.rtmps)
        )
        .status,
        200
    );
    let mut ff = media::ffmpeg_source_cmd(
        8,
        "320x240",
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/cam", origin.media.rtmp),
    )
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let t0 = Instant::now();
    loop {
        let r = edge.request("GET", "/v1/vhosts/default/apps/app/streams/relayed", None);
        if r.status == 200
            && r.json()["response"]["input"]["tracks"]
                .as_array()
                .is_some_and(|t| media_count(t) == 2)
        {
            assert_eq!(r.json()["response"]["input"]["sourceType"], "Rtmps");
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "the relayed stream never reached the edge"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The edge does not trust its own certificate (no SSL_CERT_FILE):
    // pushing to itself over RTMPS fails on it, with the reason.
    let r = edge.request(
        "POST",
        "/v1/vhosts/default/apps/app:startPush",
        Some(
            &json!({"id": "untrusted", "stream": {"name": "relayed"}, "protocol": "rtmp",
            "url": format!("rtmps://localhost:{}/app", edge.media.rtmps), "streamKey": "loop"})
            .to_string(),
        ),
    );
    assert_eq!(r.status, 200);
    let t0 = Instant::now();
    loop {
        let r = edge.request(
            "POST",
            "/v1/vhosts/default/apps/app:pushes",
            Some(r#"{"id":"untrusted"}"#),
        );
        let t = r.json()["response"][0].clone();
        if t["state"] == "error" {
            let why = t["lastError"].as_str().unwrap_or("");
            assert!(why.to_lowercase().contains("certificate"), "{t}");
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "{t}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = ff.kill();
    let _ = ff.wait();
    let _ = std::fs::remove_dir_all(certs);
}
