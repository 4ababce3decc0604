//! `server.xml` (OME's format, version 8) read into a typed [`Config`].
//!
//! Rules (DECISIONS section 1): `${env:NAME}` / `${env:NAME:default}` are
//! substituted in every text value; every error names file, line, column and
//! element path; elements OME knows but kiln does not implement are warned
//! about once each and ignored; any other unknown element is an error. All
//! errors of a file are collected, so `--check-config` shows them together.
//!
//! This module reads and checks; it opens no sockets and loads no
//! certificates (the caller does, and reports bad files by path).

pub mod dom;
pub mod ome_schema;

use crate::state::app::{
    ports_text, AppSpec, Empty, Encode, Encodes, IngestProvider, MpegtsProvider, OutputProfile,
    OutputProfiles, Providers, Publishers, StreamMap, StreamMapItem,
};
use crate::state::vhost::{
    AdmissionWebhooks, Enables, HostSpec, Origin, OriginMapStore, OriginPass, OriginProperties,
    OriginUrls, Origins, RedisServer, SignedPolicy, TlsSpec, VhostSpec,
};
use dom::Element;
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const SUPPORTED_VERSION: &str = "8";

/// The whole configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub file: PathBuf,
    /// `<Name>`: the server's name, the default `distribution`.
    pub name: Option<String>,
    /// `<IP>`: the bind address of every listener (`*` = all IPv4 addresses).
    pub ip: IpAddr,
    pub api: Option<ApiConfig>,
    pub providers: ProviderBinds,
    pub vhosts: Vec<VhostConfig>,
    /// `<StateFile>` (kiln extension).
    pub state_file: PathBuf,
    /// `<StunServer>host:port` (OME's): where kiln asks for its public
    /// address at start-up, for `${PublicIP}` and `*` ICE candidates and
    /// TCP relays.
    pub stun_server: Option<(String, u16)>,
}

/// The management API server: `<Bind><Managers><API>` plus `<Managers>`.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    pub port: Option<u16>,
    pub tls_port: Option<u16>,
    pub access_token: String,
    /// `<Managers><API><CrossDomains><Url>`.
    pub cross_domains: Vec<String>,
    /// `<Managers><Host><Names><Name>`; empty means any.
    pub host_names: Vec<String>,
    /// `<Managers><Host><TLS>`.
    pub tls: Option<TlsSpec>,
    /// The line of `<Managers><Host><TLS>` (for errors about its files).
    pub tls_line: u64,
    pub tls_column: u64,
    pub limits: ApiLimits,
}

/// Limits of the API (`<Managers><API><Limits>`, kiln extension): its HTTP
/// server, and how much it lets callers create (DECISIONS section 15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiLimits {
    pub max_head_bytes: usize,
    pub max_body_bytes: usize,
    pub head_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    /// Open API connections from one client address (0: no cap).
    pub max_connections_per_address: usize,
    /// API-made virtual hosts.
    pub max_vhosts: usize,
    /// Push tasks over all applications.
    pub max_push_tasks: usize,
}

impl Default for ApiLimits {
    fn default() -> Self {
        ApiLimits {
            max_head_bytes: 16 * 1024,
            max_body_bytes: 1024 * 1024,
            head_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 4096,
            max_connections_per_address: 256,
            max_vhosts: 10_000,
            max_push_tasks: 100_000,
        }
    }
}

/// `<Bind><Providers>`: where streams come in.
#[derive(Debug, Clone)]
pub struct ProviderBinds {
    pub rtmp_port: Option<u16>,
    pub rtmp_tls_port: Option<u16>,
    pub srt_port: Option<u16>,
    /// `<SRT><Options>` SRTO_PASSPHRASE / SRTO_PBKEYLEN: callers must
    /// encrypt with this passphrase.
    pub srt_crypto: Option<crate::srt::crypto::CryptoConfig>,
    /// `<SRT><MaxConnectionsPerAddress>` (kiln extension, default 16, 0 =
    /// no cap): SRT sockets (publishers and players) from one address.
    pub srt_max_per_address: usize,
    pub mpegts_ports: Vec<u16>,
    /// How long an MPEG-TS port may be quiet before its stream ends
    /// (`<MPEGTS><StreamTimeoutMs>`, kiln extension; default 5 s).
    pub mpegts_quiet: Duration,
    /// `<Bind><Publishers><LLHLS><Port>` / `<TLSPort>`: the viewer listener
    /// (LL-HLS and HLS).
    pub llhls_port: Option<u16>,
    pub llhls_tls_port: Option<u16>,
    /// `<Bind><Publishers><LLHLS><MaxConnectionsPerAddress>` (kiln
    /// extension, default 512 of the port's 8192; 0 = no cap): viewer-port
    /// connections (LL-HLS, HLS, WebRTC signalling, the TCP relay) from
    /// one address.
    pub viewer_max_per_address: usize,
    /// `<Bind><Publishers><WebRTC>`: signalling ports and ICE candidates.
    pub webrtc: Option<WebRtcBind>,
}

/// `<Bind><Publishers><WebRTC>` (OME's shape): where viewers signal
/// (`<Signalling><Port>`/`<TLSPort>`, shared with LL-HLS when the same
/// number) and the UDP ICE candidates media flows through.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WebRtcBind {
    pub port: Option<u16>,
    pub tls_port: Option<u16>,
    /// `<IceCandidates><IceCandidate>host:ports/udp`: the host as written
    /// (`*` for every IPv4 address of the machine, `[::]` for every IPv6
    /// one, or an address) and its UDP ports.
    pub candidates: Vec<(String, Vec<u16>)>,
    /// `<IceCandidates><TcpRelay>host:port`: OME's TURN over TCP for
    /// viewers without UDP (the host as written, as for candidates).
    pub relays: Vec<(String, u16)>,
    /// `<TcpForce>` (or `<TcpRelayForce>`): offer the relay to every viewer,
    /// as if each asked with `transport=tcp`.
    pub tcp_force: bool,
    /// `<MaxSessions>` (kiln extension, default 1000): WebRTC sessions at
    /// once, connected or not; past it, new viewers are refused (503).
    pub max_sessions: usize,
    /// `<MaxSessionsPerAddress>` (kiln extension, default a tenth of
    /// `MaxSessions` and at least 10; 0 = no cap): sessions from one client address
    /// (viewers and publishers, WHEP, WHIP and OME's signalling).
    pub max_sessions_per_address: Option<usize>,
}

impl Default for ProviderBinds {
    fn default() -> Self {
        ProviderBinds {
            rtmp_port: None,
            rtmp_tls_port: None,
            srt_port: None,
            srt_crypto: None,
            srt_max_per_address: 16,
            mpegts_ports: Vec::new(),
            mpegts_quiet: Duration::from_secs(5),
            llhls_port: None,
            llhls_tls_port: None,
            viewer_max_per_address: 512,
            webrtc: None,
        }
    }
}

/// A virtual host declared in the file, with its applications.
#[derive(Debug, Clone)]
pub struct VhostConfig {
    pub spec: VhostSpec,
    pub applications: Vec<AppConfig>,
    /// OME's dynamic-application template (`<Name>*</Name>`): applications
    /// that origin pulls create on demand are copies of it.
    pub app_template: Option<AppConfig>,
    pub line: u64,
    /// Where `<Host><TLS>` is written (file, line, column), when it is.
    pub tls_at: Option<(PathBuf, u64, u64)>,
}

/// An application declared in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct AppConfig {
    pub name: String,
    pub output_profiles: Vec<OutputProfileConfig>,
    pub rtmp: bool,
    pub srt: bool,
    /// `<Providers><RTMP>` / `<SRT>` `<BlockDuplicateStreamName>`.
    pub rtmp_block_duplicates: Option<bool>,
    pub srt_block_duplicates: Option<bool>,
    /// `<Providers><MPEGTS><StreamMap>`: (stream name pattern, ports).
    pub mpegts: Option<Vec<StreamMapEntry>>,
    pub push: bool,
    /// `<Publishers><LLHLS>`: viewers may play the application's streams.
    pub llhls: Option<crate::state::app::LlhlsSpec>,
    /// `<Publishers><HLS>`: and over HLS with MPEG-TS segments.
    pub hls: Option<crate::state::app::HlsSpec>,
    /// `<Publishers><WebRTC>`: and over WebRTC.
    pub webrtc: Option<crate::state::app::WebRtcSpec>,
    /// `<Providers><WebRTC>`: publishing over WebRTC (WHIP, OME's
    /// `direction=send`).
    pub webrtc_ingest: Option<crate::state::app::WebRtcIngestSpec>,
    /// `<Providers><Schedule>`: scheduled channels (paths resolved).
    pub schedule: Option<crate::state::app::ScheduleProvider>,
    /// `<Providers><Multiplex>`: multiplex channels (path resolved).
    pub multiplex: Option<crate::state::app::MultiplexProvider>,
    /// `<Publishers><FILE>`: recording through the API.
    pub file: Option<crate::state::app::FileSpec>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputProfileConfig {
    pub name: String,
    pub output_stream_name: String,
    pub encodes: Vec<EncodeConfig>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeConfig {
    pub kind: EncodeKind,
    pub name: String,
    /// OME's conditional bypass (`<Codec>X</Codec>` with
    /// `<BypassIfMatch><Codec>eq</Codec>`): the track passes only when its
    /// codec is X. `None`: a plain bypass.
    pub if_codec: Option<String>,
    /// The transcoding settings OME shows beside a conditional bypass
    /// (`bitrate`, `samplerate`, `channel`, ...: GET shows them as OME
    /// does; kiln applies none).
    pub shown: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeKind {
    Video,
    Audio,
    Data,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamMapEntry {
    /// Stream name; `${Port}` is replaced by the port.
    pub name: String,
    pub ports: Vec<u16>,
}

/// One problem found in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    pub line: u64,
    pub column: u64,
    pub path: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `file:line:column: path: message`, leaving out what is unknown:
        // no position for a file that cannot be read, no element path for
        // an XML syntax error.
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// All errors of a file (never empty) or the warnings of a good one.
#[derive(Debug)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// A loaded configuration and the warnings found on the way.
#[derive(Debug)]
pub struct Loaded {
    pub config: Config,
    pub warnings: Vec<ConfigError>,
}

/// Reads and checks a file, with `${env:}` resolved from the process environment.
pub fn load(file: &Path) -> Result<Loaded, ConfigErrors> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        ConfigErrors(vec![ConfigError {
            file: file.to_path_buf(),
            line: 0,
            column: 0,
            path: String::new(),
            message: format!("cannot read the file: {e}"),
        }])
    })?;
    parse(file, &text, &|name| std::env::var(name).ok())
}

/// Checks a document. `env` looks variables up (injected for tests).
pub fn parse(
    file: &Path,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Loaded, ConfigErrors> {
    let root = dom::parse(text).map_err(|e| {
        ConfigErrors(vec![ConfigError {
            file: file.to_path_buf(),
            line: e.line,
            column: e.column,
            path: String::new(),
            message: format!("XML syntax error: {}", e.message),
        }])
    })?;
    let mut w = Walker {
        file: file.to_path_buf(),
        env,
        errors: Vec::new(),
        warnings: Vec::new(),
        public_ip_uses: Vec::new(),
    };
    let config = w.server(&root);
    if config.stun_server.is_none() {
        let uses = std::mem::take(&mut w.public_ip_uses);
        w.errors.extend(uses);
    }
    if w.errors.is_empty() {
        Ok(Loaded {
            config,
            warnings: w.warnings,
        })
    } else {
        Err(ConfigErrors(w.errors))
    }
}

/// Substitutes `${env:NAME}` and `${env:NAME:default}`; other `${...}`
/// (OME's `${OriginStreamName}`, `${Port}`) are left as they are.
pub fn substitute_env(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${env:") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 6..];
        let Some(end) = after.find('}') else {
            return Err("unterminated ${env:...}".into());
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(':') {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        if name.is_empty() {
            return Err("${env:} names no variable".into());
        }
        match (env(name), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(format!(
                    "environment variable {name} is not set and ${{env:{name}}} has no default"
                ))
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

pub use crate::ports::parse_ports;

// Elements OME knows that kiln ignores with a warning, by parent.
const UNSUPPORTED_SERVER: &[&str] = &["Type", "PrivacyProtection", "Modules", "Alert", "Analytics"];
const UNSUPPORTED_BIND: &[&str] = &[];
const UNSUPPORTED_BIND_PUBLISHERS: &[&str] =
    &["OVT", "HLS", "DASH", "LLDASH", "Thumbnail", "SRT", "WHEP"];
const UNSUPPORTED_BIND_PROVIDERS: &[&str] =
    &["OVT", "RTSP", "RTSPC", "WHIP", "Scheduled", "Multiplex"];
const UNSUPPORTED_WORKERS: &[&str] = &["WorkerCount"];
const UNSUPPORTED_VHOST: &[&str] = &[];
const UNSUPPORTED_APP: &[&str] = &["Decode", "Modules", "Transcoder"];
const UNSUPPORTED_OUTPUT_PROFILES: &[&str] = &["HWAccels", "HardwareAcceleration", "Decodes"];
const UNSUPPORTED_OUTPUT_PROFILE: &[&str] = &["Playlist", "Playlists"];
const UNSUPPORTED_ENCODES: &[&str] = &["Image"];
const UNSUPPORTED_APP_PROVIDERS: &[&str] = &["OVT", "RTSPPull", "RTSP", "WHIP"];
const UNSUPPORTED_APP_PUBLISHERS: &[&str] = &[
    "AppWorkerCount",
    "StreamWorkerCount",
    "OVT",
    "DASH",
    "LLDASH",
    "Thumbnail",
    "SRT",
    "RTMPPush",
    "MPEGTSPush",
    "SessionLoadBalancingThreadCount",
];
const UNSUPPORTED_ORIGINS: &[&str] = &[];
const UNSUPPORTED_LLHLS: &[&str] = &[
    "DRM",
    "OriginMode",
    "ServerTimeBasedSegmentNumbering",
    "DefaultQueryString",
    "EnablePresetOption",
];
const UNSUPPORTED_ORIGIN_PASS: &[&str] = &["ForwardQueryParams"];

/// (Port, TLSPort) of `<Bind><Managers><API>`.
type ApiPorts = (Option<u16>, Option<u16>);

struct Walker<'e> {
    file: PathBuf,
    env: &'e dyn Fn(&str) -> Option<String>,
    errors: Vec<ConfigError>,
    warnings: Vec<ConfigError>,
    /// Where `${PublicIP}` is used: errors unless `<StunServer>` is set.
    public_ip_uses: Vec<ConfigError>,
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}/{name}")
    }
}

impl Walker<'_> {
    fn error(&mut self, at: &Element, path: &str, message: impl Into<String>) {
        self.errors.push(ConfigError {
            file: self.file.clone(),
            line: at.line,
            column: at.column,
            path: path.to_string(),
            message: message.into(),
        });
    }

    fn warn(&mut self, at: &Element, path: &str, message: impl Into<String>) {
        self.warnings.push(ConfigError {
            file: self.file.clone(),
            line: at.line,
            column: at.column,
            path: path.to_string(),
            message: message.into(),
        });
    }

    /// `${PublicIP}` is used at `at`: it needs `<StunServer>`.
    fn uses_public_ip(&mut self, at: &Element, path: &str) {
        self.public_ip_uses.push(ConfigError {
            file: self.file.clone(),
            line: at.line,
            column: at.column,
            path: path.to_string(),
            message: format!(
                "{PUBLIC_IP} needs <Server><StunServer> (kiln learns its public address from it)"
            ),
        });
    }

    /// Walks the children of `el`: known names go to `visit` (which returns
    /// false for a name it does not take), names in `unsupported` are warned
    /// about, the rest are errors. Non-repeatable names seen twice are errors.
    fn children<'a>(
        &mut self,
        el: &'a Element,
        path: &str,
        unsupported: &[&str],
        repeatable: &[&str],
        mut visit: impl FnMut(&mut Self, &'a Element, &str) -> bool,
    ) {
        let mut seen: Vec<&str> = Vec::new();
        for child in &el.children {
            let cpath = join(path, &child.name);
            if unsupported.contains(&child.name.as_str()) {
                self.warn(child, &cpath, "not supported by kiln; ignored");
                continue;
            }
            if seen.contains(&child.name.as_str()) && !repeatable.contains(&child.name.as_str()) {
                self.error(child, &cpath, "appears more than once");
                continue;
            }
            seen.push(&child.name);
            if !visit(self, child, &cpath) {
                if ome_schema::is_ome_element(&child.name) {
                    // OME has it; kiln does not apply it here.
                    self.warn(child, &cpath, "not supported by kiln; ignored");
                } else {
                    self.error(child, &cpath, format!("unknown element <{}>", child.name));
                }
            }
        }
    }

    fn text(&mut self, el: &Element, path: &str) -> Option<String> {
        if !el.children.is_empty() {
            self.error(el, path, "expected a text value, found child elements");
            return None;
        }
        match substitute_env(&el.text, self.env) {
            Ok(t) => Some(t),
            Err(e) => {
                self.error(el, path, e);
                None
            }
        }
    }

    fn nonempty_text(&mut self, el: &Element, path: &str) -> Option<String> {
        let t = self.text(el, path)?;
        if t.trim().is_empty() {
            self.error(el, path, "must not be empty");
            return None;
        }
        Some(t.trim().to_string())
    }

    /// An application's `<RTMP>` or `<SRT>` provider: its
    /// `<BlockDuplicateStreamName>`, if given (OME's only child of them).
    fn block_duplicates(&mut self, el: &Element, path: &str) -> Option<bool> {
        let mut block = None;
        self.children(el, path, UNSUPPORTED_WORKERS, &[], |w, c, p| {
            if c.name != "BlockDuplicateStreamName" {
                return false;
            }
            block = w.bool_text(c, p);
            true
        });
        block
    }

    fn bool_text(&mut self, el: &Element, path: &str) -> Option<bool> {
        let t = self.text(el, path)?;
        match t.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Some(true),
            "false" | "0" | "no" => Some(false),
            other => {
                self.error(el, path, format!("[{other}] is not true or false"));
                None
            }
        }
    }

    /// `<Publishers><LLHLS>` of an application.
    fn llhls(&mut self, el: &Element, path: &str) -> crate::state::app::LlhlsSpec {
        let mut spec = crate::state::app::LlhlsSpec::default();
        self.children(el, path, UNSUPPORTED_LLHLS, &[], |w, c, p| {
            match c.name.as_str() {
                "ChunkDuration" => spec.chunk_duration = w.seconds(c, p, 0.1, 10.0),
                "PartHoldBack" => spec.part_hold_back = w.seconds(c, p, 0.0, 60.0),
                "SegmentDuration" => spec.segment_duration = w.seconds(c, p, 1.0, 60.0),
                "SegmentCount" => spec.segment_count = w.segment_count(c, p),
                "FirstSegmentTimeout" => spec.first_segment_timeout = w.seconds(c, p, 1.0, 600.0),
                "CrossDomains" => spec.cross_domains = Some(w.cross_domains(c, p)),
                "CacheControl" => spec.cache_control = Some(w.cache_control(c, p)),
                "Dumps" => spec.dumps = Some(w.dumps(c, p)),
                _ => return false,
            }
            true
        });
        spec
    }

    /// `<LLHLS><Dumps>`: `<RootPath>` (kiln) and OME's `<Dump>` entries.
    fn dumps(&mut self, el: &Element, path: &str) -> crate::state::app::DumpsSpec {
        let mut spec = crate::state::app::DumpsSpec::default();
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "RootPath" => spec.root_path = w.nonempty_text(c, p),
                "Dump" => {
                    let (mut enable, mut target, mut out) = (true, None, None);
                    let mut playlists = Vec::new();
                    w.children(c, p, &["Extension"], &[], |w, c, p| {
                        match c.name.as_str() {
                            "Enable" => enable = w.text(c, p).is_some_and(|t| t.trim() == "true"),
                            "TargetStreamName" => target = w.nonempty_text(c, p),
                            "OutputPath" => out = w.nonempty_text(c, p),
                            "Playlists" => {
                                playlists = w.repeated(c, p, &[], "Playlist", |w, c, p| {
                                    w.nonempty_text(c, p)
                                })
                            }
                            _ => return false,
                        }
                        true
                    });
                    match (target, out) {
                        (Some(target_stream_name), Some(output_path)) => {
                            spec.dump.push(crate::state::app::DumpConfig {
                                enable,
                                target_stream_name,
                                playlists,
                                output_path,
                            })
                        }
                        _ => w.error(c, p, "<TargetStreamName> and <OutputPath> are required"),
                    }
                }
                _ => return false,
            }
            true
        });
        if let Some(why) = spec.problem() {
            self.error(el, path, why);
        }
        spec
    }

    /// `<CrossDomains><Url>...` of a viewer publisher.
    fn cross_domains(&mut self, el: &Element, path: &str) -> Vec<String> {
        self.repeated(el, path, &[], "Url", |w, c, p| w.nonempty_text(c, p))
    }

    /// `<Bind><Publishers><WebRTC>`.
    fn webrtc_bind(&mut self, el: &Element, path: &str) -> WebRtcBind {
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
        if bind.candidates.is_empty() && !el.children.iter().any(|c| c.name == "IceCandidates") {
            // OME's default.
            bind.candidates.push(("*".into(), vec![10000]));
        }
        bind
    }

    /// A WebRTC `<Timeout>` (ms, publishers' or viewers'): 1 s to 10
    /// minutes; outside that an error at its place.
    fn webrtc_timeout(&mut self, c: &Element, p: &str) -> Option<u64> {
        let ms = self.number::<u64>(c, p)?;
        if (1000..=600_000).contains(&ms) {
            Some(ms)
        } else {
            self.error(c, p, "must be 1000 to 600000 (ms)");
            None
        }
    }

    /// An application's `<Providers><WebRTC>`.
    fn webrtc_ingest_app(
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
    fn webrtc_app(&mut self, el: &Element, path: &str) -> crate::state::app::WebRtcSpec {
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

    /// `<LLHLS><CacheControl>`: max-age seconds, 0 or -1 and up.
    fn cache_control(&mut self, el: &Element, path: &str) -> crate::state::app::CacheControlSpec {
        let mut spec = crate::state::app::CacheControlSpec::default();
        self.children(el, path, &[], &[], |w, c, p| {
            let slot = match c.name.as_str() {
                "MasterPlaylistMaxAge" => &mut spec.master_playlist_max_age,
                "ChunklistMaxAge" => &mut spec.chunklist_max_age,
                "ChunklistWithDirectivesMaxAge" => &mut spec.chunklist_with_directives_max_age,
                "SegmentMaxAge" => &mut spec.segment_max_age,
                "PartialSegmentMaxAge" => &mut spec.partial_segment_max_age,
                _ => return false,
            };
            *slot = match w.number::<i32>(c, p) {
                Some(v) if v >= -1 => Some(v),
                Some(_) => {
                    w.error(
                        c,
                        p,
                        "must be seconds, 0 (no-cache, no-store) or -1 (no header)",
                    );
                    None
                }
                None => None,
            };
            true
        });
        spec
    }

    /// A number of seconds in `lo..=hi`.
    fn seconds(&mut self, el: &Element, path: &str, lo: f64, hi: f64) -> Option<f64> {
        match self.number::<f64>(el, path) {
            Some(v) if (lo..=hi).contains(&v) => Some(v),
            Some(_) => {
                self.error(el, path, format!("must be {lo} to {hi} seconds"));
                None
            }
            None => None,
        }
    }

    /// `SegmentCount`: 3 to 100 segments kept.
    fn segment_count(&mut self, el: &Element, path: &str) -> Option<u32> {
        match self.number::<u32>(el, path) {
            Some(n) if (3..=100).contains(&n) => Some(n),
            Some(_) => {
                self.error(el, path, "must be 3 to 100");
                None
            }
            None => None,
        }
    }

    /// `<Publishers><HLS>` of an application.
    fn hls(&mut self, el: &Element, path: &str) -> crate::state::app::HlsSpec {
        let mut spec = crate::state::app::HlsSpec::default();
        self.children(
            el,
            path,
            &["CacheControl", "DefaultQueryString"],
            &[],
            |w, c, p| {
                match c.name.as_str() {
                    "SegmentDuration" => spec.segment_duration = w.seconds(c, p, 1.0, 60.0),
                    "SegmentCount" => spec.segment_count = w.segment_count(c, p),
                    "CrossDomains" => spec.cross_domains = Some(w.cross_domains(c, p)),
                    _ => return false,
                }
                true
            },
        );
        spec
    }

    /// `<Publishers><FILE>` of an application: `<RootPath>`, `<FilePath>`,
    /// `<InfoPath>` (OME's automatic `<StreamMap>` is not supported).
    fn file_publisher(&mut self, el: &Element, path: &str) -> crate::state::app::FileSpec {
        let mut spec = crate::state::app::FileSpec::default();
        self.children(el, path, &["StreamMap"], &[], |w, c, p| {
            // OME's example folds long paths over lines.
            let mut value = || {
                w.nonempty_text(c, p)
                    .map(|t| t.lines().map(str::trim).collect::<String>())
            };
            match c.name.as_str() {
                "RootPath" => spec.root_path = value(),
                "FilePath" => spec.file_path = value(),
                "InfoPath" => spec.info_path = value(),
                _ => return false,
            }
            true
        });
        if let Some(why) = spec.problem() {
            self.error(el, path, why);
        }
        spec
    }

    fn number<T: std::str::FromStr>(&mut self, el: &Element, path: &str) -> Option<T> {
        let t = self.text(el, path)?;
        match t.trim().parse::<T>() {
            Ok(v) => Some(v),
            Err(_) => {
                self.error(el, path, format!("[{}] is not a valid number", t.trim()));
                None
            }
        }
    }

    /// A single port of one transport (`1935`, `1935/tcp`, `9999/udp`).
    fn single_port(&mut self, el: &Element, path: &str, transport: &str) -> Option<u16> {
        let t = self.text(el, path)?;
        match parse_ports(&t) {
            Ok((ports, proto)) if ports.len() == 1 && proto.is_none_or(|p| p == transport) => {
                Some(ports[0])
            }
            Ok(_) => {
                let what = transport.to_ascii_uppercase();
                self.error(el, path, format!("[{t}] must be one {what} port"));
                None
            }
            Err(e) => {
                self.error(el, path, e);
                None
            }
        }
    }

    fn tcp_port(&mut self, el: &Element, path: &str) -> Option<u16> {
        self.single_port(el, path, "tcp")
    }

    /// An element of `<Port>` and `<TLSPort>` (`<WorkerCount>` warned):
    /// the two TCP ports, each when given.
    fn tcp_ports(&mut self, el: &Element, path: &str) -> (Option<u16>, Option<u16>) {
        let (mut port, mut tls_port) = (None, None);
        self.children(el, path, UNSUPPORTED_WORKERS, &[], |w, c, p| {
            match c.name.as_str() {
                "Port" => port = w.tcp_port(c, p),
                "TLSPort" => tls_port = w.tcp_port(c, p),
                _ => return false,
            }
            true
        });
        (port, tls_port)
    }

    fn udp_port(&mut self, el: &Element, path: &str) -> Option<u16> {
        self.single_port(el, path, "udp")
    }

    fn udp_ports(&mut self, el: &Element, path: &str) -> Vec<u16> {
        let Some(t) = self.text(el, path) else {
            return Vec::new();
        };
        match parse_ports(&t) {
            Ok((_, Some("tcp"))) => {
                self.error(el, path, format!("[{t}] must be UDP ports"));
                Vec::new()
            }
            Ok((ports, _)) => ports,
            Err(e) => {
                self.error(el, path, e);
                Vec::new()
            }
        }
    }

    /// The children of `el` named `name` (repeatable), each read by `item`
    /// (None: it reported its own error); any other child is an error.
    fn repeated<'a, T>(
        &mut self,
        el: &'a Element,
        path: &str,
        unsupported: &[&str],
        name: &str,
        mut item: impl FnMut(&mut Self, &'a Element, &str) -> Option<T>,
    ) -> Vec<T> {
        let mut out = Vec::new();
        self.children(el, path, unsupported, &[name], |w, c, p| {
            if c.name != name {
                return false;
            }
            out.extend(item(w, c, p));
            true
        });
        out
    }

    fn names_list(&mut self, el: &Element, path: &str) -> Vec<String> {
        self.repeated(el, path, &[], "Name", |w, c, p| w.nonempty_text(c, p))
    }

    fn server(&mut self, root: &Element) -> Config {
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
            if port.is_none() && tls_port.is_none() {
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
    fn bind(&mut self, el: &Element, path: &str) -> (Option<ApiPorts>, ProviderBinds) {
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

    fn managers(&mut self, el: &Element, path: &str) -> ManagersSection {
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
    fn srt_options(
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

    fn limits(&mut self, el: &Element, path: &str) -> ApiLimits {
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

    fn tls(&mut self, el: &Element, path: &str) -> Option<TlsSpec> {
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

    /// Relative certificate paths are relative to the config file's folder.
    fn resolve_path(&self, p: &str) -> String {
        let pb = Path::new(p);
        if pb.is_relative() {
            config_dir(&self.file)
                .join(pb)
                .to_string_lossy()
                .into_owned()
        } else {
            p.to_string()
        }
    }

    fn vhosts(&mut self, el: &Element, path: &str) -> Vec<VhostConfig> {
        let mut out = Vec::new();
        self.children(el, path, &[], &["VirtualHost"], |w, c, p| {
            if c.name != "VirtualHost" {
                return false;
            }
            match c.attribute("include") {
                Some(pattern) => out.extend(w.included_vhosts(c, p, pattern)),
                None => out.extend(w.vhost(c, p)),
            }
            true
        });
        out
    }

    /// `<VirtualHost include="VHost*.xml" />` (OME): every file matching the
    /// pattern (relative to the config's folder; `*` and `?` in the file
    /// name), in name order, holds one `<VirtualHost>`. No match: nothing.
    fn included_vhosts(&mut self, el: &Element, path: &str, pattern: &str) -> Vec<VhostConfig> {
        let full = config_dir(&self.file).join(pattern);
        let dir = full.parent().map(Path::to_path_buf).unwrap_or_default();
        let file_pattern = full
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter(|e| {
                    crate::wildcard::matches(&file_pattern, &e.file_name().to_string_lossy())
                })
                .map(|e| e.path())
                .collect(),
            Err(_) => Vec::new(),
        };
        files.sort();
        if files.is_empty() {
            self.warn(
                el,
                path,
                format!("include [{pattern}] matches no file; nothing included"),
            );
        }
        let mut out = Vec::new();
        for file in files {
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) => {
                    self.error(el, path, format!("include [{}]: {e}", file.display()));
                    continue;
                }
            };
            let outer = std::mem::replace(&mut self.file, file.clone());
            match dom::parse(&text) {
                Ok(root) if root.name == "VirtualHost" => out.extend(self.vhost(&root, path)),
                Ok(root) => self.error(
                    &root,
                    path,
                    format!(
                        "an included file must hold one <VirtualHost>, not <{}>",
                        root.name
                    ),
                ),
                Err(e) => self.errors.push(ConfigError {
                    file: file.clone(),
                    line: e.line,
                    column: e.column,
                    path: String::new(),
                    message: format!("XML syntax error: {}", e.message),
                }),
            }
            self.file = outer;
        }
        out
    }

    fn vhost(&mut self, el: &Element, path: &str) -> Option<VhostConfig> {
        let mut name = None;
        let mut distribution = None;
        let mut host: Option<HostSpec> = None;
        let mut spec_extra = (None, None, None, None);
        let mut cross_domains = None;
        let mut applications = Vec::new();
        let mut app_template = None;
        let mut tls_at = None;
        self.children(el, path, UNSUPPORTED_VHOST, &[], |w, c, p| {
            match c.name.as_str() {
                "Name" => name = w.nonempty_text(c, p),
                "Distribution" => distribution = w.nonempty_text(c, p),
                "Host" => {
                    let mut h = HostSpec {
                        names: Vec::new(),
                        tls: None,
                    };
                    w.children(c, p, &[], &[], |w, c, p| {
                        match c.name.as_str() {
                            "Names" => h.names = w.names_list(c, p),
                            "TLS" => {
                                h.tls = w.tls(c, p);
                                tls_at = Some((w.file.clone(), c.line, c.column));
                            }
                            _ => return false,
                        }
                        true
                    });
                    host = Some(h);
                }
                "SignedPolicy" => spec_extra.0 = w.signed_policy(c, p),
                "AdmissionWebhooks" => spec_extra.1 = w.admission_webhooks(c, p),
                "Origins" => spec_extra.2 = w.origins(c, p),
                "OriginMapStore" => spec_extra.3 = w.origin_map_store(c, p),
                "CrossDomains" => {
                    cross_domains = Some(crate::state::vhost::CrossDomains {
                        urls: w.cross_domains(c, p),
                    })
                }
                "Applications" => w.children(c, p, &[], &["Application"], |w, c, p| {
                    if c.name != "Application" {
                        return false;
                    }
                    if let Some(a) = w.application(c, p) {
                        if a.name == "*" {
                            if app_template.is_some() {
                                w.error(c, p, "the application template [*] is declared twice");
                            }
                            app_template = Some(a);
                        } else if applications.iter().any(|x: &AppConfig| x.name == a.name) {
                            w.error(c, p, format!("application [{}] is declared twice", a.name));
                        } else {
                            applications.push(a);
                        }
                    }
                    true
                }),
                _ => return false,
            }
            true
        });
        let Some(name) = name else {
            self.error(el, path, "<Name> is required");
            return None;
        };
        let host = host.unwrap_or(HostSpec {
            names: vec!["*".into()],
            tls: None,
        });
        let spec = VhostSpec {
            name,
            distribution,
            host,
            signed_policy: spec_extra.0,
            admission_webhooks: spec_extra.1,
            origins: spec_extra.2,
            origin_map_store: spec_extra.3,
            cross_domains,
            applications: None,
        };
        if let Err(e) = spec.validate() {
            self.error(el, path, e.to_string());
            return None;
        }
        Some(VhostConfig {
            spec,
            applications,
            app_template,
            line: el.line,
            tls_at,
        })
    }

    fn enables(&mut self, el: &Element, path: &str) -> Enables {
        let mut e = Enables::default();
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "Providers" => e.providers = w.text(c, p),
                "Publishers" => e.publishers = w.text(c, p),
                _ => return false,
            }
            true
        });
        e
    }

    fn required(&mut self, el: &Element, path: &str, v: Option<String>, name: &str) -> String {
        match v {
            Some(v) => v,
            None => {
                self.error(el, path, format!("<{name}> is required"));
                String::new()
            }
        }
    }

    fn signed_policy(&mut self, el: &Element, path: &str) -> Option<SignedPolicy> {
        let (mut pq, mut sq, mut sk, mut en) = (None, None, None, Enables::default());
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "PolicyQueryKeyName" => pq = w.nonempty_text(c, p),
                "SignatureQueryKeyName" => sq = w.nonempty_text(c, p),
                "SecretKey" => sk = w.nonempty_text(c, p),
                "Enables" => en = w.enables(c, p),
                _ => return false,
            }
            true
        });
        Some(SignedPolicy {
            enables: en,
            policy_query_key_name: self.required(el, path, pq, "PolicyQueryKeyName"),
            secret_key: self.required(el, path, sk, "SecretKey"),
            signature_query_key_name: self.required(el, path, sq, "SignatureQueryKeyName"),
        })
    }

    fn admission_webhooks(&mut self, el: &Element, path: &str) -> Option<AdmissionWebhooks> {
        let (mut url, mut sk, mut timeout, mut en) = (None, None, None, Enables::default());
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "ControlServerUrl" => url = w.nonempty_text(c, p),
                "SecretKey" => sk = w.text(c, p),
                "Timeout" => timeout = w.number::<u64>(c, p),
                "Enables" => en = w.enables(c, p),
                _ => return false,
            }
            true
        });
        Some(AdmissionWebhooks {
            control_server_url: self.required(el, path, url, "ControlServerUrl"),
            enables: en,
            secret_key: sk.unwrap_or_default(),
            timeout: timeout.unwrap_or(3000),
        })
    }

    fn origins(&mut self, el: &Element, path: &str) -> Option<Origins> {
        let mut origin = Vec::new();
        let mut properties = None;
        self.children(el, path, UNSUPPORTED_ORIGINS, &["Origin"], |w, c, p| {
            if c.name == "Properties" {
                let mut props = OriginProperties {
                    no_input_failover_timeout: None,
                    unused_stream_deletion_timeout: None,
                };
                w.children(c, p, &[], &[], |w, c, p| {
                    match c.name.as_str() {
                        "NoInputFailoverTimeout" => {
                            props.no_input_failover_timeout = w.number(c, p)
                        }
                        "UnusedStreamDeletionTimeout" => {
                            props.unused_stream_deletion_timeout = w.number(c, p)
                        }
                        _ => return false,
                    }
                    true
                });
                properties = Some(props);
                return true;
            }
            if c.name != "Origin" {
                return false;
            }
            let (mut location, mut scheme, mut urls) = (None, None, Vec::new());
            w.children(c, p, &[], &[], |w, c, p| {
                match c.name.as_str() {
                    "Location" => location = w.nonempty_text(c, p),
                    "Pass" => w.children(c, p, UNSUPPORTED_ORIGIN_PASS, &[], |w, c, p| {
                        match c.name.as_str() {
                            "Scheme" => scheme = w.nonempty_text(c, p),
                            "Urls" => {
                                urls = w.repeated(c, p, &[], "Url", |w, c, p| w.nonempty_text(c, p))
                            }
                            _ => return false,
                        }
                        true
                    }),
                    _ => return false,
                }
                true
            });
            origin.push(Origin {
                location: w.required(c, p, location, "Location"),
                pass: OriginPass {
                    scheme: w.required(c, p, scheme, "Pass/Scheme"),
                    urls: OriginUrls { url: urls },
                },
            });
            true
        });
        Some(Origins { properties, origin })
    }

    fn origin_map_store(&mut self, el: &Element, path: &str) -> Option<OriginMapStore> {
        let (mut host_name, mut host, mut auth) = (None, None, None);
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "OriginHostName" => host_name = w.nonempty_text(c, p),
                "RedisServer" => w.children(c, p, &[], &[], |w, c, p| {
                    match c.name.as_str() {
                        "Host" => host = w.nonempty_text(c, p),
                        "Auth" => auth = w.text(c, p),
                        _ => return false,
                    }
                    true
                }),
                _ => return false,
            }
            true
        });
        Some(OriginMapStore {
            origin_host_name: self.required(el, path, host_name, "OriginHostName"),
            redis_server: RedisServer {
                host: self.required(el, path, host, "RedisServer/Host"),
                auth,
            },
        })
    }

    fn application(&mut self, el: &Element, path: &str) -> Option<AppConfig> {
        let mut app = AppConfig {
            name: String::new(),
            output_profiles: Vec::new(),
            rtmp: false,
            srt: false,
            rtmp_block_duplicates: None,
            srt_block_duplicates: None,
            mpegts: None,
            push: false,
            llhls: None,
            webrtc: None,
            webrtc_ingest: None,
            schedule: None,
            multiplex: None,
            hls: None,
            file: None,
        };
        let mut name = None;
        self.children(el, path, UNSUPPORTED_APP, &[], |w, c, p| {
            match c.name.as_str() {
                "Name" => name = w.nonempty_text(c, p),
                "Type" => {
                    if let Some(t) = w.nonempty_text(c, p) {
                        if t != "live" {
                            w.error(c, p, format!("application type [{t}] is not supported; kiln serves live applications"));
                        }
                    }
                }
                "OutputProfiles" => {
                    w.children(c, p, UNSUPPORTED_OUTPUT_PROFILES, &["OutputProfile"], |w, c, p| {
                        if c.name != "OutputProfile" {
                            return false;
                        }
                        if let Some(op) = w.output_profile(c, p) {
                            app.output_profiles.push(op);
                        }
                        true
                    })
                }
                "Providers" => w.children(c, p, UNSUPPORTED_APP_PROVIDERS, &[], |w, c, p| {
                    match c.name.as_str() {
                        "WebRTC" => app.webrtc_ingest = Some(w.webrtc_ingest_app(c, p)),
                        "Schedule" => {
                            let mut s = crate::state::app::ScheduleProvider::default();
                            w.children(c, p, &[], &[], |w, c, p| {
                                let dir = w.nonempty_text(c, p).map(|d| w.resolve_path(&d));
                                match (c.name.as_str(), dir) {
                                    ("MediaRootDir", Some(d)) => s.media_root_dir = d,
                                    // OME's documents spell it both ways.
                                    ("ScheduleFilesDir" | "ScheduleFileDir", Some(d)) => {
                                        s.schedule_files_dir = d
                                    }
                                    ("MediaRootDir" | "ScheduleFilesDir" | "ScheduleFileDir", None) => {}
                                    _ => return false,
                                }
                                true
                            });
                            if s.media_root_dir.is_empty() {
                                w.error(c, p, "<MediaRootDir> is required");
                            }
                            app.schedule = Some(s);
                        }
                        "Multiplex" => {
                            let mut m = crate::state::app::MultiplexProvider::default();
                            w.children(c, p, &[], &[], |w, c, p| {
                                if c.name != "MuxFilesDir" {
                                    return false;
                                }
                                if let Some(d) = w.nonempty_text(c, p) {
                                    m.mux_files_dir = w.resolve_path(&d);
                                }
                                true
                            });
                            app.multiplex = Some(m);
                        }
                        "RTMP" => {
                            app.rtmp = true;
                            app.rtmp_block_duplicates = w.block_duplicates(c, p);
                        }
                        "SRT" => {
                            app.srt = true;
                            app.srt_block_duplicates = w.block_duplicates(c, p);
                        }
                        "MPEGTS" => {
                            let mut map = Vec::new();
                            w.children(c, p, &[], &[], |w, c, p| {
                                if c.name != "StreamMap" {
                                    return false;
                                }
                                w.children(c, p, &[], &["Stream"], |w, c, p| {
                                    if c.name != "Stream" {
                                        return false;
                                    }
                                    let (mut n, mut ports) = (None, Vec::new());
                                    w.children(c, p, &[], &[], |w, c, p| {
                                        match c.name.as_str() {
                                            "Name" => n = w.nonempty_text(c, p),
                                            "Port" => ports = w.udp_ports(c, p),
                                            _ => return false,
                                        }
                                        true
                                    });
                                    match n {
                                        Some(name) if !ports.is_empty() => {
                                            map.push(StreamMapEntry { name, ports })
                                        }
                                        _ => w.error(c, p, "<Name> and <Port> are required"),
                                    }
                                    true
                                });
                                true
                            });
                            app.mpegts = Some(map);
                        }
                        _ => return false,
                    }
                    true
                }),
                "Publishers" => w.children(c, p, UNSUPPORTED_APP_PUBLISHERS, &[], |w, c, p| {
                    if c.name == "WebRTC" {
                        app.webrtc = Some(w.webrtc_app(c, p));
                        return true;
                    }
                    if c.name == "LLHLS" {
                        app.llhls = Some(w.llhls(c, p));
                        return true;
                    }
                    if c.name == "HLS" {
                        app.hls = Some(w.hls(c, p));
                        return true;
                    }
                    if c.name == "FILE" || c.name == "File" {
                        app.file = Some(w.file_publisher(c, p));
                        return true;
                    }
                    if c.name != "Push" {
                        return false;
                    }
                    // OME's <Push> may hold <StreamMap> for automatic pushes;
                    // kiln drives pushes through the API only.
                    w.children(c, p, &["StreamMap"], &[], |_, _, _| false);
                    app.push = true;
                    true
                }),
                _ => return false,
            }
            true
        });
        let Some(name) = name else {
            self.error(el, path, "<Name> is required");
            return None;
        };
        // `*` is OME's dynamic-application template (kept by the vhost).
        if name != "*" && !crate::state::vhost::valid_name(&name) {
            self.error(
                el,
                path,
                format!("application name [{name}] must be 1-255 letters, digits, '-', '_' or '.' (or * for OME's template)"),
            );
            return None;
        }
        app.name = name;
        Some(app)
    }

    fn output_profile(&mut self, el: &Element, path: &str) -> Option<OutputProfileConfig> {
        let (mut name, mut osn, mut encodes) = (None, None, Vec::new());
        // OME names unnamed encodes video_0, audio_0, ... (counting the
        // unnamed ones of each kind).
        let mut unnamed = [0usize; 3];
        self.children(el, path, UNSUPPORTED_OUTPUT_PROFILE, &[], |w, c, p| {
            match c.name.as_str() {
                "Name" => name = w.nonempty_text(c, p),
                "OutputStreamName" => osn = w.nonempty_text(c, p),
                "Encodes" => w.children(
                    c,
                    p,
                    UNSUPPORTED_ENCODES,
                    &["Video", "Audio", "Data"],
                    |w, c, p| {
                        let (kind, slot, prefix) = match c.name.as_str() {
                            "Video" => (EncodeKind::Video, 0, "video"),
                            "Audio" => (EncodeKind::Audio, 1, "audio"),
                            "Data" => (EncodeKind::Data, 2, "data"),
                            _ => return false,
                        };
                        if let Some(e) = w.encode(c, p, kind, &mut unnamed[slot], prefix) {
                            encodes.push(e);
                        }
                        true
                    },
                ),
                _ => return false,
            }
            true
        });
        let Some(name) = name else {
            self.error(el, path, "<Name> is required");
            return None;
        };
        Some(OutputProfileConfig {
            name,
            output_stream_name: osn.unwrap_or_else(|| "${OriginStreamName}".into()),
            encodes,
        })
    }

    /// One encode. A bypass applies; a conditional bypass on the codec
    /// applies as "pass the track when its codec matches"; any other
    /// (transcoding) encode is skipped with a warning: kiln relays.
    fn encode(
        &mut self,
        el: &Element,
        path: &str,
        kind: EncodeKind,
        unnamed: &mut usize,
        prefix: &str,
    ) -> Option<EncodeConfig> {
        let (mut name, mut bypass, mut codec) = (None, kind == EncodeKind::Data, None);
        let mut codec_eq = false;
        let mut other_conditions = Vec::new();
        let mut shown = Vec::new();
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "Name" => name = w.nonempty_text(c, p),
                "Bypass" => bypass = w.bool_text(c, p).unwrap_or(false),
                "Codec" => codec = w.nonempty_text(c, p),
                "BypassIfMatch" => w.children(c, p, &[], &[], |w, c, p| {
                    let op = w.nonempty_text(c, p).unwrap_or_default();
                    if c.name == "Codec" && op.eq_ignore_ascii_case("eq") {
                        codec_eq = true;
                    } else if ome_schema::is_ome_element(&c.name) {
                        other_conditions.push(c.name.clone());
                    } else {
                        return false;
                    }
                    true
                }),
                // Transcoding settings: OME's, moot for a bypass.
                _ => {
                    if !ome_schema::is_ome_element(&c.name) {
                        return false;
                    }
                    if let Some(v) = w.nonempty_text(c, p) {
                        let mut key = c.name.clone();
                        key[..1].make_ascii_lowercase();
                        shown.push((key, v));
                    }
                }
            }
            true
        });
        let name = name.unwrap_or_else(|| {
            let n = format!("{prefix}_{unnamed}");
            *unnamed += 1;
            n
        });
        if bypass {
            return Some(EncodeConfig {
                kind,
                name,
                if_codec: None,
                shown: Vec::new(),
            });
        }
        match codec {
            Some(codec) if codec_eq => {
                if !other_conditions.is_empty() {
                    self.warn(
                        el,
                        path,
                        format!(
                            "encode [{name}]: only <BypassIfMatch><Codec> is checked (kiln does not transcode); {} not applied",
                            other_conditions.join(", ")
                        ),
                    );
                }
                Some(EncodeConfig {
                    kind,
                    name,
                    if_codec: Some(codec.to_ascii_lowercase()),
                    shown,
                })
            }
            _ => {
                self.warn(
                    el,
                    path,
                    format!("encode [{name}] transcodes; kiln relays streams and does not transcode: skipped (the profile's bypass encodes still apply)"),
                );
                None
            }
        }
    }
}

impl AppConfig {
    /// The application as the registry and the API hold it.
    pub fn to_spec(&self) -> AppSpec {
        let c = self;
        let enc = |kind: EncodeKind, p: &OutputProfileConfig| -> Vec<Encode> {
            p.encodes
                .iter()
                .filter(|e| e.kind == kind)
                .map(|e| match &e.if_codec {
                    None => Encode {
                        name: e.name.clone(),
                        bypass: true,
                        settings: serde_json::Map::new(),
                    },
                    Some(codec) => {
                        let mut enc = Encode::conditional(&e.name, codec);
                        for (k, v) in &e.shown {
                            enc.settings.insert(k.clone(), v.clone().into());
                        }
                        enc
                    }
                })
                .collect()
        };
        AppSpec {
            name: c.name.clone(),
            app_type: "live".into(),
            dynamic: None,
            given: None,
            output_profiles: OutputProfiles {
                output_profile: c
                    .output_profiles
                    .iter()
                    .map(|p| OutputProfile {
                        name: p.name.clone(),
                        output_stream_name: p.output_stream_name.clone(),
                        encodes: Encodes {
                            videos: enc(EncodeKind::Video, p),
                            audios: enc(EncodeKind::Audio, p),
                            datas: enc(EncodeKind::Data, p),
                        },
                    })
                    .collect(),
            },
            providers: Providers {
                rtmp: c.rtmp.then_some(IngestProvider {
                    block_duplicate_stream_name: c.rtmp_block_duplicates,
                }),
                srt: c.srt.then_some(IngestProvider {
                    block_duplicate_stream_name: c.srt_block_duplicates,
                }),
                webrtc: c.webrtc_ingest.clone(),
                schedule: c.schedule.clone(),
                multiplex: c.multiplex.clone(),
                mpegts: c.mpegts.as_ref().map(|map| MpegtsProvider {
                    stream_map: StreamMap {
                        stream: map
                            .iter()
                            .map(|s| StreamMapItem {
                                name: s.name.clone(),
                                port: ports_text(&s.ports),
                            })
                            .collect(),
                    },
                }),
            },
            publishers: Publishers {
                push: c.push.then(Empty::default),
                llhls: c.llhls.clone(),
                webrtc: c.webrtc.clone(),
                hls: c.hls.clone(),
                file: c.file.clone(),
            },
        }
    }
}

impl Config {
    /// The registry of this configuration: its hosts (read-only) with
    /// their applications.
    pub fn registry(&self) -> crate::state::Registry {
        crate::state::Registry::new(
            self.name.clone(),
            self.vhosts
                .iter()
                .map(|v| {
                    (
                        v.spec.clone(),
                        v.applications.iter().map(AppConfig::to_spec).collect(),
                    )
                })
                .collect(),
        )
    }
}

#[derive(Debug, Clone, Default)]
struct ManagersSection {
    host_names: Vec<String>,
    tls: Option<TlsSpec>,
    tls_line: u64,
    tls_column: u64,
    access_token: Option<String>,
    /// `<AccessToken>` is written (even if its text is bad).
    access_token_written: bool,
    cross_domains: Vec<String>,
    limits: ApiLimits,
}

fn config_dir(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn default_state_file(file: &Path) -> PathBuf {
    config_dir(file).join("kiln-state.json")
}

#[cfg(test)]
mod tests;

/// One `<IceCandidate>`: `host:port[-port][/udp|/tcp]`. `Ok(None)`: a TCP
/// candidate (OME's default when the suffix is missing), which kiln does
/// not serve.
fn ice_candidate(text: &str) -> Result<Option<(String, Vec<u16>)>, String> {
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
fn candidate_host(host: &str) -> Result<&str, String> {
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

/// OME's macro for the public address learnt from `<StunServer>`.
pub const PUBLIC_IP: &str = "${PublicIP}";

/// `<StunServer>`: `host[:port]` (3478 when the port is left out).
fn stun_server(text: &str) -> Result<(String, u16), String> {
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
fn tcp_relay(text: &str) -> Result<(String, u16), String> {
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
