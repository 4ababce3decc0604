//! HTTP/1.1 request reading, sans-IO: bytes go in ([`RequestReader::feed`]),
//! whole requests come out ([`RequestReader::next_request`]) in order, so
//! pipelining works. Heads are parsed with `httparse`; bodies are read by
//! `Content-Length` or `Transfer-Encoding: chunked`. Every size is bounded:
//! a head over the limit is a 431, a body over the limit a 413.
//!
//! Not here: sockets, time-outs (the connection glue owns the clock), routing.

use std::fmt;

/// Most headers a request may carry.
const MAX_HEADERS: usize = 96;
/// Longest chunk-size line or trailer section we accept.
const MAX_CHUNK_LINE: usize = 4096;

/// A complete request. Its head is kept as one buffer (method, target, then
/// each header's name and value, back to back) and one table of where each
/// ends: two allocations whatever the number of headers, so a connection
/// that parks a request (an LL-HLS blocking reload, a thousand at once)
/// holds its head's bytes and little more.
#[derive(Clone, PartialEq, Eq)]
pub struct Request {
    head: Box<[u8]>,
    method_end: u32,
    target_end: u32,
    /// Each header's name end and value end in `head` (a name starts where
    /// the previous value ends).
    fields: Box<[(u32, u32)]>,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    pub body: Vec<u8>,
}

/// An offset into a head (bounded by the reader's limit, far below 4 GiB).
fn offset(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Request {
    /// A request with this head and an empty body.
    pub fn new(method: &str, target: &str, minor_version: u8, headers: &[(&str, &[u8])]) -> Self {
        Self::build(method, target, minor_version, headers.iter().copied())
    }

    fn build<'a>(
        method: &str,
        target: &str,
        minor_version: u8,
        headers: impl Iterator<Item = (&'a str, &'a [u8])> + Clone,
    ) -> Self {
        let len = method.len()
            + target.len()
            + headers
                .clone()
                .map(|(n, v)| n.len() + v.len())
                .sum::<usize>();
        let mut head = Vec::with_capacity(len);
        head.extend_from_slice(method.as_bytes());
        let method_end = offset(head.len());
        head.extend_from_slice(target.as_bytes());
        let target_end = offset(head.len());
        let mut fields = Vec::with_capacity(headers.clone().count());
        for (name, value) in headers {
            head.extend_from_slice(name.as_bytes());
            let name_end = offset(head.len());
            head.extend_from_slice(value);
            fields.push((name_end, offset(head.len())));
        }
        Request {
            head: head.into_boxed_slice(),
            method_end,
            target_end,
            fields: fields.into_boxed_slice(),
            minor_version,
            body: Vec::new(),
        }
    }

    fn bytes(&self, from: u32, to: u32) -> &[u8] {
        self.head.get(from as usize..to as usize).unwrap_or(&[])
    }

    fn text(&self, from: u32, to: u32) -> &str {
        std::str::from_utf8(self.bytes(from, to)).unwrap_or("")
    }

    pub fn method(&self) -> &str {
        self.text(0, self.method_end)
    }

    /// The request target as sent (path and query).
    pub fn target(&self) -> &str {
        self.text(self.method_end, self.target_end)
    }

    /// Every header, in the order sent: name and value.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> {
        let starts = std::iter::once(self.target_end).chain(self.fields.iter().map(|f| f.1));
        starts
            .zip(self.fields.iter())
            .map(|(start, &(name_end, value_end))| {
                (self.text(start, name_end), self.bytes(name_end, value_end))
            })
    }

    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// Whether the connection stays open after the response.
    pub fn keep_alive(&self) -> bool {
        let conn = self.header_str("connection").unwrap_or("");
        let has = |tok: &str| conn.split(',').any(|t| t.trim().eq_ignore_ascii_case(tok));
        if self.minor_version == 0 {
            // DECISIONS: HTTP/1.0 is answered and closed.
            false
        } else {
            !has("close")
        }
    }

    /// The path without the query string.
    pub fn path(&self) -> &str {
        let target = self.target();
        match target.find('?') {
            Some(i) => &target[..i],
            None => target,
        }
    }
}

/// Header values other than credentials shown as text; an `Authorization`
/// or `Cookie` value is never printed.
impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, std::borrow::Cow<'_, str>)> = self
            .headers()
            .map(|(n, v)| {
                let secret =
                    n.eq_ignore_ascii_case("authorization") || n.eq_ignore_ascii_case("cookie");
                let v = if secret {
                    "(hidden)".into()
                } else {
                    String::from_utf8_lossy(v)
                };
                (n, v)
            })
            .collect();
        f.debug_struct("Request")
            .field("method", &self.method())
            .field("target", &self.target())
            .field("minor_version", &self.minor_version)
            .field("headers", &headers)
            .field("body_len", &self.body.len())
            .finish()
    }
}

/// Why a request could not be read. Each maps to one status code; after any
/// of them the connection answers and closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// 431: the head is larger than the limit.
    HeadTooLarge,
    /// 413: the body is (or announces to be) larger than the limit.
    BodyTooLarge,
    /// 400: the bytes are not HTTP.
    Malformed(&'static str),
    /// 501: a transfer coding other than chunked.
    UnsupportedTransferEncoding,
    /// 505: not HTTP/1.x.
    UnsupportedVersion,
}

impl RequestError {
    pub fn status(&self) -> u16 {
        match self {
            RequestError::HeadTooLarge => 431,
            RequestError::BodyTooLarge => 413,
            RequestError::Malformed(_) => 400,
            RequestError::UnsupportedTransferEncoding => 501,
            RequestError::UnsupportedVersion => 505,
        }
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::HeadTooLarge => write!(f, "Request header fields too large"),
            RequestError::BodyTooLarge => write!(f, "Request body too large"),
            RequestError::Malformed(why) => write!(f, "Bad request: {why}"),
            RequestError::UnsupportedTransferEncoding => {
                write!(f, "Transfer-Encoding not implemented")
            }
            RequestError::UnsupportedVersion => write!(f, "HTTP version not supported"),
        }
    }
}

impl std::error::Error for RequestError {}

#[derive(Debug, Clone, Copy)]
pub struct ReaderLimits {
    pub max_head_bytes: usize,
    pub max_body_bytes: usize,
}

#[derive(Debug)]
enum BodyState {
    Length { remaining: usize },
    Chunked(Chunk),
}

#[derive(Debug, Clone, Copy)]
enum Chunk {
    /// Reading the chunk-size line.
    Size,
    /// Reading chunk data.
    Data { remaining: usize },
    /// Reading the CRLF after chunk data.
    DataEnd,
    /// Reading trailer lines until the empty line.
    Trailer,
}

#[derive(Debug)]
struct Pending {
    request: Request,
    body: BodyState,
    expects_continue: bool,
}

/// Reads requests from a byte stream. Bytes not yet consumed are buffered;
/// at most one request is partially parsed at a time.
#[derive(Debug)]
pub struct RequestReader {
    limits: ReaderLimits,
    buf: Vec<u8>,
    /// Start of unconsumed bytes in `buf`.
    pos: usize,
    /// Boxed: a connection between requests (most of them, most of the
    /// time) keeps only the pointer.
    pending: Option<Box<Pending>>,
    continue_answered: bool,
    failed: bool,
}

impl RequestReader {
    pub fn new(limits: ReaderLimits) -> Self {
        RequestReader {
            limits,
            buf: Vec::new(),
            pos: 0,
            pending: None,
            continue_answered: false,
            failed: false,
        }
    }

    /// Appends received bytes.
    pub fn feed(&mut self, data: &[u8]) {
        if self.failed {
            return;
        }
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Bytes received and not yet part of a returned request.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True when no part of a request has been received.
    pub fn is_idle(&self) -> bool {
        self.pending.is_none() && self.buffered() == 0
    }

    /// True while the head of the next request is incomplete (bytes of it
    /// have arrived, the blank line has not).
    pub fn in_head(&self) -> bool {
        self.pending.is_none() && self.buffered() > 0
    }

    /// True while a body is being received.
    pub fn in_body(&self) -> bool {
        self.pending.is_some()
    }

    /// The head of the request in progress announced `Expect: 100-continue`
    /// and nothing of its body has arrived: the caller should send
    /// `100 Continue` (once), then call [`RequestReader::continue_sent`].
    pub fn wants_continue(&self) -> bool {
        matches!(&self.pending, Some(p) if p.expects_continue && !self.continue_answered)
    }

    /// The head of the request whose body is being received.
    pub fn pending_head(&self) -> Option<&Request> {
        self.pending.as_ref().map(|p| &p.request)
    }

    pub fn continue_sent(&mut self) {
        self.continue_answered = true;
    }

    /// The next complete request, `Ok(None)` if more bytes are needed. After
    /// an error the reader takes no more input and keeps failing: the caller
    /// answers the first error and closes.
    pub fn next_request(&mut self) -> Result<Option<Request>, RequestError> {
        if self.failed {
            return Err(RequestError::Malformed("connection already failed"));
        }
        let result = self.advance();
        if result.is_err() {
            self.failed = true;
        }
        if self.pos > 0 && self.pos == self.buf.len() {
            // All taken: the buffer goes back to the allocator, not kept
            // with a connection that now waits (an LL-HLS viewer parked
            // on a blocking reload, a thousand of them at once).
            self.buf = Vec::new();
            self.pos = 0;
        } else if self.pos > 64 * 1024 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        result
    }

    fn advance(&mut self) -> Result<Option<Request>, RequestError> {
        if self.pending.is_none() {
            match self.parse_head()? {
                Some(p) => {
                    self.continue_answered = false;
                    self.pending = Some(Box::new(p));
                }
                None => return Ok(None),
            }
        }
        if self.read_body()? {
            let p = self
                .pending
                .take()
                .ok_or(RequestError::Malformed("no request"))?;
            Ok(Some(p.request))
        } else {
            Ok(None)
        }
    }

    fn parse_head(&mut self) -> Result<Option<Pending>, RequestError> {
        // Tolerate blank lines between pipelined requests (RFC 9112 2.2).
        while self.buf[self.pos..].starts_with(b"\r\n") {
            self.pos += 2;
        }
        let data = &self.buf[self.pos..];
        if data.is_empty() {
            return Ok(None);
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let status = req.parse(data).map_err(|e| match e {
            httparse::Error::TooManyHeaders => RequestError::HeadTooLarge,
            httparse::Error::Version => RequestError::UnsupportedVersion,
            httparse::Error::HeaderName => RequestError::Malformed("invalid header name"),
            httparse::Error::HeaderValue => RequestError::Malformed("invalid header value"),
            httparse::Error::Token => RequestError::Malformed("invalid method or token"),
            httparse::Error::NewLine => RequestError::Malformed("invalid line ending"),
            httparse::Error::Status => RequestError::Malformed("invalid request line"),
        })?;
        let head_len = match status {
            httparse::Status::Partial => {
                if data.len() > self.limits.max_head_bytes {
                    return Err(RequestError::HeadTooLarge);
                }
                return Ok(None);
            }
            httparse::Status::Complete(n) => n,
        };
        if head_len > self.limits.max_head_bytes {
            return Err(RequestError::HeadTooLarge);
        }
        let request = Request::build(
            req.method.unwrap_or(""),
            req.path.unwrap_or(""),
            req.version.unwrap_or(1),
            req.headers.iter().map(|h| (h.name, h.value)),
        );
        self.pos += head_len;
        check_singletons(&request)?;
        let body = body_framing(&request, self.limits.max_body_bytes)?;
        let expects_continue = request.minor_version == 1
            && request
                .header_str("expect")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("100-continue"))
            && !matches!(body, BodyState::Length { remaining: 0 });
        Ok(Some(Pending {
            request,
            body,
            expects_continue,
        }))
    }

    /// Reads as much body as is buffered; true when the body is complete.
    fn read_body(&mut self) -> Result<bool, RequestError> {
        let max_body = self.limits.max_body_bytes;
        let Some(p) = self.pending.as_mut() else {
            return Ok(false);
        };
        loop {
            let data = &self.buf[self.pos..];
            match &mut p.body {
                BodyState::Length { remaining } => {
                    let n = (*remaining).min(data.len());
                    p.request.body.extend_from_slice(&data[..n]);
                    self.pos += n;
                    *remaining -= n;
                    return Ok(*remaining == 0);
                }
                BodyState::Chunked(state) => match *state {
                    Chunk::Size => {
                        let Some(line_end) = find_crlf(data) else {
                            if data.len() > MAX_CHUNK_LINE {
                                return Err(RequestError::Malformed("chunk size line too long"));
                            }
                            return Ok(false);
                        };
                        let size = match httparse::parse_chunk_size(&data[..line_end + 2]) {
                            Ok(httparse::Status::Complete((_, size))) => size,
                            _ => return Err(RequestError::Malformed("invalid chunk size")),
                        };
                        self.pos += line_end + 2;
                        if size == 0 {
                            *state = Chunk::Trailer;
                        } else {
                            let total = (p.request.body.len() as u64).saturating_add(size);
                            if total > max_body as u64 {
                                return Err(RequestError::BodyTooLarge);
                            }
                            *state = Chunk::Data {
                                remaining: size as usize,
                            };
                        }
                    }
                    Chunk::Data { remaining } => {
                        if data.is_empty() {
                            return Ok(false);
                        }
                        let n = remaining.min(data.len());
                        p.request.body.extend_from_slice(&data[..n]);
                        self.pos += n;
                        *state = if n == remaining {
                            Chunk::DataEnd
                        } else {
                            Chunk::Data {
                                remaining: remaining - n,
                            }
                        };
                    }
                    Chunk::DataEnd => {
                        if data.len() < 2 {
                            return Ok(false);
                        }
                        if &data[..2] != b"\r\n" {
                            return Err(RequestError::Malformed("chunk data not followed by CRLF"));
                        }
                        self.pos += 2;
                        *state = Chunk::Size;
                    }
                    Chunk::Trailer => {
                        let Some(line_end) = find_crlf(data) else {
                            if data.len() > MAX_CHUNK_LINE {
                                return Err(RequestError::HeadTooLarge);
                            }
                            return Ok(false);
                        };
                        self.pos += line_end + 2;
                        if line_end == 0 {
                            return Ok(true);
                        }
                        // Trailer fields are read and ignored.
                    }
                },
            }
        }
    }
}

fn find_crlf(data: &[u8]) -> Option<usize> {
    data.windows(2).position(|w| w == b"\r\n")
}

/// RFC 9112 3.2: an HTTP/1.1 request has exactly one `Host`; a second
/// `Host` or `Authorization` is refused rather than guessing which one a
/// proxy in front of kiln looked at.
fn check_singletons(request: &Request) -> Result<(), RequestError> {
    let count = |name: &str| {
        request
            .headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count()
    };
    match count("host") {
        0 if request.minor_version >= 1 => {
            return Err(RequestError::Malformed("HTTP/1.1 request without Host"))
        }
        0 | 1 => {}
        _ => return Err(RequestError::Malformed("more than one Host header")),
    }
    if count("authorization") > 1 {
        return Err(RequestError::Malformed(
            "more than one Authorization header",
        ));
    }
    Ok(())
}

fn body_framing(request: &Request, max_body: usize) -> Result<BodyState, RequestError> {
    let mut chunked = false;
    let mut length: Option<u64> = None;
    for (name, value) in request.headers() {
        if name.eq_ignore_ascii_case("transfer-encoding") {
            let v = std::str::from_utf8(value)
                .map_err(|_| RequestError::Malformed("invalid Transfer-Encoding"))?;
            for coding in v.split(',').map(str::trim).filter(|c| !c.is_empty()) {
                if coding.eq_ignore_ascii_case("chunked") && !chunked {
                    chunked = true;
                } else {
                    return Err(RequestError::UnsupportedTransferEncoding);
                }
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(value)
                .ok()
                .map(str::trim)
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or(RequestError::Malformed("invalid Content-Length"))?;
            if length.is_some_and(|l| l != v) {
                return Err(RequestError::Malformed(
                    "conflicting Content-Length headers",
                ));
            }
            length = Some(v);
        }
    }
    if chunked {
        if request.minor_version == 0 {
            // RFC 9112 6.1: chunked is HTTP/1.1 only.
            return Err(RequestError::Malformed("chunked body on HTTP/1.0"));
        }
        if length.is_some() {
            // RFC 9112 6.3: both present is a smuggling vector; refuse.
            return Err(RequestError::Malformed(
                "both Content-Length and Transfer-Encoding",
            ));
        }
        return Ok(BodyState::Chunked(Chunk::Size));
    }
    let len = length.unwrap_or(0);
    if len > max_body as u64 {
        return Err(RequestError::BodyTooLarge);
    }
    Ok(BodyState::Length {
        remaining: len as usize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reader() -> RequestReader {
        RequestReader::new(ReaderLimits {
            max_head_bytes: 16 * 1024,
            max_body_bytes: 1024 * 1024,
        })
    }

    fn all(r: &mut RequestReader) -> Result<Vec<Request>, RequestError> {
        let mut out = Vec::new();
        while let Some(req) = r.next_request()? {
            out.push(req);
        }
        Ok(out)
    }

    #[test]
    fn simple_get() {
        let mut r = reader();
        r.feed(b"GET /v1/vhosts?x=1 HTTP/1.1\r\nHost: h\r\nAuthorization: Basic eA==\r\n\r\n");
        let req = r.next_request().unwrap().unwrap();
        assert_eq!(req.method(), "GET");
        assert_eq!(req.path(), "/v1/vhosts");
        assert_eq!(req.header_str("authorization"), Some("Basic eA=="));
        assert!(req.keep_alive());
        assert!(r.is_idle());
        // A taken request leaves no buffer behind (a parked connection).
        assert_eq!(r.buf.capacity(), 0);
    }

    #[test]
    fn headers_keep_their_order_and_bytes() {
        let mut r = reader();
        r.feed(b"POST /a?b HTTP/1.1\r\nHost: h\r\nX-Empty:\r\nX-Bin: \xff\x80\r\nAuthorization: Bearer s3cret\r\nContent-Length: 2\r\n\r\nhi");
        let req = r.next_request().unwrap().unwrap();
        assert_eq!(
            (req.method(), req.target(), req.path()),
            ("POST", "/a?b", "/a")
        );
        let names: Vec<_> = req.headers().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            [
                "Host",
                "X-Empty",
                "X-Bin",
                "Authorization",
                "Content-Length"
            ]
        );
        assert_eq!(req.header("x-empty"), Some(&b""[..]));
        assert_eq!(req.header("x-bin"), Some(&b"\xff\x80"[..]));
        assert_eq!(req.header_str("x-bin"), None);
        assert_eq!(req.body, b"hi");
        assert_eq!(
            req,
            Request {
                body: b"hi".to_vec(),
                ..Request::new(
                    "POST",
                    "/a?b",
                    1,
                    &[
                        ("Host", b"h"),
                        ("X-Empty", b""),
                        ("X-Bin", b"\xff\x80"),
                        ("Authorization", b"Bearer s3cret"),
                        ("Content-Length", b"2"),
                    ]
                )
            }
        );
        // Logged requests never show a credential.
        let shown = format!("{req:?}");
        assert!(
            shown.contains("/a?b") && !shown.contains("s3cret"),
            "{shown}"
        );
    }

    #[test]
    fn pipelined_in_order() {
        let mut r = reader();
        r.feed(b"GET /a HTTP/1.1\r\nHost: h\r\n\r\nPOST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nxyzGET /c HTTP/1.1\r\nHost: h\r\n\r\n");
        let reqs = all(&mut r).unwrap();
        let paths: Vec<_> = reqs.iter().map(|r| r.target()).collect();
        assert_eq!(paths, ["/a", "/b", "/c"]);
        assert_eq!(reqs[1].body, b"xyz");
    }

    #[test]
    fn chunked_body_with_trailer() {
        let mut r = reader();
        r.feed(b"POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nX-T: 1\r\n\r\n");
        let req = r.next_request().unwrap().unwrap();
        assert_eq!(req.body, b"Wikipedia");
        assert!(r.is_idle());
    }

    #[test]
    fn head_limit_is_431() {
        let mut r = reader();
        r.feed(b"GET / HTTP/1.1\r\nHost: h\r\nX: ");
        r.feed(&vec![b'a'; 17 * 1024]);
        assert_eq!(r.next_request(), Err(RequestError::HeadTooLarge));
        assert_eq!(RequestError::HeadTooLarge.status(), 431);
    }

    #[test]
    fn body_limit_is_413_before_the_body_arrives() {
        let mut r = reader();
        r.feed(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2000000\r\n\r\n");
        assert_eq!(r.next_request(), Err(RequestError::BodyTooLarge));
        let mut r = reader();
        r.feed(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n200000\r\n");
        assert_eq!(r.next_request(), Err(RequestError::BodyTooLarge));
    }

    #[test]
    fn expect_continue() {
        let mut r = reader();
        r.feed(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
        assert_eq!(r.next_request(), Ok(None));
        assert!(r.wants_continue());
        r.continue_sent();
        assert!(!r.wants_continue());
        r.feed(b"hello");
        assert_eq!(r.next_request().unwrap().unwrap().body, b"hello");
    }

    #[test]
    fn smuggling_shapes_are_refused() {
        let mut r = reader();
        r.feed(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert!(matches!(r.next_request(), Err(RequestError::Malformed(_))));
        let mut r = reader();
        r.feed(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n");
        assert!(matches!(r.next_request(), Err(RequestError::Malformed(_))));
        let mut r = reader();
        r.feed(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +3\r\n\r\n");
        assert!(matches!(r.next_request(), Err(RequestError::Malformed(_))));
        let mut r = reader();
        r.feed(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n");
        assert_eq!(
            r.next_request(),
            Err(RequestError::UnsupportedTransferEncoding)
        );
    }

    #[test]
    fn http10_closes() {
        let mut r = reader();
        r.feed(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        assert!(!r.next_request().unwrap().unwrap().keep_alive());
        let mut r = reader();
        r.feed(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: Close\r\n\r\n");
        assert!(!r.next_request().unwrap().unwrap().keep_alive());
    }

    #[test]
    fn host_and_authorization_singletons() {
        for head in [
            &b"GET / HTTP/1.1\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Basic eA==\r\nAuthorization: Basic eQ==\r\n\r\n",
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        ] {
            let mut r = reader();
            r.feed(head);
            let got = r.next_request();
            assert!(
                matches!(got, Err(RequestError::Malformed(_))),
                "{}: {got:?}",
                String::from_utf8_lossy(head)
            );
        }
        // HTTP/1.0 may omit Host.
        let mut r = reader();
        r.feed(b"GET / HTTP/1.0\r\n\r\n");
        assert!(r.next_request().unwrap().is_some());
    }

    #[test]
    fn garbage_is_400() {
        let mut r = reader();
        r.feed(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03");
        assert!(r.next_request().is_err());
    }

    const STREAM: &[u8] = b"GET /v1/vhosts HTTP/1.1\r\nHost: h\r\n\r\n\
POST /v1/vhosts HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n[{\"a\":1}]  \
POST /v1/x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n\
HEAD /v1/version HTTP/1.1\r\nHost: h\r\n\r\n\
DELETE /v1/vhosts/a HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n";

    proptest! {
        /// Any split of a valid byte stream into reads gives the same requests.
        #[test]
        fn any_split_parses_the_same(cuts in proptest::collection::vec(0..STREAM.len(), 0..20)) {
            let mut whole = reader();
            whole.feed(STREAM);
            let expected = all(&mut whole).unwrap();
            prop_assert_eq!(expected.len(), 5);

            let mut cuts = cuts;
            cuts.sort_unstable();
            let mut r = reader();
            let mut got = Vec::new();
            let mut last = 0;
            for cut in cuts.into_iter().chain([STREAM.len()]) {
                r.feed(&STREAM[last..cut]);
                last = cut;
                got.extend(all(&mut r).unwrap());
            }
            prop_assert_eq!(got, expected);
            prop_assert!(r.is_idle());
        }

        /// Arbitrary bytes never panic and never buffer past the limits.
        #[test]
        fn arbitrary_bytes_never_panic(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..512), 0..16)) {
            let mut r = reader();
            for c in chunks {
                r.feed(&c);
                while let Ok(Some(_)) = r.next_request() {}
            }
        }
    }
}
