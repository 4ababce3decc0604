//! The DVRs of the stream outputs (OME's `<LLHLS><DVR>`, `<HLS><DVR>`;
//! see [`crate::hls::dvr`]): made with the packagers, their folders swept
//! and removed, segments read back for viewers, and the disk budgets
//! they answer to.

use super::{HlsManager, Output};
use crate::clock::Now;
use crate::files::{FileEvent, FileOp};
use crate::state::streams::StreamId;
use crate::state::task::TaskKey;
use crate::state::Registry;
use std::collections::HashMap;

/// The dumps' budgets are kept each time they wrote this much more.
const DUMP_BUDGET_EVERY: u64 = 256 << 10;

impl HlsManager {
    /// The DVR folders the configuration names are cleared of what
    /// kilns that no longer run left there (start-up).
    pub fn sweep_dvr_folders(&mut self, reg: &Registry) {
        let roots: Vec<std::path::PathBuf> = reg
            .vhosts()
            .iter()
            .flat_map(|v| v.apps.iter())
            .flat_map(|a| a.publishers.dvrs())
            .filter(|d| d.enable)
            .map(|d| std::path::PathBuf::from(d.path()))
            .collect();
        for root in roots {
            self.sweep_dvr(root);
        }
    }

    pub(super) fn sweep_dvr(&mut self, root: std::path::PathBuf) {
        // One spelling per folder (`/a/b/` is `/a/b`).
        let root = crate::files::resolve(None, &root.to_string_lossy()).unwrap_or(root);
        if self.dvr_swept.insert(root.clone()) {
            self.file_ops.push(FileOp::SweepDvr {
                file: crate::files::DVR_FILE,
                root,
            });
        }
    }

    /// A DVR segment read back: the bytes (`Some(None)`: it could not be
    /// read), or None when not read.
    pub fn dvr_read(&self, key: &crate::hls::dvr::ReadKey) -> Option<Option<&crate::files::Piece>> {
        self.dvr_reads.cached(key)
    }

    /// A viewer asks for a DVR segment on disk: it is read (once for
    /// every viewer asking) and the viewer waits as for a part.
    pub fn read_dvr(
        &mut self,
        key: crate::hls::dvr::ReadKey,
        path: std::path::PathBuf,
        peer: std::net::IpAddr,
        io: usize,
    ) -> Result<(), crate::hls::dvr::ReadRefused> {
        self.dvr_reads.start(key, path, peer)?;
        self.wait(key.0, io);
        Ok(())
    }

    /// Bytes of DVR segments on disk, and read back in memory.
    pub fn dvr_bytes(&self) -> (u64, usize) {
        let disk = self
            .outputs
            .values()
            .flat_map(|o| o.dvrs())
            .map(|d| d.bytes)
            .sum();
        (disk, self.dvr_reads.cached_bytes())
    }

    /// Whether a DVR grew (or learnt its free space) since the budgets
    /// were last kept.
    pub fn dvr_budget_due(&self) -> bool {
        self.outputs.values().flat_map(|o| o.dvrs()).any(|d| d.grew)
    }

    /// Bytes of DVR segments and of what this run's HLS dumps wrote, per
    /// application (vhost, app): the disk budgets count both.
    pub fn dvr_usage(&self) -> HashMap<(String, String), u64> {
        let mut usage: HashMap<(String, String), u64> = HashMap::new();
        for o in self.outputs.values() {
            for d in o.dvrs() {
                *usage.entry((o.vhost.clone(), o.app.clone())).or_default() += d.bytes;
            }
        }
        for d in self.dump_tasks.iter() {
            *usage
                .entry((d.spec.vhost.clone(), d.spec.app.clone()))
                .or_default() += d.bytes;
        }
        usage
    }

    /// Bytes this run's dumps wrote.
    fn dump_bytes(&self) -> u64 {
        self.dump_tasks.iter().map(|d| d.bytes).sum()
    }

    /// Whether the dumps wrote enough since their budgets were last kept.
    pub fn dump_budget_due(&self) -> bool {
        self.dump_bytes() >= self.dump_bytes_kept + DUMP_BUDGET_EVERY
    }

    /// The running HLS dumps answer to their application's and the
    /// server's disk budgets: past `MaxTotalMB` (recordings, DVRs and
    /// dumps together) the application's DVRs give up their oldest
    /// segments first; what that cannot free ends the application's
    /// running dumps in `Error`, their files kept and playable (a finished
    /// dump's files are never deleted).
    pub fn keep_dump_budgets(
        &mut self,
        reg: &Registry,
        records: &HashMap<(String, String), u64>,
        records_total: u64,
        now: Now,
    ) {
        self.dump_bytes_kept = self.dump_bytes();
        let mut apps: Vec<(String, String)> = self
            .dump_tasks
            .iter()
            .filter(|d| d.status == crate::hls::dump::DumpStatus::Running)
            .map(|d| (d.spec.vhost.clone(), d.spec.app.clone()))
            .collect();
        apps.sort_unstable();
        apps.dedup();
        for (vhost, app) in apps {
            let what = ("recordings, DVR and dumps", "recordings, DVRs and dumps");
            let totals = (records, records_total);
            let Some((why, bytes)) = self.over_budget(reg, (&vhost, &app), totals, None, what)
            else {
                continue;
            };
            if self.trim_dvr(&vhost, &app, bytes, &why) >= bytes {
                continue;
            }
            let running: Vec<TaskKey> = self
                .dump_tasks
                .iter()
                .filter(|d| d.status == crate::hls::dump::DumpStatus::Running)
                .filter(|d| d.spec.vhost == vhost && d.spec.app == app)
                .map(|d| TaskKey {
                    vhost: vhost.clone(),
                    app: app.clone(),
                    id: d.spec.id.clone(),
                })
                .collect();
            for k in running {
                self.end_dump_in_error(&k, format!("disk budget: {why}"), now);
            }
        }
    }

    /// What an application's DVRs and dumps, with the recordings
    /// (`records`: per application, and all), cross of its budget and the
    /// server's, the most bytes first; `what` names them (the application's,
    /// the server's) in the reason.
    fn over_budget(
        &self,
        reg: &Registry,
        (vhost, app): (&str, &str),
        (records, records_total): (&HashMap<(String, String), u64>, u64),
        free: Option<u64>,
        (app_what, server_what): (&'static str, &'static str),
    ) -> Option<(String, u64)> {
        let budget = reg
            .app(vhost, app)
            .and_then(|a| a.disk_budget)
            .unwrap_or_default();
        let server = reg.disk_budget.unwrap_or_default();
        let usage = self.dvr_usage();
        let key = (vhost.to_string(), app.to_string());
        let use_ = crate::state::app::DiskUse {
            app: records.get(&key).copied().unwrap_or(0) + usage.get(&key).copied().unwrap_or(0),
            all: records_total + usage.values().sum::<u64>(),
            free,
            app_what,
            server_what,
            room: 0,
        };
        crate::state::app::DiskBudget::crossed(budget, server, &use_)
            .into_iter()
            .max_by_key(|(_, b)| *b)
    }

    /// Gives up the oldest DVR segments of an application (its streams'
    /// oldest first) until `bytes` are freed or none is left; the bytes
    /// freed. `why` is logged.
    pub fn trim_dvr(&mut self, vhost: &str, app: &str, bytes: u64, why: &str) -> u64 {
        let mut freed = 0;
        while freed < bytes {
            let oldest = self
                .outputs
                .values_mut()
                .filter(|o| o.vhost == vhost && o.app == app)
                .flat_map(|o| {
                    let name = &o.name;
                    let dvrs = o
                        .hls
                        .as_mut()
                        .and_then(|h| h.dvr.as_mut())
                        .into_iter()
                        .chain(o.ts.as_mut().and_then(|t| t.first_mut()?.dvr.as_mut()));
                    dvrs.map(move |d| (name, d))
                })
                .filter_map(|(name, d)| Some((d.oldest_ms()?, name, d)))
                .min_by_key(|(ms, _, _)| *ms);
            let Some((_, name, d)) = oldest else {
                break;
            };
            let n = d.drop_first();
            if n == 0 {
                break;
            }
            freed += n;
            // A window the budget shrinks is worth one WARN per DVR; the
            // segments that follow it out are told at DEBUG.
            if !std::mem::replace(&mut d.shrunk, true) {
                crate::warn!(
                    "DVR of {vhost}/{app}/{name}: the disk budget shrinks its window (its oldest segments are deleted): {why}"
                );
            }
        }
        if freed > 0 {
            crate::debug!("DVR of {vhost}/{app}: deleted its oldest segments ({freed} bytes) to make room: {why}");
        }
        freed
    }

    /// A DVR that grew answers to its application's and the server's disk
    /// budgets: its segments count with the recordings (`records`: their
    /// bytes per application, and all), and past `MaxTotalMB` or under
    /// `MinFreeMB` it gives up its own oldest segments (a DVR never
    /// deletes a recording, and never stops: at worst it keeps nothing).
    pub fn keep_dvr_budgets(
        &mut self,
        reg: &Registry,
        records: &HashMap<(String, String), u64>,
        records_total: u64,
    ) {
        // The applications whose DVRs grew, with the least free space
        // their DVRs last heard of.
        let mut apps: Vec<(String, String, Option<u64>)> = Vec::new();
        for o in self.outputs.values_mut() {
            let (vhost, app) = (o.vhost.clone(), o.app.clone());
            for d in o.dvrs_mut() {
                if std::mem::take(&mut d.grew) {
                    apps.push((vhost.clone(), app.clone(), d.free));
                }
            }
        }
        apps.sort_unstable_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        apps.dedup_by(|later, kept| {
            let same = later.0 == kept.0 && later.1 == kept.1;
            if same {
                kept.2 = match (kept.2, later.2) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            same
        });
        for (vhost, app, free) in apps {
            let what = ("recordings and DVR", "recordings and DVRs");
            let totals = (records, records_total);
            if let Some((why, bytes)) = self.over_budget(reg, (&vhost, &app), totals, free, what) {
                let freed = self.trim_dvr(&vhost, &app, bytes, &why);
                // Counted as free until the next report.
                for o in self.outputs.values_mut() {
                    if o.vhost == vhost && o.app == app {
                        for d in o.dvrs_mut() {
                            d.free = d.free.map(|f| f.saturating_add(freed));
                        }
                    }
                }
            }
        }
    }

    /// A new HLS (MPEG-TS) packager, with its DVR when `spec` has one.
    pub(super) fn new_ts(
        &mut self,
        spec: &crate::state::app::HlsSpec,
        tracks: &[crate::media::Track],
        now: Now,
    ) -> Option<crate::hls::ts::TsLadder> {
        let (segment, keep) = spec.settings();
        let dvr = spec.dvr.as_ref().filter(|d| d.enable);
        // A DVR keeps one variant (the first rendition).
        let mut ladder =
            crate::hls::ts::TsLadder::new(tracks, segment, keep, now.unix_ms, dvr.is_none())?;
        let ts = ladder.first_mut()?;
        if let Some(d) = dvr {
            let root = std::path::PathBuf::from(d.path());
            self.sweep_dvr(root.clone());
            self.dvr_serial = self.dvr_serial % crate::hls::dvr::MAX_SERIAL + 1;
            let key = format!("hls{}", self.dvr_serial);
            ts.dvr = Some(crate::hls::dvr::Dvr::new(
                &root,
                &key,
                d.window(),
                self.dvr_serial,
            ));
            ts.event_type = d.event_playlist_type == Some(true);
        }
        Some(ladder)
    }

    /// A DVR that is no longer used: what it still asks, then its folder.
    pub(super) fn remove_dvr(&mut self, mut d: crate::hls::dvr::Dvr) {
        self.file_ops.extend(d.take_ops());
        self.file_ops.push(d.remove());
    }

    /// An output goes: its DVR folder with it.
    pub(super) fn drop_output(&mut self, id: StreamId, mut o: Output) {
        for d in o.dvrs_mut() {
            self.file_ops.extend(d.take_ops());
            self.file_ops.push(d.remove());
        }
        self.dvr_reads.forget(id);
    }

    /// The worker's answer about a DVR file: a segment written (or not),
    /// one read back (its viewers are woken), a folder deleted.
    pub(super) fn on_dvr_event(&mut self, ev: FileEvent, now: std::time::Instant) {
        let file = ev.file();
        match ev {
            FileEvent::Read { data, .. } => {
                if let Some(stream) = self.dvr_reads.on_read(file, data, now) {
                    self.wake(stream);
                }
            }
            // A publisher can make many DVRs go (each change of its
            // tracks): at most one line a minute for each reason.
            FileEvent::Deleted { error: Some(e), .. } => crate::log_throttled!(
                crate::log::Level::Warn,
                ("dvr-delete", &e),
                crate::log::NO_ADDRESS,
                "DVR: {e}"
            ),
            FileEvent::Deleted { .. } => {}
            FileEvent::Space { free, .. } => {
                let dvr = self
                    .outputs
                    .values_mut()
                    .flat_map(|o| o.dvrs_mut())
                    .find(|d| d.owns(file));
                if let Some(d) = dvr {
                    d.free = Some(free);
                    d.grew = true;
                }
            }
            FileEvent::Closed { .. } | FileEvent::Failed { .. } => {
                let error = match &ev {
                    FileEvent::Failed { reason, .. } => Some(reason.as_str()),
                    _ => None,
                };
                let dvr = self
                    .outputs
                    .values_mut()
                    .flat_map(|o| o.dvrs_mut())
                    .find(|d| d.owns(file));
                if let Some(d) = dvr {
                    d.on_written(file, error);
                }
            }
        }
    }
}
