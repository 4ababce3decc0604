//! The bytes of a recorded file: MPEG-TS (the muxer the pushes and HLS use)
//! or fragmented MP4 (one `moov` for every track, then a `moof`+`mdat` per
//! track and GOP), so that every byte written so far is a playable file.
//! Sans-IO: frames in, bytes out; the writer thread puts them on disk.

use super::request::Container;
use crate::fmp4::{self, Sample, NON_SYNC_SAMPLE, SYNC_SAMPLE};
use crate::media::{Frame, MediaKind, Track, TrackId, TICKS_PER_SECOND};
use crate::ts::Muxer;

/// An audio-only MP4 recording writes a fragment at least every second.
const AUDIO_FRAGMENT: i64 = TICKS_PER_SECOND;
/// A fragment is written once this much is waiting, keyframe or not.
const MAX_FRAGMENT_BYTES: usize = 8 << 20;

pub enum FileMux {
    Ts(Muxer),
    Mp4(Mp4File),
}

impl FileMux {
    /// A muxer for `tracks` (those the container can hold; others are
    /// left out) and the file's first bytes. Err when no track is left.
    pub fn new(container: Container, tracks: &[Track]) -> Result<(FileMux, Vec<u8>), String> {
        match container {
            Container::Ts => {
                let m = Muxer::new(tracks).map_err(|e| e.to_string())?;
                Ok((FileMux::Ts(m), Vec::new()))
            }
            Container::Mp4 => {
                let mut out = Vec::new();
                let f = Mp4File::new(tracks, &mut out)?;
                Ok((FileMux::Mp4(f), out))
            }
        }
    }

    /// Appends a frame whose timestamps the caller made file-relative.
    pub fn write_frame(&mut self, frame: &Frame, out: &mut Vec<u8>) {
        match self {
            FileMux::Ts(m) => {
                if let Err(e) = m.write_frame(frame, out) {
                    crate::debug!("record mux: {e}");
                }
            }
            FileMux::Mp4(f) => f.write_frame(frame, out),
        }
    }

    /// The file's last bytes (MP4: the samples still held).
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if let FileMux::Mp4(f) = self {
            f.finish(out);
        }
    }
}

struct Mp4Track {
    id: TrackId,
    /// The track id in the file (1, 2, ...).
    file_id: u32,
    timescale: u32,
    video: bool,
    /// The newest frame: its duration comes with the next one.
    held: Option<Frame>,
    /// Samples with known durations, for the next fragment.
    ready: Vec<(Sample, Frame)>,
    /// Decode time of `ready[0]`, track timescale.
    base: u64,
    last_duration: u32,
    sequence: u32,
}

impl Mp4Track {
    fn to_scale(&self, ticks: i64) -> u64 {
        (ticks.max(0) as u128 * u128::from(self.timescale) / TICKS_PER_SECOND as u128) as u64
    }

    /// `next` (a later frame's decode time, or none at the end) gives the
    /// held frame its duration and makes it ready.
    fn release(&mut self, next_dts: Option<i64>) {
        let Some(f) = self.held.take() else {
            return;
        };
        let start = self.to_scale(f.dts);
        let duration = match next_dts {
            Some(n) => self
                .to_scale(n)
                .saturating_sub(start)
                .min(u64::from(u32::MAX)) as u32,
            None => self.last_duration.max(1),
        };
        self.last_duration = duration;
        let cts = f.pts.saturating_sub(f.dts) * i64::from(self.timescale) / TICKS_PER_SECOND;
        if self.ready.is_empty() {
            self.base = start;
        }
        let flags = if f.keyframe || !self.video {
            SYNC_SAMPLE
        } else {
            NON_SYNC_SAMPLE
        };
        self.ready.push((
            Sample {
                duration,
                size: f.data.len() as u32,
                flags,
                cts_offset: cts.clamp(0, i64::from(i32::MAX)) as i32,
            },
            f,
        ));
    }

    fn flush(&mut self, sequence: &mut u32, out: &mut Vec<u8>) {
        if self.ready.is_empty() {
            return;
        }
        *sequence += 1;
        self.sequence = *sequence;
        let samples: Vec<Sample> = self.ready.iter().map(|(s, _)| *s).collect();
        let data: Vec<&[u8]> = self.ready.iter().map(|(_, f)| &f.data[..]).collect();
        fmp4::write_fragment(out, *sequence, self.file_id, self.base, &samples, &data);
        self.ready.clear();
    }

    fn ready_ticks(&self) -> i64 {
        let scale = i64::from(self.timescale.max(1));
        self.ready
            .iter()
            .map(|(s, _)| i64::from(s.duration))
            .sum::<i64>()
            * TICKS_PER_SECOND
            / scale
    }
}

/// A fragmented MP4 file being written.
pub struct Mp4File {
    tracks: Vec<Mp4Track>,
    has_video: bool,
    sequence: u32,
}

impl Mp4File {
    fn new(tracks: &[Track], out: &mut Vec<u8>) -> Result<Mp4File, String> {
        let mut kept = Vec::new();
        let mut skipped = Vec::new();
        for t in tracks {
            let mut probe = Vec::new();
            match fmp4::write_init(t, 1, &mut probe) {
                Ok(()) => kept.push(t),
                Err(e) => skipped.push(format!("track {}: {e}", t.id)),
            }
        }
        if kept.is_empty() {
            return Err(if skipped.is_empty() {
                "the stream has no tracks to record".to_string()
            } else {
                format!("no track can be recorded as MP4 ({})", skipped.join("; "))
            });
        }
        let pairs: Vec<(&Track, u32)> = kept
            .iter()
            .enumerate()
            .map(|(i, t)| (*t, i as u32 + 1))
            .collect();
        fmp4::write_init_tracks(&pairs, out).map_err(|e| e.to_string())?;
        let tracks: Vec<Mp4Track> = pairs
            .iter()
            .map(|(t, file_id)| Mp4Track {
                id: t.id,
                file_id: *file_id,
                timescale: fmp4::timescale(t),
                video: t.kind() == MediaKind::Video,
                held: None,
                ready: Vec::new(),
                base: 0,
                last_duration: 0,
                sequence: 0,
            })
            .collect();
        Ok(Mp4File {
            has_video: tracks.iter().any(|t| t.video),
            tracks,
            sequence: 0,
        })
    }

    fn write_frame(&mut self, frame: &Frame, out: &mut Vec<u8>) {
        let Some(i) = self.tracks.iter().position(|t| t.id == frame.track) else {
            return;
        };
        let t = &mut self.tracks[i];
        if t.held.as_ref().is_some_and(|h| frame.dts < h.dts) {
            return; // decode time going back: not in this file
        }
        t.release(Some(frame.dts));
        t.held = Some(frame.clone());
        let waiting: usize = self
            .tracks
            .iter()
            .flat_map(|t| t.ready.iter().map(|(s, _)| s.size as usize))
            .sum();
        let cut = if self.has_video {
            self.tracks[i].video && frame.keyframe
        } else {
            self.tracks[i].ready_ticks() >= AUDIO_FRAGMENT
        };
        if cut || waiting >= MAX_FRAGMENT_BYTES {
            self.flush(out);
        }
    }

    fn flush(&mut self, out: &mut Vec<u8>) {
        for t in &mut self.tracks {
            t.flush(&mut self.sequence, out);
        }
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        for t in &mut self.tracks {
            t.release(None);
        }
        self.flush(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hls::fuzz::{aac, h264};
    use bytes::Bytes;

    fn frame(track: TrackId, dts: i64, key: bool) -> Frame {
        Frame {
            track,
            pts: dts,
            dts,
            keyframe: key,
            data: Bytes::from(vec![0, 0, 0, 2, 0x65, 0x88]),
        }
    }

    /// Top-level boxes of an MP4 file: (type, size).
    fn boxes(data: &[u8]) -> Vec<(String, usize)> {
        let mut out = Vec::new();
        let mut at = 0;
        while at + 8 <= data.len() {
            let size = u32::from_be_bytes(data[at..at + 4].try_into().unwrap()) as usize;
            out.push((String::from_utf8_lossy(&data[at + 4..at + 8]).into(), size));
            assert!(size >= 8);
            at += size;
        }
        assert_eq!(at, data.len(), "whole boxes only");
        out
    }

    #[test]
    fn mp4_has_one_moov_and_a_fragment_per_track_and_gop() {
        let (mut mux, mut out) = FileMux::new(Container::Mp4, &[h264(), aac()]).unwrap();
        for i in 0..60i64 {
            mux.write_frame(&frame(1, i * 3000, i % 30 == 0), &mut out);
            mux.write_frame(&frame(2, i * 1920, true), &mut out);
        }
        mux.finish(&mut out);
        let kinds: Vec<String> = boxes(&out).into_iter().map(|(k, _)| k).collect();
        assert_eq!(&kinds[..2], ["ftyp", "moov"]);
        // GOP 1 (video, audio), GOP 2 at the keyframe of frame 30, then the
        // rest at the end.
        let fragments = kinds.iter().filter(|k| *k == "moof").count();
        assert_eq!(fragments, 4, "{kinds:?}");
        assert_eq!(kinds.iter().filter(|k| *k == "mdat").count(), fragments);
    }

    #[test]
    fn ts_files_are_whole_packets() {
        let (mut mux, mut out) = FileMux::new(Container::Ts, &[h264(), aac()]).unwrap();
        for i in 0..10i64 {
            mux.write_frame(&frame(1, i * 3000, i == 0), &mut out);
        }
        mux.finish(&mut out);
        assert!(!out.is_empty());
        assert_eq!(out.len() % 188, 0);
    }

    #[test]
    fn mp4_without_a_usable_track_is_refused() {
        let mut t = h264();
        t.codec = crate::media::Codec::Mp3;
        t.video = None;
        assert!(FileMux::new(Container::Mp4, &[t]).is_err());
    }
}
