//! One push session: a running task's connection to its destination,
//! sans-IO. No socket and no clock: the I/O glue (`server::push_io`)
//! connects, reads and reports what happened (`handle_*`), and gives the
//! session a [`Wire`] to write through (`poll_transmit`); time comes in as
//! `now`. What the session has to say comes out of `poll_report`, its next
//! deadline out of `poll_timeout`.
//!
//! Outputs: RTMP/RTMPS drives the RTMP [`ClientSession`] and writes each
//! frame as its own message header + the body the stream's [`Feed`] cut
//! once for every destination, many frames per `writev`; MPEG-TS over UDP
//! drives the TS [`Muxer`] and sends 1316-byte datagrams, paced; SRT drives
//! the TS muxer and the SRT [`Caller`]. Frames come from the stream's feed
//! through the session's own [`Cursor`] (its drop policy).

use super::feed::{Cursor, Feed, FeedFrame, Mark};
use super::pacing::Pacer;
use super::request::Destination;
use super::task::TaskKey;
use crate::media::{Track, TrackId};
use crate::rtmp::chunk::{shares_body, write_full_header, MAX_FULL_HEADER};
use crate::rtmp::client::{
    ClientConfig, ClientEvent, ClientSession, MediaClock, SHARED_CHUNK_SIZE,
};
use crate::srt::{Caller, CallerConfig, CallerEvent, CloseReason};
use crate::state::streams::StreamId;
use crate::ts::Muxer;
use bytes::Bytes;
use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Most bytes a destination may be behind before it drops to keyframes.
pub(crate) const QUEUE_BYTES: usize = 8 * 1024 * 1024;
/// What all destinations together may be behind: with many pushes each
/// one's bound shrinks, so a kiln that falls behind drops frames instead of
/// holding `QUEUE_BYTES` times the number of pushes.
pub(crate) const QUEUE_BUDGET: usize = 256 * 1024 * 1024;
/// No destination's bound goes below this (a keyframe or two).
pub(crate) const MIN_QUEUE_BYTES: usize = 256 * 1024;

/// Each destination's bound when `sessions` push sessions run.
pub(crate) fn queue_bytes_for(sessions: usize) -> usize {
    (QUEUE_BUDGET / sessions.max(1)).clamp(MIN_QUEUE_BYTES, QUEUE_BYTES)
}

/// Frames per `writev` (two slices each). One ingest read brings one or
/// two; more wait only after a stall or at the start (the GOP).
const RTMP_BATCH: usize = 16;
/// TS bytes muxed ahead of the socket; the rest waits in the feed.
const UDP_HIGH_WATER: usize = 16 * 1024;
/// One datagram: 7 TS packets.
const DATAGRAM: usize = 1316;
/// Datagrams per `sendmmsg`.
const DATAGRAM_BATCH: usize = 64;
/// From start to `pushing`.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A destination that takes nothing for this long has failed.
pub(crate) const STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a clean close may take.
pub(crate) const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// What a session writes through: the I/O glue's socket, or a test's
/// simulated destination.
pub(crate) trait Wire {
    /// Writes as much of `bufs` (one byte stream, in order) as the
    /// transport takes now; `Ok(0)` when it takes nothing.
    fn write(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;
    /// Sends whole datagrams in order; returns how many went
    /// (`WouldBlock` when none could).
    fn send(&mut self, datagrams: &[&[u8]]) -> io::Result<usize>;
    /// Ends our direction of a byte stream (after a clean close).
    fn close_write(&mut self);
}

/// How the glue reaches the destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Link {
    /// TCP, with TLS to this server name when set.
    Tcp { tls: Option<String> },
    /// A connected UDP socket (multicast TTL when set), written only.
    Udp { ttl: Option<u32> },
    /// A connected UDP socket, read and written (the SRT caller).
    Srt,
}

/// What the manager learns from a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Report {
    /// The destination accepted the stream.
    Pushing,
    /// The session is over: `None` for a clean end, else why it failed.
    Ended(Option<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the glue: name resolution and connect.
    Connecting,
    /// Connected; RTMP handshake and publish, or the SRT handshake.
    Handshaking,
    Pushing,
    Closing {
        until: Instant,
    },
    Done,
}

/// A message the socket took part of: its header and body, and how much of
/// both went. The body is the feed's (shared; cloned only here, when a
/// write came back short).
struct Partial {
    head: [u8; MAX_FULL_HEADER],
    head_len: usize,
    body: Bytes,
    sent: usize,
}

impl Partial {
    fn len(&self) -> usize {
        self.head_len + self.body.len()
    }

    fn slices(&self) -> [IoSlice<'_>; 2] {
        let (h, b) = if self.sent < self.head_len {
            (&self.head[self.sent..self.head_len], &self.body[..])
        } else {
            (&[][..], &self.body[self.sent - self.head_len..])
        };
        [IoSlice::new(h), IoSlice::new(b)]
    }
}

struct RtmpOut {
    client: ClientSession,
    /// The destination said NetStream.Publish.Start.
    publishing: bool,
    tracks_sent: bool,
    partial: Option<Partial>,
    /// FIN sent (after a clean close drained).
    closed_write: bool,
}

struct TsOut {
    muxer: Option<Muxer>,
    ts: Vec<u8>,
    ts_pos: usize,
}

impl TsOut {
    fn new() -> Self {
        TsOut {
            muxer: None,
            ts: Vec::new(),
            ts_pos: 0,
        }
    }

    fn pending(&self) -> usize {
        self.ts.len() - self.ts_pos
    }

    /// Muxes frames from the feed up to the high-water mark.
    fn fill(&mut self, cursor: &mut Cursor, feed: &Feed) {
        while self.pending() < UDP_HIGH_WATER {
            let Some(m) = self.muxer.as_mut() else { break };
            let Some(f) = cursor.pop(feed) else { break };
            if let Err(e) = m.write_frame(&f.frame, &mut self.ts) {
                crate::debug!("push mux: {e}");
            }
        }
    }

    /// Muxes every frame left (a close: the tail goes out unpaced).
    fn fill_all(&mut self, cursor: &mut Cursor, feed: &Feed) {
        let Some(m) = self.muxer.as_mut() else { return };
        while let Some(f) = cursor.pop(feed) {
            if let Err(e) = m.write_frame(&f.frame, &mut self.ts) {
                crate::debug!("push mux: {e}");
            }
        }
    }

    fn consume(&mut self, n: usize) {
        self.ts_pos += n;
        if self.ts_pos > UDP_HIGH_WATER {
            self.ts.drain(..self.ts_pos);
            self.ts_pos = 0;
        }
    }

    /// Drops bytes already sent and, once all are, memory a burst (a
    /// keyframe, the GOP at start) grew the buffer to.
    fn release(&mut self) {
        if self.ts_pos == self.ts.len() {
            self.ts.clear();
            self.ts_pos = 0;
            if self.ts.capacity() > 4 * UDP_HIGH_WATER {
                self.ts.shrink_to(UDP_HIGH_WATER);
            }
        }
    }
}

struct UdpOut {
    ts: TsOut,
    pacer: Pacer,
    /// Send what is muxed unpaced, then end (the stream is over).
    draining: bool,
    refused: u64,
}

struct SrtOut {
    destination: SrtDestination,
    caller: Option<Caller>,
    ts: TsOut,
    buf: Vec<u8>,
    /// Datagrams waiting for one `sendmmsg`: (offset, length) in `arena`;
    /// `pending_at` is the first not yet sent.
    arena: Vec<u8>,
    pending: Vec<(usize, usize)>,
    pending_at: usize,
}

struct SrtDestination {
    crypto: Option<crate::srt::crypto::CryptoConfig>,
    stream_id: Option<String>,
    latency: Duration,
    timeout: Option<Duration>,
    payload_size: usize,
}

enum Output {
    Rtmp(Box<RtmpOut>),
    Udp(Box<UdpOut>),
    Srt(Box<SrtOut>),
}

/// The stream a session starts from.
pub(crate) struct StartMedia {
    pub stream: StreamId,
    pub tracks: Vec<Track>,
    /// The task's tracks among them.
    pub selected: Vec<TrackId>,
    /// The feed position to start at (the last GOP).
    pub from: u64,
}

pub(crate) struct PushSession {
    pub key: TaskKey,
    pub stream: StreamId,
    link: Link,
    tracks: Vec<Track>,
    selected: Vec<TrackId>,
    cursor: Cursor,
    /// Feed frames up to here were counted into the UDP pacer.
    seen: u64,
    /// Frames dropped as of the last transmit (a drop is no progress).
    dropped_seen: u64,
    output: Output,
    phase: Phase,
    started: Instant,
    last_progress: Instant,
    /// Bytes written to the destination in this session.
    pub sent_bytes: u64,
    reports: VecDeque<Report>,
    /// The task was stopped: close cleanly and report nothing.
    pub detached: bool,
}

impl PushSession {
    /// A session for a task, starting from the stream's last GOP. `url` is
    /// the task's URL as given (RTMP: the tcUrl).
    pub(crate) fn new(
        key: TaskKey,
        destination: &Destination,
        url: &str,
        stream_key: &str,
        media: StartMedia,
        queue_bytes: usize,
        now: Instant,
    ) -> Self {
        let (link, output) = match destination {
            Destination::Rtmp { tls, host, app, .. } => (
                Link::Tcp {
                    tls: tls.then(|| host.clone()),
                },
                Output::Rtmp(Box::new(RtmpOut {
                    client: ClientSession::new(ClientConfig::new(url, app, stream_key)),
                    publishing: false,
                    tracks_sent: false,
                    partial: None,
                    closed_write: false,
                })),
            ),
            Destination::Udp { ttl, .. } => (
                Link::Udp { ttl: *ttl },
                Output::Udp(Box::new(UdpOut {
                    ts: TsOut::new(),
                    pacer: Pacer::new(DATAGRAM * 32, now),
                    draining: false,
                    refused: 0,
                })),
            ),
            Destination::Srt {
                latency,
                timeout,
                stream_id,
                payload_size,
                crypto,
                ..
            } => (
                Link::Srt,
                Output::Srt(Box::new(SrtOut {
                    destination: SrtDestination {
                        crypto: crypto.clone(),
                        stream_id: stream_id.clone(),
                        latency: *latency,
                        timeout: *timeout,
                        payload_size: *payload_size,
                    },
                    caller: None,
                    ts: TsOut::new(),
                    buf: Vec::with_capacity(1500),
                    arena: Vec::new(),
                    pending: Vec::new(),
                    pending_at: 0,
                })),
            ),
        };
        let mut cursor = Cursor::new(media.from, queue_bytes);
        cursor.select(&media.tracks, &media.selected);
        PushSession {
            key,
            stream: media.stream,
            link,
            tracks: media.tracks,
            selected: media.selected,
            cursor,
            seen: media.from,
            dropped_seen: 0,
            output,
            phase: Phase::Connecting,
            started: now,
            last_progress: now,
            sent_bytes: 0,
            reports: VecDeque::new(),
            detached: false,
        }
    }

    /// How the glue connects.
    pub(crate) fn link(&self) -> &Link {
        &self.link
    }

    /// Whether the session sends RTMP (its feed cuts RTMP bodies).
    pub(crate) fn is_rtmp(&self) -> bool {
        matches!(self.output, Output::Rtmp(_))
    }

    /// Where this session is in its feed (what it has not sent starts here).
    pub(crate) fn position(&self) -> u64 {
        self.cursor.next
    }

    /// Applies a new bound (the number of sessions changed).
    pub(crate) fn set_queue_bytes(&mut self, bytes: usize) {
        self.cursor.set_max_bytes(bytes);
    }

    pub(crate) fn has_reports(&self) -> bool {
        !self.reports.is_empty()
    }

    pub(crate) fn poll_report(&mut self) -> Option<Report> {
        self.reports.pop_front()
    }

    pub(crate) fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    pub(crate) fn dropped_frames(&self) -> u64 {
        self.cursor.dropped_frames
    }

    #[cfg(test)]
    /// Datagrams refused (nobody listening at a UDP destination).
    pub(crate) fn refused_datagrams(&self) -> u64 {
        match &self.output {
            Output::Udp(u) => u.refused,
            _ => 0,
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let base = match self.phase {
            Phase::Done => return None,
            Phase::Connecting | Phase::Handshaking => self.started + CONNECT_TIMEOUT,
            Phase::Closing { until } => until,
            Phase::Pushing => {
                let stall = self.last_progress + STALL_TIMEOUT;
                match &self.output {
                    Output::Udp(u) if u.ts.pending() >= DATAGRAM => {
                        u.pacer.ready_at(DATAGRAM).min(stall)
                    }
                    _ => stall,
                }
            }
        };
        // The SRT caller has its own timers (ACK, NAK, keepalive, ...).
        match &self.output {
            Output::Srt(srt) => match srt.caller.as_ref().and_then(|c| c.poll_timeout()) {
                Some(t) => Some(base.min(t)),
                None => Some(base),
            },
            _ => Some(base),
        }
    }

    /// Ends the session with an error from outside its own logic (a
    /// contained panic): the task records `why` and retries.
    pub(crate) fn abort(&mut self, why: &str) {
        self.fail(why.into());
    }

    fn fail(&mut self, why: String) {
        match self.phase {
            Phase::Done => return,
            // The session already ended cleanly; this is the close itself.
            Phase::Closing { .. } => {
                self.phase = Phase::Done;
                return;
            }
            _ => {}
        }
        // The manager logs it at WARN with the next retry time.
        crate::debug!("push [{}]: {why}", self.key);
        self.phase = Phase::Done;
        if !self.detached {
            self.reports.push_back(Report::Ended(Some(why)));
        }
    }

    fn pushing(&mut self, now: Instant) {
        self.phase = Phase::Pushing;
        self.last_progress = now;
        self.reports.push_back(Report::Pushing);
    }

    /// The glue reached the destination: TCP connected (TLS, if any, runs
    /// inside the glue's transport), or the UDP socket is open.
    pub(crate) fn handle_connected(&mut self, peer: SocketAddr, now: Instant) {
        if self.phase != Phase::Connecting {
            return;
        }
        self.last_progress = now;
        match &mut self.output {
            // C0 + C1 are already waiting in the client's output.
            Output::Rtmp(_) => self.phase = Phase::Handshaking,
            Output::Srt(srt) => {
                let d = &srt.destination;
                let mut config = CallerConfig::new(peer);
                config.stream_id = d.stream_id.clone();
                config.latency = d.latency;
                config.payload_size = d.payload_size;
                config.crypto = d.crypto.clone();
                if let Some(t) = d.timeout {
                    config.peer_idle_timeout = t;
                }
                srt.caller = Some(Caller::new(config, now));
                self.phase = Phase::Handshaking;
            }
            // UDP has no handshake: pushing from the first datagram.
            Output::Udp(_) => {
                self.pushing(now);
                self.rebuild_muxer();
            }
        }
    }

    /// No address of the destination could be reached (or resolved).
    pub(crate) fn handle_connect_failed(&mut self, why: String) {
        if self.phase == Phase::Connecting {
            self.fail(why);
        }
    }

    /// Bytes the destination sent (RTMP).
    pub(crate) fn handle_input(&mut self, data: &[u8], now: Instant) {
        let Output::Rtmp(out) = &mut self.output else {
            return;
        };
        let mut failure = None;
        if let Err(e) = out.client.handle_input(data) {
            failure = Some(e.to_string());
        }
        let mut became_pushing = false;
        while let Some(ev) = out.client.poll_event() {
            match ev {
                ClientEvent::Connected => {}
                ClientEvent::Publishing => {
                    out.publishing = true;
                    became_pushing = self.phase == Phase::Handshaking;
                }
                ClientEvent::Error(why) => {
                    failure.get_or_insert(format!("the destination refused: {why}"));
                }
                // Play-mode events; a push session publishes.
                ClientEvent::Playing | ClientEvent::Tracks(_) | ClientEvent::Frame(_) => {}
            }
        }
        if let Some(why) = failure {
            self.fail(why);
        } else if became_pushing {
            self.pushing(now);
        }
    }

    /// A datagram from the destination (SRT).
    pub(crate) fn handle_datagram(&mut self, from: SocketAddr, data: &[u8], now: Instant) {
        if let Output::Srt(srt) = &mut self.output {
            if let Some(c) = srt.caller.as_mut() {
                c.handle_datagram(from, data, now);
            }
        }
        self.srt_events(now);
    }

    /// The destination closed its side of the byte stream.
    pub(crate) fn handle_peer_closed(&mut self) {
        match self.phase {
            Phase::Closing { .. } => self.phase = Phase::Done,
            _ => self.fail("the destination closed the connection".into()),
        }
    }

    /// The transport failed (read error, TLS alert).
    pub(crate) fn handle_transport_error(&mut self, why: String) {
        self.fail(why);
    }

    /// The deadline from [`poll_timeout`](Self::poll_timeout) passed.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        if let Output::Srt(srt) = &mut self.output {
            if let Some(c) = srt.caller.as_mut() {
                if c.poll_timeout().is_some_and(|t| t <= now) {
                    c.handle_timeout(now);
                }
            }
            self.srt_events(now);
        }
        match self.phase {
            Phase::Connecting | Phase::Handshaking if now >= self.started + CONNECT_TIMEOUT => {
                self.fail("the destination did not accept the stream within 10 s".into())
            }
            Phase::Closing { until } => {
                let drained = match &mut self.output {
                    Output::Srt(srt) => srt
                        .caller
                        .as_ref()
                        .is_none_or(|c| !c.is_connected() || c.stats().buffered_packets == 0),
                    _ => false,
                };
                if drained || now >= until {
                    if let Output::Srt(srt) = &mut self.output {
                        if let Some(c) = srt.caller.as_mut() {
                            // SHUTDOWN goes out with the next transmit.
                            c.shutdown(now);
                        }
                    }
                    self.phase = Phase::Done;
                }
            }
            Phase::Pushing if now >= self.last_progress + STALL_TIMEOUT => {
                self.fail("the destination took no data for 30 s".into())
            }
            _ => {}
        }
    }

    fn srt_events(&mut self, now: Instant) {
        let Output::Srt(srt) = &mut self.output else {
            return;
        };
        let mut connected = false;
        let mut ended = None;
        if let Some(c) = srt.caller.as_mut() {
            while let Some(ev) = c.poll_event() {
                match ev {
                    CallerEvent::Connected => connected = true,
                    CallerEvent::Closed(reason) => ended = Some(reason),
                }
            }
        }
        if connected && self.phase == Phase::Handshaking {
            self.pushing(now);
            self.rebuild_muxer();
        }
        match ended {
            Some(CloseReason::Local) if self.phase != Phase::Done => {
                self.phase = Phase::Done;
                if !self.detached {
                    self.reports.push_back(Report::Ended(None));
                }
            }
            Some(CloseReason::Local) => {}
            Some(reason) => self.fail(format!("SRT: {reason}")),
            None => {}
        }
    }

    /// The stream's tracks changed: re-select, and restart the muxer or
    /// send the RTMP headers again.
    pub(crate) fn on_tracks(&mut self, tracks: Vec<Track>, selected: Vec<TrackId>) {
        self.cursor.select(&tracks, &selected);
        self.tracks = tracks;
        self.selected = selected;
        match &mut self.output {
            Output::Rtmp(out) => out.tracks_sent = false,
            Output::Udp(_) | Output::Srt(_) => self.rebuild_muxer(),
        }
    }

    fn selected_tracks(&self) -> Vec<Track> {
        selected_tracks(&self.tracks, &self.selected)
    }

    fn rebuild_muxer(&mut self) {
        let tracks = self.selected_tracks();
        let muxer = if tracks.is_empty() {
            None
        } else {
            match Muxer::new(&tracks) {
                Ok(m) => Some(m),
                Err(e) => {
                    crate::warn!("push [{}]: cannot mux these tracks: {e}", self.key);
                    None
                }
            }
        };
        match &mut self.output {
            Output::Udp(u) => u.ts.muxer = muxer,
            Output::Srt(srt) => srt.ts.muxer = muxer,
            Output::Rtmp(_) => {}
        }
    }

    /// Frames were added to the feed: count them into the pacer and apply
    /// the drop policy.
    pub(crate) fn on_frames(&mut self, feed: &Feed, now: Instant) {
        if matches!(self.phase, Phase::Closing { .. } | Phase::Done) {
            return;
        }
        if let Output::Udp(u) = &mut self.output {
            let bytes = self.cursor.selected_bytes(feed, self.seen);
            u.pacer.on_input(bytes, now);
        }
        self.seen = feed.end();
        self.cursor.check_lag(feed);
    }

    /// Ends the session cleanly: the stream ended (`detached` false: the
    /// task goes back to `ready`) or the task was stopped (`detached`).
    /// What is left goes out with the next transmits: for MPEG-TS and SRT
    /// the frames of the feed not sent yet, muxed now.
    pub(crate) fn close(&mut self, detached: bool, feed: &Feed, now: Instant) {
        self.detached |= detached;
        match self.phase {
            Phase::Done | Phase::Closing { .. } => return,
            Phase::Connecting => {
                self.phase = Phase::Done;
                if !self.detached {
                    self.reports.push_back(Report::Ended(None));
                }
                return;
            }
            _ => {}
        }
        if !self.detached {
            self.reports.push_back(Report::Ended(None));
        }
        let until = match &mut self.output {
            Output::Rtmp(out) => {
                out.client.close();
                now + CLOSE_TIMEOUT
            }
            Output::Udp(u) => {
                u.ts.fill_all(&mut self.cursor, feed);
                u.draining = true;
                now + CLOSE_TIMEOUT
            }
            Output::Srt(srt) => {
                srt.ts.fill_all(&mut self.cursor, feed);
                now + srt.destination.latency + CLOSE_TIMEOUT
            }
        };
        self.phase = Phase::Closing { until };
    }

    /// Prefetches the session's own fields (the first step; see
    /// [`prefetch`](Self::prefetch)).
    pub(crate) fn prefetch_slot(&self) {
        crate::sys::prefetch(&self.phase);
        crate::sys::prefetch(&self.cursor);
        crate::sys::prefetch(&self.output);
        crate::sys::prefetch(&self.last_progress);
        crate::sys::prefetch(&self.sent_bytes);
    }

    /// Prefetches what [`poll_transmit`](Self::poll_transmit) reads behind
    /// the session's pointers (its RTMP output).
    ///
    /// The loop writes to many sessions in a row, and each `writev` evicts
    /// the next session's memory: asked a turn ahead, the misses overlap the
    /// write before instead of stalling the session's own.
    pub(crate) fn prefetch(&self) {
        if let Output::Rtmp(out) = &self.output {
            crate::sys::prefetch(&out.publishing);
            out.client.prefetch();
        }
    }

    /// Writes what the session has for the destination through `wire`:
    /// frames from the feed, protocol output, the tail of a close.
    pub(crate) fn poll_transmit(&mut self, feed: &Feed, now: Instant, wire: &mut dyn Wire) {
        match self.phase {
            Phase::Handshaking | Phase::Pushing | Phase::Closing { .. } => {}
            Phase::Connecting | Phase::Done => return,
        }
        match &self.output {
            Output::Rtmp(_) => self.transmit_rtmp(feed, now, wire),
            Output::Udp(_) => self.transmit_udp(feed, now, wire),
            Output::Srt(_) => self.transmit_srt(feed, now, wire),
        }
    }

    fn transmit_rtmp(&mut self, feed: &Feed, now: Instant, wire: &mut dyn Wire) {
        let Output::Rtmp(out) = &mut self.output else {
            return;
        };
        let media = self.phase == Phase::Pushing && out.publishing;
        let before = self.sent_bytes;
        let result = rtmp_write(
            out,
            &mut self.cursor,
            feed,
            media,
            &self.tracks,
            &self.selected,
            wire,
            &mut self.sent_bytes,
        );
        // Progress: bytes went, or nothing waits (not even a frame) and
        // nothing was dropped for want of room.
        let progress = self.sent_bytes > before
            || (out.partial.is_none()
                && out.client.pending_output().is_empty()
                && self.cursor.dropped_frames == self.dropped_seen
                && (!media || self.cursor.peek(feed).is_none()));
        self.dropped_seen = self.cursor.dropped_frames;
        if progress {
            self.last_progress = now;
        }
        if let Err(why) = result {
            self.fail(why);
            return;
        }
        if matches!(self.phase, Phase::Closing { .. })
            && !out.closed_write
            && out.partial.is_none()
            && out.client.pending_output().is_empty()
        {
            wire.close_write();
            out.closed_write = true;
        }
    }

    fn transmit_udp(&mut self, feed: &Feed, now: Instant, wire: &mut dyn Wire) {
        let Output::Udp(u) = &mut self.output else {
            return;
        };
        let unpaced = u.draining;
        let mut failure = None;
        loop {
            if !unpaced {
                u.ts.fill(&mut self.cursor, feed);
            }
            // As many whole datagrams as the pacer allows, in one call.
            let mut batch: [&[u8]; DATAGRAM_BATCH] = [&[]; DATAGRAM_BATCH];
            let mut count = 0;
            let mut at = u.ts.ts_pos;
            while count < batch.len() {
                let pending = u.ts.ts.len() - at;
                if pending == 0 || (pending < DATAGRAM && !unpaced) {
                    break;
                }
                let n = pending.min(DATAGRAM);
                if !unpaced && !u.pacer.try_send(n, now) {
                    break;
                }
                batch[count] = &u.ts.ts[at..at + n];
                count += 1;
                at += n;
            }
            if count == 0 {
                break;
            }
            match wire.send(&batch[..count]) {
                Ok(sent) => {
                    let bytes: usize = batch[..sent].iter().map(|d| d.len()).sum();
                    u.ts.consume(bytes);
                    self.sent_bytes += bytes as u64;
                    self.last_progress = now;
                    if sent < count {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    // Nobody listens there (yet): UDP carries on without it.
                    let n = batch[0].len();
                    u.ts.consume(n);
                    u.refused += 1;
                    self.last_progress = now;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failure = Some(format!("send: {e}"));
                    break;
                }
            }
        }
        u.ts.release();
        let drained = u.draining && u.ts.pending() == 0;
        if let Some(why) = failure {
            self.fail(why);
        } else if drained {
            self.phase = Phase::Done;
        }
    }

    fn transmit_srt(&mut self, feed: &Feed, now: Instant, wire: &mut dyn Wire) {
        let closing = matches!(self.phase, Phase::Closing { .. });
        let Output::Srt(srt) = &mut self.output else {
            return;
        };
        if self.phase == Phase::Pushing || closing {
            if let Some(caller) = srt.caller.as_mut() {
                let size = srt.destination.payload_size;
                loop {
                    if !closing {
                        srt.ts.fill(&mut self.cursor, feed);
                    }
                    let pending = srt.ts.pending();
                    // A close sends the tail; SHUTDOWN follows once the
                    // receiver has it all (see `handle_timeout`), not
                    // before: it would drop what it still holds.
                    if pending == 0 || (pending < size && !closing) {
                        break;
                    }
                    let n = pending.min(size);
                    let at = srt.ts.ts_pos;
                    if caller.send(&srt.ts.ts[at..at + n], now).is_err() {
                        break;
                    }
                    srt.ts.consume(n);
                }
                srt.ts.release();
            }
        }
        self.srt_flush(now, wire);
    }

    /// Sends what the caller has to send, in batches of one `sendmmsg`.
    fn srt_flush(&mut self, now: Instant, wire: &mut dyn Wire) {
        let Output::Srt(srt) = &mut self.output else {
            return;
        };
        let Some(caller) = srt.caller.as_mut() else {
            return;
        };
        loop {
            // Datagrams the socket refused last time go first.
            if srt.pending.is_empty() {
                srt.pending_at = 0;
                while srt.pending.len() < DATAGRAM_BATCH
                    && caller.poll_transmit(now, &mut srt.buf).is_some()
                {
                    let start = srt.arena.len();
                    srt.arena.extend_from_slice(&srt.buf);
                    srt.pending.push((start, srt.buf.len()));
                }
                if srt.pending.is_empty() {
                    srt.arena.clear();
                    return;
                }
            }
            let mut slices: [&[u8]; DATAGRAM_BATCH] = [&[]; DATAGRAM_BATCH];
            let mut count = 0;
            for &(at, len) in &srt.pending[srt.pending_at..] {
                slices[count] = &srt.arena[at..at + len];
                count += 1;
            }
            let slices = &slices[..count];
            match wire.send(slices) {
                Ok(sent) => {
                    let bytes: usize = slices[..sent].iter().map(|d| d.len()).sum();
                    self.sent_bytes += bytes as u64;
                    self.last_progress = now;
                    srt.pending_at += sent;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                // Refused or unreachable: the caller's own timers decide.
                Err(_) => srt.pending_at += 1,
            }
            if srt.pending_at >= srt.pending.len() {
                srt.pending.clear();
                srt.arena.clear();
            }
        }
    }
}

/// One frame of a `writev` batch: this connection's header for it, and
/// the clock and cursor after it (to roll back a short write).
#[derive(Clone, Copy)]
struct Staged {
    head: [u8; MAX_FULL_HEADER],
    head_len: usize,
    clock: MediaClock,
    mark: Mark,
}

impl Staged {
    const EMPTY: Staged = Staged {
        head: [0; MAX_FULL_HEADER],
        head_len: 0,
        clock: MediaClock::ZERO,
        mark: Mark::ZERO,
    };
}

/// RTMP output: first a message the socket took part of, then the
/// client's own output (commands, acknowledgements, headers, frames cut
/// here), then frames from the feed in batches, each as its own header +
/// the shared body. A message is never split by another; the client's
/// output goes only between messages, and new frames only once it is sent.
#[allow(clippy::too_many_arguments)]
fn rtmp_write(
    out: &mut RtmpOut,
    cursor: &mut Cursor,
    feed: &Feed,
    media: bool,
    tracks: &[Track],
    selected: &[TrackId],
    wire: &mut dyn Wire,
    sent: &mut u64,
) -> Result<(), String> {
    let write_err = |e: io::Error| format!("write: {e}");
    loop {
        if let Some(p) = out.partial.as_mut() {
            let n = wire.write(&p.slices()).map_err(write_err)?;
            p.sent += n;
            *sent += n as u64;
            if p.sent < p.len() {
                return Ok(());
            }
            out.partial = None;
        }
        while !out.client.pending_output().is_empty() {
            let n = wire
                .write(&[IoSlice::new(out.client.pending_output())])
                .map_err(write_err)?;
            if n == 0 {
                return Ok(());
            }
            out.client.consume_output(n);
            *sent += n as u64;
        }
        if !media {
            // Flush TLS records rustls may still hold.
            wire.write(&[]).map_err(write_err)?;
            return Ok(());
        }
        if !out.tracks_sent {
            let announced = selected_tracks(tracks, selected);
            if announced.is_empty() {
                return Ok(());
            }
            out.client
                .send_tracks(&announced)
                .map_err(|e| format!("RTMP: {e}"))?;
            out.tracks_sent = true;
            continue;
        }
        // Stage a batch of frames: each one's own header (in `heads`), the
        // shared body (in `bodies`), and the clock and cursor after it.
        // On the stack, not in the session: the stack is in cache, a
        // session's own memory is cold on every call (300 destinations).
        let mut staged = [Staged::EMPTY; RTMP_BATCH];
        let clock = out.client.media_clock();
        let mut bodies: [Option<&Bytes>; RTMP_BATCH] = [None; RTMP_BATCH];
        let mut count = 0;
        let mut own_cut = false;
        // Every connection announces the chunk size the feed cuts with.
        let shares = out.client.chunk_size() == SHARED_CHUNK_SIZE;
        while count < RTMP_BATCH {
            let Some(f) = cursor.peek(feed) else { break };
            let Some(msg) = out.client.time_frame(&f.frame) else {
                cursor.advance();
                continue;
            };
            match shared_body(f, msg.timestamp).filter(|_| shares) {
                Some(body) => {
                    let st = &mut staged[count];
                    st.head_len = write_full_header(
                        &mut st.head,
                        msg.chunk_stream,
                        msg.timestamp,
                        body_length(f),
                        msg.type_id,
                        msg.stream_id,
                    );
                    st.clock = out.client.media_clock();
                    st.mark = cursor.mark();
                    bodies[count] = Some(body);
                    count += 1;
                    cursor.advance();
                }
                None if count == 0 => {
                    // A codec or timestamp the shared body cannot carry:
                    // cut it for this connection alone.
                    cut_own(out, f, &msg, tracks).map_err(|e| format!("RTMP: {e}"))?;
                    cursor.advance();
                    own_cut = true;
                    break;
                }
                None => {
                    // Not timed after all: the next batch starts with it.
                    out.client.set_media_clock(staged[count - 1].clock);
                    break;
                }
            }
        }
        if count == 0 {
            if own_cut {
                continue;
            }
            return Ok(());
        }
        let empty: &[u8] = &[];
        let mut slices = [IoSlice::new(empty); 2 * RTMP_BATCH];
        for i in 0..count {
            let st = &staged[i];
            slices[2 * i] = IoSlice::new(&st.head[..st.head_len]);
            slices[2 * i + 1] = IoSlice::new(bodies[i].map_or(empty, |b| &b[..]));
        }
        let mut n = wire.write(&slices[..2 * count]).map_err(write_err)?;
        *sent += n as u64;
        // Frames wholly written, then the one cut short.
        let mut done = 0;
        while done < count {
            let len = staged[done].head_len + bodies[done].map_or(0, |b| b.len());
            if n < len {
                break;
            }
            n -= len;
            done += 1;
        }
        if done == count {
            if count < RTMP_BATCH {
                return Ok(());
            }
            continue;
        }
        // Roll the cursor and clock back to the first frame not wholly
        // written; one cut short is kept whole (a message is never split).
        let st = &staged[done];
        if n > 0 {
            let (head, head_len, clock_after, mark) = (st.head, st.head_len, st.clock, st.mark);
            out.partial = Some(Partial {
                head,
                head_len,
                body: bodies[done].cloned().unwrap_or_default(),
                sent: n,
            });
            out.client.set_media_clock(clock_after);
            cursor.reset(mark);
            cursor.advance();
        } else {
            let restore = if done == 0 {
                clock
            } else {
                staged[done - 1].clock
            };
            let mark = st.mark;
            out.client.set_media_clock(restore);
            cursor.reset(mark);
        }
        return Ok(());
    }
}

/// The session's tracks among the stream's (what its muxer or RTMP headers
/// announce).
fn selected_tracks(tracks: &[Track], selected: &[TrackId]) -> Vec<Track> {
    tracks
        .iter()
        .filter(|t| selected.contains(&t.id))
        .cloned()
        .collect()
}

/// The feed's body for a frame at `timestamp`, if this connection can send
/// it as it is.
fn shared_body(f: &FeedFrame, timestamp: u32) -> Option<&Bytes> {
    let body = f.rtmp.as_ref()?;
    shares_body(timestamp, body.chunks).then_some(&body.bytes)
}

fn body_length(f: &FeedFrame) -> u32 {
    f.rtmp.as_ref().map_or(0, |b| b.length)
}

/// Cuts one frame into this connection's own output (the encoder path).
fn cut_own(
    out: &mut RtmpOut,
    f: &FeedFrame,
    msg: &crate::rtmp::client::FrameMessage,
    tracks: &[Track],
) -> Result<(), crate::rtmp::RtmpError> {
    let Some(track) = tracks.iter().find(|t| t.id == f.frame.track) else {
        return Ok(());
    };
    let (h, n) = crate::rtmp::client::tag_header(track, &f.frame)?;
    out.client
        .write_frame_message(msg, &[&h[..n], &f.frame.data]);
    Ok(())
}
