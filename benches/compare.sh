#!/usr/bin/env bash
# kiln side by side with OvenMediaEngine, nginx / nginx-rtmp, Janus, libsrt
# and a raw UDP loop, on 127.0.0.1.
#
# Builds kiln --release, runs every bench with kiln and its peer in the same
# run (one after the other, same machine, same load), and rewrites the
# results section of BENCHMARKS.md (between the RESULTS markers).
# Installs nothing: a missing tool is named with the apt-get line to run.
#
#   benches/compare.sh                 # everything (about 9 minutes)
#   BENCH_SECONDS=3 benches/compare.sh # shorter windows while developing
#   BENCH_ONLY="api rtmp" benches/compare.sh   # a subset: api tls writes rtmp latency udp srt srtenc llhls record admission play pull startup cluster console webrtc channels abr ome
#   BENCH_ONLY=ome: kiln against OvenMediaEngine (benches/compare_ome.sh; OME from ../shared/tools/ome or KILN_OME_DIR)
#   BENCH_ONLY=abr: one stream of three renditions against three streams (benches/compare_abr.sh; FFmpeg 9 from imageio-ffmpeg)
#   BENCH_RTMP_N="1 20 100 300" BENCH_UDP_N="100 500 1000" (defaults)
#   BENCH_LAT_N="1 100" BENCH_WEBRTC_N="1 100 500" BENCH_WEBRTC_LAT_N="1 500" BENCH_UDP_FFMPEG_N="1 10" BENCH_SRT_ENC_N="10" (defaults)
#   BENCH_NO_WRITE=1   print the tables, leave BENCHMARKS.md alone
#
# Every load is bounded in time (wrk -d, timeout on ffmpeg) and in count
# (N destinations); every process started here is stopped on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECS=${BENCH_SECONDS:-10}
WARM=${BENCH_WARMUP:-5}
REPEAT=${BENCH_REPEAT:-2}
ONLY=${BENCH_ONLY:-"api tls writes rtmp latency udp srt srtenc llhls record admission play pull startup cluster console webrtc channels abr ome"}
WEBRTC_NS=${BENCH_WEBRTC_N:-"1 100 500"}
WEBRTC_LAT_NS=${BENCH_WEBRTC_LAT_N:-"1 500"}
CLUSTER_NS=${BENCH_CLUSTER_N:-"0 300 1000"}
RECORD_NS=${BENCH_RECORD_N:-"1 10 50"}
PLAY_NS=${BENCH_PLAY_N:-"10 100"}
RTMP_NS=${BENCH_RTMP_N:-"1 20 100 300"}
UDP_NS=${BENCH_UDP_N:-"100 500 1000"}
LAT_NS=${BENCH_LAT_N:-"1 100"}
UDP_FF_NS=${BENCH_UDP_FFMPEG_N:-"1 10"}
SRT_NS=${BENCH_SRT_N:-"1 10 50"}
SRT_ENC_NS=${BENCH_SRT_ENC_N:-"10"}
LLHLS_VIEWERS=${BENCH_LLHLS_VIEWERS:-1000}
LLHLS_CHUNKS=${BENCH_LLHLS_CHUNKS:-"0.5 0.2"}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
NGX_RTMP_MOD=${NGX_RTMP_MOD:-/usr/lib/nginx/modules/ngx_rtmp_module.so}
TOKEN='kiln:bench'
AUTH="Basic $(printf %s "$TOKEN" | base64)"

ulimit -n "$(ulimit -Hn)" 2>/dev/null || ulimit -n 4096 2>/dev/null || true # 1000 UDP sinks
want() { [[ " $ONLY " == *" $1 "* ]]; }
log() { printf '[compare %s] %s\n' "$(date +%T)" "$*" >&2; }

# --- tools -----------------------------------------------------------------
missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$1 (apt-get install $2)"); }
need cargo "rustup: https://rustup.rs"
need curl curl
need openssl openssl
need python3 python3
need nginx nginx
if want api || want tls || want writes || want channels; then need wrk wrk; fi
if want srt || want srtenc || want play; then need srt-live-transmit srt-tools; fi
if want play || want pull; then need rtmpdump rtmpdump; fi
if want cluster; then need redis-server redis-server; need redis-cli redis-tools; fi
if want webrtc; then need janus janus; need ffmpeg ffmpeg; fi
if want console; then
    need node nodejs; need chromium chromium
    [[ -e $ROOT/tests/web/node_modules/puppeteer-core ]] || missing+=("puppeteer-core (npm ci --prefix tests/web)")
fi
if want pull && ! /usr/bin/python3 -c "import gi; gi.require_version('GstRtspServer', '1.0')" 2>/dev/null; then
    missing+=("gst-rtsp-server for Python (apt-get install python3-gi gir1.2-gst-rtsp-server-1.0)")
fi
if want rtmp || want udp || want srt || want srtenc || want llhls || want record || want admission || want play || want pull || want cluster || want console || want channels; then
    need ffmpeg ffmpeg
    need ss iproute2
    [[ -f $NGX_RTMP_MOD ]] || missing+=("$NGX_RTMP_MOD (apt-get install libnginx-mod-rtmp)")
fi
if want ome; then
    ome=${KILN_OME_DIR:-$ROOT/../shared/tools/ome}
    if [[ ! -x $ome/OvenMediaEngine ]]; then
        missing+=("OvenMediaEngine in $ome (../shared/tools/ome, or KILN_OME_DIR)")
    elif ldd "$ome/OvenMediaEngine" 2>/dev/null | grep -q "not found"; then
        missing+=("OvenMediaEngine's libraries ($ome/setup.sh installs them)")
    fi
    need ffmpeg ffmpeg
    need ss iproute2
fi
if ((${#missing[@]})); then
    printf 'missing: %s\n' "${missing[@]}" >&2
    exit 1
fi

# --- scratch space and clean-up -------------------------------------------
WORK=$(mktemp -d /tmp/kiln-bench.XXXXXX)
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    sleep 0.3
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    [[ -n ${BENCH_KEEP:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
stop() { # stop one process we started (and wait for it)
    local p=$1
    kill "$p" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
}

# Free loopback ports: ask the kernel, then release them.
free_ports() {
    python3 - "$1" <<'EOF'
import socket, sys
ss = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ss.append(s)
print(" ".join(str(s.getsockname()[1]) for s in ss))
EOF
}
low_port() { # a free port below the ephemeral range (no outgoing connection takes it meanwhile)
    python3 -c '
import random, socket
for _ in range(1000):
    p = random.randrange(20000, 32000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); print(p); break
    except OSError:
        pass
    finally:
        s.close()'
}
wait_tcp() { # port [tries]
    for _ in $(seq "${2:-100}"); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    log "nothing listens on $1"; return 1
}

# CPU ticks (utime+stime) and peak RSS of a set of pids.
TCK=$(getconf CLK_TCK)
PERF_DIR=${BENCH_PERF_DIR:-$TARGET/bench-perf}
[[ -z ${BENCH_PERF:-} ]] || mkdir -p "$PERF_DIR"
cpu_ticks() { local t=0 p; for p in "$@"; do
    [[ -r /proc/$p/stat ]] || continue
    t=$((t + $(awk '{sub(/.*\) /,""); print $12+$13}' "/proc/$p/stat"))); done; echo $t; }
cpu_split() { local u=0 k=0 p; for p in "$@"; do # "user system" ticks
    [[ -r /proc/$p/stat ]] || continue
    read -r a b < <(awk '{sub(/.*\) /,""); print $12, $13}' "/proc/$p/stat"); u=$((u + a)); k=$((k + b)); done; echo "$u $k"; }
hwm_kb() { local t=0 p; for p in "$@"; do
    [[ -r /proc/$p/status ]] || continue
    t=$((t + $(awk '/^VmHWM/{print $2}' "/proc/$p/status"))); done; echo $t; }
rss_kb() { local t=0 p; for p in "$@"; do
    [[ -r /proc/$p/status ]] || continue
    t=$((t + $(awk '/^VmRSS/{print $2}' "/proc/$p/status"))); done; echo $t; }
rchar() { local t=0 p; for p in "$@"; do
    [[ -r /proc/$p/io ]] || continue
    t=$((t + $(awk '/^rchar/{print $2}' "/proc/$p/io"))); done; echo $t; }
sink_bytes() { # bytes received so far on every connection of the sink port
    ss -tinH state established "( sport = :$1 )" 2>/dev/null |
        grep -o 'bytes_received:[0-9]*' | awk -F: '{t+=$2} END{print t+0}'; }
served_bytes() { # bytes the server on port $1 has had acknowledged, all its connections
    ss -tinH state established "( sport = :$1 )" 2>/dev/null |
        grep -o 'bytes_acked:[0-9]*' | awk -F: '{t+=$2} END{print t+0}'; }
cpu_ns() { local t=0 p; for p in "$@"; do # CPU time in ns (schedstat), finer than ticks
    [[ -r /proc/$p/schedstat ]] && t=$((t + $(cut -d' ' -f1 "/proc/$p/schedstat"))); done; echo $t; }
udp_out() { awk '/^Udp:/ && $2 ~ /^[0-9]+$/ {print $5}' /proc/net/snmp; } # OutDatagrams, machine-wide
wchar() { local t=0 p; for p in "$@"; do
    [[ -r /proc/$p/io ]] || continue
    t=$((t + $(awk '/^wchar/{print $2}' "/proc/$p/io"))); done; echo $t; }
nginx_pids() { # master pid -> master + workers
    echo "$1 $(pgrep -P "$1" | tr '\n' ' ')"; }
window() { # pid tag: sleep the window; with BENCH_PERF=1 also record a profile of pid
    if [[ -n ${BENCH_PERF:-} ]] && command -v perf >/dev/null; then
        perf record -q -e cpu-clock -F 999 -g -p "$1" -o "$PERF_DIR/perf-$2.data" -- sleep "$SECS" >/dev/null 2>&1 || sleep "$SECS"
        log "profile: perf report -i $PERF_DIR/perf-$2.data --no-children"
    else
        sleep "$SECS"
    fi
}
# The window of a relay whose user/kernel split is reported: with perf, the
# split is the share of 4999 Hz cpu-clock samples outside the kernel (the
# tick-sampled utime of /proc, ~100 samples a second, moves by a third
# between runs at these loads); SPLIT_SHARE is set to it, or empty.
SPLIT_SHARE=
window_split() { # pid tag
    SPLIT_SHARE=
    if [[ -z ${BENCH_PERF:-} ]] && command -v perf >/dev/null; then
        local data=$WORK/split-$2.data
        if perf record -q -e cpu-clock -F 4999 -p "$1" -o "$data" -- sleep "$SECS" >/dev/null 2>&1; then
            SPLIT_SHARE=$(perf report -i "$data" --no-children --sort dso --stdio 2>/dev/null |
                awk '/^#/ {next} /%/ {gsub("%","",$1); if ($2 ~ /kernel/) k+=$1; else u+=$1}
                     END {if (u+k > 0) printf "%.4f\n", u/(u+k)}')
            rm -f "$data"
            return
        fi
    fi
    window "$@"
}
calc() { python3 -c "print($*)"; }
fmt() { python3 -c "import sys; v=float(sys.argv[1]); print(f'{v:.${2:-2}f}')" "$1"; }

# --- build ------------------------------------------------------------------
log "building kiln --release (target: $TARGET)"
(cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo build --release --quiet --bin kiln)
KILN=$TARGET/release/kiln

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null

read -r API_P TLS_P RTMP_IN NGX_P NGX_TLS NGX_RTMP SINK_P LLHLS_P SRT_IN <<<"$(free_ports 9)"
# With KILN_LLHLS=<ChunkDuration> set, kiln_config adds the viewer port and
# LL-HLS to the application (the other benches run without the packager).
KILN_LLHLS=
# With KILN_VHOST_EXTRA set, it goes into the virtual host (access control).
KILN_VHOST_EXTRA=
# With KILN_SRT_IN set, kiln also listens for SRT on $SRT_IN (players in request mode).
KILN_SRT_IN=
# More of the application's <Providers> (the channels bench: <Schedule>).
KILN_PROVIDERS_EXTRA=

kiln_config() { # dir statefile
    cat >"$1/server.xml" <<EOF
<?xml version="1.0"?>
<Server version="8">
  <Name>kiln</Name>
  <IP>127.0.0.1</IP>
  <StateFile>$2</StateFile>
  <Bind>
    <Managers><API><Port>$API_P</Port><TLSPort>$TLS_P</TLSPort></API></Managers>
    <Providers><RTMP><Port>$RTMP_IN</Port></RTMP>$( [[ -n $KILN_SRT_IN ]] && echo "<SRT><Port>$SRT_IN</Port></SRT>" )</Providers>
    $( [[ -n $KILN_LLHLS ]] && echo "<Publishers><LLHLS><Port>$LLHLS_P</Port></LLHLS></Publishers>" )
  </Bind>
  <Managers>
    <Host><Names><Name>*</Name></Names>
      <TLS><CertPath>$WORK/cert.pem</CertPath><KeyPath>$WORK/key.pem</KeyPath></TLS></Host>
    <API><AccessToken>$TOKEN</AccessToken></API>
  </Managers>
  <VirtualHosts><VirtualHost><Name>default</Name><Host><Names><Name>*</Name></Names></Host>
    $KILN_VHOST_EXTRA
    <Applications><Application><Name>app</Name><Type>live</Type>
      <OutputProfiles><OutputProfile><Name>bypass</Name><Encodes>
        <Video><Name>bypass_video</Name><Bypass>true</Bypass></Video>
        <Audio><Name>bypass_audio</Name><Bypass>true</Bypass></Audio>
      </Encodes></OutputProfile></OutputProfiles>
      <Providers><RTMP/>$KILN_PROVIDERS_EXTRA</Providers><Publishers><Push/>$( [[ -n $KILN_LLHLS ]] && echo "<LLHLS><ChunkDuration>$KILN_LLHLS</ChunkDuration><SegmentDuration>2</SegmentDuration></LLHLS>" )<FILE><RootPath>$WORK/kiln-rec</RootPath></FILE></Publishers>
    </Application></Applications>
  </VirtualHost></VirtualHosts>
</Server>
EOF
}

KILN_PID=
start_kiln() { # [statefile]
    local d=$WORK/kiln
    rm -rf "$d"; mkdir -p "$d"
    kiln_config "$d" "${1:-$d/state.json}"
    "$KILN" -c "$d/server.xml" 2>"$d/log" &
    KILN_PID=$!; PIDS+=("$KILN_PID")
    wait_tcp "$API_P" 200
}
stop_kiln() { stop "$KILN_PID"; KILN_PID=; }
api() { # method path [body]
    curl -sS -m 5 -H "Authorization: $AUTH" -X "$1" "http://127.0.0.1:$API_P$2" \
        ${3:+-H 'Content-Type: application/json' --data-binary "$3"}; }

NGX_PID=
start_nginx() { # name conf-body   (1 worker, daemon off, logs in WORK)
    local d=$WORK/$1
    mkdir -p "$d"
    cat >"$d/nginx.conf" <<EOF
$( [[ $2 == *rtmp* ]] && echo "load_module $NGX_RTMP_MOD;" )
$( ((EUID == 0)) && echo "user root;" )
worker_processes 1;
daemon off;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 4096; }
$2
EOF
    nginx -p "$d" -e "$d/error.log" -c "$d/nginx.conf" &
    NGX_PID=$!; PIDS+=("$NGX_PID")
}

SECTIONS=()
add() { SECTIONS+=("$*"); }
RATIOS=()

# --- API throughput and TLS -------------------------------------------------
wrk_run() { # url -> "req/s p99ms"
    wrk -t1 -c64 -d"${SECS}s" --latency -H "Authorization: $AUTH" "$1" 2>&1 |
        python3 -c '
import sys, re
t = sys.stdin.read()
rps = re.search(r"Requests/sec:\s+([\d.]+)", t)
p99 = re.search(r"\n\s+99%\s+([\d.]+)(us|ms|s)", t)
err = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
if not rps or not p99:
    sys.stderr.write(t); print("0 0 0"); sys.exit()
scale = {"us": 0.001, "ms": 1, "s": 1000}[p99.group(2)]
print(rps.group(1), float(p99.group(1)) * scale, err.group(1) if err else 0)'
}

if want api || want tls; then
    start_kiln
    BODY=$(api GET /v1/vhosts)
    mkdir -p "$WORK/www/v1"
    printf %s "$BODY" >"$WORK/www/v1/vhosts"
    start_nginx ngx-http "
http {
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 65;
    ssl_session_cache off;
    server {
        listen 127.0.0.1:$NGX_P;
        listen 127.0.0.1:$NGX_TLS ssl;
        ssl_certificate $WORK/cert.pem;
        ssl_certificate_key $WORK/key.pem;
        root $WORK/www;
        location / { default_type 'application/json;charset=UTF-8'; }
    }
}"
    wait_tcp "$NGX_P"
    curl -sf -o /dev/null "http://127.0.0.1:$NGX_P/v1/vhosts" || { log "nginx does not serve the body"; exit 1; }
    rows=""
    for kind in http tls; do
        if [[ $kind == http ]]; then want api || continue; ku=http://127.0.0.1:$API_P; nu=http://127.0.0.1:$NGX_P
        else want tls || continue; ku=https://127.0.0.1:$TLS_P; nu=https://127.0.0.1:$NGX_TLS; fi
        log "API $kind: kiln"
        c0=$(cpu_ticks "$KILN_PID")
        read -r k_rps k_p99 k_err <<<"$(wrk_run "$ku/v1/vhosts")"
        k_us=$(calc "1e6*($(cpu_ticks "$KILN_PID")-$c0)/$TCK/max($k_rps*$SECS,1)")
        log "API $kind: nginx"
        np=$(nginx_pids "$NGX_PID"); c0=$(cpu_ticks $np)
        read -r n_rps n_p99 n_err <<<"$(wrk_run "$nu/v1/vhosts")"
        n_us=$(calc "1e6*($(cpu_ticks $np)-$c0)/$TCK/max($n_rps*$SECS,1)")
        r=$(fmt "$(calc "$k_rps/max($n_rps,1)")")
        p=$(fmt "$(calc "$k_p99/max($n_p99,0.001)")")
        pass_r=$(calc "'yes' if $k_rps >= 1.5*$n_rps else 'no'")
        pass_p=$(calc "'yes' if $k_p99 <= $n_p99 else 'no'")
        rows+="| $kind | $(fmt "$k_rps" 0) | $(fmt "$n_rps" 0) | **$r** (≥ 1.5: $pass_r) | $(fmt "$k_p99" 3) | $(fmt "$n_p99" 3) | $p (≤ 1: $pass_p) | $(fmt "$k_us" 1) / $(fmt "$n_us" 1) ($(fmt "$(calc "$k_us/max($n_us,0.01)")")) | $k_err / $n_err |
"
    done
    add "### API throughput (\`GET /v1/vhosts\`, Basic auth)

wrk 1 thread, 64 keep-alive connections, ${SECS} s per side. nginx: 1 worker,
\`daemon off\`, access log off, the same JSON body as a static file, same
certificate (P-256) for TLS. wrk and the server share the machine, so req/s is
capped by wrk's own CPU on small machines; the server's CPU per request
(utime+stime / requests) is the ratio that does not depend on the client. Body: \`$BODY\` ($(printf %s "$BODY" | wc -c) bytes).

| port | kiln req/s | nginx req/s | ratio (target) | kiln p99 ms | nginx p99 ms | p99 ratio (target) | server CPU µs/request kiln / nginx (ratio) | non-2xx kiln / nginx |
|---|---|---|---|---|---|---|---|---|
$rows"
    stop "$NGX_PID"
    stop_kiln
fi

# --- API writes ---------------------------------------------------------------
if want writes; then
    start_kiln
    cat >"$WORK/post.lua" <<EOF
local n = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "$AUTH"
request = function()
    n = n + 1
    return wrk.format(nil, "/v1/vhosts", nil, '[{"name":"b' .. n .. '","host":{"names":["b' .. n .. '.example.com"]}}]')
end
EOF
    WSECS=$(( SECS < 5 ? SECS : 5 ))
    log "API writes: kiln, ${WSECS}s"
    wrk -t1 -c4 -d"${WSECS}s" --latency -s "$WORK/post.lua" "http://127.0.0.1:$API_P" >"$WORK/writes.txt" 2>&1 || true
    made=$(api GET /v1/vhosts | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["response"])-1)')
    sz=$(stat -c %s "$WORK/kiln/state.json" 2>/dev/null || echo 0)
    p99=$(python3 -c '
import re,sys
t=open(sys.argv[1]).read(); m=re.search(r"\n\s+99%\s+([\d.]+)(us|ms|s)", t)
print(float(m.group(1))*{"us":0.001,"ms":1,"s":1000}[m.group(2)] if m else 0)' "$WORK/writes.txt")
    # the same with a state file that already holds 1,000 hosts: the cost of each write grows with it
    add "### API writes (\`POST /v1/vhosts\`, one host per request, fsync'd)

wrk 1 thread, 4 connections, ${WSECS} s, unique names (Lua). Filesystem of \`$WORK\`: $(df -T "$WORK" | awk 'NR==2{print $2}').

| hosts created | creations/s | p99 ms | state file at the end |
|---|---|---|---|
| $made | $(fmt "$(calc "$made/$WSECS")" 0) | $(fmt "$p99" 2) | $((sz / 1024)) KiB |
"
    stop_kiln
fi

# --- media source -------------------------------------------------------------
SRC=$TARGET/bench-src-720p-2500k.flv
if (want rtmp || want latency || want udp || want srt || want srtenc || want llhls || want record || want play || want pull || want cluster || want console || want channels || want ome) && [[ ! -s $SRC ]]; then
    log "encoding the 20 s source once: $SRC"
    nice ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=1280x720:rate=30 \
        -f lavfi -i sine=frequency=440:sample_rate=48000 -t 20 \
        -c:v libx264 -preset veryfast -tune zerolatency -b:v 2500k -maxrate 2500k -bufsize 2500k \
        -g 60 -pix_fmt yuv420p -c:a aac -b:a 128k -ar 48000 "$SRC.tmp.flv"
    mv "$SRC.tmp.flv" "$SRC"
fi
SRC_PID=
start_source() { # rtmp url; loops the file, bounded by timeout
    timeout $((WARM + SECS + 60)) ffmpeg -hide_banner -loglevel error -nostdin -re -stream_loop -1 \
        -i "$SRC" -c copy -f flv "$1" &
    SRC_PID=$!; PIDS+=("$SRC_PID")
}
us_ms() { calc "'%.3f' % ($1/1000)"; }
lower_p99() { # latency-run-a run-b -> the one with the lower p99 (an empty one loses)
    python3 -c "import sys; a,b=sys.argv[1],sys.argv[2]; print(a if not b or (a and int(a.split()[2])<int(b.split()[2])) else b)" "$1" "$2"
}
wait_stream() { # kiln: until app has stream src
    for _ in $(seq 100); do
        api GET /v1/vhosts/default/apps/app/streams 2>/dev/null | grep -q '"src"' && return 0
        sleep 0.1
    done
    log "source did not appear in kiln"; return 1
}
push_body() { # id protocol url [streamKey]: a :startPush body for the stream "src"
    printf '{"id":"%s","stream":{"name":"src"},"protocol":"%s","url":"%s"%s}' \
        "$1" "$2" "$3" "${4:+,\"streamKey\":\"$4\"}"
}
start_push() { api POST /v1/vhosts/default/apps/app:startPush "$(push_body "$@")" >/dev/null; }
kiln_with_source() { # kiln, the source publishing to it, and the stream listed
    start_kiln
    start_source "rtmp://127.0.0.1:$RTMP_IN/app/src"
    wait_stream
}
sent_bytes() { # sum of sentBytes over kiln's pushes
    api POST /v1/vhosts/default/apps/app:pushes '{}' | python3 -c '
import json,sys
r=json.load(sys.stdin).get("response") or []
print(sum(t.get("sentBytes",0) for t in r), sum(1 for t in r if t.get("state")=="pushing"))'
}

# --- RTMP fan-out ---------------------------------------------------------------
if want rtmp; then
    rows=""
    mem_n=(); mem_k=(); mem_g=() # N and peak RSS (kB) of each side, for the per-push figure
    for N in $RTMP_NS; do
        # one nginx-rtmp sink for both sides: live on, no record
        start_nginx sink "rtmp { server { listen 127.0.0.1:$SINK_P; chunk_size 4096;
            application live { live on; record off; } } }"
        SINK_PID=$NGX_PID
        wait_tcp "$SINK_P"

        k_cpu=; n_cpu=; k_hwm=; n_hwm=; k_user=; k_sys=; n_user=; n_sys=
        for rep in $(seq "$REPEAT"); do # alternate, keep the least CPU of each side
            # kiln
            kiln_with_source
            for i in $(seq "$N"); do start_push "p$i" rtmp "rtmp://127.0.0.1:$SINK_P/live" "s$i"; done
            sleep "$WARM"
            read -r u0 y0 <<<"$(cpu_split "$KILN_PID")"; s0=$(sink_bytes "$SINK_P")
            window_split "$KILN_PID" "kiln-rtmp-$N"
            read -r u1 y1 <<<"$(cpu_split "$KILN_PID")"; s1=$(sink_bytes "$SINK_P")
            read -r _ k_push <<<"$(sent_bytes)"
            c=$(calc "($u1-$u0+$y1-$y0)/$TCK")
            if [[ -z $k_cpu ]] || (($(calc "int($c < $k_cpu)"))); then
                k_cpu=$c; k_user=$(calc "($u1-$u0)/$TCK"); k_sys=$(calc "($y1-$y0)/$TCK")
                if [[ -n $SPLIT_SHARE ]]; then
                    k_user=$(calc "$c*$SPLIT_SHARE"); k_sys=$(calc "$c*(1-$SPLIT_SHARE)")
                fi
            fi
            k_hwm=$(calc "max(${k_hwm:-0}, $(hwm_kb "$KILN_PID"))")
            k_sink=$(calc "($s1-$s0)*8/$SECS/1e6")
            stop "$SRC_PID"; stop_kiln
            log "RTMP N=$N run $rep kiln: cpu ${k_cpu}s, hwm ${k_hwm} kB, sink ${k_sink} Mb/s, pushing $k_push"

            # nginx-rtmp relay with N push lines
            pushes=""
            for i in $(seq "$N"); do pushes+="push rtmp://127.0.0.1:$SINK_P/live/s$i;
    "; done
            start_nginx relay "rtmp { server { listen 127.0.0.1:$NGX_RTMP; chunk_size 4096;
                application app { live on; record off;
    $pushes } } }"
            RELAY_PID=$NGX_PID
            wait_tcp "$NGX_RTMP"
            start_source "rtmp://127.0.0.1:$NGX_RTMP/app/src"
            sleep "$WARM"
            rp=$(nginx_pids "$RELAY_PID")
            read -r u0 y0 <<<"$(cpu_split $rp)"; s0=$(sink_bytes "$SINK_P")
            window_split "$(pgrep -P "$RELAY_PID" | head -1)" "nginx-rtmp-$N"
            read -r u1 y1 <<<"$(cpu_split $rp)"; s1=$(sink_bytes "$SINK_P")
            c=$(calc "($u1-$u0+$y1-$y0)/$TCK")
            if [[ -z $n_cpu ]] || (($(calc "int($c < $n_cpu)"))); then
                n_cpu=$c; n_user=$(calc "($u1-$u0)/$TCK"); n_sys=$(calc "($y1-$y0)/$TCK")
                if [[ -n $SPLIT_SHARE ]]; then
                    n_user=$(calc "$c*$SPLIT_SHARE"); n_sys=$(calc "$c*(1-$SPLIT_SHARE)")
                fi
            fi
            n_hwm=$(calc "max(${n_hwm:-0}, $(hwm_kb $rp))")
            n_sink=$(calc "($s1-$s0)*8/$SECS/1e6")
            stop "$SRC_PID"; stop "$RELAY_PID"
            log "RTMP N=$N run $rep nginx-rtmp: cpu ${n_cpu}s, hwm ${n_hwm} kB, sink ${n_sink} Mb/s"
        done
        stop "$SINK_PID"

        cr=$(calc "'n/a (< 5 ticks)' if max($k_cpu,$n_cpu) < 5/$TCK else '%.2f' % ($k_cpu/max($n_cpu,1/$TCK))")
        ur=$(calc "'n/a (< 5 ticks)' if max($k_user,$n_user) < 5/$TCK else '%.2f' % ($k_user/max($n_user,1/$TCK))")
        mr=$(fmt "$(calc "$k_hwm/max($n_hwm,1)")")
        tgt=""; [[ $N == 300 ]] && tgt=" (≤ 0.75: $(calc "'yes' if $k_cpu <= 0.75*$n_cpu else 'no'"))"
        utgt=""; [[ $N == 300 ]] && utgt=" (≤ 0.5: $(calc "'yes' if $k_user <= 0.5*$n_user else 'no'"))"
        mt=""; [[ $N == 300 ]] && mt=" (≤ 1: $(calc "'yes' if $k_hwm <= $n_hwm else 'no'"))"
        mem_n+=("$N"); mem_k+=("${k_hwm%.*}"); mem_g+=("${n_hwm%.*}")
        rows+="| $N | $(fmt "$k_cpu") ($(fmt "$k_user") / $(fmt "$k_sys")) | $(fmt "$n_cpu") ($(fmt "$n_user") / $(fmt "$n_sys")) | **$cr**$tgt | **$ur**$utgt | $((${k_hwm%.*} / 1024)) | $((${n_hwm%.*} / 1024)) | $mr$mt | $(fmt "$k_sink" 1) / $(fmt "$n_sink" 1) | $k_push/$N |
"
    done
    if [[ -n $SPLIT_SHARE ]]; then
        split_how="the share of \`perf record -e cpu-clock -F 4999\` samples outside the
kernel, times the CPU (the tick-sampled utime of \`/proc\` has too few samples
at these loads to tell user space apart)"
    else
        split_how="utime and stime (perf not found)"
    fi
    add "### RTMP fan-out (1 source -> N RTMP destinations)

Source: ffmpeg \`-re -stream_loop -1 -c copy\` of a 20 s file (testsrc2 720p30,
H.264 2.5 Mb/s, AAC 128 kb/s), published over RTMP. Relay: kiln with N
\`:startPush\` tasks, or nginx-rtmp (1 worker) with N \`push\` lines. Sink: one
nginx-rtmp server (\`live on\`, no record), N stream names, the same for both
sides. CPU = utime+stime of the relay only (nginx: master + worker) over
${SECS} s after ${WARM} s of warm-up, kiln and nginx alternated ${REPEAT} times, the
least CPU of each side kept (other load on the machine only ever adds). The
user / kernel split: $split_how. Peak RSS = VmHWM. Sink Mb/s = bytes the sink
received in the window (\`ss -ti\` bytes_received) (proves both sides delivered the same).

| N | kiln CPU s (user / kernel) | nginx-rtmp CPU s (user / kernel) | CPU ratio (target at 300) | user-space CPU ratio (target at 300) | kiln peak RSS MiB | nginx peak RSS MiB | RSS ratio | sink Mb/s kiln / nginx | kiln pushing |
|---|---|---|---|---|---|---|---|---|---|
$rows"
    if ((${#mem_n[@]} > 1)); then
        last=$((${#mem_n[@]} - 1))
        dn=$((mem_n[last] - mem_n[0]))
        add "Memory per active RTMP push (peak RSS at N = ${mem_n[last]} minus at N = ${mem_n[0]}, over the
$dn added pushes): kiln **$(fmt "$(calc "(${mem_k[last]} - ${mem_k[0]}) / $dn")" 1) KiB**, nginx-rtmp
$(fmt "$(calc "(${mem_g[last]} - ${mem_g[0]}) / $dn")" 1) KiB.
"
    fi
fi

# --- added latency --------------------------------------------------------------
if want latency; then
    log "building the latency probe (cargo bench --bench latency)"
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo bench --quiet --bench latency --no-run 2>"$WORK/latency-build.err") ||
        { cat "$WORK/latency-build.err" >&2; exit 1; }
    PROBE=$(ls -t "$TARGET"/release/deps/latency-* | grep -v '\.d$' | head -1)
    read -r PROBE_P <<<"$(free_ports 1)"
    LAT_SECS=$((SECS + WARM + 5))
    probe() { # publish-url -> "p50 p90 p99 max matched sent"
        "$PROBE" --file "$SRC" --publish "$1" --sink-port "$PROBE_P" \
            --seconds "$LAT_SECS" --warm "$WARM" 2>>"$WORK/probe.err" | awk '/^latency_us/{print $2, $3, $4, $5, $6, $7}'
    }
    rows=""
    for N in $LAT_NS; do
        # the other N-1 destinations go to an nginx-rtmp sink
        start_nginx sink "rtmp { server { listen 127.0.0.1:$SINK_P; chunk_size 4096;
            application live { live on; record off; } } }"
        SINK_PID=$NGX_PID
        wait_tcp "$SINK_P"
        k_best=; n_best=
        for rep in $(seq "$REPEAT"); do # alternate; keep each side's run with the lower p99
            start_kiln
            # the probe's destination last: it waits for every other push
            for i in $(seq 2 "$N"); do start_push "p$i" rtmp "rtmp://127.0.0.1:$SINK_P/live" "s$i"; done
            start_push probe rtmp "rtmp://127.0.0.1:$PROBE_P/live" s1
            k=$(probe "rtmp://127.0.0.1:$RTMP_IN/app/src")
            [[ -n $k ]] || { log "latency probe failed: $(tail -3 "$WORK/probe.err")"; exit 1; }
            stop_kiln
            log "latency N=$N run $rep kiln (p50 p90 p99 max µs, matched, sent): $k"
            k_best=$(lower_p99 "$k" "$k_best")

            pushes=""
            for i in $(seq 2 "$N"); do pushes+="push rtmp://127.0.0.1:$SINK_P/live/s$i;
    "; done
            pushes+="push rtmp://127.0.0.1:$PROBE_P/live/s1;
    "
            start_nginx relay "rtmp { server { listen 127.0.0.1:$NGX_RTMP; chunk_size 4096;
                application app { live on; record off;
    $pushes } } }"
            RELAY_PID=$NGX_PID
            wait_tcp "$NGX_RTMP"
            n=$(probe "rtmp://127.0.0.1:$NGX_RTMP/app/src")
            [[ -n $n ]] || { log "latency probe failed: $(tail -3 "$WORK/probe.err")"; exit 1; }
            stop "$RELAY_PID"
            log "latency N=$N run $rep nginx-rtmp (p50 p90 p99 max µs, matched, sent): $n"
            n_best=$(lower_p99 "$n" "$n_best")
        done
        stop "$SINK_PID"
        read -r kp50 kp90 kp99 kmax km ks <<<"$k_best"
        read -r np50 np90 np99 nmax nm ns <<<"$n_best"
        rows+="| $N | kiln | $(us_ms "$kp50") | $(us_ms "$kp90") | **$(us_ms "$kp99")** ($(calc "'yes' if $kp99 < 1000 else 'no'")) | $(us_ms "$kmax") | $km / $ks |
| $N | nginx-rtmp | $(us_ms "$np50") | $(us_ms "$np90") | $(us_ms "$np99") | $(us_ms "$nmax") | $nm / $ns |
"
    done
    add "### Added latency (RTMP in -> RTMP push out, per video frame)

\`cargo bench --bench latency\` publishes the same 720p30 2.5 Mb/s file over RTMP
at its own pace and is also the RTMP server the relay pushes to; per video
frame it measures from just before the frame's bytes enter the publishing
socket to just after the sink has parsed the whole frame (frames matched by
payload hash). That is the relay's ingest-read-to-push-write time plus two
loopback hops and the probe's own parsing, the same for both relays. N = the
relay's destinations (the probe is the last one made, so it waits for the
others; they go to an nginx-rtmp sink).
${LAT_SECS} s per run, the first ${WARM} s not counted (kiln starts a push with
the last GOP, old by design), ${REPEAT} alternated runs per side, the run
with the lower p99 kept.

| N | relay | p50 ms | p90 ms | p99 ms (target < 1 ms) | max ms | frames matched / sent |
|---|---|---|---|---|---|---|
$rows"
fi

# --- UDP fan-out ----------------------------------------------------------------
if want udp; then
    udp_receivers() { # N -> UPORTS, RX_PID: N bound sockets nobody reads (the kernel drops when full; no ICMP)
        read -r -a UPORTS <<<"$(free_ports "$1")"
        python3 - "${UPORTS[@]}" <<'EOF' &
import socket, sys, time
ss = []
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", int(p))); ss.append(s)
time.sleep(600)
EOF
        RX_PID=$!; PIDS+=("$RX_PID")
    }
    kiln_udp_pushes() { # N: kiln with the source and N mpegts pushes to UPORTS
        kiln_with_source
        local i
        for i in $(seq "$1"); do start_push "u$i" mpegts "udp://127.0.0.1:${UPORTS[$((i-1))]}"; done
    }
    log "raw UDP limit"
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo bench --quiet --bench udp_limit -- --seconds 3 >"$WORK/udp_limit.txt" 2>"$WORK/udp_limit.err") ||
        { cat "$WORK/udp_limit.err" >&2; exit 1; }
    LIMIT=$(awk '/^datagrams_per_cpu_second/{print $2}' "$WORK/udp_limit.txt")
    rows=""
    for N in $UDP_NS; do
        udp_receivers "$N"
        kiln_udp_pushes "$N"
        sleep "$WARM"
        read -r b0 _ <<<"$(sent_bytes)"; c0=$(cpu_ticks "$KILN_PID")
        window "$KILN_PID" "kiln-udp-$N"
        read -r b1 k_push <<<"$(sent_bytes)"; c1=$(cpu_ticks "$KILN_PID")
        k_cpu=$(calc "($c1-$c0)/$TCK")
        dgrams=$(calc "($b1-$b0)//1316")
        per=$(calc "$dgrams/max($k_cpu,0.01)")
        share=$(fmt "$(calc "$per/$LIMIT")")
        k_hwm=$(hwm_kb "$KILN_PID")
        stop "$SRC_PID"; stop_kiln; stop "$RX_PID"
        log "UDP N=$N: cpu ${k_cpu}s, datagrams $dgrams, pushing $k_push"
        rows+="| $N | $(fmt "$k_cpu") | $dgrams | $(fmt "$per" 0) | $(fmt "$(calc "1e6*$k_cpu/max($dgrams,1)")") | **$share** (≥ 0.5: $(calc "'yes' if $per >= 0.5*$LIMIT else 'no'")) | $((k_hwm / 1024)) | $k_push/$N |
"
    done
    add "### UDP fan-out (1 RTMP source -> N MPEG-TS/UDP destinations)

Same source as above; N \`protocol: mpegts\` pushes to N bound, unread UDP
sockets. Datagrams = sum of the tasks' \`sentBytes\` growth / 1316 over ${SECS} s.
Limit = \`cargo bench --bench udp_limit\` (one thread, std \`UdpSocket::send_to\`
of 1316-byte datagrams round-robin to 100 bound sockets): **$(fmt "$LIMIT" 0) datagrams per CPU second**.

| N | kiln CPU s | datagrams | datagrams / CPU s | µs CPU / datagram | share of limit (target) | peak RSS MiB | pushing |
|---|---|---|---|---|---|---|---|
$rows"

    # small N: against one ffmpeg -c copy process per destination
    rows=""
    for N in $UDP_FF_NS; do
        udp_receivers "$N"
        kiln_udp_pushes "$N"
        sleep "$WARM"
        read -r b0 _ <<<"$(sent_bytes)"; c0=$(cpu_ns "$KILN_PID")
        window "$KILN_PID" "kiln-udp-small-$N"
        read -r b1 _ <<<"$(sent_bytes)"; c1=$(cpu_ns "$KILN_PID")
        k_cpu=$(calc "($c1-$c0)/1e9"); k_dg=$(calc "($b1-$b0)//1316")
        stop "$SRC_PID"; stop_kiln

        FF=()
        for i in $(seq "$N"); do
            timeout $((WARM + SECS + 30)) ffmpeg -hide_banner -loglevel error -nostdin -re -stream_loop -1 \
                -i "$SRC" -c copy -f mpegts "udp://127.0.0.1:${UPORTS[$((i-1))]}?pkt_size=1316" &
            FF+=("$!"); PIDS+=("$!")
        done
        sleep "$WARM"
        # the ffmpeg processes themselves (timeout is their parent)
        FFP=$(for p in "${FF[@]}"; do pgrep -P "$p"; done | tr '\n' ' ')
        c0=$(cpu_ns $FFP); w0=$(udp_out)
        sleep "$SECS"
        c1=$(cpu_ns $FFP); w1=$(udp_out)
        f_cpu=$(calc "($c1-$c0)/1e9"); f_dg=$((w1 - w0))
        for p in "${FF[@]}"; do stop "$p"; done
        stop "$RX_PID"
        k_per=$(calc "1e6*$k_cpu/max($k_dg,1)"); f_per=$(calc "1e6*$f_cpu/max($f_dg,1)")
        log "UDP small N=$N: kiln cpu ${k_cpu}s $k_dg datagrams; ffmpeg cpu ${f_cpu}s $f_dg datagrams"
        rows+="| $N | $(fmt "$k_cpu" 3) | $k_dg | $(fmt "$k_per") | $(fmt "$f_cpu" 3) | $f_dg | $(fmt "$f_per") | **$(fmt "$(calc "$k_per/max($f_per,1e-9)")")** |
"
    done
    add "UDP fan-out at small N against \`ffmpeg -re -i src.flv -c copy -f mpegts udp://…?pkt_size=1316\`,
one ffmpeg process per destination (CPU = all of them, from /proc/PID/schedstat
on both sides; datagrams = the growth of the kernel's UDP OutDatagrams counter,
/proc/net/snmp, over the window: machine-wide, so run on an idle machine).
kiln's side: as above (its RTMP ingest included).

| N | kiln CPU s | kiln datagrams | kiln µs / datagram | ffmpeg CPU s | ffmpeg datagrams | ffmpeg µs / datagram | CPU per datagram, kiln / ffmpeg |
|---|---|---|---|---|---|---|---|
$rows"
fi

# --- SRT fan-out -----------------------------------------------------------------
# One round: N sinks, kiln pushing to them, then N srt-live-transmit relays
# pushing to them; QUERY (e.g. "&passphrase=...") goes on every SRT URL of
# both sides and of the sinks. Sets k_cpu k_sink k_push n_cpu n_sink alive
# (not run in a subshell, so every process it starts stays in PIDS).
srt_round() { # N QUERY
    local N=$1 Q=$2 i p
    read -r -a SPORTS <<<"$(free_ports "$N")"   # sink listeners (srt-live-transmit)
    read -r -a UPORTS <<<"$(free_ports "$N")"   # peer relays' UDP inputs
    start_sinks() {
        SINK_PIDS=()
        for p in "${SPORTS[@]}"; do
            srt-live-transmit -q "srt://127.0.0.1:$p?mode=listener$Q" file://con >/dev/null 2>&1 &
            SINK_PIDS+=($!); PIDS+=($!)
        done
        sleep 1
    }
    stop_all() { local p; for p in "$@"; do stop "$p"; done; }

    # kiln: N SRT caller pushes
    start_sinks
    kiln_with_source
    for i in $(seq "$N"); do start_push "s$i" srt "srt://127.0.0.1:${SPORTS[$((i-1))]}?mode=caller$Q"; done
    sleep "$WARM"
    c0=$(cpu_ticks "$KILN_PID"); w0=$(wchar "${SINK_PIDS[@]}")
    window "$KILN_PID" "kiln-srt-$N"
    c1=$(cpu_ticks "$KILN_PID"); w1=$(wchar "${SINK_PIDS[@]}")
    k_sink=$(calc "($w1-$w0)*8/$SECS/1e6")
    read -r _ k_push <<<"$(sent_bytes)"
    k_cpu=$(calc "($c1-$c0)/$TCK")
    stop "$SRC_PID"; stop_kiln; stop_all "${SINK_PIDS[@]}"
    log "SRT N=$N${Q:+ (encrypted)} kiln: cpu ${k_cpu}s, sinks ${k_sink} Mb/s, pushing $k_push"

    # peer: N srt-live-transmit callers, each fed a UDP copy of the source
    # (the copies come from kiln mpegts pushes; kiln's CPU is not counted)
    start_sinks
    RELAYS=()
    for i in $(seq "$N"); do
        srt-live-transmit -q "udp://127.0.0.1:${UPORTS[$((i-1))]}" "srt://127.0.0.1:${SPORTS[$((i-1))]}?mode=caller$Q" >/dev/null 2>&1 &
        RELAYS+=($!); PIDS+=($!)
    done
    kiln_with_source
    for i in $(seq "$N"); do start_push "u$i" mpegts "udp://127.0.0.1:${UPORTS[$((i-1))]}"; done
    sleep "$WARM"
    c0=$(cpu_ticks "${RELAYS[@]}"); w0=$(wchar "${SINK_PIDS[@]}")
    sleep "$SECS"
    c1=$(cpu_ticks "${RELAYS[@]}"); w1=$(wchar "${SINK_PIDS[@]}")
    n_sink=$(calc "($w1-$w0)*8/$SECS/1e6")
    alive=0; for p in "${RELAYS[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
    n_cpu=$(calc "($c1-$c0)/$TCK")
    stop "$SRC_PID"; stop_kiln; stop_all "${RELAYS[@]}" "${SINK_PIDS[@]}"
    log "SRT N=$N${Q:+ (encrypted)} srt-live-transmit: cpu ${n_cpu}s, sinks ${n_sink} Mb/s, alive $alive"
}
LIBSRT_VERSION=$( (srt-live-transmit -version 2>&1 || true) | grep -o 'version:\? [0-9.]*' | head -1 || true)

if want srt; then
    rows=""
    for N in $SRT_NS; do
        srt_round "$N" ""
        cr=$(calc "'n/a (< 5 ticks)' if max($k_cpu,$n_cpu) < 5/$TCK else '%.2f' % ($k_cpu/max($n_cpu,1/$TCK))")
        rows+="| $N | $(fmt "$(calc "1000*$k_cpu/$N/$SECS")") | $(fmt "$(calc "1000*$n_cpu/$N/$SECS")") | **$cr** (≤ 1: $(calc "'yes' if $k_cpu <= $n_cpu else 'no'")) | $(fmt "$k_sink" 1) / $(fmt "$n_sink" 1) | $k_push/$N | $alive/$N |
"
    done
    add "### SRT fan-out (1 RTMP source -> N SRT destinations)

Sinks: N \`srt-live-transmit\` listeners writing to /dev/null. kiln: N
\`protocol: srt\` caller pushes. Peer: N \`srt-live-transmit udp:// -> srt://\`
callers (libsrt $LIBSRT_VERSION), each fed a UDP copy of the
source (made by kiln, whose CPU is not counted on that side). CPU =
utime+stime over ${SECS} s (peer: all N processes, all threads). Sinks Mb/s =
what the N sinks wrote to /dev/null (\`wchar\`), to show both sides delivered.

| N | kiln CPU ms/s per push | srt-live-transmit CPU ms/s per push | ratio (target) | sinks Mb/s kiln / peer | kiln pushing | peer relays alive |
|---|---|---|---|---|---|---|
$rows"
fi

# --- SRT encryption cost ----------------------------------------------------------
if want srtenc; then
    rows=""
    ENC="&passphrase=kiln-bench-passphrase&pbkeylen=16"
    for N in $SRT_ENC_NS; do
        srt_round "$N" ""
        kp_cpu=$k_cpu np_cpu=$n_cpu
        srt_round "$N" "$ENC"
        ke_cpu=$k_cpu ke_sink=$k_sink ke_push=$k_push ne_cpu=$n_cpu ne_sink=$n_sink e_alive=$alive
        kr=$(calc "'%.2f' % ($ke_cpu/max($kp_cpu,1/$TCK))")
        nr=$(calc "'%.2f' % ($ne_cpu/max($np_cpu,1/$TCK))")
        rows+="| $N | $(fmt "$(calc "1000*$kp_cpu/$N/$SECS")") / $(fmt "$(calc "1000*$ke_cpu/$N/$SECS")") | **$kr** (< 1.5: $(calc "'yes' if $ke_cpu < 1.5*max($kp_cpu,1/$TCK) else 'no'")) | $(fmt "$(calc "1000*$np_cpu/$N/$SECS")") / $(fmt "$(calc "1000*$ne_cpu/$N/$SECS")") | $nr | $(fmt "$ke_sink" 1) / $(fmt "$ne_sink" 1) | $ke_push/$N | $e_alive/$N |
"
    done
    add "### SRT encryption cost (AES-128, N SRT destinations)

The SRT fan-out above, once in the clear and once with
\`passphrase=...&pbkeylen=16\` on every URL (kiln's pushes, the peer's
srt-live-transmit callers, and the sinks, which decrypt). CPU = utime+stime
over ${SECS} s, per push.

| N | kiln CPU ms/s per push, clear / encrypted | kiln encrypted / clear (target) | srt-live-transmit ($LIBSRT_VERSION) CPU ms/s per push, clear / encrypted | libsrt encrypted / clear | sinks Mb/s encrypted kiln / peer | kiln pushing | peer relays alive |
|---|---|---|---|---|---|---|---|
$rows"
fi

# --- recording ---------------------------------------------------------------------
if want record; then
    rows=""
    for N in $RECORD_NS; do
        k_cpu=; n_cpu=
        for rep in $(seq "$REPEAT"); do # alternate, keep the least CPU of each side
            rm -rf "$WORK/kiln-rec" "$WORK/ngx-rec"; mkdir -p "$WORK/ngx-rec"
            kiln_with_source
            for i in $(seq "$N"); do
                api POST /v1/vhosts/default/apps/app:startRecord \
                    "{\"id\":\"r$i\",\"stream\":{\"name\":\"src\"},\"filePath\":\"r$i.mp4\",\"infoPath\":\"r$i.xml\"}" >/dev/null
            done
            sleep "$WARM"
            c0=$(cpu_ticks "$KILN_PID"); b0=$(du -sb "$WORK/kiln-rec" | cut -f1)
            window "$KILN_PID" "kiln-record-$N"
            c1=$(cpu_ticks "$KILN_PID"); b1=$(du -sb "$WORK/kiln-rec" | cut -f1)
            c=$(calc "($c1-$c0)/$TCK")
            if [[ -z $k_cpu ]] || (($(calc "int($c < $k_cpu)"))); then k_cpu=$c; fi
            k_rate=$(calc "($b1-$b0)*8/$SECS/1e6/$N")
            stop "$SRC_PID"; stop_kiln
            log "record N=$N run $rep kiln: cpu ${k_cpu}s, ${k_rate} Mb/s per file"

            # nginx-rtmp: N recorders (FLV) in the application
            recs=""
            for i in $(seq "$N"); do recs+="recorder r$i { record all; record_path $WORK/ngx-rec; record_suffix -r$i.flv; record_unique on; }
    "; done
            start_nginx recorder "rtmp { server { listen 127.0.0.1:$NGX_RTMP; chunk_size 4096;
                application app { live on;
    $recs } } }"
            REC_PID=$NGX_PID
            wait_tcp "$NGX_RTMP"
            start_source "rtmp://127.0.0.1:$NGX_RTMP/app/src"
            sleep "$WARM"
            rp=$(nginx_pids "$REC_PID")
            c0=$(cpu_ticks $rp); b0=$(du -sb "$WORK/ngx-rec" | cut -f1)
            window "$(pgrep -P "$REC_PID" | head -1)" "nginx-record-$N"
            c1=$(cpu_ticks $rp); b1=$(du -sb "$WORK/ngx-rec" | cut -f1)
            c=$(calc "($c1-$c0)/$TCK")
            if [[ -z $n_cpu ]] || (($(calc "int($c < $n_cpu)"))); then n_cpu=$c; fi
            n_rate=$(calc "($b1-$b0)*8/$SECS/1e6/$N")
            stop "$SRC_PID"; stop "$REC_PID"
            log "record N=$N run $rep nginx-rtmp: cpu ${n_cpu}s, ${n_rate} Mb/s per file"
        done
        cr=$(calc "'n/a (< 5 ticks)' if max($k_cpu,$n_cpu) < 5/$TCK else '%.2f' % ($k_cpu/max($n_cpu,1/$TCK))")
        rows+="| $N | $(fmt "$k_cpu") | $(fmt "$n_cpu") | **$cr** | $(fmt "$k_rate" 2) / $(fmt "$n_rate" 2) |
"
    done
    add "### Recording (1 source -> N files of it)

Source as above (720p30 H.264 2.5 Mb/s + AAC, over RTMP). kiln: N
\`:startRecord\` tasks writing fragmented MP4 (one worker thread writes; the
loop only queues). nginx-rtmp (1 worker): N \`recorder\` blocks (\`record all\`,
FLV) in the application. CPU = utime+stime of the whole process (kiln: loop
and writer thread; nginx: master + worker) over ${SECS} s after ${WARM} s,
alternated ${REPEAT} times, least kept. Mb/s per file = bytes the files grew
by in the window (proves both wrote the stream).

| N | kiln CPU s | nginx-rtmp CPU s | CPU ratio | Mb/s per file kiln / nginx |
|---|---|---|---|---|
$rows"
fi

# --- RTMP play -------------------------------------------------------------------------
if want play; then
    command -v rtmpdump >/dev/null || { log "rtmpdump is missing (apt-get install rtmpdump)"; exit 1; }
    start_players() { # url N -> PLAYER_PIDS
        PLAYER_PIDS=()
        for _ in $(seq "$2"); do
            rtmpdump -q --live -r "$1" -o /dev/null >/dev/null 2>&1 &
            PLAYER_PIDS+=("$!"); PIDS+=("$!")
        done
    }
    start_srt_players() { # N: srt-live-transmit callers in request mode, TS to /dev/null,
        # from 127.0.0.2 on, at most 8 per address (kiln caps SRT sockets per address at 16)
        PLAYER_PIDS=()
        for i in $(seq 0 $(($1 - 1))); do
            srt-live-transmit -q "srt://127.0.0.1:$SRT_IN?streamid=%23!::r=app/src,m=request&mode=caller&adapter=127.0.0.$((2 + i / 8))" file://con >/dev/null 2>&1 &
            PLAYER_PIDS+=("$!"); PIDS+=("$!")
        done
    }
    # What kiln reports of the source stream: "<players of the kind> <totalBytesOut>".
    kiln_viewers() { # kind (rtmp|srt)
        api GET /v1/stats/current/vhosts/default/apps/app/streams/src | python3 -c "
import json, sys
r = json.load(sys.stdin)['response']
print(r['connections'].get('$1', 0), r['totalBytesOut'])" 2>/dev/null || echo "0 0"
    }
    stop_players() { kill "${PLAYER_PIDS[@]}" 2>/dev/null; wait "${PLAYER_PIDS[@]}" 2>/dev/null || true; PLAYER_PIDS=(); }
    alive() { local n=0 p; for p in "${PLAYER_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done; echo $n; }
    rows=""
    for N in $PLAY_NS; do
        k_cpu=; n_cpu=; s_cpu=
        for rep in $(seq "$REPEAT"); do
            kiln_with_source
            start_players "rtmp://127.0.0.1:$RTMP_IN/app/src" "$N"
            sleep "$WARM"
            c0=$(cpu_ticks "$KILN_PID"); r0=$(served_bytes "$RTMP_IN"); read -r _ o0 <<<"$(kiln_viewers rtmp)"
            window "$KILN_PID" "kiln-play-$N"
            c1=$(cpu_ticks "$KILN_PID"); r1=$(served_bytes "$RTMP_IN"); read -r k_alive o1 <<<"$(kiln_viewers rtmp)"
            k_rs=$(calc "'%.2f' % (($r1-$r0)/max($o1-$o0,1))")
            c=$(calc "($c1-$c0)/$TCK")
            if [[ -z $k_cpu ]] || (($(calc "int($c < $k_cpu)"))); then k_cpu=$c; fi
            k_rate=$(calc "($r1-$r0)*8/$SECS/1e6/$N")
            stop_players; stop "$SRC_PID"; stop_kiln
            log "play N=$N run $rep kiln: cpu ${k_cpu}s, ${k_rate} Mb/s per player, $k_alive/$N playing (kiln's stats), received/sent $k_rs"

            # kiln, SRT request mode (what srt-live-transmit wrote out)
            KILN_SRT_IN=1
            kiln_with_source
            KILN_SRT_IN=
            start_srt_players "$N"
            sleep "$WARM"
            c0=$(cpu_ticks "$KILN_PID"); w0=$(wchar "${PLAYER_PIDS[@]}"); read -r _ o0 <<<"$(kiln_viewers srt)"
            window "$KILN_PID" "kiln-srtplay-$N"
            c1=$(cpu_ticks "$KILN_PID"); w1=$(wchar "${PLAYER_PIDS[@]}"); read -r s_alive o1 <<<"$(kiln_viewers srt)"
            s_rs=$(calc "'%.2f' % (($w1-$w0)/max($o1-$o0,1))")
            c=$(calc "($c1-$c0)/$TCK")
            if [[ -z $s_cpu ]] || (($(calc "int($c < $s_cpu)"))); then s_cpu=$c; fi
            s_rate=$(calc "($w1-$w0)*8/$SECS/1e6/$N")
            stop_players; stop "$SRC_PID"; stop_kiln
            log "play N=$N run $rep kiln SRT: cpu ${s_cpu}s, ${s_rate} Mb/s per player, $s_alive/$N playing (kiln's stats), received/sent $s_rs"

            start_nginx play "rtmp { server { listen 127.0.0.1:$NGX_RTMP; chunk_size 4096;
                application app { live on; record off; } } }"
            PLAY_NGX=$NGX_PID
            wait_tcp "$NGX_RTMP"
            start_source "rtmp://127.0.0.1:$NGX_RTMP/app/src"
            sleep 1
            start_players "rtmp://127.0.0.1:$NGX_RTMP/app/src" "$N"
            sleep "$WARM"
            np=$(nginx_pids "$PLAY_NGX")
            c0=$(cpu_ticks $np); r0=$(served_bytes "$NGX_RTMP")
            window "$(pgrep -P "$PLAY_NGX" | head -1)" "nginx-play-$N"
            c1=$(cpu_ticks $np); r1=$(served_bytes "$NGX_RTMP")
            n_alive=$(alive)
            c=$(calc "($c1-$c0)/$TCK")
            if [[ -z $n_cpu ]] || (($(calc "int($c < $n_cpu)"))); then n_cpu=$c; fi
            n_rate=$(calc "($r1-$r0)*8/$SECS/1e6/$N")
            stop_players; stop "$SRC_PID"; stop "$PLAY_NGX"
            log "play N=$N run $rep nginx-rtmp: cpu ${n_cpu}s, ${n_rate} Mb/s per player, $n_alive/$N playing"
        done
        cr=$(calc "'n/a (< 5 ticks)' if max($k_cpu,$n_cpu) < 5/$TCK else '%.2f' % ($k_cpu/max($n_cpu,1/$TCK))")
        sr=$(calc "'n/a (< 5 ticks)' if max($s_cpu,$n_cpu) < 5/$TCK else '%.2f' % ($s_cpu/max($n_cpu,1/$TCK))")
        rows+="| $N | $(fmt "$k_cpu") | $(fmt "$s_cpu") | $(fmt "$n_cpu") | **$cr** | **$sr** | $(fmt "$k_rate" 2) / $(fmt "$s_rate" 2) / $(fmt "$n_rate" 2) | $k_alive / $s_alive / $n_alive | $k_rs / $s_rs |
"
    done
    add "### RTMP play (1 source -> N players)

Source as above (720p30 H.264 2.5 Mb/s + AAC, over RTMP). Players: N
\`rtmpdump --live\` to /dev/null against kiln (RTMP play: last GOP first,
then every frame) and against nginx-rtmp (1 worker, \`live on\`); and N
\`srt-live-transmit\` callers in request mode against kiln (MPEG-TS over
SRT; nginx-rtmp has no SRT, so its RTMP play is the peer). CPU =
utime+stime of the server over ${SECS} s after ${WARM} s, alternated
${REPEAT} times, least kept. Mb/s per player = bytes the server's RTMP
connections had acknowledged in the window (\`ss\` bytes_acked, all
connections; the source's own connection sends, it barely receives) / N;
for SRT, the TS bytes the callers wrote out / N (proves every player got the
stream). SRT callers come from 127.0.0.2 on, 8 per address (kiln's
per-address cap is 16). Players at the end: for kiln, the players its stats
API counts on the stream (not processes alive); for nginx-rtmp, processes
alive. Received / sent: what the players got (RTMP: bytes acked; SRT: TS
written) over what kiln's stats say it sent to viewers in the window.

| N | kiln RTMP CPU s | kiln SRT CPU s | nginx-rtmp CPU s | RTMP ratio | SRT ratio | Mb/s per player kiln RTMP / SRT / nginx | players at the end kiln RTMP / SRT / nginx | received / sent kiln RTMP / SRT |
|---|---|---|---|---|---|---|---|---|
$rows"
fi

# --- pull: an RTSP camera in; an edge serving RTMP players -------------------------------
if want pull; then
    CAM_P=$(low_port)
    CAM_PID=
    start_camera() { # gst-rtsp-server sends the 20 s source file as is (no encoding), in real time
        timeout $((WARM + SECS + 30)) /usr/bin/python3 "$ROOT/tests/tools/rtsp_camera.py" "$CAM_P" "file:$SRC" >/dev/null 2>&1 &
        CAM_PID=$!; PIDS+=("$CAM_PID")
        wait_tcp "$CAM_P" 200
    }
    k_cpu=; f_cpu=
    for rep in $(seq "$REPEAT"); do
        start_camera
        start_kiln
        api POST /v1/vhosts/default/apps/app/streams "{\"name\":\"cam\",\"urls\":[\"rtsp://127.0.0.1:$CAM_P/cam\"]}" >/dev/null
        sleep "$WARM"
        live=$(api GET /v1/vhosts/default/apps/app/streams/cam | grep -c RtspPull || true)
        c0=$(cpu_ticks "$KILN_PID")
        window "$KILN_PID" "kiln-pull"
        c1=$(cpu_ticks "$KILN_PID")
        c=$(calc "($c1-$c0)/$TCK")
        if [[ -z $k_cpu ]] || (($(calc "int($c < $k_cpu)"))); then k_cpu=$c; fi
        stop_kiln; stop "$CAM_PID"
        log "pull run $rep kiln: cpu ${k_cpu}s (live: $live)"
        start_camera
        timeout $((WARM + SECS + 10)) ffmpeg -hide_banner -loglevel quiet -nostdin -rtsp_transport tcp \
            -i "rtsp://127.0.0.1:$CAM_P/cam" -c copy -f null - &
        FF_PID=$!; PIDS+=("$FF_PID")
        sleep "$WARM"
        FF_CHILD=$(pgrep -P "$FF_PID" | head -1) # ffmpeg itself, not timeout
        c0=$(cpu_ticks "$FF_CHILD")
        window "$FF_CHILD" "ffmpeg-pull"
        c1=$(cpu_ticks "$FF_CHILD")
        c=$(calc "($c1-$c0)/$TCK")
        if [[ -z $f_cpu ]] || (($(calc "int($c < $f_cpu)"))); then f_cpu=$c; fi
        stop "$FF_PID"; stop "$CAM_PID"
        log "pull run $rep ffmpeg: cpu ${f_cpu}s"
    done
    pr=$(calc "'n/a (< 5 ticks)' if max($k_cpu,$f_cpu) < 5/$TCK else '%.2f' % ($k_cpu/max($f_cpu,1/$TCK))")

    # An edge: pulls the stream from an origin (nginx-rtmp holding the
    # source) over RTMP and serves N rtmpdump players; kiln against
    # nginx-rtmp as the edge (\`pull ... static\`).
    EDGE_N=${BENCH_EDGE_N:-100}
    start_nginx origin "rtmp { server { listen 127.0.0.1:$NGX_RTMP; chunk_size 4096;
        application app { live on; record off; } } }"
    ORIGIN_PID=$NGX_PID
    wait_tcp "$NGX_RTMP"
    EDGE_P=$(low_port)
    alive() { local n=0 p; for p in "${PLAYER_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done; echo $n; }
    start_rtmp_players() { # url N
        PLAYER_PIDS=()
        for _ in $(seq "$2"); do
            rtmpdump -q --live -r "$1" -o /dev/null >/dev/null 2>&1 &
            PLAYER_PIDS+=("$!"); PIDS+=("$!")
        done
    }
    stop_rtmp_players() { kill "${PLAYER_PIDS[@]}" 2>/dev/null; wait "${PLAYER_PIDS[@]}" 2>/dev/null || true; PLAYER_PIDS=(); }
    ke_cpu=; ne_cpu=
    for rep in $(seq "$REPEAT"); do
        start_source "rtmp://127.0.0.1:$NGX_RTMP/app/src"
        sleep 1
        start_kiln
        api POST /v1/vhosts/default/apps/app/streams "{\"name\":\"src\",\"urls\":[\"rtmp://127.0.0.1:$NGX_RTMP/app/src\"]}" >/dev/null
        start_rtmp_players "rtmp://127.0.0.1:$RTMP_IN/app/src" "$EDGE_N"
        sleep "$WARM"
        c0=$(cpu_ticks "$KILN_PID"); r0=$(served_bytes "$RTMP_IN")
        window "$KILN_PID" "kiln-edge"
        c1=$(cpu_ticks "$KILN_PID"); r1=$(served_bytes "$RTMP_IN")
        ke_alive=$(alive)
        c=$(calc "($c1-$c0)/$TCK")
        if [[ -z $ke_cpu ]] || (($(calc "int($c < $ke_cpu)"))); then ke_cpu=$c; fi
        ke_rate=$(calc "($r1-$r0)*8/$SECS/1e6/$EDGE_N")
        stop_rtmp_players; stop_kiln
        log "edge run $rep kiln: cpu ${ke_cpu}s, ${ke_rate} Mb/s per player, $ke_alive/$EDGE_N"
        start_nginx edge "rtmp { server { listen 127.0.0.1:$EDGE_P; chunk_size 4096;
            application app { live on; pull rtmp://127.0.0.1:$NGX_RTMP/app name=src static; } } }"
        EDGE_PID=$NGX_PID
        wait_tcp "$EDGE_P"
        start_rtmp_players "rtmp://127.0.0.1:$EDGE_P/app/src" "$EDGE_N"
        sleep "$WARM"
        np=$(nginx_pids "$EDGE_PID")
        c0=$(cpu_ticks $np); r0=$(served_bytes "$EDGE_P")
        window "$(pgrep -P "$EDGE_PID" | head -1)" "nginx-edge"
        c1=$(cpu_ticks $np); r1=$(served_bytes "$EDGE_P")
        ne_alive=$(alive)
        c=$(calc "($c1-$c0)/$TCK")
        if [[ -z $ne_cpu ]] || (($(calc "int($c < $ne_cpu)"))); then ne_cpu=$c; fi
        ne_rate=$(calc "($r1-$r0)*8/$SECS/1e6/$EDGE_N")
        stop_rtmp_players; stop "$EDGE_PID"; stop "$SRC_PID"
        log "edge run $rep nginx-rtmp: cpu ${ne_cpu}s, ${ne_rate} Mb/s per player, $ne_alive/$EDGE_N"
    done
    stop "$ORIGIN_PID"
    er=$(calc "'n/a (< 5 ticks)' if max($ke_cpu,$ne_cpu) < 5/$TCK else '%.2f' % ($ke_cpu/max($ne_cpu,1/$TCK))")
    add "### Pull: an RTSP camera in, and an edge serving players

RTSP: gst-rtsp-server (\`tests/tools/rtsp_camera.py file:\`) sends the source
file above (720p30 H.264 2.5 Mb/s + AAC) as is, RTP interleaved on TCP;
kiln pulls it through \`POST .../streams\` (RTSP client, depacketizing,
the stream's GOP cache; no viewer) against ffmpeg \`-rtsp_transport tcp -i
... -c copy -f null -\` (its RTSP demuxer, no output). Edge: an nginx-rtmp
origin holds the source; the edge pulls it over RTMP and serves
${EDGE_N} \`rtmpdump --live\` players: kiln (\`POST .../streams\` with an
\`rtmp://\` URL) against nginx-rtmp (\`pull ... static\`, 1 worker). CPU =
utime+stime over ${SECS} s after ${WARM} s, ${REPEAT} runs, least kept.

| bench | kiln CPU s | peer CPU s | ratio | Mb/s per player kiln / nginx | players at the end kiln / nginx |
|---|---|---|---|---|---|
| RTSP pull, 1 stream (peer: ffmpeg) | $(fmt "$k_cpu") | $(fmt "$f_cpu") | **$pr** | | |
| RTMP edge, ${EDGE_N} players (peer: nginx-rtmp) | $(fmt "$ke_cpu") | $(fmt "$ne_cpu") | **$er** | $(fmt "$ke_rate" 2) / $(fmt "$ne_rate" 2) | $ke_alive / $ne_alive |
"
fi

# --- admission webhooks ---------------------------------------------------------------
if want admission; then
    log "building the admission probe (cargo bench --bench admission)"
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo bench --quiet --bench admission --no-run 2>"$WORK/admission-build.err") ||
        { cat "$WORK/admission-build.err" >&2; exit 1; }
    ADMIT=$(ls -t "$TARGET"/release/deps/admission-* | grep -v '\.d$' | head -1)
    N=${BENCH_ADMISSION_N:-500}
    k_best=; n_best=
    for rep in $(seq "$REPEAT"); do # alternate; keep each side's best rate
        CTL_P=$(low_port)
        KILN_VHOST_EXTRA="<AdmissionWebhooks><ControlServerUrl>http://127.0.0.1:$CTL_P/admission</ControlServerUrl><SecretKey>s</SecretKey><Timeout>3000</Timeout><Enables><Providers>rtmp</Providers></Enables></AdmissionWebhooks>"
        start_kiln
        KILN_VHOST_EXTRA=
        c0=$(cpu_ticks "$KILN_PID")
        k=$("$ADMIT" --control-port "$CTL_P" --publish "rtmp://127.0.0.1:$RTMP_IN/app" --count "$N")
        c1=$(cpu_ticks "$KILN_PID")
        k_cpu=$(calc "($c1-$c0)/$TCK*1e6/($N+20)")
        stop_kiln
        log "admission run $rep kiln: $k (rate p50 p99 openings closings), ${k_cpu} us CPU per publish"
        if [[ -z $k_best ]] || (($(calc "int(${k%% *} > ${k_best%% *})"))); then k_best=$k; k_best_cpu=$k_cpu; fi

        CTL_P=$(low_port)
        start_nginx admission "rtmp { server { listen 127.0.0.1:$NGX_RTMP; chunk_size 4096;
            application app { live on; record off;
                on_publish http://127.0.0.1:$CTL_P/admission;
                on_publish_done http://127.0.0.1:$CTL_P/admission; } } }"
        ADM_PID=$NGX_PID
        wait_tcp "$NGX_RTMP"
        np=$(nginx_pids "$ADM_PID")
        c0=$(cpu_ticks $np)
        n=$("$ADMIT" --control-port "$CTL_P" --publish "rtmp://127.0.0.1:$NGX_RTMP/app" --count "$N")
        c1=$(cpu_ticks $np)
        n_cpu=$(calc "($c1-$c0)/$TCK*1e6/($N+20)")
        stop "$ADM_PID"
        log "admission run $rep nginx-rtmp: $n (rate p50 p99 openings closings), ${n_cpu} us CPU per publish"
        if [[ -z $n_best ]] || (($(calc "int(${n%% *} > ${n_best%% *})"))); then n_best=$n; n_best_cpu=$n_cpu; fi
    done
    read -r kr kp50 kp99 ko kc <<<"$k_best"
    read -r nr np50 np99 no nc <<<"$n_best"
    RATIOS+=("admission p99: kiln $(calc "'%.2f' % ($kp99/$np99)")x nginx-rtmp")
    add "### Admission with an HTTP callback (N = $N publishes in a row)

A control server in the probe (\`benches/admission.rs\`, one thread per
request) answers every POST with \`{\"allowed\":true}\`. kiln:
AdmissionWebhooks on RTMP (OME's signed JSON opening and closing per
session). nginx-rtmp (1 worker): \`on_publish\` and \`on_publish_done\` to the
same server. Each publish is kiln's bare RTMP client: connect, handshake,
\`publish\`, wait for \`NetStream.Publish.Start\`, close; one after another.
Time = connect to Publish.Start. CPU per publish = the server's
utime+stime over the run / publishes. Alternated ${REPEAT} times, best rate
kept per side.

| | publishes/s | p50 ms | p99 ms | CPU us per publish | openings / closings seen |
|---|---|---|---|---|---|
| kiln | $kr | $kp50 | $kp99 | $(fmt "$k_best_cpu" 0) | $ko / $kc |
| nginx-rtmp | $nr | $np50 | $np99 | $(fmt "$n_best_cpu" 0) | $no / $nc |
| ratio kiln/nginx | **$(calc "'%.2f' % ($kr/$nr)")** | $(calc "'%.2f' % ($kp50/$np50)") | **$(calc "'%.2f' % ($kp99/$np99)")** | $(calc "'%.2f' % ($k_best_cpu/max($n_best_cpu,1))") | |
"
fi

# --- start-up and memory --------------------------------------------------------
# --- LL-HLS viewers ------------------------------------------------------------------
if want llhls; then
    log "building the LL-HLS probes (cargo bench --bench latency --bench llhls_viewers)"
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo bench --quiet --bench latency --bench llhls_viewers --no-run 2>"$WORK/llhls-build.err") ||
        { cat "$WORK/llhls-build.err" >&2; exit 1; }
    PROBE=$(ls -t "$TARGET"/release/deps/latency-* | grep -v '\.d$' | head -1)
    VIEWERS=$(ls -t "$TARGET"/release/deps/llhls_viewers-* | grep -v '\.d$' | head -1)
    us_ms() { calc "'%.1f' % ($1/1000)"; }
    # Added latency: a frame into the RTMP ingest -> its part read by a viewer.
    lat_rows=""
    for chunk in $LLHLS_CHUNKS; do
        KILN_LLHLS=$chunk start_kiln
        r=$("$PROBE" --file "$SRC" --publish "rtmp://127.0.0.1:$RTMP_IN/app/src" \
            --llhls "http://127.0.0.1:$LLHLS_P/app/src" --seconds $((SECS + WARM + 5)) --warm "$WARM" \
            2>>"$WORK/probe.err" | awk '/^latency_us/{print $2, $3, $4, $5, $6, $7}')
        stop_kiln
        [[ -n $r ]] || { log "LL-HLS latency probe failed: $(tail -3 "$WORK/probe.err")"; exit 1; }
        read -r p50 p90 p99 pmax m sent <<<"$r"
        log "LL-HLS latency ChunkDuration $chunk (p50 p90 p99 max µs, matched, sent): $r"
        target=$(calc "$chunk*1e6 + 20000")
        lat_rows+="| $chunk | $(us_ms "$p50") | $(us_ms "$p90") | **$(us_ms "$p99")** (≤ $(us_ms "$target"): $(calc "'yes' if $p99 <= $target else 'no'")) | $(us_ms "$pmax") | $m / $sent |
"
    done
    # N viewers: kiln with blocking reloads, then nginx serving kiln's
    # chunklist and parts as static files to the same request pattern.
    VSECS=$((SECS * 2))
    KILN_LLHLS=0.5 start_kiln
    start_source "rtmp://127.0.0.1:$RTMP_IN/app/src"
    wait_stream
    sleep 3 # the first segment
    # kiln's own cost without viewers (ingest and packaging), over 5 s
    b0=$(cpu_ticks "$KILN_PID"); sleep 5; b1=$(cpu_ticks "$KILN_PID")
    base_per_s=$(calc "($b1-$b0)/5")
    rss0=$(rss_kb "$KILN_PID"); c0=$(cpu_split "$KILN_PID")
    "$VIEWERS" --url "http://127.0.0.1:$LLHLS_P/app/src" --viewers "$LLHLS_VIEWERS" --seconds "$VSECS" --spread 10 \
        --snapshot "$WORK/www/snap" >"$WORK/viewers-kiln.txt" 2>>"$WORK/viewers.err" &
    VPID=$!; PIDS+=("$VPID")
    sleep $((VSECS / 2)); rss1=$(rss_kb "$KILN_PID")
    wait "$VPID" || { log "LL-HLS viewers failed: $(tail -3 "$WORK/viewers.err")"; exit 1; }
    read -r ku kk <<<"$(cpu_split "$KILN_PID")"; read -r ku0 kk0 <<<"$c0"
    stop "$SRC_PID"; stop_kiln
    start_nginx ngx-hls "
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    open_file_cache max=100;
    keepalive_requests 100000000;
    keepalive_timeout 65;
    types { application/vnd.apple.mpegurl m3u8; video/mp4 m4s; }
    server { listen 127.0.0.1:$NGX_P; root $WORK/www; }
}"
    wait_tcp "$NGX_P"
    np=$(nginx_pids "$NGX_PID")
    nrss0=$(rss_kb $np); n0=$(cpu_split $np)
    "$VIEWERS" --static "http://127.0.0.1:$NGX_P/snap" --dir "$WORK/www/snap" --viewers "$LLHLS_VIEWERS" --spread 10 \
        --seconds "$VSECS" --part 0.5 >"$WORK/viewers-nginx.txt" 2>>"$WORK/viewers.err" &
    VPID=$!; PIDS+=("$VPID")
    sleep $((VSECS / 2)); nrss1=$(rss_kb $np)
    wait "$VPID" || { log "LL-HLS viewers (nginx) failed: $(tail -3 "$WORK/viewers.err")"; exit 1; }
    read -r nu nk <<<"$(cpu_split $np)"; read -r nu0 nk0 <<<"$n0"
    stop "$NGX_PID"
    row() { # name result-file user0 kernel0 user1 kernel1 rss0 rss1
        read -r _ conn _ req _ parts _ bytes _ miss _ s50 s99 smax _ err _ q50 q99 qmax <"$2"
        local cpu=$(( ($5 - $3) + ($6 - $4) ))
        local pct; pct=$(calc "100*$cpu/$TCK/$VSECS")
        local per; per=$(calc "1e6*$cpu/$TCK/$VSECS/max($conn,1)")
        echo "| $1 | $conn | $req | $parts | $(fmt "$(calc "$bytes/$VSECS/1e6")" 0) | $(fmt "$pct" 1) ($(fmt "$(calc "100*($5-$3)/$TCK/$VSECS")" 1) user) | $(fmt "$per" 1) | $(fmt "$(calc "($8-$7)/max($conn,1)")" 1) | $miss / $err | $(us_ms "$s50") / $(us_ms "$s99") | $(us_ms "$q50") / $(us_ms "$q99") |"
    }
    krow=$(row kiln "$WORK/viewers-kiln.txt" "$ku0" "$kk0" "$ku" "$kk" "$rss0" "$rss1")
    nrow=$(row nginx "$WORK/viewers-nginx.txt" "$nu0" "$nk0" "$nu" "$nk" "$nrss0" "$nrss1")
    kcpu=$(( (ku - ku0) + (kk - kk0) )); ncpu=$(( (nu - nu0) + (nk - nk0) ))
    ratio=$(fmt "$(calc "$kcpu/max($ncpu,1)")")
    kview=$(calc "max($kcpu - $base_per_s*$VSECS, 0)")
    vratio=$(fmt "$(calc "$kview/max($ncpu,1)")")
    base_pct=$(fmt "$(calc "100*$base_per_s/$TCK")" 1)
    add "### LL-HLS viewers (1 RTMP source 720p30 2.5 Mb/s -> $LLHLS_VIEWERS viewers)

\`cargo bench --bench llhls_viewers\`: one thread, one keep-alive connection
per viewer, ${VSECS} s. Against kiln (ChunkDuration 0.5, SegmentDuration 2)
each viewer does what a low-latency player does: a blocking reload of the
video chunklist for the preload-hinted part, then a GET of every part that
answer lists, then the next hint. nginx (1 worker, sendfile, access log off)
serves a snapshot of kiln's chunklist and parts as static files: every 0.5 s
all viewers ask for the chunklist and then the next part, the same requests
and bytes. CPU is the server's utime+stime over the window; memory is the
server's RSS half-way through less its RSS before the viewers came. Spread,
kiln: for each part, from the first viewer's first byte of the blocking
answer that lists it to each other viewer's; nginx: from the tick to each
viewer's first byte of the chunklist. A first byte's time is when it
reached the viewer's socket (the kernel's receive time stamp,
\`SO_TIMESTAMPNS\`); the poll-return spread takes the time the generator's
poll returned instead, which its own work on the CPU it shares with the
server widens (the figure earlier runs reported). Missing: viewers
that did not get every part cut while they were following (kiln); errors:
non-200 answers.

| server | viewers | requests | parts | MB/s out | CPU % of a core | CPU µs per viewer-second | RSS KiB per viewer (target < 64) | missing / errors | spread p50 / p99 ms (target p99 < 5) | poll-return spread p50 / p99 ms |
|---|---|---|---|---|---|---|---|---|---|---|
$krow
$nrow

CPU kiln / nginx: **$ratio** (target ≤ 1). kiln's total includes taking the
RTMP source in and packaging it, which nginx does not do: $base_pct% of a core
without viewers (5 s before they came); less that, kiln / nginx is **$vratio**.

Added latency (\`cargo bench --bench latency -- --llhls\`): the file published
over RTMP at its own pace; one viewer asks for each preload-hinted part
before it exists and reads it whole; per video frame, from just before its
bytes are written to the ingest socket to the whole part holding it read
(frames matched by payload hash). Every frame waits for its part to be cut,
so the first frame of a part waits about one ChunkDuration.

| ChunkDuration s | p50 ms | p90 ms | p99 ms (target ≤ ChunkDuration + 20 ms) | max ms | frames matched / sent |
|---|---|---|---|---|---|
$lat_rows"
fi

if want startup; then
    # The floor: read + deserialize the same state file with serde_json and
    # bind the same TCP ports (API, API TLS, RTMP), nothing else.
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo build --release --quiet --bench startup_floor)
    FLOOR=$(ls -t "$TARGET"/release/deps/startup_floor-* | grep -v '\.d$' | head -1)
    measure_start() { # statefile [floor] -> "ms rss_kb"
        local d=$WORK/kiln
        rm -rf "$d"; mkdir -p "$d"
        kiln_config "$d" "$1"
        local cmd=("$KILN" -c "$d/server.xml")
        [[ ${2:-} == floor ]] && cmd=("$FLOOR" "$1" "$API_P" "$TLS_P" "$RTMP_IN")
        python3 - "$API_P" "$AUTH" "${cmd[@]}" <<'EOF'
import socket, subprocess, sys, time
port, auth, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
req = f"GET /v1/version HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n".encode()
t0 = time.monotonic()
p = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
ms = None
while time.monotonic() - t0 < 10:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=1)
        s.sendall(req)
        if s.recv(64).startswith(b"HTTP/1.1 200"):
            ms = (time.monotonic() - t0) * 1000
            break
    except OSError:
        time.sleep(0.0005)
time.sleep(0.5)
rss = [l.split()[1] for l in open(f"/proc/{p.pid}/status") if l.startswith("VmRSS")][0]
p.terminate(); p.wait(5)
print(f"{ms:.1f}" if ms else "timeout", rss)
EOF
    }
    python3 - "$WORK/state10k.json" <<'EOF'
import json, sys
pushes = [{"id": f"r{i}", "vhost": "default", "app": "app", "streamName": f"absent{i % 100}",
           "variantNames": [], "trackIds": [], "protocol": "rtmp",
           "url": "rtmp://127.0.0.1:9/live", "streamKey": f"k{i}", "createdMs": 1795241862945}
          for i in range(10000)]
json.dump({"format": 1, "vhosts": [], "pushes": pushes}, open(sys.argv[1], "w"))
EOF
    rows=""
    for kind in empty 10k; do
        st=$WORK/state-$kind.json
        [[ $kind == 10k ]] && sf=$WORK/state10k.json || sf=/nonexistent
        ms=(); fl=(); rss=""
        # kiln and the floor alternate, 7 runs each; medians.
        for _ in 1 2 3 4 5 6 7; do
            rm -f "$st"; [[ -f $sf ]] && cp "$sf" "$st"
            read -r m r <<<"$(measure_start "$st")"; ms+=("$m"); rss=$r
            rm -f "$st"; [[ -f $sf ]] && cp "$sf" "$st"
            read -r m _ <<<"$(measure_start "$st" floor)"; fl+=("$m")
        done
        med=$(printf '%s\n' "${ms[@]}" | sort -n | sed -n 4p)
        fmed=$(printf '%s\n' "${fl[@]}" | sort -n | sed -n 4p)
        if [[ $kind == empty ]]; then label="idle (no tasks)"; else label="10,000 reserved push tasks"; fi
        ratio=$(calc "'n/a' if 'timeout' in ('$med', '$fmed') else '%.2f' % (float('$med') / float('$fmed'))")
        tm=$(calc "'yes' if '$ratio' != 'n/a' and float('$ratio') <= 1.5 else 'no'")
        mt=""; [[ $kind == 10k ]] && mt=" (< 20 MiB: $(calc "'yes' if $rss < 20*1024 else 'no'"))"
        rows+="| $label | $med | $fmed | **$ratio** (≤ 1.5: $tm) | $(printf '%s ' "${ms[@]}") | $(fmt "$(calc "$rss/1024")" 1)$mt |
"
        log "startup $kind: kiln $med ms, floor $fmed ms, ratio $ratio; runs ${ms[*]} / ${fl[*]}"
    done
    add "### Start-up and memory

Process start (fork+exec) to the first \`200\` of \`GET /v1/version\` (client
polls every 0.5 ms), 7 runs alternated with the floor, medians; RSS 0.5 s
after. The 10,000 tasks are read from the state file (they name streams
that do not exist, so they stay reserved). The floor
(\`benches/startup_floor.rs\`) reads and deserializes the same state file
with serde_json, binds the same TCP ports and answers the first request:
what start-up cannot avoid. Target: kiln within 1.5x of the floor.

| state | kiln ms | floor ms | kiln / floor (target) | kiln runs ms | RSS MiB (target) |
|---|---|---|---|---|---|
$rows"
fi

# --- cluster: one origin, three edges, Redis as the origin map ---------------------------
if want cluster; then
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo bench --quiet --bench llhls_viewers --no-run 2>"$WORK/cluster-build.err") ||
        { cat "$WORK/cluster-build.err" >&2; exit 1; }
    VIEWERS=$(ls -t "$TARGET"/release/deps/llhls_viewers-* | grep -v '\.d$' | head -1)
    read -r REDIS_P <<<"$(free_ports 1)"
    redis-server --port "$REDIS_P" --bind 127.0.0.1 --save '' --appendonly no >"$WORK/redis.log" 2>&1 &
    REDIS_PID=$!; PIDS+=("$REDIS_PID")
    wait_tcp "$REDIS_P"
    rcmds() { redis-cli -p "$REDIS_P" INFO stats | awk -F: '/^total_commands_processed/{print $2+0}'; }
    # A cluster node: API, RTMP in, SRT (origins serve edges over SRT), LL-HLS.
    node_start() { # name -> "pid api rtmp srt llhls"
        local d=$WORK/$1 api rtmp srt llhls
        rm -rf "$d"; mkdir -p "$d"
        read -r api rtmp srt llhls <<<"$(free_ports 4)"
        cat >"$d/server.xml" <<EOF
<?xml version="1.0"?>
<Server version="8">
  <Name>$1</Name>
  <IP>127.0.0.1</IP>
  <StateFile>$d/state.json</StateFile>
  <Bind>
    <Managers><API><Port>$api</Port></API></Managers>
    <Providers><RTMP><Port>$rtmp</Port></RTMP><SRT><Port>$srt</Port></SRT></Providers>
    <Publishers><LLHLS><Port>$llhls</Port></LLHLS></Publishers>
  </Bind>
  <Managers><Host><Names><Name>*</Name></Names></Host><API><AccessToken>$TOKEN</AccessToken></API></Managers>
  <VirtualHosts><VirtualHost><Name>default</Name><Host><Names><Name>*</Name></Names></Host>
    <OriginMapStore><RedisServer><Host>127.0.0.1:$REDIS_P</Host></RedisServer><OriginHostName>127.0.0.1</OriginHostName></OriginMapStore>
    <Applications><Application><Name>app</Name><Type>live</Type>
      <Providers><RTMP/><SRT/></Providers>
      <Publishers><LLHLS><ChunkDuration>0.5</ChunkDuration><SegmentDuration>2</SegmentDuration></LLHLS></Publishers>
    </Application></Applications>
  </VirtualHost></VirtualHosts>
</Server>
EOF
        # Its stdout is not the command substitution's pipe (that would
        # wait for kiln to exit).
        "$KILN" -c "$d/server.xml" >/dev/null 2>"$d/log" &
        local pid=$!
        wait_tcp "$api" 200 >&2
        echo "$pid $api $rtmp $srt $llhls"
    }
    cluster_source() { # rtmp url: the looped source, long enough for every phase
        timeout 900 ffmpeg -hide_banner -loglevel error -nostdin -re -stream_loop -1 \
            -i "$SRC" -c copy -f flv "$1" &
        SRC_PID=$!; PIDS+=("$SRC_PID")
    }
    edge_plays() { # llhls port: the edge serves a video chunklist with parts; prints its name
        local m c
        m=$(curl -s -m 3 "http://127.0.0.1:$1/app/src/llhls.m3u8") || return 1
        c=$(printf '%s\n' "$m" | grep -m1 '^chunklist_.*_video_') || return 1
        curl -s -m 3 "http://127.0.0.1:$1/app/src/$c" | grep -q '#EXT-X-PART:' && printf '%s' "$c"
    }
    read -r OA_PID _ OA_RTMP _ _ <<<"$(node_start origin-a)"; PIDS+=("$OA_PID")
    EDGES=()
    for e in 1 2 3; do
        read -r pid _ _ _ ll <<<"$(node_start "edge-$e")"; PIDS+=("$pid"); EDGES+=("$pid:$ll")
    done
    EDGE_PIDS=("${EDGES[@]%%:*}")
    cluster_source "rtmp://127.0.0.1:$OA_RTMP/app/src"
    # Each edge pulls the stream on its first viewer's request.
    for e in "${EDGES[@]}"; do
        for _ in $(seq 100); do edge_plays "${e#*:}" >/dev/null && break; sleep 0.2; done
        edge_plays "${e#*:}" >/dev/null || { log "edge ${e#*:} does not play: $(tail -3 "$WORK/edge-1/log")"; exit 1; }
    done
    sleep 3
    c_rows=""
    for N in $CLUSTER_NS; do
        r0=$(rcmds); c0=$(cpu_ticks "$OA_PID"); e0=$(cpu_ticks "${EDGE_PIDS[@]}")
        VPIDS=()
        if ((N > 0)); then
            k=0
            for e in "${EDGES[@]}"; do
                n=$(( N / 3 + (k < N % 3 ? 1 : 0) )); k=$((k + 1))
                "$VIEWERS" --url "http://127.0.0.1:${e#*:}/app/src" --viewers "$n" --seconds "$SECS" \
                    >"$WORK/cluster-$N-$k.txt" 2>>"$WORK/cluster-viewers.err" &
                VPIDS+=("$!"); PIDS+=("$!")
            done
            wait "${VPIDS[@]}" || { log "cluster viewers failed: $(tail -3 "$WORK/cluster-viewers.err")"; exit 1; }
        else
            sleep "$SECS"
        fi
        c1=$(cpu_ticks "$OA_PID"); e1=$(cpu_ticks "${EDGE_PIDS[@]}"); r1=$(rcmds)
        conn=0; miss=0; err=0; parts=0
        for f in "$WORK"/cluster-"$N"-*.txt; do
            [[ -s $f ]] || continue
            read -r _ c _ _ _ p _ _ _ m _ _ _ _ _ er _ <"$f"
            conn=$((conn + c)); miss=$((miss + m)); err=$((err + er)); parts=$((parts + p))
        done
        opct=$(calc "100*($c1-$c0)/$TCK/$SECS"); epct=$(calc "100*($e1-$e0)/$TCK/$SECS")
        rps=$(calc "($r1-$r0)/$SECS")
        log "cluster N=$N: origin ${opct}% of a core, edges ${epct}%, viewers $conn, parts $parts, missing $miss, errors $err, redis ${rps} commands/s"
        c_rows+="| $N | $conn | $parts | $miss / $err | $(fmt "$opct" 1) | $(fmt "$epct" 1) | $(fmt "$rps" 2) |
"
    done
    # Failover: origin A dies (kill -9); origin B takes the same stream.
    # Edge 1 plays again when it serves parts of a new stream (a new key in
    # its chunklist's name) from B.
    before=$(edge_plays "${EDGES[0]#*:}" || true)
    kill -9 "$OA_PID"; stop "$SRC_PID"
    t0=$(date +%s.%N)
    read -r OB_PID _ OB_RTMP _ _ <<<"$(node_start origin-b)"; PIDS+=("$OB_PID")
    cluster_source "rtmp://127.0.0.1:$OB_RTMP/app/src"
    again=
    for _ in $(seq 600); do
        now=$(edge_plays "${EDGES[0]#*:}" || true)
        if [[ -n $now && $now != "$before" ]]; then again=$(calc "$(date +%s.%N) - $t0"); break; fi
        sleep 0.1
    done
    log "cluster failover: edge 1 plays again after ${again:-never} s"
    fo=$(calc "'never' if '$again' == '' else '%.1f (< 15: %s)' % (float('$again'), 'yes' if float('$again') < 15 else 'no')")
    stop "$SRC_PID"; stop "$OB_PID"; for p in "${EDGE_PIDS[@]}"; do stop "$p"; done; stop "$REDIS_PID"
    add "### Origin-edge cluster (1 origin, 3 edges, Redis origin map, LL-HLS viewers on the edges)

One origin (RTMP in from the looped 720p30 2.5 Mb/s source, SRT out to the
edges) and three edges on loopback, each with \`<OriginMapStore>\` on a
real \`redis-server\`: an edge pulls the stream from the origin the map
names when a viewer first asks for it. N viewers
(\`cargo bench --bench llhls_viewers\`, blocking reloads, every part) are
spread evenly over the edges for ${SECS} s. Origin / edges CPU: utime+stime
over the window, % of one core (the origin must not grow with viewers: it
serves three SRT callers whatever N is). Redis commands: the server's
\`total_commands_processed\` over the window, per second (one stream: the
origin's refreshes and what the edges ask).

| viewers | connected | parts received | missing / errors | origin CPU % | edges CPU % (all three) | Redis commands per stream per s |
|---|---|---|---|---|---|---|
$c_rows
Failover: origin A killed (\`kill -9\`), origin B started and the source
published to it; the time until edge 1 serves parts of the stream from B
(a new stream key in its chunklist's name): **$fo s**. The map's key for A
expires 10 s after its last refresh (\`EX 10\`); B registers then.
"
fi

# --- the operator console: what an open page costs kiln -----------------------------
if want console; then
    CONSOLE_STREAMS=${BENCH_CONSOLE_STREAMS:-20}
    start_kiln
    SOURCES=()
    for i in $(seq "$CONSOLE_STREAMS"); do
        start_source "rtmp://127.0.0.1:$RTMP_IN/app/s$i"
        SOURCES+=("$SRC_PID")
    done
    for _ in $(seq 100); do
        n=$(api GET /v1/vhosts/default/apps/app/streams | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["response"]))')
        ((n >= CONSOLE_STREAMS)) && break
        sleep 0.1
    done
    log "console: $n streams live"
    sleep "$WARM"
    a=$(cpu_ns "$KILN_PID"); sleep "$SECS"; b=$(cpu_ns "$KILN_PID")
    idle_pct=$(calc "($b - $a) / ($SECS * 1e9) * 100")
    CHROMIUM=$(command -v chromium) node "$ROOT/tests/web/console_open.mjs" \
        "http://127.0.0.1:$API_P" "$TOKEN" $((WARM + SECS + 2)) >"$WORK/console.json" &
    NODE_PID=$!; PIDS+=("$NODE_PID")
    sleep $((WARM + 3))
    a=$(cpu_ns "$KILN_PID"); sleep "$SECS"; b=$(cpu_ns "$KILN_PID")
    open_pct=$(calc "($b - $a) / ($SECS * 1e9) * 100")
    wait "$NODE_PID" || true
    read -r reqs secs shown < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["requests"], d["seconds"], d["streams"])' "$WORK/console.json")
    added=$(calc "$open_pct - $idle_pct")
    log "console: kiln $(fmt "$idle_pct") % without the page, $(fmt "$open_pct") % with it ($reqs API requests in $secs s, $shown streams shown)"
    SECTIONS+=("### The operator console open (${CONSOLE_STREAMS} live streams, page in headless Chromium)

| streams live / shown | kiln CPU % of a core, no page | with the console open | added by the page (target < 1) | API requests per second |
|---|---|---|---|---|
| $n / $shown | $(fmt "$idle_pct") | $(fmt "$open_pct") | **$(fmt "$added")** ($(python3 -c "print('yes' if $added < 1 else 'no')")) | $(calc "round($reqs / $secs, 1)") |
")
    for p in "${SOURCES[@]}"; do stop "$p"; done
    stop_kiln
fi

# --- WebRTC fan-out: kiln against Janus (streaming plugin) -------------------------
if want webrtc; then
    log "building the WebRTC load generator (cargo bench --bench webrtc_viewers)"
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo bench --quiet --bench webrtc_viewers --no-run 2>"$WORK/webrtc-build.err") ||
        { cat "$WORK/webrtc-build.err" >&2; exit 1; }
    GEN=$(ls -t "$TARGET"/release/deps/webrtc_viewers-* | grep -v '\.d$' | head -1)
    # One source for both: 640x360 30 fps H.264 (600 kb/s, no B-frames) and
    # Opus 96 kb/s, so neither server transcodes and 500 viewers stay
    # within what one load-generator thread decrypts.
    RTC_SRC=$TARGET/bench-webrtc-source.ts
    if [[ ! -s $RTC_SRC ]]; then
        nice ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=640x360:rate=30 \
            -f lavfi -i sine=frequency=440:sample_rate=48000 -t 20 -c:v libx264 -preset veryfast \
            -tune zerolatency -b:v 600k -maxrate 600k -bufsize 600k -g 60 -pix_fmt yuv420p \
            -c:a libopus -b:a 96k -ar 48000 -f mpegts "$RTC_SRC.tmp" && mv "$RTC_SRC.tmp" "$RTC_SRC"
    fi
    read -r RTC_SIG RTC_TS RTC_RTMP RTC_ICE J_HTTP J_V J_A <<<"$(free_ports 7)"
    HOST_IP=$(hostname -I 2>/dev/null | awk '{print $1}')
    rtc_kiln() { # [feed]: ffmpeg (default) loops the source in; "none" leaves it to the probe
        local feed=${1:-ffmpeg}
        local d=$WORK/kiln-webrtc
        rm -rf "$d"; mkdir -p "$d"
        cat >"$d/server.xml" <<EOF
<?xml version="1.0"?>
<Server version="8"><Name>kiln</Name><IP>127.0.0.1</IP><StateFile>$d/state.json</StateFile>
  <Bind><Managers><API><Port>$API_P</Port></API></Managers>
    <Providers><MPEGTS><Port>$RTC_TS/udp</Port></MPEGTS><RTMP><Port>$RTC_RTMP</Port></RTMP></Providers>
    <Publishers><LLHLS><Port>$RTC_SIG</Port></LLHLS><WebRTC><Signalling><Port>$RTC_SIG</Port></Signalling>
      <IceCandidates><IceCandidate>127.0.0.1:$RTC_ICE/udp</IceCandidate></IceCandidates></WebRTC></Publishers></Bind>
  <Managers><Host><Names><Name>*</Name></Names></Host><API><AccessToken>$TOKEN</AccessToken></API></Managers>
  <VirtualHosts><VirtualHost><Name>default</Name><Host><Names><Name>*</Name></Names></Host>
    <Applications><Application><Name>app</Name><Type>live</Type>
      <OutputProfiles><OutputProfile><Name>bypass</Name><Encodes><Video><Name>v</Name><Bypass>true</Bypass></Video><Audio><Name>a</Name><Bypass>true</Bypass></Audio></Encodes></OutputProfile></OutputProfiles>
      <Providers><RTMP/><MPEGTS><StreamMap><Stream><Name>src</Name><Port>$RTC_TS</Port></Stream></StreamMap></MPEGTS></Providers>
      <Publishers><WebRTC/></Publishers>
    </Application></Applications></VirtualHost></VirtualHosts></Server>
EOF
        "$KILN" -c "$d/server.xml" 2>"$d/log" &
        KILN_PID=$!; PIDS+=("$KILN_PID")
        wait_tcp "$API_P" 200
        [[ $feed == ffmpeg ]] || return 0
        timeout $((WARM + SECS + 90)) ffmpeg -hide_banner -loglevel error -nostdin -re -stream_loop -1 -i "$RTC_SRC" \
            -c copy -f mpegts "udp://127.0.0.1:$RTC_TS?pkt_size=1316" &
        SRC_PID=$!; PIDS+=("$SRC_PID")
        wait_stream
    }
    JANUS_PID=
    rtc_janus() { # [feed]: as rtc_kiln's
        local feed=${1:-ffmpeg}
        local d=$WORK/janus
        rm -rf "$d"; mkdir -p "$d"
        local lib
        lib=$(dirname "$(dirname "$(find /usr/lib -path '*janus/plugins/libjanus_streaming.so' | head -1)")")
        cat >"$d/janus.jcfg" <<EOF
general: { configs_folder = "$d" plugins_folder = "$lib/plugins" transports_folder = "$lib/transports"
  events_folder = "$lib/events" loggers_folder = "$lib/loggers" debug_level = 2 protected_folders = [] }
media: { rtp_port_range = "40000-59999" }
plugins: { disable = "libjanus_audiobridge.so,libjanus_duktape.so,libjanus_echotest.so,libjanus_lua.so,libjanus_nosip.so,libjanus_recordplay.so,libjanus_sip.so,libjanus_textroom.so,libjanus_videocall.so,libjanus_videoroom.so,libjanus_voicemail.so" }
transports: { disable = "libjanus_websockets.so,libjanus_mqtt.so,libjanus_nanomsg.so,libjanus_pfunix.so,libjanus_rabbitmq.so" }
events: { broadcast = false }
loggers: { disable = "libjanus_jsonlog.so" }
EOF
        cat >"$d/janus.transport.http.jcfg" <<EOF
general: { base_path = "/janus" http = true port = $J_HTTP ip = "127.0.0.1" https = false }
admin: { admin_http = false }
EOF
        cat >"$d/janus.plugin.streaming.jcfg" <<EOF
general: { }
bench: { type = "rtp" id = 1 description = "bench" media = (
  { type = "video" mid = "v" port = $J_V pt = 100 codec = "h264" fmtp = "profile-level-id=42e01f;packetization-mode=1" },
  { type = "audio" mid = "a" port = $J_A pt = 111 codec = "opus" } ) }
EOF
        janus -C "$d/janus.jcfg" -F "$d" >"$d/log" 2>&1 &
        JANUS_PID=$!; PIDS+=("$JANUS_PID")
        wait_tcp "$J_HTTP" 200
        [[ $feed == ffmpeg ]] || return 0
        timeout $((WARM + SECS + 90)) ffmpeg -hide_banner -loglevel error -nostdin -re -stream_loop -1 -i "$RTC_SRC" \
            -map 0:v -c:v copy -f rtp -payload_type 100 "rtp://127.0.0.1:$J_V?pkt_size=1200" \
            -map 0:a -c:a copy -f rtp -payload_type 111 "rtp://127.0.0.1:$J_A?pkt_size=1200" >/dev/null 2>&1 &
        SRC_PID=$!; PIDS+=("$SRC_PID")
        sleep 1
    }
    # One run: start the viewers, count the window: "cpu_s rss_kb <generator line>".
    rtc_run() { # server-pid N generator-args...
        local pid=$1 n=$2; shift 2
        local out=$WORK/gen.out
        "$GEN" "$@" --viewers "$n" --seconds "$SECS" --warm "$WARM" >"$out" 2>>"$WORK/gen.err" &
        local g=$!; PIDS+=("$g")
        # The viewers connect during the warm-up.
        sleep "$WARM"
        local c0 c1 rss; c0=$(cpu_ticks "$pid")
        sleep "$SECS"
        c1=$(cpu_ticks "$pid")
        rss=$(rss_kb "$pid")
        wait "$g" || true
        echo "$(calc "($c1-$c0)/$TCK") $rss $(cat "$out")"
    }
    field() { awk -v k="$1" '{for (i = 1; i < NF; i++) if ($i == k) print $(i+1)}' <<<"$2"; }
    rows=""
    declare -A RSS_K RSS_J
    for N in $WEBRTC_NS; do
        k_cpu=; j_cpu=; k_line=; j_line=
        for rep in $(seq "$REPEAT"); do
            rtc_kiln
            r=$(rtc_run "$KILN_PID" "$N" --whep "http://127.0.0.1:$RTC_SIG/app/src?direction=whep" --spread 10)
            stop "$SRC_PID"; stop_kiln
            read -r c rss _ <<<"$r"
            if [[ -z $k_cpu ]] || (($(calc "int($c < $k_cpu)"))); then k_cpu=$c; fi
            RSS_K[$N]=$rss; k_line=$r
            log "webrtc N=$N run $rep kiln: $r"
            rtc_janus
            r=$(rtc_run "$JANUS_PID" "$N" --janus "http://127.0.0.1:$J_HTTP/janus" --mountpoint 1 --local-ip "$HOST_IP")
            stop "$SRC_PID"; stop "$JANUS_PID"
            read -r c rss _ <<<"$r"
            if [[ -z $j_cpu ]] || (($(calc "int($c < $j_cpu)"))); then j_cpu=$c; fi
            RSS_J[$N]=$rss; j_line=$r
            log "webrtc N=$N run $rep janus: $r"
        done
        ratio=$(calc "'n/a (< 5 ticks)' if max($k_cpu,$j_cpu) < 5/$TCK else '%.2f' % ($k_cpu/max($j_cpu,1/$TCK))")
        kv=$(field viewers "$k_line"); jv=$(field viewers "$j_line")
        kmin=$(field packets_min "$k_line"); kmax=$(field packets_max "$k_line")
        jmin=$(field packets_min "$j_line"); jmax=$(field packets_max "$j_line")
        kf=$(field frames_min "$k_line"); jf=$(field frames_min "$j_line")
        rows+="| $N | $(fmt "$k_cpu") | $(fmt "$j_cpu") | **$ratio** | $(calc "'%.2f' % (1000*$k_cpu/$SECS/$N)") / $(calc "'%.2f' % (1000*$j_cpu/$SECS/$N)") | $kv / $jv | $(calc "'%.3f' % ($kmin/max($kmax,1))") / $(calc "'%.3f' % ($jmin/max($jmax,1))") | $kf / $jf | $(calc "${RSS_K[$N]}//1024") / $(calc "${RSS_J[$N]}//1024") |
"
        RATIOS+=("WebRTC N=$N CPU: kiln ${ratio}x Janus")
    done
    ns=($WEBRTC_NS); lo=${ns[0]}; hi=${ns[-1]}
    mem=$(calc "'%.1f / %.1f' % ((${RSS_K[$hi]}-${RSS_K[$lo]})/max($hi-$lo,1), (${RSS_J[$hi]}-${RSS_J[$lo]})/max($hi-$lo,1))")
    add "### WebRTC fan-out (1 source -> N viewers), kiln against Janus

Source: 640x360 30 fps H.264 (600 kb/s, keyframe every 2 s) + Opus 96 kb/s,
looped in real time: into kiln as MPEG-TS over UDP, into Janus $(janus --version 2>/dev/null | awk '/version/{print $4; exit}')
(Debian; streaming plugin, an RTP mountpoint) as RTP. Viewers:
\`cargo bench --bench webrtc_viewers\`, one thread, N str0m peers (full ICE,
DTLS, SRTP) each on its own UDP socket; against kiln over WHEP, against
Janus with its HTTP API (\`watch\`, its offer, our answer). CPU =
utime+stime of the server (all threads) over ${SECS} s after ${WARM} s,
alternated ${REPEAT} times, least kept; RSS at the end of the window.
Packets: RTP packets each viewer received in the window (min / max over
viewers: 1.000 means every viewer got as many as the best one); frames:
the fewest video frames a viewer's str0m assembled. Memory per viewer
(RSS from N=$lo to N=$hi, per added viewer): kiln / Janus **$mem KiB**.

| N | kiln CPU s | Janus CPU s | ratio | CPU ms per s per viewer kiln / Janus | viewers connected kiln / Janus | packets min/max kiln / Janus | fewest frames kiln / Janus | RSS MiB kiln / Janus |
|---|---|---|---|---|---|---|---|---|
$rows"

    # Added latency, per video frame: the probe publishes the source's video
    # (RTMP into kiln, RTP into Janus) and is one WebRTC viewer; the other
    # N-1 viewers are the load generator's, started once the stream exists.
    log "building the latency probe (cargo bench --bench latency)"
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo bench --quiet --bench latency --no-run 2>"$WORK/latency-build.err") ||
        { cat "$WORK/latency-build.err" >&2; exit 1; }
    PROBE=$(ls -t "$TARGET"/release/deps/latency-* | grep -v '\.d$' | head -1)
    RTC_FLV=$TARGET/bench-webrtc-source.flv
    [[ -s $RTC_FLV ]] || ffmpeg -hide_banner -loglevel error -y -i "$RTC_SRC" -map 0:v -c copy -f flv "$RTC_FLV"
    LEAD=2 # the probe's head start: the load joins an existing stream
    rtc_latency() { # N probe-args... -> "p50 p90 p99 max matched sent"
        local n=$1; shift
        local out=$WORK/probe.out
        "$PROBE" --file "$RTC_FLV" "$@" --seconds $((LEAD + WARM + SECS)) --warm $((LEAD + WARM)) \
            >"$out" 2>>"$WORK/probe.err" &
        local p=$!; PIDS+=("$p")
        local g=
        if ((n > 1)); then
            sleep "$LEAD"
            "$GEN" "${LOAD[@]}" --viewers $((n - 1)) --seconds "$SECS" --warm "$WARM" >"$WORK/gen.out" 2>>"$WORK/gen.err" &
            g=$!; PIDS+=("$g")
        fi
        wait "$p" || true
        [[ -z $g ]] || wait "$g" || true
        awk '/^latency_us/{print $2, $3, $4, $5, $6, $7}' "$out"
    }
    lat_rows=""
    for N in $WEBRTC_LAT_NS; do
        k_best=; j_best=
        for rep in $(seq "$REPEAT"); do
            rtc_kiln none
            LOAD=(--whep "http://127.0.0.1:$RTC_SIG/app/src?direction=whep" --spread 10)
            k=$(rtc_latency "$N" --publish "rtmp://127.0.0.1:$RTC_RTMP/app/src" "${LOAD[@]}")
            stop_kiln
            [[ -n $k ]] || { log "webrtc latency probe failed: $(tail -3 "$WORK/probe.err")"; exit 1; }
            log "webrtc latency N=$N run $rep kiln (p50 p90 p99 max µs, matched, sent): $k"
            k_best=$(lower_p99 "$k" "$k_best")
            rtc_janus none
            LOAD=(--janus "http://127.0.0.1:$J_HTTP/janus" --mountpoint 1 --local-ip "$HOST_IP")
            j=$(rtc_latency "$N" --rtp "127.0.0.1:$J_V" "${LOAD[@]}")
            stop "$JANUS_PID"
            [[ -n $j ]] || { log "webrtc latency probe failed: $(tail -3 "$WORK/probe.err")"; exit 1; }
            log "webrtc latency N=$N run $rep janus (p50 p90 p99 max µs, matched, sent): $j"
            j_best=$(lower_p99 "$j" "$j_best")
        done
        read -r kp50 kp90 kp99 kmax km ks <<<"$k_best"
        read -r jp50 jp90 jp99 jmax jm js <<<"$j_best"
        lat_rows+="| $N | kiln | $(us_ms "$kp50") | $(us_ms "$kp90") | **$(us_ms "$kp99")** | $(us_ms "$kmax") | $km / $ks |
| $N | Janus | $(us_ms "$jp50") | $(us_ms "$jp90") | $(us_ms "$jp99") | $(us_ms "$jmax") | $jm / $js |
"
        RATIOS+=("WebRTC added latency N=$N p99: kiln $(calc "'%.2f' % ($kp99/max($jp99,1))")x Janus")
    done
    add "### WebRTC added latency (frame in -> frame out to a viewer)

\`cargo bench --bench latency\` publishes the fan-out source's video (no
audio: Janus would get none) at its own pace, into kiln over RTMP and into
Janus's mountpoint as RTP (single NAL units and FU-A, SPS/PPS before each
keyframe, as ffmpeg sends it), and is one WebRTC viewer (a str0m peer) of
it. Per video frame: from just before the frame is handed to the publishing
socket to the datagram that completes it at the viewer (frames matched by
their last slice, which no RTP path rewrites). The other N-1 viewers are
the fan-out bench's load generator. $((LEAD + WARM + SECS)) s per run, the first
$((LEAD + WARM)) s not counted (the viewers join; kiln's new viewer starts with the
GOP), ${REPEAT} alternated runs per side, the run with the lower p99 kept.
Target: kiln's p99 <= Janus's at each N.

| N | server | p50 ms | p90 ms | p99 ms | max ms | frames matched / sent |
|---|---|---|---|---|---|---|
$lat_rows"

    # Glass to glass, in one Chromium: a canvas painting its clock is
    # published over WHIP and played back over WHEP and over LL-HLS
    # (hls.js, ChunkDuration 0.2) at once.
    if command -v chromium >/dev/null && command -v node >/dev/null && [[ -e $ROOT/tests/web/node_modules/puppeteer-core ]]; then
        d=$WORK/kiln-glass
        rm -rf "$d"; mkdir -p "$d"
        cat >"$d/server.xml" <<EOF
<?xml version="1.0"?>
<Server version="8"><Name>kiln</Name><IP>127.0.0.1</IP><StateFile>$d/state.json</StateFile>
  <Bind><Managers><API><Port>$API_P</Port></API></Managers>
    <Publishers><LLHLS><Port>$RTC_SIG</Port></LLHLS><WebRTC><Signalling><Port>$RTC_SIG</Port></Signalling>
      <IceCandidates><IceCandidate>127.0.0.1:$RTC_ICE/udp</IceCandidate></IceCandidates></WebRTC></Publishers></Bind>
  <Managers><Host><Names><Name>*</Name></Names></Host><API><AccessToken>$TOKEN</AccessToken></API></Managers>
  <VirtualHosts><VirtualHost><Name>default</Name><Host><Names><Name>*</Name></Names></Host>
    <Applications><Application><Name>app</Name><Type>live</Type>
      <OutputProfiles><OutputProfile><Name>bypass</Name><Encodes><Video><Name>v</Name><Bypass>true</Bypass></Video></Encodes></OutputProfile></OutputProfiles>
      <Providers><WebRTC/></Providers>
      <Publishers><WebRTC/><LLHLS><ChunkDuration>0.2</ChunkDuration><SegmentDuration>1</SegmentDuration></LLHLS></Publishers>
    </Application></Applications></VirtualHost></VirtualHosts></Server>
EOF
        glass_rows=""; w50s=(); h50s=()
        for rep in $(seq 3); do
            "$KILN" -c "$d/server.xml" 2>"$d/log" &
            KILN_PID=$!; PIDS+=("$KILN_PID")
            wait_tcp "$API_P" 200
            g=$(CHROMIUM=$(command -v chromium) timeout 120 node "$ROOT/tests/web/glass_to_glass.mjs" \
                "http://127.0.0.1:$RTC_SIG/app/glass$rep" $((SECS + 15)) 10 \
                "$ROOT/tests/web/node_modules/hls.js/dist/hls.min.js" 2>>"$WORK/glass.err" | tail -1)
            stop_kiln
            log "glass to glass run $rep: $g"
            read -r wn w50 w90 w99 hn h50 h90 h99 <<<"$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); w,h=d["webrtc"],d["llhls"]; print(w["n"],w["p50"],w["p90"],w["p99"],h["n"],h["p50"],h["p90"],h["p99"])' "$g" 2>/dev/null || echo "0 0 0 0 0 0 0 0")"
            ((wn > 0 && hn > 0)) || { log "glass-to-glass run failed: $g $(tail -3 "$WORK/glass.err")"; exit 1; }
            w50s+=("$w50"); h50s+=("$h50")
            glass_rows+="| $rep | $w50 / $w90 / $w99 ($wn) | $h50 / $h90 / $h99 ($hn) | $(calc "'%.3f' % ($w50/max($h50,1))") |
"
        done
        mw=$(printf '%s\n' "${w50s[@]}" | sort -n | sed -n 2p); mh=$(printf '%s\n' "${h50s[@]}" | sort -n | sed -n 2p)
        RATIOS+=("glass to glass p50: WebRTC ${mw} ms, LL-HLS ${mh} ms ($(calc "'%.3f' % ($mw/max($mh,1))")x; target <= 0.25)")
        add "### Glass to glass: WebRTC against LL-HLS (one publish, one browser)

\`tests/web/glass_to_glass.mjs\`: headless Chromium paints its clock on a
canvas as a row of black and white blocks (24 bits of milliseconds and a
check), publishes the canvas over WHIP (H.264, 30 fps) and plays the stream
back in the same page over WHEP and over LL-HLS (hls.js 1.5.20,
\`lowLatencyMode\`; ChunkDuration 0.2 s, SegmentDuration 1 s) at once. For
each frame a \`<video>\` is about to show (\`requestVideoFrameCallback\`)
the blocks are read back; the delay is the clock then minus the clock
painted, so it holds encoding, kiln, decoding and the players' buffers.
$((SECS + 15)) s per run, the first 10 s not counted; three runs, each its own kiln.
Median of the runs' p50: **WebRTC ${mw} ms, LL-HLS ${mh} ms** (target:
WebRTC's p50 <= 1/4 of LL-HLS's).

| run | WebRTC p50 / p90 / p99 ms (frames read) | LL-HLS p50 / p90 / p99 ms (frames read) | p50 ratio |
|---|---|---|---|
$glass_rows"
    else
        log "glass to glass: skipped (needs chromium, node and npm ci --prefix tests/web)"
    fi
fi


# --- channels: a file played as live, against the same file published -------------
if want channels; then
    MEDIA=$WORK/media; mkdir -p "$MEDIA"
    ffmpeg -hide_banner -loglevel error -y -i "$SRC" -c copy "$MEDIA/src.mp4"
    KILN_PROVIDERS_EXTRA="<Schedule><MediaRootDir>$MEDIA</MediaRootDir></Schedule>"
    channel() { # name: a scheduled channel playing src.mp4 over and over
        api POST /v1/vhosts/default/apps/app/scheduledChannels \
            "{\"stream\":{\"name\":\"$1\",\"bypassTranscoder\":true},\"fallbackProgram\":{\"items\":[{\"url\":\"file://src.mp4\"}]}}" >/dev/null
    }
    # N publishes against N channels: enough work for the CPU ticks to tell.
    CH_N=${BENCH_CHANNEL_N:-10}
    ch_rows=""; pub_cpus=(); ch_cpus=()
    rate_in() { # bytes in over every stream of the app (its stats)
        api GET /v1/stats/current/vhosts/default/apps/app |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["response"]["totalBytesIn"])' 2>/dev/null || echo 0
    }
    for rep in $(seq "$REPEAT"); do # alternated: publish, then channel
        start_kiln
        srcs=()
        for i in $(seq "$CH_N"); do start_source "rtmp://127.0.0.1:$RTMP_IN/app/src$i"; srcs+=("$SRC_PID"); done
        sleep "$WARM"
        c0=$(cpu_ticks "$KILN_PID"); i0=$(rate_in)
        window "$KILN_PID" "kiln-rtmp-file"
        c1=$(cpu_ticks "$KILN_PID"); i1=$(rate_in)
        p_cpu=$(calc "($c1-$c0)/$TCK"); p_rate=$(calc "($i1-$i0)*8/$SECS/1e6")
        for p in "${srcs[@]}"; do stop "$p"; done
        stop_kiln
        start_kiln
        for i in $(seq "$CH_N"); do channel "ch$i"; done
        sleep "$WARM"
        c0=$(cpu_ticks "$KILN_PID"); i0=$(rate_in)
        window "$KILN_PID" "kiln-channel-file"
        c1=$(cpu_ticks "$KILN_PID"); i1=$(rate_in)
        s_cpu=$(calc "($c1-$c0)/$TCK"); s_rate=$(calc "($i1-$i0)*8/$SECS/1e6")
        stop_kiln
        pub_cpus+=("$p_cpu"); ch_cpus+=("$s_cpu")
        log "channels run $rep: $CH_N RTMP publishes cpu ${p_cpu}s (${p_rate} Mb/s in), $CH_N channels cpu ${s_cpu}s (${s_rate} Mb/s out)"
        ch_rows+="| $rep | $(fmt "$p_cpu") ($(fmt "$p_rate") Mb/s) | $(fmt "$s_cpu") ($(fmt "$s_rate") Mb/s) | $(calc "'%.2f' % ($s_cpu/max($p_cpu,1/$TCK))") |
"
    done
    med() { python3 -c "import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
    ch_ratio=$(calc "'%.2f' % ($(med "${ch_cpus[@]}")/max($(med "${pub_cpus[@]}"),1/$TCK))")

    # The API while 20 channels read files, against none, in one kiln.
    start_kiln
    api_rows=""; none_p99=(); busy_p99=()
    for rep in $(seq "$REPEAT"); do
        read -r rps p99 _ <<<"$(wrk_run "http://127.0.0.1:$API_P/v1/vhosts")"
        none_p99+=("$p99")
        for i in $(seq 20); do channel "c$i"; done
        sleep "$WARM"
        read -r rps2 p99b _ <<<"$(wrk_run "http://127.0.0.1:$API_P/v1/vhosts")"
        busy_p99+=("$p99b")
        live=$(api GET /v1/vhosts/default/apps/app/streams | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["response"]))')
        for i in $(seq 20); do api DELETE "/v1/vhosts/default/apps/app/scheduledChannels/c$i" >/dev/null; done
        sleep 1
        log "channels API run $rep: p99 ${p99} ms with none, ${p99b} ms with 20 channels ($live streams live)"
        api_rows+="| $rep | $(fmt "$p99" 3) ($(fmt "$rps" 0) req/s) | $(fmt "$p99b" 3) ($(fmt "$rps2" 0) req/s, $live live) | $(calc "'%.2f' % ($p99b/max($p99,0.001))") |
"
    done
    stop_kiln
    KILN_PROVIDERS_EXTRA=
    api_ratio=$(calc "'%.2f' % ($(med "${busy_p99[@]}")/max($(med "${none_p99[@]}"),0.001))")
    add "### Scheduled channels: a file played as live (issue 31)

The source file above (720p30 H.264 2.5 Mb/s + AAC, 20 s) as MP4. Publish:
${CH_N} ffmpeg \`-re -stream_loop -1 -c copy\` into kiln over RTMP. Channel:
${CH_N} scheduled channels whose fallback plays the same MP4 over and over
(each read by a file reader thread of kiln's, paced by the loop). CPU = utime+stime of the
kiln process (loop and reader threads) over ${SECS} s after ${WARM} s; the
rate is what kiln's stats say came in for the application's streams (both
carry the same media). Alternated ${REPEAT} times; target: channel <= 1.2x publish
(median **${ch_ratio}**).

| run | publish CPU s (in) | channel CPU s (out) | ratio |
|---|---|---|---|
$ch_rows
**The API while channels read files**: wrk (1 thread, 64 connections,
${SECS} s) on \`GET /v1/vhosts\`, first with no channel, then with 20
channels each playing the file (20 reader threads), in one kiln; target
p99 with 20 <= 1.5x p99 with none (median **${api_ratio}**).

| run | p99 ms, no channel | p99 ms, 20 channels | ratio |
|---|---|---|---|
$api_rows"
fi

# --- renditions from the encoder: one ladder against three streams -----------------
if want abr; then
    # shellcheck source=benches/compare_abr.sh
    source "$ROOT/benches/compare_abr.sh"
fi

# --- against OME: the server kiln imitates, on its own config ----------------------
if want ome; then
    # shellcheck source=benches/compare_ome.sh
    source "$ROOT/benches/compare_ome.sh"
fi

# --- report -----------------------------------------------------------------------
KVER=$(uname -r)
CPU=$(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)
{
    echo "<!-- RESULTS BEGIN: written by benches/compare.sh; do not edit by hand -->"
    echo
    echo "Run $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs ($CPU), Linux $KVER, load average at start $(cut -d' ' -f1-3 /proc/loadavg)."
    echo "kiln $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2>/dev/null || echo '+changes'),"
    echo "$(rustc --version), $(nginx -v 2>&1 | sed 's/.*: //'), $(wrk -v 2>&1 | head -1 | awk '{print "wrk " $2}'),"
    echo "$(ffmpeg -version | head -1 | awk '{print "ffmpeg " $3}'), $(openssl version | awk '{print $1 " " $2}'). Window ${SECS} s, warm-up ${WARM} s."
    echo
    for s in "${SECTIONS[@]}"; do printf '%s\n' "$s"; done
    echo "<!-- RESULTS END -->"
} >"$WORK/results.md"

cat "$WORK/results.md"
if [[ -z ${BENCH_NO_WRITE:-} ]]; then
    python3 - "$ROOT/BENCHMARKS.md" "$WORK/results.md" <<'EOF'
import re, sys
path, new = sys.argv[1], open(sys.argv[2]).read().strip()
try:
    old = open(path).read()
except FileNotFoundError:
    old = "# Benchmarks\n\n<!-- RESULTS BEGIN -->\n<!-- RESULTS END -->\n"
pat = re.compile(r"<!-- RESULTS BEGIN.*?<!-- RESULTS END -->", re.S)
out = pat.sub(lambda m: new, old) if pat.search(old) else old.rstrip() + "\n\n" + new + "\n"
open(path, "w").write(out)
EOF
    log "BENCHMARKS.md updated"
fi
