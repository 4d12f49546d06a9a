// What pkserve-bench prints and writes: per-level figures, the final table (Markdown, so it can
// go into bench/RESULTS.md as it is) with the target-against-echo comparison in a table of its own,
// one JSON line per result, and the --json file, and the run's verdict on its error fraction.
//
// A result is one server at one level. Its JSON object, the same on stdout (one a line) and in the
// --json file (a list of them, in the same order), is:
//   {"server": "pkserve",                    ("echo" for the baseline; "echo-process" when the
//                                             target is a pkserve-bench --serve_echo)
//    "concurrency": 4,                       (or "rate": 1000.0 in open loop)
//    "workload": {"target": "127.0.0.1:50051", "widths": [1024, 1024], "k": 64,
//                 "dtype": "bfloat16", "rows": {"min": 1, "max": 1}, "mode": "unary",
//                 "loop": "closed", ("arrivals": "poisson" in open loop) "connections": 1,
//                 "threads": 8, "warmup_s": 2, "duration_s": 10, "deadline_s": 10,
//                 "pool": 64, "seed": 1,
//                 lookups (--memory) add: "memory": "m", "heads": 4, "dim": 1024,
//                 "value_dtype": "bfloat16", "return_slots": false},
//    "requests_per_s": ..., "rows_per_s": ..., "mb_per_s": ...,
//    lookups add "outputs_per_s": ... and "value_mb_per_s": ... (values-table bytes the lookups
//    read, rows x kk x dim x element bytes, in 10^6 bytes per second),
//    "latency_us": {"p50": ..., "p90": ..., "p99": ..., "p999": ..., "max": ...},
//    "errors": {"UNAVAILABLE": 3},           (failed requests by gRPC code; {} when none)
//    and, where known: "batch_rows": {"mean", "p10", "p50", "p90", "p99", "max"} (the server's
//    batches), "server_us": {"queue_p50", "queue_p99", "compute_p50", "compute_p99"} and
//    "executor_busy" (0..1), "bench_cpu_cores", "bench_cpu_us_per_request", "server_cpu_cores"
//    (with --server_pid), "send_lag_us": {"p50", "p99", "max"} (open loop)}
// requests_per_s and rows_per_s count successful requests whose send fell in the measured window,
// over the window's length; mb_per_s is their payload (scores out, values and slots back), in
// 10^6 bytes per second; latencies are of successful requests, from the (scheduled) send. For
// lookups the table has outputs/s and value MB/s columns after rows/s, and the comparison with
// the echo is of outputs/s.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "client/bench/load.h"
#include "client/bench/options.h"
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
// The final table, Markdown; `target` names the measured server ("pkserve"). With the echo
// baseline, a second table compares the two level by level, under labels of its own.
std::string ResultTable(const std::vector<LevelResult>& results, const std::string& target);
// The "workload" object of every result: what was sent, and how.
std::string WorkloadJson(const BenchOptions& options);
// Every result's JSON object (the schema above), the target before the echo at each level.
std::vector<std::string> ResultObjects(const std::vector<LevelResult>& results,
                                       const std::string& target, const BenchOptions& options);
// The whole --json file: the list of ResultObjects.
std::string ResultsJson(const std::vector<LevelResult>& results, const std::string& target,
                        const BenchOptions& options);
// The same objects, one a line.
std::string ResultJsonLines(const std::vector<LevelResult>& results, const std::string& target,
                            const BenchOptions& options);
// One line for each result whose failed requests are more than `max_fraction` of those sent in
// its window ("concurrency 4, pkserve: 21587 of 24351 requests failed (88.65%; ...)"); empty when
// every result is within it.
std::vector<std::string> ErrorFractionFailures(const std::vector<LevelResult>& results,
                                               const std::string& target, double max_fraction);
// For each code the requests failed with, the first such failure's message, indented, with a
// hint where gRPC's text names no flag (a message over --max_message_bytes).
std::vector<std::string> ErrorLines(const LevelStats& stats);
// "1 row", "2 rows".
std::string Plural(uint64_t count, absl::string_view one, absl::string_view many);

}  // namespace pkserve::bench
