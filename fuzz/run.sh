#!/bin/sh
# Builds every fuzz target and runs each for SECONDS (default 60), one at a
# time, seeded from corpus-seed/<target>/. Inputs under regressions/<target>/
# (crashes found before) are replayed first. Prints the executions per
# target and exits non-zero if any target crashed (artifacts/<target>/).
#
#   fuzz/run.sh 120            every target, 120 s each
#   fuzz/run.sh 60 api ts_mux  only these targets
#
# Needs cargo-fuzz; installs it with `cargo install` when it is missing. On a stable toolchain the
# nightly-only flags cargo-fuzz passes are allowed by RUSTC_BOOTSTRAP=1;
# `-s none` builds without AddressSanitizer (Rust code here is safe; the
# fuzzer still catches panics, overflows (-a: debug assertions on) and
# timeouts). FUZZ_JOBS (default 1) limits the build's parallelism.
set -u
SECONDS_EACH=${1:-60}
[ $# -gt 0 ] && shift
cd "$(dirname "$0")" || exit 2
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
BIN=target/$TRIPLE/release

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz is missing; installing it (cargo install cargo-fuzz --locked)..."
    cargo install cargo-fuzz --locked || exit 2
fi

echo "building fuzz targets..."
CARGO_BUILD_JOBS=${FUZZ_JOBS:-1} RUSTC_BOOTSTRAP=1 cargo fuzz build -s none -O -a || exit 2

if [ $# -gt 0 ]; then TARGETS="$*"; else TARGETS=$(cargo fuzz list); fi

failed=""
total=0
printf '%-16s %12s %10s %s\n' target executions exec/s result > results.txt
for t in $TARGETS; do
    mkdir -p "corpus/$t" "artifacts/$t" "corpus-seed/$t"
    if [ -d "regressions/$t" ] && [ -n "$(ls -A "regressions/$t")" ]; then
        if ! "$BIN/$t" -runs=1 "regressions/$t"/* >"artifacts/$t/regressions.log" 2>&1; then
            echo "$t: a regression input still fails (artifacts/$t/regressions.log)"
            failed="$failed $t(regression)"
        fi
    fi
    log="artifacts/$t/run.log"
    "$BIN/$t" "corpus/$t" "corpus-seed/$t" \
        -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="artifacts/$t/" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    execs=${execs:-0}
    total=$((total + execs))
    if [ $rc -eq 0 ]; then result=ok; else result="CRASH (rc $rc, see $log)"; failed="$failed $t"; fi
    printf '%-16s %12s %10s %s\n' "$t" "$execs" "${rate:-0}" "$result" | tee -a results.txt
done
printf '%-16s %12s\n' total "$total" | tee -a results.txt
if [ -n "$failed" ]; then
    echo "FAILED:$failed"
    exit 1
fi
echo "no crash in any target"
