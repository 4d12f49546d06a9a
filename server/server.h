// One running pkserve: the hosted memories, the executor, the batcher, the SparseMemory service,
// the standard health service and server reflection on a gRPC server. main.cc runs one; tests run
// several in-process.
//
// Start-up: the memory files are opened and checked first (a bad one stops the start, before
// anything listens); the server then listens with SparseMemory's health NOT_SERVING while the
// executor loads the memories (lookups meanwhile get UNAVAILABLE), and turns SERVING once every
// memory is loaded.
//
// Shutdown (Drain): health turns NOT_SERVING, new requests get UNAVAILABLE, open streams finish
// once their accepted requests are answered, every accepted request is answered (within the
// timeout; past it, requests still queued get UNAVAILABLE), the server goes on refusing new work
// until drain_notice has passed since the start, then the gRPC server shuts down.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pkserve/v1/pkserve.pb.h"
#include "server/admission.h"
#include "server/batcher.h"
#include "server/config.h"
#include "server/executor.h"
#include "server/memory_store.h"
#include "server/metrics_http.h"
#include "server/server_metrics.h"
#include "server/service.h"

namespace pkserve {

// The name the health service reports the SparseMemory service under.
inline constexpr char kServiceName[] = "pkserve.v1.SparseMemory";

class Server {
  struct PrivateTag {
    explicit PrivateTag() = default;
  };

 public:
  // Use Start().
  explicit Server(PrivateTag /*tag*/) {}

  // Starts serving as `config` says (validated here). `executor` null: MakeExecutor(config); tests
  // pass their own.
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      const ServerConfig& config, std::unique_ptr<Executor> executor = nullptr);
  // Drains with no grace if Drain was not called.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The port it listens on (the one picked, if the config said port 0).
  int port() const { return port_; }
  // The address it listens on, with that port.
  const std::string& address() const { return address_; }
  const v1::ServerInfo& info() const { return info_; }
  BatcherStats batcher_stats() const { return batcher_->stats(); }
  // The port of the metrics endpoint, 0 when config.metrics_address is empty.
  int metrics_port() const { return metrics_http_ != nullptr ? metrics_http_->port() : 0; }
  // What the metrics endpoint serves (Prometheus text format), endpoint or not.
  std::string RenderMetrics() const { return metrics_->Render(); }

  // The shutdown sequence at the top of the file; returns once the gRPC server has shut down,
  // about `timeout` at most. Later calls do nothing.
  void Drain(absl::Duration timeout);

 private:
  // The health thread ("pk-health"): mirrors the executor's healthy() into the health service
  // (both the overall and the SparseMemory status) until the drain starts.
  void WatchExecutorHealth();

  ServerConfig config_;
  v1::ServerInfo info_;
  int port_ = 0;
  std::string address_;
  // Loads every memory on the executor (timed), then lets lookups in.
  absl::Status LoadMemories();

  // Destroyed in reverse: the metrics endpoint first, then the gRPC server, the executor, the
  // metrics that all of them report into, and last the memories everything reads.
  std::unique_ptr<MemoryStore> memories_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<Batcher> batcher_;
  std::unique_ptr<Admission> admission_;
  std::unique_ptr<SparseMemoryService> service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;  // null when config.metrics_address is empty
  absl::Notification stop_health_watch_;
  std::thread health_watch_;

  absl::Mutex drain_mu_;
  bool drained_ ABSL_GUARDED_BY(drain_mu_) = false;
};

}  // namespace pkserve
