//! Test harness: starts the real `kiln` binary with a temporary config on
//! free loopback ports, talks to it over raw TCP (exact bytes) or with real
//! clients (curl, openssl), and stops it. Every wait is bounded.
#![allow(dead_code)]

pub mod openapi;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const TOKEN: &str = "kiln:test-token";
pub const AUTH: &str = "Basic a2lsbjp0ZXN0LXRva2Vu"; // base64("kiln:test-token")

/// A free TCP port on 127.0.0.1 (bound and released). The kernel may hand
/// the same port to two calls in a row, so ports this test process gave out
/// are never given out again (one server's RTMP and LL-HLS ports once came
/// out equal).
/// How many of a stream's tracks (the API's `tracks`) carry media: OME's
/// Data track (timed metadata) is always listed last.
pub fn media_count(tracks: &[serde_json::Value]) -> usize {
    tracks.iter().filter(|t| t["type"] != "Data").count()
}

pub fn free_port() -> u16 {
    unique_port(|| TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()))
}

fn unique_port(bind: impl Fn() -> std::io::Result<SocketAddr>) -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    for _ in 0..1000 {
        let port = bind().map(|a| a.port()).expect("no free port");
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
    panic!("no free port not given out before")
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh temporary folder for one test.
pub fn temp_dir(tag: &str) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("kiln-test-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Is a command-line tool here? When it is not: skip with a printed reason,
/// unless KILN_REQUIRE_INTEROP=1, where a missing tool fails the test.
pub fn have_tool(tool: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !found {
        if std::env::var("KILN_REQUIRE_INTEROP").as_deref() == Ok("1") {
            panic!("{tool} is required (KILN_REQUIRE_INTEROP=1) but not installed");
        }
        eprintln!("SKIP: {tool} is not installed");
    }
    found
}

/// Options for one server.
pub struct ServerOptions {
    pub tls: Option<(PathBuf, PathBuf)>,
    pub cross_domains: Vec<String>,
    pub host_names: Vec<String>,
    pub limits: String,
    pub extra_vhosts: String,
    /// Open the media ports (RTMP, MPEG-TS/UDP, SRT; RTMPS when
    /// `vhost_tls` is set).
    pub media: bool,
    /// The default vhost's certificate (served on RTMPS by SNI).
    pub vhost_tls: Option<(PathBuf, PathBuf)>,
    /// `<IP>`, the address every port binds (loopback unless a test runs
    /// kiln inside a network namespace of its own).
    pub bind_ip: &'static str,
    /// Inside `<Bind><Providers><SRT>` after `<Port>` (e.g. `<Options>`).
    pub srt_options: String,
    /// Serve viewers: the application's `<Publishers><LLHLS>` settings
    /// (with the media ports, the LL-HLS port is opened too).
    pub llhls: Option<String>,
    /// The application's `<Publishers><HLS>` settings (MPEG-TS segments,
    /// served on the same port).
    pub hls: Option<String>,
    /// The application's `<Publishers><FILE>` settings (recording).
    pub file: Option<String>,
    /// More of the application, after its `<Publishers>` (e.g.
    /// `<DiskBudget>`).
    pub app_extra: String,
    /// More of the app's output profile, after its encodes (`<Playlist>`).
    pub profile_extra: String,
    /// A shell command line kiln is started through: `exec "$@"` at its
    /// end runs kiln (e.g. in a mount namespace of the test's own).
    pub wrap: Option<String>,
    /// Inside the default virtual host after `<Host>` (e.g.
    /// `<SignedPolicy>`, `<AdmissionWebhooks>`).
    pub vhost_access: String,
    /// The application's `<Publishers><WebRTC>` (its inner XML); the
    /// bind gets signalling on the LL-HLS port and one ICE candidate on
    /// 127.0.0.1 (`MediaPorts::ice`).
    pub webrtc: Option<String>,
    /// The ICE candidate's (and TCP relay's) address for WebRTC; several,
    /// comma-separated, make one candidate each (the relay on the first).
    pub webrtc_host: &'static str,
    /// Also a TCP relay (`<TcpRelay>`, `MediaPorts::relay`).
    pub webrtc_relay: bool,
    /// More of `<Bind><Publishers><WebRTC>` (e.g. `<MaxSessions>`).
    pub webrtc_bind_extra: String,
    /// More of `<Server>` after `<IP>` (e.g. `<StunServer>`).
    pub server_extra: String,
    /// More of the application's `<Providers>` (e.g. `<Schedule>`).
    /// The application's `<RTMP>` provider element (default `<RTMP/>`).
    pub rtmp_provider: Option<String>,
    /// The application's `<SRT>` provider element (default `<SRT/>`).
    pub srt_provider: Option<String>,
    pub providers_extra: String,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            tls: None,
            cross_domains: vec!["*".into()],
            host_names: vec!["*".into()],
            limits: String::new(),
            extra_vhosts: String::new(),
            media: false,
            vhost_tls: None,
            bind_ip: "127.0.0.1",
            srt_options: String::new(),
            llhls: None,
            hls: None,
            file: None,
            app_extra: String::new(),
            profile_extra: String::new(),
            wrap: None,
            vhost_access: String::new(),
            webrtc: None,
            webrtc_host: "127.0.0.1",
            webrtc_relay: false,
            webrtc_bind_extra: String::new(),
            providers_extra: String::new(),
            server_extra: String::new(),
            rtmp_provider: None,
            srt_provider: None,
        }
    }
}

pub struct Server {
    pub child: Option<Child>,
    pub dir: PathBuf,
    pub config: PathBuf,
    pub port: u16,
    pub tls_port: Option<u16>,
    pub log: PathBuf,
    pub media: MediaPorts,
    pub wrap: Option<String>,
}

/// The media ports of a server (0 when not opened).
#[derive(Debug, Clone, Copy, Default)]
pub struct MediaPorts {
    pub rtmp: u16,
    pub rtmps: u16,
    pub mpegts: u16,
    pub srt: u16,
    /// The LL-HLS viewer port (0: none).
    pub llhls: u16,
    /// Its HTTPS port (with `vhost_tls`; 0: none).
    pub llhls_tls: u16,
    /// WebRTC's ICE candidate (UDP), when the server has WebRTC.
    pub ice: u16,
    /// WebRTC's TCP relay, when asked for.
    pub relay: u16,
}

/// A free UDP port on 127.0.0.1.
pub fn free_udp_port() -> u16 {
    unique_port(|| std::net::UdpSocket::bind("127.0.0.1:0").and_then(|s| s.local_addr()))
}

pub fn kiln_bin() -> &'static str {
    env!("CARGO_BIN_EXE_kiln")
}

pub fn write_config(dir: &Path, port: u16, tls_port: Option<u16>, opts: &ServerOptions) -> PathBuf {
    write_config_with_media(dir, port, tls_port, opts, MediaPorts::default())
}

pub fn write_config_with_media(
    dir: &Path,
    port: u16,
    tls_port: Option<u16>,
    opts: &ServerOptions,
    media: MediaPorts,
) -> PathBuf {
    let mut providers = String::new();
    if media.rtmp != 0 {
        providers.push_str(&format!("<RTMP><Port>{}</Port>", media.rtmp));
        if media.rtmps != 0 {
            providers.push_str(&format!("<TLSPort>{}</TLSPort>", media.rtmps));
        }
        providers.push_str("</RTMP>");
    }
    if media.srt != 0 {
        providers.push_str(&format!(
            "<SRT><Port>{}</Port>{}</SRT>",
            media.srt, opts.srt_options
        ));
    }
    if media.mpegts != 0 {
        providers.push_str(&format!(
            "<MPEGTS><Port>{}/udp</Port><StreamTimeoutMs>1000</StreamTimeoutMs></MPEGTS>",
            media.mpegts
        ));
    }
    let mut providers = if providers.is_empty() {
        String::new()
    } else {
        format!("<Providers>{providers}</Providers>")
    };
    if media.llhls != 0 {
        let tls = match media.llhls_tls {
            0 => String::new(),
            p => format!("<TLSPort>{p}</TLSPort>"),
        };
        let webrtc = if media.ice != 0 {
            // Several hosts (comma-separated): one candidate each, on
            // the same port; the relay on the first.
            let host = opts.webrtc_host.split(',').next().unwrap_or("");
            let relay = match media.relay {
                0 => String::new(),
                p => format!("<TcpRelay>{host}:{p}</TcpRelay>"),
            };
            let candidates: String = opts
                .webrtc_host
                .split(',')
                .map(|h| format!("<IceCandidate>{h}:{}/udp</IceCandidate>", media.ice))
                .collect();
            format!(
                "<WebRTC><Signalling><Port>{}</Port></Signalling><IceCandidates>{candidates}{relay}</IceCandidates>{}</WebRTC>",
                media.llhls, opts.webrtc_bind_extra
            )
        } else {
            String::new()
        };
        providers.push_str(&format!(
            "<Publishers><LLHLS><Port>{}</Port>{tls}</LLHLS>{webrtc}</Publishers>",
            media.llhls
        ));
    }
    let mut llhls_app = opts
        .llhls
        .as_ref()
        .map(|s| format!("<LLHLS>{s}</LLHLS>"))
        .unwrap_or_default();
    if let Some(h) = &opts.hls {
        llhls_app.push_str(&format!("<HLS>{h}</HLS>"));
    }
    if let Some(f) = &opts.file {
        llhls_app.push_str(&format!("<FILE>{f}</FILE>"));
    }
    if let Some(w) = &opts.webrtc {
        llhls_app.push_str(&format!("<WebRTC>{w}</WebRTC>"));
    }
    let stream_map = if media.mpegts != 0 {
        format!(
            "<MPEGTS><StreamMap><Stream><Name>ts_${{Port}}</Name><Port>{}</Port></Stream></StreamMap></MPEGTS>",
            media.mpegts
        )
    } else {
        String::new()
    };
    let vhost_tls = opts
        .vhost_tls
        .as_ref()
        .map(|(c, k)| {
            format!(
                "<TLS><CertPath>{}</CertPath><KeyPath>{}</KeyPath></TLS>",
                c.display(),
                k.display()
            )
        })
        .unwrap_or_default();
    let tls_bind = tls_port
        .map(|p| format!("<TLSPort>{p}</TLSPort>"))
        .unwrap_or_default();
    let tls_files = opts
        .tls
        .as_ref()
        .map(|(c, k)| {
            format!(
                "<TLS><CertPath>{}</CertPath><KeyPath>{}</KeyPath></TLS>",
                c.display(),
                k.display()
            )
        })
        .unwrap_or_default();
    let names: String = opts
        .host_names
        .iter()
        .map(|n| format!("<Name>{n}</Name>"))
        .collect();
    let cors: String = opts
        .cross_domains
        .iter()
        .map(|u| format!("<Url>{u}</Url>"))
        .collect();
    let xml = format!(
        r#"<?xml version="1.0"?>
<Server version="8">
  <Name>kiln-test</Name>
  <IP>{bind_ip}</IP>{server_extra}
  <Bind><Managers><API><Port>{port}</Port>{tls_bind}</API></Managers>{providers}</Bind>
  <Managers>
    <Host><Names>{names}</Names>{tls_files}</Host>
    <API>
      <AccessToken>{TOKEN}</AccessToken>
      <CrossDomains>{cors}</CrossDomains>
      {limits}
    </API>
  </Managers>
  <VirtualHosts>
    <VirtualHost>
      <Name>default</Name>
      <Host><Names><Name>*</Name></Names>{vhost_tls}</Host>
      {vhost_access}
      <Applications><Application><Name>app</Name><Type>live</Type>
        <OutputProfiles><OutputProfile><Name>bypass</Name><Encodes>
          <Video><Name>bypass_video</Name><Bypass>true</Bypass></Video>
          <Audio><Name>bypass_audio</Name><Bypass>true</Bypass></Audio>
        </Encodes>{profile_extra}</OutputProfile></OutputProfiles>
        <Providers>{rtmp_provider}{srt_provider}{stream_map}{webrtc_provider}{providers_extra}</Providers><Publishers><Push/>{llhls_app}</Publishers>{app_extra}
      </Application></Applications>
    </VirtualHost>
    {extra}
  </VirtualHosts>
</Server>
"#,
        limits = opts.limits,
        // WebRTC viewers' apps take WebRTC publishers too (WHIP), with
        // the viewers' <Timeout> if one is given.
        webrtc_provider = match &opts.webrtc {
            Some(w) => {
                let timeout = w
                    .split_once("<Timeout>")
                    .and_then(|(_, t)| t.split_once("</Timeout>"))
                    .map(|(t, _)| format!("<Timeout>{t}</Timeout>"))
                    .unwrap_or_default();
                format!("<WebRTC>{timeout}</WebRTC>")
            }
            None => String::new(),
        },
        bind_ip = opts.bind_ip,
        server_extra = opts.server_extra,
        extra = opts.extra_vhosts,
        vhost_access = opts.vhost_access,
        providers_extra = opts.providers_extra,
        app_extra = opts.app_extra,
        profile_extra = opts.profile_extra,
        rtmp_provider = opts.rtmp_provider.as_deref().unwrap_or("<RTMP/>"),
        srt_provider = opts.srt_provider.as_deref().unwrap_or("<SRT/>"),
    );
    let path = dir.join("server.xml");
    std::fs::write(&path, xml).unwrap();
    path
}

impl Server {
    pub fn start(tag: &str) -> Server {
        Self::start_with(tag, ServerOptions::default())
    }

    /// A server with the media ports (RTMP, MPEG-TS/UDP, SRT) open.
    pub fn start_media(tag: &str) -> Server {
        Self::start_with(
            tag,
            ServerOptions {
                media: true,
                ..Default::default()
            },
        )
    }

    pub fn start_with(tag: &str, opts: ServerOptions) -> Server {
        // Free ports are picked, released, then bound by kiln: another
        // process (a client's ephemeral port) may take one in between. Such
        // a start is retried on fresh ports.
        for attempt in 1.. {
            let dir = temp_dir(tag);
            let port = free_port();
            let tls_port = opts.tls.as_ref().map(|_| free_port());
            let media = if opts.media {
                MediaPorts {
                    rtmp: free_port(),
                    rtmps: if opts.vhost_tls.is_some() {
                        free_port()
                    } else {
                        0
                    },
                    mpegts: free_udp_port(),
                    srt: free_udp_port(),
                    ice: if opts.webrtc.is_some() {
                        free_udp_port()
                    } else {
                        0
                    },
                    relay: if opts.webrtc_relay { free_port() } else { 0 },
                    llhls: if opts.llhls.is_some() || opts.hls.is_some() || opts.webrtc.is_some() {
                        free_port()
                    } else {
                        0
                    },
                    llhls_tls: if opts.llhls.is_some() && opts.vhost_tls.is_some() {
                        free_port()
                    } else {
                        0
                    },
                }
            } else {
                MediaPorts::default()
            };
            let config = write_config_with_media(&dir, port, tls_port, &opts, media);
            let mut s = Server {
                media,
                wrap: opts.wrap.clone(),
                child: None,
                dir: dir.clone(),
                config,
                port,
                tls_port,
                log: dir.join("kiln.log"),
            };
            match s.try_spawn() {
                Ok(()) => return s,
                Err(log) if attempt < 5 && log.contains("Address already in use") => {
                    eprintln!("port taken meanwhile; starting again on other ports");
                }
                Err(log) => panic!("kiln did not start:\n{log}"),
            }
        }
        unreachable!()
    }

    /// Starts the process (again) with the same config and state file.
    pub fn spawn(&mut self) {
        if let Err(log) = self.try_spawn() {
            panic!("kiln did not start (port {}):\n{log}", self.port);
        }
    }

    /// Starts the process and waits (10 s at most) for its API port; the
    /// log when it exits or never listens.
    fn try_spawn(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut cmd = match &self.wrap {
            None => Command::new(kiln_bin()),
            Some(script) => {
                let mut c = Command::new("sh");
                c.arg("-c").arg(script).arg("kiln").arg(kiln_bin());
                c
            }
        };
        let child = cmd
            .arg("-c")
            .arg(&self.config)
            .env("KILN_LOG", "debug")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("kiln starts");
        self.child = Some(child);
        let t0 = Instant::now();
        loop {
            // A connect to a port nothing listens on can meet itself (TCP
            // simultaneous open, when the port is in the ephemeral range and
            // comes out as the client's own): that is not kiln.
            if let Ok(c) = TcpStream::connect(("127.0.0.1", self.port)) {
                if c.local_addr().ok() != c.peer_addr().ok() {
                    return Ok(());
                }
            }
            let exited = self
                .child
                .as_mut()
                .is_some_and(|c| c.try_wait().ok().flatten().is_some());
            if exited || t0.elapsed() > Duration::from_secs(10) {
                self.kill9();
                return Err(self.log_text());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn state_file(&self) -> PathBuf {
        self.dir.join("kiln-state.json")
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL and wait.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM; returns how long the process took to exit and its status.
    pub fn terminate(&mut self) -> (Duration, std::process::ExitStatus) {
        let mut c = self.child.take().expect("running");
        let t0 = Instant::now();
        Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status()
            .unwrap();
        loop {
            if let Some(status) = c.try_wait().unwrap() {
                return (t0.elapsed(), status);
            }
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = c.kill();
                panic!("kiln did not exit within 10 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// One request on a fresh connection.
    pub fn request(&self, method: &str, path: &str, body: Option<&str>) -> HttpResponse {
        self.request_with(method, path, &[("Authorization", AUTH)], body)
    }

    /// `POST .../default/apps/app:startPush` with `body`.
    pub fn start_push(&self, body: serde_json::Value) -> HttpResponse {
        self.request(
            "POST",
            "/v1/vhosts/default/apps/app:startPush",
            Some(&body.to_string()),
        )
    }

    /// The live stream `name` of `default/app` as the API shows it, when
    /// it is listed.
    pub fn live_stream(&self, name: &str) -> Option<serde_json::Value> {
        let r = self.request(
            "GET",
            &format!("/v1/vhosts/default/apps/app/streams/{name}"),
            None,
        );
        (r.status == 200).then(|| r.json()["response"].clone())
    }

    /// Waits (30 s at most: a publisher that is a browser may take 10 s
    /// just to start on a busy machine) for live stream `name` of
    /// `default/app` to show with both its tracks (video and audio) known;
    /// panics otherwise.
    pub fn wait_for_tracks(&self, name: &str) -> serde_json::Value {
        self.tracks_within(name, Duration::from_secs(30))
            .unwrap_or_else(|| panic!("stream {name} never showed with two tracks"))
    }

    /// Live stream `name` of `default/app` once it shows both its tracks,
    /// if it does within `wait`.
    pub fn tracks_within(&self, name: &str, wait: Duration) -> Option<serde_json::Value> {
        let t0 = Instant::now();
        loop {
            if let Some(v) = self.live_stream(name).filter(|v| {
                v["input"]["tracks"]
                    .as_array()
                    .is_some_and(|t| media_count(t) == 2)
            }) {
                return Some(v);
            }
            if t0.elapsed() >= wait {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The push task `id` of `default/app`, as `:pushes` shows it.
    pub fn push_task(&self, id: &str) -> Option<serde_json::Value> {
        let r = self.request(
            "POST",
            "/v1/vhosts/default/apps/app:pushes",
            Some(&serde_json::json!({ "id": id }).to_string()),
        );
        r.json()["response"]
            .as_array()
            .and_then(|a| a.first().cloned())
    }

    pub fn request_with(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> HttpResponse {
        let mut s = connect(self.port);
        send_request(&mut s, method, path, headers, body, true);
        let r = read_response(&mut BufReader::new(s), method == "HEAD").expect("a response");
        // Every answer the test suite gets is held to the OpenAPI document.
        if method != "OPTIONS" && method != "HEAD" {
            openapi::spec().validate(method, path, &r);
        }
        r
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // How kiln ended, if it ended before the test did (a signal from
        // outside, an abort): its log cannot say.
        let ended = self
            .child
            .as_mut()
            .and_then(|c| Some((c.id(), c.try_wait().ok().flatten()?)));
        self.kill9();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            if let Some((pid, status)) = ended {
                eprintln!("kiln (pid {pid}) had already ended: {status}");
            }
            eprintln!("kiln log ({}):\n{}", self.log.display(), self.log_text());
        }
    }
}

pub fn wait_for_port(port: u16, limit: Duration) {
    let t0 = Instant::now();
    // A connection that meets itself (TCP simultaneous open) is not a listener.
    let listening = || {
        TcpStream::connect(("127.0.0.1", port))
            .is_ok_and(|c| c.local_addr().ok() != c.peer_addr().ok())
    };
    while !listening() {
        if t0.elapsed() > limit {
            panic!("port {port} did not open within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until something listens on 127.0.0.1:`port` without connecting to
/// it (one-shot listeners such as `ffmpeg -listen 1` take one connection).
pub fn wait_for_listen(port: u16, limit: Duration) {
    let t0 = Instant::now();
    let needle = format!(":{port:04X} ");
    loop {
        let tables = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default()
            + &std::fs::read_to_string("/proc/net/tcp6").unwrap_or_default();
        // local_address is field 2, state 0A is LISTEN
        if tables.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && format!("{} ", f[1]).contains(&needle) && f[3] == "0A"
        }) {
            return;
        }
        if t0.elapsed() > limit {
            panic!("nothing listens on port {port} after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

pub fn send_request(
    s: &mut TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    close: bool,
) {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    if close {
        req.push_str("Connection: close\r\n");
    }
    req.push_str("\r\n");
    if let Some(b) = body {
        req.push_str(b);
    }
    s.write_all(req.as_bytes()).unwrap();
}

#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn message(&self) -> String {
        self.json()["message"].as_str().unwrap_or("").to_string()
    }
}

/// Reads one response (Content-Length framed, as kiln always sends).
pub fn read_response<R: BufRead>(r: &mut R, head_only: bool) -> std::io::Result<HttpResponse> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            headers.push((n.trim().to_string(), v.trim().to_string()));
        }
    }
    let len: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; if head_only || status == 100 { 0 } else { len }];
    r.read_exact(&mut body)?;
    Ok(HttpResponse {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Runs curl; returns (status code, body). `args` come before the URL.
pub fn curl(args: &[&str], url: &str) -> (u16, String, Output) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string(), out)
}

/// A self-signed certificate for 127.0.0.1 and localhost: (cert, key) paths.
pub fn make_cert(dir: &Path, tag: &str) -> (PathBuf, PathBuf) {
    let ck =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap();
    let cert = dir.join(format!("{tag}-cert.pem"));
    let key = dir.join(format!("{tag}-key.pem"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

/// OME's algorithm written again in Python (not kiln's code): `url` plus
/// `policy=base64url(policy)`, then `signature=base64url(HMAC-SHA1)`.
pub fn sign_url_python(secret: &str, url: &str, policy: &serde_json::Value) -> String {
    let script = r#"
import base64, hashlib, hmac, sys
secret, url, policy = sys.argv[1], sys.argv[2], sys.argv[3]
b64 = lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")
sep = "&" if "?" in url else "?"
signed = url + sep + "policy=" + b64(policy.encode())
sig = b64(hmac.new(secret.encode(), signed.encode(), hashlib.sha1).digest())
print(signed + "&signature=" + sig)
"#;
    let out = Command::new("python3")
        .args(["-c", script, secret, url, &policy.to_string()])
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A bare RTMP publish with kiln's own client (no ffmpeg start-up): the
/// status it ends on. The connection closes when this returns.
pub fn rtmp_publish(port: u16, key: &str) -> Result<(), String> {
    let sock = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    rtmp_publishing(sock, port, key).map(drop)
}

/// Drives kiln's own RTMP client on `sock` (connected to kiln's `port`)
/// through `connect` and `publish` of `app/{key}`: the session, publishing,
/// and its socket, or how the publish ended.
pub fn rtmp_publishing(
    mut sock: TcpStream,
    port: u16,
    key: &str,
) -> Result<(kiln::rtmp::ClientSession, TcpStream), String> {
    use kiln::rtmp::{ClientConfig, ClientSession, ClientState};
    let config = ClientConfig::new(&format!("rtmp://127.0.0.1:{port}/app"), "app", key);
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut c = ClientSession::new(config);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        rtmp_flush(&mut c, &mut sock)?;
        match c.state() {
            ClientState::Publishing => return Ok((c, sock)),
            ClientState::Failed => return Err(format!("{:?}", c.poll_event())),
            _ => {}
        }
        let n = sock.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed".into());
        }
        c.handle_input(&buf[..n]).map_err(|e| e.to_string())?;
    }
}

/// Writes what an RTMP client session has to send.
pub fn rtmp_flush(c: &mut kiln::rtmp::ClientSession, sock: &mut TcpStream) -> Result<(), String> {
    let out = c.pending_output().to_vec();
    sock.write_all(&out).map_err(|e| e.to_string())?;
    c.consume_output(out.len());
    Ok(())
}

/// A server's resident memory (KiB).
pub fn rss_kib(s: &Server) -> u64 {
    let pid = s.child.as_ref().expect("running").id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Runs `tool args` (network namespace set-up); its stderr on failure.
pub fn run(tool: &str, args: &[String]) -> Result<(), String> {
    let out = Command::new(tool)
        .args(args)
        .output()
        .map_err(|e| format!("{tool}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{tool} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Network namespaces a test made, or `None` after saying why they could
/// not be made (a failure under `KILN_REQUIRE_INTEROP=1`).
pub fn netns_or_skip<T>(made: Result<T, String>) -> Option<T> {
    match made {
        Ok(n) => Some(n),
        Err(e) => {
            if std::env::var("KILN_REQUIRE_INTEROP").as_deref() == Ok("1") {
                panic!("network namespaces are required (KILN_REQUIRE_INTEROP=1): {e}");
            }
            eprintln!("SKIP: cannot make network namespaces here: {e}");
            None
        }
    }
}

/// Moves the calling thread (and what it spawns later) into `ns`.
pub fn enter_netns(ns: &str) {
    let f = std::fs::File::open(format!("/run/netns/{ns}")).expect("namespace file");
    // SAFETY: setns on a valid namespace fd only changes this thread's
    // network namespace.
    let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns {ns}: {}", std::io::Error::last_os_error());
}

/// Packets the counters of nftables table `inet TABLE` in namespace `ns`
/// counted (what its rules dropped).
pub fn nft_counted(ns: &str, table: &str) -> u64 {
    nft_packets(ns, &["table", "inet", table])
}

/// Packets the counters of what `nft list WHAT...` shows in `ns` counted.
pub fn nft_packets(ns: &str, what: &[&str]) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "list"])
        .args(what)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let words: Vec<&str> = out.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[0] == "packets")
        .filter_map(|w| w[1].parse::<u64>().ok())
        .sum()
}

/// Forwards datagrams between one client and `upstream`, dropping about
/// `loss_pct` percent each way and holding one datagram back now and then
/// (reordering). The client side is bound at `front` (`127.0.0.1:0`: any
/// port). Returns the proxy's port and (dropped, forwarded) counters.
pub fn lossy_proxy(
    front: &str,
    upstream: SocketAddr,
    loss_pct: u64,
    stop: Arc<AtomicBool>,
) -> (u16, Arc<AtomicU64>, Arc<AtomicU64>) {
    let front = UdpSocket::bind(front).unwrap();
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

/// Chromium and the pinned hls.js (`tests/web`), or `None` after saying
/// why (a failure under `KILN_REQUIRE_INTEROP=1`).
pub fn browser_with_hlsjs() -> Option<(&'static str, std::path::PathBuf)> {
    let Some(browser) = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| have_tool_quiet(c))
    else {
        have_tool("chromium");
        return None;
    };
    let web = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web");
    if !web.join("node_modules/hls.js/dist/hls.min.js").exists() {
        assert!(
            std::env::var("KILN_REQUIRE_INTEROP").as_deref() != Ok("1"),
            "hls.js is required: npm ci --prefix tests/web"
        );
        eprintln!("SKIP: hls.js is not installed (npm ci --prefix tests/web)");
        return None;
    }
    Some((browser, web))
}

/// The fatal errors among those hls.js reported (`errors` of the page's
/// result).
pub fn hlsjs_fatal_errors(r: &serde_json::Value) -> Vec<&str> {
    r["errors"]
        .as_array()
        .expect("the page reports its errors")
        .iter()
        .filter_map(|e| e.as_str())
        .filter(|e| e.contains("fatal"))
        .collect()
}

/// Opens the page in headless Chromium for `seconds` and returns what it
/// logged (`KILN-RESULT {json}`).
pub fn play_hlsjs(
    browser: &str,
    page: &str,
    profile: &std::path::Path,
    seconds: u32,
) -> serde_json::Value {
    let mut child = Command::new("timeout")
        // A busy machine may take Chromium many seconds to start and load
        // the page: a wide margin (the result is read as soon as the page
        // logs it, and Chromium is then stopped).
        .arg((seconds + 40).to_string())
        .arg(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--autoplay-policy=no-user-gesture-required",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(page)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = String::new();
    if let Some(err) = child.stderr.take() {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            log.push_str(&line);
            log.push('\n');
            if line.contains("KILN-RESULT ") {
                break;
            }
        }
    }
    // `timeout` ends Chromium with it (its process group).
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    let result = log
        .lines()
        .find_map(|l| l.split("KILN-RESULT ").nth(1))
        .map(|r| {
            r.rsplit_once("\", source")
                .map_or(r, |(j, _)| j)
                .replace("\\\"", "\"")
        })
        .unwrap_or_else(|| panic!("no result from the page:\n{log}"));
    serde_json::from_str(&result).unwrap_or_else(|e| panic!("{e}: {result}"))
}

pub fn have_tool_quiet(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool} >/dev/null 2>&1")])
        .status()
        .is_ok_and(|s| s.success())
}

/// One RTMP message as one or more chunks (csid 3, stream 0, 128-byte
/// chunks: the default size).
pub fn rtmp_message(type_id: u8, payload: &[u8]) -> Vec<u8> {
    let mut m = vec![0x03, 0, 0, 0];
    m.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    m.push(type_id);
    m.extend_from_slice(&[0, 0, 0, 0]);
    for (i, piece) in payload.chunks(128).enumerate() {
        if i > 0 {
            m.push(0xC3);
        }
        m.extend_from_slice(piece);
    }
    m
}

/// An AMF0 command message (name, transaction id, arguments).
pub fn rtmp_command(name: &str, txn: f64, args: &[kiln::rtmp::amf0::Amf0Value]) -> Vec<u8> {
    use kiln::rtmp::amf0::Amf0Value;
    let mut values = vec![Amf0Value::String(name.into()), Amf0Value::Number(txn)];
    values.extend_from_slice(args);
    let mut payload = Vec::new();
    kiln::rtmp::amf0::encode_all(&values, &mut payload);
    rtmp_message(20, &payload)
}

/// An RTMP connection to kiln's `port` whose `connect` to `app` was
/// answered (`_result` read), as a client is before `createStream`.
pub fn rtmp_connected(port: u16, app: &str) -> Result<TcpStream, String> {
    use kiln::rtmp::amf0::Amf0Value;
    let mut c = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    c.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let mut hs = vec![3u8];
    hs.extend(std::iter::repeat_n(0u8, 2 * 1536));
    c.write_all(&hs).map_err(|e| e.to_string())?;
    let connect = Amf0Value::Object(vec![
        ("app".into(), Amf0Value::String(app.into())),
        (
            "tcUrl".into(),
            Amf0Value::String(format!("rtmp://127.0.0.1:{port}/{app}")),
        ),
    ]);
    c.write_all(&rtmp_command("connect", 1.0, &[connect]))
        .map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(7).any(|w| w == b"_result") {
        let n = c
            .read(&mut buf)
            .map_err(|e| format!("no answer to connect: {e}"))?;
        if n == 0 {
            return Err("closed before answering connect".into());
        }
        got.extend_from_slice(&buf[..n]);
    }
    Ok(c)
}

/// Writes `bytes` to `t` again and again (whole: a short write goes on
/// where it stopped, so frames stay frames), never reading, while `go`
/// says so (asked after each try); the bytes the peer took. Writes time
/// out after 100 ms when the peer stops reading; the flood ends when the
/// peer closes.
pub fn flood(t: &mut TcpStream, bytes: &[u8], mut go: impl FnMut() -> bool) -> usize {
    t.set_write_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let (mut sent, mut at) = (0, 0);
    loop {
        match t.write(&bytes[at..]) {
            Ok(n) => {
                sent += n;
                at = (at + n) % bytes.len();
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return sent,
        }
        if !go() {
            return sent;
        }
    }
}
