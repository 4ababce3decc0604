//! SRT wire format: parsing and building of data and control packets
//! (draft-sharabayko-srt, libsrt 1.5 byte layout), sequence/message number
//! arithmetic and handshake rejection codes.
//!
//! This module is pure (no state, no time, no I/O). Parsing borrows from the
//! datagram and never allocates except for the stream id string of a
//! handshake (bounded by [`MAX_STREAM_ID_LEN`]). Building appends into a
//! caller-provided `Vec<u8>`. It is not a protocol state machine: see
//! `listener` and `caller` for that. Encryption (KMREQ/KMRSP contents) is not
//! decoded, only detected.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// Size of the common SRT header (data and control).
pub const HEADER_LEN: usize = 16;
/// Size of the handshake control information field without extensions.
pub const HANDSHAKE_CIF_LEN: usize = 48;
/// Largest payload that fits a 1500-byte MTU (1500 - 20 IP - 8 UDP - 16 SRT).
pub const MAX_PAYLOAD_LEN: usize = 1456;
/// Default MTU advertised in handshakes.
pub const DEFAULT_MTU: u32 = 1500;
/// Default flow window (packets) advertised in handshakes.
pub const DEFAULT_FLOW_WINDOW: u32 = 8192;
/// Magic code a v5 listener puts in the extension field of its induction response.
pub const SRT_MAGIC_CODE: u16 = 0x4A17;
/// Longest accepted stream id (libsrt limit).
pub const MAX_STREAM_ID_LEN: usize = 512;
/// The SRT version this implementation announces (1.5.3).
pub const SRT_VERSION: u32 = 0x0001_0503;

/// Handshake extension flags (extension field of a v5 conclusion).
pub const HS_EXT_HSREQ: u16 = 0x1;
/// A KMREQ/KMRSP extension is present.
pub const HS_EXT_KMREQ: u16 = 0x2;
/// SID / congestion / filter / group extensions may be present.
pub const HS_EXT_CONFIG: u16 = 0x4;

/// Handshake extension block types.
pub const SRT_CMD_HSREQ: u16 = 1;
/// HSRSP extension block.
pub const SRT_CMD_HSRSP: u16 = 2;
/// KMREQ extension block.
pub const SRT_CMD_KMREQ: u16 = 3;
/// KMRSP extension block.
pub const SRT_CMD_KMRSP: u16 = 4;
/// Stream id extension block.
pub const SRT_CMD_SID: u16 = 5;
/// Congestion controller name extension block (skipped).
pub const SRT_CMD_CONGESTION: u16 = 6;
/// Packet filter extension block (skipped).
pub const SRT_CMD_FILTER: u16 = 7;
/// Group extension block (skipped).
pub const SRT_CMD_GROUP: u16 = 8;

/// A 31-bit packet sequence number with wrap-around arithmetic.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct SeqNumber(u32);

impl SeqNumber {
    /// Largest value (2^31 - 1).
    pub const MAX: u32 = 0x7FFF_FFFF;

    /// Builds from the low 31 bits of `v`.
    pub const fn new(v: u32) -> Self {
        SeqNumber(v & Self::MAX)
    }
    /// The raw 31-bit value.
    pub const fn value(self) -> u32 {
        self.0
    }
    /// `self + n` modulo 2^31.
    pub const fn add(self, n: u32) -> Self {
        SeqNumber(self.0.wrapping_add(n) & Self::MAX)
    }
    /// `self - n` modulo 2^31.
    pub const fn sub(self, n: u32) -> Self {
        SeqNumber(self.0.wrapping_sub(n) & Self::MAX)
    }
    /// The following sequence number.
    pub const fn next(self) -> Self {
        self.add(1)
    }
    /// Signed distance `self - other`, in (-2^30, 2^30].
    pub const fn diff(self, other: SeqNumber) -> i32 {
        let d = self.0.wrapping_sub(other.0) & Self::MAX;
        if d > 0x4000_0000 {
            ((d << 1) as i32) >> 1
        } else {
            d as i32
        }
    }
    /// True when `self` comes strictly before `other`.
    pub const fn before(self, other: SeqNumber) -> bool {
        self.diff(other) < 0
    }
}

impl fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A 26-bit message number (wraps from the maximum back to 1; 0 is unused).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct MsgNumber(u32);

impl MsgNumber {
    /// Largest value (2^26 - 1).
    pub const MAX: u32 = 0x03FF_FFFF;
    /// Builds from the low 26 bits of `v`.
    pub const fn new(v: u32) -> Self {
        MsgNumber(v & Self::MAX)
    }
    /// The raw value.
    pub const fn value(self) -> u32 {
        self.0
    }
    /// The following message number (libsrt wraps to 1, skipping 0).
    pub const fn next(self) -> Self {
        if self.0 >= Self::MAX {
            MsgNumber(1)
        } else {
            MsgNumber(self.0 + 1)
        }
    }
}

/// Packet position flags (PP) of a data packet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PacketPosition {
    /// `10`: first packet of a message.
    First,
    /// `00`: middle packet of a message.
    Middle,
    /// `01`: last packet of a message.
    Last,
    /// `11`: the whole message in one packet (live mode).
    Solo,
}

impl PacketPosition {
    pub(crate) fn from_bits(b: u32) -> Self {
        match b & 3 {
            0b10 => PacketPosition::First,
            0b00 => PacketPosition::Middle,
            0b01 => PacketPosition::Last,
            _ => PacketPosition::Solo,
        }
    }
    pub(crate) fn bits(self) -> u32 {
        match self {
            PacketPosition::First => 0b10,
            PacketPosition::Middle => 0b00,
            PacketPosition::Last => 0b01,
            PacketPosition::Solo => 0b11,
        }
    }
}

/// Encryption key flags (KK) of a data packet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KeyFlags {
    /// `00`: not encrypted.
    None,
    /// `01`: encrypted with the even key.
    Even,
    /// `10`: encrypted with the odd key.
    Odd,
    /// `11`: both (only meaningful in KM messages).
    Both,
}

impl KeyFlags {
    pub(crate) fn from_bits(b: u32) -> Self {
        match b & 3 {
            0 => KeyFlags::None,
            1 => KeyFlags::Even,
            2 => KeyFlags::Odd,
            _ => KeyFlags::Both,
        }
    }
    pub(crate) fn bits(self) -> u32 {
        match self {
            KeyFlags::None => 0,
            KeyFlags::Even => 1,
            KeyFlags::Odd => 2,
            KeyFlags::Both => 3,
        }
    }
}

/// The header of a data packet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct DataHeader {
    /// Packet sequence number.
    pub seq: SeqNumber,
    /// PP flags.
    pub position: PacketPosition,
    /// O flag: deliver in order.
    pub in_order: bool,
    /// KK flags.
    pub key: KeyFlags,
    /// R flag: this is a retransmission (only meaningful with REXMITFLG).
    pub retransmitted: bool,
    /// Message number.
    pub msg: MsgNumber,
    /// Sender timestamp in microseconds since its connection start (wraps).
    pub timestamp: u32,
    /// Destination socket id.
    pub dest_socket: u32,
}

impl DataHeader {
    /// Appends the 16-byte header to `buf`.
    pub fn write(&self, buf: &mut Vec<u8>) {
        let w1 = (self.position.bits() << 30)
            | (u32::from(self.in_order) << 29)
            | (self.key.bits() << 27)
            | (u32::from(self.retransmitted) << 26)
            | self.msg.value();
        buf.extend_from_slice(&self.seq.value().to_be_bytes());
        buf.extend_from_slice(&w1.to_be_bytes());
        buf.extend_from_slice(&self.timestamp.to_be_bytes());
        buf.extend_from_slice(&self.dest_socket.to_be_bytes());
    }
}

/// A parsed data packet, borrowing its payload from the datagram.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct DataPacket<'a> {
    /// Header fields.
    pub header: DataHeader,
    /// Payload bytes.
    pub payload: &'a [u8],
}

/// Control packet types.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ControlType {
    /// 0x0000
    Handshake,
    /// 0x0001
    Keepalive,
    /// 0x0002
    Ack,
    /// 0x0003
    Nak,
    /// 0x0004
    Congestion,
    /// 0x0005
    Shutdown,
    /// 0x0006
    AckAck,
    /// 0x0007
    DropReq,
    /// 0x0008
    PeerError,
    /// 0x7FFF (HSv4 SRT extension messages)
    UserDefined,
}

impl ControlType {
    /// The 15-bit wire value.
    pub fn value(self) -> u16 {
        match self {
            ControlType::Handshake => 0,
            ControlType::Keepalive => 1,
            ControlType::Ack => 2,
            ControlType::Nak => 3,
            ControlType::Congestion => 4,
            ControlType::Shutdown => 5,
            ControlType::AckAck => 6,
            ControlType::DropReq => 7,
            ControlType::PeerError => 8,
            ControlType::UserDefined => 0x7FFF,
        }
    }
}

/// Appends a control header.
pub fn write_control_header(
    buf: &mut Vec<u8>,
    kind: ControlType,
    subtype: u16,
    type_info: u32,
    timestamp: u32,
    dest_socket: u32,
) {
    let w0 = 0x8000_0000 | (u32::from(kind.value()) << 16) | u32::from(subtype);
    buf.extend_from_slice(&w0.to_be_bytes());
    buf.extend_from_slice(&type_info.to_be_bytes());
    buf.extend_from_slice(&timestamp.to_be_bytes());
    buf.extend_from_slice(&dest_socket.to_be_bytes());
}

/// Handshake request type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum HandshakeType {
    /// 1
    Induction,
    /// 0
    WaveAHand,
    /// -1
    Conclusion,
    /// -2
    Agreement,
    /// -3
    Done,
    /// 1000 + reason: the peer rejected the connection.
    Rejection(RejectReason),
    /// Anything else.
    Other(u32),
}

impl HandshakeType {
    /// Decodes the wire value.
    pub fn from_u32(v: u32) -> Self {
        match v {
            1 => HandshakeType::Induction,
            0 => HandshakeType::WaveAHand,
            0xFFFF_FFFF => HandshakeType::Conclusion,
            0xFFFF_FFFE => HandshakeType::Agreement,
            0xFFFF_FFFD => HandshakeType::Done,
            1000..=0x7FFF_FFFF => HandshakeType::Rejection(RejectReason::from_code(v - 1000)),
            other => HandshakeType::Other(other),
        }
    }
    /// The wire value.
    pub fn to_u32(self) -> u32 {
        match self {
            HandshakeType::Induction => 1,
            HandshakeType::WaveAHand => 0,
            HandshakeType::Conclusion => 0xFFFF_FFFF,
            HandshakeType::Agreement => 0xFFFF_FFFE,
            HandshakeType::Done => 0xFFFF_FFFD,
            HandshakeType::Rejection(r) => r.code().saturating_add(1000),
            HandshakeType::Other(v) => v,
        }
    }
}

/// Why a handshake was rejected (libsrt `SRT_REJ_*` and `SRT_REJX_*` codes).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum RejectReason {
    /// 0: unknown reason.
    Unknown,
    /// 1: system function error.
    System,
    /// 2: rejected by peer.
    Peer,
    /// 3: resource allocation problem.
    Resource,
    /// 4: incorrect data in handshake.
    Rogue,
    /// 5: listener's backlog exceeded.
    Backlog,
    /// 6: internal program error.
    Ipe,
    /// 7: socket is closing.
    Close,
    /// 8: peer is older than the minimum version.
    Version,
    /// 9: rendezvous cookie collision.
    RdvCookie,
    /// 10: wrong password.
    BadSecret,
    /// 11: password required or unexpected (encryption mismatch).
    Unsecure,
    /// 12: stream flag collision.
    MessageApi,
    /// 13: incompatible congestion controller.
    Congestion,
    /// 14: incompatible packet filter.
    Filter,
    /// 15: incompatible group.
    Group,
    /// 16: connection timeout.
    Timeout,
    /// 17: crypto mode mismatch.
    Crypto,
    /// 1000 + n: server-defined code, HTTP-like (`SRT_REJX_*`, e.g. 403, 404, 409).
    Predefined(u16),
    /// 2000 + n: user-defined code.
    UserDefined(u16),
    /// Any other code.
    Other(u32),
}

impl RejectReason {
    /// Not authorized (SRT_REJX_UNAUTHORIZED, 1401).
    pub const UNAUTHORIZED: RejectReason = RejectReason::Predefined(401);
    /// Forbidden (SRT_REJX_FORBIDDEN, 1403).
    pub const FORBIDDEN: RejectReason = RejectReason::Predefined(403);
    /// Resource not found (SRT_REJX_NOTFOUND, 1404).
    pub const NOT_FOUND: RejectReason = RejectReason::Predefined(404);
    /// Conflict, e.g. stream already published (SRT_REJX_CONFLICT, 1409).
    pub const CONFLICT: RejectReason = RejectReason::Predefined(409);

    /// Decodes a reason code (the handshake type minus 1000).
    pub fn from_code(c: u32) -> Self {
        use RejectReason::*;
        match c {
            0 => Unknown,
            1 => System,
            2 => Peer,
            3 => Resource,
            4 => Rogue,
            5 => Backlog,
            6 => Ipe,
            7 => Close,
            8 => Version,
            9 => RdvCookie,
            10 => BadSecret,
            11 => Unsecure,
            12 => MessageApi,
            13 => Congestion,
            14 => Filter,
            15 => Group,
            16 => Timeout,
            17 => Crypto,
            1000..=1999 => Predefined((c - 1000) as u16),
            2000..=67535 => UserDefined((c - 2000) as u16),
            other => Other(other),
        }
    }
    /// The reason code (without the 1000 handshake offset).
    pub fn code(self) -> u32 {
        use RejectReason::*;
        match self {
            Unknown => 0,
            System => 1,
            Peer => 2,
            Resource => 3,
            Rogue => 4,
            Backlog => 5,
            Ipe => 6,
            Close => 7,
            Version => 8,
            RdvCookie => 9,
            BadSecret => 10,
            Unsecure => 11,
            MessageApi => 12,
            Congestion => 13,
            Filter => 14,
            Group => 15,
            Timeout => 16,
            Crypto => 17,
            Predefined(c) => 1000 + u32::from(c),
            UserDefined(c) => 2000 + u32::from(c),
            Other(c) => c,
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use RejectReason::*;
        let s = match self {
            Unknown => "unknown",
            System => "system error",
            Peer => "rejected by peer",
            Resource => "resource allocation problem",
            Rogue => "incorrect handshake data",
            Backlog => "listener backlog exceeded",
            Ipe => "internal program error",
            Close => "socket closing",
            Version => "peer version too old",
            RdvCookie => "rendezvous cookie collision",
            BadSecret => "wrong passphrase",
            Unsecure => "encryption mismatch (a passphrase on one side only)",
            MessageApi => "stream flag collision",
            Congestion => "incompatible congestion controller",
            Filter => "incompatible packet filter",
            Group => "incompatible group",
            Timeout => "connection timeout",
            Crypto => "crypto mode mismatch",
            Predefined(c) => return write!(f, "server code {c}"),
            UserDefined(c) => return write!(f, "user code {c}"),
            Other(c) => return write!(f, "code {c}"),
        };
        f.write_str(s)
    }
}

/// SRT handshake flags (HSREQ/HSRSP).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct SrtFlags(pub u32);

impl SrtFlags {
    /// The sender uses TSBPD.
    pub const TSBPDSND: u32 = 0x01;
    /// The receiver uses TSBPD.
    pub const TSBPDRCV: u32 = 0x02;
    /// Encryption supported (HaiCrypt).
    pub const CRYPT: u32 = 0x04;
    /// Too-late packet drop.
    pub const TLPKTDROP: u32 = 0x08;
    /// Periodic NAK reports.
    pub const NAKREPORT: u32 = 0x10;
    /// The R flag is present in data packets.
    pub const REXMITFLG: u32 = 0x20;
    /// Stream (file) mode instead of message mode.
    pub const STREAM: u32 = 0x40;
    /// Packet filter.
    pub const PACKET_FILTER: u32 = 0x80;
    /// The flags kiln sends in live mode.
    pub const LIVE: SrtFlags = SrtFlags(
        Self::TSBPDSND | Self::TSBPDRCV | Self::TLPKTDROP | Self::NAKREPORT | Self::REXMITFLG,
    );
    /// True when every bit of `bit` is set.
    pub fn has(self, bit: u32) -> bool {
        self.0 & bit == bit
    }
}

/// Contents of an HSREQ or HSRSP extension.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SrtHandshakeExt {
    /// SRT library version, 0x00MMmmpp.
    pub version: u32,
    /// Flags.
    pub flags: SrtFlags,
    /// Receiver TSBPD delay in milliseconds.
    pub recv_tsbpd_delay_ms: u16,
    /// Sender TSBPD delay in milliseconds.
    pub send_tsbpd_delay_ms: u16,
}

/// A handshake control packet body, with the extensions kiln understands.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Handshake {
    /// 4 (induction request, legacy) or 5.
    pub version: u32,
    /// Encryption field (key length / 8, 0 = none).
    pub encryption: u16,
    /// Extension field (flags, socket type or magic code).
    pub extension: u16,
    /// Initial packet sequence number.
    pub initial_seq: SeqNumber,
    /// Maximum transmission unit.
    pub mtu: u32,
    /// Maximum flow window size.
    pub flow_window: u32,
    /// Request type.
    pub hs_type: HandshakeType,
    /// Sender's socket id.
    pub socket_id: u32,
    /// SYN cookie.
    pub cookie: u32,
    /// Peer IP address field, as the 16 raw bytes on the wire.
    pub peer_ip: [u8; 16],
    /// HSREQ extension, if present.
    pub hsreq: Option<SrtHandshakeExt>,
    /// HSRSP extension, if present.
    pub hsrsp: Option<SrtHandshakeExt>,
    /// KMREQ extension: the caller's keying material (encryption asked).
    pub kmreq: Option<Vec<u8>>,
    /// KMRSP extension: the keying material echoed, or one word of KM
    /// state when refused.
    pub kmrsp: Option<Vec<u8>>,
    /// Stream id (SID extension).
    pub stream_id: Option<String>,
}

impl Handshake {
    /// A handshake with every field zero / absent, to fill in.
    pub fn empty(hs_type: HandshakeType) -> Self {
        Handshake {
            version: 5,
            encryption: 0,
            extension: 0,
            initial_seq: SeqNumber::new(0),
            mtu: DEFAULT_MTU,
            flow_window: DEFAULT_FLOW_WINDOW,
            hs_type,
            socket_id: 0,
            cookie: 0,
            peer_ip: [0; 16],
            hsreq: None,
            hsrsp: None,
            kmreq: None,
            kmrsp: None,
            stream_id: None,
        }
    }

    /// Parses a handshake CIF (after the 16-byte header).
    pub fn parse(cif: &[u8]) -> Result<Self, PacketError> {
        if cif.len() < HANDSHAKE_CIF_LEN {
            return Err(PacketError::Truncated);
        }
        let w = |i: usize| be32(cif, i * 4);
        let mut peer_ip = [0u8; 16];
        peer_ip.copy_from_slice(&cif[32..48]);
        let ty = w(1);
        let mut hs = Handshake {
            version: w(0),
            encryption: (ty >> 16) as u16,
            extension: ty as u16,
            initial_seq: SeqNumber::new(w(2)),
            mtu: w(3),
            flow_window: w(4),
            hs_type: HandshakeType::from_u32(w(5)),
            socket_id: w(6),
            cookie: w(7),
            peer_ip,
            hsreq: None,
            hsrsp: None,
            kmreq: None,
            kmrsp: None,
            stream_id: None,
        };
        if hs.version < 5 {
            return Ok(hs);
        }
        let mut rest = &cif[HANDSHAKE_CIF_LEN..];
        while rest.len() >= 4 {
            let ext_type = u16::from_be_bytes([rest[0], rest[1]]);
            let words = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
            let len = words * 4;
            let body = rest.get(4..4 + len).ok_or(PacketError::BadExtension)?;
            rest = &rest[4 + len..];
            match ext_type {
                SRT_CMD_HSREQ | SRT_CMD_HSRSP => {
                    if body.len() < 12 {
                        return Err(PacketError::BadExtension);
                    }
                    let lat = be32(body, 8);
                    let ext = SrtHandshakeExt {
                        version: be32(body, 0),
                        flags: SrtFlags(be32(body, 4)),
                        recv_tsbpd_delay_ms: (lat >> 16) as u16,
                        send_tsbpd_delay_ms: lat as u16,
                    };
                    if ext_type == SRT_CMD_HSREQ {
                        hs.hsreq = Some(ext);
                    } else {
                        hs.hsrsp = Some(ext);
                    }
                }
                SRT_CMD_KMREQ => hs.kmreq = Some(body.to_vec()),
                SRT_CMD_KMRSP => hs.kmrsp = Some(body.to_vec()),
                SRT_CMD_SID => {
                    if body.len() > MAX_STREAM_ID_LEN {
                        return Err(PacketError::BadExtension);
                    }
                    let mut raw = Vec::with_capacity(body.len());
                    for word in body.chunks_exact(4) {
                        raw.extend([word[3], word[2], word[1], word[0]]);
                    }
                    while raw.last() == Some(&0) {
                        raw.pop();
                    }
                    hs.stream_id = Some(String::from_utf8_lossy(&raw).into_owned());
                }
                _ => {} // congestion, filter, group and unknown blocks: skipped
            }
        }
        Ok(hs)
    }

    /// Appends the CIF and its extensions (not the header) to `buf`.
    pub fn write_cif(&self, buf: &mut Vec<u8>) {
        let ty = (u32::from(self.encryption) << 16) | u32::from(self.extension);
        for v in [
            self.version,
            ty,
            self.initial_seq.value(),
            self.mtu,
            self.flow_window,
            self.hs_type.to_u32(),
            self.socket_id,
            self.cookie,
        ] {
            buf.extend_from_slice(&v.to_be_bytes());
        }
        buf.extend_from_slice(&self.peer_ip);
        for (cmd, ext) in [(SRT_CMD_HSREQ, self.hsreq), (SRT_CMD_HSRSP, self.hsrsp)] {
            if let Some(e) = ext {
                buf.extend_from_slice(&cmd.to_be_bytes());
                buf.extend_from_slice(&3u16.to_be_bytes());
                buf.extend_from_slice(&e.version.to_be_bytes());
                buf.extend_from_slice(&e.flags.0.to_be_bytes());
                let lat =
                    (u32::from(e.recv_tsbpd_delay_ms) << 16) | u32::from(e.send_tsbpd_delay_ms);
                buf.extend_from_slice(&lat.to_be_bytes());
            }
        }
        for (cmd, km) in [(SRT_CMD_KMREQ, &self.kmreq), (SRT_CMD_KMRSP, &self.kmrsp)] {
            if let Some(km) = km {
                let words = km.len().div_ceil(4);
                buf.extend_from_slice(&cmd.to_be_bytes());
                buf.extend_from_slice(&(words as u16).to_be_bytes());
                buf.extend_from_slice(km);
                buf.resize(buf.len() + (words * 4 - km.len()), 0);
            }
        }
        if let Some(sid) = &self.stream_id {
            let bytes = &sid.as_bytes()[..sid.len().min(MAX_STREAM_ID_LEN)];
            let words = bytes.len().div_ceil(4);
            buf.extend_from_slice(&SRT_CMD_SID.to_be_bytes());
            buf.extend_from_slice(&(words as u16).to_be_bytes());
            for chunk in bytes.chunks(4) {
                let mut word = [0u8; 4];
                word[..chunk.len()].copy_from_slice(chunk);
                word.reverse();
                buf.extend_from_slice(&word);
            }
        }
    }

    /// Appends a whole handshake packet (header + CIF) to `buf`.
    pub fn write_packet(&self, buf: &mut Vec<u8>, timestamp: u32, dest_socket: u32) {
        write_control_header(buf, ControlType::Handshake, 0, 0, timestamp, dest_socket);
        self.write_cif(buf);
    }
}

/// Encodes an address into the handshake peer IP field, in libsrt's layout
/// (four 32-bit words, each holding the in-memory address bytes of a
/// little-endian host, so every word appears byte-swapped on the wire).
pub fn encode_peer_ip(addr: SocketAddr) -> [u8; 16] {
    let mut out = [0u8; 16];
    match addr.ip() {
        IpAddr::V4(v4) => {
            let mut o = v4.octets();
            o.reverse();
            out[..4].copy_from_slice(&o);
        }
        IpAddr::V6(v6) => {
            let o = v6.octets();
            for (dst, src) in out.chunks_exact_mut(4).zip(o.chunks_exact(4)) {
                dst.copy_from_slice(&[src[3], src[2], src[1], src[0]]);
            }
        }
    }
    out
}

/// Extra statistics carried by a full ACK.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct AckStats {
    /// Round-trip time, microseconds.
    pub rtt_us: u32,
    /// Round-trip time variance, microseconds.
    pub rtt_var_us: u32,
    /// Available receive buffer, packets.
    pub avail_buffer: u32,
    /// Receiving rate, packets per second.
    pub packet_rate: u32,
    /// Estimated link capacity, packets per second.
    pub link_capacity: u32,
    /// Receiving rate, bytes per second.
    pub byte_rate: u32,
}

/// An ACK packet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Ack {
    /// ACK number (0 for light ACKs).
    pub number: u32,
    /// First sequence number not yet received (everything before is acknowledged).
    pub seq: SeqNumber,
    /// Statistics, for full (and small) ACKs; `None` for light ACKs.
    pub stats: Option<AckStats>,
}

impl Ack {
    /// Appends a whole ACK packet to `buf`.
    pub fn write_packet(&self, buf: &mut Vec<u8>, timestamp: u32, dest_socket: u32) {
        write_control_header(
            buf,
            ControlType::Ack,
            0,
            self.number,
            timestamp,
            dest_socket,
        );
        buf.extend_from_slice(&self.seq.value().to_be_bytes());
        if let Some(s) = self.stats {
            for v in [
                s.rtt_us,
                s.rtt_var_us,
                s.avail_buffer,
                s.packet_rate,
                s.link_capacity,
                s.byte_rate,
            ] {
                buf.extend_from_slice(&v.to_be_bytes());
            }
        }
    }
}

/// A compressed loss list (NAK body), borrowed from the datagram.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LossList<'a> {
    raw: &'a [u8],
}

impl<'a> LossList<'a> {
    /// Iterates over inclusive `(first, last)` ranges. Malformed trailing
    /// data (a range start without an end) is ignored.
    pub fn ranges(&self) -> LossRanges<'a> {
        LossRanges { raw: self.raw }
    }
}

/// Iterator over the ranges of a [`LossList`].
#[derive(Clone, Debug)]
pub struct LossRanges<'a> {
    raw: &'a [u8],
}

impl Iterator for LossRanges<'_> {
    type Item = (SeqNumber, SeqNumber);
    fn next(&mut self) -> Option<Self::Item> {
        if self.raw.len() < 4 {
            return None;
        }
        let a = be32(self.raw, 0);
        if a & 0x8000_0000 != 0 {
            if self.raw.len() < 8 {
                self.raw = &[];
                return None;
            }
            let b = be32(self.raw, 4);
            self.raw = &self.raw[8..];
            Some((SeqNumber::new(a), SeqNumber::new(b)))
        } else {
            self.raw = &self.raw[4..];
            Some((SeqNumber::new(a), SeqNumber::new(a)))
        }
    }
}

/// Appends a NAK packet for `ranges` (inclusive), stopping before the packet
/// would exceed `max_len` bytes. Returns the number of ranges written.
pub fn write_nak_packet(
    buf: &mut Vec<u8>,
    timestamp: u32,
    dest_socket: u32,
    ranges: impl Iterator<Item = (SeqNumber, SeqNumber)>,
    max_len: usize,
) -> usize {
    let start = buf.len();
    write_control_header(buf, ControlType::Nak, 0, 0, timestamp, dest_socket);
    let mut n = 0;
    for (a, b) in ranges {
        let need = if a == b { 4 } else { 8 };
        if buf.len() - start + need > max_len {
            break;
        }
        if a == b {
            buf.extend_from_slice(&a.value().to_be_bytes());
        } else {
            buf.extend_from_slice(&(a.value() | 0x8000_0000).to_be_bytes());
            buf.extend_from_slice(&b.value().to_be_bytes());
        }
        n += 1;
    }
    n
}

/// Appends a UMSG_EXT keying-material packet (a key refresh KMREQ, or the
/// KMRSP answering one).
pub fn write_km_packet(
    buf: &mut Vec<u8>,
    request: bool,
    km: &[u8],
    timestamp: u32,
    dest_socket: u32,
) {
    let subtype = if request {
        SRT_CMD_KMREQ
    } else {
        SRT_CMD_KMRSP
    };
    write_control_header(
        buf,
        ControlType::UserDefined,
        subtype,
        0,
        timestamp,
        dest_socket,
    );
    buf.extend_from_slice(km);
}

/// Appends a control packet whose CIF is a 4-byte zero pad (KEEPALIVE,
/// SHUTDOWN, ACKACK, like libsrt).
pub fn write_simple_control(
    buf: &mut Vec<u8>,
    kind: ControlType,
    type_info: u32,
    timestamp: u32,
    dest_socket: u32,
) {
    write_control_header(buf, kind, 0, type_info, timestamp, dest_socket);
    buf.extend_from_slice(&[0, 0, 0, 0]);
}

/// Appends a DROPREQ packet.
pub fn write_dropreq_packet(
    buf: &mut Vec<u8>,
    timestamp: u32,
    dest_socket: u32,
    msg: MsgNumber,
    first: SeqNumber,
    last: SeqNumber,
) {
    write_control_header(
        buf,
        ControlType::DropReq,
        0,
        msg.value(),
        timestamp,
        dest_socket,
    );
    buf.extend_from_slice(&first.value().to_be_bytes());
    buf.extend_from_slice(&last.value().to_be_bytes());
}

/// The body of a control packet.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum ControlBody<'a> {
    /// HANDSHAKE.
    Handshake(Box<Handshake>),
    /// KEEPALIVE.
    Keepalive,
    /// ACK (full, small or light).
    Ack(Ack),
    /// NAK with its loss list.
    Nak(LossList<'a>),
    /// CONGESTION warning.
    Congestion,
    /// SHUTDOWN.
    Shutdown,
    /// ACKACK with the acknowledged ACK number.
    AckAck(u32),
    /// DROPREQ: the sender dropped message `msg`, packets `first..=last`.
    DropReq {
        /// Message number.
        msg: MsgNumber,
        /// First dropped sequence number.
        first: SeqNumber,
        /// Last dropped sequence number.
        last: SeqNumber,
    },
    /// PEERERROR with its error code.
    PeerError(u32),
    /// UMSG_EXT keying material (a key refresh): a KMREQ (`request`) or a
    /// KMRSP, with the KM message as sent.
    KeyMaterial { request: bool, km: &'a [u8] },
    /// User-defined (HSv4 extension) message with its subtype.
    UserDefined(u16),
    /// Unknown control type.
    Unknown(u16),
}

/// A parsed control packet.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ControlPacket<'a> {
    /// Timestamp.
    pub timestamp: u32,
    /// Destination socket id.
    pub dest_socket: u32,
    /// Type and body.
    pub body: ControlBody<'a>,
}

/// Any SRT packet.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Packet<'a> {
    /// A data packet.
    Data(DataPacket<'a>),
    /// A control packet.
    Control(ControlPacket<'a>),
}

/// Errors from [`Packet::parse`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PacketError {
    /// Shorter than the header or than the control body requires.
    Truncated,
    /// A handshake extension overruns the packet or is malformed.
    BadExtension,
}

impl fmt::Display for PacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacketError::Truncated => f.write_str("truncated SRT packet"),
            PacketError::BadExtension => f.write_str("malformed SRT handshake extension"),
        }
    }
}

impl std::error::Error for PacketError {}

fn be32(b: &[u8], at: usize) -> u32 {
    match b.get(at..at + 4) {
        Some(s) => u32::from_be_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

/// Reads the destination socket id of any packet without a full parse.
pub fn peek_dest_socket(datagram: &[u8]) -> Option<u32> {
    (datagram.len() >= HEADER_LEN).then(|| be32(datagram, 12))
}

impl<'a> Packet<'a> {
    /// Parses one datagram.
    pub fn parse(d: &'a [u8]) -> Result<Self, PacketError> {
        if d.len() < HEADER_LEN {
            return Err(PacketError::Truncated);
        }
        let w0 = be32(d, 0);
        let w1 = be32(d, 4);
        let timestamp = be32(d, 8);
        let dest_socket = be32(d, 12);
        let cif = &d[HEADER_LEN..];
        if w0 & 0x8000_0000 == 0 {
            return Ok(Packet::Data(DataPacket {
                header: DataHeader {
                    seq: SeqNumber::new(w0),
                    position: PacketPosition::from_bits(w1 >> 30),
                    in_order: w1 & (1 << 29) != 0,
                    key: KeyFlags::from_bits(w1 >> 27),
                    retransmitted: w1 & (1 << 26) != 0,
                    msg: MsgNumber::new(w1),
                    timestamp,
                    dest_socket,
                },
                payload: cif,
            }));
        }
        let kind = ((w0 >> 16) & 0x7FFF) as u16;
        let subtype = w0 as u16;
        let body = match kind {
            0 => ControlBody::Handshake(Box::new(Handshake::parse(cif)?)),
            1 => ControlBody::Keepalive,
            2 => {
                if cif.len() < 4 {
                    return Err(PacketError::Truncated);
                }
                let stats = (cif.len() >= 16).then(|| AckStats {
                    rtt_us: be32(cif, 4),
                    rtt_var_us: be32(cif, 8),
                    avail_buffer: be32(cif, 12),
                    packet_rate: be32(cif, 16),
                    link_capacity: be32(cif, 20),
                    byte_rate: be32(cif, 24),
                });
                ControlBody::Ack(Ack {
                    number: w1,
                    seq: SeqNumber::new(be32(cif, 0)),
                    stats,
                })
            }
            3 => ControlBody::Nak(LossList { raw: cif }),
            4 => ControlBody::Congestion,
            5 => ControlBody::Shutdown,
            6 => ControlBody::AckAck(w1),
            7 => {
                if cif.len() < 8 {
                    return Err(PacketError::Truncated);
                }
                ControlBody::DropReq {
                    msg: MsgNumber::new(w1),
                    first: SeqNumber::new(be32(cif, 0)),
                    last: SeqNumber::new(be32(cif, 4)),
                }
            }
            8 => ControlBody::PeerError(w1),
            0x7FFF if subtype == SRT_CMD_KMREQ || subtype == SRT_CMD_KMRSP => {
                ControlBody::KeyMaterial {
                    request: subtype == SRT_CMD_KMREQ,
                    km: cif,
                }
            }
            0x7FFF => ControlBody::UserDefined(subtype),
            other => ControlBody::Unknown(other),
        };
        Ok(Packet::Control(ControlPacket {
            timestamp,
            dest_socket,
            body,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_arithmetic_wraps() {
        let max = SeqNumber::new(SeqNumber::MAX);
        assert_eq!(max.next(), SeqNumber::new(0));
        assert_eq!(SeqNumber::new(0).diff(max), 1);
        assert_eq!(max.diff(SeqNumber::new(0)), -1);
        assert!(max.before(SeqNumber::new(5)));
        assert_eq!(SeqNumber::new(3).sub(5), SeqNumber::new(SeqNumber::MAX - 1));
        assert_eq!(SeqNumber::new(10).diff(SeqNumber::new(4)), 6);
        assert_eq!(MsgNumber::new(MsgNumber::MAX).next(), MsgNumber::new(1));
    }

    #[test]
    fn data_roundtrip() {
        let h = DataHeader {
            seq: SeqNumber::new(0x1234_5678),
            position: PacketPosition::Solo,
            in_order: false,
            key: KeyFlags::None,
            retransmitted: true,
            msg: MsgNumber::new(77),
            timestamp: 123_456,
            dest_socket: 0xDEAD_BEEF,
        };
        let mut buf = Vec::new();
        h.write(&mut buf);
        buf.extend_from_slice(b"hello");
        assert_eq!(buf[4] >> 6, 0b11);
        match Packet::parse(&buf).unwrap() {
            Packet::Data(d) => {
                assert_eq!(d.header, h);
                assert_eq!(d.payload, b"hello");
            }
            other => panic!("{other:?}"),
        }
        for pos in [
            PacketPosition::First,
            PacketPosition::Middle,
            PacketPosition::Last,
        ] {
            for key in [KeyFlags::Even, KeyFlags::Odd] {
                let h2 = DataHeader {
                    position: pos,
                    key,
                    in_order: true,
                    retransmitted: false,
                    ..h
                };
                let mut b = Vec::new();
                h2.write(&mut b);
                assert_eq!(
                    Packet::parse(&b).unwrap(),
                    Packet::Data(DataPacket {
                        header: h2,
                        payload: &[]
                    })
                );
            }
        }
    }

    #[test]
    fn handshake_roundtrip_with_sid_byte_order() {
        let mut hs = Handshake::empty(HandshakeType::Conclusion);
        hs.extension = HS_EXT_HSREQ | HS_EXT_CONFIG;
        hs.initial_seq = SeqNumber::new(99);
        hs.socket_id = 42;
        hs.cookie = 7;
        hs.hsreq = Some(SrtHandshakeExt {
            version: SRT_VERSION,
            flags: SrtFlags::LIVE,
            recv_tsbpd_delay_ms: 120,
            send_tsbpd_delay_ms: 200,
        });
        hs.stream_id = Some("abcdefg".into());
        let mut buf = Vec::new();
        hs.write_packet(&mut buf, 5, 0);
        // SID block: type 5, 2 words, "dcba" then "\0gfe".
        let sid = &buf[buf.len() - 12..];
        assert_eq!(sid, b"\x00\x05\x00\x02dcba\x00gfe");
        // latency word: receiver delay high, sender delay low.
        let lat_at = HEADER_LEN + HANDSHAKE_CIF_LEN + 4 + 8;
        assert_eq!(&buf[lat_at..lat_at + 4], &[0, 120, 0, 200]);
        match Packet::parse(&buf).unwrap() {
            Packet::Control(c) => {
                assert_eq!(c.timestamp, 5);
                assert_eq!(c.body, ControlBody::Handshake(Box::new(hs)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rejection_codes() {
        assert_eq!(
            HandshakeType::from_u32(1011),
            HandshakeType::Rejection(RejectReason::Unsecure)
        );
        assert_eq!(
            HandshakeType::Rejection(RejectReason::FORBIDDEN).to_u32(),
            2403
        );
        assert_eq!(
            HandshakeType::from_u32(2404),
            HandshakeType::Rejection(RejectReason::NOT_FOUND)
        );
        assert_eq!(RejectReason::from_code(10), RejectReason::BadSecret);
        assert_eq!(RejectReason::Rogue.code(), 4);
        assert_eq!(RejectReason::Peer.code(), 2);
    }

    #[test]
    fn nak_encoding() {
        let mut buf = Vec::new();
        let ranges = [
            (SeqNumber::new(5), SeqNumber::new(5)),
            (SeqNumber::new(10), SeqNumber::new(12)),
        ];
        assert_eq!(
            write_nak_packet(&mut buf, 0, 1, ranges.into_iter(), 1500),
            2
        );
        assert_eq!(&buf[16..], &[0, 0, 0, 5, 0x80, 0, 0, 10, 0, 0, 0, 12]);
        match Packet::parse(&buf).unwrap() {
            Packet::Control(ControlPacket {
                body: ControlBody::Nak(l),
                ..
            }) => assert_eq!(l.ranges().collect::<Vec<_>>(), ranges.to_vec()),
            other => panic!("{other:?}"),
        }
        let mut small = Vec::new();
        assert_eq!(
            write_nak_packet(&mut small, 0, 1, ranges.into_iter(), 24),
            1
        );
    }

    #[test]
    fn ack_full_and_light() {
        let full = Ack {
            number: 3,
            seq: SeqNumber::new(1000),
            stats: Some(AckStats {
                rtt_us: 100_000,
                rtt_var_us: 50_000,
                avail_buffer: 8000,
                packet_rate: 1,
                link_capacity: 2,
                byte_rate: 3,
            }),
        };
        let light = Ack {
            number: 0,
            seq: SeqNumber::new(7),
            stats: None,
        };
        for a in [full, light] {
            let mut buf = Vec::new();
            a.write_packet(&mut buf, 1, 2);
            assert_eq!(
                Packet::parse(&buf).unwrap(),
                Packet::Control(ControlPacket {
                    timestamp: 1,
                    dest_socket: 2,
                    body: ControlBody::Ack(a)
                })
            );
        }
    }

    #[test]
    fn other_controls() {
        let mut buf = Vec::new();
        write_dropreq_packet(
            &mut buf,
            1,
            2,
            MsgNumber::new(9),
            SeqNumber::new(3),
            SeqNumber::new(4),
        );
        assert!(matches!(
            Packet::parse(&buf).unwrap(),
            Packet::Control(ControlPacket { body: ControlBody::DropReq { msg, .. }, .. }) if msg.value() == 9
        ));
        for (kind, body) in [
            (ControlType::Keepalive, ControlBody::Keepalive),
            (ControlType::Shutdown, ControlBody::Shutdown),
            (ControlType::AckAck, ControlBody::AckAck(17)),
            (ControlType::Congestion, ControlBody::Congestion),
            (ControlType::PeerError, ControlBody::PeerError(17)),
        ] {
            buf.clear();
            write_simple_control(&mut buf, kind, 17, 0, 0);
            assert_eq!(
                Packet::parse(&buf).unwrap().clone(),
                Packet::Control(ControlPacket {
                    timestamp: 0,
                    dest_socket: 0,
                    body
                })
            );
        }
        assert_eq!(Packet::parse(&[0; 15]), Err(PacketError::Truncated));
    }

    #[test]
    fn peer_ip_layout() {
        let ip = encode_peer_ip("127.0.0.1:9000".parse().unwrap());
        assert_eq!(&ip[..4], &[1, 0, 0, 127]);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..2000)) {
            let _ = Packet::parse(&data);
            if let Ok(Packet::Control(ControlPacket { body: ControlBody::Nak(l), .. })) = Packet::parse(&data) {
                let _ = l.ranges().count();
            }
        }

        #[test]
        fn handshake_with_arbitrary_extensions_never_panics(tail in proptest::collection::vec(proptest::num::u8::ANY, 0..700)) {
            let mut buf = Vec::new();
            Handshake::empty(HandshakeType::Conclusion).write_packet(&mut buf, 0, 0);
            buf.extend_from_slice(&tail);
            let _ = Packet::parse(&buf);
        }

        #[test]
        fn seq_diff_is_antisymmetric(a in 0u32..=SeqNumber::MAX, n in 0u32..0x3FFF_FFFF) {
            let a = SeqNumber::new(a);
            let b = a.add(n);
            proptest::prop_assert_eq!(b.diff(a), n as i32);
            proptest::prop_assert_eq!(a.diff(b), -(n as i32));
        }
    }
}
