//! One management API connection (HTTP or HTTPS): the glue between a mio
//! `TcpStream` (through rustls on the TLS port), the sans-IO
//! [`RequestReader`] and the API handlers. It reads until `WouldBlock`,
//! answers complete requests in order, writes until `WouldBlock`, and keeps
//! one deadline (head, body, idle, write stall or linger) for the loop's
//! timer table.
//!
//! Closing is graceful: after the last response is flushed the write side
//! is shut and what the client still sends is read and dropped for a short
//! while, so a client that is still sending (a 413 body) gets the response
//! instead of a reset.

use super::endpoint::{Cx, Endpoint};
use super::transport::{ReadEnd, ReadGate, Transport, READ_CHUNK};
use crate::api::envelope::ApiError;
use crate::api::{Api, RequestInfo};
use crate::config::ApiLimits;
use crate::http::response::CONTINUE;
use crate::http::{write_response, ReaderLimits, RequestReader};
use mio::net::TcpStream;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Stop answering more pipelined requests while this much output waits.
const OUTPUT_HIGH_WATER: usize = 256 * 1024;
/// How long a closing connection drains what the client still sends.
const LINGER: Duration = Duration::from_secs(2);
/// Longest wait for a pull's answer (`POST .../streams`); then 504.
const PULL_WAIT: Duration = Duration::from_secs(120);

/// A request whose answer waits for a pull.
struct Parked {
    key: crate::pull::PullKey,
    head: bool,
    close: bool,
    /// The CORS headers of the request.
    headers: Vec<(&'static str, String)>,
    since: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Open,
    /// Answer the output, then close.
    Closing,
    /// Write side shut; reading and dropping until EOF or the deadline.
    Lingering {
        until: Instant,
    },
    Closed,
}

pub(crate) struct ApiConn {
    transport: Transport,
    pub peer: SocketAddr,
    reader: RequestReader,
    out: Vec<u8>,
    out_pos: usize,
    phase: Phase,
    limits: ApiLimits,
    /// Last time bytes moved either way.
    last_activity: Instant,
    /// When the first byte of the current request head (or the TLS
    /// handshake) arrived.
    head_started: Option<Instant>,
    /// Reading stops while too much input waits unanswered or output
    /// waits unsent, and is owed until resumed ([`ReadGate`]).
    gate: ReadGate,
    /// The poller reported the client's FIN (or an error).
    peer_closed: bool,
    /// This connection's token (what a parked request waits under).
    token: usize,
    parked: Option<Parked>,
    /// When it was accepted.
    accepted: Instant,
    /// A whole request head has arrived on it at least once.
    proven: bool,
}

/// What the loop should do after an event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Open,
    Closed,
}

impl ApiConn {
    pub(crate) fn new(
        stream: TcpStream,
        peer: SocketAddr,
        tls: Option<rustls::ServerConnection>,
        limits: ApiLimits,
        token: usize,
        now: Instant,
    ) -> Self {
        let is_tls = tls.is_some();
        ApiConn {
            transport: Transport::new(stream, tls),
            peer,
            reader: RequestReader::new(ReaderLimits {
                max_head_bytes: limits.max_head_bytes,
                max_body_bytes: limits.max_body_bytes,
            }),
            out: Vec::new(),
            out_pos: 0,
            phase: Phase::Open,
            limits,
            last_activity: now,
            head_started: if is_tls { Some(now) } else { None },
            gate: ReadGate::default(),
            peer_closed: false,
            token,
            parked: None,
            accepted: now,
            proven: false,
        }
    }

    /// The most request bytes held before reading stops (a head, a body
    /// and one read).
    fn input_cap(&self) -> usize {
        self.limits.max_head_bytes + self.limits.max_body_bytes + READ_CHUNK
    }

    fn handshaking(&self) -> bool {
        self.transport.handshaking()
    }

    fn pending_output(&self) -> bool {
        self.out_pos < self.out.len() || self.transport.has_pending_tls()
    }

    /// The one deadline of this connection.
    pub(crate) fn deadline(&self) -> Instant {
        if let Some(p) = &self.parked {
            return p.since + PULL_WAIT;
        }
        match self.phase {
            Phase::Lingering { until } => until,
            _ if self.pending_output() => self.last_activity + self.limits.idle_timeout,
            // A connection that has sent nothing yet gets the head timeout
            // from its accept, not the keep-alive idle time: idle sockets
            // must not hold the API's descriptors (hardening).
            _ if !self.proven && self.reader.is_idle() => self.accepted + self.limits.head_timeout,
            _ if self.handshaking() || self.reader.in_head() => {
                self.head_started.unwrap_or(self.last_activity) + self.limits.head_timeout
            }
            _ if self.reader.in_body() => self.last_activity + self.limits.head_timeout,
            _ => self.last_activity + self.limits.idle_timeout,
        }
    }

    /// Handles readiness (either direction; both are attempted).
    ///
    /// `peer_closed`: the poller saw the client's FIN (reads then go to the
    /// end instead of stopping at a short read).
    pub(crate) fn on_ready(&mut self, api: &mut Api, now: Instant, peer_closed: bool) -> Status {
        if self.phase == Phase::Closed {
            return Status::Closed;
        }
        self.peer_closed |= peer_closed;
        if let Err(e) = self.read_input(now) {
            crate::debug!("api connection {}: read: {e}", self.peer);
            self.phase = Phase::Closed;
            return Status::Closed;
        }
        self.answer(api, now);
        self.drive_output(api, now)
    }

    /// The deadline passed (the loop checked it is due).
    pub(crate) fn on_deadline(&mut self, api: &mut Api, now: Instant) -> Status {
        if let Some(p) = self.parked.take() {
            api.pulls.table.forget_waiter(&p.key, self.token);
            let mut resp = ApiError::http(
                504,
                format_args!(
                    "Pull [{}] is not live after {} s",
                    p.key,
                    PULL_WAIT.as_secs()
                ),
            )
            .to_response();
            resp.headers.extend(p.headers);
            write_response(&resp, p.head, p.close, &mut self.out);
            if p.close {
                self.phase = Phase::Closing;
            }
            self.answer(api, now);
            return self.drive_output(api, now);
        }
        match self.phase {
            Phase::Lingering { .. } | Phase::Closed => {
                self.phase = Phase::Closed;
                return Status::Closed;
            }
            _ => {}
        }
        if self.pending_output() || self.handshaking() || self.reader.is_idle() {
            // Write stall, TLS handshake never finished, or idle keep-alive:
            // close without a word.
            self.phase = Phase::Closed;
            return Status::Closed;
        }
        // A request head or body is incomplete: 408, then close.
        crate::debug!("api connection {}: request timed out", self.peer);
        let resp = api.error_response(None, &ApiError::http(408, "Request timeout"));
        write_response(&resp, false, true, &mut self.out);
        self.phase = Phase::Closing;
        self.drive_output(api, now)
    }

    fn read_input(&mut self, now: Instant) -> io::Result<()> {
        let cap = self.input_cap();
        let queued = self.out.len() - self.out_pos;
        if !self
            .gate
            .open(queued, OUTPUT_HIGH_WATER, self.reader.buffered() > cap)
        {
            return Ok(());
        }
        let lingering = matches!(self.phase, Phase::Lingering { .. });
        let reader = &mut self.reader;
        let head_started = &mut self.head_started;
        let handshaking = self.transport.handshaking();
        let drain = self.peer_closed;
        let (got, end) = self.transport.read(drain, |data| {
            if lingering {
                return true;
            }
            // The head timer starts with the first byte of a request (or of
            // the TLS handshake, set at accept).
            if head_started.is_none() || (reader.is_idle() && !handshaking) {
                *head_started = Some(now);
            }
            reader.feed(data);
            reader.buffered() <= cap
        })?;
        if got {
            self.last_activity = now;
        }
        self.gate.ended(end);
        match end {
            ReadEnd::WouldBlock | ReadEnd::Paused => {}
            ReadEnd::Closed => {
                self.phase = match self.phase {
                    // Lingering ends at the client's EOF.
                    Phase::Lingering { .. } => Phase::Closed,
                    // Answer what was received in full (a client may
                    // half-close after sending), then close.
                    Phase::Closed => Phase::Closed,
                    _ => Phase::Closing,
                };
            }
        }
        Ok(())
    }

    /// Answers every complete request in the buffer, in order.
    fn answer(&mut self, api: &mut Api, now: Instant) {
        while matches!(self.phase, Phase::Open | Phase::Closing)
            && self.parked.is_none()
            && self.out.len() - self.out_pos < OUTPUT_HIGH_WATER
        {
            match self.reader.next_request() {
                Ok(Some(req)) => {
                    self.proven = true;
                    let info = RequestInfo {
                        tls: self.transport.is_tls(),
                        sni: self.transport.sni(),
                    };
                    let mut resp = api.handle(&req, info, crate::clock::Now::read(now));
                    let close = !req.keep_alive() || self.phase == Phase::Closing;
                    if let Some(key) = api.take_parked() {
                        if api.pulls.table.add_waiter(&key, self.token) {
                            self.parked = Some(Parked {
                                key,
                                head: req.method() == "HEAD",
                                close,
                                headers: resp.headers,
                                since: now,
                            });
                            self.head_started = None;
                            return;
                        }
                        resp = ApiError::http(502, format_args!("Pull [{key}] ended at once"))
                            .to_response();
                    }
                    crate::debug!(
                        "api {} {} {} -> {}",
                        self.peer,
                        req.method(),
                        req.path(),
                        resp.status
                    );
                    write_response(&resp, req.method() == "HEAD", close, &mut self.out);
                    self.head_started = None;
                    if close {
                        self.phase = Phase::Closing;
                        return;
                    }
                }
                Ok(None) => {
                    if self.reader.wants_continue() && self.phase == Phase::Open {
                        let info = RequestInfo {
                            tls: self.transport.is_tls(),
                            sni: self.transport.sni(),
                        };
                        let refused = self
                            .reader
                            .pending_head()
                            .and_then(|head| api.refuse_before_body(head, info));
                        if let Some(resp) = refused {
                            // Refused before the body is invited: answer,
                            // then close (the body is never read).
                            self.proven = true;
                            write_response(&resp, false, true, &mut self.out);
                            self.phase = Phase::Closing;
                            return;
                        }
                        self.out.extend_from_slice(CONTINUE);
                        self.reader.continue_sent();
                    }
                    if self.reader.is_idle() {
                        self.head_started = None;
                    }
                    // A half-closed client with an incomplete request gets
                    // nothing more: close.
                    return;
                }
                Err(e) => {
                    crate::debug!("api connection {}: {e}", self.peer);
                    let resp = api.error_response(None, &ApiError::http(e.status(), &e));
                    write_response(&resp, false, true, &mut self.out);
                    self.phase = Phase::Closing;
                    return;
                }
            }
        }
    }

    /// Writes what is queued; moves through closing and lingering.
    fn drive_output(&mut self, api: &mut Api, now: Instant) -> Status {
        loop {
            match self.write_output(now) {
                Ok(()) => {}
                Err(e) => {
                    crate::debug!("api connection {}: write: {e}", self.peer);
                    self.phase = Phase::Closed;
                    return Status::Closed;
                }
            }
            if self.pending_output() {
                return Status::Open;
            }
            if self.out_pos > 0 {
                self.out.clear();
                self.out_pos = 0;
            }
            // Output drained: resume reading and answering if we paused.
            let full = self.reader.buffered() > self.input_cap();
            if self.gate.owed(0, OUTPUT_HIGH_WATER, full) && self.phase == Phase::Open {
                if let Err(e) = self.read_input(now) {
                    crate::debug!("api connection {}: read: {e}", self.peer);
                    self.phase = Phase::Closed;
                    return Status::Closed;
                }
                self.answer(api, now);
                if self.pending_output() {
                    continue;
                }
            }
            break;
        }
        if self.parked.is_some() && self.phase == Phase::Closing {
            // A client that half-closed after its request still gets the
            // pull's answer.
            return Status::Open;
        }
        match self.phase {
            Phase::Open => Status::Open,
            Phase::Closing => {
                self.transport.close_write();
                self.phase = Phase::Lingering {
                    until: now + LINGER,
                };
                // Drain whatever already arrived; EOF ends the linger.
                let _ = self.read_input(now);
                if self.phase == Phase::Closed {
                    Status::Closed
                } else {
                    Status::Open
                }
            }
            Phase::Lingering { .. } => Status::Open,
            Phase::Closed => Status::Closed,
        }
    }

    fn write_output(&mut self, now: Instant) -> io::Result<()> {
        let n = self.transport.write(&self.out[self.out_pos..])?;
        if n > 0 {
            self.out_pos += n;
            self.last_activity = now;
        }
        Ok(())
    }
}
impl Endpoint for ApiConn {
    fn ready(&mut self, cx: &mut Cx<'_>, peer_closed: bool) {
        self.on_ready(cx.api, cx.now, peer_closed);
    }

    fn timeout(&mut self, cx: &mut Cx<'_>) {
        self.on_deadline(cx.api, cx.now);
    }

    fn deadline(&self) -> Option<Instant> {
        Some(ApiConn::deadline(self))
    }

    fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        let _ = poll.deregister(self.transport.stream_mut());
    }

    fn abort(&mut self, _cx: &mut Cx<'_>) {
        self.phase = Phase::Closed;
    }

    fn unproven_since(&self) -> Option<Instant> {
        (!self.proven && self.parked.is_none()).then_some(self.accepted)
    }

    fn pull_answered(&mut self, answer: crate::pull::table::PullAnswer, cx: &mut Cx<'_>) {
        let Some(p) = self.parked.take_if(|p| p.key == answer.key) else {
            return;
        };
        let mut resp = cx.api.pull_answer(&answer);
        resp.headers.extend(p.headers);
        crate::debug!("api {} pull [{}] -> {}", self.peer, p.key, resp.status);
        write_response(&resp, p.head, p.close, &mut self.out);
        if p.close {
            self.phase = Phase::Closing;
        }
        self.answer(cx.api, cx.now);
        self.drive_output(cx.api, cx.now);
    }
}
