//! The receiving half of one connected SRT live-mode socket: receive buffer,
//! loss detection with immediate and periodic NAKs, full ACK every 10 ms and
//! light ACK every 64 packets, ACKACK-based RTT, TSBPD delivery with
//! too-late packet drop and simple drift correction, keepalive and peer idle
//! timeout. Sans-IO and internal: the listener owns one per connection and
//! routes packets to it. It does not do handshakes and never sends data.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::common::{add_or_same, earliest, timestamp_us, LossSet, OutQueue, RttEstimate};
use super::packet::{
    write_nak_packet, write_simple_control, Ack, AckStats, ControlType, DataHeader, SeqNumber,
    MAX_PAYLOAD_LEN,
};

/// Full ACK period (libsrt COMM_SYN_INTERVAL).
pub(crate) const ACK_INTERVAL: Duration = Duration::from_millis(10);
/// A light ACK is sent after this many packets without a full ACK.
const LIGHT_ACK_PACKETS: u32 = 64;
/// Minimum interval of periodic NAK reports.
const MIN_NAK_INTERVAL: Duration = Duration::from_millis(20);
/// Keepalive when nothing was sent for this long.
pub(crate) const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);
/// Drift samples averaged before correcting the time base.
const DRIFT_SPAN: u32 = 1000;
/// Average drift (µs) tolerated before the time base is moved.
const MAX_DRIFT_US: i64 = 5000;
/// ACKs remembered for RTT measurement.
const ACK_HISTORY: usize = 256;
/// Largest NAK datagram.
const MAX_NAK_LEN: usize = MAX_PAYLOAD_LEN + 16;

/// Counters of one receiving connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Data packets received (including retransmissions and duplicates).
    pub packets_received: u64,
    /// Payload bytes received.
    pub bytes_received: u64,
    /// Packets detected missing (a gap in sequence numbers).
    pub packets_lost: u64,
    /// Retransmitted packets received (R flag set).
    pub packets_retransmitted: u64,
    /// Packets skipped because they did not arrive before their play time.
    pub packets_dropped: u64,
    /// Packets that arrived after their slot was delivered or skipped, or twice.
    pub packets_belated: u64,
    /// Packets delivered to the application.
    pub packets_delivered: u64,
    /// Payload bytes delivered to the application.
    pub bytes_delivered: u64,
    /// Smoothed round-trip time in microseconds.
    pub rtt_us: u32,
}

/// Why a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The peer sent SHUTDOWN.
    PeerShutdown,
    /// Nothing was received from the peer within the idle timeout.
    IdleTimeout,
    /// The handshake did not complete within the connect timeout.
    ConnectTimeout,
    /// The peer rejected the handshake.
    Rejected(super::packet::RejectReason),
    /// The peer reported an error (PEERERROR code).
    PeerError(u32),
    /// The local side called `shutdown`/`close`.
    Local,
    /// The peer answered our keying material with this KM state (a wrong
    /// passphrase, or none set there).
    KeyMaterial(u32),
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CloseReason::PeerShutdown => f.write_str("peer shut down"),
            CloseReason::IdleTimeout => f.write_str("peer idle timeout"),
            CloseReason::ConnectTimeout => f.write_str("connect timeout"),
            CloseReason::Rejected(r) => write!(f, "rejected: {r}"),
            CloseReason::PeerError(c) => write!(f, "peer error {c}"),
            CloseReason::Local => f.write_str("closed locally"),
            CloseReason::KeyMaterial(state) => {
                write!(
                    f,
                    "encryption refused: {}",
                    super::crypto::km_state_text(*state)
                )
            }
        }
    }
}

#[derive(Debug)]
struct Slot {
    ts_ext: i64,
    payload: Bytes,
}

/// Addressing and timing of outgoing control packets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Link {
    pub(crate) peer: SocketAddr,
    pub(crate) peer_socket: u32,
    /// Our connection start (timestamps of what we send).
    pub(crate) start: Instant,
}

impl Link {
    /// Sends a keepalive when nothing went out for `KEEPALIVE_INTERVAL`
    /// (both directions of a connection keep the peer from timing out).
    pub(crate) fn keepalive_if_idle(
        &self,
        last_sent: &mut Instant,
        now: Instant,
        out: &mut OutQueue,
    ) {
        if now.saturating_duration_since(*last_sent) >= KEEPALIVE_INTERVAL {
            let (ts, dest) = (timestamp_us(self.start, now), self.peer_socket);
            out.push_with(self.peer, |b| {
                write_simple_control(b, ControlType::Keepalive, 0, ts, dest)
            });
            *last_sent = now;
        }
    }
}

/// Parameters fixed at connection time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReceiverParams {
    pub(crate) initial_seq: SeqNumber,
    /// Arrival of the peer's conclusion handshake: the TSBPD time base.
    pub(crate) base: Instant,
    /// Timestamp of that conclusion (the peer time at `base`).
    pub(crate) base_ts: u32,
    pub(crate) latency: Duration,
    pub(crate) tsbpd: bool,
    pub(crate) capacity: usize,
    pub(crate) idle_timeout: Duration,
}

#[derive(Debug)]
pub(crate) struct Receiver {
    link: Link,
    p: ReceiverParams,
    /// Our time matching peer time `base_ts` (moved by drift correction).
    base: Instant,
    base_ts: i64,
    ts_last: u32,
    ts_ext_last: i64,
    /// Slot 0 holds `base_seq`, the next packet to deliver.
    buffer: VecDeque<Option<Slot>>,
    base_seq: SeqNumber,
    /// One past the highest sequence number received.
    next_expected: SeqNumber,
    /// All packets before this one were received (or skipped).
    ack_seq: SeqNumber,
    loss: LossSet,
    rtt: RttEstimate,
    ack_number: u32,
    ack_history: VecDeque<(u32, Instant)>,
    last_ack_seq_sent: SeqNumber,
    last_ackack_seq: SeqNumber,
    last_full_ack: Instant,
    packets_since_ack: u32,
    next_ack: Instant,
    last_periodic_nak: Instant,
    last_sent: Instant,
    last_recv: Instant,
    drift_sum: i64,
    drift_count: u32,
    rate_packets: u32,
    rate_bytes: u64,
    rate_since: Instant,
    packet_rate: u32,
    byte_rate: u32,
    stats: ReceiverStats,
}

impl Receiver {
    pub(crate) fn new(link: Link, p: ReceiverParams, now: Instant) -> Self {
        Receiver {
            link,
            base: p.base,
            base_ts: i64::from(p.base_ts),
            ts_last: p.base_ts,
            ts_ext_last: i64::from(p.base_ts),
            buffer: VecDeque::new(),
            base_seq: p.initial_seq,
            next_expected: p.initial_seq,
            ack_seq: p.initial_seq,
            loss: LossSet::default(),
            rtt: RttEstimate::default(),
            ack_number: 0,
            ack_history: VecDeque::new(),
            last_ack_seq_sent: p.initial_seq,
            last_ackack_seq: p.initial_seq,
            last_full_ack: now,
            packets_since_ack: 0,
            next_ack: now + ACK_INTERVAL,
            last_periodic_nak: now,
            last_sent: now,
            last_recv: now,
            drift_sum: 0,
            drift_count: 0,
            rate_packets: 0,
            rate_bytes: 0,
            rate_since: now,
            packet_rate: 0,
            byte_rate: 0,
            stats: ReceiverStats::default(),
            p,
        }
    }

    pub(crate) fn stats(&self) -> ReceiverStats {
        ReceiverStats {
            rtt_us: self.rtt.rtt_us,
            ..self.stats
        }
    }

    pub(crate) fn peer_socket(&self) -> u32 {
        self.link.peer_socket
    }

    pub(crate) fn latency(&self) -> Duration {
        self.p.latency
    }

    /// Notes that something arrived from the peer.
    pub(crate) fn touch(&mut self, now: Instant) {
        self.last_recv = now;
    }

    fn unwrap_ts(&mut self, ts: u32) -> i64 {
        let ext = self
            .ts_ext_last
            .saturating_add(i64::from(ts.wrapping_sub(self.ts_last) as i32));
        if ext > self.ts_ext_last {
            self.ts_ext_last = ext;
            self.ts_last = ts;
        }
        ext
    }

    /// Our time at which the peer's (unwrapped) timestamp `ts_ext` was sent.
    fn peer_time(&self, ts_ext: i64) -> Instant {
        let d = ts_ext.saturating_sub(self.base_ts);
        let abs = Duration::from_micros(d.unsigned_abs());
        if d >= 0 {
            add_or_same(self.base, abs)
        } else {
            self.base.checked_sub(abs).unwrap_or(self.base)
        }
    }

    fn play_time(&self, ts_ext: i64) -> Instant {
        if !self.p.tsbpd {
            return self.base;
        }
        add_or_same(self.peer_time(ts_ext), self.p.latency)
    }

    fn ts(&self, now: Instant) -> u32 {
        timestamp_us(self.link.start, now)
    }

    /// Handles one data packet.
    pub(crate) fn on_data(
        &mut self,
        h: &DataHeader,
        payload: &[u8],
        now: Instant,
        out: &mut OutQueue,
    ) {
        self.last_recv = now;
        self.stats.packets_received += 1;
        self.stats.bytes_received += payload.len() as u64;
        self.rate_packets = self.rate_packets.saturating_add(1);
        self.rate_bytes += payload.len() as u64;
        if h.retransmitted {
            self.stats.packets_retransmitted += 1;
        }
        let seq = h.seq;
        let offset = seq.diff(self.base_seq);
        if offset < 0 {
            self.stats.packets_belated += 1;
            return;
        }
        let offset = offset as usize;
        if offset >= self.p.capacity {
            // No room: behave as if it never arrived; it will be NAKed or dropped.
            return;
        }
        let gap = seq.diff(self.next_expected);
        if gap > 0 {
            let last = seq.sub(1);
            self.loss.insert(self.next_expected, last);
            self.stats.packets_lost += gap as u64;
            self.send_nak_ranges(now, out, [(self.next_expected, last)].into_iter());
            self.next_expected = seq.next();
        } else if gap == 0 {
            self.next_expected = seq.next();
        } else {
            self.loss.remove(seq);
        }
        while self.buffer.len() <= offset {
            self.buffer.push_back(None);
        }
        let ts_ext = self.unwrap_ts(h.timestamp);
        match self.buffer.get_mut(offset) {
            Some(slot @ None) => {
                *slot = Some(Slot {
                    ts_ext,
                    payload: Bytes::copy_from_slice(payload),
                });
            }
            _ => {
                self.stats.packets_belated += 1;
                return;
            }
        }
        self.packets_since_ack += 1;
        if self.packets_since_ack >= LIGHT_ACK_PACKETS {
            self.packets_since_ack = 0;
            self.advance_ack_seq();
            if self.ack_seq != self.last_ack_seq_sent {
                let ack = Ack {
                    number: 0,
                    seq: self.ack_seq,
                    stats: None,
                };
                let (ts, dest) = (self.ts(now), self.link.peer_socket);
                out.push_with(self.link.peer, |b| ack.write_packet(b, ts, dest));
                self.last_sent = now;
            }
        }
    }

    /// The sender gave up on `first..=last`: stop asking for them.
    pub(crate) fn on_dropreq(&mut self, first: SeqNumber, last: SeqNumber) {
        let of = i64::from(first.diff(self.base_seq)).max(0);
        let ol = i64::from(last.diff(self.base_seq))
            .min(i64::from(self.next_expected.diff(self.base_seq)) - 1);
        if ol < of {
            return;
        }
        self.loss
            .remove_range(self.base_seq.add(of as u32), self.base_seq.add(ol as u32));
    }

    pub(crate) fn on_ackack(&mut self, number: u32, timestamp: u32, now: Instant) {
        self.last_recv = now;
        let Some(pos) = self.ack_history.iter().position(|(n, _)| *n == number) else {
            return;
        };
        let sent = self.ack_history[pos].1;
        self.ack_history.drain(..=pos);
        let sample = now.saturating_duration_since(sent).as_micros() as u32;
        self.rtt.sample(sample);
        self.last_ackack_seq = self.last_ack_seq_sent;
        // Drift: how late the peer's clock looks compared to the time base.
        if self.p.tsbpd {
            let ext = self.unwrap_ts(timestamp);
            let expected = self.peer_time(ext);
            let drift = if now >= expected {
                now.duration_since(expected).as_micros().min(1 << 40) as i64
            } else {
                -(expected.duration_since(now).as_micros().min(1 << 40) as i64)
            };
            self.drift_sum = self.drift_sum.saturating_add(drift);
            self.drift_count += 1;
            if self.drift_count >= DRIFT_SPAN {
                let avg = self.drift_sum / i64::from(self.drift_count);
                self.drift_sum = 0;
                self.drift_count = 0;
                if avg > MAX_DRIFT_US {
                    self.base = add_or_same(self.base, Duration::from_micros(avg as u64));
                } else if avg < -MAX_DRIFT_US {
                    let d = Duration::from_micros(avg.unsigned_abs());
                    self.base = self.base.checked_sub(d).unwrap_or(self.base);
                }
            }
        }
    }

    fn advance_ack_seq(&mut self) {
        if self.ack_seq.before(self.base_seq) {
            self.ack_seq = self.base_seq;
        }
        let mut off = self.ack_seq.diff(self.base_seq).max(0) as usize;
        while let Some(Some(_)) = self.buffer.get(off) {
            off += 1;
            self.ack_seq = self.ack_seq.next();
        }
    }

    fn send_nak_ranges(
        &mut self,
        now: Instant,
        out: &mut OutQueue,
        ranges: impl Iterator<Item = (SeqNumber, SeqNumber)>,
    ) {
        let (ts, dest) = (self.ts(now), self.link.peer_socket);
        out.push_with(self.link.peer, |b| {
            write_nak_packet(b, ts, dest, ranges, MAX_NAK_LEN);
        });
        self.last_sent = now;
    }

    /// Delivers every payload whose play time has come, skipping missing
    /// packets whose successors are due (too-late drop).
    pub(crate) fn deliver(&mut self, now: Instant, mut emit: impl FnMut(Bytes)) {
        loop {
            match self.buffer.front() {
                Some(Some(slot)) => {
                    if self.play_time(slot.ts_ext) > now {
                        break;
                    }
                    if let Some(Some(slot)) = self.buffer.pop_front() {
                        self.stats.packets_delivered += 1;
                        self.stats.bytes_delivered += slot.payload.len() as u64;
                        emit(slot.payload);
                    }
                    self.base_seq = self.base_seq.next();
                }
                Some(None) => {
                    let Some(i) = self.buffer.iter().position(Option::is_some) else {
                        break;
                    };
                    let due = match self.buffer.get(i) {
                        Some(Some(s)) => self.play_time(s.ts_ext) <= now,
                        _ => false,
                    };
                    if !due {
                        break;
                    }
                    self.buffer.drain(..i);
                    self.stats.packets_dropped += i as u64;
                    self.base_seq = self.base_seq.add(i as u32);
                }
                None => break,
            }
        }
        self.loss.remove_before(self.base_seq);
        if self.next_expected.before(self.base_seq) {
            self.next_expected = self.base_seq;
        }
    }

    /// Delivers everything still buffered, in order, skipping gaps (the peer
    /// is gone, nothing more will arrive).
    pub(crate) fn flush(&mut self, mut emit: impl FnMut(Bytes)) {
        while let Some(slot) = self.buffer.pop_front() {
            self.base_seq = self.base_seq.next();
            match slot {
                Some(slot) => {
                    self.stats.packets_delivered += 1;
                    self.stats.bytes_delivered += slot.payload.len() as u64;
                    emit(slot.payload);
                }
                None => self.stats.packets_dropped += 1,
            }
        }
        self.loss.remove_before(self.base_seq);
    }

    /// Runs timers. Returns `Some(reason)` when the connection must close.
    pub(crate) fn on_timeout(&mut self, now: Instant, out: &mut OutQueue) -> Option<CloseReason> {
        if now.saturating_duration_since(self.last_recv) >= self.p.idle_timeout {
            return Some(CloseReason::IdleTimeout);
        }
        if now >= self.next_ack {
            self.next_ack = add_or_same(now, ACK_INTERVAL);
            self.periodic_ack(now, out);
        }
        if now >= self.next_nak() {
            self.last_periodic_nak = now;
            if !self.loss.is_empty() {
                let loss = std::mem::take(&mut self.loss);
                self.send_nak_ranges(now, out, loss.ranges());
                self.loss = loss;
            }
        }
        self.link.keepalive_if_idle(&mut self.last_sent, now, out);
        None
    }

    /// Periodic NAK report time, from the current RTT estimate (libsrt:
    /// (RTT + 4 * RTTVar) / 2, at least 20 ms).
    fn next_nak(&self) -> Instant {
        let interval = ((self.rtt.rtt() + 4 * self.rtt.var()) / 2).max(MIN_NAK_INTERVAL);
        add_or_same(self.last_periodic_nak, interval)
    }

    fn periodic_ack(&mut self, now: Instant, out: &mut OutQueue) {
        self.advance_ack_seq();
        let elapsed = now.saturating_duration_since(self.rate_since);
        if elapsed >= Duration::from_millis(100) {
            let us = elapsed.as_micros().max(1) as u64;
            let pr = (u64::from(self.rate_packets) * 1_000_000 / us).min(u64::from(u32::MAX));
            let br = (self.rate_bytes * 1_000_000 / us).min(u64::from(u32::MAX));
            self.packet_rate = ((u64::from(self.packet_rate) * 7 + pr) / 8) as u32;
            self.byte_rate = ((u64::from(self.byte_rate) * 7 + br) / 8) as u32;
            self.rate_packets = 0;
            self.rate_bytes = 0;
            self.rate_since = now;
        }
        // Like libsrt: a new ACK when the ACK point moved, else repeat it
        // every RTT + 4 * RTTVar while packets are missing (keeps the RTT
        // fresh during a stall); nothing when all is acknowledged and confirmed.
        if self.ack_seq == self.last_ack_seq_sent
            && now.saturating_duration_since(self.last_full_ack)
                < self.rtt.rtt() + 4 * self.rtt.var()
        {
            return;
        }
        if self.ack_seq == self.last_ackack_seq && self.loss.is_empty() {
            return;
        }
        self.ack_number = if self.ack_number >= 0x7FFF_FFFF {
            1
        } else {
            self.ack_number + 1
        };
        let avail = self.p.capacity.saturating_sub(self.buffer.len()).max(2) as u32;
        let ack = Ack {
            number: self.ack_number,
            seq: self.ack_seq,
            stats: Some(AckStats {
                rtt_us: self.rtt.rtt_us,
                rtt_var_us: self.rtt.var_us,
                avail_buffer: avail,
                packet_rate: self.packet_rate,
                link_capacity: self.packet_rate.saturating_mul(2).max(1000),
                byte_rate: self.byte_rate,
            }),
        };
        let (ts, dest) = (self.ts(now), self.link.peer_socket);
        out.push_with(self.link.peer, |b| ack.write_packet(b, ts, dest));
        if self.ack_history.len() >= ACK_HISTORY {
            self.ack_history.pop_front();
        }
        self.ack_history.push_back((self.ack_number, now));
        self.last_ack_seq_sent = self.ack_seq;
        self.last_full_ack = now;
        self.last_sent = now;
        self.packets_since_ack = 0;
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let mut t = Some(
            self.next_ack
                .min(add_or_same(self.last_recv, self.p.idle_timeout)),
        );
        t = earliest(t, Some(add_or_same(self.last_sent, KEEPALIVE_INTERVAL)));
        if !self.loss.is_empty() {
            t = earliest(t, Some(self.next_nak()));
        }
        if let Some(Some(s)) = self.buffer.iter().find(|s| s.is_some()) {
            t = earliest(t, Some(self.play_time(s.ts_ext)));
        }
        t
    }
}
