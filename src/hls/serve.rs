//! Viewer requests (DECISIONS section 9): OME's URLs under
//! `/{app}/{stream}/`, the vhost by `Host`, blocking playlist reloads and
//! preload-hinted parts answered the moment they exist (the request is
//! parked in the loop, no thread, no polling), 400 for more than two
//! segments ahead, 503 after three target durations. Sans-IO: a request and
//! `now` in, a reply or "wait for this stream" out.
//!
//! Where the virtual host's signed policy or admission webhook covers
//! `llhls` or `hls`, the entry playlist (`llhls.m3u8`, `playlist.m3u8`)
//! must be admitted ([`Answer::Admit`]: the connection asks the
//! admission feature); an admitted viewer gets a session, and every URL in
//! the playlists it is served carries `?session={id}_{key}` (OME's
//! scheme). Any other file without a live session of the same stream: 401.

use super::manager::HlsManager;
use super::memory::Shared;
use super::playlist::{self, File};
use super::ts::TsFile;
use super::TrackOutput;
use crate::clock::Now;
use crate::http::host::{host_without_port, origin_matches};
use crate::http::Request;
use crate::media::MediaKind;
use crate::state::streams::StreamId;
use crate::state::vhost::Protocol;
use crate::state::Registry;
use bytes::Bytes;
use std::time::{Duration, Instant};

pub const PLAYLIST: &str = "application/vnd.apple.mpegurl";

/// A `Cache-Control` header (OME's max-age rules: 0 is `no-cache,
/// no-store`, negative is no header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cache {
    Absent,
    NoStore,
    MaxAge(u32),
}

impl Cache {
    pub fn from_max_age(seconds: i32) -> Self {
        match seconds {
            0 => Cache::NoStore,
            s if s > 0 => Cache::MaxAge(s as u32),
            _ => Cache::Absent,
        }
    }

    /// Appends the `Cache-Control` header line, if there is one.
    pub fn push_header(self, head: &mut String) {
        match self {
            Cache::Absent => {}
            Cache::NoStore => head.push_str("Cache-Control: no-cache, no-store\r\n"),
            Cache::MaxAge(s) => {
                head.push_str("Cache-Control: max-age=");
                crate::http::response::push_decimal(head, u64::from(s));
                head.push_str("\r\n");
            }
        }
    }
}

/// `Cache-Control` per kind of LL-HLS file (`<LLHLS><CacheControl>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachePolicy {
    pub master: Cache,
    pub chunklist: Cache,
    /// A chunklist asked for with `_HLS_msn` (a blocking reload).
    pub blocking_chunklist: Cache,
    pub segment: Cache,
    pub part: Cache,
}

// The model holds the settings; what they mean for a reply is said here.
impl crate::state::app::CacheControlSpec {
    /// OME's defaults where unset: master and chunklists 0, blocking
    /// chunklists 60, segments and parts -1.
    pub fn resolved(&self) -> CachePolicy {
        let c = |v: Option<i32>, default: i32| Cache::from_max_age(v.unwrap_or(default));
        CachePolicy {
            master: c(self.master_playlist_max_age, 0),
            chunklist: c(self.chunklist_max_age, 0),
            blocking_chunklist: c(self.chunklist_with_directives_max_age, 60),
            segment: c(self.segment_max_age, -1),
            part: c(self.partial_segment_max_age, -1),
        }
    }
}

impl Default for CachePolicy {
    fn default() -> Self {
        crate::state::app::CacheControlSpec::default().resolved()
    }
}

/// What a viewer gets.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub cache: Cache,
    /// `Access-Control-Allow-Origin` (none: no CORS headers).
    pub allow_origin: Option<String>,
    /// Shared with every viewer of the same file (a segment: its parts).
    pub body: Vec<Shared>,
    /// A stream's playlist or media was served: the viewer to count.
    pub viewer: Option<ViewerMark>,
}

/// Which stream a served file belongs to, for its viewer statistics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ViewerMark {
    pub stream: StreamId,
    /// HLS (MPEG-TS) rather than LL-HLS.
    pub hls: bool,
    /// The player's session, when the request carries a token kiln issued
    /// (`session=`, written by the multivariant playlist it was given).
    pub session: Option<u64>,
    /// How long the viewer counts after this request: three target
    /// durations.
    pub window: Duration,
}

impl Reply {
    pub fn len(&self) -> usize {
        self.body.iter().map(|b| b.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.body.iter().all(|b| b.is_empty())
    }
}

impl Reply {
    pub fn error(status: u16, text: &str) -> Self {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            cache: Cache::NoStore,
            allow_origin: None,
            body: vec![Bytes::from(format!("{text}\n")).into()],
            viewer: None,
        }
    }

    fn playlist(text: String, cache: Cache) -> Self {
        Reply::media(PLAYLIST, cache, vec![Bytes::from(text).into()])
    }

    fn media(content_type: &'static str, cache: Cache, body: Vec<Shared>) -> Self {
        Reply {
            status: 200,
            content_type,
            cache,
            allow_origin: None,
            body,
            viewer: None,
        }
    }
}

#[derive(Debug)]
pub enum Answer {
    Reply(Reply),
    /// Park the request until `stream` has a new part (or `until`).
    Wait {
        stream: StreamId,
        until: Instant,
    },
    /// A DVR segment on disk: read it (off the loop, once for every
    /// viewer asking), then answer again; 503 after `until`.
    Read {
        stream: StreamId,
        key: super::dvr::ReadKey,
        path: std::path::PathBuf,
        until: Instant,
    },
    /// An entry playlist under access control: admit the viewer (signed
    /// policy, webhook), then answer again with its session.
    Admit {
        protocol: Protocol,
        vhost: String,
        app: String,
        stream: String,
    },
    /// An entry playlist of a stream that is not live, on a host with
    /// origins or an origin map: pull it, then answer again.
    Pull {
        vhost: String,
        app: String,
        stream: String,
    },
}

/// The viewer sessions of access control (the admission feature keeps
/// them).
pub trait ViewerSessions {
    /// The stream (vhost, app, name) a `?session=` value was admitted to,
    /// or why it is refused.
    fn use_viewer(
        &mut self,
        session: Option<&str>,
        now: Now,
    ) -> Result<(String, String, String), String>;
}

/// What access control needs from a viewer request.
pub struct Gate<'a> {
    pub sessions: &'a mut dyn ViewerSessions,
    pub wall: Now,
    /// The session an admission just opened for this request, and the
    /// stream it was admitted to (a webhook's `new_url` may name another).
    pub admitted: Option<(&'a str, &'a (String, String, String))>,
}

fn query<'a>(target: &'a str, name: &str) -> Option<&'a str> {
    let (_, q) = target.split_once('?')?;
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then_some(v)
    })
}

/// The delivery directives of a chunklist request (`_HLS_msn`,
/// `_HLS_part`, `_HLS_skip`), read in one pass over the query; the first
/// of a repeated name counts, as [`query`] takes it.
#[derive(Default)]
struct Reload<'a> {
    msn: Option<&'a str>,
    part: Option<&'a str>,
    skip: Option<&'a str>,
    rewind: Option<&'a str>,
}

impl<'a> Reload<'a> {
    /// `_HLS_rewind` (OME's): the whole DVR window unless `NO`.
    fn rewind(&self) -> bool {
        !self.rewind.is_some_and(|r| r.eq_ignore_ascii_case("NO"))
    }

    fn of(target: &'a str) -> Self {
        let mut r = Reload::default();
        let Some((_, q)) = target.split_once('?') else {
            return r;
        };
        for kv in q.split('&') {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let slot = match k {
                "_HLS_msn" => &mut r.msn,
                "_HLS_part" => &mut r.part,
                "_HLS_skip" => &mut r.skip,
                "_HLS_rewind" => &mut r.rewind,
                _ => continue,
            };
            slot.get_or_insert(v);
        }
        r
    }
}

/// The `Access-Control-Allow-Origin` for a request: any origin where the
/// application sets no `CrossDomains`, else the request's `Origin` when an
/// entry allows it (the API's patterns, no credentials), else none.
fn allow_origin(req: &Request, cross_domains: Option<&[String]>) -> Option<String> {
    match cross_domains {
        None => Some("*".into()),
        Some(list) if list.iter().any(|d| d == "*") => Some("*".into()),
        Some(list) => {
            let origin = req.header_str("origin")?;
            list.iter()
                .any(|d| origin_matches(d, origin))
                .then(|| origin.to_string())
        }
    }
}

/// Answers a viewer's request. `parked`: when the request was first
/// parked (a blocking reload asked again after a wake-up).
pub fn answer(
    req: &Request,
    hls: &HlsManager,
    reg: &Registry,
    now: Instant,
    parked: Option<Instant>,
    utc_offset: i32,
    gate: Gate<'_>,
) -> Answer {
    let host = host_without_port(req.header_str("host").unwrap_or(""));
    let Some(vhost) = reg.vhost_serving(host) else {
        return with_origin(
            Reply::error(404, "No virtual host serves this host name"),
            Some("*".into()),
        );
    };
    let mut parts = req.path().trim_start_matches('/').splitn(3, '/');
    let (Some(app), Some(stream), Some(file)) = (parts.next(), parts.next(), parts.next()) else {
        return with_origin(Reply::error(404, "Not found"), Some("*".into()));
    };
    let spec = reg.app(&vhost.spec.name, app);
    let is_ts = super::ts::parse_file(file).is_some();
    let publishers = spec.map(|a| &a.publishers);
    let origins = if is_ts {
        publishers.and_then(|p| p.hls.as_ref()?.cross_domains.as_deref())
    } else {
        publishers.and_then(|p| p.llhls.as_ref()?.cross_domains.as_deref())
    }
    // The host's own list (OME's vhost `<CrossDomains>`) where the app has
    // none.
    .or(vhost.spec.cross_domains.as_ref().map(|c| &c.urls[..]));
    let origin = allow_origin(req, origins);
    let cache = publishers
        .and_then(|p| p.llhls.as_ref()?.cache_control)
        .map(|c| c.resolved())
        .unwrap_or_default();
    match req.method() {
        "GET" | "HEAD" => {}
        "OPTIONS" => {
            let preflight = Reply {
                status: 204,
                content_type: "text/plain",
                cache: Cache::Absent,
                allow_origin: None,
                body: Vec::new(),
                viewer: None,
            };
            return with_origin(preflight, origin);
        }
        _ => return with_origin(Reply::error(405, "Method not allowed"), origin),
    }
    let protocol = if is_ts {
        Protocol::Hls
    } else {
        Protocol::Llhls
    };
    let controlled = vhost
        .spec
        .signed_policy
        .as_ref()
        .is_some_and(|p| protocol.enabled_in(&p.enables))
        || vhost
            .spec
            .admission_webhooks
            .as_ref()
            .is_some_and(|w| protocol.enabled_in(&w.enables));
    // Under access control the session names the stream served.
    let (session, served) = if !controlled {
        (None, None)
    } else if is_entry(file) {
        match gate.admitted {
            Some((s, t)) => (Some(s.to_string()), Some(t.clone())),
            None => {
                return Answer::Admit {
                    protocol,
                    vhost: vhost.spec.name.clone(),
                    app: app.to_string(),
                    stream: stream.to_string(),
                }
            }
        }
    } else {
        let value = query(req.target(), "session");
        match gate.sessions.use_viewer(value, gate.wall) {
            Ok(t) => (value.map(str::to_string), Some(t)),
            Err(e) => return with_origin(Reply::error(401, &e), origin),
        }
    };
    let target = match &served {
        Some((v, a, s)) => Target {
            vhost: v,
            app: a,
            stream: s,
            file,
            cache,
            player_tokens: !controlled,
        },
        None => Target {
            vhost: &vhost.spec.name,
            app,
            stream,
            file,
            cache,
            player_tokens: !controlled,
        },
    };
    let entry = is_entry(file);
    if entry
        && reg
            .output_stream(target.vhost, target.app, target.stream)
            .is_none()
        && reg
            .vhost(target.vhost)
            .is_some_and(|v| v.spec.origins.is_some() || v.spec.origin_map_store.is_some())
    {
        return Answer::Pull {
            vhost: target.vhost.to_string(),
            app: target.app.to_string(),
            stream: target.stream.to_string(),
        };
    }
    match answer_file(req, &target, hls, reg, now, parked, utc_offset) {
        Answer::Reply(r) => match session {
            Some(s) if r.status == 200 && r.content_type == PLAYLIST => {
                with_origin(with_session(r, &s), origin)
            }
            _ => with_origin(r, origin),
        },
        other => other,
    }
}

/// How long a viewer waits for a DVR segment to be read from disk.
const DVR_READ_WAIT: Duration = Duration::from_secs(10);

/// A part asked for ahead of the next one is waited for only this far
/// into a segment (more would be a segment many times the target).
const MAX_PARTS_AHEAD: usize = 64;

/// A playlist a player starts from (what access control admits): the
/// LL-HLS and HLS masters and a stream's named playlists (`abr.m3u8`).
fn is_entry(file: &str) -> bool {
    file == "llhls.m3u8"
        || file == "playlist.m3u8"
        || (file.ends_with(".m3u8")
            && !file.starts_with("chunklist_")
            && super::ts::parse_file(file).is_none())
}

/// A playlist whose every URL carries `session={token}`.
fn with_session(r: Reply, token: &str) -> Reply {
    let text: Vec<u8> = r
        .body
        .iter()
        .flat_map(|b| b.bytes.iter().copied())
        .collect();
    let body = add_session(&text, token);
    Reply {
        body: vec![Bytes::from(body).into()],
        ..r
    }
}

/// Inserts `?session=` after every URL in a playlist (`&session=` where
/// the URL has a query already).
pub fn add_session(text: &[u8], token: &str) -> Vec<u8> {
    add_query(text, &format!("session={token}"))
}

/// Appends `query` to every URL of a playlist: each line that is not a
/// tag, and each quoted `URI="..."` attribute of a tag.
pub fn add_query(text: &[u8], query: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 64 * (query.len() + 1));
    let push_url = |out: &mut Vec<u8>, url: &[u8]| {
        out.extend_from_slice(url);
        out.push(if url.contains(&b'?') { b'&' } else { b'?' });
        out.extend_from_slice(query.as_bytes());
    };
    for line in text.split_inclusive(|&c| c == b'\n') {
        let body_len = line
            .iter()
            .rposition(|&c| c != b'\n' && c != b'\r')
            .map_or(0, |p| p + 1);
        let (body, end) = line.split_at(body_len);
        if body.is_empty() {
        } else if body[0] != b'#' {
            push_url(&mut out, body);
        } else {
            let mut rest = body;
            while let Some(at) = find(rest, b"URI=\"") {
                let (head, tail) = rest.split_at(at + 5);
                out.extend_from_slice(head);
                let close = tail.iter().position(|&c| c == b'"').unwrap_or(tail.len());
                push_url(&mut out, &tail[..close]);
                rest = &tail[close..];
            }
            out.extend_from_slice(rest);
        }
        out.extend_from_slice(end);
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn with_origin(r: Reply, origin: Option<String>) -> Answer {
    Answer::Reply(Reply {
        allow_origin: origin,
        ..r
    })
}

/// What a request names.
struct Target<'a> {
    vhost: &'a str,
    app: &'a str,
    stream: &'a str,
    file: &'a str,
    cache: CachePolicy,
    /// A multivariant playlist gives its player a session token (not
    /// under access control, whose admission session every URL carries).
    player_tokens: bool,
}

fn answer_file(
    req: &Request,
    target: &Target<'_>,
    hls: &HlsManager,
    reg: &Registry,
    now: Instant,
    parked: Option<Instant>,
    utc_offset: i32,
) -> Answer {
    let Target {
        vhost,
        app,
        stream,
        file,
        cache,
        player_tokens,
    } = *target;
    let Some((id, out)) = hls.find(reg, vhost, app, stream, now) else {
        return Answer::Reply(Reply::error(404, "No such stream"));
    };
    let is_ts = super::ts::parse_file(file).is_some();
    let segment_target = out
        .hls
        .as_ref()
        .map_or(Duration::from_secs(6), |s| s.config.segment_target);
    let session =
        super::session::SessionTokens::of_target(req.target()).and_then(|t| hls.sessions.verify(t));
    // A viewer of the stream counts for three target durations after each
    // file it was served (DECISIONS 14).
    let mark = ViewerMark {
        stream: id,
        hls: is_ts,
        session,
        window: 3 * segment_target.max(Duration::from_secs(1)),
    };
    let reply = |r: Reply| {
        let viewer = (r.status == 200).then_some(mark);
        Answer::Reply(Reply { viewer, ..r })
    };
    // A multivariant playlist: its chunklist URIs carry a new player
    // session's token (and `extra`, a query its chunklists go on with).
    let with_session = |text: String, extra: Option<&str>, cache: Cache| {
        let token = player_tokens.then(|| hls.sessions.issue()).flatten();
        let query = match (token, extra) {
            (Some(t), Some(e)) => format!("{e}&session={t}"),
            (Some(t), None) => format!("session={t}"),
            (None, Some(e)) => e.to_string(),
            (None, None) => return reply(Reply::playlist(text, cache)),
        };
        let text = add_query(text.as_bytes(), &query);
        reply(Reply::media(
            PLAYLIST,
            cache,
            vec![Bytes::from(text).into()],
        ))
    };
    // A DVR's segment older than the live window: read back from disk
    // (the viewer waits, as for a part), then served like any other.
    let from_disk = |d: &super::dvr::Dvr,
                     key: super::dvr::ReadKey,
                     content_type: &'static str,
                     cache: Cache| {
        let (_, track, msn) = key;
        let Some(seg) = d.track(track).and_then(|x| x.segment(msn)) else {
            return reply(Reply::error(404, "No such segment"));
        };
        let until = parked.unwrap_or(now) + DVR_READ_WAIT;
        if !seg.written {
            // Left memory and still on its way to disk: the viewer waits
            // for the stream's next part, and reads it then (a file half
            // written is never read).
            return if now >= until {
                reply(Reply::error(
                    503,
                    "The segment was not written to disk in time",
                ))
            } else {
                Answer::Wait { stream: id, until }
            };
        }
        match hls.dvr_read(&key) {
            // The file's pages, shared by every viewer of it.
            Some(Some(piece)) => reply(Reply::media(
                content_type,
                cache,
                vec![piece.clone().into()],
            )),
            Some(None) => reply(Reply::error(404, "The segment could not be read from disk")),
            None => {
                if now >= until {
                    return reply(Reply::error(
                        503,
                        "The segment was not read from disk in time",
                    ));
                }
                Answer::Read {
                    stream: id,
                    key,
                    path: d.path_of(track, msn),
                    until,
                }
            }
        }
    };
    if let Some(f) = super::ts::parse_file(file) {
        let Some(ts) = &out.ts else {
            return reply(Reply::error(404, "HLS is not enabled for this application"));
        };
        let rewind = Reload::of(req.target()).rewind();
        let variant = |i: usize| ts.variants.get(i);
        return match f {
            TsFile::Master => with_session(ts.master(), None, Cache::NoStore),
            TsFile::MediaPlaylist(i) => match variant(i) {
                Some(v) => reply(Reply::playlist(
                    v.media_playlist(rewind, utc_offset),
                    Cache::NoStore,
                )),
                None => reply(Reply::error(404, "No such playlist")),
            },
            TsFile::Segment(i, n) => match (
                variant(i).and_then(|v| v.segment(n)),
                variant(i).and_then(|v| v.dvr.as_ref()),
            ) {
                (Some(seg), _) => reply(Reply::media(
                    "video/mp2t",
                    Cache::Absent,
                    vec![seg.data.clone().into()],
                )),
                (None, Some(d)) => from_disk(
                    d,
                    (id, super::dvr::TS_TRACK, n),
                    "video/mp2t",
                    Cache::Absent,
                ),
                (None, None) => reply(Reply::error(404, "No such segment")),
            },
        };
    }
    let Some(s) = &out.hls else {
        return reply(Reply::error(
            404,
            "LL-HLS is not enabled for this application",
        ));
    };
    // A playlist asked for before there is a segment to play (a player
    // opening the stream in its first seconds) is held, as a blocking
    // reload is, until the first segment is complete: `<FirstSegmentTimeout>`
    // (three target durations by default) at most, then 503. hls.js gives up for good on a playlist
    // without a segment (`levelEmptyError`) and FFmpeg 5.1 crashes on one;
    // OME holds `llhls.m3u8` the same way.
    let hold = |ready: bool| -> Option<Answer> {
        if ready {
            return None;
        }
        let until = parked.unwrap_or(now) + s.config.first_segment_wait();
        Some(if now >= until {
            Answer::Reply(Reply::error(503, "The stream has no segment yet"))
        } else {
            Answer::Wait { stream: id, until }
        })
    };
    // The multivariant playlists wait for the first video track (or the
    // first track) to have a segment.
    let stream_ready = || {
        let first = s
            .tracks
            .iter()
            .find(|t| t.kind() == MediaKind::Video)
            .or(s.tracks.first());
        first.is_none_or(has_segment)
    };
    // A stream's named playlists (a multiplex channel's renditions); its
    // first is also what `llhls.m3u8` shows.
    if let Some(stem) = file.strip_suffix(".m3u8") {
        let named = reg.streams.get(id).map_or(&[][..], |st| &st.playlists[..]);
        let found = if stem == "llhls" {
            named.first()
        } else {
            named.iter().find(|p| p.file_name == stem)
        };
        if let Some(p) = found {
            if let Some(held) = hold(stream_ready()) {
                return held;
            }
            let text = playlist::renditions_master(s, p);
            return with_session(text, None, cache.master);
        }
    }
    let name = file;
    let Some(file) = playlist::parse_file(name, &s.key) else {
        return reply(Reply::error(404, "Not found"));
    };
    // One name per file, the one the playlists give: `+1`, `0001` or the
    // other kind for a track are not it (a CDN would cache each apart).
    let canonical = match &file {
        File::Master => None,
        File::Chunklist { track } => s.track(*track).map(|t| playlist::chunklist_name(t, &s.key)),
        File::Init { track, version } => s
            .track(*track)
            .map(|t| playlist::init_name_of(t, *version, &s.key)),
        File::Segment { track, msn } => s
            .track(*track)
            .map(|t| playlist::segment_name(t, *msn, &s.key)),
        File::Part { track, msn, part } => s
            .track(*track)
            .map(|t| playlist::part_name(t, *msn, *part, &s.key)),
    };
    if canonical.is_some_and(|c| c != name) {
        return reply(Reply::error(404, "Not found"));
    }
    let track_of = |t: u32| s.track(t);
    let media_type = |t: &TrackOutput| match t.kind() {
        MediaKind::Video => "video/mp4",
        _ => "audio/mp4",
    };
    // A request for what does not exist yet waits for it, three target
    // durations at most (then 503).
    let wait = |t: &TrackOutput| {
        let target = t.max_segment.max(s.config.segment_target.as_secs_f64());
        let until = parked.unwrap_or(now) + Duration::from_secs_f64(3.0 * target);
        if now >= until {
            Answer::Reply(Reply::error(503, "The part did not come in time"))
        } else {
            Answer::Wait { stream: id, until }
        }
    };
    match file {
        File::Master => {
            if let Some(held) = hold(stream_ready()) {
                return held;
            }
            let text = playlist::master(s);
            // OME's `_HLS_rewind=NO` on the master goes on to its chunklists.
            let rewind_no = !Reload::of(req.target()).rewind();
            let extra = (rewind_no && s.dvr.is_some()).then_some("_HLS_rewind=NO");
            with_session(text, extra, cache.master)
        }
        File::Chunklist { track } => {
            let Some(t) = track_of(track) else {
                return reply(Reply::error(404, "No such track"));
            };
            let reload = Reload::of(req.target());
            let skip = matches!(reload.skip, Some("YES" | "v2"));
            let rewind = reload.rewind();
            let msn = reload.msn.map(str::parse::<u64>);
            let part = reload.part.map(str::parse::<usize>);
            let (msn, part) = match (msn, part) {
                (None, None) => {
                    if let Some(held) = hold(has_segment(t)) {
                        return held;
                    }
                    let text = s.chunklist(t, skip, rewind, utc_offset);
                    return reply(Reply::media(PLAYLIST, cache.chunklist, vec![text.into()]));
                }
                (Some(Ok(m)), None) => (m, None),
                (Some(Ok(m)), Some(Ok(p))) => (m, Some(p)),
                _ => return reply(Reply::error(400, "Bad _HLS_msn / _HLS_part")),
            };
            if t.has(msn, part) || t.is_ended() {
                let text = s.chunklist(t, skip, rewind, utc_offset);
                return reply(Reply::media(
                    PLAYLIST,
                    cache.blocking_chunklist,
                    vec![text.into()],
                ));
            }
            let last = t.segments.back().map_or(0, |x| x.msn);
            if msn > last + 2 {
                return reply(Reply::error(
                    400,
                    "_HLS_msn is more than two segments ahead",
                ));
            }
            wait(t)
        }
        File::Init { track, version } => {
            match track_of(track).and_then(|t| Some((t, t.init_of(version)?))) {
                Some((t, init)) => reply(Reply::media(
                    media_type(t),
                    cache.segment,
                    vec![init.clone().into()],
                )),
                None => reply(Reply::error(404, "No such track")),
            }
        }
        File::Segment { track, msn } => {
            let Some(t) = track_of(track) else {
                return reply(Reply::error(404, "No such track"));
            };
            if let Some(data) = t.segment_data(msn) {
                return reply(Reply::media(media_type(t), cache.segment, data));
            }
            // Older than the live window: on disk, with a DVR.
            match s.dvr.as_ref() {
                Some(d) => from_disk(d, (id, track, msn), media_type(t), cache.segment),
                None => reply(Reply::error(404, "No such segment")),
            }
        }
        File::Part { track, msn, part } => {
            let Some(t) = track_of(track) else {
                return reply(Reply::error(404, "No such track"));
            };
            if let Some(p) = t.segment(msn).and_then(|x| x.parts.get(part)) {
                return reply(Reply::media(media_type(t), cache.part, vec![p.shared()]));
            }
            // The preload-hinted part (the next one) is waited for, and so
            // is a later one of this segment or the next: a player that
            // switched from another rendition asks for the part its last
            // one had, which this one may not have made yet.
            let next = match t.segments.back() {
                Some(last) if !last.complete => (last.msn, last.parts.len()),
                Some(last) => (last.msn + 1, 0),
                None => (0, 0),
            };
            let soon = (msn, part) >= next && msn <= next.0 + 1 && part < MAX_PARTS_AHEAD;
            if !soon || t.is_ended() {
                return reply(Reply::error(404, "No such part"));
            }
            wait(t)
        }
    }
}

/// Has the track a complete segment to play (or ended: nothing will come)?
fn has_segment(t: &TrackOutput) -> bool {
    t.is_ended() || t.segments.iter().any(|x| x.complete)
}

#[cfg(test)]
mod session_tests {
    use super::add_session;

    #[test]
    fn every_url_gets_the_session() {
        let chunklist = "#EXTM3U\n#EXT-X-MAP:URI=\"init_0_video_k_llhls.m4s\"\n#EXT-X-PART:DURATION=0.5,URI=\"part_0_1_0_video_k_llhls.m4s\",INDEPENDENT=YES\nseg_0_1_video_k_llhls.m4s\n#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"part_0_2_0_video_k_llhls.m4s\"\n#EXT-X-RENDITION-REPORT:URI=\"chunklist_1_audio_k_llhls.m3u8\",LAST-MSN=2\n";
        let out = String::from_utf8(add_session(chunklist.as_bytes(), "7_abcdefgh")).unwrap();
        assert_eq!(out.matches("?session=7_abcdefgh").count(), 5, "{out}");
        assert!(out.contains("URI=\"init_0_video_k_llhls.m4s?session=7_abcdefgh\""));
        assert!(out.contains("\nseg_0_1_video_k_llhls.m4s?session=7_abcdefgh\n"));
        let ts = "#EXTM3U\n#EXTINF:6.0,\nseg_0_3_hls.ts";
        let out = String::from_utf8(add_session(ts.as_bytes(), "1_x")).unwrap();
        assert!(out.ends_with("seg_0_3_hls.ts?session=1_x"));
        assert!(!out.contains("#EXTINF:6.0,?"));
        // A URL with a query of its own (OME's `_HLS_rewind=NO`).
        let master = "#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,URI=\"chunklist_2_audio_k_llhls.m3u8?_HLS_rewind=NO\"\nchunklist_1_video_k_llhls.m3u8?_HLS_rewind=NO\r\n";
        let out = String::from_utf8(add_session(master.as_bytes(), "s")).unwrap();
        assert!(
            out.contains("URI=\"chunklist_2_audio_k_llhls.m3u8?_HLS_rewind=NO&session=s\""),
            "{out}"
        );
        assert!(
            out.ends_with("chunklist_1_video_k_llhls.m3u8?_HLS_rewind=NO&session=s\r\n"),
            "{out}"
        );
    }
}
