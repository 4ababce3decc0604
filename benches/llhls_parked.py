#!/usr/bin/env python3
"""Memory per parked LL-HLS viewer (issue 12).

With kiln serving an LL-HLS stream at BASE (e.g. http://127.0.0.1:3333/app/cam/),
opens N connections that each ask for a blocking playlist reload one segment
ahead (parked in kiln's loop), reads kiln's RSS before and after, then checks
that every one is answered 200 once the part exists.

    python3 benches/llhls_parked.py 1000 $(pgrep -f 'kiln -c') http://127.0.0.1:3333/app/cam/
"""
import re
import socket
import sys
import time
import urllib.request
from urllib.parse import urlparse

n, pid, base = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
host = urlparse(base)
master = urllib.request.urlopen(base + "llhls.m3u8").read().decode()
video = [l for l in master.splitlines() if l.startswith("chunklist_") and "_video_" in l][0]


def rss_kb():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1])
    return 0


time.sleep(1)
before = rss_kb()
socks = [socket.create_connection((host.hostname, host.port)) for _ in range(n)]
listing = urllib.request.urlopen(base + video).read().decode()
msn = int(re.search(r'PRELOAD-HINT:TYPE=PART,URI="part_\d+_(\d+)_', listing).group(1))
path = host.path + video
for s in socks:
    s.sendall(f"GET {path}?_HLS_msn={msn + 1}&_HLS_part=3 HTTP/1.1\r\nHost: {host.hostname}\r\n\r\n".encode())
time.sleep(1.5)
parked = rss_kb()
print(f"{n} parked viewers: RSS {before} -> {parked} kB, {(parked - before) / n:.1f} KiB per viewer")
ok = 0
for s in socks:
    s.settimeout(20)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    ok += data.startswith(b"HTTP/1.1 200")
print(f"answered 200 when the part came: {ok}/{n}; RSS then {rss_kb()} kB")
