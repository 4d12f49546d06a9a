#!/usr/bin/env bash
# The device checks a kernel change needs before it lands (issue 19: golden, differential with no
# differing row, memcheck, on the GPU after the last CUDA edit), for each carried build folder
# named (each holding pk-golden and pk-cuda-diff): device_check.sh's correctness steps, without
# its benchmark. Logs go to $OUT/verify_<folder>/.
#   kernels/cuda/scripts/device_verify.sh carry/base carry/candidate ...
set -u
OUT=${OUT:-./device-out}
for bin in "$@"; do
  name=$(basename "$bin")
  echo "== $name"
  BIN=$bin OUT=$OUT/verify_$name "$(dirname "$0")/device_check.sh" 2000 1 0
done
