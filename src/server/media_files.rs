//! What scheduled and multiplex channels read from disk, off the loop:
//!
//! - [`FileReader`]: one thread per file playing, which opens it (MP4/MOV
//!   through [`crate::mp4`], MPEG-TS through the TS demuxer), reads its
//!   samples in decode order from the start position and hands them over
//!   in batches through a bounded channel: the thread waits while the loop
//!   has enough (at most [`BATCHES`] batches of [`BATCH_FRAMES`] frames
//!   held), so a two-hour file costs a few hundred kB, not its size.
//! - [`DirWatch`]: one thread that looks at the `.sch` / `.mux`
//!   directories every [`SCAN_EVERY`] and reads the files that appeared or
//!   changed (each at most [`MAX_FILE_BYTES`]), and says which went.
//!
//! Both wake the poll when they have something; the loop never touches the
//! disk for them.

use crate::channel::MAX_FILE_BYTES;
use crate::media::{Codec, Frame, MediaKind, Track};
use bytes::Bytes;
use mio::Waker;
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Batches a reader may have waiting for the loop.
pub(crate) const BATCHES: usize = 4;
/// Frames in a batch.
pub(crate) const BATCH_FRAMES: usize = 32;
/// The buffer a file is read through.
const READ_BUFFER: usize = 256 << 10;
/// How often the schedule and mux directories are looked at.
pub(crate) const SCAN_EVERY: Duration = Duration::from_secs(1);

/// What a reader says.
#[derive(Debug)]
pub(crate) enum ReadMsg {
    /// The file's tracks (first, once).
    Tracks(Vec<Track>),
    Frames(Vec<Frame>),
    /// The file (or the item's duration) ended.
    End,
    /// It cannot be read; why.
    Failed(String),
}

/// A file being read for a channel; dropping it stops the thread.
pub(crate) struct FileReader {
    rx: Receiver<ReadMsg>,
}

impl FileReader {
    /// Starts reading `path` from `start_ms` for `duration_ms` (all of it
    /// when `None`).
    pub(crate) fn open(
        path: PathBuf,
        start_ms: i64,
        duration_ms: Option<i64>,
        waker: Arc<Waker>,
    ) -> std::io::Result<FileReader> {
        let (tx, rx) = mpsc::sync_channel(BATCHES);
        std::thread::Builder::new()
            .name("kiln-media-file".into())
            .spawn(move || {
                let mut out = Out {
                    tx,
                    waker,
                    batch: Vec::with_capacity(BATCH_FRAMES),
                    first_dts: None,
                    end_dts: duration_ms.map(|d| d.saturating_mul(90)),
                };
                let result = read_file(&path, start_ms, &mut out);
                let last = match result {
                    Ok(()) => out.flush().map(|_| ReadMsg::End),
                    Err(Stop::Closed) => None,
                    Err(Stop::Failed(why)) => Some(ReadMsg::Failed(why)),
                };
                if let Some(m) = last {
                    out.send(m);
                }
            })?;
        Ok(FileReader { rx })
    }

    /// The next message, if one is ready; `None` also once the thread is
    /// gone (after its last message).
    pub(crate) fn try_next(&mut self) -> Option<ReadMsg> {
        self.rx.try_recv().ok()
    }
}

enum Stop {
    /// The loop dropped the reader.
    Closed,
    Failed(String),
}

struct Out {
    tx: SyncSender<ReadMsg>,
    waker: Arc<Waker>,
    batch: Vec<Frame>,
    /// The first frame's decode time, and where the item's duration ends
    /// (relative to it).
    first_dts: Option<i64>,
    end_dts: Option<i64>,
}

impl Out {
    fn send(&mut self, m: ReadMsg) -> Option<()> {
        self.tx.send(m).ok()?;
        let _ = self.waker.wake();
        Some(())
    }

    fn flush(&mut self) -> Option<()> {
        if self.batch.is_empty() {
            return Some(());
        }
        let b = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH_FRAMES));
        self.send(ReadMsg::Frames(b))
    }

    /// Queues a frame; `Ok(false)` when the item's duration is reached.
    fn frame(&mut self, f: Frame) -> Result<bool, Stop> {
        let first = *self.first_dts.get_or_insert(f.dts);
        if self
            .end_dts
            .is_some_and(|end| f.dts.saturating_sub(first) >= end)
        {
            return Ok(false);
        }
        self.batch.push(f);
        if self.batch.len() >= BATCH_FRAMES {
            self.flush().ok_or(Stop::Closed)?;
        }
        Ok(true)
    }
}

fn failed(path: &Path, e: impl std::fmt::Display) -> Stop {
    Stop::Failed(format!("{}: {e}", path.display()))
}

fn read_file(path: &Path, start_ms: i64, out: &mut Out) -> Result<(), Stop> {
    let mut file = open_regular(path)?;
    let mut head = [0u8; 8];
    let n = file.read(&mut head).map_err(|e| failed(path, e))?;
    if n >= 1 && head[0] == 0x47 {
        return read_ts(path, file, start_ms, out);
    }
    read_mp4(path, file, start_ms, out)
}

/// Opens a media item: a regular file only. It is opened non-blocking, so
/// a FIFO (or a device) named as an item fails at once instead of holding
/// this thread in `open` for as long as no one writes it (a thread per
/// item switch, never reclaimed).
fn open_regular(path: &Path) -> Result<File, Stop> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| failed(path, e))?;
    let meta = file.metadata().map_err(|e| failed(path, e))?;
    if !meta.is_file() {
        return Err(failed(path, "not a regular file"));
    }
    Ok(file)
}

fn read_mp4(path: &Path, mut file: File, start_ms: i64, out: &mut Out) -> Result<(), Stop> {
    let len = file.metadata().map_err(|e| failed(path, e))?.len();
    let mut at = 0u64;
    let mut moov = None;
    while at < len {
        let mut h = [0u8; 16];
        file.seek(SeekFrom::Start(at))
            .map_err(|e| failed(path, e))?;
        let n = file.read(&mut h).map_err(|e| failed(path, e))?;
        let Some((kind, header, body)) = crate::mp4::box_header(&h[..n], len - at) else {
            return Err(failed(path, "not an MP4, MOV or MPEG-TS file"));
        };
        if &kind == b"moov" {
            if body > crate::mp4::MAX_MOOV {
                return Err(failed(path, crate::mp4::Mp4Error::TooLarge));
            }
            let mut data = vec![0u8; body as usize];
            file.seek(SeekFrom::Start(at + header))
                .map_err(|e| failed(path, e))?;
            file.read_exact(&mut data).map_err(|e| failed(path, e))?;
            moov = Some(data);
            break;
        }
        at = at.saturating_add(header + body);
    }
    let moov = moov.ok_or_else(|| failed(path, "no moov box (fragmented MP4 is not read)"))?;
    let movie = crate::mp4::parse_moov(&moov).map_err(|e| failed(path, e))?;
    drop(moov);
    out.send(ReadMsg::Tracks(
        movie.tracks.iter().map(|t| t.track.clone()).collect(),
    ))
    .ok_or(Stop::Closed)?;
    let mut buf = Vec::new();
    // Samples of a file are mostly in decode order on disk: read through a
    // large buffer, moving within it where a sample is near (a read system
    // call per 256 kB, not two per sample).
    let mut file = std::io::BufReader::with_capacity(READ_BUFFER, file);
    let mut pos = file.stream_position().map_err(|e| failed(path, e))?;
    for (ti, si) in crate::mp4::play_order(&movie, start_ms) {
        let t = &movie.tracks[ti];
        let s = t.samples[si];
        if s.size as usize > 16 << 20 {
            return Err(failed(path, "a sample larger than 16 MB"));
        }
        buf.resize(s.size as usize, 0);
        if s.offset != pos {
            let delta = i64::try_from(i128::from(s.offset) - i128::from(pos)).unwrap_or(i64::MAX);
            file.seek_relative(delta).map_err(|e| failed(path, e))?;
        }
        file.read_exact(&mut buf).map_err(|e| failed(path, e))?;
        pos = s.offset + u64::from(s.size);
        let mut data = Bytes::copy_from_slice(&buf);
        if matches!(t.track.codec, Codec::H264 | Codec::H265) {
            data = match crate::codec::nal::normalize_length_size_bytes(data, t.length_size) {
                Ok(d) => d,
                Err(_) => continue, // a damaged sample: skipped
            };
        }
        let dts = t.ticks(s.dts);
        let f = Frame {
            track: t.track.id,
            pts: dts + t.ticks(i64::from(s.cts)),
            dts,
            keyframe: s.sync || t.track.kind() != MediaKind::Video,
            data,
        };
        if !out.frame(f)? {
            break;
        }
    }
    Ok(())
}

fn read_ts(path: &Path, mut file: File, start_ms: i64, out: &mut Out) -> Result<(), Stop> {
    file.seek(SeekFrom::Start(0)).map_err(|e| failed(path, e))?;
    let mut demux = crate::ts::demux::Demuxer::new();
    let mut buf = vec![0u8; 188 * 512];
    let mut announced = false;
    // The start position: frames before it are skipped; video resumes at
    // its next keyframe.
    let mut first: Option<i64> = None;
    let mut started = start_ms <= 0;
    let mut video: Vec<u32> = Vec::new();
    loop {
        let n = file.read(&mut buf).map_err(|e| failed(path, e))?;
        if n == 0 {
            demux.flush();
        } else {
            demux.push(&buf[..n]);
        }
        while let Some(ev) = demux.poll_event() {
            match ev {
                crate::ts::demux::DemuxEvent::TracksChanged(tracks) => {
                    if announced {
                        continue; // the first programme's tracks are kept
                    }
                    announced = true;
                    video = tracks
                        .iter()
                        .filter(|t| t.kind() == MediaKind::Video)
                        .map(|t| t.id)
                        .collect();
                    out.send(ReadMsg::Tracks(tracks)).ok_or(Stop::Closed)?;
                }
                crate::ts::demux::DemuxEvent::Frame(f) => {
                    if !announced {
                        continue;
                    }
                    let base = *first.get_or_insert(f.dts);
                    if !started {
                        let is_video = video.contains(&f.track);
                        let at_video_key = video.is_empty() || (is_video && f.keyframe);
                        if f.dts.saturating_sub(base) < start_ms.saturating_mul(90) || !at_video_key
                        {
                            continue;
                        }
                        started = true;
                    }
                    if !out.frame(f)? {
                        return Ok(());
                    }
                }
            }
        }
        if n == 0 {
            break;
        }
    }
    if !announced {
        return Err(failed(
            path,
            "no playable track (not an MPEG-TS file with H.264, H.265, AAC or Opus)",
        ));
    }
    Ok(())
}

/// A directory of `.sch` or `.mux` files, and whose they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WatchDir {
    pub(crate) dir: PathBuf,
    /// `sch` or `mux` (empty: a media folder, made if missing, not read).
    pub(crate) ext: &'static str,
    pub(crate) vhost: String,
    pub(crate) app: String,
}

#[derive(Debug)]
pub(crate) enum DirEvent {
    /// A file appeared or changed: its text, or why it could not be read.
    Changed {
        watch: WatchDir,
        path: PathBuf,
        text: Result<String, String>,
    },
    Removed {
        watch: WatchDir,
        path: PathBuf,
    },
}

/// The directory watcher: told which directories to look at, it says what
/// changed in them.
pub(crate) struct DirWatch {
    dirs: Sender<Vec<WatchDir>>,
    events: Receiver<DirEvent>,
}

impl DirWatch {
    pub(crate) fn start(waker: Arc<Waker>) -> std::io::Result<DirWatch> {
        let (dtx, drx) = mpsc::channel::<Vec<WatchDir>>();
        let (etx, erx) = mpsc::channel::<DirEvent>();
        std::thread::Builder::new()
            .name("kiln-channel-files".into())
            .spawn(move || {
                let mut dirs: Vec<WatchDir> = Vec::new();
                let mut seen: HashMap<PathBuf, (WatchDir, Option<SystemTime>, u64)> =
                    HashMap::new();
                loop {
                    match drx.recv_timeout(SCAN_EVERY) {
                        Ok(d) => {
                            make_missing(&d);
                            dirs = d;
                        }
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => return,
                    }
                    if !super::file_writer::deliver(scan(&dirs, &mut seen), &etx, &waker) {
                        return;
                    }
                }
            })?;
        Ok(DirWatch {
            dirs: dtx,
            events: erx,
        })
    }

    /// Looks at these directories from now on (at once).
    pub(crate) fn watch(&self, dirs: Vec<WatchDir>) {
        let _ = self.dirs.send(dirs);
    }

    pub(crate) fn events(&self) -> impl Iterator<Item = DirEvent> + '_ {
        self.events.try_iter()
    }
}

/// The folders to watch that do not exist yet are made (an operator
/// following the README should not have to, nor guess why nothing is
/// read); each one made, or that cannot be, is logged.
fn make_missing(dirs: &[WatchDir]) {
    for w in dirs {
        if w.dir.exists() {
            continue;
        }
        let what = match w.ext {
            "" => "media files".to_string(),
            ext => format!(".{ext} files"),
        };
        match std::fs::create_dir_all(&w.dir) {
            Ok(()) => crate::info!(
                "made the folder {} for [{}/{}]'s {what}",
                w.dir.display(),
                w.vhost,
                w.app
            ),
            Err(e) => crate::warn!(
                "the folder {} for [{}/{}]'s {what} does not exist and cannot be made: {e}",
                w.dir.display(),
                w.vhost,
                w.app
            ),
        }
    }
}

/// One look at every directory: files new or changed (by time and size)
/// and files gone.
fn scan(
    dirs: &[WatchDir],
    seen: &mut HashMap<PathBuf, (WatchDir, Option<SystemTime>, u64)>,
) -> Vec<DirEvent> {
    let mut events = Vec::new();
    let mut present = std::collections::HashSet::new();
    for w in dirs.iter().filter(|w| !w.ext.is_empty()) {
        let Ok(entries) = std::fs::read_dir(&w.dir) else {
            continue;
        };
        for e in entries.flatten().take(10_000) {
            let path = e.path();
            if path.extension().and_then(|x| x.to_str()) != Some(w.ext) {
                continue;
            }
            let Ok(meta) = e.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            present.insert(path.clone());
            let stamp = (meta.modified().ok(), meta.len());
            if seen
                .get(&path)
                .is_some_and(|(sw, m, l)| sw == w && (*m, *l) == stamp)
            {
                continue;
            }
            seen.insert(path.clone(), (w.clone(), stamp.0, stamp.1));
            let text = if meta.len() > MAX_FILE_BYTES {
                Err(format!("larger than {MAX_FILE_BYTES} bytes"))
            } else {
                std::fs::read_to_string(&path).map_err(|e| e.to_string())
            };
            events.push(DirEvent::Changed {
                watch: w.clone(),
                path,
                text,
            });
        }
    }
    let gone: Vec<PathBuf> = seen
        .keys()
        .filter(|p| !present.contains(*p))
        .cloned()
        .collect();
    for path in gone {
        if let Some((watch, _, _)) = seen.remove(&path) {
            events.push(DirEvent::Removed { watch, path });
        }
    }
    events
}
