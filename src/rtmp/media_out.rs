//! Media going out on one RTMP connection, the same whether kiln publishes
//! it (a push, [`super::client::ClientSession`]) or serves it to a player
//! (`play`, [`super::server::ServerSession`]): onMetaData and the sequence
//! headers of the first video (H.264/H.265) and audio (AAC/MP3) track,
//! then frames as FLV tag bodies, times rebased so the first frame sent is
//! at 0 ms and strictly increasing per track: a frame from before the first
//! one (audio that a source's encoder delays behind the keyframe a session
//! starts on) or older than its track's last is dropped, never sent with a
//! repeated or earlier timestamp (issue 28: an RTSP pull's push recorded
//! timestamps that went back).

use crate::media::{Codec, Frame, MediaKind, Ticks, Track, TrackId, TICKS_PER_MS};

use super::amf0::{self, Amf0Value};
use super::chunk::{csid, message_type, ChunkStreamId, MessageStreamId, RtmpConnection};
use super::flv;
use super::RtmpError;

/// A frame as a message of one connection: everything but the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameMessage {
    pub chunk_stream: ChunkStreamId,
    pub type_id: u8,
    pub timestamp: u32,
    pub stream_id: MessageStreamId,
}

/// The frame timing of a session: the first frame's decode time and each
/// track's last timestamp.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MediaClock {
    base_dts: Option<Ticks>,
    video_ms: i64,
    audio_ms: i64,
}

impl MediaClock {
    /// No frame timed yet.
    pub const ZERO: MediaClock = MediaClock {
        base_dts: None,
        video_ms: 0,
        audio_ms: 0,
    };
}

/// The FLV tag header of a frame of `track`: the message payload is this
/// and the frame's data. The same for every connection (the composition
/// offset is the frame's own, pts - dts).
pub fn tag_header(track: &Track, frame: &Frame) -> Result<([u8; 8], usize), RtmpError> {
    Ok(match track.kind() {
        MediaKind::Video => {
            let cts = frame
                .pts
                .saturating_sub(frame.dts)
                .div_euclid(TICKS_PER_MS)
                .clamp(0, 0x7F_FFFF) as i32;
            flv::video_frame_header(track.codec, frame.keyframe, cts)?
        }
        _ => {
            let (h, n) = flv::audio_frame_header(track)?;
            let mut out = [0u8; 8];
            out[..2].copy_from_slice(&h);
            (out, n)
        }
    })
}

#[derive(Debug, Clone, Copy)]
struct OutTrack {
    id: TrackId,
    last_ms: i64,
    /// A frame of it was timed (`last_ms` is its).
    timed: bool,
}

/// The announced tracks and the frame timing of one connection.
#[derive(Debug, Default)]
pub struct MediaOut {
    video: Option<(OutTrack, Track)>,
    audio: Option<(OutTrack, Track)>,
    clock: MediaClock,
}

impl MediaOut {
    /// Announces the tracks on `stream_id`: @setDataFrame onMetaData, then
    /// the sequence headers. Call again when a track's configuration
    /// changes.
    pub fn announce(
        &mut self,
        conn: &mut RtmpConnection,
        scratch: &mut Vec<u8>,
        stream_id: MessageStreamId,
        tracks: &[Track],
    ) -> Result<(), RtmpError> {
        let video = tracks
            .iter()
            .find(|t| matches!(t.codec, Codec::H264 | Codec::H265));
        let audio = tracks
            .iter()
            .find(|t| matches!(t.codec, Codec::Aac | Codec::Mp3));
        let keep = |old: &Option<(OutTrack, Track)>, t: &Track| OutTrack {
            id: t.id,
            last_ms: old.as_ref().map_or(0, |(o, _)| o.last_ms),
            timed: old.as_ref().is_some_and(|(o, _)| o.timed),
        };
        self.video = video.map(|t| (keep(&self.video, t), t.clone()));
        self.audio = audio.map(|t| (keep(&self.audio, t), t.clone()));

        scratch.clear();
        amf0::encode_all(
            &[
                "@setDataFrame".into(),
                "onMetaData".into(),
                Amf0Value::EcmaArray(metadata(video, audio)),
            ],
            scratch,
        );
        conn.write_message(
            csid::STREAM,
            0,
            message_type::DATA_AMF0,
            stream_id,
            &[scratch],
        );
        conn.encoder.forget(csid::VIDEO);
        conn.encoder.forget(csid::AUDIO);
        if let Some((o, t)) = &self.video {
            scratch.clear();
            flv::write_video_sequence_header(t, scratch)?;
            let ts = o.last_ms as u32;
            conn.write_message(csid::VIDEO, ts, message_type::VIDEO, stream_id, &[scratch]);
        }
        if let Some((o, t)) = &self.audio {
            scratch.clear();
            if flv::write_audio_sequence_header(t, scratch)? {
                let ts = o.last_ms as u32;
                conn.write_message(csid::AUDIO, ts, message_type::AUDIO, stream_id, &[scratch]);
            }
        }
        Ok(())
    }

    /// Times a frame: its message's chunk stream, type and timestamp.
    /// `None` for frames of tracks not announced, and for frames to drop:
    /// before the session's first frame, or older than their track's last.
    pub fn time_frame(
        &mut self,
        frame: &Frame,
        stream_id: MessageStreamId,
    ) -> Option<FrameMessage> {
        let (out, chunk_stream, type_id) = match (&mut self.video, &mut self.audio) {
            (Some((o, _)), _) if o.id == frame.track => (o, csid::VIDEO, message_type::VIDEO),
            (_, Some((o, _))) if o.id == frame.track => (o, csid::AUDIO, message_type::AUDIO),
            _ => return None,
        };
        let base = *self.clock.base_dts.get_or_insert(frame.dts);
        let raw = frame.dts.saturating_sub(base).div_euclid(TICKS_PER_MS);
        if raw < 0 {
            return None;
        }
        let dts_ms = if !out.timed {
            raw.max(out.last_ms)
        } else if raw < out.last_ms {
            return None;
        } else if raw == out.last_ms {
            // Two frames within a millisecond: FLV times cannot repeat.
            raw + 1
        } else {
            raw
        };
        out.last_ms = dts_ms;
        out.timed = true;
        Some(FrameMessage {
            chunk_stream,
            type_id,
            timestamp: dts_ms as u32, // wraps after 49 days, as RTMP does
            stream_id,
        })
    }

    /// Prefetches what [`time_frame`](Self::time_frame) reads.
    /// (Addresses only: reading a field here would be the miss it avoids.)
    pub fn prefetch(&self) {
        crate::sys::prefetch(&self.clock);
        crate::sys::prefetch(&self.video);
        crate::sys::prefetch(&self.audio);
    }

    pub fn clock(&self) -> MediaClock {
        MediaClock {
            base_dts: self.clock.base_dts,
            video_ms: self.video.as_ref().map_or(0, |(o, _)| o.last_ms),
            audio_ms: self.audio.as_ref().map_or(0, |(o, _)| o.last_ms),
        }
    }

    pub fn set_clock(&mut self, clock: MediaClock) {
        self.clock.base_dts = clock.base_dts;
        // A clock carried over has timed frames: the next must be later.
        let timed = clock.base_dts.is_some();
        if let Some((o, _)) = self.video.as_mut() {
            o.last_ms = clock.video_ms;
            o.timed = timed;
        }
        if let Some((o, _)) = self.audio.as_mut() {
            o.last_ms = clock.audio_ms;
            o.timed = timed;
        }
    }

    /// Is a video track announced?
    pub fn has_video(&self) -> bool {
        self.video.is_some()
    }

    /// Writes one frame of an announced track (others are ignored).
    pub fn send_frame(
        &mut self,
        conn: &mut RtmpConnection,
        frame: &Frame,
        stream_id: MessageStreamId,
    ) -> Result<(), RtmpError> {
        let Some(msg) = self.time_frame(frame, stream_id) else {
            return Ok(());
        };
        let track = match msg.type_id {
            message_type::VIDEO => self.video.as_ref(),
            _ => self.audio.as_ref(),
        }
        .map(|(_, t)| t)
        .ok_or(RtmpError::Closed)?;
        let (h, n) = tag_header(track, frame)?;
        write_frame_message(conn, &msg, &[&h[..n], &frame.data]);
        Ok(())
    }
}

/// Writes a timed frame message through the connection's own chunk
/// encoder.
pub fn write_frame_message(conn: &mut RtmpConnection, msg: &FrameMessage, parts: &[&[u8]]) {
    // Shared bodies are sent with type 0 headers outside the encoder: its
    // memory of the media chunk streams is stale.
    conn.encoder.forget(msg.chunk_stream);
    conn.write_message(
        msg.chunk_stream,
        msg.timestamp,
        msg.type_id,
        msg.stream_id,
        parts,
    );
}

/// The onMetaData properties for the announced tracks.
fn metadata(video: Option<&Track>, audio: Option<&Track>) -> Vec<(String, Amf0Value)> {
    let mut m: Vec<(String, Amf0Value)> = vec![("duration".into(), 0.0.into())];
    if let Some(v) = video {
        let p = v.video.unwrap_or_default();
        if p.width > 0 && p.height > 0 {
            m.push(("width".into(), f64::from(p.width).into()));
            m.push(("height".into(), f64::from(p.height).into()));
        }
        if p.framerate > 0.0 {
            m.push(("framerate".into(), p.framerate.into()));
        }
        let id = match v.codec {
            Codec::H265 => f64::from(u32::from_be_bytes(*b"hvc1")),
            _ => 7.0,
        };
        m.push(("videocodecid".into(), id.into()));
        if v.bitrate > 0 {
            m.push((
                "videodatarate".into(),
                (f64::from(v.bitrate) / 1000.0).into(),
            ));
        }
    }
    if let Some(a) = audio {
        let id = if a.codec == Codec::Mp3 { 2.0 } else { 10.0 };
        m.push(("audiocodecid".into(), id.into()));
        if let Some(p) = a.audio {
            m.push(("audiosamplerate".into(), f64::from(p.sample_rate).into()));
            m.push(("audiosamplesize".into(), 16.0.into()));
            m.push(("stereo".into(), (p.channels > 1).into()));
            m.push(("audiochannels".into(), f64::from(p.channels).into()));
        }
        if a.bitrate > 0 {
            m.push((
                "audiodatarate".into(),
                (f64::from(a.bitrate) / 1000.0).into(),
            ));
        }
    }
    m.push(("encoder".into(), "kiln".into()));
    m
}
