//! Application endpoints (DECISIONS section 8) against the real binary:
//! list, get, create (batch rules), patch, delete, the read-only rule for
//! config-file hosts, durability, and "a change restarts the app".

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn make_vhost(s: &Server, name: &str) {
    let r = s.request(
        "POST",
        "/v1/vhosts",
        Some(
            &json!([{"name": name, "host": {"names": [format!("{name}.example.com")]}}])
                .to_string(),
        ),
    );
    assert_eq!(r.status, 200, "{}", r.body);
}

fn app_body(name: &str) -> Value {
    json!({
        "name": name,
        "type": "live",
        "outputProfiles": {"outputProfile": [{
            "name": "bypass",
            "outputStreamName": "${OriginStreamName}",
            "encodes": {"videos": [{"name": "v", "bypass": true}], "audios": [{"name": "a", "bypass": true}]}
        }]},
        "providers": {"rtmp": {}, "srt": {}},
        "publishers": {"push": {}}
    })
}

#[test]
fn config_apps_are_listed_and_read_only() {
    let s = Server::start("appsro");
    let r = s.request("GET", "/v1/vhosts/default/apps", None);
    assert_eq!(
        r.body,
        r#"{"statusCode":200,"message":"OK","response":["app"]}"#
    );
    let r = s.request("GET", "/v1/vhosts/default/apps/app", None);
    assert_eq!(r.status, 200);
    let app = r.json()["response"].clone();
    assert_eq!(app["name"], "app");
    assert_eq!(app["dynamic"], false);
    assert_eq!(app["type"], "live");
    assert_eq!(
        app["outputProfiles"]["outputProfile"][0]["encodes"]["videos"][0]["name"],
        "bypass_video"
    );
    assert_eq!(app["publishers"]["push"], json!({}));
    for (method, path, body) in [
        ("POST", "/v1/vhosts/default/apps", Some("[]")),
        ("PATCH", "/v1/vhosts/default/apps/app", Some("{}")),
        ("DELETE", "/v1/vhosts/default/apps/app", None),
    ] {
        let r = s.request(method, path, body);
        assert_eq!(r.status, 403, "{method} {path}");
        assert_eq!(
            r.message(),
            "[HTTP] The VirtualHost is read-only: [default] (403)"
        );
    }
    // a method the path does not take: 405 with Allow, even on a config host
    for (method, path, allow) in [
        (
            "PUT",
            "/v1/vhosts/default/apps/app:startPush",
            "POST, OPTIONS",
        ),
        (
            "PUT",
            "/v1/vhosts/default/apps/app/streams",
            "GET, POST, HEAD, OPTIONS",
        ),
        (
            "PUT",
            "/v1/vhosts/default/apps/app",
            "GET, PATCH, DELETE, HEAD, OPTIONS",
        ),
    ] {
        let r = s.request(method, path, Some("{}"));
        assert_eq!(r.status, 405, "{method} {path}");
        assert_eq!(r.header("Allow"), Some(allow), "{method} {path}");
    }
    let r = s.request("GET", "/v1/vhosts/default/apps/nope", None);
    assert_eq!(r.status, 404);
    assert_eq!(
        r.message(),
        "[HTTP] Could not find the application: [default/nope] (404)"
    );
    let r = s.request("GET", "/v1/vhosts/nope/apps", None);
    assert_eq!(
        r.message(),
        "[HTTP] Could not find the virtual host: [nope] (404)"
    );
    let r = s.request("GET", "/v1/vhosts/default/apps/app/streams/none", None);
    assert_eq!(
        r.message(),
        "[HTTP] Could not find the stream: [default/#default#app/none] (404)"
    );
    assert_eq!(
        s.request("GET", "/v1/vhosts/default/apps/app/streams", None)
            .body,
        r#"{"statusCode":200,"message":"OK","response":[]}"#
    );
}

#[test]
fn create_patch_delete_and_survive_a_restart() {
    let mut s = Server::start("appscrud");
    make_vhost(&s, "studio");
    let body = json!([app_body("live"), app_body("live"), {"name": "bad name"},
        {"name": "tc", "outputProfiles": {"outputProfile": [{"name": "p", "encodes": {"audios": [{"name": "opus", "codec": "opus", "bitrate": 128000}]}}]}}]);
    let r = s.request("POST", "/v1/vhosts/studio/apps", Some(&body.to_string()));
    assert_eq!(r.status, 207, "{}", r.body);
    let v = r.json();
    assert_eq!(v[0]["statusCode"], 200);
    assert_eq!(v[0]["response"]["dynamic"], true);
    assert_eq!(v[1]["statusCode"], 409);
    assert_eq!(
        v[1]["message"],
        "The application already exists: [studio/live]"
    );
    assert_eq!(v[2]["statusCode"], 400);
    assert_eq!(v[3]["statusCode"], 400);
    assert!(
        v[3]["message"]
            .as_str()
            .unwrap()
            .contains("does not transcode"),
        "{}",
        v[3]
    );

    // PATCH merges into the application as OME does: what it names
    // changes (null removes), the rest stays (SRT stays on).
    let r = s.request(
        "PATCH",
        "/v1/vhosts/studio/apps/live",
        Some(r#"{"publishers":{"push":null},"providers":{"rtmp":{"blockDuplicateStreamName":"false"}}}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let app = r.json()["response"].clone();
    assert!(app["publishers"].get("push").is_none(), "{app}");
    assert_eq!(app["providers"]["srt"], json!({}), "{app}");
    // OME's string form, both ways.
    assert_eq!(
        app["providers"]["rtmp"]["blockDuplicateStreamName"],
        "false"
    );
    assert_eq!(app["outputProfiles"]["outputProfile"][0]["name"], "bypass");
    // kiln's disk budget, as <DiskBudget> in a config file.
    let r = s.request(
        "PATCH",
        "/v1/vhosts/studio/apps/live",
        Some(r#"{"diskBudget":{"maxTotalMB":50,"minFreeMB":200}}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["response"]["diskBudget"],
        json!({"maxTotalMB": 50, "minFreeMB": 200})
    );
    for body in [
        r#"{"name":"other"}"#,
        r#"{"name":"live"}"#,
        r#"{"dynamic":true}"#,
    ] {
        let r = s.request("PATCH", "/v1/vhosts/studio/apps/live", Some(body));
        assert_eq!(r.status, 400, "{body}");
        assert!(r.message().contains("using this API"), "{}", r.body);
    }
    let r = s.request(
        "PATCH",
        "/v1/vhosts/studio/apps/live",
        Some(r#"{"colour":1}"#),
    );
    assert_eq!(r.status, 400);
    assert!(r.message().contains("colour"));

    // Push is now off for it: 404 with DECISIONS' text.
    let r = s.request(
        "POST",
        "/v1/vhosts/studio/apps/live:startPush",
        Some(r#"{"id":"x","stream":{"name":"s"},"protocol":"mpegts","url":"udp://127.0.0.1:9"}"#),
    );
    assert_eq!(r.status, 404);
    assert_eq!(
        r.message(),
        "[HTTP] Push publishing is not enabled for the application: [studio/live] (404)"
    );

    // A second app, then a restart: both come back as they were.
    let r = s.request(
        "POST",
        "/v1/vhosts/studio/apps",
        Some(&json!([app_body("backup")]).to_string()),
    );
    assert_eq!(r.status, 200);
    let before = s.request("GET", "/v1/vhosts/studio/apps/live", None).body;
    s.terminate();
    s.spawn();
    assert_eq!(
        s.request("GET", "/v1/vhosts/studio/apps", None).json()["response"],
        json!(["live", "backup"])
    );
    assert_eq!(
        s.request("GET", "/v1/vhosts/studio/apps/live", None).body,
        before
    );

    // Delete one; its push tasks go with it.
    let r = s.request(
        "POST",
        "/v1/vhosts/studio/apps/backup:startPush",
        Some(r#"{"id":"p","stream":{"name":"s"},"protocol":"mpegts","url":"udp://127.0.0.1:9"}"#),
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        s.request("DELETE", "/v1/vhosts/studio/apps/backup", None)
            .status,
        200
    );
    assert_eq!(
        s.request("GET", "/v1/vhosts/studio/apps/backup", None)
            .status,
        404
    );
    let r = s.request(
        "POST",
        "/v1/vhosts/studio/apps",
        Some(&json!([app_body("backup")]).to_string()),
    );
    assert_eq!(r.status, 200);
    let r = s.request("POST", "/v1/vhosts/studio/apps/backup:pushes", None);
    assert_eq!(r.json()["response"], json!([]));
    // Applications given with the host at creation.
    let r = s.request(
        "POST",
        "/v1/vhosts",
        Some(&json!([{"name": "withapps", "host": {"names": ["w.example.com"]}, "applications": [app_body("x")]}]).to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        s.request("GET", "/v1/vhosts/withapps/apps", None).json()["response"],
        json!(["x"])
    );
}

#[test]
fn changing_an_app_disconnects_its_publishers() {
    if !have_tool("ffmpeg") {
        return;
    }
    let s = Server::start_media("appsrestart");
    make_vhost(&s, "studio");
    let r = s.request(
        "POST",
        "/v1/vhosts/studio/apps",
        Some(&json!([app_body("live")]).to_string()),
    );
    assert_eq!(r.status, 200);
    let url = format!(
        "srt://127.0.0.1:{}?streamid=studio/live/cam&pkt_size=1316",
        s.media.srt
    );
    let mut ff = media::ffmpeg_source_cmd(30, "320x240", &[], "mpegts", &url)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let seen = |s: &Server| {
        s.request("GET", "/v1/vhosts/studio/apps/live/streams/cam", None)
            .status
            == 200
    };
    let t0 = Instant::now();
    while !seen(&s) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the stream never showed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = s.request(
        "PATCH",
        "/v1/vhosts/studio/apps/live",
        Some(r#"{"publishers":{}}"#),
    );
    assert_eq!(r.status, 200);
    // The app restarted: its publisher is gone at once.
    assert!(!seen(&s), "the stream outlived its app's restart");
    let _ = ff.kill();
    let _ = ff.wait();
}

/// OME's output-profile endpoints: list, create (batch), get, patch,
/// delete; bypass (or conditional-bypass) encodes only; 409 for a taken
/// name, 404 for an unknown one, 403 on a config-file host; a change
/// restarts the application and survives a restart of kiln.
#[test]
fn output_profile_endpoints() {
    let mut s = Server::start("profiles");
    make_vhost(&s, "studio");
    let r = s.request(
        "POST",
        "/v1/vhosts/studio/apps",
        Some(&json!([app_body("live")]).to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let base = "/v1/vhosts/studio/apps/live/outputProfiles";
    let r = s.request("GET", base, None);
    assert_eq!(r.status, 200);
    let before: Vec<Value> = r.json()["response"].as_array().unwrap().clone();
    let body = json!([
        {"name": "hd", "outputStreamName": "${OriginStreamName}_hd",
         "encodes": {"videos": [{"name": "v", "bypass": true}],
                     "audios": [{"name": "a", "codec": "aac", "bypassIfMatch": {"codec": "eq"}}]}},
        {"name": "hd", "outputStreamName": "x", "encodes": {"audios": [{"name": "a2", "bypass": "true"}]}},
        {"name": "tc", "outputStreamName": "x", "encodes": {"videos": [{"name": "x", "codec": "h264", "width": 1280}]}}
    ]);
    let r = s.request("POST", base, Some(&body.to_string()));
    assert_eq!(r.status, 207, "{}", r.body);
    let v = r.json();
    assert_eq!(v[0]["statusCode"], 200);
    assert_eq!(v[0]["response"]["name"], "hd");
    assert_eq!(v[1]["statusCode"], 409);
    assert_eq!(v[2]["statusCode"], 400);
    assert!(v[2]["message"]
        .as_str()
        .unwrap()
        .contains("does not transcode"));
    let r = s.request("GET", base, None);
    assert_eq!(
        r.json()["response"].as_array().unwrap().len(),
        before.len() + 1
    );
    let r = s.request("GET", &format!("{base}/hd"), None);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json()["response"]["outputStreamName"],
        "${OriginStreamName}_hd"
    );
    let r = s.request(
        "PATCH",
        &format!("{base}/hd"),
        Some(r#"{"outputStreamName":"${OriginStreamName}_high"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["response"]["outputStreamName"],
        "${OriginStreamName}_high"
    );
    // OME refuses a PATCH naming the profile, and a profile without
    // encodes, in its words.
    let r = s.request("PATCH", &format!("{base}/hd"), Some(r#"{"name":"hd"}"#));
    assert_eq!(r.status, 400);
    assert_eq!(
        r.message(),
        "[HTTP] The name entry cannot be specified in the modification (400)"
    );
    for (body, text) in [
        (
            json!([{"name": "e", "outputStreamName": "x"}]),
            "\"name\", \"outputStreamName\", \"encodes\" are required",
        ),
        (
            json!([{"name": "e", "outputStreamName": "x", "encodes": {}}]),
            "\"encodes\" must have at least one item",
        ),
        (
            json!([{"name": "e", "outputStreamName": "x", "encodes": {"videos": []}}]),
            "each item must have at least one item",
        ),
    ] {
        let r = s.request("POST", base, Some(&body.to_string()));
        assert_eq!(r.status, 400, "{body}");
        assert!(r.message().contains(text), "{body}: {}", r.body);
    }
    let r = s.request("GET", &format!("{base}/nope"), None);
    assert_eq!(r.status, 404);
    assert_eq!(
        r.message(),
        "[HTTP] Could not find the output profile: [studio/live/nope] (404)"
    );
    assert!(s
        .log_text()
        .contains("output profiles of [studio/live] changed"));
    // kept across a restart
    s.kill9();
    s.spawn();
    let r = s.request("GET", &format!("{base}/hd"), None);
    assert_eq!(
        r.json()["response"]["outputStreamName"],
        "${OriginStreamName}_high"
    );
    assert_eq!(s.request("DELETE", &format!("{base}/hd"), None).status, 200);
    assert_eq!(s.request("GET", &format!("{base}/hd"), None).status, 404);
    // config-file hosts are read-only; the listing still works
    let r = s.request("GET", "/v1/vhosts/default/apps/app/outputProfiles", None);
    assert_eq!(r.json()["response"], json!(["bypass"]));
    let r = s.request(
        "DELETE",
        "/v1/vhosts/default/apps/app/outputProfiles/bypass",
        None,
    );
    assert_eq!(r.status, 403);
}

/// Issue 28, 6.7: an encode without a name is named as the config file names
/// it (video_0, audio_0); a bad field is refused naming its path.
#[test]
fn nameless_encodes_are_named_and_errors_name_the_field_path() {
    let s = Server::start("apps-encodes");
    make_vhost(&s, "studio");
    let body = serde_json::json!([{
        "name": "enc",
        "outputProfiles": {"outputProfile": [{"name": "p", "encodes": {
            "videos": [{"bypass": true}], "audios": [{"bypass": true}]}}]}
    }]);
    let r = s.request("POST", "/v1/vhosts/studio/apps", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    let r = s.request("GET", "/v1/vhosts/studio/apps/enc", None);
    let encodes = &r.json()["response"]["outputProfiles"]["outputProfile"][0]["encodes"];
    assert_eq!(encodes["videos"][0]["name"], "video_0", "{}", r.body);
    assert_eq!(encodes["audios"][0]["name"], "audio_0", "{}", r.body);
    let bad = serde_json::json!([{
        "name": "bad",
        "outputProfiles": {"outputProfile": [{"name": "p", "encodes": {"videos": [{"bypass": "yes"}]}}]}
    }]);
    let r = s.request("POST", "/v1/vhosts/studio/apps", Some(&bad.to_string()));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body
            .contains("outputProfiles.outputProfile[0].encodes.videos[0].bypass: invalid type"),
        "{}",
        r.body
    );
}
