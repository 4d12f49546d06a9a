#include "server/config.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "server/metrics_http.h"

namespace pkserve {

absl::StatusOr<Backend> ParseBackend(absl::string_view text) {
  if (text == "auto") return Backend::kAuto;
  if (text == "cpu") return Backend::kCpu;
  if (text == "cuda") return Backend::kCuda;
  return absl::InvalidArgumentError(
      absl::StrCat("--backend must be auto, cpu or cuda, got '", text, "'"));
}

absl::string_view BackendName(Backend backend) {
  switch (backend) {
    case Backend::kAuto:
      return "auto";
    case Backend::kCpu:
      return "cpu";
    case Backend::kCuda:
      return "cuda";
  }
  return "unknown";
}

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view text) {
  if (text == "text") return LogFormat::kText;
  if (text == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("--log_format must be text or json, got '", text, "'"));
}

int ServerConfig::ResolvedThreads() const {
  if (threads > 0) return threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

uint64_t ServerConfig::ResolvedMaxCallerQueuedRows() const {
  if (max_caller_queued_rows > 0) return max_caller_queued_rows;
  return std::max<uint64_t>(max_queued_rows / 4, max_rows_per_request);
}

namespace {

constexpr int kMaxThreads = 1024;
constexpr int kMaxStreams = 64;
constexpr uint32_t kMaxBatchRowsLimit = 1 << 20;

}  // namespace

absl::Status ValidateConfig(const ServerConfig& config) {
  if (config.address.empty()) return absl::InvalidArgumentError("--address must not be empty");
  if (absl::Status tls = ValidateTlsFiles(config.tls); !tls.ok()) return tls;
  if (config.threads < 0 || config.threads > kMaxThreads) {
    return absl::InvalidArgumentError(absl::StrCat("--threads must be in [0, ", kMaxThreads,
                                                   "] (0 = all hardware threads), got ",
                                                   config.threads));
  }
  for (int device : config.devices) {
    if (device < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--devices entries must be device numbers >= 0, got ", device));
    }
  }
  if (config.streams < 1 || config.streams > kMaxStreams) {
    return absl::InvalidArgumentError(
        absl::StrCat("--streams must be in [1, ", kMaxStreams, "], got ", config.streams));
  }
  if (absl::Status metrics = CheckMetricsAddress(config.metrics_address); !metrics.ok()) {
    return metrics;
  }
  if (config.max_batch_rows < 1 || config.max_batch_rows > kMaxBatchRowsLimit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_batch_rows must be in [1, ", kMaxBatchRowsLimit, "], got ", config.max_batch_rows));
  }
  if (config.max_queue_delay < absl::ZeroDuration() || config.max_queue_delay > absl::Seconds(10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_queue_delay_us must be in [0, 10000000], got ",
                     absl::ToInt64Microseconds(config.max_queue_delay)));
  }
  if (config.max_rows_per_request < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_rows_per_request must be at least 1, got ", config.max_rows_per_request));
  }
  if (config.max_queued_rows < config.max_rows_per_request) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_queued_rows must be at least --max_rows_per_request (",
                     config.max_rows_per_request, "), got ", config.max_queued_rows));
  }
  // Not bounded by max_queued_rows: a caller's rows include those computing, which the queue
  // does not count.
  if (config.max_caller_queued_rows != 0 &&
      config.max_caller_queued_rows < config.max_rows_per_request) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_caller_queued_rows must be 0 (a quarter of --max_queued_rows) or at least "
        "--max_rows_per_request (",
        config.max_rows_per_request, "), got ", config.max_caller_queued_rows));
  }
  if (config.grpc_memory_bytes < (int64_t{16} << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grpc_memory_bytes must be at least 16777216 (16 MiB), got ", config.grpc_memory_bytes));
  }
  if (config.max_streams_per_connection < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_streams_per_connection must be at least 1, got ",
                     config.max_streams_per_connection));
  }
  if (config.max_open_streams < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_open_streams must be at least 1, got ", config.max_open_streams));
  }
  if (config.max_stream_pending_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_stream_pending_bytes must be at least 1, got ", config.max_stream_pending_bytes));
  }
  if (config.max_message_bytes < 1024 ||
      config.max_message_bytes > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("--max_message_bytes must be in [1024, ",
                                                   std::numeric_limits<int32_t>::max(), "], got ",
                                                   config.max_message_bytes));
  }
  if (config.drain_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("--drain_timeout_s must be >= 0, got ",
                                                   absl::ToDoubleSeconds(config.drain_timeout)));
  }
  if (config.drain_notice < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("--drain_notice_ms must be >= 0, got ",
                                                   absl::ToInt64Milliseconds(config.drain_notice)));
  }
  static constexpr absl::string_view kLevels[] = {"trace", "debug",    "info", "warn",
                                                  "error", "critical", "off"};
  if (std::find(std::begin(kLevels), std::end(kLevels), config.log_level) == std::end(kLevels)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--log_level must be trace, debug, info, warn, error, critical or off, got '",
                     config.log_level, "'"));
  }
  return absl::OkStatus();
}

}  // namespace pkserve
