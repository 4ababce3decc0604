//! The I/O of one push session (the session itself, sans-IO, lives in the
//! [`PushManager`](crate::push::manager::PushManager)): name resolution,
//! connecting to each address in turn, TLS, reading, and the [`Wire`] the
//! session writes through (`writev` on TCP, `sendmmsg` on UDP).

use super::endpoint::{Cx, Endpoint};
use super::transport::{ReadEnd, Transport};
use crate::push::manager::{NewSession, SessionId};
use crate::push::session::{Link, Wire};
use mio::net::{TcpStream, UdpSocket};
use mio::Interest;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Instant;

enum Socket {
    None,
    /// Connecting until `connected`.
    Tcp {
        transport: Transport,
        connected: bool,
    },
    Udp(UdpSocket),
}

pub(crate) struct PushIo {
    id: SessionId,
    link: Link,
    socket: Socket,
    /// Addresses not tried yet.
    addrs: Vec<SocketAddr>,
    deadline: Option<Instant>,
    closed: bool,
}

struct TcpWire<'a>(&'a mut Transport);

impl Wire for TcpWire<'_> {
    fn write(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.0.write_vectored(bufs)
    }

    fn send(&mut self, _datagrams: &[&[u8]]) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }

    fn close_write(&mut self) {
        self.0.close_write();
    }
}

struct UdpWire<'a>(&'a UdpSocket);

impl Wire for UdpWire<'_> {
    fn write(&mut self, _bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }

    fn send(&mut self, datagrams: &[&[u8]]) -> io::Result<usize> {
        crate::sys::send_datagrams(self.0.as_raw_fd(), datagrams)
    }

    fn close_write(&mut self) {}
}

impl PushIo {
    /// The I/O of a new session: resolves its destination (at once when the
    /// host is an address or cached).
    pub(crate) fn start(new: NewSession, cx: &mut Cx<'_>) -> Self {
        let mut io = PushIo {
            id: new.id,
            link: new.link,
            socket: Socket::None,
            addrs: Vec::new(),
            deadline: None,
            closed: false,
        };
        if let Some(addrs) = cx.resolver.resolve(cx.token, &new.host, new.port) {
            io.resolved(Ok(addrs), cx);
        }
        cx.api.pushes.wake(io.id);
        io
    }

    fn connect_next(&mut self, cx: &mut Cx<'_>) {
        let registry = cx.poll;
        loop {
            if self.addrs.is_empty() {
                if let Some(s) = cx.api.pushes.session_mut(self.id) {
                    s.handle_connect_failed(
                        "no address of the destination could be reached".into(),
                    );
                }
                return;
            }
            let addr = self.addrs.remove(0);
            let opened = match &self.link {
                Link::Tcp { .. } => TcpStream::connect(addr).and_then(|mut s| {
                    registry.register(&mut s, cx.token, Interest::READABLE | Interest::WRITABLE)?;
                    Ok(Socket::Tcp {
                        transport: Transport::client(s, None),
                        connected: false,
                    })
                }),
                Link::Udp { ttl } => open_udp(addr, *ttl).and_then(|mut s| {
                    registry.register(&mut s, cx.token, Interest::WRITABLE)?;
                    Ok(Socket::Udp(s))
                }),
                Link::Srt => open_udp(addr, None).and_then(|mut s| {
                    registry.register(&mut s, cx.token, Interest::READABLE | Interest::WRITABLE)?;
                    Ok(Socket::Udp(s))
                }),
            };
            match opened {
                Ok(socket) => {
                    self.socket = socket;
                    if let Socket::Udp(_) = self.socket {
                        if let Some(s) = cx.api.pushes.session_mut(self.id) {
                            s.handle_connected(addr, cx.now);
                        }
                    }
                    return;
                }
                Err(e) if self.addrs.is_empty() => {
                    if let Some(s) = cx.api.pushes.session_mut(self.id) {
                        s.handle_connect_failed(format!("cannot connect to {addr}: {e}"));
                    }
                    return;
                }
                Err(_) => {}
            }
        }
    }

    /// A TCP connect in progress: done, failed (next address), or not yet.
    fn check_connected(&mut self, cx: &mut Cx<'_>) {
        let Socket::Tcp {
            transport,
            connected: false,
        } = &mut self.socket
        else {
            return;
        };
        let stream = transport.stream_mut();
        if let Ok(Some(e)) | Err(e) = stream.take_error() {
            let _ = cx.poll.deregister(stream);
            self.socket = Socket::None;
            if self.addrs.is_empty() {
                if let Some(s) = cx.api.pushes.session_mut(self.id) {
                    s.handle_connect_failed(format!("cannot connect: {e}"));
                }
            } else {
                self.connect_next(cx);
            }
            return;
        }
        let peer = match stream.peer_addr() {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
            Err(e) => {
                if let Some(s) = cx.api.pushes.session_mut(self.id) {
                    s.handle_connect_failed(format!("cannot connect: {e}"));
                }
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        if let Link::Tcp { tls: Some(name) } = &self.link {
            let started = rustls::pki_types::ServerName::try_from(name.clone())
                .map_err(|e| format!("invalid TLS server name [{name}]: {e}"))
                .and_then(|n| {
                    rustls::ClientConnection::new(cx.tls_client.clone(), n)
                        .map_err(|e| format!("TLS: {e}"))
                });
            match started {
                Ok(c) => {
                    let old = std::mem::replace(&mut self.socket, Socket::None);
                    if let Socket::Tcp { transport, .. } = old {
                        self.socket = Socket::Tcp {
                            transport: transport.with_client_tls(c),
                            connected: false,
                        };
                    }
                }
                Err(why) => {
                    if let Some(s) = cx.api.pushes.session_mut(self.id) {
                        s.handle_connect_failed(why);
                    }
                    return;
                }
            }
        }
        if let Socket::Tcp { connected, .. } = &mut self.socket {
            *connected = true;
        }
        if let Some(s) = cx.api.pushes.session_mut(self.id) {
            s.handle_connected(peer, cx.now);
        }
    }

    fn read(&mut self, cx: &mut Cx<'_>) {
        let Some(session) = cx.api.pushes.session_mut(self.id) else {
            return;
        };
        let now = cx.now;
        match &mut self.socket {
            Socket::Tcp {
                transport,
                connected: true,
            } => {
                let result = transport.read(true, |data| {
                    session.handle_input(data, now);
                    !session.is_done()
                });
                match result {
                    Ok((_, ReadEnd::Closed)) => session.handle_peer_closed(),
                    Ok(_) => {}
                    Err(e) => session.handle_transport_error(e.to_string()),
                }
            }
            Socket::Udp(socket) if matches!(self.link, Link::Srt) => {
                let mut buf = [0u8; 2048];
                loop {
                    match socket.recv_from(&mut buf) {
                        Ok((n, from)) => session.handle_datagram(from, &buf[..n], now),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        // WouldBlock, or ICMP errors on a connected socket:
                        // the caller's own timers decide.
                        Err(_) => break,
                    }
                }
            }
            _ => {}
        }
    }
}

impl Endpoint for PushIo {
    // Calls into the session wake it: the loop then lets it transmit
    // (`flush`) and takes its reports, in one place for every cause.
    fn ready(&mut self, cx: &mut Cx<'_>, _peer_closed: bool) {
        self.check_connected(cx);
        self.read(cx);
        cx.api.pushes.wake(self.id);
    }

    fn timeout(&mut self, cx: &mut Cx<'_>) {
        if let Some(s) = cx.api.pushes.session_mut(self.id) {
            s.handle_timeout(cx.now);
        }
        cx.api.pushes.wake(self.id);
    }

    fn flush(&mut self, cx: &mut Cx<'_>) {
        let now = cx.now;
        match &mut self.socket {
            Socket::Tcp {
                transport,
                connected: true,
            } => cx
                .api
                .pushes
                .transmit(self.id, now, &mut TcpWire(transport)),
            Socket::Udp(socket) => cx.api.pushes.transmit(self.id, now, &mut UdpWire(socket)),
            _ => {}
        }
        match cx.api.pushes.session(self.id) {
            Some(s) => self.deadline = s.poll_timeout(),
            None => self.closed = true,
        }
    }

    fn prefetch(&self) {
        crate::sys::prefetch(self);
        crate::sys::prefetch(&self.socket);
    }

    fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    fn is_closed(&self) -> bool {
        self.closed
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        match &mut self.socket {
            Socket::Tcp { transport, .. } => {
                let _ = poll.deregister(transport.stream_mut());
            }
            Socket::Udp(s) => {
                let _ = poll.deregister(s);
            }
            Socket::None => {}
        }
    }

    fn abort(&mut self, cx: &mut Cx<'_>) {
        cx.api
            .pushes
            .abort(self.id, "internal error (see the server log)");
    }

    fn resolved(&mut self, result: Result<Vec<SocketAddr>, String>, cx: &mut Cx<'_>) {
        if !matches!(self.socket, Socket::None) {
            return;
        }
        match result {
            Err(e) => {
                if let Some(s) = cx.api.pushes.session_mut(self.id) {
                    s.handle_connect_failed(e);
                }
            }
            Ok(addrs) => {
                self.addrs = addrs;
                self.connect_next(cx);
            }
        }
        cx.api.pushes.wake(self.id);
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
