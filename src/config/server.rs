//! `<Server>` itself: its `<Bind>` (ports of the managers, providers and
//! publishers), `<Managers>` (the API's host, TLS and limits) and the SRT
//! options they share.

use super::{
    config_dir, default_state_file, dom, webrtc::stun_server, ApiConfig, ApiLimits, ApiPorts,
    Config, ConfigError, ManagersSection, ProviderBinds, Walker, WebRtcBind, SUPPORTED_VERSION,
    UNSUPPORTED_BIND, UNSUPPORTED_BIND_PROVIDERS, UNSUPPORTED_BIND_PUBLISHERS, UNSUPPORTED_SERVER,
    UNSUPPORTED_WORKERS,
};
use crate::state::vhost::TlsSpec;
use dom::Element;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

impl Walker<'_> {
    pub(super) fn server(&mut self, root: &Element) -> Config {
        let path = "Server";
        let mut config = Config {
            file: self.file.clone(),
            name: None,
            ip: IpAddr::from([0, 0, 0, 0]),
            api: None,
            providers: ProviderBinds::default(),
            vhosts: Vec::new(),
            state_file: default_state_file(&self.file),
            stun_server: None,
            disk_budget: None,
        };
        if root.name != "Server" {
            self.error(
                root,
                &root.name,
                format!("the root element must be <Server>, found <{}>", root.name),
            );
            return config;
        }
        match root.attribute("version") {
            Some(SUPPORTED_VERSION) => {}
            Some(v) => {
                self.error(
                    root,
                    path,
                    format!("configuration version {v} is not supported; kiln reads version {SUPPORTED_VERSION}"),
                );
                return config;
            }
            None => {
                self.error(
                    root,
                    path,
                    format!(
                        "the version attribute is missing; kiln reads version {SUPPORTED_VERSION}"
                    ),
                );
                return config;
            }
        }
        let mut api_bind: Option<(&Element, Option<u16>, Option<u16>)> = None;
        let mut managers: Option<(&Element, ManagersSection)> = None;
        self.children(root, path, UNSUPPORTED_SERVER, &[], |w, c, p| {
            match c.name.as_str() {
                "Name" => config.name = w.nonempty_text(c, p),
                "IP" => {
                    if let Some(t) = w.nonempty_text(c, p) {
                        if t == "*" {
                            config.ip = IpAddr::from([0, 0, 0, 0]);
                        } else if let Ok(ip) = t.parse::<IpAddr>() {
                            config.ip = ip;
                        } else {
                            w.error(c, p, format!("[{t}] is not an IP address or *"));
                        }
                    }
                }
                "StateFile" => {
                    if let Some(t) = w.nonempty_text(c, p) {
                        let f = PathBuf::from(t);
                        config.state_file = if f.is_relative() {
                            config_dir(&w.file).join(f)
                        } else {
                            f
                        };
                    }
                }
                "DiskBudget" => config.disk_budget = Some(w.disk_budget(c, p)),
                "StunServer" => {
                    if let Some(t) = w.nonempty_text(c, p) {
                        match stun_server(&t) {
                            Ok(server) => config.stun_server = Some(server),
                            Err(e) => w.error(c, p, e),
                        }
                    }
                }
                "Bind" => {
                    let (api, providers) = w.bind(c, p);
                    api_bind = api.map(|(a, b)| (c, a, b));
                    config.providers = providers;
                }
                "Managers" => managers = Some((c, w.managers(c, p))),
                "VirtualHosts" => config.vhosts = w.vhosts(c, p),
                _ => return false,
            }
            true
        });
        // The API server is on when <Bind><Managers><API> is present.
        if let Some((bind_el, port, tls_port)) = api_bind {
            let bpath = "Server/Bind/Managers/API";
            // A <Port> whose text was wrong (an unset ${env:}) has its own error.
            let named = bind_el
                .children
                .iter()
                .filter(|m| m.name == "Managers")
                .flat_map(|m| &m.children)
                .filter(|a| a.name == "API")
                .flat_map(|a| &a.children)
                .any(|p| p.name == "Port" || p.name == "TLSPort");
            if port.is_none() && tls_port.is_none() && !named {
                self.error(bind_el, bpath, "neither <Port> nor <TLSPort> is set");
            }
            let section = managers
                .as_ref()
                .map(|(_, m)| m.clone())
                .unwrap_or_default();
            let at = managers.map(|(el, _)| el).unwrap_or(root);
            if section.access_token.is_none() && !section.access_token_written {
                self.error(
                    at,
                    "Server/Managers/API/AccessToken",
                    "required when the API server is enabled",
                );
            }
            if tls_port.is_some() && section.tls.is_none() {
                self.error(
                    bind_el,
                    bpath,
                    "<TLSPort> needs a certificate in <Managers><Host><TLS>",
                );
            }
            config.api = Some(ApiConfig {
                port,
                tls_port,
                access_token: section.access_token.unwrap_or_default(),
                cross_domains: section.cross_domains,
                host_names: section.host_names,
                tls: section.tls,
                tls_line: section.tls_line,
                tls_column: section.tls_column,
                limits: section.limits,
            });
        }
        // Ports must not collide.
        let mut tcp: Vec<(u16, &str)> = Vec::new();
        if let Some(api) = &config.api {
            tcp.extend(api.port.map(|p| (p, "API Port")));
            tcp.extend(api.tls_port.map(|p| (p, "API TLSPort")));
        }
        tcp.extend(config.providers.rtmp_port.map(|p| (p, "RTMP Port")));
        tcp.extend(config.providers.rtmp_tls_port.map(|p| (p, "RTMP TLSPort")));
        tcp.extend(config.providers.llhls_port.map(|p| (p, "LLHLS Port")));
        tcp.extend(
            config
                .providers
                .llhls_tls_port
                .map(|p| (p, "LLHLS TLSPort")),
        );
        if let Some(w) = &config.providers.webrtc {
            // The signalling port may be LL-HLS's own (one listener serves both).
            let llhls = [config.providers.llhls_port, config.providers.llhls_tls_port];
            for (port, what) in [
                (w.port, "WebRTC Signalling Port"),
                (w.tls_port, "WebRTC Signalling TLSPort"),
            ] {
                if let Some(p) = port.filter(|p| !llhls.contains(&Some(*p))) {
                    tcp.push((p, what));
                }
            }
            for (_, p) in &w.relays {
                tcp.push((*p, "WebRTC TcpRelay"));
            }
            let mut udp: Vec<u16> = config.providers.mpegts_ports.clone();
            udp.extend(config.providers.srt_port);
            for (_, ports) in &w.candidates {
                if let Some(p) = ports.iter().find(|p| udp.contains(p)) {
                    let msg =
                        format!("WebRTC IceCandidate UDP port {p} is also an SRT or MPEGTS port");
                    self.error(root, "Server/Bind/Publishers/WebRTC", msg);
                }
            }
        }
        for i in 0..tcp.len() {
            for j in 0..i {
                if tcp[i].0 == tcp[j].0 {
                    let msg = format!("{} and {} are both {}", tcp[j].1, tcp[i].1, tcp[i].0);
                    self.error(root, "Server/Bind", msg);
                }
            }
        }
        if let Some(srt) = config.providers.srt_port {
            if config.providers.mpegts_ports.contains(&srt) {
                self.error(
                    root,
                    "Server/Bind/Providers",
                    format!("SRT and MPEGTS both use UDP port {srt}"),
                );
            }
        }
        // Virtual host names are unique.
        for i in 0..config.vhosts.len() {
            if config.vhosts[..i]
                .iter()
                .any(|v| v.spec.name == config.vhosts[i].spec.name)
            {
                let v = &config.vhosts[i];
                self.errors.push(ConfigError {
                    file: self.file.clone(),
                    line: v.line,
                    column: 1,
                    path: "Server/VirtualHosts/VirtualHost/Name".into(),
                    message: format!("virtual host [{}] is declared twice", v.spec.name),
                });
            }
        }
        config
    }

    /// `<Bind>`: the API's (Port, TLSPort) when `<Managers><API>` is
    /// present, and the providers' ports.
    pub(super) fn bind(&mut self, el: &Element, path: &str) -> (Option<ApiPorts>, ProviderBinds) {
        let mut api = None;
        let mut providers = ProviderBinds::default();
        // `<Providers><WebRTC>`: publishers' signalling and candidates.
        let mut ingest_webrtc: Option<(WebRtcBind, Element, String)> = None;
        self.children(el, path, UNSUPPORTED_BIND, &[], |w, c, p| {
            match c.name.as_str() {
                "Managers" => {
                    w.children(c, p, &[], &[], |w, c, p| {
                        if c.name != "API" {
                            return false;
                        }
                        api = Some(w.tcp_ports(c, p));
                        true
                    });
                }
                "Publishers" => {
                    w.children(c, p, UNSUPPORTED_BIND_PUBLISHERS, &[], |w, c, p| {
                        if c.name == "WebRTC" {
                            providers.webrtc = Some(w.webrtc_bind(c, p));
                            return true;
                        }
                        if c.name != "LLHLS" {
                            return false;
                        }
                        w.children(c, p, UNSUPPORTED_WORKERS, &[], |w, c, p| {
                            match c.name.as_str() {
                                "Port" => providers.llhls_port = w.tcp_port(c, p),
                                "TLSPort" => providers.llhls_tls_port = w.tcp_port(c, p),
                                "MaxConnectionsPerAddress" => {
                                    if let Some(n) = w.number::<u32>(c, p) {
                                        providers.viewer_max_per_address = n as usize;
                                    }
                                }
                                _ => return false,
                            }
                            true
                        });
                        true
                    });
                }
                "Providers" => {
                    w.children(c, p, UNSUPPORTED_BIND_PROVIDERS, &[], |w, c, p| {
                        match c.name.as_str() {
                            "RTMP" => {
                                (providers.rtmp_port, providers.rtmp_tls_port) = w.tcp_ports(c, p)
                            }
                            "SRT" => w.children(c, p, UNSUPPORTED_WORKERS, &[], |w, c, p| {
                                match c.name.as_str() {
                                    "Port" => providers.srt_port = w.udp_port(c, p),
                                    "Options" => providers.srt_crypto = w.srt_options(c, p),
                                    "MaxConnectionsPerAddress" => {
                                        if let Some(n) = w.number::<u32>(c, p) {
                                            providers.srt_max_per_address = n as usize;
                                        }
                                    }
                                    _ => return false,
                                }
                                true
                            }),
                            "WebRTC" => {
                                ingest_webrtc =
                                    Some((w.webrtc_bind(c, p), c.clone(), p.to_string()))
                            }
                            "MPEGTS" => w.children(c, p, UNSUPPORTED_WORKERS, &[], |w, c, p| {
                                match c.name.as_str() {
                                    "Port" => providers.mpegts_ports = w.udp_ports(c, p),
                                    "StreamTimeoutMs" => {
                                        if let Some(ms) = w.number::<u64>(c, p) {
                                            if ms == 0 || ms > 86_400_000 {
                                                w.error(c, p, "must be 1 to 86400000 (a day)");
                                            } else {
                                                providers.mpegts_quiet = Duration::from_millis(ms);
                                            }
                                        }
                                    }
                                    _ => return false,
                                }
                                true
                            }),
                            _ => return false,
                        }
                        true
                    });
                }
                _ => return false,
            }
            true
        });
        // One WebRTC stack serves publishers and viewers: OME's usual
        // config gives both binds the same ports; different ones cannot be
        // both, and the viewers' win.
        if let Some((bind, el, path)) = ingest_webrtc {
            match &providers.webrtc {
                None => providers.webrtc = Some(bind),
                Some(b) if *b == bind => {}
                Some(_) => self.warn(
                    &el,
                    &path,
                    "kiln has one WebRTC stack for publishers and viewers: it uses <Bind><Publishers><WebRTC>'s signalling ports and ICE candidates, not these",
                ),
            }
        }
        (api, providers)
    }

    pub(super) fn managers(&mut self, el: &Element, path: &str) -> ManagersSection {
        let mut m = ManagersSection::default();
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "Host" => w.children(c, p, &[], &[], |w, c, p| {
                    match c.name.as_str() {
                        "Names" => m.host_names = w.names_list(c, p),
                        "TLS" => {
                            m.tls = w.tls(c, p);
                            m.tls_line = c.line;
                            m.tls_column = c.column;
                        }
                        _ => return false,
                    }
                    true
                }),
                "API" => w.children(c, p, &[], &[], |w, c, p| {
                    match c.name.as_str() {
                        "AccessToken" => {
                            // Its own errors (empty, an unset ${env:}) are
                            // reported at its own line, once.
                            m.access_token_written = true;
                            m.access_token = w.nonempty_text(c, p);
                        }
                        "CrossDomains" => {
                            m.cross_domains =
                                w.repeated(c, p, &[], "Url", |w, c, p| w.nonempty_text(c, p))
                        }
                        "Limits" => m.limits = w.limits(c, p),
                        _ => return false,
                    }
                    true
                }),
                _ => return false,
            }
            true
        });
        m
    }

    /// OME's `<SRT><Options><Option><Key>SRTO_...</Key><Value>`: the
    /// passphrase and key length are applied; other libsrt options are
    /// warned about and ignored.
    pub(super) fn srt_options(
        &mut self,
        el: &Element,
        path: &str,
    ) -> Option<crate::srt::crypto::CryptoConfig> {
        let (mut passphrase, mut key_len, mut key_len_at) = (None, 0usize, None);
        self.children(el, path, &[], &["Option"], |w, c, p| {
            if c.name != "Option" {
                return false;
            }
            let (mut key, mut value) = (None, None);
            w.children(c, p, &[], &[], |w, c, p| {
                match c.name.as_str() {
                    "Key" => key = w.text(c, p),
                    "Value" => value = w.text(c, p),
                    _ => return false,
                }
                true
            });
            match (key.as_deref(), value) {
                (Some("SRTO_PASSPHRASE"), Some(v)) => passphrase = Some((v, c.line)),
                (Some("SRTO_PBKEYLEN"), Some(v)) => match v.trim().parse::<usize>() {
                    Ok(n @ (0 | 16 | 24 | 32)) => {
                        key_len = n;
                        key_len_at = Some(c.line);
                    }
                    _ => w.error(
                        c,
                        p,
                        format!("SRTO_PBKEYLEN must be 16, 24 or 32 (got [{v}])"),
                    ),
                },
                (Some(k), _) if k.starts_with("SRTO_") => w.warn(
                    c,
                    p,
                    format!("SRT option {k} is not applied by kiln; ignored"),
                ),
                (k, _) => w.error(
                    c,
                    p,
                    format!(
                        "an <Option> needs <Key>SRTO_...</Key> and <Value> (got key [{}])",
                        k.unwrap_or("")
                    ),
                ),
            }
            true
        });
        let Some((passphrase, _)) = passphrase else {
            if key_len_at.is_some() {
                self.warn(
                    el,
                    path,
                    "SRTO_PBKEYLEN without SRTO_PASSPHRASE: no encryption",
                );
            }
            return None;
        };
        match crate::srt::crypto::CryptoConfig::new(&passphrase, key_len) {
            Ok(c) => Some(c),
            Err(e) => {
                self.error(el, path, format!("SRTO_PASSPHRASE: {e}"));
                None
            }
        }
    }

    pub(super) fn limits(&mut self, el: &Element, path: &str) -> ApiLimits {
        let mut l = ApiLimits::default();
        self.children(el, path, &[], &[], |w, c, p| {
            // Bounded: sizes are added together and times become deadlines.
            let positive = |w: &mut Walker, v: Option<u64>| -> Option<u64> {
                match v {
                    Some(0) => {
                        w.error(c, p, "must be greater than 0");
                        None
                    }
                    Some(n) if n > 1 << 30 => {
                        w.error(c, p, "must be at most 1073741824");
                        None
                    }
                    v => v,
                }
            };
            match c.name.as_str() {
                "MaxHeadBytes" => {
                    let v = w.number::<u64>(c, p);
                    if let Some(v) = positive(w, v) {
                        l.max_head_bytes = v.max(1024) as usize;
                    }
                }
                "MaxBodyBytes" => {
                    let v = w.number::<u64>(c, p);
                    if let Some(v) = positive(w, v) {
                        l.max_body_bytes = v as usize;
                    }
                }
                "HeadTimeoutMs" => {
                    let v = w.number::<u64>(c, p);
                    if let Some(v) = positive(w, v) {
                        l.head_timeout = Duration::from_millis(v);
                    }
                }
                "IdleTimeoutMs" => {
                    let v = w.number::<u64>(c, p);
                    if let Some(v) = positive(w, v) {
                        l.idle_timeout = Duration::from_millis(v);
                    }
                }
                "MaxConnections" => {
                    let v = w.number::<u64>(c, p);
                    if let Some(v) = positive(w, v) {
                        l.max_connections = v as usize;
                    }
                }
                "MaxConnectionsPerAddress" => {
                    if let Some(v) = w.number::<u64>(c, p) {
                        l.max_connections_per_address = v as usize;
                    }
                }
                "MaxVirtualHosts" => {
                    let v = w.number::<u64>(c, p);
                    if let Some(v) = positive(w, v) {
                        l.max_vhosts = v as usize;
                    }
                }
                "MaxPushTasks" => {
                    let v = w.number::<u64>(c, p);
                    if let Some(v) = positive(w, v) {
                        l.max_push_tasks = v as usize;
                    }
                }
                _ => return false,
            }
            true
        });
        l
    }

    pub(super) fn tls(&mut self, el: &Element, path: &str) -> Option<TlsSpec> {
        let (mut cert, mut key, mut chain) = (None, None, None);
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "CertPath" => cert = w.nonempty_text(c, p),
                "KeyPath" => key = w.nonempty_text(c, p),
                "ChainCertPath" => chain = w.nonempty_text(c, p),
                _ => return false,
            }
            true
        });
        match (cert, key) {
            (Some(cert_path), Some(key_path)) => Some(TlsSpec {
                cert_path: self.resolve_path(&cert_path),
                key_path: self.resolve_path(&key_path),
                chain_cert_path: chain.map(|c| self.resolve_path(&c)),
            }),
            (cert, _) => {
                let missing = if cert.is_none() {
                    "CertPath"
                } else {
                    "KeyPath"
                };
                self.error(el, path, format!("<{missing}> is required"));
                None
            }
        }
    }
}
