//! OME's SignedPolicy, byte for byte (DECISIONS section 11).
//!
//! The URL a client asked for always carries a port. Its query holds
//! `policy` (base64url of a JSON object) and `signature`: base64url,
//! without padding, of HMAC-SHA1(secret, the URL with the signature pair
//! removed, the other pairs in their order). The policy says until when
//! the URL may be used (`url_expire`, epoch ms, required), from when
//! (`url_activate`), until when a session it opened may last
//! (`stream_expire`) and from which addresses (`allow_ip`, IPv4 CIDR).
//!
//! Pure functions of (URL, keys, secret, client address, now).

use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use std::net::{IpAddr, Ipv4Addr};

/// The most URL text a policy check reads (a longer URL is refused).
pub const MAX_URL: usize = 8 * 1024;

/// Why a signed URL is refused (OME's texts, without echoing secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyError {
    NoSignature(String),
    NoPolicy(String),
    BadSignature,
    BadPolicy(&'static str),
    Expired,
    NotActive,
    StreamExpired,
    AddressNotAllowed { client: IpAddr, allowed: String },
    UrlTooLong,
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicyError::NoSignature(k) => write!(f, "There is no signature key({k}) in the URL"),
            PolicyError::NoPolicy(k) => write!(f, "There is no policy key({k}) in the URL"),
            PolicyError::BadSignature => f.write_str("Signature value is invalid"),
            PolicyError::BadPolicy(why) => write!(f, "The policy is in wrong format: {why}"),
            PolicyError::Expired => f.write_str("URL has expired"),
            PolicyError::NotActive => f.write_str("The URL has not yet been activated"),
            PolicyError::StreamExpired => f.write_str("Stream has expired"),
            PolicyError::AddressNotAllowed { client, allowed } => {
                write!(f, "{client} IP address is not allowed (allowed: {allowed})")
            }
            PolicyError::UrlTooLong => write!(f, "The URL is longer than {MAX_URL} bytes"),
        }
    }
}

/// A verified policy: what it grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Granted {
    /// When a session it opened must end (epoch ms).
    pub stream_expire: Option<u64>,
}

/// The keys and secret of a virtual host's `signedPolicy`.
#[derive(Debug, Clone, Copy)]
pub struct PolicyKeys<'a> {
    pub policy_key: &'a str,
    pub signature_key: &'a str,
    pub secret: &'a str,
}

/// Checks `url` (scheme://host:port/path?query) for `client` at `now_ms`.
pub fn verify(
    url: &str,
    keys: PolicyKeys<'_>,
    client: IpAddr,
    now_ms: u64,
) -> Result<Granted, PolicyError> {
    if url.len() > MAX_URL {
        return Err(PolicyError::UrlTooLong);
    }
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let signature = query_value(query, keys.signature_key)
        .ok_or_else(|| PolicyError::NoSignature(keys.signature_key.to_string()))?;
    let policy = query_value(query, keys.policy_key)
        .ok_or_else(|| PolicyError::NoPolicy(keys.policy_key.to_string()))?;
    if signature.is_empty() {
        return Err(PolicyError::NoSignature(keys.signature_key.to_string()));
    }
    let signed = url_without(base, query, keys.signature_key);
    let expected = sign(keys.secret, &signed);
    // Constant time: the expected value must not leak byte by byte.
    if !same_bytes(expected.as_bytes(), signature.as_bytes()) {
        return Err(PolicyError::BadSignature);
    }
    if policy.is_empty() {
        return Err(PolicyError::NoPolicy(keys.policy_key.to_string()));
    }
    let policy = decode_policy(&policy)?;
    if policy.url_expire < now_ms {
        return Err(PolicyError::Expired);
    }
    if policy.url_activate.is_some_and(|a| a > now_ms) {
        return Err(PolicyError::NotActive);
    }
    if policy.stream_expire.is_some_and(|s| s < now_ms) {
        return Err(PolicyError::StreamExpired);
    }
    if let Some((net, bits)) = policy.allow_ip {
        if !in_cidr(client, net, bits) {
            return Err(PolicyError::AddressNotAllowed {
                client: canonical(client),
                allowed: format!("{net}/{bits}"),
            });
        }
    }
    Ok(Granted {
        stream_expire: policy.stream_expire,
    })
}

/// Equal, compared in time that depends on the length only.
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// base64url-nopad(HMAC-SHA1(secret, text)): the signature of a URL and of
/// a webhook body alike.
pub fn sign(secret: &str, text: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret.as_bytes());
    URL_SAFE_NO_PAD.encode(ring::hmac::sign(&key, text.as_bytes()).as_ref())
}

/// A signed URL, as OME's generator makes it: `base_url` (with its port)
/// plus `policy_key=base64url(policy)`, then `signature_key=...`.
/// The URL as the verifier sees it (DECISIONS 11: always with a port): a
/// URL without one gets its scheme's default port (rtmp 1935, rtmps 443,
/// http/ws 80, https/wss 443); a scheme without a default (srt) must name
/// its port. The error says why.
pub fn with_port(url: &str) -> Result<String, String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!("[{url}] does not start with scheme://"));
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.is_empty() {
        return Err(format!("[{url}] has no host"));
    }
    if super::has_port(authority) {
        return Ok(url.to_string());
    }
    let port = match scheme.to_ascii_lowercase().as_str() {
        "rtmp" => 1935,
        "rtmps" | "https" | "wss" => 443,
        "http" | "ws" => 80,
        other => {
            return Err(format!(
                "[{url}] has no port and {other}:// has no default one; the verifier checks the URL with its port, so write it (e.g. {other}://{authority}:9999{tail})"
            ))
        }
    };
    Ok(format!("{scheme}://{authority}:{port}{tail}"))
}

pub fn sign_url(base_url: &str, keys: PolicyKeys<'_>, policy_json: &str) -> String {
    let sep = if base_url.contains('?') { '&' } else { '?' };
    let with_policy = format!(
        "{base_url}{sep}{}={}",
        keys.policy_key,
        URL_SAFE_NO_PAD.encode(policy_json.as_bytes())
    );
    let signature = sign(keys.secret, &with_policy);
    format!("{with_policy}&{}={signature}", keys.signature_key)
}

struct Policy {
    url_expire: u64,
    url_activate: Option<u64>,
    stream_expire: Option<u64>,
    allow_ip: Option<(Ipv4Addr, u8)>,
}

fn decode_policy(b64: &str) -> Result<Policy, PolicyError> {
    let trimmed = b64.trim_end_matches('=');
    let bytes = URL_SAFE_NO_PAD
        .decode(trimmed)
        .or_else(|_| URL_SAFE.decode(b64))
        .map_err(|_| PolicyError::BadPolicy("not base64url"))?;
    let json: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|_| PolicyError::BadPolicy("not JSON"))?;
    let obj = json
        .as_object()
        .ok_or(PolicyError::BadPolicy("not a JSON object"))?;
    let number = |k: &str| obj.get(k).and_then(serde_json::Value::as_u64);
    let url_expire = number("url_expire").ok_or(PolicyError::BadPolicy(
        "url_expire must be epoch milliseconds and is required",
    ))?;
    let allow_ip = match obj.get("allow_ip").and_then(serde_json::Value::as_str) {
        None => None,
        Some(s) => Some(parse_cidr(s).ok_or(PolicyError::BadPolicy("allow_ip is not a CIDR"))?),
    };
    Ok(Policy {
        url_expire,
        url_activate: number("url_activate"),
        stream_expire: number("stream_expire"),
        allow_ip,
    })
}

/// `a.b.c.d/n` or a bare address (`/32`).
fn parse_cidr(s: &str) -> Option<(Ipv4Addr, u8)> {
    let (ip, bits) = match s.split_once('/') {
        Some((ip, bits)) => (ip, bits.parse::<u8>().ok().filter(|b| *b <= 32)?),
        None => (s, 32),
    };
    Some((ip.trim().parse().ok()?, bits))
}

/// An IPv4-mapped IPv6 address as its IPv4 form (a dual-stack listener's
/// peers).
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn in_cidr(client: IpAddr, net: Ipv4Addr, bits: u8) -> bool {
    let IpAddr::V4(c) = canonical(client) else {
        return false;
    };
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(bits))
    };
    u32::from(c) & mask == u32::from(net) & mask
}

/// The value of the first `key=` pair, percent-decoded (OME reads keys
/// case-sensitively).
pub(crate) fn query_value(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == key).then(|| crate::http::percent_decode(v).unwrap_or_else(|| v.to_string()))
    })
}

/// `base` and `query` with every `key` pair removed (keys compared without
/// case, as OME does), the rest in order.
fn url_without(base: &str, query: &str, key: &str) -> String {
    let mut out = String::with_capacity(base.len() + query.len() + 1);
    out.push_str(base);
    let mut first = true;
    for pair in query.split('&') {
        let k = pair.split_once('=').map_or(pair, |(k, _)| k);
        if pair.is_empty() || k.eq_ignore_ascii_case(key) {
            continue;
        }
        out.push(if first { '?' } else { '&' });
        first = false;
        out.push_str(pair);
    }
    out
}

/// Fuzz entry: any URL and key names; never panics.
pub fn fuzz(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (keys, url) = text.split_once('\n').unwrap_or(("policy,signature", &text));
    let (p, s) = keys.split_once(',').unwrap_or((keys, "signature"));
    let keys = PolicyKeys {
        policy_key: p,
        signature_key: s,
        secret: "k",
    };
    let _ = verify(url, keys, IpAddr::V4(Ipv4Addr::LOCALHOST), 1_000);
    let _ = decode_policy(url);
    let _ = parse_cidr(url);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_signed_with_their_port() {
        assert_eq!(with_port("rtmp://h/app/s").unwrap(), "rtmp://h:1935/app/s");
        assert_eq!(
            with_port("rtmp://h:19350/app/s").unwrap(),
            "rtmp://h:19350/app/s"
        );
        assert_eq!(
            with_port("https://h/a/s/llhls.m3u8?x=1").unwrap(),
            "https://h:443/a/s/llhls.m3u8?x=1"
        );
        assert_eq!(with_port("ws://[::1]/a/s").unwrap(), "ws://[::1]:80/a/s");
        assert!(with_port("srt://h/a/s")
            .unwrap_err()
            .contains("has no port"));
        assert!(with_port("nonsense").is_err());
    }

    const KEYS: PolicyKeys<'static> = PolicyKeys {
        policy_key: "policy",
        signature_key: "signature",
        secret: "1kU^b6",
    };
    const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    #[test]
    fn omes_documented_vector() {
        // OME's documentation: this key and URL sign to this value.
        let url = "ws://192.168.0.100:3333/app/stream?policy=eyJ1cmxfZXhwaXJlIjoxMzk5NzIxNTgxfQ";
        assert_eq!(sign("1kU^b6", url), "dvVdBpoxAeCPl94Kt5RoiqLI0YE");
        let signed = format!("{url}&signature=dvVdBpoxAeCPl94Kt5RoiqLI0YE");
        // {"url_expire":1399721581}: valid before that instant only.
        assert_eq!(
            verify(&signed, KEYS, LOCAL, 1_399_721_000),
            Ok(Granted::default())
        );
        assert_eq!(
            verify(&signed, KEYS, LOCAL, 1_399_721_582),
            Err(PolicyError::Expired)
        );
    }

    #[test]
    fn omes_generator_example() {
        // misc/signed_policy_url_generator.sh's usage example (its shell
        // quoting leaves the backslashes in the policy text).
        let keys = PolicyKeys {
            secret: "ome_is_the_best",
            ..KEYS
        };
        let url = sign_url(
            "ws://host:3333/app/stream",
            keys,
            r#"{\"url_expire\":1604377520178}"#,
        );
        assert_eq!(url, "ws://host:3333/app/stream?policy=e1widXJsX2V4cGlyZVwiOjE2MDQzNzc1MjAxNzh9&signature=rXfU1z1ynBTfK-q6_HM_I9fPzRs");
    }

    #[test]
    fn a_changed_byte_is_refused() {
        let policy = r#"{"url_expire":2000000000000}"#;
        let url = sign_url("rtmp://127.0.0.1:1935/app/stream", KEYS, policy);
        assert!(verify(&url, KEYS, LOCAL, 1_000).is_ok());
        let changed = url.replace("/app/stream", "/app/streaM");
        assert_eq!(
            verify(&changed, KEYS, LOCAL, 1_000),
            Err(PolicyError::BadSignature)
        );
        let wrong_key = PolicyKeys {
            secret: "other",
            ..KEYS
        };
        assert_eq!(
            verify(&url, wrong_key, LOCAL, 1_000),
            Err(PolicyError::BadSignature)
        );
    }

    #[test]
    fn query_order_is_kept_and_the_signature_may_sit_anywhere() {
        let policy = URL_SAFE_NO_PAD.encode(br#"{"url_expire":2000000000000}"#);
        let base = format!("http://h:3333/a/s/llhls.m3u8?x=1&policy={policy}&y=2");
        let sig = sign("1kU^b6", &base);
        let url = format!("http://h:3333/a/s/llhls.m3u8?x=1&signature={sig}&policy={policy}&y=2");
        assert!(verify(&url, KEYS, LOCAL, 1).is_ok());
        let reordered =
            format!("http://h:3333/a/s/llhls.m3u8?y=2&policy={policy}&x=1&signature={sig}");
        assert_eq!(
            verify(&reordered, KEYS, LOCAL, 1),
            Err(PolicyError::BadSignature)
        );
    }

    #[test]
    fn policy_fields() {
        let at = |p: &str, ip: IpAddr, now: u64| {
            let url = sign_url("srt://h:9999/app/s", KEYS, p);
            verify(&url, KEYS, ip, now)
        };
        let p = r#"{"url_expire":2000,"url_activate":1000,"stream_expire":5000,"allow_ip":"10.1.0.0/16"}"#;
        let inside: IpAddr = "10.1.2.3".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.1.9.9".parse().unwrap();
        let outside: IpAddr = "10.2.0.1".parse().unwrap();
        assert_eq!(
            at(p, inside, 1500),
            Ok(Granted {
                stream_expire: Some(5000)
            })
        );
        assert!(at(p, mapped, 1500).is_ok());
        assert!(matches!(
            at(p, outside, 1500),
            Err(PolicyError::AddressNotAllowed { .. })
        ));
        assert_eq!(at(p, inside, 999), Err(PolicyError::NotActive));
        assert_eq!(at(p, inside, 2001), Err(PolicyError::Expired));
        assert_eq!(
            at(r#"{"url_expire":9000,"stream_expire":100}"#, inside, 200),
            Err(PolicyError::StreamExpired)
        );
        assert!(matches!(
            at(r#"{"url_activate":1}"#, inside, 1),
            Err(PolicyError::BadPolicy(_))
        ));
        assert!(matches!(
            at(r#"{"url_expire":9,"allow_ip":"300.1.1.1/8"}"#, inside, 1),
            Err(PolicyError::BadPolicy(_))
        ));
        assert!(matches!(
            at("[1]", inside, 1),
            Err(PolicyError::BadPolicy(_))
        ));
        assert_eq!(
            verify("rtmp://h:1/a/s?policy=x", KEYS, LOCAL, 1),
            Err(PolicyError::NoSignature("signature".into()))
        );
        assert_eq!(
            verify("rtmp://h:1/a/s?signature=x", KEYS, LOCAL, 1),
            Err(PolicyError::NoPolicy("policy".into()))
        );
    }

    #[test]
    fn fuzz_entry_survives_odd_input() {
        for s in [
            "",
            "\n",
            "a,b\n?&&=&a=%zz",
            "policy,\n?policy=&signature=%",
            "/99",
        ] {
            fuzz(s.as_bytes());
        }
    }
}
