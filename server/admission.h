// Admission: the path of one TopKRequest from the wire into the batcher, shared by TopK and
// TopKStream. Refuses new work while draining, validates at the edge, sizes the response's value
// and slot bytes so that the batcher can copy results straight into them, and logs each request
// at debug level.
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "pkserve/v1/pkserve.pb.h"
#include "server/batcher.h"

namespace pkserve {

class Admission {
 public:
  // `batcher` must outlive the admission.
  Admission(Batcher& batcher, uint32_t max_rows_per_request);

  // Takes `request` in. OK: `done` is called exactly once, later and from another thread, with
  // OK (`response` filled, timing included) or why it failed. Otherwise `done` is not called and
  // the status is the answer: INVALID_ARGUMENT, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED,
  // UNAVAILABLE. `request` and `response` must stay valid until `done` returns.
  absl::Status Submit(const v1::TopKRequest& request, v1::TopKResponse* response,
                      absl::Time deadline, absl::AnyInvocable<bool() const> is_cancelled,
                      absl::AnyInvocable<void(absl::Status) &&> done);

  // From now on Submit answers UNAVAILABLE.
  void StartDraining() { draining_.store(true, std::memory_order_release); }
  bool draining() const { return draining_.load(std::memory_order_acquire); }

 private:
  Batcher& batcher_;
  const uint32_t max_rows_per_request_;
  std::atomic<bool> draining_{false};
};

}  // namespace pkserve
