//! [`ClientSession`]: the publishing side of RTMP that kiln runs to push a
//! stream to another server (nginx-rtmp, ffmpeg -listen, YouTube, Facebook,
//! Twitch...). Drives handshake -> connect -> releaseStream, FCPublish,
//! createStream -> publish, then writes metadata, sequence headers and
//! frames. Answers pings and sends acknowledgements.
//!
//! The command sequence copies ffmpeg's (`flashVer` "FMLE/3.0 ...",
//! `type` "nonprivate", errors to releaseStream / FCPublish ignored), the
//! most widely accepted. Frame times are rebased so the first frame sent is
//! at 0 ms, and kept monotonic per track.
//!
//! Play mode ([`ClientConfig::play`], a pull from another server):
//! connect, createStream, `play` (with a 3 s buffer, as ffmpeg), then the
//! server's audio, video and metadata come out as tracks and frames (the
//! same tag parser as kiln's RTMP ingest).
//!
//! Not here: sockets, TLS, reconnecting (the push task makes a new session).

use std::collections::VecDeque;

use crate::media::{Frame, Track};

use super::amf0::Amf0Value;
use super::chunk::{message_type, MessageStreamId, RtmpConnection, RtmpMessage};
use super::command::{parse_command, Command};
use super::flv::TagIngest;
use super::handshake::ClientHandshake;
use super::RtmpError;

pub use super::media_out::{tag_header, write_frame_message, FrameMessage, MediaClock, MediaOut};

/// The chunk size kiln's pushes announce: every RTMP destination of a
/// stream shares one cut of each frame (`push::feed`).
pub const SHARED_CHUNK_SIZE: u32 = 65536;

/// Where and what to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// The application, e.g. "live2".
    pub app: String,
    /// The URL up to and including the application, e.g.
    /// "rtmp://a.rtmp.youtube.com/live2".
    pub tc_url: String,
    /// The stream name to publish (may carry `?query`).
    pub stream_key: String,
    pub flash_ver: String,
    /// Outgoing chunk size (announced right after the handshake).
    pub chunk_size: u32,
    /// Play the stream instead of publishing it.
    pub play: bool,
}

impl ClientConfig {
    /// A config with the default flashVer and chunk size (65536).
    pub fn new(tc_url: &str, app: &str, stream_key: &str) -> Self {
        ClientConfig {
            app: app.to_owned(),
            tc_url: tc_url.to_owned(),
            stream_key: stream_key.to_owned(),
            flash_ver: "FMLE/3.0 (compatible; kiln)".to_owned(),
            chunk_size: SHARED_CHUNK_SIZE,
            play: false,
        }
    }

    /// Splits `rtmp[s]://host[:port]/app[/instance]/key` at the last slash:
    /// tcUrl is everything before it, app the path of the tcUrl, the key
    /// everything after. `None` without a scheme, app or key.
    pub fn from_url(url: &str) -> Option<Self> {
        let (_, rest) = url.split_once("://")?;
        let (_host, path) = rest.split_once('/')?;
        let (app, key) = path.rsplit_once('/')?;
        if app.is_empty() || key.is_empty() {
            return None;
        }
        let tc_url = &url[..url.len() - key.len() - 1];
        Some(Self::new(tc_url, app, key))
    }
}

/// Where the session is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientState {
    Handshaking,
    /// connect sent, waiting for its _result.
    Connecting,
    /// createStream sent.
    CreatingStream,
    /// publish sent, waiting for NetStream.Publish.Start.
    PublishPending,
    Publishing,
    /// play sent, waiting for NetStream.Play.Start.
    PlayPending,
    Playing,
    /// close() was called.
    Closed,
    /// The server refused or the stream broke.
    Failed,
}

/// What happened on a client session.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientEvent {
    /// connect succeeded.
    Connected,
    /// NetStream.Publish.Start: send tracks and frames now.
    Publishing,
    /// Play mode: NetStream.Play.Start.
    Playing,
    /// Play mode: the stream's tracks (again when they change).
    Tracks(Vec<Track>),
    /// Play mode: one frame.
    Frame(Frame),
    /// The server said no (its description, or its code), or the stream
    /// broke. The session is Failed.
    Error(String),
}

const TXN_CONNECT: f64 = 1.0;
const TXN_RELEASE: f64 = 2.0;
const TXN_FCPUBLISH: f64 = 3.0;
const TXN_CREATE_STREAM: f64 = 4.0;
const TXN_PUBLISH: f64 = 5.0;
const TXN_PLAY: f64 = 6.0;
/// User control event SetBufferLength.
const SET_BUFFER_LENGTH: u16 = 3;

/// The publishing side of one RTMP connection (see the module docs).
#[derive(Debug)]
pub struct ClientSession {
    config: ClientConfig,
    handshake: ClientHandshake,
    conn: RtmpConnection,
    state: ClientState,
    events: VecDeque<ClientEvent>,
    stream_id: MessageStreamId,
    next_txn: f64,
    media: MediaOut,
    scratch: Vec<u8>,
    /// Play mode: the server's tags into tracks and frames.
    ingest: TagIngest,
}

impl ClientSession {
    /// Starts the session: C0 + C1 are pending output at once.
    pub fn new(config: ClientConfig) -> Self {
        let mut conn = RtmpConnection::default();
        let handshake = ClientHandshake::new(conn.output.writer());
        ClientSession {
            config,
            handshake,
            conn,
            state: ClientState::Handshaking,
            events: VecDeque::new(),
            stream_id: 0,
            next_txn: TXN_PLAY + 1.0,
            media: MediaOut::default(),
            scratch: Vec::new(),
            ingest: TagIngest::default(),
        }
    }

    pub fn state(&self) -> ClientState {
        self.state
    }

    pub fn is_publishing(&self) -> bool {
        self.state == ClientState::Publishing
    }

    /// The next event, in order.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// Prefetches what sending a frame reads (the state, the output
    /// buffer, the frame timing): a relay about to write to this
    /// connection after writing to many others calls it a turn ahead.
    pub fn prefetch(&self) {
        crate::sys::prefetch(&self.state);
        crate::sys::prefetch(&self.stream_id);
        crate::sys::prefetch(&self.config.chunk_size);
        crate::sys::prefetch(&self.conn.output);
        self.media.prefetch();
    }

    /// Bytes to write to the socket. Its length is the backlog a push task
    /// can watch to drop frames for a slow destination.
    pub fn pending_output(&self) -> &[u8] {
        self.conn.output.pending()
    }

    /// Marks `n` bytes of [`pending_output`](Self::pending_output) written.
    pub fn consume_output(&mut self, n: usize) {
        self.conn.output.consume(n);
    }

    /// Feeds bytes read from the socket. An error is fatal (the state is
    /// then Failed).
    pub fn handle_input(&mut self, data: &[u8]) -> Result<(), RtmpError> {
        if matches!(self.state, ClientState::Closed | ClientState::Failed) {
            return Err(RtmpError::Closed);
        }
        let r = self.input(data);
        if let Err(e) = &r {
            self.fail(e.to_string());
        }
        r
    }

    fn fail(&mut self, reason: String) {
        if self.state != ClientState::Failed {
            self.state = ClientState::Failed;
            self.events.push_back(ClientEvent::Error(reason));
        }
    }

    fn input(&mut self, mut data: &[u8]) -> Result<(), RtmpError> {
        if !self.handshake.is_done() {
            let n = self.handshake.handle(data, self.conn.output.writer())?;
            data = &data[n..];
            if !self.handshake.is_done() {
                return Ok(());
            }
            self.after_handshake();
        }
        self.conn.handle_input(data)?;
        while let Some(msg) = self.conn.next_message()? {
            self.on_message(&msg)?;
            if self.state == ClientState::Failed {
                break;
            }
        }
        Ok(())
    }

    fn after_handshake(&mut self) {
        self.conn.write_set_chunk_size(self.config.chunk_size);
        let obj = Amf0Value::Object(vec![
            ("app".into(), self.config.app.clone().into()),
            ("type".into(), "nonprivate".into()),
            ("flashVer".into(), self.config.flash_ver.clone().into()),
            ("tcUrl".into(), self.config.tc_url.clone().into()),
        ]);
        self.send_command(0, "connect", TXN_CONNECT, &[obj]);
        self.state = ClientState::Connecting;
    }

    fn send_command(
        &mut self,
        stream_id: MessageStreamId,
        name: &str,
        txn: f64,
        values: &[Amf0Value],
    ) {
        super::command::send_command(
            &mut self.conn,
            &mut self.scratch,
            stream_id,
            name,
            txn,
            values,
        );
    }

    fn on_message(&mut self, msg: &RtmpMessage) -> Result<(), RtmpError> {
        if self.config.play
            && matches!(
                msg.type_id,
                message_type::AUDIO | message_type::VIDEO | message_type::DATA_AMF0
            )
        {
            return self.on_play_media(msg);
        }
        if !matches!(
            msg.type_id,
            message_type::COMMAND_AMF0 | message_type::COMMAND_AMF3
        ) {
            return Ok(());
        }
        let Some(cmd) = parse_command(msg)? else {
            return Ok(());
        };
        match cmd.name.as_str() {
            "_result" => self.on_result(&cmd),
            "_error" => {
                let t = cmd.transaction_id;
                // Adobe leftovers some servers refuse: ignore, as ffmpeg does.
                if t != TXN_RELEASE && t != TXN_FCPUBLISH {
                    self.fail(reason(&cmd, "request refused"));
                }
            }
            "onStatus" => {
                if cmd.status_level() == Some("error") {
                    self.fail(reason(&cmd, "stream refused"));
                } else if cmd.status_code() == Some("NetStream.Publish.Start")
                    && self.state == ClientState::PublishPending
                {
                    self.state = ClientState::Publishing;
                    self.events.push_back(ClientEvent::Publishing);
                } else if cmd.status_code() == Some("NetStream.Play.Start")
                    && self.state == ClientState::PlayPending
                {
                    self.state = ClientState::Playing;
                    self.events.push_back(ClientEvent::Playing);
                } else if self.config.play
                    && matches!(
                        cmd.status_code(),
                        Some("NetStream.Play.UnpublishNotify" | "NetStream.Play.Stop")
                    )
                {
                    self.fail("the stream ended at its source".into());
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn on_result(&mut self, cmd: &Command) {
        let t = cmd.transaction_id;
        if t == TXN_CONNECT && self.state == ClientState::Connecting {
            if cmd.status_level() == Some("error") {
                self.fail(reason(cmd, "connect refused"));
                return;
            }
            self.events.push_back(ClientEvent::Connected);
            if self.config.play {
                self.send_command(0, "createStream", TXN_CREATE_STREAM, &[Amf0Value::Null]);
                self.state = ClientState::CreatingStream;
                return;
            }
            let key: Amf0Value = self.config.stream_key.clone().into();
            self.send_command(
                0,
                "releaseStream",
                TXN_RELEASE,
                &[Amf0Value::Null, key.clone()],
            );
            self.send_command(0, "FCPublish", TXN_FCPUBLISH, &[Amf0Value::Null, key]);
            self.send_command(0, "createStream", TXN_CREATE_STREAM, &[Amf0Value::Null]);
            self.state = ClientState::CreatingStream;
        } else if t == TXN_CREATE_STREAM && self.state == ClientState::CreatingStream {
            let id = cmd
                .args
                .iter()
                .find_map(Amf0Value::as_f64)
                .filter(|v| *v >= 1.0 && *v <= f64::from(u32::MAX))
                .map(|v| v as u32);
            let Some(id) = id else {
                self.fail("createStream returned no stream id".into());
                return;
            };
            self.stream_id = id;
            let key: Amf0Value = self.config.stream_key.clone().into();
            if self.config.play {
                self.send_command(
                    id,
                    "play",
                    TXN_PLAY,
                    &[Amf0Value::Null, key, (-2000.0).into()],
                );
                let mut p = [0u8; 10];
                p[..2].copy_from_slice(&SET_BUFFER_LENGTH.to_be_bytes());
                p[2..6].copy_from_slice(&id.to_be_bytes());
                p[6..].copy_from_slice(&3000u32.to_be_bytes());
                self.conn.write_control(message_type::USER_CONTROL, &p);
                self.state = ClientState::PlayPending;
                return;
            }
            self.send_command(
                id,
                "publish",
                TXN_PUBLISH,
                &[Amf0Value::Null, key, "live".into()],
            );
            self.state = ClientState::PublishPending;
        }
    }

    /// Play mode: a media or metadata message from the server.
    fn on_play_media(&mut self, msg: &RtmpMessage) -> Result<(), RtmpError> {
        if !matches!(self.state, ClientState::PlayPending | ClientState::Playing)
            || msg.payload.is_empty()
        {
            return Ok(());
        }
        let outcome = match msg.type_id {
            message_type::VIDEO => self.ingest.video(msg.timestamp, &msg.payload)?,
            message_type::AUDIO => self.ingest.audio(msg.timestamp, &msg.payload)?,
            _ => {
                let values = super::amf0::decode_all(&msg.payload).unwrap_or_default();
                let meta = match values.as_slice() {
                    [Amf0Value::String(a), m, ..] if a == "onMetaData" => Some(m),
                    [Amf0Value::String(a), Amf0Value::String(b), m, ..]
                        if a == "@setDataFrame" && b == "onMetaData" =>
                    {
                        Some(m)
                    }
                    _ => None,
                };
                if let Some(m) = meta.filter(|m| m.properties().is_some()) {
                    self.ingest.set_metadata(m);
                }
                return Ok(());
            }
        };
        if outcome.tracks_changed {
            self.events
                .push_back(ClientEvent::Tracks(self.ingest.tracks()));
        }
        self.events
            .extend(self.ingest.frames().map(ClientEvent::Frame));
        Ok(())
    }

    fn require_publishing(&self) -> Result<(), RtmpError> {
        match self.state {
            ClientState::Publishing => Ok(()),
            ClientState::Closed | ClientState::Failed => Err(RtmpError::Closed),
            _ => Err(RtmpError::Protocol("not publishing yet")),
        }
    }

    /// Announces the tracks: @setDataFrame onMetaData, then the sequence
    /// headers. The first video (H.264/H.265) and the first audio (AAC/MP3)
    /// track are sent; frames of other tracks are ignored. Call again when
    /// a track's configuration changes.
    pub fn send_tracks(&mut self, tracks: &[Track]) -> Result<(), RtmpError> {
        self.require_publishing()?;
        self.media
            .announce(&mut self.conn, &mut self.scratch, self.stream_id, tracks)
    }

    /// Times a frame for this connection: its message's chunk stream, type
    /// and timestamp (rebased to the first frame sent, monotonic per
    /// track). `None` for frames of tracks not announced. The payload is
    /// [`tag_header`] + the frame's data, the same for every connection.
    pub fn time_frame(&mut self, frame: &Frame) -> Option<FrameMessage> {
        if self.state != ClientState::Publishing {
            return None;
        }
        self.media.time_frame(frame, self.stream_id)
    }

    /// Where the frame timing stands (see [`time_frame`](Self::time_frame)),
    /// to undo the timing of frames that were not sent after all.
    pub fn media_clock(&self) -> MediaClock {
        self.media.clock()
    }

    pub fn set_media_clock(&mut self, clock: MediaClock) {
        self.media.set_clock(clock);
    }

    /// The chunk size this session announced.
    pub fn chunk_size(&self) -> u32 {
        self.config.chunk_size
    }

    /// Writes one frame of an announced track (others are ignored).
    pub fn send_frame(&mut self, frame: &Frame) -> Result<(), RtmpError> {
        self.require_publishing()?;
        self.media.send_frame(&mut self.conn, frame, self.stream_id)
    }

    /// Writes a timed frame message through this connection's own chunk
    /// encoder (the path for messages a shared body cannot carry).
    pub fn write_frame_message(&mut self, msg: &FrameMessage, parts: &[&[u8]]) {
        write_frame_message(&mut self.conn, msg, parts);
    }

    /// Ends the publishing: FCUnpublish and deleteStream. The state becomes
    /// Closed; flush the output, then close the socket.
    pub fn close(&mut self) {
        if self.config.play && matches!(self.state, ClientState::Playing | ClientState::PlayPending)
        {
            let t = self.txn();
            let id = f64::from(self.stream_id);
            self.send_command(0, "deleteStream", t, &[Amf0Value::Null, id.into()]);
        } else if matches!(
            self.state,
            ClientState::Publishing | ClientState::PublishPending
        ) {
            let key: Amf0Value = self.config.stream_key.clone().into();
            let t = self.txn();
            self.send_command(0, "FCUnpublish", t, &[Amf0Value::Null, key]);
            let t = self.txn();
            let id = f64::from(self.stream_id);
            self.send_command(0, "deleteStream", t, &[Amf0Value::Null, id.into()]);
        }
        if self.state != ClientState::Failed {
            self.state = ClientState::Closed;
        }
    }

    fn txn(&mut self) -> f64 {
        self.next_txn += 1.0;
        self.next_txn
    }
}

fn reason(cmd: &Command, fallback: &str) -> String {
    cmd.status_description()
        .filter(|d| !d.is_empty())
        .or(cmd.status_code())
        .unwrap_or(fallback)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtmp::flv::tests::{aac_track, h264_track};
    use crate::rtmp::server::{ServerConfig, ServerEvent, ServerSession};
    use bytes::Bytes;
    use proptest::prelude::*;

    #[test]
    fn url_split() {
        let c = ClientConfig::from_url("rtmp://a.rtmp.youtube.com/live2/abcd-efgh").unwrap();
        assert_eq!(c.app, "live2");
        assert_eq!(c.tc_url, "rtmp://a.rtmp.youtube.com/live2");
        assert_eq!(c.stream_key, "abcd-efgh");
        let c = ClientConfig::from_url("rtmps://h:443/app/inst/key?x=1").unwrap();
        assert_eq!(c.app, "app/inst");
        assert_eq!(c.tc_url, "rtmps://h:443/app/inst");
        assert_eq!(c.stream_key, "key?x=1");
        assert!(ClientConfig::from_url("rtmp://host/app").is_none());
        assert!(ClientConfig::from_url("host/app/key").is_none());
    }

    /// Shuttles bytes both ways, cutting every transfer into pieces of the
    /// sizes in `splits` (cycled). Returns the server's events.
    fn pump(
        c: &mut ClientSession,
        s: &mut ServerSession,
        splits: &[usize],
        k: &mut usize,
        accept: bool,
    ) -> Vec<ServerEvent> {
        let mut events = Vec::new();
        loop {
            let mut moved = false;
            while !c.pending_output().is_empty() {
                let n = splits[*k % splits.len()].min(c.pending_output().len());
                *k += 1;
                let chunk = c.pending_output()[..n].to_vec();
                c.consume_output(n);
                s.handle_input(&chunk).unwrap();
                moved = true;
            }
            while let Some(e) = s.poll_event() {
                match &e {
                    ServerEvent::Connect { .. } => s.accept_connect(),
                    ServerEvent::Publish { .. } if accept => s.accept_publish(),
                    ServerEvent::Publish { .. } => s.reject_publish("go away"),
                    _ => {}
                }
                events.push(e);
            }
            while !s.pending_output().is_empty() {
                let n = splits[*k % splits.len()].min(s.pending_output().len());
                *k += 1;
                let chunk = s.pending_output()[..n].to_vec();
                s.consume_output(n);
                let _ = c.handle_input(&chunk);
                moved = true;
            }
            if !moved {
                return events;
            }
        }
    }

    fn frames() -> Vec<Frame> {
        let mut v = Vec::new();
        for i in 0..30i64 {
            let dts = 900_000 + i * 2970;
            v.push(Frame {
                track: 1,
                pts: dts + 5940,
                dts,
                keyframe: i % 10 == 0,
                data: Bytes::from(vec![
                    0,
                    0,
                    0,
                    3,
                    if i % 10 == 0 { 0x65 } else { 0x41 },
                    i as u8,
                    7,
                ]),
            });
            v.push(Frame {
                track: 2,
                pts: dts + 90,
                dts: dts + 90,
                keyframe: true,
                data: Bytes::from(vec![0x21, i as u8]),
            });
        }
        v
    }

    #[test]
    fn client_plays_from_a_server_in_memory() {
        let mut cfg = ClientConfig::from_url("rtmp://origin:1935/app/cam").unwrap();
        cfg.play = true;
        let mut c = ClientSession::new(cfg);
        let mut s = ServerSession::new(ServerConfig::default());
        let mut k = 0;
        let mut played = None;
        for _ in 0..4 {
            for e in pump(&mut c, &mut s, &[1000], &mut k, true) {
                if let ServerEvent::Play { stream_name } = e {
                    played = Some(stream_name);
                    s.accept_play();
                }
            }
        }
        assert_eq!(played.as_deref(), Some("cam"));
        let tracks = vec![h264_track(), aac_track()];
        s.send_tracks(&tracks).unwrap();
        let sent = frames();
        for f in &sent {
            s.send_frame(f).unwrap();
        }
        pump(&mut c, &mut s, &[777], &mut k, true);
        let events: Vec<ClientEvent> = std::iter::from_fn(|| c.poll_event()).collect();
        assert!(events.contains(&ClientEvent::Playing), "{events:?}");
        let got_tracks: Vec<&Vec<Track>> = events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Tracks(t) => Some(t),
                _ => None,
            })
            .collect();
        assert!(got_tracks
            .last()
            .unwrap()
            .iter()
            .any(|t| t.codec == crate::media::Codec::H264));
        let got: Vec<&Frame> = events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Frame(f) => Some(f),
                _ => None,
            })
            .collect();
        assert_eq!(got.len(), sent.len(), "every frame");
        let video: Vec<&&Frame> = got
            .iter()
            .filter(|f| f.keyframe && f.data.len() == 7)
            .collect();
        assert_eq!(video.len(), 3, "three keyframes");
        // The server's stream ends: the play fails with the reason.
        s.stop_play("the publisher left");
        pump(&mut c, &mut s, &[777], &mut k, true);
        let rest: Vec<ClientEvent> = std::iter::from_fn(|| c.poll_event()).collect();
        assert!(
            rest.iter()
                .any(|e| matches!(e, ClientEvent::Error(w) if w.contains("ended"))),
            "{rest:?}"
        );
    }

    fn publish_through(splits: &[usize], n_bytes: usize) {
        let mut c = ClientSession::new(ClientConfig::from_url("rtmp://h/live/key").unwrap());
        let mut s = ServerSession::new(ServerConfig::default());
        let mut k = 0;
        let ev = pump(&mut c, &mut s, splits, &mut k, true);
        assert!(
            matches!(&ev[0], ServerEvent::Connect { app, tc_url, .. } if app == "live" && tc_url == "rtmp://h/live")
        );
        assert!(matches!(&ev[1], ServerEvent::Publish { stream_name, .. } if stream_name == "key"));
        assert_eq!(c.poll_event(), Some(ClientEvent::Connected));
        assert_eq!(c.poll_event(), Some(ClientEvent::Publishing));
        let tracks = vec![h264_track(), aac_track()];
        c.send_tracks(&tracks).unwrap();
        let sent = frames();
        let mut ev = Vec::new();
        for f in &sent {
            c.send_frame(f).unwrap();
            if n_bytes > 0 && c.pending_output().len() > n_bytes {
                ev.extend(pump(&mut c, &mut s, splits, &mut k, true));
            }
        }
        ev.extend(pump(&mut c, &mut s, splits, &mut k, true));
        c.close();
        ev.extend(pump(&mut c, &mut s, splits, &mut k, true));
        assert!(matches!(&ev[0], ServerEvent::Metadata(m) if m.get_f64("width") == Some(640.0)));
        let ServerEvent::TracksChanged(t) = &ev[2] else {
            panic!("{:?}", ev[2])
        };
        assert_eq!(t[0].config, tracks[0].config);
        assert_eq!(t[1].config, tracks[1].config);
        let got: Vec<&Frame> = ev
            .iter()
            .filter_map(|e| match e {
                ServerEvent::Frame(f) => Some(f),
                _ => None,
            })
            .collect();
        assert_eq!(got.len(), sent.len());
        for (g, f) in got.iter().zip(&sent) {
            assert_eq!(g.track, f.track);
            assert_eq!(g.dts, f.dts - 900_000);
            assert_eq!(g.pts, f.pts - 900_000);
            assert_eq!(g.keyframe, f.keyframe);
            assert_eq!(g.data, f.data);
        }
        assert_eq!(ev.last(), Some(&ServerEvent::Unpublish));
    }

    #[test]
    fn client_publishes_to_server_in_memory() {
        publish_through(&[usize::MAX], 0);
        publish_through(&[1], 100);
        publish_through(&[7, 1500, 3, 64000], 10);
    }

    #[test]
    fn hevc_publishes_over_enhanced_rtmp() {
        let mut c = ClientSession::new(ClientConfig::from_url("rtmp://h/live/key").unwrap());
        let mut s = ServerSession::new(ServerConfig::default());
        let mut k = 0;
        pump(&mut c, &mut s, &[usize::MAX], &mut k, true);
        let track = crate::rtmp::flv::tests::h265_track();
        c.send_tracks(std::slice::from_ref(&track)).unwrap();
        let frames: Vec<Frame> = (0..5i64)
            .map(|i| Frame {
                track: 1,
                pts: i * 3600 + if i % 2 == 1 { 7200 } else { 0 },
                dts: i * 3600,
                keyframe: i == 0,
                data: Bytes::from(vec![
                    0,
                    0,
                    0,
                    3,
                    if i == 0 { 0x26 } else { 0x02 },
                    1,
                    i as u8,
                ]),
            })
            .collect();
        for f in &frames {
            c.send_frame(f).unwrap();
        }
        let ev = pump(&mut c, &mut s, &[usize::MAX], &mut k, true);
        assert!(matches!(&ev[0], ServerEvent::Metadata(m)
            if m.get_f64("videocodecid") == Some(f64::from(u32::from_be_bytes(*b"hvc1")))));
        let ServerEvent::TracksChanged(t) = &ev[1] else {
            panic!("{:?}", ev[1])
        };
        assert_eq!(t[0].config, track.config);
        let got: Vec<Frame> = ev
            .into_iter()
            .filter_map(|e| match e {
                ServerEvent::Frame(f) => Some(f),
                _ => None,
            })
            .collect();
        assert_eq!(got, frames);
    }

    #[test]
    fn rejected_publish_reaches_client() {
        let mut c = ClientSession::new(ClientConfig::from_url("rtmp://h/live/key").unwrap());
        let mut s = ServerSession::new(ServerConfig::default());
        let mut k = 0;
        pump(&mut c, &mut s, &[usize::MAX], &mut k, false);
        assert_eq!(c.poll_event(), Some(ClientEvent::Connected));
        assert_eq!(c.poll_event(), Some(ClientEvent::Error("go away".into())));
        assert_eq!(c.state(), ClientState::Failed);
        assert!(c.send_frame(&frames()[0]).is_err());
    }

    #[test]
    fn timestamps_rebased_and_monotonic() {
        let mut c = ClientSession::new(ClientConfig::from_url("rtmp://h/live/key").unwrap());
        let mut s = ServerSession::new(ServerConfig::default());
        let mut k = 0;
        pump(&mut c, &mut s, &[usize::MAX], &mut k, true);
        c.send_tracks(&[h264_track(), aac_track()]).unwrap();
        let mk = |track, dts| Frame {
            track,
            pts: dts,
            dts,
            keyframe: true,
            data: Bytes::from_static(&[0, 0, 0, 1, 0x65]),
        };
        for f in [
            mk(1, 9000),
            mk(2, 8100),
            mk(1, 11970),
            mk(1, 10980),
            mk(7, 0),
        ] {
            c.send_frame(&f).unwrap();
        }
        let ev = pump(&mut c, &mut s, &[usize::MAX], &mut k, true);
        let dts: Vec<(u32, i64)> = ev
            .iter()
            .filter_map(|e| match e {
                ServerEvent::Frame(f) => Some((f.track, f.dts)),
                _ => None,
            })
            .collect();
        // Audio from before the first frame (8100 < 9000) and video older
        // than its track's last (10980 < 11970) are dropped, never sent
        // with a repeated time; track 7 is not announced.
        assert_eq!(dts, vec![(1, 0), (1, 2970)]);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..8000)) {
            crate::rtmp::fuzz::fuzz_client(&data);
        }

        #[test]
        fn any_split_publishes(splits in prop::collection::vec(1usize..5000, 1..10)) {
            publish_through(&splits, 50);
        }
    }
}
