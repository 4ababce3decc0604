use super::*;
use crate::media::{Codec, CodecConfig, VideoParams};
use bytes::Bytes;

const OME_EXAMPLE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Multiplex>
    <OutputStream><Name>stream</Name></OutputStream>
    <SourceStreams>
        <SourceStream>
            <Name>tv1</Name>
            <Url>stream://default/app/tv1</Url>
            <TrackMap>
                <Track><SourceTrackName>bypass_video</SourceTrackName><NewTrackName>tv1_video</NewTrackName></Track>
                <Track><SourceTrackName>bypass_audio</SourceTrackName><NewTrackName>tv1_audio</NewTrackName><BitrateConf>128000</BitrateConf></Track>
            </TrackMap>
        </SourceStream>
        <SourceStream>
            <Name>tv2</Name>
            <Url>stream://default/app/tv2</Url>
            <TrackMap>
                <Track><SourceTrackName>video</SourceTrackName><NewTrackName>tv2_video</NewTrackName></Track>
            </TrackMap>
        </SourceStream>
    </SourceStreams>
    <Playlists>
        <Playlist>
            <Name>LLHLS ABR</Name>
            <FileName>abr</FileName>
            <Rendition><Name>1080p</Name><Video>tv1_video</Video><Audio>tv1_audio</Audio></Rendition>
            <Rendition><Name>720p</Name><Video>tv2_video</Video><Audio>tv1_audio</Audio></Rendition>
        </Playlist>
    </Playlists>
</Multiplex>"#;

fn video(id: u32, w: u32) -> Track {
    Track {
        id,
        codec: Codec::H264,
        config: CodecConfig::None,
        video: Some(VideoParams {
            width: w,
            height: w * 9 / 16,
            framerate: 30.0,
        }),
        audio: None,
        bitrate: 0,
        label: Default::default(),
    }
}

fn audio(id: u32) -> Track {
    Track {
        id,
        codec: Codec::Aac,
        config: CodecConfig::None,
        video: None,
        audio: None,
        bitrate: 0,
        label: Default::default(),
    }
}

fn frame(track: u32, dts: i64) -> Frame {
    Frame {
        track,
        pts: dts,
        dts,
        keyframe: true,
        data: Bytes::from_static(b"x"),
    }
}

#[test]
fn omes_example_file_reads_and_checks() {
    let mut s = MuxSpec::from_xml(OME_EXAMPLE).unwrap();
    s.vhost = "default".into();
    s.app = "app".into();
    assert_eq!(s.name, "stream");
    assert_eq!(s.check().unwrap().len(), 2);
    assert_eq!(s.source_streams[0].track_map[1].bitrate_conf, Some(128_000));
    let json = serde_json::to_string(&s).unwrap();
    assert_eq!(serde_json::from_str::<MuxSpec>(&json).unwrap(), s);
    // A rendition naming a track no map makes is refused.
    let mut bad = s.clone();
    bad.playlists[0].renditions[0].video = Some("nope".into());
    assert!(bad.check().unwrap_err().contains("nope"));
    let mut bad = s.clone();
    bad.source_streams[0].url = "stream://default/app/stream".into();
    assert!(bad.check().unwrap_err().contains("itself"));
    let e = MuxSpec::from_xml("<Multiplex><OutputStream/></Multiplex>").unwrap_err();
    assert_eq!((e.line, e.column), (1, 12), "{e}");
}

#[test]
fn sources_map_start_and_leave() {
    let s = MuxSpec::from_xml(OME_EXAMPLE).unwrap();
    let mut m = Multiplexer::new(s);
    let names = |t: &Track, n: &[&str]| {
        (
            t.clone(),
            n.iter().map(|x| x.to_string()).collect::<Vec<_>>(),
        )
    };
    // A source without the named track cannot be used, and says which.
    let video_only = [names(&video(1, 1920), &["video", "bypass_video"])];
    assert_eq!(m.source_tracks(0, &video_only), (false, false));
    let missing = m.missing_track(0, &video_only).unwrap();
    assert!(missing.contains("audio"), "{missing}");
    let tv1 = [
        names(&video(1, 1920), &["video", "bypass_video"]),
        names(&audio(2), &["audio", "bypass_audio"]),
    ];
    assert_eq!(m.source_tracks(0, &tv1), (true, true));
    assert!(!m.ready());
    assert_eq!(
        m.source_tracks(1, &[names(&video(7, 1280), &["video"])]),
        (true, true)
    );
    assert!(m.ready());
    let ids: Vec<u32> = m.tracks().iter().map(|t| t.id).collect();
    assert_eq!(ids, [1, 2, 3]);
    assert_eq!(m.tracks()[1].bitrate, 128_000);
    // Frames: each source onto the channel's clock at its first frame.
    let f = m.frame(0, &frame(1, 500_000), 90_000).unwrap();
    assert_eq!((f.track, f.dts), (1, 90_000));
    // tv2 by its arrival.
    let f = m.frame(1, &frame(7, 500_000), 99_000).unwrap();
    assert_eq!((f.track, f.dts), (3, 99_000));
    assert!(m.frame(1, &frame(99, 0), 0).is_none(), "unmapped track");
    // tv2 stops: its rendition leaves the playlist, and comes back.
    let live = |m: &Multiplexer| {
        m.playlists()[0]
            .renditions
            .iter()
            .map(|r| r.live)
            .collect::<Vec<_>>()
    };
    assert_eq!(live(&m), [true, true]);
    m.source_ended(1);
    assert_eq!(live(&m), [true, false]);
    assert_eq!(
        m.source_tracks(1, &[names(&video(7, 1280), &["video"])]),
        (true, false)
    );
    assert_eq!(live(&m), [true, true]);
    // Back with times from 0 again: placed by its arrival, still forward.
    let f = m.frame(1, &frame(7, 0), 900_000).unwrap();
    assert_eq!(f.dts, 900_000);
    assert!(
        m.frame(1, &frame(7, 0), 300_000).is_none(),
        "not after the last"
    );
}
