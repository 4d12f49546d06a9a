// Admission: the path of one parsed request (request_parser.h) from the wire into the batcher,
// shared by TopK and TopKStream, Lookup and LookupStream. Refuses new work while draining (and
// lookups while the memories load), validates at the edge, holds each caller to its share of the
// queue, sizes the response's bytes so that the batcher can copy results straight into them, and
// logs each request at debug level.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pkserve/v1/pkserve.pb.h"
#include "server/batcher.h"
#include "server/memory_store.h"
#include "server/request_parser.h"

namespace pkserve {

// Rows that each caller (a connection: gRPC's peer address, which includes the client's port) has
// admitted and not yet answered, held to a per-caller limit so that one caller cannot fill the
// batcher's whole queue and starve the others. Thread-safe.
class CallerRows {
 public:
  explicit CallerRows(uint64_t max_rows_per_caller) : max_rows_per_caller_(max_rows_per_caller) {}

  // Counts `rows` more for `caller`; RESOURCE_EXHAUSTED naming --max_caller_queued_rows if that
  // would pass the limit.
  absl::Status Acquire(absl::string_view caller, uint64_t rows);
  // Gives back rows an earlier Acquire counted.
  void Release(absl::string_view caller, uint64_t rows);
  // Rows `caller` holds now; for tests.
  uint64_t rows(absl::string_view caller) const;

 private:
  const uint64_t max_rows_per_caller_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, uint64_t> rows_ ABSL_GUARDED_BY(mu_);  // no zero entries
};

class Admission {
 public:
  // `batcher` and `memories` must outlive the admission.
  Admission(Batcher& batcher, const MemoryStore& memories, uint32_t max_rows_per_request,
            uint64_t max_caller_queued_rows);

  // Takes `received` in for `caller` (see CallerRows). OK: `done` is called exactly once, later and
  // from another thread, with OK (`response` filled, timing included) or why it failed. Otherwise
  // `done` is not called and the status is the answer: INVALID_ARGUMENT, RESOURCE_EXHAUSTED,
  // DEADLINE_EXCEEDED, UNAVAILABLE. `received` and `response` must stay valid until `done`
  // returns.
  absl::Status Submit(absl::string_view caller, const ReceivedTopK& received,
                      v1::TopKResponse* response, absl::Time deadline,
                      absl::AnyInvocable<bool() const> is_cancelled,
                      absl::AnyInvocable<void(absl::Status) &&> done);

  // The same for a lookup: NOT_FOUND for a memory the server does not hold, UNAVAILABLE until
  // MemoriesReady() (the memories are still loading).
  absl::Status SubmitLookup(absl::string_view caller, const ReceivedLookup& received,
                            v1::LookupResponse* response, absl::Time deadline,
                            absl::AnyInvocable<bool() const> is_cancelled,
                            absl::AnyInvocable<void(absl::Status) &&> done);
  // Every memory is loaded on the executor: lookups are served from now on.
  void MemoriesReady() { memories_ready_.store(true, std::memory_order_release); }

  // From now on Submit answers UNAVAILABLE.
  void StartDraining() { draining_.store(true, std::memory_order_release); }
  bool draining() const { return draining_.load(std::memory_order_acquire); }

  const CallerRows& caller_rows() const { return caller_rows_; }

 private:
  // Queues `work` (filled but for deadline, is_cancelled and done) for `caller`, counting its rows
  // against the caller's share. Once the work is answered, `done` runs after the response's
  // `timing` is filled and the answer is logged as `request`'s. A refusal is logged and returned.
  template <typename Request>
  absl::Status Queue(absl::string_view caller, const Request& request, std::unique_ptr<Work> work,
                     absl::Time deadline, absl::AnyInvocable<bool() const> is_cancelled,
                     v1::Timing* timing, absl::AnyInvocable<void(absl::Status) &&> done);

  Batcher& batcher_;
  const MemoryStore& memories_;
  std::atomic<bool> memories_ready_{false};
  const uint32_t max_rows_per_request_;
  CallerRows caller_rows_;
  std::atomic<bool> draining_{false};
};

}  // namespace pkserve
