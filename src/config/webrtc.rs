//! WebRTC's parts of the config: `<Bind>`'s `<WebRTC>` (signalling ports,
//! ICE candidates, the TCP relay, STUN) and an application's WebRTC
//! provider and publisher.

use super::{dom, Walker, WebRtcBind, PUBLIC_IP};
use dom::Element;
use std::net::IpAddr;

impl Walker<'_> {
    /// `<Bind><Publishers><WebRTC>`.
    pub(super) fn webrtc_bind(&mut self, el: &Element, path: &str) -> WebRtcBind {
        let mut bind = WebRtcBind {
            max_sessions: 1000,
            ..WebRtcBind::default()
        };
        self.children(el, path, &["IceServers"], &[], |w, c, p| {
            match c.name.as_str() {
                "MaxSessions" => {
                    if let Some(n) = w.number::<u32>(c, p) {
                        if n == 0 || n > 100_000 {
                            w.error(c, p, "must be 1 to 100000");
                        } else {
                            bind.max_sessions = n as usize;
                        }
                    }
                }
                "MaxSessionsPerAddress" => {
                    if let Some(n) = w.number::<u32>(c, p) {
                        bind.max_sessions_per_address = Some(n as usize);
                    }
                }
                "Signalling" => (bind.port, bind.tls_port) = w.tcp_ports(c, p),
                "IceCandidates" => w.children(
                    c,
                    p,
                    &[
                        "TcpRelayWorkerCount",
                        "TcpIceWorkerCount",
                        "IceWorkerCount",
                        "EnableLinkLocalAddress",
                        "DefaultTransport",
                    ],
                    &["IceCandidate", "TcpRelay"],
                    |w, c, p| {
                        if c.name == "TcpRelay" {
                            if let Some(t) = w.text(c, p) {
                                match tcp_relay(&t) {
                                    Ok(r) => {
                                        if r.0 == PUBLIC_IP {
                                            w.uses_public_ip(c, p);
                                        }
                                        bind.relays.push(r)
                                    }
                                    Err(e) => w.error(c, p, e),
                                }
                            }
                            return true;
                        }
                        if c.name == "TcpForce" || c.name == "TcpRelayForce" {
                            if let Some(on) = w.bool_text(c, p) {
                                bind.tcp_force = on;
                            }
                            return true;
                        }
                        if c.name != "IceCandidate" {
                            return false;
                        }
                        if let Some(t) = w.text(c, p) {
                            match ice_candidate(&t) {
                                Ok(Some(cand)) => {
                                    if cand.0 == PUBLIC_IP {
                                        w.uses_public_ip(c, p);
                                    }
                                    bind.candidates.push(cand)
                                }
                                Ok(None) if !t.contains('/') => w.warn(
                                    c,
                                    p,
                                    format!(
                                        "[{}] names no transport, which OME takes as TCP; kiln has no \
                                         ICE-TCP (its TcpRelay carries TCP), so it is ignored: write \
                                         [{}/udp] for UDP",
                                        t.trim(),
                                        t.trim()
                                    ),
                                ),
                                Ok(None) => w.warn(
                                    c,
                                    p,
                                    "ICE-TCP candidates are not supported by kiln (UDP only); ignored",
                                ),
                                Err(e) => w.error(c, p, e),
                            }
                        }
                        true
                    },
                ),
                _ => return false,
            }
            true
        });
        match el.children.iter().find(|c| c.name == "IceCandidates") {
            // OME's default.
            None if bind.candidates.is_empty() => bind.candidates.push(("*".into(), vec![10000])),
            Some(ice) if bind.candidates.is_empty() => self.off(
                ice,
                &format!("{path}/IceCandidates"),
                "WebRTC is off: no UDP <IceCandidate> is left (kiln offers ICE over UDP only)",
            ),
            _ => {}
        }
        bind
    }

    /// A WebRTC `<Timeout>` (ms, publishers' or viewers'): 1 s to 10
    /// minutes; outside that an error at its place.
    pub(super) fn webrtc_timeout(&mut self, c: &Element, p: &str) -> Option<u64> {
        let ms = self.number::<u64>(c, p)?;
        if (1000..=600_000).contains(&ms) {
            Some(ms)
        } else {
            self.error(c, p, "must be 1000 to 600000 (ms)");
            None
        }
    }

    /// An application's `<Providers><WebRTC>`.
    pub(super) fn webrtc_ingest_app(
        &mut self,
        el: &Element,
        path: &str,
    ) -> crate::state::app::WebRtcIngestSpec {
        let mut spec = crate::state::app::WebRtcIngestSpec::default();
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "Timeout" => spec.timeout = w.webrtc_timeout(c, p).or(spec.timeout),
                "CrossDomains" => w.warn(
                    c,
                    p,
                    "kiln answers WHIP's CORS for every origin (Access-Control-Allow-Origin: *)",
                ),
                _ => return false,
            }
            true
        });
        spec
    }

    /// An application's `<Publishers><WebRTC>`.
    pub(super) fn webrtc_app(&mut self, el: &Element, path: &str) -> crate::state::app::WebRtcSpec {
        let mut spec = crate::state::app::WebRtcSpec::default();
        self.children(
            el,
            path,
            &[
                "Ulpfec",
                "JitterBuffer",
                "PlayoutDelay",
                "BandwidthEstimation",
                "CreateDefaultPlaylist",
                "MaxConnection",
            ],
            &[],
            |w, c, p| {
                match c.name.as_str() {
                    "Timeout" => spec.timeout = w.webrtc_timeout(c, p).or(spec.timeout),
                    "Rtx" => {
                        // str0m answers NACKs from its packet history (RTX
                        // when the browser offers it) whatever this says.
                        if let Some(on) = w.bool_text(c, p) {
                            if !on {
                                w.warn(c, p, "kiln always answers NACKs (RTX when the viewer offers it); false is ignored");
                            }
                            spec.rtx = Some(on);
                        }
                    }
                    _ => return false,
                }
                true
            },
        );
        spec
    }
}

/// One `<IceCandidate>`: `host:port[-port][/udp|/tcp]`. `Ok(None)`: a TCP
/// candidate (OME's default when the suffix is missing), which kiln does
/// not serve.
pub(super) fn ice_candidate(text: &str) -> Result<Option<(String, Vec<u16>)>, String> {
    let t = text.trim();
    let (addr, proto) = match t.rsplit_once('/') {
        Some((a, p)) if p.eq_ignore_ascii_case("udp") => (a, "udp"),
        Some((a, p)) if p.eq_ignore_ascii_case("tcp") => (a, "tcp"),
        Some(_) => return Err(format!("[{t}] must be host:port[-port]/udp")),
        None => (t, "tcp"),
    };
    let Some((host, ports)) = addr.rsplit_once(':') else {
        return Err(format!("[{t}] must be host:port[-port]/udp"));
    };
    if proto == "tcp" {
        return Ok(None);
    }
    let host = candidate_host(host)?;
    let (ports, _) = crate::ports::parse_ports(ports)?;
    if ports.len() > 64 {
        return Err(format!("[{t}] names more than 64 ports"));
    }
    Ok(Some((host.to_string(), ports)))
}

/// The host of an `<IceCandidate>` or `<TcpRelay>`: `*`, `[::]`,
/// `${PublicIP}` or an IP address (on this machine or not: a NAT's
/// outside address is offered as written and bound on every interface).
pub(super) fn candidate_host(host: &str) -> Result<&str, String> {
    let host = host.trim();
    if host == "*"
        || host == "[::]"
        || host == PUBLIC_IP
        || host
            .trim_matches(|c| c == '[' || c == ']')
            .parse::<IpAddr>()
            .is_ok()
    {
        Ok(host)
    } else {
        Err(format!(
            "[{host}] must be *, [::], {PUBLIC_IP} or an IP address"
        ))
    }
}

/// `<StunServer>`: `host[:port]` (3478 when the port is left out).
pub(super) fn stun_server(text: &str) -> Result<(String, u16), String> {
    let t = text.trim();
    let (host, port) = match t.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') && !p.contains(']') => (h, Some(p)),
        _ => (t, None),
    };
    let host = host.trim_matches(|c| c == '[' || c == ']');
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(format!("[{t}] must be host:port"));
    }
    let port = match port {
        Some(p) => p
            .trim()
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("[{t}] must be host:port"))?,
        None => 3478,
    };
    Ok((host.to_string(), port))
}

/// One `<TcpRelay>`: `host:port` (host as for an ICE candidate).
pub(super) fn tcp_relay(text: &str) -> Result<(String, u16), String> {
    let t = text.trim();
    let Some((host, port)) = t.rsplit_once(':') else {
        return Err(format!("[{t}] must be host:port"));
    };
    let host = candidate_host(host)?;
    let port = port
        .trim()
        .parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("[{t}] must be host:port"))?;
    Ok((host.to_string(), port))
}
