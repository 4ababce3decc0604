//! The connection of one origin map (`originMapStore`) to its Redis: the
//! core is [`OriginMap`](crate::pull::origin_map::OriginMap) in the
//! registry; this endpoint resolves, connects (again, whenever the core
//! asks after an outage), reads replies into it and writes its commands.
//! It lives as long as the server.

use super::endpoint::{Cx, Endpoint};
use super::transport::{ReadEnd, Transport};
use crate::pull::origin_map::OriginMap;
use mio::net::TcpStream;
use mio::Interest;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

enum Conn {
    Idle,
    Resolving {
        since: Instant,
    },
    Connecting {
        transport: Transport,
        since: Instant,
    },
    Up {
        transport: Transport,
        out: Vec<u8>,
    },
}

pub(crate) struct RedisIo {
    /// The map's index in the registry.
    index: usize,
    conn: Conn,
}

impl RedisIo {
    pub(crate) fn new(index: usize) -> Self {
        RedisIo {
            index,
            conn: Conn::Idle,
        }
    }

    fn map<'a>(&self, cx: &'a mut Cx<'_>) -> Option<&'a mut OriginMap> {
        cx.api.pulls.maps.get_mut(self.index)
    }

    /// Starts a connection when the core wants one.
    fn maybe_connect(&mut self, cx: &mut Cx<'_>) {
        if !matches!(self.conn, Conn::Idle) {
            return;
        }
        let now = cx.now;
        let Some(map) = self.map(cx) else { return };
        if !map.poll_connect(now) {
            return;
        }
        let (host, port) = (map.config.host.clone(), map.config.port);
        self.conn = Conn::Resolving { since: now };
        if let Some(addrs) = cx.resolver.resolve(cx.token, &host, port) {
            self.resolved(Ok(addrs), cx);
        }
    }

    fn connect(&mut self, addrs: &[SocketAddr], cx: &mut Cx<'_>) {
        let mut last = "no address".to_string();
        for addr in addrs {
            let opened = TcpStream::connect(*addr).and_then(|mut s| {
                cx.poll
                    .register(&mut s, cx.token, Interest::READABLE | Interest::WRITABLE)?;
                Ok(s)
            });
            match opened {
                Ok(s) => {
                    self.conn = Conn::Connecting {
                        transport: Transport::client(s, None),
                        since: cx.now,
                    };
                    return;
                }
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
        self.down(&last, cx);
    }

    /// The connection is gone: the core hears why and retries later.
    fn down(&mut self, why: &str, cx: &mut Cx<'_>) {
        match std::mem::replace(&mut self.conn, Conn::Idle) {
            Conn::Connecting { mut transport, .. } | Conn::Up { mut transport, .. } => {
                let _ = cx.poll.deregister(transport.stream_mut());
            }
            Conn::Idle | Conn::Resolving { .. } => {}
        }
        let now = cx.now;
        if let Some(map) = self.map(cx) {
            map.handle_disconnected(why, now);
        }
    }

    fn check_connected(&mut self, cx: &mut Cx<'_>) {
        let Conn::Connecting { transport, .. } = &mut self.conn else {
            return;
        };
        let stream = transport.stream_mut();
        if let Ok(Some(e)) | Err(e) = stream.take_error() {
            return self.down(&format!("cannot connect: {e}"), cx);
        }
        match stream.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
            Err(e) => return self.down(&format!("cannot connect: {e}"), cx),
        }
        let _ = stream.set_nodelay(true);
        let Conn::Connecting { transport, .. } = std::mem::replace(&mut self.conn, Conn::Idle)
        else {
            return;
        };
        self.conn = Conn::Up {
            transport,
            out: Vec::new(),
        };
        let now = cx.now;
        if let Some(map) = self.map(cx) {
            map.handle_connected(now);
        }
    }

    fn read(&mut self, cx: &mut Cx<'_>, drain: bool) {
        let Conn::Up { transport, .. } = &mut self.conn else {
            return;
        };
        let map = cx.api.pulls.maps.get_mut(self.index);
        let Some(map) = map else { return };
        let now = cx.now;
        let result = transport.read(drain, |data| {
            map.handle_input(data, now);
            map.broken().is_none()
        });
        let why = match result {
            Ok((_, ReadEnd::Closed)) => Some("Redis closed the connection".to_string()),
            Err(e) => Some(format!("read: {e}")),
            Ok(_) => map.broken().map(str::to_string),
        };
        if let Some(why) = why {
            self.down(&why, cx);
        }
    }

    fn write(&mut self, cx: &mut Cx<'_>) {
        let Conn::Up { transport, out } = &mut self.conn else {
            return;
        };
        if let Some(map) = cx.api.pulls.maps.get_mut(self.index) {
            map.poll_transmit(out);
        }
        if let Err(e) = transport.write_from(out) {
            self.down(&format!("write: {e}"), cx);
        }
    }
}

impl Endpoint for RedisIo {
    fn ready(&mut self, cx: &mut Cx<'_>, peer_closed: bool) {
        self.check_connected(cx);
        self.read(cx, peer_closed);
        self.write(cx);
    }

    fn timeout(&mut self, cx: &mut Cx<'_>) {
        let now = cx.now;
        match &self.conn {
            Conn::Resolving { since } | Conn::Connecting { since, .. }
                if now >= *since + CONNECT_TIMEOUT =>
            {
                return self.down("no connection within 3 s", cx);
            }
            _ => {}
        }
        if let Some(map) = self.map(cx) {
            map.handle_timeout(now);
            if let Some(why) = map.broken().map(str::to_string) {
                return self.down(&why, cx);
            }
        }
        self.maybe_connect(cx);
        self.write(cx);
    }

    fn deadline(&self) -> Option<Instant> {
        match &self.conn {
            Conn::Resolving { since } | Conn::Connecting { since, .. } => {
                Some(*since + CONNECT_TIMEOUT)
            }
            // The core's deadline is read by the loop through `flush`
            // callers and the timer the server arms for the maps.
            Conn::Idle | Conn::Up { .. } => None,
        }
    }

    fn is_closed(&self) -> bool {
        false
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        if let Conn::Connecting { transport, .. } | Conn::Up { transport, .. } = &mut self.conn {
            let _ = poll.deregister(transport.stream_mut());
        }
    }

    fn abort(&mut self, cx: &mut Cx<'_>) {
        self.down("internal error", cx);
    }

    /// The core has something to send, or its timer is due.
    fn flush(&mut self, cx: &mut Cx<'_>) {
        self.timeout(cx);
    }

    fn resolved(&mut self, result: Result<Vec<SocketAddr>, String>, cx: &mut Cx<'_>) {
        if !matches!(self.conn, Conn::Resolving { .. }) {
            return;
        }
        match result {
            Ok(addrs) => self.connect(&addrs, cx),
            Err(e) => self.down(&e, cx),
        }
    }
}
