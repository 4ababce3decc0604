//! AAC to Opus, once per stream: browsers' WebRTC has no AAC, so a stream
//! published with AAC (OBS, ffmpeg) is decoded (symphonia's AAC decoder),
//! resampled to 48 kHz when it is not (rubato) and encoded as 20 ms Opus
//! packets (opus-rs). Every WebRTC viewer of the stream gets the same
//! packets. Sans-IO: frames in, packets out, timestamps carried through.

use crate::media::{Frame, Ticks, TICKS_PER_SECOND};
use bytes::Bytes;
use rubato::{FastFixedIn, PolynomialDegree, Resampler};
use symphonia_codec_aac::AacDecoder;
use symphonia_core::audio::{AudioBufferRef, SampleBuffer};
use symphonia_core::codecs::{CodecParameters, Decoder, DecoderOptions, CODEC_TYPE_AAC};
use symphonia_core::formats::Packet;

/// Opus's rate and the packet length kiln sends (20 ms, what browsers
/// send and expect).
const OPUS_RATE: u32 = 48_000;
const PACKET_SAMPLES: usize = 960;
const PACKET_TICKS: Ticks = TICKS_PER_SECOND / 50;
/// Bits per second for a stereo (mono) Opus stream.
const STEREO_BITRATE: i32 = 96_000;
const MONO_BITRATE: i32 = 64_000;
/// A gap in the source's timestamps larger than this restarts the output
/// clock from the source's (a publisher that paused or skipped).
const MAX_DRIFT: Ticks = TICKS_PER_SECOND / 5;
/// PCM waiting for a whole packet is never more than this (samples per
/// channel): a decoder that returned a huge buffer is cut.
const MAX_PENDING: usize = OPUS_RATE as usize;

/// Why a transcoder could not be made or a frame not decoded.
#[derive(Debug, PartialEq, Eq)]
pub enum AudioError {
    Config(String),
    Decode(String),
    /// The decoder failed on malformed audio; this stream's audio is
    /// not transcoded any more (until its tracks change).
    Decoder,
}

impl std::fmt::Display for AudioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AudioError::Config(e) => write!(f, "AAC configuration: {e}"),
            AudioError::Decode(e) => write!(f, "AAC frame: {e}"),
            AudioError::Decoder => f.write_str(
                "the AAC decoder failed on malformed audio; the stream's audio is no longer offered to WebRTC viewers",
            ),
        }
    }
}

/// One Opus packet and its presentation time (90 kHz).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpusPacket {
    pub pts: Ticks,
    pub data: Bytes,
}

pub struct AacToOpus {
    decoder: AacDecoder,
    resampler: Option<Resampling>,
    encoder: opus_rs::OpusEncoder,
    /// Output channels (1 or 2; more are folded to stereo).
    channels: usize,
    /// Interleaved 48 kHz PCM not yet encoded.
    pending: Vec<f32>,
    /// Time of `pending[0]`.
    pending_pts: Option<Ticks>,
    /// Where the next source frame is expected (drift check).
    expected: Option<Ticks>,
    scratch: Vec<u8>,
    /// The decoder panicked once: nothing more is decoded.
    broken: bool,
}

struct Resampling {
    resampler: FastFixedIn<f32>,
    chunk: usize,
    /// Per channel, source-rate samples waiting for a whole chunk.
    input: Vec<Vec<f32>>,
}

impl AacToOpus {
    /// A transcoder for a track with this AudioSpecificConfig.
    pub fn new(asc: &[u8]) -> Result<AacToOpus, AudioError> {
        let info =
            crate::codec::aac::parse_asc(asc).map_err(|e| AudioError::Config(format!("{e:?}")))?;
        let mut params = CodecParameters::new();
        params
            .for_codec(CODEC_TYPE_AAC)
            .with_sample_rate(info.sample_rate)
            .with_extra_data(asc.to_vec().into_boxed_slice());
        let decoder = AacDecoder::try_new(&params, &DecoderOptions::default())
            .map_err(|e| AudioError::Config(e.to_string()))?;
        let channels = if info.channels == 1 { 1 } else { 2 };
        let mut encoder =
            opus_rs::OpusEncoder::new(OPUS_RATE as i32, channels, opus_rs::Application::Audio)
                .map_err(|e| AudioError::Config(e.to_string()))?;
        encoder.bitrate_bps = if channels == 2 {
            STEREO_BITRATE
        } else {
            MONO_BITRATE
        };
        Ok(AacToOpus {
            decoder,
            resampler: None,
            encoder,
            channels,
            pending: Vec::new(),
            pending_pts: None,
            expected: None,
            scratch: vec![0; 4000],
            broken: false,
        })
    }

    /// Output channels (what the SDP says).
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// Decodes one AAC frame; returns the Opus packets now complete.
    pub fn push(&mut self, frame: &Frame) -> Result<Vec<OpusPacket>, AudioError> {
        if self.broken {
            return Ok(Vec::new());
        }
        let packet = Packet::new_from_slice(0, 0, 0, &frame.data);
        let channels = self.channels;
        let decoder = &mut self.decoder;
        // symphonia's AAC decoder can panic on malformed frames (an index
        // out of bounds, found by fuzzing): a publisher's bytes must not
        // take the transcoder down. The stream's audio stops instead.
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            decoder.decode(&packet).map(|d| {
                let rate = d.spec().rate;
                let frames = d.frames();
                (rate, frames, planar(d, channels))
            })
        }));
        let (rate, frames, pcm) = match decoded {
            Ok(Ok(d)) => d,
            Ok(Err(e)) => return Err(AudioError::Decode(e.to_string())),
            Err(_) => {
                self.broken = true;
                return Err(AudioError::Decoder);
            }
        };
        if frames == 0 {
            return Ok(Vec::new());
        }
        // The source clock: restart ours from it after a jump.
        let drifted = self
            .expected
            .is_none_or(|e| (frame.pts - e).abs() > MAX_DRIFT);
        if drifted {
            self.pending.clear();
            self.pending_pts = Some(frame.pts);
            if let Some(r) = &mut self.resampler {
                r.input.iter_mut().for_each(Vec::clear);
            }
        }
        self.expected = Some(frame.pts + frames as Ticks * TICKS_PER_SECOND / rate.max(1) as Ticks);
        if rate == OPUS_RATE {
            interleave_into(&pcm, &mut self.pending);
        } else {
            self.resample(pcm, rate)?;
        }
        if self.pending.len() / self.channels > MAX_PENDING {
            self.pending.clear();
            self.pending_pts = Some(frame.pts);
        }
        Ok(self.encode_ready())
    }

    fn resample(&mut self, pcm: Vec<Vec<f32>>, rate: u32) -> Result<(), AudioError> {
        let chunk = pcm.first().map_or(0, Vec::len);
        if self.resampler.as_ref().is_none_or(|r| r.chunk != chunk) {
            let resampler = FastFixedIn::new(
                f64::from(OPUS_RATE) / f64::from(rate),
                1.0,
                PolynomialDegree::Septic,
                chunk,
                self.channels,
            )
            .map_err(|e| AudioError::Config(e.to_string()))?;
            self.resampler = Some(Resampling {
                resampler,
                chunk,
                input: vec![Vec::new(); self.channels],
            });
        }
        let Some(r) = self.resampler.as_mut() else {
            return Ok(());
        };
        for (buf, ch) in r.input.iter_mut().zip(pcm) {
            buf.extend_from_slice(&ch);
        }
        while r.input[0].len() >= r.chunk {
            let out = r
                .resampler
                .process(&r.input, None)
                .map_err(|e| AudioError::Decode(e.to_string()))?;
            for buf in &mut r.input {
                buf.drain(..r.chunk);
            }
            interleave_into(&out, &mut self.pending);
        }
        Ok(())
    }

    fn encode_ready(&mut self) -> Vec<OpusPacket> {
        let mut packets = Vec::new();
        let step = PACKET_SAMPLES * self.channels;
        let mut used = 0;
        while self.pending.len() - used >= step {
            let input = &self.pending[used..used + step];
            used += step;
            let pts = self.pending_pts.unwrap_or(0);
            self.pending_pts = Some(pts + PACKET_TICKS);
            match self
                .encoder
                .encode(input, PACKET_SAMPLES, &mut self.scratch)
            {
                Ok(n) if n > 0 => packets.push(OpusPacket {
                    pts,
                    data: Bytes::copy_from_slice(&self.scratch[..n]),
                }),
                Ok(_) => {}
                Err(e) => crate::debug!("opus encode: {e}"),
            }
        }
        self.pending.drain(..used);
        packets
    }
}

/// The decoded samples as `channels` planes of f32 (a mono source played
/// as mono; more than two channels keep the first two).
fn planar(decoded: AudioBufferRef<'_>, channels: usize) -> Vec<Vec<f32>> {
    let spec = *decoded.spec();
    let frames = decoded.frames();
    let src_channels = spec.channels.count().max(1);
    let mut buf = SampleBuffer::<f32>::new(frames as u64, spec);
    buf.copy_interleaved_ref(decoded);
    let samples = buf.samples();
    let mut planes = vec![Vec::with_capacity(frames); channels];
    for frame in samples.chunks_exact(src_channels) {
        for (c, plane) in planes.iter_mut().enumerate() {
            plane.push(frame[c.min(src_channels - 1)]);
        }
    }
    planes
}

fn interleave_into(planes: &[Vec<f32>], out: &mut Vec<f32>) {
    let frames = planes.first().map_or(0, Vec::len);
    out.reserve(frames * planes.len());
    for i in 0..frames {
        for p in planes {
            out.push(p[i]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_config_is_an_error_not_a_panic() {
        assert!(AacToOpus::new(&[]).is_err());
        assert!(AacToOpus::new(&[0xff, 0xff]).is_err());
    }

    /// The input the fuzzer found making symphonia panic (kept in
    /// fuzz/regressions): an error, and the stream's audio stops.
    #[test]
    fn a_decoder_panic_is_contained() {
        let data = include_bytes!("../../tests/fixtures/aac-decoder-panic.bin");
        crate::webrtc::fuzz::fuzz_aac_to_opus(data);
    }

    #[test]
    fn garbage_frames_are_errors_not_panics() {
        // AAC-LC, 48 kHz, stereo.
        let mut t = AacToOpus::new(&[0x11, 0x90]).unwrap();
        for n in 0..64u8 {
            let data: Vec<u8> = (0..n as usize * 7)
                .map(|i| (i as u8).wrapping_mul(n))
                .collect();
            let f = Frame {
                track: 1,
                pts: i64::from(n) * 1920,
                dts: i64::from(n) * 1920,
                keyframe: true,
                data: Bytes::from(data),
            };
            let _ = t.push(&f);
        }
    }
}
