//! Push sessions and the manager in memory: a simulated destination (kiln's
//! own RTMP server core, or a datagram sink), a wire that takes as much as
//! the test says, and stepped time. No sockets, no sleeps.

use super::feed::Feed;
use super::manager::{After, PushManager};
use super::request::{validate_start, Destination, StartPushRequest};
use super::session::{
    queue_bytes_for, PushSession, Report, StartMedia, Wire, CONNECT_TIMEOUT, STALL_TIMEOUT,
};
use super::task::{PushState, PushTask, TaskKey};
use crate::clock::Now;
use crate::media::{Frame, Track, TICKS_PER_MS};
use crate::rtmp::flv::tests::{aac_track, h264_track};
use crate::rtmp::server::{ServerConfig, ServerEvent, ServerSession};
use crate::state::streams::{IngestOutput, SourceType};
use crate::state::Registry;
use bytes::Bytes;
use proptest::prelude::*;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const PEER: &str = "192.0.2.1:1935";

fn peer() -> SocketAddr {
    PEER.parse().unwrap()
}

fn key(id: &str) -> TaskKey {
    TaskKey {
        vhost: "default".into(),
        app: "app".into(),
        id: id.into(),
    }
}

fn destination(body: &str) -> (super::request::PushSpec, Destination) {
    let req: StartPushRequest = serde_json::from_str(body).unwrap();
    validate_start(req, "default", "app", 0, &|_| false).unwrap()
}

fn rtmp_destination() -> Destination {
    destination(r#"{"id":"p","stream":{"name":"s"},"protocol":"rtmp","url":"rtmp://192.0.2.1/live","streamKey":"k"}"#).1
}

/// The RTMP tcUrl of [`rtmp_destination`].
const RTMP_URL: &str = "rtmp://192.0.2.1/live";

fn tracks() -> Vec<Track> {
    vec![h264_track(), aac_track()]
}

/// Frame `i` of a 30 fps stream with audio between video frames; a
/// keyframe every 30 video frames; sizes vary (some over one RTMP chunk).
fn frame(i: u32) -> Frame {
    let video = i % 2 == 0;
    let n = i / 2;
    let size = if video {
        if n % 30 == 0 {
            70_000 + (n as usize % 7) * 1000
        } else {
            300 + (n as usize * 37) % 3000
        }
    } else {
        200
    };
    let mut data = vec![0u8; size];
    // AVCC: one NAL unit of the rest; a marker to match frames by.
    data[..4].copy_from_slice(&((size - 4) as u32).to_be_bytes());
    data[4] = if video && n % 30 == 0 { 0x65 } else { 0x41 };
    data[5..9].copy_from_slice(&i.to_be_bytes());
    let t = 90_000 + i64::from(n) * 3000;
    Frame {
        track: if video { 1 } else { 2 },
        pts: t + if video { 6000 } else { 0 },
        dts: t,
        keyframe: !video || n % 30 == 0,
        data: Bytes::from(data),
    }
}

fn start(dest: &Destination, feed: &Feed, now: Instant) -> PushSession {
    let tracks = tracks();
    PushSession::new(
        key("p"),
        dest,
        RTMP_URL,
        "k",
        StartMedia {
            stream: 1,
            selected: tracks.iter().map(|t| t.id).collect(),
            tracks,
            from: feed.gop_start(),
        },
        queue_bytes_for(1),
        now,
    )
}

/// A wire that takes up to `budget` bytes per call (None: everything)
/// into `bytes`.
#[derive(Default)]
struct SimWire {
    bytes: Vec<u8>,
    budget: Option<usize>,
    datagrams: Vec<Vec<u8>>,
    refuse: bool,
    closed_write: bool,
}

impl Wire for SimWire {
    fn write(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut room = self.budget.unwrap_or(usize::MAX);
        let mut n = 0;
        for b in bufs {
            let take = b.len().min(room);
            self.bytes.extend_from_slice(&b[..take]);
            n += take;
            room -= take;
            if room == 0 {
                break;
            }
        }
        Ok(n)
    }

    fn send(&mut self, datagrams: &[&[u8]]) -> io::Result<usize> {
        if self.refuse {
            return Err(io::ErrorKind::ConnectionRefused.into());
        }
        let n = datagrams.len().min(self.budget.unwrap_or(usize::MAX));
        if n == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.datagrams
            .extend(datagrams[..n].iter().map(|d| d.to_vec()));
        Ok(n)
    }

    fn close_write(&mut self) {
        self.closed_write = true;
    }
}

/// The destination: kiln's RTMP server core, accepting or refusing.
struct SimRtmp {
    server: ServerSession,
    refuse: Option<&'static str>,
    frames: Vec<Frame>,
    unpublished: bool,
}

impl SimRtmp {
    fn new(refuse: Option<&'static str>) -> Self {
        SimRtmp {
            server: ServerSession::new(ServerConfig::default()),
            refuse,
            frames: Vec::new(),
            unpublished: false,
        }
    }

    /// Takes what the wire carried; answers go back to the session.
    fn exchange(&mut self, wire: &mut SimWire, s: &mut PushSession, now: Instant) {
        let data = std::mem::take(&mut wire.bytes);
        if data.is_empty() {
            return;
        }
        self.server.handle_input(&data).unwrap();
        while let Some(ev) = self.server.poll_event() {
            match ev {
                ServerEvent::Connect { .. } => self.server.accept_connect(),
                ServerEvent::Publish { .. } => match self.refuse {
                    Some(why) => self.server.reject_publish(why),
                    None => self.server.accept_publish(),
                },
                ServerEvent::Frame(f) => self.frames.push(f),
                ServerEvent::Unpublish => self.unpublished = true,
                _ => {}
            }
        }
        let answer = self.server.pending_output().to_vec();
        self.server.consume_output(answer.len());
        if !answer.is_empty() {
            s.handle_input(&answer, now);
        }
    }
}

/// Runs the session against the destination until neither has anything
/// to say.
fn settle(s: &mut PushSession, feed: &Feed, dest: &mut SimRtmp, wire: &mut SimWire, now: Instant) {
    for _ in 0..10_000 {
        s.poll_transmit(feed, now, wire);
        if wire.bytes.is_empty() {
            return;
        }
        dest.exchange(wire, s, now);
    }
    panic!("no end to the exchange");
}

fn reports(s: &mut PushSession) -> Vec<Report> {
    std::iter::from_fn(|| s.poll_report()).collect()
}

fn marker(f: &Frame) -> u32 {
    u32::from_be_bytes([f.data[5], f.data[6], f.data[7], f.data[8]])
}

/// Publishes frames 0..n through a session to a simulated RTMP server,
/// the wire taking `budgets` bytes per call in turn.
fn rtmp_run(n: u32, budgets: &[usize]) -> (Vec<Frame>, PushSession) {
    let t0 = Instant::now();
    let mut feed = Feed::new(&tracks(), &[]);
    let dest_spec = rtmp_destination();
    let mut s = start(&dest_spec, &feed, t0);
    feed.enable_rtmp();
    let mut dest = SimRtmp::new(None);
    let mut wire = SimWire::default();
    s.handle_connected(peer(), t0);
    settle(&mut s, &feed, &mut dest, &mut wire, t0);
    assert_eq!(reports(&mut s), vec![Report::Pushing]);
    for i in 0..n {
        feed.push(frame(i));
        s.on_frames(&feed, t0);
        wire.budget = Some(budgets[i as usize % budgets.len()]);
        s.poll_transmit(&feed, t0, &mut wire);
        dest.exchange(&mut wire, &mut s, t0);
    }
    wire.budget = None;
    settle(&mut s, &feed, &mut dest, &mut wire, t0);
    (dest.frames, s)
}

#[test]
fn rtmp_delivers_every_frame_rebased_through_shared_bodies() {
    let (got, s) = rtmp_run(400, &[usize::MAX]);
    assert_eq!(got.len(), 400);
    assert_eq!(s.dropped_frames(), 0);
    for (i, f) in got.iter().enumerate() {
        let want = frame(i as u32);
        assert_eq!(marker(f), i as u32);
        assert_eq!(f.data, want.data);
        assert_eq!(f.keyframe, want.keyframe);
        // Rebased to the first frame; composition offset kept.
        assert_eq!(f.dts, (want.dts - 90_000) / TICKS_PER_MS * TICKS_PER_MS);
        assert_eq!(
            f.pts - f.dts,
            (want.pts - want.dts) / TICKS_PER_MS * TICKS_PER_MS
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// A slow reader (any write sizes, down to a byte) gets every frame
    /// whole and in order: a message cut short is finished before the next.
    #[test]
    fn rtmp_short_writes_never_split_a_message(
        budgets in prop::collection::vec(prop_oneof![1usize..40, 40usize..5000, 5000usize..200_000], 1..20),
    ) {
        let (got, s) = rtmp_run(120, &budgets);
        prop_assert_eq!(s.dropped_frames(), 0);
        let markers: Vec<u32> = got.iter().map(marker).collect();
        prop_assert_eq!(markers, (0..120).collect::<Vec<_>>());
    }
}

#[test]
fn a_refused_publish_ends_the_session_with_the_reason() {
    let t0 = Instant::now();
    let feed = Feed::new(&tracks(), &[]);
    let mut s = start(&rtmp_destination(), &feed, t0);
    let mut dest = SimRtmp::new(Some("stream key unknown"));
    let mut wire = SimWire::default();
    s.handle_connected(peer(), t0);
    settle(&mut s, &feed, &mut dest, &mut wire, t0);
    assert!(s.is_done());
    assert_eq!(
        reports(&mut s),
        vec![Report::Ended(Some(
            "the destination refused: stream key unknown".into()
        ))]
    );
}

#[test]
fn a_destination_that_never_answers_times_out_connecting() {
    let t0 = Instant::now();
    let feed = Feed::new(&tracks(), &[]);
    let mut s = start(&rtmp_destination(), &feed, t0);
    s.handle_connected(peer(), t0);
    let mut wire = SimWire::default();
    s.poll_transmit(&feed, t0, &mut wire); // C0 + C1, never answered
    assert_eq!(s.poll_timeout(), Some(t0 + CONNECT_TIMEOUT));
    s.handle_timeout(t0 + CONNECT_TIMEOUT - Duration::from_millis(1));
    assert!(!s.is_done());
    s.handle_timeout(t0 + CONNECT_TIMEOUT);
    assert_eq!(
        reports(&mut s),
        vec![Report::Ended(Some(
            "the destination did not accept the stream within 10 s".into()
        ))]
    );
}

/// An RTMP session pushing to a simulated destination, with the given
/// bound on how far behind it may fall.
fn pushing_rtmp(queue_bytes: usize) -> (Instant, Feed, PushSession, SimRtmp, SimWire) {
    let t0 = Instant::now();
    let mut feed = Feed::new(&tracks(), &[]);
    let mut s = start(&rtmp_destination(), &feed, t0);
    feed.enable_rtmp();
    s.set_queue_bytes(queue_bytes);
    let mut dest = SimRtmp::new(None);
    let mut wire = SimWire::default();
    s.handle_connected(peer(), t0);
    settle(&mut s, &feed, &mut dest, &mut wire, t0);
    assert_eq!(reports(&mut s), vec![Report::Pushing]);
    (t0, feed, s, dest, wire)
}

#[test]
fn a_stalled_destination_fails_after_30_s_and_drops_meanwhile() {
    let (t0, mut feed, mut s, _, mut wire) = pushing_rtmp(1_000_000);
    // The socket takes nothing from now on.
    wire.budget = Some(0);
    let mut now = t0;
    for i in 0..1800 {
        now = t0 + Duration::from_millis(u64::from(i) * 17);
        feed.push(frame(i));
        s.on_frames(&feed, now);
        s.poll_transmit(&feed, now, &mut wire);
        feed.trim(s.position());
        // Bounded by the session's bound plus the last GOP.
        assert!(feed.bytes_from(feed.gop_start().min(s.position())) < 1_000_000 + 2_500_000);
        if let Some(at) = s.poll_timeout() {
            if at <= now {
                s.handle_timeout(now);
            }
        }
        if s.is_done() {
            break;
        }
    }
    assert!(s.dropped_frames() > 0);
    assert!(now >= t0 + STALL_TIMEOUT);
    assert_eq!(
        reports(&mut s),
        vec![Report::Ended(Some(
            "the destination took no data for 30 s".into()
        ))]
    );
}

#[test]
fn a_slow_reader_skips_to_a_keyframe_and_plays_on() {
    let (t0, mut feed, mut s, mut dest, mut wire) = pushing_rtmp(300_000);
    for i in 0..600 {
        feed.push(frame(i));
        s.on_frames(&feed, t0);
        // 100 frames of nothing, then a reader that keeps up.
        wire.budget = Some(if (100..300).contains(&i) {
            0
        } else {
            usize::MAX
        });
        s.poll_transmit(&feed, t0, &mut wire);
        dest.exchange(&mut wire, &mut s, t0);
    }
    assert!(s.dropped_frames() > 0);
    let got: Vec<u32> = dest.frames.iter().map(marker).collect();
    // In order, and after the gap the first video frame is a keyframe.
    assert!(got.windows(2).all(|w| w[0] < w[1]));
    let gap = got.windows(2).position(|w| w[1] - w[0] > 1).unwrap();
    let resumed = dest.frames[gap + 1..]
        .iter()
        .find(|f| f.track == 1)
        .unwrap();
    assert!(resumed.keyframe);
    assert_eq!(*got.last().unwrap(), 599);
}

#[test]
fn stop_during_connect_reports_nothing() {
    let t0 = Instant::now();
    let feed = Feed::new(&tracks(), &[]);
    let mut s = start(&rtmp_destination(), &feed, t0);
    s.close(true, &feed, t0);
    assert!(s.is_done());
    assert!(reports(&mut s).is_empty());
    // The connect completing later changes nothing.
    s.handle_connected(peer(), t0);
    assert!(s.is_done());
}

#[test]
fn a_clean_rtmp_close_unpublishes_then_ends_the_write_side() {
    let (_, _) = rtmp_run(0, &[usize::MAX]);
    let t0 = Instant::now();
    let feed = Feed::new(&tracks(), &[]);
    let mut s = start(&rtmp_destination(), &feed, t0);
    let mut dest = SimRtmp::new(None);
    let mut wire = SimWire::default();
    s.handle_connected(peer(), t0);
    settle(&mut s, &feed, &mut dest, &mut wire, t0);
    reports(&mut s);
    s.close(false, &feed, t0);
    settle(&mut s, &feed, &mut dest, &mut wire, t0);
    assert!(dest.unpublished);
    assert!(wire.closed_write);
    assert_eq!(reports(&mut s), vec![Report::Ended(None)]);
    s.handle_peer_closed();
    assert!(s.is_done());
}

#[test]
fn udp_sends_whole_datagrams_carries_on_when_refused_and_drains_on_close() {
    let t0 = Instant::now();
    let (_, dest) = destination(
        r#"{"id":"u","stream":{"name":"s"},"protocol":"mpegts","url":"udp://192.0.2.1:5000"}"#,
    );
    let mut feed = Feed::new(&tracks(), &[]);
    let mut s = start(&dest, &feed, t0);
    s.handle_connected(peer(), t0);
    assert_eq!(reports(&mut s), vec![Report::Pushing]);
    let mut wire = SimWire::default();
    for i in 0..60 {
        let now = t0 + Duration::from_millis(u64::from(i) * 17);
        feed.push(frame(i));
        s.on_frames(&feed, now);
        wire.refuse = (20..30).contains(&i);
        s.poll_transmit(&feed, now, &mut wire);
    }
    assert!(s.refused_datagrams() > 0);
    assert!(wire
        .datagrams
        .iter()
        .all(|d| d.len() == 1316 && d[0] == 0x47));
    wire.refuse = false;
    s.close(false, &feed, t0 + Duration::from_secs(1));
    s.poll_transmit(&feed, t0 + Duration::from_secs(1), &mut wire);
    assert!(s.is_done());
    // The tail went out unpaced: a whole number of TS packets.
    assert!(wire.datagrams.iter().all(|d| d.len() % 188 == 0));
    assert_eq!(reports(&mut s), vec![Report::Ended(None)]);
}

// --- the manager, against a registry ------------------------------------------

struct World {
    reg: Registry,
    pushes: PushManager,
    t0: Instant,
}

impl World {
    fn new() -> Self {
        let text = include_str!("../../server.xml.example");
        let loaded = crate::config::parse(std::path::Path::new("server.xml"), text, &|_| None)
            .unwrap_or_else(|e| panic!("{e:?}"));
        World {
            reg: loaded.config.registry(),
            pushes: PushManager::new(7),
            t0: Instant::now(),
        }
    }

    fn now(&self, ms: u64) -> Now {
        Now {
            instant: self.t0 + Duration::from_millis(ms),
            unix_ms: 1_700_000_000_000 + ms as i64,
        }
    }

    fn add_push(&mut self, id: &str) {
        let (spec, dest) = destination(&format!(
            r#"{{"id":"{id}","stream":{{"name":"s"}},"protocol":"rtmp","url":"rtmp://192.0.2.1/live","streamKey":"k"}}"#
        ));
        self.pushes.tasks.insert(PushTask::new(spec, dest));
    }

    fn publish(&mut self, ms: u64) -> u64 {
        let id = self
            .reg
            .streams
            .start("default", "app", "s", SourceType::Rtmp, 1, 0)
            .unwrap();
        self.reg.streams.set_tracks(id, tracks());
        let out = IngestOutput {
            started: Some(id),
            ..Default::default()
        };
        let now = self.now(ms);
        self.pushes.on_ingest(&out, &mut self.reg, now);
        id
    }

    fn end(&mut self, id: u64, ms: u64) {
        self.reg.streams.end(id);
        let out = IngestOutput {
            ended: Some(id),
            ..Default::default()
        };
        let now = self.now(ms);
        self.pushes.on_ingest(&out, &mut self.reg, now);
    }

    fn state(&self, id: &str) -> PushState {
        self.pushes.tasks.get("default", "app", id).unwrap().state
    }

    /// Lets every woken session act (connects fail when `refuse`), and
    /// takes their reports; returns how many sessions finished.
    fn drive(&mut self, ms: u64, refuse: bool) -> usize {
        let now = self.now(ms);
        let mut finished = 0;
        while let Some(new) = self.pushes.poll_new() {
            self.pushes.attach(new.id, 1000 + new.id);
            let s = self.pushes.session_mut(new.id).unwrap();
            if refuse {
                s.handle_connect_failed("cannot connect: refused".into());
            } else {
                s.handle_connected(peer(), now.instant);
            }
            self.pushes.wake(new.id);
        }
        let mut woken = Vec::new();
        self.pushes.take_woken(&mut woken);
        for (id, _) in woken {
            self.pushes
                .transmit(id, now.instant, &mut SimWire::default());
            if let After::Finished(_) = self.pushes.after(id, now) {
                finished += 1;
            }
        }
        finished
    }
}

#[test]
fn a_task_waits_for_its_stream_pushes_and_returns_to_ready_when_it_ends() {
    let mut w = World::new();
    w.add_push("a");
    let now = w.now(0);
    w.pushes.reconcile(&mut w.reg, now);
    assert_eq!(w.state("a"), PushState::Ready);
    assert!(w.pushes.is_empty());
    let id = w.publish(10);
    assert_eq!(w.state("a"), PushState::Connecting);
    w.drive(10, false);
    assert_eq!(w.pushes.len(), 1);
    w.end(id, 20);
    w.drive(20, false);
    assert_eq!(w.state("a"), PushState::Ready);
    // The stream returns: a new session, while the old one may still be
    // closing cleanly.
    w.publish(30);
    assert_eq!(w.state("a"), PushState::Connecting);
    assert_eq!(w.pushes.len(), 2);
}

#[test]
fn failures_retry_with_doubling_back_off() {
    let mut w = World::new();
    w.add_push("a");
    w.publish(0);
    w.drive(0, true);
    assert_eq!(w.state("a"), PushState::Error);
    let mut at = w.pushes.poll_timeout().unwrap();
    let mut gaps = Vec::new();
    let mut last = w.t0;
    for _ in 0..4 {
        gaps.push(at.duration_since(last).as_millis() as u64);
        let ms = at.duration_since(w.t0).as_millis() as u64;
        // Not before it is due.
        let early = w.now(ms.saturating_sub(1));
        w.pushes.handle_timeout(&mut w.reg, early);
        assert!(w.pushes.poll_new().is_none());
        let due = w.now(ms);
        w.pushes.handle_timeout(&mut w.reg, due);
        assert_eq!(w.state("a"), PushState::Connecting);
        w.drive(ms, true);
        assert_eq!(w.state("a"), PushState::Error);
        last = w.t0 + Duration::from_millis(ms);
        at = w.pushes.poll_timeout().unwrap();
    }
    // 1 s, 2 s, 4 s, 8 s, each with up to 25% jitter.
    for (g, base) in gaps.iter().zip([1000u64, 2000, 4000, 8000]) {
        assert!((base..=base * 5 / 4).contains(g), "{gaps:?}");
    }
    let task = w.pushes.tasks.get("default", "app", "a").unwrap();
    assert_eq!(task.last_error.as_deref(), Some("cannot connect: refused"));
}

#[test]
fn stop_during_connect_frees_the_task_at_once() {
    let mut w = World::new();
    w.add_push("a");
    w.publish(0);
    assert_eq!(w.pushes.len(), 1);
    w.pushes.stop(&key("a"), w.now(1).instant);
    w.drive(1, false);
    assert!(w.pushes.is_empty());
}

#[test]
fn a_stream_is_fed_once_for_all_its_sessions() {
    let mut w = World::new();
    for i in 0..3 {
        w.add_push(&format!("p{i}"));
    }
    let id = w.publish(0);
    w.drive(0, false);
    let frames: Vec<Frame> = (0..10).map(frame).collect();
    let out = IngestOutput {
        stream: Some(id),
        frames,
        ..Default::default()
    };
    let now = w.now(5);
    w.pushes.on_ingest(&out, &mut w.reg, now);
    let mut woken = Vec::new();
    w.pushes.take_woken(&mut woken);
    assert_eq!(woken.len(), 3);
}
