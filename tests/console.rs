//! The operator console at /console/, in headless Chromium driven by
//! puppeteer-core (`tests/web/console_check.mjs`): an operator logs in
//! through the form (a wrong token is said to be wrong), sees the live
//! stream and its bit-rate graph fill, starts a push from the form and sees
//! it reach `pushing` on its state strip; text carrying markup is shown as
//! text; screenshots at 1280x900 and 360x740 are kept as artifacts. And
//! what the page relies on from the API: no Basic challenge for its
//! requests, the log endpoint, the page's weight.

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The page's three files, as served.
fn page_weight(s: &Server) -> usize {
    ["/console/", "/console/console.js", "/console/console.css"]
        .iter()
        .map(|p| {
            let r = s.request_with("GET", p, &[], None);
            assert_eq!(r.status, 200, "{p}");
            r.body.len()
        })
        .sum()
}

#[test]
fn the_page_is_static_small_and_its_requests_raise_no_browser_prompt() {
    let s = Server::start("console-api");
    let r = s.request_with("GET", "/console/", &[], None);
    assert_eq!(r.status, 200);
    assert!(r.header("Content-Type").unwrap().starts_with("text/html"));
    let csp = r.header("Content-Security-Policy").unwrap();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    assert_eq!(s.request_with("GET", "/console", &[], None).status, 301);
    let weight = page_weight(&s);
    println!("console page: {weight} bytes (HTML + JS + CSS)");
    assert!(weight < 60 * 1024, "the page weighs {weight} bytes");
    // A plain client is challenged (curl, a browser opening the API);
    // the console's requests are not, so the browser shows no prompt.
    let plain = s.request_with("GET", "/v1/version", &[], None);
    assert_eq!(plain.status, 401);
    assert!(plain.header("WWW-Authenticate").is_some());
    let script = s.request_with(
        "GET",
        "/v1/version",
        &[
            ("X-Requested-With", "kiln-console"),
            ("Authorization", "Basic a2lsbjp3cm9uZw=="),
        ],
        None,
    );
    assert_eq!(script.status, 401);
    assert!(script.header("WWW-Authenticate").is_none());
    // The log endpoint: authenticated, WARN and ERROR lines only.
    assert_eq!(s.request_with("GET", "/v1/logs", &[], None).status, 401);
    let dead = free_port();
    let r = s.start_push(
        json!({"id":"dead","stream":{"name":"cam"},"protocol":"rtmp",
        "url":format!("rtmp://127.0.0.1:{dead}/live"),"streamKey":"k"}),
    );
    assert_eq!(r.status, 200);
    let logs = s.request("GET", "/v1/logs", None).json();
    let lines = logs["response"].as_array().unwrap();
    assert!(lines.len() <= 200);
    for l in lines {
        assert!(l["level"] == "WARN" || l["level"] == "ERROR", "{l}");
        assert!(l["time"].as_str().unwrap().contains('T'), "{l}");
    }
}

fn node_with_puppeteer() -> Option<std::path::PathBuf> {
    let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web");
    if !have_tool("node") || !have_tool("chromium") {
        return None;
    }
    if !web.join("node_modules/puppeteer-core").exists() {
        if std::env::var("KILN_REQUIRE_INTEROP").as_deref() == Ok("1") {
            panic!(
                "puppeteer-core is required (KILN_REQUIRE_INTEROP=1): npm ci --prefix tests/web"
            );
        }
        eprintln!("SKIP: puppeteer-core is not installed (npm ci --prefix tests/web)");
        return None;
    }
    Some(web.join("console_check.mjs"))
}

#[test]
fn an_operator_logs_in_watches_a_stream_and_starts_a_push_in_a_real_browser() {
    let Some(script) = node_with_puppeteer() else {
        return;
    };
    if !have_tool("ffmpeg") {
        return;
    }
    // With WebRTC: the preview plays over WHEP.
    let s = Server::start_with(
        "console",
        ServerOptions {
            media: true,
            llhls: Some(String::new()),
            webrtc: Some(String::new()),
            ..Default::default()
        },
    );
    let mut src = ffmpeg_source(
        60,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
    );
    s.wait_for_tracks("cam");
    // A push whose URL carries markup (a caller's text): shown as text.
    let r = s.start_push(
        json!({"id":"markup","stream":{"name":"cam"},"protocol":"rtmp",
        "url":format!("rtmp://127.0.0.1:{}/<img src=x onerror=window.pwned=1>", free_port()),
        "streamKey":"k"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // A persistent pull whose camera is down: listed with its state.
    let r = s.request(
        "POST",
        "/v1/vhosts/default/apps/app/streams",
        Some(
            &json!({"name":"door","urls":[format!("rtsp://127.0.0.1:{}/cam", free_port())],
            "properties":{"persistent":true}})
            .to_string(),
        ),
    );
    assert_eq!(r.status, 502, "{}", r.body);
    // kiln keeps the last five minutes of what the console
    // graphs; a page opened now starts with them.
    let history = wait_until(Duration::from_secs(30), || {
        let r = s.request("GET", "/v1/stats/history", None);
        let h = r.json()["response"].clone();
        let n = h["series"]["in:default/app/cam"].as_array().map_or(0, |a| {
            a.iter()
                .filter(|v| v.as_f64().is_some_and(|b| b > 0.0))
                .count()
        });
        (n >= 2).then_some(h)
    })
    .expect("no input bit rate history");
    assert_eq!(history["intervalMs"], 5000);
    let series = &history["series"];
    let fps = series["fps:default/app/cam"].as_array().unwrap();
    assert!(
        fps.iter()
            .any(|v| v.as_f64().is_some_and(|f| (24.0..=26.0).contains(&f))),
        "{history}"
    );
    assert!(
        series["push:default/app/markup"][0].is_string(),
        "{history}"
    );
    assert!(series["pull:default/app/door"][0].is_string(), "{history}");
    assert!(series["viewers:llhls"][0].is_number(), "{history}");
    let udp = format!("udp://127.0.0.1:{}", free_udp_port());
    let chromium = Command::new("sh")
        .args(["-c", "command -v chromium"])
        .output()
        .unwrap();
    let chromium = String::from_utf8_lossy(&chromium.stdout).trim().to_string();
    let out = Command::new("node")
        .env("CHROMIUM", chromium)
        .arg(&script)
        .arg(format!("http://127.0.0.1:{}", s.port))
        .arg(TOKEN)
        .arg(&s.dir)
        .arg(&udp)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout.lines().last().unwrap_or("");
    let seen: serde_json::Value = serde_json::from_str(line)
        .unwrap_or_else(|_| panic!("no result from the browser:\n{stdout}\n{stderr}"));
    assert!(seen.get("error").is_none(), "{seen:#}\n{stderr}");
    println!("the browser saw: {seen}");
    assert!(seen["loginHint"].as_str().unwrap().contains("AccessToken"));
    assert!(seen["wrongToken"]
        .as_str()
        .unwrap()
        .contains("Wrong access token"));
    // The token is in this tab's session storage, never the URL.
    assert!(!seen["url"].as_str().unwrap().contains("kiln"), "{seen}");
    assert_eq!(seen["storage"], json!({"session": true, "local": 0}));
    // The graph began with the server's samples (5 poll points each), not
    // empty.
    assert!(seen["bitratePoints"].as_u64().unwrap() >= 10, "{seen}");
    let row = seen["streamRow"].as_str().unwrap();
    assert!(
        row.contains("H264 640x360") && row.contains("AAC 48000 Hz"),
        "{row}"
    );
    // The live preview played over WebRTC and closed again.
    let p = &seen["preview"];
    assert_eq!(p["width"], 640, "{seen}");
    assert!(p["frames"].as_u64().unwrap() > 10, "{seen}");
    assert!(p["status"].as_str().unwrap().contains("WebRTC"), "{seen}");
    assert_eq!(seen["previewHidden"], true);
    // The stream's sessions, one ended by its button.
    let sessions = seen["sessions"].to_string();
    assert!(
        sessions.contains("\"publisher\"") && sessions.contains("\"webrtc-"),
        "{seen}"
    );
    let after = seen["sessionsAfterEnd"].to_string();
    assert!(
        after.contains("\"publisher\"") && !after.contains("webrtc-"),
        "{seen}"
    );
    assert!(seen["pushRow"].as_str().unwrap().contains("pushing"));
    // The push made from the form was a real one, and the page's second
    // tap on its Stop stopped it.
    let left = s.push_task("from-form");
    assert!(
        left.as_ref().is_none_or(|p| p["state"] == "stopped"),
        "{left:?}"
    );
    assert!(seen["markupRow"]
        .as_str()
        .unwrap()
        .contains("<img src=x onerror=window.pwned=1>"));
    assert_eq!(seen["markupImages"], 0);
    assert_eq!(seen["pwned"], serde_json::Value::Null);
    let pull = seen["pullRow"].as_str().unwrap();
    assert!(
        (pull.contains("waiting") || pull.contains("connecting")) && pull.contains("persistent"),
        "{pull}"
    );
    assert!(seen["logLines"].as_u64().unwrap() > 0);
    assert!(seen["viewersGraph"].as_u64().unwrap() > 0);
    assert!(
        seen["phoneOverflow"].as_i64().unwrap() <= 0,
        "the page is wider than a 360 px screen: {seen}"
    );
    // On a phone every table is cards, each action in view.
    assert_eq!(seen["phoneTables"], json!([]), "{seen}");
    let buttons = seen["phoneButtons"].as_array().unwrap();
    assert!(buttons.len() >= 3, "{seen}");
    assert!(
        buttons.iter().all(|b| b["inView"] == true),
        "actions off-screen: {seen}"
    );
    // What ends a broadcast or a task is asked first.
    assert_eq!(
        seen["publisherEndOnce"], "End the broadcast? Tap again",
        "{seen}"
    );
    assert_eq!(
        seen["stopOnce"],
        json!({"button": "Stop push from-form? Tap again", "pushing": true}),
        "{seen}"
    );
    let live = s.request("GET", "/v1/vhosts/default/apps/app/streams/cam", None);
    assert_eq!(live.status, 200, "the broadcast still runs");
    // kiln's own version, and the OME API release it speaks as such.
    assert_eq!(
        seen["version"],
        format!("kiln {} · OME API 0.20.0", env!("CARGO_PKG_VERSION")),
        "{seen}"
    );
    // Only what the app enables (Push, no FILE here), asked
    // for and shown; nothing the page asks for is missing (no 404).
    let parts = seen["appParts"].to_string();
    assert!(
        parts.contains("Push tasks") && !parts.contains("Recordings"),
        "{parts}"
    );
    assert_eq!(seen["missing"], json!([]), "404s in the browser: {seen}");
    // The streams table fits at 1280 px (graphs and labels whole).
    assert!(seen["streamsOverflow"].as_i64().unwrap() <= 0, "{seen}");
    // Preview from far down the page: the player is in view, focused.
    let v = &seen["previewInView"];
    assert!(
        v["top"].as_i64().unwrap() >= 0 && v["top"].as_i64() < v["height"].as_i64(),
        "{seen}"
    );
    assert_eq!(v["focused"], true, "{seen}");
    // On a phone the stream comes before the overview graph.
    let o = &seen["phoneOrder"];
    assert!(o["stream"].as_i64() < o["overview"].as_i64(), "{seen}");
    assert_eq!(
        seen["errors"],
        json!([]),
        "script errors or dialogs on the page"
    );
    for shot in ["console-1280x900.png", "console-360x740.png"] {
        let size = std::fs::metadata(s.dir.join(shot)).map_or(0, |m| m.len());
        assert!(size > 10_000, "{shot}: {size} bytes");
        let keep = std::env::temp_dir().join(format!("kiln-{shot}"));
        std::fs::copy(s.dir.join(shot), &keep).unwrap();
        eprintln!("console screenshot: {}", keep.display());
    }
    let _ = src.kill();
    let _ = src.wait();
}
