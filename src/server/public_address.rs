//! kiln's public address, learnt from `<StunServer>` as OME learns it:
//! behind a NAT (Docker, a cloud VM, a home router) the address browsers
//! reach is on no interface, so kiln asks a STUN server what address its
//! datagrams come from. A Binding request from a UDP socket of its own,
//! driven by the loop like any endpoint (the server's name goes to the
//! resolver thread): nothing blocks. Three requests a second apart make
//! a round; a failed round is logged and the next one starts after 5 s,
//! doubling to at most 5 minutes, until an answer comes. The answer is
//! logged and given to the WebRTC table, which offers the ICE sockets and
//! relay ports that stand for the public address from then on.

use super::endpoint::{Cx, Endpoint};
use crate::webrtc::turn::{binding_request, mapped_address};
use mio::net::UdpSocket;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Requests per round, and the wait for each answer.
const TRIES: u32 = 3;
const ANSWER_WAIT: Duration = Duration::from_secs(1);
/// The wait after the first failed round, doubled after each to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_secs(5);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How long the resolver may take before the round counts as failed.
const RESOLVE_WAIT: Duration = Duration::from_secs(30);

enum State {
    /// Start a round: resolve the server's name.
    Resolve,
    /// Waiting for the resolver (until the deadline).
    Resolving,
    /// Requests sent to this address; `tries` so far this round.
    Asking {
        server: SocketAddr,
        tries: u32,
    },
    Done,
}

pub(crate) struct PublicAddress {
    socket: UdpSocket,
    /// `<StunServer>` as written: host and port.
    host: String,
    port: u16,
    state: State,
    txid: [u8; 12],
    deadline: Option<Instant>,
    failed_rounds: u32,
}

impl PublicAddress {
    /// Asks `host:port` through `socket` (an IPv4 socket of its own) from
    /// the loop's first turn.
    pub(crate) fn new(socket: UdpSocket, host: String, port: u16, now: Instant) -> Self {
        PublicAddress {
            socket,
            host,
            port,
            state: State::Resolve,
            txid: [0; 12],
            deadline: Some(now),
            failed_rounds: 0,
        }
    }

    fn server_name(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    fn start_round(&mut self, cx: &mut Cx<'_>) {
        match cx.resolver.resolve(cx.token, &self.host, self.port) {
            Some(addrs) => self.ask_first(addrs, cx),
            None => {
                self.state = State::Resolving;
                self.deadline = Some(cx.now + RESOLVE_WAIT);
            }
        }
    }

    fn ask_first(&mut self, addrs: Vec<SocketAddr>, cx: &mut Cx<'_>) {
        match addrs.into_iter().find(SocketAddr::is_ipv4) {
            Some(server) => {
                let _ = ring::rand::SecureRandom::fill(
                    &ring::rand::SystemRandom::new(),
                    &mut self.txid,
                );
                self.state = State::Asking { server, tries: 0 };
                self.ask(cx);
            }
            None => self.fail_round("it has no IPv4 address", cx),
        }
    }

    /// Sends the request (again), or ends the round after `TRIES`.
    fn ask(&mut self, cx: &mut Cx<'_>) {
        let State::Asking { server, tries } = &mut self.state else {
            return;
        };
        if *tries == TRIES {
            self.fail_round("no answer", cx);
            return;
        }
        *tries += 1;
        let server = *server;
        if let Err(e) = self.socket.send_to(&binding_request(self.txid), server) {
            crate::debug!("stun {server}: send: {e}");
        }
        self.deadline = Some(cx.now + ANSWER_WAIT);
    }

    fn fail_round(&mut self, why: &str, cx: &mut Cx<'_>) {
        let wait = FIRST_BACKOFF
            .saturating_mul(1 << self.failed_rounds.min(10))
            .min(MAX_BACKOFF);
        self.failed_rounds += 1;
        crate::warn!(
            "Could not resolve public IP address from stun server ({}): {why}; asking again in {} s",
            self.server_name(),
            wait.as_secs()
        );
        self.state = State::Resolve;
        self.deadline = Some(cx.now + wait);
    }

    fn read(&mut self, cx: &mut Cx<'_>) {
        let mut buf = [0u8; 1500];
        loop {
            match self.socket.recv_from(&mut buf) {
                Ok((n, from)) => {
                    let State::Asking { server, .. } = self.state else {
                        continue;
                    };
                    if from != server {
                        continue;
                    }
                    if let Some(mapped) = mapped_address(&buf[..n], self.txid) {
                        self.learnt(mapped, cx);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // WouldBlock, or an ICMP error of the last send.
                Err(_) => return,
            }
        }
    }

    fn learnt(&mut self, mapped: SocketAddr, cx: &mut Cx<'_>) {
        self.state = State::Done;
        self.deadline = None;
        let offered = cx.api.webrtc.learn_public_address(mapped.ip());
        crate::info!(
            "Resolved public IP address ({}) from stun server ({}); now offered: {}",
            mapped.ip(),
            self.server_name(),
            if offered.is_empty() {
                "nothing new (the address is the machine's own)".to_string()
            } else {
                offered.join(", ")
            }
        );
    }
}

impl Endpoint for PublicAddress {
    fn ready(&mut self, cx: &mut Cx<'_>, _peer_closed: bool) {
        self.read(cx);
    }

    fn timeout(&mut self, cx: &mut Cx<'_>) {
        match self.state {
            State::Resolve => self.start_round(cx),
            State::Resolving => self.fail_round("its name was not resolved in time", cx),
            State::Asking { .. } => self.ask(cx),
            State::Done => {}
        }
    }

    fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    fn is_closed(&self) -> bool {
        matches!(self.state, State::Done)
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        let _ = poll.deregister(&mut self.socket);
    }

    fn abort(&mut self, _cx: &mut Cx<'_>) {
        self.state = State::Done;
    }

    fn resolved(&mut self, result: Result<Vec<SocketAddr>, String>, cx: &mut Cx<'_>) {
        if !matches!(self.state, State::Resolving) {
            return;
        }
        match result {
            Ok(addrs) => self.ask_first(addrs, cx),
            Err(e) => self.fail_round(&e, cx),
        }
    }
}
