//! Disk budgets (issue 44, kiln's `<DiskBudget>`): a recording answers to
//! its application's budget and the server's. Past `MaxTotalMB` of
//! recorded files (the application's, or the server's) or under
//! `MinFreeMB` free on the file system (as the writer last read it,
//! `statvfs` off the loop), the oldest closed file of the record writing
//! is deleted, then of its application's other records, then the oldest
//! segments of its application's LL-HLS DVRs (whose bytes count in the
//! totals); each deletion is logged and a record's listed in its info
//! XML (`deletedTime`). With nothing left to delete, the record goes to
//! `error` with "disk full" and the figures, its file closed: never a
//! silent stop.

use super::{fail, RecordManager};
use crate::clock::Now;
use crate::files::FileOp;
use crate::record::task::{info_xml, RecordState, RecordTask};
use crate::state::app::{DiskBudget, DiskUse};
use crate::state::task::TaskKey;
use crate::state::Registry;
use std::path::PathBuf;
/// The loop keeps a recording's budgets each time its open file grows by
/// this much (besides each file's start and end and the writer's free-space
/// reports); `MaxTotalMB` leaves this much room, so that what is written
/// between two checks does not take the files past it.
pub(super) const BUDGET_EVERY: u64 = 256 << 10;

/// The budgets one recording answers to.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Budgets {
    app: DiskBudget,
    server: DiskBudget,
}

impl Budgets {
    pub(super) fn of(reg: &Registry, vhost: &str, app: &str) -> Budgets {
        Budgets {
            app: reg
                .app(vhost, app)
                .and_then(|a| a.disk_budget)
                .unwrap_or_default(),
            server: reg.disk_budget.unwrap_or_default(),
        }
    }

    pub(super) fn is_set(&self) -> bool {
        self.app != DiskBudget::default() || self.server != DiskBudget::default()
    }
}

/// Bytes of a record's files still on disk.
fn on_disk(t: &RecordTask) -> u64 {
    let closed: u64 = t
        .finished
        .iter()
        .filter(|f| f.deleted_ms.is_none())
        .map(|f| f.record_bytes)
        .sum();
    let open = if t.state == RecordState::Recording {
        t.record_bytes
    } else {
        0
    };
    closed + open
}

impl RecordManager {
    /// What `key` now crosses of its budgets, if anything (the first, in
    /// [`DiskBudget::crossed`]'s order), and by how many bytes.
    fn over_budget(&self, key: &TaskKey, b: Budgets, free: Option<u64>) -> Option<(String, u64)> {
        let dvr_app = self
            .dvr_usage
            .get(&(key.vhost.clone(), key.app.clone()))
            .copied()
            .unwrap_or(0);
        let app_total: u64 = self
            .tasks
            .of_app(&key.vhost, &key.app)
            .into_iter()
            .map(on_disk)
            .sum::<u64>()
            + dvr_app;
        let all: u64 =
            self.tasks.iter().map(on_disk).sum::<u64>() + self.dvr_usage.values().sum::<u64>();
        let usage = DiskUse {
            app: app_total,
            all,
            free,
            app_what: if dvr_app > 0 {
                "recordings and DVR"
            } else {
                "recordings"
            },
            server_what: "recordings",
            room: BUDGET_EVERY,
        };
        DiskBudget::crossed(b.app, b.server, &usage)
            .into_iter()
            .next()
    }

    /// Bytes of recorded files on disk per application (vhost, app), and
    /// of all (the DVRs' budgets count them).
    pub fn disk_usage(&self) -> (std::collections::HashMap<(String, String), u64>, u64) {
        let mut usage: std::collections::HashMap<(String, String), u64> = Default::default();
        let mut all = 0;
        for t in self.tasks.iter() {
            let n = on_disk(t);
            all += n;
            *usage
                .entry((t.spec.vhost.clone(), t.spec.app.clone()))
                .or_default() += n;
        }
        (usage, all)
    }

    /// The oldest closed file still on disk: the record's own first, then
    /// of its application's other records. (owner, index in `finished`).
    fn oldest_file(&self, key: &TaskKey) -> Option<(TaskKey, usize)> {
        let oldest = |t: &RecordTask| {
            t.finished
                .iter()
                .enumerate()
                .filter(|(_, f)| f.deleted_ms.is_none())
                .min_by_key(|(_, f)| f.start_ms)
                .map(|(i, f)| (f.start_ms, t.key(), i))
        };
        if let Some((_, k, i)) = self.tasks.get(key).and_then(oldest) {
            return Some((k, i));
        }
        self.tasks
            .of_app(&key.vhost, &key.app)
            .into_iter()
            .filter_map(oldest)
            .min_by_key(|(start, _, _)| *start)
            .map(|(_, k, i)| (k, i))
    }

    /// After the writer said how much is free (or a file was added):
    /// deletes the oldest files until `key` is within its budgets, or puts
    /// it in `error` when none is left.
    pub(super) fn keep_budget(&mut self, key: &TaskKey, now: Now) {
        let Some(r) = self.recordings.get(key) else {
            return;
        };
        let (budgets, mut free) = (r.budget, r.free);
        if !budgets.is_set() {
            return;
        }
        while let Some((why, need)) = self.over_budget(key, budgets, free) {
            let Some((owner, i)) = self.oldest_file(key) else {
                // Then the application's DVRs give up their oldest
                // segments (the loop hands them the request).
                let app = (key.vhost.clone(), key.app.clone());
                let dvr = self.dvr_usage.get(&app).copied().unwrap_or(0);
                if dvr > 0 {
                    let n = need.min(dvr);
                    self.dvr_usage.insert(app.clone(), dvr - n);
                    self.dvr_trims.push((app.0, app.1, n, why));
                    free = free.map(|f| f.saturating_add(n));
                    continue;
                }
                self.finish(key, now, true);
                self.recordings.remove(key);
                fail(
                    key,
                    &mut self.tasks,
                    format!("disk full: {why}, and no older recording to delete"),
                    now,
                );
                return;
            };
            let Some(t) = self.tasks.get_mut(&owner) else {
                return;
            };
            let f = &mut t.finished[i];
            f.deleted_ms = Some(now.unix_ms);
            let (path, info_path, bytes) =
                (f.file_path.clone(), f.info_path.clone(), f.record_bytes);
            crate::info!("record [{owner}]: deleted {path} ({bytes} bytes) to make room: {why}");
            free = free.map(|f| f.saturating_add(bytes));
            let xml = info_xml(t, &info_path, self.out.utc_offset);
            let out = &mut self.out;
            let id = out.next_file;
            out.next_file += 2;
            out.deleting.insert(id, bytes);
            out.ops.push(FileOp::Delete {
                file: id,
                path: PathBuf::from(path),
            });
            out.ops.push(FileOp::Replace {
                file: id + 1,
                path: PathBuf::from(info_path),
                data: xml.into_bytes(),
                fresh: false,
            });
        }
        if let Some(r) = self.recordings.get_mut(key) {
            r.free = free;
        }
    }
}
