//! Synthetic tracks and frames for the ts unit tests (test builds only):
//! fake but well-framed H.264/H.265 access units, AAC, MP3 and Opus frames,
//! plus mux/demux drivers.

use bytes::Bytes;

use super::{DemuxEvent, Demuxer, Muxer};
use crate::codec::{aac, h264, h265};
use crate::media::{AudioParams, Codec, CodecConfig, Frame, Ticks, Track, TrackId};

/// NAL bodies avoid 0x00 so no start code can appear inside them.
fn nal(header: &[u8], len: usize, seed: u8) -> Vec<u8> {
    let mut v = header.to_vec();
    v.extend((0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 0x10));
    v
}

fn length_prefixed(units: &[Vec<u8>]) -> Bytes {
    let mut out = Vec::new();
    for u in units {
        out.extend_from_slice(&(u.len() as u32).to_be_bytes());
        out.extend_from_slice(u);
    }
    Bytes::from(out)
}

pub(super) fn h264_sps() -> Vec<u8> {
    nal(&[0x67, 0x64, 0x00, 0x1F], 12, 1)
}
pub(super) fn h264_pps() -> Vec<u8> {
    nal(&[0x68], 4, 2)
}
pub(super) fn h265_vps() -> Vec<u8> {
    nal(&[0x40, 0x01], 20, 3)
}
pub(super) fn h265_sps() -> Vec<u8> {
    nal(&[0x42, 0x01], 30, 4)
}
pub(super) fn h265_pps() -> Vec<u8> {
    nal(&[0x44, 0x01], 6, 5)
}

pub(super) fn video_track(id: TrackId, codec: Codec) -> Track {
    let config = match codec {
        Codec::H265 => CodecConfig::H265 {
            vps: vec![Bytes::from(h265_vps())],
            sps: vec![Bytes::from(h265_sps())],
            pps: vec![Bytes::from(h265_pps())],
        },
        _ => CodecConfig::H264 {
            sps: vec![Bytes::from(h264_sps())],
            pps: vec![Bytes::from(h264_pps())],
        },
    };
    let video = match codec {
        Codec::H265 => h265::video_params(&config),
        _ => h264::video_params(&config),
    };
    Track {
        id,
        codec,
        config,
        video: Some(video.unwrap_or_default()),
        audio: None,
        bitrate: 0,
        label: Default::default(),
    }
}

pub(super) fn aac_track(id: TrackId) -> Track {
    // AAC-LC, 48 kHz (index 3), stereo.
    let config = CodecConfig::Aac {
        asc: aac::build_asc(2, 3, 2),
    };
    Track {
        id,
        codec: Codec::Aac,
        audio: aac::audio_params(&config),
        config,
        video: None,
        bitrate: 0,
        label: Default::default(),
    }
}

pub(super) fn opus_track(id: TrackId) -> Track {
    Track {
        id,
        codec: Codec::Opus,
        config: CodecConfig::None,
        video: None,
        audio: Some(AudioParams {
            sample_rate: 48_000,
            channels: 2,
        }),
        bitrate: 0,
        label: Default::default(),
    }
}

pub(super) fn mp3_track(id: TrackId) -> Track {
    Track {
        id,
        codec: Codec::Mp3,
        config: CodecConfig::None,
        video: None,
        audio: Some(AudioParams {
            sample_rate: 48_000,
            channels: 2,
        }),
        bitrate: 0,
        label: Default::default(),
    }
}

/// `n` video frames at 25 fps from `start`, GOP of 10, with a B-frame-like
/// PTS pattern; keyframes carry parameter sets in-band when `inband`.
/// Frame 3 of each GOP is large (over 65535 bytes) when `big`.
pub(super) fn video_frames(
    track: TrackId,
    codec: Codec,
    n: usize,
    start: Ticks,
    inband: bool,
    big: bool,
) -> Vec<Frame> {
    let hevc = codec == Codec::H265;
    (0..n)
        .map(|i| {
            let key = i % 10 == 0;
            let dts = start + i as Ticks * 3600;
            let pts = dts + if i % 2 == 0 { 7200 } else { 3600 };
            let size = if big && i % 10 == 3 {
                70_000
            } else {
                300 + (i * 37) % 2000
            };
            let mut units = Vec::new();
            if key && inband {
                if hevc {
                    units.extend([h265_vps(), h265_sps(), h265_pps()]);
                } else {
                    units.extend([h264_sps(), h264_pps()]);
                }
            }
            // An SEI-like unit, then the slice.
            units.push(if hevc {
                nal(&[0x4E, 0x01], 10, i as u8)
            } else {
                nal(&[0x06], 10, i as u8)
            });
            let slice_header: &[u8] = match (hevc, key) {
                (true, true) => &[0x26, 0x01],
                (true, false) => &[0x02, 0x01],
                (false, true) => &[0x65],
                (false, false) => &[0x41],
            };
            units.push(nal(slice_header, size, i as u8));
            Frame {
                track,
                pts,
                dts,
                keyframe: key,
                data: length_prefixed(&units),
            }
        })
        .collect()
}

fn audio_frames(
    track: TrackId,
    n: usize,
    start: Ticks,
    step: Ticks,
    body: impl Fn(usize) -> Vec<u8>,
) -> Vec<Frame> {
    (0..n)
        .map(|i| {
            let t = start + i as Ticks * step;
            Frame {
                track,
                pts: t,
                dts: t,
                keyframe: true,
                data: Bytes::from(body(i)),
            }
        })
        .collect()
}

/// AAC frames at 48 kHz (1920 ticks each), raw access units.
pub(super) fn aac_frames(track: TrackId, n: usize, start: Ticks) -> Vec<Frame> {
    audio_frames(track, n, start, 1920, |i| {
        nal(&[0x21], 100 + (i * 13) % 400, i as u8)
    })
}

/// Opus frames of 20 ms (TOC 0xFC: CELT FB 20 ms stereo, one frame).
pub(super) fn opus_frames(track: TrackId, n: usize, start: Ticks) -> Vec<Frame> {
    audio_frames(track, n, start, 1800, |i| {
        nal(&[0xFC], 60 + (i * 29) % 300, i as u8)
    })
}

/// MP3 frames: MPEG-1 layer III, 128 kbit/s, 48 kHz, stereo (384 bytes,
/// 1152 samples = 2160 ticks).
pub(super) fn mp3_frames(track: TrackId, n: usize, start: Ticks) -> Vec<Frame> {
    audio_frames(track, n, start, 2160, |i| {
        nal(&[0xFF, 0xFB, 0x94, 0x00], 380, i as u8)
    })
}

/// Merges frame lists by DTS (stable: ties keep list order).
pub(super) fn interleave(lists: Vec<Vec<Frame>>) -> Vec<Frame> {
    let mut all: Vec<Frame> = lists.into_iter().flatten().collect();
    all.sort_by_key(|f| f.dts);
    all
}

pub(super) fn mux_all(tracks: &[Track], frames: &[Frame]) -> Vec<u8> {
    let mut muxer = Muxer::new(tracks).unwrap();
    let mut out = Vec::new();
    for f in frames {
        muxer.write_frame(f, &mut out).unwrap();
    }
    out
}

/// Demuxes `data` in chunks of the given sizes (cycled), then flushes.
pub(super) fn demux_all(data: &[u8], chunks: &[usize]) -> (Vec<Vec<Track>>, Vec<Frame>) {
    let mut demuxer = Demuxer::new();
    let mut announcements = Vec::new();
    let mut frames = Vec::new();
    let mut drain = |d: &mut Demuxer| {
        while let Some(ev) = d.poll_event() {
            match ev {
                DemuxEvent::TracksChanged(t) => announcements.push(t),
                DemuxEvent::Frame(f) => frames.push(f),
            }
        }
    };
    let mut pos = 0;
    let mut i = 0;
    while pos < data.len() {
        let n = chunks[i % chunks.len()].max(1).min(data.len() - pos);
        demuxer.push(&data[pos..pos + n]);
        pos += n;
        i += 1;
        drain(&mut demuxer);
    }
    demuxer.flush();
    drain(&mut demuxer);
    (announcements, frames)
}

/// The frames of one track.
pub(super) fn of_track(frames: &[Frame], track: TrackId) -> Vec<Frame> {
    frames
        .iter()
        .filter(|f| f.track == track)
        .cloned()
        .collect()
}

/// Frames with their track renamed and timestamps shifted.
pub(super) fn renamed(frames: &[Frame], track: TrackId, shift: Ticks) -> Vec<Frame> {
    frames
        .iter()
        .map(|f| Frame {
            track,
            pts: f.pts + shift,
            dts: f.dts + shift,
            ..f.clone()
        })
        .collect()
}
