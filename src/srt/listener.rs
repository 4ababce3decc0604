//! SRT listener (ingest side): many caller connections multiplexed on one UDP
//! socket, sans-IO.
//!
//! Handshake: HSv4/v5 induction is answered statelessly with a SYN cookie
//! (keyed hash of the peer address and a one-minute time bucket); a v5
//! conclusion carrying HSREQ (and optionally a stream id) creates a pending
//! connection and the event [`ListenerEvent::ConnectionRequest`]. kiln
//! answers with [`Listener::accept`] (HSRSP is sent, the connection is live)
//! or [`Listener::reject`] (a rejection handshake, `1000 + reason`, is sent).
//! Callers asking for encryption are rejected with `SRT_REJ_UNSECURE`
//! without bothering kiln. Connected sockets are receive-only (live mode):
//! see `receiver.rs` for ACK/NAK/TSBPD.
//!
//! Time is `std::time::Instant`, always passed in. Drive it like quinn:
//! feed [`Listener::handle_datagram`] and [`Listener::handle_timeout`], then
//! drain [`Listener::poll_transmit`] and [`Listener::poll_event`], and sleep
//! until [`Listener::poll_timeout`]. Encryption (`ListenerConfig::crypto`):
//! the caller's KMREQ is checked in the conclusion (wrong passphrase:
//! BADSECRET; encryption on one side only: UNSECURE), payloads are
//! decrypted on arrival, and key refreshes (UMSG_EXT KMREQ) are answered.
//! Not included: rendezvous, sending data to callers, stream (file) mode.

use std::collections::hash_map::{DefaultHasher, RandomState};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::common::{add_or_same, earliest, timestamp_us, OutQueue};
use super::crypto::{
    km_state_response, plain_payload, CryptoConfig, KmError, RxCrypto, KM_STATE_BADSECRET,
    KM_STATE_NOSECRET,
};
use super::packet::{
    encode_peer_ip, write_km_packet, ControlBody, ControlPacket, Handshake, HandshakeType, Packet,
    RejectReason, SeqNumber, SrtFlags, SrtHandshakeExt, DEFAULT_FLOW_WINDOW, DEFAULT_MTU,
    HS_EXT_HSREQ, HS_EXT_KMREQ, SRT_MAGIC_CODE, SRT_VERSION,
};
use super::receiver::{CloseReason, Link, Receiver, ReceiverParams, ReceiverStats};
use super::sender::Sender;

/// Identifies one connection of a [`Listener`] (our SRT socket id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId(pub u32);

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "srt#{:08x}", self.0)
    }
}

/// Listener settings.
#[derive(Clone, Debug)]
pub struct ListenerConfig {
    /// Our receiver latency (the larger of this and the caller's proposal wins).
    pub latency: Duration,
    /// Close a connection after this long without hearing from the peer.
    pub peer_idle_timeout: Duration,
    /// Most pending plus connected connections, server-wide.
    pub max_connections: usize,
    /// Most pending plus connected connections from one IP address, so one
    /// source cannot take every slot (DECISIONS section 15).
    pub max_per_address: usize,
    /// Receive buffer size per connection, in packets.
    pub receive_buffer_packets: usize,
    /// Secret for SYN cookies and socket ids; `None` picks a random one.
    pub secret: Option<u64>,
    /// Passphrase and key length: callers must encrypt with it (libsrt's
    /// enforced encryption); `None`: callers must not encrypt.
    pub crypto: Option<CryptoConfig>,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        ListenerConfig {
            latency: Duration::from_millis(120),
            peer_idle_timeout: Duration::from_secs(5),
            max_connections: 1024,
            max_per_address: 16,
            crypto: None,
            receive_buffer_packets: 8192,
            secret: None,
        }
    }
}

/// The detail of a [`ListenerEvent::Refused`] for a caller over the
/// per-address cap ([`ListenerConfig::max_per_address`]).
pub const OVER_ADDRESS_CAP: &str = "the cap on SRT sockets from one address (<Bind><Providers><SRT><MaxConnectionsPerAddress>) is reached";

/// What happened on the listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenerEvent {
    /// A caller completed the handshake; answer with `accept` or `reject`.
    ConnectionRequest {
        /// The pending connection.
        conn: ConnectionId,
        /// The caller's address.
        peer: SocketAddr,
        /// The SID extension, if any.
        stream_id: Option<String>,
    },
    /// One payload (usually 7 TS packets, 1316 bytes), in order, at its play time.
    Data {
        /// The connection.
        conn: ConnectionId,
        /// The payload.
        payload: Bytes,
    },
    /// A caller was refused during the handshake for its encryption (a
    /// wrong or missing passphrase), before any `ConnectionRequest`.
    Refused {
        /// The caller's address.
        peer: SocketAddr,
        /// The SID extension, if any.
        stream_id: Option<String>,
        /// What it was told (libsrt's BADSECRET or UNSECURE).
        reason: RejectReason,
        /// Why, for the log.
        detail: &'static str,
    },
    /// The caller switched to new keys it announced (a key refresh).
    KeysRefreshed {
        /// The connection.
        conn: ConnectionId,
    },
    /// The connection is gone (not emitted after `reject` or `close`).
    Closed {
        /// The connection.
        conn: ConnectionId,
        /// Why.
        reason: CloseReason,
    },
}

/// Errors from `accept`, `reject` and `close`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenerError {
    /// No such connection.
    UnknownConnection,
    /// The connection was already accepted.
    AlreadyAccepted,
    /// The caller encrypts; kiln cannot send to an encrypted caller yet.
    Encrypted,
}

impl fmt::Display for ListenerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenerError::UnknownConnection => f.write_str("unknown SRT connection"),
            ListenerError::AlreadyAccepted => f.write_str("SRT connection already accepted"),
            ListenerError::Encrypted => {
                f.write_str("an encrypted caller cannot be sent to (request mode) yet")
            }
        }
    }
}

impl std::error::Error for ListenerError {}

/// Listener-wide counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListenerStats {
    /// Datagrams that did not parse.
    pub malformed: u64,
    /// Packets for unknown sockets or from the wrong address.
    pub unroutable: u64,
    /// Conclusions with a bad cookie.
    pub bad_cookies: u64,
    /// Handshakes rejected (by kiln or by protocol checks).
    pub rejected: u64,
    /// Conclusions refused because the server-wide or per-address
    /// connection limit was reached.
    pub refused_over_limit: u64,
}

#[derive(Debug)]
struct Pending {
    initial_seq: SeqNumber,
    mtu: u32,
    cookie: u32,
    hsreq: SrtHandshakeExt,
    base: Instant,
    base_ts: u32,
    created: Instant,
    /// Keys from the caller's KMREQ, and the KMRSP to answer with.
    crypto: Option<(Box<RxCrypto>, Vec<u8>)>,
}

#[derive(Debug)]
enum State {
    Pending(Pending),
    Connected {
        rx: Box<Receiver>,
        /// The conclusion response, resent when the caller repeats its conclusion.
        response: Vec<u8>,
        /// The caller's keys, when it encrypts.
        crypto: Option<Box<RxCrypto>>,
    },
    /// Accepted to receive what kiln sends (the caller asked to play).
    Sending {
        tx: Box<Sender>,
        response: Vec<u8>,
    },
}

#[derive(Debug)]
struct Conn {
    peer: SocketAddr,
    peer_socket: u32,
    stream_id: Option<String>,
    start: Instant,
    state: State,
}

/// How long a rejection is remembered to answer repeated conclusions.
const REJECT_MEMORY: Duration = Duration::from_secs(3);
/// How long kiln may take to answer a ConnectionRequest.
const PENDING_TIMEOUT: Duration = Duration::from_secs(5);

/// The SRT listener. See the module docs.
#[derive(Debug)]
pub struct Listener {
    config: ListenerConfig,
    secret: u64,
    epoch: Instant,
    conns: HashMap<u32, Conn>,
    by_peer: HashMap<(SocketAddr, u32), u32>,
    /// Pending plus connected connections per peer IP address.
    per_address: HashMap<std::net::IpAddr, usize>,
    /// A payload being decrypted.
    scratch: Vec<u8>,
    rejected: HashMap<(SocketAddr, u32), (RejectReason, Instant)>,
    /// Connections in the Sending state.
    senders: usize,
    out: OutQueue,
    events: VecDeque<ListenerEvent>,
    next_id: u64,
    stats: ListenerStats,
}

impl Listener {
    /// Creates a listener; `now` anchors cookie time buckets.
    pub fn new(config: ListenerConfig, now: Instant) -> Self {
        let secret = config
            .secret
            .unwrap_or_else(|| RandomState::new().hash_one(0x5e_c2e7_u64));
        Listener {
            config,
            secret,
            epoch: now,
            conns: HashMap::new(),
            by_peer: HashMap::new(),
            per_address: HashMap::new(),
            scratch: Vec::with_capacity(1500),
            rejected: HashMap::new(),
            senders: 0,
            out: OutQueue::default(),
            events: VecDeque::new(),
            next_id: 0,
            stats: ListenerStats::default(),
        }
    }

    fn cookie(&self, peer: SocketAddr, bucket: u64) -> u32 {
        let mut h = DefaultHasher::new();
        self.secret.hash(&mut h);
        peer.hash(&mut h);
        bucket.hash(&mut h);
        h.finish() as u32
    }

    fn bucket(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.epoch).as_secs() / 60
    }

    fn new_socket_id(&mut self) -> u32 {
        loop {
            self.next_id += 1;
            let mut h = DefaultHasher::new();
            (self.secret, self.next_id, 0x50c_u32).hash(&mut h);
            let id = (h.finish() as u32) & 0x3FFF_FFFF;
            if id != 0 && !self.conns.contains_key(&id) {
                return id;
            }
        }
    }

    /// Feeds one received datagram.
    pub fn handle_datagram(&mut self, from: SocketAddr, datagram: &[u8], now: Instant) {
        let packet = match Packet::parse(datagram) {
            Ok(p) => p,
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        let dest = match &packet {
            Packet::Data(d) => d.header.dest_socket,
            Packet::Control(c) => c.dest_socket,
        };
        if dest == 0 {
            if let Packet::Control(ControlPacket {
                body: ControlBody::Handshake(hs),
                timestamp,
                ..
            }) = packet
            {
                self.on_handshake(from, &hs, timestamp, now);
            } else {
                self.stats.unroutable += 1;
            }
            return;
        }
        let Some(conn) = self.conns.get_mut(&dest) else {
            self.stats.unroutable += 1;
            return;
        };
        if conn.peer != from {
            self.stats.unroutable += 1;
            return;
        }
        let id = ConnectionId(dest);
        if let State::Sending { tx, response } = &mut conn.state {
            tx.touch(now);
            if let Packet::Control(c) = packet {
                match c.body {
                    ControlBody::Ack(ack) => tx.on_ack(&ack, now, &mut self.out),
                    ControlBody::Nak(list) => tx.on_nak(list, now, &mut self.out),
                    ControlBody::Shutdown => self.close_with(dest, CloseReason::PeerShutdown),
                    ControlBody::Handshake(hs) if hs.hs_type == HandshakeType::Conclusion => {
                        let r = response.clone();
                        self.out.push_with(from, |b| b.extend_from_slice(&r));
                    }
                    _ => {}
                }
            }
            return;
        }
        let State::Connected {
            rx,
            response,
            crypto,
        } = &mut conn.state
        else {
            return;
        };
        rx.touch(now);
        match packet {
            Packet::Data(d) => {
                let Some(payload) = plain_payload(
                    d.header.key,
                    d.header.seq.value(),
                    d.payload,
                    crypto.as_deref_mut(),
                    &mut self.scratch,
                ) else {
                    return;
                };
                rx.on_data(&d.header, payload, now, &mut self.out);
                let events = &mut self.events;
                rx.deliver(now, |payload| {
                    events.push_back(ListenerEvent::Data { conn: id, payload })
                });
            }
            Packet::Control(c) => match c.body {
                ControlBody::AckAck(n) => rx.on_ackack(n, c.timestamp, now),
                ControlBody::DropReq { first, last, .. } => rx.on_dropreq(first, last),
                ControlBody::Shutdown => {
                    let events = &mut self.events;
                    rx.flush(|payload| events.push_back(ListenerEvent::Data { conn: id, payload }));
                    self.close_with(dest, CloseReason::PeerShutdown)
                }
                ControlBody::Handshake(hs) if hs.hs_type == HandshakeType::Conclusion => {
                    let r = response.clone();
                    self.out.push_with(from, |b| b.extend_from_slice(&r));
                }
                ControlBody::KeyMaterial { request: true, km } => {
                    // A key refresh: take the keys, answer with the same
                    // message (or the state that says why not).
                    let answer = match crypto.as_mut().map(|keys| keys.handle_km(km)) {
                        Some(Ok(())) => {
                            self.events
                                .push_back(ListenerEvent::KeysRefreshed { conn: id });
                            km.to_vec()
                        }
                        Some(Err(_)) => km_state_response(KM_STATE_BADSECRET),
                        None => km_state_response(KM_STATE_NOSECRET),
                    };
                    let ts = timestamp_us(conn.start, now);
                    let dest = conn.peer_socket;
                    self.out
                        .push_with(from, |b| write_km_packet(b, false, &answer, ts, dest));
                }
                _ => {}
            },
        }
    }

    /// Removes a connection from every table.
    fn remove_conn(&mut self, id: u32) -> Option<Conn> {
        let c = self.conns.remove(&id)?;
        if let State::Sending { .. } = c.state {
            self.senders -= 1;
        }
        self.by_peer.remove(&(c.peer, c.peer_socket));
        let ip = c.peer.ip();
        if let Some(n) = self.per_address.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_address.remove(&ip);
            }
        }
        Some(c)
    }

    fn close_with(&mut self, id: u32, reason: CloseReason) {
        if self.remove_conn(id).is_some() {
            self.events.push_back(ListenerEvent::Closed {
                conn: ConnectionId(id),
                reason,
            });
        }
    }

    /// Rejects a conclusion for its encryption and says so in an event.
    fn refuse(
        &mut self,
        from: SocketAddr,
        hs: &Handshake,
        reason: RejectReason,
        detail: &'static str,
        now: Instant,
    ) {
        self.send_rejection(from, hs.socket_id, hs, reason, now);
        self.events.push_back(ListenerEvent::Refused {
            peer: from,
            stream_id: hs.stream_id.clone(),
            reason,
            detail,
        });
    }

    fn send_rejection(
        &mut self,
        to: SocketAddr,
        peer_socket: u32,
        hs: &Handshake,
        reason: RejectReason,
        now: Instant,
    ) {
        self.stats.rejected += 1;
        let mut r = Handshake::empty(HandshakeType::Rejection(reason));
        r.initial_seq = hs.initial_seq;
        r.mtu = hs.mtu;
        r.cookie = hs.cookie;
        r.peer_ip = encode_peer_ip(to);
        let ts = timestamp_us(self.epoch, now);
        self.out
            .push_with(to, |b| r.write_packet(b, ts, peer_socket));
        if self.rejected.len() < self.config.max_connections.max(16) * 4 {
            self.rejected
                .insert((to, peer_socket), (reason, add_or_same(now, REJECT_MEMORY)));
        }
    }

    fn on_handshake(&mut self, from: SocketAddr, hs: &Handshake, ts: u32, now: Instant) {
        match hs.hs_type {
            HandshakeType::Induction => {
                let mut r = Handshake::empty(HandshakeType::Induction);
                r.version = 5;
                r.encryption = 0;
                r.extension = SRT_MAGIC_CODE;
                r.initial_seq = hs.initial_seq;
                r.mtu = hs.mtu;
                r.flow_window = DEFAULT_FLOW_WINDOW;
                r.socket_id = hs.socket_id;
                r.cookie = self.cookie(from, self.bucket(now));
                r.peer_ip = encode_peer_ip(from);
                let ts = timestamp_us(self.epoch, now);
                let dest = hs.socket_id;
                self.out.push_with(from, |b| r.write_packet(b, ts, dest));
            }
            HandshakeType::Conclusion => self.on_conclusion(from, hs, ts, now),
            _ => {}
        }
    }

    fn on_conclusion(&mut self, from: SocketAddr, hs: &Handshake, ts: u32, now: Instant) {
        let key = (from, hs.socket_id);
        if let Some(id) = self.by_peer.get(&key) {
            if let Some(Conn {
                state: State::Connected { response, .. } | State::Sending { response, .. },
                ..
            }) = self.conns.get(id)
            {
                let r = response.clone();
                self.out.push_with(from, |b| b.extend_from_slice(&r));
            }
            return;
        }
        if let Some((reason, _)) = self.rejected.get(&key).copied() {
            self.send_rejection(from, hs.socket_id, hs, reason, now);
            return;
        }
        let bucket = self.bucket(now);
        let valid = hs.cookie == self.cookie(from, bucket)
            || (bucket > 0 && hs.cookie == self.cookie(from, bucket - 1));
        if !valid {
            self.stats.bad_cookies += 1;
            return;
        }
        let Some(hsreq) = hs.hsreq.filter(|_| hs.version >= 5) else {
            self.send_rejection(from, hs.socket_id, hs, RejectReason::Version, now);
            return;
        };
        let crypto = match (&self.config.crypto, &hs.kmreq) {
            (Some(cfg), Some(km)) => match RxCrypto::from_km(&cfg.passphrase, km) {
                Ok(rx) => Some((Box::new(rx), km.clone())),
                Err(e) => {
                    let detail = match e {
                        KmError::BadSecret => "wrong passphrase",
                        KmError::Malformed(_) => "malformed keying material",
                    };
                    self.refuse(from, hs, RejectReason::BadSecret, detail, now);
                    return;
                }
            },
            (Some(_), None) => {
                self.refuse(
                    from,
                    hs,
                    RejectReason::Unsecure,
                    "a passphrase is required and the caller sent none",
                    now,
                );
                return;
            }
            (None, _) if hs.kmreq.is_some() || hs.extension & HS_EXT_KMREQ != 0 => {
                self.refuse(
                    from,
                    hs,
                    RejectReason::Unsecure,
                    "the caller encrypts and no passphrase is set here",
                    now,
                );
                return;
            }
            (None, _) => None,
        };
        if hsreq.flags.has(SrtFlags::STREAM) {
            self.send_rejection(from, hs.socket_id, hs, RejectReason::MessageApi, now);
            return;
        }
        let from_address = self.per_address.get(&from.ip()).copied().unwrap_or(0);
        if self.conns.len() >= self.config.max_connections
            || from_address >= self.config.max_per_address
        {
            self.stats.refused_over_limit += 1;
            self.send_rejection(from, hs.socket_id, hs, RejectReason::Backlog, now);
            let detail = if from_address >= self.config.max_per_address {
                OVER_ADDRESS_CAP
            } else {
                "every SRT socket of the listener is taken"
            };
            self.events.push_back(ListenerEvent::Refused {
                peer: from,
                stream_id: hs.stream_id.clone(),
                reason: RejectReason::Backlog,
                detail,
            });
            return;
        }
        let id = self.new_socket_id();
        self.conns.insert(
            id,
            Conn {
                peer: from,
                peer_socket: hs.socket_id,
                stream_id: hs.stream_id.clone(),
                start: now,
                state: State::Pending(Pending {
                    initial_seq: hs.initial_seq,
                    mtu: hs.mtu.clamp(576, DEFAULT_MTU),
                    cookie: hs.cookie,
                    hsreq,
                    base: now,
                    base_ts: ts,
                    created: now,
                    crypto,
                }),
            },
        );
        self.by_peer.insert(key, id);
        *self.per_address.entry(from.ip()).or_default() += 1;
        self.events.push_back(ListenerEvent::ConnectionRequest {
            conn: ConnectionId(id),
            peer: from,
            stream_id: hs.stream_id.clone(),
        });
    }

    /// Accepts a pending connection: sends the conclusion response (HSRSP).
    pub fn accept(&mut self, conn: ConnectionId, now: Instant) -> Result<(), ListenerError> {
        self.accept_as(conn, false, now)
    }

    /// Accepts a pending connection to send to it (SRT's request mode:
    /// the caller plays): [`send`](Self::send) queues its payloads. An
    /// encrypted caller cannot be served this way yet
    /// ([`ListenerError::Encrypted`]).
    pub fn accept_sender(&mut self, conn: ConnectionId, now: Instant) -> Result<(), ListenerError> {
        self.accept_as(conn, true, now)
    }

    fn accept_as(
        &mut self,
        conn: ConnectionId,
        sending: bool,
        now: Instant,
    ) -> Result<(), ListenerError> {
        let latency = self.config.latency;
        let capacity = self.config.receive_buffer_packets.clamp(32, 1 << 16);
        let idle_timeout = self.config.peer_idle_timeout;
        let c = self
            .conns
            .get_mut(&conn.0)
            .ok_or(ListenerError::UnknownConnection)?;
        let State::Pending(p) = &mut c.state else {
            return Err(ListenerError::AlreadyAccepted);
        };
        if sending && p.crypto.is_some() {
            return Err(ListenerError::Encrypted);
        }
        let crypto = p.crypto.take();
        let rcv_latency_ms =
            (latency.as_millis().min(65535) as u16).max(p.hsreq.send_tsbpd_delay_ms);
        let snd_latency_ms =
            (latency.as_millis().min(65535) as u16).max(p.hsreq.recv_tsbpd_delay_ms);
        let mut r = Handshake::empty(HandshakeType::Conclusion);
        r.version = 5;
        r.extension = HS_EXT_HSREQ;
        r.initial_seq = p.initial_seq;
        r.mtu = p.mtu;
        r.flow_window = DEFAULT_FLOW_WINDOW;
        r.socket_id = conn.0;
        r.cookie = p.cookie;
        r.peer_ip = encode_peer_ip(c.peer);
        r.hsrsp = Some(SrtHandshakeExt {
            version: SRT_VERSION,
            flags: SrtFlags::LIVE,
            recv_tsbpd_delay_ms: rcv_latency_ms,
            send_tsbpd_delay_ms: snd_latency_ms,
        });
        if let Some((_, km)) = &crypto {
            // KMRSP: the keying material echoed (libsrt's bidirectional
            // security association), and our key length advertised.
            r.extension |= HS_EXT_KMREQ;
            r.kmrsp = Some(km.clone());
            r.encryption = self
                .config
                .crypto
                .as_ref()
                .map_or(0, |c| (c.key_len / 8) as u16);
        }
        let mut response = Vec::with_capacity(160);
        r.write_packet(&mut response, timestamp_us(c.start, now), c.peer_socket);
        let params = ReceiverParams {
            initial_seq: p.initial_seq,
            base: p.base,
            base_ts: p.base_ts,
            latency: Duration::from_millis(u64::from(rcv_latency_ms)),
            tsbpd: p.hsreq.flags.has(SrtFlags::TSBPDSND),
            capacity,
            idle_timeout,
        };
        let link = Link {
            peer: c.peer,
            peer_socket: c.peer_socket,
            start: c.start,
        };
        self.out
            .push_with(c.peer, |b| b.extend_from_slice(&response));
        if sending {
            let tx = Sender::new(
                link,
                p.initial_seq,
                Duration::from_millis(u64::from(snd_latency_ms)),
                capacity,
                idle_timeout,
                None,
                now,
            );
            c.state = State::Sending {
                tx: Box::new(tx),
                response,
            };
            self.senders += 1;
            return Ok(());
        }
        let rx = Box::new(Receiver::new(link, params, now));
        c.state = State::Connected {
            rx,
            response,
            crypto: crypto.map(|(rx, _)| rx),
        };
        Ok(())
    }

    /// Queues `payload` (at most 1316 bytes: 7 TS packets) for a
    /// connection accepted with [`accept_sender`](Self::accept_sender).
    /// False when it is not one (gone, or receiving).
    pub fn send(&mut self, conn: ConnectionId, payload: &[u8], now: Instant) -> bool {
        match self.conns.get_mut(&conn.0).map(|c| &mut c.state) {
            Some(State::Sending { tx, .. }) => {
                tx.push(payload, now, &mut self.out);
                true
            }
            _ => false,
        }
    }

    /// Payloads queued for a sending connection and not yet acknowledged.
    pub fn send_backlog(&self, conn: ConnectionId) -> usize {
        match self.conns.get(&conn.0).map(|c| &c.state) {
            Some(State::Sending { tx, .. }) => tx.queued(),
            _ => 0,
        }
    }

    /// Rejects a pending connection with `reason` (sent as `1000 + code`).
    pub fn reject(
        &mut self,
        conn: ConnectionId,
        reason: RejectReason,
        now: Instant,
    ) -> Result<(), ListenerError> {
        let c = self
            .conns
            .get(&conn.0)
            .ok_or(ListenerError::UnknownConnection)?;
        let State::Pending(p) = &c.state else {
            return Err(ListenerError::AlreadyAccepted);
        };
        let mut hs = Handshake::empty(HandshakeType::Conclusion);
        hs.initial_seq = p.initial_seq;
        hs.mtu = p.mtu;
        hs.cookie = p.cookie;
        let (peer, peer_socket) = (c.peer, c.peer_socket);
        self.remove_conn(conn.0);
        self.send_rejection(peer, peer_socket, &hs, reason, now);
        Ok(())
    }

    /// Closes a connection from our side: sends SHUTDOWN, no `Closed` event.
    pub fn close(&mut self, conn: ConnectionId, now: Instant) -> Result<(), ListenerError> {
        let c = self
            .remove_conn(conn.0)
            .ok_or(ListenerError::UnknownConnection)?;
        if let State::Connected { .. } | State::Sending { .. } = c.state {
            let ts = timestamp_us(c.start, now);
            self.out.push_with(c.peer, |b| {
                super::packet::write_simple_control(
                    b,
                    super::packet::ControlType::Shutdown,
                    0,
                    ts,
                    c.peer_socket,
                )
            });
        }
        Ok(())
    }

    /// Runs timers: ACK/NAK/keepalive, TSBPD delivery, idle timeouts.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut closed: Vec<(u32, Option<CloseReason>)> = Vec::new();
        for (&id, c) in self.conns.iter_mut() {
            match &mut c.state {
                State::Pending(p) => {
                    if now.saturating_duration_since(p.created) >= PENDING_TIMEOUT {
                        closed.push((id, None));
                    }
                }
                State::Connected { rx, .. } => {
                    let events = &mut self.events;
                    let conn = ConnectionId(id);
                    rx.deliver(now, |payload| {
                        events.push_back(ListenerEvent::Data { conn, payload })
                    });
                    if let Some(reason) = rx.on_timeout(now, &mut self.out) {
                        closed.push((id, Some(reason)));
                    }
                }
                State::Sending { tx, .. } => {
                    if let Some(reason) = tx.on_timeout(now, &mut self.out) {
                        closed.push((id, Some(reason)));
                    }
                }
            }
        }
        for (id, reason) in closed {
            match reason {
                Some(r) => self.close_with(id, r),
                None => {
                    self.remove_conn(id);
                }
            }
        }
        self.rejected.retain(|_, (_, until)| *until > now);
    }

    /// Moves the next datagram to send into `buf`; returns its destination.
    /// Control packets first, then the data of sending connections.
    pub fn poll_transmit(&mut self, buf: &mut Vec<u8>) -> Option<SocketAddr> {
        self.out.pop_into(buf)
    }

    /// As [`poll_transmit`](Self::poll_transmit), then the next data packet
    /// of a sending connection (each in turn).
    pub fn poll_transmit_at(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<SocketAddr> {
        if let Some(to) = self.out.pop_into(buf) {
            return Some(to);
        }
        if self.senders == 0 {
            return None;
        }
        for c in self.conns.values_mut() {
            if let State::Sending { tx, .. } = &mut c.state {
                if tx.has_pending() {
                    if let Some(to) = tx.poll_transmit(now, buf, &mut self.out) {
                        return Some(to);
                    }
                }
            }
        }
        None
    }

    /// Next event, if any.
    pub fn poll_event(&mut self) -> Option<ListenerEvent> {
        self.events.pop_front()
    }

    /// When `handle_timeout` must be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = None;
        for c in self.conns.values() {
            t = earliest(
                t,
                match &c.state {
                    State::Pending(p) => Some(add_or_same(p.created, PENDING_TIMEOUT)),
                    State::Connected { rx, .. } => rx.poll_timeout(),
                    State::Sending { tx, .. } => Some(tx.poll_timeout()),
                },
            );
        }
        for (_, until) in self.rejected.values() {
            t = earliest(t, Some(*until));
        }
        t
    }

    /// Counters of one connection.
    pub fn connection_stats(&self, conn: ConnectionId) -> Option<ReceiverStats> {
        match &self.conns.get(&conn.0)?.state {
            State::Connected { rx, .. } => Some(rx.stats()),
            State::Pending(_) | State::Sending { .. } => Some(ReceiverStats::default()),
        }
    }

    /// Negotiated receive latency of a connected connection.
    pub fn connection_latency(&self, conn: ConnectionId) -> Option<Duration> {
        match &self.conns.get(&conn.0)?.state {
            State::Connected { rx, .. } => Some(rx.latency()),
            State::Pending(_) | State::Sending { .. } => None,
        }
    }

    /// Peer address and stream id of a connection.
    pub fn connection_info(&self, conn: ConnectionId) -> Option<(SocketAddr, Option<&str>)> {
        let c = self.conns.get(&conn.0)?;
        Some((c.peer, c.stream_id.as_deref()))
    }

    /// Number of pending plus connected connections.
    /// The settings it was made with.
    pub fn config(&self) -> &ListenerConfig {
        &self.config
    }

    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Listener-wide counters.
    pub fn stats(&self) -> ListenerStats {
        self.stats
    }

    /// True when datagrams are waiting in `poll_transmit`.
    pub fn has_transmit(&self) -> bool {
        !self.out.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::srt::packet::{DataHeader, KeyFlags, MsgNumber, PacketPosition, HS_EXT_CONFIG};

    fn caller_addr() -> SocketAddr {
        "10.0.0.2:5000".parse().unwrap()
    }

    fn next_packet(l: &mut Listener) -> Option<(SocketAddr, Vec<u8>)> {
        let mut b = Vec::new();
        l.poll_transmit(&mut b).map(|to| (to, b))
    }

    fn handshake_of(bytes: &[u8]) -> Handshake {
        match Packet::parse(bytes).unwrap() {
            Packet::Control(ControlPacket {
                body: ControlBody::Handshake(hs),
                ..
            }) => *hs,
            other => panic!("{other:?}"),
        }
    }

    /// Runs induction + conclusion; returns the ConnectionRequest event.
    fn connect(
        l: &mut Listener,
        now: Instant,
        tweak: impl FnOnce(&mut Handshake),
    ) -> Option<ListenerEvent> {
        connect_ts(l, now, 200, tweak)
    }

    fn connect_ts(
        l: &mut Listener,
        now: Instant,
        conclusion_ts: u32,
        tweak: impl FnOnce(&mut Handshake),
    ) -> Option<ListenerEvent> {
        let mut ind = Handshake::empty(HandshakeType::Induction);
        ind.version = 4;
        ind.extension = 2;
        ind.socket_id = 0x1111;
        ind.initial_seq = SeqNumber::new(1000);
        let mut b = Vec::new();
        ind.write_packet(&mut b, 100, 0);
        l.handle_datagram(caller_addr(), &b, now);
        let (to, resp) = next_packet(l).unwrap();
        assert_eq!(to, caller_addr());
        let r = handshake_of(&resp);
        assert_eq!(r.version, 5);
        assert_eq!(r.extension, SRT_MAGIC_CODE);
        assert_eq!(l.connection_count(), 0, "induction must be stateless");
        let mut conc = Handshake::empty(HandshakeType::Conclusion);
        conc.extension = HS_EXT_HSREQ | HS_EXT_CONFIG;
        conc.socket_id = 0x1111;
        conc.initial_seq = SeqNumber::new(1000);
        conc.cookie = r.cookie;
        conc.hsreq = Some(SrtHandshakeExt {
            version: SRT_VERSION,
            flags: SrtFlags::LIVE,
            recv_tsbpd_delay_ms: 120,
            send_tsbpd_delay_ms: 120,
        });
        conc.stream_id = Some("#!::r=live/stream,m=publish".into());
        tweak(&mut conc);
        b.clear();
        conc.write_packet(&mut b, conclusion_ts, 0);
        l.handle_datagram(caller_addr(), &b, now);
        l.poll_event()
    }

    /// Induction from `from`: the cookie to conclude with.
    fn induce(l: &mut Listener, from: SocketAddr, now: Instant) -> u32 {
        let mut ind = Handshake::empty(HandshakeType::Induction);
        ind.version = 4;
        ind.extension = 2;
        ind.socket_id = 0x1111;
        let mut b = Vec::new();
        ind.write_packet(&mut b, 100, 0);
        l.handle_datagram(from, &b, now);
        handshake_of(&next_packet(l).unwrap().1).cookie
    }

    /// A conclusion from `from` with socket id `sid`: the event it made.
    fn conclude(
        l: &mut Listener,
        from: SocketAddr,
        sid: u32,
        cookie: u32,
        now: Instant,
    ) -> Option<ListenerEvent> {
        let mut conc = Handshake::empty(HandshakeType::Conclusion);
        conc.extension = HS_EXT_HSREQ;
        conc.socket_id = sid;
        conc.cookie = cookie;
        conc.hsreq = Some(SrtHandshakeExt {
            version: SRT_VERSION,
            flags: SrtFlags::LIVE,
            recv_tsbpd_delay_ms: 120,
            send_tsbpd_delay_ms: 120,
        });
        let mut b = Vec::new();
        conc.write_packet(&mut b, 200, 0);
        l.handle_datagram(from, &b, now);
        while next_packet(l).is_some() {}
        l.poll_event()
    }

    #[test]
    fn a_request_mode_caller_is_sent_to_and_acknowledges() {
        let now = Instant::now();
        let mut l = Listener::new(ListenerConfig::default(), now);
        let Some(ListenerEvent::ConnectionRequest { conn, .. }) = connect(&mut l, now, |hs| {
            hs.stream_id = Some("#!::r=live/s,m=request".into())
        }) else {
            panic!("no connection request");
        };
        l.accept_sender(conn, now).unwrap();
        // The conclusion response, then nothing until data is queued.
        let (_, rsp) = next_packet(&mut l).unwrap();
        assert!(handshake_of(&rsp).hsrsp.is_some());
        assert!(l.poll_transmit_at(now, &mut Vec::new()).is_none());
        for i in 0..3u8 {
            assert!(l.send(conn, &[i; 1316], now));
        }
        assert_eq!(l.send_backlog(conn), 3);
        let mut seqs = Vec::new();
        let mut b = Vec::new();
        while let Some(to) = l.poll_transmit_at(now, &mut b) {
            assert_eq!(to, caller_addr());
            match Packet::parse(&b).unwrap() {
                Packet::Data(d) => {
                    assert_eq!(d.header.dest_socket, 0x1111);
                    assert_eq!(d.payload.len(), 1316);
                    seqs.push(d.header.seq);
                }
                other => panic!("{other:?}"),
            }
            b.clear();
        }
        // The handshake's initial sequence number, as libsrt expects.
        assert_eq!(
            seqs,
            vec![
                SeqNumber::new(1000),
                SeqNumber::new(1001),
                SeqNumber::new(1002)
            ]
        );
        // The caller acknowledges all three: they leave the buffer.
        let ack = crate::srt::packet::Ack {
            number: 1,
            seq: SeqNumber::new(1003),
            stats: None,
        };
        let mut a = Vec::new();
        ack.write_packet(&mut a, 10, conn.0);
        l.handle_datagram(caller_addr(), &a, now);
        assert_eq!(l.send_backlog(conn), 0);
        // Only senders take `send`; a receiving connection does not.
        assert!(!l.send(ConnectionId(12345), b"x", now));
        // Closing sends SHUTDOWN.
        l.close(conn, now).unwrap();
        assert!(next_packet(&mut l).is_some());
        assert_eq!(l.connection_count(), 0);
    }

    #[test]
    fn one_address_cannot_take_every_slot() {
        let now = Instant::now();
        let mut l = Listener::new(ListenerConfig::default(), now);
        // One source reusing its cookie with 100 socket ids (and ports).
        let cookie = induce(&mut l, caller_addr(), now);
        let mut requests = 0;
        for sid in 0..100u32 {
            if let Some(ListenerEvent::ConnectionRequest { .. }) =
                conclude(&mut l, caller_addr(), 0x2000 + sid, cookie, now)
            {
                requests += 1;
            }
        }
        assert_eq!(requests, 16);
        assert_eq!(l.connection_count(), 16);
        assert_eq!(l.stats().refused_over_limit, 84);
        // Another address still gets in.
        let other: SocketAddr = "10.0.0.3:6000".parse().unwrap();
        let cookie = induce(&mut l, other, now);
        assert!(matches!(
            conclude(&mut l, other, 0x3333, cookie, now),
            Some(ListenerEvent::ConnectionRequest { .. })
        ));
        // Slots come back when connections go.
        let ids: Vec<u32> = l.conns.keys().copied().collect();
        for id in ids {
            let _ = l.reject(ConnectionId(id), RejectReason::Predefined(1403), now);
        }
        assert_eq!(l.connection_count(), 0);
        assert!(l.per_address.is_empty());
    }

    #[test]
    fn handshake_accept_and_receive() {
        let now = Instant::now();
        let mut l = Listener::new(ListenerConfig::default(), now);
        let ev = connect(&mut l, now, |_| {}).unwrap();
        let ListenerEvent::ConnectionRequest {
            conn,
            peer,
            stream_id,
        } = ev
        else {
            panic!()
        };
        assert_eq!(peer, caller_addr());
        assert_eq!(stream_id.as_deref(), Some("#!::r=live/stream,m=publish"));
        l.accept(conn, now).unwrap();
        let (_, resp) = next_packet(&mut l).unwrap();
        let r = handshake_of(&resp);
        assert_eq!(r.hs_type, HandshakeType::Conclusion);
        assert_eq!(r.socket_id, conn.0);
        assert_eq!(r.hsrsp.unwrap().recv_tsbpd_delay_ms, 120);
        // data packets 1000, 1001, 1003 (1002 lost) -> immediate NAK.
        for (i, seq) in [1000u32, 1001, 1003].into_iter().enumerate() {
            let h = DataHeader {
                seq: SeqNumber::new(seq),
                position: PacketPosition::Solo,
                in_order: false,
                key: KeyFlags::None,
                retransmitted: false,
                msg: MsgNumber::new(i as u32 + 1),
                timestamp: 200 + 1000 * (seq - 1000),
                dest_socket: conn.0,
            };
            let mut b = Vec::new();
            h.write(&mut b);
            b.extend_from_slice(&[seq as u8; 188]);
            l.handle_datagram(caller_addr(), &b, now);
        }
        let (_, nak) = next_packet(&mut l).expect("nak");
        match Packet::parse(&nak).unwrap() {
            Packet::Control(ControlPacket {
                body: ControlBody::Nak(list),
                ..
            }) => assert_eq!(
                list.ranges().collect::<Vec<_>>(),
                vec![(SeqNumber::new(1002), SeqNumber::new(1002))]
            ),
            other => panic!("{other:?}"),
        }
        assert!(l.poll_event().is_none(), "nothing before play time");
        let t = now + Duration::from_millis(125);
        l.handle_timeout(t);
        let mut got = Vec::new();
        while let Some(ev) = l.poll_event() {
            if let ListenerEvent::Data { payload, .. } = ev {
                got.push(payload[0]);
            }
        }
        // 1002 missing: 1003 is due at +123ms, so 1002 was skipped.
        assert_eq!(got, vec![232, 233, 235]);
        assert_eq!(l.connection_stats(conn).unwrap().packets_dropped, 1);
        // a full ACK went out
        let mut saw_ack = false;
        while let Some((_, p)) = next_packet(&mut l) {
            if let Ok(Packet::Control(ControlPacket {
                body: ControlBody::Ack(a),
                ..
            })) = Packet::parse(&p)
            {
                saw_ack |= a.stats.is_some() && a.seq == SeqNumber::new(1004);
            }
        }
        assert!(saw_ack);
        // idle timeout
        l.handle_timeout(t + Duration::from_secs(6));
        assert_eq!(
            l.poll_event(),
            Some(ListenerEvent::Closed {
                conn,
                reason: CloseReason::IdleTimeout
            })
        );
    }

    #[test]
    fn tsbpd_across_timestamp_wrap() {
        let now = Instant::now();
        let mut l = Listener::new(ListenerConfig::default(), now);
        let start_ts = u32::MAX - 5_000;
        let Some(ListenerEvent::ConnectionRequest { conn, .. }) =
            connect_ts(&mut l, now, start_ts, |_| {})
        else {
            panic!()
        };
        l.accept(conn, now).unwrap();
        // 20 packets, 1 ms apart, starting 1 ms after the conclusion: the
        // 32-bit timestamp wraps after the 4th.
        for i in 0..20u32 {
            let h = DataHeader {
                seq: SeqNumber::new(1000 + i),
                position: PacketPosition::Solo,
                in_order: false,
                key: KeyFlags::None,
                retransmitted: false,
                msg: MsgNumber::new(i + 1),
                timestamp: start_ts.wrapping_add(1000 * (i + 1)),
                dest_socket: conn.0,
            };
            let mut b = Vec::new();
            h.write(&mut b);
            b.push(i as u8);
            l.handle_datagram(caller_addr(), &b, now + Duration::from_millis(u64::from(i)));
        }
        let mut delivered = Vec::new();
        let mut t = now;
        while delivered.len() < 20 && t < now + Duration::from_secs(1) {
            t = l.poll_timeout().unwrap().max(t);
            l.handle_timeout(t);
            while let Some(ev) = l.poll_event() {
                if let ListenerEvent::Data { payload, .. } = ev {
                    delivered.push((payload[0], t - now));
                }
            }
        }
        assert_eq!(delivered.len(), 20);
        for (i, (p, at)) in delivered.into_iter().enumerate() {
            assert_eq!(p as usize, i);
            assert_eq!(at, Duration::from_millis(120 + 1 + i as u64));
        }
    }

    #[test]
    fn encryption_request_is_rejected_unsecure() {
        let now = Instant::now();
        let mut l = Listener::new(ListenerConfig::default(), now);
        let mut ind = Handshake::empty(HandshakeType::Induction);
        ind.socket_id = 7;
        let mut b = Vec::new();
        ind.write_packet(&mut b, 0, 0);
        l.handle_datagram(caller_addr(), &b, now);
        let (_, resp) = next_packet(&mut l).unwrap();
        let cookie = handshake_of(&resp).cookie;
        let mut conc = Handshake::empty(HandshakeType::Conclusion);
        conc.socket_id = 7;
        conc.cookie = cookie;
        conc.encryption = 2;
        conc.extension = HS_EXT_HSREQ | HS_EXT_KMREQ;
        conc.kmreq = Some(vec![0x12, 0x20, 0x29, 1]);
        conc.hsreq = Some(SrtHandshakeExt {
            version: SRT_VERSION,
            flags: SrtFlags::LIVE,
            recv_tsbpd_delay_ms: 120,
            send_tsbpd_delay_ms: 120,
        });
        b.clear();
        conc.write_packet(&mut b, 0, 0);
        l.handle_datagram(caller_addr(), &b, now);
        assert!(matches!(
            l.poll_event(),
            Some(ListenerEvent::Refused {
                reason: RejectReason::Unsecure,
                ..
            })
        ));
        let (_, rej) = next_packet(&mut l).unwrap();
        assert_eq!(
            handshake_of(&rej).hs_type,
            HandshakeType::Rejection(RejectReason::Unsecure)
        );
        assert_eq!(
            u32::from_be_bytes(rej[16 + 20..16 + 24].try_into().unwrap()),
            1011
        );
    }

    #[test]
    fn bad_cookie_is_ignored_and_reject_is_sent() {
        let now = Instant::now();
        let mut l = Listener::new(ListenerConfig::default(), now);
        assert_eq!(connect(&mut l, now, |h| h.cookie ^= 1), None);
        assert!(next_packet(&mut l).is_none());
        assert_eq!(l.stats().bad_cookies, 1);
        // a HSv4-style conclusion (no HSREQ) is rejected with VERSION
        let ev = connect(&mut l, now, |h| h.hsreq = None);
        assert_eq!(ev, None);
        let (_, rej) = next_packet(&mut l).unwrap();
        assert_eq!(
            handshake_of(&rej).hs_type,
            HandshakeType::Rejection(RejectReason::Version)
        );
    }

    #[test]
    fn kiln_reject() {
        let now = Instant::now();
        let mut l = Listener::new(ListenerConfig::default(), now);
        let Some(ListenerEvent::ConnectionRequest { conn, .. }) = connect(&mut l, now, |_| {})
        else {
            panic!()
        };
        l.reject(conn, RejectReason::FORBIDDEN, now).unwrap();
        let (_, rej) = next_packet(&mut l).unwrap();
        assert_eq!(
            handshake_of(&rej).hs_type,
            HandshakeType::Rejection(RejectReason::FORBIDDEN)
        );
        assert_eq!(l.connection_count(), 0);
        assert_eq!(l.accept(conn, now), Err(ListenerError::UnknownConnection));
    }
}
