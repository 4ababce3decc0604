//! Recorded files are written off the loop: one worker thread creates,
//! writes and closes them (and replaces info files whole: temporary file,
//! rename) in the order the loop asks, and wakes the poll with what failed
//! or closed. The loop never waits on the disk: what is queued and not yet
//! written is bounded ([`MAX_QUEUED`]); a record whose writes would pass it
//! fails with the reason, and the others go on.

use crate::files::{FileEvent, FileId, FileOp, SPACE_EVERY};
use mio::Waker;
use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;

/// Bytes handed to the writer and not yet written, all files together.
pub(crate) const MAX_QUEUED: usize = 64 << 20;

pub(crate) struct FileWriter {
    /// `None` once [`finish`](FileWriter::finish) closed it.
    ops: Option<Sender<FileOp>>,
    worker: Option<std::thread::JoinHandle<()>>,
    events: Receiver<FileEvent>,
    queued: Arc<AtomicUsize>,
    /// Files whose writes were refused: their later writes are dropped.
    refused: HashSet<FileId>,
}

impl FileWriter {
    pub(crate) fn start(waker: Arc<Waker>) -> std::io::Result<FileWriter> {
        let _ = STARTED.set(std::time::SystemTime::now());
        let (otx, orx) = mpsc::channel::<FileOp>();
        let (etx, erx) = mpsc::channel::<FileEvent>();
        let queued = Arc::new(AtomicUsize::new(0));
        let q = queued.clone();
        let worker = std::thread::Builder::new()
            .name("kiln-files".into())
            .spawn(move || {
                let mut w = Worker {
                    files: HashMap::new(),
                    since_space: HashMap::new(),
                    failed: HashSet::new(),
                };
                for op in orx {
                    if let Some(n) = queued_bytes(&op) {
                        q.fetch_sub(n, Ordering::Relaxed);
                    }
                    if !deliver(w.run(op), &etx, &waker) {
                        return;
                    }
                }
            })?;
        Ok(FileWriter {
            ops: Some(otx),
            worker: Some(worker),
            events: erx,
            queued,
            refused: HashSet::new(),
        })
    }

    /// Queues an operation. A write that would pass [`MAX_QUEUED`] is
    /// refused: the event returned fails its record.
    pub(crate) fn submit(&mut self, op: FileOp) -> Option<FileEvent> {
        let file = op_file(&op);
        match &op {
            FileOp::Close { .. } => {
                self.refused.remove(&file);
            }
            FileOp::Create { .. } => {}
            _ => {
                if self.refused.contains(&file) {
                    return None;
                }
                let n = queued_bytes(&op).unwrap_or(0);
                let queued = self.queued.load(Ordering::Relaxed);
                if queued + n > MAX_QUEUED {
                    if matches!(op, FileOp::Write { .. }) {
                        self.refused.insert(file);
                    }
                    return Some(FileEvent::Failed {
                        file,
                        reason: format!(
                            "the disk is not keeping up: {} MiB waiting to be written",
                            queued >> 20
                        ),
                        written: None,
                    });
                }
                self.queued.fetch_add(n, Ordering::Relaxed);
            }
        }
        // The worker lives as long as the server; a send error means it
        // panicked (or the server is stopping), and nothing can be written.
        let sent = self.ops.as_ref().map(|o| o.send(op).is_ok());
        (sent != Some(true)).then_some(FileEvent::Failed {
            file,
            reason: "the file writer has stopped".into(),
            written: None,
        })
    }

    /// Bytes handed over and not yet written.
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    pub(crate) fn events(&self) -> impl Iterator<Item = FileEvent> + '_ {
        self.events.try_iter()
    }

    /// The server stops: what was handed over is written (the worker
    /// ends when it has done every operation), waiting `within` at most
    /// (a disk that hangs must not keep the process); true when all was.
    pub(crate) fn finish(&mut self, within: std::time::Duration) -> bool {
        self.ops = None;
        let Some(worker) = self.worker.take() else {
            return true;
        };
        let until = std::time::Instant::now() + within;
        while !worker.is_finished() {
            if std::time::Instant::now() >= until {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        worker.join().is_ok()
    }
}

/// The bytes an operation holds while it waits.
fn queued_bytes(op: &FileOp) -> Option<usize> {
    match op {
        FileOp::Write { data, .. } | FileOp::Put { data, .. } | FileOp::Replace { data, .. } => {
            Some(data.len())
        }
        FileOp::PutShared { parts, .. } => Some(parts.iter().map(|p| p.bytes.len()).sum()),
        _ => None,
    }
}

fn op_file(op: &FileOp) -> FileId {
    match op {
        FileOp::Create { file, .. }
        | FileOp::Write { file, .. }
        | FileOp::Close { file, .. }
        | FileOp::Put { file, .. }
        | FileOp::Replace { file, .. }
        | FileOp::Delete { file, .. }
        | FileOp::PutShared { file, .. }
        | FileOp::Read { file, .. }
        | FileOp::Space { file, .. }
        | FileOp::RemoveDvr { file, .. }
        | FileOp::SweepDvr { file, .. } => *file,
    }
}

struct Worker {
    /// Open files, their paths and the bytes written to each.
    files: HashMap<FileId, (File, PathBuf, u64)>,
    /// Bytes written to each file since its free space was last reported.
    since_space: HashMap<FileId, u64>,
    failed: HashSet<FileId>,
}

impl Worker {
    fn run(&mut self, op: FileOp) -> Vec<FileEvent> {
        match op {
            FileOp::Create { file, path } => match create(&path) {
                Ok(f) => {
                    let space = space(file, &path);
                    self.files.insert(file, (f, path, 0));
                    self.since_space.insert(file, 0);
                    space.into_iter().collect()
                }
                Err(e) => {
                    self.failed.insert(file);
                    vec![FileEvent::Failed {
                        file,
                        reason: format!("cannot create [{}]: {e}", path.display()),
                        written: Some(0),
                    }]
                }
            },
            FileOp::Write { file, data } => {
                let Some((f, path, written)) = self.files.get_mut(&file) else {
                    return vec![];
                };
                match f.write_all(&data) {
                    Ok(()) => {
                        *written += data.len() as u64;
                        let since = self.since_space.entry(file).or_default();
                        *since += data.len() as u64;
                        if *since < SPACE_EVERY {
                            return vec![];
                        }
                        *since = 0;
                        space(file, path).into_iter().collect()
                    }
                    Err(e) => {
                        let reason = format!("cannot write [{}]: {e}", path.display());
                        let written = *written;
                        self.files.remove(&file);
                        self.failed.insert(file);
                        vec![FileEvent::Failed {
                            file,
                            reason,
                            written: Some(written),
                        }]
                    }
                }
            }
            FileOp::Close { file, rename, info } => {
                self.since_space.remove(&file);
                let mut events = Vec::new();
                if let Some((f, path, _)) = self.files.remove(&file) {
                    if let Err(e) = f.sync_data() {
                        events.push(FileEvent::Failed {
                            file,
                            reason: format!("cannot write [{}]: {e}", path.display()),
                            written: None,
                        });
                    }
                    drop(f);
                    if let Some(to) = rename.filter(|to| *to != path) {
                        // Linked, then the old name removed: an existing
                        // file at `to` is refused, never replaced.
                        let moved = to
                            .parent()
                            .map_or(Ok(()), fs::create_dir_all)
                            .and_then(|()| fs::hard_link(&path, &to))
                            .and_then(|()| fs::remove_file(&path));
                        if let Err(e) = moved {
                            events.push(FileEvent::Failed {
                                file,
                                reason: format!(
                                    "cannot rename [{}] to [{}]: {e}",
                                    path.display(),
                                    to.display()
                                ),
                                written: None,
                            });
                        }
                    }
                }
                let failed = self.failed.remove(&file);
                if let (Some((path, xml)), false) = (info, failed) {
                    if let Err(e) = replace(&path, xml.as_bytes()) {
                        events.push(FileEvent::Failed {
                            file,
                            reason: format!("cannot write [{}]: {e}", path.display()),
                            written: None,
                        });
                    }
                }
                events.push(FileEvent::Closed { file });
                events
            }
            FileOp::Put { file, path, data } => {
                let result = create(&path).and_then(|mut f| {
                    f.write_all(&data)?;
                    f.sync_data()
                });
                match result {
                    Ok(()) => vec![FileEvent::Closed { file }],
                    Err(e) => vec![FileEvent::Failed {
                        file,
                        reason: format!("cannot write [{}]: {e}", path.display()),
                        written: None,
                    }],
                }
            }
            FileOp::Replace {
                file,
                path,
                data,
                fresh,
            } => match replace_file(&path, &data, fresh) {
                Ok(()) => vec![FileEvent::Closed { file }],
                Err(e) => vec![FileEvent::Failed {
                    file,
                    reason: format!("cannot write [{}]: {e}", path.display()),
                    written: None,
                }],
            },
            FileOp::Delete { file, path } => vec![FileEvent::Deleted {
                file,
                error: fs::remove_file(&path)
                    .err()
                    .map(|e| format!("cannot delete [{}]: {e}", path.display())),
            }],
            FileOp::PutShared { file, path, parts } => {
                let result = create(&path).and_then(|mut f| {
                    parts.iter().try_for_each(|p| match &p.from {
                        Some((mem, offset)) => copy_range(mem, *offset, p.bytes.len(), &f),
                        None => f.write_all(&p.bytes),
                    })
                });
                match result {
                    Ok(()) => vec![FileEvent::Closed { file }],
                    Err(e) => vec![FileEvent::Failed {
                        file,
                        reason: format!("cannot write [{}]: {e}", path.display()),
                        written: None,
                    }],
                }
            }
            FileOp::Read { file, path, max } => vec![FileEvent::Read {
                file,
                data: read_bounded(&path, max)
                    .map_err(|e| format!("cannot read [{}]: {e}", path.display())),
            }],
            FileOp::Space { file, path } => space(file, &path).into_iter().collect(),
            // A folder that was never made (a stream whose tracks changed
            // before its first segment) is nothing to report.
            FileOp::RemoveDvr { file, dir } => vec![FileEvent::Deleted {
                file,
                error: remove_dvr(&dir)
                    .err()
                    .filter(|e| e.kind() != std::io::ErrorKind::NotFound)
                    .map(|e| format!("cannot delete [{}]: {e}", dir.display())),
            }],
            FileOp::SweepDvr { file, root } => {
                let error = sweep_dvr(&root).err().and_then(|e| {
                    (e.kind() != std::io::ErrorKind::NotFound)
                        .then(|| format!("cannot clear [{}]: {e}", root.display()))
                });
                vec![FileEvent::Deleted { file, error }]
            }
        }
    }
}

/// `len` bytes of `from` at `offset` appended to `to`, copied in the
/// kernel (`sendfile(2)` between files).
fn copy_range(from: &File, offset: u64, len: usize, to: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (mut offset, mut left) = (offset, len);
    while left > 0 {
        match crate::sys::send_file(to.as_raw_fd(), from.as_raw_fd(), offset, left) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                offset += n as u64;
                left -= n;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A whole file, `max` bytes at most (a longer one is an error).
/// A whole file of at most `max` bytes, mapped read-only: read through
/// once here (off the loop) so its pages are in the page cache when the
/// loop sends them with `sendfile` from the file. Only a file that cannot
/// be mapped (an empty one) is read onto the heap.
fn read_bounded(path: &Path, max: u64) -> std::io::Result<crate::files::Piece> {
    use std::io::Read;
    let f = File::open(path)?;
    let len = f.metadata()?.len();
    if len > max {
        return Err(std::io::Error::other(format!(
            "{len} bytes, more than {max}"
        )));
    }
    let mut warm = [0u8; 64 * 1024];
    let mut seen = 0u64;
    let mut r = (&f).take(len);
    loop {
        match r.read(&mut warm) {
            Ok(0) => break,
            Ok(n) => seen += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if seen != len {
        return Err(std::io::Error::other(format!(
            "{seen} bytes where {len} were"
        )));
    }
    let f = Arc::new(f);
    match usize::try_from(len)
        .ok()
        .and_then(|n| crate::sys::FileRegion::map(f.clone(), 0, n).ok())
    {
        Some(region) => Ok(crate::files::Piece {
            bytes: bytes::Bytes::from_owner(region),
            from: Some((f, 0)),
        }),
        None => {
            use std::os::unix::fs::FileExt;
            let mut data = vec![0u8; len as usize];
            f.read_exact_at(&mut data, 0)?;
            Ok(bytes::Bytes::from(data).into())
        }
    }
}

/// Is `name` a DVR folder's (`kiln_{pid}_{key}`)? Its pid.
fn dvr_folder_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("kiln_")?;
    let (pid, key) = rest.split_once('_')?;
    (!key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then(|| pid.parse().ok())
        .flatten()
}

/// Deletes a DVR folder: `{track}/{msn}.m4s` files and their folders,
/// then the folder. Anything else in it stays (and so does the folder).
fn remove_dvr(dir: &Path) -> std::io::Result<()> {
    let is_number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    for track in fs::read_dir(dir)? {
        let track = track?;
        let name = track.file_name();
        if !track.file_type()?.is_dir() || !name.to_str().is_some_and(is_number) {
            continue;
        }
        for f in fs::read_dir(track.path())? {
            let f = f?;
            let segment = f
                .file_name()
                .to_str()
                .is_some_and(|n| n.strip_suffix(".m4s").is_some_and(is_number));
            if segment && f.file_type()?.is_file() {
                fs::remove_file(f.path())?;
            }
        }
        fs::remove_dir(track.path())?;
    }
    fs::remove_dir(dir)
}

/// When the worker started (about when kiln did).
static STARTED: std::sync::OnceLock<std::time::SystemTime> = std::sync::OnceLock::new();

/// Deletes the DVR folders under `root` whose kiln is gone: its pid is
/// not running a program of this one's name. A folder named with this
/// process's own pid is a previous kiln's (a container's kiln is pid 1
/// every time) when it was last changed before this one started.
fn sweep_dvr(root: &Path) -> std::io::Result<()> {
    let comm = |pid: &str| fs::read_to_string(format!("/proc/{pid}/comm")).ok();
    let me = comm("self");
    let my_pid = std::process::id();
    let before_me = |p: &Path| {
        let changed = fs::metadata(p).and_then(|m| m.modified()).ok();
        match (STARTED.get(), changed) {
            (Some(start), Some(changed)) => changed < *start,
            (None, _) => true,
            (Some(_), None) => false,
        }
    };
    // One folder that cannot go does not keep the others.
    let mut first_error = None;
    for entry in fs::read_dir(root)? {
        let entry = entry?;
        let Some(pid) = entry.file_name().to_str().and_then(dvr_folder_pid) else {
            continue;
        };
        let alive = if pid == my_pid {
            !before_me(&entry.path())
        } else {
            comm(&pid.to_string()).is_some_and(|c| Some(&c) == me.as_ref())
        };
        if !alive && entry.file_type()?.is_dir() {
            if let Err(e) = remove_dvr(&entry.path()) {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// The free space of `path`'s file system, as an event (none when it
/// cannot be read: the budget then goes by the totals alone).
fn space(file: FileId, path: &Path) -> Option<FileEvent> {
    crate::sys::free_bytes(path)
        .ok()
        .map(|free| FileEvent::Space { file, free })
}

fn create(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)
}

/// Replaces `path` whole: a temporary file beside it, then a rename.
fn replace(path: &Path, data: &[u8]) -> std::io::Result<()> {
    replace_file(path, data, false)
}

/// As [`replace`]; `fresh`: fails when `path` exists (linked into place,
/// which refuses an existing name, instead of renamed).
fn replace_file(path: &Path, data: &[u8], fresh: bool) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    if !fresh && !replaceable(path)? {
        return Err(std::io::Error::other(
            "a file kiln did not write is there; it is left as it is",
        ));
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(&tmp)?;
    f.write_all(data)?;
    f.sync_data()?;
    if fresh {
        let linked = fs::hard_link(&tmp, path);
        let _ = fs::remove_file(&tmp);
        linked
    } else {
        fs::rename(&tmp, path)
    }
}

/// May `path` be replaced? When nothing is there, or what is there is a
/// file of the kinds kiln replaces (an info XML of its records or dumps,
/// a playlist): never a file kiln did not write.
fn replaceable(path: &Path) -> std::io::Result<bool> {
    use std::io::Read;
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(e),
    };
    if !f.metadata()?.is_file() {
        return Ok(false);
    }
    let mut head = Vec::with_capacity(128);
    f.take(128).read_to_end(&mut head)?;
    let xml = b"<?xml version=\"1.0\" encoding=\"utf-8\"?>\n";
    Ok(head.starts_with(b"#EXTM3U")
        || head
            .strip_prefix(&xml[..])
            .is_some_and(|rest| rest.starts_with(b"<files>") || rest.starts_with(b"<HLSDumpInfo>")))
}

/// A worker thread's events to the loop, which is woken once for them;
/// `false` when the loop is gone (the thread ends).
pub(super) fn deliver<T>(events: Vec<T>, tx: &Sender<T>, waker: &Waker) -> bool {
    if events.is_empty() {
        return true;
    }
    for e in events {
        if tx.send(e).is_err() {
            return false;
        }
    }
    let _ = waker.wake();
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dvr_folders_are_read_back_and_deleted_and_nothing_else_is() {
        let root = std::env::temp_dir().join(format!("kiln-dvr-fw-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let mut w = Worker {
            files: HashMap::new(),
            since_space: HashMap::new(),
            failed: HashSet::new(),
        };
        let mine = root.join(format!("kiln_{}_ab12", std::process::id()));
        // pid 1 runs something else (init): its folder is a dead kiln's.
        let dead = root.join("kiln_1_cd34");
        for d in [&mine, &dead] {
            w.run(FileOp::PutShared {
                file: 1,
                path: d.join("1/7.m4s"),
                parts: vec![
                    bytes::Bytes::from(vec![7; 4]).into(),
                    bytes::Bytes::from(vec![7; 6]).into(),
                ],
            });
        }
        let foreign = root.join("kiln_1_ef56");
        fs::create_dir_all(foreign.join("1")).unwrap();
        fs::write(foreign.join("1/notes.txt"), b"mine").unwrap();
        fs::write(root.join("other.txt"), b"x").unwrap();
        // Read back, within the bound.
        let ev = w.run(FileOp::Read {
            file: 2,
            path: mine.join("1/7.m4s"),
            max: 10,
        });
        // Mapped from the file (to be sent from it), not copied.
        match &ev[..] {
            [FileEvent::Read {
                file: 2,
                data: Ok(piece),
            }] => {
                assert_eq!(piece.bytes, bytes::Bytes::from(vec![7; 10]));
                assert!(piece.from.as_ref().is_some_and(|(_, at)| *at == 0));
            }
            other => panic!("{other:?}"),
        }
        let ev = w.run(FileOp::Read {
            file: 3,
            path: mine.join("1/7.m4s"),
            max: 9,
        });
        assert!(
            matches!(&ev[0], FileEvent::Read { data: Err(e), .. } if e.contains("more than 9"))
        );
        // The sweep: the dead kiln's folder goes; a folder holding what
        // kiln did not write stays, with it; the rest of the root stays.
        // (This process's own is swept too: a sweep comes before any.)
        let ev = w.run(FileOp::SweepDvr {
            file: 4,
            root: root.clone(),
        });
        assert!(
            matches!(&ev[0], FileEvent::Deleted { error: Some(e), .. } if e.contains("cannot clear")),
            "{ev:?}"
        );
        assert!(foreign.join("1/notes.txt").exists());
        assert!(root.join("other.txt").exists());
        fs::remove_file(foreign.join("1/notes.txt")).unwrap();
        let ev = w.run(FileOp::SweepDvr {
            file: 4,
            root: root.clone(),
        });
        assert_eq!(
            ev,
            vec![FileEvent::Deleted {
                file: 4,
                error: None
            }]
        );
        assert!(!dead.exists() && !mine.exists() && !foreign.exists());
        // A stream's own folder at its end.
        w.run(FileOp::Put {
            file: 5,
            path: mine.join("2/0.m4s"),
            data: vec![0],
        });
        let ev = w.run(FileOp::RemoveDvr {
            file: 6,
            dir: mine.clone(),
        });
        assert_eq!(
            ev,
            vec![FileEvent::Deleted {
                file: 6,
                error: None
            }]
        );
        assert!(!mine.exists());
        assert!(root.join("other.txt").exists());
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn an_info_file_never_replaces_a_file_kiln_did_not_write() {
        let root = std::env::temp_dir().join(format!("kiln-replace-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        let victim = root.join("victim.conf");
        fs::write(&victim, b"key = value\n").unwrap();
        let info = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<files>\n</files>\n";
        let e = replace_file(&victim, info.as_bytes(), false).unwrap_err();
        assert!(e.to_string().contains("did not write"), "{e}");
        assert_eq!(fs::read(&victim).unwrap(), b"key = value\n");
        // Its own files it replaces: an info XML, a playlist.
        let mine = root.join("r.xml");
        replace_file(&mine, info.as_bytes(), false).unwrap();
        replace_file(&mine, info.as_bytes(), false).unwrap();
        let list = root.join("a.m3u8");
        replace_file(&list, b"#EXTM3U\n#EXT-X-VERSION:6\n", false).unwrap();
        replace_file(&list, b"#EXTM3U\n", false).unwrap();
        // A folder by that name is not a file to replace.
        fs::create_dir_all(root.join("d.xml")).unwrap();
        assert!(replace_file(&root.join("d.xml"), info.as_bytes(), false).is_err());
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn the_worker_never_overwrites_and_reports_a_full_disk() {
        let dir = std::env::temp_dir().join(format!("kiln-fw-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut w = Worker {
            files: HashMap::new(),
            since_space: HashMap::new(),
            failed: HashSet::new(),
        };
        let path = dir.join("a/b/x.ts");
        // A file made says how much its file system has free.
        let made = w.run(FileOp::Create {
            file: 1,
            path: path.clone(),
        });
        assert!(
            matches!(made[..], [FileEvent::Space { file: 1, free }] if free > 0),
            "{made:?}"
        );
        assert!(w
            .run(FileOp::Write {
                file: 1,
                data: vec![1, 2, 3]
            })
            .is_empty());
        let info = dir.join("info.xml");
        assert_eq!(
            w.run(FileOp::Close {
                file: 1,
                rename: None,
                info: Some((info.clone(), "<files/>".into()))
            }),
            vec![FileEvent::Closed { file: 1 }]
        );
        assert_eq!(fs::read(&path).unwrap(), [1, 2, 3]);
        assert_eq!(fs::read_to_string(&info).unwrap(), "<files/>");
        // The same path again: refused, the file kept.
        let ev = w.run(FileOp::Create {
            file: 2,
            path: path.clone(),
        });
        assert!(
            matches!(&ev[0], FileEvent::Failed { file: 2, reason, written: Some(0) } if reason.contains("exists"))
        );
        assert_eq!(fs::read(&path).unwrap(), [1, 2, 3]);
        // Closed and moved to its final name; never over an existing file.
        let start = dir.join("r_start.ts");
        let end = dir.join("r_end.ts");
        w.run(FileOp::Create {
            file: 4,
            path: start.clone(),
        });
        let ev = w.run(FileOp::Close {
            file: 4,
            rename: Some(end.clone()),
            info: None,
        });
        assert_eq!(ev, vec![FileEvent::Closed { file: 4 }]);
        assert!(end.exists() && !start.exists());
        w.run(FileOp::Create {
            file: 5,
            path: start.clone(),
        });
        let ev = w.run(FileOp::Close {
            file: 5,
            rename: Some(end.clone()),
            info: None,
        });
        assert!(
            matches!(&ev[0], FileEvent::Failed { reason, .. } if reason.contains("cannot rename"))
        );
        assert!(start.exists(), "kept under its first name");
        // A budget's deletion; a second one says why it failed.
        let ev = w.run(FileOp::Delete {
            file: 6,
            path: end.clone(),
        });
        assert_eq!(
            ev,
            vec![FileEvent::Deleted {
                file: 6,
                error: None
            }]
        );
        assert!(!end.exists());
        let ev = w.run(FileOp::Delete {
            file: 7,
            path: end.clone(),
        });
        assert!(
            matches!(&ev[..], [FileEvent::Deleted { file: 7, error: Some(e) }] if e.contains("cannot delete")),
            "{ev:?}"
        );
        // A full disk: /dev/full answers every write with ENOSPC.
        if let Ok(f) = OpenOptions::new().write(true).open("/dev/full") {
            w.files.insert(3, (f, PathBuf::from("/dev/full"), 0));
            let ev = w.run(FileOp::Write {
                file: 3,
                data: vec![0; 4096],
            });
            assert!(
                matches!(&ev[0], FileEvent::Failed { file: 3, reason, .. } if reason.contains("No space left")),
                "{ev:?}"
            );
            // Its close writes no info.
            let ev = w.run(FileOp::Close {
                file: 3,
                rename: None,
                info: Some((dir.join("no.xml"), "x".into())),
            });
            assert_eq!(ev, vec![FileEvent::Closed { file: 3 }]);
            assert!(!dir.join("no.xml").exists());
        }
        let _ = fs::remove_dir_all(&dir);
    }
}
