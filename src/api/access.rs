//! Who may call the API and from where (DECISIONS section 3): Basic
//! authentication against the AccessToken (constant-time), CORS for the
//! configured CrossDomains, and the `<Managers><Host><Names>` check.

use super::envelope::ApiError;
pub use crate::http::host::{host_without_port, origin_matches};
use crate::http::Request;
use crate::wildcard;
use base64::Engine;

pub const REALM_HEADER: &str = "Basic realm=\"kiln\"";

pub const ALLOW_METHODS: &str = "GET, POST, PUT, PATCH, DELETE, OPTIONS";
const DEFAULT_ALLOW_HEADERS: &str = "Authorization, Content-Type";

/// Checks the `Authorization` header against the token.
pub fn authenticate(req: &Request, token: &[u8]) -> Result<(), ApiError> {
    let Some(value) = req.header("authorization") else {
        return Err(ApiError::auth_required());
    };
    let value = std::str::from_utf8(value).map_err(|_| ApiError::invalid_auth_header())?;
    let value = value.trim();
    let (scheme, creds) = value
        .split_once(' ')
        .ok_or_else(ApiError::invalid_auth_header)?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(ApiError::invalid_auth_header());
    }
    let creds = creds.trim();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(creds)
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(creds))
        .map_err(|_| ApiError::invalid_auth_header())?;
    if constant_time_eq(&decoded, token) {
        Ok(())
    } else {
        Err(ApiError::invalid_credential())
    }
}

/// Compares without an early exit, so the time taken does not tell how many
/// leading bytes were right. The length is compared the same way.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().max(b.len());
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..n {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= (x ^ y) as u64;
    }
    std::hint::black_box(diff) == 0
}

/// The CORS headers for a request, empty when CORS does not apply.
pub fn cors_headers(req: &Request, cross_domains: &[String]) -> Vec<(&'static str, String)> {
    let Some(origin) = req.header_str("origin") else {
        return Vec::new();
    };
    if cross_domains.is_empty() {
        return Vec::new();
    }
    let allow_headers = req
        .header_str("access-control-request-headers")
        .filter(|h| !h.trim().is_empty())
        .unwrap_or(DEFAULT_ALLOW_HEADERS)
        .to_string();
    if cross_domains.iter().any(|d| d == "*") {
        return vec![
            ("Access-Control-Allow-Origin", "*".into()),
            ("Access-Control-Allow-Methods", ALLOW_METHODS.into()),
            ("Access-Control-Allow-Headers", allow_headers),
        ];
    }
    if cross_domains.iter().any(|d| origin_matches(d, origin)) {
        vec![
            ("Access-Control-Allow-Origin", origin.to_string()),
            ("Vary", "Origin".into()),
            ("Access-Control-Allow-Credentials", "true".into()),
            ("Access-Control-Allow-Methods", ALLOW_METHODS.into()),
            ("Access-Control-Allow-Headers", allow_headers),
        ]
    } else {
        Vec::new()
    }
}

/// The `<Managers><Host><Names>` check on the Host header and the SNI name.
pub fn check_host(req: &Request, sni: Option<&str>, names: &[String]) -> Result<(), ApiError> {
    if names.is_empty() || names.iter().any(|n| n == "*") {
        return Ok(());
    }
    let served = |h: &str| names.iter().any(|n| wildcard::matches(n, h));
    if let Some(sni) = sni {
        if !served(sni) {
            return Err(ApiError::misdirected(sni));
        }
    }
    let host = host_without_port(req.header_str("host").unwrap_or(""));
    if !served(host) {
        return Err(ApiError::misdirected(host));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(headers: &[(&str, &str)]) -> Request {
        let headers: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (*n, v.as_bytes())).collect();
        Request::new("GET", "/v1/vhosts", 1, &headers)
    }

    #[test]
    fn basic_auth() {
        let token = b"user:pass";
        assert_eq!(
            authenticate(&req(&[]), token),
            Err(ApiError::auth_required())
        );
        assert_eq!(
            authenticate(&req(&[("Authorization", "Bearer x")]), token),
            Err(ApiError::invalid_auth_header())
        );
        assert_eq!(
            authenticate(&req(&[("Authorization", "Basic !!!")]), token),
            Err(ApiError::invalid_auth_header())
        );
        assert_eq!(
            authenticate(&req(&[("Authorization", "Basic dXNlcjpwYXNz")]), token),
            Ok(())
        );
        assert_eq!(
            authenticate(&req(&[("Authorization", "basic dXNlcjpwYXNz")]), token),
            Ok(())
        );
        assert_eq!(
            authenticate(&req(&[("Authorization", "Basic dXNlcjpwYXN6")]), token),
            Err(ApiError::invalid_credential())
        );
    }

    #[test]
    fn constant_time() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn cors() {
        let domains = vec!["*.example.com".to_string(), "https://app.test".to_string()];
        let h = cors_headers(&req(&[("Origin", "http://a.example.com")]), &domains);
        assert!(h.contains(&("Access-Control-Allow-Origin", "http://a.example.com".into())));
        assert!(h.contains(&("Vary", "Origin".into())));
        assert!(h.contains(&("Access-Control-Allow-Credentials", "true".into())));
        assert!(cors_headers(&req(&[("Origin", "http://app.test")]), &domains).is_empty());
        assert!(!cors_headers(&req(&[("Origin", "https://APP.test")]), &domains).is_empty());
        assert!(cors_headers(&req(&[("Origin", "http://evil.com")]), &domains).is_empty());
        assert!(cors_headers(&req(&[]), &domains).is_empty());
        let star = vec!["*".to_string()];
        let h = cors_headers(
            &req(&[
                ("Origin", "http://x"),
                ("Access-Control-Request-Headers", "authorization"),
            ]),
            &star,
        );
        assert!(h.contains(&("Access-Control-Allow-Origin", "*".into())));
        assert!(h.contains(&("Access-Control-Allow-Headers", "authorization".into())));
    }

    #[test]
    fn host_names() {
        let names = vec!["api.example.com".to_string(), "127.0.0.1".to_string()];
        assert!(check_host(&req(&[("Host", "api.example.com:8081")]), None, &names).is_ok());
        assert!(check_host(&req(&[("Host", "127.0.0.1:8081")]), None, &names).is_ok());
        let e = check_host(&req(&[("Host", "other:8081")]), None, &names).unwrap_err();
        assert_eq!(e.status(), 421);
        assert_eq!(
            e.message(),
            "[HTTP] Misdirected request: host [other] is not served (421)"
        );
        assert!(check_host(&req(&[("Host", "api.example.com")]), Some("x.org"), &names).is_err());
        assert!(check_host(&req(&[("Host", "other")]), None, &["*".into()]).is_ok());
        assert_eq!(host_without_port("[::1]:8081"), "::1");
    }
}
