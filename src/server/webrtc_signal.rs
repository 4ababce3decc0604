//! WebRTC signalling on the viewer port, beside LL-HLS: WHEP (an SDP offer
//! POSTed to `/{app}/{stream}?direction=whep`, answered `201` with the
//! answer and a `Location` to DELETE) and OvenMediaEngine's JSON over a
//! WebSocket (`ws://host:port/{app}/{stream}`, kiln offers). Both admit
//! the viewer as LL-HLS does (signed policy, admission webhook; protocol
//! `webrtc`), then open a session in the table ([`crate::webrtc`]).
//!
//! Publishers signal the same two ways: WHIP (`direction=whip`, RFC 9725,
//! as OME answers it) and the WebSocket with `direction=send` (kiln still
//! offers, recvonly). They are admitted as RTMP and SRT publishers are
//! (`webrtc` in `enables.providers`); the stream starts when the session is
//! made (a live name is refused: WHIP `409`, OME's `Cannot create offer`)
//! and ends with it.
//! [`super::viewer_conn::ViewerConn`] routes requests here; a WebSocket
//! upgrade turns the connection into a [`WsSignal`].

use super::endpoint::Cx;
use crate::admission::manager::{Admit, CheckId, Verdict};
use crate::admission::webhook::{Protocol, Subject};
use crate::clock::Now;
use crate::http::response::reason;
use crate::http::ws;
use crate::http::Request;
use crate::state::streams::{IngestOutput, LiveStream, PublishError, SourceType, StreamId};
use crate::webrtc::signal::{self, Command, Refusal};
use crate::webrtc::SessionOptions;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// What a viewer-port request is for, when it is WebRTC signalling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    WhepOffer,
    WhipOffer,
    WhepOptions,
    WhepDelete(String),
    WhepPatch(String),
    WebSocket,
}

/// Routes WHEP requests (`direction=whep`) and WebSocket upgrades.
pub(crate) fn route(req: &Request) -> Option<Route> {
    let query = req.target().split_once('?').map_or("", |(_, q)| q);
    if ws::is_upgrade(req) {
        return Some(Route::WebSocket);
    }
    let direction = crate::admission::policy::query_value(query, "direction")?;
    if direction != "whep" && direction != "whip" {
        return None;
    }
    let key = || {
        req.path()
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_string()
    };
    match req.method() {
        "POST" if direction == "whip" => Some(Route::WhipOffer),
        "POST" => Some(Route::WhepOffer),
        "OPTIONS" => Some(Route::WhepOptions),
        "DELETE" => Some(Route::WhepDelete(key())),
        "PATCH" => Some(Route::WhepPatch(key())),
        _ => None,
    }
}

/// WHEP's and WHIP's `Link` headers naming the TCP relay, when the
/// request asks for it or it is forced.
fn relay_links(req: &Request, webrtc: &crate::webrtc::WebRtc) -> Vec<String> {
    if wants_tcp(req) || webrtc.tcp_force {
        signal::link_headers(&webrtc.relay_urls)
    } else {
        Vec::new()
    }
}

/// The request asks for the TCP relay (`transport=tcp`, OME's query).
fn wants_tcp(req: &Request) -> bool {
    let query = req.target().split_once('?').map_or("", |(_, q)| q);
    crate::admission::policy::query_value(query, "transport")
        .is_some_and(|t| t.eq_ignore_ascii_case("tcp"))
}

/// A WebSocket for publishing (`direction=send`, OME's ingest).
fn is_send(req: &Request) -> bool {
    let query = req.target().split_once('?').map_or("", |(_, q)| q);
    crate::admission::policy::query_value(query, "direction").as_deref() == Some("send")
}

/// (vhost, app, stream) a request names: the vhost serving its `Host`,
/// the first two path segments.
pub(crate) fn target(req: &Request, cx: &Cx<'_>) -> Option<(String, String, String)> {
    let host = crate::http::host::host_without_port(req.header_str("host").unwrap_or(""));
    let vhost = cx.api.registry.vhost_serving(host)?.spec.name.clone();
    let mut parts = req.path().trim_start_matches('/').split('/');
    let app = parts.next().filter(|s| !s.is_empty())?.to_string();
    let stream = parts.next().filter(|s| !s.is_empty())?.to_string();
    Some((vhost, app, stream))
}

/// The live stream a viewer may play over WebRTC, and the app's options;
/// `Err` with the reason otherwise.
fn playable<'a>(
    cx: &'a Cx<'_>,
    (vhost, app, stream): &(String, String, String),
) -> Result<(&'a LiveStream, SessionOptions), &'static str> {
    let spec = cx
        .api
        .registry
        .app(vhost, app)
        .ok_or("No such application")?;
    let Some(w) = &spec.publishers.webrtc else {
        return Err("WebRTC is not enabled for this application");
    };
    let live = cx
        .api
        .registry
        .streams
        .find(vhost, app, stream)
        .ok_or("No such stream")?;
    let opts = SessionOptions {
        timeout: Duration::from_millis(w.timeout.unwrap_or(30_000)),
        ..SessionOptions::default()
    };
    Ok((live, opts))
}

/// The app takes WebRTC publishers: their session options; `Err` with
/// the reason otherwise.
fn publishable(
    cx: &Cx<'_>,
    (vhost, app, _): &(String, String, String),
) -> Result<SessionOptions, &'static str> {
    let spec = cx
        .api
        .registry
        .app(vhost, app)
        .ok_or("No such application")?;
    let Some(w) = &spec.providers.webrtc else {
        return Err("WebRTC publishing is not enabled for this application");
    };
    Ok(SessionOptions {
        timeout: Duration::from_millis(w.timeout.unwrap_or(30_000)),
        ..SessionOptions::default()
    })
}

/// Starts the stream a WebRTC publisher will send (its media comes once
/// the session connects); tells the features. `Err`: (status, text).
fn start_stream(
    cx: &mut Cx<'_>,
    (vhost, app, name): &(String, String, String),
) -> Result<StreamId, (u16, &'static str)> {
    let publisher = cx
        .api
        .webrtc
        .publisher_token()
        .ok_or((500, "No ICE socket"))?;
    let now_ms = Now::read(cx.now).unix_ms;
    match cx.api.registry.streams.start(
        vhost,
        app,
        name,
        SourceType::WebRtc,
        publisher as u64,
        now_ms,
    ) {
        Ok(id) => {
            crate::info!("stream [{vhost}/{app}/{name}] started (WebRTC)");
            cx.out.ingest.push(IngestOutput {
                stream: Some(id),
                started: Some(id),
                ..IngestOutput::default()
            });
            Ok(id)
        }
        // OME's text.
        Err(PublishError::AlreadyPublishing) => Err((409, "Stream is already exist")),
        Err(PublishError::InvalidName) => Err((400, "Invalid stream name")),
    }
}

/// Ends a stream `start_stream` started whose session could not be made.
fn unstart_stream(cx: &mut Cx<'_>, id: StreamId) {
    cx.api.registry.streams.end(id);
    cx.out.ingest.push(IngestOutput {
        stream: Some(id),
        ended: Some(id),
        ..IngestOutput::default()
    });
}

/// A whole HTTP response (head and body) for WHEP.
pub(crate) fn response(
    status: u16,
    content_type: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    close: bool,
) -> Vec<u8> {
    let mut h = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nAccess-Control-Allow-Origin: *\r\n",
        reason(status),
        body.len()
    );
    for (k, v) in headers {
        h.push_str(k);
        h.push_str(": ");
        h.push_str(v);
        h.push_str("\r\n");
    }
    if close {
        h.push_str("Connection: close\r\n");
    }
    h.push_str("\r\n");
    let mut out = h.into_bytes();
    out.extend_from_slice(body);
    out
}

pub(crate) fn error(status: u16, text: &str, close: bool) -> Vec<u8> {
    response(
        status,
        "text/plain; charset=utf-8",
        &[],
        text.as_bytes(),
        close,
    )
}

/// The CORS preflight answer (a player page on another origin).
pub(crate) fn preflight(req: &Request, close: bool) -> Vec<u8> {
    // Echo the asked headers only when they are plain header names.
    let asked = req
        .header_str("access-control-request-headers")
        .filter(|h| {
            h.len() <= 256
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_, ".contains(&b))
        })
        .unwrap_or("Content-Type, Authorization, If-Match");
    response(
        204,
        "text/plain",
        &[
            (
                "Access-Control-Allow-Methods",
                "OPTIONS, POST, PATCH, DELETE",
            ),
            ("Access-Control-Allow-Headers", asked),
            ("Access-Control-Max-Age", "86400"),
            ("Access-Control-Allow-Private-Network", "true"),
            ("Accept-Post", "application/sdp"),
        ],
        b"",
        close,
    )
}

/// An admission whose session will not be made: its closing is owed now.
fn close_admission(admit: &Admit, cx: &mut Cx<'_>) {
    if let Some(a) = admit.admission {
        cx.access.close(a, Now::read(cx.now));
    }
}

/// The `201` of a session made over WHEP or WHIP: the answer, the
/// `Location` to DELETE (`/{app}/{stream}/{key}?direction=...`), the ETag
/// and the TCP relay's `Link`s when asked for.
fn created(
    req: &Request,
    target: &(String, String, String),
    direction: &str,
    (key, etag, answer): (&str, &str, &str),
    webrtc: &crate::webrtc::WebRtc,
    close: bool,
) -> Vec<u8> {
    let location = format!("/{}/{}/{key}?direction={direction}", target.1, target.2);
    let links = relay_links(req, webrtc);
    let mut headers = vec![
        ("Location", location.as_str()),
        ("ETag", etag),
        ("Access-Control-Expose-Headers", "Location, ETag, Link"),
    ];
    headers.extend(links.iter().map(|l| ("Link", l.as_str())));
    response(201, "application/sdp", &headers, answer.as_bytes(), close)
}

/// The session options an admission adds (its end, its closing).
fn admitted_options(
    mut opts: SessionOptions,
    admit: &Admit,
    client: std::net::IpAddr,
    now: Instant,
) -> SessionOptions {
    opts.client = Some(client);
    if let Some(at_ms) = admit.expire_at {
        let wall = Now::read(now).unix_ms.max(0) as u64;
        opts.end_by = Some(now + Duration::from_millis(at_ms.saturating_sub(wall)));
    }
    opts.tag = admit.admission.map_or(0, |a| a.0);
    opts
}

/// What answers an admitted WHEP or WHIP offer (the client's address,
/// the request, the stream, its admission, whether to close): the bytes.
pub(crate) type OfferAnswer =
    fn(std::net::IpAddr, &Request, &(String, String, String), &Admit, bool, &mut Cx<'_>) -> Vec<u8>;

/// An admitted WHEP offer: the session and its `201`.
pub(crate) fn whep_answer(
    client: std::net::IpAddr,
    req: &Request,
    target: &(String, String, String),
    admit: &Admit,
    close: bool,
    cx: &mut Cx<'_>,
) -> Vec<u8> {
    let (live, opts) = match playable(cx, target) {
        Ok((live, opts)) => (live.id, opts),
        Err(why) => {
            close_admission(admit, cx);
            return error(404, why, close);
        }
    };
    let opts = admitted_options(opts, admit, client, cx.now);
    let offer = String::from_utf8_lossy(&req.body).into_owned();
    let api = &mut *cx.api;
    let Some(stream) = api.registry.streams.get(live) else {
        close_admission(admit, cx);
        return error(404, "No such stream", close);
    };
    // kiln's extension: `rendition=NAME` pins one of the stream's
    // renditions (WHEP has no rendition message; OME's signalling does).
    let query = req.target().split_once('?').map_or("", |(_, q)| q);
    let pinned = match crate::admission::policy::query_value(query, "rendition") {
        None => None,
        Some(name) => {
            let all = crate::webrtc::signal::renditions(stream);
            match all.iter().find(|r| r.name == name) {
                Some(r) => r.track,
                None => {
                    close_admission(admit, cx);
                    let names: Vec<&str> = all.iter().map(|r| r.name.as_str()).collect();
                    let why = format!("No rendition [{name}]: the stream has {}", names.join(", "));
                    return error(400, &why, close);
                }
            }
        }
    };
    match api.webrtc.accept_offer(stream, &offer, opts, cx.now) {
        Ok((key, answer)) => {
            crate::info!(
                "webrtc: WHEP viewer of {}/{}/{} (session {key})",
                &target.0,
                &target.1,
                &target.2
            );
            if let Some(track) = pinned {
                api.webrtc
                    .choose_rendition(&key, track, &api.registry.streams);
            }
            let etag = format!("\"{key}\"");
            let made = (key.as_str(), etag.as_str(), answer.as_str());
            created(req, target, "whep", made, &api.webrtc, close)
        }
        Err(e) => {
            close_admission(admit, cx);
            error(e.status(), &e.to_string(), close)
        }
    }
}

/// An admitted WHIP offer: the stream, the session and its `201`.
pub(crate) fn whip_answer(
    client: std::net::IpAddr,
    req: &Request,
    target: &(String, String, String),
    admit: &Admit,
    close: bool,
    cx: &mut Cx<'_>,
) -> Vec<u8> {
    let opts = match publishable(cx, target) {
        Ok(opts) => admitted_options(opts, admit, client, cx.now),
        Err(why) => {
            close_admission(admit, cx);
            return error(404, why, close);
        }
    };
    let id = match start_stream(cx, target) {
        Ok(id) => id,
        Err((status, why)) => {
            close_admission(admit, cx);
            return error(status, why, close);
        }
    };
    let offer = String::from_utf8_lossy(&req.body).into_owned();
    match cx.api.webrtc.accept_publish_offer(id, &offer, opts, cx.now) {
        Ok((key, answer)) => {
            crate::info!(
                "webrtc: WHIP publisher of {}/{}/{} (session {key})",
                &target.0,
                &target.1,
                &target.2
            );
            // OME's WHIP ETag is the bare key.
            let made = (key.as_str(), key.as_str(), answer.as_str());
            created(req, target, "whip", made, &cx.api.webrtc, close)
        }
        Err(e) => {
            unstart_stream(cx, id);
            close_admission(admit, cx);
            error(e.status(), &e.to_string(), close)
        }
    }
}

/// WHEP DELETE: ends the session its key names.
pub(crate) fn whep_delete(key: &str, close: bool, cx: &mut Cx<'_>) -> Vec<u8> {
    match cx.api.webrtc.stop(key) {
        Ok(()) => response(200, "text/plain", &[], b"", close),
        Err(e) => error(e.status(), &e.to_string(), close),
    }
}

/// WHEP PATCH: trickled candidates are not needed (kiln is ICE-lite and
/// learns the viewer's address from its STUN requests): `204`, as OME
/// answers WHIP's.
pub(crate) fn whep_patch(key: &str, close: bool, cx: &mut Cx<'_>) -> Vec<u8> {
    if cx.api.webrtc.session_stream(key).is_none() {
        return error(404, "No such WebRTC session", close);
    }
    response(204, "application/trickle-ice-sdpfrag", &[], b"", close)
}

/// Server Pings at most this often; a connection that sends nothing for
/// `IDLE` closes (OME's figures).
const PING_EVERY: Duration = Duration::from_secs(20);
const IDLE: Duration = Duration::from_secs(60);

/// One OME signalling WebSocket: its session, its admission in flight,
/// its keep-alive.
pub(crate) struct WsSignal {
    /// The peer's address (its share of the sessions).
    client: std::net::IpAddr,
    reader: ws::Reader,
    target: (String, String, String),
    /// The upgrade request's URL (for the signed policy and webhook).
    url: String,
    user_agent: Option<String>,
    id: i64,
    /// Asked with `transport=tcp`: the offer names the TCP relay.
    tcp: bool,
    /// `direction=send`: a publisher (OvenLiveKit), not a viewer.
    send: bool,
    session: Option<String>,
    /// The renditions the `playlist` notification listed (name, video
    /// track), and whether the viewer asked for automatic switching.
    renditions: Vec<(String, Option<crate::media::TrackId>)>,
    auto: bool,
    /// The playlist its URL names (`/{app}/{stream}/{FileName}`), if any.
    file: Option<String>,
    check: Option<CheckId>,
    last_rx: Instant,
    last_ping: Instant,
    opened: Instant,
    /// Close once what is queued is written.
    pub closing: bool,
}

impl WsSignal {
    pub(crate) fn new(
        req: &Request,
        client: std::net::IpAddr,
        target: (String, String, String),
        url: String,
        now: Instant,
    ) -> Self {
        WsSignal {
            client,
            reader: ws::Reader::new(signal::MAX_MESSAGE),
            target,
            url,
            user_agent: req.header_str("user-agent").map(str::to_string),
            id: i64::from(1 + (random_u32() & 0x7fff_fffe)),
            tcp: wants_tcp(req),
            send: is_send(req),
            session: None,
            renditions: Vec::new(),
            auto: true,
            file: req
                .path()
                .trim_start_matches('/')
                .split('/')
                .nth(2)
                .filter(|f| !f.is_empty())
                .map(str::to_string),
            check: None,
            last_rx: now,
            last_ping: now,
            opened: now,
            closing: false,
        }
    }

    /// When the socket was upgraded, while it has no session and no
    /// admission under way (a WebSocket that never asks for an offer is
    /// among the first closed when descriptors run short).
    pub(crate) fn idle_since(&self) -> Option<Instant> {
        (self.session.is_none() && self.check.is_none()).then_some(self.opened)
    }

    /// Bytes from the socket; false when too much is held (read no more).
    pub(crate) fn feed(&mut self, data: &[u8], now: Instant) -> bool {
        self.last_rx = now;
        self.reader.feed(data)
    }

    /// Its input buffer holds a whole largest message: read no more until
    /// it is processed.
    pub(crate) fn input_full(&self) -> bool {
        self.reader.buffered() > signal::MAX_MESSAGE + 14
    }

    pub(crate) fn deadline(&self) -> Instant {
        (self.last_ping + PING_EVERY).min(self.last_rx + IDLE)
    }

    /// The keep-alive: a Ping frame to send, or the socket closes.
    pub(crate) fn timeout(&mut self, cx: &mut Cx<'_>) -> Vec<Vec<u8>> {
        if cx.now >= self.last_rx + IDLE {
            self.end(cx);
            return Vec::new();
        }
        if cx.now >= self.last_ping + PING_EVERY {
            self.last_ping = cx.now;
            return vec![ws::ping(b"kiln")];
        }
        Vec::new()
    }

    /// Every whole message received: the frames to send back.
    pub(crate) fn process(&mut self, peer: SocketAddr, cx: &mut Cx<'_>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        // A Pong answers only the last Ping of a batch (RFC 6455 5.5.3):
        // a peer sending Pings it never reads the answers of gets one
        // frame per read, not one per Ping.
        let mut last_ping = None;
        while !self.closing {
            let msg = match self.reader.next_message() {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(e) => {
                    crate::debug!("webrtc signalling {peer}: {e}");
                    self.end(cx);
                    break;
                }
            };
            match msg {
                ws::Message::Text(t) => self.command(&t, peer, cx, &mut out),
                ws::Message::Binary(_) | ws::Message::Pong(_) => {}
                ws::Message::Ping(p) => last_ping = Some(p),
                ws::Message::Close(_) => {
                    out.push(ws::frame(0x8, &1000u16.to_be_bytes()));
                    self.end(cx);
                }
            }
        }
        if let Some(p) = last_ping.filter(|_| !self.closing) {
            out.push(ws::pong(&p));
        }
        out
    }

    fn refuse(&mut self, r: Refusal, cx: &mut Cx<'_>, out: &mut Vec<Vec<u8>>) {
        out.push(ws::text(&r.to_json()));
        self.end(cx);
    }

    fn command(&mut self, text: &str, peer: SocketAddr, cx: &mut Cx<'_>, out: &mut Vec<Vec<u8>>) {
        let cmd = match signal::parse(text) {
            Ok(Some(c)) => c,
            Ok(None) => {
                crate::debug!("webrtc signalling {peer}: not a command");
                return;
            }
            Err(r) => return self.refuse(r, cx, out),
        };
        match cmd {
            Command::RequestOffer => {
                if self.session.is_some() || self.check.is_some() {
                    return;
                }
                self.request_offer(peer, cx, out);
            }
            Command::Answer { id, sdp } => {
                if id != self.id {
                    return self.refuse(Refusal::new(400, "Invalid ID"), cx, out);
                }
                let Some(key) = self.session.clone() else {
                    return self.refuse(Refusal::new(404, "Could not find peer id"), cx, out);
                };
                if self.send {
                    // No notifications on ingest (OME sends none).
                    if let Err(e) = cx.api.webrtc.accept_answer(&key, &sdp, cx.now) {
                        self.refuse(Refusal::new(400, &e.to_string()), cx, out);
                    }
                    return;
                }
                let api = &mut *cx.api;
                let Some(stream) =
                    api.registry
                        .streams
                        .find(&self.target.0, &self.target.1, &self.target.2)
                else {
                    return self.refuse(Refusal::new(404, "Cannot create offer"), cx, out);
                };
                // `/{app}/{stream}/{FileName}`: one of its named
                // playlists (OME's `<Playlist>`); else every video track.
                let named = self
                    .file
                    .as_deref()
                    .and_then(|f| stream.playlists.iter().find(|p| p.file_name == f));
                let renditions = match named {
                    Some(p) => signal::playlist_renditions(stream, p),
                    None => signal::renditions(stream),
                };
                match api.webrtc.accept_answer(&key, &sdp, cx.now) {
                    Ok(()) => {
                        out.push(ws::text(&signal::playlist_notification(
                            &self.target.2,
                            &renditions,
                            self.auto,
                        )));
                        self.renditions =
                            renditions.into_iter().map(|r| (r.name, r.track)).collect();
                        let first = self.renditions.first().map_or("source", |r| r.0.as_str());
                        out.push(ws::text(&signal::rendition_changed(first, self.auto)));
                    }
                    Err(e) => self.refuse(Refusal::new(400, &e.to_string()), cx, out),
                }
            }
            Command::Candidate { id } => {
                if id != self.id {
                    self.refuse(Refusal::new(400, "Invalid ID"), cx, out);
                }
            }
            Command::Stop { .. } => self.end(cx),
            Command::ChangeRendition {
                rendition, auto, ..
            } => {
                let Some(key) = self.session.clone() else {
                    return;
                };
                // A named rendition: switched to at its next keyframe,
                // then said (`rendition_switched`), and automatic choice
                // off. `auto` alone turns it on or off, said at once.
                let chosen = rendition.and_then(|name| {
                    self.renditions
                        .iter()
                        .find(|r| r.0 == name)
                        .and_then(|r| r.1)
                });
                if let Some(track) = chosen {
                    self.auto = false;
                    let api = &mut *cx.api;
                    api.webrtc
                        .choose_rendition(&key, track, &api.registry.streams);
                } else if let Some(auto) = auto {
                    self.auto = auto;
                    cx.api.webrtc.set_auto_rendition(&key, auto, cx.now);
                    let name = self.current_rendition(cx);
                    out.push(ws::text(&signal::rendition_changed(&name, auto)));
                }
            }
            Command::Pong => {}
        }
    }

    fn request_offer(&mut self, peer: SocketAddr, cx: &mut Cx<'_>, out: &mut Vec<Vec<u8>>) {
        let ready = if self.send {
            publishable(cx, &self.target).and_then(|_| {
                let (v, a, n) = &self.target;
                match cx.api.registry.streams.find(v, a, n) {
                    Some(_) => Err("the stream is live already"),
                    None => Ok(()),
                }
            })
        } else {
            playable(cx, &self.target).map(|_| ())
        };
        if let Err(why) = ready {
            // Which vhost and app the URL resolved to (a `localhost` that
            // matches another vhost's names is a common surprise), and why.
            let (v, a, n) = &self.target;
            let text = format!("Cannot create offer: {why} [{v}/{a}/{n}]");
            crate::info!("webrtc signalling {peer}: {}", text.escape_debug());
            return self.refuse(Refusal::new(404, &text), cx, out);
        }
        let Some(spec) = cx
            .api
            .registry
            .vhost(&self.target.0)
            .map(|v| v.spec.clone())
        else {
            return self.refuse(Refusal::new(404, "Cannot create offer"), cx, out);
        };
        let subject = Subject {
            protocol: if self.send {
                Protocol::WebRtcIngest
            } else {
                Protocol::WebRtc
            },
            client: peer,
            user_agent: self.user_agent.clone(),
            url: self.url.clone(),
            new_url: None,
            bearer: None,
        };
        match cx
            .access
            .check(&spec, subject, cx.token.0, Now::read(cx.now))
        {
            Verdict::Allowed(admit) => self.offer(&admit, cx, out),
            Verdict::Refused(why) => {
                crate::info!("webrtc signalling {peer}: refused: {}", &why);
                self.refuse(Refusal::new(404, "Cannot create offer"), cx, out);
            }
            Verdict::Pending(check) => self.check = Some(check),
        }
    }

    /// The decision on the admission this socket waits for.
    pub(crate) fn admitted(
        &mut self,
        check: CheckId,
        verdict: Verdict,
        cx: &mut Cx<'_>,
    ) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        if self.check != Some(check) || self.closing {
            if let Verdict::Allowed(Admit {
                admission: Some(a), ..
            }) = verdict
            {
                cx.access.close(a, Now::read(cx.now));
            }
            return out;
        }
        self.check = None;
        match verdict {
            Verdict::Allowed(admit) => self.offer(&admit, cx, &mut out),
            _ => self.refuse(Refusal::new(404, "Cannot create offer"), cx, &mut out),
        }
        out
    }

    fn offer(&mut self, admit: &Admit, cx: &mut Cx<'_>, out: &mut Vec<Vec<u8>>) {
        if self.send {
            return self.publish_offer(admit, cx, out);
        }
        let target = match &admit.new_url {
            None => self.target.clone(),
            Some(url) => match crate::admission::redirect(&cx.api.registry, url) {
                Ok(t) => t,
                Err(_) => {
                    close_admission(admit, cx);
                    return self.refuse(Refusal::new(404, "Cannot create offer"), cx, out);
                }
            },
        };
        let (live, opts) = match playable(cx, &target) {
            Ok((l, o)) => (l.id, o),
            Err(_) => {
                close_admission(admit, cx);
                return self.refuse(Refusal::new(404, "Cannot create offer"), cx, out);
            }
        };
        let mut opts = admitted_options(opts, admit, self.client, cx.now);
        opts.owner = Some(cx.token.0);
        let api = &mut *cx.api;
        let Some(stream) = api.registry.streams.get(live) else {
            return;
        };
        match api.webrtc.create_offer(stream, opts, cx.now) {
            Ok((key, sdp)) => {
                crate::info!(
                    "webrtc: viewer of {}/{}/{} over OME signalling (session {key})",
                    &target.0,
                    &target.1,
                    &target.2
                );
                self.target = target;
                self.session = Some(key);
                out.push(self.offer_message(&api.webrtc, &sdp));
            }
            Err(e) => {
                close_admission(admit, cx);
                let code = if e.status() == 503 { 503 } else { 404 };
                self.refuse(Refusal::new(code, "Cannot create offer"), cx, out);
            }
        }
    }

    /// OME's `offer` message: the SDP, the ICE candidates, and the TCP
    /// relay when asked for (`transport=tcp`) or forced.
    fn offer_message(&self, webrtc: &crate::webrtc::WebRtc, sdp: &str) -> Vec<u8> {
        let relay = if self.tcp || webrtc.tcp_force {
            webrtc.relay_urls.clone()
        } else {
            Vec::new()
        };
        ws::text(&signal::offer(self.id, sdp, &webrtc.candidates(), &relay))
    }

    /// `direction=send`: the stream, and kiln's recvonly offer.
    fn publish_offer(&mut self, admit: &Admit, cx: &mut Cx<'_>, out: &mut Vec<Vec<u8>>) {
        let refuse = |me: &mut Self, cx: &mut Cx<'_>, out: &mut Vec<Vec<u8>>, code| {
            close_admission(admit, cx);
            me.refuse(Refusal::new(code, "Cannot create offer"), cx, out);
        };
        let target = self.target.clone();
        let Ok(opts) = publishable(cx, &target) else {
            return refuse(self, cx, out, 404);
        };
        let mut opts = admitted_options(opts, admit, self.client, cx.now);
        opts.owner = Some(cx.token.0);
        let Ok(id) = start_stream(cx, &target) else {
            return refuse(self, cx, out, 404);
        };
        match cx.api.webrtc.create_publish_offer(id, opts, cx.now) {
            Ok((key, sdp)) => {
                crate::info!(
                    "webrtc: publisher of {}/{}/{} over OME signalling (session {key})",
                    &target.0,
                    &target.1,
                    &target.2
                );
                self.session = Some(key);
                out.push(self.offer_message(&cx.api.webrtc, &sdp));
            }
            Err(e) => {
                unstart_stream(cx, id);
                let code = if e.status() == 503 { 503 } else { 404 };
                refuse(self, cx, out, code);
            }
        }
    }

    /// The name of the rendition its session plays.
    fn current_rendition(&mut self, cx: &mut Cx<'_>) -> String {
        let track = self
            .session
            .as_deref()
            .and_then(|k| cx.api.webrtc.rendition_of(k))
            .and_then(|(t, _)| t);
        self.renditions
            .iter()
            .find(|r| track.is_some() && r.1 == track)
            .or(self.renditions.first())
            .map_or_else(|| "source".to_string(), |r| r.0.clone())
    }

    /// Its session switched rendition: `rendition_changed` says which.
    pub(crate) fn rendition_switched(&mut self, key: &str, cx: &mut Cx<'_>) -> Vec<Vec<u8>> {
        if self.session.as_deref() != Some(key) {
            return Vec::new();
        }
        let name = self.current_rendition(cx);
        vec![ws::text(&signal::rendition_changed(&name, self.auto))]
    }

    /// Its session ended (stream gone, viewer silent): the socket closes.
    pub(crate) fn session_ended(&mut self, key: &str) {
        if self.session.as_deref() == Some(key) {
            self.session = None;
            self.closing = true;
        }
    }

    /// Ends the session (if any) and closes the socket.
    pub(crate) fn end(&mut self, cx: &mut Cx<'_>) {
        if let Some(key) = self.session.take() {
            let _ = cx.api.webrtc.stop(&key);
        }
        if let Some(check) = self.check.take() {
            cx.access.cancel(check);
        }
        self.closing = true;
    }
}

fn random_u32() -> u32 {
    let mut raw = [0u8; 4];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut raw);
    u32::from_be_bytes(raw)
}
