//! The I/O of one pull session (one attempt at one URL; the pull's course
//! is [`PullTable`](crate::pull::PullTable) in the registry): name
//! resolution, connecting to each address in turn, and the RTSP client
//! core on the connection. What the client delivers becomes a live stream
//! (started on its first tracks, when the pull is `live`); whatever ends
//! the session ends the stream and is reported to the table, which picks
//! the next URL or a back-off.

use super::endpoint::{Cx, Endpoint};
use super::transport::{ReadEnd, Transport};
use crate::pull::table::{NewPull, SessionId};
use crate::pull::{PullKey, Source};
use crate::rtsp::{ClientEvent, RtspClient};
use crate::state::streams::{IngestOutput, SourceType, StreamId};
use mio::net::TcpStream;
use mio::Interest;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Giving up on connecting to one address.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes fed to the client per read turn before its events are handled.
const READ_TURN: usize = 256 * 1024;
/// Output held for a server that does not read (requests and RTCP only).
const MAX_OUTPUT: usize = 64 * 1024;

pub(crate) struct PullIo {
    key: PullKey,
    session: SessionId,
    source: Source,
    no_input: Duration,
    addrs: Vec<SocketAddr>,
    transport: Option<Transport>,
    connected: bool,
    connect_deadline: Option<Instant>,
    client: Option<RtspClient>,
    out: Vec<u8>,
    stream: Option<StreamId>,
    closed: bool,
}

impl PullIo {
    /// Starts a session: resolves the source's host (at once for an
    /// address or a cached name) and connects.
    pub(crate) fn start(new: NewPull, cx: &mut Cx<'_>) -> Self {
        let mut io = PullIo {
            key: new.key,
            session: new.session,
            source: new.source,
            no_input: new.no_input,
            addrs: Vec::new(),
            transport: None,
            connected: false,
            connect_deadline: None,
            client: None,
            out: Vec::new(),
            stream: None,
            closed: false,
        };
        let (host, port) = io.source.host_port();
        let (host, port) = (host.to_string(), port);
        if let Some(addrs) = cx.resolver.resolve(cx.token, &host, port) {
            io.resolved(Ok(addrs), cx);
        } else {
            io.connect_deadline = Some(cx.now + CONNECT_TIMEOUT);
        }
        io
    }

    fn connect_next(&mut self, cx: &mut Cx<'_>) {
        let mut last = String::from("no address to connect to");
        while !self.addrs.is_empty() {
            let addr = self.addrs.remove(0);
            let opened = TcpStream::connect(addr).and_then(|mut s| {
                cx.poll
                    .register(&mut s, cx.token, Interest::READABLE | Interest::WRITABLE)?;
                Ok(s)
            });
            match opened {
                Ok(s) => {
                    self.transport = Some(Transport::client(s, None));
                    self.connected = false;
                    self.connect_deadline = Some(cx.now + CONNECT_TIMEOUT);
                    return;
                }
                Err(e) => last = format!("cannot connect to {addr}: {e}"),
            }
        }
        self.fail(last, cx);
    }

    /// A connect in progress: done, failed (next address), or not yet.
    fn check_connected(&mut self, cx: &mut Cx<'_>) {
        let Some(t) = self.transport.as_mut() else {
            return;
        };
        let stream = t.stream_mut();
        if let Ok(Some(e)) | Err(e) = stream.take_error() {
            self.drop_socket(cx);
            let why = format!("cannot connect: {e}");
            if self.addrs.is_empty() {
                self.fail(why, cx);
            } else {
                self.connect_next(cx);
            }
            return;
        }
        match stream.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
            Err(e) => return self.fail(format!("cannot connect: {e}"), cx),
        }
        let _ = stream.set_nodelay(true);
        self.connected = true;
        self.connect_deadline = None;
        let Source::Rtsp(url) = &self.source;
        let mut client = RtspClient::new(url.clone(), cx.now);
        client.set_media_timeout(self.no_input);
        self.client = Some(client);
    }

    fn drop_socket(&mut self, cx: &mut Cx<'_>) {
        if let Some(mut t) = self.transport.take() {
            let _ = cx.poll.deregister(t.stream_mut());
        }
    }

    /// Reads what the server sent and hands it to the client, a turn at a
    /// time, handling its events after each.
    fn read(&mut self, cx: &mut Cx<'_>, drain: bool) {
        loop {
            let (Some(t), Some(client)) = (self.transport.as_mut(), self.client.as_mut()) else {
                return;
            };
            let now = cx.now;
            let mut fed = 0usize;
            let result = t.read(drain, |data| {
                client.handle_input(data, now);
                fed += data.len();
                fed < READ_TURN && !client.is_closed()
            });
            let end = match result {
                Ok((_, end)) => end,
                Err(e) => {
                    client.handle_eof();
                    self.events(cx);
                    if !self.closed {
                        self.fail(format!("read: {e}"), cx);
                    }
                    return;
                }
            };
            if end == ReadEnd::Closed {
                client.handle_eof();
            }
            self.events(cx);
            if end != ReadEnd::Paused || self.closed {
                return;
            }
        }
    }

    /// What the client produced: tracks, frames, its end.
    fn events(&mut self, cx: &mut Cx<'_>) {
        let Some(client) = self.client.as_mut() else {
            return;
        };
        let mut out = IngestOutput::default();
        let mut failed = None;
        while let Some(ev) = client.poll_event() {
            match ev {
                ClientEvent::Tracks(tracks) => {
                    let id = match self.stream {
                        Some(id) => id,
                        None => {
                            let registry = &mut cx.api.registry;
                            let k = &self.key;
                            match registry.streams.start(
                                &k.vhost,
                                &k.app,
                                &k.name,
                                SourceType::RtspPull,
                                cx.token.0 as u64,
                                crate::clock::unix_millis_now(),
                            ) {
                                Ok(id) => {
                                    crate::info!("stream [{k}] started by a pull");
                                    self.stream = Some(id);
                                    out.started = Some(id);
                                    registry.pulls.on_live(self.session);
                                    id
                                }
                                Err(_) => {
                                    failed = Some(
                                        "the stream is published by another source".to_string(),
                                    );
                                    break;
                                }
                            }
                        }
                    };
                    cx.api.registry.streams.set_tracks(id, tracks);
                    out.stream = Some(id);
                    out.tracks_changed = true;
                }
                ClientEvent::Frame(frame) => {
                    if let Some(id) = self.stream {
                        cx.api.registry.streams.on_frame(id, &frame);
                        out.stream = Some(id);
                        out.frames.push(frame);
                    }
                }
                ClientEvent::Failed(why) => {
                    failed = Some(why);
                    break;
                }
            }
        }
        cx.out.ingest.push(out);
        if let Some(why) = failed {
            self.fail(why, cx);
        } else {
            self.write(cx);
        }
    }

    fn write(&mut self, cx: &mut Cx<'_>) {
        if let Some(client) = self.client.as_mut() {
            client.poll_transmit(&mut self.out);
        }
        let Some(t) = self.transport.as_mut().filter(|_| self.connected) else {
            return;
        };
        while !self.out.is_empty() {
            match t.write(&self.out) {
                Ok(0) => break,
                Ok(n) => {
                    self.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return self.fail(format!("write: {e}"), cx),
            }
        }
        if self.out.len() > MAX_OUTPUT {
            self.fail("the server does not read what is sent to it".into(), cx);
        }
    }

    /// Ends the session: its stream ends, the table hears why.
    fn fail(&mut self, why: String, cx: &mut Cx<'_>) {
        if self.closed {
            return;
        }
        self.closed = true;
        if let Some(id) = self.stream.take() {
            if let Some(s) = cx.api.registry.streams.end(id) {
                crate::info!(
                    "stream [{}/{}/{}] ended ({} frames in)",
                    s.vhost,
                    s.app,
                    s.name,
                    s.frames_in
                );
            }
            cx.out.ingest.push(IngestOutput {
                ended: Some(id),
                ..Default::default()
            });
        }
        cx.api.registry.pulls.on_failed(self.session, &why, cx.now);
    }

    /// Closes politely (TEARDOWN) and ends the session.
    fn close(&mut self, why: &str, cx: &mut Cx<'_>) {
        if let Some(c) = self.client.as_mut() {
            c.close();
        }
        self.write(cx);
        self.fail(why.into(), cx);
    }
}

impl Endpoint for PullIo {
    fn ready(&mut self, cx: &mut Cx<'_>, peer_closed: bool) {
        if self.closed {
            return;
        }
        if !self.connected {
            self.check_connected(cx);
            if !self.connected || self.closed {
                return;
            }
        }
        self.read(cx, peer_closed);
        if !self.closed {
            self.write(cx);
        }
    }

    fn timeout(&mut self, cx: &mut Cx<'_>) {
        if self.connect_deadline.is_some_and(|d| cx.now >= d) {
            self.drop_socket(cx);
            if self.addrs.is_empty() {
                self.fail(
                    format!("no connection within {} s", CONNECT_TIMEOUT.as_secs()),
                    cx,
                );
            } else {
                self.connect_next(cx);
            }
            return;
        }
        if let Some(c) = self.client.as_mut() {
            c.handle_timeout(cx.now);
            self.events(cx);
        }
    }

    fn deadline(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        let client = self.client.as_ref().and_then(RtspClient::poll_timeout);
        match (self.connect_deadline, client) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn is_closed(&self) -> bool {
        self.closed
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        if let Some(t) = self.transport.as_mut() {
            let _ = poll.deregister(t.stream_mut());
        }
    }

    fn abort(&mut self, cx: &mut Cx<'_>) {
        self.close("the session was ended", cx);
    }

    fn resolved(&mut self, result: Result<Vec<SocketAddr>, String>, cx: &mut Cx<'_>) {
        if self.transport.is_some() || self.closed {
            return;
        }
        match result {
            Ok(addrs) => {
                self.addrs = addrs;
                self.connect_next(cx);
            }
            Err(e) => self.fail(e, cx),
        }
    }

    fn end_stream(&mut self, stream: StreamId, cx: &mut Cx<'_>) {
        if self.stream == Some(stream) {
            self.close("the stream was ended", cx);
        }
    }
}
