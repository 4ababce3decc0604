//! Disk budgets (issue 44, kiln's `<DiskBudget>`): a recording answers to
//! its application's budget and the server's. Past `MaxTotalMB` of
//! recorded files (the application's, or the server's) or under
//! `MinFreeMB` free on the file system (as the writer last read it,
//! `statvfs` off the loop), the oldest closed file of the record writing
//! is deleted, then of its application's other records; each deletion is
//! logged and listed in its record's info XML (`deletedTime`). With
//! nothing left to delete, the record goes to `error` with "disk full"
//! and the figures, its file closed: never a silent stop.

use super::{fail, RecordManager};
use crate::clock::Now;
use crate::files::FileOp;
use crate::record::task::{info_xml, RecordState, RecordTask};
use crate::state::app::DiskBudget;
use crate::state::task::TaskKey;
use crate::state::Registry;
use std::path::PathBuf;

const MB: u64 = 1 << 20;

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

    fn is_set(&self) -> bool {
        self.app != DiskBudget::default() || self.server != DiskBudget::default()
    }

    /// The larger of the two free-space floors, in bytes.
    fn min_free(&self) -> Option<u64> {
        self.app
            .min_free_mb
            .max(self.server.min_free_mb)
            .map(|mb| mb.saturating_mul(MB))
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
    /// What `key` now crosses of its budgets, if anything.
    fn over_budget(&self, key: &TaskKey, b: Budgets, free: Option<u64>) -> Option<String> {
        let app_total: u64 = self
            .tasks
            .of_app(&key.vhost, &key.app)
            .into_iter()
            .map(on_disk)
            .sum();
        if let Some(mb) = b
            .app
            .max_total_mb
            .filter(|&mb| app_total > mb.saturating_mul(MB))
        {
            return Some(format!(
                "the application's recordings take {} MB (MaxTotalMB {mb})",
                app_total / MB
            ));
        }
        let all: u64 = self.tasks.iter().map(on_disk).sum();
        if let Some(mb) = b
            .server
            .max_total_mb
            .filter(|&mb| all > mb.saturating_mul(MB))
        {
            return Some(format!(
                "the server's recordings take {} MB (its MaxTotalMB {mb})",
                all / MB
            ));
        }
        match (b.min_free(), free) {
            (Some(min), Some(free)) if free < min => Some(format!(
                "{} MB free on the file system (MinFreeMB {})",
                free / MB,
                min / MB
            )),
            _ => None,
        }
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
        while let Some(why) = self.over_budget(key, budgets, free) {
            let Some((owner, i)) = self.oldest_file(key) else {
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
