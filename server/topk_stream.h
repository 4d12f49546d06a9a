// TopKStream: one bidirectional stream, many requests. Each request read goes through Admission
// at once (so the stream's requests batch with everyone else's); answers are written strictly in
// request order, one write at a time. A bad request gets a StreamError and the stream goes on.
//
// Back-pressure: at most kMaxPendingPerStream requests of a stream may be read and not yet
// written; past that the stream stops reading until the caller takes its answers.
//
// Draining: a stream whose accepted requests have all been written finishes with UNAVAILABLE; a
// request read while draining is answered UNAVAILABLE.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "pkserve/v1/pkserve.pb.h"
#include "server/admission.h"
#include "server/server_metrics.h"

namespace pkserve {

class TopKStreamRegistry;

class TopKStreamReactor final
    : public grpc::ServerBidiReactor<v1::TopKRequest, v1::TopKStreamResponse>,
      public std::enable_shared_from_this<TopKStreamReactor> {
 public:
  static constexpr size_t kMaxPendingPerStream = 128;

  // Creates a reactor that keeps itself alive until gRPC calls OnDone, registers it, and starts
  // reading. The returned pointer is for gRPC. `metrics` counts each request of the stream.
  static TopKStreamReactor* Start(grpc::CallbackServerContext* context, Admission& admission,
                                  TopKStreamRegistry& registry, ServerMetrics& metrics);

  // Asks the stream to wind down (see the top of the file). Any thread.
  void Drain();

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // Use Start(); public only for std::make_shared.
  TopKStreamReactor(grpc::CallbackServerContext* context, Admission& admission,
                    TopKStreamRegistry& registry, ServerMetrics& metrics);

 private:
  // One request of the stream and its answer.
  struct Item {
    v1::TopKRequest request;
    v1::TopKStreamResponse response;
    bool answered = false;
    absl::Time arrived;  // from ServerMetrics::RequestArrived
  };
  // gRPC operations decided under the mutex and started after it is released.
  struct Actions {
    v1::TopKRequest* read = nullptr;
    const v1::TopKStreamResponse* write = nullptr;
    std::optional<grpc::Status> finish;
  };

  Actions NextActionsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Perform(const Actions& actions) ABSL_LOCKS_EXCLUDED(mu_);
  // Records the answer of an item (a result, or a StreamError when `status` is not OK).
  void AnswerLocked(Item* item, const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnAnswered(Item* item, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  grpc::CallbackServerContext* const context_;
  Admission& admission_;
  TopKStreamRegistry& registry_;
  ServerMetrics& metrics_;
  std::shared_ptr<TopKStreamReactor> self_;  // set by Start, released in OnDone

  absl::Mutex mu_;
  std::unique_ptr<Item> reading_ ABSL_GUARDED_BY(mu_);  // the target of the read in flight
  std::deque<std::unique_ptr<Item>> items_ ABSL_GUARDED_BY(mu_);  // read, not yet written; in order
  bool read_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;  // the caller half-closed (or the read failed)
  bool write_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;  // the caller can no longer receive
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// The open streams, so that draining can reach them.
class TopKStreamRegistry {
 public:
  void Add(const std::shared_ptr<TopKStreamReactor>& stream);
  void Remove(TopKStreamReactor* stream);
  // Drains every open stream, and every stream opened from now on.
  void DrainAll();
  bool draining() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<TopKStreamReactor*, std::weak_ptr<TopKStreamReactor>> streams_
      ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pkserve
