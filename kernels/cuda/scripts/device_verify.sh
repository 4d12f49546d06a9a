#!/usr/bin/env bash
# The device checks a kernel change needs before it lands (issue 19: golden, differential with no
# differing row, memcheck, on the GPU after the last CUDA edit), for each carried build folder
# named (each holding pk-golden and pk-cuda-diff): the golden cases; the full randomized
# differential (random shapes, the benchmark's shapes at 4 096 rows, every kernel path drawn); the
# smallest shapes and k; few rows (the latency kernel's launches); eight shapes of the benchmark
# and its paths at up to 8 192 rows each; compute-sanitizer memcheck of four shapes. Logs go to
# $OUT/verify_<folder>/; one summary line a step is printed.
#   kernels/cuda/scripts/device_verify.sh carry/base carry/candidate ...
set -u
OUT=${OUT:-./device-out}
START=$(date +%s)
stamp() { echo "[$(( $(date +%s) - START ))s] $*"; }
# The last line of a log that says how many passed, and its exit status.
summary() { echo "$(grep -E 'passed|ERROR SUMMARY' "$1" | tail -1) $(tail -1 "$1")"; }
SHAPES="256x256/64/bf16 200x100/64/bf16 32x32x32x32/64/bf16 1024x1024/64/bf16 16x16x16x16/32/f32
8x8x8x8/16/f32 1024x1024/128/bf16 64x64x64/64/bf16"
for bin in "$@"; do
  name=$(basename "$bin")
  logs=$OUT/verify_$name
  mkdir -p "$logs"
  stamp "$name: golden"
  timeout 60 "$bin/pk-golden" tests/data/golden_cases.bin --backend cuda > "$logs/golden.log" 2>&1
  echo "rc=$?" >> "$logs/golden.log"
  echo "  golden: $(grep -E 'passed' "$logs/golden.log" | tail -1) $(tail -1 "$logs/golden.log")"
  stamp "$name: full differential"
  timeout 240 "$bin/pk-cuda-diff" --problems 2000 --max-rows 4096 --max-bytes 8388608 \
    --big-rows 2097152 --bench-rows 4096 --seed 11 > "$logs/full.log" 2>&1
  echo "rc=$?" >> "$logs/full.log"
  echo "  full: $(summary "$logs/full.log")"
  timeout 90 "$bin/pk-cuda-diff" --problems 400 --max-rows 4096 --max-bytes 8388608 --big-rows 0 \
    --max-width 32 --max-k 32 --seed 13 > "$logs/small.log" 2>&1
  echo "rc=$?" >> "$logs/small.log"
  echo "  small shapes: $(summary "$logs/small.log")"
  timeout 90 "$bin/pk-cuda-diff" --problems 1500 --max-rows 200 --max-bytes 8388608 --big-rows 0 \
    --seed 17 > "$logs/few_rows.log" 2>&1
  echo "rc=$?" >> "$logs/few_rows.log"
  echo "  few rows: $(summary "$logs/few_rows.log")"
  stamp "$name: shapes"
  seed=20
  for shape in $SHAPES; do
    seed=$((seed + 1))
    timeout 60 "$bin/pk-cuda-diff" --shape "$shape" --problems 6 --max-rows 8192 \
      --max-bytes 67108864 --big-rows 0 --seed "$seed" > "$logs/shape_${shape//\//_}.log" 2>&1
    echo "rc=$?" >> "$logs/shape_${shape//\//_}.log"
    echo "  $shape: $(summary "$logs/shape_${shape//\//_}.log")"
  done
  if command -v compute-sanitizer > /dev/null; then
    stamp "$name: memcheck"
    for shape in 32x32x32x32/64/bf16 16x16x16x16/32/f32 256x256/64/bf16 1024x1024/128/bf16; do
      timeout 60 compute-sanitizer --tool memcheck --print-limit 5 "$bin/pk-cuda-diff" \
        --shape "$shape" --problems 3 --max-rows 1500 --max-bytes 8388608 --big-rows 0 --seed 5 \
        > "$logs/memcheck_${shape//\//_}.log" 2>&1
      echo "rc=$?" >> "$logs/memcheck_${shape//\//_}.log"
      echo "  memcheck $shape: $(summary "$logs/memcheck_${shape//\//_}.log")"
    done
  fi
done
stamp "done"
