//! RTSP/1.0 (RFC 2326) on the client's TCP connection: the URL, requests
//! out, and what comes in: responses (head and `Content-Length` body) and
//! interleaved binary frames (`$`, channel, 16-bit length). Basic and
//! Digest (MD5) authorization. Bounded: a head over [`MAX_HEAD`] or a body
//! over [`MAX_BODY`] is an error; never panics on input.

use md5::{Digest, Md5};

/// Largest response head.
pub const MAX_HEAD: usize = 16 * 1024;
/// Largest response body (an SDP).
pub const MAX_BODY: usize = 64 * 1024;

/// An `rtsp://` URL split up. `transport=udp` in the query is kiln's
/// option (RTP over UDP instead of the TCP connection) and is not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtspUrl {
    pub host: String,
    pub port: u16,
    /// Path and query as sent (starts with `/`).
    pub path: String,
    pub user: Option<String>,
    pub password: Option<String>,
    pub udp: bool,
}

impl RtspUrl {
    pub fn parse(url: &str) -> Result<RtspUrl, String> {
        let rest = url
            .strip_prefix("rtsp://")
            .ok_or_else(|| "an RTSP URL starts with rtsp://".to_string())?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (host, port) = crate::http::url::split_authority(hostport)
            .map_err(|e| format!("The rtsp url is not valid: {e}"))?;
        let (host, port) = (host.to_string(), port.unwrap_or(554));
        let (user, password) = match userinfo {
            Some(u) => match u.split_once(':') {
                Some((a, b)) => (Some(percent_decode(a)), Some(percent_decode(b))),
                None => (Some(percent_decode(u)), None),
            },
            None => (None, None),
        };
        let (base, query) = path.split_once('?').unwrap_or((path, ""));
        let mut udp = false;
        let kept: Vec<&str> = query
            .split('&')
            .filter(|p| !p.is_empty())
            .filter(|p| match p.split_once('=') {
                Some(("transport", v)) => {
                    udp = v.eq_ignore_ascii_case("udp");
                    false
                }
                _ => true,
            })
            .collect();
        let path = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        Ok(RtspUrl {
            host,
            port,
            path,
            user,
            password,
            udp,
        })
    }

    /// The URL requests name (no credentials).
    pub fn request_url(&self) -> String {
        if self.host.contains(':') {
            format!("rtsp://[{}]:{}{}", self.host, self.port, self.path)
        } else {
            format!("rtsp://{}:{}{}", self.host, self.port, self.path)
        }
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A header's value (names compare case-insensitively; the first wins).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of a header (`WWW-Authenticate` may repeat).
    pub fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    Response(Response),
    /// A binary frame: RTP on even channels, RTCP on odd ones.
    Interleaved {
        channel: u8,
        data: Vec<u8>,
    },
    /// A request from the server (e.g. `GET_PARAMETER`, `ANNOUNCE`): its
    /// method and CSeq, to be answered.
    Request {
        method: String,
        cseq: String,
    },
}

/// Why the input cannot be read on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageError {
    HeadTooLarge,
    BodyTooLarge,
    Malformed(&'static str),
}

impl std::fmt::Display for MessageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MessageError::HeadTooLarge => write!(f, "response head over {MAX_HEAD} bytes"),
            MessageError::BodyTooLarge => write!(f, "response body over {MAX_BODY} bytes"),
            MessageError::Malformed(what) => write!(f, "malformed response: {what}"),
        }
    }
}

/// Splits the TCP input into [`Incoming`] items.
#[derive(Debug, Default)]
pub struct Reader {
    buf: Vec<u8>,
    pos: usize,
}

impl Reader {
    pub fn feed(&mut self, data: &[u8]) {
        if self.pos > 0 && self.pos * 2 >= self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Bytes held (bounded by the caller reading only while this is small).
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next complete item, if any.
    pub fn next_item(&mut self) -> Result<Option<Incoming>, MessageError> {
        let data = &self.buf[self.pos..];
        let Some(&first) = data.first() else {
            return Ok(None);
        };
        if first == b'$' {
            if data.len() < 4 {
                return Ok(None);
            }
            let len = usize::from(u16::from_be_bytes([data[2], data[3]]));
            let Some(frame) = data.get(4..4 + len) else {
                return Ok(None);
            };
            let item = Incoming::Interleaved {
                channel: data[1],
                data: frame.to_vec(),
            };
            self.pos += 4 + len;
            return Ok(Some(item));
        }
        let Some(head_end) = find(data, b"\r\n\r\n") else {
            if data.len() > MAX_HEAD {
                return Err(MessageError::HeadTooLarge);
            }
            return Ok(None);
        };
        if head_end > MAX_HEAD {
            return Err(MessageError::HeadTooLarge);
        }
        let head = std::str::from_utf8(&data[..head_end])
            .map_err(|_| MessageError::Malformed("head is not UTF-8"))?;
        let mut lines = head.split("\r\n");
        let start = lines.next().unwrap_or("");
        let mut headers = Vec::new();
        for line in lines.take(64) {
            if let Some((k, v)) = line.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let length: usize = match headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("Content-Length"))
        {
            Some((_, v)) => v
                .parse()
                .map_err(|_| MessageError::Malformed("bad Content-Length"))?,
            None => 0,
        };
        if length > MAX_BODY {
            return Err(MessageError::BodyTooLarge);
        }
        let body_start = head_end + 4;
        let Some(body) = data.get(body_start..body_start + length) else {
            return Ok(None);
        };
        let item = if let Some(rest) = start.strip_prefix("RTSP/1.0 ") {
            let (code, reason) = rest.split_once(' ').unwrap_or((rest, ""));
            let status: u16 = code
                .parse()
                .ok()
                .filter(|s| (100..600).contains(s))
                .ok_or(MessageError::Malformed("bad status line"))?;
            Incoming::Response(Response {
                status,
                reason: reason.chars().take(128).collect(),
                headers,
                body: body.to_vec(),
            })
        } else if start.ends_with(" RTSP/1.0") {
            let method = start
                .split(' ')
                .next()
                .unwrap_or("")
                .chars()
                .take(32)
                .collect();
            let cseq = headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("CSeq"))
                .map(|(_, v)| v.chars().take(16).collect())
                .unwrap_or_default();
            Incoming::Request { method, cseq }
        } else {
            return Err(MessageError::Malformed("not an RTSP/1.0 message"));
        };
        self.pos += body_start + length;
        Ok(Some(item))
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Writes a request.
pub fn write_request(
    out: &mut Vec<u8>,
    method: &str,
    url: &str,
    cseq: u32,
    headers: &[(&str, &str)],
) {
    out.extend_from_slice(format!("{method} {url} RTSP/1.0\r\nCSeq: {cseq}\r\n").as_bytes());
    for (k, v) in headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

/// The credentials a server asked for, ready to sign requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    Basic(String),
    Digest {
        user: String,
        password: String,
        realm: String,
        nonce: String,
        opaque: Option<String>,
        qop_auth: bool,
        count: u32,
    },
}

impl Auth {
    /// From the `WWW-Authenticate` values of a 401 (Digest preferred).
    pub fn from_challenge<'a>(
        challenges: impl Iterator<Item = &'a str>,
        user: &str,
        password: &str,
    ) -> Option<Auth> {
        let mut basic = None;
        for c in challenges {
            let (scheme, params) = c.split_once(' ').unwrap_or((c, ""));
            if scheme.eq_ignore_ascii_case("Digest") {
                let get = |name: &str| param(params, name);
                let algorithm = get("algorithm").unwrap_or_else(|| "MD5".into());
                if !algorithm.eq_ignore_ascii_case("MD5") {
                    continue;
                }
                return Some(Auth::Digest {
                    user: user.into(),
                    password: password.into(),
                    realm: get("realm")?,
                    nonce: get("nonce")?,
                    opaque: get("opaque"),
                    qop_auth: get("qop").is_some_and(|q| q.split(',').any(|v| v.trim() == "auth")),
                    count: 0,
                });
            }
            if scheme.eq_ignore_ascii_case("Basic") {
                use base64::Engine;
                let token =
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                basic = Some(Auth::Basic(format!("Basic {token}")));
            }
        }
        basic
    }

    /// The `Authorization` value for one request.
    pub fn header(&mut self, method: &str, uri: &str) -> String {
        match self {
            Auth::Basic(v) => v.clone(),
            Auth::Digest {
                user,
                password,
                realm,
                nonce,
                opaque,
                qop_auth,
                count,
            } => {
                let ha1 = md5_hex(&format!("{user}:{realm}:{password}"));
                let ha2 = md5_hex(&format!("{method}:{uri}"));
                let mut v = format!(
                    "Digest username=\"{user}\", realm=\"{realm}\", nonce=\"{nonce}\", uri=\"{uri}\""
                );
                if *qop_auth {
                    *count += 1;
                    let nc = format!("{:08x}", count);
                    let cnonce = md5_hex(&format!("{nonce}:{count}:kiln"))[..16].to_string();
                    let response = md5_hex(&format!("{ha1}:{nonce}:{nc}:{cnonce}:auth:{ha2}"));
                    v.push_str(&format!(
                        ", qop=auth, nc={nc}, cnonce=\"{cnonce}\", response=\"{response}\""
                    ));
                } else {
                    let response = md5_hex(&format!("{ha1}:{nonce}:{ha2}"));
                    v.push_str(&format!(", response=\"{response}\""));
                }
                if let Some(o) = opaque {
                    v.push_str(&format!(", opaque=\"{o}\""));
                }
                v
            }
        }
    }
}

/// A `name="value"` or `name=value` parameter of a challenge.
fn param(params: &str, name: &str) -> Option<String> {
    let mut rest = params;
    while !rest.is_empty() {
        rest = rest.trim_start_matches([' ', ',']);
        let (key, after) = rest.split_once('=')?;
        let (value, next) = if let Some(q) = after.strip_prefix('"') {
            let end = q.find('"')?;
            (&q[..end], &q[end + 1..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        if key.trim().eq_ignore_ascii_case(name) {
            return Some(value.to_string());
        }
        rest = next;
    }
    None
}

fn md5_hex(s: &str) -> String {
    Md5::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = RtspUrl::parse("rtsp://admin:p%40ss@cam.local:8554/live/ch0?transport=udp&x=1")
            .unwrap();
        assert_eq!((u.host.as_str(), u.port), ("cam.local", 8554));
        assert_eq!(u.user.as_deref(), Some("admin"));
        assert_eq!(u.password.as_deref(), Some("p@ss"));
        assert!(u.udp);
        assert_eq!(u.request_url(), "rtsp://cam.local:8554/live/ch0?x=1");
        let d = RtspUrl::parse("rtsp://10.0.0.1").unwrap();
        assert_eq!(d.request_url(), "rtsp://10.0.0.1:554/");
        assert!(!d.udp);
        assert!(RtspUrl::parse("http://x/").is_err());
        assert!(RtspUrl::parse("rtsp://:99999/").is_err());
    }

    #[test]
    fn responses_interleaved_and_requests() {
        let mut r = Reader::default();
        r.feed(b"RTSP/1.0 200 OK\r\nCSeq: 2\r\nContent-Length: 4\r\n\r\nv=0\n$\x01\x00\x02ab");
        r.feed(b"GET_PARAMETER rtsp://x/ RTSP/1.0\r\nCSeq: 9\r\n\r\nRTSP/1.0 401 Unauthorized\r\n");
        match r.next_item().unwrap().unwrap() {
            Incoming::Response(resp) => {
                assert_eq!(resp.status, 200);
                assert_eq!(resp.header("cseq"), Some("2"));
                assert_eq!(resp.body, b"v=0\n");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            r.next_item().unwrap(),
            Some(Incoming::Interleaved {
                channel: 1,
                data: b"ab".to_vec()
            })
        );
        assert_eq!(
            r.next_item().unwrap(),
            Some(Incoming::Request {
                method: "GET_PARAMETER".into(),
                cseq: "9".into()
            })
        );
        assert_eq!(r.next_item().unwrap(), None);
        r.feed(b"\r\n");
        assert!(matches!(r.next_item().unwrap(), Some(Incoming::Response(x)) if x.status == 401));
    }

    #[test]
    fn bounds_and_garbage() {
        let mut r = Reader::default();
        r.feed(&vec![b'a'; MAX_HEAD + 1]);
        assert_eq!(r.next_item(), Err(MessageError::HeadTooLarge));
        let mut r = Reader::default();
        r.feed(b"RTSP/1.0 200 OK\r\nContent-Length: 999999\r\n\r\n");
        assert_eq!(r.next_item(), Err(MessageError::BodyTooLarge));
        let mut r = Reader::default();
        r.feed(b"HTTP/1.1 200 OK\r\n\r\n");
        assert!(matches!(r.next_item(), Err(MessageError::Malformed(_))));
    }

    #[test]
    fn digest_matches_rfc_2617_example() {
        // RFC 2617 section 3.5 (qop=auth).
        let mut a = Auth::from_challenge(
            [r#"Digest realm="testrealm@host.com", qop="auth,auth-int", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", opaque="5ccc069c403ebaf9f0171e9517f40e41""#]
                .into_iter(),
            "Mufasa",
            "Circle Of Life",
        )
        .unwrap();
        if let Auth::Digest { .. } = a {
        } else {
            panic!("digest expected");
        }
        // The RFC's cnonce is fixed; check the no-qop form, then the shape.
        let mut plain = Auth::Digest {
            user: "Mufasa".into(),
            password: "Circle Of Life".into(),
            realm: "testrealm@host.com".into(),
            nonce: "dcd98b7102dd2f0e8b11d0f600bfb0c093".into(),
            opaque: None,
            qop_auth: false,
            count: 0,
        };
        let h = plain.header("GET", "/dir/index.html");
        // MD5(HA1:nonce:HA2) with the RFC's HA1 and HA2.
        let expect = md5_hex(&format!(
            "{}:dcd98b7102dd2f0e8b11d0f600bfb0c093:{}",
            md5_hex("Mufasa:testrealm@host.com:Circle Of Life"),
            md5_hex("GET:/dir/index.html")
        ));
        assert!(h.contains(&format!("response=\"{expect}\"")));
        let q = a.header("DESCRIBE", "rtsp://x/");
        assert!(q.contains("qop=auth, nc=00000001"));
        assert!(q.contains("opaque=\"5ccc069c403ebaf9f0171e9517f40e41\""));
        assert_eq!(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
        let b = Auth::from_challenge(["Basic realm=\"x\""].into_iter(), "u", "p").unwrap();
        assert_eq!(b, Auth::Basic("Basic dTpw".into()));
    }
}
