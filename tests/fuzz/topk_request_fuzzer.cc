// libFuzzer target: arbitrary bytes taken three ways: as a pkserve.v1.TopKRequest and as a
// pkserve.v1.LookupRequest, each through the server's edge validation and, when valid (and small
// enough to be quick), the CPU backend; and as a memory file (safetensors or .npy) through the
// loader's header checks.
//
// What must hold for every input: parsing and validation never crash or read out of bounds; a
// refusal is INVALID_ARGUMENT with a message; a valid request's payload is exactly rows x row
// bytes; the CPU top-k reads only that payload and writes only rows x kk values and slots (exact
// heap buffers, so AddressSanitizer sees any byte past them); each row's slots ascend strictly and
// lie inside the product space; and a row's result does not depend on the rows computed with it.
// A lookup's refusal is INVALID_ARGUMENT or NOT_FOUND; a valid lookup's weights are, per valid
// row, non-negative and sum to 1 within float32 rounding. A memory file accepted by the loader has
// its table inside the file, of exactly slots x dim elements, slots the product of its widths.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/topk_cpu.h"
#include "kernels/lookup/lookup_cpu.h"
#include "kernels/problem.h"
#include "pkserve/v1/pkserve.pb.h"
#include "server/memory_file.h"
#include "server/memory_store.h"
#include "server/validation.h"

namespace {

// The server's default --max_rows_per_request.
constexpr uint32_t kMaxRowsPerRequest = 4096;
// Valid requests above this many score elements are validated but not computed (speed).
constexpr uint64_t kMaxElementsComputed = uint64_t{1} << 18;

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "topk_request_fuzzer: violated: %s\n", what);
    std::abort();
  }
}

// An exact-size heap copy: nothing past it is addressable.
std::unique_ptr<std::byte[]> Copy(const std::string& bytes) {
  auto copy = std::make_unique<std::byte[]>(bytes.size());
  std::memcpy(copy.get(), bytes.data(), bytes.size());
  return copy;
}

// Two small memories the lookups may name: "m" (16x16, dim 8, bfloat16) and "f" (4x4x4, dim 5,
// float32), written once to temporary files.
const pkserve::MemoryStore& Memories() {
  static const std::unique_ptr<pkserve::MemoryStore> store = [] {
    std::vector<pkserve::MemorySpec> specs;
    const auto write = [&specs](const std::string& name, std::vector<uint32_t> widths,
                                uint32_t dim, pk::DType dtype) {
      uint64_t slots = 1;
      for (uint32_t width : widths) slots *= width;
      std::string bytes = pkserve::SafetensorsHeader(widths, slots, dim, dtype);
      for (uint64_t i = 0; i < slots * dim * pk::ElementBytes(dtype); ++i) {
        bytes += static_cast<char>((i * 37) % 61 == 0 ? 0x3f : (i * 13) % 251);
      }
      const std::string path = "/tmp/pk_fuzz_memory_" + name + ".safetensors";
      std::FILE* file = std::fopen(path.c_str(), "wb");
      Require(file != nullptr, "the fuzzer's memory file can be written");
      std::fwrite(bytes.data(), 1, bytes.size(), file);
      std::fclose(file);
      specs.push_back(pkserve::MemorySpec{name, path, {}});
    };
    write("m", {16, 16}, 8, pk::DType::kBFloat16);
    write("f", {4, 4, 4}, 5, pk::DType::kFloat32);
    absl::StatusOr<std::unique_ptr<pkserve::MemoryStore>> opened = pkserve::MemoryStore::Open(specs);
    Require(opened.ok(), "the fuzzer's memories open");
    return *std::move(opened);
  }();
  return *store;
}

void FuzzLookup(const uint8_t* data, size_t size) {
  pkserve::v1::LookupRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  absl::StatusOr<pkserve::LookupSpec> spec = pkserve::ValidateLookupRequest(
      request, request.scores().size(), kMaxRowsPerRequest, Memories());
  if (!spec.ok()) {
    Require(spec.status().code() == absl::StatusCode::kInvalidArgument ||
                spec.status().code() == absl::StatusCode::kNotFound,
            "a lookup refusal is INVALID_ARGUMENT or NOT_FOUND");
    Require(!spec.status().message().empty(), "a lookup refusal says why");
    return;
  }
  const pk::LookupProblem& lookup = spec->problem;
  const uint32_t rows = request.rows();
  Require(rows % lookup.heads == 0, "valid lookup rows are a multiple of heads");
  Require(request.scores().size() == size_t{rows} * lookup.topk.row_bytes(),
          "a valid lookup payload is rows x row bytes");
  if (uint64_t{rows} * lookup.topk.row_width() > kMaxElementsComputed) return;
  static pk::cpu::Workspace workspace;
  const std::unique_ptr<std::byte[]> scores = Copy(request.scores());
  const size_t pairs = size_t{rows} * lookup.topk.kk();
  auto slots = std::make_unique<uint32_t[]>(pairs);
  auto weights = std::make_unique<float[]>(pairs);
  auto valid = std::make_unique<uint8_t[]>(rows);
  auto outputs = std::make_unique<std::byte[]>(rows / lookup.heads * lookup.output_row_bytes());
  pk::cpu::LookupWeightsRows(lookup.topk, scores.get(), rows, slots.get(), weights.get(),
                             valid.get(), workspace);
  for (uint32_t row = 0; row < rows; ++row) {
    if (valid[row] == 0) continue;
    double sum = 0;
    for (uint32_t i = 0; i < lookup.topk.kk(); ++i) {
      const float weight = weights[size_t{row} * lookup.topk.kk() + i];
      Require(weight >= 0 && weight <= 1, "a weight lies in [0, 1]");
      sum += weight;
    }
    Require(std::fabs(sum - 1) < 1e-3, "a valid row's weights sum to 1");
  }
  pk::cpu::WeightedSumRows(lookup, spec->memory->values(), slots.get(), weights.get(),
                           rows / lookup.heads, outputs.get());
}

void FuzzMemoryFile(const uint8_t* data, size_t size) {
  // An exact-size copy, so that AddressSanitizer sees any read past the file.
  auto file = std::make_unique<std::byte[]>(size);
  if (size > 0) std::memcpy(file.get(), data, size);
  absl::StatusOr<pkserve::MemoryLayout> layout =
      pkserve::ParseMemoryFile(std::span<const std::byte>(file.get(), size), {}, "fuzz");
  if (!layout.ok()) {
    Require(!layout.status().message().empty(), "a refused memory file says why");
    return;
  }
  uint64_t slots = 1;
  for (uint32_t width : layout->factor_widths) slots *= width;
  Require(slots == layout->slots, "slots are the product of the widths");
  Require(layout->data_bytes == layout->slots * layout->row_bytes(),
          "the table is slots x dim elements");
  Require(layout->data_offset <= size && layout->data_bytes <= size - layout->data_offset,
          "the table lies inside the file");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzMemoryFile(data, size);
  FuzzLookup(data, size);
  pkserve::v1::TopKRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<pk::Problem> problem = pkserve::ValidateTopKRequest(request, kMaxRowsPerRequest);
  if (!problem.ok()) {
    Require(problem.status().code() == absl::StatusCode::kInvalidArgument,
            "a refusal is INVALID_ARGUMENT");
    Require(!problem.status().message().empty(), "a refusal says why");
    return 0;
  }
  const uint32_t rows = request.rows();
  Require(rows >= 1 && rows <= kMaxRowsPerRequest, "valid rows are within the limit");
  Require(request.scores().size() == size_t{rows} * problem->row_bytes(),
          "a valid payload is rows x row bytes");
  const uint32_t kk = problem->kk();
  Require(kk >= 1 && kk <= problem->k, "1 <= kk <= k");
  if (uint64_t{rows} * problem->row_width() > kMaxElementsComputed) return 0;

  static pk::cpu::Workspace workspace;  // one for the whole run, as a server thread has
  const std::unique_ptr<std::byte[]> scores = Copy(request.scores());
  const size_t value_bytes = problem->out_value_bytes();
  auto values = std::make_unique<std::byte[]>(size_t{rows} * value_bytes);
  auto slots = std::make_unique<uint32_t[]>(size_t{rows} * kk);
  pk::cpu::TopKRows(*problem, scores.get(), rows, values.get(), slots.get(), workspace);

  uint64_t space = 1;
  for (int f = 0; f < problem->factors; ++f) space *= problem->widths[f];
  for (uint32_t row = 0; row < rows; ++row) {
    const uint32_t* row_slots = slots.get() + size_t{row} * kk;
    for (uint32_t i = 0; i < kk; ++i) {
      Require(row_slots[i] < space, "a slot lies inside the product space");
      Require(i == 0 || row_slots[i - 1] < row_slots[i], "a row's slots ascend strictly");
    }
  }
  // The last row again, alone: the same bits as in the batch.
  const uint32_t last = rows - 1;
  auto alone_values = std::make_unique<std::byte[]>(value_bytes);
  auto alone_slots = std::make_unique<uint32_t[]>(kk);
  pk::cpu::TopKRows(*problem, scores.get() + size_t{last} * problem->row_bytes(), 1,
                    alone_values.get(), alone_slots.get(), workspace);
  Require(
      std::memcmp(alone_values.get(), values.get() + size_t{last} * value_bytes, value_bytes) == 0,
      "a row's values do not depend on the rows beside it");
  Require(std::memcmp(alone_slots.get(), slots.get() + size_t{last} * kk,
                      size_t{kk} * sizeof(uint32_t)) == 0,
          "a row's slots do not depend on the rows beside it");
  return 0;
}
