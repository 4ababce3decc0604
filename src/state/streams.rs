//! Live streams: what publishers are sending right now, keyed by
//! vhost/app/name. A stream is created when a publisher starts (a second
//! publisher of a live name is refused) and removed when it stops. Each
//! stream keeps its tracks (codec, configuration, dimensions or sample
//! rate) and its last GOP, so an output that starts mid-stream begins with
//! a keyframe.
//!
//! Plain data: no sockets. The ingest glue calls in; the API reads.

use super::track_stats::TrackStats;
use crate::media::{Frame, MediaKind, Ticks, Track, TrackId};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Most bytes (and frames) kept for the last GOP; past this the cache is
/// dropped until the next keyframe.
const GOP_MAX_BYTES: usize = 32 * 1024 * 1024;
const GOP_MAX_FRAMES: usize = 4000;
/// A video track's GOP older than this behind another's keyframe (90 kHz
/// ticks: 10 s) is a rendition that stopped, not one to start on.
const STALE_GOP: i64 = 10 * crate::media::TICKS_PER_SECOND;

pub type StreamId = u64;

/// A map keyed by stream. Ids are handed out by kiln (a counter), not by
/// peers, so they need no keyed hash: a multiply spreads them, where SipHash
/// costs more than the lookup on paths taken per frame.
pub type StreamMap<V> = HashMap<StreamId, V, BuildHasherDefault<StreamIdHasher>>;

#[derive(Default)]
pub struct StreamIdHasher(u64);

impl Hasher for StreamIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used for a `StreamId`; this is the fallback.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// How the stream comes in (OME's `sourceType` spelling).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceType {
    Rtmp,
    Rtmps,
    Srt,
    MpegTs,
    /// Pulled from an RTSP server (`POST .../streams`).
    RtspPull,
    /// Pulled from an SRT listener in request mode.
    SrtPull,
    /// Pulled from an RTMP server (play).
    RtmpPull,
    /// Published over WebRTC (WHIP, OME's `direction=send`).
    WebRtc,
    /// A scheduled channel (files and live streams on a schedule).
    Scheduled,
    /// A multiplex channel (tracks of several streams).
    Multiplex,
}

impl SourceType {
    pub fn api_name(self) -> &'static str {
        match self {
            SourceType::Rtmp => "Rtmp",
            SourceType::Rtmps => "Rtmps",
            SourceType::Srt => "Srt",
            SourceType::MpegTs => "MpegTs",
            SourceType::RtspPull => "RtspPull",
            SourceType::SrtPull => "SrtPull",
            SourceType::RtmpPull => "RtmpPull",
            SourceType::WebRtc => "WebRTC",
            SourceType::Scheduled => "Scheduled",
            SourceType::Multiplex => "Multiplex",
        }
    }
}

/// A taken-over stream's timeline: the new publisher's frames are moved
/// to go on right after the stream's last decode time (its own clock
/// starts again near 0), so every output sees one timeline going forward
/// across the change of publisher.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Continue {
    after: Option<Ticks>,
    shift: Option<Ticks>,
}

impl Continue {
    /// Frames go on after `last_dts` (the stream's, when taken over).
    pub fn after(last_dts: Option<Ticks>) -> Self {
        Continue {
            after: last_dts,
            shift: None,
        }
    }

    /// Moves a frame onto the stream's timeline (the first one fixes the
    /// shift: 40 ms after the last frame before).
    pub fn apply(&mut self, f: &mut Frame) {
        let Some(after) = self.after else {
            return;
        };
        let shift = *self
            .shift
            .get_or_insert_with(|| after.saturating_add(3600).saturating_sub(f.dts));
        f.dts = f.dts.saturating_add(shift);
        f.pts = f.pts.saturating_add(shift);
    }
}

#[derive(Debug)]
pub struct LiveStream {
    pub id: StreamId,
    pub vhost: String,
    pub app: String,
    pub name: String,
    pub source: SourceType,
    /// Unix milliseconds.
    pub created_ms: i64,
    /// Opaque id of the publishing session (the loop's token).
    pub publisher: u64,
    tracks: Vec<Track>,
    gop: Vec<Frame>,
    gop_bytes: usize,
    pub frames_in: u64,
    pub bytes_in: u64,
    /// What each track's frames say (rates, keyframes, B-frames).
    track_stats: Vec<(TrackId, TrackStats)>,
    /// Input rate (the loop feeds it with each read's frames).
    pub in_rate: crate::rate::RateMeter,
    /// Who watches it, and what they were sent.
    pub audience: Audience,
    /// Named playlists of renditions (a multiplex channel's), served
    /// beside the stream's own.
    pub playlists: Vec<Playlist>,
    /// The latest decode time of any frame (where a publisher taking the
    /// stream over goes on from).
    pub last_dts: Option<Ticks>,
    /// Where the input comes from, as OME's `sourceUrl` says it
    /// (`TCP://203.0.113.5:50000` for an RTMP publisher, the URL of a
    /// pull); none when unknown.
    pub source_url: Option<String>,
    /// The RTMP or SRT publisher's address (who may take a silent
    /// stream's name back).
    pub publisher_addr: Option<std::net::SocketAddr>,
}

/// Who asks to take a live stream over: its address, and whether
/// admission (a signed policy or webhook) admitted it for the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Newcomer {
    pub ip: std::net::IpAddr,
    pub vouched: bool,
}

/// A playlist of renditions: `{file_name}.m3u8` for LL-HLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Playlist {
    pub name: String,
    pub file_name: String,
    pub renditions: Vec<Rendition>,
}

/// One variant of a playlist: a video and an audio track of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendition {
    pub name: String,
    pub video: Option<TrackId>,
    /// Its audio: the first track of its audio group.
    pub audio: Option<TrackId>,
    /// The other tracks of that group (its variant name's other languages,
    /// as OME keeps a multilingual variant one group): a player's choice
    /// of language in the rendition's `EXT-X-MEDIA` group.
    pub audio_alternates: Vec<TrackId>,
    /// Its sources are live: listed (a rendition whose source stopped is
    /// left out until it is back).
    pub live: bool,
}

/// A stream's viewers (DECISIONS 14): RTMP and SRT players while they
/// play; LL-HLS and HLS viewers as client addresses that fetched one of
/// its playlists or media in the last three target durations; and the
/// bytes sent to all of them.
#[derive(Debug, Default)]
pub struct Audience {
    pub rtmp: u64,
    pub srt: u64,
    /// Connected WebRTC viewers.
    pub webrtc: u64,
    /// (who, HLS rather than LL-HLS) -> what it fetched.
    http: HashMap<(HttpWho, bool), HttpViewer>,
    /// (address, HLS?) -> the player session last seen there and how many
    /// sessions the address has: a request without a token (a player's
    /// media) counts for that session.
    at_addr: HashMap<(std::net::IpAddr, bool), (u64, u32)>,
    /// Bytes sent to viewers (players and HTTP answers).
    pub bytes_out: u64,
    /// RTMP and SRT players, by session id (`GET .../sessions`).
    pub players: HashMap<u64, PlayerSession>,
    /// LL-HLS and HLS viewers the sessions API ended: (who, HLS?) ->
    /// until when their requests for this stream are refused.
    ended_http: HashMap<(HttpWho, bool), std::time::Instant>,
}

/// Who an LL-HLS or HLS viewer is: a player session (the token its
/// multivariant playlist gave its chunklist URIs), or, for a player that
/// carries none (given a chunklist URL directly), its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HttpWho {
    Session(u64),
    Address(std::net::IpAddr),
}

/// Most player sessions one address has per stream; past it, its new
/// players count by address.
const MAX_SESSIONS_PER_ADDRESS: u32 = 64;

/// How long an LL-HLS or HLS viewer the sessions API ended is refused
/// (its player's retries get 403 meanwhile).
pub const ENDED_HTTP_VIEWER_REFUSED: std::time::Duration = std::time::Duration::from_secs(60);
/// Most ended LL-HLS and HLS viewers remembered per stream.
const MAX_ENDED_HTTP: usize = 1024;

/// An LL-HLS or HLS viewer: an address that fetches a stream's playlists
/// and media.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpViewer {
    /// Where its last request came from, and the address it was first
    /// counted under.
    pub remote: std::net::SocketAddr,
    home: std::net::IpAddr,
    /// Its first request since it last went quiet, and its last.
    pub first: std::time::Instant,
    pub last: std::time::Instant,
    /// How long after its last request it counts as a viewer.
    pub window: std::time::Duration,
    /// Bytes sent to it since `first`.
    pub bytes: u64,
}

impl HttpViewer {
    fn watching(&self, now: std::time::Instant) -> bool {
        now.saturating_duration_since(self.last) <= self.window
    }
}

/// A viewer with a connection of its own (an RTMP or SRT player): what
/// the sessions API lists and can end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlayerSession {
    /// `rtmp` or `srt`.
    pub protocol: &'static str,
    pub remote: std::net::SocketAddr,
    pub since_ms: i64,
    /// Bytes sent to it.
    pub bytes: u64,
    /// The endpoint (the loop's token) that serves it, and which of its
    /// connections (SRT's socket id; 0 for an RTMP connection).
    pub endpoint: usize,
    pub conn: u64,
}

/// Most LL-HLS/HLS viewer addresses remembered per stream; past it, new
/// ones are sent to but not counted.
const MAX_HTTP_VIEWERS: usize = 65_536;

impl Audience {
    /// An LL-HLS (`hls` false) or HLS viewer at `peer` fetched something
    /// (`bytes` sent to it), in player session `session` when its request
    /// carried a token. Media without one (`media`: a segment, part or
    /// init section, whose URIs a chunklist writes without the token)
    /// counts for the session last seen at its address; a playlist without
    /// one is a player given the URL directly, counted by address.
    #[allow(clippy::too_many_arguments)]
    pub fn note_http(
        &mut self,
        peer: std::net::SocketAddr,
        session: Option<u64>,
        media: bool,
        hls: bool,
        window: std::time::Duration,
        bytes: u64,
        now: std::time::Instant,
    ) {
        let ip = peer.ip();
        let live = |http: &HashMap<(HttpWho, bool), HttpViewer>, t: u64| {
            http.get(&(HttpWho::Session(t), hls))
                .is_some_and(|v| v.watching(now))
        };
        let who = match session {
            Some(t)
                if self.http.contains_key(&(HttpWho::Session(t), hls))
                    || self
                        .at_addr
                        .get(&(ip, hls))
                        .is_none_or(|(_, n)| *n < MAX_SESSIONS_PER_ADDRESS) =>
            {
                HttpWho::Session(t)
            }
            Some(_) => HttpWho::Address(ip),
            None => match self.at_addr.get(&(ip, hls)) {
                Some((t, _)) if media && live(&self.http, *t) => HttpWho::Session(*t),
                _ => HttpWho::Address(ip),
            },
        };
        if let (Some(t), HttpWho::Session(_)) = (session, who) {
            if let Some(a) = self.at_addr.get_mut(&(ip, hls)) {
                a.0 = t;
            }
        }
        if let Some(v) = self.http.get_mut(&(who, hls)) {
            if !v.watching(now) {
                // Back after going quiet: a new session.
                (v.first, v.bytes) = (now, 0);
            }
            (v.last, v.window, v.remote) = (now, window, peer);
            v.bytes += bytes;
            return;
        }
        if self.http.len() >= MAX_HTTP_VIEWERS || self.http.len().is_power_of_two() {
            // Forget the viewers gone quiet (amortized: at each doubling).
            self.forget_quiet(now);
        }
        if self.http.len() < MAX_HTTP_VIEWERS {
            if let HttpWho::Session(t) = who {
                let a = self.at_addr.entry((ip, hls)).or_insert((t, 0));
                a.1 += 1;
            }
            self.http.insert(
                (who, hls),
                HttpViewer {
                    remote: peer,
                    home: ip,
                    first: now,
                    last: now,
                    window,
                    bytes,
                },
            );
        }
    }

    /// Drops the HTTP viewers gone quiet, and their sessions' count at
    /// their address.
    fn forget_quiet(&mut self, now: std::time::Instant) {
        let at_addr = &mut self.at_addr;
        self.http.retain(|(who, hls), v| {
            let keep = v.watching(now);
            if !keep && matches!(who, HttpWho::Session(_)) {
                Self::uncount(at_addr, v.home, *hls);
            }
            keep
        });
    }

    fn uncount(
        at_addr: &mut HashMap<(std::net::IpAddr, bool), (u64, u32)>,
        ip: std::net::IpAddr,
        hls: bool,
    ) {
        if let Some(a) = at_addr.get_mut(&(ip, hls)) {
            a.1 = a.1.saturating_sub(1);
            if a.1 == 0 {
                at_addr.remove(&(ip, hls));
            }
        }
    }

    /// A player's bytes (session `id`, when it is one).
    pub fn add_player_bytes(&mut self, id: u64, bytes: u64) {
        if let Some(p) = self.players.get_mut(&id) {
            p.bytes += bytes;
        }
    }

    /// LL-HLS (`hls` false) and HLS viewers now: (who, HLS?, what it
    /// fetched), as the sessions API lists them.
    pub fn http_list(
        &self,
        now: std::time::Instant,
    ) -> impl Iterator<Item = (HttpWho, bool, &HttpViewer)> + '_ {
        self.http
            .iter()
            .filter(move |(_, v)| v.watching(now))
            .map(|((who, hls), v)| (*who, *hls, v))
    }

    /// Ends an LL-HLS or HLS viewer (the sessions API): it is no longer
    /// counted and its requests for this stream (a session's: those with
    /// its token) are refused for [`ENDED_HTTP_VIEWER_REFUSED`]. False when
    /// it is not a viewer now.
    pub fn end_http(&mut self, who: HttpWho, hls: bool, now: std::time::Instant) -> bool {
        let Some(v) = self.http.remove(&(who, hls)) else {
            return false;
        };
        if matches!(who, HttpWho::Session(_)) {
            Self::uncount(&mut self.at_addr, v.home, hls);
        }
        if !v.watching(now) {
            return false;
        }
        self.ended_http.retain(|_, until| *until > now);
        if self.ended_http.len() < MAX_ENDED_HTTP {
            self.ended_http
                .insert((who, hls), now + ENDED_HTTP_VIEWER_REFUSED);
        }
        true
    }

    /// Is this LL-HLS or HLS request refused now (its viewer ended through
    /// the API)? A request with a session's token answers for that
    /// session, one without for its address.
    pub fn is_ended_http(
        &self,
        ip: std::net::IpAddr,
        session: Option<u64>,
        hls: bool,
        now: std::time::Instant,
    ) -> bool {
        let who = session.map_or(HttpWho::Address(ip), HttpWho::Session);
        !self.ended_http.is_empty()
            && self
                .ended_http
                .get(&(who, hls))
                .is_some_and(|until| *until > now)
    }

    /// (LL-HLS, HLS) viewers now.
    pub fn http_viewers(&self, now: std::time::Instant) -> (u64, u64) {
        let mut counts = (0, 0);
        for ((_, hls), v) in &self.http {
            if v.watching(now) {
                if *hls {
                    counts.1 += 1;
                } else {
                    counts.0 += 1;
                }
            }
        }
        counts
    }
}

impl LiveStream {
    pub fn tracks(&self) -> &[Track] {
        &self.tracks
    }

    pub fn track(&self, id: TrackId) -> Option<&Track> {
        self.tracks.iter().find(|t| t.id == id)
    }

    /// Frames from the last video keyframe on (empty until one arrived).
    pub fn gop(&self) -> &[Frame] {
        &self.gop
    }

    /// What `track`'s frames said so far (none before its first frame).
    pub fn track_stats(&self, track: TrackId) -> Option<&TrackStats> {
        self.track_stats
            .iter()
            .find(|(t, _)| *t == track)
            .map(|(_, s)| s)
    }

    fn has_video(&self) -> bool {
        self.tracks.iter().any(|t| t.kind() == MediaKind::Video)
    }
}

/// Why a stream could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishError {
    /// Another publisher sends this name now.
    AlreadyPublishing,
    /// The name breaks the name rules (`vhost::STREAM_NAME_RULE`).
    InvalidName,
}

#[derive(Debug, Default)]
pub struct Streams {
    streams: StreamMap<LiveStream>,
    next_id: StreamId,
    /// The last player session id given (ids are never reused).
    last_session: u64,
}

impl Streams {
    /// A player joins `stream`'s audience: its session id (0 when the
    /// stream is gone).
    pub fn open_player(&mut self, stream: StreamId, player: PlayerSession) -> u64 {
        let Some(s) = self.streams.get_mut(&stream) else {
            return 0;
        };
        self.last_session += 1;
        s.audience.players.insert(self.last_session, player);
        self.last_session
    }

    /// A player left (session `id` of `stream`).
    pub fn close_player(&mut self, stream: StreamId, id: u64) {
        if let Some(a) = self.audience_mut(stream) {
            a.players.remove(&id);
        }
    }

    /// Starts a stream; refused when the name is live.
    pub fn start(
        &mut self,
        vhost: &str,
        app: &str,
        name: &str,
        source: SourceType,
        publisher: u64,
        now_ms: i64,
    ) -> Result<StreamId, PublishError> {
        if !super::vhost::valid_name(name) {
            return Err(PublishError::InvalidName);
        }
        if self.find(vhost, app, name).is_some() {
            return Err(PublishError::AlreadyPublishing);
        }
        self.next_id += 1;
        let id = self.next_id;
        self.streams.insert(
            id,
            LiveStream {
                id,
                vhost: vhost.to_string(),
                app: app.to_string(),
                name: name.to_string(),
                source,
                created_ms: now_ms,
                publisher,
                tracks: Vec::new(),
                gop: Vec::new(),
                gop_bytes: 0,
                frames_in: 0,
                bytes_in: 0,
                track_stats: Vec::new(),
                source_url: None,
                publisher_addr: None,
                in_rate: Default::default(),
                audience: Audience::default(),
                playlists: Vec::new(),
                last_dts: None,
            },
        );
        Ok(id)
    }

    /// May a new RTMP or SRT publisher take live stream `id` over? Only an
    /// RTMP(S) or SRT publisher's stream is taken (not a pull's, a
    /// channel's or a WebRTC session's). Any newcomer when the application
    /// does not keep names for live publishers (`blocks` false: OME's
    /// `BlockDuplicateStreamName`). Otherwise only once the publisher has
    /// sent nothing for `silence` (a connection that died without a
    /// close), and only by a newcomer from the publisher's own address or
    /// one admission vouched for (a signed policy or webhook admitted it
    /// for this name): another address waits for the stream to time out.
    pub fn may_take_over(
        &self,
        id: StreamId,
        blocks: bool,
        silence: std::time::Duration,
        (now, now_ms): (std::time::Instant, i64),
        newcomer: Newcomer,
    ) -> bool {
        let Some(s) = self.streams.get(&id) else {
            return false;
        };
        if !matches!(
            s.source,
            SourceType::Rtmp | SourceType::Rtmps | SourceType::Srt
        ) {
            return false;
        }
        // Silent since its last frame, or since it started if none came.
        let silent = match s.in_rate.last_at() {
            Some(at) => now.saturating_duration_since(at) >= silence,
            None => now_ms.saturating_sub(s.created_ms) >= silence.as_millis() as i64,
        };
        let known = newcomer.vouched || s.publisher_addr.map(|a| a.ip()) == Some(newcomer.ip);
        !blocks || (silent && known)
    }

    /// A new publisher takes live stream `id` over (its old one is gone
    /// silent, or the application lets any newcomer in): the stream, its
    /// viewers and outputs stay; the old publisher (returned) is to be
    /// closed without ending it.
    pub fn take_over(&mut self, id: StreamId, source: SourceType, publisher: u64) -> Option<u64> {
        let s = self.streams.get_mut(&id)?;
        let old = s.publisher;
        s.publisher = publisher;
        s.source = source;
        Some(old)
    }

    pub fn end(&mut self, id: StreamId) -> Option<LiveStream> {
        self.streams.remove(&id)
    }

    pub fn get(&self, id: StreamId) -> Option<&LiveStream> {
        self.streams.get(&id)
    }

    /// Who watches stream `id`.
    pub fn audience_mut(&mut self, id: StreamId) -> Option<&mut Audience> {
        self.streams.get_mut(&id).map(|s| &mut s.audience)
    }

    pub fn find(&self, vhost: &str, app: &str, name: &str) -> Option<&LiveStream> {
        self.streams
            .values()
            .find(|s| s.vhost == vhost && s.app == app && s.name == name)
    }

    /// Every live stream, in no order.
    pub fn iter(&self) -> impl Iterator<Item = &LiveStream> {
        self.streams.values()
    }

    /// Every live stream, oldest first.
    pub fn oldest_first(&self) -> Vec<&LiveStream> {
        let mut v: Vec<&LiveStream> = self.streams.values().collect();
        v.sort_unstable_by_key(|s| s.id);
        v
    }

    /// Live streams of an application, oldest first.
    /// The streams of an app whose tracks are known, in start order: what
    /// the API shows (a stream without tracks yet is not listed, whatever
    /// its protocol).
    pub fn shown_of_app(&self, vhost: &str, app: &str) -> Vec<&LiveStream> {
        let mut v = self.of_app(vhost, app);
        v.retain(|s| !s.tracks.is_empty());
        v
    }

    pub fn of_app(&self, vhost: &str, app: &str) -> Vec<&LiveStream> {
        let mut v: Vec<&LiveStream> = self
            .streams
            .values()
            .filter(|s| s.vhost == vhost && s.app == app)
            .collect();
        v.sort_unstable_by_key(|s| s.id);
        v
    }

    /// Ids of the streams of an app (or of every app of a host when `app`
    /// is `None`), for ending them.
    pub fn ids_of(&self, vhost: &str, app: Option<&str>) -> Vec<StreamId> {
        self.streams
            .values()
            .filter(|s| s.vhost == vhost && app.is_none_or(|a| s.app == a))
            .map(|s| s.id)
            .collect()
    }

    pub fn len(&self) -> usize {
        self.streams.len()
    }

    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// Sets (or changes) the stream's tracks. A changed codec configuration
    /// drops the cached GOP (it was encoded with the old one).
    pub fn set_tracks(&mut self, id: StreamId, tracks: Vec<Track>) {
        if let Some(s) = self.streams.get_mut(&id) {
            if s.tracks != tracks {
                s.tracks = tracks;
                s.gop.clear();
                s.gop_bytes = 0;
            }
        }
    }

    /// Relabels the stream's tracks (the same tracks, other labels: its
    /// cached GOP stays).
    pub fn set_labels(&mut self, id: StreamId, labels: Vec<crate::media::TrackLabel>) {
        if let Some(s) = self.streams.get_mut(&id) {
            for (t, l) in s.tracks.iter_mut().zip(labels) {
                t.label = l;
            }
        }
    }

    /// An RTMP or SRT publisher's address: the stream's `sourceUrl`
    /// (`{scheme}://{addr}`, as OME writes it) and who publishes.
    pub fn set_publisher_addr(&mut self, id: StreamId, scheme: &str, addr: std::net::SocketAddr) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.source_url = Some(format!("{scheme}://{addr}"));
            s.publisher_addr = Some(addr);
        }
    }

    pub fn set_playlists(&mut self, id: StreamId, playlists: Vec<Playlist>) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.playlists = playlists;
        }
    }

    /// Feeds the input rate meter with one read's bytes.
    pub fn note_input(&mut self, id: StreamId, bytes: u64, now: std::time::Instant) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.in_rate.add(bytes, now);
        }
    }

    /// Records a frame: counters and the GOP cache.
    pub fn on_frame(&mut self, id: StreamId, frame: &Frame) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        s.frames_in += 1;
        s.bytes_in += frame.data.len() as u64;
        s.last_dts = Some(s.last_dts.map_or(frame.dts, |d| d.max(frame.dts)));
        match s.track_stats.iter_mut().find(|(t, _)| *t == frame.track) {
            Some((_, stats)) => stats.on_frame(frame),
            None => {
                let mut stats = TrackStats::default();
                stats.on_frame(frame);
                s.track_stats.push((frame.track, stats));
            }
        }
        let kind = s.track(frame.track).map(|t| t.kind());
        let is_video = kind == Some(MediaKind::Video);
        if is_video && frame.keyframe {
            // Each video track (a rendition of a ladder) keeps its frames
            // from its own latest keyframe: the renditions' keyframes of
            // one moment come one after another, and clearing the cache on
            // each left only the last one's, so a new output of the first
            // rendition (or a viewer pinned to another) started without a
            // keyframe. What no video track's GOP covers any more goes.
            let videos: Vec<TrackId> = s
                .tracks
                .iter()
                .filter(|t| t.kind() == MediaKind::Video)
                .map(|t| t.id)
                .collect();
            let video = |t: TrackId| videos.contains(&t);
            // This track's old GOP goes, and a rendition that stopped (a
            // paused simulcast layer): its first frame here, its keyframe,
            // is STALE_GOP behind this one.
            let stale = frame.dts - STALE_GOP;
            let mut seen: Vec<TrackId> = Vec::new();
            let mut dropped = vec![frame.track];
            for f in &s.gop {
                if video(f.track) && !seen.contains(&f.track) {
                    seen.push(f.track);
                    if f.dts < stale {
                        dropped.push(f.track);
                    }
                }
            }
            s.gop.retain(|f| !dropped.contains(&f.track));
            let start = s
                .gop
                .iter()
                .filter(|f| video(f.track))
                .map(|f| f.dts)
                .fold(frame.dts, i64::min);
            s.gop.retain(|f| video(f.track) || f.dts >= start);
            s.gop_bytes = s.gop.iter().map(|f| f.data.len()).sum();
        } else if s.gop.is_empty() && s.has_video() {
            // Nothing before the first keyframe is useful to a new output.
            return;
        }
        if !s.has_video() && frame.keyframe && s.gop_bytes > 256 * 1024 {
            // Audio only: keep a short tail.
            s.gop.clear();
            s.gop_bytes = 0;
        }
        if s.gop.len() >= GOP_MAX_FRAMES || s.gop_bytes + frame.data.len() > GOP_MAX_BYTES {
            s.gop.clear();
            s.gop_bytes = 0;
            return;
        }
        s.gop_bytes += frame.data.len();
        s.gop.push(frame.clone());
    }
}

/// What one read turn produced for the rest of the server.
#[derive(Debug, Default)]
/// What an ingest endpoint did to its stream in one turn: the loop hands
/// it to the stream's outputs (push sessions).
pub struct IngestOutput {
    /// The stream the frames and tracks belong to.
    pub stream: Option<StreamId>,
    /// Frames for the stream's outputs, in order.
    pub frames: Vec<Frame>,
    /// The stream's tracks changed (new outputs must restart their muxers).
    pub tracks_changed: bool,
    /// A stream started or ended.
    pub started: Option<StreamId>,
    pub ended: Option<StreamId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn players_behind_one_address_are_sessions_of_their_own() {
        let mut a = Audience::default();
        let now = std::time::Instant::now();
        let w = std::time::Duration::from_secs(3);
        let p1: std::net::SocketAddr = "192.0.2.7:50001".parse().unwrap();
        let p2: std::net::SocketAddr = "192.0.2.7:50002".parse().unwrap();
        a.note_http(p1, Some(1), false, false, w, 100, now);
        a.note_http(p2, Some(2), false, false, w, 200, now);
        // A request without a token (a part) counts for the session last
        // seen at its address.
        a.note_http(p2, None, true, false, w, 50, now);
        let mut rows: Vec<(HttpWho, u64)> =
            a.http_list(now).map(|(w, _, v)| (w, v.bytes)).collect();
        rows.sort_by_key(|(w, _)| format!("{w:?}"));
        assert_eq!(
            rows,
            [(HttpWho::Session(1), 100), (HttpWho::Session(2), 250)]
        );
        assert_eq!(a.http_viewers(now), (2, 0));
        // Ending one refuses its token only.
        assert!(a.end_http(HttpWho::Session(1), false, now));
        assert!(a.is_ended_http(p1.ip(), Some(1), false, now));
        assert!(!a.is_ended_http(p1.ip(), Some(2), false, now));
        assert!(!a.is_ended_http(p1.ip(), None, false, now));
        assert_eq!(a.http_viewers(now), (1, 0));
        // A playlist without a token is a player of its own, by address,
        // even where sessions are.
        a.note_http(p2, None, false, false, w, 5, now);
        assert!(a
            .http_list(now)
            .any(|(who, _, v)| who == HttpWho::Address(p2.ip()) && v.bytes == 5));
        assert!(a.end_http(HttpWho::Address(p2.ip()), false, now));
        // A player without a token: by address, as before.
        let other: std::net::SocketAddr = "198.51.100.1:4000".parse().unwrap();
        a.note_http(other, None, false, false, w, 10, now);
        assert!(a
            .http_list(now)
            .any(|(who, _, _)| who == HttpWho::Address(other.ip())));
        // One address has a share of sessions; past it, its new players
        // count by address.
        for t in 100..100 + u64::from(MAX_SESSIONS_PER_ADDRESS) + 5 {
            a.note_http(p1, Some(t), false, false, w, 1, now);
        }
        let sessions = a
            .http_list(now)
            .filter(|(who, _, v)| matches!(who, HttpWho::Session(_)) && v.remote.ip() == p1.ip())
            .count();
        assert_eq!(sessions, MAX_SESSIONS_PER_ADDRESS as usize);
        // Gone quiet: forgotten, and the address's share with them.
        let later = now + std::time::Duration::from_secs(10);
        a.forget_quiet(later);
        assert!(a.at_addr.is_empty());
        assert_eq!(a.http_viewers(later), (0, 0));
    }
    use crate::media::{Codec, CodecConfig, VideoParams};
    use bytes::Bytes;

    #[test]
    fn a_silent_or_unblocked_publishers_stream_is_taken_over_and_goes_on_in_time() {
        use std::time::{Duration, Instant};
        let mut s = Streams::default();
        let t0 = Instant::now();
        let ms0 = 1_000_000;
        let id = s.start("v", "a", "cam", SourceType::Rtmp, 7, ms0).unwrap();
        let home: std::net::SocketAddr = "192.0.2.1:50000".parse().unwrap();
        s.set_publisher_addr(id, "TCP", home);
        let own = Newcomer {
            ip: home.ip(),
            vouched: false,
        };
        let other = Newcomer {
            ip: "198.51.100.7".parse().unwrap(),
            vouched: false,
        };
        let admitted = Newcomer {
            vouched: true,
            ..other
        };
        let two = Duration::from_secs(2);
        // Just started, nothing yet: its own for 2 s.
        assert!(!s.may_take_over(id, true, two, (t0, ms0 + 500), own));
        assert!(s.may_take_over(id, true, two, (t0, ms0 + 2500), own));
        s.note_input(id, 100, t0);
        assert!(!s.may_take_over(id, true, two, (t0 + Duration::from_secs(1), ms0), own));
        let silent = (t0 + Duration::from_secs(3), ms0);
        assert!(s.may_take_over(id, true, two, silent, own));
        // Silent, but another address: it waits for the stream to time
        // out, unless admission vouched for it.
        assert!(!s.may_take_over(id, true, two, silent, other));
        assert!(s.may_take_over(id, true, two, silent, admitted));
        // Not blocking: anyone, at once.
        assert!(s.may_take_over(id, false, two, (t0, ms0), other));
        assert_eq!(s.take_over(id, SourceType::Srt, 9), Some(7));
        assert_eq!(
            s.get(id).map(|l| (l.publisher, l.source)),
            Some((9, SourceType::Srt))
        );
        // A channel's stream is never taken.
        let ch = s
            .start("v", "a", "tv", SourceType::Scheduled, 3, ms0)
            .unwrap();
        assert!(!s.may_take_over(ch, false, two, (t0, ms0 + 10_000), admitted));
        // The newcomer's frames follow the stream's last one.
        let frame = |dts: i64| Frame {
            track: 1,
            pts: dts + 3000,
            dts,
            keyframe: false,
            data: Bytes::from_static(b"x"),
        };
        let mut c = Continue::after(Some(900_000));
        let (mut a, mut b) = (frame(0), frame(3600));
        c.apply(&mut a);
        c.apply(&mut b);
        assert_eq!((a.dts, a.pts, b.dts), (903_600, 906_600, 907_200));
        let mut none = Continue::default();
        let mut f = frame(5);
        none.apply(&mut f);
        assert_eq!(f.dts, 5);
    }

    fn video_track() -> Track {
        Track {
            id: 1,
            codec: Codec::H264,
            config: CodecConfig::None,
            video: Some(VideoParams::default()),
            audio: None,
            bitrate: 0,
            label: Default::default(),
        }
    }

    fn frame(key: bool, pts: i64) -> Frame {
        Frame {
            track: 1,
            pts,
            dts: pts,
            keyframe: key,
            data: Bytes::from_static(b"x"),
        }
    }

    #[test]
    fn second_publisher_is_refused() {
        let mut s = Streams::default();
        let id = s.start("v", "a", "cam", SourceType::Rtmp, 1, 0).unwrap();
        assert_eq!(
            s.start("v", "a", "cam", SourceType::Srt, 2, 0),
            Err(PublishError::AlreadyPublishing)
        );
        assert!(s.start("v", "a", "cam2", SourceType::Srt, 2, 0).is_ok());
        s.end(id);
        assert!(s.start("v", "a", "cam", SourceType::Srt, 3, 0).is_ok());
    }

    #[test]
    fn gop_starts_at_keyframe() {
        let mut s = Streams::default();
        let id = s.start("v", "a", "cam", SourceType::Rtmp, 1, 0).unwrap();
        s.set_tracks(id, vec![video_track()]);
        s.on_frame(id, &frame(false, 0));
        assert!(s.get(id).unwrap().gop().is_empty());
        s.on_frame(id, &frame(true, 1));
        s.on_frame(id, &frame(false, 2));
        assert_eq!(s.get(id).unwrap().gop().len(), 2);
        s.on_frame(id, &frame(true, 3));
        assert_eq!(s.get(id).unwrap().gop().len(), 1);
        assert_eq!(s.get(id).unwrap().frames_in, 4);
    }

    /// A ladder's renditions each keep their GOP from their own keyframe,
    /// whatever order one moment's keyframes come in; audio from the
    /// earliest of them.
    #[test]
    fn every_rendition_keeps_its_own_keyframe() {
        let mut s = Streams::default();
        let id = s.start("v", "a", "ladder", SourceType::Rtmp, 1, 0).unwrap();
        let audio = Track {
            id: 9,
            codec: Codec::Aac,
            video: None,
            audio: Some(crate::media::AudioParams::default()),
            ..video_track()
        };
        s.set_tracks(
            id,
            vec![
                video_track(),
                Track {
                    id: 2,
                    ..video_track()
                },
                Track {
                    id: 3,
                    ..video_track()
                },
                audio,
            ],
        );
        let at = |track, key, pts| Frame {
            track,
            ..frame(key, pts)
        };
        for base in [0, 100] {
            // One moment's keyframes, the last rendition's first.
            for (t, key) in [(3, true), (9, true), (1, true), (2, true)] {
                s.on_frame(id, &at(t, key, base));
            }
            for pts in base + 1..base + 5 {
                for t in [1, 2, 3, 9] {
                    s.on_frame(id, &at(t, t == 9, pts));
                }
            }
        }
        let gop = s.get(id).unwrap().gop();
        for t in [1, 2, 3] {
            let first = gop.iter().find(|f| f.track == t).unwrap();
            assert!(first.keyframe && first.pts == 100, "track {t}: {first:?}");
            assert_eq!(gop.iter().filter(|f| f.track == t).count(), 5);
        }
        assert!(gop.iter().all(|f| f.pts >= 100), "{gop:?}");
        assert_eq!(gop.iter().filter(|f| f.track == 9).count(), 5);
    }
}
