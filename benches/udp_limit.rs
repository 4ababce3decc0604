//! The machine's UDP send limit, the yardstick of the UDP fan-out bench:
//! one thread sends 1316-byte datagrams (7 TS packets) with plain
//! `UdpSocket::send_to`, round-robin to 100 bound sockets nobody reads
//! (the kernel drops them when full, as it would for a slow receiver), and
//! prints datagrams per CPU second (utime+stime of this process).
//!
//! `cargo bench --bench udp_limit -- --seconds 3`
use std::net::UdpSocket;
use std::time::{Duration, Instant};

fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // fields 14 and 15 of stat (utime, stime) are 11 and 12 after the name
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0 // USER_HZ is 100 on Linux
}

fn main() {
    let mut seconds = 3.0f64;
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--seconds") {
        seconds = args
            .get(i + 1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(seconds);
    }
    let sinks: Vec<UdpSocket> = (0..100)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let dests: Vec<_> = sinks.iter().map(|s| s.local_addr().unwrap()).collect();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let payload = [0x47u8; 1316];
    let c0 = cpu_seconds();
    let t0 = Instant::now();
    let mut sent: u64 = 0;
    let mut failed: u64 = 0;
    while t0.elapsed() < Duration::from_secs_f64(seconds) {
        for d in &dests {
            match tx.send_to(&payload, d) {
                Ok(_) => sent += 1,
                Err(_) => failed += 1,
            }
        }
    }
    let cpu = cpu_seconds() - c0;
    let wall = t0.elapsed().as_secs_f64();
    println!("datagrams {sent}");
    println!("failed {failed}");
    println!("cpu_seconds {cpu:.2}");
    println!("wall_seconds {wall:.2}");
    println!(
        "datagrams_per_cpu_second {:.0}",
        sent as f64 / cpu.max(0.01)
    );
    println!("datagrams_per_wall_second {:.0}", sent as f64 / wall);
}
