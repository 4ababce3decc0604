# kiln against OvenMediaEngine, the server it imitates (issue 45, part 3).
# Sourced by benches/compare.sh (BENCH_ONLY="ome ..."): it uses that
# script's helpers (free_ports, wait_tcp, stop, cpu_ticks, rss_kb, calc,
# fmt, add, RATIOS, SRC, KILN, GEN builds) and adds one section.
#
# Both servers run the same file: OME's own conf/Server.xml from
# ../shared/tools/ome (upstream's Origin.xml: RTMP, SRT and WebRTC in;
# LL-HLS and WebRTC out; video bypassed, AAC -> Opus for WebRTC), ports from
# the environment it already reads. Same source, same clients, one server at
# a time, alternated BENCH_OME_REPEAT times (3), medians:
#
#   - idle: start (exec to the API's first 200), RSS and private memory
#     (anonymous and shared-memory pages: RSS less the program's and
#     libraries' file pages);
#   - ingest: 1 and 10 RTMP streams (1280x720 30 fps 2.5 Mb/s, AAC), no
#     viewers: CPU and memory, RSS and private (kiln's plus its memfd
#     media, the parts and segments it keeps outside its heap);
#   - LL-HLS viewers (BENCH_OME_LLHLS_N, 100 300 1000): llhls_viewers;
#   - WebRTC viewers (BENCH_OME_WEBRTC_N, 50 200 500) through OME's
#     signalling for both: webrtc_viewers --ome; CPU, memory per viewer,
#     and CPU per GB the viewers got;
#   - WebRTC added latency (BENCH_OME_LAT_N, 1 200): latency --ome;
#   - glass to glass in Chromium (tests/web/glass_to_glass.mjs ... ome):
#     a canvas clock published over WHIP, played over OME's signalling and
#     LL-HLS (hls.js) in the same page.
#
# OME_DIR (default ../shared/tools/ome beside the repository, or
# KILN_OME_DIR) must hold the OvenMediaEngine binary with its libraries
# (its setup.sh installs them).

OME_DIR=${KILN_OME_DIR:-$ROOT/../shared/tools/ome}
OME_BIN=$OME_DIR/OvenMediaEngine
OME_REPEAT=${BENCH_OME_REPEAT:-3}
OME_LLHLS_NS=${BENCH_OME_LLHLS_N:-"100 300 1000"}
OME_WEBRTC_NS=${BENCH_OME_WEBRTC_N:-"50 200 500"}
OME_LAT_NS=${BENCH_OME_LAT_N:-"1 200"}
# Which sections run (BENCH_OME_PARTS, default all): idle ingest llhls webrtc latency glass.
OME_PARTS=" ${BENCH_OME_PARTS:-idle ingest llhls webrtc latency glass} "
part() { [[ $OME_PARTS == *" $1 "* ]]; }
OME_AUTH="Basic $(printf %s ome-access-token | base64)"
OME_VERSION=$( ("$OME_BIN" -v 2>/dev/null || true) | grep -o "v[0-9][0-9.a-z-]*" | head -1)

log "building the clients (cargo bench --bench webrtc_viewers --bench latency --bench llhls_viewers)"
(cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo bench --quiet --bench webrtc_viewers --bench latency \
    --bench llhls_viewers --no-run 2>"$WORK/ome-build.err") || { cat "$WORK/ome-build.err" >&2; exit 1; }
O_GEN=$(ls -t "$TARGET"/release/deps/webrtc_viewers-* | grep -v '\.d$' | head -1)
O_PROBE=$(ls -t "$TARGET"/release/deps/latency-* | grep -v '\.d$' | head -1)
O_VIEWERS=$(ls -t "$TARGET"/release/deps/llhls_viewers-* | grep -v '\.d$' | head -1)

# Five consecutive free UDP ports (OME's default is five ICE ports; both get them).
ice_range() {
    python3 -c '
import random, socket
for _ in range(1000):
    b = random.randrange(20000, 31000)
    ss = []
    try:
        for p in range(b, b + 5):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", p)); ss.append(s)
        print(b); break
    except OSError:
        pass
    finally:
        for s in ss: s.close()'
}
read -r O_API O_RTMP O_SRT O_HTTP O_HTTPS O_RELAY O_ORIGIN <<<"$(free_ports 7)"
O_ICE=$(ice_range)
O_TS=$(ice_range)
o_env() {
    OME_HOST_IP=127.0.0.1 OME_API_PORT=$O_API OME_RTMP_PROV_PORT=$O_RTMP OME_SRT_PROV_PORT=$O_SRT \
        OME_LLHLS_STREAM_PORT=$O_HTTP OME_WEBRTC_SIGNALLING_PORT=$O_HTTP \
        OME_LLHLS_STREAM_TLS_PORT=$O_HTTPS OME_WEBRTC_SIGNALLING_TLS_PORT=$O_HTTPS \
        OME_WEBRTC_CANDIDATE_PORT="$O_ICE-$((O_ICE + 4))/udp" OME_WEBRTC_TCP_RELAY_PORT=$O_RELAY \
        OME_ORIGIN_PORT=$O_ORIGIN OME_MPEGTS_PROV_PORT="$O_TS-$((O_TS + 4))/udp" "$@"
}
O_PID=
o_start() { # kiln|ome: the server on OME's config, until its API answers
    local d=$WORK/peer-$1 f try
    # Three tries: OME, started the moment the last server let go of the
    # same ports, has ended at once (its log: uninitializing its socket
    # pools); the log's failure lines are printed.
    for try in 1 2 3; do
        rm -rf "$d"; mkdir -p "$d/conf" "$d/logs" "$d/media" "$d/dvr"
        for f in Server.xml Logger.xml; do sed "s|@RUN@|$d|g" "$OME_DIR/conf/$f" >"$d/conf/$f"; done
        if [[ $1 == kiln ]]; then
            (cd "$d" && o_env exec "$KILN" -c "$d/conf/Server.xml" 2>"$d/log") &
        else
            (cd "$d" && o_env exec "$OME_BIN" -c "$d/conf" >"$d/log" 2>&1) &
        fi
        O_PID=$!; PIDS+=("$O_PID")
        for _ in $(seq 300); do
            curl -s -o /dev/null -m 1 -H "Authorization: $OME_AUTH" "http://127.0.0.1:$O_API/v1/vhosts" && return 0
            kill -0 "$O_PID" 2>/dev/null || break
            sleep 0.05
        done
        log "$1 did not answer on $O_API (try $try): $(grep -iE "fail|error|bind|in use" "$d/log" | tail -3)"
        o_stop
        sleep 2
    done
    return 1
}
o_stop() { stop "$O_PID"; O_PID=; }
o_streams() { # how many streams app lists
    curl -s -m 2 -H "Authorization: $OME_AUTH" "http://127.0.0.1:$O_API/v1/vhosts/default/apps/app/streams" |
        python3 -c 'import json,sys
try: print(len(json.load(sys.stdin).get("response") or []))
except Exception: print(0)'
}
O_SRCS=()
o_publish() { # n: n looping RTMP publishers s0..s(n-1), until the server lists them
    local i
    O_SRCS=()
    for i in $(seq 0 $(($1 - 1))); do
        timeout $((WARM + SECS * 3 + 120)) ffmpeg -hide_banner -loglevel fatal -nostdin -re -stream_loop -1 \
            -i "$SRC" -c copy -f flv "rtmp://127.0.0.1:$O_RTMP/app/s$i" 2>/dev/null &
        O_SRCS+=($!); PIDS+=($!)
    done
    for _ in $(seq 200); do
        (($(o_streams) >= $1)) && return 0
        sleep 0.1
    done
    log "only $(o_streams) of $1 streams listed"; return 1
}
o_unpublish() { local p; for p in "${O_SRCS[@]}"; do stop "$p"; done; O_SRCS=(); }
memfd_kb() { # bytes of the memfd files a process holds open, in KiB (kiln's media)
    local t=0 f
    for f in /proc/"$1"/fd/*; do
        [[ $(readlink "$f" 2>/dev/null) == /memfd:* ]] && t=$((t + $(stat -L -c %s "$f" 2>/dev/null || echo 0)))
    done
    echo $((t / 1024))
}
private_kb() { # a process's own memory: anonymous and shared-memory pages (not its code and libraries' file pages, which the page cache shares and can drop), in KiB
    awk '/^(RssAnon|RssShmem):/{t += $2} END {print t + 0}' "/proc/$1/status" 2>/dev/null || echo 0
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { calc "'%.2f' % ($1/max($2,1e-9))"; }
# side seconds: how much the server's RSS grows in that many seconds with
# one stream in and no viewers (KiB), from the same point after start as a
# viewer run's first sample. Its segments and parts fill their window
# whether anyone watches or not; a per-viewer figure takes this off.
o_growth() {
    o_start "$1"
    o_publish 1
    sleep "$3"
    local a b
    a=$(rss_kb "$O_PID")
    sleep "$2"
    b=$(rss_kb "$O_PID")
    o_unpublish; o_stop
    echo $((b > a ? b - a : 0))
}

O_ROWS=""
o_row() { # figure kiln ome ratio
    O_ROWS+="| $1 | $2 | $3 | **$4** |
"
}

# --- idle ---------------------------------------------------------------
if part idle; then
declare -A O_MS O_RSS O_PRIV
for side in kiln ome; do O_MS[$side]=""; O_RSS[$side]=""; O_PRIV[$side]=""; done
for rep in $(seq "$OME_REPEAT"); do
    for side in kiln ome; do
        t0=$(date +%s%N)
        o_start "$side"
        ms=$(( ($(date +%s%N) - t0) / 1000000 ))
        sleep 2
        O_MS[$side]+=" $ms"; O_RSS[$side]+=" $(rss_kb "$O_PID")"; O_PRIV[$side]+=" $(private_kb "$O_PID")"
        o_stop
    done
done
k_ms=$(median ${O_MS[kiln]}); m_ms=$(median ${O_MS[ome]})
k_rss=$(median ${O_RSS[kiln]}); m_rss=$(median ${O_RSS[ome]})
log "ome idle: start ms kiln ${O_MS[kiln]} / OME ${O_MS[ome]}; RSS KiB kiln ${O_RSS[kiln]} / OME ${O_RSS[ome]}"
o_row "start-up to the API's first answer, ms" "$k_ms" "$m_ms" "$(ratio "$k_ms" "$m_ms")"
o_row "idle RSS, MiB" "$(fmt "$(calc "$k_rss/1024")" 1)" "$(fmt "$(calc "$m_rss/1024")" 1)" "$(ratio "$k_rss" "$m_rss")"
k_priv=$(median ${O_PRIV[kiln]}); m_priv=$(median ${O_PRIV[ome]})
o_row "idle private memory (RSS less file pages), MiB" "$(fmt "$(calc "$k_priv/1024")" 1)" "$(fmt "$(calc "$m_priv/1024")" 1)" "$(ratio "$k_priv" "$m_priv")"
RATIOS+=("idle RSS: kiln $(ratio "$k_rss" "$m_rss")x OME")
fi

# --- ingest -------------------------------------------------------------
part ingest &&
for n in 1 10; do
    declare -A C M V
    C[kiln]=""; C[ome]=""; M[kiln]=""; M[ome]=""; V[kiln]=""; V[ome]=""
    for rep in $(seq "$OME_REPEAT"); do
        for side in kiln ome; do
            o_start "$side"
            o_publish "$n"
            sleep "$WARM"
            c0=$(cpu_ticks "$O_PID"); sleep "$SECS"; c1=$(cpu_ticks "$O_PID")
            mem=$(rss_kb "$O_PID"); own=$(private_kb "$O_PID")
            if [[ $side == kiln ]]; then
                # Its memfd files whole, in place of the part of them it
                # has mapped (shared-memory pages).
                media=$(memfd_kb "$O_PID"); mem=$((mem + media))
                own=$((own - $(awk '/^RssShmem:/{print $2}' "/proc/$O_PID/status") + media))
            fi
            C[$side]+=" $(calc "($c1-$c0)/$TCK")"; M[$side]+=" $mem"; V[$side]+=" $own"
            o_unpublish; o_stop
        done
    done
    kc=$(median ${C[kiln]}); mc=$(median ${C[ome]}); km=$(median ${M[kiln]}); mm=$(median ${M[ome]})
    log "ome ingest n=$n: CPU s kiln ${C[kiln]} / OME ${C[ome]}; memory KiB kiln ${M[kiln]} / OME ${M[ome]}"
    o_row "$n RTMP stream(s) in, no viewers: CPU s over ${SECS} s" "$(fmt "$kc")" "$(fmt "$mc")" "$(ratio "$kc" "$mc")"
    o_row "$n RTMP stream(s) in: memory MiB (kiln: RSS + memfd media)" "$(fmt "$(calc "$km/1024")" 1)" "$(fmt "$(calc "$mm/1024")" 1)" "$(ratio "$km" "$mm")"
    kv=$(median ${V[kiln]}); mv=$(median ${V[ome]})
    o_row "$n RTMP stream(s) in: private memory MiB (kiln: + memfd media)" "$(fmt "$(calc "$kv/1024")" 1)" "$(fmt "$(calc "$mv/1024")" 1)" "$(ratio "$kv" "$mv")"
    RATIOS+=("$n RTMP in: kiln CPU $(ratio "$kc" "$mc")x, memory $(ratio "$km" "$mm")x OME")
done

# --- LL-HLS viewers ---------------------------------------------------------
VSECS=$((SECS * 2))
O_LL_DETAIL=""
part llhls &&
for n in $OME_LLHLS_NS; do
    declare -A C M P
    C[kiln]=""; C[ome]=""; M[kiln]=""; M[ome]=""
    for rep in $(seq "$OME_REPEAT"); do
        for side in kiln ome; do
            o_start "$side"
            o_publish 1
            sleep 8 # a first whole segment (6 s)
            m0=$(rss_kb "$O_PID")
            c0=$(cpu_ticks "$O_PID")
            "$O_VIEWERS" --url "http://127.0.0.1:$O_HTTP/app/s0" --viewers "$n" --seconds "$VSECS" --spread 10 \
                >"$WORK/ome-ll.txt" 2>>"$WORK/ome-ll.err" &
            v=$!; PIDS+=("$v")
            sleep $((VSECS / 2)); m1=$(rss_kb "$O_PID")
            wait "$v" || log "LL-HLS viewers against $side failed: $(tail -2 "$WORK/ome-ll.err")"
            c1=$(cpu_ticks "$O_PID")
            P[$side]=$(cat "$WORK/ome-ll.txt")
            o_unpublish; o_stop
            g0=$(o_growth "$side" $((VSECS / 2)) 8)
            C[$side]+=" $(calc "($c1-$c0)/$TCK")"; M[$side]+=" $(calc "max($m1-$m0-$g0,0)/$n")"
            log "ome LL-HLS n=$n $side run $rep: $(calc "($c1-$c0)/$TCK") CPU s, RSS +$((m1 - m0)) KiB (+$g0 without viewers); ${P[$side]}"
        done
    done
    kc=$(median ${C[kiln]}); mc=$(median ${C[ome]}); km=$(median ${M[kiln]}); mm=$(median ${M[ome]})
    o_row "LL-HLS, $n viewers: CPU s over ${VSECS} s" "$(fmt "$kc")" "$(fmt "$mc")" "$(ratio "$kc" "$mc")"
    o_row "LL-HLS, $n viewers: RSS KiB per viewer" "$(fmt "$km" 1)" "$(fmt "$mm" 1)" "$(ratio "$km" "$mm")"
    RATIOS+=("LL-HLS $n viewers: kiln CPU $(ratio "$kc" "$mc")x, memory per viewer $(ratio "$km" "$mm")x OME")
    O_LL_DETAIL+="| $n | kiln | ${P[kiln]} |
| $n | OME | ${P[ome]} |
"
done

# --- WebRTC viewers, OME's signalling for both ------------------------------
field() { awk -v k="$1" '{for (i = 1; i < NF; i++) if ($i == k) print $(i+1)}' <<<"$2"; }
O_RTC_DETAIL=""
part webrtc &&
for n in $OME_WEBRTC_NS; do
    declare -A C M L D Q
    C[kiln]=""; C[ome]=""; M[kiln]=""; M[ome]=""; Q[kiln]=""; Q[ome]=""
    for rep in $(seq "$OME_REPEAT"); do
        for side in kiln ome; do
            o_start "$side"
            o_publish 1
            sleep 3
            m0=$(rss_kb "$O_PID"); t0=$SECONDS
            "$O_GEN" --ome "ws://127.0.0.1:$O_HTTP/app/s0" --viewers "$n" --seconds "$SECS" --warm "$WARM" --spread 10 \
                >"$WORK/ome-rtc.txt" 2>>"$WORK/ome-rtc.err" &
            g=$!; PIDS+=("$g")
            # The window starts once every viewer is set up: the generator
            # prints nothing until its end, so wait for its warm-up by time.
            for _ in $(seq 600); do
                (($(ss -tnH state established "( dport = :$O_HTTP )" 2>/dev/null | wc -l) >= n)) && break
                sleep 0.1
            done
            sleep "$WARM"
            c0=$(cpu_ticks "$O_PID"); sleep "$SECS"; c1=$(cpu_ticks "$O_PID")
            m1=$(rss_kb "$O_PID"); t1=$SECONDS
            drops=n/a
            [[ $side == kiln ]] && drops=$(curl -s -m 2 -H "Authorization: $OME_AUTH" "http://127.0.0.1:$O_API/v1/webrtc" |
                python3 -c 'import json,sys; print(json.load(sys.stdin)["response"].get("droppedDatagrams","?"))' 2>/dev/null || echo "?")
            wait "$g" || true
            line=$(cat "$WORK/ome-rtc.txt")
            o_unpublish; o_stop
            g0=$(o_growth "$side" $((t1 - t0)) 3)
            C[$side]+=" $(calc "($c1-$c0)/$TCK")"; M[$side]+=" $(calc "max($m1-$m0-$g0,0)/$n")"
            # CPU per GB the viewers got (they count over the same
            # seconds): a server that cannot keep up is not credited for
            # what it failed to send.
            got=$(field bytes "$line")
            Q[$side]+=" $(calc "($c1-$c0)/$TCK/max(${got:-0}/1e9,1e-9)")"
            L[$side]="$line"; D[$side]=$drops
            log "ome WebRTC n=$n $side run $rep: $(calc "($c1-$c0)/$TCK") CPU s, RSS +$((m1 - m0)) KiB (+$g0 in $((t1 - t0)) s without viewers), dropped $drops; $line"
        done
    done
    kc=$(median ${C[kiln]}); mc=$(median ${C[ome]}); km=$(median ${M[kiln]}); mm=$(median ${M[ome]})
    o_row "WebRTC, $n viewers: CPU s over ${SECS} s (target ≤ 0.2x at 200 and 500)" "$(fmt "$kc")" "$(fmt "$mc")" "$(ratio "$kc" "$mc")"
    o_row "WebRTC, $n viewers: RSS KiB per viewer (target ≤ 0.25x)" "$(fmt "$km" 0)" "$(fmt "$mm" 0)" "$(ratio "$km" "$mm")"
    kq=$(median ${Q[kiln]}); mq=$(median ${Q[ome]})
    o_row "WebRTC, $n viewers: CPU s per GB the viewers got" "$(fmt "$kq")" "$(fmt "$mq")" "$(ratio "$kq" "$mq")"
    RATIOS+=("WebRTC $n viewers: kiln CPU $(ratio "$kc" "$mc")x ($(ratio "$kq" "$mq")x per byte delivered), memory per viewer $(ratio "$km" "$mm")x OME")
    for side in kiln ome; do
        l=${L[$side]}
        O_RTC_DETAIL+="| $n | $side | $(field viewers "$l") / $n | $(field packets_min "$l") / $(field packets_max "$l") | $(field frames_min "$l") | ${D[$side]} |
"
    done
done

# --- WebRTC added latency -------------------------------------------------------
O_LAT_ROWS=""
part latency &&
for n in $OME_LAT_NS; do
    for side in kiln ome; do
        best=""
        for rep in $(seq "$OME_REPEAT"); do
            o_start "$side"
            "$O_PROBE" --file "$SRC" --publish "rtmp://127.0.0.1:$O_RTMP/app/lat" \
                --ome "ws://127.0.0.1:$O_HTTP/app/lat" --seconds $((2 + WARM + SECS)) --warm $((2 + WARM)) \
                >"$WORK/ome-probe.txt" 2>>"$WORK/ome-probe.err" &
            p=$!; PIDS+=("$p")
            g=
            if ((n > 1)); then
                sleep 2
                "$O_GEN" --ome "ws://127.0.0.1:$O_HTTP/app/lat" --viewers $((n - 1)) --seconds "$SECS" --warm "$WARM" --spread 10 \
                    >/dev/null 2>>"$WORK/ome-rtc.err" &
                g=$!; PIDS+=("$g")
            fi
            wait "$p" || true
            [[ -z $g ]] || wait "$g" || true
            r=$(awk '/^latency_us/{print $2, $3, $4, $5, $6, $7}' "$WORK/ome-probe.txt")
            log "ome WebRTC latency n=$n $side run $rep (p50 p90 p99 max µs, matched, sent): $r"
            o_stop
            [[ -n $r ]] && best=$(lower_p99 "$r" "$best")
        done
        read -r p50 p90 p99 pmax m s <<<"${best:-0 0 0 0 0 0}"
        O_LAT_ROWS+="| $n | $side | $(us_ms "$p50") | $(us_ms "$p90") | $(us_ms "$p99") | $(us_ms "$pmax") | $m / $s |
"
    done
done

# --- glass to glass, Chromium ----------------------------------------------------
O_GLASS_ROWS=""
if part glass; then
    if command -v chromium >/dev/null && command -v node >/dev/null && [[ -e $ROOT/tests/web/node_modules/puppeteer-core ]]; then
        declare -A GW GH
        for side in kiln ome; do GW[$side]=""; GH[$side]=""; done
        for rep in $(seq "$OME_REPEAT"); do
            for side in kiln ome; do
                o_start "$side"
                g=$(CHROMIUM=$(command -v chromium) timeout 150 node "$ROOT/tests/web/glass_to_glass.mjs" \
                    "http://127.0.0.1:$O_HTTP/app/glass$rep" $((SECS + 15)) 10 \
                    "$ROOT/tests/web/node_modules/hls.js/dist/hls.min.js" ome 2>>"$WORK/ome-glass.err" | tail -1)
                o_stop
                log "ome glass to glass $side run $rep: $g"
                read -r wn w50 w90 w99 hn h50 h90 h99 <<<"$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); w,h=d["webrtc"],d["llhls"]; print(w["n"],w["p50"],w["p90"],w["p99"],h["n"],h["p50"],h["p90"],h["p99"])' "$g" 2>/dev/null || echo "0 - - - 0 - - -")"
                ((wn > 0)) && GW[$side]+=" $w50"
                ((hn > 0)) && GH[$side]+=" $h50"
                O_GLASS_ROWS+="| $rep | $side | $w50 / $w90 / $w99 ($wn) | $h50 / $h90 / $h99 ($hn) |
"
            done
        done
        kw=$(median ${GW[kiln]:-0}); mw=$(median ${GW[ome]:-0}); kh=$(median ${GH[kiln]:-0}); mh=$(median ${GH[ome]:-0})
        o_row "glass to glass over WebRTC (OME signalling), p50 ms" "$kw" "$mw" "$(ratio "$kw" "$mw")"
        o_row "glass to glass over LL-HLS (hls.js), p50 ms" "$kh" "$mh" "$(ratio "$kh" "$mh")"
        RATIOS+=("glass to glass p50: WebRTC kiln ${kw} ms / OME ${mw} ms; LL-HLS kiln ${kh} ms / OME ${mh} ms")
    else
        log "ome glass to glass: skipped (needs chromium, node and npm ci --prefix tests/web)"
    fi
fi

add "### Against OME (OvenMediaEngine $OME_VERSION, the server kiln imitates)

Both servers run the same file, OME's own \`conf/Server.xml\` from
\`../shared/tools/ome\` (upstream's \`Origin.xml\`: video bypassed, AAC
kept for LL-HLS and encoded to Opus for WebRTC; ports from the environment
it reads), one at a time, alternated ${OME_REPEAT} times, medians. Source:
the 1280x720 30 fps 2.5 Mb/s H.264 + AAC file looped in real time over RTMP
(ffmpeg \`-c copy\`). CPU = utime+stime of the server (all threads) over the
window after ${WARM} s; kiln's memory counts its memfd media (parts and
segments kept outside its heap). OME encodes every stream's AAC to Opus from
the start; kiln only while a WebRTC viewer plays it. Viewers: \`cargo bench
--bench llhls_viewers\` (blocking reloads, as a low-latency player) and
\`cargo bench --bench webrtc_viewers -- --ome\` (str0m peers over OME's
WebSocket signalling, the one OvenPlayer speaks, against both; from ten
loopback addresses, as kiln counts sessions per client address); memory per
viewer is how much more RSS grew with the viewers than it grows over the
same seconds with none (a second run each time: both servers' segments and
parts fill their windows whether anyone watches or not), per viewer.

| figure | kiln | OME | kiln / OME |
|---|---|---|---|
$O_ROWS
LL-HLS viewers, the last run's generator line (viewers, requests, parts,
bytes, viewers that missed a part, first-byte spread µs, errors):

| N | server | generator |
|---|---|---|
$O_LL_DETAIL
WebRTC viewers, the last run: viewers connected, RTP packets per viewer
(fewest / most: the worst viewer against the best), the fewest video frames
a viewer assembled, datagrams kiln dropped (\`GET /v1/webrtc\`; OME does not
say):

| N | server | connected | packets min / max | fewest frames | dropped |
|---|---|---|---|---|---|
$O_RTC_DETAIL
WebRTC added latency (\`cargo bench --bench latency -- --ome\`): the probe
publishes the source (video and AAC: OME holds a video-only RTMP stream
back until it has 250 video messages) over RTMP at its own pace and is one
viewer over OME's signalling; the other N-1 are the generator's. Per video frame,
from just before it is written to the RTMP socket to the datagram that
completes it at the viewer; the first $((2 + WARM)) s not counted; the run
with the lower p99 of ${OME_REPEAT}:

| N | server | p50 ms | p90 ms | p99 ms | max ms | frames matched / sent |
|---|---|---|---|---|---|---|
$O_LAT_ROWS
Glass to glass (\`tests/web/glass_to_glass.mjs ... ome\`): headless Chromium
paints its clock on a canvas, publishes it over WHIP (H.264, 30 fps) and
plays it back in the same page over OME's WebSocket signalling (UDP host
candidates) and over LL-HLS (hls.js 1.5.20, \`lowLatencyMode\`) at once; the
delay of each frame shown is the clock then less the clock painted, so it
holds encoding, the server, decoding and the player's buffer. Both servers
on OME's config (LL-HLS parts of 0.5 s, segments of 6 s). $((SECS + 15)) s a
run, the first 10 s not counted; p50 / p90 / p99 ms (frames read):

| run | server | WebRTC | LL-HLS |
|---|---|---|---|
$O_GLASS_ROWS"
