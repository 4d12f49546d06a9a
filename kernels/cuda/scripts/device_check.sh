#!/usr/bin/env bash
# One call on a GPU host: build (or use binaries carried in carry/cuda-bin), check the golden cases,
# run the randomized differential test, time the kernel, and (optionally) run a small
# differential test under compute-sanitizer. Logs go to $OUT (default ./device-out).
#   kernels/cuda/scripts/device_check.sh [diff-problems] [sanitize:0|1] [bench:0|1] [profile:0|1]
set -u
OUT=${OUT:-./device-out}
mkdir -p "$OUT"
PROBLEMS=${1:-2000}
SANITIZE=${2:-1}
BENCH=${3:-1}
PROFILE=${4:-0}
BIN=carry/cuda-bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt" 2>&1
if ! "$BIN/pk-cuda-diff" --problems 0 --big-rows 0 > /dev/null 2>&1; then
  echo "carried binaries unusable here; building" | tee "$OUT/build.log"
  BIN=/tmp/pk-build/cuda
  { cmake -S kernels -B /tmp/pk-build -G Ninja && cmake --build /tmp/pk-build -j 16; } >> "$OUT/build.log" 2>&1 \
    || { tail -40 "$OUT/build.log"; exit 1; }
  cp /tmp/pk-build/pk-golden "$BIN/" 2>/dev/null || true
  GOLDEN=/tmp/pk-build/pk-golden
else
  GOLDEN=$BIN/pk-golden
fi
echo "== golden"; timeout 60 "$GOLDEN" tests/data/golden_cases.bin --backend cuda > "$OUT/golden.log" 2>&1; echo "rc=$?" >> "$OUT/golden.log"
grep -v '^FAIL' "$OUT/golden.log" | tail -3; grep '^FAIL' "$OUT/golden.log" | head -5
echo "== diff (quick)"; timeout 90 "$BIN/pk-cuda-diff" --problems 200 --max-rows 64 --max-bytes 1048576 --big-rows 0 --seed 7 > "$OUT/diff_quick.log" 2>&1; echo "rc=$?" >> "$OUT/diff_quick.log"
tail -4 "$OUT/diff_quick.log"; grep '^DIFF' "$OUT/diff_quick.log" | head -3
if [ "$BENCH" = 1 ]; then
  echo "== bench"; timeout 200 "$BIN/pk-bench-cuda" > "$OUT/bench.log" 2>&1; echo "rc=$?" >> "$OUT/bench.log"
  grep -v '^{' "$OUT/bench.log"
fi
echo "== diff (full)"; timeout 180 "$BIN/pk-cuda-diff" --problems "$PROBLEMS" --max-rows 4096 --max-bytes 8388608 --big-rows 2097152 --seed 11 > "$OUT/diff_full.log" 2>&1; echo "rc=$?" >> "$OUT/diff_full.log"
tail -3 "$OUT/diff_full.log"; grep '^DIFF' "$OUT/diff_full.log" | head -3
if [ "$SANITIZE" = 1 ] && command -v compute-sanitizer > /dev/null; then
  echo "== memcheck"; timeout 100 compute-sanitizer --tool memcheck --print-limit 5 "$BIN/pk-cuda-diff" --problems 25 --max-rows 4 --max-bytes 65536 --big-rows 0 --seed 3 > "$OUT/memcheck.log" 2>&1; echo "rc=$?" >> "$OUT/memcheck.log"
  tail -6 "$OUT/memcheck.log"
fi
if [ "$PROFILE" = 1 ] && command -v ncu > /dev/null; then
  echo "== ncu (1024x1024 k=64 bf16, one launch)"
  timeout 150 ncu --clock-control none --kernel-name regex:TopKKernel --launch-skip 4 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section ComputeWorkloadAnalysis \
    --section SourceCounters "$BIN/pk-bench-cuda" --quick --repeats 3 --only 1 > "$OUT/ncu.txt" 2>&1
  grep -E 'Duration|Executed Ipc|Issue Slots Busy|Warp Cycles Per Issued|Achieved Occupancy|Theoretical Occupancy|Registers Per|Executed Instructions  |Stall|Block Limit' "$OUT/ncu.txt" | head -40
fi
command -v cuobjdump > /dev/null && cuobjdump -sass "$BIN/pk-bench-cuda" 2>/dev/null | gzip -9 > "$OUT/sass.txt.gz"
exit 0
