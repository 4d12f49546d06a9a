#!/usr/bin/env bash
# The hosted-memory checks and measurements on a GPU host, in one call, with binaries built on the
# development host (CUDA on, sm_90) and packed as carry/bundle.tar.xz:
#   tar -C carry -cJf carry/bundle.tar.xz bundle kbin   # bundle: scripts/gpu_bundle.sh output;
#                                                        # kbin: the kernels' tools
#   bench/run_gpu_lookup.sh carry/bundle.tar.xz OUT_DIR
# Runs: the top-k golden cases and differential test on the CUDA kernel, the golden lookup cases on
# both backends, the lookup differential test, compute-sanitizer memcheck of the lookup kernels,
# the service and lookup tests on the CUDA executor (bits against the CPU lookup over real gRPC),
# then pk-bench-lookup-cuda (and a baseline build's, for an A/B) and PyTorch's embedding_bag on
# the same shapes. Each step's output goes
# to OUT_DIR/NAME.txt; the summary lines go to stdout.
set -uo pipefail
bundle=${1:?usage: run_gpu_lookup.sh BUNDLE.tar.xz OUT_DIR}
out=${2:?usage: run_gpu_lookup.sh BUNDLE.tar.xz OUT_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
work=$(mktemp -d)
tar -C "$work" -xJf "$bundle"
export LD_LIBRARY_PATH="$work/bundle/lib"
kbin="$work/kbin"
step() {  # NAME TIMEOUT COMMAND...: runs it, keeps its output, prints its last line and status
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "$@" >"$out/$name.txt" 2>&1
  local status=$?
  echo "== $name (exit $status): $(grep -v '^\s*$' "$out/$name.txt" | tail -1)"
}
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv,noheader
step golden_topk 120 "$kbin/pk-golden" "$root/tests/data/golden_cases.bin" --backend all
step diff_topk 90 "$kbin/pk-cuda-diff" --problems 200
step golden_lookup 120 "$kbin/pk-golden-lookup" "$root/tests/data/lookup_cases.bin" --backend all
step diff_lookup 90 "$kbin/pk-lookup-diff" --problems 200
for kernel in streaming staged fused; do  # each weighted-sum kernel on every shape
  PK_LOOKUP_SUM_KERNEL=$kernel step "golden_lookup_$kernel" 60 \
    "$kbin/pk-golden-lookup" "$root/tests/data/lookup_cases.bin" --backend cuda
  PK_LOOKUP_SUM_KERNEL=$kernel step "diff_lookup_$kernel" 90 "$kbin/pk-lookup-diff" --problems 100
done
if command -v compute-sanitizer >/dev/null; then
  step memcheck_lookup 120 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$kbin/pk-golden-lookup" "$root/tests/data/lookup_cases.bin" --backend cuda
else
  echo "== memcheck_lookup: compute-sanitizer not on PATH"
fi
PKSERVE_TEST_BACKEND=cuda step service_cuda 120 "$work/bundle/bin/server_service_test"
PKSERVE_TEST_BACKEND=cuda step lookup_cuda 120 "$work/bundle/bin/server_lookup_test"
step bench_lookup 150 "$kbin/pk-bench-lookup-cuda"
# The same benchmark of a baseline build (kbin/pk-bench-lookup-cuda-base, when carried), in the
# same call: the A/B of a kernel change.
if [[ -x "$kbin/pk-bench-lookup-cuda-base" ]]; then
  step bench_lookup_base 150 "$kbin/pk-bench-lookup-cuda-base"
  grep -v '^{' "$out/bench_lookup_base.txt" | tail -26
fi
step embedding_bag 120 python3 "$root/bench/embedding_bag_ref.py"
grep -v '^{' "$out/bench_lookup.txt" | tail -26
grep -v '^{' "$out/embedding_bag.txt" | tail -10
