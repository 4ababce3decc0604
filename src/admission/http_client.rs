//! A sans-IO HTTP/1.1 client exchange: one POST with `Connection: close`
//! and its bounded response (Content-Length, chunked, or read to the end).
//! The bytes come and go through the loop's glue
//! (`server/webhook_io.rs`), which adds TCP, TLS and the time-out.

/// The most response bytes (head and body) read.
pub const MAX_RESPONSE: usize = 64 * 1024;

/// Where a request goes: `http://` or `https://`, host, port, path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Path and query (`/` when the URL has none).
    pub path: String,
}

impl Target {
    pub fn parse(url: &str) -> Result<Target, String> {
        let bad = || format!("[{url}] is not an http:// or https:// URL");
        let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return Err(bad()),
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let default_port = if tls { 443 } else { 80 };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(bad)?;
            let port = match after.strip_prefix(':') {
                Some(p) => p.parse().map_err(|_| bad())?,
                None if after.is_empty() => default_port,
                None => return Err(bad()),
            };
            (h.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p.parse().map_err(|_| bad())?),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() || host.contains(['@', ' ']) {
            return Err(bad());
        }
        let path = if path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_string()
        };
        if path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(bad());
        }
        Ok(Target {
            tls,
            host,
            port,
            path,
        })
    }

    fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let default = if self.tls { 443 } else { 80 };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// A POST of `body` with the given extra headers (names and values kiln
/// makes, never a peer's text).
pub fn post(target: &Target, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut req = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
        target.path,
        target.host_header(),
        body.len()
    );
    for (k, v) in headers {
        req.push_str(k);
        req.push_str(": ");
        req.push_str(v);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.push_str(body);
    req.into_bytes()
}

/// A response read so far.
#[derive(Default)]
pub struct ResponseReader {
    buf: Vec<u8>,
}

/// A whole response: status and body.
#[derive(Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl ResponseReader {
    /// Takes bytes; an error when the response grows past
    /// [`MAX_RESPONSE`].
    pub fn feed(&mut self, data: &[u8]) -> Result<(), String> {
        if self.buf.len() + data.len() > MAX_RESPONSE {
            return Err(format!("the response is longer than {MAX_RESPONSE} bytes"));
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// The response if it is complete; `eof`: the peer closed (a body
    /// without a length ends there). `Ok(None)`: more is needed.
    pub fn complete(&self, eof: bool) -> Result<Option<Response>, String> {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        let head_len = match resp.parse(&self.buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if eof => {
                return Err("the connection closed before a whole response".into())
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(format!("malformed response: {e}")),
        };
        let status = resp.code.unwrap_or(0);
        let header = |name: &str| {
            resp.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
        };
        let rest = &self.buf[head_len..];
        if header("transfer-encoding").is_some_and(|t| t.ends_with("chunked")) {
            return match dechunk(rest)? {
                Some(body) => Ok(Some(Response { status, body })),
                None if eof => Err("the connection closed inside a chunked body".into()),
                None => Ok(None),
            };
        }
        if let Some(len) = header("content-length") {
            let len: usize = len
                .parse()
                .map_err(|_| "malformed Content-Length".to_string())?;
            if len > MAX_RESPONSE {
                return Err(format!("the response is longer than {MAX_RESPONSE} bytes"));
            }
            return if rest.len() >= len {
                Ok(Some(Response {
                    status,
                    body: rest[..len].to_vec(),
                }))
            } else if eof {
                Err("the connection closed before the whole body".into())
            } else {
                Ok(None)
            };
        }
        if eof || status == 204 || status == 304 || (100..200).contains(&status) {
            return Ok(Some(Response {
                status,
                body: rest.to_vec(),
            }));
        }
        Ok(None)
    }
}

/// A whole chunked body, or `None` if its last chunk has not come.
fn dechunk(mut data: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut body = Vec::new();
    loop {
        let Some(eol) = data.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let line = std::str::from_utf8(&data[..eol]).map_err(|_| "malformed chunk size")?;
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| "malformed chunk size")?;
        if size > MAX_RESPONSE {
            return Err("a chunk is too long".into());
        }
        data = &data[eol + 2..];
        if size == 0 {
            // Trailers are not read: the body is whole.
            return Ok(Some(body));
        }
        if data.len() < size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// Fuzz entry: any response bytes, fed in two pieces; never panics.
pub fn fuzz(data: &[u8]) {
    let mut r = ResponseReader::default();
    let half = data.len() / 2;
    let _ = r.feed(&data[..half]);
    let _ = r.complete(false);
    let _ = r.feed(&data[half..]);
    let _ = r.complete(false);
    let _ = r.complete(true);
    let _ = Target::parse(&String::from_utf8_lossy(data));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let t = Target::parse("http://127.0.0.1:8080/hook?x=1").unwrap();
        assert_eq!(
            (t.tls, t.host.as_str(), t.port, t.path.as_str()),
            (false, "127.0.0.1", 8080, "/hook?x=1")
        );
        let t = Target::parse("https://ctl.example.com").unwrap();
        assert_eq!((t.tls, t.port, t.path.as_str()), (true, 443, "/"));
        assert_eq!(t.host_header(), "ctl.example.com");
        let t = Target::parse("http://[::1]:81/a").unwrap();
        assert_eq!(
            (t.host.as_str(), t.host_header()),
            ("::1", "[::1]:81".into())
        );
        for bad in [
            "ftp://x/",
            "http://",
            "http://h:port/",
            "http://u@h/",
            "nothing",
            "http://h/a b",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn request_bytes() {
        let t = Target::parse("http://h:81/p").unwrap();
        let r = post(&t, &[("X-OME-Signature", "abc")], "{}");
        assert_eq!(
            String::from_utf8(r).unwrap(),
            "POST /p HTTP/1.1\r\nHost: h:81\r\nConnection: close\r\nContent-Length: 2\r\nX-OME-Signature: abc\r\n\r\n{}"
        );
    }

    fn read(pieces: &[&[u8]], eof: bool) -> Result<Option<Response>, String> {
        let mut r = ResponseReader::default();
        for p in pieces {
            r.feed(p)?;
        }
        r.complete(eof)
    }

    #[test]
    fn responses() {
        let ok = |body: &[u8]| {
            Ok(Some(Response {
                status: 200,
                body: body.to_vec(),
            }))
        };
        let full = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody";
        assert_eq!(read(&[full], false), ok(b"body"));
        assert_eq!(read(&[&full[..20]], false), Ok(None));
        assert_eq!(read(&[&full[..40]], false), Ok(None));
        assert!(read(&[&full[..40]], true).is_err());
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbo\r\n\r\n2;x\r\ndy\r\n0\r\n\r\n";
        assert_eq!(read(&[chunked], false), ok(b"bo\r\ndy"));
        assert_eq!(read(&[&chunked[..60]], false), Ok(None));
        let close = b"HTTP/1.0 200 OK\r\n\r\nto the end";
        assert_eq!(read(&[close], false), Ok(None));
        assert_eq!(read(&[close], true), ok(b"to the end"));
        assert!(read(&[b"garbage\r\n\r\n"], false).is_err());
        let big = vec![b'x'; MAX_RESPONSE];
        assert!(read(&[b"HTTP/1.1 200 OK\r\n\r\n", &big], false).is_err());
        assert!(read(
            &[b"HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n"],
            false
        )
        .is_err());
    }

    #[test]
    fn fuzz_entry_survives_odd_input() {
        for s in [
            &b""[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        ] {
            fuzz(s);
        }
    }
}
