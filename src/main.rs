//! The `kiln` command: parse the command line, load and check the
//! configuration, certificates and state file, then run the poll loop.
//! Every start-up error is printed and exits 1 before anything is bound.

use kiln::api::Api;
use kiln::config::{self, Config, ConfigError};
use kiln::log::{self, Level};
use kiln::server::{IcePort, Listen, ListenerSpec, Server, Service};
use kiln::state::store::StateStore;
use kiln::tls::{self, ApiCertResolver, VhostCert, VhostCertResolver};
use kiln::{error, info, warn};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

const HELP: &str = "\
kiln: a single-threaded live streaming relay with an OvenMediaEngine-compatible API

USAGE:
    kiln -c FILE                  run the server with the configuration FILE
    kiln --check-config -c FILE   check FILE (and the files it names), then exit
    kiln --check-config --strict -c FILE
                                  the same, but any warning fails the check
    kiln sign-url [--policy-key K] [--signature-key K] SECRET URL POLICY
                                  print URL signed with OME's SignedPolicy
                                  (POLICY is JSON with url_expire in epoch ms;
                                  keys default to policy and signature)
    kiln --version                print the version
    kiln --help                   print this help

OPTIONS:
    -c, --config FILE     the server.xml to use
        --check-config    validate and exit: 0 when good, 1 with the errors
        --strict          with --check-config: exit 1 on warnings too
        --log-level LVL   error, warn, info (default), debug or trace;
                          the environment variable KILN_LOG does the same
";

struct Args {
    config: Option<PathBuf>,
    check: bool,
    strict: bool,
    log_level: Option<Level>,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut args = Args {
        config: None,
        check: false,
        strict: false,
        log_level: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => {
                print!("{HELP}");
                return Ok(None);
            }
            "-V" | "--version" => {
                println!("kiln {}", env!("CARGO_PKG_VERSION"));
                return Ok(None);
            }
            "-c" | "--config" => {
                args.config = Some(it.next().ok_or("-c needs a file")?.into());
            }
            "--check-config" => args.check = true,
            "--strict" => args.strict = true,
            "--log-level" => {
                let v = it.next().ok_or("--log-level needs a level")?;
                args.log_level = Some(Level::parse(&v).ok_or(format!("unknown log level [{v}]"))?);
            }
            other => {
                if let Some(v) = other.strip_prefix("--config=") {
                    args.config = Some(v.into());
                } else if let Some(v) = other.strip_prefix("--log-level=") {
                    args.log_level =
                        Some(Level::parse(v).ok_or(format!("unknown log level [{v}]"))?);
                } else {
                    return Err(format!("unknown argument [{other}]; see kiln --help"));
                }
            }
        }
    }
    Ok(Some(args))
}

/// `kiln sign-url`: a signed URL, as OME's generator makes it.
fn sign_url(args: &[String]) -> ExitCode {
    let usage = "usage: kiln sign-url [--policy-key K] [--signature-key K] SECRET URL POLICY_JSON";
    let (mut policy_key, mut signature_key) = ("policy".to_string(), "signature".to_string());
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--policy-key" => policy_key = it.next().cloned().unwrap_or_default(),
            "--signature-key" => signature_key = it.next().cloned().unwrap_or_default(),
            _ => rest.push(a.clone()),
        }
    }
    let [secret, url, policy] = rest.as_slice() else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    if policy_key.is_empty() || signature_key.is_empty() {
        eprintln!("{usage}");
        return ExitCode::from(2);
    }
    if serde_json::from_str::<serde_json::Value>(policy)
        .ok()
        .and_then(|v| v.get("url_expire")?.as_u64())
        .is_none()
    {
        eprintln!("kiln: POLICY must be a JSON object with url_expire (epoch milliseconds)");
        return ExitCode::from(2);
    }
    // Sign what the verifier checks: the URL with its port.
    let url = match kiln::admission::policy::with_port(url) {
        Ok(u) => u,
        Err(why) => {
            eprintln!("kiln: cannot sign {why}");
            return ExitCode::from(2);
        }
    };
    let keys = kiln::admission::policy::PolicyKeys {
        policy_key: &policy_key,
        signature_key: &signature_key,
        secret,
    };
    println!("{}", kiln::admission::policy::sign_url(&url, keys, policy));
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let all: Vec<String> = std::env::args().skip(1).collect();
    if all.first().map(String::as_str) == Some("sign-url") {
        return sign_url(&all[1..]);
    }
    let args = match parse_args() {
        Ok(Some(a)) => a,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kiln: {e}");
            return ExitCode::from(2);
        }
    };
    let offset = kiln::sys::local_utc_offset_seconds(kiln::clock::unix_millis_now() / 1000);
    log::set_utc_offset(offset);
    let env_level = std::env::var("KILN_LOG")
        .ok()
        .and_then(|v| Level::parse(&v));
    log::set_level(args.log_level.or(env_level).unwrap_or(Level::Info));

    let Some(file) = args.config.clone() else {
        eprintln!("kiln: no configuration file; use -c FILE (see kiln --help)");
        return ExitCode::from(2);
    };
    if args.strict && !args.check {
        eprintln!("kiln: --strict goes with --check-config");
        return ExitCode::from(2);
    }
    let check = args.check.then_some(args.strict);
    match start(&file, check, offset) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            // One log line per error (a line never holds a newline).
            for line in msg.lines() {
                error!("{line}");
            }
            ExitCode::from(1)
        }
    }
}

/// `check`: `None` to run, `Some(strict)` to check the configuration and
/// exit (`strict`: any warning fails).
fn start(file: &Path, check: Option<bool>, offset: i32) -> Result<(), String> {
    let loaded = config::load(file).map_err(|e| format!("configuration errors:\n{e}"))?;
    for w in &loaded.warnings {
        warn!("{w}");
    }
    if check.is_some() && !loaded.off.is_empty() {
        let off: Vec<String> = loaded.off.iter().map(|e| e.to_string()).collect();
        return Err(format!(
            "configuration leaves parts off:\n{}",
            off.join("\n")
        ));
    }
    for e in &loaded.off {
        error!("{e}");
    }
    let config = loaded.config;
    let certs = load_certificates(&config);
    let mut store = StateStore::new(config.state_file.clone(), &kiln::api::TASK_KINDS);
    let saved = store.load().map_err(|e| e.to_string())?;
    if let Some(strict) = check {
        for w in &certs.failed {
            warn!("{}", w.error);
        }
        let warnings = loaded.warnings.len() + certs.failed.len();
        if strict && warnings > 0 {
            return Err(format!(
                "{}: {warnings} warning(s); --strict fails on any",
                file.display()
            ));
        }
        println!("{}: configuration is valid", file.display());
        return Ok(());
    }
    // DECISIONS 1: a certificate that cannot be loaded does not stop kiln;
    // its port is bound and refuses handshakes until a reload succeeds.
    for f in &certs.failed {
        error!(
            "{}: {} refuses TLS handshakes until a reload succeeds",
            f.error, f.ports
        );
    }

    match kiln::sys::raise_nofile_limit() {
        Ok((old, new)) if new > old => info!("open files limit raised from {old} to {new}"),
        Ok(_) => {}
        Err(e) => warn!("cannot raise the open files limit: {e}"),
    }

    let registry = config.registry();
    let vhost_certs = Arc::new(VhostCertResolver::default());
    vhost_certs.install(certs.vhosts);
    if let Some(saved) = &saved {
        for spec in &saved.vhosts {
            if let Some(tls_spec) = &spec.host.tls {
                match tls::load_certified_key(tls_spec) {
                    Ok(key) => vhost_certs.install(vec![VhostCert {
                        vhost: spec.name.clone(),
                        names: spec.host.names.clone(),
                        key,
                    }]),
                    Err(e) => warn!(
                        "virtual host [{}] from the state file: certificate not loaded: {e}",
                        spec.name
                    ),
                }
            }
        }
    }

    let mut listen = Listen {
        mpegts_quiet: config.providers.mpegts_quiet,
        ..Listen::default()
    };
    // Plain and TLS ports of the media services; TLS with the virtual
    // hosts' certificates, chosen by SNI.
    for (service, what, plain, tls_port) in [
        (
            Service::Rtmp,
            "RTMPS port",
            config.providers.rtmp_port,
            config.providers.rtmp_tls_port,
        ),
        (
            Service::Viewer,
            "LL-HLS TLSPort",
            config.providers.llhls_port,
            config.providers.llhls_tls_port,
        ),
    ] {
        if let Some(port) = plain {
            listen.tcp.push(ListenerSpec {
                service,
                addr: SocketAddr::new(config.ip, port),
                tls: None,
            });
        }
        if let Some(port) = tls_port {
            if vhost_certs.hosts().is_empty() {
                warn!("{what} {port}: no virtual host has a certificate yet; TLS handshakes fail until one does");
            }
            listen.tcp.push(ListenerSpec {
                service,
                addr: SocketAddr::new(config.ip, port),
                tls: Some(tls::server_config(vhost_certs.clone())),
            });
        }
    }
    if let Some(w) = &config.providers.webrtc {
        webrtc_listen(w, &config, &vhost_certs, &mut listen);
    }
    for port in &config.providers.mpegts_ports {
        listen.mpegts.push(SocketAddr::new(config.ip, *port));
    }
    listen.srt = config
        .providers
        .srt_port
        .map(|port| SocketAddr::new(config.ip, port));
    listen.srt_crypto = config.providers.srt_crypto.clone();
    listen.srt_max_per_address = config.providers.srt_max_per_address;
    listen.viewer_max_per_address = config.providers.viewer_max_per_address;
    if let (Some(_), Some(c)) = (listen.srt, &listen.srt_crypto) {
        info!(
            "SRT ingest: callers must encrypt (AES-{}, passphrase set)",
            c.key_len * 8
        );
    }

    let api_config = config.api.clone();
    let limits = api_config
        .as_ref()
        .map(|a| a.limits.clone())
        .unwrap_or_default();
    let mut api_resolver = None;
    match &api_config {
        None => info!("API server disabled: no <Bind><Managers><API> in the configuration"),
        Some(api_config) => {
            if let (Some(port), Some(_)) = (api_config.tls_port, &api_config.tls) {
                api_resolver = Some(Arc::new(ApiCertResolver::new(certs.api, port)));
            }
            if let Some(port) = api_config.port {
                listen.tcp.push(ListenerSpec {
                    service: Service::Api,
                    addr: SocketAddr::new(config.ip, port),
                    tls: None,
                });
            }
            if let (Some(port), Some(resolver)) = (api_config.tls_port, &api_resolver) {
                listen.tcp.push(ListenerSpec {
                    service: Service::Api,
                    addr: SocketAddr::new(config.ip, port),
                    tls: Some(tls::server_config(resolver.clone())),
                });
            }
        }
    }
    let mut api = Api::new(
        api_config.as_ref(),
        registry,
        store,
        api_resolver,
        vhost_certs,
        offset,
    );
    if let Some(w) = &config.providers.webrtc {
        api.webrtc_signalling = (w.port, w.tls_port);
    }
    if let Some(saved) = saved {
        for why in api.restore(saved) {
            warn!("{why}");
        }
        let api_hosts = (api.registry.vhosts().iter())
            .filter(|v| v.origin == kiln::state::Origin::Api)
            .count();
        info!(
            "state restored from {}: {api_hosts} virtual host(s) made through the API, {} push task(s)",
            api.store.path().display(),
            api.push_task_count()
        );
    }
    let mut addresses = kiln::sys::local_addresses();
    addresses.push(config.ip);
    api.own_ingest = kiln::api::OwnIngest {
        rtmp_port: config.providers.rtmp_port,
        srt_port: config.providers.srt_port,
        mpegts_ports: config.providers.mpegts_ports.clone(),
        addresses,
    };
    // Every port is bound before the state file is touched: a start that
    // fails (a port in use) creates nothing.
    let mut server = Server::bind(api, listen, limits).map_err(|e| format!("cannot start: {e}"))?;
    server
        .open_state()
        .map_err(|e| format!("cannot open the state file: {e}"))?;
    info!("kiln {} started", env!("CARGO_PKG_VERSION"));
    server.run().map_err(|e| e.to_string())
}

struct StartCerts {
    api: Option<Arc<rustls::sign::CertifiedKey>>,
    vhosts: Vec<VhostCert>,
    /// The files that could not be loaded and the ports they leave without
    /// a certificate.
    failed: Vec<FailedCert>,
}

struct FailedCert {
    /// Where in the configuration the files are named, and why they fail.
    error: ConfigError,
    /// The TLS ports that refuse handshakes for want of them (a phrase).
    ports: String,
}

/// Loads every certificate the configuration names. A file that cannot be
/// loaded is reported (DECISIONS 1: a warning for `--check-config`, an
/// error line at start) and leaves its ports without a certificate.
fn load_certificates(config: &Config) -> StartCerts {
    let mut failed = Vec::new();
    let err = |file: &Path, path: &str, line: u64, column: u64, e: tls::CertError| ConfigError {
        file: file.to_path_buf(),
        line,
        column,
        path: path.to_string(),
        message: format!("TLS file cannot be loaded: {e}"),
    };
    let mut api = None;
    if let Some(api_config) = &config.api {
        if let (Some(port), Some(spec)) = (api_config.tls_port, &api_config.tls) {
            match tls::load_certified_key(spec) {
                Ok(k) => api = Some(k),
                Err(e) => failed.push(FailedCert {
                    error: err(
                        &config.file,
                        "Server/Managers/Host/TLS",
                        api_config.tls_line,
                        api_config.tls_column,
                        e,
                    ),
                    ports: format!("API TLS port {port}"),
                }),
            }
        }
    }
    let mut vhosts = Vec::new();
    // Vhost certificates serve the media-side TLS listeners (RTMPS, LL-HLS
    // TLSPort); with none configured they are not loaded, so a config that
    // names files only a WebRTC TLS port would use still runs quietly.
    let media_ports: Vec<String> = [
        config
            .providers
            .rtmp_tls_port
            .map(|p| format!("RTMPS port {p}")),
        config
            .providers
            .llhls_tls_port
            .map(|p| format!("LL-HLS TLS port {p}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    for v in &config.vhosts {
        if media_ports.is_empty() {
            if v.spec.host.tls.is_some() {
                warn!(
                    "{}:{}: virtual host [{}]: <TLS> not loaded: no media TLS port (<Bind><Providers><RTMP><TLSPort>) uses it",
                    config.file.display(),
                    v.line,
                    v.spec.name
                );
            }
            continue;
        }
        if let Some(spec) = &v.spec.host.tls {
            match tls::load_certified_key(spec) {
                Ok(key) => vhosts.push(VhostCert {
                    vhost: v.spec.name.clone(),
                    names: v.spec.host.names.clone(),
                    key,
                }),
                Err(e) => failed.push(FailedCert {
                    error: {
                        let (file, line, column) =
                            v.tls_at.clone().unwrap_or((config.file.clone(), v.line, 1));
                        err(
                            &file,
                            "Server/VirtualHosts/VirtualHost/Host/TLS",
                            line,
                            column,
                            e,
                        )
                    },
                    ports: format!(
                        "{} (for the names of virtual host [{}])",
                        media_ports.join(" and "),
                        v.spec.name
                    ),
                }),
            }
        }
    }
    StartCerts {
        api,
        vhosts,
        failed,
    }
}

/// `<Bind><Publishers><WebRTC>`: its signalling ports (viewer listeners,
/// unless they are LL-HLS's own) and one UDP socket per ICE candidate
/// address (`*` and `[::]` expanded to the machine's addresses).
fn webrtc_listen(
    w: &kiln::config::WebRtcBind,
    config: &kiln::config::Config,
    vhost_certs: &Arc<VhostCertResolver>,
    listen: &mut Listen,
) {
    if !cfg!(feature = "webrtc") {
        warn!(
            "<Bind><Publishers><WebRTC>: this kiln was built without the webrtc feature; ignored"
        );
        return;
    }
    let llhls = [config.providers.llhls_port, config.providers.llhls_tls_port];
    for (port, tls) in [(w.port, false), (w.tls_port, true)] {
        let Some(port) = port.filter(|p| !llhls.contains(&Some(*p))) else {
            continue;
        };
        listen.tcp.push(ListenerSpec {
            service: Service::Viewer,
            addr: SocketAddr::new(config.ip, port),
            tls: tls.then(|| tls::server_config(vhost_certs.clone())),
        });
    }
    listen.tcp_force = w.tcp_force;
    listen.webrtc_max_sessions = w.max_sessions;
    listen.webrtc_max_per_address = w.max_sessions_per_address;
    let public = kiln::config::PUBLIC_IP;
    let stun = config.stun_server.is_some();
    let local = kiln::sys::local_addresses();
    // `*` and `[::]`: the machine's addresses; an address: itself.
    let expand = |host: &str| -> Vec<IpAddr> {
        match host {
            "*" => kiln::sys::interface_addresses(false),
            "[::]" => kiln::sys::interface_addresses(true),
            h => h
                .trim_matches(|c| c == '[' || c == ']')
                .parse()
                .into_iter()
                .collect(),
        }
    };
    // Where an address is bound: itself when it is the machine's, else
    // (a NAT's outside address) every interface of its family.
    let bind_ip = |ip: IpAddr| -> IpAddr {
        if local.contains(&ip) || ip.is_loopback() {
            ip
        } else if ip.is_ipv4() {
            Ipv4Addr::UNSPECIFIED.into()
        } else {
            Ipv6Addr::UNSPECIFIED.into()
        }
    };
    // The relay listens on the host as written (`*`: every IPv4 address)
    // and is advertised at each of the machine's addresses (and at the
    // public one, as OME does, once learnt).
    for (host, port) in &w.relays {
        let ips = if host == public {
            Vec::new()
        } else {
            expand(host)
        };
        let bind: IpAddr = match host.as_str() {
            "*" => Ipv4Addr::UNSPECIFIED.into(),
            "[::]" => Ipv6Addr::UNSPECIFIED.into(),
            h if h == public => Ipv4Addr::UNSPECIFIED.into(),
            _ => ips.first().map_or(config.ip, |ip| bind_ip(*ip)),
        };
        let addr = SocketAddr::new(bind, *port);
        if !listen.tcp.iter().any(|l| l.addr == addr) {
            listen.tcp.push(ListenerSpec {
                service: Service::WebRtcRelay,
                addr,
                tls: None,
            });
        }
        for ip in ips {
            let url = kiln::http::url::turn_tcp(ip, *port);
            if !listen.relay_urls.contains(&url) {
                listen.relay_urls.push(url);
            }
        }
        if (host == public || (host == "*" && stun)) && !listen.relay_public_ports.contains(port) {
            listen.relay_public_ports.push(*port);
        }
    }
    listen.stun_server = config.stun_server.clone();
    let add = |listen: &mut Listen, port: IcePort| {
        if listen.ice.contains(&port) || listen.ice.len() >= 256 {
            return;
        }
        // One socket per bound address: a second offer for the same
        // wildcard would split its datagrams between two sockets.
        if let Some(other) = listen.ice.iter().find(|p| p.bind == port.bind) {
            warn!(
                "<IceCandidate>: {} is already bound for {}; {} is not offered",
                port.bind,
                other.offer.map_or(public.to_string(), |a| a.to_string()),
                port.offer.map_or(public.to_string(), |a| a.to_string())
            );
            return;
        }
        listen.ice.push(port);
    };
    for (host, ports) in &w.candidates {
        for port in ports {
            if host == public || (host == "*" && stun) {
                let bind = SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), *port);
                add(listen, IcePort { bind, offer: None });
            }
            if host == public {
                continue;
            }
            for ip in expand(host) {
                let offer = SocketAddr::new(ip, *port);
                let bind = SocketAddr::new(bind_ip(ip), *port);
                add(
                    listen,
                    IcePort {
                        bind,
                        offer: Some(offer),
                    },
                );
            }
        }
    }
}
