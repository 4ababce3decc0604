//! Streams in, from real publishers: ffmpeg over RTMP, RTMPS (checking the
//! vhost certificate) and MPEG-TS over UDP. Each stream must show in the API
//! with its codecs, size and sample rate, and go when the publisher stops.
//! Hostile bytes on every media port never stop the server.

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use serde_json::Value;
use std::io::Write;
use std::time::Duration;

fn check_tracks(v: &Value, source: &str) {
    assert_eq!(v["input"]["sourceType"], source);
    let tracks = v["input"]["tracks"].as_array().unwrap();
    let video = tracks
        .iter()
        .find(|t| t["type"] == "Video")
        .expect("video track");
    assert_eq!(video["video"]["codec"], "H264");
    assert_eq!(video["video"]["width"], 640);
    assert_eq!(video["video"]["height"], 360);
    assert_eq!(video["video"]["framerate"], 25.0);
    let audio = tracks
        .iter()
        .find(|t| t["type"] == "Audio")
        .expect("audio track");
    assert_eq!(audio["audio"]["codec"], "AAC");
    assert_eq!(audio["audio"]["samplerate"], 48000);
    assert_eq!(audio["audio"]["channel"], 2);
    // The output carries the encode names of the output profile.
    let out = &v["outputs"][0];
    let names: Vec<&str> = out["tracks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"bypass_video") && names.contains(&"bypass_audio"),
        "{names:?}"
    );
}

fn wait_gone(s: &Server, name: &str) {
    wait_until(Duration::from_secs(10), || {
        s.live_stream(name).is_none().then_some(())
    })
    .unwrap_or_else(|| panic!("stream {name} did not go away"));
}

#[test]
fn rtmp_stream_appears_and_goes() {
    if !have_tool("ffmpeg") {
        return;
    }
    let s = Server::start_media("rtmp");
    let url = format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp);
    let mut ff = ffmpeg_source(3, &[], "flv", &url);
    let v = s.wait_for_tracks("cam");
    check_tracks(&v, "Rtmp");
    let list = s
        .request("GET", "/v1/vhosts/default/apps/app/streams", None)
        .json();
    assert_eq!(list["response"], serde_json::json!(["cam"]));
    assert!(ff.wait().unwrap().success());
    wait_gone(&s, "cam");
}

#[test]
fn rtmp_second_publisher_and_unknown_app_are_refused() {
    if !have_tool("ffmpeg") {
        return;
    }
    let s = Server::start_media("rtmprefuse");
    let url = format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp);
    let mut first = ffmpeg_source(6, &[], "flv", &url);
    s.wait_for_tracks("cam");
    let second = ffmpeg_source(2, &[], "flv", &url)
        .wait_with_output()
        .unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("already being published"), "{err}");
    let unknown = ffmpeg_source(
        1,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/nope/cam", s.media.rtmp),
    )
    .wait_with_output()
    .unwrap();
    assert!(!unknown.status.success());
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        err.contains("Could not find the application: [default/nope]"),
        "{err}"
    );
    // the first publisher was not disturbed
    assert!(s.live_stream("cam").is_some());
    let _ = first.kill();
    let _ = first.wait();
    wait_gone(&s, "cam");
}

#[test]
fn rtmps_uses_the_vhost_certificate_and_sees_reloads() {
    if !have_tool("ffmpeg") {
        return;
    }
    let certs = temp_dir("rtmps-certs");
    let (cert, key) = make_cert(&certs, "vhost");
    let old_ca = certs.join("old-ca.pem");
    std::fs::copy(&cert, &old_ca).unwrap();
    let s = Server::start_with(
        "rtmps",
        ServerOptions {
            media: true,
            vhost_tls: Some((cert.clone(), key.clone())),
            ..Default::default()
        },
    );
    let url = format!("rtmps://localhost:{}/app/secure", s.media.rtmps);
    let old = old_ca.display().to_string();
    let verify = |ca: &str| -> Vec<String> {
        vec![
            "-tls_verify".into(),
            "1".into(),
            "-ca_file".into(),
            ca.to_string(),
        ]
    };
    let args = verify(&old);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut ff = ffmpeg_source(2, &args, "flv", &url);
    check_tracks(&s.wait_for_tracks("secure"), "Rtmps");
    assert!(ff.wait().unwrap().success());
    wait_gone(&s, "secure");

    // a new certificate, reloaded: new handshakes see it
    let (new_cert, new_key) = make_cert(&certs, "next");
    std::fs::copy(&new_cert, &cert).unwrap();
    std::fs::copy(&new_key, &key).unwrap();
    assert_eq!(
        s.request("POST", "/v1/vhosts/default:reloadCertificate", None)
            .status,
        200
    );
    let refused = ffmpeg_source(1, &args, "flv", &url)
        .wait_with_output()
        .unwrap();
    assert!(
        !refused.status.success(),
        "the old CA must no longer verify"
    );
    let new = new_cert.display().to_string();
    let args = verify(&new);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ok = ffmpeg_source(1, &args, "flv", &url)
        .wait_with_output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let _ = std::fs::remove_dir_all(certs);
}

#[test]
fn mpegts_udp_stream_appears_and_goes_after_quiet() {
    if !have_tool("ffmpeg") {
        return;
    }
    let s = Server::start_media("mpegts");
    let name = format!("ts_{}", s.media.mpegts);
    let url = format!("udp://127.0.0.1:{}?pkt_size=1316", s.media.mpegts);
    let mut ff = ffmpeg_source(3, &[], "mpegts", &url);
    // The stream is listed only once its tracks are known: the first answer
    // that names it already has them.
    let first = wait_until(Duration::from_secs(10), || {
        let list = s.request("GET", "/v1/vhosts/default/apps/app/streams", None);
        list.json()["response"]
            .as_array()
            .is_some_and(|a| a.iter().any(|n| n == name.as_str()))
            .then(|| s.live_stream(&name))
            .flatten()
    })
    .expect("stream listed");
    assert!(
        media_count(first["input"]["tracks"].as_array().unwrap()) > 0,
        "listed before its tracks are known: {first}"
    );
    check_tracks(&s.wait_for_tracks(&name), "MpegTs");
    assert!(ff.wait().unwrap().success());
    // StreamTimeoutMs is 1000 in the test config
    wait_gone(&s, &name);
}

#[test]
fn hostile_bytes_on_media_ports_never_stop_the_server() {
    let s = Server::start_media("hostile");
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut noise = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect()
    };
    // RTMP: random bytes, a truncated handshake, a valid C0 then garbage.
    for payload in [noise(4096), vec![3u8; 700], {
        let mut v = vec![3u8];
        v.extend(noise(1536));
        v.extend(noise(3000));
        v
    }] {
        if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", s.media.rtmp)) {
            let _ = c.write_all(&payload);
        }
        assert_eq!(s.request("GET", "/v1/vhosts", None).status, 200);
    }
    // UDP: random datagrams and half TS packets on the MPEG-TS and SRT ports.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..300 {
        let mut d = noise(1 + (i * 37) % 1400);
        if i % 3 == 0 {
            d[0] = 0x47;
        }
        let _ = udp.send_to(&d, ("127.0.0.1", s.media.mpegts));
        let _ = udp.send_to(&d, ("127.0.0.1", s.media.srt));
    }
    assert_eq!(s.request("GET", "/v1/vhosts", None).status, 200);
    // and a real publisher still works afterwards
    if have_tool("ffmpeg") {
        let url = format!("rtmp://127.0.0.1:{}/app/after", s.media.rtmp);
        let mut ff = ffmpeg_source(2, &[], "flv", &url);
        s.wait_for_tracks("after");
        let _ = ff.wait();
    }
}
