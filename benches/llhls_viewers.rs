//! Many LL-HLS viewers of one stream (issue 12's viewer bench): a bounded
//! load generator on one thread (mio), one keep-alive connection per
//! viewer.
//!
//! Against kiln (`--url`), each viewer does what a low-latency player does:
//! a blocking reload of the video chunklist for the preload-hinted part
//! (`_HLS_msn`/`_HLS_part`: kiln answers when the part exists), then a GET of
//! that part, then the next hint. Against a static file server
//! (`--static`, nginx serving a snapshot of kiln's chunklist and parts), a
//! server that cannot block: every part duration all viewers ask for the
//! chunklist and then the next part at once, the same requests and bytes
//! as against kiln.
//!
//! ```text
//! llhls_viewers --url http://127.0.0.1:3333/app/src --viewers 1000 --seconds 20 [--snapshot DIR] [--spread 10] [--variant N]
//! llhls_viewers --static http://127.0.0.1:8080/snap --viewers 1000 --seconds 20 --part 0.5 --dir DIR
//! ```
//!
//! Prints `viewers <connected> requests <n> parts <n> bytes <n>
//! missing <viewers that skipped a part> spread_us <p50> <p99> <max>
//! errors <n> poll_spread_us <p50> <p99> <max>`. `spread_us` against kiln:
//! for each part, the time from the first viewer's first byte of the
//! blocking answer that lists it to each other viewer's (the
//! part-available-to-first-byte figure, less the first viewer's own delay,
//! tens of microseconds on loopback); against a static server: from the
//! tick to each viewer's first byte of the chunklist. A first byte's time
//! is when it reached the viewer's socket: the kernel's receive time stamp
//! (`SO_TIMESTAMPNS`) of the segment the first read of the answer took (an
//! answer head and a playlist are one segment on loopback), so this
//! program's own work, on a CPU it shares with the server, does not widen
//! the spread. `poll_spread_us` is the same spread with the time the
//! poll returned instead (the figure earlier runs reported).
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::collections::{HashMap, HashSet};
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

struct Args {
    base: String,
    addr: SocketAddr,
    blocking: bool,
    viewers: usize,
    seconds: f64,
    part: f64,
    dir: Option<String>,
    snapshot: Option<String>,
    /// Viewers spread over this many loopback addresses (127.0.0.1 on):
    /// a server counts connections per client address, and real viewers
    /// come from many.
    spread: u8,
    /// Which of the master playlist's video variants the viewers play
    /// (`--variant N`, from 0: an encoder's renditions).
    variant: usize,
}

fn args() -> Args {
    let all: Vec<String> = std::env::args().collect();
    let get = |name: &str| {
        all.iter()
            .position(|a| a == name)
            .and_then(|i| all.get(i + 1))
            .cloned()
    };
    let usage = "usage: llhls_viewers (--url http://h:p/app/stream | --static http://h:p/dir --dir D --part S) [--viewers N] [--seconds S] [--snapshot DIR] [--spread N] [--variant N]";
    let (url, blocking) = match (get("--url"), get("--static")) {
        (Some(u), None) => (u, true),
        (None, Some(u)) => (u, false),
        _ => panic!("{usage}"),
    };
    let rest = url.strip_prefix("http://").expect(usage);
    let (host, base) = rest.split_at(rest.find('/').expect(usage));
    Args {
        base: base.trim_end_matches('/').to_string(),
        addr: host.parse().expect("host:port as an IP address"),
        blocking,
        viewers: get("--viewers").map_or(1000, |v| v.parse().expect(usage)),
        seconds: get("--seconds").map_or(20.0, |v| v.parse().expect(usage)),
        part: get("--part").map_or(0.5, |v| v.parse().expect(usage)),
        dir: get("--dir"),
        snapshot: get("--snapshot"),
        spread: get("--spread").map_or(1, |v| v.parse::<u8>().expect(usage).max(1)),
        variant: get("--variant").map_or(0, |v| v.parse().expect(usage)),
    }
}

/// A blocking GET (set-up and snapshot only). The body is
/// `Content-Length` long when the answer says so: OME keeps the
/// connection open despite `Connection: close`.
fn fetch(addr: SocketAddr, path: &str) -> (u16, Vec<u8>) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    let mut buf = [0u8; 16384];
    let (end, len) = loop {
        let n = s.read(&mut buf).unwrap_or(0);
        if n == 0 {
            break (all.windows(4).position(|w| w == b"\r\n\r\n").unwrap(), None);
        }
        all.extend_from_slice(&buf[..n]);
        if let Some(end) = all.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&all[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            break (end, len);
        }
    };
    if let Some(len) = len {
        while all.len() < end + 4 + len {
            let n = s.read(&mut buf).unwrap_or(0);
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
        }
    } else {
        s.read_to_end(&mut all).unwrap();
    }
    let status = String::from_utf8_lossy(&all[9..12]).parse().unwrap_or(0);
    (status, all[end + 4..].to_vec())
}

/// A part URI (`part_{track}_{msn}_{part}_...`) with its numbers.
fn numbered(uri: &str) -> Option<(String, u64, u64)> {
    let f: Vec<&str> = uri.split('_').collect();
    let (msn, part) = (f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?);
    Some((uri.to_string(), msn, part))
}

fn hint_of(list: &str) -> Option<(String, u64, u64)> {
    let uri = list
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\""))?;
    numbered(uri.trim_end_matches('"'))
}

/// Every part a chunklist lists, oldest first.
fn listed_parts(list: &str) -> Vec<(String, u64, u64)> {
    list.lines()
        .filter_map(|l| l.strip_prefix("#EXT-X-PART:"))
        .filter_map(|l| l.split("URI=\"").nth(1))
        .filter_map(|u| numbered(u.split('"').next()?))
        .collect()
}

/// The video chunklist's path, once the stream has a complete segment.
fn video_chunklist(a: &Args) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "no LL-HLS stream at {}", a.base);
        let (code, master) = fetch(a.addr, &format!("{}/llhls.m3u8", a.base));
        if code == 200 {
            let master = String::from_utf8_lossy(&master).into_owned();
            // kiln names the chunklist relative to the playlist, OME by
            // its absolute path.
            if let Some(l) = master
                .lines()
                .filter(|l| {
                    !l.starts_with('#') && l.contains("chunklist_") && l.contains("_video_")
                })
                .nth(a.variant)
            {
                let path = match l.starts_with('/') {
                    true => l.to_string(),
                    false => format!("{}/{l}", a.base),
                };
                let (_, list) = fetch(a.addr, &path);
                if String::from_utf8_lossy(&list).contains("#EXTINF:") {
                    return path;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Saves the chunklist and its parts under `dir` (for the static server).
fn snapshot(a: &Args, list_path: &str, dir: &str) {
    let (_, list) = fetch(a.addr, list_path);
    let text = String::from_utf8_lossy(&list).into_owned();
    std::fs::create_dir_all(dir).unwrap();
    let mut n = 0;
    for uri in text
        .lines()
        .filter_map(|l| l.split("URI=\"").nth(1))
        .map(|u| u.split('"').next().unwrap())
        .filter(|u| u.starts_with("part_"))
    {
        let (code, data) = fetch(a.addr, &format!("{}/{uri}", a.base));
        if code == 200 {
            std::fs::write(format!("{dir}/{uri}"), data).unwrap();
            n += 1;
        }
    }
    std::fs::write(format!("{dir}/chunklist.m3u8"), &list).unwrap();
    eprintln!("snapshot: chunklist and {n} parts in {dir}");
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Want {
    Playlist,
    Part,
}

/// A response being read: head, then `Content-Length` bytes.
#[derive(Default)]
struct Incoming {
    head: Vec<u8>,
    status: u16,
    left: Option<usize>,
    body: Vec<u8>,
    first_byte: Option<Stamp>,
}

/// When a first byte came: the kernel's receive time stamp, and when the
/// poll that reported it returned (both wall-clock, since the epoch).
#[derive(Clone, Copy)]
struct Stamp {
    arrived: Duration,
    polled: Duration,
}

struct Viewer {
    sock: TcpStream,
    connected: bool,
    out: Vec<u8>,
    incoming: Incoming,
    want: Want,
    keep_body: bool,
    /// The preload hint: (uri, msn, part).
    next: Option<(String, u64, u64)>,
    /// Newest part seen, and the listed parts still to fetch.
    last: Option<(u64, u64)>,
    queue: std::collections::VecDeque<String>,
    /// Static mode: index into the snapshot's parts; waiting for a tick.
    cursor: usize,
    idle: bool,
    got: Vec<(u64, u64)>,
    dead: bool,
}

struct Stats {
    requests: u64,
    parts: u64,
    bytes: u64,
    errors: u64,
    /// (request kind, status) -> count, for the non-200 answers.
    refused: std::collections::BTreeMap<(String, u16), u64>,
    /// (msn, part) -> first-byte time per viewer.
    first_bytes: HashMap<(u64, u64), Vec<Stamp>>,
    spread: Vec<Duration>,
    poll_spread: Vec<Duration>,
}

/// `read(2)` that also returns the receive time stamp of the (last)
/// segment it took, when the socket has `SO_TIMESTAMPNS` on.
fn read_stamped(
    fd: std::os::fd::RawFd,
    buf: &mut [u8],
) -> std::io::Result<(usize, Option<Duration>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; 16];
    // SAFETY: a zeroed msghdr is valid; it points at live buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: fd is an open socket, msg describes writable buffers.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: walking the control messages the kernel wrote into `control`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                stamp = Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

fn wall() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

impl Viewer {
    fn send(&mut self, path: &str, want: Want, stats: &mut Stats) {
        write!(self.out, "GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n").unwrap();
        self.want = want;
        self.keep_body = want == Want::Playlist;
        self.incoming = Incoming::default();
        stats.requests += 1;
    }

    fn flush(&mut self) {
        while !self.out.is_empty() {
            match self.sock.write(&self.out) {
                Ok(n) => {
                    self.out.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    self.dead = true;
                    return;
                }
            }
        }
    }

    /// Reads; returns true when a whole response is in.
    fn read(&mut self, now: Duration, buf: &mut [u8], stats: &mut Stats) -> bool {
        use std::os::fd::AsRawFd;
        loop {
            let (n, arrived) = match read_stamped(self.sock.as_raw_fd(), buf) {
                Ok((0, _)) => {
                    self.dead = true;
                    return false;
                }
                Ok(got) => got,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.dead = true;
                    return false;
                }
            };
            let inc = &mut self.incoming;
            inc.first_byte.get_or_insert(Stamp {
                arrived: arrived.unwrap_or(now),
                polled: now,
            });
            let mut data = &buf[..n];
            if inc.left.is_none() {
                inc.head.extend_from_slice(data);
                let Some(end) = inc.head.windows(4).position(|w| w == b"\r\n\r\n") else {
                    continue;
                };
                let head = String::from_utf8_lossy(&inc.head[..end]).into_owned();
                inc.status = head.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
                let len = head
                    .lines()
                    .find_map(|l| {
                        let (n, v) = l.split_once(':')?;
                        n.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                inc.left = Some(len);
                let rest = inc.head.split_off(end + 4);
                stats.bytes += rest.len() as u64;
                let take = rest.len().min(len);
                if self.keep_body {
                    inc.body.extend_from_slice(&rest[..take]);
                }
                inc.left = Some(len - take);
                data = &[];
            }
            let left = inc.left.as_mut().unwrap();
            let take = data.len().min(*left);
            *left -= take;
            stats.bytes += take as u64;
            if self.keep_body {
                inc.body.extend_from_slice(&data[..take]);
            }
            if *left == 0 {
                return true;
            }
        }
    }
}

/// Against kiln: the next listed part to fetch, else the blocking reload
/// for the preload-hinted part.
fn next_request(v: &mut Viewer, base: &str, list_path: &str, stats: &mut Stats) {
    if let Some(uri) = v.queue.pop_front() {
        v.send(&format!("{base}/{uri}"), Want::Part, stats);
        return;
    }
    match &v.next {
        Some((_, msn, part)) => {
            let join = if list_path.contains('?') { '&' } else { '?' };
            let path = format!("{list_path}{join}_HLS_msn={msn}&_HLS_part={part}");
            v.send(&path, Want::Playlist, stats)
        }
        // ended
        None => v.dead = true,
    }
}

/// Asks the kernel to stamp each segment's arrival (read back by
/// [`read_stamped`]).
fn stamp_arrivals(sock: &TcpStream) {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: setsockopt on an open socket with a c_int option value.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_TIMESTAMPNS: {}", std::io::Error::last_os_error());
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let a = args();
    let list_path = if a.blocking {
        video_chunklist(&a)
    } else {
        format!("{}/chunklist.m3u8", a.base)
    };
    if let (true, Some(dir)) = (a.blocking, &a.snapshot) {
        snapshot(&a, &list_path, dir);
    }
    // Static mode: the snapshot's parts, in order.
    let static_parts: Vec<String> = match (&a.dir, a.blocking) {
        (Some(dir), false) => {
            let text = std::fs::read_to_string(format!("{dir}/chunklist.m3u8"))
                .expect("--dir holds a snapshot");
            text.lines()
                .filter_map(|l| l.strip_prefix("#EXT-X-PART:"))
                .filter_map(|l| l.split("URI=\"").nth(1))
                .filter_map(|u| u.split('"').next())
                .map(str::to_string)
                .collect()
        }
        (None, false) => panic!("--static needs --dir (the snapshot)"),
        _ => Vec::new(),
    };
    let mut poll = Poll::new().unwrap();
    let mut events = Events::with_capacity(4096);
    let mut viewers: Vec<Viewer> = Vec::with_capacity(a.viewers);
    let mut stats = Stats {
        requests: 0,
        parts: 0,
        bytes: 0,
        errors: 0,
        refused: Default::default(),
        first_bytes: HashMap::new(),
        spread: Vec::new(),
        poll_spread: Vec::new(),
    };
    // Connect in bursts of 50 so the listener's backlog never overflows.
    for i in 0..a.viewers {
        let mut sock = match a.spread {
            1 => TcpStream::connect(a.addr).expect("connect"),
            n => {
                let from = std::net::Ipv4Addr::new(127, 0, 0, 1 + (i % usize::from(n)) as u8);
                let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                    .expect("socket");
                s.bind(&std::net::SocketAddr::from((from, 0)).into())
                    .expect("bind");
                s.connect(&a.addr.into()).expect("connect");
                s.set_nonblocking(true).unwrap();
                TcpStream::from_std(s.into())
            }
        };
        sock.set_nodelay(true).unwrap();
        stamp_arrivals(&sock);
        poll.registry()
            .register(&mut sock, Token(i), Interest::READABLE | Interest::WRITABLE)
            .unwrap();
        viewers.push(Viewer {
            sock,
            connected: false,
            out: Vec::new(),
            incoming: Incoming::default(),
            want: Want::Playlist,
            keep_body: true,
            next: None,
            last: None,
            queue: Default::default(),
            cursor: i % static_parts.len().max(1),
            idle: !a.blocking,
            got: Vec::new(),
            dead: false,
        });
        if i % 50 == 49 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    for v in &mut viewers {
        if a.blocking {
            v.send(&list_path, Want::Playlist, &mut stats);
        }
    }
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(a.seconds);
    let tick_every = Duration::from_secs_f64(a.part);
    let mut next_tick = start;
    let mut tick_at = wall();
    let mut buf = vec![0u8; 256 * 1024];
    while Instant::now() < end {
        if !a.blocking && Instant::now() >= next_tick {
            // Every viewer asks for the chunklist, then the next part.
            tick_at = wall();
            next_tick += tick_every;
            for v in viewers.iter_mut().filter(|v| v.idle && !v.dead) {
                v.idle = false;
                v.send(&list_path, Want::Playlist, &mut stats);
                v.flush();
            }
        }
        let wait = if a.blocking {
            end.saturating_duration_since(Instant::now())
        } else {
            next_tick.saturating_duration_since(Instant::now())
        };
        poll.poll(&mut events, Some(wait.min(Duration::from_millis(100))))
            .unwrap();
        let now = wall();
        for ev in events.iter() {
            let v = &mut viewers[ev.token().0];
            if v.dead {
                continue;
            }
            if ev.is_writable() {
                v.connected = true;
                v.flush();
            }
            if !ev.is_readable() {
                continue;
            }
            while v.read(now, &mut buf, &mut stats) {
                let inc = std::mem::take(&mut v.incoming);
                if inc.status != 200 {
                    stats.errors += 1;
                    *stats
                        .refused
                        .entry((format!("{:?}", v.want), inc.status))
                        .or_default() += 1;
                }
                match (v.want, a.blocking) {
                    (Want::Playlist, true) => {
                        let text = String::from_utf8_lossy(&inc.body);
                        // Parts newer than the last seen: note when the
                        // first byte listing each came, then fetch them
                        // in order; then the blocking reload for the hint.
                        let initial = v.last.is_none();
                        for (uri, msn, part) in listed_parts(&text) {
                            if v.last.is_some_and(|l| (msn, part) <= l) {
                                continue;
                            }
                            if !initial {
                                if let Some(t) = inc.first_byte {
                                    stats.first_bytes.entry((msn, part)).or_default().push(t);
                                }
                                v.got.push((msn, part));
                                v.queue.push_back(uri);
                            }
                            v.last = Some((msn, part));
                        }
                        v.last = v.last.or(Some((0, 0)));
                        v.next = hint_of(&text);
                        next_request(v, &a.base, &list_path, &mut stats);
                    }
                    (Want::Part, true) => {
                        stats.parts += 1;
                        next_request(v, &a.base, &list_path, &mut stats);
                    }
                    (Want::Playlist, false) => {
                        if let Some(t) = inc.first_byte {
                            stats.spread.push(t.arrived.saturating_sub(tick_at));
                            stats.poll_spread.push(t.polled.saturating_sub(tick_at));
                        }
                        let uri = &static_parts[v.cursor % static_parts.len()];
                        v.cursor += 1;
                        v.send(&format!("{}/{uri}", a.base), Want::Part, &mut stats);
                    }
                    (Want::Part, false) => {
                        stats.parts += 1;
                        v.idle = true;
                    }
                }
            }
            v.flush();
        }
    }
    let connected = viewers.iter().filter(|v| v.connected && !v.dead).count();
    // Against kiln: every viewer must have every part cut while it was
    // following (from its first part to the newest part all had).
    let mut missing = 0;
    if a.blocking {
        for times in stats.first_bytes.values() {
            let first = times.iter().map(|t| t.arrived).min().unwrap();
            let polled = times.iter().map(|t| t.polled).min().unwrap();
            stats
                .spread
                .extend(times.iter().map(|t| t.arrived.saturating_sub(first)));
            stats
                .poll_spread
                .extend(times.iter().map(|t| t.polled.saturating_sub(polled)));
        }
        let common_end = viewers
            .iter()
            .filter_map(|v| v.got.last().copied())
            .min()
            .unwrap_or((0, 0));
        let all: HashSet<(u64, u64)> = stats
            .first_bytes
            .keys()
            .copied()
            .filter(|k| *k <= common_end)
            .collect();
        for v in &viewers {
            let Some(first) = v.got.first().copied() else {
                missing += 1;
                continue;
            };
            let mine: HashSet<&(u64, u64)> = v.got.iter().collect();
            if all.iter().any(|k| *k >= first && !mine.contains(k)) {
                missing += 1;
            }
        }
    }
    stats.spread.sort();
    stats.poll_spread.sort();
    let us = |d: Duration| d.as_micros();
    let pct = |s: &[Duration]| {
        let max = s.last().copied().unwrap_or_default();
        format!(
            "{} {} {}",
            us(percentile(s, 0.5)),
            us(percentile(s, 0.99)),
            us(max)
        )
    };
    println!(
        "viewers {connected} requests {} parts {} bytes {} missing {missing} spread_us {} errors {} poll_spread_us {}",
        stats.requests,
        stats.parts,
        stats.bytes,
        pct(&stats.spread),
        stats.errors,
        pct(&stats.poll_spread),
    );
    if !stats.refused.is_empty() {
        eprintln!("non-200 answers: {:?}", stats.refused);
    }
}
