//! DVR (OME's `<LLHLS><DVR>` and `<HLS><DVR>`): every complete segment of a stream also
//! goes to disk under `<TempStoragePath>`, so the chunklists can list the
//! last `<MaxDuration>` seconds while memory holds only the live window
//! (`SegmentCount` segments). A segment that left memory is read back
//! when a viewer asks for it: off the loop, on the file worker, into a
//! small cache shared by every viewer of it.
//!
//! On disk, a stream's segments are `{TempStoragePath}/kiln_{pid}_{key}/
//! {track}/{msn}.m4s` (the init sections stay in memory: they are small).
//! The folder is deleted when the stream's playlists go (30 s after it
//! ends); a folder left by a kiln that no longer runs (a crash, `kill
//! -9`) is deleted when a DVR next uses the same path, and at start-up
//! for the paths the configuration names ([`FileOp::SweepDvr`]).
//!
//! Sans-IO: segments in, [`FileOp`]s out. The window is counted in media
//! time; `now` is passed in only to age the segments read back.

use super::event::Cue;
use super::Segment;
use crate::files::{FileId, FileOp, Piece, DVR_FILE};
use crate::media::TrackId;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One segment on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskSegment {
    pub msn: u64,
    /// Seconds.
    pub duration: f64,
    /// Unix ms of its first sample.
    pub start_ms: i64,
    pub len: u64,
    pub discontinuity: bool,
    pub init_version: u32,
    /// The ad-break edges of its parts (rarely any).
    pub cues: Vec<Cue>,
    /// The worker wrote it (it can be read back).
    pub written: bool,
}

/// One track's segments on disk, oldest first.
#[derive(Debug, Default)]
pub struct DvrTrack {
    pub id: TrackId,
    pub segments: VecDeque<DiskSegment>,
    /// Seconds of `segments`.
    total: f64,
    /// Discontinuities that left the window (EXT-X-DISCONTINUITY-SEQUENCE
    /// of a chunklist that lists the window).
    pub discontinuity_sequence: u64,
}

impl DvrTrack {
    pub fn segment(&self, msn: u64) -> Option<&DiskSegment> {
        let first = self.segments.front()?.msn;
        let i = usize::try_from(msn.checked_sub(first)?).ok()?;
        self.segments.get(i).filter(|s| s.msn == msn)
    }

    /// The oldest init section a listed segment uses.
    pub fn oldest_init(&self) -> Option<u32> {
        self.segments.front().map(|s| s.init_version)
    }
}

/// A stream's DVR.
#[derive(Debug)]
pub struct Dvr {
    /// `{TempStoragePath}/kiln_{pid}_{key}`.
    pub dir: PathBuf,
    /// Seconds kept.
    window: f64,
    pub tracks: Vec<DvrTrack>,
    /// File ids: `base` | a counter (see [`Dvr::new`]).
    base: FileId,
    next: u64,
    /// Writes and deletes in flight: file id -> (track, msn).
    in_flight: HashMap<FileId, (TrackId, u64)>,
    ops: Vec<FileOp>,
    /// Bytes of the segments listed (on disk or on their way).
    pub bytes: u64,
    /// Segments were added since the manager last looked (its disk
    /// budgets are checked then).
    pub grew: bool,
    /// Bytes free on the folder's file system, as last reported.
    pub free: Option<u64>,
    /// Bytes handed to the worker since free space was last asked.
    since_space: u64,
    /// A disk budget has deleted segments of its window (said once).
    pub shrunk: bool,
}

/// Bits of a DVR file id left for the counter within one DVR.
const COUNTER_BITS: u32 = 40;
/// The largest serial a DVR gets (the one above, all ones, is the reads').
pub const MAX_SERIAL: u64 = (1 << (62 - COUNTER_BITS)) - 2;

impl Dvr {
    /// `serial`: a number no other live DVR of this process has (its
    /// file ids carry it, so the worker's answers find their DVR).
    pub fn new(root: &Path, key: &str, window: std::time::Duration, serial: u64) -> Dvr {
        Dvr {
            dir: root.join(format!("kiln_{}_{key}", std::process::id())),
            window: window.as_secs_f64(),
            tracks: Vec::new(),
            base: DVR_FILE | ((serial & ((1 << (62 - COUNTER_BITS)) - 1)) << COUNTER_BITS),
            next: 0,
            in_flight: HashMap::new(),
            ops: Vec::new(),
            bytes: 0,
            grew: false,
            free: None,
            since_space: u64::MAX,
            shrunk: false,
        }
    }

    /// Whether a file id is one of this DVR's.
    pub fn owns(&self, file: FileId) -> bool {
        file & !((1 << COUNTER_BITS) - 1) == self.base
    }

    fn file_id(&mut self) -> FileId {
        self.next = (self.next + 1) & ((1 << COUNTER_BITS) - 1);
        self.base | self.next
    }

    pub fn path_of(&self, track: TrackId, msn: u64) -> PathBuf {
        self.dir.join(track.to_string()).join(format!("{msn}.m4s"))
    }

    pub fn track(&self, id: TrackId) -> Option<&DvrTrack> {
        self.tracks.iter().find(|t| t.id == id)
    }

    /// The newest segment on disk of `track` (none yet: None).
    pub fn last_msn(&self, track: TrackId) -> Option<u64> {
        self.track(track)?.segments.back().map(|s| s.msn)
    }

    /// A segment just completed: it goes to disk, and the oldest leave
    /// the window.
    pub fn add(&mut self, track: TrackId, seg: &Segment) {
        // The parts as the live window holds them: shared, not copied
        // (from their memory file, in the kernel, when they are in one).
        let data: Vec<Piece> = seg
            .parts
            .iter()
            .map(|p| Piece {
                bytes: p.data.clone(),
                from: p.file.as_ref().map(|f| (f.file.clone(), f.offset)),
            })
            .collect();
        let disk = DiskSegment {
            msn: seg.msn,
            duration: seg.duration(),
            start_ms: seg.start_ms,
            len: data.iter().map(|p| p.bytes.len() as u64).sum(),
            discontinuity: seg.discontinuity,
            init_version: seg.init_version,
            cues: seg.parts.iter().filter_map(|p| p.cue).collect(),
            written: false,
        };
        self.add_data(track, disk, data);
    }

    /// An HLS (MPEG-TS) segment just completed (its one "track" is
    /// [`TS_TRACK`]).
    pub fn add_ts(&mut self, seg: &super::ts::TsSegment) {
        let disk = DiskSegment {
            msn: seg.msn,
            duration: seg.duration,
            start_ms: seg.start_ms,
            len: seg.data.len() as u64,
            discontinuity: false,
            init_version: 0,
            cues: seg.cues.clone(),
            written: false,
        };
        self.add_data(TS_TRACK, disk, vec![seg.data.clone().into()]);
    }

    fn add_data(&mut self, track: TrackId, disk: DiskSegment, parts: Vec<Piece>) {
        let file = self.file_id();
        let path = self.path_of(track, disk.msn);
        self.ops.push(FileOp::PutShared { file, path, parts });
        self.in_flight.insert(file, (track, disk.msn));
        self.bytes += disk.len;
        self.grew = true;
        // The free space, after the first segment and every 4 MiB (for
        // `MinFreeMB`).
        self.since_space = self.since_space.saturating_add(disk.len);
        if self.since_space >= crate::files::SPACE_EVERY {
            self.since_space = 0;
            let file = self.file_id();
            self.ops.push(FileOp::Space {
                file,
                path: self.dir.clone(),
            });
        }
        let i = match self.tracks.iter().position(|t| t.id == track) {
            Some(i) => i,
            None => {
                self.tracks.push(DvrTrack {
                    id: track,
                    ..DvrTrack::default()
                });
                self.tracks.len() - 1
            }
        };
        // A segment number that does not follow (a new packager would have
        // a new DVR): what was listed cannot be continued.
        if self.tracks[i]
            .segments
            .back()
            .is_some_and(|l| l.msn + 1 != disk.msn)
        {
            self.drop_oldest(i, usize::MAX);
        }
        let t = &mut self.tracks[i];
        t.total += disk.duration;
        t.segments.push_back(disk);
        // The window: the newest segment always stays.
        let mut over = 0;
        let mut total = t.total;
        for s in &t.segments {
            if total <= self.window || over + 1 == t.segments.len() {
                break;
            }
            total -= s.duration;
            over += 1;
        }
        self.drop_oldest(i, over);
    }

    /// Drops the `n` oldest segments of track `i` from the list, and
    /// deletes their files.
    fn drop_oldest(&mut self, i: usize, n: usize) {
        for _ in 0..n {
            let Some(s) = self.tracks[i].segments.pop_front() else {
                break;
            };
            let t = &mut self.tracks[i];
            t.total -= s.duration;
            if s.discontinuity {
                t.discontinuity_sequence += 1;
            }
            let track = t.id;
            self.bytes = self.bytes.saturating_sub(s.len);
            let file = self.file_id();
            let path = self.path_of(track, s.msn);
            self.ops.push(FileOp::Delete { file, path });
        }
        if self.tracks[i].segments.is_empty() {
            self.tracks[i].total = 0.0;
        }
    }

    /// The worker's answer about one of this DVR's files. A segment that
    /// could not be written (a full disk, a disk that does not keep up)
    /// ends the window there: it and everything older leave the list.
    pub fn on_written(&mut self, file: FileId, error: Option<&str>) {
        let Some((track, msn)) = self.in_flight.remove(&file) else {
            return;
        };
        let Some(i) = self.tracks.iter().position(|t| t.id == track) else {
            return;
        };
        match error {
            None => {
                if let Some(s) = self.tracks[i].segments.iter_mut().find(|s| s.msn == msn) {
                    s.written = true;
                }
            }
            Some(why) => {
                crate::warn!(
                    "DVR {}: segment {msn} of track {track} not kept: {why}",
                    self.dir.display()
                );
                let n = self.tracks[i]
                    .segments
                    .iter()
                    .position(|s| s.msn == msn)
                    .map_or(0, |p| p + 1);
                self.drop_oldest(i, n);
            }
        }
    }

    /// Unix ms of the oldest segment kept, if any.
    pub fn oldest_ms(&self) -> Option<i64> {
        self.tracks
            .iter()
            .filter_map(|t| t.segments.front())
            .map(|s| s.start_ms)
            .min()
    }

    /// Gives up the oldest segment of every track that starts it (a disk
    /// budget makes room); the bytes that frees.
    pub fn drop_first(&mut self) -> u64 {
        let Some(msn) = self
            .tracks
            .iter()
            .filter_map(|t| t.segments.front())
            .min_by_key(|s| s.start_ms)
            .map(|s| s.msn)
        else {
            return 0;
        };
        let before = self.bytes;
        for i in 0..self.tracks.len() {
            if self.tracks[i]
                .segments
                .front()
                .is_some_and(|s| s.msn == msn)
            {
                self.drop_oldest(i, 1);
            }
        }
        before - self.bytes
    }

    /// What to ask of the file worker, in order.
    pub fn take_ops(&mut self) -> std::vec::Drain<'_, FileOp> {
        self.ops.drain(..)
    }

    /// The stream's playlists are gone: the whole folder goes.
    pub fn remove(&mut self) -> FileOp {
        let file = self.file_id();
        FileOp::RemoveDvr {
            file,
            dir: self.dir.clone(),
        }
    }
}

/// The track number of HLS (MPEG-TS) segments, which hold every track
/// (LL-HLS track ids start at 1).
pub const TS_TRACK: TrackId = 0;

/// What a viewer asks to be read: (stream, track, msn).
pub type ReadKey = (u64, TrackId, u64);

/// Segments read back are kept for every viewer of them, this many bytes
/// at most (the newest reads; a viewer that seeks back reads on), and for
/// [`CACHE_TTL`] at most (the viewers of one moment share them; a box is
/// not left holding them after a seek).
pub const CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(20);
/// The bytes of segments read back kept at most.
pub const CACHE_BYTES: usize = 24 << 20;
/// Reads in flight, all viewers together, and for one address.
pub const MAX_READS: usize = 64;
pub const MAX_READS_PER_ADDRESS: usize = 8;
/// The largest segment read back (a bound on one read's memory).
pub const MAX_SEGMENT: u64 = 64 << 20;

/// Why a read was not started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadRefused {
    /// Too many reads in flight (all, or this address's share).
    Busy,
}

/// Reads of DVR segments: in flight, and the cache of what came back.
#[derive(Debug, Default)]
pub struct DvrReads {
    /// Oldest first, with when each came; `None`: the read failed
    /// (answered 404 while kept).
    cache: VecDeque<(ReadKey, Option<Piece>, Instant)>,
    cached_bytes: usize,
    in_flight: HashMap<FileId, (ReadKey, IpAddr)>,
    next: u64,
    ops: Vec<FileOp>,
}

/// File ids of reads: the DVR bit and the top counter value space
/// (serial all ones), which no DVR uses.
const READ_BASE: FileId = DVR_FILE | (((1 << (62 - COUNTER_BITS)) - 1) << COUNTER_BITS);

impl DvrReads {
    /// What came back for `key`: Some(Some) the bytes, Some(None) a read
    /// that failed, None not read.
    pub fn cached(&self, key: &ReadKey) -> Option<Option<&Piece>> {
        self.cache
            .iter()
            .rev()
            .find(|(k, _, _)| k == key)
            .map(|(_, b, _)| b.as_ref())
    }

    pub fn is_reading(&self, key: &ReadKey) -> bool {
        self.in_flight.values().any(|(k, _)| k == key)
    }

    /// Asks for `path` to be read for `key` (once, however many viewers
    /// ask): within the reads' shares.
    pub fn start(&mut self, key: ReadKey, path: PathBuf, peer: IpAddr) -> Result<(), ReadRefused> {
        if self.is_reading(&key) {
            return Ok(());
        }
        let mine = self
            .in_flight
            .values()
            .filter(|(_, ip)| *ip == peer)
            .count();
        if self.in_flight.len() >= MAX_READS || mine >= MAX_READS_PER_ADDRESS {
            return Err(ReadRefused::Busy);
        }
        self.next = (self.next + 1) & ((1 << COUNTER_BITS) - 1);
        let file = READ_BASE | self.next;
        self.in_flight.insert(file, (key, peer));
        self.ops.push(FileOp::Read {
            file,
            path,
            max: MAX_SEGMENT,
        });
        Ok(())
    }

    /// Whether a file id is a read's.
    pub fn owns(file: FileId) -> bool {
        file & READ_BASE == READ_BASE
    }

    /// A read came back: its stream (to wake its viewers), if it was one.
    pub fn on_read(
        &mut self,
        file: FileId,
        data: Result<Piece, String>,
        now: Instant,
    ) -> Option<u64> {
        let (key, _) = self.in_flight.remove(&file)?;
        let data = match data {
            Ok(b) => Some(b),
            Err(why) => {
                crate::warn!("DVR: segment {} of track {} not read: {why}", key.2, key.1);
                None
            }
        };
        self.cached_bytes += data.as_ref().map_or(0, |p| p.bytes.len());
        self.cache.push_back((key, data, now));
        // The newest stays, whatever its size: its viewers are woken now.
        while (self.cached_bytes > CACHE_BYTES && self.cache.len() > 1) || self.cache.len() > 256 {
            self.drop_oldest();
        }
        Some(key.0)
    }

    /// Drops the oldest entry; the bytes that frees.
    fn drop_oldest(&mut self) -> usize {
        let n = self
            .cache
            .pop_front()
            .map_or(0, |(_, b, _)| b.map_or(0, |b| b.bytes.len()));
        self.cached_bytes -= n;
        n
    }

    /// Drops what was read more than [`CACHE_TTL`] ago: (the bytes that
    /// frees, when the next entry is due).
    pub fn expire(&mut self, now: Instant) -> (usize, Option<Instant>) {
        let mut freed = 0;
        while self
            .cache
            .front()
            .is_some_and(|(_, _, at)| *at + CACHE_TTL <= now)
        {
            freed += self.drop_oldest();
        }
        (freed, self.cache.front().map(|(_, _, at)| *at + CACHE_TTL))
    }

    /// A stream's playlists are gone: its cached segments too, and what
    /// is being read for it is dropped when it comes.
    pub fn forget(&mut self, stream: u64) {
        self.in_flight.retain(|_, (k, _)| k.0 != stream);
        let before = self.cache.len();
        self.cache.retain(|(k, _, _)| k.0 != stream);
        if self.cache.len() != before {
            self.cached_bytes = self
                .cache
                .iter()
                .map(|(_, b, _)| b.as_ref().map_or(0, |p| p.bytes.len()))
                .sum();
        }
    }

    pub fn cached_bytes(&self) -> usize {
        self.cached_bytes
    }

    pub fn take_ops(&mut self) -> std::vec::Drain<'_, FileOp> {
        self.ops.drain(..)
    }
}

#[cfg(test)]
mod tests;
