#!/usr/bin/env bash
# The README's run command after the build: starts pkserve in the foreground on 0.0.0.0:50051
# (--backend=auto: CUDA when built and a GPU is usable, else the CPU). Ctrl-C drains and exits.
# Extra arguments go to pkserve, e.g.  scripts/run.sh build --threads=8 --log_level=debug
set -euo pipefail
build=${1:-build}
exec "$build/server/pkserve" "${@:2}"
