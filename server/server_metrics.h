// pkserve's metrics, by the names operators and deploy/k8s (the autoscaler reads
// pkserve_queued_rows) know them. The service and the batcher report into it; the /metrics
// endpoint renders it.
//
//   pkserve_requests_total{rpc,code}          requests answered, by RPC and gRPC status code; a
//                                             TopKStream counts each request on the stream
//   pkserve_rows_total                        rows of the requests answered OK
//   pkserve_request_duration_seconds          arrival to answer, per request (histogram)
//   pkserve_queue_duration_seconds            batcher queue to batch hand-off, per request
//   pkserve_compute_duration_seconds          the executor's time on a batch, per batch
//   pkserve_batch_rows                        rows per batch (histogram)
//   pkserve_queued_rows                       rows waiting in the batcher's queues (gauge)
//   pkserve_inflight_requests                 requests arrived and not yet answered (gauge)
//   pkserve_backend_info{backend,device}      1 per device the executor computes on
//   pkserve_device_failures_total{device}     batches that failed on a device
//   pkserve_build_info{version}               1
//   pkserve_memory_bytes{memory}              a hosted memory's table size (gauge)
//   pkserve_memory_load_seconds{memory}       how long it took to load (gauge)
//   pkserve_lookup_outputs_total{memory}      outputs of the lookups answered OK
//   pkserve_memory_value_bytes_read_total{memory}  value-table bytes those lookups read
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/batcher.h"
#include "server/executor.h"
#include "server/metrics.h"

namespace pkserve {

// The RPCs of pkserve.v1.SparseMemory, as the `rpc` label names them.
enum class Rpc { kTopK, kTopKStream, kGetServerInfo, kLookup, kLookupStream };

// The short name of a device for labels: an executor's devices() line up to its first space,
// without a trailing colon ("cpu: 16 threads, avx512" -> "cpu", "cuda:0 NVIDIA H200, ..." ->
// "cuda:0").
std::string DeviceLabel(absl::string_view device_line);

class ServerMetrics final : public BatcherObserver {
 public:
  // `backend` and `devices` as the executor reports them.
  ServerMetrics(absl::string_view version, absl::string_view backend,
                std::span<const std::string> devices);

  // Reads pkserve_queued_rows with `queued_rows` at each scrape; it must stay callable as long as
  // the metrics are rendered.
  void SetQueuedRowsSource(std::function<uint64_t()> queued_rows);

  // A request arrived (a TopK call, or one request read from a TopKStream): counts it in flight.
  // Returns its arrival time, for RequestAnswered.
  absl::Time RequestArrived();
  // The request that arrived at `arrived` was answered with `code`; `rows` (its rows) count in
  // pkserve_rows_total when the code is OK.
  void RequestAnswered(Rpc rpc, absl::StatusCode code, uint32_t rows, absl::Time arrived);

  // A hosted memory is loaded: its size and load time, and its lookup counters from now on. Call
  // for every memory before serving (the counters are read without a lock).
  void AddMemory(const HostedMemory& memory);

  // BatcherObserver: per batch, and per request the batcher answers.
  void BatchDone(size_t rows, const BatchOutcome& outcome) override;
  void WorkDone(const Work& work, const absl::Status& status, const WorkTiming& timing) override;

  // Prometheus text format.
  std::string Render() const { return registry_.Render(); }

 private:
  struct MemoryCounters {
    Counter* outputs = nullptr;
    Counter* value_bytes = nullptr;
  };
  static constexpr int kRpcs = 5;
  static constexpr int kCodes = 17;  // gRPC status codes 0 (OK) to 16 (UNAUTHENTICATED)

  MetricsRegistry registry_;
  Counter* requests_[kRpcs][kCodes];
  Counter& rows_;
  Histogram& request_duration_;
  Histogram& queue_duration_;
  Histogram& compute_duration_;
  Histogram& batch_rows_;
  Gauge& inflight_;
  std::vector<Counter*> device_failures_;  // by the index of the executor's devices()
  absl::flat_hash_map<const HostedMemory*, MemoryCounters> memories_;
};

}  // namespace pkserve
