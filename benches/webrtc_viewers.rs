//! Many WebRTC viewers of one stream (issue 30's fan-out bench): a bounded
//! load generator on one thread, each viewer a str0m `Rtc` (full ICE, as
//! a browser) on its own UDP socket, receiving and counting what arrives.
//!
//! Against kiln (`--whep URL`): each viewer offers (recvonly video and
//! audio) and POSTs the offer to the WHEP URL. Against Janus
//! (`--janus URL --mountpoint ID`): each viewer creates a session,
//! attaches the streaming plugin, asks to `watch` the mountpoint, takes
//! Janus's offer from the long poll and answers with `start`. Over OME's
//! signalling (`--ome ws://host:port/app/stream`, kiln and OvenMediaEngine
//! alike): each viewer opens a WebSocket, asks for the server's offer,
//! answers it and keeps the socket open for the run (its close ends the
//! session).
//!
//! ```text
//! webrtc_viewers --whep http://127.0.0.1:3333/app/src?direction=whep --viewers 100 --seconds 20 --warm 5
//! webrtc_viewers --janus http://127.0.0.1:8088/janus --mountpoint 1 --viewers 100 --seconds 20 --warm 5 --local-ip 192.0.2.2
//! webrtc_viewers --ome ws://127.0.0.1:3333/app/src --viewers 200 --seconds 20 --warm 5 --spread 10
//! ```
//!
//! After `--warm` seconds it counts, for `--seconds`, per viewer: RTP
//! packets (SRTP, told from SRTCP by the payload type byte), their bytes,
//! and video frames str0m assembled. Prints `viewers <connected>
//! packets_min <n> packets_max <n> frames_min <n> frames_max <n> bytes <total>
//! setup_failed <n>` on one line. Every wait is bounded.

#[path = "support/webrtc_client.rs"]
mod webrtc_client;
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use str0m::net::{Protocol, Receive};
use str0m::{Event, Input, Output, Rtc};
use webrtc_client::{janus_setup, ome_setup, whep_setup, OmeSocket};

struct Args {
    whep: Option<String>,
    janus: Option<String>,
    ome: Option<String>,
    mountpoint: u64,
    viewers: usize,
    seconds: u64,
    warm: u64,
    /// The viewers' address (Janus gathers no loopback candidate: give it
    /// the machine's address).
    local_ip: String,
    /// Viewers spread over this many loopback addresses (127.0.0.1 on):
    /// a server counts sessions per client address, as it should, and
    /// real viewers come from many.
    spread: u8,
}

fn args() -> Args {
    let mut a = Args {
        whep: None,
        janus: None,
        ome: None,
        mountpoint: 1,
        viewers: 10,
        seconds: 10,
        warm: 3,
        local_ip: "127.0.0.1".into(),
        spread: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().expect("a value");
        match k.as_str() {
            "--whep" => a.whep = Some(v()),
            "--janus" => a.janus = Some(v()),
            "--ome" => a.ome = Some(v()),
            "--mountpoint" => a.mountpoint = v().parse().unwrap(),
            "--viewers" => a.viewers = v().parse().unwrap(),
            "--seconds" => a.seconds = v().parse().unwrap(),
            "--warm" => a.warm = v().parse().unwrap(),
            "--local-ip" => a.local_ip = v(),
            "--spread" => a.spread = v().parse::<u8>().unwrap().max(1),
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

struct Viewer {
    rtc: Rtc,
    socket: UdpSocket,
    local: SocketAddr,
    timeout: Instant,
    packets: u64,
    bytes: u64,
    frames: u64,
    connected: bool,
    /// OME's signalling: the WebSocket the session lives with.
    ws: Option<OmeSocket>,
}

fn drain(v: &mut Viewer, counting: bool) {
    loop {
        match v.rtc.poll_output() {
            Ok(Output::Timeout(t)) => {
                v.timeout = t;
                return;
            }
            Ok(Output::Transmit(t)) => {
                let _ = v.socket.send_to(&t.contents, t.destination);
            }
            Ok(Output::Event(Event::Connected)) => v.connected = true,
            Ok(Output::Event(Event::MediaData(m))) => {
                if counting && m.params.spec().codec.is_video() {
                    v.frames += 1;
                }
            }
            Ok(Output::Event(_)) => {}
            Err(_) => {
                v.timeout = Instant::now() + Duration::from_secs(3600);
                return;
            }
        }
    }
}

/// One turn of the viewers: waits up to `wait` for datagrams, hands them
/// to their peers, runs the timers that are due.
fn turn(
    viewers: &mut [Viewer],
    poll: &mut Poll,
    events: &mut Events,
    buf: &mut [u8],
    wait: Duration,
    counting: bool,
) {
    poll.poll(events, Some(wait)).unwrap();
    let now = Instant::now();
    for ev in events.iter() {
        let v = &mut viewers[ev.token().0];
        while let Ok((n, from)) = v.socket.recv_from(buf) {
            let data = &buf[..n];
            // RTP (not RTCP: payload type byte 192-223) counted.
            if counting
                && v.connected
                && n > 12
                && data[0] >> 6 == 2
                && !(192..=223).contains(&data[1])
            {
                v.packets += 1;
                v.bytes += n as u64;
            }
            let Ok(contents) = data.try_into() else {
                continue;
            };
            let input = Input::Receive(
                now,
                Receive {
                    proto: Protocol::Udp,
                    source: from,
                    destination: v.local,
                    contents,
                },
            );
            if v.rtc.handle_input(input).is_ok() {
                drain(v, counting);
            }
        }
    }
    for v in viewers.iter_mut() {
        if v.timeout <= now {
            if v.rtc.handle_input(Input::Timeout(now)).is_ok() {
                drain(v, counting);
            } else {
                v.timeout = now + Duration::from_secs(3600);
            }
        }
    }
}

fn main() {
    let a = args();
    str0m::crypto::from_feature_flags().install_process_default();
    let mut poll = Poll::new().unwrap();
    let mut events = Events::with_capacity(1024);
    let mut buf = vec![0u8; 2048];
    let mut viewers: Vec<Viewer> = Vec::new();
    let mut failed = 0;
    for i in 0..a.viewers {
        let ip = match a.spread {
            1 => a.local_ip.clone(),
            n => format!("127.0.0.{}", 1 + i % usize::from(n)),
        };
        let mut socket = UdpSocket::bind(format!("{ip}:0").parse().unwrap()).unwrap();
        let now = Instant::now();
        let rtc = match (&a.whep, &a.janus, &a.ome) {
            (Some(url), _, _) => whep_setup(url, &socket, now).map(|r| (r, None)),
            (_, Some(url), _) => janus_setup(url, a.mountpoint, &socket, now).map(|r| (r, None)),
            (_, _, Some(url)) => ome_setup(url, &socket, now).map(|(r, w)| (r, Some(w))),
            _ => panic!("--whep URL, --janus URL or --ome URL"),
        };
        let (rtc, ws) = match rtc {
            Ok(r) => r,
            Err(e) => {
                if failed == 0 {
                    eprintln!("viewer {i}: {e}");
                }
                failed += 1;
                continue;
            }
        };
        poll.registry()
            .register(&mut socket, Token(viewers.len()), Interest::READABLE)
            .unwrap();
        let local = socket.local_addr().unwrap();
        let mut v = Viewer {
            rtc,
            socket,
            local,
            timeout: now,
            packets: 0,
            bytes: 0,
            frames: 0,
            connected: false,
            ws,
        };
        drain(&mut v, false);
        viewers.push(v);
        // The viewers set up so far connect meanwhile (a server ends a
        // session that has not connected within seconds of its offer).
        turn(
            &mut viewers,
            &mut poll,
            &mut events,
            &mut buf,
            Duration::ZERO,
            false,
        );
    }
    let start = Instant::now();
    let count_from = start + Duration::from_secs(a.warm);
    let end = count_from + Duration::from_secs(a.seconds);
    let mut keep_alive_at = start;
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        if now >= keep_alive_at {
            keep_alive_at = now + Duration::from_secs(1);
            for ws in viewers.iter_mut().filter_map(|v| v.ws.as_mut()) {
                ws.keep_alive(now);
            }
        }
        let next = viewers
            .iter()
            .map(|v| v.timeout)
            .min()
            .unwrap_or(end)
            .min(end);
        let wait = next
            .saturating_duration_since(now)
            .min(Duration::from_millis(20));
        turn(
            &mut viewers,
            &mut poll,
            &mut events,
            &mut buf,
            wait,
            now >= count_from,
        );
    }
    let connected = viewers.iter().filter(|v| v.connected).count();
    let pk: Vec<u64> = viewers.iter().map(|v| v.packets).collect();
    let fr: Vec<u64> = viewers.iter().map(|v| v.frames).collect();
    println!(
        "viewers {connected} packets_min {} packets_max {} frames_min {} frames_max {} bytes {} setup_failed {failed}",
        pk.iter().min().unwrap_or(&0),
        pk.iter().max().unwrap_or(&0),
        fr.iter().min().unwrap_or(&0),
        fr.iter().max().unwrap_or(&0),
        viewers.iter().map(|v| v.bytes).sum::<u64>(),
    );
}
