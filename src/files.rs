//! What the loop asks of the file writer thread (`server/file_writer.rs`)
//! and what it answers: recordings and HLS dumps describe their files as
//! these operations, and never touch the disk themselves.

use std::path::PathBuf;

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
}

/// File ids of HLS dumps have this bit set (those of records do not): the
/// loop hands each answer to its owner.
pub const DUMP_FILE: FileId = 1 << 63;

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
}
