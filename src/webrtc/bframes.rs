//! B-frames and WebRTC viewers. Browsers' WebRTC H.264 path does not
//! reorder: frames whose timestamps go back (B-frames) are dropped by the
//! receiver, and every frame after one counts as broken until the next
//! keyframe, so a source at x264's defaults plays at about one frame a
//! second. kiln does not decode, so it leaves the B-frames out before
//! packetizing: the viewer gets the I- and P-frames, in order, with
//! contiguous sequence numbers (7.5 fps from a 30 fps source with 3
//! B-frames).
//!
//! That is only right when no P-frame predicts from a B-frame left out.
//! x264's b-pyramid keeps one B-frame per group as a reference; with one
//! reference per P-frame (its `veryfast` and faster presets, OBS's
//! default) P-frames predict from the previous P-frame and the I/P frames
//! decode bit for bit as in the full stream. With several references
//! (`medium`, ffmpeg's default) a P-frame may predict from a B-frame: the
//! gate reads each P-frame's slice header, and a P-frame whose reference
//! list may hold a dropped B-frame is left out with everything after it
//! until the next keyframe (the viewer sees keyframes, never a broken
//! picture). LL-HLS, RTMP, SRT and recordings are not touched.

use crate::codec::h264::{parse_sps_for_slices, SliceSps};
use crate::codec::h264_slice::{parse_pps, parse_slice_header, SliceKind, SlicePps};
use crate::media::{CodecConfig, Frame};

/// Reference pictures remembered (H.264 allows 16).
const MAX_REFS: usize = 16;

/// What the gate did with a source so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GateCounts {
    pub sent: u64,
    /// B-frames left out.
    pub b_frames: u64,
    /// Frames left out because they may predict from a B-frame.
    pub unsafe_frames: u64,
}

/// Decides, frame by frame in decode order, which frames of one H.264
/// track a WebRTC viewer gets.
#[derive(Debug, Default)]
pub struct BFrameGate {
    sps: Vec<SliceSps>,
    pps: Vec<SlicePps>,
    /// Reference pictures since the last IDR, in decode order:
    /// (frame_num, a B-frame).
    refs: Vec<(u32, bool)>,
    /// A P-frame that may predict from a B-frame was left out: everything
    /// until the next keyframe goes too.
    broken: bool,
    pub counts: GateCounts,
}

impl BFrameGate {
    /// A gate for a track with this configuration.
    pub fn new(config: &CodecConfig) -> Self {
        let mut g = BFrameGate::default();
        if let CodecConfig::H264 { sps, pps } = config {
            for s in sps {
                g.learn(s);
            }
            for p in pps {
                g.learn(p);
            }
        }
        g
    }

    /// Reads a parameter set (SPS or PPS NAL unit, header included).
    fn learn(&mut self, nal: &[u8]) {
        match nal.first().map(|b| b & 0x1f) {
            Some(7) => {
                if let Ok(s) = parse_sps_for_slices(nal) {
                    self.sps.retain(|x| x.sps_id != s.sps_id);
                    self.sps.push(s);
                }
            }
            Some(8) => {
                if let Ok(p) = parse_pps(nal) {
                    self.pps.retain(|x| x.pps_id != p.pps_id);
                    self.pps.push(p);
                }
            }
            _ => {}
        }
    }

    /// Does a viewer get this frame (H.264, 4-byte length-prefixed NAL
    /// units)? A frame that cannot be read is passed as it is.
    pub fn admit(&mut self, frame: &Frame) -> bool {
        let mut header = None;
        let mut data = &frame.data[..];
        while data.len() >= 4 {
            let len = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
            let Some(nal) = data.get(4..4 + len) else {
                break;
            };
            data = &data[4 + len..];
            match nal.first().map(|b| b & 0x1f) {
                Some(7 | 8) => self.learn(nal),
                Some(1 | 5) if header.is_none() => {
                    let (sps, pps) = (&self.sps, &self.pps);
                    header = parse_slice_header(
                        nal,
                        |id| sps.iter().find(|s| s.sps_id == id).copied(),
                        |id| pps.iter().find(|p| p.pps_id == id).copied(),
                    )
                    .ok();
                    if header.is_none() {
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(h) = header else {
            self.counts.sent += 1;
            return true;
        };
        if h.idr {
            self.refs.clear();
            self.broken = false;
        }
        let admitted = match h.kind {
            SliceKind::B => {
                self.counts.b_frames += 1;
                false
            }
            _ if self.broken => {
                self.counts.unsafe_frames += 1;
                false
            }
            SliceKind::I => true,
            SliceKind::P => {
                let safe = self.predicts_from_sent(h.active_refs, h.first_ref_pic_num);
                if !safe {
                    self.broken = true;
                    self.counts.unsafe_frames += 1;
                }
                safe
            }
        };
        if h.reference {
            if self.refs.len() >= MAX_REFS {
                self.refs.remove(0);
            }
            self.refs.push((h.frame_num, h.kind == SliceKind::B));
        }
        if admitted {
            self.counts.sent += 1;
        }
        admitted
    }

    /// Can a P-frame with `active` references, the first named
    /// `first` (picture number; `None`: list 0 in its initial order),
    /// predict only from pictures a viewer has?
    fn predicts_from_sent(&self, active: u32, first: Option<i64>) -> bool {
        let max_refs = self.sps.first().map_or(16, |s| s.max_num_ref_frames) as usize;
        let live = &self.refs[self.refs.len().saturating_sub(max_refs.max(1))..];
        if !live.iter().any(|(_, b)| *b) {
            return true;
        }
        if active != 1 {
            return false;
        }
        let target = match first {
            // Initial order: the newest reference picture first.
            None => live.last(),
            Some(n) if n >= 0 => live.iter().rev().find(|(f, _)| i64::from(*f) == n),
            Some(_) => None,
        };
        target.is_some_and(|(_, b)| !b)
    }
}

/// Fuzz entry: any bytes as a run of frames (cut at each 0xFF), each
/// read as length-prefixed NAL units; parameter sets among them are
/// learnt as a real stream's in-band ones are.
pub fn fuzz_gate(data: &[u8]) {
    let mut g = BFrameGate::default();
    for (i, chunk) in data.split(|b| *b == 0xFF).enumerate() {
        let frame = Frame {
            track: 1,
            pts: i as i64,
            dts: i as i64,
            keyframe: false,
            data: bytes::Bytes::copy_from_slice(chunk),
        };
        g.admit(&frame);
    }
    // panic-audit: fuzzing only; a count that does not add up is the bug it finds.
    assert!(g.refs.len() <= MAX_REFS);
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    /// Frames of a real x264 stream (ffmpeg's testsrc2, `-preset
    /// veryfast`: 3 B-frames, b-pyramid, one reference) and of the same
    /// at `-preset medium` (three references): the slice headers the gate
    /// reads, in decode order.
    fn frames(file: &str) -> Option<(CodecConfig, Vec<Frame>)> {
        let data = std::fs::read(format!(
            "{}/tests/fixtures/{file}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .ok()?;
        let mut nals = Vec::new();
        let starts: Vec<usize> = (0..data.len().saturating_sub(3))
            .filter(|&k| data[k..k + 3] == [0, 0, 1])
            .collect();
        for (n, &s) in starts.iter().enumerate() {
            let end = starts.get(n + 1).map_or(data.len(), |&e| e);
            let mut nal = &data[s + 3..end];
            while nal.last() == Some(&0) {
                nal = &nal[..nal.len() - 1];
            }
            nals.push(nal.to_vec());
        }
        let sps: Vec<Bytes> = nals
            .iter()
            .filter(|n| n[0] & 0x1f == 7)
            .take(1)
            .map(|n| Bytes::from(n.clone()))
            .collect();
        let pps: Vec<Bytes> = nals
            .iter()
            .filter(|n| n[0] & 0x1f == 8)
            .take(1)
            .map(|n| Bytes::from(n.clone()))
            .collect();
        let mut out = Vec::new();
        for (k, n) in nals.iter().enumerate() {
            let t = n[0] & 0x1f;
            if t == 1 || t == 5 {
                let mut d = (n.len() as u32).to_be_bytes().to_vec();
                d.extend_from_slice(n);
                out.push(Frame {
                    track: 1,
                    pts: k as i64,
                    dts: k as i64,
                    keyframe: t == 5,
                    data: Bytes::from(d),
                });
            }
        }
        Some((CodecConfig::H264 { sps, pps }, out))
    }

    #[test]
    fn a_veryfast_x264_stream_keeps_its_i_and_p_frames() {
        let Some((config, frames)) = frames("x264-veryfast-bframes.h264") else {
            panic!("fixture missing");
        };
        let mut g = BFrameGate::new(&config);
        let sent = frames.iter().filter(|f| g.admit(f)).count();
        // 120 frames: 2 I, 36 P, 82 B (of them 27 references); the I and
        // P frames alone decode bit for bit as in the whole stream
        // (checked with ffmpeg's psnr filter: inf).
        assert_eq!(sent, 38, "{:?}", g.counts);
        assert_eq!(g.counts.b_frames, 82);
        assert_eq!(g.counts.unsafe_frames, 0);
    }

    #[test]
    fn a_stream_whose_p_frames_may_use_b_frames_gives_keyframes_only() {
        let Some((config, frames)) = frames("x264-medium-bframes.h264") else {
            panic!("fixture missing");
        };
        let mut g = BFrameGate::new(&config);
        let sent: Vec<&Frame> = frames.iter().filter(|f| g.admit(f)).collect();
        assert!(g.counts.unsafe_frames > 0, "{:?}", g.counts);
        // Whatever is sent after a B-frame reference decodes: keyframes,
        // and P-frames before the first reference B-frame of a GOP.
        assert!(sent.iter().any(|f| f.keyframe));
        assert!(sent.len() < 38, "{}", sent.len());
    }

    #[test]
    fn a_stream_without_b_frames_is_untouched() {
        let mut g = BFrameGate::default();
        let f = Frame {
            track: 1,
            pts: 0,
            dts: 0,
            keyframe: false,
            data: Bytes::from_static(&[0, 0, 0, 2, 0x41, 0x9a]),
        };
        // Unknown parameter sets: passed as it is.
        assert!(g.admit(&f));
        assert_eq!(g.counts.sent, 1);
    }
}
