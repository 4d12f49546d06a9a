#!/usr/bin/env bash
# Profile of the CUDA kernel on a GPU host, per benchmark configuration (no clock control): executed
# warp-instructions, cycles, occupancy and the stall reasons of each configuration, and per-line
# source counters for the ones named. Uses binaries carried in carry/cuda-bin (build them with
# -lineinfo for the source view). Everything lands in one archive, $OUT/profile.tar.gz.
# A configuration "L" is the latency table's one-row launch (1024x1024 bf16 k=64, the latency kernel).
#   kernels/cuda/scripts/device_profile.sh "0 1 2 ... L" "3 9 L"
# With CUBIN (the same build's `nvcc -lineinfo -cubin` of topk_kernel.cu, carried), its line table
# (`nvdisasm -gi`, which only the GPU host has) lands in the archive too, as dis.txt, for
# profile_lines.py.
set -u
OUT=${OUT:-./device-out}
CONFIGS=${1:-"0 1 2 3 4 5 6 7 8 9"}
SOURCE_CONFIGS=${2:-"3"}
BIN=${BIN:-carry/cuda-bin}
WORK=${WORK:-/tmp/pk-profile}
mkdir -p "$WORK"
if [ -n "${CUBIN:-}" ]; then nvdisasm -gi -c "$CUBIN" > "$WORK/dis.txt" 2> "$WORK/dis.err"; fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$WORK/gpu.txt" 2>&1
# Every top-k instance: TopKKernel and TopKSmallKernel.
KERNEL=regex:TopK
# The pk-bench-cuda arguments and launches to skip for configuration $1.
launch_of() {
  if [ "$1" = L ]; then echo "--latency --repeats 3 ^ 10"; else echo "--quick --repeats 3 --only $1 ^ 4"; fi
}
METRICS=smsp__inst_executed.sum,smsp__cycles_active.avg,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum
for i in $CONFIGS; do
  launch=$(launch_of "$i")
  timeout 60 ncu --clock-control none --kernel-name "$KERNEL" --launch-skip "${launch#*^ }" --launch-count 1 \
    --metrics "$METRICS,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" --csv \
    "$BIN/pk-bench-cuda" ${launch% ^*} > "$WORK/metrics_$i.csv" 2> "$WORK/metrics_$i.err"
  grep -E '"smsp__inst_executed.sum"|"gpu__time_duration.sum"' "$WORK/metrics_$i.csv" | awk -F'","' -v c="$i" '{print c, $(NF-2), $NF}'
done
for i in $SOURCE_CONFIGS; do
  launch=$(launch_of "$i")
  timeout 90 ncu --clock-control none --kernel-name "$KERNEL" --launch-skip "${launch#*^ }" --launch-count 1 \
    --section SourceCounters --section WarpStateStats --import-source yes -o "$WORK/source_$i" \
    "$BIN/pk-bench-cuda" ${launch% ^*} > "$WORK/source_$i.log" 2>&1
  # Per CUDA line, and per SASS instruction (mapped to lines with `nvdisasm -g` of a -lineinfo cubin
  # of the same build: NOTES.md, "Where it stands").
  ncu -i "$WORK/source_$i.ncu-rep" --page source --csv --print-source cuda > "$WORK/cuda_$i.csv" 2> "$WORK/cuda_$i.err"
  ncu -i "$WORK/source_$i.ncu-rep" --page source --csv --print-source sass > "$WORK/sass_$i.csv" 2>> "$WORK/cuda_$i.err"
  ncu -i "$WORK/source_$i.ncu-rep" --page details --print-details all > "$WORK/details_$i.txt" 2>&1
  rm -f "$WORK/source_$i.ncu-rep"
  ls -la "$WORK" | tail -3
done
tar -C "$WORK" -czf "$OUT/profile.tar.gz" .
ls -la "$OUT"
