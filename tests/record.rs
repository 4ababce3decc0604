//! Recording (issue 13): ffmpeg publishes over RTMP, kiln records through
//! `:startRecord`, ffprobe reads what it wrote.

mod common;
#[path = "common/media.rs"]
mod media;

use common::*;
use media::*;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn record_server(tag: &str, wrap: Option<String>) -> (Server, PathBuf) {
    // The root is made before kiln starts (a test may mount over part of it).
    let root = temp_dir(&format!("{tag}-root"));
    let s = Server::start_with(
        tag,
        ServerOptions {
            media: true,
            file: Some(format!(
                "<RootPath>{}</RootPath><FilePath>${{Stream}}_${{Sequence}}.ts</FilePath><InfoPath>${{Stream}}.xml</InfoPath><MaxPreRoll>5000</MaxPreRoll>",
                root.display()
            )),
            wrap,
            ..Default::default()
        },
    );
    (s, root)
}

fn call(s: &Server, action: &str, body: Value) -> HttpResponse {
    s.request(
        "POST",
        &format!("/v1/vhosts/default/apps/app:{action}"),
        Some(&body.to_string()),
    )
}

fn record(s: &Server, id: &str) -> Option<Value> {
    let r = call(s, "records", json!({ "id": id })).json();
    r["response"].as_array()?.first().cloned()
}

/// ffmpeg's test pattern (25 fps, a keyframe a second, AAC, B-frames) as
/// fast as it encodes: `secs` of media in a few seconds.
fn publish_fast(s: &Server, stream: &str, secs: u32) -> std::process::ExitStatus {
    ffmpeg_fast_source_cmd(
        secs,
        &["-bf", "2"],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/{stream}", s.media.rtmp),
    )
    .status()
    .unwrap()
}

/// The `<file>` entries of an info XML: (filePath, recordBytes).
fn info_files(xml: &str) -> Vec<(String, u64)> {
    xml.split("<file>")
        .skip(1)
        .map(|f| {
            let field = |name: &str| {
                let open = format!("<{name}>");
                let at = f.find(&open).unwrap() + open.len();
                f[at..at + f[at..].find('<').unwrap()].to_string()
            };
            (field("filePath"), field("recordBytes").parse().unwrap())
        })
        .collect()
}

/// A minute split every 20 s: three files in each container, every frame
/// in them, and the info XML naming each with its size.
#[test]
fn a_minute_split_every_20_s_gives_three_playable_files() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let (s, root) = record_server("record-split", None);
    for (id, path) in [
        ("mp4", "split/${Stream}_${Sequence}.mp4"),
        ("ts", "split/${Stream}_${Sequence}.ts"),
    ] {
        let r = call(
            &s,
            "startRecord",
            json!({"id": id, "stream": {"name": "cam"}, "interval": 20000,
                   "filePath": path, "infoPath": format!("split/{id}.xml")}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        // Reserved: the stream does not exist yet.
        // One object, as OME answers (not an array).
        assert_eq!(r.json()["response"]["state"], "ready");
    }
    assert!(publish_fast(&s, "cam", 60).success());
    for ext in ["mp4", "ts"] {
        let info = root.join(format!("split/{ext}.xml"));
        let xml = wait_until(Duration::from_secs(20), || {
            std::fs::read_to_string(&info)
                .ok()
                .filter(|x| x.matches("<file>").count() == 3)
        })
        .unwrap_or_else(|| panic!("{ext}: no info with three files\n{}", s.log_text()));
        let files = info_files(&xml);
        let mut video = 0;
        let mut audio = 0;
        for (i, (path, bytes)) in files.iter().enumerate() {
            let path = PathBuf::from(path);
            assert_eq!(path, root.join(format!("split/cam_{i}.{ext}")));
            assert_eq!(std::fs::metadata(&path).unwrap().len(), *bytes, "{ext} {i}");
            let d = ffprobe_duration(&path);
            let want = if i < 2 { 20.0 } else { 19.9 };
            assert!((d - want).abs() < 0.25, "{ext} file {i}: {d} s");
            let counts = frame_counts(&path);
            video += frames_of(&counts, "h264");
            audio += frames_of(&counts, "aac");
            assert!(monotonic_dts(&path), "{ext} file {i}");
        }
        // Every frame of the minute: 1,500 video frames, 2,813 AAC frames.
        assert!(
            within_2pct(video, 60 * u64::from(FPS)),
            "{ext}: {video} video frames"
        );
        assert!(
            within_2pct(audio, 60 * 48_000 / 1024),
            "{ext}: {audio} audio frames"
        );
        let r = record(&s, ext).unwrap();
        assert_eq!(r["state"], "ready", "waits for the stream again: {r}");
        assert_eq!(r["sequence"], 2);
        assert_eq!(
            r["totalRecordBytes"].as_u64().unwrap(),
            files.iter().map(|f| f.1).sum::<u64>()
        );
    }
}

/// A time-lapse (kiln's `keyframesEvery`, issue 44): a minute of ffmpeg's
/// pattern (a keyframe a second, B-frames, AAC) kept as one keyframe per
/// 10 s, one frame per second of film, in both containers; ffprobe reads
/// six keyframes, no audio, a six-second film.
#[test]
fn a_time_lapse_keeps_one_keyframe_per_interval_and_plays() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let (s, root) = record_server("record-lapse", None);
    for ext in ["mp4", "ts"] {
        let r = call(
            &s,
            "startRecord",
            json!({"id": ext, "stream": {"name": "cam"}, "keyframesEvery": 10000,
                   "filePath": format!("lapse/cam.{ext}"), "infoPath": format!("lapse/{ext}.xml")}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["response"]["keyframesEvery"], 10000);
        assert_eq!(r.json()["response"]["timeLapseFps"], 1);
    }
    let bad = call(
        &s,
        "startRecord",
        json!({"id": "bad", "stream": {"name": "cam"}, "keyframesEvery": 10}),
    );
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("keyframesEvery"), "{}", bad.body);
    assert!(publish_fast(&s, "cam", 60).success());
    for ext in ["mp4", "ts"] {
        let info = root.join(format!("lapse/{ext}.xml"));
        let xml = wait_until(Duration::from_secs(20), || {
            std::fs::read_to_string(&info).ok()
        })
        .unwrap_or_else(|| panic!("{ext}: no info XML\n{}", s.log_text()));
        assert!(
            xml.contains("<keyframesEvery>10000</keyframesEvery>"),
            "{xml}"
        );
        let path = root.join(format!("lapse/cam.{ext}"));
        let counts = frame_counts(&path);
        assert_eq!(frames_of(&counts, "aac"), 0, "{ext}: {counts:?}");
        let out = Command::new("ffprobe")
            .args(["-v", "error", "-select_streams", "v", "-show_entries"])
            .args(["frame=key_frame,pts_time", "-of", "csv=p=0"])
            .arg(&path)
            .output()
            .unwrap();
        let frames: Vec<(String, f64)> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let (k, t) = l.split_once(',')?;
                Some((k.to_string(), t.parse().ok()?))
            })
            .collect();
        // Keyframes at 0, 10, ..., 50 s of the source (the last of the
        // minute may miss its cut): 5 or 6, each a second of film.
        assert!(
            (5..=6).contains(&frames.len()),
            "{ext}: {frames:?}\n{}",
            s.log_text()
        );
        assert!(frames.iter().all(|(k, _)| k == "1"), "{ext}: {frames:?}");
        let first = frames[0].1;
        for (i, (_, t)) in frames.iter().enumerate() {
            assert!(
                (t - first - i as f64).abs() < 0.01,
                "{ext}: frame {i} at {t} s of film: {frames:?}"
            );
        }
    }
}

/// A pre-roll (kiln's `preRoll`, issue 44): with `<FILE><MaxPreRoll>`, a
/// record started 10 s back begins at the keyframe at or before then. Two
/// records of one real-time stream, started and stopped together, one
/// with `preRoll` 10000: the first is 10 s (± one GOP) longer, and starts
/// on a keyframe.
#[test]
fn a_pre_roll_record_starts_ten_seconds_before_the_call() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let root = temp_dir("record-preroll-root");
    let s = Server::start_with(
        "record-preroll",
        ServerOptions {
            media: true,
            file: Some(format!(
                "<RootPath>{}</RootPath><FilePath>x.ts</FilePath><InfoPath>x.xml</InfoPath><MaxPreRoll>15000</MaxPreRoll>",
                root.display()
            )),
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
    // Over the window's worth of media (the source is real-time).
    std::thread::sleep(Duration::from_secs(14));
    let over = call(
        &s,
        "startRecord",
        json!({"id": "over", "stream": {"name": "cam"}, "preRoll": 15001}),
    );
    assert_eq!(over.status, 400, "{}", over.body);
    assert!(over.body.contains("15000"), "{}", over.body);
    for (id, pre) in [("pre", Some(10_000)), ("now", None)] {
        let mut body = json!({"id": id, "stream": {"name": "cam"},
            "filePath": format!("{id}.ts"), "infoPath": format!("{id}.xml")});
        if let Some(ms) = pre {
            body["preRoll"] = json!(ms);
        }
        let r = call(&s, "startRecord", body);
        assert_eq!(r.status, 200, "{}", r.body);
    }
    std::thread::sleep(Duration::from_secs(4));
    for id in ["pre", "now"] {
        assert_eq!(call(&s, "stopRecord", json!({ "id": id })).status, 200);
    }
    let metrics = s.request("GET", "/metrics", None).body;
    assert!(
        metrics.contains("kiln_record_preroll_streams 1"),
        "{metrics}"
    );
    let _ = src.kill();
    let _ = src.wait();
    let duration = |id: &str| {
        let path = root.join(format!("{id}.ts"));
        wait_until(Duration::from_secs(10), || {
            std::fs::read_to_string(root.join(format!("{id}.xml"))).ok()
        })
        .unwrap_or_else(|| panic!("{id}: no info XML\n{}", s.log_text()));
        ffprobe_duration(&path)
    };
    let (pre, now) = (duration("pre"), duration("now"));
    // One GOP is a second (25 frames at 25 fps); each file starts on one.
    assert!(
        (pre - now - 10.0).abs() <= 1.05,
        "pre-roll file {pre} s, plain file {now} s\n{}",
        s.log_text()
    );
    let first = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-select_streams",
            "v",
            "-read_intervals",
            "%+#1",
        ])
        .args(["-show_entries", "frame=key_frame", "-of", "csv=p=0"])
        .arg(root.join("pre.ts"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&first.stdout).trim(), "1");
}

/// A `wrap` for [`ServerOptions`] that starts kiln in a mount namespace of
/// its own with a tmpfs of `size` (`512k`, `12m`) mounted on `dir`, or
/// `None` (with the reason printed) where such a namespace cannot be made.
fn tmpfs_wrap(dir: &std::path::Path, size: &str) -> Option<String> {
    let can = have_tool("unshare")
        && Command::new("unshare")
            .args(["-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"])
            .status()
            .is_ok_and(|s| s.success());
    if !can {
        eprintln!("SKIP: cannot mount a tmpfs in a mount namespace here (unshare -rm)");
        return None;
    }
    std::fs::create_dir_all(dir).unwrap();
    Some(format!(
        "exec unshare -rm sh -c 'mount -t tmpfs -o size={size} tmpfs {} && exec \"$0\" \"$@\"' \"$@\"",
        dir.display()
    ))
}

/// The sizes of the files an info XML lists that are still on disk (no
/// `deletedTime`), and how many it lists as deleted.
fn kept_and_deleted(xml: &str) -> (Vec<u64>, usize) {
    let mut kept = Vec::new();
    let mut deleted = 0;
    for f in xml.split("<file>").skip(1) {
        if f.contains("<deletedTime>") {
            deleted += 1;
            continue;
        }
        let at = f.find("<recordBytes>").unwrap() + "<recordBytes>".len();
        kept.push(f[at..at + f[at..].find('<').unwrap()].parse().unwrap());
    }
    (kept, deleted)
}

/// Disk budgets (kiln's `<DiskBudget>`, issue 44): a minute of media split
/// every second under `MaxTotalMB` 3, then on a 12 MB file system of the
/// test's own (a tmpfs in a mount namespace) under `MinFreeMB` 8: the
/// oldest files go, each listed as deleted in the info XML, what is left
/// fits, the newest file plays, and the record never goes to `error`.
#[test]
fn disk_budgets_delete_the_oldest_files_and_the_record_goes_on() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let run = |tag: &str, budget: &str, wrap: Option<String>, root: &std::path::Path| {
        let s = Server::start_with(
            tag,
            ServerOptions {
                media: true,
                file: Some(format!("<RootPath>{}</RootPath>", root.display())),
                app_extra: format!("<DiskBudget>{budget}</DiskBudget>"),
                wrap,
                ..Default::default()
            },
        );
        let r = call(
            &s,
            "startRecord",
            json!({"id": "b", "stream": {"name": "cam"}, "interval": 1000,
                   "filePath": "disk/cam_${Sequence}.ts", "infoPath": "b.xml"}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(publish_fast(&s, "cam", 60).success());
        let xml = wait_until(Duration::from_secs(20), || {
            // Beside the files' folder (a mount the test cannot see).
            std::fs::read_to_string(root.join("b.xml"))
                .ok()
                .filter(|x| x.contains("<lastSequence>true</lastSequence>"))
        })
        .unwrap_or_else(|| panic!("{tag}: no last file in the info XML\n{}", s.log_text()));
        let rec = record(&s, "b").unwrap();
        assert_ne!(rec["state"], "error", "{tag}: {rec}");
        assert!(s.log_text().contains("to make room"), "{}", s.log_text());
        (s, xml)
    };

    let root = temp_dir("record-budget-root");
    let (s, xml) = run("record-budget", "<MaxTotalMB>3</MaxTotalMB>", None, &root);
    let (kept, deleted) = kept_and_deleted(&xml);
    assert!(deleted > 0, "{xml}");
    // Kept by the loop every 256 KiB written, with that much room left:
    // within the budget.
    let total: u64 = kept.iter().sum();
    assert!(total <= 3 << 20, "{total} bytes kept: {kept:?}");
    let on_disk: u64 = std::fs::read_dir(root.join("disk"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "ts"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert_eq!(on_disk, total, "the info XML and the directory agree");
    let newest = root.join(format!("disk/cam_{}.ts", kept.len() + deleted - 1));
    assert!(ffprobe_duration(&newest) > 0.5, "{}", newest.display());
    drop(s);

    let root = temp_dir("record-budget-free-root");
    let Some(wrap) = tmpfs_wrap(&root.join("disk"), "12m") else {
        return;
    };
    let (_s, xml) = run(
        "record-budget-free",
        "<MinFreeMB>8</MinFreeMB>",
        Some(wrap),
        &root,
    );
    let (kept, deleted) = kept_and_deleted(&xml);
    assert!(deleted > 0, "{xml}");
    // 12 MB less the 8 MB floor, and what was written since the last check.
    let total: u64 = kept.iter().sum();
    let largest = kept.iter().copied().max().unwrap_or(0);
    assert!(
        total <= (4 << 20) + (4 << 20) + largest,
        "{total} bytes kept: {kept:?}"
    );
}

/// Fragmented MP4 is playable up to its last fragment when kiln is killed
/// mid-file.
#[test]
fn a_record_killed_by_kill_9_leaves_a_playable_file() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let (mut s, root) = record_server("record-kill", None);
    let mut src = ffmpeg_source(
        20,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/live", s.media.rtmp),
    );
    s.wait_for_tracks("live");
    let r = call(
        &s,
        "startRecord",
        // OME's form: an absolute path is under the application's root.
        json!({"id": "k", "stream": {"name": "live"}, "filePath": "/kill/live.mp4"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // Issue 28, 6.10: a record of a live stream answers the state it is in.
    assert_eq!(r.json()["response"]["state"], "recording", "{}", r.body);
    wait_until(Duration::from_secs(20), || {
        record(&s, "k").filter(|r| r["recordTime"].as_u64() >= Some(4000))
    })
    .expect("4 s recorded");
    // Issue 44: a time-lapse (a keyframe a second) and a pre-roll record
    // (3 s before the call) are killed with it.
    for body in [
        json!({"id": "tl", "stream": {"name": "live"}, "filePath": "/kill/tl.mp4",
               "keyframesEvery": 1000, "timeLapseFps": 5}),
        json!({"id": "pr", "stream": {"name": "live"}, "filePath": "/kill/pr.mp4",
               "preRoll": 3000}),
    ] {
        let r = call(&s, "startRecord", body);
        assert_eq!(r.status, 200, "{}", r.body);
    }
    wait_until(Duration::from_secs(20), || {
        record(&s, "tl").filter(|r| r["recordTime"].as_u64() >= Some(1000))
    })
    .expect("a time-lapse recorded");
    std::thread::sleep(Duration::from_secs(3));
    // OME's connections.file counts the recordings, for the stream and up.
    for path in [
        "/v1/stats/current/vhosts/default/apps/app/streams/live",
        "/v1/stats/current",
    ] {
        let st = s.request("GET", path, None).json();
        assert_eq!(st["response"]["connections"]["file"], 3, "{path}: {st}");
    }
    s.kill9();
    let _ = src.kill();
    let _ = src.wait();
    let file = root.join("kill/live.mp4");
    let counts = frame_counts(&file);
    // Whole fragments only: at least the GOPs before the last keyframe.
    let video = frames_of(&counts, "h264");
    assert!(
        video >= 3 * u64::from(FPS),
        "{video} video frames: {counts:?}"
    );
    assert!(frames_of(&counts, "aac") > 100, "{counts:?}");
    assert!(monotonic_dts(&file));
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(&file)
        .args(["-f", "null", "-"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).trim().is_empty(),
        "decode errors: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The time-lapse: keyframes only, decodable; the pre-roll: its 3 s
    // before the call and what came after, whole fragments.
    let tl = root.join("kill/tl.mp4");
    let counts = frame_counts(&tl);
    assert!(frames_of(&counts, "h264") >= 2, "time-lapse: {counts:?}");
    assert_eq!(frames_of(&counts, "aac"), 0, "{counts:?}");
    let pr = root.join("kill/pr.mp4");
    let counts = frame_counts(&pr);
    assert!(
        frames_of(&counts, "h264") >= 4 * u64::from(FPS),
        "pre-roll: {counts:?}"
    );
    for f in [&tl, &pr] {
        let out = Command::new("ffmpeg")
            .args(["-v", "error", "-i"])
            .arg(f)
            .args(["-f", "null", "-"])
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{}: {}",
            f.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// OME's answers for bad bodies; ids free again after a stop; records
/// survive a restart.
#[test]
fn record_api_errors_id_reuse_and_restart() {
    let (mut s, root) = record_server("record-api", None);
    let bad = |body: Value, status: u16, text: &str| {
        let r = call(&s, "startRecord", body.clone());
        assert_eq!(r.status, status, "{body}: {}", r.body);
        assert!(r.message().contains(text), "{body}: {}", r.message());
    };
    bad(
        json!({"stream": {"name": "s"}}),
        400,
        "There is no required parameter [ id]",
    );
    bad(
        json!({"id": "x"}),
        400,
        "There is no required parameter [ stream.name]",
    );
    bad(
        json!({"id": "x", "stream": {"name": "s"}, "interval": 60000, "schedule": "0 */1 *"}),
        400,
        "[Interval] and [Schedule] cannot be used at the same time",
    );
    bad(
        json!({"id": "x", "stream": {"name": "s"}, "filePath": "/../etc/x.ts"}),
        400,
        "outside the root",
    );
    bad(
        json!({"id": "x", "stream": {"name": "s"}, "filePath": "../x.ts"}),
        400,
        "outside the root",
    );
    bad(
        json!({"id": "x", "stream": {"name": "s"}, "filePath": "x.flv"}),
        400,
        ".mp4 or .ts",
    );
    bad(
        json!({"id": "x", "stream": {"name": "s"}, "schedule": "every day"}),
        400,
        "schedule",
    );
    bad(json!([1]), 400, "must be an object");
    let ok = call(
        &s,
        "startRecord",
        json!({"id": "r1", "stream": {"name": "s"}}),
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    let v = &ok.json()["response"];
    // Shown from the root, as OME shows it.
    assert_eq!(v["filePath"], "/${Stream}_${Sequence}.ts");
    assert_eq!(v["isConfig"], false);
    // OME's documented form (`/${VirtualHost}/...` under the root) is
    // taken, shown as given, and kept under the root.
    let ome = call(
        &s,
        "startRecord",
        json!({"id": "ome", "stream": {"name": "s"}, "filePath": "/${VirtualHost}/${Stream}.ts"}),
    );
    assert_eq!(ome.status, 200, "{}", ome.body);
    assert_eq!(
        ome.json()["response"]["filePath"],
        "/${VirtualHost}/${Stream}.ts"
    );
    assert!(root.is_absolute());
    assert_eq!(call(&s, "stopRecord", json!({"id": "ome"})).status, 200);
    assert_eq!(v["segmentationRule"], "discontinuity");
    bad(
        json!({"id": "r1", "stream": {"name": "s"}}),
        400,
        "Duplicate ID already exists [r1]",
    );
    // Durable: back after a restart, ready.
    s.terminate();
    s.spawn();
    assert_eq!(record(&s, "r1").unwrap()["state"], "ready");
    let stop = call(&s, "stopRecord", json!({"id": "r1"}));
    assert_eq!(stop.status, 200);
    assert_eq!(stop.json()["response"]["state"], "stopping");
    let again = call(&s, "stopRecord", json!({"id": "r1"}));
    assert_eq!(again.status, 404);
    assert!(again
        .message()
        .contains("There is no record information related to the ID [r1]"));
    assert_eq!(call(&s, "stopRecord", json!({})).status, 400);
    // The id is free at once.
    assert_eq!(
        call(
            &s,
            "startRecord",
            json!({"id": "r1", "stream": {"name": "s"}})
        )
        .status,
        200
    );
    let all = call(&s, "records", json!({})).json();
    assert_eq!(all["response"].as_array().unwrap().len(), 1);
    // An application without <FILE>: 404.
    let r = s.request("POST", "/v1/vhosts/default/apps/nope:records", Some("{}"));
    assert_eq!(r.status, 404);
}

/// A full disk fails only the record writing to it, with the reason; the
/// other record and the stream go on. The disk is a 512 KiB tmpfs mounted
/// in a mount namespace kiln runs in.
#[test]
fn a_full_disk_fails_only_its_record() {
    if !have_tool("ffmpeg") {
        return;
    }
    let root = temp_dir("record-full-root");
    let Some(wrap) = tmpfs_wrap(&root.join("full"), "512k") else {
        return;
    };
    let s = Server::start_with(
        "record-full",
        ServerOptions {
            media: true,
            file: Some(format!("<RootPath>{}</RootPath>", root.display())),
            wrap: Some(wrap),
            ..Default::default()
        },
    );
    for (id, path) in [("full", "full/a.ts"), ("ok", "ok/b.ts")] {
        let r = call(
            &s,
            "startRecord",
            json!({"id": id, "stream": {"name": "live"}, "filePath": path, "infoPath": format!("{id}.xml")}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let mut src = ffmpeg_source(
        15,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/live", s.media.rtmp),
    );
    let failed = wait_until(Duration::from_secs(20), || {
        record(&s, "full").filter(|r| r["state"] == "error")
    })
    .unwrap_or_else(|| panic!("no error\n{}", s.log_text()));
    let why = failed["lastError"].as_str().unwrap();
    assert!(why.contains("No space left on device"), "{why}");
    assert!(why.contains("full/a.ts"), "{why}");
    // The other record and the stream go on.
    let before = record(&s, "ok").unwrap()["recordBytes"].as_u64().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let ok = record(&s, "ok").unwrap();
    assert_eq!(ok["state"], "recording");
    assert!(ok["recordBytes"].as_u64().unwrap() > before);
    assert!(s.live_stream("live").is_some());
    assert!(std::fs::metadata(root.join("ok/b.ts")).unwrap().len() > 0);
    let _ = src.kill();
    let _ = src.wait();
}

/// An application made through the API records and dumps only under a
/// folder the config file names for recordings or dumps (kiln often runs
/// as root); and a record's info file never replaces a file kiln did not
/// write, even inside its root: the record fails with the reason and the
/// file stays as it was.
#[test]
fn api_apps_write_only_under_config_folders_and_never_over_a_foreign_file() {
    if !have_tool("ffmpeg") {
        return;
    }
    let (s, root) = record_server("record-roots", None);
    let app = |name: &str, publishers: Value| {
        json!([{"name": name, "publishers": publishers}]).to_string()
    };
    let outside = temp_dir("record-roots-outside");
    let r = s.request(
        "POST",
        "/v1/vhosts",
        Some(&json!([{"name": "studio", "host": {"names": ["studio.example.com"]}}]).to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    for (publishers, field) in [
        (
            json!({"file": {"rootPath": "/"}}),
            "publishers.file.rootPath",
        ),
        (
            json!({"file": {"rootPath": outside.display().to_string()}}),
            "publishers.file.rootPath",
        ),
        (
            json!({"file": {"rootPath": format!("{}/../x", root.display())}}),
            "publishers.file.rootPath",
        ),
        (json!({"file": {}}), "publishers.file.rootPath"),
        (
            json!({"llhls": {"dumps": {"rootPath": "/", "dump": [{"targetStreamName": "*", "outputPath": "x"}]}}}),
            "publishers.llhls.dumps.rootPath",
        ),
    ] {
        let r = s.request(
            "POST",
            "/v1/vhosts/studio/apps",
            Some(&app("x", publishers.clone())),
        );
        assert!(
            r.body.contains("400") && r.body.contains(field) && r.body.contains("<FILE><RootPath>"),
            "{publishers}: {}",
            r.body
        );
    }
    let inside = root.join("api").display().to_string();
    let r = s.request(
        "POST",
        "/v1/vhosts/studio/apps",
        Some(&app("rec", json!({"file": {"rootPath": inside}}))),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // A PATCH may not move it out either.
    let r = s.request(
        "PATCH",
        "/v1/vhosts/studio/apps/rec",
        Some(&json!({"publishers": {"file": {"rootPath": "/etc"}}}).to_string()),
    );
    assert!(
        r.body.contains("400") && r.body.contains("rootPath"),
        "{}",
        r.body
    );
    // A foreign file where the info file goes: left as it was.
    let victim = root.join("victim.conf");
    std::fs::write(&victim, b"key = value\n").unwrap();
    let r = call(
        &s,
        "startRecord",
        json!({"id": "v", "stream": {"name": "cam"}, "filePath": "v.ts", "infoPath": "victim.conf"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(publish_fast(&s, "cam", 3).success());
    let failed = wait_until(Duration::from_secs(20), || {
        record(&s, "v").filter(|r| r["state"] == "error")
    });
    assert_eq!(std::fs::read(&victim).unwrap(), b"key = value\n");
    let failed = failed.unwrap_or_else(|| panic!("{:?}\n{}", record(&s, "v"), s.log_text()));
    assert!(failed.to_string().contains("did not write"), "{failed}");
}
