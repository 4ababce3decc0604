//! [`ServerSession`]: the publisher-facing side of RTMP that kiln runs for
//! ingest. Handshake, chunk stream, the NetConnection / NetStream commands
//! ffmpeg and OBS send (connect, releaseStream, FCPublish, createStream,
//! _checkbw, publish, FCUnpublish, deleteStream, closeStream), metadata,
//! and audio/video tags turned into tracks and frames.
//!
//! kiln decides about connections and publishing: the session reports
//! [`ServerEvent::Connect`] and [`ServerEvent::Publish`] and waits for
//! [`ServerSession::accept_connect`] / [`ServerSession::reject_connect`] and
//! [`ServerSession::accept_publish`] / [`ServerSession::reject_publish`].
//! Messages arriving while a decision is pending (clients that do not wait
//! for the answer) are held, bounded, and handled after it; media of a
//! rejected publish is dropped.
//!
//! Track ids: video is [`VIDEO_TRACK_ID`] (1), audio [`AUDIO_TRACK_ID`] (2),
//! stable for the session.
//!
//! Playback: `play` is reported as [`ServerEvent::Play`]; kiln answers
//! with [`ServerSession::accept_play`] / [`ServerSession::reject_play`],
//! then writes the stream's tracks and frames ([`ServerSession::send_tracks`],
//! [`ServerSession::send_frame`]) as the push client does (shared
//! [`MediaOut`]).
//!
//! Not here: sockets, time (none is needed), TLS.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::media::{Frame, Track};

use super::amf0::Amf0Value;
use super::chunk::{
    message_type, user_control, ChunkDecoder, MessageStreamId, RtmpConnection, RtmpMessage,
    DEFAULT_MAX_CHUNK_STREAMS, DEFAULT_MAX_MESSAGE_SIZE,
};
use super::command::{amf0_body, parse_command, status, Command};
use super::flv::{TagIngest, TagOutcome};
use super::handshake::ServerHandshake;
use super::media_out::MediaOut;
use super::RtmpError;

pub use super::flv::{AUDIO_TRACK_ID, VIDEO_TRACK_ID};

/// Limits and what the server announces.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Chunk size for what the server sends (announced with Set Chunk Size).
    pub chunk_size: u32,
    /// Window Acknowledgement Size announced to the publisher.
    pub window_ack_size: u32,
    /// Set Peer Bandwidth announced to the publisher.
    pub peer_bandwidth: u32,
    /// Largest message accepted from the publisher.
    pub max_message_size: u32,
    /// Most chunk streams a publisher may use.
    pub max_chunk_streams: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            chunk_size: 65536,
            window_ack_size: 2_500_000,
            peer_bandwidth: 2_500_000,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            max_chunk_streams: DEFAULT_MAX_CHUNK_STREAMS,
        }
    }
}

/// What happened on a server session.
#[derive(Clone, Debug, PartialEq)]
pub enum ServerEvent {
    /// The client sent `connect`. Answer with `accept_connect` or
    /// `reject_connect`.
    Connect {
        /// The application (trailing slashes removed).
        app: String,
        /// `tcUrl`, empty if absent.
        tc_url: String,
        /// `flashVer`, empty if absent.
        flash_ver: String,
        /// The whole command object.
        properties: Amf0Value,
    },
    /// The client sent `publish`. Answer with `accept_publish` or
    /// `reject_publish`.
    Publish {
        /// The stream name as sent (may carry `?query`).
        stream_name: String,
        /// "live", "record" or "append" ("live" if absent).
        publish_type: String,
    },
    /// onMetaData (from `@setDataFrame` or sent directly).
    Metadata(Amf0Value),
    /// A sequence header created or changed a track: all current tracks.
    TracksChanged(Vec<Track>),
    Frame(Frame),
    /// FCUnpublish, deleteStream or closeStream ended the publishing.
    Unpublish,
    /// The client asked to `play` a stream. Answer with `accept_play` or
    /// `reject_play`.
    Play {
        /// The stream name as sent (may carry `?query`).
        stream_name: String,
    },
    /// deleteStream or closeStream ended the playing.
    PlayStopped,
}

#[derive(Clone, Debug, PartialEq)]
enum State {
    /// Handshake or waiting for connect.
    Connecting,
    ConnectPending {
        transaction_id: f64,
    },
    Connected,
    PublishPending {
        stream_id: MessageStreamId,
        name: String,
    },
    Publishing {
        stream_id: MessageStreamId,
    },
    PlayPending {
        stream_id: MessageStreamId,
        name: String,
    },
    Playing {
        stream_id: MessageStreamId,
    },
    Closed,
}

/// The server side of one RTMP connection (see the module docs).
#[derive(Debug)]
pub struct ServerSession {
    config: ServerConfig,
    handshake: ServerHandshake,
    conn: RtmpConnection,
    state: State,
    events: VecDeque<ServerEvent>,
    ingest: TagIngest,
    next_stream_id: MessageStreamId,
    scratch: Vec<u8>,
    /// Messages that arrived while kiln was deciding about a connect or
    /// publish; handled once it has.
    deferred: VecDeque<RtmpMessage>,
    deferred_bytes: usize,
    /// An error met while handling deferred messages, reported by the next
    /// `handle_input`.
    failure: Option<RtmpError>,
    /// What a player is sent.
    media: MediaOut,
}

/// Most messages held while a decision is pending.
const MAX_DEFERRED: usize = 1024;

/// Unassembled and held message data a connection may have before it
/// publishes (DECISIONS section 15): commands are small, and an
/// unauthenticated peer must not pin megabytes.
pub const PRE_PUBLISH_BUFFER: usize = 64 * 1024;

impl ServerSession {
    pub fn new(config: ServerConfig) -> Self {
        let decoder = ChunkDecoder::new(config.max_message_size, config.max_chunk_streams);
        ServerSession {
            config,
            handshake: ServerHandshake::default(),
            conn: RtmpConnection::new(decoder),
            state: State::Connecting,
            events: VecDeque::new(),
            ingest: TagIngest::default(),
            next_stream_id: 1,
            scratch: Vec::new(),
            deferred: VecDeque::new(),
            deferred_bytes: 0,
            failure: None,
            media: MediaOut::default(),
        }
    }

    /// Feeds bytes read from the socket. An error is fatal: send what is
    /// pending (if anything) and close.
    pub fn handle_input(&mut self, data: &[u8]) -> Result<(), RtmpError> {
        if self.state == State::Closed {
            return Err(self.failure.take().unwrap_or(RtmpError::Closed));
        }
        let r = self.input(data);
        if r.is_err() {
            self.close();
        }
        r
    }

    fn close(&mut self) {
        self.state = State::Closed;
        self.deferred.clear();
        self.deferred_bytes = 0;
    }

    fn decision_pending(&self) -> bool {
        matches!(
            self.state,
            State::ConnectPending { .. } | State::PublishPending { .. } | State::PlayPending { .. }
        )
    }

    /// Handles messages held while a decision was pending, up to the next
    /// decision.
    fn resume(&mut self) {
        while !self.decision_pending() && self.state != State::Closed {
            let Some(msg) = self.deferred.pop_front() else {
                break;
            };
            self.deferred_bytes -= msg.payload.len();
            if let Err(e) = self.on_message(msg) {
                self.failure = Some(e);
                self.close();
            }
        }
    }

    /// How much message data this connection may hold now. A pending
    /// `publish` is decided in the same loop turn, so media that follows it
    /// in the same read is held with the publishing limit.
    fn buffer_limit(&self) -> usize {
        if matches!(
            self.state,
            State::Publishing { .. } | State::PublishPending { .. }
        ) {
            2 * self.config.max_message_size as usize
        } else {
            PRE_PUBLISH_BUFFER
        }
    }

    /// Bytes of message data held: partial messages and messages deferred
    /// while a decision is pending (what counts against the server-wide
    /// ingest budget).
    pub fn buffered(&self) -> usize {
        self.conn.decoder.buffered() as usize + self.deferred_bytes
    }

    fn input(&mut self, mut data: &[u8]) -> Result<(), RtmpError> {
        let limit = self.buffer_limit();
        self.conn.decoder.set_buffer_limit(limit as u64);
        if !self.handshake.is_done() {
            let n = self.handshake.handle(data, self.conn.output.writer())?;
            data = &data[n..];
            if !self.handshake.is_done() {
                return Ok(());
            }
        }
        self.conn.handle_input(data)?;
        while let Some(msg) = self.conn.next_message()? {
            if self.decision_pending() || !self.deferred.is_empty() {
                self.deferred_bytes += msg.payload.len();
                if self.deferred.len() >= MAX_DEFERRED || self.deferred_bytes > limit {
                    return Err(RtmpError::Protocol(
                        "too much data while connect or publish awaited an answer",
                    ));
                }
                self.deferred.push_back(msg);
                continue;
            }
            self.on_message(msg)?;
            if self.state == State::Closed {
                break;
            }
        }
        Ok(())
    }

    /// The next event, in order.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// Bytes to write to the socket.
    pub fn pending_output(&self) -> &[u8] {
        self.conn.output.pending()
    }

    /// Marks `n` bytes of [`pending_output`](Self::pending_output) written.
    pub fn consume_output(&mut self, n: usize) {
        self.conn.output.consume(n);
    }

    /// True once the session is over (rejected, failed): flush and close.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// True while a publish is accepted and not ended.
    pub fn is_publishing(&self) -> bool {
        matches!(self.state, State::Publishing { .. })
    }

    /// The current tracks (video first).
    pub fn tracks(&self) -> Vec<Track> {
        self.ingest.tracks()
    }

    /// Accepts the pending `connect`: Window Acknowledgement Size, Set Peer
    /// Bandwidth, Set Chunk Size, then `_result` with
    /// NetConnection.Connect.Success.
    pub fn accept_connect(&mut self) {
        let State::ConnectPending { transaction_id } = self.state else {
            return;
        };
        self.conn.write_window_ack_size(self.config.window_ack_size);
        self.conn
            .write_set_peer_bandwidth(self.config.peer_bandwidth);
        self.conn.write_set_chunk_size(self.config.chunk_size);
        let props = Amf0Value::Object(vec![
            ("fmsVer".into(), "FMS/3,0,1,123".into()),
            ("capabilities".into(), 31.0.into()),
        ]);
        let mut info = status(
            "status",
            "NetConnection.Connect.Success",
            "Connection succeeded.",
        );
        if let Amf0Value::Object(p) = &mut info {
            p.push(("objectEncoding".into(), 0.0.into()));
        }
        self.send_command(0, "_result", transaction_id, &[props, info]);
        self.state = State::Connected;
        self.resume();
    }

    /// Rejects the pending `connect` with `_error`
    /// (NetConnection.Connect.Rejected) and closes the session.
    pub fn reject_connect(&mut self, description: &str) {
        let State::ConnectPending { transaction_id } = self.state else {
            return;
        };
        let info = status("error", "NetConnection.Connect.Rejected", description);
        self.send_command(0, "_error", transaction_id, &[Amf0Value::Null, info]);
        self.close();
    }

    /// Accepts the pending `publish`: Stream Begin, then onStatus
    /// NetStream.Publish.Start.
    pub fn accept_publish(&mut self) {
        let State::PublishPending { stream_id, name } = &self.state else {
            return;
        };
        let (stream_id, name) = (*stream_id, name.clone());
        self.conn
            .write_user_control(user_control::STREAM_BEGIN, stream_id);
        let mut info = status(
            "status",
            "NetStream.Publish.Start",
            &format!("{name} is now published."),
        );
        if let Amf0Value::Object(p) = &mut info {
            p.push(("details".into(), name.into()));
        }
        self.send_command(stream_id, "onStatus", 0.0, &[Amf0Value::Null, info]);
        self.state = State::Publishing { stream_id };
        self.resume();
    }

    /// Rejects the pending `publish` with onStatus level "error", code
    /// NetStream.Publish.BadName (ffmpeg prints the description).
    pub fn reject_publish(&mut self, description: &str) {
        self.reject_publish_with_code("NetStream.Publish.BadName", description);
    }

    /// Rejects the pending `publish` with the given status code (e.g.
    /// NetStream.Publish.Denied) and description. The connection stays
    /// open; kiln may close it once the output is flushed.
    pub fn reject_publish_with_code(&mut self, code: &str, description: &str) {
        let State::PublishPending { stream_id, .. } = self.state else {
            return;
        };
        let info = status("error", code, description);
        self.send_command(stream_id, "onStatus", 0.0, &[Amf0Value::Null, info]);
        self.state = State::Connected;
        self.resume();
    }

    /// Accepts the pending `play`: Stream Begin, onStatus
    /// NetStream.Play.Reset and NetStream.Play.Start, `|RtmpSampleAccess`.
    /// Then send the tracks and frames.
    pub fn accept_play(&mut self) {
        let State::PlayPending { stream_id, name } = &self.state else {
            return;
        };
        let (stream_id, name) = (*stream_id, name.clone());
        self.conn
            .write_user_control(user_control::STREAM_BEGIN, stream_id);
        for (code, text) in [
            (
                "NetStream.Play.Reset",
                format!("Playing and resetting {name}."),
            ),
            ("NetStream.Play.Start", format!("Started playing {name}.")),
        ] {
            let mut info = status("status", code, &text);
            if let Amf0Value::Object(p) = &mut info {
                p.push(("details".into(), name.clone().into()));
            }
            self.send_command(stream_id, "onStatus", 0.0, &[Amf0Value::Null, info]);
        }
        self.scratch.clear();
        super::amf0::encode_all(
            &["|RtmpSampleAccess".into(), true.into(), true.into()],
            &mut self.scratch,
        );
        let body = std::mem::take(&mut self.scratch);
        self.conn.write_message(
            super::chunk::csid::STREAM,
            0,
            message_type::DATA_AMF0,
            stream_id,
            &[&body],
        );
        self.scratch = body;
        self.media = MediaOut::default();
        self.state = State::Playing { stream_id };
        self.resume();
    }

    /// Rejects the pending `play` with onStatus level "error" and `code`
    /// (NetStream.Play.StreamNotFound, ...); ffmpeg prints the description.
    pub fn reject_play(&mut self, code: &str, description: &str) {
        let State::PlayPending { stream_id, .. } = self.state else {
            return;
        };
        let info = status("error", code, description);
        self.send_command(stream_id, "onStatus", 0.0, &[Amf0Value::Null, info]);
        self.state = State::Connected;
        self.resume();
    }

    /// True while a `play` is accepted and not stopped.
    pub fn is_playing(&self) -> bool {
        matches!(self.state, State::Playing { .. })
    }

    /// Announces the tracks to the player (again when they change).
    pub fn send_tracks(&mut self, tracks: &[Track]) -> Result<(), RtmpError> {
        let State::Playing { stream_id } = self.state else {
            return Err(RtmpError::Closed);
        };
        self.media
            .announce(&mut self.conn, &mut self.scratch, stream_id, tracks)
    }

    /// Sends a frame to the player (frames of tracks not announced are
    /// ignored).
    pub fn send_frame(&mut self, frame: &Frame) -> Result<(), RtmpError> {
        let State::Playing { stream_id } = self.state else {
            return Err(RtmpError::Closed);
        };
        self.media.send_frame(&mut self.conn, frame, stream_id)
    }

    /// Tells the player the stream ended: onStatus NetStream.Play.Stop and
    /// Stream EOF. The session is over; flush and close.
    pub fn stop_play(&mut self, description: &str) {
        let State::Playing { stream_id } = self.state else {
            return;
        };
        let info = status("status", "NetStream.Play.Stop", description);
        self.send_command(stream_id, "onStatus", 0.0, &[Amf0Value::Null, info]);
        self.conn
            .write_user_control(user_control::STREAM_EOF, stream_id);
        self.close();
    }

    fn send_command(
        &mut self,
        stream_id: MessageStreamId,
        name: &str,
        transaction_id: f64,
        values: &[Amf0Value],
    ) {
        super::command::send_command(
            &mut self.conn,
            &mut self.scratch,
            stream_id,
            name,
            transaction_id,
            values,
        );
    }

    fn on_message(&mut self, msg: RtmpMessage) -> Result<(), RtmpError> {
        match msg.type_id {
            message_type::COMMAND_AMF0 | message_type::COMMAND_AMF3 => {
                if let Some(cmd) = parse_command(&msg)? {
                    self.on_command(&msg, cmd)?;
                }
            }
            message_type::DATA_AMF0 | message_type::DATA_AMF3 => self.on_data(&msg)?,
            message_type::AUDIO | message_type::VIDEO => {
                self.on_media(msg.type_id, msg.timestamp, &msg.payload)?
            }
            message_type::AGGREGATE => self.on_aggregate(&msg)?,
            _ => {}
        }
        Ok(())
    }

    fn on_command(&mut self, msg: &RtmpMessage, cmd: Command) -> Result<(), RtmpError> {
        let txn = cmd.transaction_id;
        match cmd.name.as_str() {
            "connect" => {
                if self.state != State::Connecting {
                    return Err(RtmpError::Protocol("connect on a connected session"));
                }
                let app = cmd
                    .object
                    .get_str("app")
                    .unwrap_or("")
                    .trim_end_matches('/')
                    .to_owned();
                let tc_url = cmd.object.get_str("tcUrl").unwrap_or("").to_owned();
                let flash_ver = cmd.object.get_str("flashVer").unwrap_or("").to_owned();
                self.state = State::ConnectPending {
                    transaction_id: txn,
                };
                self.events.push_back(ServerEvent::Connect {
                    app,
                    tc_url,
                    flash_ver,
                    properties: cmd.object,
                });
            }
            "createStream" => {
                self.require_connected()?;
                let id = self.next_stream_id;
                self.next_stream_id = self.next_stream_id.saturating_add(1).min(1000);
                self.send_command(0, "_result", txn, &[Amf0Value::Null, f64::from(id).into()]);
            }
            "publish" => {
                if self.state != State::Connected {
                    return Err(RtmpError::Protocol("publish before connect or twice"));
                }
                let stream_name = cmd.arg_str(0).unwrap_or("").to_owned();
                let publish_type = cmd.arg_str(1).unwrap_or("live").to_owned();
                self.state = State::PublishPending {
                    stream_id: msg.stream_id,
                    name: stream_name.clone(),
                };
                self.events.push_back(ServerEvent::Publish {
                    stream_name,
                    publish_type,
                });
            }
            "FCUnpublish" | "deleteStream" | "closeStream" => {
                if cmd.name == "FCUnpublish" {
                    self.reply_empty(txn);
                }
                if matches!(
                    self.state,
                    State::Publishing { .. } | State::PublishPending { .. }
                ) {
                    self.state = State::Connected;
                    self.events.push_back(ServerEvent::Unpublish);
                } else if matches!(self.state, State::Playing { .. }) && cmd.name != "FCUnpublish" {
                    self.state = State::Connected;
                    self.events.push_back(ServerEvent::PlayStopped);
                }
            }
            "releaseStream" | "FCPublish" | "_checkbw" => {
                self.require_connected()?;
                self.reply_empty(txn);
            }
            "getStreamLength" => {
                // A live stream has no length: 0 s, as a number (FFmpeg warns
                // on any other reply).
                self.require_connected()?;
                if txn != 0.0 {
                    self.send_command(
                        0,
                        "_result",
                        txn,
                        &[Amf0Value::Null, Amf0Value::Number(0.0)],
                    );
                }
            }
            "play" | "play2" => {
                if self.state != State::Connected {
                    return Err(RtmpError::Protocol("play before connect or while busy"));
                }
                let stream_name = cmd.arg_str(0).unwrap_or("").to_string();
                self.state = State::PlayPending {
                    stream_id: msg.stream_id,
                    name: stream_name.clone(),
                };
                self.events.push_back(ServerEvent::Play { stream_name });
            }
            _ => {}
        }
        Ok(())
    }

    fn require_connected(&self) -> Result<(), RtmpError> {
        match self.state {
            State::Connecting | State::ConnectPending { .. } | State::Closed => {
                Err(RtmpError::Protocol("command before connect was accepted"))
            }
            _ => Ok(()),
        }
    }

    fn reply_empty(&mut self, txn: f64) {
        if txn != 0.0 {
            self.send_command(0, "_result", txn, &[Amf0Value::Null, Amf0Value::Undefined]);
        }
    }

    fn on_data(&mut self, msg: &RtmpMessage) -> Result<(), RtmpError> {
        let values = super::amf0::decode_all(amf0_body(msg))?;
        let meta = match values.as_slice() {
            [Amf0Value::String(a), Amf0Value::String(b), m, ..]
                if a == "@setDataFrame" && b == "onMetaData" =>
            {
                m
            }
            [Amf0Value::String(a), m, ..] if a == "onMetaData" => m,
            _ => return Ok(()),
        };
        if meta.properties().is_some() {
            self.ingest.set_metadata(meta);
            self.events.push_back(ServerEvent::Metadata(meta.clone()));
        }
        Ok(())
    }

    fn on_media(&mut self, type_id: u8, timestamp: u32, body: &Bytes) -> Result<(), RtmpError> {
        if !self.is_publishing() || body.is_empty() {
            return Ok(());
        }
        let TagOutcome { tracks_changed } = if type_id == message_type::VIDEO {
            self.ingest.video(timestamp, body)?
        } else {
            self.ingest.audio(timestamp, body)?
        };
        if tracks_changed {
            self.events
                .push_back(ServerEvent::TracksChanged(self.ingest.tracks()));
        }
        self.events
            .extend(self.ingest.frames().map(ServerEvent::Frame));
        Ok(())
    }

    /// Aggregate messages: FLV tags back to back, each followed by its
    /// previous-tag-size; sub-tag times are relative to the first one.
    fn on_aggregate(&mut self, msg: &RtmpMessage) -> Result<(), RtmpError> {
        let p = &msg.payload;
        let mut pos = 0usize;
        let mut first_ts: Option<u32> = None;
        while let Some(h) = p.get(pos..pos + 11) {
            let type_id = h[0];
            let size = (usize::from(h[1]) << 16) | (usize::from(h[2]) << 8) | usize::from(h[3]);
            let ts = u32::from_be_bytes([h[7], h[4], h[5], h[6]]);
            let start = pos + 11;
            let Some(end) = start.checked_add(size).filter(|&e| e <= p.len()) else {
                return Err(RtmpError::Protocol("aggregate sub-message overruns"));
            };
            let base = *first_ts.get_or_insert(ts);
            let t = msg.timestamp.wrapping_add(ts.wrapping_sub(base));
            let body = p.slice(start..end);
            match type_id {
                message_type::AUDIO | message_type::VIDEO => self.on_media(type_id, t, &body)?,
                message_type::DATA_AMF0 => {
                    let sub = RtmpMessage {
                        chunk_stream: msg.chunk_stream,
                        timestamp: t,
                        type_id,
                        stream_id: msg.stream_id,
                        payload: body,
                    };
                    self.on_data(&sub)?;
                }
                _ => {}
            }
            pos = end + 4;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtmp::chunk::ChunkEncoder;
    use crate::rtmp::command::write_command;
    use crate::rtmp::flv::tests::{aac_track, h264_track};
    use crate::rtmp::flv::{
        audio_frame_header, write_audio_sequence_header, write_video_sequence_header,
    };
    use crate::rtmp::handshake::HANDSHAKE_SIZE;
    use proptest::prelude::*;

    /// A hand-driven publisher: raw chunks, no ClientSession.
    struct Publisher {
        enc: ChunkEncoder,
        out: Vec<u8>,
    }

    impl Publisher {
        fn new() -> Self {
            let mut out = vec![3u8];
            out.extend_from_slice(&[0u8; HANDSHAKE_SIZE]);
            out.extend_from_slice(&[0u8; HANDSHAKE_SIZE]);
            Publisher {
                enc: ChunkEncoder::default(),
                out,
            }
        }

        fn command(&mut self, stream_id: u32, name: &str, txn: f64, values: &[Amf0Value]) {
            let mut b = Vec::new();
            write_command(&mut b, name, txn, values);
            self.enc.write_message(
                &mut self.out,
                3,
                0,
                message_type::COMMAND_AMF0,
                stream_id,
                &[&b],
            );
        }

        fn media(&mut self, type_id: u8, ts: u32, body: &[u8]) {
            self.enc
                .write_message(&mut self.out, 6, ts, type_id, 1, &[body]);
        }
    }

    fn server_replies(s: &ServerSession) -> Vec<Command> {
        // Skip S0 S1 S2, decode the rest.
        let out = &s.pending_output()[1 + 2 * HANDSHAKE_SIZE..];
        let mut d = ChunkDecoder::default();
        d.decode(out).unwrap();
        std::iter::from_fn(|| d.next_message())
            .filter(|m| m.type_id == message_type::COMMAND_AMF0)
            .filter_map(|m| parse_command(&m).unwrap())
            .collect()
    }

    fn connect_and_publish(s: &mut ServerSession, p: &mut Publisher) {
        let obj = Amf0Value::Object(vec![
            ("app".into(), "live/".into()),
            ("tcUrl".into(), "rtmp://h/live".into()),
            ("type".into(), "nonprivate".into()),
        ]);
        p.command(0, "connect", 1.0, &[obj]);
        s.handle_input(&std::mem::take(&mut p.out)).unwrap();
        match s.poll_event() {
            Some(ServerEvent::Connect { app, tc_url, .. }) => {
                assert_eq!(app, "live");
                assert_eq!(tc_url, "rtmp://h/live");
            }
            e => panic!("{e:?}"),
        }
        s.accept_connect();
        p.command(0, "releaseStream", 2.0, &[Amf0Value::Null, "key".into()]);
        p.command(0, "FCPublish", 3.0, &[Amf0Value::Null, "key".into()]);
        p.command(0, "createStream", 4.0, &[Amf0Value::Null]);
        p.command(
            1,
            "publish",
            5.0,
            &[Amf0Value::Null, "key".into(), "live".into()],
        );
        s.handle_input(&std::mem::take(&mut p.out)).unwrap();
        assert_eq!(
            s.poll_event(),
            Some(ServerEvent::Publish {
                stream_name: "key".into(),
                publish_type: "live".into()
            })
        );
    }

    #[test]
    fn get_stream_length_is_answered_with_a_number_as_ffmpeg_reads_it() {
        let mut s = ServerSession::new(ServerConfig::default());
        let mut p = Publisher::new();
        let obj = Amf0Value::Object(vec![("app".into(), "live".into())]);
        p.command(0, "connect", 1.0, &[obj]);
        s.handle_input(&std::mem::take(&mut p.out)).unwrap();
        assert!(matches!(s.poll_event(), Some(ServerEvent::Connect { .. })));
        s.accept_connect();
        p.command(0, "getStreamLength", 4.0, &[Amf0Value::Null, "cam".into()]);
        s.handle_input(&std::mem::take(&mut p.out)).unwrap();
        let replies = server_replies(&s);
        let reply = replies.iter().find(|c| c.transaction_id == 4.0).unwrap();
        assert_eq!(reply.name, "_result");
        assert_eq!(reply.args, vec![Amf0Value::Number(0.0)]);
    }

    #[test]
    fn ffmpeg_like_publish_flow() {
        let mut s = ServerSession::new(ServerConfig::default());
        let mut p = Publisher::new();
        connect_and_publish(&mut s, &mut p);
        s.accept_publish();
        let replies = server_replies(&s);
        let names: Vec<(&str, f64)> = replies
            .iter()
            .map(|c| (c.name.as_str(), c.transaction_id))
            .collect();
        assert_eq!(
            names,
            vec![
                ("_result", 1.0),
                ("_result", 2.0),
                ("_result", 3.0),
                ("_result", 4.0),
                ("onStatus", 0.0)
            ]
        );
        assert_eq!(
            replies[0].status_code(),
            Some("NetConnection.Connect.Success")
        );
        assert_eq!(replies[3].args[0], Amf0Value::Number(1.0));
        assert_eq!(replies[4].status_code(), Some("NetStream.Publish.Start"));

        // Metadata, sequence headers, frames.
        let mut meta = Vec::new();
        write_command(&mut meta, "@setDataFrame", 0.0, &[]);
        meta.clear();
        crate::rtmp::amf0::encode_all(
            &[
                "@setDataFrame".into(),
                "onMetaData".into(),
                Amf0Value::EcmaArray(vec![("framerate".into(), 30.0.into())]),
            ],
            &mut meta,
        );
        p.enc
            .write_message(&mut p.out, 4, 0, message_type::DATA_AMF0, 1, &[&meta]);
        let mut vsh = Vec::new();
        write_video_sequence_header(&h264_track(), &mut vsh).unwrap();
        p.media(message_type::VIDEO, 0, &vsh);
        let mut ash = Vec::new();
        write_audio_sequence_header(&aac_track(), &mut ash).unwrap();
        p.media(message_type::AUDIO, 0, &ash);
        p.media(
            message_type::VIDEO,
            33,
            &[0x17, 1, 0, 0, 66, 0, 0, 0, 2, 0x65, 0x88],
        );
        let (h, n) = audio_frame_header(&aac_track()).unwrap();
        let mut a = h[..n].to_vec();
        a.push(0x21);
        p.media(message_type::AUDIO, 40, &a);
        s.handle_input(&std::mem::take(&mut p.out)).unwrap();
        let events: Vec<ServerEvent> = std::iter::from_fn(|| s.poll_event()).collect();
        assert!(matches!(events[0], ServerEvent::Metadata(_)));
        let ServerEvent::TracksChanged(t) = &events[1] else {
            panic!()
        };
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].id, VIDEO_TRACK_ID);
        let v = t[0].video.unwrap();
        assert_eq!((v.width, v.height), (640, 360));
        let ServerEvent::TracksChanged(t) = &events[2] else {
            panic!()
        };
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].id, AUDIO_TRACK_ID);
        let ServerEvent::Frame(f) = &events[3] else {
            panic!()
        };
        assert_eq!((f.dts, f.pts, f.keyframe), (33 * 90, 99 * 90, true));
        let ServerEvent::Frame(f) = &events[4] else {
            panic!()
        };
        assert_eq!(
            (f.track, f.dts, &f.data[..]),
            (AUDIO_TRACK_ID, 40 * 90, &[0x21u8][..])
        );

        p.command(0, "FCUnpublish", 6.0, &[Amf0Value::Null, "key".into()]);
        p.command(0, "deleteStream", 7.0, &[Amf0Value::Null, 1.0.into()]);
        s.handle_input(&std::mem::take(&mut p.out)).unwrap();
        assert_eq!(s.poll_event(), Some(ServerEvent::Unpublish));
        assert_eq!(s.poll_event(), None);
    }

    #[test]
    fn rejected_publish_reports_error_status_and_drops_media() {
        let mut s = ServerSession::new(ServerConfig::default());
        let mut p = Publisher::new();
        connect_and_publish(&mut s, &mut p);
        s.reject_publish("stream key unknown");
        let replies = server_replies(&s);
        let last = replies.last().unwrap();
        assert_eq!(last.name, "onStatus");
        assert_eq!(last.status_level(), Some("error"));
        assert_eq!(last.status_code(), Some("NetStream.Publish.BadName"));
        assert_eq!(last.status_description(), Some("stream key unknown"));
        let mut vsh = Vec::new();
        write_video_sequence_header(&h264_track(), &mut vsh).unwrap();
        p.media(message_type::VIDEO, 0, &vsh);
        s.handle_input(&std::mem::take(&mut p.out)).unwrap();
        assert_eq!(s.poll_event(), None);
    }

    #[test]
    fn pipelined_client_loses_nothing() {
        let mut s = ServerSession::new(ServerConfig::default());
        let mut p = Publisher::new();
        p.command(
            0,
            "connect",
            1.0,
            &[Amf0Value::Object(vec![("app".into(), "a".into())])],
        );
        p.command(0, "createStream", 2.0, &[Amf0Value::Null]);
        p.command(1, "publish", 3.0, &[Amf0Value::Null, "k".into()]);
        let mut vsh = Vec::new();
        write_video_sequence_header(&h264_track(), &mut vsh).unwrap();
        p.media(message_type::VIDEO, 0, &vsh);
        s.handle_input(&std::mem::take(&mut p.out)).unwrap();
        assert!(matches!(s.poll_event(), Some(ServerEvent::Connect { .. })));
        assert_eq!(s.poll_event(), None);
        s.accept_connect();
        assert!(matches!(s.poll_event(), Some(ServerEvent::Publish { .. })));
        s.accept_publish();
        assert!(matches!(
            s.poll_event(),
            Some(ServerEvent::TracksChanged(_))
        ));
        // Order preserved for what comes next.
        p.media(
            message_type::VIDEO,
            40,
            &[0x17, 1, 0, 0, 0, 0, 0, 0, 1, 0x65],
        );
        s.handle_input(&std::mem::take(&mut p.out)).unwrap();
        assert!(matches!(s.poll_event(), Some(ServerEvent::Frame(_))));
    }

    #[test]
    fn rejected_connect_closes() {
        let mut s = ServerSession::new(ServerConfig::default());
        let mut p = Publisher::new();
        p.command(
            0,
            "connect",
            1.0,
            &[Amf0Value::Object(vec![("app".into(), "x".into())])],
        );
        s.handle_input(&std::mem::take(&mut p.out)).unwrap();
        assert!(matches!(s.poll_event(), Some(ServerEvent::Connect { .. })));
        s.reject_connect("no such app");
        assert!(s.is_closed());
        let replies = server_replies(&s);
        assert_eq!(replies[0].name, "_error");
        assert_eq!(replies[0].status_description(), Some("no such app"));
        assert_eq!(s.handle_input(&[0]), Err(RtmpError::Closed));
    }

    #[test]
    fn unassembled_data_before_publish_is_capped_at_64_kib() {
        // Two partial messages of 8 MiB - 1 announced, filled past 64 KiB:
        // refused long before either completes.
        let mut s = ServerSession::new(ServerConfig::default());
        let mut p = Publisher::new();
        s.handle_input(&std::mem::take(&mut p.out)).unwrap();
        let len: u32 = 8 * 1024 * 1024 - 1;
        let mut failed = false;
        for csid in [5u8, 7] {
            // type 0 header, csid, ts 0, length, type 20 (command), stream 0
            let mut chunk = vec![csid];
            chunk.extend_from_slice(&[0, 0, 0]);
            chunk.extend_from_slice(&len.to_be_bytes()[1..]);
            chunk.push(message_type::COMMAND_AMF0);
            chunk.extend_from_slice(&[0, 0, 0, 0]);
            chunk.extend_from_slice(&[0u8; 128]);
            if s.handle_input(&chunk).is_err() {
                failed = true;
                break;
            }
            // type 3 continuations of the same message
            for _ in 0..400 {
                let mut c = vec![0xC0 | csid];
                c.extend_from_slice(&[0u8; 128]);
                if s.handle_input(&c).is_err() {
                    failed = true;
                    break;
                }
                assert!(s.buffered() <= PRE_PUBLISH_BUFFER);
            }
        }
        assert!(failed, "more than 64 KiB held before publish");
        assert!(s.is_closed());
    }

    #[test]
    fn after_publish_large_messages_are_taken() {
        let mut s = ServerSession::new(ServerConfig::default());
        let mut p = Publisher::new();
        connect_and_publish(&mut s, &mut p);
        let big = vec![0x17u8; 300 * 1024];
        p.media(message_type::VIDEO, 0, &big);
        s.handle_input(&std::mem::take(&mut p.out)).unwrap();
        assert!(!s.is_closed());
    }

    #[test]
    fn publish_before_connect_is_an_error() {
        let mut s = ServerSession::new(ServerConfig::default());
        let mut p = Publisher::new();
        p.command(1, "publish", 5.0, &[Amf0Value::Null, "key".into()]);
        assert!(matches!(
            s.handle_input(&p.out),
            Err(RtmpError::Protocol(_))
        ));
        assert!(s.is_closed());
    }

    #[test]
    fn aggregate_messages_are_split() {
        let mut s = ServerSession::new(ServerConfig::default());
        let mut p = Publisher::new();
        connect_and_publish(&mut s, &mut p);
        s.accept_publish();
        let mut ash = Vec::new();
        write_audio_sequence_header(&aac_track(), &mut ash).unwrap();
        let mut agg = Vec::new();
        for (ts, body) in [(1000u32, ash.clone()), (1023, vec![0xAF, 1, 0x42])] {
            agg.push(message_type::AUDIO);
            agg.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
            agg.extend_from_slice(&ts.to_be_bytes()[1..]);
            agg.push((ts >> 24) as u8);
            agg.extend_from_slice(&[0, 0, 0]);
            agg.extend_from_slice(&body);
            agg.extend_from_slice(&(11 + body.len() as u32).to_be_bytes());
        }
        p.media(message_type::AGGREGATE, 500, &agg);
        s.handle_input(&std::mem::take(&mut p.out)).unwrap();
        assert!(matches!(
            s.poll_event(),
            Some(ServerEvent::TracksChanged(_))
        ));
        let Some(ServerEvent::Frame(f)) = s.poll_event() else {
            panic!()
        };
        assert_eq!(f.dts, 523 * 90);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..4096)) {
            crate::rtmp::fuzz::fuzz_server(&data);
            let mut s = ServerSession::new(ServerConfig::default());
            let _ = s.handle_input(&data);
        }

        #[test]
        fn arbitrary_chunks_after_publish_never_panic(
            msgs in prop::collection::vec((any::<u8>(), prop::collection::vec(any::<u8>(), 0..64)), 0..20)
        ) {
            let mut s = ServerSession::new(ServerConfig::default());
            let mut p = Publisher::new();
            connect_and_publish(&mut s, &mut p);
            s.accept_publish();
            for (t, body) in &msgs {
                p.media(*t % 24, 0, body);
            }
            let _ = s.handle_input(&p.out);
            while s.poll_event().is_some() {}
        }
    }
}
