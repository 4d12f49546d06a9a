#!/usr/bin/env bash
# Checks the front's connection budget with the shipped deploy/haproxy/haproxy.cfg, on loopback:
# haproxy runs it before a pkserve of this build; the check holds as many idle client connections
# as the config's maxconn (defaults, which the frontend inherits) and then expects
#   - a new caller not to be served within 2 s (HAProxy stops accepting: its connection waits in
#     the kernel's listen queue),
#   - that caller to be served within 2 s once 100 of the held connections close,
#   - every held connection to have been accepted and kept (none closed by the front meanwhile).
# gRPC 1.51 has no connection limit of its own, so this budget is the deployments' only one.
# Usage: front_maxconn_check.sh SOURCE_DIR BUILD_DIR [CONNECTIONS]
#   CONNECTIONS replaces the number held (the selftest holds one fewer and expects a failure).
set -uo pipefail

if (($# < 2 || $# > 3)); then
  echo "usage: $0 SOURCE_DIR BUILD_DIR [CONNECTIONS]" >&2
  exit 2
fi
source_dir=$(cd "$1" && pwd)
build_dir=$(cd "$2" && pwd)
config=$source_dir/deploy/haproxy/haproxy.cfg
pkserve=$build_dir/server/pkserve
cli=$build_dir/client/pkserve-cli
haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)
for program in "$pkserve" "$cli" "$haproxy"; do
  if [[ ! -x $program ]]; then
    echo "FAIL: $program is not there (build it; scripts/install-deps.sh installs haproxy)"
    exit 1
  fi
done
budget=$(awk '/^defaults/ { on = 1; next } /^[^[:space:]#]/ { on = 0 }
  on && $1 == "maxconn" { print $2; exit }' "$config")
if [[ ! $budget =~ ^[0-9]+$ ]]; then
  echo "FAIL: $config sets no maxconn in defaults: the front would have no connection budget"
  exit 1
fi
held=${3:-$budget}
# The held connections, the front's 2 a connection and the test's own.
if (($(ulimit -n) < held + 64)); then
  ulimit -n $((held + 64)) 2>/dev/null || {
    echo "FAIL: the open-files limit $(ulimit -n) is below the $held connections to hold"
    exit 1
  }
fi

work=$(mktemp -d)
server_pid=""
front_pid=""
cleanup() {
  # Only the processes this script started.
  local pid
  for pid in "$front_pid" "$server_pid"; do
    [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

"$pkserve" --backend=cpu --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 >"$work/server.log" 2>&1 &
server_pid=$!
pkserve_port=""
for _ in $(seq 1 400); do
  pkserve_port=$(grep -o 'listening on 127\.0\.0\.1:[0-9]*' "$work/server.log" | head -n 1 | grep -o '[0-9]*$')
  [[ -n $pkserve_port ]] && break
  sleep 0.05
done
if [[ -z $pkserve_port ]]; then
  echo "FAIL: pkserve did not start; its log:"
  cat "$work/server.log"
  exit 1
fi

front_port=""
for _ in $(seq 1 20); do
  port=$((20000 + RANDOM % 12000))  # below the kernel's ephemeral range (32768 and up)
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
  # One client address holds all the connections here: its share is set to the whole budget.
  PKFRONT_BIND=127.0.0.1:$port PKSERVE_ADDR=127.0.0.1:$pkserve_port \
    PKFRONT_MAX_CONNECTIONS_PER_CLIENT=$budget \
    "$haproxy" -db -f "$config" >"$work/front.log" 2>&1 &
  front_pid=$!
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && { front_port=$port; break 2; }
    kill -0 "$front_pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$front_pid" 2>/dev/null
  wait "$front_pid" 2>/dev/null
  front_pid=""
done
if [[ -z $front_port ]]; then
  echo "FAIL: haproxy -db -f $config did not start; its log:"
  cat "$work/front.log"
  exit 1
fi
ok "haproxy on the shipped config accepts on 127.0.0.1:$front_port before pkserve on $pkserve_port"
# The probe above was one connection; it has closed. Give the front a moment to count it out.
sleep 0.2

# health: pkserve-cli health through the front within 2 s.
health() { timeout 2 "$cli" health --target "127.0.0.1:$front_port" >"$work/health.log" 2>&1; }
health && ok "a caller is served through the front before the budget is used" \
  || fail "a caller is not served through the front at all: $(cat "$work/health.log")"

fds=()
for ((i = 0; i < held; i++)); do
  exec {fd}<>"/dev/tcp/127.0.0.1/$front_port" || break
  fds+=("$fd")
done
((${#fds[@]} == held)) && ok "holding $held idle connections (the config's maxconn: $budget)" \
  || fail "opened only ${#fds[@]} of $held connections"
sleep 0.5
front_fds=$(ls "/proc/$front_pid/fd" | wc -l)
if health; then
  fail "a new caller was served while $held connections were held: the front's budget is not" \
    "$held (maxconn $budget in $config)"
else
  ok "a new caller is not served within 2 s while $held connections are held"
fi
for fd in "${fds[@]:0:100}"; do exec {fd}<&-; done
if health; then
  ok "the caller is served within 2 s once 100 connections close"
else
  fail "the caller is still not served 2 s after 100 connections closed: $(cat "$work/health.log")"
fi
# The front kept the held connections: its descriptors were at least one a held connection.
((front_fds >= held)) && ok "the front held $front_fds descriptors for the $held connections" \
  || fail "the front had only $front_fds descriptors for $held held connections: it closed some"
for fd in "${fds[@]:100}"; do exec {fd}<&-; done

if ((failures > 0)); then
  echo "FAILED: $failures checks"
  exit 1
fi
echo "PASSED: the front's budget is $budget connections, and it serves again as they close"
