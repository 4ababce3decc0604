//! HTTP/1.1 response writing: a status, a few headers and a body appended to
//! the connection's output buffer in one pass. Every response carries
//! `Content-Type: application/json;charset=UTF-8`, `Content-Length` and
//! `Server: kiln/<version>` (DECISIONS section 2), except that 1xx and 204
//! carry neither body nor Content-Length (RFC 9110 8.6).

use std::io::Write;

pub const SERVER: &str = concat!("kiln/", env!("CARGO_PKG_VERSION"));

/// A response before serialisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Extra headers (name, value); the fixed ones are added when written.
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16, body: Vec<u8>) -> Self {
        Response {
            status,
            headers: Vec::new(),
            body,
        }
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Appends `n` in decimal (answer heads built per request, without the
/// formatting machinery).
pub fn push_decimal(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[at..] {
        out.push(char::from(d));
    }
}

pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        207 => "Multi-Status",
        301 => "Moved Permanently",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// Appends `resp` to `out`. `head_only` (a HEAD request) keeps the headers,
/// Content-Length included, and drops the body. `close` adds
/// `Connection: close`.
pub fn write_response(resp: &Response, head_only: bool, close: bool, out: &mut Vec<u8>) {
    let no_body = resp.status == 204 || resp.status < 200;
    out.reserve(160 + resp.body.len());
    let _ = write!(
        out,
        "HTTP/1.1 {} {}\r\nServer: {SERVER}\r\n",
        resp.status,
        reason(resp.status)
    );
    // JSON unless the response names its own type (e.g. /metrics).
    let content_type = resp.header("content-type");
    if !no_body {
        let _ = write!(
            out,
            "Content-Type: {}\r\nContent-Length: {}\r\n",
            content_type.unwrap_or("application/json;charset=UTF-8"),
            resp.body.len()
        );
    }
    for (name, value) in &resp.headers {
        if !name.eq_ignore_ascii_case("content-type") {
            let _ = write!(out, "{name}: {value}\r\n");
        }
    }
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !head_only && !no_body {
        out.extend_from_slice(&resp.body);
    }
}

pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_matches_display() {
        for n in [0, 7, 10, 99, 100, 65_535, 1 << 40, u64::MAX] {
            let mut s = String::from("x");
            push_decimal(&mut s, n);
            assert_eq!(s, format!("x{n}"));
        }
    }

    #[test]
    fn writes_fixed_headers() {
        let mut out = Vec::new();
        write_response(
            &Response::new(200, b"{}".to_vec()).with_header("Vary", "Origin"),
            false,
            false,
            &mut out,
        );
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(s.contains("Content-Type: application/json;charset=UTF-8\r\n"));
        assert!(s.contains("Content-Length: 2\r\n"));
        assert!(s.contains(&format!("Server: {SERVER}\r\n")));
        assert!(s.contains("Vary: Origin\r\n"));
        assert!(s.ends_with("\r\n\r\n{}"));
    }

    #[test]
    fn head_keeps_length_drops_body() {
        let mut out = Vec::new();
        write_response(&Response::new(200, b"{}".to_vec()), true, true, &mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("Content-Length: 2\r\n"));
        assert!(s.contains("Connection: close\r\n"));
        assert!(s.ends_with("\r\n\r\n"));
    }

    #[test]
    fn no_content_has_no_length() {
        let mut out = Vec::new();
        write_response(&Response::new(204, Vec::new()), false, false, &mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(!s.contains("Content-Length"));
    }
}
