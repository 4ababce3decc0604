//! Host names and origins as HTTP carries them (a core piece: the API, the
//! viewer port and the ingests all match them): the host of a `Host`
//! header, the `CrossDomains` match of an `Origin`, and what a DNS name is.

use crate::wildcard;

/// A DNS name (labels of letters, digits, `-` and `_`, 1-63 bytes each, 253
/// in all) or a dotted IPv4 address.
pub fn valid_host_name(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.trim_end_matches('.').split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Does a CrossDomains entry allow an Origin? An entry with `scheme://`
/// matches the whole origin; one without matches the part after `http://`
/// or `https://`. Only a well-formed origin (`scheme://host[:port]`) can
/// match, so a wildcard never spans a path, query, fragment or user part
/// (`*.trusted.test` does not allow `https://evil.com/.trusted.test`).
pub fn origin_matches(entry: &str, origin: &str) -> bool {
    if !is_origin(origin) {
        return false;
    }
    if entry.contains("://") {
        return wildcard::matches(entry, origin);
    }
    let lower = origin.to_ascii_lowercase();
    let rest = if lower.starts_with("http://") {
        &origin[7..]
    } else if lower.starts_with("https://") {
        &origin[8..]
    } else {
        return false;
    };
    wildcard::matches(entry, rest)
}

/// `scheme://host[:port]` as browsers send it (RFC 6454): a scheme, a host
/// of non-empty DNS labels or a bracketed IPv6 address, an optional port.
fn is_origin(origin: &str) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    let scheme_ok = scheme
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    let (host_ok, port) = match rest.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((h, after)) => (h.parse::<std::net::Ipv6Addr>().is_ok(), after),
            None => return false,
        },
        None => {
            let (h, port) = rest.split_at(rest.find(':').unwrap_or(rest.len()));
            (valid_host_name(h) && !h.ends_with('.'), port)
        }
    };
    let port_ok = port.is_empty()
        || port.strip_prefix(':').is_some_and(|p| {
            !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
        });
    scheme_ok && host_ok && port_ok
}

/// The host part of a `Host` header: port removed, IPv6 brackets removed.
pub fn host_without_port(host: &str) -> &str {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}
