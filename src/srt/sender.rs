//! The sending half of one connected SRT live-mode socket: a send buffer
//! bounded by packet count, timestamps relative to the connection start,
//! retransmission on NAK (immediate and periodic reports, suppressed when the
//! same packet was retransmitted less than one RTT ago), ACK processing with
//! ACKACK replies and RTT from the receiver's report, too-late drop with
//! DROPREQ, keepalive and peer idle timeout. Internal; the caller owns it.
//! It never receives data and does no handshakes.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::common::{add_or_same, timestamp_us, LossSet, OutQueue, RttEstimate};
use super::crypto::TxCrypto;
use super::packet::{
    write_dropreq_packet, write_km_packet, write_simple_control, Ack, ControlType, DataHeader,
    KeyFlags, LossList, MsgNumber, PacketPosition, SeqNumber,
};
use super::receiver::{CloseReason, Link, KEEPALIVE_INTERVAL};

/// Counters of one sending connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Data packets sent the first time.
    pub packets_sent: u64,
    /// Payload bytes sent the first time.
    pub bytes_sent: u64,
    /// Data packets retransmitted.
    pub packets_retransmitted: u64,
    /// Payload bytes retransmitted.
    pub bytes_retransmitted: u64,
    /// Packets dropped unacknowledged (too late or buffer full).
    pub packets_dropped: u64,
    /// Payload bytes dropped.
    pub bytes_dropped: u64,
    /// NAK packets received.
    pub naks_received: u64,
    /// Packets currently in the send buffer.
    pub buffered_packets: u64,
    /// Smoothed round-trip time reported by the receiver, microseconds.
    pub rtt_us: u32,
}

#[derive(Debug)]
struct SendSlot {
    msg: MsgNumber,
    ts: u32,
    origin: Instant,
    payload: Vec<u8>,
    last_rexmit: Option<Instant>,
    /// The key the payload is encrypted with (retransmissions reuse it).
    key: KeyFlags,
}

#[derive(Debug)]
pub(crate) struct Sender {
    link: Link,
    buffer: VecDeque<SendSlot>,
    /// Sequence number of `buffer[0]`.
    base_seq: SeqNumber,
    /// Index in `buffer` of the first never-sent packet.
    unsent: usize,
    next_msg: MsgNumber,
    rexmit: LossSet,
    rtt: RttEstimate,
    drop_after: Duration,
    capacity: usize,
    idle_timeout: Duration,
    pool: Vec<Vec<u8>>,
    last_sent: Instant,
    last_recv: Instant,
    stats: SenderStats,
    /// Our keys, when the connection is encrypted.
    crypto: Option<Box<TxCrypto>>,
}

const MAX_POOLED: usize = 256;

impl Sender {
    pub(crate) fn new(
        link: Link,
        initial_seq: SeqNumber,
        peer_latency: Duration,
        capacity: usize,
        idle_timeout: Duration,
        crypto: Option<Box<TxCrypto>>,
        now: Instant,
    ) -> Self {
        Sender {
            link,
            buffer: VecDeque::new(),
            base_seq: initial_seq,
            unsent: 0,
            next_msg: MsgNumber::new(1),
            rexmit: LossSet::default(),
            rtt: RttEstimate::default(),
            // libsrt: max(peer latency, 1 s) + 2 * SYN interval.
            drop_after: peer_latency.max(Duration::from_secs(1)) + Duration::from_millis(20),
            capacity: capacity.max(16),
            idle_timeout,
            pool: Vec::new(),
            last_sent: now,
            last_recv: now,
            stats: SenderStats::default(),
            crypto,
        }
    }

    /// Queues the key announcement that is due (a refresh, or a repeat of
    /// one the peer has not answered) as a UMSG_EXT KMREQ.
    fn announce_keys(&mut self, now: Instant, out: &mut OutQueue) {
        let Some(km) = self.crypto.as_mut().and_then(|c| c.poll_announcement(now)) else {
            return;
        };
        let ts = self.ts(now);
        let dest = self.link.peer_socket;
        out.push_with(self.link.peer, |b| write_km_packet(b, true, &km, ts, dest));
    }

    /// The peer's KMRSP to a key announcement.
    pub(crate) fn on_km_response(&mut self, km: &[u8]) {
        if let Some(c) = self.crypto.as_mut() {
            c.handle_response(km);
        }
    }

    pub(crate) fn stats(&self) -> SenderStats {
        SenderStats {
            buffered_packets: self.buffer.len() as u64,
            rtt_us: self.rtt.rtt_us,
            ..self.stats
        }
    }

    pub(crate) fn peer_socket(&self) -> u32 {
        self.link.peer_socket
    }

    pub(crate) fn touch(&mut self, now: Instant) {
        self.last_recv = now;
    }

    fn ts(&self, now: Instant) -> u32 {
        timestamp_us(self.link.start, now)
    }

    fn seq_at(&self, index: usize) -> SeqNumber {
        self.base_seq.add(index as u32)
    }

    /// Queues one payload (at most one packet's worth).
    pub(crate) fn push(&mut self, payload: &[u8], now: Instant, out: &mut OutQueue) {
        if self.buffer.len() >= self.capacity {
            self.drop_front(1, now, out);
        }
        let mut v = self.pool.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(payload);
        let seq = self.seq_at(self.buffer.len());
        let key = match self.crypto.as_mut() {
            Some(c) => c.encrypt(seq.value(), &mut v, now),
            None => KeyFlags::None,
        };
        let msg = self.next_msg;
        self.next_msg = msg.next();
        self.buffer.push_back(SendSlot {
            msg,
            ts: self.ts(now),
            origin: now,
            payload: v,
            last_rexmit: None,
            key,
        });
        if self.crypto.is_some() {
            self.announce_keys(now, out);
        }
    }

    fn recycle(&mut self, slot: SendSlot) {
        if self.pool.len() < MAX_POOLED {
            self.pool.push(slot.payload);
        }
    }

    /// Drops the `n` oldest packets and tells the receiver with DROPREQ.
    fn drop_front(&mut self, n: usize, now: Instant, out: &mut OutQueue) {
        let n = n.min(self.buffer.len());
        if n == 0 {
            return;
        }
        let first = self.base_seq;
        let last = self.base_seq.add(n as u32 - 1);
        let mut msg = None;
        for _ in 0..n {
            if let Some(slot) = self.buffer.pop_front() {
                msg.get_or_insert(slot.msg);
                self.stats.packets_dropped += 1;
                self.stats.bytes_dropped += slot.payload.len() as u64;
                self.recycle(slot);
            }
        }
        self.base_seq = last.next();
        self.unsent = self.unsent.saturating_sub(n);
        self.rexmit.remove_before(self.base_seq);
        let (ts, dest) = (self.ts(now), self.link.peer_socket);
        let msg = msg.unwrap_or_default();
        out.push_with(self.link.peer, |b| {
            write_dropreq_packet(b, ts, dest, msg, first, last)
        });
        self.last_sent = now;
    }

    pub(crate) fn on_ack(&mut self, ack: &Ack, now: Instant, out: &mut OutQueue) {
        self.last_recv = now;
        if let Some(s) = ack.stats {
            if ack.number != 0 {
                let (ts, dest) = (self.ts(now), self.link.peer_socket);
                let n = ack.number;
                out.push_with(self.link.peer, |b| {
                    write_simple_control(b, ControlType::AckAck, n, ts, dest)
                });
                self.last_sent = now;
            }
            if s.rtt_us > 0 {
                self.rtt.set(s.rtt_us, s.rtt_var_us);
            }
        }
        let off = ack.seq.diff(self.base_seq);
        if off <= 0 || off as usize > self.unsent {
            return;
        }
        for _ in 0..off {
            if let Some(slot) = self.buffer.pop_front() {
                self.recycle(slot);
            }
        }
        self.base_seq = ack.seq;
        self.unsent -= off as usize;
        self.rexmit.remove_before(self.base_seq);
    }

    pub(crate) fn on_nak(&mut self, list: LossList<'_>, now: Instant, out: &mut OutQueue) {
        self.last_recv = now;
        self.stats.naks_received += 1;
        // Work in offsets from the oldest buffered packet: modular
        // comparisons between arbitrary peer values are not transitive.
        let sent = self.unsent as i64;
        for (a, b) in list.ranges().take(1024) {
            let oa = i64::from(a.diff(self.base_seq));
            let ob = i64::from(b.diff(self.base_seq));
            if ob < oa || ob - oa > self.capacity as i64 * 4 {
                continue;
            }
            if oa < 0 {
                // Gone from the buffer (acknowledged or dropped): tell the
                // receiver to stop asking.
                let end = if ob < 0 { b } else { self.base_seq.sub(1) };
                let (ts, dest) = (self.ts(now), self.link.peer_socket);
                out.push_with(self.link.peer, |buf| {
                    write_dropreq_packet(buf, ts, dest, MsgNumber::new(0), a, end)
                });
                self.last_sent = now;
            }
            let lo = oa.max(0);
            let hi = ob.min(sent - 1);
            if lo <= hi {
                self.rexmit
                    .insert(self.base_seq.add(lo as u32), self.base_seq.add(hi as u32));
            }
        }
    }

    /// Drops packets too old to be played by the receiver.
    pub(crate) fn on_timeout(&mut self, now: Instant, out: &mut OutQueue) -> Option<CloseReason> {
        if now.saturating_duration_since(self.last_recv) >= self.idle_timeout {
            return Some(CloseReason::IdleTimeout);
        }
        let n = self
            .buffer
            .iter()
            .take_while(|s| now.saturating_duration_since(s.origin) > self.drop_after)
            .count();
        self.drop_front(n, now, out);
        self.announce_keys(now, out);
        self.link.keepalive_if_idle(&mut self.last_sent, now, out);
        None
    }

    fn write_data(&self, index: usize, retransmitted: bool, buf: &mut Vec<u8>) -> bool {
        let Some(slot) = self.buffer.get(index) else {
            return false;
        };
        buf.clear();
        DataHeader {
            seq: self.seq_at(index),
            position: PacketPosition::Solo,
            in_order: false,
            key: slot.key,
            retransmitted,
            msg: slot.msg,
            timestamp: slot.ts,
            dest_socket: self.link.peer_socket,
        }
        .write(buf);
        buf.extend_from_slice(&slot.payload);
        true
    }

    /// Next datagram: control first, then retransmissions, then new data.
    pub(crate) fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        out: &mut OutQueue,
    ) -> Option<SocketAddr> {
        if let Some(to) = out.pop_into(buf) {
            return Some(to);
        }
        let min_gap = self.rtt.rtt().max(Duration::from_millis(5));
        while let Some(seq) = self.rexmit.pop_first() {
            let off = seq.diff(self.base_seq);
            if off < 0 || off as usize >= self.unsent {
                continue;
            }
            let index = off as usize;
            let recent = self
                .buffer
                .get(index)
                .and_then(|s| s.last_rexmit)
                .is_some_and(|t| now.saturating_duration_since(t) < min_gap);
            if recent {
                continue;
            }
            if self.write_data(index, true, buf) {
                if let Some(slot) = self.buffer.get_mut(index) {
                    slot.last_rexmit = Some(now);
                    self.stats.packets_retransmitted += 1;
                    self.stats.bytes_retransmitted += slot.payload.len() as u64;
                }
                self.last_sent = now;
                return Some(self.link.peer);
            }
        }
        if self.unsent < self.buffer.len() && self.write_data(self.unsent, false, buf) {
            self.stats.packets_sent += 1;
            self.stats.bytes_sent += (buf.len() - super::packet::HEADER_LEN) as u64;
            self.unsent += 1;
            self.last_sent = now;
            return Some(self.link.peer);
        }
        None
    }

    pub(crate) fn poll_timeout(&self) -> Instant {
        let mut t = add_or_same(self.last_recv, self.idle_timeout)
            .min(add_or_same(self.last_sent, KEEPALIVE_INTERVAL));
        if let Some(front) = self.buffer.front() {
            t = t.min(add_or_same(
                front.origin,
                self.drop_after + Duration::from_micros(1),
            ));
        }
        if let Some(km) = self.crypto.as_ref().and_then(|c| c.poll_timeout()) {
            t = t.min(km);
        }
        t
    }

    /// Payloads queued and not yet acknowledged (or dropped).
    pub(crate) fn queued(&self) -> usize {
        self.buffer.len()
    }

    /// True when `poll_transmit` has data to send right now.
    pub(crate) fn has_pending(&self) -> bool {
        self.unsent < self.buffer.len() || !self.rexmit.is_empty()
    }
}
