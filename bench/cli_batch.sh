#!/usr/bin/env bash
# pkserve-cli batch runs (issue 18): the CLI's peak memory with inputs of several sizes, and its
# throughput against pkserve-bench's at the same shape, streams and connections, in one run on
# one host against one pkserve on loopback.
#
#   bench/cli_batch.sh                       # 100 MB and 1 GB inputs, 1024x1024 bf16 k=64
#   SIZES_MB="20 100" STREAMS=2 bench/cli_batch.sh
#   MODE=lookup DIM=256 bench/cli_batch.sh   # pkserve-cli lookup on a hosted memory
#
# Environment: BUILD (build), MODE (topk, or lookup: a random bfloat16 memory of the widths and
# DIM (256) values a slot, made by pkserve-make-memory and hosted by the server), SIZES_MB
# ("100 1000"), WIDTHS (1024,1024), K (64), STREAMS (2), CONNECTIONS (1), ROWS_PER_REQUEST (64),
# IN_FLIGHT (1: the CLI's --max_in_flight), BENCH_S (10: pkserve-bench's measured seconds),
# SERVER_FLAGS (extra pkserve flags), WORK (a temp folder: inputs and outputs, removed at the end).
#
# Memory: /proc/PID/status of the CLI sampled every 20 ms; RssAnon (anonymous memory: heap,
# stacks, gRPC buffers) must not grow with the input, while VmHWM also counts the file pages of
# the input mapping and of the outputs, which the page cache can take back. Throughput: the CLI's
# rows/s over its whole run (its summary line) against pkserve-bench --mode=stream
# --concurrency=STREAMS --rows=ROWS_PER_REQUEST (one request in flight per stream: with
# IN_FLIGHT=1 both keep the same requests in flight; the CLI's default is 2), run right after each
# CLI run; each size a table row and a JSON line. On a shared host the two drift with the load:
# run it more than once.
set -euo pipefail

BUILD=${BUILD:-build}
MODE=${MODE:-topk}
DIM=${DIM:-256}
IN_FLIGHT=${IN_FLIGHT:-1}
SIZES_MB=${SIZES_MB:-"100 1000"}
WIDTHS=${WIDTHS:-1024,1024}
K=${K:-64}
STREAMS=${STREAMS:-2}
CONNECTIONS=${CONNECTIONS:-1}
ROWS_PER_REQUEST=${ROWS_PER_REQUEST:-64}
BENCH_S=${BENCH_S:-10}
SERVER_FLAGS=${SERVER_FLAGS:-}
WORK=${WORK:-$(mktemp -d /tmp/cli_batch.XXXXXX)}
CLI=$BUILD/client/pkserve-cli
BENCH=$BUILD/client/bench/pkserve-bench
SERVER=$BUILD/server/pkserve
MAKE_MEMORY=$BUILD/server/pkserve-make-memory
[[ $MODE == topk || $MODE == lookup ]] || { echo "cli_batch.sh: MODE is topk or lookup" >&2; exit 2; }
for binary in "$CLI" "$BENCH" "$SERVER" "$MAKE_MEMORY"; do
  [[ -x $binary ]] || { echo "cli_batch.sh: $binary is not built" >&2; exit 2; }
done

server_pid=""
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

memory_flags=()
if [[ $MODE == lookup ]]; then
  "$MAKE_MEMORY" --out="$WORK/memory.safetensors" --widths="${WIDTHS//,/x}" --dim="$DIM" \
    --dtype=bfloat16 >/dev/null
  memory_flags=(--memory="mem=$WORK/memory.safetensors")
fi

# $SERVER on a free loopback port; sets server_pid and target.
# shellcheck disable=SC2086
"$SERVER" --address=127.0.0.1:0 --metrics_address= "${memory_flags[@]}" $SERVER_FLAGS \
  >"$WORK/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
  port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$WORK/server.log" | head -1 | cut -d: -f2 || true)
  [[ -n $port ]] && break
  sleep 0.1
done
[[ -n ${port:-} ]] || { echo "cli_batch.sh: pkserve did not start:" >&2; cat "$WORK/server.log" >&2; exit 1; }
target=127.0.0.1:$port

row_width=$(( $(echo "$WIDTHS" | tr ',' '+') ))
row_bytes=$(( row_width * 2 ))  # bfloat16

# A bfloat16 input of about $1 MB: 1 MiB of standard normal scores, repeated.
make_input() {
  local path=$1 megabytes=$2
  local rows=$(( megabytes * 1000000 / row_bytes ))
  python3 - "$path" "$rows" "$row_width" <<'PY'
import random, struct, sys
path, rows, width = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
header = "{'descr': '<u2', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, width)
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
random.seed(1)
def bf16(x):
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
block_rows = max(1, (1 << 20) // (2 * width))
block = struct.pack("<%dH" % (block_rows * width),
                    *[bf16(random.gauss(0, 1)) for _ in range(block_rows * width)])
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    left = rows
    while left > 0:
        n = min(left, block_rows)
        f.write(block[: n * width * 2])
        left -= n
PY
  echo "$rows"
}

# Runs the CLI on $1, sampling its memory; prints "rows_per_s peak_rss_anon_kib vm_hwm_kib".
run_cli() {
  local input=$1
  local command=(topk --widths="$WIDTHS" --out_values="$WORK/values.npy"
                 --out_slots="$WORK/slots.npy")
  [[ $MODE == lookup ]] && command=(lookup --memory=mem --out="$WORK/values.npy")
  "$CLI" "${command[@]}" --target="$target" --k="$K" --input="$input" --streams="$STREAMS" \
    --connections="$CONNECTIONS" --rows_per_request="$ROWS_PER_REQUEST" \
    --max_in_flight="$IN_FLIGHT" --quiet >"$WORK/cli.out" 2>&1 &
  local pid=$! anon=0 hwm=0 value
  while kill -0 "$pid" 2>/dev/null; do
    if value=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null) && [[ -n $value ]]; then
      (( value > anon )) && anon=$value
      hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo "$hwm")
    fi
    sleep 0.02
  done
  wait "$pid" || { echo "cli_batch.sh: pkserve-cli failed:" >&2; cat "$WORK/cli.out" >&2; exit 1; }
  local rate
  rate=$(grep -o '([0-9]* rows/s' "$WORK/cli.out" | tr -d '(' | cut -d' ' -f1)
  echo "$rate $anon $hwm"
  rm -f "$WORK/values.npy" "$WORK/slots.npy"
}

# pkserve-bench at the same shape, streams, connections and rows per request, for BENCH_S
# seconds; prints its rows/s.
run_bench() {
  local lookup=()
  [[ $MODE == lookup ]] && lookup=(--memory=mem)
  "$BENCH" "${lookup[@]}" --target="$target" --widths="$WIDTHS" --k="$K" --dtype=bf16 \
    --rows="$ROWS_PER_REQUEST" --mode=stream --concurrency="$STREAMS" \
    --connections="$CONNECTIONS" --warmup=1 --duration="$BENCH_S" 2>/dev/null |
    grep -o '"rows_per_s": [0-9.e+]*' | head -1 | awk '{print $2}'
}

printf '%-10s %10s %12s %14s %12s %12s %8s\n' input_MB rows cli_rows/s bench_rows/s ratio \
  RssAnon_KiB VmHWM_KiB
run_bench >/dev/null  # the server's warm-up (thread pools, first batches), not measured
for megabytes in $SIZES_MB; do
  input=$WORK/in_${megabytes}.npy
  rows=$(make_input "$input" "$megabytes")
  read -r rate anon hwm < <(run_cli "$input")
  bench_rate=$(run_bench)  # right after the CLI's run: a busy host drifts
  ratio=$(awk -v a="$rate" -v b="$bench_rate" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')
  printf '%-10s %10s %12s %14.0f %12s %12s %8s\n' "$megabytes" "$rows" "$rate" "$bench_rate" \
    "$ratio" "$anon" "$hwm"
  printf '{"mode": "%s", "input_mb": %s, "rows": %s, "widths": "%s", "k": %s, "dtype": "bf16", "streams": %s, "connections": %s, "rows_per_request": %s, "cli_max_in_flight": %s, "cli_rows_per_s": %s, "bench_rows_per_s": %s, "ratio": %s, "cli_peak_rss_anon_kib": %s, "cli_vm_hwm_kib": %s}\n' \
    "$MODE" "$megabytes" "$rows" "$WIDTHS" "$K" "$STREAMS" "$CONNECTIONS" "$ROWS_PER_REQUEST" "$IN_FLIGHT" "$rate" \
    "$bench_rate" "$ratio" "$anon" "$hwm"
  rm -f "$input"
done
