//! LL-HLS and HLS: the packager takes ingest output; viewers parked on a
//! part are answered when it exists; dumps' files go to the writer.

use crate::api::Effect;
use crate::clock::Now;
use crate::files::{FileEvent, DUMP_FILE, DVR_FILE};
use crate::server::core::Core;
use crate::server::feature::Feature;
use crate::state::streams::IngestOutput;
use std::time::Instant;

pub(crate) struct Hls;

impl Feature for Hls {
    fn on_ingest(&mut self, o: &IngestOutput, core: &mut Core, now: Instant) {
        let api = &mut core.api;
        api.hls.on_ingest(o, &mut api.registry, Now::read(now));
    }

    fn on_effect(&mut self, effect: &Effect, core: &mut Core, now: Instant) {
        let api = &mut core.api;
        let wall = Now::read(now);
        match effect {
            Effect::SendEvent { stream, event } => {
                let sent = api.hls.send_event(*stream, event);
                if !sent {
                    crate::debug!("event for stream {stream}: no LL-HLS output, dropped");
                }
            }
            Effect::ConcludeHls { stream } => api.hls.conclude(*stream),
            Effect::StartHlsDump(key) => {
                let started = api.hls.start_dump(key, &mut api.registry, wall);
                if !started {
                    if let Some(d) = api.hls.dump_tasks.get_mut(key) {
                        d.status = crate::hls::dump::DumpStatus::Error;
                        d.last_error = Some("the stream has no LL-HLS output".into());
                    }
                }
            }
            Effect::StopHlsDump(key) => api.hls.stop_dump(key, wall),
            _ => {}
        }
    }

    fn on_file_event(&mut self, e: FileEvent, core: &mut Core, now: Instant) -> Option<FileEvent> {
        let file = e.file();
        if file & (DUMP_FILE | DVR_FILE) == 0 {
            return Some(e);
        }
        let api = &mut core.api;
        api.hls.on_file_event(e, now);
        None
    }

    fn shutdown(&mut self, core: &mut Core, now: Instant) {
        core.api.hls.shutdown(Now::read(now));
    }

    /// Answers the viewers parked on what now exists (a new part, a part
    /// cut by an urgent event, ended playlists, a DVR segment read back);
    /// drops ended streams' outputs when their time is up; hands the
    /// dumps' and DVRs' file operations to the worker (one it cannot take
    /// fails its dump, or ends its DVR's window there).
    fn drive(&mut self, core: &mut Core, now: Instant) -> Option<Instant> {
        let woken = core.api.hls.take_woken();
        core.flush_all(&woken, now);
        // Ended streams' playlists go when their time is up, and DVR
        // segments read back when theirs is; what they held goes back to
        // the system (a trim, at most once a second).
        let expiry = core.api.hls.expire(now);
        let trim = core.heap.on_released(core.api.hls.take_released(), now);
        let next = [expiry, trim].into_iter().flatten().min();
        // DVRs that grew answer to the disk budgets, which count the
        // recordings too.
        if core.api.hls.dvr_budget_due() {
            let api = &mut core.api;
            let (records, all) = api.records.disk_usage();
            api.hls.keep_dvr_budgets(&api.registry, &records, all);
        }
        // So do the HLS dumps as they write.
        if core.api.hls.dump_budget_due() {
            let api = &mut core.api;
            let (records, all) = api.records.disk_usage();
            api.hls
                .keep_dump_budgets(&api.registry, &records, all, Now::read(now));
        }
        loop {
            let ops = core.api.hls.poll_file_ops().collect();
            let refused = core.submit_files(ops);
            if refused.is_empty() {
                return next;
            }
            for e in refused {
                core.api.hls.on_file_event(e, now);
            }
        }
    }
}
