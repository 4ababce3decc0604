//! The RTSP client of a pull, sans-IO: DESCRIBE (with Basic or Digest
//! authorization when the server asks), SETUP of the first H.264/H.265
//! video and the first AAC audio with RTP interleaved on the TCP
//! connection (or, with `?transport=udp`, on the UDP ports the glue bound:
//! [`RtspClient::set_udp_ports`], datagrams in through
//! [`RtspClient::handle_rtp`]), PLAY, keep-alive `OPTIONS` within the session timeout, an
//! RTCP receiver report every 5 s, and media out as kiln tracks and frames.
//!
//! Bytes in through [`RtspClient::handle_input`], bytes out through
//! [`RtspClient::poll_transmit`], events through [`RtspClient::poll_event`],
//! timers through [`RtspClient::handle_timeout`]/[`RtspClient::poll_timeout`];
//! `now` is always passed in.
//!
//! Timestamps: each track's RTP clock is counted from the `rtptime` the
//! PLAY answer's `RTP-Info` gives for it (the same instant for all tracks),
//! else from its first packet; 32-bit wrap is followed. Video `dts` is the
//! RTP time (cameras send no B-frames; a stream with B-frames is passed on
//! with `dts = pts`).

use super::message::{write_request, Auth, Incoming, Reader, Response, RtspUrl};
use super::rtp::{AacDepacketizer, AccessUnit, NalDepacketizer, RtpPacket};
use super::sdp::{control_url, RtpCodec, Sdp, SdpMedia};
use crate::codec::{aac, h264, h265};
use crate::media::{Codec, CodecConfig, Frame, MediaKind, Track, TrackId, TICKS_PER_SECOND};
use bytes::Bytes;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A request not answered within this fails the pull.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// No RTP for this long while playing fails the pull (unless set).
const MEDIA_TIMEOUT: Duration = Duration::from_secs(10);
/// Receiver reports (RFC 3550 says about every 5 s).
const RTCP_INTERVAL: Duration = Duration::from_secs(5);
/// Session timeout when the server names none (RFC 2326: 60 s).
const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(60);
const USER_AGENT: &str = concat!("kiln/", env!("CARGO_PKG_VERSION"));

/// What the client produced.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// The tracks, once each set-up track's configuration is known (again
    /// when in-band parameter sets change it).
    Tracks(Vec<Track>),
    Frame(Frame),
    /// The pull ended; the text says why, for the log and the API.
    Failed(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Describe,
    Setup(usize),
    Play,
    Playing,
    Closed,
}

/// One set-up media section.
#[derive(Debug)]
struct TrackState {
    id: TrackId,
    media: SdpMedia,
    url: String,
    /// Interleaved RTP channel (RTCP is the next one).
    channel: u8,
    depacketizer: Depacketizer,
    config: CodecConfig,
    /// The RTP time `0` is counted from, and the wrap state.
    base: Option<u32>,
    last: u32,
    ext: i64,
    ssrc: u32,
    packets: u32,
    highest_seq: u16,
}

#[derive(Debug)]
enum Depacketizer {
    Nal(NalDepacketizer),
    Aac(AacDepacketizer),
}

impl TrackState {
    fn ticks(&mut self, ts: u32) -> i64 {
        if self.base.is_none() {
            self.base = Some(ts);
            self.last = ts;
        }
        self.ext += i64::from(ts.wrapping_sub(self.last) as i32);
        self.last = ts;
        self.ext * TICKS_PER_SECOND / i64::from(self.media.clock_rate.max(1))
    }

    fn codec(&self) -> Codec {
        match self.media.codec {
            Some(RtpCodec::H265) => Codec::H265,
            Some(RtpCodec::Aac) => Codec::Aac,
            _ => Codec::H264,
        }
    }

    fn track(&self) -> Track {
        let codec = self.codec();
        Track {
            id: self.id,
            codec,
            video: match codec {
                Codec::H264 => Some(h264::video_params(&self.config).unwrap_or_default()),
                Codec::H265 => Some(h265::video_params(&self.config).unwrap_or_default()),
                _ => None,
            },
            audio: if codec == Codec::Aac {
                aac::audio_params(&self.config)
            } else {
                None
            },
            config: self.config.clone(),
            bitrate: 0,
            label: Default::default(),
        }
    }

    /// The configuration from in-band parameter sets, when complete and new.
    fn in_band_config(&self) -> Option<CodecConfig> {
        let Depacketizer::Nal(d) = &self.depacketizer else {
            return None;
        };
        let p = &d.params;
        let config = match self.codec() {
            Codec::H264 => CodecConfig::H264 {
                sps: vec![Bytes::from(p.sps.clone()?)],
                pps: vec![Bytes::from(p.pps.clone()?)],
            },
            _ => CodecConfig::H265 {
                vps: vec![Bytes::from(p.vps.clone()?)],
                sps: vec![Bytes::from(p.sps.clone()?)],
                pps: vec![Bytes::from(p.pps.clone()?)],
            },
        };
        (config != self.config).then_some(config)
    }
}

/// The RTSP client. See the module docs.
#[derive(Debug)]
pub struct RtspClient {
    url: RtspUrl,
    request_url: String,
    step: Step,
    cseq: u32,
    /// The method of the request awaiting its answer, and since when.
    awaiting: Option<(&'static str, Instant)>,
    reader: Reader,
    out: Vec<u8>,
    events: VecDeque<ClientEvent>,
    auth: Option<Auth>,
    auth_tried: bool,
    base_url: String,
    sdp: Option<Sdp>,
    tracks: Vec<TrackState>,
    session: Option<String>,
    session_timeout: Duration,
    next_keepalive: Option<Instant>,
    next_rtcp: Option<Instant>,
    last_media: Instant,
    tracks_sent: bool,
    scratch: Vec<AccessUnit>,
    our_ssrc: u32,
    media_timeout: Duration,
    /// RTP over UDP: the (RTP, RTCP) client ports of each track, in order.
    udp_ports: Option<Vec<(u16, u16)>>,
}

impl RtspClient {
    /// A client for `url`; the DESCRIBE is queued at once.
    pub fn new(url: RtspUrl, now: Instant) -> Self {
        let request_url = url.request_url();
        let mut c = RtspClient {
            base_url: request_url.clone(),
            request_url,
            url,
            step: Step::Describe,
            cseq: 0,
            awaiting: None,
            reader: Reader::default(),
            out: Vec::new(),
            events: VecDeque::new(),
            auth: None,
            auth_tried: false,
            sdp: None,
            tracks: Vec::new(),
            session: None,
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            next_keepalive: None,
            next_rtcp: None,
            last_media: now,
            tracks_sent: false,
            scratch: Vec::new(),
            our_ssrc: 0x6B69_6C6E, // "kiln"
            media_timeout: MEDIA_TIMEOUT,
            udp_ports: None,
        };
        c.send_step(now);
        c
    }

    /// RTP over UDP on these (RTP, RTCP) ports, one pair per track set up
    /// (at most two: video and audio). Call before the DESCRIBE answer.
    pub fn set_udp_ports(&mut self, ports: Vec<(u16, u16)>) {
        self.udp_ports = Some(ports);
    }

    /// The tracks set up so far (RTP datagrams of track `i` go to
    /// [`handle_rtp`](Self::handle_rtp)).
    pub fn track_count(&self) -> usize {
        self.tracks.len()
    }

    /// No RTP for `timeout` while playing fails the pull (default 10 s).
    pub fn set_media_timeout(&mut self, timeout: Duration) {
        self.media_timeout = timeout.max(Duration::from_millis(100));
    }

    pub fn is_playing(&self) -> bool {
        self.step == Step::Playing
    }

    pub fn is_closed(&self) -> bool {
        self.step == Step::Closed
    }

    /// Bytes the reader holds (the glue stops reading above a bound).
    pub fn buffered(&self) -> usize {
        self.reader.buffered()
    }

    /// Feeds bytes read from the connection.
    pub fn handle_input(&mut self, data: &[u8], now: Instant) {
        if self.step == Step::Closed {
            return;
        }
        self.reader.feed(data);
        loop {
            match self.reader.next_item() {
                Ok(Some(Incoming::Response(r))) => self.on_response(r, now),
                Ok(Some(Incoming::Interleaved { channel, data })) => {
                    self.on_interleaved(channel, &data, now)
                }
                Ok(Some(Incoming::Request { method, cseq })) => {
                    let status = if method == "GET_PARAMETER" || method == "OPTIONS" {
                        "200 OK"
                    } else {
                        "501 Not Implemented"
                    };
                    self.out.extend_from_slice(
                        format!("RTSP/1.0 {status}\r\nCSeq: {cseq}\r\n\r\n").as_bytes(),
                    );
                }
                Ok(None) => return,
                Err(e) => {
                    self.fail(format!("RTSP: {e}"));
                    return;
                }
            }
            if self.step == Step::Closed {
                return;
            }
        }
    }

    /// The connection ended.
    pub fn handle_eof(&mut self) {
        if self.step != Step::Closed {
            self.fail("the RTSP server closed the connection".into());
        }
    }

    /// Appends what to send to `buf`.
    pub fn poll_transmit(&mut self, buf: &mut Vec<u8>) {
        buf.append(&mut self.out);
    }

    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// Sends TEARDOWN (when a session exists) and closes.
    pub fn close(&mut self) {
        if let (Some(session), true) = (self.session.clone(), self.step != Step::Closed) {
            self.cseq += 1;
            let url = self.play_url();
            write_request(
                &mut self.out,
                "TEARDOWN",
                &url,
                self.cseq,
                &[("Session", &session), ("User-Agent", USER_AGENT)],
            );
        }
        self.step = Step::Closed;
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.step == Step::Closed {
            return;
        }
        if let Some((method, since)) = self.awaiting {
            if now.saturating_duration_since(since) >= RESPONSE_TIMEOUT {
                self.fail(format!(
                    "{method}: no answer within {} s",
                    RESPONSE_TIMEOUT.as_secs()
                ));
                return;
            }
        }
        if self.step == Step::Playing {
            if now.saturating_duration_since(self.last_media) >= self.media_timeout {
                self.fail(format!(
                    "no media for {} ms",
                    self.media_timeout.as_millis()
                ));
                return;
            }
            if self.next_keepalive.is_some_and(|t| now >= t) && self.awaiting.is_none() {
                self.request("OPTIONS", self.play_url(), Vec::new(), now);
                self.next_keepalive = Some(now + self.keepalive_interval());
            }
            if self.next_rtcp.is_some_and(|t| now >= t) {
                self.send_receiver_reports();
                self.next_rtcp = Some(now + RTCP_INTERVAL);
            }
        }
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.step == Step::Closed {
            return None;
        }
        let mut t = self.awaiting.map(|(_, since)| since + RESPONSE_TIMEOUT);
        if self.step == Step::Playing {
            for x in [
                Some(self.last_media + self.media_timeout),
                self.next_keepalive,
                self.next_rtcp,
            ]
            .into_iter()
            .flatten()
            {
                t = Some(t.map_or(x, |t: Instant| t.min(x)));
            }
        }
        t
    }

    fn keepalive_interval(&self) -> Duration {
        (self.session_timeout / 2).clamp(Duration::from_secs(1), Duration::from_secs(30))
    }

    fn fail(&mut self, why: String) {
        if self.step != Step::Closed {
            self.step = Step::Closed;
            self.events.push_back(ClientEvent::Failed(why));
        }
    }

    fn play_url(&self) -> String {
        let control = self.sdp.as_ref().and_then(|s| s.control.as_deref());
        control_url(&self.base_url, control)
    }

    fn request(
        &mut self,
        method: &'static str,
        url: String,
        extra: Vec<(&str, String)>,
        now: Instant,
    ) {
        self.cseq += 1;
        let mut headers: Vec<(&str, String)> = vec![("User-Agent", USER_AGENT.to_string())];
        if let Some(auth) = self.auth.as_mut() {
            headers.push(("Authorization", auth.header(method, &url)));
        }
        if let Some(s) = &self.session {
            headers.push(("Session", s.clone()));
        }
        headers.extend(extra);
        let refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        write_request(&mut self.out, method, &url, self.cseq, &refs);
        self.awaiting = Some((method, now));
    }

    /// Sends the request of the current step.
    fn send_step(&mut self, now: Instant) {
        match self.step {
            Step::Describe => self.request(
                "DESCRIBE",
                self.request_url.clone(),
                vec![("Accept", "application/sdp".into())],
                now,
            ),
            Step::Setup(i) => {
                let Some(t) = self.tracks.get(i) else { return };
                let transport = match self.udp_ports.as_ref().and_then(|p| p.get(i)) {
                    Some((rtp, rtcp)) => format!("RTP/AVP;unicast;client_port={rtp}-{rtcp}"),
                    None => format!(
                        "RTP/AVP/TCP;unicast;interleaved={}-{}",
                        t.channel,
                        t.channel + 1
                    ),
                };
                let url = t.url.clone();
                self.request("SETUP", url, vec![("Transport", transport)], now);
            }
            Step::Play => self.request(
                "PLAY",
                self.play_url(),
                vec![("Range", "npt=0.000-".into())],
                now,
            ),
            Step::Playing | Step::Closed => {}
        }
    }

    fn on_response(&mut self, r: Response, now: Instant) {
        let Some((method, _)) = self.awaiting.take() else {
            return; // unsolicited
        };
        if r.status == 401 && !self.auth_tried && method != "OPTIONS" {
            self.auth_tried = true;
            let (Some(user), password) = (self.url.user.clone(), self.url.password.clone()) else {
                self.fail(format!(
                    "{method}: 401 {}: the server wants a user and password (rtsp://user:password@host/...)",
                    r.reason
                ));
                return;
            };
            match Auth::from_challenge(
                r.headers_named("WWW-Authenticate"),
                &user,
                password.as_deref().unwrap_or(""),
            ) {
                Some(auth) => {
                    self.auth = Some(auth);
                    self.send_step(now);
                }
                None => self.fail(format!(
                    "{method}: 401 with no Basic or MD5 Digest challenge"
                )),
            }
            return;
        }
        if method == "OPTIONS" {
            return; // keep-alive: any answer will do
        }
        if !(200..300).contains(&r.status) {
            let hint = if r.status == 401 {
                " (wrong user or password)"
            } else {
                ""
            };
            self.fail(format!("{method}: {} {}{hint}", r.status, r.reason));
            return;
        }
        match self.step {
            Step::Describe => self.on_describe(&r, now),
            Step::Setup(i) => self.on_setup(i, &r, now),
            Step::Play => self.on_play(&r, now),
            Step::Playing | Step::Closed => {}
        }
    }

    fn on_describe(&mut self, r: &Response, now: Instant) {
        if let Some(base) = r.header("Content-Base").or(r.header("Content-Location")) {
            if base.starts_with("rtsp://") {
                self.base_url = base.to_string();
            }
        }
        let text = String::from_utf8_lossy(&r.body);
        let sdp = match Sdp::parse(&text) {
            Ok(s) => s,
            Err(e) => return self.fail(format!("DESCRIBE: {e}")),
        };
        let mut chosen: Vec<SdpMedia> = Vec::new();
        for kind in [MediaKind::Video, MediaKind::Audio] {
            if let Some(m) = sdp
                .media
                .iter()
                .find(|m| m.kind == kind && m.codec.is_some())
            {
                chosen.push(m.clone());
            }
        }
        if chosen.is_empty() {
            let found: Vec<String> = sdp
                .media
                .iter()
                .map(|m| m.encoding.escape_debug().to_string())
                .collect();
            return self.fail(format!(
                "DESCRIBE: no H.264, H.265 or AAC track in the SDP (it has: {})",
                found.join(", ")
            ));
        }
        for (i, media) in chosen.into_iter().enumerate() {
            let config = initial_config(&media);
            let depacketizer = match media.codec {
                Some(RtpCodec::Aac) => {
                    let len =
                        |k: &str, d: u32| media.fmtp(k).and_then(|v| v.parse().ok()).unwrap_or(d);
                    Depacketizer::Aac(AacDepacketizer::new(
                        len("sizelength", 13),
                        len("indexlength", 3),
                        len("indexdeltalength", 3),
                    ))
                }
                Some(RtpCodec::H265) => Depacketizer::Nal(NalDepacketizer::new(true)),
                _ => Depacketizer::Nal(NalDepacketizer::new(false)),
            };
            self.tracks.push(TrackState {
                id: i as TrackId,
                url: control_url(&self.base_url, media.control.as_deref()),
                channel: (i * 2) as u8,
                media,
                depacketizer,
                config,
                base: None,
                last: 0,
                ext: 0,
                ssrc: 0,
                packets: 0,
                highest_seq: 0,
            });
        }
        self.sdp = Some(sdp);
        self.step = Step::Setup(0);
        self.send_step(now);
    }

    fn on_setup(&mut self, i: usize, r: &Response, now: Instant) {
        if let Some(s) = r.header("Session") {
            let mut parts = s.split(';');
            let id: String = parts
                .next()
                .unwrap_or("")
                .trim()
                .chars()
                .take(128)
                .collect();
            for p in parts {
                if let Some(t) = p.trim().strip_prefix("timeout=") {
                    if let Ok(secs) = t.trim().parse::<u64>() {
                        self.session_timeout = Duration::from_secs(secs.clamp(2, 3600));
                    }
                }
            }
            if !id.is_empty() {
                self.session = Some(id);
            }
        }
        if let (Some(transport), Some(_)) = (r.header("Transport"), &self.udp_ports) {
            if transport.contains("interleaved") {
                return self.fail(format!(
                    "SETUP: the server refuses RTP over UDP (Transport: {})",
                    transport.escape_debug()
                ));
            }
        } else if let Some(transport) = r.header("Transport") {
            if !transport.contains("TCP") && !transport.contains("interleaved") {
                return self.fail(format!(
                    "SETUP: the server refuses RTP over the TCP connection (Transport: {})",
                    transport.escape_debug()
                ));
            }
            if let Some(ch) = transport
                .split(';')
                .find_map(|p| p.trim().strip_prefix("interleaved="))
                .and_then(|v| v.split('-').next())
                .and_then(|v| v.trim().parse::<u8>().ok())
            {
                if let Some(t) = self.tracks.get_mut(i) {
                    t.channel = ch;
                }
            }
        }
        self.step = if i + 1 < self.tracks.len() {
            Step::Setup(i + 1)
        } else {
            Step::Play
        };
        self.send_step(now);
    }

    fn on_play(&mut self, r: &Response, now: Instant) {
        // RTP-Info: url=...;seq=...;rtptime=..., one entry per track.
        if let Some(info) = r.header("RTP-Info") {
            for entry in info.split(',') {
                let mut url = None;
                let mut rtptime = None;
                for p in entry.split(';') {
                    let p = p.trim();
                    if let Some(u) = p.strip_prefix("url=") {
                        url = Some(u.trim());
                    } else if let Some(t) = p.strip_prefix("rtptime=") {
                        rtptime = t.trim().parse::<u32>().ok();
                    }
                }
                let (Some(url), Some(rtptime)) = (url, rtptime) else {
                    continue;
                };
                let n = self.tracks.len();
                if let Some(t) = self.tracks.iter_mut().find(|t| {
                    t.url == url
                        || url.ends_with(t.media.control.as_deref().unwrap_or("\0"))
                        || n == 1
                }) {
                    t.base = Some(rtptime);
                    t.last = rtptime;
                }
            }
        }
        self.step = Step::Playing;
        self.last_media = now;
        self.next_keepalive = Some(now + self.keepalive_interval());
        self.next_rtcp = Some(now + RTCP_INTERVAL);
        self.maybe_send_tracks();
    }

    fn on_interleaved(&mut self, channel: u8, data: &[u8], now: Instant) {
        let Some(i) = self.tracks.iter().position(|t| t.channel == channel) else {
            return; // RTCP or an unknown channel
        };
        self.handle_rtp(i, data, now);
    }

    /// One RTP packet of set-up track `i` (interleaved, or a UDP datagram).
    pub fn handle_rtp(&mut self, i: usize, data: &[u8], now: Instant) {
        let Some(p) = RtpPacket::parse(data) else {
            return;
        };
        let Some(t) = self.tracks.get_mut(i) else {
            return;
        };
        if p.payload_type != t.media.payload_type {
            return;
        }
        self.last_media = now;
        t.ssrc = p.ssrc;
        t.packets = t.packets.wrapping_add(1);
        t.highest_seq = p.seq;
        let mut aus = std::mem::take(&mut self.scratch);
        match &mut t.depacketizer {
            Depacketizer::Nal(d) => d.push(&p, &mut aus),
            Depacketizer::Aac(d) => d.push(&p, &mut aus),
        }
        for au in aus.drain(..) {
            self.on_access_unit(i, au);
        }
        self.scratch = aus;
    }

    fn on_access_unit(&mut self, i: usize, au: AccessUnit) {
        let Some(t) = self.tracks.get_mut(i) else {
            return;
        };
        if au.keyframe {
            if let Some(config) = t.in_band_config() {
                t.config = config;
                if self.tracks_sent {
                    self.tracks_sent = false;
                }
            }
        }
        let t = &mut self.tracks[i];
        let pts = t.ticks(au.timestamp);
        let frame = Frame {
            track: t.id,
            pts,
            dts: pts,
            keyframe: au.keyframe,
            data: Bytes::from(au.data),
        };
        self.maybe_send_tracks();
        if self.tracks_sent {
            self.events.push_back(ClientEvent::Frame(frame));
        }
    }

    fn maybe_send_tracks(&mut self) {
        if self.tracks_sent || self.step != Step::Playing {
            return;
        }
        if self.tracks.iter().all(|t| t.config != CodecConfig::None) {
            self.tracks_sent = true;
            let tracks = self.tracks.iter().map(TrackState::track).collect();
            self.events.push_back(ClientEvent::Tracks(tracks));
        }
    }

    /// RTCP RR (RFC 3550 6.4.2) for each track, on its RTCP channel.
    fn send_receiver_reports(&mut self) {
        for t in &self.tracks {
            if t.packets == 0 {
                continue;
            }
            let mut rr = Vec::with_capacity(32);
            rr.extend_from_slice(&[0x81, 201, 0, 7]);
            rr.extend_from_slice(&self.our_ssrc.to_be_bytes());
            rr.extend_from_slice(&t.ssrc.to_be_bytes());
            rr.extend_from_slice(&[0, 0, 0, 0]); // fraction lost, cumulative lost
            rr.extend_from_slice(&u32::from(t.highest_seq).to_be_bytes());
            rr.extend_from_slice(&[0; 12]); // jitter, LSR, DLSR
            self.out.push(b'$');
            self.out.push(t.channel.wrapping_add(1));
            self.out.extend_from_slice(&(rr.len() as u16).to_be_bytes());
            self.out.extend_from_slice(&rr);
        }
    }
}

/// The codec configuration the SDP gives (`sprop-*`, AAC `config`).
fn initial_config(m: &SdpMedia) -> CodecConfig {
    use base64::Engine;
    let b64 = |s: &str| -> Vec<Bytes> {
        s.split(',')
            .filter_map(|p| {
                base64::engine::general_purpose::STANDARD
                    .decode(p.trim())
                    .ok()
                    .filter(|v| !v.is_empty())
                    .map(Bytes::from)
            })
            .collect()
    };
    match m.codec {
        Some(RtpCodec::H264) => {
            let sets = m.fmtp("sprop-parameter-sets").map(b64).unwrap_or_default();
            let sps: Vec<Bytes> = sets.iter().filter(|n| n[0] & 0x1F == 7).cloned().collect();
            let pps: Vec<Bytes> = sets.iter().filter(|n| n[0] & 0x1F == 8).cloned().collect();
            if sps.is_empty() || pps.is_empty() || h264::parse_sps(&sps[0]).is_err() {
                return CodecConfig::None;
            }
            CodecConfig::H264 { sps, pps }
        }
        Some(RtpCodec::H265) => {
            let get = |k: &str| m.fmtp(k).map(b64).unwrap_or_default();
            let (vps, sps, pps) = (get("sprop-vps"), get("sprop-sps"), get("sprop-pps"));
            if vps.is_empty()
                || sps.is_empty()
                || pps.is_empty()
                || h265::parse_sps(&sps[0]).is_err()
            {
                return CodecConfig::None;
            }
            CodecConfig::H265 { vps, sps, pps }
        }
        Some(RtpCodec::Aac) => {
            let Some(hex) = m.fmtp("config") else {
                return CodecConfig::None;
            };
            let bytes: Option<Vec<u8>> = (0..hex.len() / 2)
                .map(|i| {
                    hex.get(2 * i..2 * i + 2)
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                })
                .collect();
            match bytes {
                Some(asc) if aac::parse_asc(&asc).is_ok() => CodecConfig::Aac {
                    asc: Bytes::from(asc),
                },
                _ => CodecConfig::None,
            }
        }
        None => CodecConfig::None,
    }
}

#[cfg(test)]
mod tests;
