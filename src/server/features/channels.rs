//! Scheduled and multiplex channels on the loop: each channel is a stream
//! kiln publishes itself. A scheduled channel plays what its
//! [`Scheduler`] says (files paced as live from their readers, live
//! streams as their frames come), placed on one timeline by its
//! [`Splicer`]; a multiplex channel puts its sources' frames through its
//! [`Multiplexer`]. `.sch` and `.mux` files are watched off the loop
//! ([`DirWatch`]) and their channels follow them.

use crate::api::Effect;
use crate::channel::mux::Multiplexer;
use crate::channel::schedule::{Cursor, ScheduleSpec, Scheduler, Source};
use crate::channel::timeline::{Splicer, AUDIO, VIDEO};
use crate::channel::{
    ChannelKey, MultiplexChannel, NowPlaying, Origin, ScheduledChannel, StreamUrl,
};
use crate::codec::aac;
use crate::media::{CodecConfig, Frame, MediaKind, Ticks, Track, TrackId, TrackLabel};
use crate::server::core::Core;
use crate::server::feature::Feature;
use crate::server::media_files::{DirEvent, DirWatch, FileReader, ReadMsg, WatchDir};
use crate::state::streams::{IngestOutput, SourceType, StreamId};
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A file's frames are released up to this much before their time: the
/// ones due within it go out together (fewer turns of the loop; outputs
/// buffer far more than this).
const LEAD: Duration = Duration::from_millis(40);
/// Channels are stepped on one grid of this period (each when it is due,
/// rounded up): however many play files, the loop wakes for them at most
/// this often, not once per channel per frame.
const TICK: Duration = Duration::from_millis(40);
/// Frames of a file held by the loop (the reader waits beyond).
const QUEUE_FRAMES: usize = 256;
/// How often channels look again at what they wait for (a stream to go
/// live, a name to be free).
const RECHECK: Duration = Duration::from_millis(500);
/// The registry's publisher ids of channels (above every loop token).
const OWNER_BASE: u64 = 1 << 62;

#[derive(Default)]
pub(crate) struct Channels {
    /// Something changed that channels may wait for (a stream started or
    /// ended, a file, an API call, a reader's batch): step them.
    dirty: bool,
    /// When a channel wants to be stepped next.
    next: Option<Instant>,
    /// The grid's origin (see [`TICK`]).
    epoch: Option<Instant>,
    watch: Option<DirWatch>,
    watched: Vec<WatchDir>,
    scheduled: BTreeMap<ChannelKey, SchedRun>,
    multiplex: BTreeMap<ChannelKey, MuxRun>,
    next_owner: u64,
}

/// The item a scheduled channel plays.
enum ItemRun {
    File {
        reader: FileReader,
        /// (file track, channel track, kind), once the tracks are read.
        map: Vec<(TrackId, TrackId, MediaKind)>,
        queue: VecDeque<Frame>,
        /// (when, decode time) of the first frame released: the pace.
        clock: Option<(Instant, Ticks)>,
        ended: bool,
    },
    Live {
        source: StreamId,
        map: Vec<(TrackId, TrackId, MediaKind)>,
    },
}

struct SchedRun {
    key: ChannelKey,
    owner: u64,
    stream: Option<StreamId>,
    scheduler: Scheduler,
    splicer: Splicer,
    video: bool,
    /// How many audio tracks it carries: 0, 1, or its `AudioMap`'s.
    audios: usize,
    /// Its `AudioMap`, checked.
    audio_map: Vec<TrackLabel>,
    /// The spec's `<Stream>` (a new schedule with the same keeps the
    /// channel's stream).
    section: crate::channel::schedule::StreamSection,
    media_root: PathBuf,
    item: Option<ItemRun>,
    playing: Option<Cursor>,
    /// When `playing` began to play (wall clock, Unix ms).
    playing_since_ms: i64,
    state: String,
    /// Failures already logged (each once until an item plays).
    warned: std::collections::HashSet<String>,
    /// When it wants to be stepped next.
    due: Option<Instant>,
    /// Its tracks changed; said with the next frames.
    tracks_changed: bool,
}

struct MuxRun {
    key: ChannelKey,
    owner: u64,
    stream: Option<StreamId>,
    mux: Multiplexer,
    urls: Vec<StreamUrl>,
    sources: Vec<Option<StreamId>>,
    /// Per source: the track its map names that it lacks, once said (a
    /// WARN each time it changes, and the channel's `pullingMessage`).
    missing: Vec<Option<String>>,
    clock: Instant,
    due: Option<Instant>,
}

fn key_str(k: &ChannelKey) -> String {
    format!("{}/{}/{}", k.0, k.1, k.2)
}

/// The tracks of a source for a channel: its first video track as the
/// channel's [`VIDEO`] (if it carries video), and its first `audios`
/// audio tracks as [`AUDIO`], `AUDIO + 1`, ..., labelled by `labels` in
/// order (OME's `AudioMap`).
fn map_tracks(
    tracks: &[Track],
    video: bool,
    audios: usize,
    labels: &[TrackLabel],
) -> (Vec<(TrackId, TrackId, MediaKind)>, Vec<Track>) {
    let mut map = Vec::new();
    let mut out = Vec::new();
    if video {
        if let Some(t) = tracks.iter().find(|t| t.kind() == MediaKind::Video) {
            map.push((t.id, VIDEO, MediaKind::Video));
            out.push(Track {
                id: VIDEO,
                ..t.clone()
            });
        }
    }
    let audio = tracks.iter().filter(|t| t.kind() == MediaKind::Audio);
    for (i, t) in audio.take(audios).enumerate() {
        let id = AUDIO + i as TrackId;
        map.push((t.id, id, MediaKind::Audio));
        let label = labels
            .get(i)
            .map_or(t.label.clone(), |l| t.label.overlaid(l));
        out.push(Track {
            id,
            label,
            ..t.clone()
        });
    }
    (map, out)
}

impl SchedRun {
    fn new(c: &ScheduledChannel, media_root: PathBuf, owner: u64) -> Result<SchedRun, String> {
        let plan = c.spec.plan()?;
        let audio_map = plan.audio_map.clone();
        Ok(SchedRun {
            key: c.spec.key(),
            owner,
            stream: None,
            scheduler: Scheduler::new(plan),
            splicer: Splicer::default(),
            video: c.spec.stream.video_track,
            audios: match c.spec.stream.audio_track {
                false => 0,
                true => audio_map.len().max(1),
            },
            audio_map,
            section: c.spec.stream.clone(),
            media_root,
            item: None,
            playing: None,
            playing_since_ms: 0,
            state: "waiting".into(),
            warned: Default::default(),
            due: None,
            tracks_changed: false,
        })
    }

    /// The channel's stream, started when its name is free.
    fn ensure_stream(&mut self, core: &mut Core) -> Option<StreamId> {
        if self.stream.is_some() {
            return self.stream;
        }
        self.stream = start_stream(core, &self.key, SourceType::Scheduled, self.owner);
        if self.stream.is_none() {
            self.state = IN_USE.into();
        }
        self.stream
    }

    /// Sets the channel's tracks to an item's; true when they changed.
    fn set_tracks(&mut self, core: &mut Core, tracks: Vec<Track>) -> bool {
        let Some(id) = self.stream else { return false };
        // The same codec and configuration: the channel's tracks stay (a
        // bit rate or frame rate stated differently changes nothing for a
        // decoder, and a change restarts the outputs' muxers).
        let same = core.api.registry.streams.get(id).is_some_and(|s| {
            s.tracks().len() == tracks.len()
                && tracks
                    .iter()
                    .all(|t| s.track(t.id).is_some_and(|o| same_decoder(o, t)))
        });
        if same {
            return false;
        }
        if core
            .api
            .registry
            .streams
            .get(id)
            .is_some_and(|s| !s.tracks().is_empty())
        {
            crate::info!(
                "scheduled channel [{}]: the item's codec configuration differs: LL-HLS goes on after a discontinuity with a new init section; other outputs send the new configuration",
                key_str(&self.key)
            );
        }
        core.api.registry.streams.set_tracks(id, tracks);
        // Said with the item's first frames, in one output: an output
        // that starts then replays the stream's GOP and skips those
        // frames in the same batch (apart, they would go out twice).
        self.tracks_changed = true;
        true
    }

    /// Places an item's frames on the channel and hands them on.
    fn emit(
        &mut self,
        core: &mut Core,
        map: &[(TrackId, TrackId, MediaKind)],
        frames: impl IntoIterator<Item = Frame>,
    ) {
        let Some(id) = self.stream else { return };
        let mut out = Vec::new();
        for f in frames {
            let Some(&(_, dst, kind)) = map.iter().find(|(src, _, _)| *src == f.track) else {
                continue;
            };
            let f = Frame { track: dst, ..f };
            out.extend(self.splicer.place(kind, &f));
        }
        let tracks_changed = std::mem::take(&mut self.tracks_changed);
        publish(core, id, out, tracks_changed);
    }

    /// Asks the scheduler what plays and starts it; then moves what the
    /// item has. Returns when it wants to be looked at next.
    fn step(&mut self, core: &mut Core, now: Instant) -> Option<Instant> {
        if self.ensure_stream(core).is_none() {
            return Some(now + RECHECK);
        }
        let now_ms = crate::clock::unix_millis_now();
        for _ in 0..8 {
            let reg = &core.api.registry;
            let live = |u: &StreamUrl| {
                reg.streams
                    .find(&u.vhost, &u.app, &u.stream)
                    .is_some_and(|s| !s.tracks().is_empty())
            };
            let Some(change) = self.scheduler.poll(now_ms, &live) else {
                break;
            };
            self.item = None;
            self.playing = change;
            self.playing_since_ms = now_ms;
            match change {
                Some(c) => self.start_item(core, c, now_ms),
                None => self.state = "no item can play".into(),
            }
        }
        let mut next = now + RECHECK;
        if let Some(at) = self.scheduler.next_change(now_ms) {
            next = next.min(now + Duration::from_millis((at - now_ms).max(0) as u64));
        }
        if let Some(due) = self.pump_file(core, now, now_ms) {
            next = next.min(due);
        }
        if self.tracks_changed {
            // No frame yet: the change goes alone.
            self.emit(core, &[], std::iter::empty());
        }
        self.publish_status(core);
        Some(next)
    }

    fn start_item(&mut self, core: &mut Core, c: Cursor, now_ms: i64) {
        let Some(item) = self.scheduler.item(c).cloned() else {
            return;
        };
        let what = if c.program.is_some() {
            "program"
        } else {
            "fallback"
        };
        crate::info!(
            "scheduled channel [{}]: {what} item [{}] starts",
            key_str(&self.key),
            item.url
        );
        self.state = "onair".into();
        match &item.source {
            Source::File { path, start_ms } => {
                let full = self.media_root.join(path);
                match FileReader::open(full, *start_ms, item.duration_ms, core.waker.clone()) {
                    Ok(reader) => {
                        self.item = Some(ItemRun::File {
                            reader,
                            map: Vec::new(),
                            queue: VecDeque::new(),
                            clock: None,
                            ended: false,
                        })
                    }
                    Err(e) => {
                        crate::warn!(
                            "scheduled channel [{}]: cannot start a reader: {e}",
                            key_str(&self.key)
                        );
                        self.scheduler.failed(now_ms);
                    }
                }
            }
            Source::Stream(u) => {
                let Some(s) = core.api.registry.streams.find(&u.vhost, &u.app, &u.stream) else {
                    self.scheduler.failed(now_ms);
                    return;
                };
                let (source, tracks, gop) = (s.id, s.tracks().to_vec(), s.gop().to_vec());
                let (map, out) = map_tracks(&tracks, self.video, self.audios, &self.audio_map);
                if !self.covers(&out) {
                    self.refuse_item(&item.url, now_ms);
                    return;
                }
                self.set_tracks(core, out);
                self.splicer
                    .begin(map.iter().any(|m| m.2 == MediaKind::Video));
                // The source's last GOP first: the switch shows at once.
                self.emit(core, &map, gop);
                self.item = Some(ItemRun::Live { source, map });
            }
        }
    }

    /// The item has every track the channel carries (its video, and as
    /// many audio tracks as its `AudioMap` names).
    fn covers(&self, tracks: &[Track]) -> bool {
        let count = |k| tracks.iter().filter(|t| t.kind() == k).count();
        (!self.video || count(MediaKind::Video) > 0) && count(MediaKind::Audio) >= self.audios
    }

    fn refuse_item(&mut self, url: &str, now_ms: i64) {
        if self.warned.insert(url.to_string()) {
            crate::warn!(
                "scheduled channel [{}]: item [{}] lacks the video or an audio track the channel carries (videoTrack/audioTrack/audioMap); it is skipped",
                key_str(&self.key),
                url
            );
        }
        self.state = format!("item [{url}] lacks a track the channel carries");
        self.item = None;
        self.scheduler.failed(now_ms);
    }

    /// Moves a file's frames: what its reader has into the queue, what is
    /// due out of it. When the next frame is due.
    fn pump_file(&mut self, core: &mut Core, now: Instant, now_ms: i64) -> Option<Instant> {
        let Some(ItemRun::File { .. }) = &self.item else {
            return None;
        };
        let Some(ItemRun::File {
            mut reader,
            mut map,
            mut queue,
            mut clock,
            mut ended,
        }) = self.item.take()
        else {
            return None;
        };
        let mut failed = None;
        while queue.len() < QUEUE_FRAMES && !ended {
            match reader.try_next() {
                Some(ReadMsg::Tracks(tracks)) => {
                    let (m, out) = map_tracks(&tracks, self.video, self.audios, &self.audio_map);
                    if !self.covers(&out) {
                        failed =
                            Some("lacks the video or an audio track the channel carries (videoTrack/audioTrack/audioMap)".to_string());
                        break;
                    }
                    self.set_tracks(core, out);
                    self.splicer
                        .begin(m.iter().any(|x| x.2 == MediaKind::Video));
                    map = m;
                }
                Some(ReadMsg::Frames(f)) => {
                    if queue.is_empty() && clock.is_none() {
                        self.warned.clear();
                    }
                    queue.extend(f)
                }
                Some(ReadMsg::End) => ended = true,
                Some(ReadMsg::Failed(why)) => {
                    failed = Some(why);
                    break;
                }
                None => break,
            }
        }
        if let Some(why) = failed {
            self.state = format!("item failed: {why}");
            // Said once per item until it plays (it is tried every 5 s).
            if self.warned.insert(why.clone()) {
                crate::warn!(
                    "scheduled channel [{}]: {}; the item is left",
                    key_str(&self.key),
                    why
                );
            }
            self.scheduler.failed(now_ms);
            return Some(now);
        }
        let mut due = Vec::new();
        let mut next = None;
        while let Some(f) = queue.front() {
            let (t0, d0) = *clock.get_or_insert((now, f.dts));
            let at = t0 + Duration::from_micros(((f.dts - d0).max(0) as u64) * 100 / 9);
            if at > now + LEAD {
                next = Some(at - LEAD);
                break;
            }
            due.extend(queue.pop_front());
        }
        if !due.is_empty() {
            let m = map.clone();
            self.emit(core, &m, due);
        }
        if ended && queue.is_empty() {
            self.scheduler.ended(now_ms);
            return Some(now);
        }
        self.item = Some(ItemRun::File {
            reader,
            map,
            queue,
            clock,
            ended,
        });
        // A reader with nothing yet is looked at again soon (it wakes the
        // poll when it sends).
        next.or(Some(now + Duration::from_millis(50)))
    }

    /// A live item's frames.
    fn on_source(&mut self, core: &mut Core, o: &IngestOutput, now_ms: i64) {
        let Some(ItemRun::Live { source, map }) = &self.item else {
            return;
        };
        if o.stream != Some(*source) && o.ended != Some(*source) {
            return;
        }
        let (source, mut map) = (*source, map.clone());
        if o.tracks_changed {
            if let Some(s) = core.api.registry.streams.get(source) {
                let (m, out) = map_tracks(s.tracks(), self.video, self.audios, &self.audio_map);
                if self.covers(&out) {
                    self.set_tracks(core, out);
                    map = m;
                    self.item = Some(ItemRun::Live {
                        source,
                        map: map.clone(),
                    });
                }
            }
        }
        if o.stream == Some(source) {
            self.emit(core, &map, o.frames.iter().cloned());
        }
        if o.ended == Some(source) {
            crate::info!(
                "scheduled channel [{}]: its live item stopped",
                key_str(&self.key)
            );
            self.item = None;
            self.scheduler.ended(now_ms);
        }
    }

    fn publish_status(&self, core: &mut Core) {
        if let Some(c) = core.api.channels.scheduled.get_mut(&self.key) {
            c.now = Some(NowPlaying {
                playing: self.playing.filter(|_| self.item.is_some()),
                since_ms: self.playing_since_ms,
                state: self.state.clone(),
            });
        }
    }

    fn stop(&mut self, core: &mut Core) {
        self.item = None;
        if let Some(id) = self.stream.take() {
            end_stream(core, id, &self.key);
        }
    }
}

/// Hands a channel's frames (and that its tracks changed) to the loop in
/// one output, after the registry has them: said apart, an output that
/// starts on the change replays the stream's GOP, those frames included,
/// and then gets them again.
fn publish(core: &mut Core, id: StreamId, frames: Vec<Frame>, tracks_changed: bool) {
    for f in &frames {
        core.api.registry.streams.on_frame(id, f);
    }
    if !frames.is_empty() || tracks_changed {
        core.out.ingest.push(IngestOutput {
            stream: Some(id),
            frames,
            tracks_changed,
            ..Default::default()
        });
    }
}

/// Whether a decoder set up for `a` decodes `b`'s frames: the same codec
/// and configuration; for AAC the same object type, rate and channels
/// (an MP4 file's AudioSpecificConfig often carries an explicit "no SBR"
/// extension that the same encoder's ADTS stream cannot say).
fn same_decoder(a: &Track, b: &Track) -> bool {
    if a.codec != b.codec {
        return false;
    }
    if a.config == b.config {
        return true;
    }
    match (&a.config, &b.config) {
        (CodecConfig::Aac { asc: x }, CodecConfig::Aac { asc: y }) => {
            let (Ok(x), Ok(y)) = (aac::parse_asc_full(x), aac::parse_asc_full(y)) else {
                return false;
            };
            x == y
        }
        _ => false,
    }
}

const IN_USE: &str = "the stream name is in use by another publisher";

/// Starts a channel's stream (`None`: another publisher has the name).
fn start_stream(
    core: &mut Core,
    key: &ChannelKey,
    source: SourceType,
    owner: u64,
) -> Option<StreamId> {
    let (v, a, n) = key;
    let id = core
        .api
        .registry
        .streams
        .start(v, a, n, source, owner, crate::clock::unix_millis_now())
        .ok()?;
    crate::info!(
        "{} channel [{}] started",
        source.api_name().to_lowercase(),
        key_str(key)
    );
    core.out.ingest.push(IngestOutput {
        started: Some(id),
        ..Default::default()
    });
    Some(id)
}

fn end_stream(core: &mut Core, id: StreamId, key: &ChannelKey) {
    if let Some(s) = core.api.registry.streams.end(id) {
        crate::info!(
            "channel [{}] ended ({} frames out)",
            key_str(key),
            s.frames_in
        );
    }
    core.out.ingest.push(IngestOutput {
        ended: Some(id),
        ..Default::default()
    });
}

impl MuxRun {
    fn new(c: &MultiplexChannel, owner: u64, now: Instant) -> Result<MuxRun, String> {
        let urls = c.spec.check()?;
        Ok(MuxRun {
            key: c.spec.key(),
            owner,
            stream: None,
            sources: vec![None; urls.len()],
            missing: vec![None; urls.len()],
            urls,
            mux: Multiplexer::new(c.spec.clone()),
            clock: now,
            due: None,
        })
    }

    fn ticks(&self, now: Instant) -> Ticks {
        (now.saturating_duration_since(self.clock).as_micros() * 9 / 100) as Ticks
    }

    /// Binds sources that went live; starts the channel when all were seen.
    fn step(&mut self, core: &mut Core, now: Instant) -> Option<Instant> {
        let mut changed = false;
        for i in 0..self.urls.len() {
            if self.sources[i].is_some() {
                continue;
            }
            let u = &self.urls[i];
            let Some(s) = core.api.registry.streams.find(&u.vhost, &u.app, &u.stream) else {
                continue;
            };
            if s.tracks().is_empty() {
                continue;
            }
            let id = s.id;
            let named = source_names(core, id);
            let (ok, c) = self.mux.source_tracks(i, &named);
            if !ok {
                let missing = self.mux.missing_track(i, &named);
                if missing.is_some() && missing != self.missing[i] {
                    let has: Vec<&str> = named
                        .iter()
                        .flat_map(|(_, n)| n.iter().map(String::as_str))
                        .collect();
                    crate::warn!(
                        "multiplex channel [{}]: source [{u}] has no track named [{}] (its tracks: {}); the channel waits for it",
                        key_str(&self.key),
                        missing.as_deref().unwrap_or(""),
                        has.join(", ")
                    );
                }
                self.missing[i] = missing;
            }
            if ok {
                self.missing[i] = None;
                self.sources[i] = Some(id);
                changed |= c;
                crate::info!(
                    "multiplex channel [{}]: source [{u}] joined",
                    key_str(&self.key)
                );
            }
        }
        if self.stream.is_none() && self.mux.ready() {
            self.stream = start_stream(core, &self.key, SourceType::Multiplex, self.owner);
            match self.stream {
                Some(_) => changed = true,
                None => self.note(core, "Playing", IN_USE.into()),
            }
        }
        if let Some(id) = self.stream {
            if changed {
                core.api.registry.streams.set_tracks(id, self.mux.tracks());
                publish(core, id, Vec::new(), true);
            }
            let playlists = self.mux.playlists();
            if core
                .api
                .registry
                .streams
                .get(id)
                .is_some_and(|s| s.playlists != playlists)
            {
                core.api.registry.streams.set_playlists(id, playlists);
            }
            self.note(core, "Playing", String::new());
        } else {
            let waiting = self
                .urls
                .iter()
                .zip(&self.sources)
                .find(|(_, s)| s.is_none());
            let msg = waiting.map_or(String::new(), |(u, _)| {
                let i = self.urls.iter().position(|x| x == u).unwrap_or(0);
                match self.missing.get(i).and_then(Option::as_deref) {
                    Some(track) => format!(
                        "Multiplex Channel : {}: stream {} has no track named {track}",
                        key_str(&self.key),
                        u.stream
                    ),
                    None => format!(
                        "Multiplex Channel : {}: Wait for stream {}",
                        key_str(&self.key),
                        u.stream
                    ),
                }
            });
            self.note(core, "Pulling", msg);
        }
        Some(now + RECHECK)
    }

    fn note(&self, core: &mut Core, state: &'static str, message: String) {
        if let Some(c) = core.api.channels.multiplex.get_mut(&self.key) {
            c.state = state;
            c.message = message;
        }
    }

    fn on_source(&mut self, core: &mut Core, o: &IngestOutput, now: Instant) {
        let Some(i) = self
            .sources
            .iter()
            .position(|s| s.is_some() && (*s == o.stream || *s == o.ended))
        else {
            return;
        };
        let Some(src) = self.sources[i] else { return };
        let mut tracks_changed = false;
        if o.tracks_changed && o.stream == Some(src) {
            let named = source_names(core, src);
            let (ok, changed) = self.mux.source_tracks(i, &named);
            if let (true, true, Some(id)) = (ok, changed, self.stream) {
                core.api.registry.streams.set_tracks(id, self.mux.tracks());
                tracks_changed = true;
            }
        }
        if let (Some(id), true) = (self.stream, o.stream == Some(src)) {
            let at = self.ticks(now);
            let frames: Vec<Frame> = o
                .frames
                .iter()
                .filter_map(|f| self.mux.frame(i, f, at))
                .collect();
            publish(core, id, frames, tracks_changed);
        }
        if o.ended == Some(src) {
            crate::info!(
                "multiplex channel [{}]: source [{}] stopped; its renditions leave the playlists",
                key_str(&self.key),
                self.urls[i]
            );
            self.mux.source_ended(i);
            self.sources[i] = None;
            if let Some(id) = self.stream {
                core.api
                    .registry
                    .streams
                    .set_playlists(id, self.mux.playlists());
            }
        }
    }

    fn stop(&mut self, core: &mut Core) {
        if let Some(id) = self.stream.take() {
            end_stream(core, id, &self.key);
        }
    }
}

/// A source stream's tracks, each with the names a track map may give it:
/// its input name (`video`, `audio_2`) and its output profiles' encode
/// names (`bypass_video`).
fn source_names(core: &Core, id: StreamId) -> Vec<(Track, Vec<String>)> {
    let reg = &core.api.registry;
    let Some(s) = reg.streams.get(id) else {
        return Vec::new();
    };
    let tracks = s.tracks();
    let profiles = reg
        .app(&s.vhost, &s.app)
        .map(|a| a.output_profiles.output_profile.as_slice())
        .unwrap_or(&[]);
    tracks
        .iter()
        .map(|t| {
            let mut names = vec![crate::state::app::input_track_name(tracks, t)];
            for p in profiles {
                for (o, n) in crate::state::app::output_tracks(tracks, Some(p)) {
                    if o.id == t.id {
                        names.push(n);
                    }
                }
            }
            (t.clone(), names)
        })
        .collect()
}

impl Channels {
    fn owner(&mut self) -> u64 {
        self.next_owner += 1;
        OWNER_BASE + self.next_owner
    }

    /// The directories to watch: every app's schedule and mux directory.
    fn rewatch(&mut self, core: &mut Core) {
        let mut dirs = Vec::new();
        for v in core.api.registry.vhosts() {
            for a in &v.apps {
                if let Some(s) = &a.providers.schedule {
                    // The media folder is only made if missing, not read.
                    if !s.media_root_dir.is_empty() {
                        dirs.push(WatchDir {
                            dir: s.media_root_dir.clone().into(),
                            ext: "",
                            vhost: v.spec.name.clone(),
                            app: a.name.clone(),
                        });
                    }
                    if !s.schedule_files_dir.is_empty() {
                        dirs.push(WatchDir {
                            dir: s.schedule_files_dir.clone().into(),
                            ext: "sch",
                            vhost: v.spec.name.clone(),
                            app: a.name.clone(),
                        });
                    }
                }
                if let Some(m) = &a.providers.multiplex {
                    if !m.mux_files_dir.is_empty() {
                        dirs.push(WatchDir {
                            dir: m.mux_files_dir.clone().into(),
                            ext: "mux",
                            vhost: v.spec.name.clone(),
                            app: a.name.clone(),
                        });
                    }
                }
            }
        }
        if dirs == self.watched {
            return;
        }
        self.watched = dirs.clone();
        if self.watch.is_none() && !dirs.is_empty() {
            match DirWatch::start(core.waker.clone()) {
                Ok(w) => self.watch = Some(w),
                Err(e) => crate::error!("cannot start the channel files' watcher: {e}"),
            }
        }
        if let Some(w) = &self.watch {
            w.watch(dirs);
        }
    }

    /// Starts, restarts or stops the runtime of channel `k` as the table
    /// has it now.
    fn sync(&mut self, core: &mut Core, k: &ChannelKey, now: Instant) {
        self.dirty = true;
        // A new schedule for the same stream: the channel's stream and
        // timeline go on, only what it plays changes (viewers notice
        // nothing but the content).
        if let (Some(r), Some(c)) = (
            self.scheduled.get_mut(k),
            core.api.channels.scheduled.get(k),
        ) {
            if r.section == c.spec.stream {
                if let Ok(plan) = c.spec.plan() {
                    crate::info!("scheduled channel [{}]: new schedule", key_str(k));
                    r.scheduler = Scheduler::new(plan);
                    r.item = None;
                    r.playing = None;
                    return;
                }
            }
        }
        if let Some(mut r) = self.scheduled.remove(k) {
            r.stop(core);
        }
        if let Some(mut r) = self.multiplex.remove(k) {
            r.stop(core);
        }
        let media_root = core
            .api
            .registry
            .app(&k.0, &k.1)
            .and_then(|a| a.providers.schedule.as_ref())
            .map(|s| PathBuf::from(&s.media_root_dir));
        if let Some(c) = core.api.channels.scheduled.get(k).cloned() {
            if c.spec.stream.bypass_transcoder {
            } else {
                // Nothing for the operator to do: INFO, not WARN.
                crate::info!("scheduled channel [{}]: BypassTranscoder false is treated as true (kiln never transcodes)", key_str(k));
            }
            let owner = self.owner();
            match SchedRun::new(&c, media_root.unwrap_or_default(), owner) {
                Ok(r) => {
                    self.scheduled.insert(k.clone(), r);
                }
                Err(e) => crate::warn!("scheduled channel [{}]: {e}", key_str(k)),
            }
        }
        if let Some(c) = core.api.channels.multiplex.get(k).cloned() {
            let owner = self.owner();
            match MuxRun::new(&c, owner, now) {
                Ok(r) => {
                    self.multiplex.insert(k.clone(), r);
                }
                Err(e) => crate::warn!("multiplex channel [{}]: {e}", key_str(k)),
            }
        }
    }

    /// A `.sch` / `.mux` file appeared, changed or went.
    fn on_dir_event(&mut self, core: &mut Core, e: DirEvent, now: Instant) {
        let (watch, path) = match &e {
            DirEvent::Changed { watch, path, .. } | DirEvent::Removed { watch, path } => {
                (watch.clone(), path.clone())
            }
        };
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_string();
        let shown = path.display().to_string();
        let chans = &mut core.api.channels;
        let from_file = |o: &Origin| *o == Origin::File(path.clone());
        // The channel this file made, if any.
        let old: Option<ChannelKey> = if watch.ext == "sch" {
            chans
                .scheduled
                .iter()
                .find(|(_, c)| from_file(&c.origin))
                .map(|(k, _)| k.clone())
        } else {
            chans
                .multiplex
                .iter()
                .find(|(_, c)| from_file(&c.origin))
                .map(|(k, _)| k.clone())
        };
        let text = match e {
            DirEvent::Removed { .. } => {
                if let Some(k) = old {
                    crate::info!("{shown} was removed: channel [{}] ends", key_str(&k));
                    chans.scheduled.remove(&k);
                    chans.multiplex.remove(&k);
                    self.sync(core, &k, now);
                }
                return;
            }
            DirEvent::Changed { text: Err(why), .. } => {
                crate::warn!("{shown}: cannot read it: {why}; the channel stays as it was");
                return;
            }
            DirEvent::Changed { text: Ok(t), .. } => t,
        };
        let (vh, app) = (watch.vhost.clone(), watch.app.clone());
        let key = if watch.ext == "sch" {
            match ScheduleSpec::from_xml(&text, &stem) {
                Ok(mut spec) => {
                    spec.vhost = vh.clone();
                    spec.app = app.clone();
                    spec.name = stem.clone();
                    let k = (vh, app, stem);
                    if old.as_ref() != Some(&k) && (chans.has(&k.0, &k.1, &k.2)) {
                        crate::warn!(
                            "{shown}: channel [{}] already exists; the file is not applied",
                            key_str(&k)
                        );
                        return;
                    }
                    let inputs = spec.plan().map(|p| p.streams()).unwrap_or_default();
                    if let Some(l) = chans.loop_through(&k, &inputs) {
                        crate::warn!("{shown}: the channel would play its own output ({l}); the file is not applied");
                        return;
                    }
                    chans.scheduled.insert(
                        k.clone(),
                        ScheduledChannel::new(spec, Origin::File(path.clone())),
                    );
                    k
                }
                Err(e) => {
                    crate::warn!("{shown}:{e}; the channel stays as it was");
                    return;
                }
            }
        } else {
            let spec = crate::channel::mux::MuxSpec::from_xml(&text).and_then(|mut s| {
                s.vhost = vh.clone();
                s.app = app.clone();
                s.check().map_err(|m| crate::channel::xml::XmlError {
                    line: 1,
                    column: 1,
                    message: m,
                })?;
                Ok(s)
            });
            match spec {
                Ok(spec) => {
                    if spec.name != stem {
                        crate::warn!("{shown}: <OutputStream><Name> [{}] differs from the file's name; the name is used", spec.name);
                    }
                    let k = spec.key();
                    if old.as_ref() != Some(&k) && chans.has(&k.0, &k.1, &k.2) {
                        crate::warn!(
                            "{shown}: channel [{}] already exists; the file is not applied",
                            key_str(&k)
                        );
                        return;
                    }
                    let inputs = spec.check().unwrap_or_default();
                    if let Some(l) = chans.loop_through(&k, &inputs) {
                        crate::warn!("{shown}: the channel would play its own output ({l}); the file is not applied");
                        return;
                    }
                    chans.multiplex.insert(
                        k.clone(),
                        MultiplexChannel::new(spec, Origin::File(path.clone())),
                    );
                    k
                }
                Err(e) => {
                    crate::warn!("{shown}:{e}; the channel stays as it was");
                    return;
                }
            }
        };
        if let Some(o) = old.filter(|o| *o != key) {
            chans.scheduled.remove(&o);
            chans.multiplex.remove(&o);
            self.sync(core, &o, now);
        }
        crate::info!("{shown}: channel [{}] applied", key_str(&key));
        self.sync(core, &key, now);
    }
}

impl Feature for Channels {
    fn start(&mut self, core: &mut Core, now: Instant) {
        self.rewatch(core);
        let keys: Vec<ChannelKey> = (core.api.channels.scheduled.keys())
            .chain(core.api.channels.multiplex.keys())
            .cloned()
            .collect();
        for k in keys {
            self.sync(core, &k, now);
        }
    }

    fn on_ingest(&mut self, o: &IngestOutput, core: &mut Core, now: Instant) {
        if o.started.is_some() || o.ended.is_some() || o.tracks_changed {
            self.dirty = true;
        }
        if o.stream.is_none() && o.ended.is_none() {
            return;
        }
        let now_ms = crate::clock::unix_millis_now();
        for r in self.scheduled.values_mut() {
            r.on_source(core, o, now_ms);
        }
        for r in self.multiplex.values_mut() {
            r.on_source(core, o, now);
        }
    }

    fn on_effect(&mut self, effect: &Effect, core: &mut Core, now: Instant) {
        self.dirty = true;
        // An application made or changed may have channel directories.
        self.rewatch(core);
        match effect {
            Effect::ChannelChanged(k) => self.sync(core, k, now),
            Effect::RestartApp { vhost, app } => {
                let keys: Vec<ChannelKey> = (self.scheduled.keys())
                    .chain(self.multiplex.keys())
                    .chain(core.api.channels.scheduled.keys())
                    .chain(core.api.channels.multiplex.keys())
                    .filter(|k| k.0 == *vhost && app.as_ref().is_none_or(|a| k.1 == *a))
                    .cloned()
                    .collect();
                for k in keys {
                    self.sync(core, &k, now);
                }
            }
            _ => {}
        }
    }

    fn on_wake(&mut self, core: &mut Core, now: Instant) {
        // A reader may have sent frames.
        self.dirty |= !self.scheduled.is_empty();
        let events: Vec<DirEvent> = match &self.watch {
            Some(w) => w.events().collect(),
            None => return,
        };
        for e in events {
            self.on_dir_event(core, e, now);
        }
    }

    fn timeout(&mut self, _core: &mut Core, _now: Instant) {
        self.dirty = true;
    }

    /// Steps the channels when something happened (all of them) or when
    /// one is due (that one): not on every turn of the loop, so a busy
    /// ingest costs no channel anything, and one channel's frame times
    /// cost no other.
    fn drive(&mut self, core: &mut Core, now: Instant) -> Option<Instant> {
        if !self.dirty && self.next.is_none_or(|n| n > now) {
            return self.next;
        }
        let all = std::mem::take(&mut self.dirty);
        let epoch = *self.epoch.get_or_insert(now);
        let on_grid = |t: Instant| {
            let n = t
                .saturating_duration_since(epoch)
                .as_nanos()
                .div_ceil(TICK.as_nanos());
            epoch + TICK * u32::try_from(n).unwrap_or(u32::MAX)
        };
        let mut next: Option<Instant> = None;
        let mut min = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        for r in self.scheduled.values_mut() {
            if all || r.due.is_none_or(|d| d <= now) {
                r.due = r.step(core, now).map(on_grid);
            }
            min(r.due);
        }
        for r in self.multiplex.values_mut() {
            if all || r.due.is_none_or(|d| d <= now) {
                r.due = r.step(core, now).map(on_grid);
            }
            min(r.due);
        }
        self.next = next;
        next
    }
}
