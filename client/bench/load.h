// The load generator: runs one level of load (a closed-loop concurrency or an open-loop request
// rate) against a set of channels and returns what it measured.
//
// Everything is asynchronous on gRPC completion queues, one per worker thread ("bench-cq-N").
// Closed loop: `concurrency` slots each keep one request in flight (unary: a new call as soon as
// the last is answered; stream: one TopKStream per slot, one request at a time). Lookup load
// (Workload::lookup) calls Lookup and LookupStream the same way. Open loop: a
// scheduler thread ("bench-sched") sends at scheduled times (Poisson or constant gaps) without
// waiting for answers, so a slow answer never delays the next send; latency counts from the
// scheduled time, so a late send (the scheduler behind, or --max_outstanding reached) is charged
// to latency too (no coordinated omission).
//
// A level runs its warm-up, then its measured window; a request counts when its (scheduled) send
// falls in the window, and the level waits for every such request to be answered.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/bench/histogram.h"
#include "client/bench/options.h"
#include "client/bench/request_pool.h"
#include "grpcpp/grpcpp.h"
#include "pkserve/v1/pkserve.pb.h"

namespace pkserve::bench {

struct LevelSpec {
  int concurrency = 0;  // closed loop, when > 0
  double rate = 0;      // open loop (requests/s), when > 0
};

// A response kept for --verify, with the request it answers: `response` for TopK load, `lookup`
// for lookup load.
struct Sample {
  const PooledRequest* request = nullptr;
  v1::TopKResponse response;
  v1::LookupResponse lookup;
};

struct LevelStats {
  double seconds = 0;      // the measured window
  double cpu_seconds = 0;  // CPU time of this process (client; echo server too) in the window
  double server_cpu_seconds = -1;  // CPU time of --server_pid in the window; -1 when not known
  uint64_t ok = 0;                 // requests answered successfully
  uint64_t rows = 0;               // their rows
  uint64_t payload_bytes = 0;      // their scores, values and slots bytes (lookups: and weights)
  bool lookup = false;             // Lookup load: the two figures below are kept
  uint64_t outputs = 0;            // lookups: their outputs (rows / heads)
  uint64_t table_bytes = 0;        // lookups: values-table bytes they read (rows x kk x row)
  std::map<int, uint64_t> errors;  // failed requests by gRPC status code
  std::map<int, std::string> first_messages;  // a failed request's message, for each such code
  LogHistogram latency_ns;                    // successful requests: (scheduled) send to answer
  LogHistogram batch_rows;                    // successful requests: the server's Timing.batch_rows
  LogHistogram queue_us;                      // ... Timing.queue_us
  LogHistogram compute_us;                    // ... Timing.compute_us
  // The server executor's time spent on these requests' rows: each request's share of its batch's
  // compute time (rows / batch_rows of it), summed. Over `seconds`: how busy the executor was.
  double executor_seconds = 0;
  LogHistogram send_lag_ns;     // open loop: how late each send left after its scheduled time
  std::vector<Sample> samples;  // for --verify: a uniform sample of the successful answers

  void Merge(LevelStats&& other);
  uint64_t error_count() const;
};

// What the progress line shows; reported about every 200 ms while a level runs.
struct Progress {
  const char* phase = "";  // "warm-up", "measure", "drain"
  double elapsed_s = 0;    // since the level started
  double total_s = 0;      // warm-up + duration
  uint64_t answered = 0;   // all phases
  uint64_t failed = 0;
  int64_t in_flight = 0;
};

class LoadGenerator {
 public:
  // `pool` and the options must outlive the generator. `channels`: one per connection.
  LoadGenerator(const BenchOptions& options, const RequestPool& pool,
                std::vector<std::shared_ptr<grpc::Channel>> channels);

  // Runs one level. Fails only when calls outlive their deadlines by far (a stuck server).
  absl::StatusOr<LevelStats> Run(const LevelSpec& level,
                                 const std::function<void(const Progress&)>& on_progress);

 private:
  const BenchOptions& options_;
  const RequestPool& pool_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
};

// "OK", "UNAVAILABLE", ... ("CODE_17" past the known codes).
std::string StatusCodeName(int code);

}  // namespace pkserve::bench
