//! WebRTC behind a NAT (issue 41, part 3), built with network namespaces
//! and nftables as a cloud VM or a Docker host is: kiln in a namespace
//! with a private address only (10.215.0.2), a router namespace whose
//! outside address (203.0.113.1) forwards everything to kiln (DNAT) and
//! masquerades what kiln sends out, and a browser's namespace that can
//! reach nothing but the router's outside address — plus an IPv6 prefix
//! routed without NAT, as dual-stack networks are. A STUN server the test
//! runs on the outside tells kiln its public address (`<StunServer>`,
//! `${PublicIP}`); Chromium plays over WHEP, publishes over WHIP and plays
//! through the TCP relay, each through the NAT. A second kiln offers the
//! NAT's outside address written in its config beside `*` and `[::]`.

mod common;
#[path = "common/media.rs"]
mod media;
#[path = "common/webrtc_pages.rs"]
mod webrtc_pages;
use common::*;
use media::*;
use serde_json::Value;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use webrtc_pages::*;

const PUBLIC: &str = "203.0.113.1";
const STUN_ADDR: &str = "203.0.113.2:3478";
const KILN_V6: &str = "fd00:215::2";

/// The three namespaces; removed on drop.
struct NatNet {
    kiln_ns: String,
    router_ns: String,
    viewer_ns: String,
}

impl NatNet {
    /// `test`: a number of the test's own (tests running at once each
    /// make their namespaces; the addresses inside may be the same).
    fn create(test: u8) -> Result<NatNet, String> {
        let id = std::process::id();
        let net = NatNet {
            kiln_ns: format!("kiln-nk{test}-{id}"),
            router_ns: format!("kiln-nr{test}-{id}"),
            viewer_ns: format!("kiln-nv{test}-{id}"),
        };
        let (k, r, v) = (&net.kiln_ns, &net.router_ns, &net.viewer_ns);
        let n = id % 100_000;
        let (lan_k, lan_r, wan_r, wan_v) = (
            format!("knk{test}-{n}"),
            format!("knl{test}-{n}"),
            format!("knw{test}-{n}"),
            format!("knv{test}-{n}"),
        );
        let steps = [
            format!("netns add {k}"),
            format!("netns add {r}"),
            format!("netns add {v}"),
            format!("link add {lan_k} netns {k} type veth peer name {lan_r} netns {r}"),
            format!("link add {wan_r} netns {r} type veth peer name {wan_v} netns {v}"),
            format!("-n {k} addr add 10.215.0.2/24 dev {lan_k}"),
            format!("-n {r} addr add 10.215.0.1/24 dev {lan_r}"),
            format!("-n {r} addr add {PUBLIC}/24 dev {wan_r}"),
            format!("-n {v} addr add 203.0.113.2/24 dev {wan_v}"),
            format!("-n {k} -6 addr add {KILN_V6}/64 dev {lan_k} nodad"),
            format!("-n {r} -6 addr add fd00:215::1/64 dev {lan_r} nodad"),
            format!("-n {r} -6 addr add fd00:215:1::1/64 dev {wan_r} nodad"),
            format!("-n {v} -6 addr add fd00:215:1::2/64 dev {wan_v} nodad"),
            format!("-n {k} link set {lan_k} up"),
            format!("-n {r} link set {lan_r} up"),
            format!("-n {r} link set {wan_r} up"),
            format!("-n {v} link set {wan_v} up"),
            format!("-n {k} link set lo up"),
            format!("-n {r} link set lo up"),
            format!("-n {v} link set lo up"),
            format!("-n {k} route add default via 10.215.0.1"),
            format!("-n {k} -6 route add default via fd00:215::1"),
            format!("-n {v} -6 route add fd00:215::/64 via fd00:215:1::1"),
        ];
        for step in &steps {
            run("ip", &step.split(' ').map(String::from).collect::<Vec<_>>())?;
        }
        let in_router = |args: &[&str]| {
            let mut all = vec!["netns", "exec", r.as_str()];
            all.extend_from_slice(args);
            run("ip", &all.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        in_router(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
        in_router(&["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"])?;
        for cmd in [
            "add table ip kilnnat".to_string(),
            "add chain ip kilnnat pre { type nat hook prerouting priority dstnat; }".into(),
            "add chain ip kilnnat post { type nat hook postrouting priority srcnat; }".into(),
            format!("add rule ip kilnnat pre iifname {wan_r} ip daddr {PUBLIC} counter dnat to 10.215.0.2"),
            format!("add rule ip kilnnat post oifname {wan_r} counter masquerade"),
            // The outside reaches the inside only through the DNAT.
            "add table ip kilnfw".into(),
            "add chain ip kilnfw guard { type filter hook forward priority 0; }".into(),
            format!("add rule ip kilnfw guard iifname {wan_r} ct status dnat accept"),
            format!("add rule ip kilnfw guard iifname {wan_r} ct state established,related accept"),
            format!("add rule ip kilnfw guard iifname {wan_r} counter drop"),
        ] {
            in_router(&["nft", &cmd])?;
        }
        Ok(net)
    }

    fn create_or_skip(test: u8) -> Option<NatNet> {
        if !have_tool("ip") || !have_tool("nft") {
            return None;
        }
        netns_or_skip(NatNet::create(test))
    }

    /// Packets the router translated to kiln (DNAT) so far.
    fn dnat_packets(&self) -> u64 {
        nft_packets(&self.router_ns, &["chain", "ip", "kilnnat", "pre"])
    }
}

impl Drop for NatNet {
    fn drop(&mut self) {
        for ns in [&self.kiln_ns, &self.router_ns, &self.viewer_ns] {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", ns])
                .status();
        }
    }
}

/// A STUN server (RFC 8489 Binding) on the outside: answers each request
/// with the address it came from. Counts what it answered.
fn stun_server(viewer_ns: String, stop: Arc<AtomicBool>) -> Arc<AtomicU64> {
    let answered = Arc::new(AtomicU64::new(0));
    let count = answered.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        enter_netns(&viewer_ns);
        let socket = UdpSocket::bind(STUN_ADDR).expect("the STUN server's port");
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        ready_tx.send(()).unwrap();
        let mut buf = [0u8; 1500];
        while !stop.load(Ordering::Relaxed) {
            let Ok((n, from)) = socket.recv_from(&mut buf) else {
                continue;
            };
            if n < 20 || buf[0..2] != [0, 1] || buf[4..8] != [0x21, 0x12, 0xA4, 0x42] {
                continue;
            }
            let SocketAddr::V4(from4) = from else {
                continue;
            };
            let mut attr = vec![0x00, 0x20, 0, 8, 0, 1];
            attr.extend_from_slice(&(from.port() ^ 0x2112).to_be_bytes());
            attr.extend(
                from4
                    .ip()
                    .octets()
                    .iter()
                    .zip([0x21, 0x12, 0xA4, 0x42])
                    .map(|(b, c)| b ^ c),
            );
            let mut answer = vec![0x01, 0x01, 0, attr.len() as u8];
            answer.extend_from_slice(&buf[4..20]);
            answer.extend_from_slice(&attr);
            let _ = socket.send_to(&answer, from);
            count.fetch_add(1, Ordering::Relaxed);
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the STUN server starts");
    answered
}

/// A kiln inside the NAT: every port on all addresses; the ICE candidate
/// and the relay at `host` (one or several, comma-separated).
fn kiln_inside(tag: &str, host: &'static str, stun: bool) -> Server {
    Server::start_with(
        tag,
        ServerOptions {
            media: true,
            bind_ip: "0.0.0.0",
            llhls: Some(String::new()),
            webrtc: Some(String::new()),
            webrtc_host: host,
            webrtc_relay: true,
            server_extra: if stun {
                format!("<StunServer>{STUN_ADDR}</StunServer>")
            } else {
                String::new()
            },
            ..Default::default()
        },
    )
}

fn candidates(s: &Server) -> Vec<String> {
    let r = s.request("GET", "/v1/webrtc", None);
    r.json()["response"]["iceCandidates"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// A viewer page decoded the stream: received and decoded frames (the
/// browser's CPU decides the decoded count: three quarters) and audio.
fn check_played(got: &Value, seconds: u64) {
    assert_eq!(got["connectionState"], "connected", "{got}");
    let received = got["video"]["framesReceived"].as_u64().unwrap_or(0);
    let decoded = got["video"]["framesDecoded"].as_u64().unwrap_or(0);
    assert!(received * 10 >= u64::from(FPS) * seconds * 8, "{got}");
    assert!(decoded * 4 >= u64::from(FPS) * seconds * 3, "{got}");
    assert!(
        got["audio"]["totalSamplesReceived"].as_u64().unwrap_or(0) > 48_000 * (seconds - 2),
        "{got}"
    );
}

#[test]
fn webrtc_plays_and_publishes_through_a_nat_with_the_public_address_learnt_by_stun() {
    let Some((chromium, web)) = chromium_and_node() else {
        return;
    };
    let Some(net) = NatNet::create_or_skip(0) else {
        return;
    };
    let stop = Arc::new(AtomicBool::new(false));
    let answered = stun_server(net.viewer_ns.clone(), stop.clone());
    let (kiln_ns, viewer_ns) = (net.kiln_ns.clone(), net.viewer_ns.clone());
    let results = std::thread::spawn(move || {
        enter_netns(&kiln_ns);
        // OME's NAT settings: the public address from the STUN server.
        let s = kiln_inside("webrtc-nat", "${PublicIP}", true);
        let learnt = wait_until(Duration::from_secs(30), || {
            s.log_text()
                .contains(&format!("Resolved public IP address ({PUBLIC})"))
                .then_some(())
        });
        assert!(
            learnt.is_some(),
            "no public address learnt:\n{}",
            s.log_text()
        );
        let offered = candidates(&s);
        let mut src = ffmpeg_source(
            90,
            &[],
            "flv",
            &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
        );
        s.wait_for_tracks("cam");
        let port = s.media.llhls;
        let page = |script: &str, env: &[(&str, &str)], args: Vec<String>| {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            seen(node_page(
                script,
                Some(&viewer_ns),
                env,
                &chromium,
                &web,
                &args,
            ))
        };
        let whep = page(
            "webrtc_check.mjs",
            &[],
            vec![
                "whep".into(),
                format!("http://{PUBLIC}:{port}/app/cam?direction=whep"),
                "10".into(),
            ],
        );
        let relay = format!("turn:{PUBLIC}:{}?transport=tcp", s.media.relay);
        let relayed = page(
            "webrtc_check.mjs",
            &[("RELAY", relay.as_str())],
            vec![
                "whep".into(),
                format!("http://{PUBLIC}:{port}/app/cam?direction=whep&transport=tcp"),
                "10".into(),
            ],
        );
        let _ = src.kill();
        let _ = src.wait();
        let publisher = publisher_in(
            Some(&viewer_ns),
            &[],
            &chromium,
            &web,
            &[
                "whip",
                &format!("http://{PUBLIC}:{port}/app/natpub?direction=whip"),
                "10",
            ],
        );
        let live = s.tracks_within("natpub", Duration::from_secs(30));
        let published = seen(publisher);
        (
            s.media.ice,
            s.media.relay,
            offered,
            whep,
            relayed,
            live,
            published,
        )
    })
    .join()
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    let (ice, relay_port, offered, whep, relayed, live, published) = results;
    println!("offered: {offered:?}\nWHEP through the NAT: {whep}\nWHEP through the relay: {relayed}\nWHIP through the NAT: {published}");
    assert!(answered.load(Ordering::Relaxed) >= 1);
    // Only the public address is offered: never the private one.
    assert_eq!(offered, vec![format!("{PUBLIC}:{ice}/udp")]);
    assert_eq!(whep["remoteCandidate"], format!("{PUBLIC}:{ice}"), "{whep}");
    check_played(&whep, 10);
    assert_eq!(relayed["localCandidateType"], "relay", "{relayed}");
    assert!(
        relayed["link"]
            .as_str()
            .unwrap_or("")
            .contains(&format!("turn:{PUBLIC}:{relay_port}")),
        "{relayed}"
    );
    check_played(&relayed, 10);
    let live =
        live.unwrap_or_else(|| panic!("no stream from the publisher behind the NAT: {published}"));
    assert_eq!(live["input"]["sourceType"], "WebRTC", "{live}");
    assert_eq!(published["connectionState"], "connected", "{published}");
    assert_eq!(
        published["remoteCandidate"],
        format!("{PUBLIC}:{ice}"),
        "{published}"
    );
    assert!(
        published["video"]["framesEncoded"].as_u64().unwrap_or(0) > 100,
        "{published}"
    );
    assert!(net.dnat_packets() > 0);
}

#[test]
fn a_nats_outside_address_written_in_the_config_is_offered_beside_local_and_ipv6_candidates() {
    let Some((chromium, web)) = chromium_and_node() else {
        return;
    };
    let Some(net) = NatNet::create_or_skip(1) else {
        return;
    };
    let (kiln_ns, viewer_ns, router_ns) = (
        net.kiln_ns.clone(),
        net.viewer_ns.clone(),
        net.router_ns.clone(),
    );
    let results = std::thread::spawn(move || {
        enter_netns(&kiln_ns);
        // The outside address as the operator writes it (not on this
        // machine), the machine's IPv4 addresses, its IPv6 ones.
        let s = kiln_inside("webrtc-nat-fixed", "203.0.113.1,*,[::]", false);
        let offered = candidates(&s);
        let mut src = ffmpeg_source(
            60,
            &[],
            "flv",
            &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
        );
        s.wait_for_tracks("cam");
        let port = s.media.llhls;
        let whep = |url: String| {
            seen(node_page(
                "webrtc_check.mjs",
                Some(&viewer_ns),
                &[],
                &chromium,
                &web,
                &["whep", &url, "10"],
            ))
        };
        // Dual stack: the browser may take the routed IPv6 path.
        let dual = whep(format!("http://{PUBLIC}:{port}/app/cam?direction=whep"));
        // IPv6 forwarding off: only the NAT's outside address is left.
        run(
            "ip",
            &[
                "netns",
                "exec",
                &router_ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.forwarding=0",
            ]
            .map(String::from),
        )
        .unwrap();
        let v4 = whep(format!("http://{PUBLIC}:{port}/app/cam?direction=whep"));
        let _ = src.kill();
        let _ = src.wait();
        (s.media.ice, offered, dual, v4)
    })
    .join()
    .unwrap();
    let (ice, offered, dual, v4) = results;
    println!("offered: {offered:?}\ndual stack: {dual}\nIPv4 only: {v4}");
    for want in [
        format!("{PUBLIC}:{ice}/udp"),
        format!("10.215.0.2:{ice}/udp"),
        format!("[{KILN_V6}]:{ice}/udp"),
    ] {
        assert!(offered.contains(&want), "{want} not in {offered:?}");
    }
    let reached = dual["remoteCandidate"].as_str().unwrap_or("");
    assert!(
        reached == format!("{PUBLIC}:{ice}") || reached == format!("{KILN_V6}:{ice}"),
        "{dual}"
    );
    check_played(&dual, 10);
    assert_eq!(v4["remoteCandidate"], format!("{PUBLIC}:{ice}"), "{v4}");
    check_played(&v4, 10);
    assert!(net.dnat_packets() > 0);
}
