//! What URLs of every kind share: `host[:port]` authorities and the form
//! logs and answers show a URL in (secrets masked).

use super::host::valid_host_name;

/// Splits `host[:port]` or `[v6][:port]`; the error says what is wrong.
pub fn split_authority(authority: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or("the IPv6 address has no closing ]")?;
        if h.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("[{h}] is not an IPv6 address"));
        }
        let port = match after.strip_prefix(':') {
            Some(p) => Some(parse_port(p)?),
            None if after.is_empty() => None,
            None => return Err(format!("unexpected [{after}] after the IPv6 address")),
        };
        (h, port)
    } else {
        let (h, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(parse_port(p)?)),
            None => (authority, None),
        };
        if !valid_host_name(h) {
            return Err(format!("the host [{h}] is not a host name or IPv4 address"));
        }
        (h, port)
    };
    Ok((host, port))
}

/// A port in a URL: 1-5 digits, 1-65535 (no sign, no spaces).
fn parse_port(p: &str) -> Result<u16, String> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("the port [{p}] is not a number"));
    }
    p.parse::<u16>()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("the port [{p}] is not in 1-65535"))
}

/// Query options whose values are secrets: never logged or shown.
const SECRET_OPTIONS: [&str; 1] = ["passphrase"];

/// The URL as logs and answers show it: every secret option's value (each
/// occurrence) replaced by `***`.
pub fn redacted_url(url: &str) -> std::borrow::Cow<'_, str> {
    let Some((base, query)) = url.split_once('?') else {
        return url.into();
    };
    let secret = |kv: &str| {
        let k = kv.split_once('=').map_or(kv, |(k, _)| k);
        SECRET_OPTIONS.iter().any(|s| k.eq_ignore_ascii_case(s))
    };
    if !query.split('&').any(secret) {
        return url.into();
    }
    let query: Vec<String> = query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if secret(kv) => format!("{k}=***"),
            _ => kv.to_string(),
        })
        .collect();
    format!("{base}?{}", query.join("&")).into()
}

/// A TURN-over-TCP server at `ip:port` as WebRTC signalling names it.
pub fn turn_tcp(ip: std::net::IpAddr, port: u16) -> String {
    // An IPv6 address is bracketed, as a URL's host must be.
    format!("turn:{}?transport=tcp", std::net::SocketAddr::new(ip, port))
}
