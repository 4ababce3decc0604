//! The state file: everything made through the API, so it survives a
//! restart (DECISIONS sections 6 and 15). Two files, both mode 0600 (they
//! hold policy secrets, Redis passwords and stream keys):
//!
//! - the snapshot (`<StateFile>`): the whole durable state, written
//!   crash-safely (temporary file, fsync, rename, fsync the directory);
//! - the journal (`<StateFile>.journal`): one JSON line per API change,
//!   appended and fsynced before the call is answered.
//!
//! A change costs O(its own size), not O(all state): the journal is folded
//! into a new snapshot only when it has grown past the snapshot (at least
//! [`COMPACT_MIN`]), so the snapshot's cost is spread over as many changes
//! as it holds. Every journal record carries a sequence number and the
//! snapshot names the last one it folded in, so a crash between writing a
//! snapshot and emptying the journal replays nothing twice. A torn last
//! line (a crash mid-append, never answered) is dropped; anything else that
//! does not parse stops start-up and is never overwritten.

use super::app::AppSpec;
use super::vhost::VhostSpec;
use crate::pull::PullSpec;
use crate::push::request::PushSpec;
use crate::record::request::RecordSpec;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The journal is folded into the snapshot once it is larger than both the
/// snapshot and this.
pub const COMPACT_MIN: u64 = 256 * 1024;

/// Mode of the state files: owner only.
const MODE: u32 = 0o600;

pub const FORMAT: u32 = 1;

/// What the state file holds.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DurableState {
    pub format: u32,
    /// API-made virtual hosts in creation order.
    #[serde(default)]
    pub vhosts: Vec<VhostSpec>,
    /// Push tasks in creation order (counters and states are not kept).
    #[serde(default)]
    pub pushes: Vec<PushSpec>,
    /// Record tasks in creation order (as push tasks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<RecordSpec>,
    /// Persistent pulled streams (as push tasks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pulls: Vec<PullSpec>,
    /// The last journal record folded into this snapshot.
    #[serde(default)]
    pub journal_seq: u64,
}

/// One change made through the API: a journal record. Each is applied to
/// the registry by its handler and, on replay, to [`DurableState`] by
/// [`DurableState::apply`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Change {
    /// API-made hosts created in one call, in order.
    AddVhosts {
        vhosts: Vec<VhostSpec>,
    },
    /// A host and its push tasks removed.
    DeleteVhost {
        name: String,
    },
    /// A host's applications replaced; `removed_app`'s push tasks go too.
    SetApps {
        vhost: String,
        applications: Option<Vec<AppSpec>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        removed_app: Option<String>,
    },
    AddPush {
        push: PushSpec,
    },
    DeletePush {
        vhost: String,
        app: String,
        id: String,
    },
    AddRecord {
        record: RecordSpec,
    },
    DeleteRecord {
        vhost: String,
        app: String,
        id: String,
    },
    /// A persistent pull added (others are not durable).
    AddPull {
        pull: PullSpec,
    },
    DeletePull {
        vhost: String,
        app: String,
        name: String,
    },
}

#[derive(Serialize, Deserialize)]
struct Record {
    seq: u64,
    #[serde(flatten)]
    change: Change,
}

#[cfg(test)]
impl DurableState {
    /// Applies one change the plain way (the reference [`replay`] is
    /// checked against).
    pub fn apply(&mut self, change: Change) {
        match change {
            Change::AddVhosts { vhosts } => self.vhosts.extend(vhosts),
            Change::DeleteVhost { name } => {
                self.vhosts.retain(|v| v.name != name);
                self.pushes.retain(|p| p.vhost != name);
                self.records.retain(|p| p.vhost != name);
                self.pulls.retain(|p| p.vhost != name);
            }
            Change::SetApps {
                vhost,
                applications,
                removed_app,
            } => {
                if let Some(v) = self.vhosts.iter_mut().find(|v| v.name == vhost) {
                    v.applications = applications;
                }
                if let Some(app) = removed_app {
                    self.pushes.retain(|p| !(p.vhost == vhost && p.app == app));
                    self.records.retain(|p| !(p.vhost == vhost && p.app == app));
                    self.pulls.retain(|p| !(p.vhost == vhost && p.app == app));
                }
            }
            Change::AddPush { push } => self.pushes.push(push),
            Change::DeletePush { vhost, app, id } => self
                .pushes
                .retain(|p| !(p.vhost == vhost && p.app == app && p.id == id)),
            Change::AddRecord { record } => self.records.push(record),
            Change::DeleteRecord { vhost, app, id } => self
                .records
                .retain(|p| !(p.vhost == vhost && p.app == app && p.id == id)),
            Change::AddPull { pull } => self.pulls.push(pull),
            Change::DeletePull { vhost, app, name } => self
                .pulls
                .retain(|p| !(p.vhost == vhost && p.app == app && p.name == name)),
        }
    }
}

#[derive(Debug)]
pub enum StateError {
    Read(PathBuf, io::Error),
    Parse(PathBuf, serde_json::Error),
    Format(PathBuf, u32),
    /// A journal record that does not parse (not a torn last line): line.
    Journal(PathBuf, usize, serde_json::Error),
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateError::Read(p, e) => write!(f, "cannot read the state file {}: {e}", p.display()),
            StateError::Parse(p, e) => write!(
                f,
                "the state file {} is corrupt ({e}); kiln will not start over it. Fix or move the file; it has not been changed",
                p.display()
            ),
            StateError::Journal(p, line, e) => write!(
                f,
                "the state journal {} is corrupt at line {line} ({e}); kiln will not start over it. Fix or move the file; it has not been changed",
                p.display()
            ),
            StateError::Format(p, v) => write!(
                f,
                "the state file {} has format {v}; this kiln reads format {FORMAT}. It has not been changed",
                p.display()
            ),
        }
    }
}

impl std::error::Error for StateError {}

#[derive(Debug)]
pub struct StateStore {
    path: PathBuf,
    tmp: PathBuf,
    journal_path: PathBuf,
    /// Open for appending once the store is opened.
    journal: Option<File>,
    journal_bytes: u64,
    snapshot_bytes: u64,
    /// The last sequence number written.
    seq: u64,
    /// Kept in memory only (fuzzing and in-process tests): nothing is
    /// written.
    memory: bool,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.to_path_buf().into_os_string();
    p.push(suffix);
    PathBuf::from(p)
}

impl StateStore {
    pub fn new(path: PathBuf) -> Self {
        StateStore {
            tmp: with_suffix(&path, ".tmp"),
            journal_path: with_suffix(&path, ".journal"),
            path,
            journal: None,
            journal_bytes: 0,
            snapshot_bytes: 0,
            seq: 0,
            memory: false,
        }
    }

    /// A store that writes nothing (fuzzing and in-process tests).
    pub fn in_memory() -> Self {
        let mut s = StateStore::new(PathBuf::from("(memory)"));
        s.memory = true;
        s
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The saved state (snapshot plus journal); `None` when there is none.
    /// Reads only: see [`StateStore::open`].
    pub fn load(&mut self) -> Result<Option<DurableState>, StateError> {
        if self.memory {
            return Ok(None);
        }
        let snapshot = match fs::read(&self.path) {
            Ok(d) => Some(d),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(StateError::Read(self.path.clone(), e)),
        };
        let journal = match fs::read(&self.journal_path) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(StateError::Read(self.journal_path.clone(), e)),
        };
        if snapshot.is_none() && journal.is_empty() {
            return Ok(None);
        }
        let state = replay(
            snapshot.as_deref(),
            &journal,
            &self.path,
            &self.journal_path,
        )?;
        self.snapshot_bytes = snapshot.map_or(0, |d| d.len() as u64);
        self.seq = state.journal_seq;
        Ok(Some(state))
    }

    /// Makes the store ready for [`StateStore::record`]: tightens the files'
    /// modes to 0600 and, when the journal holds records (or a torn tail),
    /// folds the state into a new snapshot. `current` gives the state as
    /// restored from what [`StateStore::load`] gave.
    pub fn open(&mut self, current: impl FnOnce() -> DurableState) -> io::Result<()> {
        if self.memory {
            return Ok(());
        }
        for p in [&self.path, &self.journal_path] {
            if let Ok(meta) = fs::metadata(p) {
                if meta.permissions().mode() & 0o077 != 0 {
                    fs::set_permissions(p, fs::Permissions::from_mode(MODE))?;
                    crate::info!("state file {}: mode set to 0600", p.display());
                }
            }
        }
        let journal_len = fs::metadata(&self.journal_path).map_or(0, |m| m.len());
        let fold = journal_len > 0;
        if fold || !self.path.exists() {
            self.write_snapshot(current())?;
        }
        self.open_journal(fold)?;
        sync_dir(&self.path)
    }

    /// Opens the journal for appending; `empty`: after a snapshot that
    /// holds everything in it.
    fn open_journal(&mut self, empty: bool) -> io::Result<()> {
        let f = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(MODE)
            .open(&self.journal_path)?;
        if empty {
            f.set_len(0)?;
            f.sync_all()?;
        }
        self.journal_bytes = f.metadata()?.len();
        self.journal = Some(f);
        Ok(())
    }

    /// Makes `change` durable before the API call that made it is answered.
    /// `current` gives the whole state as it is before `change`; it is
    /// called only when the journal is due to be folded into a snapshot.
    pub fn record(
        &mut self,
        change: &Change,
        current: impl FnOnce() -> DurableState,
    ) -> io::Result<()> {
        if self.memory {
            return Ok(());
        }
        if self.journal.is_none() {
            return Err(io::Error::other("the state store was not opened"));
        }
        if self.journal_bytes > self.snapshot_bytes.max(COMPACT_MIN) {
            self.write_snapshot(current())?;
            self.open_journal(true)?;
        }
        let mut line = serde_json::to_vec(&Record {
            seq: self.seq + 1,
            change: change.clone(),
        })
        .map_err(io::Error::other)?;
        line.push(b'\n');
        let Some(journal) = self.journal.as_mut() else {
            return Err(io::Error::other("the state journal is not open"));
        };
        let written = journal.write_all(&line).and_then(|()| journal.sync_data());
        if let Err(e) = written {
            // Leave no torn record for the next append to follow.
            let _ = journal.set_len(self.journal_bytes);
            return Err(e);
        }
        self.journal_bytes += line.len() as u64;
        self.seq += 1;
        Ok(())
    }

    /// Writes `state` as the snapshot so that after a crash at any moment
    /// the file holds either the old or the new snapshot, whole.
    fn write_snapshot(&mut self, mut state: DurableState) -> io::Result<()> {
        state.journal_seq = self.seq;
        let mut data = serde_json::to_vec(&state).map_err(io::Error::other)?;
        data.push(b'\n');
        {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(MODE)
                .open(&self.tmp)?;
            // An older kiln may have left the file with a looser mode.
            f.set_permissions(fs::Permissions::from_mode(MODE))?;
            f.write_all(&data)?;
            f.sync_all()?;
        }
        fs::rename(&self.tmp, &self.path)?;
        sync_dir(&self.path)?;
        self.snapshot_bytes = data.len() as u64;
        Ok(())
    }
}

/// The state a snapshot and a journal hold together (pure: the fuzz target
/// `state_journal` drives it). `journal_seq` of the result is the last
/// record applied. The paths only name the files in errors.
pub fn replay(
    snapshot: Option<&[u8]>,
    journal: &[u8],
    snapshot_path: &Path,
    journal_path: &Path,
) -> Result<DurableState, StateError> {
    let state = match snapshot {
        Some(data) => {
            let state: DurableState = serde_json::from_slice(data)
                .map_err(|e| StateError::Parse(snapshot_path.to_path_buf(), e))?;
            if state.format != FORMAT {
                return Err(StateError::Format(
                    snapshot_path.to_path_buf(),
                    state.format,
                ));
            }
            state
        }
        None => DurableState {
            format: FORMAT,
            ..Default::default()
        },
    };
    let mut replayer = Replayer::new(state);
    let mut lines = journal.split(|b| *b == b'\n').enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        // The piece after the last newline: empty, or a torn append.
        let last = lines.peek().is_none();
        if line.is_empty() && last {
            break;
        }
        let record: Record = match serde_json::from_slice(line) {
            Ok(r) => r,
            Err(_) if last => {
                crate::warn!(
                    "state journal {}: dropped an incomplete last record ({} bytes, never acknowledged)",
                    journal_path.display(),
                    line.len()
                );
                break;
            }
            Err(e) => return Err(StateError::Journal(journal_path.to_path_buf(), i + 1, e)),
        };
        replayer.apply(record);
    }
    Ok(replayer.finish())
}

/// A durable task (push or record), keyed by vhost/app/id.
trait DurableTask {
    /// (vhost, app, id) borrowed.
    fn key_ref(&self) -> (&str, &str, &str);

    fn key(&self) -> (String, String, String) {
        let (v, a, i) = self.key_ref();
        (v.to_string(), a.to_string(), i.to_string())
    }
}

impl DurableTask for PushSpec {
    fn key_ref(&self) -> (&str, &str, &str) {
        (&self.vhost, &self.app, &self.id)
    }
}

impl DurableTask for RecordSpec {
    fn key_ref(&self) -> (&str, &str, &str) {
        (&self.vhost, &self.app, &self.id)
    }
}

impl DurableTask for PullSpec {
    fn key_ref(&self) -> (&str, &str, &str) {
        (&self.vhost, &self.app, &self.name)
    }
}

/// Tasks of one kind being replayed: (task, sequence number it was added
/// at); `None` once deleted.
struct Replayed<T> {
    tasks: Vec<Option<(T, u64)>>,
    /// Built at the first journal record: a snapshot alone holds each task
    /// once and needs no index (start-up with 10,000 tasks skips 30,000
    /// string copies and their hashing).
    index: Option<std::collections::HashMap<(String, String, String), usize>>,
}

impl<T: DurableTask> Replayed<T> {
    fn new(tasks: Vec<T>) -> Self {
        Replayed {
            tasks: tasks.into_iter().map(|t| Some((t, 0))).collect(),
            index: None,
        }
    }

    fn index(&mut self) -> &mut std::collections::HashMap<(String, String, String), usize> {
        let tasks = &self.tasks;
        self.index.get_or_insert_with(|| {
            let mut index = std::collections::HashMap::with_capacity(tasks.len());
            for (i, t) in tasks.iter().enumerate() {
                if let Some((t, _)) = t {
                    // A snapshot written by an older kiln could name a task
                    // twice: the later wins, as it always did.
                    index.insert(t.key(), i);
                }
            }
            index
        })
    }

    fn add(&mut self, task: T, seq: u64) {
        let at = self.tasks.len();
        if let Some(old) = self.index().insert(task.key(), at) {
            self.tasks[old] = None;
        }
        self.tasks.push(Some((task, seq)));
    }

    fn delete(&mut self, key: (String, String, String)) {
        if let Some(i) = self.index().remove(&key) {
            self.tasks[i] = None;
        }
    }

    /// The tasks still there: added after every deletion of their host
    /// or application.
    fn finish(
        mut self,
        vhost_deleted: &std::collections::HashMap<String, u64>,
        app_deleted: &std::collections::HashMap<(String, String), u64>,
    ) -> Vec<T> {
        if self.index.is_none() {
            // The snapshot alone: a hand-edited file may name a task twice;
            // the later wins, found by borrowed keys (no copies).
            let mut last: std::collections::HashMap<(&str, &str, &str), usize> =
                std::collections::HashMap::with_capacity(self.tasks.len());
            let mut shadowed = Vec::new();
            for (i, t) in self.tasks.iter().enumerate() {
                if let Some((t, _)) = t {
                    if let Some(earlier) = last.insert(t.key_ref(), i) {
                        shadowed.push(earlier);
                    }
                }
            }
            drop(last);
            for i in shadowed {
                self.tasks[i] = None;
            }
        }
        let nothing_deleted = vhost_deleted.is_empty() && app_deleted.is_empty();
        self.tasks
            .into_iter()
            .flatten()
            .filter(|(t, added)| {
                if nothing_deleted {
                    return true;
                }
                let (vhost, app, _) = t.key();
                let host_gone = vhost_deleted.get(&vhost).is_some_and(|d| d > added);
                let app_gone = app_deleted.get(&(vhost, app)).is_some_and(|d| d > added);
                !host_gone && !app_gone
            })
            .map(|(t, _)| t)
            .collect()
    }
}

/// Applies journal records in O(1) each (but for a host's applications,
/// O(their size)), whatever the number of tasks: a deleted host or
/// application is remembered with the sequence number of its deletion,
/// and a task is kept only if it was added after every deletion that
/// covers it.
struct Replayer {
    state: DurableState,
    pushes: Replayed<PushSpec>,
    records: Replayed<RecordSpec>,
    pulls: Replayed<PullSpec>,
    vhost_deleted: std::collections::HashMap<String, u64>,
    app_deleted: std::collections::HashMap<(String, String), u64>,
}

impl Replayer {
    fn new(mut state: DurableState) -> Self {
        Replayer {
            pushes: Replayed::new(std::mem::take(&mut state.pushes)),
            records: Replayed::new(std::mem::take(&mut state.records)),
            pulls: Replayed::new(std::mem::take(&mut state.pulls)),
            state,
            vhost_deleted: Default::default(),
            app_deleted: Default::default(),
        }
    }

    fn apply(&mut self, record: Record) {
        if record.seq <= self.state.journal_seq {
            return; // already in the snapshot
        }
        let seq = record.seq;
        self.state.journal_seq = seq;
        match record.change {
            Change::AddVhosts { vhosts } => self.state.vhosts.extend(vhosts),
            Change::DeleteVhost { name } => {
                self.state.vhosts.retain(|v| v.name != name);
                self.vhost_deleted.insert(name, seq);
            }
            Change::SetApps {
                vhost,
                applications,
                removed_app,
            } => {
                if let Some(v) = self.state.vhosts.iter_mut().find(|v| v.name == vhost) {
                    v.applications = applications;
                }
                if let Some(app) = removed_app {
                    self.app_deleted.insert((vhost, app), seq);
                }
            }
            Change::AddPush { push } => self.pushes.add(push, seq),
            Change::DeletePush { vhost, app, id } => self.pushes.delete((vhost, app, id)),
            Change::AddRecord { record } => self.records.add(record, seq),
            Change::DeleteRecord { vhost, app, id } => self.records.delete((vhost, app, id)),
            Change::AddPull { pull } => self.pulls.add(pull, seq),
            Change::DeletePull { vhost, app, name } => self.pulls.delete((vhost, app, name)),
        }
    }

    fn finish(self) -> DurableState {
        let mut state = self.state;
        state.pushes = self.pushes.finish(&self.vhost_deleted, &self.app_deleted);
        state.records = self.records.finish(&self.vhost_deleted, &self.app_deleted);
        state.pulls = self.pulls.finish(&self.vhost_deleted, &self.app_deleted);
        state
    }
}

fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kiln-store-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn vhost(name: &str) -> VhostSpec {
        serde_json::from_value(serde_json::json!({"name": name, "host": {"names": ["*"]}})).unwrap()
    }

    fn push(id: &str) -> PushSpec {
        serde_json::from_value(serde_json::json!({"id": id, "vhost": "a", "app": "app",
            "streamName": "s", "protocol": "mpegts", "url": "udp://127.0.0.1:9", "createdMs": 1}))
        .unwrap()
    }

    /// Opens a store over `path` as start-up does; returns it and the state.
    fn start(path: &Path) -> (StateStore, DurableState) {
        let mut store = StateStore::new(path.to_path_buf());
        let state = store.load().unwrap().unwrap_or(DurableState {
            format: FORMAT,
            ..Default::default()
        });
        let copy = state.clone();
        store.open(|| copy).unwrap();
        (store, state)
    }

    #[test]
    fn changes_survive_a_restart_and_files_are_private() {
        let d = temp_dir("roundtrip");
        let p = d.join("state.json");
        let (mut store, mut state) = start(&p);
        let changes = [
            Change::AddVhosts {
                vhosts: vec![vhost("a"), vhost("b")],
            },
            Change::AddPush { push: push("p1") },
            Change::AddPush { push: push("p2") },
            Change::DeletePush {
                vhost: "a".into(),
                app: "app".into(),
                id: "p1".into(),
            },
            Change::DeleteVhost { name: "b".into() },
        ];
        for c in changes {
            let snapshot = state.clone();
            store.record(&c, || snapshot).unwrap();
            state.apply(c);
        }
        drop(store);
        let mode = fs::metadata(d.join("state.json.journal"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let (_, loaded) = start(&p);
        assert_eq!(loaded.vhosts, vec![vhost("a")]);
        assert_eq!(loaded.pushes, vec![push("p2")]);
        // start-up folded the journal into the snapshot
        assert_eq!(fs::metadata(d.join("state.json.journal")).unwrap().len(), 0);
        let mode = fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!d.join("state.json.tmp").exists());
    }

    #[test]
    fn compaction_keeps_everything_and_bounds_the_journal() {
        let d = temp_dir("compact");
        let p = d.join("state.json");
        let (mut store, mut state) = start(&p);
        store
            .record(
                &Change::AddVhosts {
                    vhosts: vec![vhost("a")],
                },
                || state.clone(),
            )
            .unwrap();
        state.apply(Change::AddVhosts {
            vhosts: vec![vhost("a")],
        });
        for i in 0..3000 {
            let c = Change::AddPush {
                push: push(&format!("p{i}")),
            };
            let snapshot = state.clone();
            store.record(&c, || snapshot).unwrap();
            state.apply(c);
            assert!(store.journal_bytes <= store.snapshot_bytes.max(COMPACT_MIN) + 1024);
        }
        assert!(store.snapshot_bytes > 0, "compaction ran");
        let (_, loaded) = start(&p);
        assert_eq!(loaded.pushes.len(), 3000);
        assert_eq!(loaded.pushes, state.pushes);
    }

    #[test]
    fn a_task_named_twice_in_a_snapshot_is_kept_once_the_later() {
        let mut first = push("x");
        first.stream_name = "first".into();
        let second = push("x");
        let state = DurableState {
            format: FORMAT,
            pushes: vec![first, push("y"), second.clone()],
            ..Default::default()
        };
        let text = serde_json::to_vec(&state).unwrap();
        let d = temp_dir("dup");
        let got = replay(Some(&text), b"", &d.join("s"), &d.join("j")).unwrap();
        assert_eq!(got.pushes, vec![push("y"), second]);
    }

    #[test]
    fn replay_skips_records_already_in_the_snapshot_and_drops_a_torn_tail() {
        let d = temp_dir("replay");
        let p = d.join("state.json");
        let (mut store, state) = start(&p);
        let c = Change::AddVhosts {
            vhosts: vec![vhost("a")],
        };
        store.record(&c, || state.clone()).unwrap();
        let journal = fs::read(d.join("state.json.journal")).unwrap();
        // A crash after the snapshot was renamed in, before the journal was
        // emptied: the snapshot says it holds seq 1.
        let mut folded = state.clone();
        folded.apply(c);
        folded.journal_seq = 1;
        fs::write(&p, serde_json::to_vec(&folded).unwrap()).unwrap();
        let mut torn = journal.clone();
        torn.extend_from_slice(br#"{"seq":2,"op":"addPu"#);
        fs::write(d.join("state.json.journal"), &torn).unwrap();
        let (mut store, loaded) = start(&p);
        assert_eq!(loaded.vhosts, vec![vhost("a")], "applied once");
        // appends go on from seq 2 after the fold
        store
            .record(&Change::AddPush { push: push("x") }, || loaded.clone())
            .unwrap();
        drop(store);
        let (_, again) = start(&p);
        assert_eq!(again.pushes, vec![push("x")]);
        // a bad line that is not the last one is corruption
        fs::write(d.join("state.json.journal"), b"{bad}\n{\"seq\":9}\n").unwrap();
        let err = StateStore::new(p.clone()).load().unwrap_err().to_string();
        assert!(err.contains("journal") && err.contains("line 1"), "{err}");
    }

    proptest::proptest! {
        /// Replaying a journal gives what applying its changes one by one
        /// gives (hosts and apps deleted and made again, tasks of deleted
        /// hosts and apps dropped, ids reused after a delete).
        #[test]
        fn replay_equals_plain_application(ops in proptest::collection::vec((0u8..6, 0u8..3, 0u8..2, 0u8..4), 0..200)) {
            let mut plain = DurableState { format: FORMAT, ..Default::default() };
            let mut journal = Vec::new();
            for (seq, (op, h, a, i)) in ops.into_iter().enumerate() {
                let (h, a) = (format!("h{h}"), format!("a{a}"));
                let id = format!("p{i}");
                let exists = |s: &DurableState| s.vhosts.iter().any(|v| v.name == h);
                let change = match op {
                    0 if !exists(&plain) => Change::AddVhosts { vhosts: vec![vhost(&h)] },
                    1 if exists(&plain) => Change::DeleteVhost { name: h.clone() },
                    2 if exists(&plain) => Change::SetApps { vhost: h.clone(), applications: None, removed_app: Some(a.clone()) },
                    3 | 4 if exists(&plain)
                        && !plain.pushes.iter().any(|p| p.vhost == h && p.app == a && p.id == id) =>
                    {
                        let mut p = push(&id);
                        p.vhost = h.clone();
                        p.app = a.clone();
                        Change::AddPush { push: p }
                    }
                    5 => Change::DeletePush { vhost: h.clone(), app: a.clone(), id },
                    _ => continue,
                };
                journal.extend(serde_json::to_vec(&Record { seq: seq as u64 + 1, change: change.clone() }).unwrap());
                journal.push(b'\n');
                plain.apply(change);
            }
            let got = replay(None, &journal, Path::new("s"), Path::new("j")).unwrap();
            proptest::prop_assert_eq!(got.vhosts, plain.vhosts);
            proptest::prop_assert_eq!(got.pushes, plain.pushes);
        }
    }

    #[test]
    fn an_existing_loose_file_becomes_private_at_start() {
        let d = temp_dir("mode");
        let p = d.join("state.json");
        fs::write(&p, br#"{"format":1}"#).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        let _ = start(&p);
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn corrupt_file_is_an_error_and_untouched() {
        let d = temp_dir("corrupt");
        let p = d.join("state.json");
        fs::write(&p, b"{not json").unwrap();
        let err = StateStore::new(p.clone()).load().unwrap_err().to_string();
        assert!(err.contains("corrupt"), "{err}");
        assert_eq!(fs::read(&p).unwrap(), b"{not json");
    }
}
