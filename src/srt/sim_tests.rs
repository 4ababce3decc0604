//! Deterministic in-memory network tests: a [`Caller`] against a
//! [`Listener`] over a simulated link with delay, jitter (reordering) and
//! loss from a seeded xorshift, on a fake clock that steps to the earliest
//! deadline. Test-only.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::*;

/// Tiny deterministic RNG (xorshift64*).
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

struct InFlight {
    at: Instant,
    order: u64,
    from: SocketAddr,
    to: SocketAddr,
    bytes: Vec<u8>,
}

struct Net {
    rng: XorShift,
    loss_pct: u64,
    delay: Duration,
    jitter: Duration,
    inflight: Vec<InFlight>,
    order: u64,
    sent: u64,
    lost: u64,
}

impl Net {
    fn new(seed: u64, loss_pct: u64, delay: Duration, jitter: Duration) -> Self {
        Net {
            rng: XorShift(seed.max(1)),
            loss_pct,
            delay,
            jitter,
            inflight: Vec::new(),
            order: 0,
            sent: 0,
            lost: 0,
        }
    }

    fn send(&mut self, now: Instant, from: SocketAddr, to: SocketAddr, bytes: &[u8]) {
        self.sent += 1;
        let lost = self.rng.below(100) < self.loss_pct;
        if std::env::var("SIM_TRACE").is_ok() {
            eprintln!(
                "{:?} {} lost={lost} {:?}",
                now,
                from.port(),
                packet::Packet::parse(bytes).map(|p| match p {
                    packet::Packet::Data(d) =>
                        format!("DATA {} r={}", d.header.seq, d.header.retransmitted),
                    packet::Packet::Control(c) =>
                        format!("{:?}", c.body).chars().take(120).collect(),
                })
            );
        }
        if lost {
            self.lost += 1;
            return;
        }
        let j = self.rng.below(self.jitter.as_micros() as u64 + 1);
        self.order += 1;
        self.inflight.push(InFlight {
            at: now + self.delay + Duration::from_micros(j),
            order: self.order,
            from,
            to,
            bytes: bytes.to_vec(),
        });
    }

    fn earliest(&self) -> Option<Instant> {
        self.inflight.iter().map(|p| p.at).min()
    }

    /// Removes and returns the datagrams due at `now`, in arrival order.
    fn due(&mut self, now: Instant) -> Vec<InFlight> {
        let mut due = Vec::new();
        let mut i = 0;
        while i < self.inflight.len() {
            if self.inflight[i].at <= now {
                due.push(self.inflight.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|p| (p.at, p.order));
        due
    }
}

fn l_addr() -> SocketAddr {
    "192.0.2.1:9000".parse().unwrap()
}
fn c_addr() -> SocketAddr {
    "198.51.100.7:40000".parse().unwrap()
}

/// What the simulated kiln does with a connection request.
#[derive(Clone, Copy)]
enum Decision {
    Accept,
    Reject(RejectReason),
}

struct Outcome {
    /// (payload index, delivery time, send time)
    delivered: Vec<(u32, Instant, Instant)>,
    stream_id: Option<String>,
    caller_events: Vec<(Instant, CallerEvent)>,
    listener_closed: Vec<(Instant, CloseReason)>,
    sender: SenderStats,
    receiver: Option<ReceiverStats>,
    send_times: Vec<Instant>,
    /// Handshakes the listener refused for their encryption.
    refused: Vec<RejectReason>,
    /// Key announcements the listener took after the handshake.
    refreshes: u32,
}

struct Scenario {
    seed: u64,
    loss_pct: u64,
    delay: Duration,
    jitter: Duration,
    latency: Duration,
    payloads: u32,
    interval: Duration,
    /// Payloads sent after `payloads` so that tail losses are detected.
    filler: u32,
    decision: Decision,
    /// Caller calls `shutdown` this long after its last payload.
    shutdown_after: Option<Duration>,
    /// From this time after connecting, the network drops everything.
    blackout_after: Option<Duration>,
    run_for: Duration,
    caller_crypto: Option<crypto::CryptoConfig>,
    listener_crypto: Option<crypto::CryptoConfig>,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            seed: 1,
            loss_pct: 0,
            delay: Duration::from_millis(10),
            jitter: Duration::ZERO,
            latency: Duration::from_millis(120),
            payloads: 1000,
            interval: Duration::from_millis(1),
            filler: 300,
            decision: Decision::Accept,
            shutdown_after: None,
            blackout_after: None,
            run_for: Duration::from_secs(5),
            caller_crypto: None,
            listener_crypto: None,
        }
    }
}

fn run(s: Scenario) -> Outcome {
    let t0 = Instant::now();
    let mut now = t0;
    let mut net = Net::new(s.seed, s.loss_pct, s.delay, s.jitter);
    let mut l = Listener::new(
        ListenerConfig {
            latency: s.latency,
            secret: Some(s.seed),
            crypto: s.listener_crypto.clone(),
            ..ListenerConfig::default()
        },
        now,
    );
    let mut c = Caller::new(
        CallerConfig {
            stream_id: Some("#!::r=live/cam1,m=publish".into()),
            latency: s.latency,
            socket_id: Some(0x0abc_def0),
            initial_seq: Some(SeqNumber::MAX - 100), // wraps during the test
            crypto: s.caller_crypto.clone(),
            ..CallerConfig::new(l_addr())
        },
        now,
    );
    let mut out = Outcome {
        delivered: Vec::new(),
        stream_id: None,
        caller_events: Vec::new(),
        listener_closed: Vec::new(),
        sender: SenderStats::default(),
        receiver: None,
        send_times: Vec::new(),
        refused: Vec::new(),
        refreshes: 0,
    };
    let total = s.payloads + s.filler;
    let mut next_send: Option<Instant> = None;
    let mut sent = 0u32;
    let mut shutdown_at: Option<Instant> = None;
    let mut blackout_at: Option<Instant> = None;
    let mut conn = None;
    let mut buf = Vec::new();
    let mut steps = 0u64;
    while now - t0 < s.run_for {
        steps += 1;
        assert!(steps < 5_000_000, "simulation does not make progress");
        // Deliver due datagrams.
        for p in net.due(now) {
            if blackout_at.is_some_and(|b| now >= b) {
                continue;
            }
            if p.to == l_addr() {
                l.handle_datagram(p.from, &p.bytes, now);
            } else {
                c.handle_datagram(p.from, &p.bytes, now);
            }
        }
        if l.poll_timeout().is_some_and(|t| t <= now) {
            l.handle_timeout(now);
        }
        if c.poll_timeout().is_some_and(|t| t <= now) {
            c.handle_timeout(now);
        }
        // Application: send payloads on schedule.
        if let Some(t) = next_send {
            if t <= now && sent < total && c.is_connected() {
                let mut payload = vec![0x47u8; 1316];
                payload[..4].copy_from_slice(&sent.to_be_bytes());
                c.send(&payload, now).unwrap();
                out.send_times.push(now);
                sent += 1;
                next_send = Some(t + s.interval);
                if sent == total {
                    if let Some(d) = s.shutdown_after {
                        shutdown_at = Some(now + d);
                    }
                }
            }
        }
        if let Some(t) = shutdown_at {
            if t <= now {
                c.shutdown(now);
                shutdown_at = None;
            }
        }
        // Events.
        while let Some(ev) = c.poll_event() {
            if ev == CallerEvent::Connected {
                next_send = Some(now);
                if let Some(b) = s.blackout_after {
                    blackout_at = Some(now + b);
                }
            }
            out.caller_events.push((now, ev));
        }
        while let Some(ev) = l.poll_event() {
            match ev {
                ListenerEvent::ConnectionRequest {
                    conn: id,
                    peer,
                    stream_id,
                } => {
                    assert_eq!(peer, c_addr());
                    out.stream_id = stream_id;
                    match s.decision {
                        Decision::Accept => {
                            l.accept(id, now).unwrap();
                            conn = Some(id);
                        }
                        Decision::Reject(r) => l.reject(id, r, now).unwrap(),
                    }
                }
                ListenerEvent::Data { payload, .. } => {
                    assert_eq!(payload.len(), 1316);
                    let i = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                    let sent_at = out.send_times[i as usize];
                    out.delivered.push((i, now, sent_at));
                }
                ListenerEvent::Closed { reason, .. } => out.listener_closed.push((now, reason)),
                ListenerEvent::Refused { reason, .. } => out.refused.push(reason),
                ListenerEvent::KeysRefreshed { .. } => out.refreshes += 1,
            }
        }
        if let Some(id) = conn {
            if let Some(st) = l.connection_stats(id) {
                out.receiver = Some(st);
            }
        }
        // Transmit.
        while let Some(to) = c.poll_transmit(now, &mut buf) {
            net.send(now, c_addr(), to, &buf);
        }
        while let Some(to) = l.poll_transmit(&mut buf) {
            assert_eq!(to, c_addr());
            net.send(now, l_addr(), to, &buf);
        }
        // Step the clock to the earliest deadline.
        let mut next = net.earliest();
        next = common::earliest(next, l.poll_timeout());
        next = common::earliest(next, c.poll_timeout());
        if sent < total && c.is_connected() {
            next = common::earliest(next, next_send);
        }
        next = common::earliest(next, shutdown_at);
        match next {
            Some(t) if t > now => now = t,
            Some(_) => {}
            None => break,
        }
    }
    out.sender = c.stats();
    out
}

fn check_all_delivered(o: &Outcome, s_payloads: u32, latency: Duration, max_extra: Duration) {
    let got: Vec<u32> = o.delivered.iter().map(|d| d.0).collect();
    let first: Vec<u32> = got.iter().copied().filter(|&i| i < s_payloads).collect();
    assert_eq!(
        first,
        (0..s_payloads).collect::<Vec<_>>(),
        "in order, none missing"
    );
    for w in got.windows(2) {
        assert!(w[0] < w[1], "out of order delivery {w:?}");
    }
    for &(i, at, sent) in &o.delivered {
        let age = at - sent;
        assert!(age >= latency, "payload {i} delivered early: {age:?}");
        assert!(
            age <= latency + max_extra,
            "payload {i} delivered late: {age:?}"
        );
    }
}

#[test]
fn clean_network_delivers_everything_at_latency() {
    let o = run(Scenario::default());
    assert_eq!(o.stream_id.as_deref(), Some("#!::r=live/cam1,m=publish"));
    assert_eq!(
        o.caller_events.first().map(|e| e.1),
        Some(CallerEvent::Connected)
    );
    check_all_delivered(
        &o,
        1000,
        Duration::from_millis(120),
        Duration::from_millis(12),
    );
    assert_eq!(o.sender.packets_sent, 1300);
    assert_eq!(o.sender.packets_retransmitted, 0);
    assert_eq!(o.sender.packets_dropped, 0);
    let r = o.receiver.unwrap();
    assert_eq!(r.packets_lost, 0);
    assert!(r.rtt_us > 15_000 && r.rtt_us < 25_000, "rtt {}", r.rtt_us);
    assert!(o.sender.rtt_us > 15_000 && o.sender.rtt_us < 25_000);
}

fn keys(passphrase: &str, len: usize) -> Option<crypto::CryptoConfig> {
    Some(crypto::CryptoConfig::new(passphrase, len).unwrap())
}

#[test]
fn encrypted_stream_survives_key_refreshes_over_a_lossy_link() {
    // Both ends encrypted (AES-128/192/256), a new key every 400 packets
    // announced 100 before: 3 refreshes during the run, while 5% of the
    // datagrams each way (data, NAKs, and the KM announcements themselves)
    // are lost and reordered. (A key's slot is reused two periods later, so
    // a period must outlast the latency window: 400 packets at 1 ms is
    // twice the 200 ms latency; libsrt's default is 2^24 packets.)
    for (seed, len) in [(1, 16), (2, 24), (3, 32), (4, 16), (5, 32)] {
        let tx = crypto::CryptoConfig::new("a shared passphrase", len)
            .unwrap()
            .with_refresh(400, 100)
            .unwrap();
        let o = run(Scenario {
            seed,
            loss_pct: 5,
            jitter: Duration::from_millis(8),
            latency: Duration::from_millis(200),
            caller_crypto: Some(tx),
            listener_crypto: keys("a shared passphrase", 16),
            ..Scenario::default()
        });
        check_all_delivered(
            &o,
            1000,
            Duration::from_millis(200),
            Duration::from_millis(20),
        );
        assert!(o.sender.packets_retransmitted > 0, "seed {seed}");
        assert!(o.refused.is_empty());
        // 5 announcements (3 pre-announcements, 2 decommissions) in the
        // run; a lost one is repeated or overtaken by the next.
        assert!(o.refreshes >= 4, "seed {seed}: {} refreshes", o.refreshes);
    }
}

#[test]
fn wrong_or_missing_passphrase_is_refused_on_both_sides() {
    let bad = run(Scenario {
        caller_crypto: keys("one passphrase", 16),
        listener_crypto: keys("another passphrase", 16),
        ..Scenario::default()
    });
    assert_eq!(bad.refused, vec![RejectReason::BadSecret]);
    assert_eq!(
        bad.caller_events.first().map(|e| e.1),
        Some(CallerEvent::Closed(CloseReason::Rejected(
            RejectReason::BadSecret
        )))
    );
    assert!(bad.delivered.is_empty());
    for (caller, listener) in [
        (keys("one passphrase", 16), None),
        (None, keys("one passphrase", 16)),
    ] {
        let o = run(Scenario {
            caller_crypto: caller,
            listener_crypto: listener,
            ..Scenario::default()
        });
        assert_eq!(o.refused, vec![RejectReason::Unsecure]);
        assert_eq!(
            o.caller_events.first().map(|e| e.1),
            Some(CallerEvent::Closed(CloseReason::Rejected(
                RejectReason::Unsecure
            )))
        );
    }
}

#[test]
fn lossy_reordering_network_delivers_everything_in_order() {
    // 5% loss each way, 10-18 ms one-way delay (RTT ~20-36 ms) with heavy
    // reordering; latency 200 ms (libsrt's advice: >= 4 x RTT, plus jitter).
    for seed in 1..=40 {
        let o = run(Scenario {
            seed,
            loss_pct: 5,
            jitter: Duration::from_millis(8),
            latency: Duration::from_millis(200),
            ..Scenario::default()
        });
        check_all_delivered(
            &o,
            1000,
            Duration::from_millis(200),
            Duration::from_millis(20),
        );
        assert!(o.sender.packets_retransmitted > 0, "seed {seed}");
        let r = o.receiver.unwrap();
        assert!(r.packets_lost > 0);
        assert_eq!(r.packets_dropped, 0, "seed {seed}: {r:?}");
    }
}

#[test]
fn lossy_network_at_120ms_latency_loses_almost_nothing() {
    // At 120 ms (= 4 x RTT) a packet is only lost after ~4 consecutive
    // losses of it, its retransmissions or its NAKs.
    let mut missing = 0;
    for seed in 1..=40 {
        let o = run(Scenario {
            seed,
            loss_pct: 5,
            jitter: Duration::from_millis(8),
            ..Scenario::default()
        });
        let got: Vec<u32> = o.delivered.iter().map(|d| d.0).collect();
        for w in got.windows(2) {
            assert!(w[0] < w[1], "out of order");
        }
        missing += 1000 - got.iter().filter(|&&i| i < 1000).count();
        for &(_, at, sent) in &o.delivered {
            assert!(at - sent >= Duration::from_millis(120));
            assert!(at - sent <= Duration::from_millis(140));
        }
    }
    assert!(missing <= 4, "{missing} of 40000 missing");
}

#[test]
fn heavy_loss_drops_too_late_packets_but_stays_in_order() {
    let o = run(Scenario {
        seed: 7,
        loss_pct: 30,
        jitter: Duration::from_millis(5),
        latency: Duration::from_millis(40),
        run_for: Duration::from_secs(8),
        ..Scenario::default()
    });
    let got: Vec<u32> = o.delivered.iter().map(|d| d.0).collect();
    for w in got.windows(2) {
        assert!(w[0] < w[1]);
    }
    assert!(got.len() > 900, "{}", got.len());
    for &(_, at, sent) in &o.delivered {
        assert!(at - sent >= Duration::from_millis(40));
    }
}

#[test]
fn rejection_reaches_the_caller() {
    let o = run(Scenario {
        decision: Decision::Reject(RejectReason::FORBIDDEN),
        run_for: Duration::from_secs(2),
        ..Scenario::default()
    });
    assert_eq!(
        o.caller_events.iter().map(|e| e.1).collect::<Vec<_>>(),
        vec![CallerEvent::Closed(CloseReason::Rejected(
            RejectReason::FORBIDDEN
        ))]
    );
    assert!(o.delivered.is_empty());
}

#[test]
fn rejection_survives_loss() {
    let o = run(Scenario {
        seed: 5,
        loss_pct: 40,
        decision: Decision::Reject(RejectReason::CONFLICT),
        run_for: Duration::from_secs(3),
        ..Scenario::default()
    });
    assert_eq!(
        o.caller_events.last().map(|e| e.1),
        Some(CallerEvent::Closed(CloseReason::Rejected(
            RejectReason::CONFLICT
        )))
    );
}

#[test]
fn shutdown_closes_listener_side_after_delivering_everything() {
    let o = run(Scenario {
        payloads: 200,
        filler: 0,
        shutdown_after: Some(Duration::from_millis(50)),
        ..Scenario::default()
    });
    assert_eq!(o.delivered.len(), 200);
    assert_eq!(o.listener_closed.len(), 1);
    assert_eq!(o.listener_closed[0].1, CloseReason::PeerShutdown);
    // no Closed event for a local shutdown
    assert_eq!(o.caller_events.len(), 1);
}

#[test]
fn peer_timeout_on_both_sides() {
    let o = run(Scenario {
        payloads: 100,
        filler: 0,
        blackout_after: Some(Duration::from_millis(500)),
        run_for: Duration::from_secs(8),
        ..Scenario::default()
    });
    assert_eq!(o.delivered.len(), 100);
    let (lt, lr) = o.listener_closed[0];
    assert_eq!(lr, CloseReason::IdleTimeout);
    let (ct, ce) = *o.caller_events.last().unwrap();
    assert_eq!(ce, CallerEvent::Closed(CloseReason::IdleTimeout));
    let connected_at = o.caller_events[0].0;
    for t in [lt, ct] {
        let after = t - connected_at;
        assert!(
            after >= Duration::from_millis(5000) && after <= Duration::from_millis(5600),
            "{after:?}"
        );
    }
}

#[test]
fn connect_timeout_without_listener() {
    let now = Instant::now();
    let mut c = Caller::new(CallerConfig::new(l_addr()), now);
    let mut buf = Vec::new();
    let mut handshakes = 0;
    let mut t = now;
    loop {
        while c.poll_transmit(t, &mut buf).is_some() {
            handshakes += 1;
        }
        let Some(next) = c.poll_timeout() else { break };
        t = next;
        c.handle_timeout(t);
    }
    assert_eq!(
        c.poll_event(),
        Some(CallerEvent::Closed(CloseReason::ConnectTimeout))
    );
    assert_eq!(t - now, Duration::from_secs(3));
    assert_eq!(handshakes, 12, "one induction every 250 ms");
    assert_eq!(c.send(b"x", t), Err(SendError::NotConnected));
}

fn connected_pair(now: Instant) -> (Listener, Caller, ConnectionId) {
    let mut l = Listener::new(ListenerConfig::default(), now);
    let mut c = Caller::new(CallerConfig::new(l_addr()), now);
    let mut buf = Vec::new();
    let mut conn = None;
    for _ in 0..4 {
        while let Some(to) = c.poll_transmit(now, &mut buf) {
            assert_eq!(to, l_addr());
            l.handle_datagram(c_addr(), &buf, now);
        }
        while let Some(ev) = l.poll_event() {
            if let ListenerEvent::ConnectionRequest { conn: id, .. } = ev {
                l.accept(id, now).unwrap();
                conn = Some(id);
            }
        }
        while let Some(_to) = l.poll_transmit(&mut buf) {
            c.handle_datagram(l_addr(), &buf, now);
        }
    }
    assert!(c.is_connected());
    (l, c, conn.unwrap())
}

#[test]
fn connected_pair_in_lockstep() {
    let now = Instant::now();
    let (l, c, conn) = connected_pair(now);
    assert_eq!(c.peer_latency(), Duration::from_millis(120));
    assert_eq!(l.connection_latency(conn), Some(Duration::from_millis(120)));
}

#[test]
fn send_buffer_is_bounded_and_drops_with_dropreq() {
    let now = Instant::now();
    let mut c = Caller::new(
        CallerConfig {
            send_buffer_packets: 16,
            ..CallerConfig::new(l_addr())
        },
        now,
    );
    let (mut l, _, _) = connected_pair(now);
    // Re-run a handshake for this caller.
    let mut buf = Vec::new();
    for _ in 0..4 {
        while c.poll_transmit(now, &mut buf).is_some() {
            l.handle_datagram(c_addr(), &buf, now);
        }
        while let Some(ev) = l.poll_event() {
            if let ListenerEvent::ConnectionRequest { conn: id, .. } = ev {
                l.accept(id, now).unwrap();
            }
        }
        while l.poll_transmit(&mut buf).is_some() {
            c.handle_datagram(l_addr(), &buf, now);
        }
    }
    assert!(c.is_connected());
    for _ in 0..40 {
        c.send(&[0x47; 1316], now).unwrap();
    }
    assert_eq!(c.stats().buffered_packets, 16);
    assert_eq!(c.stats().packets_dropped, 24);
    // payload_size splitting: 3000 bytes -> 1316 + 1316 + 368
    let before = c.stats().packets_dropped;
    c.send(&[0x47; 3000], now).unwrap();
    assert_eq!(c.stats().packets_dropped, before + 3);
    let mut dropreqs = 0;
    while c.poll_transmit(now, &mut buf).is_some() {
        if let Ok(packet::Packet::Control(packet::ControlPacket {
            body: packet::ControlBody::DropReq { .. },
            ..
        })) = packet::Packet::parse(&buf)
        {
            dropreqs += 1;
        }
    }
    assert_eq!(dropreqs, 27);
}

#[test]
fn listener_multiplexes_callers_including_shared_ports() {
    // Three callers: two share one UDP address (libsrt multiplexes sockets
    // on one port), distinguished by socket id.
    let now = Instant::now();
    let mut l = Listener::new(ListenerConfig::default(), now);
    let addrs: [SocketAddr; 3] = [
        "10.0.0.1:1000".parse().unwrap(),
        "10.0.0.1:1000".parse().unwrap(),
        "10.0.0.2:1000".parse().unwrap(),
    ];
    let mut callers: Vec<Caller> = addrs
        .iter()
        .enumerate()
        .map(|(i, _)| {
            Caller::new(
                CallerConfig {
                    stream_id: Some(format!("app/s{i}")),
                    socket_id: Some(100 + i as u32),
                    ..CallerConfig::new(l_addr())
                },
                now,
            )
        })
        .collect();
    let mut by_conn = std::collections::HashMap::new();
    let mut received: std::collections::HashMap<String, Vec<u8>> = Default::default();
    let mut buf = Vec::new();
    let mut t = now;
    for step in 0..400u32 {
        for (i, c) in callers.iter_mut().enumerate() {
            if c.is_connected() && step < 300 {
                c.send(&[i as u8, step as u8], t).unwrap();
            }
            while c.poll_transmit(t, &mut buf).is_some() {
                l.handle_datagram(addrs[i], &buf, t);
            }
        }
        while let Some(ev) = l.poll_event() {
            match ev {
                ListenerEvent::ConnectionRequest {
                    conn,
                    stream_id,
                    peer,
                } => {
                    let sid = stream_id.unwrap();
                    assert_eq!(l.connection_info(conn).unwrap().0, peer);
                    by_conn.insert(conn, sid);
                    l.accept(conn, t).unwrap();
                }
                ListenerEvent::Data { conn, payload } => {
                    let sid = &by_conn[&conn];
                    assert_eq!(format!("app/s{}", payload[0]), *sid);
                    received.entry(sid.clone()).or_default().push(payload[1]);
                }
                ListenerEvent::Closed { .. } | ListenerEvent::Refused { .. } => {
                    panic!("unexpected close")
                }
                ListenerEvent::KeysRefreshed { .. } => {}
            }
        }
        while let Some(to) = l.poll_transmit(&mut buf) {
            for (i, c) in callers.iter_mut().enumerate() {
                if addrs[i] == to {
                    c.handle_datagram(l_addr(), &buf, t);
                }
            }
        }
        t += Duration::from_millis(1);
        l.handle_timeout(t);
        for c in callers.iter_mut() {
            c.handle_timeout(t);
        }
    }
    assert_eq!(l.connection_count(), 3);
    assert_eq!(received.len(), 3);
    for (sid, got) in received {
        assert!(got.len() >= 150, "{sid}: {}", got.len());
        for w in got.windows(2) {
            assert_eq!(w[1], w[0].wrapping_add(1), "{sid}");
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    #[test]
    fn arbitrary_datagrams_never_panic_connected(
        datagrams in proptest::collection::vec(
            (proptest::collection::vec(proptest::num::u8::ANY, 0..200), 0u8..4, 0u8..3),
            0..40,
        )
    ) {
        let now = Instant::now();
        let (mut l, mut c, conn) = connected_pair(now);
        let mut t = now;
        let mut buf = Vec::new();
        for (mut d, kind, target) in datagrams {
            // Make some of them routable: patch in a valid header.
            if d.len() >= 16 {
                match kind {
                    0 => d[12..16].copy_from_slice(&conn.0.to_be_bytes()),
                    1 => d[12..16].copy_from_slice(&c.socket_id().to_be_bytes()),
                    2 => d[12..16].copy_from_slice(&[0, 0, 0, 0]),
                    _ => {}
                }
            }
            match target {
                0 => l.handle_datagram(c_addr(), &d, t),
                1 => c.handle_datagram(l_addr(), &d, t),
                _ => {
                    l.handle_datagram(c_addr(), &d, t);
                    c.handle_datagram(l_addr(), &d, t);
                }
            }
            let _ = c.send(&d, t);
            t += Duration::from_millis(3);
            l.handle_timeout(t);
            c.handle_timeout(t);
            while l.poll_transmit(&mut buf).is_some() {}
            while c.poll_transmit(t, &mut buf).is_some() {}
            while l.poll_event().is_some() {}
            while c.poll_event().is_some() {}
        }
    }

    #[test]
    fn fuzz_entry_points_never_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..1500)) {
        fuzz::fuzz_packet(&data);
        fuzz::fuzz_listener(&data);
        fuzz::fuzz_caller(&data);
    }

    #[test]
    fn nak_and_ack_fields_never_panic(
        acks in proptest::collection::vec((0u32..0x8000_0000, 0u32..0x8000_0000, proptest::bool::ANY), 0..30)
    ) {
        let now = Instant::now();
        let (_l, mut c, _conn) = connected_pair(now);
        let mut buf = Vec::new();
        for i in 0..50 {
            c.send(&[i as u8; 100], now).unwrap();
        }
        while c.poll_transmit(now, &mut buf).is_some() {}
        let dest = c.socket_id();
        for (a, b, is_nak) in acks {
            buf.clear();
            if is_nak {
                let ranges = [(SeqNumber::new(a), SeqNumber::new(b))];
                packet::write_nak_packet(&mut buf, 0, dest, ranges.into_iter(), 1500);
            } else {
                packet::Ack { number: b, seq: SeqNumber::new(a), stats: Some(packet::AckStats::default()) }
                    .write_packet(&mut buf, 0, dest);
            }
            c.handle_datagram(l_addr(), &buf, now);
            while c.poll_transmit(now, &mut buf).is_some() {}
        }
    }
}

/// Request mode: the caller plays what the listener sends (a pull), over a
/// clean and a lossy network; every payload arrives once, in order.
#[test]
fn a_caller_in_request_mode_receives_everything_the_listener_sends() {
    for (seed, loss) in [(3, 0), (4, 5)] {
        let t0 = Instant::now();
        let mut now = t0;
        let mut net = Net::new(seed, loss, Duration::from_millis(10), Duration::ZERO);
        let mut l = Listener::new(
            ListenerConfig {
                secret: Some(seed),
                ..ListenerConfig::default()
            },
            now,
        );
        let mut c = Caller::new(
            CallerConfig {
                stream_id: Some("#!::r=live/cam1,m=request".into()),
                receive: true,
                initial_seq: Some(SeqNumber::MAX - 50),
                ..CallerConfig::new(l_addr())
            },
            now,
        );
        let mut conn = None;
        let (mut sent, mut got) = (0u32, Vec::new());
        let mut buf = Vec::new();
        let mut next_send = now;
        while now - t0 < Duration::from_secs(6) {
            for p in net.due(now) {
                if p.to == l_addr() {
                    l.handle_datagram(p.from, &p.bytes, now);
                } else {
                    c.handle_datagram(p.from, &p.bytes, now);
                }
            }
            if l.poll_timeout().is_some_and(|t| t <= now) {
                l.handle_timeout(now);
            }
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
            while let Some(ev) = l.poll_event() {
                if let ListenerEvent::ConnectionRequest { conn: id, .. } = ev {
                    l.accept_sender(id, now).unwrap();
                    conn = Some(id);
                }
            }
            while c.poll_event().is_some() {}
            if let Some(id) = conn {
                if next_send <= now && sent < 2000 {
                    let mut payload = vec![0x47u8; 1316];
                    payload[..4].copy_from_slice(&sent.to_be_bytes());
                    assert!(l.send(id, &payload, now));
                    sent += 1;
                    next_send = now + Duration::from_millis(1);
                }
            }
            while let Some(p) = c.poll_data() {
                got.push(u32::from_be_bytes([p[0], p[1], p[2], p[3]]));
            }
            while let Some(to) = c.poll_transmit(now, &mut buf) {
                net.send(now, c_addr(), to, &buf);
            }
            while let Some(to) = l.poll_transmit_at(now, &mut buf) {
                net.send(now, l_addr(), to, &buf);
            }
            let mut next = net.earliest();
            next = common::earliest(next, l.poll_timeout());
            next = common::earliest(next, c.poll_timeout());
            if conn.is_some() && sent < 2000 {
                next = common::earliest(next, Some(next_send));
            }
            match next {
                Some(t) if t > now => now = t,
                Some(_) => {}
                None => break,
            }
        }
        assert!(c.is_connected());
        assert_eq!(got, (0..2000).collect::<Vec<_>>(), "loss {loss}%");
    }
}

/// The request-mode fuzz driver connects (to a real listener) before the
/// input arrives: it must, or the fuzzer never reaches the receiver.
#[test]
fn the_receiving_caller_fuzz_driver_connects() {
    let mut data = vec![1u8];
    for i in 0..40u8 {
        data.push(20);
        data.extend(std::iter::repeat_n(i, 20));
    }
    assert!(fuzz::fuzz_receiving_caller(&data[1..]));
    fuzz::fuzz_caller(&data);
    fuzz::fuzz_caller(&[1]);
}
