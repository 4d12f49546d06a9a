// The launcher of the CUDA memory lookup (../shared/SPEC.md, "The memory lookup contract") over
// device memory and a stream: what an executor calls after the top-k (launch.h) has written the
// batch's slots on the device, so that the slots never leave it.
//
// LaunchLookup only enqueues work: it allocates nothing, copies nothing and never synchronizes.
// Two kernels: the weights (a warp per score row, weights.h's functions, the in-order sum Z by
// one lane), then the weighted sum, each column one fma chain in the contract's order: for
// large batches a block per output and column tile streams the value rows (each thread a few
// columns read with 16-byte loads where rows allow, several pairs' loads in flight); for small
// ones (a grid under 4 blocks a multiprocessor) a block per output and 32 columns first loads a
// chunk of its value-row pieces into shared memory with every load in flight at once, then a
// warp runs the 32 chains from there. The same bits as the CPU backend, either way
// (PK_LOOKUP_SUM_KERNEL=streaming|staged forces one, for tests).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/lookup/lookup.h"

namespace pk::cuda {

// Enqueues the lookup of `rows` score rows (a multiple of problem.heads) on `stream` (of the
// current device). All pointers are device memory:
//   device_values: the table (slots x dim of problem.value_dtype; dim and dtype as the problem's);
//   scores:     rows * topk.row_width() elements of topk.dtype, aligned to the element size;
//   slots:      rows * kk, as the top-k wrote them (ascending per row, each < device_values.slots);
//   weights:    room for rows * kk float32;   row_valid: room for rows bytes;
//   outputs:    room for (rows / heads) * problem.output_row_bytes(), aligned to its element size.
// rows == 0 enqueues nothing. Returns cudaSuccess or the error of a launch itself.
cudaError_t LaunchLookup(const LookupProblem& problem, const ValuesView& device_values,
                         const std::byte* scores, const uint32_t* slots, size_t rows,
                         float* weights, uint8_t* row_valid, std::byte* outputs,
                         cudaStream_t stream);

// The two halves of LaunchLookup, for benchmarks: the weights alone, and the weighted sum alone
// of `outputs` outputs from given slots and weights (outputs * heads rows of kk each).
cudaError_t LaunchLookupWeights(const Problem& topk, const std::byte* scores, const uint32_t* slots,
                                size_t rows, float* weights, uint8_t* row_valid,
                                cudaStream_t stream);
cudaError_t LaunchWeightedSum(const LookupProblem& problem, const ValuesView& device_values,
                              const uint32_t* slots, const float* weights, size_t outputs,
                              std::byte* out, cudaStream_t stream);

}  // namespace pk::cuda
