use super::*;
use crate::hls::fuzz::{aac, h264};
use crate::hls::{playlist, LlhlsConfig, StreamHls};
use crate::media::Frame;
use bytes::Bytes;
use std::time::Duration;

/// A stream of 1 s segments (a keyframe a second, 30 fps, AAC beside),
/// three kept in memory, with a DVR of `window` seconds.
fn stream(window: u64, seconds: i64) -> StreamHls {
    let config = LlhlsConfig {
        part_target: Duration::from_millis(500),
        segment_target: Duration::from_secs(1),
        segment_count: 3,
        part_hold_back: Duration::ZERO,
        first_segment_timeout: Duration::ZERO,
    };
    let mut s = StreamHls::new(&[h264(), aac()], config, "k".into(), 1_700_000_000_000);
    s.keep_dvr(Dvr::new(
        Path::new("/srv/dvr"),
        "k",
        Duration::from_secs(window),
        7,
    ));
    for i in 0..seconds * 30 {
        let t = i * 3000; // 90 kHz, 30 fps
        s.push(&Frame {
            track: 1,
            pts: t,
            dts: t,
            keyframe: i % 30 == 0,
            data: Bytes::from(vec![0u8; 1000]),
        });
        s.push(&Frame {
            track: 2,
            pts: t,
            dts: t,
            keyframe: true,
            data: Bytes::from(vec![1u8; 100]),
        });
    }
    s
}

#[test]
fn every_complete_segment_goes_to_disk_and_the_window_keeps_max_duration() {
    let mut s = stream(10, 30);
    let d = s.dvr.as_mut().unwrap();
    let ops: Vec<FileOp> = d.take_ops().collect();
    let puts: Vec<&PathBuf> = ops
        .iter()
        .filter_map(|o| match o {
            FileOp::PutShared { path, .. } => Some(path),
            _ => None,
        })
        .collect();
    // 29 complete video segments (the 30th is being built), and audio's.
    let video_puts = puts
        .iter()
        .filter(|p| p.parent().unwrap().ends_with("1"))
        .count();
    assert_eq!(video_puts, 29, "{puts:?}");
    let dir = format!("/srv/dvr/kiln_{}_k/1/0.m4s", std::process::id());
    assert_eq!(puts[0].to_str().unwrap(), dir);
    let v = d.track(1).unwrap();
    // Ten seconds of 1 s segments (the newest, 28, is the last).
    assert_eq!(v.segments.len(), 10);
    assert_eq!(v.segments.back().unwrap().msn, 28);
    assert_eq!(v.segments.front().unwrap().msn, 19);
    let deletes = ops
        .iter()
        .filter(
            |o| matches!(o, FileOp::Delete { path, .. } if path.parent().unwrap().ends_with("1")),
        )
        .count();
    assert_eq!(deletes, 19);
    // Every file id is this DVR's, and no read's.
    for o in &ops {
        let (FileOp::PutShared { file, .. }
        | FileOp::Delete { file, .. }
        | FileOp::Space { file, .. }) = o
        else {
            panic!("{o:?}");
        };
        assert!(d.owns(*file) && !DvrReads::owns(*file));
    }
    // Memory holds the live window only.
    assert!(s.tracks[0].segments.len() <= 4);
}

#[test]
fn chunklists_list_the_window_and_join_the_live_segments() {
    let s = stream(10, 30);
    let v = s.track(1).unwrap();
    let text = playlist::chunklist(&s, v, false, true, 0);
    assert!(text.contains("#EXT-X-MEDIA-SEQUENCE:19\n"), "{text}");
    let segs: Vec<u64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("seg_1_"))
        .map(|l| l.split('_').next().unwrap().parse().unwrap())
        .collect();
    // 19..=28 from disk and memory, no gap, no repeat.
    assert_eq!(segs, (19..=28).collect::<Vec<u64>>(), "{text}");
    // Parts only for the live end.
    assert!(!text.contains("part_1_19_"));
    assert!(text.contains("#EXT-X-PRELOAD-HINT"));
    // _HLS_rewind=NO: the live window only.
    let live = playlist::chunklist(&s, v, false, false, 0);
    let first_live = v.segments.front().unwrap().msn;
    assert!(
        live.contains(&format!("#EXT-X-MEDIA-SEQUENCE:{first_live}\n")),
        "{live}"
    );
    // A delta update skips the old ones.
    let delta = playlist::chunklist(&s, v, true, true, 0);
    assert!(delta.contains("#EXT-X-SKIP:SKIPPED-SEGMENTS="), "{delta}");
    assert!(delta.len() < text.len());
    // The cached rendering tells rewind apart.
    assert_ne!(
        s.chunklist(v, false, true, 0),
        s.chunklist(v, false, false, 0)
    );
}

#[test]
fn a_segment_that_could_not_be_written_ends_the_window_there() {
    let mut s = stream(60, 20);
    let d = s.dvr.as_mut().unwrap();
    let ops: Vec<FileOp> = d.take_ops().collect();
    let put_of = |msn: u64| {
        ops.iter()
            .find_map(|o| match o {
                FileOp::PutShared { file, path, .. } if path.ends_with(format!("1/{msn}.m4s")) => {
                    Some(*file)
                }
                _ => None,
            })
            .unwrap()
    };
    d.on_written(put_of(3), None);
    assert!(d.track(1).unwrap().segment(3).unwrap().written);
    d.on_written(put_of(5), Some("No space left on device"));
    let v = d.track(1).unwrap();
    assert_eq!(v.segments.front().unwrap().msn, 6);
    assert!(v.segment(5).is_none() && v.segment(2).is_none());
    let deleted = d
        .take_ops()
        .filter(|o| matches!(o, FileOp::Delete { .. }))
        .count();
    // Segments 0 to 5 of the video track.
    assert_eq!(deleted, 6);
}

#[test]
fn reads_are_shared_bounded_per_address_and_cached() {
    let mut r = DvrReads::default();
    let a: IpAddr = "192.0.2.1".parse().unwrap();
    let b: IpAddr = "192.0.2.2".parse().unwrap();
    for msn in 0..MAX_READS_PER_ADDRESS as u64 {
        r.start((1, 1, msn), format!("/d/{msn}.m4s").into(), a)
            .unwrap();
    }
    // The same segment again costs nothing; a ninth from `a` waits.
    r.start((1, 1, 0), "/d/0.m4s".into(), a).unwrap();
    assert_eq!(
        r.start((1, 1, 99), "/d/99.m4s".into(), a),
        Err(ReadRefused::Busy)
    );
    r.start((1, 1, 99), "/d/99.m4s".into(), b).unwrap();
    let ops: Vec<FileOp> = r.take_ops().collect();
    assert_eq!(ops.len(), MAX_READS_PER_ADDRESS + 1);
    let FileOp::Read { file, .. } = &ops[0] else {
        panic!()
    };
    assert!(DvrReads::owns(*file));
    let t0 = std::time::Instant::now();
    assert_eq!(
        r.on_read(*file, Ok(Bytes::from_static(b"seg").into()), t0),
        Some(1)
    );
    assert_eq!(
        r.cached(&(1, 1, 0)),
        Some(Some(&Bytes::from_static(b"seg").into()))
    );
    // A failed read is remembered as such.
    let FileOp::Read { file, .. } = &ops[1] else {
        panic!()
    };
    r.on_read(*file, Err("gone".into()), t0);
    assert_eq!(r.cached(&(1, 1, 1)), Some(None));
    // The cache keeps CACHE_BYTES at most (the newest).
    for (i, op) in ops[2..].iter().enumerate() {
        let FileOp::Read { file, .. } = op else {
            panic!()
        };
        let at = t0 + Duration::from_secs(1);
        r.on_read(
            *file,
            Ok(Bytes::from(vec![0u8; CACHE_BYTES / 4 + i]).into()),
            at,
        );
    }
    assert!(r.cached_bytes() <= CACHE_BYTES);
    assert_eq!(r.cached(&(1, 1, 0)), None);
    // Kept CACHE_TTL at most: then the bytes go (and are counted).
    let held = r.cached_bytes();
    assert_eq!(
        r.expire(t0 + CACHE_TTL),
        (0, Some(t0 + Duration::from_secs(1) + CACHE_TTL))
    );
    let (freed, next) = r.expire(t0 + Duration::from_secs(1) + CACHE_TTL);
    assert_eq!((freed, next, r.cached_bytes()), (held, None, 0));
    // A stream that went: its reads are forgotten.
    r.forget(1);
    assert_eq!(r.cached_bytes(), 0);
}
