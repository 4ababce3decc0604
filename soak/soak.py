#!/usr/bin/env python3
"""Soak test for kiln: runs a release build for a given time under churn and
fails if memory or file descriptors grow without bound.

Churn, all on 127.0.0.1:
  - publishers appear and disappear: ffmpeg over RTMP, MPEG-TS/UDP and SRT,
    each living 20-90 s, a few at a time;
  - push tasks are started and stopped through the API (UDP destinations,
    plus a standing set of --pushes long-lived UDP pushes);
  - destinations flap: UDP receivers close and reopen.

Every 10 s it samples kiln's RSS, open fds and the push task states. After a
warm-up (a fifth of the run), it fails if the last third's average RSS is
more than 20% and 16 MiB above the middle third's, or fds grew by more than
32. Not in CI (it runs for minutes); its last result goes in RELIABILITY.md.

Usage: soak/soak.py [--minutes 30] [--pushes 100] [--out soak-result.txt]
Needs: ffmpeg, srt-tools (srt-live-transmit not required), cargo.
"""
import argparse, base64, json, os, random, signal, socket, subprocess, sys, tempfile, threading, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "kiln:soak"


def free_port(kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def api(port, method, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode())
    req.add_header("Authorization", "Basic " + base64.b64encode(TOKEN.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def proc_stats(pid):
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return rss, fds


class UdpSink(threading.Thread):
    """A UDP receiver that counts datagrams and can be closed and reopened."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.count, self.open, self.stop = port, 0, True, False
        self.sock = None

    def run(self):
        while not self.stop:
            if not self.open:
                if self.sock:
                    self.sock.close()
                    self.sock = None
                time.sleep(0.2)
                continue
            if self.sock is None:
                self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                self.sock.bind(("127.0.0.1", self.port))
                self.sock.settimeout(0.2)
            try:
                self.sock.recv(65536)
                self.count += 1
            except socket.timeout:
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--pushes", type=int, default=100)
    ap.add_argument("--out", default="soak-result.txt")
    args = ap.parse_args()

    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    kiln = os.path.join(ROOT, "target", "release", "kiln")
    d = tempfile.mkdtemp(prefix="kiln-soak-")
    api_port, rtmp = free_port(), free_port()
    ts_port, srt = free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_DGRAM)
    conf = f"""<?xml version="1.0"?>
<Server version="8"><Name>soak</Name><IP>127.0.0.1</IP>
 <Bind><Managers><API><Port>{api_port}</Port></API></Managers>
  <Providers><RTMP><Port>{rtmp}</Port></RTMP><SRT><Port>{srt}</Port></SRT>
   <MPEGTS><Port>{ts_port}/udp</Port><StreamTimeoutMs>2000</StreamTimeoutMs></MPEGTS></Providers></Bind>
 <Managers><Host><Names><Name>*</Name></Names></Host><API><AccessToken>{TOKEN}</AccessToken></API></Managers>
 <VirtualHosts><VirtualHost><Name>default</Name><Host><Names><Name>*</Name></Names></Host>
  <Applications><Application><Name>app</Name><Type>live</Type>
   <OutputProfiles><OutputProfile><Name>bypass</Name><Encodes>
    <Video><Name>v</Name><Bypass>true</Bypass></Video><Audio><Name>a</Name><Bypass>true</Bypass></Audio>
   </Encodes></OutputProfile></OutputProfiles>
   <Providers><RTMP/><SRT/><MPEGTS><StreamMap><Stream><Name>ts</Name><Port>{ts_port}</Port></Stream></StreamMap></MPEGTS></Providers>
   <Publishers><Push/></Publishers>
  </Application></Applications></VirtualHost></VirtualHosts></Server>"""
    with open(os.path.join(d, "server.xml"), "w") as f:
        f.write(conf)
    log = open(os.path.join(d, "kiln.log"), "w")
    server = subprocess.Popen([kiln, "-c", os.path.join(d, "server.xml")], stderr=log)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", api_port), 0.2).close()
            break
        except OSError:
            time.sleep(0.1)

    # Standing pushes: args.pushes UDP pushes of stream "cam" to a few sinks.
    sinks = [UdpSink(free_port(socket.SOCK_DGRAM)) for _ in range(8)]
    for s in sinks:
        s.start()
    for i in range(args.pushes):
        st, _ = api(api_port, "POST", "/v1/vhosts/default/apps/app:startPush",
                    {"id": f"standing-{i}", "stream": {"name": "cam"}, "protocol": "mpegts",
                     "url": f"udp://127.0.0.1:{sinks[i % len(sinks)].port}"})
        assert st == 200, st

    def source(kind, name, secs):
        base = ["ffmpeg", "-hide_banner", "-loglevel", "quiet", "-re", "-f", "lavfi", "-i",
                "testsrc2=size=640x360:rate=25", "-f", "lavfi", "-i", "sine=sample_rate=48000",
                "-t", str(secs), "-c:v", "libx264", "-preset", "ultrafast", "-g", "50", "-b:v", "1500k",
                "-c:a", "aac"]
        if kind == "rtmp":
            url = ["-f", "flv", f"rtmp://127.0.0.1:{rtmp}/app/{name}"]
        elif kind == "udp":
            url = ["-f", "mpegts", f"udp://127.0.0.1:{ts_port}?pkt_size=1316"]
        else:
            url = ["-f", "mpegts", f"srt://127.0.0.1:{srt}?streamid=default/app/{name}&pkt_size=1316"]
        return subprocess.Popen(base + url, stdin=subprocess.DEVNULL)

    rng = random.Random(1)
    end = time.time() + args.minutes * 60
    samples, procs, churn_pushes = [], [], 0
    cam = None
    next_sample = time.time()
    started = time.time()
    while time.time() < end:
        now = time.time()
        # The standing stream "cam" restarts every ~2 minutes (pushes go
        # ready -> pushing each time).
        if cam is None or cam.poll() is not None:
            cam = source("rtmp", "cam", rng.randint(60, 150))
        procs = [p for p in procs if p.poll() is None]
        if len(procs) < 3 and rng.random() < 0.3:
            kind = rng.choice(["rtmp", "udp", "srt"])
            name = f"s{rng.randint(0, 5)}"
            if kind == "udp" and any(getattr(p, "kind", "") == "udp" for p in procs):
                kind = "rtmp"
            p = source(kind, name, rng.randint(20, 90))
            p.kind = kind
            procs.append(p)
        # Churn pushes on the short-lived streams.
        if rng.random() < 0.5:
            i = rng.randint(0, 19)
            if rng.random() < 0.5:
                st, _ = api(api_port, "POST", "/v1/vhosts/default/apps/app:startPush",
                            {"id": f"churn-{i}", "stream": {"name": f"s{rng.randint(0, 5)}"},
                             "protocol": "mpegts", "url": f"udp://127.0.0.1:{rng.choice(sinks).port}"})
            else:
                st, _ = api(api_port, "POST", "/v1/vhosts/default/apps/app:stopPush", {"id": f"churn-{i}"})
            churn_pushes += 1
        # Destinations flap.
        if rng.random() < 0.05:
            s = rng.choice(sinks)
            s.open = not s.open
        if now >= next_sample:
            next_sample += 10
            rss, fds = proc_stats(server.pid)
            st, body = api(api_port, "POST", "/v1/vhosts/default/apps/app:pushes")
            states = {}
            for t in (body or {}).get("response", []):
                states[t["state"]] = states.get(t["state"], 0) + 1
            samples.append((now - started, rss, fds, states))
            print(f"{now - started:7.0f}s rss={rss / 1048576:7.1f} MiB fds={fds:5d} tasks={states}", flush=True)
            if server.poll() is not None:
                print("kiln exited!", file=sys.stderr)
                break
        time.sleep(0.5)

    for p in procs + [cam]:
        if p and p.poll() is None:
            p.kill()
    alive = server.poll() is None
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=10)
    for s in sinks:
        s.stop = True

    n = len(samples)
    warm = samples[n // 5:]
    third = max(1, len(warm) // 3)
    mid = warm[third:2 * third] or warm
    last = warm[-third:]
    avg = lambda xs, i: sum(x[i] for x in xs) / len(xs)
    rss_mid, rss_last = avg(mid, 1), avg(last, 1)
    fds_first, fds_last = warm[0][2], max(x[2] for x in last)
    rss_grew = rss_last > rss_mid * 1.2 and rss_last - rss_mid > 16 * 1048576
    fds_grew = fds_last - fds_first > 32
    ok = alive and not rss_grew and not fds_grew
    summary = (
        f"soak {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {args.minutes:g} min, "
        f"{args.pushes} standing UDP pushes, {churn_pushes} push starts/stops, "
        f"RSS mid {rss_mid / 1048576:.1f} MiB -> last {rss_last / 1048576:.1f} MiB "
        f"(peak {max(x[1] for x in samples) / 1048576:.1f}), fds {fds_first} -> {fds_last}, "
        f"kiln alive to the end: {alive} => {'PASS' if ok else 'FAIL'}"
    )
    print(summary)
    with open(args.out, "w") as f:
        f.write(summary + "\n")
        for t, rss, fds, states in samples:
            f.write(f"{t:.0f}\t{rss}\t{fds}\t{json.dumps(states)}\n")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
