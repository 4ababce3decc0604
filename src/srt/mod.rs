//! SRT (Secure Reliable Transport) in live mode, without encryption, as
//! sans-IO state machines interoperable with libsrt 1.5 (srt-live-transmit,
//! ffmpeg's libsrt).
//!
//! - [`packet`]: wire format (data/control packets, handshake and extensions,
//!   sequence numbers, rejection codes).
//! - [`listener::Listener`]: ingest; many callers on one UDP socket, receive-only.
//! - [`caller::Caller`]: push; one connection to a remote listener, send-only.
//!
//! Time is `std::time::Instant`, always passed in (`now`); nothing here reads
//! the clock, owns a socket, logs or spawns. The event loop feeds datagrams
//! (`handle_datagram(from, bytes, now)`) and timeouts (`handle_timeout(now)`),
//! then drains `poll_transmit(&mut buf) -> Option<SocketAddr>` (the datagram is
//! written into the caller's reusable buffer) and `poll_event()`, and sleeps
//! until `poll_timeout()`. Not here: encryption (KMREQ is refused with
//! `SRT_REJ_UNSECURE`), rendezvous, file/stream mode, packet filters (FEC),
//! bonding groups, congestion control beyond live-mode immediacy.

pub mod caller;
mod common;
pub mod crypto;
pub mod listener;
pub mod packet;
mod receiver;
mod sender;
#[cfg(test)]
mod sim_tests;
pub mod stream_id;

pub use caller::{Caller, CallerConfig, CallerEvent, CallerState, SendError};
pub use listener::{
    ConnectionId, Listener, ListenerConfig, ListenerError, ListenerEvent, ListenerStats,
};
pub use packet::{RejectReason, SeqNumber};
pub use receiver::{CloseReason, ReceiverStats};
pub use sender::SenderStats;

/// Entry points for fuzz targets: arbitrary bytes in, results ignored.
pub mod fuzz {
    use std::net::SocketAddr;
    use std::time::{Duration, Instant};

    use super::*;

    /// Parses `data` as one SRT packet.
    pub fn fuzz_packet(data: &[u8]) {
        if let Ok(packet::Packet::Control(packet::ControlPacket {
            body: packet::ControlBody::Nak(l),
            ..
        })) = packet::Packet::parse(data)
        {
            let _ = l.ranges().count();
        }
    }

    /// Splits `data` into datagrams (first byte = length) and feeds them to a
    /// listener that accepts every connection, with time advancing.
    pub fn fuzz_listener(data: &[u8]) {
        let now = Instant::now();
        let from: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 9000));
        let mut l = Listener::new(
            ListenerConfig {
                secret: Some(1),
                ..ListenerConfig::default()
            },
            now,
        );
        let mut buf = Vec::new();
        let mut t = now;
        let mut senders = Vec::new();
        for chunk in split(data) {
            l.handle_datagram(from, chunk, t);
            while let Some(ev) = l.poll_event() {
                if let ListenerEvent::ConnectionRequest { conn, .. } = ev {
                    // Odd socket ids play (request mode): kiln sends to them.
                    if conn.0 & 1 == 1 && l.accept_sender(conn, t).is_ok() {
                        senders.push(conn);
                    } else {
                        let _ = l.accept(conn, t);
                    }
                }
            }
            for conn in &senders {
                l.send(*conn, &[0x47; 1316], t);
            }
            while l.poll_transmit_at(t, &mut buf).is_some() {}
            t += Duration::from_millis(7);
            l.handle_timeout(t);
        }
    }

    /// Feeds arbitrary datagrams to a caller (connecting, then whatever
    /// comes). An odd first byte runs a caller in request mode (a pull)
    /// connected to a real listener first, so the datagrams reach its
    /// receiver and key handling.
    pub fn fuzz_caller(data: &[u8]) {
        if data.first().is_some_and(|b| b & 1 == 1) {
            fuzz_receiving_caller(&data[1..]);
            return;
        }
        let now = Instant::now();
        let peer: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 9000));
        let mut c = Caller::new(
            CallerConfig {
                stream_id: Some("fuzz".into()),
                ..CallerConfig::new(peer)
            },
            now,
        );
        let mut buf = Vec::new();
        let mut t = now;
        for chunk in split(data) {
            c.handle_datagram(peer, chunk, t);
            let _ = c.send(&[0x47; 188], t);
            while c.poll_transmit(t, &mut buf).is_some() {}
            while c.poll_event().is_some() {}
            t += Duration::from_millis(7);
            c.handle_timeout(t);
        }
    }

    /// True when the caller was connected before the input came.
    pub(crate) fn fuzz_receiving_caller(data: &[u8]) -> bool {
        let now = Instant::now();
        let listener_addr: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 9000));
        let caller_addr: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 9001));
        let mut l = Listener::new(
            ListenerConfig {
                secret: Some(1),
                ..ListenerConfig::default()
            },
            now,
        );
        let mut c = Caller::new(
            CallerConfig {
                stream_id: Some("#!::r=app/cam,m=request".into()),
                receive: true,
                socket_id: Some(7),
                initial_seq: Some(1000),
                ..CallerConfig::new(listener_addr)
            },
            now,
        );
        let mut buf = Vec::new();
        let mut conn = None;
        // The handshake, between the two real state machines.
        for _ in 0..16 {
            while c.poll_transmit(now, &mut buf).is_some() {
                l.handle_datagram(caller_addr, &buf, now);
            }
            while let Some(ev) = l.poll_event() {
                if let ListenerEvent::ConnectionRequest { conn: id, .. } = ev {
                    let _ = l.accept_sender(id, now);
                    conn = Some(id);
                }
            }
            while l.poll_transmit_at(now, &mut buf).is_some() {
                c.handle_datagram(listener_addr, &buf, now);
            }
            if c.is_connected() {
                break;
            }
        }
        let connected = c.is_connected();
        // Then whatever the peer sends, mixed with the listener's own data.
        let mut t = now;
        for chunk in split(data) {
            c.handle_datagram(listener_addr, chunk, t);
            if let Some(id) = conn {
                l.send(id, chunk, t);
                while l.poll_transmit_at(t, &mut buf).is_some() {
                    c.handle_datagram(listener_addr, &buf, t);
                }
            }
            while c.poll_data().is_some() {}
            while c.poll_event().is_some() {}
            while c.poll_transmit(t, &mut buf).is_some() {}
            t += Duration::from_millis(7);
            c.handle_timeout(t);
        }
        connected
    }

    pub(crate) fn split(data: &[u8]) -> impl Iterator<Item = &[u8]> {
        let mut rest = data;
        std::iter::from_fn(move || {
            let (&n, tail) = rest.split_first()?;
            let n = usize::from(n).min(tail.len());
            let (chunk, tail) = tail.split_at(n);
            rest = tail;
            Some(chunk)
        })
    }
}
