#!/usr/bin/env bash
# Checks, without a Docker engine, what can be checked of deploy/docker and deploy/docker-compose.yml:
#   - each Dockerfile builds the README's way: its build stage (the one named build) runs
#     scripts/install-deps.sh and then `make build` (a target the Makefile has), and nothing else
#     that compiles (no second way); both build on Debian 12 and run on Debian 12 slim, the CUDA
#     image with the toolkit copied in from NVIDIA's devel image and the NVIDIA runtime settings;
#   - every file a runtime stage copies from the build stage is one the build makes: the binaries
#     exist in a real build tree (BUILD_DIR, the same layout as the image's), the rest is written
#     by a RUN of the build stage; and runtime-packages.sh resolves every library they load;
#   - the runtime stage runs as a non-root user, exposes the gRPC and metrics ports, and checks its
#     health with `pkserve-cli health` on the port its --address serves;
#   - the build context: every COPY source exists and .dockerignore keeps build trees and .git out;
#   - the compose file builds the CPU Dockerfile, health-checks pkserve with pkserve-cli, and starts
#     the client only once pkserve is healthy.
# Usage: docker_check.sh SOURCE_DIR BUILD_DIR [--require-binaries]
#   Without --require-binaries, binaries missing from BUILD_DIR are skipped with a note; with it
#   (CTest passes it once the server and client are part of the build) they are failures.
set -uo pipefail

if (($# < 2 || $# > 3)) || { (($# == 3)) && [[ $3 != --require-binaries ]]; }; then
  echo "usage: $0 SOURCE_DIR BUILD_DIR [--require-binaries]" >&2
  exit 2
fi
source_dir=$(cd "$1" && pwd)
build_dir=$2
require_binaries=false
(($# == 3)) && require_binaries=true

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

# instructions DOCKERFILE: one line an instruction, continuations joined, comments dropped (as
# Docker reads it: a comment line inside a continuation is dropped too).
instructions() {
  awk '
    /^[[:space:]]*#/ { next }
    /^[[:space:]]*$/ { next }
    {
      sub(/^[[:space:]]+/, "")
      line = (line == "") ? $0 : line " " $0
      if (line ~ /\\[[:space:]]*$/) { sub(/[[:space:]]*\\[[:space:]]*$/, "", line); next }
      print line
      line = ""
    }
    END { if (line != "") print line }
  ' "$1"
}
# words JSON-OR-SHELL-FORM: the words of ["a", "b"] or of a b
words() { tr -d '[],"' <<<"$1"; }
port_of() { echo "${1##*:}"; }
# copy_paths COPY-ARGUMENTS: the sources and the destination, without the --options
copy_paths() { words "$1" | tr ' ' '\n' | grep -v '^--' | tr '\n' ' '; }

# --- the Makefile's build ------------------------------------------------------------------------
makefile=$source_dir/Makefile
default_build_dir=$(sed -n 's/^BUILD_DIR[[:space:]]*?=[[:space:]]*//p' "$makefile" | head -n 1)
if grep -q '^build:' "$makefile" && [[ -n $default_build_dir ]]; then
  ok "the Makefile has a build target, building in BUILD_DIR=$default_build_dir by default"
else
  fail "expected the Makefile to have a 'build:' target and a 'BUILD_DIR ?=' default"
  default_build_dir=build
fi

# --- each Dockerfile -----------------------------------------------------------------------------
check_dockerfile() {
  local flavour=$1 dockerfile=$source_dir/deploy/docker/Dockerfile.$1
  local name=deploy/docker/Dockerfile.$1
  if [[ ! -f $dockerfile ]]; then
    fail "$name does not exist"
    return
  fi
  local stage=-1 build_stage=-1 instruction rest
  local -a stage_names=() stage_images=() stage_workdirs=() build_copies_from=()
  local deps_at=0 build_at=0 line_number=0 make_line="" generated="" build_dir_name
  local -a final_lines=()
  while read -r instruction rest; do
    line_number=$((line_number + 1))
    instruction=${instruction^^}
    if [[ $instruction == FROM ]]; then
      stage=$((stage + 1))
      read -r image _ alias <<<"$rest"
      stage_images[stage]=$image
      stage_names[stage]=${alias:-}
      stage_workdirs[stage]=/
      [[ ${alias:-} == build ]] && ((build_stage < 0)) && build_stage=$stage
      final_lines=()
      continue
    fi
    ((stage >= 0)) || continue
    final_lines+=("$instruction $rest")
    case $instruction in
      WORKDIR) stage_workdirs[stage]=$rest ;;
      RUN)
        if ((stage == build_stage)); then
          [[ $rest == *scripts/install-deps.sh* && $deps_at == 0 ]] && deps_at=$line_number
          if [[ $rest =~ (^|[;&|[:space:]])make[[:space:]]([^;&|]*[[:space:]])?build([[:space:]]|$) ]]; then
            build_at=$line_number
            make_line=$rest
          fi
          if [[ $rest =~ cmake[[:space:]]+--build|cmake[[:space:]]+-[SB]|(^|[[:space:]])(ninja|g\+\+|c\+\+|nvcc)[[:space:]] ]]; then
            fail "$name builds outside 'make build': RUN $rest"
          fi
          generated+=$(grep -oE '>[[:space:]]*[^[:space:];&|]+' <<<"$rest" | tr -d '> ')$'\n'
        fi
        ;;
      COPY)
        # What the build stage takes from other stages or images: "stage-or-image source".
        if ((stage == build_stage)) && [[ " $rest" =~ [[:space:]]--from=([^[:space:]]+) ]]; then
          local from=${BASH_REMATCH[1]} copied
          copied=$(copy_paths "$rest" | awk '{ print $1 }')
          build_copies_from+=("$from $copied")
        fi
        ;;
    esac
  done < <(instructions "$dockerfile")

  if ((build_stage < 0)); then
    fail "$name: expected a build stage named build, got stages: ${stage_names[*]}"
    return
  fi
  if ((stage <= build_stage)); then
    fail "$name: expected a runtime stage after the build stage"
    return
  fi
  ok "$name: a stage named build (${stage_images[build_stage]}), then the runtime stage"
  local build_image=${stage_images[build_stage]} run_image=${stage_images[stage]}
  case $flavour in
    cpu) [[ $build_image == debian:12 && $run_image == debian:12-slim ]] \
      && ok "$name: built on debian:12, runs on debian:12-slim" \
      || fail "$name: expected debian:12 to build and debian:12-slim to run, got $build_image," \
        "$run_image" ;;
    cuda)
      # Ubuntu 24.04 (under NVIDIA's images) has no grpc-proto, which the build needs: Debian 12
      # builds and runs, and only the toolkit comes from NVIDIA's devel image.
      [[ $build_image == debian:12 && $run_image == debian:12-slim ]] \
        && ok "$name: built on debian:12, runs on debian:12-slim" \
        || fail "$name: expected debian:12 to build and debian:12-slim to run (Ubuntu 24.04 has" \
          "no grpc-proto), got $build_image, $run_image"
      local toolkit="" copy from_stage i
      for copy in "${build_copies_from[@]}"; do
        read -r from_stage source <<<"$copy"
        [[ $source == /usr/local/cuda* ]] || continue
        for ((i = 0; i < ${#stage_names[@]}; i++)); do
          [[ ${stage_names[i]} == "$from_stage" || $i == "$from_stage" ]] && from_stage=${stage_images[i]}
        done
        [[ $from_stage == nvidia/cuda:*devel* ]] && toolkit="$source from $from_stage" && break
      done
      [[ -n $toolkit ]] && ok "$name: the build stage copies the CUDA toolkit: $toolkit" \
        || fail "$name: the build stage copies no /usr/local/cuda from an nvidia/cuda devel image:" \
          "nvcc would be missing" ;;
  esac
  if ((deps_at == 0)); then
    fail "$name: the build stage never runs scripts/install-deps.sh"
  elif ((build_at == 0)); then
    fail "$name: the build stage never runs 'make build'"
  elif ((deps_at > build_at)); then
    fail "$name: runs scripts/install-deps.sh only after 'make build'"
  else
    ok "$name: the build stage runs scripts/install-deps.sh, then: make ${make_line#*make }"
  fi
  if [[ $flavour == cuda ]]; then
    [[ $make_line == *-DPK_WITH_CUDA=ON* ]] && ok "$name: requires the CUDA backend (-DPK_WITH_CUDA=ON)" \
      || fail "$name: 'make build' does not pass -DPK_WITH_CUDA=ON: a missing nvcc would quietly" \
        "give a CPU-only image"
  fi
  build_dir_name=$default_build_dir
  [[ $make_line =~ BUILD_DIR=([^[:space:]]+) ]] && build_dir_name=${BASH_REMATCH[1]}
  local build_workdir=${stage_workdirs[build_stage]%/}
  local image_build_dir=$build_workdir/$build_dir_name

  # The runtime stage.
  local user="" expose="" health="" cmd="" entrypoint="" env="" copied_binaries=0 line
  for line in "${final_lines[@]}"; do
    read -r instruction rest <<<"$line"
    case $instruction in
      USER) user=$rest ;;
      EXPOSE) expose+=" $rest" ;;
      HEALTHCHECK) health=$rest ;;
      CMD) cmd=$rest ;;
      ENTRYPOINT) entrypoint=$rest ;;
      ENV) env+=" $rest" ;;
      COPY)
        [[ " $rest" == *" --from=build "* || " $rest" == *" --from=0 "* ]] || continue
        local -a parts
        read -r -a parts <<<"$(copy_paths "$rest")"
        local n=${#parts[@]} source
        for source in "${parts[@]:0:n-1}"; do
          if [[ $source == "$image_build_dir"/* ]]; then
            local relative=${source#"$image_build_dir"/}
            copied_binaries=$((copied_binaries + 1))
            if [[ -x $build_dir/$relative && -f $build_dir/$relative ]]; then
              ok "$name copies $source: the build makes $build_dir/$relative"
            elif $require_binaries; then
              fail "$name copies $source, but the build did not make $build_dir/$relative"
            else
              echo "SKIP: $name copies $source; $build_dir/$relative is not built here" \
                "(no server/client build yet), so its existence is not checked"
            fi
          elif grep -qxF "$source" <<<"$generated"; then
            ok "$name copies $source, which a RUN of the build stage writes"
          elif [[ $source == "$build_workdir"/* && -e $source_dir/${source#"$build_workdir"/} ]]; then
            ok "$name copies $source from the sources"
          else
            fail "$name copies $source from the build stage, which neither the build nor a RUN" \
              "makes (the build tree there is $image_build_dir)"
          fi
        done
        ;;
    esac
  done
  ((copied_binaries >= 2)) || fail "$name: expected the runtime stage to copy pkserve and" \
    "pkserve-cli from $image_build_dir, it copies $copied_binaries file(s) from there"
  if [[ -z $user ]]; then
    fail "$name: the runtime stage has no USER: it would run as root"
  elif [[ ${user%%:*} == root || ${user%%:*} == 0 ]]; then
    fail "$name: the runtime stage runs as $user"
  else
    ok "$name: runs as user $user"
  fi
  [[ $entrypoint == *pkserve* ]] && ok "$name: entrypoint $entrypoint" \
    || fail "$name: expected ENTRYPOINT pkserve, got '${entrypoint:-none}'"
  if [[ $flavour == cuda ]]; then
    # Without these the NVIDIA Container Toolkit mounts no driver into a non-NVIDIA base image.
    local setting
    for setting in NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute; do
      [[ " $env" =~ [[:space:]]${setting}[,[:space:]] || " $env " == *" $setting "* ]] \
        && ok "$name: the runtime stage sets $setting" \
        || fail "$name: the runtime stage does not set $setting (the NVIDIA Container Toolkit" \
          "would give it no GPU)"
    done
  fi

  local address="" metrics="" word
  for word in $(words "$cmd"); do
    case $word in
      --address=*) address=${word#*=} ;;
      --metrics_address=*) metrics=${word#*=} ;;
    esac
  done
  local grpc_port metrics_port
  grpc_port=$(port_of "${address:-0.0.0.0:50051}")
  metrics_port=$(port_of "${metrics:-0.0.0.0:9090}")
  for port in "$grpc_port" "$metrics_port"; do
    [[ " $expose " == *" $port "* ]] && ok "$name: exposes $port" \
      || fail "$name: expected EXPOSE $port (the gRPC and metrics ports), got EXPOSE$expose"
  done
  local -a health_words
  read -r -a health_words <<<"$(words "${health#*CMD }")"
  if [[ $health != *CMD* ]]; then
    fail "$name: no HEALTHCHECK CMD"
  elif [[ ${health_words[0]:-} != pkserve-cli || ${health_words[1]:-} != health ]]; then
    fail "$name: expected the health check to run 'pkserve-cli health', got: ${health#*CMD }"
  else
    local target=""
    for ((i = 0; i < ${#health_words[@]}; i++)); do
      [[ ${health_words[i]} == --target ]] && target=${health_words[i + 1]:-}
      [[ ${health_words[i]} == --target=* ]] && target=${health_words[i]#--target=}
    done
    if [[ $(port_of "$target") == "$grpc_port" ]]; then
      ok "$name: HEALTHCHECK pkserve-cli health --target $target, the port of --address"
    else
      fail "$name: the health check targets '$target', not the gRPC port $grpc_port"
    fi
  fi
}

for flavour in cpu cuda; do
  check_dockerfile "$flavour"
done

# --- the build context ---------------------------------------------------------------------------
dockerignore=$source_dir/.dockerignore
if [[ ! -f $dockerignore ]]; then
  fail ".dockerignore does not exist: host build trees and .git would go into the context"
else
  grep -qE '^/?build(\*)?/?$' "$dockerignore" && ok ".dockerignore leaves out build trees" \
    || fail ".dockerignore does not leave out build trees (build*/)"
  grep -qE '^/?\.git/?$' "$dockerignore" && ok ".dockerignore leaves out .git" \
    || fail ".dockerignore does not leave out .git"
fi
for dockerfile in "$source_dir"/deploy/docker/Dockerfile.*; do
  while read -r instruction rest; do
    [[ ${instruction^^} == COPY && " $rest" != *" --from="* ]] || continue
    read -r -a parts <<<"$(copy_paths "$rest")"
    for source in "${parts[@]:0:${#parts[@]}-1}"; do
      [[ -e $source_dir/$source ]] && continue
      fail "$(basename "$dockerfile") copies $source from the context; there is no such path"
    done
  done < <(instructions "$dockerfile")
done

# --- what the runtime stages install -------------------------------------------------------------
binaries=("$build_dir/server/pkserve" "$build_dir/client/pkserve-cli")
if [[ -f ${binaries[0]} && -f ${binaries[1]} ]]; then
  if packages=$("$source_dir/deploy/docker/runtime-packages.sh" "${binaries[@]}" 2>&1); then
    ok "runtime-packages.sh resolves every library of pkserve and pkserve-cli:" $packages
  else
    fail "runtime-packages.sh cannot resolve the binaries' libraries: $packages"
  fi
elif $require_binaries; then
  fail "no ${binaries[*]} to read the runtime packages off"
else
  echo "SKIP: no ${binaries[*]} here, so runtime-packages.sh is not tried on them"
fi

# --- compose -------------------------------------------------------------------------------------
compose=$source_dir/deploy/docker-compose.yml
if [[ ! -f $compose ]]; then
  fail "deploy/docker-compose.yml does not exist"
else
  context=$(sed -n 's/^[[:space:]]*context:[[:space:]]*//p' "$compose" | sort -u)
  compose_dockerfiles=$(sed -n 's/^[[:space:]]*dockerfile:[[:space:]]*//p' "$compose" | sort -u)
  context_dir=$(cd "$(dirname "$compose")/$context" 2>/dev/null && pwd)
  if [[ $(wc -l <<<"$context") != 1 || $context_dir != "$source_dir" ]]; then
    fail "docker-compose.yml: expected the build context to be the repository root, got '$context'"
  elif [[ $compose_dockerfiles != deploy/docker/Dockerfile.cpu ]]; then
    fail "docker-compose.yml: expected dockerfile: deploy/docker/Dockerfile.cpu, got '$compose_dockerfiles'"
  else
    ok "docker-compose.yml builds deploy/docker/Dockerfile.cpu from the repository root"
  fi
  if grep -qE '^[[:space:]]*test:.*pkserve-cli.*health.*--target.*:50051' "$compose"; then
    ok "docker-compose.yml health-checks pkserve with pkserve-cli health"
  else
    fail "docker-compose.yml: expected a healthcheck test running pkserve-cli health --target ...:50051"
  fi
  if grep -qE '^[[:space:]]*condition:[[:space:]]*service_healthy' "$compose"; then
    ok "docker-compose.yml starts the client once pkserve is healthy"
  else
    fail "docker-compose.yml: expected the client to depend on pkserve with condition: service_healthy"
  fi
  client_command=$(awk '/^  client:/ { on = 1; next } /^  [^ ]/ { on = 0 } on' "$compose" | tr -d '"')
  client_words=" $(sed -n 's/^[[:space:]]*- //p' <<<"$client_command" | tr '\n' ' ')"
  if grep -q 'entrypoint:.*pkserve-cli' <<<"$client_command" && [[ $client_words == " topk "* ]] \
    && [[ $client_words == *" --target=pkserve:50051 "* || $client_words == *" --target pkserve:50051 "* ]]; then
    ok "docker-compose.yml's client runs pkserve-cli topk --target pkserve:50051"
  else
    fail "docker-compose.yml: expected the client service to run pkserve-cli topk --target pkserve:50051"
  fi
  if docker compose version >/dev/null 2>&1; then
    if errors=$(docker compose -f "$compose" config --quiet 2>&1); then
      ok "docker compose config accepts docker-compose.yml"
    else
      fail "docker compose config rejects docker-compose.yml: $errors"
    fi
  else
    echo "note: no 'docker compose' here; docker-compose.yml was checked as text only"
  fi
fi

if ((failures > 0)); then
  echo "FAILED: $failures of $checks checks"
  exit 1
fi
echo "PASSED: all $checks checks"
