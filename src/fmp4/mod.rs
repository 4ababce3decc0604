//! CMAF / fragmented MP4 (ISO/IEC 14496-12, -15, 23000-19) for LL-HLS:
//! an init section per track (`ftyp` + `moov`) and `moof` + `mdat`
//! fragments (parts), one track each. Sans-IO: frames in, bytes out.
//!
//! Timescales: 90 kHz for video (the media clock kiln keeps), the sample
//! rate for audio. Video samples are the frames' AVCC / HVCC access units
//! as they are (4-byte lengths); AAC and Opus samples are raw frames.

use crate::codec::{h264, h265};
use crate::media::{Codec, CodecConfig, MediaKind, Track, TICKS_PER_SECOND};

/// Why a track cannot be packaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fmp4Error {
    /// The codec has no CMAF mapping here (MP3, data).
    Unsupported(&'static str),
    /// The track's configuration is missing or unusable.
    Config(String),
}

impl std::fmt::Display for Fmp4Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fmp4Error::Unsupported(c) => write!(f, "{c} cannot be packaged as fMP4"),
            Fmp4Error::Config(why) => write!(f, "track configuration: {why}"),
        }
    }
}

/// The sample flags of a sync sample and of the others (ISO 14496-12
/// 8.8.3.1: sample_depends_on, sample_is_non_sync_sample).
pub const SYNC_SAMPLE: u32 = 0x0200_0000;
pub const NON_SYNC_SAMPLE: u32 = 0x0101_0000;

/// One sample of a fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// In the track's timescale.
    pub duration: u32,
    pub size: u32,
    pub flags: u32,
    /// Composition offset (pts - dts), track timescale.
    pub cts_offset: i32,
}

/// The timescale of a track's fMP4 samples.
pub fn timescale(track: &Track) -> u32 {
    match track.kind() {
        MediaKind::Video => TICKS_PER_SECOND as u32,
        _ => track
            .audio
            .map(|a| a.sample_rate)
            .filter(|r| *r > 0)
            .unwrap_or(48_000),
    }
}

/// The RFC 6381 `CODECS` value of a track (`avc1.64001f`, `hvc1.1.6.L93.B0`,
/// `mp4a.40.2`, `opus`).
pub fn codecs_string(track: &Track) -> Option<String> {
    match (&track.codec, &track.config) {
        (Codec::H264, CodecConfig::H264 { sps, .. }) => {
            let s = sps.first()?;
            let b = s.get(1..4)?;
            Some(format!("avc1.{:02x}{:02x}{:02x}", b[0], b[1], b[2]))
        }
        (Codec::H265, CodecConfig::H265 { sps, .. }) => hevc_codecs(sps.first()?),
        (Codec::Aac, CodecConfig::Aac { asc }) => {
            let object_type = asc.first().map_or(2, |b| b >> 3);
            Some(format!("mp4a.40.{object_type}"))
        }
        (Codec::Opus, _) => Some("opus".into()),
        _ => None,
    }
}

/// `hvc1.{profile space}{profile}.{compat flags reversed, hex}.{tier}{level}.{constraints}`
/// from the SPS's profile_tier_level (bytes after the 2-byte NAL header and
/// the first byte: vps id, max sub layers, temporal nesting).
fn hevc_codecs(sps: &[u8]) -> Option<String> {
    // Emulation prevention cannot occur in the first 15 bytes of a
    // profile_tier_level that matters here in practice; strip it anyway.
    let rbsp = crate::codec::nal::rbsp(sps.get(2..)?);
    let ptl = rbsp.get(1..13)?;
    let space = ptl[0] >> 6;
    let tier = (ptl[0] >> 5) & 1;
    let profile = ptl[0] & 0x1F;
    let compat = u32::from_be_bytes([ptl[1], ptl[2], ptl[3], ptl[4]]).reverse_bits();
    let level = ptl[11];
    let space = match space {
        1 => "A",
        2 => "B",
        3 => "C",
        _ => "",
    };
    let mut s = format!(
        "hvc1.{space}{profile}.{compat:X}.{}{level}",
        if tier == 1 { "H" } else { "L" }
    );
    // Constraint bytes, trailing zero bytes left out.
    let constraints = &ptl[5..11];
    let used = constraints
        .iter()
        .rposition(|b| *b != 0)
        .map_or(0, |i| i + 1);
    for b in &constraints[..used] {
        s.push_str(&format!(".{b:X}"));
    }
    Some(s)
}

/// Appends a box: the size is patched once `body` has written it.
fn boxed(out: &mut Vec<u8>, kind: &[u8; 4], body: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(kind);
    body(out);
    let size = (out.len() - start) as u32;
    out[start..start + 4].copy_from_slice(&size.to_be_bytes());
}

/// A full box: version and flags first.
fn full(
    out: &mut Vec<u8>,
    kind: &[u8; 4],
    version: u8,
    flags: u32,
    body: impl FnOnce(&mut Vec<u8>),
) {
    boxed(out, kind, |o| {
        o.push(version);
        o.extend_from_slice(&flags.to_be_bytes()[1..]);
        body(o);
    });
}

fn u16be(o: &mut Vec<u8>, v: u16) {
    o.extend_from_slice(&v.to_be_bytes());
}

fn u32be(o: &mut Vec<u8>, v: u32) {
    o.extend_from_slice(&v.to_be_bytes());
}

const MATRIX: [u32; 9] = [0x0001_0000, 0, 0, 0, 0x0001_0000, 0, 0, 0, 0x4000_0000];

/// The init section of one track (`track_id` >= 1): `ftyp` + `moov`.
pub fn write_init(track: &Track, track_id: u32, out: &mut Vec<u8>) -> Result<(), Fmp4Error> {
    write_init_tracks(&[(track, track_id)], out)
}

/// The init section of several tracks (each with its id >= 1), as a
/// recording's fragmented MP4 file starts.
pub fn write_init_tracks(tracks: &[(&Track, u32)], out: &mut Vec<u8>) -> Result<(), Fmp4Error> {
    let entries = tracks
        .iter()
        .map(|(t, _)| sample_entry(t))
        .collect::<Result<Vec<_>, _>>()?;
    let next_id = tracks.iter().map(|(_, id)| *id).max().unwrap_or(0) + 1;
    boxed(out, b"ftyp", |o| {
        o.extend_from_slice(b"iso6");
        u32be(o, 0);
        for brand in [b"iso6", b"cmfc", b"mp41"] {
            o.extend_from_slice(brand);
        }
    });
    boxed(out, b"moov", |o| {
        full(o, b"mvhd", 0, 0, |o| {
            u32be(o, 0); // creation
            u32be(o, 0); // modification
            u32be(o, 1000); // timescale
            u32be(o, 0); // duration: unknown (fragmented)
            u32be(o, 0x0001_0000); // rate 1.0
            u16be(o, 0x0100); // volume 1.0
            o.extend_from_slice(&[0; 10]);
            for m in MATRIX {
                u32be(o, m);
            }
            o.extend_from_slice(&[0; 24]);
            u32be(o, next_id); // next track id
        });
        for ((track, track_id), entry) in tracks.iter().zip(&entries) {
            let (track, track_id) = (*track, *track_id);
            let scale = timescale(track);
            let video = track.kind() == MediaKind::Video;
            boxed(o, b"trak", |o| {
                full(o, b"tkhd", 0, 3, |o| {
                    u32be(o, 0);
                    u32be(o, 0);
                    u32be(o, track_id);
                    u32be(o, 0);
                    u32be(o, 0); // duration
                    o.extend_from_slice(&[0; 8]);
                    u16be(o, 0); // layer
                    u16be(o, 0); // alternate group
                    u16be(o, if video { 0 } else { 0x0100 });
                    u16be(o, 0);
                    for m in MATRIX {
                        u32be(o, m);
                    }
                    let (w, h) = track.video.map_or((0, 0), |v| (v.width, v.height));
                    u32be(o, w << 16);
                    u32be(o, h << 16);
                });
                boxed(o, b"mdia", |o| {
                    full(o, b"mdhd", 0, 0, |o| {
                        u32be(o, 0);
                        u32be(o, 0);
                        u32be(o, scale);
                        u32be(o, 0);
                        u16be(o, 0x55C4); // language "und"
                        u16be(o, 0);
                    });
                    full(o, b"hdlr", 0, 0, |o| {
                        u32be(o, 0);
                        o.extend_from_slice(if video { b"vide" } else { b"soun" });
                        o.extend_from_slice(&[0; 12]);
                        o.extend_from_slice(if video {
                            b"kiln video\0"
                        } else {
                            b"kiln audio\0"
                        });
                    });
                    boxed(o, b"minf", |o| {
                        if video {
                            full(o, b"vmhd", 0, 1, |o| o.extend_from_slice(&[0; 8]));
                        } else {
                            full(o, b"smhd", 0, 0, |o| o.extend_from_slice(&[0; 4]));
                        }
                        boxed(o, b"dinf", |o| {
                            full(o, b"dref", 0, 0, |o| {
                                u32be(o, 1);
                                full(o, b"url ", 0, 1, |_| {});
                            });
                        });
                        boxed(o, b"stbl", |o| {
                            full(o, b"stsd", 0, 0, |o| {
                                u32be(o, 1);
                                o.extend_from_slice(entry);
                            });
                            for kind in [b"stts", b"stsc", b"stco"] {
                                full(o, kind, 0, 0, |o| u32be(o, 0));
                            }
                            full(o, b"stsz", 0, 0, |o| {
                                u32be(o, 0);
                                u32be(o, 0);
                            });
                        });
                    });
                });
            });
        }
        boxed(o, b"mvex", |o| {
            for (_, track_id) in tracks {
                full(o, b"trex", 0, 0, |o| {
                    u32be(o, *track_id);
                    u32be(o, 1); // sample description index
                    u32be(o, 0);
                    u32be(o, 0);
                    u32be(o, 0);
                });
            }
        });
    });
    Ok(())
}

/// The `stsd` entry of a track.
fn sample_entry(track: &Track) -> Result<Vec<u8>, Fmp4Error> {
    let mut o = Vec::new();
    match (&track.codec, &track.config) {
        (Codec::H264, CodecConfig::H264 { sps, pps }) => {
            let record = h264::build_decoder_config(sps, pps)
                .map_err(|e| Fmp4Error::Config(e.to_string()))?;
            visual_entry(&mut o, b"avc1", track, b"avcC", &record);
        }
        (Codec::H265, CodecConfig::H265 { vps, sps, pps }) => {
            let record = h265::build_decoder_config(vps, sps, pps)
                .map_err(|e| Fmp4Error::Config(e.to_string()))?;
            visual_entry(&mut o, b"hvc1", track, b"hvcC", &record);
        }
        (Codec::H264 | Codec::H265, _) => {
            return Err(Fmp4Error::Config("no parameter sets yet".into()))
        }
        (Codec::Aac, CodecConfig::Aac { asc }) => {
            let a = track.audio.unwrap_or_default();
            audio_entry(&mut o, b"mp4a", a.channels, timescale(track), |o| {
                full(o, b"esds", 0, 0, |o| write_esds(o, asc));
            });
        }
        (Codec::Aac, _) => return Err(Fmp4Error::Config("no AudioSpecificConfig".into())),
        (Codec::Opus, _) => {
            let a = track.audio.unwrap_or_default();
            let channels = a.channels.max(1);
            // Opus in ISO BMFF: the entry says 48 kHz whatever the input.
            audio_entry(&mut o, b"Opus", channels, 48_000, |o| {
                boxed(o, b"dOps", |o| {
                    o.push(0); // version
                    o.push(channels);
                    u16be(o, 312); // pre-skip
                    u32be(o, a.sample_rate.max(1));
                    u16be(o, 0); // output gain
                    o.push(0); // mapping family 0 (mono/stereo)
                });
            });
        }
        (Codec::Mp3, _) => return Err(Fmp4Error::Unsupported("MP3")),
        (Codec::Vp8, _) => return Err(Fmp4Error::Unsupported("VP8")),
    }
    Ok(o)
}

fn visual_entry(o: &mut Vec<u8>, kind: &[u8; 4], track: &Track, config: &[u8; 4], record: &[u8]) {
    let (w, h) = track.video.map_or((0, 0), |v| (v.width, v.height));
    boxed(o, kind, |o| {
        o.extend_from_slice(&[0; 6]);
        u16be(o, 1); // data reference index
        o.extend_from_slice(&[0; 16]);
        u16be(o, w.min(0xFFFF) as u16);
        u16be(o, h.min(0xFFFF) as u16);
        u32be(o, 0x0048_0000); // 72 dpi
        u32be(o, 0x0048_0000);
        u32be(o, 0);
        u16be(o, 1); // frame count
        o.extend_from_slice(&[0; 32]); // compressor name
        u16be(o, 0x0018); // depth
        u16be(o, 0xFFFF); // pre-defined -1
        boxed(o, config, |o| o.extend_from_slice(record));
    });
}

fn audio_entry(
    o: &mut Vec<u8>,
    kind: &[u8; 4],
    channels: u8,
    rate: u32,
    config: impl FnOnce(&mut Vec<u8>),
) {
    boxed(o, kind, |o| {
        o.extend_from_slice(&[0; 6]);
        u16be(o, 1);
        o.extend_from_slice(&[0; 8]);
        u16be(o, u16::from(channels.max(1)));
        u16be(o, 16); // sample size
        u16be(o, 0);
        u16be(o, 0);
        u32be(o, rate.min(0xFFFF) << 16);
        config(o);
    });
}

/// An `esds` body (ES_Descriptor with the AudioSpecificConfig).
fn write_esds(o: &mut Vec<u8>, asc: &[u8]) {
    let asc = &asc[..asc.len().min(100)];
    let dsi_len = asc.len() as u8;
    let dcd_len = 13 + 2 + dsi_len;
    let es_len = 3 + 2 + dcd_len + 2 + 1;
    o.extend_from_slice(&[0x03, es_len, 0, 1, 0]); // ES_Descriptor, ES_ID 1
    o.extend_from_slice(&[0x04, dcd_len, 0x40, 0x15]); // AAC, audio stream
    o.extend_from_slice(&[0, 0, 0]); // buffer size
    u32be(o, 0); // max bitrate
    u32be(o, 0); // avg bitrate
    o.extend_from_slice(&[0x05, dsi_len]);
    o.extend_from_slice(asc);
    o.extend_from_slice(&[0x06, 1, 2]); // SLConfig: MP4
}

/// An event message box, version 1 (ISO/IEC 23009-1 5.10.3.3): `data`
/// for `scheme` at `presentation_time` (in `timescale`), duration unknown.
/// Written before a fragment's `moof` (CMAF event message track-less
/// carriage, as for ID3 timed metadata).
pub fn write_emsg(
    out: &mut Vec<u8>,
    timescale: u32,
    presentation_time: u64,
    id: u32,
    scheme: &str,
    data: &[u8],
) {
    full(out, b"emsg", 1, 0, |o| {
        u32be(o, timescale);
        o.extend_from_slice(&presentation_time.to_be_bytes());
        u32be(o, u32::MAX);
        u32be(o, id);
        o.extend_from_slice(scheme.as_bytes());
        o.push(0);
        o.push(0); // value: empty
        o.extend_from_slice(data);
    });
}

/// One fragment (a part): `moof` (mfhd, traf: tfhd, tfdt, trun) and the
/// `mdat` holding `data` (the samples, in order). `sequence` counts
/// fragments of the track from 1.
pub fn write_fragment(
    out: &mut Vec<u8>,
    sequence: u32,
    track_id: u32,
    base_decode_time: u64,
    samples: &[Sample],
    data: &[&[u8]],
) {
    let moof_start = out.len();
    let mut data_offset_at = 0;
    boxed(out, b"moof", |o| {
        full(o, b"mfhd", 0, 0, |o| u32be(o, sequence));
        boxed(o, b"traf", |o| {
            // default-base-is-moof
            full(o, b"tfhd", 0, 0x02_0000, |o| u32be(o, track_id));
            full(o, b"tfdt", 1, 0, |o| {
                o.extend_from_slice(&base_decode_time.to_be_bytes())
            });
            // data offset, duration, size, flags, composition offset
            // (version 1: signed offsets).
            full(o, b"trun", 1, 0x0F01, |o| {
                u32be(o, samples.len() as u32);
                data_offset_at = o.len();
                u32be(o, 0);
                for s in samples {
                    u32be(o, s.duration);
                    u32be(o, s.size);
                    u32be(o, s.flags);
                    o.extend_from_slice(&s.cts_offset.to_be_bytes());
                }
            });
        });
    });
    let moof_len = out.len() - moof_start;
    let offset = (moof_len + 8) as u32;
    out[data_offset_at..data_offset_at + 4].copy_from_slice(&offset.to_be_bytes());
    let total: usize = data.iter().map(|d| d.len()).sum();
    u32be(out, (total + 8) as u32);
    out.extend_from_slice(b"mdat");
    for d in data {
        out.extend_from_slice(d);
    }
}

#[cfg(test)]
mod tests;
