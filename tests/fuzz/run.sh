#!/usr/bin/env bash
# Builds the libFuzzer target (clang, ASan + UBSan) in build-fuzz/ and runs it for SECONDS
# (default 60) from the committed seed corpus. Exits non-zero on any crash, leak, timeout or
# sanitizer report; the input that did it is left in build-fuzz/artifacts/.
#   tests/fuzz/run.sh [SECONDS]          PK_FUZZ_BUILD_DIR=... moves build-fuzz/
# Reproduce a finding:  build-fuzz/pk_request_fuzzer build-fuzz/artifacts/crash-...
set -euo pipefail
seconds=${1:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${PK_FUZZ_BUILD_DIR:-$root/build-fuzz}

CC=clang CXX=clang++ cmake -S "$root/tests/fuzz" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target pk_request_fuzzer

# New inputs go to the build's own corpus; the committed seeds are only read.
mkdir -p "$build/corpus" "$build/artifacts"
echo "fuzz: running pk_request_fuzzer for ${seconds}s"
"$build/pk_request_fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -max_len=65536 -print_final_stats=1 -artifact_prefix="$build/artifacts/" \
  "$build/corpus" "$root/tests/fuzz/corpus"
echo "fuzz: no crash, leak or sanitizer report in ${seconds}s"
