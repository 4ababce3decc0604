//! Hostile channel specs (issue 40, findings 6 to 9), through the API and
//! the schedule folder of a real kiln: a channel that plays itself (or two
//! that play each other), durations that wrap, a FIFO as a media item, and
//! an API-made app that would read files from anywhere.

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::wait_until;
use serde_json::json;
use std::time::{Duration, Instant};

fn channel_server(tag: &str, media: &std::path::Path, sch: &std::path::Path) -> Server {
    Server::start_with(
        tag,
        ServerOptions {
            media: true,
            llhls: Some(String::new()),
            providers_extra: format!(
                "<Schedule><MediaRootDir>{}</MediaRootDir><ScheduleFilesDir>{}</ScheduleFilesDir></Schedule>",
                media.display(),
                sch.display()
            ),
            ..Default::default()
        },
    )
}

fn post_channel(s: &Server, body: serde_json::Value) -> HttpResponse {
    s.request(
        "POST",
        "/v1/vhosts/default/apps/app/scheduledChannels",
        Some(&body.to_string()),
    )
}

fn live_item(name: &str, stream: &str) -> serde_json::Value {
    json!({
        "stream": {"name": name},
        "fallbackProgram": {"items": [{"url": format!("stream://default/app/{stream}")}]}
    })
}

fn threads(s: &Server) -> u64 {
    let pid = s.child.as_ref().expect("running").id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Findings 6 and 7: a channel fed its own output, directly or through
/// another channel, is refused (API 400, a `.sch` file not applied), and
/// so is a duration that would wrap the clock.
#[test]
fn channels_that_play_themselves_and_endless_durations_are_refused() {
    let dir = temp_dir("hostile-channels-loop");
    let (media, sch) = (dir.join("media"), dir.join("sch"));
    std::fs::create_dir_all(&media).unwrap();
    std::fs::create_dir_all(&sch).unwrap();
    let s = channel_server("hostile-channels-loop", &media, &sch);
    let r = post_channel(&s, live_item("selfie", "selfie"));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body
            .contains("own output: default/app/selfie -> default/app/selfie"),
        "{}",
        r.body
    );
    // a reads b (not a channel yet): fine; then b reading a closes a loop.
    assert_eq!(post_channel(&s, live_item("a", "b")).status, 201);
    let r = post_channel(&s, live_item("b", "a"));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body
            .contains("default/app/b -> default/app/a -> default/app/b"),
        "{}",
        r.body
    );
    // The same loop from the schedule folder: the file is not applied.
    std::fs::write(
        sch.join("b.sch"),
        "<Schedule><Stream><Name>b</Name></Stream><FallbackProgram><Item url=\"stream://default/app/a\"/></FallbackProgram></Schedule>",
    )
    .unwrap();
    let warned = wait_until(Duration::from_secs(10), || {
        s.log_text()
            .contains("would play its own output")
            .then_some(())
    });
    assert!(warned.is_some(), "{}", s.log_text());
    let list = s.request("GET", "/v1/vhosts/default/apps/app/scheduledChannels", None);
    assert_eq!(list.json()["response"], json!(["a"]), "{}", list.body);
    // A PATCH that makes a loop is refused too.
    let r = s.request(
        "PATCH",
        "/v1/vhosts/default/apps/app/scheduledChannels/a",
        Some(
            &json!({"fallbackProgram": {"items": [{"url": "stream://default/app/a"}]}}).to_string(),
        ),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    // Durations past 366 days (i64::MAX wrapped the clock before).
    let r = post_channel(
        &s,
        json!({"stream": {"name": "long"},
               "fallbackProgram": {"items": [{"url": "file://x.mp4", "duration": i64::MAX}]}}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("at most"), "{}", r.body);
}

/// Finding 8: a FIFO named as a media item fails at once ("not a regular
/// file") and leaves no thread behind, however often it is retried.
#[test]
fn a_fifo_as_a_media_item_holds_no_thread() {
    if !have_tool("mkfifo") {
        eprintln!("SKIP: mkfifo is missing");
        return;
    }
    let dir = temp_dir("hostile-channels-fifo");
    let (media, sch) = (dir.join("media"), dir.join("sch"));
    std::fs::create_dir_all(&media).unwrap();
    std::fs::create_dir_all(&sch).unwrap();
    run("mkfifo", &[media.join("pipe.mp4").display().to_string()]).unwrap();
    let s = channel_server("hostile-channels-fifo", &media, &sch);
    let r = post_channel(
        &s,
        json!({"stream": {"name": "piped"},
               "fallbackProgram": {"items": [{"url": "file://pipe.mp4"}]}}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    // The first try is over (the directory watcher's thread has started
    // too); then it is retried every 5 s: three more tries in 12 s, each
    // of which held a thread for good before.
    std::thread::sleep(Duration::from_secs(2));
    let before = threads(&s);
    let start = Instant::now();
    let mut most = before;
    while start.elapsed() < Duration::from_secs(12) {
        most = most.max(threads(&s));
        std::thread::sleep(Duration::from_millis(200));
    }
    let after = threads(&s);
    eprintln!("RELIABILITY: a FIFO as a channel's media item, retried for 12 s: kiln threads {before} -> at most {most}, {after} after");
    assert!(
        s.log_text().contains("not a regular file"),
        "{}",
        s.log_text()
    );
    // A reader thread lives only while it fails (it exits at once).
    assert!(after <= before, "threads {before} -> {after}");
}

/// Finding 9: an application made through the API reads channel files
/// only under a folder the config file names.
#[test]
fn api_apps_read_channel_files_only_under_config_folders() {
    let dir = temp_dir("hostile-channels-roots");
    let (media, sch) = (dir.join("media"), dir.join("sch"));
    std::fs::create_dir_all(media.join("shows")).unwrap();
    std::fs::create_dir_all(&sch).unwrap();
    let s = channel_server("hostile-channels-roots", &media, &sch);
    let r = s.request(
        "POST",
        "/v1/vhosts",
        Some(&json!([{"name": "studio", "host": {"names": ["studio.example.com"]}}]).to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let app = |name: &str, root: &str, files: &str| {
        json!([{"name": name, "providers": {"schedule": {
            "mediaRootDir": root, "scheduleFilesDir": files}}}])
        .to_string()
    };
    let r = s.request(
        "POST",
        "/v1/vhosts/studio/apps",
        Some(&app("anywhere", "/", "/etc")),
    );
    assert!(
        r.body.contains("400") && r.body.contains("mediaRootDir"),
        "{}",
        r.body
    );
    let inside = media.join("shows").display().to_string();
    let r = s.request(
        "POST",
        "/v1/vhosts/studio/apps",
        Some(&app("shows", &inside, &sch.display().to_string())),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // Leaving by `..` is leaving.
    let escape = format!("{}/../..", media.display());
    let r = s.request(
        "PATCH",
        "/v1/vhosts/studio/apps/shows",
        Some(&json!({"providers": {"schedule": {"mediaRootDir": escape}}}).to_string()),
    );
    assert_eq!(r.status, 400, "{}", r.body);
}

/// Issue 42: the media and schedule folders a config names are made at
/// start when missing (and logged), not left for the operator to guess.
#[test]
fn missing_channel_folders_are_made_at_start() {
    let dir = temp_dir("channels-folders");
    let (media, sch) = (dir.join("new-media"), dir.join("new-sch"));
    let s = channel_server("channels-folders", &media, &sch);
    let made = wait_until(Duration::from_secs(10), || {
        (media.is_dir() && sch.is_dir()).then_some(())
    });
    assert!(made.is_some(), "{}", s.log_text());
    let log = s.log_text();
    assert!(
        log.contains("made the folder") && log.contains("media files"),
        "{log}"
    );
}
