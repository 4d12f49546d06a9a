#include "server/flags.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/flag_usage.h"
#include "server/version.h"

ABSL_FLAG(std::string, address, "0.0.0.0:50051",
          "host:port to listen on (gRPC, plaintext); port 0 picks a free port and logs it");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of the server: serve TLS instead of plaintext (with --tls_key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: mutual TLS, every client must present a certificate signed by it");
ABSL_FLAG(std::string, backend, "auto",
          "what computes: auto (cuda when built and a device is usable, else cpu), cpu, cuda");
ABSL_FLAG(int32_t, threads, 0, "CPU compute threads; 0 = one per hardware thread");
ABSL_FLAG(std::string, devices, "all",
          "CUDA devices to use: 'all' or a comma-separated list of device numbers (cuda backend)");
ABSL_FLAG(int32_t, streams, 4, "CUDA streams per device (cuda backend)");
ABSL_FLAG(uint32_t, max_batch_rows, 1024, "most rows in one batch");
ABSL_FLAG(int64_t, max_queue_delay_us, 500,
          "longest a request waits for its batch to fill while the executor is busy (an idle "
          "executor takes a request at once)");
ABSL_FLAG(uint64_t, max_queued_rows, 65536,
          "rows waiting in all queues, at most; past it requests get RESOURCE_EXHAUSTED");
ABSL_FLAG(uint32_t, max_rows_per_request, 4096,
          "most rows in one request; more is INVALID_ARGUMENT");
ABSL_FLAG(int64_t, max_message_bytes, 64 << 20,
          "largest request message accepted; larger gets RESOURCE_EXHAUSTED from gRPC");
ABSL_FLAG(uint64_t, max_caller_queued_rows, 0,
          "rows one caller (one connection: all its calls and streams) may have queued or "
          "computing, at most; past it its requests get RESOURCE_EXHAUSTED while others are still "
          "served; 0 = a quarter of --max_queued_rows");
ABSL_FLAG(int64_t, grpc_memory_bytes, int64_t{1} << 30,
          "gRPC's resource quota for the buffers of all connections and calls; as it fills, gRPC "
          "shrinks HTTP/2 flow-control windows and then refuses new calls");
ABSL_FLAG(int32_t, max_streams_per_connection, 256,
          "HTTP/2 streams (calls) one connection may have open at once; clients queue the rest");
ABSL_FLAG(bool, http2_bdp_probe, false,
          "let gRPC widen a connection's HTTP/2 windows to its measured bandwidth-delay product "
          "(tens of MiB a stream that sends and never reads); off: 64 KiB windows, enough on a "
          "LAN");
ABSL_FLAG(uint64_t, max_open_streams, 1024,
          "TopKStream calls open at once in the whole server; past it a new stream ends at once "
          "with RESOURCE_EXHAUSTED");
ABSL_FLAG(uint64_t, max_stream_pending_bytes, 4 << 20,
          "per TopKStream: bytes of requests read and answers not yet written, about; past it the "
          "stream stops reading until its caller reads (one request always fits)");
ABSL_FLAG(double, drain_timeout_s, 30,
          "on SIGTERM/SIGINT: seconds to answer accepted requests before exiting, at most");
ABSL_FLAG(int64_t, drain_notice_ms, 250,
          "while draining, how long the server keeps answering (health NOT_SERVING, new requests "
          "UNAVAILABLE) before it closes its port; part of --drain_timeout_s");
ABSL_FLAG(std::string, log_level, "info",
          "trace, debug (one line per request), info, warn, "
          "error, critical or off");
ABSL_FLAG(std::string, log_format, "text", "text, or json (one object a line)");
ABSL_FLAG(std::string, metrics_address, "0.0.0.0:9090",
          "host:port of the Prometheus metrics endpoint (HTTP, path /metrics); port 0 picks a "
          "free port and logs it; empty: no endpoint");
// Listed by --help; its values are taken out of argv by TakeMemoryFlags, since it repeats.
ABSL_FLAG(std::string, memory, "",
          "a hosted memory for Lookup, NAME=PATH[,widths=W0xW1[xW2[xW3]]]; repeat for more. PATH: "
          "a safetensors file (tensor 'values' [slots, dim], BF16 or F32, factor widths in "
          "__metadata__ 'factor_widths') or a .npy ('<f4', or bfloat16 bits as '<u2') with "
          "widths=");
// Hidden from --help (defined in server/testing_flags.cc): fault injection for tests.
ABSL_DECLARE_FLAG(uint32_t, inject_batch_failures);
ABSL_DECLARE_FLAG(uint32_t, inject_stream_answer_pause_us);

namespace pkserve {
namespace {

absl::StatusOr<std::vector<int>> ParseDevices(const std::string& text) {
  std::vector<int> devices;
  if (text == "all") return devices;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int device = 0;
    if (!absl::SimpleAtoi(part, &device) || device < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--devices must be 'all' or a comma-separated list of device numbers, got '", text, "'"));
    }
    devices.push_back(device);
  }
  return devices;
}

}  // namespace

void SetUpFlagsUsage() {
  SetUpProgramUsage({
      .name = "pkserve",
      .flags_source = "server/flags.cc",
      .message = "product-key top-k and hosted product-key memories (sparse memory lookup)\n"
                 "over gRPC.\n"
                 "Serves pkserve.v1.SparseMemory, grpc.health.v1.Health and server reflection.\n"
                 "Usage: pkserve [--address=0.0.0.0:50051] [--backend=auto|cpu|cuda] [flags]\n"
                 "Exit status: 0 after a drain or --help, 2 on bad usage, 1 on any other failure.",
      .version = absl::StrCat("pkserve ", kVersion),
  });
}

std::vector<std::string> TakeMemoryFlags(int& argc, char** argv) {
  std::vector<std::string> values;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") {  // the rest is positional
      while (i < argc) argv[kept++] = argv[i++];
      break;
    }
    absl::string_view name = arg;
    if (!absl::ConsumePrefix(&name, "--")) absl::ConsumePrefix(&name, "-");
    if (absl::ConsumePrefix(&name, "memory=")) {
      values.emplace_back(name);
      continue;
    }
    if (name == "memory" && name.size() != arg.size() && i + 1 < argc) {
      values.emplace_back(argv[++i]);
      continue;
    }
    argv[kept++] = argv[i];
  }
  argc = kept;
  return values;
}

absl::StatusOr<ServerConfig> ConfigFromFlags(const std::vector<std::string>& memory_flags) {
  ServerConfig config;
  for (const std::string& value : memory_flags) {
    absl::StatusOr<MemorySpec> spec = ParseMemorySpec(value);
    if (!spec.ok()) return spec.status();
    config.memories.push_back(*std::move(spec));
  }
  config.address = absl::GetFlag(FLAGS_address);
  config.tls.cert = absl::GetFlag(FLAGS_tls_cert);
  config.tls.key = absl::GetFlag(FLAGS_tls_key);
  config.tls.client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  absl::StatusOr<Backend> backend = ParseBackend(absl::GetFlag(FLAGS_backend));
  if (!backend.ok()) return backend.status();
  config.backend = *backend;
  config.threads = absl::GetFlag(FLAGS_threads);
  absl::StatusOr<std::vector<int>> devices = ParseDevices(absl::GetFlag(FLAGS_devices));
  if (!devices.ok()) return devices.status();
  config.devices = *std::move(devices);
  config.streams = absl::GetFlag(FLAGS_streams);
  config.max_batch_rows = absl::GetFlag(FLAGS_max_batch_rows);
  config.max_queue_delay = absl::Microseconds(absl::GetFlag(FLAGS_max_queue_delay_us));
  config.max_queued_rows = absl::GetFlag(FLAGS_max_queued_rows);
  config.max_rows_per_request = absl::GetFlag(FLAGS_max_rows_per_request);
  config.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  config.max_caller_queued_rows = absl::GetFlag(FLAGS_max_caller_queued_rows);
  config.grpc_memory_bytes = absl::GetFlag(FLAGS_grpc_memory_bytes);
  config.max_streams_per_connection = absl::GetFlag(FLAGS_max_streams_per_connection);
  config.http2_bdp_probe = absl::GetFlag(FLAGS_http2_bdp_probe);
  config.max_open_streams = static_cast<size_t>(absl::GetFlag(FLAGS_max_open_streams));
  config.max_stream_pending_bytes =
      static_cast<size_t>(absl::GetFlag(FLAGS_max_stream_pending_bytes));
  config.drain_timeout = absl::Seconds(absl::GetFlag(FLAGS_drain_timeout_s));
  config.drain_notice = absl::Milliseconds(absl::GetFlag(FLAGS_drain_notice_ms));
  config.log_level = absl::GetFlag(FLAGS_log_level);
  absl::StatusOr<LogFormat> format = ParseLogFormat(absl::GetFlag(FLAGS_log_format));
  if (!format.ok()) return format.status();
  config.log_format = *format;
  config.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  config.inject_batch_failures = absl::GetFlag(FLAGS_inject_batch_failures);
  config.inject_stream_answer_pause =
      absl::Microseconds(absl::GetFlag(FLAGS_inject_stream_answer_pause_us));
  if (absl::Status valid = ValidateConfig(config); !valid.ok()) return valid;
  return config;
}

}  // namespace pkserve
