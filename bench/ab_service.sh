#!/usr/bin/env bash
# A/B of pkserve builds on one host, in turn, so that the host's own drift (large between the
# machines a device call is lent) falls on every build alike: the echo baseline in a process of its
# own, then ROUNDS rounds of every build (each started fresh), then the echo again. Each run is
# 1024x1024 bf16 k=64 through pkserve-bench; its one-line summary goes to stdout, prefixed with the
# build's name and round, and with the server's CPU by thread (bench/thread_cpu.sh) under the
# throughput levels. Every pkserve answer sampled by --verify is checked against the CPU
# implementation.
#
#   OUT=results_dir bench/ab_service.sh DIR ROUNDS PKSERVE_NAME...
#
# DIR holds bin/pkserve-bench, the pkserve builds as bin/PKSERVE_NAME, and lib/ (added to
# LD_LIBRARY_PATH), as scripts/gpu_bundle.sh lays them out. Settings (environment):
#   BACKEND     pkserve's --backend (cuda)
#   LEVELS      256-row throughput concurrencies, 8 connections ("16 64"; empty: none)
#   LIGHT       1 to also run 1 row at concurrency 1 (1)
#   SECONDS_PER measured seconds per run (6; warm-up 2 for throughput, 1 for light load)
# Writes the servers' logs and the thread profiles to $OUT.
set -euo pipefail

dir=${1:?usage: OUT=results_dir $0 DIR ROUNDS PKSERVE_NAME...}
rounds=${2:?usage: OUT=results_dir $0 DIR ROUNDS PKSERVE_NAME...}
shift 2
builds=("$@")
[[ ${#builds[@]} -gt 0 ]] || { echo "name at least one pkserve build under $dir/bin" >&2; exit 2; }
out=${OUT:?set OUT to the folder for the results}
backend=${BACKEND:-cuda}
levels=${LEVELS-16 64}
light=${LIGHT:-1}
seconds=${SECONDS_PER:-6}
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bench_binary="$dir/bin/pkserve-bench"
thread_cpu="$(dirname "$0")/thread_cpu.sh"
mkdir -p "$out"
echo_port=50090
pk_port=50091
shape=(--widths=1024,1024 --k=64 --dtype=bf16)

server_pid=""
stop_server() {
  [[ -n $server_pid ]] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
trap stop_server EXIT

wait_for() {  # log file, text: up to 20 s for the server to say it listens
  for _ in $(seq 1 200); do
    grep -q "$2" "$1" && return 0
    kill -0 "$server_pid" 2>/dev/null || { echo "the server exited at start; see $1" >&2; exit 1; }
    sleep 0.1
  done
  echo "the server did not listen within 20 s; see $1" >&2
  exit 1
}

run() {  # label, port, extra pkserve-bench flags...
  local label=$1 port=$2
  shift 2
  timeout $((seconds + 30)) "$bench_binary" --target="127.0.0.1:$port" --server_pid="$server_pid" \
    "${shape[@]}" "$@" 2>&1 | grep -E "^(pkserve|echo)" | sed "s|^|$label |" || true
}

measure() {  # label, port, verify (0: none)
  local label=$1 port=$2 verify=$3 profile
  local check=()
  [[ $verify -gt 0 ]] && check=(--verify="$verify")
  for c in $levels; do
    profile="$out/threads_${label}_c$c.txt"
    # From a second into the measured part to a second before its end.
    ( sleep 3; "$thread_cpu" "$server_pid" $((seconds > 3 ? seconds - 2 : 1)) >"$profile" 2>&1 ) &
    local profiler=$!
    run "$label" "$port" --rows=256 --concurrency="$c" --connections=8 --warmup=2 \
      --duration="$seconds" "${check[@]}"
    wait "$profiler" || true
    sed -n '3,6p' "$profile" | sed "s|^|$label   |"
  done
  if [[ $light == 1 ]]; then
    run "$label" "$port" --rows=1 --concurrency=1 --warmup=1 --duration="$seconds" "${check[@]}"
  fi
}

echo_round() {  # label
  "$bench_binary" --serve_echo="127.0.0.1:$echo_port" >"$out/$1.log" 2>&1 &
  server_pid=$!
  wait_for "$out/$1.log" "echo baseline listening"
  measure "$1" "$echo_port" 0
  stop_server
}

echo_round echo.before
for round in $(seq 1 "$rounds"); do
  for build in "${builds[@]}"; do
    label="$build.$round"
    "$dir/bin/$build" --address="127.0.0.1:$pk_port" --backend="$backend" >"$out/$label.log" 2>&1 &
    server_pid=$!
    wait_for "$out/$label.log" "listening on 127.0.0.1:$pk_port"
    measure "$label" "$pk_port" 20
    stop_server
  done
done
echo_round echo.after
