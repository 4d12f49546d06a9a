// Admission: the path of one TopKRequest from the wire into the batcher, shared by TopK and
// TopKStream. Parses the message (the service takes raw bytes, so that a message that is not a
// TopKRequest gets an answer that says so), refuses new work while draining, validates at the
// edge, holds each caller to its share of the queue, sizes the response's value and slot bytes so
// that the batcher can copy results straight into them, and logs each request at debug level.
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
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "pkserve/v1/pkserve.pb.h"
#include "server/batcher.h"

namespace pkserve {

// A TopKRequest as it came off the wire. `request` holds every field but `scores`; the scores'
// bytes stay where gRPC received them, so that the executor's one copy in (or the CPU's reading in
// place) is the only pass over them: `scores` lists them in order, as pieces of `slices`, which
// keeps them alive. (Where the message cannot be read that way, ParseTopKRequest parses it whole,
// and `scores` is then the one piece request.scores().) Neither moved nor copied once parsed.
struct ReceivedTopK {
  v1::TopKRequest request;
  std::vector<grpc::Slice> slices;
  std::vector<std::span<const std::byte>> scores;

  ReceivedTopK() = default;
  ReceivedTopK(const ReceivedTopK&) = delete;
  ReceivedTopK& operator=(const ReceivedTopK&) = delete;

  size_t scores_bytes() const;
  // Frees everything (for a stream, once a request is answered).
  void Clear();
};

// `message` (one gRPC message, left as it was) parsed into `received`; INVALID_ARGUMENT saying so
// when its bytes are not a TopKRequest. Accepts exactly what protobuf's parser accepts, with the
// same result.
absl::Status ParseTopKRequest(grpc::ByteBuffer& message, ReceivedTopK* received);

// `message` serialized into `out` for a raw write; INTERNAL if protobuf cannot.
absl::Status SerializeMessage(const google::protobuf::MessageLite& message, grpc::ByteBuffer* out);

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
  // `batcher` must outlive the admission.
  Admission(Batcher& batcher, uint32_t max_rows_per_request, uint64_t max_caller_queued_rows);

  // Takes `received` in for `caller` (see CallerRows). OK: `done` is called exactly once, later and
  // from another thread, with OK (`response` filled, timing included) or why it failed. Otherwise
  // `done` is not called and the status is the answer: INVALID_ARGUMENT, RESOURCE_EXHAUSTED,
  // DEADLINE_EXCEEDED, UNAVAILABLE. `received` and `response` must stay valid until `done`
  // returns.
  absl::Status Submit(absl::string_view caller, const ReceivedTopK& received,
                      v1::TopKResponse* response, absl::Time deadline,
                      absl::AnyInvocable<bool() const> is_cancelled,
                      absl::AnyInvocable<void(absl::Status) &&> done);

  // From now on Submit answers UNAVAILABLE.
  void StartDraining() { draining_.store(true, std::memory_order_release); }
  bool draining() const { return draining_.load(std::memory_order_acquire); }

  const CallerRows& caller_rows() const { return caller_rows_; }

 private:
  Batcher& batcher_;
  const uint32_t max_rows_per_request_;
  CallerRows caller_rows_;
  std::atomic<bool> draining_{false};
};

}  // namespace pkserve
