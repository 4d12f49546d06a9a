// The memory lookup problem (../shared/SPEC.md, "The memory lookup contract"): a product-key
// top-k shape plus the heads that make one output, the values table's width and the element
// types of the table and of the outputs; the checks of a shape and of a request's payload
// against it; and the borrowed view of a values table that every backend reads.
//
// Everything in kernels/lookup takes a validated `LookupProblem`; nothing downstream re-checks.
// Standard library only (GPU hosts build it with a compiler and the CUDA toolkit alone).
#pragma once

#include <cstddef>
#include <cstdint>
#include <variant>

#include "kernels/problem.h"

namespace pk {

inline constexpr uint32_t kMaxHeads = 64;

// A validated lookup shape. Construct it only through ValidateLookup().
struct LookupProblem {
  Problem topk;                          // the memory's factor widths, the request's k, the scores' dtype
  uint32_t heads = 1;                    // score rows per output, 1..64
  uint32_t dim = 0;                      // values per slot, >= 1
  DType value_dtype = DType::kFloat32;   // of the table
  DType output_dtype = DType::kFloat32;  // of the outputs

  // Bytes of one output row: dim * ElementBytes(output_dtype).
  size_t output_row_bytes() const { return size_t{dim} * ElementBytes(output_dtype); }
  // Bytes of one values-table row: dim * ElementBytes(value_dtype).
  size_t value_row_bytes() const { return size_t{dim} * ElementBytes(value_dtype); }
  // heads * kk: the (slot, weight) pairs one output sums.
  uint32_t pairs_per_output() const { return heads * topk.kk(); }
};

// Checks heads (1..64), dim (>= 1) and the two dtypes; `topk` is already valid. The first
// violated limit is reported, naming field, value and limit ("heads must be in [1, 64], got 65").
Result<LookupProblem> ValidateLookup(const Problem& topk, uint32_t heads, uint32_t dim,
                                     DType value_dtype, DType output_dtype);

// Checks that a request's `rows` score rows fit `problem`: rows >= 1 and a multiple of heads
// (field "rows"), and payload_bytes == rows * topk.row_bytes() (field "scores").
Result<std::monostate> ValidateLookupPayload(const LookupProblem& problem, uint64_t rows,
                                             uint64_t payload_bytes);

// A values table: slots x dim elements of dtype, row-major, little-endian; borrowed (on the host
// for the CPU backend, in device memory for the CUDA one).
struct ValuesView {
  const std::byte* data = nullptr;
  uint64_t slots = 0;
  uint32_t dim = 0;
  DType dtype = DType::kFloat32;
};

}  // namespace pk
