//! Reading MP4 and QuickTime (MOV) files: the `moov` box's sample tables
//! (where each sample is, its size, decode time, composition offset and
//! whether it is a sync sample) and each track's codec configuration, as
//! kiln's [`Track`]s. What plays a file reads the samples at the offsets
//! this gives (the I/O is the caller's; this core only parses bytes).
//!
//! Bounded: at most [`MAX_SAMPLES`] samples in all and [`MAX_MOOV`] bytes of
//! `moov`; a table that points past its own box, a count larger than its
//! box holds, or a codec kiln does not relay makes a clear [`Mp4Error`] (or
//! the track is left out), never a panic. Fragmented MP4 (`moof`) is not
//! read: a file without sample tables is refused.

use crate::codec::{aac, h264, h265};
use crate::media::{AudioParams, Codec, CodecConfig, Track, TICKS_PER_SECOND};
use bytes::Bytes;

/// The largest `moov` read (a two-hour file's tables are a few MB).
pub const MAX_MOOV: u64 = 64 << 20;
/// The most samples of all tracks together.
pub const MAX_SAMPLES: usize = 4_000_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mp4Error {
    /// A box is cut short or its sizes do not add up.
    Truncated(&'static str),
    /// No `moov` box, or one without a track kiln can play.
    NoTracks,
    /// Past [`MAX_MOOV`] or [`MAX_SAMPLES`].
    TooLarge,
    /// A table contradicts another (sample counts differ).
    Inconsistent(&'static str),
}

impl std::fmt::Display for Mp4Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mp4Error::Truncated(b) => write!(f, "the MP4 box [{b}] is cut short"),
            Mp4Error::NoTracks => f.write_str("no H.264, H.265, AAC or Opus track in the file"),
            Mp4Error::TooLarge => write!(
                f,
                "the file's index is too large (more than {MAX_SAMPLES} samples or {MAX_MOOV} bytes)"
            ),
            Mp4Error::Inconsistent(b) => write!(f, "the MP4 table [{b}] contradicts the others"),
        }
    }
}

/// One sample: where it is and when it plays, in its track's timescale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub offset: u64,
    pub size: u32,
    pub dts: i64,
    /// Composition offset (pts = dts + cts).
    pub cts: i32,
    pub sync: bool,
}

/// A track of the file.
#[derive(Debug, Clone)]
pub struct Mp4Track {
    /// As kiln carries it (the id is the file's track index + 1).
    pub track: Track,
    pub timescale: u32,
    /// NAL unit length size of H.264 / H.265 samples (1, 2 or 4).
    pub length_size: u8,
    pub samples: Vec<Sample>,
}

impl Mp4Track {
    /// A time of this track in 90 kHz ticks.
    pub fn ticks(&self, t: i64) -> i64 {
        (i128::from(t) * i128::from(TICKS_PER_SECOND) / i128::from(self.timescale.max(1))) as i64
    }
}

#[derive(Debug, Clone)]
pub struct Movie {
    pub tracks: Vec<Mp4Track>,
    /// The longest track, ms.
    pub duration_ms: i64,
}

/// A box header: (type, header length, body length); `None` when `data`
/// does not hold a whole header. A size of 0 runs to the end of `data`.
pub fn box_header(data: &[u8], remaining: u64) -> Option<([u8; 4], u64, u64)> {
    let size = u64::from(u32::from_be_bytes(data.get(0..4)?.try_into().ok()?));
    let kind: [u8; 4] = data.get(4..8)?.try_into().ok()?;
    let (header, total) = match size {
        0 => (8, remaining),
        1 => (16, u64::from_be_bytes(data.get(8..16)?.try_into().ok()?)),
        n => (8, n),
    };
    if total < header {
        return None;
    }
    Some((kind, header, total - header))
}

/// The child boxes of a box body: (type, body).
fn children(mut data: &[u8]) -> impl Iterator<Item = ([u8; 4], &[u8])> {
    std::iter::from_fn(move || {
        let (kind, header, body) = box_header(data, data.len() as u64)?;
        let end = header.checked_add(body)?;
        if end > data.len() as u64 {
            data = &[];
            return None;
        }
        let (h, b) = (header as usize, end as usize);
        let out = (kind, &data[h..b]);
        data = &data[b..];
        Some(out)
    })
}

fn child<'a>(data: &'a [u8], kind: &[u8; 4]) -> Option<&'a [u8]> {
    children(data).find(|(k, _)| k == kind).map(|(_, b)| b)
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8], what: &'static str) -> Self {
        Reader { data, at: 0, what }
    }
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], Mp4Error> {
        let end = self
            .at
            .checked_add(n)
            .ok_or(Mp4Error::Truncated(self.what))?;
        let b = self
            .data
            .get(self.at..end)
            .ok_or(Mp4Error::Truncated(self.what))?;
        self.at = end;
        Ok(b)
    }
    fn u8(&mut self) -> Result<u8, Mp4Error> {
        Ok(self.bytes(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, Mp4Error> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, Mp4Error> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, Mp4Error> {
        let hi = self.u32()?;
        Ok((u64::from(hi) << 32) | u64::from(self.u32()?))
    }
    /// A table's entry count, checked against what the box can hold.
    fn count(&mut self, entry: usize) -> Result<usize, Mp4Error> {
        let n = self.u32()? as usize;
        if n.saturating_mul(entry) > self.data.len().saturating_sub(self.at) {
            return Err(Mp4Error::Truncated(self.what));
        }
        Ok(n)
    }
}

/// Parses a `moov` box body. Tracks kiln cannot relay (other codecs,
/// subtitles) are left out; none left is [`Mp4Error::NoTracks`].
pub fn parse_moov(moov: &[u8]) -> Result<Movie, Mp4Error> {
    if moov.len() as u64 > MAX_MOOV {
        return Err(Mp4Error::TooLarge);
    }
    let mut tracks = Vec::new();
    let mut total = 0usize;
    for (i, (kind, trak)) in children(moov).enumerate() {
        if &kind != b"trak" {
            continue;
        }
        let Some(t) = parse_trak(trak, i as u32 + 1, &mut total)? else {
            continue;
        };
        tracks.push(t);
    }
    if tracks.is_empty() {
        return Err(Mp4Error::NoTracks);
    }
    let duration_ms = tracks
        .iter()
        .map(|t| {
            let end = t
                .samples
                .last()
                .map_or(0, |s| s.dts + i64::from(s.cts.max(0)));
            t.ticks(end) / 90
        })
        .max()
        .unwrap_or(0);
    Ok(Movie {
        tracks,
        duration_ms,
    })
}

fn parse_trak(trak: &[u8], id: u32, total: &mut usize) -> Result<Option<Mp4Track>, Mp4Error> {
    let Some(mdia) = child(trak, b"mdia") else {
        return Ok(None);
    };
    let mdhd = child(mdia, b"mdhd").ok_or(Mp4Error::Truncated("mdhd"))?;
    let mut r = Reader::new(mdhd, "mdhd");
    let version = r.u8()?;
    r.bytes(3)?;
    let timescale = if version == 1 {
        r.bytes(16)?;
        r.u32()?
    } else {
        r.bytes(8)?;
        r.u32()?
    };
    if timescale == 0 {
        return Err(Mp4Error::Inconsistent("mdhd"));
    }
    // The duration, then the language: ISO 639-2, three letters of 5 bits
    // each (offset 0x60); `und` is none.
    let language = r
        .bytes(if version == 1 { 8 } else { 4 })
        .and_then(|_| r.u16())
        .ok()
        .and_then(|packed| {
            let code = [10u16, 5, 0].map(|shift| (((packed >> shift) & 0x1f) + 0x60) as u8);
            crate::media::Language::parse(&code)
        })
        .filter(|l| l.as_str() != "und");
    let Some(stbl) = child(mdia, b"minf").and_then(|m| child(m, b"stbl")) else {
        return Ok(None);
    };
    let stsd = child(stbl, b"stsd").ok_or(Mp4Error::Truncated("stsd"))?;
    let Some((mut track, length_size)) = sample_entry(stsd, id)? else {
        return Ok(None);
    };
    track.label.language = language;
    let samples = sample_table(stbl, total)?;
    Ok(Some(Mp4Track {
        track,
        timescale,
        length_size,
        samples,
    }))
}

/// The first sample entry of `stsd`, as a track; `None` for a codec kiln
/// does not relay.
fn sample_entry(stsd: &[u8], id: u32) -> Result<Option<(Track, u8)>, Mp4Error> {
    let body = stsd.get(8..).ok_or(Mp4Error::Truncated("stsd"))?;
    let Some((kind, entry)) = children(body).next() else {
        return Ok(None);
    };
    let track = |codec, config, video, audio| Track {
        id,
        codec,
        config,
        video,
        audio,
        bitrate: 0,
        label: Default::default(),
    };
    match &kind {
        b"avc1" | b"avc3" | b"hvc1" | b"hev1" => {
            // VisualSampleEntry: 78 bytes before its boxes.
            let boxes = entry.get(78..).ok_or(Mp4Error::Truncated("avc1"))?;
            let h265 = kind[0] == b'h';
            let name = if h265 { b"hvcC" } else { b"avcC" };
            let Some(record) = child(boxes, name) else {
                return Ok(None);
            };
            let parsed = if h265 {
                h265::parse_decoder_config(record).map(|(c, l)| (c, l, Codec::H265))
            } else {
                h264::parse_decoder_config(record).map(|(c, l)| (c, l, Codec::H264))
            };
            let Ok((config, length_size, codec)) = parsed else {
                return Err(Mp4Error::Inconsistent("avcC"));
            };
            let mut video = if h265 {
                h265::video_params(&config)
            } else {
                h264::video_params(&config)
            }
            .unwrap_or_default();
            if video.width == 0 {
                let mut r = Reader::new(entry, "avc1");
                r.bytes(24)?;
                video.width = u32::from(r.u16()?);
                video.height = u32::from(r.u16()?);
            }
            Ok(Some((track(codec, config, Some(video), None), length_size)))
        }
        b"mp4a" | b"Opus" => {
            // AudioSampleEntry (version 0): 28 bytes before its boxes;
            // QuickTime's versions 1 and 2 add 16 and 36.
            let mut r = Reader::new(entry, "mp4a");
            r.bytes(8)?;
            let qt_version = r.u16()?;
            r.bytes(6)?;
            let channels = r.u16()?;
            r.bytes(6)?;
            let rate = r.u32()? >> 16;
            let skip = match qt_version {
                1 => 16,
                2 => 36,
                _ => 0,
            };
            let boxes = entry.get(28 + skip..).ok_or(Mp4Error::Truncated("mp4a"))?;
            if &kind == b"Opus" {
                let audio = AudioParams {
                    sample_rate: 48_000,
                    channels: channels.clamp(1, 8) as u8,
                };
                let _ = rate;
                return Ok(Some((
                    track(Codec::Opus, CodecConfig::None, None, Some(audio)),
                    4,
                )));
            }
            let Some(asc) = child(boxes, b"esds").and_then(esds_asc) else {
                return Ok(None); // MP3 or another object type
            };
            let config = CodecConfig::Aac {
                asc: Bytes::copy_from_slice(asc),
            };
            let Some(audio) = aac::audio_params(&config) else {
                return Err(Mp4Error::Inconsistent("esds"));
            };
            Ok(Some((track(Codec::Aac, config, None, Some(audio)), 4)))
        }
        _ => Ok(None),
    }
}

/// The AudioSpecificConfig in an `esds` (ES_Descriptor >
/// DecoderConfigDescriptor (AAC) > DecoderSpecificInfo).
fn esds_asc(esds: &[u8]) -> Option<&[u8]> {
    let mut r = Reader::new(esds, "esds");
    r.bytes(4).ok()?; // version, flags
    fn descriptor<'a>(r: &mut Reader<'a>) -> Option<(u8, &'a [u8])> {
        let tag = r.u8().ok()?;
        let mut len = 0usize;
        for _ in 0..4 {
            let b = r.u8().ok()?;
            len = (len << 7) | usize::from(b & 0x7f);
            if b & 0x80 == 0 {
                break;
            }
        }
        Some((tag, r.bytes(len).ok()?))
    }
    let (tag, es) = descriptor(&mut r)?;
    if tag != 3 {
        return None;
    }
    let mut r = Reader::new(es, "esds");
    r.bytes(2).ok()?;
    let flags = r.u8().ok()?;
    if flags & 0x80 != 0 {
        r.bytes(2).ok()?;
    }
    if flags & 0x40 != 0 {
        let n = r.u8().ok()?;
        r.bytes(usize::from(n)).ok()?;
    }
    if flags & 0x20 != 0 {
        r.bytes(2).ok()?;
    }
    let (tag, dc) = descriptor(&mut r)?;
    if tag != 4 || dc.first() != Some(&0x40) {
        return None; // not MPEG-4 audio (AAC)
    }
    let mut r = Reader::new(dc, "esds");
    r.bytes(13).ok()?;
    let (tag, asc) = descriptor(&mut r)?;
    (tag == 5 && !asc.is_empty()).then_some(asc)
}

/// The samples of a `stbl`: sizes (`stsz`/`stz2`), chunks (`stsc` with
/// `stco`/`co64`), times (`stts`, `ctts`) and sync samples (`stss`; none:
/// every sample is one).
fn sample_table(stbl: &[u8], total: &mut usize) -> Result<Vec<Sample>, Mp4Error> {
    let stsz = child(stbl, b"stsz").ok_or(Mp4Error::Truncated("stsz"))?;
    let mut r = Reader::new(stsz, "stsz");
    r.bytes(4)?;
    let fixed = r.u32()?;
    let count = r.u32()? as usize;
    *total = total.saturating_add(count);
    if *total > MAX_SAMPLES {
        return Err(Mp4Error::TooLarge);
    }
    let mut sizes = Vec::with_capacity(count.min(1 << 16));
    if fixed == 0 {
        if count.saturating_mul(4) > stsz.len().saturating_sub(12) {
            return Err(Mp4Error::Truncated("stsz"));
        }
        for _ in 0..count {
            sizes.push(r.u32()?);
        }
    } else {
        sizes.resize(count, fixed);
    }
    // Chunk offsets.
    let offsets: Vec<u64> = if let Some(stco) = child(stbl, b"stco") {
        let mut r = Reader::new(stco, "stco");
        r.bytes(4)?;
        let n = r.count(4)?;
        (0..n)
            .map(|_| r.u32().map(u64::from))
            .collect::<Result<_, _>>()?
    } else if let Some(co64) = child(stbl, b"co64") {
        let mut r = Reader::new(co64, "co64");
        r.bytes(4)?;
        let n = r.count(8)?;
        (0..n).map(|_| r.u64()).collect::<Result<_, _>>()?
    } else {
        return Err(Mp4Error::Truncated("stco"));
    };
    let stsc = child(stbl, b"stsc").ok_or(Mp4Error::Truncated("stsc"))?;
    let mut r = Reader::new(stsc, "stsc");
    r.bytes(4)?;
    let n = r.count(12)?;
    let mut runs = Vec::with_capacity(n);
    for _ in 0..n {
        let first = r.u32()?;
        let per = r.u32()?;
        r.u32()?;
        runs.push((first.max(1) as usize, per as usize));
    }
    let mut samples = Vec::with_capacity(count.min(1 << 16));
    let mut s = 0usize;
    for (ri, &(first, per)) in runs.iter().enumerate() {
        let last = runs
            .get(ri + 1)
            .map_or(offsets.len(), |r| (r.0 - 1).min(offsets.len()));
        for chunk in (first - 1)..last {
            let Some(&base) = offsets.get(chunk) else {
                break;
            };
            let mut at = base;
            for _ in 0..per {
                let Some(&size) = sizes.get(s) else {
                    break;
                };
                samples.push(Sample {
                    offset: at,
                    size,
                    dts: 0,
                    cts: 0,
                    sync: true,
                });
                at = at.saturating_add(u64::from(size));
                s += 1;
            }
        }
    }
    if samples.len() != count {
        return Err(Mp4Error::Inconsistent("stsc"));
    }
    // Decode times.
    let stts = child(stbl, b"stts").ok_or(Mp4Error::Truncated("stts"))?;
    let mut r = Reader::new(stts, "stts");
    r.bytes(4)?;
    let n = r.count(8)?;
    let (mut i, mut t) = (0usize, 0i64);
    for _ in 0..n {
        let run = r.u32()? as usize;
        let delta = i64::from(r.u32()?);
        for _ in 0..run {
            let Some(x) = samples.get_mut(i) else { break };
            x.dts = t;
            t += delta;
            i += 1;
        }
    }
    if let Some(ctts) = child(stbl, b"ctts") {
        let mut r = Reader::new(ctts, "ctts");
        r.bytes(4)?;
        let n = r.count(8)?;
        let mut i = 0usize;
        for _ in 0..n {
            let run = r.u32()? as usize;
            // Version 0 offsets are unsigned but writers put negative ones
            // there too: read as signed either way.
            let off = r.u32()? as i32;
            for _ in 0..run {
                let Some(x) = samples.get_mut(i) else { break };
                x.cts = off;
                i += 1;
            }
        }
    }
    if let Some(stss) = child(stbl, b"stss") {
        for x in &mut samples {
            x.sync = false;
        }
        let mut r = Reader::new(stss, "stss");
        r.bytes(4)?;
        let n = r.count(4)?;
        for _ in 0..n {
            let k = r.u32()? as usize;
            if let Some(x) = k.checked_sub(1).and_then(|k| samples.get_mut(k)) {
                x.sync = true;
            }
        }
    }
    Ok(samples)
}

/// Every sample of the movie in decode order (by time, then track), from
/// `start_ms` on: each video track from the last sync sample at or before
/// it, audio from its first sample at or after that. (track index,
/// sample index) pairs, to read with [`Movie::tracks`].
pub fn play_order(movie: &Movie, start_ms: i64) -> Vec<(usize, usize)> {
    let start = start_ms.max(0).saturating_mul(90);
    // Video decides where playing starts: its sync sample at or before.
    let mut from = start;
    for t in &movie.tracks {
        if t.track.codec.kind() != crate::media::MediaKind::Video {
            continue;
        }
        if let Some(s) = t
            .samples
            .iter()
            .rev()
            .find(|s| s.sync && t.ticks(s.dts) <= start)
        {
            from = from.min(t.ticks(s.dts));
        }
    }
    let mut order: Vec<(i64, usize, usize)> = Vec::new();
    for (ti, t) in movie.tracks.iter().enumerate() {
        for (si, s) in t.samples.iter().enumerate() {
            let at = t.ticks(s.dts);
            if at >= from {
                order.push((at, ti, si));
            }
        }
    }
    order.sort_unstable();
    order.into_iter().map(|(_, t, s)| (t, s)).collect()
}

/// Entry points for cargo-fuzz targets: feed arbitrary bytes, ignore results.
pub mod fuzz {
    /// A `moov` body, then where playing would start and every sample's
    /// time converted.
    pub fn fuzz_moov(data: &[u8]) {
        let Ok(movie) = super::parse_moov(data) else {
            return;
        };
        let order = super::play_order(&movie, i64::from(data.first().copied().unwrap_or(0)) * 100);
        for (t, s) in order.into_iter().take(100_000) {
            let track = &movie.tracks[t];
            let sample = track.samples[s];
            let _ = track.ticks(sample.dts) + track.ticks(i64::from(sample.cts));
        }
    }
}

#[cfg(test)]
mod tests;
