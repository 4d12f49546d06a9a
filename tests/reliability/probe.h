// A well-behaved caller that runs beside abusive ones: it sends valid random requests of a few
// shapes, one at a time, and checks every answer bit for bit against the CPU reference. Any
// failed or wrong answer is recorded; a reliability test then asserts there were none.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pkserve/v1/pkserve.grpc.pb.h"

namespace pkserve::testing {

class Probe {
 public:
  // Starts calling `channel` at once, pausing `pause` between calls.
  explicit Probe(std::shared_ptr<grpc::Channel> channel,
                 absl::Duration pause = absl::Milliseconds(2), uint64_t seed = 7);
  ~Probe();  // Stop()

  void Stop();
  int64_t ok() const { return ok_.load(); }
  std::vector<std::string> failures() const;
  // Waits until `count` more correct answers have come than when called; false on timeout.
  bool WaitForMore(int64_t count, absl::Duration timeout) const;

 private:
  void Run(uint64_t seed);

  std::shared_ptr<grpc::Channel> channel_;
  const absl::Duration pause_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> ok_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> failures_;
  std::thread thread_;
};

}  // namespace pkserve::testing
