//! HTTPS on the TLS port and certificate reload (DECISIONS section 5),
//! checked with curl: a client that trusts only the old certificate stops
//! connecting after a good reload and keeps connecting after a bad one.

mod common;
use common::*;

fn tls_server(tag: &str) -> (Server, std::path::PathBuf, std::path::PathBuf) {
    let dir = temp_dir(&format!("{tag}-certs"));
    let (cert, key) = make_cert(&dir, "api");
    let s = Server::start_with(
        tag,
        ServerOptions {
            tls: Some((cert.clone(), key.clone())),
            ..Default::default()
        },
    );
    (s, cert, key)
}

fn https(s: &Server, path: &str) -> String {
    format!("https://127.0.0.1:{}{path}", s.tls_port.unwrap())
}

#[test]
fn https_serves_the_same_api_with_tls12_and_tls13() {
    if !have_tool("curl") {
        return;
    }
    let (s, cert, _) = tls_server("https");
    let ca = cert.display().to_string();
    for version in [
        ["--tlsv1.3", "--tls-max", "1.3"],
        ["--tlsv1.2", "--tls-max", "1.2"],
    ] {
        let mut args = vec!["--cacert", ca.as_str(), "-u", TOKEN];
        args.extend(version);
        let (code, body, out) = curl(&args, &https(&s, "/v1/vhosts"));
        assert_eq!(
            code,
            200,
            "{version:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            body,
            r#"{"statusCode":200,"message":"OK","response":["default"]}"#
        );
    }
    let (code, body, _) = curl(&["--cacert", &ca], &https(&s, "/v1/vhosts"));
    assert_eq!(code, 401);
    assert!(body.contains("Authorization header is required"));
    // plain HTTP on the TLS port is not answered as HTTP
    let (code, _, _) = curl(
        &["-u", TOKEN],
        &format!("http://127.0.0.1:{}/v1/vhosts", s.tls_port.unwrap()),
    );
    assert_ne!(code, 200);
}

#[test]
fn api_certificate_reload_keeps_old_on_failure_and_swaps_on_success() {
    if !have_tool("curl") {
        return;
    }
    let (s, cert, key) = tls_server("apireload");
    let old_ca = s.dir.join("old-ca.pem");
    std::fs::copy(&cert, &old_ca).unwrap();
    let old = old_ca.display().to_string();

    // garbage in the files: 500, and the old certificate is still served
    std::fs::write(&cert, "not a certificate").unwrap();
    let (code, body, _) = curl(
        &["--cacert", &old, "-u", TOKEN, "-X", "POST"],
        &https(&s, "/v1/managers/api:reloadCertificate"),
    );
    assert_eq!(code, 500);
    assert_eq!(
        body,
        r#"{"statusCode":500,"message":"[HTTP] Internal Server Error (500)"}"#
    );
    assert!(s
        .log_text()
        .contains("API server certificate reload failed"));
    let (code, _, _) = curl(&["--cacert", &old, "-u", TOKEN], &https(&s, "/v1/vhosts"));
    assert_eq!(code, 200, "old certificate must still be served");

    // a key that does not match the certificate: 500 too
    let other = temp_dir("apireload-other");
    let (new_cert, new_key) = make_cert(&other, "new");
    std::fs::copy(&new_cert, &cert).unwrap();
    let (code, _, _) = curl(
        &["--cacert", &old, "-u", TOKEN, "-X", "POST"],
        &https(&s, "/v1/managers/api:reloadCertificate"),
    );
    assert_eq!(code, 500);

    // a new valid pair: 200, and new handshakes see the new certificate
    std::fs::copy(&new_key, &key).unwrap();
    let (code, _, _) = curl(
        &["--cacert", &old, "-u", TOKEN, "-X", "POST"],
        &https(&s, "/v1/managers/api:reloadCertificate"),
    );
    assert_eq!(code, 200);
    let new = new_cert.display().to_string();
    let (code, _, _) = curl(&["--cacert", &new, "-u", TOKEN], &https(&s, "/v1/vhosts"));
    assert_eq!(code, 200);
    let (code, _, _) = curl(&["--cacert", &old, "-u", TOKEN], &https(&s, "/v1/vhosts"));
    assert_eq!(
        code, 0,
        "a client trusting only the old certificate must fail"
    );
    let _ = std::fs::remove_dir_all(other);
}

#[test]
fn vhost_certificate_reload() {
    let s = Server::start("vhostreload");
    let (cert, key) = make_cert(&s.dir, "vh");
    let body = format!(
        r#"[{{"name":"secure","host":{{"names":["secure.example.com"],"tls":{{"certPath":"{}","keyPath":"{}"}}}}}}]"#,
        cert.display(),
        key.display()
    );
    let r = s.request("POST", "/v1/vhosts", Some(&body));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()[0]["response"]["host"]["tls"]["certPath"],
        cert.display().to_string()
    );
    assert_eq!(
        s.request("POST", "/v1/vhosts/secure:reloadCertificate", None)
            .status,
        200
    );
    assert_eq!(
        s.request("POST", "/v1/vhosts:reloadAllCertificates", None)
            .status,
        200
    );

    // garbage: both reloads fail with 500 and say why in the log
    std::fs::write(&key, "garbage").unwrap();
    let r = s.request("POST", "/v1/vhosts/secure:reloadCertificate", None);
    assert_eq!(r.status, 500);
    assert_eq!(r.message(), "[HTTP] Internal Server Error (500)");
    let r = s.request("POST", "/v1/vhosts:reloadAllCertificates", None);
    assert_eq!(r.status, 500);
    let log = s.log_text();
    assert!(
        log.contains("[secure]") && log.contains(&key.display().to_string()),
        "{log}"
    );

    // a creation naming a missing file is refused with the path
    let bad = r#"[{"name":"broken","host":{"names":["*"],"tls":{"certPath":"/nonexistent/c.pem","keyPath":"/nonexistent/k.pem"}}}]"#;
    let r = s.request("POST", "/v1/vhosts", Some(bad));
    assert_eq!(r.status, 400);
    assert!(r.json()[0]["message"]
        .as_str()
        .unwrap()
        .contains("/nonexistent/c.pem"));

    // good files again: 200
    let (c2, k2) = make_cert(&s.dir, "vh2");
    std::fs::copy(&c2, &cert).unwrap();
    std::fs::copy(&k2, &key).unwrap();
    assert_eq!(
        s.request("POST", "/v1/vhosts:reloadAllCertificates", None)
            .status,
        200
    );
}

/// DECISIONS section 15: a certificate path that names a FIFO, a device or
/// a huge file is refused at once with 400 naming the path; the loop never
/// blocks on it or loads it.
#[test]
fn hostile_certificate_paths_are_refused_without_blocking() {
    let s = Server::start("certpaths");
    let dir = temp_dir("certpaths-files");
    let (_, key) = make_cert(&dir, "k");
    let fifo = dir.join("cert.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let sparse = dir.join("huge.pem");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    for (path, why) in [
        (fifo.display().to_string(), "not a regular file"),
        ("/dev/zero".to_string(), "not a regular file"),
        (sparse.display().to_string(), "too large"),
    ] {
        let body = serde_json::json!([{"name": "h", "host": {"names": ["h.test"],
            "tls": {"certPath": path, "keyPath": key.display().to_string()}}}]);
        let r = s.request("POST", "/v1/vhosts", Some(&body.to_string()));
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        let item = &r.json()[0];
        let msg = item["message"].as_str().unwrap();
        assert!(msg.contains(&path) && msg.contains(why), "{msg}");
    }
    // The loop is still serving.
    assert_eq!(s.request("GET", "/v1/vhosts", None).status, 200);
}

/// DECISIONS 1 (amended) for the media side: a virtual host whose
/// certificate cannot be loaded at start does not stop kiln; its RTMPS port
/// is bound and refuses handshakes with a TLS alert, and `:reloadCertificate`
/// with good files brings it up without a restart.
#[test]
fn a_vhost_certificate_missing_at_start_is_loaded_by_a_reload() {
    if !have_tool("openssl") {
        eprintln!("skipped: openssl is missing");
        return;
    }
    let dir = temp_dir("vhost-late-cert");
    let (cert, key) = (dir.join("late-cert.pem"), dir.join("late-key.pem"));
    let s = Server::start_with(
        "vhost-late-cert",
        ServerOptions {
            media: true,
            vhost_tls: Some((cert.clone(), key.clone())),
            ..Default::default()
        },
    );
    let log = s.log_text();
    assert!(
        log.contains("RTMPS port")
            && log.contains("refuses TLS handshakes until a reload succeeds"),
        "{log}"
    );
    let handshake = || {
        std::process::Command::new("timeout")
            .args(["10", "openssl", "s_client", "-connect"])
            .arg(format!("127.0.0.1:{}", s.media.rtmps))
            .args(["-servername", "localhost"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let refused = handshake();
    let text = String::from_utf8_lossy(&refused.stderr).to_string()
        + &String::from_utf8_lossy(&refused.stdout);
    assert!(!refused.status.success(), "{text}");
    assert!(text.contains("alert"), "a TLS alert, not a hang: {text}");
    // Good files where the configuration points, a reload: it serves.
    let (c, k) = make_cert(&dir, "made");
    std::fs::rename(c, &cert).unwrap();
    std::fs::rename(k, &key).unwrap();
    let r = s.request("POST", "/v1/vhosts/default:reloadCertificate", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let served = handshake();
    let text = String::from_utf8_lossy(&served.stdout);
    assert!(text.contains("BEGIN CERTIFICATE"), "{text}");
}
