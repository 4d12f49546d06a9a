// libFuzzer target: arbitrary bytes as a pkserve.v1.TopKRequest, through the server's edge
// validation and, when valid (and small enough to be quick), the CPU backend.
//
// What must hold for every input: parsing and validation never crash or read out of bounds; a
// refusal is INVALID_ARGUMENT with a message; a valid request's payload is exactly rows x row
// bytes; the CPU top-k reads only that payload and writes only rows x kk values and slots (exact
// heap buffers, so AddressSanitizer sees any byte past them); each row's slots ascend strictly and
// lie inside the product space; and a row's result does not depend on the rows computed with it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/cpu/topk_cpu.h"
#include "kernels/problem.h"
#include "pkserve/v1/pkserve.pb.h"
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
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
