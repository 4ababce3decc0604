//! What the server listens on, and binding it: each listener and shared
//! UDP port becomes an endpoint before the loop runs, so a failed start
//! (a port taken) writes nothing.

use super::core::Entry;
use super::listener::Listener;
use super::srt_ingest::SrtIngest;
use super::tokens::TokenTable;
use super::ts_ingest::TsPort;
use mio::net::{TcpListener, UdpSocket};
use mio::{Interest, Poll};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a TCP listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Api,
    Rtmp,
    /// LL-HLS and HLS viewers (and WebRTC signalling).
    Viewer,
    /// WebRTC's TCP relay (OME's TcpRelay: TURN over TCP).
    WebRtcRelay,
}

/// A TCP listener to open: what it serves, where, and for TLS ports the
/// rustls config.
pub struct ListenerSpec {
    pub service: Service,
    pub addr: SocketAddr,
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// Everything the server listens on.
#[derive(Default)]
pub struct Listen {
    pub tcp: Vec<ListenerSpec>,
    /// MPEG-TS over UDP: one address per port.
    pub mpegts: Vec<SocketAddr>,
    /// How long an MPEG-TS port may be quiet before its stream ends.
    pub mpegts_quiet: Duration,
    /// The SRT listener's address.
    pub srt: Option<SocketAddr>,
    /// Its passphrase, when callers must encrypt.
    pub srt_crypto: Option<crate::srt::crypto::CryptoConfig>,
    /// SRT sockets from one address (0: no cap).
    pub srt_max_per_address: usize,
    /// WebRTC's ICE candidates: one UDP socket each.
    pub ice: Vec<IcePort>,
    /// WebRTC's TCP relay as signalling tells viewers (`turn:` URLs), and
    /// whether every viewer is told (`<TcpForce>`).
    pub relay_urls: Vec<String>,
    /// Relay ports offered at the public address once it is learnt.
    pub relay_public_ports: Vec<u16>,
    /// `<StunServer>` (host, port): where the public address is learnt.
    pub stun_server: Option<(String, u16)>,
    pub tcp_force: bool,
    /// WebRTC sessions at most (0: the default).
    pub webrtc_max_sessions: usize,
    /// WebRTC sessions from one address (`None`: a tenth of the most).
    pub webrtc_max_per_address: Option<usize>,
    /// Viewer-port connections from one address (0: no cap).
    pub viewer_max_per_address: usize,
}

/// One ICE socket: where it is bound and the address it is offered at
/// (its candidate). A NAT's outside address is offered while the socket
/// is bound on every interface; `offer: None` stands for the public
/// address, learnt from `<StunServer>` after start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcePort {
    pub bind: SocketAddr,
    pub offer: Option<SocketAddr>,
}

/// Binds every listener and port of `listen` as an endpoint of `endpoints`.
pub(crate) fn bind_all(
    poll: &Poll,
    listen: &Listen,
    endpoints: &mut TokenTable<Entry>,
    #[allow(unused_variables)] api: &mut crate::api::Api,
) -> io::Result<()> {
    for spec in &listen.tcp {
        // What it is (for a bind error: its config element) and what
        // the log says it serves.
        let (element, what) = match (spec.service, spec.tls.is_some()) {
            (Service::Api, false) => (
                "API server (<Bind><Managers><API><Port>)",
                "API server listening on http",
            ),
            (Service::Api, true) => (
                "API server (<Bind><Managers><API><TLSPort>)",
                "API server listening on https",
            ),
            (Service::Rtmp, false) => (
                "RTMP ingest (<Bind><Providers><RTMP><Port>)",
                "RTMP ingest listening on rtmp",
            ),
            (Service::Rtmp, true) => (
                "RTMPS ingest (<Bind><Providers><RTMP><TLSPort>)",
                "RTMPS ingest listening on rtmps",
            ),
            (Service::Viewer, false) => (
                "LL-HLS viewers (<Bind><Publishers><LLHLS><Port>)",
                "LL-HLS viewers served on http",
            ),
            (Service::Viewer, true) => (
                "LL-HLS viewers (<Bind><Publishers><LLHLS><TLSPort>)",
                "LL-HLS viewers served on https",
            ),
            (Service::WebRtcRelay, _) => (
                "WebRTC TCP relay (<IceCandidates><TcpRelay>)",
                "WebRTC TCP relay (TURN) listening on tcp",
            ),
        };
        let mut listener = bind_listener(spec.addr, element)?;
        crate::info!("{what}://{}", listener.local_addr()?);
        let token = endpoints.vacant_token();
        poll.registry()
            .register(&mut listener, token, Interest::READABLE)?;
        endpoints.insert(Entry::new(Box::new(Listener::new(
            spec.service,
            listener,
            spec.tls.clone(),
        ))));
    }
    for &addr in &listen.mpegts {
        let mut socket = bind_udp(addr, "MPEG-TS ingest (<Bind><Providers><MPEGTS><Port>)")?;
        let token = endpoints.vacant_token();
        poll.registry()
            .register(&mut socket, token, Interest::READABLE)?;
        crate::info!("MPEG-TS ingest listening on udp://{addr}");
        endpoints.insert(Entry::new(Box::new(TsPort::new(
            socket,
            addr.port(),
            listen.mpegts_quiet,
            token.0 as u64,
        ))));
    }
    if let Some(addr) = listen.srt {
        let mut socket = bind_udp(addr, "SRT ingest (<Bind><Providers><SRT><Port>)")?;
        let token = endpoints.vacant_token();
        poll.registry()
            .register(&mut socket, token, Interest::READABLE | Interest::WRITABLE)?;
        crate::info!("SRT ingest listening on srt://{addr}");
        endpoints.insert(Entry::new(Box::new(SrtIngest::new(
            socket,
            token.0 as u64,
            listen.srt_crypto.clone(),
            listen.srt_max_per_address,
            Instant::now(),
        ))));
    }
    #[cfg(feature = "webrtc")]
    {
        let mut ports = Vec::new();
        let mut shown = Vec::new();
        for (i, port) in listen.ice.iter().enumerate() {
            let mut socket = bind_udp(
                port.bind,
                "WebRTC ICE candidate (<IceCandidates><IceCandidate>)",
            )?;
            let token = endpoints.vacant_token();
            poll.registry().register(
                &mut socket,
                token,
                Interest::READABLE | Interest::WRITABLE,
            )?;
            endpoints.insert(Entry::new(Box::new(super::webrtc_io::IceSocket::new(
                socket, port.bind, i,
            ))));
            // Until the public address is learnt: the unspecified IP.
            let offer = port.offer.unwrap_or(port.bind);
            shown.push(match port.offer {
                Some(a) if a == port.bind => a.to_string(),
                Some(a) => format!("{a} (bound on {})", port.bind),
                None => format!(
                    "${{PublicIP}}:{} (bound on {})",
                    port.bind.port(),
                    port.bind
                ),
            });
            ports.push((offer, token.0));
        }
        if !shown.is_empty() {
            crate::info!("WebRTC ICE candidates on udp: {}", shown.join(", "));
        }
        api.webrtc.set_ports(ports);
        api.webrtc.relay_urls = listen.relay_urls.clone();
        api.webrtc.relay_public_ports = listen.relay_public_ports.clone();
        let asks =
            listen.ice.iter().any(|p| p.offer.is_none()) || !listen.relay_public_ports.is_empty();
        if let (Some((host, port)), true) = (&listen.stun_server, asks) {
            let mut socket = bind_udp(
                SocketAddr::from(([0, 0, 0, 0], 0)),
                "the public address query (<StunServer>)",
            )?;
            let token = endpoints.vacant_token();
            poll.registry()
                .register(&mut socket, token, Interest::READABLE)?;
            endpoints.insert(Entry::new(Box::new(
                super::public_address::PublicAddress::new(
                    socket,
                    host.clone(),
                    *port,
                    Instant::now(),
                ),
            )));
        }
        api.webrtc.tcp_force = listen.tcp_force;
        if listen.webrtc_max_sessions > 0 {
            api.webrtc.max_sessions = listen.webrtc_max_sessions;
        }
        api.webrtc.max_per_address = listen
            .webrtc_max_per_address
            .unwrap_or(crate::webrtc::default_share(api.webrtc.max_sessions));
    }
    Ok(())
}

/// A non-blocking UDP socket with a large receive buffer (ingest bursts);
/// an error names `what` it is for (its config element) and the address.
fn bind_udp(addr: SocketAddr, what: &str) -> io::Result<UdpSocket> {
    bind_udp_socket(addr)
        .map_err(|e| io::Error::new(e.kind(), format!("{what} on {addr}/udp: {e}")))
}

fn bind_udp_socket(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    socket.set_reuse_address(true)?;
    let _ = socket.set_recv_buffer_size(4 * 1024 * 1024);
    socket.bind(&addr.into())?;
    socket.set_nonblocking(true)?;
    Ok(UdpSocket::from_std(socket.into()))
}

/// A non-blocking listener with SO_REUSEADDR and a deep backlog; an error
/// names `what` it is for (its config element) and the address.
fn bind_listener(addr: SocketAddr, what: &str) -> io::Result<TcpListener> {
    bind_tcp_listener(addr).map_err(|e| io::Error::new(e.kind(), format!("{what} on {addr}: {e}")))
}

fn bind_tcp_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        let _ = socket.set_only_v6(false);
    }
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    socket.set_nonblocking(true)?;
    Ok(TcpListener::from_std(socket.into()))
}
