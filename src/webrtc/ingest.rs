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
//!   ([`IngestTracks::wants_keyframe`]). A browser sends keyframes only
//!   when asked, so one is also asked for every [`KEYFRAME_EVERY`]: HLS
//!   segments and recordings are cut at keyframes, and a new RTMP or SRT
//!   player starts at the last one.
//! - VP8 (a publisher that offers no H.264) passes as it is; its keyframes
//!   (RFC 6386 section 9.1) give the track its size. Only WebRTC viewers
//!   get it: no other output of kiln carries VP8.
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

#[derive(Debug, Default)]
pub struct IngestTracks {
    expect_video: bool,
    video: Option<Track>,
    audio: Option<Track>,
    /// The tracks last announced.
    announced: Vec<Track>,
    /// The timeline's zero: the first frame's arrival (kept or not).
    origin: Option<Instant>,
    video_clock: Option<Clock>,
    audio_clock: Option<Clock>,
    /// Video is dropped until a keyframe (at the start, after a gap).
    need_keyframe: bool,
    last_request: Option<Instant>,
    last_keyframe: Option<Instant>,
    /// A viewer asked for a keyframe (its PLI or FIR, passed on).
    asked: bool,
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
            }),
            need_keyframe: true,
            ..IngestTracks::default()
        }
    }

    pub fn tracks(&self) -> Vec<Track> {
        self.video.iter().chain(&self.audio).cloned().collect()
    }

    /// The tracks, if they changed since last said.
    fn announce(&mut self, out: &mut Vec<IngestEvent>) {
        let tracks = self.tracks();
        if tracks != self.announced {
            self.announced = tracks.clone();
            out.push(IngestEvent::Tracks(tracks));
        }
    }

    /// A keyframe is needed (or the last is [`KEYFRAME_EVERY`] old) and it
    /// is time to ask (again).
    pub fn wants_keyframe(&mut self, now: Instant) -> bool {
        let stale = self
            .last_keyframe
            .is_some_and(|t| now.saturating_duration_since(t) >= KEYFRAME_EVERY);
        if !(self.need_keyframe || stale || self.asked)
            || self.last_request.is_some_and(|t| now < t + PLI_EVERY)
        {
            return false;
        }
        self.last_request = Some(now);
        self.asked = false;
        true
    }

    /// A viewer of the stream asked for a keyframe: ask the publisher
    /// (no more often than [`PLI_EVERY`]).
    pub fn keyframe_asked(&mut self) {
        self.asked = true;
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
            MediaCodec::H264 => self.on_video(m, out),
            MediaCodec::Vp8 => self.on_vp8(m, out),
            MediaCodec::Opus => self.on_audio(m, out),
        }
    }

    fn on_video(&mut self, m: Media<'_>, out: &mut Vec<IngestEvent>) {
        // A gap, or a switch from VP8: the next keyframe (re)starts it.
        if !m.contiguous || self.video.as_ref().is_some_and(|t| t.codec != Codec::H264) {
            self.need_keyframe = true;
        }
        let keyframe = h264::is_keyframe_annexb(m.data);
        if keyframe {
            if let Some(config) = h264::config_from_annexb(m.data) {
                if self.video.as_ref().map(|t| &t.config) != Some(&config) {
                    let video = h264::video_params(&config).unwrap_or_default();
                    self.video = Some(Track {
                        id: VIDEO_TRACK,
                        codec: Codec::H264,
                        config,
                        video: Some(video),
                        audio: None,
                        bitrate: 0,
                    });
                    self.announce(out);
                }
            }
        }
        if !self.pass_video(keyframe, m.arrival) {
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
        self.push_frame(VIDEO_TRACK, &m, keyframe, Bytes::from(data), out);
    }

    /// Video waits for a keyframe (at the start, after a gap); true when
    /// this frame may pass.
    fn pass_video(&mut self, keyframe: bool, arrival: Instant) -> bool {
        if self.need_keyframe && !(keyframe && self.video.is_some()) {
            self.dropped += 1;
            return false;
        }
        self.need_keyframe = false;
        if keyframe {
            self.last_keyframe = Some(arrival);
        }
        true
    }

    /// A frame on the stream's timeline: its track's clock, started where
    /// the track's first frame arrived.
    fn push_frame(
        &mut self,
        track: TrackId,
        m: &Media<'_>,
        keyframe: bool,
        data: Bytes,
        out: &mut Vec<IngestEvent>,
    ) {
        let pts0 = self.timeline(m.arrival);
        let slot = if track == VIDEO_TRACK {
            &mut self.video_clock
        } else {
            &mut self.audio_clock
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
        if !m.contiguous || self.video.as_ref().is_some_and(|t| t.codec != Codec::Vp8) {
            self.need_keyframe = true;
        }
        let size = vp8_keyframe_size(m.data);
        if let Some((width, height)) = size {
            let params = VideoParams {
                width: u32::from(width),
                height: u32::from(height),
                framerate: 0.0,
            };
            if self.video.as_ref().and_then(|t| t.video) != Some(params) {
                self.video = Some(Track {
                    id: VIDEO_TRACK,
                    codec: Codec::Vp8,
                    config: CodecConfig::None,
                    video: Some(params),
                    audio: None,
                    bitrate: 0,
                });
                self.announce(out);
            }
        }
        let keyframe = size.is_some();
        if self.pass_video(keyframe, m.arrival) {
            self.push_frame(
                VIDEO_TRACK,
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
            && self.video.is_none()
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
        self.push_frame(AUDIO_TRACK, &m, true, Bytes::copy_from_slice(m.data), out);
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
        assert!(ing.wants_keyframe(t0));
        assert!(!ing.wants_keyframe(t0 + Duration::from_millis(100)));
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
        assert!(!ing.wants_keyframe(t1 + Duration::from_millis(1900)));
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
        assert!(ing.wants_keyframe(t2 + PLI_EVERY));
        // A keyframe again; two seconds on, another is asked for.
        let t3 = t2 + Duration::from_secs(1);
        ing.on_media(media(MediaCodec::H264, 100_000, t3, true, &key), &mut out);
        assert!(matches!(&out[0], IngestEvent::Frame(f) if f.keyframe));
        assert!(!ing.wants_keyframe(t3 + Duration::from_millis(1900)));
        assert!(ing.wants_keyframe(t3 + KEYFRAME_EVERY));
        // A viewer's request is passed on, once per PLI_EVERY.
        let t4 = t3 + KEYFRAME_EVERY + PLI_EVERY;
        ing.on_media(media(MediaCodec::H264, 300_000, t4, true, &key), &mut out);
        ing.keyframe_asked();
        assert!(ing.wants_keyframe(t4 + PLI_EVERY));
        assert!(!ing.wants_keyframe(t4 + PLI_EVERY * 3));
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
