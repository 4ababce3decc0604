# Renditions from the encoder against separate streams (issue 43). Sourced
# by benches/compare.sh (BENCH_ONLY=abr): it uses that script's helpers
# (free_ports, wait_tcp, stop, cpu_ticks, calc, fmt, add, log, PIDS, TOKEN,
# KILN, TARGET, WORK, SECS, WARM).
#
# One ladder, served two ways, kiln's CPU over the window compared:
#
#   - ladder: FFmpeg 9 publishes one RTMP stream carrying three renditions
#     (enhanced RTMP multitrack: 1280x720, 640x360, 320x180 H.264 and one
#     AAC track); per rendition, BENCH_ABR_LLHLS_N LL-HLS viewers
#     (llhls_viewers --variant i) and BENCH_ABR_WEBRTC_N WHEP viewers
#     (webrtc_viewers, `rendition=` pinning each group to its rendition);
#   - separate: the same three renditions as three RTMP streams (each one
#     video track and the AAC track, copied out of the same file), the
#     same viewers each on its stream.
#
# The issue's target: the ladder costs no more than the separate streams
# (ratio <= 1.1). Alternated BENCH_ABR_REPEAT times (3), medians.

ABR_REPEAT=${BENCH_ABR_REPEAT:-3}
ABR_LLHLS_N=${BENCH_ABR_LLHLS_N:-100}
ABR_WEBRTC_N=${BENCH_ABR_WEBRTC_N:-20}
FF9=$(/usr/bin/python3 -c 'import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())' 2>/dev/null || true)
if [[ -z $FF9 ]]; then
    log "abr: FFmpeg 9 is not here (pip install imageio-ffmpeg==0.8.1): skipped"
else
    log "building the clients (cargo bench --bench webrtc_viewers --bench llhls_viewers)"
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo bench --quiet --bench webrtc_viewers \
        --bench llhls_viewers --no-run 2>"$WORK/abr-build.err") || { cat "$WORK/abr-build.err" >&2; exit 1; }
    A_GEN=$(ls -t "$TARGET"/release/deps/webrtc_viewers-* | grep -v '\.d$' | head -1)
    A_VIEWERS=$(ls -t "$TARGET"/release/deps/llhls_viewers-* | grep -v '\.d$' | head -1)
    LADDER=$TARGET/bench-abr-ladder.flv
    if [[ ! -s $LADDER ]]; then
        log "encoding the 30 s ladder once (FFmpeg 9, three renditions and AAC in one FLV)"
        "$FF9" -hide_banner -loglevel error -nostdin -y -f lavfi -i testsrc2=size=1280x720:rate=30 \
            -f lavfi -i sine=frequency=1000:sample_rate=48000 \
            -filter_complex '[0:v]split=3[a][b][c];[b]scale=640:360[b2];[c]scale=320:180[c2]' \
            -map '[a]' -map '[b2]' -map '[c2]' -map 1:a -t 30 \
            -c:v libx264 -preset veryfast -g 60 -sc_threshold 0 -c:a aac -b:a 128k "$LADDER"
    fi
    read -r A_SIG A_RTMP A_ICE <<<"$(free_ports 3)"
    abr_kiln() {
        local d=$WORK/kiln-abr
        rm -rf "$d"; mkdir -p "$d"
        cat >"$d/server.xml" <<EOF
<?xml version="1.0"?>
<Server version="8"><Name>kiln</Name><IP>127.0.0.1</IP><StateFile>$d/state.json</StateFile>
  <Bind><Managers><API><Port>$API_P</Port></API></Managers>
    <Providers><RTMP><Port>$A_RTMP</Port></RTMP></Providers>
    <Publishers><LLHLS><Port>$A_SIG</Port></LLHLS><WebRTC><Signalling><Port>$A_SIG</Port></Signalling>
      <IceCandidates><IceCandidate>127.0.0.1:$A_ICE/udp</IceCandidate></IceCandidates></WebRTC></Publishers></Bind>
  <Managers><Host><Names><Name>*</Name></Names></Host><API><AccessToken>$TOKEN</AccessToken></API></Managers>
  <VirtualHosts><VirtualHost><Name>default</Name><Host><Names><Name>*</Name></Names></Host>
    <Applications><Application><Name>app</Name><Type>live</Type>
      <OutputProfiles><OutputProfile><Name>bypass</Name><Encodes><Video><Name>v</Name><Bypass>true</Bypass></Video><Audio><Name>a</Name><Bypass>true</Bypass></Audio></Encodes></OutputProfile></OutputProfiles>
      <Providers><RTMP/></Providers>
      <Publishers><LLHLS><ChunkDuration>0.5</ChunkDuration><SegmentDuration>2</SegmentDuration></LLHLS><WebRTC/></Publishers>
    </Application></Applications></VirtualHost></VirtualHosts></Server>
EOF
        "$KILN" -c "$d/server.xml" 2>"$d/log" &
        KILN_PID=$!; PIDS+=("$KILN_PID")
        wait_tcp "$API_P" 200
    }
    abr_publish() { # stream maps...: FFmpeg 9 loops the ladder file in
        local name=$1; shift
        timeout $((WARM + SECS + 120)) "$FF9" -hide_banner -loglevel error -nostdin -re -stream_loop -1 \
            -i "$LADDER" "$@" -c copy -f flv "rtmp://127.0.0.1:$A_RTMP/app/$name" &
        PIDS+=("$!")
    }
    abr_wait() { # stream video-tracks
        local i
        for i in $(seq 1 300); do
            [[ $(api GET "/v1/vhosts/default/apps/app/streams/$1" 2>/dev/null | grep -o '"type":"Video"' | wc -l) -ge $2 ]] && return 0
            sleep 0.1
        done
        log "abr: stream $1 never showed $2 video tracks"; return 1
    }
    abr_round() { # ladder|separate -> "cpu_s llhls_missing webrtc_packets_min"
        local kind=$1 i pids=() outs=()
        abr_kiln
        if [[ $kind == ladder ]]; then
            abr_publish ladder -map 0
            abr_wait ladder 3 || return 1
        else
            for i in 0 1 2; do abr_publish "s$i" -map "0:v:$i" -map 0:a:0; done
            for i in 0 1 2; do abr_wait "s$i" 1 || return 1; done
        fi
        sleep 4 # two segments of each, so the variants are listed with their rates
        local names=(720p 360p 180p)
        for i in 0 1 2; do
            local base whep
            if [[ $kind == ladder ]]; then
                base="http://127.0.0.1:$A_SIG/app/ladder"
                whep="$base?direction=whep&rendition=${names[$i]}"
                "$A_VIEWERS" --url "$base" --variant "$i" --viewers "$ABR_LLHLS_N" --seconds $((WARM + SECS)) \
                    --spread 10 >"$WORK/abr-llhls-$i" 2>&1 &
            else
                base="http://127.0.0.1:$A_SIG/app/s$i"
                whep="$base?direction=whep"
                "$A_VIEWERS" --url "$base" --viewers "$ABR_LLHLS_N" --seconds $((WARM + SECS)) \
                    --spread 10 >"$WORK/abr-llhls-$i" 2>&1 &
            fi
            pids+=("$!")
            "$A_GEN" --whep "$whep" --viewers "$ABR_WEBRTC_N" --seconds "$SECS" --warm "$WARM" \
                >"$WORK/abr-webrtc-$i" 2>&1 &
            pids+=("$!")
        done
        sleep "$WARM"
        local c0 c1
        c0=$(cpu_ticks "$KILN_PID"); sleep "$SECS"; c1=$(cpu_ticks "$KILN_PID")
        for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
        stop_kiln
        local missing=0 pmin=999999999 n
        for i in 0 1 2; do
            n=$(grep -o 'missing [0-9]*' "$WORK/abr-llhls-$i" | awk '{print $2}' | tail -1)
            missing=$((missing + ${n:-999}))
            n=$(grep -o 'packets_min [0-9]*' "$WORK/abr-webrtc-$i" | awk '{print $2}' | tail -1)
            ((${n:-0} < pmin)) && pmin=${n:-0}
        done
        echo "$(calc "($c1 - $c0) / $(getconf CLK_TCK)") $missing $pmin"
    }
    med() { python3 -c "import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
    ladder_cpu=(); separate_cpu=(); abr_rows=""
    for rep in $(seq 1 "$ABR_REPEAT"); do
        for kind in ladder separate; do
            r=$(abr_round "$kind") || { log "abr: round failed"; continue; }
            log "abr $kind run $rep: cpu_s missing packets_min = $r"
            read -r cpu missing pmin <<<"$r"
            [[ $kind == ladder ]] && ladder_cpu+=("$cpu") || separate_cpu+=("$cpu")
            abr_rows+="| $rep | $kind | $(fmt "$cpu") | $missing | $pmin |
"
        done
    done
    if ((${#ladder_cpu[@]} && ${#separate_cpu[@]})); then
        lm=$(med "${ladder_cpu[@]}"); sm=$(med "${separate_cpu[@]}")
        add "### Renditions from the encoder: one ladder against three streams (issue 43)

FFmpeg 9 loops one 30 s file of three renditions (1280x720, 640x360,
320x180 x264 \`veryfast\`, keyframe every 2 s, one AAC track) with
\`-c copy\`: as one enhanced RTMP multitrack stream (ladder), or as three
RTMP streams of one rendition each (separate). Per rendition
$ABR_LLHLS_N LL-HLS viewers (\`llhls_viewers --variant\`) and
$ABR_WEBRTC_N WHEP viewers (\`webrtc_viewers\`, pinned with
\`rendition=\` on the ladder). CPU = utime+stime of kiln over ${SECS} s
after ${WARM} s; medians of $ABR_REPEAT alternated runs. Target: ladder /
separate <= 1.1.

| figure | ladder | separate | ladder / separate |
|---|---|---|---|
| kiln CPU s over ${SECS} s | $(fmt "$lm") | $(fmt "$sm") | **$(fmt "$(calc "$lm / $sm")")** |

| run | kind | CPU s | LL-HLS viewers that missed a part (all renditions) | RTP packets to the worst WebRTC viewer |
|---|---|---|---|---|
$abr_rows"
    fi
fi
