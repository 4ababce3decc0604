//! HLS dumps (DECISIONS section 10): a stream's LL-HLS output written to a
//! directory as it is made, as a playlist that plays back as VOD once the
//! dump ends: the init sections, every complete segment, a chunklist per
//! track (EVENT while running, `EXT-X-ENDLIST` at the end) and the master
//! playlists asked for, under the live output's file names. OME's info
//! file (`HLSDumpInfo`) lists what was written. Started by `:startHlsDump`
//! or by `<LLHLS><Dumps><Dump>` for matching streams; sans-IO: the bytes
//! leave as [`FileOp`]s for the writer thread.

use super::playlist::{chunklist_name, init_name, master, segment_name};
use super::{target_duration, StreamHls};
use crate::files::PathError;
use crate::files::{FileEvent, FileId, FileOp, DUMP_FILE};
pub use crate::state::app::{DumpConfig, DumpsSpec};
use crate::state::streams::StreamId;
use crate::state::task::TaskKey;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt::Write;
use std::path::PathBuf;

/// API-made dumps in the state file (automatic ones are made again with
/// their streams): after a restart they are listed as `Completed` (a stop
/// ends every dump with `EXT-X-ENDLIST`), until `:stopHlsDump` frees them.
pub static KIND: crate::state::store::TaskKind = crate::state::store::TaskKind {
    list: "hlsDumps",
    item: "hlsDump",
    id_field: "id",
};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DumpSpec {
    pub id: String,
    pub vhost: String,
    pub app: String,
    /// The output stream name.
    pub stream: String,
    /// The directory, absolute.
    pub output_path: PathBuf,
    /// Master playlists to write (default `llhls.m3u8`).
    pub playlists: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    pub created_ms: i64,
    /// Made by `:startHlsDump` (kept in the state file), not by a
    /// `<Dump>` of the config.
    #[serde(default)]
    pub api: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpStatus {
    Running,
    Completed,
    Error,
}

impl DumpStatus {
    pub fn name(self) -> &'static str {
        match self {
            DumpStatus::Running => "Running",
            DumpStatus::Completed => "Completed",
            DumpStatus::Error => "Error",
        }
    }
}

#[derive(Debug, Clone)]
pub struct DumpTask {
    pub spec: DumpSpec,
    pub status: DumpStatus,
    pub last_error: Option<String>,
    pub segments: u64,
    pub bytes: u64,
    seq: u64,
}

/// Dumps kept in the table (finished ones beyond it are dropped, oldest
/// first).
pub const MAX_KEPT: usize = 1000;

/// The dumps, running and finished (a finished one's id may be used
/// again; `:stopHlsDump` removes it).
#[derive(Debug, Default)]
pub struct DumpTable {
    dumps: HashMap<TaskKey, DumpTask>,
    next_seq: u64,
}

impl DumpTable {
    pub fn get(&self, key: &TaskKey) -> Option<&DumpTask> {
        self.dumps.get(key)
    }

    pub fn get_mut(&mut self, key: &TaskKey) -> Option<&mut DumpTask> {
        self.dumps.get_mut(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = &DumpTask> {
        self.dumps.values()
    }

    pub fn insert(&mut self, spec: DumpSpec) {
        // Finished dumps are kept to be listed, the oldest dropped first
        // (automatic dumps make one per stream start).
        while self.dumps.len() >= MAX_KEPT {
            let oldest = self
                .dumps
                .iter()
                .filter(|(_, d)| d.status != DumpStatus::Running)
                .min_by_key(|(_, d)| d.seq)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    self.dumps.remove(&k);
                }
                None => break,
            }
        }
        self.next_seq += 1;
        let key = TaskKey {
            vhost: spec.vhost.clone(),
            app: spec.app.clone(),
            id: spec.id.clone(),
        };
        self.dumps.insert(
            key,
            DumpTask {
                spec,
                status: DumpStatus::Running,
                last_error: None,
                segments: 0,
                bytes: 0,
                seq: self.next_seq,
            },
        );
    }

    /// A dump from the state file: finished (kiln stopped since).
    pub fn insert_finished(&mut self, spec: DumpSpec) {
        let key = TaskKey {
            vhost: spec.vhost.clone(),
            app: spec.app.clone(),
            id: spec.id.clone(),
        };
        self.insert(spec);
        if let Some(d) = self.dumps.get_mut(&key) {
            d.status = DumpStatus::Completed;
        }
    }

    /// The specs of the API-made dumps, by creation (for the state file).
    pub fn api_specs(&self) -> Vec<&DumpSpec> {
        let mut v: Vec<&DumpTask> = self.dumps.values().filter(|d| d.spec.api).collect();
        v.sort_unstable_by_key(|d| d.seq);
        v.into_iter().map(|d| &d.spec).collect()
    }

    pub fn remove(&mut self, key: &TaskKey) -> Option<DumpTask> {
        self.dumps.remove(key)
    }

    /// Dumps of an app's output stream (all of the app's when `None`), by
    /// creation.
    pub fn of(&self, vhost: &str, app: &str, stream: Option<&str>) -> Vec<(&TaskKey, &DumpTask)> {
        let mut v: Vec<(&TaskKey, &DumpTask)> = self
            .dumps
            .iter()
            .filter(|(k, d)| {
                k.vhost == vhost && k.app == app && stream.is_none_or(|s| d.spec.stream == s)
            })
            .collect();
        v.sort_unstable_by_key(|(_, d)| d.seq);
        v
    }

    pub fn len(&self) -> usize {
        self.dumps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.dumps.is_empty()
    }
}

/// `:startHlsDump` body (OME's fields).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartDumpRequest {
    pub output_stream_name: Option<String>,
    pub id: Option<String>,
    pub output_path: Option<String>,
    pub playlist: Option<Vec<String>>,
    pub info_file: Option<String>,
    pub user_data: Option<String>,
}

/// `:stopHlsDump` body.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StopDumpRequest {
    pub output_stream_name: Option<String>,
    pub id: Option<String>,
}

/// Why a dump request is refused (400 with the text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DumpError {
    Missing(&'static str),
    BadId,
    BadPlaylist(String),
    /// `outputPath` or `infoFile` (the field) outside `<Dumps><RootPath>`.
    OutsideRoot {
        field: &'static str,
        path: String,
        root: String,
    },
    Path(PathError),
}

impl std::fmt::Display for DumpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DumpError::Missing(what) => write!(f, "There is no required parameter [{what}]"),
            DumpError::BadId => f.write_str("id must be 1-255 printable characters"),
            DumpError::BadPlaylist(p) => write!(
                f,
                "playlist [{}] must be a file name ending in .m3u8",
                p.escape_debug()
            ),
            DumpError::OutsideRoot { field, path, root } => write!(
                f,
                "{field} [{}] is outside <LLHLS><Dumps><RootPath> [{}]",
                path.escape_debug(),
                root.escape_debug()
            ),
            DumpError::Path(e) => e.fmt(f),
        }
    }
}

/// Checks a `:startHlsDump` body; `root`: `<LLHLS><Dumps><RootPath>`.
pub fn validate_start(
    req: StartDumpRequest,
    vhost: &str,
    app: &str,
    root: Option<&str>,
    now_ms: i64,
) -> Result<DumpSpec, DumpError> {
    let stream = req
        .output_stream_name
        .filter(|s| !s.is_empty())
        .ok_or(DumpError::Missing("outputStreamName"))?;
    let id = req
        .id
        .filter(|s| !s.is_empty())
        .ok_or(DumpError::Missing("id"))?;
    if id.len() > 255 || id.chars().any(char::is_control) {
        return Err(DumpError::BadId);
    }
    let output_path = req
        .output_path
        .filter(|s| !s.is_empty())
        .ok_or(DumpError::Missing("outputPath"))?;
    let output_path = dump_path(root, "outputPath", &output_path)?;
    let playlists = req.playlist.unwrap_or_else(|| vec!["llhls.m3u8".into()]);
    for p in &playlists {
        if !valid_playlist_name(p) {
            return Err(DumpError::BadPlaylist(p.clone()));
        }
    }
    let info_file = match req.info_file.filter(|s| !s.is_empty()) {
        Some(f) => Some(dump_path(root, "infoFile", &f)?),
        None => None,
    };
    Ok(DumpSpec {
        id,
        vhost: vhost.to_string(),
        app: app.to_string(),
        stream,
        output_path,
        playlists,
        info_file,
        user_data: req.user_data,
        created_ms: now_ms,
        api: true,
    })
}

/// Where a dump's `field` (`outputPath`, `infoFile`) is written: a relative
/// path under the root; an absolute one exactly there, if it is inside the
/// root (an OME script looks for it where it said).
fn dump_path(root: Option<&str>, field: &'static str, path: &str) -> Result<PathBuf, DumpError> {
    crate::files::resolve_exact(root, path).map_err(|e| match e {
        PathError::OutsideRoot(path, root) => DumpError::OutsideRoot { field, path, root },
        e => DumpError::Path(e),
    })
}

fn valid_playlist_name(p: &str) -> bool {
    p.ends_with(".m3u8")
        && p.len() <= 255
        && !p.contains('/')
        && p != ".m3u8"
        && !p.chars().any(char::is_control)
}

impl DumpsSpec {
    /// What is wrong, if anything (the field and why).
    pub fn problem(&self) -> Option<String> {
        if self.root_path.as_ref().is_some_and(|r| !r.starts_with('/')) {
            return Some("rootPath must be an absolute path".into());
        }
        for d in &self.dump {
            if d.target_stream_name.is_empty() || d.output_path.is_empty() {
                return Some("every dump needs targetStreamName and outputPath".into());
            }
            if let Some(root) = &self.root_path {
                if let Err(DumpError::OutsideRoot { path, root, .. }) =
                    dump_path(Some(root), "OutputPath", &d.output_path)
                {
                    return Some(format!(
                        "<OutputPath> [{}] is outside <LLHLS><Dumps><RootPath> [{}]",
                        path.escape_debug(),
                        root.escape_debug()
                    ));
                }
            }
            if let Some(p) = d.playlists.iter().find(|p| !valid_playlist_name(p)) {
                return Some(format!(
                    "playlist [{}] must be a file name ending in .m3u8",
                    p.escape_debug()
                ));
            }
        }
        None
    }

    /// The automatic dumps of a stream starting now.
    pub fn for_stream(
        &self,
        vhost: &str,
        app: &str,
        stream: &str,
        now_ms: i64,
        utc_offset: i32,
    ) -> Vec<DumpSpec> {
        self.dump
            .iter()
            .enumerate()
            .filter(|(_, d)| d.enable && crate::wildcard::matches(&d.target_stream_name, stream))
            .filter_map(|(i, d)| {
                let path =
                    expand_output_path(&d.output_path, vhost, app, stream, now_ms, utc_offset);
                let output_path =
                    crate::files::resolve_exact(self.root_path.as_deref(), &path).ok()?;
                Some(DumpSpec {
                    id: format!("auto_{stream}_{i}_{now_ms}"),
                    vhost: vhost.to_string(),
                    app: app.to_string(),
                    stream: stream.to_string(),
                    output_path,
                    playlists: if d.playlists.is_empty() {
                        vec!["llhls.m3u8".into()]
                    } else {
                        d.playlists.clone()
                    },
                    info_file: None,
                    user_data: None,
                    created_ms: now_ms,
                    api: false,
                })
            })
            .collect()
    }
}

/// OME's `<OutputPath>` macros: `${VHostName}`, `${AppName}`,
/// `${StreamName}` (with `/` made `_`), `${YYYY}` `${MM}` `${DD}` `${hh}`
/// `${mm}` `${ss}`, `${z}` (+0900), `${ISO8601}`.
pub fn expand_output_path(
    template: &str,
    vhost: &str,
    app: &str,
    stream: &str,
    now_ms: i64,
    offset: i32,
) -> String {
    let (y, mo, d, h, mi, s) = crate::clock::civil(now_ms, offset);
    let off = offset.unsigned_abs();
    let z = format!(
        "{}{:02}{:02}",
        if offset < 0 { '-' } else { '+' },
        off / 3600,
        (off / 60) % 60
    );
    let safe = |x: &str| {
        let x = x.replace('/', "_");
        if x == ".." || x == "." {
            "_".to_string()
        } else {
            x
        }
    };
    template
        .replace("${VHostName}", &safe(vhost))
        .replace("${AppName}", &safe(app))
        .replace("${StreamName}", &safe(stream))
        .replace("${YYYY}", &format!("{y:04}"))
        .replace("${MM}", &format!("{mo:02}"))
        .replace("${DD}", &format!("{d:02}"))
        .replace("${hh}", &format!("{h:02}"))
        .replace("${mm}", &format!("{mi:02}"))
        .replace("${ss}", &format!("{s:02}"))
        .replace("${z}", &z)
        .replace("${ISO8601}", &crate::clock::format_iso8601(now_ms, offset))
}

/// One track's dumped segments.
#[derive(Debug, Default)]
struct DumpedTrack {
    /// The next segment to write.
    next_msn: Option<u64>,
    /// (msn, seconds, unix ms of the first sample).
    entries: Vec<(u64, f64, i64)>,
    longest: f64,
}

/// A running dump's progress (held by the HLS manager with the stream's
/// output).
#[derive(Debug)]
pub struct DumpWriter {
    pub key: TaskKey,
    pub stream: StreamId,
    dir: PathBuf,
    started: bool,
    tracks: HashMap<u32, DumpedTrack>,
    /// (time, file) of everything written, for the info file.
    items: Vec<(i64, PathBuf)>,
    info_written: bool,
}

/// Gives the writer's ids of dump files.
#[derive(Debug, Default)]
pub struct DumpFiles {
    next: FileId,
    /// File -> dump.
    owners: HashMap<FileId, TaskKey>,
}

impl DumpFiles {
    fn id(&mut self, key: &TaskKey) -> FileId {
        self.next += 1;
        let id = DUMP_FILE | self.next;
        self.owners.insert(id, key.clone());
        id
    }

    /// The dump a writer answer is about (the answer is consumed).
    pub fn owner(&mut self, ev: &FileEvent) -> Option<TaskKey> {
        self.owners.remove(&ev.file())
    }
}

impl DumpWriter {
    pub fn new(key: TaskKey, stream: StreamId, dir: PathBuf) -> Self {
        DumpWriter {
            key,
            stream,
            dir,
            started: false,
            tracks: HashMap::new(),
            items: Vec::new(),
            info_written: false,
        }
    }

    fn put(
        &mut self,
        path: PathBuf,
        data: Vec<u8>,
        now_ms: i64,
        files: &mut DumpFiles,
        ops: &mut Vec<FileOp>,
    ) {
        let file = files.id(&self.key);
        self.items.push((now_ms, path.clone()));
        ops.push(FileOp::Put { file, path, data });
    }

    fn replace(
        &mut self,
        path: PathBuf,
        data: String,
        fresh: bool,
        files: &mut DumpFiles,
        ops: &mut Vec<FileOp>,
    ) {
        let file = files.id(&self.key);
        ops.push(FileOp::Replace {
            file,
            path,
            data: data.into_bytes(),
            fresh,
        });
    }

    /// Writes what the output made since the last call: the init
    /// sections and masters first, then each newly complete segment and
    /// the chunklists naming it. `end`: the last call (ENDLIST, the info
    /// file's final status).
    #[allow(clippy::too_many_arguments)]
    pub fn poll(
        &mut self,
        s: &StreamHls,
        task: &mut DumpTask,
        end: bool,
        now_ms: i64,
        utc_offset: i32,
        files: &mut DumpFiles,
        ops: &mut Vec<FileOp>,
    ) {
        let mut changed = end;
        if !self.started {
            self.started = true;
            for t in &s.tracks {
                let path = self.dir.join(init_name(t, &s.key));
                self.put(path, t.init.to_vec(), now_ms, files, ops);
            }
            let m = master(s);
            for name in task.spec.playlists.clone() {
                let path = self.dir.join(name);
                self.items.push((now_ms, path.clone()));
                self.replace(path, m.clone(), true, files, ops);
            }
            changed = true;
        }
        for t in &s.tracks {
            let done = self.tracks.entry(t.track.id).or_default();
            let first = t.segments.front().map_or(0, |x| x.msn);
            let mut next = done.next_msn.unwrap_or(first).max(first);
            let mut new = Vec::new();
            while let Some(seg) = t.segment(next).filter(|x| x.complete) {
                let data: Vec<u8> = seg
                    .parts
                    .iter()
                    .flat_map(|p| p.data.iter().copied())
                    .collect();
                new.push((seg.msn, seg.duration(), seg.start_ms, data));
                next += 1;
            }
            done.next_msn = Some(next);
            for (msn, duration, start_ms, data) in new {
                let done = self.tracks.entry(t.track.id).or_default();
                done.entries.push((msn, duration, start_ms));
                done.longest = done.longest.max(duration);
                task.segments += 1;
                task.bytes += data.len() as u64;
                let path = self.dir.join(segment_name(t, msn, &s.key));
                self.put(path, data, now_ms, files, ops);
                changed = true;
            }
        }
        if !changed {
            return;
        }
        for t in &s.tracks {
            let Some(done) = self.tracks.get(&t.track.id) else {
                continue;
            };
            let mut o = String::from("#EXTM3U\n#EXT-X-VERSION:7\n");
            let target = target_duration(done.longest, s.config.segment_target);
            let _ = writeln!(o, "#EXT-X-TARGETDURATION:{target}");
            let first = done.entries.first().map_or(0, |e| e.0);
            let _ = writeln!(o, "#EXT-X-MEDIA-SEQUENCE:{first}");
            o.push_str("#EXT-X-PLAYLIST-TYPE:EVENT\n#EXT-X-INDEPENDENT-SEGMENTS\n");
            let _ = writeln!(o, "#EXT-X-MAP:URI=\"{}\"", init_name(t, &s.key));
            let mut last = None;
            for &(msn, duration, start_ms) in &done.entries {
                if last.is_some_and(|l: u64| msn != l + 1) {
                    o.push_str("#EXT-X-DISCONTINUITY\n");
                }
                last = Some(msn);
                let _ = writeln!(
                    o,
                    "#EXT-X-PROGRAM-DATE-TIME:{}",
                    crate::clock::format_iso8601(start_ms, utc_offset)
                );
                let _ = writeln!(
                    o,
                    "#EXTINF:{duration:.3},\n{}",
                    segment_name(t, msn, &s.key)
                );
            }
            if end {
                o.push_str("#EXT-X-ENDLIST\n");
            }
            let path = self.dir.join(chunklist_name(t, &s.key));
            if !self.items.iter().any(|(_, p)| *p == path) {
                self.items.push((now_ms, path.clone()));
            }
            self.replace(path, o, false, files, ops);
        }
        if end && task.status == DumpStatus::Running {
            task.status = DumpStatus::Completed;
        }
        self.write_info(task, utc_offset, files, ops);
    }

    /// The info file (when the dump has one), whole.
    pub fn write_info(
        &mut self,
        task: &DumpTask,
        utc_offset: i32,
        files: &mut DumpFiles,
        ops: &mut Vec<FileOp>,
    ) {
        let Some(path) = task.spec.info_file.clone() else {
            return;
        };
        let xml = info_xml(task, &self.items, utc_offset);
        let fresh = !self.info_written;
        self.info_written = true;
        self.replace(path, xml, fresh, files, ops);
    }
}

/// OME's `HLSDumpInfo`.
fn info_xml(task: &DumpTask, items: &[(i64, PathBuf)], utc_offset: i32) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let s = &task.spec;
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<HLSDumpInfo>\n");
    if let Some(u) = &s.user_data {
        let _ = writeln!(x, "  <UserData>{}</UserData>", esc(u));
    }
    let _ = writeln!(
        x,
        "  <Stream>/{}/{}/{}</Stream>\n  <Status>{}</Status>\n  <Items>",
        esc(&s.vhost),
        esc(&s.app),
        esc(&s.stream),
        task.status.name()
    );
    for (i, (time, file)) in items.iter().enumerate() {
        let _ = writeln!(
            x,
            "    <Item>\n      <Seq>{i}</Seq>\n      <Time>{}</Time>\n      <File>{}</File>\n    </Item>",
            crate::clock::format_iso8601(*time, utc_offset),
            esc(&file.display().to_string())
        );
    }
    x.push_str("  </Items>\n</HLSDumpInfo>\n");
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hls::fuzz::{aac, h264};
    use crate::hls::LlhlsConfig;
    use crate::media::Frame;
    use bytes::Bytes;
    use std::time::Duration;

    fn spec() -> DumpSpec {
        let req: StartDumpRequest = serde_json::from_str(
            r#"{"outputStreamName":"s","id":"d","outputPath":"d1","infoFile":"d1.xml","userData":"a<b"}"#,
        )
        .unwrap();
        validate_start(req, "default", "app", Some("/srv/dumps"), 0).unwrap()
    }

    #[test]
    fn requests_follow_the_path_rules() {
        let s = spec();
        assert_eq!(s.output_path, PathBuf::from("/srv/dumps/d1"));
        assert_eq!(s.playlists, ["llhls.m3u8"]);
        let err = |json: &str| {
            let req: StartDumpRequest = serde_json::from_str(json).unwrap();
            validate_start(req, "v", "a", Some("/srv/dumps"), 0)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(r#"{"id":"d","outputPath":"x"}"#),
            "There is no required parameter [outputStreamName]"
        );
        assert_eq!(
            err(r#"{"outputStreamName":"s","outputPath":"x"}"#),
            "There is no required parameter [id]"
        );
        // An absolute path is written as given, inside the root only.
        assert_eq!(
            err(r#"{"outputStreamName":"s","id":"d","outputPath":"/../etc"}"#),
            "outputPath [/../etc] is outside <LLHLS><Dumps><RootPath> [/srv/dumps]"
        );
        assert_eq!(
            err(r#"{"outputStreamName":"s","id":"d","outputPath":"/tmp/kiln/dumps/cam"}"#),
            "outputPath [/tmp/kiln/dumps/cam] is outside <LLHLS><Dumps><RootPath> [/srv/dumps]"
        );
        assert_eq!(
            err(r#"{"outputStreamName":"s","id":"d","outputPath":"/srv/dumps/../etc"}"#),
            "outputPath [/srv/dumps/../etc] is outside <LLHLS><Dumps><RootPath> [/srv/dumps]"
        );
        assert_eq!(
            err(r#"{"outputStreamName":"s","id":"d","outputPath":"x","infoFile":"/srv/x.xml"}"#),
            "infoFile [/srv/x.xml] is outside <LLHLS><Dumps><RootPath> [/srv/dumps]"
        );
        let exact: StartDumpRequest = serde_json::from_str(
            r#"{"outputStreamName":"s","id":"d","outputPath":"/srv/dumps/cam","infoFile":"/srv/dumps/cam.xml"}"#,
        )
        .unwrap();
        let exact = validate_start(exact, "v", "a", Some("/srv/dumps"), 0).unwrap();
        assert_eq!(exact.output_path, PathBuf::from("/srv/dumps/cam"));
        assert_eq!(exact.info_file, Some(PathBuf::from("/srv/dumps/cam.xml")));
        // Automatic dumps: the same rule, as a config error.
        let auto = |path: &str| DumpsSpec {
            root_path: Some("/srv/dumps".into()),
            dump: vec![crate::state::app::DumpConfig {
                enable: true,
                target_stream_name: "*".into(),
                playlists: Vec::new(),
                output_path: path.into(),
            }],
        };
        assert_eq!(
            auto("/tmp/x/${StreamName}").problem().as_deref(),
            Some("<OutputPath> [/tmp/x/${StreamName}] is outside <LLHLS><Dumps><RootPath> [/srv/dumps]")
        );
        assert_eq!(auto("/srv/dumps/${StreamName}").problem(), None);
        assert_eq!(auto("${StreamName}").problem(), None);
        assert!(err(
            r#"{"outputStreamName":"s","id":"d","outputPath":"x","playlist":["../a.m3u8"]}"#
        )
        .contains("playlist"));
        assert_eq!(
            expand_output_path(
                "/d/${VHostName}_${AppName}_${StreamName}/${YYYY}${MM}${DD}_${hh}${mm}${ss}${z}",
                "v",
                "a",
                "..",
                1_795_437_296_000,
                0
            ),
            "/d/v_a__/20261123_123456+0000"
        );
    }

    #[test]
    fn a_dump_writes_segments_once_and_ends_as_vod() {
        let config = LlhlsConfig {
            part_target: Duration::from_millis(500),
            segment_target: Duration::from_secs(1),
            segment_count: 3,
            part_hold_back: Duration::ZERO,
            first_segment_timeout: Duration::ZERO,
        };
        let mut s = StreamHls::new(&[h264(), aac()], config, "k".into(), 0);
        let mut table = DumpTable::default();
        table.insert(spec());
        let key = TaskKey {
            vhost: "default".into(),
            app: "app".into(),
            id: "d".into(),
        };
        let mut w = DumpWriter::new(key.clone(), 1, PathBuf::from("/srv/dumps/d1"));
        let mut files = DumpFiles::default();
        let mut ops = Vec::new();
        for i in 0..300i64 {
            s.push(&Frame {
                track: 1 + (i % 2) as u32,
                pts: i * 1500,
                dts: i * 1500,
                keyframe: i % 60 == 0,
                data: Bytes::from_static(&[0, 0, 0, 1, 0x65]),
            });
            if i % 7 == 0 {
                w.poll(
                    &s,
                    table.get_mut(&key).unwrap(),
                    false,
                    i,
                    0,
                    &mut files,
                    &mut ops,
                );
            }
        }
        s.end();
        w.poll(
            &s,
            table.get_mut(&key).unwrap(),
            true,
            999,
            0,
            &mut files,
            &mut ops,
        );
        let puts: Vec<String> = ops
            .iter()
            .filter_map(|o| match o {
                FileOp::Put { path, .. } => Some(path.display().to_string()),
                _ => None,
            })
            .collect();
        let mut unique = puts.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), puts.len(), "each file once");
        assert!(puts.iter().any(|p| p.ends_with("init_1_video_k_llhls.m4s")));
        // 5 s of video in 1 s segments, per track.
        assert_eq!(puts.iter().filter(|p| p.contains("seg_1_")).count(), 5);
        let last_chunklist = ops
            .iter()
            .rev()
            .find_map(|o| match o {
                FileOp::Replace { path, data, .. }
                    if path.ends_with("chunklist_1_video_k_llhls.m3u8") =>
                {
                    Some(String::from_utf8(data.clone()).unwrap())
                }
                _ => None,
            })
            .unwrap();
        assert!(
            last_chunklist.ends_with("#EXT-X-ENDLIST\n"),
            "{last_chunklist}"
        );
        assert_eq!(last_chunklist.matches("#EXTINF").count(), 5);
        assert!(last_chunklist.contains("#EXT-X-MEDIA-SEQUENCE:0"));
        let t = table.get(&key).unwrap();
        assert_eq!(t.status, DumpStatus::Completed);
        let info = ops
            .iter()
            .rev()
            .find_map(|o| match o {
                FileOp::Replace { path, data, .. } if path.ends_with("d1.xml") => {
                    Some(String::from_utf8(data.clone()).unwrap())
                }
                _ => None,
            })
            .unwrap();
        assert!(info.contains("<Status>Completed</Status>"));
        assert!(info.contains("<UserData>a&lt;b</UserData>"));
        assert!(info.contains("<Stream>/default/app/s</Stream>"));
        // The first info write refuses an existing file; later ones replace.
        let fresh: Vec<bool> = ops
            .iter()
            .filter_map(|o| match o {
                FileOp::Replace { path, fresh, .. } if path.ends_with("d1.xml") => Some(*fresh),
                _ => None,
            })
            .collect();
        assert!(fresh[0] && fresh[1..].iter().all(|f| !f));
    }
}
