//! What the loop asks of the file writer thread (`server/file_writer.rs`)
//! and what it answers: recordings and HLS dumps describe their files as
//! these operations, and never touch the disk themselves. And the rules of
//! the paths they may write ([`resolve`]), shared by both.

use std::path::{Component, Path, PathBuf};

/// A file of the writer thread.
pub type FileId = u64;

/// What the writer thread is asked to do, in order.
#[derive(Debug, PartialEq, Eq)]
pub enum FileOp {
    /// Make the parent directories and create the file; an existing file
    /// is never overwritten (the record goes to `error`).
    Create {
        file: FileId,
        path: PathBuf,
    },
    Write {
        file: FileId,
        data: Vec<u8>,
    },
    /// Close the file, move it to `rename` (never over an existing
    /// file), then replace `info` (path, XML) whole.
    Close {
        file: FileId,
        rename: Option<PathBuf>,
        info: Option<(PathBuf, String)>,
    },
    /// A whole file at once: created (never over an existing one),
    /// written, closed. `file` names it in the answer.
    Put {
        file: FileId,
        path: PathBuf,
        data: Vec<u8>,
    },
    /// Replace `path` whole (temporary file, rename); `fresh`: refuse
    /// when it exists (the first write of a file that is then updated).
    Replace {
        file: FileId,
        path: PathBuf,
        data: Vec<u8>,
        fresh: bool,
    },
    /// Delete a closed file (a disk budget makes room); `file` names it
    /// in the answer.
    Delete {
        file: FileId,
        path: PathBuf,
    },
    /// A whole file made of shared buffers (a DVR segment: its parts as
    /// the live window holds them, not copied), created (never over an
    /// existing one), written, closed; not synced (DVR files are
    /// temporary).
    PutShared {
        file: FileId,
        path: PathBuf,
        parts: Vec<Piece>,
    },
    /// Read a whole file back (a DVR segment), `max` bytes at most: the
    /// answer maps the file (its pages, in the page cache, are shared by
    /// every viewer and sent with `sendfile` from it), so no viewer holds
    /// a copy of its own.
    Read {
        file: FileId,
        path: PathBuf,
        max: u64,
    },
    /// Delete a DVR folder (`kiln_{pid}_{key}`): its track folders of
    /// `{msn}.m4s` files, then itself; nothing else is touched (a file
    /// kiln did not name stays, and so does the folder).
    RemoveDvr {
        file: FileId,
        dir: PathBuf,
    },
    /// Report the free space of `path`'s file system (a DVR's folder:
    /// its files are whole at once, with no `Create` to report it).
    Space {
        file: FileId,
        path: PathBuf,
    },
    /// Delete the DVR folders under `root` of kilns that no longer run
    /// (as [`FileOp::RemoveDvr`] does; a live kiln's stay).
    SweepDvr {
        file: FileId,
        root: PathBuf,
    },
}

/// A piece of a [`FileOp::PutShared`]: shared bytes, and where they are
/// in a memory file when they are there (then the worker copies them
/// file to file in the kernel, without reading the mapping: its pages are
/// not brought into the process).
#[derive(Debug, Clone)]
pub struct Piece {
    pub bytes: bytes::Bytes,
    pub from: Option<(std::sync::Arc<std::fs::File>, u64)>,
}

impl PartialEq for Piece {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for Piece {}

impl From<bytes::Bytes> for Piece {
    fn from(bytes: bytes::Bytes) -> Self {
        Piece { bytes, from: None }
    }
}

/// A file made with [`FileOp::Create`] has the free space of its file
/// system reported when it is made and every this many bytes written.
pub const SPACE_EVERY: u64 = 4 << 20;

/// File ids of HLS dumps have this bit set (those of records do not): the
/// loop hands each answer to its owner.
pub const DUMP_FILE: FileId = 1 << 63;

/// File ids of DVR segments (and their reads) have this bit set.
pub const DVR_FILE: FileId = 1 << 62;

/// What the writer thread reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileEvent {
    /// Creating or writing failed (a full disk, a file that exists): the
    /// reason names the path.
    Failed {
        file: FileId,
        reason: String,
        /// How many bytes reached the file before it failed, when known
        /// (0 when it could not be created).
        written: Option<u64>,
    },
    Closed {
        file: FileId,
    },
    /// Bytes free (to an unprivileged writer) on the file system of a
    /// file made with [`FileOp::Create`] (`statvfs`, on the writer).
    Space {
        file: FileId,
        free: u64,
    },
    /// A [`FileOp::Delete`] (or a DVR folder's removal) was done;
    /// `error` says why not.
    Deleted {
        file: FileId,
        error: Option<String>,
    },
    /// What a [`FileOp::Read`] read, or why it could not.
    Read {
        file: FileId,
        data: Result<Piece, String>,
    },
}

impl FileEvent {
    /// The file it is about.
    pub fn file(&self) -> FileId {
        match self {
            FileEvent::Failed { file, .. }
            | FileEvent::Closed { file }
            | FileEvent::Space { file, .. }
            | FileEvent::Deleted { file, .. }
            | FileEvent::Read { file, .. } => *file,
        }
    }
}

/// Why a path may not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    /// Relative, with no root to put it under.
    Relative(String),
    /// Outside the root (absolute elsewhere, or `..` leaving it).
    OutsideRoot(String, String),
    /// Empty, too long, or with control characters: the path and why.
    Invalid(String, &'static str),
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathError::Relative(p) => write!(
                f,
                "path [{}] is relative and the application has no <Publishers><FILE><RootPath>",
                p.escape_debug()
            ),
            PathError::OutsideRoot(p, root) => write!(
                f,
                "path [{}] is outside the root [{}]",
                p.escape_debug(),
                root.escape_debug()
            ),
            PathError::Invalid(p, why) => {
                write!(f, "path [{}] is not valid: {why}", p.escape_debug())
            }
        }
    }
}

/// The longest path kiln writes (Linux PATH_MAX).
const MAX_PATH: usize = 4096;

/// `path` made absolute under `root` and normalised (`.` and `..` folded
/// lexically). With a root, every path is under it, as OME resolves
/// them: a relative path and an absolute one alike (`/${VirtualHost}/x.ts`
/// is `<RootPath>/default/x.ts`), except an absolute path already inside
/// the root, which is kept; the result must stay inside the root (`..`
/// may not leave it). Without a root, the path must be absolute. Nothing
/// on disk is read.
pub fn resolve(root: Option<&str>, path: &str) -> Result<PathBuf, PathError> {
    let invalid = |why| Err(PathError::Invalid(path.to_string(), why));
    if path.is_empty() {
        return invalid("it is empty");
    }
    if path.len() > MAX_PATH {
        return invalid("it is longer than 4096 bytes");
    }
    if path.chars().any(char::is_control) {
        return invalid("it holds control characters");
    }
    let joined = match root {
        Some(r) if Path::new(path).is_absolute() && !inside(r, path) => {
            Path::new(r).join(path.trim_start_matches('/'))
        }
        Some(r) => Path::new(r).join(path),
        None if Path::new(path).is_absolute() => PathBuf::from(path),
        None => return Err(PathError::Relative(path.to_string())),
    };
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                if !out.pop() {
                    // `..` above `/`: with a root, that is leaving it (the
                    // same answer as any other way out).
                    return match root {
                        Some(r) => Err(PathError::OutsideRoot(path.to_string(), r.to_string())),
                        None => invalid("its `..` go above /"),
                    };
                }
            }
            Component::Normal(n) => out.push(n),
        }
    }
    if let Some(r) = root {
        let r = resolve(None, r)?;
        if !out.starts_with(&r) || out == r {
            return Err(PathError::OutsideRoot(
                path.to_string(),
                r.display().to_string(),
            ));
        }
    }
    Ok(out)
}

/// As [`resolve`], except that an absolute path is never re-rooted: it must
/// be inside `root` already, and is then kept as written (OME writes a
/// dump's `outputPath` as given; kiln keeps it within the root).
pub fn resolve_exact(root: Option<&str>, path: &str) -> Result<PathBuf, PathError> {
    match root {
        Some(r) if Path::new(path).is_absolute() && !inside(r, path) => {
            Err(PathError::OutsideRoot(path.to_string(), r.to_string()))
        }
        _ => resolve(root, path),
    }
}

/// Is the absolute `path` (lexically, before `..` are folded) inside the
/// root `root`?
fn inside(root: &str, path: &str) -> bool {
    let root = root.trim_end_matches('/');
    !root.is_empty()
        && path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The container, chosen by the file path's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// Fragmented MP4, written as it goes (playable after a crash).
    Mp4,
    Ts,
}

impl Container {
    pub fn of(path: &str) -> Option<Container> {
        let ext = path.rsplit_once('.')?.1;
        if ext.eq_ignore_ascii_case("mp4") {
            Some(Container::Mp4)
        } else if ext.eq_ignore_ascii_case("ts") {
            Some(Container::Ts)
        } else {
            None
        }
    }
}
