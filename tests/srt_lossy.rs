//! SRT through a lossy, reordering path with libsrt on the far side: ffmpeg
//! (libsrt caller) -> a UDP proxy that drops 5% of datagrams each way and
//! swaps neighbours now and then -> kiln's SRT listener. kiln pushes the
//! stream on over UDP; what arrives must hold every video frame (within the
//! usual 2%): retransmission repaired the losses inside the latency window.
//!
//! (A kernel netem path in network namespaces would be the other way; the
//! kernels this runs on here have no sch_netem, so the loss is made in
//! user space, where it is the same for SRT.)

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use serde_json::json;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Forwards datagrams between one client and `upstream`, dropping about
/// `loss_pct` percent each way and holding one datagram back now and then
/// (reordering). Returns the proxy's port and (dropped, forwarded) counters.
fn lossy_proxy(
    upstream: SocketAddr,
    loss_pct: u64,
    stop: Arc<AtomicBool>,
) -> (u16, Arc<AtomicU64>, Arc<AtomicU64>) {
    let front = UdpSocket::bind("127.0.0.1:0").unwrap();
    let back = UdpSocket::bind("127.0.0.1:0").unwrap();
    back.connect(upstream).unwrap();
    let port = front.local_addr().unwrap().port();
    let dropped = Arc::new(AtomicU64::new(0));
    let forwarded = Arc::new(AtomicU64::new(0));
    let client: Arc<std::sync::Mutex<Option<SocketAddr>>> = Default::default();
    for direction in 0..2 {
        let (rx, tx) = if direction == 0 {
            (front.try_clone().unwrap(), back.try_clone().unwrap())
        } else {
            (back.try_clone().unwrap(), front.try_clone().unwrap())
        };
        let (stop, dropped, forwarded, client) = (
            stop.clone(),
            dropped.clone(),
            forwarded.clone(),
            client.clone(),
        );
        std::thread::spawn(move || {
            rx.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let mut seed = 0x2545_F491_4F6C_DD1Du64 ^ direction;
            let mut rand = move || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            let mut held: Option<Vec<u8>> = None;
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                let Ok((n, from)) = rx.recv_from(&mut buf) else {
                    continue;
                };
                let to = if direction == 0 {
                    *client.lock().unwrap() = Some(from);
                    None
                } else {
                    *client.lock().unwrap()
                };
                let send = |d: &[u8]| {
                    let _ = match to {
                        None => tx.send(d),
                        Some(addr) => tx.send_to(d, addr),
                    };
                };
                if rand() % 100 < loss_pct {
                    dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                forwarded.fetch_add(1, Ordering::Relaxed);
                if held.is_none() && rand() % 100 < 3 {
                    held = Some(buf[..n].to_vec());
                    continue;
                }
                send(&buf[..n]);
                if let Some(h) = held.take() {
                    send(&h);
                }
            }
        });
    }
    (port, dropped, forwarded)
}

#[test]
fn srt_ingest_repairs_five_percent_loss_with_reordering() {
    if !have_tool("ffmpeg") || !have_tool("ffprobe") {
        return;
    }
    let s = Server::start_with(
        "srtlossy",
        ServerOptions {
            media: true,
            ..Default::default()
        },
    );
    let stop = Arc::new(AtomicBool::new(false));
    let upstream = SocketAddr::from(([127, 0, 0, 1], s.media.srt));
    let (proxy, dropped, forwarded) = lossy_proxy(upstream, 5, stop.clone());

    // kiln pushes whatever arrives to a UDP capture.
    let capture = UdpSocket::bind("127.0.0.1:0").unwrap();
    let capture_port = capture.local_addr().unwrap().port();
    let r = s.request(
        "POST",
        "/v1/vhosts/default/apps/app:startPush",
        Some(
            &json!({"id": "out", "stream": {"name": "lossy"}, "protocol": "mpegts",
            "url": format!("udp://127.0.0.1:{capture_port}")})
            .to_string(),
        ),
    );
    assert_eq!(r.status, 200);
    let out = s.dir.join("out.ts");
    let out2 = out.clone();
    let received = std::thread::spawn(move || {
        capture
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let mut data = Vec::new();
        let mut buf = [0u8; 65536];
        let t0 = std::time::Instant::now();
        loop {
            match capture.recv(&mut buf) {
                Ok(n) => data.extend_from_slice(&buf[..n]),
                Err(_) if data.is_empty() && t0.elapsed() < Duration::from_secs(30) => {}
                Err(_) => break,
            }
        }
        std::fs::write(&out2, &data).unwrap();
    });

    let secs = 8;
    let url =
        format!("srt://127.0.0.1:{proxy}?streamid=default/app/lossy&latency=400000&pkt_size=1316");
    let mut ff = ffmpeg_source(secs, &[], "mpegts", &url);
    assert!(
        ff.wait().unwrap().success(),
        "the SRT publisher failed over the lossy path"
    );
    received.join().unwrap();
    stop.store(true, Ordering::Relaxed);

    let (dropped, forwarded) = (
        dropped.load(Ordering::Relaxed),
        forwarded.load(Ordering::Relaxed),
    );
    eprintln!("lossy path: {dropped} datagrams dropped, {forwarded} forwarded");
    assert!(
        dropped > 20,
        "the path lost too little to test anything ({dropped})"
    );
    let counts = frame_counts(&out);
    let video = frames_of(&counts, "h264");
    let want = (secs * FPS) as u64;
    assert!(
        within_2pct(video, want),
        "{video} of {want} video frames arrived ({counts:?})"
    );
    assert!(monotonic_dts(&out));
}
