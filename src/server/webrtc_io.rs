//! One ICE socket (a UDP address of `<IceCandidates>`): the glue between
//! it and the WebRTC session table ([`crate::webrtc::WebRtc`]). Every
//! datagram goes to the table, which finds its session; what the table has
//! for this socket is sent with `sendmmsg`, in batches, a viewer's run of
//! equal packets as one GSO message (`sys::send_datagrams_to`). A socket that takes
//! no more keeps a bounded backlog (the rest is dropped, as UDP would).
//!
//! The socket is edge-triggered: a turn reads at most `READ_BUDGET`
//! datagrams so others are served too, and one that stopped at the budget
//! re-queues itself (its deadline is now), never waits for an edge that a
//! full receive queue would never raise again. Likewise a write that
//! stopped at its rounds with sessions still paused for room.

use super::endpoint::{Cx, Endpoint};
use crate::webrtc::Datagram;
use mio::net::UdpSocket;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

/// A datagram's slot in a batch read: WebRTC's datagrams fit one MTU (its
/// DTLS records are fragmented to it); a longer one is cut and dropped.
const SLOT: usize = 2048;
/// Datagrams one `recvmmsg` reads: a flood is read a batch per system
/// call, many times faster than a sender sends it one by one.
const SLOTS: usize = 32;
/// Datagrams read per readiness turn before the loop serves others: a
/// flood of junk must be drained faster than it comes while the loop also
/// serves its other floods, or the queue stays full and the kernel drops
/// the real peers' consent checks with the junk (issue 40's chaos test at
/// 2,048 beside stress-ng). 16,384 is about 5 ms of reading.
const READ_BUDGET: usize = 16_384;
/// Datagrams kept when the socket would block.
const MAX_BACKLOG: usize = 4096;
/// Datagrams per `sendmmsg` call.
const BATCH: usize = 64;
/// Datagrams the table may hold for this socket while it reads: past
/// them they are sent at once. Every viewer whose handshake ends in one
/// read burst gets its GOP (a hundred datagrams or more); held until the
/// burst ended, 200 viewers joining made 22 MB of them at once, and the
/// heap kept that size.
const FLUSH_AT: usize = 4 * BATCH;
/// Rounds of "send, then let paused sessions write" per write call: a
/// keyframe for hundreds of viewers goes out in a few rounds, and other
/// sockets still get their turn.
const RESUME_ROUNDS: usize = 8;

pub(crate) struct IceSocket {
    socket: UdpSocket,
    /// Where it is bound (for logs).
    addr: SocketAddr,
    /// This socket's index in the table's ports.
    index: usize,
    slots: Vec<Vec<u8>>,
    got: Vec<crate::sys::Received>,
    backlog: VecDeque<Datagram>,
    /// The last read stopped at its budget with datagrams left: read
    /// again at this time (the next turn).
    read_again: Option<std::time::Instant>,
    /// The last write stopped at its rounds with sessions still paused for
    /// room and nothing held back by the kernel: write again at this time
    /// (the next turn). A keyframe to hundreds of viewers takes several
    /// calls, and an outbox this socket emptied raises no new event.
    write_again: Option<std::time::Instant>,
}

impl IceSocket {
    pub(crate) fn new(socket: UdpSocket, addr: SocketAddr, index: usize) -> Self {
        IceSocket {
            socket,
            addr,
            index,
            slots: vec![vec![0u8; SLOT]; SLOTS],
            got: Vec::with_capacity(SLOTS),
            backlog: VecDeque::new(),
            read_again: None,
            write_again: None,
        }
    }

    fn read(&mut self, cx: &mut Cx<'_>) {
        self.receive(cx);
        // What publishers sent, for the features.
        cx.out.ingest.append(&mut cx.api.webrtc.take_ingest());
    }

    fn receive(&mut self, cx: &mut Cx<'_>) {
        self.read_again = None;
        let (mut read, mut drained) = (0, false);
        let mut got = std::mem::take(&mut self.got);
        while read < READ_BUDGET {
            match crate::sys::recv_datagrams(self.socket.as_raw_fd(), &mut self.slots, &mut got) {
                Ok(n) => read += n.max(1),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    drained = true;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // ICMP errors from a viewer gone away surface here.
                    crate::debug!("webrtc udp {}: recv: {e}", self.addr);
                    read += 1;
                    continue;
                }
            }
            // Offered at: its own address, or the public one it stands
            // for (nothing is offered before that is learnt).
            let local = cx.api.webrtc.port_addr(self.index);
            for r in got.iter().filter(|r| !r.truncated) {
                let Some(local) = local else { break };
                let api = &mut *cx.api;
                api.webrtc.handle_datagram(
                    local,
                    r.from,
                    &self.slots[r.slot][..r.len],
                    &mut api.registry.streams,
                    cx.now,
                );
            }
            if cx.api.webrtc.outbox_len(self.index) >= FLUSH_AT {
                self.write(cx);
            }
        }
        self.got = got;
        if drained {
            return;
        }
        // The budget ran out before `WouldBlock`: more may wait, and no
        // new edge comes for it.
        self.read_again = Some(cx.now);
    }

    fn write(&mut self, cx: &mut Cx<'_>) {
        // Set again below only if this call stops at its rounds (an early
        // return must not leave a past deadline armed: the loop would spin).
        self.write_again = None;
        // Sessions paused for room write their next frames as this socket
        // sends (bounded: a few rounds per call, then the loop's turn).
        for _ in 0..RESUME_ROUNDS {
            self.send(cx);
            if !self.backlog.is_empty() || !cx.api.webrtc.has_paused() {
                return;
            }
            let api = &mut *cx.api;
            api.webrtc.resume(&mut api.registry.streams, cx.now);
        }
        self.send(cx);
        self.write_again =
            (self.backlog.is_empty() && cx.api.webrtc.has_paused()).then_some(cx.now);
    }

    fn send(&mut self, cx: &mut Cx<'_>) {
        let fresh = cx.api.webrtc.take_outbox(self.index);
        if self.backlog.is_empty() {
            let sent = send_batch(&self.socket, self.addr, &fresh);
            if sent < fresh.len() {
                self.backlog.extend(fresh.into_iter().skip(sent));
            }
        } else {
            self.backlog.extend(fresh);
            let list = self.backlog.make_contiguous();
            let sent = send_batch(&self.socket, self.addr, list);
            self.backlog.drain(..sent);
        }
        while self.backlog.len() > MAX_BACKLOG {
            self.backlog.pop_front();
            cx.api.webrtc.dropped += 1;
        }
    }
}

/// Sends from the front of `list` until the socket would block; returns
/// how many left (a datagram the kernel refused counts as gone).
fn send_batch(socket: &UdpSocket, addr: SocketAddr, list: &[Datagram]) -> usize {
    let mut done = 0;
    let mut batch: Vec<(SocketAddr, &[u8])> = Vec::with_capacity(BATCH);
    while done < list.len() {
        batch.clear();
        batch.extend(
            list[done..]
                .iter()
                .take(BATCH)
                .map(|d| (d.to, d.data.as_slice())),
        );
        match crate::sys::send_datagrams_to(socket.as_raw_fd(), &batch) {
            Ok(0) => return done,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return done,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                // One bad destination (unreachable): skip it.
                crate::debug!("webrtc udp {addr}: send: {e}");
                done += 1;
            }
        }
    }
    done
}

impl Endpoint for IceSocket {
    fn ready(&mut self, cx: &mut Cx<'_>, _peer_closed: bool) {
        self.read(cx);
        self.write(cx);
    }

    fn timeout(&mut self, cx: &mut Cx<'_>) {
        let read = self.read_again.is_some();
        if read {
            self.read(cx);
        }
        if read || self.write_again.is_some() {
            self.write(cx);
        }
    }

    fn deadline(&self) -> Option<std::time::Instant> {
        crate::clock::earliest(self.read_again, self.write_again)
    }

    fn is_closed(&self) -> bool {
        false
    }

    /// The registry names this socket as every WebRTC publisher's
    /// endpoint: the table ends the one of `stream`.
    fn end_stream(&mut self, stream: crate::state::streams::StreamId, cx: &mut Cx<'_>) {
        cx.api.webrtc.end_publisher(stream);
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        let _ = poll.deregister(&mut self.socket);
    }

    fn abort(&mut self, _cx: &mut Cx<'_>) {
        // The socket serves every session: it stays; what it held is gone.
        self.backlog.clear();
    }

    fn flush(&mut self, cx: &mut Cx<'_>) {
        self.write(cx);
    }
}
