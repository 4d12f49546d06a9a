// Load for the overload and deadline tests: TopK calls on gRPC's callback API, either a closed
// loop (a fixed number of callers, each sending its next request when the last is answered) or an
// open loop (a fixed rate, whatever the answers do), with every call's outcome recorded.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pkserve/v1/pkserve.grpc.pb.h"

namespace pkserve::testing {

struct CallRecord {
  grpc::StatusCode code = grpc::StatusCode::OK;
  absl::Duration latency;  // as the caller saw it
  int request_index = 0;   // into the requests given to the Load
  bool correct = false;    // OK and equal to the CPU reference
  v1::Timing timing;       // the server's, for OK answers
};

class Load {
 public:
  // Calls go round `channels` and `requests` (each must stay valid while calls run); each call has
  // `deadline`. With `check_answers`, OK answers are compared with the CPU reference.
  Load(std::vector<std::shared_ptr<grpc::Channel>> channels,
       const std::vector<v1::TopKRequest>* requests, absl::Duration deadline, bool check_answers);
  ~Load();  // waits for every call started to finish

  // `callers` callers back to back for `duration`; returns once every call has finished.
  void RunClosedLoop(int callers, absl::Duration duration);
  // Starts calls at `per_second` for `duration`, never more than `max_outstanding` unfinished
  // (past that it waits, and the achieved rate falls short); returns once every call finished.
  void RunOpenLoop(double per_second, absl::Duration duration, int max_outstanding);

  // Every call finished so far (cleared by TakeRecords).
  std::vector<CallRecord> TakeRecords();
  int64_t calls_started() const { return started_.load(); }

 private:
  struct Call;
  void Start(int caller, absl::Time stop_at);
  void Finish(Call* call, const grpc::Status& status);
  void WaitAllDone();

  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::SparseMemory::Stub>> stubs_;
  const std::vector<v1::TopKRequest>* requests_;
  const absl::Duration deadline_;
  const bool check_answers_;
  std::atomic<int64_t> started_{0};
  std::atomic<int64_t> outstanding_{0};
  std::mutex mutex_;
  std::vector<CallRecord> records_;
};

// The q-quantile (0..1) of `values`, or 0 for none.
double Quantile(std::vector<double> values, double q);

}  // namespace pkserve::testing
