//! RTMP and RTMPS ingest: one publisher connection, the glue between the
//! transport (TCP or TLS with each vhost's certificate by SNI) and the
//! sans-IO [`ServerSession`]. The virtual host is the first whose
//! `host.names` match the tcUrl's host; the application must exist there
//! with the RTMP provider on, and the stream name must be free, or
//! `publish` is refused with a status the client prints.
//!
//! Before a stream starts, the virtual host's signed policy and admission
//! webhook decide (the URL is the tcUrl with its port, then `/` and the
//! stream name with its query, as OME builds it). A webhook's answer may
//! take a while: the `publish` waits for it without blocking anything,
//! and a refusal is `NetStream.Publish.Rejected` with the reason. The
//! session ends at the policy's `stream_expire` or the webhook's
//! `lifetime`, and its closing is sent whatever ends it.
//!
//! The same connection may `play` a live stream instead (RTMP play, for
//! players and other servers): it gets the stream's tracks and last GOP,
//! then every frame as it comes. A player more than
//! [`PLAY_BACKLOG`] bytes behind (or when every connection's unsent and
//! unparsed bytes together reach the server-wide budget) skips to the next
//! keyframe; when the stream ends it gets NetStream.Play.Stop and the
//! connection closes.
//! Players are admitted like publishers (`rtmp` in `enables.publishers`).

use super::budget::BudgetShare;
use super::endpoint::{Cx, Endpoint};
use super::transport::{ReadEnd, ReadGate, Transport};
use crate::admission::manager::{AdmissionId, CheckId, Verdict};
use crate::admission::webhook::{Protocol, Subject};
use crate::clock::Now;
use crate::pull::on_demand;
use crate::pull::table::PullAnswer;
use crate::pull::PullKey;
use crate::rtmp::server::{ServerConfig, ServerEvent, ServerSession};
use crate::state::streams::{IngestOutput, PlayerSession, PublishError, SourceType, StreamId};
use mio::net::TcpStream;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A publisher that sends nothing for this long is dropped.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// The handshake and `publish` must be done within this.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// After a refusal that came from a webhook, the connection stays this
/// long for the client to read it.
/// A `play` waits this long for a stream pulled on demand.
const PULL_WAIT: Duration = Duration::from_secs(15);
const REFUSAL_GRACE: Duration = Duration::from_secs(1);
/// A player with this much unsent output skips frames until the next
/// keyframe (its connection costs at most about this much memory).
pub(crate) const PLAY_BACKLOG: usize = 4 * 1024 * 1024;
/// A connection is not read while this much of its replies waits unsent
/// (a peer that sends commands and never reads the answers): a player's
/// media counts on top, up to [`PLAY_BACKLOG`] (see [`ReadGate`]).
const REPLY_HIGH_WATER: usize = 256 * 1024;

pub(crate) struct RtmpIngest {
    transport: Transport,
    pub peer: SocketAddr,
    session: ServerSession,
    source: SourceType,
    /// The loop's token, as the stream's publisher id.
    owner: u64,
    /// Resolved at `connect`: (vhost, app name as asked, tcUrl).
    target: Option<(Option<String>, String, String)>,
    /// A `publish` or `play` waiting for its admission: (the check, the
    /// stream name, whether it plays).
    pending: Option<(CheckId, String, bool)>,
    /// The stream this connection plays, and its player session id.
    playing: Option<StreamId>,
    player_session: u64,
    /// A `play` of a stream being pulled from its origin on demand.
    waiting_pull: Option<PullKey>,
    /// A player skips frames until the next video keyframe.
    skipping: bool,
    /// The admitted session's closing is owed.
    admission: Option<AdmissionId>,
    /// When the admitted session must end (policy or webhook).
    expire: Option<Instant>,
    pub stream: Option<StreamId>,
    /// When the handshake and first `publish` must be done by; `None` once
    /// the connection has published (after an unpublish only the idle
    /// timeout applies, so the client can close on its own).
    setup_deadline: Option<Instant>,
    last_input: Instant,
    closed: bool,
    /// Publish was refused: close once the refusal has been sent.
    refused: bool,
    /// What this connection's buffers hold of the server-wide budget.
    budget: BudgetShare,
    accepted: Instant,
    /// Bytes written since the last turn (a player's go to its stream).
    written: u64,
    gate: ReadGate,
    /// A read is owed and the turn's rounds ran out: go on at this time.
    read_again: Option<Instant>,
    /// Its frames' place on the stream's timeline (moved when it took the
    /// stream over from a silent publisher).
    cont: crate::state::streams::Continue,
}

/// The tcUrl's host: `rtmp://host[:port]/app...` -> `host`.
pub(crate) fn tc_url_host(tc_url: &str) -> &str {
    let rest = tc_url.split_once("://").map_or(tc_url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or("");
    crate::http::host::host_without_port(authority)
}

impl RtmpIngest {
    pub(crate) fn new(
        stream: TcpStream,
        peer: SocketAddr,
        tls: Option<rustls::ServerConnection>,
        owner: u64,
        budget: BudgetShare,
        now: Instant,
    ) -> Self {
        let source = if tls.is_some() {
            SourceType::Rtmps
        } else {
            SourceType::Rtmp
        };
        RtmpIngest {
            transport: Transport::new(stream, tls),
            peer,
            session: ServerSession::new(ServerConfig::default()),
            source,
            owner,
            target: None,
            pending: None,
            playing: None,
            player_session: 0,
            waiting_pull: None,
            skipping: false,
            admission: None,
            expire: None,
            stream: None,
            setup_deadline: Some(now + SETUP_TIMEOUT),
            last_input: now,
            closed: false,
            refused: false,
            budget,
            accepted: now,
            written: 0,
            gate: ReadGate::default(),
            read_again: None,
            cont: Default::default(),
        }
    }

    pub(crate) fn deadline(&self) -> Instant {
        let idle = self.last_input + IDLE_TIMEOUT;
        let setup = match (self.setup_deadline, &self.pending) {
            // A webhook's own time-out bounds the wait.
            (Some(setup), None) => setup.min(idle),
            _ => idle,
        };
        let own = self.expire.map_or(setup, |e| e.min(setup));
        self.read_again.map_or(own, |at| at.min(own))
    }

    /// What may wait unsent before the connection is not read.
    fn high_water(&self) -> usize {
        if self.playing.is_some() {
            PLAY_BACKLOG + REPLY_HIGH_WATER
        } else {
            REPLY_HIGH_WATER
        }
    }

    /// Reads what arrived, acts on the session's events, writes replies.
    pub(crate) fn on_ready(&mut self, cx: &mut Cx<'_>, out: &mut IngestOutput) {
        self.read_again = None;
        for _ in 0..8 {
            if self.closed {
                return;
            }
            self.read_turn(cx, out);
            let queued = self.session.pending_output().len();
            if self.closed || !self.gate.owed(queued, self.high_water(), false) {
                return;
            }
        }
        self.read_again = Some(cx.now);
    }

    /// One read (unless replies wait over the high-water mark), what it
    /// made happen, and the writes.
    fn read_turn(&mut self, cx: &mut Cx<'_>, out: &mut IngestOutput) {
        let now = cx.now;
        let high = self.high_water();
        if !self
            .gate
            .open(self.session.pending_output().len(), high, false)
        {
            self.finish_turn(cx, out);
            return;
        }
        let session = &mut self.session;
        let mut failure = None;
        let result = self
            .transport
            .read(true, |data| match session.handle_input(data) {
                Ok(()) => session.pending_output().len() < high,
                Err(e) => {
                    failure = Some(e);
                    false
                }
            });
        match result {
            Ok((got, end)) => {
                self.gate.ended(end);
                if got {
                    self.last_input = now;
                }
                if end == ReadEnd::Closed {
                    self.closed = true;
                }
            }
            Err(e) => {
                crate::debug!("rtmp {}: {e}", self.peer);
                self.closed = true;
            }
        }
        if let Some(e) = failure {
            crate::info!("rtmp {}: protocol error: {e}; closing", self.peer);
            self.closed = true;
        }
        if self.budget.update(self.held()).is_err() {
            crate::warn!(
                "rtmp {}: the server-wide ingest buffer budget ({} MiB) is used up; closing",
                self.peer,
                super::budget::DEFAULT_INGEST_BUDGET >> 20
            );
            self.closed = true;
        }
        self.handle_events(cx, out);
        self.finish_turn(cx, out);
    }

    /// Bytes this connection holds against the server-wide budget: partial
    /// and held messages, and a player's unsent output.
    fn held(&self) -> usize {
        let unsent = if self.playing.is_some() {
            self.session.pending_output().len()
        } else {
            0
        };
        self.session.buffered() + unsent
    }

    /// Writes what the session has, and closes a refused or finished
    /// connection.
    fn finish_turn(&mut self, cx: &mut Cx<'_>, out: &mut IngestOutput) {
        self.flush();
        // A player's bytes go to its stream's statistics.
        let written = std::mem::take(&mut self.written);
        if let Some(a) = self
            .playing
            .and_then(|id| cx.api.registry.streams.audience_mut(id))
        {
            a.bytes_out += written;
            a.add_player_bytes(self.player_session, written);
        }
        if self.session.is_closed() {
            self.closed = true;
        }
        if self.refused && !self.closed && self.session.pending_output().is_empty() {
            // The client has its answer; what it sends now would be dropped.
            self.transport.close_write();
            self.closed = true;
        }
        if self.closed {
            self.end(cx, out);
        }
    }

    /// The deadline passed (checked due by the loop).
    pub(crate) fn on_deadline(&mut self, cx: &mut Cx<'_>, out: &mut IngestOutput) {
        if self.read_again.is_some_and(|at| at <= cx.now) {
            self.on_ready(cx, out);
            return;
        }
        let why = if self.expire.is_some_and(|e| cx.now >= e) {
            "the session has expired (signed policy or webhook lifetime)"
        } else if self.setup_deadline.is_some() && self.pending.is_none() {
            "no publish within 10 s"
        } else {
            "no data for 30 s"
        };
        // A peer can cause these at will: once a minute per address.
        crate::log_throttled!(
            crate::log::Level::Info,
            "rtmp-timeout",
            self.peer.ip(),
            "rtmp {}: {why}; closing",
            self.peer
        );
        self.close(cx, out);
    }

    /// A player stops: it leaves its stream's players and audience.
    fn stop_playing(&mut self, cx: &mut Cx<'_>) {
        if let Some(id) = self.playing.take() {
            cx.players.remove(id, cx.token.0);
            if let Some(a) = cx.api.registry.streams.audience_mut(id) {
                a.rtmp = a.rtmp.saturating_sub(1);
            }
            cx.api
                .registry
                .streams
                .close_player(id, self.player_session);
        }
    }

    /// Ends the session from our side (app restarted, server stopping).
    pub(crate) fn close(&mut self, cx: &mut Cx<'_>, out: &mut IngestOutput) {
        self.closed = true;
        self.transport.close_write();
        self.end(cx, out);
    }

    fn end(&mut self, cx: &mut Cx<'_>, out: &mut IngestOutput) {
        if let Some((check, _, _)) = self.pending.take() {
            cx.access.cancel(check);
        }
        self.stop_playing(cx);
        if let Some(a) = self.admission.take() {
            cx.access.close(a, Now::read(cx.now));
        }
        self.expire = None;
        let registry = &mut cx.api.registry;
        if let Some(id) = self.stream.take() {
            if let Some(s) = registry.streams.end(id) {
                crate::info!(
                    "stream [{}/{}/{}] ended ({} frames in)",
                    s.vhost,
                    s.app,
                    s.name,
                    s.frames_in
                );
            }
            out.ended = Some(id);
        }
    }

    fn flush(&mut self) {
        loop {
            let pending = self.session.pending_output();
            if pending.is_empty() && !self.transport.has_pending_tls() {
                return;
            }
            match self.transport.write(pending) {
                Ok(0) => return,
                Ok(n) => {
                    self.session.consume_output(n);
                    self.written += n as u64;
                }
                Err(e) => {
                    crate::debug!("rtmp {}: write: {e}", self.peer);
                    self.closed = true;
                    return;
                }
            }
        }
    }

    fn handle_events(&mut self, cx: &mut Cx<'_>, out: &mut IngestOutput) {
        while let Some(event) = self.session.poll_event() {
            let registry = &mut cx.api.registry;
            match event {
                ServerEvent::Connect { app, tc_url, .. } => {
                    let host = tc_url_host(&tc_url);
                    let vhost = registry.vhost_serving(host).map(|v| v.spec.name.clone());
                    crate::debug!(
                        "rtmp {}: connect app [{app}] tcUrl [{tc_url}] -> vhost [{}]",
                        self.peer,
                        vhost.as_deref().unwrap_or("none matches")
                    );
                    self.target = Some((vhost, app, tc_url));
                    self.session.accept_connect();
                }
                ServerEvent::Play { stream_name } => {
                    self.play(cx, &stream_name);
                }
                ServerEvent::PlayStopped => {
                    self.stop_playing(cx);
                    self.close_admission(cx);
                }
                ServerEvent::Publish { stream_name, .. } => {
                    self.publish(cx, &stream_name, out);
                    // The stream started, the publish was refused, or it
                    // waits for its admission.
                    self.refused = self.stream.is_none() && self.pending.is_none();
                }
                ServerEvent::TracksChanged(tracks) => {
                    if let Some(id) = self.stream {
                        registry.streams.set_tracks(id, tracks);
                        out.tracks_changed = true;
                        out.stream = Some(id);
                    }
                }
                ServerEvent::Frame(mut frame) => {
                    if let Some(id) = self.stream {
                        self.cont.apply(&mut frame);
                        registry.streams.on_frame(id, &frame);
                        out.frames.push(frame);
                        out.stream = Some(id);
                    }
                }
                ServerEvent::Metadata(_) => {}
                ServerEvent::Unpublish => self.end(cx, out),
            }
        }
    }

    /// The URL a signed policy and a webhook see: the tcUrl with its port
    /// (the listener's when it has none), `/`, the stream name, and the
    /// queries of both in order.
    fn request_url(&mut self, tc_url: &str, name_and_query: &str) -> String {
        let (base, tc_query) = tc_url.split_once('?').unwrap_or((tc_url, ""));
        let base = base.trim_end_matches('/');
        let (scheme, rest) = base.split_once("://").unwrap_or(("rtmp", base));
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let mut url = format!("{scheme}://{authority}");
        if !crate::admission::has_port(authority) {
            if let Ok(local) = self.transport.stream_mut().local_addr() {
                url.push_str(&format!(":{}", local.port()));
            }
        }
        if !path.is_empty() {
            url.push('/');
            url.push_str(path);
        }
        let (name, query) = name_and_query
            .split_once('?')
            .unwrap_or((name_and_query, ""));
        url.push('/');
        url.push_str(name);
        let queries: Vec<&str> = [tc_query, query]
            .into_iter()
            .filter(|q| !q.is_empty())
            .collect();
        if !queries.is_empty() {
            url.push('?');
            url.push_str(&queries.join("&"));
        }
        url
    }

    /// What the signed policy and the webhook are asked about.
    fn subject(&mut self, protocol: Protocol, tc_url: &str, raw_name: &str) -> Subject {
        Subject {
            protocol,
            client: self.peer,
            user_agent: None,
            url: self.request_url(tc_url, raw_name),
            new_url: None,
            bearer: None,
        }
    }

    fn reject(&mut self, code: &str, why: &str) {
        crate::log_throttled!(
            crate::log::Level::Warn,
            ("rtmp-refused", why),
            self.peer.ip(),
            "rtmp {}: publish refused: {why}",
            self.peer
        );
        self.session.reject_publish_with_code(code, why);
    }

    /// A `publish`: the vhost, then the signed policy and the webhook,
    /// then the application and the name.
    fn publish(&mut self, cx: &mut Cx<'_>, raw_name: &str, out: &mut IngestOutput) {
        let Some((vhost, _, tc_url)) = self.target.clone() else {
            self.session.reject_publish("connect first");
            return;
        };
        let Some(vhost) = vhost else {
            self.reject(
                "NetStream.Publish.BadName",
                "No virtual host serves this tcUrl host",
            );
            return;
        };
        // RTMP stream names may carry a query (`stream?key=...`); it is not
        // part of the name.
        let name = raw_name.split('?').next().unwrap_or("").to_string();
        if !crate::state::vhost::valid_name(&name) {
            self.reject(
                "NetStream.Publish.BadName",
                crate::state::vhost::STREAM_NAME_RULE,
            );
            return;
        }
        let Some(spec) = cx.api.registry.vhost(&vhost).map(|v| &v.spec) else {
            self.reject("NetStream.Publish.BadName", "The virtual host is gone");
            return;
        };
        let subject = self.subject(Protocol::Rtmp, &tc_url, raw_name);
        match cx
            .access
            .check(spec, subject, cx.token.0, Now::read(cx.now))
        {
            Verdict::Allowed(admit) => self.start(cx, &vhost, name, admit, out),
            Verdict::Refused(why) => self.reject("NetStream.Publish.Rejected", &why),
            Verdict::Pending(check) => {
                crate::debug!(
                    "rtmp {}: publish waits for the admission webhook",
                    self.peer
                );
                self.pending = Some((check, name, false));
            }
        }
    }

    /// A `play`: the vhost, then the signed policy and the webhook (as
    /// `rtmp` publishers), then the live stream.
    fn play(&mut self, cx: &mut Cx<'_>, raw_name: &str) {
        let Some((Some(vhost), _, tc_url)) = self.target.clone() else {
            self.session.reject_play(
                "NetStream.Play.StreamNotFound",
                "No virtual host serves this tcUrl host",
            );
            return;
        };
        let name = raw_name.split('?').next().unwrap_or("").to_string();
        if !crate::state::vhost::valid_name(&name) {
            return self.session.reject_play(
                "NetStream.Play.StreamNotFound",
                crate::state::vhost::STREAM_NAME_RULE,
            );
        }
        let Some(spec) = cx.api.registry.vhost(&vhost).map(|v| &v.spec) else {
            return self
                .session
                .reject_play("NetStream.Play.StreamNotFound", "The virtual host is gone");
        };
        let subject = self.subject(Protocol::RtmpPlay, &tc_url, raw_name);
        match cx
            .access
            .check(spec, subject, cx.token.0, Now::read(cx.now))
        {
            Verdict::Allowed(admit) => self.start_play(cx, &vhost, name, admit),
            Verdict::Refused(why) => {
                crate::warn!("rtmp {}: play refused: {why}", self.peer);
                self.session.reject_play("NetStream.Play.Failed", &why);
            }
            Verdict::Pending(check) => self.pending = Some((check, name, true)),
        }
    }

    /// Starts playing the admitted stream: its tracks and last GOP first.
    fn start_play(
        &mut self,
        cx: &mut Cx<'_>,
        vhost: &str,
        name: String,
        admit: crate::admission::manager::Admit,
    ) {
        let now = cx.now;
        let wall = Now::read(now);
        self.admission = admit.admission;
        self.expire = admit
            .expire_at
            .map(|at| now + Duration::from_millis(at.saturating_sub(wall.unix_ms.max(0) as u64)));
        let app = self.target.as_ref().map_or("", |(_, a, _)| a).to_string();
        let (vhost, app, name) = match &admit.new_url {
            None => (vhost.to_string(), app, name),
            Some(url) => match crate::admission::redirect(&cx.api.registry, url) {
                Ok(t) => t,
                Err(why) => {
                    self.session
                        .reject_play("NetStream.Play.StreamNotFound", &why);
                    return self.close_admission(cx);
                }
            },
        };
        if cx.api.registry.streams.find(&vhost, &app, &name).is_none() {
            // Not live: an origin may have it (pulled on demand).
            let key = PullKey {
                vhost: vhost.clone(),
                app: app.clone(),
                name: name.clone(),
            };
            let Err(why) =
                on_demand::wait_for(&cx.api.registry, &mut cx.api.pulls, &key, cx.token.0, now)
            else {
                crate::info!("rtmp {}: play waits for [{key}] from its origin", self.peer);
                self.waiting_pull = Some(key);
                self.setup_deadline = Some(now + PULL_WAIT);
                return;
            };
            crate::info!("rtmp {}: play refused: {why}", self.peer);
            self.session
                .reject_play("NetStream.Play.StreamNotFound", &why);
            return self.close_admission(cx);
        }
        self.play_live(cx, &vhost, &app, &name);
    }

    /// Plays a live stream: its tracks and last GOP, then every frame.
    fn play_live(&mut self, cx: &mut Cx<'_>, vhost: &str, app: &str, name: &str) {
        let now = cx.now;
        let Some(stream) = cx.api.registry.streams.find(vhost, app, name) else {
            let why = format!("No such stream: [{vhost}/{app}/{name}]");
            self.session
                .reject_play("NetStream.Play.StreamNotFound", &why);
            return self.close_admission(cx);
        };
        let id = stream.id;
        self.session.accept_play();
        let sent = self.session.send_tracks(stream.tracks()).and_then(|()| {
            stream
                .gop()
                .iter()
                .try_for_each(|f| self.session.send_frame(f))
        });
        if let Err(e) = sent {
            crate::info!("rtmp {}: play: {e}; closing", self.peer);
            self.closed = true;
            return;
        }
        crate::info!("rtmp {}: playing [{vhost}/{app}/{name}]", self.peer);
        self.playing = Some(id);
        if let Some(a) = cx.api.registry.streams.audience_mut(id) {
            a.rtmp += 1;
        }
        self.player_session = cx.api.registry.streams.open_player(
            id,
            PlayerSession {
                protocol: "rtmp",
                remote: self.peer,
                since_ms: Now::read(now).unix_ms,
                bytes: 0,
                endpoint: cx.token.0,
                conn: 0,
            },
        );
        self.skipping = false;
        self.setup_deadline = None;
        self.last_input = now;
        cx.players.add(id, cx.token.0);
    }

    /// Starts the admitted stream (where a webhook's `new_url` sends it).
    fn start(
        &mut self,
        cx: &mut Cx<'_>,
        vhost: &str,
        name: String,
        admit: crate::admission::manager::Admit,
        out: &mut IngestOutput,
    ) {
        let now = cx.now;
        self.admission = admit.admission;
        let wall = Now::read(now);
        self.expire = admit
            .expire_at
            .map(|at| now + Duration::from_millis(at.saturating_sub(wall.unix_ms.max(0) as u64)));
        let registry = &mut cx.api.registry;
        let app = self.target.as_ref().map_or("", |(_, a, _)| a).to_string();
        let (vhost, app, name) = match &admit.new_url {
            None => (vhost.to_string(), app, name),
            Some(url) => match crate::admission::redirect(registry, url) {
                Ok(t) => t,
                Err(why) => return self.refuse_admitted(cx, &why),
            },
        };
        let rtmp_on = registry
            .app(&vhost, &app)
            .map(|a| a.providers.rtmp.is_some());
        match rtmp_on {
            None => {
                let host = self
                    .target
                    .as_ref()
                    .map_or("", |(_, _, tc_url)| tc_url_host(tc_url));
                let why = format!(
                    "Could not find the application: [{vhost}/{app}] (virtual host [{vhost}] was chosen for the host name [{host}] of the tcUrl)"
                );
                return self.refuse_admitted(cx, &why);
            }
            Some(false) => {
                let why = format!("RTMP is not enabled for the application: [{vhost}/{app}]");
                return self.refuse_admitted(cx, &why);
            }
            Some(true) => {}
        }
        if name.is_empty() {
            return self.refuse_admitted(cx, "The stream name is empty");
        }
        match cx.api.registry.streams.start(
            &vhost,
            &app,
            &name,
            self.source,
            self.owner,
            wall.unix_ms,
        ) {
            Ok(id) => {
                cx.api
                    .registry
                    .streams
                    .set_publisher_addr(id, "TCP", self.peer);
                self.stream = Some(id);
                self.setup_deadline = None;
                self.last_input = now;
                self.session.accept_publish();
                out.started = Some(id);
                crate::info!(
                    "stream [{vhost}/{app}/{name}] started by {} from {}",
                    self.source.api_name(),
                    self.peer
                );
            }
            Err(PublishError::AlreadyPublishing) => {
                if let Some(id) = super::takeover::take_over(
                    cx,
                    (&vhost, &app, &name),
                    (self.source, self.owner),
                    (self.peer, admit.vouched),
                ) {
                    self.cont = crate::state::streams::Continue::after(
                        cx.api.registry.streams.get(id).and_then(|s| s.last_dts),
                    );
                    self.stream = Some(id);
                    self.setup_deadline = None;
                    self.last_input = now;
                    self.session.accept_publish();
                    crate::info!(
                        "stream [{vhost}/{app}/{name}] taken over by {} from {}",
                        self.source.api_name(),
                        self.peer
                    );
                    return;
                }
                let why = format!("The stream is already being published: [{vhost}/{app}/{name}]");
                self.reject("NetStream.Publish.BadName", &why);
                self.close_admission(cx);
            }
            Err(PublishError::InvalidName) => {
                // A webhook's new_url may name one.
                self.reject(
                    "NetStream.Publish.BadName",
                    crate::state::vhost::STREAM_NAME_RULE,
                );
                self.close_admission(cx);
            }
        }
    }

    /// Refuses a publish that was admitted (its closing is sent).
    fn refuse_admitted(&mut self, cx: &mut Cx<'_>, why: &str) {
        self.reject("NetStream.Publish.BadName", why);
        self.close_admission(cx);
    }

    fn close_admission(&mut self, cx: &mut Cx<'_>) {
        self.expire = None;
        if let Some(a) = self.admission.take() {
            cx.access.close(a, Now::read(cx.now));
        }
    }
}

impl Endpoint for RtmpIngest {
    fn ready(&mut self, cx: &mut Cx<'_>, _peer_closed: bool) {
        let mut out = IngestOutput::default();
        self.on_ready(cx, &mut out);
        cx.out.ingest.push(out);
    }

    fn timeout(&mut self, cx: &mut Cx<'_>) {
        let mut out = IngestOutput::default();
        self.on_deadline(cx, &mut out);
        cx.out.ingest.push(out);
    }

    fn admitted(&mut self, check: CheckId, verdict: Verdict, cx: &mut Cx<'_>) {
        let (name, play) = match self.pending.take() {
            Some((c, name, play)) if c == check && !self.closed => (name, play),
            other => {
                self.pending = other;
                // Not (or no longer) waited for: close what was allowed.
                if let Verdict::Allowed(a) = verdict {
                    if let Some(a) = a.admission {
                        cx.access.close(a, Now::read(cx.now));
                    }
                }
                return;
            }
        };
        let mut out = IngestOutput::default();
        let vhost = self
            .target
            .as_ref()
            .and_then(|(v, _, _)| v.clone())
            .unwrap_or_default();
        if play {
            match verdict {
                Verdict::Allowed(admit) => self.start_play(cx, &vhost, name, admit),
                Verdict::Refused(why) => self.session.reject_play("NetStream.Play.Failed", &why),
                Verdict::Pending(_) => {}
            }
            if self.playing.is_none() && self.waiting_pull.is_none() {
                self.setup_deadline = Some(cx.now + REFUSAL_GRACE);
            }
            self.finish_turn(cx, &mut out);
            cx.out.ingest.push(out);
            return;
        }
        match verdict {
            Verdict::Allowed(admit) => self.start(cx, &vhost, name, admit, &mut out),
            Verdict::Refused(why) => self.reject("NetStream.Publish.Rejected", &why),
            Verdict::Pending(_) => {}
        }
        self.refused = self.stream.is_none();
        if self.refused {
            // The set-up time may have passed while the webhook was asked:
            // a moment to send the refusal, then the connection closes.
            self.setup_deadline = Some(cx.now + REFUSAL_GRACE);
        }
        self.finish_turn(cx, &mut out);
        cx.out.ingest.push(out);
    }

    fn pull_answered(&mut self, answer: PullAnswer, cx: &mut Cx<'_>) {
        if self.waiting_pull.as_ref() != Some(&answer.key) || self.closed {
            return;
        }
        self.waiting_pull = None;
        let k = answer.key;
        match answer.result {
            Ok(()) => self.play_live(cx, &k.vhost, &k.app, &k.name),
            Err(why) => {
                crate::info!("rtmp {}: play refused: {why}", self.peer);
                self.session
                    .reject_play("NetStream.Play.StreamNotFound", &why);
                self.close_admission(cx);
            }
        }
        if self.playing.is_none() {
            self.setup_deadline = Some(cx.now + REFUSAL_GRACE);
        }
        let mut out = IngestOutput::default();
        self.finish_turn(cx, &mut out);
        cx.out.ingest.push(out);
    }

    fn deadline(&self) -> Option<Instant> {
        Some(RtmpIngest::deadline(self))
    }

    fn is_closed(&self) -> bool {
        self.closed
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        let _ = poll.deregister(self.transport.stream_mut());
    }

    fn abort(&mut self, cx: &mut Cx<'_>) {
        let mut out = IngestOutput::default();
        self.close(cx, &mut out);
        cx.out.ingest.push(out);
    }

    fn on_media(&mut self, o: &IngestOutput, cx: &mut Cx<'_>) {
        let Some(id) = self.playing.filter(|_| !self.closed) else {
            return;
        };
        if o.stream == Some(id) {
            let mut sent = Ok(());
            if o.tracks_changed {
                if let Some(s) = cx.api.registry.streams.get(id) {
                    sent = self.session.send_tracks(s.tracks());
                }
            }
            for f in &o.frames {
                if sent.is_err() {
                    break;
                }
                let backlog = self.session.pending_output().len();
                // Behind by its own bound, or the server-wide budget is
                // used up: skip to the next keyframe.
                let over = backlog > PLAY_BACKLOG || self.budget.update(self.held()).is_err();
                if over && !self.skipping {
                    crate::debug!(
                        "rtmp {}: player {backlog} bytes behind; skipping to the next keyframe",
                        self.peer
                    );
                    self.skipping = true;
                }
                if self.skipping {
                    let video_key = f.keyframe
                        && cx
                            .api
                            .registry
                            .streams
                            .get(id)
                            .and_then(|s| s.track(f.track))
                            .is_some_and(|t| t.kind() == crate::media::MediaKind::Video);
                    if !(video_key && !over && backlog <= PLAY_BACKLOG / 2) {
                        continue;
                    }
                    self.skipping = false;
                }
                sent = self.session.send_frame(f);
                // A player that takes what it is sent is not idle.
                self.last_input = cx.now;
            }
            if let Err(e) = sent {
                crate::info!("rtmp {}: play: {e}; closing", self.peer);
                self.closed = true;
            }
        }
        if o.ended == Some(id) {
            self.session.stop_play("The stream ended");
        }
        let mut out = IngestOutput::default();
        self.finish_turn(cx, &mut out);
    }

    fn end_stream(&mut self, stream: StreamId, cx: &mut Cx<'_>) {
        if self.stream == Some(stream) {
            self.abort(cx);
        }
    }

    /// The sessions API ends this player.
    fn end_session(&mut self, stream: StreamId, _conn: u64, cx: &mut Cx<'_>) {
        if self.playing == Some(stream) {
            crate::info!("rtmp {}: ended from the API; closing", self.peer);
            self.abort(cx);
        }
    }

    /// A new publisher took the stream over (this one was silent, or the
    /// application lets newcomers in): the connection closes, the stream
    /// goes on.
    fn yield_stream(&mut self, stream: StreamId, cx: &mut Cx<'_>) {
        if self.stream != Some(stream) {
            return;
        }
        self.stream = None;
        crate::info!(
            "rtmp {}: its stream was taken over by a new publisher; closing",
            self.peer
        );
        let mut out = IngestOutput::default();
        self.close(cx, &mut out);
        cx.out.ingest.push(out);
    }

    fn unproven_since(&self) -> Option<Instant> {
        // Still within its set-up time (no publish or play yet), nothing
        // pending with a webhook.
        let busy = self.pending.is_some()
            || self.stream.is_some()
            || self.playing.is_some()
            || self.waiting_pull.is_some();
        (self.setup_deadline.is_some() && !busy).then_some(self.accepted)
    }
}

#[cfg(test)]
mod tests {
    use super::tc_url_host;

    #[test]
    fn tc_url_hosts() {
        assert_eq!(tc_url_host("rtmp://127.0.0.1:1935/app"), "127.0.0.1");
        assert_eq!(
            tc_url_host("rtmps://live.example.com/app/x"),
            "live.example.com"
        );
        assert_eq!(tc_url_host("rtmp://[::1]:1935/app"), "::1");
        assert_eq!(tc_url_host("garbage"), "garbage");
    }
}
