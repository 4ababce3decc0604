#!/usr/bin/env python3
"""Captures real traffic into fuzz/corpus-seed/<target>/ (small files).

Starts kiln (binary given as argv[1]) on free loopback ports and puts
recording proxies in front of it:
  - curl -> TCP proxy -> API            : http_request, api (converted)
  - ffmpeg RTMP publish -> TCP proxy    : rtmp_* (both directions), amf0, flv, codec
  - ffmpeg -f mpegts file               : ts_demux, ts_psi, ts_pes, ts_mux
  - srt-live-transmit -> UDP proxy      : srt_packet, srt_listener, srt_caller
Usage: fuzz/seeds/capture.py target/debug/kiln
"""
import os, socket, subprocess, sys, tempfile, threading, time, hashlib, struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "corpus-seed")
KILN = os.path.abspath(sys.argv[1])
MAX = 4096


def save(target, data, name=None):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    data = data[:MAX]
    name = name or hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def free_port(kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class TcpProxy:
    """Forwards one listening port to `dst`, recording each connection's
    (client->server, server->client) bytes."""

    def __init__(self, dst):
        self.dst = dst
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            s = socket.create_connection(("127.0.0.1", self.dst))
            rec = [bytearray(), bytearray()]
            self.conns.append(rec)
            for a, b, r in ((c, s, rec[0]), (s, c, rec[1])):
                threading.Thread(target=self.pump, args=(a, b, r), daemon=True).start()

    @staticmethod
    def pump(a, b, rec):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                rec.extend(d)
                b.sendall(d)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class UdpProxy:
    """Forwards datagrams from one client to `dst`, recording both ways."""

    def __init__(self, dst):
        self.dst = ("127.0.0.1", dst)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.client = None
        self.c2s, self.s2c = [], []
        threading.Thread(target=self.fwd_up, daemon=True).start()
        threading.Thread(target=self.fwd_down, daemon=True).start()

    def fwd_up(self):
        while True:
            d, a = self.sock.recvfrom(65536)
            self.client = a
            self.c2s.append(d)
            self.up.sendto(d, self.dst)

    def fwd_down(self):
        while True:
            try:
                d, _ = self.up.recvfrom(65536)
            except OSError:
                time.sleep(0.01)
                continue
            self.s2c.append(d)
            if self.client:
                self.sock.sendto(d, self.client)


def rtmp_messages(data, start):
    """De-chunks an RTMP stream (after the handshake): (type, payload) list."""
    pos, chunk, streams, out = start, 128, {}, []
    while pos < len(data):
        b = data[pos]; pos += 1
        fmt, csid = b >> 6, b & 0x3F
        if csid == 0:
            csid = 64 + data[pos]; pos += 1
        elif csid == 1:
            csid = 64 + data[pos] + 256 * data[pos + 1]; pos += 2
        st = streams.setdefault(csid, {"len": 0, "type": 0, "buf": bytearray()})
        if fmt <= 2:
            ts = int.from_bytes(data[pos:pos + 3], "big"); pos += 3
        if fmt <= 1:
            st["len"] = int.from_bytes(data[pos:pos + 3], "big"); pos += 3
            st["type"] = data[pos]; pos += 1
        if fmt == 0:
            pos += 4
        if fmt <= 2 and ts == 0xFFFFFF:
            pos += 4
        n = min(chunk, st["len"] - len(st["buf"]))
        if pos + n > len(data):
            break
        st["buf"].extend(data[pos:pos + n]); pos += n
        if len(st["buf"]) >= st["len"]:
            payload = bytes(st["buf"]); st["buf"] = bytearray()
            out.append((st["type"], payload))
            if st["type"] == 1 and len(payload) >= 4:
                chunk = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
    return out


def main():
    tmp = tempfile.mkdtemp(prefix="kiln-seeds-")
    api, rtmp, srt, ts = free_port(), free_port(), free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_DGRAM)
    xml = f"""<?xml version="1.0"?>
<Server version="8">
  <Name>kiln-seed</Name>
  <IP>127.0.0.1</IP>
  <Bind><Managers><API><Port>{api}</Port></API></Managers>
    <Providers><RTMP><Port>{rtmp}</Port></RTMP><SRT><Port>{srt}</Port></SRT>
      <MPEGTS><Port>{ts}/udp</Port></MPEGTS></Providers></Bind>
  <Managers><Host><Names><Name>*</Name></Names></Host>
    <API><AccessToken>kiln:fuzz</AccessToken><CrossDomains><Url>*</Url></CrossDomains></API></Managers>
  <VirtualHosts><VirtualHost><Name>default</Name><Host><Names><Name>*</Name></Names></Host>
    <Applications><Application><Name>app</Name><Type>live</Type>
      <OutputProfiles><OutputProfile><Name>bypass</Name><Encodes>
        <Video><Name>bypass_video</Name><Bypass>true</Bypass></Video>
        <Audio><Name>bypass_audio</Name><Bypass>true</Bypass></Audio>
      </Encodes></OutputProfile></OutputProfiles>
      <Providers><RTMP/><SRT/><MPEGTS><StreamMap><Stream><Name>ts_${{Port}}</Name><Port>{ts}</Port></Stream></StreamMap></MPEGTS></Providers>
      <Publishers><Push/></Publishers>
    </Application></Applications></VirtualHost></VirtualHosts>
</Server>
"""
    cfg = os.path.join(tmp, "server.xml")
    open(cfg, "w").write(xml)
    save("config", xml.encode(), "capture-config.xml")
    example = os.path.join(HERE, "..", "..", "server.xml.example")
    if os.path.exists(example):
        save("config", open(example, "rb").read(), "server.xml.example")
    kiln = subprocess.Popen([KILN, "-c", cfg], stderr=open(os.path.join(tmp, "kiln.log"), "w"))
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", api)).close()
                break
            except OSError:
                time.sleep(0.05)

        # ---- HTTP: real curl requests through a recording proxy
        hp = TcpProxy(api)
        base = f"http://127.0.0.1:{hp.port}"
        auth = ["-u", "kiln:fuzz"]
        calls = [
            (auth, "/v1/vhosts"),
            (auth + ["-X", "POST", "-H", "Content-Type: application/json", "-d",
                     '[{"name":"live","host":{"names":["live.example.com"]}}]'], "/v1/vhosts"),
            (auth + ["-X", "POST", "-H", "Content-Type: application/json", "-d",
                     '[{"name":"app2","type":"live"}]'], "/v1/vhosts/live/apps"),
            (auth + ["-X", "POST", "-H", "Content-Type: application/json", "-d",
                     '{"id":"p1","stream":{"name":"cam"},"protocol":"rtmp","url":"rtmp://127.0.0.1:1/live","streamKey":"k"}'],
             "/v1/vhosts/default/apps/app:startPush"),
            (auth + ["-X", "POST", "-H", "Content-Type: application/json", "-d",
                     '{"id":"p2","stream":{"name":"cam","tracks":[0]},"protocol":"srt","url":"srt://127.0.0.1:2?latency=200000"}'],
             "/v1/vhosts/default/apps/app:startPush"),
            (auth + ["-X", "POST", "-d", "{}"], "/v1/vhosts/default/apps/app:pushes"),
            (auth + ["-X", "POST", "-H", "Content-Type: application/json", "-d", '{"id":"p1"}'],
             "/v1/vhosts/default/apps/app:stopPush"),
            (auth + ["-X", "DELETE"], "/v1/vhosts/live"),
            (["-X", "OPTIONS", "-H", "Origin: https://x.example.com", "-H",
              "Access-Control-Request-Method: POST"], "/v1/vhosts"),
            (auth + ["-X", "POST", "-H", "Transfer-Encoding: chunked", "-H",
                     "Content-Type: application/json", "-d", '[{"name":"chunked"}]'], "/v1/vhosts"),
            (auth + ["-I"], "/v1/version"),
        ]
        for args, path in calls:
            subprocess.run(["curl", "-sS", "-o", "/dev/null", "--max-time", "5"] + args + [base + path])
        time.sleep(0.3)
        for i, (c2s, _) in enumerate(hp.conns):
            save("http_request", bytes([(i * 37) % 200 + 1]) + bytes(c2s), f"curl-{i:02}")
        save("http_request", bytes([255]) + b"".join(bytes(c[0]) for c in hp.conns), "curl-pipelined")
        # The same requests as api records: [method][route][name]\n[body], NUL separated.
        M = {"GET": 0, "POST": 1, "PUT": 2, "PATCH": 3, "DELETE": 4, "HEAD": 5, "OPTIONS": 6}
        recs = []
        for c2s, _ in hp.conns:
            head, _, body = bytes(c2s).partition(b"\r\n\r\n")
            line = head.split(b"\r\n")[0].split(b" ")
            if line[0].decode() not in M:
                continue
            rec = bytes([M[line[0].decode()], 15]) + line[1] + b"\n" + body
            recs.append(rec.replace(b"\0", b""))
        save("api", b"\0".join(recs), "curl-session")
        for i, r in enumerate(recs):
            save("api", r, f"curl-{i:02}")

        # ---- RTMP publish by ffmpeg through a recording proxy
        rp = TcpProxy(rtmp)
        subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error",
                        "-f", "lavfi", "-i", "testsrc2=size=320x180:rate=25",
                        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                        "-t", "1", "-c:v", "libx264", "-preset", "ultrafast", "-g", "25",
                        "-c:a", "aac", "-ac", "2", "-f", "flv",
                        f"rtmp://127.0.0.1:{rp.port}/app/seed"], timeout=30)
        time.sleep(0.3)
        c2s, s2c = (bytes(x) for x in rp.conns[0])
        HS = 1 + 2 * 1536
        save("rtmp_handshake", c2s[:1 + 1536], "ffmpeg-c0c1")
        save("rtmp_handshake", s2c[:HS], "kiln-s0s1s2")
        save("rtmp_server", c2s[HS:HS + 1024], "ffmpeg-publish-start")
        save("rtmp_server", c2s[HS:HS + MAX], "ffmpeg-publish-media")
        save("rtmp_chunk", c2s[HS:HS + MAX], "ffmpeg-publish")
        save("rtmp_chunk", s2c[HS:HS + MAX], "kiln-replies")
        save("rtmp_client", s2c[HS:HS + MAX], "kiln-replies")
        save("rtmp_client", s2c[:MAX], "kiln-with-handshake")
        msgs = rtmp_messages(c2s, HS) + rtmp_messages(s2c, HS)
        n_video = n_audio = 0
        for t, p in msgs:
            if t in (18, 20):
                save("rtmp_amf0", p)
            elif t == 9 and n_video < 4 and len(p) < MAX:
                save("rtmp_flv", p, f"video-{n_video}")
                if p[1:2] == b"\x00":  # AVC sequence header
                    save("codec_h264", p[5:], "avcc")
                elif n_video < 3:
                    save("codec_nal", p[5:5 + 1024], f"avc-frame-{n_video}")
                    # first NAL, for the H.264 unit parsers
                    if len(p) > 9:
                        l = int.from_bytes(p[5:9], "big")
                        save("codec_h264", p[9:9 + min(l, 512)], f"nal-{n_video}")
                n_video += 1
            elif t == 8 and n_audio < 3:
                save("rtmp_flv", p, f"audio-{n_audio}")
                if p[1:2] == b"\x00":
                    save("codec_aac", p[2:], "asc")
                n_audio += 1

        # ---- MPEG-TS from ffmpeg (H.264 + AAC, H.265 + MP3)
        tsf = os.path.join(tmp, "a.ts")
        for name, v, a in (("h264-aac", "libx264", "aac"), ("h265-mp3", "libx265", "libmp3lame")):
            r = subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y",
                                "-f", "lavfi", "-i", "testsrc2=size=160x90:rate=10",
                                "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                                "-t", "0.5", "-c:v", v, "-preset", "ultrafast", "-x265-params", "log-level=error", "-c:a", a, "-f", "mpegts", tsf],
                               timeout=60)
            if r.returncode != 0:
                continue
            data = open(tsf, "rb").read()
            save("ts_demux", data[:MAX], f"{name}-start")
            save("ts_demux", data[len(data) // 2 // 188 * 188:][:MAX], f"{name}-middle")
            for i in range(0, len(data) - 188, 188):
                pkt = data[i:i + 188]
                pid = ((pkt[1] & 0x1F) << 8) | pkt[2]
                pusi = pkt[1] & 0x40
                off = 4
                if pkt[3] & 0x20:
                    off += 1 + pkt[4]
                if pusi and pid in (0, 0x1000):
                    save("ts_psi", pkt[off + 1 + pkt[off]:], f"{name}-pid{pid}")
                elif pusi and off < 180 and pkt[off:off + 3] == b"\0\0\1":
                    save("ts_pes", pkt[off:], f"{name}-pes-{pid}")
                    es = pkt[off + 9 + pkt[off + 8]:]
                    if name.startswith("h265") and pid == 256:
                        save("codec_h265", es, f"{name}-es")
                    if name.endswith("mp3") and pid == 257:
                        save("codec_mp3", es, f"{name}-es")
                    if name.endswith("aac") and pid == 257:
                        save("codec_aac", es, f"{name}-adts")
                    if pid == 256:
                        save("codec_nal", es, f"{name}-annexb")
            # mux records: [track|flags][len:2][ts] + payload, from the real ES start
            save("ts_mux", bytes([0x08 | 0, 0, 64, 5]) + data[200:264] + bytes([1, 0, 32, 6]) + data[400:432], name)

        # ---- SRT: srt-live-transmit caller -> UDP proxy -> kiln's SRT listener
        up = UdpProxy(srt)
        ff = subprocess.Popen(["ffmpeg", "-hide_banner", "-loglevel", "error",
                               "-f", "lavfi", "-i", "testsrc2=size=160x90:rate=10", "-t", "2",
                               "-c:v", "libx264", "-preset", "ultrafast", "-f", "mpegts", "-"],
                              stdout=subprocess.PIPE)
        slt = subprocess.Popen(["srt-live-transmit", "-q", "file://con",
                                f"srt://127.0.0.1:{up.port}?streamid=app/srtseed&latency=200"],
                               stdin=ff.stdout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            slt.wait(timeout=15)
        except subprocess.TimeoutExpired:
            slt.kill()
        time.sleep(0.3)
        seen = set()
        for d in up.c2s + up.s2c:
            key = (d[0] >> 7, d[0:2] if d[0] & 0x80 else b"", len(d) > 200)
            if key not in seen:
                seen.add(key)
                save("srt_packet", d)
        lp = lambda ds: b"".join(bytes([min(len(d), 255)]) + d[:255] for d in ds)
        save("srt_listener", lp(up.c2s[:12]), "slt-caller-start")
        save("srt_listener", lp(up.c2s[:2]), "slt-handshake")
        save("srt_caller", lp(up.s2c[:12]), "kiln-listener-replies")
        save("srt_caller", lp(up.s2c[:2]), "kiln-handshake")

        # ---- small text inputs
        for sid in ["app/stream", "default/app/stream", "#!::h=default,r=app/stream,m=publish",
                    "#!::r=app/s,m=request", "live.example.com/app/cam"]:
            save("srt_stream_id", sid.encode())
        for p, u in [(0, "rtmp://127.0.0.1:1935/live"), (0, "rtmps://host.example.com/app/inst"),
                     (1, "srt://127.0.0.1:9000?latency=200000&streamid=app/x&mode=caller"),
                     (2, "udp://239.0.0.1:4000?ttl=4"), (2, "udp://[::1]:5000")]:
            save("push_url", bytes([p]) + u.encode())
    finally:
        kiln.kill()
        kiln.wait()


if __name__ == "__main__":
    main()
