//! One TCP connection to the WebRTC relay port (OME's `<TcpRelay>`): the
//! glue between the socket, its TURN allocation ([`TurnConn`]) and the
//! session table. What the client sends to kiln's ICE sockets goes to the
//! table as datagrams from the allocation's relayed address; what sessions
//! send to that address comes back here, wrapped.

use super::endpoint::{Cx, Endpoint};
use super::transport::{ReadEnd, ReadGate, Transport};
use crate::webrtc::turn::{TurnConn, TurnOutput};
use mio::net::TcpStream;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// An allocation must be made this soon after the connection; a
/// connection idle this long closes.
const ALLOCATE_WITHIN: Duration = Duration::from_secs(10);
const IDLE: Duration = Duration::from_secs(60);
/// Output held for a slow client; past it, datagrams are dropped.
const MAX_PENDING: usize = 1 << 20;
/// The client is not read while this much output waits for it (its
/// requests' replies would pile up: [`ReadGate`]).
const HIGH_WATER: usize = 64 * 1024;
/// Bytes read per turn before what they hold is handled.
const READ_TURN: usize = 64 * 1024;

pub(crate) struct RelayConn {
    transport: Transport,
    peer: SocketAddr,
    /// Made at the first readiness (the table gives the relayed address).
    turn: Option<TurnConn>,
    pending: Vec<u8>,
    accepted: Instant,
    last_rx: Instant,
    closed: bool,
    gate: ReadGate,
    /// A read is owed (see [`ReadGate`]): go on at this time.
    read_again: Option<Instant>,
}

impl RelayConn {
    pub(crate) fn new(stream: TcpStream, peer: SocketAddr, now: Instant) -> Self {
        RelayConn {
            transport: Transport::new(stream, None),
            peer,
            turn: None,
            pending: Vec::new(),
            accepted: now,
            last_rx: now,
            closed: false,
            gate: ReadGate::default(),
            read_again: None,
        }
    }

    fn turn(&mut self, cx: &mut Cx<'_>) -> &mut TurnConn {
        self.turn.get_or_insert_with(|| {
            let ip = self
                .transport
                .stream_mut()
                .local_addr()
                .map_or(self.peer.ip(), |a| a.ip());
            let relayed = cx.api.webrtc.add_relay(ip, cx.token.0);
            let ports = cx.api.webrtc.candidates();
            TurnConn::new(self.peer, relayed, ports, crate::webrtc::random_string(16))
        })
    }

    fn allocated(&self) -> bool {
        self.turn.as_ref().is_some_and(TurnConn::is_allocated)
    }

    /// Gives the relayed address back (the connection is done).
    fn release(&mut self, cx: &mut Cx<'_>) {
        if let Some(t) = self.turn.take() {
            cx.api.webrtc.remove_relay(t.relayed());
        }
    }

    fn read(&mut self, peer_closed: bool, cx: &mut Cx<'_>) {
        if !self.gate.open(self.pending.len(), HIGH_WATER, false) {
            return;
        }
        let mut data = Vec::new();
        let result = self.transport.read(peer_closed, |b| {
            data.extend_from_slice(b);
            data.len() < READ_TURN
        });
        match result {
            Ok((got, end)) => {
                self.gate.ended(end);
                if got {
                    self.last_rx = cx.now;
                }
                if end == ReadEnd::Closed {
                    self.closed = true;
                }
            }
            Err(_) => self.closed = true,
        }
        if data.is_empty() {
            return;
        }
        let out = match self.turn(cx).feed(&data) {
            Ok(out) => out,
            Err(e) => {
                crate::debug!("webrtc relay {}: {e:?}", self.peer);
                self.closed = true;
                return;
            }
        };
        let relayed = self.turn(cx).relayed();
        for o in out {
            match o {
                TurnOutput::Reply(r) => self.pending.extend_from_slice(&r),
                TurnOutput::Datagram { peer, data } => {
                    let api = &mut *cx.api;
                    api.webrtc.handle_datagram(
                        peer,
                        relayed,
                        &data,
                        &mut api.registry.streams,
                        cx.now,
                    );
                }
            }
        }
        // What a publisher sent, for the features.
        cx.out.ingest.append(&mut cx.api.webrtc.take_ingest());
    }

    fn write(&mut self, cx: &mut Cx<'_>) {
        let out = cx.api.webrtc.take_relay_out(cx.token.0);
        if let Some(turn) = &self.turn {
            for (from, data) in out {
                if self.pending.len() > MAX_PENDING {
                    cx.api.webrtc.dropped += 1;
                    continue;
                }
                self.pending.extend_from_slice(&turn.wrap(from, &data));
            }
        }
        if self.pending.is_empty() {
            return;
        }
        match self.transport.write(&self.pending) {
            Ok(n) => {
                self.pending.drain(..n);
            }
            Err(_) => self.closed = true,
        }
    }

    /// Reads (on an edge, or when owed), handles and writes until nothing
    /// is owed; bounded per turn, then re-queued.
    fn pump(&mut self, cx: &mut Cx<'_>, peer_closed: bool, edge: bool) {
        self.read_again = None;
        let mut read = edge;
        for _ in 0..8 {
            if read || self.gate.owed(self.pending.len(), HIGH_WATER, false) {
                self.read(peer_closed, cx);
            }
            self.write(cx);
            read = false;
            if self.closed {
                self.release(cx);
                return;
            }
            if !self.gate.owed(self.pending.len(), HIGH_WATER, false) {
                return;
            }
        }
        self.read_again = Some(cx.now);
    }
}

impl Endpoint for RelayConn {
    fn ready(&mut self, cx: &mut Cx<'_>, peer_closed: bool) {
        self.pump(cx, peer_closed, true);
    }

    fn timeout(&mut self, cx: &mut Cx<'_>) {
        if self.read_again.is_some_and(|at| at <= cx.now) {
            self.pump(cx, false, false);
            return;
        }
        let late = !self.allocated() && cx.now >= self.accepted + ALLOCATE_WITHIN;
        if late || cx.now >= self.last_rx + IDLE {
            self.closed = true;
            self.release(cx);
        }
    }

    fn deadline(&self) -> Option<Instant> {
        let own = if self.allocated() {
            self.last_rx + IDLE
        } else {
            self.accepted + ALLOCATE_WITHIN
        };
        Some(self.read_again.map_or(own, |at| at.min(own)))
    }

    fn is_closed(&self) -> bool {
        self.closed
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        let _ = poll.deregister(self.transport.stream_mut());
    }

    fn abort(&mut self, cx: &mut Cx<'_>) {
        self.closed = true;
        self.release(cx);
    }

    fn flush(&mut self, cx: &mut Cx<'_>) {
        self.pump(cx, false, false);
    }

    fn unproven_since(&self) -> Option<Instant> {
        (!self.allocated()).then_some(self.accepted)
    }
}
