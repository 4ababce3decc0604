use super::playlist::{self, File};
use super::*;
use crate::media::{Frame, TrackLabel};
use crate::rtmp::flv::tests::{aac_track, h264_track};

/// As [`frames`], all `start` seconds later.
fn frames_from(start: i64, seconds: u32) -> Vec<Frame> {
    frames(seconds)
        .into_iter()
        .map(|f| Frame {
            dts: f.dts + start * 90_000,
            pts: f.pts + start * 90_000,
            ..f
        })
        .collect()
}

/// 30 fps video with a keyframe every second, and 48 kHz AAC (1024
/// samples a frame), in decode order, for `seconds`.
fn frames(seconds: u32) -> Vec<Frame> {
    let mut out = Vec::new();
    let (mut v, mut a) = (0u32, 0u32);
    let end = i64::from(seconds) * 90_000;
    loop {
        let vt = 10_000 + i64::from(v) * 3000;
        let at = 10_000 + i64::from(a) * 1920;
        if vt >= end && at >= end {
            break;
        }
        if vt <= at {
            let key = v % 30 == 0;
            let mut data = vec![0, 0, 0, 20, if key { 0x65 } else { 0x41 }];
            data.extend_from_slice(&[v as u8; 19]);
            out.push(Frame {
                track: 1,
                pts: vt + 3000,
                dts: vt,
                keyframe: key,
                data: data.into(),
            });
            v += 1;
        } else {
            out.push(Frame {
                track: 2,
                pts: at,
                dts: at,
                keyframe: true,
                data: vec![0x21; 10].into(),
            });
            a += 1;
        }
    }
    out
}

fn stream(seconds: u32, config: LlhlsConfig) -> StreamHls {
    let mut s = StreamHls::new(
        &[h264_track(), aac_track()],
        config,
        "abcd1234".into(),
        1_700_000_000_000,
    );
    for f in frames(seconds) {
        s.push(&f);
    }
    s
}

/// The rules of RFC 8216bis a chunklist is held to here.
fn check_chunklist(text: &str) {
    let value = |tag: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(tag))
            .and_then(|v| v.split(',').next())
            .and_then(|v| v.parse().ok())
    };
    let target = value("#EXT-X-TARGETDURATION:").expect("TARGETDURATION");
    let part_target = text
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-PART-INF:PART-TARGET="))
        .and_then(|v| v.parse::<f64>().ok())
        .expect("PART-INF");
    let mut msn = value("#EXT-X-MEDIA-SEQUENCE:").expect("MEDIA-SEQUENCE") as u64;
    let mut first_part_of_segment = true;
    for l in text.lines() {
        if let Some(extinf) = l.strip_prefix("#EXTINF:") {
            let d: f64 = extinf.trim_end_matches(',').parse().unwrap();
            assert!(d.round() <= target, "EXTINF {d} > TARGETDURATION {target}");
            first_part_of_segment = true;
        } else if let Some(part) = l.strip_prefix("#EXT-X-PART:") {
            let d: f64 = part
                .split(',')
                .find_map(|f| f.strip_prefix("DURATION="))
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                d <= part_target + 1e-6,
                "part {d} > PART-TARGET {part_target}"
            );
            if first_part_of_segment {
                assert!(part.contains("INDEPENDENT=YES"), "{l}");
            }
            first_part_of_segment = false;
        } else if l.starts_with("seg_") {
            match playlist::parse_file(l, "abcd1234") {
                Some(File::Segment { msn: m, .. }) => {
                    assert_eq!(m, msn, "media sequence numbers are continuous");
                    msn += 1;
                }
                other => panic!("{l}: {other:?}"),
            }
        }
    }
}

#[test]
fn segments_start_on_keyframes_and_parts_keep_their_target() {
    let s = stream(20, LlhlsConfig::default());
    let video = s.track(1).unwrap();
    let audio = s.track(2).unwrap();
    // 6 s segments from 1 s GOPs: the first ends at the first keyframe a
    // part target in (0-1), then 1-7, 7-13, 13-19, and 19- in progress.
    let complete: Vec<f64> = video
        .segments
        .iter()
        .filter(|x| x.complete)
        .map(|x| x.duration())
        .collect();
    assert_eq!(complete.len(), 4, "{complete:?}");
    assert!((complete[0] - 1.0).abs() < 1e-6, "{complete:?}");
    for d in &complete[1..] {
        assert!((d - 6.0).abs() < 1e-6, "{d}");
    }
    for seg in &video.segments {
        assert!(seg.parts[0].independent);
        for p in &seg.parts {
            assert!(p.duration <= 0.5 + 1e-9, "{}", p.duration);
        }
    }
    // Audio segments follow the video's, with the same numbers.
    let msns = |t: &TrackOutput| t.segments.iter().map(|x| x.msn).collect::<Vec<_>>();
    assert_eq!(msns(video), msns(audio));
    for (v, a) in video.segments.iter().zip(&audio.segments) {
        assert!((v.duration() - a.duration()).abs() < 0.05 || !v.complete);
    }
    check_chunklist(&playlist::chunklist(&s, video, false, false, 0));
    check_chunklist(&playlist::chunklist(&s, audio, false, false, 0));
}

#[test]
fn playlists_name_every_file_the_urls_serve() {
    let s = stream(14, LlhlsConfig::default());
    let master = playlist::master(&s);
    assert!(
        master.contains("#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"audio\""),
        "{master}"
    );
    assert!(
        master.contains("CODECS=\"avc1.64001e,mp4a.40.2\""),
        "{master}"
    );
    assert!(master.contains("chunklist_1_video_abcd1234_llhls.m3u8"));
    let v = s.track(1).unwrap();
    let text = playlist::chunklist(&s, v, false, false, 0);
    assert!(text.contains("#EXT-X-MAP:URI=\"init_1_video_abcd1234_llhls.m4s\""));
    assert!(text.contains(
        "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=1.500,CAN-SKIP-UNTIL=36"
    ));
    assert!(
        text.contains("#EXT-X-PROGRAM-DATE-TIME:2023-11-14T22:13:20.000+00:00"),
        "{text}"
    );
    assert!(
        text.contains("#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"part_1_3_"),
        "{text}"
    );
    assert!(text.contains("#EXT-X-RENDITION-REPORT:URI=\"chunklist_2_audio_abcd1234_llhls.m3u8\""));
    for name in text.lines().filter(|l| l.starts_with("seg_")).chain(
        text.lines()
            .filter_map(|l| l.split("URI=\"").nth(1))
            .map(|u| u.split('"').next().unwrap()),
    ) {
        let file = playlist::parse_file(name, "abcd1234").unwrap_or_else(|| panic!("{name}"));
        match file {
            File::Segment { msn, .. } => assert!(v.segment(msn).unwrap().complete),
            File::Part { msn, part, .. }
                if !text.contains(&format!("PRELOAD-HINT:TYPE=PART,URI=\"{name}")) =>
            {
                assert!(v.has(msn, Some(part)), "{name}")
            }
            _ => {}
        }
    }
    assert_eq!(
        playlist::parse_file("part_1_2_3_video_wrongkey_llhls.m4s", "abcd1234"),
        None
    );
    assert_eq!(playlist::parse_file("../llhls.m3u8", "abcd1234"), None);
}

#[test]
fn delta_updates_skip_old_segments_and_the_end_is_marked() {
    let mut s = stream(70, LlhlsConfig::default());
    let v = s.track(1).unwrap();
    let full = playlist::chunklist(&s, v, false, false, 0);
    let delta = playlist::chunklist(&s, v, true, false, 0);
    assert!(delta.contains("#EXT-X-SKIP:SKIPPED-SEGMENTS="), "{delta}");
    assert!(delta.len() < full.len());
    s.end();
    let v = s.track(1).unwrap();
    let text = playlist::chunklist(&s, v, false, false, 0);
    assert!(text.ends_with("#EXT-X-ENDLIST\n"), "{text}");
    assert!(!text.contains("PRELOAD-HINT"));
    // SegmentCount (10) complete segments are kept.
    assert!(v.segments.len() <= 11);
}

/// ffprobe reads the init section + segments of each track as one file:
/// the codec, its size, every sample, and monotonic times.
#[test]
fn ffprobe_reads_the_segments() {
    if std::process::Command::new("ffprobe")
        .arg("-version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("KILN_REQUIRE_INTEROP").is_err(),
            "ffprobe is required"
        );
        eprintln!("skipped: ffprobe not installed");
        return;
    }
    let mut s = stream(20, LlhlsConfig::default());
    s.end();
    let dir = std::env::temp_dir().join(format!("kiln-hls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let all = frames(20);
    for (t, codec) in [(1, "h264"), (2, "aac")] {
        let expect = all.iter().filter(|f| f.track == t).count();
        let track = s.track(t).unwrap();
        let mut file = track.init.to_vec();
        for seg in &track.segments {
            for part in track.segment_data(seg.msn).unwrap() {
                file.extend_from_slice(&part.bytes);
            }
        }
        let path = dir.join(format!("t{t}.mp4"));
        std::fs::write(&path, &file).unwrap();
        let out = std::process::Command::new("ffprobe")
            .args(["-v", "error", "-count_packets", "-show_entries"])
            .arg("stream=codec_name,width,height,nb_read_packets")
            .args(["-show_entries", "packet=dts_time", "-of", "csv=p=0"])
            .arg(&path)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<&str> = text.lines().collect();
        let dts: Vec<f64> = lines.iter().filter_map(|l| l.parse().ok()).collect();
        assert!(dts.windows(2).all(|w| w[0] < w[1]), "monotonic");
        let info = lines.last().unwrap();
        assert!(info.starts_with(codec), "{info}");
        assert!(
            info.ends_with(&format!(",{expect}")),
            "{info} (expected {expect} packets)"
        );
        if t == 1 {
            assert!(info.contains("640,360"), "{info}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

proptest::proptest! {
    #[test]
    fn any_frames_and_names_never_panic(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4000)) {
        super::fuzz::fuzz_packager(&data);
    }
}

/// Millisecond timestamps (RTMP's) at 30 fps step 33 or 34 ms: 0.5 s parts
/// still hold 15 frames each, and a 2 s segment is four of them (no
/// one-frame part at its end).
#[test]
fn millisecond_timestamps_cut_whole_parts() {
    let mut s = StreamHls::new(
        &[h264_track()],
        LlhlsConfig {
            segment_target: Duration::from_secs(2),
            ..LlhlsConfig::default()
        },
        "abcd1234".into(),
        0,
    );
    for i in 0..300i64 {
        let dts = (i * 1000 / 30) * 90; // whole milliseconds, in 90 kHz
        s.push(&Frame {
            track: 1,
            pts: dts,
            dts,
            keyframe: i % 60 == 0,
            data: vec![0, 0, 0, 1, if i % 60 == 0 { 0x65 } else { 0x41 }].into(),
        });
    }
    let video = s.track(1).unwrap();
    for seg in video.segments.iter().filter(|x| x.complete) {
        let durations: Vec<f64> = seg.parts.iter().map(|p| p.duration).collect();
        assert_eq!(durations.len(), 4, "{durations:?}");
        for d in durations {
            assert!((d - 0.5).abs() < 0.0015, "{d}");
        }
    }
}

/// A chunklist is rendered once per change and shared: the same bytes
/// until a part is added.
#[test]
fn chunklists_are_rendered_once_per_change() {
    let mut s = stream(8, LlhlsConfig::default());
    let video = s.track(1).unwrap();
    let a = s.chunklist(video, false, false, 0);
    let b = s.chunklist(video, false, false, 0);
    assert_eq!(a.as_ptr(), b.as_ptr(), "rendered twice");
    assert_eq!(
        a,
        playlist::chunklist(&s, video, false, false, 0).as_bytes()
    );
    assert_ne!(s.chunklist(video, true, false, 0).as_ptr(), a.as_ptr());
    // Frames up to the next part: the text changes.
    let mut i = 0;
    loop {
        let dts = 10_000 + 8 * 90_000 + i * 3000;
        let progress = s.push(&Frame {
            track: 1,
            pts: dts,
            dts,
            keyframe: false,
            data: vec![0, 0, 0, 1, 0x41].into(),
        });
        i += 1;
        if progress.new_part {
            break;
        }
    }
    let video = s.track(1).unwrap();
    let c = s.chunklist(video, false, false, 0);
    assert_ne!(a, c);
    assert_eq!(
        c,
        playlist::chunklist(&s, video, false, false, 0).as_bytes()
    );
}

fn id3_event(text: &str, urgent: bool) -> event::Event {
    event::parse(&serde_json::json!({
        "eventFormat": "id3v2", "urgent": urgent,
        "events": [{"frameType": "TXXX", "info": "kiln", "data": text}]
    }))
    .unwrap()
}

/// An event goes into the next part of every track as an `emsg` before
/// its `moof`, at the part's decode time; an urgent one cuts the parts
/// being built at once; a cue shows in the chunklists before its part.
#[test]
fn events_ride_in_the_next_part_and_cues_in_the_playlist() {
    let all = frames(12);
    let split = 10_000 + 8 * 90_000;
    let mut s = StreamHls::new(
        &[h264_track(), aac_track()],
        LlhlsConfig::default(),
        "abcd1234".into(),
        1_700_000_000_000,
    );
    let mut later = Vec::new();
    for f in all {
        if f.dts < split {
            s.push(&f);
        } else {
            later.push(f);
        }
    }
    let parts_before = |s: &StreamHls, id: u32| {
        s.track(id)
            .unwrap()
            .segments
            .iter()
            .map(|x| x.parts.len())
            .sum::<usize>()
    };
    let (v0, a0) = (parts_before(&s, 1), parts_before(&s, 2));
    assert!(
        !s.send_event(&id3_event("hello", false)),
        "not urgent: no cut"
    );
    assert_eq!(parts_before(&s, 1), v0);
    // Urgent: both tracks' parts being built are cut now, each with the tag.
    assert!(s.send_event(&id3_event("now", true)));
    for (id, before) in [(1, v0), (2, a0)] {
        let t = s.track(id).unwrap();
        assert_eq!(parts_before(&s, id), before + 1);
        let part = t.segments.back().unwrap().parts.last().unwrap();
        let data = &part.data[..];
        assert_eq!(&data[4..8], b"emsg", "track {id}");
        let first = u32::from_be_bytes(data[..4].try_into().unwrap()) as usize;
        assert!(String::from_utf8_lossy(&data[..first]).contains(event::ID3_SCHEME));
        assert!(String::from_utf8_lossy(&data[..first]).contains("hello"));
        let second = u32::from_be_bytes(data[first..first + 4].try_into().unwrap()) as usize;
        assert_eq!(&data[first + 4..first + 8], b"emsg");
        assert!(String::from_utf8_lossy(&data[first..first + second]).contains("now"));
        assert_eq!(&data[first + second + 4..first + second + 8], b"moof");
    }
    // A cue: tagged on the next part, written before it.
    let cue = event::parse(&serde_json::json!({"eventFormat": "cue",
        "events": [{"cueType": "out", "duration": 15000}]}))
    .unwrap();
    assert!(!s.send_event(&cue));
    for f in &later {
        if s.push(f).new_part && f.track == 1 {
            break;
        }
    }
    let video = s.track(1).unwrap();
    let list = playlist::chunklist(&s, video, false, false, 0);
    let cue_at = list.find("#EXT-X-CUE-OUT:DURATION=15.000\n").expect(&list);
    assert!(list[cue_at..]
        .lines()
        .nth(1)
        .unwrap()
        .starts_with("#EXT-X-PART:"));
    check_chunklist(&list);
    // Without media no part is cut (and nothing is lost: the tag waits).
    let mut ended = stream(2, LlhlsConfig::default());
    ended.end();
    assert!(!ended.send_event(&id3_event("late", true)));
}

/// A change of codec configuration (a scheduled channel's next item
/// encoded otherwise) keeps the URLs: the changed track's next segment
/// comes after `EXT-X-DISCONTINUITY` with its own `EXT-X-MAP`, both init
/// sections are served while a segment uses them, and the discontinuity
/// is counted once it leaves the window.
#[test]
fn a_new_codec_configuration_is_a_discontinuity_with_a_new_init() {
    let config = LlhlsConfig {
        segment_target: Duration::from_secs(1),
        segment_count: 3,
        ..LlhlsConfig::default()
    };
    let mut s = stream(3, config);
    let key = s.key.clone();
    let old_init = s.track(1).unwrap().init.clone();
    let mut changed = h264_track();
    changed.config = crate::media::CodecConfig::H264 {
        sps: vec![bytes::Bytes::from_static(&[0x67, 0x42, 0, 0x1e, 0xab])],
        pps: vec![bytes::Bytes::from_static(&[0x68, 0xce])],
    };
    assert!(s.retrack(&[changed.clone(), aac_track()]));
    assert!(!s.retrack(&[changed.clone()]), "not the same set of tracks");
    // The next item, right after on the timeline.
    for f in frames_from(3, 2) {
        s.push(&f);
    }
    let t = s.track(1).unwrap();
    assert_eq!(t.init_version, 1);
    assert_ne!(t.init, old_init);
    let text = playlist::chunklist(&s, t, false, false, 0);
    check_chunklist(&text);
    let disc = text
        .find("#EXT-X-DISCONTINUITY\n")
        .expect("a discontinuity");
    let new_map = format!("#EXT-X-MAP:URI=\"init_1_1_video_{key}_llhls.m4s\"");
    assert!(
        text[disc..].starts_with(&format!("#EXT-X-DISCONTINUITY\n{new_map}")),
        "{text}"
    );
    assert!(
        text.contains(&format!("#EXT-X-MAP:URI=\"init_1_video_{key}_llhls.m4s\"")),
        "{text}"
    );
    assert_eq!(
        playlist::parse_file(&format!("init_1_1_video_{key}_llhls.m4s"), &key),
        Some(File::Init {
            track: 1,
            version: 1
        })
    );
    assert_eq!(t.init_of(0), Some(&old_init));
    // Audio did not change: no discontinuity there.
    let audio = playlist::chunklist(&s, s.track(2).unwrap(), false, false, 0);
    assert!(!audio.contains("DISCONTINUITY"), "{audio}");
    // Played on until the old segments left: counted, old init dropped.
    for f in frames_from(5, 5) {
        s.push(&f);
    }
    let t = s.track(1).unwrap();
    let text = playlist::chunklist(&s, t, false, false, 0);
    assert!(text.contains("#EXT-X-DISCONTINUITY-SEQUENCE:1"), "{text}");
    assert!(!text.contains("#EXT-X-DISCONTINUITY\n"), "{text}");
    assert!(text.contains(&new_map), "{text}");
    assert_eq!(t.init_of(0), None);
}

/// An encoder's renditions (enhanced RTMP multitrack: two video and two
/// audio tracks): every video track a variant, first first, both audio
/// tracks one group with the first the default; the second video track's
/// segments carry the first's numbers.
#[test]
fn several_video_and_audio_tracks_are_variants_and_one_audio_group() {
    let (v2, a2) = (
        Track {
            id: 3,
            ..h264_track()
        },
        Track {
            id: 4,
            ..aac_track()
        },
    );
    let mut s = StreamHls::new(
        &[h264_track(), v2, aac_track(), a2],
        LlhlsConfig::default(),
        "k".into(),
        1_700_000_000_000,
    );
    for f in frames(14) {
        let twin = Frame {
            track: if f.track == 1 { 3 } else { 4 },
            ..f.clone()
        };
        s.push(&f);
        s.push(&twin);
    }
    let master = playlist::master(&s);
    let lines: Vec<&str> = master.lines().collect();
    assert_eq!(
        lines[3],
        "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"audio\",NAME=\"audio 1\",DEFAULT=YES,AUTOSELECT=YES,URI=\"chunklist_2_audio_k_llhls.m3u8\"",
        "{master}"
    );
    assert!(
        lines[4].contains("NAME=\"audio 2\",DEFAULT=NO")
            && lines[4].contains("chunklist_4_audio_k"),
        "{master}"
    );
    assert!(
        lines[5].starts_with("#EXT-X-STREAM-INF:BANDWIDTH=")
            && lines[5].contains("RESOLUTION=640x360")
            && lines[5].ends_with("AUDIO=\"audio\""),
        "{master}"
    );
    assert_eq!(lines[6], "chunklist_1_video_k_llhls.m3u8");
    assert!(
        lines[7].contains("CODECS=\"avc1.64001e,mp4a.40.2\""),
        "{master}"
    );
    assert_eq!(lines[8], "chunklist_3_video_k_llhls.m3u8");
    assert_eq!(lines.len(), 9, "{master}");
    let msns = |id| {
        s.track(id)
            .unwrap()
            .segments
            .iter()
            .map(|g| g.msn)
            .collect::<Vec<_>>()
    };
    assert!(msns(1).len() >= 3);
    assert_eq!(msns(1), msns(3));
    assert_eq!(msns(2), msns(4));
}

/// Audio tracks with languages (an MPEG-TS source's PMT): named by them,
/// with `LANGUAGE`; a second track of one language numbered.
#[test]
fn audio_languages_name_the_group_members() {
    let lang = |c: &[u8]| crate::media::Language::parse(c);
    let tracks = [
        h264_track(),
        Track {
            label: TrackLabel {
                language: lang(b"eng"),
                ..Default::default()
            },
            ..aac_track()
        },
        Track {
            id: 4,
            label: TrackLabel {
                language: lang(b"FRA"),
                ..Default::default()
            },
            ..aac_track()
        },
        Track {
            id: 5,
            label: TrackLabel {
                language: lang(b"eng"),
                ..Default::default()
            },
            ..aac_track()
        },
        // OME's AudioMap: its name, language and characteristics.
        Track {
            id: 6,
            label: TrackLabel::new(
                Some("Director"),
                Some("en-GB"),
                Some("public.accessibility.describes-video"),
            )
            .unwrap(),
            ..aac_track()
        },
        // A name taken: numbered.
        Track {
            id: 7,
            label: TrackLabel::new(Some("Director"), None, None).unwrap(),
            ..aac_track()
        },
    ];
    let mut s = StreamHls::new(
        &tracks,
        LlhlsConfig::default(),
        "k".into(),
        1_700_000_000_000,
    );
    for f in frames(4) {
        s.push(&f);
    }
    let master = playlist::master(&s);
    let media: Vec<&str> = master
        .lines()
        .filter(|l| l.starts_with("#EXT-X-MEDIA"))
        .collect();
    assert!(
        media[0].contains("NAME=\"eng\",LANGUAGE=\"eng\",DEFAULT=YES"),
        "{master}"
    );
    assert!(
        media[1].contains("NAME=\"fra\",LANGUAGE=\"fra\",DEFAULT=NO"),
        "{master}"
    );
    assert!(
        media[2].contains("NAME=\"eng 3\",LANGUAGE=\"eng\""),
        "{master}"
    );
    assert!(
        media[3].contains(
            "NAME=\"Director\",LANGUAGE=\"en-GB\",DEFAULT=NO,AUTOSELECT=YES,CHARACTERISTICS=\"public.accessibility.describes-video\",URI="
        ),
        "{master}"
    );
    assert!(
        media[4].contains("NAME=\"Director 5\",DEFAULT=NO"),
        "{master}"
    );
    assert_eq!(lang(b"e\"g"), None);
    assert_eq!(lang(b"engl"), None);
}

/// A publisher whose keyframes fall off the parts' grid (a browser over
/// WHIP, its keyframes asked for): a keyframe closes a part that holds 85%
/// of its target, so the keyframe begins an INDEPENDENT part where a
/// player may start; no part but a segment's last ends shorter than that.
#[test]
fn a_keyframe_late_in_a_part_begins_an_independent_part() {
    let mut s = StreamHls::new(
        &[h264_track()],
        LlhlsConfig::default(),
        "abcd1234".into(),
        0,
    );
    // 30 fps, a keyframe every 43 frames (1.433 s): 0.433 s into a part
    // (0.425 s is 85% of 0.5 s).
    let mut keyframes = 0;
    for v in 0..30 * 20 {
        let key = v % 43 == 0;
        keyframes += usize::from(key);
        let mut data = vec![0, 0, 0, 20, if key { 0x65 } else { 0x41 }];
        data.extend_from_slice(&[v as u8; 19]);
        let dts = i64::from(v) * 3000;
        s.push(&Frame {
            track: 1,
            pts: dts,
            dts,
            keyframe: key,
            data: data.into(),
        });
    }
    let video = s.track(1).unwrap();
    let mut independent = 0;
    for seg in &video.segments {
        assert!(seg.parts[0].independent);
        for (i, p) in seg.parts.iter().enumerate() {
            assert!(p.duration <= 0.5 + 1e-9, "{}", p.duration);
            independent += usize::from(p.independent);
            let next_independent = seg.parts.get(i + 1).is_some_and(|q| q.independent);
            if i + 1 < seg.parts.len() && !next_independent {
                assert!(
                    p.duration >= 0.425 - 1e-9,
                    "part {i} of {}: {}",
                    seg.msn,
                    p.duration
                );
            }
        }
    }
    // Every keyframe begins a part, in a segment's middle or at its start.
    assert_eq!(independent, keyframes);
    // The first segment ends at the first keyframe a part target in.
    assert!((video.segments[0].duration() - 43.0 / 30.0).abs() < 1e-6);
}
