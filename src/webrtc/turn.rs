//! OME's TCP relay: just enough TURN over TCP (RFC 8656) for a viewer that
//! cannot reach kiln over UDP. The browser allocates on kiln's relay port
//! (long-term credentials `ome`/`airen`, realm `airensoft`, as OME), and
//! its ICE checks and media to kiln's own ICE candidates travel inside
//! Send indications or ChannelData on the TCP connection. Nothing is
//! relayed anywhere else: the only peers a client may name are kiln's ICE
//! sockets, and what it sends them goes straight to the session table as
//! if it came from the allocation's (made-up) relayed address.
//!
//! Sans-IO: bytes in ([`TurnConn::feed`]), replies and datagrams out;
//! datagrams for the client wrapped by [`TurnConn::wrap`]. Bounded: one
//! message at most 64 KiB; before a successful Allocate at most 2 KiB.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

pub const USERNAME: &str = "ome";
pub const PASSWORD: &str = "airen";
pub const REALM: &str = "airensoft";

const COOKIE: [u8; 4] = [0x21, 0x12, 0xA4, 0x42];
const MAX_MESSAGE: usize = 64 * 1024;
const MAX_UNAUTHENTICATED: usize = 2048;
/// Lifetime granted (s); the relay ends with its TCP connection anyway.
const LIFETIME: u32 = 600;

// Message types (method and class).
const BINDING_REQUEST: u16 = 0x0001;
const ALLOCATE_REQUEST: u16 = 0x0003;
const REFRESH_REQUEST: u16 = 0x0004;
const SEND_INDICATION: u16 = 0x0016;
const DATA_INDICATION: u16 = 0x0017;
const CREATE_PERMISSION_REQUEST: u16 = 0x0008;
const CHANNEL_BIND_REQUEST: u16 = 0x0009;
const SUCCESS: u16 = 0x0100;
const ERROR: u16 = 0x0110;

// Attributes.
const ATTR_USERNAME: u16 = 0x0006;
const ATTR_MESSAGE_INTEGRITY: u16 = 0x0008;
const ATTR_ERROR_CODE: u16 = 0x0009;
const ATTR_CHANNEL_NUMBER: u16 = 0x000C;
const ATTR_LIFETIME: u16 = 0x000D;
const ATTR_XOR_PEER_ADDRESS: u16 = 0x0012;
const ATTR_DATA: u16 = 0x0013;
const ATTR_REALM: u16 = 0x0014;
const ATTR_NONCE: u16 = 0x0015;
const ATTR_XOR_RELAYED_ADDRESS: u16 = 0x0016;
const ATTR_XOR_MAPPED_ADDRESS: u16 = 0x0020;

/// What the connection produced.
#[derive(Debug, PartialEq, Eq)]
pub enum TurnOutput {
    /// Bytes to write back to the client.
    Reply(Vec<u8>),
    /// A datagram the client sends to `peer` (one of kiln's ICE sockets).
    Datagram { peer: SocketAddr, data: Vec<u8> },
}

#[derive(Debug, PartialEq, Eq)]
pub enum TurnError {
    TooLong,
    Malformed,
}

/// One client's TCP connection to the relay: its allocation.
pub struct TurnConn {
    buf: Vec<u8>,
    /// The client as the socket sees it (for XOR-MAPPED-ADDRESS).
    client: SocketAddr,
    /// The made-up relayed address sessions see the client's datagrams
    /// come from.
    relayed: SocketAddr,
    nonce: String,
    key: [u8; 16],
    allocated: bool,
    channels: HashMap<u16, SocketAddr>,
    /// The peers the client may reach: kiln's ICE sockets.
    peers: Vec<SocketAddr>,
}

struct Message<'a> {
    kind: u16,
    txid: [u8; 12],
    attrs: Vec<(u16, &'a [u8])>,
    /// Offset of the MESSAGE-INTEGRITY attribute, if any.
    integrity_at: Option<usize>,
    raw: &'a [u8],
}

impl TurnConn {
    pub fn new(
        client: SocketAddr,
        relayed: SocketAddr,
        peers: Vec<SocketAddr>,
        nonce: String,
    ) -> TurnConn {
        let key = md5_key();
        TurnConn {
            buf: Vec::new(),
            client,
            relayed,
            nonce,
            key,
            allocated: false,
            channels: HashMap::new(),
            peers,
        }
    }

    pub fn relayed(&self) -> SocketAddr {
        self.relayed
    }

    pub fn is_allocated(&self) -> bool {
        self.allocated
    }

    /// Bytes from the socket: every whole message handled.
    pub fn feed(&mut self, data: &[u8]) -> Result<Vec<TurnOutput>, TurnError> {
        self.buf.extend_from_slice(data);
        let limit = if self.allocated {
            MAX_MESSAGE + 8
        } else {
            MAX_UNAUTHENTICATED
        };
        let mut out = Vec::new();
        // Frames are taken from the front by a cursor; what is left moves
        // once (many small messages cost one move, not one each).
        let mut at = 0;
        let result = loop {
            let rest = &self.buf[at..];
            let len = match frame_len(rest) {
                Err(e) => break Err(e),
                Ok(None) if rest.len() > limit => break Err(TurnError::TooLong),
                Ok(None) => break Ok(()),
                Ok(Some(len)) if len > limit => break Err(TurnError::TooLong),
                Ok(Some(len)) if rest.len() < len => break Ok(()),
                Ok(Some(len)) => len,
            };
            let frame = std::mem::take(&mut self.buf);
            let handled = self.handle(&frame[at..at + len], &mut out);
            self.buf = frame;
            at += len;
            if let Err(e) = handled {
                break Err(e);
            }
        };
        self.buf.drain(..at);
        result.map(|()| out)
    }

    fn handle(&mut self, frame: &[u8], out: &mut Vec<TurnOutput>) -> Result<(), TurnError> {
        if frame[0] & 0xC0 == 0x40 {
            // ChannelData.
            let channel = u16::from_be_bytes([frame[0], frame[1]]);
            let len = usize::from(u16::from_be_bytes([frame[2], frame[3]]));
            let data = frame.get(4..4 + len).ok_or(TurnError::Malformed)?;
            if let Some(peer) = self.channels.get(&channel) {
                out.push(TurnOutput::Datagram {
                    peer: *peer,
                    data: data.to_vec(),
                });
            }
            return Ok(());
        }
        let m = parse(frame)?;
        match m.kind {
            SEND_INDICATION => {
                if !self.allocated {
                    return Ok(());
                }
                let (Some(peer), Some(data)) =
                    (m.xor_address(ATTR_XOR_PEER_ADDRESS), m.attr(ATTR_DATA))
                else {
                    return Ok(());
                };
                if self.peers.contains(&peer) {
                    out.push(TurnOutput::Datagram {
                        peer,
                        data: data.to_vec(),
                    });
                }
            }
            BINDING_REQUEST => {
                let mut r = Builder::new(BINDING_REQUEST | SUCCESS, m.txid);
                r.xor_address(ATTR_XOR_MAPPED_ADDRESS, self.client);
                out.push(TurnOutput::Reply(r.finish(None)));
            }
            ALLOCATE_REQUEST
            | REFRESH_REQUEST
            | CREATE_PERMISSION_REQUEST
            | CHANNEL_BIND_REQUEST => {
                if let Err((code, reason)) = self.authenticate(&m) {
                    let mut r = Builder::new(m.kind | ERROR, m.txid);
                    r.error(code, reason);
                    r.attr(ATTR_REALM, REALM.as_bytes());
                    r.attr(ATTR_NONCE, self.nonce.as_bytes());
                    out.push(TurnOutput::Reply(r.finish(None)));
                    return Ok(());
                }
                let reply = match m.kind {
                    ALLOCATE_REQUEST => {
                        self.allocated = true;
                        let mut r = Builder::new(m.kind | SUCCESS, m.txid);
                        r.xor_address(ATTR_XOR_RELAYED_ADDRESS, self.relayed);
                        r.xor_address(ATTR_XOR_MAPPED_ADDRESS, self.client);
                        r.attr(ATTR_LIFETIME, &LIFETIME.to_be_bytes());
                        r
                    }
                    REFRESH_REQUEST => {
                        let mut r = Builder::new(m.kind | SUCCESS, m.txid);
                        r.attr(ATTR_LIFETIME, &LIFETIME.to_be_bytes());
                        r
                    }
                    CREATE_PERMISSION_REQUEST => Builder::new(m.kind | SUCCESS, m.txid),
                    _ => {
                        let channel = m
                            .attr(ATTR_CHANNEL_NUMBER)
                            .filter(|v| v.len() >= 2)
                            .map(|v| u16::from_be_bytes([v[0], v[1]]));
                        let peer = m.xor_address(ATTR_XOR_PEER_ADDRESS);
                        // As a Send indication: after the Allocate, and
                        // only to kiln's own ICE sockets.
                        match (channel, peer) {
                            (Some(c), Some(p))
                                if (0x4000..=0x7FFF).contains(&c)
                                    && self.channels.len() < 64
                                    && self.allocated
                                    && self.peers.contains(&p) =>
                            {
                                self.channels.insert(c, p);
                                Builder::new(m.kind | SUCCESS, m.txid)
                            }
                            _ => {
                                let mut r = Builder::new(m.kind | ERROR, m.txid);
                                r.error(400, "Bad Request");
                                r
                            }
                        }
                    }
                };
                out.push(TurnOutput::Reply(reply.finish(Some(&self.key))));
            }
            _ => {}
        }
        Ok(())
    }

    /// A request is ours: USERNAME, REALM, NONCE and a good
    /// MESSAGE-INTEGRITY with OME's fixed credentials.
    fn authenticate(&self, m: &Message<'_>) -> Result<(), (u16, &'static str)> {
        let (Some(user), Some(at)) = (m.attr(ATTR_USERNAME), m.integrity_at) else {
            return Err((401, "Unauthorized"));
        };
        if user != USERNAME.as_bytes() {
            return Err((401, "Unauthorized"));
        }
        if m.attr(ATTR_NONCE) != Some(self.nonce.as_bytes()) {
            return Err((438, "Stale Nonce"));
        }
        let Some(mac) = m.attr(ATTR_MESSAGE_INTEGRITY).filter(|v| v.len() == 20) else {
            return Err((400, "Bad Request"));
        };
        // The HMAC covers the message up to the attribute, with the
        // header's length counting up to its end.
        let mut covered = m.raw[..at].to_vec();
        let len = (at + 24 - 20) as u16;
        covered[2..4].copy_from_slice(&len.to_be_bytes());
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, &self.key);
        ring::hmac::verify(&key, &covered, mac).map_err(|_| (401, "Unauthorized"))
    }

    /// A datagram from kiln's ICE socket `peer` to the client: ChannelData
    /// when a channel is bound to it, else a Data indication.
    pub fn wrap(&self, peer: SocketAddr, data: &[u8]) -> Vec<u8> {
        if let Some((&c, _)) = self.channels.iter().find(|(_, p)| **p == peer) {
            let mut f = Vec::with_capacity(data.len() + 8);
            f.extend_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&(data.len() as u16).to_be_bytes());
            f.extend_from_slice(data);
            while f.len() % 4 != 0 {
                f.push(0);
            }
            return f;
        }
        let mut txid = [0u8; 12];
        let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut txid);
        let mut b = Builder::new(DATA_INDICATION, txid);
        b.xor_address(ATTR_XOR_PEER_ADDRESS, peer);
        b.attr(ATTR_DATA, data);
        b.finish(None)
    }
}

fn md5_key() -> [u8; 16] {
    use md5::Digest;
    let d = md5::Md5::digest(format!("{USERNAME}:{REALM}:{PASSWORD}").as_bytes());
    let mut k = [0u8; 16];
    k.copy_from_slice(&d);
    k
}

/// The length of the frame at the start of `buf` (STUN or ChannelData,
/// padded as TCP carries it), when its header is there.
fn frame_len(buf: &[u8]) -> Result<Option<usize>, TurnError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
    match buf[0] & 0xC0 {
        0x00 => Ok(Some(20 + len)),
        0x40 => Ok(Some((4 + len).div_ceil(4) * 4)),
        _ => Err(TurnError::Malformed),
    }
}

fn parse(frame: &[u8]) -> Result<Message<'_>, TurnError> {
    if frame.len() < 20 || frame[4..8] != COOKIE {
        return Err(TurnError::Malformed);
    }
    let kind = u16::from_be_bytes([frame[0], frame[1]]);
    let mut txid = [0u8; 12];
    txid.copy_from_slice(&frame[8..20]);
    let mut attrs = Vec::new();
    let mut at = 20;
    let mut integrity_at = None;
    while at + 4 <= frame.len() {
        let t = u16::from_be_bytes([frame[at], frame[at + 1]]);
        let l = usize::from(u16::from_be_bytes([frame[at + 2], frame[at + 3]]));
        let v = frame.get(at + 4..at + 4 + l).ok_or(TurnError::Malformed)?;
        if t == ATTR_MESSAGE_INTEGRITY {
            integrity_at = Some(at);
        }
        // Attributes after MESSAGE-INTEGRITY (FINGERPRINT) are not covered.
        if integrity_at.is_none() || t == ATTR_MESSAGE_INTEGRITY {
            attrs.push((t, v));
        }
        if attrs.len() > 64 {
            return Err(TurnError::Malformed);
        }
        at += 4 + l.div_ceil(4) * 4;
    }
    Ok(Message {
        kind,
        txid,
        attrs,
        integrity_at,
        raw: frame,
    })
}

impl Message<'_> {
    fn attr(&self, t: u16) -> Option<&[u8]> {
        self.attrs.iter().find(|(k, _)| *k == t).map(|(_, v)| *v)
    }

    fn xor_address(&self, t: u16) -> Option<SocketAddr> {
        let v = self.attr(t)?;
        if v.len() < 8 {
            return None;
        }
        let port = u16::from_be_bytes([v[2], v[3]]) ^ 0x2112;
        match v[1] {
            0x01 => {
                let mut ip = [0u8; 4];
                for i in 0..4 {
                    ip[i] = v[4 + i] ^ COOKIE[i];
                }
                Some(SocketAddr::new(IpAddr::from(ip), port))
            }
            0x02 if v.len() >= 20 => {
                let mut ip = [0u8; 16];
                for i in 0..16 {
                    let mask = if i < 4 { COOKIE[i] } else { self.txid[i - 4] };
                    ip[i] = v[4 + i] ^ mask;
                }
                Some(SocketAddr::new(IpAddr::from(ip), port))
            }
            _ => None,
        }
    }
}

struct Builder {
    buf: Vec<u8>,
    txid: [u8; 12],
}

impl Builder {
    fn new(kind: u16, txid: [u8; 12]) -> Builder {
        let mut buf = Vec::with_capacity(128);
        buf.extend_from_slice(&kind.to_be_bytes());
        buf.extend_from_slice(&[0, 0]);
        buf.extend_from_slice(&COOKIE);
        buf.extend_from_slice(&txid);
        Builder { buf, txid }
    }

    fn attr(&mut self, t: u16, v: &[u8]) {
        self.buf.extend_from_slice(&t.to_be_bytes());
        self.buf.extend_from_slice(&(v.len() as u16).to_be_bytes());
        self.buf.extend_from_slice(v);
        while self.buf.len() % 4 != 0 {
            self.buf.push(0);
        }
    }

    fn xor_address(&mut self, t: u16, a: SocketAddr) {
        let mut v = vec![0u8];
        let port = a.port() ^ 0x2112;
        match a.ip() {
            IpAddr::V4(ip) => {
                v.push(0x01);
                v.extend_from_slice(&port.to_be_bytes());
                v.extend(ip.octets().iter().zip(COOKIE).map(|(b, c)| b ^ c));
            }
            IpAddr::V6(ip) => {
                v.push(0x02);
                v.extend_from_slice(&port.to_be_bytes());
                let mut mask = COOKIE.to_vec();
                mask.extend_from_slice(&self.txid);
                v.extend(ip.octets().iter().zip(mask).map(|(b, c)| b ^ c));
            }
        }
        self.attr(t, &v);
    }

    fn error(&mut self, code: u16, reason: &str) {
        let mut v = vec![0, 0, (code / 100) as u8, (code % 100) as u8];
        v.extend_from_slice(reason.as_bytes());
        self.attr(ATTR_ERROR_CODE, &v);
    }

    /// The message, with MESSAGE-INTEGRITY when a key is given.
    fn finish(mut self, key: Option<&[u8; 16]>) -> Vec<u8> {
        if let Some(key) = key {
            let len = (self.buf.len() - 20 + 24) as u16;
            self.buf[2..4].copy_from_slice(&len.to_be_bytes());
            let k = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, key);
            let tag = ring::hmac::sign(&k, &self.buf);
            self.attr(ATTR_MESSAGE_INTEGRITY, tag.as_ref());
        }
        let len = (self.buf.len() - 20) as u16;
        self.buf[2..4].copy_from_slice(&len.to_be_bytes());
        self.buf
    }
}

// The client side of STUN, for `<StunServer>`: kiln asks what address
// its datagrams come from (its public address behind a NAT).

const ATTR_MAPPED_ADDRESS: u16 = 0x0001;
const ATTR_SOFTWARE: u16 = 0x8022;

/// A Binding request with transaction id `txid`.
pub fn binding_request(txid: [u8; 12]) -> Vec<u8> {
    let mut b = Builder::new(BINDING_REQUEST, txid);
    b.attr(
        ATTR_SOFTWARE,
        concat!("kiln ", env!("CARGO_PKG_VERSION")).as_bytes(),
    );
    b.finish(None)
}

/// The address a Binding success answer to `txid` reports (its
/// XOR-MAPPED-ADDRESS, or the MAPPED-ADDRESS of an RFC 3489 server);
/// `None` for anything else.
pub fn mapped_address(datagram: &[u8], txid: [u8; 12]) -> Option<SocketAddr> {
    let m = parse(datagram).ok()?;
    if m.kind != BINDING_REQUEST | SUCCESS || m.txid != txid {
        return None;
    }
    m.xor_address(ATTR_XOR_MAPPED_ADDRESS).or_else(|| {
        let v = m.attr(ATTR_MAPPED_ADDRESS)?;
        let port = u16::from_be_bytes([*v.get(2)?, *v.get(3)?]);
        let ip = match v[1] {
            0x01 => IpAddr::from(<[u8; 4]>::try_from(v.get(4..8)?).ok()?),
            0x02 => IpAddr::from(<[u8; 16]>::try_from(v.get(4..20)?).ok()?),
            _ => return None,
        };
        Some(SocketAddr::new(ip, port))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_answer_gives_the_mapped_address() {
        let txid = [9u8; 12];
        let req = binding_request(txid);
        let m = parse(&req).unwrap();
        assert_eq!((m.kind, m.txid), (BINDING_REQUEST, txid));
        for public in ["203.0.113.7:40123", "[2001:db8::7]:5000"] {
            let public: SocketAddr = public.parse().unwrap();
            let mut b = Builder::new(BINDING_REQUEST | SUCCESS, txid);
            b.xor_address(ATTR_XOR_MAPPED_ADDRESS, public);
            let answer = b.finish(None);
            assert_eq!(mapped_address(&answer, txid), Some(public));
            // Another transaction's answer, a request, cut: nothing.
            assert_eq!(mapped_address(&answer, [1; 12]), None);
            assert_eq!(mapped_address(&req, txid), None);
            for cut in 0..answer.len() {
                let _ = mapped_address(&answer[..cut], txid);
            }
        }
        // An RFC 3489 server's MAPPED-ADDRESS.
        let mut b = Builder::new(BINDING_REQUEST | SUCCESS, txid);
        b.attr(ATTR_MAPPED_ADDRESS, &[0, 1, 0x1f, 0x90, 198, 51, 100, 9]);
        assert_eq!(
            mapped_address(&b.finish(None), txid),
            Some("198.51.100.9:8080".parse().unwrap())
        );
    }

    fn conn() -> TurnConn {
        TurnConn::new(
            "127.0.0.1:40000".parse().unwrap(),
            "127.0.0.1:50001".parse().unwrap(),
            vec!["127.0.0.1:10000".parse().unwrap()],
            "nonce123".into(),
        )
    }

    /// A client request with USERNAME, REALM, NONCE, MESSAGE-INTEGRITY.
    fn signed(kind: u16, extra: impl FnOnce(&mut Builder)) -> Vec<u8> {
        let mut b = Builder::new(kind, [3; 12]);
        extra(&mut b);
        b.attr(ATTR_USERNAME, USERNAME.as_bytes());
        b.attr(ATTR_REALM, REALM.as_bytes());
        b.attr(ATTR_NONCE, b"nonce123");
        b.finish(Some(&md5_key()))
    }

    fn reply(out: &[TurnOutput]) -> Message<'_> {
        match &out[0] {
            TurnOutput::Reply(r) => parse(r).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn allocate_challenge_then_success_then_relay_to_kiln_only() {
        let mut c = conn();
        // Unauthenticated: 401 with realm and nonce.
        let mut plain = Builder::new(ALLOCATE_REQUEST, [1; 12]);
        plain.attr(0x0019, &[17, 0, 0, 0]);
        let out = c.feed(&plain.finish(None)).unwrap();
        let m = reply(&out);
        assert_eq!(m.kind, ALLOCATE_REQUEST | ERROR);
        assert_eq!(m.attr(ATTR_ERROR_CODE).unwrap()[2..4], [4, 1]);
        assert_eq!(m.attr(ATTR_NONCE), Some(&b"nonce123"[..]));
        // A wrong password: 401 again.
        let mut b = Builder::new(ALLOCATE_REQUEST, [2; 12]);
        b.attr(ATTR_USERNAME, b"ome");
        b.attr(ATTR_REALM, REALM.as_bytes());
        b.attr(ATTR_NONCE, b"nonce123");
        let wrong = b.finish(Some(&[0u8; 16]));
        assert_eq!(
            reply(&c.feed(&wrong).unwrap()).kind,
            ALLOCATE_REQUEST | ERROR
        );
        assert!(!c.is_allocated());
        // Good: the relayed address, byte by byte.
        let good = signed(ALLOCATE_REQUEST, |b| b.attr(0x0019, &[17, 0, 0, 0]));
        let mut out = Vec::new();
        for byte in &good {
            out.extend(c.feed(std::slice::from_ref(byte)).unwrap());
        }
        let m = reply(&out);
        assert_eq!(m.kind, ALLOCATE_REQUEST | SUCCESS);
        assert_eq!(m.xor_address(ATTR_XOR_RELAYED_ADDRESS), Some(c.relayed()));
        assert!(c.is_allocated());
        // Send to kiln's ICE socket: delivered; to anyone else: dropped.
        let send = |peer: &str| {
            let mut b = Builder::new(SEND_INDICATION, [4; 12]);
            b.xor_address(ATTR_XOR_PEER_ADDRESS, peer.parse().unwrap());
            b.attr(ATTR_DATA, b"stun or dtls");
            b.finish(None)
        };
        assert_eq!(
            c.feed(&send("127.0.0.1:10000")).unwrap(),
            vec![TurnOutput::Datagram {
                peer: "127.0.0.1:10000".parse().unwrap(),
                data: b"stun or dtls".to_vec()
            }]
        );
        assert!(c.feed(&send("8.8.8.8:53")).unwrap().is_empty());
        // ChannelBind to anyone but kiln's ICE socket: refused, as Send is.
        let elsewhere = signed(CHANNEL_BIND_REQUEST, |b| {
            b.attr(ATTR_CHANNEL_NUMBER, &[0x40, 0x02, 0, 0]);
            b.xor_address(ATTR_XOR_PEER_ADDRESS, "8.8.8.8:53".parse().unwrap());
        });
        assert_eq!(
            reply(&c.feed(&elsewhere).unwrap()).kind,
            CHANNEL_BIND_REQUEST | ERROR
        );
        // ChannelBind, then ChannelData both ways.
        let bind = signed(CHANNEL_BIND_REQUEST, |b| {
            b.attr(ATTR_CHANNEL_NUMBER, &[0x40, 0x01, 0, 0]);
            b.xor_address(ATTR_XOR_PEER_ADDRESS, "127.0.0.1:10000".parse().unwrap());
        });
        assert_eq!(
            reply(&c.feed(&bind).unwrap()).kind,
            CHANNEL_BIND_REQUEST | SUCCESS
        );
        let wrapped = c.wrap("127.0.0.1:10000".parse().unwrap(), b"hello");
        assert_eq!(
            wrapped,
            vec![0x40, 0x01, 0, 5, b'h', b'e', b'l', b'l', b'o', 0, 0, 0]
        );
        assert_eq!(
            c.feed(&wrapped).unwrap(),
            vec![TurnOutput::Datagram {
                peer: "127.0.0.1:10000".parse().unwrap(),
                data: b"hello".to_vec()
            }]
        );
    }

    #[test]
    fn bounded_and_garbage_is_an_error() {
        let mut c = conn();
        assert_eq!(c.feed(&[0xff; 8]), Err(TurnError::Malformed));
        let mut c = conn();
        // A huge declared message before allocation.
        let mut big = Builder::new(ALLOCATE_REQUEST, [1; 12]).finish(None);
        big[2..4].copy_from_slice(&0xfff0u16.to_be_bytes());
        assert_eq!(c.feed(&big), Err(TurnError::TooLong));
        let mut c = conn();
        for cut in 0..40 {
            let _ = c.feed(&signed(ALLOCATE_REQUEST, |_| {})[..cut]);
        }
    }
}
