//! HTTP/1.1 for the management API, sans-IO: [`request`] turns bytes into
//! requests, [`response`] turns responses into bytes. The connection glue in
//! `server` owns the sockets, TLS and time-outs.

pub mod host;
pub mod request;
pub mod response;
pub mod url;
pub mod ws;

pub use request::{ReaderLimits, Request, RequestError, RequestReader};
pub use response::{write_response, Response};

/// Decodes `%XX` escapes (URL paths, query values); `None` when an escape is
/// malformed or the result is not UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_string());
    }
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = hex(*b.get(i + 1)?)?;
            let l = hex(*b.get(i + 2)?)?;
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn decodes() {
        assert_eq!(percent_decode("a%2Fb%3a").as_deref(), Some("a/b:"));
        assert_eq!(percent_decode("plain").as_deref(), Some("plain"));
        assert_eq!(percent_decode("bad%zz"), None);
        assert_eq!(percent_decode("cut%2"), None);
        assert_eq!(percent_decode("%ff"), None);
    }
}
