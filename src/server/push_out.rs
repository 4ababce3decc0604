//! One push session: the socket glue between a live stream's frames and a
//! destination. RTMP/RTMPS over TCP drives the sans-IO RTMP
//! [`ClientSession`]; MPEG-TS over UDP drives the TS [`Muxer`] and sends
//! 1316-byte datagrams, paced. Each session has its own bounded
//! [`FrameQueue`], so a slow destination only ever drops its own frames.
//!
//! The session reports what happened ([`Report`]); the loop turns reports
//! into task state (`connecting` -> `pushing` -> `ready`/`error`).

use super::transport::{ReadEnd, Transport};
use crate::media::{Frame, MediaKind, Track, TrackId};
use crate::push::pacing::Pacer;
use crate::push::queue::FrameQueue;
use crate::rtmp::client::{ClientConfig, ClientEvent, ClientSession};
use crate::srt::{Caller, CallerConfig, CallerEvent, CloseReason};
use crate::state::push::{Destination, PushTask};
use crate::state::streams::StreamId;
use crate::ts::Muxer;
use mio::net::{TcpStream, UdpSocket};
use mio::{Interest, Token};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most bytes a destination may have queued before it drops to keyframes.
pub const QUEUE_BYTES: usize = 8 * 1024 * 1024;
/// What all destinations together may queue: with many pushes each one's
/// bound shrinks, so a kiln that falls behind drops frames instead of
/// holding `QUEUE_BYTES` times the number of pushes.
pub const QUEUE_BUDGET: usize = 256 * 1024 * 1024;
/// No destination's bound goes below this (a keyframe or two).
pub const MIN_QUEUE_BYTES: usize = 256 * 1024;

/// Each destination's queue bound when `sessions` push sessions run.
pub fn queue_bytes_for(sessions: usize) -> usize {
    (QUEUE_BUDGET / sessions.max(1)).clamp(MIN_QUEUE_BYTES, QUEUE_BYTES)
}

/// Keep at most this much RTMP output waiting in the session's buffer;
/// the rest waits as frames in the queue (where the drop policy applies).
const RTMP_HIGH_WATER: usize = 256 * 1024;
/// TS bytes muxed ahead of the socket; the rest waits as frames (shared,
/// not copied) in the queue.
const UDP_HIGH_WATER: usize = 16 * 1024;
/// One datagram: 7 TS packets.
const DATAGRAM: usize = 1316;
/// From start to `pushing`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A destination that takes nothing for this long has failed.
const STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a clean close may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Identifies a task.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TaskKey {
    pub vhost: String,
    pub app: String,
    pub id: String,
}

/// The stream a session starts from.
pub struct StartMedia<'a> {
    pub stream: StreamId,
    pub tracks: Vec<Track>,
    /// The task's tracks among them.
    pub selected: Vec<TrackId>,
    /// The stream's last GOP (sent first, so the destination starts on a
    /// keyframe).
    pub gop: &'a [Frame],
}

/// What the loop learns from a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// The destination accepted the stream.
    Pushing,
    /// The session is over: `None` for a clean end, else why it failed.
    Ended(Option<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Resolving,
    Connecting,
    /// RTMP: connected, handshake and publish in progress.
    Handshaking,
    Pushing,
    Closing {
        until: Instant,
    },
    Done,
}

enum Output {
    Rtmp {
        transport: Option<Transport>,
        session: Box<ClientSession>,
        tls: Option<Arc<rustls::ClientConfig>>,
        server_name: String,
        /// The destination said NetStream.Publish.Start.
        publishing: bool,
        tracks_sent: bool,
    },
    Udp {
        socket: Option<UdpSocket>,
        ttl: Option<u32>,
        muxer: Option<Box<Muxer>>,
        ts: Vec<u8>,
        ts_pos: usize,
        pacer: Pacer,
        refused: u64,
    },
    Srt(Box<SrtOut>),
}

/// The SRT caller output: TS in `payload_size` packets through the caller.
struct SrtOut {
    socket: Option<UdpSocket>,
    caller: Option<Caller>,
    crypto: Option<crate::srt::crypto::CryptoConfig>,
    stream_id: Option<String>,
    latency: Duration,
    timeout: Option<Duration>,
    payload_size: usize,
    muxer: Option<Muxer>,
    ts: Vec<u8>,
    ts_pos: usize,
    buf: Vec<u8>,
    /// Datagrams waiting for one `sendmmsg`: (offset, length) in `arena`;
    /// `pending_at` is the first not yet sent.
    arena: Vec<u8>,
    pending: Vec<(usize, usize)>,
    pending_at: usize,
}

pub struct PushOut {
    pub key: TaskKey,
    pub stream: StreamId,
    /// The stream's tracks and the selected ones.
    tracks: Vec<Track>,
    selected: Vec<TrackId>,
    queue: FrameQueue,
    output: Output,
    phase: Phase,
    addrs: Vec<SocketAddr>,
    started: Instant,
    last_progress: Instant,
    /// Bytes written to the destination in this session.
    pub sent_bytes: u64,
    reports: Vec<Report>,
    /// The task was stopped: close cleanly and report nothing.
    pub detached: bool,
    /// The loop has taken this session's end into its task; later numbers
    /// (a lingering clean close) no longer belong to the task.
    pub task_done: bool,
}

fn video_of(tracks: &[Track], selected: &[TrackId]) -> Option<TrackId> {
    tracks
        .iter()
        .find(|t| t.kind() == MediaKind::Video && selected.contains(&t.id))
        .map(|t| t.id)
}

impl PushOut {
    /// A session for a task, starting from the stream's last GOP.
    pub fn new(
        key: TaskKey,
        task: &PushTask,
        media: StartMedia<'_>,
        tls_roots: &Arc<rustls::ClientConfig>,
        queue_bytes: usize,
        now: Instant,
    ) -> Self {
        let StartMedia {
            stream,
            tracks,
            selected,
            gop,
        } = media;
        let output = match &task.destination {
            Destination::Rtmp {
                tls,
                host,
                app,
                tc_url,
                ..
            } => Output::Rtmp {
                transport: None,
                session: Box::new(ClientSession::new(ClientConfig::new(
                    tc_url,
                    app,
                    &task.spec.stream_key,
                ))),
                tls: tls.then(|| tls_roots.clone()),
                server_name: host.clone(),
                publishing: false,
                tracks_sent: false,
            },
            Destination::Udp { ttl, .. } => Output::Udp {
                socket: None,
                ttl: *ttl,
                muxer: None,
                ts: Vec::new(),
                ts_pos: 0,
                pacer: Pacer::new(DATAGRAM * 32, now),
                refused: 0,
            },
            Destination::Srt {
                latency,
                timeout,
                stream_id,
                payload_size,
                crypto,
                ..
            } => Output::Srt(Box::new(SrtOut {
                socket: None,
                caller: None,
                crypto: crypto.clone(),
                stream_id: stream_id.clone(),
                latency: *latency,
                timeout: *timeout,
                payload_size: *payload_size,
                muxer: None,
                ts: Vec::new(),
                ts_pos: 0,
                buf: Vec::with_capacity(1500),
                arena: Vec::new(),
                pending: Vec::new(),
                pending_at: 0,
            })),
        };
        let mut queue = FrameQueue::new(queue_bytes, video_of(&tracks, &selected));
        for f in gop.iter().filter(|f| selected.contains(&f.track)) {
            queue.push(f.clone());
        }
        PushOut {
            key,
            stream,
            tracks,
            selected,
            queue,
            output,
            phase: Phase::Resolving,
            addrs: Vec::new(),
            started: now,
            last_progress: now,
            sent_bytes: 0,
            reports: Vec::new(),
            detached: false,
            task_done: false,
        }
    }

    /// Applies a new queue bound (the number of sessions changed).
    pub fn set_queue_bytes(&mut self, bytes: usize) {
        self.queue.set_max_bytes(bytes);
    }

    pub fn take_reports(&mut self) -> Vec<Report> {
        std::mem::take(&mut self.reports)
    }

    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    pub fn dropped_frames(&self) -> u64 {
        self.queue.dropped_frames
    }

    pub fn deadline(&self) -> Instant {
        let base = match self.phase {
            Phase::Resolving | Phase::Connecting | Phase::Handshaking => {
                self.started + CONNECT_TIMEOUT
            }
            Phase::Closing { until } => until,
            Phase::Done => self.last_progress,
            Phase::Pushing => {
                let stall = self.last_progress + STALL_TIMEOUT;
                match &self.output {
                    Output::Udp {
                        pacer, ts, ts_pos, ..
                    } if ts.len() - ts_pos >= DATAGRAM => pacer.ready_at(DATAGRAM).min(stall),
                    _ => stall,
                }
            }
        };
        // The SRT caller has its own timers (ACK, NAK, keepalive, ...).
        match &self.output {
            Output::Srt(srt) if self.phase != Phase::Done => {
                match srt.caller.as_ref().and_then(|c| c.poll_timeout()) {
                    Some(t) => base.min(t),
                    None => base,
                }
            }
            _ => base,
        }
    }

    /// Ends the session with an error from outside its own logic (a
    /// contained panic): the task records `why` and retries.
    pub fn abort(&mut self, why: &str) {
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
        // The loop logs it at WARN with the next retry time.
        crate::debug!(
            "push [{}/{}/{}]: {why}",
            self.key.vhost,
            self.key.app,
            self.key.id
        );
        self.phase = Phase::Done;
        if !self.detached {
            self.reports.push(Report::Ended(Some(why)));
        }
    }

    fn finish(&mut self) {
        if self.phase != Phase::Done {
            self.phase = Phase::Done;
            if !self.detached {
                self.reports.push(Report::Ended(None));
            }
        }
    }

    /// The destination's addresses are known: connect (or open the socket).
    pub fn on_resolved(
        &mut self,
        result: Result<Vec<SocketAddr>, String>,
        registry: &mio::Registry,
        token: Token,
        now: Instant,
    ) {
        if self.phase != Phase::Resolving {
            return;
        }
        match result {
            Err(e) => self.fail(e),
            Ok(addrs) => {
                self.addrs = addrs;
                self.connect_next(registry, token, now);
            }
        }
    }

    fn connect_next(&mut self, registry: &mio::Registry, token: Token, now: Instant) {
        let Some(addr) = (!self.addrs.is_empty()).then(|| self.addrs.remove(0)) else {
            self.fail("no address of the destination could be reached".into());
            return;
        };
        let result: io::Result<()> = match &mut self.output {
            Output::Rtmp { transport, .. } => TcpStream::connect(addr).and_then(|mut s| {
                registry.register(&mut s, token, Interest::READABLE | Interest::WRITABLE)?;
                *transport = Some(Transport::client(s, None));
                Ok(())
            }),
            Output::Udp { socket, ttl, .. } => open_udp(addr, *ttl).and_then(|mut s| {
                registry.register(&mut s, token, Interest::WRITABLE)?;
                *socket = Some(s);
                Ok(())
            }),
            Output::Srt(srt) => open_udp(addr, None).and_then(|mut s| {
                registry.register(&mut s, token, Interest::READABLE | Interest::WRITABLE)?;
                srt.socket = Some(s);
                let mut config = CallerConfig::new(addr);
                config.stream_id = srt.stream_id.clone();
                config.latency = srt.latency;
                config.payload_size = srt.payload_size;
                config.crypto = srt.crypto.clone();
                if let Some(t) = srt.timeout {
                    config.peer_idle_timeout = t;
                }
                srt.caller = Some(Caller::new(config, now));
                Ok(())
            }),
        };
        match result {
            Err(e) => {
                if self.addrs.is_empty() {
                    self.fail(format!("cannot connect to {addr}: {e}"));
                } else {
                    self.connect_next(registry, token, now);
                }
            }
            Ok(()) => match self.output {
                Output::Rtmp { .. } => self.phase = Phase::Connecting,
                Output::Srt(_) => {
                    self.phase = Phase::Handshaking;
                    self.srt_flush();
                }
                Output::Udp { .. } => {
                    // UDP has no handshake: pushing from the first datagram.
                    self.phase = Phase::Pushing;
                    self.last_progress = now;
                    self.reports.push(Report::Pushing);
                    self.rebuild_muxer();
                    self.pump(now);
                }
            },
        }
    }

    /// The stream's tracks changed: re-select, and restart the muxer or
    /// send the RTMP headers again.
    pub fn on_tracks(&mut self, tracks: Vec<Track>, selected: Vec<TrackId>, now: Instant) {
        self.queue.set_video(video_of(&tracks, &selected));
        self.tracks = tracks;
        self.selected = selected;
        match &mut self.output {
            Output::Rtmp { tracks_sent, .. } => *tracks_sent = false,
            Output::Udp { .. } | Output::Srt(_) => self.rebuild_muxer(),
        }
        self.pump(now);
    }

    fn selected_tracks(&self) -> Vec<Track> {
        self.tracks
            .iter()
            .filter(|t| self.selected.contains(&t.id))
            .cloned()
            .collect()
    }

    fn rebuild_muxer(&mut self) {
        let tracks = self.selected_tracks();
        let muxer = if tracks.is_empty() {
            None
        } else {
            match Muxer::new(&tracks) {
                Ok(m) => Some(m),
                Err(e) => {
                    crate::warn!(
                        "push [{}/{}/{}]: cannot mux these tracks: {e}",
                        self.key.vhost,
                        self.key.app,
                        self.key.id
                    );
                    None
                }
            }
        };
        match &mut self.output {
            Output::Udp { muxer: m, .. } => *m = muxer.map(Box::new),
            Output::Srt(srt) => srt.muxer = muxer,
            Output::Rtmp { .. } => {}
        }
    }

    /// Frames of the stream (one ingest turn's worth), sent in one pump.
    pub fn on_frames(&mut self, frames: &[Frame], now: Instant) {
        if matches!(self.phase, Phase::Closing { .. } | Phase::Done) {
            return;
        }
        for frame in frames.iter().filter(|f| self.selected.contains(&f.track)) {
            if let Output::Udp { pacer, .. } = &mut self.output {
                pacer.on_input(frame.data.len(), now);
            }
            self.queue.push(frame.clone());
        }
        if self.phase == Phase::Pushing {
            self.pump(now);
        }
    }

    /// Socket readiness (either direction).
    pub fn on_ready(&mut self, registry: &mio::Registry, token: Token, now: Instant) {
        match self.phase {
            Phase::Connecting => self.check_connected(registry, token, now),
            Phase::Resolving | Phase::Done => return,
            _ => {}
        }
        match self.output {
            Output::Rtmp { .. } => self.rtmp_read(now),
            Output::Srt(_) => self.srt_read(now),
            Output::Udp { .. } => {}
        }
        self.pump(now);
    }

    /// The deadline passed.
    pub fn on_deadline(&mut self, now: Instant) {
        if let Output::Srt(srt) = &mut self.output {
            if let Some(c) = srt.caller.as_mut() {
                if c.poll_timeout().is_some_and(|t| t <= now) {
                    c.handle_timeout(now);
                }
            }
            self.srt_events(now);
            self.srt_flush();
            if self.phase == Phase::Done {
                return;
            }
            if let Phase::Closing { until } = self.phase {
                let drained = match &self.output {
                    Output::Srt(srt) => srt
                        .caller
                        .as_ref()
                        .is_none_or(|c| !c.is_connected() || c.stats().buffered_packets == 0),
                    _ => true,
                };
                if drained || now >= until {
                    if let Output::Srt(srt) = &mut self.output {
                        if let Some(c) = srt.caller.as_mut() {
                            c.shutdown(now);
                        }
                    }
                    self.srt_flush();
                    self.phase = Phase::Done;
                }
                return;
            }
            // Only the caller's timer was due.
            let own = match self.phase {
                Phase::Resolving | Phase::Connecting | Phase::Handshaking => {
                    self.started + CONNECT_TIMEOUT
                }
                Phase::Pushing => self.last_progress + STALL_TIMEOUT,
                _ => now,
            };
            if own > now {
                self.pump(now);
                return;
            }
        }
        match self.phase {
            Phase::Resolving => self.fail("resolving the destination timed out".into()),
            Phase::Connecting | Phase::Handshaking => {
                self.fail("the destination did not accept the stream within 10 s".into())
            }
            Phase::Closing { .. } => self.phase = Phase::Done,
            Phase::Pushing => {
                if now >= self.last_progress + STALL_TIMEOUT {
                    self.fail("the destination took no data for 30 s".into());
                } else {
                    self.pump(now);
                }
            }
            Phase::Done => {}
        }
    }

    /// Ends the session cleanly: the stream ended (`detached` false: the
    /// task goes back to `ready`) or the task was stopped (`detached`).
    pub fn close(&mut self, detached: bool, now: Instant) {
        self.detached |= detached;
        match self.phase {
            Phase::Done | Phase::Closing { .. } => return,
            Phase::Resolving | Phase::Connecting => {
                self.finish();
                return;
            }
            _ => {}
        }
        match &mut self.output {
            Output::Rtmp {
                session, transport, ..
            } => {
                session.close();
                if let Some(t) = transport {
                    let _ = flush_rtmp(t, session, &mut self.sent_bytes);
                    t.close_write();
                }
            }
            Output::Udp { .. } => {
                // Send what is muxed, unpaced: the stream is over.
                self.flush_udp(now, true);
            }
            Output::Srt(_) => {
                // Send the tail; SHUTDOWN once the receiver has it all
                // (see `on_deadline`), not before: it would drop what it
                // still holds for its latency.
                self.pump_srt(now, true);
            }
        }
        if !self.detached {
            self.reports.push(Report::Ended(None));
        }
        self.phase = match &self.output {
            Output::Rtmp { .. } => Phase::Closing {
                until: now + CLOSE_TIMEOUT,
            },
            Output::Srt(srt) => Phase::Closing {
                until: now + srt.latency + CLOSE_TIMEOUT,
            },
            Output::Udp { .. } => Phase::Done,
        };
    }

    fn check_connected(&mut self, registry: &mio::Registry, token: Token, now: Instant) {
        let Output::Rtmp {
            transport,
            tls,
            server_name,
            ..
        } = &mut self.output
        else {
            return;
        };
        let Some(t) = transport.as_mut() else {
            return;
        };
        let stream = t.stream_mut();
        if let Ok(Some(e)) | Err(e) = stream.take_error() {
            let _ = registry.deregister(stream);
            *transport = None;
            if self.addrs.is_empty() {
                self.fail(format!("cannot connect: {e}"));
            } else {
                self.connect_next(registry, token, now);
            }
            return;
        }
        match stream.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
            Err(e) => {
                self.fail(format!("cannot connect: {e}"));
                return;
            }
        }
        let _ = stream.set_nodelay(true);
        if let Some(cfg) = tls.clone() {
            let started = rustls::pki_types::ServerName::try_from(server_name.clone())
                .map_err(|e| format!("invalid TLS server name [{server_name}]: {e}"))
                .and_then(|name| {
                    rustls::ClientConnection::new(cfg, name).map_err(|e| format!("TLS: {e}"))
                });
            match started {
                Ok(c) => {
                    let Some(old) = transport.take() else { return };
                    *transport = Some(old.with_client_tls(c));
                }
                Err(why) => {
                    self.fail(why);
                    return;
                }
            }
        }
        self.phase = Phase::Handshaking;
        self.last_progress = now;
    }

    fn rtmp_read(&mut self, now: Instant) {
        let Output::Rtmp {
            transport: Some(t),
            session,
            ..
        } = &mut self.output
        else {
            return;
        };
        let mut failure = None;
        let result = t.read(true, |data| match session.handle_input(data) {
            Ok(()) => true,
            Err(e) => {
                failure = Some(e.to_string());
                false
            }
        });
        let closed = match result {
            Ok((_, end)) => end == ReadEnd::Closed,
            Err(e) => {
                failure.get_or_insert(e.to_string());
                true
            }
        };
        let mut events = Vec::new();
        while let Some(ev) = session.poll_event() {
            events.push(ev);
        }
        for ev in events {
            match ev {
                ClientEvent::Connected => {}
                ClientEvent::Publishing => {
                    if let Output::Rtmp { publishing, .. } = &mut self.output {
                        *publishing = true;
                    }
                    if self.phase == Phase::Handshaking {
                        self.phase = Phase::Pushing;
                        self.last_progress = now;
                        self.reports.push(Report::Pushing);
                    }
                }
                ClientEvent::Error(why) => {
                    failure.get_or_insert(format!("the destination refused: {why}"));
                }
            }
        }
        if let Some(why) = failure {
            self.fail(why);
        } else if closed {
            match self.phase {
                Phase::Closing { .. } => self.phase = Phase::Done,
                _ => self.fail("the destination closed the connection".into()),
            }
        }
    }

    /// Moves queued frames into the output and the output to the socket.
    fn pump(&mut self, now: Instant) {
        match self.phase {
            Phase::Pushing | Phase::Handshaking | Phase::Closing { .. } => {}
            _ => return,
        }
        match &mut self.output {
            Output::Rtmp { .. } => self.pump_rtmp(now),
            Output::Udp { .. } => self.flush_udp(now, false),
            Output::Srt(_) => {
                if self.phase == Phase::Pushing {
                    self.pump_srt(now, false);
                }
            }
        }
    }

    /// Muxes queued frames and hands whole payloads to the SRT caller.
    fn pump_srt(&mut self, now: Instant, flush_tail: bool) {
        let Output::Srt(srt) = &mut self.output else {
            return;
        };
        let Some(caller) = srt.caller.as_mut() else {
            return;
        };
        let size = srt.payload_size;
        loop {
            while srt.ts.len() - srt.ts_pos < UDP_HIGH_WATER {
                let Some(m) = srt.muxer.as_mut() else { break };
                let Some(f) = self.queue.pop() else { break };
                if let Err(e) = m.write_frame(&f, &mut srt.ts) {
                    crate::debug!("push mux: {e}");
                }
            }
            let pending = srt.ts.len() - srt.ts_pos;
            if pending == 0 || (pending < size && !flush_tail) {
                break;
            }
            let n = pending.min(size);
            if caller
                .send(&srt.ts[srt.ts_pos..srt.ts_pos + n], now)
                .is_err()
            {
                break;
            }
            srt.ts_pos += n;
            if srt.ts_pos > UDP_HIGH_WATER {
                srt.ts.drain(..srt.ts_pos);
                srt.ts_pos = 0;
            }
        }
        release_sent(&mut srt.ts, &mut srt.ts_pos);
        self.srt_flush();
    }

    /// Sends what the caller has to send, in batches of one `sendmmsg`.
    fn srt_flush(&mut self) {
        let Output::Srt(srt) = &mut self.output else {
            return;
        };
        let (Some(socket), Some(caller)) = (srt.socket.as_ref(), srt.caller.as_mut()) else {
            return;
        };
        let fd = socket.as_raw_fd();
        let now = Instant::now();
        loop {
            // Datagrams the socket refused last time go first.
            if srt.pending.is_empty() {
                srt.pending_at = 0;
                while srt.pending.len() < 64 && caller.poll_transmit(now, &mut srt.buf).is_some() {
                    let start = srt.arena.len();
                    srt.arena.extend_from_slice(&srt.buf);
                    srt.pending.push((start, srt.buf.len()));
                }
                if srt.pending.is_empty() {
                    srt.arena.clear();
                    return;
                }
            }
            let mut slices: [&[u8]; 64] = [&[]; 64];
            let mut count = 0;
            for &(at, len) in &srt.pending[srt.pending_at..] {
                slices[count] = &srt.arena[at..at + len];
                count += 1;
            }
            let slices = &slices[..count];
            match crate::sys::send_datagrams(fd, slices) {
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

    fn srt_read(&mut self, now: Instant) {
        let Output::Srt(srt) = &mut self.output else {
            return;
        };
        let (Some(socket), Some(caller)) = (srt.socket.as_ref(), srt.caller.as_mut()) else {
            return;
        };
        let mut buf = [0u8; 2048];
        loop {
            match socket.recv_from(&mut buf) {
                Ok((n, from)) => caller.handle_datagram(from, &buf[..n], now),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // ICMP errors on a connected socket: the caller's timers decide.
                Err(_) => break,
            }
        }
        self.srt_events(now);
        self.srt_flush();
    }

    fn srt_events(&mut self, now: Instant) {
        let mut events = Vec::new();
        if let Output::Srt(srt) = &mut self.output {
            if let Some(c) = srt.caller.as_mut() {
                while let Some(ev) = c.poll_event() {
                    events.push(ev);
                }
            }
        }
        for ev in events {
            match ev {
                CallerEvent::Connected => {
                    if self.phase == Phase::Handshaking {
                        self.phase = Phase::Pushing;
                        self.last_progress = now;
                        self.reports.push(Report::Pushing);
                        self.rebuild_muxer();
                    }
                }
                CallerEvent::Closed(CloseReason::Local) => self.finish(),
                CallerEvent::Closed(reason) => self.fail(format!("SRT: {reason}")),
            }
        }
    }

    fn pump_rtmp(&mut self, now: Instant) {
        // The headers are sent once per track change, not per frame.
        let needs_headers = matches!(
            &self.output,
            Output::Rtmp {
                publishing: true,
                tracks_sent: false,
                ..
            }
        );
        let selected = if needs_headers {
            self.selected_tracks()
        } else {
            Vec::new()
        };
        let Output::Rtmp {
            transport: Some(t),
            session,
            publishing,
            tracks_sent,
            ..
        } = &mut self.output
        else {
            return;
        };
        let mut failure = None;
        if *publishing && self.phase == Phase::Pushing {
            if !*tracks_sent && !selected.is_empty() {
                match session.send_tracks(&selected) {
                    Ok(()) => *tracks_sent = true,
                    Err(e) => failure = Some(format!("RTMP: {e}")),
                }
            }
            while *tracks_sent
                && failure.is_none()
                && session.pending_output().len() < RTMP_HIGH_WATER
            {
                let Some(f) = self.queue.pop() else { break };
                if let Err(e) = session.send_frame(&f) {
                    failure = Some(format!("RTMP: {e}"));
                }
            }
        }
        let before = self.sent_bytes;
        if let Err(e) = flush_rtmp(t, session, &mut self.sent_bytes) {
            failure.get_or_insert(format!("write: {e}"));
        }
        if self.sent_bytes > before || session.pending_output().is_empty() {
            self.last_progress = now;
        }
        if let Some(why) = failure {
            self.fail(why);
        }
    }

    fn flush_udp(&mut self, now: Instant, unpaced: bool) {
        let Output::Udp {
            socket: Some(socket),
            muxer,
            ts,
            ts_pos,
            pacer,
            refused,
            ..
        } = &mut self.output
        else {
            return;
        };
        let fd = socket.as_raw_fd();
        let mut failure = None;
        loop {
            // Mux ahead of the socket, up to the high-water mark.
            while ts.len() - *ts_pos < UDP_HIGH_WATER {
                let Some(m) = muxer.as_mut() else { break };
                let Some(f) = self.queue.pop() else { break };
                if let Err(e) = m.write_frame(&f, ts) {
                    crate::debug!("push mux: {e}");
                }
            }
            // As many whole datagrams as the pacer allows, in one call.
            let mut batch: [&[u8]; 64] = [&[]; 64];
            let mut count = 0;
            let mut at = *ts_pos;
            while count < batch.len() {
                let pending = ts.len() - at;
                if pending == 0 || (pending < DATAGRAM && !unpaced) {
                    break;
                }
                let n = pending.min(DATAGRAM);
                if !unpaced && !pacer.try_send(n, now) {
                    break;
                }
                batch[count] = &ts[at..at + n];
                count += 1;
                at += n;
            }
            if count == 0 {
                break;
            }
            match crate::sys::send_datagrams(fd, &batch[..count]) {
                Ok(sent) => {
                    let bytes: usize = batch[..sent].iter().map(|d| d.len()).sum();
                    *ts_pos += bytes;
                    self.sent_bytes += bytes as u64;
                    self.last_progress = now;
                    if sent < count {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    // Nobody listens there (yet): UDP carries on without it.
                    *ts_pos += batch[0].len();
                    *refused += 1;
                    self.last_progress = now;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failure = Some(format!("send: {e}"));
                    break;
                }
            }
            if *ts_pos > UDP_HIGH_WATER {
                ts.drain(..*ts_pos);
                *ts_pos = 0;
            }
        }
        release_sent(ts, ts_pos);
        if let Some(why) = failure {
            self.fail(why);
        }
    }

    pub fn deregister(&mut self, registry: &mio::Registry) {
        match &mut self.output {
            Output::Rtmp {
                transport: Some(t), ..
            } => {
                let _ = registry.deregister(t.stream_mut());
            }
            Output::Udp {
                socket: Some(s), ..
            } => {
                let _ = registry.deregister(s);
            }
            Output::Srt(srt) => {
                if let Some(s) = srt.socket.as_mut() {
                    let _ = registry.deregister(s);
                }
            }
            _ => {}
        }
    }
}

/// Drops TS bytes already sent and, once all are, memory a burst (a
/// keyframe, the GOP at start) grew the buffer to.
fn release_sent(ts: &mut Vec<u8>, ts_pos: &mut usize) {
    if *ts_pos == ts.len() {
        ts.clear();
        *ts_pos = 0;
        if ts.capacity() > 4 * UDP_HIGH_WATER {
            ts.shrink_to(UDP_HIGH_WATER);
        }
    }
}

fn flush_rtmp(t: &mut Transport, session: &mut ClientSession, sent: &mut u64) -> io::Result<()> {
    loop {
        let pending = session.pending_output();
        if pending.is_empty() && !t.has_pending_tls() {
            return Ok(());
        }
        let n = t.write(pending)?;
        if n == 0 {
            return Ok(());
        }
        session.consume_output(n);
        *sent += n as u64;
    }
}

fn open_udp(addr: SocketAddr, ttl: Option<u32>) -> io::Result<UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    let _ = socket.set_send_buffer_size(1024 * 1024);
    if let Some(ttl) = ttl {
        if addr.is_ipv4() {
            socket.set_multicast_ttl_v4(ttl)?;
            socket.set_ttl_v4(ttl)?;
        } else {
            socket.set_multicast_hops_v6(ttl)?;
            socket.set_unicast_hops_v6(ttl)?;
        }
    }
    socket.set_nonblocking(true)?;
    socket.connect(&addr.into())?;
    Ok(UdpSocket::from_std(socket.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_budget_bounds_the_sum() {
        assert_eq!(queue_bytes_for(0), QUEUE_BYTES);
        assert_eq!(queue_bytes_for(32), QUEUE_BYTES);
        assert_eq!(queue_bytes_for(256), 1024 * 1024);
        assert_eq!(queue_bytes_for(5000), MIN_QUEUE_BYTES);
        for n in [1usize, 10, 100, 300, 1000, 5000] {
            let total = n * queue_bytes_for(n);
            assert!(
                total <= QUEUE_BUDGET.max(n * MIN_QUEUE_BYTES),
                "{n}: {total}"
            );
        }
    }
}
