#!/usr/bin/env bash
# One call on a GPU host: the correctness steps of device_check.sh on each carried build, then the
# benchmark of a base build and of each carried one in turn (base, A, B, base, A, B, ...) so that
# all meet the same card in the same state, and their phase-timing builds.
#   kernels/cuda/scripts/device_ab.sh [diff-problems] [sanitize:0|1] [runs] [phases:0|1]
# Builds: each folder of $SETS (default carry/cuda-bin) holds pk-cuda-diff, pk-golden,
# pk-bench-cuda and pk-bench-cuda-phases; the base is carry/cuda-bin/pk-bench-cuda-base and
# pk-bench-cuda-phases-base. The device returns at most 8 files, so the logs travel as one
# archive, $OUT/logs.tgz; the summary is printed last. Logs are written to $LOGS (default: a new
# temporary folder), so that a caller that stops the script at a time limit can still pack them.
set -u
OUT=${OUT:-./device-out}
mkdir -p "$OUT"
LOGS=${LOGS:-$(mktemp -d)}
mkdir -p "$LOGS"
SETS=${SETS:-carry/cuda-bin}
RUNS=${3:-2}
PHASES=${4:-1}
BASE=carry/cuda-bin
for set in $SETS; do
  name=$(basename "$set")
  mkdir -p "$LOGS/check_$name"
  BIN=$set OUT=$LOGS/check_$name kernels/cuda/scripts/device_check.sh "${1:-2000}" "${2:-1}" 0 \
    > "$LOGS/check_$name.txt" 2>&1
done
bench() {  # name executable
  timeout 150 "$2" > "$LOGS/bench_$1_$run.log" 2>&1; echo "rc=$?" >> "$LOGS/bench_$1_$run.log"
}
for run in $(seq 1 "$RUNS"); do
  bench base "$BASE/pk-bench-cuda-base"
  for set in $SETS; do bench "$(basename "$set")" "$set/pk-bench-cuda"; done
done
if [ "$PHASES" = 1 ]; then
  timeout 120 "$BASE/pk-bench-cuda-phases-base" --quick > "$LOGS/phases_base.log" 2>&1
  for set in $SETS; do
    timeout 120 "$set/pk-bench-cuda-phases" --quick > "$LOGS/phases_$(basename "$set").log" 2>&1
  done
fi
tar -czf "$OUT/logs.tgz" -C "$LOGS" .
for set in $SETS; do echo "== check $(basename "$set")"; cat "$LOGS/check_$(basename "$set").txt"; done
# Summary: throughput (rows/s) and latency (rows, kernel us, round trip us), one line per run.
for f in "$LOGS"/bench_*.log; do
  echo "== $(basename "$f"): $(grep -c '"throughput"' "$f") configs, $(tail -1 "$f")"
  grep -E '^\{"bench":"(throughput|latency|latency_floor)"' "$f" |
    sed -E 's/.*"config":"([^"]*)".*"rows_per_s":([0-9.e+]*).*/\1 \2/;
            s/.*"rows":([0-9]+),"kernel_us":([0-9.]+),"copy_kernel_copy_us":([0-9.]+).*/lat \1 \2 \3/;
            s/.*"latency_floor","kernel_us":([0-9.]+).*/floor \1/' | tr '\n' ';'
  echo
done
for f in "$LOGS"/phases_*.log; do
  [ -f "$f" ] || continue
  echo "== $(basename "$f")"
  grep -E 'rows, warp cycles' "$f" | head -3
done
exit 0
