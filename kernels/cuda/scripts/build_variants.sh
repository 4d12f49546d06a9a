#!/usr/bin/env bash
# Builds kernel variants for an A/B on a GPU host (device_rounds.sh, device_verify.sh) from the
# untimed changes kept as patches in kernels/cuda/pending/. Each argument NAME=P1+P2+... is the
# committed tree (git archive HEAD) with P1.patch, P2.patch, ... applied in that order; NAME= alone
# is the tree as committed (the baseline). Each is built with CMake into /tmp/pk-variant-NAME, its
# pk-bench-cuda, pk-cuda-diff and pk-golden copied to carry/NAME, and its kernels checked on this
# host through the emulator (pk-cuda-emu-diff: small shapes, then the benchmark's shapes); a
# variant whose patch does not apply, whose build fails or whose emulated run differs stops the
# script. Last, carry/variants.tgz holds every folder built, for the run tool's carry.
#   kernels/cuda/scripts/build_variants.sh v28= hs=hs hsro=hr+ho+hs
set -eu
root=$(git rev-parse --show-toplevel)
cd "$root"
pending=kernels/cuda/pending
if [ $# -eq 0 ]; then
  echo "usage: build_variants.sh NAME=[PATCH[+PATCH...]] ..." >&2
  exit 2
fi
names=()
for spec in "$@"; do
  name=${spec%%=*}
  patches=${spec#*=}
  if [ -z "$name" ] || [ "$name" = "$spec" ]; then
    echo "build_variants.sh: '$spec' is not NAME=PATCH[+PATCH...] or NAME=" >&2
    exit 2
  fi
  src=/tmp/pk-variant-src-$name
  build=/tmp/pk-variant-$name
  rm -rf "$src"
  mkdir -p "$src"
  git archive HEAD | tar -x -C "$src"
  for patch in ${patches//+/ }; do
    (cd "$src" && git apply "$root/$pending/$patch.patch") ||
      { echo "build_variants.sh: $pending/$patch.patch does not apply for $name" >&2; exit 1; }
  done
  echo "== $name: ${patches:-as committed}"
  if ! { cmake -S "$src/kernels" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
           > "$build.log" 2>&1 &&
         cmake --build "$build" --target pk-bench-cuda pk-cuda-diff pk-golden pk-cuda-emu-diff \
           >> "$build.log" 2>&1; }; then
    tail -30 "$build.log"
    echo "build_variants.sh: $name does not build (log: $build.log)" >&2
    exit 1
  fi
  mkdir -p "carry/$name"
  cp "$build/cuda/pk-bench-cuda" "$build/cuda/pk-cuda-diff" "$build/pk-golden" "carry/$name/"
  # Run from the variant's tree, as from a checkout's root.
  small="--problems 300 --max-rows 64 --max-bytes 262144 --big-rows 0 --bench-rows 0"
  small+=" --max-width 32 --max-k 32 --seed 13"
  shapes="--problems 0 --big-rows 0 --bench-rows 300 --vary-paths 0 --seed 3"
  for check in "$small" "$shapes"; do
    # Exit status 0: no row differs from the CPU top-k.
    # shellcheck disable=SC2086
    if ! (cd "$src" && "$build/cuda/pk-cuda-emu-diff" $check > "$build.emu.log" 2>&1); then
      tail -n 5 "$build.emu.log"
      echo "build_variants.sh: $name fails in the emulator (log: $build.emu.log)" >&2
      exit 1
    fi
    echo "   emulated $check: $(tail -n 1 "$build.emu.log")"
  done
  names+=("$name")
done
tar czf carry/variants.tgz -C carry "${names[@]}"
echo "carry/variants.tgz: ${names[*]} ($(du -m carry/variants.tgz | cut -f1) MiB)"
