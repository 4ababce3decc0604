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

mod app;
pub mod dom;
pub mod ome_schema;
mod server;
mod vhost;
mod webrtc;

use crate::state::app::{
    ports_text, AppSpec, Empty, Encode, Encodes, IngestProvider, MpegtsProvider, OutputProfile,
    OutputProfiles, Providers, Publishers, StreamMap, StreamMapItem,
};
use crate::state::vhost::{TlsSpec, VhostSpec};
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
    /// `<DiskBudget>` (kiln extension): all recordings of the server.
    pub disk_budget: Option<crate::state::app::DiskBudget>,
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
    /// `<Providers><SRT><AudioMap>` (OME's audio track labels).
    pub srt_audio_map: Vec<crate::state::app::AudioMapItem>,
    /// `<Providers><MPEGTS><StreamMap>`: (stream name pattern, ports).
    pub mpegts: Option<Vec<StreamMapEntry>>,
    /// `<Providers><MPEGTS><AudioMap>`.
    pub mpegts_audio_map: Vec<crate::state::app::AudioMapItem>,
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
    /// `<DiskBudget>` (kiln extension).
    pub disk_budget: Option<crate::state::app::DiskBudget>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OutputProfileConfig {
    pub name: String,
    pub output_stream_name: String,
    pub encodes: Vec<EncodeConfig>,
    pub playlists: Vec<crate::state::playlists::PlaylistSpec>,
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
    /// What the configuration turns off without meaning to (WebRTC with no
    /// UDP candidate left): `--check-config` fails on each, a start logs each
    /// as an ERROR line and runs without that part.
    pub off: Vec<ConfigError>,
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
        off: Vec::new(),
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
            off: w.off,
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
const UNSUPPORTED_OUTPUT_PROFILE: &[&str] = &["Playlists"];
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
    off: Vec<ConfigError>,
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

    /// A part the configuration leaves off (see `Loaded::off`).
    fn off(&mut self, at: &Element, path: &str, message: impl Into<String>) {
        self.off.push(ConfigError {
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

    /// `<CrossDomains><Url>...` of a viewer publisher.
    fn cross_domains(&mut self, el: &Element, path: &str) -> Vec<String> {
        self.repeated(el, path, &[], "Url", |w, c, p| w.nonempty_text(c, p))
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

    /// `<DiskBudget>` (kiln extension): `<MaxTotalMB>` and `<MinFreeMB>`.
    fn disk_budget(&mut self, el: &Element, path: &str) -> crate::state::app::DiskBudget {
        let mut b = crate::state::app::DiskBudget::default();
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "MaxTotalMB" => b.max_total_mb = w.number(c, p),
                "MinFreeMB" => b.min_free_mb = w.number(c, p),
                _ => return false,
            }
            true
        });
        b
    }

    fn names_list(&mut self, el: &Element, path: &str) -> Vec<String> {
        self.repeated(el, path, &[], "Name", |w, c, p| w.nonempty_text(c, p))
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
            disk_budget: c.disk_budget,
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
                        playlists: p.playlists.clone(),
                    })
                    .collect(),
            },
            providers: Providers {
                rtmp: c.rtmp.then_some(IngestProvider {
                    block_duplicate_stream_name: c.rtmp_block_duplicates,
                    audio_map: Vec::new(),
                }),
                srt: c.srt.then(|| IngestProvider {
                    block_duplicate_stream_name: c.srt_block_duplicates,
                    audio_map: c.srt_audio_map.clone(),
                }),
                webrtc: c.webrtc_ingest.clone(),
                schedule: c.schedule.clone(),
                multiplex: c.multiplex.clone(),
                mpegts: c.mpegts.as_ref().map(|map| MpegtsProvider {
                    audio_map: c.mpegts_audio_map.clone(),
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
        let mut reg = crate::state::Registry::new(
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
        );
        reg.disk_budget = self.disk_budget;
        reg
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

/// OME's macro for the public address learnt from `<StunServer>`.
pub const PUBLIC_IP: &str = "${PublicIP}";
