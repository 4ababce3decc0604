//! MPEG-TS over UDP ingest: one socket per configured port. The first
//! datagram on a port starts the stream its application's `<StreamMap>`
//! names for that port; the demuxer joins mid-stream and resyncs after
//! loss; the stream ends after a quiet period without datagrams.

use super::endpoint::{Cx, Endpoint};
use super::srt_ingest::drain_demuxer;
use crate::state::streams::{IngestOutput, SourceType, StreamId};
use crate::state::Registry;
use crate::ts::Demuxer;
use mio::net::UdpSocket;
use std::io;
use std::time::{Duration, Instant};

/// Largest datagram read (UDP's maximum payload).
const MAX_DATAGRAM: usize = 65_536;

struct Session {
    demuxer: Demuxer,
    stream: StreamId,
    last_datagram: Instant,
}

pub(crate) struct TsPort {
    socket: UdpSocket,
    pub port: u16,
    quiet: Duration,
    session: Option<Session>,
    buf: Vec<u8>,
    owner: u64,
    /// Datagrams dropped because no application maps this port.
    unmapped: u64,
}

impl TsPort {
    pub(crate) fn new(socket: UdpSocket, port: u16, quiet: Duration, owner: u64) -> Self {
        TsPort {
            socket,
            port,
            quiet,
            session: None,
            buf: vec![0u8; MAX_DATAGRAM],
            owner,
            unmapped: 0,
        }
    }

    pub(crate) fn stream(&self) -> Option<StreamId> {
        self.session.as_ref().map(|s| s.stream)
    }

    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.session.as_ref().map(|s| s.last_datagram + self.quiet)
    }

    pub(crate) fn on_ready(
        &mut self,
        registry: &mut Registry,
        now: Instant,
        out: &mut IngestOutput,
    ) {
        loop {
            let n = match self.socket.recv_from(&mut self.buf) {
                Ok((n, _)) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    crate::debug!("mpegts port {}: recv: {e}", self.port);
                    return;
                }
            };
            if self.session.is_none() && !self.start(registry, now, out) {
                continue;
            }
            let Some(session) = self.session.as_mut() else {
                continue;
            };
            session.last_datagram = now;
            session.demuxer.push(&self.buf[..n]);
            let got = drain_demuxer(&mut session.demuxer, session.stream, registry);
            out.stream = got.stream;
            out.tracks_changed |= got.tracks_changed;
            out.frames.extend(got.frames);
        }
    }

    fn start(&mut self, registry: &mut Registry, now: Instant, out: &mut IngestOutput) -> bool {
        let Some((vhost, app, name)) = registry.mpegts_stream(self.port) else {
            if self.unmapped == 0 {
                crate::warn!(
                    "mpegts port {}: datagrams arrive but no application's StreamMap has this port; dropping them",
                    self.port
                );
            }
            self.unmapped += 1;
            return false;
        };
        match registry.streams.start(
            &vhost,
            &app,
            &name,
            SourceType::MpegTs,
            self.owner,
            crate::clock::unix_millis_now(),
        ) {
            Ok(id) => {
                crate::info!(
                    "stream [{vhost}/{app}/{name}] started by MPEG-TS on UDP port {}",
                    self.port
                );
                self.session = Some(Session {
                    demuxer: Demuxer::new(),
                    stream: id,
                    last_datagram: now,
                });
                out.started = Some(id);
                true
            }
            Err(_) => {
                if self.unmapped == 0 {
                    crate::warn!(
                        "mpegts port {}: stream [{vhost}/{app}/{name}] is already published by another source; dropping datagrams",
                        self.port
                    );
                }
                self.unmapped += 1;
                false
            }
        }
    }

    /// The quiet period passed (or the app restarted): the stream ends; the
    /// next datagram starts it again.
    pub(crate) fn end(&mut self, registry: &mut Registry, out: &mut IngestOutput) {
        if let Some(mut session) = self.session.take() {
            // The last PES of each track is complete only now.
            session.demuxer.flush();
            let got = drain_demuxer(&mut session.demuxer, session.stream, registry);
            out.stream = got.stream;
            out.tracks_changed |= got.tracks_changed;
            out.frames.extend(got.frames);
            if let Some(s) = registry.streams.end(session.stream) {
                crate::info!(
                    "stream [{}/{}/{}] ended (MPEG-TS port {} quiet; {} frames in)",
                    s.vhost,
                    s.app,
                    s.name,
                    self.port,
                    s.frames_in
                );
            }
            out.ended = Some(session.stream);
        }
        self.unmapped = 0;
    }
}
impl Endpoint for TsPort {
    fn ready(&mut self, cx: &mut Cx<'_>, _peer_closed: bool) {
        let mut out = IngestOutput::default();
        self.on_ready(&mut cx.api.registry, cx.now, &mut out);
        cx.out.ingest.push(out);
    }

    /// Quiet for too long: the stream ends.
    fn timeout(&mut self, cx: &mut Cx<'_>) {
        self.abort(cx);
    }

    fn deadline(&self) -> Option<Instant> {
        TsPort::deadline(self)
    }

    fn is_closed(&self) -> bool {
        false
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        let _ = poll.deregister(&mut self.socket);
    }

    fn abort(&mut self, cx: &mut Cx<'_>) {
        let mut out = IngestOutput::default();
        self.end(&mut cx.api.registry, &mut out);
        cx.out.ingest.push(out);
    }

    fn end_stream(&mut self, stream: StreamId, cx: &mut Cx<'_>) {
        if self.stream() == Some(stream) {
            self.abort(cx);
        }
    }
}
