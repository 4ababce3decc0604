//! Where a stream's parts are kept. In a memory file (memfd) when the
//! system has one: each part is written there once and mapped read-only,
//! so the packager, segments and TLS viewers read it as ordinary shared
//! bytes while plain-TCP viewers are sent it with `sendfile(2)` straight
//! from the file, the way nginx serves files from the page cache (no copy
//! of the part into each viewer's socket from user space). A part's pages
//! are given back when its last reference goes. Without memfd (or when a
//! mapping fails) parts live on the heap and are written with `writev`.

use crate::sys::{self, FileRegion};
use bytes::Bytes;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Where a part's bytes are in its memory file.
#[derive(Debug, Clone)]
pub struct FileRange {
    pub file: Arc<File>,
    pub offset: u64,
}

/// Bytes shared by every viewer, and where they are in a memory file (to
/// be sent from it) when they are there.
#[derive(Debug, Clone)]
pub struct Shared {
    pub bytes: Bytes,
    pub file: Option<FileRange>,
}

impl Shared {
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

impl From<crate::files::Piece> for Shared {
    fn from(p: crate::files::Piece) -> Self {
        Shared {
            bytes: p.bytes,
            file: p.from.map(|(file, offset)| FileRange { file, offset }),
        }
    }
}

impl From<Bytes> for Shared {
    fn from(bytes: Bytes) -> Self {
        Shared { bytes, file: None }
    }
}

/// A track's memory file: parts are appended at page boundaries.
#[derive(Debug)]
pub struct PartFile {
    file: Arc<File>,
    next: u64,
}

impl PartFile {
    pub fn new() -> std::io::Result<Self> {
        Ok(PartFile {
            file: Arc::new(sys::memory_file("kiln-llhls")?),
            next: 0,
        })
    }

    /// Keeps `data`: in the file when it can, else on the heap.
    pub fn keep(&mut self, data: Vec<u8>) -> Shared {
        let offset = self.next;
        let mapped = self
            .file
            .write_all_at(&data, offset)
            .and_then(|()| FileRegion::map(self.file.clone(), offset, data.len()));
        match mapped {
            Ok(region) => {
                self.next = offset + sys::page_round(data.len() as u64);
                Shared {
                    bytes: Bytes::from_owner(region),
                    file: Some(FileRange {
                        file: self.file.clone(),
                        offset,
                    }),
                }
            }
            Err(e) => {
                crate::debug!("LL-HLS part kept on the heap: {e}");
                Bytes::from(data).into()
            }
        }
    }
}
