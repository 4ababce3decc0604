//! One viewer connection (LL-HLS/HLS over HTTP or HTTPS): the glue between
//! the socket, the sans-IO [`RequestReader`] and [`hls::serve`]. Requests
//! are answered in order; one that must wait (a blocking playlist reload, a
//! preload-hinted part) is parked until the stream's next part wakes the
//! connection. Bodies are the packager's shared bytes, written with
//! `writev` behind a per-response head; on plain TCP a part kept in a
//! memory file goes out with `sendfile` from it (the head sent with
//! `MSG_MORE` so both leave together): nothing is copied per viewer.

use super::endpoint::{Cx, Endpoint};
use super::transport::{ReadEnd, ReadGate, Transport};
use crate::admission::manager::{Admit, CheckId, Verdict};
use crate::admission::webhook::{Protocol, Subject};
use crate::clock::Now;
use crate::hls::memory::Shared;
use crate::hls::serve::{self, Answer, Gate, Reply};
use crate::http::response::reason;
use crate::http::{ReaderLimits, Request, RequestReader};
use crate::pull::on_demand::{self, OnDemand};
use crate::pull::table::PullAnswer;
use crate::pull::PullKey;
use bytes::Bytes;
use mio::net::TcpStream;
use std::collections::VecDeque;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// A request head may take this long; a quiet keep-alive connection closes
/// after `IDLE`.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
const IDLE: Duration = Duration::from_secs(30);
/// Stop answering pipelined requests, and reading, while this much output
/// waits (LL-HLS bodies are the packager's shared bytes: little of it is
/// this connection's own).
const OUTPUT_HIGH_WATER: usize = 1024 * 1024;
/// The same for a signalling WebSocket, whose frames are its own bytes.
#[cfg(feature = "webrtc")]
const SIGNAL_HIGH_WATER: usize = 64 * 1024;
/// Read, answer, write rounds in one turn; past them the connection
/// re-queues itself (see [`ReadGate`]).
const PUMP_ROUNDS: usize = 8;
const LIMITS: ReaderLimits = ReaderLimits {
    max_head_bytes: 8 * 1024,
    // A WHEP offer (an SDP of a few KB); LL-HLS requests have no body.
    max_body_bytes: 32 * 1024,
};

struct Parked {
    req: Request,
    since: Instant,
    until: Instant,
    waiting: Waiting,
}

/// What a parked request waits for. The rare cases are boxed: a thousand
/// LL-HLS viewers parked on blocking reloads hold one word for it each.
enum Waiting {
    /// The stream's next part (or a DVR segment being read).
    Media,
    /// The admission webhook: the check and the stream asked for.
    Admission(Box<(CheckId, (String, String, String))>),
    /// The stream to be pulled from its origin, with the admission it
    /// already has (session, stream).
    Pull(Box<(PullKey, Option<Admitted>)>),
}

/// A viewer's admission: its session token and the stream it names.
type Admitted = (String, (String, String, String));

/// A request for a stream pulled on demand waits at most this long.
const PULL_WAIT: Duration = Duration::from_secs(15);

/// A parked admission waits at most this long beyond the webhook's own
/// time-out (which always answers first).
const ADMISSION_WAIT: Duration = Duration::from_secs(120);

pub(crate) struct ViewerConn {
    transport: Transport,
    peer: SocketAddr,
    reader: RequestReader,
    out: VecDeque<Shared>,
    /// Bytes of `out[0]` already written.
    out_off: usize,
    out_bytes: usize,
    parked: Option<Parked>,
    last_activity: Instant,
    /// Close once the output is written.
    closing: bool,
    closed: bool,
    /// When it was accepted, until a whole request head has arrived (then
    /// `None`).
    unproven_since: Option<Instant>,
    gate: ReadGate,
    /// A read is owed and the turn's rounds ran out: go on at this time.
    read_again: Option<Instant>,
    /// Upgraded to OME's WebRTC signalling (a WebSocket).
    #[cfg(feature = "webrtc")]
    signal: Option<Box<super::webrtc_signal::WsSignal>>,
}

impl ViewerConn {
    pub(crate) fn new(
        stream: TcpStream,
        peer: SocketAddr,
        tls: Option<rustls::ServerConnection>,
        now: Instant,
    ) -> Self {
        ViewerConn {
            transport: Transport::new(stream, tls),
            peer,
            reader: RequestReader::new(LIMITS),
            out: VecDeque::new(),
            out_off: 0,
            out_bytes: 0,
            parked: None,
            last_activity: now,
            closing: false,
            closed: false,
            unproven_since: Some(now),
            gate: ReadGate::default(),
            read_again: None,
            #[cfg(feature = "webrtc")]
            signal: None,
        }
    }

    /// What this connection may have queued before it stops reading.
    fn high_water(&self) -> usize {
        #[cfg(feature = "webrtc")]
        if self.signal.is_some() {
            return SIGNAL_HIGH_WATER;
        }
        OUTPUT_HIGH_WATER
    }

    /// Its input buffer takes no more: two request heads at most wait
    /// unanswered (an unauthenticated peer pins ~16 KiB, plus one WHEP
    /// offer's body), or a WebSocket holds its largest message.
    fn input_full(&self) -> bool {
        #[cfg(feature = "webrtc")]
        if let Some(s) = &self.signal {
            return s.input_full();
        }
        self.reader.buffered() > 2 * LIMITS.max_head_bytes
    }

    /// Reads (on an edge, or when a read is owed), answers and writes,
    /// until nothing is owed; bounded per turn, then re-queued.
    fn pump(&mut self, cx: &mut Cx<'_>, peer_closed: bool, edge: bool) {
        self.read_again = None;
        let mut read = edge;
        for _ in 0..PUMP_ROUNDS {
            if read
                || self
                    .gate
                    .owed(self.out_bytes, self.high_water(), self.input_full())
            {
                self.read(peer_closed, cx.now);
            }
            self.answer(cx);
            self.write(cx.now);
            self.end_signal(cx);
            read = false;
            if self.closed
                || !self
                    .gate
                    .owed(self.out_bytes, self.high_water(), self.input_full())
            {
                return;
            }
        }
        self.read_again = Some(cx.now);
    }

    fn read(&mut self, peer_closed: bool, now: Instant) {
        let (queued, high, full) = (self.out_bytes, self.high_water(), self.input_full());
        if !self.gate.open(queued, high, full) {
            return;
        }
        let reader = &mut self.reader;
        #[cfg(feature = "webrtc")]
        let mut signal = self.signal.as_deref_mut();
        let result = self.transport.read(peer_closed, |data| {
            #[cfg(feature = "webrtc")]
            if let Some(s) = signal.as_deref_mut() {
                return s.feed(data, now);
            }
            reader.feed(data);
            // See `input_full` (a parked request holds the rest back).
            reader.buffered() <= 2 * LIMITS.max_head_bytes
        });
        match result {
            Ok((got, end)) => {
                self.gate.ended(end);
                if got {
                    self.last_activity = now;
                }
                if end == ReadEnd::Closed {
                    self.closing = true;
                }
            }
            Err(e) => {
                crate::debug!("viewer {}: read: {e}", self.peer);
                self.closed = true;
            }
        }
    }

    /// Answers the parked request if it can be now, then every complete
    /// request in order, until one must wait.
    fn answer(&mut self, cx: &mut Cx<'_>) {
        #[cfg(feature = "webrtc")]
        if let Some(s) = self.signal.as_deref_mut() {
            let frames = s.process(self.peer, cx);
            self.signalled(frames);
            return;
        }
        if let Some(p) = self.parked.take() {
            // Only `pull_answered` and `admitted` move the others on (or
            // their time-out).
            let late = match p.waiting {
                Waiting::Media => None,
                Waiting::Pull(_) => Some("The stream did not come from its origin in time"),
                Waiting::Admission(_) => Some("No admission decision came"),
            };
            match late {
                None => {
                    if !self.respond(p.req, Some(p.since), None, cx) {
                        return;
                    }
                }
                Some(why) if cx.now >= p.until => self.queue(&p.req, &Reply::error(503, why)),
                Some(_) => {
                    self.parked = Some(p);
                    return;
                }
            }
        }
        while !self.closed && self.out_bytes < OUTPUT_HIGH_WATER {
            let next = self.reader.next_request();
            if matches!(next, Ok(Some(_))) {
                self.unproven_since = None;
            }
            match next {
                Ok(Some(req)) => {
                    if !self.respond(req, None, None, cx) {
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    crate::debug!("viewer {}: {e}", self.peer);
                    let r = Reply::error(e.status(), &e.to_string());
                    self.push_head(&r, r.len(), true);
                    for b in r.body {
                        self.push_body(b);
                    }
                    self.closing = true;
                    return;
                }
            }
        }
    }

    /// Answers one request, or parks it (false).
    fn respond(
        &mut self,
        req: Request,
        since: Option<Instant>,
        admitted: Option<(&str, &(String, String, String))>,
        cx: &mut Cx<'_>,
    ) -> bool {
        #[cfg(feature = "webrtc")]
        if let Some(route) = super::webrtc_signal::route(&req) {
            return self.signalling(req, route, cx);
        }
        let gate = Gate {
            sessions: cx.access,
            wall: Now::read(cx.now),
            admitted,
        };
        let offset = cx.api.utc_offset;
        let session = admitted.map(|(s, t)| (s.to_string(), t.clone()));
        if !cx.api.pulls.table.is_empty() {
            if let Some(key) = stream_key(&req, &cx.api.registry) {
                cx.api.pulls.table.touch(&key, cx.now);
            }
        }
        match serve::answer(
            &req,
            &cx.api.hls,
            &cx.api.registry,
            cx.now,
            since,
            offset,
            gate,
        ) {
            Answer::Reply(r) => {
                if let Some(m) = r.viewer {
                    let ip = self.peer.ip();
                    let ended =
                        cx.api.registry.streams.get(m.stream).is_some_and(|s| {
                            s.audience.is_ended_http(ip, m.session, m.hls, cx.now)
                        });
                    if ended {
                        // Ended through the sessions API: refused a while.
                        let why = "This viewer's session was ended by the operator";
                        self.queue(&req, &Reply::error(403, why));
                        return true;
                    }
                    if let Some(a) = cx.api.registry.streams.audience_mut(m.stream) {
                        let bytes = if req.method() == "HEAD" {
                            0
                        } else {
                            r.len() as u64
                        };
                        let media = !req.path().ends_with(".m3u8");
                        a.note_http(self.peer, m.session, media, m.hls, m.window, bytes, cx.now);
                        a.bytes_out += bytes;
                    }
                }
                self.queue(&req, &r);
                true
            }
            Answer::Wait { stream, until } => {
                cx.api.hls.wait(stream, cx.token.0);
                self.parked = Some(Parked {
                    req,
                    since: since.unwrap_or(cx.now),
                    until,
                    waiting: Waiting::Media,
                });
                false
            }
            Answer::Read {
                key, path, until, ..
            } => {
                if cx
                    .api
                    .hls
                    .read_dvr(key, path, self.peer.ip(), cx.token.0)
                    .is_err()
                {
                    let why = "Too many DVR segments are being read; try again";
                    self.queue(&req, &Reply::error(503, why));
                    return true;
                }
                self.parked = Some(Parked {
                    req,
                    since: since.unwrap_or(cx.now),
                    until,
                    waiting: Waiting::Media,
                });
                false
            }
            Answer::Admit {
                protocol,
                vhost,
                app,
                stream,
            } => self.admit(req, protocol, (vhost, app, stream), cx),
            Answer::Pull { vhost, app, stream } => {
                let key = PullKey {
                    vhost,
                    app,
                    name: stream,
                };
                self.pull(req, key, session, cx)
            }
        }
    }

    /// A stream that is not live but has an origin: pull it (unless that
    /// is under way) and park the request until it is live or failed.
    fn pull(
        &mut self,
        req: Request,
        key: PullKey,
        session: Option<Admitted>,
        cx: &mut Cx<'_>,
    ) -> bool {
        match on_demand::request(
            &cx.api.registry,
            &mut cx.api.pulls,
            &key,
            cx.token.0,
            cx.now,
        ) {
            OnDemand::Waiting => self.park_for_pull(req, key, session, cx.now),
            OnDemand::NotFound => {
                self.queue(&req, &Reply::error(404, "No such stream"));
                true
            }
            OnDemand::Refused(status, why) => {
                self.queue(&req, &Reply::error(status, &why));
                true
            }
        }
    }

    /// Parks `req` until the pull of `key` is live or failed (false: the
    /// request waits).
    fn park_for_pull(
        &mut self,
        req: Request,
        key: PullKey,
        session: Option<Admitted>,
        now: Instant,
    ) -> bool {
        self.parked = Some(Parked {
            req,
            since: now,
            until: now + PULL_WAIT,
            waiting: Waiting::Pull(Box::new((key, session))),
        });
        false
    }

    /// The URL a signed policy and a webhook see: scheme, `Host` with its
    /// port (the listener's when it has none), path and query.
    fn request_url(&mut self, req: &Request) -> String {
        let tls = self.transport.is_tls();
        let host = req.header_str("host").unwrap_or("");
        let port = if crate::admission::has_port(host) {
            String::new()
        } else {
            let p = self
                .transport
                .stream_mut()
                .local_addr()
                .map_or(0, |a| a.port());
            format!(":{p}")
        };
        let scheme = if tls { "https" } else { "http" };
        format!("{scheme}://{host}{port}{}", req.target())
    }

    /// An entry playlist under access control: asks the manager.
    fn admit(
        &mut self,
        req: Request,
        protocol: Protocol,
        target: (String, String, String),
        cx: &mut Cx<'_>,
    ) -> bool {
        let wall = Now::read(cx.now);
        let Some(spec) = cx.api.registry.vhost(&target.0).map(|v| &v.spec) else {
            self.queue(
                &req,
                &Reply::error(404, "No virtual host serves this host name"),
            );
            return true;
        };
        let subject = Subject {
            protocol,
            client: self.peer,
            user_agent: req.header_str("user-agent").map(str::to_string),
            url: self.request_url(&req),
            new_url: None,
            // WHEP and WHIP (kiln extension for OME users): the bearer
            // token goes to the control server.
            bearer: matches!(protocol, Protocol::WebRtc | Protocol::WebRtcIngest)
                .then(|| req.header_str("authorization"))
                .flatten()
                .and_then(|a| {
                    a.strip_prefix("Bearer ")
                        .or_else(|| a.strip_prefix("bearer "))
                })
                .filter(|t| !t.is_empty() && t.len() <= 4096)
                .map(|t| crate::admission::webhook::Bearer(t.trim().to_string())),
        };
        match cx.access.check(spec, subject, cx.token.0, wall) {
            Verdict::Allowed(admit) => self.open_session(req, target, admit, cx),
            Verdict::Refused(why) => {
                self.refuse(&req, &why);
                true
            }
            Verdict::Pending(check) => {
                self.parked = Some(Parked {
                    req,
                    since: cx.now,
                    until: cx.now + ADMISSION_WAIT,
                    waiting: Waiting::Admission(Box::new((check, target))),
                });
                false
            }
        }
    }

    fn refuse(&mut self, req: &Request, why: &str) {
        crate::info!("viewer {}: {} refused: {why}", self.peer, req.path());
        let mut r = Reply::error(401, why);
        r.allow_origin = Some("*".into());
        self.queue(req, &r);
    }

    /// An admitted viewer: its session, then the entry playlist with it.
    fn open_session(
        &mut self,
        req: Request,
        target: (String, String, String),
        admit: Admit,
        cx: &mut Cx<'_>,
    ) -> bool {
        let wall = Now::read(cx.now);
        let target = match &admit.new_url {
            None => target,
            Some(url) => match crate::admission::redirect(&cx.api.registry, url) {
                Ok(t) => t,
                Err(why) => {
                    if let Some(a) = admit.admission {
                        cx.access.close(a, wall);
                    }
                    self.refuse(&req, &why);
                    return true;
                }
            },
        };
        #[cfg(feature = "webrtc")]
        {
            use super::webrtc_signal::{self as sig, Route};
            let close = !req.keep_alive() || self.closing;
            let answer = match sig::route(&req) {
                Some(Route::WhepOffer) => Some(sig::whep_answer as sig::OfferAnswer),
                Some(Route::WhipOffer) => Some(sig::whip_answer as sig::OfferAnswer),
                _ => None,
            }
            .map(|answer| answer(self.peer.ip(), &req, &target, &admit, close, cx));
            if let Some(r) = answer {
                self.queue_raw(&req, r, close);
                return true;
            }
        }
        let names = (target.0.as_str(), target.1.as_str(), target.2.as_str());
        let Some(token) = cx.access.open_viewer(names, &admit, wall) else {
            self.queue(&req, &Reply::error(503, "Too many viewer sessions"));
            return true;
        };
        self.respond(req, None, Some((&token, &target)), cx)
    }

    /// A WebRTC signalling request (WHEP, or the upgrade to OME's
    /// WebSocket): answered here, or parked for its admission.
    #[cfg(feature = "webrtc")]
    fn signalling(
        &mut self,
        req: Request,
        route: super::webrtc_signal::Route,
        cx: &mut Cx<'_>,
    ) -> bool {
        use super::webrtc_signal::{self as sig, Route};
        let close = !req.keep_alive() || self.closing;
        if !cx.api.webrtc.enabled() {
            let r = sig::error(
                404,
                "WebRTC is not configured (<Bind><Publishers><WebRTC>)",
                close,
            );
            self.queue_raw(&req, r, close);
            return true;
        }
        let reply = match route {
            Route::WhepOptions => sig::preflight(&req, close),
            Route::WhepDelete(key) => sig::whep_delete(&key, close, cx),
            Route::WhepPatch(key) => sig::whep_patch(&key, close, cx),
            Route::WhepOffer | Route::WhipOffer => {
                let Some(target) = sig::target(&req, cx) else {
                    let r = sig::error(404, "No virtual host or stream here", close);
                    self.queue_raw(&req, r, close);
                    return true;
                };
                let protocol = if route == Route::WhipOffer {
                    Protocol::WebRtcIngest
                } else {
                    Protocol::WebRtc
                };
                return self.admit(req, protocol, target, cx);
            }
            Route::WebSocket => {
                let (Some(target), Some(head)) =
                    (sig::target(&req, cx), crate::http::ws::accept_head(&req))
                else {
                    let r = sig::error(400, "Not a WebSocket upgrade kiln can take", true);
                    self.queue_raw(&req, r, true);
                    return true;
                };
                let url = self.request_url(&req).replacen("http", "ws", 1);
                self.push_body(Bytes::from(head).into());
                self.signal = Some(Box::new(sig::WsSignal::new(
                    &req,
                    self.peer.ip(),
                    target,
                    url,
                    cx.now,
                )));
                return true;
            }
        };
        self.queue_raw(&req, reply, close);
        true
    }

    /// Frames the signalling socket has to send.
    #[cfg(feature = "webrtc")]
    fn signalled(&mut self, frames: Vec<Vec<u8>>) {
        // One chunk for the batch: a chunk per small frame would cost more
        // in bookkeeping than its bytes.
        if !frames.is_empty() {
            self.push_body(Bytes::from(frames.concat()).into());
        }
        if self.signal.as_ref().is_some_and(|s| s.closing) {
            self.closing = true;
        }
    }

    /// A response made whole elsewhere (WebRTC signalling).
    #[cfg(feature = "webrtc")]
    fn queue_raw(&mut self, req: &Request, bytes: Vec<u8>, close: bool) {
        crate::debug!("viewer {} {} {}", self.peer, req.method(), req.target());
        self.push_body(Bytes::from(bytes).into());
        if close {
            self.closing = true;
        }
    }

    fn queue(&mut self, req: &Request, r: &Reply) {
        crate::debug!(
            "viewer {} {} {} -> {} ({} bytes)",
            self.peer,
            req.method(),
            req.target(),
            r.status,
            r.len()
        );
        let close = !req.keep_alive() || self.closing;
        self.push_head(r, r.len(), close);
        if req.method() != "HEAD" {
            for b in &r.body {
                self.push_body(b.clone());
            }
        }
        if close {
            self.closing = true;
        }
    }

    fn push_head(&mut self, r: &Reply, len: usize, close: bool) {
        use crate::http::response::push_decimal;
        // Room for every header below at once: one allocation per answer.
        let mut h = String::with_capacity(320);
        h.push_str("HTTP/1.1 ");
        push_decimal(&mut h, u64::from(r.status));
        h.push(' ');
        h.push_str(reason(r.status));
        h.push_str("\r\nContent-Type: ");
        h.push_str(r.content_type);
        h.push_str("\r\nContent-Length: ");
        push_decimal(&mut h, len as u64);
        h.push_str("\r\n");
        if let Some(origin) = &r.allow_origin {
            // The Origin header is the peer's text: only a well-formed
            // origin is ever echoed (origin_matches checks its form).
            h.push_str("Access-Control-Allow-Origin: ");
            h.push_str(origin);
            h.push_str("\r\n");
            if origin != "*" {
                h.push_str("Vary: Origin\r\n");
            }
            if r.status == 204 {
                h.push_str("Access-Control-Allow-Methods: GET, HEAD, OPTIONS\r\nAccess-Control-Allow-Headers: *\r\nAccess-Control-Max-Age: 86400\r\n");
            }
        }
        r.cache.push_header(&mut h);
        if close {
            h.push_str("Connection: close\r\n");
        }
        h.push_str("\r\n");
        self.push_body(Bytes::from(h).into());
    }

    fn push_body(&mut self, b: Shared) {
        if !b.is_empty() {
            self.out_bytes += b.len();
            self.out.push_back(b);
        }
    }

    fn write(&mut self, now: Instant) {
        while !self.out.is_empty() || self.transport.has_pending_tls() {
            let written = match self.send() {
                Ok(w) => w,
                Err(e) => {
                    crate::debug!("viewer {}: write: {e}", self.peer);
                    self.closed = true;
                    return;
                }
            };
            if written == 0 {
                break;
            }
            self.last_activity = now;
            self.consume(written);
        }
        if self.out.is_empty() && self.out.capacity() > 0 {
            // All written: the queue goes back to the allocator, not kept
            // with a connection that now waits for its next part.
            self.out = VecDeque::new();
        }
        if self.closing && self.out.is_empty() && self.parked.is_none() {
            self.transport.close_write();
            self.closed = true;
        }
    }

    /// One system call's worth of output: `sendfile` for a front chunk in
    /// a memory file (plain TCP), the chunks before such a chunk with
    /// `MSG_MORE`, else one `writev` (through rustls with TLS). 0: the
    /// socket takes nothing now.
    fn send(&mut self) -> std::io::Result<usize> {
        const BATCH: usize = 32;
        let from_file = if self.transport.is_tls() {
            None
        } else {
            self.out.iter().take(BATCH).position(|c| c.file.is_some())
        };
        let mut slices = [IoSlice::new(&[]); BATCH];
        let n = from_file.unwrap_or(BATCH).min(self.out.len());
        for (i, c) in self.out.iter().take(n).enumerate() {
            let from = if i == 0 { self.out_off } else { 0 };
            slices[i] = IoSlice::new(&c.bytes[from..]);
        }
        let fd = self.transport.stream_mut().as_raw_fd();
        loop {
            let result = match (from_file, &self.out.front()) {
                (
                    Some(0),
                    Some(Shared {
                        bytes,
                        file: Some(f),
                    }),
                ) => crate::sys::send_file(
                    fd,
                    f.file.as_raw_fd(),
                    f.offset + self.out_off as u64,
                    bytes.len() - self.out_off,
                ),
                (Some(_), _) => crate::sys::send_more(fd, &slices[..n]),
                (None, _) => return self.transport.write_vectored(&slices[..n]),
            };
            return match result {
                Ok(0) => Err(std::io::ErrorKind::WriteZero.into()),
                Ok(w) => Ok(w),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => Err(e),
            };
        }
    }

    fn consume(&mut self, mut n: usize) {
        self.out_bytes -= n;
        while n > 0 {
            let Some(front) = self.out.front() else {
                return;
            };
            let left = front.len() - self.out_off;
            if n < left {
                self.out_off += n;
                return;
            }
            n -= left;
            self.out_off = 0;
            self.out.pop_front();
        }
    }
}

impl ViewerConn {
    /// Its deadline apart from an owed read: a parked request's, the
    /// head or idle timeout, a signalling socket's keep-alive.
    fn own_deadline(&self) -> Option<Instant> {
        #[cfg(feature = "webrtc")]
        if let Some(s) = &self.signal {
            return Some(s.deadline());
        }
        match &self.parked {
            Some(p) => Some(p.until),
            None if self.reader.in_head() => Some(self.last_activity + HEAD_TIMEOUT),
            // Nothing sent since the accept: the head timeout, not the
            // keep-alive idle time.
            None => match self.unproven_since {
                Some(at) => Some(at + HEAD_TIMEOUT),
                None => Some(self.last_activity + IDLE),
            },
        }
    }

    /// A signalling socket that closes ends its WebRTC session.
    #[cfg(feature = "webrtc")]
    fn end_signal(&mut self, cx: &mut Cx<'_>) {
        if self.closing || self.closed {
            if let Some(s) = self.signal.as_deref_mut() {
                s.end(cx);
            }
        }
    }

    #[cfg(not(feature = "webrtc"))]
    fn end_signal(&mut self, _cx: &mut Cx<'_>) {}
}

impl Endpoint for ViewerConn {
    fn ready(&mut self, cx: &mut Cx<'_>, peer_closed: bool) {
        self.pump(cx, peer_closed, true);
    }

    fn timeout(&mut self, cx: &mut Cx<'_>) {
        if self.read_again.is_some_and(|at| at <= cx.now) {
            // Its other deadlines are armed again after the call.
            self.pump(cx, false, false);
            return;
        }
        #[cfg(feature = "webrtc")]
        if let Some(s) = self.signal.as_deref_mut() {
            let frames = s.timeout(cx);
            self.signalled(frames);
            self.write(cx.now);
            self.end_signal(cx);
            return;
        }
        if self.parked.as_ref().is_some_and(|p| cx.now >= p.until) {
            // Answered 503 now.
            self.answer(cx);
            self.write(cx.now);
            return;
        }
        if self.parked.is_none() {
            self.closed = true;
        }
    }

    fn flush(&mut self, cx: &mut Cx<'_>) {
        self.pump(cx, false, false);
    }

    fn prefetch(&self) {
        crate::sys::prefetch(self);
        crate::sys::prefetch(&self.transport);
        crate::sys::prefetch(&self.out);
        crate::sys::prefetch(&self.parked);
        crate::sys::prefetch(&self.last_activity);
    }

    fn deadline(&self) -> Option<Instant> {
        crate::clock::earliest(self.read_again, self.own_deadline())
    }

    fn is_closed(&self) -> bool {
        self.closed
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        let _ = poll.deregister(self.transport.stream_mut());
    }

    fn abort(&mut self, cx: &mut Cx<'_>) {
        self.closed = true;
        self.end_signal(cx);
    }

    #[cfg(feature = "webrtc")]
    fn webrtc_switched(&mut self, key: &str, cx: &mut Cx<'_>) {
        if let Some(s) = self.signal.as_deref_mut() {
            let frames = s.rendition_switched(key, cx);
            self.signalled(frames);
            self.write(cx.now);
        }
    }

    #[cfg(feature = "webrtc")]
    fn webrtc_ended(&mut self, key: &str, cx: &mut Cx<'_>) {
        if let Some(s) = self.signal.as_deref_mut() {
            s.session_ended(key);
            self.signalled(Vec::new());
            self.write(cx.now);
        }
    }

    fn admitted(&mut self, check: CheckId, verdict: Verdict, cx: &mut Cx<'_>) {
        #[cfg(feature = "webrtc")]
        if let Some(s) = self.signal.as_deref_mut() {
            let frames = s.admitted(check, verdict, cx);
            self.signalled(frames);
            self.write(cx.now);
            self.end_signal(cx);
            return;
        }
        let waiting = matches!(&self.parked,
            Some(Parked { waiting: Waiting::Admission(a), .. }) if a.0 == check);
        if !waiting || self.closed {
            if let Verdict::Allowed(Admit {
                admission: Some(a), ..
            }) = verdict
            {
                cx.access.close(a, Now::read(cx.now));
            }
            return;
        }
        let Some(Parked {
            req,
            waiting: Waiting::Admission(a),
            ..
        }) = self.parked.take()
        else {
            return;
        };
        let (_, target) = *a;
        let answered = match verdict {
            Verdict::Allowed(admit) => self.open_session(req, target, admit, cx),
            Verdict::Refused(why) => {
                self.refuse(&req, &why);
                true
            }
            Verdict::Pending(_) => true,
        };
        if answered {
            self.answer(cx);
        }
        self.write(cx.now);
    }

    fn unproven_since(&self) -> Option<Instant> {
        #[cfg(feature = "webrtc")]
        if let Some(s) = &self.signal {
            return s.idle_since();
        }
        self.unproven_since
    }

    fn pull_answered(&mut self, answer: PullAnswer, cx: &mut Cx<'_>) {
        let waiting = matches!(&self.parked,
            Some(Parked { waiting: Waiting::Pull(p), .. }) if p.0 == answer.key);
        if !waiting || self.closed {
            return;
        }
        let Some(Parked {
            req,
            waiting: Waiting::Pull(p),
            ..
        }) = self.parked.take()
        else {
            return;
        };
        let (_, session) = *p;
        let answered = match answer.result {
            Ok(()) => {
                let admitted = session.as_ref().map(|(s, t)| (s.as_str(), t));
                self.respond(req, None, admitted, cx)
            }
            Err(why) => {
                self.queue(
                    &req,
                    &Reply::error(404, &format!("No such stream (pull: {why})")),
                );
                true
            }
        };
        if answered {
            self.answer(cx);
        }
        self.write(cx.now);
    }
}

/// The stream a viewer request names (`/{app}/{stream}/...` on the host
/// its `Host` header names).
fn stream_key(req: &Request, reg: &crate::state::Registry) -> Option<PullKey> {
    let host = crate::http::host::host_without_port(req.header_str("host").unwrap_or(""));
    let vhost = reg.vhost_serving(host)?;
    let mut parts = req.path().trim_start_matches('/').splitn(3, '/');
    Some(PullKey {
        vhost: vhost.spec.name.clone(),
        app: parts.next()?.to_string(),
        name: parts.next()?.to_string(),
    })
}

impl serve::ViewerSessions for crate::admission::manager::AccessManager {
    fn use_viewer(
        &mut self,
        session: Option<&str>,
        now: Now,
    ) -> Result<(String, String, String), String> {
        crate::admission::manager::AccessManager::use_viewer(self, session, now)
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    /// A thousand LL-HLS viewers parked on blocking reloads hold one of
    /// these each (boxed), beside the request they wait to answer: what
    /// is rare in it (an admission, a pull, a WebSocket) stays boxed.
    #[test]
    fn a_viewer_connection_stays_small() {
        let size = std::mem::size_of::<super::ViewerConn>();
        let request = std::mem::size_of::<crate::http::Request>();
        // 736 bytes before the parked request's wait became an enum and
        // the reader's request in progress was boxed; 352 since.
        assert!(size <= 384, "ViewerConn is {size} bytes");
        assert!(request <= 72, "Request is {request} bytes");
    }
}
