#include "kernels/problem.h"

#include <cstdint>
#include <string>

namespace pk {

const char* DTypeName(DType dtype) { return dtype == DType::kFloat32 ? "float32" : "bfloat16"; }

uint32_t Problem::row_width() const {
  uint32_t total = 0;
  for (int f = 0; f < factors; ++f) total += widths[f];
  return total;
}

uint32_t Problem::offset(int f) const {
  uint32_t total = 0;
  for (int g = 0; g < f; ++g) total += widths[g];
  return total;
}

uint32_t Problem::kk() const {
  uint64_t product = 1;
  for (int f = 0; f < factors; ++f) {
    product *= widths[f];
    if (product >= k) return k;
  }
  return static_cast<uint32_t>(product);
}

int BitLength(uint32_t x) {
  int bits = 0;
  while (x != 0) {
    ++bits;
    x >>= 1;
  }
  return bits;
}

Result<Problem> ValidateProblem(std::span<const uint32_t> factor_widths, uint32_t k, DType dtype) {
  if (factor_widths.size() < static_cast<size_t>(kMinFactors) ||
      factor_widths.size() > static_cast<size_t>(kMaxFactors)) {
    return Error{"factor_widths", "factor_widths must have between " + std::to_string(kMinFactors) +
                                      " and " + std::to_string(kMaxFactors) + " entries, got " +
                                      std::to_string(factor_widths.size())};
  }
  Problem problem;
  problem.factors = static_cast<int>(factor_widths.size());
  int slot_bits = 0;
  for (size_t f = 0; f < factor_widths.size(); ++f) {
    const uint32_t w = factor_widths[f];
    if (w < 1 || w > kMaxWidth) {
      return Error{"factor_widths", "factor_widths[" + std::to_string(f) + "] must be in [1, " +
                                        std::to_string(kMaxWidth) + "], got " + std::to_string(w)};
    }
    problem.widths[f] = w;
    slot_bits += BitLength(w - 1);
  }
  if (slot_bits > kMaxSlotBits) {
    return Error{"factor_widths",
                 "factor_widths need " + std::to_string(slot_bits) +
                     " slot bits (sum of bits(w - 1)), at most " + std::to_string(kMaxSlotBits) +
                     " allowed"};
  }
  if (k < 1 || k > kMaxK) {
    return Error{"k", "k must be in [1, " + std::to_string(kMaxK) + "], got " + std::to_string(k)};
  }
  if (dtype != DType::kFloat32 && dtype != DType::kBFloat16) {
    return Error{"dtype", "dtype must be float32 or bfloat16, got code " +
                              std::to_string(static_cast<int>(dtype))};
  }
  problem.k = k;
  problem.dtype = dtype;
  return problem;
}

Result<std::monostate> ValidatePayload(const Problem& problem, uint64_t rows, uint64_t payload_bytes) {
  if (rows < 1) return Error{"rows", "rows must be at least 1, got " + std::to_string(rows)};
  const uint64_t row_bytes = problem.row_bytes();
  if (payload_bytes % row_bytes != 0 || payload_bytes / row_bytes != rows) {
    return Error{"scores", "scores must hold rows x sum(factor_widths) x " +
                               std::to_string(ElementBytes(problem.dtype)) + " = " +
                               std::to_string(rows) + " x " + std::to_string(problem.row_width()) +
                               " x " + std::to_string(ElementBytes(problem.dtype)) + " = " +
                               (rows > UINT64_MAX / row_bytes ? std::string("over 2^64")
                                                              : std::to_string(rows * row_bytes)) +
                               " bytes, got " +
                               std::to_string(payload_bytes)};
  }
  return std::monostate{};
}

}  // namespace pk
