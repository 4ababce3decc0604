//! The command line: --help, --version, --check-config, bad configs exit 1
//! with file:line:column and the element path, SIGTERM stops cleanly.

mod common;
use common::*;
use std::process::Command;

fn kiln(args: &[&str]) -> std::process::Output {
    Command::new(kiln_bin()).args(args).output().unwrap()
}

#[test]
fn help_and_version() {
    let out = kiln(&["--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--check-config"));
    let out = kiln(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("kiln {}", env!("CARGO_PKG_VERSION"))
    );
    let out = kiln(&["--bogus"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn check_config_accepts_the_example() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/server.xml.example");
    let out = kiln(&["--check-config", "-c", example]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("configuration is valid"));
    // Issue 28, 6.11: every port has a variable, so a second instance
    // needs no edit; the MPEG-TS range is used in two places.
    let out = Command::new(kiln_bin())
        .args(["--check-config", "-c", example])
        .envs([
            ("KILN_API_PORT", "18081"),
            ("KILN_RTMP_PORT", "11935"),
            ("KILN_SRT_PORT", "19999"),
            ("KILN_MPEGTS_PORTS", "14000-14001"),
            ("KILN_LLHLS_PORT", "13333"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(example).unwrap();
    for var in [
        "KILN_API_PORT",
        "KILN_API_TLS_PORT",
        "KILN_RTMP_PORT",
        "KILN_RTMPS_PORT",
        "KILN_SRT_PORT",
        "KILN_MPEGTS_PORTS",
        "KILN_LLHLS_PORT",
        "KILN_LLHLS_TLS_PORT",
    ] {
        assert!(text.contains(&format!("${{env:{var}:")), "{var}");
    }
}

#[test]
fn check_config_reports_errors_with_position_and_path() {
    let dir = temp_dir("badconfig");
    let file = dir.join("server.xml");
    std::fs::write(
        &file,
        "<Server version=\"8\">\n  <Bind>\n    <Managers><API><Prot>8081</Prot></API></Managers>\n  </Bind>\n  <Managers><API><AccessToken>t</AccessToken></API></Managers>\n</Server>\n",
    )
    .unwrap();
    let out = kiln(&["--check-config", "-c", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:3:20: Server/Bind/Managers/API/Prot: unknown element <Prot>",
            file.display()
        )),
        "{err}"
    );
    assert!(err.contains("neither <Port> nor <TLSPort>"), "{err}");

    std::fs::write(&file, "<Server version=\"9\"></Server>").unwrap();
    let out = kiln(&["--check-config", "-c", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("version 9 is not supported; kiln reads version 8"));

    // An XML syntax error: the position once, no empty element path.
    std::fs::write(&file, "<Server version=\"8\">\n<Bind>\n").unwrap();
    let out = kiln(&["--check-config", "-c", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!("{}:3:1: XML syntax error: Unexpected end", file.display());
    assert!(err.contains(&want), "{err}");

    // A file that cannot be read: no position at all.
    let missing = dir.join("missing.xml");
    let out = kiln(&["-c", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!("{}: cannot read the file", missing.display());
    assert!(err.contains(&want) && !err.contains(":0:0"), "{err}");
}

#[test]
fn bad_tls_file_is_a_warning_naming_the_path_and_strict_fails_on_it() {
    // DECISIONS 1 (amended): a certificate that cannot be loaded does not
    // stop kiln; --check-config warns with file:line:col, --strict fails.
    let dir = temp_dir("badtls");
    let opts = ServerOptions {
        tls: Some((dir.join("missing-cert.pem"), dir.join("missing-key.pem"))),
        ..Default::default()
    };
    let config = write_config(&dir, free_port(), Some(free_port()), &opts);
    let out = kiln(&["--check-config", "-c", config.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("missing-cert.pem"), "{err}");
    // with the line of <TLS>, never line 0
    assert!(
        err.contains("WARN") && err.contains("Server/Managers/Host/TLS: TLS file cannot be loaded"),
        "{err}"
    );
    assert!(!err.contains(":0:"), "{err}");
    let out = kiln(&["--check-config", "--strict", "-c", config.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--strict fails on any"), "{err}");
}

#[test]
fn port_in_use_fails_with_a_message() {
    let s = Server::start("portbusy");
    // A second server on the same API port, in a folder of its own.
    let dir = temp_dir("portbusy-second");
    let config = write_config(&dir, s.port, None, &ServerOptions::default());
    let out = kiln(&["-c", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot start"), "{err}");
    // The listener and its element are named...
    assert!(
        err.contains("API server (<Bind><Managers><API><Port>)"),
        "{err}"
    );
    // ...and nothing is created.
    let made: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("kiln-state"))
        .collect();
    assert!(made.is_empty(), "{made:?}");
}

#[test]
fn sigterm_and_sigint_stop_cleanly() {
    let mut s = Server::start("sigterm");
    assert_eq!(s.request("GET", "/v1/vhosts", None).status, 200);
    let (took, status) = s.terminate();
    assert!(status.success(), "{status:?}");
    eprintln!("SIGTERM to exit: {took:?}");
    // the port is released
    assert!(std::net::TcpListener::bind(("127.0.0.1", s.port)).is_ok());
    assert!(s.log_text().contains("shutting down"));
}

#[test]
fn webrtc_without_a_udp_candidate_fails_the_check_and_is_an_error_at_start() {
    // OME takes a candidate that names no transport as ICE-TCP; kiln offers
    // ICE over UDP only, so such a config turns WebRTC off: --check-config
    // fails naming <IceCandidates>, a start says so in an ERROR line.
    let dir = temp_dir("ice-no-udp");
    let opts = ServerOptions {
        media: true,
        webrtc: Some(String::new()),
        ..Default::default()
    };
    let media = MediaPorts {
        rtmp: free_port(),
        llhls: free_port(),
        ice: free_udp_port(),
        ..Default::default()
    };
    let port = free_port();
    let config = write_config_with_media(&dir, port, None, &opts, media);
    let text = std::fs::read_to_string(&config).unwrap();
    let udp = format!("127.0.0.1:{}/udp", media.ice);
    assert!(text.contains(&udp), "{text}");
    let bare = format!("127.0.0.1:{}-{}", media.ice, media.ice + 4);
    std::fs::write(&config, text.replace(&udp, &bare)).unwrap();

    let out = kiln(&["--check-config", "-c", config.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("IceCandidates: WebRTC is off: no UDP <IceCandidate> is left"),
        "{err}"
    );
    assert!(
        err.contains(&format!("write [{bare}/udp] for UDP")),
        "{err}"
    );

    let mut child = Command::new(kiln_bin())
        .args(["-c", config.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_port(port, std::time::Duration::from_secs(10));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.contains("WebRTC is off"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("ERROR"), "{line}");
}
