//! Micro benchmarks of the sans-IO cores (criterion): HTTP request parse,
//! JSON rendering of 10,000 push tasks, RTMP chunking of a frame, MPEG-TS
//! muxing of a frame, SRT data packet build and parse, AAC to Opus (a
//! frame, for WebRTC viewers).
//!
//! `cargo bench --bench micro` (add `-- --quick` for a short run, or a name
//! filter such as `-- ts_mux`).
use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use kiln::api::PushView;
use kiln::http::{ReaderLimits, RequestReader};
use kiln::media::{Codec, CodecConfig, Frame, Track};
use kiln::push::request::{validate_start, StartPushRequest};
use kiln::push::task::PushTask;
use kiln::rtmp::{
    ClientConfig, ClientEvent, ClientSession, ServerConfig, ServerEvent, ServerSession,
};
use kiln::srt::packet::{DataHeader, KeyFlags, MsgNumber, Packet, PacketPosition};
use kiln::srt::SeqNumber;
use kiln::ts::Muxer;
use std::time::Instant;

/// A 1280x720 High profile SPS and its PPS (x264), bare NAL units.
fn h264_track() -> Track {
    let config = CodecConfig::H264 {
        sps: vec![Bytes::from_static(&[
            0x67, 0x64, 0x00, 0x1f, 0xac, 0xd9, 0x40, 0x50, 0x05, 0xbb, 0x01, 0x10, 0x00, 0x00,
            0x03, 0x00, 0x10, 0x00, 0x00, 0x03, 0x03, 0xc0, 0xf1, 0x83, 0x19, 0x60,
        ])],
        pps: vec![Bytes::from_static(&[0x68, 0xeb, 0xe3, 0xcb, 0x22, 0xc0])],
    };
    Track {
        id: 1,
        codec: Codec::H264,
        video: kiln::codec::h264::video_params(&config),
        config,
        audio: None,
        bitrate: 2_500_000,
        label: Default::default(),
    }
}

fn aac_track() -> Track {
    let config = CodecConfig::Aac {
        asc: Bytes::from_static(&[0x11, 0x90]), // AAC LC, 48 kHz, stereo
    };
    Track {
        id: 2,
        codec: Codec::Aac,
        audio: kiln::codec::aac::audio_params(&config),
        config,
        video: None,
        bitrate: 128_000,
        label: Default::default(),
    }
}

/// A video frame of `size` bytes: one length-prefixed slice NAL unit.
fn video_frame(size: usize, keyframe: bool) -> Frame {
    let mut data = Vec::with_capacity(size);
    data.extend_from_slice(&((size - 4) as u32).to_be_bytes());
    data.push(if keyframe { 0x65 } else { 0x41 });
    data.extend((0..size - 5).map(|i| (i % 251) as u8 | 1));
    Frame {
        track: 1,
        pts: 903_000,
        dts: 900_000,
        keyframe,
        data: Bytes::from(data),
    }
}

fn audio_frame() -> Frame {
    Frame {
        track: 2,
        pts: 900_000,
        dts: 900_000,
        keyframe: true,
        data: Bytes::from(vec![0x21u8; 370]),
    }
}

fn http_parse(c: &mut Criterion) {
    let req = b"GET /v1/vhosts HTTP/1.1\r\nHost: 127.0.0.1:8081\r\n\
        Authorization: Basic a2lsbjpjaGFuZ2UtbWU=\r\nUser-Agent: curl/8.5.0\r\n\
        Accept: */*\r\n\r\n";
    let body = r#"{"id":"p1","stream":{"name":"src"},"protocol":"rtmp","url":"rtmp://127.0.0.1:1935/live","streamKey":"s1"}"#;
    let post = format!(
        "POST /v1/vhosts/default/apps/app:startPush HTTP/1.1\r\nHost: 127.0.0.1:8081\r\n\
         Authorization: Basic a2lsbjpjaGFuZ2UtbWU=\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let post = post.as_bytes();
    let limits = ReaderLimits {
        max_head_bytes: 16384,
        max_body_bytes: 1 << 20,
    };
    let mut g = c.benchmark_group("http_parse");
    for (name, bytes) in [("get_vhosts", &req[..]), ("post_start_push", post)] {
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        let mut reader = RequestReader::new(limits);
        g.bench_function(name, |b| {
            b.iter(|| {
                reader.feed(black_box(bytes));
                black_box(reader.next_request().unwrap().unwrap())
            })
        });
    }
    g.finish();
}

fn push_json(c: &mut Criterion) {
    let tasks: Vec<PushTask> = (0..10_000)
        .map(|i| {
            let body = format!(
                r#"{{"id":"push-{i}","stream":{{"name":"src"}},"protocol":"rtmp","url":"rtmp://127.0.0.1:1935/live","streamKey":"s{i}"}}"#
            );
            let req: StartPushRequest = serde_json::from_str(&body).unwrap();
            let (spec, dest) =
                validate_start(req, "default", "app", 1_795_241_862_945, &|_| true).unwrap();
            PushTask::new(spec, dest)
        })
        .collect();
    let now = Instant::now();
    let mut g = c.benchmark_group("api_json");
    g.throughput(Throughput::Elements(tasks.len() as u64));
    g.sample_size(20);
    g.bench_function("push_view_10000_tasks", |b| {
        b.iter(|| {
            let views: Vec<PushView> = tasks.iter().map(|t| PushView::of(t, now, 0)).collect();
            black_box(serde_json::to_vec(&views).unwrap())
        })
    });
    g.finish();
}

/// A client session that reached Publishing against a server in memory.
fn publishing_client() -> ClientSession {
    let mut c = ClientSession::new(ClientConfig::new("rtmp://127.0.0.1/live", "live", "key"));
    let mut s = ServerSession::new(ServerConfig::default());
    for _ in 0..100 {
        let out = c.pending_output().to_vec();
        c.consume_output(out.len());
        s.handle_input(&out).unwrap();
        while let Some(e) = s.poll_event() {
            match e {
                ServerEvent::Connect { .. } => s.accept_connect(),
                ServerEvent::Publish { .. } => s.accept_publish(),
                _ => {}
            }
        }
        let back = s.pending_output().to_vec();
        s.consume_output(back.len());
        c.handle_input(&back).unwrap();
        while let Some(e) = c.poll_event() {
            if let ClientEvent::Error(m) = e {
                panic!("rtmp client: {m}");
            }
        }
        if c.is_publishing() {
            c.send_tracks(&[h264_track(), aac_track()]).unwrap();
            let n = c.pending_output().len();
            c.consume_output(n);
            return c;
        }
    }
    panic!("the RTMP client never reached Publishing");
}

fn rtmp_chunk(c: &mut Criterion) {
    let mut g = c.benchmark_group("rtmp_chunk");
    // 2.5 Mb/s at 30 fps: ~10 KB per frame; a keyframe ~100 KB.
    for (name, frame) in [
        ("video_10k", video_frame(10_400, false)),
        ("video_key_100k", video_frame(100_000, true)),
        ("audio_370", audio_frame()),
    ] {
        let mut client = publishing_client();
        g.throughput(Throughput::Bytes(frame.data.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| {
                client.send_frame(black_box(&frame)).unwrap();
                let n = client.pending_output().len();
                client.consume_output(n);
                n
            })
        });
    }
    g.finish();
}

fn ts_mux(c: &mut Criterion) {
    let mut g = c.benchmark_group("ts_mux");
    for (name, frame) in [
        ("video_10k", video_frame(10_400, false)),
        ("video_key_100k", video_frame(100_000, true)),
        ("audio_370", audio_frame()),
    ] {
        let mut mux = Muxer::new(&[h264_track(), aac_track()]).unwrap();
        let mut out = Vec::with_capacity(256 * 1024);
        g.throughput(Throughput::Bytes(frame.data.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| {
                out.clear();
                mux.write_frame(black_box(&frame), &mut out).unwrap();
                out.len()
            })
        });
    }
    g.finish();
}

fn srt_packet(c: &mut Criterion) {
    let payload = vec![0x47u8; 1316];
    let header = DataHeader {
        seq: SeqNumber::new(123_456),
        position: PacketPosition::Solo,
        in_order: false,
        key: KeyFlags::None,
        retransmitted: false,
        msg: MsgNumber::new(77),
        timestamp: 1_000_000,
        dest_socket: 0x1234_5678,
    };
    let mut g = c.benchmark_group("srt_packet");
    g.throughput(Throughput::Elements(1));
    let mut buf = Vec::with_capacity(1500);
    g.bench_function("build_data_1316", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&header).write(&mut buf);
            buf.extend_from_slice(black_box(&payload));
            buf.len()
        })
    });
    let mut datagram = Vec::new();
    header.write(&mut datagram);
    datagram.extend_from_slice(&payload);
    g.bench_function("parse_data_1316", |b| {
        b.iter(|| match Packet::parse(black_box(&datagram)).unwrap() {
            Packet::Data(d) => d.payload.len(),
            _ => unreachable!(),
        })
    });
    g.finish();
}

/// Raw AAC frames (ADTS headers stripped) of a fixture, and its
/// AudioSpecificConfig.
#[cfg(feature = "webrtc")]
fn adts_frames(file: &str) -> (Vec<Bytes>, Vec<u8>) {
    let d = std::fs::read(format!(
        "{}/tests/fixtures/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let mut frames = Vec::new();
    let mut i = 0;
    let mut asc = Vec::new();
    while i + 7 <= d.len() {
        let len = (usize::from(d[i + 3] & 3) << 11)
            | (usize::from(d[i + 4]) << 3)
            | usize::from(d[i + 5] >> 5);
        let header = if d[i + 1] & 1 == 1 { 7 } else { 9 };
        if asc.is_empty() {
            let profile = (d[i + 2] >> 6) + 1;
            let index = (d[i + 2] >> 2) & 0x0f;
            let channels = ((d[i + 2] & 1) << 2) | (d[i + 3] >> 6);
            asc = vec![
                (profile << 3) | (index >> 1),
                ((index & 1) << 7) | (channels << 3),
            ];
        }
        frames.push(Bytes::copy_from_slice(&d[i + header..i + len]));
        i += len;
    }
    (frames, asc)
}

/// AAC to Opus for WebRTC viewers (once per stream): decode, resample
/// when 44.1 kHz, encode 20 ms packets. Per AAC frame (1024 samples).
#[cfg(feature = "webrtc")]
fn aac_to_opus(c: &mut Criterion) {
    let mut g = c.benchmark_group("aac_to_opus");
    for (name, file) in [
        ("48k_stereo_frame", "sine-48k-stereo-128k.aac"),
        ("44k1_stereo_frame", "sine-44k-stereo-128k.aac"),
    ] {
        let (frames, asc) = adts_frames(file);
        g.throughput(Throughput::Elements(frames.len() as u64));
        let mut t = kiln::webrtc::audio::AacToOpus::new(&asc).unwrap();
        let mut pts = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut n = 0;
                for data in &frames {
                    let f = Frame {
                        track: 2,
                        pts,
                        dts: pts,
                        keyframe: true,
                        data: data.clone(),
                    };
                    pts += 1920;
                    n += t.push(&f).unwrap().len();
                }
                n
            })
        });
    }
    g.finish();
}

#[cfg(not(feature = "webrtc"))]
fn aac_to_opus(_c: &mut Criterion) {}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = http_parse, push_json, rtmp_chunk, ts_mux, srt_packet, aac_to_opus
}
criterion_main!(benches);
