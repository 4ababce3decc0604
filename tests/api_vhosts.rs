//! Virtual host endpoints against the real binary: envelopes, status codes
//! and message texts of the specification and DECISIONS section 4.

mod common;
use common::*;
use serde_json::json;

#[test]
fn list_get_and_envelope_order() {
    let s = Server::start("list");
    let r = s.request("GET", "/v1/vhosts", None);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body,
        r#"{"statusCode":200,"message":"OK","response":["default"]}"#
    );
    assert_eq!(
        r.header("Content-Type"),
        Some("application/json;charset=UTF-8")
    );
    assert!(r.header("Server").unwrap().starts_with("kiln/"));

    let r = s.request("GET", "/v1/vhosts/default", None);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json()["response"],
        json!({"name":"default","distribution":"kiln-test","host":{"names":["*"]}})
    );
    // HEAD works wherever GET does: same headers, no body.
    let h = s.request("HEAD", "/v1/vhosts/default", None);
    assert_eq!(h.status, 200);
    assert_eq!(h.header("Content-Length"), r.header("Content-Length"));
    assert_eq!(h.body, "");
}

#[test]
fn unknown_vhost_path_and_method() {
    let s = Server::start("notfound");
    let r = s.request("GET", "/v1/vhosts/nope", None);
    assert_eq!(r.status, 404);
    assert_eq!(
        r.body,
        r#"{"statusCode":404,"message":"[HTTP] Could not find the virtual host: [nope] (404)"}"#
    );
    let r = s.request("DELETE", "/v1/vhosts/nope", None);
    assert_eq!(r.status, 404);
    let r = s.request("GET", "/v1/nothing", None);
    assert_eq!(r.status, 404);
    assert_eq!(r.message(), "[HTTP] Controller not found (404)");
    // a path that cannot be read is the client's error, not a missing page
    let r = s.request("GET", "/v1/vhosts/%zz", None);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.message().contains("Invalid percent-encoding"),
        "{}",
        r.body
    );
    let r = s.request("PUT", "/v1/vhosts", Some("[]"));
    assert_eq!(r.status, 405);
    assert_eq!(r.message(), "[HTTP] Method not allowed (405)");
    assert_eq!(r.header("Allow"), Some("GET, POST, HEAD, OPTIONS"));
}

#[test]
fn create_all_ok_is_200_with_bare_array() {
    let s = Server::start("create200");
    let body = json!([
        {"name":"a","host":{"names":["a.example.com"]}},
        {"name":"b","distribution":"cdn","host":{"names":["b.example.com","*.b.example.com"]},
         "admissionWebhooks":{"controlServerUrl":"http://hook/x","secretKey":"","timeout":3000,"enables":{"providers":"rtmp,srt"}}}
    ]);
    let r = s.request("POST", "/v1/vhosts", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body
            .starts_with(r#"[{"statusCode":200,"message":"OK","response":{"name":"a","#),
        "{}",
        r.body
    );
    let v = r.json();
    assert_eq!(v[1]["response"]["distribution"], "cdn");
    assert_eq!(v[1]["response"]["admissionWebhooks"]["timeout"], 3000);
    let list = s.request("GET", "/v1/vhosts", None).json();
    assert_eq!(list["response"], json!(["default", "a", "b"]));
    // never `applications` in a GET
    let r = s.request(
        "POST",
        "/v1/vhosts",
        Some(r#"[{"name":"c","host":{"names":["*"]},"applications":[{"name":"x"}]}]"#),
    );
    assert_eq!(r.status, 200);
    let got = s.request("GET", "/v1/vhosts/c", None).json();
    assert!(got["response"].get("applications").is_none());
}

#[test]
fn create_mixed_is_207_and_uniform_errors_keep_their_code() {
    let s = Server::start("create207");
    let body = r#"[{"name":"a","host":{"names":["*"]}},{"name":"default","host":{"names":["*"]}},{"name":"a","host":{"names":["*"]}},{"name":"b"}]"#;
    let r = s.request("POST", "/v1/vhosts", Some(body));
    assert_eq!(r.status, 207);
    let v = r.json();
    assert_eq!(v[0]["statusCode"], 200);
    assert_eq!(v[1]["statusCode"], 409);
    assert_eq!(
        v[1]["message"],
        // OME's item text: bare, without `[HTTP] ... (409)`
        "The virtual host already exists: [default]"
    );
    // a duplicate inside the same array: the first wins
    assert_eq!(v[2]["statusCode"], 409);
    assert_eq!(v[3]["statusCode"], 400);
    assert!(
        v[3]["message"].as_str().unwrap().contains("host"),
        "{}",
        v[3]
    );

    let r = s.request(
        "POST",
        "/v1/vhosts",
        Some(r#"[{"name":"a","host":{"names":["*"]}}]"#),
    );
    assert_eq!(r.status, 409);
    assert_eq!(r.json()[0]["statusCode"], 409);

    let r = s.request(
        "POST",
        "/v1/vhosts",
        Some(r#"[{"name":"x y","host":{"names":["*"]}}]"#),
    );
    assert_eq!(r.status, 400);
    let r = s.request(
        "POST",
        "/v1/vhosts",
        Some(r#"[{"name":"z","host":{"names":["*"]},"colour":1}]"#),
    );
    assert_eq!(r.status, 400);
    assert!(r.json()[0]["message"].as_str().unwrap().contains("colour"));
    let r = s.request("POST", "/v1/vhosts", Some("[]"));
    assert_eq!((r.status, r.body.as_str()), (200, "[]"));
}

#[test]
fn create_rejects_bad_bodies() {
    let s = Server::start("create400");
    let r = s.request("POST", "/v1/vhosts", Some(r#"{"name":"a"}"#));
    assert_eq!(r.status, 400);
    assert_eq!(r.message(), "[HTTP] Request body must be an array (400)");
    let r = s.request("POST", "/v1/vhosts", Some("[{\"name\":"));
    assert_eq!(r.status, 400);
    assert!(
        r.message()
            .starts_with("[HTTP] Invalid JSON at line 1 column "),
        "{}",
        r.body
    );
    let r = s.request("POST", "/v1/vhosts", None);
    assert_eq!(r.status, 400);
}

#[test]
fn delete_rules() {
    let s = Server::start("delete");
    let r = s.request("DELETE", "/v1/vhosts/default", None);
    assert_eq!(r.status, 403);
    assert_eq!(
        r.message(),
        "[HTTP] The VirtualHost is read-only: [default] (403)"
    );
    // a method the path does not take is 405 with Allow, read-only or not
    let r = s.request("POST", "/v1/vhosts/default", Some("{}"));
    assert_eq!(r.status, 405);
    assert_eq!(r.header("Allow"), Some("GET, DELETE, HEAD, OPTIONS"));
    s.request(
        "POST",
        "/v1/vhosts",
        Some(r#"[{"name":"tmp","host":{"names":["*"]}}]"#),
    );
    let r = s.request("DELETE", "/v1/vhosts/tmp", None);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, r#"{"statusCode":200,"message":"OK"}"#);
    assert_eq!(s.request("GET", "/v1/vhosts/tmp", None).status, 404);
    // the name can be used again at once
    let r = s.request(
        "POST",
        "/v1/vhosts",
        Some(r#"[{"name":"tmp","host":{"names":["*"]}}]"#),
    );
    assert_eq!(r.status, 200);
}

#[test]
fn reload_endpoints_without_tls() {
    let s = Server::start("reloadplain");
    let r = s.request("POST", "/v1/vhosts:reloadAllCertificates", None);
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, r#"{"statusCode":200,"message":"OK"}"#)
    );
    let r = s.request("POST", "/v1/vhosts/default:reloadCertificate", None);
    assert_eq!(r.status, 200);
    let r = s.request("POST", "/v1/vhosts/nope:reloadCertificate", None);
    assert_eq!(r.status, 404);
    let r = s.request("POST", "/v1/managers/api:reloadCertificate", None);
    assert_eq!(r.status, 400);
    assert_eq!(r.message(), "[HTTP] The API server has no TLS port (400)");
    let r = s.request("GET", "/v1/version", None);
    assert_eq!(r.json()["response"]["name"], "kiln");
}

#[test]
fn curl_walkthrough() {
    if !have_tool("curl") {
        return;
    }
    let s = Server::start("curl");
    let (code, body, _) = curl(&["-u", TOKEN], &s.url("/v1/vhosts"));
    assert_eq!(code, 200);
    assert_eq!(
        body,
        r#"{"statusCode":200,"message":"OK","response":["default"]}"#
    );
    let (code, body, _) = curl(
        &[
            "-u",
            TOKEN,
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-d",
            r#"[{"name":"web","host":{"names":["web.example.com"]}}]"#,
        ],
        &s.url("/v1/vhosts"),
    );
    assert_eq!(code, 200, "{body}");
    let (code, _, _) = curl(&["-u", TOKEN, "-X", "DELETE"], &s.url("/v1/vhosts/web"));
    assert_eq!(code, 200);
}

/// Issue 10 item 9, against the real binary: duplicate JSON keys, the names
/// `.` and `..`, host names that are not host names, and push URLs with a
/// sign, a port out of range or an SRT latency in the wrong unit are all
/// refused with 400 saying what is wrong.
#[test]
fn validation_gaps_are_closed() {
    let s = Server::start("validation");
    let r = s.request(
        "POST",
        "/v1/vhosts",
        Some(r#"[{"name":"a","name":"b","host":{"names":["*"]}}]"#),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.message().contains("duplicate key [name]"), "{}", r.body);
    let long = "h".repeat(100_000);
    for (name, host) in [
        (".", "x.test"),
        ("..", "x.test"),
        ("n1", "a\nb"),
        ("n2", "a\u{0}b"),
        ("n3", long.as_str()),
    ] {
        let body = serde_json::json!([{"name": name, "host": {"names": [host]}}]);
        let r = s.request("POST", "/v1/vhosts", Some(&body.to_string()));
        assert_eq!(
            r.status,
            400,
            "{name}: {}",
            &r.body[..r.body.len().min(300)]
        );
    }
    for (url, why) in [
        ("udp://127.0.0.1:+80", "[+80] is not a number"),
        ("udp://127.0.0.1:99999", "not in 1-65535"),
        ("udp://127.0.0.1:50o4", "[50o4] is not a number"),
        ("udp://bad\nhost:80", "not a host name"),
    ] {
        let r = s.start_push(
            serde_json::json!({"id":"p","stream":{"name":"s"},"protocol":"mpegts","url":url}),
        );
        assert_eq!(r.status, 400, "{url}");
        assert!(r.message().contains(why), "{url}: {}", r.body);
    }
    let r = s.start_push(
        serde_json::json!({"id":"p","stream":{"name":"s"},"protocol":"srt",
        "url":"srt://127.0.0.1:9000?latency=200"}),
    );
    assert_eq!(r.status, 400);
    assert!(r.message().contains("microseconds") && r.message().contains("latency=200000"));
}

/// Issue 10 item 5: peer- and user-supplied text with newlines and escape
/// codes never forges a log line.
#[test]
fn supplied_text_cannot_forge_log_lines() {
    let s = Server::start("loginject");
    let evil = "x\n2026-01-01T00:00:00.000+00:00 ERROR forged line\u{1b}[31m";
    let r = s.start_push(serde_json::json!({"id": "evil", "stream": {"name": evil},
        "protocol": "mpegts", "url": "udp://127.0.0.1:9"}));
    assert_eq!(r.status, 200, "{}", r.body);
    let log = s.log_text();
    assert!(
        log.contains("\\n2026-01-01T00:00:00.000+00:00 ERROR forged line\\x1b[31m"),
        "{log}"
    );
    assert!(!log.lines().any(|l| l.starts_with("2026-01-01")), "{log}");
    assert!(!log.contains('\u{1b}'));
}
