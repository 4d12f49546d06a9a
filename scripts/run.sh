#!/usr/bin/env bash
# The README's run command after the build: runs the CPU kernel benchmark (until the server lands).
set -euo pipefail
build=${1:-build}
exec "$build/kernels/bench/pk-bench-cpu" "${@:2}"
