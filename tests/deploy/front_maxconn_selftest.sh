#!/usr/bin/env bash
# Shows that front_maxconn_check.sh fails where it should: holding one connection fewer than the
# shipped config's maxconn leaves room for the new caller, which the check must then call a budget
# the front does not have.
# Usage: front_maxconn_selftest.sh SOURCE_DIR BUILD_DIR
set -uo pipefail

if (($# != 2)); then
  echo "usage: $0 SOURCE_DIR BUILD_DIR" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
config=$1/deploy/haproxy/haproxy.cfg
budget=$(awk '/^defaults/ { on = 1; next } /^[^[:space:]#]/ { on = 0 }
  on && $1 == "maxconn" { print $2; exit }' "$config")
if [[ ! $budget =~ ^[0-9]+$ ]]; then
  echo "FAIL: $config sets no maxconn in defaults"
  exit 1
fi
output=$("$here/front_maxconn_check.sh" "$1" "$2" $((budget - 1)) 2>&1)
status=$?
expected="a new caller was served while $((budget - 1)) connections were held"
if ((status != 0)) && grep -q "^FAIL: $expected" <<<"$output"; then
  echo "ok: caught one connection below the budget: $(grep "^FAIL: $expected" <<<"$output")"
  echo "PASSED"
  exit 0
fi
echo "FAIL: expected front_maxconn_check.sh with $((budget - 1)) connections to fail with '$expected'; got:"
sed 's/^/    /' <<<"$output"
exit 1
