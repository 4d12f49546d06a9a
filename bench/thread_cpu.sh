#!/usr/bin/env bash
# Where a running process's CPU goes, by thread: samples /proc/PID/task/*/stat twice, SECONDS
# apart, and prints the cores each thread name used in between (threads of one name summed, with
# their count and the busiest one of them), busiest first. A name whose busiest thread is near
# 1.00 core is a serial stage.
#   bench/thread_cpu.sh PID SECONDS
set -euo pipefail
pid=${1:?usage: thread_cpu.sh PID SECONDS}
seconds=${2:?usage: thread_cpu.sh PID SECONDS}
ticks=$(getconf CLK_TCK)

snapshot() {  # -> lines "tid<TAB>name<TAB>utime+stime ticks"
  local stat line rest name
  for stat in /proc/"$pid"/task/*/stat; do
    line=$(cat "$stat" 2>/dev/null) || continue  # the thread ended
    # "tid (name) state ...": the name may hold spaces and parentheses; it ends at the last ')'.
    name=${line#*(}
    name=${name%)*}
    rest=${line##*) }
    read -r -a fields <<<"$rest"
    # rest starts at field 3 (state); utime and stime are fields 14 and 15.
    printf '%s\t%s\t%s\n' "${line%% *}" "${name// /_}" $((fields[11] + fields[12]))
  done
}

before=$(snapshot)
sleep "$seconds"
after=$(snapshot)
echo "# cores used by the threads of pid $pid over $seconds s, by thread name"
printf '%-20s %8s %8s %12s\n' name threads cores busiest_one
awk -F'\t' -v ticks="$ticks" -v seconds="$seconds" '
  NR == FNR { start[$1] = $3; next }
  {
    used = ($3 - ($1 in start ? start[$1] : 0)) / ticks / seconds
    total[$2] += used; count[$2] += 1
    if (used > most[$2]) most[$2] = used
    all += used
  }
  END {
    for (n in total) printf "%-20s %8d %8.2f %12.2f\n", n, count[n], total[n], most[n] | "sort -k3 -nr"
    close("sort -k3 -nr")
    printf "%-20s %8s %8.2f\n", "(all)", "", all
  }' <(echo "$before") <(echo "$after")
