#include "kernels/lookup/lookup.h"

#include <string>

namespace pk {

namespace {

bool KnownDType(DType dtype) { return dtype == DType::kFloat32 || dtype == DType::kBFloat16; }

}  // namespace

Result<LookupProblem> ValidateLookup(const Problem& topk, uint32_t heads, uint32_t dim,
                                     DType value_dtype, DType output_dtype) {
  if (heads < 1 || heads > kMaxHeads) {
    return Error{"heads", "heads must be in [1, " + std::to_string(kMaxHeads) + "], got " +
                              std::to_string(heads)};
  }
  if (dim < 1) return Error{"dim", "dim must be at least 1, got " + std::to_string(dim)};
  if (!KnownDType(value_dtype)) {
    return Error{"value_dtype", "value_dtype must be float32 or bfloat16, got code " +
                                    std::to_string(static_cast<int>(value_dtype))};
  }
  if (!KnownDType(output_dtype)) {
    return Error{"output_dtype", "output_dtype must be float32 or bfloat16, got code " +
                                     std::to_string(static_cast<int>(output_dtype))};
  }
  LookupProblem problem;
  problem.topk = topk;
  problem.heads = heads;
  problem.dim = dim;
  problem.value_dtype = value_dtype;
  problem.output_dtype = output_dtype;
  return problem;
}

Result<std::monostate> ValidateLookupPayload(const LookupProblem& problem, uint64_t rows,
                                             uint64_t payload_bytes) {
  if (rows < 1) return Error{"rows", "rows must be at least 1, got " + std::to_string(rows)};
  if (rows % problem.heads != 0) {
    return Error{"rows", "rows must be a multiple of heads = " + std::to_string(problem.heads) +
                             ", got " + std::to_string(rows)};
  }
  return ValidatePayload(problem.topk, rows, payload_bytes);
}

}  // namespace pk
