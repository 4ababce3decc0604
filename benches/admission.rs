//! Admission with an HTTP callback, end to end: a control server (in this
//! process, answering `{"allowed":true}` to every POST) and N sequential
//! bare RTMP publishes (kiln's RTMP client: connect, handshake, `publish`,
//! wait for `NetStream.Publish.Start`, close). Run against kiln with
//! AdmissionWebhooks and against nginx-rtmp with `on_publish` /
//! `on_publish_done` pointing at the same control server
//! (`benches/compare.sh`, section `admission`).
//!
//!   admission --control-port P --publish rtmp://127.0.0.1:1935/app --count N
//!
//! Prints one line: `publishes/s p50_ms p99_ms openings closings`, where the
//! times are from connect to Publish.Start and openings/closings count the
//! control server's requests (kiln: by OME's `status`; nginx-rtmp: by its
//! `call=publish` / `call=publish_done`).

use kiln::rtmp::{ClientConfig, ClientSession, ClientState};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn arg(all: &[String], name: &str) -> Option<String> {
    all.iter()
        .position(|a| a == name)
        .and_then(|i| all.get(i + 1))
        .cloned()
}

#[derive(Default)]
struct Counts {
    openings: AtomicUsize,
    closings: AtomicUsize,
}

fn control_server(port: u16, counts: Arc<Counts>) {
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("control port");
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let counts = counts.clone();
            std::thread::spawn(move || {
                let mut data = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&data[..i]).to_ascii_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        if data.len() >= i + 4 + len {
                            let body = String::from_utf8_lossy(&data[i + 4..i + 4 + len]);
                            if body.contains("\"closing\"") || body.contains("call=publish_done") {
                                counts.closings.fetch_add(1, Ordering::Relaxed);
                            } else {
                                counts.openings.fetch_add(1, Ordering::Relaxed);
                            }
                            break;
                        }
                    }
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => data.extend_from_slice(&buf[..n]),
                    }
                }
                let body = r#"{"allowed":true}"#;
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
}

/// One publish: the time from connect to Publish.Start.
fn publish(host: &str, tc_url: &str, key: &str) -> Result<Duration, String> {
    let t0 = Instant::now();
    let mut sock = TcpStream::connect(host).map_err(|e| e.to_string())?;
    sock.set_nodelay(true).ok();
    sock.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut c = ClientSession::new(ClientConfig::new(tc_url, "app", key));
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let out = c.pending_output().to_vec();
        sock.write_all(&out).map_err(|e| e.to_string())?;
        c.consume_output(out.len());
        match c.state() {
            ClientState::Publishing => return Ok(t0.elapsed()),
            ClientState::Failed => return Err(format!("{:?}", c.poll_event())),
            _ => {}
        }
        let n = sock.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed".into());
        }
        c.handle_input(&buf[..n]).map_err(|e| e.to_string())?;
    }
}

fn main() {
    let all: Vec<String> = std::env::args().collect();
    let usage = "usage: admission --control-port P --publish rtmp://host:port/app --count N";
    let port: u16 = arg(&all, "--control-port")
        .and_then(|p| p.parse().ok())
        .expect(usage);
    let tc_url = arg(&all, "--publish").expect(usage);
    let count: usize = arg(&all, "--count")
        .and_then(|c| c.parse().ok())
        .unwrap_or(500);
    let host = tc_url
        .strip_prefix("rtmp://")
        .and_then(|r| r.split('/').next())
        .expect(usage)
        .to_string();
    let counts = Arc::new(Counts::default());
    control_server(port, counts.clone());
    // Warm-up (connections, caches), not counted.
    for i in 0..20 {
        let _ = publish(&host, &tc_url, &format!("warm{i}"));
    }
    std::thread::sleep(Duration::from_millis(300));
    let (o0, c0) = (
        counts.openings.load(Ordering::Relaxed),
        counts.closings.load(Ordering::Relaxed),
    );
    let mut times = Vec::with_capacity(count);
    let t0 = Instant::now();
    for i in 0..count {
        match publish(&host, &tc_url, &format!("s{i}")) {
            Ok(t) => times.push(t),
            Err(e) => panic!("publish {i} refused: {e}"),
        }
    }
    let total = t0.elapsed();
    // Closings of the last sessions may still be on their way.
    let deadline = Instant::now() + Duration::from_secs(5);
    while counts.closings.load(Ordering::Relaxed) - c0 < count && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{:.1} {:.3} {:.3} {} {}",
        count as f64 / total.as_secs_f64(),
        ms(times[times.len() / 2]),
        ms(times[times.len() * 99 / 100]),
        counts.openings.load(Ordering::Relaxed) - o0,
        counts.closings.load(Ordering::Relaxed) - c0,
    );
}
