//! Recording: the recordings take ingest output as file operations for
//! the writer thread, which alone touches disk.

use crate::api::Effect;
use crate::clock::Now;
use crate::files::{FileEvent, DUMP_FILE, DVR_FILE};
use crate::server::core::Core;
use crate::server::feature::Feature;
use crate::server::file_writer::MAX_QUEUED;
use crate::state::streams::IngestOutput;
use std::time::{Duration, Instant};

/// How soon a backlog is fed again while the writer's queue is full.
const BACKLOG_RETRY: Duration = Duration::from_millis(10);

pub(crate) struct Record;

impl Feature for Record {
    /// Records restored from the state file take back the files their info
    /// XML lists (read once, here, before the loop serves anyone): the list
    /// and `${Sequence}` go on across a restart.
    fn start(&mut self, core: &mut Core, _now: Instant) {
        let records = &mut core.api.records;
        let keys = records.tasks.keys();
        for key in keys {
            let Some(path) = records.fixed_info_path(&key) else {
                continue;
            };
            let Ok(bytes) = crate::sys::read_small_file(&path) else {
                continue;
            };
            let taken = records.resume_info(&key, &path, &String::from_utf8_lossy(&bytes));
            if taken > 0 {
                crate::info!(
                    "record [{key}]: {taken} earlier file(s) listed in {} taken back",
                    path.display()
                );
            }
        }
    }

    fn on_ingest(&mut self, o: &IngestOutput, core: &mut Core, now: Instant) {
        let api = &mut core.api;
        api.records.on_ingest(o, &mut api.registry, Now::read(now));
    }

    fn on_effect(&mut self, effect: &Effect, core: &mut Core, now: Instant) {
        let api = &mut core.api;
        match effect {
            Effect::RecordAdded(key) => {
                api.records
                    .start_if_live(key, &mut api.registry, Now::read(now))
            }
            Effect::StopRecord(key) => api.records.stop(key, Now::read(now)),
            _ => {}
        }
    }

    fn on_file_event(&mut self, e: FileEvent, core: &mut Core, now: Instant) -> Option<FileEvent> {
        let file = e.file();
        if file & (DUMP_FILE | DVR_FILE) != 0 {
            return Some(e);
        }
        file_event(core, e, now);
        None
    }

    fn shutdown(&mut self, core: &mut Core, now: Instant) {
        core.api.records.shutdown(Now::read(now));
    }

    /// Hands the recordings' file operations to the writer thread; one it
    /// cannot take fails its recording at once. A pre-roll's backlog is
    /// fed while the writer's queue is under half full, and comes back on
    /// a short timer while some is left.
    fn drive(&mut self, core: &mut Core, now: Instant) -> Option<Instant> {
        loop {
            if core.api.records.has_backlog() {
                let room = (MAX_QUEUED / 2).saturating_sub(core.files.queued());
                core.api.records.pump(room, Now::read(now));
            }
            let ops = core.api.records.poll_ops().collect();
            let refused = core.submit_files(ops);
            if refused.is_empty() {
                return core.api.records.has_backlog().then(|| now + BACKLOG_RETRY);
            }
            for e in refused {
                file_event(core, e, now);
            }
        }
    }
}

/// The writer's answer to the recordings. Their disk budgets count the
/// LL-HLS DVRs' bytes and may ask the DVRs to give some up.
fn file_event(core: &mut Core, e: FileEvent, now: Instant) {
    let api = &mut core.api;
    api.records.dvr_usage = api.hls.dvr_usage();
    api.records.on_file_event(e, Now::read(now));
    for (vhost, app, bytes, why) in std::mem::take(&mut api.records.dvr_trims) {
        api.hls.trim_dvr(&vhost, &app, bytes, &why);
    }
}
