//! SRT listener ingest: one UDP socket, many callers, driven through the
//! sans-IO [`Listener`]. The caller's streamid names the stream; it must
//! name an application with the SRT provider on and a free stream name, or
//! the handshake is rejected with an HTTP-like code (404, 403, 409) the
//! caller reports. Each connection's TS payloads go through its own
//! demuxer.
//!
//! Streamid forms: `{vhost host or name}/{app}/{stream}`, OME's
//! `srt://{host}[:port]/{app}/{stream}` (URL-encoded or not), and SRT's
//! access-control syntax `#!::h={host},r={app}/{stream},m=publish`;
//! `{app}/{stream}` picks the first virtual host that serves any name.
//!
//! The signed policy and the admission webhook see the streamid as OME's
//! URL form (`srt://{host}:{port}/{app}/{stream}?{query}`, the listener's
//! port when it names none). A refusal is reject code 1401; a webhook
//! answer is waited for with the handshake held (the caller repeats its
//! conclusion meanwhile).
//!
//! A caller in request mode (`m=request`, `mode=request`) plays a live
//! stream: it gets the stream's last GOP, then every frame, as MPEG-TS in
//! 1316-byte payloads through the listener's sender. One more than
//! [`PLAY_BACKLOG`] payloads behind skips to the next keyframe; when the
//! stream ends the connection is closed. Players are admitted with `srt`
//! in `enables.publishers`.

use super::endpoint::{Cx, Endpoint};
use crate::admission::manager::{AdmissionId, Admit, CheckId, Verdict};
use crate::admission::webhook::{Protocol, Subject};
use crate::clock::Now;
use crate::media::MediaKind;
use crate::pull::on_demand;
use crate::pull::table::PullAnswer;
use crate::pull::PullKey;
use crate::srt::{ConnectionId, Listener, ListenerConfig, ListenerEvent, RejectReason};
use crate::state::streams::{
    Continue, IngestOutput, PlayerSession, PublishError, SourceType, StreamId,
};
use crate::state::Registry;
use crate::ts::{DemuxEvent, Demuxer, Muxer};
use mio::net::UdpSocket;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::time::Instant;

const MAX_DATAGRAM: usize = 65_536;
/// Payloads (1316 bytes each) a player may have unacknowledged before it
/// skips to the next keyframe: about 10 MB.
pub(crate) const PLAY_BACKLOG: usize = 8192;
/// 7 TS packets: what one SRT payload carries.
const PAYLOAD: usize = 7 * 188;

/// Most players waiting for on-demand pulls at once.
const MAX_PULLING: usize = 1024;

/// A caller playing a stream (request mode).
struct Player {
    stream: StreamId,
    /// Its session id in the stream's audience (the sessions API).
    session: u64,
    muxer: Option<Muxer>,
    ts: Vec<u8>,
    skipping: bool,
    admission: Option<AdmissionId>,
    expire: Option<Instant>,
}

struct Connection {
    stream: StreamId,
    demuxer: Demuxer,
    /// The admitted session's closing is owed.
    admission: Option<AdmissionId>,
    /// When the admitted session must end.
    expire: Option<Instant>,
    /// Its frames' place on the stream's timeline (moved when it took the
    /// stream over).
    cont: Continue,
}

/// (vhost, app, stream).
type StreamPath = (String, String, String);

/// A connection request waiting for its admission webhook.
struct Waiting {
    conn: ConnectionId,
    peer: SocketAddr,
    target: StreamPath,
    play: bool,
}

pub struct SrtIngest {
    socket: UdpSocket,
    listener: Listener,
    conns: HashMap<ConnectionId, Connection>,
    waiting: HashMap<CheckId, Waiting>,
    /// Players waiting for a stream pulled on demand (the listener holds
    /// their handshake, 5 s at most).
    pulling: Vec<(PullKey, ConnectionId, SocketAddr, Admit)>,
    players: HashMap<ConnectionId, Player>,
    buf: Vec<u8>,
    /// Datagrams made and not yet taken by the socket, in order (sent
    /// with `sendmmsg`, up to 64 a call); the buffers are reused.
    batch: Vec<(SocketAddr, Vec<u8>)>,
    /// How many of `batch` are filled.
    batched: usize,
    owner: u64,
}

pub use crate::srt::stream_id::{access_control_form, parse_stream_id, stream_id_mode};

/// Moves what a demuxer has into the registry and an output for the
/// stream's push sessions.
pub fn drain_demuxer(demuxer: &mut Demuxer, id: StreamId, registry: &mut Registry) -> IngestOutput {
    drain_onto(demuxer, id, registry, &mut Continue::default())
}

/// As [`drain_demuxer`], the frames moved onto the stream's timeline.
fn drain_onto(
    demuxer: &mut Demuxer,
    id: StreamId,
    registry: &mut Registry,
    cont: &mut Continue,
) -> IngestOutput {
    let mut out = IngestOutput {
        stream: Some(id),
        ..Default::default()
    };
    while let Some(ev) = demuxer.poll_event() {
        match ev {
            DemuxEvent::TracksChanged(tracks) => {
                registry.streams.set_tracks(id, tracks);
                out.tracks_changed = true;
            }
            DemuxEvent::Frame(mut frame) => {
                cont.apply(&mut frame);
                registry.streams.on_frame(id, &frame);
                out.frames.push(frame);
            }
        }
    }
    out
}

impl SrtIngest {
    pub fn new(
        socket: UdpSocket,
        owner: u64,
        crypto: Option<crate::srt::crypto::CryptoConfig>,
        max_per_address: usize,
        now: Instant,
    ) -> Self {
        let config = ListenerConfig {
            crypto,
            max_per_address: if max_per_address == 0 {
                usize::MAX
            } else {
                max_per_address
            },
            ..ListenerConfig::default()
        };
        SrtIngest {
            socket,
            listener: Listener::new(config, now),
            conns: HashMap::new(),
            waiting: HashMap::new(),
            pulling: Vec::new(),
            players: HashMap::new(),
            buf: vec![0u8; MAX_DATAGRAM],
            batch: Vec::new(),
            batched: 0,
            owner,
        }
    }

    pub fn deadline(&self) -> Option<Instant> {
        let expire = self
            .conns
            .values()
            .filter_map(|c| c.expire)
            .chain(self.players.values().filter_map(|p| p.expire))
            .min();
        crate::clock::earliest(self.listener.poll_timeout(), expire)
    }

    /// The streams this socket feeds (for ending an app's sessions).
    pub fn connection_of(&self, stream: StreamId) -> Option<ConnectionId> {
        self.conns
            .iter()
            .find(|(_, c)| c.stream == stream)
            .map(|(id, _)| *id)
    }

    pub(crate) fn on_ready(&mut self, cx: &mut Cx<'_>) {
        let now = cx.now;
        loop {
            match self.socket.recv_from(&mut self.buf) {
                Ok((n, from)) => {
                    self.listener.handle_datagram(from, &self.buf[..n], now);
                    self.drain_events(cx);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    crate::debug!("srt: recv: {e}");
                    break;
                }
            }
        }
        self.flush(now);
    }

    pub(crate) fn on_timeout(&mut self, cx: &mut Cx<'_>) {
        let now = cx.now;
        let expired: Vec<ConnectionId> = self
            .conns
            .iter()
            .map(|(id, c)| (id, c.expire))
            .chain(self.players.iter().map(|(id, p)| (id, p.expire)))
            .filter(|(_, e)| e.is_some_and(|e| now >= e))
            .map(|(id, _)| *id)
            .collect();
        for conn in expired {
            crate::info!(
                "srt {conn}: the session has expired (signed policy or webhook lifetime); closing"
            );
            let _ = self.listener.close(conn, now);
            self.end(conn, cx);
        }
        self.listener.handle_timeout(now);
        self.drain_events(cx);
        self.flush(now);
    }

    /// Closes a connection from our side (its app restarted).
    pub(crate) fn close(&mut self, stream: StreamId, cx: &mut Cx<'_>) {
        if let Some(conn) = self.connection_of(stream) {
            let _ = self.listener.close(conn, cx.now);
            self.end(conn, cx);
            self.flush(cx.now);
        }
    }

    /// An accepted publisher of stream `id`: its admission, when it must
    /// end, and where its frames go on the stream's timeline.
    fn add_publisher(
        &mut self,
        conn: ConnectionId,
        id: StreamId,
        admit: &Admit,
        now: Instant,
        cont: Continue,
    ) {
        let expire = admit.expire_at.map(|at| {
            now + std::time::Duration::from_millis(
                at.saturating_sub(Now::read(now).unix_ms.max(0) as u64),
            )
        });
        self.conns.insert(
            conn,
            Connection {
                stream: id,
                demuxer: Demuxer::new(),
                admission: admit.admission,
                expire,
                cont,
            },
        );
    }

    /// A new publisher took this connection's stream over: the connection
    /// closes, the stream goes on.
    fn let_go(&mut self, conn: ConnectionId, cx: &mut Cx<'_>) {
        let _ = self.listener.close(conn, cx.now);
        if let Some(mut c) = self.conns.remove(&conn) {
            if let Some(a) = c.admission.take() {
                cx.access.close(a, Now::read(cx.now));
            }
            crate::info!("srt {conn}: its stream was taken over by a new publisher; closing");
        }
        self.flush(cx.now);
    }

    /// Ends stream `id` (its publisher is gone before it began).
    fn end_stream_of(&mut self, id: StreamId, cx: &mut Cx<'_>) {
        if cx.api.registry.streams.end(id).is_some() {
            cx.out.ingest.push(IngestOutput {
                ended: Some(id),
                ..Default::default()
            });
        }
    }

    fn end(&mut self, conn: ConnectionId, cx: &mut Cx<'_>) {
        if self.players.contains_key(&conn) {
            return self.end_player(conn, cx);
        }
        let (registry, outs) = (&mut cx.api.registry, &mut cx.out.ingest);
        if let Some(mut c) = self.conns.remove(&conn) {
            if let Some(a) = c.admission.take() {
                cx.access.close(a, Now::read(cx.now));
            }
            // The last PES of each track is complete only now.
            c.demuxer.flush();
            outs.push(drain_onto(&mut c.demuxer, c.stream, registry, &mut c.cont));
            if let Some(s) = registry.streams.end(c.stream) {
                crate::info!(
                    "stream [{}/{}/{}] ended (SRT {conn}; {} frames in)",
                    s.vhost,
                    s.app,
                    s.name,
                    s.frames_in
                );
            }
            outs.push(IngestOutput {
                ended: Some(c.stream),
                ..Default::default()
            });
        }
    }

    fn drain_events(&mut self, cx: &mut Cx<'_>) {
        while let Some(event) = self.listener.poll_event() {
            match event {
                ListenerEvent::ConnectionRequest {
                    conn,
                    peer,
                    stream_id,
                } => self.request(cx, conn, peer, stream_id.as_deref()),
                ListenerEvent::Refused {
                    peer,
                    stream_id,
                    reason,
                    detail,
                } => {
                    let cap = self.listener.config().max_per_address;
                    crate::log_throttled!(
                        crate::log::Level::Warn,
                        ("srt-refused", detail),
                        peer.ip(),
                        "srt {peer}: refused (reject code {}, {reason}): {detail}{}; streamid [{}]",
                        reason.code(),
                        if detail == crate::srt::listener::OVER_ADDRESS_CAP {
                            format!(" (cap {cap} from {})", peer.ip())
                        } else {
                            String::new()
                        },
                        stream_id.as_deref().unwrap_or("")
                    );
                }
                ListenerEvent::KeysRefreshed { conn } => {
                    crate::debug!("srt {conn}: keys refreshed");
                }
                ListenerEvent::Data { conn, payload } => {
                    let Some(c) = self.conns.get_mut(&conn) else {
                        continue;
                    };
                    c.demuxer.push(&payload);
                    let out =
                        drain_onto(&mut c.demuxer, c.stream, &mut cx.api.registry, &mut c.cont);
                    if out.tracks_changed || !out.frames.is_empty() {
                        cx.out.ingest.push(out);
                    }
                }
                ListenerEvent::Closed { conn, reason } => {
                    crate::debug!("srt {conn}: closed: {reason}");
                    self.end(conn, cx);
                }
            }
        }
    }

    /// A caller's conclusion: which stream, then the signed policy and the
    /// webhook.
    fn request(
        &mut self,
        cx: &mut Cx<'_>,
        conn: ConnectionId,
        peer: SocketAddr,
        stream_id: Option<&str>,
    ) {
        let (target, play) = match self.admit(&cx.api.registry, stream_id) {
            Ok(t) => t,
            Err((code, why)) => return self.refuse(conn, peer, code, &why, cx.now),
        };
        let Some(spec) = cx.api.registry.vhost(&target.0).map(|v| &v.spec) else {
            return self.refuse(conn, peer, 404, "the virtual host is gone", cx.now);
        };
        let port = self.socket.local_addr().map_or(0, |a| a.port());
        let subject = Subject {
            protocol: if play {
                Protocol::SrtPlay
            } else {
                Protocol::Srt
            },
            client: peer,
            user_agent: None,
            url: request_url(stream_id.unwrap_or(""), &target, port),
            new_url: None,
            bearer: None,
        };
        match cx
            .access
            .check(spec, subject, cx.token.0, Now::read(cx.now))
        {
            Verdict::Allowed(admit) if play => self.start_play(cx, conn, peer, target, admit),
            Verdict::Allowed(admit) => self.start(cx, conn, peer, target, admit),
            Verdict::Refused(why) => self.refuse(conn, peer, 401, &why, cx.now),
            Verdict::Pending(check) => {
                crate::debug!("srt {peer}: waits for the admission webhook");
                let w = Waiting {
                    conn,
                    peer,
                    target,
                    play,
                };
                self.waiting.insert(check, w);
            }
        }
    }

    fn refuse(&mut self, conn: ConnectionId, peer: SocketAddr, code: u16, why: &str, now: Instant) {
        // A caller can repeat this at will: once a minute per address.
        crate::log_throttled!(
            crate::log::Level::Warn,
            ("srt-refused", why),
            peer.ip(),
            "srt {peer}: refused (reject code {}): {why}",
            1000 + u32::from(code)
        );
        let _ = self
            .listener
            .reject(conn, RejectReason::Predefined(code), now);
    }

    /// Starts an admitted connection's stream (where a webhook's `new_url`
    /// sends it); a failure closes the admission.
    fn start(
        &mut self,
        cx: &mut Cx<'_>,
        conn: ConnectionId,
        peer: SocketAddr,
        (vhost, app, name): (String, String, String),
        admit: Admit,
    ) {
        let now = cx.now;
        let wall = Now::read(now);
        let close_admission = |cx: &mut Cx<'_>| {
            if let Some(a) = admit.admission {
                cx.access.close(a, wall);
            }
        };
        let (vhost, app, name) = match &admit.new_url {
            None => (vhost, app, name),
            Some(url) => {
                match crate::admission::redirect(&cx.api.registry, url).and_then(|t| {
                    match cx.api.registry.app(&t.0, &t.1) {
                        Some(a) if a.providers.srt.is_some() => Ok(t),
                        _ => Err(format!(
                            "the webhook's new_url [{url}] names no application with SRT on"
                        )),
                    }
                }) {
                    Ok(t) => t,
                    Err(why) => {
                        self.refuse(conn, peer, 404, &why, now);
                        return close_admission(cx);
                    }
                }
            }
        };
        let registry = &mut cx.api.registry;
        match registry.streams.start(
            &vhost,
            &app,
            &name,
            SourceType::Srt,
            self.owner,
            wall.unix_ms,
        ) {
            Ok(id) => {
                registry.streams.set_publisher_addr(id, "SRT", peer);
                if self.listener.accept(conn, now).is_ok() {
                    crate::info!("stream [{vhost}/{app}/{name}] started by Srt from {peer}");
                    self.add_publisher(conn, id, &admit, now, Continue::default());
                    cx.out.ingest.push(IngestOutput {
                        started: Some(id),
                        ..Default::default()
                    });
                } else {
                    // The caller gave up while the webhook was asked.
                    registry.streams.end(id);
                    close_admission(cx);
                }
            }
            Err(PublishError::AlreadyPublishing) => {
                let old_conn = registry
                    .streams
                    .find(&vhost, &app, &name)
                    .and_then(|s| self.connection_of(s.id));
                let taken = super::takeover::take_over(
                    cx,
                    (&vhost, &app, &name),
                    (SourceType::Srt, self.owner),
                    (peer, admit.vouched),
                );
                let Some(id) = taken else {
                    let why = format!("stream [{vhost}/{app}/{name}] is already being published");
                    self.refuse(conn, peer, 409, &why, now);
                    close_admission(cx);
                    return;
                };
                // The old publisher was a connection of this socket: it
                // lets go here, not through the loop.
                let mine = (self.owner, id);
                if let Some(i) = cx.out.taken_over.iter().position(|t| *t == mine) {
                    cx.out.taken_over.remove(i);
                    if let Some(old) = old_conn {
                        self.let_go(old, cx);
                    }
                }
                if self.listener.accept(conn, now).is_err() {
                    // The caller gave up meanwhile: the stream ends.
                    self.end_stream_of(id, cx);
                    close_admission(cx);
                    return;
                }
                crate::info!("stream [{vhost}/{app}/{name}] taken over by Srt from {peer}");
                let last = cx.api.registry.streams.get(id).and_then(|s| s.last_dts);
                self.add_publisher(conn, id, &admit, now, Continue::after(last));
            }
            Err(PublishError::InvalidName) => {
                // A webhook's new_url may name one.
                self.refuse(conn, peer, 400, crate::state::vhost::STREAM_NAME_RULE, now);
                close_admission(cx);
            }
        }
    }

    /// Starts an admitted player: accepted as a sender, then the stream's
    /// tracks and last GOP as MPEG-TS.
    fn start_play(
        &mut self,
        cx: &mut Cx<'_>,
        conn: ConnectionId,
        peer: SocketAddr,
        (vhost, app, name): (String, String, String),
        admit: Admit,
    ) {
        let now = cx.now;
        let refuse = |this: &mut Self, cx: &mut Cx<'_>, code: u16, why: &str| {
            this.refuse_player(cx, conn, peer, code, why, admit.admission);
        };
        let (vhost, app, name) = match &admit.new_url {
            None => (vhost, app, name),
            Some(url) => match crate::admission::redirect(&cx.api.registry, url) {
                Ok(t) => t,
                Err(why) => return refuse(self, cx, 404, &why),
            },
        };
        if cx.api.registry.streams.find(&vhost, &app, &name).is_none() {
            // Not live: an origin may have it (pulled on demand).
            let key = PullKey {
                vhost: vhost.clone(),
                app: app.clone(),
                name: name.clone(),
            };
            let why = match on_demand::wait_for(
                &cx.api.registry,
                &mut cx.api.pulls,
                &key,
                cx.token.0,
                now,
            ) {
                Ok(()) if self.pulling.len() < MAX_PULLING => {
                    crate::info!("srt {peer}: play waits for [{key}] from its origin");
                    self.pulling.push((key, conn, peer, admit));
                    return;
                }
                Ok(()) => "too many players wait for pulls".to_string(),
                Err(why) => why,
            };
            return refuse(self, cx, 404, &why);
        }
        self.play_live(cx, conn, peer, (vhost, app, name), admit);
    }

    /// Refuses a player whose admission was allowed: the refusal, then
    /// the admission's closing.
    fn refuse_player(
        &mut self,
        cx: &mut Cx<'_>,
        conn: ConnectionId,
        peer: SocketAddr,
        code: u16,
        why: &str,
        admission: Option<AdmissionId>,
    ) {
        self.refuse(conn, peer, code, why, cx.now);
        if let Some(a) = admission {
            cx.access.close(a, Now::read(cx.now));
        }
    }

    /// Plays a live stream to an admitted player.
    fn play_live(
        &mut self,
        cx: &mut Cx<'_>,
        conn: ConnectionId,
        peer: SocketAddr,
        (vhost, app, name): (String, String, String),
        admit: Admit,
    ) {
        let now = cx.now;
        let refuse = |this: &mut Self, cx: &mut Cx<'_>, code: u16, why: &str| {
            this.refuse_player(cx, conn, peer, code, why, admit.admission);
        };
        let Some(stream) = cx.api.registry.streams.find(&vhost, &app, &name) else {
            let why = format!("No such stream: [{vhost}/{app}/{name}]");
            return refuse(self, cx, 404, &why);
        };
        let id = stream.id;
        if let Err(e) = self.listener.accept_sender(conn, now) {
            return refuse(self, cx, 403, &e.to_string());
        }
        crate::info!("srt {peer}: playing [{vhost}/{app}/{name}] (SRT {conn})");
        let mut player = Player {
            stream: id,
            session: 0,
            // A ladder's largest layer (its players take one).
            muxer: Muxer::new(&crate::media::first_layer(stream.tracks())).ok(),
            ts: Vec::with_capacity(4 * PAYLOAD),
            skipping: false,
            admission: admit.admission,
            expire: admit.expire_at.map(|at| {
                now + std::time::Duration::from_millis(
                    at.saturating_sub(Now::read(now).unix_ms.max(0) as u64),
                )
            }),
        };
        for f in stream.gop() {
            if let Some(m) = player.muxer.as_mut() {
                let _ = m.write_frame(f, &mut player.ts);
            }
        }
        player.session = cx.api.registry.streams.open_player(
            id,
            PlayerSession {
                protocol: "srt",
                remote: peer,
                since_ms: Now::read(now).unix_ms,
                bytes: 0,
                endpoint: cx.token.0,
                conn: u64::from(conn.0),
            },
        );
        let session = player.session;
        self.players.insert(conn, player);
        let sent = self.send_ts(conn, now);
        cx.players.add(id, cx.token.0);
        if let Some(a) = cx.api.registry.streams.audience_mut(id) {
            a.srt += 1;
            a.bytes_out += sent;
            a.add_player_bytes(session, sent);
        }
    }

    /// Sends a player's whole 1316-byte payloads; the bytes it handed to
    /// the listener.
    fn send_ts(&mut self, conn: ConnectionId, now: Instant) -> u64 {
        let Some(p) = self.players.get_mut(&conn) else {
            return 0;
        };
        let whole = p.ts.len() / PAYLOAD * PAYLOAD;
        for chunk in p.ts[..whole].chunks(PAYLOAD) {
            self.listener.send(conn, chunk, now);
        }
        p.ts.drain(..whole);
        whole as u64
    }

    /// Ends a player: its admission's closing, and the subscription when
    /// it was the stream's last player here.
    fn end_player(&mut self, conn: ConnectionId, cx: &mut Cx<'_>) {
        let Some(p) = self.players.remove(&conn) else {
            return;
        };
        if let Some(a) = cx.api.registry.streams.audience_mut(p.stream) {
            a.srt = a.srt.saturating_sub(1);
            a.players.remove(&p.session);
        }
        if let Some(a) = p.admission {
            cx.access.close(a, Now::read(cx.now));
        }
        if !self.players.values().any(|o| o.stream == p.stream) {
            cx.players.remove(p.stream, cx.token.0);
        }
    }

    /// Which stream a streamid may publish to, or the reject code and why.
    fn admit(
        &self,
        registry: &Registry,
        stream_id: Option<&str>,
    ) -> Result<(StreamPath, bool), (u16, String)> {
        let Some(id) = stream_id else {
            return Err((400, "no streamid; use {host}/{app}/{stream}".into()));
        };
        let play = match stream_id_mode(id).as_deref() {
            None | Some("publish") => false,
            Some("request") => true,
            Some(other) => {
                // SRT_REJX_BAD_MODE: libsrt callers print the code.
                return Err((
                    405,
                    format!("streamid [{id}]: unknown mode [{other}]; kiln takes m=publish or m=request"),
                ));
            }
        };
        let Some((host, app, stream)) = parse_stream_id(id) else {
            return Err((
                400,
                format!("streamid [{id}] is not {{host}}/{{app}}/{{stream}}"),
            ));
        };
        if !crate::state::vhost::valid_name(&stream) {
            // SRT_REJX_BAD_REQUEST, as for a streamid that does not parse.
            return Err((400, crate::state::vhost::STREAM_NAME_RULE.to_string()));
        }
        let vhost = registry.vhost_for_stream_id(host.as_deref()).ok_or((
            404,
            format!("no virtual host for [{}]", host.unwrap_or_default()),
        ))?;
        let vname = vhost.spec.name.clone();
        let spec = vhost.app(&app).ok_or((
            404,
            format!("Could not find the application: [{vname}/{app}]"),
        ))?;
        if spec.providers.srt.is_none() && !play {
            return Err((
                403,
                format!("SRT is not enabled for the application: [{vname}/{app}]"),
            ));
        }
        Ok(((vname, app, stream), play))
    }

    fn flush(&mut self, now: Instant) {
        use std::os::fd::AsRawFd;
        const BATCH: usize = 64;
        loop {
            // Fill the batch behind what is still waiting in it.
            while self.batched < BATCH {
                if self.batch.len() == self.batched {
                    self.batch.push((
                        SocketAddr::from(([0, 0, 0, 0], 0)),
                        Vec::with_capacity(1500),
                    ));
                }
                let (to, buf) = &mut self.batch[self.batched];
                buf.clear();
                match self.listener.poll_transmit_at(now, buf) {
                    Some(addr) => *to = addr,
                    None => break,
                }
                self.batched += 1;
            }
            if self.batched == 0 {
                return;
            }
            let views: Vec<(SocketAddr, &[u8])> = self.batch[..self.batched]
                .iter()
                .map(|(to, b)| (*to, b.as_slice()))
                .collect();
            let sent = match crate::sys::send_datagrams_to(self.socket.as_raw_fd(), &views) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // This datagram cannot go (e.g. an unreachable
                    // address): drop it, as a lost packet.
                    crate::debug!("srt: send to {}: {e}", views[0].0);
                    1
                }
            };
            drop(views);
            // Keep the unsent ones in front, their buffers reused later.
            self.batch[..self.batched].rotate_left(sent);
            self.batched -= sent;
            if self.batched > 0 && sent == 0 {
                return;
            }
        }
    }
}

/// OME's URL form of a streamid, with a port: the URL itself when the
/// streamid is one (percent-decoded), else built from what it names.
fn request_url(
    stream_id: &str,
    (vhost, app, stream): &(String, String, String),
    port: u16,
) -> String {
    let id = access_control_form(stream_id);
    let decoded = crate::http::percent_decode(&id).unwrap_or_else(|| id.to_string());
    if let Some((scheme, rest)) = decoded.split_once("://") {
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        return if crate::admission::has_port(authority) {
            decoded.clone()
        } else {
            format!("{scheme}://{authority}:{port}/{path}")
        };
    }
    let host = match parse_stream_id(&id) {
        Some((Some(h), _, _)) => h,
        _ => vhost.clone(),
    };
    let query = decoded
        .split_once('?')
        .map(|(_, q)| format!("?{q}"))
        .unwrap_or_default();
    format!("srt://{host}:{port}/{app}/{stream}{query}")
}

impl Endpoint for SrtIngest {
    fn ready(&mut self, cx: &mut Cx<'_>, _peer_closed: bool) {
        self.on_ready(cx);
    }

    fn timeout(&mut self, cx: &mut Cx<'_>) {
        self.on_timeout(cx);
    }

    fn admitted(&mut self, check: CheckId, verdict: Verdict, cx: &mut Cx<'_>) {
        let Some(w) = self.waiting.remove(&check) else {
            if let Verdict::Allowed(Admit {
                admission: Some(a), ..
            }) = verdict
            {
                cx.access.close(a, Now::read(cx.now));
            }
            return;
        };
        match verdict {
            Verdict::Allowed(admit) if w.play => {
                self.start_play(cx, w.conn, w.peer, w.target, admit)
            }
            Verdict::Allowed(admit) => self.start(cx, w.conn, w.peer, w.target, admit),
            Verdict::Refused(why) => self.refuse(w.conn, w.peer, 401, &why, cx.now),
            Verdict::Pending(_) => {}
        }
        self.flush(cx.now);
    }

    fn pull_answered(&mut self, answer: PullAnswer, cx: &mut Cx<'_>) {
        let (waiting, others): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pulling)
            .into_iter()
            .partition(|(k, ..)| *k == answer.key);
        self.pulling = others;
        for (k, conn, peer, admit) in waiting {
            match &answer.result {
                Ok(()) => {
                    let target = (k.vhost.clone(), k.app.clone(), k.name.clone());
                    self.play_live(cx, conn, peer, target, admit);
                }
                Err(why) => self.refuse_player(cx, conn, peer, 404, why, admit.admission),
            }
        }
        self.flush(cx.now);
    }

    fn deadline(&self) -> Option<Instant> {
        SrtIngest::deadline(self)
    }

    fn is_closed(&self) -> bool {
        false
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        let _ = poll.deregister(&mut self.socket);
    }

    /// The listener's state is not known to be sound: nothing safe to
    /// end but the turn (the socket serves on).
    fn abort(&mut self, _cx: &mut Cx<'_>) {}

    fn end_stream(&mut self, stream: StreamId, cx: &mut Cx<'_>) {
        self.close(stream, cx);
    }

    /// The sessions API ends player `conn` of `stream`.
    fn end_session(&mut self, stream: StreamId, conn: u64, cx: &mut Cx<'_>) {
        let Ok(id) = u32::try_from(conn).map(ConnectionId) else {
            return;
        };
        if self.players.get(&id).is_some_and(|p| p.stream == stream) {
            crate::info!("srt {id}: ended from the API; closing");
            let _ = self.listener.close(id, cx.now);
            self.end_player(id, cx);
        }
    }

    fn yield_stream(&mut self, stream: StreamId, cx: &mut Cx<'_>) {
        if let Some(conn) = self.connection_of(stream) {
            self.let_go(conn, cx);
        }
    }

    fn on_media(&mut self, o: &IngestOutput, cx: &mut Cx<'_>) {
        let now = cx.now;
        let conns: Vec<ConnectionId> = self
            .players
            .iter()
            .filter(|(_, p)| o.stream == Some(p.stream) || o.ended == Some(p.stream))
            .map(|(id, _)| *id)
            .collect();
        for conn in conns {
            let backlog = self.listener.send_backlog(conn);
            let Some(p) = self.players.get_mut(&conn) else {
                continue;
            };
            if o.stream == Some(p.stream) {
                let tracks = cx.api.registry.streams.get(p.stream).map(|s| s.tracks());
                if o.tracks_changed {
                    p.muxer = tracks.and_then(|t| Muxer::new(&crate::media::first_layer(t)).ok());
                }
                for f in &o.frames {
                    if backlog > PLAY_BACKLOG && !p.skipping {
                        crate::debug!("srt {conn}: player {backlog} payloads behind; skipping to the next keyframe");
                        p.skipping = true;
                    }
                    if p.skipping {
                        let video_key = f.keyframe
                            && tracks
                                .and_then(|t| t.iter().find(|t| t.id == f.track))
                                .is_some_and(|t| t.kind() == MediaKind::Video);
                        if !(video_key && backlog <= PLAY_BACKLOG / 2) {
                            continue;
                        }
                        p.skipping = false;
                    }
                    if let Some(m) = p.muxer.as_mut() {
                        let _ = m.write_frame(f, &mut p.ts);
                    }
                }
                let sent = self.send_ts(conn, now);
                if let Some((a, session)) = self.players.get(&conn).and_then(|p| {
                    Some((cx.api.registry.streams.audience_mut(p.stream)?, p.session))
                }) {
                    a.bytes_out += sent;
                    a.add_player_bytes(session, sent);
                }
            }
            let ended = self
                .players
                .get(&conn)
                .is_some_and(|p| o.ended == Some(p.stream));
            if ended {
                crate::info!("srt {conn}: the stream it played ended; closing");
                let _ = self.listener.close(conn, now);
                self.end_player(conn, cx);
            }
        }
        self.flush(now);
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_stream_id, stream_id_mode};

    #[test]
    fn stream_id_forms() {
        let t = |h: Option<&str>, a: &str, s: &str| {
            Some((h.map(String::from), a.to_string(), s.to_string()))
        };
        assert_eq!(
            parse_stream_id("default/app/cam"),
            t(Some("default"), "app", "cam")
        );
        assert_eq!(parse_stream_id("app/cam"), t(None, "app", "cam"));
        assert_eq!(
            parse_stream_id("srt://live.example.com:9999/app/cam"),
            t(Some("live.example.com"), "app", "cam")
        );
        assert_eq!(
            parse_stream_id("srt%3A%2F%2F127.0.0.1%3A9999%2Fapp%2Fcam"),
            t(Some("127.0.0.1"), "app", "cam")
        );
        assert_eq!(
            parse_stream_id("#!::h=live.example.com,r=app/cam,m=publish"),
            t(Some("live.example.com"), "app", "cam")
        );
        assert_eq!(
            parse_stream_id("#!::r=app/cam,m=request"),
            t(None, "app", "cam")
        );
        assert_eq!(parse_stream_id("#!::r=app/cam,m=bidirectional"), None);
        let mode = |id: &str| stream_id_mode(id);
        assert_eq!(mode("#!::r=app/cam,m=request").as_deref(), Some("request"));
        assert_eq!(
            mode("%23!::r=app/cam,m=request").as_deref(),
            Some("request")
        );
        assert_eq!(
            mode("srt://h:1/app/cam?mode=request").as_deref(),
            Some("request")
        );
        assert_eq!(
            parse_stream_id("%23!::r=app/cam,m=publish"),
            t(None, "app", "cam")
        );
        assert_eq!(stream_id_mode("#!::r=app/cam"), None);
        assert_eq!(stream_id_mode("default/app/cam"), None);
        assert_eq!(parse_stream_id("justone"), None);
        assert_eq!(parse_stream_id(""), None);
    }
}
