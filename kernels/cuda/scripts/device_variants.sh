#!/usr/bin/env bash
# One call on a GPU host for the variants that build_variants.sh packed in carry/variants.tgz:
# unpacks them, times the builds named against the first (device_rounds.sh: ROUNDS rounds,
# alternated, on CONFIGS), runs device_verify.sh on the VERIFY best by geometric mean among those
# that gain more than 0.3 %, then prints each build's latency table. Verification comes after the
# timing but before the latency tables: it is what a build needs to land. Logs go to $OUT/ab and
# $OUT/verify_NAME.
#   ROUNDS=2 VERIFY=1 kernels/cuda/scripts/device_variants.sh v28 hs hsro
set -u
OUT=${OUT:-./device-out}
ROUNDS=${ROUNDS:-2}
VERIFY=${VERIFY:-1}
CONFIGS=${CONFIGS:-"0 1 2 3 4 5 6 7 8 9 x0 x1 x2 x3 x4 x5 x6 x7 x8 x9 x10 x14 x17 x19"}
here=$(dirname "$0")
mkdir -p "$OUT"
nvidia-smi -L | tee "$OUT/gpu_name.txt"
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start ))s] $*"; }
tar xzf carry/variants.tgz -C carry || exit 1
builds=()
for name in "$@"; do builds+=("carry/$name"); done
stamp "rounds"
ROUNDS=$ROUNDS CONFIGS=$CONFIGS OUT=$OUT/ab bash "$here/device_rounds.sh" "${builds[@]}"
for name in $(awk '$2 + 0 > 0.3 {print $1}' "$OUT/ab/geomean.txt" | head -n "$VERIFY"); do
  stamp "verify $name"
  OUT=$OUT bash "$here/device_verify.sh" "carry/$name"
done
for name in "$@"; do
  stamp "latency $name"
  timeout 60 "carry/$name/pk-bench-cuda" --latency 2>&1 | grep -v '^{' |
    sed -n '/^latency/,/^ *65536/p'
done
stamp "done"
