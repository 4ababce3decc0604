//! The floor under kiln's start-up, for `benches/compare.sh` (startup): a
//! program that does only what start-up cannot avoid. It reads the state
//! file and deserializes it with serde_json (into a `Value`: every byte
//! parsed, nothing of kiln's model built), binds the same TCP ports, and
//! answers the first request on the API port with `200`, as kiln answers
//! `GET /v1/version`. Then it waits to be killed.
//!
//! `startup_floor STATE_FILE API_PORT [OTHER_TCP_PORT ...]`

use std::io::{Read, Write};
use std::net::TcpListener;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 || args[0] == "--bench" {
        eprintln!("usage: startup_floor STATE_FILE API_PORT [TCP_PORT ...]");
        return;
    }
    if let Ok(text) = std::fs::read(&args[0]) {
        let state: serde_json::Value = serde_json::from_slice(&text).expect("state file parses");
        std::hint::black_box(&state);
    }
    let listeners: Vec<TcpListener> = args[1..]
        .iter()
        .map(|p| TcpListener::bind(("127.0.0.1", p.parse::<u16>().expect("a port"))).expect("bind"))
        .collect();
    for stream in listeners[0].incoming() {
        let Ok(mut s) = stream else { continue };
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf);
        let body = br#"{"statusCode":200,"message":"OK","response":{}}"#;
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let _ = s.write_all(head.as_bytes());
        let _ = s.write_all(body);
    }
}
