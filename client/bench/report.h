// What pkserve-bench prints and writes: per-level figures, the final table (Markdown, so it can
// go into bench/RESULTS.md as it is), one JSON line per result, and the --json file.
//
// The --json file is a list of levels:
//   [{"concurrency": 4,                       (or "rate": 1000.0 in open loop)
//     "requests_per_s": ..., "rows_per_s": ..., "mb_per_s": ...,
//     "latency_us": {"p50": ..., "p90": ..., "p99": ..., "p999": ..., "max": ...},
//     "errors": {"UNAVAILABLE": 3},           (failed requests by gRPC code; {} when none)
//     "baseline": {the same keys, for the echo baseline at the same level}},   (with --baseline)
//    ...]
// requests_per_s and rows_per_s count successful requests whose send fell in the measured window,
// over the window's length; mb_per_s is their payload (scores out, values and slots back), in
// 10^6 bytes per second; latencies are of successful requests, from the (scheduled) send.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "client/bench/load.h"
#include "client/bench/verify.h"

namespace pkserve::bench {

struct LevelResult {
  LevelSpec spec;
  LevelStats service;                  // the target (pkserve)
  std::optional<LevelStats> baseline;  // the echo, with --baseline echo
  std::optional<VerifyResult> verify;  // with --verify
};

// "concurrency 16" / "rate 1000/s"
std::string LevelName(const LevelSpec& spec);
// One line of figures: req/s, rows/s, MB/s, percentiles, errors, server batch sizes.
std::string SummaryLine(const LevelStats& stats);
// The final table, Markdown; `target` names the measured server ("pkserve").
std::string ResultTable(const std::vector<LevelResult>& results, const std::string& target);
// The JSON object of one level (as in the --json file).
std::string LevelJson(const LevelResult& result);
// The whole --json file.
std::string ResultsJson(const std::vector<LevelResult>& results);
// One JSON line per result with every figure, the server batch sizes and the send lag too:
// {"server": target or "echo", "concurrency" or "rate": ..., ...}.
std::string ResultJsonLines(const std::vector<LevelResult>& results, const std::string& target);

}  // namespace pkserve::bench
