//! The state file (DECISIONS section 6) against the real binary: API-made
//! hosts survive a restart and a `kill -9` in the middle of a burst; a
//! corrupt file stops start-up and is left untouched.

mod common;
use common::*;
use std::io::BufReader;
use std::process::Command;

#[test]
fn api_hosts_survive_a_restart() {
    let mut s = Server::start("restart");
    let r = s.request(
        "POST",
        "/v1/vhosts",
        Some(r#"[{"name":"kept","host":{"names":["kept.example.com"]},"signedPolicy":{"policyQueryKeyName":"policy","signatureQueryKeyName":"signature","secretKey":"s3cret","enables":{"providers":"rtmp"}}},{"name":"gone","host":{"names":["*"]}}]"#),
    );
    assert_eq!(r.status, 200);
    assert_eq!(s.request("DELETE", "/v1/vhosts/gone", None).status, 200);
    let before = s.request("GET", "/v1/vhosts/kept", None).body;
    let (took, status) = s.terminate();
    assert!(status.success(), "{status:?}");
    assert!(took.as_secs() < 5, "shutdown took {took:?}");
    s.spawn();
    let list = s.request("GET", "/v1/vhosts", None).json();
    assert_eq!(list["response"], serde_json::json!(["default", "kept"]));
    assert_eq!(s.request("GET", "/v1/vhosts/kept", None).body, before);
}

#[test]
fn every_acknowledged_creation_survives_kill9() {
    let mut s = Server::start("kill9");
    let port = s.port;
    // A burst of creations on one keep-alive connection; kill -9 lands in
    // the middle of it. Every creation that got its 200 must be there.
    let burst = std::thread::spawn(move || {
        let mut acknowledged = Vec::new();
        let mut c = connect(port);
        let mut r = BufReader::new(c.try_clone().unwrap());
        for i in 0..2000 {
            let body = format!(r#"[{{"name":"burst-{i}","host":{{"names":["*"]}}}}]"#);
            send_request(
                &mut c,
                "POST",
                "/v1/vhosts",
                &[("Authorization", AUTH)],
                Some(&body),
                false,
            );
            match read_response(&mut r, false) {
                Ok(resp) if resp.status == 200 => acknowledged.push(format!("burst-{i}")),
                _ => break,
            }
        }
        acknowledged
    });
    // let some creations through, then kill
    let t0 = std::time::Instant::now();
    while !s.state_file().exists() && t0.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(150));
    s.kill9();
    let acknowledged = burst.join().unwrap();
    assert!(!acknowledged.is_empty());
    s.spawn();
    let list = s.request("GET", "/v1/vhosts", None).json();
    let names: Vec<String> = list["response"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    for name in &acknowledged {
        assert!(names.contains(name), "{name} was acknowledged and is lost");
    }
    eprintln!(
        "acknowledged before kill -9: {}; present after restart: {}",
        acknowledged.len(),
        names.len() - 1
    );
}

#[test]
fn corrupt_state_file_stops_startup_and_is_untouched() {
    let dir = temp_dir("corrupt");
    let port = free_port();
    let config = write_config(&dir, port, None, &ServerOptions::default());
    let state = dir.join("kiln-state.json");
    std::fs::write(&state, b"{\"format\":1,\"vhosts\":[{\"name\":").unwrap();
    let out = Command::new(kiln_bin())
        .arg("-c")
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("corrupt") && err.contains("kiln-state.json"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&state).unwrap(),
        b"{\"format\":1,\"vhosts\":[{\"name\":"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn state_host_taken_by_the_config_is_skipped() {
    let dir = temp_dir("collide");
    let port = free_port();
    let config = write_config(&dir, port, None, &ServerOptions::default());
    std::fs::write(
        dir.join("kiln-state.json"),
        r#"{"format":1,"vhosts":[{"name":"default","host":{"names":["x"]}},{"name":"extra","host":{"names":["*"]}}]}"#,
    )
    .unwrap();
    let mut s = Server {
        wrap: None,
        child: None,
        dir: dir.clone(),
        config,
        port,
        tls_port: None,
        log: dir.join("kiln.log"),
        media: MediaPorts::default(),
    };
    s.spawn();
    let list = s.request("GET", "/v1/vhosts", None).json();
    assert_eq!(list["response"], serde_json::json!(["default", "extra"]));
    assert_eq!(
        s.request("GET", "/v1/vhosts/default", None).json()["response"]["host"]["names"],
        serde_json::json!(["*"])
    );
    assert!(s.log_text().contains("the configuration wins"));
}

/// DECISIONS section 15: the state files are private (0600, also an older
/// world-readable file at start-up), changes go to the journal, and the
/// creation limits answer 400 naming the limit.
#[test]
fn state_files_are_private_journaled_and_limited() {
    use std::os::unix::fs::PermissionsExt;
    let mut s = Server::start_with(
        "private-state",
        ServerOptions {
            limits: "<Limits><MaxVirtualHosts>2</MaxVirtualHosts><MaxPushTasks>1</MaxPushTasks></Limits>".into(),
            ..Default::default()
        },
    );
    let state = s.state_file();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(s.request("GET", "/v1/vhosts", None).status, 200);
    assert_eq!(mode(&state), 0o600);
    // A file left world-readable (by an older kiln) is made private.
    s.kill9();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o644)).unwrap();
    s.spawn();
    // The state file is opened once every port is bound, before the first
    // answer: wait for one.
    assert_eq!(s.request("GET", "/v1/vhosts", None).status, 200);
    assert_eq!(mode(&state), 0o600);
    let r = s.request(
        "POST",
        "/v1/vhosts",
        Some(r#"[{"name":"a","host":{"names":["a.test"]}},{"name":"b","host":{"names":["b.test"]}},{"name":"c","host":{"names":["c.test"]}}]"#),
    );
    assert_eq!(r.status, 207, "{}", r.body);
    let items = r.json();
    assert_eq!(items[0]["statusCode"], 200);
    assert_eq!(items[1]["statusCode"], 200);
    assert_eq!(items[2]["statusCode"], 400);
    assert!(items[2]["message"]
        .as_str()
        .unwrap()
        .contains("limit of 2 virtual hosts"));
    let push = |id: &str| {
        serde_json::json!({"id": id, "stream": {"name": "s"}, "protocol": "mpegts",
            "url": "udp://127.0.0.1:9"})
    };
    assert_eq!(s.start_push(push("p1")).status, 200);
    let r = s.start_push(push("p2"));
    assert_eq!(r.status, 400);
    assert!(r.message().contains("limit of 1 push tasks"), "{}", r.body);
    let journal = s.dir.join("kiln-state.json.journal");
    assert_eq!(mode(&journal), 0o600);
    let text = std::fs::read_to_string(&journal).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    s.kill9();
    s.spawn();
    let list = s.request("GET", "/v1/vhosts", None).json();
    assert_eq!(list["response"], serde_json::json!(["default", "a", "b"]));
    assert!(s.push_task("p1").is_some());
    // start-up folded the journal into the snapshot
    assert_eq!(std::fs::metadata(&journal).unwrap().len(), 0);
    assert_eq!(mode(&state), 0o600);
}

/// A state file written by kiln before the store kept tasks by kind
/// (`tests/fixtures/state-format-1`, made by that kiln through its API: a
/// snapshot it folded at start-up plus a journal cut by `kill -9`) loads
/// whole, and the snapshot written from it reads the same.
#[test]
fn a_state_file_of_the_previous_kiln_loads() {
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/state-format-1");
    let mut s = Server::start("format1");
    s.kill9();
    let journal = s.dir.join("kiln-state.json.journal");
    std::fs::copy(fixture.join("snapshot.json"), s.state_file()).unwrap();
    std::fs::copy(fixture.join("journal"), &journal).unwrap();
    s.spawn();
    // The ids of a `:pushes` or `:records` answer, in order.
    let ids = |answer: &serde_json::Value| -> Vec<String> {
        (answer["response"].as_array().unwrap().iter())
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect()
    };
    let check = |s: &Server| {
        let hosts = s.request("GET", "/v1/vhosts", None).json();
        assert_eq!(hosts["response"], serde_json::json!(["default", "saved"]));
        let app = s.request("GET", "/v1/vhosts/saved/apps/live", None).json();
        assert_eq!(
            app["response"]["publishers"]["file"]["rootPath"],
            "/tmp/kiln-fixture-rec"
        );
        let pushes = s
            .request("POST", "/v1/vhosts/saved/apps/live:pushes", Some("{}"))
            .json();
        assert_eq!(ids(&pushes), ["to-udp", "to-srt"], "{pushes}");
        let srt = &pushes["response"][1];
        assert_eq!(
            srt["url"],
            "srt://127.0.0.1:40003?streamid=x&latency=200000"
        );
        assert_eq!(srt["stream"]["trackIds"], serde_json::json!([1]));
        let records = s
            .request("POST", "/v1/vhosts/saved/apps/live:records", Some("{}"))
            .json();
        assert_eq!(ids(&records), ["rec2"], "{records}");
        assert_eq!(records["response"][0]["interval"], 60000);
    };
    check(&s);
    // The start folded the journal: the new snapshot holds the same, the
    // persistent pull `door` kept and the deleted `gate` gone.
    assert_eq!(std::fs::metadata(&journal).unwrap().len(), 0);
    let snapshot: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.state_file()).unwrap()).unwrap();
    let pulls: Vec<&str> = (snapshot["pulls"].as_array().unwrap().iter())
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(pulls, ["door"], "{snapshot}");
    assert_eq!(snapshot["journalSeq"], 11);
    s.terminate();
    s.spawn();
    check(&s);
}
