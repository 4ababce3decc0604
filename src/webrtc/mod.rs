//! WebRTC playback (issue 30): every viewer is a str0m [`Rtc`] (ICE-lite,
//! DTLS, SRTP, RTP/RTCP, NACK/RTX, sender reports), fed by this table
//! with datagrams and `now` and drained for datagrams to send, events and
//! its next timeout, like every other core of kiln. Sans-IO: the loop
//! owns the UDP sockets (one per ICE candidate address), hands each
//! datagram to [`WebRtc::handle_datagram`] and sends what
//! [`WebRtc::take_outbox`] returns.
//!
//! Media reaches viewers once per stream: a video frame becomes RTP
//! payloads once ([`packetize`]: parameter sets before each keyframe), AAC
//! becomes Opus once ([`audio`]), and each viewer's `Rtc` (in str0m's RTP
//! mode) only writes its RTP header and encrypts; its NACK history holds
//! the shared payloads. A new
//! viewer starts at the stream's last keyframe at once (the GOP kiln
//! keeps, sent with its timestamps squeezed so the browser shows the
//! current picture without waiting).
//!
//! The per-stream fan-out is in `feed.rs`, publishing sessions in
//! `publish.rs`; this file holds the session table, its sockets' traffic
//! and the signalling's offers and answers.
//!
//! Sessions are found by the ufrag of the peer's first STUN request, then
//! by its address (taken only from a request signed with the session's
//! password); a session that does not connect within [`CONNECT_WITHIN`]
//! (or the app's `Timeout`, if shorter), or whose peer stops answering
//! (ICE consent), ends. One client address holds at most
//! `max_per_address` sessions (a share of `<MaxSessions>`).

pub mod abr;
pub mod audio;
pub mod bframes;
mod feed;
#[doc(hidden)]
pub mod fuzz;
pub mod ingest;
pub mod packetize;
mod publish;
pub mod sdp;
pub mod signal;
mod srtp;
pub mod stun;
pub mod turn;

pub use feed::AudioWork;
use feed::{write_chunk, Feed, Outgoing};
use publish::Publish;

use crate::media::{Codec, TrackId};
use crate::state::streams::{IngestOutput, LiveStream, StreamId, StreamMap, Streams};
use slab::Slab;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use str0m::change::{SdpAnswer, SdpOffer, SdpPendingOffer};
use str0m::format::Codec as RtcCodec;
use str0m::media::{Direction, MediaKind, Mid, Pt};
use str0m::net::{Protocol, Receive};
use str0m::rtp::Extension;
use str0m::{Candidate, Event, IceConnectionState, IceCreds, Input, Output, Rtc, RtcConfig};

/// Video packets each session keeps to answer NACKs from.
const VIDEO_HISTORY: usize = 64;
/// Packets a session is given at a time before they are sent: str0m's
/// send queue (408 bytes a packet) never shrinks, and a GOP given at once
/// to a joining viewer, or a keyframe of a hundred packets, would keep it
/// at that size for the session's life. Eight: 3.3 KB of queue; a
/// chunk costs the session two timeouts of its stack, not one a packet
/// (`vendor/str0m`'s pacer).
const CHUNK: usize = 8;

/// Sessions at most at once (every viewer, connected or not).
pub const DEFAULT_MAX_SESSIONS: usize = 1000;
/// A session must complete ICE and DTLS this soon after its offer or
/// answer, or it ends and holds nothing (its slot, a publisher's stream
/// name, the stream's audio transcoder): a browser does it in well under
/// a second, through the TCP relay in a few.
pub const CONNECT_WITHIN: Duration = Duration::from_secs(10);
/// Peer addresses one session may be reached from (ICE tries a few).
const MAX_ADDRS_PER_SESSION: usize = 8;
/// Datagrams waiting for one socket; past it the oldest are dropped (UDP:
/// a viewer that cannot keep up loses packets, kiln does not grow).
const MAX_OUTBOX: usize = 8192;
/// Past this many datagrams waiting for a socket, sessions stop writing
/// their frames into their stacks until the socket has taken them (a
/// keyframe of 55 packets to 200 viewers is 11,000 datagrams in one turn:
/// without the pause the outbox overflowed and every viewer lost part of
/// every keyframe). What waits meanwhile is each session's queue of
/// frames, shared payloads, bounded by [`MAX_QUEUED_FRAMES`]. Each
/// datagram waiting is an allocation of its own (a sealed packet, 1.2
/// KB), and the heap keeps the outbox's high-water mark: at 2,048 it was
/// 19 KiB per viewer at 200 viewers, at 128 (two `sendmmsg` batches) 1.3
/// KiB, for the same CPU (BENCHMARKS.md).
const OUTBOX_PAUSE: usize = 128;
/// Frames one session may hold unwritten (about 4 s of 30 fps video and
/// its audio); past it its oldest frames go (a viewer that cannot keep up
/// loses frames and asks for a keyframe; the others do not notice).
const MAX_QUEUED_FRAMES: usize = 400;
/// The audio a viewer gets beside a rendition's video, in what the
/// automatic choice counts (Opus, as the transcoder makes it or a
/// browser sends it).
const AUDIO_RATE: u64 = 64_000;

/// How a session ended, for the log and the signalling socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndReason {
    /// The viewer said so (WHEP DELETE, `stop`, socket closed).
    Stopped,
    /// The stream it plays ended.
    StreamEnded,
    /// ICE never completed or consent was lost.
    TimedOut,
    /// The WebRTC stack failed (the message says how).
    Failed(String),
}

/// A session that ended: the loop closes what it held (its admission,
/// its signalling socket).
#[derive(Debug, Clone)]
pub struct Ended {
    pub key: String,
    pub stream: StreamId,
    pub tag: u64,
    /// The signalling connection that made it (OME's WebSocket), if any.
    pub owner: Option<usize>,
    /// It had connected (it counted as a viewer).
    pub connected: bool,
    /// It published `stream` (WHIP, OME's `direction=send`): the stream
    /// ends with it.
    pub published: bool,
    pub reason: EndReason,
}

/// Why an offer or answer was refused (HTTP-like statuses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebRtcError {
    /// 400: the SDP could not be parsed or used.
    BadSdp(String),
    /// 503: too many sessions.
    Full,
    /// 503: too many sessions from this client address.
    AddressFull,
    /// 404: no such session.
    NoSession,
    /// 500: the stack refused (its message).
    Internal(String),
}

impl WebRtcError {
    pub fn status(&self) -> u16 {
        match self {
            WebRtcError::BadSdp(_) => 400,
            WebRtcError::Full | WebRtcError::AddressFull => 503,
            WebRtcError::NoSession => 404,
            WebRtcError::Internal(_) => 500,
        }
    }
}

impl std::fmt::Display for WebRtcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WebRtcError::BadSdp(e) => write!(f, "Could not use the SDP: {e}"),
            WebRtcError::Full => f.write_str("Too many WebRTC sessions"),
            WebRtcError::AddressFull => f.write_str("Too many WebRTC sessions from this address"),
            WebRtcError::NoSession => f.write_str("No such WebRTC session"),
            WebRtcError::Internal(e) => write!(f, "WebRTC: {e}"),
        }
    }
}

/// A datagram to send from one of kiln's ICE sockets.
pub struct Datagram {
    pub to: SocketAddr,
    pub data: Vec<u8>,
}

/// Per-session options from the application (`<Publishers><WebRTC>`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionOptions {
    /// ICE must complete, and the peer keep answering, within this.
    pub timeout: Duration,
    /// The session ends then (signed policy's `stream_expire`, a
    /// webhook's `lifetime`).
    pub end_by: Option<Instant>,
    /// The loop's tag (its admission id), handed back when it ends.
    pub tag: u64,
    /// The signalling connection that owns it, told when it ends.
    pub owner: Option<usize>,
    /// The client's address (its share of the sessions).
    pub client: Option<std::net::IpAddr>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            timeout: Duration::from_secs(30),
            end_by: None,
            tag: 0,
            owner: None,
            client: None,
        }
    }
}

/// What the stream gives a new session (its tracks as the SDP states them).
#[derive(Debug, Clone, Copy, Default)]
struct Offerable {
    video: bool,
    /// The video is VP8 (a WebRTC publisher's), not H.264.
    vp8: bool,
    audio: bool,
    /// Opus channels for the audio (the source's, or the transcoder's).
    stereo: bool,
}

struct Session {
    /// Boxed: an `Rtc` is 10 KB, and the table grows by doubling; inline,
    /// 200 sessions held 256 slots of it.
    rtc: Box<Rtc>,
    stream: StreamId,
    /// What the stream could give when the session was made (the codecs
    /// its SDP offers or accepts).
    what: Offerable,
    key: String,
    ufrag: String,
    /// The local ICE password: a peer address is taken only from a STUN
    /// request signed with it.
    pass: String,
    client: Option<std::net::IpAddr>,
    tag: u64,
    owner: Option<usize>,
    end_by: Option<Instant>,
    video: Option<(Mid, Pt)>,
    audio: Option<(Mid, Pt)>,
    /// Waiting for the answer to kiln's offer (OME's signalling).
    pending: Option<SdpPendingOffer>,
    /// The m-lines, as the offer has them.
    mids: Vec<(Mid, MediaKind)>,
    connected: bool,
    /// The GOP has been given; live frames flow.
    started: bool,
    /// Frames given to the session and not yet all written to its `Rtc`:
    /// [`CHUNK`] packets at a time, each chunk sent before the next is
    /// written, within the poll that follows unless the sockets' outboxes
    /// are full ([`OUTBOX_PAUSE`]): then they wait, at most
    /// [`MAX_QUEUED_FRAMES`], until [`WebRtc::resume`].
    outgoing: VecDeque<Outgoing>,
    /// Until ICE completes; then consent (the stack's) keeps it.
    connect_by: Instant,
    addrs: Vec<(SocketAddr, SocketAddr)>,
    /// The deadline this session has in [`WebRtc::deadlines`].
    deadline: Option<Instant>,
    /// Keyframe requests (PLI/FIR) received.
    keyframe_requests: u64,
    /// The video track (rendition) it plays when not the stream's first,
    /// and the one it switches to at that track's next keyframe; set once
    /// a switch happened, until the signalling says so.
    layer: Option<TrackId>,
    want_layer: Option<TrackId>,
    layer_switched: bool,
    /// Automatic choice among the stream's renditions (OME's
    /// `WebRtcAutoAbr`): on for a viewer until it chooses one.
    abr: Option<abr::AutoAbr>,
    /// The next RTP sequence numbers of its video and audio (extended;
    /// random 15-bit starts).
    video_seq: u64,
    audio_seq: u64,
    /// Set when the session publishes `stream` (its media comes in).
    publish: Option<Box<Publish>>,
    /// In [`WebRtc::paused`]: its frames wait for room in the outbox.
    paused: bool,
    /// When it was made, and the bytes of its datagrams both ways.
    opened: Instant,
    bytes: u64,
}

impl Session {
    /// It plays `track` from now (`first`, the stream's first video
    /// track, is what no `layer` means); its signalling connection is told
    /// (`switched`, by owner).
    fn switch_layer(
        &mut self,
        track: TrackId,
        first: Option<TrackId>,
        switched: &mut Vec<(usize, String)>,
    ) {
        self.layer = (Some(track) != first).then_some(track);
        self.want_layer = None;
        self.layer_switched = true;
        if let Some(owner) = self.owner {
            switched.push((owner, self.key.clone()));
        }
    }
}

/// One session as the sessions API lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    pub key: String,
    pub publisher: bool,
    pub connected: bool,
    /// The peer's media address once ICE found it, else the address it
    /// signalled from.
    pub remote: Option<String>,
    pub opened: Instant,
    pub bytes: u64,
}

/// Most datagrams a session's close sends (its BYE and close_notify are
/// two or three).
const CLOSE_DATAGRAMS: usize = 8;

pub struct WebRtc {
    sessions: Slab<Session>,
    by_key: HashMap<String, usize>,
    by_ufrag: HashMap<String, usize>,
    by_addr: HashMap<(SocketAddr, SocketAddr), usize>,
    feeds: StreamMap<Feed>,
    /// Sessions that switched rendition, for their signalling: (owner,
    /// key); see [`WebRtc::take_switched`].
    switched: Vec<(usize, String)>,
    /// Streams whose B-frames were warned about: (B-frames, P-frames
    /// predicting from them). One WARN per stream, not per viewer.
    warned_bframes: StreamMap<(bool, bool)>,
    /// The address each ICE socket is offered at (its candidate), in the
    /// order the loop bound them; an unspecified IP until the public
    /// address it stands for is learnt.
    ports: Vec<SocketAddr>,
    /// Their endpoints (the loop's tokens).
    port_tokens: Vec<usize>,
    /// Per port: what waits to be sent.
    outbox: Vec<Vec<Datagram>>,
    /// TCP relay allocations (OME's TcpRelay): the made-up relayed
    /// address a viewer's datagrams come from -> its connection's token.
    relays: HashMap<SocketAddr, usize>,
    /// Per relay connection: (from which ICE socket, datagram) to wrap.
    relay_out: HashMap<usize, Vec<(SocketAddr, Vec<u8>)>>,
    next_relay_port: u16,
    /// `turn:` URLs of the relay, for signalling (`transport=tcp`).
    pub relay_urls: Vec<String>,
    /// Relay ports offered at the public address once it is learnt.
    pub relay_public_ports: Vec<u16>,
    /// Every viewer is told of the relay (`<TcpForce>`).
    pub tcp_force: bool,
    deadlines: BTreeSet<(Instant, usize)>,
    ended: Vec<Ended>,
    /// Streams a session just connected to (one entry each).
    joined: Vec<StreamId>,
    /// For the transcoder thread.
    audio_work: Vec<AudioWork>,
    cert: Option<str0m::config::DtlsCert>,
    pub max_sessions: usize,
    /// Sessions from one client address at most (0: no cap).
    pub max_per_address: usize,
    by_client: HashMap<std::net::IpAddr, usize>,
    /// Datagrams dropped because an outbox, a socket's backlog or a relay
    /// connection was full (a viewer that could not keep up).
    pub dropped: u64,
    /// What publishing sessions did to their streams, for the loop's
    /// features (in order).
    ingest: Vec<IngestOutput>,
    /// The publishing session of each stream published over WebRTC.
    publishers: StreamMap<usize>,
    /// Sessions whose frames wait for room in the outbox
    /// ([`OUTBOX_PAUSE`]), in the order they paused.
    paused: Vec<usize>,
}

impl Default for WebRtc {
    fn default() -> Self {
        WebRtc::new()
    }
}

impl WebRtc {
    pub fn new() -> WebRtc {
        str0m::crypto::from_feature_flags().install_process_default();
        // One certificate for every session (as OME has one per app): a
        // new ECDSA key per viewer would cost a key generation each.
        let cert = dtls_certificate();
        if cert.is_none() {
            crate::error!("webrtc: no DTLS certificate could be made; WebRTC sessions will fail");
        }
        WebRtc {
            sessions: Slab::new(),
            by_key: HashMap::new(),
            by_ufrag: HashMap::new(),
            by_addr: HashMap::new(),
            feeds: StreamMap::default(),
            switched: Vec::new(),
            warned_bframes: StreamMap::default(),
            ports: Vec::new(),
            port_tokens: Vec::new(),
            relays: HashMap::new(),
            relay_out: HashMap::new(),
            next_relay_port: 0,
            relay_urls: Vec::new(),
            relay_public_ports: Vec::new(),
            tcp_force: false,
            outbox: Vec::new(),
            deadlines: BTreeSet::new(),
            ended: Vec::new(),
            joined: Vec::new(),
            audio_work: Vec::new(),
            cert,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_per_address: default_share(DEFAULT_MAX_SESSIONS),
            by_client: HashMap::new(),
            dropped: 0,
            ingest: Vec::new(),
            publishers: StreamMap::default(),
            paused: Vec::new(),
        }
    }

    /// The ICE sockets the loop bound (their addresses are the
    /// candidates) and their endpoints' tokens.
    pub fn set_ports(&mut self, ports: Vec<(SocketAddr, usize)>) {
        self.outbox = ports.iter().map(|_| Vec::new()).collect();
        self.ports = ports.iter().map(|p| p.0).collect();
        self.port_tokens = ports.iter().map(|p| p.1).collect();
    }

    /// The tokens of the ICE sockets with datagrams waiting.
    pub fn ports_with_output(&self) -> Vec<usize> {
        self.outbox
            .iter()
            .zip(&self.port_tokens)
            .filter(|(o, _)| !o.is_empty())
            .map(|(_, t)| *t)
            .collect()
    }

    /// The candidates sessions are offered: every ICE socket's address,
    /// but those waiting for the public address.
    pub fn candidates(&self) -> Vec<SocketAddr> {
        self.ports
            .iter()
            .copied()
            .filter(|a| !a.ip().is_unspecified())
            .collect()
    }

    /// The address ICE socket `index` is offered at, once known.
    pub fn port_addr(&self, index: usize) -> Option<SocketAddr> {
        self.ports
            .get(index)
            .copied()
            .filter(|a| !a.ip().is_unspecified())
    }

    /// The public address was learnt (`<StunServer>`): the ICE sockets
    /// and relay ports that stand for it are offered at `ip` from now on
    /// (a port already offered at `ip`, the machine's own address, is
    /// not offered twice). What is newly offered, candidates and relay
    /// URLs.
    pub fn learn_public_address(&mut self, ip: std::net::IpAddr) -> Vec<String> {
        let mut new = Vec::new();
        for i in 0..self.ports.len() {
            let a = self.ports[i];
            if !a.ip().is_unspecified() || a.is_ipv4() != ip.is_ipv4() {
                continue;
            }
            let public = SocketAddr::new(ip, a.port());
            if !self.ports.contains(&public) {
                self.ports[i] = public;
                new.push(format!("{public}/udp"));
            }
        }
        for port in std::mem::take(&mut self.relay_public_ports) {
            let url = crate::http::url::turn_tcp(ip, port);
            if !self.relay_urls.contains(&url) {
                self.relay_urls.push(url.clone());
                new.push(url);
            }
        }
        new
    }

    /// A TCP relay connection allocated: the made-up address its
    /// datagrams come from (unique among relays, on `ip`).
    pub fn add_relay(&mut self, ip: std::net::IpAddr, conn: usize) -> SocketAddr {
        loop {
            self.next_relay_port = self
                .next_relay_port
                .checked_add(1)
                .filter(|p| *p >= 1024)
                .unwrap_or(1024);
            let addr = SocketAddr::new(ip, self.next_relay_port);
            if let std::collections::hash_map::Entry::Vacant(e) = self.relays.entry(addr) {
                e.insert(conn);
                return addr;
            }
        }
    }

    /// A relay connection closed.
    pub fn remove_relay(&mut self, relayed: SocketAddr) {
        if let Some(conn) = self.relays.remove(&relayed) {
            self.relay_out.remove(&conn);
        }
    }

    /// Datagrams for relay connection `conn`: (from which ICE socket, bytes).
    pub fn take_relay_out(&mut self, conn: usize) -> Vec<(SocketAddr, Vec<u8>)> {
        self.relay_out.remove(&conn).unwrap_or_default()
    }

    /// Relay connections with datagrams waiting.
    pub fn relays_with_output(&self) -> Vec<usize> {
        self.relay_out
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(c, _)| *c)
            .collect()
    }

    /// Is WebRTC playback possible (at least one ICE socket)?
    pub fn enabled(&self) -> bool {
        !self.ports.is_empty()
    }

    /// Sessions now (connected or not).
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Connected viewers of `stream`.
    pub fn viewers(&self, stream: StreamId) -> u64 {
        self.feeds.get(&stream).map_or(0, |f| {
            f.sessions
                .iter()
                .filter(|&&i| self.sessions.get(i).is_some_and(|s| s.connected))
                .count() as u64
        })
    }

    /// A session's `Rtc`: only the codecs the stream can give, so an
    /// m-line kiln cannot feed is refused in the answer (port 0).
    fn new_rtc(&self, ufrag: &str, pass: &str, what: Offerable, now: Instant) -> Rtc {
        let config = RtcConfig::new()
            .set_ice_lite(true)
            .clear_codecs()
            .enable_h264(what.video && !what.vp8)
            .enable_vp8(what.vp8)
            .enable_opus(what.audio, false)
            .set_local_ice_credentials(IceCreds {
                ufrag: ufrag.to_string(),
                pass: pass.to_string(),
            })
            // Packets are made once per stream (`packetize`), not per
            // session.
            .set_rtp_mode(true)
            // Header extensions: the m-line's id and the send time only.
            // Not transport-wide sequence numbers: kiln does not adapt a
            // viewer's rate to its feedback, and str0m keeps the last 1000
            // packets sent for it (90 KiB per viewer).
            .clear_extension_map()
            .set_extension(2, Extension::AbsoluteSendTime)
            .set_extension(4, Extension::RtpMid)
            // Viewers only send: no receive-side reordering buffers.
            .set_reordering_size_audio(0)
            .set_reordering_size_video(0)
            // What NACKs are answered from: 64 video packets is a quarter
            // of a second at 2.5 Mb/s (about 0.8 s at 600 kb/s), a few round
            // trips. Per viewer at 600 kb/s: str0m's default of 1000 held
            // 636 KiB, 128 held 411 KiB, 32 held 241 KiB (BENCHMARKS.md).
            .set_send_buffer_video(VIDEO_HISTORY)
            // Receiver reports' loss, once a second: the automatic choice
            // of rendition ([`abr`]).
            .set_stats_interval(Some(Duration::from_secs(1)));
        self.build_rtc(config, now)
    }

    fn build_rtc(&self, mut config: RtcConfig, now: Instant) -> Rtc {
        if let Some(cert) = &self.cert {
            config = config.set_dtls_cert(cert.clone());
        }
        let mut rtc = config.set_crypto_provider(srtp::provider()).build(now);
        for addr in self.ports.iter().filter(|a| !a.ip().is_unspecified()) {
            if let Ok(c) = Candidate::host(*addr, "udp") {
                let _ = rtc.add_local_candidate(c);
            }
        }
        rtc
    }

    fn offerable(stream: &LiveStream) -> Offerable {
        let mut o = Offerable::default();
        for t in stream.tracks() {
            match t.codec {
                Codec::H264 => o.video = true,
                Codec::Vp8 => {
                    o.video = true;
                    o.vp8 = true;
                }
                Codec::H265 => {
                    crate::info!(
                        "webrtc: stream {}/{}/{} is H.265: its video is not offered over WebRTC (browsers lack it); audio plays",
                        stream.vhost,
                        stream.app,
                        stream.name
                    );
                }
                Codec::Opus => {
                    o.audio = true;
                    o.stereo = t.audio.is_none_or(|a| a.channels != 1);
                }
                Codec::Aac => {
                    o.audio = true;
                    o.stereo = t.audio.is_none_or(|a| a.channels != 1);
                }
                _ => {}
            }
        }
        o
    }

    /// Room for one more session from `client`?
    fn room_for(&self, client: Option<std::net::IpAddr>) -> Result<(), WebRtcError> {
        if self.sessions.len() >= self.max_sessions {
            return Err(WebRtcError::Full);
        }
        let held = client.and_then(|c| self.by_client.get(&c)).copied();
        if self.max_per_address > 0 && held.unwrap_or(0) >= self.max_per_address {
            if let Some(c) = client {
                crate::log_throttled!(
                    crate::log::Level::Warn,
                    "webrtc-address-cap",
                    c,
                    "WebRTC sessions from {c}: the cap of {} per address (<Bind><Publishers><WebRTC><MaxSessionsPerAddress>) is reached; new ones are refused",
                    self.max_per_address
                );
            }
            return Err(WebRtcError::AddressFull);
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        rtc: Rtc,
        stream: StreamId,
        what: Offerable,
        (ufrag, pass): (String, String),
        opts: SessionOptions,
        now: Instant,
    ) -> Result<usize, WebRtcError> {
        self.room_for(opts.client)?;
        if let Some(c) = opts.client {
            *self.by_client.entry(c).or_insert(0) += 1;
        }
        let key = random_string(16);
        let idx = self.sessions.insert(Session {
            rtc: Box::new(rtc),
            stream,
            what,
            key: key.clone(),
            ufrag: ufrag.clone(),
            pass,
            client: opts.client,
            tag: opts.tag,
            owner: opts.owner,
            end_by: opts.end_by,
            video: None,
            audio: None,
            pending: None,
            mids: Vec::new(),
            connected: false,
            started: false,
            outgoing: VecDeque::new(),
            connect_by: now + opts.timeout.min(CONNECT_WITHIN),
            addrs: Vec::new(),
            deadline: None,
            keyframe_requests: 0,
            layer: None,
            want_layer: None,
            layer_switched: false,
            abr: Some(abr::AutoAbr::new(now)),
            video_seq: random_seq(),
            audio_seq: random_seq(),
            publish: None,
            paused: false,
            opened: now,
            bytes: 0,
        });
        self.by_key.insert(key, idx);
        self.by_ufrag.insert(ufrag, idx);
        self.feeds.entry(stream).or_default().sessions.push(idx);
        Ok(idx)
    }

    /// An offer a new session may take: room for it, and SDP str0m reads.
    fn parse_offer<'a>(
        &self,
        offer: &'a str,
        client: Option<std::net::IpAddr>,
    ) -> Result<(&'a str, SdpOffer), WebRtcError> {
        self.room_for(client)?;
        // str0m's parse errors show parser internals: say what is wrong plainly.
        let parsed = SdpOffer::from_sdp_string(offer)
            .map_err(|_| WebRtcError::BadSdp("the offer is not valid SDP".into()))?;
        Ok((offer, parsed))
    }

    /// A viewer's offer (WHEP): a session for `stream` and its answer.
    /// Returns the session key (the WHEP resource) and the answer SDP.
    pub fn accept_offer(
        &mut self,
        stream: &LiveStream,
        offer: &str,
        opts: SessionOptions,
        now: Instant,
    ) -> Result<(String, String), WebRtcError> {
        let (offer_text, offer) = self.parse_offer(offer, opts.client)?;
        let creds = credentials();
        let what = Self::offerable(stream);
        if !what.video && !what.audio {
            return Err(WebRtcError::Internal(
                "the stream has no track a browser plays".into(),
            ));
        }
        let mut rtc = self.new_rtc(&creds.0, &creds.1, what, now);
        let answer = rtc
            .sdp_api()
            .accept_offer(offer)
            .map_err(|e| WebRtcError::BadSdp(e.to_string()))?;
        let mids = offer_mids(&mut rtc, offer_text);
        let idx = self.insert(rtc, stream.id, what, creds, opts, now)?;
        self.sessions[idx].mids = mids;
        self.choose_payloads(idx, what);
        self.poll_session(idx, None, now);
        let s = &self.sessions[idx];
        crate::debug!(
            "webrtc session {}: m-lines {:?}, video {:?}, audio {:?}",
            s.key,
            s.mids,
            s.video,
            s.audio
        );
        let key = s.key.clone();
        let answer = sdp::complete_refused_sections(&answer.to_sdp_string(), offer_text);
        Ok((key, answer))
    }

    /// kiln makes the offer (OME's WebSocket signalling): a session for
    /// `stream`, its key and the offer SDP.
    pub fn create_offer(
        &mut self,
        stream: &LiveStream,
        opts: SessionOptions,
        now: Instant,
    ) -> Result<(String, String), WebRtcError> {
        self.room_for(opts.client)?;
        let what = Self::offerable(stream);
        if !what.video && !what.audio {
            return Err(WebRtcError::Internal(
                "the stream has no track a browser plays".into(),
            ));
        }
        let creds = credentials();
        let mut rtc = self.new_rtc(&creds.0, &creds.1, what, now);
        let mut api = rtc.sdp_api();
        // One media stream (msid) for both tracks: players take
        // `ontrack`'s `streams[0]` as the whole stream (OvenPlayer does).
        let label = random_string(16);
        let mut add = |kind: MediaKind, track: &str| {
            let track = Some(format!("{label}-{track}"));
            api.add_media(kind, Direction::SendOnly, Some(label.clone()), track, None)
        };
        let video = what.video.then(|| add(MediaKind::Video, "video"));
        let audio = what.audio.then(|| add(MediaKind::Audio, "audio"));
        let Some((offer, pending)) = api.apply() else {
            return Err(WebRtcError::Internal("no offer".into()));
        };
        let idx = self.insert(rtc, stream.id, what, creds, opts, now)?;
        let s = &mut self.sessions[idx];
        s.pending = Some(pending);
        s.mids.extend(video.map(|m| (m, MediaKind::Video)));
        s.mids.extend(audio.map(|m| (m, MediaKind::Audio)));
        let key = self.sessions[idx].key.clone();
        Ok((key, offer.to_sdp_string()))
    }

    /// A viewer chooses the video track (rendition) `track` of its
    /// stream: it switches at that track's next keyframe (a WebRTC
    /// publisher is asked for one). `false` when there is no such session.
    pub fn choose_rendition(&mut self, key: &str, track: TrackId, streams: &Streams) -> bool {
        let Some(&idx) = self.by_key.get(key) else {
            return false;
        };
        let Some(s) = self.sessions.get_mut(idx) else {
            return false;
        };
        let first = streams.get(s.stream).and_then(|st| {
            st.tracks()
                .iter()
                .find(|t| t.kind() == crate::media::MediaKind::Video)
                .map(|t| t.id)
        });
        let on = s.layer.or(first);
        s.abr = None;
        if !s.started {
            // Not playing yet: it starts on the rendition (its GOP, when
            // the stream's cache has one from its keyframe).
            s.layer = (first != Some(track)).then_some(track);
            s.want_layer = None;
            return true;
        }
        s.want_layer = (on != Some(track)).then_some(track);
        if s.want_layer.is_some() {
            let stream = s.stream;
            self.ask_keyframe(stream);
        }
        true
    }

    /// Turns a viewer's automatic choice of rendition on (from the one it
    /// is on) or off (it stays on it). `false` when there is no such
    /// session.
    pub fn set_auto_rendition(&mut self, key: &str, on: bool, now: Instant) -> bool {
        let Some(s) = self.by_key.get(key).and_then(|&i| self.sessions.get_mut(i)) else {
            return false;
        };
        s.abr = on.then(|| abr::AutoAbr::new(now));
        true
    }

    /// A stream published over WebRTC: its publisher is asked for a
    /// keyframe (on every layer).
    fn ask_keyframe(&mut self, stream: StreamId) {
        if let Some(p) = self
            .publishers
            .get(&stream)
            .and_then(|&p| self.sessions.get_mut(p))
            .and_then(|p| p.publish.as_deref_mut())
        {
            p.tracks.keyframe_asked();
        }
    }

    /// A viewer's receiver reported `loss` (the share of its video
    /// packets lost): with automatic choice on and several renditions, it
    /// may move to another: down at once (from the cached GOP), up at
    /// that one's next keyframe.
    fn auto_rendition(&mut self, idx: usize, streams: &Streams, loss: f32, now: Instant) {
        let Some(s) = self.sessions.get_mut(idx) else {
            return;
        };
        if s.publish.is_some() || s.want_layer.is_some() || !s.started {
            return;
        }
        let (Some(abr), Some(st)) = (s.abr.as_mut(), streams.get(s.stream)) else {
            return;
        };
        let videos: Vec<(TrackId, u64)> = st
            .tracks()
            .iter()
            .filter(|t| t.kind() == crate::media::MediaKind::Video)
            .map(|t| {
                let measured = st
                    .track_stats(t.id)
                    .map_or(0, |x| x.latest_bitrate.max(x.average_bitrate()));
                // What the viewer gets: the video and its audio (Opus).
                (t.id, measured.max(u64::from(t.bitrate)) + AUDIO_RATE)
            })
            .collect();
        if videos.len() < 2 {
            return;
        }
        let on = s.layer.unwrap_or(videos[0].0);
        let Some(current) = videos.iter().position(|v| v.0 == on) else {
            return;
        };
        let rates: Vec<u64> = videos.iter().map(|v| v.1).collect();
        let Some(to) = abr.on_report(&rates, current, loss, now) else {
            return;
        };
        crate::debug!(
            "webrtc session {}: {:.1}% lost: rendition {current} ({} b/s) -> {to} ({} b/s)",
            s.key,
            loss * 100.0,
            rates[current],
            rates[to]
        );
        let target = videos[to].0;
        if to > current {
            if let Some(track) = st.track(target) {
                if feed::switch_down_now(&mut s.outgoing, track, st.gop()) {
                    s.switch_layer(target, Some(videos[0].0), &mut self.switched);
                    return;
                }
            }
        }
        s.want_layer = Some(target);
        let stream = s.stream;
        self.ask_keyframe(stream);
    }

    /// Sessions that switched rendition since the last call, by the
    /// signalling connection that owns them: (owner, session key).
    pub fn take_switched(&mut self) -> Vec<(usize, String)> {
        std::mem::take(&mut self.switched)
    }

    /// The video track a viewer plays (`None`: the stream's first), and
    /// whether it switched since the last call (OME's signalling says
    /// `rendition_changed`).
    pub fn rendition_of(&mut self, key: &str) -> Option<(Option<TrackId>, bool)> {
        let s = self.sessions.get_mut(*self.by_key.get(key)?)?;
        Some((s.layer, std::mem::take(&mut s.layer_switched)))
    }

    /// The viewer's answer to [`create_offer`](Self::create_offer).
    pub fn accept_answer(
        &mut self,
        key: &str,
        answer: &str,
        now: Instant,
    ) -> Result<(), WebRtcError> {
        let idx = *self.by_key.get(key).ok_or(WebRtcError::NoSession)?;
        let answer = SdpAnswer::from_sdp_string(answer)
            .map_err(|_| WebRtcError::BadSdp("the answer is not valid SDP".into()))?;
        let s = &mut self.sessions[idx];
        let Some(pending) = s.pending.take() else {
            return Err(WebRtcError::BadSdp("the offer was answered already".into()));
        };
        s.rtc
            .sdp_api()
            .accept_answer(pending, answer)
            .map_err(|e| WebRtcError::BadSdp(e.to_string()))?;
        self.choose_payloads(idx, self.sessions[idx].what);
        let s = &self.sessions[idx];
        crate::debug!(
            "webrtc session {}: answered; video {:?}, audio {:?}",
            s.key,
            s.video,
            s.audio
        );
        self.poll_session(idx, None, now);
        Ok(())
    }

    /// Picks each m-line's payload type: H.264 packetization-mode 1 for
    /// video, Opus for audio.
    fn choose_payloads(&mut self, idx: usize, what: Offerable) {
        let s = &mut self.sessions[idx];
        let mids = s.mids.clone();
        for (mid, kind) in mids {
            let Some(media) = s.rtc.media(mid) else {
                continue;
            };
            let offered = media.remote_pts();
            let pick = |want: RtcCodec| {
                s.rtc
                    .codec_config()
                    .params()
                    .iter()
                    .filter(|p| offered.contains(&p.pt()))
                    .filter(|p| p.spec().codec == want)
                    .filter(|p| {
                        want != RtcCodec::H264 || p.spec().format.packetization_mode == Some(1)
                    })
                    .map(|p| p.pt())
                    .next()
            };
            match kind {
                MediaKind::Video if what.video && s.video.is_none() => {
                    let codec = if what.vp8 {
                        RtcCodec::Vp8
                    } else {
                        RtcCodec::H264
                    };
                    s.video = pick(codec).map(|pt| (mid, pt));
                }
                MediaKind::Audio if what.audio && s.audio.is_none() => {
                    s.audio = pick(RtcCodec::Opus).map(|pt| (mid, pt));
                }
                _ => {}
            }
        }
    }

    /// Ends a session (WHEP DELETE, `stop`, its socket closed).
    pub fn stop(&mut self, key: &str) -> Result<(), WebRtcError> {
        let idx = *self.by_key.get(key).ok_or(WebRtcError::NoSession)?;
        self.end(idx, EndReason::Stopped);
        Ok(())
    }

    /// The sessions of `stream` (viewers and its publisher).
    pub fn sessions_of(&self, stream: StreamId) -> Vec<SessionView> {
        self.sessions
            .iter()
            .filter(|(_, s)| s.stream == stream)
            .map(|(_, s)| SessionView {
                key: s.key.clone(),
                publisher: s.publish.is_some(),
                connected: s.connected,
                remote: s
                    .addrs
                    .first()
                    .map(|(_, from)| from.to_string())
                    .or_else(|| s.client.map(|c| c.to_string())),
                opened: s.opened,
                bytes: s.bytes,
            })
            .collect()
    }

    /// Does this key name a session of `stream`?
    pub fn session_stream(&self, key: &str) -> Option<StreamId> {
        self.by_key.get(key).map(|&i| self.sessions[i].stream)
    }

    /// A session's datagram to its TCP relay connection or its UDP port's
    /// outbox (bounded: one that is full drops it, counted).
    fn route(&mut self, t: str0m::net::Transmit) {
        if let Some(&conn) = self.relays.get(&t.destination) {
            let q = self.relay_out.entry(conn).or_default();
            if q.len() >= MAX_OUTBOX {
                self.dropped += 1;
            } else {
                q.push((t.source, t.contents.into()));
            }
        } else if let Some(i) = self.ports.iter().position(|p| *p == t.source) {
            let q = &mut self.outbox[i];
            if q.len() >= MAX_OUTBOX {
                self.dropped += 1;
            } else {
                q.push(Datagram {
                    to: t.destination,
                    data: t.contents.into(),
                });
            }
        }
    }

    fn end(&mut self, idx: usize, reason: EndReason) {
        let Some(mut s) = self.sessions.try_remove(idx) else {
            return;
        };
        // A connected peer is told (RTCP BYE, DTLS close_notify): its page
        // sees the session closed at once, not ICE consent running out.
        if s.connected && s.rtc.close().is_ok() {
            for _ in 0..CLOSE_DATAGRAMS {
                match s.rtc.poll_output() {
                    Ok(Output::Transmit(t)) => self.route(t),
                    Ok(Output::Event(_)) => {}
                    _ => break,
                }
            }
        }
        s.rtc.disconnect();
        self.by_key.remove(&s.key);
        self.by_ufrag.remove(&s.ufrag);
        if let Some(c) = s.client {
            if let Some(n) = self.by_client.get_mut(&c) {
                *n -= 1;
                if *n == 0 {
                    self.by_client.remove(&c);
                }
            }
        }
        for a in &s.addrs {
            self.by_addr.remove(a);
        }
        if let Some(d) = s.deadline {
            self.deadlines.remove(&(d, idx));
        }
        if s.publish.is_some() {
            self.publishers.remove(&s.stream);
        }
        if let Some(feed) = self.feeds.get_mut(&s.stream) {
            let before = feed.sessions.len();
            feed.sessions.retain(|&i| i != idx);
            if s.connected && feed.sessions.len() < before {
                feed.connected = feed.connected.saturating_sub(1);
            }
            if (s.connected && feed.connected == 0) || feed.sessions.is_empty() {
                // No one listens: the transcoder's state goes.
                self.audio_work.push(AudioWork::Forget(s.stream));
            }
            if feed.sessions.is_empty() {
                self.feeds.remove(&s.stream);
            }
        }
        crate::debug!("webrtc session {} ended: {reason:?}", s.key);
        self.ended.push(Ended {
            key: s.key,
            stream: s.stream,
            tag: s.tag,
            owner: s.owner,
            connected: s.connected,
            published: s.publish.is_some(),
            reason,
        });
    }

    /// The streams sessions connected to since the last call (one entry
    /// per session).
    pub fn take_joined(&mut self) -> Vec<StreamId> {
        std::mem::take(&mut self.joined)
    }

    /// Sessions that ended since the last call.
    pub fn take_ended(&mut self) -> Vec<Ended> {
        std::mem::take(&mut self.ended)
    }

    /// A datagram arrived on the ICE socket at `local` from `from`.
    pub fn handle_datagram(
        &mut self,
        local: SocketAddr,
        from: SocketAddr,
        data: &[u8],
        streams: &mut Streams,
        now: Instant,
    ) {
        let idx = match self.by_addr.get(&(local, from)) {
            Some(&i) => i,
            None => {
                let Some(ufrag) = stun::local_ufrag(data) else {
                    return;
                };
                let Some(&i) = self.by_ufrag.get(ufrag) else {
                    return;
                };
                let s = &mut self.sessions[i];
                // Signed with the session's password first: a forged
                // request must not take one of its address slots.
                if s.addrs.len() >= MAX_ADDRS_PER_SESSION || !stun::integrity_ok(data, &s.pass) {
                    return;
                }
                s.addrs.push((local, from));
                self.by_addr.insert((local, from), i);
                i
            }
        };
        let Ok(contents) = data.try_into() else {
            return;
        };
        let input = Input::Receive(
            now,
            Receive {
                proto: Protocol::Udp,
                source: from,
                destination: local,
                contents,
            },
        );
        let s = &mut self.sessions[idx];
        if !s.rtc.accepts(&input) {
            return;
        }
        s.bytes += data.len() as u64;
        if let Err(e) = s.rtc.handle_input(input) {
            self.end(idx, EndReason::Failed(e.to_string()));
            return;
        }
        self.poll_session(idx, Some(streams), now);
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadlines.first().map(|(at, _)| *at)
    }

    pub fn handle_timeout(&mut self, streams: &mut Streams, now: Instant) {
        while let Some(&(at, idx)) = self.deadlines.first() {
            if at > now {
                break;
            }
            self.deadlines.pop_first();
            let Some(s) = self.sessions.get_mut(idx) else {
                continue;
            };
            s.deadline = None;
            if (!s.connected && now >= s.connect_by) || s.end_by.is_some_and(|t| now >= t) {
                self.end(idx, EndReason::TimedOut);
                continue;
            }
            if let Err(e) = s.rtc.handle_input(Input::Timeout(now)) {
                self.end(idx, EndReason::Failed(e.to_string()));
                continue;
            }
            self.poll_session(idx, Some(streams), now);
        }
    }

    /// How many datagrams wait for the socket of port `i`.
    pub fn outbox_len(&self, i: usize) -> usize {
        self.outbox.get(i).map_or(0, Vec::len)
    }

    /// Datagrams waiting for the socket of port `i`.
    pub fn take_outbox(&mut self, i: usize) -> Vec<Datagram> {
        self.outbox
            .get_mut(i)
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Is anything waiting to be sent?
    pub fn has_output(&self) -> bool {
        self.outbox.iter().any(|o| !o.is_empty())
    }

    /// Drains a session's output: datagrams to the outbox, events, its
    /// next timeout.
    fn poll_session(&mut self, idx: usize, mut streams: Option<&mut Streams>, now: Instant) {
        // A timeout already due was handled here and gave nothing since.
        let mut idle = false;
        loop {
            let room = self.outbox_has_room();
            let Some(s) = self.sessions.get_mut(idx) else {
                return;
            };
            let out = match s.rtc.poll_output() {
                Ok(o) => o,
                Err(e) => {
                    self.end(idx, EndReason::Failed(e.to_string()));
                    return;
                }
            };
            if let Output::Event(e) = &out {
                if !matches!(
                    e,
                    Event::MediaData(_)
                        | Event::MediaEgressStats(_)
                        | Event::MediaIngressStats(_)
                        | Event::PeerStats(_)
                ) {
                    crate::debug!("webrtc session {}: {e:?}", s.key);
                }
            }
            let due = matches!(out, Output::Timeout(at) if at <= now);
            match out {
                // Due now (str0m sends one packet per tick of its pacer):
                // at once, not on a later turn of the loop.
                Output::Timeout(_) if due && !idle => {
                    idle = true;
                    if let Err(e) = s.rtc.handle_input(Input::Timeout(now)) {
                        self.end(idx, EndReason::Failed(e.to_string()));
                        return;
                    }
                }
                // Everything written went out: the next chunk, while the
                // sockets have room.
                Output::Timeout(_) if !s.outgoing.is_empty() && room => {
                    write_chunk(s, now);
                    idle = false;
                    if let Err(e) = s.rtc.handle_input(Input::Timeout(now)) {
                        self.end(idx, EndReason::Failed(e.to_string()));
                        return;
                    }
                }
                Output::Timeout(at) => {
                    if !s.outgoing.is_empty() && !s.paused {
                        // Resumed by `resume` once the sockets took theirs.
                        s.paused = true;
                        self.paused.push(idx);
                    }
                    let mut at = if s.connected {
                        at
                    } else {
                        at.min(s.connect_by)
                    };
                    if let Some(t) = s.end_by {
                        at = at.min(t);
                    }
                    if s.deadline != Some(at) {
                        if let Some(d) = s.deadline.take() {
                            self.deadlines.remove(&(d, idx));
                        }
                        s.deadline = Some(at);
                        self.deadlines.insert((at, idx));
                    }
                    return;
                }
                Output::Transmit(t) => {
                    idle = false;
                    s.bytes += t.contents.len() as u64;
                    self.route(t);
                }
                Output::Event(Event::Connected) => {
                    s.connected = true;
                    if s.publish.is_some() {
                        crate::info!("webrtc session {}: publishing", s.key);
                    } else {
                        if let Some(feed) = self.feeds.get_mut(&s.stream) {
                            feed.connected += 1;
                        }
                        self.joined.push(s.stream);
                        if let Some(streams) = streams.as_deref_mut() {
                            self.start_session(idx, streams);
                        }
                    }
                }
                Output::Event(Event::MediaData(m)) => {
                    if let Some(streams) = streams.as_deref_mut() {
                        self.on_published(idx, &m, streams, now);
                    }
                }
                // The peer closed DTLS (a page closed without a WHIP or
                // WHEP DELETE): the session is over at once; str0m sends
                // and receives nothing more, and waiting for ICE consent
                // left a publisher's stream live with no input.
                Output::Event(Event::Closed) => {
                    self.end(idx, EndReason::Stopped);
                    return;
                }
                Output::Event(Event::IceConnectionStateChange(
                    IceConnectionState::Disconnected,
                )) => {
                    let reason = if s.connected {
                        EndReason::TimedOut
                    } else {
                        EndReason::Failed("ICE failed".into())
                    };
                    self.end(idx, reason);
                    return;
                }
                // A viewer's receiver report on its video, once a second.
                Output::Event(Event::MediaEgressStats(st))
                    if s.video.is_some_and(|(mid, _)| mid == st.mid) =>
                {
                    if let (Some(loss), Some(streams)) = (st.loss, streams.as_deref()) {
                        self.auto_rendition(idx, streams, loss, now);
                    }
                }
                Output::Event(Event::KeyframeRequest(_)) => {
                    s.keyframe_requests += 1;
                    // A stream published over WebRTC: its publisher is asked.
                    let stream = s.stream;
                    if let Some(&p) = self.publishers.get(&stream) {
                        if let Some(p) = self
                            .sessions
                            .get_mut(p)
                            .and_then(|p| p.publish.as_deref_mut())
                        {
                            p.tracks.keyframe_asked();
                        }
                    }
                }
                Output::Event(_) => {}
            }
        }
    }

    /// Sessions paused for room in the outbox ([`OUTBOX_PAUSE`]) write
    /// their next frames, in the order they paused, while there is room.
    /// The ICE sockets call it when they have sent what waited.
    pub fn resume(&mut self, streams: &mut Streams, now: Instant) {
        let mut waiting = std::mem::take(&mut self.paused).into_iter();
        for idx in waiting.by_ref() {
            if !self.outbox_has_room() {
                self.paused.push(idx);
                break;
            }
            if let Some(s) = self.sessions.get_mut(idx) {
                s.paused = false;
                self.poll_session(idx, Some(streams), now);
            }
        }
        self.paused.extend(waiting);
    }

    /// Every socket's outbox is below [`OUTBOX_PAUSE`]: sessions may write.
    fn outbox_has_room(&self) -> bool {
        self.outbox.iter().all(|o| o.len() < OUTBOX_PAUSE)
    }

    /// Sessions wait for room in the outbox.
    pub fn has_paused(&self) -> bool {
        !self.paused.is_empty()
    }

    /// Keyframe requests (PLI/FIR) the sessions now open received.
    pub fn keyframe_requests(&self) -> u64 {
        self.sessions.iter().map(|(_, s)| s.keyframe_requests).sum()
    }
}

/// A random start for a session's sequence numbers (RFC 3550), in the
/// first 15 bits so the extended number needs no rollover signalled.
fn random_seq() -> u64 {
    let mut raw = [0u8; 2];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut raw);
    u64::from(u16::from_be_bytes(raw) & 0x7FFF)
}

/// The offer's m-lines, in order (str0m names them in events only after
/// DTLS; the payloads are chosen at once).
fn offer_mids(rtc: &mut Rtc, offer: &str) -> Vec<(Mid, MediaKind)> {
    offer
        .lines()
        .filter_map(|l| l.trim().strip_prefix("a=mid:"))
        .filter_map(|m| {
            let mid = Mid::from(m.trim());
            rtc.media(mid).map(|media| (mid, media.kind()))
        })
        .collect()
}

/// A self-signed ECDSA P-256 certificate for DTLS (WebRTC peers check it
/// by the fingerprint in the SDP, never by a chain): rcgen with ring, a
/// random 128-bit serial (Firefox refuses two peers' certificates with the
/// same issuer and serial).
pub fn dtls_certificate() -> Option<str0m::config::DtlsCert> {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).ok()?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).ok()?;
    let mut name = rcgen::DistinguishedName::new();
    name.push(rcgen::DnType::CommonName, "kiln WebRTC");
    params.distinguished_name = name;
    let mut serial = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut serial).ok()?;
    serial[0] &= 0x7f;
    params.serial_number = Some(serial.to_vec().into());
    let cert = params.self_signed(&key).ok()?;
    Some(str0m::config::DtlsCert {
        certificate: cert.der().to_vec(),
        private_key: key.serialize_der(),
    })
}

/// Random letters and digits (ICE ufrag/pwd, session keys).
/// The sessions one address may hold by default: a tenth of the most
/// (100 of 1000), never fewer than 10 (a small `MaxSessions` is not
/// split further).
pub fn default_share(max_sessions: usize) -> usize {
    (max_sessions / 10).max(10)
}

/// A new session's local ICE credentials (ufrag, password).
fn credentials() -> (String, String) {
    (random_string(8), random_string(24))
}

pub fn random_string(len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut raw = vec![0u8; len];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut raw);
    raw.iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}
