//! LL-HLS playlists in OME's names (DECISIONS section 9) and RFC 8216bis's
//! rules: the master playlist and one chunklist per track.

use super::{StreamHls, TrackOutput};
use crate::media::MediaKind;
use std::fmt::Write;

/// `video` or `audio`, as the URLs name a track's kind.
pub fn kind_name(t: &TrackOutput) -> &'static str {
    match t.kind() {
        MediaKind::Video => "video",
        _ => "audio",
    }
}

pub fn chunklist_name(t: &TrackOutput, key: &str) -> String {
    format!("chunklist_{}_{}_{key}_llhls.m3u8", t.track.id, kind_name(t))
}

pub fn init_name(t: &TrackOutput, key: &str) -> String {
    init_name_of(t, t.init_version, key)
}

/// The init section of `version` (0: the first, named as ever; later ones
/// after a change of codec configuration carry their version).
pub fn init_name_of(t: &TrackOutput, version: u32, key: &str) -> String {
    match version {
        0 => format!("init_{}_{}_{key}_llhls.m4s", t.track.id, kind_name(t)),
        v => format!("init_{}_{v}_{}_{key}_llhls.m4s", t.track.id, kind_name(t)),
    }
}

pub fn segment_name(t: &TrackOutput, msn: u64, key: &str) -> String {
    format!("seg_{}_{msn}_{}_{key}_llhls.m4s", t.track.id, kind_name(t))
}

pub fn part_name(t: &TrackOutput, msn: u64, part: usize, key: &str) -> String {
    format!(
        "part_{}_{msn}_{part}_{}_{key}_llhls.m4s",
        t.track.id,
        kind_name(t)
    )
}

/// A file the URLs name, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum File {
    Master,
    Chunklist { track: u32 },
    Init { track: u32, version: u32 },
    Segment { track: u32, msn: u64 },
    Part { track: u32, msn: u64, part: usize },
}

/// Parses a file name of a stream's URLs; the key must be the stream's.
pub fn parse_file(name: &str, key: &str) -> Option<File> {
    if name == "llhls.m3u8" {
        return Some(File::Master);
    }
    let (stem, ext) = name.rsplit_once('.')?;
    let stem = stem.strip_suffix("_llhls")?;
    // kind_track[_msn[_part]]_{video|audio}_{key}: six fields at most,
    // kept on the stack (this runs for every viewer request).
    let mut all = [""; 6];
    let mut count = 0;
    for field in stem.split('_') {
        *all.get_mut(count)? = field;
        count += 1;
    }
    if count < 4 || all[count - 1] != key {
        return None;
    }
    let kind = all[count - 2];
    if kind != "video" && kind != "audio" {
        return None;
    }
    let fields = &all[..count - 2];
    let num = |s: &str| s.parse::<u64>().ok().filter(|_| s.len() <= 12);
    let track = u32::try_from(num(fields.get(1)?)?).ok()?;
    match (fields[0], fields.len(), ext) {
        ("chunklist", 2, "m3u8") => Some(File::Chunklist { track }),
        ("init", 2, "m4s") => Some(File::Init { track, version: 0 }),
        ("init", 3, "m4s") => Some(File::Init {
            track,
            version: u32::try_from(num(fields[2])?).ok()?,
        }),
        ("seg", 3, "m4s") => Some(File::Segment {
            track,
            msn: num(fields[2])?,
        }),
        ("part", 4, "m4s") => Some(File::Part {
            track,
            msn: num(fields[2])?,
            part: usize::try_from(num(fields[3])?).ok()?,
        }),
        _ => None,
    }
}

fn target_duration(s: &StreamHls, t: &TrackOutput) -> u64 {
    super::target_duration(t.max_segment, s.config.segment_target)
}

/// The master playlist: video chunklist as the variant, audio as its
/// `EXT-X-MEDIA` group (audio alone: the audio chunklist as the variant).
/// A stream with several video tracks (an encoder's renditions: enhanced
/// RTMP multitrack) lists each as a variant, first track first, each with
/// its measured rate; several audio tracks are one group (an MPEG-TS
/// source's languages with their names), the first the default.
pub fn master(s: &StreamHls) -> String {
    let mut o = String::from("#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-INDEPENDENT-SEGMENTS\n");
    let videos: Vec<&TrackOutput> = s
        .tracks
        .iter()
        .filter(|t| t.kind() == MediaKind::Video)
        .collect();
    let audios: Vec<&TrackOutput> = s
        .tracks
        .iter()
        .filter(|t| t.kind() == MediaKind::Audio)
        .collect();
    let several = videos.len() > 1 || audios.len() > 1;
    // One track of each: the nominal rates, as ever (a player has no
    // choice to make from them).
    let rate = |t: &TrackOutput| match several {
        true => variant_rate(t),
        false => super::nominal_bitrate(&t.track),
    };
    let audio_rate = audios.iter().map(|a| rate(a)).max().unwrap_or(0);
    let mut audio_codecs: Vec<String> = Vec::new();
    for c in audios
        .iter()
        .filter_map(|a| crate::fmp4::codecs_string(&a.track))
    {
        if !audio_codecs.contains(&c) {
            audio_codecs.push(c);
        }
    }
    if !videos.is_empty() {
        write_audio_group(&mut o, "audio", &audios, "audio", false, &s.key);
    }
    let group = (!videos.is_empty() && !audios.is_empty()).then_some("audio");
    for v in &videos {
        let mut codecs: Vec<String> = crate::fmp4::codecs_string(&v.track).into_iter().collect();
        codecs.extend(audio_codecs.iter().cloned());
        write_variant(
            &mut o,
            rate(v) + audio_rate,
            &codecs,
            Some(v),
            group,
            chunklist_name(v, &s.key),
        );
    }
    if videos.is_empty() {
        // Audio alone: each track a variant of its own.
        for a in &audios {
            let codecs: Vec<String> = crate::fmp4::codecs_string(&a.track).into_iter().collect();
            write_variant(
                &mut o,
                rate(a),
                &codecs,
                None,
                None,
                chunklist_name(a, &s.key),
            );
        }
    }
    o
}

/// An audio group's `EXT-X-MEDIA` lines, the first its default: each
/// member named by its label's name (an AudioMap's), else its language,
/// else `lone` (a group of one) or "audio N"; a name already taken gets
/// its number (names in a group differ). `LANGUAGE` and `CHARACTERISTICS`
/// when known, OME's `CHANNELS` (2 when unknown) when `channels`.
fn write_audio_group(
    o: &mut String,
    group: &str,
    members: &[&TrackOutput],
    lone: &str,
    channels: bool,
    key: &str,
) {
    let mut names: Vec<String> = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let label = &m.track.label;
        let mut name = match (&label.name, label.language) {
            (Some(n), _) => quoted(n),
            (None, Some(l)) => l.as_str().to_owned(),
            (None, None) if members.len() == 1 => quoted(lone),
            (None, None) => format!("audio {}", i + 1),
        };
        if names.contains(&name) {
            name = format!("{name} {}", i + 1);
        }
        let language = label
            .language
            .map(|l| format!(",LANGUAGE=\"{}\"", l.as_str()))
            .unwrap_or_default();
        let characteristics = label
            .characteristics
            .as_ref()
            .map(|c| format!(",CHARACTERISTICS=\"{}\"", quoted(c)))
            .unwrap_or_default();
        let channels = if channels {
            let n = m
                .track
                .audio
                .map(|p| p.channels)
                .filter(|&c| c > 0)
                .unwrap_or(2);
            format!(",CHANNELS=\"{n}\"")
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"{group}\",NAME=\"{name}\"{language},DEFAULT={},AUTOSELECT=YES{channels}{characteristics},URI=\"{}\"",
            if i == 0 { "YES" } else { "NO" },
            chunklist_name(m, key)
        );
        names.push(name);
    }
}

/// A track's rate as a variant's BANDWIDTH counts it, where renditions
/// must rank: a stated rate, else the measured one (with 10% for the
/// container), else an estimate.
fn variant_rate(t: &TrackOutput) -> u64 {
    match (t.track.bitrate, t.measured_bitrate(), t.track.video) {
        (0, m, _) if m > 0 => m + m / 10,
        // Before a second is measured: by the picture's size (0.08 bit
        // per pixel), so renditions still rank.
        (0, _, Some(p)) if p.width > 0 && p.height > 0 => {
            (f64::from(p.width) * f64::from(p.height) * p.framerate.max(25.0) * 0.08) as u64
        }
        _ => super::nominal_bitrate(&t.track),
    }
}

/// One `EXT-X-STREAM-INF` and its URI: the video's size and rate when
/// known, the audio group when there is one.
fn write_variant(
    o: &mut String,
    bandwidth: u64,
    codecs: &[String],
    video: Option<&TrackOutput>,
    audio_group: Option<&str>,
    uri: String,
) {
    let _ = write!(
        o,
        "#EXT-X-STREAM-INF:BANDWIDTH={bandwidth},CODECS=\"{}\"",
        codecs.join(",")
    );
    if let Some(v) = video.and_then(|v| v.track.video) {
        if v.width > 0 && v.height > 0 {
            let _ = write!(o, ",RESOLUTION={}x{}", v.width, v.height);
        }
        if v.framerate > 0.0 {
            let _ = write!(o, ",FRAME-RATE={:.3}", v.framerate);
        }
    }
    if let Some(g) = audio_group {
        let _ = write!(o, ",AUDIO=\"{g}\"");
    }
    let _ = writeln!(o, "\n{uri}");
}

/// A multivariant playlist of renditions (a multiplex channel's
/// `Playlist`): each live rendition a variant of its video track, with its
/// audio track as the variant's audio group; an audio-only rendition is a
/// variant of its audio chunklist.
pub fn renditions_master(s: &StreamHls, playlist: &crate::state::streams::Playlist) -> String {
    let mut o = String::from("#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-INDEPENDENT-SEGMENTS\n");
    let live: Vec<_> = playlist
        .renditions
        .iter()
        .filter(|r| r.live)
        .map(|r| {
            (
                r,
                r.video.and_then(|id| s.track(id)),
                r.audio.and_then(|id| s.track(id)),
            )
        })
        .filter(|(_, v, a)| v.is_some() || a.is_some())
        .collect();
    let mut groups: Vec<u32> = Vec::new();
    for (r, v, a) in &live {
        if let (Some(_), Some(a)) = (v, a) {
            if groups.contains(&a.track.id) {
                continue;
            }
            groups.push(a.track.id);
            // The group: its first track, then the other languages of its
            // variant (a lone track named as its rendition).
            let members: Vec<&TrackOutput> = std::iter::once(*a)
                .chain(r.audio_alternates.iter().filter_map(|id| s.track(*id)))
                .collect();
            let group = format!("audio_{}", a.track.id);
            write_audio_group(&mut o, &group, &members, &r.name, true, &s.key);
        }
    }
    for (r, v, a) in &live {
        // Every codec the variant may play: its video, its audio group's.
        let alternates = a
            .is_some()
            .then(|| r.audio_alternates.iter().filter_map(|id| s.track(*id)))
            .into_iter()
            .flatten();
        let mut codecs: Vec<String> = Vec::new();
        for c in [*v, *a]
            .into_iter()
            .flatten()
            .chain(alternates)
            .filter_map(|t| crate::fmp4::codecs_string(&t.track))
        {
            if !codecs.contains(&c) {
                codecs.push(c);
            }
        }
        // Renditions differ by their rates.
        let bandwidth: u64 = [*v, *a].into_iter().flatten().map(variant_rate).sum();
        let group = match (v, a) {
            (Some(_), Some(a)) => Some(format!("audio_{}", a.track.id)),
            _ => None,
        };
        if let Some(m) = v.or(*a) {
            let uri = chunklist_name(m, &s.key);
            write_variant(&mut o, bandwidth, &codecs, *v, group.as_deref(), uri);
        }
    }
    o
}

/// Text for a quoted playlist attribute: no quote or line break.
fn quoted(s: &str) -> String {
    s.chars()
        .filter(|c| *c != '"' && !c.is_control())
        .take(64)
        .collect()
}

/// `EXT-X-CUE-OUT[:DURATION=s]` / `EXT-X-CUE-IN` (the ad-break markers
/// of Adobe's and AWS Elemental's playlists, which players and ad
/// stitchers read), before the part or segment the break starts or ends
/// at.
pub(crate) fn write_cue(o: &mut String, cue: super::event::Cue) {
    match cue {
        super::event::Cue::Out {
            duration_ms: Some(ms),
        } => {
            let _ = writeln!(o, "#EXT-X-CUE-OUT:DURATION={:.3}", ms as f64 / 1000.0);
        }
        super::event::Cue::Out { duration_ms: None } => o.push_str("#EXT-X-CUE-OUT\n"),
        super::event::Cue::In => o.push_str("#EXT-X-CUE-IN\n"),
    }
}

/// A segment a chunklist lists: on disk (`<DVR>`, older than the live
/// window) or in memory.
#[derive(Clone, Copy)]
enum Listed<'a> {
    Disk(&'a super::dvr::DiskSegment),
    Live(&'a super::Segment),
}

impl Listed<'_> {
    fn msn(&self) -> u64 {
        match self {
            Listed::Disk(d) => d.msn,
            Listed::Live(l) => l.msn,
        }
    }

    fn duration(&self) -> f64 {
        match self {
            Listed::Disk(d) => d.duration,
            Listed::Live(l) => l.duration(),
        }
    }

    fn complete(&self) -> bool {
        match self {
            Listed::Disk(_) => true,
            Listed::Live(l) => l.complete,
        }
    }

    fn init_version(&self) -> u32 {
        match self {
            Listed::Disk(d) => d.init_version,
            Listed::Live(l) => l.init_version,
        }
    }

    fn discontinuity(&self) -> bool {
        match self {
            Listed::Disk(d) => d.discontinuity,
            Listed::Live(l) => l.discontinuity,
        }
    }

    fn start_ms(&self) -> i64 {
        match self {
            Listed::Disk(d) => d.start_ms,
            Listed::Live(l) => l.start_ms,
        }
    }
}

/// A track's chunklist; `skip`: a delta update (`_HLS_skip=YES`).
/// `utc_offset`: the zone program date-times are written in.
/// `rewind` (`_HLS_rewind`, OME's, default YES): with a DVR, the
/// segments on disk that come before the live window are listed first.
pub fn chunklist(
    s: &StreamHls,
    t: &TrackOutput,
    skip: bool,
    rewind: bool,
    utc_offset: i32,
) -> String {
    let key = &s.key;
    let target = target_duration(s, t);
    let part_target = s.config.part_target.as_secs_f64();
    let skip_until = 6 * target;
    // The DVR's segments before the live window, when they join it.
    let dvr = s
        .dvr
        .as_ref()
        .filter(|_| rewind)
        .and_then(|d| d.track(t.track.id));
    let live_first = t.segments.front().map(|f| f.msn);
    let disk: Vec<Listed<'_>> = match (dvr, live_first) {
        (Some(d), Some(first)) => {
            let before: Vec<Listed<'_>> = d
                .segments
                .iter()
                .take_while(|x| x.msn < first)
                .map(Listed::Disk)
                .collect();
            if before.last().is_some_and(|l| l.msn() + 1 == first) {
                before
            } else {
                Vec::new()
            }
        }
        _ => Vec::new(),
    };
    let discontinuity_sequence = match (dvr, disk.is_empty()) {
        (Some(d), false) => d.discontinuity_sequence,
        _ => t.discontinuity_sequence,
    };
    let listed: Vec<Listed<'_>> = disk
        .into_iter()
        .chain(t.segments.iter().map(Listed::Live))
        .collect();
    let first = listed.first().map_or(0, Listed::msn);
    let first_init = listed.first().map_or(t.init_version, Listed::init_version);
    let mut o = String::with_capacity(4096 + 96 * listed.len());
    let _ = write!(
        o,
        "#EXTM3U\n#EXT-X-VERSION:10\n#EXT-X-TARGETDURATION:{target}\n#EXT-X-MEDIA-SEQUENCE:{first}\n"
    );
    if discontinuity_sequence > 0 {
        let _ = writeln!(o, "#EXT-X-DISCONTINUITY-SEQUENCE:{discontinuity_sequence}");
    }
    let _ = write!(
        o,
        "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK={:.3},CAN-SKIP-UNTIL={skip_until}\n\
         #EXT-X-PART-INF:PART-TARGET={part_target:.3}\n#EXT-X-MAP:URI=\"{}\"\n",
        s.config.hold_back().as_secs_f64(),
        init_name_of(t, first_init, key)
    );
    // Segments that end more than CAN-SKIP-UNTIL before the end may be
    // skipped in a delta update.
    let total: f64 = listed.iter().map(Listed::duration).sum();
    let mut skipped = 0;
    if skip {
        let mut end = 0.0;
        for seg in &listed {
            end += seg.duration();
            if seg.complete() && total - end > skip_until as f64 {
                skipped += 1;
            } else {
                break;
            }
        }
        if skipped > 0 {
            let _ = writeln!(o, "#EXT-X-SKIP:SKIPPED-SEGMENTS={skipped}");
            // The first listed segment's init, if a skipped change moved it.
            if let Some(seg) = listed.get(skipped) {
                if seg.init_version() != first_init && !seg.discontinuity() {
                    let _ = writeln!(
                        o,
                        "#EXT-X-MAP:URI=\"{}\"",
                        init_name_of(t, seg.init_version(), key)
                    );
                }
            }
        }
    }
    // Parts are listed for the segments of the last three target
    // durations (RFC 8216bis 4.4.4.9).
    let mut from_end = 0.0;
    let mut with_parts = listed.len();
    for (i, seg) in listed.iter().enumerate().rev() {
        from_end += seg.duration();
        with_parts = i;
        if from_end > 3.0 * target as f64 {
            break;
        }
    }
    for (i, seg) in listed.iter().enumerate().skip(skipped) {
        let parts = match seg {
            Listed::Live(l) if l.parts.is_empty() => continue,
            Listed::Live(l) => &l.parts[..],
            Listed::Disk(_) => &[],
        };
        if seg.discontinuity() && i > 0 {
            let _ = writeln!(
                o,
                "#EXT-X-DISCONTINUITY\n#EXT-X-MAP:URI=\"{}\"",
                init_name_of(t, seg.init_version(), key)
            );
        }
        if i < with_parts || parts.is_empty() {
            // Parts not listed: the segment's cues come before it.
            match seg {
                Listed::Disk(d) => d.cues.iter().for_each(|c| write_cue(&mut o, *c)),
                Listed::Live(_) => parts
                    .iter()
                    .filter_map(|p| p.cue)
                    .for_each(|c| write_cue(&mut o, c)),
            }
        }
        let _ = writeln!(
            o,
            "#EXT-X-PROGRAM-DATE-TIME:{}",
            crate::clock::format_iso8601(seg.start_ms(), utc_offset)
        );
        if i >= with_parts {
            for (p, part) in parts.iter().enumerate() {
                if let Some(cue) = part.cue {
                    write_cue(&mut o, cue);
                }
                let _ = write!(
                    o,
                    "#EXT-X-PART:DURATION={:.5},URI=\"{}\"",
                    part.duration,
                    part_name(t, seg.msn(), p, key)
                );
                if part.independent {
                    o.push_str(",INDEPENDENT=YES");
                }
                o.push('\n');
            }
        }
        if seg.complete() {
            let _ = writeln!(
                o,
                "#EXTINF:{:.5},\n{}",
                seg.duration(),
                segment_name(t, seg.msn(), key)
            );
        }
    }
    if t.is_ended() {
        o.push_str("#EXT-X-ENDLIST\n");
        return o;
    }
    if let Some(last) = t.segments.back() {
        let next_part = if last.complete { 0 } else { last.parts.len() };
        let msn = if last.complete {
            last.msn + 1
        } else {
            last.msn
        };
        let _ = writeln!(
            o,
            "#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"{}\"",
            part_name(t, msn, next_part, key)
        );
    }
    for other in s.tracks.iter().filter(|x| x.track.id != t.track.id) {
        if let Some((msn, part)) = other.last_part() {
            let _ = writeln!(
                o,
                "#EXT-X-RENDITION-REPORT:URI=\"{}\",LAST-MSN={msn},LAST-PART={part}",
                chunklist_name(other, key)
            );
        }
    }
    o
}
