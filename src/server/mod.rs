//! The poll loop: one `mio::Poll` on one thread owns every socket. Endpoints
//! (listeners, connections) live in a generation-checked [`TokenTable`];
//! deadlines live in [`Timers`], and the poll sleeps until the nearest one.
//! Sockets are edge-triggered: each endpoint reads and writes until
//! `WouldBlock`, and is registered once for both directions.
//!
//! SIGINT and SIGTERM end the loop: listeners and connections are dropped
//! (closed) and `run` returns. The state file needs no flush at that point:
//! every change was written before it was answered.

pub mod api_conn;
pub mod rtmp_ingest;
pub mod timers;
pub mod tokens;
pub mod transport;
pub mod ts_ingest;

use crate::api::{Api, Effect};
use crate::config::HttpLimits;
use api_conn::{ApiConn, Status};
use mio::net::{TcpListener, TcpStream, UdpSocket};
use mio::{Events, Interest, Poll, Token};
use rtmp_ingest::{IngestOutput, RtmpIngest};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use timers::Timers;
use tokens::TokenTable;
use ts_ingest::TsPort;

const SIGNAL_TOKEN: Token = Token(usize::MAX);
/// How long a listener rests when the process is out of file descriptors.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// What a TCP listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Api,
    Rtmp,
}

/// A TCP listener to open: what it serves, where, and for TLS ports the
/// rustls config.
pub struct ListenerSpec {
    pub service: Service,
    pub addr: SocketAddr,
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// Everything the server listens on.
#[derive(Default)]
pub struct Listen {
    pub tcp: Vec<ListenerSpec>,
    /// MPEG-TS over UDP: (address, port) per port.
    pub mpegts: Vec<SocketAddr>,
    /// How long an MPEG-TS port may be quiet before its stream ends.
    pub mpegts_quiet: Duration,
}

enum Endpoint {
    Listener(Listener),
    ApiConn(Box<ApiConn>),
    RtmpConn(Box<RtmpIngest>),
    TsPort(Box<TsPort>),
}

struct Listener {
    service: Service,
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    /// Accepting is paused until then (out of descriptors).
    paused_until: Option<Instant>,
}

pub struct Server {
    poll: Poll,
    endpoints: TokenTable<Endpoint>,
    timers: Timers,
    api: Api,
    limits: HttpLimits,
    api_conns: usize,
    shutdown: bool,
}

impl Server {
    /// Binds the listeners. Nothing is served until [`Server::run`].
    pub fn bind(api: Api, listen: Listen, limits: HttpLimits) -> io::Result<Self> {
        let poll = Poll::new()?;
        let mut endpoints = TokenTable::default();
        for spec in listen.tcp {
            let mut listener = bind_listener(spec.addr)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", spec.addr)))?;
            let token = endpoints.vacant_token();
            poll.registry()
                .register(&mut listener, token, Interest::READABLE)?;
            let scheme = match (spec.service, spec.tls.is_some()) {
                (Service::Api, false) => "API server listening on http",
                (Service::Api, true) => "API server listening on https",
                (Service::Rtmp, false) => "RTMP ingest listening on rtmp",
                (Service::Rtmp, true) => "RTMPS ingest listening on rtmps",
            };
            crate::info!("{scheme}://{}", listener.local_addr()?);
            endpoints.insert(Endpoint::Listener(Listener {
                service: spec.service,
                listener,
                tls: spec.tls,
                paused_until: None,
            }));
        }
        for addr in listen.mpegts {
            let mut socket =
                bind_udp(addr).map_err(|e| io::Error::new(e.kind(), format!("{addr}/udp: {e}")))?;
            let token = endpoints.vacant_token();
            poll.registry()
                .register(&mut socket, token, Interest::READABLE)?;
            crate::info!("MPEG-TS ingest listening on udp://{addr}");
            endpoints.insert(Endpoint::TsPort(Box::new(TsPort::new(
                socket,
                addr.port(),
                listen.mpegts_quiet,
                token.0 as u64,
            ))));
        }
        Ok(Server {
            poll,
            endpoints,
            timers: Timers::default(),
            api,
            limits,
            api_conns: 0,
            shutdown: false,
        })
    }

    /// Serves until SIGINT or SIGTERM.
    pub fn run(mut self) -> io::Result<()> {
        let mut signals = signal_hook_mio::v1_0::Signals::new([
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
        ])?;
        self.poll
            .registry()
            .register(&mut signals, SIGNAL_TOKEN, Interest::READABLE)?;
        let mut events = Events::with_capacity(1024);
        while !self.shutdown {
            let timeout = self.timers.timeout(Instant::now());
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let now = Instant::now();
            for event in events.iter() {
                let token = event.token();
                if token == SIGNAL_TOKEN {
                    for sig in signals.pending() {
                        crate::info!("signal {sig} received; shutting down");
                        self.shutdown = true;
                    }
                    continue;
                }
                self.on_ready(token, now);
            }
            self.fire_timers(Instant::now());
        }
        // Dropping the endpoints closes every socket.
        crate::info!("stopped");
        Ok(())
    }

    fn on_ready(&mut self, token: Token, now: Instant) {
        let mut out = IngestOutput::default();
        match self.endpoints.get_mut(token) {
            Some(Endpoint::Listener(_)) => self.accept(token, now),
            Some(Endpoint::ApiConn(conn)) => {
                let status = conn.on_ready(&mut self.api, now);
                let deadline = conn.deadline();
                self.after_conn(token, status, deadline);
                self.apply_effects(now);
            }
            Some(Endpoint::RtmpConn(conn)) => {
                conn.on_ready(&mut self.api.registry, now, &mut out);
                if conn.is_closed() {
                    self.remove_endpoint(token);
                } else {
                    self.timers.schedule(conn.deadline(), token);
                }
            }
            Some(Endpoint::TsPort(port)) => {
                let had = port.deadline().is_some();
                port.on_ready(&mut self.api.registry, now, &mut out);
                if let (false, Some(d)) = (had, port.deadline()) {
                    self.timers.schedule(d, token);
                }
            }
            None => {}
        }
        self.dispatch(out);
    }

    /// Hands what ingest produced to the stream's outputs.
    fn dispatch(&mut self, out: IngestOutput) {
        // Push outputs subscribe here (next milestone); ingest already
        // keeps the registry's streams, tracks and GOPs current.
        let _ = out;
    }

    fn after_conn(&mut self, token: Token, status: Status, deadline: Instant) {
        match status {
            Status::Open => self.timers.schedule(deadline, token),
            Status::Closed => self.remove_endpoint(token),
        }
    }

    /// Drops an endpoint (closing its socket).
    fn remove_endpoint(&mut self, token: Token) {
        match self.endpoints.remove(token) {
            Some(Endpoint::ApiConn(mut conn)) => {
                let _ = self.poll.registry().deregister(conn.stream_mut());
                self.api_conns -= 1;
            }
            Some(Endpoint::RtmpConn(mut conn)) => {
                let _ = self.poll.registry().deregister(conn.stream_mut());
            }
            Some(Endpoint::TsPort(mut port)) => {
                let _ = self.poll.registry().deregister(port.socket_mut());
            }
            Some(Endpoint::Listener(mut l)) => {
                let _ = self.poll.registry().deregister(&mut l.listener);
            }
            None => {}
        }
    }

    /// Carries out what API handlers asked for.
    fn apply_effects(&mut self, _now: Instant) {
        for effect in std::mem::take(&mut self.api.effects) {
            match effect {
                Effect::RestartApp { vhost, app } => {
                    let ids = self.api.registry.streams.ids_of(&vhost, app.as_deref());
                    for id in ids {
                        let Some(owner) = self.api.registry.streams.get(id).map(|s| s.publisher)
                        else {
                            continue;
                        };
                        self.end_publisher(Token(owner as usize));
                    }
                }
            }
        }
    }

    /// Ends the session that publishes a stream (its app restarted).
    fn end_publisher(&mut self, token: Token) {
        let mut out = IngestOutput::default();
        match self.endpoints.get_mut(token) {
            Some(Endpoint::RtmpConn(conn)) => {
                conn.close(&mut self.api.registry, &mut out);
                self.remove_endpoint(token);
            }
            Some(Endpoint::TsPort(port)) => port.end(&mut self.api.registry, &mut out),
            _ => {}
        }
        self.dispatch(out);
    }

    fn fire_timers(&mut self, now: Instant) {
        while let Some(token) = self.timers.pop_due(now) {
            match self.endpoints.get_mut(token) {
                Some(Endpoint::ApiConn(conn)) => {
                    let deadline = conn.deadline();
                    if deadline > now {
                        // Moved later since this entry was set.
                        self.timers.schedule(deadline, token);
                        continue;
                    }
                    let status = conn.on_deadline(&mut self.api, now);
                    let deadline = conn.deadline();
                    self.after_conn(token, status, deadline);
                }
                Some(Endpoint::RtmpConn(conn)) => {
                    let deadline = conn.deadline();
                    if deadline > now {
                        self.timers.schedule(deadline, token);
                        continue;
                    }
                    let mut out = IngestOutput::default();
                    conn.on_deadline(&mut self.api.registry, &mut out);
                    self.remove_endpoint(token);
                    self.dispatch(out);
                }
                Some(Endpoint::TsPort(port)) => {
                    let Some(deadline) = port.deadline() else {
                        continue;
                    };
                    if deadline > now {
                        self.timers.schedule(deadline, token);
                        continue;
                    }
                    let mut out = IngestOutput::default();
                    port.end(&mut self.api.registry, &mut out);
                    self.dispatch(out);
                }
                Some(Endpoint::Listener(l)) => {
                    l.paused_until = None;
                    self.accept(token, now);
                }
                None => {}
            }
        }
    }

    fn accept(&mut self, token: Token, now: Instant) {
        loop {
            let Some(Endpoint::Listener(l)) = self.endpoints.get_mut(token) else {
                return;
            };
            if l.paused_until.is_some() {
                return;
            }
            let (stream, peer) = match l.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_out_of_descriptors(&e) => {
                    crate::warn!(
                        "accept failed: {e} (out of file descriptors); pausing the {:?} listener for {} ms",
                        l.service,
                        ACCEPT_PAUSE.as_millis()
                    );
                    l.paused_until = Some(now + ACCEPT_PAUSE);
                    self.timers.schedule(now + ACCEPT_PAUSE, token);
                    return;
                }
                Err(e) => {
                    crate::debug!("accept failed: {e}");
                    continue;
                }
            };
            let service = l.service;
            if service == Service::Api && self.api_conns >= self.limits.max_connections {
                // Over the cap: accept and close at once.
                crate::debug!("API connection cap reached; closing {peer}");
                drop(stream);
                continue;
            }
            let tls = match &l.tls {
                Some(cfg) => match rustls::ServerConnection::new(cfg.clone()) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        crate::warn!("TLS session for {peer} failed: {e}");
                        continue;
                    }
                },
                None => None,
            };
            match service {
                Service::Api => self.add_api_conn(stream, peer, tls, now),
                Service::Rtmp => self.add_rtmp_conn(stream, peer, tls, now),
            }
        }
    }

    fn add_rtmp_conn(
        &mut self,
        mut stream: TcpStream,
        peer: SocketAddr,
        tls: Option<rustls::ServerConnection>,
        now: Instant,
    ) {
        let _ = stream.set_nodelay(true);
        let token = self.endpoints.vacant_token();
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            crate::warn!("cannot register RTMP connection from {peer}: {e}");
            return;
        }
        crate::debug!("rtmp connection from {peer}");
        let conn = RtmpIngest::new(stream, peer, tls, token.0 as u64, now);
        let deadline = conn.deadline();
        self.endpoints.insert(Endpoint::RtmpConn(Box::new(conn)));
        self.timers.schedule(deadline, token);
        self.on_ready(token, now);
    }

    fn add_api_conn(
        &mut self,
        mut stream: TcpStream,
        peer: SocketAddr,
        tls: Option<rustls::ServerConnection>,
        now: Instant,
    ) {
        let _ = stream.set_nodelay(true);
        let token = self.endpoints.vacant_token();
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            crate::warn!("cannot register connection from {peer}: {e}");
            return;
        }
        let conn = ApiConn::new(stream, peer, tls, self.limits.clone(), now);
        let deadline = conn.deadline();
        self.endpoints.insert(Endpoint::ApiConn(Box::new(conn)));
        self.api_conns += 1;
        self.timers.schedule(deadline, token);
        // Data may already be waiting (edge-triggered: no event for it
        // until more arrives on some platforms); try at once.
        self.on_ready(token, now);
    }
}

fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOBUFS) | Some(libc::ENOMEM)
    )
}

/// A non-blocking UDP socket with a large receive buffer (ingest bursts).
fn bind_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    socket.set_reuse_address(true)?;
    let _ = socket.set_recv_buffer_size(4 * 1024 * 1024);
    socket.bind(&addr.into())?;
    socket.set_nonblocking(true)?;
    Ok(UdpSocket::from_std(socket.into()))
}

/// A non-blocking listener with SO_REUSEADDR and a deep backlog.
fn bind_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        let _ = socket.set_only_v6(false);
    }
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    socket.set_nonblocking(true)?;
    Ok(TcpListener::from_std(socket.into()))
}
