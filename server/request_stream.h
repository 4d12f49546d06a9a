// TopKStream and LookupStream: one bidirectional stream, many requests. Each message read is
// parsed and goes through Admission at once (so the stream's requests batch with everyone
// else's); answers are written strictly in request order, one write at a time. A bad request, or a
// message that is not a request at all, gets a StreamError and the stream goes on. The two RPCs
// differ only in their messages: StreamReactor<TopKCall> and StreamReactor<LookupCall>.
//
// Back-pressure: at most StreamLimits::max_pending_requests requests of a stream, and about
// max_pending_bytes of their messages and answers, may be read and not yet written; past that the
// stream stops reading until the caller takes its answers (gRPC's flow control then stops the
// caller). Answers wait for their write serialized, the request and its result freed.
//
// Open streams are bounded too (max_open_streams): past it a new stream ends at once with
// RESOURCE_EXHAUSTED.
//
// Draining: a stream whose accepted requests have all been written finishes with UNAVAILABLE; a
// request read while draining is answered UNAVAILABLE.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pkserve/v1/pkserve.pb.h"
#include "server/admission.h"
#include "server/server_metrics.h"

namespace pkserve {

class StreamRegistry;

// What differs between the two streaming RPCs: the messages, how a request is parsed and
// admitted, and the label its requests are counted under.
struct TopKCall {
  using Received = ReceivedTopK;
  using StreamResponse = v1::TopKStreamResponse;
  static constexpr Rpc kRpc = Rpc::kTopKStream;
  static absl::Status Parse(grpc::ByteBuffer& message, Received* received) {
    return ParseTopKRequest(message, received);
  }
  template <typename... Args>
  static absl::Status Submit(Admission& admission, Args&&... args) {
    return admission.Submit(std::forward<Args>(args)...);
  }
};
struct LookupCall {
  using Received = ReceivedLookup;
  using StreamResponse = v1::LookupStreamResponse;
  static constexpr Rpc kRpc = Rpc::kLookupStream;
  static absl::Status Parse(grpc::ByteBuffer& message, Received* received) {
    return ParseLookupRequest(message, received);
  }
  template <typename... Args>
  static absl::Status Submit(Admission& admission, Args&&... args) {
    return admission.SubmitLookup(std::forward<Args>(args)...);
  }
};

// An open stream as the registry sees it: something to drain.
class OpenStream {
 public:
  virtual ~OpenStream() = default;
  // Asks the stream to wind down (see the top of the file). Any thread.
  virtual void Drain() = 0;
};

struct StreamLimits {
  size_t max_pending_requests = 128;   // read and not yet written, per stream
  size_t max_pending_bytes = 4 << 20;  // their messages and answers; one request always fits
  size_t max_open_streams = 1024;      // in the whole server
  // Testing only (--inject_stream_answer_pause_us): OnAnswered's pause between recording an
  // answer and starting what it calls for.
  absl::Duration answer_pause = absl::ZeroDuration();
};

template <typename Call>
class StreamReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                            public OpenStream {
 public:
  // Creates a reactor that keeps itself alive until gRPC calls OnDone, registers it, and starts
  // reading (or, past max_open_streams, finishes it RESOURCE_EXHAUSTED). The returned pointer is
  // for gRPC. `metrics` counts each request of the stream.
  static StreamReactor* Start(grpc::CallbackServerContext* context, Admission& admission,
                              StreamRegistry& registry, ServerMetrics& metrics);

  void Drain() override;

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // Use Start(); public only for std::make_shared.
  StreamReactor(grpc::CallbackServerContext* context, Admission& admission,
                StreamRegistry& registry, ServerMetrics& metrics);

 private:
  // One request of the stream and its answer.
  struct Item {
    grpc::ByteBuffer message;  // as read; parsed into `received`, then let go
    typename Call::Received received;
    typename Call::StreamResponse response;
    grpc::ByteBuffer reply;  // `response` serialized, once answered
    size_t bytes = 0;        // of the message, then of the reply: counted in pending_bytes_
    bool answered = false;
    absl::Time arrived;  // from ServerMetrics::RequestArrived
  };
  // gRPC operations decided under the mutex and started after it is released.
  struct Actions {
    grpc::ByteBuffer* read = nullptr;
    const grpc::ByteBuffer* write = nullptr;
    std::optional<grpc::Status> finish;
    bool any() const { return read != nullptr || write != nullptr || finish.has_value(); }
  };

  // The operations the state calls for; when there are any, counts them in starting_ until Run
  // has started them. Finishing waits until no other thread is between deciding an operation and
  // starting it: after Finish, gRPC may end the call (OnDone) and free the stream at once, and an
  // operation started after that would touch both.
  Actions NextActionsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts `actions` (from NextActionsLocked), then whatever the state calls for once they are
  // started (the finish another thread deferred to it, say), until nothing is left. A caller that
  // gRPC does not hold the call for (OnAnswered, on the batcher's thread) calls it only with
  // actions: with none, the stream may already be finished and freed.
  void Run(Actions actions) ABSL_LOCKS_EXCLUDED(mu_);
  void Perform(const Actions& actions) ABSL_LOCKS_EXCLUDED(mu_);
  // Parses the message just read and hands it to Admission, or answers it at once.
  void AdmitLocked(std::unique_ptr<Item> item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the answer of an item (a result, or a StreamError when `status` is not OK) as the
  // bytes to write, and frees the request and its result.
  void AnswerLocked(Item* item, const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnAnswered(Item* item, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  grpc::CallbackServerContext* const context_;
  const std::string peer_;  // the caller, for Admission's per-caller share
  Admission& admission_;
  StreamRegistry& registry_;
  ServerMetrics& metrics_;
  std::shared_ptr<StreamReactor> self_;  // set by Start, released in OnDone

  absl::Mutex mu_;
  std::unique_ptr<Item> reading_ ABSL_GUARDED_BY(mu_);  // the target of the read in flight
  std::deque<std::unique_ptr<Item>> items_ ABSL_GUARDED_BY(mu_);  // read, not yet written; in order
  size_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;                 // Item::bytes over items_
  bool read_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;  // the caller half-closed (or the read failed)
  bool write_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;  // the caller can no longer receive
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  int starting_ ABSL_GUARDED_BY(mu_) = 0;  // threads with decided operations not yet started
};

extern template class StreamReactor<TopKCall>;
extern template class StreamReactor<LookupCall>;

// The open streams of both RPCs, so that draining can reach them, and the limits they keep.
class StreamRegistry {
 public:
  explicit StreamRegistry(const StreamLimits& limits) : limits_(limits) {}

  const StreamLimits& limits() const { return limits_; }
  // Registers `stream`; false (and not registered) when max_open_streams are open already.
  bool Add(const std::shared_ptr<OpenStream>& stream);
  void Remove(OpenStream* stream);
  // Drains every open stream, and every stream opened from now on.
  void DrainAll();
  bool draining() const;

 private:
  const StreamLimits limits_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<OpenStream*, std::weak_ptr<OpenStream>> streams_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pkserve
