// What pkserve-bench measures: the workload (shape, rows per request, unary or stream), the load
// (a closed-loop concurrency sweep or open-loop request rates), how long, against what, and what to
// report. Filled from flags by main.cc; the parsers are here so the tests can use them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kernels/problem.h"

namespace pkserve::bench {

enum class CallMode { kUnary, kStream };
enum class Arrivals { kPoisson, kConstant };

// Lookup load (--memory): the memory asked for, its shape as the target's GetServerInfo gives it,
// and the request's heads. The Workload's problem then holds the memory's widths, the request's k
// and the scores' dtype; rows count score rows (a multiple of heads).
struct LookupWorkload {
  std::string memory;
  uint32_t heads = 1;
  uint32_t dim = 0;                             // values per slot
  pk::DType value_dtype = pk::DType::kFloat32;  // of the table, and so of the outputs
  bool return_slots = false;                    // ask for each row's slots and weights too
};

// The requests sent: one shape, rows per request drawn uniformly from [min_rows, max_rows] (for
// lookups: multiples of heads in that range).
struct Workload {
  pk::Problem problem;  // validated widths, k, dtype
  uint32_t min_rows = 1;
  uint32_t max_rows = 1;
  CallMode mode = CallMode::kUnary;
  std::optional<LookupWorkload> lookup;  // set: Lookup / LookupStream calls instead of TopK
};

struct BenchOptions {
  std::string target = "127.0.0.1:50051";  // as given: one address or a comma-separated list
  Workload workload;
  std::vector<int> concurrency = {1, 4, 16, 64};  // closed loop: one level each
  std::vector<double> rates;  // open loop (requests/s), one level each; non-empty = open loop
  Arrivals arrivals = Arrivals::kPoisson;
  absl::Duration warmup = absl::Seconds(2);
  absl::Duration duration = absl::Seconds(10);
  absl::Duration deadline = absl::Seconds(10);  // of each unary call
  int connections = 1;                          // separate channels (HTTP/2 connections) per server
  int threads = 0;              // completion-queue threads; 0 = min(hardware threads, 8)
  int max_outstanding = 10000;  // open loop: requests in flight at most (later sends wait)
  int pool_requests = 64;       // distinct pre-generated requests, at most
  int64_t pool_bytes = int64_t{64} << 20;  // ...and their scores bytes, at most
  int verify = 0;              // responses per level checked against the CPU implementation
  std::string memory_file;     // lookups with --verify: the file the target loaded the memory from
  bool baseline_echo = false;  // also measure an in-process echo server, level by level
  std::string json_path;       // --json FILE; empty = none
  uint64_t seed = 1;
  int server_pid = 0;  // a local server's pid: its CPU use is read in every window
  // The run fails (exit 1) when a level's failed requests pass this fraction of those sent.
  double max_error_fraction = 0.01;
  // Tests only (--inject_answer_pause_us): a stream's pause between recording an answer and
  // taking its next request.
  absl::Duration answer_pause = absl::ZeroDuration();

  bool open_loop() const { return !rates.empty(); }
  int ResolvedThreads() const;
};

// "1024,1024" -> {1024, 1024}; an empty entry ("64,,64", "64,") is an error.
absl::StatusOr<std::vector<uint32_t>> ParseUintList(absl::string_view text, absl::string_view flag);
// "1,4,16,64" -> {1, 4, 16, 64}; every entry >= 1.
absl::StatusOr<std::vector<int>> ParseConcurrency(absl::string_view text);
// "1000,2000.5" -> {1000, 2000.5}; every entry > 0.
absl::StatusOr<std::vector<double>> ParseRates(absl::string_view text);
// "8" -> [8, 8]; "1-64" -> [1, 64].
absl::StatusOr<std::pair<uint32_t, uint32_t>> ParseRowRange(absl::string_view text);
// "float32" / "bfloat16", or their short forms "f32" / "bf16".
absl::StatusOr<pk::DType> ParseDType(absl::string_view text);
// "float32" / "bfloat16": the spelling the bench prints, which pkserve-cli takes too.
const char* DTypeFlagName(pk::DType dtype);
absl::StatusOr<CallMode> ParseCallMode(absl::string_view text);
absl::StatusOr<Arrivals> ParseArrivals(absl::string_view text);
// A duration in seconds ("0.5"); `flag` names it in the error.
absl::StatusOr<absl::Duration> ParseSeconds(double seconds, absl::string_view flag,
                                            bool allow_zero);

// "1024x1024 k=64 bfloat16, rows 1-64, unary"; lookups add the memory:
// "lookup memory m (1024x1024 slots, dim 1024 bfloat16) k=32 heads 4 bfloat16, rows 256, unary"
std::string DescribeWorkload(const Workload& workload);

}  // namespace pkserve::bench
