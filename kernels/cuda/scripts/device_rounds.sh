#!/usr/bin/env bash
# An A/B of kernel builds on a GPU host, in one call: each carried build folder named (holding
# pk-bench-cuda) runs the chosen benchmark configurations, builds alternated, for ROUNDS rounds, so
# that all meet the card in the same state; then the mean and every run of each build and
# configuration (M rows/s). The first folder is the baseline: each other build's mean is also given
# against it, and last each build's geometric mean of those ratios over the configurations both ran
# (also in $OUT/geomean.txt, best first: "build +1.23 %"). Configurations are pk-bench-cuda's
# indices: "5" is the table's sixth row (--only 5), "x0" the first of --extra's (--extra
# --only 0). The rows land in $OUT/rounds.txt (build|round|config|rows per second).
#   ROUNDS=4 CONFIGS="5 x0 x1 x3 x4" kernels/cuda/scripts/device_rounds.sh carry/base carry/new ...
set -u
OUT=${OUT:-./device-out}
ROUNDS=${ROUNDS:-4}
CONFIGS=${CONFIGS:-"0 1 2 3 4 5 6 7 8 9"}
mkdir -p "$OUT"
rows=$OUT/rounds.txt
: > "$rows"
for round in $(seq 1 "$ROUNDS"); do
  for bin in "$@"; do
    name=$(basename "$bin")
    for config in $CONFIGS; do
      if [ "${config#x}" != "$config" ]; then args=(--extra --only "${config#x}"); else args=(--only "$config"); fi
      timeout 60 "$bin/pk-bench-cuda" "${args[@]}" 2>&1 | grep '^{"bench":"throughput"' |
        sed -E 's/.*"config":"([^"]*)".*"rows_per_s":([0-9.e+]*).*/\1|\2/' |
        sed "s/^/$name|$round|/" >> "$rows"
    done
  done
done
# build|round|config|rate -> one line a build and configuration, the baseline's first; each
# build's ratios to the baseline summed as logs for its geometric mean.
base=$(basename "$1")
awk -F'|' -v base="$base" -v geomean="$OUT/geomean.unsorted" '
  { key = $3 "|" $1; sum[key] += $4; count[key]++; runs[key] = runs[key] sprintf(" %.1f", $4 / 1e6)
    if (!($1 in seen)) { seen[$1] = 1; builds[++nb] = $1 }
    if (!($3 in cseen)) { cseen[$3] = 1; configs[++nc] = $3 } }
  END {
    for (c = 1; c <= nc; ++c) {
      b0 = configs[c] "|" base
      for (b = 1; b <= nb; ++b) {
        key = configs[c] "|" builds[b]
        if (!(key in sum)) continue
        mean = sum[key] / count[key]
        against = ""
        if (builds[b] != base && b0 in sum) {
          ratio = mean / (sum[b0] / count[b0])
          logs[b] += log(ratio); ++ratios[b]
          against = sprintf(" (%+.1f %%)", 100 * (ratio - 1))
        }
        printf "%-24s %-10s %8.2f%s [%s ]\n", configs[c], builds[b], mean / 1e6, against, runs[key]
      }
    }
    printf "" > geomean
    for (b = 1; b <= nb; ++b)
      if (ratios[b] > 0)
        printf "%s %+.2f %%\n", builds[b], 100 * (exp(logs[b] / ratios[b]) - 1) > geomean
  }' "$rows"
sort -k2 -g -r "$OUT/geomean.unsorted" > "$OUT/geomean.txt" && rm -f "$OUT/geomean.unsorted"
echo "geometric mean against $base:"
sed 's/^/  /' "$OUT/geomean.txt"
