#!/usr/bin/env bash
# Installs, from Debian 12's packages, whatever pkserve's build and tests need and is missing.
# Idempotent; quiet when nothing is missing; uses sudo when not root.
set -euo pipefail

packages=(
  # toolchain
  g++ cmake ninja-build pkg-config make
  # the service
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libabsl-dev libspdlog-dev libfmt-dev libcpp-httplib-dev nlohmann-json3-dev
)
test_packages=(
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # test tooling: TLS certificates, rendering the Kubernetes manifests, libFuzzer, the hardened
  # front (deploy/haproxy), prlimit and zlib (the gzip bomb) for the attack tests
  openssl clang libclang-rt-14-dev haproxy util-linux zlib1g-dev
  # the Python client's tests (Debian's /usr/bin/python3; python3-torch for pkserve.torch)
  python3-grpcio python3-numpy python3-grpc-tools python3-pytest python3-setuptools python3-torch
)
# kubectl renders the manifests offline; any kubectl on PATH will do (some hosts carry one from
# another package, which conflicts with Debian's).
command -v kubectl >/dev/null || test_packages+=(kubernetes-client)
# PKSERVE_DEPS=build (the Docker images' build stage) leaves the test tooling out: the binaries need
# none of it.
[[ ${PKSERVE_DEPS:-all} == build ]] || packages+=("${test_packages[@]}")

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$package")
done
((${#missing[@]} == 0)) && exit 0

if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null; then
  sudo=(sudo)
else
  echo "install-deps: missing packages (${missing[*]}) and neither root nor sudo" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
