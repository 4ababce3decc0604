//! The recordings running: each record whose stream is live gets a
//! [`FileMux`] fed from the ingests; its bytes leave as [`FileOp`]s for the
//! writer thread (never written on the loop), whose [`FileEvent`]s come
//! back through [`RecordManager::on_file_event`]. Sans-IO: `now` is passed
//! in, nothing here touches a file.
//!
//! A file starts on a video keyframe (any frame for audio-only selections),
//! beginning with the stream's last GOP when the record starts on a live
//! stream. It is split on the first keyframe after `interval` ms of media
//! or after the wall-clock second the `schedule` names, and closed when the
//! stream ends, its tracks change, or the record is stopped.

use super::mux::FileMux;
use super::preroll::History;
use super::request::{expand, resolve, Container, Macros, Schedule, SegmentationRule};
use super::task::{info_xml, FileInfo, RecordState, RecordTask};
use crate::clock::Now;
pub use crate::files::{FileEvent, FileId, FileOp};
use crate::media::{Frame, MediaKind, Track, TICKS_PER_SECOND};
use crate::state::streams::{IngestOutput, StreamId};
use crate::state::task::TaskKey;
use crate::state::task::{select, Protocol};
use crate::state::Registry;
use budget::Budgets;
use std::collections::HashMap;
use std::path::PathBuf;

struct Current {
    id: FileId,
    path: String,
    info_path: String,
    /// Decode times (stream ticks): the file's first frame and newest.
    first_dts: i64,
    last_dts: i64,
    start_ms: i64,
    /// Schedule splits: the wall-clock time of the next split.
    split_at_ms: Option<i64>,
    bytes: u64,
}

struct Recording {
    stream: StreamId,
    tracks: Vec<Track>,
    container: Container,
    has_video: bool,
    mux: Option<FileMux>,
    file: Option<Current>,
    /// Subtracted from decode times: the file's first (discontinuity) or
    /// the record's first in this stream session (continuity).
    base: Option<i64>,
    /// Each track's newest decode time written: a frame at or before it
    /// is not written again (the GOP a record starts with may hold the
    /// frames of the ingest batch that started it).
    last_dts: HashMap<crate::media::TrackId, i64>,
    /// A time-lapse: the keyframes kept so far.
    lapse: Option<Lapse>,
    /// Its disk budgets, and the free space the writer last read.
    budget: Budgets,
    free: Option<u64>,
    /// The open file's bytes when the budgets were last kept.
    budget_checked: u64,
    /// Frames not yet handed to the mux: a pre-roll's history, and the
    /// live frames that came after it, fed at the pace the writer drains
    /// ([`RecordManager::pump`]), so one record's burst never fills the
    /// writer's queue that every record shares.
    backlog: std::collections::VecDeque<Frame>,
    backlog_bytes: usize,
}

/// Frame bytes a backlog hands over at the start, before the writer says
/// how much room it has.
pub const BACKLOG_STEP: usize = 4 << 20;

/// Frame bytes a backlog may hold: a full pre-roll history and as much
/// again that came while it was written. Past it the disk is not keeping
/// up with this record, and it alone fails.
pub const MAX_BACKLOG: usize = 2 * super::preroll::MAX_BYTES;

/// A time-lapse's progress: the source time of the last keyframe kept,
/// and how many the current file holds (its film time).
struct Lapse {
    every: i64,
    step: i64,
    last_kept: Option<i64>,
    frames: i64,
}

impl Lapse {
    fn new(l: crate::record::request::TimeLapse) -> Lapse {
        Lapse {
            every: (l.every_ms as i64).saturating_mul(TICKS_PER_SECOND / 1000),
            step: TICKS_PER_SECOND / i64::from(l.fps.max(1)),
            last_kept: None,
            frames: 0,
        }
    }

    /// Is this frame one to keep (a video keyframe, `every` after the
    /// last kept)?
    fn keeps(&self, is_video: bool, frame: &Frame) -> bool {
        is_video
            && frame.keyframe
            && self
                .last_kept
                .is_none_or(|t| frame.dts.saturating_sub(t) >= self.every)
    }
}

#[derive(Default)]
pub struct RecordManager {
    /// The record tasks (the API adds and removes them).
    pub tasks: crate::record::task::RecordTable,
    recordings: HashMap<TaskKey, Recording>,
    /// The recent media of the live streams whose application allows a
    /// pre-roll (`<FILE><MaxPreRoll>`); none otherwise.
    preroll: HashMap<StreamId, History>,
    out: FileOut,
    /// Bytes of the LL-HLS DVRs per application (vhost, app), as the
    /// loop last told: they count in the disk budgets.
    pub dvr_usage: HashMap<(String, String), u64>,
    /// DVR bytes a budget asks to be given up: (vhost, app, bytes, why),
    /// for the loop to hand to the DVRs.
    pub dvr_trims: Vec<(String, String, u64, String)>,
}

/// The file side of the recordings: the operations for the writer and
/// the files it has open (apart from the recordings, so that one can be
/// changed while the other is written to).
#[derive(Default)]
struct FileOut {
    /// Files open or closing -> their record.
    files: HashMap<FileId, TaskKey>,
    /// Deletions (a budget's) handed to the writer and not yet done: the
    /// operation's id -> the bytes they free.
    deleting: HashMap<FileId, u64>,
    next_file: FileId,
    ops: Vec<FileOp>,
    utc_offset: i32,
}

/// The recording of a task: its stream, its tracks (the selection the
/// container can hold).
fn selection(reg: &Registry, task: &RecordTask) -> Option<(StreamId, Vec<Track>)> {
    let s = &task.spec;
    let (stream, profile) = reg.output_stream(&s.vhost, &s.app, &s.stream_name)?;
    let tracks = reg.streams.get(stream)?.tracks().to_vec();
    if tracks.is_empty() {
        return None;
    }
    let named = crate::state::app::output_tracks(&tracks, profile);
    let ids = select(
        &s.variant_names,
        &s.track_ids,
        Protocol::Mpegts,
        &tracks,
        &|t| {
            named
                .iter()
                .find(|(x, _)| x.id == t.id)
                .map(|(_, n)| n.clone())
        },
    );
    let chosen: Vec<Track> = tracks
        .into_iter()
        .filter(|t| ids.contains(&t.id) && t.kind() != MediaKind::Data)
        .collect();
    Some((stream, chosen))
}

impl RecordManager {
    pub fn new(utc_offset: i32) -> Self {
        RecordManager {
            tasks: Default::default(),
            recordings: HashMap::new(),
            preroll: HashMap::new(),
            out: FileOut {
                utc_offset,
                ..FileOut::default()
            },
            dvr_usage: HashMap::new(),
            dvr_trims: Vec::new(),
        }
    }

    /// Where record `key` writes its info XML, when that does not change
    /// from file to file (no `${Sequence}`, `${StartTime}` or `${EndTime}`
    /// in `infoPath`): what a restart reads its earlier files back from.
    pub fn fixed_info_path(&self, key: &TaskKey) -> Option<PathBuf> {
        let task = self.tasks.get(key)?;
        let template = &task.spec.info_path;
        if ["${Sequence", "${StartTime", "${EndTime"]
            .iter()
            .any(|m| template.contains(m))
        {
            return None;
        }
        let path = expand(template, &self.out.macros(task, 0, 0, None));
        resolve(Some(&template_root(template)), &path).ok()
    }

    /// The info XML record `key` wrote at `path` before a restart: its
    /// files are listed again and its `${Sequence}` goes on (how many were
    /// taken back).
    pub fn resume_info(&mut self, key: &TaskKey, path: &std::path::Path, xml: &str) -> usize {
        match self.tasks.get_mut(key) {
            Some(task) => super::task::resume_from_info(task, &path.display().to_string(), xml),
            None => 0,
        }
    }

    /// What the writer must do next, in order.
    /// A record of a live stream, about to start: its first file's paths
    /// and start time as the loop will write them, for `:startRecord`'s
    /// answer (OME names the file there).
    pub fn promise_first_file(&mut self, key: &TaskKey, now_ms: i64) {
        let Some(task) = self.tasks.get_mut(key) else {
            return;
        };
        if let Ok((file, info)) = self.out.paths(task, task.files, now_ms) {
            task.promised_start_ms = Some(now_ms);
            task.start_ms = Some(now_ms);
            task.output_file_path = Some(file.display().to_string());
            task.output_info_path = Some(info.display().to_string());
        }
    }

    pub fn poll_ops(&mut self) -> std::vec::Drain<'_, FileOp> {
        self.out.ops.drain(..)
    }

    /// Starts the record when its stream is live (a new or restored record).
    pub fn start_if_live(&mut self, key: &TaskKey, reg: &mut Registry, now: Now) {
        if self.recordings.contains_key(key) {
            return;
        }
        let Some(task) = self.tasks.get(key) else {
            return;
        };
        if task.state != RecordState::Ready {
            return;
        }
        let pre_roll = task.spec.pre_roll;
        let Some((stream, tracks)) = selection(reg, task) else {
            return;
        };
        let container = Container::of(&task.spec.file_path).unwrap_or(Container::Ts);
        if tracks.is_empty() {
            fail(
                key,
                &mut self.tasks,
                "none of the stream's tracks is selected".into(),
                now,
            );
            return;
        }
        // A time-lapse holds the first video track alone.
        let lapse = task.spec.time_lapse.map(Lapse::new);
        let tracks = match lapse {
            Some(_) => tracks
                .into_iter()
                .filter(|t| t.kind() == MediaKind::Video)
                .take(1)
                .collect(),
            None => tracks,
        };
        if tracks.is_empty() {
            fail(
                key,
                &mut self.tasks,
                "a time-lapse needs a video track, and none is selected".into(),
                now,
            );
            return;
        }
        let has_video = tracks.iter().any(|t| t.kind() == MediaKind::Video);
        let budget = Budgets::of(reg, &key.vhost, &key.app);
        self.recordings.insert(
            key.clone(),
            Recording {
                stream,
                tracks,
                container,
                has_video,
                mux: None,
                file: None,
                base: None,
                last_dts: HashMap::new(),
                lapse,
                budget,
                free: None,
                budget_checked: 0,
                backlog: Default::default(),
                backlog_bytes: 0,
            },
        );
        if let Some(t) = self.tasks.get_mut(key) {
            t.state = RecordState::Recording;
            t.last_error = None;
            t.last_error_ms = None;
        }
        crate::info!("record [{key}]: recording");
        // From the stream's last GOP (the file starts at once), or from
        // further back for a pre-roll: its first step now, the rest as
        // the writer drains.
        let gop: Vec<Frame> = match (pre_roll, self.preroll.get(&stream)) {
            (Some(ms), Some(h)) if !h.is_empty() => h.since(ms),
            _ => reg
                .streams
                .get(stream)
                .map(|s| s.gop().to_vec())
                .unwrap_or_default(),
        };
        for f in gop {
            self.offer(key, f, now);
        }
        self.feed(key, BACKLOG_STEP, now);
    }

    /// A frame for a recording: queued behind its backlog, if it has one.
    /// A backlog past [`MAX_BACKLOG`] fails its record.
    fn offer(&mut self, key: &TaskKey, frame: Frame, now: Now) {
        let Some(r) = self.recordings.get_mut(key) else {
            return;
        };
        if r.backlog_bytes + frame.data.len() > MAX_BACKLOG {
            let held = r.backlog_bytes >> 20;
            if let Some(r) = self.recordings.remove(key) {
                if let Some(f) = r.file {
                    self.out.ops.push(FileOp::Close {
                        file: f.id,
                        rename: None,
                        info: None,
                    });
                }
            }
            let why =
                format!("the disk is not keeping up: {held} MiB of media waiting to be written");
            fail(key, &mut self.tasks, why, now);
            return;
        }
        r.backlog_bytes += frame.data.len();
        r.backlog.push_back(frame);
    }

    /// Hands up to `room` frame bytes of a recording's backlog to its
    /// mux; what is left waits for the next [`pump`](Self::pump).
    fn feed(&mut self, key: &TaskKey, room: usize, now: Now) -> usize {
        let mut used = 0;
        while used < room {
            let Some(r) = self.recordings.get_mut(key) else {
                break;
            };
            let Some(f) = r.backlog.pop_front() else {
                break;
            };
            r.backlog_bytes -= f.data.len();
            used += f.data.len().max(1);
            self.write(key, &f, now);
        }
        used
    }

    /// Whether any recording has frames waiting for the writer's room.
    pub fn has_backlog(&self) -> bool {
        self.recordings.values().any(|r| !r.backlog.is_empty())
    }

    /// Feeds the backlogs, `room` frame bytes in all (what the writer can
    /// take now), shared alike between the recordings that have one; true
    /// while some are left.
    pub fn pump(&mut self, room: usize, now: Now) -> bool {
        let mut keys: Vec<TaskKey> = self
            .recordings
            .iter()
            .filter(|(_, r)| !r.backlog.is_empty())
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort_unstable_by(|a, b| (&a.vhost, &a.app, &a.id).cmp(&(&b.vhost, &b.app, &b.id)));
        let share = room / keys.len().max(1);
        for k in &keys {
            self.feed(k, share, now);
        }
        self.has_backlog()
    }

    /// Frame bytes waiting in the backlogs.
    pub fn backlog_bytes(&self) -> usize {
        self.recordings.values().map(|r| r.backlog_bytes).sum()
    }

    /// Hands what an ingest produced to the recordings of its stream, and
    /// starts the reserved records it makes live.
    pub fn on_ingest(&mut self, out: &IngestOutput, reg: &mut Registry, now: Now) {
        if let Some(id) = out.stream {
            if out.tracks_changed || out.started == Some(id) {
                self.keep_history(id, reg);
            }
            if let Some(h) = self.preroll.get_mut(&id) {
                for f in &out.frames {
                    h.push(f);
                }
            }
            if out.tracks_changed {
                // New tracks: the open files end; the records go on in
                // new files.
                self.end_recordings(id, now, false);
            }
            if out.tracks_changed || out.started == Some(id) {
                for k in self.tasks.keys() {
                    self.start_if_live(&k, reg, now);
                }
            }
            let keys = self.keys_of(id);
            for f in &out.frames {
                for k in &keys {
                    match self.recordings.get(k) {
                        Some(r) if !r.backlog.is_empty() => self.offer(k, f.clone(), now),
                        _ => self.write(k, f, now),
                    }
                }
            }
        }
        if let Some(id) = out.ended {
            self.preroll.remove(&id);
            self.end_recordings(id, now, true);
        }
    }

    /// A stream (re)started or changed tracks: a fresh history of its
    /// media when its application allows a pre-roll, none otherwise.
    fn keep_history(&mut self, id: StreamId, reg: &Registry) {
        let Some(s) = reg.streams.get(id) else {
            self.preroll.remove(&id);
            return;
        };
        let max = reg
            .app(&s.vhost, &s.app)
            .and_then(|a| a.file())
            .and_then(|f| f.max_pre_roll)
            .filter(|&ms| ms > 0);
        match max {
            Some(ms) => {
                let video = s
                    .tracks()
                    .iter()
                    .find(|t| t.kind() == MediaKind::Video)
                    .map(|t| t.id);
                self.preroll.insert(id, History::new(ms, video));
            }
            None => {
                self.preroll.remove(&id);
            }
        }
    }

    /// What the pre-roll histories hold: (streams, frames, bytes).
    pub fn preroll_held(&self) -> (usize, usize, usize) {
        self.preroll.values().fold((0, 0, 0), |(s, n, b), h| {
            (s + 1, n + h.len(), b + h.bytes())
        })
    }

    /// The records recording `stream`.
    fn keys_of(&self, stream: StreamId) -> Vec<TaskKey> {
        self.recordings
            .iter()
            .filter(|(_, r)| r.stream == stream)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Closes the files of a stream's recordings; their records wait for
    /// the stream (again) in `ready`. `ended`: the stream ended (its files
    /// are the records' last until it returns).
    fn end_recordings(&mut self, stream: StreamId, now: Now, ended: bool) {
        for k in self.keys_of(stream) {
            self.finish(&k, now, ended);
            // The last file's bytes count now.
            self.keep_budget(&k, now);
            self.recordings.remove(&k);
            if let Some(t) = self.tasks.get_mut(&k) {
                if t.state == RecordState::Recording {
                    t.state = RecordState::Ready;
                }
            }
            if ended {
                crate::info!("record [{k}]: the stream ended; waiting for it");
            }
        }
    }

    /// The server stops: every open file is closed with its info file, as
    /// when its stream ends (the records stay, and resume after a
    /// restart).
    pub fn shutdown(&mut self, now: Now) {
        let mut ids: Vec<StreamId> = self.recordings.values().map(|r| r.stream).collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            self.end_recordings(id, now, true);
        }
    }

    /// `:stopRecord` (or its application went): the open file is closed
    /// (the writer is told, and the info XML goes with it) and the task
    /// leaves the table: its id is free at once.
    pub fn stop(&mut self, key: &TaskKey, now: Now) {
        self.finish(key, now, true);
        self.recordings.remove(key);
        if let Some(t) = self.tasks.remove(key) {
            crate::info!(
                "record [{key}] stopped: {} file(s), {} bytes",
                t.files,
                t.ended_bytes
            );
        }
    }

    pub fn on_file_event(&mut self, ev: FileEvent, now: Now) {
        match ev {
            FileEvent::Failed {
                file,
                reason,
                written,
            } => {
                let Some(key) = self.out.files.get(&file).cloned() else {
                    return;
                };
                let current = self
                    .recordings
                    .get(&key)
                    .and_then(|r| r.file.as_ref())
                    .is_some_and(|f| f.id == file);
                if current {
                    if let Some(r) = self.recordings.remove(&key) {
                        if let Some(f) = r.file {
                            self.out.ops.push(FileOp::Close {
                                file: f.id,
                                rename: None,
                                info: None,
                            });
                        }
                    }
                }
                if let (true, Some(n), Some(task)) = (current, written, self.tasks.get_mut(&key)) {
                    // What reached the file, not what was handed to the
                    // writer (a file that exists holds none of it).
                    task.record_bytes = n;
                }
                fail(&key, &mut self.tasks, reason, now);
            }
            FileEvent::Closed { file } => {
                self.out.files.remove(&file);
            }
            FileEvent::Space { file, free } => {
                let Some(key) = self.out.files.get(&file).cloned() else {
                    return;
                };
                // Deletions asked for and not yet done were not counted
                // in what the writer read (it does them in order).
                let pending: u64 = self.out.deleting.values().sum();
                if let Some(r) = self.recordings.get_mut(&key) {
                    r.free = Some(free.saturating_add(pending));
                }
                self.keep_budget(&key, now);
            }
            FileEvent::Deleted { file, error } => {
                self.out.deleting.remove(&file);
                if let Some(e) = error {
                    crate::warn!("record: {e}");
                }
            }
            // Records read nothing back.
            FileEvent::Read { .. } => {}
        }
    }

    /// Ends the recording's open file (if any).
    fn finish(&mut self, key: &TaskKey, now: Now, last: bool) {
        // What waits in the backlog is the file's too.
        self.feed(key, usize::MAX, now);
        if let (Some(r), Some(task)) = (self.recordings.get_mut(key), self.tasks.get_mut(key)) {
            self.out.close_file(key, r, task, now, last);
        }
    }

    fn write(&mut self, key: &TaskKey, frame: &Frame, now: Now) {
        // A file closed, or the open one grew by `BUDGET_EVERY`: the
        // budgets are kept now, as the loop knows the bytes, not only when
        // the writer's next free-space report comes (every 4 MiB, later
        // on a busy machine, never after the stream ended).
        if self.write_frame(key, frame, now) {
            self.keep_budget(key, now);
        }
    }

    /// Writes a frame; true when the budgets are due (a file closed, or
    /// the open one grew by [`budget::BUDGET_EVERY`]).
    fn write_frame(&mut self, key: &TaskKey, frame: &Frame, now: Now) -> bool {
        let Some(task) = self.tasks.get_mut(key) else {
            return false;
        };
        let Some(r) = self.recordings.get_mut(key) else {
            return false;
        };
        let Some(track) = r.tracks.iter().find(|t| t.id == frame.track) else {
            return false;
        };
        let is_video = track.kind() == MediaKind::Video;
        if r.lapse.as_ref().is_some_and(|l| !l.keeps(is_video, frame)) {
            return false;
        }
        if r.last_dts
            .get(&frame.track)
            .is_some_and(|&d| frame.dts <= d)
        {
            return false;
        }
        let boundary = if r.has_video {
            is_video && frame.keyframe
        } else {
            true
        };
        let split_due = r.file.as_ref().is_some_and(|f| {
            let by_interval = task
                .spec
                .interval_ms
                .is_some_and(|ms| (frame.dts - f.first_dts) * 1000 / TICKS_PER_SECOND >= ms as i64);
            let by_schedule = f.split_at_ms.is_some_and(|at| now.unix_ms >= at);
            by_interval || by_schedule
        });
        let split = boundary && split_due;
        if split {
            self.out.close_file(key, r, task, now, false);
        }
        if r.file.is_none() {
            // The next file's growth is counted from its start.
            r.budget_checked = 0;
        }
        if r.file.is_none() {
            if !boundary {
                return split; // a file starts on a keyframe
            }
            if let Err(why) = self.out.open_file(key, r, task, frame, now) {
                // Not openable (path or tracks): the record fails.
                self.recordings.remove(key);
                fail(key, &mut self.tasks, why, now);
                return false;
            }
        }
        r.last_dts.insert(frame.track, frame.dts);
        let base = r.base.unwrap_or(frame.dts);
        let (pts, dts) = match r.lapse.as_mut() {
            // The film's clock: one step per keyframe kept.
            Some(l) => {
                l.last_kept = Some(frame.dts);
                let t = l.frames.saturating_mul(l.step);
                l.frames += 1;
                (t, t)
            }
            None => ((frame.pts - base).max(0), (frame.dts - base).max(0)),
        };
        let rebased = Frame {
            track: frame.track,
            pts,
            dts,
            keyframe: frame.keyframe,
            data: frame.data.clone(),
        };
        let mut out = Vec::new();
        if let Some(m) = r.mux.as_mut() {
            m.write_frame(&rebased, &mut out);
        }
        let mut due = split;
        if let Some(f) = r.file.as_mut() {
            f.last_dts = f.last_dts.max(frame.dts);
            f.bytes += out.len() as u64;
            if r.budget.is_set() && f.bytes >= r.budget_checked + budget::BUDGET_EVERY {
                r.budget_checked = f.bytes;
                due = true;
            }
            task.record_bytes = f.bytes;
            task.record_ms = ((f.last_dts - f.first_dts).max(0) * 1000 / TICKS_PER_SECOND) as u64;
            if !out.is_empty() {
                self.out.ops.push(FileOp::Write {
                    file: f.id,
                    data: out,
                });
            }
        }
        due
    }

    #[cfg(test)]
    fn open_files(&self) -> usize {
        self.out.files.len()
    }
}

/// A record whose file cannot be written goes to `error` with the reason.
fn fail(key: &TaskKey, tasks: &mut crate::record::task::RecordTable, reason: String, now: Now) {
    if let Some(t) = tasks.get_mut(key) {
        crate::warn!("record [{key}]: {reason}");
        t.state = RecordState::Error;
        t.last_error = Some(reason);
        t.last_error_ms = Some(now.unix_ms);
    } else {
        crate::warn!("record [{key}] (stopped): {reason}");
    }
}

impl FileOut {
    fn close_file(
        &mut self,
        key: &TaskKey,
        r: &mut Recording,
        task: &mut RecordTask,
        now: Now,
        last: bool,
    ) {
        let Some(f) = r.file.take() else {
            return;
        };
        let mut tail = Vec::new();
        if let Some(m) = r.mux.as_mut() {
            m.finish(&mut tail);
        }
        if r.container == Container::Mp4
            || task.spec.segmentation_rule == SegmentationRule::Discontinuity
        {
            r.mux = None;
        }
        let mut bytes = f.bytes;
        if !tail.is_empty() {
            bytes += tail.len() as u64;
            self.ops.push(FileOp::Write {
                file: f.id,
                data: tail,
            });
        }
        let record_ms = ((f.last_dts - f.first_dts).max(0) * 1000 / TICKS_PER_SECOND) as u64;
        // `${EndTime}` is known now: the file moves to its final name.
        let rename = task
            .spec
            .file_path
            .contains("${EndTime")
            .then(|| {
                let path = expand(
                    &task.spec.file_path,
                    &self.macros(task, task.sequence, f.start_ms, Some(now.unix_ms)),
                );
                resolve(Some(&template_root(&task.spec.file_path)), &path).ok()
            })
            .flatten();
        let file_path = rename
            .as_ref()
            .map_or(f.path.clone(), |p| p.display().to_string());
        if rename.is_some() {
            task.output_file_path = Some(file_path.clone());
        }
        task.file_done(FileInfo {
            file_path: file_path.clone(),
            info_path: f.info_path.clone(),
            sequence: task.sequence,
            record_bytes: bytes,
            record_ms,
            start_ms: f.start_ms,
            finish_ms: now.unix_ms,
            last,
            deleted_ms: None,
        });
        let xml = info_xml(task, &f.info_path, self.utc_offset);
        self.ops.push(FileOp::Close {
            file: f.id,
            rename,
            info: Some((PathBuf::from(&f.info_path), xml)),
        });
        crate::info!(
            "record [{key}]: file {} closed ({} bytes, {} ms)",
            file_path,
            bytes,
            record_ms
        );
    }

    /// Opens the next file of a recording, starting with `frame`.
    fn open_file(
        &mut self,
        key: &TaskKey,
        r: &mut Recording,
        task: &mut RecordTask,
        frame: &Frame,
        now: Now,
    ) -> Result<(), String> {
        let sequence = task.files;
        // The promised time, unless the stream took long to give a frame.
        let start_ms = task
            .promised_start_ms
            .take()
            .filter(|t| (now.unix_ms - t).abs() < 5_000)
            .unwrap_or(now.unix_ms);
        let (file_path, info_file) = self.paths(task, sequence, start_ms)?;
        let mut head = Vec::new();
        if r.mux.is_none() {
            let (m, h) = FileMux::new(r.container, &r.tracks)?;
            r.mux = Some(m);
            head = h;
        } else if let Some(FileMux::Ts(m)) = r.mux.as_mut() {
            m.repeat_tables();
        }
        let id = self.next_file;
        self.next_file += 1;
        self.files.insert(id, key.clone());
        self.ops.push(FileOp::Create {
            file: id,
            path: file_path.clone(),
        });
        let bytes = head.len() as u64;
        if !head.is_empty() {
            self.ops.push(FileOp::Write {
                file: id,
                data: head,
            });
        }
        let split_at_ms = task
            .spec
            .schedule
            .as_deref()
            .and_then(Schedule::parse)
            .map(|s| s.next_after(now.unix_ms, self.utc_offset));
        if task.spec.segmentation_rule == SegmentationRule::Discontinuity || r.base.is_none() {
            r.base = Some(frame.dts);
            if let Some(l) = r.lapse.as_mut() {
                l.frames = 0; // each file's film starts at 0
            }
        }
        r.file = Some(Current {
            id,
            path: file_path.display().to_string(),
            info_path: info_file.display().to_string(),
            first_dts: frame.dts,
            last_dts: frame.dts,
            start_ms,
            split_at_ms,
            bytes,
        });
        task.sequence = sequence;
        task.files += 1;
        task.output_file_path = Some(file_path.display().to_string());
        task.output_info_path = Some(info_file.display().to_string());
        task.file_start_ms = Some(start_ms);
        task.start_ms.get_or_insert(start_ms);
        task.record_bytes = bytes;
        task.record_ms = 0;
        crate::info!("record [{key}]: writing {}", file_path.display());
        Ok(())
    }

    /// The file and info paths of file `sequence` started at `start_ms`.
    fn paths(
        &self,
        task: &RecordTask,
        sequence: u64,
        start_ms: i64,
    ) -> Result<(PathBuf, PathBuf), String> {
        let macros = self.macros(task, sequence, start_ms, None);
        let path = expand(&task.spec.file_path, &macros);
        let info_path = expand(&task.spec.info_path, &macros);
        let file_path = resolve(Some(&template_root(&task.spec.file_path)), &path)
            .map_err(|e| e.to_string())?;
        let info_file = resolve(Some(&template_root(&task.spec.info_path)), &info_path)
            .map_err(|e| e.to_string())?;
        Ok((file_path, info_file))
    }

    fn macros<'a>(
        &self,
        task: &'a RecordTask,
        sequence: u64,
        start_ms: i64,
        end_ms: Option<i64>,
    ) -> Macros<'a> {
        Macros {
            vhost: &task.spec.vhost,
            app: &task.spec.app,
            stream: &task.spec.stream_name,
            id: &task.spec.id,
            transaction: &task.transaction,
            sequence,
            start_ms,
            end_ms,
            utc_offset: self.utc_offset,
        }
    }
}

/// The directory an expanded template must stay under: the template's
/// literal part before its first macro, up to its last `/` (names from
/// publishers, such as a stream called `..`, cannot climb out of it).
fn template_root(template: &str) -> String {
    let literal = template.split("${").next().unwrap_or("");
    match literal.rfind('/') {
        Some(0) | None => "/".to_string(),
        Some(i) => literal[..i].to_string(),
    }
}

mod budget;
#[cfg(test)]
mod tests;
