//! The I/O of one admission webhook request (the messages and decisions,
//! sans-IO, live in [`crate::admission`]): resolve the control server,
//! connect to each address in turn, TLS for `https`, write the request,
//! read the bounded response, all before the call's time-out. It never
//! blocks the loop: a control server that sleeps delays only the session
//! waiting for it.

use super::endpoint::{Cx, Endpoint};
use super::transport::{ReadEnd, Transport};
use crate::admission::http_client::{self, Response, ResponseReader, Target};
use crate::admission::manager::Call;
use crate::clock::Now;
use mio::net::TcpStream;
use mio::Interest;
use std::net::SocketAddr;
use std::time::Instant;

pub(crate) struct WebhookIo {
    call: u64,
    target: Option<Target>,
    request: Vec<u8>,
    written: usize,
    transport: Option<Transport>,
    connected: bool,
    addrs: Vec<SocketAddr>,
    response: ResponseReader,
    deadline: Instant,
    /// The outcome, once known (reported to the manager once).
    done: Option<Result<Response, String>>,
    reported: bool,
}

impl WebhookIo {
    /// Starts a call: resolves its host (at once for an address).
    pub(crate) fn start(call: Call, cx: &mut Cx<'_>) -> Self {
        let mut io = WebhookIo {
            call: call.id,
            target: None,
            request: Vec::new(),
            written: 0,
            transport: None,
            connected: false,
            addrs: Vec::new(),
            response: ResponseReader::default(),
            deadline: cx.now + call.timeout,
            done: None,
            reported: false,
        };
        match Target::parse(&call.url) {
            Err(e) => io.done = Some(Err(e)),
            Ok(t) => {
                io.request = http_client::post(
                    &t,
                    &[
                        ("Content-Type", "application/json"),
                        ("Accept", "application/json"),
                        ("X-OME-Signature", &call.signature),
                        ("User-Agent", "kiln"),
                    ],
                    &call.body,
                );
                let resolved = cx.resolver.resolve(cx.token, &t.host, t.port);
                io.target = Some(t);
                if let Some(addrs) = resolved {
                    io.addrs = addrs;
                    io.connect_next(cx);
                }
            }
        }
        io.report(cx);
        io
    }

    fn connect_next(&mut self, cx: &mut Cx<'_>) {
        while !self.addrs.is_empty() {
            let addr = self.addrs.remove(0);
            match TcpStream::connect(addr) {
                Ok(mut s) => {
                    if let Err(e) =
                        cx.poll
                            .register(&mut s, cx.token, Interest::READABLE | Interest::WRITABLE)
                    {
                        self.done = Some(Err(format!("cannot register a socket: {e}")));
                        return;
                    }
                    self.transport = Some(Transport::client(s, None));
                    self.connected = false;
                    return;
                }
                Err(e) if self.addrs.is_empty() => {
                    self.done = Some(Err(format!("cannot connect to {addr}: {e}")));
                    return;
                }
                Err(_) => {}
            }
        }
        if self.done.is_none() {
            self.done = Some(Err(
                "no address of the control server could be reached".into()
            ));
        }
    }

    /// A connect in progress: done (TLS starts), failed (next address).
    fn check_connected(&mut self, cx: &mut Cx<'_>) {
        if self.connected {
            return;
        }
        let Some(transport) = self.transport.as_mut() else {
            return;
        };
        let stream = transport.stream_mut();
        if let Ok(Some(e)) | Err(e) = stream.take_error() {
            let _ = cx.poll.deregister(stream);
            self.transport = None;
            if self.addrs.is_empty() {
                self.done = Some(Err(format!("cannot connect: {e}")));
            } else {
                self.connect_next(cx);
            }
            return;
        }
        match stream.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotConnected => return,
            Err(e) => {
                self.done = Some(Err(format!("cannot connect: {e}")));
                return;
            }
        }
        let _ = stream.set_nodelay(true);
        self.connected = true;
        let Some(t) = self.target.as_ref().filter(|t| t.tls) else {
            return;
        };
        let started = rustls::pki_types::ServerName::try_from(t.host.clone())
            .map_err(|e| format!("invalid TLS server name [{}]: {e}", t.host))
            .and_then(|n| {
                rustls::ClientConnection::new(cx.tls_client.clone(), n)
                    .map_err(|e| format!("TLS: {e}"))
            });
        match started {
            Ok(c) => self.transport = self.transport.take().map(|tr| tr.with_client_tls(c)),
            Err(why) => self.done = Some(Err(why)),
        }
    }

    fn exchange(&mut self, peer_closed: bool) {
        if !self.connected || self.done.is_some() {
            return;
        }
        if !self.write() {
            return;
        }
        let Some(transport) = self.transport.as_mut() else {
            return;
        };
        let response = &mut self.response;
        let mut too_long = None;
        let read = transport.read(true, |data| match response.feed(data) {
            Ok(()) => true,
            Err(e) => {
                too_long = Some(e);
                false
            }
        });
        if let Some(e) = too_long {
            self.done = Some(Err(e));
            return;
        }
        // What TLS wants to send after reading (its handshake's next
        // flight, then the request it held).
        if !self.write() {
            return;
        }
        let eof = match read {
            Ok((_, ReadEnd::Closed)) => true,
            Ok(_) => peer_closed,
            // A TLS peer that closes without close_notify: what was read
            // may still be whole.
            Err(_) => true,
        };
        match self.response.complete(eof) {
            Ok(Some(r)) => self.done = Some(Ok(r)),
            Ok(None) => {}
            Err(e) => self.done = Some(Err(e)),
        }
    }

    /// Writes what is left of the request (and TLS's own records); false
    /// when the connection failed.
    fn write(&mut self) -> bool {
        let Some(transport) = self.transport.as_mut() else {
            return false;
        };
        while self.written < self.request.len() || transport.has_pending_tls() {
            match transport.write(&self.request[self.written..]) {
                Ok(0) => break,
                Ok(n) => self.written += n,
                Err(e) => {
                    self.done = Some(Err(format!("write: {e}")));
                    return false;
                }
            }
        }
        true
    }

    /// Hands the outcome to the manager, once.
    fn report(&mut self, cx: &mut Cx<'_>) {
        if self.reported {
            return;
        }
        if let Some(result) = self.done.take() {
            self.reported = true;
            cx.access.handle_reply(self.call, result, Now::read(cx.now));
        }
    }
}

impl Endpoint for WebhookIo {
    fn ready(&mut self, cx: &mut Cx<'_>, peer_closed: bool) {
        self.check_connected(cx);
        self.exchange(peer_closed);
        self.report(cx);
    }

    fn timeout(&mut self, cx: &mut Cx<'_>) {
        if self.done.is_none() {
            self.done = Some(Err("no answer within the time-out".into()));
        }
        self.report(cx);
    }

    fn deadline(&self) -> Option<Instant> {
        (!self.reported).then_some(self.deadline)
    }

    fn is_closed(&self) -> bool {
        self.reported
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        if let Some(t) = self.transport.as_mut() {
            let _ = poll.deregister(t.stream_mut());
        }
    }

    fn abort(&mut self, cx: &mut Cx<'_>) {
        self.done = Some(Err("internal error (see the server log)".into()));
        self.report(cx);
    }

    fn resolved(&mut self, result: Result<Vec<SocketAddr>, String>, cx: &mut Cx<'_>) {
        if self.transport.is_some() || self.reported {
            return;
        }
        match result {
            Err(e) => self.done = Some(Err(e)),
            Ok(addrs) => {
                self.addrs = addrs;
                self.connect_next(cx);
            }
        }
        self.report(cx);
    }
}
