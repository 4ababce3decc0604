//! The record manager against a registry, with stepped time and the
//! writer's answers given by the test. No files.

use super::*;
use crate::hls::fuzz::{aac, h264};
use crate::record::request::{validate_start, StartRecordRequest};
use crate::state::streams::SourceType;
use bytes::Bytes;
use std::time::{Duration, Instant};

struct World {
    reg: Registry,
    rec: RecordManager,
    t0: Instant,
    stream: Option<StreamId>,
}

fn key(id: &str) -> TaskKey {
    TaskKey {
        vhost: "default".into(),
        app: "app".into(),
        id: id.into(),
    }
}

impl World {
    fn new() -> Self {
        Self::with_config(include_str!("../../../server.xml.example"))
    }

    /// The example's app with `<FILE><MaxPreRoll>`.
    fn with_pre_roll(ms: u64) -> Self {
        let text = include_str!("../../../server.xml.example").replacen(
            "</FILE>",
            &format!("<MaxPreRoll>{ms}</MaxPreRoll></FILE>"),
            1,
        );
        Self::with_config(&text)
    }

    fn with_config(text: &str) -> Self {
        let loaded = crate::config::parse(std::path::Path::new("server.xml"), text, &|_| None)
            .unwrap_or_else(|e| panic!("{e:?}"));
        World {
            reg: loaded.config.registry(),
            rec: RecordManager::new(0),
            t0: Instant::now(),
            stream: None,
        }
    }

    fn now(&self, ms: i64) -> Now {
        Now {
            instant: self.t0 + Duration::from_millis(ms as u64),
            unix_ms: 1_795_437_296_000 + ms,
        }
    }

    fn add(&mut self, body: &str) {
        let req: StartRecordRequest = serde_json::from_str(body).unwrap();
        let file = self
            .reg
            .app("default", "app")
            .unwrap()
            .file()
            .unwrap()
            .clone();
        let spec = validate_start(req, "default", "app", &file, 0).unwrap();
        let k = key(&spec.id);
        self.rec.tasks.insert(RecordTask::new(spec));
        let now = self.now(0);
        self.rec.start_if_live(&k, &mut self.reg, now);
    }

    fn publish(&mut self, name: &str, ms: i64) {
        let id = self
            .reg
            .streams
            .start("default", "app", name, SourceType::Rtmp, 1, 0)
            .unwrap();
        self.reg.streams.set_tracks(id, vec![h264(), aac()]);
        self.stream = Some(id);
        let out = IngestOutput {
            stream: Some(id),
            started: Some(id),
            tracks_changed: true,
            ..Default::default()
        };
        let now = self.now(ms);
        self.rec.on_ingest(&out, &mut self.reg, now);
    }

    /// Media from `from_ms` to `to_ms` (30 fps video, a keyframe every
    /// second; audio every 20 ms), handed in as it happens.
    fn media(&mut self, from_ms: i64, to_ms: i64) {
        let id = self.stream.unwrap();
        let mut t = from_ms;
        while t < to_ms {
            let mut frames = Vec::new();
            if t % 20 == 0 {
                frames.push(Frame {
                    track: 2,
                    pts: t * 90,
                    dts: t * 90,
                    keyframe: true,
                    data: Bytes::from_static(&[0x21, 0x10, 0x04]),
                });
            }
            if (t * 3) % 100 == 0 {
                // A video frame every 33.3 ms.
                let key = t % 1000 == 0;
                frames.push(Frame {
                    track: 1,
                    pts: t * 90 + 3000,
                    dts: t * 90,
                    keyframe: key,
                    data: Bytes::from_static(&[0, 0, 0, 2, 0x65, 0x88]),
                });
            }
            if !frames.is_empty() {
                let out = IngestOutput {
                    stream: Some(id),
                    frames,
                    ..Default::default()
                };
                let now = self.now(t);
                self.rec.on_ingest(&out, &mut self.reg, now);
            }
            t += 10;
        }
    }

    fn end(&mut self, ms: i64) {
        let id = self.stream.take().unwrap();
        self.reg.streams.end(id);
        let out = IngestOutput {
            ended: Some(id),
            ..Default::default()
        };
        let now = self.now(ms);
        self.rec.on_ingest(&out, &mut self.reg, now);
    }

    fn ops(&mut self) -> Vec<FileOp> {
        self.rec.poll_ops().collect()
    }

    fn task(&self, id: &str) -> &RecordTask {
        self.rec.tasks.get(&key(id)).unwrap()
    }
}

fn created(ops: &[FileOp]) -> Vec<String> {
    ops.iter()
        .filter_map(|o| match o {
            FileOp::Create { path, .. } => Some(path.display().to_string()),
            _ => None,
        })
        .collect()
}

fn closes(ops: &[FileOp]) -> Vec<(FileId, Option<String>)> {
    ops.iter()
        .filter_map(|o| match o {
            FileOp::Close { file, info, .. } => Some((*file, info.as_ref().map(|i| i.1.clone()))),
            _ => None,
        })
        .collect()
}

/// The bytes written to each file, by file id.
fn written(ops: &[FileOp]) -> HashMap<FileId, Vec<u8>> {
    let mut m: HashMap<FileId, Vec<u8>> = HashMap::new();
    for o in ops {
        if let FileOp::Write { file, data } = o {
            m.entry(*file).or_default().extend_from_slice(data);
        }
    }
    m
}

/// The first `tfdt` of an MP4 file (its first fragment's decode time).
fn first_tfdt(data: &[u8]) -> u64 {
    let at = data.windows(4).position(|w| w == b"tfdt").unwrap();
    u64::from_be_bytes(data[at + 8..at + 16].try_into().unwrap())
}

#[test]
fn a_reserved_record_starts_with_its_stream_and_splits_by_interval() {
    let mut w = World::new();
    w.add(r#"{"id":"r","stream":{"name":"s"},"interval":20000,"filePath":"${Stream}_${Sequence}.mp4","infoPath":"${Id}.xml"}"#);
    assert_eq!(w.task("r").state, RecordState::Ready);
    assert!(w.ops().is_empty());
    w.publish("s", 0);
    assert_eq!(w.task("r").state, RecordState::Recording);
    w.media(0, 60_000);
    w.end(60_000);
    let ops = w.ops();
    let root = "/tmp/kiln/records";
    assert_eq!(
        created(&ops),
        [0, 1, 2].map(|i| format!("{root}/s_{i}.mp4"))
    );
    let closed = closes(&ops);
    assert_eq!(closed.len(), 3);
    // The last info lists the three files, the last one marked.
    let xml = closed[2].1.as_ref().unwrap();
    assert_eq!(xml.matches("<file>").count(), 3, "{xml}");
    assert_eq!(xml.matches("<lastSequence>true</lastSequence>").count(), 1);
    let t = w.task("r");
    assert_eq!(t.state, RecordState::Ready, "waits for the stream again");
    assert_eq!(t.files, 3);
    assert_eq!(
        t.finished.iter().map(|f| f.record_ms).collect::<Vec<_>>(),
        [20_000, 20_000, 19_980]
    );
    assert_eq!(
        t.ended_bytes,
        written(&ops).values().map(|d| d.len() as u64).sum::<u64>()
    );
    // Discontinuity (the default): every file starts at 0.
    for data in written(&ops).values() {
        assert_eq!(&data[4..8], b"ftyp");
        assert_eq!(first_tfdt(data), 0);
    }
    // The stream comes back: a new file, the next sequence.
    w.publish("s", 70_000);
    w.media(70_000, 71_000);
    let ops = w.ops();
    assert_eq!(created(&ops), [format!("{root}/s_3.mp4")]);
    assert_eq!(w.task("r").sequence, 3);
}

#[test]
fn continuity_keeps_the_timestamps_running_across_files() {
    let mut w = World::new();
    w.add(r#"{"id":"c","stream":{"name":"s"},"interval":5000,"segmentationRule":"continuity","filePath":"c_${Sequence}.mp4","infoPath":"c.xml"}"#);
    w.publish("s", 0);
    w.media(0, 10_500);
    let ops = w.ops();
    let files = written(&ops);
    let mut ids: Vec<&FileId> = files.keys().collect();
    ids.sort();
    assert_eq!(ids.len(), 3);
    assert_eq!(first_tfdt(&files[ids[0]]), 0);
    // Video track 1 has a 90 kHz timescale: the second file starts at 5 s.
    assert_eq!(first_tfdt(&files[ids[1]]), 5 * 90_000);
}

#[test]
fn a_schedule_splits_on_the_wall_clock() {
    let mut w = World::new();
    // The clock starts at 12:34:56 UTC: splits at :00 and :20 of each
    // minute.
    w.add(r#"{"id":"s","stream":{"name":"s"},"schedule":"*/20 * *","filePath":"s_${Sequence}_${StartTime:hhmmss}.ts","infoPath":"s.xml"}"#);
    w.publish("s", 0);
    w.media(0, 30_000);
    let ops = w.ops();
    assert_eq!(
        created(&ops),
        [
            "/tmp/kiln/records/s_0_123456.ts",
            "/tmp/kiln/records/s_1_123500.ts",
            "/tmp/kiln/records/s_2_123520.ts"
        ]
    );
    for (id, data) in written(&ops) {
        assert_eq!(data.len() % 188, 0, "file {id}: whole TS packets");
        assert_eq!(data[0], 0x47);
    }
}

#[test]
fn stop_closes_the_file_and_frees_the_id() {
    let mut w = World::new();
    w.add(r#"{"id":"r","stream":{"name":"s"},"filePath":"r.ts","infoPath":"r.xml"}"#);
    w.publish("s", 0);
    w.media(0, 2_000);
    let now = w.now(2_000);
    w.rec.stop(&key("r"), now);
    assert!(w.rec.tasks.get(&key("r")).is_none());
    let ops = w.ops();
    let closed = closes(&ops);
    assert_eq!(closed.len(), 1);
    assert!(closed[0]
        .1
        .as_ref()
        .unwrap()
        .contains("<recordTime>1980</recordTime>"));
    // The writer's late answer for a stopped record is harmless.
    w.rec
        .on_file_event(FileEvent::Closed { file: closed[0].0 }, w.now(1_990));
    assert_eq!(w.rec.open_files(), 0);
    // More media: nothing is written for it.
    w.media(2_000, 3_000);
    assert!(w.ops().is_empty());
}

#[test]
fn a_write_failure_puts_only_that_record_in_error() {
    let mut w = World::new();
    w.add(r#"{"id":"full","stream":{"name":"s"},"filePath":"a.ts","infoPath":"a.xml"}"#);
    w.add(r#"{"id":"ok","stream":{"name":"s"},"filePath":"b.ts","infoPath":"b.xml"}"#);
    w.publish("s", 0);
    w.media(0, 1_000);
    let ops = w.ops();
    let file = ops
        .iter()
        .find_map(|o| match o {
            FileOp::Create { file, path } if path.ends_with("a.ts") => Some(*file),
            _ => None,
        })
        .unwrap();
    let reason = "cannot write [/tmp/kiln/records/a.ts]: No space left on device (os error 28)";
    let when = w.now(1_000);
    w.rec.on_file_event(
        FileEvent::Failed {
            file,
            reason: reason.into(),
            written: Some(0),
        },
        when,
    );
    assert_eq!(w.task("full").state, RecordState::Error);
    assert_eq!(w.task("full").last_error_ms, Some(when.unix_ms));
    // What reached the disk, not what was handed to the writer.
    assert_eq!(w.task("full").record_bytes, 0);
    assert_eq!(w.task("full").last_error.as_deref(), Some(reason));
    assert_eq!(closes(&w.ops()), vec![(file, None)]);
    w.media(1_000, 2_000);
    let ops = w.ops();
    assert!(!ops.is_empty());
    assert!(ops
        .iter()
        .all(|o| !matches!(o, FileOp::Write { file: f, .. } if *f == file)));
    assert_eq!(w.task("ok").state, RecordState::Recording);
}

#[test]
fn publisher_names_cannot_climb_out_of_the_template_directory() {
    // A `..` (or `/`) name never becomes a stream: every ingest applies the
    // API's name rules (issue 28), so `${Stream}` cannot climb.
    let mut w = World::new();
    w.add(r#"{"id":"r","stream":{"name":".."},"filePath":"x/${Stream}/f.ts","infoPath":"i.xml"}"#);
    for name in ["..", "a/../../b", "."] {
        let got = w
            .reg
            .streams
            .start("default", "app", name, SourceType::Rtmp, 1, 0);
        assert!(
            matches!(got, Err(crate::state::streams::PublishError::InvalidName)),
            "{name}: {got:?}"
        );
    }
    assert!(created(&w.ops()).is_empty());
    assert_eq!(w.task("r").state, RecordState::Ready);
    // The record's own check still stands behind it.
    let e = crate::record::request::resolve(Some("/srv/rec"), "x/../../f.ts").unwrap_err();
    assert!(e.to_string().contains("outside the root"), "{e}");
}

#[test]
fn the_first_file_starts_at_a_keyframe_and_selected_tracks_only() {
    let mut w = World::new();
    w.add(
        r#"{"id":"a","stream":{"name":"s","trackIds":[1]},"filePath":"a.mp4","infoPath":"a.xml"}"#,
    );
    w.publish("s", 0);
    w.media(0, 1_000);
    let ops = w.ops();
    let files = written(&ops);
    let data = files.values().next().unwrap();
    // Audio only: one trak in the moov.
    assert_eq!(data.windows(4).filter(|w| *w == b"trak").count(), 1);
    assert_eq!(data.windows(4).filter(|w| *w == b"soun").count(), 1);
}

#[test]
fn frames_of_the_batch_that_starts_a_record_are_written_once() {
    let mut w = World::new();
    w.add(r#"{"id":"once","stream":{"name":"s"},"filePath":"once.mp4","infoPath":"once.xml"}"#);
    let id = w
        .reg
        .streams
        .start("default", "app", "s", SourceType::Rtmp, 1, 0)
        .unwrap();
    w.reg.streams.set_tracks(id, vec![h264(), aac()]);
    // The ingest glue puts the batch's frames into the stream's GOP before
    // the outputs see the batch.
    let frames: Vec<Frame> = (0..30i64)
        .map(|i| Frame {
            track: 1,
            pts: i * 3000,
            dts: i * 3000,
            keyframe: i == 0,
            data: Bytes::from_static(&[0, 0, 0, 2, 0x65, 0x88]),
        })
        .collect();
    for f in &frames {
        w.reg.streams.on_frame(id, f);
    }
    let out = IngestOutput {
        stream: Some(id),
        started: Some(id),
        tracks_changed: true,
        frames,
        ..Default::default()
    };
    let now = w.now(0);
    w.rec.on_ingest(&out, &mut w.reg, now);
    let now = w.now(1_000);
    w.rec.stop(&key("once"), now);
    let ops = w.ops();
    let data = written(&ops).into_values().next().unwrap();
    // trun: version/flags, then sample_count.
    let samples: u32 = data
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == b"trun")
        .map(|(at, _)| u32::from_be_bytes(data[at + 8..at + 12].try_into().unwrap()))
        .sum();
    assert_eq!(samples, 30);
}

#[test]
fn end_time_in_the_path_renames_the_file_when_it_closes() {
    let mut w = World::new();
    w.add(r#"{"id":"e","stream":{"name":"s"},"interval":5000,"filePath":"e_${StartTime:hhmmss}_${EndTime:hhmmss}.ts","infoPath":"e.xml"}"#);
    w.publish("s", 0);
    w.media(0, 5_500);
    let ops = w.ops();
    let root = "/tmp/kiln/records";
    // Written under the start time until the end is known.
    assert_eq!(created(&ops)[0], format!("{root}/e_123456_123456.ts"));
    let renames: Vec<String> = ops
        .iter()
        .filter_map(|o| match o {
            FileOp::Close {
                rename: Some(p), ..
            } => Some(p.display().to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(renames, [format!("{root}/e_123456_123501.ts")]);
    let xml = closes(&ops)[0].1.clone().unwrap();
    assert!(
        xml.contains(&format!("<filePath>{root}/e_123456_123501.ts</filePath>")),
        "{xml}"
    );
}

#[test]
fn a_time_lapse_writes_one_keyframe_per_interval_on_the_films_clock() {
    let mut w = World::new();
    w.add(r#"{"id":"lapse","stream":{"name":"s"},"keyframesEvery":10000,"timeLapseFps":2,"filePath":"lapse.ts","infoPath":"lapse.xml"}"#);
    w.publish("s", 0);
    // 60 s of 30 fps video (a keyframe a second) and audio.
    w.media(0, 60_000);
    w.end(60_000);
    let ops = w.ops();
    let data = written(&ops).into_values().next().unwrap();
    let mut d = crate::ts::demux::Demuxer::new();
    d.push(&data);
    d.flush();
    let mut frames = Vec::new();
    let mut tracks = Vec::new();
    while let Some(e) = d.poll_event() {
        match e {
            crate::ts::demux::DemuxEvent::TracksChanged(t) => tracks = t,
            crate::ts::demux::DemuxEvent::Frame(f) => frames.push(f),
        }
    }
    // The video track alone; the keyframes at 0, 10, ..., 50 s, each half
    // a second of film (2 fps).
    assert_eq!(tracks.len(), 1, "{tracks:?}");
    assert_eq!(tracks[0].kind(), MediaKind::Video);
    assert_eq!(frames.len(), 6);
    assert!(frames.iter().all(|f| f.keyframe));
    let start = frames[0].pts;
    let film: Vec<i64> = frames.iter().map(|f| f.pts - start).collect();
    assert_eq!(film, [0, 45_000, 90_000, 135_000, 180_000, 225_000]);
    // The info XML says it is a time-lapse.
    let xml = closes(&ops)[0].1.clone().unwrap();
    assert!(
        xml.contains("<keyframesEvery>10000</keyframesEvery>"),
        "{xml}"
    );
    assert!(xml.contains("<timeLapseFps>2</timeLapseFps>"), "{xml}");
    assert_eq!(w.task("lapse").finished[0].record_ms, 50_000);
}

#[test]
fn time_lapse_bounds_are_checked() {
    let file = crate::state::app::FileSpec::default();
    let check = |body: &str| {
        let req: StartRecordRequest = serde_json::from_str(body).unwrap();
        validate_start(req, "default", "app", &file, 0).map(|s| s.time_lapse)
    };
    let base = r#""id":"x","stream":{"name":"s"},"filePath":"/r/x.ts","infoPath":"/r/x.xml""#;
    assert_eq!(
        check(&format!("{{{base},\"keyframesEvery\":5000}}")).unwrap(),
        Some(crate::record::request::TimeLapse {
            every_ms: 5000,
            fps: 1
        })
    );
    for bad in [
        "\"keyframesEvery\":50",
        "\"keyframesEvery\":86400001",
        "\"keyframesEvery\":5000,\"timeLapseFps\":0",
        "\"keyframesEvery\":5000,\"timeLapseFps\":61",
        "\"timeLapseFps\":5",
    ] {
        let e = check(&format!("{{{base},{bad}}}")).unwrap_err();
        assert!(e.to_string().contains("keyframesEvery"), "{bad}: {e}");
    }
}

#[test]
fn a_pre_roll_starts_the_file_at_the_keyframe_before_the_call() {
    let mut w = World::with_pre_roll(10_000);
    w.publish("s", 0);
    w.media(0, 30_000);
    // Held: the keyframe at or before 10 s back (19.99 s) and on.
    let (streams, frames, bytes) = w.rec.preroll_held();
    assert_eq!(streams, 1);
    assert!(frames > 0 && bytes > 0);
    // At 30 s, a record with 5 s of pre-roll: its file starts at the
    // keyframe of 24 s (the last at or before 24.99 s), 6 s of media
    // before any frame that comes after the call.
    w.add(r#"{"id":"pre","stream":{"name":"s"},"preRoll":5000,"filePath":"pre.ts","infoPath":"pre.xml"}"#);
    w.media(30_000, 31_000);
    w.end(31_000);
    let t = w.task("pre");
    assert_eq!(
        t.finished[0].record_ms,
        30_980 - 24_000, // from 24 s to the last frame (audio at 30.98 s)
        "{:?}",
        t.finished
    );
    // Without a pre-roll the file starts with the stream's GOP (this
    // world's registry holds no frames: at the next keyframe, 30 s).
    let mut w = World::with_pre_roll(10_000);
    w.publish("s", 0);
    w.media(0, 30_000);
    w.add(r#"{"id":"gop","stream":{"name":"s"},"filePath":"gop.ts","infoPath":"gop.xml"}"#);
    w.media(30_000, 31_000);
    w.end(31_000);
    assert_eq!(w.task("gop").finished[0].record_ms, 30_980 - 30_000);
    // More than the app allows: refused with the bound; none at all
    // without <MaxPreRoll>, and a stream of such an app holds nothing.
    let file = w.reg.app("default", "app").unwrap().file().unwrap().clone();
    let req: StartRecordRequest = serde_json::from_str(
        r#"{"id":"x","stream":{"name":"s"},"preRoll":10001,"filePath":"x.ts","infoPath":"x.xml"}"#,
    )
    .unwrap();
    let e = validate_start(req, "default", "app", &file, 0).unwrap_err();
    assert_eq!(e.to_string(), "preRoll must be at most 10000 (ms)");
    let mut w = World::new();
    w.publish("s", 0);
    w.media(0, 5_000);
    assert_eq!(w.rec.preroll_held(), (0, 0, 0));
    let file = w.reg.app("default", "app").unwrap().file().unwrap().clone();
    let req: StartRecordRequest = serde_json::from_str(
        r#"{"id":"x","stream":{"name":"s"},"preRoll":1,"filePath":"x.ts","infoPath":"x.xml"}"#,
    )
    .unwrap();
    let e = validate_start(req, "default", "app", &file, 0).unwrap_err();
    assert!(e.to_string().contains("MaxPreRoll"), "{e}");
}

#[test]
fn a_disk_budget_deletes_the_oldest_files_then_says_disk_full() {
    let text = include_str!("../../../server.xml.example").replacen(
        "</FILE>\n          </Publishers>",
        "</FILE>\n          </Publishers><DiskBudget><MinFreeMB>100</MinFreeMB></DiskBudget>",
        1,
    );
    assert!(
        text.contains("<MinFreeMB>"),
        "the example's app layout changed"
    );
    let mut w = World::with_config(&text);
    w.add(r#"{"id":"b","stream":{"name":"s"},"interval":20000,"filePath":"b_${Sequence}.ts","infoPath":"b.xml"}"#);
    w.publish("s", 0);
    w.media(0, 50_000);
    let ops = w.ops();
    let files: Vec<(FileId, PathBuf)> = ops
        .iter()
        .filter_map(|o| match o {
            FileOp::Create { file, path } => Some((*file, path.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(files.len(), 3);
    let current = files[2].0;
    // Enough free: nothing happens.
    w.rec.on_file_event(
        FileEvent::Space {
            file: current,
            free: 500 << 20,
        },
        w.now(50_000),
    );
    assert!(w.ops().is_empty());
    // 50 MB free under a 100 MB floor: the two closed files go, oldest
    // first, each listed in the info XML; then nothing is left: error.
    w.rec.on_file_event(
        FileEvent::Space {
            file: current,
            free: 50 << 20,
        },
        w.now(51_000),
    );
    let ops = w.ops();
    let deleted: Vec<&PathBuf> = ops
        .iter()
        .filter_map(|o| match o {
            FileOp::Delete { path, .. } => Some(path),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, [&files[0].1, &files[1].1]);
    let info = ops
        .iter()
        .rev()
        .find_map(|o| match o {
            FileOp::Replace { data, .. } => Some(String::from_utf8_lossy(data).into_owned()),
            _ => None,
        })
        .unwrap();
    assert_eq!(info.matches("<deletedTime>").count(), 2, "{info}");
    let t = w.task("b");
    assert_eq!(t.state, RecordState::Error);
    let e = t.last_error.as_deref().unwrap();
    assert!(
        e.starts_with("disk full: 53451520 bytes free on the file system, under the 104857600 MinFreeMB 100 asks"),
        "{e}"
    );
    // Its open file was closed (with its info XML).
    assert!(ops
        .iter()
        .any(|o| matches!(o, FileOp::Close { file, info: Some(_), .. } if *file == current)));
}

#[test]
fn after_the_records_own_files_a_budget_takes_the_dvrs_segments() {
    let text = include_str!("../../../server.xml.example").replacen(
        "</FILE>\n          </Publishers>",
        "</FILE>\n          </Publishers><DiskBudget><MaxTotalMB>10</MaxTotalMB></DiskBudget>",
        1,
    );
    let mut w = World::with_config(&text);
    w.add(r#"{"id":"b","stream":{"name":"s"},"interval":20000,"filePath":"b_${Sequence}.ts","infoPath":"b.xml"}"#);
    w.publish("s", 0);
    w.media(0, 50_000);
    let ops = w.ops();
    let current = ops
        .iter()
        .filter_map(|o| match o {
            FileOp::Create { file, .. } => Some(*file),
            _ => None,
        })
        .next_back()
        .unwrap();
    // The app's DVR holds 30 MB: over MaxTotalMB 10 with the records'
    // few bytes. The records' two closed files go first, then 20 MB and
    // a little of the DVR are asked for; the record goes on.
    w.rec
        .dvr_usage
        .insert(("default".into(), "app".into()), 30 << 20);
    w.rec.on_file_event(
        FileEvent::Space {
            file: current,
            free: 500 << 20,
        },
        w.now(51_000),
    );
    let deleted = w
        .ops()
        .iter()
        .filter(|o| matches!(o, FileOp::Delete { .. }))
        .count();
    assert_eq!(deleted, 2);
    let trims = std::mem::take(&mut w.rec.dvr_trims);
    assert_eq!(trims.len(), 1, "{trims:?}");
    let (vhost, app, bytes, why) = &trims[0];
    assert_eq!((vhost.as_str(), app.as_str()), ("default", "app"));
    assert!(*bytes >= 20 << 20 && *bytes < 21 << 20, "{bytes}");
    assert!(why.contains("recordings and DVR take"), "{why}");
    assert_eq!(w.task("b").state, RecordState::Recording);
}

#[test]
fn max_total_mb_is_kept_as_each_file_grows_not_only_at_splits() {
    let text = include_str!("../../../server.xml.example").replacen(
        "</FILE>\n          </Publishers>",
        "</FILE>\n          </Publishers><DiskBudget><MaxTotalMB>3</MaxTotalMB></DiskBudget>",
        1,
    );
    let mut w = World::with_config(&text);
    w.add(r#"{"id":"b","stream":{"name":"s"},"interval":20000,"filePath":"b_${Sequence}.ts","infoPath":"b.xml"}"#);
    w.publish("s", 0);
    w.media(0, 20_500);
    let id = w.stream.unwrap();
    // A 100 kB video frame (one AVCC NAL) at `t` ms.
    let feed = |w: &mut World, t: i64, keyframe: bool| {
        let mut d = vec![0u8; 100_000];
        d[..5].copy_from_slice(&[0x00, 0x01, 0x86, 0x9C, if keyframe { 0x65 } else { 0x41 }]);
        let frame = Frame {
            track: 1,
            pts: t * 90,
            dts: t * 90,
            keyframe,
            data: Bytes::from(d),
        };
        let now = w.now(t);
        let out = IngestOutput {
            stream: Some(id),
            frames: vec![frame],
            ..Default::default()
        };
        w.rec.on_ingest(&out, &mut w.reg, now);
        w.ops().iter().any(|o| matches!(o, FileOp::Delete { .. }))
    };
    // The second file: 2 MB, within the budget.
    for i in 0..20 {
        assert!(!feed(&mut w, 20_500 + i * 100, false));
    }
    // The third (split at a keyframe past 40 s) grows: the budget acts
    // once the files pass 3 MiB less 256 KiB of room, within the ninth
    // frame, not when this file is as large as the last one was.
    assert!(!feed(&mut w, 40_000, true));
    let at = (1..40).find(|i| feed(&mut w, 40_000 + i * 100, false));
    assert!(at.is_some_and(|i| i <= 9), "deleted at frame {at:?}");
}

#[test]
fn a_large_pre_roll_is_fed_at_the_writers_pace_and_fails_no_other_record() {
    let mut w = World::with_pre_roll(120_000);
    w.publish("s", 0);
    w.add(r#"{"id":"live","stream":{"name":"s"},"filePath":"live.ts","infoPath":"live.xml"}"#);
    let id = w.stream.unwrap();
    // 20 s of 30 fps video, 64 KiB a frame (a keyframe each second):
    // 37.5 MiB of history.
    let frame = |i: i64| Frame {
        track: 1,
        pts: i * 3000,
        dts: i * 3000,
        keyframe: i % 30 == 0,
        data: Bytes::from(vec![0u8; 64 << 10]),
    };
    for i in 0..600 {
        let out = IngestOutput {
            stream: Some(id),
            frames: vec![frame(i)],
            ..Default::default()
        };
        let now = w.now(i * 33);
        w.rec.on_ingest(&out, &mut w.reg, now);
    }
    let _ = w.ops();
    w.add(r#"{"id":"pre","stream":{"name":"s"},"preRoll":120000,"filePath":"pre.ts","infoPath":"pre.xml"}"#);
    // The first step only; the rest waits for the writer's room.
    let _ = w.ops();
    assert_eq!(
        w.rec.backlog_bytes(),
        600 * (64 << 10) - BACKLOG_STEP,
        "the first step only"
    );
    // Live frames go on for both; the pre-roll's after its backlog.
    let mut turns = 0;
    for i in 600..630 {
        let out = IngestOutput {
            stream: Some(id),
            frames: vec![frame(i)],
            ..Default::default()
        };
        let now = w.now(i * 33);
        w.rec.on_ingest(&out, &mut w.reg, now);
        w.rec.pump(2 << 20, now);
        let _ = w.ops();
        turns += 1;
    }
    while w.rec.has_backlog() {
        let now = w.now(21_000);
        w.rec.pump(2 << 20, now);
        let _ = w.ops();
        turns += 1;
        assert!(turns < 1000);
    }
    assert!(turns > 10, "fed in steps: {turns}");
    assert_eq!(w.task("pre").state, RecordState::Recording);
    assert_eq!(w.task("live").state, RecordState::Recording);
    w.end(22_000);
    let pre = &w.task("pre").finished[0];
    // From the first keyframe held to the last frame: nothing lost.
    assert_eq!(pre.record_ms, 629 * 3000 / 90, "{pre:?}");
}

#[test]
fn a_backlog_the_disk_never_drains_fails_its_record_alone() {
    let mut w = World::with_pre_roll(120_000);
    w.publish("s", 0);
    w.add(r#"{"id":"live","stream":{"name":"s"},"filePath":"live.ts","infoPath":"live.xml"}"#);
    let id = w.stream.unwrap();
    let frame = |i: i64| Frame {
        track: 1,
        pts: i * 3000,
        dts: i * 3000,
        keyframe: i % 30 == 0,
        data: Bytes::from(vec![0u8; 256 << 10]),
    };
    let mut i = 0;
    let mut push = |w: &mut World, n: i64| {
        for _ in 0..n {
            let out = IngestOutput {
                stream: Some(id),
                frames: vec![frame(i)],
                ..Default::default()
            };
            let now = w.now(i * 33);
            w.rec.on_ingest(&out, &mut w.reg, now);
            i += 1;
        }
        let _ = w.ops();
    };
    push(&mut w, 240);
    w.add(r#"{"id":"pre","stream":{"name":"s"},"preRoll":120000,"filePath":"pre.ts","infoPath":"pre.xml"}"#);
    // No room ever: the backlog grows to its bound, then its record fails.
    push(&mut w, 1000);
    assert!(w.rec.backlog_bytes() <= MAX_BACKLOG);
    assert_eq!(w.task("pre").state, RecordState::Error);
    assert!(w
        .task("pre")
        .last_error
        .as_deref()
        .unwrap()
        .contains("not keeping up"));
    assert_eq!(w.task("live").state, RecordState::Recording);
}
