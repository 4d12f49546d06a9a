#!/usr/bin/env bash
# One call on a GPU host: check the golden cases, run the randomized differential test (random
# shapes, the benchmark's shapes, every kernel path; then the smallest shapes and k, few rows, and
# nine shapes of the benchmark at up to 8 192 rows each) and small ones under compute-sanitizer,
# then time the kernel (with --variants: each alternative path too) and optionally count
# instructions with Nsight Compute. Correctness first, so that a call cut short still says whether
# it passed. The checks are what a kernel change needs before it lands (scripts/device_verify.sh
# runs them on several builds).
# Uses binaries carried in $BIN (default carry/cuda-bin) when they run there, else builds. Logs go
# to $OUT (default ./device-out).
#   kernels/cuda/scripts/device_check.sh [diff-problems] [sanitize:0|1] [bench:0|1|variants]
#                                        [ncu-configs, e.g. "1 3 8"] [phases:0|1]
set -u
OUT=${OUT:-./device-out}
mkdir -p "$OUT"
PROBLEMS=${1:-2000}
SANITIZE=${2:-1}
BENCH=${3:-1}
NCU_CONFIGS=${4:-}
PHASES=${5:-0}
BIN=${BIN:-carry/cuda-bin}
SHAPES="256x256/64/bf16 200x100/64/bf16 32x32x32x32/64/bf16 1024x1024/64/bf16 16x16x16x16/32/f32
8x8x8x8/16/f32 1024x1024/128/bf16 64x64x64/64/bf16 256x256/128/bf16"
START=$(date +%s)
stamp() { echo "[$(( $(date +%s) - START ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt" 2>&1
if ! "$BIN/pk-cuda-diff" --problems 0 --big-rows 0 > /dev/null 2>&1; then
  echo "carried binaries unusable here; building" | tee "$OUT/build.log"
  BIN=/tmp/pk-build/cuda
  { cmake -S kernels -B /tmp/pk-build -G Ninja && cmake --build /tmp/pk-build -j 16; } >> "$OUT/build.log" 2>&1 \
    || { tail -40 "$OUT/build.log"; exit 1; }
  GOLDEN=/tmp/pk-build/pk-golden
else
  GOLDEN=$BIN/pk-golden
fi
stamp "golden"; timeout 60 "$GOLDEN" tests/data/golden_cases.bin --backend cuda > "$OUT/golden.log" 2>&1; echo "rc=$?" >> "$OUT/golden.log"
grep -v '^FAIL' "$OUT/golden.log" | tail -2; grep '^FAIL' "$OUT/golden.log" | head -5
stamp "diff (quick)"; timeout 90 "$BIN/pk-cuda-diff" --problems 200 --max-rows 64 --max-bytes 1048576 --big-rows 0 --bench-rows 64 --seed 7 > "$OUT/diff_quick.log" 2>&1; echo "rc=$?" >> "$OUT/diff_quick.log"
tail -3 "$OUT/diff_quick.log"; grep '^DIFF' "$OUT/diff_quick.log" | head -3
if [ "$PROBLEMS" != 0 ]; then
  stamp "diff (full)"; timeout 240 "$BIN/pk-cuda-diff" --problems "$PROBLEMS" --max-rows 4096 --max-bytes 8388608 --big-rows 2097152 --bench-rows 4096 --seed 11 > "$OUT/diff_full.log" 2>&1; echo "rc=$?" >> "$OUT/diff_full.log"
  tail -3 "$OUT/diff_full.log"; grep '^DIFF' "$OUT/diff_full.log" | head -3
  # The smallest shapes and k, whose shared-memory layouts are the tightest, in both launch modes.
  stamp "diff (small shapes)"; timeout 90 "$BIN/pk-cuda-diff" --problems 400 --max-rows 4096 --max-bytes 8388608 --big-rows 0 --max-width 32 --max-k 32 --seed 13 > "$OUT/diff_small.log" 2>&1; echo "rc=$?" >> "$OUT/diff_small.log"
  tail -3 "$OUT/diff_small.log"; grep '^DIFF' "$OUT/diff_small.log" | head -3
  # Few rows: the latency kernel's launches.
  stamp "diff (few rows)"; timeout 90 "$BIN/pk-cuda-diff" --problems 1500 --max-rows 200 --max-bytes 8388608 --big-rows 0 --seed 17 > "$OUT/diff_few_rows.log" 2>&1; echo "rc=$?" >> "$OUT/diff_few_rows.log"
  tail -2 "$OUT/diff_few_rows.log"; grep '^DIFF' "$OUT/diff_few_rows.log" | head -3
  # The benchmark's shapes, each on its own, with its paths forced at random.
  stamp "diff (shapes)"
  seed=20
  for shape in $SHAPES; do
    seed=$((seed + 1))
    log=$OUT/diff_shape_${shape//\//_}.log
    timeout 60 "$BIN/pk-cuda-diff" --shape "$shape" --problems 6 --max-rows 8192 --max-bytes 67108864 --big-rows 0 --seed "$seed" > "$log" 2>&1; echo "rc=$?" >> "$log"
    echo "$shape: $(tail -2 "$log" | tr '\n' ' ')"; grep '^DIFF' "$log" | head -3
  done
fi
if [ "$SANITIZE" = 1 ] && command -v compute-sanitizer > /dev/null; then
  stamp "memcheck"; timeout 100 compute-sanitizer --tool memcheck --print-limit 5 "$BIN/pk-cuda-diff" --problems 25 --max-rows 4 --max-bytes 65536 --big-rows 0 --bench-rows 2 --seed 3 > "$OUT/memcheck.log" 2>&1; echo "rc=$?" >> "$OUT/memcheck.log"
  timeout 60 compute-sanitizer --tool memcheck --print-limit 5 "$BIN/pk-cuda-diff" --problems 25 --max-rows 600 --max-bytes 65536 --big-rows 0 --max-width 32 --max-k 32 --seed 4 >> "$OUT/memcheck.log" 2>&1; echo "rc=$?" >> "$OUT/memcheck.log"
  for shape in 32x32x32x32/64/bf16 16x16x16x16/32/f32 256x256/64/bf16 1024x1024/128/bf16 256x256/128/bf16; do
    timeout 60 compute-sanitizer --tool memcheck --print-limit 5 "$BIN/pk-cuda-diff" --shape "$shape" --problems 3 --max-rows 1500 --max-bytes 8388608 --big-rows 0 --seed 5 >> "$OUT/memcheck.log" 2>&1; echo "rc=$?" >> "$OUT/memcheck.log"
  done
  grep -E 'ERROR SUMMARY|passed|^rc=' "$OUT/memcheck.log"
fi
if [ "$BENCH" != 0 ]; then
  stamp "bench"
  if [ "$BENCH" = variants ]; then VARIANTS=--variants; else VARIANTS=; fi
  timeout 240 "$BIN/pk-bench-cuda" $VARIANTS > "$OUT/bench.log" 2>&1; echo "rc=$?" >> "$OUT/bench.log"
  grep -v '^{' "$OUT/bench.log"
fi
if [ "$PHASES" = 1 ] && [ -x "$BIN/pk-bench-cuda-phases" ]; then
  stamp "phases (profiling build)"; timeout 120 "$BIN/pk-bench-cuda-phases" --quick > "$OUT/phases.log" 2>&1; echo "rc=$?" >> "$OUT/phases.log"
  grep -v '^{' "$OUT/phases.log" | grep -E 'phases|rows, warp|^[0-9a-z]+x' | cut -c1-220
fi
if [ -n "$NCU_CONFIGS" ] && command -v ncu > /dev/null; then
  stamp "ncu instruction counts"
  for i in $NCU_CONFIGS; do
    timeout 60 ncu --clock-control none --kernel-name regex:TopKKernel --launch-skip 4 --launch-count 1 \
      --metrics smsp__inst_executed.sum,gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active \
      --csv "$BIN/pk-bench-cuda" --quick --repeats 3 --only "$i" > "$OUT/ncu_$i.csv" 2>&1
    grep -E '^"[0-9]' "$OUT/ncu_$i.csv" | awk -F'","' -v c="$i" '{print "config " c ": " $(NF-2) " = " $NF}'
  done
  cat "$OUT"/ncu_*.csv > "$OUT/ncu.csv"; rm -f "$OUT"/ncu_*.csv
fi
stamp "done"
exit 0
