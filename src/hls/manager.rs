//! The LL-HLS outputs of every live stream whose application publishes
//! LL-HLS, fed by the ingests, and the viewers waiting on them (blocking
//! playlist reloads, preload-hinted parts). Sans-IO: the loop hands ingest
//! output in and wakes the viewer connections this names.

use super::dump::{DumpFiles, DumpStatus, DumpWriter};
use super::StreamHls;
use crate::clock::Now;
use crate::files::{FileEvent, FileOp};
use crate::state::streams::{IngestOutput, StreamId, StreamMap};
use crate::state::task::TaskKey;
use crate::state::Registry;
use std::collections::HashMap;
use std::time::{Duration, Instant};

mod dvr;

/// How long an ended stream's playlists (with `EXT-X-ENDLIST`) stay.
pub const ENDED_KEPT: Duration = Duration::from_secs(30);

pub struct Output {
    /// LL-HLS (`<Publishers><LLHLS>`).
    pub hls: Option<StreamHls>,
    /// HLS with MPEG-TS segments (`<Publishers><HLS>`).
    pub ts: Option<super::ts::TsLadder>,
    pub vhost: String,
    pub app: String,
    pub name: String,
    /// When the stream ended.
    pub ended: Option<Instant>,
}

impl Output {
    /// Its DVRs (LL-HLS's, HLS's).
    fn dvrs(&self) -> impl Iterator<Item = &super::dvr::Dvr> {
        let ll = self.hls.as_ref().and_then(|h| h.dvr.as_ref());
        ll.into_iter()
            .chain(self.ts.as_ref().and_then(|t| t.first()?.dvr.as_ref()))
    }

    fn dvrs_mut(&mut self) -> impl Iterator<Item = &mut super::dvr::Dvr> {
        let ll = self.hls.as_mut().and_then(|h| h.dvr.as_mut());
        ll.into_iter()
            .chain(self.ts.as_mut().and_then(|t| t.first_mut()?.dvr.as_mut()))
    }
}

#[derive(Default)]
pub struct HlsManager {
    /// The HLS dump tasks (run-time only).
    pub dump_tasks: super::dump::DumpTable,
    /// The players' session tokens (the multivariant playlists' URIs).
    pub sessions: super::session::SessionTokens,
    /// Bytes the dumps of this run had written when the disk budgets were
    /// last kept for them.
    dump_bytes_kept: u64,
    outputs: StreamMap<Output>,
    /// Stream -> viewer connections (loop handles) waiting for a part.
    waiters: StreamMap<Vec<usize>>,
    woken: Vec<usize>,
    /// The running dumps (their tasks are `dump_tasks`).
    dumps: Vec<DumpWriter>,
    dump_files: DumpFiles,
    /// Dump files for the writer thread.
    file_ops: Vec<FileOp>,
    utc_offset: i32,
    /// DVR segments read back for viewers.
    dvr_reads: super::dvr::DvrReads,
    /// DVR folders swept of what dead kilns left (once per process).
    dvr_swept: std::collections::HashSet<std::path::PathBuf>,
    /// The last DVR serial given (see [`super::dvr::Dvr::new`]).
    dvr_serial: u64,
    /// Bytes let go of (DVR segments read back and expired).
    released: usize,
}

impl HlsManager {
    pub fn new(utc_offset: i32) -> Self {
        HlsManager {
            utc_offset,
            ..HlsManager::default()
        }
    }

    /// What the dumps and DVRs ask of the file worker, in order.
    pub fn poll_file_ops(&mut self) -> std::vec::Drain<'_, FileOp> {
        for o in self.outputs.values_mut() {
            for d in o.dvrs_mut() {
                self.file_ops.extend(d.take_ops());
            }
        }
        self.file_ops.extend(self.dvr_reads.take_ops());
        self.file_ops.drain(..)
    }

    /// Hands what an ingest produced to its stream's packager.
    pub fn on_ingest(&mut self, out: &IngestOutput, reg: &mut Registry, now: Now) {
        if let Some(id) = out.stream {
            // A new output starts from the stream's GOP, which may already
            // hold this batch's frames: those are not pushed twice.
            let mut replayed: HashMap<crate::media::TrackId, i64> = HashMap::new();
            // Changed tracks: the same LL-HLS goes on with a discontinuity
            // where it can (the same tracks, newly configured); else a new
            // packager.
            let retracked = out.tracks_changed
                && self.outputs.get_mut(&id).is_some_and(|o| {
                    let tracks = reg
                        .streams
                        .get(id)
                        .map(|s| s.tracks().to_vec())
                        .unwrap_or_default();
                    o.hls.as_mut().is_some_and(|h| h.retrack(&tracks))
                });
            if retracked {
                // Dumps end with the configuration they were written with;
                // HLS (MPEG-TS segments) starts again with the new one.
                self.poll_dumps(id, now, true);
                let spec = reg
                    .streams
                    .get(id)
                    .and_then(|s| Some((s, reg.app(&s.vhost, &s.app)?.publishers.hls.as_ref()?)));
                let had_ts = self.outputs.get(&id).is_some_and(|o| o.ts.is_some());
                if let (true, Some((s, spec))) = (had_ts, spec) {
                    let new = self.new_ts(spec, s.tracks(), now);
                    let old = self
                        .outputs
                        .get_mut(&id)
                        .and_then(|o| std::mem::replace(&mut o.ts, new));
                    let old_dvr = old.and_then(|mut t| t.first_mut()?.dvr.take());
                    if let Some(d) = old_dvr {
                        self.remove_dvr(d);
                    }
                }
            } else if out.tracks_changed {
                self.start(id, reg, now);
                if let Some(s) = reg.streams.get(id) {
                    for f in s.gop() {
                        replayed.insert(f.track, f.dts);
                    }
                }
            }
            if let Some(o) = self.outputs.get_mut(&id) {
                let mut news = false;
                for f in &out.frames {
                    if replayed.get(&f.track).is_some_and(|&d| f.dts <= d) {
                        continue;
                    }
                    if let Some(h) = o.hls.as_mut() {
                        news |= h.push(f).new_part;
                    }
                    if let Some(t) = o.ts.as_mut() {
                        t.push(f);
                    }
                }
                if news {
                    self.wake(id);
                    self.poll_dumps(id, now, false);
                }
            }
        }
        if let Some(id) = out.ended {
            if let Some(o) = self.outputs.get_mut(&id) {
                if let Some(h) = o.hls.as_mut() {
                    h.end();
                }
                if let Some(t) = o.ts.as_mut() {
                    t.end();
                }
                o.ended = Some(now.instant);
                self.wake(id);
            }
            self.poll_dumps(id, now, true);
        }
        self.expire(now.instant);
    }

    /// Drops the outputs of streams that ended `ENDED_KEPT` ago (their
    /// DVR folders with them) and DVR segments read back `CACHE_TTL` ago;
    /// when the next of either is due.
    pub fn expire(&mut self, now: Instant) -> Option<Instant> {
        let gone: Vec<StreamId> = self
            .outputs
            .iter()
            .filter(|(_, o)| o.ended.is_some_and(|at| now >= at + ENDED_KEPT))
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            if let Some(o) = self.outputs.remove(&id) {
                self.drop_output(id, o);
            }
        }
        // DVR segments read back go after a while.
        let (freed, next_read) = self.dvr_reads.expire(now);
        self.released += freed;
        self.outputs
            .values()
            .filter_map(|o| o.ended)
            .map(|at| at + ENDED_KEPT)
            .chain(next_read)
            .min()
    }

    /// Bytes the outputs let go of since last asked (for the allocator
    /// to be given them back).
    pub fn take_released(&mut self) -> usize {
        std::mem::take(&mut self.released)
    }

    /// Lets the dumps of a stream write what is new; `end`: their last
    /// write (the stream or the dump ends), after which they are dropped.
    fn poll_dumps(&mut self, id: StreamId, now: Now, end: bool) {
        if !self.dumps.iter().any(|d| d.stream == id) {
            return;
        }
        let Some(h) = self.outputs.get(&id).and_then(|o| o.hls.as_ref()) else {
            return;
        };
        let (files, ops, offset) = (&mut self.dump_files, &mut self.file_ops, self.utc_offset);
        for d in self.dumps.iter_mut().filter(|d| d.stream == id) {
            if let Some(task) = self.dump_tasks.get_mut(&d.key) {
                d.poll(h, task, end, now.unix_ms, offset, files, ops);
            }
        }
        if end {
            self.dumps.retain(|d| d.stream != id);
        }
    }

    /// Starts a dump the API added (its task is in the registry): false
    /// when its stream has no LL-HLS output.
    pub fn start_dump(&mut self, key: &TaskKey, reg: &mut Registry, now: Now) -> bool {
        let Some(task) = self.dump_tasks.get(key) else {
            return false;
        };
        let spec = task.spec.clone();
        let Some((id, _)) = self.find(reg, &spec.vhost, &spec.app, &spec.stream, now.instant)
        else {
            return false;
        };
        if self
            .outputs
            .get(&id)
            .is_none_or(|o| o.hls.is_none() || o.ended.is_some())
        {
            return false;
        }
        crate::info!(
            "hls dump [{key}]: writing to {}",
            spec.output_path.display()
        );
        self.dumps
            .push(DumpWriter::new(key.clone(), id, spec.output_path.clone()));
        self.poll_dumps(id, now, false);
        true
    }

    /// The server stops: every running dump ends as if its stream had
    /// (`EXT-X-ENDLIST`, the info file Completed), so what it wrote plays
    /// back as VOD; every DVR folder goes, as when its stream ends.
    pub fn shutdown(&mut self, now: Now) {
        let mut ids: Vec<StreamId> = self.dumps.iter().map(|d| d.stream).collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            self.poll_dumps(id, now, true);
        }
        for o in self.outputs.values_mut() {
            for d in o.dvrs_mut() {
                self.file_ops.extend(d.take_ops());
                self.file_ops.push(d.remove());
            }
        }
    }

    /// Takes a running dump's writer out and gives it its last write (its
    /// playlists end with `EXT-X-ENDLIST`, its info file is written).
    fn end_writer(&mut self, key: &TaskKey, now: Now) -> Option<DumpWriter> {
        let i = self.dumps.iter().position(|d| &d.key == key)?;
        let mut d = self.dumps.remove(i);
        let h = self.outputs.get(&d.stream).and_then(|o| o.hls.as_ref());
        if let (Some(h), Some(task)) = (h, self.dump_tasks.get_mut(key)) {
            d.poll(
                h,
                task,
                true,
                now.unix_ms,
                self.utc_offset,
                &mut self.dump_files,
                &mut self.file_ops,
            );
        }
        Some(d)
    }

    /// `:stopHlsDump`: the dump's playlists end (`EXT-X-ENDLIST`), its
    /// info file says Completed, and its id is free.
    pub fn stop_dump(&mut self, key: &TaskKey, now: Now) {
        self.end_writer(key, now);
        self.dump_tasks.remove(key);
        crate::info!("hls dump [{key}] stopped");
    }

    /// A running dump ends in `Error` for `why` (a disk budget): its
    /// playlists end (`EXT-X-ENDLIST`, every file it wrote stays playable)
    /// and its info file says Error.
    pub(super) fn end_dump_in_error(&mut self, key: &TaskKey, why: String, now: Now) {
        let Some(mut d) = self.end_writer(key, now) else {
            return;
        };
        let Some(task) = self.dump_tasks.get_mut(key) else {
            return;
        };
        crate::warn!("hls dump [{key}] ended: {why}");
        task.status = DumpStatus::Error;
        task.last_error = Some(why);
        d.write_info(
            task,
            self.utc_offset,
            &mut self.dump_files,
            &mut self.file_ops,
        );
    }

    /// The writer's answer about a dump file: a failure puts the dump in
    /// error (its info file says so) and stops it.
    pub fn on_file_event(&mut self, ev: FileEvent, now: Instant) {
        if ev.file() & crate::files::DVR_FILE != 0 {
            return self.on_dvr_event(ev, now);
        }
        let Some(key) = self.dump_files.owner(&ev) else {
            return;
        };
        let FileEvent::Failed { reason, .. } = ev else {
            return;
        };
        let Some(task) = self.dump_tasks.get_mut(&key) else {
            return;
        };
        if task.status == DumpStatus::Error {
            return;
        }
        crate::warn!("hls dump [{key}]: {reason}");
        task.status = DumpStatus::Error;
        task.last_error = Some(reason);
        if let Some(i) = self.dumps.iter().position(|d| d.key == key) {
            let mut d = self.dumps.remove(i);
            d.write_info(
                task,
                self.utc_offset,
                &mut self.dump_files,
                &mut self.file_ops,
            );
        }
    }

    /// A stream's tracks are known (or changed): a new packager, with a
    /// new key (the URLs of the old tracks end).
    fn start(&mut self, id: StreamId, reg: &mut Registry, now: Now) {
        // The dumps of the old tracks end with them.
        self.poll_dumps(id, now, true);
        let Some(s) = reg.streams.get(id) else {
            return;
        };
        let Some(app) = reg.app(&s.vhost, &s.app) else {
            return;
        };
        let (ll, hls) = (&app.publishers.llhls, &app.publishers.hls);
        if (ll.is_none() && hls.is_none()) || s.tracks().is_empty() {
            return;
        }
        let dvr = ll
            .as_ref()
            .and_then(|l| l.dvr.as_ref())
            .filter(|d| d.enable);
        if let Some(d) = dvr {
            self.sweep_dvr(std::path::PathBuf::from(d.path()));
            self.dvr_serial = self.dvr_serial % super::dvr::MAX_SERIAL + 1;
        }
        let serial = self.dvr_serial;
        let mut ll = ll.as_ref().map(|spec| {
            let key = format!(
                "{:08x}",
                (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ now.unix_ms as u64) as u32
            );
            let mut h = StreamHls::new(s.tracks(), spec.config(), key, now.unix_ms);
            h.keep_parts_in_memory_files();
            if let Some(d) = dvr {
                let root = std::path::Path::new(d.path());
                h.keep_dvr(super::dvr::Dvr::new(root, &h.key, d.window(), serial));
            }
            h
        });
        let mut ts = hls
            .as_ref()
            .and_then(|spec| self.new_ts(spec, s.tracks(), now));
        // Start from the stream's last GOP: a viewer plays at once.
        for f in s.gop() {
            if let Some(h) = ll.as_mut() {
                h.push(f);
            }
            if let Some(t) = ts.as_mut() {
                t.push(f);
            }
        }
        let autos = ll
            .as_ref()
            .and(app.publishers.llhls.as_ref())
            .and_then(|l| l.dumps.as_ref())
            .map(|d| d.for_stream(&s.vhost, &s.app, &s.name, now.unix_ms, self.utc_offset))
            .unwrap_or_default();
        let old = self.outputs.insert(
            id,
            Output {
                hls: ll,
                ts,
                vhost: s.vhost.clone(),
                app: s.app.clone(),
                name: s.name.clone(),
                ended: None,
            },
        );
        if let Some(o) = old {
            self.drop_output(id, o);
        }
        for spec in autos {
            let key = TaskKey {
                vhost: spec.vhost.clone(),
                app: spec.app.clone(),
                id: spec.id.clone(),
            };
            self.dump_tasks.insert(spec);
            self.start_dump(&key, reg, now);
        }
    }

    /// The output a viewer names: a live stream (by its input or an output
    /// name), else one that ended less than 30 s ago.
    pub fn find(
        &self,
        reg: &Registry,
        vhost: &str,
        app: &str,
        name: &str,
        now: Instant,
    ) -> Option<(StreamId, &Output)> {
        if let Some((id, _)) = reg.output_stream(vhost, app, name) {
            if let Some(o) = self.outputs.get(&id) {
                return Some((id, o));
            }
        }
        self.outputs
            .iter()
            .find(|(_, o)| {
                o.ended.is_some_and(|at| now < at + ENDED_KEPT)
                    && o.vhost == vhost
                    && o.app == app
                    && o.name == name
            })
            .map(|(id, o)| (*id, o))
    }

    /// A viewer connection waits for the next part of `stream`.
    pub fn wait(&mut self, stream: StreamId, io: usize) {
        // A connection parks once per request; take_woken drops repeats.
        self.waiters.entry(stream).or_default().push(io);
    }

    /// A `:sendEvent` for a stream: into its LL-HLS packager (an urgent one
    /// can cut a part, which wakes the viewers waiting for it). False when
    /// the stream has no LL-HLS output.
    pub fn send_event(&mut self, stream: StreamId, e: &super::event::Event) -> bool {
        let Some(o) = self.outputs.get_mut(&stream) else {
            return false;
        };
        if let Some(ts) = o.ts.as_mut() {
            ts.send_event(e);
        }
        let Some(h) = o.hls.as_mut() else {
            return false;
        };
        if h.send_event(e) {
            self.wake(stream);
        }
        true
    }

    /// `:concludeHlsLive`: the stream's playlists end now (`EXT-X-ENDLIST`,
    /// no more parts or segments) while the stream goes on; they are kept
    /// until the stream ends (then 30 s more, like any ended stream's).
    pub fn conclude(&mut self, stream: StreamId) {
        let Some(o) = self.outputs.get_mut(&stream) else {
            return;
        };
        if let Some(h) = o.hls.as_mut() {
            h.end();
        }
        if let Some(t) = o.ts.as_mut() {
            t.end();
        }
        self.wake(stream);
    }

    fn wake(&mut self, stream: StreamId) {
        if let Some(list) = self.waiters.remove(&stream) {
            self.woken.extend(list);
        }
    }

    /// The viewer connections to wake (each once).
    pub fn take_woken(&mut self) -> Vec<usize> {
        let mut w = std::mem::take(&mut self.woken);
        w.sort_unstable();
        w.dedup();
        w
    }
}
