//! Cost of one API write against the size of the state (issue 10 item 7):
//! kiln (release binary) is started over a state file holding N push tasks,
//! then `:startPush` / `:stopPush` pairs are timed one by one over a
//! keep-alive connection (each call is journaled and fsynced before its
//! answer). Beside it, in the same run, the cost of what each call did
//! before the journal: writing the whole state (temporary file, fsync,
//! rename, fsync of the folder) at that N.
//!
//! ```text
//! cargo bench --bench state_writes            # N = 100, 10,000, 100,000
//! cargo bench --bench state_writes -- 1000    # other sizes
//! ```
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CALLS: usize = 200;
const TOKEN_B64: &str = "a2lsbjpiZW5jaA=="; // kiln:bench

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn state_json(n: usize) -> String {
    let pushes: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"id":"t{i}","vhost":"default","app":"app","streamName":"s{i}","protocol":"mpegts","url":"udp://127.0.0.1:9","createdMs":{i}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"format":1,"vhosts":[],"pushes":[{}]}}"#,
        pushes.join(",")
    )
}

/// What one API write cost before the journal: the whole state, written
/// crash-safely.
fn whole_state_write(dir: &Path, data: &[u8]) -> Duration {
    let t0 = Instant::now();
    let tmp = dir.join("whole.json.tmp");
    let mut f = std::fs::File::create(&tmp).unwrap();
    f.write_all(data).unwrap();
    f.sync_all().unwrap();
    std::fs::rename(&tmp, dir.join("whole.json")).unwrap();
    std::fs::File::open(dir).unwrap().sync_all().unwrap();
    t0.elapsed()
}

fn call(c: &mut TcpStream, r: &mut BufReader<TcpStream>, path: &str, body: &str) -> Duration {
    let t0 = Instant::now();
    write!(
        c,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic {TOKEN_B64}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut status = String::new();
    r.read_line(&mut status).unwrap();
    assert!(status.contains(" 200 "), "{status}");
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).unwrap();
    t0.elapsed()
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![100, 10_000, 100_000]
    } else {
        sizes
    };
    println!("| tasks | state file | kiln per call p50 / p99 / max ms | whole-state write p50 ms (before) | ratio p50 |");
    println!("|---|---|---|---|---|");
    for n in sizes {
        let dir = std::env::temp_dir().join(format!("kiln-bench-state-{n}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let state = state_json(n);
        std::fs::write(dir.join("kiln-state.json"), &state).unwrap();
        let port = free_port();
        std::fs::write(
            dir.join("server.xml"),
            format!(
                r#"<Server version="8"><Bind><Managers><API><Port>{port}</Port></API></Managers></Bind>
<Managers><Host><Names><Name>*</Name></Names></Host><API><AccessToken>kiln:bench</AccessToken><Limits><MaxPushTasks>1000000</MaxPushTasks></Limits></API></Managers>
<VirtualHosts><VirtualHost><Name>default</Name><Host><Names><Name>*</Name></Names></Host>
<Applications><Application><Name>app</Name><Type>live</Type><Providers><RTMP/></Providers><Publishers><Push/></Publishers></Application></Applications>
</VirtualHost></VirtualHosts></Server>"#
            ),
        )
        .unwrap();
        let mut kiln = Command::new(env!("CARGO_BIN_EXE_kiln"))
            .arg("-c")
            .arg(dir.join("server.xml"))
            .env("KILN_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("kiln starts");
        let t0 = Instant::now();
        let mut c = loop {
            if let Ok(c) = TcpStream::connect(("127.0.0.1", port)) {
                break c;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "kiln did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        c.set_nodelay(true).unwrap();
        let mut r = BufReader::new(c.try_clone().unwrap());
        let mut times = Vec::with_capacity(2 * CALLS);
        for i in 0..CALLS {
            let start = format!(
                r#"{{"id":"b{i}","stream":{{"name":"b{i}"}},"protocol":"mpegts","url":"udp://127.0.0.1:9"}}"#
            );
            times.push(call(
                &mut c,
                &mut r,
                "/v1/vhosts/default/apps/app:startPush",
                &start,
            ));
            let stop = format!(r#"{{"id":"b{i}"}}"#);
            times.push(call(
                &mut c,
                &mut r,
                "/v1/vhosts/default/apps/app:stopPush",
                &stop,
            ));
        }
        let _ = kiln.kill();
        let _ = kiln.wait();
        times.sort();
        let mut before: Vec<Duration> = (0..20)
            .map(|_| whole_state_write(&dir, state.as_bytes()))
            .collect();
        before.sort();
        let p50 = percentile(&times, 0.5);
        let old = percentile(&before, 0.5);
        println!(
            "| {n} | {} KiB | {:.2} / {:.2} / {:.2} | {:.2} | {:.2} |",
            state.len() / 1024,
            p50,
            percentile(&times, 0.99),
            times.last().unwrap().as_secs_f64() * 1000.0,
            old,
            p50 / old
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
