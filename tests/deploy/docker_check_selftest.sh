#!/usr/bin/env bash
# Shows that docker_check.sh fails where it should: copies the files it reads (Makefile,
# scripts/install-deps.sh, deploy/, .dockerignore) and a stand-in build tree (pkserve and
# pkserve-cli are copies of a system program, so that ldd and dpkg have a real binary to read) to a
# temporary folder, breaks one thing at a time with sed, and expects a FAIL line naming it.
# The unbroken copy must pass first.
# Usage: docker_check_selftest.sh SOURCE_DIR
set -uo pipefail

if (($# != 1)); then
  echo "usage: $0 SOURCE_DIR" >&2
  exit 2
fi
source_dir=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
check=$here/docker_check.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

stand_in=$(type -P true)
make_copy() {
  rm -rf "$work/src" "$work/build"
  mkdir -p "$work/src/scripts" "$work/build/server" "$work/build/client"
  cp "$source_dir/Makefile" "$source_dir/.dockerignore" "$work/src/"
  cp "$source_dir/scripts/install-deps.sh" "$work/src/scripts/"
  cp -R "$source_dir/deploy" "$work/src/deploy"
  cp "$stand_in" "$work/build/server/pkserve"
  cp "$stand_in" "$work/build/client/pkserve-cli"
}

failures=0
passed=0
# run_case NAME FILE SED-SCRIPT EXPECTED-REGEX   (FILE relative to the source copy, or to the
# build copy when it starts with build/; a sed script of "rm" removes the file, one of "cp:NAME"
# copies it to NAME beside it)
run_case() {
  local name=$1 file=$2 script=$3 expected=$4 path
  make_copy
  path=$work/src/$file
  [[ $file == build/* ]] && path=$work/$file
  if [[ $script == rm ]]; then
    rm "$path"
  elif [[ $script == cp:* ]]; then
    cp "$path" "$(dirname "$path")/${script#cp:}"
  else
    cp "$path" "$work/before"
    sed -i -e "$script" "$path"
    if cmp -s "$work/before" "$path"; then
      echo "FAIL: $name: the sed script '$script' changed nothing in $file (fix this test)"
      failures=$((failures + 1))
      return
    fi
  fi
  local output status
  output=$("$check" "$work/src" "$work/build" --require-binaries 2>&1)
  status=$?
  if ((status == 0)); then
    echo "FAIL: $name: expected docker_check.sh to fail, it passed"
    failures=$((failures + 1))
  elif ! grep -E '^FAIL' <<<"$output" | grep -qE "$expected"; then
    echo "FAIL: $name: expected a FAIL line matching /$expected/, got:"
    grep -E '^FAIL' <<<"$output" | sed 's/^/    /'
    failures=$((failures + 1))
  else
    echo "ok: caught $name: $(grep -E '^FAIL' <<<"$output" | grep -E "$expected" | head -n 1)"
    passed=$((passed + 1))
  fi
}

make_copy
if ! output=$("$check" "$work/src" "$work/build" --require-binaries 2>&1); then
  echo "FAIL: the unbroken copy does not pass docker_check.sh:"
  echo "$output" | sed 's/^/    /'
  exit 1
fi
echo "ok: the unbroken copy passes"

cpu=deploy/docker/Dockerfile.cpu
cuda=deploy/docker/Dockerfile.cuda
compose=deploy/docker-compose.yml
run_case "no install-deps.sh" $cpu '/^RUN scripts\/install-deps.sh/d' \
  'never runs scripts/install-deps.sh'
run_case "a second way to build" $cuda \
  's/RUN make build CMAKE_FLAGS=/RUN cmake -S . -B build -G Ninja \&\& cmake --build build \&\& echo /' \
  "builds outside 'make build'"
run_case "a Makefile without the build target" Makefile 's/^build: configure/compile: configure/' \
  "Makefile to have a 'build:' target"
run_case "copying a file the build does not make" $cpu \
  's|/src/build/client/pkserve-cli /usr|/src/build/client/pkserve-client /usr|' \
  'copies /src/build/client/pkserve-client, but the build did not make'
run_case "copying from another build tree" $cuda 's|/src/build/server/pkserve|/src/out/server/pkserve|' \
  'copies /src/out/server/pkserve from the build stage, which neither'
run_case "a binary the build did not make" build/client/pkserve-cli rm \
  'the build did not make .*client/pkserve-cli'
run_case "running as root" $cpu 's/^USER 10001:10001/USER root/' 'runs as root'
run_case "no USER" $cuda '/^USER /d' 'has no USER'
run_case "no HEALTHCHECK" $cuda '/^HEALTHCHECK/,/CMD \["pkserve-cli"/d' 'no HEALTHCHECK'
run_case "a health check on another port" $cpu 's/"127.0.0.1:50051"/"127.0.0.1:50052"/' \
  "targets '127.0.0.1:50052', not the gRPC port 50051"
run_case "a health check without pkserve-cli" $cpu 's/CMD \["pkserve-cli", "health"/CMD ["true", "health"/' \
  "run 'pkserve-cli health'"
run_case "the metrics port not exposed" $cpu 's/^EXPOSE 50051 9090/EXPOSE 50051/' 'expected EXPOSE 9090'
run_case "a CUDA image that may build without CUDA" $cuda 's/ -DPK_WITH_CUDA=ON//' 'PK_WITH_CUDA=ON'
run_case "a CUDA image built on Ubuntu 24.04 (no grpc-proto)" $cuda \
  's|^FROM debian:12 AS build|FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04 AS build|' \
  'expected debian:12 to build and debian:12-slim to run'
run_case "a CUDA image that runs on NVIDIA's image" $cuda \
  's|^FROM debian:12-slim|FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu24.04|' \
  'expected debian:12 to build and debian:12-slim to run'
run_case "a CUDA build without the toolkit" $cuda '/^COPY --from=cuda-toolkit/d' \
  'copies no /usr/local/cuda'
run_case "a CUDA image the NVIDIA runtime gives no GPU" $cuda \
  's/NVIDIA_VISIBLE_DEVICES=all/NVIDIA_VISIBLE_DEVICES=void/' 'does not set NVIDIA_VISIBLE_DEVICES=all'
run_case "a CUDA image without the driver's compute libraries" $cuda \
  's/NVIDIA_DRIVER_CAPABILITIES=compute,utility/NVIDIA_DRIVER_CAPABILITIES=utility/' \
  'does not set NVIDIA_DRIVER_CAPABILITIES=compute'
run_case "a CPU image on full Debian" $cpu 's/^FROM debian:12-slim/FROM debian:12/' \
  'debian:12-slim to run'
run_case "build trees in the context" .dockerignore '/^build/d' 'build trees'
run_case "compose building the CUDA image" $compose \
  's|deploy/docker/Dockerfile.cpu|deploy/docker/Dockerfile.cuda|' 'dockerfile: deploy/docker/Dockerfile.cpu'
run_case "compose without its health check" $compose '/test: \["CMD", "pkserve-cli"/d' \
  'healthcheck test running pkserve-cli health'
run_case "compose starting the client before pkserve is healthy" $compose \
  's/service_healthy/service_started/' 'condition: service_healthy'
run_case "compose's client sending nothing" $compose 's/- topk/- health/' 'pkserve-cli topk'
run_case "compose's client sending past the front" $compose 's/--target=front:50051/--target=pkserve:50051/' \
  'pkserve-cli topk --target front:50051'
run_case "compose publishing pkserve's gRPC port" $compose '/^      - "9090:9090"/i\      - "50051:50051"' \
  "publishes pkserve's gRPC port 50051: clients would pass the front"
run_case "compose's front forwarding to another port" $compose \
  's/PKSERVE_ADDR: "pkserve:50051"/PKSERVE_ADDR: "pkserve:50052"/' 'expected PKSERVE_ADDR pkserve:50051'
run_case "compose's front with too few descriptors" $compose 's/hard: 16384/hard: 4096/' \
  'expected ulimits nofile of 8209 or more'
run_case "compose's front not published" $compose '/- "50051:50051"/d' \
  'expected the front to publish its port 50051'
run_case "compose starting the client before the front is healthy" $compose \
  '/^  client:/,$ s/service_healthy/service_started/' 'client to depend on front'
run_case "compose building the front from the pkserve image" $compose \
  's|dockerfile: deploy/docker/Dockerfile.front|dockerfile: deploy/docker/Dockerfile.cpu|' \
  'expected dockerfile: deploy/docker/Dockerfile.cpu \(pkserve, client\) and'

front=deploy/docker/Dockerfile.front
run_case "a front on full Debian" $front 's/^FROM debian:12-slim/FROM debian:12/' \
  'expected one stage FROM debian:12-slim'
run_case "a front without Debian's haproxy" $front 's/--no-install-recommends haproxy/--no-install-recommends nginx/' \
  "does not apt-get install Debian's haproxy package"
run_case "a front with more than haproxy" $front 's/--no-install-recommends haproxy/--no-install-recommends haproxy curl/' \
  'installs more than haproxy: curl'
run_case "a front copying another config" $front 's|^COPY deploy/haproxy/haproxy.cfg|COPY deploy/docker/runtime-packages.sh|' \
  'copies deploy/docker/runtime-packages.sh .*: expected only deploy/haproxy/haproxy.cfg'
run_case "a front running another config" $front \
  's|"-f", "/etc/pkserve-front/haproxy.cfg"|"-f", "/etc/haproxy/haproxy.cfg"|' \
  "runs haproxy on '/etc/haproxy/haproxy.cfg', not the copied"
run_case "a front that forks into the background" $front 's/"haproxy", "-db", /"haproxy", /' 'without -db'
run_case "a front running as root" $front 's/^USER 10001:10001/USER root/' 'expected a numeric non-root USER'
run_case "a front without a bind address" $front 's/^ENV PKFRONT_BIND=/ENV PKFRONT_LISTEN=/' \
  'no ENV default for PKFRONT_BIND'
run_case "a front exposing another port" $front 's/^EXPOSE 50051/EXPOSE 8080/' 'expected EXPOSE 50051'
run_case "a front without a health check" $front '/^HEALTHCHECK/,/CMD \["bash"/d' 'Dockerfile.front: no HEALTHCHECK'
run_case "a Dockerfile of a kind nothing checks" $front cp:Dockerfile.extra \
  'Dockerfile.extra is neither a pkserve image'

if ((failures > 0)); then
  echo "FAILED: the checker missed $failures of $((failures + passed)) breakages"
  exit 1
fi
echo "PASSED: the checker caught all $passed breakages"
