//! Authentication, CORS and host names (DECISIONS section 3) against the
//! real binary.

mod common;
use common::*;

#[test]
fn missing_wrong_and_malformed_credentials() {
    let s = Server::start("auth");
    let r = s.request_with("GET", "/v1/vhosts", &[], None);
    assert_eq!(r.status, 401);
    assert_eq!(
        r.body,
        r#"{"statusCode":401,"message":"[HTTP] Authorization header is required to call API (401)"}"#
    );
    assert_eq!(r.header("WWW-Authenticate"), Some("Basic realm=\"kiln\""));

    let r = s.request_with(
        "GET",
        "/v1/vhosts",
        &[("Authorization", "Bearer abc")],
        None,
    );
    assert_eq!(r.status, 401);
    assert_eq!(r.message(), "[HTTP] Invalid authorization header (401)");
    assert_eq!(r.header("WWW-Authenticate"), Some("Basic realm=\"kiln\""));

    let r = s.request_with("GET", "/v1/vhosts", &[("Authorization", "Basic %%%")], None);
    assert_eq!(r.message(), "[HTTP] Invalid authorization header (401)");

    // base64("kiln:wrong")
    let r = s.request_with(
        "GET",
        "/v1/vhosts",
        &[("Authorization", "Basic a2lsbjp3cm9uZw==")],
        None,
    );
    assert_eq!(r.status, 401);
    assert_eq!(r.message(), "[HTTP] Invalid credential (401)");
    assert_eq!(r.header("WWW-Authenticate"), Some("Basic realm=\"kiln\""));

    // unauthenticated calls never reach a handler: no 404 leaks
    let r = s.request_with("GET", "/v1/vhosts/nope", &[], None);
    assert_eq!(r.status, 401);
    // the token is never logged
    assert!(!s.log_text().contains("test-token"));
}

#[test]
fn curl_basic_auth() {
    if !have_tool("curl") {
        return;
    }
    let s = Server::start("curlauth");
    let (code, _, _) = curl(&["-u", TOKEN], &s.url("/v1/vhosts"));
    assert_eq!(code, 200);
    let (code, body, _) = curl(&["-u", "kiln:nope"], &s.url("/v1/vhosts"));
    assert_eq!(code, 401);
    assert!(body.contains("Invalid credential"));
}

#[test]
fn preflight_before_auth_and_cors_on_errors() {
    let s = Server::start_with(
        "cors",
        ServerOptions {
            cross_domains: vec!["*.example.com".into(), "https://admin.test".into()],
            ..Default::default()
        },
    );
    let pre = s.request_with(
        "OPTIONS",
        "/v1/vhosts",
        &[
            ("Origin", "http://app.example.com"),
            ("Access-Control-Request-Method", "POST"),
            (
                "Access-Control-Request-Headers",
                "authorization, content-type",
            ),
        ],
        None,
    );
    assert_eq!(pre.status, 204);
    assert_eq!(pre.body, "");
    assert_eq!(
        pre.header("Access-Control-Allow-Origin"),
        Some("http://app.example.com")
    );
    assert_eq!(pre.header("Vary"), Some("Origin"));
    assert_eq!(pre.header("Access-Control-Allow-Credentials"), Some("true"));
    assert_eq!(
        pre.header("Access-Control-Allow-Methods"),
        Some("GET, POST, PUT, PATCH, DELETE, OPTIONS")
    );
    assert_eq!(
        pre.header("Access-Control-Allow-Headers"),
        Some("authorization, content-type")
    );

    // 401 and 404 carry CORS headers so a browser can read them
    let r = s.request_with(
        "GET",
        "/v1/vhosts",
        &[("Origin", "https://x.example.com")],
        None,
    );
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("Access-Control-Allow-Origin"),
        Some("https://x.example.com")
    );
    let r = s.request_with(
        "GET",
        "/v1/vhosts/nope",
        &[("Origin", "https://admin.test"), ("Authorization", AUTH)],
        None,
    );
    assert_eq!(r.status, 404);
    assert_eq!(
        r.header("Access-Control-Allow-Origin"),
        Some("https://admin.test")
    );

    // scheme-bound entry refuses the other scheme; unknown origins get nothing
    // and a wildcard matches inside the host only (never / ? # @, never an
    // empty label)
    for origin in [
        "http://admin.test",
        "http://example.org",
        "http://example.com",
        "https://evil.com/.example.com",
        "https://evil.com?.example.com",
        "https://evil.com#.example.com",
        "https://user@evil.com.example.com",
        "https://.example.com",
        "https://a..example.com",
    ] {
        let r = s.request_with("OPTIONS", "/v1/vhosts", &[("Origin", origin)], None);
        assert_eq!(r.status, 204);
        assert_eq!(r.header("Access-Control-Allow-Origin"), None, "{origin}");
    }
}

#[test]
fn star_cross_domain() {
    let s = Server::start("corsstar");
    let r = s.request_with(
        "GET",
        "/v1/vhosts",
        &[("Origin", "http://anything.test"), ("Authorization", AUTH)],
        None,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"));
}

#[test]
fn no_cross_domains_means_no_cors() {
    let s = Server::start_with(
        "nocors",
        ServerOptions {
            cross_domains: vec![],
            ..Default::default()
        },
    );
    let r = s.request_with(
        "OPTIONS",
        "/v1/vhosts",
        &[("Origin", "http://a.test")],
        None,
    );
    assert_eq!(r.status, 204);
    assert_eq!(r.header("Access-Control-Allow-Origin"), None);
}

#[test]
fn host_names_restrict_the_api() {
    let s = Server::start_with(
        "hostnames",
        ServerOptions {
            host_names: vec!["api.example.com".into(), "127.0.0.?".into()],
            ..Default::default()
        },
    );
    // the harness sends Host: 127.0.0.1
    assert_eq!(s.request("GET", "/v1/vhosts", None).status, 200);
    let r = s.request_with(
        "GET",
        "/v1/vhosts",
        &[("Host", "evil.example.org:8081"), ("Authorization", AUTH)],
        None,
    );
    // a second Host header is refused (DECISIONS section 15)
    assert_eq!(r.status, 400);
    assert!(r.body.contains("more than one Host header"), "{}", r.body);
    let mut st = connect(s.port);
    use std::io::Write;
    st.write_all(
        b"GET /v1/vhosts HTTP/1.1\r\nHost: evil.example.org:8081\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let r = read_response(&mut std::io::BufReader::new(st), false).unwrap();
    assert_eq!(r.status, 421);
    assert_eq!(
        r.message(),
        "[HTTP] Misdirected request: host [evil.example.org] is not served (421)"
    );
}
