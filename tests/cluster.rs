//! An origin-edge cluster on a real Redis (issue 15 items 4-5, DECISIONS
//! 12): Debian's `redis-server` started by the test on a free port with a
//! password, two origins and one edge, all real kiln processes. A viewer
//! on the edge plays a stream published on origin A; A is killed and the
//! same name published on origin B; the edge's viewer plays again. Redis
//! is killed and restarted meanwhile: streams go on, registrations come
//! back.

mod common;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PASSWORD: &str = "cluster-secret";

struct Redis {
    child: Option<Child>,
    port: u16,
}

impl Redis {
    fn start(port: u16) -> Redis {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--requirepass",
                PASSWORD,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        wait_for_port(port, Duration::from_secs(10));
        Redis {
            child: Some(child),
            port,
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `GET key` with redis-cli ("" when nil).
    fn get(&self, key: &str) -> String {
        let out = Command::new("redis-cli")
            .args([
                "-p",
                &self.port.to_string(),
                "-a",
                PASSWORD,
                "--no-auth-warning",
            ])
            .args(["GET", key])
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

fn node(tag: &str, redis: u16, llhls: bool) -> Server {
    Server::start_with(
        tag,
        ServerOptions {
            media: true,
            llhls: llhls.then(|| {
                "<ChunkDuration>0.5</ChunkDuration><SegmentDuration>1</SegmentDuration>".into()
            }),
            vhost_access: format!(
                "<OriginMapStore><RedisServer><Host>127.0.0.1:{redis}</Host><Auth>{PASSWORD}</Auth>\
                 </RedisServer><OriginHostName>127.0.0.1</OriginHostName></OriginMapStore>"
            ),
            ..Default::default()
        },
    )
}

/// Publishes `app/cam` on `s` in `size` (A and B differ, so the viewer
/// can tell whose stream it plays).
fn publish(s: &Server, size: &str) -> Child {
    ffmpeg_source_cmd(
        120,
        size,
        &[],
        "flv",
        &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
    )
    .spawn()
    .expect("ffmpeg starts")
}

/// The width of the first video stream of a file (0 when none).
fn width(file: &Path) -> u64 {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries"])
        .args(["stream=width", "-of", "csv=p=0"])
        .arg(file)
        .output()
        .expect("ffprobe runs");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// The edge's viewer: reads 2 s of the stream over LL-HLS into `out`;
/// (H.264 frames decoded, picture width); 0 frames when it could not play.
/// `started` is set to when the edge answered the entry playlist.
fn view(edge: &Server, out: &Path, started: &mut Instant) -> (u64, u64) {
    let url = format!("http://127.0.0.1:{}/app/cam/llhls.m3u8", edge.media.llhls);
    let (code, master, _) = curl(&["--max-time", "20"], &url);
    *started = Instant::now();
    if code != 200 {
        return (0, 0);
    }
    // Like a player: wait for the first segments (the edge's copy may
    // have just started).
    let Some(video) = master
        .lines()
        .find(|l| l.starts_with("chunklist_") && l.contains("_video_"))
        .map(|l| l.split('?').next().unwrap_or(l))
    else {
        return (0, 0);
    };
    let list = format!("http://127.0.0.1:{}/app/cam/{video}", edge.media.llhls);
    let ready = wait_until(Duration::from_secs(10), || {
        let (_, text, _) = curl(&[], &list);
        (text.matches("#EXTINF:").count() >= 2).then_some(())
    });
    if ready.is_none() {
        return (0, 0);
    }
    let _ = std::fs::remove_file(out);
    let mut ff = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y", "-i", &url])
        .args(["-t", "2", "-c", "copy"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ffmpeg runs");
    if wait_until(Duration::from_secs(20), || ff.try_wait().ok().flatten()).is_none() {
        let _ = ff.kill();
        let _ = ff.wait();
        return (0, 0);
    }
    (frames_of(&frame_counts(out), "h264"), width(out))
}

#[test]
fn an_edge_follows_a_stream_from_origin_a_to_origin_b_through_redis() {
    if !have_tool("redis-server") || !have_tool("redis-cli") || !have_tool("ffmpeg") {
        return;
    }
    let mut redis = Redis::start(free_port());
    let mut a = node("cluster-a", redis.port, false);
    let b = node("cluster-b", redis.port, false);
    let edge = node("cluster-edge", redis.port, true);

    let mut src_a = publish(&a, "640x360");
    let want_a = format!("srt://127.0.0.1:{}/app/cam", a.media.srt);
    let got = wait_until(Duration::from_secs(15), || {
        (redis.get("app/cam") == want_a).then_some(())
    });
    assert!(
        got.is_some(),
        "A did not register: [{}]\n{}",
        redis.get("app/cam"),
        a.log_text()
    );

    // The viewer on the edge plays A's stream, pulled through the map.
    let mkv = edge.dir.join("view.mkv");
    let t0 = Instant::now();
    let mut started = Instant::now();
    let (frames, w) = view(&edge, &mkv, &mut started);
    println!(
        "the edge's viewer got {frames} frames of {w} px from A ({:?})",
        t0.elapsed()
    );
    assert!(
        frames >= 45 && w == 640,
        "{frames} {w}\n{}",
        edge.log_text()
    );
    assert_eq!(
        edge.live_stream("cam").unwrap()["input"]["sourceType"],
        "SrtPull"
    );
    assert_eq!(
        redis.get("app/cam"),
        want_a,
        "the edge does not register its copy"
    );

    // A dies (its key is not deleted: it expires); the name comes back on B.
    a.kill9();
    let _ = src_a.kill();
    let _ = src_a.wait();
    let mut src_b = publish(&b, "320x180");
    let t_fail = Instant::now();
    let mut attempts = 0;
    let frames = loop {
        attempts += 1;
        let (n, w) = view(&edge, &mkv, &mut started);
        if (n >= 45 && w == 320) || t_fail.elapsed() > Duration::from_secs(40) {
            break n;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let failover = started - t_fail;
    println!("the edge answered B's stream {failover:?} after A died and B published ({attempts} attempts, {frames} frames)");
    assert!(frames >= 45, "{frames}\n{}", edge.log_text());
    let want_b = format!("srt://127.0.0.1:{}/app/cam", b.media.srt);
    assert_eq!(redis.get("app/cam"), want_b);
    assert!(
        failover < Duration::from_secs(15),
        "failover took {failover:?}"
    );

    // Redis goes away: the streams go on; when it is back, B registers
    // again (Redis lost everything).
    let port = redis.port;
    redis.kill();
    std::thread::sleep(Duration::from_secs(2));
    assert!(b.live_stream("cam").is_some());
    assert!(edge.live_stream("cam").is_some(), "the edge's pull goes on");
    assert!(b.log_text().contains("Redis unreachable"));
    let redis = Redis::start(port);
    let t_back = Instant::now();
    let got = wait_until(Duration::from_secs(10), || {
        (redis.get("app/cam") == want_b).then_some(())
    });
    assert!(got.is_some(), "B did not register again\n{}", b.log_text());
    println!(
        "B registered again {:?} after Redis came back",
        t_back.elapsed()
    );
    assert!(b.log_text().contains("Redis is back"));
    let _ = src_b.kill();
    let _ = src_b.wait();
    // B's stream ended: its key is deleted.
    let gone = wait_until(Duration::from_secs(10), || {
        redis.get("app/cam").is_empty().then_some(())
    });
    assert!(gone.is_some(), "B's key outlived its stream");
}

#[test]
fn a_wrong_redis_password_is_logged_and_streams_go_on() {
    if !have_tool("redis-server") || !have_tool("redis-cli") || !have_tool("ffmpeg") {
        return;
    }
    let redis = Redis::start(free_port());
    let s = Server::start_with(
        "cluster-badauth",
        ServerOptions {
            media: true,
            vhost_access: format!(
                "<OriginMapStore><RedisServer><Host>127.0.0.1:{}</Host><Auth>wrong</Auth>\
                 </RedisServer><OriginHostName>127.0.0.1</OriginHostName></OriginMapStore>",
                redis.port
            ),
            ..Default::default()
        },
    );
    let mut src = publish(&s, "320x180");
    let live = wait_until(Duration::from_secs(10), || s.live_stream("cam"));
    assert!(live.is_some());
    let logged = wait_until(Duration::from_secs(10), || {
        s.log_text().contains("AUTH refused").then_some(())
    });
    assert!(logged.is_some(), "{}", s.log_text());
    assert!(
        !s.log_text().contains("wrong"),
        "the password is in the log"
    );
    assert_eq!(redis.get("app/cam"), "");
    let _ = src.kill();
    let _ = src.wait();
}
