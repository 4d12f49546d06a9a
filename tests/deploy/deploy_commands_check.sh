#!/usr/bin/env bash
# Runs the commands deploy/ gives the binaries, with the binaries of this build and no Docker
# engine, so that a flag deploy/ spells wrong fails here rather than in a container:
#   - each Dockerfile: pkserve with the image's ENTRYPOINT and CMD starts, serves /metrics, passes
#     the image's HEALTHCHECK command, and exits 0 on SIGTERM;
#   - Dockerfile.front: the image's ENTRYPOINT and CMD (haproxy, this host's Debian package) on the
#     file the image copies its config from (deploy/haproxy/haproxy.cfg), with the image's ENV,
#     starts in front of a loopback pkserve, passes the image's HEALTHCHECK command, and passes
#     pkserve-cli health and a topk call through to pkserve;
#   - docker-compose.yml: pkserve with its service's command starts and serves /metrics, the
#     service's healthcheck command reports it healthy; the front service's haproxy, with its
#     environment, forwards to it; and the client service's command (with its entrypoint), sent
#     to the front as written, gets its answer and exits 0.
# The listening addresses are moved to free ports on 127.0.0.1 (--address and --metrics_address,
# given or not, PKFRONT_BIND, PKSERVE_ADDR's host, and the --target of the checks and the
# client); every other word is run as written.
# Usage: deploy_commands_check.sh SOURCE_DIR BUILD_DIR
set -uo pipefail

if (($# != 2)); then
  echo "usage: $0 SOURCE_DIR BUILD_DIR" >&2
  exit 2
fi
source_dir=$(cd "$1" && pwd)
build_dir=$(cd "$2" && pwd)
pkserve=$build_dir/server/pkserve
cli=$build_dir/client/pkserve-cli
for binary in "$pkserve" "$cli"; do
  if [[ ! -x $binary ]]; then
    echo "FAIL: $binary is not built"
    exit 1
  fi
done

haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)
if [[ ! -x $haproxy ]]; then
  echo "FAIL: no haproxy here to run the front's commands with (scripts/install-deps.sh installs it)"
  exit 1
fi

work=$(mktemp -d)
server_pid=""
front_pid=""
cleanup() {
  # Only the server and the front this script started.
  local pid
  for pid in "$server_pid" "$front_pid"; do
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
    fi
  done
  rm -rf "$work"
}
trap cleanup EXIT

failures=0
checks=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
  checks=$((checks + 1))
}
ok() {
  echo "ok: $*"
  checks=$((checks + 1))
}

# instruction DOCKERFILE NAME: the last NAME instruction of the file (continuations joined,
# comments dropped), without the keyword; "" when there is none.
instruction() {
  awk -v name="$2" '
    /^[[:space:]]*#/ { next }
    /^[[:space:]]*$/ { next }
    {
      sub(/^[[:space:]]+/, "")
      line = (line == "") ? $0 : line " " $0
      if (line ~ /\\[[:space:]]*$/) { sub(/[[:space:]]*\\[[:space:]]*$/, "", line); next }
      split(line, parts, /[[:space:]]+/)
      if (toupper(parts[1]) == name) { last = line; sub(/^[^[:space:]]+[[:space:]]+/, "", last) }
      line = ""
    }
    END { print last }
  ' "$1"
}
# words TEXT: the words of a JSON array of strings (["a", "b"]) or of a plain list, one a line.
words() {
  local text=$1
  text=${text#*[}
  text=${text%]*}
  tr ',' '\n' <<<"$text" | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e 's/^"//' -e 's/"$//' |
    grep -v '^$'
}
# compose_list SERVICE KEY: the items of the block list SERVICE.KEY in docker-compose.yml, one a
# line, quotes removed.
compose_list() {
  awk -v service="$1" -v key="$2" '
    $0 ~ "^  " service ":[[:space:]]*$" { in_service = 1; next }
    in_service && /^  [^ ]/ { in_service = 0 }
    in_service && $0 ~ "^    " key ":[[:space:]]*$" { in_key = 1; next }
    in_key && /^      - / { sub(/^      - /, ""); gsub(/^"|"$/, ""); print; next }
    in_key && /^[[:space:]]*#/ { next }
    in_key { in_key = 0 }
  ' "$compose"
}
# compose_value SERVICE SECTION KEY: the value of SERVICE.SECTION.KEY (SECTION "" for
# SERVICE.KEY), as written.
compose_value() {
  awk -v service="$1" -v section="$2" -v key="$3" '
    $0 ~ "^  " service ":[[:space:]]*$" { in_service = 1; next }
    in_service && /^  [^ ]/ { in_service = 0 }
    in_service && section != "" && $0 ~ "^    " section ":[[:space:]]*$" { in_section = 1; next }
    in_section && /^    [^ ]/ { in_section = 0 }
    in_service && ((section == "" && $0 ~ "^    " key ":") || (in_section && $0 ~ "^      " key ":")) {
      sub("^[[:space:]]*" key ":[[:space:]]*", ""); print; exit
    }
  ' "$compose"
}

# local_words FLAG-NAME VALUE WORD...: the words with FLAG-NAME's value replaced by VALUE, in
# both spellings (--flag=value and --flag value); printed one a line.
local_words() {
  local flag=$1 value=$2 replace_next=false word
  shift 2
  for word in "$@"; do
    if $replace_next; then
      echo "$value"
      replace_next=false
    elif [[ $word == "--$flag="* ]]; then
      echo "--$flag=$value"
    elif [[ $word == "--$flag" ]]; then
      echo "$word"
      replace_next=true
    else
      echo "$word"
    fi
  done
}

# scrape PORT: the body of GET /metrics on 127.0.0.1:PORT (plain HTTP/1.0 through bash).
scrape() {
  local fd response
  exec {fd}<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&"$fd"
  response=$(timeout 5 cat <&"$fd")
  exec {fd}<&-
  printf '%s\n' "$response"
}

grpc_port=""
metrics_port=""
# start_server WHAT FLAG...: starts pkserve with the flags (addresses moved to 127.0.0.1:0) and
# waits until it serves both ports; false (with a FAIL) when it does not.
start_server() {
  local what=$1
  shift
  local -a flags=("$@")
  local flag
  for flag in address metrics_address; do
    # Moved where given; added where the default (0.0.0.0) would be used.
    if [[ " ${flags[*]} " == *" --$flag="* || " ${flags[*]} " == *" --$flag "* ]]; then
      mapfile -t flags < <(local_words "$flag" 127.0.0.1:0 "${flags[@]}")
    else
      flags+=("--$flag=127.0.0.1:0")
    fi
  done
  "$pkserve" "${flags[@]}" >"$work/server.log" 2>&1 &
  server_pid=$!
  grpc_port=""
  metrics_port=""
  for _ in $(seq 1 400); do
    grpc_port=$(grep -o 'listening on 127\.0\.0\.1:[0-9]*' "$work/server.log" | head -n 1 | grep -o '[0-9]*$')
    metrics_port=$(grep -o 'metrics on http://127\.0\.0\.1:[0-9]*' "$work/server.log" | head -n 1 | grep -o '[0-9]*$')
    [[ -n $grpc_port && -n $metrics_port ]] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  if [[ -z $grpc_port || -z $metrics_port ]]; then
    fail "$what: pkserve ${flags[*]} did not start serving gRPC and metrics; its log:"
    sed 's/^/    /' "$work/server.log"
    stop_server
    return 1
  fi
  ok "$what: pkserve ${flags[*]} serves gRPC on $grpc_port, metrics on $metrics_port"
  local metrics
  metrics=$(scrape "$metrics_port")
  if grep -q '^pkserve_build_info{version=' <<<"$metrics"; then
    ok "$what: GET /metrics answers with pkserve's metrics"
  else
    fail "$what: GET /metrics on 127.0.0.1:$metrics_port does not answer with pkserve's metrics"
  fi
}

# stop_server: SIGTERM, then its exit status in server_status (SIGKILL after 30 s).
server_status=""
stop_server() {
  kill -TERM "$server_pid" 2>/dev/null
  for _ in $(seq 1 600); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid"
  fi
  wait "$server_pid"
  server_status=$?
  server_pid=""
}

# run_cli WHAT EXPECT WORD...: runs a pkserve-cli command line (its first word pkserve-cli, the
# rest as given, --target moved to the server), expecting exit 0 and EXPECT in its output.
run_cli() {
  local what=$1 expect=$2 output status
  shift 2
  if [[ ${1:-} != pkserve-cli ]]; then
    fail "$what: expected a pkserve-cli command, got: $*"
    return
  fi
  shift
  local -a args
  mapfile -t args < <(local_words target "127.0.0.1:${cli_port:-$grpc_port}" "$@")
  output=$(timeout 60 "$cli" "${args[@]}" 2>&1)
  status=$?
  if ((status == 0)) && grep -q -- "$expect" <<<"$output"; then
    ok "$what: pkserve-cli ${args[*]} exits 0"
  else
    fail "$what: pkserve-cli ${args[*]} exited $status (2: bad usage, 1: the call failed):" \
      "$(tr '\n' ' ' <<<"$output")"
  fi
}

# free_port: a port on 127.0.0.1 that nothing listens on (a connect is refused), below the
# kernel's ephemeral range (32768 and up), where the other tests' servers and clients get theirs.
free_port() {
  local port
  for _ in $(seq 1 100); do
    port=$((20000 + RANDOM % 12000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return 0; }
  done
  return 1
}

# start_front WHAT BACKEND WORD...: runs the command WORD... (haproxy and its arguments) with
# PKFRONT_BIND on a free 127.0.0.1 port and PKSERVE_ADDR=BACKEND, and waits until it accepts
# connections; front_port is its port. A port that another process took between free_port's
# check and haproxy's bind ("Address already in use") is tried again with another, at most five
# times. False (with a FAIL) when it does not start.
front_port=""
start_front() {
  local what=$1 backend=$2
  shift 2
  if [[ ${1:-} != haproxy ]]; then
    fail "$what: expected the front's command to be haproxy, got: $*"
    return 1
  fi
  shift
  for _ in 1 2 3 4 5; do
    front_port=$(free_port)
    PKFRONT_BIND=127.0.0.1:$front_port PKSERVE_ADDR=$backend "$haproxy" "$@" >"$work/front.log" 2>&1 &
    front_pid=$!
    for _ in $(seq 1 200); do
      (exec 3<>"/dev/tcp/127.0.0.1/$front_port") 2>/dev/null && break
      kill -0 "$front_pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -0 "$front_pid" 2>/dev/null && break
    grep -q 'Address already in use' "$work/front.log" || break
    stop_front
  done
  if ! kill -0 "$front_pid" 2>/dev/null \
    || ! (exec 3<>"/dev/tcp/127.0.0.1/$front_port") 2>/dev/null; then
    fail "$what: haproxy $* (PKFRONT_BIND=127.0.0.1:$front_port PKSERVE_ADDR=$backend) did not" \
      "start accepting; its log: $(tr '\n' ' ' <"$work/front.log")"
    stop_front
    return 1
  fi
  ok "$what: haproxy $* accepts on 127.0.0.1:$front_port, forwarding to $backend"
}
# stop_front: SIGTERM (HAProxy stops at once), SIGKILL after 5 s.
stop_front() {
  [[ -n $front_pid ]] || return 0
  kill -TERM "$front_pid" 2>/dev/null
  for _ in $(seq 1 100); do
    kill -0 "$front_pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -0 "$front_pid" 2>/dev/null && kill -KILL "$front_pid"
  wait "$front_pid" 2>/dev/null
  front_pid=""
}

# --- the front's Dockerfile -----------------------------------------------------------------------
# The image's command, its config path mapped to the file the image copies it from, before a
# pkserve started with the CPU image's command.
check_front_image() {
  local dockerfile=$1 name=deploy/docker/$(basename "$1")
  local -a entrypoint cmd command copy health_words
  mapfile -t entrypoint < <(words "$(instruction "$dockerfile" ENTRYPOINT)")
  mapfile -t cmd < <(words "$(instruction "$dockerfile" CMD)")
  read -r -a copy <<<"$(instruction "$dockerfile" COPY)"
  local source=${copy[0]:-} destination=${copy[1]:-} word
  if [[ ${#copy[@]} != 2 || ! -f $source_dir/$source ]]; then
    fail "$name: expected one COPY of a config file from the sources, got: ${copy[*]}"
    return
  fi
  for word in "${entrypoint[@]}" "${cmd[@]}"; do
    [[ $word == "$destination" ]] && word=$source_dir/$source
    command+=("$word")
  done
  mapfile -t pkserve_cmd < <(words "$(instruction "$source_dir/deploy/docker/Dockerfile.cpu" CMD)")
  start_server "$name (pkserve behind it)" "${pkserve_cmd[@]}" || return
  if start_front "$name" "127.0.0.1:$grpc_port" "${command[@]}"; then
    # The image's health check, with the image's PKFRONT_BIND moved to the front's port.
    local health
    health=$(instruction "$dockerfile" HEALTHCHECK)
    mapfile -t health_words < <(words "${health#*CMD }")
    if ((${#health_words[@]} > 0)) && PKFRONT_BIND=127.0.0.1:$front_port timeout 10 "${health_words[@]}" \
      >"$work/health.log" 2>&1; then
      ok "$name HEALTHCHECK: ${health_words[*]} exits 0"
    else
      fail "$name HEALTHCHECK: '${health_words[*]}' failed against the running front:" \
        "$(tr '\n' ' ' <"$work/health.log" 2>/dev/null)"
    fi
    cli_port=$front_port
    run_cli "$name: pkserve's health through the front" SERVING pkserve-cli health --target front
    run_cli "$name: a call through the front" "row 0:" pkserve-cli topk --target front \
      --widths=1024,1024 --k=8 --dtype=bfloat16 --random_rows=2
    cli_port=""
    stop_front
  fi
  stop_server
}

# --- the Dockerfiles ------------------------------------------------------------------------------
for dockerfile in "$source_dir"/deploy/docker/Dockerfile.*; do
  name=deploy/docker/$(basename "$dockerfile")
  if [[ $name == */Dockerfile.front ]]; then
    check_front_image "$dockerfile"
    continue
  fi
  mapfile -t entrypoint < <(words "$(instruction "$dockerfile" ENTRYPOINT)")
  mapfile -t cmd < <(words "$(instruction "$dockerfile" CMD)")
  health=$(instruction "$dockerfile" HEALTHCHECK)
  if [[ ${entrypoint[*]} != pkserve ]]; then
    fail "$name: expected ENTRYPOINT [\"pkserve\"], got '${entrypoint[*]}'"
    continue
  fi
  start_server "$name" "${cmd[@]}" || continue
  mapfile -t health_words < <(words "${health#*CMD }")
  run_cli "$name HEALTHCHECK" SERVING "${health_words[@]}"
  stop_server
  ((server_status == 0)) && ok "$name: pkserve exits 0 on SIGTERM" \
    || fail "$name: pkserve exited $server_status on SIGTERM; its log: $(tail -n 5 "$work/server.log")"
done

# --- the compose file -----------------------------------------------------------------------------
compose=$source_dir/deploy/docker-compose.yml
if [[ ! -f $compose ]]; then
  fail "deploy/docker-compose.yml does not exist"
else
  mapfile -t server_command < <(compose_list pkserve command)
  mapfile -t health_words < <(words "$(compose_value pkserve healthcheck test)")
  client_entrypoint=$(compose_value client "" entrypoint)
  mapfile -t client_command < <(compose_list client command)
  if ((${#server_command[@]} == 0 || ${#client_command[@]} == 0)); then
    fail "docker-compose.yml: expected block lists 'command:' for pkserve and client"
  elif start_server "docker-compose.yml pkserve" "${server_command[@]}"; then
    # The health check's test: ["CMD", program, args...].
    [[ ${health_words[0]:-} == CMD ]] && health_words=("${health_words[@]:1}")
    run_cli "docker-compose.yml pkserve healthcheck" SERVING "${health_words[@]}"
    # The front with its service's environment: PKSERVE_ADDR pkserve:PORT must name pkserve's
    # --address port; it is run against this pkserve.
    front_backend=$(compose_value front environment PKSERVE_ADDR | tr -d '"')
    server_address=$(printf '%s\n' "${server_command[@]}" | sed -n 's/^--address=//p' | head -n 1)
    mapfile -t front_command < <(words "$(instruction "$source_dir/deploy/docker/Dockerfile.front" ENTRYPOINT)")
    front_config=$(instruction "$source_dir/deploy/docker/Dockerfile.front" COPY)
    read -r config_source config_destination <<<"$front_config"
    for ((i = 0; i < ${#front_command[@]}; i++)); do
      [[ ${front_command[i]} == "${config_destination:-}" ]] && front_command[i]=$source_dir/$config_source
    done
    if [[ $front_backend != "pkserve:${server_address##*:}" ]]; then
      fail "docker-compose.yml front: PKSERVE_ADDR '$front_backend' is not pkserve:${server_address##*:}," \
        "the service and port of pkserve's --address"
    elif start_front "docker-compose.yml front" "127.0.0.1:$grpc_port" "${front_command[@]}"; then
      mapfile -t client_program < <(words "$client_entrypoint")
      client_target=$(printf '%s\n' "${client_command[@]}" | sed -n 's/^--target=//p' | head -n 1)
      if [[ $client_target == front:* ]]; then
        cli_port=$front_port
        run_cli "docker-compose.yml client (through the front)" "row 0:" "${client_program[@]}" \
          "${client_command[@]}"
        cli_port=""
      else
        fail "docker-compose.yml client: --target=$client_target does not go through the front service"
      fi
      stop_front
    fi
    stop_server
    ((server_status == 0)) && ok "docker-compose.yml pkserve: exits 0 on SIGTERM" \
      || fail "docker-compose.yml pkserve: exited $server_status on SIGTERM"
  fi
fi

if ((failures > 0)); then
  echo "FAILED: $failures of $checks checks"
  exit 1
fi
echo "PASSED: all $checks checks"
