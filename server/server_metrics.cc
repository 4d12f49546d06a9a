#include "server/server_metrics.h"

#include <algorithm>
#include <utility>

#include "server/memory_store.h"

namespace pkserve {
namespace {

constexpr absl::string_view kRpcNames[] = {"TopK", "TopKStream", "GetServerInfo", "Lookup",
                                           "LookupStream"};

}  // namespace

std::string DeviceLabel(absl::string_view device_line) {
  absl::string_view label = device_line.substr(0, device_line.find(' '));
  if (!label.empty() && label.back() == ':') label.remove_suffix(1);
  return std::string(label);
}

ServerMetrics::ServerMetrics(absl::string_view version, absl::string_view backend,
                             std::span<const std::string> devices)
    : rows_(registry_.AddCounter("pkserve_rows_total", "Rows of the requests answered OK.")),
      request_duration_(registry_.AddHistogram(
          "pkserve_request_duration_seconds",
          "Time from a request's arrival to its answer, per request (a TopKStream's requests "
          "each count).",
          DurationBuckets())),
      queue_duration_(registry_.AddHistogram(
          "pkserve_queue_duration_seconds",
          "Time a request's rows waited in the batcher's queue before their batch went to the "
          "executor, per request.",
          DurationBuckets())),
      compute_duration_(registry_.AddHistogram(
          "pkserve_compute_duration_seconds",
          "The executor's time on one batch (CUDA: copy in, kernel, copy out), per batch.",
          DurationBuckets())),
      batch_rows_(registry_.AddHistogram(
          "pkserve_batch_rows", "Rows per batch sent to the executor.", PowerOfTwoBuckets(65536))),
      inflight_(registry_.AddGauge("pkserve_inflight_requests",
                                   "Requests arrived and not yet answered (a TopKStream's "
                                   "requests each count).")) {
  // Every (rpc, code) series exists from the start, so that counting never allocates or locks;
  // those other than OK are listed once they count something.
  for (int rpc = 0; rpc < kRpcs; ++rpc) {
    for (int code = 0; code < kCodes; ++code) {
      requests_[rpc][code] = &registry_.AddCounter(
          "pkserve_requests_total",
          "Requests answered, by RPC and gRPC status code (a TopKStream counts each request it "
          "carries, with the code of its answer).",
          {{"rpc", std::string(kRpcNames[rpc])},
           {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(code))}},
          code == 0 ? MetricsRegistry::Listing::kAlways : MetricsRegistry::Listing::kOnceNonZero);
    }
  }
  for (const std::string& device : devices) {
    const std::string label = DeviceLabel(device);
    registry_
        .AddGauge("pkserve_backend_info",
                  "The executor's backend and its devices: 1 per device computing.",
                  {{"backend", std::string(backend)}, {"device", label}})
        .Set(1);
    device_failures_.push_back(&registry_.AddCounter(
        "pkserve_device_failures_total",
        "Batches that failed on a device (their requests were answered with an error).",
        {{"device", label}}));
  }
  registry_
      .AddGauge("pkserve_build_info", "The pkserve version, as a label; the value is 1.",
                {{"version", std::string(version)}})
      .Set(1);
}

void ServerMetrics::SetQueuedRowsSource(std::function<uint64_t()> queued_rows) {
  registry_.AddGaugeFunction(
      "pkserve_queued_rows",
      "Rows waiting in the batcher's queues, not yet in a batch (bounded by --max_queued_rows).",
      {}, [queued_rows = std::move(queued_rows)] { return static_cast<double>(queued_rows()); });
}

absl::Time ServerMetrics::RequestArrived() {
  inflight_.Add(1);
  return absl::Now();
}

void ServerMetrics::RequestAnswered(Rpc rpc, absl::StatusCode code, uint32_t rows,
                                    absl::Time arrived) {
  const int code_index = static_cast<int>(code);
  const int known_code = code_index >= 0 && code_index < kCodes
                             ? code_index
                             : static_cast<int>(absl::StatusCode::kUnknown);
  requests_[static_cast<int>(rpc)][known_code]->Increment();
  if (code == absl::StatusCode::kOk) rows_.Increment(rows);
  request_duration_.Observe(absl::ToDoubleSeconds(absl::Now() - arrived));
  inflight_.Add(-1);
}

void ServerMetrics::BatchDone(size_t rows, const BatchOutcome& outcome) {
  batch_rows_.Observe(static_cast<double>(rows));
  compute_duration_.Observe(absl::ToDoubleSeconds(outcome.compute_time));
  if (!outcome.status.ok() && !device_failures_.empty()) {
    const size_t device = std::min<size_t>(static_cast<size_t>(std::max(outcome.device, 0)),
                                           device_failures_.size() - 1);
    device_failures_[device]->Increment();
  }
}

void ServerMetrics::AddMemory(const HostedMemory& memory) {
  const MetricLabels labels = {{"memory", memory.name()}};
  registry_
      .AddGauge("pkserve_memory_bytes", "Bytes of a hosted memory's values table.", labels)
      .Set(static_cast<double>(memory.layout().data_bytes));
  registry_
      .AddGauge("pkserve_memory_load_seconds",
                "How long loading a hosted memory took (checks, reading or copying its table).",
                labels)
      .Set(absl::ToDoubleSeconds(memory.load_time()));
  MemoryCounters& counters = memories_[&memory];
  counters.outputs = &registry_.AddCounter(
      "pkserve_lookup_outputs_total", "Outputs of the lookups answered OK, by memory.", labels);
  counters.value_bytes = &registry_.AddCounter(
      "pkserve_memory_value_bytes_read_total",
      "Bytes of the values table read by the lookups answered OK (rows x kk x a value row), by "
      "memory.",
      labels);
}

void ServerMetrics::WorkDone(const Work& work, const absl::Status& status,
                             const WorkTiming& timing) {
  queue_duration_.Observe(absl::ToDoubleSeconds(timing.queue));
  if (!status.ok() || !work.lookup.has_value()) return;
  const auto it = memories_.find(work.lookup->memory);
  if (it == memories_.end()) return;
  const pk::LookupProblem& lookup = work.lookup->problem;
  it->second.outputs->Increment(work.rows / lookup.heads);
  it->second.value_bytes->Increment(uint64_t{work.rows} * lookup.topk.kk() *
                                    lookup.value_row_bytes());
}

}  // namespace pkserve
