//! The I/O of one pull session (one attempt at one URL; the pull's course
//! is [`PullTable`](crate::pull::PullTable) in the registry): name
//! resolution, connecting to each address in turn, and the protocol core
//! on the socket: the RTSP client or an RTMP client in play mode on TCP
//! (RTMPS through rustls), or an SRT caller in request mode on UDP with
//! the MPEG-TS demuxer behind it. What the core delivers becomes a live
//! stream (started on its first tracks, when the pull is `live`);
//! whatever ends the session ends the stream and is reported to the
//! table, which picks the next URL or a back-off.

use super::endpoint::{Cx, Endpoint};
use super::transport::{ReadEnd, Transport};
use crate::media::{Frame, Track};
use crate::pull::table::{NewPull, SessionId};
use crate::pull::{PullKey, Source};
use crate::rtmp::client::{ClientEvent as RtmpEvent, ClientSession};
use crate::rtsp::{ClientEvent, RtspClient};
use crate::srt::{Caller, CallerConfig, CallerEvent};
use crate::state::streams::{IngestOutput, SourceType, StreamId};
use crate::ts::{DemuxEvent, Demuxer};
use mio::net::{TcpStream, UdpSocket};
use mio::Interest;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Giving up on connecting to one address.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes fed to the core per read turn before its events are handled.
const READ_TURN: usize = 256 * 1024;
/// Output held for a server that does not read (requests, RTCP, acks).
const MAX_OUTPUT: usize = 64 * 1024;

/// The protocol on a TCP connection (none until it is connected).
enum TcpCore {
    None,
    Rtsp(Box<RtspClient>),
    Rtmp(Box<ClientSession>),
}

/// The socket and the core on it.
enum Link {
    /// Resolving the host.
    None,
    Tcp {
        transport: Transport,
        connected: bool,
        core: TcpCore,
        /// RTSP output not written yet (RTMP keeps its own).
        out: Vec<u8>,
        /// RTSP with `?transport=udp`: each track's (RTP, RTCP) sockets.
        udp: Vec<(UdpSocket, UdpSocket)>,
    },
    Srt {
        socket: UdpSocket,
        caller: Box<Caller>,
        demuxer: Box<Demuxer>,
    },
}

pub(crate) struct PullIo {
    key: PullKey,
    session: SessionId,
    source: Source,
    no_input: Duration,
    addrs: Vec<SocketAddr>,
    link: Link,
    connect_deadline: Option<Instant>,
    /// RTMP: no media until then fails the session (RTSP and SRT watch
    /// their own).
    media_deadline: Option<Instant>,
    /// The peer closed the connection.
    eof: bool,
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
            link: Link::None,
            connect_deadline: Some(cx.now + CONNECT_TIMEOUT),
            media_deadline: None,
            eof: false,
            stream: None,
            closed: false,
        };
        let (host, port) = io.source.host_port();
        let (host, port) = (host.to_string(), port);
        if let Some(addrs) = cx.resolver.resolve(cx.token, &host, port) {
            io.resolved(Ok(addrs), cx);
        }
        io
    }

    fn connect_next(&mut self, cx: &mut Cx<'_>) {
        let mut last = String::from("no address to connect to");
        while !self.addrs.is_empty() {
            let addr = self.addrs.remove(0);
            match self.open(addr, cx) {
                Ok(link) => {
                    self.link = link;
                    self.connect_deadline = match self.link {
                        Link::Tcp { .. } => Some(cx.now + CONNECT_TIMEOUT),
                        _ => None, // the SRT handshake has its own
                    };
                    return;
                }
                Err(e) => last = format!("cannot connect to {addr}: {e}"),
            }
        }
        self.fail(last, cx);
    }

    fn open(&self, addr: SocketAddr, cx: &mut Cx<'_>) -> io::Result<Link> {
        match &self.source {
            Source::Rtsp(_) | Source::Rtmp { .. } => {
                let mut s = TcpStream::connect(addr)?;
                cx.poll
                    .register(&mut s, cx.token, Interest::READABLE | Interest::WRITABLE)?;
                Ok(Link::Tcp {
                    transport: Transport::client(s, None),
                    connected: false,
                    core: TcpCore::None,
                    out: Vec::new(),
                    udp: Vec::new(),
                })
            }
            Source::Srt {
                stream_id,
                latency_ms,
                crypto,
                ..
            } => {
                let local: SocketAddr = if addr.is_ipv4() {
                    ([0, 0, 0, 0], 0).into()
                } else {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                };
                let mut socket = UdpSocket::bind(local)?;
                socket.connect(addr)?;
                cx.poll
                    .register(&mut socket, cx.token, Interest::READABLE)?;
                let caller = Caller::new(
                    CallerConfig {
                        stream_id: Some(stream_id.clone()),
                        latency: Duration::from_millis(*latency_ms),
                        peer_idle_timeout: self.no_input,
                        receive: true,
                        crypto: crypto.clone(),
                        ..CallerConfig::new(addr)
                    },
                    cx.now,
                );
                Ok(Link::Srt {
                    socket,
                    caller: Box::new(caller),
                    demuxer: Box::new(Demuxer::new()),
                })
            }
        }
    }

    /// A TCP connect in progress: done (the core starts), failed (next
    /// address), or not yet.
    fn check_connected(&mut self, cx: &mut Cx<'_>) {
        let Link::Tcp {
            transport,
            connected: false,
            ..
        } = &mut self.link
        else {
            return;
        };
        let stream = transport.stream_mut();
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
        let peer = stream.peer_addr().ok();
        self.connect_deadline = None;
        let core = match &self.source {
            Source::Rtsp(url) => {
                let mut c = RtspClient::new(url.clone(), cx.now);
                c.set_media_timeout(self.no_input);
                if url.udp {
                    let pairs = match peer.map(|p| bind_rtp_pairs(p, 2, cx)) {
                        Some(Ok(pairs)) => pairs,
                        Some(Err(e)) => {
                            return self.fail(format!("cannot bind RTP ports: {e}"), cx)
                        }
                        None => return self.fail("the connection has no peer".into(), cx),
                    };
                    let ports: Vec<(u16, u16)> = pairs
                        .iter()
                        .filter_map(|(a, b)| {
                            Some((a.local_addr().ok()?.port(), b.local_addr().ok()?.port()))
                        })
                        .collect();
                    crate::debug!("pull [{}]: RTP over UDP on ports {ports:?}", self.key);
                    c.set_udp_ports(ports);
                    if let Link::Tcp { udp, .. } = &mut self.link {
                        *udp = pairs;
                    }
                }
                TcpCore::Rtsp(Box::new(c))
            }
            Source::Rtmp {
                config, tls, host, ..
            } => {
                if *tls {
                    let started = rustls::pki_types::ServerName::try_from(host.clone())
                        .map_err(|e| format!("invalid TLS server name [{host}]: {e}"))
                        .and_then(|n| {
                            rustls::ClientConnection::new(cx.tls_client.clone(), n)
                                .map_err(|e| format!("TLS: {e}"))
                        });
                    let tls = match started {
                        Ok(c) => c,
                        Err(why) => return self.fail(why, cx),
                    };
                    if let Link::Tcp { transport, .. } =
                        std::mem::replace(&mut self.link, Link::None)
                    {
                        self.link = Link::Tcp {
                            transport: transport.with_client_tls(tls),
                            connected: false,
                            core: TcpCore::None,
                            out: Vec::new(),
                            udp: Vec::new(),
                        };
                    }
                }
                self.media_deadline = Some(cx.now + self.no_input.max(CONNECT_TIMEOUT));
                TcpCore::Rtmp(Box::new(ClientSession::new(config.clone())))
            }
            Source::Srt { .. } => TcpCore::None,
        };
        if let Link::Tcp {
            connected,
            core: slot,
            ..
        } = &mut self.link
        {
            *connected = true;
            *slot = core;
        }
    }

    fn drop_socket(&mut self, cx: &mut Cx<'_>) {
        match std::mem::replace(&mut self.link, Link::None) {
            Link::Tcp {
                mut transport,
                mut udp,
                ..
            } => {
                let _ = cx.poll.deregister(transport.stream_mut());
                for (a, b) in udp.iter_mut() {
                    let _ = cx.poll.deregister(a);
                    let _ = cx.poll.deregister(b);
                }
            }
            Link::Srt { mut socket, .. } => {
                let _ = cx.poll.deregister(&mut socket);
            }
            Link::None => {}
        }
    }

    /// Reads what the peer sent into the core, a turn at a time, and
    /// handles what it produced after each turn.
    fn read(&mut self, cx: &mut Cx<'_>, drain: bool) {
        loop {
            let now = cx.now;
            let more = match &mut self.link {
                Link::None => return,
                Link::Tcp {
                    transport,
                    core,
                    udp,
                    ..
                } => {
                    let mut udp_more = false;
                    if let (TcpCore::Rtsp(client), false) = (&mut *core, udp.is_empty()) {
                        let server = transport.stream_mut().peer_addr().ok().map(|a| a.ip());
                        udp_more = read_rtp(udp, server, client, now);
                    }
                    let mut fed = 0usize;
                    let result = match core {
                        TcpCore::None => return,
                        TcpCore::Rtsp(client) => transport.read(drain, |data| {
                            client.handle_input(data, now);
                            fed += data.len();
                            fed < READ_TURN && !client.is_closed()
                        }),
                        // An error shows as the session's Error event.
                        TcpCore::Rtmp(session) => transport.read(drain, |data| {
                            let ok = session.handle_input(data).is_ok();
                            fed += data.len();
                            fed < READ_TURN && ok
                        }),
                    };
                    match result {
                        Ok((_, ReadEnd::Paused)) => true,
                        Ok((_, ReadEnd::WouldBlock)) => udp_more,
                        Ok((_, ReadEnd::Closed)) | Err(_) => {
                            self.eof = true;
                            if let TcpCore::Rtsp(client) = core {
                                client.handle_eof();
                            }
                            false
                        }
                    }
                }
                Link::Srt { socket, caller, .. } => {
                    let mut buf = [0u8; 1500];
                    let mut n = 0;
                    let peer = socket.peer_addr().ok();
                    loop {
                        match socket.recv(&mut buf) {
                            Ok(len) => {
                                if let Some(peer) = peer {
                                    caller.handle_datagram(peer, &buf[..len], now);
                                }
                                n += 1;
                                if n >= 256 {
                                    break true;
                                }
                            }
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            // WouldBlock, or ICMP refused (the handshake
                            // times out and says so).
                            Err(_) => break false,
                        }
                    }
                }
            };
            self.events(cx);
            if !more || self.closed {
                return;
            }
        }
    }

    /// What the core produced: tracks, frames, its end.
    fn events(&mut self, cx: &mut Cx<'_>) {
        let mut failed = None;
        let mut tracks = Vec::new();
        let mut frames = Vec::new();
        match &mut self.link {
            Link::None => return,
            Link::Tcp { core, .. } => match core {
                TcpCore::None => return,
                TcpCore::Rtsp(client) => {
                    while let Some(ev) = client.poll_event() {
                        match ev {
                            ClientEvent::Tracks(t) => tracks.push((frames.len(), t)),
                            ClientEvent::Frame(f) => frames.push(f),
                            ClientEvent::Failed(why) => {
                                failed = Some(why);
                                break;
                            }
                        }
                    }
                }
                TcpCore::Rtmp(session) => {
                    while let Some(ev) = session.poll_event() {
                        match ev {
                            RtmpEvent::Tracks(t) => tracks.push((frames.len(), t)),
                            RtmpEvent::Frame(f) => frames.push(f),
                            RtmpEvent::Error(why) => {
                                failed = Some(format!("RTMP: {why}"));
                                break;
                            }
                            RtmpEvent::Connected | RtmpEvent::Playing | RtmpEvent::Publishing => {}
                        }
                    }
                    if failed.is_none() && self.eof {
                        failed = Some("the RTMP server closed the connection".into());
                    }
                    if !frames.is_empty() {
                        self.media_deadline = Some(cx.now + self.no_input);
                    }
                }
            },
            Link::Srt {
                caller, demuxer, ..
            } => {
                while let Some(ev) = caller.poll_event() {
                    if let CallerEvent::Closed(reason) = ev {
                        failed = Some(format!("SRT: {reason}"));
                    }
                }
                while let Some(payload) = caller.poll_data() {
                    demuxer.push(&payload);
                }
                while let Some(ev) = demuxer.poll_event() {
                    match ev {
                        DemuxEvent::TracksChanged(t) => tracks.push((frames.len(), t)),
                        DemuxEvent::Frame(f) => frames.push(f),
                    }
                }
            }
        }
        let mut out = IngestOutput::default();
        // Tracks apply from the frame they came before.
        let mut tracks = tracks.into_iter().peekable();
        for (i, frame) in frames.into_iter().enumerate() {
            while let Some((_, t)) = tracks.next_if(|(at, _)| *at <= i) {
                if let Err(why) = self.on_tracks(t, cx, &mut out) {
                    failed = Some(why);
                }
            }
            self.on_frame(frame, cx, &mut out);
        }
        for (_, t) in tracks {
            if let Err(why) = self.on_tracks(t, cx, &mut out) {
                failed = Some(why);
            }
        }
        cx.out.ingest.push(out);
        if let Some(why) = failed {
            self.fail(why, cx);
        } else {
            self.write(cx);
        }
    }

    /// New tracks: the stream starts on the first (the pull is live).
    fn on_tracks(
        &mut self,
        tracks: Vec<Track>,
        cx: &mut Cx<'_>,
        out: &mut IngestOutput,
    ) -> Result<(), String> {
        let registry = &mut cx.api.registry;
        let id = match self.stream {
            Some(id) => id,
            None => {
                let k = &self.key;
                let source = match self.source {
                    Source::Rtsp(_) => SourceType::RtspPull,
                    Source::Srt { .. } => SourceType::SrtPull,
                    Source::Rtmp { .. } => SourceType::RtmpPull,
                };
                let id = registry
                    .streams
                    .start(
                        &k.vhost,
                        &k.app,
                        &k.name,
                        source,
                        cx.token.0 as u64,
                        crate::clock::unix_millis_now(),
                    )
                    .map_err(|_| "the stream is published by another source".to_string())?;
                crate::info!("stream [{k}] started by a pull");
                self.stream = Some(id);
                out.started = Some(id);
                cx.api.pulls.table.on_live(self.session);
                id
            }
        };
        registry.streams.set_tracks(id, tracks);
        out.stream = Some(id);
        out.tracks_changed = true;
        Ok(())
    }

    fn on_frame(&mut self, frame: Frame, cx: &mut Cx<'_>, out: &mut IngestOutput) {
        if let Some(id) = self.stream {
            cx.api.registry.streams.on_frame(id, &frame);
            out.stream = Some(id);
            out.frames.push(frame);
        }
    }

    fn write(&mut self, cx: &mut Cx<'_>) {
        let result = match &mut self.link {
            Link::None => return,
            Link::Tcp {
                connected: false, ..
            } => return,
            Link::Tcp {
                transport,
                core,
                out,
                ..
            } => match core {
                TcpCore::None => return,
                TcpCore::Rtsp(client) => {
                    client.poll_transmit(out);
                    transport.write_from(out)
                }
                TcpCore::Rtmp(session) => {
                    let mut result = Ok(());
                    while !session.pending_output().is_empty() {
                        match transport.write(session.pending_output()) {
                            Ok(0) => break,
                            Ok(n) => session.consume_output(n),
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            Err(e) => {
                                result = Err(e);
                                break;
                            }
                        }
                    }
                    result.map(|()| session.pending_output().len())
                }
            },
            Link::Srt { socket, caller, .. } => {
                let mut buf = Vec::with_capacity(1500);
                while caller.poll_transmit(cx.now, &mut buf).is_some() {
                    // A full socket buffer drops the datagram; SRT resends.
                    let _ = socket.send(&buf);
                    buf.clear();
                }
                return;
            }
        };
        match result {
            Err(e) => self.fail(format!("write: {e}"), cx),
            Ok(left) if left > MAX_OUTPUT => {
                self.fail("the server does not read what is sent to it".into(), cx)
            }
            Ok(_) => {}
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
        cx.api.pulls.table.on_failed(self.session, &why, cx.now);
    }

    /// Closes politely (RTSP TEARDOWN, RTMP deleteStream, SRT shutdown)
    /// and ends the session.
    fn close(&mut self, why: &str, cx: &mut Cx<'_>) {
        match &mut self.link {
            Link::Tcp { core, .. } => match core {
                TcpCore::Rtsp(c) => c.close(),
                TcpCore::Rtmp(s) => s.close(),
                TcpCore::None => {}
            },
            Link::Srt { caller, .. } => caller.shutdown(cx.now),
            Link::None => {}
        }
        self.write(cx);
        self.fail(why.into(), cx);
    }
}

/// Binds `n` pairs of UDP ports (RTP even, RTCP the next one) for RTP
/// from `server`, registered with the session's token.
fn bind_rtp_pairs(
    server: SocketAddr,
    n: usize,
    cx: &mut Cx<'_>,
) -> io::Result<Vec<(UdpSocket, UdpSocket)>> {
    let unspecified: std::net::IpAddr = if server.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    let mut pairs = Vec::with_capacity(n);
    let mut tries = 0;
    while pairs.len() < n {
        tries += 1;
        if tries > 64 {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                "no free port pair",
            ));
        }
        let rtp = UdpSocket::bind(SocketAddr::new(unspecified, 0))?;
        let port = rtp.local_addr()?.port();
        if port % 2 == 1 || port == u16::MAX {
            continue;
        }
        let Ok(rtcp) = UdpSocket::bind(SocketAddr::new(unspecified, port + 1)) else {
            continue;
        };
        pairs.push((rtp, rtcp));
    }
    for (a, b) in pairs.iter_mut() {
        cx.poll.register(a, cx.token, Interest::READABLE)?;
        cx.poll.register(b, cx.token, Interest::READABLE)?;
    }
    Ok(pairs)
}

/// RTP datagrams from the server's address into the client (RTCP is
/// read and dropped); a bounded number per socket per turn. True when a
/// socket may hold more (the turn stopped at the bound).
fn read_rtp(
    udp: &mut [(UdpSocket, UdpSocket)],
    server: Option<std::net::IpAddr>,
    client: &mut RtspClient,
    now: Instant,
) -> bool {
    let mut buf = [0u8; 2048];
    let mut more = false;
    for (i, (rtp, rtcp)) in udp.iter_mut().enumerate() {
        let mut drained = false;
        for _ in 0..512 {
            match rtp.recv_from(&mut buf) {
                Ok((n, from)) if Some(from.ip()) == server => client.handle_rtp(i, &buf[..n], now),
                Ok(_) => {} // not from the server: dropped
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    drained = true;
                    break;
                }
            }
        }
        more |= !drained;
        // RTCP is read and dropped; a queue left full raises no new edge.
        let mut rtcp_drained = false;
        for _ in 0..64 {
            if rtcp.recv_from(&mut buf).is_err() {
                rtcp_drained = true;
                break;
            }
        }
        more |= !rtcp_drained;
    }
    more
}

impl Endpoint for PullIo {
    fn ready(&mut self, cx: &mut Cx<'_>, peer_closed: bool) {
        if self.closed {
            return;
        }
        if let Link::Tcp {
            connected: false, ..
        } = self.link
        {
            self.check_connected(cx);
            if self.closed
                || !matches!(
                    self.link,
                    Link::Tcp {
                        connected: true,
                        ..
                    }
                )
            {
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
        if self.media_deadline.is_some_and(|d| cx.now >= d) {
            let ms = self.no_input.as_millis();
            return self.close(&format!("no media for {ms} ms"), cx);
        }
        match &mut self.link {
            Link::Tcp {
                core: TcpCore::Rtsp(c),
                ..
            } => c.handle_timeout(cx.now),
            Link::Srt { caller, .. } => caller.handle_timeout(cx.now),
            _ => return,
        }
        self.events(cx);
    }

    fn deadline(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        let core = match &self.link {
            Link::Tcp {
                core: TcpCore::Rtsp(c),
                ..
            } => c.poll_timeout(),
            Link::Srt { caller, .. } => caller.poll_timeout(),
            _ => None,
        };
        [self.connect_deadline, self.media_deadline, core]
            .into_iter()
            .flatten()
            .min()
    }

    fn is_closed(&self) -> bool {
        self.closed
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        match &mut self.link {
            Link::Tcp { transport, udp, .. } => {
                let _ = poll.deregister(transport.stream_mut());
                for (a, b) in udp.iter_mut() {
                    let _ = poll.deregister(a);
                    let _ = poll.deregister(b);
                }
            }
            Link::Srt { socket, .. } => {
                let _ = poll.deregister(socket);
            }
            Link::None => {}
        }
    }

    fn abort(&mut self, cx: &mut Cx<'_>) {
        self.close("the session was ended", cx);
    }

    fn resolved(&mut self, result: Result<Vec<SocketAddr>, String>, cx: &mut Cx<'_>) {
        if !matches!(self.link, Link::None) || self.closed {
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
