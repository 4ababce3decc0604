//! HTTP/1.1 behaviour of the API server (DECISIONS section 2) against the
//! real binary: keep-alive, pipelining, chunked bodies, 100-continue, and
//! the limits (431, 413, 408, idle close, connection cap), each hit while
//! other clients are still answered.

mod common;
use common::*;
use std::io::{BufReader, Read, Write};
use std::time::Duration;

fn short_timeouts() -> ServerOptions {
    ServerOptions {
        limits:
            "<Limits><HeadTimeoutMs>600</HeadTimeoutMs><IdleTimeoutMs>1500</IdleTimeoutMs></Limits>"
                .into(),
        ..Default::default()
    }
}

#[test]
fn keep_alive_and_pipelining_answer_in_order() {
    let s = Server::start("pipeline");
    let mut c = connect(s.port);
    let mut batch = String::new();
    for path in [
        "/v1/vhosts",
        "/v1/vhosts/default",
        "/v1/nothing",
        "/v1/vhosts/nope",
    ] {
        batch.push_str(&format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {AUTH}\r\n\r\n"
        ));
    }
    c.write_all(batch.as_bytes()).unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    let statuses: Vec<u16> = (0..4)
        .map(|_| read_response(&mut r, false).unwrap().status)
        .collect();
    assert_eq!(statuses, [200, 200, 404, 404]);
    // the connection is still open: one more request on it
    send_request(
        &mut c,
        "GET",
        "/v1/vhosts",
        &[("Authorization", AUTH)],
        None,
        false,
    );
    assert_eq!(read_response(&mut r, false).unwrap().status, 200);
}

#[test]
fn http10_is_answered_and_closed() {
    let s = Server::start("http10");
    let mut c = connect(s.port);
    c.write_all(format!("GET /v1/vhosts HTTP/1.0\r\nAuthorization: {AUTH}\r\n\r\n").as_bytes())
        .unwrap();
    let mut r = BufReader::new(c);
    let resp = read_response(&mut r, false).unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("Connection"), Some("close"));
    let mut rest = Vec::new();
    assert_eq!(r.read_to_end(&mut rest).unwrap(), 0);
}

#[test]
fn chunked_request_body() {
    let s = Server::start("chunked");
    let mut c = connect(s.port);
    let body = r#"[{"name":"chunky","host":{"names":["*"]}}]"#;
    let (a, b) = body.split_at(10);
    let req = format!(
        "POST /v1/vhosts HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    c.write_all(req.as_bytes()).unwrap();
    let resp = read_response(&mut BufReader::new(c), false).unwrap();
    assert_eq!(resp.status, 200, "{}", resp.body);
    assert_eq!(s.request("GET", "/v1/vhosts/chunky", None).status, 200);
}

#[test]
fn expect_100_continue() {
    let s = Server::start("continue");
    let mut c = connect(s.port);
    // over 1 KiB of host names (each a valid name)
    let names: Vec<String> = (0..200).map(|i| format!("\"n{i}.test\"")).collect();
    let body = format!(
        r#"[{{"name":"big","host":{{"names":[{}]}}}}]"#,
        names.join(",")
    );
    let head = format!(
        "POST /v1/vhosts HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH}\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    let interim = read_response(&mut r, false).unwrap();
    assert_eq!(interim.status, 100);
    c.write_all(body.as_bytes()).unwrap();
    assert_eq!(read_response(&mut r, false).unwrap().status, 200);

    if have_tool("curl") {
        // curl 7.x sends Expect: 100-continue on its own only for bodies
        // over 1 MiB (older ones: 1 KiB); ask for it explicitly.
        let names: Vec<String> = (0..300).map(|i| format!("\"m{i}.test\"")).collect();
        let body = format!(
            r#"[{{"name":"curlbig","host":{{"names":[{}]}}}}]"#,
            names.join(",")
        );
        let (code, _, out) = curl(
            &[
                "-u",
                TOKEN,
                "-v",
                "-X",
                "POST",
                "-H",
                "Content-Type: application/json",
                "-H",
                "Expect: 100-continue",
                "-d",
                &body,
            ],
            &s.url("/v1/vhosts"),
        );
        assert_eq!(code, 200);
        let trace = String::from_utf8_lossy(&out.stderr);
        assert!(trace.contains("100 Continue"), "{trace}");
    }

    // Issue 28, 5.5: without credentials (or with wrong ones) the answer is
    // 401 at once, never an invitation to send the body.
    for auth in ["", "Authorization: Basic d3Jvbmc6dG9rZW4=\r\n"] {
        let mut c = connect(s.port);
        c.write_all(
            format!(
                "POST /v1/vhosts HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 100000\r\nExpect: 100-continue\r\n\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut r = BufReader::new(c.try_clone().unwrap());
        let first = read_response(&mut r, false).unwrap();
        assert_eq!(first.status, 401, "{auth:?}: {}", first.body);
        assert!(first.header("www-authenticate").is_some());
    }
}

#[test]
fn oversized_head_is_431_and_others_are_answered() {
    let s = Server::start("431");
    let mut c = connect(s.port);
    let big = "x".repeat(20 * 1024);
    let req = format!(
        "GET /v1/vhosts HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\nAuthorization: {AUTH}\r\n\r\n"
    );
    // The server may answer and close before the whole head is written.
    let _ = c.write_all(req.as_bytes());
    let resp = read_response(&mut BufReader::new(c), false).unwrap();
    assert_eq!(resp.status, 431);
    assert_eq!(
        resp.message(),
        "[HTTP] Request header fields too large (431)"
    );
    assert_eq!(s.request("GET", "/v1/vhosts", None).status, 200);
}

#[test]
fn oversized_body_is_413() {
    let s = Server::start("413");
    // announced by Content-Length: refused before the body is read
    let mut c = connect(s.port);
    let body = "[".to_string() + &" ".repeat(2 * 1024 * 1024) + "]";
    let head = format!(
        "POST /v1/vhosts HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).unwrap();
    let _ = c.write_all(body.as_bytes());
    let resp = read_response(&mut BufReader::new(c), false).unwrap();
    assert_eq!(resp.status, 413);
    assert_eq!(resp.message(), "[HTTP] Request body too large (413)");
    assert_eq!(s.request("GET", "/v1/vhosts", None).status, 200);

    if have_tool("curl") {
        let file = s.dir.join("big.json");
        std::fs::write(&file, &body).unwrap();
        let (code, resp, _) = curl(
            &[
                "-u",
                TOKEN,
                "-X",
                "POST",
                "-H",
                "Content-Type: application/json",
                "--data-binary",
                &format!("@{}", file.display()),
            ],
            &s.url("/v1/vhosts"),
        );
        assert_eq!(code, 413, "{resp}");
    }
}

#[test]
fn half_sent_request_gets_408_while_others_are_answered() {
    let s = Server::start_with("408", short_timeouts());
    let mut slow = connect(s.port);
    slow.write_all(b"GET /v1/vhosts HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    // another client is answered while the slow one waits
    assert_eq!(s.request("GET", "/v1/vhosts", None).status, 200);
    slow.set_nonblocking(true).unwrap();
    let mut probe = [0u8; 1];
    assert!(
        slow.read(&mut probe).is_err(),
        "the slow client got an answer too early"
    );
    slow.set_nonblocking(false).unwrap();
    let resp = read_response(&mut BufReader::new(slow), false).unwrap();
    assert_eq!(resp.status, 408);
    assert_eq!(resp.message(), "[HTTP] Request timeout (408)");

    // a body that stops half way gets the same
    let mut slow = connect(s.port);
    slow.write_all(
        format!("POST /v1/vhosts HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH}\r\nContent-Length: 100\r\n\r\n[").as_bytes(),
    )
    .unwrap();
    let resp = read_response(&mut BufReader::new(slow), false).unwrap();
    assert_eq!(resp.status, 408);
}

#[test]
fn idle_keep_alive_is_closed_silently() {
    let s = Server::start_with("idle", short_timeouts());
    let mut c = connect(s.port);
    send_request(
        &mut c,
        "GET",
        "/v1/vhosts",
        &[("Authorization", AUTH)],
        None,
        false,
    );
    let mut r = BufReader::new(c);
    assert_eq!(read_response(&mut r, false).unwrap().status, 200);
    let mut rest = Vec::new();
    // after the idle time-out the server closes without a response
    assert_eq!(r.read_to_end(&mut rest).unwrap(), 0);
}

#[test]
fn thousand_idle_connections_do_not_delay_a_client() {
    let _ = kiln::sys::raise_nofile_limit();
    // One address for all: no per-address cap here (hostile_peers tests it).
    let s = Server::start_with(
        "idle1000",
        ServerOptions {
            limits: "<Limits><MaxConnectionsPerAddress>0</MaxConnectionsPerAddress></Limits>"
                .into(),
            ..Default::default()
        },
    );
    let mut idle = Vec::with_capacity(1000);
    for _ in 0..1000 {
        idle.push(connect(s.port));
    }
    for _ in 0..20 {
        assert_eq!(s.request("GET", "/v1/vhosts", None).status, 200);
    }
    // and the idle ones still work
    let mut c = idle.pop().unwrap();
    send_request(
        &mut c,
        "GET",
        "/v1/vhosts",
        &[("Authorization", AUTH)],
        None,
        true,
    );
    assert_eq!(
        read_response(&mut BufReader::new(c), false).unwrap().status,
        200
    );
}

#[test]
fn connections_over_the_cap_are_closed_at_once() {
    let s = Server::start_with(
        "cap",
        ServerOptions {
            limits: "<Limits><MaxConnections>4</MaxConnections></Limits>".into(),
            ..Default::default()
        },
    );
    let held: Vec<_> = (0..4).map(|_| connect(s.port)).collect();
    // make sure the server has accepted all four
    std::thread::sleep(Duration::from_millis(200));
    let mut extra = connect(s.port);
    let mut buf = [0u8; 16];
    let n = extra.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the fifth connection should be closed");
    drop(held);
    // capacity comes back once they are gone
    let t0 = std::time::Instant::now();
    loop {
        let mut c = connect(s.port);
        send_request(
            &mut c,
            "GET",
            "/v1/vhosts",
            &[("Authorization", AUTH)],
            None,
            true,
        );
        if let Ok(r) = read_response(&mut BufReader::new(c), false) {
            assert_eq!(r.status, 200);
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "capacity never came back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn garbage_gets_400_and_the_server_lives() {
    let s = Server::start("garbage");
    for junk in [
        &b"\x16\x03\x01\x00\xff\x01\x00"[..],
        b"GET\0/ HTTP/1.1\r\n\r\n",
        b"HELLO\r\n\r\n",
    ] {
        let mut c = connect(s.port);
        let _ = c.write_all(junk);
        let _ = c.shutdown(std::net::Shutdown::Write);
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.starts_with("HTTP/1.1 400") || text.is_empty(),
            "{text}"
        );
    }
    assert_eq!(s.request("GET", "/v1/vhosts", None).status, 200);
}
