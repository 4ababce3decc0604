//! The per-stream fan-out: a stream's frames become RTP payloads once
//! (video through [`super::packetize`], AAC through the Opus transcoder off
//! the loop) and are handed to every connected session of the stream,
//! which writes them into its stack a chunk at a time. A viewer joining
//! gets the stream's GOP first.

use super::{audio, bframes, packetize, EndReason, Session, WebRtc, CHUNK, MAX_QUEUED_FRAMES};
use crate::media::{Codec, CodecConfig, Frame, MediaKind as Kind, Ticks, Track, TrackId};
use crate::state::streams::{IngestOutput, LiveStream, StreamId, Streams};
use std::sync::Arc;
use std::time::Instant;
use str0m::rtp::RtpWrite;

/// What is kept per stream with at least one WebRTC viewer.
#[derive(Default)]
pub(super) struct Feed {
    pub(super) sessions: Vec<usize>,
    /// Of them, those that completed ICE and DTLS: only then is the
    /// stream's AAC transcoded for them.
    pub(super) connected: usize,
    /// Bumped when the tracks change: the transcoder starts afresh.
    audio_generation: u32,
    /// The stream's GOP as RTP payloads, for viewers joining: made when
    /// the first joins, grown by later ones, made afresh at a new GOP.
    gop: Vec<Packets>,
    /// How many of the GOP's frames `gop` has looked at (B-frames are
    /// looked at and left out), and the GOP's first frame's time.
    gop_seen: usize,
    gop_start: Option<Ticks>,
    gop_gate: Option<bframes::BFrameGate>,
    /// H.264 B-frames left out of the live frames ([`bframes`]).
    gate: Option<bframes::BFrameGate>,
    /// The same for the stream's other video tracks (renditions) that a
    /// session is on: made at the keyframe a session switches at, dropped
    /// when no session is on the track.
    layer_gates: Vec<(TrackId, bframes::BFrameGate)>,
}

/// One video frame's RTP payloads (the marker goes on the last).
struct Packets {
    pts: Ticks,
    payloads: Payloads,
}

/// A frame's RTP payloads, shared by every session given them.
type Payloads = Arc<[Arc<[u8]>]>;

/// A frame on its way into a session: its RTP time, and how many of its
/// payloads were written.
pub(super) struct Outgoing {
    kind: Kind,
    time: u32,
    payloads: Payloads,
    written: usize,
}

/// Work for the AAC to Opus transcoder, which runs off the loop (the
/// loop's worker thread keeps one [`audio::AacToOpus`] per stream).
#[derive(Debug, Clone)]
pub enum AudioWork {
    /// Transcode this frame of `stream` (made with `asc`; a new
    /// `generation` starts a new transcoder).
    Frame {
        stream: StreamId,
        generation: u32,
        asc: bytes::Bytes,
        frame: Frame,
    },
    /// No viewer is left: drop the stream's transcoder.
    Forget(StreamId),
}

/// A rendition's frames in the stream's cached GOP, from its first
/// keyframe, as payloads (its B-frames left out as the first track's
/// are); `None` when the cache holds no keyframe of it.
fn rendition_gop(track: &Track, gop: &[Frame]) -> Option<Vec<Packets>> {
    let mut frames = gop.iter().filter(|f| f.track == track.id);
    let key = frames.position(|f| f.keyframe)?;
    let mut gate = (track.codec == Codec::H264).then(|| bframes::BFrameGate::new(&track.config));
    let out = gop
        .iter()
        .filter(|f| f.track == track.id)
        .skip(key)
        .filter(|f| gate.as_mut().is_none_or(|g| g.admit(f)))
        .map(|f| Packets {
            pts: f.pts,
            payloads: video_payloads(f, track).unwrap_or_else(|| Arc::new([])),
        })
        .collect();
    Some(out)
}

/// A GOP's packets to a session's queue, their times squeezed to end at
/// the last frame's (one tick apart), so the browser decodes up to now
/// and shows it at once.
fn queue_gop(outgoing: &mut std::collections::VecDeque<Outgoing>, gop: &[Packets]) {
    let Some(last) = gop.last().map(|p| p.pts) else {
        return;
    };
    let n = gop.len();
    for (i, p) in gop.iter().enumerate() {
        outgoing.push_back(Outgoing {
            kind: Kind::Video,
            time: (last - (n - 1 - i) as Ticks).max(0) as u32,
            payloads: p.payloads.clone(),
            written: 0,
        });
    }
}

/// A viewer moved down to `track` (its picture stalls on a path too
/// narrow): it switches now, on that rendition's GOP from the stream's
/// cache (squeezed, as a pinned viewer starts), and what of the old one is
/// still queued here and not begun is dropped; so the picture comes back
/// at once instead of at the rendition's next keyframe. `false` when the
/// cache has no keyframe of it (the caller then waits for one).
pub(super) fn switch_down_now(
    outgoing: &mut std::collections::VecDeque<Outgoing>,
    track: &Track,
    gop: &[Frame],
) -> bool {
    let Some(packets) = rendition_gop(track, gop) else {
        return false;
    };
    outgoing.retain(|o| o.kind != Kind::Video || o.written > 0);
    queue_gop(outgoing, &packets);
    true
}

impl WebRtc {
    /// A session just connected: the stream's GOP from its keyframe, with
    /// timestamps squeezed to end at the latest frame's, so the browser
    /// decodes up to now and shows it at once. The GOP's payloads are the
    /// feed's, made once for every viewer joining within it.
    pub(super) fn start_session(&mut self, idx: usize, streams: &mut Streams) {
        let Some(s) = self.sessions.get_mut(idx) else {
            return;
        };
        s.started = true;
        if s.video.is_none() {
            return;
        }
        let Some(stream) = streams.get(s.stream) else {
            return;
        };
        let Some(feed) = self.feeds.get_mut(&s.stream) else {
            return;
        };
        let Some(track) = stream.tracks().iter().find(|t| t.kind() == Kind::Video) else {
            return;
        };
        if let Some(layer) = s.layer {
            // A viewer that chose a rendition before it played (WHEP's
            // `rendition=`): that rendition's GOP from its keyframe, made
            // for it alone; without one, it starts on the first and
            // switches at the rendition's next keyframe.
            let on = stream.tracks().iter().find(|t| t.id == layer);
            let gop = on.and_then(|t| rendition_gop(t, stream.gop()));
            match gop {
                Some(gop) => return queue_gop(&mut s.outgoing, &gop),
                None => s.want_layer = s.layer.take(),
            }
        }
        let gop: Vec<&Frame> = stream
            .gop()
            .iter()
            .filter(|f| f.track == track.id)
            .collect();
        let start = gop.first().map(|f| f.pts);
        if feed.gop_seen > gop.len() || feed.gop_start != start {
            feed.gop.clear();
            feed.gop_seen = 0;
            feed.gop_start = start;
            feed.gop_gate = None;
        }
        for f in &gop[feed.gop_seen..] {
            if track.codec == Codec::H264 {
                let gate = feed
                    .gop_gate
                    .get_or_insert_with(|| bframes::BFrameGate::new(&track.config));
                if !gate.admit(f) {
                    continue;
                }
            }
            let payloads = video_payloads(f, track).unwrap_or_else(|| Arc::new([]));
            feed.gop.push(Packets {
                pts: f.pts,
                payloads,
            });
        }
        feed.gop_seen = gop.len();
        queue_gop(&mut s.outgoing, &feed.gop);
    }

    /// A stream's output: its frames to every connected session, its end
    /// to all of them.
    pub fn on_ingest(&mut self, out: &IngestOutput, streams: &mut Streams, now: Instant) {
        if let Some(id) = out.ended {
            self.warned_bframes.remove(&id);
            if let Some(feed) = self.feeds.remove(&id) {
                for idx in feed.sessions {
                    self.end(idx, EndReason::StreamEnded);
                }
                self.audio_work.push(AudioWork::Forget(id));
            }
            return;
        }
        let Some(id) = out.stream else { return };
        if out.frames.is_empty() || !self.feeds.contains_key(&id) {
            return;
        }
        let Some(stream) = streams.get(id) else {
            return;
        };
        let tracks = stream.tracks();
        if out.tracks_changed {
            if let Some(f) = self.feeds.get_mut(&id) {
                f.audio_generation = f.audio_generation.wrapping_add(1);
                f.gate = None;
                f.layer_gates.clear();
                // A rendition that is gone: its viewers go back to the
                // first (at its next keyframe: they have no GOP of it).
                for &idx in &f.sessions {
                    let Some(s) = self.sessions.get_mut(idx) else {
                        continue;
                    };
                    let gone = |t: Option<TrackId>| {
                        t.is_some_and(|t| {
                            !tracks.iter().any(|x| x.id == t && x.kind() == Kind::Video)
                        })
                    };
                    if gone(s.layer) || gone(s.want_layer) {
                        s.want_layer = tracks
                            .iter()
                            .find(|t| t.kind() == Kind::Video)
                            .map(|t| t.id);
                    }
                }
            }
        }
        // Viewers get the stream's first video and first audio track (a
        // stream with several, an encoder's renditions or languages, lists
        // its largest picture and its default audio first).
        let first = |kind: Kind| tracks.iter().find(|t| t.kind() == kind).map(|t| t.id);
        let (video, audio) = (first(Kind::Video), first(Kind::Audio));
        for frame in &out.frames {
            let Some(track) = tracks.iter().find(|t| t.id == frame.track) else {
                continue;
            };
            if track.kind() == Kind::Video && Some(track.id) != video {
                // Another rendition: to the sessions that chose it.
                self.give_rendition(id, track, frame, video);
                continue;
            }
            if Some(frame.track) != video && Some(frame.track) != audio {
                continue;
            }
            if track.codec == Codec::H264 && !self.admit_h264(id, stream, track, frame) {
                continue;
            }
            match track.codec {
                Codec::H264 | Codec::Vp8 => {
                    self.switch_at(id, track.id, frame, video);
                    let Some(payloads) = video_payloads(frame, track) else {
                        continue;
                    };
                    self.give_video(id, track.id, video, frame.pts.max(0) as u32, &payloads);
                }
                Codec::Opus => {
                    let data: Payloads = Arc::new([Arc::from(&frame.data[..])]);
                    self.give_all(id, Kind::Audio, opus_time(frame.pts), &data);
                }
                Codec::Aac => self.transcode(id, track, frame),
                _ => {}
            }
        }
        let sessions = self
            .feeds
            .get(&id)
            .map(|f| f.sessions.clone())
            .unwrap_or_default();
        for idx in sessions {
            self.poll_session(idx, Some(streams), now);
        }
    }

    /// Does a WebRTC viewer get this H.264 frame? B-frames are left out
    /// ([`bframes`]); the first time a stream has them, one WARN says what
    /// its viewers get and which encoder setting changes it.
    pub(super) fn admit_h264(
        &mut self,
        id: StreamId,
        stream: &LiveStream,
        track: &crate::media::Track,
        frame: &Frame,
    ) -> bool {
        let Some(feed) = self.feeds.get_mut(&id) else {
            return false;
        };
        let gate = feed.gate.get_or_insert_with(|| {
            // Started mid-GOP: the GOP so far tells it which pictures are
            // references (what the viewers' decoders hold).
            let mut g = bframes::BFrameGate::new(&track.config);
            for f in stream.gop() {
                if f.track == track.id && f.dts < frame.dts {
                    g.admit(f);
                }
            }
            g.counts = bframes::GateCounts::default();
            g
        });
        let admitted = gate.admit(frame);
        let counts = gate.counts;
        if counts.b_frames == 0 {
            return admitted;
        }
        let warned = self.warned_bframes.entry(id).or_default();
        let name = || format!("{}/{}/{}", stream.vhost, stream.app, stream.name);
        if !warned.0 {
            warned.0 = true;
            crate::warn!(
                "stream [{}] has B-frames: WebRTC viewers get its I- and P-frames only (a lower frame rate; LL-HLS, RTMP, SRT and recordings keep every frame). For every frame over WebRTC set the encoder's B-frames to 0 (OBS: x264 options bframes=0; ffmpeg: -bf 0)",
                name()
            );
        }
        if counts.unsafe_frames > 0 && !warned.1 {
            warned.1 = true;
            crate::warn!(
                "stream [{}]: its P-frames may predict from B-frames (several reference frames), so WebRTC viewers get its keyframes only. Set the encoder's B-frames to 0, or x264's preset to veryfast (one reference frame)",
                name()
            );
        }
        admitted
    }

    /// An AAC frame for the transcoder (the loop's worker thread).
    pub(super) fn transcode(&mut self, id: StreamId, track: &crate::media::Track, frame: &Frame) {
        // Only for viewers that completed ICE and DTLS: an offer that
        // never connects starts nothing.
        let Some(feed) = self.feeds.get_mut(&id).filter(|f| f.connected > 0) else {
            return;
        };
        let CodecConfig::Aac { asc } = &track.config else {
            return;
        };
        self.audio_work.push(AudioWork::Frame {
            stream: id,
            generation: feed.audio_generation,
            asc: asc.clone(),
            frame: frame.clone(),
        });
    }

    /// Work for the transcoder since the last call.
    pub fn take_audio_work(&mut self) -> Vec<AudioWork> {
        std::mem::take(&mut self.audio_work)
    }

    /// Opus packets the transcoder made of `stream`'s AAC: to every
    /// connected viewer of it.
    pub fn on_opus(
        &mut self,
        stream: StreamId,
        packets: &[audio::OpusPacket],
        streams: &mut Streams,
        now: Instant,
    ) {
        if !self.feeds.contains_key(&stream) {
            return;
        }
        for p in packets {
            let data: Payloads = Arc::new([Arc::from(&p.data[..])]);
            self.give_all(stream, Kind::Audio, opus_time(p.pts), &data);
        }
        let sessions = self
            .feeds
            .get(&stream)
            .map(|f| f.sessions.clone())
            .unwrap_or_default();
        for idx in sessions {
            self.poll_session(idx, Some(streams), now);
        }
    }

    /// Sessions of the stream waiting to switch to `track` switch at its
    /// keyframe `frame` (from here on they get its frames, not their old
    /// rendition's).
    fn switch_at(&mut self, id: StreamId, track: TrackId, frame: &Frame, first: Option<TrackId>) {
        if !frame.keyframe {
            return;
        }
        let Some(feed) = self.feeds.get(&id) else {
            return;
        };
        for &idx in &feed.sessions {
            if let Some(s) = self
                .sessions
                .get_mut(idx)
                .filter(|s| s.want_layer == Some(track))
            {
                s.switch_layer(track, first, &mut self.switched);
            }
        }
    }

    /// Is any session of the stream on `track` (the stream's first video
    /// track when a session chose none)?
    fn anyone_on(&self, id: StreamId, track: TrackId, first: Option<TrackId>) -> bool {
        self.feeds.get(&id).is_some_and(|f| {
            f.sessions.iter().any(|&i| {
                self.sessions
                    .get(i)
                    .is_some_and(|s| s.layer.or(first) == Some(track))
            })
        })
    }

    /// A frame of a video track other than the stream's first (a
    /// rendition) to the sessions that chose it: made into payloads only
    /// when one did; its B-frames left out as the first track's are.
    fn give_rendition(
        &mut self,
        id: StreamId,
        track: &Track,
        frame: &Frame,
        first: Option<TrackId>,
    ) {
        self.switch_at(id, track.id, frame, first);
        let on = self.anyone_on(id, track.id, first);
        let Some(feed) = self.feeds.get_mut(&id) else {
            return;
        };
        if !on {
            feed.layer_gates.retain(|(t, _)| *t != track.id);
            return;
        }
        if track.codec == Codec::H264 {
            let at = feed.layer_gates.iter().position(|(t, _)| *t == track.id);
            let gate = match at {
                Some(i) => &mut feed.layer_gates[i].1,
                // Made at a keyframe: one a session switches at, or the
                // first after the tracks changed.
                None if frame.keyframe => {
                    feed.layer_gates
                        .push((track.id, bframes::BFrameGate::new(&track.config)));
                    let last = feed.layer_gates.len() - 1;
                    &mut feed.layer_gates[last].1
                }
                None => return,
            };
            if !gate.admit(frame) {
                return;
            }
        }
        if let Some(payloads) = video_payloads(frame, track) {
            self.give_video(id, track.id, first, frame.pts.max(0) as u32, &payloads);
        }
    }

    /// A video frame's payloads to the started sessions on `track`.
    fn give_video(
        &mut self,
        id: StreamId,
        track: TrackId,
        first: Option<TrackId>,
        time: u32,
        payloads: &Payloads,
    ) {
        self.give_where(id, Kind::Video, time, payloads, |s| {
            s.layer.or(first) == Some(track)
        });
    }

    /// One frame's payloads to every started session of the stream (its
    /// poll writes them).
    pub(super) fn give_all(&mut self, id: StreamId, kind: Kind, time: u32, payloads: &Payloads) {
        self.give_where(id, kind, time, payloads, |_| true);
    }

    /// One frame's payloads to the started sessions of the stream that
    /// `takes` picks.
    fn give_where(
        &mut self,
        id: StreamId,
        kind: Kind,
        time: u32,
        payloads: &Payloads,
        takes: impl Fn(&Session) -> bool,
    ) {
        let Some(feed) = self.feeds.get(&id) else {
            return;
        };
        for &idx in &feed.sessions {
            let Some(s) = self.sessions.get_mut(idx) else {
                continue;
            };
            let target = if kind == Kind::Video {
                s.video
            } else {
                s.audio
            };
            if s.connected && s.started && target.is_some() && takes(s) {
                if s.outgoing.len() >= MAX_QUEUED_FRAMES {
                    // A viewer that cannot keep up loses its oldest frames.
                    if let Some(o) = s.outgoing.pop_front() {
                        self.dropped += (o.payloads.len() - o.written) as u64;
                    }
                }
                s.outgoing.push_back(Outgoing {
                    kind,
                    time,
                    payloads: payloads.clone(),
                    written: 0,
                });
            }
        }
    }
}

/// 48 kHz RTP time of a 90 kHz timestamp (wrapping, as RTP's).
pub(super) fn opus_time(pts: Ticks) -> u32 {
    ((pts.max(0) as u64) * 8 / 15) as u32
}

/// The next [`CHUNK`] packets (or the rest of a frame) of what the
/// session was given into its send queue, numbered from its sequence;
/// video is kept for NACKs (the history holds the shared payloads) and
/// marked on a frame's last packet.
pub(super) fn write_chunk(s: &mut Session, now: Instant) {
    let mut room = CHUNK;
    while room > 0 {
        let Some(o) = s.outgoing.front_mut() else {
            return;
        };
        let video = o.kind == Kind::Video;
        let (target, seq) = if video {
            (s.video, &mut s.video_seq)
        } else {
            (s.audio, &mut s.audio_seq)
        };
        let end = (o.written + room).min(o.payloads.len());
        if let Some((mid, pt)) = target {
            let mut api = s.rtc.direct_api();
            if let Some(tx) = api.stream_tx_by_mid(mid, None) {
                for (i, p) in o.payloads[o.written..end].iter().enumerate() {
                    let last = o.written + i + 1 == o.payloads.len();
                    let write = RtpWrite::new(pt, (*seq).into(), o.time, now, p.clone())
                        .marker(video && last)
                        .nackable(video);
                    tx.write_rtp(write);
                    *seq += 1;
                }
            }
        }
        room = room.saturating_sub((end - o.written).max(1));
        o.written = end;
        if o.written >= o.payloads.len() {
            s.outgoing.pop_front();
        }
    }
}

/// A video frame's RTP payloads: H.264 with the track's SPS/PPS before
/// a keyframe that does not carry them, VP8 as it is.
pub(super) fn video_payloads(frame: &Frame, track: &crate::media::Track) -> Option<Payloads> {
    let made = match (&track.codec, &track.config) {
        (Codec::H264, CodecConfig::H264 { sps, pps }) => {
            let params = frame.keyframe.then_some((&sps[..], &pps[..]));
            packetize::h264(&frame.data, params, packetize::MAX_PAYLOAD)
        }
        (Codec::H264, _) => packetize::h264(&frame.data, None, packetize::MAX_PAYLOAD),
        (Codec::Vp8, _) => packetize::vp8(&frame.data, packetize::MAX_PAYLOAD),
        _ => return None,
    };
    match made {
        Ok(p) => Some(p.into()),
        Err(e) => {
            crate::debug!("webrtc: frame of track {} not sent: {e}", track.id);
            None
        }
    }
}
