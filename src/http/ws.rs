//! WebSocket (RFC 6455), server side, sans-IO: the handshake answer and a
//! bounded frame reader and writer. Used by OME's WebRTC signalling.
//!
//! The reader takes bytes as they come and yields whole messages (text,
//! binary, ping, pong, close); fragmented messages are joined. A message
//! longer than the limit, an unmasked client frame, a reserved bit or
//! opcode, or a control frame that is fragmented or over 125 bytes is an
//! error, after which the connection must close.

use crate::http::Request;

const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Does this request ask for a WebSocket (GET with `Upgrade: websocket`
/// and a key)?
pub fn is_upgrade(req: &Request) -> bool {
    req.method() == "GET"
        && req
            .header_str("upgrade")
            .is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
        && req.header_str("sec-websocket-key").is_some()
}

/// The `101 Switching Protocols` head for an upgrade request (`None`: the
/// key or version is missing or wrong).
pub fn accept_head(req: &Request) -> Option<String> {
    let key = req.header_str("sec-websocket-key")?.trim();
    if key.is_empty() || key.len() > 64 {
        return None;
    }
    if req.header_str("sec-websocket-version").map(str::trim) != Some("13") {
        return None;
    }
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{key}{GUID}").as_bytes(),
    );
    use base64::Engine as _;
    let accept = base64::engine::general_purpose::STANDARD.encode(digest.as_ref());
    Some(format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    ))
}

/// A whole message from the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    /// The peer closes (its status code, if any).
    Close(Option<u16>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WsError {
    TooLong,
    Unmasked,
    Reserved,
    BadControl,
    BadContinuation,
    NotUtf8,
}

impl std::fmt::Display for WsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WsError::TooLong => "message too long",
            WsError::Unmasked => "client frame not masked",
            WsError::Reserved => "reserved bit or opcode",
            WsError::BadControl => "fragmented or long control frame",
            WsError::BadContinuation => "continuation without a start, or a start inside a message",
            WsError::NotUtf8 => "text message is not UTF-8",
        })
    }
}

/// Bytes of capacity a [`Reader`] keeps once it has taken all it read.
const KEPT_CAPACITY: usize = 512;

pub struct Reader {
    buf: Vec<u8>,
    /// Bytes of `buf` already taken as frames (dropped at the next
    /// `feed`: many small frames cost one move, not one each).
    pos: usize,
    /// A fragmented message being joined: (is text, bytes so far).
    partial: Option<(bool, Vec<u8>)>,
    max_message: usize,
}

impl Reader {
    pub fn new(max_message: usize) -> Reader {
        Reader {
            buf: Vec::new(),
            pos: 0,
            partial: None,
            max_message,
        }
    }

    /// Bytes held (unparsed input and a partial message).
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.pos + self.partial.as_ref().map_or(0, |p| p.1.len())
    }

    /// Takes bytes from the socket. Returns false when more than a frame
    /// header and the largest message would be held (read no more).
    pub fn feed(&mut self, data: &[u8]) -> bool {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(data);
        self.buffered() <= self.max_message + 14
    }

    /// The next whole message, if one is complete.
    pub fn next_message(&mut self) -> Result<Option<Message>, WsError> {
        loop {
            let Some((fin, opcode, payload, used)) = self.frame()? else {
                self.release_if_drained();
                return Ok(None);
            };
            self.pos += used;
            match opcode {
                0x8 => {
                    if !fin || payload.len() > 125 {
                        return Err(WsError::BadControl);
                    }
                    let code =
                        (payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]]));
                    return Ok(Some(Message::Close(code)));
                }
                0x9 | 0xA => {
                    if !fin || payload.len() > 125 {
                        return Err(WsError::BadControl);
                    }
                    return Ok(Some(if opcode == 0x9 {
                        Message::Ping(payload)
                    } else {
                        Message::Pong(payload)
                    }));
                }
                0x0 => {
                    let Some((text, mut data)) = self.partial.take() else {
                        return Err(WsError::BadContinuation);
                    };
                    if data.len() + payload.len() > self.max_message {
                        return Err(WsError::TooLong);
                    }
                    data.extend_from_slice(&payload);
                    if fin {
                        return finish(text, data).map(Some);
                    }
                    self.partial = Some((text, data));
                }
                0x1 | 0x2 => {
                    if self.partial.is_some() {
                        return Err(WsError::BadContinuation);
                    }
                    if fin {
                        return finish(opcode == 0x1, payload).map(Some);
                    }
                    self.partial = Some((opcode == 0x1, payload));
                }
                _ => return Err(WsError::Reserved),
            }
        }
    }

    /// Everything read was taken: a buffer grown for a large message (an
    /// SDP answer of a few KiB) goes back to the allocator instead of
    /// staying with a connection that may idle for hours (OME's
    /// signalling keeps its WebSocket open for the whole session).
    fn release_if_drained(&mut self) {
        if self.pos == self.buf.len() && self.buf.capacity() > KEPT_CAPACITY {
            self.buf = Vec::new();
            self.pos = 0;
        }
    }

    /// One frame from the buffer: (fin, opcode, unmasked payload, bytes used).
    #[allow(clippy::type_complexity)]
    fn frame(&self) -> Result<Option<(bool, u8, Vec<u8>, usize)>, WsError> {
        let b = &self.buf[self.pos..];
        if b.len() < 2 {
            return Ok(None);
        }
        if b[0] & 0x70 != 0 {
            return Err(WsError::Reserved);
        }
        let fin = b[0] & 0x80 != 0;
        let opcode = b[0] & 0x0f;
        if b[1] & 0x80 == 0 {
            return Err(WsError::Unmasked);
        }
        let (len, mut at) = match b[1] & 0x7f {
            126 => {
                if b.len() < 4 {
                    return Ok(None);
                }
                (u64::from(u16::from_be_bytes([b[2], b[3]])), 4)
            }
            127 => {
                if b.len() < 10 {
                    return Ok(None);
                }
                let mut n = [0u8; 8];
                n.copy_from_slice(&b[2..10]);
                (u64::from_be_bytes(n), 10)
            }
            n => (u64::from(n), 2),
        };
        if len > self.max_message as u64 {
            return Err(WsError::TooLong);
        }
        let len = len as usize;
        if b.len() < at + 4 + len {
            return Ok(None);
        }
        let mask = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        at += 4;
        let payload: Vec<u8> = b[at..at + len]
            .iter()
            .enumerate()
            .map(|(i, x)| x ^ mask[i % 4])
            .collect();
        Ok(Some((fin, opcode, payload, at + len)))
    }
}

fn finish(text: bool, data: Vec<u8>) -> Result<Message, WsError> {
    if text {
        String::from_utf8(data)
            .map(Message::Text)
            .map_err(|_| WsError::NotUtf8)
    } else {
        Ok(Message::Binary(data))
    }
}

/// A server frame (unmasked, final) with this opcode and payload.
pub fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(payload.len() + 10);
    f.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => f.push(n as u8),
        n if n <= 0xffff => {
            f.push(126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(payload);
    f
}

/// A client frame (RFC 6455 5.3: masked with `mask`, final): what kiln's
/// own clients (benches, tests) send to a WebSocket server.
pub fn masked(opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut f = frame(opcode, payload);
    let head = f.len() - payload.len();
    f[1] |= 0x80;
    for (i, b) in f[head..].iter_mut().enumerate() {
        *b ^= mask[i % 4];
    }
    f.splice(head..head, mask);
    f
}

pub fn text(s: &str) -> Vec<u8> {
    frame(0x1, s.as_bytes())
}

pub fn ping(payload: &[u8]) -> Vec<u8> {
    frame(0x9, payload)
}

pub fn pong(payload: &[u8]) -> Vec<u8> {
    frame(0xA, payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(opcode: u8, fin: bool, payload: &[u8]) -> Vec<u8> {
        let mut f = masked(opcode, payload, [1, 2, 3, 4]);
        if !fin {
            f[0] &= 0x7f;
        }
        f
    }

    #[test]
    fn the_rfc_accept_key() {
        let raw = b"GET /chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
        let mut r = crate::http::RequestReader::new(crate::http::ReaderLimits {
            max_head_bytes: 4096,
            max_body_bytes: 0,
        });
        r.feed(raw);
        let req = r.next_request().unwrap().unwrap();
        assert!(is_upgrade(&req));
        let head = accept_head(&req).unwrap();
        assert!(head.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
    }

    #[test]
    fn a_large_message_taken_leaves_no_large_buffer() {
        let sdp = vec![b'v'; 4000];
        let mut r = Reader::new(16 * 1024);
        r.feed(&client(0x1, true, &sdp));
        assert!(matches!(r.next_message(), Ok(Some(Message::Text(t))) if t.len() == 4000));
        assert!(r.next_message().unwrap().is_none());
        assert!(r.buf.capacity() <= KEPT_CAPACITY);
        // And it reads on.
        r.feed(&client(0x1, true, b"{}"));
        assert!(matches!(r.next_message(), Ok(Some(Message::Text(t))) if t == "{}"));
    }

    #[test]
    fn messages_byte_by_byte_and_fragments() {
        let mut bytes = client(0x1, false, b"{\"comm");
        bytes.extend(client(0x9, true, b"hi"));
        bytes.extend(client(0x0, true, b"and\":1}"));
        bytes.extend(client(0x2, true, &vec![7u8; 300]));
        bytes.extend(client(0x8, true, &1000u16.to_be_bytes()));
        let mut r = Reader::new(1024);
        let mut got = Vec::new();
        for b in bytes {
            r.feed(&[b]);
            while let Some(m) = r.next_message().unwrap() {
                got.push(m);
            }
        }
        assert_eq!(
            got,
            vec![
                Message::Ping(b"hi".to_vec()),
                Message::Text("{\"command\":1}".into()),
                Message::Binary(vec![7u8; 300]),
                Message::Close(Some(1000)),
            ]
        );
    }

    #[test]
    fn bad_frames_are_errors() {
        let mut r = Reader::new(100);
        r.feed(&client(0x1, true, &[b'a'; 101]));
        assert_eq!(r.next_message(), Err(WsError::TooLong));
        let mut r = Reader::new(100);
        r.feed(&[0x81, 0x01, b'a']);
        assert_eq!(r.next_message(), Err(WsError::Unmasked));
        let mut r = Reader::new(100);
        r.feed(&client(0x0, true, b"x"));
        assert_eq!(r.next_message(), Err(WsError::BadContinuation));
        let mut r = Reader::new(100);
        r.feed(&client(0x9, false, b"x"));
        assert_eq!(r.next_message(), Err(WsError::BadControl));
        let mut r = Reader::new(100);
        r.feed(&client(0x3, true, b"x"));
        assert_eq!(r.next_message(), Err(WsError::Reserved));
        // A huge declared length is refused before it is buffered.
        let mut r = Reader::new(100);
        r.feed(&[0x82, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(r.next_message(), Err(WsError::TooLong));
    }

    #[test]
    fn server_frames_have_the_right_lengths() {
        assert_eq!(frame(0x1, b"ab"), vec![0x81, 2, b'a', b'b']);
        assert_eq!(frame(0x1, &[0; 200])[..4], [0x81, 126, 0, 200]);
        assert_eq!(frame(0x2, &[0; 70000])[..2], [0x82, 127]);
    }
}
