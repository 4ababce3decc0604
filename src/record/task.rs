//! Record tasks: the table, their states and counters (DECISIONS section
//! 10). A record waits in `ready` until its stream exists (reserved),
//! `recording` while files are written, back to `ready` when the stream
//! ends (the next session starts a new file), `error` when a file cannot be
//! written (the reason kept; the record stays until `:stopRecord`), and on
//! `:stopRecord` `stopping` (what the answer shows): its open file is
//! closed and the record removed at once, so its id is free again.
//!
//! Plain data; files are written by [`super::manager`] and the writer.

use super::request::RecordSpec;
use crate::state::task::TaskKey;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    Ready,
    Recording,
    Stopping,
    Error,
}

impl RecordState {
    pub fn name(self) -> &'static str {
        match self {
            RecordState::Ready => "ready",
            RecordState::Recording => "recording",
            RecordState::Stopping => "stopping",
            RecordState::Error => "error",
        }
    }
}

/// One finished file, for the info XML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    pub file_path: String,
    pub info_path: String,
    pub sequence: u64,
    pub record_bytes: u64,
    pub record_ms: u64,
    pub start_ms: i64,
    pub finish_ms: i64,
    pub last: bool,
    /// Unix ms when a disk budget deleted it (kiln extension).
    pub deleted_ms: Option<i64>,
}

/// The info files keep at most this many entries per record (the oldest
/// go first).
pub const MAX_FILE_INFOS: usize = 1000;

#[derive(Debug, Clone)]
pub struct RecordTask {
    pub spec: RecordSpec,
    pub state: RecordState,
    /// OME's `${TransactionId}`: one per start of the record.
    pub transaction: String,
    /// The current (or last) file's sequence number, from 0.
    pub sequence: u64,
    /// Files written so far (a new file is numbered `files`).
    pub files: u64,
    pub output_file_path: Option<String>,
    pub output_info_path: Option<String>,
    /// The current file.
    pub record_bytes: u64,
    pub record_ms: u64,
    /// Finished files.
    pub ended_bytes: u64,
    pub ended_ms: u64,
    /// Unix ms: the first file's start; the current file's start.
    pub start_ms: Option<i64>,
    pub file_start_ms: Option<i64>,
    pub finish_ms: Option<i64>,
    pub last_error: Option<String>,
    /// Unix ms when `last_error` happened.
    pub last_error_ms: Option<i64>,
    pub finished: Vec<FileInfo>,
    /// Creation order (set by the table).
    pub seq: u64,
    /// The start time `:startRecord` answered with (its `startTime` and
    /// `${StartTime}` in `outputFilePath`): the first file is named with
    /// it, so the answer names the file that is written.
    pub promised_start_ms: Option<i64>,
}

impl RecordTask {
    pub fn new(spec: RecordSpec) -> Self {
        let transaction = transaction_id(&spec);
        RecordTask {
            spec,
            state: RecordState::Ready,
            transaction,
            sequence: 0,
            files: 0,
            output_file_path: None,
            output_info_path: None,
            record_bytes: 0,
            record_ms: 0,
            ended_bytes: 0,
            ended_ms: 0,
            start_ms: None,
            promised_start_ms: None,
            file_start_ms: None,
            finish_ms: None,
            last_error: None,
            last_error_ms: None,
            finished: Vec::new(),
            seq: 0,
        }
    }

    pub fn key(&self) -> TaskKey {
        TaskKey {
            vhost: self.spec.vhost.clone(),
            app: self.spec.app.clone(),
            id: self.spec.id.clone(),
        }
    }

    /// A file was closed: its figures go to the totals and the info list.
    pub fn file_done(&mut self, info: FileInfo) {
        self.ended_bytes += info.record_bytes;
        self.ended_ms += info.record_ms;
        self.record_bytes = 0;
        self.record_ms = 0;
        self.finish_ms = Some(info.finish_ms);
        if self.finished.len() >= MAX_FILE_INFOS {
            self.finished.remove(0);
        }
        self.finished.push(info);
    }
}

/// The files an info XML (as [`info_xml`] wrote it at `info_path`, before
/// a restart) lists for this record, taken back: the list goes on and the
/// next file's `${Sequence}` follows the last one's. Entries of other
/// records, and what does not read, are left out. Bounded by the input
/// and [`MAX_FILE_INFOS`].
pub fn resume_from_info(task: &mut RecordTask, info_path: &str, xml: &str) -> usize {
    let field = |entry: &str, name: &str| -> Option<String> {
        let open = format!("<{name}>");
        let at = entry.find(&open)? + open.len();
        let end = at + entry[at..].find("</")?;
        Some(xml_unescape(&entry[at..end]))
    };
    let mut taken = 0;
    for entry in xml.split("<file>").skip(1).take(MAX_FILE_INFOS) {
        if field(entry, "id").as_deref() != Some(task.spec.id.as_str())
            || field(entry, "vhost").as_deref() != Some(task.spec.vhost.as_str())
            || field(entry, "app").as_deref() != Some(task.spec.app.as_str())
        {
            continue;
        }
        let number = |name: &str| field(entry, name).and_then(|v| v.parse::<u64>().ok());
        let time = |name: &str| field(entry, name).and_then(|v| crate::clock::parse_iso8601(&v));
        let (Some(file_path), Some(sequence)) = (field(entry, "filePath"), number("sequence"))
        else {
            continue;
        };
        let info = FileInfo {
            file_path,
            info_path: info_path.to_string(),
            sequence,
            record_bytes: number("recordBytes").unwrap_or(0),
            record_ms: number("recordTime").unwrap_or(0),
            start_ms: time("startTime").unwrap_or(0),
            finish_ms: time("finishTime").unwrap_or(0),
            last: field(entry, "lastSequence").as_deref() == Some("true"),
            deleted_ms: time("deletedTime"),
        };
        task.files = task.files.max(sequence.saturating_add(1));
        task.sequence = task.sequence.max(sequence);
        task.start_ms = Some(
            task.start_ms
                .map_or(info.start_ms, |s| s.min(info.start_ms)),
        );
        task.file_done(info);
        taken += 1;
    }
    taken
}

fn xml_unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// 16 letters and digits from the record's key and creation time (OME's
/// `${TransactionId}` is random; this one only needs to differ between
/// records and starts).
fn transaction_id(spec: &RecordSpec) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&spec.vhost, &spec.app, &spec.id, spec.created_ms).hash(&mut h);
    let mut v = h.finish();
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..16)
        .map(|_| {
            let c = ALPHABET[(v % ALPHABET.len() as u64) as usize] as char;
            v = (v / ALPHABET.len() as u64) ^ v.rotate_left(17);
            c
        })
        .collect()
}

/// The OME-shaped info XML of a record's finished files that share
/// `info_path`.
pub fn info_xml(task: &RecordTask, info_path: &str, utc_offset: i32) -> String {
    let time = |ms: i64| crate::clock::format_iso8601(ms, utc_offset);
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<files>\n");
    for f in task.finished.iter().filter(|f| f.info_path == info_path) {
        let s = &task.spec;
        x.push_str("  <file>\n");
        let mut field = |name: &str, value: &str| {
            x.push_str(&format!("    <{name}>{}</{name}>\n", xml_escape(value)));
        };
        field("transactionId", &task.transaction);
        field("id", &s.id);
        field("vhost", &s.vhost);
        field("app", &s.app);
        field("stream", &s.stream_name);
        field("filePath", &f.file_path);
        field("recordBytes", &f.record_bytes.to_string());
        field("recordTime", &f.record_ms.to_string());
        field("sequence", &f.sequence.to_string());
        if let Some(i) = s.interval_ms {
            field("interval", &i.to_string());
        }
        if let Some(sch) = &s.schedule {
            field("schedule", sch);
        }
        if let Some(l) = s.time_lapse {
            // kiln: a time-lapse file (one keyframe per interval).
            field("keyframesEvery", &l.every_ms.to_string());
            field("timeLapseFps", &l.fps.to_string());
        }
        field("lastSequence", if f.last { "true" } else { "false" });
        field("createdTime", &time(s.created_ms));
        field("startTime", &time(f.start_ms));
        field("finishTime", &time(f.finish_ms));
        if let Some(ms) = f.deleted_ms {
            // kiln: a disk budget deleted the file.
            field("deletedTime", &time(ms));
        }
        x.push_str("  </file>\n");
    }
    x.push_str("</files>\n");
    x
}

fn xml_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if c.is_control() && c != '\t' => {}
            c => o.push(c),
        }
    }
    o
}

#[derive(Debug, Default)]
pub struct RecordTable {
    tasks: HashMap<TaskKey, RecordTask>,
    next_seq: u64,
}

impl RecordTable {
    pub fn iter(&self) -> impl Iterator<Item = &RecordTask> {
        self.tasks.values()
    }

    pub fn get(&self, key: &TaskKey) -> Option<&RecordTask> {
        self.tasks.get(key)
    }

    pub fn get_mut(&mut self, key: &TaskKey) -> Option<&mut RecordTask> {
        self.tasks.get_mut(key)
    }

    pub fn insert(&mut self, mut task: RecordTask) {
        self.next_seq += 1;
        task.seq = self.next_seq;
        self.tasks.insert(task.key(), task);
    }

    pub fn remove(&mut self, key: &TaskKey) -> Option<RecordTask> {
        self.tasks.remove(key)
    }

    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Tasks of an app, by creation.
    pub fn of_app(&self, vhost: &str, app: &str) -> Vec<&RecordTask> {
        let mut v: Vec<&RecordTask> = self
            .tasks
            .values()
            .filter(|t| t.spec.vhost == vhost && t.spec.app == app)
            .collect();
        v.sort_unstable_by_key(|t| t.seq);
        v
    }

    /// Removes the tasks of a host (or one of its apps).
    pub fn remove_of(&mut self, vhost: &str, app: Option<&str>) -> Vec<RecordTask> {
        let keys: Vec<TaskKey> = self
            .tasks
            .keys()
            .filter(|k| k.vhost == vhost && app.is_none_or(|a| k.app == a))
            .cloned()
            .collect();
        keys.iter().filter_map(|k| self.tasks.remove(k)).collect()
    }

    pub fn keys(&self) -> Vec<TaskKey> {
        let mut v: Vec<&RecordTask> = self.tasks.values().collect();
        v.sort_unstable_by_key(|t| t.seq);
        v.into_iter().map(RecordTask::key).collect()
    }

    /// The specs, in creation order (the durable state).
    pub fn specs(&self) -> Vec<RecordSpec> {
        let mut v: Vec<&RecordTask> = self.tasks.values().collect();
        v.sort_unstable_by_key(|t| t.seq);
        v.into_iter().map(|t| t.spec.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: &str) -> RecordSpec {
        RecordSpec {
            id: id.into(),
            vhost: "v".into(),
            app: "a".into(),
            stream_name: "s".into(),
            variant_names: vec![],
            track_ids: vec![],
            file_path: "/r/x.ts".into(),
            info_path: "/r/x.xml".into(),
            interval_ms: Some(20_000),
            schedule: None,
            segmentation_rule: Default::default(),
            metadata: None,
            time_lapse: None,
            pre_roll: None,
            created_ms: 0,
        }
    }

    #[test]
    fn an_info_xml_written_before_a_restart_is_taken_back() {
        let mut before = RecordTask::new(spec("r1"));
        for n in 0..3u64 {
            before.sequence = n;
            before.file_done(FileInfo {
                file_path: format!("/srv/rec/a&b_{n}.mp4"),
                info_path: "/srv/rec/r1.xml".into(),
                sequence: n,
                record_bytes: 1000 + n,
                record_ms: 2000,
                start_ms: 1_700_000_000_000 + n as i64 * 2000,
                finish_ms: 1_700_000_002_000 + n as i64 * 2000,
                last: n == 2,
                deleted_ms: None,
            });
        }
        let xml = info_xml(&before, "/srv/rec/r1.xml", 0);
        let mut after = RecordTask::new(spec("r1"));
        assert_eq!(resume_from_info(&mut after, "/srv/rec/r1.xml", &xml), 3);
        assert_eq!(after.finished, before.finished);
        assert_eq!((after.files, after.sequence), (3, 2));
        assert_eq!(after.ended_bytes, 3003);
        // Another record's entries, and garbage, are left out.
        let mut other = RecordTask::new(spec("r2"));
        assert_eq!(resume_from_info(&mut other, "/srv/rec/r1.xml", &xml), 0);
        for cut in (0..xml.len()).step_by(7) {
            let mut t = RecordTask::new(spec("r1"));
            resume_from_info(&mut t, "/srv/rec/r1.xml", &xml[..cut]);
        }
    }

    #[test]
    fn info_xml_lists_the_files_of_one_info_path_escaped() {
        let mut t = RecordTask::new(spec("r<1>"));
        for (i, info) in ["/r/x.xml", "/r/y.xml", "/r/x.xml"].iter().enumerate() {
            t.file_done(FileInfo {
                file_path: format!("/r/a&b_{i}.ts"),
                info_path: info.to_string(),
                sequence: i as u64,
                record_bytes: 100,
                record_ms: 20_000,
                start_ms: 0,
                finish_ms: 20_000,
                last: i == 2,
                deleted_ms: None,
            });
        }
        let x = info_xml(&t, "/r/x.xml", 0);
        assert_eq!(x.matches("<file>").count(), 2);
        assert!(x.contains("<id>r&lt;1&gt;</id>"));
        assert!(x.contains("<filePath>/r/a&amp;b_2.ts</filePath>"));
        assert!(x.contains("<lastSequence>true</lastSequence>"));
        assert!(x.contains("<interval>20000</interval>"));
        assert_eq!(t.ended_bytes, 300);
        assert_eq!(t.transaction.len(), 16);
    }

    #[test]
    fn the_table_keeps_creation_order_and_drops_by_app() {
        let mut table = RecordTable::default();
        for id in ["b", "a", "c"] {
            table.insert(RecordTask::new(spec(id)));
        }
        let ids: Vec<String> = table
            .of_app("v", "a")
            .iter()
            .map(|t| t.spec.id.clone())
            .collect();
        assert_eq!(ids, ["b", "a", "c"]);
        assert_eq!(table.remove_of("v", Some("a")).len(), 3);
        assert!(table.is_empty());
    }
}
