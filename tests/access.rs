//! Access control with real clients (DECISIONS section 11): URLs signed by
//! an independent implementation of OME's SignedPolicy (Python's hmac
//! here) over RTMP (ffmpeg), SRT (ffmpeg, srt-live-transmit) and LL-HLS
//! (curl, ffprobe); AdmissionWebhooks against a control server in this
//! file that checks the signature of every request it gets.

mod common;

#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SECRET: &str = "kiln-policy-secret";
const HOOK_SECRET: &str = "kiln-hook-secret";

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn sign(url: &str, policy: &Value) -> String {
    sign_url_python(SECRET, url, policy)
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn policy_server(tag: &str, enables: &str) -> Server {
    Server::start_with(
        tag,
        ServerOptions {
            media: true,
            llhls: Some(
                "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>1</SegmentDuration>".into(),
            ),
            vhost_access: format!(
                "<SignedPolicy><PolicyQueryKeyName>policy</PolicyQueryKeyName>\
                 <SignatureQueryKeyName>signature</SignatureQueryKeyName>\
                 <SecretKey>{SECRET}</SecretKey><Enables>{enables}</Enables></SignedPolicy>"
            ),
            ..Default::default()
        },
    )
}

/// ffmpeg publishing `secs` of test pattern over RTMP to `url`; its exit
/// status and stderr.
fn ffmpeg_publish(secs: u32, url: &str) -> std::process::Child {
    ffmpeg_source(secs, &[], "flv", url)
}

fn stderr_of(mut child: std::process::Child) -> (bool, String) {
    let status = child.wait().unwrap();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (status.success(), err)
}

fn wait_live(s: &Server, name: &str) -> bool {
    wait_until(Duration::from_secs(15), || s.live_stream(name).map(|_| ())).is_some()
}

#[test]
fn signed_policy_admits_rtmp_publishers_by_omes_algorithm() {
    if !have_tool("ffmpeg") || !have_tool("python3") {
        return;
    }
    let s = policy_server("policy-rtmp", "<Providers>rtmp,srt</Providers>");
    let base = format!("rtmp://127.0.0.1:{}/app", s.media.rtmp);
    let far = json!({"url_expire": now_ms() + 600_000});

    // Signed by an independent implementation: accepted.
    let good = sign(&format!("{base}/signed"), &far);
    let mut src = ffmpeg_publish(30, &good);
    assert!(wait_live(&s, "signed"), "{}", s.log_text());

    // No policy, a changed byte, an expired policy, a wrong address: each
    // refused with the reason, which ffmpeg prints.
    let cases = [
        (format!("{base}/bare"), "There is no signature key"),
        (
            good.replace("/signed?", "/signeD?"),
            "Signature value is invalid",
        ),
        (
            sign(
                &format!("{base}/late"),
                &json!({"url_expire": now_ms() - 1}),
            ),
            "URL has expired",
        ),
        (
            sign(
                &format!("{base}/early"),
                &json!({"url_expire": now_ms() + 600_000, "url_activate": now_ms() + 300_000}),
            ),
            "not yet been activated",
        ),
        (
            sign(
                &format!("{base}/far"),
                &json!({"url_expire": now_ms() + 600_000, "allow_ip": "10.0.0.0/8"}),
            ),
            "IP address is not allowed",
        ),
    ];
    for (url, why) in cases {
        let (ok, err) = stderr_of(ffmpeg_publish(2, &url));
        assert!(!ok, "{url} was admitted");
        assert!(
            s.log_text().contains(why),
            "the log does not say [{why}] for {url}:\n{}",
            s.log_text()
        );
        println!(
            "ffmpeg refused ({why}): {}",
            err.lines().next().unwrap_or("")
        );
    }
    assert!(s.live_stream("signeD").is_none() && s.live_stream("bare").is_none());

    // stream_expire ends the session at that time.
    let expiring = sign(
        &format!("{base}/expiring"),
        &json!({"url_expire": now_ms() + 600_000, "stream_expire": now_ms() + 4_000}),
    );
    let t0 = Instant::now();
    let mut short = ffmpeg_publish(30, &expiring);
    assert!(wait_live(&s, "expiring"));
    let gone = wait_until(Duration::from_secs(15), || {
        s.live_stream("expiring").is_none().then_some(())
    });
    assert!(gone.is_some(), "stream_expire did not end the session");
    let after = t0.elapsed();
    println!("stream_expire 4 s: the session ended after {after:?}");
    assert!(after >= Duration::from_secs(3));
    let _ = short.kill();
    let _ = short.wait();
    assert!(
        s.live_stream("signed").is_some(),
        "the other stream goes on"
    );
    let _ = src.kill();
    let _ = src.wait();
}

/// srt-live-transmit calling `url` with an idle input; what it printed.
fn srt_live_transmit_caller(url: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "sleep 6 | timeout 5 srt-live-transmit -v file://con '{url}' 2>&1"
        ))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn signed_policy_admits_srt_publishers() {
    if !have_tool("ffmpeg") || !have_tool("srt-live-transmit") || !have_tool("python3") {
        return;
    }
    let s = policy_server("policy-srt", "<Providers>rtmp,srt</Providers>");
    let port = s.media.srt;
    let far = json!({"url_expire": now_ms() + 600_000});
    // OME's form: the streamid is the whole signed URL, percent-encoded.
    let signed = sign(&format!("srt://127.0.0.1:{port}/app/srtcam"), &far);
    let url = format!(
        "srt://127.0.0.1:{port}?streamid={}",
        percent_encode(&signed)
    );
    let mut src = ffmpeg_source(30, &[], "mpegts", &url);
    assert!(wait_live(&s, "srtcam"), "{}", s.log_text());
    // srt-live-transmit with the same form.
    let signed2 = sign(&format!("srt://127.0.0.1:{port}/app/slt"), &far);
    let (mut ff, mut slt) = srt_live_transmit_source(
        30,
        &format!(
            "srt://127.0.0.1:{port}?streamid={}",
            percent_encode(&signed2)
        ),
    );
    assert!(wait_live(&s, "slt"), "{}", s.log_text());
    let _ = slt.kill();
    let _ = ff.kill();
    let _ = slt.wait();
    let _ = ff.wait();

    // A changed byte: rejected with 1401, which srt-live-transmit reports.
    let bad = signed.replace("/srtcam?", "/srtcaM?");
    let text = srt_live_transmit_caller(&format!(
        "srt://127.0.0.1:{port}?streamid={}",
        percent_encode(&bad)
    ));
    println!("srt-live-transmit on a bad signature: {}", text.trim());
    assert!(
        s.log_text().contains("reject code 1401")
            && s.log_text().contains("Signature value is invalid"),
        "{}",
        s.log_text()
    );
    assert!(s.live_stream("srtcaM").is_none());
    let _ = src.kill();
    let _ = src.wait();
}

#[test]
fn signed_policy_admits_llhls_viewers_with_a_session() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") || !have_tool("python3") {
        return;
    }
    let s = policy_server("policy-llhls", "<Publishers>llhls</Publishers>");
    // Publishers are not checked here (only llhls is enabled).
    let mut src = ffmpeg_publish(40, &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp));
    assert!(wait_live(&s, "cam"));
    let base = format!("http://127.0.0.1:{}/app/cam", s.media.llhls);
    let far = json!({"url_expire": now_ms() + 600_000});
    let master_url = sign(&format!("{base}/llhls.m3u8"), &far);
    let master = wait_until(Duration::from_secs(20), || {
        let (code, body, _) = curl(&[], &master_url);
        (code == 200).then_some(body)
    })
    .unwrap_or_else(|| panic!("no master playlist\n{}", s.log_text()));
    let chunklist = master
        .lines()
        .find(|l| l.starts_with("chunklist_") && l.contains("_video_"))
        .unwrap_or_else(|| panic!("{master}"))
        .to_string();
    assert!(chunklist.contains("?session="), "{master}");
    // The chunklist with the session (once it has two segments): every URL
    // in it carries it too.
    let list = wait_until(Duration::from_secs(20), || {
        let (code, list, _) = curl(&[], &format!("{base}/{chunklist}"));
        assert_eq!(code, 200, "{list}");
        (list.matches("#EXTINF").count() >= 2).then_some(list)
    })
    .expect("segments");
    for line in list.lines().filter(|l| l.contains(".m4s")) {
        assert!(line.contains("?session="), "{line}");
    }
    let part = list
        .lines()
        .find_map(|l| l.split("URI=\"").nth(1))
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_string();
    assert_eq!(curl(&[], &format!("{base}/{part}")).0, 200);
    // Without a session, with a made-up one, or with a bad signature: 401.
    let bare = chunklist.split('?').next().unwrap();
    assert_eq!(curl(&[], &format!("{base}/{bare}")).0, 401);
    assert_eq!(
        curl(&[], &format!("{base}/{bare}?session=1_AAAAAAAA")).0,
        401
    );
    assert_eq!(curl(&[], &format!("{base}/llhls.m3u8")).0, 401);
    let changed = master_url.replace("/cam/", "/caM/");
    assert_eq!(curl(&[], &changed).0, 401);
    let expired = sign(
        &format!("{base}/llhls.m3u8"),
        &json!({"url_expire": now_ms() - 5}),
    );
    let (code, body, _) = curl(&[], &expired);
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("URL has expired"), "{body}");
    // A real player follows the session through every URL: ffprobe reads
    // frames from the signed master.
    let out = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-read_intervals",
            "%+3",
            "-select_streams",
            "v",
            "-count_frames",
            "-show_entries",
            "stream=codec_name,nb_read_frames",
            "-of",
            "json",
        ])
        .arg(&master_url)
        .output()
        .unwrap();
    let probe: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{out:?}\n{}", s.log_text()));
    let v = &probe["streams"][0];
    assert_eq!(v["codec_name"], "h264", "{probe}");
    let frames: u64 = v["nb_read_frames"].as_str().unwrap_or("0").parse().unwrap();
    assert!(frames > 0, "{probe}");
    let _ = src.kill();
    let _ = src.wait();
}

#[test]
fn kiln_sign_url_makes_urls_kiln_accepts() {
    let out = Command::new(kiln_bin())
        .args([
            "sign-url",
            "1kU^b6",
            "ws://192.168.0.100:3333/app/stream",
            r#"{"url_expire":1399721581}"#,
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    // OME's documented vector.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ws://192.168.0.100:3333/app/stream?policy=eyJ1cmxfZXhwaXJlIjoxMzk5NzIxNTgxfQ&signature=dvVdBpoxAeCPl94Kt5RoiqLI0YE"
    );
    let bad = Command::new(kiln_bin())
        .args(["sign-url", "k", "rtmp://h:1/a/s", "{}"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    // Issue 28, 6.6: no port in the URL: the verifier's default is signed.
    let policy = r#"{"url_expire":4102444800000}"#;
    let sign = |url: &str| {
        let out = Command::new(kiln_bin())
            .args(["sign-url", "k", url, policy])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, signed, _) = sign("rtmp://localhost/app/cam");
    assert_eq!(code, Some(0));
    assert!(
        signed.starts_with("rtmp://localhost:1935/app/cam?policy="),
        "{signed}"
    );
    let (code, _, err) = sign("srt://localhost/app/cam");
    assert_eq!(code, Some(2));
    assert!(err.contains("has no port"), "{err}");
}

// -- admission webhooks --

/// What the control server got: the body, whether its signature was
/// right, when it came.
#[derive(Clone, Debug)]
struct Hit {
    body: Value,
    signed: bool,
    at: Instant,
}

/// A control server: every request is checked against `HOOK_SECRET` and
/// answered by `answer` (a delay, a status, a body) on its own thread.
struct ControlServer {
    port: u16,
    hits: Arc<Mutex<Vec<Hit>>>,
}

type Answer = dyn Fn(&Value) -> (u64, u16, String) + Send + Sync;

impl ControlServer {
    fn start(answer: Arc<Answer>) -> ControlServer {
        Self::start_tls(answer, None)
    }

    /// With `tls` (a rustls config), the control server speaks HTTPS.
    fn start_tls(answer: Arc<Answer>, tls: Option<Arc<rustls::ServerConfig>>) -> ControlServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let h = hits.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (h, answer, tls) = (h.clone(), answer.clone(), tls.clone());
                std::thread::spawn(move || match tls {
                    None => serve_hook(conn, &h, &*answer),
                    Some(cfg) => {
                        let Ok(session) = rustls::ServerConnection::new(cfg) else {
                            return;
                        };
                        serve_hook(rustls::StreamOwned::new(session, conn), &h, &*answer);
                    }
                });
            }
        });
        ControlServer { port, hits }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/admission", self.port)
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// (openings, closings) for a URL containing `needle`.
    fn count(&self, needle: &str) -> (usize, usize) {
        let hits = self.hits();
        let of = |status: &str| {
            hits.iter()
                .filter(|h| {
                    h.body["request"]["status"] == status
                        && h.body["request"]["url"]
                            .as_str()
                            .unwrap_or("")
                            .contains(needle)
                })
                .count()
        };
        (of("opening"), of("closing"))
    }
}

fn serve_hook<S: Read + Write>(mut conn: S, hits: &Mutex<Vec<Hit>>, answer: &Answer) {
    // The head, then Content-Length bytes of body.
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let (head_end, len) = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..i]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (i + 4, len);
        }
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    };
    while data.len() < head_end + len {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&data[..head_end]).to_string();
    if !head.starts_with("POST ") {
        return;
    }
    let sig = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("x-ome-signature")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    let body = &data[head_end..head_end + len];
    let key = ring::hmac::Key::new(
        ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
        HOOK_SECRET.as_bytes(),
    );
    use base64::Engine;
    let expected = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(ring::hmac::sign(&key, body).as_ref());
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    hits.lock().unwrap().push(Hit {
        body: json.clone(),
        signed: sig == expected,
        at: Instant::now(),
    });
    let (delay, status, text) = answer(&json);
    std::thread::sleep(Duration::from_millis(delay));
    let _ = write!(
        conn,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = conn.flush();
}

/// The vhost's `<AdmissionWebhooks>` pointing at `url`.
fn hook_xml(url: &str, timeout_ms: u64, enables: &str) -> String {
    format!(
        "<AdmissionWebhooks><ControlServerUrl>{url}</ControlServerUrl>\
         <SecretKey>{HOOK_SECRET}</SecretKey><Timeout>{timeout_ms}</Timeout>\
         <Enables>{enables}</Enables></AdmissionWebhooks>"
    )
}

fn hook_server(tag: &str, hook: &ControlServer, timeout_ms: u64, enables: &str) -> Server {
    Server::start_with(
        tag,
        ServerOptions {
            media: true,
            llhls: Some(
                "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>1</SegmentDuration>".into(),
            ),
            vhost_access: hook_xml(&hook.url(), timeout_ms, enables),
            ..Default::default()
        },
    )
}

#[test]
fn webhooks_admit_redirect_and_close_rtmp_publishers() {
    if !have_tool("ffmpeg") {
        return;
    }
    let hook = ControlServer::start(Arc::new(|b: &Value| {
        let url = b["request"]["url"].as_str().unwrap_or("").to_string();
        let body = if url.contains("/denied") {
            json!({"allowed": false, "reason": "not on the list"})
        } else if url.contains("/moved") {
            json!({"allowed": true, "new_url": "rtmp://127.0.0.1/app/renamed"})
        } else if url.contains("/brief") {
            json!({"allowed": true, "lifetime": 3000})
        } else {
            json!({"allowed": true})
        };
        (0, 200, body.to_string())
    }));
    let s = hook_server("hooks-rtmp", &hook, 3000, "<Providers>rtmp,srt</Providers>");
    let rtmp = format!("rtmp://127.0.0.1:{}/app", s.media.rtmp);

    let mut a = ffmpeg_publish(30, &format!("{rtmp}/allowed?token=abc"));
    assert!(wait_live(&s, "allowed"), "{}", s.log_text());
    let (ok, err) = stderr_of(ffmpeg_publish(2, &format!("{rtmp}/denied")));
    assert!(!ok);
    println!("ffmpeg on a denied publish: {}", err.trim());
    assert!(s.log_text().contains("not on the list"), "{}", s.log_text());
    let mut m = ffmpeg_publish(30, &format!("{rtmp}/moved"));
    assert!(wait_live(&s, "renamed"), "new_url: {}", s.log_text());
    assert!(s.live_stream("moved").is_none());
    let mut b = ffmpeg_publish(30, &format!("{rtmp}/brief"));
    assert!(wait_live(&s, "brief"));
    assert!(
        wait_until(Duration::from_secs(10), || s
            .live_stream("brief")
            .is_none()
            .then_some(()))
        .is_some(),
        "lifetime did not end the session"
    );
    // kill -9 of a publisher still yields its closing.
    a.kill().unwrap();
    let _ = a.wait();
    assert!(
        wait_until(Duration::from_secs(10), || (hook.count("/allowed").1 == 1)
            .then_some(()))
        .is_some(),
        "no closing after kill -9: {:?}",
        hook.hits()
    );
    let _ = m.kill();
    let _ = m.wait();
    let _ = b.kill();
    let _ = b.wait();
    wait_until(Duration::from_secs(10), || {
        (hook.count("/moved").1 == 1).then_some(())
    });

    let hits = hook.hits();
    assert!(
        hits.iter().all(|h| h.signed),
        "a request with a bad X-OME-Signature"
    );
    let opening = hits
        .iter()
        .find(|h| {
            h.body["request"]["url"]
                .as_str()
                .unwrap()
                .contains("/allowed")
        })
        .unwrap();
    let req = &opening.body["request"];
    assert_eq!(req["direction"], "incoming");
    assert_eq!(req["protocol"], "RTMP");
    assert_eq!(req["status"], "opening");
    assert_eq!(
        req["url"],
        format!("{rtmp}/allowed?token=abc").as_str(),
        "the URL as OME builds it"
    );
    assert_eq!(opening.body["client"]["address"], "127.0.0.1");
    assert!(opening.body["client"]["port"].as_u64().unwrap() > 0);
    assert!(req["time"].as_str().unwrap().ends_with('Z'));
    // Each allowed opening has one closing after it; the denied none.
    for (needle, want) in [
        ("/allowed", (1, 1)),
        ("/moved", (1, 1)),
        ("/brief", (1, 1)),
        ("/denied", (1, 0)),
    ] {
        assert_eq!(hook.count(needle), want, "{needle}: {hits:?}");
    }
    let closing = hits
        .iter()
        .find(|h| {
            h.body["request"]["status"] == "closing"
                && h.body["request"]["url"]
                    .as_str()
                    .unwrap()
                    .contains("/moved")
        })
        .unwrap();
    assert_eq!(
        closing.body["request"]["new_url"],
        "rtmp://127.0.0.1/app/renamed"
    );
}

#[test]
fn a_slow_control_server_delays_only_the_session_waiting_for_it() {
    let hook = ControlServer::start(Arc::new(|b: &Value| {
        let url = b["request"]["url"].as_str().unwrap_or("");
        let slow = url.contains("/slow") && b["request"]["status"] == "opening";
        (
            if slow { 10_000 } else { 0 },
            200,
            json!({"allowed": true}).to_string(),
        )
    }));
    let s = hook_server("hooks-slow", &hook, 15_000, "<Providers>rtmp</Providers>");
    let port = s.media.rtmp;
    let t0 = Instant::now();
    let slow = std::thread::spawn(move || rtmp_publish(port, "slow").map(|_| t0.elapsed()));
    let asked = wait_until(Duration::from_secs(10), || {
        (hook.count("/slow").0 == 1).then_some(())
    });
    if asked.is_none() {
        let why = if slow.is_finished() {
            format!("{:?}", slow.join().unwrap())
        } else {
            "still waiting".into()
        };
        panic!(
            "the slow publish's webhook never came ({why}):\n{}",
            s.log_text()
        );
    }
    // Meanwhile the API answers and other publishers are admitted.
    let mut api = Vec::new();
    while t0.elapsed() < Duration::from_secs(7) {
        let t = Instant::now();
        assert_eq!(s.request("GET", "/v1/stats/current", None).status, 200);
        api.push(t.elapsed());
        std::thread::sleep(Duration::from_millis(20));
    }
    let other = Instant::now();
    rtmp_publish(port, "quick").expect("another publisher is admitted meanwhile");
    let quick = other.elapsed();
    api.sort();
    let p99 = api[api.len() * 99 / 100];
    println!(
        "while the control server sleeps 10 s: {} API requests, p99 {p99:?}; another publish took {quick:?}",
        api.len()
    );
    if slow.is_finished() {
        panic!(
            "the slow publish was answered before its webhook: {:?}\n{}",
            slow.join().unwrap(),
            s.log_text()
        );
    }
    let waited = slow.join().unwrap().expect("admitted after 10 s");
    println!("the slow publish was admitted after {waited:?}");
    assert!(waited >= Duration::from_secs(9));
}

#[test]
fn webhook_timeouts_and_errors_refuse() {
    let hook = ControlServer::start(Arc::new(|b: &Value| {
        let url = b["request"]["url"].as_str().unwrap_or("");
        if url.contains("/hang") {
            (5_000, 200, json!({"allowed": true}).to_string())
        } else if url.contains("/error") {
            (0, 500, "oops".into())
        } else {
            (0, 200, "not json".into())
        }
    }));
    let s = hook_server("hooks-timeout", &hook, 500, "<Providers>rtmp</Providers>");
    for key in ["hang", "error", "garbage"] {
        let r = rtmp_publish(s.media.rtmp, key);
        assert!(r.is_err(), "{key} admitted");
        assert!(s.live_stream(key).is_none());
    }
    let log = s.log_text();
    assert!(log.contains("no answer within the time-out"), "{log}");
    assert!(log.contains("HTTP 500"), "{log}");
    assert!(log.contains("not a JSON object"), "{log}");
    // A control server nobody listens on.
    let dead = ControlServer {
        port: free_port(),
        hits: Arc::default(),
    };
    let s2 = hook_server("hooks-dead", &dead, 1000, "<Providers>rtmp</Providers>");
    assert!(rtmp_publish(s2.media.rtmp, "x").is_err());
    assert!(
        s2.log_text().contains("could not be asked"),
        "{}",
        s2.log_text()
    );
}

#[test]
fn a_thousand_publishes_leave_no_opening_without_its_closing() {
    let hook = ControlServer::start(Arc::new(|b: &Value| {
        let url = b["request"]["url"].as_str().unwrap_or("");
        let allowed = !url.ends_with('7');
        (0, 200, json!({"allowed": allowed}).to_string())
    }));
    let s = hook_server("hooks-thousand", &hook, 3000, "<Providers>rtmp</Providers>");
    let t0 = Instant::now();
    let n = 1000;
    let mut admitted = 0;
    for i in 0..n {
        if rtmp_publish(s.media.rtmp, &format!("p{i}")).is_ok() {
            admitted += 1;
        }
    }
    println!("{n} publishes with webhooks in {:?}", t0.elapsed());
    assert_eq!(admitted, n - n / 10);
    let closed = wait_until(Duration::from_secs(20), || {
        let hits = hook.hits();
        let closings = hits
            .iter()
            .filter(|h| h.body["request"]["status"] == "closing")
            .count();
        (closings == admitted).then_some(hits)
    })
    .unwrap_or_else(|| panic!("closings missing: {:?}", hook.hits().len()));
    // Each allowed opening has exactly one closing, after it.
    for i in 0..n {
        let url = format!("/app/p{i}");
        let of = |status: &str| {
            closed
                .iter()
                .filter(|h| {
                    h.body["request"]["status"] == status
                        && h.body["request"]["url"].as_str().unwrap().ends_with(&url)
                })
                .map(|h| h.at)
                .collect::<Vec<_>>()
        };
        let (open, close) = (of("opening"), of("closing"));
        assert_eq!(open.len(), 1, "{url}");
        if url.ends_with('7') {
            assert!(close.is_empty(), "{url}: a denied opening got a closing");
        } else {
            assert_eq!(close.len(), 1, "{url}");
            assert!(close[0] >= open[0]);
        }
    }
    assert!(closed.iter().all(|h| h.signed));
}

#[test]
fn webhooks_admit_srt_and_llhls_sessions() {
    if !have_tool("ffmpeg") || !have_tool("srt-live-transmit") {
        return;
    }
    let hook = ControlServer::start(Arc::new(|b: &Value| {
        let url = b["request"]["url"].as_str().unwrap_or("");
        let allowed = !url.contains("nope");
        (
            0,
            200,
            json!({"allowed": allowed, "reason": "nope is refused"}).to_string(),
        )
    }));
    let s = hook_server(
        "hooks-srt-llhls",
        &hook,
        2000,
        "<Providers>srt</Providers><Publishers>llhls</Publishers>",
    );
    let port = s.media.srt;
    let mut src = ffmpeg_source(
        40,
        &[],
        "mpegts",
        &format!("srt://127.0.0.1:{port}?streamid=default/app/srtcam"),
    );
    assert!(wait_live(&s, "srtcam"), "{}", s.log_text());
    // Refused: 1401.
    let text =
        srt_live_transmit_caller(&format!("srt://127.0.0.1:{port}?streamid=default/app/nope"));
    println!("srt-live-transmit on a refused webhook: {}", text.trim());
    assert!(
        s.log_text().contains("reject code 1401"),
        "{}",
        s.log_text()
    );

    // A viewer: the master's opening names LLHLS and the user agent; a
    // refused one gets 401.
    let base = format!("http://127.0.0.1:{}/app/srtcam", s.media.llhls);
    let master = wait_until(Duration::from_secs(20), || {
        let (code, body, _) = curl(
            &["-A", "kiln-test-player"],
            &format!("{base}/llhls.m3u8?x=1"),
        );
        (code == 200).then_some(body)
    })
    .unwrap_or_else(|| panic!("{}", s.log_text()));
    assert!(master.contains("?session="), "{master}");
    let (code, _, _) = curl(&[], &format!("{base}/llhls.m3u8?nope=1"));
    assert_eq!(code, 401);
    let viewer = hook
        .hits()
        .into_iter()
        .find(|h| {
            h.body["request"]["protocol"] == "LLHLS" && h.body["request"]["status"] == "opening"
        })
        .expect("an LLHLS opening");
    assert_eq!(viewer.body["request"]["direction"], "outgoing");
    assert_eq!(viewer.body["client"]["user_agent"], "kiln-test-player");
    assert_eq!(
        viewer.body["request"]["url"],
        format!("{base}/llhls.m3u8?x=1").as_str()
    );
    // The SRT publisher ends: its closing comes; the quiet viewer's session
    // closes too.
    let _ = src.kill();
    let _ = src.wait();
    let closed = wait_until(Duration::from_secs(30), || {
        let hits = hook.hits();
        let closing = |proto: &str| {
            hits.iter().any(|h| {
                h.body["request"]["protocol"] == proto && h.body["request"]["status"] == "closing"
            })
        };
        (closing("SRT") && closing("LLHLS")).then_some(())
    });
    assert!(closed.is_some(), "closings: {:?}", hook.hits());
    assert!(hook.hits().iter().all(|h| h.signed));
}

#[test]
fn webhooks_go_to_an_https_control_server() {
    let dir = temp_dir("hooks-https-cert");
    let (cert, key) = make_cert(&dir, "control");
    let certs: Vec<rustls::pki_types::CertificateDer<'static>> =
        rustls::pki_types::pem::PemObject::pem_file_iter(&cert)
            .unwrap()
            .map(|c| c.unwrap())
            .collect();
    let key: rustls::pki_types::PrivateKeyDer<'static> =
        rustls::pki_types::pem::PemObject::from_pem_file(&key).unwrap();
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let hook = ControlServer::start_tls(
        Arc::new(|_: &Value| (0, 200, json!({"allowed": true}).to_string())),
        Some(Arc::new(cfg)),
    );
    // "localhost": resolved off the loop (::1 first, where nobody listens,
    // then 127.0.0.1); the certificate is trusted through SSL_CERT_FILE.
    let url = format!("https://localhost:{}/admission", hook.port);
    let s = Server::start_with(
        "hooks-https",
        ServerOptions {
            media: true,
            vhost_access: hook_xml(&url, 3000, "<Providers>rtmp</Providers>"),
            wrap: Some(format!("SSL_CERT_FILE={} exec \"$@\"", cert.display())),
            ..Default::default()
        },
    );
    rtmp_publish(s.media.rtmp, "secured").unwrap_or_else(|e| panic!("{e}\n{}", s.log_text()));
    assert!(
        wait_until(Duration::from_secs(10), || (hook.count("/secured")
            == (1, 1))
            .then_some(()))
        .is_some(),
        "{:?}\n{}",
        hook.hits(),
        s.log_text()
    );
    assert!(hook.hits().iter().all(|h| h.signed));
    // Without the certificate trusted, the opening fails: refused.
    let s2 = Server::start_with(
        "hooks-https-untrusted",
        ServerOptions {
            media: true,
            vhost_access: hook_xml(&url, 3000, "<Providers>rtmp</Providers>"),
            ..Default::default()
        },
    );
    assert!(rtmp_publish(s2.media.rtmp, "untrusted").is_err());
    assert!(
        s2.log_text().contains("could not be asked"),
        "{}",
        s2.log_text()
    );
}

#[test]
fn signed_policy_admits_rtmp_players() {
    if !have_tool("ffmpeg") || !have_tool("python3") {
        return;
    }
    // Players must sign (rtmp in publishers); publishers need not.
    let s = policy_server("policy-play", "<Publishers>rtmp</Publishers>");
    let base = format!("rtmp://127.0.0.1:{}/app", s.media.rtmp);
    let mut src = ffmpeg_publish(30, &format!("{base}/cam"));
    assert!(wait_live(&s, "cam"), "{}", s.log_text());
    let play = |url: &str| {
        Command::new("timeout")
            .args([
                "20",
                "ffmpeg",
                "-hide_banner",
                "-loglevel",
                "error",
                "-i",
                url,
            ])
            .args(["-t", "2", "-c", "copy", "-f", "null", "-"])
            .output()
            .unwrap()
    };
    let refused = play(&format!("{base}/cam"));
    assert!(!refused.status.success());
    println!(
        "ffmpeg playing unsigned: {}",
        String::from_utf8_lossy(&refused.stderr).trim()
    );
    assert!(
        s.log_text().contains("play refused: SignedPolicy"),
        "{}",
        s.log_text()
    );
    let signed = sign(
        &format!("{base}/cam"),
        &json!({"url_expire": now_ms() + 600_000}),
    );
    let ok = play(&signed);
    assert!(
        ok.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&ok.stderr),
        s.log_text()
    );
    let _ = src.kill();
    let _ = src.wait();
}

/// A control server that admits a WebRTC session only with the bearer
/// token `let-me-in` (kiln extension: WHEP and WHIP carry the
/// `Authorization: Bearer` header to it), else refuses with "bad token".
fn bearer_hook() -> ControlServer {
    ControlServer::start(Arc::new(|b: &Value| {
        let allowed = b["request"]["bearer"] == "let-me-in";
        (
            0,
            200,
            json!({"allowed": allowed, "reason": "bad token"}).to_string(),
        )
    }))
}

/// POSTs `offer` to `path` (WHEP or WHIP) with a wrong token (401 with
/// the control server's reason), then the right one (201). The opening
/// carries the token, protocol WEBRTC, `direction` and the URL; DELETE on
/// the `Location` ends the session and its closing follows; the token
/// never reaches the log.
fn bearer_admits(s: &Server, hook: &ControlServer, path: &str, offer: &str, direction: &str) {
    let url = format!("http://127.0.0.1:{}{path}", s.media.llhls);
    let post = |token: &str| {
        curl(
            &[
                "-X",
                "POST",
                "-H",
                "Content-Type: application/sdp",
                "-H",
                &format!("Authorization: Bearer {token}"),
                "--data-binary",
                offer,
                "-D",
                "-",
            ],
            &url,
        )
    };
    let (status, text, _) = post("wrong");
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("bad token"), "{text}");
    let (status, text, _) = post("let-me-in");
    assert_eq!(status, 201, "{text}");
    let location = text
        .lines()
        .find_map(|l| l.strip_prefix("Location: "))
        .unwrap()
        .trim()
        .to_string();
    let resource = path.split('?').next().unwrap_or(path);
    assert!(location.starts_with(&format!("{resource}/")), "{location}");
    let opening = hook
        .hits()
        .into_iter()
        .find(|h| h.body["request"]["bearer"] == "let-me-in")
        .expect("an opening with the token");
    assert_eq!(opening.body["request"]["protocol"], "WEBRTC");
    assert_eq!(opening.body["request"]["direction"], direction);
    assert!(opening.body["request"]["url"]
        .as_str()
        .unwrap()
        .ends_with(path));
    assert!(opening.signed);
    // DELETE ends the session: its closing follows.
    let (status, _, _) = curl(
        &["-X", "DELETE"],
        &format!("http://127.0.0.1:{}{location}", s.media.llhls),
    );
    assert_eq!(status, 200);
    let query = path.split_once('?').map_or("", |(_, q)| q);
    let closed = wait_until(Duration::from_secs(5), || {
        (hook.count(query).1 >= 1).then_some(())
    });
    assert!(
        closed.is_some(),
        "no closing for the ended session at {path}"
    );
    assert!(
        !s.log_text().contains("let-me-in"),
        "the token reached the log"
    );
}

/// WebRTC viewers (WHEP) are admitted by the webhook as LL-HLS viewers
/// are: protocol WEBRTC, the WHEP URL, the player's bearer token (kiln
/// extension); a refusal is 401; a session's end sends the closing.
#[test]
fn webhooks_admit_whep_viewers_with_their_bearer_token() {
    if !have_tool("ffmpeg") || !have_tool("curl") {
        return;
    }
    let hook = bearer_hook();
    let s = Server::start_with(
        "hooks-whep",
        ServerOptions {
            media: true,
            llhls: Some(String::new()),
            webrtc: Some(String::new()),
            vhost_access: hook_xml(&hook.url(), 2000, "<Publishers>webrtc</Publishers>"),
            ..Default::default()
        },
    );
    let mut src = ffmpeg_source(
        40,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
    );
    assert!(wait_live(&s, "cam"), "{}", s.log_text());
    let offer = include_str!("fixtures/chromium-whep-offer.sdp");
    bearer_admits(&s, &hook, "/app/cam?direction=whep", offer, "outgoing");
    let _ = src.kill();
    let _ = src.wait();
}

/// WHIP publishers go through the admission webhook as RTMP and SRT
/// publishers do (`webrtc` in `<Enables><Providers>`): direction
/// incoming, the WHIP URL, and (kiln extension) the publisher's bearer
/// token; DELETE ends the publish and its closing follows.
#[test]
fn webhooks_admit_whip_publishers_with_their_bearer_token() {
    if !have_tool("curl") {
        return;
    }
    let hook = bearer_hook();
    let s = Server::start_with(
        "hooks-whip",
        ServerOptions {
            media: true,
            llhls: Some(String::new()),
            webrtc: Some(String::new()),
            vhost_access: hook_xml(&hook.url(), 2000, "<Providers>webrtc</Providers>"),
            ..Default::default()
        },
    );
    // A publisher's offer: the fixture's m-lines sending.
    let offer =
        include_str!("fixtures/chromium-whep-offer.sdp").replace("a=recvonly", "a=sendonly");
    bearer_admits(&s, &hook, "/app/pub?direction=whip", &offer, "incoming");
}
