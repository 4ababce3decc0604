#!/usr/bin/env bash
# Issue 44's DVR measurement: MINUTES (default 60) of a 2.5 Mb/s 1280x720
# stream (x264 at its defaults, B-frames, AAC) into two kilns side by side,
# one with an LL-HLS DVR of the whole run and one without, each with an
# ffmpeg LL-HLS viewer; RSS of both every 30 s. Near the end, hls.js in
# headless Chromium seeks back SEEK_BACK seconds (default six sevenths of
# the window then: 50 minutes of a 60-minute run),
# plays 20 s and returns to live, and ffmpeg reads the whole window through
# kiln. Then the stream ends, and the DVR folder must be gone 30 s later.
#
#   cargo build --release && soak/dvr_memory.sh [MINUTES]
#
# Needs ffmpeg, curl, chromium and hls.js (npm ci --prefix tests/web).
# Output and logs: $OUT (default /tmp/kiln-dvr-memory).
set -euo pipefail
MINUTES=${1:-60}
SECS=$((MINUTES * 60))
SEEK_BACK=${SEEK_BACK:-$(((SECS - 120) * 6 / 7))}
KILN=${KILN:-$(cd "$(dirname "$0")/.." && pwd)/target/release/kiln}
WEB=$(cd "$(dirname "$0")/../tests/web" && pwd)
OUT=${OUT:-/tmp/kiln-dvr-memory}
mkdir -p "$OUT" && cd "$OUT"
rm -rf store a b
pids=()
# Only what still runs: a pid of a process that ended may be another's now
# (pid_max is often 32,768), and killing it would stop that process.
trap 'kill $(jobs -pr) 2>/dev/null || true' EXIT

[ -f src.flv ] || ffmpeg -hide_banner -loglevel error -y \
  -f lavfi -i testsrc2=size=1280x720:rate=30 -f lavfi -i sine=frequency=440:sample_rate=48000 \
  -t 60 -c:v libx264 -preset veryfast -b:v 2400k -maxrate 2500k -bufsize 5000k -g 60 \
  -c:a aac -b:a 96k -ac 2 src.flv

config() { # name api rtmp llhls dvr-element
  cat > "$1.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<Server version="8">
  <Name>dvr-$1</Name>
  <IP>127.0.0.1</IP>
  <StateFile>$OUT/$1-state.json</StateFile>
  <Bind>
    <Managers><API><Port>$2</Port></API></Managers>
    <Providers><RTMP><Port>$3</Port></RTMP></Providers>
    <Publishers><LLHLS><Port>$4</Port></LLHLS></Publishers>
  </Bind>
  <Managers><API><AccessToken>t</AccessToken></API></Managers>
  <VirtualHosts><VirtualHost><Name>default</Name><Host><Names><Name>*</Name></Names></Host>
  <Applications><Application><Name>app</Name><Type>live</Type>
  <OutputProfiles><OutputProfile><Name>bypass</Name><OutputStreamName>\${OriginStreamName}</OutputStreamName>
    <Encodes><Video><Bypass>true</Bypass></Video><Audio><Bypass>true</Bypass></Audio></Encodes></OutputProfile></OutputProfiles>
  <Providers><RTMP/></Providers>
  <Publishers><LLHLS><ChunkDuration>0.5</ChunkDuration><SegmentDuration>6</SegmentDuration>$5</LLHLS></Publishers>
  </Application></Applications></VirtualHost></VirtualHosts>
</Server>
EOF
}
config a 18100 19350 18300 "<DVR><Enable>true</Enable><TempStoragePath>$OUT/store</TempStoragePath><MaxDuration>$SECS</MaxDuration></DVR>"
config b 18101 19351 18301 ""
KILN_LOG=info "$KILN" -c a.xml > a.log 2>&1 & A=$!; pids+=($A)
KILN_LOG=info "$KILN" -c b.xml > b.log 2>&1 & B=$!; pids+=($B)
sleep 2
for p in 19350 19351; do
  ffmpeg -hide_banner -loglevel error -stream_loop -1 -re -i src.flv -c copy -t $((SECS + 60)) \
    -f flv rtmp://127.0.0.1:$p/app/cam > /dev/null 2>&1 & pids+=($!)
done
PA=${pids[2]}
sleep 20
for p in 18300 18301; do
  ffmpeg -hide_banner -loglevel error -i http://127.0.0.1:$p/app/cam/llhls.m3u8 -c copy -f null - \
    > /dev/null 2>&1 & pids+=($!)
done
rss() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
echo "t_s,rss_dvr_kb,rss_nodvr_kb" > rss.csv
t0=$(date +%s)
while [ $(( $(date +%s) - t0 )) -lt $((SECS - 120)) ]; do
  echo "$(( $(date +%s) - t0 )),$(rss $A),$(rss $B)" >> rss.csv
  sleep 30
done
echo "RSS (KiB) before the seek: with DVR $(rss $A), without $(rss $B)"

page="file://$WEB/llhls.html?src=http://127.0.0.1:18300/app/cam/llhls.m3u8&seconds=40&seekAt=6&seekBack=$SEEK_BACK&liveAt=26"
timeout 90 chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
  --autoplay-policy=no-user-gesture-required --enable-logging=stderr --v=0 \
  --user-data-dir="$OUT/chromium" "$page" 2>&1 | grep -m1 -o "KILN-RESULT .*" > seek.txt || true
python3 - <<'EOF'
import json
t = open("seek.txt").read().strip()[len("KILN-RESULT "):]
t = t.rsplit('", source', 1)[0].replace('\\"', '"')
r = json.loads(t)
s, b = r["seek"], r["back"]
print(f"hls.js: seekable {s['seekable']}, seek {s['from']:.1f} -> {s['to']:.1f} s, "
      f"played to {s['after'][-1][1]} s, back to live: latency {b['after'][-1][2]} s, "
      f"errors {r['errors']}, stalls {r['stalls']}, frames decoded {r['decodedFrames']}")
EOF

base=http://127.0.0.1:18300/app/cam
video=$(curl -s $base/llhls.m3u8 | grep -m1 "^chunklist_.*_video_")
ffmpeg -hide_banner -nostdin -live_start_index 0 -i "$base/$video" -t $((SECS * 8 / 10)) -c copy -f null - \
  > window.txt 2>&1 || true
echo "the window through kiln: $(grep -o 'frame= *[0-9]*' window.txt | tail -1), $(grep -o 'time=[0-9:.]*' window.txt | tail -1)"
sleep 25
echo "RSS (KiB) 25 s after the read: with DVR $(rss $A), without $(rss $B)"

wait "$PA" || true
sleep 40
left=$(find store -name '*.m4s' | wc -l)
echo "segments left on disk 40 s after the stream ended: $left"
[ "$left" -eq 0 ]
