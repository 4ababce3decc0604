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
pub mod timers;
pub mod tokens;
pub mod transport;

use crate::api::Api;
use crate::config::HttpLimits;
use api_conn::{ApiConn, Status};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use timers::Timers;
use tokens::TokenTable;

const SIGNAL_TOKEN: Token = Token(usize::MAX);
/// How long a listener rests when the process is out of file descriptors.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// An API listener to open: address and, for the TLS port, the rustls config.
pub struct ApiListenerSpec {
    pub addr: SocketAddr,
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

enum Endpoint {
    ApiListener(ApiListener),
    ApiConn(Box<ApiConn>),
}

struct ApiListener {
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
    pub fn bind(api: Api, listeners: Vec<ApiListenerSpec>, limits: HttpLimits) -> io::Result<Self> {
        let poll = Poll::new()?;
        let mut endpoints = TokenTable::default();
        for spec in listeners {
            let mut listener = bind_listener(spec.addr)?;
            let token = endpoints.vacant_token();
            poll.registry()
                .register(&mut listener, token, Interest::READABLE)?;
            crate::info!(
                "API server listening on {}://{}",
                if spec.tls.is_some() { "https" } else { "http" },
                listener.local_addr()?
            );
            endpoints.insert(Endpoint::ApiListener(ApiListener {
                listener,
                tls: spec.tls,
                paused_until: None,
            }));
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
        match self.endpoints.get_mut(token) {
            Some(Endpoint::ApiListener(_)) => self.accept(token, now),
            Some(Endpoint::ApiConn(conn)) => {
                let status = conn.on_ready(&mut self.api, now);
                let deadline = conn.deadline();
                self.after_conn(token, status, deadline);
            }
            None => {}
        }
    }

    fn after_conn(&mut self, token: Token, status: Status, deadline: Instant) {
        match status {
            Status::Open => self.timers.schedule(deadline, token),
            Status::Closed => self.close_conn(token),
        }
    }

    fn close_conn(&mut self, token: Token) {
        if let Some(Endpoint::ApiConn(mut conn)) = self.endpoints.remove(token) {
            let _ = self.poll.registry().deregister(conn.stream_mut());
            self.api_conns -= 1;
        }
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
                Some(Endpoint::ApiListener(l)) => {
                    l.paused_until = None;
                    self.accept(token, now);
                }
                None => {}
            }
        }
    }

    fn accept(&mut self, token: Token, now: Instant) {
        loop {
            let Some(Endpoint::ApiListener(l)) = self.endpoints.get_mut(token) else {
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
                        "accept failed: {e} (out of file descriptors); pausing the API listener for {} ms",
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
            if self.api_conns >= self.limits.max_connections {
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
            self.add_conn(stream, peer, tls, now);
        }
    }

    fn add_conn(
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
