// pkserve-cli: calls to a pkserve server, one-off or batch.
//   pkserve-cli topk --widths=1024,1024 --k=8 --random_rows=2
//   pkserve-cli topk --widths=256,256,256 --k=32 --input=rows.npy --out_slots=slots.npy
//   pkserve-cli lookup --memory=m --k=32 --heads=4 --input=scores.npy --out=out.npy
//   pkserve-cli info
//   pkserve-cli health
// With output files, topk and lookup run as batch runs (client/cli_batch.h): any input size,
// split into requests within the server's limits. topk without output files sends the rows as
// one request (or one a row with --stream) and prints them.
// Exit status (client/cli_common.h): 0 success, 1 a call failed, 2 bad usage or a file error,
// 130 interrupted.
#include <algorithm>
#include <chrono>
#include <limits>
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
#include "client/batch_commands.h"
#include "client/cli_batch.h"
#include "client/cli_common.h"
#include "client/cli_options.h"
#include "client/client.h"
#include "client/npy.h"
#include "client/npy_file.h"
#include "server/large_messages.h"

namespace pkserve::client {
namespace {

constexpr OptionSpec kTopKOptions[] = {
    {"widths", "W0,W1[,W2[,W3]]", nullptr, "factor widths, e.g. 1024,1024 (required)"},
    {"k", "K", "32", "slots per row, 1..256"},
    {"dtype", "TYPE", nullptr,
     "float32 (f32) or bfloat16 (bf16) (default: the type of --input, else float32)"},
    {"input", "FILE.npy", nullptr,
     "score rows [rows, sum(widths)] (or one row [sum(widths)]): '<f4' float32, or bfloat16 "
     "bit patterns as '<u2' (or '<i2'); any size with --out_values or --out_slots"},
    {"random_rows", "N", nullptr, "send N rows of standard normal scores instead of --input"},
    {"seed", "S", "1", "seed of --random_rows"},
    {"out_values", "FILE.npy", nullptr,
     "write the values [rows, kk]: '<f4', or '<u2' bfloat16 bit patterns (a batch run with "
     "--input)"},
    {"out_slots", "FILE.npy", nullptr, "write the slots [rows, kk] as '<u4' (likewise)"},
    {"print_rows", "N", "4", "rows to print without output files (0: none)"},
    {"stream", nullptr, nullptr,
     "without output files: send each row as its own request on one TopKStream (batch runs "
     "always stream)"},
    {"request_id", "ID", nullptr, "request id to send (echoed back), without output files"},
};
constexpr OptionSpec kLookupOptions[] = {
    {"memory", "NAME", nullptr, "the hosted memory (pkserve-cli info lists them) (required)"},
    {"k", "K", "32", "slots per score row, 1..256"},
    {"heads", "H", "1", "score rows per output, 1..64"},
    {"dtype", "TYPE", nullptr, "float32 (f32) or bfloat16 (bf16) (default: the type of --input)"},
    {"input", "FILE.npy", nullptr,
     "score rows [rows, sum(widths)], rows a multiple of --heads: '<f4', or bfloat16 as '<u2' "
     "(required)"},
    {"out", "FILE.npy", nullptr,
     "write the outputs [rows / heads, dim] in the memory's dtype ('<f4', or '<u2' bfloat16 bit "
     "patterns) (required)"},
    {"out_slots", "FILE.npy", nullptr, "also write each score row's slots [rows, kk] as '<u4'"},
    {"out_weights", "FILE.npy", nullptr,
     "also write each score row's weights [rows, kk] as '<f4', in slot order"},
};
constexpr OptionSpec kHealthOptions[] = {
    {"service", "NAME", nullptr,
     "the service to check: none for the whole server, or pkserve.v1.SparseMemory"},
};

constexpr char kUsage[] =
    "usage: pkserve-cli <command> [options]\n"
    "\n"
    "commands:\n"
    "  topk    top-k slots of score rows (from a .npy file of any size, or random), printed or "
    "written to .npy\n"
    "  lookup  a memory layer's outputs for score rows (.npy in, .npy out) on a hosted memory\n"
    "  info    the server's version, backend, devices, limits, batching settings and memories\n"
    "  health  the server's health (exit status 0 when SERVING)\n"
    "\n"
    "'pkserve-cli <command> --help' lists the command's options.\n"
    "Exit status: 0 success, 1 a call failed, 2 bad usage or a file error, 130 interrupted.\n";

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

// A .npy input of score rows, mapped, its type and shape checked against the widths.
struct ScoreInput {
  std::unique_ptr<MappedNpy> file;
  v1::DType dtype = v1::DTYPE_FLOAT32;
  uint64_t rows = 0;
};

absl::StatusOr<ScoreInput> OpenScoreInput(const std::string& path, const std::string& dtype_name,
                                          uint32_t row_width) {
  absl::StatusOr<std::unique_ptr<MappedNpy>> file = MappedNpy::Open(path);
  if (!file.ok()) return file.status();
  const NpyHeader& header = (*file)->header();
  std::string file_dtype;
  if (header.descr == "<f4") file_dtype = "float32";
  if (header.descr == "<u2" || header.descr == "<i2") file_dtype = "bfloat16";
  if (file_dtype.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": dtype '", header.descr,
                     "' is neither float32 ('<f4') nor bfloat16 bit patterns ('<u2' or '<i2')"));
  }
  if (!dtype_name.empty() && dtype_name != file_dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype=", dtype_name, " but ", path, " holds ", file_dtype));
  }
  const std::vector<uint64_t>& shape = header.shape;
  const uint64_t width = shape.empty() ? 0 : shape.back();
  if (shape.empty() || shape.size() > 2 || width != row_width) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": shape (", absl::StrJoin(shape, ", "),
                                                   ") is not [rows, sum(widths) = ", row_width,
                                                   "]"));
  }
  ScoreInput input;
  input.rows = shape.size() == 2 ? shape[0] : 1;
  input.dtype = file_dtype == "bfloat16" ? v1::DTYPE_BFLOAT16 : v1::DTYPE_FLOAT32;
  input.file = *std::move(file);
  return input;
}

// The rows of a one-request topk, as the request's scores bytes.
struct Rows {
  v1::DType dtype = v1::DTYPE_FLOAT32;
  uint32_t rows = 0;
  std::vector<std::byte> scores;
};

absl::StatusOr<Rows> RandomRows(const ParsedOptions& options, const std::string& dtype_name,
                                uint32_t row_width) {
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
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> normal;
  const size_t elements = size_t{count} * row_width;
  Rows rows;
  rows.rows = count;
  rows.dtype = dtype_name == "bfloat16" ? v1::DTYPE_BFLOAT16 : v1::DTYPE_FLOAT32;
  if (rows.dtype == v1::DTYPE_FLOAT32) {
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
      if (answered == 0) {
        merged = result;  // kk, dtype, timing of the first
      } else {
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

uint32_t SlotsOf(const std::vector<uint32_t>& widths, uint32_t k) {
  uint64_t slots = 1;
  for (uint32_t width : widths) slots = std::min<uint64_t>(slots * width, uint64_t{1} << 40);
  return static_cast<uint32_t>(std::min<uint64_t>(k, slots));
}

std::string DescrOf(v1::DType dtype) { return dtype == v1::DTYPE_BFLOAT16 ? "<u2" : "<f4"; }

// topk --input with output files: a batch run.
int RunTopKBatch(const ParsedOptions& options, const std::vector<uint32_t>& widths, uint32_t k,
                 ScoreInput input) {
  TopKBatchSpec spec;
  spec.factor_widths = widths;
  spec.k = k;
  spec.kk = SlotsOf(widths, k);
  spec.dtype = input.dtype;
  spec.input = input.file.get();
  spec.scores = input.file->data();
  spec.row_bytes = input.rows == 0 ? 0 : spec.scores.size() / input.rows;
  BatchJob job;
  job.command = "topk";
  job.input = input.file.get();
  job.input_path = options.get("input");
  job.rows = input.rows;
  job.row_bytes = spec.row_bytes;
  job.parameters =
      absl::StrCat("widths=", absl::StrJoin(widths, ","), " k=", k, " dtype=", input.dtype);
  const bool values = options.has("out_values");
  const bool slots = options.has("out_slots");
  if (values) job.outputs.push_back({options.get("out_values"), DescrOf(input.dtype), {input.rows, spec.kk}});
  if (slots) job.outputs.push_back({options.get("out_slots"), "<u4", {input.rows, spec.kk}});
  job.make_command = [spec, values, slots](std::span<NpyOutput* const> outputs) {
    TopKBatchSpec with_outputs = spec;
    with_outputs.values = values ? outputs[0] : nullptr;
    with_outputs.slots = slots ? outputs[values ? 1 : 0] : nullptr;
    return MakeTopKBatch(std::move(with_outputs));
  };
  return RunBatchJob(options, job);
}

int RunTopK(const ParsedOptions& options) {
  absl::StatusOr<std::vector<uint32_t>> widths = ParseWidths(options.get("widths"));
  if (!widths.ok()) return UsageError(widths.status().message());
  uint32_t k = 0;
  if (!absl::SimpleAtoi(options.get("k"), &k)) {
    return UsageError(absl::StrCat("--k must be a number, got '", options.get("k"), "'"));
  }
  int print_rows = 0;
  if (!absl::SimpleAtoi(options.get("print_rows"), &print_rows) || print_rows < 0) {
    return UsageError(
        absl::StrCat("--print_rows must be a count, got '", options.get("print_rows"), "'"));
  }
  absl::StatusOr<std::string> dtype_name = ParseDTypeName(options.get("dtype"));
  if (!dtype_name.ok()) return UsageError(dtype_name.status().message());
  uint32_t row_width = 0;
  for (uint32_t width : *widths) row_width += width;
  const bool from_file = options.has("input");
  if (from_file == options.has("random_rows")) {
    return UsageError("give exactly one of --input=FILE.npy and --random_rows=N");
  }
  const bool to_files = options.has("out_values") || options.has("out_slots");

  Rows rows;
  if (from_file) {
    absl::StatusOr<ScoreInput> input = OpenScoreInput(options.get("input"), *dtype_name, row_width);
    if (!input.ok()) return UsageError(input.status().message());
    if (to_files) return RunTopKBatch(options, *widths, k, *std::move(input));
    if (input->rows > std::numeric_limits<uint32_t>::max()) {
      return UsageError(absl::StrCat(options.get("input"), " holds ", input->rows,
                                     " rows: give --out_values or --out_slots for a batch run"));
    }
    rows.dtype = input->dtype;
    rows.rows = static_cast<uint32_t>(input->rows);
    rows.scores.assign(input->file->data().begin(), input->file->data().end());
  } else {
    absl::StatusOr<Rows> random = RandomRows(options, *dtype_name, row_width);
    if (!random.ok()) return UsageError(random.status().message());
    rows = *std::move(random);
  }

  absl::StatusOr<Connection> connection = ConnectFromOptions(options);
  if (!connection.ok()) return UsageError(connection.status().message());
  Client& client = *connection->client;
  const std::string target = options.get("target");
  const v1::TopKRequest request =
      MakeTopKRequest(*widths, k, rows.dtype, rows.rows, rows.scores, options.get("request_id"));
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<v1::TopKResponse> response =
      options.has("stream") ? TopKOverStream(client, request, connection->deadline)
                            : client.TopK(request);
  const double round_trip_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!response.ok()) return Fail(response.status(), target);

  const uint32_t kk = response->kk();
  const size_t value_bytes = response->dtype() == v1::DTYPE_BFLOAT16 ? 2 : 4;
  std::printf("topk: %s, factor widths %s, k %u -> kk %u %s\n",
              Plural(response->rows(), "row", "rows").c_str(),
              absl::StrJoin(*widths, "x").c_str(), k, kk,
              response->dtype() == v1::DTYPE_BFLOAT16 ? "bfloat16" : "float32");
  const v1::Timing& timing = response->timing();
  std::printf("server: queue %llu us, compute %llu us, batch of %s%s; round trip %.2f ms\n",
              static_cast<unsigned long long>(timing.queue_us()),
              static_cast<unsigned long long>(timing.compute_us()),
              Plural(timing.batch_rows(), "row", "rows").c_str(),
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
  if (print_rows > 0 && shown < response->rows()) {
    std::printf("(%s)\n", Plural(response->rows() - shown, "more row", "more rows").c_str());
  }
  // --random_rows with output files: the answer of the one request, written whole.
  const std::pair<const char*, NpyArray> files[] = {
      {"out_values", NpyArray{value_bytes == 2 ? "<u2" : "<f4", {response->rows(), kk}, {}}},
      {"out_slots", NpyArray{"<u4", {response->rows(), kk}, {}}}};
  for (const auto& [option, array] : files) {
    if (!options.has(option)) continue;
    const std::string& bytes =
        std::strcmp(option, "out_values") == 0 ? response->values() : response->slots();
    NpyArray out = array;
    out.data.resize(bytes.size());
    std::memcpy(out.data.data(), bytes.data(), bytes.size());
    if (absl::Status written = WriteNpy(options.get(option), out); !written.ok()) {
      return UsageError(written.message());
    }
    std::printf("-> %s\n", options.get(option).c_str());
  }
  return kExitOk;
}

// lookup: always a batch run (the outputs are files).
int RunLookup(const ParsedOptions& options) {
  for (const char* required : {"memory", "input", "out"}) {
    if (!options.has(required)) {
      return UsageError(absl::StrCat("--", required, " is required (see --help)"));
    }
  }
  uint32_t k = 0;
  if (!absl::SimpleAtoi(options.get("k"), &k)) {
    return UsageError(absl::StrCat("--k must be a number, got '", options.get("k"), "'"));
  }
  uint32_t heads = 0;
  if (!absl::SimpleAtoi(options.get("heads"), &heads) || heads == 0) {
    return UsageError(
        absl::StrCat("--heads must be a positive count, got '", options.get("heads"), "'"));
  }
  absl::StatusOr<std::string> dtype_name = ParseDTypeName(options.get("dtype"));
  if (!dtype_name.ok()) return UsageError(dtype_name.status().message());

  // The memory's layout comes from the server: the widths a score row must match, its dim and
  // dtype (the outputs' shape).
  absl::StatusOr<Connection> connection = ConnectFromOptions(options);
  if (!connection.ok()) return UsageError(connection.status().message());
  const std::string target = options.get("target");
  absl::StatusOr<v1::ServerInfo> info = connection->client->GetServerInfo();
  if (!info.ok()) return Fail(info.status(), target);
  const v1::MemoryInfo* memory = nullptr;
  std::vector<std::string> names;
  for (const v1::MemoryInfo& candidate : info->memories()) {
    names.push_back(candidate.name());
    if (candidate.name() == options.get("memory")) memory = &candidate;
  }
  if (memory == nullptr) {
    return Fail(absl::NotFoundError(absl::StrCat(
                    "the server holds no memory named '", options.get("memory"), "' (it holds ",
                    names.empty() ? "none" : absl::StrJoin(names, ", "), ")")),
                target);
  }
  const std::vector<uint32_t> widths(memory->factor_widths().begin(),
                                     memory->factor_widths().end());
  uint32_t row_width = 0;
  for (uint32_t width : widths) row_width += width;
  absl::StatusOr<ScoreInput> input = OpenScoreInput(options.get("input"), *dtype_name, row_width);
  if (!input.ok()) return UsageError(input.status().message());
  if (input->rows % heads != 0) {
    return UsageError(absl::StrCat(options.get("input"), " holds ", input->rows,
                                   " rows, not a multiple of --heads=", heads));
  }
  LookupBatchSpec spec;
  spec.memory = memory->name();
  spec.k = k;
  spec.kk = SlotsOf(widths, k);
  spec.heads = heads;
  spec.dim = memory->dim();
  spec.dtype = input->dtype;
  spec.output_dtype = memory->dtype();
  spec.input = input->file.get();
  spec.scores = input->file->data();
  spec.row_bytes = input->rows == 0 ? 0 : spec.scores.size() / input->rows;
  BatchJob job;
  job.command = "lookup";
  job.input = input->file.get();
  job.input_path = options.get("input");
  job.rows = input->rows;
  job.row_group = heads;
  job.row_bytes = spec.row_bytes;
  job.parameters = absl::StrCat("memory=", memory->name(), " version=", memory->version(),
                                " k=", k, " heads=", heads, " dtype=", input->dtype);
  const bool slots = options.has("out_slots");
  const bool weights = options.has("out_weights");
  job.outputs.push_back(
      {options.get("out"), DescrOf(memory->dtype()), {input->rows / heads, memory->dim()}});
  if (slots) job.outputs.push_back({options.get("out_slots"), "<u4", {input->rows, spec.kk}});
  if (weights) job.outputs.push_back({options.get("out_weights"), "<f4", {input->rows, spec.kk}});
  job.make_command = [spec, slots, weights](std::span<NpyOutput* const> outputs) {
    LookupBatchSpec with_outputs = spec;
    with_outputs.values = outputs[0];
    with_outputs.slots = slots ? outputs[1] : nullptr;
    with_outputs.weights = weights ? outputs[slots ? 2 : 1] : nullptr;
    return MakeLookupBatch(std::move(with_outputs));
  };
  connection->client.reset();
  return RunBatchJob(options, job);
}

int RunInfo(const ParsedOptions& options) {
  absl::StatusOr<Connection> connection = ConnectFromOptions(options);
  if (!connection.ok()) return UsageError(connection.status().message());
  absl::StatusOr<v1::ServerInfo> info = connection->client->GetServerInfo();
  if (!info.ok()) return Fail(info.status(), options.get("target"));
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
  if (info->memories().empty()) std::printf("memories  none\n");
  for (const v1::MemoryInfo& memory : info->memories()) {
    std::printf("memory    %s: widths %s, %llu slots, dim %u, %s, version %llu\n",
                memory.name().c_str(), absl::StrJoin(memory.factor_widths(), "x").c_str(),
                static_cast<unsigned long long>(memory.slots()), memory.dim(),
                memory.dtype() == v1::DTYPE_BFLOAT16 ? "bfloat16" : "float32",
                static_cast<unsigned long long>(memory.version()));
  }
  return kExitOk;
}

int RunHealth(const ParsedOptions& options) {
  absl::StatusOr<Connection> connection = ConnectFromOptions(options);
  if (!connection.ok()) return UsageError(connection.status().message());
  const std::string service = options.get("service");
  absl::StatusOr<ServingStatus> status = connection->client->CheckHealth(service);
  if (!status.ok()) return Fail(status.status(), options.get("target"));
  std::printf("%s: %s\n", service.empty() ? "server" : service.c_str(),
              grpc::health::v1::HealthCheckResponse::ServingStatus_Name(*status).c_str());
  return *status == grpc::health::v1::HealthCheckResponse::SERVING ? kExitOk : kExitFailed;
}

struct Command {
  const char* name;
  const char* usage;
  const char* summary;
  std::span<const OptionSpec> options;
  bool batch;  // takes the batch-run options
  int (*run)(const ParsedOptions&);
};

int Main(int argc, char** argv) {
  const Command commands[] = {
      {"topk", "pkserve-cli topk --widths=W0,W1 [--k=K] (--input=FILE.npy | --random_rows=N)",
       "Sends score rows to the server and prints the top-k slots and values of each row, or, "
       "with --out_values/--out_slots, writes them to .npy files in a batch run: an input of any "
       "size, split into requests within the server's limits, sent over --streams, a progress "
       "line on a terminal, --resume after an interruption.",
       kTopKOptions, true, RunTopK},
      {"lookup",
       "pkserve-cli lookup --memory=NAME [--k=K] [--heads=H] --input=SCORES.npy --out=OUT.npy "
       "[--out_slots=FILE.npy] [--out_weights=FILE.npy]",
       "Runs score rows through a hosted memory (the memory layer: top-k, softmax, weighted sum "
       "of value rows) in a batch run, writing the outputs to .npy files.",
       kLookupOptions, true, RunLookup},
      {"info", "pkserve-cli info [--target=HOST:PORT]",
       "Prints the server's version, backend, devices, limits, batching settings and memories.",
       {}, false, RunInfo},
      {"health", "pkserve-cli health [--target=HOST:PORT] [--service=NAME]",
       "Checks the server's health (grpc.health.v1); exit status 0 when SERVING, 1 otherwise.",
       kHealthOptions, false, RunHealth},
  };
  if (argc >= 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("pkserve-cli %s\n", PKSERVE_VERSION);
    return kExitOk;
  }
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitUsage : kExitOk;
  }
  for (const Command& command : commands) {
    if (std::strcmp(argv[1], command.name) != 0) continue;
    std::vector<OptionSpec> specs(command.options.begin(), command.options.end());
    if (command.batch) {
      specs.insert(specs.end(), BatchOptionSpecs().begin(), BatchOptionSpecs().end());
    }
    specs.insert(specs.end(), ConnectionOptions().begin(), ConnectionOptions().end());
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

int main(int argc, char** argv) {
  // A batch run allocates each request's scores twice (the message, gRPC's serialized copy), up
  // to 4 MiB each, and frees them once sent: 256 MiB of freed heap kept covers every stream's.
  pkserve::SetUpForLargeMessages(256 << 20);
  return pkserve::client::Main(argc, argv);
}
