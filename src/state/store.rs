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
use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use std::collections::{BTreeMap, HashMap};
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

/// A kind of durable task a feature keeps in the state file. The store
/// knows kinds only by these names: the feature that declares one parses
/// and writes its tasks.
#[derive(Debug, PartialEq, Eq)]
pub struct TaskKind {
    /// The snapshot's list of them (`pushes`).
    pub list: &'static str,
    /// The journal's name of one: records `add<Item>` (the task under
    /// `"<item>"`) and `delete<Item>` (`push`: `addPush`, `deletePush`).
    pub item: &'static str,
    /// The field that names a task in its application: `id` or `name`.
    pub id_field: &'static str,
}

impl TaskKind {
    fn op(&self, verb: &str) -> String {
        let mut op = String::from(verb);
        let mut chars = self.item.chars();
        if let Some(c) = chars.next() {
            op.extend(c.to_uppercase());
            op.push_str(chars.as_str());
        }
        op
    }

    /// (vhost, app, id) of a task's JSON; `None` if it does not name them.
    fn key_of(&self, task: &RawValue) -> Option<Key> {
        #[derive(Deserialize)]
        struct Fields {
            vhost: String,
            app: String,
            id: Option<String>,
            name: Option<String>,
        }
        let f: Fields = serde_json::from_str(task.get()).ok()?;
        let id = match self.id_field {
            "name" => f.name,
            _ => f.id,
        }?;
        Some((f.vhost, f.app, id))
    }
}

/// One task as the state file holds it: its JSON, for its feature to read.
pub type TaskJson = Box<RawValue>;

/// (vhost, app, id) of a task.
type Key = (String, String, String);

/// What the state file holds.
#[derive(Debug, Clone, Default)]
pub struct DurableState {
    pub format: u32,
    /// API-made virtual hosts in creation order.
    pub vhosts: Vec<VhostSpec>,
    /// Tasks by kind ([`TaskKind::list`]), each kind in creation order
    /// (counters and states are not kept).
    pub tasks: BTreeMap<String, Vec<TaskJson>>,
    /// The last journal record folded into this snapshot.
    pub journal_seq: u64,
}

impl DurableState {
    /// The tasks of a kind.
    pub fn tasks_of(&self, kind: &TaskKind) -> &[TaskJson] {
        self.tasks.get(kind.list).map_or(&[], Vec::as_slice)
    }
}

/// `{"format":1,"vhosts":[...],"pushes":[...],...,"journalSeq":n}`: the
/// kinds' lists are fields beside the hosts, as the file always had them.
impl Serialize for DurableState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("format", &self.format)?;
        m.serialize_entry("vhosts", &self.vhosts)?;
        for (kind, tasks) in self.tasks.iter().filter(|(_, t)| !t.is_empty()) {
            m.serialize_entry(kind, tasks)?;
        }
        m.serialize_entry("journalSeq", &self.journal_seq)?;
        m.end()
    }
}

impl<'de> Deserialize<'de> for DurableState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = DurableState;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a kiln state file (an object with format and vhosts)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DurableState, A::Error> {
                let mut state = DurableState::default();
                let mut format = None;
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "format" => format = Some(map.next_value()?),
                        "vhosts" => state.vhosts = map.next_value()?,
                        "journalSeq" => state.journal_seq = map.next_value()?,
                        _ => {
                            let tasks: Vec<TaskJson> = map.next_value()?;
                            if state.tasks.insert(key.clone(), tasks).is_some() {
                                return Err(de::Error::custom(format!("duplicate field `{key}`")));
                            }
                        }
                    }
                }
                state.format = format.ok_or_else(|| de::Error::missing_field("format"))?;
                Ok(state)
            }
        }
        d.deserialize_map(V)
    }
}

/// One change made through the API: a journal record. Each is applied to
/// the running state by its handler and, on replay, to [`DurableState`].
#[derive(Debug, Clone)]
pub enum Change {
    /// API-made hosts created in one call, in order.
    AddVhosts { vhosts: Vec<VhostSpec> },
    /// A host and its tasks removed.
    DeleteVhost { name: String },
    /// A host's applications replaced; `removed_app`'s tasks go too.
    SetApps {
        vhost: String,
        applications: Option<Vec<AppSpec>>,
        removed_app: Option<String>,
    },
    /// A task of a kind added (its JSON).
    AddTask {
        kind: &'static TaskKind,
        task: TaskJson,
    },
    DeleteTask {
        kind: &'static TaskKind,
        vhost: String,
        app: String,
        id: String,
    },
}

impl Change {
    /// A task added: `task` is what its kind's list holds.
    pub fn add_task(kind: &'static TaskKind, task: &impl Serialize) -> serde_json::Result<Self> {
        Ok(Change::AddTask {
            kind,
            task: serde_json::value::to_raw_value(task)?,
        })
    }

    pub fn delete_task(kind: &'static TaskKind, vhost: &str, app: &str, id: &str) -> Self {
        Change::DeleteTask {
            kind,
            vhost: vhost.into(),
            app: app.into(),
            id: id.into(),
        }
    }

    /// The journal line of this change as record `seq` (no newline).
    fn line(&self, seq: u64) -> serde_json::Result<Vec<u8>> {
        let model = |c: ModelChange<'_>| serde_json::to_vec(&ModelRecord { seq, change: c });
        match self {
            Change::AddVhosts { vhosts } => model(ModelChange::AddVhosts { vhosts }),
            Change::DeleteVhost { name } => model(ModelChange::DeleteVhost { name }),
            Change::SetApps {
                vhost,
                applications,
                removed_app,
            } => model(ModelChange::SetApps {
                vhost,
                applications,
                removed_app,
            }),
            Change::AddTask { kind, task } => {
                let mut m = serde_json::Map::new();
                m.insert("seq".into(), seq.into());
                m.insert("op".into(), kind.op("add").into());
                let mut line = serde_json::to_vec(&m)?;
                // `{"op":..,"seq":..}` + `,"push":<task>}`
                line.pop();
                line.extend_from_slice(b",");
                line.extend(serde_json::to_vec(kind.item)?);
                line.push(b':');
                line.extend_from_slice(task.get().as_bytes());
                line.push(b'}');
                Ok(line)
            }
            Change::DeleteTask {
                kind,
                vhost,
                app,
                id,
            } => {
                let mut m = serde_json::Map::new();
                m.insert("seq".into(), seq.into());
                m.insert("op".into(), kind.op("delete").into());
                m.insert("vhost".into(), vhost.as_str().into());
                m.insert("app".into(), app.as_str().into());
                m.insert(kind.id_field.into(), id.as_str().into());
                serde_json::to_vec(&m)
            }
        }
    }

    /// A journal line back into a change; `kinds` are the task kinds known.
    fn parse(line: &[u8], kinds: &[&'static TaskKind]) -> serde_json::Result<(u64, Change)> {
        use serde::de::Error as _;
        let mut m: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(line)?;
        let seq = m
            .get("seq")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| serde_json::Error::custom("a record without a seq"))?;
        let op = match m.get("op") {
            Some(serde_json::Value::String(op)) => op.clone(),
            _ => return Err(serde_json::Error::custom("a record without an op")),
        };
        let text = |m: &mut serde_json::Map<String, serde_json::Value>, f: &str| match m.remove(f) {
            Some(serde_json::Value::String(s)) => Ok(s),
            _ => Err(serde_json::Error::custom(format!("{op}: no {f}"))),
        };
        for &kind in kinds {
            if op == kind.op("add") {
                let task = m
                    .remove(kind.item)
                    .ok_or_else(|| serde_json::Error::custom(format!("{op}: no {}", kind.item)))?;
                let task = serde_json::value::to_raw_value(&task)?;
                return Ok((seq, Change::AddTask { kind, task }));
            }
            if op == kind.op("delete") {
                let (vhost, app) = (text(&mut m, "vhost")?, text(&mut m, "app")?);
                let id = text(&mut m, kind.id_field)?;
                return Ok((
                    seq,
                    Change::DeleteTask {
                        kind,
                        vhost,
                        app,
                        id,
                    },
                ));
            }
        }
        let model: OwnedModelChange = serde_json::from_value(serde_json::Value::Object(m))?;
        let change = match model {
            OwnedModelChange::AddVhosts { vhosts } => Change::AddVhosts { vhosts },
            OwnedModelChange::DeleteVhost { name } => Change::DeleteVhost { name },
            OwnedModelChange::SetApps {
                vhost,
                applications,
                removed_app,
            } => Change::SetApps {
                vhost,
                applications,
                removed_app,
            },
        };
        Ok((seq, change))
    }
}

/// The model's own records as the journal writes them.
#[derive(Serialize)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
enum ModelChange<'a> {
    AddVhosts {
        vhosts: &'a [VhostSpec],
    },
    DeleteVhost {
        name: &'a str,
    },
    SetApps {
        vhost: &'a str,
        applications: &'a Option<Vec<AppSpec>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        removed_app: &'a Option<String>,
    },
}

#[derive(Serialize)]
struct ModelRecord<'a> {
    seq: u64,
    #[serde(flatten)]
    change: ModelChange<'a>,
}

/// ... and as it reads them (`seq` is read before, and ignored here).
#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
enum OwnedModelChange {
    AddVhosts {
        vhosts: Vec<VhostSpec>,
    },
    DeleteVhost {
        name: String,
    },
    SetApps {
        vhost: String,
        applications: Option<Vec<AppSpec>>,
        #[serde(default)]
        removed_app: Option<String>,
    },
}

#[cfg(test)]
impl DurableState {
    /// Applies one change the plain way (the reference [`replay`] is
    /// checked against).
    pub fn apply(&mut self, change: Change) {
        let key = |k: &TaskKind, t: &RawValue| k.key_of(t).unwrap_or_default();
        match change {
            Change::AddVhosts { vhosts } => self.vhosts.extend(vhosts),
            Change::DeleteVhost { name } => {
                self.vhosts.retain(|v| v.name != name);
                for (_, tasks) in self.tasks.iter_mut() {
                    tasks.retain(|t| TEST_KIND.key_of(t).is_none_or(|(v, _, _)| v != name));
                }
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
                    for (_, tasks) in self.tasks.iter_mut() {
                        tasks.retain(|t| {
                            TEST_KIND
                                .key_of(t)
                                .is_none_or(|(v, a, _)| !(v == vhost && a == app))
                        });
                    }
                }
            }
            Change::AddTask { kind, task } => {
                self.tasks.entry(kind.list.into()).or_default().push(task)
            }
            Change::DeleteTask {
                kind,
                vhost,
                app,
                id,
            } => {
                if let Some(tasks) = self.tasks.get_mut(kind.list) {
                    tasks.retain(|t| key(kind, t) != (vhost.clone(), app.clone(), id.clone()));
                }
            }
        }
    }
}

/// The kind the store's own tests use.
#[cfg(test)]
pub(crate) static TEST_KIND: TaskKind = TaskKind {
    list: "pushes",
    item: "push",
    id_field: "id",
};

#[derive(Debug)]
pub enum StateError {
    Read(PathBuf, io::Error),
    Parse(PathBuf, serde_json::Error),
    Format(PathBuf, u32),
    /// A journal record that does not parse (not a torn last line): line.
    Journal(PathBuf, usize, serde_json::Error),
    /// A list of tasks of a kind this kiln does not know.
    Kind(PathBuf, String),
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
            StateError::Kind(p, k) => write!(
                f,
                "the state file {} holds [{}], which this kiln does not know; kiln will not start over it. It has not been changed",
                p.display(),
                k.escape_debug()
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
    /// The task kinds the features keep here.
    kinds: Vec<&'static TaskKind>,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.to_path_buf().into_os_string();
    p.push(suffix);
    PathBuf::from(p)
}

impl StateStore {
    /// A store over `path` for tasks of `kinds` (the features' own).
    pub fn new(path: PathBuf, kinds: &[&'static TaskKind]) -> Self {
        StateStore {
            tmp: with_suffix(&path, ".tmp"),
            journal_path: with_suffix(&path, ".journal"),
            path,
            journal: None,
            journal_bytes: 0,
            snapshot_bytes: 0,
            seq: 0,
            memory: false,
            kinds: kinds.to_vec(),
        }
    }

    /// A store that writes nothing (fuzzing and in-process tests).
    pub fn in_memory(kinds: &[&'static TaskKind]) -> Self {
        let mut s = StateStore::new(PathBuf::from("(memory)"), kinds);
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
            &self.kinds,
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
        let mut line = change.line(self.seq + 1).map_err(io::Error::other)?;
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
/// `state_journal` drives it), for tasks of `kinds`. `journal_seq` of the
/// result is the last record applied. The paths only name the files in
/// errors.
pub fn replay(
    snapshot: Option<&[u8]>,
    journal: &[u8],
    kinds: &[&'static TaskKind],
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
            if let Some(k) = state
                .tasks
                .keys()
                .find(|k| !kinds.iter().any(|x| x.list == *k))
            {
                return Err(StateError::Kind(snapshot_path.to_path_buf(), k.clone()));
            }
            state
        }
        None => DurableState {
            format: FORMAT,
            ..Default::default()
        },
    };
    let mut replayer = Replayer::new(state, kinds);
    let mut lines = journal.split(|b| *b == b'\n').enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        // The piece after the last newline: empty, or a torn append.
        let last = lines.peek().is_none();
        if line.is_empty() && last {
            break;
        }
        let (seq, change) = match Change::parse(line, kinds) {
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
        replayer.apply(seq, change);
    }
    Ok(replayer.finish())
}

/// Tasks of one kind being replayed: (task, sequence number it was added
/// at); `None` once deleted.
struct Replayed {
    kind: &'static TaskKind,
    tasks: Vec<Option<(TaskJson, u64)>>,
    /// Built at the first journal record that needs it: a snapshot alone
    /// needs no index (start-up with 10,000 tasks reads no key).
    index: Option<HashMap<Key, usize>>,
}

impl Replayed {
    fn new(kind: &'static TaskKind, tasks: Vec<TaskJson>) -> Self {
        Replayed {
            kind,
            tasks: tasks.into_iter().map(|t| Some((t, 0))).collect(),
            index: None,
        }
    }

    fn index(&mut self) -> &mut HashMap<Key, usize> {
        let (tasks, kind) = (&self.tasks, self.kind);
        self.index.get_or_insert_with(|| {
            let mut index = HashMap::with_capacity(tasks.len());
            for (i, t) in tasks.iter().enumerate() {
                // A snapshot written by an older kiln could name a task
                // twice: the later wins, as it always did.
                if let Some(key) = t.as_ref().and_then(|(t, _)| kind.key_of(t)) {
                    index.insert(key, i);
                }
            }
            index
        })
    }

    fn add(&mut self, task: TaskJson, seq: u64) {
        let at = self.tasks.len();
        if let Some(key) = self.kind.key_of(&task) {
            if let Some(old) = self.index().insert(key, at) {
                self.tasks[old] = None;
            }
        }
        self.tasks.push(Some((task, seq)));
    }

    fn delete(&mut self, key: Key) {
        if let Some(i) = self.index().remove(&key) {
            self.tasks[i] = None;
        }
    }

    /// The tasks still there: added after every deletion of their host
    /// or application. (A snapshot alone may name a task twice; the
    /// feature that reads the tasks keeps the later.)
    fn finish(
        self,
        vhost_deleted: &HashMap<String, u64>,
        app_deleted: &HashMap<(String, String), u64>,
    ) -> Vec<TaskJson> {
        let nothing_deleted = vhost_deleted.is_empty() && app_deleted.is_empty();
        let kind = self.kind;
        self.tasks
            .into_iter()
            .flatten()
            .filter(|(t, added)| {
                if nothing_deleted {
                    return true;
                }
                let Some((vhost, app, _)) = kind.key_of(t) else {
                    return true;
                };
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
    kinds: Vec<Replayed>,
    vhost_deleted: HashMap<String, u64>,
    app_deleted: HashMap<(String, String), u64>,
}

impl Replayer {
    fn new(mut state: DurableState, kinds: &[&'static TaskKind]) -> Self {
        let kinds = kinds
            .iter()
            .map(|k| Replayed::new(k, state.tasks.remove(k.list).unwrap_or_default()))
            .collect();
        Replayer {
            state,
            kinds,
            vhost_deleted: Default::default(),
            app_deleted: Default::default(),
        }
    }

    fn of(&mut self, kind: &TaskKind) -> Option<&mut Replayed> {
        self.kinds.iter_mut().find(|r| std::ptr::eq(r.kind, kind))
    }

    fn apply(&mut self, seq: u64, change: Change) {
        if seq <= self.state.journal_seq {
            return; // already in the snapshot
        }
        self.state.journal_seq = seq;
        match change {
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
            Change::AddTask { kind, task } => {
                if let Some(r) = self.of(kind) {
                    r.add(task, seq);
                }
            }
            Change::DeleteTask {
                kind,
                vhost,
                app,
                id,
            } => {
                if let Some(r) = self.of(kind) {
                    r.delete((vhost, app, id));
                }
            }
        }
    }

    fn finish(self) -> DurableState {
        let mut state = self.state;
        for r in self.kinds {
            let list = r.kind.list;
            let tasks = r.finish(&self.vhost_deleted, &self.app_deleted);
            if !tasks.is_empty() {
                state.tasks.insert(list.to_string(), tasks);
            }
        }
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

    fn push(id: &str) -> serde_json::Value {
        serde_json::json!({"id": id, "vhost": "a", "app": "app",
            "streamName": "s", "protocol": "mpegts", "url": "udp://127.0.0.1:9", "createdMs": 1})
    }

    fn add(p: serde_json::Value) -> Change {
        Change::add_task(&TEST_KIND, &p).unwrap()
    }

    /// The tasks of a state, as JSON values.
    fn pushes(s: &DurableState) -> Vec<serde_json::Value> {
        (s.tasks_of(&TEST_KIND).iter())
            .map(|t| serde_json::from_str(t.get()).unwrap())
            .collect()
    }

    /// Opens a store over `path` as start-up does; returns it and the state.
    fn start(path: &Path) -> (StateStore, DurableState) {
        let mut store = StateStore::new(path.to_path_buf(), &[&TEST_KIND]);
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
            add(push("p1")),
            add(push("p2")),
            Change::delete_task(&TEST_KIND, "a", "app", "p1"),
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
        assert_eq!(pushes(&loaded), vec![push("p2")]);
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
            let c = add(push(&format!("p{i}")));
            let snapshot = state.clone();
            store.record(&c, || snapshot).unwrap();
            state.apply(c);
            assert!(store.journal_bytes <= store.snapshot_bytes.max(COMPACT_MIN) + 1024);
        }
        assert!(store.snapshot_bytes > 0, "compaction ran");
        let (_, loaded) = start(&p);
        assert_eq!(pushes(&loaded).len(), 3000);
        assert_eq!(pushes(&loaded), pushes(&state));
    }

    /// A snapshot of today's shape (OME users' files: written by kiln
    /// before the store knew no feature) reads back field for field, and
    /// a list of a kind no feature declares stops start-up.
    #[test]
    fn a_snapshot_keeps_its_lists_by_kind_and_refuses_an_unknown_one() {
        let text = br#"{"format":1,"vhosts":[],"pushes":[{"id":"x","vhost":"a","app":"app"}],"journalSeq":4}"#;
        let d = temp_dir("kinds");
        let got = replay(Some(text), b"", &[&TEST_KIND], &d.join("s"), &d.join("j")).unwrap();
        assert_eq!(got.journal_seq, 4);
        assert_eq!(
            pushes(&got),
            vec![serde_json::json!({"id":"x","vhost":"a","app":"app"})]
        );
        let again = serde_json::to_string(&got).unwrap();
        assert_eq!(
            again,
            r#"{"format":1,"vhosts":[],"pushes":[{"id":"x","vhost":"a","app":"app"}],"journalSeq":4}"#
        );
        let err = replay(
            Some(br#"{"format":1,"widgets":[]}"#),
            b"",
            &[&TEST_KIND],
            &d.join("s"),
            &d.join("j"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("[widgets]"), "{err}");
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
        store.record(&add(push("x")), || loaded.clone()).unwrap();
        drop(store);
        let (_, again) = start(&p);
        assert_eq!(pushes(&again), vec![push("x")]);
        // a bad line that is not the last one is corruption
        fs::write(d.join("state.json.journal"), b"{bad}\n{\"seq\":9}\n").unwrap();
        let err = StateStore::new(p.clone(), &[&TEST_KIND])
            .load()
            .unwrap_err()
            .to_string();
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
                        && !pushes(&plain).iter().any(|p| p["vhost"] == h.as_str() && p["app"] == a.as_str() && p["id"] == id.as_str()) =>
                    {
                        let mut p = push(&id);
                        p["vhost"] = h.clone().into();
                        p["app"] = a.clone().into();
                        add(p)
                    }
                    5 => Change::delete_task(&TEST_KIND, &h, &a, &id),
                    _ => continue,
                };
                journal.extend(change.line(seq as u64 + 1).unwrap());
                journal.push(b'\n');
                plain.apply(change);
            }
            let got = replay(None, &journal, &[&TEST_KIND], Path::new("s"), Path::new("j")).unwrap();
            proptest::prop_assert_eq!(pushes(&got), pushes(&plain));
            proptest::prop_assert_eq!(got.vhosts, plain.vhosts);
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
        let err = StateStore::new(p.clone(), &[&TEST_KIND])
            .load()
            .unwrap_err()
            .to_string();
        assert!(err.contains("corrupt"), "{err}");
        assert_eq!(fs::read(&p).unwrap(), b"{not json");
    }
}
