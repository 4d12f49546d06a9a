// pkserve-cli: one-off calls to a pkserve server.
//   pkserve-cli topk --widths=1024,1024 --k=8 --random_rows=2
//   pkserve-cli topk --widths=256,256,256 --k=32 --input=rows.npy --out_slots=slots.npy
//   pkserve-cli info
//   pkserve-cli health
// Exit status: 0 success, 1 the call failed (the server's status is printed), 2 bad usage.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli_options.h"
#include "client/client.h"
#include "client/npy.h"

namespace pkserve::client {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

// Every command's options end with these.
constexpr OptionSpec kConnectionOptions[] = {
    {"target", "HOST:PORT", "127.0.0.1:50051",
     "the server; several: ipv4:HOST:PORT,HOST:PORT (with --lb_policy=round_robin)"},
    {"deadline_ms", "MS", "30000", "deadline of the call"},
    {"lb_policy", "POLICY", "pick_first", "pick_first or round_robin (across several addresses)"},
    {"tls", nullptr, nullptr, "use TLS (implied by the --tls_* options); the system's CA roots"},
    {"tls_ca", "FILE.pem", nullptr, "CA bundle to verify the server's certificate against"},
    {"tls_cert", "FILE.pem", nullptr, "client certificate chain, for mutual TLS (with --tls_key)"},
    {"tls_key", "FILE.pem", nullptr, "private key of --tls_cert"},
    {"tls_server_name", "NAME", nullptr,
     "the name the server's certificate must carry, when not the host of --target"},
};

constexpr OptionSpec kTopKOptions[] = {
    {"widths", "W0,W1[,W2[,W3]]", nullptr, "factor widths, e.g. 1024,1024 (required)"},
    {"k", "K", "32", "slots per row, 1..256"},
    {"dtype", "TYPE", nullptr, "float32 or bfloat16 (default: the type of --input, else float32)"},
    {"input", "FILE.npy", nullptr,
     "score rows [rows, sum(widths)] (or one row [sum(widths)]): '<f4' float32, or bfloat16 "
     "bit patterns as '<u2' (or '<i2')"},
    {"random_rows", "N", nullptr, "send N rows of standard normal scores instead of --input"},
    {"seed", "S", "1", "seed of --random_rows"},
    {"out_values", "FILE.npy", nullptr,
     "write the values [rows, kk]: '<f4', or '<u2' bfloat16 bit patterns"},
    {"out_slots", "FILE.npy", nullptr, "write the slots [rows, kk] as '<u4'"},
    {"print_rows", "N", "4", "rows to print (0: none)"},
    {"stream", nullptr, nullptr, "send each row as its own request on one TopKStream"},
    {"request_id", "ID", nullptr, "request id to send (echoed back)"},
};
constexpr OptionSpec kHealthOptions[] = {
    {"service", "NAME", nullptr,
     "the service to check: none for the whole server, or pkserve.v1.SparseMemory"},
};

constexpr char kUsage[] =
    "usage: pkserve-cli <command> [options]\n"
    "\n"
    "commands:\n"
    "  topk    top-k slots of score rows (from a .npy file, or random), printed or written to "
    ".npy\n"
    "  info    the server's version, backend, devices, limits and batching settings\n"
    "  health  the server's health (exit status 0 when SERVING)\n"
    "\n"
    "'pkserve-cli <command> --help' lists the command's options.\n";

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "pkserve-cli: %s\n", status.ToString().c_str());
  return kExitFailed;
}

int UsageError(absl::string_view message) {
  std::fprintf(stderr, "pkserve-cli: %s\n", std::string(message).c_str());
  return kExitUsage;
}

struct Connection {
  std::unique_ptr<Client> client;
  absl::Duration deadline;
};

absl::StatusOr<Connection> ConnectFromOptions(const ParsedOptions& options) {
  ClientOptions client_options;
  client_options.target = options.get("target");
  int64_t deadline_ms = 0;
  if (!absl::SimpleAtoi(options.get("deadline_ms"), &deadline_ms) || deadline_ms <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--deadline_ms must be a positive number of milliseconds, got '",
                     options.get("deadline_ms"), "'"));
  }
  client_options.deadline = absl::Milliseconds(deadline_ms);
  client_options.load_balancing_policy = options.get("lb_policy");
  TlsOptions& tls = client_options.tls;
  tls.ca_file = options.get("tls_ca");
  tls.cert_file = options.get("tls_cert");
  tls.key_file = options.get("tls_key");
  tls.server_name = options.get("tls_server_name");
  tls.enabled = options.has("tls") || !tls.ca_file.empty() || !tls.cert_file.empty() ||
                !tls.key_file.empty() || !tls.server_name.empty();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(client_options);
  if (!client.ok()) return client.status();
  return Connection{*std::move(client), client_options.deadline};
}

float Bf16ToFloat(uint16_t bits) {
  const uint32_t wide = uint32_t{bits} << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// float32 -> bfloat16, round to nearest even (inputs here are finite normals).
uint16_t FloatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// The rows to send, as the request's scores bytes.
struct Rows {
  v1::DType dtype = v1::DTYPE_FLOAT32;
  uint32_t rows = 0;
  std::vector<std::byte> scores;
};

absl::StatusOr<Rows> LoadRows(const ParsedOptions& options, uint32_t row_width) {
  const bool from_file = options.has("input");
  if (from_file == options.has("random_rows")) {
    return absl::InvalidArgumentError("give exactly one of --input=FILE.npy and --random_rows=N");
  }
  std::string dtype_name = options.get("dtype");
  if (!dtype_name.empty() && dtype_name != "float32" && dtype_name != "bfloat16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype must be float32 or bfloat16, got '", dtype_name, "'"));
  }
  Rows rows;
  if (from_file) {
    absl::StatusOr<NpyArray> array = ReadNpy(options.get("input"));
    if (!array.ok()) return array.status();
    std::string file_dtype;
    if (array->descr == "<f4") file_dtype = "float32";
    if (array->descr == "<u2" || array->descr == "<i2") file_dtype = "bfloat16";
    if (file_dtype.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(options.get("input"), ": dtype '", array->descr,
                       "' is neither float32 ('<f4') nor bfloat16 bit patterns ('<u2' or '<i2')"));
    }
    if (!dtype_name.empty() && dtype_name != file_dtype) {
      return absl::InvalidArgumentError(absl::StrCat("--dtype=", dtype_name, " but ",
                                                     options.get("input"), " holds ", file_dtype));
    }
    dtype_name = file_dtype;
    const std::vector<uint64_t>& shape = array->shape;
    const uint64_t width = shape.empty() ? 0 : shape.back();
    if (shape.empty() || shape.size() > 2 || width != row_width) {
      return absl::InvalidArgumentError(
          absl::StrCat(options.get("input"), ": shape (", absl::StrJoin(shape, ", "),
                       ") is not [rows, sum(widths) = ", row_width, "]"));
    }
    rows.rows = static_cast<uint32_t>(shape.size() == 2 ? shape[0] : 1);
    rows.scores = std::move(array->data);
  } else {
    uint32_t count = 0;
    uint64_t seed = 0;
    if (!absl::SimpleAtoi(options.get("random_rows"), &count) || count == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--random_rows must be a positive count, got '", options.get("random_rows"), "'"));
    }
    if (!absl::SimpleAtoi(options.get("seed"), &seed)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--seed must be a number, got '", options.get("seed"), "'"));
    }
    if (dtype_name.empty()) dtype_name = "float32";
    std::mt19937_64 engine(seed);
    std::normal_distribution<float> normal;
    const size_t elements = size_t{count} * row_width;
    rows.rows = count;
    if (dtype_name == "float32") {
      rows.scores.resize(elements * sizeof(float));
      for (size_t i = 0; i < elements; ++i) {
        const float value = normal(engine);
        std::memcpy(rows.scores.data() + i * sizeof value, &value, sizeof value);
      }
    } else {
      rows.scores.resize(elements * sizeof(uint16_t));
      for (size_t i = 0; i < elements; ++i) {
        const uint16_t bits = FloatToBf16(normal(engine));
        std::memcpy(rows.scores.data() + i * sizeof bits, &bits, sizeof bits);
      }
    }
  }
  rows.dtype = dtype_name == "bfloat16" ? v1::DTYPE_BFLOAT16 : v1::DTYPE_FLOAT32;
  return rows;
}

// Runs every row as its own request on one stream; gathers the answers into one response.
absl::StatusOr<v1::TopKResponse> TopKOverStream(Client& client, const v1::TopKRequest& whole,
                                                absl::Duration deadline) {
  const size_t row_bytes = whole.scores().size() / whole.rows();
  std::unique_ptr<TopKStreamSession> session = client.OpenStream(deadline);
  std::thread sender([&] {
    for (uint32_t row = 0; row < whole.rows(); ++row) {
      v1::TopKRequest request = whole;
      request.set_rows(1);
      request.set_scores(whole.scores().substr(row * row_bytes, row_bytes));
      request.set_request_id(
          absl::StrCat(whole.request_id(), whole.request_id().empty() ? "" : "/", "row", row));
      if (!session->Send(request)) break;
    }
    session->CloseSend();
  });
  v1::TopKResponse merged;
  absl::Status first_error;
  v1::TopKStreamResponse answer;
  uint32_t answered = 0;
  while (session->Receive(&answer)) {
    if (answer.has_error()) {
      if (first_error.ok()) {
        first_error = absl::Status(
            static_cast<absl::StatusCode>(answer.error().code()),
            absl::StrCat("request ", answer.request_id(), ": ", answer.error().message()));
      }
    } else {
      const v1::TopKResponse& result = answer.result();
      if (answered == 0)
        merged = result;  // kk, dtype, timing of the first
      else {
        merged.mutable_values()->append(result.values());
        merged.mutable_slots()->append(result.slots());
      }
    }
    ++answered;
  }
  sender.join();
  absl::Status status = session->Finish();
  if (!first_error.ok()) return first_error;
  if (!status.ok()) return status;
  merged.set_rows(answered);
  merged.set_request_id(whole.request_id());
  return merged;
}

std::string FormatValue(v1::DType dtype, const std::string& values, size_t index) {
  float value;
  if (dtype == v1::DTYPE_BFLOAT16) {
    uint16_t bits;
    std::memcpy(&bits, values.data() + index * sizeof bits, sizeof bits);
    value = Bf16ToFloat(bits);
  } else {
    std::memcpy(&value, values.data() + index * sizeof value, sizeof value);
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

int RunTopK(const ParsedOptions& options) {
  std::vector<uint32_t> widths;
  for (absl::string_view part : absl::StrSplit(options.get("widths"), ',', absl::SkipEmpty())) {
    uint32_t width = 0;
    if (!absl::SimpleAtoi(part, &width)) {
      return UsageError(absl::StrCat("--widths must be numbers separated by commas, got '",
                                     options.get("widths"), "'"));
    }
    widths.push_back(width);
  }
  if (widths.empty()) return UsageError("--widths is required, e.g. --widths=1024,1024");
  uint32_t k = 0;
  if (!absl::SimpleAtoi(options.get("k"), &k)) {
    return UsageError(absl::StrCat("--k must be a number, got '", options.get("k"), "'"));
  }
  int print_rows = 0;
  if (!absl::SimpleAtoi(options.get("print_rows"), &print_rows) || print_rows < 0) {
    return UsageError(
        absl::StrCat("--print_rows must be a count, got '", options.get("print_rows"), "'"));
  }
  uint32_t row_width = 0;
  for (uint32_t width : widths) row_width += width;
  absl::StatusOr<Rows> rows = LoadRows(options, row_width);
  if (!rows.ok()) return UsageError(rows.status().message());

  absl::StatusOr<Connection> connection = ConnectFromOptions(options);
  if (!connection.ok()) return UsageError(connection.status().message());
  Client& client = *connection->client;
  const v1::TopKRequest request =
      MakeTopKRequest(widths, k, rows->dtype, rows->rows, rows->scores, options.get("request_id"));
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<v1::TopKResponse> response =
      options.has("stream") ? TopKOverStream(client, request, connection->deadline)
                            : client.TopK(request);
  const double round_trip_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!response.ok()) return Fail(response.status());

  const uint32_t kk = response->kk();
  const size_t value_bytes = response->dtype() == v1::DTYPE_BFLOAT16 ? 2 : 4;
  std::printf("topk: %u rows, factor widths %s, k %u -> kk %u %s\n", response->rows(),
              absl::StrJoin(widths, "x").c_str(), k, kk,
              response->dtype() == v1::DTYPE_BFLOAT16 ? "bfloat16" : "float32");
  const v1::Timing& timing = response->timing();
  std::printf("server: queue %llu us, compute %llu us, batch of %u rows%s; round trip %.2f ms\n",
              static_cast<unsigned long long>(timing.queue_us()),
              static_cast<unsigned long long>(timing.compute_us()), timing.batch_rows(),
              options.has("stream") ? " (first request)" : "", round_trip_ms);
  const uint32_t shown = std::min<uint32_t>(response->rows(), static_cast<uint32_t>(print_rows));
  for (uint32_t row = 0; row < shown; ++row) {
    std::string line = absl::StrCat("row ", row, ":");
    for (uint32_t i = 0; i < kk; ++i) {
      uint32_t slot;
      std::memcpy(&slot, response->slots().data() + (size_t{row} * kk + i) * sizeof slot,
                  sizeof slot);
      absl::StrAppend(&line, " ", slot, "=",
                      FormatValue(response->dtype(), response->values(), size_t{row} * kk + i));
    }
    std::printf("%s\n", line.c_str());
  }
  if (shown < response->rows()) std::printf("(%u more rows)\n", response->rows() - shown);

  if (options.has("out_values")) {
    NpyArray values{value_bytes == 2 ? "<u2" : "<f4", {response->rows(), kk}, {}};
    values.data.resize(response->values().size());
    std::memcpy(values.data.data(), response->values().data(), values.data.size());
    if (absl::Status written = WriteNpy(options.get("out_values"), values); !written.ok()) {
      return Fail(written);
    }
    std::printf("values -> %s\n", options.get("out_values").c_str());
  }
  if (options.has("out_slots")) {
    NpyArray slots{"<u4", {response->rows(), kk}, {}};
    slots.data.resize(response->slots().size());
    std::memcpy(slots.data.data(), response->slots().data(), slots.data.size());
    if (absl::Status written = WriteNpy(options.get("out_slots"), slots); !written.ok()) {
      return Fail(written);
    }
    std::printf("slots -> %s\n", options.get("out_slots").c_str());
  }
  return kExitOk;
}

int RunInfo(const ParsedOptions& options) {
  absl::StatusOr<Connection> connection = ConnectFromOptions(options);
  if (!connection.ok()) return UsageError(connection.status().message());
  absl::StatusOr<v1::ServerInfo> info = connection->client->GetServerInfo();
  if (!info.ok()) return Fail(info.status());
  const v1::Limits& limits = info->limits();
  const v1::Batching& batching = info->batching();
  std::printf("version   %s\n", info->version().c_str());
  std::printf("backend   %s\n", info->backend().c_str());
  for (const std::string& device : info->devices()) std::printf("device    %s\n", device.c_str());
  std::printf(
      "limits    k 1..%u, factors %u..%u, widths 1..%u, slot bits <= %u, "
      "rows per request <= %u, message <= %llu bytes\n",
      limits.max_k(), limits.min_factors(), limits.max_factors(), limits.max_width(),
      limits.max_slot_bits(), limits.max_rows_per_request(),
      static_cast<unsigned long long>(limits.max_message_bytes()));
  std::printf("batching  max_batch_rows %u, max_queue_delay_us %llu, max_queued_rows %llu\n",
              batching.max_batch_rows(),
              static_cast<unsigned long long>(batching.max_queue_delay_us()),
              static_cast<unsigned long long>(batching.max_queued_rows()));
  return kExitOk;
}

int RunHealth(const ParsedOptions& options) {
  absl::StatusOr<Connection> connection = ConnectFromOptions(options);
  if (!connection.ok()) return UsageError(connection.status().message());
  const std::string service = options.get("service");
  absl::StatusOr<ServingStatus> status = connection->client->CheckHealth(service);
  if (!status.ok()) return Fail(status.status());
  std::printf("%s: %s\n", service.empty() ? "server" : service.c_str(),
              grpc::health::v1::HealthCheckResponse::ServingStatus_Name(*status).c_str());
  return *status == grpc::health::v1::HealthCheckResponse::SERVING ? kExitOk : kExitFailed;
}

struct Command {
  const char* name;
  const char* usage;
  const char* summary;
  std::span<const OptionSpec> options;
  int (*run)(const ParsedOptions&);
};

int Main(int argc, char** argv) {
  const Command commands[] = {
      {"topk", "pkserve-cli topk --widths=W0,W1 [--k=K] (--input=FILE.npy | --random_rows=N)",
       "Sends score rows to the server and prints (or writes) the top-k slots and values of "
       "each row.",
       kTopKOptions, RunTopK},
      {"info",
       "pkserve-cli info [--target=HOST:PORT]",
       "Prints the server's version, backend, devices, limits and batching settings.",
       {},
       RunInfo},
      {"health", "pkserve-cli health [--target=HOST:PORT] [--service=NAME]",
       "Checks the server's health (grpc.health.v1); exit status 0 when SERVING, 1 otherwise.",
       kHealthOptions, RunHealth},
  };
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitUsage : kExitOk;
  }
  for (const Command& command : commands) {
    if (std::strcmp(argv[1], command.name) != 0) continue;
    std::vector<OptionSpec> specs(command.options.begin(), command.options.end());
    specs.insert(specs.end(), std::begin(kConnectionOptions), std::end(kConnectionOptions));
    absl::StatusOr<ParsedOptions> options =
        ParseOptions(specs, std::span<char* const>(argv + 2, argc - 2));
    if (!options.ok()) return UsageError(options.status().message());
    if (options->help()) {
      std::fputs(FormatHelp(command.usage, command.summary, specs).c_str(), stdout);
      return kExitOk;
    }
    return command.run(*options);
  }
  std::fprintf(stderr, "pkserve-cli: unknown command '%s'\n\n%s", argv[1], kUsage);
  return kExitUsage;
}

}  // namespace
}  // namespace pkserve::client

int main(int argc, char** argv) { return pkserve::client::Main(argc, argv); }
