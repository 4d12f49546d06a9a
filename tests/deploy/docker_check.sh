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
#   - the front's Dockerfile (Dockerfile.front): Debian 12 slim with Debian's haproxy package and
#     nothing built or fetched otherwise, the shipped deploy/haproxy/haproxy.cfg copied in and run
#     by the entrypoint (haproxy -db -f that file), every variable the config reads given a
#     default, non-root, its port exposed and health-checked; no Dockerfile of another kind;
#   - the compose file builds the CPU and front Dockerfiles; clients reach the front's published
#     port, which forwards to pkserve on the compose network, and pkserve's gRPC port is not
#     published; the front's open-files limit covers haproxy.cfg's maxconn; pkserve is
#     health-checked with pkserve-cli, the front starts once it is healthy, and the client, sending
#     through the front, once the front is.
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

# --- the front's Dockerfile ----------------------------------------------------------------------
haproxy_cfg=deploy/haproxy/haproxy.cfg
# The variables haproxy.cfg reads ("${NAME}"), one a line.
cfg_variables=$(grep -v '^[[:space:]]*#' "$source_dir/$haproxy_cfg" 2>/dev/null \
  | grep -oE '\$\{[A-Za-z_][A-Za-z0-9_]*\}' | tr -d '${}' | sort -u)
# HAProxy needs 2 descriptors a connection of its global maxconn, and a few of its own; it refuses to
# start without them (as measured: maxconn 4096 needs 8209).
cfg_maxconn=$(awk '/^global/ { on = 1; next } /^[^[:space:]#]/ { on = 0 }
  on && $1 == "maxconn" { print $2; exit }' "$source_dir/$haproxy_cfg" 2>/dev/null)
front_fds=$(( ${cfg_maxconn:-0} * 2 + 17 ))
front_port=""
check_front_dockerfile() {
  local name=deploy/docker/Dockerfile.front dockerfile=$source_dir/deploy/docker/Dockerfile.front
  if [[ ! -f $dockerfile ]]; then
    fail "$name does not exist"
    return
  fi
  local stages=0 image="" user="" expose="" health="" entrypoint="" cmd="" env="" config="" installs=""
  local instruction rest
  while read -r instruction rest; do
    instruction=${instruction^^}
    case $instruction in
      FROM) stages=$((stages + 1)); read -r image _ <<<"$rest" ;;
      RUN)
        [[ $rest =~ apt-get[[:space:]]+install[[:space:]]([^;&|]*) ]] && installs+=" ${BASH_REMATCH[1]}"
        if [[ $rest =~ (^|[;&|[:space:]])(curl|wget|git|make|cmake|gcc|cc|g\+\+|pip|dpkg[[:space:]]+-i)([[:space:]]|$) ]]; then
          fail "$name fetches or builds something itself (RUN $rest): the front is Debian's haproxy package"
        fi
        ;;
      ADD) fail "$name uses ADD ($rest): only COPY of the shipped config" ;;
      COPY)
        local -a parts
        read -r -a parts <<<"$(copy_paths "$rest")"
        if [[ ${#parts[@]} == 2 && ${parts[0]} == "$haproxy_cfg" ]]; then
          config=${parts[1]}
        else
          fail "$name copies ${parts[*]}: expected only $haproxy_cfg, the config the attack tests run"
        fi
        ;;
      USER) user=$rest ;;
      EXPOSE) expose+=" $rest" ;;
      HEALTHCHECK) health=$rest ;;
      ENTRYPOINT) entrypoint=$rest ;;
      CMD) cmd=$rest ;;
      ENV) env+=" $rest" ;;
    esac
  done < <(instructions "$dockerfile")
  if [[ $stages == 1 && $image == debian:12-slim ]]; then
    ok "$name: one stage, on debian:12-slim"
  else
    fail "$name: expected one stage FROM debian:12-slim, got $stages stage(s), the last on ${image:-none}"
  fi
  local -a package_words
  read -r -a package_words <<<"$installs"
  local package others=""
  for package in "${package_words[@]}"; do
    [[ $package == -* || $package == haproxy ]] || others+=" $package"
  done
  if [[ " $installs " != *" haproxy "* ]]; then
    fail "$name does not apt-get install Debian's haproxy package"
  elif [[ -n $others ]]; then
    fail "$name installs more than haproxy:$others"
  else
    ok "$name installs Debian's haproxy package and nothing else"
  fi
  if [[ -z $config ]]; then
    fail "$name does not copy $haproxy_cfg into the image"
  fi
  local -a run
  read -r -a run <<<"$(words "$entrypoint") $(words "$cmd")"
  local i has_db=false file=""
  for ((i = 0; i < ${#run[@]}; i++)); do
    [[ ${run[i]} == -db ]] && has_db=true
    [[ ${run[i]} == -f ]] && file=${run[i + 1]:-}
  done
  if [[ ${run[0]:-} != haproxy ]]; then
    fail "$name: expected the entrypoint to run haproxy, got: ${run[*]:-nothing}"
  elif [[ -z $config || $file != "$config" ]]; then
    fail "$name: the entrypoint runs haproxy on '${file:-no -f}', not the copied $haproxy_cfg (${config:-not copied})"
  elif ! $has_db; then
    fail "$name: haproxy runs without -db: it would fork into the background and the container exit"
  else
    ok "$name: runs ${run[*]} (the shipped $haproxy_cfg, in the foreground)"
  fi
  local variable bind=""
  for variable in $cfg_variables; do
    if [[ " $env" =~ [[:space:]]$variable=([^[:space:]]+) ]]; then
      ok "$name: ENV $variable=${BASH_REMATCH[1]} (haproxy.cfg reads it)"
      [[ $variable == PKFRONT_BIND ]] && bind=${BASH_REMATCH[1]}
    else
      fail "$name: no ENV default for $variable, which haproxy.cfg reads"
    fi
  done
  [[ -n $cfg_variables ]] || fail "$haproxy_cfg reads no \${...} variable: expected PKFRONT_BIND and PKSERVE_ADDR"
  front_port=$(port_of "${bind:-}")
  if [[ -z $user ]]; then
    fail "$name: no USER: it would run as root"
  elif [[ ${user%%:*} == root || ${user%%:*} == 0 || ! ${user%%:*} =~ ^[0-9]+$ ]]; then
    fail "$name: expected a numeric non-root USER (runAsNonRoot checks it), got $user"
  else
    ok "$name: runs as user $user"
  fi
  if [[ -n $front_port && " $expose " == *" $front_port "* ]]; then
    ok "$name: exposes $front_port, the port of PKFRONT_BIND"
  else
    fail "$name: expected EXPOSE ${front_port:-<the port of PKFRONT_BIND>}, got EXPOSE$expose"
  fi
  if [[ $health != *CMD* ]]; then
    fail "$name: no HEALTHCHECK CMD"
  elif [[ $health == *PKFRONT_BIND* || ( -n $front_port && $health == *"$front_port"* ) ]]; then
    ok "$name: HEALTHCHECK on the front's port: ${health#*CMD }"
  else
    fail "$name: the health check does not look at the front's port (PKFRONT_BIND): ${health#*CMD }"
  fi
}
check_front_dockerfile
for dockerfile in "$source_dir"/deploy/docker/Dockerfile.*; do
  case ${dockerfile##*/Dockerfile.} in
    cpu | cuda | front) ;;
    *) fail "deploy/docker/${dockerfile##*/} is neither a pkserve image (cpu, cuda) nor the front:" \
      "nothing checks it" ;;
  esac
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
  # service NAME: the lines of that service's block.
  service() { awk -v name="$1" '$0 ~ "^  " name ":[[:space:]]*$" { on = 1; next } /^  [^ ]/ { on = 0 } on' "$compose"; }
  # list_items TEXT KEY: the items of the block list KEY (at 4 spaces) in a service's lines, quotes removed.
  list_items() {
    awk -v key="$2" '$0 ~ "^    " key ":[[:space:]]*$" { on = 1; next } on && /^      - / { sub(/^      - /, ""); gsub(/"/, ""); print; next }
      on && /^[[:space:]]*#/ { next } on { on = 0 }' <<<"$1"
  }
  # depends_condition TEXT SERVICE: the condition under depends_on: SERVICE:
  depends_condition() {
    awk -v dep="$2" '/^    depends_on:/ { on = 1; next } on && /^    [^ ]/ { on = 0 }
      on && $0 ~ "^      " dep ":" { d = 1; next } on && d && /condition:/ { print $2; exit } on && /^      [^ ]/ { d = 0 }' <<<"$1"
  }
  context=$(sed -n 's/^[[:space:]]*context:[[:space:]]*//p' "$compose" | sort -u)
  compose_dockerfiles=$(sed -n 's/^[[:space:]]*dockerfile:[[:space:]]*//p' "$compose" | sort -u | tr '\n' ' ')
  context_dir=$(cd "$(dirname "$compose")/$context" 2>/dev/null && pwd)
  front_block=$(service front)
  pkserve_block=$(service pkserve)
  client_block=$(service client)
  if [[ $(wc -l <<<"$context") != 1 || $context_dir != "$source_dir" ]]; then
    fail "docker-compose.yml: expected the build context to be the repository root, got '$context'"
  elif [[ $compose_dockerfiles != "deploy/docker/Dockerfile.cpu deploy/docker/Dockerfile.front " ]]; then
    fail "docker-compose.yml: expected dockerfile: deploy/docker/Dockerfile.cpu (pkserve, client) and" \
      "deploy/docker/Dockerfile.front, got '$compose_dockerfiles'"
  elif ! grep -q 'dockerfile:[[:space:]]*deploy/docker/Dockerfile.front' <<<"$front_block"; then
    fail "docker-compose.yml: expected the front service to build deploy/docker/Dockerfile.front"
  else
    ok "docker-compose.yml builds deploy/docker/Dockerfile.cpu and, for the front, Dockerfile.front, from the repository root"
  fi
  if grep -qE '^[[:space:]]*test:.*pkserve-cli.*health.*--target.*:50051' <<<"$pkserve_block"; then
    ok "docker-compose.yml health-checks pkserve with pkserve-cli health"
  else
    fail "docker-compose.yml: expected a healthcheck test running pkserve-cli health --target ...:50051"
  fi
  # pkserve's own gRPC port stays on the compose network.
  pkserve_address=$(list_items "$pkserve_block" command | sed -n 's/^--address=//p')
  pkserve_port=$(port_of "${pkserve_address:-0.0.0.0:50051}")
  published=$(list_items "$pkserve_block" ports)
  if grep -qE "(^|:)$pkserve_port(/tcp)?$" <<<"$published"; then
    fail "docker-compose.yml publishes pkserve's gRPC port $pkserve_port: clients would pass the front"
  else
    ok "docker-compose.yml does not publish pkserve's gRPC port $pkserve_port (published: $(tr '\n' ' ' <<<"$published"))"
  fi
  if [[ -z $front_block ]]; then
    fail "docker-compose.yml has no front service"
  else
    front_env=$(sed -n 's/^      \([A-Z_]*\):[[:space:]]*"\{0,1\}\([^"]*\)"\{0,1\}$/\1=\2/p' <<<"$front_block")
    compose_bind=$(sed -n 's/^PKFRONT_BIND=//p' <<<"$front_env")
    compose_backend=$(sed -n 's/^PKSERVE_ADDR=//p' <<<"$front_env")
    compose_front_port=$(port_of "${compose_bind:-${front_port:-}}")
    if [[ $compose_backend == "pkserve:$pkserve_port" ]]; then
      ok "docker-compose.yml's front forwards to pkserve:$pkserve_port on the compose network"
    else
      fail "docker-compose.yml's front: expected PKSERVE_ADDR pkserve:$pkserve_port (pkserve's --address" \
        "port), got '${compose_backend:-none}'"
    fi
    if list_items "$front_block" ports | grep -qE ":$compose_front_port(/tcp)?$"; then
      ok "docker-compose.yml publishes the front's port $compose_front_port"
    else
      fail "docker-compose.yml: expected the front to publish its port ${compose_front_port:-?} (PKFRONT_BIND)"
    fi
    nofile=$(awk '/^    ulimits:/ { on = 1; next } on && /^    [^ ]/ { on = 0 }
      on && /hard:/ { print $2; exit } on && /nofile:[[:space:]]*[0-9]/ { print $2; exit }' <<<"$front_block")
    if [[ $nofile =~ ^[0-9]+$ ]] && ((nofile >= front_fds)); then
      ok "docker-compose.yml's front: open-files limit $nofile >= $front_fds (haproxy.cfg's maxconn $cfg_maxconn)"
    else
      fail "docker-compose.yml's front: expected ulimits nofile of $front_fds or more (2 x haproxy.cfg's" \
        "maxconn $cfg_maxconn + 17: HAProxy refuses to start below it), got ${nofile:-none}"
    fi
    [[ $(depends_condition "$front_block" pkserve) == service_healthy ]] \
      && ok "docker-compose.yml starts the front once pkserve is healthy" \
      || fail "docker-compose.yml: expected the front to depend on pkserve with condition: service_healthy"
  fi
  if [[ $(depends_condition "$client_block" front) == service_healthy ]]; then
    ok "docker-compose.yml starts the client once the front is healthy"
  else
    fail "docker-compose.yml: expected the client to depend on front with condition: service_healthy"
  fi
  client_words=" $(list_items "$client_block" command | tr '\n' ' ')"
  want_target=front:${compose_front_port:-50051}
  if grep -q 'entrypoint:.*pkserve-cli' <<<"$client_block" && [[ $client_words == " topk "* ]] \
    && [[ $client_words == *" --target=$want_target "* || $client_words == *" --target $want_target "* ]]; then
    ok "docker-compose.yml's client runs pkserve-cli topk --target $want_target, through the front"
  else
    fail "docker-compose.yml: expected the client service to run pkserve-cli topk --target $want_target"
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
