//! The RTMP chunk stream: the decoder that reassembles messages from
//! interleaved chunks, the encoder that cuts messages into chunks, and
//! [`RtmpConnection`], which adds the protocol control messages (Set Chunk
//! Size, Abort, Acknowledgement, Window Acknowledgement Size, Set Peer
//! Bandwidth, User Control ping) and an output buffer on top of both.
//!
//! Not here: the handshake (see `handshake`), commands (see `server` and
//! `client`), and anything about sockets or time. The decoder is
//! incremental across any split of the input, bounded (message size, number
//! of chunk streams) and never panics on peer data.

use std::collections::VecDeque;
use std::fmt;

use bytes::{Bytes, BytesMut};

/// A chunk stream id (2..=65599; 2 carries protocol control messages).
pub type ChunkStreamId = u32;

/// A message stream id (0 is the NetConnection; createStream hands out others).
pub type MessageStreamId = u32;

/// RTMP message type ids.
pub mod message_type {
    pub const SET_CHUNK_SIZE: u8 = 1;
    pub const ABORT: u8 = 2;
    pub const ACKNOWLEDGEMENT: u8 = 3;
    pub const USER_CONTROL: u8 = 4;
    pub const WINDOW_ACK_SIZE: u8 = 5;
    pub const SET_PEER_BANDWIDTH: u8 = 6;
    pub const AUDIO: u8 = 8;
    pub const VIDEO: u8 = 9;
    pub const DATA_AMF3: u8 = 15;
    pub const SHARED_OBJECT_AMF3: u8 = 16;
    pub const COMMAND_AMF3: u8 = 17;
    pub const DATA_AMF0: u8 = 18;
    pub const SHARED_OBJECT_AMF0: u8 = 19;
    pub const COMMAND_AMF0: u8 = 20;
    pub const AGGREGATE: u8 = 22;
}

/// User Control event types.
pub mod user_control {
    pub const STREAM_BEGIN: u16 = 0;
    pub const STREAM_EOF: u16 = 1;
    pub const STREAM_DRY: u16 = 2;
    pub const SET_BUFFER_LENGTH: u16 = 3;
    pub const STREAM_IS_RECORDED: u16 = 4;
    pub const PING_REQUEST: u16 = 6;
    pub const PING_RESPONSE: u16 = 7;
}

/// The chunk stream ids kiln sends on.
pub mod csid {
    use super::ChunkStreamId;
    pub const CONTROL: ChunkStreamId = 2;
    pub const COMMAND: ChunkStreamId = 3;
    pub const AUDIO: ChunkStreamId = 4;
    pub const VIDEO: ChunkStreamId = 6;
    pub const STREAM: ChunkStreamId = 8;
}

/// The chunk size both directions start with.
pub const DEFAULT_CHUNK_SIZE: u32 = 128;
/// The largest chunk size the protocol allows.
pub const MAX_CHUNK_SIZE: u32 = 0x7FFF_FFFF;
/// Default limit on one message's length.
pub const DEFAULT_MAX_MESSAGE_SIZE: u32 = 8 * 1024 * 1024;
/// Default limit on the number of chunk streams a peer may open.
pub const DEFAULT_MAX_CHUNK_STREAMS: usize = 64;

const EXTENDED: u32 = 0xFF_FFFF;

/// One reassembled message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtmpMessage {
    pub chunk_stream: ChunkStreamId,
    /// Milliseconds, as on the wire (wraps at 2^32).
    pub timestamp: u32,
    pub type_id: u8,
    pub stream_id: MessageStreamId,
    pub payload: Bytes,
}

/// Why the chunk stream failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkError {
    /// A message longer than the decoder's limit.
    MessageTooLarge { length: u32, limit: u32 },
    /// More chunk streams than the decoder's limit.
    TooManyChunkStreams(usize),
    /// A type 1, 2 or 3 header on a chunk stream never opened by a type 0.
    UnknownChunkStream(ChunkStreamId),
    /// Partial messages across all chunk streams hold more than the limit
    /// (twice the message size limit; 64 KiB before `publish`).
    TooMuchBuffered(u64),
    /// Set Chunk Size with 0 or a bad payload.
    InvalidChunkSize(u32),
    /// A protocol control message too short for its type.
    ShortControlMessage(u8),
}

impl fmt::Display for ChunkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChunkError::MessageTooLarge { length, limit } => {
                write!(f, "message of {length} bytes exceeds the limit of {limit}")
            }
            ChunkError::TooManyChunkStreams(n) => write!(f, "more than {n} chunk streams"),
            ChunkError::UnknownChunkStream(id) => {
                write!(f, "chunk stream {id} continued without a type 0 header")
            }
            ChunkError::TooMuchBuffered(n) => {
                write!(f, "more than {n} bytes of partial messages")
            }
            ChunkError::InvalidChunkSize(n) => write!(f, "invalid chunk size {n}"),
            ChunkError::ShortControlMessage(t) => {
                write!(f, "protocol control message type {t} too short")
            }
        }
    }
}

impl std::error::Error for ChunkError {}

/// Per-chunk-stream receive state.
#[derive(Debug)]
struct InStream {
    id: ChunkStreamId,
    timestamp: u32,
    /// The last timestamp field (absolute after type 0, delta after 1/2).
    ts_field: u32,
    length: u32,
    type_id: u8,
    stream_id: MessageStreamId,
    /// The last type 0/1/2 header used an extended timestamp.
    extended: bool,
    received: u32,
    in_progress: bool,
    payload: BytesMut,
}

#[derive(Debug, Clone, Copy)]
enum ReadState {
    Header,
    Payload { stream: usize, remaining: usize },
}

/// Reassembles messages from chunks. Feed bytes with [`decode`], take
/// messages with [`next_message`]. Set Chunk Size and Abort are applied by
/// the decoder itself (they change how the next bytes parse) and are still
/// returned as messages.
///
/// [`decode`]: ChunkDecoder::decode
/// [`next_message`]: ChunkDecoder::next_message
#[derive(Debug)]
pub struct ChunkDecoder {
    chunk_size: u32,
    max_message_size: u32,
    max_chunk_streams: usize,
    streams: Vec<InStream>,
    hdr: [u8; 18],
    hdr_len: usize,
    state: ReadState,
    messages: VecDeque<RtmpMessage>,
    /// Bytes held in partial messages, all chunk streams together.
    buffered: u64,
    /// The most `buffered` may reach (default: twice the message limit).
    buffer_limit: u64,
}

impl Default for ChunkDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_MAX_CHUNK_STREAMS)
    }
}

struct ParsedHeader {
    fmt: u8,
    csid: ChunkStreamId,
    ts: u32,
    length: u32,
    type_id: u8,
    stream_id: u32,
    /// The timestamp field was 0xFFFFFF (type 0-2).
    extended: bool,
    /// The 4 extended timestamp bytes, when present.
    ext_value: Option<u32>,
    len: usize,
}

impl ChunkDecoder {
    pub fn new(max_message_size: u32, max_chunk_streams: usize) -> Self {
        ChunkDecoder {
            chunk_size: DEFAULT_CHUNK_SIZE,
            max_message_size,
            max_chunk_streams,
            streams: Vec::new(),
            hdr: [0; 18],
            hdr_len: 0,
            state: ReadState::Header,
            messages: VecDeque::new(),
            buffered: 0,
            buffer_limit: 2 * u64::from(max_message_size),
        }
    }

    /// Sets how many bytes of partial messages may be held (e.g. less
    /// before a connection has published). Takes effect with the next
    /// chunk.
    pub fn set_buffer_limit(&mut self, limit: u64) {
        self.buffer_limit = limit;
    }

    /// Bytes held in partial messages and in complete messages not yet
    /// taken.
    pub fn buffered(&self) -> u64 {
        self.buffered
            + self
                .messages
                .iter()
                .map(|m| m.payload.len() as u64)
                .sum::<u64>()
    }

    /// The chunk size the peer sends with.
    pub fn chunk_size(&self) -> u32 {
        self.chunk_size
    }

    /// The next complete message, in arrival order.
    pub fn next_message(&mut self) -> Option<RtmpMessage> {
        self.messages.pop_front()
    }

    fn add_buffered(&mut self, n: usize) -> Result<(), ChunkError> {
        let limit = self.buffer_limit;
        self.buffered += n as u64;
        if self.buffered > limit {
            return Err(ChunkError::TooMuchBuffered(limit));
        }
        Ok(())
    }

    fn find(&self, id: ChunkStreamId) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    /// Parses the chunk header in `h`, or returns `None` if more bytes are
    /// needed.
    fn parse_header(&self, h: &[u8]) -> Result<Option<ParsedHeader>, ChunkError> {
        let Some(&b0) = h.first() else {
            return Ok(None);
        };
        let fmt = b0 >> 6;
        let (csid, basic) = match b0 & 0x3F {
            0 => match h.get(1) {
                Some(&b) => (64 + u32::from(b), 2),
                None => return Ok(None),
            },
            1 => match (h.get(1), h.get(2)) {
                (Some(&b1), Some(&b2)) => (64 + u32::from(b1) + 256 * u32::from(b2), 3),
                _ => return Ok(None),
            },
            n => (u32::from(n), 1),
        };
        let mh = [11usize, 7, 3, 0][fmt as usize];
        let Some(m) = h.get(basic..basic + mh) else {
            return Ok(None);
        };
        let be24 = |b: &[u8]| (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let mut p = ParsedHeader {
            fmt,
            csid,
            ts: 0,
            length: 0,
            type_id: 0,
            stream_id: 0,
            extended: false,
            ext_value: None,
            len: basic + mh,
        };
        if fmt < 3 {
            p.ts = be24(&m[0..3]);
            p.extended = p.ts == EXTENDED;
        }
        if fmt < 2 {
            p.length = be24(&m[3..6]);
            p.type_id = m[6];
        }
        if fmt == 0 {
            p.stream_id = u32::from_le_bytes([m[7], m[8], m[9], m[10]]);
        }
        let has_ext = if fmt < 3 {
            p.extended
        } else {
            match self.find(csid) {
                Some(i) => self.streams[i].extended,
                None => return Err(ChunkError::UnknownChunkStream(csid)),
            }
        };
        if has_ext {
            let Some(e) = h.get(p.len..p.len + 4) else {
                return Ok(None);
            };
            p.ext_value = Some(u32::from_be_bytes([e[0], e[1], e[2], e[3]]));
            p.len += 4;
        }
        Ok(Some(p))
    }

    /// Feeds received bytes. Complete messages queue up for
    /// [`next_message`](ChunkDecoder::next_message).
    pub fn decode(&mut self, mut input: &[u8]) -> Result<(), ChunkError> {
        while !input.is_empty() {
            match self.state {
                ReadState::Header => {
                    let before = self.hdr_len;
                    let n = (self.hdr.len() - before).min(input.len());
                    self.hdr[before..before + n].copy_from_slice(&input[..n]);
                    self.hdr_len += n;
                    let hdr = self.hdr;
                    match self.parse_header(&hdr[..self.hdr_len])? {
                        None => {
                            input = &input[n..];
                        }
                        Some(p) => {
                            // The header did not fit in `before` bytes (or it
                            // would have parsed last time): p.len > before.
                            input = input.get(p.len.saturating_sub(before)..).unwrap_or(&[]);
                            self.hdr_len = 0;
                            self.start_chunk(&p, &hdr)?;
                        }
                    }
                }
                ReadState::Payload { stream, remaining } => {
                    let n = remaining.min(input.len());
                    self.add_buffered(n)?;
                    let s = &mut self.streams[stream];
                    s.payload.extend_from_slice(&input[..n]);
                    s.received += n as u32;
                    input = &input[n..];
                    self.after_payload(stream, remaining - n)?;
                }
            }
        }
        Ok(())
    }

    fn start_chunk(&mut self, p: &ParsedHeader, hdr: &[u8; 18]) -> Result<(), ChunkError> {
        let idx = match self.find(p.csid) {
            Some(i) => i,
            None => {
                if p.fmt != 0 {
                    return Err(ChunkError::UnknownChunkStream(p.csid));
                }
                if self.streams.len() >= self.max_chunk_streams {
                    return Err(ChunkError::TooManyChunkStreams(self.max_chunk_streams));
                }
                self.streams.push(InStream {
                    id: p.csid,
                    timestamp: 0,
                    ts_field: 0,
                    length: 0,
                    type_id: 0,
                    stream_id: 0,
                    extended: false,
                    received: 0,
                    in_progress: false,
                    payload: BytesMut::new(),
                });
                self.streams.len() - 1
            }
        };
        let max = self.max_message_size;
        let chunk_size = self.chunk_size;
        // Room reserved up front for a new message: up to 64 KiB, never more
        // than a 64th of the buffer limit per chunk stream (reserved memory
        // is not counted in `buffered`, so it must stay a small part of it).
        let room = (self.buffer_limit / 64).min(64 * 1024) as usize;
        let s = &mut self.streams[idx];
        let mut carried: Option<[u8; 4]> = None;
        if p.fmt < 3 {
            // A new header in the middle of a message: the sender gave up
            // on it. Drop the partial message and start again.
            s.in_progress = false;
            s.received = 0;
            self.buffered = self.buffered.saturating_sub(s.payload.len() as u64);
            s.payload.clear();
            let field = p.ext_value.unwrap_or(p.ts);
            s.extended = p.extended;
            s.ts_field = field;
            if p.fmt == 0 {
                s.timestamp = field;
                s.stream_id = p.stream_id;
            } else {
                s.timestamp = s.timestamp.wrapping_add(field);
            }
            if p.fmt < 2 {
                s.length = p.length;
                s.type_id = p.type_id;
            }
        } else if !s.in_progress {
            // Type 3 starting a new message: same header, same delta.
            s.timestamp = s.timestamp.wrapping_add(s.ts_field);
        } else if let Some(v) = p.ext_value {
            // Continuation with an extended timestamp. Most senders repeat
            // it (ffmpeg, OBS); some don't: then those 4 bytes are payload.
            let left = s.length.saturating_sub(s.received);
            if v != s.ts_field && left >= 4 {
                let e = p.len - 4;
                let mut b = [0u8; 4];
                b.copy_from_slice(&hdr[e..e + 4]);
                carried = Some(b);
            }
        }
        if s.length > max {
            return Err(ChunkError::MessageTooLarge {
                length: s.length,
                limit: max,
            });
        }
        if !s.in_progress {
            s.in_progress = true;
            s.received = 0;
            s.payload.reserve((s.length as usize).min(room));
        }
        let left = s.length.saturating_sub(s.received);
        let mut chunk = left.min(chunk_size) as usize;
        if let Some(b) = carried {
            self.buffered += 4;
            let s = &mut self.streams[idx];
            s.payload.extend_from_slice(&b);
            s.received += 4;
            chunk = chunk.saturating_sub(4);
        }
        self.after_payload(idx, chunk)
    }

    fn after_payload(&mut self, idx: usize, remaining: usize) -> Result<(), ChunkError> {
        if remaining > 0 {
            self.state = ReadState::Payload {
                stream: idx,
                remaining,
            };
            return Ok(());
        }
        self.state = ReadState::Header;
        let s = &mut self.streams[idx];
        if s.received < s.length {
            return Ok(());
        }
        s.in_progress = false;
        s.received = 0;
        self.buffered = self.buffered.saturating_sub(s.payload.len() as u64);
        // A message that outgrew the room reserved for it sits in a buffer
        // grown by doubling (a 260 KiB frame in 512 KiB); what is kept
        // (pre-roll, GOP, queues) holds it exactly, in a copy of its own.
        let len = s.payload.len();
        let payload = if s.payload.capacity() > len + len / 8 + 4096 {
            let exact = Bytes::copy_from_slice(&s.payload);
            s.payload = BytesMut::new();
            exact
        } else {
            s.payload.split().freeze()
        };
        let msg = RtmpMessage {
            chunk_stream: s.id,
            timestamp: s.timestamp,
            type_id: s.type_id,
            stream_id: s.stream_id,
            payload,
        };
        match msg.type_id {
            message_type::SET_CHUNK_SIZE => {
                let v = be32(&msg.payload).ok_or(ChunkError::ShortControlMessage(msg.type_id))?
                    & MAX_CHUNK_SIZE;
                if v == 0 {
                    return Err(ChunkError::InvalidChunkSize(v));
                }
                self.chunk_size = v;
            }
            message_type::ABORT => {
                let id = be32(&msg.payload).ok_or(ChunkError::ShortControlMessage(msg.type_id))?;
                if let Some(i) = self.find(id) {
                    let a = &mut self.streams[i];
                    a.in_progress = false;
                    a.received = 0;
                    self.buffered = self.buffered.saturating_sub(a.payload.len() as u64);
                    a.payload.clear();
                }
            }
            _ => {}
        }
        self.messages.push_back(msg);
        Ok(())
    }
}

fn be32(b: &[u8]) -> Option<u32> {
    let b = b.get(..4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Per-chunk-stream send state.
#[derive(Debug, Clone, Copy)]
struct OutStream {
    id: ChunkStreamId,
    timestamp: u32,
    ts_field: u32,
    length: u32,
    type_id: u8,
    stream_id: MessageStreamId,
}

/// Cuts messages into chunks, choosing the smallest header (type 0, 1, 2
/// or 3) the receiver can resolve, with extended timestamps on every chunk
/// that needs one (including type 3 continuations, as ffmpeg and OBS do).
#[derive(Debug)]
pub struct ChunkEncoder {
    chunk_size: u32,
    streams: Vec<OutStream>,
}

impl Default for ChunkEncoder {
    fn default() -> Self {
        ChunkEncoder {
            chunk_size: DEFAULT_CHUNK_SIZE,
            streams: Vec::new(),
        }
    }
}

impl ChunkEncoder {
    /// Forgets what was last sent on `chunk_stream`: its next message gets a
    /// type 0 header. For a connection that also sends messages cut outside
    /// this encoder ([`write_shared_body`]).
    pub fn forget(&mut self, chunk_stream: ChunkStreamId) {
        self.streams.retain(|s| s.id != chunk_stream);
    }

    /// The chunk size currently used for sending.
    pub fn chunk_size(&self) -> u32 {
        self.chunk_size
    }

    /// Writes a Set Chunk Size message and switches to `size` (clamped to
    /// 1..=0x7FFFFFFF) for every message after it.
    pub fn write_set_chunk_size(&mut self, out: &mut Vec<u8>, size: u32) {
        let size = size.clamp(1, MAX_CHUNK_SIZE);
        self.write_message(
            out,
            csid::CONTROL,
            0,
            message_type::SET_CHUNK_SIZE,
            0,
            &[&size.to_be_bytes()],
        );
        self.chunk_size = size;
    }

    /// Writes one message whose payload is the concatenation of `parts`.
    pub fn write_message(
        &mut self,
        out: &mut Vec<u8>,
        chunk_stream: ChunkStreamId,
        timestamp: u32,
        type_id: u8,
        stream_id: MessageStreamId,
        parts: &[&[u8]],
    ) {
        let chunk_stream = chunk_stream.clamp(2, 65599);
        let total: usize = parts.iter().map(|p| p.len()).sum();
        // Message lengths are 24 bits on the wire; longer payloads are cut.
        let length = u32::try_from(total).unwrap_or(u32::MAX).min(0xFF_FFFF);
        let total = length as usize;
        let idx = match self.streams.iter().position(|s| s.id == chunk_stream) {
            Some(i) => i,
            None => {
                self.streams.push(OutStream {
                    id: chunk_stream,
                    timestamp: 0,
                    ts_field: 0,
                    length: 0,
                    type_id: 0,
                    stream_id: 0,
                });
                usize::MAX
            }
        };
        let (fmt, field) = if idx == usize::MAX {
            (0u8, timestamp)
        } else {
            let prev = self.streams[idx];
            let delta = timestamp.wrapping_sub(prev.timestamp);
            if prev.stream_id != stream_id || (delta as i32) < 0 {
                (0, timestamp)
            } else if prev.type_id == type_id && prev.length == length {
                if delta == prev.ts_field {
                    (3, delta)
                } else {
                    (2, delta)
                }
            } else {
                (1, delta)
            }
        };
        let idx = if idx == usize::MAX {
            self.streams.len() - 1
        } else {
            idx
        };
        self.streams[idx] = OutStream {
            id: chunk_stream,
            timestamp,
            ts_field: field,
            length,
            type_id,
            stream_id,
        };
        let extended = field >= EXTENDED;
        let chunk_size = self.chunk_size as usize;
        let chunks = total.div_ceil(chunk_size).max(1);
        out.reserve(total + 18 + chunks * 8);

        write_basic_header(out, fmt, chunk_stream);
        let f24 = field.min(EXTENDED).to_be_bytes();
        if fmt < 3 {
            out.extend_from_slice(&f24[1..4]);
        }
        if fmt < 2 {
            out.extend_from_slice(&length.to_be_bytes()[1..4]);
            out.push(type_id);
        }
        if fmt == 0 {
            out.extend_from_slice(&stream_id.to_le_bytes());
        }
        if extended {
            out.extend_from_slice(&field.to_be_bytes());
        }
        // Payload, cut at chunk boundaries across the parts.
        let mut written = 0usize;
        let mut in_chunk = 0usize;
        for part in parts {
            let mut part: &[u8] = part;
            while !part.is_empty() && written < total {
                if in_chunk == chunk_size {
                    write_basic_header(out, 3, chunk_stream);
                    if extended {
                        out.extend_from_slice(&field.to_be_bytes());
                    }
                    in_chunk = 0;
                }
                let n = (chunk_size - in_chunk).min(part.len()).min(total - written);
                out.extend_from_slice(&part[..n]);
                part = &part[n..];
                in_chunk += n;
                written += n;
            }
        }
    }
}

/// Cuts a message's payload (the concatenation of `parts`) into chunks of
/// `chunk_size` with the type 3 header of `chunk_stream` between them, for
/// many connections at once (RTMP fan-out cuts each frame once per
/// stream). Each connection puts its own type 0 header in front
/// ([`write_full_header`]). Valid for timestamps below 0xFFFFFF, or for a
/// payload of one chunk (no type 3 header carries the extended field).
/// Returns the number of chunks.
pub fn write_shared_body(
    out: &mut Vec<u8>,
    chunk_stream: ChunkStreamId,
    chunk_size: u32,
    parts: &[&[u8]],
) -> usize {
    let chunk_stream = chunk_stream.clamp(2, 65599);
    let chunk_size = chunk_size.clamp(1, MAX_CHUNK_SIZE) as usize;
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let total = total.min(0xFF_FFFF);
    out.reserve(total + total / chunk_size * 3);
    let (mut written, mut in_chunk, mut chunks) = (0usize, 0usize, 1usize);
    for part in parts {
        let mut part: &[u8] = part;
        while !part.is_empty() && written < total {
            if in_chunk == chunk_size {
                write_basic_header(out, 3, chunk_stream);
                in_chunk = 0;
                chunks += 1;
            }
            let n = (chunk_size - in_chunk).min(part.len()).min(total - written);
            out.extend_from_slice(&part[..n]);
            part = &part[n..];
            in_chunk += n;
            written += n;
        }
    }
    chunks
}

/// The longest type 0 chunk header: 3-byte basic header, 11 bytes, and the
/// extended timestamp.
pub const MAX_FULL_HEADER: usize = 18;

/// Writes the type 0 header of a message of `length` bytes whose body was
/// cut by [`write_shared_body`]; returns its length.
pub fn write_full_header(
    out: &mut [u8; MAX_FULL_HEADER],
    chunk_stream: ChunkStreamId,
    timestamp: u32,
    length: u32,
    type_id: u8,
    stream_id: MessageStreamId,
) -> usize {
    // Per destination per frame in a fan-out: on the stack, no allocation.
    let (basic, mut n) = basic_header(0, chunk_stream.clamp(2, 65599));
    out[..n].copy_from_slice(&basic[..n]);
    let mut put = |bytes: &[u8]| {
        out[n..n + bytes.len()].copy_from_slice(bytes);
        n += bytes.len();
    };
    put(&timestamp.min(EXTENDED).to_be_bytes()[1..4]);
    put(&length.min(0xFF_FFFF).to_be_bytes()[1..4]);
    put(&[type_id]);
    put(&stream_id.to_le_bytes());
    if timestamp >= EXTENDED {
        put(&timestamp.to_be_bytes());
    }
    n
}

/// Whether a message at `timestamp` cut into `chunks` chunks can use a
/// shared body (no type 3 header would need the extended timestamp).
pub fn shares_body(timestamp: u32, chunks: usize) -> bool {
    timestamp < EXTENDED || chunks <= 1
}

fn write_basic_header(out: &mut Vec<u8>, fmt: u8, id: ChunkStreamId) {
    let (h, n) = basic_header(fmt, id);
    out.extend_from_slice(&h[..n]);
}

/// A chunk's basic header (format and chunk stream id): 1 to 3 bytes.
fn basic_header(fmt: u8, id: ChunkStreamId) -> ([u8; 3], usize) {
    let f = fmt << 6;
    if id < 64 {
        ([f | id as u8, 0, 0], 1)
    } else if id < 320 {
        ([f, (id - 64) as u8, 0], 2)
    } else {
        let v = id - 64;
        ([f | 1, (v & 0xFF) as u8, (v >> 8) as u8], 3)
    }
}

/// Bytes waiting to be written to the socket. The loop writes straight from
/// [`pending`](OutputBuffer::pending) and reports what the socket took.
#[derive(Debug, Default)]
pub struct OutputBuffer {
    buf: Vec<u8>,
    start: usize,
}

impl OutputBuffer {
    pub fn pending(&self) -> &[u8] {
        self.buf.get(self.start..).unwrap_or(&[])
    }

    pub fn consume(&mut self, n: usize) {
        self.start = self.start.saturating_add(n).min(self.buf.len());
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
            // A burst (a GOP sent at once) must not pin its memory for the
            // life of the connection: hundreds of push sessions hold one each.
            if self.buf.capacity() > 16 * 1024 {
                self.buf.shrink_to(16 * 1024);
            }
        } else if self.start >= 64 * 1024 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }

    /// The vector new output is appended to.
    pub fn writer(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }
}

/// A chunk stream in both directions plus the protocol control messages:
/// sends an Acknowledgement each time received bytes pass the peer's
/// window, answers Ping Request, and answers Set Peer Bandwidth with a
/// Window Acknowledgement Size. What the sessions build on.
#[derive(Debug)]
pub struct RtmpConnection {
    pub decoder: ChunkDecoder,
    pub encoder: ChunkEncoder,
    pub output: OutputBuffer,
    bytes_received: u64,
    last_ack: u64,
    peer_window: u32,
    sent_window: u32,
}

impl Default for RtmpConnection {
    fn default() -> Self {
        Self::new(ChunkDecoder::default())
    }
}

impl RtmpConnection {
    pub fn new(decoder: ChunkDecoder) -> Self {
        RtmpConnection {
            decoder,
            encoder: ChunkEncoder::default(),
            output: OutputBuffer::default(),
            bytes_received: 0,
            last_ack: 0,
            peer_window: 0,
            sent_window: 0,
        }
    }

    /// Feeds chunk stream bytes (after the handshake).
    pub fn handle_input(&mut self, data: &[u8]) -> Result<(), ChunkError> {
        self.bytes_received += data.len() as u64;
        self.decoder.decode(data)?;
        self.maybe_ack();
        Ok(())
    }

    fn maybe_ack(&mut self) {
        if self.peer_window > 0
            && self.bytes_received - self.last_ack >= u64::from(self.peer_window)
        {
            self.last_ack = self.bytes_received;
            let seq = (self.bytes_received & 0xFFFF_FFFF) as u32;
            self.write_control(message_type::ACKNOWLEDGEMENT, &seq.to_be_bytes());
        }
    }

    /// The next message that is not a protocol control message (those are
    /// handled here).
    pub fn next_message(&mut self) -> Result<Option<RtmpMessage>, ChunkError> {
        while let Some(m) = self.decoder.next_message() {
            match m.type_id {
                message_type::SET_CHUNK_SIZE
                | message_type::ABORT
                | message_type::ACKNOWLEDGEMENT => {}
                message_type::WINDOW_ACK_SIZE => {
                    let w = be32(&m.payload).ok_or(ChunkError::ShortControlMessage(m.type_id))?;
                    self.peer_window = w;
                    self.maybe_ack();
                }
                message_type::SET_PEER_BANDWIDTH => {
                    let w = be32(&m.payload).ok_or(ChunkError::ShortControlMessage(m.type_id))?;
                    if w != self.sent_window {
                        self.write_window_ack_size(w);
                    }
                }
                message_type::USER_CONTROL => {
                    let p = &m.payload;
                    if p.len() >= 6
                        && u16::from_be_bytes([p[0], p[1]]) == user_control::PING_REQUEST
                    {
                        let mut r = [0u8; 6];
                        r[..2].copy_from_slice(&user_control::PING_RESPONSE.to_be_bytes());
                        r[2..].copy_from_slice(&p[2..6]);
                        self.write_control(message_type::USER_CONTROL, &r);
                    }
                }
                _ => return Ok(Some(m)),
            }
        }
        Ok(None)
    }

    /// Writes a protocol control message on chunk stream 2, stream 0.
    pub fn write_control(&mut self, type_id: u8, payload: &[u8]) {
        self.encoder.write_message(
            self.output.writer(),
            csid::CONTROL,
            0,
            type_id,
            0,
            &[payload],
        );
    }

    pub fn write_window_ack_size(&mut self, size: u32) {
        self.sent_window = size;
        self.write_control(message_type::WINDOW_ACK_SIZE, &size.to_be_bytes());
    }

    /// Set Peer Bandwidth with limit type 2 (dynamic).
    pub fn write_set_peer_bandwidth(&mut self, size: u32) {
        let mut p = [0u8; 5];
        p[..4].copy_from_slice(&size.to_be_bytes());
        p[4] = 2;
        self.write_control(message_type::SET_PEER_BANDWIDTH, &p);
    }

    pub fn write_set_chunk_size(&mut self, size: u32) {
        let (enc, out) = (&mut self.encoder, self.output.writer());
        enc.write_set_chunk_size(out, size);
    }

    pub fn write_user_control(&mut self, event: u16, value: u32) {
        let mut p = [0u8; 6];
        p[..2].copy_from_slice(&event.to_be_bytes());
        p[2..].copy_from_slice(&value.to_be_bytes());
        self.write_control(message_type::USER_CONTROL, &p);
    }

    /// Writes any message.
    pub fn write_message(
        &mut self,
        chunk_stream: ChunkStreamId,
        timestamp: u32,
        type_id: u8,
        stream_id: MessageStreamId,
        parts: &[&[u8]],
    ) {
        let (enc, out) = (&mut self.encoder, self.output.writer());
        enc.write_message(out, chunk_stream, timestamp, type_id, stream_id, parts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A shared body behind a connection's own type 0 header is exactly
        /// what the encoder writes for a fresh chunk stream.
        #[test]
        fn shared_body_equals_encoder_output(
            payload in prop::collection::vec(any::<u8>(), 0..3000),
            split in 0usize..3000,
            chunk_size in 1u32..700,
            ts in prop_oneof![0u32..0xFF_FFFF, 0xFF_FFFFu32..u32::MAX],
            csid in prop_oneof![2u32..64, 64u32..400],
            msid in 0u32..3,
        ) {
            let split = split.min(payload.len());
            let parts: [&[u8]; 2] = [&payload[..split], &payload[split..]];
            let mut body = Vec::new();
            let chunks = write_shared_body(&mut body, csid, chunk_size, &parts);
            prop_assume!(shares_body(ts, chunks));
            let mut hdr = [0u8; MAX_FULL_HEADER];
            let n = write_full_header(&mut hdr, csid, ts, payload.len() as u32, 9, msid);
            let mut shared = hdr[..n].to_vec();
            shared.extend_from_slice(&body);
            let mut enc = ChunkEncoder { chunk_size, streams: Vec::new() };
            let mut direct = Vec::new();
            enc.write_message(&mut direct, csid, ts, 9, msid, &parts);
            prop_assert_eq!(shared, direct);
        }
    }

    struct Msg(ChunkStreamId, u32, u8, u32, Vec<u8>);

    fn encode(msgs: &[Msg], chunk_size: u32) -> Vec<u8> {
        let mut enc = ChunkEncoder::default();
        let mut out = Vec::new();
        if chunk_size != DEFAULT_CHUNK_SIZE {
            enc.write_set_chunk_size(&mut out, chunk_size);
        }
        for m in msgs {
            enc.write_message(&mut out, m.0, m.1, m.2, m.3, &[&m.4]);
        }
        out
    }

    fn decode_split(bytes: &[u8], splits: &[usize]) -> Vec<RtmpMessage> {
        let mut dec = ChunkDecoder::default();
        let mut pos = 0;
        for &s in splits {
            let end = (pos + s).min(bytes.len());
            dec.decode(&bytes[pos..end]).unwrap();
            pos = end;
        }
        dec.decode(&bytes[pos..]).unwrap();
        let mut v = Vec::new();
        while let Some(m) = dec.next_message() {
            if m.type_id != message_type::SET_CHUNK_SIZE {
                v.push(m);
            }
        }
        v
    }

    #[test]
    fn header_formats_chosen() {
        let mut enc = ChunkEncoder::default();
        let mut out = Vec::new();
        enc.write_message(&mut out, 4, 1000, 8, 1, &[&[1, 2, 3]]);
        assert_eq!(out[0] >> 6, 0);
        assert_eq!(out.len(), 12 + 3);
        out.clear();
        enc.write_message(&mut out, 4, 1023, 8, 1, &[&[1, 2, 3]]);
        assert_eq!(out[0] >> 6, 2);
        out.clear();
        enc.write_message(&mut out, 4, 1046, 8, 1, &[&[1, 2, 3]]);
        assert_eq!(out[0] >> 6, 3);
        assert_eq!(out.len(), 1 + 3);
        out.clear();
        enc.write_message(&mut out, 4, 1069, 8, 1, &[&[1, 2, 3, 4]]);
        assert_eq!(out[0] >> 6, 1);
        out.clear();
        enc.write_message(&mut out, 4, 5, 8, 1, &[&[1, 2, 3, 4]]);
        assert_eq!(out[0] >> 6, 0, "backwards timestamp needs type 0");
    }

    #[test]
    fn roundtrip_with_interleaving_and_large_csids() {
        let msgs = vec![
            Msg(3, 0, 20, 0, vec![7; 300]),
            Msg(70, 10, 9, 1, vec![1; 1000]),
            Msg(400, 10, 8, 1, vec![2; 5]),
            Msg(70, 20, 9, 1, vec![1; 1000]),
            Msg(70, 30, 9, 1, vec![3; 1000]),
            Msg(70, 40, 9, 1, vec![]),
        ];
        for cs in [1, 2, 128, 4096, 65536] {
            let bytes = encode(&msgs, cs);
            let got = decode_split(&bytes, &[]);
            assert_eq!(got.len(), msgs.len());
            for (g, m) in got.iter().zip(&msgs) {
                assert_eq!(
                    (g.chunk_stream, g.timestamp, g.type_id, g.stream_id),
                    (m.0, m.1, m.2, m.3)
                );
                assert_eq!(&g.payload[..], &m.4[..]);
            }
        }
    }

    #[test]
    fn extended_timestamps_roundtrip() {
        let msgs = vec![
            Msg(6, 0x0100_0000, 9, 1, vec![9; 500]),
            Msg(6, 0x0100_0000 + 33, 9, 1, vec![9; 500]),
            Msg(6, 0x0100_0000 + 33 + 0x0100_0000, 9, 1, vec![9; 500]),
            Msg(6, 0xFFFF_FFF0, 9, 1, vec![8; 300]),
        ];
        let bytes = encode(&msgs, 128);
        let got = decode_split(&bytes, &[1; 40]);
        let ts: Vec<u32> = got.iter().map(|m| m.timestamp).collect();
        assert_eq!(ts, msgs.iter().map(|m| m.1).collect::<Vec<_>>());
        assert!(got.iter().zip(&msgs).all(|(g, m)| g.payload[..] == m.4[..]));
    }

    #[test]
    fn continuation_without_extended_timestamp_is_tolerated() {
        // Type 0 with extended timestamp, 200-byte message in two chunks,
        // the continuation chunk without the 4 repeated bytes.
        let mut b = vec![0x06, 0xFF, 0xFF, 0xFF, 0, 0, 200, 9, 1, 0, 0, 0];
        b.extend_from_slice(&0x0100_0000u32.to_be_bytes());
        b.extend_from_slice(&[5u8; 128]);
        b.push(0xC6);
        b.extend_from_slice(&[6u8; 72]);
        let got = decode_split(&b, &[]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].timestamp, 0x0100_0000);
        assert_eq!(&got[0].payload[..128], &[5u8; 128][..]);
        assert_eq!(&got[0].payload[128..], &[6u8; 72][..]);
    }

    #[test]
    fn type3_new_message_adds_delta() {
        let mut b = vec![0x04, 0, 0, 100, 0, 0, 1, 8, 1, 0, 0, 0, 0xAA];
        b.extend_from_slice(&[0x84, 0, 0, 20, 0xBB]); // type 2, delta 20
        b.extend_from_slice(&[0xC4, 0xCC]); // type 3: +20 again
        let got = decode_split(&b, &[]);
        let ts: Vec<u32> = got.iter().map(|m| m.timestamp).collect();
        assert_eq!(ts, vec![100, 120, 140]);
    }

    #[test]
    fn abort_drops_partial_message() {
        let mut b = vec![0x04, 0, 0, 0, 0, 1, 0, 8, 1, 0, 0, 0];
        b.extend_from_slice(&[1u8; 128]);
        // Abort chunk stream 4.
        b.extend_from_slice(&[0x02, 0, 0, 0, 0, 0, 4, 2, 0, 0, 0, 0, 0, 0, 0, 4]);
        b.extend_from_slice(&[0x04, 0, 0, 0, 0, 0, 1, 8, 1, 0, 0, 0, 0x77]);
        let got = decode_split(&b, &[]);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].type_id, message_type::ABORT);
        assert_eq!(&got[1].payload[..], &[0x77]);
    }

    #[test]
    fn limits_enforced() {
        let b = [0x04, 0, 0, 0, 0x90, 0, 0, 8, 1, 0, 0, 0];
        let mut d = ChunkDecoder::default();
        assert!(matches!(
            d.decode(&b),
            Err(ChunkError::MessageTooLarge { .. })
        ));
        let mut d = ChunkDecoder::new(1000, 2);
        let mut b = Vec::new();
        for id in 3..6u8 {
            b.extend_from_slice(&[id, 0, 0, 0, 0, 0, 1, 8, 1, 0, 0, 0, 0]);
        }
        assert_eq!(d.decode(&b), Err(ChunkError::TooManyChunkStreams(2)));
        let mut d = ChunkDecoder::default();
        assert_eq!(
            d.decode(&[0x45, 0, 0, 0, 0, 0, 1, 8]),
            Err(ChunkError::UnknownChunkStream(5))
        );
        // Partial messages on many chunk streams are bounded together.
        let mut d = ChunkDecoder::new(1000, 64);
        let mut w = ChunkEncoder::default();
        let mut cs = Vec::new();
        w.write_set_chunk_size(&mut cs, 999);
        d.decode(&cs).unwrap();
        let mut b = Vec::new();
        for id in 3..10u8 {
            b.extend_from_slice(&[id, 0, 0, 0, 0, 3, 0xE8, 8, 1, 0, 0, 0]);
            b.extend_from_slice(&[0u8; 999]);
        }
        assert_eq!(d.decode(&b), Err(ChunkError::TooMuchBuffered(2000)));
        let mut d = ChunkDecoder::default();
        assert_eq!(
            d.decode(&[0x02, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(ChunkError::InvalidChunkSize(0))
        );
    }

    #[test]
    fn connection_acks_and_pings() {
        let mut server = RtmpConnection::default();
        let mut peer = ChunkEncoder::default();
        let mut b = Vec::new();
        peer.write_message(
            &mut b,
            2,
            0,
            message_type::WINDOW_ACK_SIZE,
            0,
            &[&1000u32.to_be_bytes()],
        );
        peer.write_message(
            &mut b,
            2,
            0,
            message_type::USER_CONTROL,
            0,
            &[&[0, 6, 0, 0, 1, 2]],
        );
        peer.write_message(&mut b, 5, 0, message_type::AUDIO, 1, &[&[0u8; 2000]]);
        server.handle_input(&b).unwrap();
        let m = server.next_message().unwrap().unwrap();
        assert_eq!(m.type_id, message_type::AUDIO);
        assert!(server.next_message().unwrap().is_none());
        let mut d = ChunkDecoder::default();
        d.decode(server.output.pending()).unwrap();
        let types: Vec<u8> = std::iter::from_fn(|| d.next_message())
            .map(|m| m.type_id)
            .collect();
        assert_eq!(
            types,
            vec![message_type::ACKNOWLEDGEMENT, message_type::USER_CONTROL]
        );
    }

    #[test]
    fn output_buffer_consumes() {
        let mut o = OutputBuffer::default();
        o.writer().extend_from_slice(&[1, 2, 3]);
        o.consume(2);
        assert_eq!(o.pending(), &[3]);
        o.consume(10);
        assert!(o.pending().is_empty());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..2048)) {
            let mut d = ChunkDecoder::new(64 * 1024, 8);
            let _ = d.decode(&data);
            let mut c = RtmpConnection::default();
            let _ = c.handle_input(&data);
            while let Ok(Some(_)) = c.next_message() {}
        }

        #[test]
        fn any_split_reassembles(
            sizes in prop::collection::vec(0usize..3000, 1..8),
            ts in prop::collection::vec(0u32..0x0200_0000, 8),
            cs in prop_oneof![Just(1u32), Just(7), Just(128), Just(1000), Just(65536)],
            splits in prop::collection::vec(1usize..300, 0..40),
        ) {
            let mut t = 0u32;
            let msgs: Vec<Msg> = sizes.iter().enumerate().map(|(i, &n)| {
                t = t.wrapping_add(ts[i % ts.len()] % 3 * 0x0100_0000 / 2 + ts[i % ts.len()] % 50);
                Msg(3 + (i as u32 % 3) * 100, t, 8 + (i as u8 % 2), 1, vec![i as u8; n])
            }).collect();
            let bytes = encode(&msgs, cs);
            let got = decode_split(&bytes, &splits);
            prop_assert_eq!(got.len(), msgs.len());
            for (g, m) in got.iter().zip(&msgs) {
                prop_assert_eq!((g.chunk_stream, g.timestamp, g.type_id), (m.0, m.1, m.2));
                prop_assert_eq!(&g.payload[..], &m.4[..]);
            }
        }
    }
}
