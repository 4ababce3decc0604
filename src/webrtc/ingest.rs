//! A WebRTC publisher's media as kiln tracks and frames (WHIP and OME's
//! `direction=send`). str0m orders the RTP packets (its reordering buffer,
//! bounded), asks for what is lost (NACK) and hands over whole frames; this
//! core turns them into the stream's canonical form and keeps its
//! timeline:
//!
//! - H.264 arrives in Annex B: it becomes length-prefixed units (access
//!   unit delimiters dropped), the SPS/PPS of each keyframe make the video
//!   track (a new resolution makes a new track, as the TS demuxer does), and
//!   nothing is passed on until the first keyframe, nor after a gap
//!   (`contiguous` false) until the next one: the caller sends a PLI
//!   ([`IngestTracks::keyframes_wanted`]). A browser sends keyframes only
//!   when asked, so one is also asked for every [`KEYFRAME_EVERY`]: HLS
//!   segments and recordings are cut at keyframes, and a new RTMP or SRT
//!   player starts at the last one.
//! - VP8 (a publisher that offers no H.264) passes as it is; its keyframes
//!   (RFC 6386 section 9.1) give the track its size. Only WebRTC viewers
//!   get it: no other output of kiln carries VP8.
//! - Simulcast (a browser's two or three layers of one camera, each its
//!   RID): each layer is a video track of its own, with its own clock and
//!   keyframes; the tracks list the largest picture first (what players
//!   that take one video track play). Keyframes asked for on a timer go
//!   to every layer at once, so the layers' segments line up.
//! - Opus packets pass as they are (48 kHz, two channels as the SDP has).
//! - Timestamps: each track's RTP clock, 64 bits as str0m extends it,
//!   placed on one 90 kHz timeline by the arrival of its first frame, so
//!   audio and video start in step; after that each follows its own clock,
//!   so the sender's pacing is kept exactly. Decode time is presentation
//!   time (browsers' H.264 has no B-frames).
//!
//! The tracks are announced once the video's parameter sets are known,
//! with the Opus track in them from the start when audio was negotiated
//! (Opus needs no codec configuration): a track added later would make
//! the outputs start afresh at the next keyframe. Audio waits for the
//! video track (when video was negotiated) for at most [`AUDIO_HOLD`], so
//! outputs do not start audio-only and restart.

use crate::codec::h264;
use crate::media::{AudioParams, Codec, CodecConfig, Frame, Ticks, Track, TrackId, VideoParams};
use bytes::Bytes;
use std::time::{Duration, Instant};

pub const VIDEO_TRACK: TrackId = 1;
pub const AUDIO_TRACK: TrackId = 2;
/// Longest audio is dropped while video is expected and not yet known.
pub const AUDIO_HOLD: Duration = Duration::from_secs(2);
/// A keyframe is asked for at most this often while one is awaited.
pub const PLI_EVERY: Duration = Duration::from_millis(500);
/// The longest a stream goes without a keyframe before one is asked for.
pub const KEYFRAME_EVERY: Duration = Duration::from_secs(2);
/// The largest frame taken (a 4K keyframe is a few MB at most).
pub const MAX_FRAME: usize = 8 << 20;

/// What a publisher's frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaCodec {
    H264,
    /// Taken only from a publisher that offers no H.264; passed as is.
    Vp8,
    Opus,
}

/// One frame str0m assembled.
#[derive(Debug, Clone, Copy)]
pub struct Media<'a> {
    pub codec: MediaCodec,
    /// RTP time (str0m's extended counter) and its clock rate.
    pub rtp_time: u64,
    pub rate: u32,
    /// When its first packet arrived.
    pub arrival: Instant,
    /// No packet is missing since the frame before.
    pub contiguous: bool,
    /// Its video layer: 0, or a simulcast layer's place (audio: 0).
    pub layer: usize,
    pub data: &'a [u8],
}

/// What the stream gets.
#[derive(Debug, Clone, PartialEq)]
pub enum IngestEvent {
    /// The stream's tracks (first, and after each change).
    Tracks(Vec<Track>),
    Frame(Frame),
}

/// One track's clock: its first RTP time and where that sits on the
/// stream's 90 kHz timeline.
#[derive(Debug, Clone, Copy)]
struct Clock {
    rtp0: u64,
    rate: u32,
    pts0: Ticks,
}

impl Clock {
    fn pts(&self, rtp: u64) -> Ticks {
        // RTP time before the first frame (a reordered straggler) clamps.
        let delta = rtp.saturating_sub(self.rtp0);
        let rate = u64::from(self.rate.max(1));
        let ticks = (u128::from(delta) * 90_000 / u128::from(rate)).min(i64::MAX as u128 / 2);
        self.pts0.saturating_add(ticks as i64)
    }
}

/// One video layer of the publisher: a simulcast layer (RID), or its one
/// video. Each is a video track of the stream with its own RTP clock and
/// its own keyframes.
#[derive(Debug, Default)]
struct Layer {
    /// Its track, once its parameter sets (VP8: its size) are known.
    track: Option<Track>,
    /// Its track id, given when the layer is first seen.
    id: TrackId,
    clock: Option<Clock>,
    /// Its video is dropped until a keyframe (at the start, after a gap).
    need_keyframe: bool,
    last_request: Option<Instant>,
    last_keyframe: Option<Instant>,
    /// A viewer asked for a keyframe (its PLI or FIR, passed on).
    asked: bool,
}

/// The most video layers a publisher's frames make (browsers send three
/// simulcast layers at most); frames of further layers are dropped.
pub const MAX_LAYERS: usize = 4;

#[derive(Debug, Default)]
pub struct IngestTracks {
    expect_video: bool,
    /// By layer index (the caller's: a simulcast RID's place).
    layers: Vec<Layer>,
    audio: Option<Track>,
    /// The tracks last announced.
    announced: Vec<Track>,
    /// The timeline's zero: the first frame's arrival (kept or not).
    origin: Option<Instant>,
    audio_clock: Option<Clock>,
    first_audio: Option<Instant>,
    /// Frames dropped: before a keyframe, oversized, or undecodable.
    pub dropped: u64,
}

impl IngestTracks {
    /// What the session negotiated: video (audio waits for it), audio.
    pub fn new(expect_video: bool, expect_audio: bool) -> IngestTracks {
        IngestTracks {
            expect_video,
            audio: expect_audio.then(|| Track {
                id: AUDIO_TRACK,
                codec: Codec::Opus,
                config: CodecConfig::None,
                video: None,
                audio: Some(AudioParams {
                    sample_rate: 48_000,
                    channels: 2,
                }),
                bitrate: 0,
                label: Default::default(),
            }),
            ..IngestTracks::default()
        }
    }

    /// The tracks: video layers largest picture first (the track players
    /// that take one video track play), then audio.
    pub fn tracks(&self) -> Vec<Track> {
        let mut video: Vec<&Track> = self
            .layers
            .iter()
            .filter_map(|l| l.track.as_ref())
            .collect();
        video.sort_unstable_by_key(|t| {
            let p = t.video.unwrap_or_default();
            (
                std::cmp::Reverse(u64::from(p.width) * u64::from(p.height)),
                t.id,
            )
        });
        video.into_iter().chain(&self.audio).cloned().collect()
    }

    /// The tracks, if they changed since last said.
    fn announce(&mut self, out: &mut Vec<IngestEvent>) {
        let tracks = self.tracks();
        if tracks != self.announced {
            self.announced = tracks.clone();
            out.push(IngestEvent::Tracks(tracks));
        }
    }

    /// The layers to ask a keyframe of now, as a bit mask (bit i: layer
    /// i): a layer that waits for one (at the start, after a gap); and,
    /// when any layer's last keyframe is [`KEYFRAME_EVERY`] old or a
    /// viewer asked, every layer at once, so that the layers' keyframes,
    /// and so their segments, line up. A layer is asked at most every
    /// [`PLI_EVERY`].
    pub fn keyframes_wanted(&mut self, now: Instant) -> u32 {
        let all = self.layers.iter().any(|l| {
            l.asked
                || l.last_keyframe
                    .is_some_and(|t| now.saturating_duration_since(t) >= KEYFRAME_EVERY)
        });
        let mut mask = 0;
        for (i, l) in self.layers.iter_mut().enumerate() {
            if !(all || l.need_keyframe) || l.last_request.is_some_and(|t| now < t + PLI_EVERY) {
                continue;
            }
            l.last_request = Some(now);
            l.asked = false;
            mask |= 1 << i;
        }
        mask
    }

    /// A viewer of the stream asked for a keyframe: ask the publisher, on
    /// every layer (no more often than [`PLI_EVERY`]).
    pub fn keyframe_asked(&mut self) {
        for l in &mut self.layers {
            l.asked = true;
        }
    }

    fn timeline(&mut self, arrival: Instant) -> Ticks {
        let origin = *self.origin.get_or_insert(arrival);
        let since = arrival.saturating_duration_since(origin);
        (since.as_micros() * 9 / 100) as Ticks
    }

    /// One frame in; what the stream gets out, appended to `out`.
    pub fn on_media(&mut self, m: Media<'_>, out: &mut Vec<IngestEvent>) {
        if m.data.is_empty() || m.data.len() > MAX_FRAME {
            self.dropped += 1;
            return;
        }
        self.origin.get_or_insert(m.arrival);
        match m.codec {
            MediaCodec::H264 | MediaCodec::Vp8 => {
                if self.layer(m.layer).is_none() {
                    self.dropped += 1;
                    return;
                }
                match m.codec {
                    MediaCodec::H264 => self.on_video(m, out),
                    _ => self.on_vp8(m, out),
                }
            }
            MediaCodec::Opus => self.on_audio(m, out),
        }
    }

    /// Layer `index`, made when first seen (within [`MAX_LAYERS`]): the
    /// first is [`VIDEO_TRACK`], the others the ids after the audio's.
    fn layer(&mut self, index: usize) -> Option<&mut Layer> {
        if index >= MAX_LAYERS {
            return None;
        }
        while self.layers.len() <= index {
            let n = self.layers.len() as TrackId;
            self.layers.push(Layer {
                id: if n == 0 { VIDEO_TRACK } else { AUDIO_TRACK + n },
                need_keyframe: true,
                ..Layer::default()
            });
        }
        self.layers.get_mut(index)
    }

    /// A new track for a layer (new parameter sets or size), announced.
    fn set_layer_track(
        &mut self,
        index: usize,
        codec: Codec,
        config: CodecConfig,
        video: VideoParams,
        out: &mut Vec<IngestEvent>,
    ) {
        let Some(l) = self.layers.get_mut(index) else {
            return;
        };
        l.track = Some(Track {
            id: l.id,
            codec,
            config,
            video: Some(video),
            audio: None,
            bitrate: 0,
            label: Default::default(),
        });
        self.announce(out);
    }

    fn on_video(&mut self, m: Media<'_>, out: &mut Vec<IngestEvent>) {
        let Some(l) = self.layers.get_mut(m.layer) else {
            return;
        };
        // A gap, or a switch from VP8: the next keyframe (re)starts it.
        if !m.contiguous || l.track.as_ref().is_some_and(|t| t.codec != Codec::H264) {
            l.need_keyframe = true;
        }
        let keyframe = h264::is_keyframe_annexb(m.data);
        if keyframe {
            if let Some(config) = h264::config_from_annexb(m.data) {
                if l.track.as_ref().map(|t| &t.config) != Some(&config) {
                    let video = h264::video_params(&config).unwrap_or_default();
                    self.set_layer_track(m.layer, Codec::H264, config, video, out);
                }
            }
        }
        if !self.pass_video(m.layer, keyframe, m.arrival) {
            return;
        }
        let mut data = Vec::with_capacity(m.data.len() + 16);
        crate::codec::nal::annexb_to_length_prefixed_filtered(m.data, &mut data, |u| {
            h264::nal_type(u) != Some(h264::NAL_AUD)
        });
        if data.is_empty() {
            self.dropped += 1;
            return;
        }
        self.push_frame(Some(m.layer), &m, keyframe, Bytes::from(data), out);
    }

    /// A layer's video waits for a keyframe (at the start, after a gap);
    /// true when this frame may pass.
    fn pass_video(&mut self, layer: usize, keyframe: bool, arrival: Instant) -> bool {
        let Some(l) = self.layers.get_mut(layer) else {
            return false;
        };
        if l.need_keyframe && !(keyframe && l.track.is_some()) {
            self.dropped += 1;
            return false;
        }
        l.need_keyframe = false;
        if keyframe {
            l.last_keyframe = Some(arrival);
        }
        true
    }

    /// A frame on the stream's timeline: its track's clock (a video
    /// layer's, or the audio's), started where the track's first frame
    /// arrived.
    fn push_frame(
        &mut self,
        layer: Option<usize>,
        m: &Media<'_>,
        keyframe: bool,
        data: Bytes,
        out: &mut Vec<IngestEvent>,
    ) {
        let pts0 = self.timeline(m.arrival);
        let (track, slot) = match layer.and_then(|i| self.layers.get_mut(i)) {
            Some(l) => (l.id, &mut l.clock),
            None => (AUDIO_TRACK, &mut self.audio_clock),
        };
        let clock = *slot.get_or_insert(Clock {
            rtp0: m.rtp_time,
            rate: m.rate,
            pts0,
        });
        let pts = clock.pts(m.rtp_time);
        out.push(IngestEvent::Frame(Frame {
            track,
            pts,
            dts: pts,
            keyframe,
            data,
        }));
    }

    fn on_vp8(&mut self, m: Media<'_>, out: &mut Vec<IngestEvent>) {
        let Some(l) = self.layers.get_mut(m.layer) else {
            return;
        };
        if !m.contiguous || l.track.as_ref().is_some_and(|t| t.codec != Codec::Vp8) {
            l.need_keyframe = true;
        }
        let size = vp8_keyframe_size(m.data);
        if let Some((width, height)) = size {
            let params = VideoParams {
                width: u32::from(width),
                height: u32::from(height),
                framerate: 0.0,
            };
            if l.track.as_ref().and_then(|t| t.video) != Some(params) {
                self.set_layer_track(m.layer, Codec::Vp8, CodecConfig::None, params, out);
            }
        }
        let keyframe = size.is_some();
        if self.pass_video(m.layer, keyframe, m.arrival) {
            self.push_frame(
                Some(m.layer),
                &m,
                keyframe,
                Bytes::copy_from_slice(m.data),
                out,
            );
        }
    }

    fn on_audio(&mut self, m: Media<'_>, out: &mut Vec<IngestEvent>) {
        let first = *self.first_audio.get_or_insert(m.arrival);
        if self.expect_video
            && self.layers.iter().all(|l| l.track.is_none())
            && m.arrival.saturating_duration_since(first) < AUDIO_HOLD
        {
            self.dropped += 1;
            return;
        }
        if self.audio.is_none() {
            // Audio the SDP did not announce (str0m would not pass it):
            // taken as Opus all the same.
            self.audio = IngestTracks::new(false, true).audio;
        }
        self.announce(out);
        self.push_frame(None, &m, true, Bytes::copy_from_slice(m.data), out);
    }
}

/// A VP8 keyframe's width and height (RFC 6386 section 9.1: a 3-byte frame
/// tag whose low bit is 0 on keyframes, the start code 9d 01 2a, then
/// 14-bit width and height); `None` for an interframe or garbage.
pub fn vp8_keyframe_size(data: &[u8]) -> Option<(u16, u16)> {
    let (&tag, rest) = data.split_first()?;
    if tag & 1 != 0 || rest.get(2..5)? != [0x9d, 0x01, 0x2a] {
        return None;
    }
    let w = u16::from_le_bytes([*rest.get(5)?, *rest.get(6)?]) & 0x3fff;
    let h = u16::from_le_bytes([*rest.get(7)?, *rest.get(8)?]) & 0x3fff;
    (w > 0 && h > 0).then_some((w, h))
}

#[cfg(test)]
mod tests {
    use super::*;

    // x264's for 640x360 baseline.
    const SPS: &[u8] = &[
        0x67, 0x42, 0xc0, 0x1e, 0xd9, 0x00, 0xa0, 0x2f, 0xf9, 0x70, 0x11, 0x00, 0x00, 0x03, 0x00,
        0x01, 0x00, 0x00, 0x03, 0x00, 0x3c, 0x0f, 0x16, 0x2e, 0x48,
    ];
    const PPS: &[u8] = &[0x68, 0xcb, 0x83, 0xcb, 0x20];

    fn annexb(units: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        for u in units {
            v.extend_from_slice(&[0, 0, 0, 1]);
            v.extend_from_slice(u);
        }
        v
    }

    fn media(codec: MediaCodec, rtp: u64, at: Instant, contiguous: bool, data: &[u8]) -> Media<'_> {
        Media {
            codec,
            rtp_time: rtp,
            rate: if codec == MediaCodec::Opus {
                48_000
            } else {
                90_000
            },
            arrival: at,
            contiguous,
            layer: 0,
            data,
        }
    }

    #[test]
    fn video_starts_at_a_keyframe_and_audio_follows_it() {
        let t0 = Instant::now();
        let mut ing = IngestTracks::new(true, true);
        let mut out = Vec::new();
        let delta = annexb(&[&[0x41, 0x9a, 1, 2, 3]]);
        let key = annexb(&[&[0x09, 0xf0], SPS, PPS, &[0x65, 0x88, 4, 5, 6]]);
        // Audio before any video: held back (dropped), a PLI is due.
        ing.on_media(media(MediaCodec::Opus, 960, t0, true, b"op"), &mut out);
        ing.on_media(media(MediaCodec::H264, 1000, t0, true, &delta), &mut out);
        assert!(out.is_empty());
        assert_eq!(ing.keyframes_wanted(t0), 1);
        assert_eq!(ing.keyframes_wanted(t0 + Duration::from_millis(100)), 0);
        let t1 = t0 + Duration::from_millis(100);
        ing.on_media(media(MediaCodec::H264, 10_000, t1, true, &key), &mut out);
        let IngestEvent::Tracks(tracks) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(tracks[0].codec, Codec::H264);
        assert_eq!(tracks[0].video.unwrap().width, 640);
        // The audio track is announced with the video, before its frames.
        assert_eq!(tracks[1].codec, Codec::Opus);
        let IngestEvent::Frame(f) = &out[1] else {
            panic!()
        };
        assert!(f.keyframe);
        // Length-prefixed, the delimiter gone, the parameter sets kept.
        let units: Vec<&[u8]> = crate::codec::nal::length_prefixed_units(&f.data, 4)
            .map(Result::unwrap)
            .collect();
        assert_eq!(units, vec![SPS, PPS, &[0x65, 0x88, 4, 5, 6][..]]);
        // The first video frame is the timeline's 100 ms, not zero: the
        // dropped audio came first.
        assert_eq!(f.pts, 9000);
        out.clear();
        // 3000 ticks later by RTP: 3000 ticks later on the timeline,
        // whenever it arrives.
        ing.on_media(
            media(
                MediaCodec::H264,
                13_000,
                t1 + Duration::from_millis(70),
                true,
                &delta,
            ),
            &mut out,
        );
        let IngestEvent::Frame(f) = &out[0] else {
            panic!()
        };
        assert_eq!((f.pts, f.dts, f.keyframe), (12_000, 12_000, false));
        // Not yet two seconds since the keyframe: nothing to ask.
        assert_eq!(ing.keyframes_wanted(t1 + Duration::from_millis(1900)), 0);
        out.clear();
        // Audio now: on the timeline by arrival, no new tracks.
        let t2 = t1 + Duration::from_millis(200);
        ing.on_media(media(MediaCodec::Opus, 48_000, t2, true, b"op"), &mut out);
        assert_eq!(out.len(), 1);
        let IngestEvent::Frame(a) = &out[0] else {
            panic!()
        };
        assert_eq!((a.track, a.pts), (AUDIO_TRACK, 27_000));
        out.clear();
        ing.on_media(media(MediaCodec::Opus, 48_960, t2, true, b"op"), &mut out);
        let IngestEvent::Frame(a) = &out[0] else {
            panic!()
        };
        assert_eq!(a.pts, 27_000 + 1800);
        // A gap: video waits for the next keyframe, and asks for it.
        out.clear();
        ing.on_media(media(MediaCodec::H264, 16_000, t2, false, &delta), &mut out);
        assert!(out.is_empty());
        assert_eq!(ing.keyframes_wanted(t2 + PLI_EVERY), 1);
        // A keyframe again; two seconds on, another is asked for.
        let t3 = t2 + Duration::from_secs(1);
        ing.on_media(media(MediaCodec::H264, 100_000, t3, true, &key), &mut out);
        assert!(matches!(&out[0], IngestEvent::Frame(f) if f.keyframe));
        assert_eq!(ing.keyframes_wanted(t3 + Duration::from_millis(1900)), 0);
        assert_eq!(ing.keyframes_wanted(t3 + KEYFRAME_EVERY), 1);
        // A viewer's request is passed on, once per PLI_EVERY.
        let t4 = t3 + KEYFRAME_EVERY + PLI_EVERY;
        ing.on_media(media(MediaCodec::H264, 300_000, t4, true, &key), &mut out);
        ing.keyframe_asked();
        assert_eq!(ing.keyframes_wanted(t4 + PLI_EVERY), 1);
        assert_eq!(ing.keyframes_wanted(t4 + PLI_EVERY * 3), 0);
    }

    /// A 320x180 SPS (x264, baseline).
    const SMALL_SPS: &[u8] = &[
        0x67, 0x42, 0xc0, 0x0d, 0xd9, 0x01, 0x41, 0x9f, 0x9f, 0x01, 0x10, 0x00, 0x00, 0x03, 0x00,
        0x10, 0x00, 0x00, 0x03, 0x03, 0xc0, 0xf1, 0x42, 0xa4, 0x80,
    ];

    #[test]
    fn simulcast_layers_are_tracks_largest_first_with_keyframes_in_step() {
        let t0 = Instant::now();
        let mut ing = IngestTracks::new(true, true);
        let mut out = Vec::new();
        let key_small = annexb(&[SMALL_SPS, PPS, &[0x65, 0x88, 1]]);
        let key_big = annexb(&[SPS, PPS, &[0x65, 0x88, 2]]);
        let delta = annexb(&[&[0x41, 0x9a, 3]]);
        let at = |layer, rtp, t, data| Media {
            layer,
            ..media(MediaCodec::H264, rtp, t, true, data)
        };
        // The small layer arrives first: it is track 1, and listed.
        ing.on_media(at(0, 5000, t0, &key_small), &mut out);
        let IngestEvent::Tracks(tracks) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(tracks[0].id, VIDEO_TRACK);
        // The large layer: its own track, listed first from now on.
        let t1 = t0 + Duration::from_millis(10);
        out.clear();
        ing.on_media(at(1, 900_000, t1, &key_big), &mut out);
        let IngestEvent::Tracks(tracks) = &out[0] else {
            panic!("{out:?}")
        };
        let listed: Vec<(TrackId, u32)> = tracks
            .iter()
            .map(|t| (t.id, t.video.map_or(0, |v| v.width)))
            .collect();
        assert_eq!(listed, [(3, 640), (VIDEO_TRACK, 320), (AUDIO_TRACK, 0)]);
        let IngestEvent::Frame(f) = &out[1] else {
            panic!()
        };
        // Its own clock, placed where its first frame arrived.
        assert_eq!((f.track, f.pts), (3, 900));
        out.clear();
        ing.on_media(at(1, 903_000, t1, &delta), &mut out);
        assert!(matches!(&out[0], IngestEvent::Frame(f) if f.track == 3 && f.pts == 3900));
        // A fifth layer is past the bound: dropped.
        out.clear();
        ing.on_media(at(MAX_LAYERS, 0, t1, &key_big), &mut out);
        assert!(out.is_empty());
        // Both layers got their keyframes: nothing to ask until one is
        // KEYFRAME_EVERY old; then both are asked at once.
        assert_eq!(ing.keyframes_wanted(t0 + Duration::from_secs(1)), 0);
        assert_eq!(ing.keyframes_wanted(t0 + KEYFRAME_EVERY), 0b11);
        // A gap on one layer: that layer alone waits and is asked.
        let t2 = t0 + KEYFRAME_EVERY + PLI_EVERY;
        ing.on_media(at(1, 1_000_000, t2, &key_big), &mut out);
        ing.on_media(at(0, 6000, t2, &key_small), &mut out);
        out.clear();
        ing.on_media(
            Media {
                contiguous: false,
                ..at(0, 9000, t2, &delta)
            },
            &mut out,
        );
        assert!(out.is_empty());
        assert_eq!(ing.keyframes_wanted(t2 + PLI_EVERY), 0b01);
    }

    #[test]
    fn vp8_starts_at_a_keyframe_with_its_size() {
        let t0 = Instant::now();
        let mut ing = IngestTracks::new(true, true);
        let mut out = Vec::new();
        // A 640x360 keyframe's first bytes, then an interframe.
        let key = [
            0x50, 0x2a, 0x01, 0x9d, 0x01, 0x2a, 0x80, 0x02, 0x68, 0x01, 7, 7,
        ];
        let inter = [0x31, 0x02, 0x00, 9, 9];
        assert_eq!(vp8_keyframe_size(&key), Some((640, 360)));
        assert_eq!(vp8_keyframe_size(&inter), None);
        ing.on_media(media(MediaCodec::Vp8, 0, t0, true, &inter), &mut out);
        assert!(out.is_empty());
        ing.on_media(media(MediaCodec::Vp8, 3000, t0, true, &key), &mut out);
        let IngestEvent::Tracks(tracks) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(tracks[0].codec, Codec::Vp8);
        assert_eq!(tracks[0].video.unwrap().height, 360);
        let IngestEvent::Frame(f) = &out[1] else {
            panic!()
        };
        assert!(f.keyframe && f.data[..] == key[..]);
        out.clear();
        ing.on_media(media(MediaCodec::Vp8, 6000, t0, true, &inter), &mut out);
        assert!(matches!(&out[0], IngestEvent::Frame(f) if !f.keyframe && f.pts == 3000));
    }

    #[test]
    fn audio_only_and_garbage() {
        let t0 = Instant::now();
        let mut ing = IngestTracks::new(false, true);
        let mut out = Vec::new();
        ing.on_media(media(MediaCodec::Opus, 0, t0, true, b"x"), &mut out);
        assert_eq!(out.len(), 2);
        // Video that is not H.264 at all: dropped, no panic.
        let mut ing = IngestTracks::new(true, true);
        out.clear();
        for junk in [&b""[..], b"\0\0\x01", b"\0\0\0\x01\x65", &[0xff; 64]] {
            ing.on_media(media(MediaCodec::H264, 0, t0, true, junk), &mut out);
        }
        assert!(out.iter().all(|e| !matches!(e, IngestEvent::Tracks(_))));
        // A held audio frame is let through after AUDIO_HOLD.
        ing.on_media(media(MediaCodec::Opus, 0, t0, true, b"x"), &mut out);
        assert!(out.is_empty());
        ing.on_media(
            media(MediaCodec::Opus, 96_000, t0 + AUDIO_HOLD, true, b"x"),
            &mut out,
        );
        assert_eq!(out.len(), 2);
    }
}
