//! SRT caller (push side): one live-mode, send-only connection to a remote
//! listener, sans-IO.
//!
//! Handshake: HSv4-style induction, then a v5 conclusion with HSREQ (TSBPD
//! both ways, TLPKTDROP, NAKREPORT, REXMITFLG) and the SID extension; both
//! are retransmitted every 250 ms until answered or `connect_timeout`
//! passes. A rejection (`1000 + reason`) ends in
//! `CallerEvent::Closed(CloseReason::Rejected(reason))`. Once connected,
//! [`Caller::send`] queues payloads (split at `payload_size`) that go out
//! through [`Caller::poll_transmit`]; see `sender.rs` for ARQ and drop.
//!
//! Encryption (`CallerConfig::crypto`): the conclusion carries a KMREQ
//! with our key; the listener's KMRSP must echo it (a one-word KMRSP is its
//! refusal: `CloseReason::KeyMaterial`). Payloads are encrypted once, when
//! queued, and keys are refreshed on libsrt's schedule (`crypto.rs`).
//!
//! Request mode (`CallerConfig::receive`): the caller plays what the
//! listener sends (a pull from another server) with the same receiver as
//! the listener's publishers (ACK/NAK, TSBPD, drop); payloads come out of
//! [`Caller::poll_data`]. With a passphrase the listener encrypts with the
//! key the caller sent (libsrt's bidirectional security association): it
//! is decrypted with that key, and the listener's key refreshes are taken
//! and answered.
//!
//! Time is `std::time::Instant`, passed in. Not included: rendezvous,
//! congestion control/pacing (live mode sends at the rate `send` is
//! called).

use std::collections::hash_map::RandomState;
use std::collections::VecDeque;
use std::fmt;
use std::hash::BuildHasher;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::common::{add_or_same, timestamp_us, OutQueue};
use super::crypto::{
    km_state_response, plain_payload, CryptoConfig, RxCrypto, TxCrypto, KM_STATE_BADSECRET,
    KM_STATE_NOSECRET, KM_STATE_UNSECURED,
};
use super::packet::{
    encode_peer_ip, write_km_packet, write_simple_control, ControlBody, ControlType, Handshake,
    HandshakeType, Packet, RejectReason, SeqNumber, SrtFlags, SrtHandshakeExt, DEFAULT_FLOW_WINDOW,
    DEFAULT_MTU, HS_EXT_CONFIG, HS_EXT_HSREQ, HS_EXT_KMREQ, MAX_PAYLOAD_LEN, SRT_MAGIC_CODE,
    SRT_VERSION,
};
use super::receiver::{CloseReason, Link, Receiver, ReceiverParams};
use super::sender::{Sender, SenderStats};
use bytes::Bytes;

/// Handshake retransmission period (libsrt: 250 ms).
const HANDSHAKE_INTERVAL: Duration = Duration::from_millis(250);

/// Caller settings.
#[derive(Clone, Debug)]
pub struct CallerConfig {
    /// The listener's address.
    pub peer: SocketAddr,
    /// Stream id sent in the SID extension.
    pub stream_id: Option<String>,
    /// Proposed latency (both directions; the larger of both sides wins).
    pub latency: Duration,
    /// Largest payload per packet (1316 = 7 TS packets); at most 1456.
    pub payload_size: usize,
    /// Close after this long without hearing from the peer.
    pub peer_idle_timeout: Duration,
    /// Give up the handshake after this long.
    pub connect_timeout: Duration,
    /// Send buffer bound, packets; the oldest is dropped when full.
    pub send_buffer_packets: usize,
    /// Our socket id; `None` picks a random one.
    pub socket_id: Option<u32>,
    /// Initial sequence number; `None` picks a random one.
    pub initial_seq: Option<u32>,
    /// Encrypt with this passphrase and key length.
    pub crypto: Option<CryptoConfig>,
    /// Receive instead of send (request mode).
    pub receive: bool,
}

impl CallerConfig {
    /// Defaults (latency 120 ms, payload 1316, idle 5 s, connect 3 s) for `peer`.
    pub fn new(peer: SocketAddr) -> Self {
        CallerConfig {
            peer,
            stream_id: None,
            latency: Duration::from_millis(120),
            payload_size: 1316,
            peer_idle_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(3),
            send_buffer_packets: 8192,
            socket_id: None,
            initial_seq: None,
            crypto: None,
            receive: false,
        }
    }
}

/// What happened on the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallerEvent {
    /// The handshake completed; `send` works now.
    Connected,
    /// The connection ended (not emitted after a local `shutdown`).
    Closed(CloseReason),
}

/// Where the caller is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallerState {
    /// Sending induction requests.
    Inducing,
    /// Sending conclusion requests.
    Concluding,
    /// Connected; data flows.
    Connected,
    /// Finished.
    Closed,
}

/// Errors from [`Caller::send`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// The handshake has not completed, or the connection is closed.
    NotConnected,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::NotConnected => f.write_str("SRT caller not connected"),
        }
    }
}

impl std::error::Error for SendError {}

/// The SRT caller. See the module docs.
#[derive(Debug)]
pub struct Caller {
    config: CallerConfig,
    socket_id: u32,
    initial_seq: SeqNumber,
    start: Instant,
    state: CallerState,
    cookie: u32,
    hs_next: Instant,
    connect_deadline: Instant,
    sender: Option<Box<Sender>>,
    receiver: Option<Box<Receiver>>,
    /// Payloads received (request mode), until polled.
    received: VecDeque<Bytes>,
    /// Request mode with a passphrase: the keys to decrypt with.
    rx_crypto: Option<Box<RxCrypto>>,
    scratch: Vec<u8>,
    peer_latency: Duration,
    out: OutQueue,
    events: VecDeque<CallerEvent>,
    /// Our keys until the sender takes them.
    crypto: Option<Box<TxCrypto>>,
}

impl Caller {
    /// Creates a caller and queues the first induction request.
    pub fn new(config: CallerConfig, now: Instant) -> Self {
        let rs = RandomState::new();
        let socket_id = config
            .socket_id
            .unwrap_or_else(|| (rs.hash_one(config.peer) as u32 & 0x3FFF_FFFF).max(1));
        let initial_seq = SeqNumber::new(
            config
                .initial_seq
                .unwrap_or_else(|| rs.hash_one((socket_id, 7u8)) as u32),
        );
        let mut c = Caller {
            socket_id,
            initial_seq,
            start: now,
            state: CallerState::Inducing,
            cookie: 0,
            hs_next: now,
            connect_deadline: add_or_same(now, config.connect_timeout),
            sender: None,
            receiver: None,
            received: VecDeque::new(),
            rx_crypto: None,
            scratch: Vec::new(),
            peer_latency: config.latency,
            out: OutQueue::default(),
            events: VecDeque::new(),
            crypto: None,
            config,
        };
        if let Some(cfg) = c.config.crypto.clone() {
            match TxCrypto::new(cfg) {
                Some(tx) => c.crypto = Some(Box::new(tx)),
                None => {
                    // No randomness for a key: never send in the clear.
                    c.close(CloseReason::KeyMaterial(KM_STATE_UNSECURED));
                    return c;
                }
            }
        }
        c.send_handshake(now);
        c
    }

    /// Our SRT socket id.
    pub fn socket_id(&self) -> u32 {
        self.socket_id
    }

    /// Current state.
    pub fn state(&self) -> CallerState {
        self.state
    }

    /// True once connected (and not closed).
    pub fn is_connected(&self) -> bool {
        self.state == CallerState::Connected
    }

    /// Latency agreed with the peer (its receiver latency), once connected.
    pub fn peer_latency(&self) -> Duration {
        self.peer_latency
    }

    /// Send counters.
    pub fn stats(&self) -> SenderStats {
        self.sender.as_ref().map(|s| s.stats()).unwrap_or_default()
    }

    fn latency_ms(&self) -> u16 {
        self.config.latency.as_millis().min(65535) as u16
    }

    fn send_handshake(&mut self, now: Instant) {
        let mut hs = match self.state {
            CallerState::Inducing => {
                let mut hs = Handshake::empty(HandshakeType::Induction);
                hs.version = 4;
                hs.extension = 2; // UDT_DGRAM, as libsrt
                hs
            }
            CallerState::Concluding => {
                let mut hs = Handshake::empty(HandshakeType::Conclusion);
                hs.version = 5;
                hs.extension = HS_EXT_HSREQ;
                hs.cookie = self.cookie;
                hs.hsreq = Some(SrtHandshakeExt {
                    version: SRT_VERSION,
                    flags: SrtFlags::LIVE,
                    recv_tsbpd_delay_ms: self.latency_ms(),
                    send_tsbpd_delay_ms: self.latency_ms(),
                });
                if let Some(sid) = &self.config.stream_id {
                    hs.extension |= HS_EXT_CONFIG;
                    hs.stream_id = Some(sid.clone());
                }
                if let Some(tx) = &self.crypto {
                    hs.extension |= HS_EXT_KMREQ;
                    hs.encryption = (tx.key_len() / 8) as u16;
                    hs.kmreq = Some(tx.handshake_km());
                }
                hs
            }
            _ => return,
        };
        hs.initial_seq = self.initial_seq;
        hs.mtu = DEFAULT_MTU;
        hs.flow_window = DEFAULT_FLOW_WINDOW;
        hs.socket_id = self.socket_id;
        hs.peer_ip = encode_peer_ip(self.config.peer);
        let ts = timestamp_us(self.start, now);
        self.out
            .push_with(self.config.peer, |b| hs.write_packet(b, ts, 0));
        self.hs_next = add_or_same(now, HANDSHAKE_INTERVAL);
    }

    fn close(&mut self, reason: CloseReason) {
        if self.state != CallerState::Closed {
            self.state = CallerState::Closed;
            self.events.push_back(CallerEvent::Closed(reason));
        }
    }

    /// Feeds one received datagram.
    pub fn handle_datagram(&mut self, from: SocketAddr, datagram: &[u8], now: Instant) {
        if from != self.config.peer || self.state == CallerState::Closed {
            return;
        }
        let c = match Packet::parse(datagram) {
            Ok(Packet::Control(c)) => c,
            Ok(Packet::Data(d)) => {
                let (CallerState::Connected, Some(rx)) = (self.state, self.receiver.as_mut())
                else {
                    return;
                };
                if d.header.dest_socket != self.socket_id {
                    return;
                }
                let Some(payload) = plain_payload(
                    d.header.key,
                    d.header.seq.value(),
                    d.payload,
                    self.rx_crypto.as_deref_mut(),
                    &mut self.scratch,
                ) else {
                    return;
                };
                rx.touch(now);
                rx.on_data(&d.header, payload, now, &mut self.out);
                let received = &mut self.received;
                rx.deliver(now, |p| received.push_back(p));
                return;
            }
            Err(_) => return,
        };
        if c.dest_socket != self.socket_id {
            return;
        }
        match self.state {
            CallerState::Inducing | CallerState::Concluding => {
                let ControlBody::Handshake(hs) = c.body else {
                    return;
                };
                self.on_handshake(&hs, c.timestamp, now);
            }
            CallerState::Connected if self.receiver.is_some() => {
                let Some(rx) = self.receiver.as_mut() else {
                    return;
                };
                rx.touch(now);
                match c.body {
                    ControlBody::AckAck(n) => rx.on_ackack(n, c.timestamp, now),
                    ControlBody::DropReq { first, last, .. } => rx.on_dropreq(first, last),
                    ControlBody::Shutdown => {
                        let received = &mut self.received;
                        rx.flush(|p| received.push_back(p));
                        self.close(CloseReason::PeerShutdown);
                    }
                    ControlBody::PeerError(code) => self.close(CloseReason::PeerError(code)),
                    ControlBody::KeyMaterial { request: true, km } => {
                        // The sender's key refresh: take it, echo it.
                        let answer = match self.rx_crypto.as_mut().map(|k| k.handle_km(km)) {
                            Some(Ok(())) => km.to_vec(),
                            Some(Err(_)) => km_state_response(KM_STATE_BADSECRET),
                            None => km_state_response(KM_STATE_NOSECRET),
                        };
                        let ts = timestamp_us(self.start, now);
                        let dest = rx.peer_socket();
                        self.out.push_with(self.config.peer, |b| {
                            write_km_packet(b, false, &answer, ts, dest)
                        });
                    }
                    _ => {}
                }
            }
            CallerState::Connected => {
                let Some(sender) = self.sender.as_mut() else {
                    return;
                };
                sender.touch(now);
                match c.body {
                    ControlBody::Ack(ack) => sender.on_ack(&ack, now, &mut self.out),
                    ControlBody::Nak(list) => sender.on_nak(list, now, &mut self.out),
                    ControlBody::Shutdown => self.close(CloseReason::PeerShutdown),
                    ControlBody::PeerError(code) => self.close(CloseReason::PeerError(code)),
                    ControlBody::KeyMaterial { request: false, km } => sender.on_km_response(km),
                    _ => {}
                }
            }
            CallerState::Closed => {}
        }
    }

    fn on_handshake(&mut self, hs: &Handshake, ts: u32, now: Instant) {
        match (self.state, hs.hs_type) {
            (_, HandshakeType::Rejection(reason)) => {
                self.close(CloseReason::Rejected(reason));
            }
            (CallerState::Inducing, HandshakeType::Induction) => {
                if hs.version < 5 || hs.extension != SRT_MAGIC_CODE {
                    self.close(CloseReason::Rejected(RejectReason::Version));
                    return;
                }
                self.cookie = hs.cookie;
                self.state = CallerState::Concluding;
                self.send_handshake(now);
            }
            (CallerState::Concluding, HandshakeType::Conclusion) => {
                let Some(rsp) = hs.hsrsp else {
                    self.close(CloseReason::Rejected(RejectReason::Version));
                    return;
                };
                match (&self.crypto, &hs.kmrsp) {
                    (Some(tx), Some(rsp)) => {
                        if let Err(state) = tx.check_handshake_response(rsp) {
                            self.close(CloseReason::KeyMaterial(state));
                            return;
                        }
                    }
                    (Some(_), None) | (None, Some(_)) => {
                        // Encryption on one side only.
                        self.close(CloseReason::Rejected(RejectReason::Unsecure));
                        return;
                    }
                    (None, None) => {}
                }
                self.peer_latency = Duration::from_millis(u64::from(rsp.recv_tsbpd_delay_ms))
                    .max(self.config.latency);
                let link = Link {
                    peer: self.config.peer,
                    peer_socket: hs.socket_id,
                    start: self.start,
                };
                if self.config.receive {
                    if let (Some(cfg), Some(tx)) = (&self.config.crypto, &self.crypto) {
                        match RxCrypto::from_km(&cfg.passphrase, &tx.handshake_km()) {
                            Ok(keys) => self.rx_crypto = Some(Box::new(keys)),
                            Err(_) => {
                                self.close(CloseReason::KeyMaterial(KM_STATE_BADSECRET));
                                return;
                            }
                        }
                    }
                    let latency = Duration::from_millis(u64::from(rsp.send_tsbpd_delay_ms))
                        .max(self.config.latency);
                    let params = ReceiverParams {
                        initial_seq: self.initial_seq,
                        base: now,
                        base_ts: ts,
                        latency,
                        tsbpd: rsp.flags.has(SrtFlags::TSBPDSND),
                        capacity: self.config.send_buffer_packets,
                        idle_timeout: self.config.peer_idle_timeout,
                    };
                    self.receiver = Some(Box::new(Receiver::new(link, params, now)));
                    self.state = CallerState::Connected;
                    self.events.push_back(CallerEvent::Connected);
                    return;
                }
                self.sender = Some(Box::new(Sender::new(
                    link,
                    self.initial_seq,
                    self.peer_latency,
                    self.config.send_buffer_packets,
                    self.config.peer_idle_timeout,
                    self.crypto.take(),
                    now,
                )));
                self.state = CallerState::Connected;
                self.events.push_back(CallerEvent::Connected);
            }
            _ => {}
        }
    }

    /// Queues `payload` for sending, split into packets of at most
    /// `payload_size` bytes (keep it a multiple of 188 for TS).
    pub fn send(&mut self, payload: &[u8], now: Instant) -> Result<(), SendError> {
        let Some(sender) = self
            .sender
            .as_mut()
            .filter(|_| self.state == CallerState::Connected)
        else {
            return Err(SendError::NotConnected);
        };
        let size = self.config.payload_size.clamp(1, MAX_PAYLOAD_LEN);
        for chunk in payload.chunks(size) {
            sender.push(chunk, now, &mut self.out);
        }
        Ok(())
    }

    /// Sends SHUTDOWN (when connected) and closes; no `Closed` event follows.
    pub fn shutdown(&mut self, now: Instant) {
        if self.state == CallerState::Connected {
            let ts = timestamp_us(self.start, now);
            let dest = self.peer_socket();
            self.out.push_with(self.config.peer, |b| {
                write_simple_control(b, ControlType::Shutdown, 0, ts, dest)
            });
        }
        self.state = CallerState::Closed;
    }

    fn peer_socket(&self) -> u32 {
        match (&self.sender, &self.receiver) {
            (Some(s), _) => s.peer_socket(),
            (None, Some(r)) => r.peer_socket(),
            (None, None) => 0,
        }
    }

    /// The next payload received (request mode), in order.
    pub fn poll_data(&mut self) -> Option<Bytes> {
        self.received.pop_front()
    }

    /// Runs timers: handshake retransmission, connect timeout, too-late
    /// drop, keepalive, idle timeout.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            CallerState::Inducing | CallerState::Concluding => {
                if now >= self.connect_deadline {
                    self.close(CloseReason::ConnectTimeout);
                } else if now >= self.hs_next {
                    self.send_handshake(now);
                }
            }
            CallerState::Connected => {
                if let Some(s) = self.sender.as_mut() {
                    if let Some(reason) = s.on_timeout(now, &mut self.out) {
                        self.close(reason);
                    }
                }
                if let Some(rx) = self.receiver.as_mut() {
                    let received = &mut self.received;
                    rx.deliver(now, |p| received.push_back(p));
                    if let Some(reason) = rx.on_timeout(now, &mut self.out) {
                        self.close(reason);
                    }
                }
            }
            CallerState::Closed => {}
        }
    }

    /// Writes the next datagram into `buf`; returns where to send it.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<SocketAddr> {
        match (self.state, self.sender.as_mut()) {
            (CallerState::Connected, Some(s)) => s.poll_transmit(now, buf, &mut self.out),
            _ => self.out.pop_into(buf),
        }
    }

    /// Next event, if any.
    pub fn poll_event(&mut self) -> Option<CallerEvent> {
        self.events.pop_front()
    }

    /// When `handle_timeout` must be called next (`None` once closed).
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            CallerState::Inducing | CallerState::Concluding => {
                Some(self.hs_next.min(self.connect_deadline))
            }
            CallerState::Connected => match (&self.sender, &self.receiver) {
                (Some(s), _) => Some(s.poll_timeout()),
                (None, Some(r)) => r.poll_timeout(),
                (None, None) => None,
            },
            CallerState::Closed => None,
        }
    }

    /// True when `poll_transmit` would return something now.
    pub fn has_transmit(&self) -> bool {
        !self.out.is_empty()
            || (self.state == CallerState::Connected
                && self.sender.as_ref().is_some_and(|s| s.has_pending()))
    }
}
