#!/usr/bin/env bash
# Shows that deploy_commands_check.sh fails where it should: copies deploy/ to a temporary folder,
# breaks one command or the front's config at a time with sed (a misspelt flag, a value the program
# refuses, a front that cannot pass calls), and expects a FAIL line naming it. The unbroken copy must pass first.
# Usage: deploy_commands_selftest.sh SOURCE_DIR BUILD_DIR
set -uo pipefail

if (($# != 2)); then
  echo "usage: $0 SOURCE_DIR BUILD_DIR" >&2
  exit 2
fi
source_dir=$(cd "$1" && pwd)
build_dir=$(cd "$2" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
check=$here/deploy_commands_check.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

make_copy() {
  rm -rf "$work/src"
  mkdir -p "$work/src"
  cp -R "$source_dir/deploy" "$work/src/deploy"
}

failures=0
passed=0
# run_case NAME FILE SED-SCRIPT EXPECTED-REGEX   (FILE relative to the copy)
run_case() {
  local name=$1 file=$2 script=$3 expected=$4
  make_copy
  cp "$work/src/$file" "$work/before"
  sed -i -e "$script" "$work/src/$file"
  if cmp -s "$work/before" "$work/src/$file"; then
    echo "FAIL: $name: the sed script '$script' changed nothing in $file (fix this test)"
    failures=$((failures + 1))
    return
  fi
  local output status
  output=$("$check" "$work/src" "$build_dir" 2>&1)
  status=$?
  if ((status == 0)); then
    echo "FAIL: $name: expected deploy_commands_check.sh to fail, it passed"
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
if ! output=$("$check" "$work/src" "$build_dir" 2>&1); then
  echo "FAIL: the unbroken copy does not pass deploy_commands_check.sh:"
  echo "$output" | sed 's/^/    /'
  exit 1
fi
echo "ok: the unbroken copy passes"

compose=deploy/docker-compose.yml
run_case "a client option with a dash for an underscore" $compose \
  's/--random_rows=/--random-rows=/' 'docker-compose.yml client \(through the front\): .* exited 2'
run_case "a dtype pkserve-cli does not know" $compose 's/--dtype=bfloat16/--dtype=float16/' \
  'docker-compose.yml client \(through the front\): .* exited 2'
run_case "a server flag that does not exist" deploy/docker/Dockerfile.cpu \
  's/--drain_timeout_s=20/--drain_timeout=20/' 'Dockerfile.cpu: pkserve .* did not start'
run_case "a server flag value out of range" $compose 's/--drain_timeout_s=20/--drain_timeout_s=-1/' \
  'docker-compose.yml pkserve: pkserve .* did not start'
run_case "a health check option that does not exist" deploy/docker/Dockerfile.cuda \
  's/"--target", "127.0.0.1:50051"/"--server", "127.0.0.1:50051"/' \
  'Dockerfile.cuda HEALTHCHECK: .* exited 2'
run_case "a front whose backend speaks HTTP/1.1 to pkserve" deploy/haproxy/haproxy.cfg \
  's/"${PKSERVE_ADDR}" proto h2/"${PKSERVE_ADDR}"/' 'Dockerfile.front: a call through the front: .* exited 1'
run_case "a front image running a config it does not ship" deploy/docker/Dockerfile.front \
  's|"-f", "/etc/pkserve-front/haproxy.cfg"|"-f", "/nonexistent/haproxy.cfg"|' \
  'Dockerfile.front: haproxy .*/nonexistent/haproxy.cfg .* did not start accepting'
run_case "a front image health check on another port" deploy/docker/Dockerfile.front \
  's|127.0.0.1/${PKFRONT_BIND##\*:}|127.0.0.1/1|' 'Dockerfile.front HEALTHCHECK: .* failed'
run_case "compose's front forwarding to another port" $compose \
  's/PKSERVE_ADDR: "pkserve:50051"/PKSERVE_ADDR: "pkserve:50052"/' \
  "docker-compose.yml front: PKSERVE_ADDR 'pkserve:50052' is not pkserve:50051"
run_case "compose's client past the front" $compose 's/--target=front:50051/--target=pkserve:50051/' \
  'docker-compose.yml client: --target=pkserve:50051 does not go through the front'

if ((failures > 0)); then
  echo "FAILED: the checker missed $failures of $((failures + passed)) breakages"
  exit 1
fi
echo "PASSED: the checker caught all $passed breakages"
