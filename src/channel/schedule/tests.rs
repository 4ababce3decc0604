use super::*;

const OME_EXAMPLE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Schedule>
    <Stream>
        <Name>tv1</Name>
        <BypassTranscoder>false</BypassTranscoder>
        <VideoTrack>true</VideoTrack>
        <AudioTrack>true</AudioTrack>
        <AudioMap>
            <Item><Name>English</Name><Language>en</Language></Item>
        </AudioMap>
    </Stream>
    <FallbackProgram>
        <Item url="file://sample.mp4" start="0" duration="60000" />
    </FallbackProgram>
    <Program name="1" scheduled="2023-09-27T13:21:15.123+09:00" repeat="true">
        <Item url="stream://default/app/stream1" duration="60000" />
    </Program>
    <Program name="2" scheduled="2022-03-14T15:10:0.0+09:00" repeat="true">
        <Item url="file://sample.mp4" start="0" duration="60000" />
        <Item url="stream://default/app/stream1" duration="60000" />
        <Item url="file://sample.mp4" start="60000" duration="120000" />
    </Program>
</Schedule>"#;

#[test]
fn omes_example_file_reads() {
    let s = ScheduleSpec::from_xml(OME_EXAMPLE, "tv1").unwrap();
    assert_eq!(s.stream.name, "tv1");
    assert_eq!(s.programs.len(), 2);
    assert_eq!(s.programs[1].items[2].start, 60000);
    assert_eq!(s.stream.audio_map[0].language.as_deref(), Some("en"));
    let plan = s.plan().unwrap();
    // Sorted by time: program 2 (2022) first.
    assert_eq!(plan.programs[0].name, "2");
    // The API's JSON round-trips.
    let json = serde_json::to_string(&s).unwrap();
    let back: ScheduleSpec = serde_json::from_str(&json).unwrap();
    assert_eq!(back, s);
}

#[test]
fn bad_files_name_line_and_column() {
    let e = ScheduleSpec::from_xml("<Schedule><Stream/><Program scheduled=\"nope\"><Item url=\"file://a.mp4\"/></Program></Schedule>", "x").unwrap_err();
    assert_eq!((e.line, e.column), (1, 20), "{e}");
    assert!(e.message.contains("ISO 8601"), "{e}");
    let e = ScheduleSpec::from_xml("<Schedule>\n<Stream/>\n<FallbackProgram><Item url=\"file://../x\"/></FallbackProgram></Schedule>", "x").unwrap_err();
    assert_eq!(e.line, 3, "{e}");
    let e = ScheduleSpec::from_xml("<Schedule><Stream/><Typo/></Schedule>", "x").unwrap_err();
    assert!(e.message.contains("<Typo>"), "{e}");
    assert!(ScheduleSpec::from_xml("<Mux/>", "x").is_err());
    assert!(
        ScheduleSpec::from_xml("<Schedule><Stream/></Schedule>", "x").is_err(),
        "nothing to play"
    );
}

fn item(url: &str, duration: i64) -> Item {
    Item {
        url: url.into(),
        start: 0,
        duration,
    }
}

fn spec(programs: Vec<Program>, fallback: Vec<Item>) -> ScheduleSpec {
    ScheduleSpec {
        vhost: "default".into(),
        app: "app".into(),
        name: "ch".into(),
        stream: StreamSection {
            name: "ch".into(),
            bypass_transcoder: true,
            video_track: true,
            audio_track: true,
            audio_map: vec![],
            error_tolerance_duration_ms: None,
        },
        fallback_program: Some(FallbackProgram { items: fallback }),
        programs,
    }
}

fn at(ms: i64) -> String {
    crate::clock::format_iso8601(ms, 0)
}

/// A programme of one live input since the epoch, and a fallback file.
fn live_with_fallback() -> ScheduleSpec {
    spec(
        vec![Program {
            name: "live".into(),
            scheduled: at(0),
            repeat: true,
            items: vec![item("stream://default/app/input", -1)],
        }],
        vec![item("file://fallback.mp4", -1)],
    )
}

#[test]
fn live_input_with_fallback() {
    let s = live_with_fallback();
    let mut sch = Scheduler::new(s.plan().unwrap());
    let down = |_: &StreamUrl| false;
    let up = |_: &StreamUrl| true;
    // The input is not live: the fallback plays.
    let c = sch.poll(1000, &down).unwrap().unwrap();
    assert_eq!((c.program, c.item), (None, 0));
    assert_eq!(sch.poll(1500, &down), None, "no change");
    // It goes live: the programme.
    let c = sch.poll(2000, &up).unwrap().unwrap();
    assert_eq!(c.program, Some(0));
    // It stops: fallback again, then back.
    sch.ended(3000);
    let c = sch.poll(3000, &down).unwrap().unwrap();
    assert_eq!(c.program, None);
    // The fallback file ends: it plays again from its start (repeat).
    sch.ended(4000);
    let c = sch.poll(4000, &down).unwrap().unwrap();
    assert_eq!((c.program, c.item, c.since_ms), (None, 0, 4000));
    let c = sch.poll(5000, &up).unwrap().unwrap();
    assert_eq!(c.program, Some(0));
}

#[test]
fn programmes_play_at_their_times_and_items_in_order() {
    let s = spec(
        vec![
            Program {
                name: "a".into(),
                scheduled: at(10_000),
                repeat: false,
                items: vec![item("file://a.mp4", 3000), item("file://b.mp4", 3000)],
            },
            Program {
                name: "b".into(),
                scheduled: at(30_000),
                repeat: false,
                items: vec![item("file://c.mp4", -1)],
            },
        ],
        vec![item("file://idle.mp4", -1)],
    );
    let mut sch = Scheduler::new(s.plan().unwrap());
    let no = |_: &StreamUrl| false;
    let url = |sch: &Scheduler| sch.playing().map(|(_, i)| i.url.clone());
    sch.poll(0, &no);
    assert_eq!(url(&sch).as_deref(), Some("file://idle.mp4"));
    assert_eq!(sch.next_change(0), Some(10_000));
    sch.poll(10_000, &no);
    assert_eq!(url(&sch).as_deref(), Some("file://a.mp4"));
    sch.poll(13_000, &no);
    assert_eq!(url(&sch).as_deref(), Some("file://b.mp4"));
    // Played through, no repeat: the fallback until the next programme.
    sch.poll(16_000, &no);
    assert_eq!(url(&sch).as_deref(), Some("file://idle.mp4"));
    sch.poll(30_000, &no);
    assert_eq!(url(&sch).as_deref(), Some("file://c.mp4"));
    // A file that fails: fallback, tried again after RETRY_MS.
    sch.failed(31_000);
    sch.poll(31_000, &no);
    assert_eq!(url(&sch).as_deref(), Some("file://idle.mp4"));
    sch.poll(31_000 + RETRY_MS, &no);
    assert_eq!(url(&sch).as_deref(), Some("file://c.mp4"));
}

#[test]
fn a_fallback_that_fails_everywhere_leaves_nothing_playing_and_no_busy_loop() {
    let s = spec(
        vec![],
        vec![item("file://x.mp4", -1), item("file://y.mp4", -1)],
    );
    let mut sch = Scheduler::new(s.plan().unwrap());
    let no = |_: &StreamUrl| false;
    assert!(sch.poll(0, &no).unwrap().is_some());
    sch.failed(0);
    assert!(sch.poll(0, &no).unwrap().is_some(), "the second item");
    sch.failed(0);
    assert_eq!(sch.poll(0, &no), Some(None));
    assert_eq!(sch.poll(100, &no), None);
    assert!(sch.poll(RETRY_MS, &no).unwrap().is_some());
}

#[test]
fn a_live_item_that_cannot_play_falls_back_and_is_tried_again() {
    let s = live_with_fallback();
    let mut sch = Scheduler::new(s.plan().unwrap());
    let up = |_: &StreamUrl| true;
    assert_eq!(sch.poll(0, &up).unwrap().unwrap().program, Some(0));
    // It is live but lacks a track: fallback, then the programme again.
    sch.failed(100);
    assert_eq!(sch.poll(100, &up).unwrap().unwrap().program, None);
    assert_eq!(sch.poll(100 + RETRY_MS - 1, &up), None);
    assert_eq!(
        sch.poll(100 + RETRY_MS, &up).unwrap().unwrap().program,
        Some(0)
    );
}
