// The settings of one pkserve process: where it listens, what computes, how it batches, what a
// request may ask for, how it shuts down and logs. Filled from flags (flags.h) or by tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/memory_store.h"
#include "server/tls.h"

namespace pkserve {

enum class Backend { kAuto, kCpu, kCuda };
enum class LogFormat { kText, kJson };

absl::StatusOr<Backend> ParseBackend(absl::string_view text);
absl::string_view BackendName(Backend backend);
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view text);

struct ServerConfig {
  std::string address = "0.0.0.0:50051";  // host:port; port 0 picks a free one
  ServerTlsFiles tls;                     // empty: plaintext (see server/tls.h)

  Backend backend = Backend::kAuto;
  int threads = 0;           // CPU compute threads; 0 = one per hardware thread
  std::vector<int> devices;  // CUDA devices to use; empty = all
  int streams = 4;           // CUDA streams per device

  // The hosted memories (--memory, repeatable), loaded at start; Lookup reads them.
  std::vector<MemorySpec> memories;

  uint32_t max_batch_rows = 1024;                            // rows in one batch, at most
  absl::Duration max_queue_delay = absl::Microseconds(500);  // longest wait for a batch to fill
  uint64_t max_queued_rows = 65536;  // rows waiting in all queues; past it RESOURCE_EXHAUSTED
  uint32_t max_rows_per_request = 4096;
  int64_t max_message_bytes = 64 << 20;  // largest request gRPC accepts
  // Rows one caller (one connection) may have queued or computing; past it RESOURCE_EXHAUSTED.
  // 0: a quarter of max_queued_rows (at least max_rows_per_request).
  uint64_t max_caller_queued_rows = 0;

  // Memory bounds of the transport and the streams (see README, "Bounded memory").
  int64_t grpc_memory_bytes = int64_t{1} << 30;  // gRPC's resource quota: buffers of all calls
  int max_streams_per_connection = 256;          // HTTP/2 concurrent streams of one connection
  bool http2_bdp_probe = false;                  // let gRPC widen windows past 64 KiB a stream
  size_t max_open_streams = 1024;                // TopKStream calls open at once, in all
  size_t max_stream_pending_bytes = 4 << 20;     // per TopKStream: read and not yet written

  absl::Duration drain_timeout = absl::Seconds(30);  // SIGTERM to exit, at most
  // How long a draining server keeps answering (NOT_SERVING, UNAVAILABLE) before it closes its
  // port, so that clients and load balancers move away instead of finding the port gone; part of
  // drain_timeout.
  absl::Duration drain_notice = absl::Milliseconds(250);

  std::string log_level = "info";
  LogFormat log_format = LogFormat::kText;

  // host:port of the Prometheus endpoint (GET /metrics); port 0 picks a free one. Empty: none,
  // which is what in-process servers get; the pkserve binary's flag defaults to 0.0.0.0:9090.
  std::string metrics_address;

  // Testing only (hidden flag --inject_batch_failures): fail every Nth batch with INTERNAL
  // (server/fault_injection.h); 0 = off.
  uint32_t inject_batch_failures = 0;
  // Testing only (hidden flag --inject_stream_answer_pause_us): StreamLimits::answer_pause.
  absl::Duration inject_stream_answer_pause = absl::ZeroDuration();

  // threads resolved: the number of CPU compute threads to start.
  int ResolvedThreads() const;
  // max_caller_queued_rows resolved (0 replaced by its default).
  uint64_t ResolvedMaxCallerQueuedRows() const;
};

// Checks every setting against its allowed range; the message names the flag and the range.
absl::Status ValidateConfig(const ServerConfig& config);

}  // namespace pkserve
