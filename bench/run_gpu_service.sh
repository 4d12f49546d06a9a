#!/usr/bin/env bash
# The service measurements of bench/RESULTS.md ("Service (pkserve-bench)") on one host: starts
# pkserve on loopback, runs pkserve-bench beside its in-process echo baseline, stops the server.
#   1. light load:  1 row of 1024x1024 bf16 k=64 per request, concurrency 1
#   2. throughput:  256 rows per request, a concurrency sweep over several connections
#   2b. threads:    256 rows per request at concurrency 64, with pkserve's CPU by thread
#   3. batching:    1-row callers at concurrency 64, then the same with --max_batch_rows=1; each
#                   as unary calls and as messages on one TopKStream per caller (--mode=stream)
#   4. the light load against the echo baseline in a process of its own (pkserve-bench --serve_echo)
#   5. lookup (only when STEPS names it): a hosted memory of 1024x1024 slots x dim 1024 bf16 made
#      with pkserve-make-memory; 64-output Lookup requests (256 score rows, heads 4, k 32) over the
#      concurrency sweep, unary and stream, then 1-output requests at concurrency 1; each level
#      beside the echo baseline in a process of its own, which answers LookupResponses of the same
#      size (outputs x dim bf16)
#   6. scaling (only when STEPS names it; issue 21): for each set of DEVICE_SETS (default "0",
#      "0,1", and "0,1,2,3" and all 8 where the host has them), pkserve --devices=SET holding the
#      lookup step's memory on each of its devices: the start-up time (until it listens) and each
#      device's memory in use once it listens, then the 256-row TopK sweep and the 64-output
#      Lookup sweep beside the echo baseline, with each device's busy fraction (nvidia-smi's
#      utilization, sampled every 500 ms) over each sweep; before them, with PK_GOLDEN and
#      GOLDEN_CASES set, pk-golden --backend cuda on each device in turn (CUDA_VISIBLE_DEVICES)
# Every answer sampled by --verify is checked bit for bit against the CPU implementation (lookups:
# against the CPU lookup on the same memory file).
# About 3.5 minutes without lookup; each step has a time limit, so that a hang cannot take it past
# 6. The lookup step adds about 3 minutes (the memory file is 2 GiB, written to MEMORY_DIR).
#
#   OUT=/path/to/results bench/run_gpu_service.sh DIR
#
# DIR holds pkserve and pkserve-bench (directly or under bin/, as scripts/gpu_bundle.sh lays them
# out) and their shared libraries under DIR/lib (added to LD_LIBRARY_PATH). Writes to $OUT:
# light.json, throughput.json, threads.json, batching.json, batching_stream.json,
# batching_mbr1.json, batching_mbr1_stream.json, light_echo_process.json, and with the lookup
# step lookup.json, lookup_stream.json, lookup_light.json (pkserve-bench --json), with the scaling
# step scaling_topk_SET.json, scaling_lookup_SET.json and the samples util_{topk,lookup}_SET.csv
# (SET the device list with _ for commas), threads.txt (pkserve's CPU by thread), bench.txt (the exact commands and every run's text output,
# with the server's CPU use per level) and server.log.
# Settings (environment): BACKEND (cuda; cpu measures the CPU backend the same way), PORT (50071),
# SWEEP (throughput concurrency levels), CONNECTIONS (connections of throughput and batching
# runs), STEPS (which of light, throughput, batching, echo_process, lookup and scaling to run;
# default all but lookup and scaling: STEPS=lookup runs it alone), DEVICE_SETS (the scaling step's
# --devices values, space-separated), PK_GOLDEN and GOLDEN_CASES (the scaling step's pk-golden
# and its cases file), PKSERVE, PKSERVE_BENCH and PKSERVE_MAKE_MEMORY
# (binaries elsewhere than DIR), MEMORY_DIR (where the lookup step writes its memory file, removed
# at the end; default TMPDIR or /tmp, never OUT), MEMORY_DIM (its values a slot, 1024; smaller
# for a dry run of the steps on a small host).
set -euo pipefail

dir=${1:?usage: OUT=results_dir $0 DIR (DIR holds pkserve, pkserve-bench and lib/)}
out=${OUT:?set OUT to the folder for the results}
backend=${BACKEND:-cuda}
port=${PORT:-50071}
steps=" ${STEPS:-light throughput batching echo_process} "
step() { [[ $steps == *" $1 "* ]]; }
if [[ $backend == cuda ]]; then
  sweep=${SWEEP:-1,4,16,64,128}
  connections=${CONNECTIONS:-8}
else
  sweep=${SWEEP:-1,2,4,8,16}
  connections=${CONNECTIONS:-4}
fi

find_binary() {  # name -> path in DIR or DIR/bin
  local name=$1
  for candidate in "$dir/$name" "$dir/bin/$name"; do
    if [[ -x $candidate ]]; then
      echo "$candidate"
      return
    fi
  done
  echo "no executable $name in $dir or $dir/bin" >&2
  exit 2
}
pkserve=${PKSERVE:-$(find_binary pkserve)}
bench=${PKSERVE_BENCH:-$(find_binary pkserve-bench)}
make_memory=""
if step lookup || step scaling; then
  make_memory=${PKSERVE_MAKE_MEMORY:-$(find_binary pkserve-make-memory)}
fi
if [[ -d $dir/lib ]]; then
  export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
mkdir -p "$out"
text="$out/bench.txt"
: >"$text"
: >"$out/server.log"

server_pid=""
stop_server() {
  [[ -n $server_pid ]] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 1 100); do  # up to 10 s to drain and exit
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
memory_file=""
sampler_pid=""
cleanup() {
  stop_server
  [[ -z $sampler_pid ]] || kill "$sampler_pid" 2>/dev/null || true
  [[ -z $memory_file ]] || rm -f "$memory_file"
}
trap cleanup EXIT

start_server() {  # extra pkserve flags...
  echo "== pkserve --backend=$backend $*" >>"$out/server.log"
  "$pkserve" --address="127.0.0.1:$port" --backend="$backend" --log_level=info \
    --drain_timeout_s=5 --drain_notice_ms=0 "$@" >>"$out/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 200); do  # up to 20 s (device start-up)
    if grep -q "listening on 127.0.0.1:$port" "$out/server.log"; then
      echo "$ pkserve --address=127.0.0.1:$port --backend=$backend $* (pid $server_pid)" >>"$text"
      return
    fi
    if ! kill -0 "$server_pid" 2>/dev/null; then
      echo "pkserve exited at start; see $out/server.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "pkserve did not listen within 20 s; see $out/server.log" >&2
  exit 1
}

run_bench() {  # name, time limit (s), pkserve-bench flags...
  local name=$1 limit=$2
  shift 2
  local command=("$bench" --target="127.0.0.1:$port" --server_pid="$server_pid"
    --json="$out/$name.json" "$@")
  echo "$ ${command[*]}" >>"$text"
  local status=0
  timeout "$limit" "${command[@]}" >>"$text" 2>&1 || status=$?
  echo "(pkserve-bench exit status $status)" >>"$text"
  echo >>"$text"
}

shape=("--widths=1024,1024" --k=64 --dtype=bf16)
if step light || step throughput || step batching; then
  start_server
fi
if step light; then
  run_bench light 35 "${shape[@]}" --rows=1 --concurrency=1 --warmup=2 --duration=10 \
    --baseline=echo --verify=100
fi
if step throughput; then
  run_bench throughput 110 "${shape[@]}" --rows=256 --concurrency="$sweep" \
    --connections="$connections" --warmup=2 --duration=6 --baseline=echo --verify=20
  # Where the server's CPU goes at the plateau: 256-row requests at concurrency 64, with the
  # cores each of pkserve's threads uses over 4 s in the middle of the run (bench/thread_cpu.sh).
  ( sleep 4; "$(dirname "$0")/thread_cpu.sh" "$server_pid" 4 >"$out/threads.txt" 2>&1 ) &
  profile_pid=$!
  run_bench threads 25 "${shape[@]}" --rows=256 --concurrency=64 --connections="$connections" \
    --warmup=2 --duration=8
  wait "$profile_pid" || true
  {
    echo "$ bench/thread_cpu.sh $server_pid 4 (seconds 4-8 of the run above)"
    cat "$out/threads.txt"
    echo
  } >>"$text"
fi
# 1-row callers at concurrency 64, as unary calls (NAME.json) and over streams (NAME_stream.json).
run_batching() {  # name, time limit (s), more pkserve-bench flags...
  local name=$1 limit=$2 mode suffix
  shift 2
  for mode in unary stream; do
    suffix=${mode/unary/}
    run_bench "$name${suffix:+_$suffix}" "$limit" "${shape[@]}" --rows=1 \
      --concurrency=64 --connections="$connections" --mode="$mode" --warmup=2 --duration=8 \
      --verify=100 "$@"
  done
}
if step batching; then
  run_batching batching 40 --baseline=echo
fi
stop_server
if step batching; then
  start_server --max_batch_rows=1
  run_batching batching_mbr1 25
  stop_server
fi

# The light load once more against the echo in a process of its own: the in-process echo shares
# the client's threads, so this is the RPC layer's latency across processes, as pkserve's is.
if step echo_process; then
  echo "== pkserve-bench --serve_echo (the echo baseline in its own process)" >>"$out/server.log"
  "$bench" --serve_echo="127.0.0.1:$port" >>"$out/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do
    grep -q "echo baseline listening on 127.0.0.1:$port" "$out/server.log" && break
    sleep 0.1
  done
  echo "$ pkserve-bench --serve_echo=127.0.0.1:$port (pid $server_pid)" >>"$text"
  run_bench light_echo_process 25 "${shape[@]}" --rows=1 --concurrency=1 --warmup=2 \
    --duration=10
  stop_server
fi

# Lookups of a hosted memory, against the echo baseline in a process of its own (pkserve-bench's
# default for --baseline=echo), which answers each lookup with a LookupResponse of pkserve's size.
make_memory_file() {
  memory_file="${MEMORY_DIR:-${TMPDIR:-/tmp}}/pkserve-bench-lookup-$$.safetensors"
  local dim=${MEMORY_DIM:-1024}
  echo "$ pkserve-make-memory --out=$memory_file --widths=1024x1024 --dim=$dim --dtype=bfloat16" \
    >>"$text"
  timeout 120 "$make_memory" --out="$memory_file" --widths=1024x1024 --dim="$dim" \
    --dtype=bfloat16 >>"$text" 2>&1
}
lookup=(--memory=bench --k=32 --heads=4 --dtype=bf16 --baseline=echo)
if step lookup; then
  make_memory_file
  start_server --memory="bench=$memory_file"
  lookup+=(--memory_file="$memory_file")
  run_bench lookup 150 "${lookup[@]}" --rows=256 --concurrency="$sweep" \
    --connections="$connections" --warmup=2 --duration=6 --verify=10
  run_bench lookup_stream 150 "${lookup[@]}" --rows=256 --concurrency="$sweep" \
    --connections="$connections" --mode=stream --warmup=2 --duration=6 --verify=10
  run_bench lookup_light 40 "${lookup[@]}" --rows=4 --concurrency=1 --warmup=2 --duration=10 \
    --verify=100
  stop_server
  rm -f "$memory_file"
  memory_file=""
fi

# The scaling step (issue 21). Each device's memory in use, as "index:MiB" pairs.
device_memory() {
  command -v nvidia-smi >/dev/null || { echo "(no nvidia-smi)"; return; }
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits | tr -d ' ' |
    tr ',' ':' | tr '\n' ' '
}
# Samples each device's utilization every 500 ms into $1 until stop_sampler; then prints each
# device's mean over the samples.
start_sampler() {
  : >"$1"
  command -v nvidia-smi >/dev/null || return 0
  nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader,nounits -lms 500 >"$1" &
  sampler_pid=$!
}
stop_sampler() {
  [[ -z $sampler_pid ]] || { kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null || true; }
  sampler_pid=""
  awk -F', *' 'NF == 2 { sum[$1] += $2; n[$1]++ }
    END { for (d in sum) printf "device %s busy %.0f %% (%d samples)\n", d, sum[d] / n[d], n[d] }' \
    "$1" | sort
}
if step scaling; then
  count=$(command -v nvidia-smi >/dev/null && nvidia-smi -L | grep -c '^GPU' || echo 1)
  if [[ -z ${DEVICE_SETS:-} ]]; then
    DEVICE_SETS="0"
    ((count >= 2)) && DEVICE_SETS+=" 0,1"
    ((count >= 4)) && DEVICE_SETS+=" 0,1,2,3"
    ((count >= 8)) && DEVICE_SETS+=" 0,1,2,3,4,5,6,7"
  fi
  echo "== scaling: $count devices; sets $DEVICE_SETS" >>"$text"
  if [[ -n ${PK_GOLDEN:-} && -n ${GOLDEN_CASES:-} ]]; then
    for ((d = 0; d < count; ++d)); do
      echo "$ CUDA_VISIBLE_DEVICES=$d $PK_GOLDEN $GOLDEN_CASES --backend cuda" >>"$text"
      CUDA_VISIBLE_DEVICES=$d timeout 120 "$PK_GOLDEN" "$GOLDEN_CASES" --backend cuda 2>&1 |
        tail -3 >>"$text" || echo "(pk-golden on device $d failed)" >>"$text"
    done
  fi
  make_memory_file
  for set in $DEVICE_SETS; do
    name=${set//,/_}
    echo "== --devices=$set; memory in use before (device:MiB): $(device_memory)" >>"$text"
    started=$(date +%s.%N)
    start_server --devices="$set" --memory="bench=$memory_file"
    awk -v a="$started" -v b="$(date +%s.%N)" \
      'BEGIN { printf "start-up to listening: %.2f s\n", b - a }' >>"$text"
    echo "memory in use once listening (device:MiB): $(device_memory)" >>"$text"
    start_sampler "$out/util_topk_$name.csv"
    run_bench "scaling_topk_$name" 110 "${shape[@]}" --rows=256 --concurrency="$sweep" \
      --connections="$connections" --warmup=2 --duration=6 --baseline=echo --verify=20
    stop_sampler "$out/util_topk_$name.csv" >>"$text"
    start_sampler "$out/util_lookup_$name.csv"
    run_bench "scaling_lookup_$name" 150 "${lookup[@]}" --memory_file="$memory_file" \
      --rows=256 --concurrency="$sweep" --connections="$connections" --warmup=2 --duration=6 \
      --verify=10
    stop_sampler "$out/util_lookup_$name.csv" >>"$text"
    stop_server
  done
  rm -f "$memory_file"
  memory_file=""
fi
cat "$text"
